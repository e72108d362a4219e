//! The label sets of Kueue's metrics, field for field as Kueue names them; every one carries
//! `replica_role`.

use std::borrow::Cow;

use prometheus_client::encoding::EncodeLabelSet;

use super::Role;

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

/// Per ClusterQueue and outcome (Kueue's `preemption_target_recomputations_total`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CqResultLabels {
    pub cluster_queue: String,
    pub result: Cow<'static, str>,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CqStatusLabels {
    pub cluster_queue: String,
    pub status: Cow<'static, str>,
    pub replica_role: Role,
}

/// Per ClusterQueue and the workload's priority class (`""` without one), as Kueue's counters and
/// wait-time histograms since it added `priority_class`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CqPriorityLabels {
    pub cluster_queue: String,
    pub priority_class: String,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct EvictedLabels {
    pub cluster_queue: String,
    pub reason: String,
    /// The preemption reason for `Preempted`, else empty (Kueue's scheduling stats' cause).
    pub underlying_cause: String,
    pub priority_class: String,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PreemptedLabels {
    pub preempting_cluster_queue: String,
    pub reason: String,
    pub replica_role: Role,
}

/// Kueue's optional ClusterQueue resource gauges (`metrics.enableClusterQueueResources`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CqResourceLabels {
    pub cohort: String,
    pub cluster_queue: String,
    pub flavor: String,
    pub resource: String,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LqLabels {
    pub name: String,
    pub namespace: String,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LqStatusLabels {
    pub name: String,
    pub namespace: String,
    pub status: Cow<'static, str>,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LqActiveLabels {
    pub name: String,
    pub namespace: String,
    /// True, False or Unknown: the LocalQueue's Active condition.
    pub active: Cow<'static, str>,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LqPriorityLabels {
    pub name: String,
    pub namespace: String,
    pub priority_class: String,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LqEvictedLabels {
    pub name: String,
    pub namespace: String,
    pub reason: String,
    pub underlying_cause: String,
    pub priority_class: String,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LqResourceLabels {
    pub name: String,
    pub namespace: String,
    pub flavor: String,
    pub resource: String,
    pub replica_role: Role,
}

/// Kueue's `cluster_queue_resource_pending`: pending requests per ClusterQueue and resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CqPendingResourceLabels {
    pub cluster_queue: String,
    pub resource: String,
    pub replica_role: Role,
}

/// Kueue's `cluster_queue_info`: where a ClusterQueue sits in the cohort tree (empty: no cohort).
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CqInfoLabels {
    pub cluster_queue: String,
    pub parent_cohort: String,
    pub root_cohort: String,
    pub replica_role: Role,
}

/// Kueue's `cohort_info`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CohortInfoLabels {
    pub cohort: String,
    pub parent_cohort: String,
    pub root_cohort: String,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CohortResourceLabels {
    pub cohort: String,
    pub flavor: String,
    pub resource: String,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CohortLabels {
    pub cohort: String,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CqCohortLabels {
    pub cluster_queue: String,
    pub cohort: String,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CohortPriorityLabels {
    pub cohort: String,
    pub priority_class: String,
    pub replica_role: Role,
}

/// Per LocalQueue and its ClusterQueue, as Kueue's `local_queue_admission_fair_sharing_usage`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LqCqLabels {
    pub name: String,
    pub namespace: String,
    pub cluster_queue: String,
    pub replica_role: Role,
}

/// Per ClusterQueue and eviction reason, as Kueue's `pods_ready_to_evicted_time_seconds`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CqEvictionLabels {
    pub cluster_queue: String,
    pub reason: String,
    pub underlying_cause: String,
    pub replica_role: Role,
}
