//! Quota holds for every queue-managed RayCluster, not only a RayService's children: whatever a user or
//! Ray's autoscaler writes into `replicas`, `workersToDelete`, resources or the templates, no pod runs that
//! the cluster's admitted Workload does not cover. Every Pod and Workload event is replayed in
//! resourceVersion order (`PodLedger`) and checked against the ClusterQueue's quota and the cluster's
//! reservation. Edits go through the real kubectl where a user would make them.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use quotagate::api::kueue::constants::label;
use quotagate::api::kueue::{ClusterQueue, ResourceFlavor, Workload};
use quotagate::api::ray::RayCluster;
use serde_json::json;

use crate::pod_ledger::PodLedger;
use crate::support::*;

const NS: &str = "default";

/// A queue-labelled RayCluster: a 1-CPU head and one worker group of 1-CPU workers.
fn cluster(name: &str, workers: i32, extra: serde_json::Value) -> RayCluster {
    let mut v = json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": NS, "labels": {label::QUEUE_NAME: "lq"}},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.9.0", "resources": {"requests": {"cpu": "1"}}}]}}},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": workers, "minReplicas": 0, "maxReplicas": 10, "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.9.0", "resources": {"requests": {"cpu": "1"}}}]}}}]
        }
    });
    merge(&mut v, &extra);
    serde_json::from_value(v).unwrap()
}

fn merge(into: &mut serde_json::Value, from: &serde_json::Value) {
    match (into, from) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
        (a, b) => *a = b.clone(),
    }
}

/// Kueue's elastic RayCluster: the workload-slice annotation and Ray's in-tree autoscaler.
fn elastic() -> serde_json::Value {
    json!({"metadata": {"annotations": {label::ELASTIC_JOB: "true"}}, "spec": {"enableInTreeAutoscaling": true}})
}

async fn setup(cpu: &str, milli: i64) -> (Cluster, PodLedger) {
    let c = Cluster::start_with_ray_operator(Limits::default().cq("cq", milli)).await;
    let ledger = PodLedger::start(c.client.clone(), NS).await;
    let rf: Api<ResourceFlavor> = Api::all(c.client.clone());
    // The flavor's nodes are tainted: its pods need the flavor's toleration as well as its selector.
    let toleration = k8s_openapi::api::core::v1::Toleration {
        key: Some("pool".into()),
        operator: Some("Equal".into()),
        value: Some("blue".into()),
        effect: Some("NoSchedule".into()),
        ..Default::default()
    };
    rf.create(
        &PostParams::default(),
        &ResourceFlavor::build("default")
            .node_label("pool", "blue")
            .toleration(toleration)
            .build(),
    )
    .await
    .unwrap();
    c.cluster_queue(with_all_namespaces(cq_with("cq", cpu).build()))
        .await;
    c.local_queue("lq", "cq").await;
    (c, ledger)
}

