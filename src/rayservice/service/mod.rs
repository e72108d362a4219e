//! RayService: the decisions, pure; the controller shell that executes them is `rayservice::servicectl`.
//!
//! The controller reads a [`Snapshot`] (the RayService as data, its child RayClusters, what the Ray
//! dashboard reported, the Services' selectors, the clock) and calls [`plan`], which returns a [`Plan`]:
//! actions to execute in order, events to record, the status to write and the durable deletion schedule.
//! Only the shell performs I/O, so every transition is covered by table tests.
//!
//! Layout: `lifecycle` decides which top-level phase applies (deleting, invalid, suspending, suspended,
//! timed out, running); `bluegreen` is the per-strategy state machine for a running service
//! (`NewCluster` and `None`), `incremental` the one for `NewClusterWithIncrementalUpgrade`, `running`
//! the steps they share; `conditions` computes KubeRay's conditions; `schedule` keeps the
//! dangling-cluster deletion deadlines that KubeRay held only in memory; `observe` maps API objects
//! to the snapshot and the planned status back (including `numServeEndpoints` from the serve Service's
//! EndpointSlices); `build` makes child clusters and Services (honouring `spec.serveService`); `auth`
//! finds a token-auth cluster's dashboard token; `adopt` attaches an incremental upgrade to a shared
//! Gateway or an existing HTTPRoute.

pub mod adopt;
pub mod auth;
mod bluegreen;
pub mod build;
pub mod conditions;
pub mod duration;
pub mod incremental;
pub mod lifecycle;
pub mod observe;
pub mod plan;
mod running;
pub mod schedule;
pub mod snapshot;
pub mod traffic;

#[cfg(test)]
mod adopt_tests;
#[cfg(test)]
mod failure_tests;
#[cfg(test)]
mod incremental_tests;
#[cfg(test)]
mod tests;

pub use lifecycle::plan;
pub use plan::{Action, EventPlan, EventType, Plan, ServiceStatusPlan, StatusPlan};
pub use snapshot::{
    Admission, AppView, ChildCluster, DesiredCluster, HashMatch, IncrementalOptions, PriorCondition,
    PriorStatus, ServeObservation, Snapshot, TrafficStatus, TrafficView, UpgradeStrategy,
};
