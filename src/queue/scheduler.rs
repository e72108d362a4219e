//! `AdmissionCore`: the state (models, quota tree, queues, admitted workloads) and the
//! scheduling cycle over it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::amount::{Amount, FlavorResource, FrAmounts, add_into};
use super::fair_preemption::fair_targets;
use super::fair_sharing::{Contender, next_contender};
use super::flavor::{AssignCtx, Assignment, Mode, Possibility, assign};
use super::model::{
    Admission, ClusterQueueModel, CohortModel, FairSharingConfig, FlavorModel, QueueingStrategy, StopPolicy,
    WorkloadKey, WorkloadModel,
};
use super::pending::{OrderKey, PendingQueue};
use super::preemption::{Candidate, PreemptedReason, Preemptor, find_targets};
use super::tree::QuotaTree;
use super::{PendingReason, QueueError};

#[derive(Clone, Debug)]
pub(super) struct AdmittedWorkload {
    pub model: WorkloadModel,
    pub admission: Admission,
    pub usage: FrAmounts,
    pub admitted_at: i64,
    pub evicting: bool,
    /// What it can shrink back to when preempted (`set_floor`): its growth is taken first.
    pub floor: Option<FrAmounts>,
    /// Its growth was taken (`growth_only` target): held until it shrinks to its floor.
    pub taking_growth: bool,
}

impl AdmittedWorkload {
    /// It holds no more than its floor (or has none).
    pub(super) fn at_floor(&self) -> bool {
        self.floor.as_ref().is_none_or(|f| {
            self.usage
                .iter()
                .all(|(fr, v)| *v <= f.get(fr).copied().unwrap_or_default())
        })
    }

