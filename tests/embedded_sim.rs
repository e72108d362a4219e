//! The simulated node agent, gateway controller and endpoints controller against the embedded server.

mod embedded_support;

use embedded_support::*;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::runtime::wait::await_condition;
use quotagate::embedded::sim::{self, SimConfig, gateway, node};
use quotagate::embedded::{AllowAll, EmbeddedServer};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

fn gateway_crd(kind: &str, plural: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.gateway.networking.k8s.io")},
        "spec": {"group": "gateway.networking.k8s.io", "scope": "Namespaced",
                 "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
                 "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap()
}

fn start(config: SimConfig) -> (Arc<EmbeddedServer>, CancellationToken) {
    let crds = [
        Widget::crd(),
        gateway_crd("Gateway", "gateways"),
        gateway_crd("HTTPRoute", "httproutes"),
    ];
    let srv = EmbeddedServer::new(&crds, Arc::new(AllowAll));
    let cancel = CancellationToken::new();
    sim::spawn(srv.client(), &config, cancel.clone());
    (srv, cancel)
}

fn pod(name: &str, labels: Value, annotations: Value) -> Pod {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels, "annotations": annotations},
                                  "spec": {"containers": [{"name": "c", "image": "img"}]}}),
    )
    .unwrap()
}

fn phase(p: Option<&Pod>) -> Option<String> {
    p.and_then(|p| p.status.as_ref()).and_then(|s| s.phase.clone())
}

#[tokio::test]
async fn node_agent_runs_fails_and_removes_pods() {
    let cfg = SimConfig {
        node: Some(node::NodeAgentConfig {
            fail_selector: Some("crash=yes".into()),
            ..Default::default()
        }),
        gateway: None,
        endpoints: false,
    };
    let (srv, cancel) = start(cfg);
    let pods: Api<Pod> = Api::namespaced(srv.client(), "default");
    pods.create(&PostParams::default(), &pod("ok", json!({}), json!({})))
        .await
        .unwrap();
    pods.create(
        &PostParams::default(),
        &pod("bad", json!({"crash": "yes"}), json!({})),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &pod("bad2", json!({}), json!({node::FAIL_ANNOTATION: "true"})),
    )
    .await
    .unwrap();
    let running = timeout(
        WAIT,
        await_condition(pods.clone(), "ok", |p: Option<&Pod>| {
            phase(p).as_deref() == Some("Running")
        }),
    )
    .await
    .unwrap()
    .unwrap()
    .unwrap();
    let st = running.status.unwrap();
    assert!(st.pod_ip.is_some_and(|ip| ip.starts_with("10.244.")));
    assert!(
        st.conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    assert!(
        running.spec.unwrap().node_name.is_some(),
        "bound to the simulated node"
    );
    for name in ["bad", "bad2"] {
        timeout(
            WAIT,
            await_condition(pods.clone(), name, |p: Option<&Pod>| {
                phase(p).as_deref() == Some("Failed")
            }),
        )
        .await
        .unwrap()
        .unwrap();
    }
    // A bound pod terminates gracefully; the agent removes it.
    pods.delete("ok", &DeleteParams::default()).await.unwrap();
    timeout(
        WAIT,
        await_condition(pods.clone(), "ok", |p: Option<&Pod>| p.is_none()),
    )
    .await
    .unwrap()
    .unwrap();
    cancel.cancel();
}

#[tokio::test]
async fn node_agent_honours_start_delay_and_switch() {
    let off = SimConfig {
        node: None,
        gateway: None,
        endpoints: false,
    };
    let (srv, cancel) = start(off);
    let pods: Api<Pod> = Api::namespaced(srv.client(), "default");
    pods.create(&PostParams::default(), &pod("idle", json!({}), json!({})))
        .await
        .unwrap();
    // With the agent switched off nothing moves the pod: a bounded watch sees no phase change.
    let res = timeout(
        std::time::Duration::from_millis(500),
        await_condition(pods.clone(), "idle", |p: Option<&Pod>| {
            phase(p).as_deref() != Some("Pending")
        }),
    )
    .await;
    assert!(res.is_err(), "pod left Pending without a node agent");
    cancel.cancel();

    let delay = std::time::Duration::from_millis(700);
    let cfg = SimConfig {
        node: Some(node::NodeAgentConfig {
            start_delay: delay,
            ..Default::default()
        }),
        gateway: None,
        endpoints: false,
    };
    let (srv, cancel) = start(cfg);
    let pods: Api<Pod> = Api::namespaced(srv.client(), "default");
    let t0 = tokio::time::Instant::now();
    pods.create(&PostParams::default(), &pod("slow", json!({}), json!({})))
        .await
        .unwrap();
    timeout(
        WAIT,
        await_condition(pods.clone(), "slow", |p: Option<&Pod>| {
            phase(p).as_deref() == Some("Running")
        }),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(t0.elapsed() >= delay, "started after {:?}", t0.elapsed());
    cancel.cancel();
}

#[tokio::test]
async fn endpoints_follow_ready_pods() {
    let cfg = SimConfig {
        node: Some(Default::default()),
        gateway: None,
        endpoints: true,
    };
    let (srv, cancel) = start(cfg);
    let client = srv.client();
    let svcs: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc: Service = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8000}]}})).unwrap();
    svcs.create(&PostParams::default(), &svc).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &pod("w1", json!({"app": "web"}), json!({})),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &pod("other", json!({"app": "db"}), json!({})),
    )
    .await
    .unwrap();
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let has = |n: usize| move |s: Option<&EndpointSlice>| s.is_some_and(|s| s.endpoints.len() == n);
    let s = timeout(WAIT, await_condition(slices.clone(), "web-sim", has(1)))
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        s.endpoints[0].target_ref.as_ref().and_then(|r| r.name.as_deref()),
        Some("w1")
    );
    assert_eq!(s.ports.unwrap()[0].port, Some(8000));
    pods.create(
        &PostParams::default(),
        &pod("w2", json!({"app": "web"}), json!({})),
    )
    .await
    .unwrap();
    timeout(WAIT, await_condition(slices.clone(), "web-sim", has(2)))
        .await
        .unwrap()
        .unwrap();
    cancel.cancel();
}

