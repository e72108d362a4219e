//! The Gateway API side of an incremental upgrade (KubeRay v1.7 names and shapes, research
//! `kuberay.md` §3.1): `<rs>-gateway`, `<rs>-httproute` and the per-cluster `<cluster>-serve-svc`, built
//! from the RayService, and read back into the [`TrafficView`] the decisions use. Pure.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

use super::build::rayservice_serve_service;
use super::snapshot::{IncrementalOptions, TrafficView};
use crate::api::gateway::{
    Gateway, GatewaySpec, HTTPBackendRef, HTTPPathMatch, HTTPRoute, HTTPRouteMatch, HTTPRouteRule,
    HTTPRouteSpec, Listener, ParentReference,
};
use crate::api::ray::{RayCluster, RayService};
use crate::rayservice::cluster::labels::origin_labels;
use crate::rayservice::cluster::names;

/// KubeRay's `DefaultGatewayListenerPort`.
pub const LISTENER_PORT: i32 = 80;
const LISTENER_NAME: &str = "http";
const SERVE_SVC_SUFFIX: &str = "-serve-svc";

/// `<cluster>-serve-svc`.
pub fn cluster_serve_service_name(cluster: &str) -> String {
    format!("{cluster}{SERVE_SVC_SUFFIX}")
}

/// The options with KubeRay's defaults (validation refused out-of-range values before this).
pub fn options(rs: &RayService) -> IncrementalOptions {
    let o = rs.spec.cluster_upgrade_options();
    IncrementalOptions {
        max_surge: o.map_or(100, |o| o.max_surge_percent_or_default()).clamp(0, 100),
        step: o.and_then(|o| o.step_size_percent).unwrap_or(100).clamp(0, 100),
        interval: jiff::SignedDuration::from_secs(i64::from(
            o.and_then(|o| o.interval_seconds).unwrap_or(1).max(0),
        )),
        gateway_class: o.and_then(|o| o.gateway_class_name.clone()).unwrap_or_default(),
        timer_only: false,
    }
}

fn owned_meta(rs: &RayService, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: rs.metadata.namespace.clone(),
        labels: Some(origin_labels(&rs.metadata.name.clone().unwrap_or_default())),
        owner_references: rs.controller_owner_ref(&()).map(|o| vec![o]),
        ..Default::default()
    }
}

/// `<rs>-gateway`: the class from the options, one HTTP listener on port 80.
pub fn gateway(rs: &RayService, class: &str) -> Gateway {
    let name = names::gateway_name(&rs.metadata.name.clone().unwrap_or_default());
    let mut gw = Gateway::new(
        &name,
        GatewaySpec {
            gateway_class_name: class.to_string(),
            listeners: vec![Listener {
                name: LISTENER_NAME.into(),
                protocol: "HTTP".into(),
                port: LISTENER_PORT,
                ..Default::default()
            }],
            ..Default::default()
        },
    );
    gw.metadata = owned_meta(rs, name);
    gw
}

/// Whether an existing Gateway already has the class and listener we would write.
pub fn gateway_current(existing: &Gateway, class: &str) -> bool {
    existing.spec.gateway_class_name == class
        && existing.spec.listeners.len() == 1
        && existing.spec.listeners[0].name == LISTENER_NAME
        && existing.spec.listeners[0].protocol == "HTTP"
        && existing.spec.listeners[0].port == LISTENER_PORT
}

/// `<rs>-httproute`: parent the gateway, one rule `PathPrefix /`, one weighted backend per cluster.
pub fn httproute(rs: &RayService, backends: &[(String, i32)], serve_port: i32) -> HTTPRoute {
    let rs_name = rs.metadata.name.clone().unwrap_or_default();
    let parent = ParentReference {
        name: names::gateway_name(&rs_name),
        namespace: rs.metadata.namespace.clone(),
        ..Default::default()
    };
    httproute_to(rs, parent, backends, serve_port)
}

