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
