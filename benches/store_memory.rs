//! Resident memory per stored JSON byte of `quotagate apiserver` (the binary of this build:
//! `cargo bench --bench store_memory` uses the release one; or `QUOTAGATE_BIN=target/release/quotagate
//! cargo test --bench store_memory`). Prints figures; not a timed test.
//!
//! Three fresh processes: 5,000 pods of about 1.7 KB (the simulators off: the store alone), the same
//! pods with the simulators on (the node agent starts them: status writes, watch caches), and 10,000
//! ConfigMaps of about 1.7 KB. Each prints the growth of VmRSS (from /proc) over the idle server,
//! divided by the created objects' compact JSON as the server returned them, and the time a LIST of
//! them all takes (client side, decoding included).

use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The binary measured: `QUOTAGATE_BIN` when set (a release binary measured by a bench built in
/// another profile), else this build's.
fn quotagate_bin() -> std::path::PathBuf {
    std::env::var_os("QUOTAGATE_BIN").map_or_else(|| env!("CARGO_BIN_EXE_quotagate").into(), Into::into)
}

fn pod(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i}"), "namespace": "default",
            "labels": {"app": "ray", "ray.io/node-type": "worker", "ray.io/cluster": "rc-1", "ray.io/group": "small-group"},
            "annotations": {"ray.io/ft-enabled": "false", "kueue.x-k8s.io/workload": "raycluster-rc-1-abcde"}},
        "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0",
            "command": ["/bin/bash", "-lc", "--"],
            "args": ["ulimit -n 65536; ray start --address=rc-1-head-svc.default.svc.cluster.local:6379 --block --num-cpus=1 --memory=2000000000 --metrics-export-port=8080"],
            "env": [{"name": "RAY_IP", "value": "rc-1-head-svc"}, {"name": "FQ_RAY_IP", "value": "rc-1-head-svc.default.svc.cluster.local"},
                    {"name": "RAY_CLUSTER_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['ray.io/cluster']"}}},
                    {"name": "RAY_PORT", "value": "6379"}, {"name": "RAY_USAGE_STATS_ENABLED", "value": "0"}],
            "ports": [{"containerPort": 8080, "name": "metrics", "protocol": "TCP"}],
            "resources": {"limits": {"cpu": "1", "memory": "2Gi"}, "requests": {"cpu": "1", "memory": "2Gi"}},
            "livenessProbe": {"exec": {"command": ["bash", "-c", "wget -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz | grep success"]},
                "initialDelaySeconds": 30, "periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 120},
            "volumeMounts": [{"mountPath": "/dev/shm", "name": "shared-mem"}]}],
          "volumes": [{"name": "shared-mem", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}],
          "restartPolicy": "Never"}
    })
}

fn configmap(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("cm-{i}"), "namespace": "default"},
        "data": {"a": "x".repeat(800), "b": "y".repeat(800), "c": "small"}
    })
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

async fn run(
    name: &str,
    simulators: bool,
    n: usize,
    make: fn(usize) -> Value,
    dir: &Path,
) -> Result<String, String> {
    let kubeconfig = dir.join(format!("{}.kubeconfig", name.replace(' ', "_")));
    let mut cmd = tokio::process::Command::new(quotagate_bin());
    cmd.args([
        "apiserver",
        "--listen",
        "127.0.0.1:0",
        "--pod-start-delay",
        "0ms",
        "--kubeconfig-out",
    ])
    .arg(&kubeconfig)
    .env("RUST_LOG", "warn")
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .kill_on_drop(true);
    if !simulators {
        cmd.arg("--no-simulators");
    }
    let child = cmd.spawn().map_err(|e| format!("spawning quotagate: {e}"))?;
    let pid = child.id().ok_or("no pid")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = loop {
        if let Ok(kc) = kube::config::Kubeconfig::read_from(&kubeconfig)
            && let Ok(config) = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await
            && let Ok(client) = kube::Client::try_from(config)
            && client.apiserver_version().await.is_ok()
        {
            break client;
        }
        if Instant::now() > deadline {
            return Err("the server did not answer within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = rss_kib(pid).ok_or("reading /proc")?;
    let (gvk_kind, resource) = if name.contains("pods") {
        ("pods", ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()))
    } else {
        (
            "configmaps",
            ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
        )
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let mut json_bytes = 0usize;
    for i in 0..n {
        let obj: DynamicObject = serde_json::from_value(make(i)).map_err(|e| e.to_string())?;
        let created = api
            .create(&PostParams::default(), &obj)
            .await
            .map_err(|e| format!("creating {gvk_kind} #{i}: {e}"))?;
        json_bytes += serde_json::to_vec(&created).map_err(|e| e.to_string())?.len();
    }
    // Let the simulators catch up (every pod Running, its status written) before reading: on a
    // loaded machine a fixed pause measured events still queued, not what is held.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut settled = String::new();
    if simulators {
        let t = Instant::now();
        // One pod not yet Running at a time (a full LIST would itself grow the heap measured).
        let not_running = ListParams::default().fields("status.phase!=Running").limit(1);
        let all_running = loop {
            let pending = api
                .list(&not_running)
                .await
                .map_err(|e| format!("listing pods not Running: {e}"))?;
            if pending.items.is_empty() {
                break true;
            }
            if t.elapsed() > Duration::from_secs(180) {
                break false;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        };
        let at_running = rss_kib(pid).ok_or("reading /proc")?;
        tokio::time::sleep(Duration::from_secs(10)).await;
        settled = format!(
            " (every pod Running: {all_running}, after {} s, at {} MiB; read 10 s later)",
            t.elapsed().as_secs().saturating_sub(10),
            at_running / 1024
        );
    }
    let after = rss_kib(pid).ok_or("reading /proc")?;
    let grown = after.saturating_sub(idle) * 1024;
    // How fast the store answers a LIST of everything created (what a compact stored form must not
    // slow down): the best of three, after the RSS is read.
    let mut best = Duration::MAX;
    let mut listed = 0;
    for _ in 0..3 {
        let t = Instant::now();
        listed = api
            .list(&Default::default())
            .await
            .map_err(|e| format!("listing {gvk_kind}: {e}"))?
            .items
            .len();
        best = best.min(t.elapsed());
    }
    Ok(format!(
        "{name}: RSS {} MiB idle, {} MiB after; +{:.1} MiB for {:.1} MiB of JSON = {:.1} RSS bytes per stored JSON byte; LIST of {listed} in {} ms (best of 3){settled}",
        idle / 1024,
        after / 1024,
        grown as f64 / 1048576.0,
        json_bytes as f64 / 1048576.0,
        grown as f64 / json_bytes as f64,
        best.as_millis()
    ))
}

/// A run: its name, the simulators on, how many objects, and how each is made.
type Run = (&'static str, bool, usize, fn(usize) -> Value);

#[tokio::main]
async fn main() {
    let dir = std::env::temp_dir().join(format!("quotagate-store-memory-bench-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("temporary directory: {e}");
        std::process::exit(1);
    }
    let runs: [Run; 3] = [
        ("5000 pods, no simulators", false, 5000, pod),
        ("5000 pods, simulators on", true, 5000, pod),
        ("10000 configmaps, no simulators", false, 10_000, configmap),
    ];
    let mut failed = false;
    for (name, sims, n, make) in runs {
        match run(name, sims, n, make, &dir).await {
            Ok(line) => println!("{line}"),
            Err(e) => {
                println!("{name}: {e}");
                failed = true;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if failed {
        std::process::exit(1);
    }
}
