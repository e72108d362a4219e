//! The simulated Serve instance of one cluster: applies accepted configs and advances apps,
//! deployments and replicas from tokio's clock.

use std::collections::HashSet;
use std::time::Duration;

use indexmap::IndexMap;
use serde_json::Value;
use tokio::time::Instant;

use super::SimOptions;
use super::schema::{ParsedApp, ParsedConfig};
use crate::rayservice::dashboard::{
    AppDetails, AppStatus, DeploymentDetails, DeploymentStatus, ReplicaDetails, ReplicaState,
    ServeDetails, capacity_adjusted_replicas,
};

pub(super) struct SimCluster {
    started: Instant,
    pub(super) reachable: bool,
    pub(super) fail_deploys: bool,
    pub(super) auth_token: Option<String>,
    pub(super) target_capacity: Option<f64>,
    apps: IndexMap<String, SimApp>,
    next_replica: u64,
    pub(super) puts: u64,
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

impl SimCluster {
    pub(super) fn new(now: Instant) -> Self {
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

    pub(super) fn apply(
        &mut self,
        cfg: ParsedConfig,
        failing: &HashSet<String>,
        opts: &SimOptions,
        now: Instant,
    ) {
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
                        && !matches!(
                            existing.phase,
                            Phase::Failing { .. } | Phase::Failed { .. }
                        ) =>
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
                        Some(message) => Phase::Failing {
                            at: now + opts.fail_delay,
                            message,
                        },
                        None => Phase::Building {
                            until: now + opts.build_delay,
                        },
                    };
                }
                None => {
                    let phase = match failure {
                        Some(message) => Phase::Failing {
                            at: now + opts.fail_delay,
                            message,
                        },
                        None => Phase::Building {
                            until: now + opts.build_delay,
                        },
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

    /// `DELETE /api/serve/applications/`: Serve shuts down with every app.
    pub(super) fn delete_applications(&mut self) {
        self.apps.clear();
        self.target_capacity = None;
    }

    /// Advances phases whose time has come.
    pub(super) fn tick(&mut self, now: Instant, start_delay: Duration) {
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
                    app.phase = Phase::Failed {
                        message: message.clone(),
                    };
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

    pub(super) fn render(&self, now: Instant) -> ServeDetails {
        let mut applications = IndexMap::new();
        for (name, app) in &self.apps {
            applications.insert(name.clone(), render_app(name, app, self.started, now));
        }
        ServeDetails {
            applications,
            target_capacity: self.target_capacity,
            proxies: IndexMap::new(),
        }
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
    SimReplica {
        id: format!("sim{:05}", *next),
        running_at,
        retire_at: None,
        stopping: false,
    }
}

/// Replicas of one deployment the simulated cluster places at most; a larger target leaves the rest
/// unscheduled, as a real Ray cluster without the resources does, instead of allocating in
/// proportion to a number in the Serve config.
pub const SIM_MAX_REPLICAS: u32 = 1024;

fn running(d: &SimDeployment, now: Instant) -> u32 {
    let n = d
        .replicas
        .iter()
        .filter(|r| r.retire_at.is_none() && r.running_at <= now)
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A finished build: a new version of every deployment; old replicas serve until the new run.
fn rebuild(
    app: &mut SimApp,
    tc: Option<f64>,
    built_at: Instant,
    start_delay: Duration,
    next: &mut u64,
) {
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
        replicas.extend((0..target.min(SIM_MAX_REPLICAS)).map(|_| new_replica(next, running_at)));
        deployments.insert(
            name.clone(),
            SimDeployment {
                target,
                replicas,
                scaling: None,
            },
        );
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
            d.replicas.extend(
                (current..target.min(SIM_MAX_REPLICAS).max(current))
                    .map(|_| new_replica(next, now + opts.replica_start_delay)),
            );
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
