//! `/healthz`, `/readyz` (ready once the controllers' caches have synced) and `/metrics`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::metrics::Metrics;

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
}

impl Health {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            ready: Arc::new(AtomicBool::new(false)),
            webhook: Arc::new(AtomicBool::new(true)),
            metrics,
            extra: None,
        }
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

async fn metrics(State(h): State<Health>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        h.render(),
    )
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
    let listener = tokio::net::TcpListener::bind(addr).await?;
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
}
