//! The RayJob state machine (KubeRay's `rayjob_controller.go` `Reconcile`), as one pure function over a
//! snapshot: which `jobDeploymentStatus` comes next, what to create or delete, which events to record.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::ray::RayJobStatus;
use crate::api::ray::raycluster::RayClusterStatus;
use crate::api::ray::rayjob::{
    DeletionPolicyType, JobDeploymentStatus as D, JobFailedReason, JobStatus, JobSubmissionMode, RayJobSpec,
    RayJobStatusInfo,
};
use crate::rayservice::dashboard::JobDetails;

/// KubeRay's `RayJobDefaultRequeueDuration`.
pub const DEFAULT_REQUEUE: Duration = Duration::from_secs(3);
/// KubeRay's `DEFAULT_RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS`.
pub const TRANSITION_GRACE_PERIOD: SignedDuration = SignedDuration::from_secs(300);

/// The RayCluster the job runs on, as read.
#[derive(Clone, Debug, PartialEq)]
pub enum ClusterView {
    Absent,
    /// Deletion in progress.
    Deleting,
    Present {
        /// `status.state: ready`.
        ready: bool,
        /// The dashboard URL of its head Service, once known.
        dashboard_url: Option<String>,
        /// Every worker group suspended (DeleteWorkers done).
        workers_suspended: bool,
        status: Option<Box<RayClusterStatus>>,
    },
}

/// What the dashboard said about the job.
#[derive(Clone, Debug, PartialEq)]
pub enum JobView {
    /// Not asked (no cluster or job id yet, or not in a state that polls).
    NotQueried,
    /// The head knows no job with this submission id.
    NotFound,
    Found(Box<JobDetails>),
    /// The dashboard did not answer usefully; retried on the next pass.
    Error(String),
}

/// The submitter batch Job of K8sJobMode.
#[derive(Clone, Debug, PartialEq)]
pub enum SubmitterView {
    Absent,
    Deleting,
    Active,
    /// Its `Complete` condition is True.
    Complete,
    /// Its `Failed` condition is True.
    Failed {
        reason: String,
        message: String,
    },
}

/// Everything a decision reads.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub now: Timestamp,
    pub namespace: String,
    pub name: String,
    pub deleting: bool,
    pub has_finalizer: bool,
    /// `spec.managedBy` names another controller (MultiKueue): KubeRay leaves it alone.
    pub managed_externally: bool,
    /// The first broken spec or metadata rule (KubeRay's `ValidateRayJobMetadata`/`ValidateRayJobSpec`).
    pub invalid: Option<String>,
    /// `ValidateRayJobStatus`.
    pub invalid_status: Option<String>,
    pub spec: RayJobSpec,
    pub status: RayJobStatus,
    pub cluster: ClusterView,
    pub job: JobView,
    pub submitter: SubmitterView,
    /// A job id to use if the job needs one (`<name>-<random>`, KubeRay's `GenerateRayJobId`).
    pub generated_job_id: String,
    /// A cluster name to use if the job needs one (KubeRay's `GenerateRayClusterName`).
    pub generated_cluster_name: String,
    /// The RayJobDeletionPolicy feature gate.
    pub deletion_policy_gate: bool,
    /// KubeRay's `DELETE_RAYJOB_CR_AFTER_JOB_FINISHES`: `shutdownAfterJobFinishes` deletes the RayJob.
    pub delete_job_after_finish: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    AddFinalizer,
    RemoveFinalizer,
    /// Best effort before the finalizer goes: the Ray job may still run.
    StopJob {
        submission_id: String,
    },
    CreateCluster {
        name: String,
    },
    DeleteCluster {
        name: String,
    },
    SuspendWorkerGroups {
        name: String,
    },
    CreateSubmitter,
    DeleteSubmitter,
    SubmitJob {
        submission_id: String,
    },
    /// Create `<job>-head-svc` or point it at this cluster (KubeRay's `reconcileServices`).
    ReconcileHeadService {
        cluster: String,
    },
    DeleteSelf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub type_: EventType,
    pub reason: &'static str,
    pub message: String,
}

