//! Kueue's `test/integration/singlecluster/controller/core/workload_controller_test.go`, on the
//! embedded cluster with the real manager, each test naming the Kueue spec it ports. Kueue's core
//! suite runs without its scheduler and reserves quota by hand; ours always runs the admission
//! loop, so a state Kueue writes by hand is reached here through admission itself.

use kube::api::{Api, Patch, PatchParams, PostParams};
use quotagate::api::kueue::constants::{condition, reason};
use quotagate::api::kueue::{ClusterQueue, LocalQueue, StopPolicy, Workload};

use crate::kueue_scheduler_more::pending_with;
use crate::support::*;

/// The (status, reason, message) of a condition, owned, for comparing with a literal.
fn cond(s: &str, r: &str, m: &str) -> Option<(String, String, String)> {
    Some((s.into(), r.into(), m.into()))
}

const NO_RESERVATION: (&str, &str, &str) = ("False", "NoReservation", "The workload has no reservation");

/// Waits until `name` says QuotaReserved=False with `why` and `msg`, and Admitted=False
/// NoReservation, as Kueue's `ExpectWorkloadToHaveConditions` does.
async fn held_with(wls: &Api<Workload>, name: &str, why: &str, msg: &str) -> Workload {
    let w = wait_for(wls, name, msg, |w| {
        condition(w, condition::QUOTA_RESERVED) == cond("False", why, msg)
    })
    .await;
    let (s, r, m) = NO_RESERVATION;
    assert_eq!(condition(&w, condition::ADMITTED), cond(s, r, m), "{name}");
    w
}

async fn plain(c: &Cluster, name: &str, lq: Option<&str>) {
    let mut b = Workload::build(name, "default").podset("main", 1, [("cpu", "1")]);
    if let Some(q) = lq {
        b = b.queue(q);
    }
    c.workloads()
        .create(&PostParams::default(), &b.build())
        .await
        .unwrap();
}

async fn stop_local_queue(c: &Cluster, name: &str, p: StopPolicy) {
    let lqs: Api<LocalQueue> = Api::namespaced(c.client.clone(), "default");
    lqs.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"stopPolicy": p}})),
    )
    .await
    .unwrap();
}

async fn set_active(wls: &Api<Workload>, name: &str, active: bool) {
    wls.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"active": active}})),
    )
    .await
    .unwrap();
}

/// "the queue is not defined in the workload": "Should update status when workloads are created".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_without_a_queue_name_is_misconfigured() {
    let c = Cluster::start(Limits::default()).await;
    plain(&c, "one", None).await;
    held_with(
        &c.workloads(),
        "one",
        reason::MISCONFIGURED,
        "LocalQueue  doesn't exist",
    )
    .await;
}

/// "the queue doesn't exist": "Should update status when workloads are created", and
/// "with UnadmittedWorkloadsObservability feature gate enabled": "should write granular
/// conditions and reasons when queue is missing".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_of_a_missing_local_queue_is_misconfigured() {
    let c = Cluster::start(Limits::default()).await;
    plain(&c, "two", Some("non-created-queue")).await;
    held_with(
        &c.workloads(),
        "two",
        reason::MISCONFIGURED,
        "LocalQueue non-created-queue doesn't exist",
    )
    .await;
}

/// "the clusterqueue doesn't exist": "Should update status when workloads are created", and
/// "should write granular conditions and reasons when clusterQueue is missing" (which first waits
/// for the LocalQueue's Active condition).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_of_a_missing_cluster_queue_is_misconfigured() {
    let c = Cluster::start(Limits::default()).await;
    c.local_queue("queue", "fooclusterqueue").await;
    let lqs: Api<LocalQueue> = Api::namespaced(c.client.clone(), "default");
    wait_for(&lqs, "queue", "an Active condition", |q| {
        q.status
            .as_ref()
            .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == condition::ACTIVE))
    })
    .await;
    plain(&c, "three", Some("queue")).await;
    held_with(
        &c.workloads(),
        "three",
        reason::MISCONFIGURED,
        "ClusterQueue fooclusterqueue doesn't exist",
    )
    .await;
}

