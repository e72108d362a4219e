//! Which Workloads a step need not read again: the ones whose cached object and surroundings are
//! the same as when the last step read them, and whose case then needed nothing but waiting.
//!
//! The cache replaces a Workload's `Arc` on every change, so an unchanged address is an unchanged
//! object (a `Weak` keeps the address from being reused while it is remembered). What `classify`
//! and the intake read around a Workload (LocalQueues, ClusterQueues, admission checks, flavors,
//! namespace labels, priority classes, the replaced slices) is compared as a whole each step; when
//! any of it changed, or ten seconds have passed since the last full read, every Workload is read.
//! So a step costs what changed, not the backlog, and a case missed here is at most ten seconds
//! late.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

use super::classify::{Class, Seen};
use super::snapshot::Snapshot;
use super::unconfirmed::Unconfirmed;
use crate::api::kueue::{AdmissionCheck, ClusterQueue, LocalQueue, ResourceFlavor, Workload};
use crate::queue::{AdmissionCore, WorkloadKey};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

/// How often (ms) every Workload is read even when nothing around them changed.
const FULL_READ_EVERY_MS: i64 = 10_000;

/// What a Workload's last read left it as, when that needs no further work while it stays.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Stable {
    /// Queued in the core under its resourceVersion; nothing to write.
    Queued,
    /// Reserved and counted in the core; nothing to write, no timer running.
    Reserved,
}

struct Entry {
    /// Pins the address the entry is keyed by.
    _object: Weak<Workload>,
    key: WorkloadKey,
    stable: Option<Stable>,
    /// The step that last saw this object in the snapshot.
    step: u64,
}

/// What around the Workloads the intake reads, as of the last step: the cached objects, each list
/// sorted by namespace and name.
#[derive(Default)]
struct Surroundings {
    local_queues: Vec<Arc<LocalQueue>>,
    cluster_queues: Vec<Arc<ClusterQueue>>,
    admission_checks: Vec<Arc<AdmissionCheck>>,
    flavors: Vec<Arc<ResourceFlavor>>,
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    priority_classes: BTreeMap<String, i32>,
    /// Replaced slice -> its replacement and whether that is Admitted (`classify::View`), sorted.
    replaced: Vec<(WorkloadKey, WorkloadKey, bool)>,
}

/// The Workloads the last steps read, by the address of the cached object.
#[derive(Default)]
pub(super) struct Unchanged {
    entries: HashMap<usize, Entry>,
    around: Surroundings,
    step: u64,
    full_read_at: Option<i64>,
    /// This step reads every Workload.
    full: bool,
    /// Every step reads every Workload (a test compares the two ways).
    always_full: bool,
}

fn address(wl: &Arc<Workload>) -> usize {
    Arc::as_ptr(wl) as usize
}

impl Unchanged {
    /// Starts a step: whether it must read every Workload (the surroundings changed, the last
    /// full read is ten seconds old, or `allowed` is false).
    pub(super) fn begin(
        &mut self,
        snap: &Snapshot,
        replaced: Vec<(WorkloadKey, WorkloadKey, bool)>,
        now_ms: i64,
        allowed: bool,
    ) -> bool {
        self.step += 1;
        let mut around = Surroundings::of(snap, replaced);
        let changed = !around.same_as(&self.around, snap);
        if changed {
            around.namespaces = snap.namespaces.clone();
            around.priority_classes = snap.priority_classes.clone();
        } else {
            around.namespaces = std::mem::take(&mut self.around.namespaces);
            around.priority_classes = std::mem::take(&mut self.around.priority_classes);
        }
        self.around = around;
        let due = self
            .full_read_at
            .is_none_or(|t| now_ms - t >= FULL_READ_EVERY_MS || now_ms < t);
        self.full = changed || due || !allowed || self.always_full;
        if self.full {
            self.full_read_at = Some(now_ms);
        }
        self.full
    }

    /// Every step from now on reads every Workload, as before this module existed.
    #[cfg(test)]
    pub(super) fn read_everything(&mut self) {
        self.always_full = true;
    }

    /// `wl` need not be read this step: the same object as last read, left needing nothing, and
    /// what that rested on still holds. Marks it seen either way it is remembered.
    pub(super) fn skip(
        &mut self,
        wl: &Arc<Workload>,
        unconfirmed: &Unconfirmed,
        core: &AdmissionCore,
    ) -> bool {
        let step = self.step;
        let Some(e) = self.entries.get_mut(&address(wl)) else {
            return false;
        };
        e.step = step;
        if self.full {
            return false;
        }
        match e.stable {
            // Queued under this version (a failed write or a withdrawn admission clears that), still
            // in the core, and either assumed admitted or not counted as admitted.
            Some(Stable::Queued) => {
                unconfirmed.queued_rv.contains_key(&e.key)
                    && core.knows(&e.key)
                    && (!core.is_admitted(&e.key) || unconfirmed.assumed.contains(&e.key))
            }
            // Still counted, and no eviction of it being written.
            Some(Stable::Reserved) => core.is_admitted(&e.key) && !unconfirmed.evicting.contains_key(&e.key),
            None => false,
        }
    }

