//! Cases of Kueue's `pkg/scheduler/scheduler_test.go` (`TestSchedule`) that are about the
//! admission core, each named after the Kueue case it ports: the same ClusterQueues, workloads
//! and expected outcome (admitted counts, victims, pending reasons), checked through
//! `AdmissionCore::schedule_cycle`.

use super::tests::{Scenario, k, preempted, setup};
use super::*;

const GPU: &str = "example.com/gpu";

/// Kueue's `sales` ClusterQueue: 50 cpu in flavor `default`, StrictFIFO.
fn sales() -> ClusterQueueModel {
    ClusterQueueModel::build("sales")
        .strategy(QueueingStrategy::StrictFifo)
        .flavor("default", &[("cpu", 50)])
}

/// Kueue's `eng-beta` ClusterQueue, reduced to its `example.com/gpu` group (20 in `model-a`).
fn eng_beta() -> ClusterQueueModel {
    ClusterQueueModel::build("eng-beta")
        .cohort("eng")
        .strategy(QueueingStrategy::StrictFifo)
        .within(WithinClusterQueue::LowerPriority)
        .reclaim(ReclaimWithinCohort::Any)
        .flavor("model-a", &[(GPU, 20)])
}

fn counts(a: &Admission) -> Vec<(String, i64)> {
    a.pod_set_assignments
        .iter()
        .map(|p| (p.name.clone(), p.count))
        .collect()
}

fn pairs(v: &[(&str, i64)]) -> Vec<(String, i64)> {
    v.iter().map(|(n, c)| (n.to_string(), *c)).collect()
}

#[test]
fn partial_admission_single_variable_pod_set() {
    let mut core = setup(&Scenario {
        cqs: vec![sales()],
        pending: vec![
            WorkloadModel::build("ns", "new", "sales")
                .podset(PodSetModel::build("one", 50, &[("cpu", 2)]).min_count(20)),
        ],
        ..Default::default()
    });
    let res = core.schedule_cycle(1);
    assert_eq!(res.admissions.len(), 1, "{:?}", res.pending);
    let a = &res.admissions[0].admission;
    assert_eq!(counts(a), pairs(&[("one", 25)]));
    assert_eq!(a.pod_set_assignments[0].resource_usage["cpu"], Amount(50));
}

#[test]
fn partial_admission_multiple_variable_pod_sets() {
    let mut core = setup(&Scenario {
        cqs: vec![sales()],
        pending: vec![
            WorkloadModel::build("ns", "new", "sales")
                .podset(PodSetModel::build("one", 20, &[("cpu", 1)]))
                .podset(PodSetModel::build("two", 30, &[("cpu", 1)]).min_count(10))
                .podset(PodSetModel::build("three", 15, &[("cpu", 1)]).min_count(5)),
        ],
        ..Default::default()
    });
    let res = core.schedule_cycle(1);
    assert_eq!(res.admissions.len(), 1, "{:?}", res.pending);
    assert_eq!(
        counts(&res.admissions[0].admission),
        pairs(&[("one", 20), ("two", 20), ("three", 10)])
    );
}

/// Kueue v0.20 lets `minCount` be 0 (kueue#14720, KEP 420 "`.spec.podSets.minCount >= 0`"):
/// Kueue's `PodSetReducer` then searches down to zero pods of that podset, so a driver that fits
/// is admitted with no workers when the workers' quota is held by someone else.
#[test]
fn partial_admission_down_to_min_count_zero() {
    let holder =
        WorkloadModel::build("ns", "holder", "sales").podset(PodSetModel::build("w", 45, &[("cpu", 1)]));
    let mut core = setup(&Scenario {
        cqs: vec![sales()],
        admitted: vec![(holder, "default", 1)],
        pending: vec![
            WorkloadModel::build("ns", "new", "sales")
                .podset(PodSetModel::build("driver", 1, &[("cpu", 5)]))
                .podset(PodSetModel::build("workers", 10, &[("cpu", 1)]).min_count(0)),
        ],
        ..Default::default()
    });
    let res = core.schedule_cycle(1);
    assert_eq!(res.admissions.len(), 1, "{:?}", res.pending);
    let a = &res.admissions[0].admission;
    assert_eq!(counts(a), pairs(&[("driver", 1), ("workers", 0)]));
    assert_eq!(
        a.pod_set_assignments[1]
            .resource_usage
            .get("cpu")
            .copied()
            .unwrap_or_default(),
        Amount(0)
    );
}

