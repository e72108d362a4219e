//! Topology (TAS): ordered node-label levels, widest first. Its rules are in `tas.rs`; placement
//! over it in `queue/tas.rs`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "Topology",
    doc = "Topology lists the node-label levels of a topology for topology-aware scheduling.",
    plural = "topologies",
    shortname = "topo",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpec {
    /// Levels from the widest to the narrowest (1..16).
    #[serde(default)]
    pub levels: Vec<TopologyLevel>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyLevel {
    pub node_label: String,
}
