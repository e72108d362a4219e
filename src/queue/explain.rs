//! Why a pending workload is pending, in numbers: per podset and resource what it requests and what
//! each flavor of its ClusterQueue has (nominal quota, usage, available with borrowing, borrowable
//! from the cohort, the most it could ever get), which admitted workloads hold the short
//! flavor-resources, and what preemption could free under the ClusterQueue's policy. Read off the
//! same quota tree and candidate filter the scheduler decides with (`tree::available`,
//! `preemption::allowed_candidates`), with a replacement slice's old usage taken out as `nominate`
//! does. A record is small: its holder list is capped.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::amount::{Amount, FlavorResource, FrAmounts};
use super::model::{ClusterQueueModel, ReclaimWithinCohort, WithinClusterQueue, WorkloadKey, WorkloadModel};
use super::pending::OrderKey;
use super::preemption::{Candidate, Preemptor, allowed_candidates, any_candidate};
use super::scheduler::{AdmissionCore, AdmittedWorkload};
use super::tree::QuotaTree;

/// Holders listed per record, largest first.
pub const MAX_HOLDERS: usize = 20;

/// What one flavor of the ClusterQueue offers a resource of a podset (amounts as quantities).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FlavorView {
    pub flavor: String,
    /// The ClusterQueue's nominal quota (0 when the flavor lists the resource with none).
    pub nominal: String,
    /// What the ClusterQueue's admitted workloads use now, a replaced slice included.
    pub used: String,
    /// What the workload could take now: unused own quota plus what the cohort lends (what a
    /// replaced slice holds is in `used`, not here).
    pub available: String,
    /// What admitting the workload adds to `used`: the requests, less what the slice it replaces
    /// already holds here (only that growth has to fit in `available`).
    #[serde(default)]
    pub adds: String,
    /// The part of `available` that is borrowed from the cohort.
    pub borrowable: String,
    /// The most the ClusterQueue could ever get (nothing in use anywhere).
    pub max_capacity: String,
    /// What evicting every workload the preemption policy allows would free.
    pub preemptible: String,
    /// `requested` fits in `available` (counting the workload's other podsets in this flavor).
    pub fits: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceView {
    pub resource: String,
    /// All pods of the podset together.
    pub requested: String,
    pub flavors: Vec<FlavorView>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSetView {
    pub name: String,
    pub count: i64,
    pub resources: Vec<ResourceView>,
}

/// An admitted workload holding some of a flavor-resource the pending one is short of.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    pub workload: String,
    pub cluster_queue: String,
    pub priority: i32,
    /// `<resource> in flavor <flavor>` -> amount held.
    pub holds: Vec<(String, String)>,
    /// The preemption policy allows evicting it for this workload.
    pub preemptible: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionView {
    /// `withinClusterQueue` / `reclaimWithinCohort` of the ClusterQueue.
    pub policy: String,
    pub candidates: usize,
    /// The scheduler chose to preempt (reason `WaitingForPreemptedWorkloads`).
    pub chosen: bool,
    pub why: String,
}

/// The record for one pending workload, as the scheduler left it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub workload: String,
    pub cluster_queue: String,
    /// The root of the ClusterQueue's cohort tree, if it has one.
    pub cohort: Option<String>,
    pub priority: i32,
    /// The admitted slice this one replaces (only the growth has to fit).
    pub replaces: Option<String>,
    pub reason: String,
    pub message: String,
    /// 0-based place among the ClusterQueue's pending workloads, in the scheduler's order
    /// (priority, then queue time); set by whoever holds the whole queue (`queue_positions`).
    pub position_in_cluster_queue: Option<usize>,
    pub podsets: Vec<PodSetView>,
    pub holders: Vec<Holder>,
    pub preemption: PreemptionView,
    /// Per podset in a TAS flavor of the ClusterQueue: its topology request, where it would go now
    /// or why it fits no domain, and the domains with most room.
    #[serde(default)]
    pub topology: Vec<super::tas::TopologyView>,
}

