//! quotagate: Kueue-compatible quota admission with an embedded, quota-gated KubeRay-compatible Ray operator.
//!
//! Dependency direction is the layout: `kit`, `api` <- `queue` <- `admission` <- `jobframework` <-
//! `rayservice`, `jobs`, `multikueue` <- wiring; `embedded` depends on `api` and serves everything else through
//! `kube::Client`.

pub mod admission;
pub mod api;
pub mod cli;
pub mod embedded;
pub mod jobframework;
pub mod jobs;
pub mod kit;
pub mod multikueue;
pub mod queue;
pub mod rayservice;
pub mod wiring;
