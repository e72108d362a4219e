//! Workload status transitions as pure functions: each takes the current status and returns the new
//! one, or `None` when nothing would change (so no write is made for a no-op).

use crate::api::kueue::constants::{condition, reason};
use crate::api::kueue::{Admission, PodSetRequest, Workload, WorkloadStatus};
use crate::api::quantity::resource_quantity;

pub use super::workload_status::{EvictedBy, EvictionCause, set_condition};
pub(super) use super::workload_status::{cond, status_of};
pub use crate::admission::slices::is_evicted;

/// Quota reserved in `admission.cluster_queue`, for a ClusterQueue without admission checks: see
/// [`admitted_with_checks`].
pub fn admitted(wl: &Workload, admission: Admission, now: jiff::Timestamp) -> WorkloadStatus {
    admitted_with_checks(wl, admission, &std::collections::BTreeSet::new(), now)
}

/// Quota reserved in `admission.cluster_queue`: admission written, QuotaReserved true, the
/// admission checks its flavors need (`checks`) added as `Pending` when missing, Admitted true only
/// when every check the workload carries is Ready (else `UnsatisfiedAdmissionChecks`), and any
/// earlier eviction marked over. As Kueue's scheduler, a check the queue no longer names is left for
/// the workload controller's sync (`Action::Checks`) to drop.
pub fn admitted_with_checks(
    wl: &Workload,
    admission: Admission,
    checks: &std::collections::BTreeSet<String>,
    now: jiff::Timestamp,
) -> WorkloadStatus {
    let g = wl.metadata.generation;
    let mut s = status_of(wl);
    let mut wanted: std::collections::BTreeSet<String> =
        s.admission_checks.iter().map(|c| c.name.clone()).collect();
    wanted.extend(checks.iter().cloned());
    if let Some(states) = super::checks::synced_states(&s.admission_checks, &wanted, now) {
        s.admission_checks = states;
    }
    let msg = format!("Quota reserved in ClusterQueue {}", admission.cluster_queue);
    s.admission = Some(admission);
    // Kueue keeps `requeueState` across admissions: its count is what `backoffLimitCount` is
    // compared with (only deactivation clears it).
    set_condition(
        &mut s.conditions,
        cond(
            condition::QUOTA_RESERVED,
            true,
            reason::QUOTA_RESERVED,
            &msg,
            g,
            now,
        ),
    );
    super::checks::sync_admitted(&mut s, g, now);
    for t in [condition::EVICTED, condition::PREEMPTED] {
        if s.condition_true(t) {
            set_condition(
                &mut s.conditions,
                cond(
                    t,
                    false,
                    reason::QUOTA_RESERVED,
                    "Previously: evicted, now quota is reserved again",
                    g,
                    now,
                ),
            );
        }
    }
    s
}

/// Still pending, as Kueue's `UnsetQuotaReservationWithCondition` + `PropagateResourceRequests`
/// write it: QuotaReserved=False with the admission core's reason and message, Admitted=False
/// with reason NoReservation, and `status.resourceRequests`. `None` when the workload already
/// says that (Kueue #8095: don't rewrite unchanged pending status).
pub fn pending(wl: &Workload, reason: &str, message: &str, now: jiff::Timestamp) -> Option<WorkloadStatus> {
    // Rewritten only when what it says changes (`same_words`): as Kueue, when the message changes,
    // but the amounts of a message whose amounts move with usage every cycle while the backlog
    // drains are left out, as a write per pending workload per cycle is what held the scheduler
    // back (and woke every watcher of Workloads). Decided on the cached status as it is, before
    // copying anything: every pending workload comes through here every cycle.
    if let Some(st) = &wl.status {
        if st.admission.is_some() {
            return None;
        }
        let said = |t: &str, r: &str, m: &str| {
            st.conditions.iter().any(|c| {
                c.type_ == t
                    && c.status == crate::api::conditions::FALSE
                    && c.reason == r
                    && same_words(r, &c.message, m)
            })
        };
        let deactivation_shown = reason != reason::DEACTIVATED
            || (st.condition_true(condition::EVICTED) && st.requeue_state.is_none());
        if said(condition::QUOTA_RESERVED, reason, message)
            && said(
                condition::ADMITTED,
                reason::NO_RESERVATION,
                NO_RESERVATION_MESSAGE,
            )
            && !st.resource_requests.is_empty()
            && deactivation_shown
        {
            return None;
        }
    }
    let mut s = status_of(wl);
    if s.admission.is_some() {
        return None;
    }
    let g = wl.metadata.generation;
    let mut changed = set_condition(
        &mut s.conditions,
        cond(condition::QUOTA_RESERVED, false, reason, message, g, now),
    );
    changed |= set_condition(
        &mut s.conditions,
        cond(
            condition::ADMITTED,
            false,
            reason::NO_RESERVATION,
            NO_RESERVATION_MESSAGE,
            g,
            now,
        ),
    );
    // Kueue's workload controller evicts a deactivated workload even when it holds no quota, and
    // forgets its backoff (`workload_controller_test.go`, "should write granular conditions and
    // reasons when workload is deactivated", "should clear workload requeue state after
    // deactivation").
    if reason == reason::DEACTIVATED {
        changed |= reset_cluster_nomination(&mut s);
        if !s.condition_true(condition::EVICTED) {
            changed |= set_condition(
                &mut s.conditions,
                cond(condition::EVICTED, true, reason::DEACTIVATED, message, g, now),
            );
        }
        changed |= s.requeue_state.take().is_some();
    }
    let requests = resource_requests(wl);
    if requests != s.resource_requests {
        s.resource_requests = requests;
        changed = true;
    }
    changed.then_some(s)
}

