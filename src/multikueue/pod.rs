//! The Pod's MultiKueue adapter (Kueue's `pkg/controller/jobs/pod/pod_multikueue_adapter.go`): a
//! queue-labelled Pod, or every Pod of its group (`kueue.x-k8s.io/pod-group-name`), is copied to the
//! worker that won its Workload (name, namespace, labels, annotations and spec, with the origin and
//! prebuilt-workload labels, so the worker's pod controller runs it on the manager's copy of the
//! Workload), and each copy's status is brought back onto its Pod on the manager. The manager's Pods
//! stay gated: the pod integration does not ungate a Pod whose Workload has a MultiKueue check
//! (`crate::jobs::pod`). Every Pod is MultiKueue's (Kueue's `IsJobManagedByKueue` is always true):
//! a Pod has no `spec.managedBy`.
//!
//! It lives here rather than beside the Pod kind because it needs nothing of the pod integration but
//! the Pod's own labels (`crate::api::pod`).

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};

use crate::api::pod as p;
use crate::jobframework::multikueue::{
    JobKey, MultiKueueAdapter, clone_meta_for_creation, created_by, set_multikueue_meta,
};
use crate::kit::shell::ignore_not_found;

const POD_SCHEDULED: &str = "PodScheduled";

/// The adapter for `v1` Pods and pod groups.
pub struct PodAdapter;

/// Kueue's copy of a manager's Pod for a worker: the metadata Kueue's `CloneObjectMetaForCreation`
/// keeps, the spec as it is (the admission gate included: the worker's pod controller removes it
/// once the copy's Workload is admitted there), no status.
pub fn remote_copy(local: &Pod, workload_name: &str, origin: &str) -> Pod {
    let mut metadata = clone_meta_for_creation(&local.metadata);
    set_multikueue_meta(&mut metadata, workload_name, origin);
    Pod {
        metadata,
        spec: local.spec.clone(),
        status: None,
    }
}

fn condition<'a>(status: Option<&'a PodStatus>, type_: &str) -> Option<&'a PodCondition> {
    status?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

/// The status the manager's Pod takes from its copy: the copy's whole status, except that a gated
/// manager's Pod keeps its own `PodScheduled` condition (`SchedulingGated`) until the copy is
/// scheduled, so the manager's cluster autoscaler never sees it as unschedulable.
pub fn synced_status(local: &Pod, remote: &Pod) -> PodStatus {
    let mut status = remote.status.clone().unwrap_or_default();
    let local_scheduled = condition(local.status.as_ref(), POD_SCHEDULED);
    let remote_scheduled =
        condition(remote.status.as_ref(), POD_SCHEDULED).is_some_and(|c| c.status == "True");
    if let Some(kept) = local_scheduled.filter(|_| p::is_gated(local) && !remote_scheduled) {
        let conds = status.conditions.get_or_insert_with(Vec::new);
        match conds.iter_mut().find(|c| c.type_ == POD_SCHEDULED) {
            Some(c) => *c = kept.clone(),
            None => conds.push(kept.clone()),
        }
    }
    status
}

/// The status of a gated manager's Pod whose copy is gone (its Workload was evicted, or its worker
/// lost): Pending with only its own `PodScheduled` condition, so the pod integration no longer sees a
/// running Pod and gives the quota back. `None` for a Pod that is not gated (it ran here), one that
/// ended (its end is the Workload's), or one already pending.
pub fn released_status(local: &Pod) -> Option<PodStatus> {
    if !p::is_gated(local) || p::is_terminated(local) {
        return None;
    }
    let status = local.status.clone().unwrap_or_default();
    let scheduled = condition(Some(&status), POD_SCHEDULED).cloned();
    let conditions = scheduled.into_iter().collect::<Vec<_>>();
    let released = PodStatus {
        phase: Some("Pending".to_string()),
        conditions: (!conditions.is_empty()).then_some(conditions),
        qos_class: status.qos_class.clone(),
        ..Default::default()
    };
    (released != status).then_some(released)
}

/// The Pods a sync covers: the group's (managed ones, in the namespace) or the Pod alone.
async fn local_pods(local: &Client, key: &JobKey) -> Result<Vec<Pod>, kube::Error> {
    let api = Api::<Pod>::namespaced(local.clone(), &key.namespace);
    let pod = api.get(&key.name).await?;
    let Some(group) = p::group_name(&pod.metadata) else {
        return Ok(vec![pod]);
    };
    let selector = format!(
        "{}={group},{}={}",
        p::GROUP_NAME_LABEL,
        p::MANAGED_LABEL,
        p::MANAGED_VALUE
    );
    Ok(api.list(&ListParams::default().labels(&selector)).await?.items)
}