/// "should write granular conditions and reasons when localQueue is inactive": a LocalQueue
/// created with `stopPolicy: Hold`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_of_a_held_local_queue_is_suspended() {
    let c = Cluster::start(Limits::default().cq("cq", 1000)).await;
    c.simple("cq", "q", "1").await;
    let lqs: Api<LocalQueue> = Api::namespaced(c.client.clone(), "default");
    lqs.create(
        &PostParams::default(),
        &LocalQueue::build("inactive-q", "default")
            .cluster_queue("cq")
            .stop_policy(StopPolicy::Hold)
            .build(),
    )
    .await
    .unwrap();
    wait_for(&lqs, "inactive-q", "an Active condition", |q| {
        q.status
            .as_ref()
            .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == condition::ACTIVE))
    })
    .await;
    plain(&c, "wl-inactive-q", Some("inactive-q")).await;
    held_with(
        &c.workloads(),
        "wl-inactive-q",
        reason::SUSPENDED,
        "LocalQueue inactive-q is inactive",
    )
    .await;
}

/// "should write granular conditions and reasons when clusterQueue is inactive": a ClusterQueue
/// created with `stopPolicy: Hold`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_of_a_held_cluster_queue_is_suspended() {
    let c = Cluster::start(Limits::default().cq("inactive-cq", 0)).await;
    c.flavor("on-demand").await;
    c.cluster_queue(with_all_namespaces(
        ClusterQueue::build("inactive-cq")
            .flavor("on-demand", [("cpu", "1")])
            .stop_policy(StopPolicy::Hold)
            .build(),
    ))
    .await;
    c.local_queue("inactive-cq-q", "inactive-cq").await;
    plain(&c, "wl-inactive-cq", Some("inactive-cq-q")).await;
    held_with(
        &c.workloads(),
        "wl-inactive-cq",
        reason::SUSPENDED,
        "ClusterQueue inactive-cq is inactive",
    )
    .await;
    c.quota.assert_safe();
}

/// "should write granular conditions and reasons when workload is deactivated": created with
/// `active: false`, it is QuotaReserved=False Deactivated, Evicted=True Deactivated and
/// Admitted=False NoReservation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_created_inactive_is_deactivated_and_evicted() {
    let c = Cluster::start(Limits::default().cq("cq", 1000)).await;
    c.simple("cq", "q", "1").await;
    let wl = Workload::build("wl-deactivated", "default")
        .queue("q")
        .podset("main", 1, [("cpu", "1")])
        .active(false)
        .build();
    let wls = c.workloads();
    wls.create(&PostParams::default(), &wl).await.unwrap();
    let w = held_with(
        &wls,
        "wl-deactivated",
        reason::DEACTIVATED,
        "The workload is deactivated",
    )
    .await;
    assert_eq!(
        condition(&w, condition::EVICTED),
        cond("True", reason::DEACTIVATED, "The workload is deactivated")
    );
}

/// "with UnadmittedWorkloadsObservability feature gate enabled": "should write granular reasons
/// when waiting for quota". Kueue reserves the first workload's quota by hand; ours admits it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_waiting_for_quota_says_how_much_is_missing() {
    let c = Cluster::start(Limits::default().cq("cq", 1000)).await;
    c.flavor("on-demand").await;
    c.cluster_queue(with_all_namespaces(
        ClusterQueue::build("cq")
            .flavor("on-demand", [("cpu", "1")])
            .build(),
    ))
    .await;
    c.local_queue("q", "cq").await;
    let wls = c.workloads();
    c.workload("wl-consuming-quota", "q", 0, "1").await;
    wait_for(&wls, "wl-consuming-quota", "admitted", |w| w.is_admitted()).await;
    c.workload("wl-waiting-for-quota", "q", 0, "1").await;
    held_with(
        &wls,
        "wl-waiting-for-quota",
        reason::WAITING_FOR_QUOTA,
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 1 more needed",
    )
    .await;
    c.quota.assert_safe();
}

