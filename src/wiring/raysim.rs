//! The Ray side of the embedded cluster's simulation, beside the simulated Ray dashboards: the
//! in-tree autoscaler (worker replicas follow the replicas Serve wants), a client load through
//! every RayService's HTTPRoute, whose counters `/metrics` shows as `quotagate_sim_requests_total`,
//! and the Ray CLI of RayJob submitter pods.
//!
//! Both run with the embedded server's own client, not the manager's: they stand for Ray's
//! autoscaler and for users' traffic, which the manager's Role does not cover.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, ListParams};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::gateway::HTTPRoute;
use crate::rayservice::dashboard::sim::autoscaler::{self, AutoscalerConfig};
use crate::rayservice::dashboard::sim::loadgen::{LoadConfig, LoadCounts, LoadGen, MAX_REQUESTS_PER_SECOND};
use crate::rayservice::dashboard::sim::{RaySim, submitter};

/// What runs beside the simulated dashboards.
#[derive(Clone, Debug)]
pub struct RaySimOptions {
    /// The in-tree autoscaler for clusters with `enableInTreeAutoscaling`; `None` leaves worker
    /// replicas to the spec.
    pub autoscaler: Option<AutoscalerConfig>,
    /// Requests per second sent through each RayService's HTTPRoute; 0 sends none.
    pub load_rps: f64,
    /// How often new and deleted HTTPRoutes are looked for.
    pub route_scan: Duration,
    /// The Ray CLI in submitter pods (KubeRay's `K8sJobMode`): their `ray job submit` is played
    /// against the simulated dashboards and ends the pod as the CLI would (`submitter`).
    pub submitter: bool,
}

impl Default for RaySimOptions {
    fn default() -> Self {
        RaySimOptions {
            autoscaler: Some(AutoscalerConfig::default()),
            load_rps: 20.0,
            route_scan: Duration::from_secs(1),
            submitter: true,
        }
    }
}

/// (namespace, route) -> its load generator.
type Generators = BTreeMap<(String, String), Arc<LoadGen>>;

/// The load generators running, one per HTTPRoute a RayService owns, keyed by (namespace, route).
#[derive(Clone, Default)]
pub struct LoadBoard {
    gens: Arc<Mutex<Generators>>,
}

impl std::fmt::Debug for LoadBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadBoard")
            .field("routes", &self.lock().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl LoadBoard {
    fn lock(&self) -> MutexGuard<'_, Generators> {
        self.gens.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every route's counts so far.
    pub fn counts(&self) -> Vec<((String, String), LoadCounts)> {
        self.lock().iter().map(|(k, g)| (k.clone(), g.counts())).collect()
    }

    /// The counters in the Prometheus text format (no `# EOF`): requests by route, backend and result,
    /// and failures by reason.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let counts = self.counts();
        if counts.is_empty() {
            return out;
        }
        out.push_str("# HELP quotagate_sim_requests Requests the embedded cluster's simulated load sent through a RayService's HTTPRoute, by backend and result.\n");
        out.push_str("# TYPE quotagate_sim_requests counter\n");
        for ((ns, route), c) in &counts {
            for (backend, (ok, failed)) in &c.per_backend {
                for (result, n) in [("ok", ok), ("failed", failed)] {
                    let _ = writeln!(
                        out,
                        "quotagate_sim_requests_total{{namespace=\"{ns}\",route=\"{route}\",backend=\"{backend}\",result=\"{result}\"}} {n}"
                    );
                }
            }
        }
        out.push_str(
            "# HELP quotagate_sim_failed_requests Requests of the simulated load that failed, by reason.\n",
        );
        out.push_str("# TYPE quotagate_sim_failed_requests counter\n");
        for ((ns, route), c) in &counts {
            let _ = writeln!(
                out,
                "quotagate_sim_failed_requests_total{{namespace=\"{ns}\",route=\"{route}\",reason=\"all\"}} {}",
                c.failed
            );
            for (reason, n) in &c.failed_by_reason {
                let _ = writeln!(
                    out,
                    "quotagate_sim_failed_requests_total{{namespace=\"{ns}\",route=\"{route}\",reason=\"{reason}\"}} {n}"
                );
            }
        }
        out
    }
}

/// Starts the autoscaler and the load supervisor; they stop (and the load generators with them) when
/// `cancel` fires or the handles are aborted.
pub fn spawn(
    client: kube::Client,
    sim: Arc<RaySim>,
    opts: &RaySimOptions,
    cancel: CancellationToken,
) -> (Vec<JoinHandle<()>>, LoadBoard) {
    let board = LoadBoard::default();
    let mut tasks = Vec::new();
    if let Some(cfg) = opts.autoscaler.clone() {
        let c = cancel.clone();
        let scaler = autoscaler::run(client.clone(), sim.clone(), cfg);
        tasks.push(tokio::spawn(async move {
            tokio::select! { _ = c.cancelled() => {}, _ = scaler => {} }
        }));
    }
    if opts.submitter {
        let c = cancel.clone();
        let submitter = submitter::run(client.clone(), sim.clone());
        tasks.push(tokio::spawn(async move {
            tokio::select! { _ = c.cancelled() => {}, _ = submitter => {} }
        }));
    }
    let rps = if opts.load_rps.is_finite() {
        opts.load_rps.clamp(0.0, MAX_REQUESTS_PER_SECOND)
    } else {
        0.0
    };
    if rps > 0.0 {
        let b = board.clone();
        let supervisor = supervise(client, sim, rps, opts.route_scan, board.clone());
        tasks.push(tokio::spawn(async move {
            tokio::select! { _ = cancel.cancelled() => {}, _ = supervisor => {} }
            b.lock().clear();
        }));
    }
    (tasks, board)
}

/// An HTTPRoute a RayService controls (the incremental upgrade's `<rs>-httproute`).
fn owned_by_rayservice(route: &HTTPRoute) -> bool {
    route
        .owner_references()
        .iter()
        .any(|o| o.kind == "RayService" && o.api_version.starts_with("ray.io/"))
}

/// Keeps one load generator per RayService HTTPRoute: starts one for a new route, stops the one of a
/// deleted route. A list that fails (the Gateway API not served, a transient error) changes nothing.
async fn supervise(client: kube::Client, sim: Arc<RaySim>, rps: f64, scan: Duration, board: LoadBoard) {
    let routes: Api<HTTPRoute> = Api::all(client.clone());
    let mut every = tokio::time::interval(scan.max(Duration::from_millis(10)));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let listed = match routes.list(&ListParams::default()).await {
            Ok(l) => l.items,
            Err(e) => {
                tracing::debug!(error = %e, "sim load: listing HTTPRoutes failed");
                continue;
            }
        };
        let live: Vec<(String, String)> = listed
            .iter()
            .filter(|r| owned_by_rayservice(r))
            .map(|r| (r.namespace().unwrap_or_default(), r.name_any()))
            .collect();
        let mut gens = board.lock();
        gens.retain(|k, _| live.contains(k));
        for (ns, name) in live {
            gens.entry((ns.clone(), name.clone())).or_insert_with(|| {
                let mut cfg = LoadConfig::new(ns, name);
                cfg.requests_per_second = rps;
                cfg.tick = Duration::from_millis(50);
                cfg.route_refresh = Duration::from_millis(200);
                LoadGen::spawn(client.clone(), sim.clone(), cfg)
            });
        }
    }
}
