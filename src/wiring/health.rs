//! `/healthz`, `/readyz` (ready once the controllers' caches have synced) and `/metrics`.
//!
//! As kube-apiserver's: `/healthz` and `/readyz` are open to all, `/metrics` off loopback needs a
//! bearer token whose identity may `get` the `/metrics` non-resource URL (RBAC), checked by
//! [`MetricsAuth`]: TokenReview and SubjectAccessReview against the API server the manager talks
//! to (controller-runtime's metrics filter does the same), or the embedded server's own
//! authentication and RBAC. On a loopback bind `/metrics` stays open, as before.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::metrics::Metrics;
use crate::embedded::listener::BoundAddr;

/// What a token may do with `/metrics`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// Authenticated, but not allowed (403, naming the user).
    Forbidden(String),
    /// Not a token the reviewer knows (401).
    Unauthenticated,
}

type Review = dyn Fn(String) -> futures::future::BoxFuture<'static, Decision> + Send + Sync;

/// Who decides whether a bearer token may read `/metrics` off loopback.
#[derive(Clone)]
pub struct MetricsAuth(Arc<Review>);

impl std::fmt::Debug for MetricsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsAuth")
    }
}

impl MetricsAuth {
    /// The embedded server's own authentication (its admin token, the ServiceAccount tokens it
    /// issued) and RBAC: what `run --embedded` uses.
    pub fn embedded(server: Arc<crate::embedded::EmbeddedServer>) -> Self {
        MetricsAuth(Arc::new(move |token: String| {
            let auth = format!("Bearer {token}");
            let d = match server.bearer_may(Some(&auth), "get", "/metrics") {
                Some(true) => Decision::Allowed,
                Some(false) => Decision::Forbidden("the token's identity".into()),
                None => Decision::Unauthenticated,
            };
            Box::pin(std::future::ready(d))
        }))
    }

    /// A TokenReview, then a SubjectAccessReview of `get /metrics`, against the API server
    /// `client` talks to (kube-apiserver's delegated authentication and authorization). A review
    /// that fails refuses.
    pub fn delegated(client: kube::Client) -> Self {
        MetricsAuth(Arc::new(move |token: String| {
            let client = client.clone();
            Box::pin(async move { delegated_review(client, token).await })
        }))
    }

    async fn decide(&self, token: String) -> Decision {
        (self.0)(token).await
    }
}

async fn delegated_review(client: kube::Client, token: String) -> Decision {
    use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
    use k8s_openapi::api::authorization::v1::{
        NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let pp = kube::api::PostParams::default();
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviewed = match kube::Api::<TokenReview>::all(client.clone())
        .create(&pp, &review)
        .await
    {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "TokenReview for /metrics failed");
            return Decision::Unauthenticated;
        }
    };
    let status = reviewed.status.unwrap_or_default();
    let Some(user) = status.user.filter(|_| status.authenticated == Some(true)) else {
        return Decision::Unauthenticated;
    };
    let name = user.username.clone().unwrap_or_default();
    let sar = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username,
            groups: user.groups,
            uid: user.uid,
            extra: user.extra,
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some("/metrics".into()),
                verb: Some("get".into()),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    match kube::Api::<SubjectAccessReview>::all(client)
        .create(&pp, &sar)
        .await
    {
        Ok(r) if r.status.as_ref().is_some_and(|s| s.allowed) => Decision::Allowed,
        Ok(_) => Decision::Forbidden(format!("user {name:?}")),
        Err(e) => {
            tracing::warn!(error = %e, "SubjectAccessReview for /metrics failed");
            Decision::Forbidden(format!("user {name:?} (the review failed)"))
        }
    }
}

/// Series rendered beside the registry's, in the text format without `# EOF`.
#[derive(Clone)]
pub struct ExtraMetrics(Arc<dyn Fn() -> String + Send + Sync>);

impl ExtraMetrics {
    pub fn new(render: impl Fn() -> String + Send + Sync + 'static) -> Self {
        Self(Arc::new(render))
    }

    pub fn render(&self) -> String {
        (self.0)()
    }
}

impl std::fmt::Debug for ExtraMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExtraMetrics")
    }
}

/// Shared by the health endpoints and whoever decides readiness.
#[derive(Clone)]
pub struct Health {
    ready: Arc<AtomicBool>,
    /// False while a webhook this replica must serve is not serving yet (true when it has none).
    webhook: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
    extra: Option<ExtraMetrics>,
    /// Who may read `/metrics` off loopback; none: nobody may.
    metrics_auth: Option<MetricsAuth>,
}

