//! The RayService controller's I/O shell: read a snapshot, call [`plan`](crate::rayservice::service::plan), execute the
//! actions in order, write status and the deletion schedule, record events. Nothing is decided here.

use std::sync::Arc;
use std::time::Duration;

use crate::kit::events::Recorder;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::events::{EventType as KEventType, Reporter};
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::{info, instrument};

use super::error::Error;
use crate::api::gateway::{Gateway, HTTPRoute};
use crate::api::kueue::Workload;
use crate::api::ray::constants as c;
use crate::api::ray::constants::ANNOTATION_ADMISSION_GATED as GATE_ANNOTATION;
use crate::api::ray::validation::{RayFeatureGates, ray_service_name_too_long, validate_ray_service_with};
use crate::api::ray::{RayCluster, RayService};
use crate::kit::shell;
use crate::rayservice::cluster::autoscaler_rbac as rbac;
use crate::rayservice::cluster::child::spec_for_hashing;
use crate::rayservice::cluster::hash::{hash_of_first_groups, hash_without_replicas_and_workers_to_delete};
use crate::rayservice::cluster::labels::pod_label;
use crate::rayservice::cluster::names;
use crate::rayservice::dashboard::{DashboardEndpoint, DashboardError, RayDashboard, ServeConfig};
use crate::rayservice::job::gate;
use crate::rayservice::service::build::{self, Stamp};
use crate::rayservice::service::observe::{
    self, REJECTED_CONFIG_ANNOTATION, SERVED_CONFIG_ANNOTATION, SERVED_CONFIG_TEXT_ANNOTATION,
};
use crate::rayservice::service::plan::{Action, EventType, Plan};
use crate::rayservice::service::snapshot::{
    Admission, ChildCluster, DesiredCluster, IncrementalOptions, PriorStatus, ServeObservation, Snapshot,
    TrafficView, UpgradeStrategy,
};
use crate::rayservice::service::{adopt, auth, duration, schedule, traffic};

/// Label that makes a RayService queue-managed (Kueue's).
pub const QUEUE_NAME_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// Builds a dashboard client for one cluster's endpoint (HTTP in production, the simulator in tests).
pub type DashboardFactory = Arc<dyn Fn(&DashboardEndpoint) -> Arc<dyn RayDashboard> + Send + Sync>;

#[derive(Clone, Debug)]
pub struct Config {
    /// Operator env `ENABLE_ZERO_DOWNTIME` (default true): blue/green when `upgradeStrategy` is unset.
    pub zero_downtime: bool,
    pub operator_version: String,
    pub cluster_domain: String,
    pub dashboard_port: u16,
    /// Per dashboard call; KubeRay uses 2 s for direct calls.
    pub dashboard_timeout: Duration,
    /// Requeue after a failed pass.
    pub error_backoff: Duration,
    /// Poll interval while the plan has work in flight (KubeRay: 2 s; tests shorten it).
    pub requeue: Duration,
    /// Incremental upgrades move traffic on the timer alone (KubeRay's policy). Only for the
    /// benchmark that contrasts it with waiting for RUNNING replicas.
    pub incremental_timer_only: bool,
    /// KubeRay feature gates (`--feature-gates`) for validation.
    pub gates: RayFeatureGates,
    /// `--upgrade-deadline`: the default of `quotagate.io/upgrade-deadline` (`None`: off, as KubeRay).
    pub upgrade_deadline: Option<Duration>,
    /// `manageJobsWithoutQueueName` and `managedJobsNamespaceSelector`: which services run only under
    /// admitted quota, as the job reconciler decides it.
    pub managed_jobs: std::sync::Arc<crate::api::kueue::managed_jobs::ManagedJobs>,
    /// The manager's shared Workload watch; `None`: the controller opens its own.
    pub workload_events: Option<crate::admission::WorkloadEvents>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            zero_downtime: true,
            operator_version: c::KUBERAY_COMPAT_VERSION.into(),
            cluster_domain: "cluster.local".into(),
            dashboard_port: crate::rayservice::dashboard::DEFAULT_DASHBOARD_PORT,
            dashboard_timeout: Duration::from_secs(2),
            error_backoff: Duration::from_secs(5),
            requeue: crate::rayservice::service::lifecycle::REQUEUE,
            incremental_timer_only: false,
            gates: RayFeatureGates::default(),
            upgrade_deadline: None,
            managed_jobs: Default::default(),
            workload_events: None,
        }
    }
}

pub struct Context {
    pub client: Client,
    pub dashboards: DashboardFactory,
    pub recorder: Recorder,
    pub config: Config,
}

impl Context {
    pub fn new(client: Client, dashboards: DashboardFactory) -> Self {
        let reporter = Reporter {
            controller: "quotagate-rayservice".into(),
            instance: None,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            dashboards,
            config: Config::default(),
        }
    }

    /// The dashboard of `rc` (its head Service, custom name honoured), with its token when the cluster
    /// uses token auth.
    async fn endpoint(&self, rc: &RayCluster, ns: &str) -> Result<DashboardEndpoint, Error> {
        let cluster = rc.name_any();
        let svc = names::head_service_name(&cluster, &rc.spec);
        let endpoint = DashboardEndpoint::for_head_service(
            &svc,
            ns,
            &self.config.cluster_domain,
            self.config.dashboard_port,
        );
        let Some(secret_name) = auth::token_secret_name(rc) else {
            return Ok(endpoint);
        };
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        let auth_error = |reason: String| Error::AuthToken {
            cluster: cluster.clone(),
            reason,
        };
        let secret = secrets
            .get_opt(&secret_name)
            .await?
            .ok_or_else(|| auth_error(format!("Secret {ns}/{secret_name} not found")))?;
        let token = auth::token_from_secret(&secret).map_err(auth_error)?;
        Ok(endpoint.with_token(token))
    }
}

