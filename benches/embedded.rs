//! Embedded API server throughput and memory. Prints figures; not a timed test.
//!
//! - create / get: 10,000 Workload-shaped objects through `kube::Api` (the full HTTP path in-process).
//! - watch delivery: a watch open before 10,000 creates; time until the last ADDED event arrives.
//! - memory per 10,000 Workload-sized objects, measured two ways: a counting global allocator (net live
//!   bytes the server holds after the creates, objects + indexes + watch history), and the stored
//!   objects' compact-JSON size.
//! - create with `--data-dir` against in memory: the same creates one at a time, 64 and 256 in flight,
//!   on a fresh in-memory server and on one kept in a temporary data directory (every create on
//!   disk before it is answered; concurrent creates share a commit).

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams, WatchEvent, WatchParams};
use quotagate::embedded::{AllowAll, EmbeddedServer, ServerConfig};
use serde_json::json;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const N: usize = 10_000;

fn workload_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "workloads.kueue.x-k8s.io"},
        "spec": {"group": "kueue.x-k8s.io", "scope": "Namespaced",
                 "names": {"kind": "Workload", "plural": "workloads", "singular": "workload", "listKind": "WorkloadList"},
                 "versions": [{"name": "v1beta2", "served": true, "storage": true, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("static CRD")
}

/// A Workload as the RayService adapter creates one: two podsets with pod templates, owner, labels.
fn workload(i: usize) -> DynamicObject {
    let container = |name: &str, cpu: &str, mem: &str| {
        json!({"name": name, "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": cpu, "memory": mem}, "limits": {"cpu": cpu, "memory": mem}},
               "ports": [{"containerPort": 6379, "name": "gcs"}, {"containerPort": 8265, "name": "dashboard"}]})
    };
    serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": format!("rayservice-svc-{i}-5f7c9"), "namespace": "default",
                     "labels": {"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/job-uid": format!("uid-{i}")},
                     "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayService", "name": format!("svc-{i}"), "uid": format!("owner-{i}"), "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"queueName": "user-queue", "priority": 0, "active": true, "podSets": [
            {"name": "head", "count": 1, "template": {"metadata": {"labels": {"ray.io/node-type": "head"}}, "spec": {"containers": [container("ray-head", "1", "2Gi")]}}},
            {"name": "small-group", "count": 2, "template": {"metadata": {"labels": {"ray.io/node-type": "worker"}}, "spec": {"containers": [container("ray-worker", "1", "1Gi")]}}}
        ]}
    }))
    .expect("static workload")
}

fn rate(label: &str, n: usize, start: Instant) {
    let s = start.elapsed().as_secs_f64();
    println!("{label:<28} {n} in {s:.3} s = {:.0}/s", n as f64 / s);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", "Workload"),
        "workloads",
    );
    let objects: Vec<DynamicObject> = (0..N).map(workload).collect();

    // Memory: a fresh server, count live heap bytes across the creates (request garbage is freed).
    let before = LIVE.load(Ordering::Relaxed);
    let srv = EmbeddedServer::new(&[workload_crd()], Arc::new(AllowAll));
    let api: Api<DynamicObject> = Api::namespaced_with(srv.client(), "default", &ar);

    let mut watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let watch_started = Instant::now();
    let watcher = tokio::spawn(async move {
        let mut seen = 0;
        while let Some(ev) = watch.next().await {
            if let Ok(WatchEvent::Added(_)) = ev {
                seen += 1;
                if seen == N {
                    break;
                }
            }
        }
        seen
    });

    let t = Instant::now();
    for o in &objects {
        api.create(&PostParams::default(), o).await.expect("create");
    }
    rate("create (kube::Api)", N, t);
    let seen = watcher.await.expect("watch task");
    // Measured from the watch's start, so it includes the creates: delivery keeps up with writes.
    rate("watch delivery (ADDED)", seen, watch_started);

    let t = Instant::now();
    for o in &objects {
        api.get(o.metadata.name.as_deref().unwrap_or_default())
            .await
            .expect("get");
    }
    rate("get (kube::Api)", N, t);

    let t = Instant::now();
    let list = api.list(&Default::default()).await.expect("list");
    rate("list (one request)", list.items.len(), t);
    drop(list);
    drop(objects);

    let live = LIVE.load(Ordering::Relaxed) - before;
    let (count, json_bytes) = srv.store.stored_size();
    // The 3 start-up namespaces are included; every write so far is still in the watch history.
    println!(
        "memory: {count} stored objects, {:.1} MiB live heap (counting allocator, incl. indexes and the watch history; store RV {})",
        live as f64 / 1048576.0,
        srv.store.resource_version()
    );
    println!(
        "memory: {:.1} MiB as compact JSON ({} bytes/object)",
        json_bytes as f64 / 1048576.0,
        json_bytes / count.max(1)
    );
    drop(api);
    drop(srv);

    let dir = std::env::temp_dir().join(format!("quotagate-bench-data-{}", std::process::id()));
    for in_flight in [1, 64, 256] {
        let _ = std::fs::remove_dir_all(&dir);
        let memory = create_rate(&ar, None, in_flight).await;
        let durable = create_rate(&ar, Some(dir.clone()), in_flight).await;
        println!(
            "create, {in_flight:>2} in flight: in memory {memory:.0}/s, --data-dir {durable:.0}/s ({:.0}% of in memory)",
            100.0 * durable / memory
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Creates per second of N Workloads on a fresh server (kept in `data_dir` when given), with
/// `in_flight` requests outstanding at a time.
async fn create_rate(ar: &ApiResource, data_dir: Option<std::path::PathBuf>, in_flight: usize) -> f64 {
    let config = ServerConfig {
        data_dir,
        ..ServerConfig::default()
    };
    let srv = EmbeddedServer::open(&[workload_crd()], Arc::new(AllowAll), config).expect("open the server");
    let api: Api<DynamicObject> = Api::namespaced_with(srv.client(), "default", ar);
    let objects: Vec<DynamicObject> = (0..N).map(workload).collect();
    let pp = PostParams::default();
    let t = Instant::now();
    let created = futures::stream::iter(objects.iter())
        .map(|o| api.create(&pp, o))
        .buffer_unordered(in_flight)
        .filter(|r| std::future::ready(r.is_ok()))
        .count()
        .await;
    assert_eq!(created, N, "every create succeeds");
    N as f64 / t.elapsed().as_secs_f64()
}
