//! The `services/proxy` subresource (`/api/v1/namespaces/NS/services/[scheme:]NAME[:PORT]/proxy/...`),
//! what KubeRay's `--use-kubernetes-proxy` and `kubectl get --raw` use to reach a Service from outside
//! the cluster network. As kube-apiserver does (`pkg/registry/core/service/storage` `ResourceLocation`):
//! PORT is a Service port's name or number (none: the only port), resolved to that port's name,
//! then to a ready endpoint of the Service's EndpointSlices with a port of that name; the request
//! goes to the endpoint's address and port, the answer comes back as it is.
//!
//! Where the request goes from there is the pod network's business: a [`PodNetwork`] registered
//! with the server (the simulated Ray dashboards of simulated heads) answers for pods it stands
//! for; any other pod is dialled over HTTP at its address (the process runtime's pods are routed
//! from the host).

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use serde_json::Value;

use super::error::ApiError;
use super::registry::Registry;
use super::selector::LabelSelector;
use super::store::{ListOptions, Store};

/// A proxied request: method, the path after `/proxy` (always starting with `/`) with its query,
/// the headers that pass through, and the body.
#[derive(Clone, Debug)]
pub struct ProxyRequest {
    pub method: http::Method,
    pub path_and_query: String,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

/// What the pod answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyResponse {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Bytes,
}

/// The endpoint chosen for a proxied request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyTarget {
    pub namespace: String,
    /// The pod behind the endpoint (`targetRef`), when the slice names one.
    pub pod: Option<String>,
    pub ip: String,
    pub port: u16,
}

/// Part of the pod network that is not reachable over the host's routes (simulated pods).
pub trait PodNetwork: Send + Sync {
    /// The answer of the pod at `target`, or `None` when this network does not have it. An `Err`
    /// is a failed connection, in the words the server reports it with.
    fn forward(
        &self,
        target: &ProxyTarget,
        req: &ProxyRequest,
    ) -> Option<BoxFuture<'static, Result<ProxyResponse, String>>>;
}

/// The networks registered with a server (none by default: every pod is dialled at its address).
#[derive(Default)]
pub struct PodNetworks {
    networks: RwLock<Vec<Arc<dyn PodNetwork>>>,
}

impl PodNetworks {
    pub fn register(&self, network: Arc<dyn PodNetwork>) {
        self.networks
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(network);
    }

    /// Sends `req` to `target`: a registered network that has the pod, else HTTP to its address.
    pub async fn forward(&self, target: &ProxyTarget, req: ProxyRequest) -> Result<ProxyResponse, String> {
        let networks = self
            .networks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(answer) = networks.iter().find_map(|n| n.forward(target, &req)) {
            return answer.await;
        }
        dial(target, req).await
    }
}

/// How long a dialled endpoint has to answer (kube-apiserver's proxy has no shorter one; the
/// dashboard clients time out first).
const DIAL_TIMEOUT: Duration = Duration::from_secs(30);
/// Larger answers are cut off with an error rather than held in memory.
const MAX_ANSWER: usize = 16 * 1024 * 1024;

async fn dial(target: &ProxyTarget, req: ProxyRequest) -> Result<ProxyResponse, String> {
    use http_body_util::{BodyExt, Full, Limited};
    let addr = format!("{}:{}", target.ip, target.port);
    let dial_error = |e: &dyn std::fmt::Display| format!("dial tcp {addr}: {e}");
    let uri: http::Uri = format!("http://{addr}{}", req.path_and_query)
        .parse()
        .map_err(|e| dial_error(&e))?;
    let mut builder = http::Request::builder().method(req.method).uri(uri);
    for (k, v) in &req.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    let request = builder.body(Full::new(req.body)).map_err(|e| dial_error(&e))?;
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_connect_timeout(Some(Duration::from_secs(5)));
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, Full<Bytes>>(connector);
    let exchange = async {
        let response = client
            .request(request)
            .await
            .map_err(|e| dial_error(&error_chain(&e)))?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let body = Limited::new(response.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| format!("reading the answer of {addr}: {e}"))?
            .to_bytes();
        Ok(ProxyResponse {
            status,
            content_type,
            body,
        })
    };
    tokio::time::timeout(DIAL_TIMEOUT, exchange)
        .await
        .unwrap_or_else(|_| Err(dial_error(&"i/o timeout")))
}

/// "connect: connection refused" rather than hyper's bare "client error (Connect)".
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.join(": ")
}