async fn set_quota(c: &Cluster, cpu: &str) {
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    let patch = json!({"spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default",
        "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "64Gi"}]}]}]}});
    cqs.patch("cq", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

fn clusters(c: &Cluster) -> Api<RayCluster> {
    Api::namespaced(c.client.clone(), NS)
}

fn pods(c: &Cluster) -> Api<Pod> {
    Api::namespaced(c.client.clone(), NS)
}

/// The cluster's Workloads that are not finished.
async fn live_workloads(c: &Cluster, rc: &RayCluster) -> Vec<Workload> {
    let uid = rc.uid().unwrap();
    c.workloads()
        .list(&ListParams::default().labels(&format!("{}={uid}", label::JOB_UID)))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|w| !w.is_finished())
        .collect()
}

/// Pods of `name` per group, not being deleted.
async fn running(c: &Cluster, name: &str) -> (usize, usize) {
    let list = pods(c)
        .list(&ListParams::default().labels(&format!("ray.io/cluster={name}")))
        .await
        .unwrap()
        .items;
    let live: Vec<&Pod> = list
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    let heads = live
        .iter()
        .filter(|p| p.labels().get("ray.io/node-type").map(String::as_str) == Some("head"))
        .count();
    (heads, live.len() - heads)
}

/// Waits (on the cluster's watch) until its pods are `(heads, workers)` and all Running.
async fn wait_pods(c: &Cluster, name: &str, want: (usize, usize)) {
    let api = pods(c);
    let sel = format!("ray.io/cluster={name}");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let list = api.list(&ListParams::default().labels(&sel)).await.unwrap().items;
        let live: Vec<&Pod> = list
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let heads = live
            .iter()
            .filter(|p| p.labels().get("ray.io/node-type").map(String::as_str) == Some("head"))
            .count();
        let all_running = live
            .iter()
            .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        if (heads, live.len() - heads) == want && all_running {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "cluster {name}: want {want:?} running pods, have {:?}",
            (heads, live.len() - heads)
        );
        // Pods change through the node agent and the operator; a short poll on the API (not a sleep
        // standing in for a condition: the loop re-checks the state each time).
        let _ = tokio::time::timeout(std::time::Duration::from_millis(100), c.quota.wait_any_event()).await;
    }
}

/// Waits (on Workload events) for a live Workload of `rc`, other than `except`, that the scheduler has
/// considered (it carries a QuotaReserved condition, True or False).
async fn considered_workload(c: &Cluster, rc: &RayCluster, except: Option<&str>) -> Workload {
    loop {
        let w = live_workloads(c, rc).await;
        if let Some(w) = w.into_iter().find(|w| {
            Some(w.name_any().as_str()) != except
                && w.status
                    .as_ref()
                    .is_some_and(|s| s.condition("QuotaReserved").is_some())
        }) {
            return w;
        }
        c.quota.wait_any_event().await;
    }
}

/// Ray's autoscaler removing one worker of `name`'s group: `replicas` one lower with the worker named in
/// `workersToDelete`, then, once the pod is gone, the list cleared.
async fn scale_down_one(c: &Cluster, name: &str, to: i32) {
    let rcs = clusters(c);
    let victim = pods(c)
        .list(&ListParams::default().labels(&format!("ray.io/cluster={name},ray.io/node-type=worker")))
        .await
        .unwrap()
        .items[0]
        .name_any();
    let rc = rcs.get(name).await.unwrap();
    let patch = json!({"spec": {"workerGroupSpecs": [{"groupName": "workers", "replicas": to, "minReplicas": 0, "maxReplicas": 10, "rayStartParams": {},
        "scaleStrategy": {"workersToDelete": [victim]},
        "template": rc.spec.worker_group_specs.as_ref().unwrap()[0].template}]}});
    rcs.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_gone(&pods(c), &victim).await;
}

async fn clear_workers_to_delete(c: &Cluster, name: &str) {
    let patch = json!([{"op": "replace", "path": "/spec/workerGroupSpecs/0/scaleStrategy/workersToDelete", "value": []}]);
    clusters(c)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(patch).unwrap()),
        )
        .await
        .unwrap();
}

fn assert_ledger(ledger: &PodLedger, quota: impl Fn(u64) -> i64) {
    let (bad, events) = ledger.replay(quota);
    assert!(events > 0, "the ledger saw no event");
    assert!(
        bad.is_empty(),
        "quota or reservation exceeded at some resourceVersion:\n{}",
        bad.join("\n")
    );
}

