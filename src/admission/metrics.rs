//! Prometheus metrics named as Kueue names them (`kueue_` prefix, the same label names), so existing
//! dashboards and alerts keep working. Every series carries `replica_role` (leader|follower|standalone).

use std::borrow::Cow;
use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder, text::encode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

mod labels;
mod pods_ready;
#[cfg(test)]
mod tests;

pub use labels::*;
pub use pods_ready::PodsReadyMetrics;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Leader,
    Follower,
    Standalone,
}

impl EncodeLabelValue for Role {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        encoder.write_str(match self {
            Role::Leader => "leader",
            Role::Follower => "follower",
            Role::Standalone => "standalone",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BuildInfoLabels {
    git_version: String,
    git_commit: String,
    build_date: String,
    go_version: String,
    compiler: String,
    platform: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// A counter served under its Kueue name, `_total` included, with no type (`unknown`). Kueue has both
/// a gauge `finished_workloads` and a counter `finished_workloads_total`; OpenMetrics names a counter
/// family without `_total`, so as a typed counter both families would share one name, and scrapers
/// refuse a second `# TYPE` line for a name. Untyped, the series keep Kueue's names and `rate()`
/// still works on them.
#[derive(Clone, Debug, Default)]
pub struct TotalCounter(Counter);

impl TotalCounter {
    pub fn inc(&self) {
        self.0.inc();
    }

    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

impl prometheus_client::metrics::TypedMetric for TotalCounter {}

impl prometheus_client::encoding::EncodeMetric for TotalCounter {
    fn encode(&self, mut encoder: prometheus_client::encoding::MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.0.get())
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Unknown
    }
}

/// A gauge family whose series are all rewritten at once from the current state, so a deleted
/// ClusterQueue's or LocalQueue's series go away (Kueue clears them on delete).
pub struct GaugeSet<L, G> {
    pub family: Family<L, G>,
    seen: Mutex<HashSet<L>>,
}

impl<
    L: Clone + Eq + Hash + EncodeLabelSet + std::fmt::Debug,
    G: Default + prometheus_client::metrics::TypedMetric,
> GaugeSet<L, G>
{
    fn new() -> Self {
        GaugeSet {
            family: Family::default(),
            seen: Mutex::new(HashSet::new()),
        }
    }

    /// Sets every series in `values` and removes the ones set last time but not now.
    pub fn replace<V>(&self, values: Vec<(L, V)>, set: impl Fn(&G, V)) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let now: HashSet<L> = values.iter().map(|(l, _)| l.clone()).collect();
        for old in seen.difference(&now) {
            self.family.remove(old);
        }
        for (l, v) in values {
            set(&self.family.get_or_create(&l), v);
        }
        *seen = now;
    }
}

/// Every Kueue metric quotagate exports.
pub struct Metrics {
    registry: Registry,
    role: AtomicU8,
    pub admission_attempts_total: Family<ResultLabels, Counter>,
    pub admission_attempt_duration_seconds: Family<ResultLabels, Histogram>,
    pub pending_workloads: GaugeSet<CqStatusLabels, Gauge>,
    pub finished_workloads: GaugeSet<CqLabels, Gauge>,
    pub quota_reserved_workloads_total: Family<CqPriorityLabels, Counter>,
    pub quota_reserved_wait_time_seconds: Family<CqPriorityLabels, Histogram>,
    pub admitted_workloads_total: Family<CqPriorityLabels, Counter>,
    pub admission_wait_time_seconds: Family<CqPriorityLabels, Histogram>,
    pub admission_checks_wait_time_seconds: Family<CqPriorityLabels, Histogram>,
    pub evicted_workloads_total: Family<EvictedLabels, Counter>,
    pub evicted_workloads_once_total: Family<EvictedLabels, Counter>,
    pub preempted_workloads_total: Family<PreemptedLabels, Counter>,
    pub preemption_target_recomputations_total: Family<CqResultLabels, Counter>,
    pub replaced_workload_slices_total: Family<CqLabels, Counter>,
    pub reserving_active_workloads: GaugeSet<CqLabels, Gauge>,
    pub admitted_active_workloads: GaugeSet<CqLabels, Gauge>,
    pub cluster_queue_status: GaugeSet<CqStatusLabels, Gauge>,
    pub cluster_queue_resource_reservation: GaugeSet<CqResourceLabels, FloatGauge>,
    pub cluster_queue_resource_usage: GaugeSet<CqResourceLabels, FloatGauge>,
    pub cluster_queue_nominal_quota: GaugeSet<CqResourceLabels, FloatGauge>,
    pub cluster_queue_borrowing_limit: GaugeSet<CqResourceLabels, FloatGauge>,
    pub cluster_queue_lending_limit: GaugeSet<CqResourceLabels, FloatGauge>,
    pub local_queue_pending_workloads: GaugeSet<LqStatusLabels, Gauge>,
    pub local_queue_reserving_active_workloads: GaugeSet<LqLabels, Gauge>,
    pub local_queue_admitted_active_workloads: GaugeSet<LqLabels, Gauge>,
    pub local_queue_finished_workloads: GaugeSet<LqLabels, Gauge>,
    pub local_queue_status: GaugeSet<LqActiveLabels, Gauge>,
    pub local_queue_resource_reservation: GaugeSet<LqResourceLabels, FloatGauge>,
    pub local_queue_resource_usage: GaugeSet<LqResourceLabels, FloatGauge>,
    pub local_queue_quota_reserved_workloads_total: Family<LqPriorityLabels, Counter>,
    pub local_queue_admitted_workloads_total: Family<LqPriorityLabels, Counter>,
    pub local_queue_admission_wait_time_seconds: Family<LqPriorityLabels, Histogram>,
    pub local_queue_evicted_workloads_total: Family<LqEvictedLabels, Counter>,
    pub local_queue_quota_reserved_wait_time_seconds: Family<LqPriorityLabels, Histogram>,
    pub local_queue_admission_checks_wait_time_seconds: Family<LqPriorityLabels, Histogram>,
    pub finished_workloads_total: Family<CqPriorityLabels, TotalCounter>,
    pub local_queue_finished_workloads_total: Family<LqPriorityLabels, TotalCounter>,
    pub execution_time_seconds: Family<CqPriorityLabels, Histogram>,
    pub local_queue_execution_time_seconds: Family<LqPriorityLabels, Histogram>,
    pub admission_cycle_preemption_skips: GaugeSet<CqLabels, Gauge>,
    pub cluster_queue_resource_pending: GaugeSet<CqPendingResourceLabels, FloatGauge>,
    pub cluster_queue_info: GaugeSet<CqInfoLabels, Gauge>,
    pub cohort_info: GaugeSet<CohortInfoLabels, Gauge>,
    pub cohort_subtree_quota: GaugeSet<CohortResourceLabels, FloatGauge>,
    pub cohort_subtree_resource_reservations: GaugeSet<CohortResourceLabels, FloatGauge>,
    pub cohort_subtree_admitted_active_workloads: GaugeSet<CohortLabels, Gauge>,
    pub cohort_subtree_admitted_workloads_total: Family<CohortPriorityLabels, Counter>,
    /// Fair sharing only: each node's weighted share (NaN for an infinite one, as Kueue).
    pub cluster_queue_weighted_share: GaugeSet<CqCohortLabels, FloatGauge>,
    pub cohort_weighted_share: GaugeSet<CohortLabels, FloatGauge>,
    /// waitForPodsReady's histograms.
    pub pods_ready: PodsReadyMetrics,
    pub local_queue_admission_fair_sharing_usage: GaugeSet<LqCqLabels, FloatGauge>,
    /// Admissions and finishes already counted (see `queue_metrics::Transitions`).
    pub(crate) counted: Mutex<HashSet<String>>,
    /// When this process started counting, truncated to the second as condition times are: a
    /// transition before it was counted by whoever ran then.
    pub(crate) counting_since: jiff::Timestamp,
}

fn duration_histogram() -> Histogram {
    // An admission attempt (one scheduling cycle) takes milliseconds: start at 1 ms, doubling; 16
    // buckets reach about 33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

fn wait_histogram() -> Histogram {
    // Kueue's generateExponentialBuckets(14): 1, then 2.5 doubling (2.5 ... 10240 s).
    Histogram::new(std::iter::once(1.0).chain(exponential_buckets(2.5, 2.0, 13)))
}

fn execution_histogram() -> Histogram {
    // Kueue's generateExponentialBuckets(16): 1, then 2.5 doubling up to about 11 hours.
    Histogram::new(std::iter::once(1.0).chain(exponential_buckets(2.5, 2.0, 15)))
}

/// Kueue's `build_info` gauge: 1 for the running version (quotagate's, built with rustc).
fn build_info() -> Family<BuildInfoLabels, Gauge> {
    let build: Family<BuildInfoLabels, Gauge> = Family::default();
    build
        .get_or_create(&BuildInfoLabels {
            git_version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: String::new(),
            build_date: String::new(),
            go_version: String::new(),
            compiler: "rustc".to_string(),
            platform: format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        })
        .set(1);
    build
}

impl Metrics {
    pub fn new() -> Self {
        let mut r = Registry::with_prefix("kueue");
        let m = Metrics::unregistered();
        m.register(&mut r);
        r.register(
            "build_info",
            "Kueue build information: 1 for the running version (quotagate's, built with rustc)",
            build_info(),
        );
        Metrics { registry: r, ..m }
    }

    /// Every family empty and not yet registered, counting from now.
    fn unregistered() -> Self {
        Metrics {
            role: AtomicU8::new(Role::Standalone as u8),
            admission_attempts_total: Family::default(),
            admission_attempt_duration_seconds: Family::new_with_constructor(duration_histogram),
            pending_workloads: GaugeSet::new(),
            finished_workloads: GaugeSet::new(),
            quota_reserved_workloads_total: Family::default(),
            quota_reserved_wait_time_seconds: Family::new_with_constructor(wait_histogram),
            admitted_workloads_total: Family::default(),
            admission_wait_time_seconds: Family::new_with_constructor(wait_histogram),
            admission_checks_wait_time_seconds: Family::new_with_constructor(wait_histogram),
            evicted_workloads_total: Family::default(),
            evicted_workloads_once_total: Family::default(),
            preempted_workloads_total: Family::default(),
            preemption_target_recomputations_total: Family::default(),
            replaced_workload_slices_total: Family::default(),
            reserving_active_workloads: GaugeSet::new(),
            admitted_active_workloads: GaugeSet::new(),
            cluster_queue_status: GaugeSet::new(),
            cluster_queue_resource_reservation: GaugeSet::new(),
            cluster_queue_resource_usage: GaugeSet::new(),
            cluster_queue_nominal_quota: GaugeSet::new(),
            cluster_queue_borrowing_limit: GaugeSet::new(),
            cluster_queue_lending_limit: GaugeSet::new(),
            local_queue_pending_workloads: GaugeSet::new(),
            local_queue_reserving_active_workloads: GaugeSet::new(),
            local_queue_admitted_active_workloads: GaugeSet::new(),
            local_queue_finished_workloads: GaugeSet::new(),
            local_queue_status: GaugeSet::new(),
            local_queue_resource_reservation: GaugeSet::new(),
            local_queue_resource_usage: GaugeSet::new(),
            local_queue_quota_reserved_workloads_total: Family::default(),
            local_queue_admitted_workloads_total: Family::default(),
            local_queue_admission_wait_time_seconds: Family::new_with_constructor(wait_histogram),
            local_queue_evicted_workloads_total: Family::default(),
            local_queue_quota_reserved_wait_time_seconds: Family::new_with_constructor(wait_histogram),
            local_queue_admission_checks_wait_time_seconds: Family::new_with_constructor(wait_histogram),
            finished_workloads_total: Family::default(),
            local_queue_finished_workloads_total: Family::default(),
            execution_time_seconds: Family::new_with_constructor(execution_histogram),
            local_queue_execution_time_seconds: Family::new_with_constructor(execution_histogram),
            admission_cycle_preemption_skips: GaugeSet::new(),
            cluster_queue_resource_pending: GaugeSet::new(),
            cluster_queue_info: GaugeSet::new(),
            cohort_info: GaugeSet::new(),
            cohort_subtree_quota: GaugeSet::new(),
            cohort_subtree_resource_reservations: GaugeSet::new(),
            cohort_subtree_admitted_active_workloads: GaugeSet::new(),
            cohort_subtree_admitted_workloads_total: Family::default(),
            cluster_queue_weighted_share: GaugeSet::new(),
            cohort_weighted_share: GaugeSet::new(),
            pods_ready: PodsReadyMetrics::new(),
            local_queue_admission_fair_sharing_usage: GaugeSet::new(),
            counted: Mutex::new(HashSet::new()),
            counting_since: jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())
                .unwrap_or_default(),
            registry: Registry::default(),
        }
    }

    /// The registration table: each family under Kueue's name and help text, in the order served.
    fn register(&self, r: &mut Registry) {
        // Counters are registered without `_total`: the encoder appends it.
        r.register(
            "admission_attempts",
            "The total number of attempts to admit workloads, by result (success, inadmissible)",
            self.admission_attempts_total.clone(),
        );
        r.register(
            "admission_attempt_duration_seconds",
            "The latency of an admission attempt, by result",
            self.admission_attempt_duration_seconds.clone(),
        );
        r.register(
            "pending_workloads",
            "The number of pending workloads, per cluster_queue and status (active, inadmissible)",
            self.pending_workloads.family.clone(),
        );
        r.register(
            "finished_workloads",
            "The number of finished workloads, per cluster_queue",
            self.finished_workloads.family.clone(),
        );
        r.register(
            "quota_reserved_workloads",
            "The total number of quota reserved workloads per cluster_queue",
            self.quota_reserved_workloads_total.clone(),
        );
        r.register("quota_reserved_wait_time_seconds", "The time between a workload was created or requeued until it got quota reservation, per cluster_queue", self.quota_reserved_wait_time_seconds.clone());
        r.register(
            "admitted_workloads",
            "The total number of admitted workloads per cluster_queue",
            self.admitted_workloads_total.clone(),
        );
        r.register(
            "admission_wait_time_seconds",
            "The time between a workload was created or requeued until admission, per cluster_queue",
            self.admission_wait_time_seconds.clone(),
        );
        r.register(
            "admission_checks_wait_time_seconds",
            "The time from when a workload got the quota reservation until admission, per cluster_queue",
            self.admission_checks_wait_time_seconds.clone(),
        );
        r.register(
            "evicted_workloads",
            "The number of evicted workloads per cluster_queue, reason and underlying_cause",
            self.evicted_workloads_total.clone(),
        );
        r.register(
            "evicted_workloads_once",
            "The number of unique workload evictions per cluster_queue, reason and underlying_cause",
            self.evicted_workloads_once_total.clone(),
        );
        r.register(
            "preempted_workloads",
            "The number of preempted workloads per preempting_cluster_queue and reason",
            self.preempted_workloads_total.clone(),
        );
        r.register(
            "preemption_target_recomputations",
            "The total number of preemption target recomputations triggered when a workload's preemption targets overlap with targets selected by another workload in the same scheduling cycle. The label 'result' can have the following values: 'new_targets' means the recomputation resolved the overlap by selecting non-overlapping targets; 'deferred_fit' means the workload will fit only after earlier preemptions in the cycle complete; 'skipped' means recomputation produced neither a deferred fit nor a fit with non-overlapping targets, including cases where overlap is removed but the workload still fails the fit check",
            self.preemption_target_recomputations_total.clone(),
        );
        r.register(
            "replaced_workload_slices",
            "The number of replaced workload slices per cluster_queue",
            self.replaced_workload_slices_total.clone(),
        );
        r.register(
            "reserving_active_workloads",
            "The number of Workloads that are reserving quota, per cluster_queue",
            self.reserving_active_workloads.family.clone(),
        );
        r.register(
            "admitted_active_workloads",
            "The number of admitted Workloads that are active, per cluster_queue",
            self.admitted_active_workloads.family.clone(),
        );
        r.register(
            "cluster_queue_status",
            "Reports cluster_queue with its status (pending, active or terminating); 1 for one status",
            self.cluster_queue_status.family.clone(),
        );
        r.register(
            "cluster_queue_resource_reservation",
            "Reports the cluster_queue's total resource reservation within all the flavors",
            self.cluster_queue_resource_reservation.family.clone(),
        );
        r.register(
            "cluster_queue_resource_usage",
            "Reports the cluster_queue's total resource usage within all the flavors",
            self.cluster_queue_resource_usage.family.clone(),
        );
        r.register(
            "cluster_queue_nominal_quota",
            "Reports the cluster_queue's resource nominal quota within all the flavors",
            self.cluster_queue_nominal_quota.family.clone(),
        );
        r.register(
            "cluster_queue_borrowing_limit",
            "Reports the cluster_queue's resource borrowing limit within all the flavors",
            self.cluster_queue_borrowing_limit.family.clone(),
        );
        r.register(
            "cluster_queue_lending_limit",
            "Reports the cluster_queue's resource lending limit within all the flavors",
            self.cluster_queue_lending_limit.family.clone(),
        );
        r.register(
            "local_queue_pending_workloads",
            "The number of pending workloads, per local_queue and status",
            self.local_queue_pending_workloads.family.clone(),
        );
        r.register(
            "local_queue_reserving_active_workloads",
            "The number of Workloads that are reserving quota, per localQueue",
            self.local_queue_reserving_active_workloads.family.clone(),
        );
        r.register(
            "local_queue_admitted_active_workloads",
            "The number of admitted Workloads that are active, per localQueue",
            self.local_queue_admitted_active_workloads.family.clone(),
        );
        r.register(
            "local_queue_finished_workloads",
            "The number of finished workloads, per localQueue",
            self.local_queue_finished_workloads.family.clone(),
        );
        r.register(
            "local_queue_status",
            "Reports localQueue with its active status (True, False or Unknown); 1 for one status",
            self.local_queue_status.family.clone(),
        );
        r.register(
            "local_queue_resource_reservation",
            "Reports the localQueue's total resource reservation within all the flavors",
            self.local_queue_resource_reservation.family.clone(),
        );
        r.register(
            "local_queue_resource_usage",
            "Reports the localQueue's total resource usage within all the flavors",
            self.local_queue_resource_usage.family.clone(),
        );
        r.register(
            "local_queue_quota_reserved_workloads",
            "The total number of quota reserved workloads per local_queue",
            self.local_queue_quota_reserved_workloads_total.clone(),
        );
        r.register(
            "local_queue_admitted_workloads",
            "The total number of admitted workloads per local_queue",
            self.local_queue_admitted_workloads_total.clone(),
        );
        r.register(
            "local_queue_admission_wait_time_seconds",
            "The time between a workload was created or requeued until admission, per local_queue",
            self.local_queue_admission_wait_time_seconds.clone(),
        );
        r.register(
            "local_queue_evicted_workloads",
            "The number of evicted workloads per local_queue",
            self.local_queue_evicted_workloads_total.clone(),
        );
        r.register("local_queue_quota_reserved_wait_time_seconds", "The time between a workload was created or requeued until it got quota reservation, per local_queue", self.local_queue_quota_reserved_wait_time_seconds.clone());
        r.register(
            "local_queue_admission_checks_wait_time_seconds",
            "The time from when a workload got the quota reservation until admission, per local_queue",
            self.local_queue_admission_checks_wait_time_seconds.clone(),
        );
        r.register("finished_workloads_total", "The total number of finished workloads per cluster_queue (a counter, served untyped: see TotalCounter)", self.finished_workloads_total.clone());
        r.register("local_queue_finished_workloads_total", "The total number of finished workloads per local_queue (a counter, served untyped: see TotalCounter)", self.local_queue_finished_workloads_total.clone());
        r.register("execution_time_seconds", "The total execution time of a finished admitted workload (from admission to completion), per cluster_queue", self.execution_time_seconds.clone());
        r.register("local_queue_execution_time_seconds", "The total execution time of a finished admitted workload (from admission to completion), per local_queue", self.local_queue_execution_time_seconds.clone());
        r.register("admission_cycle_preemption_skips", "The number of Workloads in the ClusterQueue that got preemption candidates but were skipped because another ClusterQueue's preemptor claimed the same victims in the same cycle", self.admission_cycle_preemption_skips.family.clone());
        r.register(
            "cluster_queue_resource_pending",
            "Reports the cluster_queue's total pending resource requests (not yet assigned to flavors)",
            self.cluster_queue_resource_pending.family.clone(),
        );
        r.register(
            "cluster_queue_info",
            "Reports ClusterQueue hierarchy information; 1, joined on its labels",
            self.cluster_queue_info.family.clone(),
        );
        r.register(
            "cohort_info",
            "Reports Cohort hierarchy information; 1, joined on its labels",
            self.cohort_info.family.clone(),
        );
        r.register("cohort_subtree_quota", "Reports the cohort's nominal quota aggregated within the cohort's subtree, per flavor and resource", self.cohort_subtree_quota.family.clone());
        r.register("cohort_subtree_resource_reservations", "Reports the cohort's resource reservations aggregated within the cohort's subtree, per flavor and resource", self.cohort_subtree_resource_reservations.family.clone());
        r.register(
            "cohort_subtree_admitted_active_workloads",
            "The number of admitted Workloads that are active, per cohort's subtree",
            self.cohort_subtree_admitted_active_workloads.family.clone(),
        );
        r.register(
            "cohort_subtree_admitted_workloads",
            "The total number of admitted workloads per cohort's subtree",
            self.cohort_subtree_admitted_workloads_total.clone(),
        );
        r.register("cluster_queue_weighted_share", "Reports the cluster_queue's weighted share (fair sharing): the highest ratio, among resources, of usage above nominal to what the cohort can lend, divided by the weight; NaN for an infinite share", self.cluster_queue_weighted_share.family.clone());
        r.register(
            "cohort_weighted_share",
            "Reports the cohort's weighted share (fair sharing), as cluster_queue_weighted_share",
            self.cohort_weighted_share.family.clone(),
        );
        self.pods_ready.register(r);
        r.register("local_queue_admission_fair_sharing_usage", "Reports a value representing the LocalQueue's Admission Fair Sharing usage, calculated from the resource-weighted sum of consumed resources and pending admission penalties, divided by the LocalQueue's fair sharing weight", self.local_queue_admission_fair_sharing_usage.family.clone());
    }

    pub fn set_role(&self, role: Role) {
        self.role.store(role as u8, Ordering::Relaxed);
    }

    pub fn role(&self) -> Role {
        match self.role.load(Ordering::Relaxed) {
            x if x == Role::Leader as u8 => Role::Leader,
            x if x == Role::Follower as u8 => Role::Follower,
            _ => Role::Standalone,
        }
    }

    pub fn cq(&self, cluster_queue: &str) -> CqLabels {
        CqLabels {
            cluster_queue: cluster_queue.to_string(),
            replica_role: self.role(),
        }
    }

    pub fn cq_priority(&self, cluster_queue: &str, priority_class: &str) -> CqPriorityLabels {
        CqPriorityLabels {
            cluster_queue: cluster_queue.to_string(),
            priority_class: priority_class.to_string(),
            replica_role: self.role(),
        }
    }

    pub fn lq(&self, namespace: &str, name: &str) -> LqLabels {
        LqLabels {
            name: name.to_string(),
            namespace: namespace.to_string(),
            replica_role: self.role(),
        }
    }

    pub fn lq_priority(&self, namespace: &str, name: &str, priority_class: &str) -> LqPriorityLabels {
        LqPriorityLabels {
            name: name.to_string(),
            namespace: namespace.to_string(),
            priority_class: priority_class.to_string(),
            replica_role: self.role(),
        }
    }

    pub fn result(&self, result: &'static str) -> ResultLabels {
        ResultLabels {
            result: Cow::Borrowed(result),
            replica_role: self.role(),
        }
    }

    /// The text exposition format served at `/metrics`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
