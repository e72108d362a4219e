//! The loop's writes against a quota cut mid-cycle (issue 67, invariant I1): a cycle decides on its
//! snapshot, then writes; a cut whose watch event reaches the caches while the cycle's earlier writes
//! (or an admission's conflict re-read) are in flight must withdraw the admissions decided on the old
//! quota, and leave every admission alone when nothing moved. The API is a fake that records the
//! status writes and applies the cut to the ClusterQueue cache at a chosen request, which makes the
//! interleaving a loaded machine makes now and then happen on every run.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kube::runtime::reflector::{self, store::Writer as StoreWriter};
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::*;
use crate::admission::tests::{cq, snapshot, wl};
use crate::api::kueue::{ClusterQueue, Workload};

/// When the fake applies the cut to the ClusterQueue cache.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CutAt {
    /// Never: the quota stands.
    Never,
    /// While the status write of workload `orphan` (written before the admission) is in flight.
    EarlierWrite,
    /// As `EarlierWrite`, on the API server only: the cache's watch has not delivered it yet.
    CacheLag,
    /// When the admission's first write is answered with a conflict, before its re-read.
    Conflict,
}

/// The fake API: answers status writes (a PUT or a merge patch) by echoing them (with a new resourceVersion), a conflict on
/// the admission's first write under `CutAt::Conflict`, and reads of a workload with `fresh`.
struct Fake {
    cut_at: CutAt,
    /// ClusterQueue `cq` as the API server holds it.
    server: Mutex<ClusterQueue>,
    /// The cut ClusterQueue, and the cache its watch event reaches.
    cut: Mutex<Option<(StoreWriter<ClusterQueue>, ClusterQueue)>>,
    /// Status writes so far: the workload's name, and whether the write carries an admission.
    writes: Mutex<Vec<(String, bool)>>,
    /// What a GET of workload `big` returns.
    fresh: Workload,
}

impl Fake {
    fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cut is written; its watch event reaches the loop's cache unless the watch lags.
    fn cut(&self) {
        if let Some((mut writer, cut)) = Self::lock(&self.cut).take() {
            *Self::lock(&self.server) = cut.clone();
            if self.cut_at != CutAt::CacheLag {
                writer.apply_watcher_event(&watcher::Event::Apply(cut));
            }
        }
    }

    fn handle(&self, method: &http::Method, path: &str, body: &[u8]) -> (u16, Value) {
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        match (method.as_str(), &segs[..]) {
            (m @ ("PUT" | "PATCH"), [.., "workloads", name, "status"]) => {
                let sent: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                // A merge patch of the status: answered with a whole object made of it.
                let mut obj = if m == "PATCH" {
                    let mut o = serde_json::to_value(&self.fresh).unwrap_or_default();
                    o["metadata"]["name"] = json!(name);
                    o["status"] = sent["status"].clone();
                    o
                } else {
                    sent
                };
                let admits = !obj["status"]["admission"].is_null();
                let first = !Self::lock(&self.writes).iter().any(|(n, _)| n == name);
                Self::lock(&self.writes).push((name.to_string(), admits));
                match (self.cut_at, *name) {
                    (CutAt::EarlierWrite | CutAt::CacheLag, "orphan") => self.cut(),
                    (CutAt::Conflict, "big") if first => {
                        self.cut();
                        return (
                            409,
                            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "reason": "Conflict", "code": 409, "message": "the object has been modified"}),
                        );
                    }
                    _ => {}
                }
                obj["metadata"]["resourceVersion"] = json!("2");
                (200, obj)
            }
            ("GET", [.., "clusterqueues"]) => {
                let items = vec![Self::lock(&self.server).clone()];
                (
                    200,
                    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueueList",
                    "metadata": {"resourceVersion": "3"}, "items": items}),
                )
            }
            ("GET", [.., "workloads", "big"]) => (200, serde_json::to_value(&self.fresh).unwrap_or_default()),
            // Events: echoed.
            (_, _) => (201, serde_json::from_slice(body).unwrap_or(json!({}))),
        }
    }

    fn client(self: &Arc<Self>) -> kube::Client {
        let api = self.clone();
        let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
            let api = api.clone();
            async move {
                let (parts, body) = req.into_parts();
                let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                let (code, value) = api.handle(&parts.method, parts.uri.path(), &body);
                let resp = http::Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(value.to_string())))
                    .unwrap_or_default();
                Ok::<_, Infallible>(resp)
            }
        });
        kube::Client::new(svc, "default")
    }
}

/// ClusterQueue `cq` with `cpu` of nominal quota at spec generation `generation`.
fn quota(cpu: &str, generation: i64) -> Arc<ClusterQueue> {
    let mut q = (*cq("cq", cpu)).clone();
    q.metadata.generation = Some(generation);
    q.metadata.uid = Some("cq-uid".into());
    Arc::new(q)
}

