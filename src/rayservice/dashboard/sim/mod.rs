//! Simulated Ray dashboard: one simulated Serve instance per dashboard endpoint, implementing the
//! same `RayDashboard` trait as the HTTP client. Behaviour follows what a real Ray 2.60 head does
//! (`tests/ray_dashboard_real.rs` holds the simulator to a real head):
//!
//! * a PUT is validated synchronously (400 with a pydantic-like message); import errors surface
//!   later, as DEPLOY_FAILED with a traceback-like message;
//! * a new or changed app is DEPLOYING for `build_delay`, then its replicas are STARTING for
//!   `replica_start_delay`, then RUNNING; a replica-count or `target_capacity` change on a running
//!   app only adds replicas (deployment UPSCALING) or stops some (STOPPING, DOWNSCALING), and the app
//!   is DEPLOYING until every deployment is HEALTHY again, as Ray 2.60 does;
//! * `target_num_replicas` = `num_replicas` scaled by `target_capacity` with Serve's rounding;
//! * apps missing from a PUT are removed (the API is declarative); a failed in-place update shows
//!   `deployments: {}` while the old replicas keep existing.
//!
//! State advances lazily from tokio's clock on every call, so tests drive it with a paused clock.
//!
//! For incremental upgrades the simulator also plays the cluster around Serve, all off by default:
//!
//! * `set_capacity` gives a cluster a number of CPUs; replicas reserve their deployment's
//!   `ray_actor_options.num_cpus` (1 by default) and wait in STARTING while they do not fit
//!   (`placement`). `demand_cpus` is what they want, `running_replicas` what serves.
//! * `autoscaler` stands in for Ray's in-tree autoscaler: it sets each autoscaled RayCluster's
//!   capacity from its ready Pods and scales worker groups to the demand.
//! * `loadgen` sends requests through an HTTPRoute's weights and counts which found a running
//!   replica, the measure of a zero-downtime upgrade.
//!
//! Failure injection: an `import_path` whose module starts with `no_such_` fails, as do paths
//! registered with `fail_import_path`; `set_fail_deploys` makes every later deploy on one cluster
//! fail; `set_reachable(false)` and `stop_cluster` make calls fail as Unreachable; `start_cluster`
//! restarts a head with no apps (a head restart without GCS fault tolerance).
//!
//! Across a restart of the process: `persist_in` keeps the state in a data directory (`persist`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::time::Instant;

use crate::rayservice::dashboard::{
    DashboardEndpoint, DashboardError, RayDashboard, ServeConfig, ServeDetails,
};

pub mod autoscaler;
pub mod jobs;
pub mod loadgen;
pub mod persist;
mod placement;
mod render;
pub mod schema;
mod state;
pub mod submitter;
mod wall_clock;

use schema::{CPU_UNITS, to_cpu_units, validate};
use state::SimCluster;

#[derive(Clone, Debug)]
pub struct SimOptions {
    /// PUT -> the app's replicas are created (Ray builds the app in a task first).
    pub build_delay: Duration,
    /// Replica created -> RUNNING.
    pub replica_start_delay: Duration,
    /// A replica removed by a downscale stays STOPPING this long (graceful shutdown).
    pub replica_stop_delay: Duration,
    /// PUT -> DEPLOY_FAILED for a failing app (a real head retries the build 4 times, ~9 s).
    pub fail_delay: Duration,
    /// An endpoint never seen before behaves like a freshly started head (true) or is unreachable
    /// until `start_cluster` (false).
    pub auto_start: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            build_delay: Duration::from_secs(1),
            replica_start_delay: Duration::from_secs(2),
            replica_stop_delay: Duration::from_secs(2),
            fail_delay: Duration::from_secs(3),
            auto_start: true,
        }
    }
}

/// The simulator. Cheap to share behind an `Arc<dyn RayDashboard>`.
#[derive(Default)]
pub struct RaySim {
    options: SimOptions,
    state: Mutex<SimState>,
}

#[derive(Default)]
struct SimState {
    clusters: HashMap<String, SimCluster>,
    failing_import_paths: HashSet<String>,
    /// `set_capacity` per endpoint, kept apart from the head's state: nodes outlive a head restart.
    /// `None` is unlimited.
    capacities: HashMap<String, Option<u64>>,
    /// The capacity of an endpoint nobody set one for (`set_unknown_capacity`); `None` is unlimited.
    unknown_capacity: Option<u64>,
    /// Where the state is kept across process restarts (`persist_in`); `None`: memory only.
    file: Option<PathBuf>,
}

impl SimState {
    /// A freshly started head on the nodes the endpoint has.
    fn new_cluster(&self, key: &str, now: Instant) -> SimCluster {
        let mut cluster = SimCluster::new(now);
        cluster.capacity = self.capacity_of(key);
        cluster
    }

