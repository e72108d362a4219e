//! Issue 37: a queue-managed RayService on real Ray (the process runtime), upgraded blue/green behind
//! the quota gate while the load generator sends real HTTP requests through the serve Service's
//! ClusterIP, with 0 failed.
//!
//! The RayService is head-only (Serve on the head, `num-cpus: 1`) in a ClusterQueue of 1.5 CPU, too
//! small for two clusters. The Serve app (`tests/ray_serve_app/echo_app.py`, on the head's PYTHONPATH)
//! answers with its cluster's name. Changing the RayService's spec makes the operator create the pending
//! cluster, which waits behind the gate with no pod and no process; raising the quota to 3 CPU admits
//! it; its head starts for real, the operator deploys Serve through the real dashboard (reached through
//! the head Service's name), switches the serve Service and deletes the old cluster. The load generator
//! counts every request; the answers name the old cluster, then the new one. No process is left after
//! (checked by PID).
//!
//!   scripts/install-ray.sh && cargo test --test real_ray_upgrade -- --nocapture
//!
//! Needs root and iproute2 (`ip netns`). Skipped without them or without `.venv-ray`, unless
//! `QUOTAGATE_REQUIRE_TOOLS=1`, which makes their absence a failure.

mod process_support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use process_support::{
    Manager, alive, bridge_gone_or_reused, create_real_queue, netns_pids, real_queue, repo_root,
    skip_without_tools, start_manager, wait,
};
use quotagate::api::kueue::ClusterQueue;
use quotagate::api::ray::{RayCluster, RayService};
use quotagate::cli::load;
use quotagate::embedded::sim::process::{ProcessConfig, ProcessRuntime};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const NS: &str = "default";

