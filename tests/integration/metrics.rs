//! `/metrics` against the catalogue of Kueue's and KubeRay's own metric definitions, scraped from
//! `run_embedded` during a quota-gated RayService upgrade driven with the real kubectl; and the gate
//! in `kubectl get rayservice`.
//!
//! The catalogue is taken from kubernetes-sigs/kueue:pkg/metrics/metrics.go (names, types, label
//! lists; every series carries `replica_role`) and ray-project/kuberay:ray-operator/controllers/ray/
//! metrics/ray_{cluster,service}_metrics.go, plus quotagate's gate metrics. Families are named as the
//! OpenMetrics `# TYPE` line names them (a counter without `_total`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use quotagate::wiring::ray::Dashboards;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::kubectl::Running;

const CQ_PC: &[&str] = &["cluster_queue", "priority_class", "replica_role"];
const CQ_RES: &[&str] = &["cohort", "cluster_queue", "flavor", "resource", "replica_role"];
const LQ: &[&str] = &["name", "namespace", "replica_role"];
const LQ_PC: &[&str] = &["name", "namespace", "priority_class", "replica_role"];
const LQ_RES: &[&str] = &["name", "namespace", "flavor", "resource", "replica_role"];
const COHORT_RES: &[&str] = &["cohort", "flavor", "resource", "replica_role"];

