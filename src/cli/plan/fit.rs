//! Would a phase's workload be admitted now? The queue objects (from files or a live cluster) go
//! into a `Snapshot`, a Workload with the phase's podsets is added beside what is already there, and
//! one cycle of the admission loop's own bookkeeping (`AdmissionState::step`, the same code the
//! manager runs) decides. Nothing is written anywhere.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, ListParams};
use serde_json::Value;

use crate::admission::{Action, AdmissionState, Snapshot, key_of};
use crate::api::kueue::constants::label::{QUEUE_NAME, WORKLOAD_SLICE_REPLACEMENT_FOR};
use crate::api::kueue::{LocalQueue, LocalQueueSpec, PodSet, Workload, WorkloadSpec};
use crate::api::ray::RayService;
use crate::queue::{Explanation, WorkloadKey};
use crate::rayservice::job::demand::{Pins, admitted_slice, pins};

/// LocalQueue the plan's Workload is queued in when `--cluster-queue` names the ClusterQueue.
pub const PLAN_LOCAL_QUEUE: &str = "quotagate-plan";

#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("document {index} ({kind}): {message}")]
    Document {
        index: usize,
        kind: String,
        message: String,
    },
    #[error(
        "no ClusterQueue to check against: name one with --cluster-queue or label the RayService or RayJob with {QUEUE_NAME}"
    )]
    NoQueue,
    #[error("LocalQueue {namespace}/{name} (the job's {QUEUE_NAME}) does not exist")]
    NoLocalQueue { namespace: String, name: String },
    #[error("ClusterQueue {0} does not exist")]
    NoClusterQueue(String),
    #[error("listing {kind}: {source}")]
    List { kind: &'static str, source: kube::Error },
}

/// The verdict for one phase.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub admitted: bool,
    /// podset -> resource -> flavor, when admitted.
    pub flavors: BTreeMap<String, BTreeMap<String, String>>,
    pub reason: String,
    pub message: String,
    /// The scheduler's reasoning when it is not admitted: shortfall per flavor, holders, preemption.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explanation: Option<Explanation>,
    /// Whether it fits the topology, for a phase with podsets in a topology-aware flavor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyFit>,
}

/// Whether a phase fits topologically, not only by quota (issue 65): quota may have room while no
/// domain of the level a podset requires does, and the other way round.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyFit {
    /// Every podset in a TAS flavor has a placement; `None` when quota fails before the topology
    /// is tried (`byQuota` false).
    pub fits: Option<bool>,
    /// Admitted with the same queues and workloads but no topology (Nodes not counted).
    pub by_quota: bool,
    /// Per podset placed: each domain (its values joined by `/`) and its pods.
    pub placements: BTreeMap<String, Vec<(String, i32)>>,
    /// Why it does not fit: Kueue's message and the level the podset requires one domain of.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub why: String,
}

/// Kueue's not-fit message for a podset's topology (`couldn't assign flavors to pod set X: topology
/// "T" ...`), as opposed to a quota one.
fn is_topology_message(message: &str) -> bool {
    (message.starts_with("couldn't assign flavors to pod set ") && message.contains(": topology \""))
        || message.contains("there is no Topology")
}

/// Adds the queue objects among `docs` to `snap`; other kinds are the caller's.
pub fn add_documents(snap: &mut Snapshot, docs: &[(usize, Value)]) -> Result<(), FitError> {
    fn parse<T: serde::de::DeserializeOwned>(
        index: usize,
        kind: &str,
        doc: &Value,
    ) -> Result<Arc<T>, FitError> {
        serde_json::from_value(doc.clone())
            .map(Arc::new)
            .map_err(|e| FitError::Document {
                index,
                kind: kind.to_string(),
                message: e.to_string(),
            })
    }
    for (index, doc) in docs {
        let index = *index;
        match doc.get("kind").and_then(Value::as_str).unwrap_or_default() {
            "ClusterQueue" => snap.cluster_queues.push(parse(index, "ClusterQueue", doc)?),
            "Cohort" => snap.cohorts.push(parse(index, "Cohort", doc)?),
            "ResourceFlavor" => snap.flavors.push(parse(index, "ResourceFlavor", doc)?),
            "LocalQueue" => snap.local_queues.push(parse(index, "LocalQueue", doc)?),
            "Workload" => snap.workloads.push(parse(index, "Workload", doc)?),
            "Topology" => snap.topologies.push(parse(index, "Topology", doc)?),
            "Node" => snap.nodes.push(parse(index, "Node", doc)?),
            _ => {}
        }
    }
    Ok(())
}

