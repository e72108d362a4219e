//! The RayCluster controller's I/O shell: Services, then pods as planned by `lifecycle::decide`, then status.

use crate::rayservice::cluster::labels::pod_label;
use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::instrument;

use super::lifecycle::{ClusterDecision, Facts, Phase, decide, facts, running_conditions};
use super::pods::{GroupView, PodAction, PodInputs, PodView, Recreate};
use crate::api::kueue::Workload;
use crate::api::merge_patch::merge_diff;
use crate::api::ray::constants as c;
use crate::api::ray::raycluster::{ClusterState, HeadInfo};
use crate::api::ray::validation::validate_ray_cluster_with;
use crate::api::ray::{RayCluster, RayClusterStatus};
use crate::jobframework::podset_info::{
    InfoOptions, PodSetInfo, flavors_by_name, merge_into_template, podsets_info_from_status, strip_template,
};
use crate::kit::shell;
use crate::rayservice::cluster::conditions::{ConditionPlan, FALSE, TRUE, merge_condition};
use crate::rayservice::cluster::hash::{
    RecreateDecision, hash_without_replicas_and_workers_to_delete, head_pod_stamp, recreate_decision,
};
use crate::rayservice::cluster::head_backoff;
use crate::rayservice::cluster::names;
use crate::rayservice::cluster::pod::{WorkerSlot, build_head_pod, build_worker_pod};
use crate::rayservice::cluster::podsets::HEAD_PODSET;
use crate::rayservice::cluster::replicas::{desired_resources, worker_pod_bounds};
use crate::rayservice::cluster::service::{head_service, headless_worker_service, needs_headless_service};
use crate::rayservice::job::gate;

pub use super::context::{Config, Context, Error, publish};

pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let pods = watcher::Config::default().labels(&format!(
        "{} in ({},{})",
        c::LABEL_NODE_TYPE,
        c::NODE_TYPE_HEAD,
        c::NODE_TYPE_WORKER
    ));
    let controller = Controller::new(Api::<RayCluster>::all(client.clone()), watcher::Config::default())
        .owns(Api::<Pod>::all(client.clone()), pods)
        .owns(Api::<Service>::all(client.clone()), watcher::Config::default());
    // A workload slice admitted or evicted opens or closes the gate of the RayCluster that owns it, of
    // its RayService's children, or of its RayJob's cluster (an elastic job's new slice).
    let clusters = controller.store();
    let wake = move |meta: &kube::api::ObjectMeta| -> Vec<ObjectRef<RayCluster>> {
        let owners = |kind: &str| -> Vec<String> {
            meta.owner_references
                .iter()
                .flatten()
                .filter(|o| o.kind == kind)
                .map(|o| o.name.clone())
                .collect()
        };
        let (services, own, jobs) = (
            owners(c::CRD_RAY_SERVICE),
            owners(c::CRD_RAY_CLUSTER),
            owners(c::CRD_RAY_JOB),
        );
        clusters
            .state()
            .into_iter()
            .filter(|rc| {
                rc.namespace() == meta.namespace
                    && (own.contains(&rc.name_any())
                        || gate::parent_service(rc).is_some_and(|p| services.contains(&p))
                        || gate::parent_ray_job(rc).is_some_and(|j| jobs.contains(&j)))
            })
            .map(|rc| ObjectRef::from_obj(rc.as_ref()))
            .collect::<Vec<_>>()
    };
    let controller = match &ctx.config.workload_events {
        Some(events) => {
            let kinds = [c::CRD_RAY_SERVICE, c::CRD_RAY_CLUSTER, c::CRD_RAY_JOB]
                .map(|k| ("ray.io/v1".to_string(), k.to_string()));
            controller.watches_stream(events.owned_by_any(kinds.to_vec()), move |wl| wake(&wl.metadata))
        }
        None => controller.watches(
            Api::<Workload>::all(client),
            watcher::Config::default(),
            move |wl: Workload| wake(&wl.metadata),
        ),
    };
    shell::run(controller, "raycluster", reconcile, ctx, |c| {
        c.config.busy_requeue
    })
    .await;
}

impl shell::ReconcileError for Error {
    fn category(&self) -> &'static str {
        Error::category(self)
    }
}

