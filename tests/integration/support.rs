//! A cluster for the scenarios: the embedded API server, the real manager against it, and a watch
//! that checks quota safety (DESIGN I1) on every Workload event, not only at the end.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use quotagate::api::kueue::builders::ClusterQueueBuilder;
use quotagate::api::kueue::constants::condition;
use quotagate::api::kueue::{
    AdmissionCheck, AdmissionCheckSpec, AdmissionCheckStatus, CheckState, ClusterQueue, LocalQueue,
    ResourceFlavor, Workload,
};
use quotagate::api::quantity::{Quantity, resource_value};
use quotagate::embedded::EmbeddedServer;
use quotagate::wiring::manager::{ManagerOptions, embedded_server, run_manager};
use quotagate::wiring::ray::Dashboards;
use tokio::sync::oneshot;

pub const WAIT: Duration = Duration::from_secs(20);

pub struct Manager {
    stop: Option<oneshot::Sender<()>>,
    handle: tokio::task::JoinHandle<()>,
}

impl Manager {
    pub fn start(client: Client, leader_election: bool, identity: &str) -> Manager {
        Self::start_with(client, leader_election, identity, None)
    }

    /// As [`Manager::start`], with the embedded Ray operator on these dashboards.
    pub fn start_with(
        client: Client,
        leader_election: bool,
        identity: &str,
        ray: Option<Dashboards>,
    ) -> Manager {
        let opts = ManagerOptions {
            leader_election,
            identity: identity.to_string(),
            resync: Duration::from_millis(300),
            ray,
            ..Default::default()
        };
        Self::start_opts(client, opts)
    }

    pub fn start_opts(client: Client, opts: ManagerOptions) -> Manager {
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(async move {
            if let Err(e) = run_manager(client, opts, async move {
                let _ = rx.await;
            })
            .await
            {
                panic!("manager failed: {e}");
            }
        });
        Manager {
            stop: Some(tx),
            handle,
        }
    }

    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = tokio::time::timeout(WAIT, &mut self.handle).await;
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

pub struct Cluster {
    pub server: Arc<EmbeddedServer>,
    pub client: Client,
    pub manager: Option<Manager>,
    pub quota: QuotaWatch,
    /// The Ray operator's dashboards, when the cluster runs it (kept across manager restarts).
    pub ray: Option<Dashboards>,
    /// When set, managers run on this client (a principal under a Role) with leader election in
    /// this namespace, as deployed.
    pub restricted: Option<(Client, String)>,
    /// The simulated load through RayServices' HTTPRoutes (with `start_with_ray`).
    pub load: Option<quotagate::wiring::raysim::LoadBoard>,
    /// The job kinds managers started by `restart_manager` manage (Kueue's `integrations.frameworks`).
    pub frameworks: quotagate::api::kueue::config::Frameworks,
    /// The KubeRay feature gates of managers started by `restart_manager`.
    pub ray_gates: quotagate::api::ray::validation::RayFeatureGates,
    _sims: Option<tokio_util::sync::DropGuard>,
}

impl Cluster {
    /// Server, quota watch and one manager (no leader election unless asked).
    pub async fn start(limits: Limits) -> Cluster {
        Self::start_on(embedded_server(), limits).await
    }

    /// As [`Cluster::start`], on a server the caller built (e.g. with admission off).
    pub async fn start_on(server: Arc<EmbeddedServer>, limits: Limits) -> Cluster {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let client = server.client();
        let quota = QuotaWatch::start(client.clone(), limits).await;
        let manager = Some(Manager::start(client.clone(), false, "m1"));
        Cluster {
            server,
            client,
            manager,
            quota,
            ray: None,
            restricted: None,
            load: None,
            frameworks: Default::default(),
            ray_gates: Default::default(),
            _sims: None,
        }
    }

    /// As [`Cluster::start`], with the Ray operator on simulated dashboards and the simulated node agent
    /// and endpoints controller, so RayServices become Ready.
    pub async fn start_with_ray(limits: Limits) -> Cluster {
        Self::start_with_ray_on(embedded_server(), limits).await
    }

    /// As [`Cluster::start_with_ray`], on a server the caller built.
    pub async fn start_with_ray_on(server: Arc<EmbeddedServer>, limits: Limits) -> Cluster {
        Self::start_with_ray_sims(server, limits, quotagate::embedded::sim::SimConfig::default()).await
    }