/// `<rs>-httproute` as [`httproute`], under another parent (a shared Gateway, `adopt`).
pub fn httproute_to(
    rs: &RayService,
    parent: ParentReference,
    backends: &[(String, i32)],
    serve_port: i32,
) -> HTTPRoute {
    let rs_name = rs.metadata.name.clone().unwrap_or_default();
    let name = names::httproute_name(&rs_name);
    let spec = HTTPRouteSpec {
        parent_refs: Some(vec![parent]),
        rules: Some(vec![HTTPRouteRule {
            matches: Some(vec![HTTPRouteMatch {
                path: Some(HTTPPathMatch {
                    type_: Some("PathPrefix".into()),
                    value: Some("/".into()),
                }),
                ..Default::default()
            }]),
            backend_refs: Some(backend_refs(rs, backends, serve_port)),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let mut route = HTTPRoute::new(&name, spec);
    route.metadata = owned_meta(rs, name);
    route
}

/// One weighted reference to `<cluster>-serve-svc` (in the RayService's namespace) per cluster.
pub fn backend_refs(rs: &RayService, backends: &[(String, i32)], serve_port: i32) -> Vec<HTTPBackendRef> {
    backends
        .iter()
        .map(|(cluster, weight)| HTTPBackendRef {
            name: cluster_serve_service_name(cluster),
            namespace: rs.metadata.namespace.clone(),
            port: Some(serve_port),
            weight: Some(*weight),
            ..Default::default()
        })
        .collect()
}

/// The `(cluster, weight)` backends of a route's first rule, by the exact Service name
/// `<cluster>-serve-svc` (a backend of any other name is listed under its own name).
pub fn route_backends(route: &HTTPRoute) -> Vec<(String, i32)> {
    route
        .spec
        .rules
        .as_ref()
        .and_then(|rules| rules.first()?.backend_refs.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|b| {
            let cluster = b
                .name
                .strip_suffix(SERVE_SVC_SUFFIX)
                .map_or_else(|| b.name.clone(), str::to_string);
            (cluster, b.weight.unwrap_or(1))
        })
        .collect()
}

/// `<cluster>-serve-svc`: the RayService's serve Service shape, selecting this cluster's serve
/// endpoints, owned by the cluster so it goes with it.
pub fn cluster_serve_service(rs: &RayService, rc: &RayCluster) -> Service {
    let cluster = rc.metadata.name.clone().unwrap_or_default();
    let mut svc = rayservice_serve_service(rs, &cluster);
    svc.metadata.name = Some(cluster_serve_service_name(&cluster));
    svc.metadata.owner_references = rc.metadata.uid.clone().map(|uid| {
        vec![OwnerReference {
            api_version: "ray.io/v1".into(),
            kind: "RayCluster".into(),
            name: cluster.clone(),
            uid,
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]
    });
    svc
}

/// A route's parents and rules with the Gateway API CRD's defaults filled in: the real CRD stores
/// `group`/`kind` on parent and backend references, `weight: 1` and a `PathPrefix /` match, so a
/// route the API server defaulted is the route we wrote (else every pass would rewrite it).
pub(crate) fn with_defaults(spec: &HTTPRouteSpec) -> (Vec<ParentReference>, Vec<HTTPRouteRule>) {
    let mut parents = spec.parent_refs.clone().unwrap_or_default();
    for p in &mut parents {
        p.group.get_or_insert_with(|| "gateway.networking.k8s.io".into());
        p.kind.get_or_insert_with(|| "Gateway".into());
    }
    let mut rules = spec.rules.clone().unwrap_or_default();
    for r in &mut rules {
        let matches = r.matches.get_or_insert_with(|| vec![HTTPRouteMatch::default()]);
        for m in matches {
            let path = m.path.get_or_insert_with(Default::default);
            path.type_.get_or_insert_with(|| "PathPrefix".into());
            path.value.get_or_insert_with(|| "/".into());
        }
        for b in r.backend_refs.get_or_insert_with(Vec::new) {
            b.group.get_or_insert_with(String::new);
            b.kind.get_or_insert_with(|| "Service".into());
            b.weight.get_or_insert(1);
        }
    }
    (parents, rules)
}

/// What the Gateway API objects say, for the decisions. `route` backends are mapped to clusters by
/// the exact Service name `<cluster>-serve-svc` (KubeRay matches by substring, which confuses
/// `rs-a` with `rs-ab`).
pub fn view(
    rs: &RayService,
    options: &IncrementalOptions,
    gateway: Option<&Gateway>,
    route: Option<&HTTPRoute>,
    serve_services: BTreeSet<String>,
    serve_port: i32,
) -> TrafficView {
    let rs_name = rs.metadata.name.clone().unwrap_or_default();
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let gateway_name = names::gateway_name(&rs_name);
    let backends = route.map(route_backends).unwrap_or_default();
    let route_shape_current = route.is_some_and(|r| {
        let wanted = httproute(rs, &backends, serve_port);
        with_defaults(&r.spec) == with_defaults(&wanted.spec)
    });
    TrafficView {
        gateway: gateway_name.clone(),
        gateway_current: gateway.is_some_and(|g| gateway_current(g, &options.gateway_class)),
        gateway_ready: gateway.is_some_and(Gateway::is_ready),
        route_exists: route.is_some(),
        route_ready: route.is_some_and(|r| r.is_ready_for(&gateway_name, &ns)),
        route_current: route.is_some_and(|r| r.is_current_for(&gateway_name, &ns)),
        backends,
        route_shape_current,
        serve_services,
        problem: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ray::RayServiceSpec;

    fn rs() -> RayService {
        let mut rs = RayService::new("svc", RayServiceSpec::default());
        rs.metadata.namespace = Some("ml".into());
        rs
    }

    /// The route as a real API server stores it, with the Gateway API CRD's defaults (group and kind of
    /// each reference), is the route we wrote: its shape is current and nothing is rewritten.
    #[test]
    fn a_route_the_api_server_defaulted_is_current() {
        let rs = rs();
        let mut stored = httproute(&rs, &[("svc-a".into(), 100)], 8000);
        for p in stored.spec.parent_refs.iter_mut().flatten() {
            p.group = Some("gateway.networking.k8s.io".into());
            p.kind = Some("Gateway".into());
        }
        for b in stored
            .spec
            .rules
            .iter_mut()
            .flatten()
            .flat_map(|r| r.backend_refs.iter_mut().flatten())
        {
            b.group = Some(String::new());
            b.kind = Some("Service".into());
        }
        let o = options(&rs);
        let v = view(&rs, &o, None, Some(&stored), BTreeSet::new(), 8000);
        assert!(v.route_shape_current);
        let mut other = stored.clone();
        other.spec.rules.as_mut().unwrap()[0]
            .backend_refs
            .as_mut()
            .unwrap()[0]
            .port = Some(9000);
        assert!(!view(&rs, &o, None, Some(&other), BTreeSet::new(), 8000).route_shape_current);
    }

    #[test]
    fn objects_have_kuberay_names_and_shapes() {
        let gw = gateway(&rs(), "istio");
        assert_eq!(gw.metadata.name.as_deref(), Some("svc-gateway"));
        assert_eq!(gw.spec.gateway_class_name, "istio");
        assert!(gateway_current(&gw, "istio"));
        assert!(!gateway_current(&gw, "envoy"));
        let route = httproute(&rs(), &[("svc-a".into(), 70), ("svc-b".into(), 30)], 8000);
        assert_eq!(route.metadata.name.as_deref(), Some("svc-httproute"));
        let rule = &route.spec.rules.as_ref().unwrap()[0];
        let refs = rule.backend_refs.as_ref().unwrap();
        assert_eq!(refs[0].name, "svc-a-serve-svc");
        assert_eq!((refs[0].weight, refs[1].weight), (Some(70), Some(30)));
        assert_eq!(
            rule.matches.as_ref().unwrap()[0]
                .path
                .as_ref()
                .unwrap()
                .value
                .as_deref(),
            Some("/")
        );
        let parent = &route.spec.parent_refs.as_ref().unwrap()[0];
        assert_eq!(
            (parent.name.as_str(), parent.namespace.as_deref()),
            ("svc-gateway", Some("ml"))
        );
    }

    #[test]
    fn the_view_matches_backends_by_exact_name() {
        let o = options(&rs());
        let route = httproute(&rs(), &[("svc-a".into(), 90), ("svc-ab".into(), 10)], 8000);
        let v = view(&rs(), &o, None, Some(&route), BTreeSet::new(), 8000);
        assert_eq!(v.weight("svc-a"), 90);
        assert_eq!(v.weight("svc-ab"), 10);
        assert_eq!(v.weight("svc"), 0);
        assert!(v.route_shape_current);
        assert!(!v.route_ready, "no status from a gateway controller yet");
        // A route edited by hand (another port) is rewritten.
        let v = view(&rs(), &o, None, Some(&route), BTreeSet::new(), 9000);
        assert!(!v.route_shape_current);
    }
}
