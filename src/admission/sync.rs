//! Level-triggered bookkeeping between the API (a cache snapshot) and the admission core: feed the
//! core what changed, run a cycle, and return the writes to make. Synchronous and I/O-free; the
//! async loop executes the returned actions and reports failures back (`forget`).
//!
//! Crash safety (DESIGN I5): everything here is rebuilt from the snapshot. A reservation counts in
//! the core from the moment it is assumed until the API shows it cleared, so usage seen through the
//! API never exceeds what the core allowed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Weak};

use super::checks;
use super::classify::{Class, View};
use super::conditions::{EvictionCause, controller_owner, is_evicted};
use super::pods_ready;
use crate::api::kueue::config::PodsReadyConfig;
use crate::api::kueue::constants::reason;
use crate::api::kueue::{Workload, WorkloadStatus};
use crate::queue::{self, AdmissionCore, WorkloadKey, convert};

pub use super::snapshot::{Snapshot, key_of};

/// What `Class::Reserved` carries: the Workload is evicted, a job owns it, a cause to stop it, and
/// a rejecting admission check's message.
struct Reserved {
    evicted: bool,
    owned: bool,
    stop: Option<EvictionCause>,
    rejected: Option<String>,
}

/// A write the loop must make.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    Admit {
        key: WorkloadKey,
        admission: queue::Admission,
        replaced: Option<WorkloadKey>,
        /// The admission checks its flavors need (written `Pending` with the reservation).
        checks: std::collections::BTreeSet<String>,
    },
    /// Admission check states (and `Admitted`, which follows them) to write.
    Checks {
        key: WorkloadKey,
        status: Box<WorkloadStatus>,
    },
    /// Mark evicted; `clear` also releases the reservation at once (no job has to stop first).
    Evict {
        key: WorkloadKey,
        cause: EvictionCause,
        clear: bool,
    },
    ClearReservation {
        key: WorkloadKey,
    },
    /// Preemption takes only the growth of an admitted slice (`GrowthPreempted=True` with Kueue's
    /// reason): its job shrinks it back to its floor instead of stopping.
    TakeGrowth {
        key: WorkloadKey,
        /// Kueue's preemption reason, or the cycle breaker's.
        reason: String,
        message: String,
    },
    Pending {
        key: WorkloadKey,
        reason: String,
        message: String,
    },
    FinishSlice {
        key: WorkloadKey,
        replaced_by: WorkloadKey,
    },
    RemoveFinalizer {
        key: WorkloadKey,
    },
    /// The requeue backoff has elapsed: Requeued=True/BackoffFinished, `requeueAt` cleared.
    BackoffFinished {
        key: WorkloadKey,
    },
    /// The cause of a Requeued=False is gone: Requeued=True with `reason`.
    Requeue {
        key: WorkloadKey,
        reason: String,
        message: String,
    },
    /// Requeued too often after PodsReady timeouts, or an admission check rejected it: marked
    /// `DeactivationTarget` with `reason` and `message`, then `spec.active` set false (the eviction as
    /// deactivated follows from that).
    Deactivate {
        key: WorkloadKey,
        reason: &'static str,
        message: String,
    },
}

impl Action {
    /// The workload the action writes.
    pub fn key(&self) -> &WorkloadKey {
        match self {
            Action::Admit { key, .. }
            | Action::Evict { key, .. }
            | Action::ClearReservation { key }
            | Action::TakeGrowth { key, .. }
            | Action::Pending { key, .. }
            | Action::FinishSlice { key, .. }
            | Action::BackoffFinished { key }
            | Action::Requeue { key, .. }
            | Action::Deactivate { key, .. }
            | Action::Checks { key, .. }
            | Action::RemoveFinalizer { key } => key,
        }
    }
}

fn rv(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.resource_version.clone().unwrap_or_default()
}