    /// As [`Cluster::start_with_ray_on`], with these simulators (e.g. nodes with capacity and the
    /// scheduler, as `run --embedded --nodes N --node-capacity ...` starts them).
    pub async fn start_with_ray_sims(
        server: Arc<EmbeddedServer>,
        limits: Limits,
        sims: quotagate::embedded::sim::SimConfig,
    ) -> Cluster {
        let mut c = Cluster::start_on(server, limits).await;
        let cancel = tokio_util::sync::CancellationToken::new();
        quotagate::embedded::sim::spawn(c.client.clone(), &sims, cancel.clone());
        let dashboards = Dashboards::simulated(Duration::from_millis(50), Duration::from_millis(50));
        if let Dashboards::Simulated(sim) = &dashboards {
            // The autoscaler and the users' load act with the server's own client, as Ray's
            // autoscaler and clients do; 100 requests per second through every RayService route.
            let opts = quotagate::wiring::raysim::RaySimOptions {
                load_rps: 100.0,
                route_scan: Duration::from_millis(100),
                ..Default::default()
            };
            let (_, board) =
                quotagate::wiring::raysim::spawn(c.client.clone(), sim.clone(), &opts, cancel.clone());
            c.load = Some(board);
        }
        c._sims = Some(cancel.drop_guard());
        c.ray = Some(dashboards);
        c.restart_manager("m1").await;
        c
    }

    /// As [`Cluster::start`], with the Ray operator on simulated dashboards and the simulated node agent
    /// and endpoints controller, but no simulated autoscaler or load: the test itself writes what Ray's
    /// autoscaler would (`replicas`, `workersToDelete`). Submitter pods' `ray job submit` runs.
    pub async fn start_with_ray_operator(limits: Limits) -> Cluster {
        let mut c = Cluster::start_on(embedded_server(), limits).await;
        let cancel = tokio_util::sync::CancellationToken::new();
        quotagate::embedded::sim::spawn(
            c.client.clone(),
            &quotagate::embedded::sim::SimConfig::default(),
            cancel.clone(),
        );
        let dashboards = Dashboards::simulated(Duration::from_millis(50), Duration::from_millis(50));
        if let Dashboards::Simulated(sim) = &dashboards {
            // Only the Ray CLI of RayJob submitter pods (K8sJobMode).
            let opts = quotagate::wiring::raysim::RaySimOptions {
                autoscaler: None,
                load_rps: 0.0,
                ..Default::default()
            };
            quotagate::wiring::raysim::spawn(c.client.clone(), sim.clone(), &opts, cancel.clone());
        }
        c._sims = Some(cancel.drop_guard());
        c.ray = Some(dashboards);
        c.restart_manager("m1").await;
        c
    }

    /// Stops the manager and starts one with the tests' options (no leader election, identity `m1`,
    /// resync 300 ms, this cluster's Ray operator) as `set` changes them: a Kueue config's switches.
    pub async fn restart_manager_with(&mut self, set: impl FnOnce(&mut ManagerOptions)) {
        if let Some(m) = self.manager.take() {
            m.stop().await;
        }
        let mut opts = ManagerOptions {
            leader_election: false,
            identity: "m1".into(),
            resync: Duration::from_millis(300),
            ray: self.ray.clone(),
            ..Default::default()
        };
        set(&mut opts);
        self.manager = Some(Manager::start_opts(self.client.clone(), opts));
    }

    pub async fn restart_manager(&mut self, identity: &str) {
        if let Some(m) = self.manager.take() {
            m.stop().await;
        }
        self.manager = Some(match &self.restricted {
            Some((client, lease_namespace)) => Manager::start_opts(
                client.clone(),
                ManagerOptions {
                    leader_election: true,
                    lease_namespace: lease_namespace.clone(),
                    identity: identity.to_string(),
                    resync: Duration::from_millis(300),
                    ray: self.ray.clone(),
                    frameworks: self.frameworks,
                    ray_gates: self.ray_gates,
                    ..Default::default()
                },
            ),
            None => Manager::start_opts(
                self.client.clone(),
                ManagerOptions {
                    leader_election: false,
                    identity: identity.to_string(),
                    resync: Duration::from_millis(300),
                    ray: self.ray.clone(),
                    frameworks: self.frameworks,
                    ray_gates: self.ray_gates,
                    ..Default::default()
                },
            ),
        });
    }

    /// From now on the manager runs as the principal of `authz` (every request authorized by the
    /// Roles it was built from), with leader election in `lease_namespace`.
    pub async fn restrict_manager(
        &mut self,
        authz: Arc<quotagate::embedded::rbac::Authorizer>,
        lease_namespace: &str,
    ) {
        let client = self.server.client_as(authz);
        self.restricted = Some((client, lease_namespace.to_string()));
        self.restart_manager("m1").await;
    }