/// Runs the controller until the stream ends (watches RayServices and the RayClusters and Services they own).
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let mut controller = Controller::new(Api::<RayService>::all(client.clone()), watcher::Config::default())
        .owns(Api::<RayCluster>::all(client.clone()), watcher::Config::default())
        .owns(Api::<Service>::all(client.clone()), watcher::Config::default());
    // A workload slice admitted (or waiting with a new reason) releases a held child or says why not.
    controller = match &ctx.config.workload_events {
        Some(events) => controller.owns_stream(events.owned_by::<RayService>()),
        None => controller.owns(Api::<Workload>::all(client.clone()), watcher::Config::default()),
    };
    // Gateway API objects are watched where the cluster serves them (incremental upgrades need them;
    // without the CRDs a watch would only fail and retry forever).
    if gateway_api_served(&client).await {
        controller = controller
            .owns(Api::<Gateway>::all(client.clone()), watcher::Config::default())
            .owns(Api::<HTTPRoute>::all(client), watcher::Config::default());
    } else {
        info!("Gateway API not served: incremental upgrades wait for its CRDs");
    }
    shell::run(controller, "rayservice", reconcile, ctx, |c| {
        c.config.error_backoff
    })
    .await;
}

/// Whether the API server serves Gateways (one cheap list; 404 = the CRDs are not installed).
async fn gateway_api_served(client: &Client) -> bool {
    let api: Api<Gateway> = Api::all(client.clone());
    match api.list(&ListParams::default().limit(1)).await {
        Ok(_) => true,
        Err(kube::Error::Api(e)) if e.code == 404 => false,
        // Anything else (a transient error, RBAC): watch anyway, the watcher retries.
        Err(_) => true,
    }
}

impl shell::ReconcileError for Error {
    fn category(&self) -> &'static str {
        Error::category(self)
    }
}

fn desired_cluster(rs: &RayService) -> DesiredCluster {
    let spec = spec_for_hashing(rs);
    let groups = spec.worker_groups().len();
    DesiredCluster {
        hash: hash_without_replicas_and_workers_to_delete(&spec),
        prefix_hashes: (0..groups).map(|n| hash_of_first_groups(&spec, n)).collect(),
        serve_config_hash: rs.spec.serve_config_v2.as_deref().map(observe::serve_config_hash),
    }
}

fn stamp(rs: &RayService, ctx: &Context) -> Stamp {
    let spec = spec_for_hashing(rs);
    Stamp {
        hash: hash_without_replicas_and_workers_to_delete(&spec),
        num_worker_groups: spec.worker_groups().len(),
        operator_version: ctx.config.operator_version.clone(),
    }
}

/// The RayCluster controller's `QuotaGated=False`: an admitted slice covers every pod of the cluster.
fn quota_covered_in_status(rc: &RayCluster) -> bool {
    crate::api::conditions::find(
        rc.status.as_ref().and_then(|s| s.conditions.as_deref()),
        c::COND_QUOTA_GATED,
    )
    .is_some_and(|c| c.status == crate::api::conditions::FALSE)
}

/// Which children the quota admission covers, from the service's workload slices (not queue-managed:
/// no gate), and why a waiting one waits.
async fn admission(
    rs: &RayService,
    client: &Client,
    managed: &crate::api::kueue::managed_jobs::ManagedJobs,
) -> Result<Admission, Error> {
    if !gate::service_managed(client, managed, rs).await? {
        return Ok(Admission::NotQueueManaged);
    }
    let g = gate::load(client, rs).await?;
    let waiting = match (g.blocked, g.pending) {
        (Some(why), _) => Some(format!("the upgrade cannot be admitted: {why}")),
        (None, Some(p)) => Some(format!(
            "waiting for workload slice {} (LocalQueue {}): {}",
            p.workload, p.local_queue, p.message
        )),
        (None, None) => None,
    };
    Ok(Admission::QueueManaged {
        admitted: g.covered,
        waiting,
        exposed: g.exposed,
    })
}

/// The first validation error, naming the field; `None` when the object is acceptable.
/// A name over 47 characters is stored (as by KubeRay) and reported with KubeRay's message.
fn validation_error(rs: &RayService, gates: RayFeatureGates) -> Option<String> {
    if let Some(msg) = ray_service_name_too_long(&rs.name_any()) {
        return Some(msg);
    }
    if let Some(e) = validate_ray_service_with(rs, gates).first() {
        return Some(e.to_string());
    }
    if let Some(v) = rs.annotations().get(c::ANNOTATION_INITIALIZING_TIMEOUT)
        && let Err(e) = duration::parse_timeout(v)
    {
        return Some(format!(
            "metadata.annotations[{}]: {e}",
            c::ANNOTATION_INITIALIZING_TIMEOUT
        ));
    }
    if let Some(yaml) = rs.spec.serve_config_v2.as_deref()
        && let Err(e) = ServeConfig::from_yaml(yaml)
    {
        return Some(format!("spec.serveConfigV2: {e}"));
    }
    None
}

#[instrument(skip_all, fields(name = %rs.name_any(), ns = rs.namespace().unwrap_or_default()))]
pub async fn reconcile(rs: Arc<RayService>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    let ns = rs.namespace().ok_or(Error::MissingField("metadata.namespace"))?;
    let name = rs.name_any();
    let snapshot = observe_snapshot(&rs, &ns, &ctx).await?;
    let plan = crate::rayservice::service::plan(&snapshot);
    execute(&rs, &ns, &name, &plan, &ctx).await?;
    Ok(match plan.requeue {
        Some(_) => Requeue::requeue(ctx.config.requeue),
        None => Requeue::await_change(),
    })
}

