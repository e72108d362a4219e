//! The web view's Topology domains: for each ResourceFlavor that names a Topology, the lowest-level
//! domains of its Nodes grouped under the higher levels, each with its Nodes, allocatable, what
//! admitted Workloads' `topologyAssignment`s hold there, what pods TAS did not place request there,
//! what is free, and which Workloads have pods there. The numbers come from the queue's own TAS
//! snapshot (`queue::tas`) over the Topologies, Nodes, non-TAS pods' sums and Workloads the admission
//! loop reads, so the view cannot disagree with placement. Every
//! list is bounded: the page stays small whatever the cluster holds.

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;

use super::model::Snapshot;
use crate::api::kueue::{ResourceFlavor, Workload};
use crate::queue::requests::Requests;
use crate::queue::tas::TasCluster;
use crate::queue::topology::check_domain_count;
use crate::queue::{Admission, FlavorModel, WorkloadKey, WorkloadModel, convert};

/// Domains shown per flavor.
pub const DOMAIN_ROWS: usize = 100;
/// Nodes named per domain.
pub const DOMAIN_NODES: usize = 4;
/// Workloads named per domain.
pub const DOMAIN_WORKLOADS: usize = 10;
/// Resource columns per flavor.
pub const DOMAIN_RESOURCES: usize = 8;
/// Shown when the flavor's Nodes have them, whether a ClusterQueue covers them or not.
const ALWAYS: [&str; 3] = ["cpu", "memory", "nvidia.com/gpu"];

/// The domains of one ResourceFlavor that names a Topology.
#[derive(Clone, Debug, PartialEq)]
pub struct FlavorDomains {
    pub flavor: String,
    pub topology: String,
    /// The Topology's node labels, widest first (none when it does not exist).
    pub levels: Vec<String>,
    /// The columns: what the flavor's ClusterQueues cover, and [`ALWAYS`] when its Nodes have them;
    /// at most [`DOMAIN_RESOURCES`].
    pub resources: Vec<String>,
    /// Why no domain is shown (no such Topology, no Node in it).
    pub note: Option<String>,
    /// Whether what pods TAS did not place request is counted: `false` until the admission loop has
    /// listed the pods, when `free` leaves them out (so is at most the real room) and placement
    /// places nothing in this flavor.
    pub non_tas_counted: bool,
    /// The first [`DOMAIN_ROWS`] lowest-level domains, in domain order (so grouped by the levels above).
    pub rows: Vec<DomainRow>,
    pub rows_total: usize,
}

/// One lowest-level domain. Amounts are per column of [`FlavorDomains::resources`], in accounting units.
#[derive(Clone, Debug, PartialEq)]
pub struct DomainRow {
    /// Its label value at every level, widest first.
    pub values: Vec<String>,
    /// Its first [`DOMAIN_NODES`] Nodes.
    pub nodes: Vec<String>,
    pub nodes_total: usize,
    pub allocatable: Vec<i64>,
    /// What pods TAS did not place request on its Nodes.
    pub non_tas: Vec<i64>,
    /// What admitted Workloads' topology assignments hold there.
    pub held: Vec<i64>,
    pub free: Vec<i64>,
    /// The first [`DOMAIN_WORKLOADS`] admitted Workloads with pods there, as (namespace, name).
    pub workloads: Vec<(String, String)>,
    pub workloads_total: usize,
}

/// An admitted Workload with a topology assignment, as TAS counts it.
struct Held {
    model: WorkloadModel,
    admission: Admission,
}

/// The Workloads whose topology assignments hold room: quota reserved, not finished, not replaced
/// by a reserved slice. One that does not convert, or names more domains than its pods, is left out.
fn held(workloads: &[std::sync::Arc<Workload>]) -> Vec<Held> {
    let mut out = Vec::new();
    for w in workloads
        .iter()
        .filter(|w| w.has_quota_reservation() && !w.is_finished())
    {
        let Some(a) = w.admission() else { continue };
        let assigned = a.pod_set_assignments.iter().filter_map(|p| {
            let ta = p.topology_assignment.as_ref()?;
            Some(check_domain_count(ta, i64::from(p.count.unwrap_or(0))))
        });
        let assigned: Result<Vec<()>, String> = assigned.collect();
        if !assigned.is_ok_and(|a| !a.is_empty()) {
            continue;
        }
        let model = convert::workload_model(w, &a.cluster_queue, BTreeMap::new());
        if let (Ok(model), Ok(admission)) = (model, convert::admission_model(a)) {
            out.push(Held { model, admission });
        }
    }
    let replaced: BTreeSet<WorkloadKey> = out
        .iter()
        .filter_map(|h| h.model.replacement_for.clone())
        .collect();
    out.retain(|h| !replaced.contains(&h.model.key));
    out
}

