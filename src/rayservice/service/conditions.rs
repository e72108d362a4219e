//! KubeRay's RayService conditions (`Ready`, `UpgradeInProgress`, `Suspending`, `Suspended`) and how a
//! running service computes them.

use super::plan::ConditionPlan;
use super::snapshot::{PriorStatus, ServeObservation};

// The strings live in the API constants (KubeRay's names, plus our `ServeDeployFailed`); these short
// aliases keep the decision code readable.
pub use crate::api::ray::constants::{
    COND_READY as READY, COND_ROLLBACK_IN_PROGRESS as ROLLBACK_IN_PROGRESS, COND_SUSPENDED as SUSPENDED,
    COND_SUSPENDING as SUSPENDING, COND_UPGRADE_IN_PROGRESS as UPGRADE_IN_PROGRESS,
    REASON_BOTH_ACTIVE_PENDING_CLUSTERS_EXIST as BOTH_ACTIVE_PENDING_CLUSTERS_EXIST,
    REASON_INITIALIZING as INITIALIZING, REASON_INITIALIZING_TIMEOUT as INITIALIZING_TIMEOUT,
    REASON_NO_ACTIVE_CLUSTER as NO_ACTIVE_CLUSTER, REASON_NO_PENDING_CLUSTER as NO_PENDING_CLUSTER,
    REASON_NON_ZERO_SERVE_ENDPOINTS as NON_ZERO_SERVE_ENDPOINTS,
    REASON_RAY_SERVICE_RESUMED as RAY_SERVICE_RESUMED, REASON_SERVE_DEPLOY_FAILED as SERVE_DEPLOY_FAILED,
    REASON_SUSPEND_COMPLETE as SUSPEND_COMPLETE, REASON_SUSPEND_IN_PROGRESS as SUSPEND_IN_PROGRESS,
    REASON_SUSPEND_REQUESTED as SUSPEND_REQUESTED, REASON_VALIDATION_FAILED as VALIDATION_FAILED,
    REASON_ZERO_SERVE_ENDPOINTS as ZERO_SERVE_ENDPOINTS,
};

pub use crate::rayservice::cluster::conditions::{FALSE, TRUE, UNKNOWN};

use crate::rayservice::dashboard::types::AppStatus;

pub(crate) fn set(
    type_: &'static str,
    status: &'static str,
    reason: &'static str,
    message: impl Into<String>,
) -> ConditionPlan {
    ConditionPlan {
        type_,
        status,
        reason,
        message: message.into(),
        refresh: false,
    }
}

/// `"<cluster>: application <app> DEPLOY_FAILED: <last line of Serve's message>"` for the first failed app.
pub fn deploy_failure(cluster: &str, serve: &ServeObservation) -> Option<String> {
    failed_apps(cluster, serve).next()
}

/// Every DEPLOY_FAILED application of a cluster, worded as `deploy_failure` says it.
pub fn failed_apps<'a>(cluster: &'a str, serve: &'a ServeObservation) -> impl Iterator<Item = String> + 'a {
    let apps = match serve {
        ServeObservation::Apps { apps, .. } => Some(apps),
        _ => None,
    };
    apps.into_iter()
        .flatten()
        .filter(|(_, a)| a.status == AppStatus::DeployFailed)
        .map(move |(name, app)| {
            let last = app
                .message
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("no message from Serve");
            format!(
                "{cluster}: application {name} {}: {last}",
                AppStatus::DeployFailed
            )
        })
}

/// `Ready` for a running service: True iff a serve endpoint is ready, as KubeRay's `calculateConditions`
/// has it (a broken new version does not make a serving service unready: the failure is in the
/// message here and in `UpgradeInProgress`); while nothing has ever served it stays `Initializing`
/// (its lastTransitionTime drives the initializing timeout).
pub fn ready(prior: &PriorStatus, endpoints: i32, failure: Option<&str>) -> ConditionPlan {
    let initializing = match prior.condition(READY) {
        None => true,
        Some(c) => c.status != TRUE && c.reason == INITIALIZING,
    };
    match (endpoints > 0, failure) {
        (true, Some(f)) => set(
            READY,
            TRUE,
            NON_ZERO_SERVE_ENDPOINTS,
            format!("{endpoints} serve endpoint(s) ready; {f}"),
        ),
        (true, None) => set(
            READY,
            TRUE,
            NON_ZERO_SERVE_ENDPOINTS,
            format!("{endpoints} serve endpoint(s) ready"),
        ),
        (false, f) if initializing => set(
            READY,
            FALSE,
            INITIALIZING,
            f.map_or_else(
                || "waiting for the first cluster to serve".to_string(),
                str::to_string,
            ),
        ),
        (false, f) => set(
            READY,
            FALSE,
            ZERO_SERVE_ENDPOINTS,
            f.map_or_else(|| "no serve endpoint is ready".to_string(), str::to_string),
        ),
    }
}

/// `UpgradeInProgress` from which clusters are named; `note` explains a wait (quota gate, failed config,
/// an ignored change).
pub fn upgrade(
    active: Option<&str>,
    pending: Option<&str>,
    ready_reason: &str,
    note: Option<String>,
) -> ConditionPlan {
    let with_note = |base: String| match &note {
        Some(n) => format!("{base}; {n}"),
        None => base,
    };
    match (active, pending) {
        (Some(a), Some(p)) => set(
            UPGRADE_IN_PROGRESS,
            TRUE,
            BOTH_ACTIVE_PENDING_CLUSTERS_EXIST,
            with_note(format!(
                "active cluster {a} serves while pending cluster {p} is prepared"
            )),
        ),
        (Some(a), None) => set(
            UPGRADE_IN_PROGRESS,
            FALSE,
            NO_PENDING_CLUSTER,
            with_note(format!("active cluster {a}")),
        ),
        (None, _) if ready_reason == INITIALIZING || ready_reason == INITIALIZING_TIMEOUT => set(
            UPGRADE_IN_PROGRESS,
            FALSE,
            INITIALIZING,
            with_note("no cluster has served yet".to_string()),
        ),
        (None, _) => set(
            UPGRADE_IN_PROGRESS,
            UNKNOWN,
            NO_ACTIVE_CLUSTER,
            with_note("no active cluster".to_string()),
        ),
    }
}