fn policy_text(within: WithinClusterQueue, reclaim: ReclaimWithinCohort) -> String {
    let w = match within {
        WithinClusterQueue::Never => "Never",
        WithinClusterQueue::LowerPriority => "LowerPriority",
        WithinClusterQueue::LowerOrNewerEqualPriority => "LowerOrNewerEqualPriority",
    };
    let r = match reclaim {
        ReclaimWithinCohort::Never => "Never",
        ReclaimWithinCohort::LowerPriority => "LowerPriority",
        ReclaimWithinCohort::Any => "Any",
    };
    format!("withinClusterQueue={w}, reclaimWithinCohort={r}")
}

impl AdmissionCore {
    /// Every pending workload's 0-based place in its ClusterQueue, in the order the scheduler takes
    /// them (`OrderKey`: priority, queue time, UID), parked ones included as Kueue's visibility
    /// API lists them. One sort per ClusterQueue.
    pub fn queue_positions(&self) -> HashMap<WorkloadKey, (String, usize)> {
        self.positions_in(|_| true)
    }

    /// `queue_positions` of the ClusterQueues `wanted` names only.
    fn positions_in(&self, wanted: impl Fn(&str) -> bool) -> HashMap<WorkloadKey, (String, usize)> {
        let mut by_cq: HashMap<&str, Vec<&OrderKey>> = HashMap::new();
        for p in self.pending.values().filter(|p| wanted(&p.model.cluster_queue)) {
            by_cq
                .entry(p.model.cluster_queue.as_str())
                .or_default()
                .push(&p.order);
        }
        let mut out = HashMap::with_capacity(self.pending.len());
        for (cq, mut keys) in by_cq {
            keys.sort();
            for (i, k) in keys.into_iter().enumerate() {
                out.insert(k.key.clone(), (cq.to_string(), i));
            }
        }
        out
    }

