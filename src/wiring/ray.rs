//! Starting the embedded Ray operator (RayCluster, RayService and RayJob controllers, and RayCronJob's with
//! KubeRay's `RayCronJob` gate) with a Ray dashboard:
//! the HTTP client against real Ray heads in a cluster, the simulator on the embedded cluster.

use std::sync::Arc;
use std::time::Duration;

use super::tasks::Tasks;

use crate::api::ray::validation::RayFeatureGates;

use crate::rayservice::clusterctl::controller as clusterctl;
use crate::rayservice::dashboard::http::{HttpDashboard, HttpDashboardOptions};
use crate::rayservice::dashboard::sim::{RaySim, SimOptions};
use crate::rayservice::dashboard::{DashboardEndpoint, RayDashboard, RayJobsApi};
use crate::rayservice::raycronjob::controller as cronctl;
use crate::rayservice::rayjob::controller as rjctl;
use crate::rayservice::servicectl::controller::{self as rsctl, DashboardFactory};

/// Which Ray dashboard the RayService controller talks to.
#[derive(Clone)]
pub enum Dashboards {
    /// Real Ray heads over HTTP (`quotagate run`).
    Http,
    /// Real Ray heads through the API server's service proxy (`quotagate run --use-kubernetes-proxy`,
    /// KubeRay's flag): for a manager outside the cluster network.
    KubernetesProxy,
    /// One simulator for every cluster (`quotagate run --embedded`, `quotagate demo`).
    Simulated(Arc<RaySim>),
    /// Real heads of process-run pods through their Service names, the simulator for the rest
    /// (`run --embedded --runtime process`).
    Routed(Arc<super::ray_routed::Routed>),
}

impl Dashboards {
    /// A simulator whose Serve apps become RUNNING after the given delays.
    pub fn simulated(build_delay: Duration, replica_start_delay: Duration) -> Self {
        Dashboards::Simulated(Arc::new(RaySim::new(SimOptions {
            build_delay,
            replica_start_delay,
            ..SimOptions::default()
        })))
    }

    fn factory(&self, client: &kube::Client) -> DashboardFactory {
        let dashboard: Arc<dyn RayDashboard> = match self {
            Dashboards::Http => Arc::new(HttpDashboard::new(HttpDashboardOptions::default())),
            Dashboards::KubernetesProxy => Arc::new(HttpDashboard::through_api_server(
                client.clone(),
                HttpDashboardOptions::default(),
            )),
            Dashboards::Simulated(sim) => sim.clone(),
            Dashboards::Routed(r) => r.clone(),
        };
        Arc::new(move |_: &DashboardEndpoint| dashboard.clone())
    }

    /// The Ray Jobs API client the RayJob controller uses.
    fn jobs(&self, client: &kube::Client) -> Arc<dyn RayJobsApi> {
        match self {
            Dashboards::Http => Arc::new(HttpDashboard::new(HttpDashboardOptions::default())),
            Dashboards::KubernetesProxy => Arc::new(HttpDashboard::through_api_server(
                client.clone(),
                HttpDashboardOptions::default(),
            )),
            Dashboards::Simulated(sim) => sim.clone(),
            Dashboards::Routed(r) => r.clone(),
        }
    }

    /// The simulator behind these dashboards, if any (it needs its state and load tasks).
    pub fn sim(&self) -> Option<&Arc<RaySim>> {
        match self {
            Dashboards::Http | Dashboards::KubernetesProxy => None,
            Dashboards::Simulated(sim) => Some(sim),
            Dashboards::Routed(r) => Some(&r.sim),
        }
    }

    /// Clusters of process-run pods get their real dashboards; the rest stay simulated.
    pub fn with_process_runtime(self, names: Arc<crate::embedded::sim::process::hosts::Names>) -> Self {
        match self {
            Dashboards::Simulated(sim) => {
                Dashboards::Routed(Arc::new(super::ray_routed::Routed::new(sim, names)))
            }
            other => other,
        }
    }
}

impl std::fmt::Debug for Dashboards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Dashboards::Http => "Dashboards::Http",
            Dashboards::KubernetesProxy => "Dashboards::KubernetesProxy",
            Dashboards::Simulated(_) => "Dashboards::Simulated",
            Dashboards::Routed(_) => "Dashboards::Routed",
        })
    }
}

/// The running Ray controllers; dropping it stops them.
pub struct RayOperator(#[allow(dead_code)] Tasks);

/// Spawns the Ray controllers; they run until the returned handle is dropped.
/// `upgrade_deadline` is the RayService controller's default (`--upgrade-deadline`).
pub fn spawn_ray_operator(
    client: kube::Client,
    dashboards: &Dashboards,
    gates: RayFeatureGates,
    upgrade_deadline: Option<Duration>,
    managed_jobs: crate::api::kueue::managed_jobs::ManagedJobs,
    workload_events: Option<crate::admission::WorkloadEvents>,
) -> RayOperator {
    // Which clusters and services the quota gate holds: the job reconciler's own decision.
    let managed_jobs = Arc::new(managed_jobs);
    let mut clusters = clusterctl::Context::new(client.clone());
    clusters.config.gates = gates;
    clusters.config.managed_jobs = managed_jobs.clone();
    clusters.config.workload_events = workload_events.clone();
    let mut services = rsctl::Context::new(client.clone(), dashboards.factory(&client));
    services.config.gates = gates;
    services.config.upgrade_deadline = upgrade_deadline;
    services.config.managed_jobs = managed_jobs;
    services.config.workload_events = workload_events;
    let jobs_api = dashboards.jobs(&client);
    let mut jobs = rjctl::Context::new(client.clone(), jobs_api);
    jobs.config.gates = gates;
    if let Dashboards::Simulated(_) = dashboards {
        // Simulated heads answer at once: poll running jobs often so their end shows promptly.
        jobs.config.requeue = Duration::from_millis(300);
    }
    let (clusters, services, jobs) = (Arc::new(clusters), Arc::new(services), Arc::new(jobs));
    let mut tasks = vec![
        tokio::spawn(clusterctl::run(clusters)),
        tokio::spawn(rsctl::run(services)),
        tokio::spawn(rjctl::run(jobs)),
    ];
    // KubeRay starts its RayCronJob controller only with the gate; the CRD is installed either way.
    if gates.ray_cron_job {
        let mut crons = cronctl::Context::new(client);
        crons.gates = gates;
        tasks.push(tokio::spawn(cronctl::run(Arc::new(crons))));
    }
    RayOperator(tasks.into())
}
