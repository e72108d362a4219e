//! The quota tree of ClusterQueues and Cohorts, computed as Kueue's resource nodes do: subtree
//! quota, usage bubbling, available and potentially-available amounts per (flavor, resource).

use std::collections::{BTreeMap, HashMap};

use super::amount::{Amount, FlavorResource, FrAmounts};
use super::model::{ClusterQueueModel, CohortModel, FairWeight, ResourceGroup, ResourceQuota};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    ClusterQueue,
    Cohort,
}

#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub kind: NodeKind,
    pub parent: Option<usize>,
    pub children: Vec<usize>,
    pub quotas: BTreeMap<FlavorResource, ResourceQuota>,
    pub subtree: FrAmounts,
    pub usage: FrAmounts,
    /// 0 for a ClusterQueue, 1 + the highest child for a cohort.
    pub height: u32,
    /// Set when the node sits in (or under) a cycle of cohorts: the whole tree is disabled.
    pub disabled: Option<String>,
    /// Fair-sharing weight (`spec.fairSharing.weight`).
    pub weight: FairWeight,
}

#[derive(Clone, Debug, Default)]
pub struct QuotaTree {
    pub nodes: Vec<Node>,
    cqs: HashMap<String, usize>,
    cohorts: HashMap<String, usize>,
}

fn quotas_of(groups: &[ResourceGroup]) -> BTreeMap<FlavorResource, ResourceQuota> {
    let mut out = BTreeMap::new();
    for g in groups {
        for f in &g.flavors {
            for (r, q) in &f.resources {
                out.insert(FlavorResource::new(&f.name, r), *q);
            }
        }
    }
    out
}

/// Adds to an entry, cloning the key only when it is new (this runs in every preemption simulation).
fn bump(m: &mut FrAmounts, fr: &FlavorResource, val: Amount) {
    match m.get_mut(fr) {
        Some(v) => *v += val,
        None => {
            m.insert(fr.clone(), val);
        }
    }
}

fn get(m: &FrAmounts, fr: &FlavorResource) -> Amount {
    m.get(fr).copied().unwrap_or_default()
}