/// A lone podset with `minCount: 0` and no free quota is admitted with zero pods (Kueue's reducer
/// reaches the all-minimum counts, whose zero requests fit), holding nothing.
#[test]
fn partial_admission_of_a_lone_podset_to_zero_pods() {
    let holder =
        WorkloadModel::build("ns", "holder", "sales").podset(PodSetModel::build("w", 50, &[("cpu", 1)]));
    let mut core = setup(&Scenario {
        cqs: vec![sales()],
        admitted: vec![(holder, "default", 1)],
        pending: vec![
            WorkloadModel::build("ns", "new", "sales")
                .podset(PodSetModel::build("one", 4, &[("cpu", 2)]).min_count(0)),
        ],
        ..Default::default()
    });
    let res = core.schedule_cycle(1);
    assert_eq!(res.admissions.len(), 1, "{:?}", res.pending);
    assert_eq!(counts(&res.admissions[0].admission), pairs(&[("one", 0)]));
}

fn old_gpu_workload() -> (WorkloadModel, &'static str, i64) {
    let old = WorkloadModel::build("ns", "old", "eng-beta")
        .podset(PodSetModel::build("one", 10, &[(GPU, 1)]))
        .priority(-4);
    (old, "model-a", 1)
}

/// The full count only fits by preempting: Kueue preempts for the full count first and does
/// not reduce.
#[test]
fn partial_admission_single_variable_pod_set_preempt_first() {
    let mut core = setup(&Scenario {
        flavors: vec![FlavorModel::build("model-a")],
        cqs: vec![eng_beta()],
        admitted: vec![old_gpu_workload()],
        pending: vec![WorkloadModel {
            uid: "wl-new".into(),
            job_uid: Some("job-new".into()),
            ..WorkloadModel::build("ns", "new", "eng-beta")
                .podset(PodSetModel::build("one", 20, &[(GPU, 1)]).min_count(10))
                .priority(4)
        }],
        ..Default::default()
    });
    let res = core.schedule_cycle(1);
    assert!(res.admissions.is_empty());
    assert_eq!(
        res.evictions[0].message,
        "Preempted to accommodate a workload (UID: wl-new, JobUID: job-new) due to prioritization in the ClusterQueue; preemptor path: /eng/eng-beta; preemptee path: /eng/eng-beta"
    );
    let ev: Vec<(&str, &EvictionReason)> = res
        .evictions
        .iter()
        .map(|e| (e.key.name.as_str(), &e.reason))
        .collect();
    assert_eq!(ev, [("old", &preempted(PreemptedReason::InClusterQueue))]);
    let (reason, msg) = core.pending_reason(&k("new")).unwrap();
    assert_eq!(reason, PendingReason::WaitingForPreemptedWorkloads);
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set one: insufficient unused quota for example.com/gpu in flavor model-a, 10 more needed. Pending the preemption of 1 workload(s)"
    );
    // Once the victim is gone the full count is admitted, not the reduced one.
    core.release(&k("old"));
    let res = core.schedule_cycle(2);
    assert_eq!(counts(&res.admissions[0].admission), pairs(&[("one", 20)]));
}

/// The full count exceeds the quota, a reduced count fits after preempting: the reduced count
/// preempts, and is what is admitted.
#[test]
fn partial_admission_single_variable_pod_set_preempt_with_partial_admission() {
    let mut core = setup(&Scenario {
        flavors: vec![FlavorModel::build("model-a")],
        cqs: vec![eng_beta()],
        admitted: vec![old_gpu_workload()],
        pending: vec![
            WorkloadModel::build("ns", "new", "eng-beta")
                .podset(PodSetModel::build("one", 30, &[(GPU, 1)]).min_count(10))
                .priority(4),
        ],
        ..Default::default()
    });
    let res = core.schedule_cycle(1);
    assert!(res.admissions.is_empty());
    assert_eq!(res.evictions.len(), 1);
    assert_eq!(res.evictions[0].key, k("old"));
    core.release(&k("old"));
    let res = core.schedule_cycle(2);
    assert_eq!(counts(&res.admissions[0].admission), pairs(&[("one", 20)]));
}