    /// Records for many pending workloads at once: equivalent workloads (same ClusterQueue,
    /// priority and podset shape, replacing nothing) share one evaluation, as the scheduler shares
    /// their outcome, so a deep backlog of look-alikes costs one record per shape. Each record gets
    /// its own name, reason, message and queue position.
    pub fn explain_all(&mut self, keys: &[WorkloadKey]) -> Vec<(WorkloadKey, Explanation)> {
        // Positions only in the ClusterQueues of `keys`: most cycles redo a few records.
        let positions = {
            let cqs: std::collections::HashSet<&str> = keys
                .iter()
                .filter_map(|k| self.pending.get(k))
                .map(|p| p.model.cluster_queue.as_str())
                .collect();
            if cqs.is_empty() {
                HashMap::new()
            } else {
                self.positions_in(|cq| cqs.contains(cq))
            }
        };
        let mut shared: HashMap<(String, i32, u64), Explanation> = HashMap::new();
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(p) = self.pending.get(key) else { continue };
            let class = p
                .model
                .replacement_for
                .is_none()
                .then(|| (p.model.cluster_queue.clone(), p.model.priority, p.shape));
            let (reason, message) = (p.reason.as_str().to_string(), p.message.clone());
            let e = match class.as_ref().and_then(|c| shared.get(c)) {
                Some(e) => Some(Explanation {
                    workload: key.to_string(),
                    reason,
                    message,
                    ..e.clone()
                }),
                None => {
                    let e = self.explain(key);
                    if let (Some(c), Some(e)) = (class, e.as_ref()) {
                        shared.insert(c, e.clone());
                    }
                    e
                }
            };
            if let Some(mut e) = e {
                e.position_in_cluster_queue = positions.get(key).map(|(_, i)| *i);
                out.push((key.clone(), e));
            }
        }
        out
    }

    /// The record for pending workload `key`; `None` when it is not pending or its ClusterQueue
    /// does not exist. The tree is left as found.
    pub fn explain(&mut self, key: &WorkloadKey) -> Option<Explanation> {
        let p = self.pending.get(key)?;
        let w = &p.model;
        let cq = self.cqs.get(&w.cluster_queue)?;
        let cq_idx = self.tree.cq(&w.cluster_queue)?;
        let replaced = w
            .replacement_for
            .as_ref()
            .and_then(|k| self.admitted.get(k))
            .filter(|o| o.admission.cluster_queue == w.cluster_queue);
        let topology = self.topology_views(w, cq, replaced.map(|o| &o.model.key));
        let now = NowView::of(&self.tree, cq_idx, cq);
        let tree = self.tree.without_usage(cq_idx, replaced.map(|o| &o.usage));
        let root = tree.root(cq_idx);
        let cohort = (root != cq_idx).then(|| tree.nodes[root].name.clone());

        let trees = Trees {
            fit: &tree,
            now: &now,
            replaced: replaced.map(|o| &o.usage),
        };
        let Quotas {
            mut podsets,
            views,
            short,
            want,
        } = quotas(&trees, cq_idx, cq, w);
        let empty = FrAmounts::new();
        let pre = Preemptor {
            cq_idx,
            cq,
            priority: w.priority,
            queue_timestamp: w.timestamp,
            usage: &empty,
            contested: &short,
            tas_fits: None,
        };
        let held_by = (&self.admitted, &self.admitted_by_cq);
        let Reach {
            held,
            allowed,
            freeable,
        } = reach(&tree, root, &pre, w, held_by, self.fair_sharing.is_some());
        for (pi, ri, fi, fr, _) in &views {
            podsets[*pi].resources[*ri].flavors[*fi].preemptible =
                fr.show(freeable.get(fr).copied().unwrap_or_default());
        }
        let holders = holders(&tree, held, &short, &allowed);

        let chosen = p.reason == super::PendingReason::WaitingForPreemptedWorkloads;
        let pol = cq.preemption;
        let why = if short.is_empty() {
            "nothing is short of quota: preemption is not needed".to_string()
        } else if chosen {
            "the scheduler is evicting workloads to make room".to_string()
        } else if pol.within_cluster_queue == WithinClusterQueue::Never
            && (cohort.is_none() || pol.reclaim_within_cohort == ReclaimWithinCohort::Never)
        {
            "the ClusterQueue's preemption policy allows no preemption".to_string()
        } else if allowed.is_empty() {
            "no admitted workload holding the short quota may be preempted under the policy (lower priority in the ClusterQueue, or borrowing in the cohort)".to_string()
        } else {
            still_short(&tree, cq_idx, &short, &want, &freeable)
        };
        Some(Explanation {
            workload: key.to_string(),
            cluster_queue: w.cluster_queue.clone(),
            cohort,
            priority: w.priority,
            replaces: replaced.map(|o| o.model.key.to_string()),
            reason: p.reason.as_str().to_string(),
            message: p.message.clone(),
            position_in_cluster_queue: None,
            podsets,
            holders,
            preemption: PreemptionView {
                policy: policy_text(pol.within_cluster_queue, pol.reclaim_within_cohort),
                candidates: allowed.len(),
                chosen,
                why,
            },
            topology,
        })
    }

    /// Each podset's view in each TAS flavor of the ClusterQueue, the replaced slice's placement
    /// left out as the scheduler leaves it out.
    fn topology_views(
        &self,
        w: &WorkloadModel,
        cq: &ClusterQueueModel,
        replaced: Option<&WorkloadKey>,
    ) -> Vec<super::tas::TopologyView> {
        let listed: Vec<&str> = cq
            .resource_groups
            .iter()
            .flat_map(|g| &g.flavors)
            .map(|f| f.name.as_str())
            .collect();
        let tas: Vec<&super::model::FlavorModel> = listed
            .iter()
            .filter_map(|f| self.flavors.get(*f))
            .filter(|f| f.topology.is_some())
            .collect();
        let tas_only = !listed.is_empty() && tas.len() == listed.len();
        let mut out = Vec::new();
        for ps in &w.podsets {
            for f in &tas {
                let admitted = self
                    .admitted
                    .values()
                    .filter(|a| Some(&a.model.key) != replaced)
                    .map(|a| (&a.model, &a.admission));
                out.extend(self.tas.explain_podset(f, tas_only, ps, admitted));
            }
        }
        out
    }
}

