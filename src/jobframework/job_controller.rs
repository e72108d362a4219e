//! The GenericJob reconciler (after Kueue's `NewGenericReconciler` / `ReconcileGenericJob`), generic over
//! the job kind and run with kube-runtime's `Controller`. A queue-labelled job gets exactly one Workload
//! chain; admission starts it with the podset info, eviction stops it and releases the reservation, a job
//! running without a reservation is suspended, and a job whose demand changes while admitted gets a new
//! workload slice. Deleting the job deletes its Workloads through their owner references. Job kinds live
//! with their operator and are registered by the wiring. The decision is [`plan`] (pure); [`reconcile`]
//! executes it.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ObjectReference};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::JobFrameworkError;
use super::interface::{DemandChange, GenericJob, StopReason, queue_name};
use super::podset_info::{InfoOptions, PodSetInfo, podsets_equivalent, podsets_info_from_status};
use super::priority::{
    Priority, PrioritySource, default_workload_priority_class, priority_source, resolve_priority,
};
use super::refusal;
use super::workload::{WorkloadOptions, construct_workload, prepare_workload_slice};
use crate::admission::{self as conditions, is_evicted};
use crate::api::kueue::constants::{ANNOTATION_UPGRADE_CLAIM, label};
use crate::api::kueue::managed_jobs::ManagedJobs;
use crate::api::kueue::{PodSet, Workload, WorkloadPriorityClass};
use crate::api::merge_patch::guarded;
use crate::kit::events::Recorder;
use crate::kit::{RESYNC, became_leader, shell};

/// A job kind the generic reconciler manages (Kueue's `IntegrationCallbacks`): the object it watches,
/// how a job is loaded from it (with whatever the job reads from the cluster, e.g. its live children),
/// and the object to write back.
pub trait JobKind: GenericJob + Send + Sync + Sized + 'static {
    type Object: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static;
    /// Wraps the object, reading what the job's decisions need (`workloads`: those it owns).
    fn load(
        obj: &Self::Object,
        workloads: &[Workload],
        client: &Client,
    ) -> impl Future<Output = Result<Self, kube::Error>> + Send;
    fn object(&self) -> &Self::Object;
    /// Reads what [`GenericJob::pods_scheduling`] needs from the cluster (the job's pods), called only
    /// while the Workload's `PodsScheduled` condition is tracked (Kueue v0.20's unscheduledTimeout),
    /// so a kind whose pods are not otherwise read lists them only then.
    fn load_pods_scheduling(
        &mut self,
        _client: &Client,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send {
        async { Ok(()) }
    }
    /// Extra watches that should wake the job (beyond its own object and its Workloads).
    fn watches(controller: Controller<Self::Object>, _client: &Client) -> Controller<Self::Object> {
        controller
    }
    /// The watch on the kind's objects: a kind most of whose objects are no job (Pods) narrows it to
    /// the ones its webhook marked.
    fn watcher_config() -> watcher::Config {
        watcher::Config::default()
    }
    /// Kueue's `JobWithCustomStop` for a kind that cannot be suspended (a Pod): stopping is the kind's
    /// own action, [`JobKind::stop_itself`], instead of `suspend` and restoring the templates.
    const STOPS_ITSELF: bool = false;
    /// Stops a running job of a kind that `STOPS_ITSELF` (a Pod is deleted), saying why: `why` is Kueue's
    /// reason text (`WorkloadEvictedDueTo<the Evicted condition's reason>` for an eviction).
    fn stop_itself(
        &self,
        _reason: StopReason,
        _why: &str,
        _message: &str,
        _client: &Client,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send {
        async { Ok(()) }
    }
    /// Kueue's `JobWithCustomStop` for kinds whose API server refuses a template change in the write
    /// that suspends them: stopping suspends first, runs [`JobKind::after_suspend`], then restores the
    /// templates in a second write.
    const STOPS_IN_STEPS: bool = false;
    /// Between suspending and restoring (with `STOPS_IN_STEPS`): returns the object to restore.
    fn after_suspend(
        suspended: Self::Object,
        _client: &Client,
    ) -> impl Future<Output = Result<Self::Object, kube::Error>> + Send {
        async move { Ok(suspended) }
    }
    /// Work after the framework's step, given the job's workloads as they were read.
    fn after_step(
        &self,
        _workloads: &[Workload],
        _ctx: &JobContext,
    ) -> impl Future<Output = Result<(), kube::Error>> + Send {
        async { Ok(()) }
    }
}

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
    /// Duplicates, a workload whose podsets no longer match the unadmitted job, or a pending
    /// replacement slice the job no longer needs.
    DeleteWorkloads(Vec<String>),
    /// Reserved and not evicted while the job is suspended.
    Start(String),
    /// Evicted: stop the job (if running) and release the reservation.
    Stop(String),
    /// Running on a reservation that no longer describes it (an edit of counts or requests): stop the job
    /// (Kueue's `NoMatchingWorkload`); once its pods are gone the workload is deleted and a new one, with
    /// the job's new podsets, is queued.
    StopNotMatching(String),
    /// Running without a reservation.
    Suspend,
    /// Elastic job, pending workload or admitted and shrinking: take the job's new pod counts in place.
    UpdateCounts(String),
    /// The suspended job's queue label changed: its waiting Workload follows it.
    UpdateQueueName(String),
    /// The workload's podsets become these (a pending workload or replacement following the job's
    /// demand, or an admitted slice shrinking in place with its podsets kept).
    ReplacePodSets {
        name: String,
        pod_sets: Vec<PodSet>,
    },
    /// Elastic job grew while admitted: a new workload slice replacing this one.
    CreateSlice {
        replaces: String,
    },
    /// The job completed or failed: its Workload is marked Finished (Kueue's step 2), which gives
    /// back its quota.
    Finish {
        name: String,
        finished: super::interface::Finished,
    },
    /// Kueue's step 4: the workload's `status.reclaimablePods` become the job's (pods it no longer
    /// needs, whose quota goes back).
    UpdateReclaimablePods {
        name: String,
        pods: Vec<crate::api::kueue::ReclaimablePod>,
    },
    Nothing,
}

