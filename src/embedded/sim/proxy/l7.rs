//! The Gateway's data plane: an HTTP/1.1 proxy on each HTTP listener of a Gateway (its address on the
//! pod bridge, the listener's port). Each request is routed by the attached HTTPRoutes' rules
//! (`routes.rs`), a backend drawn by the rule's weights, and sent straight to a ready endpoint of that
//! backend Service (as Envoy-based gateways do, not through the ClusterIP), over pooled keep-alive
//! connections. Answers as an Envoy-based gateway would when it cannot: 404 without a matching route,
//! 500 for a rule without a usable backend, 503 when the drawn backend has no ready endpoint or none
//! accepts, 504 after `UPSTREAM_TIMEOUT`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::forward::{self, Backends};
use super::routes::{self, Listener};

/// The listeners (with their attached rules) by Gateway address.
pub type Tables = Arc<RwLock<HashMap<Ipv4Addr, Vec<Listener>>>>;

/// Request bodies are held in memory (so a refused endpoint's request can go to the next one); larger
/// ones get a 413.
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// From the request sent upstream to the answer's headers.
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(60);
/// Idle upstream connections are closed after this, well before Serve's own keep-alive (90 s).
const POOL_IDLE: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
];

type Body = BoxBody<Bytes, hyper::Error>;

struct Plane {
    tables: Tables,
    backends: Backends,
    client: Client<HttpConnector, Full<Bytes>>,
    next: AtomicUsize,
}

/// One client for every listener of a proxy: its pool keeps connections to the endpoints.
#[derive(Clone)]
pub struct DataPlane(Arc<Plane>);

impl DataPlane {
    pub fn new(tables: Tables, backends: Backends) -> DataPlane {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .build(connector);
        DataPlane(Arc::new(Plane {
            tables,
            backends,
            client,
            next: AtomicUsize::new(0),
        }))
    }

