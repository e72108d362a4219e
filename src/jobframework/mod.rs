//! Kueue's job framework, for any job kind (see docs/design.md). It knows no job kind and imports
//! nothing of Ray: kinds live with their operator (`rayservice::job`; other kinds in folders of their own)
//! and the wiring registers them.
//!
//! # The contract for a job kind
//!
//! A kind (Kueue's `pkg/controller/jobs/<kind>/`) uses only what this module exports at its top; the
//! admission controller the framework feeds lives below it in `crate::admission`, whose engine is private
//! to that folder (a test in `tests/layering.rs` fails on any import of it from outside). What a kind
//! may use:
//!
//! - **The interface** ([`interface`], re-exported here): [`GenericJob`], the required part (metadata, GVK,
//!   suspend, podsets, run with and restore the admitted podset info, finished, active, pods ready), plus
//!   the optional capabilities a kind opts into by returning `Some(self)` from an `as_*` accessor
//!   (Kueue's type assertions): [`JobWithReclaimablePods`], [`JobWithSkip`], [`JobWithOnHold`],
//!   [`JobWithPriorityClass`], [`JobWithCustomWorkloadActivation`], [`ElasticWorkloadNameProvider`],
//!   [`TopLevelJob`], [`JobWithCustomStop`]. Elastic jobs (workload slices) override
//!   [`GenericJob::uses_slices`] and [`GenericJob::compare_demand`]; [`compare_counts`] is Kueue's default.
//! - **Registering with the reconciler**: [`JobKind`] (the object watched and the watch's selector, how a
//!   job is loaded, extra watches, work after each step, and for a kind that cannot be suspended, such as
//!   a Pod, its own stop: `STOPS_ITSELF` / `stop_itself`) with its [`JobContext`]; [`plan`] and [`Step`],
//!   the pure decision a kind's tests can drive (a kind whose job spans several objects, such as a pod
//!   group, can decide with it and act in a controller of its own, using [`job_controller::priority`]
//!   and the condition helpers of [`crate::admission`]); [`owned_workloads`], a job's Workloads as the
//!   reconciler reads them; [`manages`], whether Kueue manages a job (its queue name, or
//!   `manageJobsWithoutQueueName` in a selected namespace), for a kind whose own controller holds
//!   what the reconciler has not admitted.
//! - **Podset helpers** ([`podset_info`]): [`PodSetInfo`] and merging it into / restoring it from pod
//!   templates ([`merge_into_template`], [`merge_all`], [`restore_template`]).
//! - **Slice-chain queries** (from [`crate::admission::slices`]): [`replacement_for`] (which slice a
//!   scale-up slice replaces) and [`is_evicted`] (an eviction in progress), the same answers the
//!   admission loop uses.
//! - **Label readers**: [`queue_name`], [`workload_priority_class_name`], [`maximum_execution_time_seconds`],
//!   [`workload_slice_enabled`].
//! - The controller shell and event recorder every controller runs with live below, in [`crate::kit`].
//!
//! The test doubles in `contract_tests.rs` sketch a batch Job, a Pod group and a RayJob written against
//! this contract alone.
//!
//! # The rest of the framework
//!
//! The generic job reconciler ([`job_controller`]), Workload construction ([`workload`], [`names`],
//! [`priority`]) and refusals written onto jobs ([`refusal`]).

pub mod error;
pub mod interface;
pub mod job_controller;
pub mod multikueue;
pub mod names;
pub mod podset_info;
pub mod priority;
pub mod reclaimable;
pub mod refusal;
pub mod retention;
pub mod workload;

pub use crate::admission::slices::{is_evicted, replacement_for};
pub use error::JobFrameworkError;
pub use interface::*;
pub use job_controller::{JobContext, JobKind, Step, manages, owned_workloads, plan, plan_managed};
pub use podset_info::{PodSetInfo, merge_all, merge_into_template, restore_template};

#[cfg(test)]
mod contract_tests;
#[cfg(test)]
mod tests;
