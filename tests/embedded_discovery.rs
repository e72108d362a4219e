//! The kubectl-facing documents, checked on the wire without kubectl: aggregated discovery (exact
//! content type), legacy discovery, Table responses with printer columns, minimal OpenAPI v3.

mod embedded_support;

use embedded_support::*;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tower::ServiceExt;

async fn get(
    srv: &std::sync::Arc<quotagate::embedded::EmbeddedServer>,
    uri: &str,
    accept: &str,
) -> (String, Value) {
    let req = http::Request::builder()
        .uri(uri)
        .header("accept", accept)
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = srv.router().oneshot(req).await.unwrap();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    (ct, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn aggregated_and_legacy_discovery() {
    let srv = server();
    let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let (ct, apis) = get(&srv, "/apis", accept).await;
    assert_eq!(ct, quotagate::embedded::discovery::AGGREGATED_CONTENT_TYPE);
    let group = apis["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "example.quotagate.io")
        .unwrap();
    let res = &group["versions"][0]["resources"];
    let widgets = res
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "widgets")
        .unwrap();
    assert_eq!(
        widgets["responseKind"],
        json!({"group": "example.quotagate.io", "version": "v1", "kind": "Widget"})
    );
    assert_eq!(widgets["scope"], "Namespaced");
    assert_eq!(widgets["shortNames"], json!(["wd"]));
    assert_eq!(widgets["subresources"][0]["subresource"], "status");
    let gadgets = res
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "gadgets")
        .unwrap();
    assert_eq!(gadgets["scope"], "Cluster");
    let (_, core) = get(&srv, "/api", accept).await;
    assert_eq!(core["items"][0]["metadata"]["name"], "");
    let (ct, legacy) = get(&srv, "/api", "application/json").await;
    assert_eq!(
        (ct.as_str(), legacy["kind"].as_str()),
        ("application/json", Some("APIVersions"))
    );
    let (_, list) = get(&srv, "/apis/example.quotagate.io/v1", "application/json").await;
    assert!(
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "widgets/status")
    );
    let (_, v) = get(&srv, "/version", "application/json").await;
    assert!(v["gitVersion"].as_str().unwrap().starts_with("v1."));
}

#[tokio::test]
async fn table_responses_render_printer_columns() {
    let srv = server();
    let api: Api<Widget> = Api::namespaced(srv.client(), "default");
    api.create(&PostParams::default(), &widget("w", 4)).await.unwrap();
    let cond = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "R", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    api.patch_status("w", &PatchParams::default(), &Patch::Merge(cond))
        .await
        .unwrap();
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let (_, t) = get(
        &srv,
        "/apis/example.quotagate.io/v1/namespaces/default/widgets?limit=500",
        accept,
    )
    .await;
    assert_eq!(t["kind"], "Table");
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, ["Name", "Size", "Ready"]);
    assert_eq!(t["rows"][0]["cells"], json!(["w", 4, "True"]));
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert!(
        t["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|rv| !rv.is_empty())
    );
    let (_, one) = get(&srv, "/api/v1/namespaces/default", accept).await;
    assert_eq!(one["kind"], "Table");
    let (_, plain) = get(
        &srv,
        "/apis/example.quotagate.io/v1/namespaces/default/widgets",
        "application/json",
    )
    .await;
    assert_eq!(
        (plain["kind"].as_str(), plain["apiVersion"].as_str()),
        (Some("WidgetList"), Some("example.quotagate.io/v1"))
    );
}

#[tokio::test]
async fn openapi_v3_advertises_server_side_field_validation() {
    let srv = server();
    let (_, root) = get(&srv, "/openapi/v3", "application/json").await;
    let url = root["paths"]["apis/example.quotagate.io/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, doc) = get(&srv, &url, "application/json").await;
    let op = &doc["paths"]["/apis/example.quotagate.io/v1/namespaces/{namespace}/widgets/{name}"]["patch"];
    assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "Widget");
    assert_eq!(op["parameters"][0]["name"], "fieldValidation");
    assert!(root["paths"]["api/v1"].is_object());
}
