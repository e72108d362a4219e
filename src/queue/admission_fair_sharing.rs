//! Admission fair sharing (Kueue's KEP 4136): in a ClusterQueue with
//! `admissionScope.admissionMode: UsageBasedAdmissionFairSharing`, pending workloads are ordered by
//! their LocalQueue's recent usage first (lowest first), then by the usual priority, queue time and
//! UID.
//!
//! A LocalQueue's usage is its consumed resources, decayed with a half-life and sampled every
//! `usageSamplingInterval` from what its admitted workloads hold, plus the entry penalties of
//! workloads admitted since the last settlement, weighted per resource (`resourceWeights`) and
//! divided by the LocalQueue's `spec.fairSharing.weight`. As in Kueue (`pkg/util/admissionfairsharing`,
//! `pkg/cache/queue/afs`): an admission pushes an entry penalty (its requests times the decay of one
//! sampling interval) at once, so the next head of the same ClusterQueue already sees the
//! LocalQueue as busier; when the API shows the workload Admitted (after its admission checks, not
//! at the quota reservation), the penalty is settled into the consumed resources. A penalty that can
//! no longer settle (failed admission write, deletion, finish, deactivation without a reservation,
//! a move to another LocalQueue) is dropped; an eviction back to pending keeps it, and the next
//! reservation replaces it rather than adding a second one.
//!
//! Amounts are kept in billionths of the unit Kueue reports (cores for cpu, bytes for memory), the
//! nine decimals Kueue's `MulByFloat` rounds to, so the status shows what Kueue's would.

use std::collections::{BTreeMap, BTreeSet};

use super::amount::FrAmounts;
use super::model::{WorkloadKey, WorkloadModel};
use super::scheduler::AdmissionCore;

/// Resource name -> amount in billionths of Kueue's reporting unit.
pub type Resources = BTreeMap<String, i128>;

const NANO: i128 = 1_000_000_000;

/// admissionFairSharing as the core uses it.
#[derive(Clone, Debug, PartialEq)]
pub struct AfsConfig {
    pub usage_half_life_ms: i64,
    pub usage_sampling_interval_ms: i64,
    /// 1 for a resource not named.
    pub resource_weights: BTreeMap<String, f64>,
}

impl From<&crate::api::kueue::config::AfsConfig> for AfsConfig {
    fn from(c: &crate::api::kueue::config::AfsConfig) -> Self {
        let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        AfsConfig {
            usage_half_life_ms: ms(c.usage_half_life_time),
            // A zero interval would sample in a loop; Kueue's validation refuses it.
            usage_sampling_interval_ms: ms(c.usage_sampling_interval).max(1),
            resource_weights: c.resource_weights.clone(),
        }
    }
}

/// A LocalQueue: namespace and name.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LocalQueueKey {
    pub namespace: String,
    pub name: String,
}

impl LocalQueueKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        LocalQueueKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn of(w: &WorkloadModel) -> Self {
        LocalQueueKey::new(w.key.namespace.clone(), w.local_queue.clone())
    }
}

/// Kueue's `calculateAlphaRate`: the share of the new sample after `elapsed` with this half-life
/// (0 with no half-life: nothing is remembered, see `sample`).
pub fn alpha(elapsed_ms: f64, half_life_ms: f64) -> f64 {
    if half_life_ms == 0.0 {
        return 0.0;
    }
    1.0 - 0.5_f64.powf(elapsed_ms / half_life_ms)
}

/// Every amount times `f`, rounded toward zero at the nano scale (Kueue's `MulByFloat`).
pub fn scale(r: &Resources, f: f64) -> Resources {
    r.iter()
        .map(|(k, v)| (k.clone(), (*v as f64 * f).trunc() as i128))
        .collect()
}

/// The sum per resource of both lists (Kueue's `MergeResourceListKeepSum`).
pub fn sum(a: &Resources, b: &Resources) -> Resources {
    let mut out = a.clone();
    for (k, v) in b {
        *out.entry(k.clone()).or_default() += v;
    }
    out
}

/// Kueue's `CalculateEntryPenalty`: what an admission adds to its LocalQueue's usage at once.
pub fn entry_penalty(requests: &Resources, cfg: &AfsConfig) -> Resources {
    let a = alpha(
        cfg.usage_sampling_interval_ms as f64,
        cfg.usage_half_life_ms as f64,
    );
    scale(requests, a)
}

