//! The MultiKueue adapters of RayCluster, RayJob and RayService (Kueue's
//! `pkg/controller/jobs/ray/ray_multikueue_adapter.go`, with `raycluster/`, `rayjob/` and
//! `rayservice/..._multikueue_adapter.go` choosing what each kind copies): a Ray object with
//! `spec.managedBy: kueue.x-k8s.io/multikueue` is copied to the worker that won its Workload (metadata
//! for creation, the whole spec, `managedBy` cleared so the worker's operator runs it, the origin and
//! prebuilt-workload labels), and the copy's whole status is brought back onto the manager's object.
//!
//! Beyond Kueue, for RayService: Kueue's `MultiKueueRemoteSpecSync` forwards only `serveConfigV2`; here
//! a change of `rayClusterConfig` or `upgradeStrategy` on the manager reaches the worker's copy too,
//! so the worker's own quotagate runs the quota-gated upgrade against the worker's ClusterQueue, and
//! the manager's RayService shows the worker's upgrade (its pending cluster and gate) through the
//! mirrored status.

use std::fmt::Debug;
use std::marker::PhantomData;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::object::{HasSpec, HasStatus};
use kube::core::{GroupVersionKind, NamespaceResourceScope};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::conditions;
use crate::api::kueue::multikueue::MANAGED_BY;
use crate::api::ray::constants as rc;
use crate::api::ray::raycluster::{ClusterState, RayClusterStatus};
use crate::api::ray::rayjob::{JobDeploymentStatus, RayJobStatus};
use crate::api::ray::rayservice::RayServiceStatuses;
use crate::api::ray::{RayCluster, RayJob, RayService};
use crate::jobframework::multikueue::{
    JobKey, MultiKueueAdapter, clone_meta_for_creation, delete_remote_job, set_multikueue_meta,
};

/// What differs between the Ray kinds for MultiKueue (Kueue's `NewMKAdapter` arguments).
pub trait RayMultiKueueKind:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + HasSpec
    + HasStatus<Status: PartialEq + Serialize + Clone>
    + Clone
    + Serialize
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
    /// The kind's `spec.managedBy`.
    fn managed_by(&self) -> Option<&str>;
    /// Kueue's `setManagedBy(job, nil)`: the worker's operator takes the copy over.
    fn clear_managed_by(&mut self);
    /// How the manager's object takes the copy's status: `update` for RayJobs, `patch` for the
    /// others (what the shipped Role grants each kind's status for its own controllers).
    const STATUS_BY_UPDATE: bool;
    /// Kueue's `RemoteSpecSyncer`: the JSON Patch operations that bring the spec fields the manager
    /// forwards after creation onto the worker's copy; empty when they agree (or the kind forwards
    /// none: Kueue's RayJob and RayCluster are created once).
    fn spec_sync(_remote: &Self, _local: &Self) -> Vec<Value> {
        Vec::new()
    }
    /// The status the manager's object takes once it is suspended and its copies are gone (its
    /// Workload evicted on the manager): what the worker's operator reports for a copy it suspended,
    /// which is what Kueue mirrors back (it deactivates the copy's Workload, `EvictedOnManagerCluster`,
    /// the worker suspends the copy, and `SyncJob` copies that status). Here the copy is deleted
    /// instead, so the manager writes it. `None` while not suspended, or when it says so already.
    fn released_status(&self, now: jiff::Timestamp) -> Option<<Self as HasStatus>::Status>;
}

impl RayMultiKueueKind for RayCluster {
    fn managed_by(&self) -> Option<&str> {
        self.spec.managed_by.as_deref()
    }
    fn clear_managed_by(&mut self) {
        self.spec.managed_by = None;
    }
    const STATUS_BY_UPDATE: bool = false;

