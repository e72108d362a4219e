//! Reading our own pending writes before the watch delivers them. The loop decides on its cache; a
//! Workload whose pending status it has just written (e.g. WaitingForPreemptedWorkloads) is still
//! the old version there for a few milliseconds. An admission decided in that window was written
//! over the old resourceVersion and refused (409); its quota was released, the workload backed off,
//! and others took the quota: a preemptor whose victims had just let go lost it to them, which then
//! had to be preempted again (found porting Kueue's fair-sharing "ClusterQueue head is ineligible"
//! specs; Kueue's scheduler applies its status without that precondition). The admission retries on
//! the fresh copy when that copy is exactly the version our own pending writes made over the
//! cached one: nobody else has written since, so nothing anyone else decided is overwritten.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::queue::WorkloadKey;

/// Per workload: the versions our pending writes replaced (oldest first, a few at most) and the
/// version the last one made.
/// Clones share one record: the pending-status writes off the cycle (`pending_writes`) record into
/// the loop's.
#[derive(Clone, Debug, Default)]
pub struct OwnWrites(Arc<Mutex<Versions>>);

/// Per workload: the versions replaced, and the latest one written.
type Versions = HashMap<WorkloadKey, (Vec<String>, String)>;

/// Versions remembered per workload: the watch lags by a few writes at most.
const KEPT: usize = 8;

impl OwnWrites {
    /// Our write over the cached version `before` made `after`.
    pub fn record(&self, key: &WorkloadKey, before: &str, after: &str) {
        let Ok(mut m) = self.0.lock() else {
            return;
        };
        let e = m
            .entry(key.clone())
            .or_insert_with(|| (Vec::new(), String::new()));
        if !(e.0.iter().any(|v| v == before) || e.1 == before) {
            e.0.clear();
        }
        for v in [before.to_string(), std::mem::take(&mut e.1)] {
            if !v.is_empty() && !e.0.contains(&v) {
                e.0.push(v);
            }
        }
        if e.0.len() > KEPT {
            e.0.remove(0);
        }
        e.1 = after.to_string();
    }

    /// The version to write over when the cache shows `cached`: ours if `cached` is one our
    /// pending writes replaced (the watch has not caught up), else `cached` (it shows our last
    /// write, or someone else wrote since: the record is dropped).
    pub fn version_for(&self, key: &WorkloadKey, cached: &str) -> String {
        let Ok(mut m) = self.0.lock() else {
            return cached.to_string();
        };
        match m.get(key) {
            Some((replaced, latest)) if replaced.iter().any(|v| v == cached) => latest.clone(),
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

    #[test]
    fn the_watch_may_deliver_our_earlier_writes_first() {
        let own = OwnWrites::default();
        let k = WorkloadKey::new("ns", "w");
        own.record(&k, "1", "2");
        // Written again before the cache moved: over our version 2, making 3.
        assert_eq!(own.version_for(&k, "1"), "2");
        own.record(&k, "1", "3");
        // The watch delivers 2, not yet 3: 3 is still the one to write over.
        assert_eq!(own.version_for(&k, "2"), "3");
        assert_eq!(own.version_for(&k, "1"), "3");
        // It shows 3 now: nothing of ours is ahead of it.
        assert_eq!(own.version_for(&k, "3"), "3");
        assert!(own.is_empty());
    }
}
