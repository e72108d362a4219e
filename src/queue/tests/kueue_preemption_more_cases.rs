//! Kueue's `pkg/scheduler/preemption/preemption_test.go` `TestPreemption`, continued: the
//! borrowWithinCohort cases and the exhausted-target-queue cases, on the fixture and runner of
//! `kueue_preemption_cases.rs`.

use super::kueue_preemption_cases::*;
use super::preemption::PreemptedReason::{
    InClusterQueue, InCohortReclaimWhileBorrowing, InCohortReclamation,
};

#[test]
fn preemption_borrow_within_cohort_cases() {
    let shared = |name, admitted, target, priority, req, want| {
        run(Case {
            name,
            admitted,
            target,
            priority,
            assignment: cpu(req),
            want,
            ..base()
        })
    };
    shared(
        "use BorrowWithinCohort; allow preempting a lower-priority workload from another ClusterQueue while borrowing",
        vec![
            adm("a_best_effort_low", "a_best_effort", -1, 10),
            adm("b_best_effort_low", "b_best_effort", -1, 1),
        ],
        "a_standard",
        0,
        10,
        vec![("a_best_effort_low", InCohortReclaimWhileBorrowing)],
    );
    shared(
        "use BorrowWithinCohort; don't allow preempting a lower-priority workload with priority above MaxPriorityThreshold, if borrowing is required even after the preemption",
        vec![adm("b_standard", "b_standard", 1, 10)],
        "a_standard",
        2,
        10,
        vec![],
    );
    shared(
        "use BorrowWithinCohort; allow preempting a lower-priority workload with priority above MaxPriorityThreshold, if borrowing is not required after the preemption",
        vec![adm("b_standard", "b_standard", 1, 13)],
        "a_standard",
        2,
        1,
        vec![("b_standard", InCohortReclamation)],
    );
    shared(
        "use BorrowWithinCohort; don't allow for preemption of lower-priority workload from the same ClusterQueue",
        vec![adm("a_standard", "a_standard", 1, 13)],
        "a_standard",
        2,
        1,
        vec![],
    );
    shared(
        "use BorrowWithinCohort; only preempt from CQ if no workloads below threshold and already above nominal",
        vec![
            adm("a_standard_1", "a_standard", 1, 10),
            adm("a_standard_2", "a_standard", 1, 1),
            adm("b_standard_1", "b_standard", 1, 1),
            adm("b_standard_2", "b_standard", 2, 1),
        ],
        "b_standard",
        3,
        1,
        vec![("b_standard_1", InClusterQueue)],
    );
    shared(
        "use BorrowWithinCohort; preempt from CQ and from other CQs with workloads below threshold",
        vec![
            adm("b_standard_high", "b_standard", 2, 10),
            adm("b_standard_mid", "b_standard", 1, 1),
            adm("a_best_effort_low", "a_best_effort", -1, 1),
            adm("a_best_effort_lower", "a_best_effort", -2, 1),
        ],
        "b_standard",
        2,
        2,
        vec![
            ("a_best_effort_lower", InCohortReclaimWhileBorrowing),
            ("b_standard_mid", InClusterQueue),
        ],
    );
}

#[test]
fn preemption_exhausted_target_queue_cases() {
    let cpu_mem = |cpu: i64, mem: Option<i64>| -> Vec<(&'static str, &'static str, i64)> {
        let mut v = vec![("default", "cpu", cpu)];
        if let Some(m) = mem {
            v.push(("default", "memory", m));
        }
        v
    };
    let six = |mem: Option<i64>| {
        vec![
            adm_with("a1", "a", -2, &cpu_mem(1, mem)),
            adm_with("a2", "a", -2, &cpu_mem(1, mem)),
            adm_with("a3", "a", -1, &cpu_mem(1, mem)),
            adm_with("b1", "b", 0, &cpu_mem(1, mem)),
            adm_with("b2", "b", 0, &cpu_mem(1, mem)),
            adm_with("b3", "b", 0, &cpu_mem(1, mem)),
        ]
    };
    let both = vec![("default", "cpu", 2, true), ("default", "memory", 2, true)];
    for (name, admitted, assignment) in [
        (
            "preemptions from cq when target queue is exhausted for the single requested resource",
            six(None),
            cpu(2),
        ),
        (
            "preemptions from cq when target queue is exhausted for two requested resources",
            six(Some(1)),
            both.clone(),
        ),
        (
            "preemptions from cq when target queue is exhausted for one requested resource, but not the other",
            six(None),
            both,
        ),
    ] {
        run(Case {
            name,
            admitted,
            target: "a",
            assignment,
            want: vec![("a1", InClusterQueue), ("a2", InClusterQueue)],
            ..base()
        });
    }
    run(Case {
        name: "allow preemption from other cluster queues if target cq is not exhausted for the requested resource",
        admitted: vec![
            adm("a1", "a", -1, 1),
            adm("b1", "b", 0, 1),
            adm("b2", "b", 0, 1),
            adm("b3", "b", 0, 1),
            adm("b4", "b", 0, 1),
            adm("b5", "b", -1, 1),
        ],
        target: "a",
        assignment: cpu(2),
        want: vec![("a1", InClusterQueue), ("b5", InCohortReclamation)],
        ..base()
    });
}
