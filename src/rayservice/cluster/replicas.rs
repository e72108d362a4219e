//! Worker counts and the desired resources KubeRay reports in RayCluster status.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;

use super::quantity::{format_binary, format_decimal, parse_milli};
use super::startcmd::is_gpu_resource;
use crate::api::ray::{RayClusterSpec, WorkerGroupSpec};

/// Replicas KubeRay keeps for a group: 0 when suspended, else `replicas` (absent -> minReplicas) clamped to
/// [minReplicas, maxReplicas]. This counts replicas, not Pods; multiply by numOfHosts for Pods.
pub fn desired_replicas(g: &WorkerGroupSpec) -> i32 {
    if g.is_suspended() {
        return 0;
    }
    let (min, max) = (g.min_replicas_or_default(), g.max_replicas_or_default());
    match g.replicas {
        None => min,
        Some(r) if r < min => min,
        Some(r) if r > max => max,
        Some(r) => r,
    }
}

/// Worker Pods a group should have: desired replicas x numOfHosts.
pub fn desired_pods(g: &WorkerGroupSpec) -> i64 {
    i64::from(desired_replicas(g)) * i64::from(g.num_of_hosts_or_default())
}

/// Status counters: (desired, min, max) worker Pods summed over groups, as KubeRay's status computes them.
pub fn worker_pod_bounds(spec: &RayClusterSpec) -> (i64, i64, i64) {
    spec.worker_groups()
        .iter()
        .filter(|g| !g.is_suspended())
        .fold((0, 0, 0), |(d, lo, hi), g| {
            let hosts = i64::from(g.num_of_hosts_or_default());
            (
                d + desired_pods(g),
                lo + i64::from(g.min_replicas_or_default()) * hosts,
                hi + i64::from(g.max_replicas_or_default()) * hosts,
            )
        })
}

/// Total desired resources of a cluster in milli-units: head Pod plus each non-suspended group's Pod x
/// `replicas` (absent = 0, as KubeRay) x numOfHosts. Per container, requests win and limits fill the gaps.
pub fn desired_resources_milli(spec: &RayClusterSpec) -> BTreeMap<String, i128> {
    let mut total = BTreeMap::new();
    add_pod(&mut total, spec.head_group_spec.template.spec.as_ref(), 1);
    for g in spec.worker_groups().iter().filter(|g| !g.is_suspended()) {
        let count = i128::from(g.replicas.unwrap_or(0)) * i128::from(g.num_of_hosts_or_default());
        add_pod(&mut total, g.template.spec.as_ref(), count);
    }
    total
}

fn add_pod(total: &mut BTreeMap<String, i128>, pod: Option<&PodSpec>, count: i128) {
    for c in pod.map(|p| p.containers.as_slice()).unwrap_or(&[]) {
        let res = c.resources.as_ref();
        let mut per: BTreeMap<String, i128> = BTreeMap::new();
        for list in [
            res.and_then(|r| r.requests.as_ref()),
            res.and_then(|r| r.limits.as_ref()),
        ]
        .into_iter()
        .flatten()
        {
            for (name, q) in list {
                if let Some(m) = parse_milli(&q.0) {
                    per.entry(name.clone()).or_insert(m);
                }
            }
        }
        for (name, m) in per {
            *total.entry(name).or_insert(0) += m * count;
        }
    }
}

/// The `desiredCPU`, `desiredMemory`, `desiredGPU` (all GPU-like keys) and `desiredTPU` status values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredResources {
    pub cpu: String,
    pub memory: String,
    pub gpu: String,
    pub tpu: String,
}

pub fn desired_resources(spec: &RayClusterSpec) -> DesiredResources {
    let total = desired_resources_milli(spec);
    let get = |k: &str| total.get(k).copied().unwrap_or(0);
    let gpu: i128 = total
        .iter()
        .filter(|(k, _)| is_gpu_resource(k))
        .map(|(_, v)| *v)
        .sum();
    DesiredResources {
        cpu: format_decimal(get("cpu")),
        memory: format_binary(get("memory")),
        gpu: format_decimal(gpu),
        tpu: format_decimal(get("google.com/tpu")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn group(v: serde_json::Value) -> WorkerGroupSpec {
        let mut base = json!({"groupName": "g", "template": {}});
        if let (Some(b), Some(e)) = (base.as_object_mut(), v.as_object()) {
            b.extend(e.clone());
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn replicas_are_clamped() {
        let cases = [
            (json!({"replicas": 3, "minReplicas": 1, "maxReplicas": 5}), 3),
            (json!({"replicas": 0, "minReplicas": 1, "maxReplicas": 5}), 1),
            (json!({"replicas": 9, "minReplicas": 1, "maxReplicas": 5}), 5),
            (json!({"minReplicas": 2, "maxReplicas": 5}), 2),
            (json!({"replicas": 7}), 7),
            (json!({}), 0),
            (json!({"replicas": 3, "suspend": true}), 0),
        ];
        for (v, want) in cases {
            assert_eq!(desired_replicas(&group(v.clone())), want, "{v}");
        }
        assert_eq!(desired_pods(&group(json!({"replicas": 2, "numOfHosts": 4}))), 8);
    }

    #[test]
    fn resources_sum_head_and_workers() {
        let spec: RayClusterSpec = serde_json::from_value(json!({
            "headGroupSpec": {"template": {"spec": {"containers": [
                {"name": "ray", "resources": {"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "1"}}}]}}},
            "workerGroupSpecs": [
                {"groupName": "gpu", "replicas": 2, "numOfHosts": 2, "template": {"spec": {"containers": [
                    {"name": "ray", "resources": {"limits": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"}}}]}}},
                {"groupName": "off", "replicas": 5, "suspend": true, "template": {"spec": {"containers": [
                    {"name": "ray", "resources": {"limits": {"cpu": "100"}}}]}}}
            ]
        }))
        .unwrap();
        let d = desired_resources(&spec);
        assert_eq!(
            d,
            DesiredResources {
                cpu: "3".into(),
                memory: "8Gi".into(),
                gpu: "4".into(),
                tpu: "0".into()
            }
        );
        assert_eq!(worker_pod_bounds(&spec), (4, 0, 2 * i64::from(i32::MAX)));
    }
}