/// Splits live workloads into the active one and a pending replacement slice beside it.
fn split_chain<'a>(live: &mut Vec<&'a Workload>) -> Option<&'a Workload> {
    if live.len() != 2 {
        return None;
    }
    let replaces = |a: &Workload, b: &Workload| {
        crate::admission::replacement_for(a)
            .is_some_and(|k| Some(k.name.as_str()) == b.metadata.name.as_deref())
    };
    if replaces(live[1], live[0]) {
        live.pop()
    } else if replaces(live[0], live[1]) {
        Some(live.remove(0))
    } else {
        None
    }
}

/// The job's floor and the parts it keeps, as the slice's annotations would read.
fn floor_annotations(job: &dyn GenericJob, wl: &Workload) -> [(&'static str, Option<String>); 2] {
    let floor = job
        .growth_floor(&wl.spec.pod_sets)
        .map(|f| crate::admission::slices::format_floor(&f));
    let keeps = floor.as_ref().and(job.growth_keeps()).map(|k| k.join(","));
    [
        (crate::admission::slices::GROWTH_FLOOR_ANNOTATION, floor),
        (crate::admission::slices::GROWTH_KEEPS_ANNOTATION, keeps),
    ]
}

/// The slice's floor annotations differ from what the job says it keeps (`GenericJob::growth_floor`,
/// `GenericJob::growth_keeps`).
fn stale_floor(job: &dyn GenericJob, wl: &Workload) -> bool {
    let have = |key: &str| wl.metadata.annotations.as_ref().and_then(|a| a.get(key));
    floor_annotations(job, wl)
        .iter()
        .any(|(key, want)| want.as_ref() != have(key))
}

/// Writes (or removes) the job's floor for `pod_sets`, and the parts it keeps, on the workload.
fn put_floor(job: &dyn GenericJob, wl: &mut Workload) {
    let wanted = floor_annotations(job, wl);
    tracing::debug!(workload = wl.metadata.name.as_deref().unwrap_or_default(), floor = ?wanted[0].1, keeps = ?wanted[1].1, "the slice's floor");
    let annotations = wl.metadata.annotations.get_or_insert_with(Default::default);
    for (key, value) in wanted {
        match value {
            Some(v) => {
                annotations.insert(key.to_string(), v);
            }
            None => {
                annotations.remove(key);
            }
        }
    }
}

/// Kueue's reconcile order, reduced to what quotagate's jobs need, for a job that is Kueue's when it
/// has a queue name.
pub fn plan(job: &dyn GenericJob, workloads: &[&Workload]) -> Result<Step, JobFrameworkError> {
    plan_managed(job, workloads, queue_name(job.meta()).is_some())
}

/// [`plan`] for a job whose management was decided by the caller (`managed`: it has a queue name,
/// or Kueue's `manageJobsWithoutQueueName` takes it; its Workload then has no queue and waits).
pub fn plan_managed(
    job: &dyn GenericJob,
    workloads: &[&Workload],
    managed: bool,
) -> Result<Step, JobFrameworkError> {
    if !managed || job.meta().deletion_timestamp.is_some() {
        return Ok(Step::Ignore);
    }
    // Kueue's `JobWithSkip`: e.g. a RayJob on an existing cluster is not queue-managed.
    if job.as_with_skip().is_some_and(|s| s.skip()) {
        return Ok(Step::Ignore);
    }
    // A finished job finishes its Workload and gets no new one.
    if let Some(finished) = job.finished() {
        let open = workloads
            .iter()
            .find(|w| w.metadata.deletion_timestamp.is_none() && !w.is_finished());
        return Ok(match open {
            Some(w) => Step::Finish {
                name: w.metadata.name.clone().unwrap_or_default(),
                finished,
            },
            None => Step::Nothing,
        });
    }
    let mut live: Vec<&Workload> = workloads
        .iter()
        .copied()
        .filter(|w| w.metadata.deletion_timestamp.is_none() && !w.is_finished())
        .collect();
    // A pending scale-up slice waits beside the slice it replaces, which stays the active one. Once the
    // replacement holds quota it is the active one: the slice it replaced is finished by the admission
    // controller, and is no longer compared with.
    let mut replacement = split_chain(&mut live);
    if let Some(r) = replacement.filter(|r| r.admission().is_some() && r.has_quota_reservation()) {
        live = vec![r];
        replacement = None;
    }
    if live.is_empty() {
        return Ok(if job.is_suspended() {
            Step::CreateWorkload
        } else {
            Step::SuspendThenCreate
        });
    }
    if live.len() > 1 {
        return Ok(Step::DeleteWorkloads(all_but_the_match(job, &live)));
    }
    let wl = live[0];
    let name = wl.metadata.name.clone().unwrap_or_default();
    let reserved = wl.admission().is_some() && wl.has_quota_reservation();
    // A replacement stands only beside a slice that holds quota: once that slice is evicted the job is
    // stopped and requeued whole, and the replacement has nothing left to replace. It goes first, so
    // the chain never has two pending slices.
    if let Some(r) = replacement.filter(|_| !reserved || is_evicted(wl)) {
        return Ok(Step::DeleteWorkloads(vec![
            r.metadata.name.clone().unwrap_or_default(),
        ]));
    }
    let podsets = job.pod_sets()?;
    if job.uses_slices() && !is_evicted(wl) {
        let mut change = job.compare_demand(&podsets, &wl.spec.pod_sets, reserved);
        // A slice holding quota shrinks in place only once the job's own controller has acted on its
        // current spec (`GenericJob::shrink_waits`): until then it may still make pods from an older,
        // larger one, after the pods behind this demand were listed. Nothing changes meanwhile, the
        // floor included.
        let shrink_waits = reserved && matches!(change, DemandChange::PodSets(_)) && job.shrink_waits();
        if shrink_waits {
            change = DemandChange::Same;
        }
        // The floor follows the job while the slice waits to grow too: a stale floor would hold a
        // slice whose growth is taken above what it keeps, and its new slice behind it for good.
        if reserved && change == DemandChange::Grow && stale_floor(job, wl) {
            return Ok(Step::ReplacePodSets {
                name,
                pod_sets: wl.spec.pod_sets.clone(),
            });
        }
        if let Some(r) = replacement {
            let r_name = r.metadata.name.clone().unwrap_or_default();
            match change {
                // The claim the banker's check reads is written once, when the slice is made (it may
                // go, never change): a waiting slice whose claim the job no longer makes is made again.
                // Its podsets follow the demand in place, so they can match again while the claim
                // still sizes the upgrade as it was (issue 67: a serving cluster grown by hand, then
                // scaled back while the pending one grew, left a claim 1 CPU too big, and the check
                // kept the slice waiting for good).
                DemandChange::Grow if stale_claim(job, r) => {
                    return Ok(Step::DeleteWorkloads(vec![r_name]));
                }
                // At most one pending replacement per chain (DESIGN I6): it follows the job's demand.
                DemandChange::Grow => {
                    if job.compare_demand(&podsets, &r.spec.pod_sets, false) != DemandChange::Same {
                        return Ok(Step::ReplacePodSets {
                            name: r_name,
                            pod_sets: podsets,
                        });
                    }
                }
                // The admitted slice covers the demand again (e.g. the change was rolled back).
                _ => return Ok(Step::DeleteWorkloads(vec![r_name])),
            }
        } else {
            match change {
                // The floor written on the slice follows the job (an edit of it is written over).
                DemandChange::Same if reserved && !shrink_waits && stale_floor(job, wl) => {
                    return Ok(Step::ReplacePodSets {
                        name,
                        pod_sets: wl.spec.pod_sets.clone(),
                    });
                }
                DemandChange::Same | DemandChange::Incompatible => {}
                DemandChange::Counts => return Ok(Step::UpdateCounts(name)),
                DemandChange::PodSets(pod_sets) => {
                    return Ok(Step::ReplacePodSets { name, pod_sets });
                }
                DemandChange::Grow => return Ok(Step::CreateSlice { replaces: name }),
            }
        }
        if matches!(change, DemandChange::Incompatible) {
            if !reserved {
                return Ok(Step::DeleteWorkloads(vec![name]));
            }
            // Not a resize (say new requests): the slice chain cannot take it, so as a plain job.
            return Ok(mismatch(job, wl, name));
        }
    } else if !matches_workload(job.is_suspended(), reserved, &podsets, wl) {
        return Ok(mismatch(job, wl, name));
    }
    if let Some(pods) = super::reclaimable::update(job, wl) {
        return Ok(Step::UpdateReclaimablePods { name, pods });
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
    // Kueue: a suspended job whose queue label changed moves its waiting Workload to that queue (a job
    // managed without a queue name gets one this way).
    let wl_queue = wl.spec.queue_name.as_deref().filter(|q| !q.is_empty());
    if !reserved && job.is_suspended() && wl_queue != queue_name(job.meta()) {
        return Ok(Step::UpdateQueueName(name));
    }
    Ok(Step::Nothing)
}

/// Of several Workloads a job owns, all but one, as Kueue's `ensureOneWorkload` picks it: the first
/// that matches the job (a Workload made by hand or left by an old version must not displace the one
/// the job runs on), else the first listed.
fn all_but_the_match(job: &dyn GenericJob, live: &[&Workload]) -> Vec<String> {
    let podsets = job.pod_sets().ok();
    let keep = podsets
        .as_ref()
        .and_then(|p| {
            live.iter().position(|w| {
                let reserved = w.admission().is_some() && w.has_quota_reservation();
                matches_workload(job.is_suspended(), reserved, p, w)
            })
        })
        .unwrap_or(0);
    live.iter()
        .enumerate()
        .filter(|(i, _)| *i != keep)
        .filter_map(|(_, w)| w.metadata.name.clone())
        .collect()
}

/// Kueue's `EquivalentToWorkload`: a running job on a reservation is compared with what the workload
/// admitted (the admitted counts; tolerations ignored, admission injects them), any other with the
/// workload's podsets as they are.
fn matches_workload(suspended: bool, reserved: bool, podsets: &[PodSet], wl: &Workload) -> bool {
    if reserved && !suspended {
        return podsets_equivalent(podsets, &admitted_counts(wl), true);
    }
    podsets_equivalent(podsets, &wl.spec.pod_sets, false)
}

/// The workload's podsets with the counts its admission gave them (fewer under partial admission).
fn admitted_counts(wl: &Workload) -> Vec<PodSet> {
    let mut podsets = wl.spec.pod_sets.clone();
    if let Some(a) = wl.admission() {
        for ps in &mut podsets {
            if let Some(n) = a
                .pod_set_assignments
                .iter()
                .find(|x| Some(&x.name) == ps.name.as_ref())
                .and_then(|x| x.count)
            {
                ps.count = Some(n);
            }
        }
    }
    podsets
}

/// A waiting slice's upgrade claim (`ANNOTATION_UPGRADE_CLAIM`) differs from the one the job makes
/// now: one it has and the job no longer makes, or none where the job makes one. Compared as parsed
/// claims, so only what the banker's check reads counts; an unreadable claim is stale too.
fn stale_claim(job: &dyn GenericJob, wl: &Workload) -> bool {
    let written = crate::queue::convert::upgrade_claim(wl);
    match (written, job.upgrade_claim()) {
        (Ok(w), now) => w != now,
        (Err(_), _) => true,
    }
}

/// A job whose podsets no longer match its workload. A running job on a reservation is stopped (the
/// workload no longer describes its pods; the quota gate already caps them at what it does). Deleting a
/// Workload that holds quota releases it, so that waits until no pod of the job is left (DESIGN I2): a
/// suspended job may still be stopping, and its demand may stop matching as it does (a RayService
/// deletes its children one by one). A job not yet suspended is stopped first, even with no pod at
/// this instant; an evicted one is stopped and waited on by the caller's next steps; any other waits
/// for the job's pods to go, which wakes it again.
/// An upgrade's claim stays on its slice only while the job is one: the shrink that ends the
/// upgrade (the old cluster gone, or the change rolled back) takes it off.
fn drop_finished_claim(job: &dyn GenericJob, wl: &mut Workload) {
    if job.upgrade_claim().is_none()
        && let Some(a) = wl.metadata.annotations.as_mut()
    {
        a.remove(ANNOTATION_UPGRADE_CLAIM);
    }
}

fn mismatch(job: &dyn GenericJob, wl: &Workload, name: String) -> Step {
    let reserved = wl.admission().is_some() && wl.has_quota_reservation();
    if reserved && is_evicted(wl) && !job.is_suspended() {
        return Step::Stop(name);
    }
    if !reserved {
        return Step::DeleteWorkloads(vec![name]);
    }
    if is_evicted(wl) && job.is_active() {
        return Step::Stop(name);
    }
    // Kueue stops a running job before it deletes the Workload: a job with no pod at this instant (a
    // Recreate between its old pods and its new ones) would otherwise start pods on nothing.
    if !job.is_suspended() {
        return Step::StopNotMatching(name);
    }
    if job.is_active() {
        Step::Nothing
    } else {
        Step::DeleteWorkloads(vec![name])
    }
}

/// Kueue's stop reason for an evicted workload: `WorkloadEvictedDueTo` and the Evicted condition's
/// reason (e.g. `WorkloadEvictedDueToPreempted`).
pub fn evicted_reason(wl: &Workload) -> String {
    let why = wl
        .status
        .as_ref()
        .and_then(|s| s.condition("Evicted"))
        .map(|c| c.reason.clone())
        .unwrap_or_default();
    format!("{}DueTo{why}", StopReason::WorkloadEvicted.as_str())
}

/// What every job controller shares: the client, the event recorder, leadership, and which job kinds
/// are managed (a job whose controller owner is one of them is its parent's business).
#[derive(Clone)]
pub struct JobContext {
    pub client: Client,
    pub recorder: Recorder,
    pub leader: watch::Receiver<bool>,
    pub managed_kinds: Arc<Vec<GroupVersionKind>>,
    /// Kueue's waitForPodsReady: keep each job's Workload `PodsReady` condition from its pods.
    pub wait_for_pods_ready: bool,
    /// Kueue v0.20's `PodsScheduledTrackingEnabled` (the `WaitForPodsReadyUnscheduledTimeout` gate
    /// and a positive `unscheduledTimeout`): keep each Workload's `PodsScheduled` condition from its
    /// job's pods, and say `WaitForScheduling` while they are not all scheduled.
    pub track_pods_scheduled: bool,
    /// Where waitForPodsReady's time-to-ready histograms are observed.
    pub metrics: Arc<crate::admission::metrics::Metrics>,
    /// `manageJobsWithoutQueueName` and `managedJobsNamespaceSelector`.
    pub managed_jobs: Arc<ManagedJobs>,
    /// The process's one Workload watch: the controllers that own Workloads wake from it.
    pub workload_events: crate::admission::WorkloadEvents,
}

/// Whether Kueue manages a job: it names a queue, or `manageJobsWithoutQueueName` takes it in a
/// namespace `managedJobsNamespaceSelector` selects (the namespace's labels are read from the API, only
/// then). The one decision the job reconciler takes for every kind and the Ray kinds' quota gate takes
/// for their clusters, so what one admits the other holds. A job whose controller owner is a managed
/// job is its parent's business, decided before this.
pub async fn manages(client: &Client, config: &ManagedJobs, meta: &ObjectMeta) -> Result<bool, kube::Error> {
    if queue_name(meta).is_some() {
        return Ok(true);
    }
    if !config.without_queue_name {
        return Ok(false);
    }
    let ns = meta.namespace.as_deref().unwrap_or_default();
    // A list by name: the manager's Role may list and watch namespaces, not get them.
    let found = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default().fields(&format!("metadata.name={ns}")))
        .await?;
    let labels = found
        .items
        .into_iter()
        .next()
        .and_then(|n| n.metadata.labels)
        .unwrap_or_default();
    Ok(config.manages_without_queue_name(ns, &labels))
}

impl JobContext {
    /// [`manages`] under this manager's configuration.
    pub async fn manages(&self, meta: &ObjectMeta) -> Result<bool, kube::Error> {
        manages(&self.client, &self.managed_jobs, meta).await
    }

    /// True when `meta`'s controller owner is a managed job kind (Kueue: such a job gets no Workload of
    /// its own; its parent's Workload covers it).
    pub fn owned_by_managed_parent(&self, meta: &ObjectMeta) -> bool {
        meta.owner_references.iter().flatten().any(|o| {
            o.controller == Some(true)
                && self
                    .managed_kinds
                    .iter()
                    .any(|g| g.kind == o.kind && g.api_version() == o.api_version)
        })
    }
}

/// The priority a new Workload gets from `source` (lists the priority classes it may name).
pub async fn priority(ctx: &JobContext, source: PrioritySource) -> Result<Priority, JobError> {
    let wpcs = Api::<WorkloadPriorityClass>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    // A job whose owner is a managed job never reaches here (its parent's Workload covers it).
    let gate = ctx.managed_jobs.default_workload_priority_class;
    let source = default_workload_priority_class(source, gate, false, &wpcs);
    // Kueue reads pod PriorityClasses only when the job names one or none (the global default).
    let pcs = match source {
        PrioritySource::WorkloadPriorityClass(_) => Vec::new(),
        _ => {
            Api::<PriorityClass>::all(ctx.client.clone())
                .list(&ListParams::default())
                .await?
                .items
        }
    };
    Ok(resolve_priority(&source, &wpcs, &pcs)?)
}

/// The Workloads a job owns (label `kueue.x-k8s.io/job-uid` and an owner reference to it).
pub async fn owned_workloads(client: &Client, ns: &str, uid: &str) -> Result<Vec<Workload>, kube::Error> {
    let wl_api: Api<Workload> = Api::namespaced(client.clone(), ns);
    Ok(wl_api
        .list(&ListParams::default().labels(&format!("{}={uid}", label::JOB_UID)))
        .await?
        .items
        .into_iter()
        .filter(|w| w.metadata.owner_references.iter().flatten().any(|o| o.uid == uid))
        .collect())
}

#[tracing::instrument(skip(obj, ctx), fields(name = %obj.name_any(), ns = obj.namespace().unwrap_or_default()))]
pub async fn reconcile<J: JobKind>(obj: Arc<J::Object>, ctx: Arc<JobContext>) -> Result<Action, JobError> {
    if !*ctx.leader.borrow() {
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    if ctx.owned_by_managed_parent(obj.meta()) {
        return Ok(Action::await_change());
    }
    let ns = obj.namespace().unwrap_or_default();
    let uid = obj.uid().unwrap_or_default();
    let owned = owned_workloads(&ctx.client, &ns, &uid).await?;
    // Kueue's prebuilt workload (a MultiKueue worker's copy of a job): the job runs on the Workload
    // named by its label, made for it elsewhere, and never gets one of its own.
    if let Some(prebuilt) = super::multikueue::prebuilt_workload_name(obj.meta())
        && !owned.iter().any(|w| w.name_any() == prebuilt)
        && ctx.manages(obj.meta()).await?
    {
        if crate::api::pod::group_name(obj.meta()).is_none() {
            return adopt_prebuilt::<J>(&ctx.client, &obj, &ns, prebuilt).await;
        }
        // A pod group's member: Kueue's `EnsureWorkloadOwnedByAllMembers`, each Pod an owner of the
        // group's prebuilt Workload and none its controller (an API server allows one controller).
        // The group controller runs the group; this Pod's own pass goes on to skip it.
        own_prebuilt_as_member::<J>(&ctx.client, &obj, &ns, prebuilt).await?;
    }
    let mut job = J::load(&obj, &owned, &ctx.client).await?;
    let pass = Pass::<J> {
        ctx: &ctx,
        name_of_job: obj.name_any(),
        obj_ref: obj.object_ref(&()),
        wl_api: Api::namespaced(ctx.client.clone(), &ns),
        job_api: Api::namespaced(ctx.client.clone(), &ns),
        ns,
        owned: &owned,
    };
    let refs: Vec<&Workload> = owned.iter().collect();
    let managed = ctx.manages(obj.meta()).await?;
    let step = match plan_managed(&job, &refs, managed) {
        Ok(step) => step,
        // The job's demand cannot be a Workload (e.g. more podsets than Kueue allows): retrying the same
        // spec cannot fix it, so say so on the job and wait for it to change.
        Err(JobFrameworkError::PodSets(why)) => {
            let msg = format!("no Workload can be built for the job: {why}");
            pass.refuse(&obj, "InvalidPodSets", refusal::REASON_INVALID_PODSETS, msg)
                .await;
            return Ok(Action::requeue(Duration::from_secs(60)));
        }
        Err(e) => return Err(e.into()),
    };
    tracing::debug!(?step, "job step");
    // Has a Workload: a refusal said on the job earlier is over.
    if !owned.is_empty()
        && let Err(e) = refusal::record(&pass.job_api, &obj, None).await
    {
        tracing::debug!(error = %e, "clearing the refusal on the job failed; will retry");
    }
    if let Some(action) = pass.take(&mut job, &step).await? {
        return Ok(action);
    }
    // Kueue writes PodsReady only on a reconcile that changed nothing else (its step 5): after any
    // other write the workloads read here are stale, and the change wakes the job again.
    if ctx.wait_for_pods_ready && matches!(step, Step::Nothing | Step::Start(_)) {
        let scheduling = if ctx.track_pods_scheduled {
            job.load_pods_scheduling(&ctx.client).await?;
            job.pods_scheduling()
        } else {
            None
        };
        pass.write_pods_ready(job.pods_ready(), scheduling.as_ref())
            .await?;
    }
    job.after_step(&owned, &ctx).await?;
    Ok(match step {
        // Stopping waits for the job to become inactive before the quota is given back.
        Step::Stop(_) | Step::StopNotMatching(_) if job.is_active() => {
            Action::requeue(Duration::from_secs(1))
        }
        // The safety net of kube-runtime controllers: a queue-managed job is derived again from what
        // the API holds now and then even with no event, so one missed event costs seconds, not the
        // job's progress for good (issue 44). A job with nothing to do costs two reads.
        Step::Ignore => Action::await_change(),
        _ => Action::requeue(RESYNC),
    })
}

/// Kueue's `ensurePrebuiltWorkloadOwnership`: the prebuilt Workload gets the job's owner reference and
/// job-uid label, so the next pass finds it as the job's own. Until it exists the job waits (suspended,
/// as queue-managed jobs are created).
async fn adopt_prebuilt<J: JobKind>(
    client: &Client,
    obj: &J::Object,
    ns: &str,
    name: &str,
) -> Result<Action, JobError> {
    let api: Api<Workload> = Api::namespaced(client.clone(), ns);
    let Some(wl) = api.get_opt(name).await? else {
        tracing::debug!(workload = name, "prebuilt workload not found yet");
        return Ok(Action::requeue(Duration::from_secs(2)));
    };
    let Some(owner) = obj.controller_owner_ref(&()) else {
        return Ok(Action::await_change());
    };
    let mut refs = wl.metadata.owner_references.clone().unwrap_or_default();
    refs.retain(|o| o.uid != owner.uid);
    refs.push(owner);
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": wl.metadata.resource_version,
            "labels": {label::JOB_UID: obj.uid()},
            "ownerReferences": refs,
        }
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(Action::requeue(Duration::from_millis(100)))
}

/// A pod group member's share of Kueue's `EnsureWorkloadOwnedByAllMembers`: the prebuilt Workload
/// gets the Pod as an owner that is not its controller, once (no write when it already has it).
async fn own_prebuilt_as_member<J: JobKind>(
    client: &Client,
    obj: &J::Object,
    ns: &str,
    name: &str,
) -> Result<(), JobError> {
    let api: Api<Workload> = Api::namespaced(client.clone(), ns);
    let (Some(wl), Some(mut owner)) = (api.get_opt(name).await?, obj.controller_owner_ref(&())) else {
        return Ok(());
    };
    let mut refs = wl.metadata.owner_references.clone().unwrap_or_default();
    if refs.iter().any(|o| o.uid == owner.uid) {
        return Ok(());
    }
    owner.controller = None;
    refs.push(owner);
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": wl.metadata.resource_version, "ownerReferences": refs}
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// What one reconcile of a job works with: the job's namespace and name, its Workloads as read, and
/// the APIs to write them and the job.
struct Pass<'a, J: JobKind> {
    ctx: &'a JobContext,
    ns: String,
    name_of_job: String,
    obj_ref: ObjectReference,
    wl_api: Api<Workload>,
    job_api: Api<J::Object>,
    owned: &'a [Workload],
}

impl<J: JobKind> Pass<'_, J> {
    fn find(&self, name: &str) -> Result<&Workload, JobFrameworkError> {
        self.owned
            .iter()
            .find(|w| w.name_any() == name)
            .ok_or_else(|| JobFrameworkError::NotAdmitted(name.to_string()))
    }

    /// Says on the job (a Warning event and a condition) why no Workload stands for it.
    async fn refuse(&self, obj: &J::Object, event: &str, reason: &str, msg: String) {
        shell::publish(
            &self.ctx.recorder,
            &self.obj_ref,
            EventType::Warning,
            event,
            msg.clone(),
        )
        .await;
        if let Err(e) = refusal::record(&self.job_api, obj, Some((reason, msg.as_str()))).await {
            tracing::debug!(error = %e, "recording the refusal on the job failed; will retry");
        }
    }

    /// Takes the step; `Some` when the reconcile ends here with that action.
    async fn take(&self, job: &mut J, step: &Step) -> Result<Option<Action>, JobError> {
        match step {
            Step::Ignore | Step::Nothing => {}
            Step::UpdateCounts(name) => self.update_counts(job, name).await?,
            Step::UpdateQueueName(name) => self.update_queue_name(job, name).await?,
            Step::ReplacePodSets { name, pod_sets } => self.replace_pod_sets(job, name, pod_sets).await?,
            Step::SuspendThenCreate | Step::Suspend if J::STOPS_ITSELF => {
                // Kueue's words: a job running with no Workload, or with one that holds no quota.
                let (reason, msg) = match step {
                    Step::Suspend => (StopReason::NotAdmitted, "Not admitted by cluster queue"),
                    _ => (
                        StopReason::NoMatchingWorkload,
                        "Missing Workload; unable to restore pod templates",
                    ),
                };
                job.stop_itself(reason, reason.as_str(), msg, &self.ctx.client)
                    .await?;
                shell::publish(
                    &self.ctx.recorder,
                    &self.obj_ref,
                    EventType::Normal,
                    "Stopped",
                    msg.to_string(),
                )
                .await;
            }
            Step::SuspendThenCreate | Step::Suspend => {
                let before = job.object().clone();
                job.suspend();
                self.write_job(&before, job.object()).await?;
            }
            Step::CreateWorkload | Step::CreateSlice { .. } => return self.create_workload(job, step).await,
            Step::DeleteWorkloads(names) => self.delete_workloads(names).await?,
            Step::Start(name) => self.start(job, name).await?,
            Step::Stop(name) => self.stop(job, name, false).await?,
            Step::StopNotMatching(name) => self.stop(job, name, true).await?,
            Step::Finish { name, finished } => self.finish(name, finished).await?,
            Step::UpdateReclaimablePods { name, pods } => {
                let mut obj = self.find(name)?.clone();
                obj.status.get_or_insert_with(Default::default).reclaimable_pods = pods.clone();
                self.wl_api
                    .replace_status(name, &PostParams::default(), &obj)
                    .await?;
            }
        }
        Ok(None)
    }

    /// Kueue's `Finished` condition on the job's Workload: `Succeeded` or `Failed`, with the job's
    /// own message.
    async fn finish(&self, name: &str, finished: &super::interface::Finished) -> Result<(), JobError> {
        use crate::api::kueue::constants::reason;
        let wl = self.find(name)?;
        let why = if finished.success {
            reason::SUCCEEDED
        } else {
            reason::FAILED
        };
        if let Some(status) = conditions::finished(wl, why, &finished.message, jiff::Timestamp::now()) {
            let mut obj = wl.clone();
            obj.status = Some(status);
            self.wl_api
                .replace_status(name, &PostParams::default(), &obj)
                .await?;
            let note = format!("Workload {}/{name} finished: {why}", self.ns);
            shell::publish(
                &self.ctx.recorder,
                &self.obj_ref,
                EventType::Normal,
                "FinishedWorkload",
                note,
            )
            .await;
        }
        Ok(())
    }

    /// Counts only (Kueue's ApplyPodSetCounts): a running job's templates carry injected flavor info,
    /// and the rest of a reserved workload's podsets is immutable.
    async fn update_counts(&self, job: &J, name: &str) -> Result<(), JobError> {
        let mut wl = self.find(name)?.clone();
        drop_finished_claim(job, &mut wl);
        let counts = job.pod_sets()?;
        for ps in &mut wl.spec.pod_sets {
            if let Some(c) = counts.iter().find(|c| c.name == ps.name) {
                ps.count = c.count;
            }
        }
        self.wl_api.replace(name, &PostParams::default(), &wl).await?;
        Ok(())
    }

    async fn update_queue_name(&self, job: &J, name: &str) -> Result<(), JobError> {
        let mut wl = self.find(name)?.clone();
        wl.spec.queue_name = queue_name(job.meta()).map(str::to_string);
        self.wl_api.replace(name, &PostParams::default(), &wl).await?;
        Ok(())
    }

    async fn replace_pod_sets(&self, job: &J, name: &str, pod_sets: &[PodSet]) -> Result<(), JobError> {
        let mut wl = self.find(name)?.clone();
        drop_finished_claim(job, &mut wl);
        wl.spec.pod_sets = pod_sets.to_vec();
        put_floor(job, &mut wl);
        self.wl_api.replace(name, &PostParams::default(), &wl).await?;
        shell::publish(
            &self.ctx.recorder,
            &self.obj_ref,
            EventType::Normal,
            "UpdatedWorkload",
            format!("Workload {}/{name} follows the job's demand", self.ns),
        )
        .await;
        Ok(())
    }

    /// A new Workload for the job, or a new slice replacing its admitted one.
    async fn create_workload(&self, job: &J, step: &Step) -> Result<Option<Action>, JobError> {
        let podsets = job.pod_sets()?;
        let source = priority_source(job, &podsets);
        let prio = priority(self.ctx, source).await?;
        let mut wl = construct_workload(job, podsets, prio, &WorkloadOptions::default())?;
        if job.uses_slices() {
            put_floor(job, &mut wl);
            let old: Vec<&Workload> = match step {
                Step::CreateSlice { replaces } => {
                    self.owned.iter().filter(|w| w.name_any() == *replaces).collect()
                }
                _ => Vec::new(),
            };
            prepare_workload_slice(&mut wl, &old)?;
        }
        if let Some(claim) = job.upgrade_claim() {
            let value = crate::queue::convert::upgrade_claim_annotation(&claim);
            wl.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(ANNOTATION_UPGRADE_CLAIM.to_string(), value);
        }
        let created = match self.wl_api.create(&PostParams::default(), &wl).await {
            // The API server refused the Workload for what it is (say a negative request in the
            // job's pod template): retrying cannot fix it, so say why on the job and wait for a change.
            Err(kube::Error::Api(s)) if s.code == 422 || s.code == 400 => {
                let msg = format!("the Workload for the job was refused: {}", s.message);
                self.refuse(
                    job.object(),
                    "FailedCreateWorkload",
                    refusal::REASON_WORKLOAD_REFUSED,
                    msg,
                )
                .await;
                tracing::info!(error = %s.message, "workload refused by the API server; waiting for the job to change");
                return Ok(Some(Action::requeue(Duration::from_secs(60))));
            }
            other => other,
        };
        if let Some(w) = shell::ignore_already_exists(created)? {
            let what = if matches!(step, Step::CreateSlice { .. }) {
                "workload slice "
            } else {
                ""
            };
            shell::publish(
                &self.ctx.recorder,
                &self.obj_ref,
                EventType::Normal,
                "CreatedWorkload",
                format!("Created {what}Workload: {}/{}", self.ns, w.name_any()),
            )
            .await;
        }
        Ok(None)
    }

    async fn delete_workloads(&self, names: &[String]) -> Result<(), JobError> {
        for n in names {
            // Decided on the Workload as it was read: if it changed since (say the admission
            // controller admitted this replacement and finished the slice it replaces), the API
            // refuses the delete (409) and the next pass decides on what is there now.
            let read = self.owned.iter().find(|w| w.name_any() == *n);
            let dp = DeleteParams {
                preconditions: read.map(|w| kube::api::Preconditions {
                    uid: w.metadata.uid.clone(),
                    resource_version: w.metadata.resource_version.clone(),
                }),
                ..DeleteParams::default()
            };
            if shell::ignore_not_found(self.wl_api.delete(n, &dp).await)?.is_some() {
                let note = format!("Deleted not matching Workload: {}/{n}", self.ns);
                shell::publish(
                    &self.ctx.recorder,
                    &self.obj_ref,
                    EventType::Normal,
                    "DeletedWorkload",
                    note,
                )
                .await;
            }
        }
        Ok(())
    }

    /// Writes what the controller changed in the job (`before` as read, `after` as changed) as a JSON
    /// merge patch guarded by the resourceVersion it was read at (409 if the job changed since, as a
    /// PUT would). Only the changed fields are sent: a PUT of the typed copy would rewrite every field
    /// the user wrote in another form (`cpu: 4` as `"4"`), which `kubectl diff` then shows as a change
    /// and a GitOps re-apply turns back (issue 46). Nothing changed: nothing is written.
    async fn write_job(&self, before: &J::Object, after: &J::Object) -> Result<J::Object, JobError> {
        let patch = guarded(before, after).map_err(|e| JobFrameworkError::Encode(e.to_string()))?;
        match patch {
            None => Ok(after.clone()),
            Some(p) => Ok(self
                .job_api
                .patch(&self.name_of_job, &PatchParams::default(), &Patch::Merge(&p))
                .await?),
        }
    }

    /// Runs the job with the admitted podset info.
    async fn start(&self, job: &mut J, name: &str) -> Result<(), JobError> {
        let wl = self.find(name)?;
        let flavors = super::podset_info::flavors_by_name(&self.ctx.client).await?;
        let infos = podsets_info_from_status(wl, &flavors, InfoOptions::default())?;
        let before = job.object().clone();
        job.run_with_podsets_info(&infos)?;
        self.write_job(&before, job.object()).await?;
        let cq = wl
            .admission()
            .map(|a| a.cluster_queue.clone())
            .unwrap_or_default();
        shell::publish(
            &self.ctx.recorder,
            &self.obj_ref,
            EventType::Normal,
            "Started",
            format!("Admitted by clusterQueue {cq}"),
        )
        .await;
        Ok(())
    }

    /// Stops an evicted job, and gives its quota back once no pod of it runs.
    async fn stop(&self, job: &mut J, name: &str, not_matching: bool) -> Result<(), JobError> {
        let wl = self.find(name)?;
        let was_running = !job.is_suspended();
        let originals: Vec<PodSetInfo> = wl.spec.pod_sets.iter().map(PodSetInfo::from_podset).collect();
        let msg = if not_matching {
            // Kueue's words when a running job no longer matches its Workload.
            "No matching Workload".to_string()
        } else {
            wl.status
                .as_ref()
                .and_then(|s| s.condition("Evicted"))
                .map(|c| c.message.clone())
                .unwrap_or_default()
        };
        if J::STOPS_ITSELF {
            if was_running {
                let (reason, why) = if not_matching {
                    (
                        StopReason::NoMatchingWorkload,
                        StopReason::NoMatchingWorkload.as_str().to_string(),
                    )
                } else {
                    (StopReason::WorkloadEvicted, evicted_reason(wl))
                };
                job.stop_itself(reason, &why, &msg, &self.ctx.client).await?;
            }
        } else if J::STOPS_IN_STEPS {
            // Kueue's Job `Stop`: suspended first, then what the kind needs before its templates may
            // change, then the templates restored in a write of their own. Each step is idempotent,
            // so a pass cut short (a conflict) is finished by the next one.
            if was_running {
                let before = job.object().clone();
                job.suspend();
                let suspended = self.write_job(&before, job.object()).await?;
                *job = J::load(&suspended, self.owned, &self.ctx.client).await?;
            }
            let ready = J::after_suspend(job.object().clone(), &self.ctx.client).await?;
            *job = J::load(&ready, self.owned, &self.ctx.client).await?;
            let before = job.object().clone();
            if job.restore_podsets_info(&originals) {
                self.write_job(&before, job.object()).await?;
            }
        } else if was_running {
            let before = job.object().clone();
            job.suspend();
            job.restore_podsets_info(&originals);
            self.write_job(&before, job.object()).await?;
        }
        if was_running {
            shell::publish(
                &self.ctx.recorder,
                &self.obj_ref,
                EventType::Normal,
                "Stopped",
                msg,
            )
            .await;
        }
        // Suspended means no pods run any more: give the quota back so the workload requeues. (A job
        // stopped for not matching gets a new Workload instead once its pods are gone.)
        if !not_matching
            && !job.is_active()
            && let Some(status) = conditions::clear_reservation(wl, jiff::Timestamp::now())
        {
            let mut obj = wl.clone();
            obj.status = Some(status);
            self.wl_api
                .replace_status(name, &PostParams::default(), &obj)
                .await?;
        }
        Ok(())
    }

    /// Keeps each live Workload's PodsReady condition (and Kueue's time-to-ready metrics) from the job,
    /// and with `scheduling` (Kueue v0.20's unscheduled-pods tracking) its PodsScheduled condition,
    /// both in one write.
    async fn write_pods_ready(
        &self,
        ready: bool,
        scheduling: Option<&crate::admission::PodsScheduling>,
    ) -> Result<(), JobError> {
        for wl in self.owned.iter() {
            let now = jiff::Timestamp::now();
            if let Some(status) = pods_ready_status(self.ctx, wl, ready, scheduling, now) {
                let mut obj = wl.clone();
                obj.status = Some(status.clone());
                self.wl_api
                    .replace_status(&wl.name_any(), &PostParams::default(), &obj)
                    .await?;
                crate::admission::record_pods_ready(&self.ctx.metrics, wl, &status, now);
            }
        }
        Ok(())
    }
}

