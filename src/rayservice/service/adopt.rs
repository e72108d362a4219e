//! An incremental upgrade on Gateway API objects the RayService does not own, ahead of KubeRay
//! (PR #5018's `clusterUpgradeOptions.gatewayRef`, issue #4956's `httpRouteName`), under quotagate
//! annotations until KubeRay settles the fields:
//!
//! - `quotagate.io/gateway-ref: <namespace>/<name>[/<sectionName>][:<port>]`: a shared Gateway
//!   (PR #5018's `gatewayRef` `name`, `namespace`, `sectionName` and `port`). No `<rs>-gateway` is
//!   created; `<rs>-httproute` (still created and owned) has it as its parent, on that listener
//!   and port when given.
//! - `quotagate.io/http-route-name: <name>`: an existing HTTPRoute in the RayService's namespace.
//!   Only its `spec.rules[0].backendRefs` is written; it is never created, owned or deleted. Its
//!   Gateway is its parentRef: the one `gateway-ref` names when both are set, else the first.
//!
//! A value that names nothing usable becomes the view's `problem`: nothing is written in its place
//! and the upgrade waits. Pure: the shell reads what [`Attachment::route_name`] and
//! [`Attachment::gateway_key`] name, and writes a route as [`route_write`] says.

use std::collections::BTreeSet;

use kube::ResourceExt;

use super::snapshot::{IncrementalOptions, TrafficView};
use super::traffic;
use crate::api::gateway::{
    Gateway, HTTPBackendRef, HTTPRoute, HTTPRouteRule, HTTPRouteSpec, ParentReference,
};
use crate::api::names::{dns_label, dns_subdomain};
use crate::api::ray::RayService;
use crate::api::ray::constants::{ANNOTATION_GATEWAY_REF, ANNOTATION_HTTP_ROUTE_NAME};
use crate::api::validation::Path;
use crate::rayservice::cluster::names;

const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// A Gateway named by `quotagate.io/gateway-ref`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayRef {
    pub namespace: String,
    pub name: String,
    pub section: Option<String>,
    /// The listener port the parentRef names (Gateway API `parentRefs[].port`).
    pub port: Option<i32>,
}

impl GatewayRef {
    /// The parentRef a route attached to this Gateway carries.
    pub fn parent_ref(&self) -> ParentReference {
        ParentReference {
            name: self.name.clone(),
            namespace: Some(self.namespace.clone()),
            section_name: self.section.clone(),
            port: self.port,
            ..Default::default()
        }
    }
}

/// Where an incremental upgrade's traffic goes, from the RayService's annotations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attachment {
    /// `<rs>-gateway` and `<rs>-httproute`, created and owned (KubeRay v1.7.1).
    Owned,
    /// A shared Gateway; `<rs>-httproute` is created and owned, parented to it.
    SharedGateway(GatewayRef),
    /// An existing HTTPRoute; `gateway` picks its parent when `gateway-ref` is set too.
    AdoptedRoute {
        route: String,
        gateway: Option<GatewayRef>,
    },
    /// An annotation's value is malformed: nothing is read or written.
    Invalid(String),
}

fn annotation_path(key: &str) -> Path {
    Path::root(&format!("metadata.annotations[{key}]"))
}

fn parse_gateway_ref(v: &str) -> Result<GatewayRef, String> {
    let path = annotation_path(ANNOTATION_GATEWAY_REF);
    let form = "must be <namespace>/<name>[/<sectionName>][:<port>] of a Gateway";
    // No name or sectionName has a ':', so the port is whatever follows the last one.
    let (v, port) = match v.rsplit_once(':') {
        None => (v, None),
        Some((rest, p)) => match p.parse::<i32>() {
            Ok(n) if (1..=65535).contains(&n) => (rest, Some(n)),
            _ => {
                return Err(format!(
                    "{path}: Invalid value: {p:?}: the port must be a number from 1 to 65535 ({form})"
                ));
            }
        },
    };
    let parts: Vec<&str> = v.split('/').collect();
    let (namespace, name, section) = match parts.as_slice() {
        [ns, name] => (*ns, *name, None),
        [ns, name, section] => (*ns, *name, Some(*section)),
        _ => {
            return Err(format!("{path}: Invalid value: {v:?}: {form}"));
        }
    };
    let mut errs = Vec::new();
    dns_label(&path, namespace, &mut errs);
    dns_subdomain(&path, name, &mut errs);
    if let Some(s) = section {
        dns_subdomain(&path, s, &mut errs);
    }
    match errs.first() {
        Some(e) => Err(e.to_string()),
        None => Ok(GatewayRef {
            namespace: namespace.into(),
            name: name.into(),
            section: section.map(str::to_string),
            port,
        }),
    }
}

