//! Scoped "without this usage" simulations on the quota tree: usage taken out through a
//! [`Without`] guard goes back when the guard drops, like Kueue's `SimulateUsageRemoval` revert
//! closure, so no early return can leave the tree short.

use std::ops::Deref;
use std::ptr;

use super::amount::FrAmounts;
use super::tree::QuotaTree;

/// The tree with some usage taken out; read it through `Deref`. Dropping the guard puts back
/// whatever is still out, most recent first.
pub struct Without<'t, 'u> {
    tree: &'t mut QuotaTree,
    removed: Vec<(usize, &'u FrAmounts)>,
}

impl QuotaTree {
    /// A guard with nothing taken out yet.
    pub fn without(&mut self) -> Without<'_, '_> {
        Without {
            tree: self,
            removed: Vec::new(),
        }
    }

    /// A guard with `usage` of node `i` taken out, if there is any.
    pub fn without_usage<'t, 'u>(&'t mut self, i: usize, usage: Option<&'u FrAmounts>) -> Without<'t, 'u> {
        let mut w = Without {
            tree: self,
            removed: Vec::new(),
        };
        if let Some(u) = usage {
            w.remove(i, u);
        }
        w
    }
}

impl<'u> Without<'_, 'u> {
    /// Takes `usage` of node `i` out until the guard drops or `put_back` is called.
    pub fn remove(&mut self, i: usize, usage: &'u FrAmounts) {
        self.tree.remove_all(i, usage);
        self.removed.push((i, usage));
    }

    /// Puts back the most recent removal of exactly this `usage` (same map) of node `i`; false
    /// when it is not out.
    pub fn put_back(&mut self, i: usize, usage: &'u FrAmounts) -> bool {
        let Some(pos) = self
            .removed
            .iter()
            .rposition(|(j, u)| *j == i && ptr::eq(*u, usage))
        else {
            return false;
        };
        self.removed.remove(pos);
        self.tree.add_all(i, usage);
        true
    }

    /// The tree itself, for a simulation that scopes its own changes (they must be undone before
    /// this guard drops, or they stay).
    pub fn tree_mut(&mut self) -> &mut QuotaTree {
        self.tree
    }

    /// Keeps the removals: the tree stays without them after the guard drops.
    pub fn keep(mut self) {
        self.removed.clear();
    }
}

impl Deref for Without<'_, '_> {
    type Target = QuotaTree;
    fn deref(&self) -> &QuotaTree {
        self.tree
    }
}

impl Drop for Without<'_, '_> {
    fn drop(&mut self) {
        while let Some((i, u)) = self.removed.pop() {
            self.tree.add_all(i, u);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::amount::{Amount, FlavorResource};
    use crate::queue::model::ClusterQueueModel;

    #[test]
    fn usage_comes_back_on_drop_put_back_and_not_after_keep() {
        let cq = ClusterQueueModel::build("a").flavor("default", &[("cpu", 10)]);
        let mut t = QuotaTree::build(&[cq], &Default::default());
        let a = t.cq("a").unwrap();
        let fr = FlavorResource::new("default", "cpu");
        let (u3, u4): (FrAmounts, FrAmounts) =
            ([(fr.clone(), Amount(3))].into(), [(fr.clone(), Amount(4))].into());
        t.add_all(a, &u3);
        t.add_all(a, &u4);
        {
            let mut w = t.without();
            w.remove(a, &u3);
            w.remove(a, &u4);
            assert_eq!(w.usage(a, &fr), Amount(0));
            assert!(w.put_back(a, &u3));
            assert!(!w.put_back(a, &u3), "already back");
            assert_eq!(w.usage(a, &fr), Amount(3));
        }
        assert_eq!(t.usage(a, &fr), Amount(7), "drop restores the rest");
        t.without_usage(a, Some(&u4)).keep();
        assert_eq!(t.usage(a, &fr), Amount(3), "keep leaves it out");
    }
}
