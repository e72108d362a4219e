//! The GenericJob reconciler (after Kueue's `ReconcileGenericJob`), run with kube-runtime's
//! `Controller` for RayCluster. A queue-labelled job gets exactly one Workload; admission starts it
//! with the podset info, eviction stops it and releases the reservation, a job running without a
//! reservation is suspended. Deleting the job deletes the Workload through its owner reference.
//! The decision is [`plan`] (pure); [`reconcile`] executes it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::watch;

use super::JobFrameworkError;
use super::core::conditions::{self, is_evicted};
use super::interface::{GenericJob, queue_name, workload_slice_enabled};
use super::podset_info::{InfoOptions, PodSetInfo, podsets_equivalent, podsets_info_from_status};
use super::priority::{Priority, PrioritySource, priority_source, resolve_priority};
use super::raycluster::RayClusterJob;
use super::workload::{WorkloadOptions, construct_workload, prepare_workload_slice};
use crate::api::kueue::constants::label;
use crate::api::kueue::{ResourceFlavor, Workload, WorkloadPriorityClass};
use crate::api::ray::RayCluster;

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Job(#[from] JobFrameworkError),
}

impl JobError {
    pub fn category(&self) -> &'static str {
        match self {
            JobError::Kube(_) => "api",
            JobError::Job(e) => e.category(),
        }
    }
}

/// What to do with a job, given its workloads.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Not queue-managed (or already finished): leave it alone.
    Ignore,
    /// Stop a running job that has no workload yet, then create one.
    SuspendThenCreate,
    CreateWorkload,
    /// Duplicates, or a workload whose podsets no longer match the unadmitted job.
    DeleteWorkloads(Vec<String>),
    /// Reserved and not evicted while the job is suspended.
    Start(String),
    /// Evicted: stop the job (if running) and release the reservation.
    Stop(String),
    /// Running without a reservation.
    Suspend,
    /// Elastic job, pending workload or admitted and shrinking: take the job's new pod counts in place.
    UpdateCounts(String),
    /// Elastic job grew while admitted: a new workload slice replacing this one.
    CreateSlice {
        replaces: String,
    },
    Nothing,
}

/// Same podsets by name and containers; only counts may differ. (Labels, node selectors and
/// tolerations are ignored: admission injects them into a running job's templates.)
fn same_shape(a: &[crate::api::kueue::PodSet], b: &[crate::api::kueue::PodSet]) -> bool {
    let containers = |p: &crate::api::kueue::PodSet| {
        p.template
            .spec
            .as_ref()
            .map(|s| (s.containers.clone(), s.init_containers.clone()))
    };
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.name() == y.name() && containers(x) == containers(y))
}

/// Kueue's reconcile order, reduced to what quotagate's jobs need.
pub fn plan(job: &dyn GenericJob, workloads: &[&Workload]) -> Result<Step, JobFrameworkError> {
    if queue_name(job.meta()).is_none() || job.meta().deletion_timestamp.is_some() {
        return Ok(Step::Ignore);
    }
    let mut live: Vec<&&Workload> = workloads
        .iter()
        .filter(|w| w.metadata.deletion_timestamp.is_none() && !w.is_finished())
        .collect();
    // A pending scale-up slice waits beside the slice it replaces, which stays the active one.
    let mut slice_pending = false;
    if live.len() == 2 {
        let replaces = |a: &Workload, b: &Workload| {
            super::core::sync::replacement_for(a)
                .is_some_and(|k| Some(k.name.as_str()) == b.metadata.name.as_deref())
        };
        if replaces(live[1], live[0]) {
            live.truncate(1);
            slice_pending = true;
        } else if replaces(live[0], live[1]) {
            live.remove(0);
            slice_pending = true;
        }
    }
    let Some((first, rest)) = live.split_first() else {
        return Ok(if job.is_suspended() {
            Step::CreateWorkload
        } else {
            Step::SuspendThenCreate
        });
    };
    if !rest.is_empty() {
        return Ok(Step::DeleteWorkloads(
            rest.iter()
                .filter_map(|w| w.metadata.name.clone())
                .collect(),
        ));
    }
    let wl = *first;
    let name = wl.metadata.name.clone().unwrap_or_default();
    if wl.is_finished() {
        return Ok(Step::Nothing);
    }
    let reserved = wl.admission().is_some() && wl.has_quota_reservation();
    let podsets = job.pod_sets()?;
    let counts_differ = podsets
        .iter()
        .zip(&wl.spec.pod_sets)
        .any(|(a, b)| a.count() != b.count());
    if workload_slice_enabled(job.meta())
        && same_shape(&podsets, &wl.spec.pod_sets)
        && counts_differ
    {
        let grows = podsets
            .iter()
            .zip(&wl.spec.pod_sets)
            .any(|(a, b)| a.count() > b.count());
        if !reserved {
            return Ok(Step::UpdateCounts(name));
        }
        if grows && !is_evicted(wl) {
            // At most one pending replacement per chain (DESIGN I6); a further resize waits for it.
            return Ok(if slice_pending {
                Step::Nothing
            } else {
                Step::CreateSlice { replaces: name }
            });
        }
        if !grows && !is_evicted(wl) {
            // Kueue shrinks an admitted slice in place; the admission controller then shrinks
            // status.admission and frees the difference.
            return Ok(Step::UpdateCounts(name));
        }
    } else if !reserved && !podsets_equivalent(&podsets, &wl.spec.pod_sets, false) {
        return Ok(Step::DeleteWorkloads(vec![name]));
    }
    if reserved && is_evicted(wl) {
        return Ok(Step::Stop(name));
    }
    if reserved && job.is_suspended() && wl.is_admitted() {
        return Ok(Step::Start(name));
    }
    if !reserved && !job.is_suspended() {
        return Ok(Step::Suspend);
    }
    Ok(Step::Nothing)
}