/// The RayService; `color` goes into the head's environment, so changing it is an upgrade.
fn ray_service(color: &str) -> Value {
    let app_dir = repo_root().join("tests/ray_serve_app");
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "echo", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "real-queue"}},
        "spec": {
            "rayClusterDeletionDelaySeconds": 2,
            "serveConfigV2": "applications:\n  - name: echo\n    import_path: echo_app:app\n    route_prefix: /\n",
            "rayClusterConfig": {
                "rayVersion": "2.60.0",
                "headGroupSpec": {
                    "rayStartParams": {"num-cpus": "1", "object-store-memory": "100000000"},
                    "template": {"spec": {
                        // Ray drains for up to 30 s on SIGTERM; 5 s then SIGKILL keeps the test short.
                        "terminationGracePeriodSeconds": 5,
                        "containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0",
                            // The app's code, as a user's image or volume would bring it.
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

#[test]
fn a_gated_blue_green_upgrade_on_real_ray_fails_no_request() {
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

        // Quota for one cluster, not two.
        create_real_queue(&client, NS, "1500m").await;
        let cqs: Api<ClusterQueue> = Api::all(client.clone());

        let rss: Api<RayService> = Api::namespaced(client.clone(), NS);
        let rcs: Api<RayCluster> = Api::namespaced(client.clone(), NS);
        let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
        let svcs: Api<Service> = Api::namespaced(client.clone(), NS);
        rss.create(&pp, &serde_json::from_value(ray_service("blue")).unwrap()).await.unwrap();

        // 1. The first cluster: admitted, its head real, Serve deployed through the real dashboard.
        let first = wait(240, "RayService echo serves from its first cluster", t0, || async {
            let s = rs_status(&rss).await;
            match at(&s, "/status/activeServiceStatus/rayClusterName") {
                Some(n) => Ok(n.to_owned()),
                None => Err(format!("{}", s.get("status").cloned().unwrap_or_default())),
            }
        })
        .await;
        let ip = wait(30, "the serve Service has its ClusterIP", t0, || async {
            let s = svcs.get_opt("echo-serve-svc").await.map_err(|e| e.to_string())?.ok_or("no echo-serve-svc")?;
            s.spec.and_then(|s| s.cluster_ip).filter(|ip| ip.starts_with("10.96.")).ok_or_else(|| "no ClusterIP yet".to_string())
        })
        .await;
        let url = format!("http://{ip}:8000/");
        let answer = wait(120, "the Serve app answers through the ClusterIP", t0, || async {
            let r = load::run(&load::Options { url: url.clone(), rps: 5, duration: Duration::from_millis(400), connections: 2, ..Default::default() }, CancellationToken::new(), None)
                .await
                .map_err(|e| e.to_string())?;
            if r.total.ok > 0 && r.failed == 0 { Ok(r.clusters_in_order) } else { Err(format!("{:?}", r.total)) }
        })
        .await;
        assert_eq!(answer, vec![first.clone()], "the app names its cluster");
        let first_pids: BTreeSet<u32> = runtime.namespaces().values().flat_map(|ns| netns_pids(ns)).collect();
        assert!(!first_pids.is_empty());

        // 2. Load through the whole upgrade.
        let stop_load = CancellationToken::new();
        let load_opts = load::Options { url: url.clone(), rps: 20, duration: Duration::from_secs(600), connections: 64, timeout: Duration::from_secs(5), ..Default::default() };
        let load_task = tokio::spawn({
            let stop = stop_load.clone();
            async move { load::run(&load_opts, stop, None).await }
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

        // 4. Quota raised: the new head starts for real, Serve deploys, the Service switches, the old
        // cluster goes.
        cqs.patch("real", &PatchParams::default(), &Patch::Merge(real_queue("3"))).await.unwrap();
        let raised = Instant::now();
        wait(240, "the serve Service switched to the new cluster", t0, || async {
            let s = rs_status(&rss).await;
            match at(&s, "/status/activeServiceStatus/rayClusterName") {
                Some(n) if n == pending => Ok(()),
                other => Err(format!("active {other:?}")),
            }
        })
        .await;
        let switched = Instant::now();
        let second_pids: BTreeSet<u32> = runtime.namespaces().values().flat_map(|ns| netns_pids(ns)).filter(|p| !first_pids.contains(p)).collect();
        wait(60, "the old cluster and its processes are gone", t0, || async {
            let left: Vec<u32> = first_pids.iter().copied().filter(|p| alive(*p)).collect();
            let rc = rcs.get_opt(&first).await.map_err(|e| e.to_string())?;
            if rc.is_none() && left.is_empty() { Ok(()) } else { Err(format!("RayCluster present: {}, processes left: {left:?}", rc.is_some())) }
        })
        .await;
        // 5 s more: the check below wants the last 3 whole seconds of load to be the new cluster's,
        // and the old cluster's last answer may fall late in a second.
        tokio::time::sleep(Duration::from_secs(5)).await;
        stop_load.cancel();
        let report = load_task.await.unwrap().unwrap();
        println!(
            "  load: {} sent, {} ok, {} failed ({} non-2xx, {} connection errors, {} timeouts, {} skipped), {} retried on closed idle connections; clusters {:?}, {} change(s); quota raised to switch {:.1?}",
            report.total.sent, report.total.ok, report.failed, report.total.non_2xx, report.total.conn_errors, report.total.timeouts, report.total.skipped,
            report.total.retried, report.clusters_in_order, report.cluster_changes, switched - raised
        );
        assert_eq!(report.failed, 0, "{}", serde_json::to_string(&report.per_second).unwrap());
        assert!(report.total.sent >= 100, "{:?}", report.total);
        // Skipped requests were never sent (all 64 connections busy: a starved machine); a few at most.
        assert!(report.total.skipped * 10 <= report.total.sent, "{:?}", report.total);
        assert_eq!(report.clusters_in_order, vec![first.clone(), pending.clone()], "answers from the old cluster, then the new one");
        // Nothing from the old cluster once it is gone: the last 3 s of load are the new cluster's.
        let last_old = report.per_second.iter().filter(|s| s.clusters.contains_key(&first)).map(|s| s.second).max().unwrap_or(0);
        let first_new = report.per_second.iter().filter(|s| s.clusters.contains_key(&pending)).map(|s| s.second).min().unwrap_or(0);
        let total_s = report.per_second.len() as u64;
        assert!(last_old + 3 < total_s, "the old cluster still answered near the end: last at {last_old} s of {total_s}");
        assert!(first_new <= last_old + 1, "no gap between the clusters' answers");

        // 5. Shutdown: every process of both heads gone, the pod network removed.
        let _ = stop_tx.send(());
        manager.await.unwrap().unwrap();
        let left: Vec<u32> = first_pids.iter().chain(&second_pids).copied().filter(|p| alive(*p)).collect();
        assert!(left.is_empty(), "processes left: {left:?}");
        assert!(bridge_gone_or_reused(&bridge), "bridge {bridge} left behind");
        println!("done in {:.1?}", t0.elapsed());
    });
}

/// `demo --real-ray` refuses before anything starts, naming every missing piece and how to get it
/// (no Ray or root needed for this test).
#[test]
fn demo_real_ray_refusals_name_what_is_missing() {
    let qg = env!("CARGO_BIN_EXE_quotagate");
    let out = std::process::Command::new(qg)
        .args(["demo", "--real-ray", "--ray-venv", "/nonexistent/venv"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("demo --real-ray runs Ray pods as real processes and needs what this host lacks"),
        "{err}"
    );
    assert!(
        err.contains(
            "Ray Serve in a venv at /nonexistent/venv (run scripts/install-ray.sh from the repository)"
        ),
        "{err}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).is_empty(),
        "nothing started: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    // As another user (when this test runs as root and util-linux's setpriv is there): root is named too.
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    });
    if root
        && std::process::Command::new("setpriv")
            .arg("--version")
            .output()
            .is_ok()
    {
        let out = std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                qg,
                "demo",
                "--real-ray",
                "--ray-venv",
                "/nonexistent/venv",
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains("  - root: pods get network namespaces of their own"),
            "{err}"
        );
        assert!(
            err.contains("  - Ray Serve in a venv at /nonexistent/venv"),
            "{err}"
        );
    }
}
