//! Pure building blocks of the embedded RayCluster operator: object names, labels, the head and worker Pods
//! (KubeRay's `BuildPod`), the head Service, the spec hash and replica/resource arithmetic. No I/O.

pub mod autoscaler_rbac;
pub mod child;
pub mod conditions;
pub mod hash;
pub mod head_backoff;
pub mod labels;
pub mod names;
pub mod pod;
mod pod_env;
pub mod pod_features;
pub mod podsets;
pub mod quantity;
pub mod replicas;
pub mod service;
pub mod startcmd;

/// False for a cluster another controller manages (`spec.managedBy`) or one being deleted: the
/// RayCluster controller's pass leaves both alone, and makes no pods for them.
pub fn is_ours_and_live(rc: &crate::api::ray::RayCluster) -> bool {
    let foreign = rc
        .spec
        .managed_by
        .as_deref()
        .is_some_and(|m| m != crate::api::ray::constants::MANAGED_BY_KUBERAY);
    !foreign && rc.metadata.deletion_timestamp.is_none()
}

/// Why a Pod or Service could not be built from a RayCluster spec.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BuildError {
    #[error("{0}: the pod template has no containers (the Ray container must be at index 0)")]
    NoContainer(String),
    #[error("worker group {0:?} does not exist in the RayCluster spec")]
    NoSuchGroup(String),
    /// A pod template's TAS annotations do not parse (the webhook refuses them first).
    #[error("{0}: {1}")]
    TopologyRequest(String, String),
}

impl BuildError {
    /// Low-cardinality label for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            BuildError::NoContainer(_) => "no_container",
            BuildError::NoSuchGroup(_) => "no_such_group",
            BuildError::TopologyRequest(..) => "topology_request",
        }
    }
}

/// Operator-level switches KubeRay reads from its environment; `Default` is KubeRay's default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildOptions {
    /// `CLUSTER_DOMAIN`.
    pub cluster_domain: String,
    /// `ENABLE_PROBES_INJECTION`.
    pub inject_probes: bool,
    /// `ENABLE_INIT_CONTAINER_INJECTION`: the worker `wait-gcs-ready` init container.
    pub inject_init_container: bool,
    /// `ENABLE_LOGIN_SHELL`: `bash -lc` instead of `bash -c`.
    pub login_shell: bool,
    /// `ENABLE_DETERMINISTIC_HEAD_POD_NAME`: head Pod named `<cluster>-head` instead of generateName.
    pub deterministic_head_name: bool,
    /// `ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE`: keep a ClusterIP instead of a headless head Service.
    pub head_cluster_ip_service: bool,
    /// Feature gate `RayMultiHostIndexing` (beta, on).
    pub multi_host_indexing: bool,
    /// Written into `RAY_USAGE_STATS_EXTRA_TAGS` and the `ray.io/kuberay-version` annotation.
    pub kuberay_version: String,
}

impl Default for BuildOptions {
    fn default() -> Self {
        Self {
            cluster_domain: "cluster.local".into(),
            inject_probes: true,
            inject_init_container: true,
            login_shell: false,
            deterministic_head_name: false,
            head_cluster_ip_service: false,
            multi_host_indexing: true,
            kuberay_version: crate::api::ray::constants::KUBERAY_COMPAT_VERSION.into(),
        }
    }
}

/// Which kind of object created the RayCluster (label `ray.io/originated-from-crd`); changes Pod details.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Creator {
    RayCluster,
    RayService,
    RayJob,
}

impl Creator {
    pub fn of(cluster: &crate::api::ray::RayCluster) -> Creator {
        let label = cluster
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(crate::api::ray::constants::LABEL_ORIGINATED_FROM_CRD));
        match label.map(String::as_str) {
            Some("RayService") => Creator::RayService,
            Some("RayJob") => Creator::RayJob,
            _ => Creator::RayCluster,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Creator::RayCluster => "RayCluster",
            Creator::RayService => "RayService",
            Creator::RayJob => "RayJob",
        }
    }
}
