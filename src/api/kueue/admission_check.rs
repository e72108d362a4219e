//! AdmissionCheck: a named gate, run by some controller, that a workload must pass (besides quota)
//! before it is admitted. ClusterQueues name the checks their workloads need
//! (`spec.admissionChecksStrategy`); each check's controller writes the per-workload verdict into
//! `Workload.status.admissionChecks[]`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The controller name of quotagate's built-in check: it marks its AdmissionChecks Active and sets
/// each workload's state for them to `Ready` once quota is reserved (after the delay of
/// [`READY_AFTER_SECONDS_ANNOTATION`], if the AdmissionCheck carries it).
pub const AUTO_READY_CONTROLLER: &str = "quotagate.x-k8s.io/auto-ready";

/// Annotation on an AdmissionCheck run by [`AUTO_READY_CONTROLLER`]: seconds to wait after the
/// quota reservation before the check turns `Ready` (whole seconds, ≥ 0; absent = at once).
pub const READY_AFTER_SECONDS_ANNOTATION: &str = "quotagate.x-k8s.io/ready-after-seconds";

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "AdmissionCheck",
    doc = "AdmissionCheck is a gate, run by a named controller, that workloads of the ClusterQueues naming it must pass before admission.",
    plural = "admissionchecks",
    shortname = "ac",
    status = "AdmissionCheckStatus",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckSpec {
    /// The controller that runs the check (1..253 characters; immutable).
    #[serde(default)]
    pub controller_name: String,
    /// A configuration object with the check's parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<AdmissionCheckParametersReference>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckParametersReference {
    /// API group of the referenced object (a DNS subdomain).
    #[serde(default)]
    pub api_group: String,
    /// Kind of the referenced object.
    #[serde(default)]
    pub kind: String,
    /// Name of the referenced object (a DNS label).
    #[serde(default)]
    pub name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionCheckStatus {
    /// At most 16; type `Active` tells whether the check's controller evaluates it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl AdmissionCheck {
    /// `Active=True`: its controller is ready to evaluate the check.
    pub fn is_active(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == super::constants::condition::ACTIVE && c.status == "True")
        })
    }
}
