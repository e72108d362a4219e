//! A gateway controller: Gateways get Accepted/Programmed and an address; HTTPRoutes get, per parent,
//! Accepted and ResolvedRefs (False with BackendNotFound while a backend Service is missing).
//!
//! With the process runtime, a real data plane carries the traffic (`proxy/l7.rs`): a Gateway's address
//! is the one it listens on, a Gateway is Programmed once its HTTP listeners are bound, and an
//! HTTPRoute's generation is accepted only once the routing table was built from it. Without it, the
//! address is a fixed one that leads nowhere and both are reported at once.

use super::proxy::{GatewayState, ServiceProxy};
use super::{RETRY, SimError, condition};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

pub const CONTROLLER_NAME: &str = "quotagate.io/sim-gateway";

#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// From first sight of a Gateway to Programmed.
    pub program_delay: Duration,
    pub address: String,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            program_delay: Duration::ZERO,
            address: "10.96.0.100".into(),
        }
    }
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", kind),
        plural,
    )
}

pub fn gateway_resource() -> ApiResource {
    resource("Gateway", "gateways")
}

pub fn httproute_resource() -> ApiResource {
    resource("HTTPRoute", "httproutes")
}

/// The Gateway status to write: as the data plane serves it (`plane`), else the simulated one.
pub fn gateway_status(gw: &Value, cfg: &GatewayConfig, plane: Option<&GatewayState>) -> Value {
    let generation = gw.pointer("/metadata/generation").and_then(Value::as_i64);
    let mut all_bound = true;
    let listeners: Vec<Value> = gw
        .pointer("/spec/listeners")
        .and_then(Value::as_array)
        .map(|ls| {
            ls.iter()
                .map(|l| {
                    let name = l.get("name").and_then(Value::as_str).unwrap_or("");
                    let (accepted, programmed, attached) = match plane {
                        None => (
                            condition("Accepted", true, "Accepted", "", generation),
                            condition("Programmed", true, "Programmed", "", generation),
                            0,
                        ),
                        Some(p) => {
                            let (bound, attached) = p.listeners.get(name).copied().unwrap_or((false, 0));
                            let http = l.get("protocol").and_then(Value::as_str) == Some("HTTP");
                            all_bound &= bound || !http;
                            let accepted = if http {
                                condition("Accepted", true, "Accepted", "", generation)
                            } else {
                                condition(
                                    "Accepted",
                                    false,
                                    "UnsupportedProtocol",
                                    "this gateway serves HTTP listeners only",
                                    generation,
                                )
                            };
                            let programmed = if bound {
                                condition(
                                    "Programmed",
                                    true,
                                    "Programmed",
                                    &format!("proxying on {}", p.address),
                                    generation,
                                )
                            } else {
                                condition(
                                    "Programmed",
                                    false,
                                    "Pending",
                                    "the listener's port is not bound",
                                    generation,
                                )
                            };
                            (accepted, programmed, attached)
                        }
                    };
                    json!({"name": name, "attachedRoutes": attached,
                           "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
                           "conditions": [accepted, programmed]})
                })
                .collect()
        })
        .unwrap_or_default();
    let (address, programmed) = match plane {
        None => (
            cfg.address.clone(),
            condition(
                "Programmed",
                true,
                "Programmed",
                "Programmed by the simulated gateway controller",
                generation,
            ),
        ),
        Some(p) if all_bound => (
            p.address.to_string(),
            condition(
                "Programmed",
                true,
                "Programmed",
                "an HTTP proxy serves every HTTP listener",
                generation,
            ),
        ),
        Some(p) => (
            p.address.to_string(),
            condition(
                "Programmed",
                false,
                "Pending",
                "a listener's port is not bound yet",
                generation,
            ),
        ),
    };
    json!({
        "addresses": [{"type": "IPAddress", "value": address}],
        "conditions": [condition("Accepted", true, "Accepted", "Accepted by the embedded gateway controller", generation), programmed],
        "listeners": listeners,
    })
}