fn pod_view(p: &Pod) -> PodView {
    let status = p.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
    let ready = status.and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
        cs.iter()
            .any(|c| c.type_ == "Ready" && c.status == crate::api::conditions::TRUE)
    });
    let never_restart = p.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("Never");
    let ray_terminated = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .is_some_and(|cs| cs.state.as_ref().is_some_and(|st| st.terminated.is_some()));
    PodView {
        name: p.name_any(),
        head: pod_label(p, c::LABEL_NODE_TYPE) == Some(c::NODE_TYPE_HEAD),
        group: pod_label(p, c::LABEL_GROUP).unwrap_or("").to_string(),
        running: phase == "Running",
        ready,
        unhealthy: phase == "Failed" || phase == "Succeeded" || (never_restart && ray_terminated),
        deleting: p.metadata.deletion_timestamp.is_some(),
        replica_index: pod_label(p, c::LABEL_WORKER_REPLICA_INDEX).and_then(|v| v.parse().ok()),
        replica_name: pod_label(p, c::LABEL_WORKER_REPLICA_NAME).map(str::to_string),
        ip: status.and_then(|s| s.pod_ip.clone()),
    }
}

fn owned<K: Resource<DynamicType = ()>>(obj: &mut K, rc: &RayCluster) {
    if let Some(owner) = rc.controller_owner_ref(&()) {
        obj.meta_mut().owner_references = Some(vec![owner]);
    }
}

/// `QuotaGated`: True while the cluster's pods are not all covered by an admitted workload slice, with
/// the slice it waits for and Kueue's reason; False once covered.
fn quota_gated_condition(g: &gate::ClusterGate) -> ConditionPlan {
    ConditionPlan {
        type_: c::COND_QUOTA_GATED,
        status: if g.covered { FALSE } else { TRUE },
        reason: if g.covered {
            c::REASON_WORKLOAD_SLICE_ADMITTED
        } else {
            c::REASON_WAITING_FOR_WORKLOAD_SLICE
        },
        message: g.message(),
        refresh: false,
    }
}

/// `quotagate.io/QuotaExceeded` (kuberay#4846): True, at once, while pods the cluster wants (a
/// worker group's scale-up, or the cluster itself) wait for a workload slice Kueue found no quota
/// for, naming each group short and Kueue's reason, so an autoscaler or a person can react instead
/// of waiting out a timeout; False while the gate covers the cluster or what it waits for is not
/// quota (admission checks, a slice no admission cycle has seen yet).
fn quota_exceeded_condition(rc: &RayCluster, g: &gate::ClusterGate) -> ConditionPlan {
    let short = if g.covered {
        BTreeMap::new()
    } else {
        g.short_of(rc)
    };
    match &g.waiting {
        Some(p) if p.quota_denied && !short.is_empty() => {
            let groups: Vec<String> = short
                .iter()
                .map(|(group, n)| {
                    let what = if group == crate::rayservice::cluster::podsets::HEAD_PODSET {
                        "head".to_string()
                    } else {
                        format!("worker group {group}")
                    };
                    format!("{what}: {n} pod(s)")
                })
                .collect();
            ConditionPlan {
                type_: c::COND_QUOTA_EXCEEDED,
                status: TRUE,
                reason: c::REASON_QUOTA_EXCEEDED,
                message: format!(
                    "{} wait for quota: workload slice {} (LocalQueue {}): {}",
                    groups.join(", "),
                    p.workload,
                    p.local_queue,
                    p.message
                ),
                refresh: false,
            }
        }
        _ => ConditionPlan {
            type_: c::COND_QUOTA_EXCEEDED,
            status: FALSE,
            reason: c::REASON_WITHIN_QUOTA,
            message: "no pod of this cluster waits for quota Kueue cannot give".to_string(),
            refresh: false,
        },
    }
}

fn has_condition(rc: &RayCluster, type_: &str) -> bool {
    crate::api::conditions::is_true(rc.status.as_ref().and_then(|s| s.conditions.as_deref()), type_)
}