/// What to do, in order, and the status to write (`None`: unchanged, as KubeRay writes only when the
/// job or deployment status changes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub events: Vec<Event>,
    pub status: Option<RayJobStatus>,
    pub requeue: Option<Duration>,
}

fn time(ts: Timestamp) -> Time {
    Time(ts)
}

fn at(t: &Option<Time>) -> Option<Timestamp> {
    t.as_ref().map(|t| t.0)
}

/// Until `deadline`, as a requeue delay (at least a tenth of a second so a due time is not missed).
fn until(now: Timestamp, deadline: Timestamp) -> Duration {
    let left = deadline.duration_since(now);
    Duration::try_from(left)
        .unwrap_or(Duration::ZERO)
        .max(Duration::from_millis(100))
}

/// One pass of the controller.
pub fn decide(s: &Snapshot) -> Plan {
    let mut plan = Plan::default();
    if s.managed_externally {
        return plan;
    }
    if s.deleting {
        let job_id = s.status.job_id.clone().filter(|id| !id.is_empty());
        if !s.status.job_status.is_some_and(JobStatus::is_terminal)
            && let (Some(submission_id), ClusterView::Present { .. }) = (job_id, &s.cluster)
        {
            plan.actions.push(Action::StopJob { submission_id });
        }
        if s.has_finalizer {
            plan.actions.push(Action::RemoveFinalizer);
        }
        return plan;
    }
    let prior = s.status.job_deployment_status;
    if prior == Some(D::ValidationFailed) {
        return plan;
    }
    if let Some(why) = &s.invalid {
        let mut next = s.status.clone();
        next.job_deployment_status = Some(D::ValidationFailed);
        next.reason = Some(JobFailedReason::ValidationFailed);
        next.message = Some(why.clone());
        plan.events.push(warning(
            "InvalidRayJobSpec",
            format!("The RayJob spec is invalid: {why}"),
        ));
        plan.status = Some(next);
        return plan;
    }
    if let Some(why) = &s.invalid_status {
        plan.events.push(warning(
            "InvalidRayJobStatus",
            format!("The RayJob status is invalid: {why}"),
        ));
        plan.requeue = Some(DEFAULT_REQUEUE);
        return plan;
    }

    let mut next = s.status.clone();
    plan.requeue = Some(DEFAULT_REQUEUE);
    match prior {
        None => {
            if !s.has_finalizer {
                plan.actions.push(Action::AddFinalizer);
            }
            init_status(s, &mut next);
        }
        Some(D::Initializing) => {
            let handled = suspending(s, &mut next) || deadline_passed(s, &mut next);
            if !handled && !initialize(s, &mut next, &mut plan) {
                return plan;
            }
        }
        Some(D::Waiting) => match s.spec.job_id.as_deref().filter(|id| !id.is_empty()) {
            Some(id) => {
                next.job_id = Some(id.to_owned());
                next.job_deployment_status = Some(D::Running);
            }
            None => return plan,
        },
        Some(D::Running) => {
            let handled = suspending(s, &mut next)
                || deadline_passed(s, &mut next)
                || grace_period_passed(s, &mut next);
            if !handled && !running(s, &mut next, &mut plan) {
                return plan;
            }
        }
        Some(D::Suspending) | Some(D::Retrying) => {
            if !release(s, &mut next, &mut plan) {
                return plan;
            }
        }
        Some(D::Suspended) => {
            if s.spec.is_suspended() {
                plan.requeue = None;
                return plan;
            }
            next.job_status = None;
            next.job_deployment_status = None;
        }
        Some(D::Complete) | Some(D::Failed) => {
            finished(s, &mut plan);
            return plan;
        }
        Some(D::ValidationFailed) => return plan,
    }
    check_backoff_limit(&s.spec, &mut next);
    if next.job_status != s.status.job_status || next.job_deployment_status != s.status.job_deployment_status
    {
        if next.job_deployment_status.is_some_and(D::is_terminal) {
            next.end_time = Some(time(s.now));
        }
        plan.status = Some(next);
        // The next state's work starts at once.
        plan.requeue = Some(Duration::ZERO);
    }
    plan
}

