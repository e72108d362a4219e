//! The queue objects' side of the loop, the work of Kueue's ClusterQueue, LocalQueue, Cohort,
//! ResourceFlavor and AdmissionCheck controllers: their status, the resource-in-use finalizers, and
//! Workload priorities kept up with their WorkloadPriorityClass.

use std::collections::{BTreeSet, HashMap};

use futures::StreamExt;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};

use super::finalizers;
use super::queue_status;
use super::sync::{AdmissionState, Snapshot, key_of};
use super::writer::{now, wl_api};
use crate::admission::metrics::Metrics;
use crate::api::kueue::{ClusterQueue, Cohort, LocalQueue, Workload};

/// One queue object's status write.
type StatusWrite = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Replaces `obj`'s status; a failure is logged and left to the next cycle, which decides the
/// status again from fresh caches.
fn status_write<K>(api: Api<K>, obj: K) -> StatusWrite
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    Box::pin(async move {
        let name = obj.name_any();
        if let Err(e) = api.replace_status(&name, &PostParams::default(), &obj).await {
            let kind = K::kind(&()).into_owned();
            tracing::debug!(%kind, %name, error = %e, "status write failed; will retry");
        }
    })
}

/// What the queue writes use of the loop: its client and metrics.
pub(super) struct Queues<'a> {
    pub(super) client: &'a Client,
    pub(super) metrics: &'a Metrics,
}