#[instrument(skip_all, fields(name = %rc.name_any(), ns = rc.namespace().unwrap_or_default()))]
pub async fn reconcile(rc: Arc<RayCluster>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    let ns = rc.namespace().ok_or(Error::MissingField("metadata.namespace"))?;
    let name = rc.name_any();
    if !crate::rayservice::cluster::is_ours_and_live(&rc) {
        return Ok(Requeue::await_change());
    }
    if let Some(e) = validate_ray_cluster_with(&rc, ctx.config.gates).first() {
        publish(
            &ctx,
            &rc,
            EventType::Warning,
            "InvalidRayClusterSpec",
            e.to_string(),
        )
        .await;
        return Ok(Requeue::await_change());
    }
    super::autoscaler_rbac::ensure(&rc, &ns, &ctx).await?;
    ensure_auth_secret(&rc, &ns, &ctx).await?;
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let svc_api: Api<Service> = Api::namespaced(ctx.client.clone(), &ns);
    let head_svc = ensure_services(&rc, &svc_api, &ctx).await?;

    let pods = pods_api
        .list(&ListParams::default().labels(&format!("{}={name}", c::LABEL_CLUSTER)))
        .await?
        .items;
    let Some(rc) = reread_if_suspending(rc, &ns, &name, &ctx).await? else {
        return Ok(Requeue::await_change());
    };
    let views: Vec<PodView> = pods.iter().map(pod_view).collect();
    // The quota gate: computed from the admitted Workload of the cluster's own chain or of its parent
    // RayService, never from a field of this object a user could edit.
    let cluster_gate = gate::cluster_gate(&ctx.client, &ctx.config.managed_jobs, &rc).await?;
    let admission = admission_info(&ctx, &rc, cluster_gate.as_ref()).await?;
    let now = Timestamp::now();
    let backoff = head_backoff_record(&rc, &views, now, &ctx).await?;
    let head_wait = head_backoff_wait(backoff.as_ref(), now);
    let decision = decide_pods(
        &rc,
        &pods,
        &views,
        cluster_gate.as_ref(),
        &admission,
        head_wait.is_some(),
        &ctx.config,
    );
    let (desired_workers, min_workers, max_workers) = worker_pod_bounds(&rc.spec);
    // A count past the cluster limit is said before this pass's pods: they may fill the API server's
    // storage, after which no status write lands (etcd refuses every growing write).
    let mut said_early = rc.status.clone().unwrap_or_default();
    let limit_said = super::cluster_limit::apply(&mut said_early, desired_workers);
    if let Some(said) = &limit_said {
        publish(
            &ctx,
            &rc,
            EventType::Warning,
            "ReplicasBeyondClusterLimit",
            said.clone(),
        )
        .await;
        if let Err(e) = write_status(&rc, &ns, &name, said_early, &ctx).await {
            tracing::warn!(cluster = %name, error = %e, "could not say the cluster limit before creating pods");
        }
    }
    let failure = execute_pods(&rc, &admission, &decision.pods, &views, &pods_api, &ctx).await;
    if let Some((reason, msg)) = &failure {
        publish(&ctx, &rc, EventType::Warning, reason, msg.clone()).await;
    }

    let f = facts(&views, desired_workers);
    let conditions = cluster_conditions(&rc, &decision, &f, cluster_gate.as_ref(), &ctx).await;
    let mut status = next_status(
        &rc,
        &f,
        decision.phase,
        &conditions,
        failure.as_ref(),
        head_svc.as_ref(),
        (desired_workers, min_workers, max_workers),
    );
    let head_ready = views.iter().any(|p| p.head && !p.deleting && p.ready);
    set_backoff_reason(&mut status, backoff.as_ref(), head_ready, now);
    // Said once, above; this keeps (or clears) the reason in the pass's full status.
    let _ = super::cluster_limit::apply(&mut status, desired_workers);
    write_status(&rc, &ns, &name, status, &ctx).await?;
    let every = requeue_period(&decision, failure.is_some(), &f, &ctx.config);
    // A head waiting out its back-off is created when the wait ends, not up to a period later.
    Ok(Requeue::requeue(head_wait.map_or(every, |w| w.min(every))))
}

/// The cluster to plan from; None when it is gone.
///
/// The lifecycle conditions drive the destructive steps (Suspending deletes every pod, even when
/// `suspend` flipped back), and the cached copy can be older than the pods just listed: a pass
/// that saw the resume and created pods is then followed by one that reads Suspending from the
/// cache and deletes them. So those conditions are read again, after the pods.
async fn reread_if_suspending(
    rc: Arc<RayCluster>,
    ns: &str,
    name: &str,
    ctx: &Context,
) -> Result<Option<Arc<RayCluster>>, Error> {
    if !(has_condition(&rc, c::COND_RAY_CLUSTER_SUSPENDING)
        || has_condition(&rc, c::COND_RAY_CLUSTER_SUSPENDED))
    {
        return Ok(Some(rc));
    }
    let fresh = Api::<RayCluster>::namespaced(ctx.client.clone(), ns)
        .get_opt(name)
        .await?;
    Ok(fresh.map(Arc::new))
}

