//! `quotagate bench incremental`: one incremental RayService upgrade
//! (`NewClusterWithIncrementalUpgrade`) per traffic policy, each on a fresh embedded cluster with the
//! same simulators, under a steady load through the service's HTTPRoute. Prints each run's timeline
//! (capacity, traffic, route weight and RUNNING replicas of the old and the new cluster), how long the
//! upgrade took and how many requests failed.
//!
//! The two policies differ only in `rsctl::Config::incremental_timer_only`: ours moves traffic to a
//! cluster once its Serve replicas run at the pushed `target_capacity`; KubeRay's moves it when the
//! interval has passed. Everything printed is measured by the run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::gateway::HTTPRoute;
use crate::api::ray::rayservice::RayServiceStatus;
use crate::api::ray::{RayCluster, RayService, RayServiceStatuses};
use crate::embedded::EmbeddedServer;
use crate::embedded::sim::{self as cluster_sim, SimConfig, node::NodeAgentConfig};
use crate::rayservice::cluster::names;
use crate::rayservice::clusterctl::controller as clusterctl;
use crate::rayservice::dashboard::sim::autoscaler::{self, AutoscalerConfig};
use crate::rayservice::dashboard::sim::loadgen::{self, LoadConfig, LoadCounts, LoadGen};
use crate::rayservice::dashboard::sim::{RaySim, SimOptions};
use crate::rayservice::dashboard::{DEFAULT_DASHBOARD_PORT, DashboardEndpoint, RayDashboard};
use crate::rayservice::servicectl::controller::{self as rsctl, DashboardFactory};
use crate::wiring::manager::embedded_server;

const NS: &str = "default";
const NAME: &str = "fruit";
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// Load keeps running this long after promotion, so requests the data plane still sends by the
/// last route count too.
const TAIL: Duration = Duration::from_secs(1);

/// How traffic moves to the gaining cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Ours: only once its Serve replicas are RUNNING at the pushed target_capacity.
    RunningCapacity,
    /// KubeRay's: on the interval timer alone.
    TimerOnly,
}

pub const POLICIES: [Policy; 2] = [Policy::RunningCapacity, Policy::TimerOnly];

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::RunningCapacity => "running-capacity",
            Policy::TimerOnly => "timer-only",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Policy::RunningCapacity => {
                "traffic to a cluster only once its replicas are RUNNING at the pushed target_capacity"
            }
            Policy::TimerOnly => "traffic moves on the interval timer alone (KubeRay)",
        }
    }
}

/// The simulators' delays: short, but each step of a real upgrade takes some time.
#[derive(Clone, Debug)]
pub struct Delays {
    pub pod_start: Duration,
    pub serve_build: Duration,
    pub replica_start: Duration,
    pub replica_stop: Duration,
    pub autoscaler_period: Duration,
}

impl Default for Delays {
    fn default() -> Self {
        Self {
            pod_start: Duration::from_secs(1),
            serve_build: Duration::from_millis(500),
            replica_start: Duration::from_secs(1),
            replica_stop: Duration::from_secs(1),
            autoscaler_period: Duration::from_millis(250),
        }
    }
}

/// The flags, as the user gave them (checked by [`Options::check`]).
#[derive(Clone, Debug)]
pub struct Options {
    /// `stepSizePercent`.
    pub step: i64,
    /// `intervalSeconds`.
    pub interval: i64,
    /// `maxSurgePercent`.
    pub surge: i64,
    /// Requests per second through the route.
    pub rps: f64,
    /// How long the service may take to become Ready, and then the upgrade to be promoted.
    pub timeout: Duration,
    pub delays: Delays,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            step: 25,
            interval: 2,
            surge: 50,
            rps: 100.0,
            timeout: Duration::from_secs(90),
            delays: Delays::default(),
        }
    }
}

