//! The loopback TCP face of the embedded server: TLS with the server's own CA, and every request
//! checked for the bearer token before it reaches the router (401 otherwise, as a real API server
//! answers an anonymous request when anonymous access is off). Every listener of the process
//! (this one, health, metrics, web view) runs under [`ListenerLimits`], kube-apiserver's timeouts.
//!
//! HTTP/2 and HTTP/1.1 both (ALPN `h2`, `http/1.1`, as kube-apiserver offers them), so a client that
//! speaks HTTP/2 (kubectl, client-go) multiplexes its watches over one connection. Sockets are not
//! what limits a client that has authenticated: only connections not yet *trusted* (TLS handshake
//! not done, or no authenticated request yet) are capped, the oldest closed first when a new one
//! arrives past the cap, so bare sockets can never starve the clients that hold a token; their load
//! is limited per request (the in-flight limits), as kube-apiserver's is.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

use super::auth::{Credentials, unauthorized};
use super::connections::{Conn, Untrusted};
use super::socket::Socket;

struct Authn {
    creds: Arc<Credentials>,
    server: Arc<super::EmbeddedServer>,
}

/// Who a bearer token is: the admin token (no RBAC, as `system:masters`), or a ServiceAccount
/// token this server issued (`satoken.rs`) whose ServiceAccount still exists with the same uid.
enum Identity {
    Admin,
    ServiceAccount(super::rbac::Authorizer),
}

fn identify(srv: &super::EmbeddedServer, creds: &Credentials, auth: Option<&str>) -> Option<Identity> {
    if creds.accepts(auth) {
        return Some(Identity::Admin);
    }
    let claims = super::satoken::bearer(auth)
        .and_then(|t| super::satoken::verify(&srv.sa_tokens, t, super::satoken::now_unix()))?;
    let live = srv
        .registry
        .find("", "v1", "serviceaccounts")
        .and_then(|info| srv.store.get(&info, Some(&claims.ns), &claims.name).ok())?;
    if live.pointer("/metadata/uid").and_then(serde_json::Value::as_str) != Some(claims.uid.as_str()) {
        return None;
    }
    let subject = super::review::Subject::authenticated(&claims.username(), &[]);
    Some(Identity::ServiceAccount(super::review::authorizer_for(
        &srv.store,
        &srv.registry,
        &subject,
    )))
}

impl super::EmbeddedServer {
    /// Whether the bearer token of `authorization` may `verb` the non-resource URL `path` (as
    /// kube-apiserver's RBAC decides `get /metrics`): `None` when the token is not one this
    /// server's listener accepts (or the listener does not serve yet).
    pub fn bearer_may(&self, authorization: Option<&str>, verb: &str, path: &str) -> Option<bool> {
        let creds = self.listener_creds.get()?;
        match identify(self, creds, authorization)? {
            Identity::Admin => Some(true),
            Identity::ServiceAccount(authz) => Some(authz.allows_non_resource(verb, path)),
        }
    }
}

