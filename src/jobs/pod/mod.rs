//! Plain Pods as Kueue jobs (after Kueue's `pkg/controller/jobs/pod/pod_controller.go`). The webhook
//! (`api::pod`) creates a queue-labelled Pod gated by `kueue.x-k8s.io/admission`, labelled managed and
//! with Kueue's finalizer. A single Pod is a job of the generic reconciler: one Workload
//! (`pod-<name>-<hash>`) with one podset `main` of one pod; admission removes the gate and injects the
//! flavor's node selector and tolerations; a Pod cannot be suspended, so stopping deletes it (after a
//! `TerminationTarget` condition that says why); a Succeeded or Failed Pod finishes its Workload; the
//! finalizer goes once the Pod is being deleted, or it ended and its Workload is finished.
//! Pod groups (`kueue.x-k8s.io/pod-group-name`) are one Workload for many Pods, which the one object,
//! one job shape of the generic reconciler does not fit: [`group`] decides for them with the same
//! `plan`, and [`group_controller`] runs them.

pub mod group;
pub mod group_controller;
pub mod readiness;
pub mod replacement;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodSchedulingGate, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::watcher;

use crate::api::kueue::constants::DEFAULT_PODSET_NAME;
use crate::api::kueue::multikueue::MULTIKUEUE_CONTROLLER_NAME;
use crate::api::kueue::tas::TOPOLOGY_SCHEDULING_GATE;
use crate::api::kueue::{AdmissionCheck, PodSet, Workload};
use crate::api::pod as p;
use crate::jobframework::{
    Finished, GenericJob, JobContext, JobFrameworkError, JobKind, JobWithSkip, PodSetInfo, Step, StopReason,
    TopLevelJob, merge_into_template, plan_managed,
};
use crate::kit::shell::ignore_not_found;

/// A Pod under Kueue's admission.
pub struct PodJob {
    pub pod: Pod,
    /// Its admitted Workload has a MultiKueue check: it runs on a worker, so it is not started here.
    pub runs_on_a_worker: bool,
}

impl PodJob {
    pub fn new(pod: Pod) -> Self {
        PodJob {
            pod,
            runs_on_a_worker: false,
        }
    }
}

/// Kueue's `ShouldSkipLocalExecution`: one of the Workload's checks is MultiKueue's (`checks`: the
/// AdmissionChecks that exist), so its Pods run on the worker MultiKueue chose and stay gated here.
pub fn runs_on_a_worker(wl: &Workload, checks: &[AdmissionCheck]) -> bool {
    let states = wl
        .status
        .as_ref()
        .map(|s| s.admission_checks.as_slice())
        .unwrap_or_default();
    states.iter().any(|s| {
        checks.iter().any(|ac| {
            ac.metadata.name.as_deref() == Some(s.name.as_str())
                && ac.spec.controller_name == MULTIKUEUE_CONTROLLER_NAME
        })
    })
}

/// [`runs_on_a_worker`] with the AdmissionChecks read (a check that does not exist is none).
pub async fn runs_on_a_worker_now(client: &kube::Client, wl: &Workload) -> Result<bool, kube::Error> {
    if wl.status.as_ref().is_none_or(|s| s.admission_checks.is_empty()) {
        return Ok(false);
    }
    // Listed, as the shipped Role grants on AdmissionChecks (a cluster has few).
    let checks = Api::<AdmissionCheck>::all(client.clone())
        .list(&Default::default())
        .await?
        .items;
    Ok(runs_on_a_worker(wl, &checks))
}

/// The Pod's GroupVersionKind (Kueue's `pod` framework).
pub fn gvk() -> GroupVersionKind {
    GroupVersionKind::gvk("", "v1", "Pod")
}

/// Only the Pods the webhook marked are watched: a cluster's other Pods are no job.
pub fn managed_selector() -> String {
    format!("{}={}", p::MANAGED_LABEL, p::MANAGED_VALUE)
}

/// Removes the admission gate and merges the admitted info into the Pod (Kueue's `prepare`).
pub fn ungate(pod: &mut Pod, info: &PodSetInfo) -> Result<(), JobFrameworkError> {
    let spec = pod.spec.get_or_insert_with(Default::default);
    let topology_gate = |g: &PodSchedulingGate| g.name == TOPOLOGY_SCHEDULING_GATE;
    let had_topology_gate = spec.scheduling_gates.iter().flatten().any(topology_gate);
    merge_into_template(&mut pod.metadata, spec, info)?;
    // A live pod's gates can only be removed: the topology gate stays if the webhook put it on and
    // the admission is topology-aware (Kueue's `prepare`), and is never added.
    let keep_topology_gate = had_topology_gate && info.scheduling_gates.iter().any(topology_gate);
    if let Some(gates) = spec.scheduling_gates.as_mut() {
        gates.retain(|g| g.name != p::SCHEDULING_GATE && (!topology_gate(g) || keep_topology_gate));
    }
    if spec.scheduling_gates.as_ref().is_some_and(Vec::is_empty) {
        spec.scheduling_gates = None;
    }
    Ok(())
}

