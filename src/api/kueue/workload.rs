//! Workload: the unit of admission. One per job; podsets describe its pods and their requests.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodTemplateSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::ResourceList;
use super::constants::{DEFAULT_PODSET_NAME, condition};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "Workload",
    doc = "Workload is the unit of admission: the pods of one job, and where their quota is reserved.",
    plural = "workloads",
    namespaced,
    shortname = "kwl",
    shortname = "kueueworkload",
    shortname = "kueueworkloads",
    status = "WorkloadStatus",
    derive = "PartialEq",
    selectable = ".status.admission.clusterQueue",
    printcolumn = r#"{"name": "Queue", "type": "string", "jsonPath": ".spec.queueName", "description": "Name of the queue this workload was submitted to"}"#,
    printcolumn = r#"{"name": "Reserved in", "type": "string", "jsonPath": ".status.admission.clusterQueue", "description": "Name of the ClusterQueue where the workload is reserving quota"}"#,
    printcolumn = r#"{"name": "Admitted", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Admitted')].status", "description": "Admission status"}"#,
    printcolumn = r#"{"name": "Finished", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Finished')].status", "description": "Workload finished"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "description": "Time this workload was created"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// Sets of identical pods (1..18, unique names); immutable while admitted.
    #[serde(default)]
    pub pod_sets: Vec<PodSet>,
    /// LocalQueue in the workload's namespace; immutable while admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_ref: Option<PriorityClassRef>,
    /// Required when priorityClassRef is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// false evicts the workload and keeps it from being admitted. Defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub active: Option<bool>,
    /// Run time after which an admitted workload is evicted and deactivated (≥1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum_execution_time_seconds: Option<i32>,
    /// Gates that must open before the workload may preempt (≤8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption_gates: Option<Vec<PreemptionGate>>,
}

impl WorkloadSpec {
    pub fn queue_name(&self) -> &str {
        self.queue_name.as_deref().unwrap_or_default()
    }
    /// Priority in effect: Kueue treats an absent priority as 0.
    pub fn priority(&self) -> i32 {
        self.priority.unwrap_or(0)
    }
    pub fn active(&self) -> bool {
        self.active.unwrap_or(true)
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PriorityClassGroup {
    #[serde(rename = "kueue.x-k8s.io")]
    Kueue,
    #[serde(rename = "scheduling.k8s.io")]
    Scheduling,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PriorityClassKind {
    WorkloadPriorityClass,
    PriorityClass,
}

/// Which priority class gave the workload its priority.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PriorityClassRef {
    pub group: PriorityClassGroup,
    pub kind: PriorityClassKind,
    pub name: String,
}

impl PriorityClassRef {
    pub fn workload_priority_class(name: &str) -> Self {
        PriorityClassRef {
            group: PriorityClassGroup::Kueue,
            kind: PriorityClassKind::WorkloadPriorityClass,
            name: name.to_string(),
        }
    }
    pub fn pod_priority_class(name: &str) -> Self {
        PriorityClassRef {
            group: PriorityClassGroup::Scheduling,
            kind: PriorityClassKind::PriorityClass,
            name: name.to_string(),
        }
    }
}

/// A set of identical pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSet {
    /// DNS label, unique in the workload. Defaults to `main`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "main"))]
    pub name: Option<String>,
    pub template: PodTemplateSpec,
    /// Number of pods (≥0). Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 1))]
    pub count: Option<i32>,
    /// Smallest acceptable count (≥0) for partial admission; only one podset may set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_request: Option<PodSetTopologyRequest>,
}

impl PodSet {
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(DEFAULT_PODSET_NAME)
    }
    pub fn count(&self) -> i32 {
        self.count.unwrap_or(1)
    }
}

/// Topology-aware scheduling request of a podset. Kept for round trips; not acted upon.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetTopologyRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconstrained: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_index_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_index_label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_group_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_slice_required_topology: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_set_slice_size: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub podset_slice_required_topology_constraints: Option<Vec<PodsetSliceRequiredTopologyConstraint>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodsetSliceRequiredTopologyConstraint {
    pub topology: String,
    pub size: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionGate {
    pub name: String,
}

