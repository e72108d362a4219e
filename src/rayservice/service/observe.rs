//! From API objects to the decision snapshot, and from a planned status back to the API status. Pure.

use crate::rayservice::cluster::labels::pod_label;
use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sha2::Digest;

use super::plan::{ServiceStatusPlan, StatusPlan};
use super::snapshot::{
    AppView, ChildCluster, PriorCondition, PriorStatus, ServeObservation, TrafficStatus, UpgradeStrategy,
};
use crate::api::ray::constants as c;
use crate::api::ray::constants::ANNOTATION_ADMISSION_GATED as GATE_ANNOTATION;
use crate::api::ray::rayservice::{AppStatus, RayServiceStatus, ServeDeploymentStatus, ServiceStatus};
use crate::api::ray::{RayCluster, RayServiceSpec, RayServiceStatuses};
use crate::rayservice::dashboard::{DashboardError, ServeConfig, ServeDetails, serve_readiness};

/// On a child RayCluster: hash of the Serve config its dashboard last accepted (so a restart does not
/// re-push, unlike KubeRay's in-memory cache).
pub const SERVED_CONFIG_ANNOTATION: &str = c::ANNOTATION_SERVED_CONFIG_HASH;

/// On a child RayCluster: the Serve config (`serveConfigV2` as written) its dashboard last accepted,
/// so a cluster whose head lost its apps gets its OWN config back, even while the RayService's spec
/// already asks for another one for the pending cluster (KubeRay kept it in memory only).
pub const SERVED_CONFIG_TEXT_ANNOTATION: &str = "quotagate.io/served-config";

/// On a child RayCluster: `"<config hash> <Ray's message>"` when Ray refused that config (HTTP 400), so
/// the same broken config is not re-sent every pass.
pub const REJECTED_CONFIG_ANNOTATION: &str = c::ANNOTATION_REJECTED_SERVE_CONFIG;

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
        Some(T::NewClusterWithIncrementalUpgrade) => UpgradeStrategy::NewClusterWithIncrementalUpgrade,
        Some(T::None) => UpgradeStrategy::None,
        None if zero_downtime => UpgradeStrategy::NewCluster,
        None => UpgradeStrategy::None,
    }
}

/// Label the EndpointSlice controller puts on a Service's slices.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// `numServeEndpoints` as KubeRay counts it: distinct pods (by `targetRef.uid`) that some slice of the
/// serve Service lists as explicitly ready. Dual-stack slices list a pod twice; it counts once.
pub fn ready_serve_endpoints(slices: &[EndpointSlice]) -> i32 {
    let uids: std::collections::BTreeSet<&str> = slices
        .iter()
        .flat_map(|s| s.endpoints.iter())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .filter_map(|e| e.target_ref.as_ref()?.uid.as_deref())
        .filter(|uid| !uid.is_empty())
        .collect();
    i32::try_from(uids.len()).unwrap_or(i32::MAX)
}

/// The head pod's IP, once it has one and is not being deleted (where its Serve proxy answers).
pub fn head_pod_ip(pods: &[Pod]) -> Option<String> {
    pods.iter()
        .find(|p| {
            pod_label(p, c::LABEL_NODE_TYPE) == Some(c::NODE_TYPE_HEAD)
                && p.metadata.deletion_timestamp.is_none()
        })
        .and_then(|p| p.status.as_ref()?.pod_ip.clone())
        .filter(|ip| !ip.is_empty())
}

/// The head container's `serve` port (KubeRay's `GetServePort`), default 8000.
pub fn serve_port(spec: &crate::api::ray::RayClusterSpec) -> i32 {
    spec.head_group_spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|ctr| ctr.ports.as_ref())
        .and_then(|ps| {
            ps.iter()
                .find(|p| p.name.as_deref() == Some(c::SERVING_PORT_NAME))
        })
        .map_or(c::DEFAULT_SERVING_PORT, |p| p.container_port)
}

