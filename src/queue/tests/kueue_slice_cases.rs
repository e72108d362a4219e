//! Workload slices under preemption, as Kueue's slices behave: the slice a replacement replaces
//! counts as freed in the fit check (Kueue lists it among the preemption targets, then drops it
//! before evicting: `scheduler.go` `FindReplacedSliceTarget`), so only the growth has to fit, and a
//! replacement preempts within its ClusterQueue and reclaims within its cohort like any workload.

use super::tests::{Scenario, k, setup, wl};
use super::*;

fn evicted(r: &CycleResult) -> Vec<(String, EvictionReason)> {
    r.evictions
        .iter()
        .map(|e| (e.key.name.clone(), e.reason.clone()))
        .collect()
}

fn cpu(core: &AdmissionCore, cq: &str) -> Amount {
    core.cq_usage(cq)
        .get(&FlavorResource::new("default", "cpu"))
        .copied()
        .unwrap_or_default()
}

/// Kueue `test/integration/singlecluster/scheduler/preemption_test.go`, "Should preempt
/// on-scale-up Workloads with lower priority when there is not enough quota": a scale-up slice
/// preempts a lower-priority workload, is admitted once the victim is gone (its old slice
/// finishing as replaced), and the victim comes back when the slice scales down in place.
#[test]
fn a_scale_up_slice_preempts_lower_priority_and_gives_back_on_scale_down() {
    let mut core = setup(&Scenario {
        cqs: vec![
            ClusterQueueModel::build("cq")
                .flavor("default", &[("cpu", 2)])
                .within(WithinClusterQueue::LowerOrNewerEqualPriority),
        ],
        admitted: vec![
            (wl("low", "cq", 1).priority(-1), "default", 1),
            (wl("high", "cq", 1).priority(1), "default", 2),
        ],
        ..Default::default()
    });
    let scaled = WorkloadModel::build("ns", "high-2", "cq")
        .podset(PodSetModel::build("main", 2, &[("cpu", 1)]))
        .priority(1)
        .replaces(&k("high"));
    core.add_workload(scaled).unwrap();
    let r = core.schedule_cycle(3);
    assert!(r.admissions.is_empty(), "{:?}", r.admissions);
    assert_eq!(
        evicted(&r),
        vec![(
            "low".to_string(),
            EvictionReason::Preempted(PreemptedReason::InClusterQueue)
        )]
    );
    let (reason, msg) = core.pending_reason(&k("high-2")).unwrap();
    assert_eq!(reason, PendingReason::WaitingForPreemptedWorkloads, "{msg}");
    assert!(msg.contains("Pending the preemption of 1 workload(s)"), "{msg}");
    // The old slice is no victim: it keeps serving until its replacement is admitted.
    assert!(core.is_admitted(&k("high")));

    core.release(&k("low"));
    let r = core.schedule_cycle(4);
    assert_eq!(r.admissions.len(), 1, "{:?}", r.pending);
    assert_eq!(r.admissions[0].key, k("high-2"));
    assert_eq!(r.admissions[0].replaced, Some(k("high")));
    assert_eq!(r.finished_slices[0].key, k("high"));
    assert_eq!(cpu(&core, "cq"), Amount(2));

    // Scale down in place; the preempted workload, requeued, is admitted again.
    let down = WorkloadModel::build("ns", "high-2", "cq")
        .podset(PodSetModel::build("main", 1, &[("cpu", 1)]))
        .priority(1);
    core.shrink_admitted(down).unwrap();
    core.add_workload(wl("low", "cq", 1).priority(-1)).unwrap();
    let r = core.schedule_cycle(5);
    assert_eq!(r.admissions.len(), 1, "{:?}", r.pending);
    assert_eq!(r.admissions[0].key, k("low"));
}

/// The case: a full ClusterQueue of low-priority batch work, a high-priority slice whose
/// growth the victims can free. The old fit check charged the replaced slice in full and said "no
/// longer fits"; only the growth has to fit beside what stays.
#[test]
fn only_the_growth_must_fit_after_preemption() {
    let mut core = setup(&Scenario {
        cqs: vec![
            ClusterQueueModel::build("cq")
                .flavor("default", &[("cpu", 10)])
                .within(WithinClusterQueue::LowerPriority),
        ],
        admitted: vec![
            (wl("svc", "cq", 4).priority(100), "default", 1),
            (wl("batch-1", "cq", 3), "default", 2),
            (wl("batch-2", "cq", 3), "default", 3),
        ],
        ..Default::default()
    });
    core.add_workload(wl("svc-2", "cq", 7).priority(100).replaces(&k("svc")))
        .unwrap();
    let r = core.schedule_cycle(4);
    let (reason, msg) = core.pending_reason(&k("svc-2")).unwrap();
    assert_eq!(reason, PendingReason::WaitingForPreemptedWorkloads, "{msg}");
    // Growth 3: one batch workload is enough, the most recently admitted first.
    assert_eq!(
        evicted(&r),
        vec![(
            "batch-2".to_string(),
            EvictionReason::Preempted(PreemptedReason::InClusterQueue)
        )]
    );
    assert!(
        r.evictions[0].message.starts_with(
            "Preempted to accommodate a workload (UID: uid-ns-svc-2, JobUID: UNKNOWN) due to prioritization in the ClusterQueue"
        ),
        "{}",
        r.evictions[0].message
    );
    core.release(&k("batch-2"));
    let r = core.schedule_cycle(5);
    assert_eq!(r.admissions.len(), 1, "{:?}", r.pending);
    assert_eq!(cpu(&core, "cq"), Amount(10));
    assert!(core.is_admitted(&k("batch-1")));
}