/// The HTTPRoute status: one entry per parentRef; `missing` lists backend Services that do not exist.
/// `refusals`, per parentRef in order (the data plane's `ServiceProxy::route_refusals`): why that
/// parent's Gateway does not take the route, written as `Accepted=False` with that reason, as a
/// Gateway API implementation writes it; `None` (or no data plane) is `Accepted=True`.
pub fn route_status(route: &Value, missing: &[String], refusals: &[Option<(&str, String)>]) -> Value {
    let generation = route.pointer("/metadata/generation").and_then(Value::as_i64);
    let resolved = if missing.is_empty() {
        condition("ResolvedRefs", true, "ResolvedRefs", "", generation)
    } else {
        condition(
            "ResolvedRefs",
            false,
            "BackendNotFound",
            &format!("backend Service(s) not found: {}", missing.join(", ")),
            generation,
        )
    };
    let parents: Vec<Value> = route
        .pointer("/spec/parentRefs")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .enumerate()
                .map(|(i, p)| {
                    let accepted = match refusals.get(i).and_then(Option::as_ref) {
                        Some((reason, message)) => condition("Accepted", false, reason, message, generation),
                        None => condition("Accepted", true, "Accepted", "", generation),
                    };
                    json!({"parentRef": p, "controllerName": CONTROLLER_NAME,
                           "conditions": [accepted, resolved.clone()]})
                })
                .collect()
        })
        .unwrap_or_default();
    json!({"parents": parents})
}