async fn observe_snapshot(rs: &RayService, ns: &str, ctx: &Context) -> Result<Snapshot, Error> {
    let name = rs.name_any();
    let client = ctx.client.clone();
    let clusters_api: Api<RayCluster> = Api::namespaced(client.clone(), ns);
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let svc_api: Api<Service> = Api::namespaced(client, ns);
    let clusters = clusters_api
        .list(&ListParams::default().labels(&build::origin_selector(&name)))
        .await?
        .items;
    let prior = observe::prior_status(rs.status.as_ref());
    let invalid = validation_error(rs, ctx.config.gates);
    let expected = rs
        .spec
        .serve_config_v2
        .as_deref()
        .and_then(|y| ServeConfig::from_yaml(y).ok());

    let mut admission = admission(rs, &ctx.client, &ctx.config.managed_jobs).await?;
    // A held child is released only once the RayCluster controller has recorded in its status that an
    // admitted slice covers it (QuotaGated=False): admission refuses the release before that.
    if let Admission::QueueManaged { admitted, .. } = &mut admission {
        admitted.retain(|name| {
            clusters
                .iter()
                .find(|rc| rc.name_any() == *name)
                .is_none_or(|rc| rc.spec.suspend != Some(true) || quota_covered_in_status(rc))
        });
    }
    let strategy = observe::strategy(&rs.spec, ctx.config.zero_downtime);
    let incremental = strategy == UpgradeStrategy::NewClusterWithIncrementalUpgrade;
    // Incremental: each cluster runs at its own target_capacity, which the decisions compare
    // themselves; the pushed config's capacity is not what every cluster should report.
    let expected = expected.filter(|_| !incremental);
    let mut children = Vec::with_capacity(clusters.len());
    let queue_managed = matches!(admission, Admission::QueueManaged { .. });
    for rc in &clusters {
        children.push(
            observe_child(
                rc,
                &pods_api,
                queue_managed,
                &prior,
                invalid.as_ref(),
                expected.as_ref(),
                ns,
                ctx,
            )
            .await?,
        );
    }
    let selected = |svc: Option<Service>| svc.as_ref().and_then(build::selected_cluster);
    let head_service = selected(svc_api.get_opt(&build::head_service_name(&name)).await?);
    // Incremental: the Gateway is the stable endpoint; endpoints are counted on the active cluster's
    // own serve Service.
    let serve_svc_name = match (&prior.active, incremental) {
        (Some(active), true) => traffic::cluster_serve_service_name(active),
        (None, true) => String::new(),
        (_, false) => build::serve_service_name(rs),
    };
    let serve_service = if serve_svc_name.is_empty() {
        None
    } else {
        selected(svc_api.get_opt(&serve_svc_name).await?)
    };
    // KubeRay counts, in incremental mode, the pods of both per-cluster serve Services: the Gateway
    // sends traffic to both, and at the end of an upgrade the active cluster at 0% capacity may have
    // none left while the pending one serves it all.
    let mut counted = vec![serve_svc_name.clone()];
    if let (true, Some(p)) = (incremental, &prior.pending) {
        counted.push(traffic::cluster_serve_service_name(p));
    }
    let serve_endpoints = if serve_service.is_some() {
        let slices: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), ns);
        let mut listed = Vec::new();
        for svc in &counted {
            let selector = format!("{}={svc}", observe::SERVICE_NAME_LABEL);
            listed.extend(slices.list(&ListParams::default().labels(&selector)).await?.items);
        }
        observe::ready_serve_endpoints(&listed)
    } else {
        0
    };
    let incremental = if incremental {
        Some(observe_traffic(rs, &clusters, &svc_api, ns, ctx).await?)
    } else {
        None
    };
    let managed_externally = rs
        .spec
        .managed_by
        .as_deref()
        .is_some_and(|m| m != c::MANAGED_BY_KUBERAY);

    Ok(Snapshot {
        now: Timestamp::now(),
        generation: rs.metadata.generation.unwrap_or(0),
        deleting: rs.metadata.deletion_timestamp.is_some(),
        has_finalizer: rs.finalizers().iter().any(|f| f == c::FINALIZER_RAYSERVICE),
        managed_externally,
        invalid,
        suspend: rs.spec.is_suspended(),
        strategy,
        deletion_delay: jiff::SignedDuration::from_secs(i64::from(rs.spec.deletion_delay_seconds().max(0))),
        initializing_timeout: rs
            .annotations()
            .get(c::ANNOTATION_INITIALIZING_TIMEOUT)
            .and_then(|v| duration::parse_timeout(v).ok()),
        upgrade_deadline: match rs.annotations().get(c::ANNOTATION_UPGRADE_DEADLINE) {
            Some(v) => duration::parse_timeout(v).ok(),
            None => ctx
                .config
                .upgrade_deadline
                .and_then(|d| jiff::SignedDuration::try_from(d).ok()),
        },
        failed_upgrade: rs.annotations().get(c::ANNOTATION_FAILED_UPGRADE).cloned(),
        exclude_head_from_serve: rs.spec.excludes_head_from_serve(),
        desired: desired_cluster(rs),
        status: prior,
        deletion_schedule: schedule::decode(rs.annotations().get(schedule::ANNOTATION).map(String::as_str)),
        clusters: children,
        head_service,
        serve_service,
        serve_endpoints,
        admission,
        incremental,
        fresh_name: format!("{name}-{}", shell::random_suffix()),
        operator_version: ctx.config.operator_version.clone(),
    })
}

