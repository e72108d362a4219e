//! The scheduler's latest reasoning per pending workload, shared between the admission loop (which
//! writes it each cycle) and whoever serves `quotagate explain` (which reads it). Bounded: one
//! record per pending workload, dropped when the workload is admitted, held or gone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::queue::{Explanation, WorkloadKey};

#[derive(Clone, Default)]
pub struct Explanations(Arc<Mutex<HashMap<WorkloadKey, Explanation>>>);

impl std::fmt::Debug for Explanations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Explanations({})", self.len())
    }
}

impl Explanations {
    fn with<R>(&self, f: impl FnOnce(&mut HashMap<WorkloadKey, Explanation>) -> R) -> R {
        // A panic while holding the lock cannot leave a half-written map: every write is one call.
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    pub fn insert(&self, key: WorkloadKey, e: Explanation) {
        self.with(|m| m.insert(key, e));
    }

    pub fn remove(&self, key: &WorkloadKey) -> Option<Explanation> {
        self.with(|m| m.remove(key))
    }

    pub fn get(&self, key: &WorkloadKey) -> Option<Explanation> {
        self.with(|m| m.get(key).cloned())
    }

    /// No record for `key`, or one that says something else than `reason` and `message`.
    pub fn stale(&self, key: &WorkloadKey, reason: &str, message: &str) -> bool {
        self.with(|m| {
            m.get(key)
                .is_none_or(|e| e.reason != reason || e.message != message)
        })
    }

    pub fn len(&self) -> usize {
        self.with(|m| m.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn clear(&self) {
        self.with(HashMap::clear);
    }
}
