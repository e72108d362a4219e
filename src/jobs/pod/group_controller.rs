//! The pod-group controller: the thin shell around [`super::group::decide`]. Every pod of a group wakes
//! the same pass, which reads the group's pods and its Workload (named after the group), decides, and
//! acts: excess pods deleted, the Workload created (owned by every pod) or given a replacement pod as
//! owner, the pods ungated with their role's info, stopped, or the Workload finished, and finalizers
//! removed once the pods no longer need them.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use super::group::{Decision, PodGroup, decide};
use super::readiness::ReadinessGates;
use super::replacement::with_replacement_condition;
use super::{remove_finalizer, stop_pod, to_stop};
use crate::admission::{clear_reservation, finished};
use crate::api::kueue::Workload;
use crate::api::kueue::constants::reason;
use crate::api::pod as p;
use crate::jobframework::job_controller::{JobError, evicted_reason, priority};
use crate::jobframework::podset_info::{InfoOptions, flavors_by_name, podsets_info_from_status};
use crate::jobframework::priority::priority_source;
use crate::jobframework::{GenericJob, JobContext, JobFrameworkError, Step, StopReason};
use crate::kit::became_leader;
use crate::kit::shell::{self, ignore_already_exists, ignore_not_found};

/// Runs the pod-group controller until `shutdown` completes.
pub async fn run(ctx: JobContext, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let client = ctx.client.clone();
    let mut leader = ctx.leader.clone();
    let selector = format!("{},{}", super::managed_selector(), p::GROUP_NAME_LABEL);
    let controller = Controller::new(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default().labels(&selector),
    )
    .owns_stream(ctx.workload_events.owned_by::<Pod>())
    .graceful_shutdown_on(shutdown)
    .reconcile_all_on(became_leader(&mut leader));
    shell::run(controller, "podgroup", reconcile, Arc::new(ctx), |_| {
        Duration::from_secs(1)
    })
    .await;
}