/// `[scheme:]name[:port]` of the path, as kube-apiserver splits it.
pub fn split_name(id: &str) -> Result<(Option<&str>, &str, &str), ApiError> {
    let parts: Vec<&str> = id.split(':').collect();
    let (scheme, name, port) = match parts.as_slice() {
        [name] => (None, *name, ""),
        [name, port] => (None, *name, *port),
        [scheme, name, port] => (Some(*scheme), *name, *port),
        _ => return Err(ApiError::bad_request(format!("invalid service request {id:?}"))),
    };
    if let Some(s) = scheme.filter(|s| !s.is_empty() && *s != "http") {
        // Only plain HTTP reaches the pods here; a real server would speak TLS to them.
        return Err(ApiError::bad_request(format!(
            "scheme {s:?} is not supported by this server's service proxy (only http)"
        )));
    }
    if name.is_empty() {
        return Err(ApiError::bad_request(format!("invalid service request {id:?}")));
    }
    Ok((scheme, name, port))
}

/// The endpoint a request to Service `ns/name` on `port` (a port's name or number, or empty) goes to.
pub fn resolve(
    store: &Store,
    registry: &Registry,
    ns: &str,
    name: &str,
    port: &str,
) -> Result<ProxyTarget, ApiError> {
    let services = registry
        .find("", "v1", "services")
        .ok_or_else(|| ApiError::internal("services are not served"))?;
    let svc = store.get(&services, Some(ns), name)?;
    let ports: Vec<&Value> = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let port_name = |p: &Value| p.get("name").and_then(Value::as_str).unwrap_or("").to_string();
    let unavailable = || {
        ApiError::new(
            503,
            "ServiceUnavailable",
            format!("no endpoints available for service \"{name}\""),
        )
    };
    let wanted: String = if port.is_empty() {
        match ports.as_slice() {
            [only] => port_name(only),
            _ => String::new(),
        }
    } else if let Ok(number) = port.parse::<i64>() {
        ports
            .iter()
            .find(|p| p.get("port").and_then(Value::as_i64) == Some(number))
            .map(|p| port_name(p))
            .ok_or_else(unavailable)?
    } else {
        port.to_string()
    };
    let slices_info = registry
        .find("discovery.k8s.io", "v1", "endpointslices")
        .ok_or_else(|| ApiError::internal("endpointslices are not served"))?;
    let labels = LabelSelector::parse(&format!("kubernetes.io/service-name={name}"))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let slices = store.list(
        &slices_info,
        Some(ns),
        &ListOptions {
            labels,
            ..ListOptions::default()
        },
    )?;
    for slice in &slices.items {
        let Some(slice_port) = slice
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| (port.is_empty() && wanted.is_empty()) || port_name(p) == wanted)
            .and_then(|p| p.get("port").and_then(Value::as_u64))
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        let endpoints = slice
            .get("endpoints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        // `ready` unset counts as ready (discovery.k8s.io/v1).
        let ready = |e: &&Value| e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false);
        if let Some(e) = endpoints
            .filter(ready)
            .find(|e| e.pointer("/addresses/0").and_then(Value::as_str).is_some())
        {
            let ip = e
                .pointer("/addresses/0")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let pod = e
                .pointer("/targetRef")
                .filter(|r| r.get("kind").and_then(Value::as_str) == Some("Pod"))
                .and_then(|r| r.get("name"))
                .and_then(Value::as_str)
                .map(String::from);
            return Ok(ProxyTarget {
                namespace: ns.to_string(),
                pod,
                ip,
                port: slice_port,
            });
        }
    }
    Err(unavailable())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::EmbeddedServer;
    use crate::embedded::admission::AllowAll;
    use serde_json::json;

    /// A head Service with a ready and a not-ready pod, and a pod network answering for the ready one.
    fn server() -> Arc<EmbeddedServer> {
        let srv = EmbeddedServer::new(&[], Arc::new(AllowAll));
        let put = |plural: &str, group: &str, v: Value| {
            let info = srv
                .registry
                .all()
                .iter()
                .find(|r| r.plural == plural && r.group == group)
                .cloned()
                .unwrap();
            srv.store.create(&info, Some("default"), v, false).unwrap();
        };
        put(
            "services",
            "",
            json!({"metadata": {"name": "head"}, "spec": {"ports": [{"name": "dashboard", "port": 8265}, {"name": "serve", "port": 8000}]}}),
        );
        put(
            "endpointslices",
            "discovery.k8s.io",
            json!({
                "metadata": {"name": "head-1", "labels": {"kubernetes.io/service-name": "head"}}, "addressType": "IPv4",
                "ports": [{"name": "dashboard", "port": 8265}, {"name": "serve", "port": 8000}],
                "endpoints": [
                    {"addresses": ["10.244.0.9"], "conditions": {"ready": false}, "targetRef": {"kind": "Pod", "name": "old"}},
                    {"addresses": ["10.244.0.7"], "conditions": {"ready": true}, "targetRef": {"kind": "Pod", "name": "head-pod"}}
                ]
            }),
        );
        srv
    }

    struct Echo;
    impl PodNetwork for Echo {
        fn forward(
            &self,
            target: &ProxyTarget,
            req: &ProxyRequest,
        ) -> Option<BoxFuture<'static, Result<ProxyResponse, String>>> {
            let body = format!(
                "{} {}:{} {} {}",
                req.method,
                target.ip,
                target.port,
                target.pod.clone().unwrap_or_default(),
                req.path_and_query
            );
            Some(Box::pin(async move {
                Ok(ProxyResponse {
                    status: 200,
                    content_type: Some("text/plain".into()),
                    body: body.into(),
                })
            }))
        }
    }

    /// kube-apiserver's service proxy (`pkg/registry/core/service/storage/storage.go` ResourceLocation):
    /// the port by name or number, a ready endpoint, 503 without one, 404 without the Service.
    #[test]
    fn a_service_resolves_to_a_ready_endpoint_by_port_name_or_number() {
        let srv = server();
        let at = |name: &str, port: &str| resolve(&srv.store, &srv.registry, "default", name, port);
        let want = ProxyTarget {
            namespace: "default".into(),
            pod: Some("head-pod".into()),
            ip: "10.244.0.7".into(),
            port: 8265,
        };
        assert_eq!(at("head", "dashboard").unwrap(), want);
        assert_eq!(at("head", "8265").unwrap(), want);
        assert_eq!(at("head", "8000").unwrap().port, 8000);
        let e = at("head", "9999").unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (503, "no endpoints available for service \"head\"")
        );
        assert_eq!(at("nope", "dashboard").unwrap_err().code, 404);
    }

    /// Through the API: RBAC `services/proxy` with the method's verb (GET `get`, PUT `update`), the
    /// path after `/proxy` and the query passed on, the pod's answer returned as it is.
    #[tokio::test]
    async fn the_subresource_checks_rbac_by_method_and_forwards() {
        use k8s_openapi::api::rbac::v1::PolicyRule;
        let srv = server();
        srv.pod_networks.register(Arc::new(Echo));
        let rule = PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["services/proxy".into()]),
            verbs: vec!["get".into()],
            ..Default::default()
        };
        let authz = Arc::new(crate::embedded::rbac::Authorizer::from_rules(
            "system:serviceaccount:ns:bot",
            vec![(None, rule)],
        ));
        let client = srv.client_as(authz);
        let path = "/api/v1/namespaces/default/services/head:dashboard/proxy/api/serve/applications/?api_type=declarative";
        let got = client
            .request_text(http::Request::get(path).body(Vec::new()).unwrap())
            .await
            .unwrap();
        assert_eq!(
            got,
            "GET 10.244.0.7:8265 head-pod /api/serve/applications/?api_type=declarative"
        );
        let put = http::Request::put(path).body(b"{}".to_vec()).unwrap();
        let kube::Error::Api(s) = client.request_text(put).await.unwrap_err() else {
            panic!("an API error")
        };
        assert_eq!(s.code, 403);
        assert!(
            s.message.contains("cannot update resource \"services/proxy\""),
            "{}",
            s.message
        );
    }

    #[test]
    fn names_split_as_kube_apiserver_splits_them() {
        assert_eq!(split_name("svc").unwrap(), (None, "svc", ""));
        assert_eq!(split_name("svc:dashboard").unwrap(), (None, "svc", "dashboard"));
        assert_eq!(
            split_name("http:svc:8265").unwrap(),
            (Some("http"), "svc", "8265")
        );
        assert!(
            split_name("https:svc:443")
                .unwrap_err()
                .message
                .contains("only http")
        );
        assert!(split_name("a:b:c:d").is_err());
        assert!(split_name(":80").is_err());
    }
}