/// (family, type, label names).
const CATALOGUE: &[(&str, &str, &[&str])] = &[
    ("kueue_admission_attempts", "counter", &["result", "replica_role"]),
    (
        "kueue_admission_attempt_duration_seconds",
        "histogram",
        &["result", "replica_role"],
    ),
    (
        "kueue_pending_workloads",
        "gauge",
        &["cluster_queue", "status", "replica_role"],
    ),
    (
        "kueue_finished_workloads",
        "gauge",
        &["cluster_queue", "replica_role"],
    ),
    ("kueue_quota_reserved_workloads", "counter", CQ_PC),
    ("kueue_quota_reserved_wait_time_seconds", "histogram", CQ_PC),
    ("kueue_admitted_workloads", "counter", CQ_PC),
    ("kueue_admission_wait_time_seconds", "histogram", CQ_PC),
    ("kueue_admission_checks_wait_time_seconds", "histogram", CQ_PC),
    (
        "kueue_evicted_workloads",
        "counter",
        &[
            "cluster_queue",
            "reason",
            "underlying_cause",
            "priority_class",
            "replica_role",
        ],
    ),
    (
        "kueue_evicted_workloads_once",
        "counter",
        &[
            "cluster_queue",
            "reason",
            "underlying_cause",
            "priority_class",
            "replica_role",
        ],
    ),
    (
        "kueue_preempted_workloads",
        "counter",
        &["preempting_cluster_queue", "reason", "replica_role"],
    ),
    (
        "kueue_replaced_workload_slices",
        "counter",
        &["cluster_queue", "replica_role"],
    ),
    (
        "kueue_reserving_active_workloads",
        "gauge",
        &["cluster_queue", "replica_role"],
    ),
    (
        "kueue_admitted_active_workloads",
        "gauge",
        &["cluster_queue", "replica_role"],
    ),
    (
        "kueue_cluster_queue_status",
        "gauge",
        &["cluster_queue", "status", "replica_role"],
    ),
    ("kueue_cluster_queue_resource_reservation", "gauge", CQ_RES),
    ("kueue_cluster_queue_resource_usage", "gauge", CQ_RES),
    ("kueue_cluster_queue_nominal_quota", "gauge", CQ_RES),
    ("kueue_cluster_queue_borrowing_limit", "gauge", CQ_RES),
    ("kueue_cluster_queue_lending_limit", "gauge", CQ_RES),
    (
        "kueue_local_queue_pending_workloads",
        "gauge",
        &["name", "namespace", "status", "replica_role"],
    ),
    ("kueue_local_queue_reserving_active_workloads", "gauge", LQ),
    ("kueue_local_queue_admitted_active_workloads", "gauge", LQ),
    ("kueue_local_queue_finished_workloads", "gauge", LQ),
    (
        "kueue_local_queue_status",
        "gauge",
        &["name", "namespace", "active", "replica_role"],
    ),
    ("kueue_local_queue_resource_reservation", "gauge", LQ_RES),
    ("kueue_local_queue_resource_usage", "gauge", LQ_RES),
    ("kueue_local_queue_quota_reserved_workloads", "counter", LQ_PC),
    ("kueue_local_queue_admitted_workloads", "counter", LQ_PC),
    (
        "kueue_local_queue_admission_wait_time_seconds",
        "histogram",
        LQ_PC,
    ),
    (
        "kueue_local_queue_evicted_workloads",
        "counter",
        &[
            "name",
            "namespace",
            "reason",
            "underlying_cause",
            "priority_class",
            "replica_role",
        ],
    ),
    (
        "kueue_local_queue_quota_reserved_wait_time_seconds",
        "histogram",
        LQ_PC,
    ),
    (
        "kueue_local_queue_admission_checks_wait_time_seconds",
        "histogram",
        LQ_PC,
    ),
    // Counters next to a gauge of the same stem: served untyped under Kueue's `_total` name (see
    // quotagate's TotalCounter).
    ("kueue_finished_workloads_total", "unknown", CQ_PC),
    ("kueue_local_queue_finished_workloads_total", "unknown", LQ_PC),
    ("kueue_execution_time_seconds", "histogram", CQ_PC),
    // waitForPodsReady's (no LocalQueue variant of the eviction one in Kueue).
    ("kueue_ready_wait_time_seconds", "histogram", CQ_PC),
    ("kueue_admitted_until_ready_wait_time_seconds", "histogram", CQ_PC),
    ("kueue_local_queue_ready_wait_time_seconds", "histogram", LQ_PC),
    (
        "kueue_local_queue_admitted_until_ready_wait_time_seconds",
        "histogram",
        LQ_PC,
    ),
    (
        "kueue_pods_ready_to_evicted_time_seconds",
        "histogram",
        &["cluster_queue", "reason", "underlying_cause", "replica_role"],
    ),
    (
        "kueue_local_queue_admission_fair_sharing_usage",
        "gauge",
        &["name", "namespace", "cluster_queue", "replica_role"],
    ),
    ("kueue_local_queue_execution_time_seconds", "histogram", LQ_PC),
    (
        "kueue_admission_cycle_preemption_skips",
        "gauge",
        &["cluster_queue", "replica_role"],
    ),
    (
        "kueue_preemption_target_recomputations",
        "counter",
        &["cluster_queue", "result", "replica_role"],
    ),
    (
        "kueue_cluster_queue_resource_pending",
        "gauge",
        &["cluster_queue", "resource", "replica_role"],
    ),
    (
        "kueue_cluster_queue_info",
        "gauge",
        &["cluster_queue", "parent_cohort", "root_cohort", "replica_role"],
    ),
    (
        "kueue_cohort_info",
        "gauge",
        &["cohort", "parent_cohort", "root_cohort", "replica_role"],
    ),
    ("kueue_cohort_subtree_quota", "gauge", COHORT_RES),
    ("kueue_cohort_subtree_resource_reservations", "gauge", COHORT_RES),
    (
        "kueue_cohort_subtree_admitted_active_workloads",
        "gauge",
        &["cohort", "replica_role"],
    ),
    (
        "kueue_cohort_subtree_admitted_workloads",
        "counter",
        &["cohort", "priority_class", "replica_role"],
    ),
    // Served with fair sharing on only.
    (
        "kueue_cluster_queue_weighted_share",
        "gauge",
        &["cluster_queue", "cohort", "replica_role"],
    ),
    (
        "kueue_cohort_weighted_share",
        "gauge",
        &["cohort", "replica_role"],
    ),
    (
        "kueue_build_info",
        "gauge",
        &[
            "git_version",
            "git_commit",
            "build_date",
            "go_version",
            "compiler",
            "platform",
        ],
    ),
    (
        "kuberay_cluster_info",
        "gauge",
        &["name", "namespace", "owner_kind"],
    ),
    (
        "kuberay_cluster_condition_provisioned",
        "gauge",
        &["name", "namespace", "condition"],
    ),
    (
        "kuberay_cluster_provisioned_duration_seconds",
        "gauge",
        &["name", "namespace"],
    ),
    ("kuberay_service_info", "gauge", &["name", "namespace"]),
    (
        "kuberay_service_condition_ready",
        "gauge",
        &["name", "namespace", "condition"],
    ),
    (
        "kuberay_service_condition_upgrade_in_progress",
        "gauge",
        &["name", "namespace", "condition"],
    ),
    ("kuberay_job_info", "gauge", &["name", "namespace"]),
    (
        "kuberay_job_deployment_status",
        "gauge",
        &["name", "namespace", "deployment_status"],
    ),
    (
        "kuberay_job_execution_duration_seconds",
        "gauge",
        &["name", "namespace", "job_deployment_status", "retry_count"],
    ),
    (
        "quotagate_raycluster_quota_gated",
        "gauge",
        &["name", "namespace", "rayservice"],
    ),
    (
        "quotagate_raycluster_gated_seconds",
        "gauge",
        &["name", "namespace", "rayservice"],
    ),
    ("quotagate_gate_wait_seconds", "histogram", &[]),
    ("quotagate_gate_latency_seconds", "histogram", &[]),
    (
        "quotagate_rayservice_traffic_steps",
        "counter",
        &["name", "namespace"],
    ),
    // Events the admission loop's bounded queue dropped: counted here, logged once (issue 62).
    ("quotagate_events_dropped", "counter", &[]),
];

fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

async fn scrape(addr: SocketAddr) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or(out)
}

/// The label names of a sample line `name{a="x",b="y"} v`.
fn label_names(line: &str) -> (String, BTreeSet<String>) {
    let Some((name, rest)) = line.split_once('{') else {
        return (
            line.split(' ').next().unwrap_or_default().to_string(),
            BTreeSet::new(),
        );
    };
    let mut names = BTreeSet::new();
    let mut rest = rest;
    while let Some((key, after)) = rest.split_once("=\"") {
        names.insert(key.trim_start_matches(',').to_string());
        // Skip the value up to its closing, unescaped quote.
        let mut end = 0;
        let bytes = after.as_bytes();
        while end < bytes.len() && !(bytes[end] == b'"' && (end == 0 || bytes[end - 1] != b'\\')) {
            end += 1;
        }
        rest = &after[(end + 1).min(after.len())..];
        if rest.starts_with('}') {
            break;
        }
    }
    (name.to_string(), names)
}

/// Every family of the catalogue that has series is declared with its type, and every sample of it
/// carries exactly its labels (`le` besides on histogram buckets). Returns the families with samples.
fn check(text: &str) -> BTreeSet<String> {
    let types: BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let mut with_samples = BTreeSet::new();
    for (family, ty, labels) in CATALOGUE {
        // prometheus-client declares a family only once it has a series.
        let Some(declared) = types.get(family) else {
            assert!(
                !text
                    .lines()
                    .any(|l| l.starts_with(family) && l[family.len()..].starts_with(['{', '_', ' '])),
                "{family} has samples but no # TYPE:\n{text}"
            );
            continue;
        };
        assert_eq!(declared, ty, "{family} is declared as a {declared}, not a {ty}");
        let want: BTreeSet<String> = labels.iter().map(|s| s.to_string()).collect();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, mut got) = label_names(line);
            let Some(suffix) = name.strip_prefix(family) else {
                continue;
            };
            let ok_suffix = match *ty {
                "counter" => suffix == "_total",
                "histogram" => ["_bucket", "_sum", "_count"].contains(&suffix),
                _ => suffix.is_empty(),
            };
            if !ok_suffix {
                continue;
            }
            if suffix == "_bucket" {
                assert!(got.remove("le"), "{line}");
            }
            assert_eq!(got, want, "labels of {line}");
            with_samples.insert(family.to_string());
        }
    }
    with_samples
}

