//! Issue 45 item 3: preempting a RayService in the middle of an upgrade takes the upgrade's growth
//! first. The service's aggregated slice shrinks back to what its serving cluster holds, the
//! pending cluster is gated again (its pods removed) and the upgrade waits for a new slice; the
//! serving cluster is never deleted and the service stays Ready with serve endpoints throughout
//! (sampled every 25 ms, as tests/integration/incremental.rs does). Beyond Kueue, which evicts the
//! whole job (`pkg/scheduler/preemption/preemption_test.go`, slices preempted whole; the issue saw
//! 2.6 s with no ready head). Where the growth alone does not free enough, the whole service is
//! evicted as Kueue does: tests/integration/gated.rs (d).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use quotagate::api::kueue::{ClusterQueue, Workload};
use quotagate::api::ray::RayService;
use serde_json::json;

use super::gated::{Scenario, active, pending, poll, ready, service};
use super::invariants::Invariants;
use super::support::*;

const NS: &str = "default";

/// A Serve config whose import fails on the simulated Ray: the pending cluster runs but never
/// serves, so the upgrade stays in flight (its growth admitted) until the config is fixed.
const BROKEN: &str = "applications:\n  - name: app\n    import_path: no_such_module.graph\n    route_prefix: /\n    deployments:\n      - name: D\n        num_replicas: 1\n";
const GOOD: &str = "applications:\n  - name: app\n    import_path: app.graph\n    route_prefix: /\n    deployments:\n      - name: D\n        num_replicas: 1\n";

/// Samples service `name` every 25 ms; records the first read not Ready, with no serve endpoint,
/// suspended or with no active cluster, until dropped.
pub(super) struct GapWatch {
    gap: Arc<Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl GapWatch {
    pub(super) fn start(services: Api<RayService>, name: &'static str) -> GapWatch {
        let gap = Arc::new(Mutex::new(None));
        let g = gap.clone();
        let task = tokio::spawn(async move {
            loop {
                if let Ok(rs) = services.get(name).await {
                    let endpoints = rs
                        .status
                        .as_ref()
                        .and_then(|st| st.num_serve_endpoints)
                        .unwrap_or(0);
                    if !(ready(&rs)
                        && endpoints > 0
                        && active(&rs).is_some()
                        && rs.spec.suspend != Some(true))
                    {
                        let mut g = g.lock().unwrap();
                        if g.is_none() {
                            *g = Some(format!(
                                "active {:?}, pending {:?}, {endpoints} endpoint(s), suspend {:?}: {:?}",
                                active(&rs),
                                pending(&rs),
                                rs.spec.suspend,
                                rs.status.as_ref().map(|st| &st.conditions)
                            ));
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        });
        GapWatch { gap, task }
    }

    pub(super) fn assert_no_gap(&self) {
        assert_eq!(*self.gap.lock().unwrap(), None, "the service stopped serving");
    }
}

impl Drop for GapWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn patch_rs(s: &Scenario, name: &str, patch: serde_json::Value) {
    s.services()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Starts an upgrade of `name` whose new version never serves; returns its pending cluster once
/// its slice (serving + growth) holds quota and its pods run.
async fn upgrade_in_flight(s: &Scenario, name: &str) -> String {
    patch_rs(
        s,
        name,
        json!({"spec": {"serveConfigV2": BROKEN, "rayClusterConfig": {"rayVersion": "2.47.0"}}}),
    )
    .await;
    let rs = s
        .wait_rs(name, "a pending cluster", |r| pending(r).is_some())
        .await;
    let p = pending(&rs).unwrap();
    poll("the pending cluster's pods to run", || async {
        (s.pods_of(&p).await.len() == 2).then_some(())
    })
    .await;
    p
}

/// The service's latest admitted slice once it says GrowthPreempted=True; its (reason, message).
async fn growth_preempted(s: &Scenario, name: &str) -> (String, String) {
    poll("GrowthPreempted on the service's slice", || async {
        s.workloads_of(name).await.iter().find_map(|w: &Workload| {
            condition(w, "GrowthPreempted")
                .filter(|(st, _, _)| st == "True")
                .map(|(_, r, m)| (r, m))
        })
    })
    .await
}

/// The Warning event on RayService `name` that says its growth was taken.
pub(super) async fn growth_event(s: &Scenario, name: &str) -> String {
    let events: Api<Event> = Api::namespaced(s.c.client.clone(), NS);
    poll("the UpgradeGrowthPreempted event", || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find_map(|e| {
                let about = e.regarding.as_ref().is_some_and(|r| {
                    r.name.as_deref() == Some(name) && r.kind.as_deref() == Some("RayService")
                });
                (about
                    && e.reason.as_deref() == Some("UpgradeGrowthPreempted")
                    && e.type_.as_deref() == Some("Warning"))
                .then(|| e.note.unwrap_or_default())
            })
    })
    .await
}

/// Fixes the config and waits until the upgrade has completed (a new active cluster, no pending).
async fn upgrade_completes(s: &Scenario, name: &str, old: &str) {
    patch_rs(s, name, json!({"spec": {"serveConfigV2": GOOD}})).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let rs = s.services().get(name).await.unwrap();
        if active(&rs).is_some_and(|a| a != old) && pending(&rs).is_none() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the upgrade did not complete: active {:?}, pending {:?}",
            active(&rs),
            pending(&rs)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.wait_gone(old).await;
}

/// Within a ClusterQueue (`withinClusterQueue: LowerPriority`): a high-priority workload that fits
/// in the upgrade's growth takes only the growth; the service keeps serving on its cluster, the
/// pending cluster's pods go, and the upgrade completes once the workload is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_priority_workload_takes_only_the_upgrades_growth() {
    let s = Scenario::start("4", 4000).await;
    let cqs: Api<ClusterQueue> = Api::all(s.c.client.clone());
    cqs.patch(
        "cq",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"preemption": {"withinClusterQueue": "LowerPriority"}}})),
    )
    .await
    .unwrap();
    let old = s.serving(service("rs", "1", "2.46.0")).await;
    let watch = GapWatch::start(s.services(), "rs");
    let p = upgrade_in_flight(&s, "rs").await;
    s.wait_cq_cpu(4000).await;