/// The RV of the last event before a quota change: the ledger holds the old quota until then.
/// The scheduler's record of pending workload `name`, once it has one.
async fn wait_record(c: &Cluster, name: &str) -> quotagate::queue::explain::Explanation {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(e) = quotagate::cli::explain::record(&c.client, NS, name)
            .await
            .unwrap()
        {
            return e;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no scheduler record of {name}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

async fn current_rv(c: &Cluster) -> u64 {
    let list = c.workloads().list(&ListParams::default().limit(1)).await.unwrap();
    list.metadata
        .resource_version
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

async fn events_of(c: &Cluster, name: &str) -> Vec<(String, String)> {
    let api: Api<Event> = Api::namespaced(c.client.clone(), NS);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

// Kueue: test/integration/singlecluster/controller/jobs/raycluster/raycluster_controller_test.go,
// "RayCluster with elastic jobs via workload-slices support" / "Should support raycluster scale-down and
// scale-up". Kueue's envtest runs no KubeRay, so its workload shrinks the moment `replicas` drops; here
// the pods are real, and (as Ray's autoscaler does) the scale-down names the worker it removes in
// `workersToDelete` and clears the list once the pod is gone: only then does the workload shrink.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elastic_raycluster_scales_down_in_place_and_up_through_a_slice() {
    let (c, ledger) = setup("6", 6000).await;
    let rcs = clusters(&c);
    rcs.create(&PostParams::default(), &cluster("foo", 2, elastic()))
        .await
        .unwrap();
    let rc = wait_for(&rcs, "foo", "running", |r| r.spec.suspend == Some(false)).await;
    let wls = live_workloads(&c, &rc).await;
    assert_eq!(wls.len(), 1);
    let first = wls[0].clone();
    let counts = |w: &Workload| {
        w.spec
            .pod_sets
            .iter()
            .map(|p| p.count.unwrap_or(1))
            .collect::<Vec<_>>()
    };
    assert_eq!(counts(&first), vec![1, 2]);
    wait_pods(&c, "foo", (1, 2)).await;
    // 1 CPU head, 500m for the autoscaler sidecar, 1 per worker.
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    let usage = |cq: &ClusterQueue| {
        cq.status
            .as_ref()
            .and_then(|s| s.flavors_reservation.first())
            .and_then(|f| f.resources.iter().find(|r| r.name == "cpu"))
            .and_then(|r| r.total.as_ref())
            .map(|q| q.0.clone())
    };
    wait_for(&cqs, "cq", "3500m reserved", |cq| {
        usage(cq).as_deref() == Some("3500m")
    })
    .await;

    // The autoscaler scales down by one worker, naming it.
    // The ledger checks, event by event, that the worker was held until its pod was gone; once gone,
    // its name left in workersToDelete holds nothing (the autoscaler clears the list later).
    scale_down_one(&c, "foo", 1).await;
    let wl = wait_for(&c.workloads(), &first.name_any(), "shrunk in place", |w| {
        counts(w) == vec![1, 1]
    })
    .await;
    clear_workers_to_delete(&c, "foo").await;
    assert_eq!(wl.uid(), first.uid(), "a scale-down keeps the workload");
    assert!(wl.is_admitted());
    wait_for(&cqs, "cq", "2500m reserved", |cq| {
        usage(cq).as_deref() == Some("2500m")
    })
    .await;
    // Issue 44: as Kueue, the admission keeps the granted count (it is immutable); `explain` shows
    // what is counted, and it sums to the ClusterQueue's 2500m.
    let admitted_workers = |w: &Workload| {
        w.admission()
            .and_then(|a| a.pod_set_assignments.iter().find(|p| p.name == "workers"))
            .and_then(|p| p.count)
    };
    assert_eq!(admitted_workers(&wl), Some(2));
    let text = quotagate::cli::explain::run(
        &c.client,
        quotagate::cli::explain::Kind::Workload,
        NS,
        &first.name_any(),
    )
    .await
    .unwrap();
    assert!(
        text.contains("podset head x1: cpu=default, memory=default; counts cpu 1500m"),
        "{text}"
    );
    assert!(text.contains("podset workers x1 (admitted x2; shrunk in place, the admission keeps the granted count): cpu=default, memory=default; counts cpu 1"), "{text}");

    // Scale-up: a new slice replaces the first, which finishes.
    let patch = json!([{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2}]);
    rcs.patch(
        "foo",
        &PatchParams::default(),
        &Patch::Json::<()>(serde_json::from_value(patch).unwrap()),
    )
    .await
    .unwrap();
    wait_for(&c.workloads(), &first.name_any(), "finished as replaced", |w| {
        w.is_finished()
    })
    .await;
    let now = live_workloads(&c, &rc).await;
    assert_eq!(now.len(), 1);
    assert_ne!(now[0].name_any(), first.name_any());
    assert!(now[0].is_admitted());
    assert_eq!(counts(&now[0]), vec![1, 2]);
    wait_pods(&c, "foo", (1, 2)).await;
    wait_for(&cqs, "cq", "3500m reserved", |cq| {
        usage(cq).as_deref() == Some("3500m")
    })
    .await;
    assert_ledger(&ledger, |_| 6000);
    c.quota.assert_safe();
}

// Kueue: raycluster_controller_test.go, "Should support scheduling pending workload after freeing
// capacity on scale-down" (scale-down named in `workersToDelete`, as above).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_raycluster_is_admitted_once_an_elastic_one_scales_down() {
    let (c, ledger) = setup("6", 6000).await;
    let rcs = clusters(&c);
    rcs.create(&PostParams::default(), &cluster("a", 2, elastic()))
        .await
        .unwrap();
    wait_for(&rcs, "a", "running", |r| r.spec.suspend == Some(false)).await;
    wait_pods(&c, "a", (1, 2)).await;
    let b = rcs
        .create(&PostParams::default(), &cluster("b", 2, elastic()))
        .await
        .unwrap();
    let pending = considered_workload(&c, &b, None).await;
    assert!(!pending.has_quota_reservation());
    assert_eq!(
        rcs.get("b").await.unwrap().spec.suspend,
        Some(true),
        "b stays suspended"
    );
    assert_eq!(running(&c, "b").await, (0, 0));

    scale_down_one(&c, "a", 1).await;
    clear_workers_to_delete(&c, "a").await;
    wait_for(&c.workloads(), &pending.name_any(), "admitted", |w| {
        w.is_admitted()
    })
    .await;
    wait_for(&rcs, "b", "unsuspended", |r| r.spec.suspend == Some(false)).await;
    wait_pods(&c, "b", (1, 2)).await;
    assert_ledger(&ledger, |_| 6000);
    c.quota.assert_safe();
}

/// The real kubectl against the cluster's embedded server on a loopback port.
struct Kubectl {
    bin: PathBuf,
    dir: PathBuf,
    _stop: tokio_util::sync::DropGuard,
}

impl Kubectl {
    async fn start(c: &Cluster, name: &str) -> Option<Kubectl> {
        let Some(bin) = crate::kubectl::kubectl_path() else {
            assert!(
                std::env::var("QUOTAGATE_REQUIRE_TOOLS").as_deref() != Ok("1"),
                "kubectl not installed and QUOTAGATE_REQUIRE_TOOLS=1"
            );
            println!("skipped: kubectl not installed, run scripts/install-kubectl.sh");
            return None;
        };
        let dir = std::env::temp_dir().join(format!("quotagate-quota-holds-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let cancel = tokio_util::sync::CancellationToken::new();
        c.server
            .spawn_tcp(
                "127.0.0.1:0".parse().unwrap(),
                Some(&dir.join("kubeconfig")),
                cancel.clone(),
            )
            .await
            .unwrap();
        Some(Kubectl {
            bin,
            dir,
            _stop: cancel.drop_guard(),
        })
    }

    async fn run(&self, args: &[&str]) -> (bool, String) {
        crate::kubectl::kubectl(&self.bin, &self.dir, args).await
    }

    /// Writes `rc` as a manifest file and `kubectl apply`s it (client-side apply, as Argo CD does).
    async fn apply(&self, rc: &RayCluster) -> (bool, String) {
        let path = self.dir.join("rc.json");
        std::fs::write(&path, serde_json::to_string(rc).unwrap()).unwrap();
        self.run(&["apply", "-f", path_str(&path)]).await
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A plain (non-elastic) cluster whose `replicas` a user raises past its reservation: the gate keeps the
/// pods at what the Workload holds, and, as Kueue does for a job that no longer matches its Workload,
/// the cluster is stopped ("No matching Workload"), the Workload deleted once its pods are gone, and a
/// new one with the new counts queued. A fitting edit is then admitted and runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_edit_stops_and_requeues_a_plain_cluster_and_never_runs_past_quota() {
    let (c, ledger) = setup("3", 3000).await;
    let Some(k) = Kubectl::start(&c, "replicas").await else {
        return;
    };
    let (ok, out) = k.apply(&cluster("rc", 1, json!({}))).await;
    assert!(ok, "{out}");
    let rcs = clusters(&c);
    let rc = wait_for(&rcs, "rc", "running", |r| r.spec.suspend == Some(false)).await;
    wait_pods(&c, "rc", (1, 1)).await;
    let first = live_workloads(&c, &rc).await.remove(0);

    let (ok, out) = k
        .run(&[
            "patch",
            "raycluster",
            "rc",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":6}]"#,
        ])
        .await;
    assert!(ok, "{out}");
    wait_for(&rcs, "rc", "stopped", |r| r.spec.suspend == Some(true)).await;
    wait_gone(&c.workloads(), &first.name_any()).await;
    let requeued = considered_workload(&c, &rc, None).await;
    assert_eq!(
        requeued.spec.pod_sets[1].count,
        Some(6),
        "requeued with the new count"
    );
    assert!(!requeued.has_quota_reservation(), "7 CPU do not fit 3");
    assert_eq!(running(&c, "rc").await, (0, 0));
    let events = events_of(&c, "rc").await;
    assert!(
        events.contains(&("Stopped".to_string(), "No matching Workload".to_string())),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "DeletedWorkload" && m.contains(&first.name_any())),
        "{events:?}"
    );

    // A fitting edit replaces the pending Workload and runs.
    let (ok, out) = k
        .run(&[
            "patch",
            "raycluster",
            "rc",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":2}]"#,
        ])
        .await;
    assert!(ok, "{out}");
    wait_for(&rcs, "rc", "running again", |r| r.spec.suspend == Some(false)).await;
    wait_pods(&c, "rc", (1, 2)).await;
    let now = live_workloads(&c, &rc).await;
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].spec.pod_sets[1].count, Some(2));

    // Lowered on the admitted cluster: Kueue stops it too (the Workload no longer matches) and requeues
    // it with the smaller count, which runs.
    let second = now[0].name_any();
    let (ok, out) = k
        .run(&[
            "patch",
            "raycluster",
            "rc",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":1}]"#,
        ])
        .await;
    assert!(ok, "{out}");
    wait_gone(&c.workloads(), &second).await;
    wait_for(&rcs, "rc", "running on the smaller Workload", |r| {
        r.spec.suspend == Some(false)
    })
    .await;
    wait_pods(&c, "rc", (1, 1)).await;
    let now = live_workloads(&c, &rc).await;
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].spec.pod_sets[1].count, Some(1));
    assert_ledger(&ledger, |_| 3000);
    c.quota.assert_safe();
}

