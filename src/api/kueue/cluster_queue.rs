//! ClusterQueue: a pool of quota per (flavor, resource), the unit of admission.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{AdmissionScope, FairSharing, FairSharingStatus, FlavorUsage, ResourceGroup, StopPolicy};

/// Desired state of a ClusterQueue.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "ClusterQueue",
    doc = "ClusterQueue is the Schema for the clusterQueue API: quota per flavor and resource, and the policies for admitting workloads against it.",
    plural = "clusterqueues",
    shortname = "cq",
    status = "ClusterQueueStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Cohort", "type": "string", "jsonPath": ".spec.cohortName", "description": "Cohort that this ClusterQueue belongs to"}"#,
    printcolumn = r#"{"name": "Strategy", "type": "string", "jsonPath": ".spec.queueingStrategy", "description": "The queueing strategy used to prioritize workloads", "priority": 1}"#,
    printcolumn = r#"{"name": "Pending Workloads", "type": "integer", "jsonPath": ".status.pendingWorkloads", "description": "Number of pending workloads"}"#,
    printcolumn = r#"{"name": "Admitted Workloads", "type": "integer", "jsonPath": ".status.admittedWorkloads", "description": "Number of admitted workloads that haven't finished yet", "priority": 1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueSpec {
    /// Groups of resources and the flavors giving their quota (≤16 groups, ≤256 flavors in all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_groups: Option<Vec<ResourceGroup>>,
    /// Cohort this queue borrows from and lends to; empty = neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "BestEffortFIFO"))]
    pub queueing_strategy: Option<QueueingStrategy>,
    /// Namespaces allowed to submit; absent = none, `{}` = all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub flavor_fungibility: Option<FlavorFungibility>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub preemption: Option<ClusterQueuePreemption>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_checks_strategy: Option<AdmissionChecksStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "None"))]
    pub stop_policy: Option<StopPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_scope: Option<AdmissionScope>,
    /// Alpha in Kueue: kept so objects using it round-trip; not acted upon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent_admission_policy: Option<ConcurrentAdmissionPolicy>,
}

impl ClusterQueueSpec {
    /// The resource groups, empty when absent.
    pub fn resource_groups(&self) -> &[ResourceGroup] {
        self.resource_groups.as_deref().unwrap_or_default()
    }
    /// The cohort, treating the empty string like absence as Kueue does.
    pub fn cohort(&self) -> Option<&str> {
        self.cohort_name.as_deref().filter(|c| !c.is_empty())
    }
    pub fn queueing_strategy(&self) -> QueueingStrategy {
        self.queueing_strategy.unwrap_or_default()
    }
    pub fn stop_policy(&self) -> StopPolicy {
        self.stop_policy.unwrap_or_default()
    }
    pub fn flavor_fungibility(&self) -> FlavorFungibility {
        self.flavor_fungibility.clone().unwrap_or_default()
    }
    pub fn preemption(&self) -> ClusterQueuePreemption {
        self.preemption.clone().unwrap_or_default()
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum QueueingStrategy {
    /// An older workload that cannot be admitted blocks newer ones of the same priority.
    StrictFIFO,
    /// An older workload that cannot be admitted does not block newer ones.
    #[default]
    BestEffortFIFO,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionChecksStrategy {
    /// 1..64 rules, unique by name.
    #[serde(default)]
    pub admission_checks: Vec<AdmissionCheckStrategyRule>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckStrategyRule {
    pub name: String,
    /// Flavors the check runs for; empty = all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_flavors: Option<Vec<String>>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum FlavorFungibilityPolicy {
    MayStopSearch,
    TryNextFlavor,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum FlavorFungibilityPreference {
    BorrowingOverPreemption,
    PreemptionOverBorrowing,
}

/// Whether to try the next flavor before borrowing or preempting in the current one.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorFungibility {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "MayStopSearch"))]
    pub when_can_borrow: Option<FlavorFungibilityPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "TryNextFlavor"))]
    pub when_can_preempt: Option<FlavorFungibilityPolicy>,
    /// Only when both policies are TryNextFlavor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preference: Option<FlavorFungibilityPreference>,
}

impl FlavorFungibility {
    pub fn when_can_borrow(&self) -> FlavorFungibilityPolicy {
        self.when_can_borrow
            .unwrap_or(FlavorFungibilityPolicy::MayStopSearch)
    }
    pub fn when_can_preempt(&self) -> FlavorFungibilityPolicy {
        self.when_can_preempt
            .unwrap_or(FlavorFungibilityPolicy::TryNextFlavor)
    }
    pub fn preference(&self) -> FlavorFungibilityPreference {
        self.preference
            .unwrap_or(FlavorFungibilityPreference::BorrowingOverPreemption)
    }
}

/// Preemption policies (reclaimWithinCohort / withinClusterQueue values).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PreemptionPolicy {
    #[default]
    Never,
    LowerPriority,
    LowerOrNewerEqualPriority,
    Any,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum BorrowWithinCohortPolicy {
    #[default]
    Never,
    LowerPriority,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueuePreemption {
    /// Never | LowerPriority | Any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Never"))]
    pub reclaim_within_cohort: Option<PreemptionPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {}))]
    pub borrow_within_cohort: Option<BorrowWithinCohort>,
    /// Never | LowerPriority | LowerOrNewerEqualPriority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Never"))]
    pub within_cluster_queue: Option<PreemptionPolicy>,
}

impl ClusterQueuePreemption {
    pub fn reclaim_within_cohort(&self) -> PreemptionPolicy {
        self.reclaim_within_cohort.unwrap_or_default()
    }
    pub fn within_cluster_queue(&self) -> PreemptionPolicy {
        self.within_cluster_queue.unwrap_or_default()
    }
    pub fn borrow_within_cohort(&self) -> BorrowWithinCohort {
        self.borrow_within_cohort.clone().unwrap_or_default()
    }
}

/// Preemption in the cohort while borrowing (classical preemption only).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BorrowWithinCohort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Never"))]
    pub policy: Option<BorrowWithinCohortPolicy>,
    /// Only workloads at or below this priority may be preempted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_priority_threshold: Option<i32>,
}

impl BorrowWithinCohort {
    pub fn policy(&self) -> BorrowWithinCohortPolicy {
        self.policy.unwrap_or_default()
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentAdmissionPolicy {
    pub migration: ConcurrentAdmissionMigration,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentAdmissionMigration {
    pub mode: ConcurrentAdmissionMigrationMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<ConcurrentAdmissionConstraints>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ConcurrentAdmissionMigrationMode {
    TryPreferredFlavors,
    RetainFirstAdmission,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConcurrentAdmissionConstraints {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_acceptable_flavor_name: Option<String>,
}

/// Observed state of a ClusterQueue. Counters are always written, as Kueue does.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterQueueStatus {
    /// Condition `Active` (≤16 conditions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Quota reserved per flavor by workloads in this queue.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_reservation: Vec<FlavorUsage>,
    /// Quota used per flavor by admitted workloads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors_usage: Vec<FlavorUsage>,
    #[serde(default)]
    pub pending_workloads: i32,
    #[serde(default)]
    pub reserving_workloads: i32,
    #[serde(default)]
    pub admitted_workloads: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
}
