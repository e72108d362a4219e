//! MultiKueue, the manager side (Kueue's `pkg/controller/admissionchecks/multikueue/`): a Workload
//! whose ClusterQueue names an AdmissionCheck of `kueue.x-k8s.io/multikueue` gets a copy on each
//! connected worker of the check's MultiKueueConfig; the first worker whose copy is admitted wins, the
//! other copies are removed, the job is created on the winner through its kind's
//! [`MultiKueueAdapter`], the check turns `Ready` and the job's status comes back.
//!
//! Three controllers: [`cluster`] (one connection per MultiKueueCluster, from its kubeconfig, `Active`
//! with the reason while it cannot connect, retried with back-off), [`admission_check`] (the checks'
//! `Active` condition, as Kueue's `ACReconciler`) and [`workload`] (dispatch, the winner, status sync;
//! Kueue's `AllAtOnce` dispatcher). The job kinds' adapters are handed in by the wiring: this module
//! names no kind.
//!
//! Not yet here (the list): the `Incremental` dispatcher, `workerLostTimeout` requeue of a lost
//! winner, garbage collection of orphans (`gcInterval`), watches on the workers (remote state is polled:
//! once a second per Workload being dispatched, every two seconds per dispatched one), metrics.

pub mod admission_check;
pub mod cluster;
pub mod workload;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::kueue::AdmissionCheck;
use crate::api::kueue::multikueue::MULTIKUEUE_CONTROLLER_NAME;
use crate::jobframework::multikueue::MultiKueueAdapter;

/// Kueue's default `multiKueue.origin`.
pub const DEFAULT_ORIGIN: &str = "multikueue";

/// The MultiKueue settings of a manager (Kueue's `multiKueue` configuration).
#[derive(Clone, Debug)]
pub struct Settings {
    /// The namespace whose Secrets hold the workers' kubeconfigs (the one quotagate runs in).
    pub namespace: String,
    /// Kueue's `multiKueue.origin`.
    pub origin: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            namespace: std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "kueue-system".to_string()),
            origin: DEFAULT_ORIGIN.to_string(),
        }
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
}

/// The connected workers, by MultiKueueCluster name (written by [`cluster`], read by [`workload`]).
#[derive(Clone, Default)]
pub struct Clusters(Arc<RwLock<BTreeMap<String, Client>>>);

impl Clusters {
    pub fn get(&self, name: &str) -> Option<Client> {
        self.0.read().ok()?.get(name).cloned()
    }
    fn set(&self, name: &str, client: Option<Client>) {
        if let Ok(mut m) = self.0.write() {
            match client {
                Some(c) => m.insert(name.to_string(), c),
                None => m.remove(name),
            };
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
        let ctx = Arc::new(workload::Context {
            client: client.clone(),
            clusters: clusters.clone(),
            origin: opts.origin.clone(),
            adapters: opts.adapters.clone(),
            leader: leader.clone(),
        });
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
            tokio::spawn(workload::run(ctx, c)),
        ];
        for t in tasks {
            let _ = t.await;
        }
    })
}
