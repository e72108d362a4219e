//! The banker's check end to end (issue 45 item 1): two RayServices whose new version asks more
//! per replica than the old upgrade incrementally through one ClusterQueue sized so that, both
//! admitted with their first step, neither could take its next grow (each old cluster's half frees
//! 1 CPU, each new half needs 3): a deadlock for good. With the check, one waits with the banker's
//! message, the other goes first, then it follows; both complete. No peer has this (Kueue admits a
//! RayService whole).

use kube::api::{Patch, PatchParams};
use quotagate::api::ray::RayService;
use serde_json::json;

use super::gated::{Scenario, active, pending};
use super::support::*;

const NS: &str = "default";

/// An autoscaled incremental service (50% surge and step, two Serve replicas of 1 CPU; Ray sees one
/// CPU per worker): its head asks `head` CPUs (plus the 500m autoscaler sidecar), each worker `worker`.
pub(super) fn service(name: &str, head: &str, worker: &str) -> RayService {
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "rayClusterDeletionDelaySeconds": 1,
            "upgradeStrategy": {"type": "NewClusterWithIncrementalUpgrade",
                "clusterUpgradeOptions": {"gatewayClassName": "istio", "stepSizePercent": 50, "intervalSeconds": 1, "maxSurgePercent": 50}},
            "serveConfigV2": "applications:\n  - name: app\n    import_path: app.graph\n    route_prefix: /\n    deployments:\n      - name: D\n        num_replicas: 2\n        ray_actor_options:\n          num_cpus: 1\n",
            "rayClusterConfig": cluster_config(head, worker)
        }
    }))
    .unwrap()
}

pub(super) fn cluster_config(head: &str, worker: &str) -> serde_json::Value {
    let res = |cpu: &str| json!({"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": cpu}});
    json!({
        "rayVersion": "2.46.0",
        "enableInTreeAutoscaling": true,
        "headGroupSpec": {"rayStartParams": {"num-cpus": "0"}, "template": {"spec": {"containers": [{"name": "ray-head",
            "image": "rayproject/ray:2.46.0", "resources": res(head)}]}}},
        "workerGroupSpecs": [{"groupName": "workers", "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {"num-cpus": "1"},
            "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0", "resources": res(worker)}]}}}]
    })
}

/// Old: 4.5 CPU of head and two 1-CPU workers (6.5). New: 1.5 of head and two 3-CPU workers (7.5).
/// Each upgrade passes through 11 (head and first step), 10 (old half gone), 13 (new whole), 12, 7.5.
/// 22 CPU fit both steady services and both first steps (22), not both next grows (2 free, 3 each),
/// and each upgrade beside the other service, steady or done (13 + 7.5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_upgrades_asking_more_per_replica_take_turns_instead_of_deadlocking() {
    let s = Scenario::start("22", 22000).await;
    let names = ["big-a", "big-b"];
    let mut old = Vec::new();
    for n in names {
        old.push(s.serving(service(n, "4", "1")).await);
    }
    s.wait_cq_cpu(13000).await;
    for n in names {
        let patch = json!({"spec": {"rayClusterConfig": cluster_config("1", "3")}});
        s.services()
            .patch(n, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    // One upgrade's first slice waits with the banker's message, naming the other upgrade.
    let waiting = poll_for(60, "a slice waiting for the banker's check", || async {
        let wls = s.c.workloads().list(&Default::default()).await.unwrap().items;
        wls.into_iter().find_map(|w| {
            let (st, reason, msg) = condition(&w, "QuotaReserved")?;
            (st == "False" && msg.contains("admitting it could leave upgrade")).then_some((reason, msg))
        })
    })
    .await;
    assert!(
        waiting.1.contains("unable to finish: it may still need"),
        "{waiting:?}"
    );
    // Both complete, one after the other.
    wait_upgrades_complete(&s, &names, &old, "(a deadlock?)").await;
    for o in &old {
        s.wait_gone(o).await;
    }
    s.wait_cq_cpu(15000).await;
    s.inv.assert_clean();
    s.c.quota.assert_safe();
}

/// Waits up to 240 s until every service's upgrade completed: a new active cluster (not its `old` one)
/// and no pending cluster. `why` goes into the failure message.
pub(super) async fn wait_upgrades_complete(s: &Scenario, names: &[&str], old: &[String], why: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
    loop {
        let mut state = String::new();
        let mut done = 0;
        for (n, o) in names.iter().zip(old) {
            let r = s.services().get(n).await.unwrap();
            if active(&r).is_some_and(|a| &a != o) && pending(&r).is_none() {
                done += 1;
            }
            state += &format!(" {n}: active {:?} pending {:?};", active(&r), pending(&r));
        }
        if done == names.len() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the upgrades did not complete {why}:{state}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Polls `f` every 100 ms until it yields, failing after `secs`.
async fn poll_for<T, F, Fut>(secs: u64, what: &str, f: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
