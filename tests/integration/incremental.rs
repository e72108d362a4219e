//! Quota-gated incremental upgrades (NewClusterWithIncrementalUpgrade on a queue-managed RayService),
//! end to end: the real manager and Ray operator, the simulated in-tree autoscaler and a load of
//! 100 requests per second through the HTTPRoute, under the invariant watcher. Each surge step's
//! new workers wait for their workload slice; the active cluster's scale-down releases its quota in
//! place; the peak reservation is the active service plus one surge step, not two services.
//!
//! Source of the progression expectations: KubeRay
//! `ray-operator/test/e2eincrementalupgrade/rayservice_incremental_upgrade_test.go` (Gateway and
//! HTTPRoute, weights stepping to the new cluster, promotion); the quota half has no peer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use kube::api::Api;
use quotagate::api::kueue::ClusterQueue;
use quotagate::api::ray::RayService;
use serde_json::json;

use super::gated::{Scenario, active, cq_cpu, pending, poll};

const NS: &str = "default";

/// A queue-managed, autoscaled service: a 1-CPU head that hosts no replica (`num-cpus: 0`) plus the
/// autoscaler sidecar KubeRay injects (500m), workers of 1 CPU (0 to 4, sized by the autoscaler), and
/// 4 Serve replicas of 1 CPU each. At full capacity it reserves 5.5 CPU; a 50% surge step of the
/// pending cluster reserves its head and 2 workers, 3.5 CPU.
pub(super) fn service(name: &str, version: &str, step: i32, surge: i32) -> RayService {
    let res = |cpu: &str| json!({"requests": {"cpu": cpu, "memory": "1Gi"}});
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "rayClusterDeletionDelaySeconds": 1,
            "upgradeStrategy": {"type": "NewClusterWithIncrementalUpgrade",
                "clusterUpgradeOptions": {"gatewayClassName": "istio", "stepSizePercent": step,
                                          "intervalSeconds": 1, "maxSurgePercent": surge}},
            "serveConfigV2": "applications:\n  - name: app\n    import_path: app.graph\n    route_prefix: /\n    deployments:\n      - name: D\n        num_replicas: 4\n        ray_actor_options:\n          num_cpus: 1\n",
            "rayClusterConfig": {
                "rayVersion": version,
                "enableInTreeAutoscaling": true,
                "headGroupSpec": {"rayStartParams": {"num-cpus": "0"}, "template": {"spec": {"containers": [{"name": "ray-head",
                    "image": format!("rayproject/ray:{version}"), "resources": res("1")}]}}},
                "workerGroupSpecs": [{"groupName": "workers", "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-worker", "image": format!("rayproject/ray:{version}"),
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1"}}}]}}}]
            }
        }
    }))
    .unwrap()
}

