//! One Workload of the snapshot taken into the admission core: what the API shows of it (its class)
//! held against what the loop has assumed, is evicting or has shown, and the writes its case needs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Weak};

use super::action::Action;
use super::classify::{Class, Seen};
use super::conditions::{EvictionCause, is_evicted};
use super::explanations::Explanations;
use super::pods_ready;
use super::slices::{counted_pods, genuine_replacement, may_name_running};
use super::snapshot::Snapshot;
use super::snapshot::rv;
use super::unchanged::Unchanged;
use super::unconfirmed::Unconfirmed;
use crate::api::conditions::TRUE;
use crate::api::kueue::config::{PodsReadyConfig, RequeuingTimestamp};
use crate::api::kueue::constants::{condition, reason};
use crate::api::kueue::{Workload, WorkloadStatus};
use crate::queue::{AdmissionCore, PendingReason, QueueError, WorkloadKey, WorkloadModel, convert};

/// What `Class::Reserved` carries: the Workload is evicted, a job owns it, a cause to stop it, and
/// a rejecting admission check's message.
struct Reserved {
    evicted: bool,
    owned: bool,
    stop: Option<EvictionCause>,
    rejected: Option<String>,
}

/// The Workload in the core's model, in `cluster_queue` and with its namespace's labels: the one
/// place a step converts a Workload.
fn model(wl: &Workload, cluster_queue: &str, snap: &Snapshot) -> Result<WorkloadModel, QueueError> {
    let labels = namespace_labels(snap, wl.metadata.namespace.as_deref().unwrap_or_default());
    let mut m = convert::workload_model(wl, cluster_queue, labels)?;
    if let Some(k) = m.replacement_for.clone() {
        let replaced = snap
            .workloads
            .iter()
            .find(|w| {
                w.metadata.namespace.as_deref() == Some(k.namespace.as_str())
                    && w.metadata.name.as_deref() == Some(k.name.as_str())
            })
            .map(|w| w.as_ref());
        // A slice of another job (or of none the API shows) is not replaced: this one is a
        // workload of its own, at its full size.
        if !replaced.is_some_and(|r| genuine_replacement(wl, r)) {
            if replaced.is_some() {
                tracing::debug!(workload = %m.key, replaces = %k, "not a slice of the same job; taken as a workload of its own");
            }
            m.replacement_for = None;
        }
        // Running pods are counted where they are, unchecked: only a real replacement may name them.
        if !may_name_running(wl, replaced) {
            m.podsets.iter_mut().for_each(|ps| ps.running = None);
        }
    }
    Ok(m)
}

fn namespace_labels(snap: &Snapshot, ns: &str) -> BTreeMap<String, String> {
    // A real API server always sets this label; the embedded one may not have a Namespace object.
    let mut l = snap.namespaces.get(ns).cloned().unwrap_or_default();
    l.entry("kubernetes.io/metadata.name".to_string())
        .or_insert_with(|| ns.to_string());
    l
}

/// A fingerprint of a namespace's labels, to notice a relabelling without copying them every cycle.
fn labels_fingerprint(snap: &Snapshot, ns: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    snap.namespaces.get(ns).hash(&mut h);
    h.finish()
}

/// One step's intake of the snapshot's Workloads: the parts of the admission state they are taken
/// into, the step's time, and the writes they need.
pub(super) struct Intake<'a> {
    pub(super) core: &'a mut AdmissionCore,
    pub(super) unconfirmed: &'a mut Unconfirmed,
    pub(super) explanations: &'a mut Explanations,
    /// Finished Workloads already dropped from the core (`AdmissionState::settled`).
    pub(super) settled: &'a mut HashMap<usize, Weak<Workload>>,
    /// The Workloads read before (`unchanged.rs`): what this intake read is recorded there.
    pub(super) unchanged: &'a mut Unchanged,
    /// waitForPodsReady, when on.
    pub(super) pods_ready: Option<&'a PodsReadyConfig>,
    /// The earliest PodsReady timeout and delayed built-in check, for the loop's timer.
    pub(super) pods_ready_deadline: &'a mut Option<i64>,
    pub(super) checks_deadline: &'a mut Option<i64>,
    pub(super) now_ms: i64,
    pub(super) actions: &'a mut Vec<Action>,
}