async fn apply(run: &Running, name: &str, doc: serde_json::Value) {
    let path = run.dir.join(format!("{name}.json"));
    std::fs::write(&path, doc.to_string()).unwrap();
    let (ok, out) = run.kubectl(&["apply", "-f", path.to_str().unwrap()]).await;
    assert!(ok, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_kueue_and_kuberay_and_kubectl_shows_the_gate() {
    let health = free_port();
    let Some(run) = Running::start_with("metrics", |o| {
        o.manager.ray = Some(Dashboards::simulated(
            Duration::from_millis(100),
            Duration::from_millis(100),
        ));
        o.manager.health_addr = Some(health);
    })
    .await
    else {
        return;
    };
    let kubectl_ok = async |args: &[&str]| {
        let (ok, out) = run.kubectl(args).await;
        assert!(ok, "kubectl {args:?}: {out}");
        out
    };
    apply(&run, "rf", json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}})).await;
    // cq sits in cohort co, under the implicit root cohort `root`, for the cohort metrics.
    apply(&run, "co", json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "co"}, "spec": {"parentName": "root"}})).await;
    let cq = |cpu: &str| {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {"namespaceSelector": {}, "cohortName": "co",
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "64Gi"}]}]}]}})
    };
    apply(&run, "cq", cq("3")).await;
    apply(&run, "lq", json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "default"}, "spec": {"clusterQueue": "cq"}})).await;
    // Head 1 CPU + one 1-CPU worker: 2 of 3 CPU; the upgrade's second cluster needs 4.
    apply(
        &run,
        "rs",
        serde_json::to_value(super::gated::service("rs", "1", "2.46.0")).unwrap(),
    )
    .await;
    kubectl_ok(&["wait", "--for=condition=Ready", "rayservice/rs", "--timeout=60s"]).await;
    kubectl_ok(&[
        "patch",
        "rayservice",
        "rs",
        "--type=merge",
        "-p",
        r#"{"spec":{"rayClusterConfig":{"rayVersion":"2.47.0"}}}"#,
    ])
    .await;
    kubectl_ok(&["wait", r#"--for=jsonpath={.status.pendingServiceStatus.rayClusterStatus.conditions[?(@.type=="QuotaGated")].reason}=WaitingForWorkloadSlice"#, "rayservice/rs", "--timeout=30s"]).await;
    let table = kubectl_ok(&["get", "rayservice", "rs"]).await;
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        header,
        ["NAME", "SERVICE STATUS", "NUM SERVE ENDPOINTS", "QUOTA GATE"],
        "{table}"
    );
    assert!(
        lines
            .next()
            .is_some_and(|l| l.starts_with("rs ") && l.trim_end().ends_with("WaitingForWorkloadSlice")),
        "{table}"
    );

    let text = scrape(health).await;
    let seen = check(&text);
    for family in [
        "kueue_admission_attempts",
        "kueue_pending_workloads",
        "kueue_admitted_workloads",
        "kueue_admission_wait_time_seconds",
        "kueue_cluster_queue_resource_usage",
        "kueue_cluster_queue_nominal_quota",
        "kueue_local_queue_admitted_workloads",
        "kueue_build_info",
        "kuberay_cluster_info",
        "kuberay_cluster_provisioned_duration_seconds",
        "kuberay_service_condition_upgrade_in_progress",
        "quotagate_raycluster_quota_gated",
        "quotagate_events_dropped",
    ] {
        assert!(seen.contains(family), "no sample of {family}:\n{text}");
    }
    assert!(text.contains("kueue_cluster_queue_nominal_quota{cohort=\"co\",cluster_queue=\"cq\",flavor=\"default-flavor\",resource=\"cpu\",replica_role=\"leader\"} 3"), "{text}");
    // Kueue's reportResourceMetrics: no borrowing limit is +Inf.
    assert!(text.contains("kueue_cluster_queue_borrowing_limit{cohort=\"co\",cluster_queue=\"cq\",flavor=\"default-flavor\",resource=\"cpu\",replica_role=\"leader\"} inf"), "{text}");
    // Kueue's cohort_metrics.go: the tree, and per cohort the subtree's quota (3 CPU, none lent
    // away), reservations (the running cluster's 2 CPU) and admitted workloads.
    for want in [
        "kueue_cluster_queue_info{cluster_queue=\"cq\",parent_cohort=\"co\",root_cohort=\"root\",replica_role=\"leader\"} 1",
        "kueue_cohort_info{cohort=\"co\",parent_cohort=\"root\",root_cohort=\"root\",replica_role=\"leader\"} 1",
        "kueue_cohort_info{cohort=\"root\",parent_cohort=\"\",root_cohort=\"root\",replica_role=\"leader\"} 1",
        "kueue_cohort_subtree_quota{cohort=\"co\",flavor=\"default-flavor\",resource=\"cpu\",replica_role=\"leader\"} 3.0",
        "kueue_cohort_subtree_quota{cohort=\"root\",flavor=\"default-flavor\",resource=\"cpu\",replica_role=\"leader\"} 3.0",
        "kueue_cohort_subtree_resource_reservations{cohort=\"root\",flavor=\"default-flavor\",resource=\"cpu\",replica_role=\"leader\"} 2.0",
        "kueue_cohort_subtree_admitted_active_workloads{cohort=\"co\",replica_role=\"leader\"} 1",
        "kueue_cohort_subtree_admitted_workloads_total{cohort=\"co\",priority_class=\"\",replica_role=\"leader\"} 1",
        "kueue_cohort_subtree_admitted_workloads_total{cohort=\"root\",priority_class=\"\",replica_role=\"leader\"} 1",
        // Kueue's cluster_queue_resource_pending: the waiting slice's requests (the running
        // cluster's 2 CPU and the new one's 2), before flavors are assigned.
        "kueue_cluster_queue_resource_pending{cluster_queue=\"cq\",resource=\"cpu\",replica_role=\"leader\"} 4.0",
    ] {
        assert!(text.contains(want), "missing {want} in\n{text}");
    }
    assert!(text.contains("kuberay_service_condition_upgrade_in_progress{name=\"rs\",namespace=\"default\",condition=\"true\"} 1"), "{text}");
    let gated: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("quotagate_raycluster_quota_gated{") && l.ends_with(" 1"))
        .collect();
    assert_eq!(gated.len(), 1, "one cluster waits behind the gate:\n{text}");

    // Raise the quota: the slice is admitted, the gate opens, the old slice is replaced.
    apply(&run, "cq", cq("4")).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = scrape(health).await;
        // /metrics has no watch to wait on: poll it, bounded.
        if text.contains("quotagate_gate_wait_seconds_count 1")
            && text.contains("kueue_replaced_workload_slices_total{cluster_queue=\"cq\"")
            && text.contains("kueue_finished_workloads_total{")
        {
            break text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gate did not open:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let seen = check(&text);
    assert!(
        seen.contains("quotagate_gate_wait_seconds") && seen.contains("kueue_replaced_workload_slices"),
        "{text}"
    );
    assert!(
        text.contains("quotagate_gate_latency_seconds_count 1"),
        "the slice's admission was seen before the gate opened:\n{text}"
    );
    // The replaced slice finished (Kueue's reportFinishedWorkload): counted once, with its time run;
    // the replacement's admission counts in each cohort above cq.
    for want in [
        "kueue_finished_workloads_total{cluster_queue=\"cq\",priority_class=\"\",replica_role=\"leader\"} 1",
        "kueue_local_queue_finished_workloads_total{name=\"lq\",namespace=\"default\",priority_class=\"\",replica_role=\"leader\"} 1",
        "kueue_execution_time_seconds_count{cluster_queue=\"cq\",priority_class=\"\",replica_role=\"leader\"} 1",
        "kueue_cohort_subtree_admitted_workloads_total{cohort=\"root\",priority_class=\"\",replica_role=\"leader\"} 2",
        "kueue_cluster_queue_resource_pending{cluster_queue=\"cq\",resource=\"cpu\",replica_role=\"leader\"} 0.0",
    ] {
        assert!(text.contains(want), "missing {want} in\n{text}");
    }
    assert!(
        seen.contains("kueue_finished_workloads_total")
            && seen.contains("kueue_local_queue_execution_time_seconds"),
        "{text}"
    );
    run.stop().await;
}
