//! What pods TAS did not place take on each node (Kueue's `nonTasUsageCache`): a scheduled pod
//! (`spec.nodeName` set) that has not terminated (phase neither Succeeded nor Failed) and carries no
//! topology annotation holds its requests (Kubernetes' pod rules, see [`super::requests`]) plus one
//! `pods` on its node. TAS subtracts that from the node's allocatable (`TasCluster::with_non_tas`).
//!
//! Kept as one small entry per such pod (its node and requests), so a change or a deletion can be
//! taken back, and a per-node sum the snapshot shares without copying.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::QueueError;
use super::amount::Amount;
use super::requests::{PODS, Requests, pod_requests};
use crate::api::kueue::tas::is_tas_pod;

/// Per node name: what non-TAS pods request there, one `pods` per pod included.
pub type NodeUsage = BTreeMap<String, Requests>;

/// What one non-TAS pod holds, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodUsage {
    pub node: String,
    pub requests: Requests,
}

/// A pod by namespace and name.
pub type PodKey = (String, String);

pub fn pod_key(pod: &Pod) -> PodKey {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

/// What `pod` holds outside TAS: `None` for a TAS pod, one not scheduled, or one terminated. A pod
/// being deleted still holds its room until it is gone (Kueue counts it too).
pub fn non_tas_usage(pod: &Pod) -> Result<Option<PodUsage>, QueueError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(None);
    };
    let Some(node) = spec.node_name.as_ref().filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) || is_tas_pod(&pod.metadata) {
        return Ok(None);
    }
    Ok(Some(PodUsage {
        node: node.clone(),
        requests: pod_requests("spec", spec)?,
    }))
}

/// The non-TAS pods of the cluster and their sum per node.
#[derive(Clone, Debug, Default)]
pub struct NonTasPods {
    pods: HashMap<PodKey, PodUsage>,
    per_node: Arc<NodeUsage>,
}

fn one_pod() -> Requests {
    Requests::from([(PODS.to_string(), Amount(1))])
}

impl NonTasPods {
    /// Sets what the pod `key` holds (`None`: nothing, as when it is gone); whether any node's sum
    /// changed.
    pub fn set(&mut self, key: PodKey, usage: Option<PodUsage>) -> bool {
        if self.pods.get(&key) == usage.as_ref() {
            return false;
        }
        if let Some(old) = self.pods.remove(&key) {
            self.remove(&old);
        }
        if let Some(u) = usage {
            self.add(&u);
            self.pods.insert(key, u);
        }
        true
    }

    fn add(&mut self, u: &PodUsage) {
        let node = Arc::make_mut(&mut self.per_node)
            .entry(u.node.clone())
            .or_default();
        for (r, v) in u.requests.iter().chain(one_pod().iter()) {
            let e = node.entry(r.clone()).or_default();
            *e = Amount(e.0.saturating_add(v.0));
        }
    }

    fn remove(&mut self, u: &PodUsage) {
        let per_node = Arc::make_mut(&mut self.per_node);
        let Some(node) = per_node.get_mut(&u.node) else {
            return;
        };
        for (r, v) in u.requests.iter().chain(one_pod().iter()) {
            let e = node.entry(r.clone()).or_default();
            *e = Amount(e.0.saturating_sub(v.0));
        }
        // The last pod gone: drop the node, so a sum never keeps zeros (or drift) around.
        if node.get(PODS).is_none_or(|p| p.0 <= 0) {
            per_node.remove(&u.node);
        }
    }

    /// The sum per node, shared (a later change copies it).
    pub fn per_node(&self) -> Arc<NodeUsage> {
        self.per_node.clone()
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

#[cfg(test)]
#[path = "non_tas_tests.rs"]
pub(super) mod tests;
