//! The cycle's trailing pending-status writes, made off the cycle. A cycle over a large backlog decides
//! a few admissions and thousands of "why still pending" conditions; written in the cycle, the
//! pending ones held the next cycle back for seconds while the quota that short workloads freed sat
//! unused (issue 62: half of a large-scale cycle was workload writes). Here the loop hands them to a
//! few workers and goes on: the next cycle starts as soon as its admissions and evictions are written.
//!
//! Order is kept where it matters. A pending status changes no quota and no job controller reacts to
//! it, so across workloads it may land after a later cycle's writes; for one workload every write
//! stays in decision order: before a cycle writes anything for a workload, its queued pending write is
//! dropped (the new decision supersedes it) and one in flight is waited for ([`PendingWrites::settle`]).
//! A newer pending status for a queued workload replaces the older one. Each write still carries the
//! resourceVersion it was decided on. Outcomes (backoff on failure) come back to the loop, which takes
//! them in at its next cycle ([`PendingWrites::outcomes`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use kube::Client;
use tokio::sync::{Notify, watch};

use super::own_writes::OwnWrites;
use super::writer::{Outcome, Writer, wl_api};
use crate::admission::metrics::Metrics;
use crate::api::kueue::Workload;
use crate::kit::events::QueuedRecorder;
use crate::queue::{PendingReason, WorkloadKey};

/// One pending status to write.
struct Job {
    wl: Arc<Workload>,
    why: PendingReason,
    message: String,
}

#[derive(Default)]
struct Jobs {
    /// Workloads with a queued job, oldest first (each once).
    order: VecDeque<WorkloadKey>,
    queued: HashMap<WorkloadKey, Job>,
    in_flight: HashSet<WorkloadKey>,
    outcomes: Vec<Outcome>,
    closed: bool,
}

struct Inner {
    jobs: Mutex<Jobs>,
    /// A job was queued (or the writer closed).
    queued: Notify,
    /// Counts finished writes, for `settle`.
    finished: watch::Sender<u64>,
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Jobs> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The oldest queued job whose workload has no write in flight, marked in flight.
    fn take(&self) -> Option<(WorkloadKey, Job)> {
        let mut j = self.lock();
        let at = j.order.iter().position(|k| !j.in_flight.contains(k))?;
        let key = j.order.remove(at)?;
        let job = j.queued.remove(&key)?;
        j.in_flight.insert(key.clone());
        Some((key, job))
    }

    fn finish(&self, key: &WorkloadKey, outcome: Outcome) {
        {
            let mut j = self.lock();
            j.in_flight.remove(key);
            if !matches!(outcome, Outcome::Done) {
                j.outcomes.push(outcome);
            }
        }
        self.finished.send_modify(|n| *n = n.wrapping_add(1));
        // A job of the same workload may have waited for this one.
        self.queued.notify_waiters();
    }
}

/// What a worker writes with: the loop's client, recorder, metrics and record of its own writes.
#[derive(Clone)]
pub(super) struct Tools {
    pub(super) client: Client,
    pub(super) recorder: QueuedRecorder,
    pub(super) metrics: Arc<Metrics>,
    pub(super) own_writes: OwnWrites,
}

/// The loop's handle: queue, settle, collect. Dropping it stops the workers once their write in
/// flight is done; what is still queued is not written.
pub(super) struct PendingWrites {
    inner: Arc<Inner>,
}

impl PendingWrites {
    /// Starts `workers` workers writing with `tools`.
    pub(super) fn start(tools: Tools, workers: usize) -> Self {
        let inner = Arc::new(Inner {
            jobs: Mutex::new(Jobs::default()),
            queued: Notify::new(),
            finished: watch::channel(0).0,
        });
        for _ in 0..workers.max(1) {
            tokio::spawn(work(inner.clone(), tools.clone()));
        }
        PendingWrites { inner }
    }

    /// Queues `wl`'s pending status (replacing a queued older one).
    pub(super) fn queue(&self, wl: Arc<Workload>, key: WorkloadKey, why: PendingReason, message: String) {
        {
            let mut j = self.inner.lock();
            if j.queued.insert(key.clone(), Job { wl, why, message }).is_none() {
                j.order.push_back(key);
            }
        }
        self.inner.queued.notify_one();
    }

