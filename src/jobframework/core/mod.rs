//! The core controllers and the scheduler loop: the async shell around [`crate::queue`]. ClusterQueue,
//! Cohort, ResourceFlavor, LocalQueue and Workload changes reach the loop through reflector caches;
//! it feeds the admission core ([`sync`]), runs a cycle, writes Workload conditions ([`conditions`])
//! and ClusterQueue / LocalQueue status ([`queue_status`]).

pub mod admission_fair_sharing;
pub mod backoff;
pub mod caches;
pub mod checks;
mod classify;
pub mod conditions;
mod cycle_breaker;
pub use cycle_breaker::BREAK_AFTER_MS as CYCLE_BREAK_AFTER_MS;
pub mod explanations;
pub mod finalizers;
pub mod metric_labels;
pub mod own_writes;
pub mod pods_ready;
pub mod pods_ready_metrics;
pub mod priorities;
pub mod queue_metrics;
pub mod queue_status;
pub mod run;
pub mod snapshot;
pub mod stats;
pub mod sync;
pub mod workload_status;
pub mod write_backoff;

#[cfg(test)]
mod checks_tests;
#[cfg(test)]
mod tests;

pub use caches::Caches;
pub use explanations::Explanations;
pub use run::AdmissionLoop;
pub use stats::{CycleFigures, CycleStats};