/// Without `minCount` nothing is reduced: the same multi-podset workload waits (Kueue's
/// "partial admission disabled" expectation, here reached by leaving `minCount` out).
#[test]
fn no_min_count_means_no_partial_admission() {
    let mut core = setup(&Scenario {
        cqs: vec![sales()],
        pending: vec![
            WorkloadModel::build("ns", "new", "sales")
                .podset(PodSetModel::build("one", 20, &[("cpu", 1)]))
                .podset(PodSetModel::build("two", 30, &[("cpu", 1)]))
                .podset(PodSetModel::build("three", 15, &[("cpu", 1)])),
        ],
        ..Default::default()
    });
    let res = core.schedule_cycle(1);
    assert!(res.admissions.is_empty());
    let (reason, _) = core.pending_reason(&k("new")).unwrap();
    assert_eq!(reason, PendingReason::ExceedsMaxQuota);
}

/// Kueue `flavorassigner_test.go`: "zero resource request defined in clusterQueue should get
/// flavor assigned" and "zero resource request not in clusterQueue should succeed"; with a count-0
/// podset (Kueue computes its requests as zero the same way).
#[test]
fn zero_requests_get_a_flavor_when_covered() {
    let cq = ClusterQueueModel::build("cq").flavor("default", &[("cpu", 4), (GPU, 4)]);
    let mut core = setup(&Scenario {
        cqs: vec![cq],
        pending: vec![
            WorkloadModel::build("ns", "zero-gpu", "cq").podset(PodSetModel::build(
                "main",
                1,
                &[("cpu", 1), (GPU, 0), ("other", 0)],
            )),
            WorkloadModel::build("ns", "count-zero", "cq")
                .podset(PodSetModel::build("main", 1, &[("cpu", 1)]))
                .podset(PodSetModel::build("idle", 0, &[("cpu", 1), (GPU, 1)])),
        ],
        ..Default::default()
    });
    let res = core.schedule_cycle(1);
    assert_eq!(res.admissions.len(), 2, "{:?}", res.pending);
    let podset = |name: &str, i: usize| {
        res.admissions
            .iter()
            .find(|a| a.key == k(name))
            .map(|a| a.admission.pod_set_assignments[i].clone())
            .unwrap()
    };
    let zero_gpu = podset("zero-gpu", 0);
    assert_eq!(zero_gpu.flavors.get(GPU).map(String::as_str), Some("default"));
    assert_eq!(zero_gpu.resource_usage[GPU], Amount(0));
    assert!(!zero_gpu.flavors.contains_key("other"), "{zero_gpu:?}");
    let idle = podset("count-zero", 1);
    assert_eq!(idle.flavors.get(GPU).map(String::as_str), Some("default"));
    assert_eq!(
        (idle.count, idle.resource_usage["cpu"], idle.resource_usage[GPU]),
        (0, Amount(0), Amount(0))
    );
}

/// Kueue's cache lists a ClusterQueue's `flavorsReservation` / `flavorsUsage` in spec order
/// (resource groups, flavors, covered resources), not sorted by name.
#[test]
fn cluster_queue_flavor_status_is_in_spec_order() {
    let cq = ClusterQueueModel::build("cq")
        .flavor("zeta", &[("cpu", 4), ("memory", 4)])
        .flavor("alpha", &[("cpu", 4), ("memory", 4)]);
    let core = setup(&Scenario {
        flavors: vec![FlavorModel::build("zeta"), FlavorModel::build("alpha")],
        cqs: vec![cq],
        ..Default::default()
    });
    let st = core.cluster_queue_status("cq").unwrap();
    let got: Vec<(String, Vec<String>)> = st
        .flavors_usage
        .iter()
        .map(|f| {
            (
                f.name.clone(),
                f.resources.iter().map(|r| r.name.clone()).collect(),
            )
        })
        .collect();
    let res = || vec!["cpu".to_string(), "memory".to_string()];
    assert_eq!(got, [("zeta".to_string(), res()), ("alpha".to_string(), res())]);
}
