//! The RayJob controller's I/O shell: read a snapshot, call [`decide`], execute the actions in order,
//! write the status, record the events. Nothing is decided here.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{EnvVar, PodSpec, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::events::{EventType as KEventType, Reporter};
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tracing::instrument;

use super::decide::{Action, ClusterView, EventType, JobView, Snapshot, SubmitterView, decide};
pub use super::template::{default_submitter_template, submitter_template_for};
use crate::api::ray::RayCluster;
use crate::api::ray::constants as c;
use crate::api::ray::raycluster::{ClusterState, RayClusterSpec};
use crate::api::ray::rayjob::{JobSubmissionMode, RayJob};
use crate::api::ray::validation::{RayFeatureGates, validate_ray_job_status, validate_ray_job_with};
use crate::kit::events::Recorder;
use crate::kit::shell;
use crate::rayservice::cluster::names;
use crate::rayservice::dashboard::{DashboardEndpoint, DashboardError, JobSubmitRequest, RayJobsApi};
use crate::rayservice::service::auth;

/// KubeRay's finalizer that stops the Ray job when the RayJob is deleted.
pub const FINALIZER: &str = "ray.io/rayjob-finalizer";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("RayJob has no {0}")]
    MissingField(&'static str),
    #[error("submitting Ray job {submission_id}: {source}")]
    Submit {
        submission_id: String,
        source: DashboardError,
    },
    #[error("encoding {what}: {source}")]
    Encode {
        what: &'static str,
        source: serde_json::Error,
    },
    /// What the submitter's command needs from the spec cannot be built (KubeRay returns the error).
    #[error("{0}")]
    InvalidSpec(String),
}

impl shell::ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::MissingField(_) | Error::InvalidSpec(_) => "invalid_object",
            Error::Submit { .. } => "dashboard",
            Error::Encode { .. } => "encode",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub cluster_domain: String,
    pub dashboard_port: u16,
    /// Poll interval while a job runs (KubeRay: 3 s).
    pub requeue: Duration,
    pub error_backoff: Duration,
    pub gates: RayFeatureGates,
    /// KubeRay's `DELETE_RAYJOB_CR_AFTER_JOB_FINISHES`.
    pub delete_job_after_finish: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            cluster_domain: "cluster.local".into(),
            dashboard_port: crate::rayservice::dashboard::DEFAULT_DASHBOARD_PORT,
            requeue: super::decide::DEFAULT_REQUEUE,
            error_backoff: Duration::from_secs(5),
            gates: RayFeatureGates::default(),
            delete_job_after_finish: false,
        }
    }
}

pub struct Context {
    pub client: Client,
    pub jobs: Arc<dyn RayJobsApi>,
    pub recorder: Recorder,
    pub config: Config,
}

impl Context {
    pub fn new(client: Client, jobs: Arc<dyn RayJobsApi>) -> Self {
        let reporter = Reporter {
            controller: "quotagate-rayjob".into(),
            instance: None,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            jobs,
            config: Config::default(),
        }
    }
}

/// Runs the controller until the stream ends (watches RayJobs and the RayClusters and Jobs they own).
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let mut controller = Controller::new(Api::<RayJob>::all(client.clone()), watcher::Config::default())
        .owns(Api::<RayCluster>::all(client.clone()), watcher::Config::default());
    // A server that serves no batch Jobs (an embedded cluster without the Job kind) would fail this
    // watch forever and stall the others with it; K8sJobMode jobs then wait for their submitter.
    if batch_jobs_served(&client).await {
        controller = controller.owns(Api::<Job>::all(client), watcher::Config::default());
    }
    shell::run(controller, "rayjob", reconcile, ctx, |c| c.config.error_backoff).await;
}

/// Whether batch Jobs can be watched: served, and allowed (the shipped Role grants them only when
/// K8sJobMode is wanted; a forbidden watch would stall the controller's other watches too).
async fn batch_jobs_served(client: &Client) -> bool {
    let api: Api<Job> = Api::all(client.clone());
    api.list(&kube::api::ListParams::default().limit(1)).await.is_ok()
}