/// A cluster without a head pod whose head template names a ServiceAccount that does not exist: its
/// head cannot be created (with the in-tree autoscaler its RayCluster only has a Warning event, as in
/// KubeRay, so the RayService looks). `AutoscalerServiceAccountNotFound: <why>` or
/// `FailedCreateHeadPod: <why>`, as the RayService then names it.
async fn missing_service_account(rc: &RayCluster, ns: &str, ctx: &Context) -> Result<Option<String>, Error> {
    if !rbac::user_names_service_account(rc) {
        return Ok(None);
    }
    let sa = rbac::service_account_name(rc);
    let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), ns);
    if api.get_opt(&sa).await?.is_some() {
        return Ok(None);
    }
    let reason = if rc.spec.autoscaling_enabled() {
        c::REASON_AUTOSCALER_SA_NOT_FOUND
    } else {
        c::REASON_FAILED_CREATE_HEAD_POD
    };
    Ok(Some(format!(
        "{reason}: ServiceAccount {sa} named by the head pod template is not found; create it"
    )))
}

/// What one child RayCluster shows: its pods, and for the active and pending clusters (once released)
/// what its dashboard and Serve proxy answer.
#[allow(clippy::too_many_arguments)]
async fn observe_child(
    rc: &RayCluster,
    pods_api: &Api<Pod>,
    queue_managed: bool,
    prior: &PriorStatus,
    invalid: Option<&String>,
    expected: Option<&ServeConfig>,
    ns: &str,
    ctx: &Context,
) -> Result<ChildCluster, Error> {
    let cname = rc.name_any();
    let pods = pods_api
        .list(&ListParams::default().labels(&format!("{}={cname}", c::LABEL_CLUSTER)))
        .await?
        .items;
    let mut view = observe::child_view(rc, &pods, ServeObservation::NotQueried);
    // A queue-managed child still suspended has not been released (even if the gate marker is
    // already gone: a release interrupted between its two writes is finished on the next pass).
    if queue_managed && rc.spec.suspend == Some(true) {
        view.gated = true;
    }
    let current =
        prior.active.as_deref() == Some(cname.as_str()) || prior.pending.as_deref() == Some(cname.as_str());
    if !current || view.gated {
        return Ok(view);
    }
    let has_head = pods
        .iter()
        .any(|p| pod_label(p, c::LABEL_NODE_TYPE) == Some(c::NODE_TYPE_HEAD));
    if view.head_failing.is_none() && !has_head {
        view.head_failing = missing_service_account(rc, ns, ctx).await?;
    }
    let endpoint = match ctx.endpoint(rc, ns).await {
        Ok(e) => e,
        // A missing token Secret is reported like an unreachable dashboard: visible in the status
        // and retried, without blocking the rest of the pass.
        Err(e @ Error::AuthToken { .. }) => {
            view.serve = ServeObservation::Unreachable(e.to_string());
            return Ok(view);
        }
        Err(e) => return Err(e),
    };
    let dashboard = (ctx.dashboards)(&endpoint);
    if view.head_ready && invalid.is_none() {
        let answer =
            tokio::time::timeout(ctx.config.dashboard_timeout, dashboard.serve_details(&endpoint)).await;
        view.serve = match answer {
            Ok(result) => {
                view.reported_capacity = result.as_ref().ok().and_then(observe::capacity_percent);
                observe::serve_observation(result, expected)
            }
            Err(_) => {
                ServeObservation::Unreachable(format!("no answer within {:?}", ctx.config.dashboard_timeout))
            }
        };
    }
    if let Some(ip) = observe::head_pod_ip(&pods) {
        let proxy = format!("http://{ip}:{}", observe::serve_port(&rc.spec));
        let answer = tokio::time::timeout(
            ctx.config.dashboard_timeout,
            dashboard.proxy_healthy(&endpoint, &proxy),
        )
        .await;
        // KubeRay: any failure to get a healthy answer means "not a serve endpoint".
        view.proxy_healthy = Some(matches!(answer, Ok(Ok(true))));
    }
    Ok(view)
}

/// For an incremental upgrade, its options and what the Gateway, the HTTPRoute and the per-cluster
/// serve Services say.
async fn observe_traffic(
    rs: &RayService,
    clusters: &[RayCluster],
    svc_api: &Api<Service>,
    ns: &str,
    ctx: &Context,
) -> Result<(IncrementalOptions, TrafficView), Error> {
    let mut options = traffic::options(rs);
    options.timer_only = ctx.config.incremental_timer_only;
    // `<rs>-gateway` and `<rs>-httproute`, or the shared Gateway / adopted route the annotations name.
    let attachment = adopt::attachment(rs);
    let routes: Api<HTTPRoute> = Api::namespaced(ctx.client.clone(), ns);
    let route = match attachment.route_name(rs) {
        Some(r) => routes.get_opt(&r).await?,
        None => None,
    };
    let gateway = match attachment.gateway_key(rs, route.as_ref()) {
        Some((gns, gname)) => {
            Api::<Gateway>::namespaced(ctx.client.clone(), &gns)
                .get_opt(&gname)
                .await?
        }
        None => None,
    };
    let mut serve_services = std::collections::BTreeSet::new();
    for rc in clusters {
        let cname = rc.name_any();
        if svc_api
            .get_opt(&traffic::cluster_serve_service_name(&cname))
            .await?
            .is_some()
        {
            serve_services.insert(cname);
        }
    }
    let port = observe::serve_port(&rs.spec.ray_cluster_config);
    let view = adopt::view(
        rs,
        &attachment,
        &options,
        gateway.as_ref(),
        route.as_ref(),
        serve_services,
        port,
    );
    Ok((options, view))
}

