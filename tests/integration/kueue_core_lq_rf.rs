//! Kueue's `test/integration/singlecluster/controller/core/{localqueue,resourceflavor}_controller_test.go`
//! on the embedded cluster with the real manager, each test naming the Kueue spec it ports. Quota
//! is reserved by hand as in Kueue's core suite (see `kueue_core_queues.rs`).

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use quotagate::api::kueue::constants::RESOURCE_IN_USE_FINALIZER;
use quotagate::api::kueue::{ClusterQueue, FlavorQuotas, LocalQueueStatus, ResourceFlavor, ResourceGroup};
use quotagate::api::quantity::{Quantity, resource_value};

use crate::kueue_core_queues::{GPU, active, gone, lq_status, reserve, t, workload};
use crate::kueue_scheduler_more::finish;
use crate::support::*;

/// LocalQueue flavor usage as (flavor, resource, total), in the order written.
fn lq_usage(u: &[quotagate::api::kueue::LocalQueueFlavorUsage]) -> Vec<(String, String, i64)> {
    u.iter()
        .flat_map(|f| {
            f.resources.iter().map(|r| {
                let v = r
                    .total
                    .as_ref()
                    .map_or(0, |q| resource_value(&r.name, &Quantity::try_from(q).unwrap()));
                (f.name.clone(), r.name.clone(), v)
            })
        })
        .collect()
}

/// Kueue's LocalQueue usage of "cluster-queue.queue-controller": model-d then model-c.
fn lq_at(d: i64, c: i64) -> Vec<(String, String, i64)> {
    vec![
        ("model-d".into(), GPU.into(), d),
        ("model-c".into(), GPU.into(), c),
    ]
}

/// Kueue's `localqueue_controller_test.go` ClusterQueue: 5 GPUs in model-d and in model-c.
fn lq_cq() -> ClusterQueue {
    with_all_namespaces(
        ClusterQueue::build("cluster-queue.queue-controller")
            .cohort("cohort")
            .flavor_quotas(
                FlavorQuotas::build("model-d")
                    .resource_with_limits(GPU, "5", Some("5"), None)
                    .build(),
            )
            .flavor_quotas(
                FlavorQuotas::build("model-c")
                    .resource_with_limits(GPU, "5", Some("5"), None)
                    .build(),
            )
            .build(),
    )
}

/// The ResourceFlavors and ClusterQueue of `resourceflavor_controller_test.go`.
async fn flavor_setup(c: &Cluster) {
    c.flavor("on-demand").await;
    c.flavor("spot").await;
    c.cluster_queue(with_all_namespaces(
        ClusterQueue::build("cluster-queue")
            .flavor("on-demand", [("cpu", "5")])
            .build(),
    ))
    .await;
    let api: Api<ResourceFlavor> = Api::all(c.client.clone());
    wait_for(&api, "on-demand", "the resource-in-use finalizer", |f| {
        f.metadata.finalizers.as_deref() == Some(&[RESOURCE_IN_USE_FINALIZER.to_string()][..])
    })
    .await;
}

/// `resourceflavor_controller_test.go`, "Should delete the resourceFlavor when the corresponding
/// clusterQueue no longer uses the resourceFlavor".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flavor_is_deleted_once_no_cluster_queue_references_it() {
    let c = Cluster::start(Limits::default()).await;
    flavor_setup(&c).await;
    let flavors: Api<ResourceFlavor> = Api::all(c.client.clone());
    flavors
        .delete("on-demand", &DeleteParams::default())
        .await
        .unwrap();
    let f = wait_for(&flavors, "on-demand", "deleting", |f| {
        f.metadata.deletion_timestamp.is_some()
    })
    .await;
    assert_eq!(
        f.metadata.finalizers.as_deref(),
        Some(&[RESOURCE_IN_USE_FINALIZER.to_string()][..])
    );
    // Still referenced: a cycle that saw the deletion (it saw the later flavor "x") keeps it.
    c.flavor("x").await;
    wait_for(&flavors, "x", "the resource-in-use finalizer", |f| {
        f.metadata.finalizers.as_deref() == Some(&[RESOURCE_IN_USE_FINALIZER.to_string()][..])
    })
    .await;
    assert!(flavors.get_opt("on-demand").await.unwrap().is_some());

    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    // A patch, not a read-then-replace: the manager writes the ClusterQueue's status meanwhile.
    let groups = vec![ResourceGroup {
        covered_resources: vec!["cpu".into()],
        flavors: vec![FlavorQuotas::build("spot").resource("cpu", "5").build()],
    }];
    let patch = serde_json::json!({"spec": {"resourceGroups": groups}});
    cqs.patch("cluster-queue", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    gone(&flavors, "on-demand").await;
}

