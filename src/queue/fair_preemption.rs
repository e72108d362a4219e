//! Preemption with fair sharing on, as Kueue's `fairPreemptions` does it
//! (`pkg/scheduler/preemption/preemption.go`, `preemption/fairsharing/*`): the preemptor's usage
//! is counted first; ClusterQueues are visited from the root down towards the one with the
//! highest share; a victim in another ClusterQueue is taken only when a fair-sharing strategy
//! allows it, comparing shares at the two ClusterQueues' almost-least-common-ancestors. Beyond
//! Kueue, candidates' growth above their floors is offered first (`fair_targets`).

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet, VecDeque};

use super::amount::FrAmounts;
use super::fair_sharing::{Drs, compare, drs};
use super::growth_first::growth;
use super::model::FairPreemptionStrategy;
use super::preemption::{
    Candidate, PreemptedReason, Preemptor, Target, any_candidate, order, topology_fits, workload_fits,
};
use super::simulate::Without;
use super::tree::{NodeKind, QuotaTree};

/// Whether a strategy lets the preemptor (its share with the workload: `preemptor_new`) take a
/// victim from a ClusterQueue whose share is `target_old` before and `target_new` after.
fn allows(s: FairPreemptionStrategy, preemptor_new: &Drs, target_old: &Drs, target_new: &Drs) -> bool {
    match s {
        FairPreemptionStrategy::LessThanOrEqualToFinalShare => compare(preemptor_new, target_new).is_le(),
        FairPreemptionStrategy::LessThanInitialShare => compare(preemptor_new, target_old).is_lt(),
    }
}

/// Kueue's `TargetClusterQueueOrdering`: which ClusterQueue to take the next candidate from.
struct TargetOrdering<'c, 'a> {
    preemptor: usize,
    ancestors: HashSet<usize>,
    queues: HashMap<usize, VecDeque<&'c Candidate<'a>>>,
    pruned_cqs: HashSet<usize>,
    pruned_cohorts: HashSet<usize>,
}

impl<'c, 'a> TargetOrdering<'c, 'a> {
    fn new(tree: &QuotaTree, preemptor: usize, cands: impl IntoIterator<Item = &'c Candidate<'a>>) -> Self {
        let mut ancestors = HashSet::new();
        let mut cur = tree.nodes[preemptor].parent;
        while let Some(p) = cur {
            ancestors.insert(p);
            cur = tree.nodes[p].parent;
        }
        let mut queues: HashMap<usize, VecDeque<&'c Candidate<'a>>> = HashMap::new();
        for c in cands {
            queues.entry(c.cq_idx).or_default().push_back(c);
        }
        TargetOrdering {
            preemptor,
            ancestors,
            queues,
            pruned_cqs: HashSet::new(),
            pruned_cohorts: HashSet::new(),
        }
    }

    fn has_workload(&self, cq: usize) -> bool {
        self.queues.get(&cq).is_some_and(|q| !q.is_empty())
    }

    fn pop(&mut self, cq: usize) -> Option<&'c Candidate<'a>> {
        self.queues.get_mut(&cq)?.pop_front()
    }

    fn drop_queue(&mut self, cq: usize) {
        self.pruned_cqs.insert(cq);
    }

    /// The next ClusterQueue to take a candidate from; `None` when there is none left. Between two
    /// calls the caller pops a workload or drops the queue, so this ends.
    fn next(&mut self, tree: &QuotaTree) -> Option<usize> {
        let Some(_) = tree.nodes[self.preemptor].parent else {
            let p = self.preemptor;
            return (!self.pruned_cqs.contains(&p) && self.has_workload(p)).then_some(p);
        };
        let root = tree.root(self.preemptor);
        while !self.pruned_cohorts.contains(&root) {
            if let Some(cq) = self.next_target(tree, root) {
                return Some(cq);
            }
        }
        None
    }

    fn next_target(&mut self, tree: &QuotaTree, cohort: usize) -> Option<usize> {
        let children = &tree.nodes[cohort].children;
        let mut best_cq: Option<usize> = None;
        let mut best_cq_drs = Drs::negative();
        for &cq in children
            .iter()
            .filter(|&&c| tree.nodes[c].kind == NodeKind::ClusterQueue)
        {
            if self.pruned_cqs.contains(&cq) {
                continue;
            }
            let d = drs(tree, cq, None);
            // The preemptor's own ClusterQueue stays until it runs out of candidates.
            if (!d.is_borrowing() && cq != self.preemptor) || !self.has_workload(cq) {
                self.pruned_cqs.insert(cq);
                continue;
            }
            match (compare(&d, &best_cq_drs), best_cq) {
                (Ordering::Greater, _) => {
                    best_cq_drs = d;
                    best_cq = Some(cq);
                }
                (Ordering::Equal, Some(b)) => {
                    let front = |q: usize| self.queues.get(&q).and_then(|q| q.front());
                    let (new, cur) = (front(cq), front(b));
                    if let (Some(new), Some(cur)) = (new, cur)
                        && order(new, cur, self.preemptor).is_lt()
                    {
                        best_cq = Some(cq);
                    }
                }
                _ => {}
            }
        }
        let mut best_cohort: Option<usize> = None;
        let mut best_cohort_drs = Drs::negative();
        for &c in children
            .iter()
            .filter(|&&c| tree.nodes[c].kind == NodeKind::Cohort)
        {
            if self.pruned_cohorts.contains(&c) {
                continue;
            }
            let d = drs(tree, c, None);
            // A cohort on the preemptor's path stays while any child may still yield candidates.
            if !d.is_borrowing() && !self.ancestors.contains(&c) {
                self.pruned_cohorts.insert(c);
            } else if compare(&d, &best_cohort_drs).is_ge() {
                best_cohort_drs = d;
                best_cohort = Some(c);
            }
        }
        match (best_cohort, best_cq) {
            (None, None) => {
                self.pruned_cohorts.insert(cohort);
                None
            }
            // On equal shares the cohort: the most unfair node may be inside it.
            (Some(c), _) if compare(&best_cohort_drs, &best_cq_drs).is_ge() => self.next_target(tree, c),
            (_, cq) => cq,
        }
    }
}