pub const MAX_INTERVAL_SECONDS: i64 = 60;
pub const MAX_RPS: f64 = 10_000.0;
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// The upgrade options as they go into the RayService.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Upgrade {
    pub step: i32,
    pub interval: i32,
    pub surge: i32,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--{flag} {value}: {rule}")]
    Flag {
        flag: &'static str,
        value: String,
        rule: String,
    },
    #[error("{policy}: no {what} within {}s; last seen: {last}", waited.as_secs())]
    Timeout {
        policy: &'static str,
        what: &'static str,
        waited: Duration,
        last: String,
    },
    #[error("{policy}: {what}: {source}")]
    Kube {
        policy: &'static str,
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("building the RayService: {0}")]
    Manifest(#[from] serde_json::Error),
}

impl Options {
    /// The flags in range, or an error naming the flag.
    pub fn check(&self) -> Result<Upgrade, Error> {
        let percent = |flag: &'static str, v: i64| {
            i32::try_from(v)
                .ok()
                .filter(|p| (1..=100).contains(p))
                .ok_or_else(|| Error::Flag {
                    flag,
                    value: v.to_string(),
                    rule: "a percentage from 1 to 100".into(),
                })
        };
        let step = percent("step", self.step)?;
        let surge = percent("surge", self.surge)?;
        let interval = i32::try_from(self.interval)
            .ok()
            .filter(|s| (1..=MAX_INTERVAL_SECONDS).contains(&i64::from(*s)))
            .ok_or_else(|| Error::Flag {
                flag: "interval",
                value: self.interval.to_string(),
                rule: format!("whole seconds from 1 to {MAX_INTERVAL_SECONDS}"),
            })?;
        if !(self.rps > 0.0 && self.rps <= MAX_RPS) {
            return Err(Error::Flag {
                flag: "rps",
                value: self.rps.to_string(),
                rule: format!("requests per second above 0, at most {MAX_RPS}"),
            });
        }
        if self.timeout.is_zero() || self.timeout > MAX_TIMEOUT {
            return Err(Error::Flag {
                flag: "timeout",
                value: format!("{}s", self.timeout.as_secs_f64()),
                rule: format!("above 0, at most {}s", MAX_TIMEOUT.as_secs()),
            });
        }
        Ok(Upgrade {
            step,
            interval,
            surge,
        })
    }
}

/// One cluster as a timeline row shows it; `None` where there is nothing to show.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// `target_capacity` in the RayService status.
    pub capacity: Option<i32>,
    /// `traffic_routed_percent` in the RayService status.
    pub traffic: Option<i32>,
    /// Its weight in the HTTPRoute.
    pub weight: Option<i32>,
    /// RUNNING replicas of its weakest app (`RaySim::running_replicas`).
    pub running: Option<u32>,
}

/// What changed at `at` (time since the upgrade was triggered).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub at: Duration,
    pub old: ClusterView,
    pub new: ClusterView,
    /// Failed requests so far.
    pub failed: u64,
}

/// Appends `row` unless it shows the same as the last one.
pub fn record(rows: &mut Vec<Row>, row: Row) {
    let same = rows
        .last()
        .is_some_and(|l| (&l.old, &l.new, l.failed) == (&row.old, &row.new, row.failed));
    if !same {
        rows.push(row);
    }
}

/// `cluster` as the RayService status and the route's backends show it.
pub fn view(
    status: Option<&RayServiceStatuses>,
    backends: &[(String, i32)],
    cluster: &str,
    running: Option<u32>,
) -> ClusterView {
    let side = status.and_then(|s| {
        [&s.active_service_status, &s.pending_service_status]
            .into_iter()
            .flatten()
            .find(|x| x.ray_cluster_name.as_deref() == Some(cluster))
    });
    ClusterView {
        capacity: side.and_then(|s| s.target_capacity),
        traffic: side.and_then(|s| s.traffic_routed_percent),
        weight: backends.iter().find(|(c, _)| c == cluster).map(|(_, w)| *w),
        running,
    }
}

/// The new cluster: pending, or already active in place of `old`.
pub fn new_cluster(status: Option<&RayServiceStatuses>, old: &str) -> Option<String> {
    let name = |s: &Option<RayServiceStatus>| s.as_ref().and_then(|s| s.ray_cluster_name.clone());
    let s = status?;
    name(&s.pending_service_status).or_else(|| name(&s.active_service_status).filter(|a| a != old))
}