/// What the ClusterQueue offers each podset of a pending workload, per resource and flavor.
struct Quotas {
    podsets: Vec<PodSetView>,
    /// Where each flavor view sits (podset, resource, flavor), its flavor-resource and the total
    /// wanted there; its `preemptible` is filled in once preemption's reach is known.
    views: Vec<(usize, usize, usize, FlavorResource, Amount)>,
    /// The flavor-resources the workload is short of.
    short: BTreeSet<FlavorResource>,
    /// The workload's requests, each resource counted in the first flavor listed for it.
    want: FrAmounts,
}

/// Per flavor-resource of a ClusterQueue as it is now (a replaced slice's usage in): what it uses,
/// what is available to it, and its subtree's own quota.
struct NowView(HashMap<FlavorResource, (Amount, Amount, Amount)>);

impl NowView {
    fn of(tree: &QuotaTree, cq_idx: usize, cq: &ClusterQueueModel) -> NowView {
        let mut m = HashMap::new();
        for g in &cq.resource_groups {
            for f in &g.flavors {
                for r in &g.covered_resources {
                    let fr = FlavorResource::new(&f.name, r.as_str());
                    let v = (
                        tree.usage(cq_idx, &fr),
                        tree.available(cq_idx, &fr),
                        tree.subtree_quota(cq_idx, &fr),
                    );
                    m.insert(fr, v);
                }
            }
        }
        NowView(m)
    }

    fn get(&self, fr: &FlavorResource) -> (Amount, Amount, Amount) {
        self.0.get(fr).copied().unwrap_or_default()
    }
}

/// The quota a record is read from, twice over.
struct Trees<'a> {
    /// As the scheduler fits the workload: a replaced slice's usage taken out.
    fit: &'a QuotaTree,
    /// As the ClusterQueue is now, for what it uses and has left.
    now: &'a NowView,
    /// What the replaced slice holds.
    replaced: Option<&'a FrAmounts>,
}

/// Per podset, resource and flavor of `w`: what it requests against what the ClusterQueue has, and
/// which flavor-resources are short; `want` accumulates the workload's own earlier podsets.
fn quotas(trees: &Trees<'_>, cq_idx: usize, cq: &ClusterQueueModel, w: &WorkloadModel) -> Quotas {
    let tree = trees.fit;
    // What the replaced slice holds and earlier podsets have not yet claimed, per flavor-resource.
    let mut held_back: FrAmounts = trees.replaced.cloned().unwrap_or_default();
    let mut want = FrAmounts::new();
    let mut short: BTreeSet<FlavorResource> = BTreeSet::new();
    let mut podsets = Vec::new();
    let mut views: Vec<(usize, usize, usize, FlavorResource, Amount)> = Vec::new();
    for ps in &w.podsets {
        let mut resources = Vec::new();
        for r in ps.requests.keys() {
            let requested = ps.total(r);
            if requested <= Amount::ZERO {
                continue;
            }
            let mut flavors = Vec::new();
            for g in cq
                .resource_groups
                .iter()
                .filter(|g| g.covered_resources.contains(r))
            {
                for f in &g.flavors {
                    let fr = FlavorResource::new(&f.name, r.as_str());
                    let total = want.get(&fr).copied().unwrap_or_default() + requested;
                    let available = tree.available(cq_idx, &fr);
                    if total > available {
                        short.insert(fr.clone());
                    }
                    views.push((podsets.len(), resources.len(), flavors.len(), fr.clone(), total));
                    let nominal = f.resources.get(r).map_or(Amount::ZERO, |q| q.nominal);
                    let (used, available_now, quota) = trees.now.get(&fr);
                    let own = (quota - used).clamp_zero();
                    let kept = held_back.get(&fr).copied().unwrap_or_default().min(requested);
                    flavors.push(FlavorView {
                        flavor: f.name.clone(),
                        nominal: fr.show(nominal),
                        used: fr.show(used),
                        available: fr.show(available_now.clamp_zero()),
                        adds: fr.show((requested - kept).clamp_zero()),
                        borrowable: fr.show((available_now - own).clamp_zero()),
                        max_capacity: fr.show(tree.potential_available(cq_idx, &fr)),
                        preemptible: String::new(),
                        fits: total <= available,
                    });
                }
            }
            // The workload's later podsets compete with this one in the first flavor listed.
            if let Some(first) = cq
                .resource_groups
                .iter()
                .find(|g| g.covered_resources.contains(r))
                .and_then(|g| g.flavors.first())
            {
                let fr = FlavorResource::new(&first.name, r.as_str());
                *want.entry(fr.clone()).or_default() += requested;
                if let Some(h) = held_back.get_mut(&fr) {
                    *h = (*h - requested).clamp_zero();
                }
            }
            resources.push(ResourceView {
                resource: r.clone(),
                requested: FlavorResource::new("", r.as_str()).show(requested),
                flavors,
            });
        }
        podsets.push(PodSetView {
            name: ps.name.clone(),
            count: ps.count,
            resources,
        });
    }
    Quotas {
        podsets,
        views,
        short,
        want,
    }
}

