//! Dashboard calls through the API server's service proxy, KubeRay's `--use-kubernetes-proxy`
//! (`ray-operator/controllers/ray/utils/dashboardclient`, `InitClient`): the dashboard of a cluster
//! whose head Service is `svc` in `ns` is `<api server>/api/v1/namespaces/<ns>/services/<svc>:dashboard/proxy`,
//! reached with the manager's own API credentials. Needs `services/proxy` in the manager's Role
//! (`config/rbac/kubernetes_proxy_role.yaml`).
//!
//! KubeRay means to probe the head's Serve proxy through `pods/<pod>:<port>/proxy` in this mode,
//! but its `SetHostIp` then overwrites that URL with the pod's address, so the probe fails outside
//! the cluster network. Here the probe goes through the head Service on the Serve port instead,
//! which reaches the same pod.

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Limited};

use super::{DEFAULT_DASHBOARD_PORT, DashboardEndpoint, DashboardError};

/// `(service, namespace, port)` of an in-cluster dashboard URL `http://<svc>.<ns>.svc.<domain>:<port>`.
fn service_of(base_url: &str) -> Result<(&str, &str, u16), DashboardError> {
    let invalid = || {
        DashboardError::InvalidEndpoint(format!(
            "{base_url:?} is not a Service's cluster address (http://<service>.<namespace>.svc.<domain>:<port>), which the API server proxy needs"
        ))
    };
    let host_port = base_url.strip_prefix("http://").ok_or_else(invalid)?;
    let (host, port) = host_port.rsplit_once(':').ok_or_else(invalid)?;
    let port: u16 = port.parse().map_err(|_| invalid())?;
    let mut labels = host.split('.');
    let (Some(svc), Some(ns), Some("svc")) = (labels.next(), labels.next(), labels.next()) else {
        return Err(invalid());
    };
    if svc.is_empty() || ns.is_empty() {
        return Err(invalid());
    }
    Ok((svc, ns, port))
}

/// The API server path of `path_and_query` on the dashboard at `base_url`: the port by name when it
/// is the dashboard's (KubeRay's `:dashboard`), else by number.
pub fn proxy_path(base_url: &str, path_and_query: &str) -> Result<String, DashboardError> {
    let (svc, ns, port) = service_of(base_url)?;
    let port = if port == DEFAULT_DASHBOARD_PORT {
        "dashboard".to_string()
    } else {
        port.to_string()
    };
    Ok(format!(
        "/api/v1/namespaces/{ns}/services/{svc}:{port}/proxy{path_and_query}"
    ))
}

/// The head Service (from the dashboard's URL) on the port of `proxy_url` (`http://<pod IP>:<port>`).
pub fn serve_proxy_endpoint(
    dashboard_url: &str,
    proxy_url: &str,
) -> Result<DashboardEndpoint, DashboardError> {
    let (svc, ns, _) = service_of(dashboard_url)?;
    let port = proxy_url
        .rsplit_once(':')
        .and_then(|(_, p)| p.trim_end_matches('/').parse::<u16>().ok())
        .ok_or_else(|| DashboardError::InvalidEndpoint(format!("{proxy_url:?} has no port")))?;
    let domain_and_port = dashboard_url
        .split_once(".svc.")
        .map(|(_, rest)| rest)
        .unwrap_or("cluster.local:0");
    let domain = domain_and_port
        .rsplit_once(':')
        .map(|(d, _)| d)
        .unwrap_or(domain_and_port);
    Ok(DashboardEndpoint::new(format!(
        "http://{svc}.{ns}.svc.{domain}:{port}"
    )))
}

/// Limits of one call (`HttpDashboardOptions`'s).
pub struct Limits {
    pub request_timeout: std::time::Duration,
    pub max_body_bytes: usize,
}

/// One call through the API server, with `headers` (the Ray token's) added; the API server's own
/// refusals (no endpoint ready, the head not answering) are an unreachable head, as a refused
/// connection is without the proxy.
pub async fn send(
    api: &kube::Client,
    options: Limits,
    method: Method,
    path: String,
    headers: &[(&str, String)],
    json_body: Option<Vec<u8>>,
) -> Result<(StatusCode, Bytes), DashboardError> {
    let mut builder = Request::builder().method(method).uri(path.as_str());
    for (name, value) in headers {
        builder = builder.header(*name, value.as_str());
    }
    if json_body.is_some() {
        builder = builder.header(header::CONTENT_TYPE, "application/json");
    }
    let request = builder
        .body(kube::client::Body::from(json_body.unwrap_or_default()))
        .map_err(|_| {
            DashboardError::InvalidEndpoint(
                "auth token contains characters not allowed in an HTTP header".into(),
            )
        })?;
    let exchange = async {
        let response = api.send(request).await.map_err(|e| DashboardError::Unreachable {
            url: path.clone(),
            reason: e.to_string(),
        })?;
        let status = response.status();
        let body = Limited::new(response.into_body(), options.max_body_bytes)
            .collect()
            .await
            .map_err(|e| DashboardError::Transport {
                url: path.clone(),
                reason: e.to_string(),
            })?
            .to_bytes();
        if status == StatusCode::SERVICE_UNAVAILABLE
            && let Some(reason) = api_server_refusal(&body)
        {
            return Err(DashboardError::Unreachable {
                url: path.clone(),
                reason,
            });
        }
        Ok((status, body))
    };
    match tokio::time::timeout(options.request_timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(DashboardError::Timeout {
            url: path,
            after: options.request_timeout,
        }),
    }
}

/// The message of a `Status` the API server answered itself.
fn api_server_refusal(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    (v.get("kind")?.as_str()? == "Status").then(|| {
        v.get("message")
            .and_then(|m| m.as_str())
            .unwrap_or_default()
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_as_kuberay_builds_them() {
        // KubeRay `dashboard_httpclient.go` InitClient: ".../services/%s:dashboard/proxy".
        assert_eq!(
            proxy_path(
                "http://rs-abcde-head-svc.team.svc.cluster.local:8265",
                "/api/serve/applications/?api_type=declarative"
            )
            .unwrap(),
            "/api/v1/namespaces/team/services/rs-abcde-head-svc:dashboard/proxy/api/serve/applications/?api_type=declarative"
        );
        assert_eq!(
            proxy_path("http://h.ns.svc.cluster.local:9999", "/x").unwrap(),
            "/api/v1/namespaces/ns/services/h:9999/proxy/x"
        );
        for bad in [
            "http://10.0.0.1:8265",
            "https://h.ns.svc.cluster.local:8265",
            "http://h.ns.svc.cluster.local",
            "http://.ns.svc.x:1",
        ] {
            assert!(
                matches!(proxy_path(bad, "/"), Err(DashboardError::InvalidEndpoint(_))),
                "{bad}"
            );
        }
        let serve =
            serve_proxy_endpoint("http://h.ns.svc.example.org:8265", "http://10.244.0.5:8000").unwrap();
        assert_eq!(serve.base_url, "http://h.ns.svc.example.org:8000");
        assert_eq!(
            api_server_refusal(br#"{"kind":"Status","message":"no endpoints available for service \"h\""}"#)
                .as_deref(),
            Some("no endpoints available for service \"h\"")
        );
        assert_eq!(api_server_refusal(b"upstream busy"), None);
    }
}