/// The upgrade is over: `new` is active with all traffic and nothing is pending.
pub fn promoted(status: Option<&RayServiceStatuses>, new: &str) -> bool {
    status.is_some_and(|s| {
        s.pending_service_status
            .as_ref()
            .is_none_or(|p| p.ray_cluster_name.is_none())
            && s.active_service_status.as_ref().is_some_and(|a| {
                a.ray_cluster_name.as_deref() == Some(new) && a.traffic_routed_percent == Some(100)
            })
    })
}

/// What one policy's run measured.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub policy: Policy,
    pub upgrade: Upgrade,
    pub rps: f64,
    pub old: String,
    pub new: String,
    pub rows: Vec<Row>,
    /// From the upgrade's trigger to promotion.
    pub duration: Duration,
    /// The load from the trigger until `TAIL` after promotion.
    pub counts: LoadCounts,
}

/// The RayService: KubeRay's `ray-service.incremental-upgrade.yaml` sample (head with `num-cpus: 0`,
/// an autoscaled worker group, the fruit app) with the given upgrade options. Every deployment
/// starts with two replicas instead of one, so capacity steps change replica counts.
pub fn rayservice(u: Upgrade) -> Result<RayService, serde_json::Error> {
    let serve = "applications:
  - name: fruit_app
    import_path: fruit.deployment_graph
    route_prefix: /fruit
    deployments:
      - name: MangoStand
        user_config:
          price: 4
        ray_actor_options:
          num_cpus: 0.5
        max_ongoing_requests: 100
        autoscaling_config:
          min_replicas: 2
          max_replicas: 4
      - name: OrangeStand
        num_replicas: 2
        user_config:
          price: 2
        ray_actor_options:
          num_cpus: 0
      - name: PearStand
        num_replicas: 2
        user_config:
          price: 1
        ray_actor_options:
          num_cpus: 0
      - name: FruitMarket
        ray_actor_options:
          num_cpus: 0.5
        max_ongoing_requests: 100
        autoscaling_config:
          min_replicas: 2
          max_replicas: 4
";
    let image = "rayproject/ray:2.51.0";
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "rayClusterDeletionDelaySeconds": 5,
            "upgradeStrategy": {"type": "NewClusterWithIncrementalUpgrade",
                "clusterUpgradeOptions": {"gatewayClassName": "istio", "stepSizePercent": u.step,
                                          "intervalSeconds": u.interval, "maxSurgePercent": u.surge}},
            "serveConfigV2": serve,
            "rayClusterConfig": {
                "rayVersion": "2.51.0",
                "enableInTreeAutoscaling": true,
                "headGroupSpec": {"rayStartParams": {"num-cpus": "0"}, "template": {"spec": {"containers": [{
                    "name": "ray-head", "image": image,
                    "resources": {"limits": {"cpu": "1", "memory": "5Gi"}, "requests": {"cpu": "1", "memory": "2Gi"}},
                    "ports": [{"containerPort": 6379, "name": "gcs-server"}, {"containerPort": 8265, "name": "dashboard"},
                              {"containerPort": 10001, "name": "client"}, {"containerPort": 8000, "name": "serve"}]}]}}},
                "workerGroupSpecs": [{"groupName": "small-group", "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-worker", "image": image,
                        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "4Gi"}}}]}}}]
            }
        }
    }))
}

/// A fresh embedded cluster with the simulators and both Ray controllers; stops them when dropped.
struct Bed {
    client: Client,
    sim: Arc<RaySim>,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    _server: Arc<EmbeddedServer>,
}