/// Samples the ClusterQueue's reserved CPU and whether a slice of the service waited for quota, until
/// dropped.
struct Sampler {
    peak: Arc<AtomicI64>,
    saw_pending_slice: Arc<AtomicBool>,
    /// The first read of the service not Ready, or with no serve endpoint, after it served (I8).
    gap: Arc<std::sync::Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    fn start(s: &Scenario) -> Sampler {
        let peak = Arc::new(AtomicI64::new(0));
        let saw = Arc::new(AtomicBool::new(false));
        let gap = Arc::new(std::sync::Mutex::new(None));
        let (p, w, g) = (peak.clone(), saw.clone(), gap.clone());
        let cqs: Api<ClusterQueue> = Api::all(s.c.client.clone());
        let wls = s.c.workloads();
        let services = s.services();
        let task = tokio::spawn(async move {
            let mut served = false;
            loop {
                if let Ok(rs) = services.get("rs").await {
                    let endpoints = rs
                        .status
                        .as_ref()
                        .and_then(|st| st.num_serve_endpoints)
                        .unwrap_or(0);
                    let ok = super::gated::ready(&rs) && endpoints > 0;
                    if served && !ok {
                        let mut g = g.lock().unwrap();
                        if g.is_none() {
                            *g = Some(format!(
                                "active {:?}, pending {:?}, {endpoints} endpoint(s): {:?}",
                                active(&rs),
                                pending(&rs),
                                rs.status.as_ref().map(|st| &st.conditions)
                            ));
                        }
                    }
                    served |= ok;
                }
                if let Ok(cq) = cqs.get("cq").await {
                    p.fetch_max(cq_cpu(&cq), Ordering::SeqCst);
                }
                if let Ok(list) = wls.list(&Default::default()).await
                    && list
                        .items
                        .iter()
                        .any(|wl| !wl.is_finished() && !wl.has_quota_reservation())
                {
                    w.store(true, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        });
        Sampler {
            peak,
            saw_pending_slice: saw,
            gap,
            task,
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The ClusterQueue holds 9 CPU: the running service (5.5) plus one surge step (3.5), not two (11).
/// The upgrade completes; the reservation peaks at exactly 9; the second step's slice waited for
/// the active cluster's scale-down to release quota; the load through the HTTPRoute lost nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_gated_incremental_upgrade_peaks_at_one_surge_step_and_drops_nothing() {
    let s = Scenario::start("9", 9000).await;
    let old = s.serving(service("rs", "2.46.0", 25, 50)).await;
    // The autoscaler grows the first cluster to the 4 workers Serve wants; its slice follows.
    s.wait_cq_cpu(5500).await;
    let load = s.c.load.clone().expect("the simulated load runs");
    poll("load through the route", || async {
        let counts = load.counts();
        counts.iter().any(|(_, c)| c.ok > 0).then_some(())
    })
    .await;
    let sampler = Sampler::start(&s);
    let route_counts = || {
        let counts = load.counts();
        counts
            .into_iter()
            .find(|((_, r), _)| r == "rs-httproute")
            .map(|(_, c)| c)
            .expect("the route's load")
    };
    // Requests sent before the first cluster was Ready may have failed; the upgrade is what counts.
    let before = route_counts();

    s.patch_version("rs", "2.47.0").await;
    let rs = s
        .wait_rs("rs", "a pending cluster", |r| pending(r).is_some())
        .await;
    let new = pending(&rs).unwrap();
    let rs = s
        .wait_rs("rs", "the promotion of the new cluster", |r| {
            active(r).as_deref() == Some(new.as_str()) && pending(r).is_none()
        })
        .await;
    let st = rs
        .status
        .as_ref()
        .unwrap()
        .active_service_status
        .as_ref()
        .unwrap();
    assert_eq!(
        (st.target_capacity, st.traffic_routed_percent),
        (Some(100), Some(100))
    );
    // KubeRay's e2eincrementalupgrade: "The HTTPRoute should now only have one backend after it
    // completes" (within its TestTimeoutShort): the new cluster alone at weight 100, before the old
    // cluster's deletion delay ran out.
    let routes: Api<quotagate::api::gateway::HTTPRoute> = Api::namespaced(s.c.client.clone(), "default");
    let backends = poll("one backend on the route", || async {
        let route = routes.get("rs-httproute").await.unwrap();
        let refs: Vec<(String, Option<i32>)> = route
            .spec
            .rules
            .unwrap_or_default()
            .into_iter()
            .flat_map(|r| r.backend_refs.unwrap_or_default())
            .map(|b| (b.name, b.weight))
            .collect();
        (refs.len() == 1).then_some(refs)
    })
    .await;
    assert_eq!(backends, vec![(format!("{new}-serve-svc"), Some(100))]);
    s.wait_gone(&old).await;
    s.wait_cq_cpu(5500).await;

    assert_eq!(
        sampler.peak.load(Ordering::SeqCst),
        9000,
        "the peak reservation is the service plus one surge step"
    );
    assert!(
        sampler.saw_pending_slice.load(Ordering::SeqCst),
        "the second surge step waited for quota the active cluster had not yet released"
    );
    let c = route_counts();
    assert_eq!(
        c.failed, before.failed,
        "requests failed during the upgrade from {old} to {new}: {c:?}, before it: {before:?}"
    );
    assert!(
        c.sent > before.sent + 100,
        "the load ran through the upgrade: {c:?}"
    );
    let ok_on = |cluster: &str| {
        c.per_backend
            .get(&format!("{cluster}-serve-svc"))
            .map_or(0, |(ok, _)| *ok)
    };
    assert!(ok_on(&old) > 0 && ok_on(&new) > 0, "both clusters served: {c:?}");
    let gap = sampler.gap.lock().unwrap().clone();
    assert_eq!(gap, None, "the service stopped serving during the upgrade");
    s.inv.assert_clean();
    s.c.quota.assert_safe();
}
