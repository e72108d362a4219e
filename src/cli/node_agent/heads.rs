//! The simulated Ray heads of `quotagate node-agent`, reachable by an in-cluster manager: each head pod
//! the agent simulates gets an address of the process runtime's pod network (`lend_address`, on its
//! bridge), and there the agent serves the Ray dashboard simulator on the head's dashboard port (Ray's
//! Serve REST API: `PUT`, `GET`, `DELETE /api/serve/applications/`) and the Serve proxy's health route
//! on its serve port (`GET /-/healthz`). The real EndpointSlice controller lists that address behind
//! the head Service, and the agent's Service proxy gives the Service a name and an address in the
//! pods' hosts files, so the manager's dashboard client dials `http://<head svc>.<ns>.svc.cluster.
//! local:8265` as it would on any cluster and no `--simulated-ray-dashboards` is needed. Each head is
//! its own simulated Serve instance, fresh when the pod starts (as a head without GCS fault tolerance).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::embedded::sim::node::PodAddresses;
use crate::embedded::sim::process::ProcessRuntime;
use crate::rayservice::dashboard::sim::RaySim;
use crate::rayservice::dashboard::{
    DEFAULT_DASHBOARD_PORT, DashboardEndpoint, DashboardError, RayDashboard, ServeConfig,
};

/// KubeRay's default Serve port (the head's `serve` container port).
const DEFAULT_SERVE_PORT: u16 = 8000;
/// A Serve config PUT larger than this is refused (Ray's own limit is far above any real config).
const MAX_BODY_BYTES: usize = 8 << 20;
/// KubeRay's label telling a head pod from a worker.
const NODE_TYPE_LABEL: &str = "ray.io/node-type";

/// One head being served: its address and its listeners.
struct Served {
    ip: Ipv4Addr,
    /// The simulator's key for this head.
    key: String,
    tasks: Vec<JoinHandle<()>>,
}

pub(super) struct Heads {
    rt: Arc<ProcessRuntime>,
    sim: Arc<RaySim>,
    /// By pod UID.
    served: Mutex<HashMap<String, Served>>,
}

impl std::fmt::Debug for Heads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Heads")
            .field("served", &served.len())
            .finish_non_exhaustive()
    }
}

/// Whether `pod` is a Ray head (KubeRay's `ray.io/node-type: head`).
fn is_head(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NODE_TYPE_LABEL))
        .is_some_and(|t| t == "head")
}

/// The head's container port named `name`, else `default` (KubeRay names them `dashboard`, `serve`).
fn port(pod: &Pod, name: &str, default: u16) -> u16 {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| p.name.as_deref() == Some(name))
        .and_then(|p| u16::try_from(p.container_port).ok())
        .unwrap_or(default)
}

impl Heads {
    pub(super) fn new(rt: Arc<ProcessRuntime>, sim: Arc<RaySim>) -> Arc<Heads> {
        Arc::new(Heads {
            rt,
            sim,
            served: Mutex::new(HashMap::new()),
        })
    }

    /// Lends `pod` an address and serves its dashboard and Serve proxy there.
    fn serve(&self, pod: &Pod) -> Option<Served> {
        let ip = self.rt.lend_address()?;
        let dashboard = port(pod, "dashboard", DEFAULT_DASHBOARD_PORT);
        let serve = port(pod, "serve", DEFAULT_SERVE_PORT);
        // The simulator's key for this head: its own address, fresh for each head pod.
        let key = format!("http://{ip}:{dashboard}");
        self.sim.start_cluster(&key);
        let mut tasks = Vec::new();
        for (p, role) in [(dashboard, Role::Dashboard), (serve, Role::Proxy)] {
            let addr = SocketAddr::from((ip, p));
            let listener = match std::net::TcpListener::bind(addr)
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .and_then(TcpListener::from_std)
            {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(%addr, error = %e, "node agent: a simulated Ray head's port could not be bound");
                    continue;
                }
            };
            let handler = Handler {
                sim: self.sim.clone(),
                key: key.clone(),
                proxy_url: format!("http://{ip}:{serve}"),
                role,
            };
            tasks.push(tokio::spawn(accept(listener, Arc::new(handler))));
        }
        tracing::info!(pod = %format!("{}/{}", pod.metadata.namespace.as_deref().unwrap_or(""), pod.metadata.name.as_deref().unwrap_or("")),
            %ip, dashboard, serve, "node agent: a simulated Ray head's dashboard is served at its pod address");
        Some(Served { ip, key, tasks })
    }
}