impl Bed {
    fn start(policy: Policy, d: &Delays) -> Bed {
        let server = embedded_server();
        let client = server.client();
        let cancel = CancellationToken::new();
        let sims = SimConfig {
            node: Some(NodeAgentConfig {
                start_delay: d.pod_start,
                ..NodeAgentConfig::default()
            }),
            ..SimConfig::default()
        };
        let mut tasks = cluster_sim::spawn(client.clone(), &sims, cancel.clone());
        let sim = Arc::new(RaySim::new(SimOptions {
            build_delay: d.serve_build,
            replica_start_delay: d.replica_start,
            replica_stop_delay: d.replica_stop,
            fail_delay: d.serve_build,
            auto_start: true,
        }));
        // Ray's in-tree autoscaler; the load generator is the bench's own, counted from the trigger.
        let scaler = AutoscalerConfig {
            period: d.autoscaler_period,
            ..AutoscalerConfig::default()
        };
        tasks.push(tokio::spawn(autoscaler::run(client.clone(), sim.clone(), scaler)));
        let mut rc_ctx = clusterctl::Context::new(client.clone());
        rc_ctx.config.busy_requeue = Duration::from_millis(200);
        tasks.push(tokio::spawn(clusterctl::run(Arc::new(rc_ctx))));
        let dash: Arc<dyn RayDashboard> = sim.clone();
        let factory: DashboardFactory = Arc::new(move |_: &DashboardEndpoint| dash.clone());
        let mut ctx = rsctl::Context::new(client.clone(), factory);
        ctx.config.requeue = Duration::from_millis(250);
        ctx.config.error_backoff = Duration::from_millis(500);
        ctx.config.incremental_timer_only = policy == Policy::TimerOnly;
        tasks.push(tokio::spawn(rsctl::run(Arc::new(ctx))));
        Bed {
            client,
            sim,
            cancel,
            tasks,
            _server: server,
        }
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        self.cancel.cancel();
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Reads the service, its route and the simulated replicas of the clusters it names.
struct Probe<'a> {
    bed: &'a Bed,
    policy: Policy,
    services: Api<RayService>,
    routes: Api<HTTPRoute>,
    clusters: Api<RayCluster>,
    /// Cluster name -> dashboard URL, as the simulator keys it.
    urls: BTreeMap<String, String>,
}

impl<'a> Probe<'a> {
    fn new(bed: &'a Bed, policy: Policy) -> Self {
        Probe {
            bed,
            policy,
            services: Api::namespaced(bed.client.clone(), NS),
            routes: Api::namespaced(bed.client.clone(), NS),
            clusters: Api::namespaced(bed.client.clone(), NS),
            urls: BTreeMap::new(),
        }
    }

    fn kube(&self, what: &'static str) -> impl FnOnce(kube::Error) -> Error {
        let policy = self.policy.name();
        move |source| Error::Kube { policy, what, source }
    }

    async fn status(&self) -> Result<Option<RayServiceStatuses>, Error> {
        let rs = self
            .services
            .get_opt(NAME)
            .await
            .map_err(self.kube("reading the RayService"))?;
        Ok(rs.and_then(|rs| rs.status))
    }

    /// (cluster, weight) per backend of `<rs>-httproute`; empty while there is no route.
    async fn backends(&self) -> Result<Vec<(String, i32)>, Error> {
        let route = self
            .routes
            .get_opt(&names::httproute_name(NAME))
            .await
            .map_err(self.kube("reading the HTTPRoute"))?;
        Ok(route
            .map(|r| loadgen::backends(&r, NS))
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(svc, _, w)| {
                let cluster = loadgen::cluster_of(&svc)?.to_owned();
                Some((cluster, i32::try_from(w).unwrap_or(i32::MAX)))
            })
            .collect())
    }

    /// RUNNING replicas of the cluster's weakest app; `None` while the cluster is not found.
    async fn running(&mut self, cluster: &str) -> Result<Option<u32>, Error> {
        if !self.urls.contains_key(cluster) {
            let Some(rc) = self
                .clusters
                .get_opt(cluster)
                .await
                .map_err(self.kube("reading a RayCluster"))?
            else {
                return Ok(None);
            };
            let svc = names::head_service_name(cluster, &rc.spec);
            let url = DashboardEndpoint::for_head_service(&svc, NS, "cluster.local", DEFAULT_DASHBOARD_PORT)
                .base_url;
            self.urls.insert(cluster.to_owned(), url);
        }
        Ok(self.urls.get(cluster).map(|url| {
            self.bed
                .sim
                .running_replicas(url)
                .values()
                .copied()
                .min()
                .unwrap_or(0)
        }))
    }
}