/// "should dynamically transition between reasons based on precedence": WaitingForQuota, then
/// Suspended when the LocalQueue is held, Deactivated when the workload is deactivated, and
/// WaitingForQuota again once both are undone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_reasons_follow_their_precedence() {
    let c = Cluster::start(Limits::default().cq("cq", 1000)).await;
    c.simple("cq", "q", "1").await;
    let wls = c.workloads();
    c.workload("wl-consuming-quota", "q", 0, "1").await;
    wait_for(&wls, "wl-consuming-quota", "admitted", |w| w.is_admitted()).await;
    c.workload("wl-transitioning", "q", 0, "1").await;
    pending_with(&wls, "wl-transitioning", reason::WAITING_FOR_QUOTA).await;

    stop_local_queue(&c, "q", StopPolicy::Hold).await;
    held_with(
        &wls,
        "wl-transitioning",
        reason::SUSPENDED,
        "LocalQueue q is inactive",
    )
    .await;

    set_active(&wls, "wl-transitioning", false).await;
    held_with(
        &wls,
        "wl-transitioning",
        reason::DEACTIVATED,
        "The workload is deactivated",
    )
    .await;

    stop_local_queue(&c, "q", StopPolicy::None).await;
    let lqs: Api<LocalQueue> = Api::namespaced(c.client.clone(), "default");
    wait_for(&lqs, "q", "Active=True Ready", |q| {
        q.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == condition::ACTIVE && c.status == "True" && c.reason == reason::READY)
        })
    })
    .await;
    set_active(&wls, "wl-transitioning", true).await;
    pending_with(&wls, "wl-transitioning", reason::WAITING_FOR_QUOTA).await;
    // The held workload of a held queue kept its reservation (Hold, not HoldAndDrain).
    let first = wls.get("wl-consuming-quota").await.unwrap();
    assert!(first.is_admitted());
    c.quota.assert_safe();
}

/// "the queue doesn't exist and is then created under the observability feature gate": "Should
/// transition status from Misconfigured to ExceedsMaxQuota when the queue is created".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misconfigured_workload_is_evaluated_once_its_queue_exists() {
    let c = Cluster::start(Limits::default().cq("cluster-queue", 0)).await;
    c.flavor("default-flavor").await;
    c.cluster_queue(with_all_namespaces(
        ClusterQueue::build("cluster-queue")
            .flavor("default-flavor", [("cpu", "0")])
            .build(),
    ))
    .await;
    let wls = c.workloads();
    plain(&c, "transition-test", Some("delayed-queue")).await;
    held_with(
        &wls,
        "transition-test",
        reason::MISCONFIGURED,
        "LocalQueue delayed-queue doesn't exist",
    )
    .await;
    c.local_queue("delayed-queue", "cluster-queue").await;
    pending_with(&wls, "transition-test", reason::EXCEEDS_MAX_QUOTA).await;
    let w = wls.get("transition-test").await.unwrap();
    let (s, r, m) = NO_RESERVATION;
    assert_eq!(condition(&w, condition::ADMITTED), cond(s, r, m));
    c.quota.assert_safe();
}

/// "a workload is manually deactivated": "should clear workload requeue state after
/// deactivation". The backoff is written by hand, as in Kueue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deactivation_clears_the_requeue_state() {
    let c = Cluster::start(Limits::default().cq("cluster-queue", 5000)).await;
    c.flavor("on-demand").await;
    c.cluster_queue(with_all_namespaces(
        ClusterQueue::build("cluster-queue")
            .cohort("cohort")
            .flavor("on-demand", [("cpu", "5")])
            .build(),
    ))
    .await;
    c.local_queue("queue", "cluster-queue").await;
    let wls = c.workloads();
    // Kept pending by a held LocalQueue so the hand-written backoff is all that holds it, as in
    // Kueue's suite where no scheduler runs.
    stop_local_queue(&c, "queue", StopPolicy::Hold).await;
    plain(&c, "reset-requeue", Some("queue")).await;
    held_with(
        &wls,
        "reset-requeue",
        reason::SUSPENDED,
        "LocalQueue queue is inactive",
    )
    .await;
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(30);
    wls.patch_status(
        "reset-requeue",
        &PatchParams::default(),
        &Patch::Merge(
            &serde_json::json!({"status": {"requeueState": {"count": 2, "requeueAt": at.to_string()}}}),
        ),
    )
    .await
    .unwrap();
    let w = wls.get("reset-requeue").await.unwrap();
    let rs = w
        .status
        .as_ref()
        .unwrap()
        .requeue_state
        .as_ref()
        .expect("requeueState written");
    assert_eq!(rs.count, Some(2));
    set_active(&wls, "reset-requeue", false).await;
    wait_for(&wls, "reset-requeue", "requeueState cleared", |w| {
        w.status.as_ref().is_some_and(|s| s.requeue_state.is_none())
    })
    .await;
}

