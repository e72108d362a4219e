//! The scheduler loop: wait for a cache change, step the admission state, execute the writes, then
//! bring ClusterQueue and LocalQueue status up to date. Only the leader runs it; a follower keeps its
//! caches warm and starts from scratch when it becomes leader. The loop alone lives here: the writes to
//! Workloads are the [`Writer`]'s (`writer.rs`), those to the queue objects the [`Queues`]' (`queues.rs`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::kit::events::QueuedRecorder;
use futures::StreamExt;
use kube::Client;
use tokio::sync::{Notify, watch};

use super::caches::Caches;
use super::pending_writes::{PendingWrites, Tools};
use super::queues::Queues;
use super::quota_seen::QuotaSeen;
use super::stats::Phase;
use super::sync::{Action, AdmissionState, Snapshot, key_of};
use super::write_backoff::WriteBackoff;
use super::writer::WRITE_CONCURRENCY;
use super::writer::{ByKey, Outcome, Writer, now};
use crate::admission::metrics::Metrics;
use crate::queue::WorkloadKey;

/// Everything the loop needs.
pub struct AdmissionLoop {
    pub client: Client,
    pub caches: Caches,
    pub notify: Arc<Notify>,
    /// Events go through a queue so that writing them never holds back the next admission.
    pub recorder: QueuedRecorder,
    pub metrics: Arc<Metrics>,
    pub leader: watch::Receiver<bool>,
    /// Re-run at least this often even without a change (time-based requeues).
    pub resync: Duration,
    /// Turns true once every cache has listed. (Waiting on the stores from two tasks at once can
    /// lose a wake-up: their readiness signal keeps a single waker.)
    pub synced: watch::Receiver<bool>,
    /// The scheduler's latest reasoning per pending workload, for `quotagate explain`.
    pub explanations: super::Explanations,
    /// Time per phase of the cycles, for the end-to-end benchmark.
    pub stats: super::CycleStats,
    /// waitForPodsReady, when on.
    pub pods_ready: Option<crate::api::kueue::config::PodsReadyConfig>,
    /// Fair sharing, when on.
    pub fair_sharing: Option<crate::queue::FairSharingConfig>,
    /// Admission fair sharing, when on.
    pub admission_fair_sharing: Option<crate::api::kueue::config::AfsConfig>,
    /// Kueue's `PrioritizePreemptorWorkloads` feature gate.
    pub prioritize_preemptor_workloads: bool,
    /// Kueue's `RecomputeAssignmentUponPreemptionTargetsOverlap` feature gate (on by default).
    pub recompute_on_overlap: bool,
    /// How long a wait-for cycle among upgrades may last before it is broken (`cycle_breaker`).
    pub cycle_break_after: Duration,
    /// The versions our own status writes produced, until the cache shows them.
    pub own_writes: super::own_writes::OwnWrites,
}

/// Below this many workloads the queue gauges are recomputed every cycle.
const GAUGES_EVERY_CYCLE_BELOW: usize = 1000;

/// Workers writing pending statuses off the cycle: fewer than the cycle's own writes, so the next
/// cycle's admissions are not crowded out.
const PENDING_WRITERS: usize = 8;

/// The actions after the last one that is not a pending status: written off the cycle when the loop
/// has workers for it (`pending_writes`).
fn split_trailing_pending(actions: &mut Vec<Action>) -> Vec<Action> {
    let at = actions
        .iter()
        .rposition(|a| !matches!(a, Action::Pending { .. }))
        .map_or(0, |i| i + 1);
    actions.split_off(at)
}

/// Consecutive actions of one kind, in order.
fn runs_of_one_kind(actions: Vec<Action>) -> Vec<Vec<Action>> {
    let mut runs: Vec<Vec<Action>> = Vec::new();
    for a in actions {
        match runs.last_mut() {
            Some(run)
                if run
                    .last()
                    .is_some_and(|l| std::mem::discriminant(l) == std::mem::discriminant(&a)) =>
            {
                run.push(a)
            }
            _ => runs.push(vec![a]),
        }
    }
    runs
}

