//! Kueue's fair sharing (KEP 1714): the dominant resource share (DRS) of a ClusterQueue or Cohort
//! over the quota tree, how two shares compare, and the tournament that picks, per cohort tree,
//! the next workload to consider in a scheduling cycle (`fair_sharing.go`,
//! `fair_sharing_iterator.go`).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use super::amount::{Amount, FlavorResource, FrAmounts};
use super::model::FairWeight;
use super::pending::OrderKey;
use super::tree::{NodeKind, QuotaTree};

/// The dominant resource share of one node.
#[derive(Clone, Debug, PartialEq)]
pub struct Drs {
    pub weight: FairWeight,
    /// Borrowed over lendable, per mille, for the dominant resource; the weight not applied.
    pub ratio: f64,
    pub dominant: Option<String>,
    /// The (flavor, resource) pairs used above the node's subtree quota.
    pub borrowed: Vec<FlavorResource>,
}

impl Drs {
    /// Below every real share: the starting point of a search for the highest.
    pub fn negative() -> Drs {
        Drs {
            weight: FairWeight::default(),
            ratio: -1.0,
            dominant: None,
            borrowed: Vec::new(),
        }
    }

    pub fn is_zero(&self) -> bool {
        self.ratio == 0.0
    }

    pub fn is_borrowing(&self) -> bool {
        !self.borrowed.is_empty()
    }

    /// Whether the node borrows on any flavor-resource `requests` asks for.
    pub fn is_borrowing_on(&self, requests: &FrAmounts) -> bool {
        self.borrowed
            .iter()
            .any(|fr| requests.get(fr).is_some_and(|v| *v > Amount::ZERO))
    }

    fn zero_weight_borrows(&self) -> bool {
        self.weight.is_zero() && !self.is_zero()
    }

    /// The share divided by the weight; +inf for a zero weight that borrows.
    pub fn precise(&self) -> f64 {
        if self.is_zero() {
            0.0
        } else if self.weight.is_zero() {
            f64::INFINITY
        } else {
            self.ratio / self.weight.as_f64()
        }
    }

    /// `status.fairSharing.weightedShare`: the precise share rounded up, `i64::MAX` for +inf.
    pub fn weighted_share(&self) -> i64 {
        if self.zero_weight_borrows() {
            i64::MAX
        } else {
            // `as` saturates, as Kueue's status writer caps at MaxInt64.
            self.precise().ceil() as i64
        }
    }
}

/// Kueue's `CompareDRS`: lower is preferred for admission, higher for preemption.
pub fn compare(a: &Drs, b: &Drs) -> Ordering {
    let f = |x: f64, y: f64| x.partial_cmp(&y).unwrap_or(Ordering::Equal);
    match (a.zero_weight_borrows(), b.zero_weight_borrows()) {
        (true, true) => f(a.ratio, b.ratio),
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => f(a.precise(), b.precise()),
    }
}

/// The DRS of node `i` with `extra` usage added to it (Kueue's `dominantResourceShare`): per
/// resource name, what the node uses above its subtree quota, over what its parent can lend
/// (summed over flavors), per mille; the highest ratio. A root has no share.
pub fn drs(tree: &QuotaTree, i: usize, extra: Option<&FrAmounts>) -> Drs {
    let node = &tree.nodes[i];
    let mut d = Drs {
        weight: node.weight,
        ratio: 0.0,
        dominant: None,
        borrowed: Vec::new(),
    };
    let Some(parent) = node.parent else {
        return d;
    };
    let mut borrowing: BTreeMap<&str, Amount> = BTreeMap::new();
    for (fr, quota) in &node.subtree {
        let req = extra.and_then(|e| e.get(fr)).copied().unwrap_or_default();
        let over = req + tree.usage(i, fr) - *quota;
        if over > Amount::ZERO {
            *borrowing.entry(fr.resource.as_str()).or_default() += over;
            d.borrowed.push(fr.clone());
        }
    }
    if borrowing.is_empty() {
        return d;
    }
    let lendable = lendable(tree, parent);
    // Names in order and a strict `>`: on equal ratios the first name alphabetically wins.
    for (r, b) in borrowing {
        let Some(l) = lendable.get(r).filter(|l| **l > Amount::ZERO) else {
            continue;
        };
        let ratio = b.0 as f64 * 1000.0 / l.0 as f64;
        if ratio > d.ratio {
            d.ratio = ratio;
            d.dominant = Some(r.to_string());
        }
    }
    d
}

/// What `node` could hold at most, per resource name over every flavor of the tree.
fn lendable(tree: &QuotaTree, node: usize) -> BTreeMap<&str, Amount> {
    let root = tree.root(node);
    let mut out: BTreeMap<&str, Amount> = BTreeMap::new();
    for fr in tree.nodes[root].subtree.keys() {
        *out.entry(fr.resource.as_str()).or_default() += tree.potential_available(node, fr);
    }
    out
}