fn warning(reason: &'static str, message: String) -> Event {
    Event {
        type_: EventType::Warning,
        reason,
        message,
    }
}

fn normal(reason: &'static str, message: String) -> Event {
    Event {
        type_: EventType::Normal,
        reason,
        message,
    }
}

/// KubeRay's `initRayJobStatusIfNeed`: fix the job id and cluster name before anything is created, so a
/// retry of this pass cannot submit or create twice.
fn init_status(s: &Snapshot, next: &mut RayJobStatus) {
    let interactive = s.spec.mode() == JobSubmissionMode::InteractiveMode;
    if !interactive && next.job_id.as_deref().unwrap_or("").is_empty() {
        next.job_id = Some(match s.spec.job_id.as_deref().filter(|id| !id.is_empty()) {
            Some(id) => id.to_owned(),
            None => s.generated_job_id.clone(),
        });
    }
    if next.ray_cluster_name.as_deref().unwrap_or("").is_empty() {
        next.ray_cluster_name = Some(match s.spec.selected_cluster() {
            Some(name) => name.to_owned(),
            None => s.generated_cluster_name.clone(),
        });
    }
    next.job_deployment_status = Some(D::Initializing);
    next.start_time = Some(time(s.now));
}

/// `updateStatusToSuspendingIfNeeded` (only Initializing and Running may suspend).
fn suspending(s: &Snapshot, next: &mut RayJobStatus) -> bool {
    if !s.spec.is_suspended() {
        return false;
    }
    next.job_deployment_status = Some(D::Suspending);
    true
}

/// `checkActiveDeadlineAndUpdateStatusIfNeeded`.
fn deadline_passed(s: &Snapshot, next: &mut RayJobStatus) -> bool {
    let (Some(secs), Some(start)) = (s.spec.active_deadline_seconds, at(&s.status.start_time)) else {
        return false;
    };
    if s.now < start + SignedDuration::from_secs(i64::from(secs)) {
        return false;
    }
    next.job_deployment_status = Some(D::Failed);
    next.reason = Some(JobFailedReason::DeadlineExceeded);
    next.message = Some(format!(
        "The RayJob has passed the activeDeadlineSeconds. StartTime: {start}. ActiveDeadlineSeconds: {secs}"
    ));
    true
}

/// `checkTransitionGracePeriodAndUpdateStatusIfNeeded`: a Ray job that ended but whose deployment status
/// did not follow (e.g. the submitter never finished) is ended after the grace period.
fn grace_period_passed(s: &Snapshot, next: &mut RayJobStatus) -> bool {
    let Some(job_status) = s.status.job_status.filter(|j| j.is_terminal()) else {
        return false;
    };
    let Some(ended) = s.status.ray_job_info.as_ref().and_then(|i| at(&i.end_time)) else {
        return false;
    };
    if s.now < ended + TRANSITION_GRACE_PERIOD {
        return false;
    }
    next.job_deployment_status = Some(if job_status == JobStatus::Failed {
        D::Failed
    } else {
        D::Complete
    });
    next.reason = Some(JobFailedReason::JobDeploymentStatusTransitionGracePeriodExceeded);
    next.message = Some("JobDeploymentStatus does not transition to Complete or Failed within the grace period after JobStatus reaches a terminal state.".into());
    true
}

