//! waitForPodsReady, as Kueue does it: the job controller keeps a `PodsReady` condition on each job's
//! Workload (`pkg/controller/jobframework/reconciler.go`, generatePodsReadyCondition); the admission
//! loop evicts an admitted workload that has not reached it within the timeout (or, once ready, has not
//! recovered within the recovery timeout), requeues it with the backoff of `backoff.rs`, and after
//! `backoffLimitCount` requeues deactivates it (`pkg/controller/core/workload_controller.go`,
//! reconcileNotReadyTimeout and triggerDeactivation). With `blockAdmission`, nothing is admitted while
//! an admitted workload is not PodsReady (`pkg/scheduler/scheduler.go`, waitForPodsReadyIfNeeded).
//! All pure: the loop and the job controller write what these return.

use super::workload_status::{EvictedBy, EvictionCause, cond, set_condition, status_of};
use crate::api::conditions::{FALSE, TRUE};
use crate::api::kueue::config::PodsReadyConfig;
use crate::api::kueue::constants::{condition, reason};
use crate::api::kueue::{Workload, WorkloadStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

pub const NOT_READY_MESSAGE: &str = "Not all pods are ready or succeeded";
pub const WAITING_FOR_RECOVERY_MESSAGE: &str = "At least one pod has failed, waiting for recovery";
pub const READY_MESSAGE: &str = "All pods reached readiness and the workload is running";
pub const BLOCKED_MESSAGE: &str = "waiting for all admitted workloads to be in PodsReady condition";
pub const LIMIT_EXCEEDED_MESSAGE: &str = "exceeding the maximum number of re-queuing retries";
/// Kueue's PodsReady reason before `WaitForStart` existed, still read as it.
const LEGACY_REASON: &str = "PodsReady";
/// Kueue v0.20's PodsScheduled messages (KEP-13502; fixed, whatever the counts).
pub const UNSCHEDULED_PODS_MESSAGE: &str = "At least one required pod is not scheduled";
pub const ALL_PODS_SCHEDULED_MESSAGE: &str = "All required pods were scheduled or succeeded";

/// What a job's pods say about their scheduling, for Kueue v0.20's `PodsScheduled` condition
/// (KEP-13502's counting: a pod counts toward its podset's grant when it is bound to a node and
/// neither finished nor being deleted, or when it succeeded; failed pods and pods being deleted never
/// do).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodsScheduling {
    /// Pods neither finished nor being deleted, bound or not.
    pub live: usize,
    /// Per podset name: the pods that count toward its grant.
    pub scheduled: std::collections::BTreeMap<String, i64>,
}

/// The PodsScheduled condition of the current admission (Kueue's `CurrentPodsScheduledCondition`):
/// one of the two observations (`False`/`WaitForScheduling`, `True`/`AllRequiredPodsScheduled`),
/// written no earlier than the workload's Admitted transition. Anything else (a reset naming how an
/// earlier admission ended, or an observation older than this admission) is no observation.
pub fn current_pods_scheduled(wl: &Workload) -> Option<&Condition> {
    let st = wl.status.as_ref()?;
    let admitted = st.condition(condition::ADMITTED).filter(|c| c.status == TRUE)?;
    st.condition(condition::PODS_SCHEDULED).filter(|c| {
        let observation = (c.status == FALSE && c.reason == reason::WAIT_FOR_SCHEDULING)
            || (c.status == TRUE && c.reason == reason::ALL_REQUIRED_PODS_SCHEDULED);
        observation && c.last_transition_time.0 >= admitted.last_transition_time.0
    })
}

