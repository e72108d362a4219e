//! Simulated Ray heads on the API server's pod network (`apiserver` with simulated pods): a request
//! the `services/proxy` subresource sends to a head pod is answered by the Ray dashboard simulator,
//! one simulated head per pod address, in the wire format of a real head's dashboard (the routes
//! `dashboard::http` calls, plus `/api/version`) and of its Serve proxy's `/-/healthz`. With the
//! process runtime, heads are real Ray processes and this is not registered.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use http::Method;
use serde::Serialize;

use crate::embedded::proxy::{PodNetwork, ProxyRequest, ProxyResponse, ProxyTarget};
use crate::rayservice::dashboard::jobs::{DeleteResponse, JobSubmitRequest, LogsResponse, StopResponse};
use crate::rayservice::dashboard::sim::RaySim;
use crate::rayservice::dashboard::{
    DEFAULT_DASHBOARD_PORT, DashboardEndpoint, DashboardError, RayDashboard, RayJobsApi, ServeConfig,
};

/// The Ray version the simulated heads report (the POC's image).
const RAY_VERSION: &str = "2.46.0";

pub struct SimulatedHeads {
    sim: Arc<RaySim>,
}

impl SimulatedHeads {
    pub fn new(sim: Arc<RaySim>) -> Self {
        SimulatedHeads { sim }
    }
}

type Answer = Result<ProxyResponse, String>;

fn json(status: u16, v: &impl Serialize) -> Answer {
    let body = serde_json::to_vec(v).map_err(|e| e.to_string())?;
    Ok(ProxyResponse {
        status,
        content_type: Some("application/json".into()),
        body: body.into(),
    })
}

fn text(status: u16, t: impl Into<String>) -> Answer {
    Ok(ProxyResponse {
        status,
        content_type: Some("text/plain; charset=utf-8".into()),
        body: t.into().into_bytes().into(),
    })
}

/// A simulator error as the head would have answered it; no answer at all is an `Err`.
fn answer_error(e: DashboardError) -> Answer {
    match e {
        DashboardError::Rejected { message } | DashboardError::InvalidConfig(message) => text(400, message),
        DashboardError::Unauthorized { status, body }
        | DashboardError::Client { status, body }
        | DashboardError::Server { status, body } => text(status, body),
        DashboardError::Unreachable { reason, .. } | DashboardError::Transport { reason, .. } => Err(reason),
        DashboardError::Timeout { after, .. } => Err(format!("i/o timeout after {after:?}")),
        other @ (DashboardError::InvalidEndpoint(_) | DashboardError::Decode { .. }) => {
            text(500, other.to_string())
        }
    }
}

fn token(req: &ProxyRequest) -> Option<String> {
    let value = req.headers.iter().find(|(k, _)| {
        k.eq_ignore_ascii_case("x-ray-authorization") || k.eq_ignore_ascii_case("authorization")
    })?;
    Some(value.1.strip_prefix("Bearer ").unwrap_or(&value.1).to_string())
}

async fn dashboard(sim: Arc<RaySim>, endpoint: DashboardEndpoint, req: ProxyRequest) -> Answer {
    let path = req.path_and_query.split('?').next().unwrap_or("/").to_string();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match (&req.method, segments.as_slice()) {
        (&Method::GET, ["api", "version"]) => json(
            200,
            &serde_json::json!({"version": "4", "ray_version": RAY_VERSION, "ray_commit": "{{RAY_COMMIT_SHA}}", "session_name": "session_simulated"}),
        ),
        (&Method::PUT, ["api", "serve", "applications"]) => {
            let body: serde_json::Value = match serde_json::from_slice(&req.body) {
                Ok(v) => v,
                Err(e) => return text(400, format!("invalid JSON: {e}")),
            };
            let config = match ServeConfig::from_json(body) {
                Ok(c) => c,
                Err(e) => return answer_error(e),
            };
            match sim.deploy(&endpoint, &config, None).await {
                Ok(()) => text(200, ""),
                Err(e) => answer_error(e),
            }
        }
        (&Method::GET, ["api", "serve", "applications"]) => match sim.serve_details(&endpoint).await {
            Ok(details) => json(200, &details),
            Err(e) => answer_error(e),
        },
        (&Method::DELETE, ["api", "serve", "applications"]) => match sim.delete_applications(&endpoint).await
        {
            Ok(()) => text(200, ""),
            Err(e) => answer_error(e),
        },
        (&Method::POST, ["api", "jobs"]) => {
            let request: JobSubmitRequest = match serde_json::from_slice(&req.body) {
                Ok(r) => r,
                Err(e) => return text(400, format!("invalid job submission: {e}")),
            };
            match sim.submit_job(&endpoint, &request).await {
                Ok(r) => json(200, &r),
                Err(e) => answer_error(e),
            }
        }
        (&Method::GET, ["api", "jobs", id]) => match sim.job_info(&endpoint, id).await {
            Ok(Some(d)) => json(200, &d),
            Ok(None) => text(404, format!("Job {id} does not exist")),
            Err(e) => answer_error(e),
        },
        (&Method::POST, ["api", "jobs", id, "stop"]) => match sim.stop_job(&endpoint, id).await {
            Ok(stopped) => json(200, &StopResponse { stopped }),
            Err(e) => answer_error(e),
        },
        (&Method::DELETE, ["api", "jobs", id]) => match sim.delete_job(&endpoint, id).await {
            Ok(deleted) => json(200, &DeleteResponse { deleted }),
            Err(e) => answer_error(e),
        },
        (&Method::GET, ["api", "jobs", id, "logs"]) => match sim.job_logs(&endpoint, id).await {
            Ok(logs) => json(200, &LogsResponse { logs }),
            Err(e) => answer_error(e),
        },
        _ => text(404, "404: Not Found"),
    }
}

