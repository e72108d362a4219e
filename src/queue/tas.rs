//! Topology-aware placement, as Kueue's `TASFlavorSnapshot` (`pkg/cache/scheduler/tas_flavor_snapshot.go`)
//! does it for a flavor that names a Topology: the Nodes of the flavor grouped into a tree of
//! domains (one level per node label of the Topology), each leaf's free capacity (allocatable minus
//! what pods TAS did not place request on its nodes, see [`super::non_tas`], minus what admitted TAS
//! workloads' assignments hold there), and for a podset the domains its pods go to.
//!
//! - required level: all pods (or all slices) in one domain of that level, or no placement;
//! - preferred level: one domain of that level if one has room, else one of the level above, and so
//!   on; at the top, the fewest domains greedily (Kueue's BestFit);
//! - unconstrained (explicit, implied by a TAS-only ClusterQueue, or slices only): anywhere,
//!   filling the domains with the least free room first (Kueue's LeastFreeCapacity, TASProfileMixed
//!   being on by default).
//!
//! Then each chosen domain's pods are spread over its children down to the lowest level, each time
//! over as few children as possible. Not ported: leader/worker podset groups, multi-layer slices,
//! balanced placement (alpha), preferred node affinity scoring, node replacement.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use super::amount::Amount;
use super::model::{
    Admission, FlavorModel, PodSetAssignment, PodSetModel, Requirement, Taint, TaintEffect, Toleration,
    WorkloadModel,
};
use super::non_tas::NodeUsage;
use super::requests::Requests;
use crate::api::kueue::tas::{DomainAssignment, HOSTNAME_LABEL};

pub use super::topology::{Placement, TopologyRequest};

pub use super::requests::PODS;

/// A Node as TAS sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TasNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `.status.allocatable` in accounting units, `pods` included.
    pub allocatable: Requests,
    pub taints: Vec<Taint>,
    /// Ready and not cordoned (`spec.unschedulable`).
    pub schedulable: bool,
}

#[derive(Clone, Debug, Default)]
struct Domain {
    /// The label values from the top level down to this domain's level.
    values: Vec<String>,
    children: Vec<usize>,
}

#[derive(Clone, Debug, Default)]
struct Leaf {
    domain: usize,
    /// Allocatable summed over the leaf's nodes.
    allocatable: Requests,
    /// What non-TAS pods request on the leaf's nodes.
    non_tas: Requests,
    /// Per node allocatable less its non-TAS pods' requests (never below zero: an overfull node
    /// takes no room from its neighbours), summed over the leaf's nodes.
    free: Requests,
    /// Its nodes' names (for the web view; placement reads none).
    nodes: Vec<String>,
    /// Only for a hostname leaf (one node): what the scheduler's filters read.
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
}

#[derive(Clone, Copy, Debug, Default)]
struct State {
    pods: i64,
    slices: i64,
}

/// One leaf domain as [`TasSnapshot::leaves`] shows it.
#[derive(Clone, Copy, Debug)]
pub struct LeafCapacity<'a> {
    /// Its label values from the top level down.
    pub values: &'a [String],
    pub nodes: &'a [String],
    /// Summed over its nodes, `pods` included.
    pub allocatable: &'a Requests,
    /// What pods TAS did not place request on its nodes, one `pods` per pod included.
    pub non_tas: &'a Requests,
    /// What admitted assignments hold there, one `pods` per pod included.
    pub held: &'a Requests,
}

/// One flavor's topology: its domain tree (shared, built once per set of Nodes) and the usage on it.
#[derive(Clone, Debug)]
pub struct TasSnapshot {
    tree: Arc<TasTree>,
    /// Per leaf: held by admitted TAS assignments.
    usage: Vec<Requests>,
}

impl std::ops::Deref for TasSnapshot {
    type Target = TasTree;
    fn deref(&self) -> &TasTree {
        &self.tree
    }
}

/// The domain tree of a flavor's Nodes, without usage.
#[derive(Debug)]
pub struct TasTree {
    topology: String,
    levels: Vec<String>,
    lowest_is_host: bool,
    domains: Vec<Domain>,
    per_level: Vec<Vec<usize>>,
    roots: Vec<usize>,
    leaves: Vec<Leaf>,
    /// leaf values (all levels) -> leaf index
    leaf_index: BTreeMap<Vec<String>, usize>,
    /// With a hostname lowest level: host -> leaf index (hostname-only assignments name only it).
    host_index: HashMap<String, usize>,
}

/// Why nodes were left out, for the not-fit message (Kueue's `tasExclusionStats`).
#[derive(Default)]
struct Exclusions {
    total: usize,
    node_selector: usize,
    affinity: usize,
    /// Outside the domain the podset's running pods share (`PodSetModel::running`).
    elsewhere: usize,
    taints: BTreeMap<String, usize>,
    resources: BTreeMap<String, usize>,
}