/// Kueue's `CalculateDecayedConsumed`: the old consumed resources decayed over `elapsed`, plus the
/// share of what is held now.
pub fn decayed(old: &Resources, now_held: &Resources, elapsed_ms: f64, half_life_ms: f64) -> Resources {
    let a = alpha(elapsed_ms, half_life_ms);
    sum(&scale(old, 1.0 - a), &scale(now_held, a))
}

/// Kueue's `CalculateUsage`: consumed plus pending penalties, weighted per resource, divided by the
/// LocalQueue's weight (a weight of 0 or less: infinite usage, so it goes last).
pub fn usage(
    consumed: &Resources,
    penalty: &Resources,
    lq_weight: f64,
    resource_weights: &BTreeMap<String, f64>,
) -> f64 {
    let total: f64 = sum(consumed, penalty)
        .iter()
        .map(|(r, v)| resource_weights.get(r).copied().unwrap_or(1.0) * (*v as f64 / NANO as f64))
        .sum();
    if lq_weight <= 0.0 || lq_weight.is_nan() {
        return f64::INFINITY;
    }
    total / lq_weight
}

/// A usage as a sort key: the order of non-negative floats is the order of their bits.
pub fn rank(u: f64) -> u64 {
    if u.is_nan() || u <= 0.0 {
        return 0;
    }
    u.to_bits()
}

/// Usage of (flavor, resource) amounts in Kueue's reporting unit, flavors summed (Kueue's
/// `FlattenFlavors`): cpu is accounted in milli, everything else in units.
pub fn flatten(usage: &FrAmounts) -> Resources {
    let mut out = Resources::new();
    for (fr, a) in usage {
        if a.is_unlimited() {
            continue;
        }
        let per = if fr.resource == "cpu" { 1_000_000 } else { NANO };
        *out.entry(fr.resource.clone()).or_default() += i128::from(a.0) * per;
    }
    out
}

/// What one LocalQueue's fair-sharing usage is computed from (Kueue's `UsageLedgerEntry`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LocalQueueUsage {
    /// The decayed consumed history (`status.fairSharing.admissionFairSharingStatus.consumedResources`).
    pub consumed: Resources,
    /// When `consumed` was last decayed (ms); `lastUpdate` in status.
    pub last_update_ms: i64,
    /// `spec.fairSharing.weight`, 1 when unset.
    pub weight: f64,
    /// The ClusterQueue the LocalQueue points to.
    pub cluster_queue: String,
    /// Entry penalties not settled yet, per workload (re-pushing replaces, dropping is exact).
    penalties: BTreeMap<WorkloadKey, Resources>,
}

impl LocalQueueUsage {
    pub fn pending_penalty(&self) -> Resources {
        self.penalties
            .values()
            .fold(Resources::new(), |acc, p| sum(&acc, p))
    }

    pub fn has_pending_penalty(&self) -> bool {
        self.penalties.values().flatten().any(|(_, v)| *v != 0)
    }

    /// The weighted usage workloads are ordered by.
    pub fn usage(&self, cfg: &AfsConfig) -> f64 {
        usage(
            &self.consumed,
            &self.pending_penalty(),
            self.weight,
            &cfg.resource_weights,
        )
    }
}

/// Admission fair sharing state of the core: the configuration and the per-LocalQueue ledger.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    config: Option<AfsConfig>,
    entries: BTreeMap<LocalQueueKey, LocalQueueUsage>,
    /// Pending workloads per LocalQueue, to re-rank only those whose LocalQueue's usage moved.
    pending: BTreeMap<LocalQueueKey, BTreeSet<WorkloadKey>>,
    /// LocalQueues whose usage moved since their workloads were last ranked.
    dirty: BTreeSet<LocalQueueKey>,
    /// The LocalQueue each unsettled penalty is recorded under, to drop it by workload alone.
    penalized: BTreeMap<WorkloadKey, LocalQueueKey>,
}

impl Ledger {
    /// Records `key`'s penalty under `lq`, replacing any it had (there or under another queue).
    fn push_penalty(&mut self, lq: &LocalQueueKey, key: &WorkloadKey, penalty: Resources) -> bool {
        self.drop_penalty(key);
        let Some(e) = self.entries.get_mut(lq) else {
            return false;
        };
        e.penalties.insert(key.clone(), penalty);
        self.penalized.insert(key.clone(), lq.clone());
        self.dirty.insert(lq.clone());
        true
    }