/// `resourceflavor_controller_test.go`, "Should delete the resourceFlavor when the corresponding
/// clusterQueue is deleted".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flavor_is_deleted_once_its_cluster_queue_is() {
    let c = Cluster::start(Limits::default()).await;
    flavor_setup(&c).await;
    let flavors: Api<ResourceFlavor> = Api::all(c.client.clone());
    flavors
        .delete("on-demand", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&flavors, "on-demand", "deleting", |f| {
        f.metadata.deletion_timestamp.is_some()
    })
    .await;
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    cqs.delete("cluster-queue", &DeleteParams::default())
        .await
        .unwrap();
    gone(&cqs, "cluster-queue").await;
    gone(&flavors, "on-demand").await;
}

/// `localqueue_controller_test.go`, "Should update conditions when clusterQueues that its
/// localQueue references are updated": ClusterQueueDoesNotExist, ClusterQueueIsInactive while its
/// flavors are missing, Ready, and ClusterQueueDoesNotExist again once it is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_queue_active_condition_follows_its_cluster_queue() {
    let c = Cluster::start(Limits::default()).await;
    c.local_queue("queue", "cluster-queue.queue-controller").await;
    let is = |status: &'static str, why: &'static str, msg: &'static str| {
        move |s: &LocalQueueStatus| active(&s.conditions) == t(status, why, msg)
    };
    const NO_SUBMIT: &str = "Can't submit new workloads to clusterQueue";
    let s = lq_status(
        &c,
        "queue",
        "no ClusterQueue",
        is("False", "ClusterQueueDoesNotExist", NO_SUBMIT),
    )
    .await;
    assert!(s.flavors_reservation.is_empty() && s.flavors_usage.is_empty());
    c.cluster_queue(lq_cq()).await;
    let s = lq_status(
        &c,
        "queue",
        "ClusterQueue inactive",
        is("False", "ClusterQueueIsInactive", NO_SUBMIT),
    )
    .await;
    assert_eq!(lq_usage(&s.flavors_reservation), lq_at(0, 0));
    assert_eq!(lq_usage(&s.flavors_usage), lq_at(0, 0));
    c.flavor("model-c").await;
    c.flavor("model-d").await;
    let s = lq_status(
        &c,
        "queue",
        "ready",
        is("True", "Ready", "Can submit new workloads to localQueue"),
    )
    .await;
    assert_eq!(lq_usage(&s.flavors_reservation), lq_at(0, 0));
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    cqs.delete("cluster-queue.queue-controller", &DeleteParams::default())
        .await
        .unwrap();
    let s = lq_status(
        &c,
        "queue",
        "no ClusterQueue again",
        is("False", "ClusterQueueDoesNotExist", NO_SUBMIT),
    )
    .await;
    assert!(s.flavors_reservation.is_empty() && s.flavors_usage.is_empty());
}