impl Exclusions {
    fn any(&self) -> bool {
        self.node_selector > 0
            || self.affinity > 0
            || self.elsewhere > 0
            || !self.taints.is_empty()
            || !self.resources.is_empty()
    }
    fn reasons(&self) -> String {
        let mut r = Vec::new();
        if self.node_selector > 0 {
            r.push(format!("nodeSelector: {}", self.node_selector));
        }
        if self.affinity > 0 {
            r.push(format!("affinity: {}", self.affinity));
        }
        if self.elsewhere > 0 {
            r.push(format!(
                "outside the domain its running pods are in: {}",
                self.elsewhere
            ));
        }
        for (t, n) in &self.taints {
            r.push(format!("taint {t:?}: {n}"));
        }
        for (res, n) in &self.resources {
            r.push(format!("resource {res:?}: {n}"));
        }
        r.sort();
        r.join(", ")
    }
}

fn taint_text(t: &Taint) -> String {
    let effect = match t.effect {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    };
    if t.value.is_empty() {
        format!("{}:{effect}", t.key)
    } else {
        format!("{}={}:{effect}", t.key, t.value)
    }
}

/// `requests.CountInWithLimitingResource`: how many pods of `per_pod` fit in `free` less `used`, and
/// the resource that limits it (ties to the alphabetically first).
fn count_in(per_pod: &Requests, free: &Requests, used: &Requests) -> (i64, Option<String>) {
    let mut best: Option<(i64, &str)> = None;
    for (r, req) in per_pod {
        if req.0 <= 0 {
            continue;
        }
        let total = free.get(r).copied().unwrap_or_default().0;
        let have = total
            .saturating_sub(used.get(r).copied().unwrap_or_default().0)
            .max(0);
        let n = have / req.0;
        if best.is_none_or(|(b, _)| n < b) {
            best = Some((n, r));
        }
    }
    match best {
        Some((n, r)) => (n, Some(r.to_string())),
        None => (i64::MAX, None),
    }
}

fn sub(a: &mut Requests, b: &Requests) {
    for (r, v) in b {
        let e = a.entry(r.clone()).or_default();
        *e = Amount(e.0.saturating_sub(v.0));
    }
}

fn add(a: &mut Requests, b: &Requests, times: i64) {
    for (r, v) in b {
        let e = a.entry(r.clone()).or_default();
        *e = Amount(e.0.saturating_add(v.0.saturating_mul(times)));
    }
}

impl TasSnapshot {
    /// The tree of `nodes` that carry every level's label and are schedulable. Nodes not matching the
    /// flavor's node labels should be left out by the caller (Kueue's snapshot holds only those).
    pub fn new(topology: &str, levels: &[String], nodes: &[TasNode]) -> TasSnapshot {
        TasSnapshot::with_non_tas(topology, levels, nodes, &NodeUsage::new())
    }

    /// [`TasSnapshot::new`] with what non-TAS pods request on each node taken from its room.
    pub fn with_non_tas(
        topology: &str,
        levels: &[String],
        nodes: &[TasNode],
        non_tas: &NodeUsage,
    ) -> TasSnapshot {
        TasSnapshot::over(Arc::new(TasTree::new(topology, levels, nodes.iter(), non_tas)))
    }

    /// A snapshot of `tree` with nothing in use.
    fn over(tree: Arc<TasTree>) -> TasSnapshot {
        let usage = vec![Requests::new(); tree.leaves.len()];
        TasSnapshot { tree, usage }
    }
}

impl TasTree {
    fn new<'a>(
        topology: &str,
        levels: &[String],
        nodes: impl Iterator<Item = &'a TasNode>,
        non_tas: &NodeUsage,
    ) -> TasTree {
        let lowest_is_host = levels.last().is_some_and(|l| l == HOSTNAME_LABEL);
        let mut s = TasTree {
            topology: topology.to_string(),
            levels: levels.to_vec(),
            lowest_is_host,
            domains: Vec::new(),
            per_level: vec![Vec::new(); levels.len()],
            roots: Vec::new(),
            leaves: Vec::new(),
            leaf_index: BTreeMap::new(),
            host_index: HashMap::new(),
        };
        if levels.is_empty() {
            return s;
        }
        let mut index: BTreeMap<Vec<String>, usize> = BTreeMap::new();
        for node in nodes.filter(|n| n.schedulable) {
            let Some(values) = levels
                .iter()
                .map(|l| node.labels.get(l).cloned())
                .collect::<Option<Vec<String>>>()
            else {
                continue;
            };
            let mut parent: Option<usize> = None;
            for depth in 0..levels.len() {
                let key = values[..=depth].to_vec();
                let id = match index.get(&key) {
                    Some(id) => *id,
                    None => {
                        let id = s.domains.len();
                        s.domains.push(Domain {
                            values: key.clone(),
                            children: Vec::new(),
                        });
                        index.insert(key, id);
                        s.per_level[depth].push(id);
                        match parent {
                            Some(p) => s.domains[p].children.push(id),
                            None => s.roots.push(id),
                        }
                        id
                    }
                };
                parent = Some(id);
            }
            let leaf_domain = parent.unwrap_or_default();
            let leaf = match s.leaf_index.get(&values) {
                Some(l) => *l,
                None => {
                    s.leaves.push(Leaf {
                        domain: leaf_domain,
                        ..Default::default()
                    });
                    s.leaf_index.insert(values.clone(), s.leaves.len() - 1);
                    if lowest_is_host && let Some(host) = values.last() {
                        s.host_index.entry(host.clone()).or_insert(s.leaves.len() - 1);
                    }
                    s.leaves.len() - 1
                }
            };
            let leaf = &mut s.leaves[leaf];
            add(&mut leaf.allocatable, &node.allocatable, 1);
            let mut free = node.allocatable.clone();
            if let Some(used) = non_tas.get(&node.name) {
                add(&mut leaf.non_tas, used, 1);
                sub(&mut free, used);
                free.values_mut().for_each(|v| *v = v.clamp_zero());
            }
            add(&mut leaf.free, &free, 1);
            leaf.nodes.push(node.name.clone());
            if lowest_is_host {
                leaf.labels = node.labels.clone();
                leaf.taints = node.taints.clone();
            }
        }
        s
    }
}

