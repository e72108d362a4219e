//! What the admission loop reads at one moment (the caches' snapshot), and how a Workload is keyed:
//! shared by the sync step, the classification of workloads and admission fair sharing.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use crate::api::kueue::{
    AdmissionCheck, ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Topology, Workload,
};
use crate::queue::WorkloadKey;
use crate::queue::non_tas::NodeUsage;

/// What the caches hold at one moment.
#[derive(Clone)]
pub struct Snapshot {
    pub cluster_queues: Vec<Arc<ClusterQueue>>,
    pub cohorts: Vec<Arc<Cohort>>,
    pub flavors: Vec<Arc<ResourceFlavor>>,
    pub local_queues: Vec<Arc<LocalQueue>>,
    pub workloads: Vec<Arc<Workload>>,
    /// Namespace labels by namespace name (for ClusterQueue namespaceSelector).
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// WorkloadPriorityClass values by name.
    pub priority_classes: BTreeMap<String, i32>,
    pub admission_checks: Vec<Arc<AdmissionCheck>>,
    pub topologies: Vec<Arc<Topology>>,
    pub nodes: Vec<Arc<Node>>,
    /// Per node, what pods TAS did not place request there; `None` while not listed.
    pub non_tas: Option<Arc<NodeUsage>>,
}

/// Empty; a snapshot built by hand (the `plan` tool's files) has its non-TAS pods listed: none.
impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            cluster_queues: Vec::new(),
            cohorts: Vec::new(),
            flavors: Vec::new(),
            local_queues: Vec::new(),
            workloads: Vec::new(),
            namespaces: BTreeMap::new(),
            priority_classes: BTreeMap::new(),
            admission_checks: Vec::new(),
            topologies: Vec::new(),
            nodes: Vec::new(),
            non_tas: Some(Arc::default()),
        }
    }
}

/// A Workload's key: its namespace and name.
pub fn key_of(wl: &Workload) -> WorkloadKey {
    WorkloadKey::new(
        wl.metadata.namespace.clone().unwrap_or_default(),
        wl.metadata.name.clone().unwrap_or_default(),
    )
}

/// An object's resourceVersion (empty when it has none).
pub(super) fn rv(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.resource_version.clone().unwrap_or_default()
}