/// What preemption could reach for the short flavor-resources.
struct Reach<'a> {
    /// The admitted workloads holding some of them: key, ClusterQueue index, priority, usage.
    held: Vec<(&'a WorkloadKey, usize, i32, &'a FrAmounts)>,
    /// Those the preemption policy allows evicting.
    allowed: BTreeSet<&'a WorkloadKey>,
    /// What evicting the allowed ones would free of each short flavor-resource.
    freeable: FrAmounts,
}

/// The admitted workloads under `root` holding quota the preemptor is short of (its replaced slice
/// aside), which of them the scheduler's own filter allows as victims, and what those would free.
fn reach<'a>(
    tree: &QuotaTree,
    root: usize,
    pre: &Preemptor<'_>,
    w: &WorkloadModel,
    (admitted, by_cq): (
        &'a HashMap<WorkloadKey, AdmittedWorkload>,
        &'a BTreeMap<String, BTreeSet<WorkloadKey>>,
    ),
    fair_sharing: bool,
) -> Reach<'a> {
    let short = pre.contested;
    let mut cands: Vec<Candidate<'a>> = Vec::new();
    let mut held: Vec<(&WorkloadKey, usize, i32, &FrAmounts)> = Vec::new();
    for ci in tree.cqs_under(root) {
        for k in by_cq.get(&tree.nodes[ci].name).into_iter().flatten() {
            if Some(k) == w.replacement_for.as_ref() {
                continue;
            }
            let Some(a) = admitted.get(k) else { continue };
            if !short
                .iter()
                .any(|fr| a.usage.get(fr).is_some_and(|v| *v > Amount::ZERO))
            {
                continue;
            }
            held.push((k, ci, a.model.priority, &a.usage));
            cands.push(a.candidate(k, ci));
        }
    }
    // With fair sharing the policies choose the candidates and the shares decide among them.
    let allowed: BTreeSet<&WorkloadKey> = if fair_sharing {
        cands
            .iter()
            .filter(|c| {
                any_candidate(
                    tree,
                    pre,
                    std::iter::once((c.cq_idx, c.priority, c.queue_timestamp, c.usage)),
                )
            })
            .map(|c| c.key)
            .collect()
    } else {
        allowed_candidates(tree, pre, &cands)
            .into_iter()
            .map(|c| c.key)
            .collect()
    };
    let mut freeable = FrAmounts::new();
    for c in cands.iter().filter(|c| allowed.contains(c.key)) {
        for fr in short {
            *freeable.entry(fr.clone()).or_default() += c.usage.get(fr).copied().unwrap_or_default();
        }
    }
    Reach {
        held,
        allowed,
        freeable,
    }
}

/// The holders of the short quota, largest holding first, at most `MAX_HOLDERS`.
fn holders(
    tree: &QuotaTree,
    mut held: Vec<(&WorkloadKey, usize, i32, &FrAmounts)>,
    short: &BTreeSet<FlavorResource>,
    allowed: &BTreeSet<&WorkloadKey>,
) -> Vec<Holder> {
    held.sort_by(|a, b| {
        let sum = |u: &FrAmounts| {
            short
                .iter()
                .map(|fr| u.get(fr).copied().unwrap_or_default())
                .fold(Amount::ZERO, |x, y| x + y)
        };
        sum(b.3).cmp(&sum(a.3)).then_with(|| a.0.cmp(b.0))
    });
    held.iter()
        .take(MAX_HOLDERS)
        .map(|(k, ci, prio, usage)| Holder {
            workload: k.to_string(),
            cluster_queue: tree.nodes[*ci].name.clone(),
            priority: *prio,
            holds: short
                .iter()
                .filter_map(|fr| {
                    usage
                        .get(fr)
                        .filter(|v| **v > Amount::ZERO)
                        .map(|v| (fr.to_string(), fr.show(*v)))
                })
                .collect(),
            preemptible: allowed.contains(k),
        })
        .collect()
}