impl TasSnapshot {
    pub fn levels(&self) -> &[String] {
        &self.levels
    }

    /// Whether the topology has the level a request names (Kueue's `HasLevel`).
    pub fn has_level(&self, req: &TopologyRequest) -> bool {
        let named = [&req.required, &req.preferred, &req.slice_topology];
        named
            .iter()
            .all(|l| l.as_ref().is_none_or(|l| self.levels.contains(l)))
    }

    fn leaf_of(&self, levels: &[String], values: &[String]) -> Option<usize> {
        if levels.len() == self.levels.len() && levels == self.levels.as_slice() {
            return self.leaf_index.get(values).copied();
        }
        // A hostname-only assignment: the (first) leaf whose last value is that host.
        if self.lowest_is_host && levels.len() == 1 && levels[0] == HOSTNAME_LABEL {
            return values.last().and_then(|h| self.host_index.get(h)).copied();
        }
        None
    }

    /// Counts what an admitted placement holds: `count` pods of `per_pod` (plus one `pods` each) per
    /// domain. Domains not (or no longer) in the tree are skipped.
    pub fn add_usage(&mut self, placement: &Placement, per_pod: &Requests) {
        for d in &placement.domains {
            if let Some(l) = self.leaf_of(&placement.levels, &d.values) {
                let usage = &mut self.usage[l];
                add(usage, per_pod, i64::from(d.count));
                add(
                    usage,
                    &Requests::from([(PODS.to_string(), Amount(1))]),
                    i64::from(d.count),
                );
            }
        }
    }

