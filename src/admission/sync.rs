//! The admission state and its step: the snapshot fed to the core in numbered phases, one
//! scheduling cycle, and the writes to make. Synchronous and I/O-free; the async loop executes the
//! returned actions and reports failures back (`forget`).
//!
//! Crash safety (DESIGN I5): everything here is rebuilt from the snapshot. A reservation counts in
//! the core from the moment it is assumed until the API shows it cleared, so usage seen through the
//! API never exceeds what the core allowed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

use super::classify::View;
use super::config_sync::ConfigMirror;
use super::outcome::Writes;
use super::pods_ready;
use super::take::Intake;
use super::unconfirmed::Unconfirmed;
use crate::api::kueue::Workload;
use crate::api::kueue::config::PodsReadyConfig;
use crate::queue::{AdmissionCore, WorkloadKey};

pub use super::action::Action;
pub use super::snapshot::{Snapshot, key_of};

/// The admission core plus what the API has not confirmed yet.
#[derive(Default)]
pub struct AdmissionState {
    pub core: AdmissionCore,
    /// The configuration objects as the core was given them.
    pub(super) config: ConfigMirror,
    /// What the API does not show yet of what the loop wrote or decided.
    pub(super) unconfirmed: Unconfirmed,
    /// Configuration errors by object ("ClusterQueue x" -> message), logged once per change.
    pub config_errors: BTreeMap<String, String>,
    /// Requeueing backoff after a PodsReady-timeout eviction.
    pub backoff: super::backoff::RequeueBackoff,
    /// waitForPodsReady, when on (`None`: off, and nothing of it runs).
    pub pods_ready: Option<PodsReadyConfig>,
    /// The earliest PodsReady timeout still running (ms), for the loop's timer.
    pub(super) pods_ready_deadline: Option<i64>,
    /// When (ms) the next delayed built-in admission check is due, for the loop's timer.
    pub(super) checks_deadline: Option<i64>,
    /// The scheduler's latest reasoning per pending workload (`quotagate explain`): one record per
    /// pending workload, dropped when it is admitted or gone.
    pub explanations: super::explanations::Explanations,
    /// Finished Workloads already dropped from the core, by the address of the cached object. The
    /// cache replaces an object's `Arc` on every change, so an unchanged address means an unchanged
    /// object; the `Weak` keeps the address from being reused while it is remembered. Finished
    /// Workloads stay in the cache until deleted, and without this every cycle would look at each.
    pub(super) settled: HashMap<usize, Weak<Workload>>,
    /// How many Workloads the last step read (the others were settled or unchanged).
    pub(super) last_read: usize,
    /// The Workloads read before, and whether each must be read again (`unchanged.rs`).
    pub(super) unchanged: super::unchanged::Unchanged,
    /// Kueue's `admission_cycle_preemption_skips`: per ClusterQueue, the count of the last cycle that
    /// skipped one of its preemptors (Kueue sets the gauge only for those).
    pub preemption_skips: BTreeMap<String, usize>,
    /// Kueue's `preemption_target_recomputations_total`: per ClusterQueue and result, the
    /// recomputations of the cycles since the metrics last took them (`queue_metrics::gauges`).
    pub preemption_target_recomputations:
        std::sync::Mutex<BTreeMap<(String, crate::queue::Recomputation), u64>>,
    pub(super) cycles: u64,
    /// When every pending workload's record was last redone (ms).
    pub(super) explained_at: Option<i64>,
    /// What the last refresh of every record took (ms).
    pub(super) explain_cost_ms: i64,
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

    /// How many Workloads the last step read (the others were settled or unchanged).
    pub fn last_read(&self) -> usize {
        self.last_read
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
        self.unconfirmed.forget(&mut self.core, key);
    }

    /// A pending status write failed: the next cycle (at the latest the resync, a second on) queues
    /// the workload afresh, so the core evaluates it even if it was parked, and writes it again.
    pub fn unshow(&mut self, key: &WorkloadKey) {
        self.unconfirmed.unshow(key);
    }

