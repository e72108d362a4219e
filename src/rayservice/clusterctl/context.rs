//! What the RayCluster controller's parts share: its context (client, event recorder, configuration),
//! its error type and how it publishes an event. Below the controller and its helpers
//! (`autoscaler_rbac`), so none of them imports another in a circle.

use std::time::Duration;

use kube::Client;
use kube::Resource;
use kube::runtime::events::{EventType, Reporter};

use crate::api::kueue::managed_jobs::ManagedJobs;
use crate::api::ray::RayCluster;
use crate::api::ray::constants as c;
use crate::api::ray::validation::RayFeatureGates;
use crate::kit::events::Recorder;
use crate::kit::shell;
use crate::rayservice::cluster::{BuildError, BuildOptions};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("building objects for RayCluster: {0}")]
    Build(#[from] BuildError),
    #[error("RayCluster has no {0}")]
    MissingField(&'static str),
    #[error(
        "the head pod's ServiceAccount {0} does not exist; create it (the operator does not create a ServiceAccount the user named)"
    )]
    ServiceAccountNotFound(String),
}

impl Error {
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Build(e) => e.category(),
            Error::MissingField(_) => "invalid_object",
            Error::ServiceAccountNotFound(_) => "service_account_not_found",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub build: BuildOptions,
    /// While pods are changing.
    pub busy_requeue: Duration,
    /// KubeRay's `RAYCLUSTER_DEFAULT_REQUEUE_SECONDS` (300 s).
    pub idle_requeue: Duration,
    /// KubeRay feature gates (`--feature-gates`) for validation.
    pub gates: RayFeatureGates,
    /// `manageJobsWithoutQueueName` and `managedJobsNamespaceSelector`: which clusters the quota gate
    /// holds, as the job reconciler decides it.
    pub managed_jobs: std::sync::Arc<ManagedJobs>,
    /// The manager's shared Workload watch; `None`: the controller opens its own.
    pub workload_events: Option<crate::admission::WorkloadEvents>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            build: BuildOptions::default(),
            busy_requeue: Duration::from_secs(2),
            idle_requeue: Duration::from_secs(c::RAY_CLUSTER_DEFAULT_REQUEUE_SECONDS),
            gates: RayFeatureGates::default(),
            managed_jobs: Default::default(),
            workload_events: None,
        }
    }
}

pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub config: Config,
}

impl Context {
    pub fn new(client: Client) -> Self {
        let reporter = Reporter {
            controller: "quotagate-raycluster".into(),
            instance: None,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            config: Config::default(),
        }
    }
}

pub async fn publish(ctx: &Context, rc: &RayCluster, type_: EventType, reason: &str, note: String) {
    shell::publish(&ctx.recorder, &rc.object_ref(&()), type_, reason, note).await;
}