    /// Every leaf domain in domain order, with its nodes, allocatable and what is held there.
    pub fn leaves(&self) -> impl Iterator<Item = LeafCapacity<'_>> {
        self.leaf_index.iter().map(|(values, l)| LeafCapacity {
            values,
            nodes: &self.leaves[*l].nodes,
            allocatable: &self.leaves[*l].allocatable,
            non_tas: &self.leaves[*l].non_tas,
            held: &self.usage[*l],
        })
    }

    /// The values at every level of the leaf domain that a placement's domain names (all levels, or
    /// the hostname alone); `None` when it is not in the tree.
    pub fn leaf_values(&self, levels: &[String], values: &[String]) -> Option<&[String]> {
        let l = self.leaf_of(levels, values)?;
        Some(&self.domains[self.leaves[l].domain].values)
    }

    /// Free capacity per leaf domain (its values at every level) after non-TAS pods and the
    /// admitted usage; never below zero (a non-TAS pod may arrive after an admission).
    pub fn free_per_leaf(&self) -> BTreeMap<Vec<String>, Requests> {
        self.leaf_index
            .iter()
            .map(|(k, l)| {
                let mut free = self.leaves[*l].free.clone();
                sub(&mut free, &self.usage[*l]);
                free.values_mut().for_each(|v| *v = v.clamp_zero());
                (k.clone(), free)
            })
            .collect()
    }

    fn not_fit(&self, fit: i64, total: i64, slice_size: i64, ex: &Exclusions) -> String {
        let unit = if slice_size == 1 { "pod" } else { "slice" };
        let mut m = if fit == 0 {
            format!(
                "topology {:?} doesn't allow to fit any of {total} {unit}(s)",
                self.topology
            )
        } else {
            format!(
                "topology {:?} allows to fit only {fit} out of {total} {unit}(s)",
                self.topology
            )
        };
        if ex.any() {
            m.push_str(&format!(
                ". Total nodes: {}; excluded: {}",
                ex.total,
                ex.reasons()
            ));
        }
        m
    }

    /// Where `count` pods of `ps` go, or why they cannot (Kueue's `findTopologyAssignment`, without
    /// leaders). `implied`: the podset asked for nothing but its ClusterQueue is TAS-only.
    ///
    /// Beyond Kueue: the pods `ps.running` names (a replacement slice's podset: pods of the cluster
    /// already serving) are counted in their domains first, never moved, and only the rest is placed
    /// under the request; a required or preferred level keeps the rest in the domain of that level
    /// the running pods share (a cluster's pods stay in one rack across its slices). With no more
    /// pods than are running, the placement is the first of them in their assignment's order (Kueue's
    /// elastic scale-down truncates the previous assignment so).
    pub fn place(
        &self,
        ps: &PodSetModel,
        req: &TopologyRequest,
        implied: bool,
        count: i64,
    ) -> Result<Placement, String> {
        let from = self.output_from();
        let mut at: BTreeMap<usize, i64> = BTreeMap::new();
        let mut outside: Vec<DomainAssignment> = Vec::new();
        let mut rest = count;
        let mut snap: Option<TasSnapshot> = None;
        // The running pods kept, in the order their assignment names them.
        let mut kept: Vec<DomainAssignment> = Vec::new();
        if let Some(running) = ps.running.as_ref().filter(|_| count > 0) {
            let mut per_pod = ps.requests.clone();
            add(&mut per_pod, &Requests::from([(PODS.to_string(), Amount(1))]), 1);
            let s = snap.get_or_insert_with(|| self.clone());
            for d in running.truncated(count).domains.iter().filter(|d| d.count > 0) {
                let n = i64::from(d.count);
                match self.leaf_of(&running.levels, &d.values) {
                    Some(l) => {
                        add(&mut s.usage[l], &per_pod, n);
                        *at.entry(self.leaves[l].domain).or_default() += n;
                        kept.push(DomainAssignment {
                            values: self.domains[self.leaves[l].domain].values[from..].to_vec(),
                            count: d.count,
                        });
                    }
                    // Its node left the tree (cordoned, not Ready): the pods still run there.
                    None if running.levels[..] == self.levels[from..] => {
                        outside.push(d.clone());
                        kept.push(d.clone());
                    }
                    // Named at levels this topology no longer has: placed anew with the rest.
                    None => continue,
                }
                rest -= n;
            }
        }
        if snap.is_some() && rest <= 0 {
            // Nothing new to place (the podset shrank or kept its size): its first pods in the
            // assignment's order, as Kueue's elastic `handleScaleDown` truncates the previous
            // assignment and a same count reuses it as it is.
            return Ok(Placement {
                levels: self.levels[from..].to_vec(),
                domains: kept,
            });
        }
        let base = snap.as_ref().unwrap_or(self);
        let level = req
            .required
            .as_ref()
            .or(req.preferred.as_ref())
            .and_then(|l| self.levels.iter().position(|x| x == l));
        let within = level.and_then(|level| {
            let mut shared = at.keys().map(|d| &self.domains[*d].values[..=level]);
            let first = shared.next()?;
            shared.all(|v| v == first).then(|| first.to_vec())
        });
        let placed = match base.find(ps, req, implied, rest, within.clone()) {
            Err(_) if within.is_some() && req.required.is_none() => base.find(ps, req, implied, rest, None),
            other => other,
        }?;
        for (d, n) in placed {
            *at.entry(d).or_default() += n;
        }
        let mut leaves: Vec<(usize, i64)> = at.into_iter().filter(|(_, n)| *n > 0).collect();
        leaves.sort_by(|a, b| self.domains[a.0].values.cmp(&self.domains[b.0].values));
        let mut domains: Vec<DomainAssignment> = leaves
            .into_iter()
            .map(|(d, n)| DomainAssignment {
                values: self.domains[d].values[from..].to_vec(),
                count: i32::try_from(n).unwrap_or(i32::MAX),
            })
            .collect();
        domains.extend(outside);
        Ok(Placement {
            levels: self.levels[from..].to_vec(),
            domains,
        })
    }

    /// Where a placement's domain values start: only the hostname when that is the lowest level.
    fn output_from(&self) -> usize {
        if self.lowest_is_host {
            self.levels.len() - 1
        } else {
            0
        }
    }

    /// The lowest-level domains `count` pods of `ps` go to and each one's pods, in domain order, or
    /// why they cannot. `within`: only leaves under the domain with these values (from the top).
    fn find(
        &self,
        ps: &PodSetModel,
        req: &TopologyRequest,
        implied: bool,
        count: i64,
        within: Option<Vec<String>>,
    ) -> Result<Vec<(usize, i64)>, String> {
        let mut run = Run {
            s: self,
            st: vec![State::default(); self.domains.len()],
            unconstrained: req.unconstrained || implied || req.slice_only(),
            within,
        };
        let slice_size = match (&req.slice_topology, req.slice_size) {
            (None, _) => 1,
            (Some(_), Some(n)) if n > 0 => i64::from(n),
            (Some(_), _) => return Err("slice topology requested, but slice size not provided".into()),
        };
        let highest = self.levels.first().cloned().unwrap_or_default();
        let lowest = self.levels.last().cloned().unwrap_or_default();
        let key = if let Some(l) = req.required.as_ref().or(req.preferred.as_ref()) {
            l.clone()
        } else if req.slice_only() {
            highest
        } else if req.unconstrained || implied {
            lowest.clone()
        } else {
            return Err("topology level not specified".into());
        };
        let level_of = |k: &str| self.levels.iter().position(|l| l == k);
        let requested = level_of(&key).ok_or_else(|| format!("no requested topology level: {key}"))?;
        let slice_key = req.slice_topology.clone().unwrap_or(lowest);
        let slice_level = level_of(&slice_key)
            .ok_or_else(|| format!("no requested topology level for slices: {slice_key}"))?;
        if requested > slice_level {
            return Err(format!(
                "podset slice topology {slice_key} is above the podset topology {key}"
            ));
        }
        let mut per_pod = ps.requests.clone();
        add(&mut per_pod, &Requests::from([(PODS.to_string(), Amount(1))]), 1);
        let ex = run.fill_in_counts(ps, &per_pod, slice_size, slice_level);
        let required = req.required.is_some();
        let (fit_level, fit) =
            run.find_level_with_fit_domains(requested, count, slice_size, required, &ex)?;
        let mut fit = run.update_counts_to_minimum(&fit, count, slice_size, true);
        let last = self.levels.len() - 1;
        let mut level = fit_level;
        while level < last.min(slice_level) {
            let lower: Vec<usize> = fit
                .iter()
                .flat_map(|d| self.domains[*d].children.clone())
                .collect();
            let lower = run.sorted(&lower);
            fit = run.update_counts_to_minimum(&lower, count, slice_size, true);
            level += 1;
        }
        while level < last {
            let mut next = Vec::new();
            for d in &fit {
                let children = run.sorted(&self.domains[*d].children);
                let pods = run.st[*d].pods;
                next.extend(run.update_counts_to_minimum(&children, pods, 1, false));
            }
            fit = next;
            level += 1;
        }
        fit.sort_by(|a, b| self.domains[*a].values.cmp(&self.domains[*b].values));
        let out: Vec<(usize, i64)> = fit
            .iter()
            .map(|d| (*d, run.st[*d].pods.min(i64::from(i32::MAX))))
            .filter(|(_, n)| *n > 0)
            .collect();
        let placed: i64 = out.iter().map(|(_, n)| n).sum();
        if placed != count {
            // Kueue logs "unexpected remainingCount" here; never admit a partial placement.
            return Err(self.not_fit(placed.min(count), count, 1, &ex));
        }
        Ok(out)
    }
}