/// The cluster to run on, created when missing (KubeRay's `getOrCreateRayClusterInstance`). `None`
/// when this pass must wait.
fn ensure_cluster<'a>(s: &'a Snapshot, plan: &mut Plan) -> Option<&'a ClusterView> {
    let name = s.status.ray_cluster_name.clone().unwrap_or_default();
    match &s.cluster {
        ClusterView::Absent if s.spec.uses_cluster_selector() => {
            plan.events.push(warning(
                "FailedToGetRayCluster",
                format!(
                    "the ClusterSelector mode was chosen but RayCluster {}/{name} does not exist",
                    s.namespace
                ),
            ));
            None
        }
        ClusterView::Absent => {
            plan.actions.push(Action::CreateCluster { name: name.clone() });
            plan.events.push(normal(
                "CreatedRayCluster",
                format!("Created RayCluster {}/{name}", s.namespace),
            ));
            None
        }
        ClusterView::Deleting => None,
        present => Some(present),
    }
}

/// Initializing: the cluster exists and is ready, its dashboard is known, the submitter is created.
/// False when this pass waits.
fn initialize(s: &Snapshot, next: &mut RayJobStatus, plan: &mut Plan) -> bool {
    let Some(ClusterView::Present {
        ready, dashboard_url, ..
    }) = ensure_cluster(s, plan)
    else {
        return false;
    };
    if next.dashboard_url.as_deref().unwrap_or("").is_empty() {
        match (ready, dashboard_url) {
            (true, Some(url)) => next.dashboard_url = Some(url.clone()),
            _ => return false,
        }
    }
    match s.spec.mode() {
        JobSubmissionMode::InteractiveMode => {
            next.job_deployment_status = Some(D::Waiting);
            return true;
        }
        JobSubmissionMode::K8sJobMode if s.submitter == SubmitterView::Absent => {
            plan.actions.push(Action::CreateSubmitter);
            plan.events.push(normal(
                "CreatedRayJobSubmitter",
                format!("Created Kubernetes Job {}/{}", s.namespace, s.name),
            ));
        }
        _ => {}
    }
    next.job_deployment_status = Some(D::Running);
    true
}

/// Running: poll the Ray job and follow it to its end. False when this pass waits.
fn running(s: &Snapshot, next: &mut RayJobStatus, plan: &mut Plan) -> bool {
    // K8sJobMode's submitter Job, or SidecarMode's submitter container in the head pod.
    let k8s_job = matches!(
        s.spec.mode(),
        JobSubmissionMode::K8sJobMode | JobSubmissionMode::SidecarMode
    );
    if k8s_job && let SubmitterView::Failed { reason, message } = &s.submitter {
        next.job_deployment_status = Some(D::Failed);
        if s.status.job_status == Some(JobStatus::Failed) {
            next.reason = Some(JobFailedReason::AppFailed);
        } else {
            next.reason = Some(JobFailedReason::SubmissionFailed);
            next.message = Some(format!(
                "Job submission has failed. Reason: {reason}. Message: {message}"
            ));
        }
        return true;
    }
    let Some(ClusterView::Present {
        status: cluster_status,
        ..
    }) = ensure_cluster(s, plan)
    else {
        return false;
    };
    if !s.spec.uses_cluster_selector() {
        plan.actions.push(Action::ReconcileHeadService {
            cluster: s.status.ray_cluster_name.clone().unwrap_or_default(),
        });
    }
    let info = match &s.job {
        JobView::Found(info) => info,
        JobView::NotFound if s.spec.mode() == JobSubmissionMode::HTTPMode => {
            let submission_id = s.status.job_id.clone().unwrap_or_default();
            plan.actions.push(Action::SubmitJob { submission_id });
            return false;
        }
        _ => return false,
    };
    let job_status = JobStatus::parse(&info.status);
    let mut terminal = job_status.is_some_and(JobStatus::is_terminal);
    // KubeRay #1919: in K8sJobMode the submitter must have finished too (it tails the logs).
    if k8s_job {
        terminal &= matches!(
            s.submitter,
            SubmitterView::Complete | SubmitterView::Failed { .. }
        );
    }
    next.job_deployment_status = Some(D::Running);
    next.reason = None;
    if terminal {
        if job_status == Some(JobStatus::Failed) {
            next.job_deployment_status = Some(D::Failed);
            next.reason = Some(JobFailedReason::AppFailed);
        } else {
            next.job_deployment_status = Some(D::Complete);
        }
    }
    next.ray_cluster_status = cluster_status.as_deref().cloned();
    next.job_status = job_status;
    next.message = info.message.clone();
    let ms = |v: Option<u64>| {
        v.filter(|v| *v > 0)
            .and_then(|v| i64::try_from(v).ok())
            .and_then(|v| Timestamp::from_millisecond(v).ok())
            .map(time)
    };
    let info_times = RayJobStatusInfo {
        start_time: ms(info.start_time),
        end_time: ms(info.end_time),
    };
    next.ray_job_info = (info_times != RayJobStatusInfo::default()).then_some(info_times);
    true
}

