//! The submitter's default pod template, shared by K8sJobMode's submitter Job and SidecarMode's
//! container beside the head.

use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::api::ray::raycluster::RayClusterSpec;
use crate::api::ray::rayjob::RayJob;

/// KubeRay's `GetDefaultSubmitterTemplate` (the head's image; 500m/200Mi requested, 1/1Gi limit), for
/// the cluster the job's own `rayClusterSpec` describes.
pub fn default_submitter_template(job: &RayJob) -> PodTemplateSpec {
    submitter_template_for(job.spec.ray_cluster_spec.as_ref())
}

/// The default submitter for the cluster the job runs on: KubeRay takes the image from the RayCluster
/// object, so a job that selects an existing cluster (`clusterSelector`, no `rayClusterSpec`) gets that
/// cluster's head image, not none.
pub fn submitter_template_for(cluster: Option<&RayClusterSpec>) -> PodTemplateSpec {
    let image = cluster
        .and_then(|s| s.head_group_spec.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone());
    let q = |v: &str| Quantity(v.to_string());
    PodTemplateSpec {
        metadata: None,
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "ray-job-submitter".into(),
                image,
                resources: Some(ResourceRequirements {
                    limits: Some(
                        [("cpu".to_string(), q("1")), ("memory".to_string(), q("1Gi"))]
                            .into_iter()
                            .collect(),
                    ),
                    requests: Some(
                        [("cpu".to_string(), q("500m")), ("memory".to_string(), q("200Mi"))]
                            .into_iter()
                            .collect(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            restart_policy: Some("Never".into()),
            ..Default::default()
        }),
    }
}