    /// Feeds the snapshot to the core, runs one cycle at `now_ms`, and returns the writes to make.
    /// The phases follow Kueue's: the configuration and the queues' samples first, then every
    /// Workload taken in once (classified, held against what is unconfirmed, queued), one
    /// scheduling cycle, and its results turned into writes.
    pub fn step(&mut self, snap: &Snapshot, now_ms: i64) -> Vec<Action> {
        let mut actions = Vec::new();
        // 1. Configuration: ClusterQueues (held while their admission checks are missing or
        //    inactive), Cohorts and flavors into the core.
        let unready = super::checks::queue_problems(snap);
        super::config_sync::sync_config(
            &mut self.config,
            &mut self.core,
            &mut self.config_errors,
            snap,
            &unready,
        );
        // 2. Admission fair sharing: the LocalQueues' usage samples.
        super::admission_fair_sharing::sync(&mut self.core, snap, now_ms);
        // 3. Every Workload not settled yet read once (classified, its checks synced), then taken
        //    into the core.
        self.forget_unsettled();
        self.pods_ready_deadline = None;
        self.checks_deadline = None;
        // blockAdmission: while any workload holding quota is not PodsReady, nothing is admitted.
        let block = self.pods_ready.as_ref().is_some_and(|c| c.block_admission);
        let blocked = block && snap.workloads.iter().any(|w| pods_ready::blocks_admission(w));
        let view = View::new(snap);
        // Admission fair sharing samples and settles usage on every read: read everything then.
        let incremental = self.core.admission_fair_sharing().is_none();
        let full = self.unchanged.begin(snap, view.replaced(), now_ms, incremental);
        let (settled, unchanged) = (&self.settled, &mut self.unchanged);
        let (unconfirmed, core) = (&self.unconfirmed, &self.core);
        let seen = view.read_all(
            snap,
            |wl| settled.contains_key(&(Arc::as_ptr(wl) as usize)) || unchanged.skip(wl, unconfirmed, core),
            now_ms,
        );
        self.last_read = seen.len();
        let mut intake = Intake {
            core: &mut self.core,
            unconfirmed: &mut self.unconfirmed,
            explanations: &mut self.explanations,
            settled: &mut self.settled,
            unchanged: &mut self.unchanged,
            pods_ready: self.pods_ready.as_ref(),
            pods_ready_deadline: &mut self.pods_ready_deadline,
            checks_deadline: &mut self.checks_deadline,
            now_ms,
            actions: &mut actions,
        };
        intake.all(seen, snap, full);
        // 4. One scheduling cycle.
        let res = self.core.schedule_cycle(now_ms);
        self.preemption_skips
            .extend(res.preemption_skips.iter().map(|(cq, n)| (cq.clone(), *n)));
        if !res.preemption_target_recomputations.is_empty() {
            let mut untaken = self
                .preemption_target_recomputations
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (k, n) in &res.preemption_target_recomputations {
                *untaken.entry(k.clone()).or_default() += u64::try_from(*n).unwrap_or(u64::MAX);
            }
        }
        // 5. Its results as writes; wait-for cycles among upgrades broken.
        let mut writes = self.writes(&mut actions);
        let withheld = writes.admissions(res.admissions, (block, blocked), snap, &view);
        writes.evictions(res.evictions, snap);
        writes.growth_taken(res.growth_taken);
        writes.explain_pending(&res.pending, now_ms);
        self.break_wait_cycles(now_ms, &mut actions);
        let mut writes = self.writes(&mut actions);
        writes.pending_writes(res.pending);
        writes.finished_slices(res.finished_slices, &withheld);
        actions
    }

    /// The cycle's results as writes into `actions`.
    fn writes<'a>(&'a mut self, actions: &'a mut Vec<Action>) -> Writes<'a> {
        Writes {
            core: &mut self.core,
            unconfirmed: &mut self.unconfirmed,
            explanations: &mut self.explanations,
            explained_at: &mut self.explained_at,
            explain_cost_ms: &mut self.explain_cost_ms,
            actions,
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
}
