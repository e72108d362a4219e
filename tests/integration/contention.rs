//! Quota-gated upgrades under contention (issue 45): services and batch work in one ClusterQueue,
//! end to end on the embedded cluster with the real manager and Ray operator, under the invariant
//! watcher.

use kube::api::{Api, PostParams};
use quotagate::api::kueue::WorkloadPriorityClass;
use quotagate::api::kueue::constants::label;
use serde_json::json;

use super::gated::{Scenario, active, poll, service};
use super::support::*;

/// A production upgrade preempts lower-priority batch work in its own ClusterQueue: only the
/// upgrade's growth has to fit once the victims are gone, as Kueue's slices preempt (the slice
/// it replaces counts as freed). Before, its slice waited forever with "Workload no longer fits
/// after processing another workload" while a plain Workload of the same priority preempted at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_production_upgrade_preempts_batch_work_in_its_queue() {
    let s = Scenario::start("4", 4000).await;
    let cqs: Api<quotagate::api::kueue::ClusterQueue> = Api::all(s.c.client.clone());
    cqs.patch(
        "cq",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&json!({"spec": {"preemption": {"withinClusterQueue": "LowerPriority"}}})),
    )
    .await
    .unwrap();
    let wpc: Api<WorkloadPriorityClass> = Api::all(s.c.client.clone());
    wpc.create(
        &PostParams::default(),
        &quotagate::api::kueue::builders::workload_priority_class("prod", 1000),
    )
    .await
    .unwrap();
    let mut rs = service("rs", "1", "2.46.0");
    rs.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(label::PRIORITY_CLASS.to_string(), "prod".to_string());
    let old = s.serving(rs).await;
    // Batch work fills the rest of the queue: 2 CPU of service + 2 x 1 CPU.
    for name in ["batch-1", "batch-2"] {
        s.c.workload(name, "lq", 0, "1").await;
        wait_for(&s.c.workloads(), name, "admitted", reserved).await;
    }
    s.wait_cq_cpu(4000).await;

    s.patch_version("rs", "2.47.0").await;
    // Both batch workloads make room for the new cluster (2 CPU), with Kueue's reason.
    for name in ["batch-1", "batch-2"] {
        let w = wait_for(&s.c.workloads(), name, "preempted", |w| {
            condition(w, "Preempted").is_some_and(|(st, _, _)| st == "True")
        })
        .await;
        let (_, reason, message) = condition(&w, "Preempted").unwrap();
        assert_eq!(reason, "InClusterQueue", "{message}");
        assert!(
            message.contains("due to prioritization in the ClusterQueue"),
            "{message}"
        );
    }
    let rs = s
        .wait_rs("rs", "the upgrade to complete", |r| {
            active(r).is_some_and(|a| a != old)
        })
        .await;
    s.wait_gone(&old).await;
    // The old cluster's quota goes back to the batch work.
    for name in ["batch-1", "batch-2"] {
        wait_for(&s.c.workloads(), name, "admitted again", reserved).await;
    }
    s.wait_cq_cpu(4000).await;
    let now = s.clusters().get(&active(&rs).unwrap()).await.unwrap();
    assert_eq!(now.spec.ray_version.as_deref(), Some("2.47.0"));
    poll("the service to stay unsuspended", || async {
        let r = s.services().get("rs").await.unwrap();
        (r.spec.suspend != Some(true)).then_some(())
    })
    .await;
    s.inv.assert_clean();
}
