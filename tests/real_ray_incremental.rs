//! Issue 37: a queue-managed RayService on real Ray (the process runtime) upgraded with
//! `NewClusterWithIncrementalUpgrade` behind the quota gate, while the load generator sends real HTTP
//! requests **through the Gateway** (the embedded L7 proxy on the Gateway's address, splitting by the
//! HTTPRoute's weights), with 0 failed.
//!
//! The smallest honest shape: head-only clusters with the in-tree autoscaler on (KubeRay requires it
//! for this strategy; its sidecar stays simulated and has no worker group to scale) and Serve on the
//! head: one deployment of 2 replicas that ask no CPU, so capacity moves in real replicas (50% is one
//! replica, Serve's `target_capacity` rounding). `maxSurgePercent: 50`, `stepSizePercent: 25`,
//! `intervalSeconds: 2`. The ClusterQueue (2 CPU) holds one cluster (head 1 + autoscaler sidecar 0.5),
//! not two: the pending cluster waits behind the gate with no pod and no process until the quota is
//! raised to 3. Then traffic moves in steps (25, 50, 75, 100% on the new cluster); at every step the
//! test asks the new cluster's real dashboard how many replicas Ray reports RUNNING, and finds at
//! least the ones the routed share needs. The answers name the old cluster, then both, then the new;
//! nothing fails; no process is left after (by PID).
//!
//!   scripts/install-ray.sh && cargo test --test real_ray_incremental -- --nocapture
//!
//! Needs root and iproute2 (`ip netns`). Skipped without them or without `.venv-ray`, unless
//! `QUOTAGATE_REQUIRE_TOOLS=1`, which makes their absence a failure.
//!
//! Source of the progression expectations: KubeRay
//! `ray-operator/test/e2eincrementalupgrade/rayservice_incremental_upgrade_test.go`
//! (`TestRayServiceIncrementalUpgrade`: Gateway and HTTPRoute created, pending weight stepping up to
//! 100 while requests through the Gateway keep succeeding, promotion, the old cluster deleted).

mod process_support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use process_support::{
    Manager, alive, bridge_gone_or_reused, create_real_queue, http_get, netns_pids, real_queue, repo_root,
    skip_without_tools, start_manager, wait,
};
use quotagate::api::gateway::{Gateway, HTTPRoute};
use quotagate::api::kueue::ClusterQueue;
use quotagate::api::ray::{RayCluster, RayService};
use quotagate::cli::load;
use quotagate::embedded::sim::process::{ProcessConfig, ProcessRuntime};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const NS: &str = "default";
const REPLICAS: u32 = 2;

fn ray_service(color: &str) -> Value {
    let app_dir = repo_root().join("tests/ray_serve_app");
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "echo", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "real-queue"}},
        "spec": {
            "rayClusterDeletionDelaySeconds": 2,
            "upgradeStrategy": {"type": "NewClusterWithIncrementalUpgrade",
                "clusterUpgradeOptions": {"gatewayClassName": "istio", "maxSurgePercent": 50, "stepSizePercent": 25, "intervalSeconds": 2}},
            "serveConfigV2": format!("applications:\n  - name: echo\n    import_path: echo_app:app\n    route_prefix: /\n    deployments:\n      - name: Echo\n        num_replicas: {REPLICAS}\n        ray_actor_options:\n          num_cpus: 0\n"),
            "rayClusterConfig": {
                "rayVersion": "2.60.0",
                "enableInTreeAutoscaling": true,
                "headGroupSpec": {
                    "rayStartParams": {"num-cpus": "1", "object-store-memory": "100000000"},
                    "template": {"spec": {
                        "terminationGracePeriodSeconds": 5,
                        "containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0",
                            "env": [{"name": "PYTHONPATH", "value": app_dir.display().to_string()}, {"name": "COLOR", "value": color}],
                            "ports": [{"containerPort": 6379, "name": "gcs-server"}, {"containerPort": 8265, "name": "dashboard"},
                                      {"containerPort": 10001, "name": "client"}, {"containerPort": 8000, "name": "serve"}],
                            "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}}]}}},
                "workerGroupSpecs": []
            }
        }
    })
}

fn at<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str).filter(|s| !s.is_empty())
}

async fn rs_status(rss: &Api<RayService>) -> Value {
    rss.get_opt("echo")
        .await
        .ok()
        .flatten()
        .map(|r| serde_json::to_value(r).unwrap_or_default())
        .unwrap_or_default()
}

/// Serve's `target_capacity` rounding (`get_capacity_adjusted_num_replicas`: half up, at least 1
/// unless 0).
fn replicas_at(percent: u32) -> u32 {
    if percent == 0 {
        0
    } else {
        ((REPLICAS * percent + 50) / 100).max(1)
    }
}

