//! Classical preemption as Kueue does it: candidates within the ClusterQueue and from borrowing
//! ClusterQueues of the same cohort tree, ordered, removed greedily until the preemptor fits, then
//! added back in reverse to keep the victim set small.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use super::amount::{Amount, FlavorResource, FrAmounts};
use super::growth_first::{Piece, growth, minimal as growth_first_minimal};
use super::model::{
    BorrowWithinCohortPolicy, ClusterQueueModel, ReclaimWithinCohort, WithinClusterQueue, WorkloadKey,
};
use super::tree::QuotaTree;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PreemptedReason {
    InClusterQueue,
    InCohortReclamation,
    InCohortReclaimWhileBorrowing,
    /// Taken by fair-sharing preemption from a ClusterQueue with a higher share.
    InCohortFairSharing,
}

impl PreemptedReason {
    pub fn as_str(self) -> &'static str {
        match self {
            PreemptedReason::InClusterQueue => "InClusterQueue",
            PreemptedReason::InCohortReclamation => "InCohortReclamation",
            PreemptedReason::InCohortReclaimWhileBorrowing => "InCohortReclaimWhileBorrowing",
            PreemptedReason::InCohortFairSharing => "InCohortFairSharing",
        }
    }
}

/// An admitted workload that may be preempted.
#[derive(Clone, Debug)]
pub struct Candidate<'a> {
    pub key: &'a WorkloadKey,
    pub cq_idx: usize,
    pub priority: i32,
    pub queue_timestamp: i64,
    pub admitted_at: i64,
    pub uid: &'a str,
    pub usage: &'a FrAmounts,
    /// Already being evicted: preferred, since it costs nothing more.
    pub evicting: bool,
    /// Admission fair sharing: its LocalQueue's name and usage rank, when its ClusterQueue uses it.
    pub lq_usage: Option<(&'a str, u64)>,
    /// What it can shrink back to instead of being evicted (a service's serving part while its
    /// upgrade's growth is admitted): its growth, `usage - floor`, is offered first (`growth_first`).
    pub floor: Option<&'a FrAmounts>,
}

/// Whether the preemptor's topology placement succeeds with the given workloads gone.
pub type TasFits<'a> = dyn Fn(&[&WorkloadKey]) -> bool + 'a;

pub struct Preemptor<'a> {
    pub cq_idx: usize,
    pub cq: &'a ClusterQueueModel,
    pub priority: i32,
    pub queue_timestamp: i64,
    /// The full usage the preemptor needs (for a replacement slice, the old slice is already
    /// removed from the tree by the caller).
    pub usage: &'a FrAmounts,
    pub contested: &'a BTreeSet<FlavorResource>,
    /// Whether the preemptor's TAS podsets find room in their topologies with these workloads gone
    /// (Kueue's `workloadFits` runs `FindTopologyAssignmentsForWorkload`); `None` when it has none.
    pub tas_fits: Option<&'a TasFits<'a>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub key: WorkloadKey,
    pub reason: PreemptedReason,
    /// Only the growth above the candidate's floor is taken: it shrinks back to its floor instead
    /// of being evicted.
    pub growth_only: bool,
}

fn uses_contested(c: &Candidate<'_>, contested: &BTreeSet<FlavorResource>) -> bool {
    contested
        .iter()
        .any(|fr| c.usage.get(fr).is_some_and(|v| *v > Amount::ZERO))
}

fn cq_borrowing(tree: &QuotaTree, cq: usize, contested: &BTreeSet<FlavorResource>) -> bool {
    !tree.within_nominal(cq, contested)
}

/// Why a candidate may be preempted, as Kueue's classical preemption classifies it
/// (`classical/hierarchical_preemption.go`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// In the preemptor's own ClusterQueue.
    WithinCq,
    /// The preemptor sits closer to the quota the candidate uses: a subtree holding the
    /// preemptor guarantees what it asks for, and the candidate borrows from outside it.
    Hierarchical,
    /// Only if the preemptor does not borrow once admitted.
    WithoutBorrowing,
    /// Even while the preemptor borrows (`borrowWithinCohort`, below its threshold).
    WhileBorrowing,
}

