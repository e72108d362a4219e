//! MultiKueue, the manager side (Kueue's `pkg/controller/admissionchecks/multikueue/`): a Workload
//! whose ClusterQueue names an AdmissionCheck of `kueue.x-k8s.io/multikueue` gets a copy on each
//! connected worker of the check's MultiKueueConfig; the first worker whose copy is admitted wins, the
//! other copies are removed, the job is created on the winner through its kind's
//! [`MultiKueueAdapter`], the check turns `Ready` and the job's status comes back.
//!
//! Three controllers and a collector: [`cluster`] (one connection per MultiKueueCluster, from its
//! kubeconfig, `Active` with the reason while it cannot connect, retried with back-off),
//! [`admission_check`] (the checks' `Active` condition, as Kueue's `ACReconciler`), [`workload`]
//! (dispatch by Kueue's `AllAtOnce` or `Incremental` dispatcher ([`dispatch`]), the winner, status
//! sync, the `workerLostTimeout` requeue of a Workload whose worker is gone) and [`gc`] (every
//! `gcInterval`, the copies this manager left on workers whose Workload is gone are deleted). The job
//! kinds' adapters are handed in by the wiring; the controllers name no kind. The Pod's adapter is
//! here ([`pod`]): it needs nothing of the pod integration but the Pod's labels.
//!
//! Metrics under Kueue's names are in [`metrics`].
//!
//! Not yet here (the list): watches on the workers (remote state is polled: once a second per
//! Workload being dispatched, every two seconds per dispatched one).

pub mod admission_check;
pub mod cluster;
pub mod dispatch;
pub mod explain;
pub mod gc;
pub mod metrics;
pub mod pod;
pub mod workload;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::kueue::AdmissionCheck;
pub use crate::api::kueue::config::Dispatcher;
use crate::api::kueue::config::MultiKueueSettings as ConfigSettings;
use crate::api::kueue::multikueue::MULTIKUEUE_CONTROLLER_NAME;
use crate::jobframework::multikueue::MultiKueueAdapter;

/// Kueue's default `multiKueue.origin`.
pub const DEFAULT_ORIGIN: &str = crate::api::kueue::config::DEFAULT_MULTIKUEUE_ORIGIN;
/// Kueue's `incrementalDispatcherRoundTimeout`: how long the Incremental dispatcher's workers of one
/// round have to admit a copy before the next ones are nominated.
pub const INCREMENTAL_ROUND_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The MultiKueue settings of a manager (Kueue's `multiKueue` configuration).
#[derive(Clone, Debug)]
pub struct Settings {
    /// The namespace whose Secrets hold the workers' kubeconfigs (the one quotagate runs in).
    pub namespace: String,
    /// Kueue's `multiKueue.origin`.
    pub origin: String,
    /// Kueue's `multiKueue.gcInterval` (zero: no garbage collection).
    pub gc_interval: Duration,
    /// Kueue's `multiKueue.workerLostTimeout`.
    pub worker_lost_timeout: Duration,
    /// Kueue's `multiKueue.dispatcherName` (with `incrementalDispatcherConfig.stepSize`).
    pub dispatcher: Dispatcher,
    /// The Incremental dispatcher's round: Kueue's constant 5 minutes; not in the configuration file
    /// (tests shorten it).
    pub round_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        let mut s = Settings {
            namespace: std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "kueue-system".to_string()),
            origin: String::new(),
            gc_interval: Duration::ZERO,
            worker_lost_timeout: Duration::ZERO,
            dispatcher: Dispatcher::AllAtOnce,
            round_timeout: INCREMENTAL_ROUND_TIMEOUT,
        };
        s.apply(&ConfigSettings::default());
        s
    }
}

impl Settings {
    /// Takes the configuration file's `multiKueue` section (Kueue's defaults filled in).
    pub fn apply(&mut self, c: &ConfigSettings) {
        self.origin = c.origin.clone();
        self.gc_interval = c.gc_interval;
        self.worker_lost_timeout = c.worker_lost_timeout;
        self.dispatcher = c.dispatcher;
    }
}

/// How the MultiKueue controllers run.
#[derive(Clone)]
pub struct Options {
    /// The namespace whose Secrets hold the workers' kubeconfigs (the one quotagate runs in).
    pub namespace: String,
    /// The `kueue.x-k8s.io/multikueue-origin` label value on everything this manager creates on workers.
    pub origin: String,
    /// One adapter per job kind dispatched.
    pub adapters: Vec<Arc<dyn MultiKueueAdapter>>,
    /// `gcInterval`, `workerLostTimeout`, the dispatcher (the rest of [`Settings`]).
    pub gc_interval: Duration,
    pub worker_lost_timeout: Duration,
    pub dispatcher: Dispatcher,
    pub round_timeout: Duration,
    /// Where dispatches, admissions on workers, evictions and the workers' status are counted (the
    /// manager serves it on `/metrics`).
    pub metrics: Arc<metrics::Metrics>,
}