/// One weight the route gave the new cluster, and what its real dashboard said right then.
#[derive(Debug, Clone)]
struct Step {
    at: Duration,
    weight: u32,
    running: u32,
    target_capacity: Option<f64>,
    /// Why the dashboard could not be read.
    error: Option<String>,
}

/// RUNNING replicas of the Echo deployment and the cluster's target_capacity, from its dashboard.
async fn serve_state(head_ip: &str) -> Result<(u32, Option<f64>), String> {
    let body = http_get(&format!("{head_ip}:8265"), "/api/serve/applications/")
        .await
        .ok_or_else(|| format!("GET {head_ip}:8265/api/serve/applications/ failed"))?;
    let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    let replicas = v
        .pointer("/applications/echo/deployments/Echo/replicas")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("no Echo replicas in {body}"))?;
    let running = replicas
        .iter()
        .filter(|r| r.get("state").and_then(Value::as_str) == Some("RUNNING"))
        .count();
    Ok((
        u32::try_from(running).unwrap_or(u32::MAX),
        v.get("target_capacity").and_then(Value::as_f64),
    ))
}

#[test]
fn a_gated_incremental_upgrade_on_real_ray_through_the_gateway_fails_no_request() {
    if skip_without_tools() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let runtime = ProcessRuntime::start(ProcessConfig { ray_venv: repo_root().join(".venv-ray"), ..ProcessConfig::default() }).unwrap();
        let bridge = runtime.subnet().bridge();
        let Manager { client, stop_tx, manager } = start_manager(&runtime);
        let t0 = Instant::now();
        let pp = PostParams::default();

        create_real_queue(&client, NS, "2").await;
        let cqs: Api<ClusterQueue> = Api::all(client.clone());

        let rss: Api<RayService> = Api::namespaced(client.clone(), NS);
        let rcs: Api<RayCluster> = Api::namespaced(client.clone(), NS);
        let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
        let gws: Api<Gateway> = Api::namespaced(client.clone(), NS);
        let routes: Api<HTTPRoute> = Api::namespaced(client.clone(), NS);
        rss.create(&pp, &serde_json::from_value(ray_service("blue")).unwrap()).await.unwrap();

        // 1. The first cluster serves through the Gateway's address.
        let first = wait(240, "RayService echo serves from its first cluster", t0, || async {
            let s = rs_status(&rss).await;
            at(&s, "/status/activeServiceStatus/rayClusterName").map(str::to_owned).ok_or_else(|| format!("{}", s.get("status").cloned().unwrap_or_default()))
        })
        .await;
        let gw_ip = wait(60, "the Gateway is Programmed with an address on the pod bridge", t0, || async {
            let g = gws.get_opt("echo-gateway").await.map_err(|e| e.to_string())?.ok_or("no echo-gateway")?;
            let ip = g.status.as_ref().and_then(|s| s.extra.get("addresses")).and_then(|a| a.pointer("/0/value")).and_then(Value::as_str).map(str::to_owned);
            match ip {
                Some(ip) if g.is_ready() && ip.starts_with("10.96.") => Ok(ip),
                _ => Err(format!("{:?}", g.status)),
            }
        })
        .await;
        let url = format!("http://{gw_ip}:80/");
        let answer = wait(120, "the Serve app answers through the Gateway", t0, || async {
            let r = load::run(&load::Options { url: url.clone(), rps: 5, duration: Duration::from_millis(400), connections: 2, ..Default::default() }, CancellationToken::new(), None)
                .await
                .map_err(|e| e.to_string())?;
            if r.total.ok > 0 && r.failed == 0 { Ok(r.clusters_in_order) } else { Err(format!("{:?}", r.total)) }
        })
        .await;
        assert_eq!(answer, vec![first.clone()], "the app names its cluster");
        let first_pids: BTreeSet<u32> = runtime.namespaces().values().flat_map(|ns| netns_pids(ns)).collect();
        assert!(!first_pids.is_empty());
        // Where the host has a cgroup v1 cpu controller, the head's processes are in its pod's group,
        // whose quota is the sum of its containers' CPU limits (head 1 + autoscaler sidecar 0.5).
        let cpu_root = std::path::Path::new("/sys/fs/cgroup/cpu").join(format!("quotagate-{}", bridge.trim_start_matches("qgbr")));
        if cpu_root.exists() {
            let groups: Vec<_> = std::fs::read_dir(&cpu_root).unwrap().flatten().filter(|e| e.path().is_dir()).map(|e| e.path()).collect();
            assert_eq!(groups.len(), 1, "one pod, one group: {groups:?}");
            let procs: BTreeSet<u32> = std::fs::read_to_string(groups[0].join("cgroup.procs")).unwrap().split_whitespace().filter_map(|p| p.parse().ok()).collect();
            assert!(procs.len() >= 5 && procs.is_subset(&first_pids), "the head's processes in its group: {procs:?} of {first_pids:?}");
            assert_eq!(std::fs::read_to_string(groups[0].join("cpu.cfs_quota_us")).unwrap().trim(), "150000");
            println!("  +{:.1?} the head's {} processes run in its pod's CPU group (quota 1.5 CPU)", t0.elapsed(), procs.len());
        }

        // 2. Load through the Gateway for the whole upgrade; a watcher records every weight the route
        // gives the new cluster and what the new cluster's real dashboard reports at that moment.
        let stop_load = CancellationToken::new();
        let load_opts = load::Options { url: url.clone(), rps: 20, duration: Duration::from_secs(600), connections: 64, timeout: Duration::from_secs(5), ..Default::default() };
        let load_task = tokio::spawn({
            let stop = stop_load.clone();
            async move { load::run(&load_opts, stop, None).await }
        });
        let steps: Arc<Mutex<Vec<Step>>> = Arc::default();
        let watcher = tokio::spawn({
            let (routes, pods, steps, first) = (routes.clone(), pods.clone(), steps.clone(), first.clone());
            async move {
                loop {
                    if let Ok(Some(r)) = routes.get_opt("echo-httproute").await {
                        let refs = r.spec.rules.iter().flatten().flat_map(|rule| rule.backend_refs.iter().flatten()).cloned().collect::<Vec<_>>();
                        let new = refs.iter().find(|b| !b.name.starts_with(&first));
                        let weight = new.and_then(|b| b.weight).map_or(0, |w| u32::try_from(w).unwrap_or(0));
                        let last = steps.lock().unwrap().last().map_or(0, |s| s.weight);
                        if weight != last
                            && let Some(cluster) = new.map(|b| b.name.trim_end_matches("-serve-svc").to_owned())
                        {
                            // The head Service is headless (KubeRay's default): its name is the head pod's address.
                            let heads = pods.list(&ListParams::default().labels(&format!("ray.io/cluster={cluster},ray.io/node-type=head"))).await;
                            let head_ip = heads.ok().and_then(|l| l.items.into_iter().find_map(|p| p.status.and_then(|s| s.pod_ip)));
                            let state = match head_ip {
                                Some(ip) => serve_state(&ip).await,
                                None => Err(format!("no head pod address for {cluster}")),
                            };
                            let (running, target_capacity, error) = match state {
                                Ok((r, c)) => (r, c, None),
                                Err(e) => (0, None, Some(e)),
                            };
                            steps.lock().unwrap().push(Step { at: t0.elapsed(), weight, running, target_capacity, error });
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        });
        tokio::time::sleep(Duration::from_secs(2)).await;

        // 3. The upgrade: the pending cluster is created and gated, with no pod and no process.
        let mut rs = rss.get("echo").await.unwrap();
        let green: RayService = serde_json::from_value(ray_service("green")).unwrap();
        rs.spec = green.spec;
        rss.replace("echo", &pp, &rs).await.unwrap();
        let pending = wait(60, "the upgrade's pending cluster exists", t0, || async {
            let s = rs_status(&rss).await;
            at(&s, "/status/pendingServiceStatus/rayClusterName").map(str::to_owned).ok_or_else(|| format!("{}", s.get("status").cloned().unwrap_or_default()))
        })
        .await;
        assert_ne!(pending, first);
        for _ in 0..12 {
            let rc = rcs.get(&pending).await.unwrap();
            assert_eq!(rc.spec.suspend, Some(true), "the pending cluster is held by the gate");
            let its = pods.list(&ListParams::default().labels(&format!("ray.io/cluster={pending}"))).await.unwrap().items;
            assert!(its.is_empty(), "gated: no pod of {pending}");
            assert_eq!(runtime.namespaces().len(), 1, "gated: only the first head's processes run: {:?}", runtime.namespaces());
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        println!("  +{:.1?} {pending} gated for 3 s with 0 pods and 0 processes", t0.elapsed());
        assert!(steps.lock().unwrap().is_empty(), "no traffic moved while the pending cluster was gated: {:?}", steps.lock().unwrap());

        // 4. Quota raised: the new head starts, traffic moves in steps, the old cluster goes.
        cqs.patch("real", &PatchParams::default(), &Patch::Merge(real_queue("3"))).await.unwrap();
        let raised = Instant::now();
        wait(300, "the new cluster is promoted", t0, || async {
            let s = rs_status(&rss).await;
            match at(&s, "/status/activeServiceStatus/rayClusterName") {
                Some(n) if n == pending && at(&s, "/status/pendingServiceStatus/rayClusterName").is_none() => Ok(()),
                other => Err(format!("active {other:?}; {}", s.pointer("/status/conditions").cloned().unwrap_or_default())),
            }
        })
        .await;
        let promoted = Instant::now();
        let second_pids: BTreeSet<u32> = runtime.namespaces().values().flat_map(|ns| netns_pids(ns)).filter(|p| !first_pids.contains(p)).collect();
        wait(60, "the old cluster and its processes are gone", t0, || async {
            let left: Vec<u32> = first_pids.iter().copied().filter(|p| alive(*p)).collect();
            let rc = rcs.get_opt(&first).await.map_err(|e| e.to_string())?;
            if rc.is_none() && left.is_empty() { Ok(()) } else { Err(format!("RayCluster present: {}, processes left: {left:?}", rc.is_some())) }
        })
        .await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        stop_load.cancel();
        watcher.abort();
        let report = load_task.await.unwrap().unwrap();
        let steps = steps.lock().unwrap().clone();
        for s in &steps {
            println!("  +{:.1?} route: {}% to {pending}; its dashboard: {} RUNNING replica(s), target_capacity {:?}{}", s.at, s.weight, s.running, s.target_capacity, s.error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default());
        }
        println!(
            "  load: {} sent, {} ok, {} failed ({} non-2xx, {} connection errors, {} timeouts, {} skipped); clusters {:?}, {} change(s); quota raised to promotion {:.1?}",
            report.total.sent, report.total.ok, report.failed, report.total.non_2xx, report.total.conn_errors, report.total.timeouts, report.total.skipped,
            report.clusters_in_order, report.cluster_changes, promoted - raised
        );

        // Traffic moved in steps, never ahead of the replicas Ray reports RUNNING on the new cluster.
        let weights: Vec<u32> = steps.iter().map(|s| s.weight).collect();
        assert!(weights.windows(2).all(|w| w[0] < w[1]), "the new cluster's weight only grows: {weights:?}");
        assert!(weights.iter().filter(|w| (1..100).contains(*w)).count() >= 2, "at least two intermediate steps: {weights:?}");
        assert_eq!(weights.last(), Some(&100), "{weights:?}");
        for s in &steps {
            assert!(s.running >= replicas_at(s.weight), "{}% routed to {pending} with {} RUNNING replica(s): {steps:?}", s.weight, s.running);
        }
        // 0 failed, and the answers: the old cluster, then both, then the new.
        assert_eq!(report.failed, 0, "{}", serde_json::to_string(&report.per_second).unwrap());
        assert!(report.total.sent >= 200, "{:?}", report.total);
        assert!(report.total.skipped * 10 <= report.total.sent, "{:?}", report.total);
        assert_eq!(report.clusters_in_order, vec![first.clone(), pending.clone()], "answers from the old cluster, then the new one");
        let both = report.per_second.iter().filter(|s| s.clusters.contains_key(&first) && s.clusters.contains_key(&pending)).count();
        assert!(both >= 3, "both clusters answered in the same second for at least 3 s: {both}");
        assert!(report.cluster_changes > 2, "answers interleaved while traffic was split: {} change(s)", report.cluster_changes);
        let last_old = report.per_second.iter().filter(|s| s.clusters.contains_key(&first)).map(|s| s.second).max().unwrap_or(0);
        let total_s = report.per_second.len() as u64;
        assert!(last_old + 3 < total_s, "the old cluster still answered near the end: last at {last_old} s of {total_s}");

        // 5. Shutdown: every process of both heads gone, the pod network removed.
        let _ = stop_tx.send(());
        manager.await.unwrap().unwrap();
        let left: Vec<u32> = first_pids.iter().chain(&second_pids).copied().filter(|p| alive(*p)).collect();
        assert!(left.is_empty(), "processes left: {left:?}");
        assert!(bridge_gone_or_reused(&bridge), "bridge {bridge} left behind");
        // (Unless another instance on this host took the /24 meanwhile: then its bridge is there.)
        let reused = std::process::Command::new("ip").args(["link", "show", &bridge]).output().is_ok_and(|o| o.status.success());
        assert!(!cpu_root.exists() || reused, "CPU group {} left behind", cpu_root.display());
        println!("done in {:.1?}", t0.elapsed());
    });
}
