//! Every Pod and Workload event of a test, recorded from two watches and replayed in resourceVersion
//! order (the embedded server's RV is one counter for all kinds, as etcd's revision is), checking after
//! each event what users feel: the CPU requested by the pods of queue-managed RayClusters stays within
//! their ClusterQueue's quota, and no cluster has more pods in a group than the latest Workload of its
//! chain that holds quota reserves for that group (DESIGN I1, I2). A sampled clock would miss a 10 ms
//! window; the replay cannot.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use quotagate::api::kueue::Workload;
use quotagate::api::kueue::constants::label;
use quotagate::queue::requests::pod_requests;

#[derive(Clone)]
enum Ev {
    Pod(Box<Pod>, bool),
    Workload(Box<Workload>, bool),
}

pub struct PodLedger {
    events: Arc<Mutex<Vec<(u64, Ev)>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn rv_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl PodLedger {
    /// Starts both watches in `ns`.
    pub async fn start(client: Client, ns: &str) -> PodLedger {
        let events: Arc<Mutex<Vec<(u64, Ev)>>> = Arc::default();
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let wls: Api<Workload> = Api::namespaced(client, ns);
        let e = events.clone();
        let t1 = tokio::spawn(async move {
            let s = watcher(pods, watcher::Config::default()).default_backoff();
            futures::pin_mut!(s);
            while let Some(Ok(ev)) = s.next().await {
                let got = match ev {
                    watcher::Event::Apply(p) | watcher::Event::InitApply(p) => Some((p, false)),
                    watcher::Event::Delete(p) => Some((p, true)),
                    _ => None,
                };
                if let Some((p, gone)) = got {
                    e.lock()
                        .unwrap()
                        .push((rv_of(&p.metadata), Ev::Pod(Box::new(p), gone)));
                }
            }
        });
        let e = events.clone();
        let t2 = tokio::spawn(async move {
            let s = watcher(wls, watcher::Config::default()).default_backoff();
            futures::pin_mut!(s);
            while let Some(Ok(ev)) = s.next().await {
                let got = match ev {
                    watcher::Event::Apply(w) | watcher::Event::InitApply(w) => Some((w, false)),
                    watcher::Event::Delete(w) => Some((w, true)),
                    _ => None,
                };
                if let Some((w, gone)) = got {
                    e.lock()
                        .unwrap()
                        .push((rv_of(&w.metadata), Ev::Workload(Box::new(w), gone)));
                }
            }
        });
        PodLedger {
            events,
            tasks: vec![t1, t2],
        }
    }

    /// Replays every event so far; `quota_milli_cpu` is the ClusterQueue's CPU quota at each RV (the
    /// test raises it as it goes). Returns the violations, empty when none, and how many events were
    /// replayed.
    pub fn replay(&self, quota_milli_cpu: impl Fn(u64) -> i64) -> (Vec<String>, usize) {
        let mut events = self.events.lock().unwrap().clone();
        events.sort_by_key(|(rv, _)| *rv);
        let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
        let mut wls: BTreeMap<String, Workload> = BTreeMap::new();
        let mut bad = Vec::new();
        let mut trail: Vec<String> = Vec::new();
        for (rv, ev) in &events {
            trail.push(format!("rv {rv}: {}", describe(ev)));
            match ev {
                Ev::Pod(p, gone) if *gone => drop(pods.remove(&p.name_any())),
                Ev::Pod(p, _) => drop(pods.insert(p.name_any(), (**p).clone())),
                Ev::Workload(w, gone) if *gone => drop(wls.remove(&w.name_any())),
                Ev::Workload(w, _) => drop(wls.insert(w.name_any(), (**w).clone())),
            }
            let used: i64 = pods.values().map(pod_cpu).sum();
            let limit = quota_milli_cpu(*rv);
            if used > limit {
                bad.push(format!(
                    "rv {rv}: pods request {used}m cpu > quota {limit}m: {:?}",
                    pods.keys().collect::<Vec<_>>()
                ));
            }
            for (cluster, groups) in per_cluster(&pods) {
                let held = reserved_counts(&wls, &cluster);
                for (group, n) in groups {
                    let allowed = held.get(&group).copied().unwrap_or(0);
                    if n > allowed {
                        if bad.is_empty() {
                            // The first violation carries the events that led to it.
                            let from = trail.len().saturating_sub(16);
                            bad.push(format!("events before it:\n  {}", trail[from..].join("\n  ")));
                        }
                        bad.push(format!("rv {rv}: cluster {cluster} has {n} pods in {group}, its reservation holds {allowed}"));
                    }
                }
            }
        }
        (bad, events.len())
    }
}

impl Drop for PodLedger {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The pod's effective CPU request as the scheduler counts it (init containers included).
fn pod_cpu(p: &Pod) -> i64 {
    p.spec
        .as_ref()
        .and_then(|s| pod_requests("spec", s).ok())
        .and_then(|r| r.get("cpu").copied())
        .map_or(0, |a| a.0)
}

/// cluster -> podset (`head` or the lower-cased group) -> pods that exist (terminating ones included).
fn per_cluster(pods: &BTreeMap<String, Pod>) -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut out: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for p in pods.values() {
        let l = p.labels();
        let Some(cluster) = l.get("ray.io/cluster") else {
            continue;
        };
        let group = if l.get("ray.io/node-type").map(String::as_str) == Some("head") {
            "head".to_string()
        } else {
            l.get("ray.io/group").cloned().unwrap_or_default().to_lowercase()
        };
        *out.entry(cluster.clone()).or_default().entry(group).or_default() += 1;
    }
    out
}

/// What the chain of `cluster` reserves per podset: its latest Workload holding quota (a replacement
/// and the slice it replaces can both hold it between two writes: the replacement is the latest).
fn reserved_counts(wls: &BTreeMap<String, Workload>, cluster: &str) -> BTreeMap<String, i64> {
    let held: Vec<&Workload> = wls
        .values()
        .filter(|w| {
            w.owner_references()
                .iter()
                .any(|o| o.kind == "RayCluster" && o.name == cluster)
        })
        .filter(|w| w.has_quota_reservation() && !w.is_finished())
        .collect();
    let replaced: Vec<String> = held
        .iter()
        .filter_map(|w| {
            w.annotations()
                .get(label::WORKLOAD_SLICE_REPLACEMENT_FOR)
                .cloned()
        })
        .filter_map(|k| k.rsplit('/').next().map(str::to_string))
        .collect();
    let mut out = BTreeMap::new();
    for w in held.iter().filter(|w| !replaced.contains(&w.name_any())) {
        for ps in &w.spec.pod_sets {
            *out.entry(ps.name.clone().unwrap_or_default()).or_default() += i64::from(ps.count.unwrap_or(1));
        }
    }
    out
}

/// One line for an event of the trail: the object, what it is and whether it is gone.
fn describe(ev: &Ev) -> String {
    match ev {
        Ev::Pod(p, gone) => {
            let phase = p
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            let deleting = if p.metadata.deletion_timestamp.is_some() {
                " deleting"
            } else {
                ""
            };
            format!(
                "pod {} {phase}{deleting}{} cpu={}m",
                p.name_any(),
                if *gone { " GONE" } else { "" },
                pod_cpu(p)
            )
        }
        Ev::Workload(w, gone) => {
            let counts: Vec<String> = w
                .spec
                .pod_sets
                .iter()
                .map(|ps| {
                    format!(
                        "{}={}",
                        ps.name.clone().unwrap_or_default(),
                        ps.count.unwrap_or(1)
                    )
                })
                .collect();
            let deleting = if w.metadata.deletion_timestamp.is_some() {
                " deleting"
            } else {
                ""
            };
            format!(
                "workload {} [{}] reserved={} admitted={}{deleting}{}",
                w.name_any(),
                counts.join(","),
                w.has_quota_reservation(),
                w.is_admitted(),
                if *gone { " GONE" } else { "" }
            )
        }
    }
}
