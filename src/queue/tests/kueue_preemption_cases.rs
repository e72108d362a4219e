//! Kueue's `pkg/scheduler/preemption/preemption_test.go` `TestPreemption`: the admitted workloads,
//! the incoming workload's flavor assignment (which resources are in `Preempt` mode) and the
//! victims with their Preempted reason, run against `find_targets` as Kueue runs them against
//! `GetTargets`. Each `name` is Kueue's case name.
//!
//! Units: plain numbers for every resource (Kueue's `3Gi` of memory is 3 here; only ratios matter).

use std::collections::{BTreeMap, BTreeSet};

use super::amount::{Amount, FlavorResource, FrAmounts};
use super::model::*;
use super::preemption::{Candidate, PreemptedReason, Preemptor};
use super::tree::QuotaTree;

use PreemptedReason::{InClusterQueue, InCohortReclamation};
use ReclaimWithinCohort as Reclaim;
use WithinClusterQueue as Within;

/// An admitted workload: name, ClusterQueue, priority, usage (flavor, resource, amount).
pub(super) struct Adm {
    pub(super) name: &'static str,
    pub(super) cq: &'static str,
    pub(super) priority: i32,
    pub(super) usage: Vec<(&'static str, &'static str, i64)>,
    /// Creation (queue order) and quota-reservation times.
    pub(super) created: i64,
    pub(super) admitted_at: i64,
}

pub(super) fn adm(name: &'static str, cq: &'static str, priority: i32, cpu: i64) -> Adm {
    Adm {
        name,
        cq,
        priority,
        usage: vec![("default", "cpu", cpu)],
        created: 0,
        admitted_at: 0,
    }
}

pub(super) fn adm_with(
    name: &'static str,
    cq: &'static str,
    priority: i32,
    usage: &[(&'static str, &'static str, i64)],
) -> Adm {
    Adm {
        usage: usage.to_vec(),
        ..adm(name, cq, priority, 0)
    }
}