#[tokio::test]
async fn gateway_controller_sets_conditions() {
    let cfg = SimConfig {
        node: None,
        gateway: Some(Default::default()),
        endpoints: false,
    };
    let (srv, cancel) = start(cfg);
    let client = srv.client();
    let gws: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &gateway::gateway_resource());
    let routes: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &gateway::httproute_resource());
    let gw: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "gw"},
        "spec": {"gatewayClassName": "c", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}),
    )
    .unwrap();
    gws.create(&PostParams::default(), &gw).await.unwrap();
    let route: DynamicObject = serde_json::from_value(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "r"},
        "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "svc-a", "port": 8000}]}]}})).unwrap();
    routes.create(&PostParams::default(), &route).await.unwrap();
    let cond_status = |o: Option<&DynamicObject>, path: &str, t: &str| -> Option<String> {
        let v = serde_json::to_value(o?).ok()?;
        v.pointer(path)?
            .as_array()?
            .iter()
            .find(|c| c["type"] == t)
            .and_then(|c| c["status"].as_str().map(String::from))
    };
    timeout(
        WAIT,
        await_condition(gws.clone(), "gw", move |o: Option<&DynamicObject>| {
            cond_status(o, "/status/conditions", "Programmed").as_deref() == Some("True")
        }),
    )
    .await
    .unwrap()
    .unwrap();
    timeout(
        WAIT,
        await_condition(routes.clone(), "r", move |o: Option<&DynamicObject>| {
            cond_status(o, "/status/parents/0/conditions", "ResolvedRefs").as_deref() == Some("False")
        }),
    )
    .await
    .unwrap()
    .unwrap();
    let svc: Service =
        serde_json::from_value(json!({"metadata": {"name": "svc-a"}, "spec": {"ports": [{"port": 8000}]}}))
            .unwrap();
    Api::<Service>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
    timeout(
        WAIT,
        await_condition(routes.clone(), "r", move |o: Option<&DynamicObject>| {
            cond_status(o, "/status/parents/0/conditions", "ResolvedRefs").as_deref() == Some("True")
        }),
    )
    .await
    .unwrap()
    .unwrap();
    cancel.cancel();
}