/// Runs one cycle's step and writes on 4 CPU of quota, with the fake cutting it to 3 at `cut_at`: a
/// workload of 4 CPU (`big`) fits only before the cut; one in a missing LocalQueue (`orphan`) is
/// written pending first. Returns the status writes made, whether the loop reported an admission,
/// and what the next step decides for `big` on the ClusterQueue the cache shows afterwards.
async fn cycle_with_cut(cut_at: CutAt) -> (Vec<(String, bool)>, bool, Vec<Action>) {
    let (cluster_queues, mut cq_writer) = reflector::store::<ClusterQueue>();
    let before = quota("4", 1);
    cq_writer.apply_watcher_event(&watcher::Event::Apply((*before).clone()));
    let big = wl("big", "4", "1");
    let orphan = {
        let mut w = Workload::build("orphan", "default")
            .queue("missing")
            .podset("main", 1, [("cpu", "1")])
            .build();
        w.metadata.resource_version = Some("1".into());
        Arc::new(w)
    };
    let fake = Arc::new(Fake {
        cut_at,
        server: Mutex::new((*before).clone()),
        cut: Mutex::new(Some((cq_writer, (*quota("3", 2)).clone()))),
        writes: Mutex::default(),
        fresh: (*big).clone(),
    });
    let client = fake.client();
    let wls = vec![orphan, big];
    let snap = snapshot(vec![before], &["default"], wls.clone());
    let (flavors, mut flavors_writer) = reflector::store();
    for f in &snap.flavors {
        flavors_writer.apply_watcher_event(&watcher::Event::Apply((**f).clone()));
    }
    let caches = Caches {
        cluster_queues,
        cohorts: reflector::store().0,
        flavors,
        local_queues: reflector::store().0,
        workloads: reflector::store().0,
        namespaces: reflector::store().0,
        priority_classes: reflector::store().0,
        admission_checks: reflector::store().0,
        topologies: reflector::store().0,
        nodes: reflector::store().0,
        non_tas: Default::default(),
        workload_events: Default::default(),
        unlisted: Default::default(),
    };
    let reporter = kube::runtime::events::Reporter {
        controller: "test".into(),
        instance: None,
    };
    let (recorder, _events) = QueuedRecorder::spawn(
        crate::kit::events::Recorder::new(client.clone(), reporter),
        16,
        crate::kit::events::DroppedEvents::default(),
    );
    let admission = AdmissionLoop {
        client,
        caches,
        notify: Arc::new(Notify::new()),
        recorder,
        metrics: Arc::new(Metrics::new()),
        leader: watch::channel(true).1,
        resync: Duration::from_secs(1),
        synced: watch::channel(true).1,
        explanations: Default::default(),
        stats: Default::default(),
        pods_ready: None,
        fair_sharing: None,
        admission_fair_sharing: None,
        prioritize_preemptor_workloads: false,
        recompute_on_overlap: true,
        cycle_break_after: Duration::from_secs(60),
        own_writes: Default::default(),
    };
    let mut state = admission.fresh_state();
    let actions = state.step(&snap, now().as_millisecond());
    assert!(
        matches!(&actions[..], [Action::Pending { key: p, .. }, Action::Admit { key: a, .. }]
            if p.name == "orphan" && a.name == "big"),
        "the step writes orphan pending, then admits big: {actions:?}"
    );
    let mut retries = WriteRetries::default();
    let admitted = admission
        .write_actions(&mut state, &mut retries, &snap, actions)
        .await;
    let writes = Fake::lock(&fake.writes).clone();
    // The next cycle decides on what the cache shows now.
    let after = admission.caches.cluster_queues.state();
    let next = state.step(&snapshot(after, &["default"], wls), now().as_millisecond());
    let big_next = next.into_iter().filter(|a| a.key().name == "big").collect();
    (writes, admitted, big_next)
}

/// Decided again on the cut quota: 4 CPU no longer fits in 3, so `big` is pending, not admitted.
fn pending_on_the_cut_quota(next: &[Action]) -> bool {
    matches!(next, [Action::Pending { reason, .. }] if *reason == crate::queue::PendingReason::ExceedsMaxQuota)
}

fn w(name: &str, admits: bool) -> (String, bool) {
    (name.to_string(), admits)
}

#[tokio::test]
async fn an_admission_is_written_while_its_quota_stands() {
    let (writes, admitted, _) = cycle_with_cut(CutAt::Never).await;
    assert_eq!(writes, vec![w("orphan", false), w("big", true)]);
    assert!(admitted);
}

#[tokio::test]
async fn a_quota_cut_arriving_during_the_cycles_earlier_writes_withdraws_the_admission() {
    let (writes, admitted, again) = cycle_with_cut(CutAt::EarlierWrite).await;
    // The pending write was made; the admission decided on 4 CPU was not written over 3.
    assert_eq!(writes, vec![w("orphan", false)]);
    assert!(!admitted);
    // Back in the queue, decided again on the cut quota.
    assert!(pending_on_the_cut_quota(&again), "{again:?}");
}

#[tokio::test]
async fn a_quota_cut_the_cache_has_not_heard_of_withdraws_the_admission() {
    let (writes, admitted, again) = cycle_with_cut(CutAt::CacheLag).await;
    // The API server already holds 3 CPU: the admission decided on 4 is not written.
    assert_eq!(writes, vec![w("orphan", false)]);
    assert!(!admitted);
    // The next cycle, still on the cache's 4 CPU, decides the same: only the read of the API server
    // (or the watch event, which also wakes the loop) keeps it from being written.
    assert!(matches!(&again[..], [Action::Admit { .. }]), "{again:?}");
}

#[tokio::test]
async fn a_quota_cut_arriving_during_an_admissions_conflict_withdraws_it() {
    let (writes, admitted, again) = cycle_with_cut(CutAt::Conflict).await;
    // The first write was refused (a conflict); the retry on the re-read copy was not made.
    assert_eq!(writes, vec![w("orphan", false), w("big", true)]);
    assert!(!admitted);
    assert!(pending_on_the_cut_quota(&again), "{again:?}");
}
