//! Issue 62 item 3: `quotagate bench e2e --kubeconfig` on the real control plane. The `ci` config is
//! driven through kube-apiserver with the manager in the runner's process; the report must be
//! complete as Kueue's scheduler performance runner (`test/performance/scheduler/runner`) requires of
//! its own runs: every generated workload admitted and finished, each workload class reported, each
//! ClusterQueue class's usage reported. No timing figure is asserted (those belong to the benchmark's
//! printed table, docs/performance.md). Then the run's objects are gone from the server, and a second,
//! smaller run on the same server (CRDs already there, the first run's names free again) completes too.
//!
//! A kubeconfig naming a server nobody answers on fails at once with the server's address, no control
//! plane needed.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{ControlPlane, skip};

fn bench(kubeconfig: &std::path::Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quotagate"))
        .args(["bench", "e2e", "--config", "ci", "--json", "--kubeconfig"])
        .arg(kubeconfig)
        .args(extra)
        .output()
        .expect("quotagate runs")
}

/// The report of a run that reached its end: the JSON on stdout, the process either passed or missed
/// only rangespec thresholds (timing on a loaded machine is not this test's business).
fn report(out: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() || stderr.contains("rangespec threshold(s) missed"),
        "bench e2e failed: {stderr}"
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON report ({e}): {stderr}"))
}

/// Every workload of the config admitted (each class's count) and the usage of its ClusterQueue class.
fn assert_complete(v: &Value, per_class: &[(&str, u64)]) {
    let total: u64 = per_class.iter().map(|(_, n)| n).sum();
    assert_eq!(v["workloads"], total, "{v}");
    assert!(
        v["ground"].as_str().is_some_and(|g| g.starts_with("https://")),
        "{v}"
    );
    for (class, n) in per_class {
        assert_eq!(
            v["timeToAdmission"][class]["admitted"], *n,
            "class {class}: every workload admitted once at least: {v}"
        );
    }
    assert!(
        v["clusterQueueUsagePct"]["cq"].as_f64().is_some_and(|u| u > 0.0),
        "the ClusterQueue class's usage: {v}"
    );
}

/// What carries the bench's run label on the server: Namespaces, ClusterQueues, ResourceFlavors.
fn left_over(kubeconfig: &std::path::Path) -> Vec<String> {
    use kube::api::{Api, ListParams};
    use quotagate::api::kueue::{ClusterQueue, ResourceFlavor};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = quotagate::cli::kube_client(Some(kubeconfig)).await.unwrap();
        let lp = ListParams::default().labels(quotagate::cli::bench::remote::RUN_LABEL);
        let mut left = Vec::new();
        let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        left.extend(
            ns.list(&lp)
                .await
                .unwrap()
                .items
                .iter()
                .map(|o| format!("ns {:?}", o.metadata.name)),
        );
        let cq: Api<ClusterQueue> = Api::all(client.clone());
        left.extend(
            cq.list(&lp)
                .await
                .unwrap()
                .items
                .iter()
                .map(|o| format!("cq {:?}", o.metadata.name)),
        );
        let rf: Api<ResourceFlavor> = Api::all(client);
        left.extend(
            rf.list(&lp)
                .await
                .unwrap()
                .items
                .iter()
                .map(|o| format!("rf {:?}", o.metadata.name)),
        );
        left
    })
}

#[test]
fn bench_e2e_ci_on_the_real_control_plane_admits_and_finishes_everything() {
    let started = Instant::now();
    let cp = match ControlPlane::start("bench") {
        Ok(cp) => cp,
        Err(why) => return skip(&why),
    };
    println!("bench: control plane up after {:?}", started.elapsed());

    // ci: one cohort of 3 ClusterQueues, each 70 small, 20 medium and 10 large.
    let out = bench(&cp.kubeconfig, &[]);
    let v = report(&out);
    println!(
        "bench: ci run ended after {:?}: {}",
        started.elapsed(),
        v["wallMs"]
    );
    assert_complete(&v, &[("large", 30), ("medium", 60), ("small", 210)]);
    assert_eq!(
        left_over(&cp.kubeconfig),
        Vec::<String>::new(),
        "the run deletes its own objects"
    );

    // A rerun on the same server: the CRDs are there, nothing of the first run is in the way.
    let out = bench(&cp.kubeconfig, &["--scale", "0.2"]);
    let v = report(&out);
    assert_complete(&v, &[("large", 6), ("medium", 12), ("small", 42)]);
    assert_eq!(left_over(&cp.kubeconfig), Vec::<String>::new());
}

#[test]
fn bench_e2e_names_a_server_that_does_not_answer() {
    let dir = std::env::temp_dir().join(format!("quotagate-bench-unreachable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    // Port 1 on loopback: nothing listens, the connection is refused.
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n\
         users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
         current-context: x\n",
    )
    .unwrap();
    let t = Instant::now();
    let out = bench(&kubeconfig, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("https://127.0.0.1:1"),
        "the error names the server: {stderr}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "no hang: {:?}",
        t.elapsed()
    );

    let out = bench(&dir.join("missing"), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--kubeconfig") && stderr.contains("missing"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