    /// The RayCluster controller's suspended status (`state: suspended`, `RayClusterSuspended=True`,
    /// no head, no ready worker), observed at this object's generation, so the manager's job
    /// controller sees the suspension acknowledged and gives the quota back (Kueue: `IsActive` is
    /// `state == ready`).
    fn released_status(&self, now: jiff::Timestamp) -> Option<RayClusterStatus> {
        if !self.spec.is_suspended() {
            return None;
        }
        let old = self.status.as_ref()?;
        let mut s = old.clone();
        let g = self.metadata.generation;
        let mut conds = s.conditions.take().unwrap_or_default();
        for (type_, status, reason, message) in [
            (
                rc::COND_RAY_CLUSTER_SUSPENDING,
                false,
                "RayClusterSuspending",
                RELEASED,
            ),
            (
                rc::COND_RAY_CLUSTER_SUSPENDED,
                true,
                "RayClusterSuspended",
                RELEASED,
            ),
            (
                rc::COND_RAY_CLUSTER_PROVISIONED,
                false,
                rc::REASON_RAY_CLUSTER_PODS_PROVISIONING,
                "RayCluster has been suspended",
            ),
            (
                rc::COND_HEAD_POD_READY,
                false,
                rc::REASON_HEAD_POD_NOT_FOUND,
                "no head pod: the cluster is suspended",
            ),
        ] {
            conditions::set(
                &mut conds,
                conditions::new(type_, status, reason, message, g, now),
            );
        }
        s.conditions = Some(conds);
        if s.state != Some(ClusterState::Suspended) {
            s.state = Some(ClusterState::Suspended);
            s.state_transition_times
                .get_or_insert_with(Default::default)
                .insert(ClusterState::Suspended, Time(now));
        }
        s.ready_worker_replicas = Some(0);
        s.available_worker_replicas = Some(0);
        if let Some(h) = s.head.as_mut() {
            h.pod_ip = None;
            h.pod_name = None;
        }
        s.observed_generation = g;
        (s != *old).then_some(s)
    }
}

/// What the manager's released status says happened to the copy.
const RELEASED: &str = "all pods are deleted: the copy on the worker is removed";

impl RayMultiKueueKind for RayJob {
    fn managed_by(&self) -> Option<&str> {
        self.spec.managed_by.as_deref()
    }
    fn clear_managed_by(&mut self) {
        self.spec.managed_by = None;
    }
    const STATUS_BY_UPDATE: bool = true;

    /// KubeRay's suspended RayJob: `jobDeploymentStatus: Suspended` and the run's fields cleared
    /// (its cluster, job id, dashboard, job status, message). A finished job keeps its outcome
    /// (KubeRay suspends no finished job), and one never started has nothing to release.
    fn released_status(&self, _now: jiff::Timestamp) -> Option<RayJobStatus> {
        if !self.spec.is_suspended() {
            return None;
        }
        let old = self.status.as_ref()?;
        match old.job_deployment_status {
            None | Some(JobDeploymentStatus::Suspended) => return None,
            Some(d) if d.is_terminal() => return None,
            Some(_) => {}
        }
        Some(RayJobStatus {
            job_deployment_status: Some(JobDeploymentStatus::Suspended),
            ray_cluster_status: None,
            ray_cluster_name: None,
            dashboard_url: None,
            job_id: None,
            message: None,
            reason: None,
            ray_job_info: None,
            job_status: None,
            ..old.clone()
        })
    }
}

impl RayMultiKueueKind for RayService {
    fn managed_by(&self) -> Option<&str> {
        self.spec.managed_by.as_deref()
    }
    fn clear_managed_by(&mut self) {
        self.spec.managed_by = None;
    }
    const STATUS_BY_UPDATE: bool = false;

    /// Kueue forwards `serveConfigV2` (an in-place Serve update); quotagate also forwards
    /// `rayClusterConfig` and `upgradeStrategy`, so a cluster change upgrades the worker's service,
    /// gated by the worker's quota.
    fn spec_sync(remote: &Self, local: &Self) -> Vec<Value> {
        let (r, l) = (&remote.spec, &local.spec);
        let mut ops = Vec::new();
        field_op(&mut ops, "serveConfigV2", &r.serve_config_v2, &l.serve_config_v2);
        field_op(
            &mut ops,
            "upgradeStrategy",
            &r.upgrade_strategy,
            &l.upgrade_strategy,
        );
        if r.ray_cluster_config != l.ray_cluster_config {
            ops.push(json!({"op": "add", "path": "/spec/rayClusterConfig", "value": l.ray_cluster_config}));
        }
        ops
    }