/// The admin token, or a live ServiceAccount's token: the request then carries that
/// ServiceAccount as its RBAC principal. 401 otherwise.
async fn require_token(State(authn): State<Arc<Authn>>, mut req: Request, next: Next) -> Response {
    let auth = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match identify(&authn.server, &authn.creds, auth) {
        Some(Identity::Admin) => {
            trust(&req);
            return next.run(req).await;
        }
        Some(Identity::ServiceAccount(authz)) => {
            req.extensions_mut()
                .insert(super::rbac::Principal(Arc::new(authz)));
            trust(&req);
            return next.run(req).await;
        }
        None => {}
    }
    let body = Body::from(unauthorized().to_string());
    (
        http::StatusCode::UNAUTHORIZED,
        [(http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// An authenticated request makes its connection trusted: no longer counted against
/// [`ListenerLimits::max_connections`], never closed to make room.
fn trust(req: &Request) {
    if let Some(conn) = req.extensions().get::<Arc<Conn>>() {
        conn.trust();
    }
}

/// The server's router behind the token check, then the in-flight limits.
pub fn authenticated(
    server: Arc<super::EmbeddedServer>,
    creds: Arc<Credentials>,
    limits: &ListenerLimits,
) -> axum::Router {
    let in_flight = Arc::new(InFlightLimits {
        reads: Semaphore::new(limits.max_requests_inflight.max(1)),
        mutating: Semaphore::new(limits.max_mutating_requests_inflight.max(1)),
    });
    server
        .router()
        .layer(axum::middleware::from_fn_with_state(in_flight, limit_in_flight))
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(Authn { creds, server }),
            require_token,
        ))
}

/// kube-apiserver's `--max-requests-inflight` and `--max-mutating-requests-inflight` (the
/// `WithMaxInFlightLimit` filter): requests past them get 429 with `Retry-After`; long-running ones
/// (watches) are not counted. Only requests through the listener are: the in-process controllers'
/// client is the process's own, as kube-apiserver's loopback client is exempt (system:masters), so
/// a flood from outside cannot starve them.
struct InFlightLimits {
    reads: Semaphore,
    mutating: Semaphore,
}

async fn limit_in_flight(State(limits): State<Arc<InFlightLimits>>, req: Request, next: Next) -> Response {
    let watch = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
        || req.uri().path().contains("/watch/");
    if watch {
        return next.run(req).await;
    }
    let readonly = matches!(
        *req.method(),
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    );
    let slots = if readonly { &limits.reads } else { &limits.mutating };
    let Ok(_permit) = slots.try_acquire() else {
        let body = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Too many requests, please try again later.", "reason": "TooManyRequests",
            "details": {"retryAfterSeconds": 1}, "code": 429
        });
        return (
            http::StatusCode::TOO_MANY_REQUESTS,
            [
                (http::header::CONTENT_TYPE, "application/json"),
                (http::header::RETRY_AFTER, "1"),
            ],
            Body::from(body.to_string()),
        )
            .into_response();
    };
    next.run(req).await
}

/// The limits of kube-apiserver's secure serving (`SecureServingInfo.Serve`: `ReadHeaderTimeout`
/// 32 s, `IdleTimeout` 90 s, `MaxHeaderBytes` 1 MiB, `--http2-max-streams-per-connection`), plus a
/// cap on connections not yet trusted, which it does not have but a process sharing a descriptor
/// limit with its own store needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerLimits {
    /// From a connection's accept, or from the first byte of a next request, until its headers are
    /// in; a client that sends half its headers is cut off then. Over HTTP/2 it applies until the
    /// first request, the idle timeout after it (later bytes are frames, not new requests).
    pub header_read_timeout: Duration,
    /// How long a keep-alive connection may sit with no request before it is closed. A request in
    /// flight (a watch included) is never idle.
    pub idle_timeout: Duration,
    /// Bytes of request line and headers (431 beyond them); HTTP/2's `SETTINGS_MAX_HEADER_LIST_SIZE`.
    pub max_header_bytes: usize,
    /// Connections not yet trusted, open at once: in their TLS handshake, or with no authenticated
    /// request yet on the API listener (no complete request yet on the others). Past it the oldest
    /// of them is closed for the new one, and one log line a minute says so. Trusted connections
    /// are not counted: they are bounded only by the process's descriptor limit less a reserve for
    /// the data directory (`connections::descriptor_budget`), as kube-apiserver's are only by its.
    pub max_untrusted_connections: usize,
    /// Concurrent streams per HTTP/2 connection (kube-apiserver's
    /// `--http2-max-streams-per-connection`, 100 by default there since CVE-2023-44487).
    pub http2_max_streams_per_connection: u32,
    /// Read requests in flight at once on the API listener (429 past it; watches not counted).
    pub max_requests_inflight: usize,
    /// Mutating requests in flight at once on the API listener.
    pub max_mutating_requests_inflight: usize,
}

impl Default for ListenerLimits {
    fn default() -> Self {
        ListenerLimits {
            header_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            max_header_bytes: 1 << 20,
            max_untrusted_connections: 512,
            http2_max_streams_per_connection: 100,
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
        }
    }
}

/// What one listener holds open, by where each connection stands; `/metrics` shows the API
/// listener's (`quotagate_embedded_connections`), and tests read it to see that kubectl's calls
/// share HTTP/2 connections.
pub struct ListenerStats {
    untrusted: Arc<Untrusted>,
    open: [AtomicUsize; 4],
    served: [AtomicU64; 4],
}

