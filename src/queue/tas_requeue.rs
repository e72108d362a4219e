//! Which ClusterQueues a change of the TAS cluster (Topologies, Nodes, non-TAS pods' requests)
//! concerns: those naming a TAS flavor whose view changed. Kueue's TAS controllers react to a Node
//! only for the flavors it matches (`pkg/controller/tas/resource_flavor.go`, `nodeHandler`), retry
//! the ClusterQueues using those flavors when non-TAS pods free room
//! (`pod_usage_controller.go`) and those using a Topology whose levels changed
//! (`topology_controller.go`); the requeue then takes in each one's cohort tree
//! (`pkg/cache/queue/inadmissible_workloads.go`, `NotifyRetryInadmissible`), which the scheduler's
//! dirty cohort roots do here.
//!
//! A flavor's view is what its placement reads (`TasCluster::snapshot`): its Topology's levels,
//! whether non-TAS pods are listed yet, and the schedulable Nodes that carry its node labels and
//! every level's label, each with what non-TAS pods request there. It is compared as a fingerprint
//! (the levels, the node count and a wrapping sum of per-node hashes), so the order Nodes come in
//! does not matter (an informer's store keeps none) and nothing is allocated per node.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use super::model::{ClusterQueueModel, FlavorModel};
use super::tas::{TasCluster, TasNode};

/// One flavor's view of a `TasCluster`, as a fingerprint.
#[derive(Debug, PartialEq, Eq)]
struct View<'a> {
    /// `None`: its Topology is missing (placement fails whatever the Nodes).
    levels: Option<&'a [String]>,
    listed: bool,
    nodes: usize,
    sum: u64,
}

/// The Nodes `TasTree::new` builds a flavor's domains from.
fn in_view(node: &TasNode, flavor: &FlavorModel, levels: &[String]) -> bool {
    node.schedulable
        && !levels.is_empty()
        && flavor
            .node_labels
            .iter()
            .all(|(k, v)| node.labels.get(k) == Some(v))
        && levels.iter().all(|l| node.labels.contains_key(l))
}

/// A node with what non-TAS pods request on it. `DefaultHasher::new` has fixed keys: equal nodes
/// hash equal in the two clusters compared.
fn node_hash(node: &TasNode, cluster: &TasCluster) -> u64 {
    let mut h = DefaultHasher::new();
    node.hash(&mut h);
    cluster
        .non_tas
        .as_deref()
        .and_then(|u| u.get(&node.name))
        .hash(&mut h);
    h.finish()
}

/// The views of `flavors` (all TAS flavors), in their order; each node is hashed at most once.
fn views<'a>(cluster: &'a TasCluster, flavors: &[&FlavorModel]) -> Vec<View<'a>> {
    let mut views: Vec<View<'a>> = flavors
        .iter()
        .map(|f| View {
            levels: f
                .topology
                .as_ref()
                .and_then(|t| cluster.topologies.get(t))
                .map(Vec::as_slice),
            listed: cluster.non_tas.is_some(),
            nodes: 0,
            sum: 0,
        })
        .collect();
    for node in &cluster.nodes {
        let mut hash = None;
        for (f, v) in flavors.iter().zip(views.iter_mut()) {
            if !v.levels.is_some_and(|l| in_view(node, f, l)) {
                continue;
            }
            let h = *hash.get_or_insert_with(|| node_hash(node, cluster));
            v.nodes += 1;
            v.sum = v.sum.wrapping_add(h);
        }
    }
    views
}

/// The TAS flavors among `flavors` whose view differs between `old` and `new`.
pub(super) fn changed_flavors<'f>(
    flavors: &'f BTreeMap<String, FlavorModel>,
    old: &TasCluster,
    new: &TasCluster,
) -> BTreeSet<&'f str> {
    let tas: Vec<&FlavorModel> = flavors.values().filter(|f| f.topology.is_some()).collect();
    let (before, after) = (views(old, &tas), views(new, &tas));
    tas.iter()
        .zip(before.iter().zip(&after))
        .filter(|(_, (b, a))| b != a)
        .map(|(f, _)| f.name.as_str())
        .collect()
}

/// The ClusterQueues naming any of `flavors` in their resource groups (Kueue's
/// `ClusterQueuesUsingFlavor`).
pub(super) fn users<'c>(
    cqs: &'c BTreeMap<String, ClusterQueueModel>,
    flavors: &BTreeSet<&str>,
) -> impl Iterator<Item = &'c str> {
    cqs.values()
        .filter(|cq| {
            cq.resource_groups
                .iter()
                .flat_map(|g| &g.flavors)
                .any(|f| flavors.contains(f.name.as_str()))
        })
        .map(|cq| cq.name.as_str())
}
