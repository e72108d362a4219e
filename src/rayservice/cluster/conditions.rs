//! Conditions as the two Ray controllers plan them, and how a plan is merged into a stored list (one place
//! for both, over `api::conditions`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

pub use crate::api::conditions::{FALSE, TRUE};
pub const UNKNOWN: &str = "Unknown";

/// A condition to set. `refresh`: remove and re-add so lastTransitionTime restarts even if the status
/// did not change (KubeRay #4894, re-arming Initializing on resume).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionPlan {
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
    pub refresh: bool,
}

/// Merges `plan` into `existing` with apimachinery's `SetStatusCondition` semantics.
pub fn merge_condition(existing: &mut Vec<Condition>, plan: &ConditionPlan, now: &Time, generation: i64) {
    if plan.refresh {
        existing.retain(|c| c.type_ != plan.type_);
    }
    let new = Condition {
        type_: plan.type_.to_string(),
        status: plan.status.to_string(),
        reason: plan.reason.to_string(),
        message: plan.message.clone(),
        observed_generation: Some(generation),
        last_transition_time: now.clone(),
    };
    crate::api::conditions::set(existing, new);
}
