//! Objects the RayService controller writes: child RayClusters and the RayService-level head and serve
//! Services (KubeRay's `constructRayClusterForRayService`, `BuildHeadServiceForRayService`,
//! `BuildServeService`). Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource;

use super::schedule;
use crate::api::ray::constants as c;
use crate::api::ray::constants::ANNOTATION_ADMISSION_GATED as GATE_ANNOTATION;
use crate::api::ray::{RayCluster, RayService};
use crate::rayservice::cluster::names;

/// Hashes of the desired child spec, computed by the caller with the cluster module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub hash: String,
    pub num_worker_groups: usize,
    pub operator_version: String,
}

/// `<rs>-head-svc`, never user-overridden.
pub fn head_service_name(rs: &str) -> String {
    names::owner_head_service_name(rs)
}

/// `spec.serveService.metadata.name` when the user customised the serve Service, else `<rs>-serve-svc`.
pub fn serve_service_name(rs: &RayService) -> String {
    rs.spec
        .serve_service
        .as_ref()
        .and_then(|s| s.metadata.name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| names::serve_service_name(&rs.metadata.name.clone().unwrap_or_default()))
}

pub use crate::rayservice::cluster::labels::{origin_labels, origin_selector};

fn child_labels(rs: &RayService) -> BTreeMap<String, String> {
    let mut labels = rs.metadata.labels.clone().unwrap_or_default();
    labels.extend(origin_labels(&rs.metadata.name.clone().unwrap_or_default()));
    labels
}

fn child_annotations(rs: &RayService, stamp: &Stamp) -> BTreeMap<String, String> {
    let mut ann = rs.metadata.annotations.clone().unwrap_or_default();
    // Our own bookkeeping on the RayService is not the child's business.
    ann.remove(schedule::ANNOTATION);
    ann.remove("kubectl.kubernetes.io/last-applied-configuration");
    ann.insert(c::ANNOTATION_HASH_WITHOUT_REPLICAS.into(), stamp.hash.clone());
    ann.insert(
        c::ANNOTATION_NUM_WORKER_GROUPS.into(),
        stamp.num_worker_groups.to_string(),
    );
    ann.insert(
        c::ANNOTATION_KUBERAY_VERSION.into(),
        stamp.operator_version.clone(),
    );
    ann
}

/// A new child RayCluster named `name` (the cluster module's KubeRay construction), without our own
/// RayService bookkeeping annotations; `gated` adds the admission gate.
/// `incremental`: the pending cluster of an incremental upgrade, whose workers start from
/// `minReplicas` and grow with Serve's target_capacity (the autoscaler adds them).
pub fn new_child(
    rs: &RayService,
    name: &str,
    operator_version: &str,
    gated: bool,
    incremental: bool,
) -> RayCluster {
    let mut rc = crate::rayservice::cluster::child::child_cluster(rs, name, operator_version, incremental);
    let annotations = rc.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.remove(schedule::ANNOTATION);
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    if gated {
        // Born held: suspended, and marked so the RayService controller knows to release it once an
        // admitted slice covers it.
        annotations.insert(GATE_ANNOTATION.into(), "true".into());
        rc.spec.suspend = Some(true);
    }
    rc
}

/// The in-place update of an existing child: the spec is replaced but its `suspend` kept (delegated to
/// whoever set it), labels and annotations re-stamped, and our per-cluster annotations (gate, served
/// config) preserved so an update never opens a gate or forces a re-push.
pub fn updated_child(existing: &RayCluster, rs: &RayService, stamp: &Stamp) -> RayCluster {
    let mut rc = existing.clone();
    let suspend = existing.spec.suspend;
    rc.spec = rs.spec.ray_cluster_config.clone();
    rc.spec.suspend = suspend;
    let mut annotations = child_annotations(rs, stamp);
    let old = existing.metadata.annotations.clone().unwrap_or_default();
    for key in [
        GATE_ANNOTATION,
        crate::api::ray::constants::ANNOTATION_CREATED_AT,
        super::observe::SERVED_CONFIG_ANNOTATION,
        super::observe::SERVED_CONFIG_TEXT_ANNOTATION,
        super::observe::REJECTED_CONFIG_ANNOTATION,
    ] {
        if let Some(v) = old.get(key) {
            annotations.insert(key.to_string(), v.clone());
        }
    }
    rc.metadata.labels = Some(child_labels(rs));
    rc.metadata.annotations = Some(annotations);
    rc
}

