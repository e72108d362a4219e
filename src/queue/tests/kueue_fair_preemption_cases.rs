//! Kueue's `pkg/scheduler/preemption/preemption_fair_test.go` `TestFairPreemptions` and
//! `TestFairPreemptionSkipsUnsatisfiableTournament` (its outcome; Kueue's log counts are not
//! ported): the admitted workloads, the incoming workload's cpu in Preempt mode, and the victims
//! with their Preempted reason, run against `fair_targets` as Kueue runs them against
//! `GetTargets` with fair sharing on. Each `name` is Kueue's case name. cpu in milli-CPU.

use std::collections::{BTreeMap, BTreeSet};

use super::amount::{Amount, FlavorResource, FrAmounts};
use super::fair_preemption::fair_targets;
use super::model::*;
use super::preemption::{Candidate, PreemptedReason, Preemptor};
use super::tree::QuotaTree;

use FairPreemptionStrategy::{LessThanInitialShare, LessThanOrEqualToFinalShare};
use PreemptedReason::{InClusterQueue, InCohortFairSharing, InCohortReclamation};

/// (name, ClusterQueue, priority, flavor, milli-CPU)
type Adm = (&'static str, &'static str, i32, &'static str, i64);

struct Case {
    name: &'static str,
    cqs: Vec<ClusterQueueModel>,
    cohorts: Vec<CohortModel>,
    strategies: Vec<FairPreemptionStrategy>,
    admitted: Vec<Adm>,
    /// The incoming workload's ClusterQueue, priority, flavor and milli-CPU.
    target: &'static str,
    priority: i32,
    flavor: &'static str,
    cpu: i64,
    want: Vec<(&'static str, PreemptedReason)>,
}

fn case(name: &'static str) -> Case {
    Case {
        name,
        cqs: base_cqs(),
        cohorts: vec![],
        strategies: FairSharingConfig::default().strategies,
        admitted: vec![],
        target: "a",
        priority: 0,
        flavor: "default",
        cpu: 1000,
        want: vec![],
    }
}

fn k(n: i64) -> i64 {
    n * 1000
}

/// Unit (1 CPU) workloads `prefix1..=n` in `cq`.
fn units(names: &[&'static str], cq: &'static str) -> Vec<Adm> {
    names.iter().map(|n| (*n, cq, 0, "default", 1000)).collect()
}

fn with_prio(names: &[(&'static str, i32)], cq: &'static str) -> Vec<Adm> {
    names.iter().map(|(n, p)| (*n, cq, *p, "default", 1000)).collect()
}

fn policy(within: WithinClusterQueue, reclaim: ReclaimWithinCohort) -> PreemptionPolicy {
    PreemptionPolicy {
        within_cluster_queue: within,
        reclaim_within_cohort: reclaim,
        borrow_within_cohort: BorrowWithinCohort::default(),
    }
}

/// A ClusterQueue with `cpu` of flavor `default` in `cohort`.
fn cq(name: &str, cohort: Option<&str>, cpu: i64, w: f64, p: PreemptionPolicy) -> ClusterQueueModel {
    let q = ClusterQueueModel::build(name)
        .flavor("default", &[("cpu", cpu)])
        .preemption(p)
        .weight(w);
    match cohort {
        Some(c) => q.cohort(c),
        None => q,
    }
}

fn cohort(name: &str, parent: Option<&str>, cpu: Option<i64>, w: f64) -> CohortModel {
    let mut c = CohortModel::build(name).weight(w);
    if let Some(p) = parent {
        c = c.parent(p);
    }
    if let Some(cpu) = cpu {
        c = c.flavor_limits("default", &[("cpu", cpu, None, None)]);
    }
    c
}

fn any() -> PreemptionPolicy {
    policy(WithinClusterQueue::LowerPriority, ReclaimWithinCohort::Any)
}

fn reclaim_any() -> PreemptionPolicy {
    policy(WithinClusterQueue::Never, ReclaimWithinCohort::Any)
}

fn none() -> PreemptionPolicy {
    PreemptionPolicy::default()
}

/// Kueue's `baseCQs`: a, b, c with 3 CPU each (borrowWithinCohort below -3 has no effect under
/// fair sharing), and `preemptible` with none.
fn base_cqs() -> Vec<ClusterQueueModel> {
    let mut p = any();
    p.borrow_within_cohort = BorrowWithinCohort {
        policy: BorrowWithinCohortPolicy::LowerPriority,
        max_priority_threshold: Some(-3),
    };
    let mut v: Vec<ClusterQueueModel> = ["a", "b", "c"]
        .iter()
        .map(|n| cq(n, Some("all"), k(3), 1.0, p))
        .collect();
    v.push(cq("preemptible", Some("all"), 0, 1.0, none()));
    v
}

fn sized(v: &[(&'static str, &'static str, i64)]) -> Vec<Adm> {
    v.iter().map(|(n, q, c)| (*n, *q, 0, "default", *c)).collect()
}

fn cases() -> Vec<Case> {
    let a3 = units(&["a1", "a2", "a3"], "a");
    let b5 = units(&["b1", "b2", "b3", "b4", "b5"], "b");
    let b6 = units(&["b1", "b2", "b3", "b4", "b5", "b6"], "b");
    let cat = |v: &[&Vec<Adm>]| v.iter().flat_map(|x| x.iter().cloned()).collect::<Vec<_>>();
    let weighted3 = |wa: f64, wb: f64, with_c: bool| {
        let mut v = vec![
            cq("a", Some("all"), k(3), wa, any()),
            cq("b", Some("all"), k(3), wb, any()),
        ];
        if with_c {
            v.push(cq("c", Some("all"), k(3), 1.0, any()));
        }
        v
    };
    let hierarchy_cqs = vec![
        cq("a", Some("LEFT"), k(1), 2.0, reclaim_any()),
        cq("b", Some("LEFT"), k(1), 1.0, none()),
        cq("c", Some("ROOT"), k(1), 1.0, none()),
        cq("d", Some("RIGHT"), k(1), 1.0, none()),
        cq("e", Some("RIGHT"), k(1), 0.99, none()),
    ];
    let five = |q: &'static str, names: [&'static str; 5]| -> Vec<Adm> {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| (*n, q, i as i32 + 1, "default", 1000))
            .collect()
    };
    vec![
        Case {
            name: "reclaim nominal from user using the most",
            admitted: cat(&[&a3, &b5, &units(&["c1"], "c")]),
            target: "c",
            want: vec![("b1", InCohortReclamation)],
            ..case("")
        },
        // Attempts to preempt b1, but it's not enough.
        Case {
            name: "can reclaim from queue using less, if taking the latest workload from user using the most isn't enough",
            admitted: sized(&[
                ("a1", "a", k(3)),
                ("a2", "a", k(1)),
                ("b1", "b", k(2)),
                ("b2", "b", k(3)),
            ]),
            target: "c",
            cpu: k(3),
            want: vec![("a1", InCohortReclamation)],
            ..case("")
        },
        Case {
            name: "reclaim borrowable quota from user using the most",
            admitted: cat(&[&a3, &b5, &units(&["c1"], "c")]),
            want: vec![("b1", InCohortFairSharing)],
            ..case("")
        },
        Case {
            name: "preempt one from each CQ borrowing",
            admitted: sized(&[
                ("a1", "a", 500),
                ("a2", "a", 500),
                ("a3", "a", k(3)),
                ("b1", "b", 500),
                ("b2", "b", 500),
                ("b3", "b", k(3)),
            ]),
            target: "c",
            cpu: k(2),
            want: vec![("a1", InCohortReclamation), ("b1", InCohortReclamation)],
            ..case("")
        },
        Case {
            name: "can't preempt when everyone under nominal",
            admitted: cat(&[
                &a3,
                &units(&["b1", "b2", "b3"], "b"),
                &units(&["c1", "c2", "c3"], "c"),
            ]),
            target: "c",
            ..case("")
        },
        Case {
            name: "can't preempt when it would switch the imbalance",
            admitted: cat(&[&a3, &b5]),
            cpu: k(2),
            ..case("")
        },
        Case {
            name: "can preempt lower priority workloads from same CQ",
            admitted: cat(&[
                &with_prio(&[("a1_low", -1), ("a2_low", -1), ("a3", 0), ("a4", 0)], "a"),
                &b5,
            ]),
            cpu: k(2),
            want: vec![("a1_low", InClusterQueue), ("a2_low", InClusterQueue)],
            ..case("")
        },
        Case {
            name: "can preempt a combination of same CQ and highest user",
            admitted: cat(&[&with_prio(&[("a_low", -1), ("a2", 0), ("a3", 0)], "a"), &b6]),
            cpu: k(2),
            want: vec![("a_low", InClusterQueue), ("b1", InCohortFairSharing)],
            ..case("")
        },
        Case {
            name: "preempt huge workload if there is no other option, as long as the target CQ gets a lower share",
            admitted: sized(&[("b1", "b", k(9))]),
            cpu: k(2),
            want: vec![("b1", InCohortReclamation)],
            ..case("")
        },
        Case {
            name: "can't preempt huge workload if the incoming is also huge",
            admitted: sized(&[("a1", "a", k(2)), ("b1", "b", k(7))]),
            cpu: k(5),
            ..case("")
        },
        Case {
            name: "can't preempt 2 smaller workloads if the incoming is huge",
            admitted: sized(&[("b1", "b", k(2)), ("b2", "b", k(2)), ("b3", "b", k(3))]),
            cpu: k(6),
            ..case("")
        },
        Case {
            name: "preempt from target and others even if over nominal",
            admitted: vec![
                ("a1_low", "a", -1, "default", k(2)),
                ("a2_low", "a", -1, "default", k(1)),
                ("b1", "b", 0, "default", k(3)),
                ("b2", "b", 0, "default", k(3)),
            ],
            cpu: k(4),
            want: vec![("a1_low", InClusterQueue), ("b1", InCohortFairSharing)],
            ..case("")
        },
        // It would have been possible to preempt b1 under rule S2-b, but S2-a was possible first.
        Case {
            name: "prefer to preempt workloads that don't make the target CQ have the biggest share",
            admitted: sized(&[
                ("b1", "b", k(2)),
                ("b2", "b", k(1)),
                ("b3", "b", k(2)),
                ("c1", "c", k(1)),
            ]),
            cpu: 3500,
            want: vec![("b2", InCohortFairSharing)],
            ..case("")
        },
        Case {
            name: "preempt from different cluster queues if the end result has a smaller max share",
            admitted: sized(&[
                ("b1", "b", k(2)),
                ("b2", "b", 2500),
                ("c1", "c", k(2)),
                ("c2", "c", 2500),
            ]),
            cpu: 3500,
            want: vec![("b1", InCohortFairSharing), ("c1", InCohortFairSharing)],
            ..case("")
        },
        Case {
            name: "scenario above does not flap",
            admitted: sized(&[("a1", "a", 3500), ("b2", "b", 2500), ("c2", "c", 2500)]),
            target: "b",
            cpu: k(2),
            ..case("")
        },
        Case {
            name: "cannot preempt if it would make the candidate CQ go under nominal after preempting one element",
            admitted: sized(&[("b1", "b", k(3)), ("b2", "b", k(3)), ("c1", "c", k(3))]),
            cpu: k(4),
            ..case("")
        },
        Case {
            name: "workloads under priority threshold not capriciously preempted",
            admitted: cat(&[
                &a3,
                &units(&["b1", "b2", "b3"], "b"),
                &with_prio(
                    &[("preemptible1", -3), ("preemptible2", -3), ("preemptible3", -3)],
                    "preemptible",
                ),
            ]),
            cpu: k(2),
            ..case("")
        },
        Case {
            name: "preempt lower priority first, even if big",
            strategies: vec![LessThanInitialShare],
            admitted: vec![
                ("a1", "a", 0, "default", k(3)),
                ("b_low", "b", 0, "default", k(5)),
                ("b_high", "b", 1, "default", k(1)),
            ],
            want: vec![("b_low", InCohortFairSharing)],
            ..case("")
        },
        Case {
            name: "preempt workload that doesn't transfer the imbalance, even if high priority",
            strategies: vec![LessThanOrEqualToFinalShare],
            admitted: vec![
                ("a1", "a", 0, "default", k(3)),
                ("b_low", "b", 0, "default", k(5)),
                ("b_high", "b", 1, "default", k(1)),
            ],
            want: vec![("b_high", InCohortFairSharing)],
            ..case("")
        },
        Case {
            name: "CQ with higher weight can preempt more",
            cqs: weighted3(2.0, 1.0, true),
            admitted: cat(&[&a3, &b6]),
            cpu: k(2),
            want: vec![("b1", InCohortFairSharing), ("b2", InCohortFairSharing)],
            ..case("")
        },
        Case {
            name: "can preempt anything borrowing from CQ with 0 weight",
            cqs: weighted3(1.0, 0.0, true),
            admitted: cat(&[&a3, &b6]),
            cpu: k(3),
            want: vec![
                ("b1", InCohortFairSharing),
                ("b2", InCohortFairSharing),
                ("b3", InCohortFairSharing),
            ],
            ..case("")
        },
        Case {
            name: "can't preempt nominal from CQ with 0 weight",
            cqs: weighted3(1.0, 0.0, false),
            admitted: cat(&[&a3, &units(&["b1", "b2", "b3"], "b")]),
            ..case("")
        },
        Case {
            name: "can't preempt nominal from Cohort with 0 weight",
            cqs: vec![
                cq("left-cq", Some("root"), 0, 1.0, reclaim_any()),
                cq("right-cq", Some("right-cohort"), 0, 0.0, reclaim_any()),
            ],
            cohorts: vec![cohort("right-cohort", Some("root"), Some(k(1)), 0.0)],
            admitted: units(&["right-1"], "right-cq"),
            target: "left-cq",
            ..case("")
        },
        Case {
            name: "can preempt within cluster queue when no cohort",
            cqs: vec![cq(
                "a",
                None,
                k(1),
                1.0,
                policy(WithinClusterQueue::LowerPriority, ReclaimWithinCohort::Never),
            )],
            admitted: units(&["a1"], "a"),
            priority: 1000,
            want: vec![("a1", InClusterQueue)],
            ..case("")
        },
        // ROOT(5) over LEFT(5: a, b), c(1), RIGHT(5: d, e); a and LEFT weigh 2, e 0.99.
        Case {
            name: "hierarchical preemption",
            cqs: hierarchy_cqs,
            cohorts: vec![
                cohort("ROOT", None, Some(k(5)), 1.0),
                cohort("LEFT", Some("ROOT"), Some(k(5)), 2.0),
                cohort("RIGHT", Some("ROOT"), Some(k(5)), 1.0),
            ],
            admitted: cat(&[
                &five("b", ["b1", "b2", "b3", "b4", "b5"]),
                &five("c", ["c1", "c2", "c3", "c4", "c5"]),
                &five("d", ["d1", "d2", "d3", "d4", "d5"]),
                &five("e", ["e1", "e2", "e3", "e4", "e5"]),
            ]),
            cpu: k(5),
            want: vec![
                ("b1", InCohortFairSharing),
                ("b2", InCohortFairSharing),
                ("c1", InCohortFairSharing),
                ("c2", InCohortFairSharing),
                ("e1", InCohortFairSharing),
            ],
            ..case("")
        },
        // b borrows but its cohort RIGHT does not: b is protected.
        Case {
            name: "borrowing cq in non-borrowing cohort is protected",
            cqs: vec![
                cq("a", Some("ROOT"), k(5), 10.0, any()),
                ClusterQueueModel::build("b").cohort("RIGHT").weight(0.1),
            ],
            cohorts: vec![
                cohort("ROOT", None, None, 1.0),
                cohort("RIGHT", Some("ROOT"), Some(k(1)), 0.1),
            ],
            admitted: cat(&[
                &with_prio(&[("a1", -1), ("a2", -1), ("a3", -1)], "a"),
                &with_prio(&[("b1", -1)], "b"),
            ]),
            cpu: k(5),
            want: vec![
                ("a1", InClusterQueue),
                ("a2", InClusterQueue),
                ("a3", InClusterQueue),
            ],
            ..case("")
        },
        Case {
            name: "forced to preempt within clusterqueue because borrowing workload too important",
            cqs: vec![
                cq(
                    "a",
                    Some("ROOT"),
                    k(5),
                    10.0,
                    policy(
                        WithinClusterQueue::LowerPriority,
                        ReclaimWithinCohort::LowerPriority,
                    ),
                ),
                ClusterQueueModel::build("b").cohort("RIGHT").weight(0.1),
            ],
            cohorts: vec![
                cohort("ROOT", None, None, 1.0),
                cohort("RIGHT", Some("ROOT"), Some(k(3)), 0.1),
            ],
            admitted: cat(&[
                &with_prio(&[("a1", -1), ("a2", -1), ("a3", -1)], "a"),
                &vec![("b1", "b", 100, "default", k(4))],
            ]),
            cpu: k(4),
            want: vec![
                ("a1", InClusterQueue),
                ("a2", InClusterQueue),
                ("a3", InClusterQueue),
            ],
            ..case("")
        },
        // a under A/AA/AAA wants, b under B/BB/BBB uses, CCCC provides; A weighs more than B.
        Case {
            name: "deep preemption",
            cqs: vec![
                cq("a", Some("AAA"), 0, 1.0, reclaim_any()),
                cq("b", Some("BBB"), 0, 1.0, none()),
            ],
            cohorts: vec![
                cohort("ROOT", None, None, 1.0),
                cohort("A", Some("ROOT"), None, 1.01),
                cohort("AA", Some("A"), None, 1.0),
                cohort("AAA", Some("AA"), None, 1.0),
                cohort("B", Some("ROOT"), None, 0.99),
                cohort("BB", Some("B"), None, 1.0),
                cohort("BBB", Some("BB"), None, 1.0),
                cohort("C", Some("ROOT"), None, 1.0),
                cohort("CC", Some("C"), None, 1.0),
                cohort("CCC", Some("CC"), None, 1.0),
                cohort("CCCC", Some("CCC"), Some(k(1)), 1.0),
            ],
            admitted: units(&["b1"], "b"),
            want: vec![("b1", InCohortFairSharing)],
            ..case("")
        },
        Case {
            name: "cq with zero weight can reclaim nominal quota",
            cqs: vec![
                cq("a", Some("ROOT"), k(1), 0.0, reclaim_any()),
                cq("b", Some("ROOT"), 0, 1.0, none()),
            ],
            admitted: units(&["b1"], "b"),
            want: vec![("b1", InCohortReclamation)],
            ..case("")
        },
        Case {
            name: "cohort with zero weight can reclaim nominal quota",
            cqs: vec![
                cq("a", Some("A"), 0, 0.0, reclaim_any()),
                cq("b", Some("ROOT"), 0, 1.0, none()),
            ],
            cohorts: vec![cohort("A", Some("ROOT"), Some(k(1)), 0.0)],
            admitted: units(&["b1"], "b"),
            want: vec![("b1", InCohortFairSharing)],
            ..case("")
        },
        // a: 3 premium, 0 cheap; b: 0 premium, 6 cheap. a uses 2 premium + 5 cheap (high share),
        // b borrows 1 premium; a asking 1 premium stays within nominal, so it may reclaim.
        Case {
            name: "nominal first: workload fitting within nominal can preempt despite high aggregate DRS",
            cqs: vec![
                ClusterQueueModel::build("a")
                    .cohort("all")
                    .flavor("premium", &[("cpu", k(3))])
                    .flavor("cheap", &[("cpu", 0)])
                    .preemption(reclaim_any()),
                ClusterQueueModel::build("b")
                    .cohort("all")
                    .flavor("premium", &[("cpu", 0)])
                    .flavor("cheap", &[("cpu", k(6))]),
            ],
            admitted: vec![
                ("a_prem1", "a", 0, "premium", 1000),
                ("a_prem2", "a", 0, "premium", 1000),
                ("a_cheap1", "a", 0, "cheap", 1000),
                ("a_cheap2", "a", 0, "cheap", 1000),
                ("a_cheap3", "a", 0, "cheap", 1000),
                ("a_cheap4", "a", 0, "cheap", 1000),
                ("a_cheap5", "a", 0, "cheap", 1000),
                ("b_prem1", "b", 0, "premium", 1000),
            ],
            flavor: "premium",
            want: vec![("b_prem1", InCohortReclamation)],
            ..case("")
        },
        Case {
            name: "zero weight borrowing preemptor cannot preempt from a borrowing CQ with a non-zero weight",
            cqs: vec![
                cq("a", Some("all"), k(1), 0.0, reclaim_any()),
                cq("b", Some("all"), k(1), 1.0, none()),
            ],
            admitted: cat(&[&units(&["a1"], "a"), &units(&["b1", "b2"], "b")]),
            ..case("")
        },
        Case {
            name: "zero weight borrowing preemptor can preempt from a borrowing CQ which also has zero weight",
            cqs: vec![
                cq("a", Some("all"), k(1), 0.0, reclaim_any()),
                cq("b", Some("all"), 0, 0.0, none()),
            ],
            cohorts: vec![cohort("all", None, Some(k(3)), 1.0)],
            admitted: units(&["b1", "b2", "b3"], "b"),
            cpu: k(2),
            want: vec![("b1", InCohortFairSharing)],
            ..case("")
        },
        Case {
            name: "non-zero weight borrowing preemptor preempts from a borrowing CQ",
            cqs: vec![
                cq("a", Some("all"), k(1), 1.0, reclaim_any()),
                cq("b", Some("all"), 0, 1.0, none()),
            ],
            cohorts: vec![cohort("all", None, Some(k(3)), 1.0)],
            admitted: units(&["b1", "b2", "b3"], "b"),
            cpu: k(2),
            want: vec![("b1", InCohortFairSharing)],
            ..case("")
        },
        // ROOT over A (weight 0, 1 CPU: p, y) and x. A borrows with weight 0, so x's candidates
        // fail the first strategy and must still reach the second.
        Case {
            name: "candidates skipped by the first strategy are still available to the second strategy",
            cqs: vec![
                cq("p", Some("A"), k(2), 1.0, reclaim_any()),
                cq("y", Some("A"), k(2), 1.0, none()),
                cq("x", Some("ROOT"), k(1), 1.0, none()),
            ],
            cohorts: vec![cohort("A", Some("ROOT"), Some(k(1)), 0.0)],
            admitted: cat(&[
                &sized(&[("p1", "p", k(2)), ("y1", "y", k(2)), ("y2", "y", k(2))]),
                &units(&["x1", "x2"], "x"),
            ]),
            target: "p",
            want: vec![("y1", InCohortFairSharing), ("x1", InCohortFairSharing)],
            ..case("")
        },
        // TestFairPreemptionSkipsUnsatisfiableTournament, both weights: nothing is preempted.
        Case {
            name: "zero weight preemptor: share is +Inf and the tournament is skipped",
            cqs: vec![
                cq("a", Some("all"), k(1), 0.0, reclaim_any()),
                cq("b", Some("all"), k(1), 1.0, none()),
            ],
            admitted: cat(&[&units(&["a1"], "a"), &units(&["b1", "b2"], "b")]),
            ..case("")
        },
        Case {
            name: "non-zero weight preemptor: share is finite so the tournament runs",
            cqs: vec![
                cq("a", Some("all"), k(1), 1.0, reclaim_any()),
                cq("b", Some("all"), k(1), 1.0, none()),
            ],
            admitted: cat(&[&units(&["a1"], "a"), &units(&["b1", "b2"], "b")]),
            ..case("")
        },
    ]
}

fn run(c: &Case) -> Result<(), String> {
    let cohorts: BTreeMap<String, CohortModel> =
        c.cohorts.iter().map(|x| (x.name.clone(), x.clone())).collect();
    let mut tree = QuotaTree::build(&c.cqs, &cohorts);
    let idx = |t: &QuotaTree, n: &str| t.cq(n).ok_or_else(|| format!("no ClusterQueue {n}"));
    let keys: Vec<WorkloadKey> = c.admitted.iter().map(|a| WorkloadKey::new("", a.0)).collect();
    let usages: Vec<FrAmounts> = c
        .admitted
        .iter()
        .map(|a| [(FlavorResource::new(a.3, "cpu"), Amount(a.4))].into())
        .collect();
    for (a, u) in c.admitted.iter().zip(&usages) {
        let i = idx(&tree, a.1)?;
        tree.add_all(i, u);
    }
    let mut cands = Vec::new();
    for ((a, key), usage) in c.admitted.iter().zip(&keys).zip(&usages) {
        cands.push(Candidate {
            key,
            cq_idx: idx(&tree, a.1)?,
            priority: a.2,
            queue_timestamp: 0,
            admitted_at: 0,
            lq_usage: None,
            floor: None,
            uid: a.0,
            usage,
            evicting: false,
        });
    }
    let target = c.cqs.iter().find(|q| q.name == c.target).ok_or("no target")?;
    let fr = FlavorResource::new(c.flavor, "cpu");
    let usage: FrAmounts = [(fr.clone(), Amount(c.cpu))].into();
    let contested: BTreeSet<FlavorResource> = [fr].into();
    let p = Preemptor {
        cq_idx: idx(&tree, c.target)?,
        cq: target,
        priority: c.priority,
        queue_timestamp: 1,
        usage: &usage,
        contested: &contested,
        tas_fits: None,
    };
    let before: Vec<FrAmounts> = tree.nodes.iter().map(|n| n.usage.clone()).collect();
    let got: BTreeSet<(String, PreemptedReason)> = fair_targets(&mut tree, &p, &cands, &c.strategies)
        .into_iter()
        .map(|t| (t.key.name, t.reason))
        .collect();
    let want: BTreeSet<(String, PreemptedReason)> = c.want.iter().map(|(n, r)| (n.to_string(), *r)).collect();
    if got != want {
        return Err(format!("targets: got {got:?}, want {want:?}"));
    }
    let after: Vec<FrAmounts> = tree.nodes.iter().map(|n| n.usage.clone()).collect();
    // Zero entries may appear where usage went out and came back.
    let nonzero = |v: Vec<FrAmounts>| -> Vec<FrAmounts> {
        v.into_iter()
            .map(|m| m.into_iter().filter(|(_, a)| *a != Amount::ZERO).collect())
            .collect()
    };
    if nonzero(before) != nonzero(after) {
        return Err("the tree was modified".into());
    }
    Ok(())
}

#[test]
fn kueue_fair_preemptions() {
    let cases = cases();
    assert_eq!(cases.len(), 37);
    let failed: Vec<String> = cases
        .iter()
        .filter_map(|c| run(c).err().map(|e| format!("{}: {e}", c.name)))
        .collect();
    assert!(failed.is_empty(), "failed Kueue cases:\n{}", failed.join("\n"));
}
