//! The simulated Ray heads of `quotagate node-agent`, reachable by an in-cluster manager: each head pod
//! the agent simulates gets an address of the process runtime's pod network (`lend_address`, on its
//! bridge), and there the agent serves the Ray dashboard simulator on the head's dashboard port (Ray's
//! Serve REST API: `PUT`, `GET`, `DELETE /api/serve/applications/`) and the Serve proxy's health route
//! on its serve port (`GET /-/healthz`, and any other path answered as the Serve application would,
//! naming the head, so traffic through a Service or the Gateway data plane shows which cluster served
//! it), and Ray's job submission API on the dashboard port (`/api/jobs/`: submit, read, stop, delete,
//! logs, list; the simulator's jobs, `rayservice::dashboard::sim::jobs`), so a RayJob whose manager runs
//! in the cluster submits and follows its job over HTTP as on any cluster. The real EndpointSlice controller lists that address behind
//! the head Service, and the agent's Service proxy gives the Service a name and an address in the
//! pods' hosts files, so the manager's dashboard client dials `http://<head svc>.<ns>.svc.cluster.
//! local:8265` as it would on any cluster and no `--simulated-ray-dashboards` is needed. Each head is
//! its own simulated Serve instance, fresh when the pod starts (as a head without GCS fault tolerance).
//!
//! A head's address is returned when its pod is gone: by the node agent's own removal of a terminating
//! pod, and, for a pod force-deleted (removed from the API without passing through the agent), by
//! `follow_removals`, which watches pods and releases every served head whose pod was deleted or is
//! missing from a relist.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::embedded::sim::node::PodAddresses;
use crate::embedded::sim::process::ProcessRuntime;
use crate::rayservice::dashboard::jobs::{DeleteResponse, LogsResponse, StopResponse};
use crate::rayservice::dashboard::sim::RaySim;
use crate::rayservice::dashboard::{
    DEFAULT_DASHBOARD_PORT, DashboardEndpoint, DashboardError, JobSubmitRequest, RayDashboard, RayJobsApi,
    ServeConfig,
};

/// KubeRay's default Serve port (the head's `serve` container port).
const DEFAULT_SERVE_PORT: u16 = 8000;
/// A Serve config PUT larger than this is refused (Ray's own limit is far above any real config).
const MAX_BODY_BYTES: usize = 8 << 20;
/// KubeRay's label telling a head pod from a worker.
const NODE_TYPE_LABEL: &str = "ray.io/node-type";
/// Ray Serve's proxy answers, word for word (`serve/_private/proxy_router.py`).
const NO_ROUTES_MESSAGE: &str = "Route table is not populated yet.";
const NO_REPLICAS_MESSAGE: &str = "No replicas are available yet.";

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
        let head = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or(""),
            pod.metadata.name.as_deref().unwrap_or("")
        );
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
                routes_populated: AtomicBool::new(false),
                head: head.clone(),
                role,
            };
            tasks.push(tokio::spawn(accept(listener, Arc::new(handler))));
        }
        tracing::info!(pod = %head, %ip, dashboard, serve, "node agent: a simulated Ray head's dashboard is served at its pod address");
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
            tracing::info!(%uid, ip = %s.ip, "node agent: a simulated Ray head's pod is gone; its address is released");
            for t in &s.tasks {
                t.abort();
            }
            self.sim.stop_cluster(&s.key);
            self.rt.return_address(s.ip);
        }
    }
}

/// Which served heads' pods are gone, from a pod watch: a deleted pod, or (after a relist, when the
/// watch was broken while a pod was force-deleted) a served pod the list no longer holds.
#[derive(Default)]
struct Removals {
    /// UIDs of the relist under way.
    listed: HashSet<String>,
}