fn owned_meta(rs: &RayService, name: String, extra_labels: &[(&str, String)]) -> ObjectMeta {
    let rs_name = rs.metadata.name.clone().unwrap_or_default();
    let mut labels = origin_labels(&rs_name);
    for (k, v) in extra_labels {
        labels.insert((*k).to_string(), v.clone());
    }
    ObjectMeta {
        name: Some(name),
        namespace: rs.metadata.namespace.clone(),
        labels: Some(labels),
        owner_references: rs.controller_owner_ref(&()).map(|o| vec![o]),
        ..Default::default()
    }
}

/// `<rs>-head-svc` pointing at `cluster`: ports, type and headlessness copied from the cluster's own
/// head Service (KubeRay builds both from the same template), selector pinned to that cluster's head.
pub fn rayservice_head_service(
    rs: &RayService,
    cluster: &str,
    cluster_head_svc: Option<&Service>,
) -> Service {
    let rs_name = rs.metadata.name.clone().unwrap_or_default();
    let src = cluster_head_svc.and_then(|s| s.spec.clone()).unwrap_or_default();
    let selector = BTreeMap::from([
        (c::LABEL_CLUSTER.to_string(), cluster.to_string()),
        (c::LABEL_NODE_TYPE.to_string(), c::NODE_TYPE_HEAD.to_string()),
        (
            c::LABEL_IDENTIFIER.to_string(),
            format!("{cluster}-{}", c::NODE_TYPE_HEAD),
        ),
        (c::LABEL_APP_NAME.to_string(), c::APPLICATION_NAME.to_string()),
        (c::LABEL_CREATED_BY.to_string(), c::COMPONENT_NAME.to_string()),
    ]);
    Service {
        metadata: owned_meta(
            rs,
            head_service_name(&rs_name),
            &[(c::LABEL_NODE_TYPE, c::NODE_TYPE_HEAD.to_string())],
        ),
        spec: Some(ServiceSpec {
            ports: src.ports.clone(),
            type_: src.type_.clone(),
            cluster_ip: src.cluster_ip.filter(|ip| ip == "None"),
            publish_not_ready_addresses: src.publish_not_ready_addresses,
            selector: Some(selector),
            ..Default::default()
        }),
        status: None,
    }
}

