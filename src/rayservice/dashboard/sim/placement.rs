//! Placement of Serve replicas by CPU: the cluster's RUNNING Ray nodes offer `capacity` CPUs, each
//! replica reserves its deployment's `ray_actor_options.num_cpus`.
//!
//! The model is one pool of CPUs, not nodes: a replica fits when the CPUs already reserved plus its
//! own stay within the capacity (no bin packing across nodes, no other resources). Older replicas
//! are placed first; a replica that does not fit waits in STARTING and runs `replica_start_delay`
//! after capacity for it appears. When capacity shrinks (a node went away) replicas on their way
//! out (STOPPING) lose their place first, as the autoscaler removes idle nodes; then the youngest
//! placed replicas lose theirs and wait again, as Serve restarts the replicas of a dead node.
//! Without a capacity (the default) every replica is placed when created, which is the
//! simulator's behaviour before capacity existed.

use std::time::Duration;

use tokio::time::Instant;

use super::state::{Phase, SimCluster, SimDeployment, SimReplica};

/// What `fit` needs to know about one replica.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Slot {
    /// Creation order: lower is older.
    pub(super) seq: u64,
    pub(super) cpu_units: u64,
    /// Holds its CPUs now.
    pub(super) placed: bool,
    /// May be placed if unplaced (replicas on their way out are not started again).
    pub(super) wanted: bool,
}

/// Which replicas hold CPUs after fitting `slots` into `capacity` (same order as `slots`). Placed
/// replicas keep their place while they fit; when they do not, replicas on their way out go first,
/// then the youngest; then the oldest waiting replicas take what is free. Replicas reserving 0
/// CPUs always fit.
pub(super) fn fit(slots: &[Slot], capacity: Option<u64>) -> Vec<bool> {
    let mut placed: Vec<bool> = slots.iter().map(|s| s.placed).collect();
    let Some(capacity) = capacity else {
        return slots.iter().map(|s| s.placed || s.wanted).collect();
    };
    let mut order: Vec<usize> = (0..slots.len()).collect();
    order.sort_by_key(|&i| slots[i].seq);
    // u128: a sum of u64 reservations cannot overflow it.
    let capacity = u128::from(capacity);
    let mut used: u128 = order
        .iter()
        .filter(|&&i| placed[i])
        .map(|&i| u128::from(slots[i].cpu_units))
        .sum();
    // Replicas on their way out lose their place first (the autoscaler removed the idle node they
    // were stopping on), then the youngest of the rest.
    let evict_order: Vec<usize> = order
        .iter()
        .rev()
        .filter(|&&i| !slots[i].wanted)
        .chain(order.iter().rev().filter(|&&i| slots[i].wanted))
        .copied()
        .collect();
    for i in evict_order {
        if used <= capacity {
            break;
        }
        if placed[i] && slots[i].cpu_units > 0 {
            placed[i] = false;
            used -= u128::from(slots[i].cpu_units);
        }
    }
    for &i in &order {
        let s = &slots[i];
        let cpu = u128::from(s.cpu_units);
        if !placed[i] && s.wanted && used + cpu <= capacity {
            placed[i] = true;
            used += cpu;
        }
    }
    placed
}

impl SimCluster {
    /// The cluster's nodes changed: refit the replicas at `now` (tick to `now` first).
    pub(super) fn set_capacity(&mut self, capacity: Option<u64>, now: Instant, delay: Duration) {
        self.capacity = capacity;
        self.place(now, delay);
    }

    /// CPU units every current replica reserves, placed or not. Replicas on their way out (old
    /// version, STOPPING) are not counted: they go away whatever the autoscaler does.
    pub(super) fn demand_units(&self) -> u64 {
        self.replicas()
            .filter(|r| r.retire_at.is_none())
            .fold(0u64, |sum, r| sum.saturating_add(r.cpu_units))
    }

    /// Whether the replicas say what the apps demand: not while an app builds its first version
    /// (no replica of it exists yet, so it would count as 0).
    pub(super) fn demand_known(&self) -> bool {
        !self
            .apps
            .values()
            .any(|a| matches!(a.phase, Phase::Building { .. }) && a.deployments.is_empty())
    }

    /// Unreserved CPU units, when the cluster has a capacity.
    pub(super) fn free_units(&self) -> Option<u64> {
        let used = self
            .replicas()
            .filter(|r| r.placed)
            .fold(0u64, |sum, r| sum.saturating_add(r.cpu_units));
        self.capacity.map(|c| c.saturating_sub(used))
    }

