//! The admission controller (see docs/design.md): the async shell around [`crate::queue`], doing the work
//! of Kueue's scheduler I/O, workload controller, ClusterQueue / LocalQueue / ResourceFlavor controllers
//! and the cache's assume / forget. ClusterQueue, Cohort, ResourceFlavor, LocalQueue and Workload changes
//! reach the loop through reflector caches; it feeds the admission core ([`sync`]), runs a cycle, writes
//! Workload conditions ([`conditions`]) and ClusterQueue / LocalQueue status ([`queue_status`]).
//!
//! # The face
//!
//! The wiring, the tools (`quotagate plan`, `bench`, `explain`, the web view) and the job framework use
//! what this module exports at its top: the loop to start, the caches it reflects, what it explains and
//! measures, the pure admission state `plan` simulates on, the Workload status writes (tests use them to
//! stage an admitted or evicted Workload), plus two public modules: the metrics ([`metrics`]) and the
//! slice-chain queries ([`slices`]). The engine's modules stay private to this folder (a test in
//! `tests/layering.rs` fails on any import of them from outside it).

mod action;
pub(crate) mod admission_fair_sharing;
pub(crate) mod backoff;
pub(crate) mod caches;
pub(crate) mod checks;
mod classify;
pub(crate) mod conditions;
mod config_sync;
mod cycle_breaker;
pub(crate) mod explanations;
pub(crate) mod finalizers;
pub(crate) mod metric_labels;
pub mod metrics;
mod non_tas_pods;
mod outcome;
pub(crate) mod own_writes;
mod pending_writes;
pub(crate) mod pods_ready;
pub(crate) mod pods_ready_metrics;
pub(crate) mod priorities;
pub(crate) mod queue_metrics;
pub(crate) mod queue_status;
mod queues;
mod quota_seen;
pub(crate) mod run;
pub mod slices;
pub(crate) mod snapshot;
pub(crate) mod stats;
mod status_patch;
pub(crate) mod sync;
mod take;
mod transition_metrics;
mod unchanged;
mod unconfirmed;
mod workload_events;
pub(crate) mod workload_status;
pub(crate) mod write_backoff;
mod write_metrics;
mod writer;

#[cfg(test)]
mod checks_afs_tests;
#[cfg(test)]
mod checks_slice_tests;
#[cfg(test)]
mod checks_step_tests;
#[cfg(test)]
mod checks_tests;
#[cfg(test)]
mod requeue_tests;
#[cfg(test)]
mod status_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod unchanged_tests;

pub use caches::{Caches, reflect_each};
pub use conditions::{
    EvictedBy, EvictionCause, admitted, clear_reservation, evicted, finished, growth_preempted,
};
pub use cycle_breaker::BREAK_AFTER_MS as CYCLE_BREAK_AFTER_MS;
pub use explanations::Explanations;
pub use non_tas_pods::NonTasUsage;
pub use pods_ready::with_condition as pods_ready_condition;
pub use pods_ready::{PodsScheduling, with_pods_scheduled as pods_scheduled_condition};
pub use pods_ready_metrics::record_ready as record_pods_ready;
#[cfg(test)]
pub(crate) use queues::{User, in_use_live};
pub use run::AdmissionLoop;
pub use slices::{is_evicted, replacement_for};
pub use stats::{CycleFigures, CycleStats, Phase};
pub use sync::{Action, AdmissionState, Snapshot, key_of};
pub use workload_events::{Touched as TouchedWorkload, WorkloadEvents};
