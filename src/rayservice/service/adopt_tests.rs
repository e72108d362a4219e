//! An incremental upgrade on a shared Gateway or an adopted HTTPRoute (`adopt`): the annotations'
//! forms, the view of objects the RayService does not own, the write that touches only
//! `spec.rules[0].backendRefs`, and a plan that waits, saying why, instead of writing a route.
//!
//! Sources: KubeRay PR #5018 (`clusterUpgradeOptions.gatewayRef`) and issue #4956 (`httpRouteName`:
//! patch only `spec.rules[0].backendRefs`, never own or delete the route, the Gateway from its
//! `parentRefs`).

use std::collections::BTreeSet;

use serde_json::json;

use super::adopt::{Attachment, GatewayRef, RouteWrite, attachment, route_write, set_backend_refs, view};
use super::conditions as cond;
use super::plan;
use super::plan::{Action, EventType};
use super::snapshot::*;
use super::tests::{pending_mut, running_apps, upgrading};
use super::traffic;
use crate::api::gateway::{Gateway, HTTPRoute};
use crate::api::ray::constants::{ANNOTATION_GATEWAY_REF, ANNOTATION_HTTP_ROUTE_NAME};
use crate::api::ray::{RayService, RayServiceSpec};

fn rs(annotations: &[(&str, &str)]) -> RayService {
    let mut rs = RayService::new("svc", RayServiceSpec::default());
    rs.metadata.namespace = Some("ml".into());
    rs.metadata.uid = Some("uid-svc".into());
    rs.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    rs
}

fn options() -> IncrementalOptions {
    traffic::options(&rs(&[]))
}

/// A True condition as a gateway controller writes it.
fn true_cond(type_: &str, observed: Option<i64>) -> serde_json::Value {
    json!({"type": type_, "status": "True", "reason": type_, "message": "",
           "lastTransitionTime": "2026-11-28T00:00:00Z", "observedGeneration": observed})
}

/// A Gateway as a gateway controller leaves it: Accepted and Programmed.
fn ready_gateway(ns: &str, name: &str) -> Gateway {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"gatewayClassName": "shared", "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]},
        "status": {"conditions": [true_cond("Accepted", None), true_cond("Programmed", None)]}
    }))
    .unwrap()
}

/// The user's route `shop` in `ml`: a hostname, a filter and a second rule quotagate must keep,
/// parented to `infra/shared` (listener `http`), accepted by it.
fn user_route(backends: serde_json::Value) -> HTTPRoute {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "shop", "namespace": "ml", "generation": 3, "labels": {"team": "shop"}},
        "spec": {
            "parentRefs": [{"name": "shared", "namespace": "infra", "sectionName": "http"}],
            "hostnames": ["shop.example.com"],
            "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                 "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"add": [{"name": "x-team", "value": "shop"}]}}],
                 "timeouts": {"request": "10s"},
                 "backendRefs": backends},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/static"}}],
                 "backendRefs": [{"name": "static", "port": 80}]}
            ]
        },
        "status": {"parents": [{"parentRef": {"name": "shared", "namespace": "infra", "sectionName": "http"},
            "controllerName": "example.com/gw",
            "conditions": [true_cond("Accepted", Some(3)), true_cond("ResolvedRefs", Some(3))]}]}
    }))
    .unwrap()
}

