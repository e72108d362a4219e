//! What each Workload of a snapshot is to the admission loop, decided from the snapshot alone.
//!
//! `classify` is pure: it reads one Workload and the objects around it (its LocalQueue, its
//! ClusterQueue's stop policy, the slices that replace others) and names the case. What the loop
//! then does with each case, given what it has assumed or is evicting, is in `sync.rs`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::admission_fair_sharing::penalty_home;
use super::checks::{self, QueueChecks, Verdict};
use super::conditions::{EvictedBy, EvictionCause, controller_owner, is_active, is_evicted, status_of};
use super::snapshot::{Snapshot, key_of};
use crate::admission::slices::{genuine_replacement, replacement_for};
use crate::api::kueue::constants::RESOURCE_IN_USE_FINALIZER;
use crate::api::kueue::constants::condition;
use crate::api::kueue::{LocalQueue, StopPolicy, Workload, WorkloadStatus};
use crate::queue::admission_fair_sharing::LocalQueueKey;
use crate::queue::{PendingReason, WorkloadKey};

/// One Workload's case.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Class {
    /// Deleted or finished: forgotten. A deleted one still carrying the in-use finalizer loses it.
    Gone { remove_finalizer: bool },
    /// A slice whose successor holds quota: its usage is the successor's. `finish`: the successor is
    /// Admitted, so the slice is to be marked Finished; until then (admission checks still pending)
    /// it stays, admitted, so its job keeps running under it.
    Replaced { by: WorkloadKey, finish: bool },
    /// Quota reserved. `evicted`: the API shows it evicted; `stop`: why it must be evicted now;
    /// `owned`: a job stops it before the reservation is cleared; `rejected`: an admission check
    /// rejected it, and this says which (it is to be deactivated).
    Reserved {
        evicted: bool,
        owned: bool,
        stop: Option<EvictionCause>,
        rejected: Option<String>,
    },
    /// Not reserved, and kept out of the queue; `why` is the pending reason and message to write.
    Held { why: (PendingReason, String) },
    /// Not reserved, kept out of the queue with nothing written: its job has pods to replace first.
    Waiting,
    /// In requeue backoff; `elapsed`: the backoff is over and `BackoffFinished` is to be written.
    Backoff { elapsed: bool },
    /// The cause of a `Requeued=False` is gone: write `Requeued=True` first, then queue.
    Release {
        reason: &'static str,
        message: &'static str,
    },
    /// To be queued in this ClusterQueue.
    Queue { cluster_queue: String },
}

/// What a step reads of one Workload, once: its key and case, the admission check states to write
/// first (`None`: the status already says them), when a delayed built-in check is next due, and the
/// LocalQueue under which its entry penalty can still settle.
pub(super) struct Seen {
    pub(super) key: WorkloadKey,
    pub(super) class: Class,
    /// `Class::Gone` only: it is being deleted and still holds its own quota (see `read`).
    pub(super) holds_quota: bool,
    pub(super) checks: Option<WorkloadStatus>,
    pub(super) due: Option<i64>,
    pub(super) penalty_home: Option<LocalQueueKey>,
}

/// The objects around the Workloads of one snapshot.
pub(super) struct View<'a> {
    snap: &'a Snapshot,
    /// By (namespace, name), borrowed from the snapshot: looking one up allocates nothing.
    local_queues: HashMap<(&'a str, &'a str), &'a LocalQueue>,
    /// Replaced slice -> the slice that holds quota in its place, and whether that one is Admitted.
    replaced: HashMap<WorkloadKey, (WorkloadKey, bool)>,
    /// The admission checks of each ClusterQueue that has some.
    queue_checks: HashMap<&'a str, QueueChecks>,
    /// Every ClusterQueue's name.
    cluster_queues: std::collections::HashSet<&'a str>,
    /// quotagate's built-in checks: name -> delay (s) after the reservation.
    auto_ready: BTreeMap<String, i64>,
}

