//! An incremental upgrade on Gateway API objects the RayService does not own (issue 63, where
//! quotagate leads KubeRay), end to end on the embedded cluster with the simulated Ray:
//!
//! - `quotagate.io/http-route-name` adopts an existing HTTPRoute (KubeRay issue #4956's
//!   `httpRouteName`): only `spec.rules[0].backendRefs` is written, the route is never owned or
//!   deleted, and its Gateway is its parentRef, a shared one in another namespace.
//! - `quotagate.io/gateway-ref` attaches `<rs>-httproute` to a shared Gateway (KubeRay PR #5018's
//!   `gatewayRef`); no `<rs>-gateway` is created.
//!
//! Either way the final route holds one backend, the new cluster's serve Service at weight 100, as
//! KubeRay's `e2eincrementalupgrade` expects of its own route. A name that leads nowhere makes the
//! service say so and write nothing in its place.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use quotagate::api::gateway::{Gateway, HTTPRoute};
use quotagate::api::ray::RayService;
use serde_json::{Value, json};

use super::gated::{Scenario, active, pending, poll};

const NS: &str = "default";
const ROUTE_ANNOTATION: &str = "quotagate.io/http-route-name";
const GATEWAY_ANNOTATION: &str = "quotagate.io/gateway-ref";

/// The incremental service of `incremental.rs` (50% traffic steps, 100% surge) with `annotations`,
/// and no `gatewayClassName`: attached to an existing Gateway or route, it makes no Gateway of its
/// own, so validation does not ask for one.
fn service(annotations: Value) -> RayService {
    let mut rs = super::incremental::service("rs", "2.46.0", 50, 100);
    rs.metadata.annotations = serde_json::from_value(annotations).unwrap();
    if let Some(o) = rs
        .spec
        .upgrade_strategy
        .as_mut()
        .and_then(|u| u.cluster_upgrade_options.as_mut())
    {
        o.gateway_class_name = None;
    }
    rs
}

/// Namespace `infra` and its Gateway `shared` (listener `http`), as a platform team runs it.
async fn shared_gateway(s: &Scenario) {
    let nss: Api<Namespace> = Api::all(s.c.client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "infra"}})).unwrap(),
    )
    .await
    .unwrap();
    let gws: Api<Gateway> = Api::namespaced(s.c.client.clone(), "infra");
    gws.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "shared", "namespace": "infra"},
            "spec": {"gatewayClassName": "platform", "listeners": [
                {"name": "http", "protocol": "HTTP", "port": 80, "allowedRoutes": {"namespaces": {"from": "All"}}}]}
        }))
        .unwrap(),
    )
    .await
    .unwrap();
}

/// The user's own Services `legacy` and `static` the route names (a gateway resolves every rule's
/// backends before it accepts a route).
async fn user_services(s: &Scenario) {
    let svcs: Api<Service> = Api::namespaced(s.c.client.clone(), NS);
    for name in ["legacy", "static"] {
        svcs.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name},
                "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}}))
            .unwrap(),
        )
        .await
        .unwrap();
    }
}

/// The user's route `shop`: a hostname, a filter, a timeout and a second rule of theirs, parented to
/// the shared Gateway, routing to their own Service until the RayService adopts it.
fn user_route() -> HTTPRoute {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "shop", "namespace": NS, "labels": {"team": "shop"}},
        "spec": {
            "parentRefs": [{"name": "shared", "namespace": "infra", "sectionName": "http"}],
            "hostnames": ["shop.example.com"],
            "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
                 "filters": [{"type": "RequestHeaderModifier",
                              "requestHeaderModifier": {"add": [{"name": "x-team", "value": "shop"}]}}],
                 "timeouts": {"request": "10s"},
                 "backendRefs": [{"name": "legacy", "port": 80}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/static"}}],
                 "backendRefs": [{"name": "static", "port": 80}]}
            ]
        }
    }))
    .unwrap()
}

fn routes(s: &Scenario) -> Api<HTTPRoute> {
    Api::namespaced(s.c.client.clone(), NS)
}

/// `(service, weight)` of a route's first rule.
fn first_backends(route: &HTTPRoute) -> Vec<(String, Option<i32>)> {
    route
        .spec
        .rules
        .iter()
        .flatten()
        .next()
        .and_then(|r| r.backend_refs.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|b| (b.name, b.weight))
        .collect()
}

