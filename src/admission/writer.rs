//! The cycle's writes to Workloads, Kueue's scheduler and workload controller writing back what the
//! admission state decided: admit (with the cache's retry on a conflict), evict, take growth, pending,
//! admission checks, deactivate, the finalizer, and the metrics and events each write records.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use std::time::Instant;

use crate::kit::events::QueuedRecorder;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Client, Resource, ResourceExt};

use super::conditions::{self, EvictionCause};
use super::own_writes::OwnWrites;
use super::quota_seen::QuotaSeen;
use super::sync::{Action, AdmissionState, key_of};
use super::write_backoff::{self, WriteBackoff};
use super::write_metrics;
use crate::admission::metrics::Metrics;
use crate::api::kueue::constants::{RESOURCE_IN_USE_FINALIZER, reason};
use crate::api::kueue::{Workload, WorkloadStatus};
use crate::queue::{PendingReason, WorkloadKey, convert};

/// Writes in flight at once within a cycle (its workload writes, then its queue status writes).
pub(super) const WRITE_CONCURRENCY: usize = 16;

/// What the writes use of the loop: its client, event recorder, metrics and record of its own writes.
pub(super) struct Writer<'a> {
    pub(super) client: &'a Client,
    pub(super) recorder: &'a QueuedRecorder,
    pub(super) metrics: &'a Metrics,
    pub(super) own_writes: &'a OwnWrites,
}

/// What one write leaves for the loop to remember.
pub(super) enum Outcome {
    Done,
    Admitted(WorkloadKey),
    /// A pending status write failed (`true`: for good, a 4xx other than a conflict): it is written
    /// again once its backoff expires.
    PendingUnwritten(WorkloadKey, bool),
    /// A pending status was written.
    PendingWritten(WorkloadKey),
    /// The workload to admit is no longer in the snapshot.
    Vanished(WorkloadKey),
    /// The admission was decided on a quota that changed before it was written (`QuotaSeen`): not
    /// written.
    Withdrawn(WorkloadKey),
    AdmitFailed {
        key: WorkloadKey,
        cq: String,
        error: Box<kube::Error>,
        object: Box<ObjectReference>,
    },
}

/// The workloads a cycle's actions name.
pub(super) type ByKey = HashMap<WorkloadKey, Arc<Workload>>;

pub(super) fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

pub(super) fn wl_api(client: &Client, key: &WorkloadKey) -> Api<Workload> {
    Api::namespaced(client.clone(), &key.namespace)
}

