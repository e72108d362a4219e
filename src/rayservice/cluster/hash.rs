//! The spec hash behind `ray.io/hash-without-replicas-and-workers-to-delete` and the Recreate strategy.
//!
//! Same muting as KubeRay (autoscaler-owned counts, Kueue-injected tolerations/scheduling gates, the upgrade
//! strategy) and the same 32-character base32hex shape; the digest is the first 160 bits of SHA-256 (sha2 is
//! already a dependency) over our own JSON of the muted spec, so it is stable for objects
//! we stamp but not byte-identical to a hash stamped by KubeRay (Go encodes zero values differently). A cluster
//! stamped by KubeRay is re-stamped through the `ray.io/kuberay-version` mismatch path, as KubeRay itself does
//! after an operator upgrade.

use std::collections::BTreeMap;

use sha2::Digest;

use crate::api::ray::constants as c;
use crate::api::ray::raycluster::RayClusterUpgradeType;
use crate::api::ray::{RayCluster, RayClusterSpec};

/// What the `Recreate` upgrade strategy asks for, given the head Pod's stamped annotations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecreateDecision {
    /// Not a Recreate cluster, no head Pod yet, an unstamped head Pod, or the spec is unchanged.
    Keep,
    /// The head Pod was stamped by another operator version: re-stamp it with these annotations instead of
    /// recreating (hash inputs may differ between versions without a user change).
    Restamp(BTreeMap<String, String>),
    /// The spec changed since the head Pod was created: delete all Pods.
    RecreateAll,
}

/// KubeRay's `shouldRecreatePodsForUpgrade` as a pure decision.
pub fn recreate_decision(
    cluster: &RayCluster,
    head_pod_annotations: Option<&BTreeMap<String, String>>,
    operator_version: &str,
) -> RecreateDecision {
    if cluster.spec.upgrade_type() != Some(RayClusterUpgradeType::Recreate) {
        return RecreateDecision::Keep;
    }
    let Some(ann) = head_pod_annotations else {
        return RecreateDecision::Keep;
    };
    let expected = hash_without_replicas_and_workers_to_delete(&cluster.spec);
    let version = ann
        .get(c::ANNOTATION_KUBERAY_VERSION)
        .map(String::as_str)
        .unwrap_or("");
    if !version.is_empty() && version != operator_version {
        return RecreateDecision::Restamp(head_pod_stamp(&expected, operator_version));
    }
    match ann.get(c::ANNOTATION_UPGRADE_STRATEGY_RECREATE_HASH) {
        Some(actual) if !actual.is_empty() && *actual != expected => RecreateDecision::RecreateAll,
        _ => RecreateDecision::Keep,
    }
}

/// Annotations stamped on a new head Pod of a Recreate cluster.
pub fn head_pod_stamp(hash: &str, operator_version: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            c::ANNOTATION_UPGRADE_STRATEGY_RECREATE_HASH.to_string(),
            hash.to_string(),
        ),
        (
            c::ANNOTATION_KUBERAY_VERSION.to_string(),
            operator_version.to_string(),
        ),
    ])
}

/// Hash of the spec with replicas, min/max replicas, workersToDelete, tolerations, scheduling gates and
/// upgradeStrategy blanked. Suspend is not blanked here; the RayService controller clears it itself.
pub fn hash_without_replicas_and_workers_to_delete(spec: &RayClusterSpec) -> String {
    hash_spec(&muted(spec))
}

/// Hash over only the first `n` worker groups of `spec`: detects "worker groups were appended" (in-place update).
pub fn hash_of_first_groups(spec: &RayClusterSpec, n: usize) -> String {
    let mut s = muted(spec);
    if let Some(groups) = s.worker_group_specs.as_mut() {
        groups.truncate(n);
    }
    hash_spec(&s)
}

fn muted(spec: &RayClusterSpec) -> RayClusterSpec {
    let mut s = spec.clone();
    if let Some(pod) = s.head_group_spec.template.spec.as_mut() {
        pod.tolerations = None;
        pod.scheduling_gates = None;
    }
    for g in s.worker_group_specs.iter_mut().flatten() {
        g.replicas = None;
        g.min_replicas = None;
        g.max_replicas = None;
        // KubeRay's `ScaleStrategy` is a value struct: with `workersToDelete` cleared, an absent and
        // an empty `scaleStrategy` hash alike (an autoscaler's first scale-down adds it).
        g.scale_strategy = None;
        if let Some(pod) = g.template.spec.as_mut() {
            pod.tolerations = None;
            pod.scheduling_gates = None;
        }
    }
    s.upgrade_strategy = None;
    s
}

fn hash_spec(spec: &RayClusterSpec) -> String {
    // Serialising a plain struct of strings, numbers and maps cannot fail; fall back to Debug just in case.
    let bytes = serde_json::to_vec(spec).unwrap_or_else(|_| format!("{spec:?}").into_bytes());
    base32_hex(&sha2::Sha256::digest(&bytes)[..20])
}