/// Reconciles the group of `pod` (every pod of a group wakes the same pass).
pub async fn reconcile(pod: Arc<Pod>, ctx: Arc<JobContext>) -> Result<Action, JobError> {
    if !*ctx.leader.borrow() {
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    let Some(name) = p::group_name(&pod.metadata).map(str::to_string) else {
        return Ok(Action::await_change());
    };
    let ns = pod.namespace().unwrap_or_default();
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let wl_api: Api<Workload> = Api::namespaced(ctx.client.clone(), &ns);
    let selector = format!("{}={name},{}", p::GROUP_NAME_LABEL, super::managed_selector());
    let pods = pods_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    let workload = ignore_not_found(wl_api.get(&name).await)?;
    let obj_ref = pod.object_ref(&());
    let gates = ReadinessGates {
        count_succeeded: ctx.managed_jobs.count_succeeded_pods_as_ready,
        max_not_ready: ctx.managed_jobs.pod_group_max_not_ready,
    };
    let mut group = match PodGroup::new(&name, pods) {
        Ok(g) => g.with_readiness(gates),
        Err(why) => {
            shell::publish(
                &ctx.recorder,
                &obj_ref,
                EventType::Warning,
                "ErrWorkloadCompose",
                why,
            )
            .await;
            return Ok(Action::requeue(Duration::from_secs(60)));
        }
    };
    let all_pods = group.pods.clone();
    let Decision {
        step,
        finalize,
        excess,
    } = match decide(&mut group, workload.as_ref()) {
        Ok(d) => d,
        // Podsets Kueue refuses (more than 8 roles): retrying cannot fix it; say so and wait.
        Err(JobFrameworkError::PodSets(why)) => {
            shell::publish(
                &ctx.recorder,
                &obj_ref,
                EventType::Warning,
                "ErrWorkloadCompose",
                why,
            )
            .await;
            return Ok(Action::requeue(Duration::from_secs(60)));
        }
        Err(e) => return Err(e.into()),
    };
    // Kueue's `removeExcessPods`: finalized and deleted.
    for x in all_pods.iter().filter(|x| excess.contains(&x.name_any())) {
        remove_finalizer(&ctx.client, x).await?;
        if x.metadata.deletion_timestamp.is_none() {
            ignore_not_found(pods_api.delete(&x.name_any(), &DeleteParams::default()).await)?;
            shell::publish(
                &ctx.recorder,
                &x.object_ref(&()),
                EventType::Normal,
                "ExcessPodDeleted",
                "Excess pod deleted".to_string(),
            )
            .await;
        }
    }
    tracing::debug!(group = %name, ?step, "pod group step");
    let active = group.is_active();
    // Kueue's `ensureWorkloadOwnedByAllMembers`: a replacement pod owns the group's Workload too.
    if let Some(wl) = workload
        .as_ref()
        .filter(|w| w.metadata.deletion_timestamp.is_none())
        && let Some(owned) = group.with_all_owners(wl)
    {
        wl_api.replace(&name, &PostParams::default(), &owned).await?;
        let added = owned.metadata.owner_references.as_ref().map_or(0, Vec::len)
            - wl.metadata.owner_references.as_ref().map_or(0, Vec::len);
        shell::publish(
            &ctx.recorder,
            &owned.object_ref(&()),
            EventType::Normal,
            "OwnerReferencesAdded",
            format!("Added {added} owner reference(s)"),
        )
        .await;
        return Ok(Action::requeue(Duration::from_millis(100)));
    }
    // Kueue's `CustomWorkloadConditions`: the replacement condition is written first, on its own.
    if let Some(wl) = workload
        .as_ref()
        .filter(|w| w.metadata.deletion_timestamp.is_none() && group.matches_workload())
        && let Some(status) = with_replacement_condition(&group, wl, &[], jiff::Timestamp::now())
    {
        let mut obj = wl.clone();
        obj.status = Some(status);
        wl_api.replace_status(&name, &PostParams::default(), &obj).await?;
        return Ok(Action::requeue(Duration::from_millis(100)));
    }
    match &step {
        Step::CreateWorkload => {
            let podsets = group.pod_sets()?;
            let prio = priority(&ctx, priority_source(&group, &podsets)).await?;
            let wl = group.workload(prio)?;
            if ignore_already_exists(wl_api.create(&PostParams::default(), &wl).await)?.is_some() {
                let note = format!("Created Workload: {ns}/{name}");
                shell::publish(
                    &ctx.recorder,
                    &obj_ref,
                    EventType::Normal,
                    "CreatedWorkload",
                    note,
                )
                .await;
            }
        }
        Step::Start(wl_name) => 'start: {
            let Some(wl) = workload.as_ref() else {
                return Ok(Action::requeue(Duration::from_secs(1)));
            };
            // Kueue's `startJob` skip: MultiKueue runs the group on a worker; its pods stay gated.
            if super::runs_on_a_worker_now(&ctx.client, wl).await? {
                tracing::debug!(workload = %wl_name, "MultiKueue runs the pod group on a worker");
                break 'start;
            }
            let flavors = flavors_by_name(&ctx.client).await?;
            let infos = podsets_info_from_status(wl, &flavors, InfoOptions::default())?;
            let cq = wl
                .admission()
                .map(|a| a.cluster_queue.clone())
                .unwrap_or_default();
            for (before, after) in group.ungated(&infos)? {
                if let Some(patch) = crate::api::merge_patch::guarded(&before, &after)
                    .map_err(|e| JobFrameworkError::Encode(e.to_string()))?
                {
                    pods_api
                        .patch(&before.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                    shell::publish(
                        &ctx.recorder,
                        &before.object_ref(&()),
                        EventType::Normal,
                        "Started",
                        format!("Admitted by clusterQueue {cq}"),
                    )
                    .await;
                }
            }
            tracing::debug!(workload = %wl_name, "pod group started");
        }
        Step::Stop(_) | Step::StopNotMatching(_) | Step::Suspend | Step::SuspendThenCreate => {
            let (why, text, msg) = match (&step, workload.as_ref()) {
                (Step::StopNotMatching(_), _) => (
                    StopReason::NoMatchingWorkload,
                    StopReason::NoMatchingWorkload.as_str().to_string(),
                    "No matching Workload".to_string(),
                ),
                // Evicted: the core gives a group's quota back at once (the Workload has no controller
                // owner), so the group may see it unreserved already; the pods still go for the eviction.
                (Step::Stop(_), Some(wl)) | (Step::Suspend, Some(wl))
                    if wl.status.as_ref().is_some_and(|s| s.condition_true("Evicted")) =>
                {
                    let msg = wl
                        .status
                        .as_ref()
                        .and_then(|s| s.condition("Evicted"))
                        .map(|c| c.message.clone())
                        .unwrap_or_default();
                    (StopReason::WorkloadEvicted, evicted_reason(wl), msg)
                }
                (Step::Suspend, _) => (
                    StopReason::NotAdmitted,
                    StopReason::NotAdmitted.as_str().to_string(),
                    "Not admitted by cluster queue".to_string(),
                ),
                // Kueue's words for a job running with no Workload.
                _ => (
                    StopReason::NoMatchingWorkload,
                    StopReason::NoMatchingWorkload.as_str().to_string(),
                    "Missing Workload; unable to restore pod templates".to_string(),
                ),
            };
            let mut stopped = Vec::new();
            for x in to_stop(&group.pods, why) {
                stop_pod(&ctx.client, x, &text, &msg).await?;
                stopped.push(x.name_any());
            }
            if let (Step::Stop(_) | Step::Suspend, Some(wl)) = (&step, workload.as_ref()) {
                let now = jiff::Timestamp::now();
                let mut obj = wl.clone();
                let mut changed = false;
                // The stopped pods are to be replaced before the Workload may be admitted again.
                if group.matches_workload()
                    && let Some(status) = with_replacement_condition(&group, &obj, &stopped, now)
                {
                    obj.status = Some(status);
                    changed = true;
                }
                // The quota goes back once no pod of the group runs.
                if !active && let Some(status) = clear_reservation(&obj, now) {
                    obj.status = Some(status);
                    changed = true;
                }
                if changed {
                    wl_api.replace_status(&name, &PostParams::default(), &obj).await?;
                }
            }
        }
        Step::DeleteWorkloads(names) => {
            for n in names {
                ignore_not_found(wl_api.delete(n, &DeleteParams::default()).await)?;
            }
        }
        Step::Finish {
            name: wl_name,
            finished: done,
        } => {
            if let Some(wl) = workload.as_ref()
                && let Some(status) = finished(wl, reason::SUCCEEDED, &done.message, jiff::Timestamp::now())
            {
                let mut obj = wl.clone();
                obj.status = Some(status);
                wl_api
                    .replace_status(wl_name, &PostParams::default(), &obj)
                    .await?;
            }
        }
        // The group's pods now name another queue (or, managed without one, name one at last).
        Step::UpdateQueueName(_) => {
            // Kueue's `CustomQueueNameChange`: a serving group's Workload keeps its queue.
            if let Some(wl) = workload.as_ref().filter(|_| !group.serving()) {
                let mut obj = wl.clone();
                obj.spec.queue_name =
                    crate::jobframework::queue_name(crate::jobframework::GenericJob::meta(&group))
                        .map(str::to_string);
                wl_api.replace(&name, &PostParams::default(), &obj).await?;
            }
        }
        Step::UpdateReclaimablePods { name: wl_name, pods } => {
            if let Some(wl) = workload.as_ref() {
                let mut obj = wl.clone();
                obj.status.get_or_insert_with(Default::default).reclaimable_pods = pods.clone();
                wl_api
                    .replace_status(wl_name, &PostParams::default(), &obj)
                    .await?;
            }
        }
        // Groups have no workload slices.
        Step::Ignore
        | Step::Nothing
        | Step::UpdateCounts(_)
        | Step::ReplacePodSets { .. }
        | Step::CreateSlice { .. } => {}
    }
    // waitForPodsReady: the group's Workload carries PodsReady (and, tracked, PodsScheduled) from its
    // pods, on a pass that changed nothing else, as the generic reconciler writes it for other kinds.
    if ctx.wait_for_pods_ready
        && matches!(step, Step::Nothing | Step::Start(_))
        && let Some(wl) = workload.as_ref()
    {
        let now = jiff::Timestamp::now();
        let scheduling = crate::jobframework::GenericJob::pods_scheduling(&group);
        let ready = crate::jobframework::GenericJob::pods_ready(&group);
        if let Some(status) =
            crate::jobframework::job_controller::pods_ready_status(&ctx, wl, ready, scheduling.as_ref(), now)
        {
            let mut obj = wl.clone();
            obj.status = Some(status.clone());
            wl_api.replace_status(&name, &PostParams::default(), &obj).await?;
            crate::admission::record_pods_ready(&ctx.metrics, wl, &status, now);
        }
    }
    for pod_name in finalize {
        if let Some(x) = group.pods.iter().find(|x| x.name_any() == pod_name) {
            remove_finalizer(&ctx.client, x).await?;
        }
    }
    Ok(match step {
        Step::Stop(_) | Step::StopNotMatching(_) if active => Action::requeue(Duration::from_secs(1)),
        _ => Action::requeue(crate::kit::RESYNC),
    })
}