#[instrument(skip_all, fields(name = %job.name_any(), ns = job.namespace().unwrap_or_default()))]
pub async fn reconcile(job: Arc<RayJob>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    let ns = job.namespace().ok_or(Error::MissingField("metadata.namespace"))?;
    let snapshot = observe(&job, &ns, &ctx).await?;
    let plan = decide(&snapshot);
    let mut current = (*job).clone();
    for action in &plan.actions {
        execute(&mut current, &ns, action, &snapshot, plan.status.as_ref(), &ctx).await?;
    }
    for e in &plan.events {
        let type_ = match e.type_ {
            EventType::Normal => KEventType::Normal,
            EventType::Warning => KEventType::Warning,
        };
        shell::publish(
            &ctx.recorder,
            &job.object_ref(&()),
            type_,
            e.reason,
            e.message.clone(),
        )
        .await;
    }
    if plan.actions.contains(&Action::DeleteSelf) || plan.actions.contains(&Action::RemoveFinalizer) {
        return Ok(Requeue::await_change());
    }
    if let Some(status) = &plan.status {
        current.status = Some(status.clone());
        let api: Api<RayJob> = Api::namespaced(ctx.client.clone(), &ns);
        api.replace_status(&current.name_any(), &PostParams::default(), &current)
            .await?;
    }
    Ok(match plan.requeue {
        Some(d) if d.is_zero() => Requeue::requeue(Duration::from_millis(10)),
        Some(d) => Requeue::requeue(d.min(ctx.config.requeue).max(Duration::from_millis(10))),
        None => Requeue::await_change(),
    })
}

/// The head Service's dashboard address as KubeRay stores it in `status.dashboardURL` (no scheme).
fn dashboard_address(rc: &RayCluster, ns: &str, cfg: &Config) -> String {
    let svc = names::head_service_name(&rc.name_any(), &rc.spec);
    format!("{svc}.{ns}.svc.{}:{}", cfg.cluster_domain, cfg.dashboard_port)
}

