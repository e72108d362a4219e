//! A simulated client load through a Gateway API HTTPRoute, to see whether an incremental upgrade
//! drops requests.
//!
//! Every `tick` the generator sends the requests due at `requests_per_second` (counted from the
//! start, so a late tick sends more, never fewer) through the weights of the route's first rule:
//! each backend gets exactly its weight share over time (`Splitter`, integer credits, deterministic).
//! A request succeeds when its backend `<cluster>-serve-svc` belongs to a RayCluster whose
//! simulated Serve has at least one app with a RUNNING replica (`RaySim::running_replicas`; any
//! app, the route prefix is not matched, and the Service's endpoints are not consulted). It fails
//! with a reason otherwise: no route (no HTTPRoute, no rule, no backend or all weights 0), no such
//! RayCluster (the name does not end in `-serve-svc` or the cluster is not found), or no running
//! replica.
//!
//! API load stays low: the route is read at most every `route_refresh` (its last good version is
//! used meanwhile, as a data plane keeps its last config), a cluster's dashboard URL once (a
//! missing cluster is looked up again after `route_refresh`). Memory is bounded: counters only,
//! per backend name.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kube::api::Api;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::RaySim;
use crate::api::gateway::HTTPRoute;
use crate::api::ray::RayCluster;
use crate::api::ray::constants::SERVE_SERVICE_SUFFIX;
use crate::rayservice::cluster::names::head_service_name;
use crate::rayservice::dashboard::{DEFAULT_DASHBOARD_PORT, DashboardEndpoint};

pub const REASON_NO_ROUTE: &str = "no route";
pub const REASON_NO_CLUSTER: &str = "no such RayCluster";
pub const REASON_NO_REPLICA: &str = "no running replica";

/// A higher rate is held to this, so counters cannot overflow in any run anyone waits for.
pub const MAX_REQUESTS_PER_SECOND: f64 = 1e7;

#[derive(Clone, Debug)]
pub struct LoadConfig {
    pub namespace: String,
    /// The HTTPRoute requests go through.
    pub route: String,
    pub requests_per_second: f64,
    pub tick: Duration,
    /// How stale the route and a missing cluster may be.
    pub route_refresh: Duration,
    /// For the dashboard URL the simulator keys clusters by.
    pub cluster_domain: String,
    pub dashboard_port: u16,
}

impl LoadConfig {
    /// 100 requests per second in 10 ms ticks through `namespace/route`.
    pub fn new(namespace: impl Into<String>, route: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            route: route.into(),
            requests_per_second: 100.0,
            tick: Duration::from_millis(10),
            route_refresh: Duration::from_millis(100),
            cluster_domain: "cluster.local".into(),
            dashboard_port: DEFAULT_DASHBOARD_PORT,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadCounts {
    pub sent: u64,
    pub ok: u64,
    pub failed: u64,
    /// Backend Service name -> (ok, failed).
    pub per_backend: BTreeMap<String, (u64, u64)>,
    /// Failures by reason (`REASON_*`).
    pub failed_by_reason: BTreeMap<String, u64>,
}

impl LoadCounts {
    fn record(&mut self, backend: Option<&str>, n: u64, failure: Option<&str>) {
        self.sent += n;
        match failure {
            None => self.ok += n,
            Some(reason) => {
                self.failed += n;
                *self.failed_by_reason.entry(reason.to_owned()).or_default() += n;
            }
        }
        if let Some(b) = backend {
            let (ok, failed) = self.per_backend.entry(b.to_owned()).or_default();
            *(if failure.is_none() { ok } else { failed }) += n;
        }
    }
}

/// The first rule's backends as (Service name, namespace, weight): weight defaults to 1 as in the
/// Gateway API, a negative one counts as 0, the namespace defaults to the route's.
pub fn backends(route: &HTTPRoute, route_ns: &str) -> Vec<(String, String, u64)> {
    let first = route.spec.rules.as_deref().and_then(<[_]>::first);
    let refs = first.and_then(|r| r.backend_refs.as_deref()).unwrap_or(&[]);
    refs.iter()
        .map(|b| {
            let ns = b.namespace.clone().unwrap_or_else(|| route_ns.to_owned());
            let weight = u64::try_from(b.weight.unwrap_or(1)).unwrap_or(0);
            (b.name.clone(), ns, weight)
        })
        .collect()
}

/// The RayCluster behind a per-cluster serve Service: `<cluster>-serve-svc`.
pub fn cluster_of(service: &str) -> Option<&str> {
    service
        .strip_suffix(SERVE_SERVICE_SUFFIX)
        .and_then(|s| s.strip_suffix('-'))
        .filter(|s| !s.is_empty())
}

/// Splits requests by weight so each backend's running total stays within one request of its
/// exact share. Credits are in 1/total-weight requests, so the arithmetic is exact; a change of
/// weights starts the shares afresh.
#[derive(Debug, Default)]
pub struct Splitter {
    weights: Vec<u64>,
    credit: Vec<i128>,
}

impl Splitter {
    /// Requests per backend for `n` requests (all 0 when every weight is 0).
    pub fn split(&mut self, weights: &[u64], n: u64) -> Vec<u64> {
        if self.weights != weights {
            self.weights = weights.to_vec();
            self.credit = vec![0; weights.len()];
        }
        let total: i128 = weights.iter().map(|&w| i128::from(w)).sum();
        if total == 0 {
            return vec![0; weights.len()];
        }
        let n = i128::from(n);
        let mut out: Vec<i128> = Vec::with_capacity(weights.len());
        for (credit, &w) in self.credit.iter_mut().zip(weights) {
            *credit += n * i128::from(w);
            let whole = credit.div_euclid(total);
            *credit -= whole * total;
            out.push(whole);
        }
        // What floors left over goes to the largest credits (first on ties), one each.
        let mut left = n - out.iter().sum::<i128>();
        while left > 0 {
            let (best, _) =
                self.credit.iter().enumerate().fold(
                    (0, i128::MIN),
                    |acc, (i, &c)| if c > acc.1 { (i, c) } else { acc },
                );
            out[best] += 1;
            self.credit[best] -= total;
            left -= 1;
        }
        out.into_iter().map(|v| u64::try_from(v).unwrap_or(0)).collect()
    }
}

/// A running load generator; stops when `stop` is called or it is dropped.
pub struct LoadGen {
    counts: Arc<Mutex<LoadCounts>>,
    cancel: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl LoadGen {
    pub fn spawn(client: kube::Client, sim: Arc<RaySim>, cfg: LoadConfig) -> Arc<LoadGen> {
        let counts = Arc::new(Mutex::new(LoadCounts::default()));
        let cancel = CancellationToken::new();
        let driver = drive(client, sim, cfg, counts.clone());
        let stop = cancel.clone();
        let task = tokio::spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = driver => {}
            }
        });
        Arc::new(LoadGen {
            counts,
            cancel,
            task: Mutex::new(Some(task)),
        })
    }

