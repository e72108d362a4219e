//! The banker's check over a ClusterQueue and its Cohort: an upgrade's slice that grows it is
//! admitted only if, with it, every upgrade in flight can still finish in some order.
//!
//! What is held. An admitted workload that is not an upgrade in flight (a batch job, a service at
//! steady state) holds its usage and asks for nothing more while admitted. An upgrade in flight (a
//! RayService slice while it has a pending cluster, marked with an [`UpgradeClaim`] by its job)
//! holds its admitted slice: its serving cluster and its pending cluster at the current step. Until
//! it finishes it may still ask, through further slices, for up to its claim: the `peak` its job
//! computed for the rest of the upgrade (the sizes `quotagate plan` walks) less what it holds. Once
//! finished it holds `done`, the new cluster alone. A pending workload holds nothing.
//!
//! What each waits for. Only an upgrade in flight holds quota and waits for more: its next step,
//! for quota others hold. A grow of one surge step comes after a shrink of its serving cluster by
//! the same share (`rayservice::job::step`); with a new version asking more per replica the grow
//! needs more than that shrink freed, and two such upgrades can each hold what the other needs.
//!
//! Why no cycle forms. The check keeps the upgrades in flight *safe*: there is an order in which
//! each one's remaining claim fits what is available (`QuotaTree::available`, so cohorts, borrowing
//! and lending limits count) once those before it have finished and given back `held - done`. Every
//! admission that can grow an upgrade (a new upgrade's first slice, and each later step) goes
//! through [`AdmissionCore::banker_refusal`]: it waits if, with it admitted, an upgrade could no
//! longer finish that could before. Shrinks and finishes only lower usage, and `available` never
//! drops when usage does, so they keep the order valid. In a safe state the first upgrade of the
//! order has its whole claim available now: each step it asks for fits and keeps the same order
//! valid, so it finishes; then the next one's claim fits, and so on. Every upgrade finishes, so none
//! waits forever on another: a wait-for cycle among upgrades cannot form.
//!
//! What it does not cover. Work that is not an upgrade is not gated by the check (as the issue
//! asks): admitted after it, it may take quota an upgrade freed. Such a holder waits for nothing, so
//! it closes no cycle, and the upgrade moves on when it finishes (one that never does, such as
//! another service at steady state, is a quota shortage, and `explain` names it as the holder).
//! With several resources and upgrades that end bigger than they hold, finding an order is hard in
//! general; the search below is greedy (releasing upgrades first, in any order, which is exact for
//! them), so it may make a safe admission wait, never admit an unsafe one. O(n^2) fit checks in the
//! upgrades of one cohort tree, run only when an upgrade's slice is about to be admitted.

use std::collections::{BTreeMap, BTreeSet};

use super::amount::{Amount, FlavorResource, FrAmounts};
use super::model::{PodSetAssignment, UpgradeClaim, WorkloadKey};
use super::scheduler::AdmissionCore;
use super::tree::QuotaTree;

/// One upgrade in flight as the check sees it, in the flavor-resources of its ClusterQueue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upgrade {
    pub key: WorkloadKey,
    pub cq_idx: usize,
    /// What its admitted slice holds now.
    pub held: FrAmounts,
    /// The most it may still need beyond `held` before it finishes.
    pub claim: FrAmounts,
    /// What it holds once finished.
    pub done: FrAmounts,
}

impl Upgrade {
    /// An upgrade holding `held` in ClusterQueue `cq_idx`, its resources in `flavors` (resource ->
    /// flavor, as its slices keep them), asking `c`. A resource the claim does not name is assumed
    /// neither to grow nor to be given back.
    pub fn of(
        key: WorkloadKey,
        cq_idx: usize,
        held: &FrAmounts,
        flavors: &BTreeMap<String, String>,
        c: &UpgradeClaim,
    ) -> Upgrade {
        let mut per_resource: BTreeMap<&str, Amount> = BTreeMap::new();
        for (fr, v) in held {
            *per_resource.entry(fr.resource.as_str()).or_default() += *v;
        }
        let mut claim = FrAmounts::new();
        for (r, peak) in &c.peak {
            let Some(f) = flavors.get(r) else { continue };
            let more = (*peak - per_resource.get(r.as_str()).copied().unwrap_or_default()).clamp_zero();
            if more > Amount::ZERO {
                claim.insert(FlavorResource::new(f, r), more);
            }
        }
        let mut done = FrAmounts::new();
        for (fr, v) in held {
            if !c.done.contains_key(&fr.resource) {
                done.insert(fr.clone(), *v);
            }
        }
        for (r, v) in &c.done {
            if let Some(f) = flavors.get(r) {
                done.insert(FlavorResource::new(f, r), *v);
            }
        }
        Upgrade {
            key,
            cq_idx,
            held: held.clone(),
            claim,
            done,
        }
    }

    fn releases_only(&self) -> bool {
        self.done
            .iter()
            .all(|(fr, v)| *v <= self.held.get(fr).copied().unwrap_or_default())
    }

    /// How much room it leaves once done, relative to what it asks: larger goes first among
    /// upgrades that end bigger than they hold (the one-resource optimum: by `peak - done`).
    fn room_left(&self, tree: &QuotaTree) -> f64 {
        let mut frs: BTreeSet<&FlavorResource> = self.claim.keys().collect();
        frs.extend(self.held.keys());
        frs.extend(self.done.keys());
        let get = |m: &FrAmounts, fr| m.get(fr).copied().unwrap_or_default().0 as f64;
        frs.into_iter()
            .map(|fr| {
                let scale = tree.potential_available(self.cq_idx, fr).0.max(1) as f64;
                (get(&self.claim, fr) + get(&self.held, fr) - get(&self.done, fr)) / scale
            })
            .sum()
    }
}