/// Under `upgradeStrategy: Recreate`: a re-apply of the user's manifest (which drops the node selector
/// admission injected) restarts nothing, and a lost worker comes back with the flavor's node selector and
/// podset label from the admission; a resize to bigger workers is never run on the old reservation: the
/// cluster is stopped and requeued, and runs once a Workload with the new requests is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_clusters_survive_reapplies_and_resize_only_through_a_new_workload() {
    let (c, ledger) = setup("4", 4000).await;
    let Some(k) = Kubectl::start(&c, "recreate").await else {
        return;
    };
    // Kueue's webhook rule: a plain queue-managed cluster may not use the in-tree autoscaler.
    let (ok, out) = k
        .apply(&cluster(
            "bad",
            1,
            json!({"spec": {"enableInTreeAutoscaling": true}}),
        ))
        .await;
    assert!(!ok, "{out}");
    assert!(
        out.contains("spec.enableInTreeAutoscaling")
            && out.contains(
                "only when the ElasticJobsViaWorkloadSlices feature gate is on and the job is an elastic job"
            ),
        "{out}"
    );

    let manifest = cluster(
        "rc",
        1,
        json!({"spec": {"upgradeStrategy": {"type": "Recreate"}}}),
    );
    let (ok, out) = k.apply(&manifest).await;
    assert!(ok, "{out}");
    let rcs = clusters(&c);
    let rc = wait_for(&rcs, "rc", "running", |r| r.spec.suspend == Some(false)).await;
    wait_pods(&c, "rc", (1, 1)).await;
    let head_uid = |list: &[Pod]| {
        list.iter()
            .find(|p| p.labels().get("ray.io/node-type").map(String::as_str) == Some("head"))
            .and_then(|p| p.uid())
    };
    let before = pods(&c)
        .list(&ListParams::default().labels("ray.io/cluster=rc"))
        .await
        .unwrap()
        .items;
    let head = head_uid(&before).unwrap();

    // GitOps re-apply: the list of worker groups is replaced whole, dropping what admission injected.
    let (ok, out) = k.apply(&manifest).await;
    assert!(ok, "{out}");
    let reapplied = rcs.get("rc").await.unwrap();
    assert!(
        reapplied.spec.worker_group_specs.as_ref().unwrap()[0]
            .template
            .spec
            .as_ref()
            .unwrap()
            .node_selector
            .is_none(),
        "the re-apply dropped the injected node selector"
    );
    let worker = before
        .iter()
        .find(|p| p.labels().get("ray.io/node-type").map(String::as_str) == Some("worker"))
        .unwrap()
        .name_any();
    let (ok, out) = k.run(&["delete", "pod", &worker]).await;
    assert!(ok, "{out}");
    wait_gone(&pods(&c), &worker).await;
    wait_pods(&c, "rc", (1, 1)).await;
    let after = pods(&c)
        .list(&ListParams::default().labels("ray.io/cluster=rc"))
        .await
        .unwrap()
        .items;
    assert_eq!(
        head_uid(&after),
        Some(head),
        "a no-op re-apply restarted the head (Recreate)"
    );
    let replacement = after
        .iter()
        .find(|p| p.labels().get("ray.io/node-type").map(String::as_str) == Some("worker"))
        .unwrap();
    let sel = replacement
        .spec
        .as_ref()
        .unwrap()
        .node_selector
        .clone()
        .unwrap_or_default();
    assert_eq!(
        sel.get("pool").map(String::as_str),
        Some("blue"),
        "the replacement worker keeps the flavor's node selector"
    );
    let tolerated = replacement
        .spec
        .as_ref()
        .unwrap()
        .tolerations
        .iter()
        .flatten()
        .any(|t| t.key.as_deref() == Some("pool") && t.value.as_deref() == Some("blue"));
    assert!(
        tolerated,
        "the replacement worker keeps the flavor's toleration: {:?}",
        replacement.spec.as_ref().unwrap().tolerations
    );
    assert_eq!(
        replacement.labels().get(label::PODSET).map(String::as_str),
        Some("workers")
    );
    assert_eq!(
        live_workloads(&c, &rc).await.len(),
        1,
        "a re-apply is not a new Workload"
    );

    // Recreate to 2-CPU workers: 3 CPU fit 4, but not on the old Workload's 1-CPU reservation.
    let first = live_workloads(&c, &rc).await.remove(0);
    let bigger = cluster(
        "rc",
        1,
        json!({"spec": {"upgradeStrategy": {"type": "Recreate"}, "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "minReplicas": 0, "maxReplicas": 10, "rayStartParams": {},
        "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.9.0", "resources": {"requests": {"cpu": "2"}}}]}}}]}}),
    );
    let (ok, out) = k.apply(&bigger).await;
    assert!(ok, "{out}");
    wait_gone(&c.workloads(), &first.name_any()).await;
    let rc = wait_for(&rcs, "rc", "running on the new Workload", |r| {
        r.spec.suspend == Some(false)
    })
    .await;
    wait_pods(&c, "rc", (1, 1)).await;
    let now = live_workloads(&c, &rc).await;
    assert_eq!(now.len(), 1);
    assert!(now[0].is_admitted());
    let cpu = |ps: &quotagate::api::kueue::PodSet| {
        ps.template.spec.as_ref().unwrap().containers[0]
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap()["cpu"]
            .0
            .clone()
    };
    assert_eq!(
        cpu(&now[0].spec.pod_sets[1]),
        "2",
        "the new Workload reserves the new requests"
    );
    let events = events_of(&c, "rc").await;
    assert!(
        events.contains(&("Stopped".to_string(), "No matching Workload".to_string())),
        "{events:?}"
    );
    assert_ledger(&ledger, |_| 4000);
    c.quota.assert_safe();
}