/// Suspending and Retrying: delete the cluster and the submitter, then reset. False while they go.
fn release(s: &Snapshot, next: &mut RayJobStatus, plan: &mut Plan) -> bool {
    // A cluster the job does not own (clusterSelector) is never deleted.
    let own_cluster = !s.spec.uses_cluster_selector();
    let mut gone = true;
    if own_cluster {
        match &s.cluster {
            ClusterView::Absent => {}
            ClusterView::Deleting => gone = false,
            ClusterView::Present { .. } => {
                let name = s.status.ray_cluster_name.clone().unwrap_or_default();
                plan.actions.push(Action::DeleteCluster { name: name.clone() });
                plan.events.push(normal(
                    "DeletedRayCluster",
                    format!("Deleted cluster {}/{name}", s.namespace),
                ));
                gone = false;
            }
        }
    }
    if s.spec.mode() == JobSubmissionMode::K8sJobMode {
        match &s.submitter {
            SubmitterView::Absent => {}
            SubmitterView::Deleting => gone = false,
            _ => {
                plan.actions.push(Action::DeleteSubmitter);
                gone = false;
            }
        }
    }
    if !gone {
        return false;
    }
    if own_cluster {
        next.ray_cluster_status = None;
        next.ray_cluster_name = None;
    }
    next.dashboard_url = None;
    next.job_id = None;
    next.message = None;
    next.reason = None;
    next.ray_job_info = None;
    next.job_status = None;
    next.job_deployment_status = match s.status.job_deployment_status {
        Some(D::Suspending) => Some(D::Suspended),
        _ => None,
    };
    true
}

/// `checkBackoffLimitAndUpdateStatusIfNeeded`: count the outcome, and retry a failure (not a missed
/// deadline) while retries are left.
fn check_backoff_limit(spec: &RayJobSpec, next: &mut RayJobStatus) {
    let mut failed = next.failed.unwrap_or(0);
    let mut succeeded = next.succeeded.unwrap_or(0);
    if next.job_deployment_status == Some(D::Failed) {
        failed = failed.saturating_add(1);
    }
    if next.job_status == Some(JobStatus::Succeeded) && next.job_deployment_status == Some(D::Complete) {
        succeeded = succeeded.saturating_add(1);
    }
    next.failed = Some(failed);
    next.succeeded = Some(succeeded);
    if next.job_deployment_status == Some(D::Failed)
        && let Some(limit) = spec.backoff_limit
        && failed < limit.saturating_add(1)
        && next.reason != Some(JobFailedReason::DeadlineExceeded)
    {
        next.job_deployment_status = Some(D::Retrying);
    }
}