/// One placement attempt's per-domain counts.
struct Run<'a> {
    s: &'a TasSnapshot,
    st: Vec<State>,
    unconstrained: bool,
    /// Only the leaves under the domain with these values (from the top level down).
    within: Option<Vec<String>>,
}

fn tolerated(tolerations: &[Toleration], t: &Taint) -> bool {
    t.effect == TaintEffect::PreferNoSchedule || tolerations.iter().any(|tol| tol.tolerates(t))
}

fn affinity_matches(terms: &[Vec<Requirement>], labels: &BTreeMap<String, String>) -> bool {
    terms.is_empty() || terms.iter().any(|term| term.iter().all(|r| r.matches(labels)))
}

impl Run<'_> {
    fn best_fit(&self) -> bool {
        !self.unconstrained
    }

    /// `ps` selects, on some level's label, a value other than the one of leaf domain `d`.
    fn selects_other_domain(&self, ps: &PodSetModel, d: usize) -> bool {
        let values = &self.s.domains[d].values;
        ps.node_selector.iter().any(|(k, v)| {
            self.s
                .levels
                .iter()
                .position(|l| l == k)
                .is_some_and(|i| values.get(i) != Some(v))
        })
    }

    /// Kueue's `fillInCounts`: pods (and slices) that fit in each leaf, rolled up the tree.
    fn fill_in_counts(
        &mut self,
        ps: &PodSetModel,
        per_pod: &Requests,
        slice_size: i64,
        slice_level: usize,
    ) -> Exclusions {
        let mut ex = Exclusions {
            total: self.s.leaves.len(),
            ..Default::default()
        };
        for (li, leaf) in self.s.leaves.iter().enumerate() {
            if self
                .within
                .as_ref()
                .is_some_and(|w| !self.s.domains[leaf.domain].values.starts_with(w))
            {
                ex.elsewhere += 1;
                continue;
            }
            if self.s.lowest_is_host {
                // The scheduler's filters, in its order: taints, node selector, affinity.
                if let Some(t) = leaf.taints.iter().find(|t| !tolerated(&ps.tolerations, t)) {
                    *ex.taints.entry(taint_text(t)).or_default() += 1;
                    continue;
                }
                if ps
                    .node_selector
                    .iter()
                    .any(|(k, v)| leaf.labels.get(k) != Some(v))
                {
                    ex.node_selector += 1;
                    continue;
                }
                if !affinity_matches(&ps.affinity_terms, &leaf.labels) {
                    ex.affinity += 1;
                    continue;
                }
            } else if self.selects_other_domain(ps, leaf.domain) {
                // Beyond Kueue (which filters by node selector only at hostname leaves): a
                // selector on a topology level's label keeps the pods out of every other domain of
                // that level, so they are not counted there. A RayService upgrade's slice pins its
                // running cluster where it runs this way (`rayservice::job::demand::Pins`).
                ex.node_selector += 1;
                continue;
            }
            let (n, limiting) = count_in(per_pod, &leaf.free, &self.s.usage[li]);
            if n == 0
                && let Some(r) = limiting
            {
                *ex.resources.entry(r).or_default() += 1;
            }
            self.st[leaf.domain].pods = n.min(i64::from(i32::MAX));
        }
        for root in self.s.roots.clone() {
            self.roll_up(root, slice_size, slice_level, 0);
        }
        ex
    }

    fn roll_up(&mut self, d: usize, slice_size: i64, slice_level: usize, level: usize) {
        let children = self.s.domains[d].children.clone();
        if children.is_empty() {
            if level == slice_level {
                self.st[d].slices = self.st[d].pods / slice_size;
            }
            return;
        }
        let (mut pods, mut slices) = (0i64, 0i64);
        for c in children {
            self.roll_up(c, slice_size, slice_level, level + 1);
            pods = pods.saturating_add(self.st[c].pods);
            slices = slices.saturating_add(self.st[c].slices);
        }
        self.st[d].pods = pods;
        self.st[d].slices = if level == slice_level {
            pods / slice_size
        } else {
            slices
        };
    }

    /// Kueue's `sortedDomains`: by slices (most first for BestFit, fewest first for
    /// LeastFreeCapacity), then pods ascending, then label values.
    fn sorted(&self, domains: &[usize]) -> Vec<usize> {
        let mut out = domains.to_vec();
        out.sort_by(|a, b| {
            let (sa, sb) = (self.st[*a], self.st[*b]);
            let by_slices = if self.unconstrained {
                sa.slices.cmp(&sb.slices)
            } else {
                sb.slices.cmp(&sa.slices)
            };
            by_slices
                .then(sa.pods.cmp(&sb.pods))
                .then_with(|| self.s.domains[*a].values.cmp(&self.s.domains[*b].values))
        });
        out
    }

    /// Kueue's `findBestFitDomainBy`: the first domain with the smallest count still >= `needed`;
    /// the first domain when none has enough.
    fn best_fit_by(&self, domains: &[usize], needed: i64, count: impl Fn(&State) -> i64) -> usize {
        let mut best: Option<(usize, i64)> = None;
        for d in domains {
            let c = count(&self.st[*d]);
            if c >= needed && best.is_none_or(|(_, b)| c.cmp(&b) == Ordering::Less) {
                best = Some((*d, c));
            }
        }
        best.map_or(domains[0], |(d, _)| d)
    }

    /// Kueue's `findLevelWithFitDomains`: the level at or above `level` with domains holding all
    /// slices (one domain, unless not even the top level has one and the request is not required).
    fn find_level_with_fit_domains(
        &self,
        level: usize,
        count: i64,
        slice_size: i64,
        required: bool,
        ex: &Exclusions,
    ) -> Result<(usize, Vec<usize>), String> {
        let domains = &self.s.per_level[level];
        if domains.is_empty() {
            return Err(format!("no topology domains at level: {}", self.s.levels[level]));
        }
        let sorted = self.sorted(domains);
        let mut top = sorted[0];
        let slices = count / slice_size;
        if self.best_fit() && self.st[top].slices >= slices {
            top = self.best_fit_by(&sorted, slices, |s| s.slices);
        }
        if !self.best_fit() {
            if let Some(d) = sorted.iter().find(|d| self.st[**d].slices >= slices) {
                return Ok((level, vec![*d]));
            }
            if required {
                let max = self.st[sorted[sorted.len() - 1]].pods;
                return Err(self.s.not_fit(max, slices, slice_size, ex));
            }
        }
        if self.st[top].slices >= slices {
            return Ok((level, vec![top]));
        }
        if required {
            return Err(self.s.not_fit(self.st[top].slices, slices, slice_size, ex));
        }
        if level > 0 && !self.unconstrained {
            return self.find_level_with_fit_domains(level - 1, count, slice_size, required, ex);
        }
        let mut results = Vec::new();
        let mut remaining = slices;
        for i in 0..sorted.len() {
            if remaining <= 0 {
                break;
            }
            let mut d = sorted[i];
            if self.best_fit() && self.st[d].slices >= remaining {
                d = self.best_fit_by(&sorted[i..], remaining, |s| s.slices);
            }
            results.push(d);
            remaining -= self.st[d].slices;
        }
        if remaining > 0 {
            return Err(self.s.not_fit(slices - remaining, slices, slice_size, ex));
        }
        Ok((level, results))
    }

    /// Kueue's `updateCountsToMinimumGeneric` without leaders: takes domains in order until `count`
    /// pods (or `count / slice_size` slices) are placed, the last one by best fit, and sets each taken
    /// domain's count to what it gets.
    fn update_counts_to_minimum(
        &mut self,
        domains: &[usize],
        count: i64,
        slice_size: i64,
        slices: bool,
    ) -> Vec<usize> {
        let mut out = Vec::new();
        let mut remaining = if slices { count / slice_size } else { count };
        for i in 0..domains.len() {
            let mut d = domains[i];
            if slices {
                if self.best_fit() && self.st[d].slices >= remaining {
                    d = self.best_fit_by(&domains[i..], remaining, |s| s.slices);
                }
                let st = &mut self.st[d];
                out.push(d);
                if st.slices >= remaining {
                    st.pods = remaining * slice_size;
                    st.slices = remaining;
                    return out;
                }
                st.pods = st.slices * slice_size;
                remaining -= st.slices;
            } else {
                if self.best_fit() && self.st[d].pods >= remaining {
                    d = self.best_fit_by(&domains[i..], remaining, |s| s.pods);
                }
                let st = &mut self.st[d];
                out.push(d);
                if st.pods >= remaining {
                    st.pods = remaining;
                    return out;
                }
                remaining -= st.pods;
            }
        }
        out
    }
}