    pub fn workloads(&self) -> Api<Workload> {
        Api::namespaced(self.client.clone(), "default")
    }

    pub async fn flavor(&self, name: &str) {
        let api: Api<ResourceFlavor> = Api::all(self.client.clone());
        api.create(&PostParams::default(), &ResourceFlavor::build(name).build())
            .await
            .unwrap();
    }

    pub async fn cluster_queue(&self, cq: ClusterQueue) {
        let api: Api<ClusterQueue> = Api::all(self.client.clone());
        api.create(&PostParams::default(), &cq).await.unwrap();
    }

    pub async fn local_queue(&self, name: &str, cq: &str) {
        let api: Api<LocalQueue> = Api::namespaced(self.client.clone(), "default");
        api.create(
            &PostParams::default(),
            &LocalQueue::build(name, "default").cluster_queue(cq).build(),
        )
        .await
        .unwrap();
    }

    /// A one-podset workload asking `cpu` per pod.
    pub async fn workload(&self, name: &str, lq: &str, priority: i32, cpu: &str) -> Workload {
        self.try_workload(name, lq, priority, cpu).await.unwrap()
    }

    pub async fn try_workload(
        &self,
        name: &str,
        lq: &str,
        priority: i32,
        cpu: &str,
    ) -> Result<Workload, kube::Error> {
        let wl = Workload::build(name, "default")
            .queue(lq)
            .priority(priority)
            .podset("main", 1, [("cpu", cpu)])
            .build();
        self.workloads().create(&PostParams::default(), &wl).await
    }

    /// Simple setup: flavor "default", CQ `cq` (StrictFIFO or not) with `cpu` nominal, LQ `lq`.
    pub async fn simple(&self, cq: &str, lq: &str, cpu: &str) {
        self.flavor("default").await;
        let mut q = cq_with(cq, cpu).build();
        q.spec.namespace_selector = Some(Default::default());
        self.cluster_queue(q).await;
        self.local_queue(lq, cq).await;
    }
}

/// A ClusterQueue with `cpu` in flavor `default`, and memory enough for any test (RayCluster workers
/// request memory through the operator's `wait-gcs-ready` init container even when their templates do not).
pub fn cq_with(name: &str, cpu: &str) -> ClusterQueueBuilder {
    ClusterQueue::build(name).flavor("default", [("cpu", cpu), ("memory", "64Gi")])
}

pub fn with_all_namespaces(mut cq: ClusterQueue) -> ClusterQueue {
    cq.spec.namespace_selector = Some(Default::default());
    cq
}

/// Waits until the named object satisfies `cond`, watching (never sleeping); panics with the last
/// state seen after `WAIT`.
pub async fn wait_for<K>(api: &Api<K>, name: &str, what: &str, cond: impl Fn(&K) -> bool) -> K
where
    K: Resource
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let mut last: Option<K> = None;
    let stream = watcher(
        api.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .default_backoff();
    futures::pin_mut!(stream);
    let found = tokio::time::timeout(WAIT, async {
        while let Some(ev) = stream.next().await {
            if let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = ev {
                if cond(&o) {
                    return Some(o);
                }
                last = Some(o);
            }
        }
        None
    })
    .await;
    match found {
        Ok(Some(o)) => o,
        _ => panic!(
            "timed out waiting for {name}: {what}; last seen: {:#?}",
            last.map(|o| serde_json::to_string(&o).unwrap_or_default())
        ),
    }
}

/// Waits until the named object is gone from the API (finalizers removed), watching.
pub async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let stream = watcher(
        api.clone(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .default_backoff();
    futures::pin_mut!(stream);
    let mut listed = false;
    let gone = tokio::time::timeout(WAIT, async {
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Delete(_)) => return,
                Ok(watcher::Event::Init) => listed = false,
                Ok(watcher::Event::InitApply(_)) => listed = true,
                Ok(watcher::Event::InitDone) if !listed => return,
                _ => {}
            }
        }
    })
    .await;
    assert!(gone.is_ok(), "timed out waiting for {name} to be gone");
}