fn backend_services(route: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for rule in route
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for b in rule
            .get("backendRefs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let kind = b.get("kind").and_then(Value::as_str).unwrap_or("Service");
            if let (Some(name), "Service") = (b.get("name").and_then(Value::as_str), kind)
                && !out.iter().any(|n| n == name)
            {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// Writes `status` unless the stored one already has the same shape (ignoring timestamps).
fn same_ignoring_time(a: Option<&Value>, b: &Value) -> bool {
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(k, _)| *k != "lastTransitionTime")
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    a.is_some_and(|a| strip(a) == strip(b))
}

struct Ctx {
    client: kube::Client,
    cfg: GatewayConfig,
    /// The data plane, with the process runtime.
    plane: Option<Arc<ServiceProxy>>,
}

async fn reconcile_gateway(gw: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, SimError> {
    let v = serde_json::to_value(&*gw).unwrap_or(Value::Null);
    let ns = gw.metadata.namespace.clone().unwrap_or_default();
    let name = gw.metadata.name.clone().unwrap_or_default();
    let plane = match &ctx.plane {
        None => None,
        // The data plane has not seen this Gateway yet: look again shortly.
        Some(p) => match p.gateway(&ns, &name) {
            Some(state) => Some(state),
            None => return Ok(Action::requeue(RETRY)),
        },
    };
    let status = gateway_status(&v, &ctx.cfg, plane.as_ref());
    // Until every listener is bound, and while routes attach, the data plane's state keeps changing.
    let again = if ctx.plane.is_some() {
        Action::requeue(Duration::from_millis(500))
    } else {
        Action::await_change()
    };
    if same_ignoring_time(v.get("status"), &status) {
        return Ok(again);
    }
    if !ctx.cfg.program_delay.is_zero() && v.get("status").and_then(|s| s.get("conditions")).is_none() {
        // First sight: come back once the gateway would be programmed.
        let age = v
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map(|t| Duration::from_secs((jiff::Timestamp::now().as_second() - t.as_second()).max(0) as u64))
            .unwrap_or_default();
        if age < ctx.cfg.program_delay {
            return Ok(Action::requeue(ctx.cfg.program_delay - age));
        }
    }
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &gateway_resource());
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await?;
    Ok(again)
}

async fn reconcile_route(route: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, SimError> {
    let v = serde_json::to_value(&*route).unwrap_or(Value::Null);
    let ns = route.metadata.namespace.clone().unwrap_or_default();
    if let Some(p) = &ctx.plane {
        // Accepted means the data plane routes by this generation: wait until its table holds it.
        let generation = route.metadata.generation.unwrap_or(0);
        if p.route_generation(&ns, route.metadata.name.as_deref().unwrap_or_default()) != Some(generation) {
            return Ok(Action::requeue(Duration::from_millis(50)));
        }
    }
    let svcs: Api<Service> = Api::namespaced(ctx.client.clone(), &ns);
    let mut missing = Vec::new();
    for name in backend_services(&v) {
        if svcs.get_opt(&name).await?.is_none() {
            missing.push(name);
        }
    }
    let name = route.metadata.name.as_deref().unwrap_or_default();
    let refusals = ctx
        .plane
        .as_ref()
        .and_then(|p| p.route_refusals(&ns, name))
        .unwrap_or_default();
    let status = route_status(&v, &missing, &refusals);
    if !same_ignoring_time(v.get("status"), &status) {
        let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &httproute_resource());
        api.patch_status(
            &route.metadata.name.clone().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await?;
    }
    // Backends may appear later; look again while any is missing. A listener's `allowedRoutes` may
    // come to allow the route, or stop allowing it, without the route changing (a Namespace's
    // labels, the Gateway's listeners): with a data plane, look again while it is refused, and now
    // and then while it is taken.
    Ok(if !missing.is_empty() || refusals.iter().any(Option::is_some) {
        Action::requeue(Duration::from_secs(1))
    } else if ctx.plane.is_some() {
        Action::requeue(Duration::from_secs(5))
    } else {
        Action::await_change()
    })
}

fn error_policy(_: Arc<DynamicObject>, _: &SimError, _: Arc<Ctx>) -> Action {
    Action::requeue(RETRY)
}

/// Runs the controller; `plane` is the data plane when one carries the traffic (the process runtime).
pub async fn run(client: kube::Client, cfg: GatewayConfig, plane: Option<Arc<ServiceProxy>>) {
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        cfg,
        plane,
    });
    let gws = Controller::new_with(
        Api::<DynamicObject>::all_with(client.clone(), &gateway_resource()),
        watcher::Config::default(),
        gateway_resource(),
    )
    .run(reconcile_gateway, error_policy, ctx.clone())
    .for_each(|_| async {});
    let routes = Controller::new_with(
        Api::<DynamicObject>::all_with(client, &httproute_resource()),
        watcher::Config::default(),
        httproute_resource(),
    )
    .run(reconcile_route, error_policy, ctx)
    .for_each(|_| async {});
    futures::join!(gws, routes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_status_per_parent() {
        let route = json!({"metadata": {"generation": 3}, "spec": {"parentRefs": [{"name": "gw"}],
                           "rules": [{"backendRefs": [{"name": "a", "weight": 90}, {"name": "b", "weight": 10}]}]}});
        assert_eq!(backend_services(&route), ["a", "b"]);
        let s = route_status(&route, &["b".into()], &[]);
        let conds = &s["parents"][0]["conditions"];
        assert_eq!(s["parents"][0]["parentRef"]["name"], "gw");
        assert_eq!(
            (conds[0]["type"].as_str(), conds[0]["status"].as_str()),
            (Some("Accepted"), Some("True"))
        );
        assert_eq!(
            (conds[1]["status"].as_str(), conds[1]["reason"].as_str()),
            (Some("False"), Some("BackendNotFound"))
        );
        assert_eq!(conds[1]["observedGeneration"], 3);
        assert!(same_ignoring_time(
            Some(&s),
            &route_status(&route, &["b".into()], &[])
        ));
        // A parent whose listeners do not allow the route: Accepted=False with the data plane's
        // reason; the other parent still takes it.
        let two = json!({"metadata": {"generation": 1}, "spec": {"parentRefs": [{"name": "gw"}, {"name": "other"}]}});
        let refused = route_status(
            &two,
            &[],
            &[
                Some((
                    "NotAllowedByListeners",
                    "no listener allows routes from namespace ns".into(),
                )),
                None,
            ],
        );
        let first = &refused["parents"][0]["conditions"][0];
        assert_eq!(
            (first["status"].as_str(), first["reason"].as_str()),
            (Some("False"), Some("NotAllowedByListeners"))
        );
        assert_eq!(first["message"], "no listener allows routes from namespace ns");
        assert_eq!(refused["parents"][1]["conditions"][0]["status"], "True");
        let g = gateway_status(
            &json!({"metadata": {"generation": 1}, "spec": {"listeners": [{"name": "http"}]}}),
            &GatewayConfig::default(),
            None,
        );
        assert_eq!(g["conditions"][1]["type"], "Programmed");
        assert_eq!(g["listeners"][0]["name"], "http");
    }

    /// With a data plane: its address, Programmed only once every HTTP listener is bound, attached
    /// routes counted, a listener of another protocol not accepted.
    #[test]
    fn gateway_status_from_the_data_plane() {
        let gw = json!({"metadata": {"generation": 2}, "spec": {"listeners": [{"name": "http", "protocol": "HTTP", "port": 80}, {"name": "tls", "protocol": "HTTPS", "port": 443}]}});
        let mut state = GatewayState {
            address: "10.96.7.2".parse().unwrap(),
            listeners: [("http".to_string(), (false, 1)), ("tls".to_string(), (false, 0))].into(),
        };
        let s = gateway_status(&gw, &GatewayConfig::default(), Some(&state));
        assert_eq!(s["addresses"][0]["value"], "10.96.7.2");
        assert_eq!(
            (
                s["conditions"][1]["type"].as_str(),
                s["conditions"][1]["status"].as_str()
            ),
            (Some("Programmed"), Some("False"))
        );
        assert_eq!(s["listeners"][0]["attachedRoutes"], 1);
        assert_eq!(
            s["listeners"][1]["conditions"][0]["reason"],
            "UnsupportedProtocol"
        );
        state.listeners.insert("http".into(), (true, 1));
        let s = gateway_status(&gw, &GatewayConfig::default(), Some(&state));
        assert_eq!(s["conditions"][1]["status"], "True");
        assert_eq!(s["listeners"][0]["conditions"][1]["status"], "True");
    }
}