    s.c.workload("urgent", "lq", 1000, "2").await;
    let (reason, message) = growth_preempted(&s, "rs").await;
    assert_eq!(reason, "InClusterQueue", "{message}");
    assert!(
        message.contains("due to prioritization in the ClusterQueue") && message.contains("only the growth"),
        "{message}"
    );
    wait_for(&s.c.workloads(), "urgent", "admitted", reserved).await;
    poll("the pending cluster's pods to be gone", || async {
        s.pods_of(&p).await.is_empty().then_some(())
    })
    .await;
    assert_eq!(
        s.pods_of(&old).await.len(),
        2,
        "the serving cluster keeps its pods"
    );
    let note = growth_event(&s, "rs").await;
    assert!(note.contains("InClusterQueue"), "{note}");
    // The service's condition says why its upgrade waits again (its controller's next pass).
    s.wait_rs("rs", "UpgradeInProgress to say the growth was taken", |rs| {
        rs.status
            .as_ref()
            .and_then(|st| st.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "UpgradeInProgress"))
            .is_some_and(|c| {
                c.message.contains("upgrade's growth was taken") && c.message.contains("InClusterQueue")
            })
    })
    .await;
    // Service 2 + urgent 2: the growth went, nothing more.
    s.wait_cq_cpu(4000).await;
    assert!(
        s.clusters().get_opt(&p).await.unwrap().is_some(),
        "the pending cluster stays, gated"
    );

    s.c.workloads()
        .delete("urgent", &DeleteParams::default())
        .await
        .unwrap();
    upgrade_completes(&s, "rs", &old).await;
    watch.assert_no_gap();
    drop(watch);
    s.wait_cq_cpu(2000).await;
    s.inv.assert_clean();
    s.c.quota.assert_safe();
}

/// The case 3: two ClusterQueues in a Cohort, `reclaimWithinCohort: Any`. Service A's upgrade
/// borrows B's quota; a workload of B reclaims it. Only A's growth goes (InCohortReclamation): A's
/// serving cluster is never deleted, A stays Ready with serve endpoints throughout, and its upgrade
/// completes once B's quota is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cohort_reclaim_during_an_upgrade_leaves_the_service_serving() {
    cohort_reclaim(false).await;
}

/// The same with fair sharing on (Kueue's fair-sharing preemption evicts whole, as its classical
/// preemption does: `test/integration/singlecluster/scheduler/fairsharing/fair_sharing_test.go`
/// "Preemption is enabled"); here the fair-sharing strategies judge A's growth first, and B, asking
/// within its nominal quota, takes only that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cohort_reclaim_with_fair_sharing_takes_only_the_growth() {
    cohort_reclaim(true).await;
}

