//! Floors of admitted workloads (beyond Kueue): what an admitted workload can shrink back to when
//! preempted, so its growth is taken before it is evicted whole (`growth_first`). The caller sets
//! a floor as pod counts per podset (for a RayService's aggregated slice during an upgrade: what
//! its serving cluster holds); the core turns it into usage with the workload's own admission.

use std::collections::BTreeMap;

use super::AdmissionCore;
use super::amount::{Amount, FlavorResource, FrAmounts};
use super::preemption::Target;
use super::scheduler::{AdmittedWorkload, Eviction, EvictionReason};

/// The usage of `counts` pods per podset of admission `a`'s podsets (a podset not named keeps all
/// its pods; a count is held to 0..=admitted), each amount rounded up so a floor never frees more
/// than the workload really gives back.
fn floor_usage(a: &AdmittedWorkload, counts: &BTreeMap<String, i64>) -> FrAmounts {
    let mut u = FrAmounts::new();
    for ps in &a.admission.pod_set_assignments {
        let keep = counts
            .get(&ps.name)
            .copied()
            .unwrap_or(ps.count)
            .clamp(0, ps.count.max(0));
        for (r, v) in &ps.resource_usage {
            let Some(f) = ps.flavors.get(r) else { continue };
            let part = if ps.count <= 0 || v.is_unlimited() {
                *v
            } else {
                let n = i128::from(v.0) * i128::from(keep);
                let d = i128::from(ps.count);
                Amount(i64::try_from((n + d - 1) / d).unwrap_or(i64::MAX))
            };
            *u.entry(FlavorResource::new(f, r)).or_default() += part;
        }
    }
    u
}

impl AdmissionCore {
    /// Sets (or with `None` clears) the floor of an admitted workload, as pod counts per podset.
    /// Unknown workloads are ignored: the floor is set again when it is recorded.
    pub fn set_floor(&mut self, key: &super::WorkloadKey, counts: Option<&BTreeMap<String, i64>>) {
        let Some(a) = self.admitted.get_mut(key) else {
            return;
        };
        a.floor = counts.map(|c| floor_usage(a, c));
        // A victim whose growth was taken is let go once it holds no more than its floor, also when
        // the floor rose to what it holds (its job's serving part grew since the floor was written):
        // otherwise nothing shrinks it further and the upgrade's new slice waits behind it for good.
        if a.taking_growth && a.at_floor() {
            a.taking_growth = false;
            a.evicting = false;
            let root = self
                .tree
                .cq(&a.admission.cluster_queue)
                .map(|i| self.tree.root(i));
            if let Some(r) = root {
                self.dirty_roots.insert(self.tree.nodes[r].name.clone());
            }
        }
    }

    /// What an admitted workload holds above its floor.
    pub(super) fn growth_of(&self, a: &AdmittedWorkload) -> FrAmounts {
        let Some(floor) = &a.floor else {
            return FrAmounts::new();
        };
        a.usage
            .iter()
            .map(|(fr, v)| {
                (
                    fr.clone(),
                    (*v - floor.get(fr).copied().unwrap_or_default()).clamp_zero(),
                )
            })
            .filter(|(_, v)| *v > Amount::ZERO)
            .collect()
    }

    /// Marks a victim whose growth is taken: it keeps its quota (as an evicted one does until it
    /// lets go) and is not a candidate again until it has shrunk to its floor (`shrink_admitted`).
    /// Returns the report, with Kueue's reason and preemption message and what is taken.
    pub(super) fn take_growth(
        &mut self,
        t: &Target,
        preemptor: &str,
        preemptor_path: &str,
    ) -> Option<Eviction> {
        let preemptee = {
            let a = self.admitted.get(&t.key)?;
            if a.evicting {
                return None;
            }
            self.tree
                .cq(&a.admission.cluster_queue)
                .map_or_else(|| "UNKNOWN".to_string(), |i| self.tree.path(i))
        };
        let a = self.admitted.get_mut(&t.key)?;
        a.evicting = true;
        a.taking_growth = true;
        Some(Eviction {
            key: t.key.clone(),
            reason: EvictionReason::Preempted(t.reason),
            message: format!(
                "Preempted to accommodate a workload {preemptor} due to {}; preemptor path: {preemptor_path}; preemptee path: {preemptee}; \
                 only the growth of its upgrade is taken: it shrinks back to what its serving part holds",
                super::scheduler::preempt_text(t.reason),
            ),
        })
    }

    /// Marks an admitted workload as giving back its growth (its Workload says so, after a
    /// restart): held, and no victim, until it shrinks to its floor.
    pub fn mark_taking_growth(&mut self, key: &super::WorkloadKey) {
        if let Some(a) = self.admitted.get_mut(key)
            && !a.at_floor()
        {
            a.evicting = true;
            a.taking_growth = true;
        }
    }
}

impl AdmissionCore {
    /// Upgrades in flight: admitted slices with a pending replacement, as the cycle breaker sees
    /// them (the replacement's key, priority and queue time).
    pub fn waiting_upgrades(&self) -> Vec<(super::WorkloadKey, super::WorkloadKey, i32, i64)> {
        let mut v: Vec<_> = self
            .replacements
            .iter()
            .filter_map(|(old, new)| {
                self.admitted.get(old)?;
                let p = self.pending.get(new)?;
                Some((old.clone(), new.clone(), p.model.priority, p.model.timestamp))
            })
            .collect();
        v.sort();
        v
    }

    /// The cycle breaker's release of an upgrade's growth: as a growth-only preemption, with no
    /// preemptor. False when there is no growth to give back or it is already being evicted.
    pub fn release_growth(&mut self, key: &super::WorkloadKey) -> bool {
        let Some(a) = self.admitted.get_mut(key) else {
            return false;
        };
        if a.evicting || a.at_floor() {
            return false;
        }
        a.evicting = true;
        a.taking_growth = true;
        let root = self
            .tree
            .cq(&a.admission.cluster_queue)
            .map(|i| self.tree.root(i));
        if let Some(r) = root {
            self.dirty_roots.insert(self.tree.nodes[r].name.clone());
        }
        true
    }
}
