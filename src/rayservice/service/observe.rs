//! From API objects to the decision snapshot, and from a planned status back to the API status. Pure.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use sha2::Digest;

use super::plan::{ConditionPlan, ServiceStatusPlan, StatusPlan};
use super::snapshot::{
    AppView, ChildCluster, PriorCondition, PriorStatus, ServeObservation, UpgradeStrategy,
};
use crate::api::ray::constants as c;
use crate::api::ray::rayservice::{
    AppStatus, RayServiceStatus, ServeDeploymentStatus, ServiceStatus,
};
use crate::api::ray::{RayCluster, RayServiceSpec, RayServiceStatuses};
use crate::rayservice::clusterctl::GATE_ANNOTATION;
use crate::rayservice::dashboard::{DashboardError, ServeConfig, ServeDetails, serve_readiness};

/// On a child RayCluster: hash of the Serve config its dashboard last accepted (so a restart does not
/// re-push, unlike KubeRay's in-memory cache).
pub const SERVED_CONFIG_ANNOTATION: &str = "quotagate.io/served-config-hash";

/// On a child RayCluster: `"<config hash> <Ray's message>"` when Ray refused that config (HTTP 400), so
/// the same broken config is not re-sent every pass.
pub const REJECTED_CONFIG_ANNOTATION: &str = "quotagate.io/rejected-serve-config";

/// Short stable hash of `serveConfigV2` as written by the user.
pub fn serve_config_hash(yaml: &str) -> String {
    let digest = sha2::Sha256::digest(yaml.as_bytes());
    digest.iter().take(10).map(|b| format!("{b:02x}")).collect()
}

/// `spec.upgradeStrategy.type`, with `zero_downtime` (operator env `ENABLE_ZERO_DOWNTIME`) when unset.
pub fn strategy(spec: &RayServiceSpec, zero_downtime: bool) -> UpgradeStrategy {
    use crate::api::ray::rayservice::RayServiceUpgradeType as T;
    match spec.upgrade_type() {
        Some(T::NewCluster) => UpgradeStrategy::NewCluster,
        Some(T::NewClusterWithIncrementalUpgrade) => {
            UpgradeStrategy::NewClusterWithIncrementalUpgrade
        }
        Some(T::None) => UpgradeStrategy::None,
        None if zero_downtime => UpgradeStrategy::NewCluster,
        None => UpgradeStrategy::None,
    }
}

fn pod_ready(p: &Pod) -> bool {
    let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    let ready = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    running && ready && p.metadata.deletion_timestamp.is_none()
}

fn label<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// A child cluster as the decisions see it. `pods` are the pods labelled `ray.io/cluster=<name>`.
pub fn child_view(rc: &RayCluster, pods: &[Pod], serve: ServeObservation) -> ChildCluster {
    let ann = |k: &str| {
        rc.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(k))
            .cloned()
    };
    let head_ready = rc
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == c::COND_HEAD_POD_READY && c.status == "True")
        });
    let head = pods.iter().find(|p| {
        label(p, c::LABEL_NODE_TYPE) == Some(c::NODE_TYPE_HEAD)
            && p.metadata.deletion_timestamp.is_none()
    });
    let ready_serve_pods = pods
        .iter()
        .filter(|p| label(p, c::LABEL_SERVE) == Some("true") && pod_ready(p))
        .count();
    ChildCluster {
        name: rc.metadata.name.clone().unwrap_or_default(),
        hash: ann(c::ANNOTATION_HASH_WITHOUT_REPLICAS),
        num_worker_groups: ann(c::ANNOTATION_NUM_WORKER_GROUPS).and_then(|v| v.parse().ok()),
        operator_version: ann(c::ANNOTATION_KUBERAY_VERSION),
        gated: ann(GATE_ANNOTATION).is_some_and(|v| v == "true"),
        head_ready,
        served_config_hash: ann(SERVED_CONFIG_ANNOTATION),
        rejected_config: ann(REJECTED_CONFIG_ANNOTATION).and_then(|v| {
            v.split_once(' ')
                .map(|(h, m)| (h.to_string(), m.to_string()))
        }),
        serve,
        head_serve_label: head.map(|h| label(h, c::LABEL_SERVE) == Some("true")),
        ready_serve_pods: i32::try_from(ready_serve_pods).unwrap_or(i32::MAX),
        deleting: rc.metadata.deletion_timestamp.is_some(),
    }
}

/// The dashboard's answer as an observation; readiness is the dashboard module's stricter verdict.
pub fn serve_observation(
    result: Result<ServeDetails, DashboardError>,
    expected: Option<&ServeConfig>,
) -> ServeObservation {
    match result {
        Err(e) => ServeObservation::Unreachable(e.to_string()),
        Ok(details) => {
            let ready = serve_readiness(&details, expected).is_ready();
            let apps = details
                .applications
                .iter()
                .map(|(key, app)| {
                    let name = if key.is_empty() {
                        c::DEFAULT_SERVE_APP_NAME.to_string()
                    } else {
                        key.clone()
                    };
                    let deployments = app
                        .deployments
                        .iter()
                        .map(|(d, dep)| (d.clone(), (dep.status.to_string(), dep.message.clone())))
                        .collect();
                    (
                        name,
                        AppView {
                            status: app.status.to_string(),
                            message: app.message.clone(),
                            deployments,
                        },
                    )
                })
                .collect();
            ServeObservation::Apps { apps, ready }
        }
    }
}