/// What the loop remembers about failed writes: admissions backing off, and failed pending-status writes,
/// retried once their backoff expires (by queueing the workload afresh), so a refused write neither
/// hot-loops nor is forgotten.
#[derive(Default)]
struct WriteRetries {
    backoff: WriteBackoff,
    pending_backoff: WriteBackoff,
    pending_retry: HashMap<WorkloadKey, Instant>,
    /// The cycle's trailing pending-status writes, made off the cycle (`None`: in the cycle).
    off_cycle: Option<PendingWrites>,
}

impl WriteRetries {
    /// Queues afresh the workloads whose pending-status write is due again.
    fn requeue_due(&mut self, state: &mut AdmissionState) {
        if self.pending_retry.is_empty() {
            return;
        }
        let t = Instant::now();
        self.pending_retry.retain(|k, at| {
            let due = *at <= t;
            if due {
                state.unshow(k);
            }
            !due
        });
    }

    /// A pending workload whose admission write failed sits out its backoff: it takes no quota in this
    /// cycle, so it cannot starve the workloads queued behind it. (Nothing to do, and no per-workload
    /// work on the hot path, while no write is backing off.)
    fn sit_out(&mut self, snap: &mut Snapshot) {
        if self.backoff.is_empty() && self.pending_backoff.is_empty() {
            return;
        }
        let t = Instant::now();
        let live: std::collections::HashSet<WorkloadKey> = snap.workloads.iter().map(|w| key_of(w)).collect();
        self.backoff.retain(|k| live.contains(k));
        self.pending_backoff.retain(|k| live.contains(k));
        snap.workloads
            .retain(|w| w.admission().is_some() || !self.backoff.blocked(&key_of(w), t));
    }
}