/// How long the head's crash-loop back-off still holds its creation, if it does.
fn head_backoff_wait(
    backoff: Option<&head_backoff::HeadRestarts>,
    now: Timestamp,
) -> Option<std::time::Duration> {
    backoff
        .map(|r| r.next_create())
        .filter(|t| *t > now)
        .and_then(|t| std::time::Duration::try_from(t.duration_since(now)).ok())
}

/// The lifecycle decision over this pass's pods: the phase, the pod actions and the suspend
/// machine's conditions.
fn decide_pods(
    rc: &RayCluster,
    pods: &[Pod],
    views: &[PodView],
    cluster_gate: Option<&gate::ClusterGate>,
    admission: &AdmissionInfo,
    head_waiting: bool,
    config: &Config,
) -> ClusterDecision {
    let head_pod = pods.iter().find(|p| {
        pod_label(p, c::LABEL_NODE_TYPE) == Some(c::NODE_TYPE_HEAD) && p.metadata.deletion_timestamp.is_none()
    });
    let recreate = match recreate_decision(
        &admission.as_written,
        head_pod.and_then(|p| p.metadata.annotations.as_ref()),
        &config.build.kuberay_version,
    ) {
        RecreateDecision::Keep => Recreate::Keep,
        RecreateDecision::Restamp(_) => Recreate::Restamp,
        RecreateDecision::RecreateAll => Recreate::All,
    };
    let inputs = PodInputs {
        head_backoff: head_waiting,
        gated: false,
        quota: cluster_gate.map(|g| g.allowed.clone()),
        recreate,
        autoscaling: rc.spec.autoscaling_enabled(),
        groups: GroupView::of(rc),
        pods: views.to_vec(),
    };
    decide(
        rc.spec.is_suspended(),
        has_condition(rc, c::COND_RAY_CLUSTER_SUSPENDING),
        has_condition(rc, c::COND_RAY_CLUSTER_SUSPENDED),
        &inputs,
    )
}

/// The conditions to write: the suspend machine's, the running ones while Running, and `QuotaGated`
/// for a queue-managed cluster (with an event when the gate closes or opens, not on every pass).
async fn cluster_conditions(
    rc: &RayCluster,
    decision: &ClusterDecision,
    f: &Facts,
    cluster_gate: Option<&gate::ClusterGate>,
    ctx: &Context,
) -> Vec<ConditionPlan> {
    let mut conditions = decision.conditions.clone();
    if decision.phase == Phase::Running {
        conditions.extend(running_conditions(
            f,
            has_condition(rc, c::COND_RAY_CLUSTER_PROVISIONED),
        ));
    }
    if let Some(g) = cluster_gate {
        let gated = quota_gated_condition(g);
        if has_condition(rc, c::COND_QUOTA_GATED) != (gated.status == TRUE) {
            let note = format!("{}: {}", gated.reason, gated.message);
            publish(ctx, rc, EventType::Normal, gated.reason, note).await;
        }
        conditions.push(gated);
        let exceeded = quota_exceeded_condition(rc, g);
        if exceeded.status == TRUE && !has_condition(rc, c::COND_QUOTA_EXCEEDED) {
            publish(
                ctx,
                rc,
                EventType::Warning,
                c::REASON_QUOTA_EXCEEDED,
                exceeded.message.clone(),
            )
            .await;
        }
        conditions.push(exceeded);
    }
    conditions
}

/// `status.reason` says the head is backing off while it is, and a back-off reason no longer true
/// is cleared.
fn set_backoff_reason(
    status: &mut RayClusterStatus,
    backoff: Option<&head_backoff::HeadRestarts>,
    head_ready: bool,
    now: Timestamp,
) {
    match head_backoff::status_reason(backoff, head_ready, now) {
        Some(reason) => status.reason = Some(reason),
        None if status
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with(head_backoff::REASON_PREFIX)) =>
        {
            status.reason = None;
        }
        None => {}
    }
}

