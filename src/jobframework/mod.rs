//! See ../shared/DESIGN.md for what lives here.
//!
//! Pure parts of Kueue's job framework: the `GenericJob` interface a job kind implements, workload
//! names, building a Workload for a job, priority resolution, and applying / restoring the admitted
//! podset info (flavor node selectors and tolerations) on a job's pod templates. No kube I/O here:
//! the reconcilers read what these functions need and write what they return.

pub mod core;
pub mod error;
pub mod interface;
pub mod job_controller;
pub mod metrics;
pub mod names;
pub mod podset_info;
pub mod priority;
pub mod shell;
pub mod workload;

pub use error::JobFrameworkError;
pub use interface::*;

#[cfg(test)]
mod tests;
