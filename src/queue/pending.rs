//! Pending queues per ClusterQueue: an ordered active set (higher priority, then earlier queue
//! timestamp, then UID) and an inadmissible set that waits for an event that can change the outcome.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use super::model::{WorkloadKey, WorkloadModel};

/// Position of a workload in its queue.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OrderKey {
    /// Admission fair sharing: the LocalQueue's usage (`admission_fair_sharing::rank`), lower
    /// first; 0 outside ClusterQueues that use it.
    pub lq_usage: u64,
    pub priority: Reverse<i32>,
    pub timestamp: i64,
    pub uid: String,
    pub key: WorkloadKey,
}

impl OrderKey {
    /// The order without the LocalQueue usage: Kueue's usual priority, then time, then UID.
    pub fn base(&self) -> (&Reverse<i32>, i64, &str, &WorkloadKey) {
        (&self.priority, self.timestamp, &self.uid, &self.key)
    }

    pub fn of(w: &WorkloadModel) -> OrderKey {
        OrderKey {
            lq_usage: 0,
            priority: Reverse(w.priority),
            timestamp: w.timestamp,
            uid: w.uid.clone(),
            key: w.key.clone(),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct PendingQueue {
    active: BTreeSet<OrderKey>,
    inadmissible: BTreeMap<WorkloadKey, OrderKey>,
}

impl PendingQueue {
    pub fn push(&mut self, k: OrderKey) {
        self.inadmissible.remove(&k.key);
        self.active.insert(k);
    }

    pub fn remove(&mut self, k: &OrderKey) {
        self.active.remove(k);
        self.inadmissible.remove(&k.key);
    }

    /// Moves a workload to a new position, in the set (active or inadmissible) it is in.
    pub fn replace(&mut self, old: &OrderKey, new: OrderKey) {
        if self.active.remove(old) {
            self.active.insert(new);
        } else if let Some(k) = self.inadmissible.get_mut(&old.key) {
            *k = new;
        }
    }

    /// Parks a workload until `requeue_all` (an event that can change its outcome).
    pub fn park(&mut self, k: &OrderKey) {
        if self.active.remove(k) {
            self.inadmissible.insert(k.key.clone(), k.clone());
        }
    }

    pub fn requeue_all(&mut self) {
        for (_, k) in std::mem::take(&mut self.inadmissible) {
            self.active.insert(k);
        }
    }

    /// The first active workload strictly after `after` (or the first one).
    pub fn next_after(&self, after: Option<&OrderKey>) -> Option<&OrderKey> {
        match after {
            None => self.active.iter().next(),
            Some(a) => self.active.range((Bound::Excluded(a), Bound::Unbounded)).next(),
        }
    }

    pub fn len(&self) -> usize {
        self.active.len() + self.inadmissible.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn active_len(&self) -> usize {
        self.active.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_priority_then_time_then_uid() {
        let mk = |name: &str, prio, ts, uid: &str| {
            let mut w = WorkloadModel::build("ns", name, "cq").priority(prio).at(ts);
            w.uid = uid.to_string();
            OrderKey::of(&w)
        };
        let mut q = PendingQueue::default();
        q.push(mk("late-low", 1, 5, "a"));
        q.push(mk("early-low", 1, 1, "z"));
        q.push(mk("high", 9, 9, "m"));
        q.push(mk("early-low-b", 1, 1, "b"));
        let mut order = Vec::new();
        let mut cur = None;
        while let Some(k) = q.next_after(cur.as_ref()).cloned() {
            order.push(k.key.name.clone());
            cur = Some(k);
        }
        assert_eq!(order, ["high", "early-low-b", "early-low", "late-low"]);
        let first = mk("high", 9, 9, "m");
        q.park(&first);
        assert_eq!(q.active_len(), 3);
        q.requeue_all();
        assert_eq!(q.active_len(), 4);
    }
}
