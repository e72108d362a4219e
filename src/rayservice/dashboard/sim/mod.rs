//! Simulated Ray dashboard: one simulated Serve instance per dashboard endpoint, implementing the
//! same `RayDashboard` trait as the HTTP client. Behaviour follows what a real Ray 2.60 head does
//! (../shared/research/ray-peer.md §5–7):
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
//! Failure injection: an `import_path` whose module starts with `no_such_` fails, as do paths
//! registered with `fail_import_path`; `set_fail_deploys` makes every later deploy on one cluster
//! fail; `set_reachable(false)` and `stop_cluster` make calls fail as Unreachable.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::time::Instant;

use crate::rayservice::dashboard::{
    DashboardEndpoint, DashboardError, RayDashboard, ServeConfig, ServeDetails,
};

mod schema;
mod state;

use schema::validate;
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

    /// A head comes up at `base_url` with no Serve applications (restarts it if it ran).
    pub fn start_cluster(&self, base_url: &str) {
        self.lock()
            .clusters
            .insert(key(base_url), SimCluster::new(Instant::now()));
    }

    /// The head goes away with all its state, as without GCS fault tolerance.
    pub fn stop_cluster(&self, base_url: &str) {
        self.lock().clusters.remove(&key(base_url));
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
        self.lock()
            .failing_import_paths
            .insert(import_path.to_owned());
    }

    /// Accepted PUTs so far on this cluster (0 if unknown): lets controller tests check that an
    /// unchanged config is not re-sent.
    pub fn put_count(&self, base_url: &str) -> u64 {
        self.lock()
            .clusters
            .get(&key(base_url))
            .map_or(0, |c| c.puts)
    }

    pub fn cluster_urls(&self) -> Vec<String> {
        let mut urls: Vec<_> = self.lock().clusters.keys().cloned().collect();
        urls.sort();
        urls
    }

    /// Applies `f` to the cluster, starting it first if unknown (settings imply a head exists).
    fn with_cluster(&self, base_url: &str, f: impl FnOnce(&mut SimCluster)) {
        let mut state = self.lock();
        let cluster = state
            .clusters
            .entry(key(base_url))
            .or_insert_with(|| SimCluster::new(Instant::now()));
        f(cluster);
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
            state.clusters.insert(k.clone(), SimCluster::new(now));
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
            Ok(())
        }
        .boxed()
    }

    /// Healthy while the cluster has a RUNNING app (there is no proxy process to probe); an unknown or
    /// partitioned head does not answer. No auth: the proxy's health route has none.
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
            Ok(cluster
                .render(now)
                .applications
                .values()
                .any(|a| a.status == crate::rayservice::dashboard::AppStatus::Running))
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests;