    pub fn counts(&self) -> LoadCounts {
        lock(&self.counts).clone()
    }

    /// Stops sending; once this returns the counts are final.
    pub async fn stop(&self) {
        self.cancel.cancel();
        let task = lock(&self.task).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl Drop for LoadGen {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// A cluster's dashboard URL, or when it was found missing.
enum Lookup {
    Found(String),
    Missing(Instant),
}

async fn drive(client: kube::Client, sim: Arc<RaySim>, cfg: LoadConfig, counts: Arc<Mutex<LoadCounts>>) {
    let routes = Api::<HTTPRoute>::namespaced(client.clone(), &cfg.namespace);
    let mut route: Vec<(String, String, u64)> = Vec::new();
    let mut refreshed: Option<Instant> = None;
    let mut clusters: HashMap<(String, String), Lookup> = HashMap::new();
    let mut splitter = Splitter::default();
    let start = Instant::now();
    let mut sent = 0u64;
    let rate = cfg.requests_per_second.clamp(0.0, MAX_REQUESTS_PER_SECOND);
    // A zero period would make `interval` panic.
    let mut every = tokio::time::interval(cfg.tick.max(Duration::from_millis(1)));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let now = Instant::now();
        if refreshed.is_none_or(|t| now.duration_since(t) >= cfg.route_refresh) {
            refreshed = Some(now);
            match routes.get_opt(&cfg.route).await {
                Ok(r) => route = r.map(|r| backends(&r, &cfg.namespace)).unwrap_or_default(),
                Err(e) => tracing::debug!(error = %e, "sim load: reading the HTTPRoute failed"),
            }
            // Forget clusters the route no longer names.
            clusters.retain(|(ns, c), _| {
                route
                    .iter()
                    .any(|(svc, bns, _)| bns == ns && cluster_of(svc) == Some(c.as_str()))
            });
        }
        // Due since the start; the epsilon keeps 100/s * 10 ms from flooring to 0.
        let due = (rate * now.duration_since(start).as_secs_f64() + 1e-9).floor();
        let n = (due as u64).saturating_sub(sent);
        if n == 0 {
            continue;
        }
        sent += n;
        let weights: Vec<u64> = route.iter().map(|(_, _, w)| *w).collect();
        let shares = splitter.split(&weights, n);
        if shares.iter().all(|&s| s == 0) {
            lock(&counts).record(None, n, Some(REASON_NO_ROUTE));
            continue;
        }
        for ((svc, ns, _), share) in route.iter().zip(shares) {
            if share == 0 {
                continue;
            }
            let failure = match cluster_of(svc) {
                None => Some(REASON_NO_CLUSTER),
                Some(cluster) => match resolve(&client, &cfg, &mut clusters, ns, cluster, now).await {
                    None => Some(REASON_NO_CLUSTER),
                    Some(url) if sim.running_replicas(&url).values().any(|&r| r > 0) => None,
                    Some(_) => Some(REASON_NO_REPLICA),
                },
            };
            lock(&counts).record(Some(svc), share, failure);
        }
    }
}

/// The dashboard URL of `ns/cluster`, from the cache or the API.
async fn resolve(
    client: &kube::Client,
    cfg: &LoadConfig,
    cache: &mut HashMap<(String, String), Lookup>,
    ns: &str,
    cluster: &str,
    now: Instant,
) -> Option<String> {
    let key = (ns.to_owned(), cluster.to_owned());
    match cache.get(&key) {
        Some(Lookup::Found(url)) => return Some(url.clone()),
        Some(Lookup::Missing(at)) if now.duration_since(*at) < cfg.route_refresh => return None,
        _ => {}
    }
    let found = match Api::<RayCluster>::namespaced(client.clone(), ns)
        .get_opt(cluster)
        .await
    {
        Ok(found) => found,
        Err(e) => {
            tracing::debug!(error = %e, %ns, %cluster, "sim load: reading the RayCluster failed");
            None
        }
    };
    let Some(rc) = found else {
        cache.insert(key, Lookup::Missing(now));
        return None;
    };
    let service = head_service_name(cluster, &rc.spec);
    let url =
        DashboardEndpoint::for_head_service(&service, ns, &cfg.cluster_domain, cfg.dashboard_port).base_url;
    cache.insert(key, Lookup::Found(url.clone()));
    Some(url)
}

#[cfg(test)]
#[path = "loadgen_tests.rs"]
mod tests;
