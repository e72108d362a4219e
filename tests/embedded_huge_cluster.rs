//! Issue 41, end to end: a RayCluster asking for 2^31 - 1 workers against `quotagate run --embedded`
//! as a child process under a small storage quota (32 MiB of held objects). Pods are created in
//! bounded batches until the store refuses more; the process's peak memory stays under a stated bound
//! (512 MiB), a GET answers throughout (its latencies are printed). The RayCluster's `status.reason`
//! says from its first status write that no Kubernetes cluster runs that many pods; its
//! `ReplicaFailure` condition (KubeRay's) says why pods stop being created (etcd's "database space
//! exceeded") where the full store still takes that write, and the process's log always does.
//! Issue 60: the same under the default quota (256 MiB held), watched for 45 s, should stay under
//! 1 GiB (ignored: it does not yet).

mod embedded_support;

use std::time::{Duration, Instant};

use embedded_support::peak_rss_kib;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use quotagate::api::ray::RayCluster;
use serde_json::json;
use tokio::process::Command;

/// The stated bound on the process's peak resident set under the small quota.
const PEAK_RSS_BOUND_KIB: u64 = 512 * 1024;
const WATCH: Duration = Duration::from_secs(20);
/// Under the default quota (issue 60): the bound and how long the test watches.
const DEFAULT_QUOTA_RSS_BOUND_KIB: u64 = 1024 * 1024;
const DEFAULT_QUOTA_WATCH: Duration = Duration::from_secs(45);

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    l.local_addr().expect("bound address").to_string()
}

fn huge() -> RayCluster {
    let container = |n: &str| json!({"name": n, "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "100m"}}});
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "huge", "namespace": "default"},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head")]}}},
            "workerGroupSpecs": [{"groupName": "w", "replicas": i32::MAX, "minReplicas": 0, "maxReplicas": i32::MAX,
                "rayStartParams": {}, "template": {"spec": {"containers": [container("ray-worker")]}}}]
        }
    }))
    .expect("a RayCluster")
}

/// What one run saw.
struct Seen {
    latencies: Vec<Duration>,
    peak: u64,
    base_rss: u64,
    half_rss: u64,
    pods: usize,
}

