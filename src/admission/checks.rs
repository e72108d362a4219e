//! Admission checks as Kueue's workload controller and cache apply them, as pure functions: which
//! checks a workload needs, when a ClusterQueue's checks make it inactive, when `Admitted` follows
//! the checks, and what a `Retry` or `Rejected` verdict does. The admission loop (`sync.rs`) decides
//! with these; `run.rs` writes what they return.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::workload_status::{cond, set_condition};
use crate::api::kueue::admission_check::{
    AUTO_READY_CONTROLLER, AdmissionCheck, READY_AFTER_SECONDS_ANNOTATION,
};
use crate::api::kueue::constants::{condition, reason};
use crate::api::kueue::{Admission, AdmissionCheckState, CheckState, ClusterQueue, Workload, WorkloadStatus};

/// Check name -> the flavors it applies to.
pub type CheckFlavors = BTreeMap<String, BTreeSet<String>>;

/// Kueue's `NewAdmissionChecks`: each rule of `admissionChecksStrategy` with its flavors; a rule
/// with no `onFlavors` applies to every flavor of the ClusterQueue.
pub fn cluster_queue_checks(cq: &ClusterQueue) -> CheckFlavors {
    let all = all_flavors(cq);
    cq.spec
        .admission_checks_strategy
        .iter()
        .flat_map(|s| &s.admission_checks)
        .map(|r| {
            let on: BTreeSet<String> = r.on_flavors.iter().flatten().cloned().collect();
            (r.name.clone(), if on.is_empty() { all.clone() } else { on })
        })
        .collect()
}

fn all_flavors(cq: &ClusterQueue) -> BTreeSet<String> {
    cq.spec
        .resource_groups()
        .iter()
        .flat_map(|g| g.flavors.iter().map(|f| f.name.clone()))
        .collect()
}

/// The flavors an admission assigned, over every podset.
fn admission_flavors(a: &Admission) -> BTreeSet<&str> {
    a.pod_set_assignments
        .iter()
        .flat_map(|p| p.flavors.values().map(String::as_str))
        .collect()
}

/// Kueue's `admissionChecksForAdmission`: the checks whose flavors meet the admission's.
pub fn checks_for_admission(checks: &CheckFlavors, admission: &Admission) -> BTreeSet<String> {
    let assigned = admission_flavors(admission);
    checks
        .iter()
        .filter(|(_, on)| on.iter().any(|f| assigned.contains(f.as_str())))
        .map(|(n, _)| n.clone())
        .collect()
}

/// Kueue's `AdmissionChecksForWorkload`: with an admission, the checks of its flavors; before one,
/// only the checks that apply to every flavor of the ClusterQueue (whatever flavor it gets, it
/// will need those).
#[cfg(test)]
pub fn checks_for_workload(wl: &Workload, cq: &ClusterQueue) -> BTreeSet<String> {
    QueueChecks::of(cq).for_workload(wl)
}

/// A ClusterQueue's checks, worked out once per cycle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueChecks {
    pub checks: CheckFlavors,
    /// The checks that apply to every flavor of the queue.
    pub everywhere: BTreeSet<String>,
}

impl QueueChecks {
    pub fn of(cq: &ClusterQueue) -> Self {
        let checks = cluster_queue_checks(cq);
        let all = all_flavors(cq);
        let everywhere = checks
            .iter()
            .filter(|(_, on)| on.is_superset(&all))
            .map(|(n, _)| n.clone())
            .collect();
        QueueChecks { checks, everywhere }
    }

    pub fn for_workload(&self, wl: &Workload) -> BTreeSet<String> {
        match wl.admission() {
            Some(a) => checks_for_admission(&self.checks, a),
            None => self.everywhere.clone(),
        }
    }
}

/// Kueue's `syncAdmissionCheckConditions`: a `Pending` state for each wanted check the workload
/// lacks, none for a check no longer wanted, the others kept as they are; sorted by name. `None`
/// when nothing changes.
pub fn synced_states(
    current: &[AdmissionCheckState],
    wanted: &BTreeSet<String>,
    now: jiff::Timestamp,
) -> Option<Vec<AdmissionCheckState>> {
    let mut states: Vec<AdmissionCheckState> = current
        .iter()
        .filter(|s| wanted.contains(&s.name))
        .cloned()
        .collect();
    let mut changed = states.len() != current.len();
    for name in wanted {
        if !states.iter().any(|s| &s.name == name) {
            states.push(AdmissionCheckState {
                name: name.clone(),
                state: CheckState::Pending,
                last_transition_time: Some(Time(now)),
                message: String::new(),
                requeue_after_seconds: None,
                retry_count: None,
                pod_set_updates: Vec::new(),
            });
            changed = true;
        }
    }
    states.sort_by(|a, b| a.name.cmp(&b.name));
    changed.then_some(states)
}

pub fn all_ready(states: &[AdmissionCheckState]) -> bool {
    states.iter().all(|s| s.state == CheckState::Ready)
}

fn in_state(states: &[AdmissionCheckState], state: CheckState) -> Vec<&AdmissionCheckState> {
    states.iter().filter(|s| s.state == state).collect()
}

