//! What MultiKueue needs from a job kind (Kueue's `jobframework.MultiKueueAdapter`): whether a job is
//! MultiKueue's to dispatch, how its copy is made on the worker that won its Workload and its status
//! brought back, and how the copy is removed. A kind implements it beside its job type; the wiring hands
//! the adapters to `crate::multikueue`, which names no kind.

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::core::GroupVersionKind;

use crate::api::kueue::constants::label;
use crate::api::kueue::multikueue::ORIGIN_LABEL;

/// A job on the manager, and its copy's name on a worker (the same namespace and name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobKey {
    pub namespace: String,
    pub name: String,
}

/// Kueue's `MultiKueueAdapter`, for one job kind.
pub trait MultiKueueAdapter: Send + Sync {
    /// The kind adapted; a Workload whose controller owner has it is dispatched through this adapter.
    fn gvk(&self) -> GroupVersionKind;

    /// `Ok(None)`: the job on the manager is MultiKueue's (for a batch Job, `spec.managedBy` is
    /// `kueue.x-k8s.io/multikueue`); `Ok(Some(why))`: it is not, and why.
    fn unmanaged_reason<'a>(
        &'a self,
        local: &'a Client,
        key: &'a JobKey,
    ) -> BoxFuture<'a, Result<Option<String>, kube::Error>>;

    /// Creates the job's copy on the worker (`remote`) when it has none, labelled with
    /// [`set_multikueue_meta`]; otherwise brings the copy's status back onto the manager's job.
    /// Returns true when the status copy was deferred (the manager's job is still suspended).
    fn sync_job<'a>(
        &'a self,
        local: &'a Client,
        remote: &'a Client,
        key: &'a JobKey,
        workload_name: &'a str,
        origin: &'a str,
    ) -> BoxFuture<'a, Result<bool, kube::Error>>;

    /// Deletes the job's copy on the worker if this manager (`origin`) created it; gone is fine.
    fn delete_remote_object<'a>(
        &'a self,
        remote: &'a Client,
        key: &'a JobKey,
        origin: &'a str,
    ) -> BoxFuture<'a, Result<(), kube::Error>>;

    /// The copies of the job are gone (its Workload was evicted on the manager, or its worker is
    /// lost): the manager's job, once suspended, stops mirroring a copy that runs, so its job
    /// controller sees it stopped and gives the quota back. Nothing for a kind whose status does
    /// not count running pods.
    fn release_local<'a>(
        &'a self,
        _local: &'a Client,
        _key: &'a JobKey,
    ) -> BoxFuture<'a, Result<(), kube::Error>> {
        Box::pin(async { Ok(()) })
    }
}

/// Kueue's `SetMultiKueueMeta`: the origin label and the prebuilt-workload label, so the worker's
/// job controller runs the copy on the Workload the manager placed there.
pub fn set_multikueue_meta(meta: &mut ObjectMeta, workload_name: &str, origin: &str) {
    let labels = meta.labels.get_or_insert_with(Default::default);
    labels.insert(ORIGIN_LABEL.to_string(), origin.to_string());
    labels.insert(
        label::PREBUILT_WORKLOAD_NAME.to_string(),
        workload_name.to_string(),
    );
}

/// Kueue's `PrebuiltWorkloadFor`: the Workload a job runs on instead of one of its own.
pub fn prebuilt_workload_name(meta: &ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(label::PREBUILT_WORKLOAD_NAME))
        .map(String::as_str)
        .filter(|n| !n.is_empty())
}

/// True when the object on a worker was created by the manager `origin` (Kueue's
/// `DeleteRemoteObjectIfOwned` check): a copy another manager made is never touched.
pub fn created_by(meta: &ObjectMeta, origin: &str) -> bool {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(ORIGIN_LABEL))
        .is_some_and(|o| o == origin)
}

/// Kueue's `DeleteRemoteObjectIfOwned`: the job `key` of kind `K` on a worker is deleted (in the
/// background: its children go with it) only if this manager `origin` made it and it is not already
/// going; one already gone is fine.
pub async fn delete_remote_job<K>(remote: &Client, key: &JobKey, origin: &str) -> Result<(), kube::Error>
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let remotes = kube::Api::<K>::namespaced(remote.clone(), &key.namespace);
    let Some(job) = remotes.get_opt(&key.name).await? else {
        return Ok(());
    };
    if !created_by(job.meta(), origin) || job.meta().deletion_timestamp.is_some() {
        return Ok(());
    }
    let dp = kube::api::DeleteParams {
        propagation_policy: Some(kube::api::PropagationPolicy::Background),
        ..Default::default()
    };
    match remotes.delete(&key.name, &dp).await {
        Ok(_) => Ok(()),
        Err(e) if crate::kit::shell::is_not_found(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Kueue's `CloneObjectMetaForCreation`: name, namespace, labels and annotations only.
pub fn clone_meta_for_creation(meta: &ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        labels: meta.labels.clone(),
        annotations: meta.annotations.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kueue `pkg/controller/jobframework/utils.go` `SetMultiKueueMeta`: origin and prebuilt labels.
    #[test]
    fn meta_labels_name_origin_and_workload() {
        let mut meta = ObjectMeta::default();
        set_multikueue_meta(&mut meta, "wl1", "manager-a");
        assert_eq!(prebuilt_workload_name(&meta), Some("wl1"));
        assert!(created_by(&meta, "manager-a"));
        assert!(!created_by(&meta, "manager-b"));
        assert!(!created_by(&ObjectMeta::default(), "manager-a"));
    }
}
