//! Classical preemption over cohort trees, the cases of Kueue's
//! `pkg/scheduler/preemption/preemption_hierarchical_test.go` (`TestHierarchicalPreemptions`),
//! run against `find_targets` directly as Kueue runs them against `GetTargets`: the victims and
//! the Preempted reason of each. Quotas Kueue leaves empty are 0 here; amounts are plain units.

use std::collections::{BTreeMap, BTreeSet};

use super::amount::{Amount, FlavorResource, FrAmounts};
use super::model::{
    BorrowWithinCohort, BorrowWithinCohortPolicy, ClusterQueueModel, CohortModel, PreemptionPolicy,
    ReclaimWithinCohort, WithinClusterQueue, WorkloadKey,
};
use super::preemption::{Candidate, PreemptedReason, Preemptor, find_targets};
use super::tree::QuotaTree;

use PreemptedReason::{InClusterQueue, InCohortReclaimWhileBorrowing, InCohortReclamation};

struct Admitted {
    name: &'static str,
    cq: &'static str,
    priority: i32,
    usage: Vec<(&'static str, i64)>,
    evicted: bool,
}

fn adm(name: &'static str, cq: &'static str, priority: i32, cpu: i64) -> Admitted {
    Admitted {
        name,
        cq,
        priority,
        usage: vec![("cpu", cpu)],
        evicted: false,
    }
}

struct Case {
    name: &'static str,
    cohorts: Vec<CohortModel>,
    cqs: Vec<ClusterQueueModel>,
    admitted: Vec<Admitted>,
    /// (ClusterQueue, priority, requests)
    incoming: (&'static str, i32, &'static [(&'static str, i64)]),
    want: Vec<(&'static str, PreemptedReason)>,
}

fn fr_amounts(usage: &[(&str, i64)]) -> FrAmounts {
    usage
        .iter()
        .map(|(r, v)| (FlavorResource::new("default", *r), Amount(*v)))
        .collect()
}

fn run(c: Case) {
    let cohorts: BTreeMap<String, CohortModel> =
        c.cohorts.iter().map(|co| (co.name.clone(), co.clone())).collect();
    let mut tree = QuotaTree::build(&c.cqs, &cohorts);
    let keys: Vec<WorkloadKey> = c
        .admitted
        .iter()
        .map(|a| WorkloadKey::new("ns", a.name))
        .collect();
    let usages: Vec<FrAmounts> = c.admitted.iter().map(|a| fr_amounts(&a.usage)).collect();
    let idx = |tree: &QuotaTree, cq: &str| {
        tree.cq(cq)
            .unwrap_or_else(|| panic!("{}: no ClusterQueue {cq}", c.name))
    };
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
            queue_timestamp: 0,
            admitted_at: 0,
            uid: a.name,
            usage,
            evicting: a.evicted,
            lq_usage: None,
            floor: None,
        })
        .collect();
    let (cq_name, priority, requests) = c.incoming;
    let cq = c
        .cqs
        .iter()
        .find(|q| q.name == cq_name)
        .expect("incoming ClusterQueue");
    let usage = fr_amounts(requests);
    let contested: BTreeSet<FlavorResource> = usage.keys().cloned().collect();
    let p = Preemptor {
        cq_idx: idx(&tree, cq_name),
        cq,
        priority,
        queue_timestamp: 0,
        usage: &usage,
        contested: &contested,
        tas_fits: None,
    };
    assert_targets(&mut tree, &p, &cands, &c.want, c.name);
}

/// `find_targets` chooses exactly `want` (victim and reason, in any order) and leaves the tree's
/// usage as it found it. Shared by the ported Kueue preemption tables.
pub(super) fn assert_targets(
    tree: &mut QuotaTree,
    p: &Preemptor<'_>,
    cands: &[Candidate<'_>],
    want: &[(&str, PreemptedReason)],
    name: &str,
) {
    let before: Vec<FrAmounts> = tree.nodes.iter().map(|n| n.usage.clone()).collect();
    let mut got: Vec<(String, PreemptedReason)> = find_targets(tree, p, cands)
        .into_iter()
        .map(|t| (t.key.name, t.reason))
        .collect();
    got.sort();
    let mut want: Vec<(String, PreemptedReason)> = want.iter().map(|(n, r)| (n.to_string(), *r)).collect();
    want.sort();
    assert_eq!(got, want, "{name}");
    let after: Vec<FrAmounts> = tree.nodes.iter().map(|n| n.usage.clone()).collect();
    assert_eq!(before, after, "{name}: the search must leave the tree as found");
}

fn policy(reclaim: ReclaimWithinCohort, borrow_threshold: Option<i32>) -> PreemptionPolicy {
    PreemptionPolicy {
        within_cluster_queue: WithinClusterQueue::LowerPriority,
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

/// A ClusterQueue with a quota (0 where Kueue gives none), LowerPriority within, reclaim Any.
fn cq(name: &str, cohort: &str, cpu: i64) -> ClusterQueueModel {
    ClusterQueueModel::build(name)
        .cohort(cohort)
        .flavor("default", &[("cpu", cpu)])
        .preemption(policy(ReclaimWithinCohort::Any, None))
}

fn cohort(name: &str, parent: Option<&str>, cpu: i64) -> CohortModel {
    let c = CohortModel::build(name).flavor_limits("default", &[("cpu", cpu, None, None)]);
    match parent {
        Some(p) => c.parent(p),
        None => c,
    }
}

/// r(0) <- c(2) <- q(0); r <- q_borrowing(0).
fn advantage_tree() -> (Vec<CohortModel>, Vec<ClusterQueueModel>) {
    (
        vec![cohort("r", None, 0), cohort("c", Some("r"), 2)],
        vec![cq("q", "c", 0), cq("q_borrowing", "r", 0)],
    )
}

#[test]
fn hierarchical_preemption_cases() {
    let (co, cqs) = advantage_tree();
    run(Case {
        name: "preempt with hierarchical advantage",
        cohorts: co.clone(),
        cqs: cqs.clone(),
        admitted: vec![adm("admitted2", "q_borrowing", 0, 2)],
        incoming: ("q", 0, &[("cpu", 2)]),
        want: vec![("admitted2", InCohortReclamation)],
    });
    run(Case {
        name: "avoid queues within nominal quota",
        cohorts: co.clone(),
        cqs: [cqs.clone(), vec![cq("q_nominal", "r", 2)]].concat(),
        admitted: vec![
            adm("admitted1", "q_nominal", -10, 2),
            adm("admitted2", "q_borrowing", 0, 2),
        ],
        incoming: ("q", 0, &[("cpu", 2)]),
        want: vec![("admitted2", InCohortReclamation)],
    });
    run(Case {
        name: "preempt multiple with hierarchical advantage",
        cohorts: co.clone(),
        cqs: cqs.clone(),
        admitted: vec![
            adm("admitted1", "q_borrowing", 1, 1),
            adm("admitted2", "q_borrowing", 2, 1),
        ],
        incoming: ("q", 0, &[("cpu", 2)]),
        want: vec![
            ("admitted1", InCohortReclamation),
            ("admitted2", InCohortReclamation),
        ],
    });
    run(Case {
        name: "preempt in cohort and own CQ",
        cohorts: vec![cohort("r", None, 0), cohort("c", Some("r"), 3)],
        cqs: vec![
            cq("q", "c", 0).preemption(policy(ReclaimWithinCohort::Any, Some(0))),
            cq("q_same_cohort", "c", 0),
        ],
        admitted: vec![
            adm("admitted_not_preemptible", "q_same_cohort", 1, 1),
            adm("admitted_preemptible", "q_same_cohort", 0, 2),
            adm("admitted_own_queue", "q", -1, 1),
        ],
        incoming: ("q", 1, &[("cpu", 2)]),
        want: vec![
            ("admitted_own_queue", InClusterQueue),
            ("admitted_preemptible", InCohortReclaimWhileBorrowing),
        ],
    });
    run(Case {
        name: "prefer to preempt hierarchical candidate",
        cohorts: co.clone(),
        cqs: cqs.clone(),
        admitted: vec![
            adm("admitted_borrowing", "q_borrowing", 1, 1),
            adm("admitted_same_queue", "q", -2, 1),
        ],
        incoming: ("q", 0, &[("cpu", 1)]),
        want: vec![("admitted_borrowing", InCohortReclamation)],
    });
    run(Case {
        name: "forced to preempt priority candidate",
        cohorts: vec![cohort("r", None, 0), cohort("c", Some("r"), 2)],
        cqs: vec![
            cq("q", "c", 0).preemption(policy(ReclaimWithinCohort::Any, Some(0))),
            cq("q_nominal", "r", 2),
            cq("q_same_cohort", "c", 0),
        ],
        admitted: vec![
            adm("admitted_nominal", "q_nominal", -10, 2),
            adm("admitted_same_cohort", "q_same_cohort", -1, 2),
        ],
        incoming: ("q", 0, &[("cpu", 2)]),
        want: vec![("admitted_same_cohort", InCohortReclaimWhileBorrowing)],
    });
    run(Case {
        name: "incoming workload fits in CQ nominal quota",
        cohorts: vec![cohort("r", None, 0), cohort("c", Some("r"), 2)],
        cqs: vec![
            cq("q", "c", 4),
            cq("q_borrowing", "r", 0),
            cq("q_same_cohort", "c", 0),
        ],
        admitted: vec![
            adm("admitted_borrowing", "q_borrowing", 10, 3),
            adm("admitted_same_cohort", "q_same_cohort", 10, 3),
        ],
        incoming: ("q", 0, &[("cpu", 4)]),
        want: vec![
            ("admitted_borrowing", InCohortReclamation),
            ("admitted_same_cohort", InCohortReclamation),
        ],
    });
    let r1_c4 = || vec![cohort("r", None, 1), cohort("c", Some("r"), 4)];
    let lower = || cq("q", "c", 0).preemption(policy(ReclaimWithinCohort::LowerPriority, Some(0)));
    run(Case {
        name: "preempt hierarchical and priority candidates",
        cohorts: r1_c4(),
        cqs: vec![lower(), cq("q_borrowing", "r", 0), cq("q_same_cohort", "c", 0)],
        admitted: vec![
            adm("admitted_borrowing", "q_borrowing", -1, 2),
            adm("admitted_same_cohort_preemptible", "q_same_cohort", -1, 1),
            adm("admitted_borrowing_not_preemptible", "q_borrowing", 1, 2),
        ],
        incoming: ("q", 0, &[("cpu", 3)]),
        want: vec![
            ("admitted_borrowing", InCohortReclamation),
            ("admitted_same_cohort_preemptible", InCohortReclaimWhileBorrowing),
        ],
    });
    run(Case {
        name: "preempt hierarchical candidates and inside CQ",
        cohorts: r1_c4(),
        cqs: vec![lower(), cq("q_borrowing", "r", 0), cq("q_same_cohort", "c", 0)],
        admitted: vec![
            adm("admitted_borrowing", "q_borrowing", -1, 2),
            adm("admitted_same_queue_preemptible", "q", -1, 1),
            adm("admitted_borrowing_not_preemptible", "q_borrowing", 1, 2),
        ],
        incoming: ("q", 0, &[("cpu", 3)]),
        want: vec![
            ("admitted_borrowing", InCohortReclamation),
            ("admitted_same_queue_preemptible", InClusterQueue),
        ],
    });
    run(Case {
        name: "reclaim nominal quota from lowest priority workload, excluding non-borrowing",
        cohorts: vec![cohort("r", None, 0), cohort("c", Some("r"), 3)],
        cqs: vec![
            cq("q", "c", 0),
            cq("q_borrowing", "r", 0),
            cq("q_nominal", "r", 2),
        ],
        admitted: vec![
            adm("admitted_borrowing_prio_8", "q_borrowing", 8, 1),
            adm("admitted_borrowing_prio_9", "q_borrowing", 9, 1),
            adm("admitted_borrowing_prio_10", "q_borrowing", 9, 1),
            adm("admitted_nominal", "q_nominal", -2, 2),
        ],
        incoming: ("q", 0, &[("cpu", 1)]),
        want: vec![("admitted_borrowing_prio_8", InCohortReclamation)],
    });
    run(Case {
        name: "infeasible preemption all available workloads in pruned subtrees",
        cohorts: vec![
            cohort("r", None, 0),
            cohort("c", Some("r"), 2),
            cohort("c_other", Some("r"), 2),
        ],
        cqs: vec![
            cq("q_other", "c_other", 0),
            cq("q", "c", 0),
            cq("q_same_cohort", "c", 0),
        ],
        admitted: vec![
            adm("admitted_other_1", "q_other", -10, 1),
            adm("admitted_other_2", "q_other", -10, 1),
            adm("admitted_same_cohort", "q_same_cohort", 0, 2),
        ],
        incoming: ("q", 0, &[("cpu", 2)]),
        want: vec![],
    });
    run(Case {
        name: "hiearchical preemption with multiple resources",
        cohorts: vec![
            cohort("r", None, 3),
            CohortModel::build("c")
                .parent("r")
                .flavor_limits("default", &[("cpu", 4, None, None), ("memory", 4, None, None)]),
        ],
        cqs: vec![
            ClusterQueueModel::build("q")
                .cohort("c")
                .flavor("default", &[("cpu", 0), ("memory", 0)])
                .preemption(policy(ReclaimWithinCohort::Any, None)),
            ClusterQueueModel::build("q_borrowing")
                .cohort("r")
                .flavor("default", &[("cpu", 0), ("memory", 0)])
                .preemption(policy(ReclaimWithinCohort::Any, None)),
            ClusterQueueModel::build("q_same_cohort")
                .cohort("c")
                .flavor("default", &[("cpu", 0), ("memory", 0)])
                .preemption(policy(ReclaimWithinCohort::Any, None)),
        ],
        admitted: vec![
            Admitted {
                usage: vec![("cpu", 3), ("memory", 1)],
                ..adm("admitted_borrowing", "q_borrowing", 0, 3)
            },
            Admitted {
                usage: vec![("cpu", 1), ("memory", 3)],
                ..adm("admitted_same_cohort", "q_same_cohort", -2, 1)
            },
        ],
        incoming: ("q", -2, &[("cpu", 2), ("memory", 1)]),
        want: vec![("admitted_borrowing", InCohortReclamation)],
    });
    run(Case {
        name: "prefer to preempt evicted workloads",
        cohorts: vec![cohort("r", None, 0), cohort("c", Some("r"), 2)],
        cqs: vec![
            cq("q", "c", 0).preemption(policy(ReclaimWithinCohort::Any, Some(0))),
            cq("q_borrowing", "r", 0),
            cq("q_same_cohort", "c", 0),
        ],
        admitted: vec![
            adm("admitted_borrowing", "q_borrowing", -10, 1),
            Admitted {
                evicted: true,
                ..adm("evicted_same_cohort", "q_same_cohort", -1, 1)
            },
        ],
        incoming: ("q", 0, &[("cpu", 1)]),
        want: vec![("evicted_same_cohort", InCohortReclaimWhileBorrowing)],
    });
    run(Case {
        name: "respect lending limits",
        cohorts: vec![cohort("r", None, 0), cohort("c", Some("r"), 2)],
        cqs: vec![
            ClusterQueueModel::build("q")
                .cohort("c")
                .flavor_limits("default", &[("cpu", 3, None, Some(2))])
                .preemption(policy(ReclaimWithinCohort::Any, None)),
            cq("q_borrowing", "r", 0),
        ],
        admitted: vec![adm("admitted_borrowing", "q_borrowing", 0, 4)],
        incoming: ("q", -2, &[("cpu", 5)]),
        want: vec![("admitted_borrowing", InCohortReclamation)],
    });
}

/// Kueue's "reclaim in complex hierarchy": seven cohorts, five ClusterQueues with no quota of
/// their own; the preemptor deep in the tree takes back from the lowest-priority borrowers of
/// the subtrees that exceed their quota, whatever their priority relative to it.
#[test]
fn reclaim_in_complex_hierarchy() {
    let q = |name: &str, co: &str| cq(name, co, 0);
    run(Case {
        name: "reclaim in complex hierarchy",
        cohorts: vec![
            cohort("r", None, 0),
            cohort("c11", Some("r"), 4),
            cohort("c12", Some("r"), 4),
            cohort("c21", Some("c11"), 4),
            cohort("c22", Some("c11"), 4),
            cohort("c23", Some("c11"), 4),
            cohort("c31", Some("c21"), 4),
            cohort("c32", Some("c21"), 4),
        ],
        cqs: vec![
            q("q1", "c12"),
            q("q2", "c23"),
            q("q3", "c22"),
            q("q4", "c32"),
            q("q5", "c31"),
        ],
        admitted: vec![
            adm("admitted_borrowing_1", "q1", -6, 4),
            adm("admitted_borrowing_2", "q1", -5, 4),
            adm("admitted_borrowing_3", "q2", -9, 4),
            adm("admitted_borrowing_4", "q2", -10, 4),
            adm("admitted_borrowing_5", "q3", -4, 4),
            adm("admitted_borrowing_6", "q3", -3, 3),
            adm("admitted_borrowing_7", "q4", 4, 2),
            adm("admitted_borrowing_8", "q4", 2, 3),
        ],
        incoming: ("q5", -2, &[("cpu", 7)]),
        want: vec![
            ("admitted_borrowing_1", InCohortReclamation),
            ("admitted_borrowing_4", InCohortReclamation),
        ],
    });
}
