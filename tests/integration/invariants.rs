//! The invariant watcher of the gated-upgrade scenarios: on every Workload, RayCluster, Pod and
//! ClusterQueue event it re-reads the API and checks DESIGN.md's invariants. Pods are read before and
//! after the rest, and only pods in both reads count: such a pod existed when the Workloads were read
//! (so the slice it was created under is in that read), and still existed after (so its slice had not
//! let go yet, since pods go first). One read alone sees either a pod created just after the slices or
//! a slice released just after its pods were stopped as a violation.
//! - I1 quota safety: per ClusterQueue (no cohort here), reserved usage of the latest slice of each chain
//!   stays within nominal quota, for every resource;
//! - I2 gate: per child of a queue-managed RayService and per group, live pods <= what the latest slice
//!   holding quota covers with that child's own requests (an evicted slice still holding quota counts
//!   until it lets go, since its pods are being stopped);
//! - I6 slices: at most one pending replacement per chain, and a slice finished as replaced has an
//!   admitted (or since finished) successor; a successor deleted since (its job was stopped and its
//!   Workload no longer matched) counts when the watcher saw it admitted before.
//!
//! I3 (exact accounting) and I4 (the active cluster untouched while gated) are checked by the scenarios at
//! their settle points, where "exact" is well defined.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use quotagate::api::kueue::constants::label;
use quotagate::api::kueue::{ClusterQueue, Workload};
use quotagate::api::quantity::Quantity;
use quotagate::api::ray::{RayCluster, RayService};
use quotagate::rayservice::job::demand;
use quotagate::rayservice::job::gate;
use quotagate::rayservice::job::rayservice::children_in_gate_order;

