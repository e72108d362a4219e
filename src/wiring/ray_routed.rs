//! The Ray dashboard of `run --embedded --runtime process`: a cluster whose head Service leads to a pod
//! the process runtime runs is a real Ray head, reached over HTTP at the address the Service name
//! resolves to (its ClusterIP, or the head pod's address for KubeRay's headless head Service), as the
//! operator in a real cluster reaches it through cluster DNS; every other cluster (simulated pods)
//! stays on the simulator.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::embedded::sim::process::hosts::Names;
use crate::rayservice::dashboard::error::DashboardError;
use crate::rayservice::dashboard::http::{HttpDashboard, HttpDashboardOptions};
use crate::rayservice::dashboard::jobs::{JobDetails, JobSubmitRequest, JobSubmitResponse, RayJobsApi};
use crate::rayservice::dashboard::sim::RaySim;
use crate::rayservice::dashboard::{DashboardEndpoint, RayDashboard, ServeConfig, ServeDetails};

pub struct Routed {
    pub sim: Arc<RaySim>,
    http: HttpDashboard,
    names: Arc<Names>,
}

impl Routed {
    pub fn new(sim: Arc<RaySim>, names: Arc<Names>) -> Routed {
        Routed {
            sim,
            http: HttpDashboard::new(HttpDashboardOptions::default()),
            names,
        }
    }

    /// The endpoint with its Service name replaced by the address it resolves to, when that is a
    /// process-run pod's Service.
    pub fn real(&self, ep: &DashboardEndpoint) -> Option<DashboardEndpoint> {
        let uri: http::Uri = ep.base_url.parse().ok()?;
        let ip = self.names.resolve_process(uri.host()?)?;
        let port = uri.port_u16().unwrap_or(80);
        Some(DashboardEndpoint {
            base_url: format!("http://{ip}:{port}"),
            auth_token: ep.auth_token.clone(),
        })
    }
}

/// `$call` on the HTTP client with the resolved endpoint, else on the simulator with the original.
macro_rules! route {
    ($self:ident, $ep:ident, $method:ident($($arg:expr),*)) => {
        match $self.real($ep) {
            Some(real) => Box::pin(async move { $self.http.$method(&real, $($arg),*).await }),
            None => $self.sim.$method($ep, $($arg),*),
        }
    };
}

impl RayDashboard for Routed {
    fn deploy<'a>(
        &'a self,
        ep: &'a DashboardEndpoint,
        config: &'a ServeConfig,
        target_capacity: Option<f64>,
    ) -> BoxFuture<'a, Result<(), DashboardError>> {
        route!(self, ep, deploy(config, target_capacity))
    }
    fn serve_details<'a>(
        &'a self,
        ep: &'a DashboardEndpoint,
    ) -> BoxFuture<'a, Result<ServeDetails, DashboardError>> {
        route!(self, ep, serve_details())
    }
    fn delete_applications<'a>(
        &'a self,
        ep: &'a DashboardEndpoint,
    ) -> BoxFuture<'a, Result<(), DashboardError>> {
        route!(self, ep, delete_applications())
    }
    fn proxy_healthy<'a>(
        &'a self,
        ep: &'a DashboardEndpoint,
        proxy_url: &'a str,
    ) -> BoxFuture<'a, Result<bool, DashboardError>> {
        route!(self, ep, proxy_healthy(proxy_url))
    }
}

impl RayJobsApi for Routed {
    fn submit_job<'a>(
        &'a self,
        ep: &'a DashboardEndpoint,
        request: &'a JobSubmitRequest,
    ) -> BoxFuture<'a, Result<JobSubmitResponse, DashboardError>> {
        route!(self, ep, submit_job(request))
    }
    fn job_info<'a>(
        &'a self,
        ep: &'a DashboardEndpoint,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<JobDetails>, DashboardError>> {
        route!(self, ep, job_info(id))
    }
    fn stop_job<'a>(
        &'a self,
        ep: &'a DashboardEndpoint,
        id: &'a str,
    ) -> BoxFuture<'a, Result<bool, DashboardError>> {
        route!(self, ep, stop_job(id))
    }
    fn delete_job<'a>(
        &'a self,
        ep: &'a DashboardEndpoint,
        id: &'a str,
    ) -> BoxFuture<'a, Result<bool, DashboardError>> {
        route!(self, ep, delete_job(id))
    }
    fn job_logs<'a>(
        &'a self,
        ep: &'a DashboardEndpoint,
        id: &'a str,
    ) -> BoxFuture<'a, Result<String, DashboardError>> {
        route!(self, ep, job_logs(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::sim::process::hosts::Record;
    use std::net::Ipv4Addr;

    #[test]
    fn process_pods_services_go_to_their_address_the_rest_to_the_simulator() {
        let names = Arc::new(Names::new(std::env::temp_dir().join("qg-routed-test-unused")));
        names.set_records(vec![
            Record {
                namespace: "ml".into(),
                name: "real-head-svc".into(),
                ips: vec![Ipv4Addr::new(10, 244, 130, 4)],
                process: true,
            },
            Record {
                namespace: "ml".into(),
                name: "sim-head-svc".into(),
                ips: vec![Ipv4Addr::new(10, 244, 0, 4)],
                process: false,
            },
        ]);
        let r = Routed::new(Arc::new(RaySim::new(Default::default())), names);
        let ep =
            DashboardEndpoint::for_head_service("real-head-svc", "ml", "cluster.local", 8265).with_token("t");
        let real = r.real(&ep).unwrap();
        assert_eq!(real.base_url, "http://10.244.130.4:8265");
        assert_eq!(real.auth_token.as_deref(), Some("t"));
        assert!(
            r.real(&DashboardEndpoint::for_head_service(
                "sim-head-svc",
                "ml",
                "cluster.local",
                8265
            ))
            .is_none()
        );
        assert!(
            r.real(&DashboardEndpoint::for_head_service(
                "gone-head-svc",
                "ml",
                "cluster.local",
                8265
            ))
            .is_none()
        );
    }
}
