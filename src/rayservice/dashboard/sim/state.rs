//! The simulated Serve instance of one cluster: applies accepted configs and advances apps,
//! deployments and replicas from tokio's clock.
//!
//! Time advances event by event (a build finishing, a replica going away), and after each event
//! the replicas are fitted into the cluster's CPU capacity at that instant (`placement`), so a lazy
//! tick long after the events gives the same answer as ticking at each of them.

use std::collections::HashSet;
use std::time::Duration;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;

use super::SimOptions;
use super::schema::{ParsedApp, ParsedConfig, ParsedDeployment};
use super::wall_clock::{instant, opt_instant};
use crate::rayservice::dashboard::capacity_adjusted_replicas;

#[derive(Serialize, Deserialize)]
pub(super) struct SimCluster {
    #[serde(with = "instant")]
    pub(super) started: Instant,
    pub(super) reachable: bool,
    pub(super) fail_deploys: bool,
    pub(super) auth_token: Option<String>,
    pub(super) target_capacity: Option<f64>,
    /// CPUs (fixed-point units) the cluster's running Ray nodes offer to replicas; None = unlimited.
    pub(super) capacity: Option<u64>,
    pub(super) apps: IndexMap<String, SimApp>,
    next_replica: u64,
    pub(super) puts: u64,
    /// The head's Serve proxy has had a route table with an application's deployments in it (Ray's
    /// `ProxyRouter._route_table_populated`); from then on the head's proxy is healthy. A head
    /// restart starts a new cluster, and with it a proxy with no routes.
    #[serde(default)]
    pub(super) routes_populated: bool,
    /// Ray jobs submitted through the Jobs API, by submission id; a head restart loses them.
    pub(super) jobs: std::collections::BTreeMap<String, super::jobs::SimJob>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct SimApp {
    pub(super) config: Value,
    /// The config without replica counts: a change here rebuilds the app, otherwise it only scales.
    code_key: String,
    pub(super) route_prefix: Option<String>,
    #[serde(with = "instant")]
    pub(super) deployed_at: Instant,
    pub(super) phase: Phase,
    pub(super) deployments: IndexMap<String, SimDeployment>,
    /// Desired deployments, applied when a build finishes.
    spec: Vec<ParsedDeployment>,
}

#[derive(Serialize, Deserialize)]
pub(super) enum Phase {
    Building {
        #[serde(with = "instant")]
        until: Instant,
    },
    Failing {
        #[serde(with = "instant")]
        at: Instant,
        message: String,
    },
    Failed {
        message: String,
    },
    Live,
}

#[derive(Serialize, Deserialize)]
pub(super) struct SimDeployment {
    pub(super) target: u32,
    pub(super) replicas: Vec<SimReplica>,
    /// Set by a replica-count change, for Ray's "Upscaling from a to b replicas." messages.
    pub(super) scaling: Option<Scaling>,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
pub(super) enum Scaling {
    Up { from: u32 },
    Down { from: u32 },
}

#[derive(Serialize, Deserialize)]
pub(super) struct SimReplica {
    pub(super) id: String,
    /// Creation order: older replicas are placed first.
    pub(super) seq: u64,
    /// RUNNING from then on, if placed; placing a replica later moves it to start delay after.
    #[serde(with = "instant")]
    pub(super) running_at: Instant,
    /// When the replica disappears: old-version replicas serve until the new ones run; replicas
    /// removed by a downscale are STOPPING until then.
    #[serde(with = "opt_instant")]
    pub(super) retire_at: Option<Instant>,
    pub(super) stopping: bool,
    /// `ray_actor_options.num_cpus` of its version, in fixed-point units.
    pub(super) cpu_units: u64,
    /// Holds CPUs on a node. Unplaced replicas wait in STARTING for capacity.
    pub(super) placed: bool,
}

impl SimReplica {
    pub(super) fn is_running(&self, now: Instant) -> bool {
        self.placed && self.retire_at.is_none() && self.running_at <= now
    }
}

impl SimCluster {
    pub(super) fn new(now: Instant) -> Self {
        Self {
            started: now,
            reachable: true,
            fail_deploys: false,
            auth_token: None,
            target_capacity: None,
            capacity: None,
            apps: IndexMap::new(),
            next_replica: 0,
            puts: 0,
            routes_populated: false,
            jobs: Default::default(),
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
        self.place(now, opts.replica_start_delay);
    }

    /// `DELETE /api/serve/applications/`: Serve shuts down with every app.
    pub(super) fn delete_applications(&mut self) {
        self.apps.clear();
        self.target_capacity = None;
    }

    pub(super) fn replicas(&self) -> impl Iterator<Item = &SimReplica> {
        self.apps
            .values()
            .flat_map(|a| a.deployments.values())
            .flat_map(|d| d.replicas.iter())
    }

    /// Advances to `now` event by event, refitting replicas after each.
    pub(super) fn tick(&mut self, now: Instant, start_delay: Duration) {
        while let Some(t) = self.next_event(now) {
            self.advance(t, start_delay);
        }
        self.advance(now, start_delay);
    }

    /// The earliest build end or replica removal not yet processed, if it is due by `now`.
    fn next_event(&self, now: Instant) -> Option<Instant> {
        let builds = self.apps.values().filter_map(|a| match a.phase {
            Phase::Building { until } => Some(until),
            _ => None,
        });
        let removals = self.replicas().filter_map(|r| r.retire_at);
        builds.chain(removals).filter(|t| *t <= now).min()
    }

    /// Applies everything due by `t`.
    fn advance(&mut self, t: Instant, start_delay: Duration) {
        let tc = self.target_capacity;
        let mut next = self.next_replica;
        for app in self.apps.values_mut() {
            match &app.phase {
                Phase::Building { until } if *until <= t => {
                    let built_at = *until;
                    rebuild(app, tc, built_at, start_delay, &mut next);
                    app.phase = Phase::Live;
                }
                Phase::Failing { at, message } if *at <= t => {
                    app.phase = Phase::Failed {
                        message: message.clone(),
                    };
                }
                _ => {}
            }
            for d in app.deployments.values_mut() {
                d.replicas.retain(|r| r.retire_at.is_none_or(|at| at > t));
            }
        }
        self.next_replica = next;
        self.place(t, start_delay);
        for d in self.apps.values_mut().flat_map(|a| a.deployments.values_mut()) {
            let done = match d.scaling {
                Some(Scaling::Up { .. }) => running(d, t) >= d.target,
                Some(Scaling::Down { .. }) => !d.replicas.iter().any(|r| r.stopping),
                None => false,
            };
            if done {
                d.scaling = None;
            }
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

/// A new replica, not yet placed: the caller fits replicas into capacity right after.
fn new_replica(next: &mut u64, running_at: Instant, cpu_units: u64) -> SimReplica {
    *next += 1;
    SimReplica {
        id: format!("sim{:05}", *next),
        seq: *next,
        running_at,
        retire_at: None,
        stopping: false,
        cpu_units,
        placed: false,
    }
}

/// Replicas of one deployment the simulated cluster places at most; a larger target leaves the rest
/// unscheduled, as a real Ray cluster without the resources does, instead of allocating in
/// proportion to a number in the Serve config.
pub const SIM_MAX_REPLICAS: u32 = 1024;

pub(super) fn running(d: &SimDeployment, now: Instant) -> u32 {
    let n = d.replicas.iter().filter(|r| r.is_running(now)).count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A finished build: a new version of every deployment; old replicas serve until the new run.
fn rebuild(app: &mut SimApp, tc: Option<f64>, built_at: Instant, start_delay: Duration, next: &mut u64) {
    let running_at = built_at + start_delay;
    let mut deployments = IndexMap::new();
    for spec in &app.spec {
        let target = capacity_adjusted_replicas(spec.replicas, tc);
        let mut replicas: Vec<SimReplica> = match app.deployments.shift_remove(&spec.name) {
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
        replicas
            .extend((0..target.min(SIM_MAX_REPLICAS)).map(|_| new_replica(next, running_at, spec.cpu_units)));
        deployments.insert(
            spec.name.clone(),
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
    for spec in &app.spec {
        let target = capacity_adjusted_replicas(spec.replicas, tc);
        let mut d = app.deployments.shift_remove(&spec.name).unwrap_or(SimDeployment {
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
                    .map(|_| new_replica(next, now + opts.replica_start_delay, spec.cpu_units)),
            );
        } else if target < current {
            // Stop replicas waiting for a node first, then the youngest (still starting) ones.
            d.replicas.sort_by_key(|r| (!r.placed, r.running_at));
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
        deployments.insert(spec.name.clone(), d);
    }
    app.deployments = deployments;
}
