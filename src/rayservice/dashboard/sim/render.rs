//! What `GET /api/serve/applications/` shows for one simulated app: statuses and messages derived
//! from the app's phase and its replicas.

use indexmap::IndexMap;
use tokio::time::Instant;

use super::schema::CPU_UNITS;
use super::state::{
    Phase, SIM_MAX_REPLICAS, Scaling, SimApp, SimCluster, SimDeployment, SimReplica, running,
};
use crate::rayservice::dashboard::{
    AppDetails, AppStatus, DeploymentDetails, DeploymentStatus, ReplicaDetails, ReplicaState, ServeDetails,
};

impl SimCluster {
    /// The whole `GET /api/serve/applications/` answer of the cluster at `now`.
    pub(super) fn render(&self, now: Instant) -> ServeDetails {
        let mut applications = IndexMap::new();
        for (name, app) in &self.apps {
            applications.insert(
                name.clone(),
                render_app(name, app, self.started, self.free_units(), now),
            );
        }
        ServeDetails {
            applications,
            target_capacity: self.target_capacity,
            proxies: IndexMap::new(),
        }
    }
}

fn secs(started: Instant, t: Instant) -> f64 {
    t.saturating_duration_since(started).as_secs_f64()
}

/// One app as `GET /api/serve/applications/` shows it; `free` is the cluster's unreserved CPU
/// units when it has a capacity.
pub(super) fn render_app(
    name: &str,
    app: &SimApp,
    started: Instant,
    free: Option<u64>,
    now: Instant,
) -> AppDetails {
    let building = matches!(app.phase, Phase::Building { .. } | Phase::Failing { .. });
    let mut deployments = IndexMap::new();
    if !matches!(app.phase, Phase::Failed { .. }) {
        for (dname, d) in &app.deployments {
            let live = running(d, now);
            let stopping = d.replicas.iter().any(|r| r.stopping);
            let (status, mut message) = match d.scaling {
                _ if building => (DeploymentStatus::Updating, String::new()),
                _ if d.target > SIM_MAX_REPLICAS => (
                    DeploymentStatus::Upscaling,
                    format!(
                        "Deployment '{dname}' in application '{name}' has {} replicas that cannot be scheduled: the cluster places at most {SIM_MAX_REPLICAS}.",
                        d.target - SIM_MAX_REPLICAS
                    ),
                ),
                Some(Scaling::Up { from }) if live < d.target => (
                    DeploymentStatus::Upscaling,
                    format!("Upscaling from {from} to {} replicas.", d.target),
                ),
                Some(Scaling::Down { from }) if stopping => (
                    DeploymentStatus::Downscaling,
                    format!("Downscaling from {from} to {} replicas.", d.target),
                ),
                _ if live >= d.target => (DeploymentStatus::Healthy, String::new()),
                _ => (DeploymentStatus::Updating, String::new()),
            };
            if let Some(waiting) = waiting_message(name, dname, d, free) {
                if !message.is_empty() {
                    message.push(' ');
                }
                message.push_str(&waiting);
            }
            let replicas = d
                .replicas
                .iter()
                .map(|r| ReplicaDetails {
                    replica_id: r.id.clone(),
                    state: if r.stopping {
                        ReplicaState::Stopping
                    } else if r.placed && r.running_at <= now {
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
        Phase::Live
            if deployments
                .values()
                .any(|d| d.status != DeploymentStatus::Healthy) =>
        {
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

/// Why replicas wait, in the words of Serve's scheduling warning (Ray says so after 30 s; the sim
/// at once).
fn waiting_message(app: &str, dep: &str, d: &SimDeployment, free: Option<u64>) -> Option<String> {
    let waiting: Vec<&SimReplica> = d
        .replicas
        .iter()
        .filter(|r| !r.placed && r.retire_at.is_none())
        .collect();
    let first = waiting.first()?;
    let cpus = |units: u64| units as f64 / CPU_UNITS;
    Some(format!(
        "Deployment '{dep}' in application '{app}' has {} replicas that cannot be scheduled yet. This may be due to waiting for the cluster to auto-scale. Resources required for each replica: {{\"CPU\": {:?}}}, resources available: {{\"CPU\": {:?}}}.",
        waiting.len(),
        cpus(first.cpu_units),
        cpus(free.unwrap_or(0)),
    ))
}