/// A pending status reduced to what matters for rewriting it (see `same_words`): its reason and its
/// message, without the amounts where they move with usage, hashed.
pub fn pending_fingerprint(reason: &str, message: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    reason.hash(&mut h);
    if amounts_move_with_usage(reason) {
        for ch in substance_chars(message) {
            ch.hash(&mut h);
        }
    } else {
        message.hash(&mut h);
    }
    h.finish()
}

/// A pending reason whose message states amounts that move with the queue's usage ("1 more
/// needed"): they change whenever a workload of the queue or its cohort is admitted or finishes.
/// The amounts of the other reasons' messages are the queue's limits ("maximum capacity (3)") or
/// the workload's requests, which change only with the configuration or the workload.
fn amounts_move_with_usage(reason: &str) -> bool {
    reason == reason::WAITING_FOR_QUOTA || reason == reason::WAITING_FOR_PREEMPTED_WORKLOADS
}

/// Whether a pending message `a` says what `b` says, for `reason`. Kueue's scheduler rewrites the
/// condition (and records a `Pending` event) whenever the message changes (`requeueAndUpdate`,
/// `UnsetQuotaReservationWithCondition`): so here, but where the amounts move with usage
/// (`amounts_move_with_usage`), only a change of words counts.
fn same_words(reason: &str, a: &str, b: &str) -> bool {
    if amounts_move_with_usage(reason) {
        same_substance(a, b)
    } else {
        a == b
    }
}

pub(super) const NO_RESERVATION_MESSAGE: &str = "The workload has no reservation";

/// Each podset's total requests (count times a pod's), Kueue's `status.resourceRequests`. A
/// podset whose template cannot be read is left out (admission reports that error).
pub fn resource_requests(wl: &Workload) -> Vec<PodSetRequest> {
    wl.spec
        .pod_sets
        .iter()
        .enumerate()
        .filter_map(|(i, ps)| {
            let name = ps.name().to_string();
            let count = i64::from(ps.count.unwrap_or(1));
            let field = format!("spec.podSets[{i}]");
            let m = crate::queue::convert::podset_from_template(&field, &name, count, &ps.template).ok()?;
            let resources = m
                .requests
                .keys()
                .map(|r| (r.clone(), resource_quantity(r, m.total(r).0).into()))
                .collect();
            Some(PodSetRequest { name, resources })
        })
        .collect()
}

/// The words of a message without its amounts: every token that starts with a digit ("3", "500m",
/// "1.5Gi") reads as `#`. Names keep their letters ("cq-0-1" reads as "cq-#-#").
#[cfg(test)]
pub fn substance(message: &str) -> String {
    substance_chars(message).collect()
}

/// `substance(a) == substance(b)`, without building either.
fn same_substance(a: &str, b: &str) -> bool {
    substance_chars(a).eq(substance_chars(b))
}

fn substance_chars(message: &str) -> impl Iterator<Item = char> + '_ {
    let mut in_amount = false;
    message.chars().filter_map(move |ch| {
        let token = ch.is_ascii_alphanumeric() || ch == '.';
        if in_amount && token {
            return None;
        }
        in_amount = ch.is_ascii_digit();
        Some(if in_amount { '#' } else { ch })
    })
}

/// Kueue's `underlying_cause` label of an eviction of `wl`: the preemption's reason, for a
/// deactivation the reason of the `DeactivationTarget` that caused it (`AdmissionCheck`,
/// `RequeuingLimitExceeded`), for a PodsReady timeout the wait it ran out in (`WaitForStart`,
/// `WaitForScheduling`, `WaitForRecovery`: Kueue's `admittedNotReadyWorkload`); empty otherwise.
pub fn underlying_cause(wl: &Workload, by: EvictedBy) -> String {
    match by.preempted_reason() {
        Some(r) => r.to_string(),
        None if by == EvictedBy::PodsReadyTimeout => super::pods_ready::waiting_in(wl).to_string(),
        None if by == EvictedBy::Deactivated => super::pods_ready::deactivation_target(wl)
            .map(|c| c.reason.clone())
            .unwrap_or_default(),
        None => String::new(),
    }
}