/// The attachment the RayService's annotations ask for (unset or empty annotations: [`Attachment::Owned`]).
pub fn attachment(rs: &RayService) -> Attachment {
    let get = |key: &str| {
        rs.annotations()
            .get(key)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let gateway = match get(ANNOTATION_GATEWAY_REF)
        .map(|v| parse_gateway_ref(&v))
        .transpose()
    {
        Ok(g) => g,
        Err(why) => return Attachment::Invalid(why),
    };
    match (get(ANNOTATION_HTTP_ROUTE_NAME), gateway) {
        (Some(route), gateway) => {
            let mut errs = Vec::new();
            dns_subdomain(&annotation_path(ANNOTATION_HTTP_ROUTE_NAME), &route, &mut errs);
            match errs.first() {
                Some(e) => Attachment::Invalid(e.to_string()),
                None => Attachment::AdoptedRoute { route, gateway },
            }
        }
        (None, Some(g)) => Attachment::SharedGateway(g),
        (None, None) => Attachment::Owned,
    }
}

impl Attachment {
    /// The HTTPRoute to read, in the RayService's namespace.
    pub fn route_name(&self, rs: &RayService) -> Option<String> {
        match self {
            Attachment::Owned | Attachment::SharedGateway(_) => Some(names::httproute_name(&rs.name_any())),
            Attachment::AdoptedRoute { route, .. } => Some(route.clone()),
            Attachment::Invalid(_) => None,
        }
    }

    /// The Gateway to read, as `(namespace, name)`: `<rs>-gateway`, the shared one, or the adopted
    /// route's parent (`None` while that route is missing or has no Gateway parent).
    pub fn gateway_key(&self, rs: &RayService, route: Option<&HTTPRoute>) -> Option<(String, String)> {
        let ns = rs.namespace().unwrap_or_default();
        match self {
            Attachment::Owned => Some((ns, names::gateway_name(&rs.name_any()))),
            Attachment::SharedGateway(g) => Some((g.namespace.clone(), g.name.clone())),
            Attachment::AdoptedRoute { gateway, .. } => {
                let parent = adopted_parent(route?, gateway.as_ref()).ok()?;
                Some((parent.namespace.unwrap_or(ns), parent.name))
            }
            Attachment::Invalid(_) => None,
        }
    }
}

/// The adopted route's Gateway parent: the one `wanted` names, else the first Gateway parentRef.
fn adopted_parent(route: &HTTPRoute, wanted: Option<&GatewayRef>) -> Result<ParentReference, String> {
    let route_ns = route.namespace().unwrap_or_default();
    let id = format!("HTTPRoute {route_ns}/{}", route.name_any());
    let mut gateways = route.spec.parent_refs.iter().flatten().filter(|p| {
        p.group.as_deref().unwrap_or(GATEWAY_GROUP) == GATEWAY_GROUP
            && p.kind.as_deref().unwrap_or("Gateway") == "Gateway"
    });
    match wanted {
        None => gateways
            .next()
            .cloned()
            .ok_or_else(|| format!("{ANNOTATION_HTTP_ROUTE_NAME}: {id} has no parentRef to a Gateway")),
        Some(g) => gateways
            .find(|p| {
                p.name == g.name
                    && p.namespace.as_deref().unwrap_or(&route_ns) == g.namespace
                    && (g.section.is_none() || p.section_name == g.section)
                    && (g.port.is_none() || p.port == g.port)
            })
            .cloned()
            .ok_or_else(|| {
                format!(
                    "{ANNOTATION_GATEWAY_REF}: Gateway {}/{} is not a parentRef of {id} (named by {ANNOTATION_HTTP_ROUTE_NAME})",
                    g.namespace, g.name
                )
            }),
    }
}

/// What the Gateway API objects say, for the decisions: [`traffic::view`] for owned objects, else
/// the same read against the shared Gateway or the adopted route, with a `problem` when they are
/// missing or unusable.
pub fn view(
    rs: &RayService,
    attachment: &Attachment,
    options: &IncrementalOptions,
    gateway: Option<&Gateway>,
    route: Option<&HTTPRoute>,
    serve_services: BTreeSet<String>,
    serve_port: i32,
) -> TrafficView {
    let mut v = traffic::view(rs, options, gateway, route, serve_services, serve_port);
    if *attachment == Attachment::Owned {
        return v;
    }
    if !v.backends.iter().any(|(c, _)| v.serve_services.contains(c)) {
        // A route adopted as the user left it routes to none of our clusters: its weights say
        // nothing about the upgrade (the stored status does), and the first write replaces them.
        v.backends.clear();
    }
    // A Gateway the RayService does not own is never written.
    v.gateway_current = true;
    let ns = rs.namespace().unwrap_or_default();
    let (gw_ns, gw_name, problem) = match attachment {
        Attachment::Owned => return v,
        Attachment::Invalid(why) => {
            v.problem = Some(format!("{why}; the upgrade waits and no HTTPRoute is written"));
            return v;
        }
        Attachment::SharedGateway(g) => {
            v.route_shape_current = route.is_some_and(|r| {
                let wanted = traffic::httproute_to(rs, g.parent_ref(), &v.backends, serve_port);
                traffic::with_defaults(&r.spec) == traffic::with_defaults(&wanted.spec)
            });
            let problem = gateway.is_none().then(|| {
                format!(
                    "{ANNOTATION_GATEWAY_REF}: Gateway {}/{} not found",
                    g.namespace, g.name
                )
            });
            (g.namespace.clone(), g.name.clone(), problem)
        }
        Attachment::AdoptedRoute {
            route: name,
            gateway: wanted,
        } => {
            let Some(r) = route else {
                v.problem = Some(format!(
                    "{ANNOTATION_HTTP_ROUTE_NAME}: HTTPRoute {ns}/{name} not found; the upgrade waits and no HTTPRoute is created"
                ));
                return v;
            };
            v.route_shape_current = backend_refs_current(rs, r, &v.backends, serve_port);
            let (gw_ns, gw_name, mut problem) = match adopted_parent(r, wanted.as_ref()) {
                Ok(p) => (p.namespace.unwrap_or_else(|| ns.clone()), p.name, None),
                Err(why) => (String::new(), String::new(), Some(why)),
            };
            if r.spec.rules.as_ref().is_none_or(Vec::is_empty) {
                problem = Some(format!(
                    "{ANNOTATION_HTTP_ROUTE_NAME}: HTTPRoute {ns}/{name} has no rules: the weights go to spec.rules[0].backendRefs"
                ));
            }
            if problem.is_none() && gateway.is_none() {
                problem = Some(format!(
                    "{ANNOTATION_HTTP_ROUTE_NAME}: Gateway {gw_ns}/{gw_name}, the parent of HTTPRoute {ns}/{name}, not found"
                ));
            }
            (gw_ns, gw_name, problem)
        }
    };
    v.problem = problem.map(|p| format!("{p}; the upgrade waits"));
    v.gateway = format!("{gw_ns}/{gw_name}");
    v.gateway_ready = gateway.is_some_and(Gateway::is_ready);
    v.route_ready = route.is_some_and(|r| r.is_ready_for(&gw_name, &gw_ns));
    v.route_current = route.is_some_and(|r| r.is_current_for(&gw_name, &gw_ns));
    v
}

/// The adopted route's first rule already holds exactly the backends we would write.
fn backend_refs_current(rs: &RayService, route: &HTTPRoute, backends: &[(String, i32)], port: i32) -> bool {
    let first_refs = |spec: &HTTPRouteSpec| {
        traffic::with_defaults(spec)
            .1
            .into_iter()
            .next()
            .and_then(|r| r.backend_refs)
    };
    let wanted = HTTPRouteSpec {
        rules: Some(vec![HTTPRouteRule {
            backend_refs: Some(traffic::backend_refs(rs, backends, port)),
            ..Default::default()
        }]),
        ..Default::default()
    };
    first_refs(&route.spec).is_some() && first_refs(&route.spec) == first_refs(&wanted)
}

/// How the shell writes the route of a `SetRoute` action.
#[derive(Clone, Debug, PartialEq)]
pub enum RouteWrite {
    /// Create or replace `<rs>-httproute` with this (its parents and rules).
    Whole(Box<HTTPRoute>),
    /// Replace only `spec.rules[0].backendRefs` of this existing route ([`set_backend_refs`]).
    BackendRefs {
        route: String,
        refs: Vec<HTTPBackendRef>,
    },
    /// Nothing may be written (the plan never asks for it then).
    Nothing,
}

/// The write for `backends` under the RayService's attachment.
pub fn route_write(rs: &RayService, backends: &[(String, i32)], serve_port: i32) -> RouteWrite {
    match attachment(rs) {
        Attachment::Owned => RouteWrite::Whole(Box::new(traffic::httproute(rs, backends, serve_port))),
        Attachment::SharedGateway(g) => RouteWrite::Whole(Box::new(traffic::httproute_to(
            rs,
            g.parent_ref(),
            backends,
            serve_port,
        ))),
        Attachment::AdoptedRoute { route, .. } => RouteWrite::BackendRefs {
            route,
            refs: traffic::backend_refs(rs, backends, serve_port),
        },
        Attachment::Invalid(_) => RouteWrite::Nothing,
    }
}

/// Puts `refs` in place of `spec.rules[0].backendRefs`, leaving every other field as read; false
/// (nothing changed) when the route has no rule.
pub fn set_backend_refs(route: &mut HTTPRoute, refs: Vec<HTTPBackendRef>) -> bool {
    match route.spec.rules.as_mut().and_then(|r| r.first_mut()) {
        Some(rule) => {
            rule.backend_refs = Some(refs);
            true
        }
        None => false,
    }
}
