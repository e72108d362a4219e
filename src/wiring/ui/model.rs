//! What the web view draws from: a snapshot of the watch caches taken once per render (never an API
//! request), the traffic history of each RayService, and the recent Events of the objects shown.
//! Everything kept across renders is bounded, whatever the cluster holds. Also where MultiKueue runs
//! each Workload ([`placement`], [`workers`]), read from what the manager itself wrote: the
//! MultiKueueClusters' `Active` condition and the Workloads' `clusterName`,
//! `nominatedClusterNames` and check states.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::runtime::reflector::Store;

use crate::api::conditions;
use crate::api::kueue::multikueue::{CLUSTER_ACTIVE, MULTIKUEUE_CONTROLLER_NAME, MultiKueueCluster};
use crate::api::kueue::{
    AdmissionCheck, CheckState, ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Topology, Workload,
};
use crate::api::ray::{RayCluster, RayJob, RayService};
use crate::queue::non_tas::NodeUsage;

/// Points kept per RayService for the traffic chart.
pub const HISTORY_POINTS: usize = 120;
/// RayServices whose history is kept (the first ones seen; more are drawn without a chart).
pub const HISTORY_SERVICES: usize = 256;
/// Events kept per object, newest last.
pub const EVENTS_PER_OBJECT: usize = 8;
/// Objects whose Events are kept.
pub const EVENT_OBJECTS: usize = 4096;

/// The caches the view reads: the admission loop's and the view's own for Ray objects.
#[derive(Clone)]
pub struct Stores {
    pub cluster_queues: Store<ClusterQueue>,
    pub cohorts: Store<Cohort>,
    pub flavors: Store<ResourceFlavor>,
    pub local_queues: Store<LocalQueue>,
    pub workloads: Store<Workload>,
    pub ray_services: Store<RayService>,
    pub ray_clusters: Store<RayCluster>,
    pub ray_jobs: Store<RayJob>,
    pub admission_checks: Store<AdmissionCheck>,
    pub multikueue_clusters: Store<MultiKueueCluster>,
    pub topologies: Store<Topology>,
    pub nodes: Store<Node>,
    /// The admission loop's sums of non-TAS pods' requests per node.
    pub non_tas: crate::admission::NonTasUsage,
    pub events: EventLog,
}

/// One render's worth of objects, sorted by namespace and name (shared with the caches, not copied).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub cluster_queues: Vec<Arc<ClusterQueue>>,
    pub cohorts: Vec<Arc<Cohort>>,
    pub flavors: Vec<Arc<ResourceFlavor>>,
    pub local_queues: Vec<Arc<LocalQueue>>,
    pub workloads: Vec<Arc<Workload>>,
    pub ray_services: Vec<Arc<RayService>>,
    pub ray_clusters: Vec<Arc<RayCluster>>,
    pub ray_jobs: Vec<Arc<RayJob>>,
    pub admission_checks: Vec<Arc<AdmissionCheck>>,
    /// The manager's MultiKueue worker clusters (none on a cluster without MultiKueue).
    pub multikueue_clusters: Vec<Arc<MultiKueueCluster>>,
    /// For the Topology domains (see `domains.rs`).
    pub topologies: Vec<Arc<Topology>>,
    pub nodes: Vec<Arc<Node>>,
    /// Per node, what pods TAS did not place request there (as the admission loop counts them).
    pub non_tas: Option<Arc<NodeUsage>>,
    /// Recent Events by (kind, namespace, name) of the object they regard.
    pub events: HashMap<ObjectKey, Vec<EventLine>>,
    /// Traffic history by RayService (namespace, name).
    pub history: HashMap<(String, String), Vec<Sample>>,
    /// Why recent Events are not shown, when they cannot be.
    pub events_unavailable: Option<String>,
}

fn sorted<K: kube::Resource + Clone>(store: &Store<K>) -> Vec<Arc<K>>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let mut items = store.state();
    items.sort_by_key(|o| (o.namespace(), o.name_any()));
    items
}