impl Queues<'_> {
    /// `gauges`: also recompute the queue gauges (a pass over every workload of the snapshot).
    pub(super) async fn write_queue_status(&self, state: &AdmissionState, snap: &Snapshot, gauges: bool) {
        let t = now();
        let flavors: BTreeSet<String> = snap
            .flavors
            .iter()
            .filter_map(|f| f.metadata.name.clone())
            .collect();
        let mut active: HashMap<String, bool> = HashMap::new();
        let mut cores: HashMap<String, crate::queue::ClusterQueueStatus> = HashMap::new();
        let cq_api: Api<ClusterQueue> = Api::all(self.client.clone());
        // The status writes go out together once decided, bounded as the cycle's workload writes:
        // a thousand queues written one round trip after another held the next cycle for seconds.
        let mut writes: Vec<StatusWrite> = Vec::new();
        let known_checks = super::checks::known_checks(snap.admission_checks.iter().map(|c| c.as_ref()));
        for cq in &snap.cluster_queues {
            let name = cq.name_any();
            let core = state.core.cluster_queue_status(&name);
            let check_problems = super::checks::cluster_queue_problems(cq, &known_checks);
            self.sync_finalizer(
                cq.as_ref(),
                || {
                    core.as_ref().is_some_and(|c| c.reserving_workloads > 0)
                        || finalizers::cluster_queue_in_use(&name, snap.workloads.iter().map(|w| w.as_ref()))
                },
                User::ClusterQueue(&name),
            )
            .await;
            let (ok, ..) = queue_status::cluster_queue_active(
                cq,
                &flavors,
                &check_problems,
                core.as_ref().and_then(|c| c.inactive.as_deref()),
            );
            active.insert(name.clone(), ok);
            if let Some(c) = core.clone() {
                cores.insert(name.clone(), c);
            }
            let share = state.core.cluster_queue_share(&name);
            if let Some(status) =
                queue_status::cluster_queue(cq, core.as_ref(), &flavors, &check_problems, t, share)
            {
                let mut obj = (**cq).clone();
                obj.status = Some(status);
                writes.push(status_write(cq_api.clone(), obj));
            }
        }
        for f in &snap.flavors {
            let name = f.name_any();
            self.sync_finalizer(
                f.as_ref(),
                || finalizers::flavor_in_use(&name, snap.cluster_queues.iter().map(|c| c.as_ref())),
                User::Flavor(&name),
            )
            .await;
        }
        self.write_admission_checks(snap, t).await;
        if gauges {
            super::admission_fair_sharing::report_usage(self.metrics, &state.core);
            super::queue_metrics::report(
                self.metrics,
                super::queue_metrics::gauges(snap, &cores, &active, state, self.metrics.role()),
            );
        }
        let cohort_api: Api<Cohort> = Api::all(self.client.clone());
        for co in &snap.cohorts {
            if let Some(status) = queue_status::cohort(co, state.core.cohort_share(&co.name_any())) {
                let mut obj = (**co).clone();
                obj.status = Some(status);
                writes.push(status_write(cohort_api.clone(), obj));
            }
        }
        // A thousand LocalQueues each looking its ClusterQueue up in a thousand was a million
        // comparisons a cycle.
        let cqs_by_name: HashMap<&str, &ClusterQueue> = snap
            .cluster_queues
            .iter()
            .filter_map(|c| Some((c.metadata.name.as_deref()?, c.as_ref())))
            .collect();
        // Keys borrowed from the snapshot: grouping every workload allocates no key.
        let mut by_lq: HashMap<(&str, &str), Vec<&Workload>> = HashMap::new();
        for wl in &snap.workloads {
            if let Some(q) = wl.spec.queue_name.as_deref().filter(|q| !q.is_empty()) {
                by_lq
                    .entry((wl.metadata.namespace.as_deref().unwrap_or_default(), q))
                    .or_default()
                    .push(wl);
            }
        }
        for lq in &snap.local_queues {
            let ns = lq.namespace().unwrap_or_default();
            let cq_name = lq.spec.cluster_queue();
            let cq = cqs_by_name.get(cq_name).copied();
            let wls = by_lq
                .get(&(ns.as_str(), lq.metadata.name.as_deref().unwrap_or_default()))
                .map(Vec::as_slice)
                .unwrap_or_default();
            let desired =
                queue_status::local_queue(lq, cq, active.get(cq_name).copied().unwrap_or(false), wls, t);
            if let Some(status) = super::admission_fair_sharing::status(lq, desired, &state.core) {
                let api: Api<LocalQueue> = Api::namespaced(self.client.clone(), &ns);
                let mut obj = (**lq).clone();
                obj.status = Some(status);
                writes.push(status_write(api, obj));
            }
        }
        futures::stream::iter(writes)
            .buffer_unordered(super::writer::WRITE_CONCURRENCY)
            .for_each(|()| async {})
            .await;
    }

    /// Brings `spec.priority` of workloads to their WorkloadPriorityClass's current value. A
    /// conflict is left to the next cycle, which sees the fresh workload.
    pub(super) async fn write_priorities(&self, snap: &Snapshot) {
        for (wl, value) in super::priorities::stale(snap) {
            let api = wl_api(self.client, &key_of(wl));
            let patch = serde_json::json!({"metadata": {"resourceVersion": wl.resource_version()}, "spec": {"priority": value}});
            if let Err(e) = api
                .patch(&wl.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                tracing::debug!(workload = %wl.name_any(), error = %e, "priority update failed; will retry");
            }
        }
    }

    /// Kueue's AdmissionCheck controller (the resource-in-use finalizer, held while a ClusterQueue
    /// names the check), and the built-in check's controller marking its checks Active.
    async fn write_admission_checks(&self, snap: &Snapshot, t: jiff::Timestamp) {
        let api: Api<crate::api::kueue::AdmissionCheck> = Api::all(self.client.clone());
        for ac in &snap.admission_checks {
            let name = ac.name_any();
            self.sync_finalizer(
                ac.as_ref(),
                || {
                    snap.cluster_queues
                        .iter()
                        .any(|cq| super::checks::cluster_queue_checks(cq).contains_key(&name))
                },
                User::AdmissionCheck(&name),
            )
            .await;
            if ac.spec.controller_name != crate::api::kueue::admission_check::AUTO_READY_CONTROLLER
                || ac.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            if let Some(status) = super::checks::auto_ready_active(ac, t) {
                let mut obj = (**ac).clone();
                obj.status = Some(status);
                if let Err(e) = api.replace_status(&name, &PostParams::default(), &obj).await {
                    tracing::debug!(admission_check = %name, error = %e, "status write failed; will retry");
                }
            }
        }
    }

    /// Adds Kueue's resource-in-use finalizer to a live ClusterQueue, ResourceFlavor or
    /// AdmissionCheck, and releases a deleted one's once nothing uses it: `in_use` asks the caches,
    /// and a release is confirmed against the API server first. The caches are one store per kind,
    /// so the store that saw a flavor's deletion can be ahead of the one that has not yet seen the
    /// ClusterQueue naming it; a release is final, so it waits for a read that cannot lag.
    async fn sync_finalizer<K>(&self, obj: &K, in_use: impl FnOnce() -> bool, user: User<'_>)
    where
        K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let meta = obj.meta();
        let in_use = meta.deletion_timestamp.is_some() && in_use();
        let Some(change) = finalizers::decide(meta, in_use) else {
            return;
        };
        if change == finalizers::Change::Remove {
            match in_use_live(self.client, user).await {
                Ok(false) => {}
                Ok(true) => return,
                Err(e) => {
                    tracing::debug!(kind = %K::kind(&()), name = %obj.name_any(), error = %e, "in-use check failed; will retry");
                    return;
                }
            }
        }
        let kept = finalizers::apply(meta, change);
        let patch =
            serde_json::json!({"metadata": {"finalizers": kept, "resourceVersion": obj.resource_version()}});
        let api: Api<K> = Api::all(self.client.clone());
        if let Err(e) = api
            .patch(&obj.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::debug!(kind = %K::kind(&()), name = %obj.name_any(), error = %e, "finalizer update failed; will retry");
        }
    }
}

/// Whether `user` is still in use, read from the API server rather than the caches.
pub(crate) async fn in_use_live(client: &Client, user: User<'_>) -> Result<bool, kube::Error> {
    let list = kube::api::ListParams::default();
    Ok(match user {
        User::ClusterQueue(name) => {
            let wls = Api::<Workload>::all(client.clone()).list(&list).await?;
            finalizers::cluster_queue_in_use(name, wls.items.iter())
        }
        User::Flavor(name) => {
            let cqs = Api::<ClusterQueue>::all(client.clone()).list(&list).await?;
            finalizers::flavor_in_use(name, cqs.items.iter())
        }
        User::AdmissionCheck(name) => {
            let cqs = Api::<ClusterQueue>::all(client.clone()).list(&list).await?;
            cqs.items
                .iter()
                .any(|cq| super::checks::cluster_queue_checks(cq).contains_key(name))
        }
    })
}

/// What a resource-in-use finalizer guards, by name: the users to look for before releasing it.
#[derive(Clone, Copy)]
pub(crate) enum User<'a> {
    /// Workloads holding quota in this ClusterQueue.
    ClusterQueue(&'a str),
    /// ClusterQueues referencing this ResourceFlavor.
    Flavor(&'a str),
    /// ClusterQueues naming this AdmissionCheck.
    AdmissionCheck(&'a str),
}
