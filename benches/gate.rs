//! Gate latency: from the moment quota becomes available to the gated child's first pod, on the embedded
//! cluster with the real manager and Ray operator (simulated nodes and dashboards). Prints p50/p99 over
//! RUNS upgrades; not a timed test.
//!
//! Each run: a ClusterQueue of 3 CPU and a RayService needing 2 (head 1 + one 1-CPU worker), served; a
//! rayVersion bump whose slice (4 CPU) does not fit, so the pending cluster waits behind the gate; then,
//! timed, the quota is raised to 4 CPU (patch sent at t0) and a watch on the pending cluster's pods sees
//! its first pod at t1. Half the runs free the quota the other way: a 1-CPU workload holding the rest of
//! the ClusterQueue finishes (is deleted) at t0.
//!
//!     cargo bench --bench gate            # RUNS=50 by default; GATE_RUNS=N to change
//!
//! On real Ray (`GATE_REAL_RAY=1`, as root with iproute2 and `scripts/install-ray.sh`): each run is a
//! head-only RayService on real Ray upgraded blue/green behind the gate, with 20 requests/s through its
//! serve Service; timed from the quota raise to the new cluster's first pod, to its first answered
//! request and to promotion, with the requests that failed. GATE_RUNS defaults to 3 there.
//!
//!     GATE_REAL_RAY=1 cargo bench --bench gate

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use quotagate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Workload};
use quotagate::api::ray::RayService;
use quotagate::wiring::manager::{ManagerOptions, embedded_server, run_manager};
use quotagate::wiring::ray::Dashboards;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

fn typed<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("bench object")
}

async fn until<T, F, Fut>(what: &str, f: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if Instant::now() > deadline {
            panic!("gate bench: timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn status_cluster(rs: &RayService, pending: bool) -> Option<String> {
    let st = rs.status.as_ref()?;
    let s = if pending {
        st.pending_service_status.as_ref()?
    } else {
        st.active_service_status.as_ref()?
    };
    s.ray_cluster_name.clone().filter(|n| !n.is_empty())
}

/// One gated upgrade in namespace `ns`; returns the gate latency.
async fn run_once(client: &Client, i: usize, by_finishing: bool) -> Duration {
    let ns = format!("run-{i}");
    let pp = PostParams::default();
    Api::<Namespace>::all(client.clone())
        .create(
            &pp,
            &typed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})),
        )
        .await
        .unwrap();
    let cq = format!("cq-{i}");
    let quota = if by_finishing { "4" } else { "3" };
    let cqs: Api<ClusterQueue> = Api::all(client.clone());
    cqs.create(&pp, &typed(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": cq},
        "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}, "resourceGroups": [{"coveredResources": ["cpu", "memory"],
        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": quota}, {"name": "memory", "nominalQuota": "64Gi"}]}]}]}})))
        .await
        .unwrap();
    Api::<LocalQueue>::namespaced(client.clone(), &ns)
        .create(&pp, &typed(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": ns}, "spec": {"clusterQueue": cq}})))
        .await
        .unwrap();
    let wls: Api<Workload> = Api::namespaced(client.clone(), &ns);
    if by_finishing {
        // Holds the CPU the upgrade needs; deleting it at t0 frees the quota.
        wls.create(&pp, &typed(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "holder", "namespace": ns},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "1"}}}]}}}]}})))
            .await
            .unwrap();
        until("the holder admitted", || async {
            wls.get("holder")
                .await
                .ok()
                .filter(|w| w.has_quota_reservation())
                .map(|_| ())
        })
        .await;
    }
    let res = json!({"requests": {"cpu": "1", "memory": "1Gi"}});
    let rs = |version: &str| -> RayService {
        typed(json!({"apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": "svc", "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"rayClusterDeletionDelaySeconds": 1,
                "serveConfigV2": "applications:\n  - name: app\n    import_path: app.graph\n    route_prefix: /\n",
                "rayClusterConfig": {"rayVersion": version,
                    "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0", "resources": res}]}}},
                    "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 1, "maxReplicas": 1, "rayStartParams": {},
                        "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0", "resources": res}]}}}]}}}))
    };
    let rss: Api<RayService> = Api::namespaced(client.clone(), &ns);
    rss.create(&pp, &rs("2.46.0")).await.unwrap();
    until("the service serving", || async {
        rss.get("svc").await.ok().and_then(|r| status_cluster(&r, false))
    })
    .await;
    let patch = json!({"spec": {"rayClusterConfig": {"rayVersion": "2.47.0"}}});
    rss.patch("svc", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let pending = until("a pending cluster", || async {
        rss.get("svc").await.ok().and_then(|r| status_cluster(&r, true))
    })
    .await;
    // Gated: its slice is waiting for quota.
    until("the slice to wait", || async {
        let all = wls.list(&ListParams::default()).await.ok()?.items;
        all.iter()
            .any(|w| {
                w.status
                    .as_ref()
                    .and_then(|s| s.condition("QuotaReserved"))
                    .is_some_and(|c| c.status == "False" && !c.message.is_empty())
            })
            .then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut first_pod = watcher(
        pods,
        watcher::Config::default().labels(&format!("ray.io/cluster={pending}")),
    )
    .applied_objects()
    .boxed();
    let t0 = Instant::now();
    if by_finishing {
        wls.delete("holder", &DeleteParams::default()).await.unwrap();
    } else {
        let raise = json!({"spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default",
            "resources": [{"name": "cpu", "nominalQuota": "4"}, {"name": "memory", "nominalQuota": "64Gi"}]}]}]}});
        cqs.patch(&cq, &PatchParams::default(), &Patch::Merge(&raise))
            .await
            .unwrap();
    }
    tokio::time::timeout(WAIT, first_pod.next())
        .await
        .expect("a pod of the pending cluster")
        .expect("watch open")
        .unwrap();
    let latency = t0.elapsed();
    rss.delete("svc", &DeleteParams::default()).await.unwrap();
    latency
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `GATE_REAL_RAY=1`: gated blue/green upgrades on real Ray.
fn real_ray(runs: usize) {
    use quotagate::cli::bench::incremental_real::{RealOptions, render, run};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(8 << 20)
        .enable_all()
        .build()
        .unwrap();
    let opts = RealOptions {
        incremental: false,
        ray_venv: std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-ray"),
        ..Default::default()
    };
    let mut all = Vec::new();
    for i in 0..runs {
        let f = match rt.block_on(run(&opts)) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("gate bench (real Ray), run {}: {e}", i + 1);
                std::process::exit(1);
            }
        };
        println!("{}", render(&opts, &f));
        all.push(f);
    }
    let mut pod: Vec<Duration> = all.iter().map(|f| f.first_pod).collect();
    let mut answer: Vec<Duration> = all.iter().map(|f| f.first_new_answer).collect();
    let mut promoted: Vec<Duration> = all.iter().map(|f| f.promoted).collect();
    println!("== gate latency on real Ray, blue/green, {runs} runs: from the quota raise");
    for (name, v) in [
        ("first pod of the new cluster", &mut pod),
        ("first answer from it (to 1 s)", &mut answer),
        ("promotion", &mut promoted),
    ] {
        v.sort();
        println!(
            "{name:<32} p50 {:>7.2} s  max {:>7.2} s",
            pct(v, 0.5).as_secs_f64(),
            v.last().map_or(0.0, |d| d.as_secs_f64())
        );
    }
    let (sent, failed): (u64, u64) = all
        .iter()
        .fold((0, 0), |(s, f), r| (s + r.load.total.sent, f + r.load.failed));
    println!("requests: sent {sent}, failed {failed}");
    rt.shutdown_background();
}