/// Where a connection stands: in its TLS handshake, or served over what ALPN agreed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Handshake = 0,
    Http1 = 1,
    Http2 = 2,
    /// TLS without ALPN: HTTP/1.1 or HTTP/2, told apart by the preface.
    NoAlpn = 3,
}

/// A snapshot of [`ListenerStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenConnections {
    /// Accepted, TLS handshake not done.
    pub handshake: usize,
    /// Served over HTTP/1.1 (ALPN `http/1.1`, or a plain listener).
    pub http1: usize,
    /// Served over HTTP/2 (ALPN `h2`).
    pub http2: usize,
    /// TLS without ALPN.
    pub no_alpn: usize,
    /// Of all these, not yet trusted (closed first to make room).
    pub untrusted: usize,
    /// Connections served over HTTP/1.1, HTTP/2 and without ALPN since the listener started.
    pub http1_total: u64,
    pub http2_total: u64,
    pub no_alpn_total: u64,
    /// Untrusted connections closed to make room since the listener started.
    pub closed_for_room_total: u64,
}

impl ListenerStats {
    pub fn new(limits: &ListenerLimits) -> Arc<Self> {
        Arc::new(ListenerStats {
            untrusted: Untrusted::new(limits.max_untrusted_connections),
            open: Default::default(),
            served: Default::default(),
        })
    }

    pub fn snapshot(&self) -> OpenConnections {
        let open = |s: Stage| self.open[s as usize].load(Ordering::Relaxed);
        let served = |s: Stage| self.served[s as usize].load(Ordering::Relaxed);
        OpenConnections {
            handshake: open(Stage::Handshake),
            http1: open(Stage::Http1),
            http2: open(Stage::Http2),
            no_alpn: open(Stage::NoAlpn),
            untrusted: self.untrusted.len(),
            http1_total: served(Stage::Http1),
            http2_total: served(Stage::Http2),
            no_alpn_total: served(Stage::NoAlpn),
            closed_for_room_total: self.untrusted.closed_for_room(),
        }
    }

    /// Counts a connection at `stage` until the guard is dropped.
    fn enter(self: &Arc<Self>, stage: Stage) -> AtStage {
        self.open[stage as usize].fetch_add(1, Ordering::Relaxed);
        if stage != Stage::Handshake {
            self.served[stage as usize].fetch_add(1, Ordering::Relaxed);
        }
        AtStage {
            stats: self.clone(),
            stage,
        }
    }
}

/// One connection counted at its stage in [`ListenerStats`].
struct AtStage {
    stats: Arc<ListenerStats>,
    stage: Stage,
}

impl Drop for AtStage {
    fn drop(&mut self) {
        self.stats.open[self.stage as usize].fetch_sub(1, Ordering::Relaxed);
    }
}

impl OpenConnections {
    /// The series `/metrics` shows for the API listener, in the text format.
    pub fn render(&self) -> String {
        format!(
            "# HELP quotagate_embedded_connections Connections open on the API listener, by stage (TLS handshake, or the protocol ALPN agreed on).\n\
             # TYPE quotagate_embedded_connections gauge\n\
             quotagate_embedded_connections{{stage=\"handshake\"}} {}\n\
             quotagate_embedded_connections{{stage=\"http/1.1\"}} {}\n\
             quotagate_embedded_connections{{stage=\"h2\"}} {}\n\
             quotagate_embedded_connections{{stage=\"no-alpn\"}} {}\n\
             # HELP quotagate_embedded_untrusted_connections Connections on the API listener with no authenticated request yet (TLS handshake included).\n\
             # TYPE quotagate_embedded_untrusted_connections gauge\n\
             quotagate_embedded_untrusted_connections {}\n\
             # HELP quotagate_embedded_untrusted_connections_closed Untrusted connections closed to make room for new ones.\n\
             # TYPE quotagate_embedded_untrusted_connections_closed counter\n\
             quotagate_embedded_untrusted_connections_closed_total {}\n",
            self.handshake, self.http1, self.http2, self.no_alpn, self.untrusted, self.closed_for_room_total
        )
    }
}

/// The address the listener a request came through is bound to (`0.0.0.0:8081` for a wildcard
/// bind), in every request's extensions: `/metrics` asks for credentials off loopback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundAddr(pub SocketAddr);

/// kube-apiserver's per-stream upload buffer and largest frame (`resourceBody99Percentile`): most
/// POST bodies fit one frame; the connection's window is this times the streams.
const HTTP2_STREAM_WINDOW: u32 = 256 * 1024;