    fn capacity_of(&self, key: &str) -> Option<u64> {
        self.capacities.get(key).copied().unwrap_or(self.unknown_capacity)
    }

    /// Writes the state to its file, if it has one. Called after every change that is not the mere
    /// passing of time (that is recomputed from the stored instants). A failed write is logged: the
    /// simulation goes on, as a head goes on when its operator cannot see it.
    fn save(&self) {
        let Some(path) = self.file.clone() else { return };
        let saved = persist::SavedRef::new(&self.clusters, &self.failing_import_paths, &self.capacities);
        let bytes = serde_json::to_vec(&saved);
        let written = match bytes {
            Ok(bytes) => persist::write(&path, &bytes).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(error) = written {
            tracing::warn!(path = %path.display(), %error, "simulated Ray: could not save its state");
        }
    }
}

impl RaySim {
    pub fn new(options: SimOptions) -> Self {
        Self {
            options,
            state: Mutex::new(SimState::default()),
        }
    }

    // A panic in another test thread must not wedge the simulator.
    fn lock(&self) -> MutexGuard<'_, SimState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the state in `dir` from now on (see `persist`): loads what a previous process saved
    /// there, replacing what this one holds, and returns how many heads it restored.
    pub fn persist_in(&self, dir: &Path) -> Result<usize, persist::PersistError> {
        let loaded = persist::load(dir)?;
        let mut state = self.lock();
        state.file = Some(dir.join(persist::FILE));
        let Some(saved) = loaded else {
            state.save();
            return Ok(0);
        };
        let restored = saved.clusters.len();
        state.clusters = saved.clusters;
        state.failing_import_paths = saved.failing_import_paths;
        state.capacities = saved.capacities;
        Ok(restored)
    }

    /// Writes the state now, brought up to the present (a process about to stop may call it; every
    /// change is written anyway).
    pub fn checkpoint(&self) {
        let now = Instant::now();
        let mut state = self.lock();
        for cluster in state.clusters.values_mut() {
            cluster.tick(now, self.options.replica_start_delay);
        }
        state.save();
    }

    /// A head comes up at `base_url` with no Serve applications (restarts it if it ran: what a head
    /// restart without GCS fault tolerance does).
    pub fn start_cluster(&self, base_url: &str) {
        let k = key(base_url);
        let mut state = self.lock();
        let cluster = state.new_cluster(&k, Instant::now());
        state.clusters.insert(k, cluster);
        state.save();
    }

    /// The head goes away with all its state, as without GCS fault tolerance.
    pub fn stop_cluster(&self, base_url: &str) {
        let mut state = self.lock();
        state.clusters.remove(&key(base_url));
        state.save();
    }

    /// Network partition: calls fail as Unreachable but the cluster keeps its state.
    pub fn set_reachable(&self, base_url: &str, reachable: bool) {
        self.with_cluster(base_url, |c| c.reachable = reachable);
    }

    /// Every app deployed or changed from now on fails with DEPLOY_FAILED.
    pub fn set_fail_deploys(&self, base_url: &str, fail: bool) {
        self.with_cluster(base_url, |c| c.fail_deploys = fail);
    }

    /// Requires `x-ray-authorization: Bearer <token>` semantics: missing -> 401, wrong -> 403.
    pub fn set_auth_token(&self, base_url: &str, token: Option<String>) {
        self.with_cluster(base_url, |c| c.auth_token = token);
    }

    /// Makes this exact `import_path` fail on every cluster.
    pub fn fail_import_path(&self, import_path: &str) {
        let mut state = self.lock();
        state.failing_import_paths.insert(import_path.to_owned());
        state.save();
    }

    /// Accepted PUTs so far on this cluster (0 if unknown): lets controller tests check that an
    /// unchanged config is not re-sent.
    pub fn put_count(&self, base_url: &str) -> u64 {
        self.lock().clusters.get(&key(base_url)).map_or(0, |c| c.puts)
    }

    /// The CPUs the cluster's RUNNING Ray nodes offer to Serve replicas; `None` is unlimited (the
    /// default, see `set_unknown_capacity`). Replicas that do not fit wait in STARTING, oldest placed
    /// first; when capacity shrinks replicas on their way out, then the youngest, lose their place
    /// (see `placement`). Negative or NaN counts as 0. Kept across head restarts; an endpoint not
    /// started yet gets it when it starts.
    pub fn set_capacity(&self, base_url: &str, cpus: Option<f64>) {
        let k = key(base_url);
        let mut state = self.lock();
        let units = cpus.map(to_cpu_units);
        let changed = state.capacities.get(&k) != Some(&units);
        state.capacities.insert(k.clone(), units);
        self.refit(&mut state, &k);
        if changed {
            state.save();
        }
    }