/// The connected workers, by MultiKueueCluster name (written by [`cluster`], read by [`workload`]
/// and [`gc`]), and since when each worker that stopped answering has been lost (Kueue's
/// `connectionState.disconnectedSince`: the first failure of a streak, cleared by an answer).
#[derive(Clone, Default)]
pub struct Clusters {
    clients: Arc<RwLock<BTreeMap<String, Client>>>,
    lost: Arc<Mutex<HashMap<String, Instant>>>,
}

impl Clusters {
    pub fn get(&self, name: &str) -> Option<Client> {
        self.clients.read().ok()?.get(name).cloned()
    }
    /// The connected workers.
    pub fn connected(&self) -> Vec<(String, Client)> {
        self.clients
            .read()
            .map(|m| m.iter().map(|(n, c)| (n.clone(), c.clone())).collect())
            .unwrap_or_default()
    }
    fn set(&self, name: &str, client: Option<Client>) {
        if let Ok(mut m) = self.clients.write() {
            match client {
                Some(c) => m.insert(name.to_string(), c),
                None => m.remove(name),
            };
        }
    }
    /// The worker answered.
    pub fn mark_reachable(&self, name: &str) {
        if let Ok(mut l) = self.lost.lock() {
            l.remove(name);
        }
    }
    /// The worker did not answer: the loss is dated from the first failure of the streak.
    pub fn mark_lost(&self, name: &str) {
        if let Ok(mut l) = self.lost.lock() {
            l.entry(name.to_string()).or_insert_with(Instant::now);
        }
    }
    /// Kueue's `admittingWorkerLostSince`: when the worker was first seen lost, or now when that is
    /// not known (a manager that restarted measures the grace from its own start).
    pub fn lost_since(&self, name: &str) -> Instant {
        let now = Instant::now();
        match self.lost.lock() {
            Ok(mut l) => *l.entry(name.to_string()).or_insert(now),
            Err(_) => now,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

impl crate::kit::shell::ReconcileError for Error {
    fn category(&self) -> &'static str {
        "kube"
    }
}

/// Starts the three controllers once an AdmissionCheck of MultiKueue exists (a cluster without one
/// may not even serve the MultiKueue kinds), until `cancel` fires.
pub fn spawn_when_used(
    client: Client,
    opts: Options,
    leader: watch::Receiver<bool>,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let checks = Api::<AdmissionCheck>::all(client.clone());
        let mut seen = watcher(checks, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .filter_map(|r| async move { r.ok() })
            .filter(|ac| std::future::ready(ac.spec.controller_name == MULTIKUEUE_CONTROLLER_NAME))
            .boxed();
        tokio::select! {
            _ = cancel.cancelled() => return,
            first = seen.next() => if first.is_none() { return },
        }
        drop(seen);
        tracing::info!("a MultiKueue admission check exists; starting the MultiKueue controllers");
        let clusters = Clusters::default();
        let leader_gc = leader.clone();
        let ctx = Arc::new(workload::Context {
            client: client.clone(),
            clusters: clusters.clone(),
            origin: opts.origin.clone(),
            adapters: opts.adapters.clone(),
            leader: leader.clone(),
            worker_lost_timeout: opts.worker_lost_timeout,
            dispatcher: dispatch::Nominator::new(opts.dispatcher, opts.round_timeout),
            metrics: opts.metrics.clone(),
        });
        let collector = gc::Collector {
            local: client.clone(),
            clusters: clusters.clone(),
            origin: opts.origin.clone(),
            adapters: opts.adapters.clone(),
        };
        let c = cancel.clone();
        let tasks = [
            tokio::spawn(cluster::run(
                client.clone(),
                opts.namespace.clone(),
                clusters,
                leader.clone(),
                c.clone(),
            )),
            tokio::spawn(admission_check::run(client.clone(), leader, c.clone())),
            tokio::spawn(workload::run(ctx, c.clone())),
            tokio::spawn(gc::run(collector, opts.gc_interval, leader_gc, c.clone())),
            tokio::spawn(metrics::run(client.clone(), opts.metrics.clone(), c)),
        ];
        for t in tasks {
            let _ = t.await;
        }
    })
}
