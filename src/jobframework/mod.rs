//! Kueue's job framework, for any job kind (see ../shared/DESIGN.md): the `GenericJob` interface a kind
//! implements (`interface`), the generic job reconciler that gives each queue-managed job one Workload chain
//! (`job_controller`), the admission loop around the pure core in `queue` with ClusterQueue and LocalQueue
//! status (`core`), their metrics, and the one controller shell every controller runs in (`shell`). Pure
//! helpers: workload names, building a Workload for a job, priority resolution, applying and restoring the
//! admitted podset info on a job's templates. No job kind and no Ray import here: kinds live with their
//! operator (`rayservice::job`) and are registered by the wiring.

pub mod core;
pub mod error;
pub mod events;
pub mod interface;
pub mod job_controller;
pub mod metrics;
pub mod names;
pub mod podset_info;
pub mod priority;
pub mod refusal;
pub mod shell;
pub mod workload;

pub use error::JobFrameworkError;
pub use interface::*;

#[cfg(test)]
mod tests;