/// A replacement slice reclaims quota its ClusterQueue lent within the cohort
/// (`reclaimWithinCohort: Any`), with Kueue's reason and message; only its growth counts.
#[test]
fn a_replacement_slice_reclaims_within_the_cohort() {
    let mut core = setup(&Scenario {
        cqs: vec![
            ClusterQueueModel::build("svc-cq")
                .cohort("c")
                .flavor("default", &[("cpu", 6)])
                .reclaim(ReclaimWithinCohort::Any),
            ClusterQueueModel::build("batch-cq")
                .cohort("c")
                .flavor("default", &[("cpu", 4)]),
        ],
        admitted: vec![
            (wl("svc", "svc-cq", 3), "default", 1),
            // 6 in a ClusterQueue of 4: borrows 2 of svc-cq's 3 unused.
            (wl("batch", "batch-cq", 6), "default", 2),
        ],
        ..Default::default()
    });
    core.add_workload(wl("svc-2", "svc-cq", 6).replaces(&k("svc")))
        .unwrap();
    let r = core.schedule_cycle(3);
    assert_eq!(
        evicted(&r),
        vec![(
            "batch".to_string(),
            EvictionReason::Preempted(PreemptedReason::InCohortReclamation)
        )]
    );
    assert!(
        r.evictions[0].message.contains(
            "due to reclamation within the cohort; preemptor path: /c/svc-cq; preemptee path: /c/batch-cq"
        ),
        "{}",
        r.evictions[0].message
    );
    core.release(&k("batch"));
    let r = core.schedule_cycle(4);
    assert_eq!(r.admissions.len(), 1, "{:?}", r.pending);
    assert_eq!(r.admissions[0].replaced, Some(k("svc")));
}

/// Without a policy that allows it, a replacement waits like any workload: no eviction, and its
/// old slice keeps running.
#[test]
fn a_replacement_slice_without_a_preemption_policy_waits() {
    let mut core = setup(&Scenario {
        cqs: vec![ClusterQueueModel::build("cq").flavor("default", &[("cpu", 10)])],
        admitted: vec![
            (wl("svc", "cq", 4).priority(100), "default", 1),
            (wl("batch", "cq", 6), "default", 2),
        ],
        ..Default::default()
    });
    core.add_workload(wl("svc-2", "cq", 6).priority(100).replaces(&k("svc")))
        .unwrap();
    let r = core.schedule_cycle(3);
    assert!(r.evictions.is_empty(), "{:?}", r.evictions);
    assert!(r.admissions.is_empty());
    assert!(core.is_admitted(&k("svc")));
    let (reason, _) = core.pending_reason(&k("svc-2")).unwrap();
    assert_eq!(reason, PendingReason::WaitingForQuota);
}

/// A lower-priority replacement does not preempt a higher-priority workload, and an equal-priority
/// one only under `LowerOrNewerEqualPriority` when it is newer in the queue.
#[test]
fn a_replacement_slice_respects_priorities() {
    let base = |within| Scenario {
        cqs: vec![
            ClusterQueueModel::build("cq")
                .flavor("default", &[("cpu", 10)])
                .within(within),
        ],
        admitted: vec![
            (wl("svc", "cq", 4).priority(5).at(1), "default", 1),
            (wl("batch", "cq", 6).priority(5).at(5), "default", 2),
        ],
        ..Default::default()
    };
    let mut core = setup(&base(WithinClusterQueue::LowerPriority));
    core.add_workload(wl("svc-2", "cq", 6).priority(5).at(1).replaces(&k("svc")))
        .unwrap();
    assert!(core.schedule_cycle(3).evictions.is_empty());

    let mut core = setup(&base(WithinClusterQueue::LowerOrNewerEqualPriority));
    core.add_workload(wl("svc-2", "cq", 6).priority(5).at(1).replaces(&k("svc")))
        .unwrap();
    assert_eq!(evicted(&core.schedule_cycle(3)).len(), 1);
}
