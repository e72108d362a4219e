//! Prometheus metrics named as Kueue names them (`kueue_` prefix, the same label names), so existing
//! dashboards and alerts keep working. Every series carries `replica_role` (leader|follower|standalone).

use std::borrow::Cow;
use std::sync::atomic::{AtomicU8, Ordering};

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder, text::encode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

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
pub struct ResultLabels {
    pub result: Cow<'static, str>,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CqLabels {
    pub cluster_queue: String,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CqStatusLabels {
    pub cluster_queue: String,
    pub status: Cow<'static, str>,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CqReasonLabels {
    pub cluster_queue: String,
    pub reason: String,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PreemptedLabels {
    pub preempting_cluster_queue: String,
    pub reason: String,
    pub replica_role: Role,
}

/// Every metric quotagate exports.
pub struct Metrics {
    registry: Registry,
    role: AtomicU8,
    pub admission_attempts_total: Family<ResultLabels, Counter>,
    pub admission_attempt_duration_seconds: Family<ResultLabels, Histogram>,
    pub pending_workloads: Family<CqStatusLabels, Gauge>,
    pub quota_reserved_workloads_total: Family<CqLabels, Counter>,
    pub admitted_workloads_total: Family<CqLabels, Counter>,
    pub evicted_workloads_total: Family<CqReasonLabels, Counter>,
    pub preempted_workloads_total: Family<PreemptedLabels, Counter>,
    pub replaced_workload_slices_total: Family<CqLabels, Counter>,
    pub reserving_active_workloads: Family<CqLabels, Gauge>,
    pub admitted_active_workloads: Family<CqLabels, Gauge>,
    pub cluster_queue_status: Family<CqStatusLabels, Gauge>,
}

fn duration_histogram() -> Histogram {
    // Kueue's buckets: start at 1 ms... doubling; 16 of them reach about 33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("kueue");
        let m = Metrics {
            role: AtomicU8::new(Role::Standalone as u8),
            admission_attempts_total: Family::default(),
            admission_attempt_duration_seconds: Family::new_with_constructor(duration_histogram),
            pending_workloads: Family::default(),
            quota_reserved_workloads_total: Family::default(),
            admitted_workloads_total: Family::default(),
            evicted_workloads_total: Family::default(),
            preempted_workloads_total: Family::default(),
            replaced_workload_slices_total: Family::default(),
            reserving_active_workloads: Family::default(),
            admitted_active_workloads: Family::default(),
            cluster_queue_status: Family::default(),
            registry: Registry::default(),
        };
        registry.register("admission_attempts", "Admission attempts by result (success, inadmissible)", m.admission_attempts_total.clone());
        registry.register(
            "admission_attempt_duration_seconds",
            "Latency of an admission attempt (one scheduling cycle) by result",
            m.admission_attempt_duration_seconds.clone(),
        );
        registry.register("pending_workloads", "Pending workloads per ClusterQueue and status (active, inadmissible)", m.pending_workloads.clone());
        registry.register("quota_reserved_workloads", "Workloads that got quota reserved, per ClusterQueue", m.quota_reserved_workloads_total.clone());
        registry.register("admitted_workloads", "Admitted workloads per ClusterQueue", m.admitted_workloads_total.clone());
        registry.register("evicted_workloads", "Evicted workloads per ClusterQueue and reason", m.evicted_workloads_total.clone());
        registry.register("preempted_workloads", "Preempted workloads per preempting ClusterQueue and reason", m.preempted_workloads_total.clone());
        registry.register("replaced_workload_slices", "Workload slices replaced by a newer slice", m.replaced_workload_slices_total.clone());
        registry.register("reserving_active_workloads", "Workloads holding a quota reservation", m.reserving_active_workloads.clone());
        registry.register("admitted_active_workloads", "Admitted workloads that are active", m.admitted_active_workloads.clone());
        registry.register("cluster_queue_status", "ClusterQueue status (pending, active, terminated)", m.cluster_queue_status.clone());
        Metrics { registry, ..m }
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
        CqLabels { cluster_queue: cluster_queue.to_string(), replica_role: self.role() }
    }

    pub fn result(&self, result: &'static str) -> ResultLabels {
        ResultLabels { result: Cow::Borrowed(result), replica_role: self.role() }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels_match_kueue() {
        let m = Metrics::new();
        m.set_role(Role::Leader);
        m.admission_attempts_total.get_or_create(&m.result("success")).inc();
        m.admitted_workloads_total.get_or_create(&m.cq("team-a")).inc();
        m.admission_attempt_duration_seconds.get_or_create(&m.result("success")).observe(0.002);
        let text = m.render();
        assert!(text.contains("kueue_admission_attempts_total{result=\"success\",replica_role=\"leader\"} 1"), "{text}");
        assert!(text.contains("kueue_admitted_workloads_total{cluster_queue=\"team-a\",replica_role=\"leader\"} 1"), "{text}");
        assert!(text.contains("kueue_admission_attempt_duration_seconds_bucket{"), "{text}");
    }
}