    /// Removes `key`'s penalty record and returns it.
    fn take_penalty(&mut self, key: &WorkloadKey) -> Option<Resources> {
        let lq = self.penalized.remove(key)?;
        let p = self.entries.get_mut(&lq)?.penalties.remove(key)?;
        self.dirty.insert(lq);
        Some(p)
    }

    fn drop_penalty(&mut self, key: &WorkloadKey) {
        self.take_penalty(key);
    }
}

impl AdmissionCore {
    /// Turns admission fair sharing on (`Some`) or off. Every pending workload is ranked again.
    pub fn set_admission_fair_sharing(&mut self, cfg: Option<AfsConfig>) {
        if self.afs.config == cfg {
            return;
        }
        self.afs.config = cfg;
        // The index of pending workloads per LocalQueue is kept only while the feature is on.
        self.afs.pending.clear();
        if self.afs.config.is_some() {
            for p in self.pending.values() {
                self.afs
                    .pending
                    .entry(LocalQueueKey::of(&p.model))
                    .or_default()
                    .insert(p.model.key.clone());
            }
        }
        let all: Vec<LocalQueueKey> = self.afs.pending.keys().cloned().collect();
        self.afs.dirty.extend(all);
        // Workloads ranked while it was on keep their rank until re-ranked: do it now.
        if self.afs.config.is_none() {
            let keys: Vec<WorkloadKey> = self.pending.keys().cloned().collect();
            for k in keys {
                self.set_rank(&k, 0);
            }
        }
    }

    /// Moves a pending workload to its position for LocalQueue usage `r`.
    fn set_rank(&mut self, k: &WorkloadKey, r: u64) -> bool {
        let Some(p) = self.pending.get_mut(k) else {
            return false;
        };
        if p.order.lq_usage == r {
            return false;
        }
        let old = p.order.clone();
        p.order.lq_usage = r;
        let new = p.order.clone();
        if let Some(q) = self.queues.get_mut(&p.model.cluster_queue) {
            q.replace(&old, new);
        }
        true
    }

    pub fn admission_fair_sharing(&self) -> Option<&AfsConfig> {
        self.afs.config.as_ref()
    }

    /// Keeps a LocalQueue in the ledger. A new one starts from its persisted consumed resources
    /// (as Kueue's LocalQueue controller seeds its cache from status) with `lastUpdate` now.
    pub fn track_local_queue(
        &mut self,
        lq: LocalQueueKey,
        cluster_queue: &str,
        weight: f64,
        persisted: Option<Resources>,
        now_ms: i64,
    ) {
        if self.afs.config.is_none() {
            return;
        }
        match self.afs.entries.get_mut(&lq) {
            Some(e) => {
                // Every resource of its ClusterQueue shows also when the ClusterQueue became known
                // after the LocalQueue (Kueue's reconcile waits for it in its cache); without this
                // the status would list none until the next sample.
                let groups = self.cqs.get(cluster_queue).into_iter().flat_map(|c| &c.resource_groups);
                for r in groups.flat_map(|g| &g.covered_resources) {
                    if !e.consumed.contains_key(r) {
                        e.consumed.insert(r.clone(), 0);
                    }
                }
                if e.weight != weight || e.cluster_queue != cluster_queue {
                    e.weight = weight;
                    e.cluster_queue = cluster_queue.to_string();
                    self.afs.dirty.insert(lq);
                }
            }
            None => {
                let e = LocalQueueUsage {
                    consumed: persisted.unwrap_or_default(),
                    last_update_ms: now_ms,
                    weight,
                    cluster_queue: cluster_queue.to_string(),
                    penalties: BTreeMap::new(),
                };
                self.afs.entries.insert(lq.clone(), e);
                // Kueue's first reconcile samples at once, with nothing elapsed: the history stays,
                // and every resource of the ClusterQueue shows (at 0 when nothing was consumed).
                let held = self.held_by(&lq);
                if let Some(e) = self.afs.entries.get_mut(&lq) {
                    e.consumed = sum(&e.consumed, &scale(&held, 0.0));
                }
                self.afs.dirty.insert(lq);
            }
        }
    }

    /// Forgets the LocalQueues `keep` says are gone (deleted LocalQueues drop their history).
    pub fn untrack_local_queues(&mut self, keep: impl Fn(&LocalQueueKey) -> bool) {
        let gone: Vec<LocalQueueKey> = self.afs.entries.keys().filter(|k| !keep(k)).cloned().collect();
        for k in &gone {
            self.afs.entries.remove(k);
            self.afs.dirty.insert(k.clone());
        }
        if !gone.is_empty() {
            self.afs.penalized.retain(|_, lq| !gone.contains(lq));
        }
    }

