//! Heap outside the store under `run --embedded` (issue 60): the embedded server, the simulators,
//! the Ray simulators and the manager in one process, as `quotagate run --embedded` starts them, and
//! one RayCluster whose workers all run. A counting allocator gives the live heap with everything
//! running, its peak on the way, and the live heap again once the manager and simulators have
//! stopped; the difference is theirs (caches, queues, maps). Heap only: the allocator's overhead and
//! fragmentation come on top.
//! `cargo test --test embedded_run_memory -- --nocapture` prints the figures.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use quotagate::api::ray::RayCluster;
use quotagate::wiring::manager::{EmbeddedOptions, ManagerOptions, embedded_server, run_embedded_on};
use quotagate::wiring::ray::Dashboards;
use serde_json::json;

mod counting_alloc;
use counting_alloc::{live, peak, reset_peak};

/// Workers of the one RayCluster.
const WORKERS: usize = 1000;

/// A RayCluster as `tests/embedded_huge_cluster.rs` makes it, with `workers` workers.
fn cluster(workers: usize) -> RayCluster {
    let container = |n: &str| json!({"name": n, "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "100m"}}});
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "big", "namespace": "default"},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head")]}}},
            "workerGroupSpecs": [{"groupName": "w", "replicas": workers, "minReplicas": 0, "maxReplicas": workers,
                "rayStartParams": {}, "template": {"spec": {"containers": [container("ray-worker")]}}}]
        }
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heap_outside_the_store_under_run_embedded() {
    let server = embedded_server();
    let client = server.client();
    let store = server.store.clone();
    let base = live();
    reset_peak();
    // As `run --embedded --pod-start-delay 0ms` without a listener: no leader election, simulated
    // Ray dashboards, every simulator on.
    let mut opts = EmbeddedOptions {
        manager: ManagerOptions {
            leader_election: false,
            ray: Some(Dashboards::simulated(Duration::ZERO, Duration::ZERO)),
            ..ManagerOptions::default()
        },
        ..EmbeddedOptions::default()
    };
    if let Some(node) = opts.sims.node.as_mut() {
        node.start_delay = Duration::ZERO;
    }
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(run_embedded_on(server.clone(), opts, async move {
        let _ = stop_rx.await;
    }));
    let clusters: Api<RayCluster> = Api::namespaced(client.clone(), "default");
    let t = Instant::now();
    loop {
        // The CRDs and the namespace come up with the manager.
        match clusters.create(&PostParams::default(), &cluster(WORKERS)).await {
            Ok(_) => break,
            Err(e) => assert!(t.elapsed() < Duration::from_secs(60), "no RayCluster: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Every pod (the head and the workers) Running.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let running = ListParams::default().fields("status.phase=Running");
    let t = Instant::now();
    loop {
        let n = pods.list_metadata(&running).await.unwrap().items.len();
        if n > WORKERS {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "{n} of {} pods Running after 600 s",
            WORKERS + 1
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let ramp = t.elapsed();
    // A moment for the last status writes' reconciles, then the history compacted: what is left is
    // the stored objects and everything else.
    tokio::time::sleep(Duration::from_secs(5)).await;
    store.compact();
    let (objects, stored_json) = store.stored_size();
    let with = live() - base;
    let peak = peak() - base;
    let _ = stop_tx.send(());
    let _ = manager.await;
    // The stopped tasks' last buffers go with them.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stored = live() - base;
    let outside = with - stored;
    let n = (WORKERS + 1) as f64;
    let per = |b: isize| b as f64 / n;
    println!(
        "{} pods Running after {:.0} s: {with} heap bytes ({:.0} per pod), peak {peak} ({:.0} per pod); the store {stored} ({:.0} per pod, {objects} objects of {stored_json} JSON bytes); outside the store {outside} ({:.0} per pod)",
        WORKERS + 1,
        ramp.as_secs_f64(),
        per(with),
        per(peak),
        per(stored),
        per(outside),
    );
}
