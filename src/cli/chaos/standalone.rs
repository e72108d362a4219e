//! I2 for queue-labelled RayClusters with a chain of their own: per group, the live pods of each
//! request shape stay within what the cluster's latest quota-holding Workload reserves for that group
//! at that shape. Pods are held to their own requests, not the cluster's current spec: after an edit
//! to new requests the old pods are still covered by the old Workload while they stop, and a new pod
//! is covered only by a Workload with the new requests.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use crate::api::kueue::constants::label;
use crate::api::kueue::{PodSet, Workload};
use crate::api::ray::RayCluster;
use crate::queue::requests::{Requests, pod_requests};
use crate::rayservice::job::gate;

/// The violations of I2 among the standalone clusters of `rcs`.
pub(super) fn violations(rcs: &[RayCluster], wls: &[Workload], pods: &[Pod]) -> Vec<String> {
    let mut bad = Vec::new();
    for rc in rcs.iter().filter(|r| gate::standalone_managed(r)) {
        let uid = rc.metadata.uid.clone().unwrap_or_default();
        let name = rc.name_any();
        let chain: Vec<&Workload> = wls
            .iter()
            .filter(|w| w.labels().get(label::JOB_UID) == Some(&uid))
            .collect();
        let holding = super::chain::latest_holding(&chain);
        let podsets = holding.map(|w| w.spec.pod_sets.as_slice()).unwrap_or_default();
        for ((group, requests), n) in live_shapes(&name, rc.namespace().as_deref(), pods) {
            let cap = covered(podsets, &group, &requests);
            if n > cap {
                bad.push(format!(
                    "I2: RayCluster {name} group {group} has {n} pods requesting {requests:?}, its Workload {} covers {cap} of them",
                    holding.map(|w| w.name_any()).unwrap_or_else(|| "(none)".into())
                ));
            }
        }
    }
    bad
}

/// Live (not terminating) pods of cluster `name`, counted per (podset name, per-pod requests).
fn live_shapes(name: &str, ns: Option<&str>, pods: &[Pod]) -> BTreeMap<(String, Requests), i64> {
    let mut out = BTreeMap::new();
    for p in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && p.namespace().as_deref() == ns)
    {
        let labels = p.labels();
        if labels.get("ray.io/cluster").map(String::as_str) != Some(name) {
            continue;
        }
        let group = if labels.get("ray.io/node-type").map(String::as_str) == Some("head") {
            "head".to_string()
        } else {
            labels
                .get("ray.io/group")
                .cloned()
                .unwrap_or_default()
                .to_lowercase()
        };
        let requests = p
            .spec
            .as_ref()
            .and_then(|s| pod_requests("spec", s).ok())
            .unwrap_or_default();
        *out.entry((group, requests)).or_default() += 1;
    }
    out
}

/// Pods of `group` at `requests` that `podsets` reserve.
fn covered(podsets: &[PodSet], group: &str, requests: &Requests) -> i64 {
    podsets
        .iter()
        .filter(|ps| ps.name.as_deref() == Some(group))
        .filter(|ps| {
            ps.template
                .spec
                .as_ref()
                .and_then(|s| pod_requests("spec", s).ok())
                .as_ref()
                == Some(requests)
        })
        .map(|ps| i64::from(ps.count().max(0)))
        .sum()
}