pub struct Invariants {
    violations: Arc<Mutex<Vec<String>>>,
    checks: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Invariants {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn reserved(w: &Workload) -> bool {
    w.admission().is_some() && w.has_quota_reservation()
}

/// Milli-units of a quantity (cpu) or its value (memory, pods).
fn amount(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity, resource: &str) -> i64 {
    Quantity::try_from(q).map_or(0, |v| {
        quotagate::api::quantity::resource_value(resource, &v)
    })
}

/// What earlier checks saw: replaced slices (`<ns>/<name>`) whose successor was admitted.
#[derive(Default)]
struct Seen {
    handed_over: std::collections::HashSet<String>,
}

impl Seen {
    fn record(&mut self, wls: &[Workload]) {
        for w in wls.iter().filter(|w| reserved(w) || w.is_finished()) {
            if let Some(old) = w.annotations().get(label::WORKLOAD_SLICE_REPLACEMENT_FOR) {
                self.handed_over.insert(old.clone());
            }
        }
    }

    fn successor_was_admitted(&self, replaced: &str) -> bool {
        self.handed_over.contains(replaced)
    }
}

async fn check(client: &Client, seen: &mut Seen) -> Result<Vec<String>, kube::Error> {
    let lp = ListParams::default();
    let before = Api::<Pod>::all(client.clone()).list(&lp).await?.items;
    let wls = Api::<Workload>::all(client.clone()).list(&lp).await?.items;
    seen.record(&wls);
    let rcs = Api::<RayCluster>::all(client.clone())
        .list(&lp)
        .await?
        .items;
    let rss = Api::<RayService>::all(client.clone())
        .list(&lp)
        .await?
        .items;
    let cqs = Api::<ClusterQueue>::all(client.clone())
        .list(&lp)
        .await?
        .items;
    let after: std::collections::HashSet<String> = Api::<Pod>::all(client.clone())
        .list(&lp)
        .await?
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    let pods: Vec<Pod> = before
        .into_iter()
        .filter(|p| p.metadata.uid.as_ref().is_some_and(|u| after.contains(u)))
        .collect();
    let mut bad = Vec::new();

    // I1: latest slice of each chain, per ClusterQueue and resource, within nominal quota.
    let replaced: Vec<String> = wls
        .iter()
        .filter(|w| reserved(w) && !w.is_finished())
        .filter_map(|w| {
            w.annotations()
                .get(label::WORKLOAD_SLICE_REPLACEMENT_FOR)
                .cloned()
        })
        .collect();
    let mut usage: BTreeMap<(String, String), i64> = BTreeMap::new();
    for w in wls.iter().filter(|w| reserved(w) && !w.is_finished()) {
        let key = format!("{}/{}", w.namespace().unwrap_or_default(), w.name_any());
        if replaced.contains(&key) {
            continue;
        }
        let Some(a) = w.admission() else { continue };
        for ps in &a.pod_set_assignments {
            let admitted = i64::from(ps.count.unwrap_or(1)).max(1);
            let now = w
                .spec
                .pod_sets
                .iter()
                .find(|s| s.name.as_deref() == Some(ps.name.as_str()))
                .map_or(admitted, |s| i64::from(s.count()));
            for (r, q) in &ps.resource_usage {
                *usage
                    .entry((a.cluster_queue.clone(), r.clone()))
                    .or_default() += amount(q, r) / admitted * now.min(admitted);
            }
        }
    }
    for cq in &cqs {
        let nominal: BTreeMap<String, i64> = cq
            .spec
            .resource_groups
            .iter()
            .flatten()
            .flat_map(|g| g.flavors.iter())
            .flat_map(|f| f.resources.iter())
            .map(|r| (r.name.clone(), amount(&r.nominal_quota, &r.name)))
            .fold(BTreeMap::new(), |mut m, (k, v)| {
                *m.entry(k).or_default() += v;
                m
            });
        for ((q, r), used) in &usage {
            if *q == cq.name_any() && nominal.get(r).is_some_and(|n| used > n) {
                bad.push(format!(
                    "I1: ClusterQueue {q} uses {used} of {r}, nominal {}",
                    nominal[r]
                ));
            }
        }
    }

    // I2: per child and group, live pods within the latest quota-holding slice's coverage.
    for rs in rss.iter().filter(|rs| gate::queue_managed(rs)) {
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let mine: Vec<Workload> = wls
            .iter()
            .filter(|w| w.labels().get(label::JOB_UID) == Some(&uid))
            .cloned()
            .collect();
        let holding = mine
            .iter()
            .filter(|w| reserved(w) && !w.is_finished())
            .max_by_key(|w| {
                w.annotations()
                    .contains_key(label::WORKLOAD_SLICE_REPLACEMENT_FOR)
            });
        let children = children_in_gate_order(
            rs,
            rcs.iter()
                .filter(|r| r.namespace() == rs.namespace())
                .cloned()
                .collect(),
        );
        let demands: Vec<_> = children
            .iter()
            .filter_map(|c| demand::child_demand(c, &Default::default()).ok())
            .collect();
        let allowed = demand::allowed_pods(holding.map(|w| w.spec.pod_sets.as_slice()), &demands);
        for child in &children {
            let name = child.name_any();
            let mut live: BTreeMap<String, i64> = BTreeMap::new();
            for p in pods.iter().filter(|p| {
                p.labels().get("ray.io/cluster") == Some(&name)
                    && p.metadata.deletion_timestamp.is_none()
            }) {
                let group =
                    if p.labels().get("ray.io/node-type").map(String::as_str) == Some("head") {
                        "head".to_string()
                    } else {
                        p.labels()
                            .get("ray.io/group")
                            .cloned()
                            .unwrap_or_default()
                            .to_lowercase()
                    };
                *live.entry(group).or_default() += 1;
            }
            for (group, n) in live {
                let cap = allowed
                    .get(&name)
                    .and_then(|a| a.get(&group))
                    .copied()
                    .unwrap_or(0);
                if n > cap {
                    bad.push(format!(
                        "I2: RayCluster {name} group {group} has {n} pods, the slice {} covers {cap} (slice podsets {:?}; demands {:?})",
                        holding.map(|w| w.name_any()).unwrap_or_else(|| "(none)".into()),
                        holding.map(|w| w.spec.pod_sets.iter().map(|p| (p.name.clone().unwrap_or_default(), p.count())).collect::<Vec<_>>()),
                        demands.iter().map(|d| (d.name.clone(), d.pods.iter().map(|(_, n, _)| *n).collect::<Vec<_>>())).collect::<Vec<_>>(),
                    ));
                }
            }
        }
        // I6.
        let pending: Vec<String> = mine
            .iter()
            .filter(|w| {
                !w.is_finished() && !reserved(w) && w.metadata.deletion_timestamp.is_none()
            })
            .map(|w| w.name_any())
            .collect();
        if pending.len() > 1 {
            bad.push(format!(
                "I6: RayService {} has {} pending slices: {pending:?}",
                rs.name_any(),
                pending.len()
            ));
        }
        for old in mine.iter().filter(|w| {
            w.status
                .as_ref()
                .and_then(|s| s.condition("Finished"))
                .is_some_and(|c| c.reason == "WorkloadSliceReplaced")
        }) {
            let key = format!("{}/{}", old.namespace().unwrap_or_default(), old.name_any());
            let successor = mine.iter().any(|w| {
                w.annotations().get(label::WORKLOAD_SLICE_REPLACEMENT_FOR) == Some(&key)
                    && (reserved(w) || w.is_finished())
            }) || seen.successor_was_admitted(&key);
            if !successor {
                bad.push(format!(
                    "I6: slice {key} finished as replaced without an admitted successor"
                ));
            }
        }
    }
    Ok(bad)
}

impl Invariants {
    pub fn start(client: Client) -> Invariants {
        let violations = Arc::new(Mutex::new(Vec::new()));
        let checks = Arc::new(AtomicU64::new(0));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let mut tasks = Vec::new();
        macro_rules! trigger {
            ($k:ty) => {{
                let tx = tx.clone();
                let api: Api<$k> = Api::all(client.clone());
                tasks.push(tokio::spawn(async move {
                    let stream = watcher(api, watcher::Config::default()).default_backoff();
                    futures::pin_mut!(stream);
                    while stream.next().await.is_some() {
                        if tx.send(()).is_err() {
                            return;
                        }
                    }
                }));
            }};
        }
        trigger!(Workload);
        trigger!(RayCluster);
        trigger!(Pod);
        trigger!(ClusterQueue);
        let (v, n) = (violations.clone(), checks.clone());
        tasks.push(tokio::spawn(async move {
            let mut seen = Seen::default();
            while rx.recv().await.is_some() {
                // One check covers every event that arrived meanwhile.
                while rx.try_recv().is_ok() {}
                match check(&client, &mut seen).await {
                    Ok(found) => {
                        n.fetch_add(1, Ordering::SeqCst);
                        v.lock().unwrap().extend(found);
                    }
                    Err(e) => v
                        .lock()
                        .unwrap()
                        .push(format!("invariant check could not read the API: {e}")),
                }
            }
        }));
        Invariants {
            violations,
            checks,
            tasks,
        }
    }

    /// Panics with every violation seen so far; returns how many checks ran.
    pub fn assert_clean(&self) -> u64 {
        let v = self.violations.lock().unwrap();
        assert!(v.is_empty(), "invariant violations:\n{}", v.join("\n"));
        let n = self.checks.load(Ordering::SeqCst);
        assert!(n > 0, "the invariant watcher ran no check");
        n
    }
}

impl Invariants {
    /// Every violation seen so far.
    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }
}

/// The watcher must report what it is there to catch: with no manager running and admission off, objects
/// written straight into the API break I1 (a ClusterQueue holding more than its quota), I2 (a pod of a
/// queue-managed RayService's child with no slice at all) and I6 (two pending slices of one chain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_reports_a_planted_violation_of_each_invariant() {
    use kube::api::{Patch, PatchParams, PostParams};
    use serde_json::json;

