//! How the server reaches one admission webhook: `clientConfig.url`, or `clientConfig.service`
//! resolved to an endpoint the cluster knows (the Service's port, then the ready addresses of its
//! EndpointSlices for that port, as kube-apiserver's endpoint routing does; a process on loopback
//! is reached by a slice listing 127.0.0.1 and its port). HTTPS only, trusting the `caBundle` alone
//! and checking the certificate for `<service>.<namespace>.svc`, within `timeoutSeconds` (default
//! 10, at most 30). Endpoints are tried in order until one accepts the connection, as kube-proxy
//! stops sending to an endpoint that is gone.
//!
//! Errors are the text after `failed calling webhook "<name>": `, worded as kube-apiserver's.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use http_body_util::BodyExt;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;

use super::registry::Registry;
use super::store::{ListOptions, Store};

/// Largest AdmissionReview response read (kube-apiserver reads at most 3 MiB too).
const MAX_RESPONSE: usize = 3 * 1024 * 1024;

struct Target {
    /// The URL as kube-apiserver prints it in errors.
    url: String,
    server_name: String,
    path_and_query: String,
    addrs: Vec<SocketAddr>,
}

fn text<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

/// Sends `review` to `hook` and returns its `response`.
pub async fn call(
    store: &Arc<Store>,
    registry: &Arc<Registry>,
    hook: &Value,
    review: &Value,
) -> Result<Value, String> {
    let timeout = hook
        .get("timeoutSeconds")
        .and_then(Value::as_u64)
        .unwrap_or(10)
        .clamp(1, 30);
    let target = resolve(store, registry, hook, timeout)?;
    let tls = tls_config(hook)?;
    let body = serde_json::to_vec(review).map_err(|e| e.to_string())?;
    let attempt = send(&target, tls, body);
    match tokio::time::timeout(Duration::from_secs(timeout), attempt).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("failed to call webhook: Post \"{}\": {e}", target.url)),
        Err(_) => Err(format!(
            "failed to call webhook: Post \"{}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            target.url
        )),
    }
}

fn resolve(store: &Store, registry: &Registry, hook: &Value, timeout: u64) -> Result<Target, String> {
    let cc = hook.get("clientConfig").cloned().unwrap_or(Value::Null);
    if let Some(url) = cc.get("url").and_then(Value::as_str) {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("invalid webhook url {url:?}: {e}"))?;
        let host = uri
            .host()
            .ok_or_else(|| format!("invalid webhook url {url:?}: no host"))?
            .trim_matches(['[', ']'])
            .to_string();
        let port = uri.port_u16().unwrap_or(443);
        let addrs = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
            .map_err(|e| format!("dial tcp: lookup {host}: {e}"))?
            .collect();
        let pq = uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
        return Ok(Target {
            url: url.to_string(),
            server_name: host,
            path_and_query: pq,
            addrs,
        });
    }
    let (ns, name) = (text(&cc, "/service/namespace"), text(&cc, "/service/name"));
    let port = cc.pointer("/service/port").and_then(Value::as_i64).unwrap_or(443);
    let path = match text(&cc, "/service/path") {
        "" => "/",
        p => p,
    };
    let server_name = format!("{name}.{ns}.svc");
    let url = format!("https://{server_name}:{port}{path}?timeout={timeout}s");
    let path_and_query = format!("{path}?timeout={timeout}s");
    let svc = registry
        .find("", "v1", "services")
        .and_then(|info| store.get(&info, Some(ns), name).ok())
        .ok_or_else(|| format!("failed to call webhook: Post \"{url}\": service \"{name}\" not found"))?;
    let ports = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let svc_port = ports
        .iter()
        .find(|p| p.get("port").and_then(Value::as_i64) == Some(port))
        .ok_or_else(|| {
            format!("failed to call webhook: Post \"{url}\": service \"{name}\" has no port {port}")
        })?;
    let port_name = text(svc_port, "/name");
    let slices = registry
        .find("discovery.k8s.io", "v1", "endpointslices")
        .and_then(|info| {
            let labels =
                super::selector::LabelSelector::parse(&format!("kubernetes.io/service-name={name}")).ok()?;
            store
                .list(
                    &info,
                    Some(ns),
                    &ListOptions {
                        labels,
                        ..ListOptions::default()
                    },
                )
                .ok()
        })
        .map(|l| l.items)
        .unwrap_or_default();
    let mut addrs = Vec::new();
    for slice in &slices {
        let Some(p) = slice
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name)
            .and_then(|p| p.get("port").and_then(Value::as_u64))
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        for ep in slice
            .get("endpoints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if ep.pointer("/conditions/ready").and_then(Value::as_bool) == Some(false) {
                continue;
            }
            for a in ep
                .get("addresses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if let Ok(ip) = a.parse::<std::net::IpAddr>() {
                    addrs.push(SocketAddr::new(ip, p));
                }
            }
        }
    }
    if addrs.is_empty() {
        return Err(format!(
            "failed to call webhook: Post \"{url}\": no endpoints available for service \"{name}\""
        ));
    }
    Ok(Target {
        url,
        server_name,
        path_and_query,
        addrs,
    })
}

fn tls_config(hook: &Value) -> Result<Arc<rustls::ClientConfig>, String> {
    let bundle = text(hook, "/clientConfig/caBundle");
    let pem = base64::engine::general_purpose::STANDARD
        .decode(bundle)
        .map_err(|e| format!("invalid caBundle: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("invalid caBundle: {e}"))?;
        roots.add(cert).map_err(|e| format!("invalid caBundle: {e}"))?;
    }
    if roots.is_empty() {
        // With no trusted root every handshake fails; say so as Go's x509 does.
        return Err(
            "failed to call webhook: x509: certificate signed by unknown authority (the caBundle is empty)"
                .into(),
        );
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

async fn send(target: &Target, tls: Arc<rustls::ClientConfig>, body: Vec<u8>) -> Result<Value, String> {
    let mut last = String::new();
    let mut tcp = None;
    for addr in &target.addrs {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(s) => {
                tcp = Some(s);
                break;
            }
            Err(e) => last = format!("dial tcp {addr}: connect: {}", connect_error(&e)),
        }
    }
    let tcp = tcp.ok_or(last)?;
    let name = ServerName::try_from(target.server_name.clone()).map_err(|e| e.to_string())?;
    let stream = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("tls: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(conn);
    let req = http::Request::post(target.path_and_query.as_str())
        .header(http::header::HOST, target.server_name.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let limited = http_body_util::Limited::new(resp.into_body(), MAX_RESPONSE);
    let bytes = limited
        .collect()
        .await
        .map_err(|e| format!("reading the response: {e}"))?
        .to_bytes();
    driver.abort();
    if !status.is_success() {
        return Err(format!(
            "expected webhook response of 200, got {}",
            status.as_u16()
        ));
    }
    let review: Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("the response is not an AdmissionReview: {e}"))?;
    review
        .get("response")
        .filter(|r| r.is_object())
        .cloned()
        .ok_or_else(|| "webhook response was absent".to_string())
}

fn connect_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        _ => e.to_string(),
    }
}