impl Health {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            ready: Arc::new(AtomicBool::new(false)),
            webhook: Arc::new(AtomicBool::new(true)),
            metrics,
            extra: None,
            metrics_auth: None,
        }
    }
    /// Who may read `/metrics` when the listener is not bound to loopback. Without it, nobody may
    /// there (401/403), so a wildcard `--health-addr` never hands the metrics out anonymously.
    pub fn with_metrics_auth(self, metrics_auth: Option<MetricsAuth>) -> Self {
        Self { metrics_auth, ..self }
    }
    pub fn with_extra(self, extra: Option<ExtraMetrics>) -> Self {
        Self { extra, ..self }
    }
    /// The registry's series, then the extra ones, then `# EOF`.
    pub fn render(&self) -> String {
        let mut text = self.metrics.render();
        if let Some(extra) = &self.extra {
            let body = text
                .strip_suffix("# EOF\n")
                .map(str::to_owned)
                .unwrap_or_else(|| text.clone());
            text = format!("{body}{}# EOF\n", (extra.0)());
        }
        text
    }
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed) && self.webhook.load(Ordering::Relaxed)
    }
    /// Readiness waits for the webhook to serve too (it is set serving by [`Health::set_webhook_serving`]).
    pub fn require_webhook(&self) {
        self.webhook.store(false, Ordering::Relaxed);
    }
    pub fn set_webhook_serving(&self, serving: bool) {
        self.webhook.store(serving, Ordering::Relaxed);
    }
    fn not_ready_reason(&self) -> &'static str {
        if !self.ready.load(Ordering::Relaxed) {
            "caches not synced yet"
        } else {
            "webhook not serving yet (no certificate)"
        }
    }
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(h): State<Health>) -> impl IntoResponse {
    if h.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, h.not_ready_reason())
    }
}

/// Off loopback, as kube-apiserver: a bearer token whose identity may `get /metrics`. A request
/// that did not come through a listener (in-process) or came through a loopback one is served.
async fn metrics(State(h): State<Health>, req: axum::extract::Request) -> axum::response::Response {
    let off_loopback = req
        .extensions()
        .get::<BoundAddr>()
        .is_some_and(|b| !b.0.ip().is_loopback());
    if off_loopback {
        let token = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, t)| scheme.eq_ignore_ascii_case("bearer") && !t.trim().is_empty())
            .map(|(_, t)| t.trim().to_string());
        let Some(token) = token else {
            return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
        };
        let decision = match &h.metrics_auth {
            Some(auth) => auth.decide(token).await,
            None => Decision::Forbidden("anyone (no reviewer configured for this listener)".into()),
        };
        match decision {
            Decision::Allowed => {}
            Decision::Unauthenticated => return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response(),
            Decision::Forbidden(who) => {
                return (
                    StatusCode::FORBIDDEN,
                    format!("forbidden: {who} cannot get path \"/metrics\""),
                )
                    .into_response();
            }
        }
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        h.render(),
    )
        .into_response()
}

pub fn router(health: Health) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(health)
}