    /// Per app, the RUNNING replicas of its least-served deployment (0 for an app without any).
    /// Old-version replicas count until they go: they serve while the new ones start.
    pub(super) fn running_replicas(&self, now: Instant) -> impl Iterator<Item = (&str, u32)> {
        let serving = move |d: &SimDeployment| {
            let n = d
                .replicas
                .iter()
                .filter(|r| r.placed && !r.stopping && r.running_at <= now)
                .count();
            u32::try_from(n).unwrap_or(u32::MAX)
        };
        self.apps.iter().map(move |(name, app)| {
            let least = app.deployments.values().map(serving).min();
            (name.as_str(), least.unwrap_or(0))
        })
    }

    /// Fits replicas into the capacity at `t`; a replica placed at `t` runs `delay` later at the
    /// earliest.
    pub(super) fn place(&mut self, t: Instant, delay: Duration) {
        let capacity = self.capacity;
        let mut replicas: Vec<&mut SimReplica> = self
            .apps
            .values_mut()
            .flat_map(|a| a.deployments.values_mut())
            .flat_map(|d| d.replicas.iter_mut())
            .collect();
        let slots: Vec<Slot> = replicas
            .iter()
            .map(|r| Slot {
                seq: r.seq,
                cpu_units: r.cpu_units,
                placed: r.placed,
                wanted: r.retire_at.is_none(),
            })
            .collect();
        for (r, placed) in replicas.iter_mut().zip(fit(&slots, capacity)) {
            if placed && !r.placed {
                r.running_at = r.running_at.max(t + delay);
            }
            r.placed = placed;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(seq: u64, cpu_units: u64, placed: bool) -> Slot {
        Slot {
            seq,
            cpu_units,
            placed,
            wanted: true,
        }
    }

    #[test]
    fn unlimited_places_every_wanted_replica() {
        let mut leaving = slot(3, 1, false);
        leaving.wanted = false;
        let slots = [slot(1, 5, false), slot(2, 0, true), leaving];
        assert_eq!(fit(&slots, None), [true, true, false]);
    }

    #[test]
    fn oldest_first_and_small_ones_fill_the_gaps() {
        // Listed out of age order on purpose: seq decides, not position.
        let slots = [
            slot(4, 1, false),
            slot(2, 3, false),
            slot(1, 2, false),
            slot(3, 0, false),
        ];
        // 2 (seq 1) fits, 3 (seq 2) does not fit in 4, 0 (seq 3) always fits, 1 (seq 4) fits.
        assert_eq!(fit(&slots, Some(4)), [true, false, true, true]);
        assert_eq!(fit(&slots, Some(0)), [false, false, false, true]);
        assert_eq!(fit(&slots, Some(6)), [true, true, true, true]);
    }

    #[test]
    fn placed_replicas_keep_their_place_and_the_youngest_leave_first() {
        // A younger replica holding CPUs is not displaced by an older one that now would fit.
        let slots = [slot(1, 2, false), slot(2, 1, true)];
        assert_eq!(fit(&slots, Some(2)), [false, true]);
        assert_eq!(fit(&slots, Some(3)), [true, true]);
        // Shrinking: the youngest placed go until the rest fit; 0-CPU replicas stay.
        let slots = [
            slot(1, 1, true),
            slot(2, 1, true),
            slot(3, 0, true),
            slot(4, 1, true),
        ];
        assert_eq!(fit(&slots, Some(2)), [true, true, true, false]);
        assert_eq!(fit(&slots, Some(0)), [false, false, true, false]);
        // Retiring replicas may keep their place but are never placed again.
        let mut leaving = slot(1, 1, true);
        leaving.wanted = false;
        assert_eq!(fit(&[leaving, slot(2, 1, false)], Some(1)), [true, false]);
        leaving.placed = false;
        assert_eq!(fit(&[leaving, slot(2, 1, false)], Some(1)), [false, true]);
        // Shrinking with an old replica stopping: it loses its place, not the younger running one.
        leaving.placed = true;
        assert_eq!(fit(&[leaving, slot(2, 1, true)], Some(1)), [false, true]);
    }

    #[test]
    fn huge_reservations_saturate_instead_of_overflowing() {
        let slots = [slot(1, u64::MAX, true), slot(2, u64::MAX, true)];
        assert_eq!(fit(&slots, Some(u64::MAX)), [true, false]);
    }
}