impl Stores {
    pub fn snapshot(&self, history: &History) -> Snapshot {
        Snapshot {
            cluster_queues: sorted(&self.cluster_queues),
            cohorts: sorted(&self.cohorts),
            flavors: sorted(&self.flavors),
            local_queues: sorted(&self.local_queues),
            workloads: sorted(&self.workloads),
            ray_services: sorted(&self.ray_services),
            ray_clusters: sorted(&self.ray_clusters),
            ray_jobs: sorted(&self.ray_jobs),
            admission_checks: sorted(&self.admission_checks),
            multikueue_clusters: sorted(&self.multikueue_clusters),
            topologies: sorted(&self.topologies),
            nodes: sorted(&self.nodes),
            non_tas: self.non_tas.per_node(),
            events: self.events.lines(),
            history: history.points.clone(),
            events_unavailable: self.events.unavailable(),
        }
    }
}

impl Snapshot {
    /// Changes when any object or Event changes (resource versions, uids, Event counts): the render
    /// loop skips rendering when it has not.
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        fn versions<K: kube::Resource>(items: &[Arc<K>], h: &mut impl Hasher) {
            items.len().hash(h);
            for o in items {
                o.meta().uid.hash(h);
                o.meta().resource_version.hash(h);
            }
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        versions(&self.cluster_queues, &mut h);
        versions(&self.cohorts, &mut h);
        versions(&self.flavors, &mut h);
        versions(&self.local_queues, &mut h);
        versions(&self.workloads, &mut h);
        versions(&self.ray_services, &mut h);
        versions(&self.ray_clusters, &mut h);
        versions(&self.ray_jobs, &mut h);
        versions(&self.admission_checks, &mut h);
        versions(&self.multikueue_clusters, &mut h);
        versions(&self.topologies, &mut h);
        // Not by resource version: a Node's status heartbeats would redraw the page for nothing.
        self.nodes.len().hash(&mut h);
        for n in &self.nodes {
            hash_node(n, &mut h);
        }
        self.non_tas.hash(&mut h);
        let mut events: Vec<(&ObjectKey, &Vec<EventLine>)> = self.events.iter().collect();
        events.sort_by_key(|(k, _)| *k);
        for (k, lines) in events {
            k.hash(&mut h);
            for l in lines {
                (&l.uid, l.count).hash(&mut h);
            }
        }
        self.events_unavailable.hash(&mut h);
        h.finish()
    }
}

/// Hashes what the view shows of a Node: its name, labels, allocatable, and whether it takes pods
/// (cordoned, Ready), which decide its domain and capacity.
fn hash_node(n: &Node, h: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    let status = n.status.as_ref();
    n.metadata.name.hash(h);
    n.metadata.labels.hash(h);
    for (r, q) in status.and_then(|s| s.allocatable.as_ref()).into_iter().flatten() {
        (r, &q.0).hash(h);
    }
    n.spec.as_ref().and_then(|s| s.unschedulable).hash(h);
    status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| &c.status)
        .hash(h);
}

/// Where a Workload with a MultiKueue check is, as the manager recorded it.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    /// The MultiKueue check.
    pub check: String,
    pub state: CheckState,
    /// The worker whose copy was admitted (`status.clusterName`): it runs there.
    pub worker: Option<String>,
    /// The workers holding a copy while none is admitted (`status.nominatedClusterNames`).
    pub nominated: Vec<String>,
}

/// The names of the AdmissionChecks of `kueue.x-k8s.io/multikueue`.
pub fn multikueue_checks(checks: &[Arc<AdmissionCheck>]) -> Vec<String> {
    checks
        .iter()
        .filter(|ac| ac.spec.controller_name == MULTIKUEUE_CONTROLLER_NAME)
        .map(|ac| ac.name_any())
        .collect()
}

