//! Issue 47, "restarts are invisible to traffic", measured from outside the process:
//! `quotagate run --embedded --data-dir D` as a child process, the project's incremental sample
//! (`config/samples/incremental`, queue-managed in its own 9-CPU quota) serving under the simulated
//! load through its HTTPRoute, and an upgrade during which the process is stopped, twice with SIGKILL
//! and once with SIGTERM, at seeded moments, then started again on the same directory. After every
//! start, for 4 s: the RayService is Ready with serve endpoints at every read, and the new process's
//! simulated load sends requests and counts no failure. The upgrade then completes. Each stop's
//! downtime (signal to the API answering again) is printed. Rerun a failure with
//! QUOTAGATE_RESTART_SEED=<seed>.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use quotagate::api::ray::RayService;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use super::gated::{active, pending, ready};
use super::support::scrape;

const RS: &str = "inc";
/// How long after each start the traffic is watched.
const OBSERVE: Duration = Duration::from_secs(4);
const START: Duration = Duration::from_secs(60);

struct Process {
    child: Child,
    client: Client,
    health: SocketAddr,
}

fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    l.local_addr().expect("bound address")
}

/// Starts the process on `dir` and waits until its API answers.
async fn start(dir: &Path) -> Process {
    let kubeconfig = dir.join("kubeconfig");
    let _ = std::fs::remove_file(&kubeconfig);
    let health = free_addr();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .expect("server log");
    let child = Command::new(env!("CARGO_BIN_EXE_quotagate"))
        .args([
            "run",
            "--embedded",
            "--pod-start-delay",
            "100ms",
            "--serve-build-delay",
            "200ms",
        ])
        .args(["--replica-start-delay", "200ms", "--data-dir"])
        .arg(dir.join("data"))
        .arg("--listen")
        .arg(free_addr().to_string())
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .arg("--health-addr")
        .arg(health.to_string())
        .stdout(log.try_clone().expect("log handle"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("start quotagate");
    let deadline = Instant::now() + START;
    loop {
        if let Ok(kc) = kube::config::Kubeconfig::read_from(&kubeconfig)
            && let Ok(config) = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await
            && let Ok(client) = Client::try_from(config)
            && Api::<RayService>::namespaced(client.clone(), "default")
                .list(&ListParams::default().limit(1))
                .await
                .is_ok()
        {
            return Process {
                child,
                client,
                health,
            };
        }
        assert!(
            Instant::now() < deadline,
            "the process did not answer within {START:?}; see {}",
            dir.join("server.log").display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Creates every object of a sample file (documents split on `---`).
async fn apply(client: &Client, file: &str, edit: impl Fn(&mut Value)) {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).expect("sample");
    for doc in text.split("\n---\n") {
        let mut v: Value = serde_saphyr::from_str(doc).expect("sample YAML");
        edit(&mut v);
        let (group, version) = match v["apiVersion"].as_str().unwrap_or_default().split_once('/') {
            Some((g, ver)) => (g.to_string(), ver.to_string()),
            None => (
                String::new(),
                v["apiVersion"].as_str().unwrap_or_default().to_string(),
            ),
        };
        let kind = v["kind"].as_str().unwrap_or_default().to_string();
        let gvk = kube::core::GroupVersionKind::gvk(&group, &version, &kind);
        let plural = format!("{}s", kind.to_lowercase());
        let ar = ApiResource::from_gvk_with_plural(&gvk, &plural);
        let obj: DynamicObject = serde_json::from_value(v).expect("an object");
        let api: Api<DynamicObject> = match obj.metadata.namespace.as_deref() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        api.create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("create {kind}: {e}"));
    }
}

/// The sum of every series starting with `prefix`.
fn total(text: &str, prefix: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<u64>().ok()))
        .sum()
}

/// Waits for the RayService to satisfy `cond`.
async fn wait_rs(
    api: &Api<RayService>,
    what: &str,
    limit: Duration,
    cond: impl Fn(&RayService) -> bool,
) -> RayService {
    let deadline = Instant::now() + limit;
    loop {
        let rs = api.get_opt(RS).await.ok().flatten();
        if let Some(rs) = rs.filter(|r| cond(r)) {
            return rs;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Watches the traffic of a freshly started process for `OBSERVE`: Ready with serve endpoints at
/// every read, requests sent and none failed. Returns the requests the load sent.
async fn traffic_holds(p: &Process, what: &str) -> u64 {
    let api: Api<RayService> = Api::namespaced(p.client.clone(), "default");
    let until = Instant::now() + OBSERVE;
    while Instant::now() < until {
        let rs = api.get(RS).await.expect("the RayService");
        let endpoints = rs
            .status
            .as_ref()
            .and_then(|s| s.num_serve_endpoints)
            .unwrap_or(0);
        assert!(
            ready(&rs) && endpoints > 0,
            "{what}: the service stopped serving: {:?}",
            rs.status
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let metrics = scrape(p.health).await;
    let failed = total(
        &metrics,
        "quotagate_sim_failed_requests_total{namespace=\"default\",route=\"inc-httproute\",reason=\"all\"}",
    );
    let sent = total(&metrics, "quotagate_sim_requests_total{");
    assert_eq!(
        failed, 0,
        "{what}: the simulated load failed requests:\n{metrics}"
    );
    assert!(sent > 0, "{what}: the simulated load sent nothing:\n{metrics}");
    sent
}

fn scratch(seed: u64) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("quotagate-restart-traffic-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// Stops the process with `signal` and waits for it to exit.
async fn stop(p: &mut Process, signal: &str) {
    if signal == "KILL" {
        p.child.start_kill().expect("SIGKILL");
    } else {
        let pid = p.child.id().expect("a running process").to_string();
        let status = Command::new("kill")
            .args(["-s", signal, &pid])
            .status()
            .await
            .expect("kill");
        assert!(status.success(), "kill -s {signal} {pid}");
    }
    tokio::time::timeout(Duration::from_secs(30), p.child.wait())
        .await
        .expect("the process exits")
        .expect("reaped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_and_sigterm_mid_incremental_upgrade_cost_no_traffic_once_back() {
    let seed = std::env::var("QUOTAGATE_RESTART_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    println!("restart-traffic seed {seed}: rerun with QUOTAGATE_RESTART_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = scratch(seed);
    let mut p = start(&dir).await;
    apply(&p.client, "config/samples/incremental/quota.yaml", |_| {}).await;
    apply(&p.client, "config/samples/incremental/rayservice.yaml", |v| {
        v["spec"]["upgradeStrategy"]["clusterUpgradeOptions"]["intervalSeconds"] = json!(2);
        v["spec"]["rayClusterDeletionDelaySeconds"] = json!(1);
    })
    .await;
    let services: Api<RayService> = Api::namespaced(p.client.clone(), "default");
    let rs = wait_rs(&services, "the sample to serve", Duration::from_secs(90), |r| {
        ready(r) && active(r).is_some()
    })
    .await;
    let old = active(&rs).expect("an active cluster");
    let change = json!({"spec": {"rayClusterConfig": {"rayVersion": "2.47.0"}}});
    services
        .patch(RS, &PatchParams::default(), &Patch::Merge(&change))
        .await
        .expect("start the upgrade");
    wait_rs(&services, "the upgrade to start", Duration::from_secs(30), |r| {
        pending(r).is_some()
    })
    .await;
    for signal in ["KILL", "TERM", "KILL"] {
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..2500))).await;
        let rs = Api::<RayService>::namespaced(p.client.clone(), "default")
            .get(RS)
            .await
            .expect("the RayService");
        let moment = format!("active {:?}, pending {:?}", active(&rs), pending(&rs));
        let stopped = Instant::now();
        stop(&mut p, signal).await;
        p = start(&dir).await;
        let downtime = stopped.elapsed();
        let sent = traffic_holds(&p, &format!("after SIG{signal} ({moment})")).await;
        println!(
            "SIG{signal} at {moment}: API back after {downtime:?}; then {OBSERVE:?} Ready, {sent} requests, 0 failed"
        );
    }
    let services: Api<RayService> = Api::namespaced(p.client.clone(), "default");
    let rs = wait_rs(
        &services,
        "the upgrade to complete",
        Duration::from_secs(120),
        |r| ready(r) && pending(r).is_none() && active(r).is_some_and(|a| a != old),
    )
    .await;
    println!("upgrade complete: {old} -> {}", active(&rs).unwrap_or_default());
    let _ = p.child.start_kill();
    let _ = p.child.wait().await;
    let _ = std::fs::remove_dir_all(&dir);
}