    /// This workload as a preemption candidate of ClusterQueue `cq_idx` (the scheduler's search and
    /// `explain`'s account of it build the same one).
    pub(super) fn candidate<'a>(&'a self, key: &'a WorkloadKey, cq_idx: usize) -> Candidate<'a> {
        Candidate {
            key,
            cq_idx,
            priority: self.model.priority,
            queue_timestamp: self.model.timestamp,
            admitted_at: self.admitted_at,
            uid: &self.model.uid,
            usage: &self.usage,
            evicting: self.evicting,
            lq_usage: None,
            floor: self.floor.as_ref(),
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct PendingWorkload {
    pub model: WorkloadModel,
    pub order: OrderKey,
    /// Hash of what decides the assignment (podsets); equal shapes get equal outcomes.
    pub shape: u64,
    pub reason: PendingReason,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmissionResult {
    pub key: WorkloadKey,
    pub admission: Admission,
    /// The slice this admission replaces (reported finished in `CycleResult::finished_slices`).
    pub replaced: Option<WorkloadKey>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvictionReason {
    Preempted(PreemptedReason),
    ClusterQueueStopped,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eviction {
    pub key: WorkloadKey,
    pub reason: EvictionReason,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingStatus {
    pub key: WorkloadKey,
    pub reason: PendingReason,
    pub message: String,
}

/// A slice finished because its replacement was admitted (`Finished`, reason `WorkloadSliceReplaced`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedSlice {
    pub key: WorkloadKey,
    pub replaced_by: WorkloadKey,
}

#[derive(Clone, Debug, Default)]
pub struct CycleResult {
    pub admissions: Vec<AdmissionResult>,
    pub evictions: Vec<Eviction>,
    /// Preemption victims that only give back their growth: each shrinks back to its floor
    /// (`AdmissionCore::set_floor`) instead of being evicted; Kueue's reason, and a message saying so.
    pub growth_taken: Vec<Eviction>,
    pub pending: Vec<PendingStatus>,
    pub finished_slices: Vec<FinishedSlice>,
    /// Workloads evaluated in this cycle (admission attempts).
    pub attempts: usize,
    /// Per ClusterQueue, preemptors skipped because another of this cycle claimed their victims
    /// (Kueue's `admission_cycle_preemption_skips`).
    pub preemption_skips: BTreeMap<String, usize>,
    /// Per ClusterQueue and result, preemptors whose victims another of the cycle had claimed and
    /// whose assignment was computed again (Kueue's `preemption_target_recomputations_total`).
    pub preemption_target_recomputations: BTreeMap<(String, Recomputation), usize>,
}

/// What computing a preemptor's assignment again gave, when another preemptor of the cycle had
/// claimed some of its victims (Kueue's `PreemptionTargetRecomputationResult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Recomputation {
    /// Victims none of the cycle's other preemptors claimed, after which it fits.
    NewTargets,
    /// It fits once the preemptions of the cycle complete: it waits for them.
    DeferredFit,
    /// Neither: it waits for the next cycle.
    Skipped,
}

impl Recomputation {
    /// Kueue's value of the `result` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Recomputation::NewTargets => "new_targets",
            Recomputation::DeferredFit => "deferred_fit",
            Recomputation::Skipped => "skipped",
        }
    }
}

/// Kueue's message for a preemptor that fits once the cycle's preemptions complete.
pub const DEFERRED_FIT_MESSAGE: &str = "Workload has overlapping preemption targets with another workload, but will fit after these preemptions complete";
/// Kueue's message for a preemptor skipped because its victims are another's of the cycle.
pub const OVERLAP_SKIP_MESSAGE: &str = "Workload has overlapping preemption targets with another workload";

#[derive(Default)]
pub struct AdmissionCore {
    pub(super) cqs: BTreeMap<String, ClusterQueueModel>,
    pub(super) cohorts: BTreeMap<String, CohortModel>,
    pub(super) flavors: BTreeMap<String, FlavorModel>,
    pub(super) tree: QuotaTree,
    pub(super) queues: BTreeMap<String, PendingQueue>,
    pub(super) pending: HashMap<WorkloadKey, PendingWorkload>,
    pub(super) admitted: HashMap<WorkloadKey, AdmittedWorkload>,
    pub(super) admitted_by_cq: BTreeMap<String, BTreeSet<WorkloadKey>>,
    /// replaced (admitted) slice -> its pending replacement
    pub(super) replacements: HashMap<WorkloadKey, WorkloadKey>,
    /// A workload that issued preemptions is retried first in its ClusterQueue, so others
    /// don't take the quota its victims free.
    waiting_preemptor: HashMap<String, WorkloadKey>,
    pub(super) dirty_roots: BTreeSet<String>,
    requeue_everything: bool,
    /// Bumped whenever usage grows inside a cycle; cached outcomes are valid for one generation.
    generation: u64,
    /// (ClusterQueue, priority, shape) -> generation, reason, message of a workload that could
    /// not be admitted: an equivalent workload gets the same answer without a new search
    /// (Kueue's scheduling-equivalence hashing, kept for one cycle).
    unfit_cache: HashMap<ShapeKey, (u64, PendingReason, String)>,
    /// Kueue's `fairSharing` config: DRS tournaments for admission order, fair-sharing
    /// preemption. `None`: the classical ones.
    pub(super) fair_sharing: Option<FairSharingConfig>,
    /// Admission fair sharing: configuration and per-LocalQueue usage.
    pub(super) afs: super::admission_fair_sharing::Ledger,
    /// Kueue's `PrioritizePreemptorWorkloads` gate (alpha, off by default): a preemptor waiting
    /// for its victims goes before other ClusterQueues' heads, and keeps its quota for the cycle
    /// when it finds no victim left.
    prioritize_preemptors: bool,
    /// Kueue's `RecomputeAssignmentUponPreemptionTargetsOverlap` gate turned off (it is on by
    /// default): a preemptor whose victims another of the cycle claimed is skipped, not recomputed.
    overlap_skip_only: bool,
    /// Topologies and Nodes, for placing podsets in TAS flavors.
    pub(super) tas: super::tas::TasCluster,
}

type ShapeKey = (usize, i32, u64);

struct Entry {
    order: OrderKey,
    cq: String,
    cq_idx: usize,
    assignment: Assignment,
    /// The outcome came from `unfit_cache`: message already final.
    cached: bool,
    /// Key and generation to cache an unfit outcome under; `None` when it must not be cached.
    cache_as: Option<(ShapeKey, u64)>,
}

impl Entry {
    /// `self` with another assignment, never cached: what a preemption search is asked about.
    fn probe(&self, assignment: Assignment) -> Entry {
        Entry {
            order: self.order.clone(),
            cq: self.cq.clone(),
            cq_idx: self.cq_idx,
            assignment,
            cached: false,
            cache_as: None,
        }
    }
}

/// What one scheduling cycle carries from ClusterQueue to ClusterQueue.
#[derive(Default)]
struct Cycle {
    /// Per ClusterQueue: where its walk through the queue stands.
    cursors: BTreeMap<String, Cursor>,
    /// Workloads evaluated in this cycle (each gets its pending status reported once).
    attempted: HashSet<WorkloadKey>,
    /// Workloads a preemptor of this cycle has already chosen as victims.
    targets: HashSet<WorkloadKey>,
    /// Those of `targets` that only give back their growth.
    growth_only: HashSet<WorkloadKey>,
    /// Quota held for the rest of the cycle only (Kueue adds it to the cycle's snapshot): what
    /// preemptors will take once their victims are gone, and what a ClusterQueue that cannot
    /// always reclaim keeps for a head with no victims. Taken back out when the cycle ends.
    reserved: Vec<(usize, FrAmounts)>,
    /// ClusterQueues that already hold quota for a head without victims: once per cycle, as
    /// Kueue, which takes one head per ClusterQueue per cycle.
    held_unreclaimable: HashSet<usize>,
    res: CycleResult,
}

#[derive(Default)]
struct Cursor {
    first: Option<OrderKey>,
    after: Option<OrderKey>,
    retry: Option<OrderKey>,
    done: bool,
    /// The head that stopped this ClusterQueue for the cycle (StrictFIFO or a preemptor).
    blocked_by: Option<WorkloadKey>,
}

fn validate_groups(
    field: &str,
    groups: &[super::model::ResourceGroup],
    has_parent: bool,
) -> Result<(), QueueError> {
    for (gi, g) in groups.iter().enumerate() {
        for (fi, f) in g.flavors.iter().enumerate() {
            let covered: BTreeSet<&String> = g.covered_resources.iter().collect();
            let listed: BTreeSet<&String> = f.resources.keys().collect();
            if covered != listed {
                return Err(QueueError::invalid(
                    format!("{field}.resourceGroups[{gi}].flavors[{fi}].resources"),
                    format!(
                        "flavor {} must list exactly the covered resources {covered:?}",
                        f.name
                    ),
                ));
            }
            for (r, q) in &f.resources {
                let path = format!("{field}.resourceGroups[{gi}].flavors[{fi}].resources[{r}]");
                if q.nominal < Amount::ZERO {
                    return Err(QueueError::invalid(
                        format!("{path}.nominalQuota"),
                        "must be non-negative",
                    ));
                }
                if q.borrowing_limit.is_some_and(|b| b < Amount::ZERO) {
                    return Err(QueueError::invalid(
                        format!("{path}.borrowingLimit"),
                        "must be non-negative",
                    ));
                }
                if q.lending_limit.is_some_and(|b| b < Amount::ZERO) {
                    return Err(QueueError::invalid(
                        format!("{path}.lendingLimit"),
                        "must be non-negative",
                    ));
                }
                if !has_parent && (q.borrowing_limit.is_some() || q.lending_limit.is_some()) {
                    return Err(QueueError::invalid(
                        format!("{path}.borrowingLimit"),
                        "borrowingLimit and lendingLimit need a cohort (parent)",
                    ));
                }
            }
        }
    }
    Ok(())
}

fn usage_of_admission(a: &Admission) -> FrAmounts {
    let mut u = FrAmounts::new();
    for ps in &a.pod_set_assignments {
        for (r, v) in &ps.resource_usage {
            if let Some(f) = ps.flavors.get(r) {
                *u.entry(FlavorResource::new(f, r)).or_default() += *v;
            }
        }
    }
    u
}

impl AdmissionCore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Turns fair sharing on (`Some`) or off; every pending workload is evaluated again.
    pub fn set_fair_sharing(&mut self, fs: Option<FairSharingConfig>) {
        if self.fair_sharing != fs {
            self.fair_sharing = fs;
            self.requeue_everything = true;
        }
    }

    pub fn fair_sharing(&self) -> Option<&FairSharingConfig> {
        self.fair_sharing.as_ref()
    }

    /// Kueue's `PrioritizePreemptorWorkloads` feature gate.
    pub fn set_prioritize_preemptors(&mut self, on: bool) {
        self.prioritize_preemptors = on;
    }

    /// Kueue's `RecomputeAssignmentUponPreemptionTargetsOverlap` feature gate (beta, on by default).
    pub fn set_recompute_on_overlap(&mut self, on: bool) {
        self.overlap_skip_only = !on;
    }

    /// Whether `e` is its ClusterQueue's waiting preemptor and the gate puts such workloads first.
    fn prioritized_preemptor(&self, e: &Entry) -> bool {
        self.prioritize_preemptors && self.waiting_preemptor.get(&e.cq) == Some(&e.order.key)
    }

    // ---- configuration ----

    pub fn upsert_cluster_queue(&mut self, cq: ClusterQueueModel) -> Result<(), QueueError> {
        let has_cohort = cq.cohort.as_ref().is_some_and(|c| !c.is_empty());
        validate_groups("spec", &cq.resource_groups, has_cohort)?;
        self.queues.entry(cq.name.clone()).or_default();
        self.cqs.insert(cq.name.clone(), cq);
        self.rebuild();
        Ok(())
    }

    pub fn delete_cluster_queue(&mut self, name: &str) {
        if self.cqs.remove(name).is_some() {
            self.rebuild();
        }
    }

    pub fn upsert_cohort(&mut self, c: CohortModel) -> Result<(), QueueError> {
        let has_parent = c.parent.as_ref().is_some_and(|p| !p.is_empty());
        validate_groups("spec", &c.resource_groups, has_parent)?;
        self.cohorts.insert(c.name.clone(), c);
        self.rebuild();
        Ok(())
    }

    pub fn delete_cohort(&mut self, name: &str) {
        if self.cohorts.remove(name).is_some() {
            self.rebuild();
        }
    }

    pub fn upsert_flavor(&mut self, f: FlavorModel) {
        self.flavors.insert(f.name.clone(), f);
        self.requeue_everything = true;
    }

    /// The Topologies and Nodes TAS flavors place over, replaced whole. A change requeues the parked
    /// workloads of the ClusterQueues naming a flavor whose view changed, with their cohort trees
    /// (see `tas_requeue`); a change no TAS flavor sees requeues nothing.
    pub fn set_tas_cluster(&mut self, tas: super::tas::TasCluster) {
        if self.tas == tas {
            return;
        }
        let changed = super::tas_requeue::changed_flavors(&self.flavors, &self.tas, &tas);
        for cq in super::tas_requeue::users(&self.cqs, &changed) {
            if let Some(i) = self.tree.cq(cq) {
                let root = self.tree.root(i);
                self.dirty_roots.insert(self.tree.nodes[root].name.clone());
            }
        }
        self.tas = tas;
    }

    pub fn delete_flavor(&mut self, name: &str) {
        self.flavors.remove(name);
        self.requeue_everything = true;
    }

    /// Rebuilds the tree from the models and re-applies the usage of every admitted workload.
    fn rebuild(&mut self) {
        self.tree = QuotaTree::build(self.cqs.values(), &self.cohorts);
        let mut keys: Vec<&WorkloadKey> = self.admitted.keys().collect();
        keys.sort();
        for k in keys {
            let a = &self.admitted[k];
            if let Some(i) = self.tree.cq(&a.admission.cluster_queue) {
                self.tree.add_all(i, &a.usage);
            }
        }
        self.requeue_everything = true;
    }

    // ---- workloads ----

    fn validate_workload(w: &WorkloadModel) -> Result<(), QueueError> {
        if w.podsets.is_empty() {
            return Err(QueueError::invalid(
                "spec.podSets",
                "at least one podset is required",
            ));
        }
        for (i, ps) in w.podsets.iter().enumerate() {
            if ps.count < 0 {
                return Err(QueueError::invalid(
                    format!("spec.podSets[{i}].count"),
                    "must be non-negative",
                ));
            }
            for (r, v) in &ps.requests {
                if *v < Amount::ZERO {
                    return Err(QueueError::invalid(
                        format!("spec.podSets[{i}].requests[{r}]"),
                        "must be non-negative",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Adds or updates a pending workload.
    pub fn add_workload(&mut self, w: WorkloadModel) -> Result<(), QueueError> {
        Self::validate_workload(&w)?;
        if self.admitted.contains_key(&w.key) {
            return Err(QueueError::AlreadyAdmitted(w.key.clone()));
        }
        if let Some(old) = &w.replacement_for {
            if self.pending.contains_key(old) {
                return Err(QueueError::ReplacesPending {
                    old: old.clone(),
                    new: w.key.clone(),
                });
            }
            if let Some(existing) = self.replacements.get(old)
                && *existing != w.key
            {
                return Err(QueueError::ReplacementAlreadyPending {
                    old: Box::new(old.clone()),
                    existing: Box::new(existing.clone()),
                    new: Box::new(w.key.clone()),
                });
            }
        }
        // A preemptor waiting for its victims stays first in its ClusterQueue across updates of
        // its Workload (its own status write is one), as Kueue's sticky head stays until the
        // workload is admitted, found unschedulable or deleted (kueue#6929, #7101).
        let sticky = self.waiting_preemptor.get(&w.cluster_queue) == Some(&w.key);
        self.remove_pending(&w.key);
        if sticky {
            self.waiting_preemptor
                .insert(w.cluster_queue.clone(), w.key.clone());
        }
        if let Some(old) = &w.replacement_for {
            self.replacements.insert(old.clone(), w.key.clone());
        }
        let mut order = OrderKey::of(&w);
        order.lq_usage = self.afs_rank(&w);
        self.afs_pending_added(&w);
        let shape = {
            use std::hash::{Hash, Hasher};
            let mut h = std::hash::DefaultHasher::new();
            w.podsets.hash(&mut h);
            h.finish()
        };
        self.queues
            .entry(w.cluster_queue.clone())
            .or_default()
            .push(order.clone());
        self.pending.insert(
            w.key.clone(),
            PendingWorkload {
                model: w,
                order,
                shape,
                reason: PendingReason::Pending,
                message: String::new(),
            },
        );
        Ok(())
    }

    fn remove_pending(&mut self, key: &WorkloadKey) -> Option<PendingWorkload> {
        let p = self.pending.remove(key)?;
        if let Some(q) = self.queues.get_mut(&p.model.cluster_queue) {
            q.remove(&p.order);
        }
        self.afs_pending_removed(&p.model);
        if let Some(old) = &p.model.replacement_for
            && self.replacements.get(old) == Some(key)
        {
            self.replacements.remove(old);
        }
        if self.waiting_preemptor.get(&p.model.cluster_queue) == Some(key) {
            self.waiting_preemptor.remove(&p.model.cluster_queue);
        }
        Some(p)
    }

    /// Records a workload admitted outside this core's cycle (e.g. read back from Workload status
    /// after a restart). Its usage counts even if it exceeds today's quota.
    pub fn record_admitted(
        &mut self,
        w: WorkloadModel,
        admission: Admission,
        admitted_at: i64,
    ) -> Result<(), QueueError> {
        Self::validate_workload(&w)?;
        self.remove_pending(&w.key);
        self.release(&w.key);
        let usage = usage_of_admission(&admission);
        if let Some(i) = self.tree.cq(&admission.cluster_queue) {
            self.tree.add_all(i, &usage);
        }
        self.admitted_by_cq
            .entry(admission.cluster_queue.clone())
            .or_default()
            .insert(w.key.clone());
        self.admitted.insert(
            w.key.clone(),
            AdmittedWorkload {
                model: w,
                admission,
                usage,
                admitted_at,
                evicting: false,
                floor: None,
                taking_growth: false,
            },
        );
        Ok(())
    }

    /// Releases the quota of a finished, evicted or deleted admitted workload. Returns whether it was
    /// admitted. Its admission fair sharing entry penalty stays: an evicted workload may still settle
    /// it (the caller drops it with `retain_entry_penalty` when it cannot).
    pub fn release(&mut self, key: &WorkloadKey) -> bool {
        let Some(a) = self.admitted.remove(key) else {
            return false;
        };
        if let Some(i) = self.tree.cq(&a.admission.cluster_queue) {
            self.tree.remove_all(i, &a.usage);
            let root = self.tree.root(i);
            self.dirty_roots.insert(self.tree.nodes[root].name.clone());
        }
        if let Some(s) = self.admitted_by_cq.get_mut(&a.admission.cluster_queue) {
            s.remove(key);
        }
        true
    }

    /// Removes a workload wherever it is (pending or admitted).
    pub fn delete_workload(&mut self, key: &WorkloadKey) -> bool {
        let was_pending = self.remove_pending(key).is_some();
        self.release(key) || was_pending
    }

    /// Applies a scale-down of an admitted workload in place, keeping its flavors, and frees the
    /// quota difference at once; its topology placement stays counted whole. Growth is refused: it
    /// needs a new slice.
    pub fn shrink_admitted(&mut self, w: WorkloadModel) -> Result<Admission, QueueError> {
        Self::validate_workload(&w)?;
        let Some(a) = self.admitted.get(&w.key) else {
            return Err(QueueError::NotAdmitted(w.key.clone()));
        };
        let mut any_flavor: BTreeMap<&String, &String> = BTreeMap::new();
        for ps in &a.admission.pod_set_assignments {
            for (r, f) in &ps.flavors {
                any_flavor.entry(r).or_insert(f);
            }
        }
        let mut admission = Admission {
            cluster_queue: a.admission.cluster_queue.clone(),
            pod_set_assignments: vec![],
        };
        for (i, ps) in w.podsets.iter().enumerate() {
            let old_ps = a.admission.pod_set_assignments.iter().find(|p| p.name == ps.name);
            let mut psa = super::model::PodSetAssignment {
                name: ps.name.clone(),
                count: ps.count,
                // As Kueue, the whole placement stays counted (`status.admission` is immutable):
                // which pods the job deletes is its own choice, so no domain is freed on a guess
                // that could put new pods on a node still running the old ones.
                topology: old_ps.and_then(|p| p.topology.clone()),
                ..Default::default()
            };
            for r in ps.requests.keys() {
                let total = ps.total(r);
                if total <= Amount::ZERO {
                    continue;
                }
                let f = old_ps
                    .and_then(|p| p.flavors.get(r))
                    .or_else(|| any_flavor.get(r).copied());
                let Some(f) = f else {
                    return Err(QueueError::invalid(
                        format!("spec.podSets[{i}].requests[{r}]"),
                        format!("resource {r} was not admitted for workload {}", w.key),
                    ));
                };
                psa.flavors.insert(r.clone(), f.clone());
                psa.resource_usage.insert(r.clone(), total);
            }
            super::flavor::charge_pods_on_shrink(old_ps, &mut psa);
            admission.pod_set_assignments.push(psa);
        }
        let usage = usage_of_admission(&admission);
        for (fr, v) in &usage {
            let old = a.usage.get(fr).copied().unwrap_or_default();
            if *v > old {
                return Err(QueueError::NotAShrink {
                    key: Box::new(w.key.clone()),
                    fr: Box::new(fr.clone()),
                    old,
                    new: *v,
                });
            }
        }
        let old_usage = a.usage.clone();
        if let Some(i) = self.tree.cq(&admission.cluster_queue) {
            self.tree.remove_all(i, &old_usage);
            self.tree.add_all(i, &usage);
            let root = self.tree.root(i);
            self.dirty_roots.insert(self.tree.nodes[root].name.clone());
        }
        if let Some(a) = self.admitted.get_mut(&w.key) {
            a.model = w;
            a.admission = admission.clone();
            a.usage = usage;
            // A victim whose growth was taken lets go of it here: it is no longer being evicted.
            if a.taking_growth && a.at_floor() {
                a.taking_growth = false;
                a.evicting = false;
            }
        }
        Ok(admission)
    }

    /// Marks an admitted workload as being evicted, as the scheduler marks its own evictions: the API
    /// shows it evicted while it still holds quota (after a restart, whose scheduler did not decide
    /// the eviction, or evicted by another writer). Its quota stays counted until it lets go, it is
    /// not chosen as a victim again, and a replacement slice for it waits.
    pub fn mark_evicting(&mut self, key: &WorkloadKey) {
        if let Some(a) = self.admitted.get_mut(key) {
            a.evicting = true;
        }
    }

    // ---- queries ----

    pub fn is_admitted(&self, key: &WorkloadKey) -> bool {
        self.admitted.contains_key(key)
    }

    pub fn admission(&self, key: &WorkloadKey) -> Option<&Admission> {
        self.admitted.get(key).map(|a| &a.admission)
    }

    pub fn pending_reason(&self, key: &WorkloadKey) -> Option<(PendingReason, &str)> {
        self.pending.get(key).map(|p| (p.reason, p.message.as_str()))
    }

    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    pub fn admitted_keys(&self) -> Vec<WorkloadKey> {
        let mut v: Vec<WorkloadKey> = self.admitted.keys().cloned().collect();
        v.sort();
        v
    }

    /// The core knows the workload, admitted or pending.
    pub fn knows(&self, key: &WorkloadKey) -> bool {
        self.admitted.contains_key(key) || self.pending.contains_key(key)
    }

    /// Every workload the core knows, admitted or pending, unordered and without copying.
    pub fn known_keys(&self) -> impl Iterator<Item = &WorkloadKey> {
        self.admitted.keys().chain(self.pending.keys())
    }

    pub fn pending_keys(&self) -> Vec<WorkloadKey> {
        let mut v: Vec<WorkloadKey> = self.pending.keys().cloned().collect();
        v.sort();
        v
    }

    /// Total admitted usage per (flavor, resource) of one ClusterQueue.
    pub fn cq_usage(&self, cq: &str) -> FrAmounts {
        let mut u = FrAmounts::new();
        for k in self.admitted_by_cq.get(cq).into_iter().flatten() {
            if let Some(a) = self.admitted.get(k) {
                add_into(&mut u, &a.usage);
            }
        }
        u
    }

    pub fn tree(&self) -> &QuotaTree {
        &self.tree
    }

    /// Why a ClusterQueue cannot admit, if it cannot.
    pub fn inactive_reason(&self, cq: &str) -> Option<(PendingReason, String)> {
        // Kueue's words: the workload controller's for a missing or stopped ClusterQueue, the
        // scheduler's for any other inactive one. Why it is inactive (a missing flavor, a cohort
        // cycle) is on the ClusterQueue's own Active condition, not repeated on every workload.
        let Some(model) = self.cqs.get(cq) else {
            return Some((PendingReason::Misconfigured, missing_cq(cq)));
        };
        if model.stop_policy != StopPolicy::None || model.terminating {
            // Kueue says "inactive" for a stopped one too (`workload_controller_test.go`,
            // "should write granular conditions and reasons when clusterQueue is inactive").
            return Some((PendingReason::Suspended, format!("ClusterQueue {cq} is inactive")));
        }
        let idx = self.tree.cq(cq)?;
        let flavor_missing = model
            .resource_groups
            .iter()
            .flat_map(|g| &g.flavors)
            .any(|f| !self.flavors.contains_key(&f.name));
        if flavor_missing || self.tree.disabled_reason(idx).is_some() {
            return Some((PendingReason::Suspended, format!("ClusterQueue {cq} is inactive")));
        }
        None
    }

    // ---- the cycle ----

    fn apply_requeues(&mut self) {
        if std::mem::take(&mut self.requeue_everything) {
            self.dirty_roots.clear();
            for q in self.queues.values_mut() {
                q.requeue_all();
            }
            return;
        }
        let dirty = std::mem::take(&mut self.dirty_roots);
        if dirty.is_empty() {
            return;
        }
        for (name, q) in self.queues.iter_mut() {
            let root = self
                .tree
                .cq(name)
                .map(|i| self.tree.nodes[self.tree.root(i)].name.as_str());
            if root.is_some_and(|r| dirty.contains(r)) {
                q.requeue_all();
            }
        }
    }

    fn drain_stopped(&mut self, res: &mut CycleResult) {
        for (name, cq) in &self.cqs {
            if cq.stop_policy != StopPolicy::HoldAndDrain {
                continue;
            }
            for k in self.admitted_by_cq.get(name).into_iter().flatten() {
                if let Some(a) = self.admitted.get_mut(k)
                    && !a.evicting
                {
                    a.evicting = true;
                    res.evictions.push(Eviction {
                        key: k.clone(),
                        reason: EvictionReason::ClusterQueueStopped,
                        message: "The ClusterQueue is stopped".to_string(),
                    });
                }
            }
        }
    }

    /// One scheduling cycle at time `now`: every ClusterQueue's heads are evaluated in rounds
    /// against the live quota tree until none is left to try, so several workloads per
    /// ClusterQueue can be admitted in one cycle while StrictFIFO order is kept.
    pub fn schedule_cycle(&mut self, now: i64) -> CycleResult {
        let mut cy = Cycle::default();
        self.unfit_cache.clear();
        self.apply_requeues();
        self.afs_rerank();
        self.drain_stopped(&mut cy.res);
        let names: Vec<String> = self
            .queues
            .iter()
            .filter(|(_, q)| q.active_len() > 0)
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            if let Some((reason, message)) = self.inactive_reason(&name) {
                self.park_whole_queue(&name, reason, &message, &mut cy.attempted);
                continue;
            }
            let first = self
                .waiting_preemptor
                .get(&name)
                .and_then(|k| self.pending.get(k))
                .map(|p| p.order.clone());
            cy.cursors.insert(
                name,
                Cursor {
                    first,
                    ..Default::default()
                },
            );
        }
        loop {
            let mut entries: Vec<Entry> = Vec::new();
            for (name, cur) in cy.cursors.iter_mut() {
                if cur.done {
                    continue;
                }
                let head = if let Some(r) = cur.retry.take() {
                    Some(r)
                } else if let Some(f) = cur.first.take() {
                    Some(f)
                } else {
                    let q = &self.queues[name];
                    let mut h = q.next_after(cur.after.as_ref()).cloned();
                    while let Some(k) = &h {
                        if !cy.attempted.contains(&k.key) {
                            break;
                        }
                        h = q.next_after(Some(k)).cloned();
                    }
                    if let Some(k) = &h {
                        cur.after = Some(k.clone());
                    }
                    h
                };
                let Some(head) = head else {
                    cur.done = true;
                    continue;
                };
                cy.res.attempts += 1;
                let own = self.tree.cq(name);
                hold_reserved(&mut self.tree, &cy.reserved, own, false);
                let nominated = self.nominate(&head);
                hold_reserved(&mut self.tree, &cy.reserved, own, true);
                match nominated {
                    Ok(e) => entries.push(e),
                    Err((reason, message)) => {
                        cy.attempted.insert(head.key.clone());
                        // Misconfiguration does not block StrictFIFO: the workload cannot be admitted here at all.
                        self.set_pending(&head.key, reason, message, true);
                    }
                }
            }
            if entries.is_empty() {
                if cy.cursors.values().all(|c| c.done) {
                    break;
                }
                continue;
            }
            if self.fair_sharing.is_none() {
                // Kueue's classical iterator: the lower borrowing level first (a workload drawing on
                // a nearer cohort's quota goes before one borrowing from the root), then the queue order.
                // (LocalQueue usage orders only within a ClusterQueue, as in Kueue.)
                // With PrioritizePreemptorWorkloads, waiting preemptors go first.
                entries.sort_by(|a, b| {
                    let ka = (
                        !self.prioritized_preemptor(a),
                        a.assignment.borrowing,
                        a.order.base(),
                    );
                    let kb = (
                        !self.prioritized_preemptor(b),
                        b.assignment.borrowing,
                        b.order.base(),
                    );
                    ka.cmp(&kb)
                });
                // Popped from the back below.
                entries.reverse();
            }
            while let Some(e) = self.next_entry(&mut entries) {
                // A ClusterQueue's own reservations do not hold back its later heads (Kueue
                // takes one head per ClusterQueue per cycle, so they only ever stop others).
                let (own, n) = (Some(e.cq_idx), cy.reserved.len());
                hold_reserved(&mut self.tree, &cy.reserved, own, false);
                self.process(e, now, &mut cy);
                hold_reserved(&mut self.tree, &cy.reserved[..n], own, true);
            }
        }
        for (i, usage) in std::mem::take(&mut cy.reserved) {
            self.tree.remove_all(i, &usage);
        }
        self.explain_blocked(&cy.cursors, &mut cy.attempted);
        let mut res = cy.res;
        for k in cy.attempted {
            if let Some(p) = self.pending.get(&k) {
                let (reason, message) = (p.reason, p.message.clone());
                res.pending.push(PendingStatus {
                    key: k,
                    reason,
                    message,
                });
            }
        }
        // Hash order is not deterministic; the report is.
        res.pending.sort_by(|a, b| a.key.cmp(&b.key));
        res
    }

    /// The next entry of a round: the last one (classical order, sorted in reverse), or with fair
    /// sharing the winner of Kueue's DRS tournament over the tree as the round has changed it.
    fn next_entry(&mut self, entries: &mut Vec<Entry>) -> Option<Entry> {
        if self.fair_sharing.is_none() || entries.len() < 2 {
            return entries.pop();
        }
        let contenders: Vec<Contender<'_>> = entries
            .iter()
            .map(|e| Contender {
                cq_idx: e.cq_idx,
                usage: &e.assignment.usage,
                order: &e.order,
                preemptor: self.prioritized_preemptor(e),
            })
            .collect();
        let i = next_contender(&mut self.tree, &contenders).unwrap_or(0);
        Some(entries.remove(i))
    }

    /// Workloads never evaluated because their ClusterQueue's head blocked still get a reason,
    /// once (they keep it until evaluated).
    fn explain_blocked(&mut self, cursors: &BTreeMap<String, Cursor>, reported: &mut HashSet<WorkloadKey>) {
        for (name, cur) in cursors {
            let Some(blocker) = &cur.blocked_by else {
                continue;
            };
            let Some(q) = self.queues.get(name) else {
                continue;
            };
            let mut unexplained = Vec::new();
            let mut at = None;
            while let Some(k) = q.next_after(at.as_ref()).cloned() {
                if &k.key != blocker
                    && self
                        .pending
                        .get(&k.key)
                        .is_some_and(|p| p.reason == PendingReason::Pending && p.message.is_empty())
                {
                    unexplained.push(k.key.clone());
                }
                at = Some(k);
            }
            for k in unexplained {
                if let Some(p) = self.pending.get_mut(&k) {
                    // Not naming the head: it changes, and the message should not.
                    p.message = format!(
                        "waiting behind the head of ClusterQueue {name}, which does not fit (StrictFIFO)"
                    );
                    reported.insert(k);
                }
            }
        }
    }

    fn park_whole_queue(
        &mut self,
        name: &str,
        reason: PendingReason,
        message: &str,
        attempted: &mut HashSet<WorkloadKey>,
    ) {
        let mut keys = Vec::new();
        if let Some(q) = self.queues.get(name) {
            let mut cur = None;
            while let Some(k) = q.next_after(cur.as_ref()).cloned() {
                keys.push(k.clone());
                cur = Some(k);
            }
        }
        for k in keys {
            attempted.insert(k.key.clone());
            self.set_pending(&k.key, reason, message.to_string(), true);
        }
    }

    /// Records a pending reason; `park` moves the workload to the inadmissible set.
    fn set_pending(&mut self, key: &WorkloadKey, reason: PendingReason, message: String, park: bool) {
        let Some(p) = self.pending.get_mut(key) else {
            return;
        };
        p.reason = reason;
        p.message = message;
        if park && let Some(q) = self.queues.get_mut(&p.model.cluster_queue) {
            q.park(&p.order);
        }
    }

    /// The admitted slice a pending replacement replaces, when it is admitted in the same ClusterQueue.
    fn replaced_slice(&self, w: &WorkloadModel) -> Option<&AdmittedWorkload> {
        let old = self.admitted.get(w.replacement_for.as_ref()?)?;
        (old.admission.cluster_queue == w.cluster_queue).then_some(old)
    }

    fn nominate(&mut self, head: &OrderKey) -> Result<Entry, (PendingReason, String)> {
        let p = self
            .pending
            .get(&head.key)
            .ok_or((PendingReason::Misconfigured, "workload vanished".to_string()))?;
        let w = &p.model;
        let cq_name = w.cluster_queue.clone();
        let (Some(cq), Some(cq_idx)) = (self.cqs.get(&cq_name), self.tree.cq(&cq_name)) else {
            return Err((PendingReason::Misconfigured, missing_cq(&cq_name)));
        };
        let ns_ok = cq
            .namespace_selector
            .as_ref()
            .is_some_and(|s| s.matches(&w.namespace_labels));
        if !ns_ok {
            // Kueue's `ErrNamespaceMismatch`, word for word.
            return Err((
                PendingReason::Misconfigured,
                "workload namespace doesn't match ClusterQueue selector".to_string(),
            ));
        }
        // A slice being evicted is stopped whole and its job requeued whole: a replacement admitted on
        // top of it would finish it as replaced while its job is stopping (DESIGN I6). The job
        // deletes such a replacement.
        if self.replaced_slice(w).is_some_and(|o| o.evicting) {
            return Err((
                PendingReason::Pending,
                "the workload slice it replaces is being evicted".to_string(),
            ));
        }
        let old = self
            .replaced_slice(w)
            .map(|o| (o.usage.clone(), forced_flavors(&o.admission)));
        // Outcomes depend on the queue timestamp only under LowerOrNewerEqualPriority, and
        // slices depend on their old slice: those are never shared.
        let cache_as = (old.is_none()
            && cq.preemption.within_cluster_queue
                != super::model::WithinClusterQueue::LowerOrNewerEqualPriority)
            .then_some(((cq_idx, w.priority, p.shape), self.generation));
        if let Some(((_, now_gen), (cached_gen, reason, msg))) = cache_as
            .as_ref()
            .and_then(|c| Some((c, self.unfit_cache.get(&c.0)?)))
            && cached_gen == now_gen
        {
            return Ok(Entry {
                order: head.clone(),
                cq: cq_name,
                cq_idx,
                assignment: Assignment::no_fit(*reason, msg.clone()),
                cached: true,
                cache_as: None,
            });
        }
        let replaced = w.replacement_for.clone();
        let sim = self.tree.without_usage(cq_idx, old.as_ref().map(|(u, _)| u));
        let base: &QuotaTree = &sim;
        let ctx = AssignCtx {
            tree: base,
            cq_idx,
            cq,
            flavors: &self.flavors,
            forced: old.as_ref().map(|(_, f)| f),
            nominated: None,
            oracle: Some(&|fr, val| {
                let held = (&self.admitted, &self.admitted_by_cq);
                let fs = self.fair_sharing.as_ref();
                simulate_preemption(held, base, (cq_idx, cq), w, (fr, val), replaced.as_ref(), fs)
            }),
            fair_sharing: self.fair_sharing.is_some(),
        };
        let mut assignment = assign(&ctx, w);
        let tas_only = ctx.tas_only();
        drop(sim);
        if assignment.mode == Mode::Fit {
            let admitted = self
                .admitted
                .values()
                .filter(|a| Some(&a.model.key) != w.replacement_for.as_ref())
                .map(|a| (&a.model, &a.admission));
            if let Err(message) =
                self.tas
                    .place_workload(&self.flavors, tas_only, w, &mut assignment.podsets, admitted)
            {
                // Kueue: a podset with no room in its topology preempts to free a domain when it
                // would fit the topology with nothing admitted (`WithSimulateEmpty`), marking the
                // TAS flavors' resources as needing preemption; else it does not fit.
                let mut trial = assignment.podsets.clone();
                let empty = self
                    .tas
                    .place_workload(&self.flavors, tas_only, w, &mut trial, std::iter::empty())
                    .is_ok();
                assignment.mode = if empty { Mode::Preempt } else { Mode::NoFit };
                assignment.topology_preempt = empty;
                assignment.reason = PendingReason::Pending;
                assignment.message = message;
                if empty {
                    let tas_frs = self.tas_flavor_resources(&assignment.podsets);
                    assignment.preempt_frs.extend(tas_frs);
                }
            }
        }
        Ok(Entry {
            order: head.clone(),
            cq: cq_name,
            cq_idx,
            assignment,
            cached: false,
            cache_as,
        })
    }

    /// Takes one nominated entry: a cached verdict fails at once; otherwise its victims are chosen
    /// and, by its mode, it fails, waits for its preemptions, or is admitted.
    fn process(&mut self, mut e: Entry, now: i64, cy: &mut Cycle) {
        let strict = self
            .cqs
            .get(&e.cq)
            .is_some_and(|c| c.queueing_strategy == QueueingStrategy::StrictFifo);
        let key = e.order.key.clone();
        let old = self
            .pending
            .get(&key)
            .and_then(|p| self.replaced_slice(&p.model))
            .map(|o| (o.model.key.clone(), o.usage.clone()));
        if e.cached {
            cy.attempted.insert(key.clone());
            self.fail(&key, e.assignment.reason, e.assignment.message, strict, cy, &e.cq);
            return;
        }
        let targets = self.choose_victims(&mut e, old.as_ref(), cy);
        if e.assignment.mode == Mode::Preempt && targets.is_empty() && e.assignment.topology_preempt {
            // No victim frees a domain: it waits for room, as a podset that does not fit.
            e.assignment.mode = Mode::NoFit;
        }
        match e.assignment.mode {
            Mode::NoFit => self.no_fit(e, &key, strict, cy),
            Mode::Preempt => self.preempt(e, targets, old.as_ref(), &key, strict, cy),
            Mode::Fit => self.fit(e, old, now, cy),
        }
    }

    /// The victims of an entry: for a preempting one, chosen as at nomination; an entry that
    /// neither fits nor has victims may shrink to what fits (`reduce_counts`), with its victims.
    fn choose_victims(
        &mut self,
        e: &mut Entry,
        old: Option<&(WorkloadKey, FrAmounts)>,
        cy: &Cycle,
    ) -> Vec<super::preemption::Target> {
        let mut targets = Vec::new();
        if e.assignment.mode == Mode::Preempt {
            // Victims are chosen as at nomination (Kueue's snapshot before this cycle's
            // reservations); whether the preemptor then still fits is checked in `preempt`.
            let others = cy.reserved.iter().filter(|(i, _)| *i != e.cq_idx);
            for (i, u) in others.clone() {
                self.tree.remove_all(*i, u);
            }
            targets = self.preemption_targets(e, old);
            for (i, u) in others {
                self.tree.add_all(*i, u);
            }
        }
        if e.assignment.mode != Mode::Fit
            && targets.is_empty()
            && let Some((a, t)) = self.reduce_counts(e)
        {
            e.assignment = a;
            targets = t;
        }
        targets
    }

    /// An entry that does not fit: pending with the assignment's own message, cached for
    /// equivalent workloads of this cycle.
    fn no_fit(&mut self, e: Entry, key: &WorkloadKey, strict: bool, cy: &mut Cycle) {
        cy.attempted.insert(key.clone());
        // The assignment's own message already names what is short, in Kueue's words.
        let msg = e.assignment.message.clone();
        if let Some((ck, generation)) = e.cache_as {
            self.unfit_cache
                .insert(ck, (generation, e.assignment.reason, msg.clone()));
        }
        self.fail(key, e.assignment.reason, msg, strict, cy, &e.cq);
    }

    /// An entry that must preempt: with no victims it waits for quota; with victims another
    /// preemptor already claimed, or after which it no longer fits, it waits for the next cycle;
    /// otherwise its victims are evicted and it holds its growth for the cycle.
    fn preempt(
        &mut self,
        mut e: Entry,
        mut targets: Vec<super::preemption::Target>,
        old: Option<&(WorkloadKey, FrAmounts)>,
        key: &WorkloadKey,
        strict: bool,
        cy: &mut Cycle,
    ) {
        cy.attempted.insert(key.clone());
        if targets.is_empty() {
            // Kueue leaves the assignment's own message: what is short, in its words.
            let msg = e.assignment.message.clone();
            // Only cache when nothing changed between assignment and the search.
            if let Some((ck, generation)) = e.cache_as
                && generation == self.generation
            {
                self.unfit_cache
                    .insert(ck, (generation, PendingReason::WaitingForQuota, msg.clone()));
            }
            self.reserve_for_unreclaimable(&e, old.map(|(_, u)| u), cy);
            self.fail(key, PendingReason::WaitingForQuota, msg, strict, cy, &e.cq);
            return;
        }
        if let Some(c) = cy.cursors.get_mut(&e.cq) {
            c.done = true;
            c.blocked_by = Some(key.clone());
        }
        if targets.iter().any(|t| cy.targets.contains(&t.key)) {
            if self.overlap_skip_only {
                // Another preemptor of this cycle already claimed these victims; retry next cycle.
                *cy.res.preemption_skips.entry(e.cq.clone()).or_default() += 1;
                self.set_pending(
                    key,
                    PendingReason::WaitingForQuota,
                    OVERLAP_SKIP_MESSAGE.into(),
                    false,
                );
                return;
            }
            match self.recompute_on_overlap(&mut e, old, key, strict, cy) {
                Some(t) => targets = t,
                None => return,
            }
        }
        if !self.fits_after_preemptions(&e, &targets, cy, old) {
            // Kueue: quota an earlier preemptor of this cycle holds is gone; preempting
            // now would evict for nothing.
            self.set_pending(
                key,
                PendingReason::WaitingForQuota,
                "Workload no longer fits after processing another workload".into(),
                false,
            );
            return;
        }
        // An upgrade's slice does not evict for an admission the banker's check would refuse.
        let freed: Vec<&WorkloadKey> = targets
            .iter()
            .map(|t| &t.key)
            .chain(old.map(|(k, _)| k))
            .collect();
        if let Some(msg) =
            self.banker_refusal(key, e.cq_idx, &e.assignment.usage, &e.assignment.podsets, &freed)
        {
            self.set_pending(key, PendingReason::WaitingForQuota, msg, false);
            return;
        }
        let n = targets.len();
        self.evict_for(&e, key, targets, cy);
        self.waiting_preemptor.insert(e.cq.clone(), key.clone());
        // The replaced slice still holds its part: only the growth is held for the cycle
        // (Kueue's assignment usage of a slice is the delta).
        let held = growth(&e.assignment.usage, old.map(|(_, u)| u));
        self.reserve(e.cq_idx, held, cy);
        self.set_pending(
            key,
            PendingReason::WaitingForPreemptedWorkloads,
            format!(
                "{}. Pending the preemption of {n} workload(s)",
                e.assignment.message
            ),
            false,
        );
    }

    /// Kueue's `updateAssignmentIfNeeded` when preemption targets overlap (the "hero workload"):
    /// another preemptor of the cycle claimed some of `e`'s victims, so its assignment is computed
    /// again as if every victim of the cycle were gone, keeping to the flavors it was nominated.
    /// If it then fits, it only fits once those preemptions complete: it holds its quota for the
    /// cycle and waits (`DeferredFit`). If it must preempt and finds victims no one claimed after
    /// which it fits, those are returned to be preempted (`NewTargets`). Otherwise it waits for the
    /// next cycle as before (`Skipped`). Each outcome is counted per ClusterQueue.
    fn recompute_on_overlap(
        &mut self,
        e: &mut Entry,
        old: Option<&(WorkloadKey, FrAmounts)>,
        key: &WorkloadKey,
        strict: bool,
        cy: &mut Cycle,
    ) -> Option<Vec<super::preemption::Target>> {
        let nominated = nomination(&e.assignment);
        let victims = self.cycle_victims(cy, &[], None);
        for (i, u) in &victims {
            self.tree.remove_all(*i, u);
        }
        let assignment = self.assign_again(e, old, &nominated, &cy.targets);
        let targets = match assignment.mode {
            Mode::Preempt => {
                let probe = e.probe(assignment);
                let t = self.preemption_targets_except(&probe, old, &cy.targets);
                e.assignment = probe.assignment;
                t
            }
            _ => {
                e.assignment = assignment;
                Vec::new()
            }
        };
        for (i, u) in &victims {
            self.tree.add_all(*i, u);
        }
        let (result, targets) = match e.assignment.mode {
            Mode::Fit => {
                // Kueue adds its usage to the cycle's snapshot: later heads cannot take it.
                let held = growth(&e.assignment.usage, old.map(|(_, u)| u));
                self.reserve(e.cq_idx, held, cy);
                self.set_pending(
                    key,
                    PendingReason::WaitingForPreemptedWorkloads,
                    DEFERRED_FIT_MESSAGE.into(),
                    false,
                );
                (Recomputation::DeferredFit, None)
            }
            Mode::Preempt if !targets.is_empty() && self.fits_after_preemptions(e, &targets, cy, old) => {
                (Recomputation::NewTargets, Some(targets))
            }
            Mode::NoFit => {
                let msg = e.assignment.message.clone();
                self.fail(key, e.assignment.reason, msg, strict, cy, &e.cq);
                (Recomputation::Skipped, None)
            }
            Mode::Preempt if targets.is_empty() => {
                let msg = e.assignment.message.clone();
                self.fail(key, PendingReason::WaitingForQuota, msg, strict, cy, &e.cq);
                (Recomputation::Skipped, None)
            }
            Mode::Preempt => {
                *cy.res.preemption_skips.entry(e.cq.clone()).or_default() += 1;
                self.set_pending(
                    key,
                    PendingReason::WaitingForQuota,
                    "Workload no longer fits after processing another workload".into(),
                    false,
                );
                (Recomputation::Skipped, None)
            }
        };
        *cy.res
            .preemption_target_recomputations
            .entry((e.cq.clone(), result))
            .or_default() += 1;
        targets
    }

    /// `e`'s assignment computed again on the tree as it stands, keeping to the `nominated`
    /// flavors, with the workloads in `gone` no longer candidates for preemption.
    fn assign_again(
        &mut self,
        e: &Entry,
        old: Option<&(WorkloadKey, FrAmounts)>,
        nominated: &BTreeMap<String, BTreeSet<String>>,
        gone: &HashSet<WorkloadKey>,
    ) -> Assignment {
        let (Some(p), Some(cq)) = (self.pending.get(&e.order.key), self.cqs.get(&e.cq)) else {
            return Assignment::no_fit(PendingReason::Misconfigured, "workload vanished".into());
        };
        let w = &p.model;
        let forced = self.replaced_slice(w).map(|o| forced_flavors(&o.admission));
        let by_cq: BTreeMap<String, BTreeSet<WorkloadKey>> = self
            .admitted_by_cq
            .iter()
            .map(|(n, ks)| {
                (
                    n.clone(),
                    ks.iter().filter(|k| !gone.contains(*k)).cloned().collect(),
                )
            })
            .collect();
        let replaced = w.replacement_for.clone();
        let cq_idx = e.cq_idx;
        let sim = self.tree.without_usage(cq_idx, old.map(|(_, u)| u));
        let base: &QuotaTree = &sim;
        let ctx = AssignCtx {
            tree: base,
            cq_idx,
            cq,
            flavors: &self.flavors,
            forced: forced.as_ref(),
            nominated: Some(nominated),
            oracle: Some(&|fr, val| {
                let held = (&self.admitted, &by_cq);
                let fs = self.fair_sharing.as_ref();
                simulate_preemption(held, base, (cq_idx, cq), w, (fr, val), replaced.as_ref(), fs)
            }),
            fair_sharing: self.fair_sharing.is_some(),
        };
        assign(&ctx, w)
    }

    /// Claims `targets` for this cycle and evicts each one not already being evicted, with
    /// Kueue's preemption message naming the preemptor `key` of entry `e`.
    fn evict_for(
        &mut self,
        e: &Entry,
        key: &WorkloadKey,
        targets: Vec<super::preemption::Target>,
        cy: &mut Cycle,
    ) {
        let (uid, job_uid) = self
            .pending
            .get(key)
            .map_or(("", None), |p| (p.model.uid.as_str(), p.model.job_uid.as_deref()));
        let preemptor = (
            or_unknown(uid).to_string(),
            or_unknown(job_uid.unwrap_or_default()).to_string(),
            self.tree.path(e.cq_idx),
        );
        for t in targets {
            cy.targets.insert(t.key.clone());
            if t.growth_only {
                cy.growth_only.insert(t.key.clone());
                let (uid, job_uid, path) = (&preemptor.0, &preemptor.1, &preemptor.2);
                if let Some(ev) = self.take_growth(&t, &format!("(UID: {uid}, JobUID: {job_uid})"), path) {
                    cy.res.growth_taken.push(ev);
                }
                continue;
            }
            // One whose growth is being taken may still be evicted whole.
            if let Some(a) = self.admitted.get_mut(&t.key)
                && (!a.evicting || a.taking_growth)
            {
                a.evicting = true;
                a.taking_growth = false;
                let preemptee = self
                    .tree
                    .cq(&a.admission.cluster_queue)
                    .map_or_else(|| "UNKNOWN".to_string(), |i| self.tree.path(i));
                // Kueue's `preemptionMessage`, word for word.
                cy.res.evictions.push(Eviction {
                    message: format!(
                        "Preempted to accommodate a workload (UID: {}, JobUID: {}) due to {}; preemptor path: {}; preemptee path: {preemptee}",
                        preemptor.0,
                        preemptor.1,
                        preempt_text(t.reason),
                        preemptor.2,
                    ),
                    key: t.key,
                    reason: EvictionReason::Preempted(t.reason),
                });
            }
        }
    }

    /// An entry that fits: admitted unless quota changed under it in this cycle (then it is
    /// evaluated again in the next round).
    fn fit(&mut self, e: Entry, old: Option<(WorkloadKey, FrAmounts)>, now: i64, cy: &mut Cycle) {
        // An upgrade's slice waits if admitting it could leave an upgrade unable to finish (`banker`).
        let freed: Vec<&WorkloadKey> = old.iter().map(|(k, _)| k).collect();
        if let Some(msg) = self.banker_refusal(
            &e.order.key,
            e.cq_idx,
            &e.assignment.usage,
            &e.assignment.podsets,
            &freed,
        ) {
            let strict = self
                .cqs
                .get(&e.cq)
                .is_some_and(|c| c.queueing_strategy == QueueingStrategy::StrictFifo);
            cy.attempted.insert(e.order.key.clone());
            self.fail(
                &e.order.key.clone(),
                PendingReason::WaitingForQuota,
                msg,
                strict,
                cy,
                &e.cq,
            );
            return;
        }
        // The replaced slice's usage makes room for its successor; it stays out only
        // when the successor is admitted.
        let without = self.tree.without_usage(e.cq_idx, old.as_ref().map(|(_, u)| u));
        if !without.fits(e.cq_idx, &e.assignment.usage) {
            // Quota changed under it in this cycle: evaluate again in the next round.
            if let Some(c) = cy.cursors.get_mut(&e.cq) {
                c.retry = Some(e.order.clone());
            }
            return;
        }
        without.keep();
        cy.attempted.insert(e.order.key.clone());
        let cq = e.cq.clone();
        if self.admit(e, old.map(|(k, _)| k), now, &mut cy.res) && self.afs_rerank() {
            // Admission fair sharing: the LocalQueue's entry penalty moved its workloads;
            // the walk through this ClusterQueue starts again from its new head.
            if let Some(c) = cy.cursors.get_mut(&cq) {
                c.after = None;
            }
        }
    }

    fn reserve(&mut self, cq_idx: usize, usage: FrAmounts, cy: &mut Cycle) {
        self.tree.add_all(cq_idx, &usage);
        self.generation += 1;
        cy.reserved.push((cq_idx, usage));
    }

    /// Kueue's `fits`: with every victim of this cycle (and `targets`) taken out, whether the
    /// preemptor's usage fits beside what the cycle already holds. The slice a replacement
    /// replaces counts as freed too: Kueue makes it one of the preemption targets (and drops it
    /// from them before evicting), so only the growth has to fit.
    fn fits_after_preemptions(
        &mut self,
        e: &Entry,
        targets: &[super::preemption::Target],
        cy: &Cycle,
        replaced: Option<&(WorkloadKey, FrAmounts)>,
    ) -> bool {
        let victims = self.cycle_victims(cy, targets, replaced);
        for (i, u) in &victims {
            self.tree.remove_all(*i, u);
        }
        let fits = self.tree.fits(e.cq_idx, &e.assignment.usage);
        for (i, u) in &victims {
            self.tree.add_all(*i, u);
        }
        fits
    }

    /// What every victim of this cycle (and `targets`, and the slice `replaced`) gives back, per
    /// ClusterQueue index.
    fn cycle_victims(
        &self,
        cy: &Cycle,
        targets: &[super::preemption::Target],
        replaced: Option<&(WorkloadKey, FrAmounts)>,
    ) -> Vec<(usize, FrAmounts)> {
        cy.targets
            .iter()
            .chain(targets.iter().map(|t| &t.key))
            .chain(replaced.map(|(k, _)| k))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter_map(|k| {
                let a = self.admitted.get(k)?;
                // A victim that only gives back its growth frees only that.
                let only_growth =
                    cy.growth_only.contains(k) || targets.iter().any(|t| &t.key == k && t.growth_only);
                let freed = if only_growth {
                    self.growth_of(a)
                } else {
                    a.usage.clone()
                };
                Some((self.tree.cq(&a.admission.cluster_queue)?, freed))
            })
            .collect()
    }

    /// Kueue's `reserveCapacityForUnreclaimablePreempt`: a head that needs preemption but has no
    /// victims keeps, for this cycle, the quota its ClusterQueue could not be sure to take back
    /// (reclaimWithinCohort other than Any), so workloads elsewhere in the cohort cannot borrow it.
    /// For a replacement slice only its growth is held: the slice it replaces already holds the rest.
    fn reserve_for_unreclaimable(&mut self, e: &Entry, replaced: Option<&FrAmounts>, cy: &mut Cycle) {
        let Some(cq) = self.cqs.get(&e.cq) else {
            return;
        };
        // With PrioritizePreemptorWorkloads, also a preemptor still waiting for its victims.
        if (cq.preemption.reclaim_within_cohort == super::model::ReclaimWithinCohort::Any
            && !self.prioritized_preemptor(e))
            || !cy.held_unreclaimable.insert(e.cq_idx)
        {
            return;
        }
        let node = &self.tree.nodes[e.cq_idx];
        let reserved: FrAmounts = growth(&e.assignment.usage, replaced)
            .iter()
            .map(|(fr, want)| {
                let q = node.quotas.get(fr).copied().unwrap_or_default();
                let used = self.tree.usage(e.cq_idx, fr);
                let room = if e.assignment.borrowing > 0 {
                    q.borrowing_limit.map_or(*want, |b| q.nominal + b - used)
                } else {
                    q.nominal - used
                };
                (fr.clone(), (*want).min(room).clamp_zero())
            })
            .filter(|(_, v)| *v > Amount::ZERO)
            .collect();
        if !reserved.is_empty() {
            self.reserve(e.cq_idx, reserved, cy);
        }
    }

    fn fail(
        &mut self,
        key: &WorkloadKey,
        reason: PendingReason,
        msg: String,
        strict: bool,
        cy: &mut Cycle,
        cq: &str,
    ) {
        if self.waiting_preemptor.get(cq) == Some(key) {
            self.waiting_preemptor.remove(cq);
        }
        if strict {
            // The head keeps blocking newer workloads.
            if let Some(c) = cy.cursors.get_mut(cq) {
                c.done = true;
                c.blocked_by = Some(key.clone());
            }
            self.set_pending(key, reason, msg, false);
        } else {
            self.set_pending(key, reason, msg, true);
        }
    }

    /// Kueue's partial admission (`getInitialAssignments` with its `PodSetReducer`): when the
    /// full counts neither fit nor can preempt, the largest counts down to each podset's
    /// `minCount` that fit, or preempt with victims. Slices are never partially admitted.
    fn reduce_counts(&mut self, e: &Entry) -> Option<(Assignment, Vec<super::preemption::Target>)> {
        let p = &self.pending.get(&e.order.key)?.model;
        if p.replacement_for.is_some() || p.podsets.iter().all(|ps| ps.min_count.is_none()) {
            return None;
        }
        let w = p.clone();
        let cq = self.cqs.get(&e.cq)?.clone();
        let full: Vec<i64> = w.podsets.iter().map(|ps| ps.count).collect();
        let min: Vec<Option<i64>> = w.podsets.iter().map(|ps| ps.min_count).collect();
        let (_, found) = super::partial::search(&full, &min, |counts| {
            let mut trial = w.clone();
            for (ps, c) in trial.podsets.iter_mut().zip(counts) {
                ps.count = *c;
            }
            let assignment = {
                let held = (&self.admitted, &self.admitted_by_cq);
                let tree = &self.tree;
                let ctx = AssignCtx {
                    tree,
                    cq_idx: e.cq_idx,
                    cq: &cq,
                    flavors: &self.flavors,
                    forced: None,
                    nominated: None,
                    oracle: Some(&|fr, val| {
                        let fs = self.fair_sharing.as_ref();
                        simulate_preemption(held, tree, (e.cq_idx, &cq), &trial, (fr, val), None, fs)
                    }),
                    fair_sharing: self.fair_sharing.is_some(),
                };
                let mut a = assign(&ctx, &trial);
                let admitted = self.admitted.values().map(|a| (&a.model, &a.admission));
                if a.mode == Mode::Fit
                    && self
                        .tas
                        .place_workload(&self.flavors, ctx.tas_only(), &trial, &mut a.podsets, admitted)
                        .is_err()
                {
                    a.mode = Mode::NoFit;
                }
                a
            };
            match assignment.mode {
                Mode::Fit => Some((assignment, Vec::new())),
                Mode::NoFit => None,
                Mode::Preempt => {
                    let probe = e.probe(assignment);
                    let t = self.preemption_targets(&probe, None);
                    (!t.is_empty()).then_some((probe.assignment, t))
                }
            }
        })?;
        Some(found)
    }

    /// Victims that make room for `e`, searched with the slice it replaces (if any) taken out of
    /// the tree for the search only.
    fn preemption_targets(
        &mut self,
        e: &Entry,
        replaced: Option<&(WorkloadKey, FrAmounts)>,
    ) -> Vec<super::preemption::Target> {
        self.preemption_targets_except(e, replaced, &HashSet::new())
    }

    /// `preemption_targets` with the workloads in `gone` no longer candidates.
    fn preemption_targets_except(
        &mut self,
        e: &Entry,
        replaced: Option<&(WorkloadKey, FrAmounts)>,
        gone: &HashSet<WorkloadKey>,
    ) -> Vec<super::preemption::Target> {
        let Some(p) = self.pending.get(&e.order.key) else {
            return Vec::new();
        };
        let Some(cq) = self.cqs.get(&e.cq) else {
            return Vec::new();
        };
        let mut tree = self.tree.without_usage(e.cq_idx, replaced.map(|(_, u)| u));
        let root = tree.root(e.cq_idx);
        let mut cands: Vec<Candidate<'_>> = Vec::new();
        let within = cq.preemption.within_cluster_queue != super::model::WithinClusterQueue::Never;
        let reclaim = cq.preemption.reclaim_within_cohort != super::model::ReclaimWithinCohort::Never;
        for ci in tree.cqs_under(root) {
            // Skip whole ClusterQueues that cannot give anything back before looking at workloads.
            let useful = if ci == e.cq_idx {
                within
            } else {
                reclaim
                    && e.assignment
                        .preempt_frs
                        .iter()
                        .any(|fr| tree.is_borrowing(ci, fr))
            };
            if !useful {
                continue;
            }
            let name = &tree.nodes[ci].name;
            for k in self.admitted_by_cq.get(name).into_iter().flatten() {
                if Some(k) == replaced.map(|(k, _)| k) || gone.contains(k) {
                    continue;
                }
                if let Some(a) = self.admitted.get(k) {
                    let mut c = a.candidate(k, ci);
                    c.lq_usage =
                        super::admission_fair_sharing::candidate_usage(&self.afs, &self.cqs, &a.model, name);
                    cands.push(c);
                }
            }
        }
        // With TAS podsets the victims must also leave room in the topology (Kueue's `workloadFits`).
        let (tas, flavors, admitted) = (&self.tas, &self.flavors, &self.admitted);
        let tas_only = {
            let mut fs = cq.resource_groups.iter().flat_map(|g| &g.flavors).peekable();
            fs.peek().is_some() && fs.all(|fq| flavors.get(&fq.name).is_some_and(|f| f.topology.is_some()))
        };
        let has_tas = e.assignment.podsets.iter().any(|psa| {
            psa.flavors
                .values()
                .any(|f| flavors.get(f).is_some_and(|f| f.topology.is_some()))
        });
        let tas_fits = |gone: &[&WorkloadKey]| {
            let held = admitted
                .iter()
                .filter(|(k, _)| !gone.contains(k) && Some(*k) != replaced.map(|(k, _)| k))
                .map(|(_, a)| (&a.model, &a.admission));
            let mut podsets = e.assignment.podsets.clone();
            tas.place_workload(flavors, tas_only, &p.model, &mut podsets, held)
                .is_ok()
        };
        let pre = Preemptor {
            cq_idx: e.cq_idx,
            cq,
            priority: p.model.priority,
            queue_timestamp: p.model.timestamp,
            usage: &e.assignment.usage,
            contested: &e.assignment.preempt_frs,
            tas_fits: has_tas.then_some(&tas_fits as &super::preemption::TasFits<'_>),
        };
        match &self.fair_sharing {
            Some(fs) => fair_targets(tree.tree_mut(), &pre, &cands, &fs.strategies),
            None => find_targets(tree.tree_mut(), &pre, &cands),
        }
    }

    /// The (flavor, resource) pairs of `podsets` assigned to a flavor that names a topology.
    fn tas_flavor_resources(&self, podsets: &[super::model::PodSetAssignment]) -> Vec<FlavorResource> {
        podsets
            .iter()
            .flat_map(|psa| psa.flavors.iter())
            .filter(|(_, f)| self.flavors.get(*f).is_some_and(|f| f.topology.is_some()))
            .map(|(r, f)| FlavorResource::new(f, r))
            .collect()
    }

    /// Returns whether admission fair sharing moved the admitted workload's LocalQueue.
    fn admit(&mut self, e: Entry, replaced: Option<WorkloadKey>, now: i64, res: &mut CycleResult) -> bool {
        let Some(p) = self.remove_pending(&e.order.key) else {
            return false;
        };
        let afs_moved = self.afs_admitted(&p.model, &e.cq, &e.assignment.usage);
        // The replaced slice's usage was removed by the caller; now it is gone for good.
        if let Some(old) = &replaced {
            if let Some(o) = self.admitted.remove(old)
                && let Some(s) = self.admitted_by_cq.get_mut(&o.admission.cluster_queue)
            {
                s.remove(old);
            }
            res.finished_slices.push(FinishedSlice {
                key: old.clone(),
                replaced_by: e.order.key.clone(),
            });
        }
        let admission = Admission {
            cluster_queue: e.cq.clone(),
            pod_set_assignments: e.assignment.podsets,
        };
        self.tree.add_all(e.cq_idx, &e.assignment.usage);
        self.generation += 1;
        self.admitted_by_cq
            .entry(e.cq.clone())
            .or_default()
            .insert(e.order.key.clone());
        res.admissions.push(AdmissionResult {
            key: e.order.key.clone(),
            admission: admission.clone(),
            replaced,
        });
        self.admitted.insert(
            e.order.key,
            AdmittedWorkload {
                model: p.model,
                admission,
                usage: e.assignment.usage,
                admitted_at: now,
                evicting: false,
                floor: None,
                taking_growth: false,
            },
        );
        afs_moved
    }
}

/// Kueue's workload controller's message for a workload whose ClusterQueue is gone (its
/// `getQueueBlocker`, as `workload_controller_test.go` "the clusterqueue doesn't exist" sees it).
fn missing_cq(cq: &str) -> String {
    format!("ClusterQueue {cq} doesn't exist")
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() { "UNKNOWN" } else { s }
}

pub(super) fn preempt_text(r: PreemptedReason) -> &'static str {
    match r {
        PreemptedReason::InClusterQueue => "prioritization in the ClusterQueue",
        PreemptedReason::InCohortReclamation => "reclamation within the cohort",
        PreemptedReason::InCohortReclaimWhileBorrowing => "reclamation within the cohort while borrowing",
        PreemptedReason::InCohortFairSharing => "Fair Sharing within the cohort",
    }
}

/// What a replacement adds to the slice it replaces (all of `usage` for a workload that replaces
/// none), per flavor-resource, never below zero.
fn growth(usage: &FrAmounts, replaced: Option<&FrAmounts>) -> FrAmounts {
    usage
        .iter()
        .map(|(fr, v)| {
            let had = replaced.and_then(|r| r.get(fr)).copied().unwrap_or_default();
            (fr.clone(), (*v - had).clamp_zero())
        })
        .filter(|(_, v)| *v > Amount::ZERO)
        .collect()
}

/// resource -> the flavors an assignment chose for it (Kueue's `NominationMapping`, over podsets).
fn nomination(a: &Assignment) -> BTreeMap<String, BTreeSet<String>> {
    let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for ps in &a.podsets {
        for (r, f) in &ps.flavors {
            m.entry(r.clone()).or_default().insert(f.clone());
        }
    }
    m
}

/// resource -> flavor held by a slice; its replacement keeps them.
fn forced_flavors(a: &Admission) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for ps in &a.pod_set_assignments {
        for (r, f) in &ps.flavors {
            m.entry(r.clone()).or_insert_with(|| f.clone());
        }
    }
    m
}

/// Takes a ClusterQueue's reservations of this cycle out of the tree (`hold == false`) or puts
/// them back.
fn hold_reserved(tree: &mut QuotaTree, reserved: &[(usize, FrAmounts)], cq: Option<usize>, hold: bool) {
    for (i, u) in reserved.iter().filter(|(i, _)| Some(*i) == cq) {
        if hold {
            tree.add_all(*i, u);
        } else {
            tree.remove_all(*i, u);
        }
    }
}

/// Kueue's `PreemptionOracle.SimulatePreemption` for `val` of one flavor-resource: the victims
/// `find_targets` would pick, whether any is in the preemptor's own ClusterQueue, and the
/// borrowing level once they are gone. The tree is cloned only when some workload may be a
/// victim at all.
fn simulate_preemption(
    (admitted, admitted_by_cq): (
        &HashMap<WorkloadKey, AdmittedWorkload>,
        &BTreeMap<String, BTreeSet<WorkloadKey>>,
    ),
    tree: &QuotaTree,
    (cq_idx, cq): (usize, &ClusterQueueModel),
    w: &WorkloadModel,
    (fr, val): (&FlavorResource, Amount),
    replaced: Option<&WorkloadKey>,
    fair_sharing: Option<&FairSharingConfig>,
) -> (Possibility, u32) {
    let usage: FrAmounts = [(fr.clone(), val)].into_iter().collect();
    let contested: BTreeSet<FlavorResource> = [fr.clone()].into_iter().collect();
    let p = super::preemption::Preemptor {
        cq_idx,
        cq,
        priority: w.priority,
        queue_timestamp: w.timestamp,
        usage: &usage,
        contested: &contested,
        tas_fits: None,
    };
    let cqs = tree.cqs_under(tree.root(cq_idx));
    let in_tree = || {
        cqs.iter().flat_map(|&ci| {
            admitted_by_cq
                .get(&tree.nodes[ci].name)
                .into_iter()
                .flatten()
                .filter(|k| Some(*k) != replaced)
                .filter_map(move |k| Some((ci, k, admitted.get(k)?)))
        })
    };
    let before = || (Possibility::NoCandidates, tree.borrowing_level(cq_idx, fr, val));
    // The cheap check first: most pending workloads have no possible victim at all.
    let quick = in_tree().map(|(ci, _, a)| (ci, a.model.priority, a.model.timestamp, &a.usage));
    if !super::preemption::any_candidate(tree, &p, quick) {
        return before();
    }
    let cands: Vec<Candidate<'_>> = in_tree().map(|(ci, k, a)| a.candidate(k, ci)).collect();
    let mut sim = tree.clone();
    let targets = match fair_sharing {
        Some(fs) => fair_targets(&mut sim, &p, &cands, &fs.strategies),
        None => find_targets(&mut sim, &p, &cands),
    };
    if targets.is_empty() {
        return before();
    }
    let mut own = false;
    for t in &targets {
        if let Some(c) = cands.iter().find(|c| *c.key == t.key) {
            own |= c.cq_idx == cq_idx;
            // A victim that only shrinks back to its floor frees its growth alone.
            match super::growth_first::growth(c.usage, c.floor).filter(|_| t.growth_only) {
                Some(g) => sim.remove_all(c.cq_idx, &g),
                None => sim.remove_all(c.cq_idx, c.usage),
            }
        }
    }
    let possibility = if own {
        Possibility::Preempt
    } else {
        Possibility::Reclaim
    };
    (possibility, sim.borrowing_level(cq_idx, fr, val))
}