/// An elastic cluster grown past what its queue holds, through the real kubectl: the new workers wait
/// for their slice (no pod is created before it is admitted), and run once the quota is raised.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elastic_growth_waits_for_its_slice_before_any_new_pod() {
    let (mut c, ledger) = setup("4", 4000).await;
    let explanations = quotagate::admission::Explanations::default();
    c.server.aggregated.mount(
        quotagate::wiring::explain::GROUP,
        quotagate::wiring::explain::router(explanations.clone()),
    );
    c.restart_manager_with(|o| o.explanations = explanations.clone())
        .await;
    let Some(k) = Kubectl::start(&c, "elastic-growth").await else {
        return;
    };
    let rcs = clusters(&c);
    let (ok, out) = k.apply(&cluster("e", 1, elastic())).await;
    assert!(ok, "{out}");
    let rc = wait_for(&rcs, "e", "running", |r| r.spec.suspend == Some(false)).await;
    wait_pods(&c, "e", (1, 1)).await;
    let first = live_workloads(&c, &rc).await.remove(0);
    // 1.5 CPU head with its sidecar + 5 workers = 6.5 CPU, over the 4 the queue holds.
    let (ok, out) = k
        .run(&[
            "patch",
            "raycluster",
            "e",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":5}]"#,
        ])
        .await;
    assert!(ok, "{out}");
    let slice = considered_workload(&c, &rc, Some(&first.name_any())).await;
    assert!(!slice.has_quota_reservation());
    let now = running(&c, "e").await;
    assert_eq!(
        now,
        (1, 1),
        "no worker runs before its slice is admitted; events: {:?}",
        events_of(&c, "e").await
    );
    // The operator says so once it has seen the slice (its write follows the scheduler's).
    let gated_on = |r: &RayCluster| {
        let cond = r
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "QuotaGated"));
        cond.is_some_and(|c| c.status == "True" && c.message.contains(&slice.name_any()))
    };
    wait_for(&rcs, "e", "QuotaGated=True naming the waiting slice", gated_on).await;
    assert_eq!(
        running(&c, "e").await,
        (1, 1),
        "no worker runs before its slice is admitted"
    );
    let explained = quotagate::cli::explain::raycluster(&c.client, NS, "e")
        .await
        .unwrap();
    assert!(
        explained.starts_with(&format!(
            "RayCluster {NS}/e runs on Workload {}; its growth waits in workload slice {}",
            first.name_any(),
            slice.name_any()
        )),
        "{explained}"
    );
    // The scheduler's record: USED is what the ClusterQueue holds now (the 1.5 CPU head and the
    // 1-CPU worker of the admitted slice), ADDS what the growth would add (4 workers); only the
    // growth has to fit in what is left (1.5 of 4).
    let record = wait_record(&c, &slice.name_any()).await;
    let workers = record.podsets.iter().find(|p| p.name == "workers").unwrap();
    let cpu = workers.resources.iter().find(|r| r.resource == "cpu").unwrap();
    let f = &cpu.flavors[0];
    assert_eq!(
        (
            cpu.requested.as_str(),
            f.adds.as_str(),
            f.used.as_str(),
            f.available.as_str()
        ),
        ("5", "4", "2500m", "1500m"),
        "{record:?}"
    );
    let head = record
        .podsets
        .iter()
        .find(|p| p.name == "head")
        .unwrap()
        .resources
        .iter()
        .find(|r| r.resource == "cpu")
        .unwrap();
    assert_eq!(head.flavors[0].adds, "0", "the head is held already");
    let text = quotagate::cli::explain::run(
        &c.client,
        quotagate::cli::explain::Kind::Workload,
        NS,
        &slice.name_any(),
    )
    .await
    .unwrap();
    assert!(
        text.contains("ADDS") && text.contains("replaces admitted slice"),
        "{text}"
    );

    let raised_at = current_rv(&c).await;
    c.quota.set_cq_limit("cq", 7000);
    set_quota(&c, "7").await;
    wait_for(&c.workloads(), &slice.name_any(), "admitted", |w| w.is_admitted()).await;
    wait_pods(&c, "e", (1, 5)).await;
    assert_ledger(&ledger, |rv| if rv <= raised_at { 4000 } else { 7000 });
    c.quota.assert_safe();
}

