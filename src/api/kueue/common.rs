//! Types shared by several Kueue kinds: quota groups, fair sharing, stop policy, usage reports.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `ResourceList`: resource name to quantity, as in core/v1.
pub type ResourceList = BTreeMap<String, Quantity>;

/// A set of resources whose quotas are given together by a list of flavors.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceGroup {
    /// Resources covered by the flavors of this group (1..64), e.g. cpu, memory, vendor.com/gpu.
    pub covered_resources: Vec<String>,
    /// Flavors providing these resources (1..64); each lists the covered resources in the same order.
    pub flavors: Vec<FlavorQuotas>,
}

/// The quotas one flavor provides for the resources of its group.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorQuotas {
    /// Name of a ResourceFlavor.
    pub name: String,
    /// Quota per resource (1..64).
    pub resources: Vec<ResourceQuota>,
}

/// Quota for one (flavor, resource) pair.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQuota {
    pub name: String,
    /// Quantity available to this queue at any time; non-negative.
    pub nominal_quota: Quantity,
    /// Most that may be borrowed from the cohort; absent = unlimited. Needs a cohort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<Quantity>,
    /// Most of the unused nominal quota that may be lent to the cohort; absent = all of it. Needs a cohort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lending_limit: Option<Quantity>,
}

/// Fair-sharing weight of a ClusterQueue, Cohort or LocalQueue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FairSharing {
    /// Share weight; 0 means an infinite share. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "1"))]
    pub weight: Option<Quantity>,
}

impl FairSharing {
    /// The weight in effect: Kueue's default is 1.
    pub fn weight(&self) -> Quantity {
        self.weight.clone().unwrap_or_else(|| Quantity("1".to_string()))
    }
}

/// Observed fair-sharing state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FairSharingStatus {
    /// Dominant resource share per weight; i64::MAX when borrowing with weight 0.
    pub weighted_share: i64,
}

/// What happens to a stopped ClusterQueue or LocalQueue's workloads.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum StopPolicy {
    /// Not stopped.
    #[default]
    None,
    /// Running workloads continue; reservations are cancelled.
    Hold,
    /// Admitted workloads are evicted; reservations are cancelled.
    HoldAndDrain,
}

/// Usage of one flavor, reported in ClusterQueue status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorUsage {
    pub name: String,
    #[serde(default)]
    pub resources: Vec<ResourceUsage>,
}

/// Usage of one resource of a flavor: the total and how much of it is borrowed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUsage {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowed: Option<Quantity>,
}

/// Admission fair sharing scope of a ClusterQueue.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionScope {
    pub admission_mode: AdmissionMode,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum AdmissionMode {
    UsageBasedAdmissionFairSharing,
    NoAdmissionFairSharing,
}