/// The placement of `wl` when one of its checks is among `mk_checks` (see [`multikueue_checks`]);
/// `None` for a Workload MultiKueue does not dispatch.
pub fn placement(wl: &Workload, mk_checks: &[String]) -> Option<Placement> {
    let st = wl.status.as_ref()?;
    let acs = st.admission_checks.iter().find(|a| mk_checks.contains(&a.name))?;
    Some(Placement {
        check: acs.name.clone(),
        state: acs.state,
        worker: st.cluster_name.clone().filter(|w| !w.is_empty()),
        nominated: if st.cluster_name.as_deref().is_some_and(|w| !w.is_empty()) {
            Vec::new()
        } else {
            st.nominated_cluster_names.clone()
        },
    })
}

/// One MultiKueue worker as the view shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerRow {
    pub name: String,
    /// A MultiKueueCluster of that name exists (a Workload may name one since deleted).
    pub known: bool,
    /// `True`, `False` or `Unknown` (no `Active` condition yet).
    pub active: String,
    pub reason: String,
    pub message: String,
    /// The unfinished Workloads running there, as (namespace, name), at most [`WORKER_ROWS`].
    pub running: Vec<(String, String)>,
    /// All of them, shown or not.
    pub running_total: usize,
    /// Unfinished Workloads with a copy waiting there (nominated, none admitted yet).
    pub waiting: usize,
}

/// Workloads named per worker: the page stays small however many run there.
pub const WORKER_ROWS: usize = 20;

/// The row of worker `name`, made for a worker no MultiKueueCluster defines.
fn row<'a>(rows: &'a mut BTreeMap<String, WorkerRow>, name: &str) -> &'a mut WorkerRow {
    rows.entry(name.to_string()).or_insert_with(|| WorkerRow {
        name: name.to_string(),
        known: false,
        active: "Unknown".to_string(),
        reason: "NoMultiKueueCluster".to_string(),
        message: "no MultiKueueCluster of that name on the manager".to_string(),
        running: Vec::new(),
        running_total: 0,
        waiting: 0,
    })
}

/// Every MultiKueueCluster with its `Active` status, and the unfinished Workloads each runs or holds
/// a waiting copy of; a worker a Workload names without a MultiKueueCluster gets a row too.
pub fn workers(snap: &Snapshot) -> Vec<WorkerRow> {
    let mut rows: BTreeMap<String, WorkerRow> = BTreeMap::new();
    for c in &snap.multikueue_clusters {
        let conds = c.status.as_ref().map(|s| s.conditions.as_slice());
        let active = conditions::find(conds, CLUSTER_ACTIVE);
        let name = c.name_any();
        rows.insert(
            name.clone(),
            WorkerRow {
                name,
                known: true,
                active: active
                    .map(|a| a.status.clone())
                    .filter(|s| s == "True" || s == "False")
                    .unwrap_or_else(|| "Unknown".to_string()),
                reason: active.map(|a| a.reason.clone()).unwrap_or_default(),
                message: active.map(|a| a.message.clone()).unwrap_or_default(),
                running: Vec::new(),
                running_total: 0,
                waiting: 0,
            },
        );
    }
    let mk = multikueue_checks(&snap.admission_checks);
    if mk.is_empty() {
        return rows.into_values().collect();
    }
    for wl in snap.workloads.iter().filter(|w| !w.is_finished()) {
        let Some(p) = placement(wl, &mk) else { continue };
        if let Some(w) = &p.worker {
            let r = row(&mut rows, w);
            r.running_total += 1;
            if r.running.len() < WORKER_ROWS {
                r.running
                    .push((wl.namespace().unwrap_or_default(), wl.name_any()));
            }
        }
        for n in &p.nominated {
            row(&mut rows, n).waiting += 1;
        }
    }
    rows.into_values().collect()
}

/// (kind, namespace, name)
pub type ObjectKey = (String, String, String);