/// Writes `status` when it differs from the stored one, stamped with the time of the write.
async fn write_status(
    rc: &RayCluster,
    ns: &str,
    name: &str,
    status: RayClusterStatus,
    ctx: &Context,
) -> Result<(), Error> {
    if rc.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let mut status = status;
    status.last_update_time = Some(Time(Timestamp::now()));
    let api: Api<RayCluster> = Api::namespaced(ctx.client.clone(), ns);
    // A merge patch keeps what it does not name: fields that went away (the deleted head pod's
    // name and IP, a cleared state) are sent as null.
    let old = serde_json::to_value(rc.status.clone().unwrap_or_default()).unwrap_or_default();
    let new = serde_json::to_value(&status).unwrap_or_default();
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": merge_diff(&old, &new) })),
    )
    .await?;
    Ok(())
}

/// Busy while pods change, a pod action failed, the cluster suspends or is not all ready yet;
/// KubeRay's idle period otherwise.
fn requeue_period(
    decision: &ClusterDecision,
    failed: bool,
    f: &Facts,
    config: &Config,
) -> std::time::Duration {
    let busy = !decision.pods.is_empty()
        || failed
        || decision.phase == Phase::Suspending
        || (decision.phase == Phase::Running && !f.all_ready);
    if busy {
        config.busy_requeue
    } else {
        config.idle_requeue
    }
}

/// The head's crash-loop record (`head_backoff`), updated on the RayCluster before anything else
/// happens this pass: a newly failed head is counted (with a Warning event) before it is deleted, so
/// a restart of the operator neither forgets nor double-counts it; a head Ready long enough clears it.
async fn head_backoff_record(
    rc: &RayCluster,
    views: &[PodView],
    now: Timestamp,
    ctx: &Context,
) -> Result<Option<head_backoff::HeadRestarts>, Error> {
    let record = rc
        .annotations()
        .get(head_backoff::ANNOTATION)
        .and_then(|v| head_backoff::HeadRestarts::parse(v));
    let head = views.iter().find(|p| p.head && !p.deleting);
    let api: Api<RayCluster> = Api::namespaced(ctx.client.clone(), &rc.namespace().unwrap_or_default());
    let write = |value: Value| json!({ "metadata": { "annotations": { head_backoff::ANNOTATION: value } } });
    if let Some(failed) = head.filter(|h| h.unhealthy) {
        let Some(next) = head_backoff::after_failure(record.as_ref(), &failed.name, now) else {
            return Ok(record);
        };
        api.patch(
            &rc.name_any(),
            &PatchParams::default(),
            &Patch::Merge(write(Value::String(next.encode()))),
        )
        .await?;
        let message = head_backoff::status_reason(Some(&next), false, now).unwrap_or_default();
        publish(ctx, rc, EventType::Warning, "HeadPodBackOff", message).await;
        return Ok(Some(next));
    }
    match record {
        Some(r) if head_backoff::resets(&r, head.is_some_and(|h| h.ready), now) => {
            api.patch(
                &rc.name_any(),
                &PatchParams::default(),
                &Patch::Merge(write(Value::Null)),
            )
            .await?;
            Ok(None)
        }
        other => Ok(other),
    }
}

/// Creates the operator-managed token Secret if the cluster needs one and it is absent (never rotates it).
async fn ensure_auth_secret(rc: &RayCluster, ns: &str, ctx: &Context) -> Result<(), Error> {
    let Some(wanted) = super::auth_secret::generated_secret(rc, "") else {
        return Ok(());
    };
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let name = wanted.metadata.name.clone().unwrap_or_default();
    if api.get_opt(&name).await?.is_some() {
        return Ok(());
    }
    let token = super::auth_secret::random_token();
    let Some(secret) = super::auth_secret::generated_secret(rc, &token) else {
        return Ok(());
    };
    // Created concurrently: keep theirs.
    shell::ignore_already_exists(api.create(&PostParams::default(), &secret).await)?;
    Ok(())
}