/// What the core knows of the cluster for TAS: each Topology's levels by name, the Nodes and what
/// non-TAS pods request on them; and the domain trees built from them, per topology and flavor node
/// labels, kept until any of these change (a new `TasCluster`), so a placement attempt builds none.
#[derive(Clone, Debug, Default)]
pub struct TasCluster {
    pub topologies: BTreeMap<String, Vec<String>>,
    pub nodes: Vec<TasNode>,
    /// Per node, what pods TAS did not place request there; `None` while those pods are not yet
    /// listed (nothing is placed then: a node's room is not known).
    pub non_tas: Option<Arc<NodeUsage>>,
    trees: Arc<Mutex<TreeCache>>,
}

/// (topology, the flavor's node labels) -> its tree.
type TreeCache = HashMap<(String, Vec<(String, String)>), Arc<TasTree>>;

impl PartialEq for TasCluster {
    fn eq(&self, other: &Self) -> bool {
        self.topologies == other.topologies && self.nodes == other.nodes && self.non_tas == other.non_tas
    }
}

impl Eq for TasCluster {}

impl TasCluster {
    pub fn new(topologies: BTreeMap<String, Vec<String>>, nodes: Vec<TasNode>) -> TasCluster {
        TasCluster {
            topologies,
            nodes,
            non_tas: Some(Arc::default()),
            trees: Arc::default(),
        }
    }