/// Kueue's `SyncAdmittedCondition` (UnadmittedWorkloadsObservability on): `Admitted` is true when
/// quota is reserved and every check is Ready; otherwise false with `NoReservation` or
/// `UnsatisfiedAdmissionChecks`. A workload that was admitted and no longer is adds the time it was
/// admitted to `accumulatedPastExecutionTimeSeconds`. A status with neither QuotaReserved nor
/// Admitted is left alone. Returns whether anything changed.
pub fn sync_admitted(s: &mut WorkloadStatus, generation: Option<i64>, now: jiff::Timestamp) -> bool {
    if s.condition(condition::QUOTA_RESERVED).is_none() && s.condition(condition::ADMITTED).is_none() {
        return false;
    }
    let reserved = s.condition_true(condition::QUOTA_RESERVED);
    let (ok, why, msg) = if !reserved {
        (false, reason::NO_RESERVATION, "The workload has no reservation")
    } else if !all_ready(&s.admission_checks) {
        (
            false,
            reason::UNSATISFIED_ADMISSION_CHECKS,
            "The workload has not all checks ready",
        )
    } else {
        (true, reason::ADMITTED, "The workload is admitted")
    };
    if !ok
        && let Some(since) = s
            .condition(condition::ADMITTED)
            .filter(|c| c.status == "True")
            .map(|c| c.last_transition_time.0)
    {
        let d = i32::try_from((now - since).get_seconds())
            .unwrap_or(i32::MAX)
            .max(0);
        let past = s.accumulated_past_execution_time_seconds.unwrap_or(0);
        s.accumulated_past_execution_time_seconds = Some(past.saturating_add(d));
    }
    set_condition(
        &mut s.conditions,
        cond(condition::ADMITTED, ok, why, msg, generation, now),
    )
}

/// Kueue's `buildAdmissionChecksMessage`: `AdmissionCheck in Retry state: "a" (why); "b"`.
pub fn verdict_message(states: &[&AdmissionCheckState], state: CheckState) -> String {
    let mut sorted: Vec<&&AdmissionCheckState> = states.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let parts: Vec<String> = sorted
        .iter()
        .map(|s| {
            if s.message.is_empty() {
                format!("{:?}", s.name)
            } else {
                format!("{:?} ({})", s.name, s.message)
            }
        })
        .collect();
    let noun = if states.len() > 1 {
        "AdmissionChecks"
    } else {
        "AdmissionCheck"
    };
    format!("{noun} in {state:?} state: {}", parts.join("; "))
}

/// What the checks of a reserved, not yet evicted workload ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A check is `Rejected`: deactivate (`DeactivationTarget` with reason `AdmissionCheck`, then
    /// `spec.active=false`), with this message.
    Deactivate(String),
    /// A check is `Retry`: evict with reason `AdmissionCheck` and this message, requeue later.
    Evict(String),
}

/// Kueue's `reconcileCheckBasedEviction`: Rejected wins over Retry.
pub fn verdict(states: &[AdmissionCheckState]) -> Option<Verdict> {
    let rejected = in_state(states, CheckState::Rejected);
    if !rejected.is_empty() {
        return Some(Verdict::Deactivate(verdict_message(
            &rejected,
            CheckState::Rejected,
        )));
    }
    let retry = in_state(states, CheckState::Retry);
    (!retry.is_empty()).then(|| {
        Verdict::Evict(format!(
            "Evicted due to {}",
            verdict_message(&retry, CheckState::Retry)
        ))
    })
}

/// A pending workload with a failed check is not considered for admission (Kueue's scheduler).
pub fn has_failed(states: &[AdmissionCheckState]) -> bool {
    states
        .iter()
        .any(|s| matches!(s.state, CheckState::Retry | CheckState::Rejected))
}

pub const FAILED_MESSAGE: &str = "The workload has failed admission checks";

/// Kueue's `GetMaxRetryTime`: the latest `lastTransitionTime + requeueAfterSeconds` of the checks in
/// `Retry`.
pub fn max_retry_time(states: &[AdmissionCheckState]) -> Option<jiff::Timestamp> {
    states
        .iter()
        .filter(|s| s.state == CheckState::Retry)
        .filter_map(|s| {
            let at = s.last_transition_time.as_ref()?.0;
            at.checked_add(jiff::SignedDuration::from_secs(i64::from(
                s.requeue_after_seconds?,
            )))
            .ok()
        })
        .max()
}

/// Kueue's `resetChecksOnEviction`: every check not Pending goes back to Pending (a Retry counts one
/// more retry), saying what it was.
pub fn reset_on_eviction(states: &mut [AdmissionCheckState], now: jiff::Timestamp) {
    for s in states.iter_mut().filter(|s| s.state != CheckState::Pending) {
        let retry_count =
            (s.state == CheckState::Retry).then(|| s.retry_count.unwrap_or(0).saturating_add(1));
        *s = AdmissionCheckState {
            name: std::mem::take(&mut s.name),
            state: CheckState::Pending,
            last_transition_time: Some(Time(now)),
            message: format!("Reset to Pending after eviction. Previously: {:?}", s.state),
            requeue_after_seconds: s.requeue_after_seconds,
            retry_count,
            pod_set_updates: Vec::new(),
        };
    }
}