/// Complete and Failed: what to delete and when (`deletionStrategy`, else `shutdownAfterJobFinishes` +
/// `ttlSecondsAfterFinished`). Nothing is polled afterwards.
fn finished(s: &Snapshot, plan: &mut Plan) {
    // Nothing is polled once the job ended; only a pending TTL wakes it.
    plan.requeue = None;
    let end = at(&s.status.end_time).unwrap_or(s.now);
    let selector = s.spec.uses_cluster_selector();
    let cluster = s.status.ray_cluster_name.clone().unwrap_or_default();
    let strategy = s
        .spec
        .deletion_strategy
        .as_ref()
        .filter(|_| s.deletion_policy_gate && !selector);
    if let Some(strategy) = strategy {
        let rules = strategy.deletion_rules.as_deref().unwrap_or(&[]);
        // (policy, due) of every rule this ending triggers.
        let mut triggered: Vec<(DeletionPolicyType, Timestamp)> = Vec::new();
        if rules.is_empty() {
            let legacy = match s.status.job_status {
                Some(JobStatus::Succeeded) => strategy.on_success.as_ref(),
                Some(JobStatus::Failed) => strategy.on_failure.as_ref(),
                _ => None,
            };
            if let Some(policy) = legacy.and_then(|p| p.policy) {
                triggered.push((
                    policy,
                    end + SignedDuration::from_secs(i64::from(s.spec.ttl_seconds().max(0))),
                ));
            }
        } else {
            for rule in rules {
                let c = &rule.condition;
                let matches = match (c.job_status, c.job_deployment_status) {
                    (Some(js), None) => s.status.job_status == Some(js),
                    (None, Some(ds)) => s.status.job_deployment_status == Some(ds),
                    _ => false,
                };
                if matches {
                    triggered.push((
                        rule.policy,
                        end + SignedDuration::from_secs(i64::from(c.ttl_seconds.unwrap_or(0).max(0))),
                    ));
                }
            }
        }
        // The most impactful overdue rule runs first (KubeRay: DeleteSelf before DeleteCluster before
        // DeleteWorkers); rules not yet due wake the job when they are.
        let impact = |p: DeletionPolicyType| match p {
            DeletionPolicyType::DeleteSelf => 3,
            DeletionPolicyType::DeleteCluster => 2,
            DeletionPolicyType::DeleteWorkers => 1,
            DeletionPolicyType::DeleteNone => 0,
        };
        let due = triggered
            .iter()
            .filter(|(_, t)| *t <= s.now)
            .map(|(p, _)| *p)
            .max_by_key(|p| impact(*p));
        match due {
            Some(DeletionPolicyType::DeleteSelf) => plan.actions.push(Action::DeleteSelf),
            Some(DeletionPolicyType::DeleteCluster) => delete_cluster(s, &cluster, plan),
            Some(DeletionPolicyType::DeleteWorkers) => {
                if matches!(
                    s.cluster,
                    ClusterView::Present {
                        workers_suspended: false,
                        ..
                    }
                ) {
                    plan.actions.push(Action::SuspendWorkerGroups {
                        name: cluster.clone(),
                    });
                    plan.events.push(normal(
                        "UpdatedRayCluster",
                        format!(
                            "Set the `suspend` field to true for all worker groups in cluster {}/{cluster}",
                            s.namespace
                        ),
                    ));
                }
            }
            Some(DeletionPolicyType::DeleteNone) | None => {}
        }
        let top = due.map_or(-1, impact);
        plan.requeue = triggered
            .iter()
            .filter(|(p, t)| *t > s.now && impact(*p) > top)
            .map(|(_, t)| until(s.now, *t))
            .min();
        return;
    }
    if s.spec.shutdown_after_finish() && !selector {
        let shutdown_at = end + SignedDuration::from_secs(i64::from(s.spec.ttl_seconds().max(0)));
        if s.now < shutdown_at {
            plan.requeue = Some(until(s.now, shutdown_at));
            return;
        }
        if s.delete_job_after_finish {
            plan.actions.push(Action::DeleteSelf);
        } else {
            // The submitter Job stays so its logs can still be read; a finished Job holds no resources.
            delete_cluster(s, &cluster, plan);
        }
    }
}

fn delete_cluster(s: &Snapshot, name: &str, plan: &mut Plan) {
    if matches!(s.cluster, ClusterView::Present { .. }) {
        plan.actions.push(Action::DeleteCluster {
            name: name.to_owned(),
        });
        plan.events.push(normal(
            "DeletedRayCluster",
            format!("Deleted cluster {}/{name}", s.namespace),
        ));
    }
}