/// A child cluster as the decisions see it. `pods` are the pods labelled `ray.io/cluster=<name>`; the
/// shell fills in `proxy_healthy` after probing.
pub fn child_view(rc: &RayCluster, pods: &[Pod], serve: ServeObservation) -> ChildCluster {
    let ann = |k: &str| rc.metadata.annotations.as_ref().and_then(|a| a.get(k)).cloned();
    let head_ready = crate::api::conditions::is_true(
        rc.status.as_ref().and_then(|s| s.conditions.as_deref()),
        c::COND_HEAD_POD_READY,
    );
    let head = pods.iter().find(|p| {
        pod_label(p, c::LABEL_NODE_TYPE) == Some(c::NODE_TYPE_HEAD) && p.metadata.deletion_timestamp.is_none()
    });
    let gated = ann(GATE_ANNOTATION).is_some_and(|v| v == "true");
    ChildCluster {
        name: rc.metadata.name.clone().unwrap_or_default(),
        hash: ann(c::ANNOTATION_HASH_WITHOUT_REPLICAS),
        num_worker_groups: ann(c::ANNOTATION_NUM_WORKER_GROUPS).and_then(|v| v.parse().ok()),
        operator_version: ann(c::ANNOTATION_KUBERAY_VERSION),
        gated,
        head_ready,
        own_config_known: ann(SERVED_CONFIG_TEXT_ANNOTATION)
            .is_some_and(|text| ann(SERVED_CONFIG_ANNOTATION) == Some(serve_config_hash(&text))),
        served_config_hash: ann(SERVED_CONFIG_ANNOTATION),
        rejected_config: ann(REJECTED_CONFIG_ANNOTATION)
            .and_then(|v| v.split_once(' ').map(|(h, m)| (h.to_string(), m.to_string()))),
        serve,
        head_serve_label: head.map(|h| pod_label(h, c::LABEL_SERVE) == Some("true")),
        proxy_healthy: None,
        deleting: rc.metadata.deletion_timestamp.is_some(),
        reported_capacity: None,
        running_since: if gated { None } else { running_since(rc) },
        head_failing: head_failure(rc),
    }
}

/// Why the cluster has no head: its head crash-loops (`status.reason`, `cluster::head_backoff`), or
/// the head pod cannot be created (`ReplicaFailure=True/FailedCreateHeadPod`, e.g. the ServiceAccount
/// its template names does not exist), as `FailedCreateHeadPod: <the API server's answer>`.
fn head_failure(rc: &RayCluster) -> Option<String> {
    let status = rc.status.as_ref()?;
    if let Some(r) = status
        .reason
        .as_ref()
        .filter(|r| r.starts_with(crate::rayservice::cluster::head_backoff::REASON_PREFIX))
    {
        return Some(r.clone());
    }
    status
        .conditions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|x| {
            x.type_ == c::COND_REPLICA_FAILURE
                && x.status == "True"
                && x.reason == c::REASON_FAILED_CREATE_HEAD_POD
        })
        .map(|x| format!("{}: {}", c::REASON_FAILED_CREATE_HEAD_POD, x.message))
}

/// When an ungated cluster's pods were first allowed: the `QuotaGated=False` transition, or its
/// creation when it never had the gate. `None` while its controller still reports it gated (the gate
/// has just opened): a long wait for quota does not count against the upgrade's deadline.
fn running_since(rc: &RayCluster) -> Option<jiff::Timestamp> {
    let gate = rc
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == c::COND_QUOTA_GATED));
    match gate {
        Some(g) if g.status == crate::api::conditions::FALSE => Some(g.last_transition_time.0),
        Some(_) => None,
        None => rc.metadata.creation_timestamp.as_ref().map(|t| t.0),
    }
}

/// Serve's reported `target_capacity` as a whole percent in 0..=100.
pub fn capacity_percent(details: &ServeDetails) -> Option<i32> {
    details
        .target_capacity
        .filter(|v| v.is_finite())
        .map(|v| v.round().clamp(0.0, 100.0) as i32)
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
                            status: app.status.clone(),
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
    let traffic = |x: &Option<RayServiceStatus>| {
        x.as_ref().map_or_else(TrafficStatus::default, |x| TrafficStatus {
            target_capacity: x.target_capacity,
            traffic: x.traffic_routed_percent,
            last_migrated: x.last_traffic_migrated_time.as_ref().map(to_ts),
        })
    };
    let failed = |x: &Option<RayServiceStatus>| -> Vec<(String, String)> {
        let Some(x) = x.as_ref() else { return Vec::new() };
        let cluster = x.ray_cluster_name.clone().unwrap_or_default();
        x.applications
            .iter()
            .flatten()
            .filter(|(_, a)| {
                a.status.as_deref()
                    == Some(crate::rayservice::dashboard::types::AppStatus::DeployFailed.as_str())
            })
            .map(|(app, _)| (cluster.clone(), app.clone()))
            .collect()
    };
    PriorStatus {
        failed_apps: failed(&s.active_service_status)
            .into_iter()
            .chain(failed(&s.pending_service_status))
            .collect(),
        active: name(&s.active_service_status),
        pending: name(&s.pending_service_status),
        active_traffic: traffic(&s.active_service_status),
        pending_traffic: traffic(&s.pending_service_status),
        conditions: s
            .conditions
            .iter()
            .flatten()
            .map(|c| PriorCondition {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
                last_transition: to_ts(&c.last_transition_time),
            })
            .collect(),
    }
}