fn main() {
    if std::env::var("GATE_REAL_RAY").as_deref() == Ok("1") {
        real_ray(
            std::env::var("GATE_RUNS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(3)
                .max(1),
        );
        return;
    }
    let runs: usize = std::env::var("GATE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50)
        .max(2);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(8 << 20)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let server = embedded_server();
        let client = server.client();
        let cancel = tokio_util::sync::CancellationToken::new();
        let _sims = quotagate::embedded::sim::spawn(
            client.clone(),
            &quotagate::embedded::sim::SimConfig { gateway: None, ..Default::default() },
            cancel.clone(),
        );
        Api::<ResourceFlavor>::all(client.clone())
            .create(&PostParams::default(), &typed(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}})))
            .await
            .unwrap();
        let opts = ManagerOptions {
            leader_election: false,
            identity: "bench".into(),
            ray: Some(Dashboards::simulated(Duration::from_millis(20), Duration::from_millis(20))),
            ..Default::default()
        };
        let c = client.clone();
        tokio::spawn(async move { run_manager(c, opts, std::future::pending::<()>()).await });
        let mut raise = Vec::new();
        let mut finish = Vec::new();
        for i in 0..runs {
            let by_finishing = i % 2 == 1;
            let l = run_once(&client, i, by_finishing).await;
            if by_finishing { finish.push(l) } else { raise.push(l) }
            eprint!("\rgate bench: {}/{runs}", i + 1);
        }
        eprintln!();
        let report = |name: &str, v: &mut Vec<Duration>| {
            v.sort();
            println!(
                "{name:<28} runs {:>3}  p50 {:>7.1} ms  p99 {:>7.1} ms  max {:>7.1} ms",
                v.len(),
                pct(v, 0.5).as_secs_f64() * 1e3,
                pct(v, 0.99).as_secs_f64() * 1e3,
                v.last().map_or(0.0, |d| d.as_secs_f64() * 1e3)
            );
        };
        println!("== gate latency: quota available -> the gated cluster's first pod created");
        report("quota raised", &mut raise);
        report("another workload finished", &mut finish);
        let mut all: Vec<Duration> = raise.iter().chain(&finish).copied().collect();
        report("all", &mut all);
        let _ = Arc::clone(&server);
        cancel.cancel();
    });
    // The controllers are still running: drop them without waiting (kube-runtime's reconcile tasks
    // panic when a runtime shutting down cancels them under it).
    rt.shutdown_background();
}