/// Serves the endpoints until the shutdown future completes.
pub async fn serve(
    addr: SocketAddr,
    health: Health,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = crate::embedded::listener::bind(addr).await?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        shutdown.await;
        stop.cancel();
    });
    crate::embedded::listener::serve_plain(listener, router(health), Default::default(), cancel).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    /// A replica that must serve the webhook is not ready before it does, synced caches or not.
    #[test]
    fn readiness_waits_for_the_caches_and_the_webhook() {
        let h = Health::new(Arc::new(Metrics::new()));
        h.require_webhook();
        assert!(!h.is_ready());
        h.set_ready(true);
        assert!(!h.is_ready());
        assert_eq!(h.not_ready_reason(), "webhook not serving yet (no certificate)");
        h.set_webhook_serving(true);
        assert!(h.is_ready());
    }

    async fn get_status(app: Router, path: &str) -> (StatusCode, String) {
        let req = axum::http::Request::builder()
            .uri(path)
            .body(axum::body::Body::empty())
            .unwrap();
        let resp = app.oneshot(req).await.unwrap();
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn readiness_follows_cache_sync() {
        let h = Health::new(Arc::new(Metrics::new()));
        assert_eq!(get_status(router(h.clone()), "/healthz").await.0, StatusCode::OK);
        assert_eq!(
            get_status(router(h.clone()), "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        h.set_ready(true);
        assert_eq!(get_status(router(h.clone()), "/readyz").await.0, StatusCode::OK);
        let (s, body) = get_status(router(h), "/metrics").await;
        assert_eq!(s, StatusCode::OK);
        assert!(body.contains("# EOF"), "{body}");
    }

    #[tokio::test]
    async fn extra_series_come_before_the_end_marker() {
        let h = Health::new(Arc::new(Metrics::new()))
            .with_extra(Some(ExtraMetrics::new(|| "x_total 3\n".into())));
        let (_, body) = get_status(router(h), "/metrics").await;
        assert!(body.ends_with("x_total 3\n# EOF\n"), "{body}");
        assert_eq!(body.matches("# EOF").count(), 1, "{body}");
    }

    /// One request over TCP; the status code.
    async fn status_over_tcp(addr: SocketAddr, path: &str, token: Option<&str>) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        String::from_utf8_lossy(&out)
            .get(9..12)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }

    async fn serve_on(bind: &str, health: Health) -> (SocketAddr, tokio_util::sync::CancellationToken) {
        let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cancel = tokio_util::sync::CancellationToken::new();
        tokio::spawn(crate::embedded::listener::serve_plain(
            listener,
            router(health),
            Default::default(),
            cancel.clone(),
        ));
        (SocketAddr::from(([127, 0, 0, 1], port)), cancel)
    }

    /// kube-apiserver's rule (issue "metrics behind credentials"): on a wildcard bind an anonymous
    /// `/metrics` is refused (401), a token the embedded server does not know too, the admin
    /// token is served; `/healthz` and `/readyz` stay open. A loopback bind is open as before.
    #[tokio::test]
    async fn metrics_off_loopback_need_a_token_allowed_to_get_them() {
        let srv = crate::embedded::EmbeddedServer::new(&[], Arc::new(crate::embedded::AllowAll));
        let cancel = tokio_util::sync::CancellationToken::new();
        let _guard = cancel.clone().drop_guard();
        srv.spawn_tcp("127.0.0.1:0".parse().unwrap(), None, cancel.clone())
            .await
            .unwrap();
        let token = srv.listener_creds.get().unwrap().token.clone();
        let h =
            Health::new(Arc::new(Metrics::new())).with_metrics_auth(Some(MetricsAuth::embedded(srv.clone())));
        h.set_ready(true);
        let (wild, stop) = serve_on("0.0.0.0:0", h.clone()).await;
        let _stop = stop.drop_guard();
        assert_eq!(status_over_tcp(wild, "/metrics", None).await, 401);
        assert_eq!(status_over_tcp(wild, "/metrics", Some("not-a-token")).await, 401);
        assert_eq!(status_over_tcp(wild, "/metrics", Some(&token)).await, 200);
        assert_eq!(status_over_tcp(wild, "/healthz", None).await, 200);
        assert_eq!(status_over_tcp(wild, "/readyz", None).await, 200);

        // No reviewer configured: nobody gets them off loopback, whatever the token.
        let closed = Health::new(Arc::new(Metrics::new()));
        let (wild2, stop2) = serve_on("0.0.0.0:0", closed.clone()).await;
        let _stop2 = stop2.drop_guard();
        assert_eq!(status_over_tcp(wild2, "/metrics", Some(&token)).await, 403);

        let (lo, stop3) = serve_on("127.0.0.1:0", closed).await;
        let _stop3 = stop3.drop_guard();
        assert_eq!(status_over_tcp(lo, "/metrics", None).await, 200);
    }

    /// The RBAC half of kube-apiserver's rule: a ServiceAccount's token is refused (403) until a
    /// ClusterRole bound to it allows `get` on the `/metrics` non-resource URL, then served.
    #[tokio::test]
    async fn metrics_off_loopback_follow_rbac_on_the_non_resource_url() {
        let srv = crate::embedded::EmbeddedServer::new(&[], Arc::new(crate::embedded::AllowAll));
        let cancel = tokio_util::sync::CancellationToken::new();
        let _guard = cancel.clone().drop_guard();
        srv.spawn_tcp("127.0.0.1:0".parse().unwrap(), None, cancel.clone())
            .await
            .unwrap();
        let client = srv.client();
        let post = |path: &str, body: serde_json::Value| {
            http::Request::post(path)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(serde_json::to_vec(&body).unwrap())
                .unwrap()
        };
        let issued: serde_json::Value = client
            .request(post(
                "/api/v1/namespaces/default/serviceaccounts/default/token",
                serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
            ))
            .await
            .unwrap();
        let sa_token = issued["status"]["token"].as_str().unwrap().to_string();
        let h =
            Health::new(Arc::new(Metrics::new())).with_metrics_auth(Some(MetricsAuth::embedded(srv.clone())));
        let (wild, stop) = serve_on("0.0.0.0:0", h).await;
        let _stop = stop.drop_guard();
        assert_eq!(status_over_tcp(wild, "/metrics", Some(&sa_token)).await, 403);
        assert_eq!(status_over_tcp(wild, "/healthz", Some(&sa_token)).await, 200);

        // A role for another URL is not enough.
        let role = |name: &str, url: &str| {
            serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": name}, "rules": [{"nonResourceURLs": [url], "verbs": ["get"]}]})
        };
        let binding = |role: &str| {
            serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": role}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]})
        };
        let rbac = "/apis/rbac.authorization.k8s.io/v1";
        for (name, url) in [("healthz-reader", "/healthz"), ("metrics-reader", "/metrics")] {
            let _: serde_json::Value = client
                .request(post(&format!("{rbac}/clusterroles"), role(name, url)))
                .await
                .unwrap();
            let _: serde_json::Value = client
                .request(post(&format!("{rbac}/clusterrolebindings"), binding(name)))
                .await
                .unwrap();
            let want = if url == "/metrics" { 200 } else { 403 };
            assert_eq!(
                status_over_tcp(wild, "/metrics", Some(&sa_token)).await,
                want,
                "after {name}"
            );
        }
    }
}