/// The podset of one Pod: its spec as the template, one pod (Kueue's `constructPodSets`).
pub fn pod_set(pod: &Pod, name: &str, count: i32) -> PodSet {
    PodSet {
        name: Some(name.to_string()),
        template: PodTemplateSpec {
            metadata: None,
            spec: pod.spec.clone(),
        },
        count: Some(count),
        min_count: None,
        // Kueue: the Pod's TAS annotations, with the group index as the pod index. Unparseable
        // annotations never get here: the Pod webhook refuses them (`validate_create`).
        topology_request: crate::api::kueue::tas::podset_topology_request(
            Some(&pod.metadata),
            Some(crate::api::kueue::tas::POD_GROUP_POD_INDEX),
        )
        .ok()
        .flatten(),
    }
}

/// Whether a Pod's finalizer can go (Kueue's `Finalize` calls): it is being deleted, or it ended and
/// none of its Workloads is still open.
pub fn finalizer_removable(pod: &Pod, workloads: &[Workload]) -> bool {
    let has = pod
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == p::FINALIZER);
    has && (pod.metadata.deletion_timestamp.is_some()
        || (p::is_terminated(pod)
            && workloads
                .iter()
                .all(|w| w.is_finished() || w.metadata.deletion_timestamp.is_some())))
}

