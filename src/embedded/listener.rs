//! The loopback TCP face of the embedded server: TLS with the server's own CA, and every request
//! checked for the bearer token before it reaches the router (401 otherwise, as a real API server
//! answers an anonymous request when anonymous access is off).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

use super::auth::{Credentials, unauthorized};

async fn require_token(
    State(creds): State<Arc<Credentials>>,
    req: Request,
    next: Next,
) -> Response {
    let auth = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if creds.accepts(auth) {
        return next.run(req).await;
    }
    let body = Body::from(unauthorized().to_string());
    (
        http::StatusCode::UNAUTHORIZED,
        [(http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// `router` behind the token check.
pub fn authenticated(router: axum::Router, creds: Arc<Credentials>) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(creds, require_token))
}

/// Accepts TLS connections on `listener` and serves `router` on each until `cancel` fires; open
/// connections (watches included) are closed then too.
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    tls: Arc<rustls::ServerConfig>,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let (tcp, peer): (tokio::net::TcpStream, SocketAddr) = tokio::select! {
            _ = cancel.cancelled() => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(x) => x,
                Err(e) => {
                    // Out of descriptors and the like: wait a little instead of spinning.
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let handshake =
                tokio::time::timeout(std::time::Duration::from_secs(10), acceptor.accept(tcp));
            let stream = match handshake.await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let service = hyper_util::service::TowerToHyperService::new(router);
            let io = hyper_util::rt::TokioIo::new(stream);
            let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, service);
            tokio::select! {
                r = conn => if let Err(e) = r {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                },
                _ = cancel.cancelled() => {}
            }
        });
    }
}