impl Intake<'_> {
    /// Brings the core in line with every Workload the step read (`take`), and drops the ones the
    /// snapshot no longer holds. `full`: the step read every Workload (none skipped as unchanged).
    pub(super) fn all(&mut self, seen: Vec<(&Arc<Workload>, Seen)>, snap: &Snapshot, full: bool) {
        let mut present: HashSet<(&str, &str)> = HashSet::new();
        for read in seen {
            let wl = read.0;
            present.insert((
                wl.metadata.namespace.as_deref().unwrap_or_default(),
                wl.metadata.name.as_deref().unwrap_or_default(),
            ));
            let settles = matches!(
                read.1.class,
                Class::Gone {
                    remove_finalizer: false
                }
            ) && wl.metadata.deletion_timestamp.is_none();
            if let Some(at) = read.1.due {
                *self.checks_deadline = Some(self.checks_deadline.map_or(at, |d| d.min(at)));
            }
            let (key, stable) = (
                read.1.key.clone(),
                Unchanged::candidate(&read.1, self.pods_ready.is_some()),
            );
            let pushed = self.actions.len();
            self.take(wl, read.1, snap);
            if settles {
                self.settled.insert(Arc::as_ptr(wl) as usize, Arc::downgrade(wl));
            } else {
                let pushed = self.actions.len() > pushed;
                self.unchanged
                    .record(wl, key, stable.filter(|_| !pushed), self.unconfirmed, &*self.core);
            }
        }
        let gone = self.unchanged.finish();
        if !full {
            // Only objects the snapshot no longer holds can have vanished.
            for k in gone {
                if self.core.knows(&k) && !present.contains(&(k.namespace.as_str(), k.name.as_str())) {
                    self.drop_workload(&k);
                }
            }
            return;
        }
        // Only the vanished ones are copied: this runs over every workload every cycle.
        let known: Vec<WorkloadKey> = self
            .core
            .known_keys()
            .filter(|k| !present.contains(&(k.namespace.as_str(), k.name.as_str())))
            .cloned()
            .collect();
        for k in known {
            self.drop_workload(&k);
        }
    }

    /// Brings the core in line with one Workload's case and pushes the writes it needs. Its
    /// admission check states (and `Admitted`) to write first, if they changed; as in Kueue's
    /// workload controller, nothing else is decided for it until that write shows.
    fn take(&mut self, wl: &Workload, seen: Seen, snap: &Snapshot) {
        let Seen {
            key,
            class,
            holds_quota,
            checks,
            penalty_home,
            ..
        } = seen;
        if !matches!(class, Class::Gone { .. } | Class::Replaced { .. }) {
            self.core.retain_entry_penalty(&key, penalty_home.as_ref());
        }
        let waiting = match class {
            Class::Gone { remove_finalizer } => {
                if remove_finalizer {
                    self.actions.push(Action::RemoveFinalizer { key: key.clone() });
                }
                // Being deleted, it holds its quota until it is gone (`Seen::holds_quota`).
                if holds_quota {
                    self.account_reserved(&key, wl, snap);
                    return;
                }
                self.drop_workload(&key);
                return;
            }
            Class::Replaced { by, finish } => {
                self.drop_workload(&key);
                if finish {
                    self.actions.push(Action::FinishSlice { key, replaced_by: by });
                }
                return;
            }
            Class::Reserved {
                evicted,
                owned,
                stop,
                rejected,
            } => {
                let reserved = Reserved {
                    evicted,
                    owned,
                    stop,
                    rejected,
                };
                self.take_reserved(key, wl, reserved, checks, snap);
                return;
            }
            waiting => waiting,
        };
        self.take_unreserved(key, wl, waiting, checks, snap);
    }

    /// A Workload the API shows reserved: counted in the core, then (first match) its check states
    /// written, deactivated when a check rejected it, its eviction completed or released, or evicted
    /// for a cause (a pending eviction, a stop, or its PodsReady timeout).
    fn take_reserved(
        &mut self,
        key: WorkloadKey,
        wl: &Workload,
        Reserved {
            evicted,
            owned,
            stop,
            rejected,
        }: Reserved,
        checks: Option<WorkloadStatus>,
        snap: &Snapshot,
    ) {
        self.unconfirmed.assumed.remove(&key);
        self.account_reserved(&key, wl, snap);
        // Admitted (its checks passed), not merely reserved: the fair-sharing entry penalty
        // is settled. A deactivated workload is not charged (Kueue: deactivation wins).
        if wl.is_admitted() && super::conditions::is_active(wl) {
            self.core.settle_admission(&key, self.now_ms);
        }
        if let Some(status) = checks {
            self.actions.push(Action::Checks {
                key,
                status: Box::new(status),
            });
            return;
        }
        if let Some(message) = rejected
            && !evicted
        {
            self.actions.push(Action::Deactivate {
                key,
                reason: reason::ADMISSION_CHECK,
                message,
            });
            return;
        }
        let stop = match stop {
            None if !evicted => self.pods_ready_timeout(&key, wl),
            stop => stop,
        };
        if evicted {
            self.core.mark_evicting(&key);
            self.unconfirmed.evicting.remove(&key);
            if !owned {
                self.actions.push(Action::ClearReservation { key });
            }
        } else if let Some(cause) = self.unconfirmed.evicting.get(&key).cloned().or(stop) {
            self.unconfirmed.evicting.insert(key.clone(), cause.clone());
            self.actions.push(Action::Evict {
                key,
                cause,
                clear: !owned,
            });
        }
    }

    /// A Workload the API shows not reserved (held, backing off, to be requeued, or queued):
    /// left alone while its admission is being written, its check states written first, any
    /// reservation the core still counts released, then the write or queueing its case needs.
    fn take_unreserved(
        &mut self,
        key: WorkloadKey,
        wl: &Workload,
        waiting: Class,
        checks: Option<WorkloadStatus>,
        snap: &Snapshot,
    ) {
        // Not reserved in the API. An admission being written is left alone until it shows.
        if self.unconfirmed.assumed.contains(&key) {
            return;
        }
        if let Some(status) = checks {
            // Queued again once the write shows (a new resourceVersion).
            self.unqueue(&key);
            self.actions.push(Action::Checks {
                key,
                status: Box::new(status),
            });
            return;
        }
        self.unconfirmed.evicting.remove(&key);
        if self.core.is_admitted(&key) {
            self.core.release(&key);
        }
        match waiting {
            Class::Held {
                why: (reason, message),
            } => {
                self.unqueue(&key);
                self.actions.push(Action::Pending { key, reason, message });
            }
            Class::Waiting => self.unqueue(&key),
            // Kept out of the queue until requeueAt, then released by the write.
            Class::Backoff { elapsed } => {
                self.unqueue(&key);
                if elapsed {
                    self.actions.push(Action::BackoffFinished { key });
                }
            }
            // Queued once the API shows Requeued=True (the write changes the resourceVersion).
            Class::Release { reason, message } => {
                self.unqueue(&key);
                self.actions.push(Action::Requeue {
                    key,
                    reason: reason.into(),
                    message: message.into(),
                });
            }
            Class::Queue { cluster_queue } => self.queue(key, wl, &cluster_queue, snap),
            Class::Gone { .. } | Class::Replaced { .. } | Class::Reserved { .. } => {}
        }
    }

    /// Queues a Workload into the core once per resourceVersion (and namespace labels); one the
    /// core cannot model is shown pending as misconfigured.
    fn queue(&mut self, key: WorkloadKey, wl: &Workload, cluster_queue: &str, snap: &Snapshot) {
        // The namespace's labels count too: relabelling a namespace requeues its
        // workloads, as Kueue does on namespace events.
        let seen = (rv(&wl.metadata), labels_fingerprint(snap, &key.namespace));
        if self.unconfirmed.queued_rv.get(&key) == Some(&seen) {
            return;
        }
        self.unconfirmed.queued_rv.insert(key.clone(), seen);
        let converted = model(wl, cluster_queue, snap);
        match shown_pending(wl) {
            Some(said) => self.unconfirmed.shown.insert(key.clone(), said),
            None => self.unconfirmed.shown.remove(&key),
        };
        let order = self.pods_ready.and_then(|c| queue_order_ms(wl, c));
        let added = converted.and_then(|mut m| {
            if let Some(t) = order {
                m.timestamp = t;
            }
            self.core.add_workload(m)
        });
        if let Err(e) = added {
            self.actions.push(Action::Pending {
                key,
                reason: PendingReason::Misconfigured,
                message: e.to_string(),
            });
        }
    }

    /// waitForPodsReady on a reserved workload not being evicted: the eviction past its timeout, a
    /// deactivation past `backoffLimitCount`, or its deadline kept for the loop's timer.
    fn pods_ready_timeout(&mut self, key: &WorkloadKey, wl: &Workload) -> Option<EvictionCause> {
        match pods_ready::verdict(wl, self.pods_ready?, self.now_ms) {
            pods_ready::Verdict::Fine => None,
            pods_ready::Verdict::Until(at) => {
                *self.pods_ready_deadline = Some(self.pods_ready_deadline.map_or(at, |d| d.min(at)));
                None
            }
            pods_ready::Verdict::Evict(cause) => Some(cause),
            pods_ready::Verdict::Deactivate => {
                self.actions.push(Action::Deactivate {
                    key: key.clone(),
                    reason: reason::REQUEUING_LIMIT_EXCEEDED,
                    message: pods_ready::LIMIT_EXCEEDED_MESSAGE.to_string(),
                });
                None
            }
        }
    }

    /// Counts a workload the API shows reserved: recorded when the core does not know it (after
    /// a restart, or admitted by another writer), shrunk when its elastic slice was scaled down.
    fn account_reserved(&mut self, key: &WorkloadKey, wl: &Workload, snap: &Snapshot) {
        let Some(a) = wl.admission() else {
            return;
        };
        if !self.core.is_admitted(key) {
            let admitted = model(wl, &a.cluster_queue, snap)
                .and_then(|m| Ok((m, convert::admission_model(a)?)))
                .and_then(|(m, am)| self.core.record_admitted(m, am, self.now_ms));
            if let Err(e) = admitted {
                tracing::warn!(workload = %key, error = %e, "cannot account an admitted workload");
            }
        }
        // What it holds: the floor its job keeps when preemption takes its growth (one whose
        // growth was taken before a restart is held until its job has shrunk it back), and, as in
        // Kueue, the usage to count when it is less than status.admission (immutable) holds: the
        // smaller spec counts or the pods not reclaimable, so the difference is free at once.
        let floor = super::slices::growth_floor(wl);
        let growth_preempted = super::slices::growth_preempted(wl);
        let counted = if is_evicted(wl) { None } else { counted_pods(wl) };
        self.core.set_floor(key, floor.as_ref());
        if growth_preempted {
            self.core.mark_taking_growth(key);
        }
        if let Some(counted) = counted
            && !self.core_counts_match(key, &counted)
            && let Err(e) = model(&counted, &a.cluster_queue, snap).and_then(|m| self.core.shrink_admitted(m))
        {
            tracing::warn!(workload = %key, error = %e, "cannot shrink an admitted workload");
        }
    }

    /// The core already counts the workload's spec pod counts (a shrink was applied).
    fn core_counts_match(&self, key: &WorkloadKey, wl: &Workload) -> bool {
        let Some(a) = self.core.admission(key) else {
            return false;
        };
        wl.spec.pod_sets.iter().all(|ps| {
            let name = ps
                .name
                .as_deref()
                .unwrap_or(crate::api::kueue::constants::DEFAULT_PODSET_NAME);
            a.pod_set_assignments
                .iter()
                .any(|p| p.name == name && p.count == i64::from(ps.count.unwrap_or(1)))
        })
    }

    fn unqueue(&mut self, key: &WorkloadKey) {
        self.unconfirmed.shown.remove(key);
        self.explanations.remove(key);
        self.unconfirmed.queued_rv.remove(key);
        if !self.core.is_admitted(key) {
            self.core.delete_workload(key);
        }
    }

    fn drop_workload(&mut self, key: &WorkloadKey) {
        self.unconfirmed.shown.remove(key);
        self.explanations.remove(key);
        self.unconfirmed.queued_rv.remove(key);
        self.unconfirmed.assumed.remove(key);
        self.unconfirmed.evicting.remove(key);
        self.core.retain_entry_penalty(key, None);
        self.core.delete_workload(key);
    }
}

