//! The HTTP side of `services/{name}/proxy` (`../proxy.rs` resolves and forwards): path parsing and
//! RBAC as kube-apiserver checks a connect subresource (verb from the method: GET `get`, POST
//! `create`, PUT `update`, PATCH `patch`, DELETE `delete`; resource `services/proxy`; name the
//! path's `[scheme:]name[:port]`).

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, Method, header};

use super::super::error::ApiError;
use super::super::proxy::{self, ProxyRequest};
use super::super::{EmbeddedServer, rbac, review};

/// A request for `/api/v1/namespaces/{ns}/services/{id}/proxy{rest}`.
pub(super) struct ServiceProxy {
    namespace: String,
    id: String,
    /// What follows `/proxy`, raw (not decoded: it is the pod's to read), at least `/`.
    rest: String,
}

/// The request, when `path` (raw, as received) is a service proxy path.
pub(super) fn parse(path: &str) -> Option<ServiceProxy> {
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .ok()
            .map(|c| c.into_owned())
    };
    let after_ns = path.strip_prefix("/api/v1/namespaces/")?;
    let (ns, after) = after_ns.split_once('/')?;
    let after_svc = after.strip_prefix("services/")?;
    let (id, after) = after_svc.split_once('/')?;
    let rest = after.strip_prefix("proxy")?;
    if !rest.is_empty() && !rest.starts_with('/') {
        return None;
    }
    let rest = if rest.is_empty() {
        "/".to_string()
    } else {
        rest.to_string()
    };
    Some(ServiceProxy {
        namespace: decode(ns)?,
        id: decode(id)?,
        rest,
    })
}

/// Headers a proxied request keeps: not the caller's credentials for this server, nor hop-by-hop ones.
fn passes(name: &str) -> bool {
    !matches!(
        name,
        "authorization"
            | "host"
            | "connection"
            | "content-length"
            | "transfer-encoding"
            | "upgrade"
            | "te"
            | "keep-alive"
    ) && !name.starts_with("impersonate-")
}

fn verb(method: &Method) -> Option<&'static str> {
    Some(match *method {
        Method::GET | Method::HEAD | Method::OPTIONS => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => return None,
    })
}

pub(super) async fn serve(
    srv: &EmbeddedServer,
    parts: &http::request::Parts,
    body: Bytes,
    p: ServiceProxy,
) -> Result<Response, ApiError> {
    let Some(verb) = verb(&parts.method) else {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource: {}",
            parts.method
        )));
    };
    let (_, name, port) = proxy::split_name(&p.id)?;
    if let Some(authz) = review::principal(
        &srv.store,
        &srv.registry,
        &parts.headers,
        parts.extensions.get::<rbac::Principal>(),
    )? {
        let a = rbac::Access {
            group: String::new(),
            resource: "services/proxy".into(),
            verb: verb.into(),
            name: Some(p.id.clone()),
            namespace: Some(p.namespace.clone()),
        };
        if !authz.allows(&a) {
            return Err(super::denied(authz.forbidden(&a)));
        }
    }
    let target = proxy::resolve(&srv.store, &srv.registry, &p.namespace, name, port)?;
    let path_and_query = match parts.uri.query() {
        Some(q) => format!("{}?{q}", p.rest),
        None => p.rest,
    };
    let headers = parts
        .headers
        .iter()
        .filter(|(k, _)| passes(k.as_str()))
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    let req = ProxyRequest {
        method: parts.method.clone(),
        path_and_query,
        headers,
        body,
    };
    let answer = srv.pod_networks.forward(&target, req).await.map_err(|e| {
        ApiError::new(
            503,
            "ServiceUnavailable",
            format!("error trying to reach service: {e}"),
        )
    })?;
    let mut r = Response::new(Body::from(answer.body));
    *r.status_mut() = http::StatusCode::from_u16(answer.status).unwrap_or(http::StatusCode::BAD_GATEWAY);
    if let Some(ct) = answer.content_type.and_then(|ct| HeaderValue::from_str(&ct).ok()) {
        r.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let p = parse("/api/v1/namespaces/team/services/rc-head-svc:dashboard/proxy/api/serve/applications/")
            .unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.id.as_str(), p.rest.as_str()),
            ("team", "rc-head-svc:dashboard", "/api/serve/applications/")
        );
        assert_eq!(
            parse("/api/v1/namespaces/team/services/s:8265/proxy")
                .unwrap()
                .rest,
            "/"
        );
        assert!(parse("/api/v1/namespaces/team/services/s/proxyx").is_none());
        assert!(parse("/api/v1/namespaces/team/services/s").is_none());
        assert!(parse("/api/v1/namespaces/team/pods/p/proxy/").is_none());
        assert_eq!(verb(&Method::PUT), Some("update"));
        assert!(!passes("authorization") && !passes("impersonate-user") && passes("x-ray-authorization"));
    }
}
