//! The admission loop's face, for the wiring and the tools (`quotagate plan`, `bench`, `explain`, the web
//! view), not for job kinds: the loop to start, the caches it reflects, what it explains and measures, the
//! pure admission state `plan` simulates on, and the Workload status writes tests use to stage an admitted
//! or evicted Workload. The engine behind it (`jobframework::core`) stays private to the framework.

pub use super::core::CYCLE_BREAK_AFTER_MS;
pub use super::core::caches::reflect_each;
pub use super::core::conditions::{
    EvictedBy, EvictionCause, admitted, clear_reservation, evicted, finished, growth_preempted,
};
#[cfg(test)]
pub(crate) use super::core::run::{User, in_use_live};
pub use super::core::stats::Phase;
pub use super::core::sync::{Action, AdmissionState, Snapshot, key_of};
pub use super::core::{AdmissionLoop, Caches, CycleFigures, CycleStats, Explanations};