impl Variant {
    fn reason(self) -> PreemptedReason {
        match self {
            Variant::WithinCq => PreemptedReason::InClusterQueue,
            Variant::Hierarchical | Variant::WithoutBorrowing => PreemptedReason::InCohortReclamation,
            Variant::WhileBorrowing => PreemptedReason::InCohortReclaimWhileBorrowing,
        }
    }
}

#[derive(Clone, Debug)]
struct Elem<'a> {
    c: Candidate<'a>,
    /// The lowest cohort shared with the preemptor (None in its own ClusterQueue).
    lca: Option<usize>,
    variant: Variant,
}

/// The preemptor's cohorts from its parent to the root, each with whether the preemptor has
/// the hierarchical advantage over borrowers met at that level: once a subtree holding the
/// preemptor fits the request, it keeps the advantage above.
fn advantage_levels(tree: &QuotaTree, p: &Preemptor<'_>) -> Vec<(usize, bool)> {
    let (mut adv, mut remaining) = tree.fits_in_quota(p.cq_idx, p.usage);
    let mut out = Vec::new();
    let mut cur = tree.nodes[p.cq_idx].parent;
    while let Some(c) = cur {
        out.push((c, adv));
        let (fits, rest) = tree.fits_in_quota(c, &remaining);
        adv = adv || fits;
        remaining = rest;
        cur = tree.nodes[c].parent;
    }
    out
}

/// The candidate's ClusterQueue and every cohort below `lca` on its path borrow a contested
/// resource (Kueue prunes subtrees within nominal, and re-checks as victims are removed).
fn reclaimable_below(tree: &QuotaTree, cq: usize, lca: usize, frs: &BTreeSet<FlavorResource>) -> bool {
    cq == lca
        || (!tree.within_nominal(cq, frs)
            && tree.nodes[cq]
                .parent
                .is_some_and(|q| reclaimable_below(tree, q, lca, frs)))
}

fn classify(
    tree: &QuotaTree,
    p: &Preemptor<'_>,
    levels: &[(usize, bool)],
    c: &Candidate<'_>,
) -> Option<(Option<usize>, Variant)> {
    uses_contested(c, p.contested).then_some(())?;
    let pol = p.cq.preemption;
    if c.cq_idx == p.cq_idx {
        let ok = match pol.within_cluster_queue {
            WithinClusterQueue::Never => false,
            WithinClusterQueue::LowerPriority => c.priority < p.priority,
            WithinClusterQueue::LowerOrNewerEqualPriority => {
                c.priority < p.priority || (c.priority == p.priority && p.queue_timestamp < c.queue_timestamp)
            }
        };
        ok.then_some(())?;
        return Some((None, Variant::WithinCq));
    }
    let ok = match pol.reclaim_within_cohort {
        ReclaimWithinCohort::Never => false,
        ReclaimWithinCohort::LowerPriority => c.priority < p.priority,
        ReclaimWithinCohort::Any => true,
    };
    ok.then_some(())?;
    let &(lca, advantage) = levels.iter().find(|(l, _)| tree.is_under(c.cq_idx, *l))?;
    reclaimable_below(tree, c.cq_idx, lca, p.contested).then_some(())?;
    let variant = if advantage {
        Variant::Hierarchical
    } else {
        match borrow_threshold(p) {
            Some(t) if c.priority < t => Variant::WhileBorrowing,
            _ => Variant::WithoutBorrowing,
        }
    };
    Some((Some(lca), variant))
}

