//! What every writer of a Workload's status shares: the condition helpers, the status to edit, and what
//! an eviction is (its typed reason and cause). Used by the status transitions (`conditions`), the
//! admission-check sync (`checks`) and waitForPodsReady (`pods_ready`).

use crate::api::kueue::constants::reason;
use crate::api::kueue::{Workload, WorkloadStatus};
use crate::queue::{EvictionReason, PreemptedReason};

pub use crate::api::conditions::set as set_condition;

pub(super) use crate::api::conditions::new as cond;

/// The workload's status to edit (empty when it has none yet).
pub(super) fn status_of(wl: &Workload) -> WorkloadStatus {
    wl.status.clone().unwrap_or_default()
}

/// Why a workload is evicted: Kueue's `Evicted` condition reasons, typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictedBy {
    Preempted(PreemptedReason),
    ClusterQueueStopped,
    LocalQueueStopped,
    Deactivated,
    PodsReadyTimeout,
    /// An admission check is in `Retry`.
    AdmissionCheck,
}

impl EvictedBy {
    /// The `Evicted` condition reason.
    pub fn reason(self) -> &'static str {
        match self {
            EvictedBy::Preempted(_) => reason::PREEMPTED,
            EvictedBy::ClusterQueueStopped => reason::CLUSTER_QUEUE_STOPPED,
            EvictedBy::LocalQueueStopped => reason::LOCAL_QUEUE_STOPPED,
            EvictedBy::Deactivated => reason::DEACTIVATED,
            EvictedBy::PodsReadyTimeout => reason::PODS_READY_TIMEOUT,
            EvictedBy::AdmissionCheck => reason::ADMISSION_CHECK,
        }
    }

    /// The `Preempted` condition reason, only for preemptions.
    pub fn preempted_reason(self) -> Option<&'static str> {
        let EvictedBy::Preempted(r) = self else {
            return None;
        };
        Some(match r {
            PreemptedReason::InClusterQueue => reason::IN_CLUSTER_QUEUE,
            PreemptedReason::InCohortReclamation => reason::IN_COHORT_RECLAMATION,
            PreemptedReason::InCohortReclaimWhileBorrowing => reason::IN_COHORT_RECLAIM_WHILE_BORROWING,
            PreemptedReason::InCohortFairSharing => reason::IN_COHORT_FAIR_SHARING,
        })
    }

    /// Whether the eviction is followed by a requeue backoff (Kueue: only the PodsReady timeout).
    pub fn backs_off(self) -> bool {
        self == EvictedBy::PodsReadyTimeout
    }
}

impl From<EvictionReason> for EvictedBy {
    fn from(r: EvictionReason) -> Self {
        match r {
            EvictionReason::Preempted(p) => EvictedBy::Preempted(p),
            EvictionReason::ClusterQueueStopped => EvictedBy::ClusterQueueStopped,
        }
    }
}

/// What evicts a workload, and the message its conditions and event carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvictionCause {
    pub by: EvictedBy,
    pub message: String,
}
