//! Kueue API (`kueue.x-k8s.io/v1beta2`): the kinds quotagate serves, their constants, builders and
//! validation. Field names, defaults, printer columns and short names follow Kueue's Go types.

pub mod admission_check;
pub mod builders;
pub mod cluster_queue;
pub mod cohort;
pub mod common;
pub mod config;
pub mod constants;
pub mod local_queue;
pub mod managed_jobs;
pub mod multikueue;
pub mod pods_ready_annotation;
pub mod priority_class;
pub mod resource_flavor;
pub mod tas;
pub mod topology;
pub mod validation;
pub mod workload;

#[cfg(test)]
mod roundtrip_tests;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use admission_check::*;
pub use cluster_queue::*;
pub use cohort::*;
pub use common::*;
pub use local_queue::*;
pub use multikueue::{MultiKueueCluster, MultiKueueConfig};
pub use priority_class::*;
pub use resource_flavor::*;
pub use topology::*;
pub use workload::*;

/// Every Kueue CRD quotagate serves.
pub fn crds() -> Vec<CustomResourceDefinition> {
    super::crd_markers::with_markers(vec![
        ResourceFlavor::crd(),
        ClusterQueue::crd(),
        Cohort::crd(),
        LocalQueue::crd(),
        Workload::crd(),
        WorkloadPriorityClass::crd(),
        Topology::crd(),
        AdmissionCheck::crd(),
        MultiKueueConfig::crd(),
        MultiKueueCluster::crd(),
    ])
}