impl Removals {
    /// The served UIDs (of `served`) to release after `event`.
    fn gone(&mut self, event: watcher::Event<Pod>, served: &[String]) -> Vec<String> {
        match event {
            watcher::Event::Delete(p) => p
                .metadata
                .uid
                .into_iter()
                .filter(|u| served.contains(u))
                .collect(),
            watcher::Event::Init => {
                self.listed.clear();
                Vec::new()
            }
            watcher::Event::InitApply(p) => {
                self.listed.extend(p.metadata.uid);
                Vec::new()
            }
            watcher::Event::InitDone => served
                .iter()
                .filter(|u| !self.listed.contains(*u))
                .cloned()
                .collect(),
            watcher::Event::Apply(_) => Vec::new(),
        }
    }
}

impl Heads {
    fn served_uids(&self) -> Vec<String> {
        self.served
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// Releases each served head whose pod leaves the API, however it left (a force-deleted pod is
    /// never seen terminating by the agent), until the watch ends (never, while the API is up).
    pub(super) async fn follow_removals(self: Arc<Self>, client: kube::Client) {
        let pods = watcher(Api::<Pod>::all(client), watcher::Config::default());
        let mut events = std::pin::pin!(pods.default_backoff());
        let mut removals = Removals::default();
        while let Some(e) = events.next().await {
            let Ok(e) = e else { continue };
            for uid in removals.gone(e, &self.served_uids()) {
                tracing::info!(%uid, "node agent: a simulated Ray head's pod left the API (the pod watch)");
                self.release(&uid);
            }
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
    /// Ray's `_route_table_populated`: set once an application listed its deployments, never unset.
    routes_populated: AtomicBool,
    /// The head pod's `namespace/name`, in the Serve proxy's answers.
    head: String,
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
        DashboardError::Unauthorized { status, body }
        | DashboardError::Client { status, body }
        | DashboardError::Server { status, body } => answer(
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
            return self.proxy(path, &ep).await;
        }
        if let Some(rest) = path.strip_prefix("/api/jobs") {
            return self.jobs(method, rest, body, &ep).await;
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

    /// The Serve proxy on a head, as Ray's `ProxyRouter.ready_for_traffic(is_head=True)`
    /// (`serve/_private/proxy_router.py`) answers: `/-/healthz` is healthy once the route table was
    /// populated (an application listed its deployments), and stays so. It does not follow the
    /// application's status: while an application scales for a `target_capacity` step it is
    /// DEPLOYING, and a real head still answers healthy and serves through its running replicas.
    /// (Reading healthy as "an application is RUNNING" turned the head's `ray.io/serve` label off
    /// at every capacity step of an incremental upgrade, so its serve Service lost its endpoint
    /// while the route still sent it traffic: issue 58.) Any other path is a request to the
    /// application, answered with the head that served it while a replica runs.
    async fn proxy(&self, path: &str, ep: &DashboardEndpoint) -> Response<Full<Bytes>> {
        let details = match self.sim.serve_details(ep).await {
            Ok(d) => d,
            Err(e) => return error_answer(&e),
        };
        if details.applications.values().any(|a| !a.deployments.is_empty()) {
            self.routes_populated.store(true, Ordering::Relaxed);
        }
        if !self.routes_populated.load(Ordering::Relaxed) {
            return answer(StatusCode::SERVICE_UNAVAILABLE, NO_ROUTES_MESSAGE);
        }
        if path == "/-/healthz" {
            return answer(StatusCode::OK, "success");
        }
        if self.sim.running_replicas(&self.key).values().any(|n| *n > 0) {
            answer(
                StatusCode::OK,
                format!("served by the simulated Ray head {}\n", self.head),
            )
        } else {
            answer(StatusCode::SERVICE_UNAVAILABLE, NO_REPLICAS_MESSAGE)
        }
    }

    /// Ray's job submission API (`rest` follows `/api/jobs`), played by the simulator's jobs.
    async fn jobs(
        &self,
        method: &Method,
        rest: &str,
        body: &[u8],
        ep: &DashboardEndpoint,
    ) -> Response<Full<Bytes>> {
        let (id, tail) = match job_route(rest) {
            Ok(r) => r,
            Err(msg) => return answer(StatusCode::NOT_FOUND, msg),
        };
        match (method.clone(), id.as_deref(), tail) {
            (Method::POST, None, "") => {
                let request: JobSubmitRequest = match serde_json::from_slice(body) {
                    Ok(r) => r,
                    Err(e) => return answer(StatusCode::BAD_REQUEST, format!("the job submission: {e}")),
                };
                match self.sim.submit_job(ep, &request).await {
                    Ok(r) => json(&r),
                    Err(e) => error_answer(&e),
                }
            }
            (Method::GET, None, "") => {
                let mut all = Vec::new();
                for id in self.sim.job_ids(&self.key) {
                    if let Ok(Some(d)) = self.sim.job_info(ep, &id).await {
                        all.push(d);
                    }
                }
                json(&all)
            }
            (Method::GET, Some(id), "") => match self.sim.job_info(ep, id).await {
                Ok(Some(d)) => json(&d),
                Ok(None) => answer(StatusCode::NOT_FOUND, format!("Job {id} does not exist")),
                Err(e) => error_answer(&e),
            },
            (Method::DELETE, Some(id), "") => match self.sim.delete_job(ep, id).await {
                Ok(deleted) => json(&DeleteResponse { deleted }),
                Err(e) => error_answer(&e),
            },
            (Method::POST, Some(id), "/stop") => match self.sim.stop_job(ep, id).await {
                Ok(stopped) => json(&StopResponse { stopped }),
                Err(e) => error_answer(&e),
            },
            (Method::GET, Some(id), "/logs") => match self.sim.job_logs(ep, id).await {
                Ok(logs) => json(&LogsResponse { logs }),
                Err(e) => error_answer(&e),
            },
            (_, _, "" | "/stop" | "/logs") => answer(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
            _ => answer(StatusCode::NOT_FOUND, "not found"),
        }
    }
}

/// A 200 with `v` as JSON.
fn json<T: serde::Serialize>(v: &T) -> Response<Full<Bytes>> {
    answer(StatusCode::OK, serde_json::to_vec(v).unwrap_or_default())
}

/// What follows `/api/jobs`: the collection (`""`, `"/"`), or a job's id (percent-decoded, as the
/// client encodes it: `jobs::job_path`) and its tail (`""`, `"/stop"`, `"/logs"`).
fn job_route(rest: &str) -> Result<(Option<String>, &str), String> {
    let Some(rest) = rest.strip_prefix('/') else {
        return if rest.is_empty() {
            Ok((None, ""))
        } else {
            Err("not found".into())
        };
    };
    if rest.is_empty() {
        return Ok((None, ""));
    }
    let (raw, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    Ok((Some(percent_decode(raw)?), tail.trim_end_matches('/')))
}

/// `%XX` escapes decoded; a bad escape or a result that is not UTF-8 is refused.
fn percent_decode(raw: &str) -> Result<String, String> {
    let bad = || format!("the job id {raw:?} is not a valid percent-encoded string");
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3).ok_or_else(bad)?;
            let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rayservice::dashboard::http::decode_serve_details;
    use crate::rayservice::dashboard::sim::SimOptions;
    use crate::rayservice::dashboard::{AppStatus, DashboardError, JobDetails};
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
            routes_populated: AtomicBool::new(false),
            head: "ns/rc-head".into(),
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
        let (status, got) = body(proxy.respond(&Method::GET, "/fruit", b"").await).await;
        assert_eq!(status, StatusCode::OK);
        assert!(String::from_utf8_lossy(&got).contains("ns/rc-head"), "{got:?}");
    }

    /// Issue 58: a head whose application scales for a `target_capacity` step (DEPLOYING, as Ray 2.60
    /// reports it) stays healthy and serves through its running replicas, as Ray's head proxy does;
    /// at 0% capacity it is still healthy (a head proxy must take requests to scale up from zero)
    /// but has no replica to serve.
    #[tokio::test(start_paused = true)]
    async fn a_scaling_head_stays_a_serve_endpoint() {
        let sim = Arc::new(RaySim::new(SimOptions::default()));
        let key = "http://10.244.128.7:8265".to_string();
        sim.start_cluster(&key);
        let proxy = Handler {
            sim: sim.clone(),
            key: key.clone(),
            routes_populated: AtomicBool::new(false),
            head: "ns/inc-head".into(),
            role: Role::Proxy,
        };
        let ep = DashboardEndpoint::new(key.clone());
        let config = ServeConfig::from_json(serde_json::json!({"applications": [{"name": "echo",
            "import_path": "echo_app:app", "route_prefix": "/",
            "deployments": [{"name": "Echo", "num_replicas": 2}]}]}))
        .unwrap();
        let healthz = || async { body(proxy.respond(&Method::GET, "/-/healthz", b"").await).await };
        let (status, msg) = healthz().await;
        assert_eq!(
            (status, &msg[..]),
            (StatusCode::SERVICE_UNAVAILABLE, NO_ROUTES_MESSAGE.as_bytes())
        );
        sim.deploy(&ep, &config, Some(50.0)).await.unwrap();
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(healthz().await.0, StatusCode::OK);
        // The capacity step: the app is DEPLOYING while a replica starts, and the head still serves.
        sim.deploy(&ep, &config, Some(100.0)).await.unwrap();
        let d = sim.serve_details(&ep).await.unwrap();
        assert_eq!(d.applications["echo"].status, AppStatus::Deploying, "{d:?}");
        assert_eq!(healthz().await.0, StatusCode::OK);
        let (status, got) = body(proxy.respond(&Method::GET, "/", b"").await).await;
        assert_eq!(status, StatusCode::OK);
        assert!(String::from_utf8_lossy(&got).contains("ns/inc-head"), "{got:?}");
        // Scaled to nothing: healthy, nothing to serve.
        sim.deploy(&ep, &config, Some(0.0)).await.unwrap();
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(healthz().await.0, StatusCode::OK);
        let (status, msg) = body(proxy.respond(&Method::GET, "/", b"").await).await;
        assert_eq!(
            (status, &msg[..]),
            (StatusCode::SERVICE_UNAVAILABLE, NO_REPLICAS_MESSAGE.as_bytes())
        );
    }

    /// What the manager's HTTP jobs client sends (KubeRay's `dashboard_httpclient.go`: submit, read,
    /// stop, delete, logs), answered as a real head would and decoded by the client's own decoders.
    #[tokio::test(start_paused = true)]
    async fn a_simulated_head_answers_the_jobs_client() {
        use crate::rayservice::dashboard::jobs::{JobSubmitResponse, decode, job_path};
        let sim = Arc::new(RaySim::new(SimOptions::default()));
        let key = "http://10.244.128.6:8265".to_string();
        sim.start_cluster(&key);
        let dash = Handler {
            sim: sim.clone(),
            key: key.clone(),
            routes_populated: AtomicBool::new(false),
            head: "ns/rj-head".into(),
            role: Role::Dashboard,
        };
        let id = "rj/abc 1";
        let submit = serde_json::to_vec(&JobSubmitRequest {
            entrypoint: "python -c \"import time; time.sleep(2)\"".into(),
            submission_id: Some(id.into()),
            ..Default::default()
        })
        .unwrap();
        let (status, got) = body(dash.respond(&Method::POST, "/api/jobs/", &submit).await).await;
        assert_eq!(status, StatusCode::OK, "{got:?}");
        assert_eq!(decode::<JobSubmitResponse>(&got).unwrap().submission_id, id);
        let (status, _) = body(dash.respond(&Method::POST, "/api/jobs/", &submit).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "the same submission id twice");
        let path = job_path(id, "");
        assert_ne!(path, format!("/api/jobs/{id}"), "the client encodes the id");
        let (status, got) = body(dash.respond(&Method::GET, &path, b"").await).await;
        assert_eq!(status, StatusCode::OK);
        let d: JobDetails = decode(&got).unwrap();
        assert_eq!(d.submission_id.as_deref(), Some(id));
        let (status, _) = body(dash.respond(&Method::DELETE, &path, b"").await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "a running job is not deleted");
        tokio::time::advance(Duration::from_secs(30)).await;
        let (_, got) = body(dash.respond(&Method::GET, &path, b"").await).await;
        assert_eq!(decode::<JobDetails>(&got).unwrap().status, "SUCCEEDED");
        let (status, got) = body(dash.respond(&Method::GET, &job_path(id, "/logs"), b"").await).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            decode::<LogsResponse>(&got)
                .unwrap()
                .logs
                .contains("Running entrypoint")
        );
        let (_, got) = body(dash.respond(&Method::POST, &job_path(id, "/stop"), b"").await).await;
        assert!(!decode::<StopResponse>(&got).unwrap().stopped, "it had ended");
        let (_, got) = body(dash.respond(&Method::GET, "/api/jobs/", b"").await).await;
        assert_eq!(decode::<Vec<JobDetails>>(&got).unwrap().len(), 1);
        let (_, got) = body(dash.respond(&Method::DELETE, &path, b"").await).await;
        assert!(decode::<DeleteResponse>(&got).unwrap().deleted);
        let (status, _) = body(dash.respond(&Method::GET, &path, b"").await).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "the client reads 404 as no such job"
        );
        let (status, _) = body(dash.respond(&Method::GET, "/api/jobs/%zz", b"").await).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _) = body(dash.respond(&Method::PUT, &path, b"").await).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        let (status, _) = body(dash.respond(&Method::POST, "/api/jobs/", b"{").await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn job_routes_and_ids() {
        assert_eq!(job_route(""), Ok((None, "")));
        assert_eq!(job_route("/"), Ok((None, "")));
        assert_eq!(
            job_route("/a%2F..%2Fb/stop"),
            Ok((Some("a/../b".into()), "/stop"))
        );
        assert_eq!(job_route("/x/logs/"), Ok((Some("x".into()), "/logs")));
        assert!(job_route("xyz").is_err());
        for bad in ["%", "%4", "%g1", "%ff"] {
            let err = percent_decode(bad).unwrap_err();
            assert!(err.contains("job id"), "{bad}: {err}");
        }
    }

    fn pod(uid: &str) -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": uid, "uid": uid}})).unwrap()
    }

    /// The address release: a deleted head pod's UID, and after a relist every served pod the list
    /// no longer holds (force-deleted while the watch was broken); other pods are not released.
    #[test]
    fn removed_heads_are_released_however_they_went() {
        let served = vec!["h1".to_string(), "h2".to_string(), "h3".to_string()];
        let mut r = Removals::default();
        assert!(r.gone(watcher::Event::Apply(pod("h1")), &served).is_empty());
        assert_eq!(r.gone(watcher::Event::Delete(pod("h1")), &served), ["h1"]);
        assert!(
            r.gone(watcher::Event::Delete(pod("worker")), &served).is_empty(),
            "not a served head"
        );
        assert!(r.gone(watcher::Event::Init, &served).is_empty());
        assert!(r.gone(watcher::Event::InitApply(pod("h2")), &served).is_empty());
        assert!(
            r.gone(watcher::Event::InitApply(pod("other")), &served)
                .is_empty()
        );
        assert_eq!(r.gone(watcher::Event::InitDone, &served), ["h1", "h3"]);
        // A second relist starts afresh.
        assert!(r.gone(watcher::Event::Init, &served).is_empty());
        for u in &served {
            r.gone(watcher::Event::InitApply(pod(u)), &served);
        }
        assert!(r.gone(watcher::Event::InitDone, &served).is_empty());
    }
}
