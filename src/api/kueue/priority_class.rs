//! WorkloadPriorityClass: a named priority value; its fields sit at the top level, not under spec.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The top-level fields of a WorkloadPriorityClass (`value`, `description`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "WorkloadPriorityClass",
    doc = "WorkloadPriorityClass is a priority value for workloads, independent of pod priority.",
    plural = "workloadpriorityclasses",
    shortname = "wpc",
    no_spec,
    derive = "PartialEq",
    printcolumn = r#"{"name": "Value", "type": "integer", "jsonPath": ".value", "description": "Value of workloadPriorityClass's Priority"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadPriorityClassFields {
    /// Priority given to workloads selecting this class.
    pub value: i32,
    /// At most 2048 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}
