//! Kueue's waitForPodsReady histograms, registered beside the other metrics.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::wait_histogram;
use super::{CqEvictionLabels, CqPriorityLabels, LqPriorityLabels};

/// Kueue's waitForPodsReady histograms (`pkg/metrics/metrics.go`), with its wait-time buckets:
/// observed when a workload's pods first become ready (the job controller writes PodsReady=True
/// with reason Started) and when a workload whose pods were ready is evicted. Kueue has no
/// LocalQueue variant of the eviction one.
pub struct PodsReadyMetrics {
    pub ready_wait_time_seconds: Family<CqPriorityLabels, Histogram>,
    pub admitted_until_ready_wait_time_seconds: Family<CqPriorityLabels, Histogram>,
    pub local_queue_ready_wait_time_seconds: Family<LqPriorityLabels, Histogram>,
    pub local_queue_admitted_until_ready_wait_time_seconds: Family<LqPriorityLabels, Histogram>,
    pub pods_ready_to_evicted_time_seconds: Family<CqEvictionLabels, Histogram>,
    /// Kueue v0.20's recovery wait (kueue#14766): from pods that were ready losing readiness
    /// (PodsReady=False, `WaitForRecovery`) until ready again.
    pub workload_recovery_wait_time_seconds: Family<CqPriorityLabels, Histogram>,
}

impl PodsReadyMetrics {
    pub(super) fn new() -> Self {
        PodsReadyMetrics {
            ready_wait_time_seconds: Family::new_with_constructor(wait_histogram),
            admitted_until_ready_wait_time_seconds: Family::new_with_constructor(wait_histogram),
            local_queue_ready_wait_time_seconds: Family::new_with_constructor(wait_histogram),
            local_queue_admitted_until_ready_wait_time_seconds: Family::new_with_constructor(wait_histogram),
            pods_ready_to_evicted_time_seconds: Family::new_with_constructor(wait_histogram),
            workload_recovery_wait_time_seconds: Family::new_with_constructor(wait_histogram),
        }
    }

    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "ready_wait_time_seconds",
            "The time between a workload was created or requeued until ready, per 'cluster_queue'",
            self.ready_wait_time_seconds.clone(),
        );
        r.register(
            "admitted_until_ready_wait_time_seconds",
            "The time between a workload was admitted until ready, per 'cluster_queue'",
            self.admitted_until_ready_wait_time_seconds.clone(),
        );
        r.register(
            "local_queue_ready_wait_time_seconds",
            "The time between a workload was created or requeued until ready, per 'local_queue'",
            self.local_queue_ready_wait_time_seconds.clone(),
        );
        r.register(
            "local_queue_admitted_until_ready_wait_time_seconds",
            "The time between a workload was admitted until ready, per 'local_queue'",
            self.local_queue_admitted_until_ready_wait_time_seconds.clone(),
        );
        r.register("pods_ready_to_evicted_time_seconds", "The number of seconds between a workload's pods being ready and eviction, per 'cluster_queue', 'reason' and 'underlying_cause'", self.pods_ready_to_evicted_time_seconds.clone());
        r.register(
            "workload_recovery_wait_time_seconds",
            "The time from a workload's pods losing readiness after having been ready until they are ready again, per 'cluster_queue'",
            self.workload_recovery_wait_time_seconds.clone(),
        );
    }
}