/// The status with Kueue v0.20's PodsScheduled observation of `pods` (KEP-13502's tracker), or
/// `None` when nothing is to be written: the workload is not admitted, is evicted or finished; this
/// admission already saw every required pod scheduled (the condition stays `True` for the rest of
/// it); it already shows the pods unscheduled and they still are (the time they were first seen so
/// is what the timeout counts from); or no pod exists yet and none of this admission was seen.
pub fn with_pods_scheduled(
    wl: &Workload,
    pods: &PodsScheduling,
    now: jiff::Timestamp,
) -> Option<WorkloadStatus> {
    let st = wl.status.as_ref()?;
    if !wl.is_admitted() || wl.is_finished() || st.condition_true(condition::EVICTED) {
        return None;
    }
    let current = current_pods_scheduled(wl);
    if current.is_some_and(|c| c.status == TRUE) {
        return None;
    }
    let admission = st.admission.as_ref()?;
    let mut required = 0i64;
    let mut scheduled = 0i64;
    for a in &admission.pod_set_assignments {
        let granted = i64::from(a.count.unwrap_or_else(|| {
            wl.spec
                .pod_sets
                .iter()
                .find(|p| p.name() == a.name)
                .map_or(0, |p| p.count())
        }))
        .max(0);
        required = required.saturating_add(granted);
        let have = pods.scheduled.get(&a.name).copied().unwrap_or(0).max(0);
        scheduled = scheduled.saturating_add(have.min(granted));
    }
    let all = scheduled >= required;
    if current.is_none() && pods.live == 0 && !all {
        return None;
    }
    if current.is_some() && !all {
        return None;
    }
    let (why, message) = if all {
        (reason::ALL_REQUIRED_PODS_SCHEDULED, ALL_PODS_SCHEDULED_MESSAGE)
    } else {
        (reason::WAIT_FOR_SCHEDULING, UNSCHEDULED_PODS_MESSAGE)
    };
    let mut s = status_of(wl);
    let c = cond(
        condition::PODS_SCHEDULED,
        all,
        why,
        message,
        wl.metadata.generation,
        now,
    );
    // Replaced, not merged: the first observation of an admission is stamped now even when an
    // earlier one showed the same.
    s.conditions.retain(|x| x.type_ != condition::PODS_SCHEDULED);
    s.conditions.push(c);
    Some(s)
}

/// Where an eviction ends an admission that has a PodsScheduled observation: the condition turns
/// `False` with the eviction's reason and message (KEP-13502's lifecycle reset), so no later
/// admission reads it as its own.
pub fn reset_pods_scheduled(s: &mut WorkloadStatus, why: &str, message: &str, now: jiff::Timestamp) {
    let Some(c) = s
        .conditions
        .iter_mut()
        .find(|c| c.type_ == condition::PODS_SCHEDULED)
    else {
        return;
    };
    if c.reason == why && c.status == FALSE {
        return;
    }
    if c.status == TRUE {
        c.last_transition_time = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now);
    }
    c.status = FALSE.to_string();
    c.reason = why.to_string();
    c.message = message.to_string();
}

/// The PodsReady condition (status, reason, message) a job's workload should show, given whether all
/// the job's pods are ready. With `tracking` (Kueue v0.20's `PodsScheduledTrackingEnabled`), a
/// workload not yet ready whose pods this admission were seen unscheduled waits `WaitForScheduling`.
pub fn desired(wl: &Workload, pods_ready: bool, tracking: bool) -> (bool, &'static str, &'static str) {
    if !wl.is_admitted() {
        return (false, reason::WAIT_FOR_START, NOT_READY_MESSAGE);
    }
    let current = wl
        .status
        .as_ref()
        .and_then(|s| s.condition(condition::PODS_READY));
    let recovering = |r: &str| r == reason::WAIT_FOR_RECOVERY || r == reason::RECOVERED;
    if pods_ready {
        let why = if current.is_some_and(|c| recovering(&c.reason)) {
            reason::RECOVERED
        } else {
            reason::STARTED
        };
        return (true, why, READY_MESSAGE);
    }
    match current {
        Some(c) if c.status == TRUE || c.reason == reason::WAIT_FOR_RECOVERY => {
            (false, reason::WAIT_FOR_RECOVERY, WAITING_FOR_RECOVERY_MESSAGE)
        }
        _ if tracking
            && current_pods_scheduled(wl)
                .is_some_and(|c| c.status == FALSE && c.reason == reason::WAIT_FOR_SCHEDULING) =>
        {
            (false, reason::WAIT_FOR_SCHEDULING, NOT_READY_MESSAGE)
        }
        _ => (false, reason::WAIT_FOR_START, NOT_READY_MESSAGE),
    }
}

/// The status with the PodsReady condition updated, or `None` when the workload already shows that
/// status and reason (Kueue rewrites only on a change of either).
pub fn with_condition(
    wl: &Workload,
    pods_ready: bool,
    tracking: bool,
    now: jiff::Timestamp,
) -> Option<WorkloadStatus> {
    let (status, why, message) = desired(wl, pods_ready, tracking);
    let shown = wl
        .status
        .as_ref()
        .and_then(|s| s.condition(condition::PODS_READY));
    let want = if status { TRUE } else { FALSE };
    if shown.is_some_and(|c| c.status == want && c.reason == why) {
        return None;
    }
    let mut s = status_of(wl);
    set_condition(
        &mut s.conditions,
        cond(
            condition::PODS_READY,
            status,
            why,
            message,
            wl.metadata.generation,
            now,
        ),
    );
    Some(s)
}