    /// What a read leaves `seen` as, if the intake then writes nothing for it and the core takes
    /// it as it should (`record` checks that). `pods_ready`: waitForPodsReady is on (a reserved
    /// workload's timeout runs).
    pub(super) fn candidate(seen: &Seen, pods_ready: bool) -> Option<Stable> {
        if seen.checks.is_some() || seen.due.is_some() || seen.holds_quota {
            return None;
        }
        match &seen.class {
            Class::Queue { .. } => Some(Stable::Queued),
            Class::Reserved {
                evicted: false,
                stop: None,
                rejected: None,
                ..
            } if !pods_ready => Some(Stable::Reserved),
            _ => None,
        }
    }

    /// Remembers that `wl` (under `key`) was read; `stable`: its `candidate`, when the intake wrote
    /// nothing for it.
    pub(super) fn record(
        &mut self,
        wl: &Arc<Workload>,
        key: WorkloadKey,
        stable: Option<Stable>,
        unconfirmed: &Unconfirmed,
        core: &AdmissionCore,
    ) {
        let stable = stable.filter(|s| match s {
            Stable::Queued => unconfirmed.queued_rv.contains_key(&key),
            Stable::Reserved => core.is_admitted(&key),
        });
        self.entries.insert(
            address(wl),
            Entry {
                _object: Arc::downgrade(wl),
                key,
                stable,
                step: self.step,
            },
        );
    }

    /// Ends a step: forgets the objects the snapshot no longer holds, and returns their keys (a
    /// Workload deleted, or changed: its new object was read under the same key).
    pub(super) fn finish(&mut self) -> Vec<WorkloadKey> {
        let step = self.step;
        let mut gone = Vec::new();
        self.entries.retain(|_, e| {
            let keep = e.step == step;
            if !keep {
                gone.push(std::mem::take(&mut e.key));
            }
            keep
        });
        gone
    }
}

/// `objects` sorted by namespace and name, the `Arc`s shared.
fn sorted<T: Resource>(objects: &[Arc<T>]) -> Vec<Arc<T>> {
    let mut v = objects.to_vec();
    v.sort_by(|a, b| ident(a.meta()).cmp(&ident(b.meta())));
    v
}

fn ident(m: &ObjectMeta) -> (&str, &str) {
    (
        m.namespace.as_deref().unwrap_or_default(),
        m.name.as_deref().unwrap_or_default(),
    )
}

/// The same objects under the same names, each the same cached object or equal in `part`.
fn same<T: Resource, P: PartialEq>(a: &[Arc<T>], b: &[Arc<T>], part: impl Fn(&T) -> &P) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| ident(x.meta()) == ident(y.meta()) && (Arc::ptr_eq(x, y) || part(x) == part(y)))
}

impl Surroundings {
    fn of(snap: &Snapshot, mut replaced: Vec<(WorkloadKey, WorkloadKey, bool)>) -> Self {
        replaced.sort_by(|a, b| a.0.cmp(&b.0));
        Surroundings {
            local_queues: sorted(&snap.local_queues),
            cluster_queues: sorted(&snap.cluster_queues),
            admission_checks: sorted(&snap.admission_checks),
            flavors: sorted(&snap.flavors),
            namespaces: BTreeMap::new(),
            priority_classes: BTreeMap::new(),
            replaced,
        }
    }

    /// The same surroundings as `last`: the queues' specs, the checks and flavors whole (their
    /// status matters, and they change rarely), the namespaces' labels, the priority classes and
    /// the replaced slices. (`namespaces` and `priority_classes` of `self` are not filled: compared
    /// against the snapshot.)
    fn same_as(&self, last: &Surroundings, snap: &Snapshot) -> bool {
        same(&self.local_queues, &last.local_queues, |q| &q.spec)
            && same(&self.cluster_queues, &last.cluster_queues, |q| &q.spec)
            && same(&self.admission_checks, &last.admission_checks, |c| c)
            && same(&self.flavors, &last.flavors, |f| f)
            && self.replaced == last.replaced
            && snap.namespaces == last.namespaces
            && snap.priority_classes == last.priority_classes
    }
}