/// Issue 48's second case, through the real kubectl: two elastic clusters in one queue both asked to grow
/// past it (before the gate, 11 CPU ran against 6). No new worker runs before its slice is admitted; a
/// raise that fits one growth admits exactly one; the other's growth is admitted once the first scales
/// down without naming workers, and only when the pods Ray's autoscaler then removes are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_elastic_clusters_growing_in_one_queue_take_turns_and_never_run_past_it() {
    let (c, ledger) = setup("6", 6000).await;
    let Some(k) = Kubectl::start(&c, "two-elastic").await else {
        return;
    };
    let rcs = clusters(&c);
    let mut rc = Vec::new();
    for name in ["a", "b"] {
        let (ok, out) = k.apply(&cluster(name, 1, elastic())).await;
        assert!(ok, "{out}");
        wait_for(&rcs, name, "running", |r| r.spec.suspend == Some(false)).await;
        wait_pods(&c, name, (1, 1)).await;
        rc.push(rcs.get(name).await.unwrap());
    }
    // 2 x (1.5 CPU head with its autoscaler sidecar + 1 worker) = 5 of 6; each asks for 4 more workers.
    let mut first = Vec::new();
    for r in &rc {
        first.push(live_workloads(&c, r).await.remove(0).name_any());
        let (ok, out) = k
            .run(&[
                "patch",
                "raycluster",
                &r.name_any(),
                "--type=json",
                "-p",
                r#"[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":5}]"#,
            ])
            .await;
        assert!(ok, "{out}");
    }
    let mut slices = Vec::new();
    for (r, f) in rc.iter().zip(&first) {
        let slice = considered_workload(&c, r, Some(f)).await;
        assert!(!slice.has_quota_reservation(), "4 more CPU do not fit 1");
        slices.push(slice.name_any());
    }
    assert_eq!(
        (running(&c, "a").await, running(&c, "b").await),
        ((1, 1), (1, 1)),
        "no worker before its slice"
    );

    // Room for one growth: exactly one slice is admitted and its cluster grows; the other waits.
    let raised_at = current_rv(&c).await;
    c.quota.set_cq_limit("cq", 9000);
    set_quota(&c, "9").await;
    let wls = c.workloads();
    let grown = loop {
        let admitted: Vec<usize> = {
            let mut v = Vec::new();
            for (i, s) in slices.iter().enumerate() {
                if wls.get(s).await.is_ok_and(|w| w.is_admitted()) {
                    v.push(i);
                }
            }
            v
        };
        assert!(admitted.len() <= 1, "both growths admitted in 9 CPU");
        if let [i] = admitted[..] {
            break i;
        }
        c.quota.wait_any_event().await;
    };
    let (winner, waiter) = (rc[grown].name_any(), rc[1 - grown].name_any());
    wait_pods(&c, &winner, (1, 5)).await;
    assert_eq!(running(&c, &waiter).await, (1, 1), "the other growth still waits");

    // The winner scales down to 1 without naming workers. With autoscaling on KubeRay deletes only
    // named workers, so all five keep running and keep their quota: the other growth still waits.
    let (ok, out) = k
        .run(&[
            "patch",
            "raycluster",
            &winner,
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":1}]"#,
        ])
        .await;
    assert!(ok, "{out}");
    wait_for(&rcs, &winner, "the operator to see the edit", |r| {
        r.status.as_ref().and_then(|s| s.observed_generation) == r.metadata.generation
    })
    .await;
    assert_eq!(running(&c, &winner).await, (1, 5), "unnamed workers are kept");
    let held: i32 = live_workloads(&c, &rc[grown])
        .await
        .iter()
        .filter(|w| w.is_admitted())
        .filter_map(|w| w.spec.pod_sets.get(1).and_then(|p| p.count))
        .max()
        .unwrap_or(0);
    assert_eq!(held, 5, "the Workload keeps the workers that still run");
    assert!(
        !wls.get(&slices[1 - grown]).await.unwrap().is_admitted(),
        "no quota was given back for pods still running"
    );
    // Ray's autoscaler then names the surplus; the quota goes to the waiting growth once they are gone.
    let names: Vec<String> = pods(&c)
        .list(&ListParams::default().labels(&format!("ray.io/cluster={winner},ray.io/node-type=worker")))
        .await
        .unwrap()
        .items
        .iter()
        .skip(1)
        .map(|p| p.name_any())
        .collect();
    let patch = json!([{"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": names}}]);
    rcs.patch(
        &winner,
        &PatchParams::default(),
        &Patch::Json::<()>(serde_json::from_value(patch).unwrap()),
    )
    .await
    .unwrap();
    wait_pods(&c, &winner, (1, 1)).await;
    wait_for(&wls, &slices[1 - grown], "admitted once the pods are gone", |w| {
        w.is_admitted()
    })
    .await;
    wait_pods(&c, &waiter, (1, 5)).await;
    assert_ledger(&ledger, |rv| if rv <= raised_at { 6000 } else { 9000 });
    c.quota.assert_safe();
}

