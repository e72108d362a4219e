//! The admission core: quota tree, pending queues, flavor assignment, preemption and workload
//! slices, as Kueue's scheduler does them. Pure and synchronous: no clock, no I/O, no randomness;
//! time comes in as an argument. See docs/design.md (invariants I1, I3, I6).
//!
//! Entry point: [`AdmissionCore`]. Callers feed it ClusterQueues, Cohorts, ResourceFlavors and
//! Workloads in the [`model`] types, call [`AdmissionCore::schedule_cycle`] and apply the
//! returned admissions, evictions and pending reasons to the API.

pub mod admission_fair_sharing;
mod afs_core;
pub mod amount;
pub mod banker;
pub mod convert;
pub mod explain;
pub mod fair_preemption;
pub mod fair_sharing;
pub mod flavor;
mod floor;
mod growth_first;
pub mod model;
pub mod non_tas;
pub mod partial;
pub mod pending;
pub mod preemption;
pub mod requests;
mod scheduler;
mod simulate;
mod status;
pub mod tas;
mod tas_requeue;
pub mod topology;
pub mod tree;
pub mod wait_cycle;

// Kueue's own test cases, ported (each file names its Kueue source and tests): they live in tests/ beside
// the scheduler, compiled only for tests.
#[cfg(test)]
mod floor_tests;
#[cfg(test)]
mod growth_first_tests;
#[cfg(test)]
#[path = "tests/kueue_cases.rs"]
mod kueue_cases;
#[cfg(test)]
#[path = "tests/kueue_fair_preemption_cases.rs"]
mod kueue_fair_preemption_cases;
#[cfg(test)]
#[path = "tests/kueue_preemption_cases.rs"]
mod kueue_preemption_cases;
#[cfg(test)]
#[path = "tests/kueue_preemption_more_cases.rs"]
mod kueue_preemption_more_cases;
#[cfg(test)]
#[path = "tests/kueue_recompute_preemption_cases.rs"]
mod kueue_recompute_preemption_cases;
#[cfg(test)]
#[path = "tests/kueue_schedule_borrow_cases.rs"]
mod kueue_schedule_borrow_cases;
#[cfg(test)]
#[path = "tests/kueue_schedule_cases.rs"]
mod kueue_schedule_cases;
#[cfg(test)]
#[path = "tests/kueue_schedule_choice_cases.rs"]
mod kueue_schedule_choice_cases;
#[cfg(test)]
#[path = "tests/kueue_schedule_fixture.rs"]
mod kueue_schedule_fixture;
#[cfg(test)]
#[path = "tests/kueue_schedule_fs_cases.rs"]
mod kueue_schedule_fs_cases;
#[cfg(test)]
#[path = "tests/kueue_schedule_preempt_cases.rs"]
mod kueue_schedule_preempt_cases;
#[cfg(test)]
#[path = "tests/kueue_slice_cases.rs"]
mod kueue_slice_cases;
#[cfg(test)]
mod preemption_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tas_preemption_tests;
#[cfg(test)]
mod tas_requeue_tests;
#[cfg(test)]
mod tests;

pub use amount::{Amount, FlavorResource, FrAmounts};
pub use explain::Explanation;
pub use model::*;
pub use preemption::PreemptedReason;
pub use scheduler::{
    AdmissionCore, AdmissionResult, CycleResult, Eviction, EvictionReason, FinishedSlice, PendingStatus,
    Recomputation,
};
pub use status::{ClusterQueueStatus, CohortStatus, FlavorUsage, ResourceUsage};

/// Why a workload is still pending: Kueue's `QuotaReserved=False` reasons. The scheduler gives the
/// first seven; the admission controller the last three, for a workload it holds out of the queue
/// (deactivated, a failed admission check) or whose admission waits for other workloads' PodsReady.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PendingReason {
    /// Not evaluated yet.
    Pending,
    NoMatchingFlavor,
    WaitingForQuota,
    ExceedsMaxQuota,
    WaitingForPreemptedWorkloads,
    Misconfigured,
    Suspended,
    Deactivated,
    PendingEvaluation,
    WaitingForPodsReady,
}

impl PendingReason {
    pub fn as_str(self) -> &'static str {
        match self {
            PendingReason::Pending => "Pending",
            PendingReason::NoMatchingFlavor => "NoMatchingFlavor",
            PendingReason::WaitingForQuota => "WaitingForQuota",
            PendingReason::ExceedsMaxQuota => "ExceedsMaxQuota",
            PendingReason::WaitingForPreemptedWorkloads => "WaitingForPreemptedWorkloads",
            PendingReason::Misconfigured => "Misconfigured",
            PendingReason::Suspended => "Suspended",
            PendingReason::Deactivated => "Deactivated",
            PendingReason::PendingEvaluation => "PendingEvaluation",
            PendingReason::WaitingForPodsReady => "WaitingForPodsReady",
        }
    }

    /// A reason the scheduler gives after trying to admit: not "not evaluated yet", nor a workload
    /// held out of the queue or misconfigured.
    pub fn is_scheduler_verdict(self) -> bool {
        matches!(
            self,
            PendingReason::NoMatchingFlavor
                | PendingReason::WaitingForQuota
                | PendingReason::ExceedsMaxQuota
                | PendingReason::WaitingForPreemptedWorkloads
        )
    }
}

impl std::fmt::Display for PendingReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A reason reads as its API text: `reason == "WaitingForQuota"`.
impl PartialEq<str> for PendingReason {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for PendingReason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum QueueError {
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    #[error("workload {0} is already admitted")]
    AlreadyAdmitted(WorkloadKey),
    #[error("workload {0} is not admitted")]
    NotAdmitted(WorkloadKey),
    #[error(
        "workload {new} replaces {old}, but {existing} is already the pending replacement in that chain; \
         at most one replacement may be pending"
    )]
    // Boxed so every `Result<_, QueueError>` stays small.
    ReplacementAlreadyPending {
        old: Box<WorkloadKey>,
        existing: Box<WorkloadKey>,
        new: Box<WorkloadKey>,
    },
    #[error(
        "workload {new} replaces {old}, which is itself pending; a replacement must name the admitted slice"
    )]
    ReplacesPending { old: WorkloadKey, new: WorkloadKey },
    #[error(
        "update of admitted workload {key} grows {fr} from {old} to {new}; growth needs a new workload slice"
    )]
    NotAShrink {
        key: Box<WorkloadKey>,
        fr: Box<FlavorResource>,
        old: Amount,
        new: Amount,
    },
    #[error("invalid quantity {value:?} in {field}: {message}")]
    InvalidQuantity {
        field: String,
        value: String,
        message: String,
    },
}

impl QueueError {
    /// Low-cardinality label for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            QueueError::Invalid { .. } | QueueError::InvalidQuantity { .. } => "invalid",
            QueueError::AlreadyAdmitted(_) | QueueError::NotAdmitted(_) => "state",
            QueueError::ReplacementAlreadyPending { .. } | QueueError::ReplacesPending { .. } => "slice",
            QueueError::NotAShrink { .. } => "slice",
        }
    }

    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        QueueError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}
