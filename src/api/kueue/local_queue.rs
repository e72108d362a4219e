//! LocalQueue: the namespaced entry point jobs name; points at one ClusterQueue.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{FairSharing, ResourceList, StopPolicy};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "LocalQueue",
    doc = "LocalQueue is the namespaced queue that jobs name; it feeds one ClusterQueue.",
    plural = "localqueues",
    namespaced,
    shortname = "queue",
    shortname = "queues",
    shortname = "lq",
    status = "LocalQueueStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name": "ClusterQueue", "type": "string", "jsonPath": ".spec.clusterQueue", "description": "Backing ClusterQueue"}"#,
    printcolumn = r#"{"name": "Pending Workloads", "type": "integer", "jsonPath": ".status.pendingWorkloads", "description": "Number of pending workloads"}"#,
    printcolumn = r#"{"name": "Admitted Workloads", "type": "integer", "jsonPath": ".status.admittedWorkloads", "description": "Number of admitted workloads that haven't finished yet."}"#
)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueSpec {
    /// Backing ClusterQueue; immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "None"))]
    pub stop_policy: Option<StopPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

impl LocalQueueSpec {
    pub fn cluster_queue(&self) -> &str {
        self.cluster_queue.as_deref().unwrap_or_default()
    }
    pub fn stop_policy(&self) -> StopPolicy {
        self.stop_policy.unwrap_or_default()
    }
}

/// Observed state of a LocalQueue. Counters are always written, as Kueue does.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub pending_workloads: i32,
    #[serde(default)]
    pub reserving_workloads: i32,
    #[serde(default)]
    pub admitted_workloads: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_reservation: Vec<LocalQueueFlavorUsage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_usage: Vec<LocalQueueFlavorUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<LocalQueueFairSharingStatus>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueFlavorUsage {
    pub name: String,
    #[serde(default)]
    pub resources: Vec<LocalQueueResourceUsage>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueResourceUsage {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<Quantity>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueFairSharingStatus {
    pub weighted_share: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_fair_sharing_status: Option<LocalQueueAdmissionFairSharingStatus>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalQueueAdmissionFairSharingStatus {
    pub consumed_resources: ResourceList,
    pub last_update: Time,
}