    /// This cluster with what non-TAS pods request per node (`None`: not listed yet).
    pub fn with_non_tas(self, non_tas: Option<Arc<NodeUsage>>) -> TasCluster {
        TasCluster {
            non_tas,
            trees: Arc::default(),
            ..self
        }
    }

    /// The tree of `topology` over the Nodes carrying `flavor`'s node labels, built once.
    fn tree(&self, flavor: &FlavorModel, topology: &str, levels: &[String]) -> Arc<TasTree> {
        let key = (
            topology.to_string(),
            flavor
                .node_labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Vec<_>>(),
        );
        let build = || {
            let nodes = self
                .nodes
                .iter()
                .filter(|n| flavor.node_labels.iter().all(|(k, v)| n.labels.get(k) == Some(v)));
            let none = NodeUsage::new();
            let non_tas = self.non_tas.as_deref().unwrap_or(&none);
            Arc::new(TasTree::new(topology, levels, nodes, non_tas))
        };
        // A poisoned cache only means another thread panicked while inserting: build afresh.
        let Ok(mut trees) = self.trees.lock() else {
            return build();
        };
        trees.entry(key).or_insert_with(build).clone()
    }

    /// The snapshot of a TAS flavor: its Topology over the Nodes carrying the flavor's node labels,
    /// with what `admitted` podsets placed in this flavor hold.
    pub fn snapshot<'a>(
        &self,
        flavor: &FlavorModel,
        topology: &str,
        admitted: impl Iterator<Item = (&'a WorkloadModel, &'a Admission)>,
    ) -> Result<TasSnapshot, String> {
        let levels = self.topologies.get(topology).ok_or_else(|| {
            format!(
                "there is no Topology {topology:?} for TAS flavor {:?}",
                flavor.name
            )
        })?;
        if self.non_tas.is_none() {
            return Err(format!(
                "the Pods on the Nodes of topology {topology:?} are not listed yet; their free room is unknown"
            ));
        }
        let mut s = TasSnapshot::over(self.tree(flavor, topology, levels));
        for (w, a) in admitted {
            for psa in &a.pod_set_assignments {
                let (Some(p), true) = (&psa.topology, psa.flavors.values().any(|f| *f == flavor.name)) else {
                    continue;
                };
                if let Some(ps) = w.podsets.iter().find(|ps| ps.name == psa.name) {
                    s.add_usage(p, &ps.requests);
                }
            }
        }
        Ok(s)
    }

    /// Places every podset of `w` assigned to a TAS flavor (Kueue's `FindTopologyAssignmentsForWorkload`
    /// after a Fit): sets each one's placement, or says why a podset has none, in Kueue's words.
    /// `tas_only`: the ClusterQueue's flavors all name a topology, so podsets that ask for nothing
    /// are placed as unconstrained.
    pub fn place_workload<'a>(
        &self,
        flavors: &BTreeMap<String, FlavorModel>,
        tas_only: bool,
        w: &WorkloadModel,
        podsets: &mut [PodSetAssignment],
        admitted: impl Iterator<Item = (&'a WorkloadModel, &'a Admission)> + Clone,
    ) -> Result<(), String> {
        let mut snapshots: BTreeMap<String, TasSnapshot> = BTreeMap::new();
        // Podsets with running pods first: those pods hold their domains before anything new is
        // placed (a replacement slice's pending cluster never takes the room its serving one uses).
        let running = |name: &str| w.podsets.iter().any(|ps| ps.name == name && ps.running.is_some());
        let mut order: Vec<usize> = (0..podsets.len()).collect();
        order.sort_by_key(|i| !running(&podsets[*i].name));
        for i in order {
            let psa = &mut podsets[i];
            let Some(ps) = w.podsets.iter().find(|ps| ps.name == psa.name) else {
                continue;
            };
            let req = ps.topology.clone().unwrap_or_default();
            let implied = !req.is_explicit() && tas_only;
            if !req.is_explicit() && !implied {
                continue;
            }
            let mut tas: Vec<&FlavorModel> = psa
                .flavors
                .values()
                .filter_map(|f| flavors.get(f))
                .filter(|f| f.topology.is_some())
                .collect();
            tas.sort_by(|a, b| a.name.cmp(&b.name));
            tas.dedup_by(|a, b| a.name == b.name);
            let flavor = match tas.as_slice() {
                [] => continue,
                [one] => *one,
                many => {
                    let names: Vec<&str> = many.iter().map(|f| f.name.as_str()).collect();
                    return Err(format!(
                        "couldn't assign flavors to pod set {}: more than one TAS flavor assigned: {names:?}",
                        ps.name
                    ));
                }
            };
            if psa.count == 0 {
                continue;
            }
            let topology = flavor.topology.clone().unwrap_or_default();
            let snap = match snapshots.entry(flavor.name.clone()) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => e.insert(
                    self.snapshot(flavor, &topology, admitted.clone())
                        .map_err(|m| format!("couldn't assign flavors to pod set {}: {m}", ps.name))?,
                ),
            };
            let placement = snap
                .place(ps, &req, implied, psa.count)
                .map_err(|m| format!("couldn't assign flavors to pod set {}: {m}", ps.name))?;
            snap.add_usage(&placement, &ps.requests);
            psa.topology = Some(placement);
        }
        Ok(())
    }
}

