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
use indexmap::IndexMap;
use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::rayservice::dashboard::{
    AppDetails, AppStatus, DashboardEndpoint, DashboardError, DeploymentDetails, DeploymentStatus, RayDashboard,
    ReplicaDetails, ReplicaState, ServeConfig, ServeDetails, capacity_adjusted_replicas,
};

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

struct SimCluster {
    started: Instant,
    reachable: bool,
    fail_deploys: bool,
    auth_token: Option<String>,
    target_capacity: Option<f64>,
    apps: IndexMap<String, SimApp>,
    next_replica: u64,
    puts: u64,
}

struct SimApp {
    config: Value,
    /// The config without replica counts: a change here rebuilds the app, otherwise it only scales.
    code_key: String,
    route_prefix: Option<String>,
    deployed_at: Instant,
    phase: Phase,
    deployments: IndexMap<String, SimDeployment>,
    /// Desired deployments (name, configured replicas), applied when a build finishes.
    spec: Vec<(String, u32)>,
}

enum Phase {
    Building { until: Instant },
    Failing { at: Instant, message: String },
    Failed { message: String },
    Live,
}

struct SimDeployment {
    target: u32,
    replicas: Vec<SimReplica>,
    /// Set by a replica-count change, for Ray's "Upscaling from a to b replicas." messages.
    scaling: Option<Scaling>,
}

#[derive(Clone, Copy)]
enum Scaling {
    Up { from: u32 },
    Down { from: u32 },
}

struct SimReplica {
    id: String,
    running_at: Instant,
    /// When the replica disappears: old-version replicas serve until the new ones run; replicas
    /// removed by a downscale are STOPPING until then.
    retire_at: Option<Instant>,
    stopping: bool,
}

impl RaySim {
    pub fn new(options: SimOptions) -> Self {
        Self { options, state: Mutex::new(SimState::default()) }
    }

    // A panic in another test thread must not wedge the simulator.
    fn lock(&self) -> MutexGuard<'_, SimState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A head comes up at `base_url` with no Serve applications (restarts it if it ran).
    pub fn start_cluster(&self, base_url: &str) {
        self.lock().clusters.insert(key(base_url), SimCluster::new(Instant::now()));
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
        self.lock().failing_import_paths.insert(import_path.to_owned());
    }

    /// Accepted PUTs so far on this cluster (0 if unknown): lets controller tests check that an
    /// unchanged config is not re-sent.
    pub fn put_count(&self, base_url: &str) -> u64 {
        self.lock().clusters.get(&key(base_url)).map_or(0, |c| c.puts)
    }

    pub fn cluster_urls(&self) -> Vec<String> {
        let mut urls: Vec<_> = self.lock().clusters.keys().cloned().collect();
        urls.sort();
        urls
    }