fn services(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn annotation_forms() {
    let shared = |ns: &str, name: &str, section: Option<&str>| GatewayRef {
        namespace: ns.into(),
        name: name.into(),
        section: section.map(str::to_string),
        port: None,
    };
    // KubeRay PR #5018's `gatewayRef.port`: a `:<port>` suffix, with or without a sectionName.
    assert_eq!(
        attachment(&rs(&[(ANNOTATION_GATEWAY_REF, "infra/shared/https:8443")])),
        Attachment::SharedGateway(GatewayRef {
            port: Some(8443),
            ..shared("infra", "shared", Some("https"))
        })
    );
    let on_port = GatewayRef {
        port: Some(80),
        ..shared("infra", "shared", None)
    };
    assert_eq!(
        attachment(&rs(&[(ANNOTATION_GATEWAY_REF, "infra/shared:80")])),
        Attachment::SharedGateway(on_port.clone())
    );
    assert_eq!(on_port.parent_ref().port, Some(80));
    for bad in [
        "infra/shared:0",
        "infra/shared:65536",
        "infra/shared:http",
        "infra/shared:",
    ] {
        let Attachment::Invalid(why) = attachment(&rs(&[(ANNOTATION_GATEWAY_REF, bad)])) else {
            panic!("{bad} is refused");
        };
        assert!(
            why.contains("the port must be a number from 1 to 65535"),
            "{bad}: {why}"
        );
    }
    assert_eq!(attachment(&rs(&[])), Attachment::Owned);
    assert_eq!(
        attachment(&rs(&[(ANNOTATION_GATEWAY_REF, " ")])),
        Attachment::Owned
    );
    assert_eq!(
        attachment(&rs(&[(ANNOTATION_GATEWAY_REF, "infra/shared")])),
        Attachment::SharedGateway(shared("infra", "shared", None))
    );
    assert_eq!(
        attachment(&rs(&[(ANNOTATION_GATEWAY_REF, "infra/shared/https")])),
        Attachment::SharedGateway(shared("infra", "shared", Some("https")))
    );
    assert_eq!(
        attachment(&rs(&[(ANNOTATION_HTTP_ROUTE_NAME, "shop")])),
        Attachment::AdoptedRoute {
            route: "shop".into(),
            gateway: None
        }
    );
    assert_eq!(
        attachment(&rs(&[
            (ANNOTATION_HTTP_ROUTE_NAME, "shop"),
            (ANNOTATION_GATEWAY_REF, "infra/shared")
        ])),
        Attachment::AdoptedRoute {
            route: "shop".into(),
            gateway: Some(shared("infra", "shared", None))
        }
    );
    // Each bad value names its annotation and what is wrong.
    for (key, value, says) in [
        (
            ANNOTATION_GATEWAY_REF,
            "shared",
            "<namespace>/<name>[/<sectionName>][:<port>]",
        ),
        (
            ANNOTATION_GATEWAY_REF,
            "a/b/c/d",
            "<namespace>/<name>[/<sectionName>][:<port>]",
        ),
        (ANNOTATION_GATEWAY_REF, "/shared", "RFC 1123 label"),
        (ANNOTATION_GATEWAY_REF, "Infra/shared", "RFC 1123 label"),
        (ANNOTATION_GATEWAY_REF, "infra/Shared", "RFC 1123 subdomain"),
        (ANNOTATION_HTTP_ROUTE_NAME, "Shop_Route", "RFC 1123 subdomain"),
        (ANNOTATION_HTTP_ROUTE_NAME, "ml/shop", "RFC 1123 subdomain"),
    ] {
        let Attachment::Invalid(why) = attachment(&rs(&[(key, value)])) else {
            panic!("{key}: {value:?} accepted");
        };
        assert!(
            why.starts_with(&format!("metadata.annotations[{key}]: Invalid value: ")) && why.contains(says),
            "{key}={value:?}: {why}"
        );
    }
}

/// A shared Gateway: never written, `<rs>-httproute` parented to it, readiness read against it.
#[test]
fn a_shared_gateway_is_read_never_written() {
    let rs = rs(&[(ANNOTATION_GATEWAY_REF, "infra/shared/http")]);
    let a = attachment(&rs);
    assert_eq!(
        a.gateway_key(&rs, None),
        Some(("infra".to_string(), "shared".to_string()))
    );
    assert_eq!(a.route_name(&rs).as_deref(), Some("svc-httproute"));

    let missing = view(&rs, &a, &options(), None, None, services(&[]), 8000);
    assert!(
        missing.gateway_current,
        "a Gateway we do not own is never applied"
    );
    let problem = missing.problem.expect("a missing shared Gateway is a problem");
    assert!(
        problem.starts_with("quotagate.io/gateway-ref: Gateway infra/shared not found"),
        "{problem}"
    );

    let RouteWrite::Whole(route) = route_write(&rs, &[("svc-a".into(), 100)], 8000) else {
        panic!("the RayService's own route is written whole");
    };
    let parent = &route.spec.parent_refs.as_ref().unwrap()[0];
    assert_eq!(
        (
            parent.name.as_str(),
            parent.namespace.as_deref(),
            parent.section_name.as_deref()
        ),
        ("shared", Some("infra"), Some("http"))
    );
    assert!(
        route.metadata.owner_references.is_some(),
        "its own route stays owned"
    );
    let mut accepted = (*route).clone();
    accepted.status = user_route(json!([])).status;
    let gw = ready_gateway("infra", "shared");
    let v = view(
        &rs,
        &a,
        &options(),
        Some(&gw),
        Some(&accepted),
        services(&["svc-a"]),
        8000,
    );
    assert_eq!(v.problem, None);
    assert_eq!(v.gateway, "infra/shared");
    assert!(v.gateway_ready && v.route_ready && v.route_shape_current);
    assert_eq!(v.backends, vec![("svc-a".to_string(), 100)]);
    // A route still parented to `<rs>-gateway` (the annotation was added later) is rewritten.
    let owned = traffic::httproute(&rs, &[("svc-a".into(), 100)], 8000);
    let v = view(
        &rs,
        &a,
        &options(),
        Some(&gw),
        Some(&owned),
        services(&["svc-a"]),
        8000,
    );
    assert!(!v.route_shape_current && !v.route_ready);
}

/// An adopted route: its Gateway is its parentRef (in another namespace), readiness is that
/// parent's status, and only its first rule's backendRefs count for the shape.
#[test]
fn an_adopted_route_is_read_through_its_parent() {
    let rs = rs(&[(ANNOTATION_HTTP_ROUTE_NAME, "shop")]);
    let a = attachment(&rs);
    assert_eq!(a.route_name(&rs).as_deref(), Some("shop"));
    let ours = json!([{"name": "svc-a-serve-svc", "namespace": "ml", "port": 8000, "weight": 100}]);
    let route = user_route(ours);
    assert_eq!(
        a.gateway_key(&rs, Some(&route)),
        Some(("infra".to_string(), "shared".to_string()))
    );
    assert_eq!(a.gateway_key(&rs, None), None);
    let gw = ready_gateway("infra", "shared");
    let v = view(
        &rs,
        &a,
        &options(),
        Some(&gw),
        Some(&route),
        services(&["svc-a"]),
        8000,
    );
    assert_eq!(v.problem, None);
    assert!(v.gateway_current && v.gateway_ready && v.route_exists && v.route_ready && v.route_current);
    assert!(
        v.route_shape_current,
        "hostnames, filters and the second rule are the user's"
    );
    assert_eq!(v.backends, vec![("svc-a".to_string(), 100)]);
    // Another port on our backend is rewritten.
    let v = view(
        &rs,
        &a,
        &options(),
        Some(&gw),
        Some(&route),
        services(&["svc-a"]),
        9000,
    );
    assert!(!v.route_shape_current);
    // As the user left it (a backend of theirs): its weights are not ours, the first write replaces them.
    let theirs = user_route(json!([{"name": "legacy", "port": 80}]));
    let v = view(
        &rs,
        &a,
        &options(),
        Some(&gw),
        Some(&theirs),
        services(&["svc-a"]),
        8000,
    );
    assert_eq!(v.problem, None);
    assert!(v.backends.is_empty());
}

#[test]
fn an_adopted_route_that_cannot_be_used_is_a_problem_naming_the_annotation() {
    let gw = ready_gateway("infra", "shared");
    let ours = json!([{"name": "svc-a-serve-svc", "port": 8000}]);
    let problem = |annotations: &[(&str, &str)], route: Option<HTTPRoute>, gateway: Option<&Gateway>| {
        let rs = rs(annotations);
        let v = view(
            &rs,
            &attachment(&rs),
            &options(),
            gateway,
            route.as_ref(),
            services(&["svc-a"]),
            8000,
        );
        assert!(v.gateway_current, "nothing is applied in place of a Gateway");
        v.problem.expect("a problem")
    };
    let adopt = [(ANNOTATION_HTTP_ROUTE_NAME, "shop")];
    let p = problem(&adopt, None, Some(&gw));
    assert!(
        p.starts_with("quotagate.io/http-route-name: HTTPRoute ml/shop not found"),
        "{p}"
    );
    let p = problem(&adopt, Some(user_route(ours.clone())), None);
    assert!(
        p.starts_with(
            "quotagate.io/http-route-name: Gateway infra/shared, the parent of HTTPRoute ml/shop, not found"
        ),
        "{p}"
    );
    let mut no_rules = user_route(ours.clone());
    no_rules.spec.rules = Some(vec![]);
    let p = problem(&adopt, Some(no_rules), Some(&gw));
    assert!(p.contains("HTTPRoute ml/shop has no rules"), "{p}");
    let mut no_parent = user_route(ours.clone());
    no_parent.spec.parent_refs = None;
    let p = problem(&adopt, Some(no_parent), Some(&gw));
    assert!(
        p.contains("HTTPRoute ml/shop has no parentRef to a Gateway"),
        "{p}"
    );
    let both = [
        (ANNOTATION_HTTP_ROUTE_NAME, "shop"),
        (ANNOTATION_GATEWAY_REF, "infra/other"),
    ];
    let p = problem(&both, Some(user_route(ours)), Some(&gw));
    assert!(
        p.starts_with(
            "quotagate.io/gateway-ref: Gateway infra/other is not a parentRef of HTTPRoute ml/shop"
        ),
        "{p}"
    );
    let p = problem(&[(ANNOTATION_GATEWAY_REF, "shared")], None, None);
    assert!(
        p.contains("metadata.annotations[quotagate.io/gateway-ref]"),
        "{p}"
    );
}

/// Issue #4956: only `spec.rules[0].backendRefs` changes; every other field is as the user wrote it.
#[test]
fn the_adopted_route_write_touches_only_the_first_rules_backends() {
    let rs = rs(&[(ANNOTATION_HTTP_ROUTE_NAME, "shop")]);
    let RouteWrite::BackendRefs { route, refs } =
        route_write(&rs, &[("svc-a".into(), 30), ("svc-b".into(), 70)], 8000)
    else {
        panic!("an adopted route gets its backendRefs only");
    };
    assert_eq!(route, "shop");
    let before = user_route(json!([{"name": "legacy", "port": 80}]));
    let mut after = before.clone();
    assert!(set_backend_refs(&mut after, refs));
    let (b, mut a) = (
        serde_json::to_value(&before).unwrap(),
        serde_json::to_value(&after).unwrap(),
    );
    assert_eq!(
        a["spec"]["rules"][0]["backendRefs"],
        json!([{"name": "svc-a-serve-svc", "namespace": "ml", "port": 8000, "weight": 30},
               {"name": "svc-b-serve-svc", "namespace": "ml", "port": 8000, "weight": 70}])
    );
    a["spec"]["rules"][0]["backendRefs"] = b["spec"]["rules"][0]["backendRefs"].clone();
    assert_eq!(a, b, "nothing else changed");
    assert!(after.metadata.owner_references.is_none(), "never owned");

    let mut no_rules = before;
    no_rules.spec.rules = None;
    assert!(
        !set_backend_refs(&mut no_rules, vec![]),
        "a route with no rule is left alone"
    );
    let invalid = self::rs(&[(ANNOTATION_HTTP_ROUTE_NAME, "Bad_Name")]);
    assert_eq!(
        route_write(&invalid, &[("svc-a".into(), 100)], 8000),
        RouteWrite::Nothing
    );
}

/// A plan over a view with a problem: no route or Gateway is written, no traffic moves, the upgrade
/// condition says why, and the Warning event is recorded once.
#[test]
fn an_upgrade_with_an_unusable_route_waits_and_says_why_once() {
    let mut s = upgrading();
    s.desired.serve_config_hash = Some("cfg2".into());
    let b = pending_mut(&mut s, "rs-b");
    b.head_ready = true;
    b.served_config_hash = Some("cfg2".into());
    b.serve = running_apps("RUNNING", "");
    b.reported_capacity = Some(100);
    s.strategy = UpgradeStrategy::NewClusterWithIncrementalUpgrade;
    let why = "quotagate.io/http-route-name: HTTPRoute default/shop not found; the upgrade waits and no HTTPRoute is created";
    let traffic = TrafficView {
        gateway: String::new(),
        gateway_current: true,
        serve_services: ["rs-a".to_string(), "rs-b".to_string()].into(),
        problem: Some(why.into()),
        ..Default::default()
    };
    let mut opts = options();
    opts.interval = jiff::SignedDuration::ZERO;
    s.incremental = Some((opts, traffic));
    let p = plan(&s);
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a, Action::SetRoute { .. } | Action::ApplyGateway)),
        "{:?}",
        p.actions
    );
    let warned: Vec<_> = p
        .events
        .iter()
        .filter(|e| e.reason == "InvalidGatewayAttachment")
        .collect();
    assert_eq!(warned.len(), 1, "{:?}", p.events);
    assert_eq!(
        (warned[0].type_, warned[0].message.as_str()),
        (EventType::Warning, why)
    );
    assert!(
        p.events.iter().all(|e| e.reason != "UpdatedHTTPRoute"),
        "no traffic moves: {:?}",
        p.events
    );
    let written = p
        .status
        .as_ref()
        .unwrap()
        .condition(cond::UPGRADE_IN_PROGRESS)
        .unwrap()
        .message
        .clone();
    assert!(written.contains(why), "{written}");
    let mut prior = super::tests::cond_true(
        cond::UPGRADE_IN_PROGRESS,
        cond::BOTH_ACTIVE_PENDING_CLUSTERS_EXIST,
    );
    prior.message = written;
    s.status.conditions.push(prior);
    assert!(
        plan(&s)
            .events
            .iter()
            .all(|e| e.reason != "InvalidGatewayAttachment"),
        "announced twice"
    );
}
