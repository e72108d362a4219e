//! Issue 44: a Workload whose status someone else writes as admitted (Kueue's trust model: any account
//! with `workloads/status` rights may) holds its quota as Kueue's cache counts it: the ClusterQueue
//! reports it reserved, and the next admission sees the quota it takes.

use kube::api::{Api, Patch, PatchParams, PostParams};
use quotagate::api::kueue::{ClusterQueue, Workload};
use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_admitted_by_someone_else_holds_its_quota() {
    let c = Cluster::start(Limits::default()).await;
    c.simple("cq", "lq", "2").await;
    let wls = c.workloads();
    // Needs 3 CPU of a 2-CPU queue: it waits.
    let big = Workload::build("big", "default")
        .queue("lq")
        .podset("main", 1, [("cpu", "3")])
        .build();
    wls.create(&PostParams::default(), &big).await.unwrap();
    wait_for(&wls, "big", "considered and held", |w| {
        condition(w, "QuotaReserved").is_some_and(|(s, _, _)| s == "False")
    })
    .await;

    // Someone with workloads/status rights writes it admitted.
    let now = "2026-01-01T00:00:00Z";
    let status = json!({"status": {
    "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "3"}}]},
    "conditions": [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime": now},
        {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted", "lastTransitionTime": now}
    ]}});
    wls.patch_status("big", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();

    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    let cq = wait_for(
        &cqs,
        "cq",
        "the ClusterQueue counting the outside admission",
        |cq| cq.status.as_ref().is_some_and(|s| s.reserving_workloads == 1),
    )
    .await;
    let usage = serde_json::to_value(&cq.status.as_ref().unwrap().flavors_reservation).unwrap();
    assert!(
        usage.to_string().contains(r#""total":"3""#),
        "the ClusterQueue reserves what the admission says: {usage}"
    );

    // One more CPU does not fit beside it.
    let small = Workload::build("small", "default")
        .queue("lq")
        .podset("main", 1, [("cpu", "1")])
        .build();
    wls.create(&PostParams::default(), &small).await.unwrap();
    let held = wait_for(&wls, "small", "considered", |w| {
        condition(w, "QuotaReserved").is_some()
    })
    .await;
    assert_eq!(
        condition(&held, "QuotaReserved").map(|c| c.0),
        Some("False".to_string()),
        "admitted beside 3 CPU of a 2-CPU queue"
    );
    let big = wls.get("big").await.unwrap();
    assert!(reserved(&big), "the outside admission stands");
}