/// The endpoint to call, with the cluster's token when it uses token auth (a missing Secret is an
/// unanswered call, retried).
async fn endpoint(address: &str, rc: Option<&RayCluster>, ns: &str, ctx: &Context) -> DashboardEndpoint {
    let url = if address.contains("://") {
        address.to_owned()
    } else {
        format!("http://{address}")
    };
    let endpoint = DashboardEndpoint::new(url);
    let Some(secret_name) = rc.and_then(auth::token_secret_name) else {
        return endpoint;
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    match secrets.get_opt(&secret_name).await {
        Ok(Some(secret)) => match auth::token_from_secret(&secret) {
            Ok(token) => endpoint.with_token(token),
            Err(_) => endpoint,
        },
        _ => endpoint,
    }
}

async fn observe(job: &RayJob, ns: &str, ctx: &Context) -> Result<Snapshot, Error> {
    let status = job.status.clone().unwrap_or_default();
    let clusters: Api<RayCluster> = Api::namespaced(ctx.client.clone(), ns);
    let cluster_name = status.ray_cluster_name.clone().filter(|n| !n.is_empty());
    let rc = match &cluster_name {
        Some(n) => clusters.get_opt(n).await?,
        None => None,
    };
    let cluster = match &rc {
        None => ClusterView::Absent,
        Some(rc) if rc.metadata.deletion_timestamp.is_some() => ClusterView::Deleting,
        Some(rc) => ClusterView::Present {
            ready: rc.status.as_ref().and_then(|s| s.state) == Some(ClusterState::Ready),
            dashboard_url: Some(dashboard_address(rc, ns, &ctx.config)),
            workers_suspended: rc.spec.worker_groups().iter().all(|g| g.suspend == Some(true)),
            status: rc.status.clone().map(Box::new),
        },
    };
    let polls = status.job_deployment_status == Some(crate::api::ray::rayjob::JobDeploymentStatus::Running);
    let job_id = status.job_id.clone().filter(|id| !id.is_empty());
    let address = status.dashboard_url.clone().filter(|u| !u.is_empty());
    let job_view = match (polls, &cluster, job_id, address) {
        (true, ClusterView::Present { .. }, Some(id), Some(address)) => {
            let ep = endpoint(&address, rc.as_ref(), ns, ctx).await;
            match ctx.jobs.job_info(&ep, &id).await {
                Ok(Some(info)) => JobView::Found(Box::new(info)),
                Ok(None) => JobView::NotFound,
                Err(e) => JobView::Error(e.to_string()),
            }
        }
        _ => JobView::NotQueried,
    };
    let submitter = if job.spec.mode() == JobSubmissionMode::SidecarMode {
        match &cluster_name {
            Some(n) if rc.is_some() => {
                let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(ctx.client.clone(), ns);
                let selector = format!(
                    "{}={n},{}={}",
                    c::LABEL_CLUSTER,
                    c::LABEL_NODE_TYPE,
                    c::NODE_TYPE_HEAD
                );
                let restart_limit = ctx.config.gates.sidecar_submitter_restart.then(|| {
                    job.spec
                        .submitter_config
                        .as_ref()
                        .and_then(|s| s.backoff_limit)
                        .unwrap_or(super::sidecar::DEFAULT_RESTART_LIMIT)
                });
                super::sidecar::view(
                    &pods
                        .list(&kube::api::ListParams::default().labels(&selector))
                        .await?
                        .items,
                    restart_limit,
                )
            }
            _ => SubmitterView::Absent,
        }
    } else if job.spec.mode() == JobSubmissionMode::K8sJobMode {
        let api: Api<Job> = Api::namespaced(ctx.client.clone(), ns);
        match api.get_opt(&job.name_any()).await {
            Ok(found) => submitter_view(found.as_ref()),
            // batch Jobs not served: there is no submitter to read.
            Err(kube::Error::Api(e)) if e.code == 404 => SubmitterView::Absent,
            Err(e) => return Err(e.into()),
        }
    } else {
        SubmitterView::Absent
    };
    let invalid = validate_ray_job_with(job, ctx.config.gates);
    let status_errors = validate_ray_job_status(job);
    let spec_error = invalid
        .iter()
        .find(|e| !status_errors.contains(e))
        .map(|e| e.to_string());
    Ok(Snapshot {
        now: Timestamp::now(),
        namespace: ns.to_owned(),
        name: job.name_any(),
        deleting: job.metadata.deletion_timestamp.is_some(),
        has_finalizer: job.finalizers().iter().any(|f| f == FINALIZER),
        managed_externally: job
            .spec
            .managed_by
            .as_deref()
            .is_some_and(|m| m != c::MANAGED_BY_KUBERAY),
        invalid: spec_error,
        invalid_status: status_errors.first().map(|e| e.to_string()),
        spec: job.spec.clone(),
        status,
        cluster,
        job: job_view,
        submitter,
        generated_job_id: format!("{}-{}", job.name_any(), shell::random_suffix()),
        generated_cluster_name: names::child_cluster_name(&job.name_any(), &shell::random_suffix()),
        deletion_policy_gate: ctx.config.gates.job_deletion_policy,
        delete_job_after_finish: ctx.config.delete_job_after_finish,
    })
}

fn submitter_view(job: Option<&Job>) -> SubmitterView {
    let Some(job) = job else {
        return SubmitterView::Absent;
    };
    if job.metadata.deletion_timestamp.is_some() {
        return SubmitterView::Deleting;
    }
    let conds = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[]);
    let is_true = |t: &str| conds.iter().find(|c| c.type_ == t && c.status == "True");
    if let Some(f) = is_true("Failed") {
        return SubmitterView::Failed {
            reason: f.reason.clone().unwrap_or_default(),
            message: f.message.clone().unwrap_or_default(),
        };
    }
    if is_true("Complete").is_some() {
        return SubmitterView::Complete;
    }
    SubmitterView::Active
}

fn owner_ref(job: &RayJob) -> Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference, Error> {
    let mut owner = job
        .controller_owner_ref(&())
        .ok_or(Error::MissingField("metadata.uid"))?;
    owner.block_owner_deletion = Some(true);
    Ok(owner)
}