pub fn condition(wl: &Workload, type_: &str) -> Option<(String, String, String)> {
    wl.status
        .as_ref()?
        .condition(type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

pub fn reserved(wl: &Workload) -> bool {
    wl.admission().is_some() && wl.has_quota_reservation()
}

/// Quota limits (milli-cpu) the watch enforces: per ClusterQueue, and per group of ClusterQueues
/// sharing a cohort.
#[derive(Clone, Default)]
pub struct Limits {
    pub cq: BTreeMap<String, i64>,
    pub groups: Vec<(Vec<String>, i64)>,
}

impl Limits {
    pub fn cq(mut self, name: &str, milli_cpu: i64) -> Self {
        self.cq.insert(name.to_string(), milli_cpu);
        self
    }
    pub fn group(mut self, cqs: &[&str], milli_cpu: i64) -> Self {
        self.groups
            .push((cqs.iter().map(|s| s.to_string()).collect(), milli_cpu));
        self
    }
}

#[derive(Default)]
struct WatchState {
    usage: HashMap<String, (String, i64)>,
    /// reserved slice -> the slice it replaces (only the latest slice of a chain counts).
    replaces: HashMap<String, String>,
    /// Times each workload went from unreserved to reserved.
    admissions: HashMap<String, u32>,
    violations: Vec<String>,
    events: u64,
}

/// Watches every Workload and checks, at every event, that reserved cpu per ClusterQueue (and per
/// cohort group) stays within the limits.
#[derive(Clone)]
pub struct QuotaWatch {
    state: Arc<Mutex<WatchState>>,
    limits: Arc<Mutex<Limits>>,
    /// Bumped on every observed event, so tests can wait on the watch state.
    seen: tokio::sync::watch::Receiver<u64>,
    task: Arc<tokio::task::JoinHandle<()>>,
}

impl QuotaWatch {
    pub async fn start(client: Client, limits: Limits) -> QuotaWatch {
        let state = Arc::new(Mutex::new(WatchState::default()));
        let s = state.clone();
        let limits = Arc::new(Mutex::new(limits));
        let l = limits.clone();
        let (seen_tx, seen) = tokio::sync::watch::channel(0u64);
        let api: Api<Workload> = Api::all(client);
        let task = tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default()).default_backoff();
            futures::pin_mut!(stream);
            while let Some(ev) = stream.next().await {
                let mut st = s.lock().unwrap();
                match ev {
                    Ok(watcher::Event::Apply(w) | watcher::Event::InitApply(w)) => {
                        let key = format!("{}/{}", w.namespace().unwrap_or_default(), w.name_any());
                        let now = if reserved(&w) && !w.is_finished() {
                            let a = w.admission().unwrap();
                            // As Kueue counts it: an elastic workload scaled down in place keeps
                            // its admission, and uses only the share of its spec's pod count.
                            let cpu: i64 = a
                                .pod_set_assignments
                                .iter()
                                .filter_map(|p| {
                                    let total = resource_value(
                                        "cpu",
                                        &Quantity::try_from(p.resource_usage.get("cpu")?).unwrap(),
                                    );
                                    let admitted = i64::from(p.count.unwrap_or(1)).max(1);
                                    let now = w
                                        .spec
                                        .pod_sets
                                        .iter()
                                        .find(|s| s.name.as_deref().unwrap_or("main") == p.name)
                                        .map_or(admitted, |s| i64::from(s.count.unwrap_or(1)));
                                    Some(total / admitted * now.min(admitted))
                                })
                                .sum();
                            Some((a.cluster_queue.clone(), cpu))
                        } else {
                            None
                        };
                        let before = st.usage.contains_key(&key);
                        match now {
                            Some(u) => {
                                if !before {
                                    *st.admissions.entry(key.clone()).or_default() += 1;
                                }
                                let old = w
                                    .annotations()
                                    .get("kueue.x-k8s.io/workload-slice-replacement-for")
                                    .cloned();
                                match old {
                                    Some(o) => st.replaces.insert(key.clone(), o),
                                    None => st.replaces.remove(&key),
                                };
                                st.usage.insert(key, u);
                            }
                            None => {
                                st.usage.remove(&key);
                                st.replaces.remove(&key);
                            }
                        }
                    }
                    Ok(watcher::Event::Delete(w)) => {
                        st.usage
                            .remove(&format!("{}/{}", w.namespace().unwrap_or_default(), w.name_any()));
                    }
                    _ => {}
                }
                st.events += 1;
                let mut per_cq: BTreeMap<String, i64> = BTreeMap::new();
                let superseded: std::collections::HashSet<&String> = st.replaces.values().collect();
                for (k, (cq, cpu)) in &st.usage {
                    if !superseded.contains(k) {
                        *per_cq.entry(cq.clone()).or_default() += cpu;
                    }
                }
                let mut bad = Vec::new();
                let limits = l.lock().unwrap().clone();
                for (cq, used) in &per_cq {
                    if let Some(limit) = limits.cq.get(cq)
                        && used > limit
                    {
                        bad.push(format!(
                            "ClusterQueue {cq} uses {used}m cpu > {limit}m: {:?}",
                            st.usage
                        ));
                    }
                }
                for (cqs, limit) in &limits.groups {
                    let used: i64 = cqs.iter().filter_map(|c| per_cq.get(c)).sum();
                    if used > *limit {
                        bad.push(format!(
                            "cohort {cqs:?} uses {used}m cpu > {limit}m: {:?}",
                            st.usage
                        ));
                    }
                }
                st.violations.extend(bad);
                let n = st.events;
                drop(st);
                let _ = seen_tx.send(n);
            }
        });
        QuotaWatch {
            state,
            limits,
            seen,
            task: Arc::new(task),
        }
    }

    /// Waits (on the watch, not on a timer) until `count` workloads hold quota in `cq`.
    pub async fn wait_reserved(&self, cq: &str, count: usize) {
        let mut seen = self.seen.clone();
        let reached = tokio::time::timeout(WAIT, async {
            loop {
                if self.reserved_in(cq) == count {
                    return;
                }
                if seen.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        assert!(
            reached.is_ok() && self.reserved_in(cq) == count,
            "expected {count} reserved in {cq}, have {}",
            self.reserved_in(cq)
        );
    }

    pub async fn wait_reserved_at_least(&self, cq: &str, count: usize) {
        let mut seen = self.seen.clone();
        let reached = tokio::time::timeout(WAIT, async {
            while self.reserved_in(cq) < count {
                if seen.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        assert!(
            reached.is_ok(),
            "expected at least {count} reserved in {cq}, have {}",
            self.reserved_in(cq)
        );
    }

    /// Returns after the next Workload event (or after `WAIT`).
    pub async fn wait_any_event(&self) {
        let mut seen = self.seen.clone();
        seen.mark_unchanged();
        let _ = tokio::time::timeout(WAIT, seen.changed()).await;
    }

    pub fn reserved_in(&self, cq: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .usage
            .values()
            .filter(|(c, _)| c == cq)
            .count()
    }

    /// Workloads that were reserved more than once.
    pub fn readmitted(&self) -> Vec<(String, u32)> {
        self.state
            .lock()
            .unwrap()
            .admissions
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(k, n)| (k.clone(), *n))
            .collect()
    }

    /// Call before raising a ClusterQueue's quota.
    pub fn set_cq_limit(&self, cq: &str, milli_cpu: i64) {
        self.limits.lock().unwrap().cq.insert(cq.to_string(), milli_cpu);
    }

    /// Fails the test on any observed over-commitment.
    pub fn assert_safe(&self) {
        let st = self.state.lock().unwrap();
        assert!(
            st.violations.is_empty(),
            "quota exceeded at some moment: {:#?}",
            st.violations
        );
        assert!(st.events > 0, "the quota watch saw no event");
    }

    pub fn admissions(&self, ns_name: &str) -> u32 {
        self.state
            .lock()
            .unwrap()
            .admissions
            .get(ns_name)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for QuotaWatch {
    fn drop(&mut self) {
        if Arc::strong_count(&self.task) == 1 {
            self.task.abort();
        }
    }
}

/// `/metrics` of a manager serving it on `addr` (an empty string until it listens).
pub async fn scrape(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
        return String::new();
    };
    if s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .is_err()
    {
        return String::new();
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out).await;
    out
}

/// A RayCluster on LocalQueue "lq": a 1-CPU head and one 1-CPU worker (0 to 2), Ray 2.9.0, with
/// `worker_annotations` on the worker template (e.g. the simulated node's fail annotation).
pub fn queued_ray_cluster(
    name: &str,
    worker_annotations: serde_json::Value,
) -> quotagate::api::ray::RayCluster {
    let container = |n: &str| serde_json::json!({"name": n, "image": "rayproject/ray:2.9.0", "resources": {"requests": {"cpu": "1"}}});
    serde_json::from_value(serde_json::json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "default", "labels": {quotagate::api::kueue::constants::label::QUEUE_NAME: "lq"}},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head")]}}},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "minReplicas": 0, "maxReplicas": 2, "rayStartParams": {},
                "template": {"metadata": {"annotations": worker_annotations}, "spec": {"containers": [container("ray-worker")]}}}]
        }
    }))
    .expect("a valid RayCluster")
}

