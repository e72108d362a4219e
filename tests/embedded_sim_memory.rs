//! Heap outside the store with the simulators on (issue "memory bounded by what it stores"): a
//! counting allocator gives the live heap with the simulators running every pod, and again once they
//! have stopped; the difference is theirs (their watch caches, queues and maps). Beside it, what the
//! structures they keep cost per pod. Heap only: the allocator's overhead and fragmentation come on
//! top (`benches/store_memory.rs` measures RSS).
//! `cargo test --test embedded_sim_memory -- --nocapture` prints the figures.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use quotagate::embedded::sim::{self, SimConfig};
use quotagate::embedded::{AllowAll, EmbeddedServer, QuotagateCrds};
use tokio_util::sync::CancellationToken;

mod counting_alloc;
use counting_alloc::live;

/// The pod of `benches/store_memory.rs` (a KubeRay worker, about 1.7 KB as compact JSON).
fn pod(i: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
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
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heap_outside_the_store_with_the_simulators_on() {
    let n = 2000;
    let srv = EmbeddedServer::new(&QuotagateCrds, Arc::new(AllowAll));
    let client = srv.client();
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let base = live();
    let cancel = CancellationToken::new();
    let tasks = sim::spawn(client.clone(), &SimConfig::default(), cancel.clone());
    for i in 0..n {
        api.create(&PostParams::default(), &pod(i)).await.unwrap();
    }
    // Every pod Running, its status written: one pod not yet Running at a time.
    let not_running = ListParams::default().fields("status.phase!=Running").limit(1);
    let t = Instant::now();
    while !api.list(&not_running).await.unwrap().items.is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "pods still not Running after 300 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The history has its own bound; what is left is the store's objects and the simulators'.
    srv.store.compact();
    let (objects, stored_json) = srv.store.stored_size();
    let with = live() - base;
    cancel.cancel();
    for t in tasks {
        let _ = t.await;
    }
    let store = live() - base;
    let sims = with - store;
    let per = |b: isize| b as f64 / n as f64;
    println!(
        "{n} pods Running: {with} heap bytes ({:.0} per pod); the store {store} ({:.0} per pod, {objects} objects of {stored_json} JSON bytes, {:.1} per JSON byte), the simulators {sims} ({:.0} per pod)",
        per(with),
        per(store),
        store as f64 / stored_json as f64,
        per(sims),
    );
    // What one cached pod costs: the pods parsed as an in-process watch gives them (no
    // managedFields), as a reflector holds them.
    let texts: Vec<Vec<u8>> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| serde_json::to_vec(p).unwrap())
        .collect();
    let json: usize = texts.iter().map(Vec::len).sum();
    let before = live();
    let parsed: Vec<Arc<Pod>> = texts
        .iter()
        .map(|t| Arc::new(serde_json::from_slice(t).unwrap()))
        .collect();
    let pod_heap = live() - before;
    drop(parsed);
    // As the node agent's cache keeps them (`node::slim`).
    let before = live();
    let slimmed: Vec<Arc<Pod>> = texts
        .iter()
        .map(|t| {
            let mut p: Pod = serde_json::from_slice(t).unwrap();
            sim::node::slim(&mut p);
            Arc::new(p)
        })
        .collect();
    let slim_heap = live() - before;
    drop(slimmed);
    println!(
        "  a cached Pod: {:.0} heap bytes for {:.0} JSON bytes (without managedFields; {} of them the struct itself); slimmed as the node agent keeps it: {:.0}",
        per(pod_heap),
        json as f64 / n as f64,
        std::mem::size_of::<Pod>(),
        per(slim_heap),
    );
}
