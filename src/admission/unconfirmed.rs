//! What the admission loop wrote or decided that the API does not show yet, in one ledger: admissions
//! assumed, evictions decided, the pending status each queued workload shows or is being written
//! with, and what each queued workload was queued as. Kueue keeps the first in its cache
//! (`AssumeWorkload`, `ForgetWorkload` when the write fails); the rest are what let a cycle skip
//! writes and requeues that would change nothing.

use std::collections::{HashMap, HashSet};

use super::conditions::EvictionCause;
use crate::queue::{AdmissionCore, WorkloadKey};

#[derive(Default)]
pub(super) struct Unconfirmed {
    /// Admissions written (or being written) but not yet seen in the cache.
    pub(super) assumed: HashSet<WorkloadKey>,
    /// Evictions decided but not yet seen in the cache (retried until they are).
    pub(super) evicting: HashMap<WorkloadKey, EvictionCause>,
    /// Per queued workload, the pending status it shows or is being written with
    /// (`conditions::pending_fingerprint`). The core reports every workload it evaluates; only those
    /// whose status would say something new become writes, so a cycle over thousands of pending
    /// workloads costs no work per workload downstream of the core.
    pub(super) shown: HashMap<WorkloadKey, u64>,
    /// What each queued workload was queued as: its resourceVersion and its namespace's labels.
    pub(super) queued_rv: HashMap<WorkloadKey, (String, u64)>,
}

impl Unconfirmed {
    /// An admission write failed, or an admission is withheld: the assumption dropped, and the
    /// workload out of the core (with the entry penalty it pushed); the next sync queues it again.
    pub(super) fn forget(&mut self, core: &mut AdmissionCore, key: &WorkloadKey) {
        self.shown.remove(key);
        self.assumed.remove(key);
        self.queued_rv.remove(key);
        core.retain_entry_penalty(key, None);
        core.delete_workload(key);
    }

    /// A pending status write failed: queued afresh next cycle, and written again.
    pub(super) fn unshow(&mut self, key: &WorkloadKey) {
        self.shown.remove(key);
        self.queued_rv.remove(key);
    }
}