/// One Event as the view prints it.
#[derive(Clone, Debug, PartialEq)]
pub struct EventLine {
    pub uid: String,
    pub time: Option<jiff::Timestamp>,
    pub type_: String,
    pub reason: String,
    pub note: String,
    pub count: i32,
}

impl EventLine {
    fn of(e: &Event) -> Option<(ObjectKey, EventLine)> {
        let r = e.regarding.as_ref()?;
        let key = (
            r.kind.clone()?,
            r.namespace.clone().unwrap_or_default(),
            r.name.clone()?,
        );
        let time = e
            .series
            .as_ref()
            .map(|s| s.last_observed_time.0)
            .or_else(|| e.event_time.as_ref().map(|t| t.0))
            .or_else(|| e.deprecated_last_timestamp.as_ref().map(|t| t.0))
            .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0));
        let line = EventLine {
            uid: e.metadata.uid.clone().unwrap_or_else(|| e.name_any()),
            time,
            type_: e.type_.clone().unwrap_or_default(),
            reason: e.reason.clone().unwrap_or_default(),
            note: e.note.clone().unwrap_or_default(),
            count: e
                .series
                .as_ref()
                .map(|s| s.count)
                .or(e.deprecated_count)
                .unwrap_or(1),
        };
        Some((key, line))
    }
}

/// The last few Events per object, fed by the view's own Event watcher (no store of every Event).
#[derive(Clone, Default)]
pub struct EventLog(
    Arc<Mutex<HashMap<ObjectKey, VecDeque<EventLine>>>>,
    Arc<Mutex<Option<String>>>,
);

impl EventLog {
    /// Why no Events are shown (the watcher gave up, e.g. the role may not list them).
    pub fn unavailable(&self) -> Option<String> {
        self.1.lock().ok()?.clone()
    }

    pub fn set_unavailable(&self, why: String) {
        if let Ok(mut u) = self.1.lock() {
            *u = Some(why);
        }
    }

    /// Records an Event, replacing an older copy of it (same uid: a series grew).
    pub fn record(&self, e: &Event) {
        let Some((key, line)) = EventLine::of(e) else {
            return;
        };
        let Ok(mut map) = self.0.lock() else { return };
        if !map.contains_key(&key) && map.len() >= EVENT_OBJECTS {
            return;
        }
        let lines = map.entry(key).or_default();
        lines.retain(|l| l.uid != line.uid);
        lines.push_back(line);
        let mut sorted: Vec<EventLine> = lines.drain(..).collect();
        sorted.sort_by_key(|l| l.time);
        let skip = sorted.len().saturating_sub(EVENTS_PER_OBJECT);
        lines.extend(sorted.into_iter().skip(skip));
    }

    pub fn lines(&self) -> HashMap<ObjectKey, Vec<EventLine>> {
        match self.0.lock() {
            Ok(map) => map
                .iter()
                .map(|(k, v)| (k.clone(), v.iter().cloned().collect()))
                .collect(),
            Err(_) => HashMap::new(),
        }
    }
}

/// One point of a RayService's traffic chart. A blue/green upgrade writes no percentages: its active
/// cluster gets all traffic and its pending one none, until the switch.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Seconds since the view started.
    pub t: f64,
    pub active_capacity: Option<i32>,
    pub active_traffic: Option<i32>,
    pub pending_capacity: Option<i32>,
    pub pending_traffic: Option<i32>,
    /// A pending cluster exists.
    pub upgrading: bool,
    /// The active cluster's name: a change is the switch to the new cluster.
    pub active_cluster: Option<String>,
}

impl Sample {
    fn same_values(&self, o: &Sample) -> bool {
        (
            self.active_capacity,
            self.active_traffic,
            self.pending_capacity,
            self.pending_traffic,
            self.upgrading,
            &self.active_cluster,
        ) == (
            o.active_capacity,
            o.active_traffic,
            o.pending_capacity,
            o.pending_traffic,
            o.upgrading,
            &o.active_cluster,
        )
    }
}