/// An admitted workload not PodsReady: which wait it is in (`WaitForStart`, `WaitForScheduling` or
/// `WaitForRecovery`, also the eviction's underlying cause) and when (ms) its timeout runs out.
/// `None` when no timeout applies.
pub fn deadline(wl: &Workload, cfg: &PodsReadyConfig) -> Option<(&'static str, i64)> {
    let st = wl.status.as_ref()?;
    let admitted = st.condition(condition::ADMITTED).filter(|c| c.status == TRUE)?;
    let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    // Kueue v0.20 (KEP-4803): the workload's own `kueue.x-k8s.io/wait-for-pods-ready` timeouts
    // under the `WorkloadLevelWaitForPodsReady` gate, each falling back to the cluster-wide one.
    let (timeout, recovery_timeout) = cfg.timeouts_for(wl.metadata.annotations.as_ref());
    match st.condition(condition::PODS_READY) {
        Some(c) if c.status == TRUE => None,
        None => Some((
            reason::WAIT_FOR_START,
            admitted
                .last_transition_time
                .0
                .as_millisecond()
                .saturating_add(ms(timeout)),
        )),
        Some(c) if c.reason == reason::WAIT_FOR_START || c.reason == LEGACY_REASON => Some((
            reason::WAIT_FOR_START,
            admitted
                .last_transition_time
                .0
                .as_millisecond()
                .saturating_add(ms(timeout)),
        )),
        // Kueue v0.20 (KEP-13502): pods seen unscheduled this admission get `unscheduledTimeout`
        // from when that was first seen, never past `timeout` from the admission.
        Some(c) if c.reason == reason::WAIT_FOR_SCHEDULING => {
            let from_admission = admitted
                .last_transition_time
                .0
                .as_millisecond()
                .saturating_add(ms(timeout));
            let seen = current_pods_scheduled(wl)
                .filter(|p| p.status == FALSE && p.reason == reason::WAIT_FOR_SCHEDULING);
            let at = match (cfg.unscheduled_timeout, seen) {
                (Some(u), Some(p)) => p
                    .last_transition_time
                    .0
                    .as_millisecond()
                    .saturating_add(ms(u))
                    .min(from_admission),
                _ => from_admission,
            };
            Some((reason::WAIT_FOR_SCHEDULING, at))
        }
        Some(c) if c.reason == reason::WAIT_FOR_RECOVERY => {
            let recovery = recovery_timeout?;
            Some((
                reason::WAIT_FOR_RECOVERY,
                c.last_transition_time
                    .0
                    .as_millisecond()
                    .saturating_add(ms(recovery)),
            ))
        }
        Some(_) => None,
    }
}

/// The wait a not-ready admitted workload is in, by its PodsReady reason (Kueue's
/// `admittedNotReadyWorkload`): `WaitForRecovery` or `WaitForScheduling` when it says so, else
/// `WaitForStart`.
pub fn waiting_in(wl: &Workload) -> &'static str {
    match wl
        .status
        .as_ref()
        .and_then(|s| s.condition(condition::PODS_READY))
        .map(|c| c.reason.as_str())
    {
        Some(reason::WAIT_FOR_RECOVERY) => reason::WAIT_FOR_RECOVERY,
        Some(reason::WAIT_FOR_SCHEDULING) => reason::WAIT_FOR_SCHEDULING,
        _ => reason::WAIT_FOR_START,
    }
}

/// What waitForPodsReady asks of a workload holding quota and not being evicted.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Ready, or no timeout applies.
    Fine,
    /// Not ready; its timeout runs out at this time (ms).
    Until(i64),
    /// Past its timeout: evicted with `PodsReadyTimeout`.
    Evict(EvictionCause),
    /// Past its timeout with no requeue left (or already marked): deactivated.
    Deactivate,
}

/// Kueue's reconcileNotReadyTimeout for one workload at `now_ms`.
pub fn verdict(wl: &Workload, cfg: &PodsReadyConfig, now_ms: i64) -> Verdict {
    if deactivation_target(wl).is_some() {
        return Verdict::Deactivate;
    }
    match deadline(wl, cfg) {
        None => Verdict::Fine,
        Some((_, at)) if at > now_ms => Verdict::Until(at),
        Some(_) if limit_reached(wl, cfg) => Verdict::Deactivate,
        Some(_) => Verdict::Evict(EvictionCause {
            by: EvictedBy::PodsReadyTimeout,
            message: timeout_message(wl),
        }),
    }
}

/// One more requeue would pass `backoffLimitCount`: the workload is deactivated instead.
pub fn limit_reached(wl: &Workload, cfg: &PodsReadyConfig) -> bool {
    let count = wl
        .status
        .as_ref()
        .and_then(|s| s.requeue_state.as_ref())
        .and_then(|r| r.count)
        .unwrap_or(0);
    cfg.backoff_limit_count
        .is_some_and(|limit| count.saturating_add(1) > limit)
}