/// Every ResourceFlavor that names a Topology, with its domains; none when no flavor does.
pub fn domains(snap: &Snapshot) -> Vec<FlavorDomains> {
    let tas: Vec<(&ResourceFlavor, &str)> = snap
        .flavors
        .iter()
        .filter_map(|f| {
            let t = f.spec.as_ref()?.topology_name.as_deref()?;
            (!t.is_empty()).then_some((&**f, t))
        })
        .collect();
    if tas.is_empty() {
        return Vec::new();
    }
    // A Node that does not convert is left out here as the admission loop leaves it out.
    let (cluster, _) = convert::tas_cluster(
        snap.topologies.iter().map(|t| &**t),
        snap.nodes.iter().map(|n| &**n),
    );
    // Until the admission loop has listed the pods, the view shows the nodes' room without them,
    // saying so (the loop places nothing then).
    let counted = snap.non_tas.is_some();
    let cluster = cluster.with_non_tas(Some(snap.non_tas.clone().unwrap_or_default()));
    let held = held(&snap.workloads);
    tas.into_iter()
        .map(|(f, topology)| {
            let mut d = flavor_domains(snap, &cluster, f, topology, &held);
            d.non_tas_counted = counted;
            d
        })
        .collect()
}

/// The resources the ClusterQueues giving quota in `flavor` cover.
fn covered(snap: &Snapshot, flavor: &str) -> BTreeSet<String> {
    snap.cluster_queues
        .iter()
        .flat_map(|cq| cq.spec.resource_groups.iter().flatten())
        .filter(|g| g.flavors.iter().any(|f| f.name == flavor))
        .flat_map(|g| g.covered_resources.iter().cloned())
        .collect()
}

fn flavor_domains(
    snap: &Snapshot,
    cluster: &TasCluster,
    f: &ResourceFlavor,
    topology: &str,
    held: &[Held],
) -> FlavorDomains {
    let mut out = FlavorDomains {
        flavor: f.name_any(),
        topology: topology.to_string(),
        levels: Vec::new(),
        resources: Vec::new(),
        note: None,
        non_tas_counted: true,
        rows: Vec::new(),
        rows_total: 0,
    };
    let Some(levels) = cluster.topologies.get(topology) else {
        out.note = Some(format!("Topology {topology:?} does not exist"));
        return out;
    };
    out.levels = levels.clone();
    let tas = FlavorModel::try_from(f)
        .map_err(|e| e.to_string())
        .and_then(|model| cluster.snapshot(&model, topology, held.iter().map(|h| (&h.model, &h.admission))));
    let tas = match tas {
        Ok(t) => t,
        Err(why) => {
            out.note = Some(why);
            return out;
        }
    };
    let covered = covered(snap, &out.flavor);
    let present = |r: &str| {
        tas.leaves()
            .any(|l| l.allocatable.get(r).is_some_and(|a| a.0 > 0))
    };
    out.resources = ALWAYS
        .iter()
        .filter(|r| covered.contains(**r) || present(r))
        .map(|r| r.to_string())
        .chain(covered.iter().filter(|r| !ALWAYS.contains(&r.as_str())).cloned())
        .take(DOMAIN_RESOURCES)
        .collect();
    // Which Workloads have pods in each leaf (by its values at every level).
    let mut there: BTreeMap<&[String], BTreeSet<(&str, &str)>> = BTreeMap::new();
    for h in held {
        for psa in &h.admission.pod_set_assignments {
            let Some(p) = psa
                .topology
                .as_ref()
                .filter(|_| psa.flavors.values().any(|n| *n == out.flavor))
            else {
                continue;
            };
            for d in p.domains.iter().filter(|d| d.count > 0) {
                if let Some(leaf) = tas.leaf_values(&p.levels, &d.values) {
                    let key = &h.model.key;
                    there.entry(leaf).or_default().insert((&key.namespace, &key.name));
                }
            }
        }
    }
    let free = tas.free_per_leaf();
    let column = |m: Option<&Requests>| -> Vec<i64> {
        out.resources
            .iter()
            .map(|r| m.and_then(|m| m.get(r)).map_or(0, |a| a.0))
            .collect()
    };
    let mut rows = Vec::new();
    let mut total = 0;
    for leaf in tas.leaves() {
        total += 1;
        if rows.len() >= DOMAIN_ROWS {
            continue;
        }
        let wls = there.get(leaf.values);
        rows.push(DomainRow {
            values: leaf.values.to_vec(),
            nodes: leaf.nodes.iter().take(DOMAIN_NODES).cloned().collect(),
            nodes_total: leaf.nodes.len(),
            allocatable: column(Some(leaf.allocatable)),
            non_tas: column(Some(leaf.non_tas)),
            held: column(Some(leaf.held)),
            free: column(free.get(leaf.values)),
            workloads: wls
                .into_iter()
                .flatten()
                .take(DOMAIN_WORKLOADS)
                .map(|(ns, n)| (ns.to_string(), n.to_string()))
                .collect(),
            workloads_total: wls.map_or(0, BTreeSet::len),
        });
    }
    out.rows = rows;
    out.rows_total = total;
    if total == 0 {
        out.note = Some(no_nodes_note(f));
    }
    out
}

/// Why a Topology has no domain for `f`.
fn no_nodes_note(f: &ResourceFlavor) -> String {
    let labels = f
        .spec
        .as_ref()
        .and_then(|s| s.node_labels.as_ref())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let l: Vec<String> = l.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!(", carries the flavor's node labels ({})", l.join(", "))
        })
        .unwrap_or_default();
    format!("no Node is in this topology: none is Ready, not cordoned{labels} and labelled at every level")
}

#[cfg(test)]
#[path = "domains_tests.rs"]
mod tests;