/// "with UnadmittedWorkloadsObservability feature gate enabled, namespace selector validation":
/// "should set Misconfigured on namespace mismatch and clear it when mismatch resolved". Kueue's
/// core suite runs no scheduler, so the workload only turns PendingEvaluation there; ours is
/// evaluated at once and admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_mismatch_is_misconfigured_until_the_namespace_matches() {
    use k8s_openapi::api::core::v1::Namespace;
    let c = Cluster::start(Limits::default().cq("cq-ns-selector", 1000)).await;
    c.flavor("on-demand").await;
    let selector = serde_json::from_value(serde_json::json!({"matchLabels": {"foo": "bar"}})).unwrap();
    c.cluster_queue(
        ClusterQueue::build("cq-ns-selector")
            .namespace_selector(Some(selector))
            .flavor("on-demand", [("cpu", "1")])
            .build(),
    )
    .await;
    let nss: Api<Namespace> = Api::all(c.client.clone());
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "ns-selector"}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let lqs: Api<LocalQueue> = Api::namespaced(c.client.clone(), "ns-selector");
    lqs.create(
        &PostParams::default(),
        &LocalQueue::build("q-ns-selector", "ns-selector")
            .cluster_queue("cq-ns-selector")
            .build(),
    )
    .await
    .unwrap();
    let wls: Api<Workload> = Api::namespaced(c.client.clone(), "ns-selector");
    let wl = Workload::build("wl-ns-mismatch", "ns-selector")
        .queue("q-ns-selector")
        .podset("main", 1, [("cpu", "1")])
        .build();
    wls.create(&PostParams::default(), &wl).await.unwrap();
    held_with(
        &wls,
        "wl-ns-mismatch",
        reason::MISCONFIGURED,
        "workload namespace doesn't match ClusterQueue selector",
    )
    .await;
    nss.patch(
        "ns-selector",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"metadata": {"labels": {"foo": "bar"}}})),
    )
    .await
    .unwrap();
    wait_for(&wls, "wl-ns-mismatch", "admitted", |w| w.is_admitted()).await;
    c.quota.assert_safe();
}

/// "changing the priority value of PriorityClass changes the priority of the workload": "case of
/// WorkloadPriorityClass".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_follows_its_workload_priority_class_value() {
    use quotagate::api::kueue::WorkloadPriorityClass;
    use quotagate::api::kueue::builders::workload_priority_class;
    let c = Cluster::start(Limits::default()).await;
    let wpcs: Api<WorkloadPriorityClass> = Api::all(c.client.clone());
    wpcs.create(
        &PostParams::default(),
        &workload_priority_class("workload-priority-class", 200),
    )
    .await
    .unwrap();
    let wl = Workload::build("wl", "default")
        .queue("lq")
        .podset("main", 1, [("cpu", "1")])
        .priority_class("workload-priority-class", 200)
        .build();
    let wls = c.workloads();
    wls.create(&PostParams::default(), &wl).await.unwrap();
    let w = wait_for(&wls, "wl", "some condition", |w| {
        w.status.as_ref().is_some_and(|s| !s.conditions.is_empty())
    })
    .await;
    assert_eq!(w.spec.priority, Some(200));
    wpcs.patch(
        "workload-priority-class",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"value": 150})),
    )
    .await
    .unwrap();
    wait_for(&wls, "wl", "priority 150", |w| w.spec.priority == Some(150)).await;
}

/// Kueue: workload_controller_test.go, "Workload controller with resource retention" (KEP-1618,
/// `objectRetentionPolicies.workloads.afterFinished`): a finished Workload is deleted once the
/// retention period after its `Finished` transition is over, not before; an unfinished one stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_workload_is_deleted_once_its_retention_is_over() {
    let mut c = Cluster::start(Limits::default()).await;
    c.restart_manager_with(|o| o.workload_retention = Some(std::time::Duration::from_secs(2)))
        .await;
    c.simple("cq", "lq", "4").await;
    let wls = c.workloads();
    for name in ["done", "running"] {
        plain(&c, name, Some("lq")).await;
        wait_for(&wls, name, "admitted", reserved).await;
    }
    let finished = serde_json::json!([{"op": "add", "path": "/status/conditions/-", "value": {
        "type": "Finished", "status": "True", "reason": "Succeeded", "message": "Job finished successfully",
        "lastTransitionTime": jiff::Timestamp::now().to_string()}}]);
    let at = std::time::Instant::now();
    wls.patch_status(
        "done",
        &PatchParams::default(),
        &Patch::Json::<()>(serde_json::from_value(finished).unwrap()),
    )
    .await
    .unwrap();
    wait_gone(&wls, "done").await;
    let took = at.elapsed();
    // The condition's time has whole seconds: the period may end up to a second early.
    assert!(
        took >= std::time::Duration::from_secs(1),
        "deleted {took:?} after it finished, before its retention"
    );
    assert!(
        wls.get_opt("running").await.unwrap().is_some(),
        "an unfinished workload is kept"
    );
}
