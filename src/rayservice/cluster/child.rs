//! A RayService's child RayCluster (KubeRay's `constructRayClusterForRayService`) and the
//! "same spec / worker groups appended / changed" comparison behind new-cluster-vs-in-place decisions.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::hash::{hash_of_first_groups, hash_without_replicas_and_workers_to_delete};
use crate::api::ray::constants as c;
use crate::api::ray::{RayCluster, RayClusterSpec, RayService};

/// The spec a RayService's clusters are hashed with: `rayClusterConfig` without `suspend`, which Kueue owns
/// on the child after creation.
pub fn spec_for_hashing(rs: &RayService) -> RayClusterSpec {
    let mut spec = rs.spec.ray_cluster_config.clone();
    spec.suspend = None;
    spec
}

/// How an existing child cluster relates to the RayService's current `rayClusterConfig`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecMatch {
    /// Same spec (ignoring autoscaler-owned counts): nothing to do.
    Same,
    /// Only worker groups were appended: update the cluster in place.
    GroupsAppended,
    /// Anything else: a new cluster (or nothing, with upgradeStrategy None).
    Changed,
}

/// Compares the cluster's stamped hash with the desired spec, first in full, then over the first
/// `ray.io/num-worker-groups` groups. Like KubeRay, a missing or unreadable group count counts as "appended".
pub fn compare(rs: &RayService, cluster: &RayCluster) -> SpecMatch {
    let empty = BTreeMap::new();
    let ann = cluster.metadata.annotations.as_ref().unwrap_or(&empty);
    let stamped = ann
        .get(c::ANNOTATION_HASH_WITHOUT_REPLICAS)
        .map(String::as_str)
        .unwrap_or("");
    let goal = spec_for_hashing(rs);
    if stamped == hash_without_replicas_and_workers_to_delete(&goal) {
        return SpecMatch::Same;
    }
    let Some(n) = ann
        .get(c::ANNOTATION_NUM_WORKER_GROUPS)
        .and_then(|v| v.parse::<usize>().ok())
    else {
        return SpecMatch::GroupsAppended;
    };
    if goal.worker_groups().len() >= n && stamped == hash_of_first_groups(&goal, n) {
        SpecMatch::GroupsAppended
    } else {
        SpecMatch::Changed
    }
}

/// The child RayCluster named `name`: RayService labels and annotations plus the originated-from labels, the
/// spec hash, group count and operator version, and a controller owner reference (when the RayService has a UID).
/// `pending_incremental` drops worker `replicas` so the new cluster grows with Serve's target_capacity.
pub fn child_cluster(
    rs: &RayService,
    name: &str,
    operator_version: &str,
    pending_incremental: bool,
) -> RayCluster {
    let rs_name = rs.metadata.name.clone().unwrap_or_default();
    let mut labels = rs.metadata.labels.clone().unwrap_or_default();
    labels.insert(c::LABEL_ORIGINATED_FROM_CR_NAME.into(), rs_name.clone());
    labels.insert(c::LABEL_ORIGINATED_FROM_CRD.into(), c::CRD_RAY_SERVICE.into());
    let mut annotations = rs.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(
        c::ANNOTATION_HASH_WITHOUT_REPLICAS.into(),
        hash_without_replicas_and_workers_to_delete(&spec_for_hashing(rs)),
    );
    annotations.insert(
        c::ANNOTATION_NUM_WORKER_GROUPS.into(),
        rs.spec.ray_cluster_config.worker_groups().len().to_string(),
    );
    annotations.insert(c::ANNOTATION_KUBERAY_VERSION.into(), operator_version.into());
    let mut spec = rs.spec.ray_cluster_config.clone();
    if pending_incremental {
        for g in spec.worker_group_specs.iter_mut().flatten() {
            g.replicas = None;
        }
    }
    let owner = rs.metadata.uid.clone().map(|uid| OwnerReference {
        api_version: "ray.io/v1".into(),
        kind: c::CRD_RAY_SERVICE.into(),
        name: rs_name,
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    });
    let mut rc = RayCluster::new(name, spec);
    rc.metadata = ObjectMeta {
        name: Some(name.into()),
        namespace: rs.metadata.namespace.clone(),
        labels: Some(labels),
        annotations: Some(annotations),
        owner_references: owner.map(|o| vec![o]),
        ..Default::default()
    };
    rc
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs(groups: serde_json::Value) -> RayService {
        serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": "rs", "namespace": "ns", "uid": "u1", "labels": {"team": "a"}, "annotations": {"note": "x"}},
            "spec": {"rayClusterConfig": {"suspend": true, "headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray"}]}}},
                "workerGroupSpecs": groups}}
        }))
        .unwrap()
    }

    fn group(name: &str, image: &str) -> serde_json::Value {
        json!({"groupName": name, "replicas": 2, "template": {"spec": {"containers": [{"name": "ray", "image": image}]}}})
    }

    #[test]
    fn child_carries_labels_hash_and_owner() {
        let svc = rs(json!([group("g", "ray:1")]));
        let rc = child_cluster(&svc, "rs-abcde", "v1.7.0", false);
        let m = &rc.metadata;
        let labels = m.labels.as_ref().unwrap();
        assert_eq!(
            (
                labels["team"].as_str(),
                labels["ray.io/originated-from-cr-name"].as_str()
            ),
            ("a", "rs")
        );
        assert_eq!(labels["ray.io/originated-from-crd"], "RayService");
        let ann = m.annotations.as_ref().unwrap();
        assert_eq!(
            (
                ann["note"].as_str(),
                ann["ray.io/num-worker-groups"].as_str(),
                ann["ray.io/kuberay-version"].as_str()
            ),
            ("x", "1", "v1.7.0")
        );
        assert_eq!(m.owner_references.as_ref().unwrap()[0].controller, Some(true));
        assert_eq!(rc.spec.suspend, Some(true), "suspend is copied at creation");
        assert_eq!(rc.spec.worker_groups()[0].replicas, Some(2));
        assert_eq!(compare(&svc, &rc), SpecMatch::Same);
        let pending = child_cluster(&svc, "rs-fghij", "v1.7.0", true);
        assert_eq!(pending.spec.worker_groups()[0].replicas, None);
    }

    #[test]
    fn comparisons() {
        let svc = rs(json!([group("g", "ray:1")]));
        let rc = child_cluster(&svc, "rs-abcde", "v1.7.0", false);
        let mut suspended_differently = svc.clone();
        suspended_differently.spec.ray_cluster_config.suspend = Some(false);
        assert_eq!(
            compare(&suspended_differently, &rc),
            SpecMatch::Same,
            "suspend is not part of the hash"
        );
        assert_eq!(
            compare(&rs(json!([group("g", "ray:1"), group("h", "ray:1")])), &rc),
            SpecMatch::GroupsAppended
        );
        assert_eq!(
            compare(&rs(json!([group("g", "ray:2")])), &rc),
            SpecMatch::Changed
        );
        assert_eq!(
            compare(&rs(json!([])), &rc),
            SpecMatch::Changed,
            "removing groups needs a new cluster"
        );
        let mut unstamped = rc.clone();
        unstamped.metadata.annotations = None;
        assert_eq!(
            compare(&rs(json!([group("g", "ray:2")])), &unstamped),
            SpecMatch::GroupsAppended,
            "KubeRay's fallback"
        );
    }
}