pub struct JobContext {
    pub client: Client,
    pub recorder: Recorder,
    pub leader: watch::Receiver<bool>,
}

async fn event(
    ctx: &JobContext,
    obj: &k8s_openapi::api::core::v1::ObjectReference,
    why: &str,
    note: String,
) {
    let ev = Event {
        type_: EventType::Normal,
        reason: why.into(),
        note: Some(note),
        action: why.into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&ev, obj).await {
        tracing::debug!(error = %e, "publishing event failed");
    }
}

async fn priority(ctx: &JobContext, source: PrioritySource) -> Result<Priority, JobError> {
    let wpcs = Api::<WorkloadPriorityClass>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    match resolve_priority(&source, &wpcs, &[]) {
        // Pod PriorityClasses are not read yet: such jobs get the default priority.
        Err(JobFrameworkError::PriorityClassNotFound(_)) => Ok(Priority {
            class_ref: None,
            value: super::priority::DEFAULT_PRIORITY,
        }),
        other => Ok(other?),
    }
}

#[tracing::instrument(skip(rc, ctx), fields(name = %rc.name_any(), ns = rc.namespace().unwrap_or_default()))]
pub async fn reconcile(rc: Arc<RayCluster>, ctx: Arc<JobContext>) -> Result<Action, JobError> {
    if !*ctx.leader.borrow() {
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    let ns = rc.namespace().unwrap_or_default();
    let uid = rc.uid().unwrap_or_default();
    let wl_api: Api<Workload> = Api::namespaced(ctx.client.clone(), &ns);
    let rc_api: Api<RayCluster> = Api::namespaced(ctx.client.clone(), &ns);
    let owned = wl_api
        .list(&ListParams::default().labels(&format!("{}={uid}", label::JOB_UID)))
        .await?
        .items;
    let owned: Vec<Workload> = owned
        .into_iter()
        .filter(|w| {
            w.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == uid)
        })
        .collect();
    let mut job = RayClusterJob((*rc).clone());
    let refs: Vec<&Workload> = owned.iter().collect();
    let step = plan(&job, &refs)?;
    let step_ref = step.clone();
    tracing::debug!(?step, "job step");
    let obj_ref = rc.object_ref(&());
    match step_ref {
        Step::Ignore | Step::Nothing => {}
        Step::UpdateCounts(name) => {
            if let Some(wl) = owned.iter().find(|w| w.name_any() == name) {
                // Counts only (Kueue's ApplyPodSetCounts): a running job's templates carry
                // injected flavor info, and the rest of a reserved workload's podsets is immutable.
                let mut wl = wl.clone();
                let counts = job.pod_sets()?;
                for ps in &mut wl.spec.pod_sets {
                    if let Some(c) = counts.iter().find(|c| c.name == ps.name) {
                        ps.count = c.count;
                    }
                }
                wl_api.replace(&name, &PostParams::default(), &wl).await?;
            }
        }
        Step::SuspendThenCreate => {
            job.suspend();
            rc_api
                .replace(&rc.name_any(), &PostParams::default(), &job.0)
                .await?;
        }
        Step::CreateWorkload | Step::CreateSlice { .. } => {
            let podsets = job.pod_sets()?;
            let source = priority_source(&job, &podsets);
            let prio = priority(&ctx, source).await?;
            let mut wl = construct_workload(&job, podsets, prio, &WorkloadOptions::default())?;
            if workload_slice_enabled(job.meta()) {
                let old: Vec<&Workload> = match &step {
                    Step::CreateSlice { replaces } => {
                        owned.iter().filter(|w| w.name_any() == *replaces).collect()
                    }
                    _ => Vec::new(),
                };
                prepare_workload_slice(&mut wl, &old)?;
            }
            match wl_api.create(&PostParams::default(), &wl).await {
                Ok(w) => {
                    event(
                        &ctx,
                        &obj_ref,
                        "CreatedWorkload",
                        format!("Created Workload: {}/{}", ns, w.name_any()),
                    )
                    .await
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Step::DeleteWorkloads(names) => {
            for n in names {
                match wl_api.delete(&n, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Step::Start(name) => {
            let wl = owned
                .iter()
                .find(|w| w.name_any() == name)
                .ok_or(JobFrameworkError::NotAdmitted(name.clone()))?;
            let flavors: BTreeMap<String, ResourceFlavor> =
                Api::<ResourceFlavor>::all(ctx.client.clone())
                    .list(&ListParams::default())
                    .await?
                    .items
                    .into_iter()
                    .map(|f| (f.name_any(), f))
                    .collect();
            let infos = podsets_info_from_status(wl, &flavors, InfoOptions::default())?;
            job.run_with_podsets_info(&infos)?;
            rc_api
                .replace(&rc.name_any(), &PostParams::default(), &job.0)
                .await?;
            let cq = wl
                .admission()
                .map(|a| a.cluster_queue.clone())
                .unwrap_or_default();
            event(
                &ctx,
                &obj_ref,
                "Started",
                format!("Admitted by clusterQueue {cq}"),
            )
            .await;
        }
        Step::Stop(name) => {
            let wl = owned
                .iter()
                .find(|w| w.name_any() == name)
                .ok_or(JobFrameworkError::NotAdmitted(name.clone()))?;
            if !job.is_suspended() {
                job.suspend();
                let originals: Vec<PodSetInfo> = wl
                    .spec
                    .pod_sets
                    .iter()
                    .map(PodSetInfo::from_podset)
                    .collect();
                job.restore_podsets_info(&originals);
                rc_api
                    .replace(&rc.name_any(), &PostParams::default(), &job.0)
                    .await?;
                let msg = wl
                    .status
                    .as_ref()
                    .and_then(|s| s.condition("Evicted"))
                    .map(|c| c.message.clone())
                    .unwrap_or_default();
                event(&ctx, &obj_ref, "Stopped", msg).await;
            }
            // Suspended means no pods run any more: give the quota back so the workload requeues.
            if let Some(status) = conditions::clear_reservation(wl, jiff::Timestamp::now()) {
                let mut obj = wl.clone();
                obj.status = Some(status);
                wl_api
                    .replace_status(&name, &PostParams::default(), &obj)
                    .await?;
            }
        }
        Step::Suspend => {
            job.suspend();
            rc_api
                .replace(&rc.name_any(), &PostParams::default(), &job.0)
                .await?;
        }
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<RayCluster>, e: &JobError, _: Arc<JobContext>) -> Action {
    tracing::info!(error = %e, category = e.category(), "job reconcile failed; retrying");
    Action::requeue(Duration::from_secs(1))
}

/// Runs the RayCluster job controller until `shutdown` completes.
pub async fn run_raycluster_controller(
    ctx: JobContext,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let mut leader = ctx.leader.clone();
    let ctx = Arc::new(ctx);
    let controller = Controller::new(
        Api::<RayCluster>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<Workload>::all(client), watcher::Config::default())
    .graceful_shutdown_on(shutdown);
    // Becoming leader re-checks every job (the followers skipped their writes).
    let trigger = controller.reconcile_all_on(async_stream_leader(&mut leader));
    trigger
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "job controller");
            }
        })
        .await;
}

fn async_stream_leader(
    leader: &mut watch::Receiver<bool>,
) -> impl futures::Stream<Item = ()> + Send + Sync + 'static {
    let rx = leader.clone();
    futures::stream::unfold(rx, |mut rx| async move {
        loop {
            rx.changed().await.ok()?;
            if *rx.borrow() {
                return Some(((), rx));
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::kueue::Admission;

    fn rc(suspended: bool, queue: bool) -> RayClusterJob {
        let mut labels = serde_json::Map::new();
        if queue {
            labels.insert(label::QUEUE_NAME.into(), "lq".into());
        }
        let mut rc: RayCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "default", "uid": "u1", "labels": labels},
            "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "resources": {"requests": {"cpu": "1"}}}]}}}}
        }))
        .unwrap();
        rc.spec.suspend = Some(suspended);
        RayClusterJob(rc)
    }

    fn wl_for(job: &RayClusterJob, name: &str, reserved: bool, evicted: bool) -> Workload {
        let mut w = Workload::build(name, "default").queue("lq").build();
        w.spec.pod_sets = job.pod_sets().unwrap();
        let now = jiff::Timestamp::UNIX_EPOCH;
        if reserved {
            w.status = Some(conditions::admitted(
                &w,
                Admission {
                    cluster_queue: "cq".into(),
                    pod_set_assignments: vec![],
                },
                now,
            ));
        }
        if evicted {
            let cause = conditions::EvictionCause {
                reason: "Preempted".into(),
                preempted_reason: None,
                message: "m".into(),
            };
            w.status = conditions::evicted(&w, &cause, now);
        }
        w
    }

    #[test]
    fn plan_follows_kueue_reconcile_order() {
        let suspended = rc(true, true);
        let running = rc(false, true);
        let unqueued = rc(false, false);
        let mut other = rc(true, true);
        other
            .0
            .spec
            .head_group_spec
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .name = "changed".into();
        let other_wl = wl_for(&other, "w", false, false);
        let cases: Vec<(&str, &RayClusterJob, Vec<Workload>, Step)> = vec![
            ("no queue label", &unqueued, vec![], Step::Ignore),
            (
                "suspended, no workload",
                &suspended,
                vec![],
                Step::CreateWorkload,
            ),
            (
                "running, no workload",
                &running,
                vec![],
                Step::SuspendThenCreate,
            ),
            (
                "duplicates",
                &suspended,
                vec![
                    wl_for(&suspended, "w1", false, false),
                    wl_for(&suspended, "w2", false, false),
                ],
                Step::DeleteWorkloads(vec!["w2".into()]),
            ),
            (
                "podsets changed while pending",
                &suspended,
                vec![other_wl],
                Step::DeleteWorkloads(vec!["w".into()]),
            ),
            (
                "admitted, suspended",
                &suspended,
                vec![wl_for(&suspended, "w", true, false)],
                Step::Start("w".into()),
            ),
            (
                "admitted, running",
                &running,
                vec![wl_for(&running, "w", true, false)],
                Step::Nothing,
            ),
            (
                "evicted",
                &running,
                vec![wl_for(&running, "w", true, true)],
                Step::Stop("w".into()),
            ),
            (
                "pending, running",
                &running,
                vec![wl_for(&running, "w", false, false)],
                Step::Suspend,
            ),
            (
                "pending, suspended",
                &suspended,
                vec![wl_for(&suspended, "w", false, false)],
                Step::Nothing,
            ),
        ];
        for (name, job, wls, want) in cases {
            let refs: Vec<&Workload> = wls.iter().collect();
            assert_eq!(plan(job, &refs).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn elastic_jobs_resize_through_slices() {
        let elastic = |suspended: bool, workers: i32| {
            let mut j = rc(suspended, true);
            j.0.metadata.annotations =
                Some([(label::ELASTIC_JOB.to_string(), "true".to_string())].into());
            j.0.spec.worker_group_specs = Some(vec![serde_json::from_value(serde_json::json!({"groupName": "w", "replicas": workers, "template": {"spec": {"containers": [{"name": "w"}]}}})).unwrap()]);
            j
        };
        let small_pending = wl_for(&elastic(true, 1), "w1", false, false);
        let small_running = wl_for(&elastic(false, 1), "w1", true, false);
        let mut slice = wl_for(&elastic(false, 3), "w2", false, false);
        slice.metadata.annotations = Some(
            [(
                label::WORKLOAD_SLICE_REPLACEMENT_FOR.to_string(),
                "default/w1".to_string(),
            )]
            .into(),
        );
        let cases: Vec<(&str, RayClusterJob, Vec<Workload>, Step)> = vec![
            (
                "pending grows in place",
                elastic(true, 2),
                vec![small_pending],
                Step::UpdateCounts("w1".into()),
            ),
            (
                "admitted grows by a slice",
                elastic(false, 2),
                vec![small_running.clone()],
                Step::CreateSlice {
                    replaces: "w1".into(),
                },
            ),
            (
                "admitted shrink updates the counts in place",
                elastic(false, 0),
                vec![small_running.clone()],
                Step::UpdateCounts("w1".into()),
            ),
            (
                "an evicted workload is stopped, not shrunk",
                elastic(false, 0),
                vec![wl_for(&elastic(false, 1), "w1", true, true)],
                Step::Stop("w1".into()),
            ),
            (
                "a pending slice waits beside the active one",
                elastic(false, 3),
                vec![small_running, slice],
                Step::Nothing,
            ),
        ];
        for (name, job, wls, want) in cases {
            let refs: Vec<&Workload> = wls.iter().collect();
            assert_eq!(plan(&job, &refs).unwrap(), want, "{name}");
        }
    }
}