impl shell::ReconcileError for JobError {
    fn category(&self) -> &'static str {
        JobError::category(self)
    }
}

/// The status `wl` should carry under waitForPodsReady for its job's pods, or `None` when it shows
/// that already (or is deleted, finished, or neither admitted nor ever given the condition: written
/// while still pending, it would race the admission's own status write for nothing): its PodsReady
/// condition from `ready`, and with `scheduling` (Kueue v0.20's unscheduled-pods tracking, when `ctx`
/// has it on) its PodsScheduled condition, in one write. For a kind whose job spans several objects
/// (a pod group), whose own controller writes it.
pub fn pods_ready_status(
    ctx: &JobContext,
    wl: &Workload,
    ready: bool,
    scheduling: Option<&crate::admission::PodsScheduling>,
    now: jiff::Timestamp,
) -> Option<crate::api::kueue::WorkloadStatus> {
    let shows = wl.is_admitted()
        || wl.status.as_ref().is_some_and(|s| {
            s.condition(crate::api::kueue::constants::condition::PODS_READY)
                .is_some()
        });
    if wl.metadata.deletion_timestamp.is_some() || wl.is_finished() || !shows {
        return None;
    }
    let tracking = ctx.track_pods_scheduled;
    let mut obj = wl.clone();
    let mut changed = false;
    if let Some(status) = scheduling
        .filter(|_| tracking)
        .and_then(|p| crate::admission::pods_scheduled_condition(&obj, p, now))
    {
        obj.status = Some(status);
        changed = true;
    }
    if let Some(status) = crate::admission::pods_ready_condition(&obj, ready, tracking, now) {
        obj.status = Some(status);
        changed = true;
    }
    if changed { obj.status } else { None }
}

/// Runs the job controller for kind `J` until `shutdown` completes.
pub async fn run<J: JobKind>(ctx: JobContext, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let client = ctx.client.clone();
    let mut leader = ctx.leader.clone();
    let ctx = Arc::new(ctx);
    let controller = Controller::new(Api::<J::Object>::all(client.clone()), J::watcher_config())
        .owns_stream(ctx.workload_events.owned_by::<J::Object>());
    let controller = J::watches(controller, &client).graceful_shutdown_on(shutdown);
    // Becoming leader re-checks every job (the followers skipped their writes).
    let controller = controller.reconcile_all_on(became_leader(&mut leader));
    shell::run(controller, "job", reconcile::<J>, ctx, |_| Duration::from_secs(1)).await;
}
