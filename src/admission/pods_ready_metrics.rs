//! Where waitForPodsReady's transitions are seen, Kueue's histograms for them are observed
//! (`pkg/controller/jobframework/reconciler.go` for time-to-ready, `pkg/workload/evict` for
//! ready-to-evicted); the arithmetic is in [`super::pods_ready`].

use super::conditions::EvictionCause;
use super::pods_ready;
use crate::admission::metrics::{CqEvictionLabels, Metrics};
use crate::api::kueue::{Workload, WorkloadStatus};

/// The job controller wrote `new` over `old`: on a first readiness, the waits since queued and
/// since admitted, per ClusterQueue and per LocalQueue; on a recovery, the wait since readiness was
/// lost.
pub fn record_ready(m: &Metrics, old: &Workload, new: &WorkloadStatus, now: jiff::Timestamp) {
    if let Some(secs) = pods_ready::recovery_wait(old, new)
        && let Some(a) = old.admission()
    {
        let l = m.cq_priority(&a.cluster_queue, &super::metric_labels::priority_class(old));
        m.pods_ready
            .workload_recovery_wait_time_seconds
            .get_or_create(&l)
            .observe(secs);
    }
    if !pods_ready::first_ready(old, new) {
        return;
    }
    let Some(cq) = old.admission().map(|a| a.cluster_queue.clone()) else {
        return;
    };
    let pc = super::metric_labels::priority_class(old);
    let (queued, admitted) = pods_ready::ready_waits(old, super::metric_labels::queued_since(old), now);
    let p = &m.pods_ready;
    let l = m.cq_priority(&cq, &pc);
    p.ready_wait_time_seconds.get_or_create(&l).observe(queued);
    if let Some(a) = admitted {
        p.admitted_until_ready_wait_time_seconds
            .get_or_create(&l)
            .observe(a);
    }
    if let Some((ns, lq)) = super::queue_status::local_queue_key(old) {
        let l = m.lq_priority(&ns, &lq, &pc);
        p.local_queue_ready_wait_time_seconds
            .get_or_create(&l)
            .observe(queued);
        if let Some(a) = admitted {
            p.local_queue_admitted_until_ready_wait_time_seconds
                .get_or_create(&l)
                .observe(a);
        }
    }
}

/// An eviction written as `status` (Evicted=True) on a workload of `cq`: how long its pods had been
/// ready, when they were.
pub fn record_evicted(m: &Metrics, cq: &str, cause: &EvictionCause, status: &WorkloadStatus) {
    let Some(secs) = pods_ready::ready_to_evicted(status) else {
        return;
    };
    let l = CqEvictionLabels {
        cluster_queue: cq.to_string(),
        reason: cause.by.reason().to_string(),
        underlying_cause: cause.by.preempted_reason().unwrap_or_default().to_string(),
        replica_role: m.role(),
    };
    m.pods_ready
        .pods_ready_to_evicted_time_seconds
        .get_or_create(&l)
        .observe(secs.max(0.0));
}