    /// Forgets what `set_capacity` said for this endpoint: it has the unknown capacity again.
    pub fn forget_capacity(&self, base_url: &str) {
        let k = key(base_url);
        let mut state = self.lock();
        if state.capacities.remove(&k).is_some() {
            self.refit(&mut state, &k);
            state.save();
        }
    }

    /// The capacity of endpoints nobody gave one (`None`, the default, is unlimited). An autoscaler
    /// sets 0: a cluster runs no replica before the autoscaler has looked at its nodes.
    pub fn set_unknown_capacity(&self, cpus: Option<f64>) {
        let mut state = self.lock();
        state.unknown_capacity = cpus.map(to_cpu_units);
        let keys: Vec<String> = state
            .clusters
            .keys()
            .filter(|k| !state.capacities.contains_key(*k))
            .cloned()
            .collect();
        for k in keys {
            self.refit(&mut state, &k);
        }
    }

    /// Brings the cluster at `k` up to now with its old capacity, then applies the current one.
    fn refit(&self, state: &mut SimState, k: &str) {
        let now = Instant::now();
        let delay = self.options.replica_start_delay;
        let units = state.capacity_of(k);
        if let Some(cluster) = state.clusters.get_mut(k) {
            cluster.tick(now, delay);
            cluster.set_capacity(units, now, delay);
        }
    }

    /// CPUs every current replica reserves, placed or not (what the autoscaler scales for).
    /// Replicas on their way out (old version, STOPPING) do not count; 0 for an unknown endpoint.
    pub fn demand_cpus(&self, base_url: &str) -> f64 {
        let now = Instant::now();
        let mut state = self.lock();
        match state.clusters.get_mut(&key(base_url)) {
            Some(cluster) => {
                cluster.tick(now, self.options.replica_start_delay);
                cluster.demand_units() as f64 / CPU_UNITS
            }
            None => 0.0,
        }
    }

    /// `demand_cpus` once this head has been given a Serve config since it started and that config's
    /// first build has finished, `None` before: the demand of a head nobody configured yet (just
    /// restarted, or never seen), or of apps still building their first replicas, is unknown, not
    /// zero, and nothing may be scaled down on it (Ray's autoscaler keeps an idle node for its idle
    /// timeout, far longer than a build).
    pub fn observed_demand_cpus(&self, base_url: &str) -> Option<f64> {
        let now = Instant::now();
        let mut state = self.lock();
        let cluster = state.clusters.get_mut(&key(base_url)).filter(|c| c.puts > 0)?;
        cluster.tick(now, self.options.replica_start_delay);
        cluster
            .demand_known()
            .then(|| cluster.demand_units() as f64 / CPU_UNITS)
    }

    /// Serving strength per app: the number of RUNNING replicas of the app's deployment with the
    /// fewest (a request needs every deployment of its app), 0 while an app has no replica
    /// running. Empty for an unknown endpoint. A sim view, not an API call: reachability and auth
    /// do not apply.
    pub fn running_replicas(&self, base_url: &str) -> BTreeMap<String, u32> {
        let now = Instant::now();
        let mut state = self.lock();
        let Some(cluster) = state.clusters.get_mut(&key(base_url)) else {
            return BTreeMap::new();
        };
        cluster.tick(now, self.options.replica_start_delay);
        cluster
            .running_replicas(now)
            .map(|(app, n)| (app.to_owned(), n))
            .collect()
    }

    /// When the head at `base_url` (last) started; `None` for an unknown endpoint. Tells a head
    /// restart (its apps lost) from a head that kept running.
    pub fn started_at(&self, base_url: &str) -> Option<Instant> {
        self.lock().clusters.get(&key(base_url)).map(|c| c.started)
    }

    pub fn cluster_urls(&self) -> Vec<String> {
        let mut urls: Vec<_> = self.lock().clusters.keys().cloned().collect();
        urls.sort();
        urls
    }

    /// Applies `f` to the cluster, starting it first if unknown (settings imply a head exists).
    fn with_cluster(&self, base_url: &str, f: impl FnOnce(&mut SimCluster)) {
        let k = key(base_url);
        let mut state = self.lock();
        if !state.clusters.contains_key(&k) {
            let cluster = state.new_cluster(&k, Instant::now());
            state.clusters.insert(k.clone(), cluster);
        }
        if let Some(cluster) = state.clusters.get_mut(&k) {
            f(cluster);
        }
        state.save();
    }

