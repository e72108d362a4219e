//! The RayCluster head Service (KubeRay's `BuildServiceForHeadPod`) and the multi-host headless Service.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{BuildError, BuildOptions, labels, names};
use crate::api::ray::RayCluster;
use crate::api::ray::constants as c;

/// The head Service of a RayCluster: selector on the head Pod, ports from the head container (unnamed ports
/// become `<port>-port`; KubeRay's defaults when none are declared), `metrics` always present. Headless by
/// default so clients reach the head Pod directly; a user-supplied `headService` is merged over.
pub fn head_service(cluster: &RayCluster, opts: &BuildOptions) -> Result<Service, BuildError> {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let spec = &cluster.spec;
    let head_template = &spec.head_group_spec.template;
    let head_container = head_template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .ok_or_else(|| BuildError::NoContainer(format!("{name} head group")))?;

    // The only label a user may pin on the selector is the app name, taken from the head template.
    let template_app = head_template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref())
        .and_then(|l| l.get(c::LABEL_APP_NAME));
    let mut selector = labels::head_service_selector(&name);
    if let Some(app) = template_app {
        selector.insert(c::LABEL_APP_NAME.into(), app.clone());
    }
    let annotations = spec.head_service_annotations.clone().unwrap_or_default();

    let mut ports: BTreeMap<String, i32> = BTreeMap::new();
    for p in head_container.ports.iter().flatten() {
        let pname = p
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("{}-port", p.container_port));
        ports.insert(pname, p.container_port);
    }
    if ports.is_empty() {
        ports = BTreeMap::from([
            (c::CLIENT_PORT_NAME.to_string(), c::DEFAULT_CLIENT_PORT),
            (c::GCS_SERVER_PORT_NAME.to_string(), c::DEFAULT_GCS_SERVER_PORT),
            (c::DASHBOARD_PORT_NAME.to_string(), c::DEFAULT_DASHBOARD_PORT),
            (c::METRICS_PORT_NAME.to_string(), c::DEFAULT_METRICS_PORT),
            (c::SERVING_PORT_NAME.to_string(), c::DEFAULT_SERVING_PORT),
        ]);
    }
    ports
        .entry(c::METRICS_PORT_NAME.into())
        .or_insert(c::DEFAULT_METRICS_PORT);
    // BTreeMap iteration is sorted by name, which is the order KubeRay sorts to.
    let svc_ports: Vec<ServicePort> = ports
        .into_iter()
        .map(|(n, p)| ServicePort {
            name: Some(n),
            port: p,
            app_protocol: Some(c::DEFAULT_SERVICE_APP_PROTOCOL.into()),
            ..Default::default()
        })
        .collect();
    let default_name = names::head_service_name(&name, spec);
    let service_type = spec
        .head_group_spec
        .service_type
        .clone()
        .filter(|t| !t.is_empty());

    if let Some(user) = &spec.head_group_spec.head_service {
        let mut svc = user.to_service();
        let mut svc_spec = svc.spec.take().unwrap_or_default();
        svc_spec.selector = Some(selector.clone());
        let mut user_ports = svc_spec.ports.take().unwrap_or_default();
        user_ports.extend(svc_ports);
        svc_spec.ports = Some(user_ports);
        if svc_spec.type_.as_deref().unwrap_or("").is_empty() {
            svc_spec.type_ = service_type;
        }
        svc.spec = Some(svc_spec);
        let meta = &mut svc.metadata;
        meta.annotations
            .get_or_insert_with(BTreeMap::new)
            .extend(annotations);
        meta.labels.get_or_insert_with(BTreeMap::new).extend(selector);
        if meta.name.as_deref().unwrap_or("").is_empty() {
            meta.name = Some(default_name);
        }
        meta.namespace = cluster.metadata.namespace.clone();
        return Ok(svc);
    }

    let headless = !opts.head_cluster_ip_service && service_type.as_deref().is_none_or(|t| t == "ClusterIP");
    Ok(Service {
        metadata: ObjectMeta {
            name: Some(default_name),
            namespace: cluster.metadata.namespace.clone(),
            labels: Some(selector.clone()),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(selector),
            ports: Some(svc_ports),
            type_: service_type,
            cluster_ip: headless.then(|| "None".to_string()),
            publish_not_ready_addresses: headless.then_some(true),
            ..Default::default()
        }),
        status: None,
    })
}