/// Short text of the last status, for a timeout message.
fn summary(status: Option<&RayServiceStatuses>, backends: &[(String, i32)]) -> String {
    let Some(s) = status else {
        return "no status".into();
    };
    let side = |x: &Option<RayServiceStatus>| match x {
        Some(x) => format!(
            "{} capacity {:?} traffic {:?}",
            x.ray_cluster_name.as_deref().unwrap_or("-"),
            x.target_capacity,
            x.traffic_routed_percent
        ),
        None => "-".into(),
    };
    let conditions: Vec<String> = s
        .conditions
        .iter()
        .flatten()
        .map(|c| format!("{}={} ({})", c.type_, c.status, c.message))
        .collect();
    format!(
        "active [{}], pending [{}], route {backends:?}, conditions [{}]",
        side(&s.active_service_status),
        side(&s.pending_service_status),
        conditions.join("; ")
    )
}

/// Runs one upgrade under `policy` on a fresh embedded cluster.
pub async fn run_policy(policy: Policy, opts: &Options) -> Result<RunReport, Error> {
    let upgrade = opts.check()?;
    let bed = Bed::start(policy, &opts.delays);
    let mut probe = Probe::new(&bed, policy);
    probe
        .services
        .create(&PostParams::default(), &rayservice(upgrade)?)
        .await
        .map_err(probe.kube("creating the RayService"))?;

    // Ready: the active cluster takes all traffic through the route and serves it.
    let deadline = Instant::now() + opts.timeout;
    let old = loop {
        let status = probe.status().await?;
        let backends = probe.backends().await?;
        let ready = status
            .as_ref()
            .is_some_and(|s| crate::api::conditions::is_true(s.conditions.as_deref(), "Ready"));
        let active = status
            .as_ref()
            .and_then(|s| s.active_service_status.as_ref())
            .and_then(|a| a.ray_cluster_name.clone());
        if let Some(a) = active.filter(|_| ready)
            && backends == [(a.clone(), 100)]
            && probe.running(&a).await?.is_some_and(|n| n > 0)
        {
            break a;
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                policy: policy.name(),
                what: "Ready service with all traffic on a serving cluster",
                waited: opts.timeout,
                last: summary(status.as_ref(), &backends),
            });
        }
        tokio::time::sleep(SAMPLE_EVERY).await;
    };

    let mut load = LoadConfig::new(NS, names::httproute_name(NAME));
    load.requests_per_second = opts.rps;
    let load = LoadGen::spawn(bed.client.clone(), bed.sim.clone(), load);
    let start = Instant::now();
    probe
        .services
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"rayClusterConfig": {"rayVersion": "2.52.0"}}})),
        )
        .await
        .map_err(probe.kube("triggering the upgrade"))?;

    let deadline = Instant::now() + opts.timeout;
    let mut rows = Vec::new();
    let mut new: Option<String> = None;
    let duration = loop {
        let status = probe.status().await?;
        let backends = probe.backends().await?;
        if new.is_none() {
            new = new_cluster(status.as_ref(), &old);
        }
        let old_view = view(status.as_ref(), &backends, &old, probe.running(&old).await?);
        let new_view = match &new {
            Some(n) => view(status.as_ref(), &backends, n, probe.running(n).await?),
            None => ClusterView::default(),
        };
        let at = start.elapsed();
        record(
            &mut rows,
            Row {
                at,
                old: old_view,
                new: new_view,
                failed: load.counts().failed,
            },
        );
        if new.as_deref().is_some_and(|n| promoted(status.as_ref(), n)) {
            break at;
        }
        if Instant::now() >= deadline {
            load.stop().await;
            return Err(Error::Timeout {
                policy: policy.name(),
                what: "promotion of the new cluster",
                waited: opts.timeout,
                last: summary(status.as_ref(), &backends),
            });
        }
        tokio::time::sleep(SAMPLE_EVERY).await;
    };
    tokio::time::sleep(TAIL).await;
    load.stop().await;
    let counts = load.counts();
    if let Some(last) = rows.last().cloned() {
        record(
            &mut rows,
            Row {
                at: start.elapsed(),
                failed: counts.failed,
                ..last
            },
        );
    }
    Ok(RunReport {
        policy,
        upgrade,
        rps: opts.rps,
        old,
        new: new.unwrap_or_default(),
        rows,
        duration,
        counts,
    })
}