impl PodNetwork for SimulatedHeads {
    /// Every pod is the simulator's (it is registered only when no pod runs as a process). The
    /// dashboard port answers the dashboard's routes; any other port only the Serve proxy's health.
    fn forward(&self, target: &ProxyTarget, req: &ProxyRequest) -> Option<BoxFuture<'static, Answer>> {
        let sim = self.sim.clone();
        let mut endpoint = DashboardEndpoint::new(format!("http://{}:{DEFAULT_DASHBOARD_PORT}", target.ip));
        if let Some(t) = token(req) {
            endpoint = endpoint.with_token(t);
        }
        let (req, port) = (req.clone(), target.port);
        let proxy_url = format!("http://{}:{port}", target.ip);
        Some(
            async move {
                if port == DEFAULT_DASHBOARD_PORT {
                    return dashboard(sim, endpoint, req).await;
                }
                let path = req.path_and_query.split('?').next().unwrap_or("/");
                if req.method != Method::GET || path != crate::api::ray::constants::SERVE_PROXY_HEALTH_PATH {
                    return Err(format!("dial tcp {proxy_url}: connect: connection refused (only the dashboard and the Serve proxy's health are simulated)"));
                }
                match sim.proxy_healthy(&endpoint, &proxy_url).await {
                    Ok(true) => text(200, "success"),
                    Ok(false) => text(503, "This node is being drained."),
                    Err(e) => answer_error(e),
                }
            }
            .boxed(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rayservice::dashboard::sim::SimOptions;

    fn req(method: Method, path: &str, body: &str) -> ProxyRequest {
        ProxyRequest {
            method,
            path_and_query: path.into(),
            headers: vec![],
            body: body.to_string().into_bytes().into(),
        }
    }

    #[tokio::test]
    async fn a_simulated_head_answers_as_a_dashboard_does() {
        let sim = Arc::new(RaySim::new(SimOptions::default()));
        let heads = SimulatedHeads::new(sim.clone());
        let head = ProxyTarget {
            namespace: "ns".into(),
            pod: Some("p".into()),
            ip: "10.244.0.7".into(),
            port: DEFAULT_DASHBOARD_PORT,
        };
        let call = |r: ProxyRequest, t: &ProxyTarget| heads.forward(t, &r).unwrap();
        let v = call(req(Method::GET, "/api/version", ""), &head).await.unwrap();
        assert_eq!(v.status, 200);
        assert!(String::from_utf8_lossy(&v.body).contains("\"ray_version\":\"2.46.0\""));
        let bad = call(
            req(Method::PUT, "/api/serve/applications/", r#"{"applications": 3}"#),
            &head,
        )
        .await
        .unwrap();
        assert_eq!(bad.status, 400, "{:?}", bad.body);
        let put = call(
            req(
                Method::PUT,
                "/api/serve/applications/",
                r#"{"applications": [{"name": "fruit", "import_path": "fruit:app", "route_prefix": "/"}]}"#,
            ),
            &head,
        )
        .await
        .unwrap();
        assert_eq!(put.status, 200, "{:?}", put.body);
        let got = call(
            req(Method::GET, "/api/serve/applications/?api_type=declarative", ""),
            &head,
        )
        .await
        .unwrap();
        assert_eq!(got.status, 200);
        assert!(String::from_utf8_lossy(&got.body).contains("\"fruit\""));
        // The same head's state, as the simulator keys it: the pod's address.
        assert_eq!(sim.put_count("http://10.244.0.7:8265"), 1);
        let other = ProxyTarget {
            port: 6379,
            ..head.clone()
        };
        assert!(
            call(req(Method::GET, "/", ""), &other)
                .await
                .unwrap_err()
                .contains("connection refused")
        );
        assert_eq!(
            call(req(Method::GET, "/nope", ""), &head).await.unwrap().status,
            404
        );
    }
}