    fn with_cluster(&self, base_url: &str, f: impl FnOnce(&mut SimCluster)) {
        let mut state = self.lock();
        let cluster = state.clusters.entry(key(base_url)).or_insert_with(|| SimCluster::new(Instant::now()));
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
        let unreachable = |reason: &str| DashboardError::Unreachable { url: url.to_owned(), reason: reason.into() };
        let cluster = state.clusters.get_mut(&k).ok_or_else(|| unreachable("connection refused (no simulated head)"))?;
        if !cluster.reachable {
            return Err(unreachable("connection refused (simulated partition)"));
        }
        match (&cluster.auth_token, &endpoint.auth_token) {
            (None, _) => {}
            (Some(_), None) => {
                return Err(DashboardError::from_status(401, b"Unauthorized: Missing authentication token"));
            }
            (Some(want), Some(got)) if want != got => {
                return Err(DashboardError::from_status(403, b"Forbidden: Invalid authentication token"));
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
            let root = Value::Object(body.as_json().clone());
            let parsed = validate(&root).map_err(|message| DashboardError::Rejected { message })?;
            let now = Instant::now();
            let mut state = self.lock();
            let failing = state.failing_import_paths.clone();
            let url = format!("{}/api/serve/applications/", endpoint.base_url);
            let cluster = self.cluster(&mut state, endpoint, &url, now)?;
            cluster.apply(parsed, &failing, &self.options, now);
            Ok(())
        }
        .boxed()
    }

    fn serve_details<'a>(&'a self, endpoint: &'a DashboardEndpoint) -> BoxFuture<'a, Result<ServeDetails, DashboardError>> {
        async move {
            let now = Instant::now();
            let mut state = self.lock();
            let url = format!("{}/api/serve/applications/?api_type=declarative", endpoint.base_url);
            let cluster = self.cluster(&mut state, endpoint, &url, now)?;
            Ok(cluster.render(now))
        }
        .boxed()
    }

    fn delete_applications<'a>(&'a self, endpoint: &'a DashboardEndpoint) -> BoxFuture<'a, Result<(), DashboardError>> {
        async move {
            let now = Instant::now();
            let mut state = self.lock();
            let url = format!("{}/api/serve/applications/", endpoint.base_url);
            let cluster = self.cluster(&mut state, endpoint, &url, now)?;
            cluster.apps.clear();
            cluster.target_capacity = None;
            Ok(())
        }
        .boxed()
    }
}

// ---------------------------------------------------------------------------------------------
// Schema validation, in the shape of Ray's pydantic errors: "N validation error(s) for
// ServeDeploySchema\n<location>\n  <message> [type=<kind>]".

struct ParsedConfig {
    target_capacity: Option<f64>,
    apps: Vec<ParsedApp>,
}

struct ParsedApp {
    name: String,
    import_path: String,
    route_prefix: Option<String>,
    config: Value,
    code_key: String,
    deployments: Vec<(String, u32)>,
}

fn validate(root: &Value) -> Result<ParsedConfig, String> {
    let mut errors: Vec<(String, String, &str)> = Vec::new();
    let Some(obj) = root.as_object() else {
        return Err(render_errors(&[("".into(), "Input should be a valid dictionary".into(), "dict_type")]));
    };
    let target_capacity = match obj.get("target_capacity") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_f64() {
            Some(tc) if (0.0..=100.0).contains(&tc) => Some(tc),
            Some(_) => {
                errors.push(("target_capacity".into(), "Input should be within 0 and 100".into(), "range"));
                None
            }
            None => {
                errors.push(("target_capacity".into(), "Input should be a valid number".into(), "float_type"));
                None
            }
        },
    };
    let apps_value = match obj.get("applications") {
        Some(Value::Array(apps)) => apps.as_slice(),
        Some(_) => {
            errors.push(("applications".into(), "Input should be a valid list".into(), "list_type"));
            &[]
        }
        None => {
            errors.push(("applications".into(), "Field required".into(), "missing"));
            &[]
        }
    };
    let mut apps = Vec::new();
    for (i, app) in apps_value.iter().enumerate() {
        let loc = format!("applications.{i}");
        let Some(a) = app.as_object() else {
            errors.push((loc, "Input should be a valid dictionary".into(), "dict_type"));
            continue;
        };
        let import_path = match a.get("import_path") {
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                errors.push((format!("{loc}.import_path"), "Input should be a valid string".into(), "string_type"));
                String::new()
            }
            None => {
                errors.push((format!("{loc}.import_path"), "Field required".into(), "missing"));
                String::new()
            }
        };
        let route_prefix = match a.get("route_prefix") {
            None => Some("/".to_owned()),
            Some(Value::Null) => None,
            Some(Value::String(s)) if s.starts_with('/') => Some(s.clone()),
            Some(_) => {
                errors.push((
                    format!("{loc}.route_prefix"),
                    "Value error, route_prefix must start with \"/\"".into(),
                    "value_error",
                ));
                None
            }
        };
        if let Some(wd) = a.get("runtime_env").and_then(|r| r.get("working_dir")).and_then(Value::as_str)
            && !wd.contains("://")
        {
            errors.push((
                format!("{loc}.runtime_env"),
                format!("Value error, runtime_envs in the Serve config support only remote URIs in working_dir and py_modules, or \"local://\" URIs. Got error when parsing URI: Expected URI but received path {wd}"),
                "value_error",
            ));
        }
        let mut deployments = Vec::new();
        if let Some(deps) = a.get("deployments") {
            let Some(deps) = deps.as_array() else {
                errors.push((format!("{loc}.deployments"), "Input should be a valid list".into(), "list_type"));
                continue;
            };
            for (j, d) in deps.iter().enumerate() {
                let dloc = format!("{loc}.deployments.{j}");
                match d.get("name").and_then(Value::as_str) {
                    Some(name) => match configured_replicas(d) {
                        Ok(n) => deployments.push((name.to_owned(), n)),
                        Err(msg) => errors.push((format!("{dloc}.num_replicas"), msg, "greater_than")),
                    },
                    None => errors.push((format!("{dloc}.name"), "Field required".into(), "missing")),
                }
            }
        }
        if deployments.is_empty() && !import_path.is_empty() {
            // Without overrides Ray takes the deployments from the code; the sim assumes one,
            // named after the attribute being imported, with one replica.
            let attr = import_path.rsplit([':', '.']).next().unwrap_or("app");
            deployments.push((attr.to_owned(), 1));
        }
        let name = a.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()).unwrap_or("default").to_owned();
        apps.push(ParsedApp {
            code_key: code_key(a),
            name,
            import_path,
            route_prefix,
            config: app.clone(),
            deployments,
        });
    }
    let mut seen_names = HashSet::new();
    let mut seen_routes = HashSet::new();
    for app in &apps {
        if !seen_names.insert(app.name.as_str()) {
            errors.push((
                "applications".into(),
                format!("Value error, Found multiple configs for application \"{}\". Please remove all duplicates.", app.name),
                "value_error",
            ));
        }
        if let Some(r) = &app.route_prefix
            && !seen_routes.insert(r.as_str())
        {
            errors.push((
                "applications".into(),
                format!("Value error, Found duplicate route prefix \"{r}\". Please remove all duplicates."),
                "value_error",
            ));
        }
    }
    if errors.is_empty() { Ok(ParsedConfig { target_capacity, apps }) } else { Err(render_errors(&errors)) }
}