fn quota_exceeded(r: &RayCluster) -> Option<(String, String, String)> {
    r.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == quotagate::api::ray::constants::COND_QUOTA_EXCEEDED)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// kuberay#4846 ("Add a QuotaExceeded RayClusterConditionType": a worker group's scale-up that
/// quota cannot cover should say so at once, so Ray's autoscaler can fall back to another group
/// instead of waiting out `RAY_AUTOSCALER_RECONCILE_ALLOCATE_STATUS_TIMEOUT_S`). Under
/// quotagate's prefix until KubeRay settles the API: an elastic cluster scaled past its queue gets
/// `quotagate.io/QuotaExceeded=True` naming the worker group, how many pods wait and Kueue's reason,
/// with a Warning event, as soon as Kueue has tried its slice; `False`/`WithinQuota` before and once a
/// raised quota admits it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_up_quota_cannot_cover_says_quota_exceeded() {
    let (c, _ledger) = setup("4", 4000).await;
    let rcs = clusters(&c);
    rcs.create(&PostParams::default(), &cluster("e", 1, elastic()))
        .await
        .unwrap();
    wait_pods(&c, "e", (1, 1)).await;
    let within =
        |r: &RayCluster| quota_exceeded(r).is_some_and(|(s, why, _)| s == "False" && why == "WithinQuota");
    let rc = wait_for(&rcs, "e", "QuotaExceeded=False while covered", within).await;
    let first = live_workloads(&c, &rc).await.remove(0);
    // 1.5 CPU head with its sidecar + 5 workers = 6.5 CPU, over the 4 the queue holds.
    let scale = json!([{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 5}]);
    rcs.patch(
        "e",
        &PatchParams::default(),
        &Patch::Json::<()>(serde_json::from_value(scale).unwrap()),
    )
    .await
    .unwrap();
    let slice = considered_workload(&c, &rc, Some(&first.name_any())).await;
    let exceeded = |r: &RayCluster| quota_exceeded(r).is_some_and(|(s, _, _)| s == "True");
    let r = wait_for(&rcs, "e", "QuotaExceeded=True", exceeded).await;
    let (_, why, message) = quota_exceeded(&r).unwrap();
    assert_eq!(why, "QuotaExceeded");
    let head = format!(
        "worker group workers: 4 pod(s) wait for quota: workload slice {} (LocalQueue lq): ",
        slice.name_any()
    );
    assert!(message.starts_with(&head), "{message}");
    assert!(message.contains("insufficient"), "Kueue's reason: {message}");
    assert!(
        events_of(&c, "e")
            .await
            .iter()
            .any(|(r, note)| r == "QuotaExceeded" && note == &message),
        "a Warning event says it"
    );
    set_quota(&c, "7").await;
    c.quota.set_cq_limit("cq", 7000);
    wait_for(&c.workloads(), &slice.name_any(), "admitted", |w| w.is_admitted()).await;
    wait_for(&rcs, "e", "QuotaExceeded=False once admitted", within).await;
    wait_pods(&c, "e", (1, 5)).await;
    c.quota.assert_safe();
}