async fn execute(rs: &RayService, ns: &str, name: &str, plan: &Plan, ctx: &Context) -> Result<(), Error> {
    let reference = rs.object_ref(&());
    for ev in &plan.events {
        let type_ = match ev.type_ {
            EventType::Normal => KEventType::Normal,
            EventType::Warning => KEventType::Warning,
        };
        shell::publish(&ctx.recorder, &reference, type_, ev.reason, ev.message.clone()).await;
    }
    // Every write to the RayService names the resourceVersion its plan was made from, so a pass on a
    // stale cache conflicts and re-plans instead of overwriting a newer status (e.g. erasing a pending
    // cluster's name and creating a second one).
    let mut rv = rs.resource_version().unwrap_or_default();
    for action in &plan.actions {
        info!(?action, "rayservice action");
        if let Err(e) = act(rs, ns, name, action, ctx, &mut rv).await {
            if !worth_a_warning(&e) {
                return Err(e);
            }
            let reason = failure_reason(action);
            shell::publish(
                &ctx.recorder,
                &reference,
                KEventType::Warning,
                reason,
                e.to_string(),
            )
            .await;
            return Err(e);
        }
    }
    let api: Api<RayService> = Api::namespaced(ctx.client.clone(), ns);
    if let Some(status_plan) = &plan.status {
        let clusters: Api<RayCluster> = Api::namespaced(ctx.client.clone(), ns);
        let children = clusters
            .list(&ListParams::default().labels(&build::origin_selector(name)))
            .await?
            .items;
        let now = Timestamp::now();
        let mut next = observe::apply_status(rs.status.as_ref(), status_plan, &children, now);
        if rs.status.as_ref() != Some(&next) {
            next.last_update_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
            let mut value = serde_json::to_value(&next).map_err(|source| Error::Encode {
                what: "status",
                source,
            })?;
            // A merge patch only removes what it names with null.
            if let Value::Object(m) = &mut value {
                for key in ["activeServiceStatus", "pendingServiceStatus"] {
                    m.entry(key).or_insert(Value::Null);
                }
            }
            let written = api
                .patch_status(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(guarded(json!({ "metadata": {}, "status": value }), &rv)),
                )
                .await?;
            rv = written.resource_version().unwrap_or_default();
        }
    }
    if let Some(sched) = &plan.schedule {
        let v = if sched.is_empty() {
            Value::Null
        } else {
            Value::String(schedule::encode(sched))
        };
        let patch = guarded(
            json!({ "metadata": { "annotations": { schedule::ANNOTATION: v } } }),
            &rv,
        );
        api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
    }
    Ok(())
}

/// A write that lost a race (409: the plan's resourceVersion is stale, or a create met its twin) is
/// retried by the next pass, quietly, as KubeRay and controller-runtime retry conflicts: no Warning
/// event (issue 45: `FailedToUpdateFinalizer` on a freshly created RayService).
fn worth_a_warning(e: &Error) -> bool {
    !matches!(e, Error::Kube(k) if shell::is_conflict(k))
}

fn failure_reason(action: &Action) -> &'static str {
    match action {
        Action::CreateCluster { .. } => "FailedToCreateRayCluster",
        Action::UpdateCluster { .. } | Action::OpenGate { .. } => "FailedToUpdateRayCluster",
        Action::DeleteCluster { .. } => "FailedToDeleteRayCluster",
        Action::PushServeConfig { .. } | Action::RestoreServeConfig { .. } => {
            "FailedToUpdateServeApplications"
        }
        Action::SetTargetCapacity { .. } => "FailedToUpdateTargetCapacity",
        Action::PointHeadService { .. } | Action::EnsureServeService { .. } => "FailedToUpdateService",
        Action::ApplyGateway => "FailedToUpdateGateway",
        Action::SetRoute { .. } => "FailedToUpdateHTTPRoute",
        Action::PointServices { .. } => "FailedToUpdateService",
        Action::DeleteServices => "FailedToDeleteService",
        Action::RecordFailedUpgrade { .. } => "FailedToUpdateRayService",
        Action::SetHeadServeLabel { .. } => "FailedToUpdateHeadPodServeLabel",
        Action::AddFinalizer | Action::RemoveFinalizer => "FailedToUpdateFinalizer",
    }
}

/// `patch` with `metadata.resourceVersion` set to `rv` (a precondition of the write), when known.
fn guarded(mut patch: Value, rv: &str) -> Value {
    if !rv.is_empty()
        && let Some(meta) = patch.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.insert("resourceVersion".into(), Value::String(rv.into()));
    }
    patch
}

async fn created_event(ctx: &Context, rs: &RayService, reason: &'static str, message: String) {
    shell::publish(
        &ctx.recorder,
        &rs.object_ref(&()),
        KEventType::Normal,
        reason,
        message,
    )
    .await;
}

fn ignore_not_found<T>(r: Result<T, kube::Error>) -> Result<(), Error> {
    shell::ignore_not_found(r)?;
    Ok(())
}

/// A JSON merge patch.
fn merge(v: Value) -> Patch<Value> {
    Patch::Merge(v)
}