/// Candidates allowed by the preemptor's policies, in Kueue's order: already evicted first, then
/// hierarchical, priority and same-queue candidates, each group by `order`.
fn find_candidates<'a>(tree: &QuotaTree, p: &Preemptor<'_>, admitted: &[Candidate<'a>]) -> Vec<Elem<'a>> {
    let levels = advantage_levels(tree, p);
    let mut out: Vec<Elem<'a>> = admitted
        .iter()
        .filter_map(|c| {
            let (lca, variant) = classify(tree, p, &levels, c)?;
            Some(Elem {
                c: c.clone(),
                lca,
                variant,
            })
        })
        .collect();
    let group = |v: Variant| match v {
        Variant::Hierarchical => 0,
        Variant::WithoutBorrowing | Variant::WhileBorrowing => 1,
        Variant::WithinCq => 2,
    };
    let cmp = |a: &Elem<'a>, b: &Elem<'a>| {
        b.c.evicting
            .cmp(&a.c.evicting)
            .then_with(|| group(a.variant).cmp(&group(b.variant)))
            .then_with(|| order(&a.c, &b.c, p.cq_idx))
    };
    if out.iter().any(|e| e.c.lq_usage.is_some()) {
        // Kueue compares LocalQueue usage only within one ClusterQueue, which is not a total
        // order across ClusterQueues; `sort_by` may panic on such a comparison, a merge does not.
        return merge_sort(out, &cmp);
    }
    out.sort_by(cmp);
    out
}

/// A stable merge sort that accepts a comparison that is not a total order.
fn merge_sort<T>(v: Vec<T>, cmp: &impl Fn(&T, &T) -> Ordering) -> Vec<T> {
    if v.len() <= 1 {
        return v;
    }
    let mut left = v;
    let right = left.split_off(left.len() / 2);
    let (left, right) = (merge_sort(left, cmp), merge_sort(right, cmp));
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut l, mut r) = (left.into_iter().peekable(), right.into_iter().peekable());
    while let (Some(a), Some(b)) = (l.peek(), r.peek()) {
        let next = if cmp(b, a) == Ordering::Less {
            r.next()
        } else {
            l.next()
        };
        out.extend(next);
    }
    out.extend(l);
    out.extend(r);
    out
}

/// The candidates of [`find_candidates`] themselves, in its order (for `quotagate explain`).
pub fn allowed_candidates<'a>(
    tree: &QuotaTree,
    p: &Preemptor<'_>,
    admitted: &[Candidate<'a>],
) -> Vec<Candidate<'a>> {
    find_candidates(tree, p, admitted)
        .into_iter()
        .map(|e| e.c)
        .collect()
}

/// Whether the preemptor's policies allow any of `admitted` as a victim for `frs`.
pub fn any_candidate<'a>(
    tree: &QuotaTree,
    p: &Preemptor<'_>,
    admitted: impl IntoIterator<Item = (usize, i32, i64, &'a FrAmounts)>,
) -> bool {
    let pol = p.cq.preemption;
    admitted.into_iter().any(|(cq_idx, priority, ts, usage)| {
        if !p
            .contested
            .iter()
            .any(|fr| usage.get(fr).is_some_and(|v| *v > Amount::ZERO))
        {
            return false;
        }
        if cq_idx == p.cq_idx {
            match pol.within_cluster_queue {
                WithinClusterQueue::Never => false,
                WithinClusterQueue::LowerPriority => priority < p.priority,
                WithinClusterQueue::LowerOrNewerEqualPriority => {
                    priority < p.priority || (priority == p.priority && p.queue_timestamp < ts)
                }
            }
        } else {
            let ok = match pol.reclaim_within_cohort {
                ReclaimWithinCohort::Never => false,
                ReclaimWithinCohort::LowerPriority => priority < p.priority,
                ReclaimWithinCohort::Any => true,
            };
            ok && cq_borrowing(tree, cq_idx, p.contested)
        }
    })
}

/// Kueue's `CandidatesOrdering`: already evicted first, other ClusterQueues before the preemptor's,
/// lower priority, most recently admitted, then UID.
pub(super) fn order(a: &Candidate<'_>, b: &Candidate<'_>, own: usize) -> Ordering {
    b.evicting
        .cmp(&a.evicting)
        .then_with(|| (a.cq_idx == own).cmp(&(b.cq_idx == own)))
        // Admission fair sharing (Kueue's `CandidatesOrdering`): within one ClusterQueue, a
        // workload of a busier LocalQueue goes first.
        .then_with(|| match (a.lq_usage, b.lq_usage) {
            (Some((qa, ua)), Some((qb, ub))) if a.cq_idx == b.cq_idx && qa != qb => ub.cmp(&ua),
            _ => Ordering::Equal,
        })
        .then_with(|| a.priority.cmp(&b.priority))
        .then_with(|| b.admitted_at.cmp(&a.admitted_at))
        .then_with(|| a.uid.cmp(b.uid))
}

