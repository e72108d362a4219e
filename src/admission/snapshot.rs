//! What the admission loop reads at one moment (the caches' snapshot), and how a Workload is keyed:
//! shared by the sync step, the classification of workloads and admission fair sharing.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use crate::api::kueue::{
    AdmissionCheck, ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Topology, Workload,
};
use crate::queue::WorkloadKey;

/// What the caches hold at one moment.
#[derive(Clone, Default)]
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
