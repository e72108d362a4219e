//! HTTP client tests against a local stand-in server that records requests and answers with a
//! configured status and body.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;

use super::*;

#[derive(Clone, Debug, Default)]
struct Seen {
    method: String,
    uri: String,
    content_type: Option<String>,
    auth: Option<String>,
    body: Vec<u8>,
}

#[derive(Clone, Default)]
struct Stub {
    reply: Arc<Mutex<(u16, String)>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Stub {
    fn reply(&self, status: u16, body: &str) {
        *self.reply.lock().unwrap() = (status, body.to_owned());
    }
    fn last(&self) -> Seen {
        self.seen.lock().unwrap().last().cloned().unwrap()
    }
}

async fn handler(State(stub): State<Stub>, req: Request) -> impl IntoResponse {
    // Scoped so no borrow of the (non-Sync) request lives across the await below.
    let mut seen = {
        let header = |name: &str| {
            req.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        Seen {
            method: req.method().to_string(),
            uri: req.uri().to_string(),
            content_type: header("content-type"),
            auth: header(AUTH_HEADER),
            body: Vec::new(),
        }
    };
    seen.body = axum::body::to_bytes(req.into_body(), 1 << 20)
        .await
        .unwrap()
        .to_vec();
    stub.seen.lock().unwrap().push(seen);
    let (status, body) = stub.reply.lock().unwrap().clone();
    (StatusCode::from_u16(status).unwrap(), Bytes::from(body))
}

async fn serve_stub() -> (Stub, DashboardEndpoint) {
    let stub = Stub::default();
    stub.reply(200, "");
    let app = Router::new().fallback(handler).with_state(stub.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (stub, DashboardEndpoint::new(format!("http://{addr}/")))
}

fn config() -> ServeConfig {
    ServeConfig::from_yaml("applications:\n  - name: hello\n    import_path: app:app\n").unwrap()
}

#[tokio::test]
async fn deploy_puts_json_with_token_and_capacity() {
    let (stub, ep) = serve_stub().await;
    let client = HttpDashboard::default();
    client
        .deploy(&ep.clone().with_token("t0k"), &config(), Some(50.0))
        .await
        .unwrap();
    let seen = stub.last();
    assert_eq!(seen.method, "PUT");
    assert_eq!(seen.uri, "/api/serve/applications/");
    assert_eq!(seen.content_type.as_deref(), Some("application/json"));
    assert_eq!(seen.auth.as_deref(), Some("Bearer t0k"));
    let body: serde_json::Value = serde_json::from_slice(&seen.body).unwrap();
    assert_eq!(body["target_capacity"], serde_json::json!(50));
    assert_eq!(body["applications"][0]["name"], "hello");

    // No token: no header at all.
    client.deploy(&ep, &config(), None).await.unwrap();
    let seen = stub.last();
    assert_eq!(seen.auth, None);
    let body: serde_json::Value = serde_json::from_slice(&seen.body).unwrap();
    assert!(body.get("target_capacity").is_none());
}

#[tokio::test]
async fn serve_details_gets_declarative_and_decodes() {
    let (stub, ep) = serve_stub().await;
    stub.reply(
        200,
        r#"{"controller_info": {}, "proxies": {}, "applications": {"a": {"name": "a", "status": "DEPLOYING", "message": "", "deployments": {}}}, "target_capacity": null, "new_key": [1]}"#,
    );
    let details = HttpDashboard::default().serve_details(&ep).await.unwrap();
    assert_eq!(stub.last().method, "GET");
    assert_eq!(stub.last().uri, "/api/serve/applications/?api_type=declarative");
    assert_eq!(
        details.applications["a"].status,
        crate::rayservice::dashboard::AppStatus::Deploying
    );
}

#[tokio::test]
async fn delete_sends_delete() {
    let (stub, ep) = serve_stub().await;
    HttpDashboard::default().delete_applications(&ep).await.unwrap();
    assert_eq!(stub.last().method, "DELETE");
    assert_eq!(stub.last().uri, "/api/serve/applications/");
}

#[tokio::test]
async fn error_statuses_are_classified() {
    let (stub, ep) = serve_stub().await;
    let client = HttpDashboard::default();
    let traceback = format!(
        "Traceback (most recent call last):\n{}json.decoder.JSONDecodeError: x",
        "  line\n".repeat(500)
    );
    let cases: &[(u16, &str, &str)] = &[
        (
            400,
            "1 validation error for ServeDeploySchema\napplications.0.import_path\n  Field required",
            "rejected",
        ),
        (401, "Unauthorized: Missing authentication token", "unauthorized"),
        (404, "not found", "client_error"),
        (500, &traceback, "server_error"),
    ];
    for (status, body, category) in cases {
        stub.reply(*status, body);
        let err = client.deploy(&ep, &config(), None).await.unwrap_err();
        assert_eq!(err.category(), *category, "{status}: {err}");
        let err = client.serve_details(&ep).await.unwrap_err();
        assert_eq!(err.category(), *category, "{status}: {err}");
    }
    stub.reply(
        400,
        "1 validation error for ServeDeploySchema\napplications.0.import_path\n  Field required",
    );
    match client.deploy(&ep, &config(), None).await.unwrap_err() {
        DashboardError::Rejected { message } => {
            assert!(message.contains("applications.0.import_path"))
        }
        other => panic!("want Rejected, got {other:?}"),
    }
    stub.reply(500, &traceback);
    match client.deploy(&ep, &config(), None).await.unwrap_err() {
        DashboardError::Server { status, body } => {
            assert_eq!(status, 500);
            assert!(body.len() < 600, "body not shortened: {}", body.len());
            assert!(body.ends_with("JSONDecodeError: x"));
        }
        other => panic!("want Server, got {other:?}"),
    }
}

#[tokio::test]
async fn undecodable_body_is_a_decode_error() {
    let (stub, ep) = serve_stub().await;
    stub.reply(200, "<html>proxy says hi</html>");
    let err = HttpDashboard::default().serve_details(&ep).await.unwrap_err();
    assert_eq!(err.category(), "decode");
    assert!(err.to_string().contains("proxy says hi"), "{err}");
}

#[tokio::test]
async fn silent_server_times_out() {
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    let client = HttpDashboard::new(HttpDashboardOptions {
        request_timeout: Duration::from_millis(300),
        ..Default::default()
    });
    let started = Instant::now();
    let err = client
        .serve_details(&DashboardEndpoint::new(format!("http://{addr}")))
        .await
        .unwrap_err();
    assert!(matches!(err, DashboardError::Timeout { .. }), "{err:?}");
    assert!(err.is_transient());
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn closed_port_is_unreachable() {
    // Bind then drop to get a port nothing listens on.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let started = Instant::now();
    let err = HttpDashboard::default()
        .serve_details(&DashboardEndpoint::new(format!("http://{addr}")))
        .await
        .unwrap_err();
    assert!(matches!(err, DashboardError::Unreachable { .. }), "{err:?}");
    assert!(err.to_string().contains("refused"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn bad_endpoints_are_rejected_before_sending() {
    let client = HttpDashboard::default();
    let cases = [
        DashboardEndpoint::new("not a url"),
        DashboardEndpoint::new("https://127.0.0.1:8265"),
        DashboardEndpoint::new("http://127.0.0.1:1").with_token("bad\ntoken"),
    ];
    for ep in cases {
        let err = client.serve_details(&ep).await.unwrap_err();
        assert_eq!(err.category(), "invalid_endpoint", "{ep:?}: {err}");
    }
}

#[test]
fn decode_rejects_wrong_shapes() {
    assert!(decode_serve_details(br#"{"applications": {"a": {"name": "a"}}}"#).is_err());
    assert!(decode_serve_details(b"").is_err());
    assert!(decode_serve_details(br#"{"applications": {}}"#).is_ok());
}

#[tokio::test]
async fn proxy_health_gets_healthz_on_the_proxy_url_without_token() {
    let (stub, proxy) = serve_stub().await;
    let client = HttpDashboard::default();
    let dashboard = DashboardEndpoint::new("http://127.0.0.1:9").with_token("t0k");
    stub.reply(200, "success");
    assert!(client.proxy_healthy(&dashboard, &proxy.base_url).await.unwrap());
    let seen = stub.last();
    assert_eq!((seen.method.as_str(), seen.uri.as_str()), ("GET", "/-/healthz"));
    assert_eq!(seen.auth, None, "the proxy's health route takes no token");
    stub.reply(503, "This node is being drained.");
    assert!(!client.proxy_healthy(&dashboard, &proxy.base_url).await.unwrap());
    // Nothing listening: an error, which the controller reads as unhealthy.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    assert!(matches!(
        client.proxy_healthy(&dashboard, &format!("http://{addr}")).await,
        Err(DashboardError::Unreachable { .. })
    ));
}

/// The Jobs API calls KubeRay's `dashboard_httpclient.go` makes: methods, paths, bodies, and a 404 on GET
/// read as "no such job" (KubeRay submits in HTTPMode then).
#[tokio::test]
async fn jobs_api_calls_and_answers() {
    use crate::rayservice::dashboard::jobs::{JobSubmitRequest, RayJobsApi};
    let (stub, ep) = serve_stub().await;
    let client = HttpDashboard::default();
    stub.reply(200, r#"{"submission_id": "rj-abcde", "job_id": null}"#);
    let request = JobSubmitRequest {
        entrypoint: "sleep 1".into(),
        submission_id: Some("rj-abcde".into()),
        runtime_env: Some(serde_json::json!({"pip": ["requests"]})),
        ..Default::default()
    };
    let answer = client
        .submit_job(&ep.clone().with_token("t"), &request)
        .await
        .unwrap();
    assert_eq!(answer.submission_id, "rj-abcde");
    let seen = stub.last();
    assert_eq!(
        (seen.method.as_str(), seen.uri.as_str(), seen.auth.as_deref()),
        ("POST", "/api/jobs/", Some("Bearer t"))
    );
    let body: serde_json::Value = serde_json::from_slice(&seen.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"entrypoint": "sleep 1", "submission_id": "rj-abcde", "runtime_env": {"pip": ["requests"]}})
    );

    stub.reply(
        200,
        r#"{"type": "SUBMISSION", "submission_id": "rj-abcde", "status": "RUNNING", "start_time": 5}"#,
    );
    let info = client.job_info(&ep, "rj-abcde").await.unwrap().unwrap();
    assert_eq!((info.status.as_str(), info.start_time), ("RUNNING", Some(5)));
    assert_eq!(
        (stub.last().method.as_str(), stub.last().uri.as_str()),
        ("GET", "/api/jobs/rj-abcde")
    );
    stub.reply(404, "Job rj-abcde does not exist");
    assert_eq!(client.job_info(&ep, "rj-abcde").await.unwrap(), None);

    stub.reply(200, r#"{"stopped": true}"#);
    assert!(client.stop_job(&ep, "rj-abcde").await.unwrap());
    assert_eq!(
        (stub.last().method.as_str(), stub.last().uri.as_str()),
        ("POST", "/api/jobs/rj-abcde/stop")
    );
    stub.reply(200, r#"{"deleted": true}"#);
    assert!(client.delete_job(&ep, "rj-abcde").await.unwrap());
    assert_eq!(
        (stub.last().method.as_str(), stub.last().uri.as_str()),
        ("DELETE", "/api/jobs/rj-abcde")
    );
    stub.reply(200, r#"{"logs": "hello\n"}"#);
    assert_eq!(client.job_logs(&ep, "rj-abcde").await.unwrap(), "hello\n");
    assert_eq!(stub.last().uri, "/api/jobs/rj-abcde/logs");

    // A refused submission (duplicate id) is Ray's 400 with its message; a broken body is a decode error.
    stub.reply(400, "Job with submission_id rj-abcde already exists.");
    let err = client.submit_job(&ep, &request).await.unwrap_err();
    assert!(
        matches!(&err, DashboardError::Rejected { message } if message.contains("already exists")),
        "{err:?}"
    );
    stub.reply(200, "<html>");
    assert!(matches!(
        client.job_info(&ep, "rj-abcde").await,
        Err(DashboardError::Decode { .. })
    ));
}