/// The ancestor of `cq` (or `cq` itself) whose parent is `lca`.
fn almost_lca(tree: &QuotaTree, cq: usize, lca: usize) -> usize {
    let mut cur = cq;
    while let Some(p) = tree.nodes[cur].parent {
        if p == lca {
            return cur;
        }
        cur = p;
    }
    cur
}

/// The preemptor's and the target's shares at their almost-least-common-ancestors
/// (`ComputeShares`), and the node the target's share is taken at.
fn shares(tree: &QuotaTree, o: &TargetOrdering<'_, '_>, target: usize) -> (Drs, Drs, usize) {
    let mut lca = tree.nodes[target].parent;
    while let Some(a) = lca {
        if o.ancestors.contains(&a) {
            break;
        }
        lca = tree.nodes[a].parent;
    }
    let lca = lca.unwrap_or(tree.root(target));
    let (p, t) = (almost_lca(tree, o.preemptor, lca), almost_lca(tree, target, lca));
    (drs(tree, p, None), drs(tree, t, None), t)
}

type Chosen<'c, 'a> = Vec<(&'c Candidate<'a>, PreemptedReason)>;

/// The preemptor fits once its own (simulated) usage is taken out again, and its topology has
/// room with the `chosen` victims gone (Kueue's `workloadFitsForFairSharing`). `whole`: the victims
/// are whole workloads; a growth taken frees no known domain, so then none counts as gone.
fn fits(sim: &mut Without<'_, '_>, p: &Preemptor<'_>, chosen: &Chosen<'_, '_>, whole: bool) -> bool {
    let tree = sim.tree_mut();
    tree.remove_all(p.cq_idx, p.usage);
    let ok = workload_fits(tree, p, true);
    tree.add_all(p.cq_idx, p.usage);
    ok && topology_fits(p, chosen.iter().filter(|_| whole).map(|(c, _)| c.key))
}

/// Rule S2 with the first strategy; returns whether the preemptor fits, and the candidates the
/// strategy refused, for the second (`runFirstFsStrategy`).
fn first_strategy<'c, 'a: 'c>(
    sim: &mut Without<'_, 'c>,
    p: &Preemptor<'_>,
    cands: &'c [Candidate<'a>],
    strategy: FairPreemptionStrategy,
    chosen: &mut Chosen<'c, 'a>,
    whole: bool,
) -> (bool, Vec<&'c Candidate<'a>>) {
    let mut o = TargetOrdering::new(sim, p.cq_idx, cands);
    let mut retry = Vec::new();
    // A ClusterQueue within its nominal quota of the contested resources (its workload
    // counted) may take back what it lends whatever the shares (FairSharingPreemptWithinNominal).
    let within_nominal = p.contested.iter().all(|fr| !sim.is_borrowing(p.cq_idx, fr));
    while let Some(target) = o.next(sim) {
        if target == p.cq_idx || within_nominal {
            let Some(c) = o.pop(target) else { continue };
            sim.remove(c.cq_idx, c.usage);
            let why = if target == p.cq_idx {
                PreemptedReason::InClusterQueue
            } else {
                PreemptedReason::InCohortReclamation
            };
            chosen.push((c, why));
            if fits(sim, p, chosen, whole) {
                return (true, retry);
            }
            continue;
        }
        let (preemptor_new, target_old, at) = shares(sim, &o, target);
        if preemptor_new.precise().is_infinite() && !target_old.precise().is_infinite() {
            // No victim here can pass either strategy; kept for the second one.
            while let Some(c) = o.pop(target) {
                retry.push(c);
            }
            continue;
        }
        while let Some(c) = o.pop(target) {
            let target_new = {
                let tree = sim.tree_mut();
                tree.remove_all(c.cq_idx, c.usage);
                let d = drs(tree, at, None);
                tree.add_all(c.cq_idx, c.usage);
                d
            };
            if allows(strategy, &preemptor_new, &target_old, &target_new) {
                sim.remove(c.cq_idx, c.usage);
                chosen.push((c, PreemptedReason::InCohortFairSharing));
                if fits(sim, p, chosen, whole) {
                    return (true, retry);
                }
                // Shares changed: the next ClusterQueue may be another one.
                break;
            }
            retry.push(c);
        }
    }
    (false, retry)
}