impl<'a> View<'a> {
    pub(super) fn new(snap: &'a Snapshot) -> Self {
        let local_queues = snap
            .local_queues
            .iter()
            .map(|lq| {
                let ns = lq.metadata.namespace.as_deref().unwrap_or_default();
                ((ns, lq.metadata.name.as_deref().unwrap_or_default()), lq.as_ref())
            })
            .collect();
        let replacing: Vec<(WorkloadKey, &Workload)> = snap
            .workloads
            .iter()
            .filter(|w| w.admission().is_some() && w.has_quota_reservation() && !w.is_finished())
            .filter_map(|w| Some((replacement_for(w)?, w.as_ref())))
            .collect();
        // Only a slice of the same job is replaced (`genuine_replacement`); the index of the
        // snapshot is built only while some slice replaces another.
        let by_key: HashMap<(&str, &str), &Workload> = if replacing.is_empty() {
            HashMap::new()
        } else {
            snap.workloads
                .iter()
                .map(|w| {
                    let m = &w.metadata;
                    (
                        (
                            m.namespace.as_deref().unwrap_or_default(),
                            m.name.as_deref().unwrap_or_default(),
                        ),
                        w.as_ref(),
                    )
                })
                .collect()
        };
        let replaced = replacing
            .into_iter()
            .filter(|(k, w)| {
                by_key
                    .get(&(k.namespace.as_str(), k.name.as_str()))
                    .is_some_and(|r| genuine_replacement(w, r))
            })
            .map(|(k, w)| (k, (key_of(w), w.is_admitted())))
            .collect();
        let queue_checks = snap
            .cluster_queues
            .iter()
            .filter(|q| q.spec.admission_checks_strategy.is_some())
            .map(|q| (q.metadata.name.as_deref().unwrap_or_default(), QueueChecks::of(q)))
            .collect();
        let cluster_queues = snap
            .cluster_queues
            .iter()
            .map(|q| q.metadata.name.as_deref().unwrap_or_default())
            .collect();
        View {
            snap,
            local_queues,
            replaced,
            queue_checks,
            cluster_queues,
            auto_ready: checks::auto_ready_checks(snap.admission_checks.iter().map(|c| c.as_ref())),
        }
    }

    /// Replaced slice -> the slice holding quota in its place, and whether that one is Admitted.
    pub(super) fn replaced(&self) -> Vec<(WorkloadKey, WorkloadKey, bool)> {
        self.replaced
            .iter()
            .map(|(k, (by, admitted))| (k.clone(), by.clone(), *admitted))
            .collect()
    }