/// Everything of the route the user owns: its spec without `rules[0].backendRefs`, its labels and
/// owners.
fn users_part(route: &HTTPRoute) -> Value {
    let mut spec = serde_json::to_value(&route.spec).unwrap();
    spec["rules"][0].as_object_mut().unwrap().remove("backendRefs");
    json!({"spec": spec, "labels": route.metadata.labels, "owners": route.metadata.owner_references})
}

async fn wait_first_backends(s: &Scenario, route: &str, want: Vec<(String, Option<i32>)>) -> HTTPRoute {
    let what = format!("HTTPRoute {route} to route {want:?}");
    poll(&what, || async {
        routes(s)
            .get_opt(route)
            .await
            .unwrap()
            .filter(|r| first_backends(r) == want)
    })
    .await
}

/// The `UpgradeInProgress` message once it contains `text`.
async fn wait_upgrade_message(s: &Scenario, text: &str) -> String {
    let rs = s
        .wait_rs("rs", &format!("UpgradeInProgress to say {text:?}"), |r| {
            upgrade_message(r).contains(text)
        })
        .await;
    upgrade_message(&rs)
}

fn upgrade_message(rs: &RayService) -> String {
    rs.status
        .as_ref()
        .and_then(|st| st.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "UpgradeInProgress"))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

async fn warnings(s: &Scenario, reason: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(s.c.client.clone(), NS);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("rs"))
        .filter(|e| e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some("Warning"))
        .map(|e| e.note.unwrap_or_default())
        .collect()
}

async fn set_annotation(s: &Scenario, key: &str, value: &str) {
    s.services()
        .patch(
            "rs",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {key: value}}})),
        )
        .await
        .unwrap();
}

