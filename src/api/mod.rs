//! API types (Kueue, KubeRay, Gateway API), quantities, validation and admission. No I/O.

pub mod admission;
pub mod batch;
pub mod conditions;
#[cfg(test)]
mod fuzz;
pub mod gateway;
pub mod goduration;
pub mod kueue;
pub mod manifest;
pub mod merge_patch;
pub mod names;
pub mod pod;
pub mod quantity;
pub mod ray;
pub mod validation;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// Every CRD quotagate serves: Kueue's, KubeRay's and the Gateway API kinds the Ray operator writes.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    let mut crds = kueue::crds();
    crds.extend(ray::crds());
    crds.extend(gateway::crds());
    crds
}