/// KubeRay's `constructRayClusterForRayJob`: the job's labels and annotations, plus where it came from.
/// `sidecar_restart` is the SidecarSubmitterRestart gate.
pub fn build_cluster(job: &RayJob, name: &str, sidecar_restart: bool) -> Result<RayCluster, Error> {
    let mut spec = job
        .spec
        .ray_cluster_spec
        .clone()
        .ok_or(Error::MissingField("spec.rayClusterSpec"))?;
    if job.spec.mode() == JobSubmissionMode::SidecarMode {
        let id = job
            .status
            .as_ref()
            .and_then(|s| s.job_id.clone())
            .unwrap_or_default();
        super::sidecar::add(&mut spec, job, &id, sidecar_restart).map_err(Error::InvalidSpec)?;
    }
    let mut labels = job.labels().clone();
    labels.insert(c::LABEL_ORIGINATED_FROM_CR_NAME.into(), job.name_any());
    labels.insert(c::LABEL_ORIGINATED_FROM_CRD.into(), c::CRD_RAY_JOB.into());
    let mut rc = RayCluster::new(name, spec);
    rc.metadata.namespace = job.namespace();
    rc.metadata.labels = Some(labels);
    rc.metadata.annotations = job.metadata.annotations.clone();
    rc.metadata.owner_references = Some(vec![owner_ref(job)?]);
    Ok(rc)
}

/// KubeRay's submitter Job (`createNewK8sJob` with `getSubmitterTemplate`): `ray job submit` with the job's
/// id (so a resubmission is refused rather than doubled), then follow its logs. `cluster` is the spec of
/// the RayCluster the job runs on (KubeRay's `getSubmitterTemplate` reads the cluster object); without
/// it the job's own `rayClusterSpec` stands in.
pub fn build_submitter(job: &RayJob, cluster: Option<&RayClusterSpec>) -> Result<Job, Error> {
    let status = job.status.clone().unwrap_or_default();
    let address = status.dashboard_url.unwrap_or_default();
    let id = status.job_id.unwrap_or_default();
    let mut template = match &job.spec.submitter_pod_template {
        Some(t) => t.clone(),
        None => submitter_template_for(cluster.or(job.spec.ray_cluster_spec.as_ref())),
    };
    let spec = template.spec.get_or_insert_with(PodSpec::default);
    if spec.containers.is_empty() {
        return Err(Error::MissingField("spec.submitterPodTemplate.spec.containers"));
    }
    let container = &mut spec.containers[0];
    if container.command.as_ref().is_none_or(Vec::is_empty) {
        let entrypoint = job.spec.entrypoint.as_deref().unwrap_or_default().trim();
        let options = super::submit_command::options(job, &id).map_err(Error::InvalidSpec)?;
        let script = format!(
            "if ! ray job status --address http://{address} {id} >/dev/null 2>&1 ; then ray job submit --address http://{address} --no-wait{options} -- {entrypoint} ; fi ; ray job logs --address http://{address} --follow {id}"
        );
        container.command = Some(vec!["/bin/bash".into(), "-ce".into(), "--".into()]);
        container.args = Some(vec![script]);
    }
    let env = container.env.get_or_insert_with(Vec::new);
    for (name, value) in [
        ("PYTHONUNBUFFERED", "1".to_string()),
        ("RAY_DASHBOARD_ADDRESS", address.clone()),
        ("RAY_JOB_SUBMISSION_ID", id.clone()),
    ] {
        env.push(EnvVar {
            name: name.into(),
            value: Some(value),
            ..Default::default()
        });
    }
    let labels = [
        (c::LABEL_ORIGINATED_FROM_CR_NAME.to_string(), job.name_any()),
        (
            c::LABEL_ORIGINATED_FROM_CRD.to_string(),
            c::CRD_RAY_JOB.to_string(),
        ),
        (c::LABEL_CREATED_BY.to_string(), c::COMPONENT_NAME.to_string()),
    ];
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(job.name_any()),
            namespace: job.namespace(),
            labels: Some(labels.into_iter().collect()),
            owner_references: Some(vec![owner_ref(job)?]),
            ..Default::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(
                job.spec
                    .submitter_config
                    .as_ref()
                    .and_then(|s| s.backoff_limit)
                    .unwrap_or(2),
            ),
            template,
            ..Default::default()
        }),
        status: None,
    })
}