async fn act(
    rs: &RayService,
    ns: &str,
    name: &str,
    action: &Action,
    ctx: &Context,
    rv: &mut String,
) -> Result<(), Error> {
    let rc_api: Api<RayCluster> = Api::namespaced(ctx.client.clone(), ns);
    let svc_api: Api<Service> = Api::namespaced(ctx.client.clone(), ns);
    match action {
        Action::AddFinalizer | Action::RemoveFinalizer => set_finalizer(rs, ns, name, action, ctx, rv).await,
        Action::CreateCluster {
            name: cname,
            gated,
            incremental,
        } => create_cluster(rs, &rc_api, cname, *gated, *incremental, ctx).await,
        Action::UpdateCluster { name: cname } => update_cluster(rs, &rc_api, cname, ctx).await,
        Action::OpenGate { name: cname } => open_gate(&rc_api, cname).await,
        Action::PushServeConfig {
            cluster,
            target_capacity,
        } => push_serve_config(rs, ns, &rc_api, cluster, *target_capacity, ctx).await,
        Action::RestoreServeConfig {
            cluster,
            target_capacity,
        } => restore_serve_config(ns, &rc_api, cluster, *target_capacity, ctx).await,
        Action::SetHeadServeLabel { cluster, serving } => {
            let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
            set_head_serve_label(&pods_api, cluster, *serving).await
        }
        Action::PointServices { cluster } | Action::PointHeadService { cluster } => {
            point_services(rs, &svc_api, cluster, action).await
        }
        Action::EnsureServeService { cluster } => ensure_serve_service(rs, &rc_api, &svc_api, cluster).await,
        Action::ApplyGateway => apply_gateway(rs, ns, ctx).await,
        Action::SetRoute { backends } => set_route(rs, ns, backends, ctx).await,
        Action::SetTargetCapacity { cluster, percent } => {
            set_target_capacity(ns, &rc_api, cluster, *percent, ctx).await
        }
        Action::DeleteCluster { name: cname } => {
            let dp = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                ..Default::default()
            };
            ignore_not_found(rc_api.delete(cname, &dp).await)
        }
        Action::DeleteServices => {
            for sname in [build::head_service_name(name), build::serve_service_name(rs)] {
                ignore_not_found(svc_api.delete(&sname, &DeleteParams::default()).await)?;
            }
            Ok(())
        }
        Action::RecordFailedUpgrade { hash } => record_failed_upgrade(ns, name, hash, ctx, rv).await,
    }
}

/// Writes `quotagate.io/failed-upgrade` on the RayService, guarded like every write to it.
async fn record_failed_upgrade(
    ns: &str,
    name: &str,
    hash: &str,
    ctx: &Context,
    rv: &mut String,
) -> Result<(), Error> {
    let rs_api: Api<RayService> = Api::namespaced(ctx.client.clone(), ns);
    let patch = guarded(
        json!({ "metadata": { "annotations": { c::ANNOTATION_FAILED_UPGRADE: hash } } }),
        rv,
    );
    let updated = rs_api.patch(name, &PatchParams::default(), &merge(patch)).await?;
    *rv = updated.resource_version().unwrap_or_default();
    Ok(())
}

/// Adds or removes the RayService's finalizer (`action` says which).
async fn set_finalizer(
    rs: &RayService,
    ns: &str,
    name: &str,
    action: &Action,
    ctx: &Context,
    rv: &mut String,
) -> Result<(), Error> {
    let rs_api: Api<RayService> = Api::namespaced(ctx.client.clone(), ns);
    let mut finalizers: Vec<String> = rs
        .finalizers()
        .iter()
        .filter(|f| *f != c::FINALIZER_RAYSERVICE)
        .cloned()
        .collect();
    if matches!(action, Action::AddFinalizer) {
        finalizers.push(c::FINALIZER_RAYSERVICE.into());
    }
    // Guarded by the resourceVersion the plan was made from, like every write to the
    // RayService itself: a pass on a stale cache must conflict, not overwrite.
    let patch = guarded(json!({ "metadata": { "finalizers": finalizers } }), rv);
    match rs_api.patch(name, &PatchParams::default(), &merge(patch)).await {
        Ok(updated) => {
            *rv = updated.resource_version().unwrap_or_default();
            Ok(())
        }
        Err(e) => ignore_not_found(Err::<RayService, _>(e)),
    }
}

/// Creates a child RayCluster (gated while its upgrade waits for quota).
async fn create_cluster(
    rs: &RayService,
    rc_api: &Api<RayCluster>,
    cname: &str,
    gated: bool,
    incremental: bool,
    ctx: &Context,
) -> Result<(), Error> {
    let mut rc = build::new_child(rs, cname, &ctx.config.operator_version, gated, incremental);
    rc.annotations_mut().insert(
        crate::api::ray::constants::ANNOTATION_CREATED_AT.into(),
        jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%S%.9fZ")
            .to_string(),
    );
    // Created by a pass whose status write was lost: same name, nothing to do.
    shell::ignore_already_exists(rc_api.create(&PostParams::default(), &rc).await)?;
    Ok(())
}