    /// Before a cycle writes for `keys`: their queued pending writes are dropped, and those in flight
    /// are waited for, so the workloads' writes land in decision order.
    pub(super) async fn settle<'k>(&self, keys: impl IntoIterator<Item = &'k WorkloadKey>) {
        let keys: HashSet<&WorkloadKey> = keys.into_iter().collect();
        if keys.is_empty() {
            return;
        }
        let mut finished = self.inner.finished.subscribe();
        {
            let mut j = self.inner.lock();
            if j.queued.is_empty() && j.in_flight.is_empty() {
                return;
            }
            let Jobs { order, queued, .. } = &mut *j;
            order.retain(|k| !(keys.contains(k) && queued.remove(k).is_some()));
        }
        loop {
            finished.borrow_and_update();
            if !self.inner.lock().in_flight.iter().any(|k| keys.contains(k)) {
                return;
            }
            if finished.changed().await.is_err() {
                return;
            }
        }
    }

    /// The outcomes of the writes finished since the last call.
    pub(super) fn outcomes(&self) -> Vec<Outcome> {
        std::mem::take(&mut self.inner.lock().outcomes)
    }

    /// Drops what is queued (leadership lost: a follower writes nothing).
    pub(super) fn clear(&self) {
        let mut j = self.inner.lock();
        j.order.clear();
        j.queued.clear();
        j.outcomes.clear();
    }

    /// Writes queued or in flight.
    #[cfg(test)]
    pub(super) fn busy(&self) -> usize {
        let j = self.inner.lock();
        j.queued.len() + j.in_flight.len()
    }
}

impl Drop for PendingWrites {
    fn drop(&mut self) {
        self.inner.lock().closed = true;
        self.inner.queued.notify_waiters();
    }
}

async fn work(inner: Arc<Inner>, tools: Tools) {
    let writer = Writer {
        client: &tools.client,
        recorder: &tools.recorder,
        metrics: &tools.metrics,
        own_writes: &tools.own_writes,
    };
    loop {
        let queued = inner.queued.notified();
        tokio::pin!(queued);
        queued.as_mut().enable();
        if inner.lock().closed {
            return;
        }
        match inner.take() {
            Some((key, job)) => {
                let api = wl_api(&tools.client, &key);
                let outcome = writer
                    .write_pending(&api, &job.wl, key.clone(), job.why, job.message)
                    .await;
                inner.finish(&key, outcome);
            }
            None => queued.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer with no workers: the jobs stay where the test puts them.
    fn idle() -> PendingWrites {
        PendingWrites {
            inner: Arc::new(Inner {
                jobs: Mutex::new(Jobs::default()),
                queued: Notify::new(),
                finished: watch::channel(0).0,
            }),
        }
    }

    fn wl(name: &str) -> (Arc<Workload>, WorkloadKey) {
        let mut w = Workload::new(name, Default::default());
        w.metadata.namespace = Some("ns".into());
        (Arc::new(w), WorkloadKey::new("ns", name))
    }

    #[test]
    fn a_newer_pending_status_replaces_the_queued_one() {
        let p = idle();
        let (w, k) = wl("a");
        p.queue(w.clone(), k.clone(), PendingReason::ExceedsMaxQuota, "old".into());
        p.queue(w, k.clone(), PendingReason::ExceedsMaxQuota, "new".into());
        assert_eq!(p.busy(), 1);
        let (key, job) = p.inner.take().expect("a job");
        assert_eq!((key, job.message.as_str()), (k, "new"));
        // In flight: not taken twice.
        assert!(p.inner.take().is_none());
    }

    #[tokio::test]
    async fn a_cycle_drops_the_queued_write_and_waits_for_the_one_in_flight() {
        let p = idle();
        let (a, ka) = wl("a");
        let (b, kb) = wl("b");
        let (c, kc) = wl("c");
        p.queue(a, ka.clone(), PendingReason::ExceedsMaxQuota, "m".into());
        p.queue(b, kb.clone(), PendingReason::ExceedsMaxQuota, "m".into());
        p.queue(c, kc.clone(), PendingReason::ExceedsMaxQuota, "m".into());
        let (flying, _) = p.inner.take().expect("a is taken first");
        assert_eq!(flying, ka);
        // b's queued write is dropped at once; a's in flight is waited for; c is not this cycle's.
        let settle = p.settle([&ka, &kb]);
        tokio::pin!(settle);
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(50), settle.as_mut())
                .await
                .is_err(),
            "a is still in flight"
        );
        assert_eq!(p.busy(), 2, "a in flight, c queued");
        p.inner.finish(&ka, Outcome::PendingWritten(ka.clone()));
        tokio::time::timeout(std::time::Duration::from_secs(5), settle)
            .await
            .expect("settled once a's write is done");
        assert!(matches!(&p.outcomes()[..], [Outcome::PendingWritten(k)] if *k == ka));
        assert!(p.outcomes().is_empty());
        let (next, _) = p.inner.take().expect("c is left");
        assert_eq!(next, kc);
    }
}