/// The outcome of the search: the upgrades (indices) left unable to finish, in index order, and
/// the tree once every other one has finished.
pub struct Outcome {
    pub stranded: Vec<usize>,
    pub end: QuotaTree,
}

/// The banker's search on `tree` (usage as it would be): repeatedly finish an upgrade whose claim
/// fits (releasing ones first), until none is left or none fits.
pub fn search(mut tree: QuotaTree, ups: &[Upgrade]) -> Outcome {
    let mut left: Vec<usize> = (0..ups.len()).collect();
    loop {
        let mut best: Option<(usize, (bool, f64))> = None;
        for (pos, &i) in left.iter().enumerate() {
            let u = &ups[i];
            if !tree.fits(u.cq_idx, &u.claim) {
                continue;
            }
            let rank = (u.releases_only(), u.room_left(&tree));
            let better = best.as_ref().is_none_or(|(_, b)| rank > *b);
            if better {
                best = Some((pos, rank));
            }
        }
        let Some((pos, _)) = best else { break };
        let u = &ups[left.remove(pos)];
        tree.remove_all(u.cq_idx, &u.held);
        tree.add_all(u.cq_idx, &u.done);
    }
    Outcome {
        stranded: left,
        end: tree,
    }
}

/// Why upgrade `u` could not finish in `end`: the first flavor-resource of its claim that does not fit.
fn shortfall(u: &Upgrade, end: &QuotaTree) -> String {
    let short = u.claim.iter().find(|(fr, v)| **v > end.available(u.cq_idx, fr));
    match short {
        Some((fr, v)) => format!(
            "it may still need {} more {fr} beyond what it holds, and at most {} would be free once every upgrade that can finish has",
            fr.show(*v),
            fr.show(end.available(u.cq_idx, fr).clamp_zero())
        ),
        None => "its claim would not fit".to_string(),
    }
}

impl AdmissionCore {
    /// The upgrades in flight in the cohort tree of ClusterQueue `cq_idx` (not being evicted),
    /// leaving out `skip`.
    fn upgrades_in_flight(&self, cq_idx: usize, skip: &[&WorkloadKey]) -> Vec<Upgrade> {
        let mut out = Vec::new();
        for ci in self.tree.cqs_under(self.tree.root(cq_idx)) {
            for k in self
                .admitted_by_cq
                .get(&self.tree.nodes[ci].name)
                .into_iter()
                .flatten()
            {
                let Some(a) = self.admitted.get(k) else { continue };
                let Some(c) = a
                    .model
                    .upgrade
                    .as_ref()
                    .filter(|_| !a.evicting && !skip.contains(&k))
                else {
                    continue;
                };
                out.push(Upgrade::of(
                    k.clone(),
                    ci,
                    &a.usage,
                    &flavors_of(&a.admission.pod_set_assignments),
                    c,
                ));
            }
        }
        out
    }

    /// Why pending workload `key`, an upgrade's slice about to be admitted in ClusterQueue `cq_idx`
    /// with `usage` (flavors as in `podsets`), must wait: with it admitted, and the admitted
    /// workloads in `freed` (the slice it replaces, its victims) gone, some upgrade in flight could
    /// no longer finish that could before. `None`: admit it (or it is no upgrade).
    pub(super) fn banker_refusal(
        &self,
        key: &WorkloadKey,
        cq_idx: usize,
        usage: &FrAmounts,
        podsets: &[PodSetAssignment],
        freed: &[&WorkloadKey],
    ) -> Option<String> {
        let w = &self.pending.get(key)?.model;
        let claim = w.upgrade.as_ref()?;
        let before = self.upgrades_in_flight(cq_idx, &[]);
        let stuck_before: BTreeSet<&WorkloadKey> = search(self.tree.clone(), &before)
            .stranded
            .iter()
            .map(|&i| &before[i].key)
            .collect();
        let mut sim = self.tree.clone();
        for k in freed {
            if let Some(a) = self.admitted.get(*k)
                && let Some(i) = self.tree.cq(&a.admission.cluster_queue)
            {
                sim.remove_all(i, &a.usage);
            }
        }
        sim.add_all(cq_idx, usage);
        let mut after = self.upgrades_in_flight(cq_idx, freed);
        after.push(Upgrade::of(
            key.clone(),
            cq_idx,
            usage,
            &flavors_of(podsets),
            claim,
        ));
        let out = search(sim, &after);
        // The slice this one replaces stands for the same upgrade: stuck before, it is no news now.
        let old = w.replacement_for.as_ref();
        let was_stuck = |k: &WorkloadKey| {
            stuck_before.contains(k) || (k == key && old.is_some_and(|o| stuck_before.contains(o)))
        };
        let u = out
            .stranded
            .iter()
            .map(|&i| &after[i])
            .find(|u| !was_stuck(&u.key))?;
        // What the check saw, for a refusal that lasts (issue 67 was a claim gone stale).
        tracing::debug!(
            workload = %key,
            "banker's check refuses: upgrades in flight before {before:?}, stranded {stuck_before:?}; with it {after:?}, stranded {:?}",
            out.stranded
        );
        let who = if &u.key == key {
            format!("{} (this one)", u.key)
        } else {
            u.key.to_string()
        };
        Some(format!(
            "admitting it could leave upgrade {who} unable to finish: {}",
            shortfall(u, &out.end)
        ))
    }
}

/// resource -> flavor of an admission's podsets (the first naming the resource), as its slices
/// keep them (the scheduler's `forced_flavors`).
fn flavors_of(podsets: &[PodSetAssignment]) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for ps in podsets {
        for (r, f) in &ps.flavors {
            m.entry(r.clone()).or_insert_with(|| f.clone());
        }
    }
    m
}

#[cfg(test)]
#[path = "banker_tests.rs"]
mod tests;
