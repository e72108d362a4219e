//! KubeRay-compatible `ray.io/v1` types (RayCluster, RayService, RayJob, RayCronJob), their constants and
//! validation.

pub mod child_guard;
pub mod constants;
pub mod cron;
pub mod features;
pub mod raycluster;
pub mod raycronjob;
pub mod rayjob;
pub mod rayservice;
pub mod validation;

#[cfg(test)]
pub(crate) mod roundtrip_tests;

pub use raycluster::{RayCluster, RayClusterSpec, RayClusterStatus, WorkerGroupSpec};
pub use raycronjob::{RayCronJob, RayCronJobSpec, RayCronJobStatus};
pub use rayjob::{RayJob, RayJobSpec, RayJobStatus};
pub use rayservice::{RayService, RayServiceSpec, RayServiceStatuses};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// CRDs the embedded API server serves for KubeRay.
pub fn crds() -> Vec<CustomResourceDefinition> {
    super::crd_markers::with_markers(vec![
        RayCluster::crd(),
        RayService::crd(),
        RayJob::crd(),
        RayCronJob::crd(),
    ])
}