    /// The RayService controller's status at `SuspendComplete`: no active or pending cluster, no
    /// serve endpoint, `Suspended=True`, and `Ready`, `UpgradeInProgress`, `RollbackInProgress`
    /// False, so the manager no longer shows the worker's service as serving.
    fn released_status(&self, now: jiff::Timestamp) -> Option<RayServiceStatuses> {
        if !self.spec.is_suspended() {
            return None;
        }
        let old = self.status.as_ref()?;
        let mut s = old.clone();
        let g = self.metadata.generation;
        let all_deleted = "All owned resources have been deleted.";
        let mut conds = s.conditions.take().unwrap_or_default();
        for (type_, status, message) in [
            (rc::COND_SUSPENDING, false, all_deleted),
            (rc::COND_SUSPENDED, true, all_deleted),
            (rc::COND_READY, false, "RayService is suspended."),
            (rc::COND_UPGRADE_IN_PROGRESS, false, "No upgrade in progress."),
            (rc::COND_ROLLBACK_IN_PROGRESS, false, "No rollback in progress."),
        ] {
            let c = conditions::new(type_, status, rc::REASON_SUSPEND_COMPLETE, message, g, now);
            conditions::set(&mut conds, c);
        }
        s.conditions = Some(conds);
        s.active_service_status = None;
        s.pending_service_status = None;
        s.num_serve_endpoints = Some(0);
        s.observed_generation = g;
        (s != *old).then_some(s)
    }
}

/// A RayService dispatched through MultiKueue keeps the manager's Workload it was admitted with
/// while that holds quota, whatever its spec asks for afterwards: a changed `rayClusterConfig` is
/// forwarded to the copy (see `spec_sync`), and the worker's quotagate runs the upgrade as slices of
/// the copy's Workload against the worker's own ClusterQueue, gated there. On the manager no cluster
/// runs, so its demand would be the spec's alone, and new requests a replacement slice: a Workload
/// MultiKueue would dispatch on its own (to any worker) while removing the copies of the one it
/// replaced, the serving copy among them. Kueue builds a RayService's podsets from its spec too and
/// there a changed podset is a new Workload (the job stopped, its copy removed, dispatched again):
/// the serving gap the forwarded upgrade exists to avoid.
pub fn worker_accounts_changes(rs: &RayService) -> bool {
    rs.spec.managed_by.as_deref() == Some(MANAGED_BY)
}

/// The operation that makes the optional spec field `name` of the remote equal the local one.
fn field_op<T: PartialEq + Serialize>(
    ops: &mut Vec<Value>,
    name: &str,
    remote: &Option<T>,
    local: &Option<T>,
) {
    if remote == local {
        return;
    }
    let path = format!("/spec/{name}");
    ops.push(match local {
        Some(v) => json!({"op": "add", "path": path, "value": v}),
        None => json!({"op": "remove", "path": path}),
    });
}

/// Kueue's `copyJobSpec` plus `SetMultiKueueMeta` and `setManagedBy(nil)`: the worker's copy.
pub fn remote_copy<K: RayMultiKueueKind>(local: &K, workload_name: &str, origin: &str) -> K {
    let mut copy = local.clone();
    *copy.meta_mut() = clone_meta_for_creation(local.meta());
    set_multikueue_meta(copy.meta_mut(), workload_name, origin);
    copy.clear_managed_by();
    *copy.status_mut() = None;
    copy
}

/// Kueue's `copyJobStatus` (the whole status): the JSON Patch that puts the copy's status on the
/// manager's object, `None` when they agree already.
pub fn status_patch<K: RayMultiKueueKind>(local: &K, remote: &K) -> Option<Value> {
    if local.status() == remote.status() {
        return None;
    }
    Some(match remote.status() {
        Some(s) => json!([{"op": "add", "path": "/status", "value": s}]),
        None => json!([{"op": "remove", "path": "/status"}]),
    })
}

fn json_patch(ops: Value) -> Result<Patch<()>, kube::Error> {
    serde_json::from_value::<json_patch::Patch>(ops)
        .map(Patch::Json)
        .map_err(kube::Error::SerdeError)
}

/// The MultiKueue adapter of one Ray kind.
pub struct RayAdapter<K>(PhantomData<fn() -> K>);

impl<K> Default for RayAdapter<K> {
    fn default() -> Self {
        RayAdapter(PhantomData)
    }
}

