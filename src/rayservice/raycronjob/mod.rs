//! RayCronJob, after KubeRay's `raycronjob_controller.go`: at each time of the cron schedule, one
//! RayJob from `spec.jobTemplate`. The decision is pure ([`decide`]); the controller reads the
//! RayCronJob and the clock, creates the RayJob and writes `status.lastScheduleTime`.
//!
//! Missed times follow batch CronJob rather than KubeRay: KubeRay creates the first missed time and
//! requeues at once, so a schedule missed for a day catches up one RayJob per reconcile; here only the
//! most recent missed time gets a RayJob (CronJob's rule without `startingDeadlineSeconds`, which
//! RayCronJob does not have), with CronJob's `TooManyMissedTimes` warning past 100.

pub mod controller;
pub mod decide;

pub use decide::{Plan, Snapshot, decide};

#[cfg(test)]
mod tests;