/// What a configuration object's model is built from has changed when its spec generation (or the
/// object: a new uid) has. The resourceVersion also moves on every status write, and this loop
/// writes ClusterQueue status every cycle: keyed on it, each cycle rebuilt the quota tree and requeued
/// every parked workload. Objects without a generation fall back to the resourceVersion.
fn config_version(meta: &ObjectMeta) -> String {
    match (meta.generation, meta.uid.as_deref()) {
        (Some(g), Some(uid)) => format!("{uid}/{g}"),
        _ => rv(meta),
    }
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

/// The kinds of configuration object the core is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ConfigKind {
    ClusterQueue,
    Cohort,
    ResourceFlavor,
}

impl ConfigKind {
    fn as_str(self) -> &'static str {
        match self {
            ConfigKind::ClusterQueue => "ClusterQueue",
            ConfigKind::Cohort => "Cohort",
            ConfigKind::ResourceFlavor => "ResourceFlavor",
        }
    }
}

/// A configuration object by kind and name.
type ConfigKey = (ConfigKind, String);

/// The admission core plus what the API has not confirmed yet.
#[derive(Default)]
pub struct AdmissionState {
    pub core: AdmissionCore,
    config_rv: HashMap<ConfigKey, String>,
    /// What each queued workload was queued as: its resourceVersion and its namespace's labels.
    queued_rv: HashMap<WorkloadKey, (String, u64)>,
    /// Admissions written (or being written) but not yet seen in the cache.
    assumed: HashSet<WorkloadKey>,
    /// Evictions decided but not yet seen in the cache (retried until they are).
    evicting: HashMap<WorkloadKey, EvictionCause>,
    /// Configuration errors by object ("ClusterQueue x" -> message), logged once per change.
    pub config_errors: BTreeMap<String, String>,
    /// Requeueing backoff after a PodsReady-timeout eviction.
    pub backoff: super::backoff::RequeueBackoff,
    /// waitForPodsReady, when on (`None`: off, and nothing of it runs).
    pub pods_ready: Option<PodsReadyConfig>,
    /// The earliest PodsReady timeout still running (ms), for the loop's timer.
    pods_ready_deadline: Option<i64>,
    /// When (ms) the next delayed built-in admission check is due, for the loop's timer.
    checks_deadline: Option<i64>,
    /// The scheduler's latest reasoning per pending workload (`quotagate explain`): one record per
    /// pending workload, dropped when it is admitted or gone.
    pub explanations: super::explanations::Explanations,
    /// Finished Workloads already dropped from the core, by the address of the cached object. The
    /// cache replaces an object's `Arc` on every change, so an unchanged address means an unchanged
    /// object; the `Weak` keeps the address from being reused while it is remembered. Finished
    /// Workloads stay in the cache until deleted, and without this every cycle would look at each.
    settled: HashMap<usize, Weak<Workload>>,
    /// Kueue's `admission_cycle_preemption_skips`: per ClusterQueue, the count of the last cycle that
    /// skipped one of its preemptors (Kueue sets the gauge only for those).
    pub preemption_skips: BTreeMap<String, usize>,
    cycles: u64,
    /// When every pending workload's record was last redone (ms).
    explained_at: Option<i64>,
    /// What the last refresh of every record took (ms).
    explain_cost_ms: i64,
    /// Per queued workload, the pending status it shows or is being written with
    /// (`conditions::pending_fingerprint`). The core reports every workload it evaluates; only those
    /// whose status would say something new become writes, so a cycle over thousands of pending
    /// workloads costs no work per workload downstream of the core.
    shown: HashMap<WorkloadKey, u64>,
    /// How long (ms) a wait-for cycle among upgrades may last before it is broken (`None`:
    /// `cycle_breaker::BREAK_AFTER_MS`).
    pub cycle_break_after_ms: Option<i64>,
    pub(super) cycle_breaker: crate::queue::wait_cycle::CycleBreaker,
}

impl AdmissionState {
    pub fn new() -> Self {
        Self::default()
    }