/// When a connection becomes trusted (no longer closed to make room for a new one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TrustOn {
    /// Once one of its requests is authenticated (the API listener: `require_token` says so).
    Authentication,
    /// Once a complete request has arrived (listeners without authentication).
    Request,
}

/// What the TLS handshake agreed on (ALPN); `Either` without ALPN, told apart by the preface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    Http1,
    Http2,
    Either,
}

/// An accepted connection's place: its limits, its entry among the untrusted ones, the token that
/// closes it (the listener's cancel, or eviction while untrusted), and its descriptor permit.
struct Accepted {
    peer: SocketAddr,
    stats: Arc<ListenerStats>,
    bound: Option<SocketAddr>,
    limits: ListenerLimits,
    conn: Arc<Conn>,
    close: CancellationToken,
    _permit: OwnedSemaphorePermit,
}

/// Binds `addr` for one of the listeners above with the kernel's largest accept queue
/// (`net.core.somaxconn`, as Go's `net.Listen` uses it, so kube-apiserver too), not the 128 of
/// `std` and tokio: a flood of bare connections that outpaces the accept loop for a moment fills a
/// queue of 128 at once, and every client whose SYN is dropped then waits a second for its retry.
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(accept_backlog())
}

/// `net.core.somaxconn` (4,096 when it cannot be read, the kernel's default since 5.4), at most
/// 65,535 as Go caps it.
fn accept_backlog() -> u32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .unwrap_or(4096)
        .clamp(128, 65535)
}

/// Accepts TLS connections on `listener` and serves `router` on each until `cancel` fires; open
/// connections (watches included) are closed then too. A connection is trusted once a complete
/// request has arrived on it (the webhook listener, whose caller holds no token of ours).
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    tls: Arc<rustls::ServerConfig>,
    limits: ListenerLimits,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    let stats = ListenerStats::new(&limits);
    serve_tls_trusting(listener, router, tls, limits, stats, cancel, TrustOn::Request).await
}

/// [`serve_tls`] for a router behind [`authenticated`]: a connection is trusted only once one of
/// its requests carries a valid token. `stats` counts its connections (made with the same
/// `limits`).
pub async fn serve_tls_authenticated(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    tls: Arc<rustls::ServerConfig>,
    limits: ListenerLimits,
    stats: Arc<ListenerStats>,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    serve_tls_trusting(
        listener,
        router,
        tls,
        limits,
        stats,
        cancel,
        TrustOn::Authentication,
    )
    .await
}

async fn serve_tls_trusting(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    tls: Arc<rustls::ServerConfig>,
    limits: ListenerLimits,
    stats: Arc<ListenerStats>,
    cancel: CancellationToken,
    trust_on: TrustOn,
) -> std::io::Result<()> {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    accept_loop(listener, limits, stats, cancel, move |tcp, accepted| {
        let acceptor = acceptor.clone();
        let router = router.clone();
        async move {
            let peer = accepted.peer;
            let in_handshake = accepted.stats.enter(Stage::Handshake);
            let handshake = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp));
            let stream = tokio::select! {
                r = handshake => match r {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                },
                _ = accepted.close.cancelled() => return,
            };
            drop(in_handshake);
            accepted.conn.secured();
            let (protocol, stage) = match stream.get_ref().1.alpn_protocol() {
                Some(b"h2") => (Protocol::Http2, Stage::Http2),
                Some(_) => (Protocol::Http1, Stage::Http1),
                None => (Protocol::Either, Stage::NoAlpn),
            };
            tracing::debug!(%peer, ?protocol, "TLS handshake done");
            let _serving = accepted.stats.enter(stage);
            serve_connection(stream, accepted, router, protocol, trust_on).await;
        }
    })
    .await
}

/// Plain HTTP with the same limits: the health, metrics and web-view listeners.
pub async fn serve_plain(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: ListenerLimits,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    let stats = ListenerStats::new(&limits);
    accept_loop(listener, limits, stats, cancel, move |tcp, accepted| {
        let router = router.clone();
        async move {
            let _serving = accepted.stats.enter(Stage::Http1);
            serve_connection(tcp, accepted, router, Protocol::Http1, TrustOn::Request).await
        }
    })
    .await
}

