//! Classical preemption as Kueue does it: candidates within the ClusterQueue and from borrowing
//! ClusterQueues of the same cohort tree, ordered, removed greedily until the preemptor fits, then
//! added back in reverse to keep the victim set small.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use super::amount::{Amount, FlavorResource, FrAmounts};
use super::model::{
    BorrowWithinCohortPolicy, ClusterQueueModel, ReclaimWithinCohort, WithinClusterQueue,
    WorkloadKey,
};
use super::tree::QuotaTree;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PreemptedReason {
    InClusterQueue,
    InCohortReclamation,
    InCohortReclaimWhileBorrowing,
}

impl PreemptedReason {
    pub fn as_str(self) -> &'static str {
        match self {
            PreemptedReason::InClusterQueue => "InClusterQueue",
            PreemptedReason::InCohortReclamation => "InCohortReclamation",
            PreemptedReason::InCohortReclaimWhileBorrowing => "InCohortReclaimWhileBorrowing",
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
}

pub struct Preemptor<'a> {
    pub cq_idx: usize,
    pub cq: &'a ClusterQueueModel,
    pub priority: i32,
    pub queue_timestamp: i64,
    /// The full usage the preemptor needs (for a replacement slice, the old slice is already
    /// removed from the tree by the caller).
    pub usage: &'a FrAmounts,
    pub contested: &'a BTreeSet<FlavorResource>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub key: WorkloadKey,
    pub reason: PreemptedReason,
}

fn uses_contested(c: &Candidate<'_>, contested: &BTreeSet<FlavorResource>) -> bool {
    contested
        .iter()
        .any(|fr| c.usage.get(fr).is_some_and(|v| *v > Amount::ZERO))
}

fn cq_borrowing(tree: &QuotaTree, cq: usize, contested: &BTreeSet<FlavorResource>) -> bool {
    contested.iter().any(|fr| tree.is_borrowing(cq, fr))
}

/// Candidates allowed by the preemptor's policies, in Kueue's order.
pub fn find_candidates<'a>(
    tree: &QuotaTree,
    p: &Preemptor<'_>,
    admitted: &[Candidate<'a>],
) -> Vec<Candidate<'a>> {
    let pol = p.cq.preemption;
    let mut out: Vec<Candidate<'a>> = Vec::new();
    for c in admitted {
        if !uses_contested(c, p.contested) {
            continue;
        }
        if c.cq_idx == p.cq_idx {
            let ok = match pol.within_cluster_queue {
                WithinClusterQueue::Never => false,
                WithinClusterQueue::LowerPriority => c.priority < p.priority,
                WithinClusterQueue::LowerOrNewerEqualPriority => {
                    c.priority < p.priority
                        || (c.priority == p.priority && p.queue_timestamp < c.queue_timestamp)
                }
            };
            if ok {
                out.push(c.clone());
            }
        } else {
            // Only ClusterQueues borrowing a contested resource give quota back.
            let ok = match pol.reclaim_within_cohort {
                ReclaimWithinCohort::Never => false,
                ReclaimWithinCohort::LowerPriority => c.priority < p.priority,
                ReclaimWithinCohort::Any => true,
            };
            if ok && cq_borrowing(tree, c.cq_idx, p.contested) {
                out.push(c.clone());
            }
        }
    }
    out.sort_by(|a, b| order(a, b, p.cq_idx));
    out
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

fn order(a: &Candidate<'_>, b: &Candidate<'_>, own: usize) -> Ordering {
    b.evicting
        .cmp(&a.evicting)
        .then_with(|| (a.cq_idx == own).cmp(&(b.cq_idx == own)))
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

fn workload_fits(tree: &QuotaTree, p: &Preemptor<'_>, allow_borrowing: bool) -> bool {
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

/// The victims to evict so the preemptor fits, or empty when no set of candidates makes it fit.
/// The tree is left as it was found.
pub fn find_targets(
    tree: &mut QuotaTree,
    p: &Preemptor<'_>,
    admitted: &[Candidate<'_>],
) -> Vec<Target> {
    let candidates = find_candidates(tree, p, admitted);
    if candidates.is_empty() {
        return Vec::new();
    }
    let same: Vec<Candidate<'_>> = candidates
        .iter()
        .filter(|c| c.cq_idx == p.cq_idx)
        .cloned()
        .collect();
    // Kueue names a cohort victim InCohortReclaimWhileBorrowing only when it was taken under
    // borrowWithinCohort (below the priority threshold); otherwise InCohortReclamation.
    let mut while_borrowing_below: Option<i32> = None;
    let chosen = if same.len() == candidates.len() {
        minimal(tree, p, &candidates, true, None)
    } else if let Some(threshold) = borrow_threshold(p) {
        while_borrowing_below = Some(threshold);
        let cands: Vec<Candidate<'_>> = if under_nominal(tree, p) {
            candidates
        } else {
            candidates
                .into_iter()
                .filter(|c| c.cq_idx == p.cq_idx || c.priority < threshold)
                .collect()
        };
        minimal(tree, p, &cands, true, Some(threshold))
    } else {
        let mut t = Vec::new();
        if under_nominal(tree, p) {
            t = minimal(tree, p, &candidates, false, None);
        }
        if t.is_empty() {
            t = minimal(tree, p, &same, true, None);
        }
        t
    };
    chosen
        .into_iter()
        .map(|c| Target {
            key: c.key.clone(),
            reason: if c.cq_idx == p.cq_idx {
                PreemptedReason::InClusterQueue
            } else if while_borrowing_below.is_some_and(|t| c.priority < t) {
                PreemptedReason::InCohortReclaimWhileBorrowing
            } else {
                PreemptedReason::InCohortReclamation
            },
        })
        .collect()
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
    candidates: &[Candidate<'a>],
    mut allow_borrowing: bool,
    borrow_below: Option<i32>,
) -> Vec<Candidate<'a>> {
    // Every removal below is undone when `sim` drops, on every return path.
    let mut sim = tree.without();
    let mut removed: Vec<Candidate<'a>> = Vec::new();
    let mut fits = false;
    for c in candidates {
        if c.cq_idx != p.cq_idx && !cq_borrowing(&sim, c.cq_idx, p.contested) {
            continue;
        }
        if c.cq_idx != p.cq_idx && borrow_below.is_some_and(|t| c.priority >= t) {
            allow_borrowing = false;
        }
        sim.remove(c.cq_idx, c.usage);
        removed.push(c.clone());
        if workload_fits(&sim, p, allow_borrowing) {
            fits = true;
            break;
        }
    }
    if !fits {
        return Vec::new();
    }
    // Put back, most recently removed first (except the last, which made it fit), whatever is
    // not needed.
    let mut keep = vec![true; removed.len()];
    for i in (0..removed.len().saturating_sub(1)).rev() {
        sim.put_back(removed[i].cq_idx, removed[i].usage);
        if workload_fits(&sim, p, allow_borrowing) {
            keep[i] = false;
        } else {
            sim.remove(removed[i].cq_idx, removed[i].usage);
        }
    }
    removed
        .into_iter()
        .zip(keep)
        .filter_map(|(c, k)| k.then_some(c))
        .collect()
}
