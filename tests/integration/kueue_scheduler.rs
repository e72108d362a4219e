//! Kueue's scheduler and core-controller integration tests, observable with plain Workloads, on the
//! embedded cluster with the real manager. Each test names the Kueue test it ports
//! (`test/integration/singlecluster/...`); the expectations are Kueue's, the code ours.

use kube::api::{Api, Patch, PatchParams, PostParams};
use quotagate::api::kueue::constants::{condition, reason};
use quotagate::api::kueue::{ClusterQueue, Cohort, Workload};

use crate::support::*;

fn preemption(json: serde_json::Value) -> Option<quotagate::api::kueue::ClusterQueuePreemption> {
    Some(serde_json::from_value(json).unwrap())
}

/// `scheduler/preemption_test.go`, "In a multi-level cohort": "workloads in guaranteed cq should
/// have preferential access to the resources". The guaranteed quota (3 cpu) sits on the
/// `guaranteed` cohort; its ClusterQueue has 0. A higher-priority best-effort workload borrowing it
/// from the root is preempted, and the guaranteed workload is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_in_guaranteed_cq_have_preferential_access() {
    let c = Cluster::start(Limits::default().group(&["best-effort", "guaranteed"], 3000)).await;
    c.flavor("default").await;
    let cohorts: Api<Cohort> = Api::all(c.client.clone());
    for co in [
        Cohort::build("root").build(),
        Cohort::build("guaranteed")
            .parent("root")
            .flavor("default", [("cpu", "3")])
            .build(),
    ] {
        cohorts.create(&PostParams::default(), &co).await.unwrap();
    }
    let policy = serde_json::json!({
        "withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"
    });
    for (name, cohort) in [("best-effort", "root"), ("guaranteed", "guaranteed")] {
        let mut q = with_all_namespaces(
            ClusterQueue::build(name)
                .cohort(cohort)
                .flavor("default", [("cpu", "0")])
                .build(),
        );
        q.spec.preemption = preemption(policy.clone());
        c.cluster_queue(q).await;
    }
    c.local_queue("best-effort-lq", "best-effort").await;
    c.local_queue("guaranteed-lq", "guaranteed").await;
    let wls = c.workloads();
    c.workload("best-effort-wl", "best-effort-lq", 1000, "3").await;
    wait_for(&wls, "best-effort-wl", "admitted", |w| w.is_admitted()).await;
    c.workload("guaranteed-wl", "guaranteed-lq", 100, "3").await;
    let be = wait_for(&wls, "best-effort-wl", "preempted", |w| {
        condition(w, condition::PREEMPTED).is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(
        condition(&be, condition::PREEMPTED).unwrap().1,
        reason::IN_COHORT_RECLAMATION
    );
    wait_for(&wls, "guaranteed-wl", "admitted", |w| w.is_admitted()).await;
    wait_for(&wls, "best-effort-wl", "pending again", |w| {
        !reserved(w) && condition(w, condition::QUOTA_RESERVED).is_some_and(|c| c.0 == "False")
    })
    .await;
    c.quota.assert_safe();
}

/// `scheduler/scheduler_test.go` ("Should admit workloads with partial admission" family) and
/// Kueue's unit case "partial admission single variable pod set": 50 pods of 2 cpu with
/// `minCount: 20` against 50 cpu are admitted with count 25, written in
/// `status.admission.podSetAssignments[].count`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_admission_writes_the_reduced_count() {
    let c = Cluster::start(Limits::default().cq("sales", 50_000)).await;
    c.simple("sales", "main", "50").await;
    let wl = Workload::build("new", "default")
        .queue("main")
        .podset("one", 50, [("cpu", "2")])
        .min_count("one", 20)
        .build();
    let wls = c.workloads();
    wls.create(&PostParams::default(), &wl).await.unwrap();
    let got = wait_for(&wls, "new", "admitted", |w| w.is_admitted()).await;
    let psa = &got.admission().unwrap().pod_set_assignments[0];
    assert_eq!(psa.count, Some(25));
    assert_eq!(psa.resource_usage["cpu"].0, "50");
    c.quota.assert_safe();
}

/// `controller/core/workload_controller_test.go` (inactive workloads) and Kueue's
/// `UnsetQuotaReservationWithCondition`: a workload created with `active: false` is never
/// admitted and says QuotaReserved=False reason Deactivated, Admitted=False reason
/// NoReservation, with its resource requests in status; a pending one that cannot fit says
/// Kueue's flavor-assigner message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_and_deactivated_workloads_carry_kueues_conditions() {
    let c = Cluster::start(Limits::default().cq("cq", 4000)).await;
    c.simple("cq", "lq", "4").await;
    let wls = c.workloads();
    let inactive = Workload::build("off", "default")
        .queue("lq")
        .podset("main", 2, [("cpu", "1")])
        .active(false)
        .build();
    wls.create(&PostParams::default(), &inactive).await.unwrap();
    let off = wait_for(&wls, "off", "deactivated", |w| {
        condition(w, condition::QUOTA_RESERVED).is_some_and(|c| c.1 == reason::DEACTIVATED)
    })
    .await;
    assert_eq!(
        condition(&off, condition::QUOTA_RESERVED).unwrap(),
        (
            "False".to_string(),
            "Deactivated".to_string(),
            "The workload is deactivated".to_string()
        )
    );
    assert_eq!(
        condition(&off, condition::ADMITTED).unwrap(),
        (
            "False".to_string(),
            "NoReservation".to_string(),
            "The workload has no reservation".to_string()
        )
    );
    let rr = &off.status.as_ref().unwrap().resource_requests;
    assert_eq!(rr.len(), 1);
    assert_eq!(rr[0].resources["cpu"].0, "2");

    c.workload("big", "lq", 0, "5").await;
    let big = wait_for(&wls, "big", "pending", |w| {
        condition(w, condition::QUOTA_RESERVED).is_some_and(|c| c.0 == "False")
    })
    .await;
    let (_, why, msg) = condition(&big, condition::QUOTA_RESERVED).unwrap();
    assert_eq!(why, reason::EXCEEDS_MAX_QUOTA);
    assert_eq!(
        msg,
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, previously considered podsets requests (0) + current podset request (5) > maximum capacity (4)"
    );
    // Reactivated, it is admitted.
    wls.patch(
        "off",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"active": true}})),
    )
    .await
    .unwrap();
    wait_for(&wls, "off", "admitted once active", |w| w.is_admitted()).await;
    c.quota.assert_safe();
}
