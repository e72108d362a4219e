//! Reading our own status writes before the watch delivers them. The loop decides on its cache; a
//! Workload whose pending status it has just written is still the old version there for a few
//! milliseconds. An admission decided in that window was written over the old resourceVersion and
//! refused (409), its quota released and the workload held back, and others took the quota: a
//! preemptor whose victims had just let go lost it to them (found porting Kueue's fair-sharing
//! "ClusterQueue head is ineligible" specs). Kueue's scheduler applies its status without that
//! precondition. Here the precondition stays (a write by anyone else still conflicts), but a copy
//! that is exactly the version one of our pending writes replaced is written with the version that
//! write got back. Only pending writes are recorded: a copy from before one holds no quota, so a
//! status decided on it loses nothing but that pending write's own conditions.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::queue::WorkloadKey;

#[derive(Debug, Default)]
pub struct OwnWrites(Mutex<HashMap<WorkloadKey, (String, String)>>);

impl OwnWrites {
    /// Our write turned `key`'s version `before` into `after`.
    pub fn record(&self, key: &WorkloadKey, before: &str, after: &str) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(key.clone(), (before.to_string(), after.to_string()));
        }
    }

    /// The version to write over when the cache shows `cached`: ours if `cached` is the version
    /// our last write replaced, else `cached` (the cache caught up, or someone else wrote since:
    /// the record is dropped).
    pub fn version_for(&self, key: &WorkloadKey, cached: &str) -> String {
        let Ok(mut m) = self.0.lock() else {
            return cached.to_string();
        };
        match m.get(key) {
            Some((before, after)) if before == cached => after.clone(),
            Some(_) => {
                m.remove(key);
                cached.to_string()
            }
            None => cached.to_string(),
        }
    }

    /// Forgets workloads that are gone.
    pub fn retain(&self, live: impl Fn(&WorkloadKey) -> bool) {
        if let Ok(mut m) = self.0.lock() {
            m.retain(|k, _| live(k));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.lock().map_or(true, |m| m.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_version_we_wrote_over_is_replaced() {
        let own = OwnWrites::default();
        let k = WorkloadKey::new("ns", "w");
        assert_eq!(own.version_for(&k, "5"), "5");
        own.record(&k, "5", "7");
        // The cache still shows the version we wrote over: ours is the current one.
        assert_eq!(own.version_for(&k, "5"), "7");
        assert_eq!(own.version_for(&k, "5"), "7");
        // The cache moved on (our write, or someone else's): it is the truth, the record goes.
        assert_eq!(own.version_for(&k, "9"), "9");
        assert_eq!(own.version_for(&k, "5"), "5");
        own.record(&k, "9", "10");
        own.retain(|_| false);
        assert!(own.is_empty());
    }
}
