//! Serves the scheduler's reasoning per pending workload (`quotagate explain`) as an API group,
//! `explain.quotagate.io/v1alpha1`: mounted on the embedded server, and on the manager's HTTP port
//! in a real cluster (registered there by `config/apiservice/`).
//!
//! `GET /apis/explain.quotagate.io/v1alpha1/namespaces/<ns>/workloads/<name>` answers a
//! `WorkloadExplanation` (the record's fields at the top level) or a 404 `Status`.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::admission::Explanations;
use crate::queue::{Explanation, WorkloadKey};

pub const GROUP: &str = "explain.quotagate.io";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "WorkloadExplanation";

/// The path of one workload's explanation.
pub fn path(namespace: &str, name: &str) -> String {
    format!("/apis/{GROUP}/{VERSION}/namespaces/{namespace}/workloads/{name}")
}

/// The object served for a record.
pub fn to_object(key: &WorkloadKey, e: &Explanation) -> Value {
    let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert("apiVersion".into(), json!(format!("{GROUP}/{VERSION}")));
        m.insert("kind".into(), json!(KIND));
        m.insert(
            "metadata".into(),
            json!({"name": key.name, "namespace": key.namespace}),
        );
    }
    v
}

fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code.as_u16()});
    (code, axum::Json(body)).into_response()
}

async fn one(State(x): State<Explanations>, Path((namespace, name)): Path<(String, String)>) -> Response {
    let key = WorkloadKey::new(namespace, name);
    match x.get(&key) {
        Some(e) => axum::Json(to_object(&key, &e)).into_response(),
        None => status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!(
                "no scheduling record for workload {key}: it is admitted, held, not queued, or not evaluated yet"
            ),
        ),
    }
}

async fn resources() -> Response {
    axum::Json(json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{GROUP}/{VERSION}"),
        "resources": [{"name": "workloads", "singularName": "workload", "namespaced": true, "kind": KIND, "verbs": ["get"]}]
    }))
    .into_response()
}

/// The group's router (full paths, for the embedded mount and the manager's port alike).
pub fn router(explanations: Explanations) -> Router {
    Router::new()
        .route(&format!("/apis/{GROUP}/{VERSION}"), get(resources))
        .route(
            &format!("/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/workloads/{{name}}"),
            get(one),
        )
        .with_state(explanations)
}