/// Kueue's `queueUnderNominalInResourcesNeedingPreemption`: the preemptor's ClusterQueue uses, right
/// now, less than its own quota of every contested resource (its request not counted). Only then
/// may it reclaim from the cohort with the combined candidate set.
fn under_nominal(tree: &QuotaTree, p: &Preemptor<'_>) -> bool {
    p.contested
        .iter()
        .all(|fr| tree.usage(p.cq_idx, fr) < tree.subtree_quota(p.cq_idx, fr))
}

pub(super) fn workload_fits(tree: &QuotaTree, p: &Preemptor<'_>, allow_borrowing: bool) -> bool {
    p.usage.iter().all(|(fr, v)| {
        if *v <= Amount::ZERO {
            return true;
        }
        if !allow_borrowing && tree.usage(p.cq_idx, fr) + *v > tree.subtree_quota(p.cq_idx, fr) {
            return false;
        }
        *v <= tree.available(p.cq_idx, fr)
    })
}

/// Whether the preemptor's TAS podsets find room in their topologies with the workloads `gone`
/// out (Kueue's `workloadFits` ends with `FindTopologyAssignmentsForWorkload`, in every search);
/// true when it has none.
pub(super) fn topology_fits<'k>(p: &Preemptor<'_>, gone: impl Iterator<Item = &'k WorkloadKey>) -> bool {
    p.tas_fits.is_none_or(|tas| {
        let keys: Vec<&WorkloadKey> = gone.collect();
        tas(&keys)
    })
}

/// The victims to evict so the preemptor fits, or empty when no set of candidates makes it fit.
/// Kueue's `classicalPreemptions`: one or two runs over the ordered candidates, with and without
/// the preemptor borrowing. The tree is left as it was found.
pub fn find_targets(tree: &mut QuotaTree, p: &Preemptor<'_>, admitted: &[Candidate<'_>]) -> Vec<Target> {
    let candidates = find_candidates(tree, p, admitted);
    if candidates.is_empty() {
        return Vec::new();
    }
    let from_others = candidates.iter().any(|e| e.variant != Variant::WithinCq);
    let hierarchical = candidates.iter().any(|e| e.variant == Variant::Hierarchical);
    let borrow_forbidden = borrow_threshold(p).is_none();
    let attempts: &[bool] = if !from_others || (borrow_forbidden && !under_nominal(tree, p)) {
        &[true]
    } else if borrow_forbidden && !hierarchical {
        &[false, true]
    } else {
        &[true, false]
    };
    let growth_first = candidates.iter().any(|e| growth(e.c.usage, e.c.floor).is_some());
    let targets = search(tree, p, &candidates, attempts, growth_first);
    tracing::debug!(
        preemptor_usage = ?p.usage,
        candidates = ?candidates.iter().map(|e| (e.c.key.to_string(), e.c.usage, e.c.floor)).collect::<Vec<_>>(),
        targets = ?targets.iter().map(|t| (t.key.to_string(), t.growth_only)).collect::<Vec<_>>(),
        "preemption: the candidates as the core saw them, and the targets chosen"
    );
    targets
}