/// Marks the workload evicted (Evicted=True, and Preempted=True for preemptions). The reservation
/// stays until the job has stopped; see [`clear_reservation`]. As Kueue's `prepareForEviction`, its
/// admission checks go back to `Pending`; evicted for a `Retry` check, it is requeued no earlier than
/// the latest `lastTransitionTime + requeueAfterSeconds` of those checks (`requeueState.requeueAt`),
/// and its MultiKueue nomination is reset (see [`reset_cluster_nomination`]). `None` if already
/// marked so.
pub fn evicted(wl: &Workload, cause: &EvictionCause, now: jiff::Timestamp) -> Option<WorkloadStatus> {
    let g = wl.metadata.generation;
    let mut s = status_of(wl);
    if cause.by == EvictedBy::AdmissionCheck
        && let Some(at) = super::checks::max_retry_time(&s.admission_checks).filter(|at| *at > now)
    {
        let rq = s.requeue_state.get_or_insert_with(Default::default);
        if rq.requeue_at.as_ref().is_none_or(|t| t.0 < at) {
            rq.requeue_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at));
        }
    }
    if !s.condition_true(condition::EVICTED) {
        super::checks::reset_on_eviction(&mut s.admission_checks, now);
    }
    let mut changed = reset_cluster_nomination(&mut s);
    changed |= set_condition(
        &mut s.conditions,
        cond(
            condition::EVICTED,
            true,
            cause.by.reason(),
            &cause.message,
            g,
            now,
        ),
    );
    if let Some(r) = cause.by.preempted_reason() {
        changed |= set_condition(
            &mut s.conditions,
            cond(condition::PREEMPTED, true, r, &cause.message, g, now),
        );
    }
    super::pods_ready::reset_pods_scheduled(&mut s, cause.by.reason(), &cause.message, now);
    changed.then_some(s)
}

/// Kueue's `resetClusterNomination`, part of every eviction (`prepareForEviction`): the worker the
/// Workload was admitted on (`clusterName`) and the workers it was offered to
/// (`nominatedClusterNames`) are forgotten, so MultiKueue dispatches its next admission afresh.
/// True when either was set.
pub fn reset_cluster_nomination(s: &mut WorkloadStatus) -> bool {
    let changed = s.cluster_name.is_some() || !s.nominated_cluster_names.is_empty();
    s.cluster_name = None;
    s.nominated_cluster_names.clear();
    changed
}

/// `GrowthPreempted=True` with Kueue's preemption reason: preemption takes only this slice's
/// growth (its job shrinks it back to its floor) instead of evicting it.
pub fn growth_preempted(
    wl: &Workload,
    why: &str,
    message: &str,
    now: jiff::Timestamp,
) -> Option<WorkloadStatus> {
    let g = wl.metadata.generation;
    let mut s = status_of(wl);
    let c = cond(
        crate::admission::slices::GROWTH_PREEMPTED,
        true,
        why,
        message,
        g,
        now,
    );
    set_condition(&mut s.conditions, c).then_some(s)
}

/// Releases the reservation of an evicted workload whose job has stopped: admission cleared,
/// QuotaReserved/Admitted false, and Requeued with the eviction reason.
pub fn clear_reservation(wl: &Workload, now: jiff::Timestamp) -> Option<WorkloadStatus> {
    let g = wl.metadata.generation;
    let mut s = status_of(wl);
    if s.admission.is_none() && !s.condition_true(condition::QUOTA_RESERVED) {
        return None;
    }
    let (why, msg) = s
        .condition(condition::EVICTED)
        .filter(|c| c.status == crate::api::conditions::TRUE)
        .map(|c| (c.reason.clone(), c.message.clone()))
        .unwrap_or_else(|| {
            (
                reason::PENDING.to_string(),
                "The workload has no reservation".to_string(),
            )
        });
    s.admission = None;
    super::pods_ready::reset_pods_scheduled(&mut s, &why, &msg, now);
    // Kueue's workload controller says Deactivated for a workload with spec.active=false.
    let quota_reason = if why == reason::DEACTIVATED {
        reason::DEACTIVATED
    } else {
        reason::PENDING
    };
    set_condition(
        &mut s.conditions,
        cond(condition::QUOTA_RESERVED, false, quota_reason, &msg, g, now),
    );
    set_condition(
        &mut s.conditions,
        cond(
            condition::ADMITTED,
            false,
            reason::NO_RESERVATION,
            "The workload has no reservation",
            g,
            now,
        ),
    );
    // Kueue requeues at once only after a preemption or node failures; after any other eviction
    // Requeued=False parks the workload until its cause is gone (queue restarted, reactivated).
    let at_once = why == reason::PREEMPTED || why == reason::NODE_FAILURES || why == reason::PENDING;
    set_condition(
        &mut s.conditions,
        cond(condition::REQUEUED, at_once, &why, &msg, g, now),
    );
    Some(s)
}

