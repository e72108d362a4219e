//! The scheduler loop: wait for a cache change, step the admission state, execute the writes, then
//! bring ClusterQueue and LocalQueue status up to date. Only the leader runs it; a follower keeps its
//! caches warm and starts from scratch when it becomes leader.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::kit::events::QueuedRecorder;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::{Notify, watch};

use super::caches::Caches;
use super::conditions::{self, EvictionCause};
use super::finalizers;
use super::metric_labels::{priority_class, queued_since};
use super::queue_status;
use super::stats::Phase;
use super::sync::{Action, AdmissionState, Snapshot, key_of};
use super::write_backoff::{self, WriteBackoff};
use crate::admission::metrics::Metrics;
use crate::api::kueue::constants::{RESOURCE_IN_USE_FINALIZER, reason};
use crate::api::kueue::{ClusterQueue, Cohort, LocalQueue, Workload, WorkloadStatus};
use crate::queue::{WorkloadKey, convert};

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
    /// How long a wait-for cycle among upgrades may last before it is broken (`cycle_breaker`).
    pub cycle_break_after: Duration,
    /// The versions our own status writes produced, until the cache shows them.
    pub own_writes: super::own_writes::OwnWrites,
}

/// Below this many workloads the queue gauges are recomputed every cycle.
const GAUGES_EVERY_CYCLE_BELOW: usize = 1000;

/// Writes in flight at once within a cycle.
const WRITE_CONCURRENCY: usize = 16;

/// What one write leaves for the loop to remember.
enum Outcome {
    Done,
    Admitted(WorkloadKey),
    /// A pending status write failed (`true`: for good, a 4xx other than a conflict): it is written
    /// again once its backoff expires.
    PendingUnwritten(WorkloadKey, bool),
    /// A pending status was written.
    PendingWritten(WorkloadKey),
    /// The workload to admit is no longer in the snapshot.
    Vanished(WorkloadKey),
    AdmitFailed {
        key: WorkloadKey,
        cq: String,
        error: Box<kube::Error>,
        object: Box<ObjectReference>,
    },
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

/// The workloads a cycle's actions name.
type ByKey = HashMap<WorkloadKey, Arc<Workload>>;

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

fn wl_api(client: &Client, key: &WorkloadKey) -> Api<Workload> {
    Api::namespaced(client.clone(), &key.namespace)
}

/// What the loop remembers about failed writes: admissions backing off, and failed pending-status writes,
/// retried once their backoff expires (by queueing the workload afresh), so a refused write neither
/// hot-loops nor is forgotten.
#[derive(Default)]
struct WriteRetries {
    backoff: WriteBackoff,
    pending_backoff: WriteBackoff,
    pending_retry: HashMap<WorkloadKey, Instant>,
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
        let mut retries = WriteRetries::default();
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
                retries = WriteRetries::default();
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
            self.stats.cycle(snap.workloads.len());
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
            self.write_queue_status(&state, &snap, gauges).await;
            self.write_priorities(&snap).await;
            self.stats.add(Phase::QueueStatus, written.elapsed());
            if admitted {
                // Kueue runs the next cycle at once after an admission.
                self.notify.notify_one();
            }
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
        let withdrawn = self.withdraw_if_quota_moved(state, snap, &actions);
        let (finishes, first): (Vec<Action>, Vec<Action>) = actions
            .into_iter()
            .filter(|a| !matches!(a, Action::Admit { key, .. } if withdrawn.contains(key)))
            .partition(|a| matches!(a, Action::FinishSlice { .. }));
        // Concurrent only within a run of one kind: across kinds the order is the step's (the
        // job controllers react to each write, and the seeded chaos runs broke invariants I1 and
        // I2 when an eviction could land before the admission decided ahead of it).
        let mut outcomes: Vec<Outcome> = Vec::new();
        for run in runs_of_one_kind(first) {
            let st = &*state;
            let by_key = &by_key;
            let mut done: Vec<Outcome> = futures::stream::iter(run)
                .map(|a| self.execute(st, a, by_key))
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
                .map(|a| self.execute(st, a, by_key))
                .buffer_unordered(WRITE_CONCURRENCY)
                .for_each(|_| async {})
                .await;
        }
        admitted
    }