/// The runs of `find_targets` over `candidates`, growth first when any candidate has growth.
fn search(
    tree: &mut QuotaTree,
    p: &Preemptor<'_>,
    candidates: &[Elem<'_>],
    attempts: &[bool],
    growth_first: bool,
) -> Vec<Target> {
    for &allow_borrowing in attempts {
        if growth_first {
            let pieces: Vec<Piece<'_>> = candidates
                .iter()
                .map(|e| Piece {
                    cq_idx: e.c.cq_idx,
                    usage: e.c.usage,
                    floor: e.c.floor,
                })
                .collect();
            // Only candidates out whole free their topology domains (a growth taken shrinks a
            // workload, but which of its pods go is not known here).
            let chosen = growth_first_minimal(
                tree,
                &pieces,
                |t, i| still_valid(t, p, &candidates[i], allow_borrowing),
                |t, whole| {
                    workload_fits(t, p, allow_borrowing)
                        && topology_fits(p, whole.iter().map(|&i| candidates[i].c.key))
                },
            );
            if !chosen.is_empty() {
                return chosen
                    .into_iter()
                    .map(|(i, growth_only)| Target {
                        key: candidates[i].c.key.clone(),
                        reason: candidates[i].variant.reason(),
                        growth_only,
                    })
                    .collect();
            }
            continue;
        }
        let chosen = minimal(tree, p, candidates, allow_borrowing);
        if !chosen.is_empty() {
            return chosen
                .into_iter()
                .map(|e| Target {
                    key: e.c.key.clone(),
                    reason: e.variant.reason(),
                    growth_only: false,
                })
                .collect();
        }
    }
    Vec::new()
}

/// Kueue's `candidateIsValid`, on the tree as the search has changed it so far.
fn still_valid(tree: &QuotaTree, p: &Preemptor<'_>, e: &Elem<'_>, allow_borrowing: bool) -> bool {
    let Some(lca) = e.lca else {
        return true;
    };
    if allow_borrowing && e.variant == Variant::WithoutBorrowing {
        return false;
    }
    reclaimable_below(tree, e.c.cq_idx, lca, p.contested)
}

/// Priority below which other ClusterQueues' workloads may be preempted while borrowing.
fn borrow_threshold(p: &Preemptor<'_>) -> Option<i32> {
    let b = p.cq.preemption.borrow_within_cohort;
    if b.policy == BorrowWithinCohortPolicy::Never {
        return None;
    }
    let mut t = p.priority;
    if let Some(max) = b.max_priority_threshold
        && max < t
    {
        t = max.saturating_add(1);
    }
    Some(t)
}

fn minimal<'a>(
    tree: &mut QuotaTree,
    p: &Preemptor<'_>,
    candidates: &[Elem<'a>],
    allow_borrowing: bool,
) -> Vec<Elem<'a>> {
    // With TAS podsets, the topology must have room too with the chosen workloads gone.
    let fits = |sim: &QuotaTree, gone: &[&Elem<'a>]| {
        workload_fits(sim, p, allow_borrowing) && topology_fits(p, gone.iter().map(|e| e.c.key))
    };
    // Every removal below is undone when `sim` drops, on every return path.
    let mut sim = tree.without();
    let mut removed: Vec<&Elem<'a>> = Vec::new();
    let mut fit = false;
    for e in candidates {
        if !still_valid(&sim, p, e, allow_borrowing) {
            continue;
        }
        sim.remove(e.c.cq_idx, e.c.usage);
        removed.push(e);
        if fits(&sim, &removed) {
            fit = true;
            break;
        }
    }
    if !fit {
        return Vec::new();
    }
    // Put back, most recently removed first (except the last, which made it fit), whatever is
    // not needed.
    let mut keep = vec![true; removed.len()];
    for i in (0..removed.len().saturating_sub(1)).rev() {
        sim.put_back(removed[i].c.cq_idx, removed[i].c.usage);
        let still: Vec<&Elem<'a>> = removed
            .iter()
            .zip(&keep)
            .enumerate()
            .filter(|(j, (_, k))| **k && *j != i)
            .map(|(_, (e, _))| *e)
            .collect();
        if fits(&sim, &still) {
            keep[i] = false;
        } else {
            sim.remove(removed[i].c.cq_idx, removed[i].c.usage);
        }
    }
    removed
        .into_iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(e, _)| e.clone())
        .collect()
}

#[cfg(test)]
mod merge_tests {
    use super::*;

    /// A comparison with a cycle (as LocalQueue usage within a ClusterQueue against priority
    /// across them can make) still sorts without a panic, every element kept; a total order sorts
    /// as `sort_by` does, stably.
    #[test]
    fn merge_sort_takes_any_comparison() {
        let cyclic = |a: &u8, b: &u8| match (a % 3, b % 3) {
            (x, y) if x == y => Ordering::Equal,
            (0, 1) | (1, 2) | (2, 0) => Ordering::Less,
            _ => Ordering::Greater,
        };
        let v: Vec<u8> = (0..50).rev().collect();
        let mut got = merge_sort(v.clone(), &cyclic);
        got.sort_unstable();
        assert_eq!(got, (0..50).collect::<Vec<u8>>());
        let pairs: Vec<(u8, u8)> = (0..40).map(|i| (i % 4, i)).collect();
        let mut want = pairs.clone();
        want.sort_by_key(|a| a.0);
        assert_eq!(
            merge_sort(pairs, &|a: &(u8, u8), b: &(u8, u8)| a.0.cmp(&b.0)),
            want
        );
    }
}