/// Upgrades `rs` to a new cluster and waits for its promotion; samples the most backends the first
/// rule of `route` held meanwhile. Returns `(old, new, most)`.
async fn upgrade(s: &Scenario, route: &str) -> (String, String, usize) {
    let old = active(&s.services().get("rs").await.unwrap()).unwrap();
    let most = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (api, most, route) = (routes(s), most.clone(), route.to_string());
        tokio::spawn(async move {
            loop {
                if let Ok(Some(r)) = api.get_opt(&route).await {
                    most.fetch_max(first_backends(&r).len(), Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    s.patch_version("rs", "2.47.0").await;
    let rs = s
        .wait_rs("rs", "a pending cluster", |r| pending(r).is_some())
        .await;
    let new = pending(&rs).unwrap();
    s.wait_rs("rs", "the promotion of the new cluster", |r| {
        active(r).as_deref() == Some(new.as_str()) && pending(r).is_none()
    })
    .await;
    sampler.abort();
    (old, new, most.load(Ordering::SeqCst))
}

async fn absent<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.unwrap().is_none()
}

/// KubeRay #4956: a RayService adopts the user's HTTPRoute. A name that leads nowhere is said (the
/// annotation and the cause, once as a Warning event) and nothing is created in its place. Adopted,
/// only the first rule's backendRefs change: the traffic moves through both clusters and ends on the
/// new one alone at weight 100. Deleting the RayService leaves the route and the shared Gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adopted_route_carries_the_upgrade_and_outlives_the_service() {
    let s = Scenario::start("12", 12000).await;
    shared_gateway(&s).await;
    user_services(&s).await;
    routes(&s)
        .create(&PostParams::default(), &user_route())
        .await
        .unwrap();
    let before = users_part(&routes(&s).get("shop").await.unwrap());

    let first = s.serving(service(json!({ROUTE_ANNOTATION: "shopp"}))).await;
    let said = wait_upgrade_message(
        &s,
        "quotagate.io/http-route-name: HTTPRoute default/shopp not found",
    )
    .await;
    assert!(said.contains("the upgrade waits"), "{said}");
    let warned = poll("the Warning event", || async {
        Some(warnings(&s, "InvalidGatewayAttachment").await).filter(|w| !w.is_empty())
    })
    .await;
    assert!(
        warned[0].contains("HTTPRoute default/shopp not found"),
        "{warned:?}"
    );
    let gateways: Api<Gateway> = Api::namespaced(s.c.client.clone(), NS);
    assert!(
        absent(&routes(&s), "rs-httproute").await,
        "no route in place of the missing one"
    );
    assert!(absent(&gateways, "rs-gateway").await, "no Gateway of its own");
    assert_eq!(
        users_part(&routes(&s).get("shop").await.unwrap()),
        before,
        "the user's route is untouched while another is named"
    );
    let names: Vec<String> = first_backends(&routes(&s).get("shop").await.unwrap())
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["legacy"]);

    set_annotation(&s, ROUTE_ANNOTATION, "shop").await;
    wait_first_backends(&s, "shop", vec![(format!("{first}-serve-svc"), Some(100))]).await;
    let rs = s
        .wait_rs("rs", "the problem to clear", |r| {
            !upgrade_message(r).contains("not found")
        })
        .await;
    assert_eq!(active(&rs).as_deref(), Some(first.as_str()));

    let (old, new, most) = upgrade(&s, "shop").await;
    assert_eq!(old, first);
    assert_eq!(most, 2, "the traffic moved through both clusters' serve Services");
    // KubeRay's e2eincrementalupgrade, on the adopted route.
    let route = wait_first_backends(&s, "shop", vec![(format!("{new}-serve-svc"), Some(100))]).await;
    assert_eq!(users_part(&route), before, "only rules[0].backendRefs changed");
    assert!(absent(&routes(&s), "rs-httproute").await);
    assert!(absent(&gateways, "rs-gateway").await);
    s.wait_gone(&old).await;

    s.services().delete("rs", &DeleteParams::default()).await.unwrap();
    poll("the RayService to be gone", || async {
        s.services().get_opt("rs").await.unwrap().is_none().then_some(())
    })
    .await;
    s.wait_gone(&new).await;
    let route = routes(&s).get("shop").await.unwrap();
    assert_eq!(
        users_part(&route),
        before,
        "the adopted route outlives the service"
    );
    assert_eq!(
        first_backends(&route),
        vec![(format!("{new}-serve-svc"), Some(100))],
        "left at the last cluster, for the user or the next service to re-point"
    );
    let shared: Api<Gateway> = Api::namespaced(s.c.client.clone(), "infra");
    assert!(!absent(&shared, "shared").await, "the shared Gateway stays");
    s.inv.assert_clean();
    s.c.quota.assert_safe();
}

/// KubeRay PR #5018: `<rs>-httproute` attaches to a shared Gateway in another namespace, on the
/// listener and port the annotation names (`gatewayRef.sectionName` and `port`). Until that
/// Gateway exists the service says so and writes no route; then the upgrade runs through it and
/// ends on the new cluster alone. No `<rs>-gateway` is ever created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_gateway_carries_the_upgrade_without_a_gateway_of_its_own() {
    let s = Scenario::start("12", 12000).await;
    let first = s
        .serving(service(json!({GATEWAY_ANNOTATION: "infra/shared/http:80"})))
        .await;
    let said = wait_upgrade_message(&s, "quotagate.io/gateway-ref: Gateway infra/shared not found").await;
    assert!(said.contains("the upgrade waits"), "{said}");
    assert!(
        absent(&routes(&s), "rs-httproute").await,
        "no route before its Gateway exists"
    );

    shared_gateway(&s).await;
    let route = wait_first_backends(
        &s,
        "rs-httproute",
        vec![(format!("{first}-serve-svc"), Some(100))],
    )
    .await;
    let parents: Vec<_> = route
        .spec
        .parent_refs
        .iter()
        .flatten()
        .map(|p| {
            (
                p.name.as_str(),
                p.namespace.as_deref(),
                p.section_name.as_deref(),
                p.port,
            )
        })
        .collect();
    assert_eq!(parents, [("shared", Some("infra"), Some("http"), Some(80))]);
    assert!(
        route.metadata.owner_references.is_some(),
        "its own route stays owned by the service"
    );

    let (_, new, most) = upgrade(&s, "rs-httproute").await;
    assert_eq!(most, 2, "the traffic moved through both clusters' serve Services");
    wait_first_backends(&s, "rs-httproute", vec![(format!("{new}-serve-svc"), Some(100))]).await;
    let gateways: Api<Gateway> = Api::namespaced(s.c.client.clone(), NS);
    assert!(absent(&gateways, "rs-gateway").await, "no Gateway of its own");
    s.services().delete("rs", &DeleteParams::default()).await.unwrap();
    s.wait_gone(&new).await;
    let shared: Api<Gateway> = Api::namespaced(s.c.client.clone(), "infra");
    assert!(!absent(&shared, "shared").await, "the shared Gateway stays");
    s.inv.assert_clean();
    s.c.quota.assert_safe();
}
