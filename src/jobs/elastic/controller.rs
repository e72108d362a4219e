//! The thin shell around [`super::pods_to_ungate`], generic over the job kind whose pods carry the
//! elastic-job gate (their controller owner). A job wakes on its own changes, its Workloads' and its
//! admitted pods'; each pass reads the job's Workloads and its chain's pods from the API (not a cache,
//! so a pod ungated a moment ago is counted as such: Kueue keeps an expectations store for that) and
//! lifts the gate from the pods its active slice grants, each write guarded by the pod's
//! resourceVersion. Only the leader writes.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::{active_slice, pods_to_ungate, ungated};
use crate::api::kueue::constants::label;
use crate::api::merge_patch::guarded;
use crate::jobframework::job_controller::JobError;
use crate::jobframework::{JobContext, JobFrameworkError, owned_workloads};
use crate::kit::shell;
use crate::kit::{RESYNC, became_leader};

/// One pass for `job`: lifts the gate from the pods its active slice grants.
pub async fn reconcile<K>(job: Arc<K>, ctx: Arc<JobContext>) -> Result<Action, JobError>
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
{
    if !*ctx.leader.borrow() {
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    if !crate::api::kueue::is_elastic_job(job.meta()) || job.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = job.namespace().unwrap_or_default();
    let owned = owned_workloads(&ctx.client, &ns, &job.uid().unwrap_or_default()).await?;
    let Some(active) = active_slice(&owned) else {
        return Ok(Action::await_change());
    };
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    // Every admitted pod carries its podset label; the chain's are told apart by their slice name.
    let pods = pods_api
        .list(&ListParams::default().labels(label::PODSET))
        .await?
        .items;
    for pod in pods_to_ungate(active, &pods) {
        let patch = guarded(pod, &ungated(pod)).map_err(|e| JobFrameworkError::Encode(e.to_string()))?;
        if let Some(p) = patch {
            shell::ignore_not_found(
                pods_api
                    .patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&p))
                    .await,
            )?;
            tracing::debug!(pod = %pod.name_any(), slice = %active.name_any(), "elastic-job gate lifted");
        }
    }
    // Events wake it; the resync is the safety net for a missed one.
    Ok(Action::requeue(RESYNC))
}

/// Runs the ungater for jobs of kind `K` until `shutdown` completes.
pub async fn run<K>(ctx: JobContext, shutdown: impl Future<Output = ()> + Send + Sync + 'static)
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let client = ctx.client.clone();
    let mut leader = ctx.leader.clone();
    let controller = Controller::new(Api::<K>::all(client.clone()), watcher::Config::default())
        .owns(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default().labels(label::PODSET),
        )
        .owns_stream(ctx.workload_events.owned_by::<K>())
        .graceful_shutdown_on(shutdown)
        .reconcile_all_on(became_leader(&mut leader));
    shell::run(
        controller,
        "elastic-job-ungater",
        reconcile::<K>,
        Arc::new(ctx),
        |_| Duration::from_secs(1),
    )
    .await;
}
