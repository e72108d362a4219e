//! Kueue's requeueing backoff. Kueue applies it only to workloads evicted for exceeding the
//! PodsReady timeout: `requeueState.count` grows by one and `requeueAt = now + base·2^(n−1)` plus a
//! tiny jitter, capped at the maximum. Preempted or stopped-queue evictions are requeued without it.
//! A workload whose `requeueAt` lies ahead stays out of the queue; once it has passed, the controller
//! writes `Requeued=True/BackoffFinished` and clears `requeueAt` (the count stays).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::{cond, set_condition, status_of};
use crate::api::kueue::constants::{condition, reason};
use crate::api::kueue::{RequeueState, Workload, WorkloadStatus};

/// Kueue's jitter factor (a fraction of the delay added at random).
const JITTER: f64 = 0.0001;

/// `waitForPodsReady.requeuingStrategy` backoff settings (Kueue defaults: 60 s base, 3600 s max).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequeueBackoff {
    pub base_seconds: i64,
    pub max_seconds: i64,
}

impl Default for RequeueBackoff {
    fn default() -> Self {
        Self {
            base_seconds: 60,
            max_seconds: 3600,
        }
    }
}

impl RequeueBackoff {
    /// Delay in milliseconds before the `count`-th requeue; `jitter` in [0, 1) scales the extra.
    pub fn delay_ms(&self, count: i32, jitter: f64) -> i64 {
        let base_ms = self.base_seconds.max(0).saturating_mul(1000);
        let exp = u32::try_from(count.max(1) - 1).unwrap_or(0).min(62);
        let d = base_ms.saturating_mul(1i64.checked_shl(exp).unwrap_or(i64::MAX));
        // f64 is exact enough here: the jitter is at most a ten-thousandth of the delay.
        let extra = (d as f64 * JITTER * jitter.clamp(0.0, 1.0)) as i64;
        d.saturating_add(extra)
            .min(self.max_seconds.max(0).saturating_mul(1000))
    }

    /// The requeue state after one more PodsReady-timeout eviction at `now`.
    pub fn next_state(&self, prev: Option<&RequeueState>, now: jiff::Timestamp, jitter: f64) -> RequeueState {
        let count = prev.and_then(|p| p.count).unwrap_or(0).saturating_add(1);
        let at = now
            .checked_add(jiff::SignedDuration::from_millis(self.delay_ms(count, jitter)))
            .unwrap_or(now);
        RequeueState {
            count: Some(count),
            requeue_at: Some(Time(at)),
        }
    }
}

/// `requeueAt` of a workload in backoff.
pub fn requeue_at(wl: &Workload) -> Option<jiff::Timestamp> {
    wl.status
        .as_ref()?
        .requeue_state
        .as_ref()?
        .requeue_at
        .as_ref()
        .map(|t| t.0)
}

/// Ends an elapsed backoff: Requeued=True/BackoffFinished, `requeueAt` cleared, count kept.
pub fn finished(wl: &Workload, now: jiff::Timestamp) -> Option<WorkloadStatus> {
    requeue_at(wl).filter(|at| *at <= now)?;
    let mut s = status_of(wl);
    if let Some(r) = s.requeue_state.as_mut() {
        r.requeue_at = None;
    }
    set_condition(
        &mut s.conditions,
        cond(
            condition::REQUEUED,
            true,
            reason::BACKOFF_FINISHED,
            "The workload backoff was finished",
            wl.metadata.generation,
            now,
        ),
    );
    Some(s)
}

/// A workload parked with Requeued=False whose cause is gone: the Requeued=True reason and message
/// to write. `cq_stopped` tells whether its ClusterQueue is still stopped. (LocalQueue stops and
/// deactivation are checked before a workload gets this far.) Other reasons stay as they are.
pub fn release(wl: &Workload, cq_stopped: bool) -> Option<(&'static str, &'static str)> {
    let rq = wl.status.as_ref()?.condition(condition::REQUEUED)?;
    if rq.status != crate::api::conditions::FALSE || requeue_at(wl).is_some() {
        return None;
    }
    match rq.reason.as_str() {
        reason::CLUSTER_QUEUE_STOPPED if !cq_stopped => Some((
            reason::CLUSTER_QUEUE_RESTARTED,
            "The ClusterQueue was restarted after being stopped",
        )),
        reason::LOCAL_QUEUE_STOPPED => Some((
            reason::LOCAL_QUEUE_RESTARTED,
            "The LocalQueue was restarted after being stopped",
        )),
        reason::DEACTIVATED => Some((reason::REACTIVATED, "The workload was reactivated")),
        reason::PODS_READY_TIMEOUT | reason::ADMISSION_CHECK => {
            Some((reason::BACKOFF_FINISHED, "The workload backoff was finished"))
        }
        _ => None,
    }
}

/// Requeued=True with `why`.
pub fn requeued(wl: &Workload, why: &str, message: &str, now: jiff::Timestamp) -> Option<WorkloadStatus> {
    let mut s = status_of(wl);
    set_condition(
        &mut s.conditions,
        cond(
            condition::REQUEUED,
            true,
            why,
            message,
            wl.metadata.generation,
            now,
        ),
    )
    .then_some(s)
}
