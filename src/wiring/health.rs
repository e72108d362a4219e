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

/// Shared by the health endpoints and whoever decides readiness.
#[derive(Clone)]
pub struct Health {
    ready: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
}

impl Health {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self { ready: Arc::new(AtomicBool::new(false)), metrics }
    }
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(h): State<Health>) -> impl IntoResponse {
    if h.is_ready() { (StatusCode::OK, "ok") } else { (StatusCode::SERVICE_UNAVAILABLE, "caches not synced yet") }
}

async fn metrics(State(h): State<Health>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], h.metrics.render())
}

pub fn router(health: Health) -> Router {
    Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz)).route("/metrics", get(metrics)).with_state(health)
}

/// Serves the endpoints until the shutdown future completes.
pub async fn serve(addr: SocketAddr, health: Health, shutdown: impl std::future::Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, router(health)).with_graceful_shutdown(shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    async fn get_status(app: Router, path: &str) -> (StatusCode, String) {
        let req = axum::http::Request::builder().uri(path).body(axum::body::Body::empty()).unwrap();
        let resp = app.oneshot(req).await.unwrap();
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn readiness_follows_cache_sync() {
        let h = Health::new(Arc::new(Metrics::new()));
        assert_eq!(get_status(router(h.clone()), "/healthz").await.0, StatusCode::OK);
        assert_eq!(get_status(router(h.clone()), "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
        h.set_ready(true);
        assert_eq!(get_status(router(h.clone()), "/readyz").await.0, StatusCode::OK);
        let (s, body) = get_status(router(h), "/metrics").await;
        assert_eq!(s, StatusCode::OK);
        assert!(body.contains("# EOF"), "{body}");
    }
}