async fn update_cluster(
    rs: &RayService,
    rc_api: &Api<RayCluster>,
    cname: &str,
    ctx: &Context,
) -> Result<(), Error> {
    let existing = rc_api
        .get_opt(cname)
        .await?
        .ok_or_else(|| Error::ClusterGone(cname.to_string()))?;
    let updated = build::updated_child(&existing, rs, &stamp(rs, ctx));
    // Only what changed, guarded by the version read (as the PUT it replaces was).
    if let Some(patch) =
        crate::api::merge_patch::guarded(&existing, &updated).map_err(|source| Error::Encode {
            what: "the RayCluster",
            source,
        })?
    {
        rc_api
            .patch(cname, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

async fn open_gate(rc_api: &Api<RayCluster>, cname: &str) -> Result<(), Error> {
    // Released only once an admitted slice covers it (the plan checked); the RayCluster
    // controller still caps its pods by the slice.
    // Admission lets the release through only because the child's status (written by the
    // RayCluster controller, which users cannot write) says an admitted slice covers it.
    let release = json!({
        "metadata": { "annotations": { GATE_ANNOTATION: Value::Null } },
        "spec": { "suspend": false },
    });
    rc_api
        .patch(cname, &PatchParams::default(), &merge(release))
        .await?;
    Ok(())
}

/// Sends the Serve config to a cluster's dashboard and records what it answered on the cluster.
async fn push_serve_config(
    rs: &RayService,
    ns: &str,
    rc_api: &Api<RayCluster>,
    cluster: &str,
    target_capacity: Option<i32>,
    ctx: &Context,
) -> Result<(), Error> {
    let yaml = rs
        .spec
        .serve_config_v2
        .as_deref()
        .ok_or(Error::MissingField("spec.serveConfigV2"))?;
    let config = ServeConfig::from_yaml(yaml).map_err(|source| Error::Dashboard {
        cluster: cluster.to_string(),
        source,
    })?;
    let rc = rc_api
        .get_opt(cluster)
        .await?
        .ok_or_else(|| Error::ClusterGone(cluster.to_string()))?;
    let endpoint = ctx.endpoint(&rc, ns).await?;
    let dashboard = (ctx.dashboards)(&endpoint);
    let secs = ctx.config.dashboard_timeout.as_secs();
    let hash = observe::serve_config_hash(yaml);
    // The record of what the cluster was given goes before the PUT: should the PUT land and
    // its new record fail to be written, the cluster must not keep claiming the config it had
    // before, or a fix back to that config would never be pushed (chaos seed 43).
    if rc.annotations().contains_key(SERVED_CONFIG_ANNOTATION) {
        let forget = json!({ "metadata": { "annotations": {
            SERVED_CONFIG_ANNOTATION: Value::Null,
            SERVED_CONFIG_TEXT_ANNOTATION: Value::Null,
        } } });
        rc_api
            .patch(cluster, &PatchParams::default(), &merge(forget))
            .await?;
    }
    let answer = tokio::time::timeout(
        ctx.config.dashboard_timeout,
        dashboard.deploy(&endpoint, &config, target_capacity.map(f64::from)),
    )
    .await
    .map_err(|_| Error::DashboardTimeout {
        cluster: cluster.to_string(),
        secs,
    })?;
    let annotations = match answer {
        Ok(()) => {
            json!({
                SERVED_CONFIG_ANNOTATION: hash,
                SERVED_CONFIG_TEXT_ANNOTATION: yaml,
                REJECTED_CONFIG_ANNOTATION: Value::Null,
            })
        }
        // Ray refused this config: record it (status and an event say why) instead of
        // failing the pass and re-sending the same broken config every few seconds.
        Err(source @ (DashboardError::Rejected { .. } | DashboardError::InvalidConfig(_))) => {
            let message = source.to_string();
            let last = message
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("");
            shell::publish(
                &ctx.recorder,
                &rs.object_ref(&()),
                KEventType::Warning,
                "FailedToUpdateServeApplications",
                format!("{cluster}: {message}"),
            )
            .await;
            json!({ REJECTED_CONFIG_ANNOTATION: format!("{hash} {last}") })
        }
        Err(source) => {
            return Err(Error::Dashboard {
                cluster: cluster.to_string(),
                source,
            });
        }
    };
    let patch = json!({ "metadata": { "annotations": annotations } });
    rc_api
        .patch(cluster, &PatchParams::default(), &merge(patch))
        .await?;
    Ok(())
}

async fn set_head_serve_label(pods_api: &Api<Pod>, cluster: &str, serving: bool) -> Result<(), Error> {
    let selector = format!(
        "{}={cluster},{}={}",
        c::LABEL_CLUSTER,
        c::LABEL_NODE_TYPE,
        c::NODE_TYPE_HEAD
    );
    for pod in pods_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
    {
        let patch = json!({ "metadata": { "labels": { c::LABEL_SERVE: serving.to_string() } } });
        ignore_not_found(
            pods_api
                .patch(&pod.name_any(), &PatchParams::default(), &merge(patch))
                .await,
        )?;
    }
    Ok(())
}

/// Creates `<rs>-head-svc` (and, for `PointServices`, `<rs>-serve-svc`) or switches them to `cluster`.
async fn point_services(
    rs: &RayService,
    svc_api: &Api<Service>,
    cluster: &str,
    action: &Action,
) -> Result<(), Error> {
    let cluster_head = svc_api
        .get_opt(&names::head_service_name(cluster, &rs.spec.ray_cluster_config))
        .await?;
    let mut wanted = vec![build::rayservice_head_service(rs, cluster, cluster_head.as_ref())];
    if matches!(action, Action::PointServices { .. }) {
        wanted.push(build::rayservice_serve_service(rs, cluster));
    }
    for svc in wanted {
        let sname = svc.name_any();
        match svc_api.get_opt(&sname).await? {
            None => {
                svc_api.create(&PostParams::default(), &svc).await?;
            }
            Some(mut existing) => {
                // Keep the existing clusterIP (immutable); switch selector, ports and type.
                let want = svc.spec.unwrap_or_default();
                let spec = existing.spec.get_or_insert_with(Default::default);
                spec.selector = want.selector;
                spec.ports = want.ports;
                if want.type_.is_some() {
                    spec.type_ = want.type_;
                }
                svc_api.replace(&sname, &PostParams::default(), &existing).await?;
            }
        }
    }
    Ok(())
}

async fn ensure_serve_service(
    rs: &RayService,
    rc_api: &Api<RayCluster>,
    svc_api: &Api<Service>,
    cluster: &str,
) -> Result<(), Error> {
    let rc = rc_api
        .get_opt(cluster)
        .await?
        .ok_or_else(|| Error::ClusterGone(cluster.to_string()))?;
    let svc = traffic::cluster_serve_service(rs, &rc);
    shell::ignore_already_exists(svc_api.create(&PostParams::default(), &svc).await)?;
    Ok(())
}

async fn apply_gateway(rs: &RayService, ns: &str, ctx: &Context) -> Result<(), Error> {
    let options = traffic::options(rs);
    let wanted = traffic::gateway(rs, &options.gateway_class);
    let api: Api<Gateway> = Api::namespaced(ctx.client.clone(), ns);
    let gname = wanted.name_any();
    match api.get_opt(&gname).await? {
        None => {
            api.create(&PostParams::default(), &wanted).await?;
            created_event(ctx, rs, "CreatedGateway", format!("created Gateway {ns}/{gname}")).await;
        }
        Some(mut existing) => {
            existing.spec = wanted.spec;
            api.replace(&gname, &PostParams::default(), &existing).await?;
            created_event(ctx, rs, "UpdatedGateway", format!("updated Gateway {ns}/{gname}")).await;
        }
    }
    Ok(())
}

async fn set_route(
    rs: &RayService,
    ns: &str,
    backends: &[(String, i32)],
    ctx: &Context,
) -> Result<(), Error> {
    let port = observe::serve_port(&rs.spec.ray_cluster_config);
    let api: Api<HTTPRoute> = Api::namespaced(ctx.client.clone(), ns);
    let wanted = match adopt::route_write(rs, backends, port) {
        adopt::RouteWrite::Whole(route) => *route,
        adopt::RouteWrite::BackendRefs { route, refs } => {
            // An adopted route: only its first rule's backendRefs, on the version read (a
            // concurrent edit conflicts and the next pass re-plans).
            if let Some(mut existing) = api.get_opt(&route).await?
                && adopt::set_backend_refs(&mut existing, refs)
            {
                api.replace(&route, &PostParams::default(), &existing).await?;
            }
            return Ok(());
        }
        adopt::RouteWrite::Nothing => return Ok(()),
    };
    let rname = wanted.name_any();
    match api.get_opt(&rname).await? {
        None => {
            api.create(&PostParams::default(), &wanted).await?;
        }
        Some(mut existing) => {
            existing.spec.parent_refs = wanted.spec.parent_refs;
            existing.spec.rules = wanted.spec.rules;
            api.replace(&rname, &PostParams::default(), &existing).await?;
        }
    }
    Ok(())
}

/// Gives a cluster that lost its apps the config it last accepted, as recorded on it (the record
/// stays: it is the same config).
async fn restore_serve_config(
    ns: &str,
    rc_api: &Api<RayCluster>,
    cluster: &str,
    target_capacity: Option<i32>,
    ctx: &Context,
) -> Result<(), Error> {
    let rc = rc_api
        .get_opt(cluster)
        .await?
        .ok_or_else(|| Error::ClusterGone(cluster.to_string()))?;
    let annotations = rc.annotations();
    let yaml = annotations
        .get(SERVED_CONFIG_TEXT_ANNOTATION)
        .filter(|text| annotations.get(SERVED_CONFIG_ANNOTATION) == Some(&observe::serve_config_hash(text)))
        .ok_or(Error::MissingField(
            "metadata.annotations[quotagate.io/served-config]",
        ))?;
    let dashboard_error = |source| Error::Dashboard {
        cluster: cluster.to_string(),
        source,
    };
    let config = ServeConfig::from_yaml(yaml).map_err(dashboard_error)?;
    let endpoint = ctx.endpoint(&rc, ns).await?;
    let dashboard = (ctx.dashboards)(&endpoint);
    tokio::time::timeout(
        ctx.config.dashboard_timeout,
        dashboard.deploy(&endpoint, &config, target_capacity.map(f64::from)),
    )
    .await
    .map_err(|_| Error::DashboardTimeout {
        cluster: cluster.to_string(),
        secs: ctx.config.dashboard_timeout.as_secs(),
    })?
    .map_err(dashboard_error)?;
    Ok(())
}

/// Changes only Serve's `target_capacity` on a cluster: re-PUTs the config it already runs.
async fn set_target_capacity(
    ns: &str,
    rc_api: &Api<RayCluster>,
    cluster: &str,
    percent: i32,
    ctx: &Context,
) -> Result<(), Error> {
    let rc = rc_api
        .get_opt(cluster)
        .await?
        .ok_or_else(|| Error::ClusterGone(cluster.to_string()))?;
    let endpoint = ctx.endpoint(&rc, ns).await?;
    let dashboard = (ctx.dashboards)(&endpoint);
    let secs = ctx.config.dashboard_timeout.as_secs();
    let timed_out = || Error::DashboardTimeout {
        cluster: cluster.to_string(),
        secs,
    };
    let dashboard_error = |source| Error::Dashboard {
        cluster: cluster.to_string(),
        source,
    };
    let details = tokio::time::timeout(ctx.config.dashboard_timeout, dashboard.serve_details(&endpoint))
        .await
        .map_err(|_| timed_out())?
        .map_err(dashboard_error)?;
    // The config this cluster already runs, so only its capacity changes.
    let running = ServeConfig::from_deployed(&details).map_err(dashboard_error)?;
    tokio::time::timeout(
        ctx.config.dashboard_timeout,
        dashboard.deploy(&endpoint, &running, Some(f64::from(percent))),
    )
    .await
    .map_err(|_| timed_out())?
    .map_err(dashboard_error)?;
    Ok(())
}

#[cfg(test)]
mod conflict_tests {
    use super::*;

    fn api_error(code: u16) -> Error {
        Error::Kube(kube::Error::Api(
            kube::core::Status::failure("conflict", "Conflict")
                .with_code(code)
                .boxed(),
        ))
    }

    #[test]
    fn a_lost_race_is_retried_without_a_warning() {
        assert!(!worth_a_warning(&api_error(409)));
        assert!(worth_a_warning(&api_error(500)));
        assert!(worth_a_warning(&Error::MissingField("spec")));
    }
}