    let server = quotagate::embedded::EmbeddedServer::new(
        &quotagate::api::all_crds(),
        Arc::new(quotagate::embedded::AllowAll),
    );
    let client = server.client();
    let inv = Invariants::start(client.clone());
    let pp = PostParams::default();
    let create = |v: serde_json::Value| serde_json::from_value::<kube::core::DynamicObject>(v).unwrap();
    let api = |group: &str, version: &str, kind: &str, plural: &str, ns: bool| {
        let ar = kube::core::ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: if group.is_empty() { version.into() } else { format!("{group}/{version}") },
            kind: kind.into(),
            plural: plural.into(),
        };
        if ns {
            Api::<kube::core::DynamicObject>::namespaced_with(client.clone(), "default", &ar)
        } else {
            Api::<kube::core::DynamicObject>::all_with(client.clone(), &ar)
        }
    };

    // I1: a 1-CPU ClusterQueue and a Workload reserving 2 CPU in it.
    api("kueue.x-k8s.io", "v1beta2", "ClusterQueue", "clusterqueues", false)
        .create(&pp, &create(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cq"}, "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
            "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}})))
        .await
        .unwrap();
    let wls = api("kueue.x-k8s.io", "v1beta2", "Workload", "workloads", true);
    let workload = |name: &str, job_uid: &str| {
        create(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/job-uid": job_uid}},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}}]}}))
    };
    wls.create(&pp, &workload("big", "none")).await.unwrap();
    let reserve = json!({"status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1,
        "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "2"}}]},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "planted",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    wls.patch_status("big", &PatchParams::default(), &Patch::Merge(&reserve)).await.unwrap();

    // I2 and I6: a queue-managed RayService, a child RayCluster it controls, a head pod of that child,
    // no admitted slice, and two pending slices of its chain.
    let rs = api("ray.io", "v1", "RayService", "rayservices", true)
        .create(&pp, &create(json!({"apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": "rs", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"rayClusterConfig": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "1"}}}]}}}}}})))
        .await
        .unwrap();
    let uid = rs.metadata.uid.clone().unwrap();
    api("ray.io", "v1", "RayCluster", "rayclusters", true)
        .create(&pp, &create(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rs-child", "namespace": "default", "ownerReferences": [{"apiVersion": "ray.io/v1",
                "kind": "RayService", "name": "rs", "uid": uid, "controller": true}]},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "1"}}}]}}}}})))
        .await
        .unwrap();
    api("", "v1", "Pod", "pods", true)
        .create(&pp, &create(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "rs-child-head", "namespace": "default", "labels": {"ray.io/cluster": "rs-child", "ray.io/node-type": "head"}},
            "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}})))
        .await
        .unwrap();
    wls.create(&pp, &workload("slice-a", &uid)).await.unwrap();
    wls.create(&pp, &workload("slice-b", &uid)).await.unwrap();

    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let v = inv.violations();
        let found = |p: &str| v.iter().any(|m| m.starts_with(p));
        if found("I1: ClusterQueue cq uses 2000 of cpu") && found("I2: RayCluster rs-child group head has 1 pods") && found("I6: RayService rs has 2 pending slices") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the watcher missed a planted violation; it reported: {v:#?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