// ---- admission checks, as their controller (played by the test) sets them ----

/// A condition's (status, reason, message), as `condition` returns it.
pub fn cond(s: &str, r: &str, m: &str) -> Option<(String, String, String)> {
    Some((s.into(), r.into(), m.into()))
}

pub fn checks_api(c: &Cluster) -> Api<AdmissionCheck> {
    Api::all(c.client.clone())
}

/// Creates an AdmissionCheck run by `controller`; `active`: the test, as that controller, marks it
/// Active (Kueue's `util.SetAdmissionCheckActive`).
pub async fn admission_check(c: &Cluster, name: &str, controller: &str, active: bool) {
    let api = checks_api(c);
    let ac = AdmissionCheck::new(
        name,
        AdmissionCheckSpec {
            controller_name: controller.into(),
            parameters: None,
        },
    );
    api.create(&PostParams::default(), &ac).await.unwrap();
    if active {
        set_check_active(c, name).await;
    }
}

pub async fn set_check_active(c: &Cluster, name: &str) {
    let api = checks_api(c);
    retry_conflicts(|| async {
        let mut ac = api.get(name).await?;
        ac.status = Some(AdmissionCheckStatus {
            conditions: vec![quotagate::api::conditions::new(
                condition::ACTIVE,
                true,
                "Active",
                "set by the test",
                None,
                jiff::Timestamp::now(),
            )],
        });
        api.replace_status(name, &PostParams::default(), &ac)
            .await
            .map(|_| ())
    })
    .await;
}