    pub fn local_queue_usage(&self, lq: &LocalQueueKey) -> Option<&LocalQueueUsage> {
        self.afs.entries.get(lq)
    }

    /// Every tracked LocalQueue with its weighted usage (what its workloads are ordered by).
    pub fn local_queue_usages(&self) -> Vec<(&LocalQueueKey, &LocalQueueUsage, f64)> {
        let Some(cfg) = &self.afs.config else {
            return Vec::new();
        };
        self.afs.entries.iter().map(|(k, e)| (k, e, e.usage(cfg))).collect()
    }

    /// When (ms) the next LocalQueue is due for sampling.
    pub fn next_sample_ms(&self) -> Option<i64> {
        let cfg = self.afs.config.as_ref()?;
        self.afs
            .entries
            .values()
            .map(|e| e.last_update_ms.saturating_add(cfg.usage_sampling_interval_ms))
            .min()
    }

    /// Samples every LocalQueue whose interval has run out at `now_ms` (Kueue's LocalQueue
    /// reconcile): consumed resources decay toward what its admitted workloads hold now; with no
    /// half-life they are reset. Returns how many were sampled.
    pub fn sample_local_queues(&mut self, now_ms: i64) -> usize {
        let Some(cfg) = self.afs.config.clone() else {
            return 0;
        };
        let due: Vec<LocalQueueKey> = self
            .afs
            .entries
            .iter()
            .filter(|(_, e)| now_ms.saturating_sub(e.last_update_ms) >= cfg.usage_sampling_interval_ms)
            .map(|(k, _)| k.clone())
            .collect();
        for lq in &due {
            let held = self.held_by(lq);
            if let Some(e) = self.afs.entries.get_mut(lq) {
                e.consumed = if cfg.usage_half_life_ms == 0 {
                    Resources::new()
                } else {
                    let elapsed = now_ms.saturating_sub(e.last_update_ms).max(0) as f64;
                    decayed(&e.consumed, &held, elapsed, cfg.usage_half_life_ms as f64)
                };
                e.last_update_ms = e.last_update_ms.max(now_ms);
            }
            self.afs.dirty.insert(lq.clone());
        }
        due.len()
    }

    /// The API shows `key` Admitted: its entry penalty is folded into its LocalQueue's consumed
    /// resources, which first decay toward what the LocalQueue holds now (Kueue's
    /// `updateAfsConsumedUsage`, run on the transition to Admitted in an AFS ClusterQueue). Without
    /// a penalty record (already settled, or pushed by another leader) nothing changes, so seeing
    /// the admission again settles nothing twice.
    pub fn settle_admission(&mut self, key: &WorkloadKey, now_ms: i64) {
        let Some(cfg) = self.afs.config.clone() else {
            return;
        };
        let Some(a) = self.admitted.get(key) else {
            return;
        };
        let afs_cq = self
            .cqs
            .get(&a.admission.cluster_queue)
            .is_some_and(|c| c.admission_fair_sharing);
        let lq = LocalQueueKey::of(&a.model);
        if !afs_cq || self.afs.penalized.get(key) != Some(&lq) {
            return;
        }
        let held = self.held_by(&lq);
        let Some(penalty) = self.afs.take_penalty(key) else {
            return;
        };
        let Some(e) = self.afs.entries.get_mut(&lq) else {
            return;
        };
        let elapsed = now_ms.saturating_sub(e.last_update_ms).max(0) as f64;
        e.consumed = sum(
            &decayed(&e.consumed, &held, elapsed, cfg.usage_half_life_ms as f64),
            &penalty,
        );
        e.last_update_ms = e.last_update_ms.max(now_ms);
        self.afs.dirty.insert(lq);
    }

    /// What the admitted workloads of a LocalQueue hold (Kueue's `GetAdmittedUsage`), with every
    /// resource its ClusterQueue covers (0 when nothing holds it).
    fn held_by(&self, lq: &LocalQueueKey) -> Resources {
        let Some(e) = self.afs.entries.get(lq) else {
            return Resources::new();
        };
        let mut out: Resources = self
            .cqs
            .get(&e.cluster_queue)
            .into_iter()
            .flat_map(|c| &c.resource_groups)
            .flat_map(|g| &g.covered_resources)
            .map(|r| (r.clone(), 0))
            .collect();
        for k in self.admitted_by_cq.get(&e.cluster_queue).into_iter().flatten() {
            if k.namespace != lq.namespace {
                continue;
            }
            if let Some(a) = self.admitted.get(k)
                && a.model.local_queue == lq.name
            {
                out = sum(&out, &flatten(&a.usage));
            }
        }
        out
    }