impl Writer<'_> {
    /// Makes one write. Runs concurrently with the cycle's other writes, so it only reads the state;
    /// what the loop must remember comes back as the outcome. An admission is written only while the
    /// quota it was decided on (`quota`) still stands.
    pub(super) async fn execute(
        &self,
        state: &AdmissionState,
        action: Action,
        by_key: &ByKey,
        quota: QuotaSeen<'_>,
    ) -> Outcome {
        let key = action.key().clone();
        let Some(wl) = by_key.get(&key) else {
            return match action {
                Action::Admit { .. } => Outcome::Vanished(key),
                _ => Outcome::Done,
            };
        };
        let api = wl_api(self.client, &key);
        match action {
            Action::Admit {
                admission,
                replaced,
                checks,
                ..
            } => {
                if quota.moved() {
                    return Outcome::Withdrawn(key);
                }
                return self.admit(wl, key, admission, replaced, checks, quota).await;
            }
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

    /// Writes a quota reservation (and `Admitted` when no check stands between), with its event and
    /// metrics.
    async fn admit(
        &self,
        wl: &Arc<Workload>,
        key: WorkloadKey,
        admission: crate::queue::Admission,
        replaced: Option<WorkloadKey>,
        checks: BTreeSet<String>,
        quota: QuotaSeen<'_>,
    ) -> Outcome {
        let admission = convert::admission_api(&admission);
        let cq = admission.cluster_queue.clone();
        let api = wl_api(self.client, &key);
        let written = admit_with_retry(&api, wl, admission, &checks, self.own_writes, quota).await;
        match written {
            Err(Retry::QuotaMoved) => Outcome::Withdrawn(key),
            Ok(w) => {
                write_metrics::reservation(self.metrics, wl, &cq);
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
            Err(Retry::Failed(error)) => Outcome::AdmitFailed {
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
                super::pods_ready_metrics::record_evicted(self.metrics, &a.cluster_queue, &cause, &evicted);
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
    pub(super) async fn write_pending(
        &self,
        api: &Api<Workload>,
        wl: &Arc<Workload>,
        key: WorkloadKey,
        why: PendingReason,
        message: String,
    ) -> Outcome {
        if let Some(status) = conditions::pending(wl, why.as_str(), &message, now()) {
            return match self.write_version(api, wl, status).await {
                Ok(after) => {
                    // Remembered until the cache shows it: an admission decided on the
                    // copy it replaced may be written over it (`admit_with_retry`).
                    self.own_writes
                        .record(&key, &wl.resource_version().unwrap_or_default(), &after);
                    // Kueue's scheduler says why it could not admit as a Warning `Pending` event
                    // (what `kubectl describe workload` shows first); here once per new reason
                    // or message, not once per cycle.
                    if why.is_scheduler_verdict() {
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

    /// A refused admission write: the quota was released (`forget`); the workload backs off.
    pub(super) fn admit_failed(
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

    /// `wl` (as written) just became Admitted: Kueue's admission metrics and the `Admitted` event.
    async fn record_admitted(&self, wl: &Workload, cq: &str) {
        let checks_wait = write_metrics::admitted(self.metrics, wl, cq);
        let r = wl.object_ref(&());
        self.event(
            &r,
            EventType::Normal,
            reason::ADMITTED,
            format!("Admitted by ClusterQueue {cq}, wait time since reservation was {checks_wait:.0}s"),
        )
        .await;
    }

    /// `wl` is evicted for `cause`: Kueue's eviction (and preemption) metrics and events.
    async fn record_eviction(&self, wl: &Workload, cause: &EvictionCause) {
        write_metrics::eviction(self.metrics, wl, cause);
        let r = wl.object_ref(&());
        if cause.by.preempted_reason().is_some() {
            self.event(&r, EventType::Normal, reason::PREEMPTED, cause.message.clone())
                .await;
        }
        // Kueue v0.20 names a scheduling timeout's cause in the event's reason
        // (`EvictedDueToPodsReadyTimeoutDueToWaitForScheduling`), the other waits' not.
        let mut why = format!("EvictedDueTo{}", cause.by.reason());
        if cause.by == super::conditions::EvictedBy::PodsReadyTimeout
            && super::pods_ready::waiting_in(wl) == reason::WAIT_FOR_SCHEDULING
        {
            why.push_str("DueTo");
            why.push_str(reason::WAIT_FOR_SCHEDULING);
        }
        self.event(&r, EventType::Normal, &why, cause.message.clone())
            .await;
    }

    /// Writes the status (a merge patch of what changed) at the cached resourceVersion. A conflict means the cache is behind: the
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
        match super::status_patch::write(api, wl, &status).await {
            Ok(w) => Ok(w.resource_version().unwrap_or_default()),
            Err(e) => {
                tracing::debug!(workload = %wl.name_any(), error = %e, "status write failed; will retry");
                Err(e)
            }
        }
    }
}

/// Why an admission was not written.
enum Retry {
    Failed(kube::Error),
    /// The quota it was decided on changed while the conflict was re-read.
    QuotaMoved,
}

impl From<kube::Error> for Retry {
    fn from(e: kube::Error) -> Self {
        Retry::Failed(e)
    }
}

/// Writes the admission. On a conflict, re-reads once: if the workload is exactly as the decision saw
/// it (spec and status; only its resourceVersion moved) and the quota it was decided on still stands,
/// the same admission is written on the fresh object; otherwise the error stands and the next cycle
/// decides again on the fresh state (a status change such as a requeue backoff can make the workload
/// ineligible).
async fn admit_with_retry(
    api: &Api<Workload>,
    wl: &Workload,
    admission: crate::api::kueue::Admission,
    checks: &BTreeSet<String>,
    own: &super::own_writes::OwnWrites,
    quota: QuotaSeen<'_>,
) -> Result<Workload, Retry> {
    let status = conditions::admitted_with_checks(wl, admission.clone(), checks, now());
    match super::status_patch::write(api, wl, &status).await {
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
                return Err(Retry::Failed(kube::Error::Api(s)));
            }
            if quota.moved() {
                return Err(Retry::QuotaMoved);
            }
            let status = conditions::admitted_with_checks(&fresh, admission, checks, now());
            Ok(super::status_patch::write(api, &fresh, &status).await?)
        }
        other => Ok(other?),
    }
}
