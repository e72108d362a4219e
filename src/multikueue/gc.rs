//! Garbage collection of the copies a manager left on its workers (Kueue's `clustersReconciler.runGC`
//! and `remoteClient.runGC`): every `gcInterval`, on each connected worker, the Workloads labelled
//! with this manager's origin whose Workload on the manager is gone or being deleted are removed,
//! with their job (through its kind's adapter, only when this manager created it). A copy another
//! manager made (another origin) is never touched. A zero interval turns the collector off.

use std::sync::Arc;
use std::time::Duration;

use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Clusters, Error};
use crate::api::kueue::Workload;
use crate::api::kueue::multikueue::ORIGIN_LABEL;
use crate::jobframework::multikueue::{JobKey, MultiKueueAdapter};

pub struct Collector {
    /// The manager.
    pub local: Client,
    pub clusters: Clusters,
    pub origin: String,
    pub adapters: Vec<Arc<dyn MultiKueueAdapter>>,
}

impl Collector {
    /// One pass over every connected worker; returns how many copies were removed.
    pub async fn run_once(&self) -> usize {
        let mut removed = 0;
        for (name, remote) in self.clusters.connected() {
            match self.collect(&name, &remote).await {
                Ok(n) => removed += n,
                Err(e) => tracing::info!(cluster = %name, error = %e, "MultiKueue garbage collection failed"),
            }
        }
        removed
    }

    async fn collect(&self, name: &str, remote: &Client) -> Result<usize, Error> {
        let lp = ListParams::default().labels(&format!("{ORIGIN_LABEL}={}", self.origin));
        let copies = Api::<Workload>::all(remote.clone()).list(&lp).await?.items;
        let mut removed = 0;
        for copy in copies {
            let ns = copy.namespace().unwrap_or_default();
            let local = Api::<Workload>::namespaced(self.local.clone(), &ns)
                .get_opt(&copy.name_any())
                .await?;
            if local.is_some_and(|l| l.metadata.deletion_timestamp.is_none()) {
                continue;
            }
            // A worker that dropped during the pass is left alone until it is connected again.
            if self.clusters.get(name).is_none() {
                break;
            }
            // The copy's job (its controller on the worker), if this manager created it.
            let owner = copy
                .owner_references()
                .iter()
                .find(|o| o.controller == Some(true));
            if let Some(o) = owner {
                let adapter = self.adapters.iter().find(|a| {
                    let g = a.gvk();
                    let av = if g.group.is_empty() {
                        g.version.clone()
                    } else {
                        format!("{}/{}", g.group, g.version)
                    };
                    av == o.api_version && g.kind == o.kind
                });
                match adapter {
                    Some(a) => {
                        let key = JobKey {
                            namespace: ns.clone(),
                            name: o.name.clone(),
                        };
                        a.delete_remote_object(remote, &key, &self.origin).await?;
                    }
                    None => {
                        tracing::info!(workload = %copy.name_any(), kind = %o.kind, "MultiKueue GC: no adapter for the copy's owner")
                    }
                }
            }
            tracing::info!(namespace = %ns, workload = %copy.name_any(), "MultiKueue GC: removing an orphaned copy");
            super::workload::delete_remote_workload(remote, &copy).await?;
            removed += 1;
        }
        Ok(removed)
    }
}

/// Runs the collector every `interval` (none when zero) while leading, until `cancel` fires.
pub async fn run(
    collector: Collector,
    interval: Duration,
    leader: watch::Receiver<bool>,
    cancel: CancellationToken,
) {
    if interval.is_zero() {
        tracing::info!("MultiKueue garbage collection is disabled (gcInterval 0)");
        return;
    }
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        if *leader.borrow() {
            let n = collector.run_once().await;
            if n > 0 {
                tracing::info!(removed = n, "MultiKueue garbage collection");
            }
        }
    }
}