    /// Finds (or auto-starts) the cluster and checks reachability and auth.
    fn cluster<'s>(
        &self,
        state: &'s mut SimState,
        endpoint: &DashboardEndpoint,
        url: &str,
        now: Instant,
    ) -> Result<&'s mut SimCluster, DashboardError> {
        let k = key(&endpoint.base_url);
        if !state.clusters.contains_key(&k) && self.options.auto_start {
            let cluster = state.new_cluster(&k, now);
            state.clusters.insert(k.clone(), cluster);
        }
        let unreachable = |reason: &str| DashboardError::Unreachable {
            url: url.to_owned(),
            reason: reason.into(),
        };
        let cluster = state
            .clusters
            .get_mut(&k)
            .ok_or_else(|| unreachable("connection refused (no simulated head)"))?;
        if !cluster.reachable {
            return Err(unreachable("connection refused (simulated partition)"));
        }
        match (&cluster.auth_token, &endpoint.auth_token) {
            (None, _) => {}
            (Some(_), None) => {
                return Err(DashboardError::from_status(
                    401,
                    b"Unauthorized: Missing authentication token",
                ));
            }
            (Some(want), Some(got)) if want != got => {
                return Err(DashboardError::from_status(
                    403,
                    b"Forbidden: Invalid authentication token",
                ));
            }
            (Some(_), Some(_)) => {}
        }
        cluster.tick(now, self.options.replica_start_delay);
        Ok(cluster)
    }
}

fn key(base_url: &str) -> String {
    base_url.trim_end_matches('/').to_owned()
}

impl RayDashboard for RaySim {
    fn deploy<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        config: &'a ServeConfig,
        target_capacity: Option<f64>,
    ) -> BoxFuture<'a, Result<(), DashboardError>> {
        async move {
            let body = config.with_target_capacity(target_capacity)?;
            let now = Instant::now();
            let mut state = self.lock();
            let failing = state.failing_import_paths.clone();
            let url = format!("{}/api/serve/applications/", endpoint.base_url);
            // Reachability and auth come before schema validation, as on a real head.
            let cluster = self.cluster(&mut state, endpoint, &url, now)?;
            let parsed = validate(&Value::Object(body.as_json().clone()))
                .map_err(|message| DashboardError::Rejected { message })?;
            cluster.apply(parsed, &failing, &self.options, now);
            state.save();
            Ok(())
        }
        .boxed()
    }

    fn serve_details<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
    ) -> BoxFuture<'a, Result<ServeDetails, DashboardError>> {
        async move {
            let now = Instant::now();
            let mut state = self.lock();
            let url = format!(
                "{}/api/serve/applications/?api_type=declarative",
                endpoint.base_url
            );
            let cluster = self.cluster(&mut state, endpoint, &url, now)?;
            Ok(cluster.render(now))
        }
        .boxed()
    }

    fn delete_applications<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
    ) -> BoxFuture<'a, Result<(), DashboardError>> {
        async move {
            let now = Instant::now();
            let mut state = self.lock();
            let url = format!("{}/api/serve/applications/", endpoint.base_url);
            let cluster = self.cluster(&mut state, endpoint, &url, now)?;
            cluster.delete_applications();
            state.save();
            Ok(())
        }
        .boxed()
    }

    /// Healthy once an application's deployments reached the head's route table (there is no proxy
    /// process to probe); an unknown or partitioned head does not answer. No auth: the proxy's health
    /// route has none.
    fn proxy_healthy<'a>(
        &'a self,
        dashboard: &'a DashboardEndpoint,
        proxy_url: &'a str,
    ) -> BoxFuture<'a, Result<bool, DashboardError>> {
        async move {
            let now = Instant::now();
            let mut state = self.lock();
            let url = format!("{proxy_url}/-/healthz");
            let cluster = state
                .clusters
                .get_mut(&key(&dashboard.base_url))
                .filter(|c| c.reachable)
                .ok_or_else(|| DashboardError::Unreachable {
                    url,
                    reason: "connection refused (no simulated proxy)".into(),
                })?;
            cluster.tick(now, self.options.replica_start_delay);
            // Ray's `ProxyRouter.ready_for_traffic(is_head=True)`: the head's proxy is healthy once
            // its route table was populated, and stays so; it does not follow the application's
            // status (an application scaling for a `target_capacity` step is DEPLOYING, and the
            // head still serves through its running replicas). The node agent's heads answer the
            // same (issue 58).
            if cluster
                .render(now)
                .applications
                .values()
                .any(|a| !a.deployments.is_empty())
            {
                cluster.routes_populated = true;
            }
            Ok(cluster.routes_populated)
        }
        .boxed()
    }
}

#[cfg(test)]
mod capacity_tests;
#[cfg(test)]
mod fake_api;
#[cfg(test)]
mod persist_tests;
#[cfg(test)]
mod tests;