impl QuotaTree {
    /// Builds the tree with zero usage. A cohort named by a ClusterQueue or as a parent but
    /// without a Cohort object is implicit (no quota of its own).
    pub fn build<'a>(
        cqs: impl IntoIterator<Item = &'a ClusterQueueModel>,
        cohorts: &BTreeMap<String, CohortModel>,
    ) -> QuotaTree {
        let mut t = QuotaTree::default();
        let mut parents: Vec<Option<String>> = Vec::new();
        let add = |t: &mut QuotaTree,
                   parents: &mut Vec<Option<String>>,
                   name: &str,
                   kind,
                   groups: &[ResourceGroup],
                   weight: FairWeight,
                   parent| {
            let idx = t.nodes.len();
            t.nodes.push(Node {
                name: name.to_string(),
                kind,
                parent: None,
                children: Vec::new(),
                quotas: quotas_of(groups),
                subtree: FrAmounts::new(),
                usage: FrAmounts::new(),
                height: 0,
                disabled: None,
                weight,
            });
            parents.push(parent);
            idx
        };
        let nonempty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        for c in cohorts.values() {
            let i = add(
                &mut t,
                &mut parents,
                &c.name,
                NodeKind::Cohort,
                &c.resource_groups,
                c.fair_weight,
                nonempty(&c.parent),
            );
            t.cohorts.insert(c.name.clone(), i);
        }
        for cq in cqs {
            let i = add(
                &mut t,
                &mut parents,
                &cq.name,
                NodeKind::ClusterQueue,
                &cq.resource_groups,
                cq.fair_weight,
                nonempty(&cq.cohort),
            );
            t.cqs.insert(cq.name.clone(), i);
        }
        // Implicit cohorts, created until every named parent exists.
        let mut i = 0;
        while i < parents.len() {
            if let Some(p) = parents[i].clone()
                && !t.cohorts.contains_key(&p)
            {
                let j = add(
                    &mut t,
                    &mut parents,
                    &p,
                    NodeKind::Cohort,
                    &[],
                    FairWeight::default(),
                    None,
                );
                t.cohorts.insert(p, j);
            }
            i += 1;
        }
        for (i, p) in parents.iter().enumerate() {
            t.nodes[i].parent = p.as_ref().and_then(|p| t.cohorts.get(p).copied());
        }
        t.break_cycles();
        for i in 0..t.nodes.len() {
            if let Some(p) = t.nodes[i].parent {
                t.nodes[p].children.push(i);
            }
        }
        t.compute_subtree();
        t
    }

    /// Disables every node whose chain of parents loops, and cuts the loop so recursion ends.
    fn break_cycles(&mut self) {
        let n = self.nodes.len();
        let mut cyclic_members: Vec<(usize, String)> = Vec::new();
        for start in 0..n {
            let mut path = vec![start];
            let mut cur = start;
            while let Some(p) = self.nodes[cur].parent {
                if let Some(pos) = path.iter().position(|&x| x == p) {
                    let mut names: Vec<&str> =
                        path[pos..].iter().map(|&x| self.nodes[x].name.as_str()).collect();
                    names.push(&self.nodes[p].name);
                    let reason = format!("cohort cycle: {}", names.join(" -> "));
                    cyclic_members.push((start, reason));
                    break;
                }
                path.push(p);
                cur = p;
            }
        }
        for (i, reason) in cyclic_members {
            self.nodes[i].disabled = Some(reason);
        }
        // Cut the links that close a loop: a node in the loop whose parent is also disabled
        // and whose walk returns to itself.
        for i in 0..n {
            if self.nodes[i].disabled.is_some() && self.reaches_self(i) {
                self.nodes[i].parent = None;
            }
        }
    }

    fn reaches_self(&self, i: usize) -> bool {
        let mut cur = self.nodes[i].parent;
        let mut steps = 0;
        while let Some(p) = cur {
            if p == i {
                return true;
            }
            steps += 1;
            if steps > self.nodes.len() {
                return false;
            }
            cur = self.nodes[p].parent;
        }
        false
    }

    fn depth(&self, i: usize) -> usize {
        let mut d = 0;
        let mut cur = self.nodes[i].parent;
        while let Some(p) = cur {
            d += 1;
            cur = self.nodes[p].parent;
        }
        d
    }

    fn compute_subtree(&mut self) {
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        let depths: Vec<usize> = order.iter().map(|&i| self.depth(i)).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(depths[i]));
        for i in order {
            let mut subtree: FrAmounts = self.nodes[i]
                .quotas
                .iter()
                .map(|(fr, q)| (fr.clone(), q.nominal))
                .collect();
            let mut height = 0;
            for &c in &self.nodes[i].children {
                height = height.max(self.nodes[c].height + 1);
                for (fr, v) in &self.nodes[c].subtree {
                    *subtree.entry(fr.clone()).or_default() += *v - self.guaranteed(c, fr);
                }
            }
            self.nodes[i].subtree = subtree;
            self.nodes[i].height = height;
        }
    }

    pub fn cq(&self, name: &str) -> Option<usize> {
        self.cqs.get(name).copied()
    }

    pub fn cohort(&self, name: &str) -> Option<usize> {
        self.cohorts.get(name).copied()
    }

    pub fn root(&self, mut i: usize) -> usize {
        while let Some(p) = self.nodes[i].parent {
            i = p;
        }
        i
    }

    /// ClusterQueues under `node` (itself when it is one), in index order.
    pub fn cqs_under(&self, node: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = vec![node];
        while let Some(i) = stack.pop() {
            match self.nodes[i].kind {
                NodeKind::ClusterQueue => out.push(i),
                NodeKind::Cohort => stack.extend(self.nodes[i].children.iter().copied()),
            }
        }
        out.sort_unstable();
        out
    }

    /// Disabled reason of the node or of any ancestor.
    pub fn disabled_reason(&self, mut i: usize) -> Option<&str> {
        loop {
            if let Some(r) = &self.nodes[i].disabled {
                return Some(r);
            }
            i = self.nodes[i].parent?;
        }
    }

    /// The part of the subtree quota the node keeps for itself (not lent to its parent).
    pub fn guaranteed(&self, i: usize, fr: &FlavorResource) -> Amount {
        let n = &self.nodes[i];
        match n.quotas.get(fr).and_then(|q| q.lending_limit) {
            Some(l) => (get(&n.subtree, fr) - l).clamp_zero(),
            None => Amount::ZERO,
        }
    }

    pub fn usage(&self, i: usize, fr: &FlavorResource) -> Amount {
        get(&self.nodes[i].usage, fr)
    }

    pub fn subtree_quota(&self, i: usize, fr: &FlavorResource) -> Amount {
        get(&self.nodes[i].subtree, fr)
    }

    pub fn available(&self, i: usize, fr: &FlavorResource) -> Amount {
        let n = &self.nodes[i];
        let Some(parent) = n.parent else {
            return get(&n.subtree, fr) - get(&n.usage, fr);
        };
        let g = self.guaranteed(i, fr);
        let used = get(&n.usage, fr);
        let local = (g - used).clamp_zero();
        let mut from_parent = self.available(parent, fr);
        if let Some(b) = n.quotas.get(fr).and_then(|q| q.borrowing_limit) {
            let stored_in_parent = get(&n.subtree, fr) - g;
            let used_in_parent = (used - g).clamp_zero();
            from_parent = from_parent.min(stored_in_parent - used_in_parent + b);
        }
        local + from_parent
    }

    /// What would be available if nothing were in use: the most the node can ever hold.
    pub fn potential_available(&self, i: usize, fr: &FlavorResource) -> Amount {
        let n = &self.nodes[i];
        let Some(parent) = n.parent else {
            return get(&n.subtree, fr);
        };
        let mut avail = self.guaranteed(i, fr) + self.potential_available(parent, fr);
        if let Some(b) = n.quotas.get(fr).and_then(|q| q.borrowing_limit) {
            avail = avail.min(get(&n.subtree, fr) + b);
        }
        avail
    }

    pub fn add_usage(&mut self, i: usize, fr: &FlavorResource, val: Amount) {
        let local = (self.guaranteed(i, fr) - self.usage(i, fr)).clamp_zero();
        bump(&mut self.nodes[i].usage, fr, val);
        if let Some(p) = self.nodes[i].parent
            && val > local
        {
            self.add_usage(p, fr, val - local);
        }
    }

    pub fn remove_usage(&mut self, i: usize, fr: &FlavorResource, val: Amount) {
        let stored_in_parent = self.usage(i, fr) - self.guaranteed(i, fr);
        bump(&mut self.nodes[i].usage, fr, Amount::ZERO - val);
        if stored_in_parent <= Amount::ZERO {
            return;
        }
        if let Some(p) = self.nodes[i].parent {
            self.remove_usage(p, fr, val.min(stored_in_parent));
        }
    }

    pub fn add_all(&mut self, i: usize, usage: &FrAmounts) {
        for (fr, v) in usage {
            self.add_usage(i, fr, *v);
        }
    }

    pub fn remove_all(&mut self, i: usize, usage: &FrAmounts) {
        for (fr, v) in usage {
            self.remove_usage(i, fr, *v);
        }
    }

    /// Whether `usage` more fits under node `i` right now.
    pub fn fits(&self, i: usize, usage: &FrAmounts) -> bool {
        usage
            .iter()
            .all(|(fr, v)| *v <= Amount::ZERO || *v <= self.available(i, fr))
    }

    /// The node uses more of `fr` than its own subtree quota provides.
    pub fn is_borrowing(&self, i: usize, fr: &FlavorResource) -> bool {
        self.usage(i, fr) > self.subtree_quota(i, fr)
    }

    /// The node's own guarantee of `fr` left unused (Kueue's `LocalAvailable`).
    pub fn local_available(&self, i: usize, fr: &FlavorResource) -> Amount {
        (self.guaranteed(i, fr) - self.usage(i, fr)).clamp_zero()
    }

    /// No contested resource used above the node's subtree quota (Kueue's
    /// `IsWithinNominalInResources`): nothing there to reclaim.
    pub fn within_nominal<'a>(&self, i: usize, frs: impl IntoIterator<Item = &'a FlavorResource>) -> bool {
        frs.into_iter().all(|fr| !self.is_borrowing(i, fr))
    }

    /// Whether `requests` more fit in the node's subtree quota, and what is left of them once
    /// the node's unused guarantee is taken (Kueue's `QuantitiesFitInQuota`).
    pub fn fits_in_quota(&self, i: usize, requests: &FrAmounts) -> (bool, FrAmounts) {
        let fits = requests
            .iter()
            .all(|(fr, v)| self.usage(i, fr) + *v <= self.subtree_quota(i, fr));
        let remaining = requests
            .iter()
            .map(|(fr, v)| (fr.clone(), (*v - self.local_available(i, fr)).clamp_zero()))
            .collect();
        (fits, remaining)
    }

    /// "/root/…/name": the node's cohorts from the root down, as Kueue names a ClusterQueue in
    /// preemption messages.
    pub fn path(&self, i: usize) -> String {
        let own = format!("/{}", self.nodes[i].name);
        match self.nodes[i].parent {
            Some(p) => self.path(p) + &own,
            None => own,
        }
    }

    /// Whether `ancestor` is `i` or on its chain of parents.
    pub fn is_under(&self, i: usize, ancestor: usize) -> bool {
        i == ancestor || self.nodes[i].parent.is_some_and(|p| self.is_under(p, ancestor))
    }

    /// Height of the lowest subtree in which `val` more fits (0: within the ClusterQueue).
    pub fn borrowing_level(&self, i: usize, fr: &FlavorResource, val: Amount) -> u32 {
        self.nodes[self.lowest_fitting(i, fr, val)].height
    }

    /// Whether `val` more fits without borrowing in a subtree below the root, so quota lent
    /// out of that subtree could be reclaimed (Kueue's `mayReclaimInHierarchy`).
    pub fn may_reclaim_in_hierarchy(&self, i: usize, fr: &FlavorResource, val: Amount) -> bool {
        self.nodes[self.lowest_fitting(i, fr, val)].parent.is_some()
    }

    /// The lowest node from `i` up whose subtree quota holds `val` more; the root when none does.
    fn lowest_fitting(&self, i: usize, fr: &FlavorResource, val: Amount) -> usize {
        let mut need = self.usage(i, fr) + val;
        let mut cur = i;
        loop {
            if need <= self.subtree_quota(cur, fr) {
                return cur;
            }
            let Some(p) = self.nodes[cur].parent else {
                return cur;
            };
            // The parent's usage with this subtree's share replaced by what it would become.
            let g = self.guaranteed(cur, fr);
            let old_in_parent = (self.usage(cur, fr) - g).clamp_zero();
            let new_in_parent = (need - g).clamp_zero();
            need = self.usage(p, fr) - old_in_parent + new_in_parent;
            cur = p;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fr() -> FlavorResource {
        FlavorResource::new("default", "cpu")
    }

    fn tree(cqs: &[ClusterQueueModel], cohorts: &[CohortModel]) -> QuotaTree {
        let cohorts = cohorts.iter().map(|c| (c.name.clone(), c.clone())).collect();
        QuotaTree::build(cqs, &cohorts)
    }

    #[test]
    fn lending_and_borrowing_limits() {
        // a: nominal 10, lends at most 4 (keeps 6); b: nominal 10, may borrow at most 3.
        let a = ClusterQueueModel::build("a")
            .cohort("c")
            .flavor_limits("default", &[("cpu", 10, None, Some(4))]);
        let b = ClusterQueueModel::build("b")
            .cohort("c")
            .flavor_limits("default", &[("cpu", 10, Some(3), None)]);
        let mut t = tree(&[a, b], &[]);
        let (ia, ib, ic) = (t.cq("a").unwrap(), t.cq("b").unwrap(), t.cohort("c").unwrap());
        // cohort subtree = (10 - 6) + (10 - 0) = 14
        assert_eq!(t.subtree_quota(ic, &fr()), Amount(14));
        assert_eq!(t.available(ia, &fr()), Amount(20));
        assert_eq!(t.available(ib, &fr()), Amount(13));
        assert_eq!(t.potential_available(ib, &fr()), Amount(13));
        assert_eq!(t.potential_available(ia, &fr()), Amount(20));
        t.add_usage(ia, &fr(), Amount(8)); // 6 local, 2 in the cohort
        assert_eq!(t.usage(ic, &fr()), Amount(2));
        assert_eq!(t.available(ib, &fr()), Amount(12));
        t.add_usage(ib, &fr(), Amount(12));
        assert_eq!(t.available(ia, &fr()), Amount(0));
        assert_eq!(t.available(ib, &fr()), Amount(0));
        assert!(t.is_borrowing(ib, &fr()));
        t.remove_usage(ia, &fr(), Amount(8));
        t.remove_usage(ib, &fr(), Amount(12));
        assert_eq!(t.usage(ic, &fr()), Amount(0));
    }

    #[test]
    fn hierarchical_cohorts_and_levels() {
        let a = ClusterQueueModel::build("a")
            .cohort("left")
            .flavor("default", &[("cpu", 5)]);
        let b = ClusterQueueModel::build("b")
            .cohort("right")
            .flavor("default", &[("cpu", 5)]);
        let root = CohortModel::build("root").flavor_limits("default", &[("cpu", 10, None, None)]);
        let left = CohortModel::build("left").parent("root");
        let right = CohortModel::build("right").parent("root");
        let t = tree(&[a, b], &[root, left, right]);
        let ia = t.cq("a").unwrap();
        assert_eq!(t.subtree_quota(t.cohort("root").unwrap(), &fr()), Amount(20));
        assert_eq!(t.available(ia, &fr()), Amount(20));
        assert_eq!(t.borrowing_level(ia, &fr(), Amount(5)), 0);
        assert_eq!(t.borrowing_level(ia, &fr(), Amount(6)), 2);
        assert_eq!(t.nodes[t.cohort("left").unwrap()].height, 1);
    }

    #[test]
    fn cycle_disables_tree() {
        let a = ClusterQueueModel::build("a")
            .cohort("x")
            .flavor("default", &[("cpu", 5)]);
        let other = ClusterQueueModel::build("o")
            .cohort("z")
            .flavor("default", &[("cpu", 5)]);
        let t = tree(
            &[a, other],
            &[
                CohortModel::build("x").parent("y"),
                CohortModel::build("y").parent("x"),
            ],
        );
        let reason = t.disabled_reason(t.cq("a").unwrap()).unwrap();
        assert!(reason.contains("cohort cycle"), "{reason}");
        assert!(t.disabled_reason(t.cq("o").unwrap()).is_none());
        // Still computable without looping.
        assert!(t.available(t.cq("a").unwrap(), &fr()) >= Amount(5));
    }
}
