//! The writes an admission step asks the loop to make.

use super::conditions::EvictionCause;
use crate::api::kueue::WorkloadStatus;
use crate::queue::{self, WorkloadKey};

/// A write the loop must make.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Admit {
        key: WorkloadKey,
        admission: queue::Admission,
        replaced: Option<WorkloadKey>,
        /// The admission checks its flavors need (written `Pending` with the reservation).
        checks: std::collections::BTreeSet<String>,
    },
    /// Admission check states (and `Admitted`, which follows them) to write.
    Checks {
        key: WorkloadKey,
        status: Box<WorkloadStatus>,
    },
    /// Mark evicted; `clear` also releases the reservation at once (no job has to stop first).
    Evict {
        key: WorkloadKey,
        cause: EvictionCause,
        clear: bool,
    },
    ClearReservation {
        key: WorkloadKey,
    },
    /// Preemption takes only the growth of an admitted slice (`GrowthPreempted=True` with Kueue's
    /// reason): its job shrinks it back to its floor instead of stopping.
    TakeGrowth {
        key: WorkloadKey,
        /// Kueue's preemption reason, or the cycle breaker's.
        reason: String,
        message: String,
    },
    /// Not reserved: `QuotaReserved=False` with `reason` (its API text written by the writer) and
    /// `message`.
    Pending {
        key: WorkloadKey,
        reason: queue::PendingReason,
        message: String,
    },
    FinishSlice {
        key: WorkloadKey,
        replaced_by: WorkloadKey,
    },
    RemoveFinalizer {
        key: WorkloadKey,
    },
    /// The requeue backoff has elapsed: Requeued=True/BackoffFinished, `requeueAt` cleared.
    BackoffFinished {
        key: WorkloadKey,
    },
    /// The cause of a Requeued=False is gone: Requeued=True with `reason`.
    Requeue {
        key: WorkloadKey,
        reason: String,
        message: String,
    },
    /// Requeued too often after PodsReady timeouts, or an admission check rejected it: marked
    /// `DeactivationTarget` with `reason` and `message`, then `spec.active` set false (the eviction as
    /// deactivated follows from that).
    Deactivate {
        key: WorkloadKey,
        reason: &'static str,
        message: String,
    },
}

impl Action {
    /// The workload the action writes.
    pub fn key(&self) -> &WorkloadKey {
        match self {
            Action::Admit { key, .. }
            | Action::Evict { key, .. }
            | Action::ClearReservation { key }
            | Action::TakeGrowth { key, .. }
            | Action::Pending { key, .. }
            | Action::FinishSlice { key, .. }
            | Action::BackoffFinished { key }
            | Action::Requeue { key, .. }
            | Action::Deactivate { key, .. }
            | Action::Checks { key, .. }
            | Action::RemoveFinalizer { key } => key,
        }
    }
}
