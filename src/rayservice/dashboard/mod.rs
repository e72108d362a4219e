//! Ray dashboard client: the calls KubeRay's RayService controller makes to deploy Ray Serve
//! applications and read their status (KubeRay's dashboard HTTP client: `PUT` and `GET`
//! `/api/serve/applications/`, the Jobs API for RayJob).
//!
//! `RayDashboard` is the seam: `http::HttpDashboard` talks to a real head, the embedded simulator
//! (`crate::rayservice::dashboard::sim`) stands in for one in tests and demos. Both are keyed by the
//! cluster's dashboard endpoint, so one instance serves every RayCluster.

pub mod config;
pub mod error;
pub mod http;
pub mod jobs;
pub mod kube_proxy;
pub mod readiness;
pub mod sim;
pub mod types;

use futures::future::BoxFuture;

pub use config::{DEFAULT_APP_NAME, ServeConfig, capacity_adjusted_replicas};
pub use error::DashboardError;
pub use jobs::{JobDetails, JobSubmitRequest, RayJobsApi};
pub use readiness::{ServeReadiness, deploy_failure_summary, serve_readiness, strip_ansi};
pub use types::{
    AppDetails, AppStatus, DeploymentDetails, DeploymentStatus, ReplicaDetails, ReplicaState, ServeDetails,
};

/// Default port of the head Service's `dashboard` port.
pub const DEFAULT_DASHBOARD_PORT: u16 = 8265;

/// Where one Ray cluster's dashboard answers, and how to authenticate.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct DashboardEndpoint {
    /// `http://host:port`, no trailing slash.
    pub base_url: String,
    /// Sent as `x-ray-authorization: Bearer <token>` when the cluster uses token auth.
    pub auth_token: Option<String>,
}

impl DashboardEndpoint {
    pub fn new(base_url: impl Into<String>) -> Self {
        let mut base_url = base_url.into();
        while base_url.ends_with('/') {
            base_url.pop();
        }
        Self {
            base_url,
            auth_token: None,
        }
    }

    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.auth_token = Some(token.into());
        self
    }

    /// The in-cluster URL KubeRay builds from a RayCluster's head Service:
    /// `http://<svc>.<ns>.svc.<domain>:<dashboard port>`.
    pub fn for_head_service(service: &str, namespace: &str, cluster_domain: &str, port: u16) -> Self {
        Self::new(format!(
            "http://{service}.{namespace}.svc.{cluster_domain}:{port}"
        ))
    }
}

// The token must never reach logs.
impl std::fmt::Debug for DashboardEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DashboardEndpoint")
            .field("base_url", &self.base_url)
            .field("auth_token", &self.auth_token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The dashboard calls the RayService controller needs. Object safe so the controller can hold an
/// `Arc<dyn RayDashboard>` and tests can swap in the simulator.
pub trait RayDashboard: Send + Sync {
    /// `PUT /api/serve/applications/` with `config` as JSON, `target_capacity` (percent) injected at
    /// the top level when given. Success means Ray accepted the config, not that it deployed: import
    /// errors show up later as DEPLOY_FAILED in `serve_details`.
    fn deploy<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        config: &'a ServeConfig,
        target_capacity: Option<f64>,
    ) -> BoxFuture<'a, Result<(), DashboardError>>;

    /// `GET /api/serve/applications/?api_type=declarative`, the status of the apps deployed through
    /// this API.
    fn serve_details<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
    ) -> BoxFuture<'a, Result<ServeDetails, DashboardError>>;

    /// `DELETE /api/serve/applications/`: shuts Serve down with all its applications.
    fn delete_applications<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
    ) -> BoxFuture<'a, Result<(), DashboardError>>;

    /// `GET <proxy_url>/-/healthz` (`proxy_url` = `http://<head pod IP>:<serve port>`): whether the Serve
    /// proxy on the head answers, which KubeRay turns into the head pod's `ray.io/serve` label. A non-2xx
    /// answer is `Ok(false)`; no answer is an error (the caller treats both as unhealthy). `dashboard`
    /// names the cluster: the HTTP client ignores it, the simulator keys its clusters on it.
    fn proxy_healthy<'a>(
        &'a self,
        dashboard: &'a DashboardEndpoint,
        proxy_url: &'a str,
    ) -> BoxFuture<'a, Result<bool, DashboardError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_urls() {
        assert_eq!(
            DashboardEndpoint::new("http://127.0.0.1:8265//").base_url,
            "http://127.0.0.1:8265"
        );
        assert_eq!(
            DashboardEndpoint::for_head_service(
                "rs-abcde-head-svc",
                "ml",
                "cluster.local",
                DEFAULT_DASHBOARD_PORT
            )
            .base_url,
            "http://rs-abcde-head-svc.ml.svc.cluster.local:8265"
        );
        let dbg = format!("{:?}", DashboardEndpoint::new("http://h:1").with_token("secret"));
        assert!(!dbg.contains("secret"), "{dbg}");
    }
}