/// Head container ports named `serve` or `serve-*` (HTTP and gRPC serving), as Service ports.
fn detected_serve_ports(rs: &RayService) -> Vec<ServicePort> {
    rs.spec
        .ray_cluster_config
        .head_group_spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|ctr| ctr.ports.as_ref())
        .map(|ps| {
            ps.iter()
                .filter(|p| {
                    p.name
                        .as_deref()
                        .is_some_and(|n| n == c::SERVING_PORT_NAME || n.starts_with("serve-"))
                })
                .map(|p| ServicePort {
                    name: p.name.clone(),
                    port: p.container_port,
                    target_port: Some(IntOrString::Int(p.container_port)),
                    protocol: p.protocol.clone(),
                    ..Default::default()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The RayService serve Service pointing at `cluster`'s serve endpoints (`ray.io/serve=true` pods).
/// With `spec.serveService` the user's Service is the base, as KubeRay's `BuildServeService` does: its
/// name, annotations, type and other spec fields are kept, its labels merged under ours, a user port
/// replaces the detected port of the same name, the namespace is ours and the selector always ours.
pub fn rayservice_serve_service(rs: &RayService, cluster: &str) -> Service {
    let rs_name = rs.metadata.name.clone().unwrap_or_default();
    let head = &rs.spec.ray_cluster_config.head_group_spec;
    let custom = rs.spec.serve_service.as_ref();
    let detected = detected_serve_ports(rs);
    let user_ports = custom
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.ports.clone())
        .unwrap_or_default();
    let ports = if !detected.is_empty() {
        detected
            .into_iter()
            .map(|auto| {
                user_ports
                    .iter()
                    .find(|u| u.name == auto.name)
                    .cloned()
                    .unwrap_or(auto)
            })
            .collect()
    } else if !user_ports.is_empty() {
        user_ports
    } else {
        vec![ServicePort {
            name: Some(c::SERVING_PORT_NAME.into()),
            port: c::DEFAULT_SERVING_PORT,
            target_port: Some(IntOrString::Int(c::DEFAULT_SERVING_PORT)),
            ..Default::default()
        }]
    };
    let mut meta = owned_meta(
        rs,
        serve_service_name(rs),
        &[(c::LABEL_SERVE, names::serve_service_label(&rs_name))],
    );
    let mut spec = custom.and_then(|s| s.spec.clone()).unwrap_or_default();
    if let Some(user) = custom {
        let mut labels = user.metadata.labels.clone().unwrap_or_default();
        labels.extend(meta.labels.take().unwrap_or_default());
        meta.labels = Some(labels);
        meta.annotations = user.metadata.annotations.clone();
    }
    spec.ports = Some(ports);
    if spec.type_.as_deref().is_none_or(str::is_empty) {
        spec.type_ = head.service_type.clone();
    }
    spec.selector = Some(BTreeMap::from([
        (c::LABEL_CLUSTER.to_string(), cluster.to_string()),
        (c::LABEL_SERVE.to_string(), "true".to_string()),
    ]));
    Service {
        metadata: meta,
        spec: Some(spec),
        status: None,
    }
}

/// The cluster a RayService Service currently selects (`ray.io/cluster` in its selector).
pub fn selected_cluster(svc: &Service) -> Option<String> {
    svc.spec
        .as_ref()?
        .selector
        .as_ref()?
        .get(c::LABEL_CLUSTER)
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ray::RayServiceSpec;

    fn rs() -> RayService {
        let mut rs = RayService::new("svc", RayServiceSpec::default());
        rs.metadata.namespace = Some("ml".into());
        rs.metadata.uid = Some("uid-1".into());
        rs.metadata.labels = Some(BTreeMap::from([(
            "kueue.x-k8s.io/queue-name".to_string(),
            "q".to_string(),
        )]));
        rs.metadata.annotations = Some(BTreeMap::from([(
            schedule::ANNOTATION.to_string(),
            "{}".to_string(),
        )]));
        rs
    }

    fn stamp(h: &str) -> Stamp {
        Stamp {
            hash: h.into(),
            num_worker_groups: 1,
            operator_version: "v1.7.0".into(),
        }
    }

    #[test]
    fn child_carries_origin_labels_hash_owner_and_gate() {
        let rc = new_child(&rs(), "svc-abcde", "v1.7.0", true, false);
        let labels = rc.metadata.labels.clone().unwrap();
        assert_eq!(labels[c::LABEL_ORIGINATED_FROM_CR_NAME], "svc");
        assert_eq!(labels[c::LABEL_ORIGINATED_FROM_CRD], "RayService");
        assert_eq!(labels["kueue.x-k8s.io/queue-name"], "q");
        let ann = rc.metadata.annotations.clone().unwrap();
        assert!(!ann[c::ANNOTATION_HASH_WITHOUT_REPLICAS].is_empty());
        assert_eq!(ann[GATE_ANNOTATION], "true");
        assert!(!ann.contains_key(schedule::ANNOTATION));
        let owner = &rc.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("RayService", Some(true))
        );
        assert!(
            !new_child(&rs(), "svc-abcde", "v1.7.0", false, false)
                .metadata
                .annotations
                .unwrap()
                .contains_key(GATE_ANNOTATION)
        );
    }

    /// KubeRay: the pending cluster of an incremental upgrade starts from `minReplicas` (its worker
    /// `replicas` unset) and grows with target_capacity; other children keep the spec's replicas.
    #[test]
    fn an_incremental_pending_child_starts_from_min_replicas() {
        let mut svc = rs();
        svc.spec.ray_cluster_config = serde_json::from_value(serde_json::json!({
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}}},
            "workerGroupSpecs": [{"groupName": "g", "replicas": 3, "minReplicas": 1, "maxReplicas": 5, "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-worker", "image": "ray"}]}}}]
        }))
        .unwrap();
        let replicas = |incremental| {
            new_child(&svc, "svc-abcde", "v1.7.0", false, incremental)
                .spec
                .worker_group_specs
                .unwrap()[0]
                .replicas
        };
        assert_eq!(replicas(true), None);
        assert_eq!(replicas(false), Some(3));
    }

    #[test]
    fn update_keeps_suspend_gate_and_served_config() {
        let mut existing = new_child(&rs(), "svc-abcde", "v1.7.0", true, false);
        existing.spec.suspend = Some(true);
        existing.metadata.annotations.as_mut().unwrap().insert(
            super::super::observe::SERVED_CONFIG_ANNOTATION.into(),
            "cfg".into(),
        );
        let mut rs2 = rs();
        rs2.spec.ray_cluster_config.ray_version = Some("2.60.0".into());
        let rc = updated_child(&existing, &rs2, &stamp("H2"));
        assert_eq!(rc.spec.suspend, Some(true));
        assert_eq!(rc.spec.ray_version.as_deref(), Some("2.60.0"));
        let ann = rc.metadata.annotations.unwrap();
        assert_eq!(
            (
                ann[GATE_ANNOTATION].as_str(),
                ann[c::ANNOTATION_HASH_WITHOUT_REPLICAS].as_str()
            ),
            ("true", "H2")
        );
        assert_eq!(ann[super::super::observe::SERVED_CONFIG_ANNOTATION], "cfg");
    }

    #[test]
    fn services_select_the_target_cluster() {
        let head = rayservice_head_service(&rs(), "svc-b", None);
        assert_eq!(head.metadata.name.as_deref(), Some("svc-head-svc"));
        assert_eq!(selected_cluster(&head).as_deref(), Some("svc-b"));
        let serve = rayservice_serve_service(&rs(), "svc-b");
        assert_eq!(serve.metadata.name.as_deref(), Some("svc-serve-svc"));
        let sel = serve.spec.as_ref().unwrap().selector.clone().unwrap();
        assert_eq!(
            (sel[c::LABEL_CLUSTER].as_str(), sel[c::LABEL_SERVE].as_str()),
            ("svc-b", "true")
        );
        assert_eq!(serve.spec.unwrap().ports.unwrap()[0].port, 8000);
        assert_eq!(
            origin_selector("svc"),
            "ray.io/originated-from-cr-name=svc,ray.io/originated-from-crd=RayService"
        );
    }

    #[test]
    fn custom_serve_service_is_the_base_with_our_selector_and_labels() {
        use crate::api::ray::raycluster::EmbeddedService;
        use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec};
        let mut r = rs();
        r.spec.ray_cluster_config.head_group_spec.template.spec = Some(PodSpec {
            containers: vec![Container {
                name: "ray-head".into(),
                ports: Some(vec![
                    ContainerPort {
                        name: Some("serve".into()),
                        container_port: 8000,
                        ..Default::default()
                    },
                    ContainerPort {
                        name: Some("serve-grpc".into()),
                        container_port: 9000,
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }],
            ..Default::default()
        });
        // Default: `<rs>-serve-svc`, detected serve ports, no annotations.
        assert_eq!(serve_service_name(&r), "svc-serve-svc");
        let plain = rayservice_serve_service(&r, "svc-b");
        assert_eq!(plain.spec.as_ref().unwrap().ports.as_ref().unwrap().len(), 2);
        assert!(plain.metadata.annotations.is_none());

        let mut custom = EmbeddedService::default();
        custom.metadata.name = Some("public".into());
        custom.metadata.namespace = Some("elsewhere".into());
        custom.metadata.annotations = Some(BTreeMap::from([(
            "lb.example/internal".to_string(),
            "true".to_string(),
        )]));
        custom.metadata.labels = Some(BTreeMap::from([
            ("team".to_string(), "ml".to_string()),
            (c::LABEL_SERVE.to_string(), "hijack".to_string()),
        ]));
        custom.spec = Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(vec![ServicePort {
                name: Some("serve-grpc".into()),
                port: 12345,
                app_protocol: Some("kubernetes.io/h2c".into()),
                ..Default::default()
            }]),
            selector: Some(BTreeMap::from([("app".to_string(), "x".to_string())])),
            ..Default::default()
        });
        r.spec.serve_service = Some(custom);
        assert_eq!(serve_service_name(&r), "public");
        let svc = rayservice_serve_service(&r, "svc-b");
        assert_eq!(svc.metadata.name.as_deref(), Some("public"));
        assert_eq!(svc.metadata.namespace.as_deref(), Some("ml"));
        assert_eq!(
            svc.metadata.annotations.as_ref().unwrap()["lb.example/internal"],
            "true"
        );
        let labels = svc.metadata.labels.clone().unwrap();
        assert_eq!(labels["team"], "ml");
        assert_eq!(labels[c::LABEL_SERVE], "svc-serve", "our labels win");
        let spec = svc.spec.unwrap();
        assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
        assert_eq!(
            spec.selector.unwrap(),
            BTreeMap::from([
                (c::LABEL_CLUSTER.to_string(), "svc-b".to_string()),
                (c::LABEL_SERVE.to_string(), "true".to_string()),
            ])
        );
        let ports: Vec<(Option<String>, i32, Option<String>)> = spec
            .ports
            .unwrap()
            .into_iter()
            .map(|p| (p.name, p.port, p.app_protocol))
            .collect();
        assert_eq!(
            ports,
            vec![
                (Some("serve".into()), 8000, None),
                (Some("serve-grpc".into()), 12345, Some("kubernetes.io/h2c".into())),
            ],
            "a user port replaces the detected one of the same name"
        );
        assert!(svc.metadata.owner_references.is_some());
    }
}
