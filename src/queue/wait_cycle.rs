//! The cycle breaker (issue 45 item 1's safety net): admitted upgrades each waiting for quota held
//! by the next one's admitted slice. An upgrade is a chain whose admitted slice has a pending
//! replacement; it waits for another when the scheduler's record of that replacement names the
//! other's admitted slice among the holders of what it is short of. A cycle that outlasts a stated
//! time is broken by releasing the growth of the lower-priority (then younger) upgrade in it: its
//! slice shrinks back to its floor (what serves), the others can move, and it retries.
//! Pure: the admission loop feeds it the edges and the time.

use std::collections::{BTreeMap, BTreeSet};

use super::model::WorkloadKey;

/// An upgrade in a cycle: its admitted slice, priority, and when its waiting replacement was queued
/// (a later time is a younger upgrade).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upgrade {
    pub slice: WorkloadKey,
    pub priority: i32,
    pub waiting_since: i64,
}

/// Every wait-for cycle of `waits_on` (admitted slice -> admitted slices it waits for), each once,
/// as its sorted members.
pub fn cycles(waits_on: &BTreeMap<WorkloadKey, BTreeSet<WorkloadKey>>) -> BTreeSet<Vec<WorkloadKey>> {
    let mut out = BTreeSet::new();
    for start in waits_on.keys() {
        if let Some(mut c) = shortest_cycle(start, waits_on) {
            c.sort();
            out.insert(c);
        }
    }
    out
}

/// The shortest cycle of `waits_on` through `start`, from `start` in wait order (each member waits
/// for the next, the last for `start`), if there is one. Breadth first: each node is reached once,
/// by its shortest path from `start`. Also used by `explain` over service names.
pub fn shortest_cycle<T: Ord + Clone>(start: &T, waits_on: &BTreeMap<T, BTreeSet<T>>) -> Option<Vec<T>> {
    let mut from: BTreeMap<&T, &T> = BTreeMap::new();
    let mut frontier = vec![start];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for s in frontier {
            for t in waits_on.get(s).into_iter().flatten() {
                if t == start {
                    let mut path = vec![s.clone()];
                    let mut at = s;
                    while at != start {
                        at = from.get(at)?;
                        path.push(at.clone());
                    }
                    path.reverse();
                    return Some(path);
                }
                if !from.contains_key(t) {
                    from.insert(t, s);
                    next.push(t);
                }
            }
        }
        frontier = next;
    }
    None
}

/// The upgrade of a cycle whose growth is released: the lowest priority, then the youngest (latest
/// `waiting_since`), then the greatest key, so the choice never depends on the order given.
pub fn victim(members: &[Upgrade]) -> Option<&Upgrade> {
    members.iter().min_by(|a, b| {
        a.priority
            .cmp(&b.priority)
            .then_with(|| b.waiting_since.cmp(&a.waiting_since))
            .then_with(|| b.slice.cmp(&a.slice))
    })
}

/// When each cycle was first seen; a cycle is due once it has lasted `after` (same unit as `now`).
#[derive(Debug, Default)]
pub struct CycleBreaker {
    since: BTreeMap<Vec<WorkloadKey>, i64>,
}

impl CycleBreaker {
    /// Records the cycles seen at `now` (forgetting those gone) and returns those that have lasted
    /// at least `after`; a due cycle starts counting again, so it is broken once per `after`.
    pub fn due(&mut self, now: i64, seen: BTreeSet<Vec<WorkloadKey>>, after: i64) -> Vec<Vec<WorkloadKey>> {
        self.since.retain(|c, _| seen.contains(c));
        let mut out = Vec::new();
        for c in seen {
            let t = *self.since.entry(c.clone()).or_insert(now);
            if now - t >= after {
                self.since.insert(c.clone(), now);
                out.push(c);
            }
        }
        out
    }

    /// The earliest time a cycle seen so far becomes due.
    pub fn next_due(&self, after: i64) -> Option<i64> {
        self.since.values().min().map(|t| t.saturating_add(after))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(n: &str) -> WorkloadKey {
        WorkloadKey::new("ns", n)
    }

    fn edges(e: &[(&str, &str)]) -> BTreeMap<WorkloadKey, BTreeSet<WorkloadKey>> {
        let mut m: BTreeMap<WorkloadKey, BTreeSet<WorkloadKey>> = BTreeMap::new();
        for (a, b) in e {
            m.entry(k(a)).or_default().insert(k(b));
        }
        m
    }

    #[test]
    fn finds_each_cycle_once() {
        let c = cycles(&edges(&[
            ("a", "b"),
            ("b", "a"),
            ("c", "d"),
            ("d", "e"),
            ("e", "c"),
            ("f", "a"),
        ]));
        assert_eq!(
            c.into_iter().collect::<Vec<_>>(),
            vec![vec![k("a"), k("b")], vec![k("c"), k("d"), k("e")]]
        );
        assert!(cycles(&edges(&[("a", "b"), ("b", "c")])).is_empty());
    }

    /// Lower priority first; at equal priority the younger upgrade (its replacement queued later).
    #[test]
    fn the_victim_is_the_lower_priority_then_younger_upgrade() {
        let u = |n: &str, priority, waiting_since| Upgrade {
            slice: k(n),
            priority,
            waiting_since,
        };
        let prod_old = u("prod", 100, 1);
        let batch = u("batch", 0, 1);
        assert_eq!(
            victim(&[prod_old.clone(), batch.clone()]).unwrap().slice,
            k("batch")
        );
        assert_eq!(
            victim(&[batch.clone(), prod_old.clone()]).unwrap().slice,
            k("batch")
        );
        let a = u("a", 5, 10);
        let b = u("b", 5, 20);
        assert_eq!(victim(&[a.clone(), b.clone()]).unwrap().slice, k("b"));
        assert_eq!(victim(&[b, a]).unwrap().slice, k("b"));
        assert_eq!(victim(&[]), None);
    }

    /// A cycle is due only after it has lasted the stated time, and only while it lasts.
    #[test]
    fn a_cycle_is_due_after_it_lasts() {
        let mut br = CycleBreaker::default();
        let ab: BTreeSet<Vec<WorkloadKey>> = [vec![k("a"), k("b")]].into_iter().collect();
        assert!(br.due(0, ab.clone(), 60).is_empty());
        assert!(br.due(59, ab.clone(), 60).is_empty());
        assert_eq!(br.next_due(60), Some(60));
        assert_eq!(br.due(60, ab.clone(), 60), vec![vec![k("a"), k("b")]]);
        // Counting starts again once broken.
        assert!(br.due(61, ab.clone(), 60).is_empty());
        // Gone in between: forgotten, and counted from scratch when it comes back.
        assert!(br.due(100, BTreeSet::new(), 60).is_empty());
        assert!(br.due(150, ab.clone(), 60).is_empty());
        assert!(br.due(200, ab, 60).is_empty());
    }
}