/// Only the workloads the actions name, looked up without allocating a key per workload.
fn named_workloads(actions: &[Action], snap: &Snapshot) -> ByKey {
    let wanted: std::collections::HashSet<(&str, &str)> = actions
        .iter()
        .map(|a| {
            let k = a.key();
            (k.namespace.as_str(), k.name.as_str())
        })
        .collect();
    snap.workloads
        .iter()
        .filter_map(|w| {
            let k = (
                w.metadata.namespace.as_deref().unwrap_or_default(),
                w.metadata.name.as_deref().unwrap_or_default(),
            );
            wanted
                .contains(&k)
                .then(|| (WorkloadKey::new(k.0, k.1), w.clone()))
        })
        .collect()
}
impl AdmissionLoop {
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        let mut state = self.fresh_state();
        let mut retries = self.retries();
        tokio::pin!(shutdown);
        let mut leader_open = true;
        let mut last_gauges: Option<Instant> = None;
        let mut cycles: u64 = 0;
        if self.synced.wait_for(|s| *s).await.is_err() {
            return;
        }
        loop {
            let wake = self.wake_after(&state);
            tokio::select! {
                _ = &mut shutdown => return,
                _ = self.notify.notified() => {}
                r = self.leader.changed(), if leader_open => {
                    // Nobody can change leadership any more: stop watching it (no busy loop).
                    leader_open = r.is_ok();
                }
                _ = tokio::time::sleep(retries.backoff.next_wake(Instant::now()).map_or(wake, |d| d.min(wake))) => {}
            }
            if !*self.leader.borrow() {
                self.explanations.clear();
                state = self.fresh_state();
                if let Some(p) = &retries.off_cycle {
                    p.clear();
                }
                retries = WriteRetries {
                    off_cycle: retries.off_cycle.take(),
                    ..WriteRetries::default()
                };
                continue;
            }
            retries.requeue_due(&mut state);
            let started = std::time::Instant::now();
            let mut snap = self.caches.snapshot();
            let snapped = std::time::Instant::now();
            self.stats.add(Phase::Snapshot, snapped - started);
            retries.sit_out(&mut snap);
            // Records of deleted workloads are dropped now and then (a pass over all of them).
            cycles = cycles.wrapping_add(1);
            if cycles.is_multiple_of(64) && !self.own_writes.is_empty() {
                let live: std::collections::HashSet<WorkloadKey> =
                    snap.workloads.iter().map(|w| key_of(w)).collect();
                self.own_writes.retain(|k| live.contains(k));
            }
            tracing::trace!(workloads = snap.workloads.len(), "admission step");
            let actions = state.step(&snap, now().as_millisecond());
            tracing::trace!(actions = actions.len(), "admission step done");
            let stepped = std::time::Instant::now();
            self.stats.add(Phase::Step, stepped - snapped);
            self.stats.cycle(snap.workloads.len(), state.last_read());
            let admitted = self.write_actions(&mut state, &mut retries, &snap, actions).await;
            self.record_attempt(admitted, started);
            let written = std::time::Instant::now();
            self.stats.add(Phase::Writes, written - stepped);
            // The gauges walk every workload: with many, at most once a second (scrapes come every
            // 15-30 s); with few, every cycle, so a scrape right after a change sees it.
            let gauges = snap.workloads.len() < GAUGES_EVERY_CYCLE_BELOW
                || last_gauges.is_none_or(|t: Instant| t.elapsed() >= Duration::from_secs(1));
            if gauges {
                last_gauges = Some(Instant::now());
            }
            let queues = self.queues();
            queues.write_queue_status(&state, &snap, gauges).await;
            queues.write_priorities(&snap).await;
            self.stats.add(Phase::QueueStatus, written.elapsed());
            if admitted {
                // Kueue runs the next cycle at once after an admission.
                self.notify.notify_one();
            }
        }
    }

    /// What the loop remembers of its writes, with the workers that write trailing pending statuses
    /// off the cycle.
    fn retries(&self) -> WriteRetries {
        let tools = Tools {
            client: self.client.clone(),
            recorder: self.recorder.clone(),
            metrics: self.metrics.clone(),
            own_writes: self.own_writes.clone(),
        };
        WriteRetries {
            off_cycle: Some(PendingWrites::start(tools, PENDING_WRITERS)),
            ..WriteRetries::default()
        }
    }

    /// The admission state a new leader starts from.
    fn fresh_state(&self) -> AdmissionState {
        let mut state = AdmissionState::with_pods_ready(self.pods_ready.clone())
            .with_admission_fair_sharing(self.admission_fair_sharing.as_ref());
        state.core.set_fair_sharing(self.fair_sharing.clone());
        state
            .core
            .set_prioritize_preemptors(self.prioritize_preemptor_workloads);
        state.core.set_recompute_on_overlap(self.recompute_on_overlap);
        state.cycle_break_after_ms =
            Some(i64::try_from(self.cycle_break_after.as_millis()).unwrap_or(i64::MAX));
        state.explanations = self.explanations.clone();
        state
    }

    /// How long the loop may sleep: until the earliest PodsReady timeout runs out (none while the
    /// feature is off or nothing waits for its pods) or the next admission fair sharing sample of a
    /// LocalQueue, and at most the resync period.
    fn wake_after(&self, state: &AdmissionState) -> Duration {
        let deadline = match (state.wake_deadline(), state.afs_sample_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        deadline.map_or(self.resync, |at| {
            let left = at.saturating_sub(now().as_millisecond()).max(0);
            Duration::from_millis(u64::try_from(left).unwrap_or(0)).min(self.resync)
        })
    }

    /// The cycle's writes to Workloads, on this loop's client, recorder and metrics.
    fn writer(&self) -> Writer<'_> {
        Writer {
            client: &self.client,
            recorder: &self.recorder,
            metrics: &self.metrics,
            own_writes: &self.own_writes,
        }
    }

    /// The quota `snap`'s decisions read, against this loop's caches.
    fn quota_seen<'a>(&'a self, snap: &'a Snapshot) -> QuotaSeen<'a> {
        QuotaSeen {
            caches: &self.caches,
            snap,
        }
    }

    /// The writes to the queue objects, on this loop's client and metrics.
    fn queues(&self) -> Queues<'_> {
        Queues {
            client: &self.client,
            metrics: &self.metrics,
        }
    }

    /// Writes a cycle's actions; true when something was admitted.
    ///
    /// Writes run concurrently, bounded: one slow write no longer holds back the others, and the
    /// cycle's admissions reach the API together. A replaced slice is finished only once its
    /// successor's admission is written: finishing it after a failed write (a conflict, a deleted
    /// successor) would leave the job with no quota at all while its pods run (invariant I6). So
    /// finished slices go last, after every admission has its outcome.
    async fn write_actions(
        &self,
        state: &mut AdmissionState,
        retries: &mut WriteRetries,
        snap: &Snapshot,
        actions: Vec<Action>,
    ) -> bool {
        let by_key = named_workloads(&actions, snap);
        let writer = self.writer();
        let writer = &writer;
        let withdrawn = self.withdraw_if_quota_moved(state, snap, &actions);
        let mut actions = actions;
        let (trailing, mut outcomes) = match &retries.off_cycle {
            Some(p) => {
                let trailing = split_trailing_pending(&mut actions);
                // Every write of this cycle lands after the earlier pending writes of its workload.
                p.settle(actions.iter().chain(&trailing).map(Action::key)).await;
                (trailing, p.outcomes())
            }
            None => (Vec::new(), Vec::new()),
        };
        let (finishes, first): (Vec<Action>, Vec<Action>) = actions
            .into_iter()
            .filter(|a| !matches!(a, Action::Admit { key, .. } if withdrawn.contains(key)))
            .partition(|a| matches!(a, Action::FinishSlice { .. }));
        // Concurrent only within a run of one kind: across kinds the order is the step's (the
        // job controllers react to each write, and the seeded chaos runs broke invariants I1 and
        // I2 when an eviction could land before the admission decided ahead of it).
        // Each admission is held once more against the quota just before it is written: the runs
        // written before it (and its own conflict's re-read) take time, and a cut may arrive
        // meanwhile. A run of admissions is first held against the quota the API server shows (the
        // cache may not have heard of a cut yet), then each one against the cache.
        let quota = self.quota_seen(snap);
        for run in runs_of_one_kind(first) {
            if matches!(run.first(), Some(Action::Admit { .. }))
                && quota.moved_on_server(&self.client).await == Some(true)
            {
                outcomes.extend(run.iter().map(|a| Outcome::Withdrawn(a.key().clone())));
                continue;
            }
            let st = &*state;
            let by_key = &by_key;
            let mut done: Vec<Outcome> = futures::stream::iter(run)
                .map(|a| writer.execute(st, a, by_key, quota))
                .buffer_unordered(WRITE_CONCURRENCY)
                .collect()
                .await;
            outcomes.append(&mut done);
        }
        let (admitted, failed_admits) = self.settle(state, retries, outcomes, withdrawn);
        let finishes = finishes.into_iter().filter(|a| {
            let Action::FinishSlice { key, replaced_by } = a else { return true };
            let failed = failed_admits.contains(replaced_by);
            if failed {
                tracing::debug!(workload = %key, successor = %replaced_by, "successor not admitted; the slice stays");
            }
            !failed
        });
        {
            let st = &*state;
            let by_key = &by_key;
            futures::stream::iter(finishes)
                .map(|a| writer.execute(st, a, by_key, quota))
                .buffer_unordered(WRITE_CONCURRENCY)
                .for_each(|_| async {})
                .await;
        }
        if let Some(p) = &retries.off_cycle {
            for a in trailing {
                if let Action::Pending { key, reason, message } = a
                    && let Some(wl) = by_key.get(&key)
                {
                    p.queue(wl.clone(), key, reason, message);
                }
            }
        }
        admitted
    }

    /// Quota changed while the step ran (an administrator cut it, a cohort moved): the admissions were
    /// decided against the old quota, so none is written; their workloads go back to the queue and the
    /// next cycle, which runs at once, decides on the new one. This narrows the window in which an
    /// admission can be written against a quota already cut to the watch's own delivery lag (found by
    /// the seeded chaos runs, invariant I1); each admission is held against the quota again just
    /// before its write (`Writer::execute`). Returns the withdrawn admissions.
    fn withdraw_if_quota_moved(
        &self,
        state: &mut AdmissionState,
        snap: &Snapshot,
        actions: &[Action],
    ) -> BTreeSet<WorkloadKey> {
        let mut withdrawn: BTreeSet<WorkloadKey> = BTreeSet::new();
        if self.quota_seen(snap).moved() {
            for a in actions {
                if let Action::Admit { key, .. } = a {
                    state.forget(key);
                    withdrawn.insert(key.clone());
                }
            }
            if !withdrawn.is_empty() {
                tracing::debug!(
                    withdrawn = withdrawn.len(),
                    "quota changed during the cycle; admissions withdrawn"
                );
                self.notify.notify_one();
            }
        }
        withdrawn
    }

    /// Takes in the outcomes of the cycle's writes: backoffs, retries, and the admissions that did not
    /// happen (`failed_admits`, starting with the withdrawn ones). Returns whether something was
    /// admitted, and the failed admissions.
    fn settle(
        &self,
        state: &mut AdmissionState,
        retries: &mut WriteRetries,
        outcomes: Vec<Outcome>,
        mut failed_admits: BTreeSet<WorkloadKey>,
    ) -> (bool, BTreeSet<WorkloadKey>) {
        let mut admitted = false;
        for o in outcomes {
            match o {
                Outcome::Done => {}
                Outcome::PendingUnwritten(k, permanent) => {
                    let (_, delay) = retries.pending_backoff.failed(&k, permanent, Instant::now());
                    retries.pending_retry.insert(k, Instant::now() + delay);
                }
                Outcome::PendingWritten(k) => retries.pending_backoff.succeeded(&k),
                Outcome::Admitted(k) => {
                    retries.backoff.succeeded(&k);
                    admitted = true;
                }
                Outcome::Vanished(k) => {
                    state.forget(&k);
                    failed_admits.insert(k);
                }
                // Decided on a quota that changed before it could be written: back to the queue,
                // with no backoff (nothing failed). The next cycle runs when the change's watch event
                // wakes the loop (already, when the cache showed it), not at once: while the cache
                // has not heard of a change the API server shows, a cycle at once would decide on
                // the old quota again.
                Outcome::Withdrawn(k) => {
                    tracing::debug!(workload = %k, "quota changed before the admission was written; withdrawn");
                    state.forget(&k);
                    failed_admits.insert(k);
                }
                Outcome::AdmitFailed {
                    key,
                    cq,
                    error,
                    object,
                } => {
                    state.forget(&key);
                    self.writer()
                        .admit_failed(&mut retries.backoff, &key, &cq, &error, &object);
                    failed_admits.insert(key);
                }
            }
        }
        (admitted, failed_admits)
    }

    /// Kueue's admission attempt metrics for one cycle.
    fn record_attempt(&self, admitted: bool, started: std::time::Instant) {
        let result = self
            .metrics
            .result(if admitted { "success" } else { "inadmissible" });
        self.metrics.admission_attempts_total.get_or_create(&result).inc();
        self.metrics
            .admission_attempt_duration_seconds
            .get_or_create(&result)
            .observe(started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