/// Domains `explain` lists per podset, most room first.
pub const MAX_EXPLAINED_DOMAINS: usize = 5;

/// What `explain` shows of a podset of a pending workload in a TAS flavor: what it asks, where it
/// would go now or why it cannot (Kueue's message), and the domains of its level with most room.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyView {
    pub podset: String,
    pub flavor: String,
    pub topology: String,
    /// `required <level>`, `preferred <level>`, `unconstrained`, then `, slices of N in <level>`.
    pub request: String,
    /// The level of `roomiest`.
    pub level: String,
    /// Where the pods would go now: each domain (its values joined by `/`) and its pods.
    pub placement: Vec<(String, i32)>,
    /// Why they fit nowhere (Kueue's message); empty when they fit.
    pub no_fit: String,
    /// The domains at `level` with most room now: each and how many of the podset's pods fit in it.
    pub roomiest: Vec<(String, i64)>,
}

fn request_text(req: &TopologyRequest, implied: bool) -> String {
    let mut t = match (&req.required, &req.preferred) {
        (Some(l), _) => format!("required {l}"),
        (None, Some(l)) => format!("preferred {l}"),
        _ if implied => "unconstrained (implied: every flavor of the ClusterQueue is TAS)".to_string(),
        _ => "unconstrained".to_string(),
    };
    if let Some(l) = &req.slice_topology {
        t.push_str(&format!(", slices of {} in {l}", req.slice_size.unwrap_or(0)));
    }
    t
}

impl TasCluster {
    /// The topology view of podset `ps` in TAS flavor `flavor` (`None` when the podset asks for no
    /// TAS and the ClusterQueue is not TAS-only, or the flavor names no topology), with what
    /// `admitted` holds counted.
    pub fn explain_podset<'a>(
        &self,
        flavor: &FlavorModel,
        tas_only: bool,
        ps: &PodSetModel,
        admitted: impl Iterator<Item = (&'a WorkloadModel, &'a Admission)>,
    ) -> Option<TopologyView> {
        let req = ps.topology.clone().unwrap_or_default();
        let implied = !req.is_explicit() && tas_only;
        if !req.is_explicit() && !implied {
            return None;
        }
        let topology = flavor.topology.clone()?;
        let mut view = TopologyView {
            podset: ps.name.clone(),
            flavor: flavor.name.clone(),
            topology: topology.clone(),
            request: request_text(&req, implied),
            level: String::new(),
            placement: Vec::new(),
            no_fit: String::new(),
            roomiest: Vec::new(),
        };
        let snap = match self.snapshot(flavor, &topology, admitted) {
            Ok(s) => s,
            Err(m) => {
                view.no_fit = m;
                return Some(view);
            }
        };
        let level = req
            .required
            .as_ref()
            .or(req.preferred.as_ref())
            .or(req.slice_topology.as_ref())
            .and_then(|l| snap.levels.iter().position(|x| x == l))
            .unwrap_or(snap.levels.len().saturating_sub(1));
        view.level = snap.levels.get(level).cloned().unwrap_or_default();
        match snap.place(ps, &req, implied, ps.count) {
            Ok(p) => {
                view.placement = p.domains.iter().map(|d| (d.values.join("/"), d.count)).collect();
            }
            Err(m) => view.no_fit = m,
        }
        if snap.levels.is_empty() {
            return Some(view);
        }
        let mut run = Run {
            s: &snap,
            st: vec![State::default(); snap.domains.len()],
            unconstrained: false,
            within: None,
        };
        let mut per_pod = ps.requests.clone();
        add(&mut per_pod, &Requests::from([(PODS.to_string(), Amount(1))]), 1);
        run.fill_in_counts(ps, &per_pod, 1, snap.levels.len() - 1);
        let mut room: Vec<(String, i64)> = snap.per_level[level]
            .iter()
            .map(|d| (snap.domains[*d].values.join("/"), run.st[*d].pods))
            .collect();
        room.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        room.truncate(MAX_EXPLAINED_DOMAINS);
        view.roomiest = room;
        Some(view)
    }
}

#[cfg(test)]
#[path = "tas_tests.rs"]
mod tests;