/// Why preemption did not make room although the policy allows victims: what would stay short with
/// every preemptible workload evicted, or that the scheduler did not choose them this cycle.
fn still_short(
    tree: &QuotaTree,
    cq_idx: usize,
    short: &BTreeSet<FlavorResource>,
    want: &FrAmounts,
    freeable: &FrAmounts,
) -> String {
    let not_enough: Vec<String> = short
        .iter()
        .filter(|fr| {
            let need = want.get(*fr).copied().unwrap_or_default();
            tree.available(cq_idx, fr) + freeable.get(*fr).copied().unwrap_or_default() < need
        })
        .map(|fr| fr.to_string())
        .collect();
    if not_enough.is_empty() {
        "the preemptible workloads could free enough; the scheduler did not choose them this cycle (see the message)".to_string()
    } else {
        format!(
            "evicting every preemptible workload would still leave {} short",
            not_enough.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::model::{ClusterQueueModel, FlavorModel, PreemptionPolicy, WorkloadModel};
    use crate::queue::{Admission, PodSetAssignment};

    fn wl(name: &str, cq: &str, cpu: i64, priority: i32) -> WorkloadModel {
        WorkloadModel::build("ns", name, cq)
            .request(&[("cpu", cpu)])
            .priority(priority)
    }

    fn admit(core: &mut AdmissionCore, w: WorkloadModel) {
        let cq = w.cluster_queue.clone();
        let ps = &w.podsets[0];
        let a = Admission {
            cluster_queue: cq,
            pod_set_assignments: vec![PodSetAssignment {
                name: ps.name.clone(),
                count: ps.count,
                flavors: [("cpu".to_string(), "default".to_string())].into(),
                resource_usage: [("cpu".to_string(), ps.total("cpu"))].into(),
                topology: None,
            }],
        };
        core.record_admitted(w, a, 0).unwrap();
    }

    /// Cohort c: a (4 CPU) and b (6 CPU). a-big uses all of a's 4, b-use 3 of b's 6.
    fn cohort(policy: PreemptionPolicy) -> AdmissionCore {
        let mut core = AdmissionCore::new();
        core.upsert_flavor(FlavorModel::build("default"));
        core.upsert_cluster_queue(
            ClusterQueueModel::build("a")
                .cohort("c")
                .flavor("default", &[("cpu", 4000)])
                .preemption(policy),
        )
        .unwrap();
        core.upsert_cluster_queue(
            ClusterQueueModel::build("b")
                .cohort("c")
                .flavor("default", &[("cpu", 6000)]),
        )
        .unwrap();
        admit(&mut core, wl("a-big", "a", 4000, 0));
        admit(&mut core, wl("b-use", "b", 3000, 0));
        core
    }

    // Kueue's scheduler_test "borrowing" cases give the reasons; here the numbers behind them.
    #[test]
    fn a_pending_workload_gets_its_shortfall_borrowable_and_holders() {
        let mut core = cohort(PreemptionPolicy::default());
        core.add_workload(wl("a-new", "a", 4000, 5)).unwrap();
        let res = core.schedule_cycle(1);
        assert!(res.admissions.is_empty());
        let e = core.explain(&WorkloadKey::new("ns", "a-new")).expect("pending");
        assert_eq!(e.reason, "WaitingForQuota");
        assert_eq!(e.cohort.as_deref(), Some("c"));
        let f = &e.podsets[0].resources[0].flavors[0];
        // a's own 4 are used; b lends its unused 3; the most a could get is 4 + 6.
        assert_eq!(
            (
                f.nominal.as_str(),
                f.used.as_str(),
                f.available.as_str(),
                f.borrowable.as_str(),
                f.max_capacity.as_str()
            ),
            ("4", "4", "3", "3", "10")
        );
        assert!(!f.fits);
        assert_eq!(e.podsets[0].resources[0].requested, "4");
        let holders: Vec<(&str, &str)> = e
            .holders
            .iter()
            .map(|h| (h.workload.as_str(), h.holds[0].1.as_str()))
            .collect();
        assert_eq!(
            holders,
            vec![("ns/a-big", "4"), ("ns/b-use", "3")],
            "largest first"
        );
        assert_eq!(
            e.preemption.why,
            "the ClusterQueue's preemption policy allows no preemption"
        );
        assert_eq!(e.preemption.candidates, 0);
        assert_eq!(
            core.queue_positions()[&WorkloadKey::new("ns", "a-new")],
            ("a".to_string(), 0)
        );
    }

    #[test]
    fn preemption_says_which_holders_it_may_take_and_that_it_chose_to() {
        let policy = PreemptionPolicy {
            within_cluster_queue: WithinClusterQueue::LowerPriority,
            ..Default::default()
        };
        let mut core = cohort(policy);
        core.add_workload(wl("a-new", "a", 4000, 5)).unwrap();
        let res = core.schedule_cycle(1);
        assert_eq!(res.evictions.len(), 1, "a-big is preempted");
        let e = core.explain(&WorkloadKey::new("ns", "a-new")).unwrap();
        assert_eq!(e.reason, "WaitingForPreemptedWorkloads");
        assert!(e.preemption.chosen);
        assert_eq!(e.preemption.candidates, 1);
        let big = e.holders.iter().find(|h| h.workload == "ns/a-big").unwrap();
        assert!(big.preemptible, "lower priority in its own ClusterQueue");
        let b = e.holders.iter().find(|h| h.workload == "ns/b-use").unwrap();
        assert!(
            !b.preemptible,
            "b is not borrowing: reclaimWithinCohort has nothing to take"
        );
        assert_eq!(e.podsets[0].resources[0].flavors[0].preemptible, "4");
    }

    #[test]
    fn an_equal_priority_holder_is_not_preemptible_and_the_record_says_so() {
        let policy = PreemptionPolicy {
            within_cluster_queue: WithinClusterQueue::LowerPriority,
            ..Default::default()
        };
        let mut core = cohort(policy);
        core.add_workload(wl("a-new", "a", 4000, 0)).unwrap();
        core.add_workload(wl("a-later", "a", 1000, 0).at(5)).unwrap();
        core.schedule_cycle(1);
        let e = core.explain(&WorkloadKey::new("ns", "a-new")).unwrap();
        assert!(!e.preemption.chosen);
        assert!(
            e.preemption
                .why
                .starts_with("no admitted workload holding the short quota may be preempted"),
            "{}",
            e.preemption.why
        );
        assert!(core.explain(&WorkloadKey::new("ns", "nobody")).is_none());
    }

    #[test]
    fn look_alike_workloads_share_one_evaluation_but_keep_their_names_and_places() {
        let mut core = cohort(PreemptionPolicy::default());
        core.add_workload(wl("first", "a", 4000, 0).at(1)).unwrap();
        core.add_workload(wl("second", "a", 4000, 0).at(2)).unwrap();
        core.schedule_cycle(3);
        let keys = [
            WorkloadKey::new("ns", "second"),
            WorkloadKey::new("ns", "first"),
            WorkloadKey::new("ns", "gone"),
        ];
        let all = core.explain_all(&keys);
        let got: Vec<(&str, &str, Option<usize>)> = all
            .iter()
            .map(|(k, e)| (k.name.as_str(), e.workload.as_str(), e.position_in_cluster_queue))
            .collect();
        assert_eq!(
            got,
            vec![("second", "ns/second", Some(1)), ("first", "ns/first", Some(0))]
        );
        assert_eq!(all[0].1.podsets, all[1].1.podsets);
        assert_eq!(all[0].1.holders, core.explain(&keys[1]).unwrap().holders);
    }
}
