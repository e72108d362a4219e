//! Cohort: a node of the quota-sharing tree; may add its own shared pool of quota.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{FairSharing, FairSharingStatus, ResourceGroup};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "Cohort",
    doc = "Cohort groups ClusterQueues and Cohorts that borrow and lend quota among each other.",
    plural = "cohorts",
    shortname = "co",
    status = "CohortStatus",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct CohortSpec {
    /// Parent cohort; a cycle disables the whole tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_name: Option<String>,
    /// Extra quota shared by the subtree (≤16 groups); limits need a parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_groups: Option<Vec<ResourceGroup>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharing>,
}

impl CohortSpec {
    pub fn resource_groups(&self) -> &[ResourceGroup] {
        self.resource_groups.as_deref().unwrap_or_default()
    }
    /// The parent, treating the empty string like absence as Kueue does.
    pub fn parent(&self) -> Option<&str> {
        self.parent_name.as_deref().filter(|p| !p.is_empty())
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CohortStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing: Option<FairSharingStatus>,
}