/// RFC 4648 base32 with the extended-hex alphabet (Go's `base32.HexEncoding`), padded.
fn base32_hex(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHIJKLMNOPQRSTUV";
    let mut out = String::new();
    for chunk in bytes.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let v = buf.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        let chars = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < chars {
                out.push(char::from(ALPHABET[((v >> (35 - 5 * i)) & 31) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> RayClusterSpec {
        serde_json::from_value(v).unwrap()
    }

    fn base() -> serde_json::Value {
        json!({
            "rayVersion": "2.52.0",
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray", "image": "ray:1"}]}}},
            "workerGroupSpecs": [{"groupName": "g", "replicas": 1, "minReplicas": 1, "maxReplicas": 5,
                "scaleStrategy": {"workersToDelete": ["p1"]},
                "template": {"spec": {"containers": [{"name": "ray", "image": "ray:1"}]}}}]
        })
    }

    #[test]
    fn autoscaler_and_kueue_edits_do_not_change_the_hash() {
        let h = hash_without_replicas_and_workers_to_delete(&spec(base()));
        assert_eq!(h.len(), 32);
        let mut v = base();
        v["workerGroupSpecs"][0]["replicas"] = json!(4);
        v["workerGroupSpecs"][0]["minReplicas"] = json!(0);
        v["workerGroupSpecs"][0]["maxReplicas"] = json!(9);
        v["workerGroupSpecs"][0]["scaleStrategy"]["workersToDelete"] = json!(["p2"]);
        v["workerGroupSpecs"][0]["template"]["spec"]["tolerations"] =
            json!([{"key": "k", "operator": "Exists"}]);
        v["headGroupSpec"]["template"]["spec"]["schedulingGates"] =
            json!([{"name": "kueue.x-k8s.io/admission"}]);
        v["upgradeStrategy"] = json!({"type": "Recreate"});
        assert_eq!(hash_without_replicas_and_workers_to_delete(&spec(v)), h);
        // An absent scaleStrategy, an empty one and one the autoscaler filled hash alike (KubeRay's is
        // a value struct); the chaos I4 check recomputes this hash on a live active cluster.
        let mut absent = base();
        absent["workerGroupSpecs"][0]
            .as_object_mut()
            .unwrap()
            .remove("scaleStrategy");
        let mut empty = base();
        empty["workerGroupSpecs"][0]["scaleStrategy"] = json!({});
        assert_eq!(hash_without_replicas_and_workers_to_delete(&spec(absent)), h);
        assert_eq!(hash_without_replicas_and_workers_to_delete(&spec(empty)), h);
    }

    #[test]
    fn template_changes_do() {
        let h = hash_without_replicas_and_workers_to_delete(&spec(base()));
        let mut v = base();
        v["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = json!("ray:2");
        assert_ne!(hash_without_replicas_and_workers_to_delete(&spec(v)), h);
        let mut v = base();
        v["rayVersion"] = json!("2.53.0");
        assert_ne!(hash_without_replicas_and_workers_to_delete(&spec(v)), h);
    }

    #[test]
    fn appended_groups_match_on_the_prefix() {
        let old = spec(base());
        let mut v = base();
        let mut extra = v["workerGroupSpecs"][0].clone();
        extra["groupName"] = json!("g2");
        v["workerGroupSpecs"].as_array_mut().unwrap().push(extra);
        let new = spec(v);
        assert_ne!(
            hash_without_replicas_and_workers_to_delete(&new),
            hash_without_replicas_and_workers_to_delete(&old)
        );
        assert_eq!(
            hash_of_first_groups(&new, 1),
            hash_without_replicas_and_workers_to_delete(&old)
        );
    }

    #[test]
    fn recreate_strategy_decisions() {
        let mut v = serde_json::json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"}, "spec": base()});
        v["spec"]["upgradeStrategy"] = json!({"type": "Recreate"});
        let rc: RayCluster = serde_json::from_value(v.clone()).unwrap();
        let h = hash_without_replicas_and_workers_to_delete(&rc.spec);
        let same = head_pod_stamp(&h, "v1.7.0");
        let stale = head_pod_stamp("OLDHASH", "v1.7.0");
        let other_version = head_pod_stamp("OLDHASH", "v1.6.0");
        assert_eq!(recreate_decision(&rc, None, "v1.7.0"), RecreateDecision::Keep);
        assert_eq!(
            recreate_decision(&rc, Some(&same), "v1.7.0"),
            RecreateDecision::Keep
        );
        assert_eq!(
            recreate_decision(&rc, Some(&stale), "v1.7.0"),
            RecreateDecision::RecreateAll
        );
        assert_eq!(
            recreate_decision(&rc, Some(&other_version), "v1.7.0"),
            RecreateDecision::Restamp(same.clone())
        );
        assert_eq!(
            recreate_decision(&rc, Some(&BTreeMap::new()), "v1.7.0"),
            RecreateDecision::Keep
        );
        v["spec"]["upgradeStrategy"] = json!({"type": "None"});
        let none: RayCluster = serde_json::from_value(v).unwrap();
        assert_eq!(
            recreate_decision(&none, Some(&stale), "v1.7.0"),
            RecreateDecision::Keep
        );
    }

    #[test]
    fn base32hex_matches_rfc4648_vectors() {
        assert_eq!(base32_hex(b"f"), "CO======");
        assert_eq!(base32_hex(b"fooba"), "CPNMUOJ1");
        assert_eq!(base32_hex(b"foobar"), "CPNMUOJ1E8======");
    }
}