/// Head Service (always), headless worker Service (multi-host groups), `<cluster>-serve-svc` when the
/// `ray.io/enable-serve-service` annotation asks for it. Created if absent, never rewritten.
async fn ensure_services(
    rc: &RayCluster,
    api: &Api<Service>,
    ctx: &Context,
) -> Result<Option<Service>, Error> {
    let name = rc.name_any();
    let mut wanted = vec![head_service(rc, &ctx.config.build)?];
    if needs_headless_service(rc) {
        wanted.push(headless_worker_service(rc));
    }
    if rc
        .annotations()
        .get(c::ANNOTATION_ENABLE_SERVE_SERVICE)
        .is_some_and(|v| v == "true")
    {
        wanted.push(Service {
            metadata: kube::api::ObjectMeta {
                name: Some(names::serve_service_name(&name)),
                namespace: rc.namespace(),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                selector: Some(BTreeMap::from([(c::LABEL_CLUSTER.to_string(), name.clone())])),
                ports: Some(vec![ServicePort {
                    name: Some(c::SERVING_PORT_NAME.into()),
                    port: c::DEFAULT_SERVING_PORT,
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: None,
        });
    }
    let mut head = None;
    for (i, mut svc) in wanted.into_iter().enumerate() {
        let sname = svc.name_any();
        let existing = match api.get_opt(&sname).await? {
            Some(s) => s,
            None => {
                owned(&mut svc, rc);
                match shell::ignore_already_exists(api.create(&PostParams::default(), &svc).await) {
                    Ok(Some(s)) => {
                        publish(
                            ctx,
                            rc,
                            EventType::Normal,
                            "CreatedService",
                            format!("created Service {sname}"),
                        )
                        .await;
                        s
                    }
                    Ok(None) => api.get(&sname).await?,
                    Err(e) => return Err(e.into()),
                }
            }
        };
        if i == 0 {
            head = Some(existing);
        }
    }
    Ok(head)
}

/// What the admission of the cluster's Workload (its own, or its RayService's slice) puts on its
/// pods, and the cluster as its user wrote it (that info taken out of the templates), which the
/// Recreate hash is taken over: a re-apply that drops the injected node selector or podset label is
/// not a spec change.
struct AdmissionInfo {
    /// Group (`head` for the head) -> what each new pod of it carries.
    per_group: BTreeMap<String, PodSetInfo>,
    as_written: RayCluster,
}

async fn admission_info(
    ctx: &Context,
    rc: &RayCluster,
    g: Option<&gate::ClusterGate>,
) -> Result<AdmissionInfo, Error> {
    let Some(wl) = g.and_then(|g| g.admitted.as_ref()) else {
        return Ok(AdmissionInfo {
            per_group: BTreeMap::new(),
            as_written: rc.clone(),
        });
    };
    let flavors = flavors_by_name(&ctx.client).await?;
    // An admission whose info cannot be built (a flavor deleted since) adds nothing; the job
    // controller reports it when it starts the job.
    // Keyed by group: a podset named otherwise (a RayService's `<group>-<hash>`) stands for the group
    // the gate says it does.
    let group_of = |podset: &str| {
        g.and_then(|g| g.podset_of.iter().find(|(_, p)| p.as_str() == podset))
            .map_or_else(|| podset.to_string(), |(group, _)| group.clone())
    };
    let per_group: BTreeMap<String, PodSetInfo> =
        podsets_info_from_status(wl, &flavors, InfoOptions::default())
            .unwrap_or_default()
            .into_iter()
            .map(|i| (group_of(&i.name), i))
            .collect();
    let mut as_written = rc.clone();
    let spec = &mut as_written.spec;
    let head = &mut spec.head_group_spec.template;
    let mut templates = vec![(HEAD_PODSET.to_string(), head)];
    templates.extend(
        spec.worker_group_specs
            .iter_mut()
            .flatten()
            .map(|w| (w.group_name.to_lowercase(), &mut w.template)),
    );
    for (group, t) in templates {
        if let Some(info) = per_group.get(&group) {
            strip_template(
                t.metadata.get_or_insert_with(Default::default),
                t.spec.get_or_insert_with(Default::default),
                info,
            );
        }
    }
    Ok(AdmissionInfo {
        per_group,
        as_written,
    })
}

/// A new pod of `group` gets what its admission says, whatever its template says now.
fn with_admission_info(mut pod: Pod, group: &str, admission: &AdmissionInfo) -> Result<Pod, String> {
    if let Some(info) = admission.per_group.get(group) {
        merge_into_template(
            &mut pod.metadata,
            pod.spec.get_or_insert_with(Default::default),
            info,
        )
        .map_err(|e| format!("the admitted Workload's podset info does not fit the pod template: {e}"))?;
    }
    Ok(pod)
}

/// Executes pod actions; the first failure stops the chain (KubeRay) and is returned as
/// `(ReplicaFailure reason, message)`.
async fn execute_pods(
    rc: &RayCluster,
    admission: &AdmissionInfo,
    actions: &[PodAction],
    views: &[PodView],
    api: &Api<Pod>,
    ctx: &Context,
) -> Option<(&'static str, String)> {
    let opts = &ctx.config.build;
    for action in actions {
        let result: Result<(), (&'static str, String)> = match action {
            PodAction::DeleteAll { reason } => {
                let mut r = Ok(());
                for p in views.iter().filter(|p| !p.deleting) {
                    if let Err(e) = delete_pod(api, &p.name).await {
                        r = Err((
                            c::REASON_FAILED_DELETE_ALL_PODS,
                            format!("deleting pod {}: {}", p.name, api_text(&e)),
                        ));
                        break;
                    }
                }
                if r.is_ok() {
                    publish(
                        ctx,
                        rc,
                        EventType::Normal,
                        "DeletedPod",
                        format!("deleted all pods: {reason}"),
                    )
                    .await;
                }
                r
            }
            PodAction::CreateHead => match build_head_pod(rc, opts)
                .map_err(|e| e.to_string())
                .and_then(|pod| with_admission_info(pod, HEAD_PODSET, admission))
            {
                Err(e) => Err((c::REASON_FAILED_CREATE_HEAD_POD, e)),
                Ok(mut pod) => {
                    owned(&mut pod, rc);
                    let hash = hash_without_replicas_and_workers_to_delete(&admission.as_written.spec);
                    pod.metadata
                        .annotations
                        .get_or_insert_with(BTreeMap::new)
                        .extend(head_pod_stamp(&hash, &opts.kuberay_version));
                    match api.create(&PostParams::default(), &pod).await {
                        Ok(p) => {
                            publish(
                                ctx,
                                rc,
                                EventType::Normal,
                                "CreatedHeadPod",
                                format!("created head pod {}", p.name_any()),
                            )
                            .await;
                            Ok(())
                        }
                        Err(e) => Err((c::REASON_FAILED_CREATE_HEAD_POD, api_text(&e))),
                    }
                }
            },
            PodAction::RestampHead { name } => {
                let hash = hash_without_replicas_and_workers_to_delete(&admission.as_written.spec);
                let patch =
                    json!({ "metadata": { "annotations": head_pod_stamp(&hash, &opts.kuberay_version) } });
                api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map(|_| ())
                    .map_err(|e| (c::REASON_FAILED_CREATE_HEAD_POD, api_text(&e)))
            }
            PodAction::DeletePod { name, reason } => {
                let head = views.iter().any(|p| p.head && &p.name == name);
                let failed = if head {
                    c::REASON_FAILED_DELETE_HEAD_POD
                } else {
                    c::REASON_FAILED_DELETE_WORKER_POD
                };
                match delete_pod(api, name).await {
                    Ok(()) => {
                        publish(
                            ctx,
                            rc,
                            EventType::Normal,
                            "DeletedPod",
                            format!("deleted pod {name}: {reason}"),
                        )
                        .await;
                        Ok(())
                    }
                    Err(e) => Err((failed, api_text(&e))),
                }
            }
            PodAction::CreateWorkers { group, workers } => {
                create_workers(rc, admission, group, workers, api, ctx).await
            }
        };
        if let Err(f) = result {
            return Some(f);
        }
    }
    None
}

async fn create_workers(
    rc: &RayCluster,
    admission: &AdmissionInfo,
    group: &str,
    workers: &[super::pods::NewWorker],
    api: &Api<Pod>,
    ctx: &Context,
) -> Result<(), (&'static str, String)> {
    let mut replica_names: BTreeMap<usize, String> = BTreeMap::new();
    for w in workers {
        let replica_name = replica_names
            .entry(w.replica_ordinal)
            .or_insert_with(|| format!("{group}-{}", shell::random_suffix()))
            .clone();
        let slot = WorkerSlot {
            replica_index: w.replica_index,
            host_index: w.host_index,
            replica_name,
        };
        let mut pod = build_worker_pod(rc, group, &slot, &ctx.config.build)
            .map_err(|e| e.to_string())
            .and_then(|pod| with_admission_info(pod, &group.to_lowercase(), admission))
            .map_err(|e| (c::REASON_FAILED_CREATE_WORKER_POD, e))?;
        owned(&mut pod, rc);
        api.create(&PostParams::default(), &pod)
            .await
            .map_err(|e| (c::REASON_FAILED_CREATE_WORKER_POD, api_text(&e)))?;
    }
    publish(
        ctx,
        rc,
        EventType::Normal,
        "CreatedWorkerPod",
        format!("created {} worker pod(s) in group {group}", workers.len()),
    )
    .await;
    Ok(())
}

/// What the API server said, for a status message or event: its own message for a refusal (a quota's
/// "pods ... is forbidden: exceeded quota: ..."), not the client's debug dump of the whole Status.
fn api_text(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        e => e.to_string(),
    }
}

async fn delete_pod(api: &Api<Pod>, name: &str) -> Result<(), kube::Error> {
    shell::ignore_not_found(api.delete(name, &DeleteParams::default()).await).map(|_| ())
}

fn next_status(
    rc: &RayCluster,
    f: &Facts,
    phase: Phase,
    conditions: &[ConditionPlan],
    failure: Option<&(&'static str, String)>,
    head_svc: Option<&Service>,
    (desired, min, max): (i64, i64, i64),
) -> RayClusterStatus {
    let mut s = rc.status.clone().unwrap_or_default();
    let generation = rc.metadata.generation.unwrap_or(0);
    let now = Time(Timestamp::now());
    let mut conds: Vec<Condition> = s.conditions.take().unwrap_or_default();
    for cp in conditions {
        merge_condition(&mut conds, cp, &now, generation);
    }
    match failure {
        Some((reason, msg)) => {
            let cp = ConditionPlan {
                type_: c::COND_REPLICA_FAILURE,
                status: "True",
                reason,
                message: msg.clone(),
                refresh: false,
            };
            merge_condition(&mut conds, &cp, &now, generation);
        }
        None => conds.retain(|c| c.type_ != c::COND_REPLICA_FAILURE),
    }
    s.conditions = Some(conds);
    let before = s.state;
    s.state = match phase {
        Phase::Suspended => Some(ClusterState::Suspended),
        Phase::Running if f.all_ready && failure.is_none() => Some(ClusterState::Ready),
        _ if s.state == Some(ClusterState::Suspended) => None,
        _ => s.state,
    };
    // KubeRay v1.7: the time each state was last entered (an unchanged state keeps its time).
    if let Some(state) = s.state.filter(|_| s.state != before) {
        s.state_transition_times
            .get_or_insert_with(BTreeMap::new)
            .insert(state, now.clone());
    }
    let to_i32 = |v: i64| i32::try_from(v).unwrap_or(i32::MAX);
    s.ready_worker_replicas = Some(f.ready_workers);
    s.available_worker_replicas = Some(f.available_workers);
    s.desired_worker_replicas = Some(to_i32(desired));
    s.min_worker_replicas = Some(to_i32(min));
    s.max_worker_replicas = Some(to_i32(max));
    let res = desired_resources(&rc.spec);
    s.desired_cpu = Some(Quantity(res.cpu));
    s.desired_memory = Some(Quantity(res.memory));
    s.desired_gpu = Some(Quantity(res.gpu));
    s.desired_tpu = Some(Quantity(res.tpu));
    let svc_spec = head_svc.and_then(|svc| svc.spec.as_ref());
    let pod_ip = f.head.as_ref().and_then(|h| h.ip.clone());
    // KubeRay's getHeadServiceIPAndName: a headless head Service (the default) reports the head pod's IP.
    let service_ip = match svc_spec.and_then(|sp| sp.cluster_ip.clone()) {
        Some(ip) if ip == "None" => pod_ip.clone(),
        other => other.filter(|ip| !ip.is_empty()),
    };
    s.head = Some(HeadInfo {
        pod_ip,
        pod_name: f.head.as_ref().map(|h| h.name.clone()),
        service_name: head_svc.map(|svc| svc.name_any()),
        service_ip,
    });
    s.endpoints = svc_spec.and_then(|sp| sp.ports.as_ref()).map(|ports| {
        ports
            .iter()
            .filter_map(|p| p.name.clone().map(|n| (n, p.port.to_string())))
            .collect()
    });
    s.observed_generation = Some(generation);
    s.last_update_time = rc.status.as_ref().and_then(|o| o.last_update_time.clone());
    s
}
