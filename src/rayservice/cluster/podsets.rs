//! A RayCluster's Kueue podsets (Kueue's `BuildPodSets`: `head`, then one per worker group named
//! `lower(groupName)`), computed from the very pods the RayCluster controller builds: each podset's template
//! spec is the built pod's spec and its count the pods the controller keeps, so what a podset requests is
//! exactly what its pods request (the autoscaler sidecar and the `wait-gcs-ready` init container included,
//! which Kueue's hand-kept copy misses).

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::pod::{WorkerSlot, build_head_pod, build_worker_pod};
use super::replicas::desired_pods;
use super::{BuildError, BuildOptions};
use crate::api::kueue::PodSet;
use crate::api::kueue::tas::podset_topology_request;
use crate::api::ray::RayCluster;

/// Podset name of the head group.
pub const HEAD_PODSET: &str = "head";

/// A podset; its topology request read from the template's TAS annotations (Kueue's
/// `NewPodSetTopologyRequest(&template.ObjectMeta).Build()` for the head and each worker group).
fn podset(name: String, count: i32, template: PodTemplateSpec) -> Result<PodSet, BuildError> {
    let topology_request = podset_topology_request(template.metadata.as_ref(), None)
        .map_err(|e| BuildError::TopologyRequest(format!("podset {name}"), e))?;
    Ok(PodSet {
        name: Some(name),
        template,
        count: Some(count),
        topology_request,
        ..Default::default()
    })
}

/// The head podset (count 1) and one per worker group (count = the worker pods the controller keeps:
/// desired replicas x numOfHosts). Templates keep the user's metadata and carry the built pod's spec.
pub fn cluster_podsets(rc: &RayCluster, opts: &BuildOptions) -> Result<Vec<PodSet>, BuildError> {
    let spec = &rc.spec;
    let head = build_head_pod(rc, opts)?;
    let mut out = vec![podset(
        HEAD_PODSET.to_string(),
        1,
        PodTemplateSpec {
            metadata: spec.head_group_spec.template.metadata.clone(),
            spec: head.spec,
        },
    )?];
    for g in spec.worker_groups() {
        let slot = WorkerSlot {
            replica_index: 0,
            host_index: 0,
            replica_name: String::new(),
        };
        let pod = build_worker_pod(rc, &g.group_name, &slot, opts)?;
        let count = i32::try_from(desired_pods(g)).unwrap_or(i32::MAX);
        out.push(podset(
            g.group_name.to_lowercase(),
            count,
            PodTemplateSpec {
                metadata: g.template.metadata.clone(),
                spec: pod.spec,
            },
        )?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cluster(worker_annotations: serde_json::Value) -> RayCluster {
        serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "ns"},
            "spec": {"rayVersion": "2.52.0",
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                    {"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}}},
                "workerGroupSpecs": [{"groupName": "GPU", "replicas": 2, "minReplicas": 2, "maxReplicas": 2,
                    "rayStartParams": {}, "template": {"metadata": {"annotations": worker_annotations},
                        "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.52.0"}]}}}]}}))
        .unwrap()
    }

    // Kueue pkg/controller/jobs/raycluster/common.go `BuildPodSets`: each group's template
    // annotations become its podset's topologyRequest; none, none.
    #[test]
    fn worker_group_annotations_become_the_podset_topology_request() {
        let rc = cluster(json!({
            "kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/topology-rack",
            "kueue.x-k8s.io/podset-slice-required-topology": "kubernetes.io/hostname",
            "kueue.x-k8s.io/podset-slice-size": "1"
        }));
        let ps = cluster_podsets(&rc, &BuildOptions::default()).unwrap();
        assert_eq!(ps[0].topology_request, None);
        let req = ps[1].topology_request.clone().unwrap();
        assert_eq!(ps[1].name.as_deref(), Some("gpu"));
        assert_eq!(req.required.as_deref(), Some("cloud.provider.com/topology-rack"));
        assert_eq!(
            req.pod_set_slice_required_topology.as_deref(),
            Some("kubernetes.io/hostname")
        );
        assert_eq!(req.pod_set_slice_size, Some(1));
        let bad = cluster(json!({"kueue.x-k8s.io/podset-unconstrained-topology": "maybe"}));
        let err = cluster_podsets(&bad, &BuildOptions::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "podset gpu: strconv.ParseBool: parsing \"maybe\": invalid syntax"
        );
    }
}