    fn local_queue(&self, wl: &Workload) -> Option<&'a LocalQueue> {
        let q = wl.spec.queue_name.as_deref().filter(|q| !q.is_empty())?;
        let ns = wl.metadata.namespace.as_deref().unwrap_or_default();
        self.local_queues.get(&(ns, q)).copied()
    }

    fn cluster_queue_stopped(&self, name: &str) -> bool {
        self.snap
            .cluster_queues
            .iter()
            .find(|q| q.metadata.name.as_deref() == Some(name))
            .is_some_and(|q| q.spec.stop_policy() != StopPolicy::None)
    }

    /// Every Workload of `snap` but those to `skip` (already taken and unchanged), read at `now_ms`.
    pub(super) fn read_all(
        &self,
        snap: &'a Snapshot,
        mut skip: impl FnMut(&Arc<Workload>) -> bool,
        now_ms: i64,
    ) -> Vec<(&'a Arc<Workload>, Seen)> {
        let now = jiff::Timestamp::from_millisecond(now_ms).unwrap_or_else(|_| jiff::Timestamp::now());
        let mut seen = Vec::new();
        for wl in &snap.workloads {
            if !skip(wl) {
                seen.push((wl, self.read(wl, now_ms, now)));
            }
        }
        seen
    }

    /// One Workload, classified, its check states synced, and keyed.
    fn read(&self, wl: &Workload, now_ms: i64, now: jiff::Timestamp) -> Seen {
        let class = self.classify(wl, now_ms);
        let (checks, due) = self.checks_status(wl, &class, now);
        let penalty_home = match class {
            Class::Gone { .. } | Class::Replaced { .. } => None,
            _ => penalty_home(wl),
        };
        let key = key_of(wl);
        // Like Kueue's cache, a Workload being deleted holds its quota until it is gone from the API
        // (its finalizer removed): the API shows it reserved until then, and admitting into that
        // quota first would show the ClusterQueue over it. But not a slice whose replacement holds
        // quota: the replacement's reservation is the chain's (DESIGN I3, I6), and counting both
        // showed the ClusterQueue over its quota, borrowing, with one admitted workload too many.
        let holds_quota = matches!(class, Class::Gone { .. })
            && wl.metadata.deletion_timestamp.is_some()
            && !wl.is_finished()
            && wl.admission().is_some()
            && wl.has_quota_reservation()
            && !self.replaced.contains_key(&key);
        Seen {
            key,
            holds_quota,
            class,
            checks,
            due,
            penalty_home,
        }
    }

    /// The case of `wl` at `now_ms`.
    pub(super) fn classify(&self, wl: &Workload, now_ms: i64) -> Class {
        let deleted = wl.metadata.deletion_timestamp.is_some();
        if deleted || wl.is_finished() {
            let finalizer = wl
                .metadata
                .finalizers
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|f| f == RESOURCE_IN_USE_FINALIZER);
            return Class::Gone {
                remove_finalizer: deleted && finalizer,
            };
        }
        let lq = self.local_queue(wl);
        let lq_stop = lq.and_then(|l| l.spec.stop_policy).unwrap_or_default();
        if wl.admission().is_some() && wl.has_quota_reservation() {
            if let Some(by) = self.replaced.get(&key_of(wl)) {
                return Class::Replaced {
                    by: by.0.clone(),
                    finish: by.1,
                };
            }
            let states = wl
                .status
                .as_ref()
                .map(|s| s.admission_checks.as_slice())
                .unwrap_or_default();
            let evicted = is_evicted(wl);
            let verdict = if evicted { None } else { checks::verdict(states) };
            let stop = if !is_active(wl) {
                Some(EvictionCause {
                    by: EvictedBy::Deactivated,
                    message: super::pods_ready::deactivated_message(wl),
                })
            } else if lq_stop == StopPolicy::HoldAndDrain {
                Some(EvictionCause {
                    by: EvictedBy::LocalQueueStopped,
                    message: "The LocalQueue is stopped".into(),
                })
            } else if let Some(Verdict::Evict(message)) = &verdict {
                Some(EvictionCause {
                    by: EvictedBy::AdmissionCheck,
                    message: message.clone(),
                })
            } else {
                None
            };
            let rejected = match verdict {
                Some(Verdict::Deactivate(m)) if is_active(wl) => Some(m),
                _ => None,
            };
            return Class::Reserved {
                evicted,
                owned: controller_owner(wl).is_some(),
                stop,
                rejected,
            };
        }
        if !is_active(wl) {
            return Class::Held {
                why: (PendingReason::Deactivated, "The workload is deactivated".into()),
            };
        }
        // Kueue's workload controller's words (`getQueueBlocker`), as its
        // `workload_controller_test.go` sees them: a workload without a queue name is told
        // "LocalQueue  doesn't exist" too.
        let Some(lq) = lq else {
            let name = wl.spec.queue_name.as_deref().unwrap_or_default();
            return Class::Held {
                why: (
                    PendingReason::Misconfigured,
                    format!("LocalQueue {name} doesn't exist"),
                ),
            };
        };
        if lq_stop != StopPolicy::None {
            let name = lq.metadata.name.as_deref().unwrap_or_default();
            return Class::Held {
                why: (PendingReason::Suspended, format!("LocalQueue {name} is inactive")),
            };
        }
        if let Some(at) = super::backoff::requeue_at(wl) {
            return Class::Backoff {
                elapsed: at.as_millisecond() <= now_ms,
            };
        }
        let cluster_queue = lq.spec.cluster_queue();
        if let Some((reason, message)) =
            super::backoff::release(wl, self.cluster_queue_stopped(cluster_queue))
        {
            return Class::Release { reason, message };
        }
        // Kueue's scheduler does not consider a workload with a failed check.
        if wl
            .status
            .as_ref()
            .is_some_and(|s| checks::has_failed(&s.admission_checks))
        {
            return Class::Held {
                why: (
                    PendingReason::PendingEvaluation,
                    checks::FAILED_MESSAGE.to_string(),
                ),
            };
        }
        // Kueue's `IsAdmissible`: a pod group missing pods waits for their replacements.
        if wl
            .status
            .as_ref()
            .is_some_and(|s| s.condition_true(condition::WAITING_FOR_REPLACEMENT_PODS))
        {
            return Class::Waiting;
        }
        Class::Queue {
            cluster_queue: cluster_queue.to_string(),
        }
    }

    /// The ClusterQueue has an `admissionChecksStrategy`.
    pub(super) fn has_checks(&self, cq: &str) -> bool {
        self.queue_checks.contains_key(cq)
    }

    /// The checks an admission's flavors need in its ClusterQueue.
    pub(super) fn admission_checks(
        &self,
        admission: &crate::api::kueue::Admission,
    ) -> std::collections::BTreeSet<String> {
        self.queue_checks
            .get(admission.cluster_queue.as_str())
            .map(|q| checks::checks_for_admission(&q.checks, admission))
            .unwrap_or_default()
    }

    /// The admission-check part of Kueue's workload controller for one workload of `class`: its
    /// check states brought in line with its ClusterQueue's checks, the built-in checks passed, and
    /// `Admitted` following them while quota is reserved. `None` when the status already says all
    /// that. Also returns when (ms) a built-in check with a delay is next due.
    pub(super) fn checks_status(
        &self,
        wl: &Workload,
        class: &Class,
        now: jiff::Timestamp,
    ) -> (Option<WorkloadStatus>, Option<i64>) {
        let cq = match class {
            Class::Gone { .. } | Class::Replaced { .. } => return (None, None),
            Class::Reserved { .. } => wl.admission().map(|a| a.cluster_queue.as_str()),
            _ => self.local_queue(wl).map(|lq| lq.spec.cluster_queue()),
        };
        let Some(cq) = cq else { return (None, None) };
        let current = wl
            .status
            .as_ref()
            .map(|s| s.admission_checks.as_slice())
            .unwrap_or_default();
        let queue = self.queue_checks.get(cq);
        // The common case, on every workload every cycle: no checks anywhere, nothing to copy. (A
        // reservation written without `Admitted`, by another writer, still gets it, as Kueue's
        // workload controller syncs it for every workload not admitted.)
        let reserved_only = matches!(class, Class::Reserved { .. }) && !wl.is_admitted();
        if queue.is_none() && current.is_empty() && !reserved_only {
            return (None, None);
        }
        let mut s = status_of(wl);
        let mut changed = false;
        // Kueue syncs the states only against a ClusterQueue it knows.
        if self.cluster_queues.contains(cq) {
            let wanted = queue.map(|q| q.for_workload(wl)).unwrap_or_default();
            if let Some(states) = checks::synced_states(&s.admission_checks, &wanted, now) {
                s.admission_checks = states;
                changed = true;
            }
        }
        let mut next = None;
        if matches!(class, Class::Reserved { .. }) {
            let mut view = wl.clone();
            view.status = Some(s.clone());
            let (passed, due) = checks::auto_ready(&view, &self.auto_ready, now);
            next = due;
            if let Some(states) = passed {
                s.admission_checks = states;
                changed = true;
            }
            if !s.condition_true(condition::ADMITTED) {
                changed |= checks::sync_admitted(&mut s, wl.metadata.generation, now);
            }
        }
        (changed.then_some(s), next)
    }
}