pub(super) struct Case {
    pub(super) name: &'static str,
    /// Kueue's `defaultClusterQueues` unless given.
    pub(super) cqs: Option<Vec<ClusterQueueModel>>,
    pub(super) cohorts: Vec<CohortModel>,
    pub(super) admitted: Vec<Adm>,
    pub(super) target: &'static str,
    pub(super) priority: i32,
    pub(super) created: i64,
    /// The incoming assignment: (flavor, resource, amount, in Preempt mode).
    pub(super) assignment: Vec<(&'static str, &'static str, i64, bool)>,
    pub(super) want: Vec<(&'static str, PreemptedReason)>,
}

pub(super) fn base() -> Case {
    Case {
        name: "",
        cqs: None,
        cohorts: Vec::new(),
        admitted: Vec::new(),
        target: "",
        priority: 0,
        created: 0,
        assignment: Vec::new(),
        want: Vec::new(),
    }
}

/// The usual assignment: `cpu` of flavor `default`, in Preempt mode.
pub(super) fn cpu(n: i64) -> Vec<(&'static str, &'static str, i64, bool)> {
    vec![("default", "cpu", n, true)]
}

pub(super) fn p(within: Within, reclaim: Reclaim, borrow_threshold: Option<i32>) -> PreemptionPolicy {
    PreemptionPolicy {
        within_cluster_queue: within,
        reclaim_within_cohort: reclaim,
        borrow_within_cohort: match borrow_threshold {
            Some(t) => BorrowWithinCohort {
                policy: BorrowWithinCohortPolicy::LowerPriority,
                max_priority_threshold: Some(t),
            },
            None => BorrowWithinCohort::default(),
        },
    }
}

/// (resource, nominal, borrowingLimit, lendingLimit) in flavor `default`.
pub(super) type Q = (&'static str, i64, Option<i64>, Option<i64>);

pub(super) fn cq(
    name: &str,
    cohort: Option<&str>,
    quotas: &[Q],
    policy: PreemptionPolicy,
) -> ClusterQueueModel {
    let q = ClusterQueueModel::build(name)
        .flavor_limits("default", quotas)
        .preemption(policy);
    match cohort {
        Some(c) => q.cohort(c),
        None => q,
    }
}

/// Kueue's `defaultClusterQueues` of `TestPreemption`.
pub(super) fn default_cqs() -> Vec<ClusterQueueModel> {
    let lower = p(Within::LowerPriority, Reclaim::LowerPriority, None);
    let reclaim_any = p(Within::Never, Reclaim::Any, None);
    let limits6 = [("cpu", 6, Some(6), None), ("memory", 3, Some(3), None)];
    let plain6 = [("cpu", 6, None, None), ("memory", 3, None, None)];
    let shared_never = p(Within::Never, Reclaim::LowerPriority, Some(0));
    vec![
        ClusterQueueModel::build("standalone")
            .flavor("default", &[("cpu", 6)])
            .flavor("alpha", &[("memory", 3)])
            .flavor("beta", &[("memory", 3)])
            .within(Within::LowerPriority),
        cq("c1", Some("cohort"), &limits6, lower),
        cq("c2", Some("cohort"), &limits6, reclaim_any),
        cq("d1", Some("cohort-no-limits"), &plain6, lower),
        cq("d2", Some("cohort-no-limits"), &plain6, reclaim_any),
        cq(
            "l1",
            Some("legion"),
            &[("cpu", 6, Some(12), None), ("memory", 3, Some(6), None)],
            lower,
        ),
        cq(
            "preventStarvation",
            None,
            &[("cpu", 6, None, None)],
            p(Within::LowerOrNewerEqualPriority, Reclaim::Never, None),
        ),
        cq(
            "a_standard",
            Some("with_shared_cq"),
            &[("cpu", 1, Some(12), None)],
            shared_never,
        ),
        cq(
            "b_standard",
            Some("with_shared_cq"),
            &[("cpu", 1, Some(12), None)],
            p(Within::LowerPriority, Reclaim::Any, Some(0)),
        ),
        cq(
            "a_best_effort",
            Some("with_shared_cq"),
            &[("cpu", 1, Some(12), None)],
            shared_never,
        ),
        cq(
            "b_best_effort",
            Some("with_shared_cq"),
            &[("cpu", 0, Some(13), None)],
            shared_never,
        ),
        cq(
            "shared",
            Some("with_shared_cq"),
            &[("cpu", 10, None, None)],
            PreemptionPolicy::default(),
        ),
        cq("lend1", Some("cohort-lend"), &[("cpu", 6, None, Some(4))], lower),
        cq("lend2", Some("cohort-lend"), &[("cpu", 6, None, Some(2))], lower),
        cq(
            "a",
            Some("cohort-three"),
            &[("cpu", 2, None, None), ("memory", 2, None, None)],
            p(Within::LowerPriority, Reclaim::Any, None),
        ),
        cq(
            "b",
            Some("cohort-three"),
            &[("cpu", 2, None, None), ("memory", 2, None, None)],
            PreemptionPolicy::default(),
        ),
        cq(
            "c",
            Some("cohort-three"),
            &[("cpu", 2, None, None), ("memory", 2, None, None)],
            PreemptionPolicy::default(),
        ),
    ]
}

pub(super) fn run(c: Case) {
    let cqs = c.cqs.clone().unwrap_or_else(default_cqs);
    let cohorts: BTreeMap<String, CohortModel> =
        c.cohorts.iter().map(|co| (co.name.clone(), co.clone())).collect();
    let mut tree = QuotaTree::build(&cqs, &cohorts);
    let idx = |tree: &QuotaTree, name: &str| {
        tree.cq(name)
            .unwrap_or_else(|| panic!("{}: no ClusterQueue {name}", c.name))
    };
    let amounts = |u: &[(&str, &str, i64)]| -> FrAmounts {
        u.iter()
            .map(|(f, r, v)| (FlavorResource::new(*f, *r), Amount(*v)))
            .collect()
    };
    let keys: Vec<WorkloadKey> = c.admitted.iter().map(|a| WorkloadKey::new("", a.name)).collect();
    let usages: Vec<FrAmounts> = c.admitted.iter().map(|a| amounts(&a.usage)).collect();
    for (a, u) in c.admitted.iter().zip(&usages) {
        let i = idx(&tree, a.cq);
        tree.add_all(i, u);
    }
    let cands: Vec<Candidate<'_>> = c
        .admitted
        .iter()
        .zip(&keys)
        .zip(&usages)
        .map(|((a, key), usage)| Candidate {
            key,
            cq_idx: idx(&tree, a.cq),
            priority: a.priority,
            queue_timestamp: a.created,
            admitted_at: a.admitted_at,
            uid: a.name,
            usage,
            evicting: false,
            lq_usage: None,
            floor: None,
        })
        .collect();
    let target = cqs
        .iter()
        .find(|q| q.name == c.target)
        .unwrap_or_else(|| panic!("{}: no target {}", c.name, c.target));
    let usage: FrAmounts = c
        .assignment
        .iter()
        .map(|(f, r, v, _)| (FlavorResource::new(*f, *r), Amount(*v)))
        .collect();
    let contested: BTreeSet<FlavorResource> = c
        .assignment
        .iter()
        .filter(|a| a.3)
        .map(|(f, r, _, _)| FlavorResource::new(*f, *r))
        .collect();
    let preemptor = Preemptor {
        cq_idx: idx(&tree, c.target),
        cq: target,
        priority: c.priority,
        queue_timestamp: c.created,
        usage: &usage,
        contested: &contested,
        tas_fits: None,
    };
    super::preemption_tests::assert_targets(&mut tree, &preemptor, &cands, &c.want, c.name);
}

#[test]
fn preemption_within_cluster_queue_cases() {
    let standalone = |name, admitted, priority, req, want| {
        run(Case {
            name,
            admitted,
            target: "standalone",
            priority,
            assignment: cpu(req),
            want,
            ..base()
        })
    };
    let three = |low, mid, high| {
        vec![
            adm("low", "standalone", -1, low),
            adm("mid", "standalone", 0, mid),
            adm("high", "standalone", 1, high),
        ]
    };
    standalone(
        "preempt lowest priority",
        three(2, 2, 2),
        1,
        2,
        vec![("low", InClusterQueue)],
    );
    standalone(
        "preempt multiple",
        three(2, 2, 2),
        1,
        3,
        vec![("low", InClusterQueue), ("mid", InClusterQueue)],
    );
    let two = || vec![adm("low", "standalone", -1, 3), adm("mid", "standalone", 0, 3)];
    standalone("no preemption for low priority", two(), -1, 1, vec![]);
    standalone("not enough low priority workloads", two(), 0, 4, vec![]);
    standalone(
        "some free quota, preempt low priority",
        three(1, 1, 3),
        1,
        2,
        vec![("low", InClusterQueue)],
    );
    standalone(
        "minimal set excludes low priority",
        three(1, 2, 3),
        1,
        2,
        vec![("mid", InClusterQueue)],
    );
    run(Case {
        name: "only preempt workloads using the chosen flavor",
        admitted: vec![
            adm_with("low", "standalone", -1, &[("alpha", "memory", 2)]),
            adm_with("mid", "standalone", 0, &[("beta", "memory", 1)]),
            adm_with("high", "standalone", 1, &[("beta", "memory", 1)]),
        ],
        target: "standalone",
        priority: 1,
        assignment: vec![("default", "cpu", 1, false), ("beta", "memory", 2, true)],
        want: vec![("mid", InClusterQueue)],
        ..base()
    });
    run(Case {
        name: "each podset preempts a different flavor",
        admitted: vec![
            adm_with("low-alpha", "standalone", -1, &[("alpha", "memory", 2)]),
            adm_with("low-beta", "standalone", -1, &[("beta", "memory", 2)]),
        ],
        target: "standalone",
        // launcher: 1 x 2 in alpha; workers: 2 x 1 in beta.
        assignment: vec![("alpha", "memory", 2, true), ("beta", "memory", 2, true)],
        want: vec![("low-alpha", InClusterQueue), ("low-beta", InClusterQueue)],
        ..base()
    });
    run(Case {
        name: "preempt newer workloads with the same priority",
        admitted: vec![
            adm("wl1", "preventStarvation", 2, 2),
            Adm {
                admitted_at: 1,
                ..adm("wl2", "preventStarvation", 1, 2)
            },
            adm("wl3", "preventStarvation", 1, 2),
        ],
        target: "preventStarvation",
        priority: 1,
        created: -15,
        assignment: cpu(2),
        want: vec![("wl2", InClusterQueue)],
        ..base()
    });
    run(Case {
        name: "can't preempt workloads in ClusterQueue for withinClusterQueue=Never",
        admitted: vec![adm("c2-low", "c2", -1, 3)],
        target: "c2",
        priority: 1,
        assignment: cpu(4),
        ..base()
    });
}

#[test]
fn preemption_in_cohort_cases() {
    let c1 = |name, admitted, priority, assignment, want| {
        run(Case {
            name,
            admitted,
            target: "c1",
            priority,
            assignment,
            want,
            ..base()
        })
    };
    c1(
        "reclaim quota from borrower",
        vec![
            adm("c1-low", "c1", -1, 3),
            adm("c2-mid", "c2", 0, 3),
            adm("c2-high", "c2", 1, 6),
        ],
        1,
        cpu(3),
        vec![("c2-mid", InCohortReclamation)],
    );
    c1(
        "reclaim quota if workload requests 0 resources for a resource at nominal quota",
        vec![
            adm_with(
                "c1-low",
                "c1",
                -1,
                &[("default", "cpu", 3), ("default", "memory", 3)],
            ),
            adm("c2-mid", "c2", 0, 3),
            adm("c2-high", "c2", 1, 6),
        ],
        1,
        vec![("default", "cpu", 3, true), ("default", "memory", 0, false)],
        vec![("c2-mid", InCohortReclamation)],
    );
    c1(
        "no workloads borrowing",
        vec![adm("c1-high", "c1", 1, 4), adm("c2-low-1", "c2", -1, 4)],
        1,
        cpu(4),
        vec![],
    );
    c1(
        "not enough workloads borrowing",
        vec![
            adm("c1-high", "c1", 1, 4),
            adm("c2-low-1", "c2", -1, 4),
            adm("c2-low-2", "c2", -1, 4),
        ],
        1,
        cpu(4),
        vec![],
    );
    c1(
        "preempting locally and borrowing other resources in cohort, without cohort candidates",
        vec![
            adm("c1-low", "c1", -1, 4),
            adm("c2-low-1", "c2", -1, 4),
            adm("c2-high-2", "c2", 1, 4),
        ],
        1,
        vec![("default", "cpu", 4, true), ("default", "memory", 5, true)],
        vec![("c1-low", InClusterQueue)],
    );
    c1(
        "preempting locally and borrowing same resource in cohort",
        vec![
            adm("c1-med", "c1", 0, 4),
            adm("c1-low", "c1", -1, 4),
            adm("c2-low-1", "c2", -1, 4),
        ],
        1,
        cpu(4),
        vec![("c1-low", InClusterQueue)],
    );
    run(Case {
        name: "preempting locally and borrowing same resource in cohort; no borrowing limit in the cohort",
        admitted: vec![
            adm("d1-med", "d1", 0, 4),
            adm("d1-low", "d1", -1, 4),
            adm("d2-low-1", "d2", -1, 4),
        ],
        target: "d1",
        priority: 1,
        assignment: cpu(4),
        want: vec![("d1-low", InClusterQueue)],
        ..base()
    });
    c1(
        "preempting locally and borrowing other resources in cohort, with cohort candidates",
        vec![
            adm("c1-med", "c1", 0, 4),
            adm("c2-low-1", "c2", -1, 5),
            adm("c2-low-2", "c2", -1, 1),
            adm("c2-low-3", "c2", -1, 1),
        ],
        1,
        vec![("default", "cpu", 2, true), ("default", "memory", 5, true)],
        vec![("c1-med", InClusterQueue)],
    );
    run(Case {
        name: "preempting locally and not borrowing same resource in 1-queue cohort",
        admitted: vec![adm("l1-med", "l1", 0, 4), adm("l1-low", "l1", -1, 2)],
        target: "l1",
        priority: 1,
        assignment: cpu(4),
        want: vec![("l1-med", InClusterQueue)],
        ..base()
    });
    c1(
        "do not reclaim borrowed quota from same priority for withinCohort=ReclaimFromLowerPriority",
        vec![
            adm("c1", "c1", 0, 2),
            adm("c2-1", "c2", 0, 4),
            adm("c2-2", "c2", 0, 4),
        ],
        0,
        cpu(4),
        vec![],
    );
    run(Case {
        name: "reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny",
        admitted: vec![
            adm("c1-1", "c1", 0, 4),
            adm("c1-2", "c1", 1, 4),
            adm("c2", "c2", 0, 2),
        ],
        target: "c2",
        assignment: cpu(4),
        want: vec![("c1-1", InCohortReclamation)],
        ..base()
    });
    c1(
        "preempt from all ClusterQueues in cohort",
        vec![
            adm("c1-low", "c1", -1, 3),
            adm("c1-mid", "c1", 0, 2),
            adm("c2-low", "c2", -1, 3),
            adm("c2-mid", "c2", 0, 4),
        ],
        0,
        cpu(4),
        vec![("c1-low", InClusterQueue), ("c2-low", InCohortReclamation)],
    );
    let lend1 = |name, admitted, priority, req, want| {
        run(Case {
            name,
            admitted,
            target: "lend1",
            priority,
            assignment: cpu(req),
            want,
            ..base()
        })
    };
    lend1(
        "reclaim quota from lender",
        vec![
            adm("lend1-low", "lend1", -1, 3),
            adm("lend2-mid", "lend2", 0, 3),
            adm("lend2-high", "lend2", 1, 4),
        ],
        1,
        3,
        vec![("lend2-mid", InCohortReclamation)],
    );
    lend1(
        "preempt from all ClusterQueues in cohort-lend",
        vec![
            adm("lend1-low", "lend1", -1, 3),
            adm("lend1-mid", "lend1", 0, 2),
            adm("lend2-low", "lend2", -1, 3),
            adm("lend2-mid", "lend2", 0, 4),
        ],
        0,
        4,
        vec![("lend1-low", InClusterQueue), ("lend2-low", InCohortReclamation)],
    );
    lend1(
        "cannot preempt from other ClusterQueues if exceeds requestable quota including lending limit",
        vec![adm("lend2-low", "lend2", -1, 10)],
        0,
        9,
        vec![],
    );
    run(Case {
        name: "long range preemption",
        cqs: Some(vec![
            cq(
                "cq-left",
                Some("cohort-left"),
                &[("cpu", 10, None, None)],
                p(Within::Never, Reclaim::Any, None),
            ),
            cq(
                "cq-right",
                Some("cohort-right"),
                &[("cpu", 0, None, None)],
                PreemptionPolicy::default(),
            ),
        ]),
        cohorts: vec![
            CohortModel::build("cohort-left").parent("root"),
            CohortModel::build("cohort-right").parent("root"),
        ],
        admitted: vec![adm("to-be-preempted", "cq-right", 0, 5)],
        target: "cq-left",
        assignment: cpu(8),
        want: vec![("to-be-preempted", InCohortReclamation)],
        ..base()
    });
}