async fn cohort_reclaim(fair_sharing: bool) {
    let mut c = Cluster::start_with_ray_on(
        quotagate::wiring::manager::embedded_server(),
        Limits::default()
            .cq("cq-a", 4000)
            .cq("cq-b", 2000)
            .group(&["cq-a", "cq-b"], 4000),
    )
    .await;
    if fair_sharing {
        c.restart_manager_with(|o| o.fair_sharing = Some(quotagate::queue::FairSharingConfig::default()))
            .await;
    }
    let inv = Invariants::start(c.client.clone());
    c.flavor("default").await;
    for q in ["cq-a", "cq-b"] {
        let mut cq = cq_with(q, "2").cohort("co").build();
        cq.spec.namespace_selector = Some(Default::default());
        c.cluster_queue(cq).await;
    }
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    cqs.patch(
        "cq-b",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"preemption": {"reclaimWithinCohort": "Any"}}})),
    )
    .await
    .unwrap();
    c.local_queue("lq-a", "cq-a").await;
    c.local_queue("lq-b", "cq-b").await;
    let s = Scenario { c, inv };

    let mut rs = service("rs", "1", "2.46.0");
    rs.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("kueue.x-k8s.io/queue-name".into(), "lq-a".into());
    let old = s.serving(rs).await;
    let watch = GapWatch::start(s.services(), "rs");
    let p = upgrade_in_flight(&s, "rs").await;

    s.c.workload("b-work", "lq-b", 0, "2").await;
    let (reason, message) = growth_preempted(&s, "rs").await;
    assert_eq!(reason, "InCohortReclamation", "{message}");
    assert!(
        message.contains("due to reclamation within the cohort") && message.contains("only the growth"),
        "{message}"
    );
    wait_for(&s.c.workloads(), "b-work", "admitted", reserved).await;
    poll("the pending cluster's pods to be gone", || async {
        s.pods_of(&p).await.is_empty().then_some(())
    })
    .await;
    assert_eq!(
        s.pods_of(&old).await.len(),
        2,
        "the serving cluster keeps its pods"
    );
    growth_event(&s, "rs").await;

    s.c.workloads()
        .delete("b-work", &DeleteParams::default())
        .await
        .unwrap();
    upgrade_completes(&s, "rs", &old).await;
    watch.assert_no_gap();
    drop(watch);
    s.inv.assert_clean();
    s.c.quota.assert_safe();
}

/// An incremental upgrade (KubeRay's `NewClusterWithIncrementalUpgrade`, quota-gated step by step)
/// whose growth preemption took before any traffic moved to its pending cluster resumes once the
/// quota is back: the pending cluster's first step goes, the serving cluster keeps its pods and
/// serves throughout, and after the preemptor leaves the upgrade asks for a new slice and completes
/// (the path chaos seed 47 stalled on; `growth_tests` has the unit half).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incremental_upgrade_whose_growth_was_taken_resumes_and_completes() {
    // The service at full capacity (5.5 CPU) and one 50% step of its pending cluster (3.5 CPU).
    let s = Scenario::start("9", 9000).await;
    let cqs: Api<ClusterQueue> = Api::all(s.c.client.clone());
    cqs.patch(
        "cq",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"preemption": {"withinClusterQueue": "LowerPriority"}}})),
    )
    .await
    .unwrap();
    let rs = super::incremental::service("rs", "2.46.0", 50, 50);
    let good = rs.spec.serve_config_v2.clone().unwrap_or_default();
    let old = s.serving(rs).await;
    poll("the serving cluster at full capacity", || async {
        (s.pods_of(&old).await.len() == 5).then_some(())
    })
    .await;
    let watch = GapWatch::start(s.services(), "rs");

    // The new version's first step runs but never serves (its import fails), so no traffic moves.
    let broken = good.replace("import_path: app.graph", "import_path: no_such_module.graph");
    patch_rs(
        &s,
        "rs",
        json!({"spec": {"serveConfigV2": broken, "rayClusterConfig": {"rayVersion": "2.47.0"}}}),
    )
    .await;
    let p = pending(
        &s.wait_rs("rs", "a pending cluster", |r| pending(r).is_some())
            .await,
    )
    .unwrap();
    // Its slice holds the whole first step (head and two workers) though Serve, failing, asks the
    // autoscaler for no worker yet.
    poll("the pending cluster's head to run", || async {
        (!s.pods_of(&p).await.is_empty()).then_some(())
    })
    .await;
    s.wait_cq_cpu(9000).await;

    s.c.workload("urgent", "lq", 1000, "3").await;
    let (reason, message) = growth_preempted(&s, "rs").await;
    assert_eq!(reason, "InClusterQueue", "{message}");
    wait_for(&s.c.workloads(), "urgent", "admitted", reserved).await;
    poll("the pending cluster's pods to be gone", || async {
        s.pods_of(&p).await.is_empty().then_some(())
    })
    .await;
    assert_eq!(
        s.pods_of(&old).await.len(),
        5,
        "the serving cluster keeps its pods"
    );

    // The preemptor leaves and the config is fixed: a new slice, the steps, the promotion.
    s.c.workloads()
        .delete("urgent", &DeleteParams::default())
        .await
        .unwrap();
    patch_rs(&s, "rs", json!({"spec": {"serveConfigV2": good}})).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let rs = s.services().get("rs").await.unwrap();
        if active(&rs).is_some_and(|a| a != old) && pending(&rs).is_none() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the upgrade did not resume: active {:?}, pending {:?}",
            active(&rs),
            pending(&rs)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.wait_gone(&old).await;
    watch.assert_no_gap();
    drop(watch);
    s.wait_cq_cpu(5500).await;
    s.inv.assert_clean();
    s.c.quota.assert_safe();
}