/// The fingerprint of the pending status `wl` shows, when it shows all of it (QuotaReserved=False,
/// Admitted=False/NoReservation and `status.resourceRequests`, no admission): what `pending` would
/// leave unwritten.
fn shown_pending(wl: &Workload) -> Option<u64> {
    let st = wl.status.as_ref()?;
    if st.admission.is_some() || st.resource_requests.is_empty() {
        return None;
    }
    let no_reservation = st.conditions.iter().any(|c| {
        c.type_ == condition::ADMITTED
            && c.status == crate::api::conditions::FALSE
            && c.reason == reason::NO_RESERVATION
            && c.message == super::conditions::NO_RESERVATION_MESSAGE
    });
    let qr = st.condition(condition::QUOTA_RESERVED)?;
    (no_reservation && qr.status == crate::api::conditions::FALSE)
        .then(|| super::conditions::pending_fingerprint(&qr.reason, &qr.message))
}

/// The queue-order time (ms) of a workload requeued after a PodsReady timeout, under the `Eviction`
/// timestamp: its eviction, so it goes behind those already waiting. `None`: its creation.
fn queue_order_ms(wl: &Workload, cfg: &PodsReadyConfig) -> Option<i64> {
    if cfg.timestamp != RequeuingTimestamp::Eviction {
        return None;
    }
    let c = wl.status.as_ref()?.condition(condition::EVICTED)?;
    (c.status == TRUE && c.reason == reason::PODS_READY_TIMEOUT)
        .then(|| c.last_transition_time.0.as_millisecond())
}