fn to_ts(t: &Time) -> Timestamp {
    Timestamp::from_second(t.0.as_second()).unwrap_or(Timestamp::UNIX_EPOCH)
}

pub fn prior_status(status: Option<&RayServiceStatuses>) -> PriorStatus {
    let Some(s) = status else {
        return PriorStatus::default();
    };
    let name = |x: &Option<RayServiceStatus>| {
        x.as_ref()
            .and_then(|x| x.ray_cluster_name.clone())
            .filter(|n| !n.is_empty())
    };
    PriorStatus {
        active: name(&s.active_service_status),
        pending: name(&s.pending_service_status),
        conditions: s
            .conditions
            .iter()
            .flatten()
            .map(|c| PriorCondition {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                last_transition: to_ts(&c.last_transition_time),
            })
            .collect(),
    }
}

pub(crate) fn merge_condition(
    existing: &mut Vec<Condition>,
    plan: &ConditionPlan,
    now: &Time,
    generation: i64,
) {
    if plan.refresh {
        existing.retain(|c| c.type_ != plan.type_);
    }
    let new = Condition {
        type_: plan.type_.to_string(),
        status: plan.status.to_string(),
        reason: plan.reason.to_string(),
        message: plan.message.clone(),
        observed_generation: Some(generation),
        last_transition_time: now.clone(),
    };
    match existing.iter_mut().find(|c| c.type_ == plan.type_) {
        // lastTransitionTime moves only when the status does (metav1 SetStatusCondition semantics).
        Some(c) if c.status == new.status => {
            c.reason = new.reason;
            c.message = new.message;
            c.observed_generation = new.observed_generation;
        }
        Some(c) => *c = new,
        None => existing.push(new),
    }
}

fn service_status(
    prior: Option<&RayServiceStatus>,
    plan: &ServiceStatusPlan,
    clusters: &[RayCluster],
) -> RayServiceStatus {
    let same = prior.filter(|p| p.ray_cluster_name.as_deref() == Some(plan.cluster.as_str()));
    let applications = match &plan.applications {
        Some(apps) => Some(
            apps.iter()
                .map(|(name, a)| {
                    let deployments: BTreeMap<String, ServeDeploymentStatus> = a
                        .deployments
                        .iter()
                        .map(|(d, (st, msg))| {
                            (
                                d.clone(),
                                ServeDeploymentStatus {
                                    status: Some(st.clone()),
                                    message: Some(msg.clone()),
                                },
                            )
                        })
                        .collect();
                    let app = AppStatus {
                        deployments: Some(deployments),
                        status: Some(a.status.clone()),
                        message: Some(a.message.clone()),
                    };
                    (name.clone(), app)
                })
                .collect(),
        ),
        None => same.and_then(|p| p.applications.clone()),
    };
    let cluster_status = clusters
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(plan.cluster.as_str()))
        .and_then(|c| c.status.clone());
    RayServiceStatus {
        applications,
        ray_cluster_name: Some(plan.cluster.clone()),
        ray_cluster_status: cluster_status,
        ..same.cloned().unwrap_or_default()
    }
}

/// The status to write: the plan merged into what is stored. `lastUpdateTime` is left as stored so the
/// caller can compare and write only on a real change (then stamp it).
pub fn apply_status(
    prior: Option<&RayServiceStatuses>,
    plan: &StatusPlan,
    clusters: &[RayCluster],
    now: Timestamp,
) -> RayServiceStatuses {
    let mut s = prior.cloned().unwrap_or_default();
    let now = Time(now);
    let mut conditions = s.conditions.take().unwrap_or_default();
    for cp in &plan.conditions {
        merge_condition(&mut conditions, cp, &now, plan.observed_generation);
    }
    let ready = conditions
        .iter()
        .any(|c| c.type_ == c::COND_READY && c.status == "True");
    s.conditions = Some(conditions);
    s.active_service_status = plan
        .active
        .as_ref()
        .map(|a| service_status(s.active_service_status.as_ref(), a, clusters));
    s.pending_service_status = plan
        .pending
        .as_ref()
        .map(|p| service_status(s.pending_service_status.as_ref(), p, clusters));
    s.num_serve_endpoints = Some(plan.num_serve_endpoints);
    s.observed_generation = Some(plan.observed_generation);
    s.service_status = Some(if ready {
        ServiceStatus::Running
    } else {
        ServiceStatus::NotRunning
    });
    s
}