    /// The sort key of a pending workload's LocalQueue usage (0 outside AFS ClusterQueues).
    pub(super) fn afs_rank(&self, w: &WorkloadModel) -> u64 {
        let Some(cfg) = &self.afs.config else {
            return 0;
        };
        if !self.cqs.get(&w.cluster_queue).is_some_and(|c| c.admission_fair_sharing) {
            return 0;
        }
        // A LocalQueue not tracked yet has no history: usage 0 (Kueue falls back to weight 1).
        self.afs
            .entries
            .get(&LocalQueueKey::of(w))
            .map_or(0, |e| rank(e.usage(cfg)))
    }

    pub(super) fn afs_pending_added(&mut self, w: &WorkloadModel) {
        if self.afs.config.is_none() {
            return;
        }
        self.afs
            .pending
            .entry(LocalQueueKey::of(w))
            .or_default()
            .insert(w.key.clone());
    }

    pub(super) fn afs_pending_removed(&mut self, w: &WorkloadModel) {
        let lq = LocalQueueKey::of(w);
        if let Some(s) = self.afs.pending.get_mut(&lq) {
            s.remove(&w.key);
            if s.is_empty() {
                self.afs.pending.remove(&lq);
            }
        }
    }

    /// An admission in an AFS ClusterQueue: its entry penalty counts for its LocalQueue at once.
    /// Returns whether the LocalQueue's pending workloads must be ranked again.
    pub(super) fn afs_admitted(&mut self, w: &WorkloadModel, cq: &str, usage: &FrAmounts) -> bool {
        let Some(cfg) = &self.afs.config else {
            return false;
        };
        if !self.cqs.get(cq).is_some_and(|c| c.admission_fair_sharing) {
            return false;
        }
        let penalty = entry_penalty(&flatten(usage), cfg);
        self.afs.push_penalty(&LocalQueueKey::of(w), &w.key, penalty)
    }

    /// Keeps `key`'s unsettled entry penalty only while it can still settle under `home` (Kueue's
    /// `reconcileAfsPenaltiesOnUpdate`): `None`, or a LocalQueue other than the one it was recorded
    /// under, drops it.
    pub fn retain_entry_penalty(&mut self, key: &WorkloadKey, home: Option<&LocalQueueKey>) {
        if self.afs.penalized.get(key).is_some_and(|lq| Some(lq) != home) {
            self.afs.drop_penalty(key);
        }
    }

    /// Whether `key` has an entry penalty waiting to be settled.
    pub fn has_entry_penalty(&self, key: &WorkloadKey) -> bool {
        self.afs.penalized.contains_key(key)
    }

    /// Ranks again the pending workloads of every LocalQueue whose usage moved. Returns whether
    /// any position changed.
    pub(super) fn afs_rerank(&mut self) -> bool {
        let dirty = std::mem::take(&mut self.afs.dirty);
        let mut moved = false;
        for lq in dirty {
            let keys: Vec<WorkloadKey> = self
                .afs
                .pending
                .get(&lq)
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default();
            for k in keys {
                let Some(p) = self.pending.get(&k) else {
                    continue;
                };
                let r = self.afs_rank(&p.model);
                moved |= self.set_rank(&k, r);
            }
        }
        moved
    }
}

/// A preemption candidate's LocalQueue and usage rank, when its ClusterQueue uses admission fair
/// sharing (Kueue sets `LocalQueueFSUsage` only then; a LocalQueue with no history ranks 0).
pub(super) fn candidate_usage<'a>(
    afs: &Ledger,
    cqs: &BTreeMap<String, super::model::ClusterQueueModel>,
    w: &'a WorkloadModel,
    cq: &str,
) -> Option<(&'a str, u64)> {
    let cfg = afs.config.as_ref()?;
    if !cqs.get(cq).is_some_and(|c| c.admission_fair_sharing) {
        return None;
    }
    let r = afs.entries.get(&LocalQueueKey::of(w)).map_or(0, |e| rank(e.usage(cfg)));
    Some((w.local_queue.as_str(), r))
}

#[cfg(test)]
#[path = "admission_fair_sharing_tests.rs"]
mod tests;