impl PodAddresses for Heads {
    fn address(&self, pod: &Pod) -> Option<String> {
        if !is_head(pod) {
            return None;
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = served.get(&uid) {
            return Some(s.ip.to_string());
        }
        let s = self.serve(pod)?;
        let ip = s.ip.to_string();
        served.insert(uid, s);
        Some(ip)
    }

    fn release(&self, uid: &str) {
        let gone = self
            .served
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
        if let Some(s) = gone {
            for t in &s.tasks {
                t.abort();
            }
            self.sim.stop_cluster(&s.key);
            self.rt.return_address(s.ip);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Dashboard,
    Proxy,
}

struct Handler {
    sim: Arc<RaySim>,
    key: String,
    proxy_url: String,
    role: Role,
}

async fn accept(listener: TcpListener, handler: Arc<Handler>) {
    loop {
        let Ok((conn, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let handler = handler.clone();
                async move { Ok::<_, Infallible>(handler.handle(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(conn), svc)
                .await;
        });
    }
}

fn answer(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r
}

/// A simulator error as the HTTP answer a real head gives for it.
fn error_answer(e: &DashboardError) -> Response<Full<Bytes>> {
    match e {
        DashboardError::Rejected { message } => answer(StatusCode::BAD_REQUEST, message.clone()),
        DashboardError::InvalidConfig(m) => answer(StatusCode::BAD_REQUEST, m.clone()),
        DashboardError::Unauthorized { status, body } | DashboardError::Client { status, body } => answer(
            StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST),
            body.clone(),
        ),
        other => answer(StatusCode::SERVICE_UNAVAILABLE, other.to_string()),
    }
}

impl Handler {
    async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = req.into_parts();
        let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => return answer(StatusCode::BAD_REQUEST, e.to_string()),
        };
        self.respond(&parts.method, parts.uri.path(), &body).await
    }

    /// The answer to one request, as a Ray head's dashboard or Serve proxy gives it.
    async fn respond(&self, method: &Method, path: &str, body: &[u8]) -> Response<Full<Bytes>> {
        let ep = DashboardEndpoint::new(self.key.clone());
        if self.role == Role::Proxy {
            // The Serve proxy: healthy (and serving) once an application runs.
            return match self.sim.proxy_healthy(&ep, &self.proxy_url).await {
                Ok(true) => answer(StatusCode::OK, "success"),
                Ok(false) => answer(StatusCode::SERVICE_UNAVAILABLE, "no Serve application is running"),
                Err(e) => error_answer(&e),
            };
        }
        if path.trim_end_matches('/') != "/api/serve/applications" {
            return answer(StatusCode::NOT_FOUND, "not found");
        }
        match *method {
            Method::GET => match self.sim.serve_details(&ep).await {
                Ok(d) => answer(StatusCode::OK, serde_json::to_vec(&d).unwrap_or_default()),
                Err(e) => error_answer(&e),
            },
            Method::DELETE => match self.sim.delete_applications(&ep).await {
                Ok(()) => answer(StatusCode::OK, "{}"),
                Err(e) => error_answer(&e),
            },
            Method::PUT => {
                let config = serde_json::from_slice(body)
                    .map_err(|e| DashboardError::InvalidConfig(e.to_string()))
                    .and_then(ServeConfig::from_json);
                // The body carries its own `target_capacity`, if any.
                match config {
                    Ok(c) => match self.sim.deploy(&ep, &c, None).await {
                        Ok(()) => answer(StatusCode::OK, "{}"),
                        Err(e) => error_answer(&e),
                    },
                    Err(e) => error_answer(&e),
                }
            }
            _ => answer(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rayservice::dashboard::http::decode_serve_details;
    use crate::rayservice::dashboard::sim::SimOptions;
    use crate::rayservice::dashboard::{AppStatus, DashboardError};
    use std::time::Duration;

    async fn body(r: Response<Full<Bytes>>) -> (StatusCode, Bytes) {
        let status = r.status();
        (status, r.into_body().collect().await.unwrap().to_bytes())
    }

    /// What the manager's HTTP dashboard client sends, answered as a real head would (KubeRay's
    /// dashboard client: PUT then GET `/api/serve/applications/`, the proxy's `/-/healthz`).
    #[tokio::test(start_paused = true)]
    async fn a_simulated_head_answers_the_dashboard_client() {
        let sim = Arc::new(RaySim::new(SimOptions::default()));
        let key = "http://10.244.128.5:8265".to_string();
        sim.start_cluster(&key);
        let handler = |role| Handler {
            sim: sim.clone(),
            key: key.clone(),
            proxy_url: "http://10.244.128.5:8000".into(),
            role,
        };
        let (dash, proxy) = (handler(Role::Dashboard), handler(Role::Proxy));
        let (status, _) = body(proxy.respond(&Method::GET, "/-/healthz", b"").await).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "no app yet");
        let config = br#"{"applications": [{"name": "fruit_app", "import_path": "fruit.deployment_graph",
            "route_prefix": "/fruit", "deployments": [{"name": "FruitMarket", "num_replicas": 1}]}]}"#;
        let (status, _) = body(
            dash.respond(&Method::PUT, "/api/serve/applications/", config)
                .await,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        tokio::time::advance(Duration::from_secs(10)).await;
        let (status, got) = body(dash.respond(&Method::GET, "/api/serve/applications/", b"").await).await;
        assert_eq!(status, StatusCode::OK);
        let details = decode_serve_details(&got).expect("the client decodes the answer");
        assert_eq!(details.applications["fruit_app"].status, AppStatus::Running);
        let (status, _) = body(proxy.respond(&Method::GET, "/-/healthz", b"").await).await;
        assert_eq!(status, StatusCode::OK);
        // Ray's schema check: a 400 the client turns into `Rejected`.
        let (status, msg) = body(
            dash.respond(
                &Method::PUT,
                "/api/serve/applications/",
                br#"{"applications": 3}"#,
            )
            .await,
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(matches!(
            DashboardError::from_status(400, &msg),
            DashboardError::Rejected { .. }
        ));
        let (status, _) = body(dash.respond(&Method::GET, "/api/jobs/", b"").await).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}
