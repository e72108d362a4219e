//! The admission cycle's results as writes: admissions (withheld while admission is blocked on
//! PodsReady), evictions, growth taken, pending statuses that changed, and finished slices; the
//! `explain` records of the pending kept fresh.

use std::collections::HashSet;

use super::action::Action;
use super::classify::View;
use super::conditions::{EvictedBy, EvictionCause, controller_owner};
use super::explanations::Explanations;
use super::pods_ready;
use super::snapshot::{Snapshot, key_of};
use super::unconfirmed::Unconfirmed;
use crate::api::kueue::constants::reason;
use crate::queue::{self, AdmissionCore, WorkloadKey, convert};

/// The writes one step's cycle results become, pushed into `actions`.
pub(super) struct Writes<'a> {
    pub(super) core: &'a mut AdmissionCore,
    pub(super) unconfirmed: &'a mut Unconfirmed,
    pub(super) explanations: &'a mut Explanations,
    /// When every pending workload's record was last redone, and what that took (ms).
    pub(super) explained_at: &'a mut Option<i64>,
    pub(super) explain_cost_ms: &'a mut i64,
    pub(super) actions: &'a mut Vec<Action>,
}

impl Writes<'_> {
    /// The cycle's admissions as writes: withheld as pending while admission is blocked on
    /// PodsReady (`(block, blocked)`: the option is on, a workload blocks now); returned, the
    /// replacement slices whose replaced slice must stay until their checks pass.
    pub(super) fn admissions(
        &mut self,
        admissions: Vec<queue::AdmissionResult>,
        (block, mut blocked): (bool, bool),
        snap: &Snapshot,
        view: &View<'_>,
    ) -> HashSet<WorkloadKey> {
        let mut withheld: HashSet<WorkloadKey> = HashSet::new();
        for a in admissions {
            if blocked {
                // Kueue's scheduler waits for PodsReady before this admission; here it stays pending
                // and the core forgets it, so a later cycle decides again on the quota then.
                self.unconfirmed.forget(self.core, &a.key);
                self.actions.push(Action::Pending {
                    key: a.key.clone(),
                    reason: queue::PendingReason::WaitingForPodsReady,
                    message: pods_ready::BLOCKED_MESSAGE.into(),
                });
                withheld.insert(a.key);
                continue;
            }
            // The one admitted now is not PodsReady yet: it blocks the rest of the cycle's.
            blocked = block;
            self.explanations.remove(&a.key);
            self.unconfirmed.assumed.insert(a.key.clone());
            let checks = if view.has_checks(&a.admission.cluster_queue) {
                view.admission_checks(&convert::admission_api(&a.admission))
            } else {
                std::collections::BTreeSet::new()
            };
            // A replacement slice that still has checks to pass is reserved, not admitted: the slice
            // it replaces stays (admitted, its pods running) until it is (`Class::Replaced`).
            if a.replaced.is_some() && !checks.is_empty() {
                let ready: HashSet<&str> = snap
                    .workloads
                    .iter()
                    .find(|w| key_of(w) == a.key)
                    .and_then(|w| w.status.as_ref())
                    .map(|s| {
                        s.admission_checks
                            .iter()
                            .filter(|c| c.state == crate::api::kueue::CheckState::Ready)
                            .map(|c| c.name.as_str())
                            .collect()
                    })
                    .unwrap_or_default();
                if checks.iter().any(|c| !ready.contains(c.as_str())) {
                    withheld.insert(a.key.clone());
                }
            }
            self.actions.push(Action::Admit {
                key: a.key,
                admission: a.admission,
                replaced: a.replaced,
                checks,
            });
        }
        withheld
    }

    /// The cycle's evictions as writes; one whose Workload no job controls also releases its
    /// reservation at once.
    pub(super) fn evictions(&mut self, evictions: Vec<queue::Eviction>, snap: &Snapshot) {
        for e in evictions {
            let cause = EvictionCause {
                by: e.reason.into(),
                message: e.message,
            };
            self.unconfirmed.evicting.insert(e.key.clone(), cause.clone());
            let clear = snap
                .workloads
                .iter()
                .find(|w| {
                    w.metadata.name.as_deref() == Some(e.key.name.as_str())
                        && w.metadata.namespace.as_deref().unwrap_or_default() == e.key.namespace
                })
                .is_some_and(|w| controller_owner(w).is_none());
            self.actions.push(Action::Evict {
                key: e.key,
                cause,
                clear,
            });
        }
    }

    /// Refreshes the `explain` records of the pending workloads whose verdict changed, and all of
    /// them about once a second.
    pub(super) fn explain_pending(&mut self, pending: &[queue::PendingStatus], now_ms: i64) {
        // A record per pending workload is a pass over its ClusterQueue's tree and holders: with
        // thousands pending, redoing every record every cycle made the step several times slower.
        // A record is redone when its reason or message changed, and all of them once a second, so
        // what `explain` shows is never old in its verdict and about a second old in its numbers.
        // With many pending, the refresh of all is spaced to at least 20 times its own cost, so it
        // takes at most ~5% of the loop (measured with `perf`: 16% of the step at 2,500 pending).
        let every = 1000.max(self.explain_cost_ms.saturating_mul(20));
        let refresh_all = self.explained_at.is_none_or(|t| now_ms - t >= every);
        if refresh_all {
            *self.explained_at = Some(now_ms);
        }
        let keys: Vec<WorkloadKey> = pending
            .iter()
            .filter(|p| refresh_all || self.explanations.stale(&p.key, p.reason.as_str(), &p.message))
            .map(|p| p.key.clone())
            .collect();
        let started = std::time::Instant::now();
        for (k, e) in self.core.explain_all(&keys) {
            self.explanations.insert(k, e);
        }
        if refresh_all {
            *self.explain_cost_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX / 20);
        }
    }

    /// A Pending write for each pending workload whose reason or message differs from what the API
    /// shows.
    pub(super) fn pending_writes(&mut self, pending: Vec<queue::PendingStatus>) {
        for p in pending {
            let said = super::conditions::pending_fingerprint(p.reason.as_str(), &p.message);
            if self.unconfirmed.shown.get(&p.key) == Some(&said) {
                continue;
            }
            self.unconfirmed.shown.insert(p.key.clone(), said);
            self.actions.push(Action::Pending {
                key: p.key,
                reason: p.reason,
                message: p.message,
            });
        }
    }

    /// Preemption that takes only the growth of admitted slices.
    pub(super) fn growth_taken(&mut self, taken: Vec<queue::Eviction>) {
        for e in taken {
            let by: EvictedBy = e.reason.into();
            let reason = by.preempted_reason().unwrap_or(reason::PREEMPTED).to_string();
            self.actions.push(Action::TakeGrowth {
                key: e.key,
                reason,
                message: e.message,
            });
        }
    }

    /// Replaced slices to mark Finished, but not those whose replacement was `withheld`.
    pub(super) fn finished_slices(
        &mut self,
        finished: Vec<queue::FinishedSlice>,
        withheld: &HashSet<WorkloadKey>,
    ) {
        for f in finished {
            if withheld.contains(&f.replaced_by) {
                continue;
            }
            self.actions.push(Action::FinishSlice {
                key: f.key,
                replaced_by: f.replaced_by,
            });
        }
    }
}
