//! Helpers shared by the tests that run Ray pods as real processes in network namespaces of their own
//! (`embedded_process_runtime.rs`, `real_ray_upgrade.rs`, `real_ray_incremental.rs`).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quotagate::embedded::sim::SimConfig;
use quotagate::embedded::sim::process::ProcessRuntime;
use quotagate::wiring::manager::{
    EmbeddedOptions, ManagerError, ManagerOptions, embedded_server, run_embedded_on,
};
use quotagate::wiring::ray::Dashboards;

/// An embedded server and manager whose node agent runs pods through `runtime`.
pub struct Manager {
    pub client: kube::Client,
    /// Send to stop the manager.
    pub stop_tx: tokio::sync::oneshot::Sender<()>,
    pub manager: tokio::task::JoinHandle<Result<(), ManagerError>>,
}

/// Starts the embedded server and manager on `runtime`, the Ray dashboards routed per pod (real heads
/// of process-run pods, the simulator for the rest).
pub fn start_manager(runtime: &Arc<ProcessRuntime>) -> Manager {
    let mut sims = SimConfig::default();
    sims.node.as_mut().unwrap().runtime = Some(runtime.clone());
    let server = embedded_server();
    let client = server.client();
    let opts = EmbeddedOptions {
        sims,
        manager: ManagerOptions {
            ray: Some(Dashboards::simulated(
                Duration::from_secs(1),
                Duration::from_secs(1),
            )),
            ..ManagerOptions::default()
        },
        ..EmbeddedOptions::default()
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(run_embedded_on(server, opts, async move {
        let _ = stop_rx.await;
    }));
    Manager {
        client,
        stop_tx,
        manager,
    }
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Why this host cannot run the test, if it cannot.
pub fn missing_tool() -> Option<String> {
    if !repo_root().join(".venv-ray/bin/ray").exists() {
        return Some("no .venv-ray with Ray (run scripts/install-ray.sh)".into());
    }
    let uid = std::fs::read_to_string("/proc/self/status").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1).map(String::from))
    });
    if uid.as_deref() != Some("0") {
        return Some("not root: network namespaces need root".into());
    }
    match Command::new("ip").args(["netns", "list"]).output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "`ip netns list` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!("no `ip` (install iproute2): {e}")),
    }
}

/// Whether this test should skip: prints why and returns true when a tool is missing, or panics
/// when `QUOTAGATE_REQUIRE_TOOLS=1` (CI) says the tools must be there.
pub fn skip_without_tools() -> bool {
    let Some(why) = missing_tool() else { return false };
    if std::env::var("QUOTAGATE_REQUIRE_TOOLS").as_deref() == Ok("1") {
        panic!("QUOTAGATE_REQUIRE_TOOLS=1 but {why}");
    }
    println!("skipped: {why}");
    true
}

/// The ClusterQueue `real` (cpu `cpu`, memory 16Gi, flavor `default-flavor`), as a JSON object to
/// create or merge-patch.
pub fn real_queue(cpu: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "real"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor",
            "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "16Gi"}]}]}]}})
}

/// Creates the flavor `default-flavor`, the ClusterQueue `real` with `cpu` (`real_queue`) and the
/// LocalQueue `real-queue` in `ns` pointing at it.
pub async fn create_real_queue(client: &kube::Client, ns: &str, cpu: &str) {
    use kube::api::{Api, PostParams};
    use quotagate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor};
    let pp = PostParams::default();
    let flavor = serde_json::json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}});
    let local = serde_json::json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "real-queue", "namespace": ns}, "spec": {"clusterQueue": "real"}});
    Api::<ResourceFlavor>::all(client.clone())
        .create(&pp, &serde_json::from_value(flavor).unwrap())
        .await
        .expect("create the ResourceFlavor");
    Api::<ClusterQueue>::all(client.clone())
        .create(&pp, &serde_json::from_value(real_queue(cpu)).unwrap())
        .await
        .expect("create the ClusterQueue");
    Api::<LocalQueue>::namespaced(client.clone(), ns)
        .create(&pp, &serde_json::from_value(local).unwrap())
        .await
        .expect("create the LocalQueue");
}

/// Whether pod bridge `bridge` is gone, or is another live instance's: once an instance releases its
/// /24, a quotagate started meanwhile (another test on this host) may take it and make its own bridge.
pub fn bridge_gone_or_reused(bridge: &str) -> bool {
    if !Command::new("ip")
        .args(["link", "show", bridge])
        .output()
        .unwrap()
        .status
        .success()
    {
        return true;
    }
    let block = bridge.trim_start_matches("qgbr");
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/run/quotagate/pod-net/{block}.lock"));
    lock.is_ok_and(|f| f.try_lock().is_err())
}

pub fn netns_pids(ns: &str) -> Vec<u32> {
    let out = Command::new("ip").args(["netns", "pids", ns]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// A process that exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(')').next().and_then(|r| r.split_whitespace().next()) != Some("Z"))
}

/// Polls `f` every 250 ms until it returns Ok, failing after `secs` with `what` and the last state;
/// prints how long into the test (`t0`) it held.
pub async fn wait<T, F, Fut>(secs: u64, what: &str, t0: Instant, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match f().await {
            Ok(v) => {
                println!("  +{:.1?} {what}", t0.elapsed());
                return v;
            }
            Err(last) => assert!(
                Instant::now() < deadline,
                "{what}: not within {secs} s; last: {last}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The body of `GET http://{addr}{path}` (HTTP/1.0, so the server closes), None on any failure.
pub async fn http_get(addr: &str, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut c = tokio::net::TcpStream::connect(addr).await.ok()?;
        c.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut out = Vec::new();
        c.read_to_end(&mut out).await.ok()?;
        let text = String::from_utf8_lossy(&out).into_owned();
        let (head, body) = text.split_once("\r\n\r\n")?;
        head.split_whitespace().nth(1).filter(|s| s.starts_with('2'))?;
        Some(body.to_owned())
    };
    tokio::time::timeout(Duration::from_secs(15), exchange)
        .await
        .ok()
        .flatten()
}