/// The Jobs API request for the job (KubeRay's `ConvertRayJobToReq`).
pub fn submit_request(job: &RayJob, submission_id: &str) -> Result<JobSubmitRequest, String> {
    let runtime_env = match job
        .spec
        .runtime_env_yaml
        .as_deref()
        .filter(|y| !y.trim().is_empty())
    {
        Some(yaml) => Some(
            serde_saphyr::from_str::<serde_json::Value>(yaml)
                .map_err(|e| format!("spec.runtimeEnvYAML: {e}"))?,
        ),
        None => None,
    };
    let entrypoint_resources = match job
        .spec
        .entrypoint_resources
        .as_deref()
        .filter(|r| !r.trim().is_empty())
    {
        Some(r) => Some(serde_json::from_str(r).map_err(|e| format!("spec.entrypointResources: {e}"))?),
        None => None,
    };
    Ok(JobSubmitRequest {
        entrypoint: job.spec.entrypoint.clone().unwrap_or_default(),
        submission_id: Some(submission_id.to_owned()),
        runtime_env,
        metadata: job.spec.metadata.clone(),
        entrypoint_num_cpus: job.spec.entrypoint_num_cpus.filter(|n| *n > 0.0),
        entrypoint_num_gpus: job.spec.entrypoint_num_gpus.filter(|n| *n > 0.0),
        entrypoint_resources,
    })
}

fn ignore_status(r: Result<(), kube::Error>, code: u16) -> Result<(), Error> {
    match r {
        Err(kube::Error::Api(e)) if e.code == code => Ok(()),
        other => Ok(other?),
    }
}

