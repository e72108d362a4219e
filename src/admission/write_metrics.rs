//! The metrics the Workload writes record, as Kueue's scheduler and workload controller do: a quota
//! reservation, an admission, an eviction (and a preemption).

use super::conditions::{self, EvictionCause};
use super::metric_labels::{priority_class, queued_since};
use super::queue_status;

use crate::admission::metrics::Metrics;
use crate::api::kueue::Workload;

/// Kueue's quota-reservation counter and wait time, per ClusterQueue and LocalQueue.
pub(super) fn reservation(m: &Metrics, wl: &Workload, cq: &str) {
    let pc = priority_class(wl);
    let waited = jiff::Timestamp::now()
        .duration_since(queued_since(wl))
        .as_secs_f64()
        .max(0.0);
    let l = m.cq_priority(cq, &pc);
    m.quota_reserved_workloads_total.get_or_create(&l).inc();
    m.quota_reserved_wait_time_seconds
        .get_or_create(&l)
        .observe(waited);
    if let Some((ns, lq)) = queue_status::local_queue_key(wl) {
        let l = m.lq_priority(&ns, &lq, &pc);
        m.local_queue_quota_reserved_workloads_total
            .get_or_create(&l)
            .inc();
        m.local_queue_quota_reserved_wait_time_seconds
            .get_or_create(&l)
            .observe(waited);
    }
}

/// `wl` (as written) just became Admitted: Kueue's admission counter, its wait since queued, and the
/// admission checks' wait since the reservation (0 without checks: the same write), which it returns.
pub(super) fn admitted(m: &Metrics, wl: &Workload, cq: &str) -> f64 {
    let pc = priority_class(wl);
    let t = jiff::Timestamp::now();
    let waited = t.duration_since(queued_since(wl)).as_secs_f64().max(0.0);
    let reserved_at = wl
        .status
        .as_ref()
        .and_then(|s| s.condition(crate::api::kueue::constants::condition::QUOTA_RESERVED))
        .map_or(t, |c| c.last_transition_time.0);
    let checks_wait = t.duration_since(reserved_at).as_secs_f64().max(0.0);
    let l = m.cq_priority(cq, &pc);
    m.admitted_workloads_total.get_or_create(&l).inc();
    m.admission_wait_time_seconds.get_or_create(&l).observe(waited);
    m.admission_checks_wait_time_seconds
        .get_or_create(&l)
        .observe(checks_wait);
    if let Some((ns, lq)) = queue_status::local_queue_key(wl) {
        let l = m.lq_priority(&ns, &lq, &pc);
        m.local_queue_admitted_workloads_total.get_or_create(&l).inc();
        m.local_queue_admission_wait_time_seconds
            .get_or_create(&l)
            .observe(waited);
        m.local_queue_admission_checks_wait_time_seconds
            .get_or_create(&l)
            .observe(checks_wait);
    }
    checks_wait
}

/// `wl` is evicted for `cause`: Kueue's eviction counters (the first eviction once more) and, for a
/// preemption, the preemption counter.
pub(super) fn eviction(m: &Metrics, wl: &Workload, cause: &EvictionCause) {
    let cq = wl
        .admission()
        .map(|a| a.cluster_queue.clone())
        .unwrap_or_default();
    let priority_class = priority_class(wl);
    let underlying_cause = conditions::underlying_cause(wl, cause.by);
    let labels = crate::admission::metrics::EvictedLabels {
        cluster_queue: cq.clone(),
        reason: cause.by.reason().to_string(),
        underlying_cause: underlying_cause.clone(),
        priority_class: priority_class.clone(),
        replica_role: m.role(),
    };
    m.evicted_workloads_total.get_or_create(&labels).inc();
    // Kueue counts a workload's first eviction once; one never evicted before has no Evicted
    // condition at all.
    if wl.status.as_ref().is_none_or(|s| {
        s.condition(crate::api::kueue::constants::condition::EVICTED)
            .is_none()
    }) {
        m.evicted_workloads_once_total.get_or_create(&labels).inc();
    }
    if let Some((ns, lq)) = queue_status::local_queue_key(wl) {
        m.local_queue_evicted_workloads_total
            .get_or_create(&crate::admission::metrics::LqEvictedLabels {
                name: lq,
                namespace: ns,
                reason: cause.by.reason().to_string(),
                underlying_cause,
                priority_class,
                replica_role: m.role(),
            })
            .inc();
    }
    if let Some(pr) = cause.by.preempted_reason() {
        m.preempted_workloads_total
            .get_or_create(&crate::admission::metrics::PreemptedLabels {
                preempting_cluster_queue: cq,
                reason: pr.to_string(),
                replica_role: m.role(),
            })
            .inc();
    }
}