/// Finished=True with `reason` (e.g. `WorkloadSliceReplaced`).
pub fn finished(wl: &Workload, reason: &str, message: &str, now: jiff::Timestamp) -> Option<WorkloadStatus> {
    let mut s = status_of(wl);
    set_condition(
        &mut s.conditions,
        cond(
            condition::FINISHED,
            true,
            reason,
            message,
            wl.metadata.generation,
            now,
        ),
    )
    .then_some(s)
}

/// `spec.active` unset means active.
pub fn is_active(wl: &Workload) -> bool {
    wl.spec.active != Some(false)
}

/// The job that owns the workload (controller owner reference), if any.
pub fn controller_owner(
    wl: &Workload,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    wl.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

#[cfg(test)]
mod substance_tests {
    use super::substance;

    #[test]
    fn amounts_do_not_change_what_a_message_says() {
        let a = "insufficient unused quota for cpu in flavor rf, 3 more needed (requested 5, available 2)";
        let b =
            "insufficient unused quota for cpu in flavor rf, 500m more needed (requested 5, available 4.5)";
        assert_eq!(substance(a), substance(b));
        let other =
            "insufficient unused quota for memory in flavor rf, 3 more needed (requested 5, available 2)";
        assert_ne!(substance(a), substance(other));
        assert_eq!(substance("cq-0-1 holds 1.5Gi"), "cq-#-# holds #");
    }
}

#[cfg(test)]
mod multikueue_nomination_tests {
    use super::*;
    use crate::admission::tests::{admission, t, wl};

    fn evict(w: &Workload, by: EvictedBy) -> Option<WorkloadStatus> {
        let cause = EvictionCause {
            by,
            message: "check rejected".into(),
        };
        evicted(w, &cause, t(10))
    }

    /// Kueue `test/integration/multikueue/dispatcher_test.go`, "Should run a job on worker if
    /// admitted (ManagedBy)": once admitted on worker1 the manager's Workload has `clusterName`
    /// worker1 and no nominations; evicted (its check rejected, so deactivated), "the workload
    /// ClusterName and NominatedClusterNames are reset in the management cluster".
    #[test]
    fn eviction_forgets_the_admitting_worker() {
        let mut w = (*wl("a", "1", "1")).clone();
        let mut s = admitted(&w, admission("cq"), t(0));
        s.cluster_name = Some("worker1".into());
        w.status = Some(s);
        let s = evict(&w, EvictedBy::Deactivated).expect("evicted");
        assert!(s.condition_true(condition::EVICTED));
        assert_eq!(s.cluster_name, None);
        assert!(s.nominated_cluster_names.is_empty());
    }

    /// The same test's first step: while the copies wait on worker1 and worker2 the manager's
    /// Workload nominates both; an eviction then forgets them too (Kueue's `prepareForEviction`
    /// resets both fields whichever is set), and a preemption resets them as a deactivation does.
    #[test]
    fn eviction_forgets_the_nominated_workers() {
        let mut w = (*wl("a", "1", "1")).clone();
        let mut s = admitted(&w, admission("cq"), t(0));
        s.nominated_cluster_names = vec!["worker1".into(), "worker2".into()];
        w.status = Some(s);
        let by = EvictedBy::Preempted(crate::queue::PreemptedReason::InClusterQueue);
        let s = evict(&w, by).expect("evicted");
        assert_eq!(s.cluster_name, None);
        assert!(s.nominated_cluster_names.is_empty());
        // Marked evicted already, the reset alone is still a change worth writing.
        let mut again = w.clone();
        let mut st = s.clone();
        st.cluster_name = Some("worker2".into());
        again.status = Some(st);
        let s = evict(&again, by).expect("the nomination is reset");
        assert_eq!(s.cluster_name, None);
        // Nothing left to reset: no write.
        again.status = Some(s);
        assert_eq!(evict(&again, by), None);
    }

    /// Kueue's workload controller evicts a deactivated Workload that holds no quota through the
    /// same `prepareForEviction`: its nominations go too.
    #[test]
    fn deactivation_without_quota_forgets_the_nominated_workers() {
        let mut w = (*wl("a", "1", "1")).clone();
        w.status = Some(WorkloadStatus {
            nominated_cluster_names: vec!["worker1".into()],
            ..Default::default()
        });
        let s = pending(&w, reason::DEACTIVATED, "deactivated", t(0)).expect("evicted");
        assert!(s.condition_true(condition::EVICTED));
        assert!(s.nominated_cluster_names.is_empty());
    }
}