pub(crate) use crate::rayservice::cluster::conditions::merge_condition;

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
                        status: Some(a.status.to_string()),
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
    let mut out = RayServiceStatus {
        applications,
        ray_cluster_name: Some(plan.cluster.clone()),
        ray_cluster_status: cluster_status,
        ..same.cloned().unwrap_or_default()
    };
    if let Some(t) = &plan.traffic {
        out.target_capacity = t.target_capacity;
        out.traffic_routed_percent = t.traffic;
        out.last_traffic_migrated_time = t.last_migrated.map(Time);
    }
    out
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
    let ready = crate::api::conditions::is_true(Some(&conditions), c::COND_READY);
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

#[cfg(test)]
mod endpoint_tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ObjectReference, PodStatus};
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions};

    fn ep(uid: Option<&str>, ready: Option<bool>) -> Endpoint {
        Endpoint {
            addresses: vec!["10.0.0.1".into()],
            conditions: Some(EndpointConditions {
                ready,
                ..Default::default()
            }),
            target_ref: uid.map(|u| ObjectReference {
                uid: Some(u.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn slice(endpoints: Vec<Endpoint>) -> EndpointSlice {
        EndpointSlice {
            address_type: "IPv4".into(),
            endpoints,
            metadata: Default::default(),
            ports: None,
        }
    }

    #[test]
    fn counts_distinct_explicitly_ready_pods() {
        let cases: Vec<(Vec<EndpointSlice>, i32)> = vec![
            (vec![], 0),
            (vec![slice(vec![ep(Some("a"), Some(true))])], 1),
            // Ready unknown or false, or no pod behind the address: not counted.
            (
                vec![slice(vec![
                    ep(Some("a"), None),
                    ep(Some("b"), Some(false)),
                    ep(None, Some(true)),
                    ep(Some(""), Some(true)),
                ])],
                0,
            ),
            // Dual stack: the same pod in an IPv4 and an IPv6 slice counts once.
            (
                vec![
                    slice(vec![ep(Some("a"), Some(true)), ep(Some("b"), Some(true))]),
                    slice(vec![ep(Some("a"), Some(true))]),
                ],
                2,
            ),
        ];
        for (slices, want) in cases {
            assert_eq!(ready_serve_endpoints(&slices), want, "{slices:?}");
        }
    }

    #[test]
    fn head_ip_and_serve_port() {
        let mut head = Pod::default();
        head.metadata.labels = Some(BTreeMap::from([(
            c::LABEL_NODE_TYPE.to_string(),
            c::NODE_TYPE_HEAD.to_string(),
        )]));
        assert_eq!(head_pod_ip(std::slice::from_ref(&head)), None);
        head.status = Some(PodStatus {
            pod_ip: Some("10.1.2.3".into()),
            ..Default::default()
        });
        let mut worker = head.clone();
        worker.metadata.labels = None;
        worker.status.as_mut().unwrap().pod_ip = Some("10.9.9.9".into());
        assert_eq!(head_pod_ip(&[worker, head]).as_deref(), Some("10.1.2.3"));

        let mut spec = crate::api::ray::RayClusterSpec::default();
        assert_eq!(serve_port(&spec), 8000);
        spec.head_group_spec.template.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            containers: vec![k8s_openapi::api::core::v1::Container {
                name: "ray-head".into(),
                ports: Some(vec![k8s_openapi::api::core::v1::ContainerPort {
                    name: Some("serve".into()),
                    container_port: 9000,
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            ..Default::default()
        });
        assert_eq!(serve_port(&spec), 9000);
    }
}