/// The queue objects of a live cluster.
pub async fn load_live(client: &kube::Client) -> Result<Snapshot, FitError> {
    async fn all<K>(client: &kube::Client, kind: &'static str) -> Result<Vec<Arc<K>>, FitError>
    where
        K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let api: Api<K> = Api::all(client.clone());
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|source| FitError::List { kind, source })?;
        Ok(list.items.into_iter().map(Arc::new).collect())
    }
    let flavors: Vec<Arc<crate::api::kueue::ResourceFlavor>> = all(client, "ResourceFlavors").await?;
    // Nodes only matter (and are only read) when a flavor is topology-aware.
    let tas = flavors
        .iter()
        .any(|f| f.spec.as_ref().is_some_and(|s| s.topology_name.is_some()));
    let (topologies, nodes) = if tas {
        (all(client, "Topologies").await?, all(client, "Nodes").await?)
    } else {
        (Vec::new(), Vec::new())
    };
    // What scheduled pods TAS did not place take on the Nodes, as the admission loop counts them.
    let mut non_tas = crate::queue::non_tas::NonTasPods::default();
    if tas {
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::all(client.clone());
        let list = pods
            .list(&ListParams::default().fields("spec.nodeName!="))
            .await
            .map_err(|source| FitError::List { kind: "Pods", source })?;
        for p in &list.items {
            let usage = crate::queue::non_tas::non_tas_usage(p).ok().flatten();
            non_tas.set(crate::queue::non_tas::pod_key(p), usage);
        }
    }
    Ok(Snapshot {
        cluster_queues: all(client, "ClusterQueues").await?,
        cohorts: all(client, "Cohorts").await?,
        flavors,
        topologies,
        nodes,
        local_queues: all(client, "LocalQueues").await?,
        workloads: all(client, "Workloads").await?,
        namespaces: BTreeMap::new(),
        // The plan admits, it does not rewrite priorities.
        priority_classes: BTreeMap::new(),
        // A ClusterQueue whose checks are missing or inactive admits nothing.
        admission_checks: all(client, "AdmissionChecks").await?,
        non_tas: Some(non_tas.per_node()),
    })
}

/// Where the plan's Workload queues: the `--cluster-queue` (through a LocalQueue of the plan's own) or
/// the RayService's LocalQueue. Returns the LocalQueue name and the ClusterQueue it points to.
pub fn queue_of(
    snap: &mut Snapshot,
    job: &ObjectMeta,
    cluster_queue: Option<&str>,
) -> Result<(String, String), FitError> {
    let ns = job.namespace.clone().unwrap_or_else(|| "default".into());
    let (lq, cq) = match cluster_queue {
        Some(cq) => {
            snap.local_queues.push(Arc::new(LocalQueue {
                metadata: ObjectMeta {
                    name: Some(PLAN_LOCAL_QUEUE.into()),
                    namespace: Some(ns.clone()),
                    ..Default::default()
                },
                spec: LocalQueueSpec {
                    cluster_queue: Some(cq.to_string()),
                    ..Default::default()
                },
                status: None,
            }));
            (PLAN_LOCAL_QUEUE.to_string(), cq.to_string())
        }
        None => {
            let name = job
                .labels
                .as_ref()
                .and_then(|l| l.get(QUEUE_NAME))
                .cloned()
                .ok_or(FitError::NoQueue)?;
            let lq = snap
                .local_queues
                .iter()
                .find(|l| {
                    l.metadata.name.as_deref() == Some(name.as_str())
                        && l.metadata.namespace.as_deref().unwrap_or("default") == ns
                })
                .ok_or_else(|| FitError::NoLocalQueue {
                    namespace: ns.clone(),
                    name: name.clone(),
                })?;
            (name, lq.spec.cluster_queue.clone().unwrap_or_default())
        }
    };
    if !snap
        .cluster_queues
        .iter()
        .any(|q| q.metadata.name.as_deref() == Some(cq.as_str()))
    {
        return Err(FitError::NoClusterQueue(cq));
    }
    Ok((lq, cq))
}

/// The admitted slice of the RayService's Workload chain, if the cluster has one: the upgrade's
/// slice replaces it, so only the growth has to fit.
pub fn current_slice(snap: &Snapshot, rs: &RayService) -> Option<WorkloadKey> {
    let ns = rs.metadata.namespace.as_deref().unwrap_or("default");
    let name = rs.metadata.name.as_deref()?;
    let owned: Vec<Workload> = snap
        .workloads
        .iter()
        .filter(|w| w.metadata.namespace.as_deref() == Some(ns))
        .filter(|w| {
            w.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "RayService" && o.name == name)
        })
        .map(|w| w.as_ref().clone())
        .collect();
    admitted_slice(&owned).map(key_of)
}

/// Where the pods of the admitted slice `key` run (`demand::pins`), for the plan's slice that
/// replaces it.
pub fn slice_pins(snap: &Snapshot, key: &WorkloadKey) -> Pins {
    let slice = snap.workloads.iter().find(|w| key_of(w) == *key);
    pins(slice.map(|w| w.as_ref()))
}

