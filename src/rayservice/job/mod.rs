//! RayCluster, RayService and RayJob as Kueue jobs (Kueue's `pkg/controller/jobs/ray*`): the `GenericJob`
//! implementations the generic job reconciler runs, registered by the wiring.

pub mod claim;
pub mod demand;
pub mod gate;
pub mod growth;
pub mod multikueue;
pub mod raycluster;
pub mod rayjob;
pub mod rayservice;
pub mod step;

use kube::Resource;
use kube::core::GroupVersionKind;

use crate::api::ray::{RayCluster, RayJob, RayService};

fn gvk<K: Resource<DynamicType = ()>>() -> GroupVersionKind {
    GroupVersionKind::gvk(&K::group(&()), &K::version(&()), &K::kind(&()))
}

/// The job kinds this operator registers with the job framework.
pub fn managed_kinds() -> Vec<GroupVersionKind> {
    vec![gvk::<RayCluster>(), gvk::<RayService>(), gvk::<RayJob>()]
}

#[cfg(test)]
mod growth_tests;
#[cfg(test)]
mod tests;