    /// A state with waitForPodsReady on (`None`: off), its backoff taken from the config.
    pub fn with_pods_ready(cfg: Option<PodsReadyConfig>) -> Self {
        let mut s = Self::default();
        if let Some(c) = &cfg {
            s.backoff = super::backoff::RequeueBackoff {
                base_seconds: i64::from(c.backoff_base_seconds),
                max_seconds: i64::from(c.backoff_max_seconds),
            };
        }
        s.pods_ready = cfg;
        s
    }

    /// With admission fair sharing on (`Some`) or off.
    pub fn with_admission_fair_sharing(mut self, cfg: Option<&crate::api::kueue::config::AfsConfig>) -> Self {
        self.core.set_admission_fair_sharing(cfg.map(Into::into));
        self
    }

    /// When (ms) the next LocalQueue is due for an admission fair sharing sample.
    pub fn afs_sample_deadline(&self) -> Option<i64> {
        self.core.next_sample_ms()
    }

    /// When (ms) the earliest PodsReady timeout of the last step runs out.
    pub fn pods_ready_deadline(&self) -> Option<i64> {
        self.pods_ready_deadline
    }

    /// When (ms) the loop must run again at the latest: a PodsReady timeout or a delayed built-in
    /// admission check.
    pub fn wake_deadline(&self) -> Option<i64> {
        match (self.pods_ready_deadline, self.checks_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// An admission write failed: drop the assumption (and the entry penalty it pushed); the next
    /// sync queues the workload again.
    pub fn forget(&mut self, key: &WorkloadKey) {
        self.shown.remove(key);
        self.assumed.remove(key);
        self.queued_rv.remove(key);
        self.core.retain_entry_penalty(key, None);
        self.core.delete_workload(key);
    }

    /// A pending status write failed: the next cycle (at the latest the resync, a second on) queues
    /// the workload afresh, so the core evaluates it even if it was parked, and writes it again.
    pub fn unshow(&mut self, key: &WorkloadKey) {
        self.shown.remove(key);
        self.queued_rv.remove(key);
    }

    /// Takes one configuration object into the core when its resourceVersion changed; a conversion or
    /// model error is kept (and logged by the shell) under "<Kind> <name>".
    fn sync_one(
        &mut self,
        seen: &mut HashSet<ConfigKey>,
        kind: ConfigKind,
        meta: &ObjectMeta,
        apply: impl FnOnce(&mut AdmissionCore) -> Result<(), String>,
    ) {
        let name = meta.name.clone().unwrap_or_default();
        let key = (kind, name.clone());
        seen.insert(key.clone());
        let version = config_version(meta);
        if self.config_rv.get(&key) == Some(&version) {
            return;
        }
        self.config_rv.insert(key, version);
        let label = format!("{} {name}", kind.as_str());
        match apply(&mut self.core) {
            Ok(()) => {
                self.config_errors.remove(&label);
            }
            Err(e) => {
                self.config_errors.insert(label, e);
            }
        }
    }

    fn sync_config(&mut self, snap: &Snapshot) {
        let mut seen: HashSet<ConfigKey> = HashSet::new();
        let known = checks::known_checks(snap.admission_checks.iter().map(|c| c.as_ref()));
        for cq in &snap.cluster_queues {
            // A ClusterQueue whose admission checks are missing or inactive admits nothing (Kueue's
            // cache marks it pending): the core is handed it as one that admits nothing more, the
            // state it already has for a terminating queue. What the checks lack is part of the
            // version, so a check appearing or turning Active re-takes the queue (and requeues its
            // workloads).
            let problems = checks::cluster_queue_problems(cq, &known);
            let meta = if problems.is_empty() {
                std::borrow::Cow::Borrowed(&cq.metadata)
            } else {
                let mut m = cq.metadata.clone();
                m.resource_version = Some(format!("{}|checks:{:?}", config_version(&cq.metadata), problems));
                m.generation = None;
                std::borrow::Cow::Owned(m)
            };
            self.sync_one(&mut seen, ConfigKind::ClusterQueue, &meta, |core| {
                queue::ClusterQueueModel::try_from(cq.as_ref())
                    .and_then(|mut m| {
                        m.terminating |= !problems.is_empty();
                        core.upsert_cluster_queue(m)
                    })
                    .map_err(|e| e.to_string())
            });
        }
        for c in &snap.cohorts {
            self.sync_one(&mut seen, ConfigKind::Cohort, &c.metadata, |core| {
                queue::CohortModel::try_from(c.as_ref())
                    .and_then(|m| core.upsert_cohort(m))
                    .map_err(|e| e.to_string())
            });
        }
        for f in &snap.flavors {
            self.sync_one(&mut seen, ConfigKind::ResourceFlavor, &f.metadata, |core| {
                queue::FlavorModel::try_from(f.as_ref())
                    .map(|m| core.upsert_flavor(m))
                    .map_err(|e| e.to_string())
            });
        }
        let gone: Vec<ConfigKey> = self
            .config_rv
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for (kind, name) in gone {
            self.config_rv.remove(&(kind, name.clone()));
            match kind {
                ConfigKind::ClusterQueue => self.core.delete_cluster_queue(&name),
                ConfigKind::Cohort => self.core.delete_cohort(&name),
                ConfigKind::ResourceFlavor => self.core.delete_flavor(&name),
            };
        }
    }

    /// Feeds the snapshot to the core, runs one cycle at `now_ms`, and returns the writes to make.
    pub fn step(&mut self, snap: &Snapshot, now_ms: i64) -> Vec<Action> {
        let mut actions = Vec::new();
        self.sync_config(snap);
        super::admission_fair_sharing::sync(&mut self.core, snap, now_ms);
        let view = View::new(snap);
        self.forget_unsettled();
        self.pods_ready_deadline = None;
        self.checks_deadline = None;
        // blockAdmission: while any workload holding quota is not PodsReady, nothing is admitted.
        let block = self.pods_ready.as_ref().is_some_and(|c| c.block_admission);
        let blocked = block && snap.workloads.iter().any(|w| pods_ready::blocks_admission(w));
        self.take_all(snap, &view, now_ms, &mut actions);
        let res = self.core.schedule_cycle(now_ms);
        self.preemption_skips
            .extend(res.preemption_skips.iter().map(|(cq, n)| (cq.clone(), *n)));
        let withheld = self.admissions(res.admissions, (block, blocked), snap, &view, &mut actions);
        self.evictions(res.evictions, snap, &mut actions);
        for e in res.growth_taken {
            let by: super::conditions::EvictedBy = e.reason.into();
            let reason = by.preempted_reason().unwrap_or(reason::PREEMPTED).to_string();
            actions.push(Action::TakeGrowth {
                key: e.key,
                reason,
                message: e.message,
            });
        }
        self.explain_pending(&res.pending, now_ms);
        self.break_wait_cycles(now_ms, &mut actions);
        self.pending_writes(res.pending, &mut actions);
        for f in res.finished_slices {
            if withheld.contains(&f.replaced_by) {
                continue;
            }
            actions.push(Action::FinishSlice {
                key: f.key,
                replaced_by: f.replaced_by,
            });
        }
        actions
    }

    /// Brings the core in line with every Workload of the snapshot not settled yet (`take`), and
    /// drops the ones the snapshot no longer holds.
    fn take_all(&mut self, snap: &Snapshot, view: &View<'_>, now_ms: i64, actions: &mut Vec<Action>) {
        let now = jiff::Timestamp::from_millisecond(now_ms).unwrap_or_else(|_| jiff::Timestamp::now());
        let mut present: HashSet<(&str, &str)> = HashSet::new();
        for wl in &snap.workloads {
            let addr = Arc::as_ptr(wl) as usize;
            if self.settled.contains_key(&addr) {
                continue;
            }
            present.insert((
                wl.metadata.namespace.as_deref().unwrap_or_default(),
                wl.metadata.name.as_deref().unwrap_or_default(),
            ));
            let class = view.classify(wl, now_ms);
            let settles = matches!(
                class,
                Class::Gone {
                    remove_finalizer: false
                }
            ) && wl.metadata.deletion_timestamp.is_none();
            let (checks, due) = view.checks_status(wl, &class, now);
            if let Some(at) = due {
                self.checks_deadline = Some(self.checks_deadline.map_or(at, |d| d.min(at)));
            }
            self.take(key_of(wl), wl, class, checks, snap, now_ms, actions);
            if settles {
                self.settled.insert(addr, Arc::downgrade(wl));
            }
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

    /// The cycle's admissions as writes: withheld as pending while admission is blocked on
    /// PodsReady (`(block, blocked)`: the option is on, a workload blocks now); returned, the
    /// replacement slices whose replaced slice must stay until their checks pass.
    fn admissions(
        &mut self,
        admissions: Vec<queue::AdmissionResult>,
        (block, mut blocked): (bool, bool),
        snap: &Snapshot,
        view: &View<'_>,
        actions: &mut Vec<Action>,
    ) -> HashSet<WorkloadKey> {
        let mut withheld: HashSet<WorkloadKey> = HashSet::new();
        for a in admissions {
            if blocked {
                // Kueue's scheduler waits for PodsReady before this admission; here it stays pending
                // and the core forgets it, so a later cycle decides again on the quota then.
                self.forget(&a.key);
                actions.push(Action::Pending {
                    key: a.key.clone(),
                    reason: reason::WAITING_FOR_PODS_READY.into(),
                    message: pods_ready::BLOCKED_MESSAGE.into(),
                });
                withheld.insert(a.key);
                continue;
            }
            // The one admitted now is not PodsReady yet: it blocks the rest of the cycle's.
            blocked = block;
            self.explanations.remove(&a.key);
            self.assumed.insert(a.key.clone());
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
            actions.push(Action::Admit {
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
    fn evictions(&mut self, evictions: Vec<queue::Eviction>, snap: &Snapshot, actions: &mut Vec<Action>) {
        for e in evictions {
            let cause = EvictionCause {
                by: e.reason.into(),
                message: e.message,
            };
            self.evicting.insert(e.key.clone(), cause.clone());
            let clear = snap
                .workloads
                .iter()
                .find(|w| {
                    w.metadata.name.as_deref() == Some(e.key.name.as_str())
                        && w.metadata.namespace.as_deref().unwrap_or_default() == e.key.namespace
                })
                .is_some_and(|w| controller_owner(w).is_none());
            actions.push(Action::Evict {
                key: e.key,
                cause,
                clear,
            });
        }
    }

    /// Refreshes the `explain` records of the pending workloads whose verdict changed, and all of
    /// them about once a second.
    fn explain_pending(&mut self, pending: &[queue::PendingStatus], now_ms: i64) {
        // A record per pending workload is a pass over its ClusterQueue's tree and holders: with
        // thousands pending, redoing every record every cycle made the step several times slower.
        // A record is redone when its reason or message changed, and all of them once a second, so
        // what `explain` shows is never old in its verdict and about a second old in its numbers.
        // With many pending, the refresh of all is spaced to at least 20 times its own cost, so it
        // takes at most ~5% of the loop (measured with `perf`: 16% of the step at 2,500 pending).
        let every = 1000.max(self.explain_cost_ms.saturating_mul(20));
        let refresh_all = self.explained_at.is_none_or(|t| now_ms - t >= every);
        if refresh_all {
            self.explained_at = Some(now_ms);
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
            self.explain_cost_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX / 20);
        }
    }

    /// A Pending write for each pending workload whose reason or message differs from what the API
    /// shows.
    fn pending_writes(&mut self, pending: Vec<queue::PendingStatus>, actions: &mut Vec<Action>) {
        for p in pending {
            let said = super::conditions::pending_fingerprint(p.reason.as_str(), &p.message);
            if self.shown.get(&p.key) == Some(&said) {
                continue;
            }
            self.shown.insert(p.key.clone(), said);
            actions.push(Action::Pending {
                key: p.key,
                reason: p.reason.as_str().to_string(),
                message: p.message,
            });
        }
    }

    /// Forgets settled Workloads the cache no longer holds (deleted, or changed: a new object). Every
    /// 64 cycles, so the scan costs less than the cycles it saves.
    fn forget_unsettled(&mut self) {
        self.cycles += 1;
        if self.cycles.is_multiple_of(64) {
            self.settled.retain(|_, w| w.strong_count() > 0);
        }
    }

    /// Brings the core in line with one Workload's case and pushes the writes it needs. `checks`:
    /// its admission check states (and `Admitted`) to write first, if they changed; as in Kueue's
    /// workload controller, nothing else is decided for it until that write shows.
    #[allow(clippy::too_many_arguments)]
    fn take(
        &mut self,
        key: WorkloadKey,
        wl: &Workload,
        class: Class,
        checks: Option<WorkloadStatus>,
        snap: &Snapshot,
        now_ms: i64,
        actions: &mut Vec<Action>,
    ) {
        if !matches!(class, Class::Gone { .. } | Class::Replaced { .. }) {
            let home = super::admission_fair_sharing::penalty_home(wl);
            self.core.retain_entry_penalty(&key, home.as_ref());
        }
        let waiting = match class {
            Class::Gone { remove_finalizer } => {
                if remove_finalizer {
                    actions.push(Action::RemoveFinalizer { key: key.clone() });
                }
                // Like Kueue's cache, a workload being deleted holds its quota until it is gone from
                // the API (its finalizer removed): the API shows it reserved until then, and admitting
                // into that quota first would show the ClusterQueue over it.
                if wl.metadata.deletion_timestamp.is_some()
                    && !wl.is_finished()
                    && wl.admission().is_some()
                    && wl.has_quota_reservation()
                {
                    self.account_reserved(&key, wl, snap, now_ms);
                    return;
                }
                self.drop_workload(&key);
                return;
            }
            Class::Replaced { by, finish } => {
                self.drop_workload(&key);
                if finish {
                    actions.push(Action::FinishSlice { key, replaced_by: by });
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
                self.take_reserved(key, wl, reserved, checks, snap, now_ms, actions);
                return;
            }
            waiting => waiting,
        };
        self.take_unreserved(key, wl, waiting, checks, snap, actions);
    }

    /// A Workload the API shows reserved: counted in the core, then (first match) its check states
    /// written, deactivated when a check rejected it, its eviction completed or released, or evicted
    /// for a cause (a pending eviction, a stop, or its PodsReady timeout).
    #[allow(clippy::too_many_arguments)]
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
        now_ms: i64,
        actions: &mut Vec<Action>,
    ) {
        self.assumed.remove(&key);
        self.account_reserved(&key, wl, snap, now_ms);
        // Admitted (its checks passed), not merely reserved: the fair-sharing entry penalty
        // is settled. A deactivated workload is not charged (Kueue: deactivation wins).
        if wl.is_admitted() && super::conditions::is_active(wl) {
            self.core.settle_admission(&key, now_ms);
        }
        if let Some(status) = checks {
            actions.push(Action::Checks {
                key,
                status: Box::new(status),
            });
            return;
        }
        if let Some(message) = rejected
            && !evicted
        {
            actions.push(Action::Deactivate {
                key,
                reason: reason::ADMISSION_CHECK,
                message,
            });
            return;
        }
        let stop = match stop {
            None if !evicted => self.pods_ready_timeout(&key, wl, now_ms, actions),
            stop => stop,
        };
        if evicted {
            self.core.mark_evicting(&key);
            self.evicting.remove(&key);
            if !owned {
                actions.push(Action::ClearReservation { key });
            }
        } else if let Some(cause) = self.evicting.get(&key).cloned().or(stop) {
            self.evicting.insert(key.clone(), cause.clone());
            actions.push(Action::Evict {
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
        actions: &mut Vec<Action>,
    ) {
        // Not reserved in the API. An admission being written is left alone until it shows.
        if self.assumed.contains(&key) {
            return;
        }
        if let Some(status) = checks {
            // Queued again once the write shows (a new resourceVersion).
            self.unqueue(&key);
            actions.push(Action::Checks {
                key,
                status: Box::new(status),
            });
            return;
        }
        self.evicting.remove(&key);
        if self.core.is_admitted(&key) {
            self.core.release(&key);
        }
        match waiting {
            Class::Held {
                why: (reason, message),
            } => {
                self.unqueue(&key);
                actions.push(Action::Pending {
                    key,
                    reason: reason.into(),
                    message,
                });
            }
            Class::Waiting => self.unqueue(&key),
            // Kept out of the queue until requeueAt, then released by the write.
            Class::Backoff { elapsed } => {
                self.unqueue(&key);
                if elapsed {
                    actions.push(Action::BackoffFinished { key });
                }
            }
            // Queued once the API shows Requeued=True (the write changes the resourceVersion).
            Class::Release { reason, message } => {
                self.unqueue(&key);
                actions.push(Action::Requeue {
                    key,
                    reason: reason.into(),
                    message: message.into(),
                });
            }
            Class::Queue { cluster_queue } => self.queue(key, wl, &cluster_queue, snap, actions),
            Class::Gone { .. } | Class::Replaced { .. } | Class::Reserved { .. } => {}
        }
    }

    /// Queues a Workload into the core once per resourceVersion (and namespace labels); one the
    /// core cannot model is shown pending as misconfigured.
    fn queue(
        &mut self,
        key: WorkloadKey,
        wl: &Workload,
        cluster_queue: &str,
        snap: &Snapshot,
        actions: &mut Vec<Action>,
    ) {
        // The namespace's labels count too: relabelling a namespace requeues its
        // workloads, as Kueue does on namespace events.
        let seen = (rv(&wl.metadata), labels_fingerprint(snap, &key.namespace));
        if self.queued_rv.get(&key) == Some(&seen) {
            return;
        }
        self.queued_rv.insert(key.clone(), seen);
        match super::conditions::shown_pending(wl) {
            Some(said) => self.shown.insert(key.clone(), said),
            None => self.shown.remove(&key),
        };
        let labels = namespace_labels(snap, &key.namespace);
        let order = self
            .pods_ready
            .as_ref()
            .and_then(|c| pods_ready::queue_order_ms(wl, c));
        let added = convert::workload_model(wl, cluster_queue, labels).and_then(|mut m| {
            if let Some(t) = order {
                m.timestamp = t;
            }
            self.core.add_workload(m)
        });
        if let Err(e) = added {
            actions.push(Action::Pending {
                key,
                reason: reason::MISCONFIGURED.into(),
                message: e.to_string(),
            });
        }
    }

    /// waitForPodsReady on a reserved workload not being evicted: the eviction past its timeout, a
    /// deactivation past `backoffLimitCount`, or its deadline kept for the loop's timer.
    fn pods_ready_timeout(
        &mut self,
        key: &WorkloadKey,
        wl: &Workload,
        now_ms: i64,
        actions: &mut Vec<Action>,
    ) -> Option<EvictionCause> {
        match pods_ready::verdict(wl, self.pods_ready.as_ref()?, now_ms) {
            pods_ready::Verdict::Fine => None,
            pods_ready::Verdict::Until(at) => {
                self.pods_ready_deadline = Some(self.pods_ready_deadline.map_or(at, |d| d.min(at)));
                None
            }
            pods_ready::Verdict::Evict(cause) => Some(cause),
            pods_ready::Verdict::Deactivate => {
                actions.push(Action::Deactivate {
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
    fn account_reserved(&mut self, key: &WorkloadKey, wl: &Workload, snap: &Snapshot, now_ms: i64) {
        let Some(a) = wl.admission() else {
            return;
        };
        let labels = || namespace_labels(snap, &key.namespace);
        if !self.core.is_admitted(key) {
            let admitted = convert::workload_model(wl, &a.cluster_queue, labels())
                .and_then(|m| Ok((m, convert::admission_model(a)?)))
                .and_then(|(m, am)| self.core.record_admitted(m, am, now_ms));
            if let Err(e) = admitted {
                tracing::warn!(workload = %key, error = %e, "cannot account an admitted workload");
            }
        }
        // The floor its job keeps when preemption takes its growth; one whose growth was taken
        // (before a restart) is held until its job has shrunk it back.
        self.core
            .set_floor(key, crate::admission::slices::growth_floor(wl).as_ref());
        if crate::admission::slices::growth_preempted(wl) {
            self.core.mark_taking_growth(key);
        }
        // Like Kueue, status.admission stays as admitted (it is immutable); the usage counted is
        // scaled to the smaller spec counts, or to the pods not reclaimable, so the difference is
        // free at once.
        if !is_evicted(wl)
            && let Some(counted) = counted_pods(wl)
            && !self.core_counts_match(key, &counted)
            && let Err(e) = convert::workload_model(&counted, &a.cluster_queue, labels())
                .and_then(|m| self.core.shrink_admitted(m))
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
        self.shown.remove(key);
        self.explanations.remove(key);
        self.queued_rv.remove(key);
        if !self.core.is_admitted(key) {
            self.core.delete_workload(key);
        }
    }

    fn drop_workload(&mut self, key: &WorkloadKey) {
        self.shown.remove(key);
        self.explanations.remove(key);
        self.queued_rv.remove(key);
        self.assumed.remove(key);
        self.evicting.remove(key);
        self.core.retain_entry_penalty(key, None);
        self.core.delete_workload(key);
    }
}

/// The workload as its quota is to be counted, when that is less than `status.admission` holds:
/// an elastic slice scaled down in place counts its spec's pods, and (Kueue's ReclaimablePods,
/// `clusterqueue_controller_test.go` "Should update status when workloads have reclaimable pods")
/// a podset's `status.reclaimablePods` are not counted.
pub fn counted_pods(wl: &Workload) -> Option<Workload> {
    let reclaimable = &wl.status.as_ref()?.reclaimable_pods;
    if reclaimable.is_empty() {
        return scaled_down(wl).then(|| wl.clone());
    }
    let a = wl.admission()?;
    let mut counted = wl.clone();
    for ps in &mut counted.spec.pod_sets {
        let name = ps
            .name
            .as_deref()
            .unwrap_or(crate::api::kueue::constants::DEFAULT_PODSET_NAME);
        let spec = ps.count.unwrap_or(1);
        let admitted = a
            .pod_set_assignments
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.count)
            .unwrap_or(spec);
        let gone = reclaimable.iter().find(|r| r.name == name).map_or(0, |r| r.count);
        ps.count = Some((spec.min(admitted) - gone).max(0));
    }
    Some(counted)
}

/// An elastic workload whose spec asks for fewer pods than `status.admission` holds (and for no
/// more anywhere): Kueue shrinks such a slice in place instead of creating a new one, and counts
/// only the spec's pods against the quota.
pub fn scaled_down(wl: &Workload) -> bool {
    if !crate::api::kueue::is_elastic_job(&wl.metadata) {
        return false;
    }
    let Some(a) = wl.admission() else {
        return false;
    };
    let mut smaller = false;
    for ps in &wl.spec.pod_sets {
        let name = ps
            .name
            .as_deref()
            .unwrap_or(crate::api::kueue::constants::DEFAULT_PODSET_NAME);
        let Some(admitted) = a
            .pod_set_assignments
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.count)
        else {
            return false;
        };
        let want = ps.count.unwrap_or(1);
        if want > admitted {
            return false;
        }
        smaller |= want < admitted;
    }
    smaller
}