/// What a ClusterQueue's checks lack: the names it references that do not exist, and those whose
/// controller has not marked them Active. Sorted, as Kueue reports them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CheckProblems {
    pub missing: Vec<String>,
    pub inactive: Vec<String>,
}

impl CheckProblems {
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.inactive.is_empty()
    }
}

/// The known AdmissionChecks: name -> Active.
pub type KnownChecks = BTreeMap<String, bool>;

pub fn known_checks<'a>(checks: impl IntoIterator<Item = &'a AdmissionCheck>) -> KnownChecks {
    checks
        .into_iter()
        .filter(|c| {
            c.metadata.deletion_timestamp.is_none()
                || c.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty())
        })
        .filter_map(|c| Some((c.metadata.name.clone()?, c.is_active())))
        .collect()
}

/// Kueue's `updateWithAdmissionChecks` for the checks quotagate runs (no MultiKueue or
/// ProvisioningRequest rules).
pub fn cluster_queue_problems(cq: &ClusterQueue, known: &KnownChecks) -> CheckProblems {
    let mut p = CheckProblems::default();
    for name in cluster_queue_checks(cq).keys() {
        match known.get(name) {
            None => p.missing.push(name.clone()),
            Some(false) => p.inactive.push(name.clone()),
            Some(true) => {}
        }
    }
    p
}

/// The ClusterQueues of the snapshot whose admission checks are missing or inactive, by name, with
/// what their checks lack (Kueue's cache marks them pending).
pub(super) fn queue_problems(snap: &super::snapshot::Snapshot) -> HashMap<String, CheckProblems> {
    let known = known_checks(snap.admission_checks.iter().map(|c| c.as_ref()));
    snap.cluster_queues
        .iter()
        .filter_map(|cq| {
            let problems = cluster_queue_problems(cq, &known);
            (!problems.is_empty()).then(|| (cq.metadata.name.clone().unwrap_or_default(), problems))
        })
        .collect()
}

/// The built-in checks (`controllerName: quotagate.x-k8s.io/auto-ready`): name -> delay in seconds.
pub fn auto_ready_checks<'a>(checks: impl IntoIterator<Item = &'a AdmissionCheck>) -> BTreeMap<String, i64> {
    checks
        .into_iter()
        .filter(|c| {
            c.spec.controller_name == AUTO_READY_CONTROLLER && c.metadata.deletion_timestamp.is_none()
        })
        .filter_map(|c| {
            let delay = c
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(READY_AFTER_SECONDS_ANNOTATION))
                .and_then(|v| v.parse::<u32>().ok())
                .map_or(0, i64::from);
            Some((c.metadata.name.clone()?, delay))
        })
        .collect()
}

/// The built-in controller's Active condition for one of its AdmissionChecks; `None` when it already
/// says so.
pub fn auto_ready_active(
    ac: &AdmissionCheck,
    now: jiff::Timestamp,
) -> Option<crate::api::kueue::AdmissionCheckStatus> {
    let mut s = ac.status.clone().unwrap_or_default();
    let c = cond(
        condition::ACTIVE,
        true,
        "Active",
        "The admission check is active",
        ac.metadata.generation,
        now,
    );
    set_condition(&mut s.conditions, c).then_some(s)
}

/// The message the built-in controller leaves on a check it passed.
pub const AUTO_READY_MESSAGE: &str = "Passed by quotagate's built-in auto-ready admission check";

/// The built-in controller on one workload: each of its checks still `Pending` on a workload whose
/// quota is reserved turns `Ready` once its delay since the reservation has passed. Returns the
/// new states (if any changed) and, for checks still waiting, when (ms) the next one is due.
pub fn auto_ready(
    wl: &Workload,
    auto: &BTreeMap<String, i64>,
    now: jiff::Timestamp,
) -> (Option<Vec<AdmissionCheckState>>, Option<i64>) {
    let Some(st) = wl.status.as_ref() else {
        return (None, None);
    };
    let Some(reserved_at) = st
        .condition(condition::QUOTA_RESERVED)
        .filter(|c| c.status == "True")
        .map(|c| c.last_transition_time.0)
    else {
        return (None, None);
    };
    if wl.admission().is_none() || st.condition_true(condition::EVICTED) {
        return (None, None);
    }
    let mut states = st.admission_checks.clone();
    let mut changed = false;
    let mut next: Option<i64> = None;
    for s in states.iter_mut().filter(|s| s.state == CheckState::Pending) {
        let Some(delay) = auto.get(&s.name) else { continue };
        let due = reserved_at
            .as_millisecond()
            .saturating_add(delay.saturating_mul(1000));
        if due <= now.as_millisecond() {
            s.state = CheckState::Ready;
            s.message = AUTO_READY_MESSAGE.to_string();
            s.last_transition_time = Some(Time(now));
            changed = true;
        } else {
            next = Some(next.map_or(due, |n| n.min(due)));
        }
    }
    (changed.then_some(states), next)
}