fn cell(v: Option<impl std::fmt::Display>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

fn failures(c: &LoadCounts) -> String {
    if c.failed_by_reason.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = c
        .failed_by_reason
        .iter()
        .map(|(reason, n)| format!("{reason}: {n}"))
        .collect();
    format!(" ({})", parts.join(", "))
}

/// One run as text: the timeline table, the duration and the requests.
pub fn render(r: &RunReport) -> String {
    let mut out = String::new();
    let u = r.upgrade;
    let _ = writeln!(out, "== {}: {}", r.policy.name(), r.policy.describe());
    let _ = writeln!(
        out,
        "old cluster {} -> new cluster {}; step {}%, interval {}s, surge {}%, load {} requests/s",
        r.old, r.new, u.step, u.interval, u.surge, r.rps
    );
    let _ = writeln!(
        out,
        "  {:>6} | {:>28} | {:>28} | {:>6}",
        "", "old cluster", "new cluster", ""
    );
    let _ = writeln!(
        out,
        "  {:>6} | {:>4} {:>7} {:>6} {:>7} | {:>4} {:>7} {:>6} {:>7} | {:>6}",
        "t (s)", "cap%", "traffic", "weight", "running", "cap%", "traffic", "weight", "running", "failed"
    );
    for row in &r.rows {
        let v = |c: &ClusterView| {
            format!(
                "{:>4} {:>7} {:>6} {:>7}",
                cell(c.capacity),
                cell(c.traffic),
                cell(c.weight),
                cell(c.running)
            )
        };
        let _ = writeln!(
            out,
            "  {:>6.2} | {} | {} | {:>6}",
            row.at.as_secs_f64(),
            v(&row.old),
            v(&row.new),
            row.failed
        );
    }
    let c = &r.counts;
    let _ = writeln!(
        out,
        "upgrade: {:.2} s from the trigger to promotion (load counted until {} s after)",
        r.duration.as_secs_f64(),
        TAIL.as_secs()
    );
    let _ = writeln!(
        out,
        "requests: sent {}, ok {}, failed {}{}",
        c.sent,
        c.ok,
        c.failed,
        failures(c)
    );
    out
}

/// One line per policy's outcome, side by side.
pub fn compare(runs: &[RunReport]) -> String {
    let parts: Vec<String> = runs
        .iter()
        .map(|r| {
            format!(
                "{} dropped {} of {} requests ({:.2} s upgrade)",
                r.policy.name(),
                r.counts.failed,
                r.counts.sent,
                r.duration.as_secs_f64()
            )
        })
        .collect();
    format!("comparison: {}", parts.join("; "))
}

pub fn to_json(runs: &[RunReport]) -> Value {
    let view = |c: &ClusterView| {
        json!({"targetCapacity": c.capacity, "trafficRoutedPercent": c.traffic,
               "routeWeight": c.weight, "runningReplicas": c.running})
    };
    let runs: Vec<Value> = runs
        .iter()
        .map(|r| {
            json!({
                "policy": r.policy.name(),
                "stepSizePercent": r.upgrade.step,
                "intervalSeconds": r.upgrade.interval,
                "maxSurgePercent": r.upgrade.surge,
                "requestsPerSecond": r.rps,
                "oldCluster": r.old,
                "newCluster": r.new,
                "upgradeSeconds": r.duration.as_secs_f64(),
                "requests": {"sent": r.counts.sent, "ok": r.counts.ok, "failed": r.counts.failed,
                             "failedByReason": r.counts.failed_by_reason},
                "timeline": r.rows.iter().map(|row| json!({
                    "seconds": row.at.as_secs_f64(), "old": view(&row.old), "new": view(&row.new),
                    "failed": row.failed})).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "runs": runs })
}

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