/// Runs `f` until it does not meet a conflict (the manager writes the same objects).
pub async fn retry_conflicts<F, Fut>(mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    for _ in 0..50 {
        match f().await {
            Ok(()) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => tokio::task::yield_now().await,
            Err(e) => panic!("{e}"),
        }
    }
    panic!("conflicts did not stop");
}

/// The check's controller sets `wl`'s state for `check` (Kueue's `SetAdmissionCheckState` and a
/// status update).
pub async fn set_check_state(
    c: &Cluster,
    wl: &str,
    check: &str,
    state: CheckState,
    message: &str,
    requeue_after: Option<i32>,
) {
    let wls = c.workloads();
    retry_conflicts(|| async {
        let mut w = wls.get(wl).await?;
        let st = w.status.get_or_insert_with(Default::default);
        let Some(s) = st.admission_checks.iter_mut().find(|s| s.name == check) else {
            panic!("{wl} has no state for {check}: {:?}", st.admission_checks)
        };
        if s.state != state {
            s.last_transition_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::now(),
            ));
        }
        s.state = state;
        s.message = message.into();
        s.requeue_after_seconds = requeue_after;
        wls.replace_status(wl, &PostParams::default(), &w)
            .await
            .map(|_| ())
    })
    .await;
}

/// Waits until `name` holds quota but waits for its admission checks.
pub async fn reserved_not_admitted(c: &Cluster, name: &str) -> Workload {
    wait_for(&c.workloads(), name, "quota reserved, checks unsatisfied", |w| {
        reserved(w)
            && condition(w, condition::ADMITTED)
                == cond(
                    "False",
                    "UnsatisfiedAdmissionChecks",
                    "The workload has not all checks ready",
                )
    })
    .await
}

/// The shipped Role (`config/rbac/role.yaml` and the leader-election Role) as the manager's
/// ServiceAccount holds it.
pub fn shipped_role() -> std::sync::Arc<quotagate::embedded::rbac::Authorizer> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/config/rbac/");
    let mut docs = Vec::new();
    for f in ["role.yaml", "leader_election_role.yaml"] {
        let text = std::fs::read_to_string(format!("{dir}{f}")).unwrap();
        docs.extend(quotagate::api::manifest::load_documents(&text).unwrap());
    }
    let user = "system:serviceaccount:quotagate-system:quotagate-controller-manager";
    std::sync::Arc::new(quotagate::embedded::rbac::Authorizer::from_documents(user, &docs).unwrap())
}

/// What the shipped Role grants for MultiKueue alone: used only by the manager of a MultiKueue run.
pub const MULTIKUEUE_GRANTS: [&str; 5] = [
    "get kueue.x-k8s.io/multikueueconfigs",
    "list kueue.x-k8s.io/multikueueclusters",
    "update batch/jobs/status",
    "update kueue.x-k8s.io/multikueueclusters/status",
    "watch kueue.x-k8s.io/multikueueclusters",
];