/// One ClusterQueue's nominated workload in the tournament.
pub struct Contender<'a> {
    pub cq_idx: usize,
    /// The usage its assignment would add.
    pub usage: &'a FrAmounts,
    pub order: &'a OrderKey,
    /// Its ClusterQueue's preemptor waiting for its victims, with Kueue's
    /// `PrioritizePreemptorWorkloads` gate on (false with the gate off).
    pub preemptor: bool,
}

/// Kueue's `fairSharingIterator.pop`: the index in `contenders` of the workload to consider
/// next. A ClusterQueue without a cohort goes first, as it is; otherwise every cohort from the
/// root down keeps the child whose share, with its nominated workload admitted, is lowest.
/// The tree is left as it was found.
pub fn next_contender(tree: &mut QuotaTree, contenders: &[Contender<'_>]) -> Option<usize> {
    let first = contenders.first()?;
    if let Some(i) = contenders
        .iter()
        .position(|c| tree.nodes[c.cq_idx].parent.is_none())
    {
        return Some(i);
    }
    let root = tree.root(first.cq_idx);
    // Per (cohort, contender): the share, with the workload, of the cohort's child on its path.
    let mut shares: HashMap<(usize, usize), Drs> = HashMap::new();
    let mut at: HashMap<usize, usize> = HashMap::new();
    for (n, c) in contenders.iter().enumerate() {
        if tree.root(c.cq_idx) != root {
            continue;
        }
        at.insert(c.cq_idx, n);
        tree.add_all(c.cq_idx, c.usage);
        let mut share = drs(tree, c.cq_idx, None);
        let mut cur = tree.nodes[c.cq_idx].parent;
        while let Some(p) = cur {
            let next = drs(tree, p, None);
            shares.insert((p, n), std::mem::replace(&mut share, next));
            cur = tree.nodes[p].parent;
        }
        tree.remove_all(c.cq_idx, c.usage);
    }
    tournament(tree, root, contenders, &at, &shares)
}

fn tournament(
    tree: &QuotaTree,
    cohort: usize,
    contenders: &[Contender<'_>],
    at: &HashMap<usize, usize>,
    shares: &HashMap<(usize, usize), Drs>,
) -> Option<usize> {
    let node = &tree.nodes[cohort];
    let candidates = node
        .children
        .iter()
        .filter(|&&c| tree.nodes[c].kind == NodeKind::Cohort)
        .filter_map(|&c| tournament(tree, c, contenders, at, shares))
        .chain(
            node.children
                .iter()
                .filter(|&&c| tree.nodes[c].kind == NodeKind::ClusterQueue)
                .filter_map(|c| at.get(c).copied()),
        );
    candidates.reduce(|best, cur| {
        if less(cohort, cur, best, contenders, shares) {
            cur
        } else {
            best
        }
    })
}

/// Kueue's `entryComparer.less` with its default feature gates: a waiting preemptor first (only
/// ever marked with `PrioritizePreemptorWorkloads` on), then not borrowing (on what the workload
/// asks for) at this level, then the lower share, the higher priority, the earlier queue
/// timestamp; then the queue order, so that ties are decided the same way.
fn less(
    cohort: usize,
    a: usize,
    b: usize,
    contenders: &[Contender<'_>],
    shares: &HashMap<(usize, usize), Drs>,
) -> bool {
    let none = Drs::negative();
    let (da, db) = (
        shares.get(&(cohort, a)).unwrap_or(&none),
        shares.get(&(cohort, b)).unwrap_or(&none),
    );
    let (ca, cb) = (&contenders[a], &contenders[b]);
    if ca.preemptor != cb.preemptor {
        return ca.preemptor;
    }
    let (ba, bb) = (da.is_borrowing_on(ca.usage), db.is_borrowing_on(cb.usage));
    if ba != bb {
        return !ba;
    }
    match compare(da, db) {
        Ordering::Less => return true,
        Ordering::Greater => return false,
        Ordering::Equal => {}
    }
    // Queue order across ClusterQueues: LocalQueue usage orders only within one (as in Kueue).
    ca.order.base() < cb.order.base()
}

/// `status.fairSharing.weightedShare` from a precise share (Kueue's `WeightedShare`): rounded
/// up, `i64::MAX` for an infinite share.
pub fn status_weighted_share(precise: f64) -> i64 {
    if precise.is_infinite() {
        i64::MAX
    } else {
        // `as` saturates.
        precise.ceil() as i64
    }
}

#[cfg(test)]
#[path = "fair_sharing_tests.rs"]
mod tests;