/// Traffic and capacity of every RayService over time, sampled by the render loop.
#[derive(Clone, Debug, Default)]
pub struct History {
    pub points: HashMap<(String, String), Vec<Sample>>,
}

/// The sample a RayService's status gives now.
pub fn sample_of(rs: &RayService, t: f64) -> Sample {
    let st = rs.status.as_ref();
    let active = st.and_then(|s| s.active_service_status.as_ref());
    let pending = st
        .and_then(|s| s.pending_service_status.as_ref())
        .filter(|p| p.ray_cluster_name.as_deref().is_some_and(|n| !n.is_empty()));
    let active_cluster = active
        .and_then(|a| a.ray_cluster_name.clone())
        .filter(|n| !n.is_empty());
    Sample {
        t,
        active_capacity: active.and_then(|a| a.target_capacity),
        active_traffic: active
            .and_then(|a| a.traffic_routed_percent)
            .or(active_cluster.as_ref().map(|_| 100)),
        pending_capacity: pending.and_then(|p| p.target_capacity),
        pending_traffic: pending.map(|p| p.traffic_routed_percent.unwrap_or(0)),
        upgrading: pending.is_some(),
        active_cluster,
    }
}

impl History {
    /// Adds a point per RayService whose values changed (and forgets deleted services).
    pub fn observe(&mut self, services: &[Arc<RayService>], t: f64) {
        let live: BTreeMap<(String, String), &Arc<RayService>> = services
            .iter()
            .map(|rs| ((rs.namespace().unwrap_or_default(), rs.name_any()), rs))
            .collect();
        self.points.retain(|k, _| live.contains_key(k));
        for (key, rs) in live {
            if !self.points.contains_key(&key) && self.points.len() >= HISTORY_SERVICES {
                continue;
            }
            let s = sample_of(rs, t);
            let points = self.points.entry(key).or_default();
            if points.last().is_some_and(|last| last.same_values(&s)) {
                continue;
            }
            points.push(s);
            if points.len() > HISTORY_POINTS {
                points.remove(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(active_tc: i32, pending: Option<(i32, i32)>) -> RayService {
        let mut status = json!({"activeServiceStatus": {"rayClusterName": "a", "targetCapacity": active_tc, "trafficRoutedPercent": 100 - pending.map_or(0, |p| p.1)}});
        if let Some((tc, tr)) = pending {
            status["pendingServiceStatus"] =
                json!({"rayClusterName": "b", "targetCapacity": tc, "trafficRoutedPercent": tr});
        }
        serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "s", "namespace": "ns"},
            "spec": {"rayClusterConfig": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": []}}}}}, "status": status}))
        .unwrap()
    }

    #[test]
    fn history_keeps_changes_only_and_is_bounded() {
        let mut h = History::default();
        h.observe(&[Arc::new(service(100, None))], 0.0);
        h.observe(&[Arc::new(service(100, None))], 1.0);
        let key = ("ns".to_string(), "s".to_string());
        assert_eq!(h.points[&key].len(), 1, "an unchanged status adds no point");
        h.observe(&[Arc::new(service(100, Some((50, 0))))], 2.0);
        assert_eq!(h.points[&key].len(), 2);
        assert_eq!(h.points[&key][1].pending_capacity, Some(50));
        for i in 0..(HISTORY_POINTS as i32 * 2) {
            h.observe(
                &[Arc::new(service(100, Some((i % 100, i % 7))))],
                3.0 + f64::from(i),
            );
        }
        assert_eq!(h.points[&key].len(), HISTORY_POINTS);
        h.observe(&[], 1000.0);
        assert!(h.points.is_empty(), "a deleted service's history goes with it");
    }

    #[test]
    fn fingerprint_follows_resource_versions_only() {
        let with_rv = |rv: &str| {
            let mut rs = service(100, None);
            rs.metadata.resource_version = Some(rv.to_string());
            Snapshot {
                ray_services: vec![Arc::new(rs)],
                ..Default::default()
            }
        };
        assert_eq!(with_rv("1").fingerprint(), with_rv("1").fingerprint());
        assert_ne!(with_rv("1").fingerprint(), with_rv("2").fingerprint());
        assert_ne!(with_rv("1").fingerprint(), Snapshot::default().fingerprint());
    }

    fn event(uid: &str, name: &str, secs: i64, reason: &str) -> Event {
        serde_json::from_value(json!({"metadata": {"name": uid, "namespace": "ns", "uid": uid},
            "eventTime": jiff::Timestamp::from_second(secs).unwrap().to_string(),
            "regarding": {"kind": "RayService", "namespace": "ns", "name": name}, "reason": reason, "note": "n", "type": "Normal"}))
        .unwrap()
    }

    fn mk_check(name: &str, controller: &str) -> Arc<AdmissionCheck> {
        Arc::new(
            serde_json::from_value(
                json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
                "metadata": {"name": name}, "spec": {"controllerName": controller}}),
            )
            .unwrap(),
        )
    }

    fn mk_cluster(name: &str, active: Option<(&str, &str)>) -> Arc<MultiKueueCluster> {
        let status = match active {
            Some((s, reason)) => json!({"conditions": [{"type": "Active", "status": s, "reason": reason,
                "message": format!("{name} {reason}"), "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
            None => json!({}),
        };
        Arc::new(
            serde_json::from_value(
                json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
                "metadata": {"name": name}, "spec": {"clusterSource": {"kubeConfig": {"location": name}}},
                "status": status}),
            )
            .unwrap(),
        )
    }

    fn wl(name: &str, status: serde_json::Value) -> Arc<Workload> {
        Arc::new(
            serde_json::from_value(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
                "status": status}))
            .unwrap(),
        )
    }

    fn check_state(name: &str, state: &str) -> serde_json::Value {
        json!({"name": name, "state": state, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"})
    }

    /// The worker a Workload runs on is the one the manager wrote (`clusterName`, Kueue's
    /// "Should run a job on worker if admitted" sets it with the check Ready); before that the
    /// nominated workers hold its copies; a Workload without a MultiKueue check has no placement.
    #[test]
    fn placement_reads_the_managers_own_status() {
        let mk = multikueue_checks(&[
            mk_check("mk", MULTIKUEUE_CONTROLLER_NAME),
            mk_check("prov", "kueue.x-k8s.io/provisioning-request"),
        ]);
        assert_eq!(mk, ["mk"]);
        let running = wl(
            "a",
            json!({"clusterName": "worker1", "admissionChecks": [check_state("prov", "Ready"), check_state("mk", "Ready")]}),
        );
        assert_eq!(
            placement(&running, &mk),
            Some(Placement {
                check: "mk".into(),
                state: CheckState::Ready,
                worker: Some("worker1".into()),
                nominated: vec![]
            })
        );
        let waiting = wl(
            "b",
            json!({"nominatedClusterNames": ["worker1", "worker2"], "admissionChecks": [check_state("mk", "Pending")]}),
        );
        let p = placement(&waiting, &mk).unwrap();
        assert_eq!(
            (p.worker, p.nominated),
            (None, vec!["worker1".to_string(), "worker2".to_string()])
        );
        let local = wl("c", json!({"admissionChecks": [check_state("prov", "Ready")]}));
        assert_eq!(placement(&local, &mk), None);
        assert_eq!(placement(&wl("d", json!({})), &mk), None);
    }

    /// Each MultiKueueCluster with its Active status and reason, the Workloads running there and the
    /// copies waiting there; a worker named by a Workload but not defined gets a row saying so;
    /// finished Workloads are not counted.
    #[test]
    fn workers_show_their_state_and_what_runs_there() {
        let snap = Snapshot {
            admission_checks: vec![mk_check("mk", MULTIKUEUE_CONTROLLER_NAME)],
            multikueue_clusters: vec![
                mk_cluster("worker1", Some(("True", "Active"))),
                mk_cluster("worker2", Some(("False", "ClientConnectionFailed"))),
                mk_cluster("worker3", None),
            ],
            workloads: vec![
                wl(
                    "a",
                    json!({"clusterName": "worker1", "admissionChecks": [check_state("mk", "Ready")]}),
                ),
                wl(
                    "b",
                    json!({"nominatedClusterNames": ["worker1", "worker2"], "admissionChecks": [check_state("mk", "Pending")]}),
                ),
                wl(
                    "c",
                    json!({"clusterName": "gone", "admissionChecks": [check_state("mk", "Ready")]}),
                ),
                wl(
                    "done",
                    json!({"clusterName": "worker1", "admissionChecks": [check_state("mk", "Ready")],
                    "conditions": [{"type": "Finished", "status": "True", "reason": "Succeeded", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
                ),
            ],
            ..Default::default()
        };
        let rows = workers(&snap);
        let by = |n: &str| rows.iter().find(|r| r.name == n).unwrap().clone();
        assert_eq!(
            rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["gone", "worker1", "worker2", "worker3"]
        );
        let w1 = by("worker1");
        assert_eq!((w1.active.as_str(), w1.reason.as_str()), ("True", "Active"));
        assert_eq!(w1.running, [("ns".to_string(), "a".to_string())]);
        assert_eq!((w1.running_total, w1.waiting), (1, 1));
        let w2 = by("worker2");
        assert_eq!(
            (w2.active.as_str(), w2.reason.as_str(), w2.message.as_str()),
            (
                "False",
                "ClientConnectionFailed",
                "worker2 ClientConnectionFailed"
            )
        );
        assert_eq!((w2.running_total, w2.waiting), (0, 1));
        assert_eq!(by("worker3").active, "Unknown");
        let gone = by("gone");
        assert!(!gone.known);
        assert_eq!(gone.running_total, 1);
        // Without a MultiKueue check nothing is placed, but the clusters are still listed.
        let plain = Snapshot {
            admission_checks: vec![],
            ..snap.clone()
        };
        let rows = workers(&plain);
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|r| r.running_total == 0 && r.waiting == 0));
    }

    #[test]
    fn workers_name_a_bounded_number_of_workloads() {
        let workloads = (0..(WORKER_ROWS + 5))
            .map(|i| {
                wl(
                    &format!("w{i}"),
                    json!({"clusterName": "worker1", "admissionChecks": [check_state("mk", "Ready")]}),
                )
            })
            .collect();
        let snap = Snapshot {
            admission_checks: vec![mk_check("mk", MULTIKUEUE_CONTROLLER_NAME)],
            multikueue_clusters: vec![mk_cluster("worker1", Some(("True", "Active")))],
            workloads,
            ..Default::default()
        };
        let rows = workers(&snap);
        assert_eq!(rows[0].running.len(), WORKER_ROWS);
        assert_eq!(rows[0].running_total, WORKER_ROWS + 5);
    }

    #[test]
    fn event_log_keeps_the_newest_per_object_once() {
        let log = EventLog::default();
        for i in 0..20 {
            log.record(&event(&format!("u{i}"), "s", 100 - i, &format!("R{i}")));
        }
        log.record(&event("u19", "s", 500, "again"));
        let lines = log.lines();
        let got = &lines[&("RayService".to_string(), "ns".to_string(), "s".to_string())];
        assert_eq!(got.len(), EVENTS_PER_OBJECT);
        assert_eq!(
            got.last().map(|l| l.reason.as_str()),
            Some("again"),
            "newest last, a re-sent event replaces its copy"
        );
        assert_eq!(got.iter().filter(|l| l.uid == "u19").count(), 1);
    }
}
