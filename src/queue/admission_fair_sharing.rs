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

    pub(super) fn of(w: &WorkloadModel) -> Self {
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
    pub(super) penalties: BTreeMap<WorkloadKey, Resources>,
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
    pub(super) config: Option<AfsConfig>,
    pub(super) entries: BTreeMap<LocalQueueKey, LocalQueueUsage>,
    /// Pending workloads per LocalQueue, to re-rank only those whose LocalQueue's usage moved.
    pub(super) pending: BTreeMap<LocalQueueKey, BTreeSet<WorkloadKey>>,
    /// LocalQueues whose usage moved since their workloads were last ranked.
    pub(super) dirty: BTreeSet<LocalQueueKey>,
    /// The LocalQueue each unsettled penalty is recorded under, to drop it by workload alone.
    pub(super) penalized: BTreeMap<WorkloadKey, LocalQueueKey>,
}

impl Ledger {
    /// Records `key`'s penalty under `lq`, replacing any it had (there or under another queue).
    pub(super) fn push_penalty(&mut self, lq: &LocalQueueKey, key: &WorkloadKey, penalty: Resources) -> bool {
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
    pub(super) fn take_penalty(&mut self, key: &WorkloadKey) -> Option<Resources> {
        let lq = self.penalized.remove(key)?;
        let p = self.entries.get_mut(&lq)?.penalties.remove(key)?;
        self.dirty.insert(lq);
        Some(p)
    }

    pub(super) fn drop_penalty(&mut self, key: &WorkloadKey) {
        self.take_penalty(key);
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
    let r = afs
        .entries
        .get(&LocalQueueKey::of(w))
        .map_or(0, |e| rank(e.usage(cfg)));
    Some((w.local_queue.as_str(), r))
}

#[cfg(test)]
#[path = "admission_fair_sharing_tests.rs"]
mod tests;