    /// Quota changed while the step ran (an administrator cut it, a cohort moved): the admissions were
    /// decided against the old quota, so none is written; their workloads go back to the queue and the
    /// next cycle, which runs at once, decides on the new one. This narrows the window in which an
    /// admission can be written against a quota already cut to the watch's own delivery lag (found by
    /// the seeded chaos runs, invariant I1). Returns the withdrawn admissions.
    fn withdraw_if_quota_moved(
        &self,
        state: &mut AdmissionState,
        snap: &Snapshot,
        actions: &[Action],
    ) -> BTreeSet<WorkloadKey> {
        let mut withdrawn: BTreeSet<WorkloadKey> = BTreeSet::new();
        if self.quota_moved(snap) {
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
                Outcome::AdmitFailed {
                    key,
                    cq,
                    error,
                    object,
                } => {
                    state.forget(&key);
                    self.admit_failed(&mut retries.backoff, &key, &cq, &error, &object);
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

    /// Queues the event: the loop does not wait for it to be written.
    async fn event(&self, obj: &ObjectReference, type_: EventType, why: &str, note: String) {
        let ev = Event {
            type_,
            reason: why.to_string(),
            note: Some(note),
            action: why.to_string(),
            secondary: None,
        };
        self.recorder.publish(ev, obj.clone());
    }

    /// Makes one write. Runs concurrently with the cycle's other writes, so it only reads the state;
    /// what the loop must remember comes back as the outcome.
    async fn execute(&self, state: &AdmissionState, action: Action, by_key: &ByKey) -> Outcome {
        let key = action.key().clone();
        let Some(wl) = by_key.get(&key) else {
            return match action {
                Action::Admit { .. } => Outcome::Vanished(key),
                _ => Outcome::Done,
            };
        };
        let api = wl_api(&self.client, &key);
        match action {
            Action::Admit {
                admission,
                replaced,
                checks,
                ..
            } => return self.admit(&api, wl, key, admission, replaced, checks).await,
            Action::Evict { cause, clear, .. } => self.evict(state, &api, wl, cause, clear).await,
            Action::TakeGrowth {
                reason: why, message, ..
            } => self.take_growth(&api, wl, &why, message).await,
            Action::ClearReservation { .. } => {
                if let Some(status) = conditions::clear_reservation(wl, now()) {
                    let _ = self.write(&api, wl, status).await;
                }
            }
            Action::Pending {
                reason: why, message, ..
            } => return self.write_pending(&api, wl, key, why, message).await,
            Action::FinishSlice { replaced_by, .. } => {
                let msg = format!("Replaced by workload slice {replaced_by}");
                if let Some(status) = conditions::finished(wl, reason::WORKLOAD_SLICE_REPLACED, &msg, now()) {
                    let _ = self.write(&api, wl, status).await;
                }
            }
            Action::Requeue {
                reason: why, message, ..
            } => {
                if let Some(status) = super::backoff::requeued(wl, &why, &message, now()) {
                    let _ = self.write(&api, wl, status).await;
                }
            }
            Action::Checks { status, .. } => self.write_checks(&api, wl, status).await,
            Action::Deactivate {
                reason: why, message, ..
            } => self.deactivate(&api, wl, &key, why, message).await,
            Action::BackoffFinished { .. } => {
                if let Some(status) = super::backoff::finished(wl, now()) {
                    let _ = self.write(&api, wl, status).await;
                }
            }
            Action::RemoveFinalizer { .. } => Self::remove_finalizer(&api, wl, &key).await,
        }
        Outcome::Done
    }

    /// Writes a quota reservation (and `Admitted` when no check stands between), with its event and
    /// metrics.
    async fn admit(
        &self,
        api: &Api<Workload>,
        wl: &Arc<Workload>,
        key: WorkloadKey,
        admission: crate::queue::Admission,
        replaced: Option<WorkloadKey>,
        checks: BTreeSet<String>,
    ) -> Outcome {
        let admission = convert::admission_api(&admission);
        let cq = admission.cluster_queue.clone();
        match admit_with_retry(api, wl, admission, &checks, &self.own_writes).await {
            Ok(w) => {
                self.record_reservation(wl, &cq);
                let r = w.object_ref(&());
                let waited = wl
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or(0, |t| (now() - t.0).get_seconds());
                self.event(
                    &r,
                    EventType::Normal,
                    reason::QUOTA_RESERVED,
                    format!("Quota reserved in ClusterQueue {cq}, wait time since queued was {waited}s"),
                )
                .await;
                // With admission checks to pass, admission comes later (`Action::Checks`).
                if w.is_admitted() {
                    self.record_admitted(&w, &cq).await;
                }
                if replaced.is_some() {
                    self.metrics
                        .replaced_workload_slices_total
                        .get_or_create(&self.metrics.cq(&cq))
                        .inc();
                }
                Outcome::Admitted(key)
            }
            Err(error) => Outcome::AdmitFailed {
                key,
                cq,
                error: Box::new(error),
                object: Box::new(wl.object_ref(&())),
            },
        }
    }

    /// Marks a workload evicted (with `clear`, its reservation goes at once), with its event and metrics.
    async fn evict(
        &self,
        state: &AdmissionState,
        api: &Api<Workload>,
        wl: &Arc<Workload>,
        cause: EvictionCause,
        clear: bool,
    ) {
        let Some(mut status) = conditions::evicted(wl, &cause, now()) else {
            return;
        };
        if cause.by == conditions::EvictedBy::Deactivated {
            // Kueue: deactivation ends the requeueing history and its mark.
            status.requeue_state = None;
            status
                .conditions
                .retain(|c| c.type_ != crate::api::kueue::constants::condition::DEACTIVATION_TARGET);
        }
        if cause.by.backs_off() {
            status.requeue_state = Some(state.backoff.next_state(
                status.requeue_state.as_ref(),
                now(),
                rand::random::<f64>(),
            ));
        }
        // As Kueue, from the status that shows the eviction, before the reservation goes.
        let evicted = status.clone();
        if clear {
            let mut tmp = (**wl).clone();
            tmp.status = Some(status.clone());
            status = conditions::clear_reservation(&tmp, now()).unwrap_or(status);
        }
        if self.write(api, wl, status).await.is_ok() {
            if let Some(a) = wl.admission() {
                super::pods_ready_metrics::record_evicted(&self.metrics, &a.cluster_queue, &cause, &evicted);
            }
            self.record_eviction(wl, &cause).await;
        }
    }

    /// Writes `GrowthPreempted=True`, with an event on the Workload and a Warning on its job.
    async fn take_growth(&self, api: &Api<Workload>, wl: &Arc<Workload>, why: &str, message: String) {
        let Some(status) = conditions::growth_preempted(wl, why, &message, now()) else {
            return;
        };
        if self.write(api, wl, status).await.is_err() {
            return;
        }
        // Kueue's victim event is `Preempted`; the message says only the growth is taken.
        let what = if why == super::cycle_breaker::REASON {
            "GrowthReleased"
        } else {
            "Preempted"
        };
        self.event(&wl.object_ref(&()), EventType::Normal, what, message.clone())
            .await;
        if let Some(o) = conditions::controller_owner(wl) {
            let job = ObjectReference {
                api_version: Some(o.api_version.clone()),
                kind: Some(o.kind.clone()),
                name: Some(o.name.clone()),
                namespace: wl.metadata.namespace.clone(),
                uid: Some(o.uid.clone()),
                ..Default::default()
            };
            let note = format!(
                "the growth of workload slice {} was taken ({why}); what serves keeps running and the upgrade waits for a new slice: {message}",
                wl.name_any(),
            );
            self.event(&job, EventType::Warning, "UpgradeGrowthPreempted", note)
                .await;
        }
    }

    /// Writes `QuotaReserved=False` with why the workload is pending, when that changed.
    async fn write_pending(
        &self,
        api: &Api<Workload>,
        wl: &Arc<Workload>,
        key: WorkloadKey,
        why: String,
        message: String,
    ) -> Outcome {
        if let Some(status) = conditions::pending(wl, &why, &message, now()) {
            return match self.write_version(api, wl, status).await {
                Ok(after) => {
                    // Remembered until the cache shows it: an admission decided on the
                    // copy it replaced may be written over it (`admit_with_retry`).
                    self.own_writes
                        .record(&key, &wl.resource_version().unwrap_or_default(), &after);
                    // Kueue's scheduler says why it could not admit as a Warning `Pending` event
                    // (what `kubectl describe workload` shows first); here once per new reason
                    // or message, not once per cycle.
                    if scheduler_verdict(&why) {
                        self.event(
                            &wl.object_ref(&()),
                            EventType::Warning,
                            "Pending",
                            message.clone(),
                        )
                        .await;
                    }
                    Outcome::PendingWritten(key)
                }
                Err(e) => Outcome::PendingUnwritten(key, write_backoff::is_permanent(&e)),
            };
        }
        Outcome::Done
    }

    /// Writes the admission checks' states, and counts the admission they complete.
    async fn write_checks(&self, api: &Api<Workload>, wl: &Arc<Workload>, status: Box<WorkloadStatus>) {
        let was_admitted = wl.is_admitted();
        let becomes_admitted = status.condition_true(crate::api::kueue::constants::condition::ADMITTED);
        if self.write(api, wl, *status.clone()).await.is_ok() && !was_admitted && becomes_admitted {
            let mut w = (**wl).clone();
            w.status = Some(*status);
            let cq = w.admission().map(|a| a.cluster_queue.clone()).unwrap_or_default();
            self.record_admitted(&w, &cq).await;
        }
    }

    /// Deactivates a workload (`spec.active=false`), marked with why.
    async fn deactivate(
        &self,
        api: &Api<Workload>,
        wl: &Arc<Workload>,
        key: &WorkloadKey,
        why: &str,
        message: String,
    ) {
        if why == reason::ADMISSION_CHECK {
            let r = wl.object_ref(&());
            self.event(
                &r,
                EventType::Warning,
                "AdmissionCheckRejected",
                format!("Deactivated due to {message}"),
            )
            .await;
        }
        if let Some(status) = super::pods_ready::mark_for_deactivation(wl, why, &message, now())
            && self.write(api, wl, status).await.is_err()
        {
            return;
        }
        let patch = serde_json::json!({"spec": {"active": false}});
        if let Err(e) = api
            .patch(&wl.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::debug!(workload = %key, error = %e, "deactivating failed; will retry");
        }
    }

    /// Removes the resource-in-use finalizer.
    async fn remove_finalizer(api: &Api<Workload>, wl: &Arc<Workload>, key: &WorkloadKey) {
        let kept: Vec<String> = wl
            .finalizers()
            .iter()
            .filter(|f| *f != RESOURCE_IN_USE_FINALIZER)
            .cloned()
            .collect();
        let patch =
            serde_json::json!({"metadata": {"finalizers": kept, "resourceVersion": wl.resource_version()}});
        if let Err(e) = api
            .patch(&wl.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::debug!(workload = %key, error = %e, "removing finalizer failed; will retry");
        }
    }

    /// A ClusterQueue, Cohort or ResourceFlavor of the snapshot has another spec in the cache now
    /// (or is gone). A few objects; compared by uid and generation.
    fn quota_moved(&self, snap: &Snapshot) -> bool {
        fn moved<K>(store: &kube::runtime::reflector::Store<K>, objs: &[Arc<K>]) -> bool
        where
            K: kube::Resource<DynamicType = ()> + Clone + 'static,
        {
            objs.iter().any(|o| {
                let m = o.meta();
                let now = store.get(&kube::runtime::reflector::ObjectRef::new(
                    m.name.as_deref().unwrap_or_default(),
                ));
                now.is_none_or(|n| n.meta().uid != m.uid || n.meta().generation != m.generation)
            })
        }
        moved(&self.caches.cluster_queues, &snap.cluster_queues)
            || moved(&self.caches.cohorts, &snap.cohorts)
            || moved(&self.caches.flavors, &snap.flavors)
    }

    /// A refused admission write: the quota was released (`forget`); the workload backs off.
    fn admit_failed(
        &self,
        backoff: &mut WriteBackoff,
        key: &WorkloadKey,
        cq: &str,
        e: &kube::Error,
        object: &ObjectReference,
    ) {
        let permanent = write_backoff::is_permanent(e);
        let (failures, delay) = backoff.failed(key, permanent, Instant::now());
        if permanent && failures == 1 {
            // Reported once per streak: retrying the same write cannot succeed.
            tracing::warn!(workload = %key, error = %e, retry_in = ?delay, "admission write refused; quota released");
            let note = format!(
                "Admission to ClusterQueue {cq} could not be written: {e}; quota released, retrying in {}s",
                delay.as_secs()
            );
            self.recorder.publish(
                Event {
                    type_: EventType::Warning,
                    reason: "AdmissionWriteFailed".to_string(),
                    note: Some(note),
                    action: "AdmissionWriteFailed".to_string(),
                    secondary: None,
                },
                object.clone(),
            );
        } else {
            tracing::info!(workload = %key, error = %e, failures, retry_in = ?delay, "admission write failed; quota released");
        }
    }

    /// Kueue's quota-reservation counter and wait time, per ClusterQueue and LocalQueue.
    fn record_reservation(&self, wl: &Workload, cq: &str) {
        let m = &self.metrics;
        let pc = priority_class(wl);
        let waited = now().duration_since(queued_since(wl)).as_secs_f64().max(0.0);
        let l = m.cq_priority(cq, &pc);
        m.quota_reserved_workloads_total.get_or_create(&l).inc();
        m.quota_reserved_wait_time_seconds
            .get_or_create(&l)
            .observe(waited);
        if let Some((ns, lq)) = queue_status::local_queue_key(wl) {
            let l = m.lq_priority(&ns, &lq, &pc);
            m.local_queue_quota_reserved_workloads_total
                .get_or_create(&l)
                .inc();
            m.local_queue_quota_reserved_wait_time_seconds
                .get_or_create(&l)
                .observe(waited);
        }
    }

    /// `wl` (as written) just became Admitted: Kueue's admission counter, its wait since queued, the
    /// admission checks' wait since the reservation (0 without checks: the same write), and the
    /// `Admitted` event.
    async fn record_admitted(&self, wl: &Workload, cq: &str) {
        let m = &self.metrics;
        let pc = priority_class(wl);
        let t = now();
        let waited = t.duration_since(queued_since(wl)).as_secs_f64().max(0.0);
        let reserved_at = wl
            .status
            .as_ref()
            .and_then(|s| s.condition(crate::api::kueue::constants::condition::QUOTA_RESERVED))
            .map_or(t, |c| c.last_transition_time.0);
        let checks_wait = t.duration_since(reserved_at).as_secs_f64().max(0.0);
        let l = m.cq_priority(cq, &pc);
        m.admitted_workloads_total.get_or_create(&l).inc();
        m.admission_wait_time_seconds.get_or_create(&l).observe(waited);
        m.admission_checks_wait_time_seconds
            .get_or_create(&l)
            .observe(checks_wait);
        if let Some((ns, lq)) = queue_status::local_queue_key(wl) {
            let l = m.lq_priority(&ns, &lq, &pc);
            m.local_queue_admitted_workloads_total.get_or_create(&l).inc();
            m.local_queue_admission_wait_time_seconds
                .get_or_create(&l)
                .observe(waited);
            m.local_queue_admission_checks_wait_time_seconds
                .get_or_create(&l)
                .observe(checks_wait);
        }
        let r = wl.object_ref(&());
        self.event(
            &r,
            EventType::Normal,
            reason::ADMITTED,
            format!("Admitted by ClusterQueue {cq}, wait time since reservation was {checks_wait:.0}s"),
        )
        .await;
    }

    async fn record_eviction(&self, wl: &Workload, cause: &EvictionCause) {
        let cq = wl
            .admission()
            .map(|a| a.cluster_queue.clone())
            .unwrap_or_default();
        let m = &self.metrics;
        let priority_class = priority_class(wl);
        let underlying_cause = conditions::underlying_cause(wl, cause.by);
        let labels = crate::admission::metrics::EvictedLabels {
            cluster_queue: cq.clone(),
            reason: cause.by.reason().to_string(),
            underlying_cause: underlying_cause.clone(),
            priority_class: priority_class.clone(),
            replica_role: m.role(),
        };
        m.evicted_workloads_total.get_or_create(&labels).inc();
        // Kueue counts a workload's first eviction once; one never evicted before has no Evicted
        // condition at all.
        if wl.status.as_ref().is_none_or(|s| {
            s.condition(crate::api::kueue::constants::condition::EVICTED)
                .is_none()
        }) {
            m.evicted_workloads_once_total.get_or_create(&labels).inc();
        }
        if let Some((ns, lq)) = queue_status::local_queue_key(wl) {
            m.local_queue_evicted_workloads_total
                .get_or_create(&crate::admission::metrics::LqEvictedLabels {
                    name: lq,
                    namespace: ns,
                    reason: cause.by.reason().to_string(),
                    underlying_cause,
                    priority_class,
                    replica_role: m.role(),
                })
                .inc();
        }
        let r = wl.object_ref(&());
        if let Some(pr) = cause.by.preempted_reason() {
            self.metrics
                .preempted_workloads_total
                .get_or_create(&crate::admission::metrics::PreemptedLabels {
                    preempting_cluster_queue: cq,
                    reason: pr.to_string(),
                    replica_role: self.metrics.role(),
                })
                .inc();
            self.event(&r, EventType::Normal, reason::PREEMPTED, cause.message.clone())
                .await;
        }
        self.event(
            &r,
            EventType::Normal,
            &format!("EvictedDueTo{}", cause.by.reason()),
            cause.message.clone(),
        )
        .await;
    }

    /// Replaces the status at the cached resourceVersion. A conflict means the cache is behind: the
    /// next step sees the new object and decides again.
    async fn write(
        &self,
        api: &Api<Workload>,
        wl: &Workload,
        status: WorkloadStatus,
    ) -> Result<(), kube::Error> {
        self.write_version(api, wl, status).await.map(|_| ())
    }

    /// Writes the status; returns the version it made.
    async fn write_version(
        &self,
        api: &Api<Workload>,
        wl: &Workload,
        status: WorkloadStatus,
    ) -> Result<String, kube::Error> {
        let mut obj = wl.clone();
        obj.status = Some(status);
        match api
            .replace_status(&wl.name_any(), &PostParams::default(), &obj)
            .await
        {
            Ok(w) => Ok(w.resource_version().unwrap_or_default()),
            Err(e) => {
                tracing::debug!(workload = %wl.name_any(), error = %e, "status write failed; will retry");
                Err(e)
            }
        }
    }

    /// Brings `spec.priority` of workloads to their WorkloadPriorityClass's current value. A
    /// conflict is left to the next cycle, which sees the fresh workload.
    async fn write_priorities(&self, snap: &Snapshot) {
        for (wl, value) in super::priorities::stale(snap) {
            let api = wl_api(&self.client, &key_of(wl));
            let patch = serde_json::json!({"metadata": {"resourceVersion": wl.resource_version()}, "spec": {"priority": value}});
            if let Err(e) = api
                .patch(&wl.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                tracing::debug!(workload = %wl.name_any(), error = %e, "priority update failed; will retry");
            }
        }
    }

    /// Adds Kueue's resource-in-use finalizer to a live ClusterQueue, ResourceFlavor or
    /// AdmissionCheck, and releases a deleted one's once nothing uses it: `in_use` asks the caches,
    /// and a release is confirmed against the API server first. The caches are one store per kind,
    /// so the store that saw a flavor's deletion can be ahead of the one that has not yet seen the
    /// ClusterQueue naming it; a release is final, so it waits for a read that cannot lag.
    async fn sync_finalizer<K>(&self, obj: &K, in_use: impl FnOnce() -> bool, user: User<'_>)
    where
        K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let meta = obj.meta();
        let in_use = meta.deletion_timestamp.is_some() && in_use();
        let Some(change) = finalizers::decide(meta, in_use) else {
            return;
        };
        if change == finalizers::Change::Remove {
            match in_use_live(&self.client, user).await {
                Ok(false) => {}
                Ok(true) => return,
                Err(e) => {
                    tracing::debug!(kind = %K::kind(&()), name = %obj.name_any(), error = %e, "in-use check failed; will retry");
                    return;
                }
            }
        }
        let kept = finalizers::apply(meta, change);
        let patch =
            serde_json::json!({"metadata": {"finalizers": kept, "resourceVersion": obj.resource_version()}});
        let api: Api<K> = Api::all(self.client.clone());
        if let Err(e) = api
            .patch(&obj.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::debug!(kind = %K::kind(&()), name = %obj.name_any(), error = %e, "finalizer update failed; will retry");
        }
    }

    /// Kueue's AdmissionCheck controller (the resource-in-use finalizer, held while a ClusterQueue
    /// names the check), and the built-in check's controller marking its checks Active.
    async fn write_admission_checks(&self, snap: &Snapshot, t: jiff::Timestamp) {
        let api: Api<crate::api::kueue::AdmissionCheck> = Api::all(self.client.clone());
        for ac in &snap.admission_checks {
            let name = ac.name_any();
            self.sync_finalizer(
                ac.as_ref(),
                || {
                    snap.cluster_queues
                        .iter()
                        .any(|cq| super::checks::cluster_queue_checks(cq).contains_key(&name))
                },
                User::AdmissionCheck(&name),
            )
            .await;
            if ac.spec.controller_name != crate::api::kueue::admission_check::AUTO_READY_CONTROLLER
                || ac.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            if let Some(status) = super::checks::auto_ready_active(ac, t) {
                let mut obj = (**ac).clone();
                obj.status = Some(status);
                if let Err(e) = api.replace_status(&name, &PostParams::default(), &obj).await {
                    tracing::debug!(admission_check = %name, error = %e, "status write failed; will retry");
                }
            }
        }
    }

    /// `gauges`: also recompute the queue gauges (a pass over every workload of the snapshot).
    async fn write_queue_status(&self, state: &AdmissionState, snap: &Snapshot, gauges: bool) {
        let t = now();
        let flavors: BTreeSet<String> = snap
            .flavors
            .iter()
            .filter_map(|f| f.metadata.name.clone())
            .collect();
        let mut active: HashMap<String, bool> = HashMap::new();
        let mut cores: HashMap<String, crate::queue::ClusterQueueStatus> = HashMap::new();
        let cq_api: Api<ClusterQueue> = Api::all(self.client.clone());
        let known_checks = super::checks::known_checks(snap.admission_checks.iter().map(|c| c.as_ref()));
        for cq in &snap.cluster_queues {
            let name = cq.name_any();
            let core = state.core.cluster_queue_status(&name);
            let check_problems = super::checks::cluster_queue_problems(cq, &known_checks);
            self.sync_finalizer(
                cq.as_ref(),
                || {
                    core.as_ref().is_some_and(|c| c.reserving_workloads > 0)
                        || finalizers::cluster_queue_in_use(&name, snap.workloads.iter().map(|w| w.as_ref()))
                },
                User::ClusterQueue(&name),
            )
            .await;
            let (ok, ..) = queue_status::cluster_queue_active(
                cq,
                &flavors,
                &check_problems,
                core.as_ref().and_then(|c| c.inactive.as_deref()),
            );
            active.insert(name.clone(), ok);
            let share = state.core.cluster_queue_share(&name);
            if let Some(status) =
                queue_status::cluster_queue(cq, core.as_ref(), &flavors, &check_problems, t, share)
            {
                let mut obj = (**cq).clone();
                obj.status = Some(status);
                if let Err(e) = cq_api.replace_status(&name, &PostParams::default(), &obj).await {
                    tracing::debug!(cluster_queue = %name, error = %e, "status write failed; will retry");
                }
            }
            if let Some(c) = core {
                cores.insert(name, c);
            }
        }
        for f in &snap.flavors {
            let name = f.name_any();
            self.sync_finalizer(
                f.as_ref(),
                || finalizers::flavor_in_use(&name, snap.cluster_queues.iter().map(|c| c.as_ref())),
                User::Flavor(&name),
            )
            .await;
        }
        self.write_admission_checks(snap, t).await;
        if gauges {
            super::admission_fair_sharing::report_usage(&self.metrics, &state.core);
            super::queue_metrics::report(
                &self.metrics,
                super::queue_metrics::gauges(snap, &cores, &active, state, self.metrics.role()),
            );
        }
        let cohort_api: Api<Cohort> = Api::all(self.client.clone());
        for co in &snap.cohorts {
            if let Some(status) = queue_status::cohort(co, state.core.cohort_share(&co.name_any())) {
                let mut obj = (**co).clone();
                obj.status = Some(status);
                if let Err(e) = cohort_api
                    .replace_status(&co.name_any(), &PostParams::default(), &obj)
                    .await
                {
                    tracing::debug!(cohort = %co.name_any(), error = %e, "status write failed; will retry");
                }
            }
        }
        // Keys borrowed from the snapshot: grouping every workload allocates no key.
        let mut by_lq: HashMap<(&str, &str), Vec<&Workload>> = HashMap::new();
        for wl in &snap.workloads {
            if let Some(q) = wl.spec.queue_name.as_deref().filter(|q| !q.is_empty()) {
                by_lq
                    .entry((wl.metadata.namespace.as_deref().unwrap_or_default(), q))
                    .or_default()
                    .push(wl);
            }
        }
        for lq in &snap.local_queues {
            let ns = lq.namespace().unwrap_or_default();
            let cq_name = lq.spec.cluster_queue();
            let cq = snap
                .cluster_queues
                .iter()
                .find(|c| c.name_any() == cq_name)
                .map(|c| c.as_ref());
            let wls = by_lq
                .get(&(ns.as_str(), lq.metadata.name.as_deref().unwrap_or_default()))
                .map(Vec::as_slice)
                .unwrap_or_default();
            let desired =
                queue_status::local_queue(lq, cq, active.get(cq_name).copied().unwrap_or(false), wls, t);
            if let Some(status) = super::admission_fair_sharing::status(lq, desired, &state.core) {
                let api: Api<LocalQueue> = Api::namespaced(self.client.clone(), &ns);
                let mut obj = (**lq).clone();
                obj.status = Some(status);
                if let Err(e) = api
                    .replace_status(&lq.name_any(), &PostParams::default(), &obj)
                    .await
                {
                    tracing::debug!(local_queue = %lq.name_any(), error = %e, "status write failed; will retry");
                }
            }
        }
    }
}

/// Writes the admission. On a conflict, re-reads once: if the workload is exactly as the decision saw
/// it (spec and status; only its resourceVersion moved), the same admission is written on the fresh
/// object; otherwise the error stands and the next cycle decides again on the fresh state (a status
/// change such as a requeue backoff can make the workload ineligible).
async fn admit_with_retry(
    api: &Api<Workload>,
    wl: &Workload,
    admission: crate::api::kueue::Admission,
    checks: &BTreeSet<String>,
    own: &super::own_writes::OwnWrites,
) -> Result<Workload, kube::Error> {
    let mut obj = wl.clone();
    obj.status = Some(conditions::admitted_with_checks(
        wl,
        admission.clone(),
        checks,
        now(),
    ));
    match api
        .replace_status(&wl.name_any(), &PostParams::default(), &obj)
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let fresh = api.get(&wl.name_any()).await?;
            // The fresh copy differs only by our own pending write over the cached one (the
            // watch has not delivered it yet): nothing anyone else decided is overwritten.
            let cached = wl.resource_version().unwrap_or_default();
            let ours = fresh
                .resource_version()
                .is_some_and(|v| v != cached && own.version_for(&key_of(wl), &cached) == v);
            let same = fresh.metadata.generation == wl.metadata.generation
                && fresh.spec == wl.spec
                && (fresh.status == wl.status || ours);
            if !same
                || fresh.admission().is_some()
                || fresh.metadata.deletion_timestamp.is_some()
                || fresh.is_finished()
            {
                return Err(kube::Error::Api(s));
            }
            let mut obj = fresh.clone();
            obj.status = Some(conditions::admitted_with_checks(&fresh, admission, checks, now()));
            api.replace_status(&fresh.name_any(), &PostParams::default(), &obj)
                .await
        }
        other => other,
    }
}

/// Whether `user` is still in use, read from the API server rather than the caches.
pub(crate) async fn in_use_live(client: &Client, user: User<'_>) -> Result<bool, kube::Error> {
    let list = kube::api::ListParams::default();
    Ok(match user {
        User::ClusterQueue(name) => {
            let wls = Api::<Workload>::all(client.clone()).list(&list).await?;
            finalizers::cluster_queue_in_use(name, wls.items.iter())
        }
        User::Flavor(name) => {
            let cqs = Api::<ClusterQueue>::all(client.clone()).list(&list).await?;
            finalizers::flavor_in_use(name, cqs.items.iter())
        }
        User::AdmissionCheck(name) => {
            let cqs = Api::<ClusterQueue>::all(client.clone()).list(&list).await?;
            cqs.items
                .iter()
                .any(|cq| super::checks::cluster_queue_checks(cq).contains_key(name))
        }
    })
}

/// What a resource-in-use finalizer guards, by name: the users to look for before releasing it.
#[derive(Clone, Copy)]
pub(crate) enum User<'a> {
    /// Workloads holding quota in this ClusterQueue.
    ClusterQueue(&'a str),
    /// ClusterQueues referencing this ResourceFlavor.
    Flavor(&'a str),
    /// ClusterQueues naming this AdmissionCheck.
    AdmissionCheck(&'a str),
}

/// A pending reason the scheduler gives after trying to admit (not "not evaluated yet", nor a
/// workload held out of the queue).
fn scheduler_verdict(reason: &str) -> bool {
    use crate::queue::PendingReason as R;
    [
        R::NoMatchingFlavor,
        R::WaitingForQuota,
        R::ExceedsMaxQuota,
        R::WaitingForPreemptedWorkloads,
    ]
    .iter()
    .any(|r| r.as_str() == reason)
}
