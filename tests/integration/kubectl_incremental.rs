//! A RayService in the shape of KubeRay's incremental-upgrade sample
//! (`tests/fixtures/manifests/kuberay/ray-service.incremental-istio.yaml`) upgraded on `run_embedded` (simulated
//! nodes, gateway, Ray dashboards, in-tree autoscaler and a load through the route), driven and read
//! only with the real kubectl, plus the load's counters from `/metrics`.
//!
//! Source: KubeRay `ray-operator/test/e2eincrementalupgrade/rayservice_incremental_upgrade_test.go`
//! (Gateway `<rs>-gateway` of the service's class, HTTPRoute `<rs>-httproute` whose weight on the new
//! cluster rises step by step, `targetCapacity`, `trafficRoutedPercent` and
//! `lastTrafficMigratedTime` on the service statuses, promotion with 100/100 on the active status).
//! Like that e2e, the sample's step, interval and surge are set for the test (25%, 1 s, 50%; the
//! sample's 10%, 30 s, 10% would take five minutes).

use std::time::Duration;

use quotagate::wiring::ray::Dashboards;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::kubectl::Running;

const RS: &str = "rayservice-incremental-upgrade";

/// A free loopback port for `/metrics`.
fn free_port() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

async fn scrape(addr: std::net::SocketAddr) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// The value of the first series starting with `prefix`.
fn series(text: &str, prefix: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_upgrades_kuberays_incremental_sample_step_by_step() {
    let health = free_port();
    let Some(run) = Running::start_with("kubectl-incremental", |o| {
        o.manager.ray = Some(Dashboards::simulated(
            Duration::from_millis(100),
            Duration::from_millis(100),
        ));
        o.manager.health_addr = Some(health);
        o.ray_sims.load_rps = 50.0;
        o.ray_sims.route_scan = Duration::from_millis(100);
    })
    .await
    else {
        return;
    };
    let sample = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/manifests/kuberay/ray-service.incremental-istio.yaml"
    ))
    .unwrap();
    let sample = sample
        .replace("stepSizePercent: 10", "stepSizePercent: 25")
        .replace("intervalSeconds: 30", "intervalSeconds: 1")
        .replace("maxSurgePercent: 10", "maxSurgePercent: 50");
    assert!(sample.contains("intervalSeconds: 1"), "the sample changed");
    let file = run.dir.join("sample.yaml");
    std::fs::write(&file, sample).unwrap();
    let (ok, out) = run.kubectl(&["apply", "-f", file.to_str().unwrap()]).await;
    assert!(ok, "{out}");
    assert!(out.contains(&format!("rayservice.ray.io/{RS} created")), "{out}");
    let (ok, out) = run
        .kubectl(&[
            "wait",
            "--for=condition=Ready",
            &format!("rayservice/{RS}"),
            "--timeout=90s",
        ])
        .await;
    assert!(ok, "{out}");

    let get = |what: &'static str, name: String, path: &'static str| {
        let run = &run;
        async move {
            let (ok, out) = run
                .kubectl(&["get", what, &name, "-o", &format!("jsonpath={path}")])
                .await;
            assert!(ok, "kubectl get {what} {name}: {out}");
            out
        }
    };
    assert_eq!(
        get("gateway", format!("{RS}-gateway"), "{.spec.gatewayClassName}").await,
        "istio"
    );
    let old = get(
        "rayservice",
        RS.into(),
        "{.status.activeServiceStatus.rayClusterName}",
    )
    .await;
    assert!(!old.is_empty());
    let weights = || {
        get(
            "httproute",
            format!("{RS}-httproute"),
            "{range .spec.rules[0].backendRefs[*]}{.name}={.weight} {end}",
        )
    };
    assert_eq!(weights().await.trim(), format!("{old}-serve-svc=100"));

    let (ok, out) = run
        .kubectl(&[
            "patch",
            "rayservice",
            RS,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"rayClusterConfig":{"rayVersion":"2.52.0"}}}"#,
        ])
        .await;
    assert!(ok, "{out}");

    // Poll as a person would: the pending status and the route's weight on the new cluster.
    let mut seen: Vec<i32> = Vec::new();
    let mut saw_migration_time = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let new = loop {
        let st = get(
            "rayservice",
            RS.into(),
            "{.status.activeServiceStatus.rayClusterName},{.status.pendingServiceStatus.rayClusterName},{.status.pendingServiceStatus.lastTrafficMigratedTime}",
        )
        .await;
        let parts: Vec<&str> = st.split(',').collect();
        let (active, pending, migrated) = (
            parts[0],
            parts.get(1).copied().unwrap_or(""),
            parts.get(2).copied().unwrap_or(""),
        );
        if !pending.is_empty() {
            saw_migration_time |= !migrated.is_empty();
            let w = weights().await;
            if let Some(v) = w
                .split_whitespace()
                .find_map(|b| b.strip_prefix(&format!("{pending}-serve-svc=")))
                .and_then(|v| v.parse::<i32>().ok())
                && seen.last() != Some(&v)
            {
                seen.push(v);
            }
        }
        if active != old && pending.is_empty() {
            break active.to_string();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no promotion; weights seen on the new cluster {seen:?}; status {st}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        seen.windows(2).all(|w| w[1] >= w[0]),
        "traffic went back: {seen:?}"
    );
    assert!(
        seen.iter().any(|w| *w > 0 && *w < 100),
        "traffic moved in steps: {seen:?}"
    );
    assert!(
        saw_migration_time,
        "lastTrafficMigratedTime on the pending status"
    );
    assert_eq!(
        get(
            "rayservice",
            RS.into(),
            "{.status.activeServiceStatus.targetCapacity}/{.status.activeServiceStatus.trafficRoutedPercent}"
        )
        .await,
        "100/100"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while weights().await.trim() != format!("{new}-serve-svc=100") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "route still {}",
            weights().await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let metrics = scrape(health).await;
    let route = format!("namespace=\"default\",route=\"{RS}-httproute\"");
    let failed = series(
        &metrics,
        &format!("quotagate_sim_failed_requests_total{{{route},reason=\"all\"}}"),
    );
    let ok_new = series(
        &metrics,
        &format!("quotagate_sim_requests_total{{{route},backend=\"{new}-serve-svc\",result=\"ok\"}}"),
    );
    assert_eq!(failed, Some(0), "{metrics}");
    // The embedded store's size, its quota (256 MiB by default) and its disk alarm (none).
    assert!(
        series(&metrics, "quotagate_embedded_storage_bytes ").is_some_and(|b| b > 0),
        "{metrics}"
    );
    assert_eq!(
        series(&metrics, "quotagate_embedded_storage_quota_bytes "),
        Some(256 * 1024 * 1024),
        "{metrics}"
    );
    assert_eq!(
        series(&metrics, "quotagate_embedded_storage_disk_alarm "),
        Some(0),
        "{metrics}"
    );
    assert!(ok_new.is_some_and(|n| n > 0), "{metrics}");
    run.stop().await;
}
