//! Admission fair sharing inside the scheduler core: [`AdmissionCore`]'s methods that keep the ledger of
//! [`super::admission_fair_sharing`] (settling penalties, sampling usage, ranking pending workloads by their
//! LocalQueue's usage). The ledger and its arithmetic stay pure and below the scheduler; this file ties them
//! to it.

use std::collections::BTreeMap;

use super::admission_fair_sharing::*;
use super::amount::FrAmounts;
use super::model::{WorkloadKey, WorkloadModel};
use super::scheduler::AdmissionCore;

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
                let groups = self
                    .cqs
                    .get(cluster_queue)
                    .into_iter()
                    .flat_map(|c| &c.resource_groups);
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
        self.afs
            .entries
            .iter()
            .map(|(k, e)| (k, e, e.usage(cfg)))
            .collect()
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
        if !self
            .cqs
            .get(&w.cluster_queue)
            .is_some_and(|c| c.admission_fair_sharing)
        {
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