async fn accept_loop<F, Fut>(
    listener: tokio::net::TcpListener,
    limits: ListenerLimits,
    stats: Arc<ListenerStats>,
    cancel: CancellationToken,
    on_connection: F,
) -> std::io::Result<()>
where
    F: Fn(Socket, Accepted) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let descriptors = super::connections::descriptors();
    let untrusted = stats.untrusted.clone();
    let bound = listener.local_addr().ok();
    let mut at_cap = false;
    loop {
        let permit = match descriptors.clone().try_acquire_owned() {
            Ok(p) => {
                at_cap = false;
                p
            }
            Err(_) => {
                // Out of descriptors for connections: an untrusted one makes room, else the new
                // connection waits in the kernel's accept queue until one closes.
                if !untrusted.close_oldest() && !at_cap {
                    at_cap = true;
                    tracing::warn!(
                        limit = super::connections::descriptor_budget(),
                        "open connections at the descriptor limit: new connections wait until one closes"
                    );
                }
                tokio::select! {
                    _ = cancel.cancelled() => return Ok(()),
                    p = descriptors.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => return Ok(()),
                    },
                }
            }
        };
        let (tcp, peer): (tokio::net::TcpStream, SocketAddr) = tokio::select! {
            _ = cancel.cancelled() => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(x) => x,
                Err(e) => {
                    // Out of descriptors (another part of the process holds them) and the like:
                    // free one if an untrusted connection holds it, and wait a little instead of
                    // spinning.
                    tracing::debug!(error = %e, "accept failed");
                    untrusted.close_oldest();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // As Go's net package does for every TCP connection: small responses (a GET's headers and
        // body in two TLS records) are not held back waiting for the client's delayed ACK.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(%peer, error = %e, "setting TCP_NODELAY failed");
        }
        let (mut socket, probe) = Socket::new(tcp);
        let (conn, close, _) = untrusted.admit(&cancel, probe);
        socket.tell(conn.clone());
        let accepted = Accepted {
            peer,
            stats: stats.clone(),
            bound,
            limits: limits.clone(),
            conn,
            close,
            _permit: permit,
        };
        tokio::spawn(on_connection(socket, accepted));
    }
}

/// What the idle and header timers look at: requests in flight, and when the connection last went
/// idle or started sending a request (milliseconds since accept; `NONE` for not yet).
struct Activity {
    start: Instant,
    in_flight: AtomicUsize,
    idle_since: AtomicU64,
    request_began: AtomicU64,
    /// Serving HTTP/2: after the first request, the bytes that arrive are frames of any stream (or
    /// pings), not the start of a next request, so only the idle timer applies.
    http2: AtomicBool,
}

const NONE: u64 = u64::MAX;

impl Activity {
    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(NONE - 1)
    }

    /// Why the connection is to be closed now, if it is.
    fn expired(&self, limits: &ListenerLimits) -> Option<&'static str> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let now = self.now();
        let began = if self.http2.load(Ordering::Acquire) {
            NONE
        } else {
            self.request_began.load(Ordering::Acquire)
        };
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(NONE);
        if began != NONE {
            return (now.saturating_sub(began) >= ms(limits.header_read_timeout))
                .then_some("request headers not complete in time");
        }
        (now.saturating_sub(self.idle_since.load(Ordering::Acquire)) >= ms(limits.idle_timeout))
            .then_some("idle keep-alive connection")
    }
}

/// Ends a request's part in [`Activity`] when its response body is done (or dropped).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        a.idle_since.store(a.now(), Ordering::Release);
        a.request_began.store(NONE, Ordering::Release);
        a.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that holds its request's [`InFlight`] until it has been sent.
struct Tracked {
    body: axum::body::Body,
    _in_flight: InFlight,
}