/// Runs one admission cycle with a Workload of `podsets` added and reports what happened to it,
/// and, when a podset asks for a topology or lands in a topology-aware flavor, whether it fits the
/// topology: where each podset goes, or why it cannot, and whether quota alone would admit it.
pub fn check(
    snap: &Snapshot,
    job: &ObjectMeta,
    local_queue: &str,
    podsets: &[PodSet],
    replaces: Option<&WorkloadKey>,
    now_ms: i64,
) -> Verdict {
    let (mut verdict, placements) = cycle(snap, job, local_queue, podsets, replaces, now_ms);
    let asks = podsets
        .iter()
        .any(|p| crate::api::kueue::tas::explicitly_requests_tas(p.topology_request.as_ref()));
    let topological = is_topology_message(&verdict.message);
    if verdict.admitted && (asks || !placements.is_empty()) {
        verdict.topology = Some(TopologyFit {
            fits: Some(true),
            by_quota: true,
            placements,
            why: String::new(),
        });
    } else if !verdict.admitted && (asks || topological) {
        // The same cycle with every flavor's topology taken away: quota alone.
        let mut plain = snap.clone();
        for f in &mut plain.flavors {
            if f.spec.as_ref().is_some_and(|s| s.topology_name.is_some()) {
                let mut flat = f.as_ref().clone();
                if let Some(s) = flat.spec.as_mut() {
                    s.topology_name = None;
                }
                *f = Arc::new(flat);
            }
        }
        // Nor do the podsets ask for any (a request needs a TAS flavor to be assigned one).
        let flat: Vec<PodSet> = podsets
            .iter()
            .cloned()
            .map(|mut p| {
                p.topology_request = None;
                p
            })
            .collect();
        let (quota, _) = cycle(&plain, job, local_queue, &flat, replaces, now_ms);
        verdict.topology = Some(TopologyFit {
            fits: if topological {
                Some(false)
            } else if quota.admitted {
                Some(true)
            } else {
                None
            },
            by_quota: quota.admitted,
            placements: BTreeMap::new(),
            why: if topological {
                crate::rayservice::job::gate::with_topology_level(podsets, &verdict.message)
            } else {
                String::new()
            },
        });
    }
    verdict
}

/// Where each podset of an admission was placed in its topology.
type Placements = BTreeMap<String, Vec<(String, i32)>>;

fn cycle(
    snap: &Snapshot,
    job: &ObjectMeta,
    local_queue: &str,
    podsets: &[PodSet],
    replaces: Option<&WorkloadKey>,
    now_ms: i64,
) -> (Verdict, Placements) {
    let ns = job.namespace.clone().unwrap_or_else(|| "default".into());
    let name = format!("quotagate-plan-{}", job.name.as_deref().unwrap_or("job"));
    let mut annotations = BTreeMap::new();
    if let Some(old) = replaces {
        annotations.insert(WORKLOAD_SLICE_REPLACEMENT_FOR.to_string(), old.to_string());
    }
    // The upgrade's slice belongs to the job the replaced one belongs to (the admission step trusts
    // a slice's running pods only then), as the job reconciler makes it.
    let owner_references = replaces.and_then(|old| {
        snap.workloads
            .iter()
            .find(|w| key_of(w) == *old)
            .and_then(|w| w.metadata.owner_references.clone())
    });
    let now = jiff::Timestamp::from_millisecond(now_ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let wl = Workload {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            uid: Some(format!("plan-{name}")),
            resource_version: Some("1".into()),
            creation_timestamp: Some(Time(now)),
            annotations: Some(annotations),
            owner_references,
            ..Default::default()
        },
        spec: WorkloadSpec {
            pod_sets: podsets.to_vec(),
            queue_name: Some(local_queue.to_string()),
            ..Default::default()
        },
        status: None,
    };
    let key = key_of(&wl);
    let mut with = snap.clone();
    with.workloads.push(Arc::new(wl));
    let mut state = AdmissionState::new();
    let actions = state.step(&with, now_ms);
    for a in actions {
        match a {
            Action::Admit {
                key: k, admission, ..
            } if k == key => {
                let flavors = admission
                    .pod_set_assignments
                    .iter()
                    .map(|p| (p.name.clone(), p.flavors.clone()))
                    .collect();
                let placements = admission
                    .pod_set_assignments
                    .iter()
                    .filter_map(|p| {
                        let t = p.topology.as_ref()?;
                        let domains = t.domains.iter().map(|d| (d.values.join("/"), d.count)).collect();
                        Some((p.name.clone(), domains))
                    })
                    .collect();
                return (
                    Verdict {
                        admitted: true,
                        flavors,
                        reason: "Admitted".into(),
                        message: format!("admitted by ClusterQueue {}", admission.cluster_queue),
                        explanation: None,
                        topology: None,
                    },
                    placements,
                );
            }
            Action::Pending {
                key: k,
                reason,
                message,
            } if k == key => {
                return (
                    Verdict {
                        admitted: false,
                        flavors: BTreeMap::new(),
                        reason: reason.as_str().into(),
                        message,
                        explanation: state.explanations.remove(&key),
                        topology: None,
                    },
                    Placements::new(),
                );
            }
            _ => {}
        }
    }
    (
        Verdict {
            admitted: false,
            flavors: BTreeMap::new(),
            reason: "Pending".into(),
            message: "not evaluated in this cycle".into(),
            explanation: state.explanations.remove(&key),
            topology: None,
        },
        Placements::new(),
    )
}