impl<K: RayMultiKueueKind> RayAdapter<K> {
    /// Brings the copy's status onto the manager's object.
    async fn copy_status(locals: &Api<K>, local: &K, remote: &K) -> Result<(), kube::Error> {
        let Some(ops) = status_patch(local, remote) else {
            return Ok(());
        };
        let name = local.meta().name.clone().unwrap_or_default();
        if K::STATUS_BY_UPDATE {
            let mut fresh = local.clone();
            *fresh.status_mut() = remote.status().cloned();
            locals
                .replace_status(&name, &PostParams::default(), &fresh)
                .await?;
        } else {
            locals
                .patch_status(&name, &PatchParams::default(), &json_patch(ops)?)
                .await?;
        }
        Ok(())
    }
}

impl<K: RayMultiKueueKind> MultiKueueAdapter for RayAdapter<K> {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk(&K::group(&()), &K::version(&()), &K::kind(&()))
    }

    fn unmanaged_reason<'a>(
        &'a self,
        local: &'a Client,
        key: &'a JobKey,
    ) -> BoxFuture<'a, Result<Option<String>, kube::Error>> {
        async move {
            let job = Api::<K>::namespaced(local.clone(), &key.namespace)
                .get(&key.name)
                .await?;
            let by = job.managed_by().unwrap_or_default();
            Ok((by != MANAGED_BY)
                .then(|| format!("Expecting spec.managedBy to be {MANAGED_BY:?} not {by:?}")))
        }
        .boxed()
    }

    /// Kueue's `SyncJob`: the status back when the copy exists (and, for a RayService, the forwarded
    /// spec fields out), else the copy created.
    fn sync_job<'a>(
        &'a self,
        local: &'a Client,
        remote: &'a Client,
        key: &'a JobKey,
        workload_name: &'a str,
        origin: &'a str,
    ) -> BoxFuture<'a, Result<bool, kube::Error>> {
        async move {
            let locals = Api::<K>::namespaced(local.clone(), &key.namespace);
            let remotes = Api::<K>::namespaced(remote.clone(), &key.namespace);
            let local_job = locals.get(&key.name).await?;
            let Some(remote_job) = remotes.get_opt(&key.name).await? else {
                let copy = remote_copy(&local_job, workload_name, origin);
                remotes.create(&PostParams::default(), &copy).await?;
                return Ok(false);
            };
            Self::copy_status(&locals, &local_job, &remote_job).await?;
            let mut ops = K::spec_sync(&remote_job, &local_job);
            if !ops.is_empty() {
                // Only onto the copy that was read: a concurrent change is read again next pass.
                let rv = remote_job.meta().resource_version.clone().unwrap_or_default();
                ops.insert(
                    0,
                    json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}),
                );
                remotes
                    .patch(
                        &key.name,
                        &PatchParams::default(),
                        &json_patch(Value::Array(ops))?,
                    )
                    .await?;
                tracing::info!(job = %key.name, "forwarded the spec change to the worker");
            }
            Ok(false)
        }
        .boxed()
    }

    /// Kueue's `DeleteRemoteObject`, guarded as `DeleteRemoteObjectIfOwned`: only a copy this manager
    /// made is deleted (in the background: its children go with it).
    fn delete_remote_object<'a>(
        &'a self,
        remote: &'a Client,
        key: &'a JobKey,
        origin: &'a str,
    ) -> BoxFuture<'a, Result<(), kube::Error>> {
        delete_remote_job::<K>(remote, key, origin).boxed()
    }

    /// The manager's object, suspended with its copies gone, takes the status its suspended copy
    /// would have shown (see [`RayMultiKueueKind::released_status`]).
    fn release_local<'a>(
        &'a self,
        local: &'a Client,
        key: &'a JobKey,
    ) -> BoxFuture<'a, Result<(), kube::Error>> {
        async move {
            let locals = Api::<K>::namespaced(local.clone(), &key.namespace);
            let Some(job) = locals.get_opt(&key.name).await? else {
                return Ok(());
            };
            let Some(status) = job.released_status(jiff::Timestamp::now()) else {
                return Ok(());
            };
            let mut released = job.clone();
            *released.status_mut() = Some(status);
            Self::copy_status(&locals, &job, &released).await?;
            tracing::info!(job = %key.name, kind = %K::kind(&()), "released: the copy's suspended status is shown");
            Ok(())
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::kueue::multikueue::ORIGIN_LABEL;

    fn rs(v: Value) -> RayService {
        serde_json::from_value(v).unwrap()
    }

    fn service(version: &str, serve: &str) -> RayService {
        rs(json!({
            "apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": "s", "namespace": "ns", "uid": "u", "resourceVersion": "9", "generation": 2,
                "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "x"}]},
            "spec": {"managedBy": MANAGED_BY, "suspend": true, "serveConfigV2": serve,
                "rayClusterConfig": {"rayVersion": version, "headGroupSpec": {"rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "h", "image": format!("ray:{version}")}]}}}}},
            "status": {"serviceStatus": "Running"}
        }))
    }

    /// Kueue `rayservice_multikueue_adapter_test.go` "missing job is created": the copy has the
    /// manager's spec, no managedBy, the origin and prebuilt-workload labels, no status, and only the
    /// metadata `CloneObjectMetaForCreation` keeps.
    #[test]
    fn the_copy_is_the_spec_without_managed_by_with_the_labels() {
        let local = service("2.46.0", "a");
        let copy = remote_copy(&local, "wl1", "origin1");
        assert_eq!(copy.spec.managed_by, None);
        assert_eq!(copy.spec.ray_cluster_config, local.spec.ray_cluster_config);
        assert_eq!(copy.spec.suspend, Some(true));
        assert_eq!(copy.status, None);
        assert_eq!(copy.metadata.uid, None);
        assert_eq!(copy.metadata.resource_version, None);
        assert_eq!(copy.metadata.owner_references, None);
        let labels = copy.metadata.labels.unwrap();
        assert_eq!(labels[ORIGIN_LABEL], "origin1");
        assert_eq!(labels["kueue.x-k8s.io/prebuilt-workload-name"], "wl1");
        assert_eq!(labels["kueue.x-k8s.io/queue-name"], "lq");
    }

    /// Kueue "remote status is copied": the whole status, and nothing written when they agree.
    #[test]
    fn the_status_is_copied_whole_and_only_when_it_differs() {
        let local = service("2.46.0", "a");
        let mut remote = local.clone();
        assert_eq!(status_patch(&local, &remote), None);
        remote.status = Some(
            serde_json::from_value(json!({"serviceStatus": "Running", "numServeEndpoints": 2})).unwrap(),
        );
        let ops = status_patch(&local, &remote).unwrap();
        assert_eq!(ops[0]["op"], "add");
        assert_eq!(ops[0]["value"]["numServeEndpoints"], 2);
        remote.status = None;
        assert_eq!(status_patch(&local, &remote).unwrap()[0]["op"], "remove");
    }

    /// Kueue's `remoteSpecSyncer` for RayService forwards `serveConfigV2`; quotagate forwards
    /// `rayClusterConfig` and `upgradeStrategy` as well, and nothing else (managedBy stays cleared,
    /// suspend stays the worker's).
    #[test]
    fn a_rayservice_forwards_serve_config_cluster_config_and_upgrade_strategy() {
        let remote = remote_copy(&service("2.46.0", "a"), "wl", "o");
        assert!(RayService::spec_sync(&remote, &remote_copy(&service("2.46.0", "a"), "wl", "o")).is_empty());
        let mut local = service("2.47.0", "b");
        local.spec.suspend = Some(false);
        local.spec.upgrade_strategy = Some(serde_json::from_value(json!({"type": "NewCluster"})).unwrap());
        let ops = RayService::spec_sync(&remote, &local);
        let paths: Vec<&str> = ops.iter().map(|o| o["path"].as_str().unwrap()).collect();
        assert_eq!(
            paths,
            [
                "/spec/serveConfigV2",
                "/spec/upgradeStrategy",
                "/spec/rayClusterConfig"
            ]
        );
        let mut patched = serde_json::to_value(&remote).unwrap();
        json_patch::patch(
            &mut patched,
            &serde_json::from_value::<json_patch::Patch>(json!(ops)).unwrap(),
        )
        .unwrap();
        let patched: RayService = serde_json::from_value(patched).unwrap();
        assert_eq!(
            patched.spec.ray_cluster_config.ray_version.as_deref(),
            Some("2.47.0")
        );
        assert_eq!(patched.spec.serve_config_v2.as_deref(), Some("b"));
        assert_eq!(patched.spec.upgrade_strategy, local.spec.upgrade_strategy);
        assert_eq!(patched.spec.managed_by, None);
        assert_eq!(patched.spec.suspend, Some(true));
        // A field removed on the manager is removed on the worker.
        let back = RayService::spec_sync(&patched, &service("2.47.0", "b"));
        assert_eq!(
            back,
            vec![json!({"op": "remove", "path": "/spec/upgradeStrategy"})]
        );
    }

    /// Kueue's RayJob and RayCluster adapters are create-once: no spec is forwarded.
    #[test]
    fn rayjobs_and_rayclusters_forward_no_spec() {
        let a: RayCluster =
            serde_json::from_value(json!({"metadata": {"name": "a"}, "spec": {"rayVersion": "1",
            "headGroupSpec": {"rayStartParams": {}, "template": {}}}}))
            .unwrap();
        let mut b = a.clone();
        b.spec.ray_version = Some("2".into());
        assert!(RayCluster::spec_sync(&a, &b).is_empty());
    }

    fn at(secs: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    /// Kueue: test/e2e/multikueue/baseline/e2e_test.go, "Should preempt a running low-priority
    /// workload when a high-priority workload is admitted (same worker)", for a RayCluster: the copy
    /// Kueue's worker suspends reports `state: suspended` (Kueue's RayCluster `IsActive` is
    /// `state == ready`), which the manager mirrors. Here the manager's cluster, suspended, takes
    /// that status itself: suspended and acknowledged at its own generation, no ready worker, no
    /// head pod; a second release changes nothing, and an unsuspended cluster is left alone.
    #[test]
    fn a_released_raycluster_shows_a_suspended_copy() {
        let mut local: RayCluster = serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns", "generation": 3},
            "spec": {"managedBy": MANAGED_BY, "suspend": false, "headGroupSpec": {"rayStartParams": {}, "template": {}}},
            "status": {"state": "ready", "readyWorkerReplicas": 1, "availableWorkerReplicas": 1,
                "desiredWorkerReplicas": 1, "observedGeneration": 1,
                "head": {"podIP": "10.0.0.2", "podName": "c-head", "serviceName": "c-head-svc"},
                "conditions": [{"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap();
        assert_eq!(local.released_status(at(0)), None, "running: nothing to release");
        local.spec.suspend = Some(true);
        assert!(
            !crate::rayservice::job::raycluster::suspension_acknowledged(&local),
            "the mirrored status is the worker's: the manager would wait on it for ever"
        );
        // The copy's generation equal to this one by chance (a CI flake: the quota was given back
        // while the manager's cluster still showed `ready`): still the worker's status.
        let mut same_generation = local.clone();
        same_generation.status.as_mut().unwrap().observed_generation = Some(3);
        assert!(!crate::rayservice::job::raycluster::suspension_acknowledged(
            &same_generation
        ));
        same_generation.spec.managed_by = None;
        assert!(
            crate::rayservice::job::raycluster::suspension_acknowledged(&same_generation),
            "a cluster this operator runs, with status conditions off, acknowledges by generation"
        );
        let s = local.released_status(at(0)).expect("released");
        assert_eq!(s.state, Some(ClusterState::Suspended));
        assert_eq!(
            (s.ready_worker_replicas, s.available_worker_replicas),
            (Some(0), Some(0))
        );
        let head = s.head.clone().unwrap();
        assert_eq!((head.pod_ip, head.pod_name), (None, None));
        assert_eq!(s.observed_generation, Some(3));
        let conds = s.conditions.as_deref();
        assert!(conditions::is_true(conds, rc::COND_RAY_CLUSTER_SUSPENDED));
        assert!(!conditions::is_true(conds, rc::COND_HEAD_POD_READY));
        local.status = Some(s);
        assert!(crate::rayservice::job::raycluster::suspension_acknowledged(
            &local
        ));
        assert_eq!(local.released_status(at(5)), None, "released once");
    }

    /// The same for a RayJob: Kueue's `IsActive` is false once `jobDeploymentStatus` is
    /// `Suspended`, which KubeRay writes for the suspended copy with the run's fields cleared; a
    /// finished job keeps its outcome.
    #[test]
    fn a_released_rayjob_is_suspended_unless_finished() {
        let mut job: RayJob = serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"managedBy": MANAGED_BY, "suspend": true, "entrypoint": "x"},
            "status": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "jobId": "j-1",
                "rayClusterName": "j-abc", "dashboardURL": "j-abc-head-svc:8265", "failed": 0}
        }))
        .unwrap();
        let s = job.released_status(at(0)).expect("released");
        assert_eq!(s.job_deployment_status, Some(JobDeploymentStatus::Suspended));
        assert_eq!(
            (s.job_id, s.ray_cluster_name, s.dashboard_url, s.job_status),
            (None, None, None, None)
        );
        assert_eq!(s.failed, Some(0), "the counts stay");
        job.spec.suspend = Some(false);
        assert_eq!(job.released_status(at(0)), None, "running on the manager's say");
        job.spec.suspend = Some(true);
        for d in ["Complete", "Failed", "Suspended"] {
            job.status = Some(serde_json::from_value(json!({"jobDeploymentStatus": d})).unwrap());
            assert_eq!(job.released_status(at(0)), None, "{d}");
        }
    }

    /// The same for a RayService: the suspended copy's `SuspendComplete` status (no serving
    /// cluster, not Ready), so the manager stops showing the worker's service as serving.
    #[test]
    fn a_released_rayservice_is_suspended_and_not_ready() {
        let mut local = service("2.46.0", "a");
        local.status = Some(
            serde_json::from_value(json!({"serviceStatus": "Running", "numServeEndpoints": 2,
                "activeServiceStatus": {"rayClusterName": "s-abc"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "NonZeroServeEndpoints",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}))
            .unwrap(),
        );
        let s = local.released_status(at(0)).expect("released");
        let conds = s.conditions.as_deref();
        assert!(!conditions::is_true(conds, rc::COND_READY));
        assert!(conditions::is_true(conds, rc::COND_SUSPENDED));
        assert_eq!(s.active_service_status, None);
        assert_eq!(s.num_serve_endpoints, Some(0));
        assert_eq!(s.observed_generation, Some(2));
        local.status = Some(s);
        assert_eq!(local.released_status(at(1)), None);
        local.spec.suspend = Some(false);
        assert_eq!(local.released_status(at(1)), None);
    }

    /// The decision behind one manager Workload per dispatched RayService. Kueue's
    /// `rayservice_controller.go` builds a RayService's podsets from its spec, and its job reconciler
    /// replaces a Workload whose podsets no longer match (`EquivalentToWorkload`); quotagate's own
    /// would take the larger request as a replacement slice (`DemandChange::Grow`). A RayService
    /// MultiKueue dispatched keeps its admitted Workload instead (the worker's slices account the
    /// change); before admission, and for one not dispatched, the demand follows the spec as before.
    #[test]
    fn a_dispatched_rayservice_keeps_its_manager_workload_through_a_resource_change() {
        use crate::jobframework::{DemandChange, GenericJob};
        use crate::rayservice::job::rayservice::RayServiceJob;
        let job = |rs: RayService| RayServiceJob {
            rs,
            children: vec![],
            live: Default::default(),
            slices: vec![],
            growth_taken: None,
            pins: Default::default(),
            admitted: Vec::new(),
            scheduling: None,
        };
        let with_worker_cpu = |cpu: &str| {
            let mut rs = service("2.46.0", "a");
            rs.spec.ray_cluster_config.worker_group_specs = Some(vec![
                serde_json::from_value(
                    json!({"groupName": "workers", "replicas": 1, "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "w", "image": "ray:2.46.0",
                        "resources": {"requests": {"cpu": cpu}}}]}}}),
                )
                .unwrap(),
            ]);
            rs
        };
        let admitted = job(with_worker_cpu("1")).pod_sets().unwrap();
        let edited = job(with_worker_cpu("2"));
        let wanted = edited.pod_sets().unwrap();
        assert_ne!(wanted, admitted);
        assert!(worker_accounts_changes(&edited.rs));
        assert_eq!(
            edited.compare_demand(&wanted, &admitted, true),
            DemandChange::Same
        );
        assert!(matches!(
            edited.compare_demand(&wanted, &admitted, false),
            DemandChange::PodSets(_)
        ));
        let mut local = with_worker_cpu("2");
        local.spec.managed_by = None;
        let local = job(local);
        assert!(!worker_accounts_changes(&local.rs));
        assert_eq!(local.compare_demand(&wanted, &admitted, true), DemandChange::Grow);
    }
}
