//! The gate of a queue-managed RayService, computed from API objects only: the Workloads it owns and its
//! child RayClusters. No annotation, label or `suspend` field a user can write opens it. The RayCluster
//! controller caps pod creation with it; the RayService controller releases a held child and switches
//! traffic only to children it covers.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::Api;
use kube::{Client, ResourceExt};

use super::demand::{self, ChildDemand, LivePods};
use super::rayservice::{children_pods, load_children, service_demand};
use crate::api::kueue::Workload;
use crate::api::kueue::constants::condition;
use crate::api::ray::constants as c;
use crate::api::ray::{RayCluster, RayService};
use crate::jobframework::interface::queue_name;
use crate::jobframework::job_controller::owned_workloads;

/// A slice waiting for quota, and Kueue's reason as its QuotaReserved condition states it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingSlice {
    pub workload: String,
    pub local_queue: String,
    pub message: String,
}

/// What the gate lets each child run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gate {
    /// child -> group -> pods it may have.
    pub allowed: BTreeMap<String, BTreeMap<String, i64>>,
    /// Children whose every pod is covered.
    pub covered: BTreeSet<String>,
    /// The latest admitted slice, if any.
    pub admitted: Option<String>,
    /// A replacement (or first) slice still waiting for quota.
    pub pending: Option<PendingSlice>,
    /// Why no slice can be made for the current children at all (e.g. Kueue's podset limit).
    pub blocked: Option<String>,
}

/// True when the RayService's clusters run only under admitted quota.
pub fn queue_managed(rs: &RayService) -> bool {
    queue_name(&rs.metadata).is_some()
}

/// The gate, from the service's workloads, its children in gate order and the pods they run now.
pub fn decide(rs: &RayService, children: &[RayCluster], workloads: &[Workload], live: &LivePods) -> Gate {
    let demands: Vec<ChildDemand> = match service_demand(rs, children, live) {
        Ok(d) if !children.is_empty() => d,
        // A child whose demand cannot be computed is covered by nothing.
        _ => demand::at_least_live(
            children
                .iter()
                .filter_map(|rc| demand::child_demand(rc, &Default::default()).ok())
                .collect(),
            live,
        ),
    };
    let blocked = demand::podsets(&demands).err().map(|e| e.to_string());
    let admitted = demand::admitted_slice(workloads);
    let allowed = demand::allowed_pods(admitted.map(|w| w.spec.pod_sets.as_slice()), &demands, live);
    let covered = demands
        .iter()
        .filter(|d| allowed.get(&d.name).is_some_and(|a| demand::covers(a, d)))
        .map(|d| d.name.clone())
        .collect();
    let pending = workloads
        .iter()
        .filter(|w| {
            !w.is_finished()
                && !w.has_quota_reservation()
                && w.metadata.deletion_timestamp.is_none()
        })
        .max_by_key(|w| w.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .map(|w| PendingSlice {
            workload: w.name_any(),
            local_queue: w.spec.queue_name.clone().unwrap_or_default(),
            message: w
                .status
                .as_ref()
                .and_then(|s| s.condition(condition::QUOTA_RESERVED))
                .map(|c| c.message.clone())
                .unwrap_or_else(|| "not yet considered by the scheduler".to_string()),
        });
    Gate {
        allowed,
        covered,
        admitted: admitted.map(|w| w.name_any()),
        pending,
        blocked,
    }
}

/// The gate as the API shows it now (lists the children, the workloads and the children's pods).
pub async fn load(client: &Client, rs: &RayService) -> Result<Gate, kube::Error> {
    let ns = rs.namespace().unwrap_or_default();
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let children = load_children(client, rs).await?;
    let workloads = owned_workloads(client, &ns, &uid).await?;
    let live = children_pods(client, &ns, &children).await?;
    Ok(decide(rs, &children, &workloads, &live))
}

/// The RayService a RayCluster belongs to: its controller owner of kind RayService, else (an owner
/// reference removed by hand) its `ray.io/originated-from-*` labels.
pub fn parent_service(rc: &RayCluster) -> Option<String> {
    let by_owner = rc
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.kind == c::CRD_RAY_SERVICE)
        .map(|o| o.name.clone());
    let labels = rc.labels();
    let by_label = (labels.get(c::LABEL_ORIGINATED_FROM_CRD).map(String::as_str)
        == Some(c::CRD_RAY_SERVICE))
    .then(|| labels.get(c::LABEL_ORIGINATED_FROM_CR_NAME).cloned())
    .flatten();
    by_owner.or(by_label)
}

/// What the gate lets one RayCluster run, and the slice it waits for, if any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterGate {
    /// Pods per group (`head` for the head).
    pub allowed: BTreeMap<String, i64>,
    /// Every pod the cluster wants is covered.
    pub covered: bool,
    pub waiting: Option<PendingSlice>,
}

impl ClusterGate {
    /// The `QuotaGated` condition's message: why the cluster waits, or what covers it.
    pub fn message(&self) -> String {
        match (&self.waiting, self.covered) {
            (_, true) => "an admitted workload slice covers every pod".to_string(),
            (Some(p), false) => format!(
                "waiting for workload slice {} (LocalQueue {}): {}",
                p.workload, p.local_queue, p.message
            ),
            (None, false) => "no admitted workload slice covers this cluster".to_string(),
        }
    }
}

/// The gate of `rc`, or `None` when `rc` is not quota-gated (no queue-managed parent). A parent that
/// cannot be found covers nothing.
pub async fn cluster_gate(client: &Client, rc: &RayCluster) -> Result<Option<ClusterGate>, kube::Error> {
    let Some(parent) = parent_service(rc) else {
        return Ok(None);
    };
    let ns = rc.namespace().unwrap_or_default();
    let api: Api<RayService> = Api::namespaced(client.clone(), &ns);
    let Some(rs) = api.get_opt(&parent).await? else {
        return Ok(Some(ClusterGate::default()));
    };
    if !queue_managed(&rs) {
        return Ok(None);
    }
    let gate = load(client, &rs).await?;
    let name = rc.name_any();
    Ok(Some(ClusterGate {
        allowed: gate.allowed.get(&name).cloned().unwrap_or_default(),
        covered: gate.covered.contains(&name),
        waiting: gate.pending,
    }))
}