impl hyper::body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The connection's stream, noting when the bytes of a next request start to arrive.
struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let a = &self.activity;
        if buf.filled().len() > before
            && a.in_flight.load(Ordering::Acquire) == 0
            && a.request_began.load(Ordering::Acquire) == NONE
        {
            a.request_began.store(a.now(), Ordering::Release);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Serves HTTP/1.1 or HTTP/2 on one connection until the client leaves, a timer of
/// [`ListenerLimits`] ends it, or its token fires (the listener's cancel; or room made for a new
/// connection while this one is untrusted).
async fn serve_connection<S>(
    stream: S,
    accepted: Accepted,
    router: axum::Router,
    protocol: Protocol,
    trust_on: TrustOn,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Accepted {
        peer,
        stats: _,
        bound,
        limits,
        conn,
        close,
        _permit,
    } = accepted;
    // Headers are due from the accept on, as for every later request from its first byte.
    let activity = Arc::new(Activity {
        start: Instant::now(),
        in_flight: AtomicUsize::new(0),
        idle_since: AtomicU64::new(0),
        request_began: AtomicU64::new(0),
        http2: AtomicBool::new(false),
    });
    let io = hyper_util::rt::TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    let tracked = activity.clone();
    let service = hyper::service::service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
        if req.version() == http::Version::HTTP_2 {
            tracked.http2.store(true, Ordering::Release);
        }
        tracked.in_flight.fetch_add(1, Ordering::AcqRel);
        let in_flight = InFlight(tracked.clone());
        if trust_on == TrustOn::Request {
            conn.trust();
        }
        req.extensions_mut().insert(conn.clone());
        if let Some(addr) = bound {
            req.extensions_mut().insert(BoundAddr(addr));
        }
        let call = router.clone().oneshot(req.map(axum::body::Body::new));
        async move {
            let resp = match call.await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(resp.map(|body| {
                axum::body::Body::new(Tracked {
                    body,
                    _in_flight: in_flight,
                })
            }))
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    // The timers below replace hyper's own header timer, which would also count idle time.
    builder
        .http1()
        .header_read_timeout(None)
        .max_buf_size(limits.max_header_bytes.max(8192));
    let streams = limits.http2_max_streams_per_connection.max(1);
    builder
        .http2()
        .max_concurrent_streams(streams)
        .initial_stream_window_size(HTTP2_STREAM_WINDOW)
        .initial_connection_window_size(HTTP2_STREAM_WINDOW.saturating_mul(streams).min(i32::MAX as u32))
        .max_frame_size(HTTP2_STREAM_WINDOW)
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
    let builder = match protocol {
        Protocol::Http1 => builder.http1_only(),
        Protocol::Http2 => builder.http2_only(),
        Protocol::Either => builder,
    };
    let conn = builder.serve_connection(io, service);
    let tick = (limits.header_read_timeout.min(limits.idle_timeout) / 4)
        .clamp(Duration::from_millis(10), Duration::from_secs(1));
    let timers = async {
        loop {
            tokio::time::sleep(tick).await;
            if let Some(why) = activity.expired(&limits) {
                return why;
            }
        }
    };
    tokio::select! {
        r = conn => if let Err(e) = r {
            tracing::debug!(%peer, error = %e, "connection ended with an error");
        },
        why = timers => tracing::debug!(%peer, why, "closing the connection"),
        _ = close.cancelled() => tracing::debug!(%peer, "connection closed (listener stopping, or room made)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each connection is counted at its stage until it ends; the totals keep what was served, and
    /// `/metrics` shows the open ones and the counter under OpenMetrics' names.
    #[test]
    fn connections_are_counted_by_stage_until_they_end() {
        let stats = ListenerStats::new(&ListenerLimits::default());
        let handshake = stats.enter(Stage::Handshake);
        let h2 = stats.enter(Stage::Http2);
        let http1 = stats.enter(Stage::Http1);
        let open = stats.snapshot();
        assert_eq!(
            (open.handshake, open.http2, open.http1, open.no_alpn),
            (1, 1, 1, 0)
        );
        assert_eq!((open.http2_total, open.http1_total), (1, 1));
        drop(handshake);
        drop(h2);
        let _again = stats.enter(Stage::Http2);
        let open = stats.snapshot();
        assert_eq!((open.handshake, open.http2, open.http1), (0, 1, 1));
        assert_eq!(open.http2_total, 2, "{open:?}");
        drop(http1);
        let text = stats.snapshot().render();
        for line in [
            "quotagate_embedded_connections{stage=\"h2\"} 1\n",
            "quotagate_embedded_connections{stage=\"http/1.1\"} 0\n",
            "quotagate_embedded_connections{stage=\"handshake\"} 0\n",
            "# TYPE quotagate_embedded_untrusted_connections_closed counter\n",
            "quotagate_embedded_untrusted_connections_closed_total 0\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
    }
}
