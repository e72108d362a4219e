//! RayJob: the decision (pure, [`decide`]) and the controller shell that executes it (`controller`),
//! after KubeRay's `rayjob_controller.go`.
//!
//! The controller reads a [`decide::Snapshot`] (the RayJob's spec and status, its RayCluster, what the
//! dashboard's Jobs API says about the Ray job, the submitter batch Job, the clock) and [`decide::decide`]
//! returns the actions (create or delete the cluster, submit the job, create the submitter, ...), the
//! events and the status to write. The `jobDeploymentStatus` state machine is KubeRay's: New ->
//! Initializing -> Running -> Complete | Failed, with Suspending -> Suspended, Retrying (backoffLimit),
//! Waiting (InteractiveMode) and ValidationFailed.

pub mod controller;
pub mod decide;
pub mod service;
pub mod sidecar;
pub mod submit_command;
pub mod template;

pub use decide::{Action, ClusterView, JobView, Plan, Snapshot, SubmitterView, decide};

#[cfg(test)]
mod tests;