/// Takes Kueue's finalizer off the Pod, guarded by the resourceVersion it was read at.
pub async fn remove_finalizer(client: &kube::Client, pod: &Pod) -> Result<(), kube::Error> {
    let mut after = pod.clone();
    if let Some(f) = after.metadata.finalizers.as_mut() {
        f.retain(|x| x != p::FINALIZER);
    }
    let Some(patch) = crate::api::merge_patch::guarded(pod, &after).map_err(kube::Error::SerdeError)? else {
        return Ok(());
    };
    let api: Api<Pod> = Api::namespaced(
        client.clone(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
    );
    ignore_not_found(
        api.patch(
            &pod.metadata.name.clone().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await,
    )?;
    Ok(())
}

/// The Pods a stop deletes (Kueue's `Stop`): not already being deleted, and, unless the Workload is
/// gone, not ended or still gated (those hold nothing).
pub fn to_stop(pods: &[Pod], reason: StopReason) -> Vec<&Pod> {
    pods.iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter(|pod| reason == StopReason::WorkloadDeleted || !p::is_suspended(pod))
        .collect()
}

/// Kueue's stop of a Pod: a `TerminationTarget` condition saying why (`reason`: Kueue's stop reason
/// text), then the delete.
pub async fn stop_pod(
    client: &kube::Client,
    pod: &Pod,
    reason: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(
        client.clone(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
    );
    let name = pod.metadata.name.clone().unwrap_or_default();
    let mut conditions: Vec<PodCondition> = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions.retain(|c| c.type_ != p::TERMINATION_TARGET);
    conditions.push(PodCondition {
        type_: p::TERMINATION_TARGET.to_string(),
        status: "True".to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::now(),
        )),
        ..Default::default()
    });
    let patch = serde_json::json!({"status": {"conditions": conditions}});
    ignore_not_found(
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    )?;
    ignore_not_found(api.delete(&name, &DeleteParams::default()).await)?;
    Ok(())
}

impl JobKind for PodJob {
    type Object = Pod;

    /// Kueue's `startJob` skip: a Pod about to be started on a Workload with a MultiKueue check is
    /// left gated (MultiKueue's pod adapter runs it on a worker and brings its status back); every
    /// other step (finish, stop, a new Workload) is taken as for any Pod.
    async fn load(obj: &Pod, workloads: &[Workload], client: &kube::Client) -> Result<Self, kube::Error> {
        let mut job = PodJob::new(obj.clone());
        let owned: Vec<&Workload> = workloads.iter().collect();
        if let Ok(Step::Start(name)) = plan_managed(&job, &owned, true)
            && let Some(wl) = workloads
                .iter()
                .find(|w| w.metadata.name.as_deref() == Some(name.as_str()))
        {
            job.runs_on_a_worker = runs_on_a_worker_now(client, wl).await?;
        }
        Ok(job)
    }

    fn object(&self) -> &Pod {
        &self.pod
    }

    fn watcher_config() -> watcher::Config {
        watcher::Config::default().labels(&managed_selector())
    }

    const STOPS_ITSELF: bool = true;

    async fn stop_itself(
        &self,
        reason: StopReason,
        why: &str,
        message: &str,
        client: &kube::Client,
    ) -> Result<(), kube::Error> {
        for pod in to_stop(std::slice::from_ref(&self.pod), reason) {
            stop_pod(client, pod, why, message).await?;
        }
        Ok(())
    }

    /// The finalizer, once the Pod no longer needs it (a group's pods are the group controller's).
    /// Under waitForPodsReady, a Pod MultiKueue runs on a worker (skipped here, so its step was
    /// Ignore) still gives its Workload PodsReady from the status mirrored from the worker, as Kueue's
    /// reconciler writes it before `startJob` skips the local start.
    async fn after_step(&self, workloads: &[Workload], ctx: &JobContext) -> Result<(), kube::Error> {
        if self.runs_on_a_worker && ctx.wait_for_pods_ready {
            let ns = self.pod.metadata.namespace.clone().unwrap_or_default();
            let api = Api::<Workload>::namespaced(ctx.client.clone(), &ns);
            for wl in workloads {
                let now = jiff::Timestamp::now();
                let ready = ready(&self.pod);
                let Some(status) =
                    crate::jobframework::job_controller::pods_ready_status(ctx, wl, ready, None, now)
                else {
                    continue;
                };
                let mut obj = wl.clone();
                obj.status = Some(status.clone());
                let name = wl.metadata.name.clone().unwrap_or_default();
                // A Workload changed meanwhile is written on the next pass.
                match api
                    .replace_status(&name, &kube::api::PostParams::default(), &obj)
                    .await
                {
                    Ok(_) => crate::admission::record_pods_ready(&ctx.metrics, wl, &status, now),
                    Err(e) if crate::kit::shell::is_conflict(&e) || crate::kit::shell::is_not_found(&e) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if p::group_name(&self.pod.metadata).is_none() && finalizer_removable(&self.pod, workloads) {
            remove_finalizer(&ctx.client, &self.pod).await?;
        }
        Ok(())
    }
}

impl GenericJob for PodJob {
    fn meta(&self) -> &ObjectMeta {
        &self.pod.metadata
    }

    fn gvk(&self) -> GroupVersionKind {
        gvk()
    }

    fn is_suspended(&self) -> bool {
        p::is_suspended(&self.pod)
    }

    /// A Pod cannot be suspended: it is stopped by deleting it (`stop_itself`).
    fn suspend(&mut self) {}

    fn run_with_podsets_info(&mut self, infos: &[PodSetInfo]) -> Result<(), JobFrameworkError> {
        let [info] = infos else {
            return Err(JobFrameworkError::PodSetsInfoLength {
                want: 1,
                got: infos.len(),
            });
        };
        ungate(&mut self.pod, info)
    }

    /// A Pod's spec cannot be put back: it ends instead.
    fn restore_podsets_info(&mut self, _: &[PodSetInfo]) -> bool {
        false
    }

    fn finished(&self) -> Option<Finished> {
        p::is_terminated(&self.pod).then(|| Finished {
            success: p::phase(&self.pod) == "Succeeded",
            message: self
                .pod
                .status
                .as_ref()
                .and_then(|s| s.message.clone())
                .unwrap_or_default(),
        })
    }

    fn pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        Ok(vec![pod_set(&self.pod, DEFAULT_PODSET_NAME, 1)])
    }

    fn is_active(&self) -> bool {
        p::phase(&self.pod) == "Running"
    }

    fn pods_ready(&self) -> bool {
        ready(&self.pod)
    }

    fn pods_scheduling(&self) -> Option<crate::jobframework::PodsScheduling> {
        Some(crate::jobframework::count_pods_scheduling([(
            &self.pod,
            DEFAULT_PODSET_NAME.to_string(),
        )]))
    }

    fn as_with_skip(&self) -> Option<&dyn JobWithSkip> {
        Some(self)
    }

    fn as_top_level(&self) -> Option<&dyn TopLevelJob> {
        Some(self)
    }
}

/// The Pod's `Ready` condition is True.
pub fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Kueue's `Skip`: a Pod the webhook did not mark is not Kueue's; a group's pods are the group
/// controller's; a Pod MultiKueue runs on a worker is not started here.
impl JobWithSkip for PodJob {
    fn skip(&self) -> bool {
        !p::is_managed(&self.pod.metadata)
            || p::group_name(&self.pod.metadata).is_some()
            || self.runs_on_a_worker
    }
}

impl TopLevelJob for PodJob {
    fn is_top_level(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod readiness_tests;
#[cfg(test)]
mod replacement_tests;
#[cfg(test)]
mod tests;
