//! Garbage collection of the copies a manager left on its workers (Kueue's `clustersReconciler.runGC`
//! and `remoteClient.runGC`): every `gcInterval`, on each connected worker, the Workloads labelled
//! with this manager's origin whose Workload on the manager is gone or being deleted are removed,
//! with their job (through its kind's adapter, only when this manager created it). A copy another
//! manager made (another origin) is never touched. A zero interval turns the collector off.
//!
//! The job is the copy's controller owner, as in Kueue. A pod group's Workload has no controller: the
//! worker's pod integration makes each Pod of the group an owner. For such a copy every owner of an
//! adapted kind is removed through its adapter, so an orphaned group's Pods go with their Workload.
//! Kueue's collector stops at the controller (its Pod adapter's `DeleteRemoteObject` finds a group's
//! copies from the manager's Pods, which are gone for an orphan); there the Pods go only when the
//! worker's own pod integration stops Pods whose Workload is gone, as quotagate's worker also does.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ApiResource, DynamicObject, ListParams};
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
            let jobs = jobs_of(&copy, &self.adapters);
            if jobs.is_empty()
                && let Some(o) = copy
                    .owner_references()
                    .iter()
                    .find(|o| o.controller == Some(true))
            {
                tracing::info!(workload = %copy.name_any(), kind = %o.kind, "MultiKueue GC: no adapter for the copy's owner");
            }
            for (i, (adapter, owner)) in jobs.iter().enumerate() {
                let key = JobKey {
                    namespace: ns.clone(),
                    name: owner.name.clone(),
                };
                // A group's later members: one already going went with the group.
                if i > 0 && !live(remote, adapter.as_ref(), &key).await? {
                    continue;
                }
                adapter.delete_remote_object(remote, &key, &self.origin).await?;
            }
            tracing::info!(namespace = %ns, workload = %copy.name_any(), "MultiKueue GC: removing an orphaned copy");
            super::workload::delete_remote_workload(remote, &copy).await?;
            removed += 1;
        }
        Ok(removed)
    }
}

fn api_version(adapter: &dyn MultiKueueAdapter) -> String {
    let g = adapter.gvk();
    if g.group.is_empty() {
        g.version
    } else {
        format!("{}/{}", g.group, g.version)
    }
}

/// The jobs an orphaned copy takes with it, each with its kind's adapter: its controller owner
/// (Kueue's `runGC`); for a copy without one (a pod group's Workload, owned by each of its Pods),
/// every owner of an adapted kind. Owners of other kinds are left alone.
pub fn jobs_of<'a>(
    copy: &'a Workload,
    adapters: &'a [Arc<dyn MultiKueueAdapter>],
) -> Vec<(&'a Arc<dyn MultiKueueAdapter>, &'a OwnerReference)> {
    let owners = copy.owner_references();
    let controller = owners.iter().find(|o| o.controller == Some(true));
    let candidates: Vec<&OwnerReference> = match controller {
        Some(c) => vec![c],
        None => owners.iter().collect(),
    };
    candidates
        .into_iter()
        .filter_map(|o| {
            let a = adapters
                .iter()
                .find(|a| api_version(a.as_ref()) == o.api_version && a.gvk().kind == o.kind)?;
            Some((a, o))
        })
        .collect()
}

/// The job `key` of the adapter's kind exists on the worker and is not being deleted.
async fn live(remote: &Client, adapter: &dyn MultiKueueAdapter, key: &JobKey) -> Result<bool, Error> {
    let ar = ApiResource::from_gvk(&adapter.gvk());
    let api = Api::<DynamicObject>::namespaced_with(remote.clone(), &key.namespace, &ar);
    Ok(api
        .get_opt(&key.name)
        .await?
        .is_some_and(|o| o.metadata.deletion_timestamp.is_none()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multikueue::pod::PodAdapter;

    fn copy(owners: serde_json::Value) -> Workload {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "grp", "namespace": "ns", "ownerReferences": owners},
            "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]}
        }))
        .unwrap()
    }

    fn owner(api_version: &str, kind: &str, name: &str, controller: bool) -> serde_json::Value {
        serde_json::json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": name,
            "controller": controller})
    }

    fn names(jobs: &[(&Arc<dyn MultiKueueAdapter>, &OwnerReference)]) -> Vec<String> {
        jobs.iter().map(|(_, o)| o.name.clone()).collect()
    }

    /// Kueue's `runGC` (multikueuecluster.go): the copy's controller is the job removed with it; a
    /// single Pod's copy is controlled by its Pod on the worker.
    #[test]
    fn a_controlled_copy_takes_its_controller_only() {
        let adapters: Vec<Arc<dyn MultiKueueAdapter>> = vec![Arc::new(PodAdapter)];
        let c = copy(serde_json::json!([
            owner("v1", "Pod", "other", false),
            owner("v1", "Pod", "p", true)
        ]));
        assert_eq!(names(&jobs_of(&c, &adapters)), ["p"]);
        let job = copy(serde_json::json!([owner("batch/v1", "Job", "j", true)]));
        assert!(
            jobs_of(&job, &adapters).is_empty(),
            "a controller of a kind without an adapter is left alone"
        );
    }

    /// A pod group's copy has every Pod as an owner and no controller: all of them go (Kueue leaves
    /// them behind); an owner of a kind without an adapter does not.
    #[test]
    fn a_group_copy_takes_every_pod_that_owns_it() {
        let adapters: Vec<Arc<dyn MultiKueueAdapter>> = vec![Arc::new(PodAdapter)];
        let c = copy(serde_json::json!([
            owner("v1", "Pod", "grp-a", false),
            owner("v1", "Pod", "grp-b", false),
            owner("v1", "ConfigMap", "cm", false),
            owner("apps/v1", "Pod", "not-core", false)
        ]));
        assert_eq!(names(&jobs_of(&c, &adapters)), ["grp-a", "grp-b"]);
        assert!(jobs_of(&copy(serde_json::json!([])), &adapters).is_empty());
    }
}