/// Starts `run --embedded` (with `--storage-quota QUOTA` when given), creates the huge cluster, and
/// GETs it every 100 ms for `watch`, each answered within 5 s; leaves the process running.
async fn watch_huge(
    name: &str,
    quota: Option<&str>,
    watch: Duration,
) -> (tokio::process::Child, Client, std::path::PathBuf, Seen) {
    let dir = std::env::temp_dir().join(format!("quotagate-huge-cluster-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let kubeconfig = dir.join("kubeconfig");
    // `QUOTAGATE_BIN=target/release/quotagate` measures a release binary from a debug test.
    let bin = std::env::var_os("QUOTAGATE_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_quotagate").into());
    let mut cmd = Command::new(bin);
    cmd.args(["run", "--embedded", "--pod-start-delay", "0ms"]);
    if let Some(q) = quota {
        cmd.args(["--storage-quota", q]);
    }
    let child = cmd
        .arg("--listen")
        .arg(free_addr())
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("server.log")).expect("server log"))
        .kill_on_drop(true)
        .spawn()
        .expect("start quotagate");
    let deadline = Instant::now() + Duration::from_secs(60);
    let client = loop {
        if let Ok(kc) = kube::config::Kubeconfig::read_from(&kubeconfig)
            && let Ok(config) = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await
            && let Ok(client) = Client::try_from(config)
            && client.apiserver_version().await.is_ok()
        {
            break client;
        }
        assert!(
            Instant::now() < deadline,
            "the process did not answer within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let clusters: Api<RayCluster> = Api::namespaced(client.clone(), "default");
    clusters
        .create(&PostParams::default(), &huge())
        .await
        .expect("the API takes the cluster");
    let base_rss = peak_rss_kib(&child);

    // Every 100 ms for `watch`: a GET of the cluster, timed.
    let mut latencies = Vec::new();
    let (start, mut half_rss) = (Instant::now(), 0);
    while start.elapsed() < watch {
        if half_rss == 0 && start.elapsed() > watch / 2 {
            half_rss = peak_rss_kib(&child);
        }
        let t = Instant::now();
        let got = tokio::time::timeout(Duration::from_secs(5), clusters.get("huge")).await;
        assert!(
            matches!(got, Ok(Ok(_))),
            "a GET went unanswered for 5 s or failed: {got:?}"
        );
        latencies.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    latencies.sort();
    let peak = peak_rss_kib(&child);
    let pods = Api::<Pod>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .len();
    let seen = Seen {
        latencies,
        peak,
        base_rss,
        half_rss,
        pods,
    };
    (child, client, dir, seen)
}

fn percentile(latencies: &[Duration], q: f64) -> Duration {
    latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_billion_worker_cluster_stops_at_the_storage_quota_and_says_why() {
    let (mut child, client, dir, seen) = watch_huge("small", Some("33554432"), WATCH).await;
    let Seen {
        latencies,
        peak,
        base_rss,
        half_rss,
        pods,
    } = seen;
    let p = |q: f64| percentile(&latencies, q);
    let clusters: Api<RayCluster> = Api::namespaced(client.clone(), "default");
    let rc = clusters.get("huge").await.expect("the cluster");
    let failure = rc
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == "ReplicaFailure" && c.status == "True")
        })
        .map(|c| format!("{}: {}", c.reason, c.message))
        .unwrap_or_default();
    let events = Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("events")
        .items;
    let said: Vec<String> = events
        .iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some("huge") && e.type_.as_deref() == Some("Warning")
        })
        .filter_map(|e| e.message.clone())
        .collect();
    println!(
        "2^31-1 workers under a 32 MiB storage quota: {pods} pods created; GET p50 {:?}, p99 {:?}, max {:?} over {} reads; peak RSS {} MiB (at create {} MiB, at half time {} MiB); ReplicaFailure {failure}",
        p(0.5),
        p(0.99),
        latencies.last().copied().unwrap_or_default(),
        latencies.len(),
        peak / 1024,
        base_rss / 1024,
        half_rss / 1024
    );
    assert!(
        peak < PEAK_RSS_BOUND_KIB,
        "peak RSS {} MiB over the bound of {} MiB",
        peak / 1024,
        PEAK_RSS_BOUND_KIB / 1024
    );
    assert!(
        pods > 100 && pods < 100_000,
        "{pods} pods: creation neither started nor stopped"
    );
    // The store refuses what does not fit, as etcd does once its quota is reached: the condition (a
    // few hundred bytes on an existing object) usually fits where a pod did not, the Warning event (a
    // new object) less often. When the store is too full for either, the process's log says why.
    // On a loaded machine pods are created more slowly and the store may fill only after the watch
    // window: give it up to a minute more before calling the log silent.
    let full_by = Instant::now() + Duration::from_secs(60);
    let logged = loop {
        let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
        let logged = log
            .lines()
            .any(|l| l.contains("database space exceeded") || l.contains("storage quota"));
        if logged || Instant::now() > full_by {
            break logged;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    println!("why, as the user sees it: condition {failure:?}, events {said:?}, in the log: {logged}");
    assert!(
        logged,
        "the log does not say the store is full (condition {failure:?}, events {said:?})"
    );
    // Said from the first status write, before anything refused a pod.
    let reason = rc
        .status
        .as_ref()
        .and_then(|s| s.reason.clone())
        .unwrap_or_default();
    assert!(
        reason.starts_with("ReplicasBeyondClusterLimit:") && reason.contains("2147483647 pods"),
        "status.reason: {reason:?}"
    );
    let _ = child.start_kill();
    let _ = child.wait().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 60: under the default storage quota (256 MiB of held objects), the process should stay
/// under 1 GiB while pods are created in batches, and GETs keep being answered (p99 printed).
/// Ignored because it does not hold yet: against a release binary (`QUOTAGATE_BIN=...`) the process
/// passed 1 GiB after 3,050 pods in 45 s, with the store holding about 30 KB per pod; the rest is
/// outside the store (the simulators' and the manager's caches and work), not bounded by the quota.
/// Since then the watch history keeps replaced versions as compact JSON instead of parsed objects
/// (up to 32 MiB, where it could hold about ten times its 16 MiB bound parsed); not re-measured here
/// (no release build at the time), and most of the 1 GiB was outside the store. Since then the
/// in-process reflectors get no managedFields and LISTs and watch events are no longer copied before
/// they are written: by hand (debug binary) RSS grew 3.3 to 4.0 bytes per held byte where it grew
/// 5.3 to 8.0, which puts the process at about 1.1 GiB at the default quota: closer, not under the
/// bound. Since the store keeps compact JSON (the quota still counting each object parsed), a
/// release binary passes one run in three: the store refused at about 4,050 pods with the process at
/// 983, 1066 and 1049 MiB, GET p99 406, 564 and 685 ms. Still ignored: the rest is the manager's and
/// the simulators' caches. By hand:
/// `QUOTAGATE_BIN=target/release/quotagate cargo test --test embedded_huge_cluster -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn a_two_billion_worker_cluster_under_the_default_quota_stays_under_a_gib() {
    let (mut child, _client, dir, seen) = watch_huge("default", None, DEFAULT_QUOTA_WATCH).await;
    let p = |q: f64| percentile(&seen.latencies, q);
    let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    let full = log
        .lines()
        .any(|l| l.contains("database space exceeded") || l.contains("storage quota"));
    println!(
        "2^31-1 workers under the default quota, {} s: {} pods; GET p50 {:?}, p99 {:?}, max {:?} over {} reads; RSS at create {} MiB, at half time {} MiB, peak {} MiB; store full: {full}",
        DEFAULT_QUOTA_WATCH.as_secs(),
        seen.pods,
        p(0.5),
        p(0.99),
        seen.latencies.last().copied().unwrap_or_default(),
        seen.latencies.len(),
        seen.base_rss / 1024,
        seen.half_rss / 1024,
        seen.peak / 1024
    );
    assert!(
        seen.peak < DEFAULT_QUOTA_RSS_BOUND_KIB,
        "peak RSS {} MiB over the bound of {} MiB",
        seen.peak / 1024,
        DEFAULT_QUOTA_RSS_BOUND_KIB / 1024
    );
    assert!(seen.pods > 100, "{} pods: creation did not start", seen.pods);
    let _ = child.start_kill();
    let _ = child.wait().await;
    let _ = std::fs::remove_dir_all(&dir);
}