/// `next` is the status the plan writes after its actions (the submitter carries its dashboard address).
async fn execute(
    current: &mut RayJob,
    ns: &str,
    action: &Action,
    s: &Snapshot,
    next: Option<&crate::api::ray::RayJobStatus>,
    ctx: &Context,
) -> Result<(), Error> {
    let client = ctx.client.clone();
    let jobs_api: Api<RayJob> = Api::namespaced(client.clone(), ns);
    let clusters: Api<RayCluster> = Api::namespaced(client.clone(), ns);
    let submitters: Api<Job> = Api::namespaced(client.clone(), ns);
    let background = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    match action {
        Action::AddFinalizer | Action::RemoveFinalizer => {
            let mut finalizers: Vec<String> = current
                .finalizers()
                .iter()
                .filter(|f| *f != FINALIZER)
                .cloned()
                .collect();
            if *action == Action::AddFinalizer {
                finalizers.push(FINALIZER.into());
            }
            let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": current.resource_version()}});
            *current = jobs_api
                .patch(
                    &current.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
        }
        Action::StopJob { submission_id } => {
            let address = s.status.dashboard_url.clone().unwrap_or_default();
            if !address.is_empty() {
                let ep = endpoint(&address, None, ns, ctx).await;
                if let Err(e) = ctx.jobs.stop_job(&ep, submission_id).await {
                    // KubeRay removes the finalizer whether the stop succeeded or not.
                    tracing::debug!(error = %e, "stopping the Ray job of a deleted RayJob failed");
                }
            }
        }
        Action::CreateCluster { name } => {
            // The job id this pass gives the job goes into a SidecarMode submitter.
            let mut job = current.clone();
            if let Some(id) = next.and_then(|n| n.job_id.clone()) {
                job.status.get_or_insert_with(Default::default).job_id = Some(id);
            }
            let rc = build_cluster(&job, name, ctx.config.gates.sidecar_submitter_restart)?;
            ignore_status(
                clusters.create(&PostParams::default(), &rc).await.map(|_| ()),
                409,
            )?;
        }
        Action::DeleteCluster { name } => {
            ignore_status(clusters.delete(name, &background).await.map(|_| ()), 404)?;
        }
        Action::SuspendWorkerGroups { name } => {
            if let Some(read) = clusters.get_opt(name).await? {
                let mut rc = read.clone();
                for g in rc.spec.worker_group_specs.iter_mut().flatten() {
                    g.suspend = Some(true);
                }
                // Only the groups' suspend, guarded by the version read.
                let patch = crate::api::merge_patch::guarded(&read, &rc).map_err(|source| Error::Encode {
                    what: "the RayCluster",
                    source,
                })?;
                if let Some(patch) = patch {
                    clusters
                        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                }
            }
        }
        Action::CreateSubmitter => {
            let mut with_status = current.clone();
            if let Some(next) = next {
                with_status.status = Some(next.clone());
            }
            // The submitter's default image is the head's of the cluster the job runs on, which for a
            // job that selects an existing cluster is only in that cluster.
            let cluster_name = with_status
                .status
                .as_ref()
                .and_then(|s| s.ray_cluster_name.clone());
            let cluster = match cluster_name.filter(|n| !n.is_empty()) {
                Some(n) => clusters.get_opt(&n).await?,
                None => None,
            };
            let job = build_submitter(&with_status, cluster.as_ref().map(|c| &c.spec))?;
            ignore_status(
                submitters.create(&PostParams::default(), &job).await.map(|_| ()),
                409,
            )?;
        }
        Action::DeleteSubmitter => {
            ignore_status(
                submitters
                    .delete(&current.name_any(), &background)
                    .await
                    .map(|_| ()),
                404,
            )?;
        }
        Action::SubmitJob { submission_id } => {
            let address = s.status.dashboard_url.clone().unwrap_or_default();
            let rc = clusters
                .get_opt(s.status.ray_cluster_name.as_deref().unwrap_or_default())
                .await?;
            let ep = endpoint(&address, rc.as_ref(), ns, ctx).await;
            let request = submit_request(current, submission_id).map_err(|reason| Error::Submit {
                submission_id: submission_id.clone(),
                source: DashboardError::InvalidConfig(reason),
            })?;
            match ctx.jobs.submit_job(&ep, &request).await {
                Ok(_) => {}
                // Already submitted by an earlier pass whose answer was lost: the next poll finds it.
                Err(DashboardError::Rejected { message }) if message.contains("already exists") => {}
                Err(source) => {
                    return Err(Error::Submit {
                        submission_id: submission_id.clone(),
                        source,
                    });
                }
            }
        }
        Action::ReconcileHeadService { cluster } => {
            let Some(rc) = clusters.get_opt(cluster).await? else {
                return Ok(());
            };
            let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(ctx.client.clone(), ns);
            let (reason, verb, name) = match super::service::ensure(&services, current, &rc).await? {
                super::service::Outcome::Created(name) => ("CreatedService", "Created", name),
                super::service::Outcome::Updated(name) => ("UpdatedService", "Updated", name),
                super::service::Outcome::Unchanged => return Ok(()),
            };
            let message = format!("{verb} the service {ns}/{name}");
            shell::publish(
                &ctx.recorder,
                &current.object_ref(&()),
                KEventType::Normal,
                reason,
                message,
            )
            .await;
        }
        Action::DeleteSelf => {
            ignore_status(
                jobs_api
                    .delete(&current.name_any(), &background)
                    .await
                    .map(|_| ()),
                404,
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn job() -> RayJob {
        serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "rj", "namespace": "ns", "uid": "u1", "labels": {"team": "a"}, "annotations": {"note": "x"}},
            "spec": {
                "entrypoint": "python -c \"import time; time.sleep(3)\"",
                "runtimeEnvYAML": "pip:\n  - requests\n", "metadata": {"owner": "me"}, "entrypointResources": "{\"r\": 1}",
                "entrypointNumCpus": 0.5,
                "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "h", "image": "rayproject/ray:2.9.0"}]}}}}
            },
            "status": {"jobId": "rj-abcde", "dashboardURL": "rj-xyz-head-svc.ns.svc.cluster.local:8265"}
        }))
        .unwrap()
    }

    /// KubeRay `constructRayClusterForRayJob`: the job's labels and annotations, origin labels, owned by it.
    #[test]
    fn the_cluster_carries_the_jobs_labels_and_owner() {
        let rc = build_cluster(&job(), "rj-xyz", false).unwrap();
        let labels = rc.metadata.labels.unwrap();
        assert_eq!(
            (
                labels["team"].as_str(),
                labels[c::LABEL_ORIGINATED_FROM_CRD].as_str()
            ),
            ("a", "RayJob")
        );
        assert_eq!(rc.metadata.annotations.unwrap()["note"], "x");
        let owner = &rc.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.controller), ("RayJob", Some(true)));
    }

    /// KubeRay `getSubmitterTemplate` reads the RayCluster object: a job that selects an existing cluster
    /// (`clusterSelector`, no `rayClusterSpec`) gets that cluster's head image, so its submitter Job is
    /// valid (kube-apiserver refuses a container without an image).
    #[test]
    fn a_selected_clusters_head_image_goes_to_the_submitter() {
        let mut selecting = job();
        let cluster = selecting.spec.ray_cluster_spec.take().unwrap();
        let j = build_submitter(&selecting, Some(&cluster)).unwrap();
        let pod = j.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.containers[0].image.as_deref(), Some("rayproject/ray:2.9.0"));
        let without = build_submitter(&selecting, None).unwrap();
        assert_eq!(
            without.spec.unwrap().template.spec.unwrap().containers[0].image,
            None
        );
    }

    /// KubeRay `getSubmitterTemplate` / `createNewK8sJob`: the head's image, `ray job submit` with the job's
    /// id against the dashboard, the env KubeRay sets, backoff limit 2.
    #[test]
    fn the_submitter_job_submits_with_the_jobs_id() {
        let j = build_submitter(&job(), None).unwrap();
        let spec = j.spec.unwrap();
        assert_eq!(spec.backoff_limit, Some(2));
        let pod = spec.template.spec.unwrap();
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        let c0 = &pod.containers[0];
        assert_eq!(c0.image.as_deref(), Some("rayproject/ray:2.9.0"));
        let script = &c0.args.as_ref().unwrap()[0];
        // KubeRay job_test.go TestBuildJobSubmitCommandWithK8sJobMode: the spec's runtime env, metadata and
        // entrypoint resources go on the command line, in KubeRay's order.
        let submit = concat!(
            "ray job submit --address http://rj-xyz-head-svc.ns.svc.cluster.local:8265 --no-wait",
            " --runtime-env-json \"{\\\"pip\\\":[\\\"requests\\\"]}\" --metadata-json \"{\\\"owner\\\":\\\"me\\\"}\"",
            " --submission-id rj-abcde --entrypoint-num-cpus 0.500000 --entrypoint-resources \"{\\\"r\\\": 1}\"",
            " -- python -c \"import time; time.sleep(3)\" ; fi ; ray job logs",
        );
        assert!(script.contains(submit), "{script}\n{submit}");
        let env: Vec<_> = c0
            .env
            .as_ref()
            .unwrap()
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or("")))
            .collect();
        assert!(
            env.contains(&("RAY_JOB_SUBMISSION_ID", "rj-abcde")) && env.contains(&("PYTHONUNBUFFERED", "1")),
            "{env:?}"
        );
    }

    /// KubeRay `ConvertRayJobToReq`: runtime env parsed from YAML, metadata and entrypoint resources passed.
    #[test]
    fn the_http_submission_carries_the_spec() {
        let req = submit_request(&job(), "rj-abcde").unwrap();
        assert_eq!(req.submission_id.as_deref(), Some("rj-abcde"));
        assert_eq!(req.runtime_env, Some(json!({"pip": ["requests"]})));
        assert_eq!(req.entrypoint_num_cpus, Some(0.5));
        assert_eq!(req.entrypoint_resources.unwrap()["r"], 1.0);
        let mut bad = job();
        bad.spec.entrypoint_resources = Some("not json".into());
        assert!(
            submit_request(&bad, "x")
                .unwrap_err()
                .contains("spec.entrypointResources")
        );
    }
}