/// `num_replicas` (int > 0, or "auto") or the autoscaling start size; Ray's default is 1.
fn configured_replicas(d: &Value) -> Result<u32, String> {
    let autoscaling_start = |cfg: Option<&Value>| {
        let get = |k: &str| cfg.and_then(|c| c.get(k)).and_then(Value::as_u64);
        get("initial_replicas").or_else(|| get("min_replicas")).unwrap_or(1)
    };
    let n = match d.get("num_replicas") {
        None | Some(Value::Null) => autoscaling_start(d.get("autoscaling_config")),
        Some(Value::String(s)) if s == "auto" => autoscaling_start(d.get("autoscaling_config")),
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => n,
            _ => return Err("Input should be greater than 0".into()),
        },
    };
    u32::try_from(n).map_err(|_| "Input should be less than 4294967296".into())
}

fn code_key(app: &Map<String, Value>) -> String {
    let mut a = app.clone();
    if let Some(Value::Array(deps)) = a.get_mut("deployments") {
        for d in deps.iter_mut() {
            if let Some(d) = d.as_object_mut() {
                d.remove("num_replicas");
                d.remove("autoscaling_config");
            }
        }
    }
    Value::Object(a).to_string()
}

fn render_errors(errors: &[(String, String, &str)]) -> String {
    let n = errors.len();
    let mut out = format!("{n} validation error{} for ServeDeploySchema", if n == 1 { "" } else { "s" });
    for (loc, msg, kind) in errors {
        out.push_str(&format!("\n{loc}\n  {msg} [type={kind}]"));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// State machine.

impl SimCluster {
    fn new(now: Instant) -> Self {
        Self {
            started: now,
            reachable: true,
            fail_deploys: false,
            auth_token: None,
            target_capacity: None,
            apps: IndexMap::new(),
            next_replica: 0,
            puts: 0,
        }
    }

    fn apply(&mut self, cfg: ParsedConfig, failing: &HashSet<String>, opts: &SimOptions, now: Instant) {
        self.puts += 1;
        // Omitting target_capacity resets it, as Serve does.
        self.target_capacity = cfg.target_capacity;
        let names: HashSet<&str> = cfg.apps.iter().map(|a| a.name.as_str()).collect();
        self.apps.retain(|name, _| names.contains(name.as_str()));
        for app in cfg.apps {
            let failure = failure_message(&app, failing, self.fail_deploys);
            match self.apps.get_mut(&app.name) {
                // Same code: only replica counts may differ. A failed app is rebuilt on any PUT so
                // a cleared failure injection takes effect.
                Some(existing)
                    if existing.code_key == app.code_key
                        && failure.is_none()
                        && !matches!(existing.phase, Phase::Failing { .. } | Phase::Failed { .. }) =>
                {
                    existing.config = app.config;
                    existing.spec = app.deployments;
                }
                Some(existing) => {
                    existing.config = app.config;
                    existing.code_key = app.code_key;
                    existing.route_prefix = app.route_prefix;
                    existing.deployed_at = now;
                    existing.spec = app.deployments;
                    existing.phase = match failure {
                        Some(message) => Phase::Failing { at: now + opts.fail_delay, message },
                        None => Phase::Building { until: now + opts.build_delay },
                    };
                }
                None => {
                    let phase = match failure {
                        Some(message) => Phase::Failing { at: now + opts.fail_delay, message },
                        None => Phase::Building { until: now + opts.build_delay },
                    };
                    self.apps.insert(
                        app.name.clone(),
                        SimApp {
                            config: app.config,
                            code_key: app.code_key,
                            route_prefix: app.route_prefix,
                            deployed_at: now,
                            phase,
                            deployments: IndexMap::new(),
                            spec: app.deployments,
                        },
                    );
                }
            }
        }
        // Lightweight changes (replica counts, capacity) apply at once to live apps.
        let tc = self.target_capacity;
        let mut next = self.next_replica;
        for app in self.apps.values_mut() {
            if matches!(app.phase, Phase::Live) {
                scale_live(app, tc, now, opts, &mut next);
            }
        }
        self.next_replica = next;
    }

    /// Advances phases whose time has come.
    fn tick(&mut self, now: Instant, start_delay: Duration) {
        let tc = self.target_capacity;
        let mut next = self.next_replica;
        for app in self.apps.values_mut() {
            match &app.phase {
                Phase::Building { until } if *until <= now => {
                    let built_at = *until;
                    rebuild(app, tc, built_at, start_delay, &mut next);
                    app.phase = Phase::Live;
                }
                Phase::Failing { at, message } if *at <= now => {
                    app.phase = Phase::Failed { message: message.clone() };
                }
                _ => {}
            }
            for d in app.deployments.values_mut() {
                d.replicas.retain(|r| r.retire_at.is_none_or(|t| t > now));
                let done = match d.scaling {
                    Some(Scaling::Up { .. }) => running(d, now) >= d.target,
                    Some(Scaling::Down { .. }) => !d.replicas.iter().any(|r| r.stopping),
                    None => false,
                };
                if done {
                    d.scaling = None;
                }
            }
        }
        self.next_replica = next;
    }

    fn render(&self, now: Instant) -> ServeDetails {
        let mut applications = IndexMap::new();
        for (name, app) in &self.apps {
            applications.insert(name.clone(), render_app(name, app, self.started, now));
        }
        ServeDetails { applications, target_capacity: self.target_capacity, proxies: IndexMap::new() }
    }
}

fn failure_message(app: &ParsedApp, failing: &HashSet<String>, fail_all: bool) -> Option<String> {
    let module = app.import_path.split(':').next().unwrap_or_default();
    let module = module.split('.').next().unwrap_or_default();
    let cause = if module.starts_with("no_such_") || failing.contains(&app.import_path) {
        format!("ModuleNotFoundError: No module named '{module}'")
    } else if fail_all {
        "RuntimeError: simulated deploy failure injected for this cluster".to_owned()
    } else {
        return None;
    };
    Some(format!(
        "Deploying app '{}' failed with exception:\nTraceback (most recent call last):\n  File \"/home/ray/anaconda3/lib/python3.11/site-packages/ray/serve/_private/application_state.py\", line 1737, in build_serve_application\n    import_attr(import_path), args\n    ^^^^^^^^^^^^^^^^^^^^^^^^\n\u{1b}[36mray::build_serve_application()\u{1b}[39m (simulated)\n{cause}\n",
        app.name
    ))
}

fn new_replica(next: &mut u64, running_at: Instant) -> SimReplica {
    *next += 1;
    SimReplica { id: format!("sim{:05}", *next), running_at, retire_at: None, stopping: false }
}

fn running(d: &SimDeployment, now: Instant) -> u32 {
    let n = d.replicas.iter().filter(|r| r.retire_at.is_none() && r.running_at <= now).count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A finished build: a new version of every deployment; old replicas serve until the new run.
fn rebuild(app: &mut SimApp, tc: Option<f64>, built_at: Instant, start_delay: Duration, next: &mut u64) {
    let running_at = built_at + start_delay;
    let mut deployments = IndexMap::new();
    for (name, configured) in &app.spec {
        let target = capacity_adjusted_replicas(*configured, tc);
        let mut replicas: Vec<SimReplica> = match app.deployments.shift_remove(name) {
            Some(old) => old
                .replicas
                .into_iter()
                .map(|mut r| {
                    r.retire_at = Some(r.retire_at.unwrap_or(running_at).min(running_at));
                    r
                })
                .collect(),
            None => Vec::new(),
        };
        replicas.extend((0..target).map(|_| new_replica(next, running_at)));
        deployments.insert(name.clone(), SimDeployment { target, replicas, scaling: None });
    }
    app.deployments = deployments;
}

/// Replica counts or capacity changed on a running app: add or drop replicas, keep the version.
fn scale_live(app: &mut SimApp, tc: Option<f64>, now: Instant, opts: &SimOptions, next: &mut u64) {
    let mut deployments = IndexMap::new();
    for (name, configured) in &app.spec {
        let target = capacity_adjusted_replicas(*configured, tc);
        let mut d = app.deployments.shift_remove(name).unwrap_or(SimDeployment {
            target: 0,
            replicas: Vec::new(),
            scaling: None,
        });
        let current = d.replicas.iter().filter(|r| r.retire_at.is_none()).count();
        let current = u32::try_from(current).unwrap_or(u32::MAX);
        if target > current {
            d.scaling = Some(Scaling::Up { from: current });
            d.replicas.extend((current..target).map(|_| new_replica(next, now + opts.replica_start_delay)));
        } else if target < current {
            // Stop the youngest (still starting) replicas first.
            d.replicas.sort_by_key(|r| r.running_at);
            let mut excess = current - target;
            for r in d.replicas.iter_mut().rev() {
                if excess == 0 {
                    break;
                }
                if r.retire_at.is_none() {
                    r.retire_at = Some(now + opts.replica_stop_delay);
                    r.stopping = true;
                    excess -= 1;
                }
            }
            d.replicas.retain(|r| r.retire_at.is_none_or(|t| t > now));
            d.scaling = Some(Scaling::Down { from: current });
        }
        d.target = target;
        deployments.insert(name.clone(), d);
    }
    app.deployments = deployments;
}

fn secs(started: Instant, t: Instant) -> f64 {
    t.saturating_duration_since(started).as_secs_f64()
}

fn render_app(name: &str, app: &SimApp, started: Instant, now: Instant) -> AppDetails {
    let building = matches!(app.phase, Phase::Building { .. } | Phase::Failing { .. });
    let mut deployments = IndexMap::new();
    if !matches!(app.phase, Phase::Failed { .. }) {
        for (dname, d) in &app.deployments {
            let live = running(d, now);
            let stopping = d.replicas.iter().any(|r| r.stopping);
            let (status, message) = match d.scaling {
                _ if building => (DeploymentStatus::Updating, String::new()),
                Some(Scaling::Up { from }) if live < d.target => {
                    (DeploymentStatus::Upscaling, format!("Upscaling from {from} to {} replicas.", d.target))
                }
                Some(Scaling::Down { from }) if stopping => {
                    (DeploymentStatus::Downscaling, format!("Downscaling from {from} to {} replicas.", d.target))
                }
                _ if live >= d.target => (DeploymentStatus::Healthy, String::new()),
                _ => (DeploymentStatus::Updating, String::new()),
            };
            let replicas = d
                .replicas
                .iter()
                .map(|r| ReplicaDetails {
                    replica_id: r.id.clone(),
                    state: if r.stopping {
                        ReplicaState::Stopping
                    } else if r.running_at <= now {
                        ReplicaState::Running
                    } else {
                        ReplicaState::Starting
                    },
                    pid: None,
                    start_time_s: Some(secs(started, r.running_at)),
                })
                .collect();
            deployments.insert(
                dname.clone(),
                DeploymentDetails {
                    name: dname.clone(),
                    status,
                    status_trigger: None,
                    message,
                    target_num_replicas: Some(d.target),
                    replicas,
                },
            );
        }
    }
    let (status, message) = match &app.phase {
        Phase::Failed { message } => (AppStatus::DeployFailed, message.clone()),
        Phase::Building { .. } | Phase::Failing { .. } => (AppStatus::Deploying, String::new()),
        // Ray 2.60 (observed) reports the app DEPLOYING until every deployment is HEALTHY again,
        // scaling included.
        Phase::Live if deployments.values().any(|d| d.status != DeploymentStatus::Healthy) => {
            (AppStatus::Deploying, String::new())
        }
        Phase::Live => (AppStatus::Running, String::new()),
    };
    AppDetails {
        name: name.to_owned(),
        route_prefix: app.route_prefix.clone(),
        docs_path: None,
        status,
        message,
        last_deployed_time_s: Some(secs(started, app.deployed_at)),
        deployed_app_config: Some(app.config.clone()),
        deployments,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rayservice::dashboard::{ServeReadiness, serve_readiness};
    use serde_json::json;

    const URL: &str = "http://rs-a-head-svc.ns.svc.cluster.local:8265";
    const S: Duration = Duration::from_secs(1);

    fn ep() -> DashboardEndpoint {
        DashboardEndpoint::new(URL)
    }

    fn sim() -> RaySim {
        RaySim::new(SimOptions::default())
    }

    fn hello(replicas: u32) -> Value {
        json!({"name": "hello", "route_prefix": "/", "import_path": "app:app",
               "deployments": [{"name": "Hello", "num_replicas": replicas}]})
    }

    fn config(apps: Vec<Value>) -> ServeConfig {
        ServeConfig::from_json(json!({"applications": apps})).unwrap()
    }

    async fn details(sim: &RaySim) -> ServeDetails {
        sim.serve_details(&ep()).await.unwrap()
    }

    /// (app status, deployment status, target, replica states) of hello/Hello.
    async fn hello_state(sim: &RaySim) -> (String, String, u32, Vec<String>) {
        let d = details(sim).await;
        let app = &d.applications["hello"];
        let dep = &app.deployments["Hello"];
        let states = dep.replicas.iter().map(|r| r.state.to_string()).collect();
        (app.status.to_string(), dep.status.to_string(), dep.target_num_replicas.unwrap(), states)
    }

    fn st(app: &str, dep: &str, target: u32, replicas: &[&str]) -> (String, String, u32, Vec<String>) {
        (app.into(), dep.into(), target, replicas.iter().map(|s| s.to_string()).collect())
    }

    #[tokio::test(start_paused = true)]
    async fn first_deploy_goes_deploying_starting_running() {
        let sim = sim();
        assert!(details(&sim).await.applications.is_empty());
        sim.deploy(&ep(), &config(vec![hello(2)]), None).await.unwrap();
        let d = details(&sim).await;
        assert_eq!(d.applications["hello"].status, AppStatus::Deploying);
        assert!(d.applications["hello"].deployments.is_empty());
        assert!(!serve_readiness(&d, None).is_ready());

        tokio::time::advance(S).await;
        assert_eq!(hello_state(&sim).await, st("DEPLOYING", "UPDATING", 2, &["STARTING", "STARTING"]));
        tokio::time::advance(2 * S).await;
        assert_eq!(hello_state(&sim).await, st("RUNNING", "HEALTHY", 2, &["RUNNING", "RUNNING"]));
        let d = details(&sim).await;
        assert_eq!(serve_readiness(&d, None), ServeReadiness::Ready);
        assert_eq!(d.applications["hello"].deployed_app_config, Some(hello(2)));
        assert_eq!(d.applications["hello"].route_prefix.as_deref(), Some("/"));
    }

    async fn running_hello(sim: &RaySim, replicas: u32) {
        sim.deploy(&ep(), &config(vec![hello(replicas)]), None).await.unwrap();
        tokio::time::advance(3 * S).await;
        assert!(serve_readiness(&details(sim).await, None).is_ready());
    }

    #[tokio::test(start_paused = true)]
    async fn target_capacity_scales_like_serve() {
        let sim = sim();
        running_hello(&sim, 2).await;

        // Downscale: a replica STOPPING, app DEPLOYING until it is gone (as seen on Ray 2.60).
        sim.deploy(&ep(), &config(vec![hello(2)]), Some(50.0)).await.unwrap();
        assert_eq!(hello_state(&sim).await, st("DEPLOYING", "DOWNSCALING", 1, &["RUNNING", "STOPPING"]));
        let d = details(&sim).await;
        assert_eq!(d.target_capacity, Some(50.0));
        assert_eq!(d.applications["hello"].deployments["Hello"].message, "Downscaling from 2 to 1 replicas.");
        tokio::time::advance(2 * S).await;
        assert_eq!(hello_state(&sim).await, st("RUNNING", "HEALTHY", 1, &["RUNNING"]));

        // Upscale: one replica STARTING, app DEPLOYING until it runs.
        sim.deploy(&ep(), &config(vec![hello(2)]), Some(100.0)).await.unwrap();
        assert_eq!(hello_state(&sim).await, st("DEPLOYING", "UPSCALING", 2, &["RUNNING", "STARTING"]));
        let d = details(&sim).await;
        assert_eq!(d.applications["hello"].deployments["Hello"].message, "Upscaling from 1 to 2 replicas.");
        assert!(!serve_readiness(&d, None).is_ready());
        tokio::time::advance(2 * S).await;
        assert_eq!(hello_state(&sim).await, st("RUNNING", "HEALTHY", 2, &["RUNNING", "RUNNING"]));

        let cases: &[(u32, Option<f64>, u32)] = &[(3, Some(0.0), 0), (3, Some(34.0), 1), (3, Some(50.0), 2), (3, None, 3)];
        for (n, tc, want) in cases {
            sim.deploy(&ep(), &config(vec![hello(*n)]), *tc).await.unwrap();
            tokio::time::advance(2 * S).await;
            let (app, _, target, replicas) = hello_state(&sim).await;
            assert_eq!((app.as_str(), target, replicas.len() as u32), ("RUNNING", *want, *want), "n={n} tc={tc:?}");
            // Omitting the capacity resets it.
            assert_eq!(details(&sim).await.target_capacity, *tc);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn schema_errors_are_400_with_pydantic_like_text() {
        let sim = sim();
        let cases: Vec<(Value, &str)> = vec![
            (json!({}), "applications\n  Field required"),
            (json!({"applications": [{"name": "x"}]}), "applications.0.import_path\n  Field required [type=missing]"),
            (
                json!({"applications": [{"import_path": "a:b", "deployments": [{"num_replicas": 1}]}]}),
                "applications.0.deployments.0.name\n  Field required",
            ),
            (
                json!({"applications": [{"import_path": "a:b", "deployments": [{"name": "A", "num_replicas": 0}]}]}),
                "applications.0.deployments.0.num_replicas\n  Input should be greater than 0",
            ),
            (
                json!({"applications": [{"name": "x", "import_path": "a:b", "route_prefix": "/a"},
                                         {"name": "x", "import_path": "a:b", "route_prefix": "/b"}]}),
                "Found multiple configs for application \"x\"",
            ),
            (
                json!({"applications": [{"name": "x", "import_path": "a:b", "runtime_env": {"working_dir": "/some/dir"}}]}),
                "Expected URI but received path /some/dir",
            ),
            (json!({"target_capacity": 150, "applications": []}), "target_capacity\n  Input should be within 0 and 100"),
            (
                json!({"applications": [{"import_path": "a:b", "route_prefix": "x"}]}),
                "route_prefix must start with",
            ),
        ];
        for (body, want) in cases {
            let err = sim.deploy(&ep(), &ServeConfig::from_json(body.clone()).unwrap(), None).await.unwrap_err();
            match err {
                DashboardError::Rejected { message } => {
                    assert!(message.contains("for ServeDeploySchema"), "{body}: {message}");
                    assert!(message.contains(want), "{body}: {message}");
                }
                other => panic!("{body}: want Rejected, got {other:?}"),
            }
        }
        // Several errors are reported together, as pydantic does.
        let body = json!({"target_capacity": 150, "applications": [{"name": "x"}]});
        let err = sim.deploy(&ep(), &ServeConfig::from_json(body).unwrap(), None).await.unwrap_err();
        assert!(err.to_string().contains("2 validation errors"), "{err}");
        // A rejected PUT changes nothing.
        assert_eq!(sim.put_count(URL), 0);
        assert!(details(&sim).await.applications.is_empty());
        // An out-of-range injected capacity never leaves the client.
        let err = sim.deploy(&ep(), &config(vec![hello(1)]), Some(150.0)).await.unwrap_err();
        assert_eq!(err.category(), "invalid_config");
    }

    #[tokio::test(start_paused = true)]
    async fn bad_import_fails_later_with_a_traceback() {
        let sim = sim();
        running_hello(&sim, 1).await;
        let broken = json!({"name": "broken", "route_prefix": "/broken", "import_path": "no_such_module:app"});
        sim.deploy(&ep(), &config(vec![hello(1), broken]), None).await.unwrap();
        assert_eq!(details(&sim).await.applications["broken"].status, AppStatus::Deploying);
        tokio::time::advance(3 * S).await;
        let d = details(&sim).await;
        let app = &d.applications["broken"];
        assert_eq!(app.status, AppStatus::DeployFailed);
        assert!(app.deployments.is_empty());
        assert!(app.message.contains("Traceback (most recent call last):"));
        assert!(app.message.contains('\u{1b}'), "message carries ANSI escapes like Ray's");
        assert_eq!(
            serve_readiness(&d, None),
            ServeReadiness::Failed {
                app: "broken".into(),
                status: AppStatus::DeployFailed,
                message: "ModuleNotFoundError: No module named 'no_such_module'".into(),
            }
        );
        assert_eq!(d.applications["hello"].status, AppStatus::Running);
    }

    #[tokio::test(start_paused = true)]
    async fn in_place_failure_then_fix() {
        let sim = sim();
        running_hello(&sim, 1).await;
        sim.fail_import_path("app:broken_app");
        let mut bad = hello(1);
        bad["import_path"] = json!("app:broken_app");
        sim.deploy(&ep(), &config(vec![bad.clone()]), None).await.unwrap();
        tokio::time::advance(3 * S).await;
        let d = details(&sim).await;
        let app = &d.applications["hello"];
        assert_eq!(app.status, AppStatus::DeployFailed);
        assert!(app.deployments.is_empty(), "Ray reports no deployments for a failed app");
        assert_eq!(app.deployed_app_config, Some(bad));
        assert!(app.message.contains("No module named 'app'"));

        sim.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap();
        tokio::time::advance(3 * S).await;
        assert_eq!(hello_state(&sim).await, st("RUNNING", "HEALTHY", 1, &["RUNNING"]));
    }

    #[tokio::test(start_paused = true)]
    async fn failure_flag_is_per_cluster_and_clearable() {
        let sim = sim();
        let other = DashboardEndpoint::new("http://rs-b-head-svc.ns.svc.cluster.local:8265");
        sim.set_fail_deploys(URL, true);
        sim.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap();
        sim.deploy(&other, &config(vec![hello(1)]), None).await.unwrap();
        tokio::time::advance(3 * S).await;
        let d = details(&sim).await;
        assert_eq!(d.applications["hello"].status, AppStatus::DeployFailed);
        assert!(serve_readiness(&d, None).reason().contains("simulated deploy failure"));
        assert!(serve_readiness(&sim.serve_details(&other).await.unwrap(), None).is_ready());

        // Clearing the flag and re-sending the same config recovers.
        sim.set_fail_deploys(URL, false);
        sim.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap();
        tokio::time::advance(3 * S).await;
        assert!(serve_readiness(&details(&sim).await, None).is_ready());
        assert_eq!(sim.cluster_urls().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn code_change_rebuilds_while_old_replicas_serve() {
        let sim = sim();
        running_hello(&sim, 1).await;
        let old_id = details(&sim).await.applications["hello"].deployments["Hello"].replicas[0].replica_id.clone();
        let mut v2 = hello(1);
        v2["runtime_env"] = json!({"env_vars": {"VERSION": "2"}});
        sim.deploy(&ep(), &config(vec![v2]), None).await.unwrap();
        assert_eq!(hello_state(&sim).await, st("DEPLOYING", "UPDATING", 1, &["RUNNING"]));
        tokio::time::advance(S).await;
        assert_eq!(hello_state(&sim).await, st("DEPLOYING", "UPDATING", 1, &["RUNNING", "STARTING"]));
        tokio::time::advance(2 * S).await;
        assert_eq!(hello_state(&sim).await, st("RUNNING", "HEALTHY", 1, &["RUNNING"]));
        let new_id = details(&sim).await.applications["hello"].deployments["Hello"].replicas[0].replica_id.clone();
        assert_ne!(old_id, new_id);

        // Re-sending an identical config restarts nothing.
        sim.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap();
        tokio::time::advance(3 * S).await;
        let again = details(&sim).await.applications["hello"].deployments["Hello"].replicas[0].replica_id.clone();
        sim.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap();
        let d = details(&sim).await;
        assert_eq!(d.applications["hello"].status, AppStatus::Running);
        assert_eq!(d.applications["hello"].deployments["Hello"].replicas[0].replica_id, again);
        assert_eq!(sim.put_count(URL), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn declarative_puts_remove_unlisted_apps_and_delete_clears() {
        let sim = sim();
        let other = json!({"name": "other", "route_prefix": "/o", "import_path": "other:app"});
        sim.deploy(&ep(), &config(vec![hello(1), other]), None).await.unwrap();
        tokio::time::advance(3 * S).await;
        let d = details(&sim).await;
        assert_eq!(d.applications.keys().collect::<Vec<_>>(), ["hello", "other"]);
        // No deployments listed: one named after the imported attribute.
        assert_eq!(d.applications["other"].deployments.keys().collect::<Vec<_>>(), ["app"]);
        sim.deploy(&ep(), &config(vec![hello(1)]), Some(50.0)).await.unwrap();
        assert_eq!(details(&sim).await.applications.keys().collect::<Vec<_>>(), ["hello"]);
        sim.delete_applications(&ep()).await.unwrap();
        let d = details(&sim).await;
        assert!(d.applications.is_empty());
        assert_eq!(d.target_capacity, None);
    }

    #[tokio::test(start_paused = true)]
    async fn reachability_restart_and_auth() {
        let sim = RaySim::new(SimOptions { auto_start: false, ..Default::default() });
        let err = sim.serve_details(&ep()).await.unwrap_err();
        assert_eq!(err.category(), "unreachable");
        sim.start_cluster(URL);
        running_hello(&sim, 1).await;

        sim.set_reachable(URL, false);
        assert_eq!(sim.serve_details(&ep()).await.unwrap_err().category(), "unreachable");
        assert_eq!(sim.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap_err().category(), "unreachable");
        sim.set_reachable(URL, true);
        assert!(serve_readiness(&details(&sim).await, None).is_ready(), "state survives a partition");

        sim.set_auth_token(URL, Some("tok".into()));
        let cases = [(None, Some(401)), (Some("nope"), Some(403)), (Some("tok"), None)];
        for (token, want) in cases {
            let mut e = ep();
            e.auth_token = token.map(str::to_owned);
            match (sim.serve_details(&e).await, want) {
                (Ok(_), None) => {}
                (Err(DashboardError::Unauthorized { status, .. }), Some(w)) => assert_eq!(status, w),
                (other, w) => panic!("token {token:?}: want {w:?}, got {other:?}"),
            }
        }
        sim.set_auth_token(URL, None);

        // A head restart without GCS fault tolerance loses every app.
        sim.stop_cluster(URL);
        assert_eq!(sim.serve_details(&ep()).await.unwrap_err().category(), "unreachable");
        sim.start_cluster(URL);
        assert!(details(&sim).await.applications.is_empty());
    }

    #[test]
    fn autoscaling_and_auto_replicas_start_at_initial_or_min() {
        let cases: &[(Value, Result<u32, ()>)] = &[
            (json!({"name": "A"}), Ok(1)),
            (json!({"name": "A", "num_replicas": 4}), Ok(4)),
            (json!({"name": "A", "num_replicas": "auto"}), Ok(1)),
            (json!({"name": "A", "autoscaling_config": {"min_replicas": 2, "max_replicas": 5}}), Ok(2)),
            (json!({"name": "A", "autoscaling_config": {"min_replicas": 2, "initial_replicas": 3}}), Ok(3)),
            (json!({"name": "A", "num_replicas": -1}), Err(())),
            (json!({"name": "A", "num_replicas": "many"}), Err(())),
        ];
        for (d, want) in cases {
            assert_eq!(configured_replicas(d).map_err(|_| ()), *want, "{d}");
        }
    }
}