/// Whether the workload is marked for deactivation (`DeactivationTarget=True`).
pub fn deactivation_target(
    wl: &Workload,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    wl.status
        .as_ref()?
        .condition(condition::DEACTIVATION_TARGET)
        .filter(|c| c.status == TRUE)
}

/// `DeactivationTarget=True` with `why` (`RequeuingLimitExceeded`, `AdmissionCheck`), or `None` when
/// already marked.
pub fn mark_for_deactivation(
    wl: &Workload,
    why: &str,
    message: &str,
    now: jiff::Timestamp,
) -> Option<WorkloadStatus> {
    if deactivation_target(wl).is_some() {
        return None;
    }
    let mut s = status_of(wl);
    set_condition(
        &mut s.conditions,
        cond(
            condition::DEACTIVATION_TARGET,
            true,
            why,
            message,
            wl.metadata.generation,
            now,
        ),
    );
    Some(s)
}

/// The Evicted message of a deactivated workload: Kueue names the deactivation's cause when it
/// had one.
pub fn deactivated_message(wl: &Workload) -> String {
    match deactivation_target(wl) {
        Some(c) => format!("The workload is deactivated due to {}", c.message),
        None => "The workload is deactivated".to_string(),
    }
}

/// The eviction message of a PodsReady timeout (Kueue names the workload as `namespace/name`).
pub fn timeout_message(wl: &Workload) -> String {
    format!(
        "Exceeded the PodsReady timeout {}/{}",
        wl.metadata.namespace.as_deref().unwrap_or_default(),
        wl.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Holds quota and is not PodsReady: blocks admission under `blockAdmission`.
pub fn blocks_admission(wl: &Workload) -> bool {
    wl.has_quota_reservation()
        && !wl.is_finished()
        && wl.metadata.deletion_timestamp.is_none()
        && !wl
            .status
            .as_ref()
            .is_some_and(|s| s.condition_true(condition::PODS_READY))
}

#[cfg(test)]
#[path = "pods_ready_tests.rs"]
mod tests;

/// Whether writing `new` gives the workload its first readiness: PodsReady=True with reason Started
/// where it did not show that (Kueue observes its time-to-ready metrics only then, not on a
/// recovery).
pub fn first_ready(old: &Workload, new: &WorkloadStatus) -> bool {
    let started = |c: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition| {
        c.status == TRUE && c.reason == reason::STARTED
    };
    let was = old
        .status
        .as_ref()
        .and_then(|s| s.condition(condition::PODS_READY))
        .is_some_and(started);
    !was && new.condition(condition::PODS_READY).is_some_and(started)
}

/// Kueue's time-to-ready waits at `ready_at`, in seconds: since the workload was queued (created, or
/// last requeued) and since it was admitted (`None` without an Admitted condition).
pub fn ready_waits(
    wl: &Workload,
    queued_since: jiff::Timestamp,
    ready_at: jiff::Timestamp,
) -> (f64, Option<f64>) {
    let secs = |from: jiff::Timestamp| ready_at.duration_since(from).as_secs_f64().max(0.0);
    let admitted = wl
        .status
        .as_ref()
        .and_then(|s| s.condition(condition::ADMITTED))
        .map(|c| secs(c.last_transition_time.0));
    (secs(queued_since), admitted)
}

/// Kueue's `workloadsWithPodsReadyToEvictedTime`: seconds from PodsReady=True to Evicted=True, both
/// shown by `status`; `None` unless both are.
pub fn ready_to_evicted(status: &WorkloadStatus) -> Option<f64> {
    let when = |t: &str| {
        status
            .condition(t)
            .filter(|c| c.status == TRUE)
            .map(|c| c.last_transition_time.0)
    };
    let (ready, evicted) = (when(condition::PODS_READY)?, when(condition::EVICTED)?);
    Some(evicted.duration_since(ready).as_secs_f64())
}

/// Kueue's `workload_recovery_wait_time_seconds`: seconds from the workload's pods losing readiness
/// after having been ready (`old` shows PodsReady=False, reason `WaitForRecovery`, since its
/// transition) until `new` shows them ready again; `None` for any other write.
pub fn recovery_wait(old: &Workload, new: &WorkloadStatus) -> Option<f64> {
    let lost = old
        .status
        .as_ref()?
        .condition(condition::PODS_READY)
        .filter(|c| c.status != TRUE && c.reason == reason::WAIT_FOR_RECOVERY)?;
    let ready = new
        .condition(condition::PODS_READY)
        .filter(|c| c.status == TRUE)?;
    Some(
        ready
            .last_transition_time
            .0
            .duration_since(lost.last_transition_time.0)
            .as_secs_f64()
            .max(0.0),
    )
}