/// Workloads "one", "two" and "three" of `localqueue_controller_test.go`, reserved by hand as
/// Kueue does (2 and 3 GPUs in model-c, 1 in model-d). They ask for more GPUs than a flavor holds
/// so that only the hand-written reservations admit them.
async fn lq_workloads_reserved(c: &Cluster) {
    let wls = c.workloads();
    for n in ["one", "two", "three"] {
        workload(c, n, "queue", &[(GPU, "6")]).await;
    }
    ready_with(c, "3 pending", (3, 0, 0), lq_at(0, 0)).await;
    reserve(
        &wls,
        "one",
        "cluster-queue.queue-controller",
        &[("main", 1, &[(GPU, "model-c", "2")])],
    )
    .await;
    reserve(
        &wls,
        "two",
        "cluster-queue.queue-controller",
        &[("main", 1, &[(GPU, "model-c", "3")])],
    )
    .await;
    reserve(
        &wls,
        "three",
        "cluster-queue.queue-controller",
        &[("main", 1, &[(GPU, "model-d", "1")])],
    )
    .await;
    ready_with(c, "3 admitted", (0, 3, 3), lq_at(1, 5)).await;
}

/// Waits until LocalQueue "queue" is Ready with these (pending, reserving, admitted) counts and this
/// reservation and usage. Kueue's Eventually compares the whole status: the counts can be written
/// before the ClusterQueue is seen (its flavors still unknown), so the wait is on all of it.
async fn ready_with(c: &Cluster, what: &str, counts: (i32, i32, i32), usage: Vec<(String, String, i64)>) {
    lq_status(c, "queue", what, |s| {
        (s.pending_workloads, s.reserving_workloads, s.admitted_workloads) == counts
            && lq_usage(&s.flavors_reservation) == usage
            && lq_usage(&s.flavors_usage) == usage
            && active(&s.conditions) == t("True", "Ready", "Can submit new workloads to localQueue")
    })
    .await;
}

async fn lq_setup(c: &Cluster) {
    c.flavor("model-c").await;
    c.flavor("model-d").await;
    c.local_queue("queue", "cluster-queue.queue-controller").await;
    c.cluster_queue(lq_cq()).await;
}

/// `localqueue_controller_test.go`, "Should update status when workloads are created": pending,
/// reserving and admitted counts and per-flavor usage follow the workloads, back to zero once
/// they finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_queue_status_follows_its_workloads() {
    let c = Cluster::start(Limits::default()).await;
    lq_setup(&c).await;
    lq_workloads_reserved(&c).await;
    let wls = c.workloads();
    for n in ["one", "two", "three"] {
        finish(&wls, n).await;
    }
    let s = lq_status(&c, "queue", "nothing left", |s| {
        (s.pending_workloads, s.reserving_workloads, s.admitted_workloads) == (0, 0, 0)
    })
    .await;
    assert_eq!(lq_usage(&s.flavors_reservation), lq_at(0, 0));
    assert_eq!(lq_usage(&s.flavors_usage), lq_at(0, 0));
}

/// `localqueue_controller_test.go`, "Should update status when ClusterQueue are forcefully
/// deleted": its finalizer stripped by hand, the ClusterQueue goes while workloads hold quota,
/// and the LocalQueue reports nothing reserved and ClusterQueueDoesNotExist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_queue_status_after_its_cluster_queue_is_forcefully_deleted() {
    let c = Cluster::start(Limits::default()).await;
    lq_setup(&c).await;
    lq_workloads_reserved(&c).await;
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    cqs.delete("cluster-queue.queue-controller", &DeleteParams::default())
        .await
        .unwrap();
    cqs.patch(
        "cluster-queue.queue-controller",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&serde_json::json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    gone(&cqs, "cluster-queue.queue-controller").await;
    let s = lq_status(&c, "queue", "ClusterQueueDoesNotExist", |s| {
        active(&s.conditions)
            == t(
                "False",
                "ClusterQueueDoesNotExist",
                "Can't submit new workloads to clusterQueue",
            )
    })
    .await;
    assert_eq!(
        (s.pending_workloads, s.reserving_workloads, s.admitted_workloads),
        (0, 0, 0)
    );
    assert!(s.flavors_reservation.is_empty() && s.flavors_usage.is_empty());
}