/// Rule S2-b over the candidates the first strategy refused: at most one victim per ClusterQueue
/// (`runSecondFsStrategy`).
fn second_strategy<'c, 'a: 'c>(
    sim: &mut Without<'_, 'c>,
    p: &Preemptor<'_>,
    retry: Vec<&'c Candidate<'a>>,
    chosen: &mut Chosen<'c, 'a>,
    whole: bool,
) -> bool {
    let mut o = TargetOrdering::new(sim, p.cq_idx, retry);
    while let Some(target) = o.next(sim) {
        let (preemptor_new, target_old, _) = shares(sim, &o, target);
        if let Some(c) = o.pop(target)
            && compare(&preemptor_new, &target_old).is_lt()
        {
            sim.remove(c.cq_idx, c.usage);
            chosen.push((c, PreemptedReason::InCohortFairSharing));
            if fits(sim, p, chosen, whole) {
                return true;
            }
        }
        o.drop_queue(target);
    }
    false
}

/// The victims to evict so the preemptor fits with fair sharing on, or empty when the strategies
/// allow no such set. The tree is left as it was found.
///
/// Growth first (beyond Kueue, as `growth_first` is for classical preemption): when candidates carry
/// growth above a floor, the same search runs first over their growth alone, each growth a victim the
/// strategies judge on its own; if that is enough, only growth is taken (the victims shrink back to
/// their floors). Otherwise Kueue's search over whole workloads decides.
pub fn fair_targets(
    tree: &mut QuotaTree,
    p: &Preemptor<'_>,
    admitted: &[Candidate<'_>],
    strategies: &[FairPreemptionStrategy],
) -> Vec<Target> {
    let cands: Vec<Candidate<'_>> = admitted
        .iter()
        .filter(|c| {
            let one = std::iter::once((c.cq_idx, c.priority, c.queue_timestamp, c.usage));
            any_candidate(tree, p, one)
        })
        .cloned()
        .collect();
    let growths: Vec<Option<FrAmounts>> = cands.iter().map(|c| growth(c.usage, c.floor)).collect();
    let grown: Vec<Candidate<'_>> = cands
        .iter()
        .zip(&growths)
        .filter_map(|(c, g)| {
            Some(Candidate {
                usage: g.as_ref()?,
                floor: None,
                ..c.clone()
            })
        })
        .collect();
    if !grown.is_empty() {
        let targets = search(tree, p, grown, strategies, true);
        if !targets.is_empty() {
            return targets;
        }
    }
    search(tree, p, cands, strategies, false)
}

/// Kueue's fair-sharing search over `cands` (`growth_only`: each stands for its growth alone).
fn search(
    tree: &mut QuotaTree,
    p: &Preemptor<'_>,
    mut cands: Vec<Candidate<'_>>,
    strategies: &[FairPreemptionStrategy],
    growth_only: bool,
) -> Vec<Target> {
    let Some(&first) = strategies.first() else {
        return Vec::new();
    };
    if cands.is_empty() {
        return Vec::new();
    }
    cands.sort_by(|a, b| order(a, b, p.cq_idx));
    let mut sim = tree.without();
    let mut chosen: Chosen<'_, '_> = Vec::new();
    // Every share below counts the incoming workload.
    sim.tree_mut().add_all(p.cq_idx, p.usage);
    let whole = !growth_only;
    let (mut ok, retry) = first_strategy(&mut sim, p, &cands, first, &mut chosen, whole);
    if !ok && strategies.len() > 1 {
        ok = second_strategy(&mut sim, p, retry, &mut chosen, whole);
    }
    sim.tree_mut().remove_all(p.cq_idx, p.usage);
    if !ok {
        return Vec::new();
    }
    // Put back, most recent first except the last, whatever neither the quota nor the topology
    // needs (Kueue's `fillBackWorkloads`).
    let mut keep = vec![true; chosen.len()];
    for i in (0..chosen.len().saturating_sub(1)).rev() {
        let c = chosen[i].0;
        sim.put_back(c.cq_idx, c.usage);
        let gone = chosen
            .iter()
            .zip(&keep)
            .enumerate()
            .filter(|(j, (_, out))| whole && **out && *j != i)
            .map(|(_, ((c, _), _))| c.key);
        if workload_fits(&sim, p, true) && topology_fits(p, gone) {
            keep[i] = false;
        } else {
            sim.remove(c.cq_idx, c.usage);
        }
    }
    chosen
        .into_iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|((c, reason), _)| Target {
            key: c.key.clone(),
            reason,
            growth_only,
        })
        .collect()
}

#[cfg(test)]
#[path = "fair_preemption_tests.rs"]
mod tests;