/// Peer-discovery Service for multi-host worker groups (`numOfHosts > 1`): headless, not-ready addresses published.
pub fn headless_worker_service(cluster: &RayCluster) -> Service {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    Service {
        metadata: ObjectMeta {
            name: Some(names::headless_service_name(&name)),
            namespace: cluster.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([(
                c::LABEL_HEADLESS_WORKER_SVC.to_string(),
                name.clone(),
            )])),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(BTreeMap::from([
                (c::LABEL_CLUSTER.to_string(), name),
                (c::LABEL_NODE_TYPE.to_string(), c::NODE_TYPE_WORKER.to_string()),
            ])),
            type_: Some("ClusterIP".into()),
            publish_not_ready_addresses: Some(true),
            ..Default::default()
        }),
        status: None,
    }
}

/// Whether any group needs the headless worker Service.
pub fn needs_headless_service(cluster: &RayCluster) -> bool {
    cluster
        .spec
        .worker_groups()
        .iter()
        .any(|g| g.num_of_hosts_or_default() > 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(head: serde_json::Value) -> RayCluster {
        serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc", "namespace": "ns"},
            "spec": {"headServiceAnnotations": {"a": "b"}, "headGroupSpec": head}
        }))
        .unwrap()
    }

    fn port_names(s: &Service) -> Vec<(String, i32)> {
        s.spec
            .as_ref()
            .unwrap()
            .ports
            .as_ref()
            .unwrap()
            .iter()
            .map(|p| (p.name.clone().unwrap(), p.port))
            .collect()
    }

    #[test]
    fn default_ports_and_headless() {
        let rc = cluster(json!({"template": {"spec": {"containers": [{"name": "ray"}]}}}));
        let s = head_service(&rc, &BuildOptions::default()).unwrap();
        assert_eq!(s.metadata.name.as_deref(), Some("rc-head-svc"));
        assert_eq!(s.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(
            port_names(&s),
            [
                ("client".into(), 10001),
                ("dashboard".into(), 8265),
                ("gcs-server".into(), 6379),
                ("metrics".into(), 8080),
                ("serve".into(), 8000)
            ]
        );
        let spec = s.spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.publish_not_ready_addresses, Some(true));
        assert_eq!(spec.selector.unwrap()["ray.io/identifier"], "rc-head");
        assert_eq!(s.metadata.annotations.unwrap()["a"], "b");
    }

    #[test]
    fn container_ports_named_and_metrics_added() {
        let rc = cluster(
            json!({"serviceType": "LoadBalancer", "template": {"spec": {"containers": [
            {"name": "ray", "ports": [{"containerPort": 6379, "name": "gcs-server"}, {"containerPort": 9000}]}]}}}),
        );
        let s = head_service(&rc, &BuildOptions::default()).unwrap();
        assert_eq!(
            port_names(&s),
            [
                ("9000-port".into(), 9000),
                ("gcs-server".into(), 6379),
                ("metrics".into(), 8080)
            ]
        );
        let spec = s.spec.unwrap();
        assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
        assert_eq!(
            spec.cluster_ip, None,
            "only ClusterIP head services are made headless"
        );
    }

    #[test]
    fn user_head_service_is_merged() {
        let rc = cluster(
            json!({"headService": {"metadata": {"name": "custom", "labels": {"x": "y"}},
            "spec": {"type": "NodePort", "ports": [{"name": "extra", "port": 1}]}},
            "template": {"spec": {"containers": [{"name": "ray", "ports": [{"containerPort": 8265, "name": "dashboard"}]}]}}}),
        );
        let s = head_service(&rc, &BuildOptions::default()).unwrap();
        assert_eq!(s.metadata.name.as_deref(), Some("custom"));
        assert_eq!(s.metadata.labels.as_ref().unwrap()["x"], "y");
        assert_eq!(s.metadata.labels.as_ref().unwrap()["ray.io/cluster"], "rc");
        assert_eq!(
            port_names(&s),
            [
                ("extra".into(), 1),
                ("dashboard".into(), 8265),
                ("metrics".into(), 8080)
            ]
        );
        assert_eq!(s.spec.unwrap().type_.as_deref(), Some("NodePort"));
    }

    #[test]
    fn no_container_is_an_error() {
        let rc = cluster(json!({"template": {}}));
        assert!(matches!(
            head_service(&rc, &BuildOptions::default()),
            Err(BuildError::NoContainer(_))
        ));
    }

    #[test]
    fn headless_worker_service_selects_workers() {
        let rc = cluster(json!({"template": {}}));
        let s = headless_worker_service(&rc);
        assert_eq!(s.metadata.name.as_deref(), Some("rc-headless"));
        assert_eq!(s.spec.unwrap().selector.unwrap()["ray.io/node-type"], "worker");
        assert!(!needs_headless_service(&rc));
    }
}