/// Observed state of a Workload.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Set when quota is reserved; may be cleared but never changed in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_state: Option<RequeueState>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reclaimable_pods: Vec<ReclaimablePod>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_checks: Vec<AdmissionCheckState>,
    /// Requests per podset while not admitted (after LimitRange defaults and overhead).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_requests: Vec<PodSetRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accumulated_past_execution_time_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_stats: Option<SchedulingStats>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nominated_cluster_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unhealthy_nodes: Vec<UnhealthyNode>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preemption_gates: Vec<PreemptionGateState>,
}

impl WorkloadStatus {
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
    pub fn condition_true(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(|c| c.status == "True")
    }
}

impl Workload {
    /// Quota is reserved: condition QuotaReserved=True.
    pub fn has_quota_reservation(&self) -> bool {
        self.status
            .as_ref()
            .is_some_and(|s| s.condition_true(condition::QUOTA_RESERVED))
    }
    /// Admitted: condition Admitted=True.
    pub fn is_admitted(&self) -> bool {
        self.status
            .as_ref()
            .is_some_and(|s| s.condition_true(condition::ADMITTED))
    }
    pub fn is_finished(&self) -> bool {
        self.status
            .as_ref()
            .is_some_and(|s| s.condition_true(condition::FINISHED))
    }
    pub fn admission(&self) -> Option<&Admission> {
        self.status.as_ref().and_then(|s| s.admission.as_ref())
    }
}

/// Where a workload's quota is reserved and which flavor each podset got.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    pub cluster_queue: String,
    #[serde(default)]
    pub pod_set_assignments: Vec<PodSetAssignment>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetAssignment {
    pub name: String,
    /// Flavor assigned per resource.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flavors: BTreeMap<String, String>,
    /// Resources counted against quota for the whole podset.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resource_usage: ResourceList,
    /// Admitted pod count (may be below spec count under partial admission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    /// Kept for round trips (TAS); not produced by quotagate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_assignment: Option<TopologyAssignment>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delayed_topology_request: Option<DelayedTopologyRequestState>,
}

/// Pod placement over topology domains (TAS).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignment {
    #[serde(default)]
    pub levels: Vec<String>,
    #[serde(default)]
    pub slices: Vec<TopologyAssignmentSlice>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignmentSlice {
    pub domain_count: i32,
    #[serde(default)]
    pub values_per_level: Vec<TopologyAssignmentSliceLevelValues>,
    #[serde(default)]
    pub pod_counts: TopologyAssignmentSlicePodCounts,
}

/// Exactly one of `universal` and `individual` is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignmentSliceLevelValues {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub individual: Option<TopologyAssignmentSliceLevelIndividualValues>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignmentSliceLevelIndividualValues {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
    #[serde(default)]
    pub roots: Vec<String>,
}

/// Exactly one of `universal` and `individual` is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignmentSlicePodCounts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universal: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub individual: Vec<i32>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DelayedTopologyRequestState {
    Pending,
    Ready,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequeueState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_at: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReclaimablePod {
    pub name: String,
    pub count: i32,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum CheckState {
    Pending,
    Ready,
    Retry,
    Rejected,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckState {
    pub name: String,
    pub state: CheckState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_after_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_set_updates: Vec<PodSetUpdate>,
}

/// Changes an admission check asks to apply to a podset's pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetUpdate {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSetRequest {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: ResourceList,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingStats {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evictions: Vec<WorkloadSchedulingStatsEviction>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSchedulingStatsEviction {
    pub reason: String,
    #[serde(default)]
    pub underlying_cause: String,
    pub count: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnhealthyNode {
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PreemptionGatePosition {
    Closed,
    Open,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionGateState {
    pub name: String,
    pub position: PreemptionGatePosition,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// The object is resized through workload slices: annotation `kueue.x-k8s.io/elastic-job: "true"` (on a
/// job, or on the Workloads it creates).
pub fn is_elastic_job(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(super::constants::label::ELASTIC_JOB))
        .is_some_and(|v| v == "true")
}
