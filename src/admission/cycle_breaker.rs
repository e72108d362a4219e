//! The cycle breaker in the admission loop (issue 45 item 1's safety net): upgrades admitted in
//! steps should never wait on each other in a cycle (`rayservice::job::step`, and the banker's check
//! of new upgrades), but if such a cycle forms anyway and lasts `BREAK_AFTER_MS`, the growth of its
//! lower-priority (then younger) upgrade is released as a growth-only preemption does: its slice
//! shrinks back to what serves, its old cluster keeps serving, and it retries with a new slice.
//! Who waits for whom comes from the scheduler's own records (`explain`'s holders).

use std::collections::{BTreeMap, BTreeSet};

use super::sync::{Action, AdmissionState};
use crate::queue::WorkloadKey;
use crate::queue::wait_cycle::{self, Upgrade};

/// How long a wait-for cycle among upgrades may last before it is broken, by default (the manager's
/// `--cycle-break-after`, `ManagerOptions::cycle_break_after`).
pub const BREAK_AFTER_MS: i64 = 60_000;

/// The `GrowthPreempted` reason the cycle breaker writes.
pub const REASON: &str = "WaitForCycle";

impl AdmissionState {
    /// Finds the wait-for cycles among upgrades in flight and breaks those that lasted long enough.
    pub(super) fn break_wait_cycles(&mut self, now_ms: i64, actions: &mut Vec<Action>) {
        let upgrades = self.core.waiting_upgrades();
        let after = self.cycle_break_after_ms.unwrap_or(BREAK_AFTER_MS);
        if upgrades.len() < 2 {
            self.cycle_breaker.due(now_ms, BTreeSet::new(), after);
            return;
        }
        let by_slice: BTreeMap<&WorkloadKey, (i32, i64)> =
            upgrades.iter().map(|(s, _, p, t)| (s, (*p, *t))).collect();
        let mut waits_on: BTreeMap<WorkloadKey, BTreeSet<WorkloadKey>> = BTreeMap::new();
        for (slice, pending, _, _) in &upgrades {
            let Some(e) = self.explanations.get(pending) else {
                continue;
            };
            for h in &e.holders {
                let Some((ns, name)) = h.workload.split_once('/') else {
                    continue;
                };
                let held_by = WorkloadKey::new(ns, name);
                if held_by != *slice && by_slice.contains_key(&held_by) {
                    waits_on.entry(slice.clone()).or_default().insert(held_by);
                }
            }
        }
        for cycle in self
            .cycle_breaker
            .due(now_ms, wait_cycle::cycles(&waits_on), after)
        {
            let members: Vec<Upgrade> = cycle
                .iter()
                .filter_map(|k| {
                    let (priority, waiting_since) = *by_slice.get(k)?;
                    Some(Upgrade {
                        slice: k.clone(),
                        priority,
                        waiting_since,
                    })
                })
                .collect();
            let Some(v) = wait_cycle::victim(&members) else {
                continue;
            };
            if !self.core.release_growth(&v.slice) {
                continue;
            }
            let names: Vec<String> = cycle.iter().map(ToString::to_string).collect();
            let message = format!(
                "the upgrades of workload slices {} waited for each other's quota for {} s: the growth of {} (lowest priority, then youngest) is released so the others can move; it retries with a new slice",
                names.join(", "),
                after / 1000,
                v.slice
            );
            tracing::warn!(workload = %v.slice, "{message}");
            actions.push(Action::TakeGrowth {
                key: v.slice.clone(),
                reason: REASON.to_string(),
                message,
            });
        }
    }
}