/// Kueue's `syncLocalPodWithRemote`: the copy is created when missing; otherwise its status comes
/// back (not onto a Pod being deleted).
async fn sync_pod(
    local: &Client,
    remote: &Client,
    pod: &Pod,
    workload_name: &str,
    origin: &str,
) -> Result<(), kube::Error> {
    let ns = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let remotes = Api::<Pod>::namespaced(remote.clone(), &ns);
    let Some(copy) = remotes.get_opt(&name).await? else {
        remotes
            .create(&PostParams::default(), &remote_copy(pod, workload_name, origin))
            .await?;
        return Ok(());
    };
    if pod.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let status = synced_status(pod, &copy);
    if pod.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let mut updated = pod.clone();
    updated.status = Some(status);
    write_status(local, pod, &updated).await
}

/// The Pod's status as `after` has it, merge-patched on the version read (a Pod changed meanwhile is
/// written on the next pass; the shipped Role grants `patch` on `pods/status`).
async fn write_status(local: &Client, before: &Pod, after: &Pod) -> Result<(), kube::Error> {
    let Some(patch) = crate::api::merge_patch::guarded(before, after).map_err(kube::Error::SerdeError)?
    else {
        return Ok(());
    };
    let api = Api::<Pod>::namespaced(local.clone(), &before.namespace().unwrap_or_default());
    match api
        .patch_status(&before.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if crate::kit::shell::is_not_found(&e) || crate::kit::shell::is_conflict(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

impl MultiKueueAdapter for PodAdapter {
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk("", "v1", "Pod")
    }

    /// Kueue's `IsJobManagedByKueue` for Pods: always (a missing Pod is reported as such).
    fn unmanaged_reason<'a>(
        &'a self,
        local: &'a Client,
        key: &'a JobKey,
    ) -> BoxFuture<'a, Result<Option<String>, kube::Error>> {
        async move {
            Api::<Pod>::namespaced(local.clone(), &key.namespace)
                .get(&key.name)
                .await?;
            Ok(None)
        }
        .boxed()
    }

    fn sync_job<'a>(
        &'a self,
        local: &'a Client,
        remote: &'a Client,
        key: &'a JobKey,
        workload_name: &'a str,
        origin: &'a str,
    ) -> BoxFuture<'a, Result<bool, kube::Error>> {
        async move {
            for pod in local_pods(local, key).await? {
                sync_pod(local, remote, &pod, workload_name, origin).await?;
            }
            Ok(false)
        }
        .boxed()
    }

    /// Kueue's `DeleteRemoteObject`: the copy of the Pod, or every copy of its group, if this
    /// manager made it (a copy of another origin is never touched); gone is fine.
    fn delete_remote_object<'a>(
        &'a self,
        remote: &'a Client,
        key: &'a JobKey,
        origin: &'a str,
    ) -> BoxFuture<'a, Result<(), kube::Error>> {
        async move {
            let remotes = Api::<Pod>::namespaced(remote.clone(), &key.namespace);
            let Some(copy) = remotes.get_opt(&key.name).await? else {
                return Ok(());
            };
            let copies = match p::group_name(&copy.metadata) {
                None => vec![copy],
                Some(group) => {
                    let selector = format!("{}={group}", p::GROUP_NAME_LABEL);
                    remotes
                        .list(&ListParams::default().labels(&selector))
                        .await?
                        .items
                }
            };
            for c in copies
                .iter()
                .filter(|c| created_by(&c.metadata, origin) && c.metadata.deletion_timestamp.is_none())
            {
                ignore_not_found(remotes.delete(&c.name_any(), &DeleteParams::default()).await)?;
            }
            Ok(())
        }
        .boxed()
    }

    fn release_local<'a>(
        &'a self,
        local: &'a Client,
        key: &'a JobKey,
    ) -> BoxFuture<'a, Result<(), kube::Error>> {
        async move {
            let pods = match local_pods(local, key).await {
                Err(e) if crate::kit::shell::is_not_found(&e) => return Ok(()),
                r => r?,
            };
            for pod in pods {
                if let Some(status) = released_status(&pod) {
                    let mut after = pod.clone();
                    after.status = Some(status);
                    write_status(local, &pod, &after).await?;
                }
            }
            Ok(())
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::kueue::constants::label;
    use crate::api::kueue::multikueue::ORIGIN_LABEL;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn gated_manager_pod() -> Pod {
        pod(serde_json::json!({
            "metadata": {"name": "test-pod", "namespace": "ns", "uid": "u", "resourceVersion": "3",
                "finalizers": [p::FINALIZER],
                "labels": {"kueue.x-k8s.io/queue-name": "lq", p::MANAGED_LABEL: "true"}},
            "spec": {"schedulingGates": [{"name": p::SCHEDULING_GATE}], "containers": [{"name": "c"}]},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}
        }))
    }

    fn scheduled(p: &Pod) -> Option<(String, Option<String>)> {
        condition(p.status.as_ref(), POD_SCHEDULED).map(|c| (c.status.clone(), c.reason.clone()))
    }

    /// Kueue `pod_multikueue_adapter_test.go` "sync creates missing remote pod" (and "... of the
    /// group"): the copy has the manager's labels and spec plus the prebuilt-workload and origin
    /// labels, and no uid, resourceVersion, finalizer or status.
    #[test]
    fn the_copy_carries_the_prebuilt_workload_and_origin() {
        let local = gated_manager_pod();
        let copy = remote_copy(&local, "wl1", "origin1");
        let labels = copy.metadata.labels.clone().unwrap();
        assert_eq!(labels[label::PREBUILT_WORKLOAD_NAME], "wl1");
        assert_eq!(labels[ORIGIN_LABEL], "origin1");
        assert_eq!(labels["kueue.x-k8s.io/queue-name"], "lq");
        assert_eq!(copy.metadata.uid, None);
        assert_eq!(copy.metadata.resource_version, None);
        assert_eq!(copy.metadata.finalizers, None);
        assert_eq!(copy.spec, local.spec);
        assert_eq!(copy.status, None);
    }

    /// Kueue `pod_multikueue_adapter_test.go` "sync status from remote pod": the copy's phase and
    /// conditions come back onto a manager's Pod that is not gated.
    #[test]
    fn status_comes_back() {
        let mut local = gated_manager_pod();
        local.spec.as_mut().unwrap().scheduling_gates = None;
        local.status = None;
        let remote = pod(serde_json::json!({"metadata": {"name": "test-pod"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}));
        assert_eq!(synced_status(&local, &remote), remote.status.clone().unwrap());
    }

    /// Kueue `pod_multikueue_adapter_test.go` "keeps SchedulingGated condition on gated manager pod
    /// (avoids spurious autoscaler scale-up)" and "overwrites SchedulingGated once the remote pod is
    /// scheduled".
    #[test]
    fn a_gated_pod_keeps_scheduling_gated_until_the_copy_is_scheduled() {
        let local = gated_manager_pod();
        let unschedulable = pod(serde_json::json!({"metadata": {"name": "test-pod"},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}));
        let s = synced_status(&local, &unschedulable);
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        let mut synced = local.clone();
        synced.status = Some(s);
        assert_eq!(
            scheduled(&synced),
            Some(("False".into(), Some("SchedulingGated".into())))
        );
        let running = pod(serde_json::json!({"metadata": {"name": "test-pod"},
            "status": {"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}}));
        assert_eq!(synced_status(&local, &running), running.status.clone().unwrap());
    }

    /// A gated manager's Pod that mirrored a running copy is Pending again once the copy is gone; a
    /// pending one, one that ended, or one that ran here is left alone.
    #[test]
    fn a_released_pod_is_pending_with_only_its_own_scheduled_condition() {
        let mut mirrored = gated_manager_pod();
        let st = mirrored.status.as_mut().unwrap();
        st.phase = Some("Running".into());
        st.pod_ip = Some("10.0.0.1".into());
        st.conditions.as_mut().unwrap().push(PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        });
        let released = released_status(&mirrored).unwrap();
        assert_eq!(released.phase.as_deref(), Some("Pending"));
        assert_eq!(released.pod_ip, None);
        assert_eq!(released.conditions.as_ref().map(Vec::len), Some(1));
        mirrored.status = Some(released);
        assert_eq!(released_status(&mirrored), None);
        let mut done = gated_manager_pod();
        done.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert_eq!(released_status(&done), None);
        let mut ran_here = gated_manager_pod();
        ran_here.spec.as_mut().unwrap().scheduling_gates = None;
        ran_here.status.as_mut().unwrap().phase = Some("Running".into());
        assert_eq!(released_status(&ran_here), None);
    }
}