    /// Binds `addr` (a Gateway address already on the bridge) and serves HTTP/1.1 there until aborted.
    pub fn listen(&self, addr: SocketAddrV4) -> std::io::Result<JoinHandle<()>> {
        let std = std::net::TcpListener::bind(addr)?;
        std.set_nonblocking(true)?;
        let listener = TcpListener::from_std(std)?;
        let plane = self.0.clone();
        Ok(tokio::spawn(async move {
            loop {
                let (conn, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!(%addr, error = %e, "gateway: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let _ = conn.set_nodelay(true);
                let plane = plane.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let plane = plane.clone();
                        async move { Ok::<_, Infallible>(handle(&plane, addr, peer, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(TokioIo::new(conn), svc)
                        .await;
                });
            }
        }))
    }
}

fn answer(status: StatusCode, message: String) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from(message + "\n"))
            .map_err(|e: Infallible| match e {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn strip_hop_by_hop(h: &mut HeaderMap) {
    let named: Vec<String> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
        .collect();
    for n in HOP_BY_HOP.iter().copied().map(str::to_owned).chain(named) {
        h.remove(n.as_str());
    }
}

async fn handle(
    plane: &Plane,
    local: SocketAddrV4,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Response<Body> {
    let (mut parts, body) = req.into_parts();
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| parts.uri.authority().map(|a| a.to_string()))
        .unwrap_or_default();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str().to_owned(), v.to_owned())))
        .collect();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().unwrap_or("").to_owned();
    let view = routes::Request {
        host: &host,
        method: parts.method.as_str(),
        path: &path,
        query: &query,
        headers: &headers,
    };
    let rule = {
        let tables = plane.tables.read().unwrap_or_else(PoisonError::into_inner);
        tables
            .get(local.ip())
            .and_then(|ls| routes::pick_rule(ls, local.port(), &view))
            .cloned()
    };
    let Some(rule) = rule else {
        return answer(
            StatusCode::NOT_FOUND,
            format!("no HTTPRoute rule matches {host}{path}"),
        );
    };
    let total = routes::total_weight(&rule);
    let backend = if total == 0 {
        None
    } else {
        routes::pick_backend(&rule, rand::random_range(0..total))
    };
    let Some(backend) = backend else {
        return answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the matching rule has no backend with a weight above 0".into(),
        );
    };
    if let Some(why) = &backend.invalid {
        return answer(StatusCode::INTERNAL_SERVER_ERROR, why.clone());
    }
    let Some(targets) = forward::service_endpoints(&plane.backends, &backend.service, backend.port) else {
        return answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("backend Service {} has no port {}", backend.service, backend.port),
        );
    };
    if targets.is_empty() {
        return answer(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("no healthy upstream: {} has no ready endpoint", backend.service),
        );
    }
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return answer(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request bodies above {MAX_BODY} bytes are not proxied"),
            );
        }
        Err(e) => return answer(StatusCode::BAD_REQUEST, format!("reading the request: {e}")),
    };
    strip_hop_by_hop(&mut parts.headers);
    let forwarded = match parts.headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        Some(prior) => format!("{prior}, {}", peer.ip()),
        None => peer.ip().to_string(),
    };
    if let Ok(v) = HeaderValue::from_str(&forwarded) {
        parts.headers.insert("x-forwarded-for", v);
    }
    parts
        .headers
        .insert("x-forwarded-proto", HeaderValue::from_static("http"));
    let path_and_query = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let start = plane.next.fetch_add(1, Ordering::Relaxed);
    for i in 0..targets.len() {
        let Some(t) = targets.get(start.wrapping_add(i) % targets.len()) else {
            break;
        };
        let Ok(uri) = format!("http://{t}{path_and_query}").parse::<http::Uri>() else {
            return answer(
                StatusCode::BAD_REQUEST,
                format!("cannot forward {path_and_query}"),
            );
        };
        let mut up = Request::new(Full::new(body.clone()));
        *up.method_mut() = parts.method.clone();
        *up.uri_mut() = uri;
        *up.headers_mut() = parts.headers.clone();
        match tokio::time::timeout(UPSTREAM_TIMEOUT, plane.client.request(up)).await {
            Ok(Ok(resp)) => {
                let (mut rp, rb) = resp.into_parts();
                strip_hop_by_hop(&mut rp.headers);
                return Response::from_parts(rp, rb.boxed());
            }
            // Not accepted: nothing was sent, the next endpoint gets it.
            Ok(Err(e)) if e.is_connect() => {
                tracing::debug!(service = %backend.service, endpoint = %t, error = %e, "gateway: endpoint refused; trying the next")
            }
            Ok(Err(e)) => {
                return answer(
                    StatusCode::BAD_GATEWAY,
                    format!("upstream {t} of {}: {e}", backend.service),
                );
            }
            Err(_) => {
                return answer(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!(
                        "upstream {t} of {} did not answer within {}s",
                        backend.service,
                        UPSTREAM_TIMEOUT.as_secs()
                    ),
                );
            }
        }
    }
    answer(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "no healthy upstream: no endpoint of {} accepted a connection",
            backend.service
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::sim::proxy::forward::Targets;
    use k8s_openapi::api::core::v1::ServicePort;
    use std::collections::BTreeMap;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A tiny HTTP/1.1 server on `ip:port` answering every request with `tag` (keep-alive).
    async fn upstream(ip: Ipv4Addr, tag: &'static str) -> u16 {
        let l = TcpListener::bind((ip, 0)).await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((c, _)) = l.accept().await {
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| async move {
                        let seen = format!(
                            "{tag} {} {}",
                            req.uri(),
                            req.headers()
                                .get("x-forwarded-for")
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or("")
                        );
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(seen))))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(c), svc)
                        .await;
                });
            }
        });
        port
    }

    async fn get(addr: SocketAddrV4, path: &str) -> (u16, String) {
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(format!("GET {path} HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).await.unwrap();
        let status = out
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, out.rsplit("\r\n\r\n").next().unwrap_or("").to_owned())
    }

    /// Weights split the requests; a weight of 0 gets none; a backend with no ready endpoint gets a
    /// 503; a refusing endpoint's requests go to the next one; no route is a 404.
    #[tokio::test]
    async fn routes_by_weight_to_ready_endpoints() {
        let a = upstream(Ipv4Addr::new(127, 0, 1, 1), "a").await;
        let b = upstream(Ipv4Addr::new(127, 0, 1, 2), "b").await;
        let backends: Backends = Arc::default();
        let svc = |port: u16, ips: Vec<Ipv4Addr>| {
            let sp: ServicePort =
                serde_json::from_value(serde_json::json!({"name": "serve", "port": 8000})).unwrap();
            (vec![sp], Targets::from([("serve".to_string(), (port, ips))]))
        };
        {
            let mut w = backends.write().unwrap();
            // a's first endpoint refuses (nothing listens on 127.0.1.9).
            w.insert(
                "ns/a".into(),
                svc(a, vec![Ipv4Addr::new(127, 0, 1, 9), Ipv4Addr::new(127, 0, 1, 1)]),
            );
            w.insert("ns/b".into(), svc(b, vec![Ipv4Addr::new(127, 0, 1, 2)]));
            w.insert("ns/empty".into(), svc(b, vec![]));
        }
        let gw_ip = Ipv4Addr::new(127, 0, 1, 100);
        let probe = std::net::TcpListener::bind((gw_ip, 0)).unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        let route = |weights: [(&str, u32); 2]| {
            let mut ls = routes::listeners(&serde_json::json!({"metadata": {"name": "g", "namespace": "ns"},
                "spec": {"listeners": [{"name": "http", "protocol": "HTTP", "port": port}]}}));
            let refs: Vec<_> = weights
                .iter()
                .map(|(n, w)| serde_json::json!({"name": n, "port": 8000, "weight": w}))
                .collect();
            routes::attach(
                &serde_json::json!({"metadata": {"name": "r", "namespace": "ns"}, "spec": {"parentRefs": [{"name": "g"}],
                "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/app"}}], "backendRefs": refs}]}}),
                &mut ls,
            );
            ls
        };
        let tables: Tables = Arc::default();
        tables.write().unwrap().insert(gw_ip, route([("a", 1), ("b", 0)]));
        let plane = DataPlane::new(tables.clone(), backends.clone());
        let addr = SocketAddrV4::new(gw_ip, port);
        let task = plane.listen(addr).unwrap();
        for _ in 0..6 {
            let (status, body) = get(addr, "/app/x?q=1").await;
            assert_eq!(status, 200, "{body}");
            assert!(body.starts_with("a /app/x?q=1 127.0.0.1"), "{body}");
        }
        tables.write().unwrap().insert(gw_ip, route([("a", 1), ("b", 1)]));
        let mut seen = BTreeMap::new();
        for _ in 0..60 {
            let (status, body) = get(addr, "/app").await;
            assert_eq!(status, 200);
            *seen.entry(body[..1].to_owned()).or_insert(0) += 1;
        }
        assert!(
            seen.get("a").is_some_and(|n| *n > 10) && seen.get("b").is_some_and(|n| *n > 10),
            "{seen:?}"
        );
        tables
            .write()
            .unwrap()
            .insert(gw_ip, route([("empty", 1), ("b", 0)]));
        assert_eq!(get(addr, "/app").await.0, 503);
        tables
            .write()
            .unwrap()
            .insert(gw_ip, route([("missing", 1), ("b", 0)]));
        assert_eq!(get(addr, "/app").await.0, 500);
        tables.write().unwrap().insert(gw_ip, route([("a", 0), ("b", 0)]));
        assert_eq!(get(addr, "/app").await.0, 500);
        assert_eq!(get(addr, "/other").await.0, 404);
        task.abort();
    }
}
