//! What the RayService decisions look at: plain data gathered by the controller shell in one pass.
//! Names and hashes only — the decisions never need the full CRD types, which keeps the tables small.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};

/// How a cluster-spec change is rolled out (`spec.upgradeStrategy.type`, resolved with the operator's
/// `ENABLE_ZERO_DOWNTIME` default when unset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpgradeStrategy {
    /// Blue/green: a pending cluster, Services switched when it is ready.
    NewCluster,
    /// Stepwise capacity and traffic through a Gateway API HTTPRoute (`incremental`).
    NewClusterWithIncrementalUpgrade,
    /// Cluster-spec changes are ignored (serve config changes still apply in place).
    None,
}

impl UpgradeStrategy {
    /// Whether a cluster-spec change that cannot be applied in place gets a new (pending) cluster.
    pub fn prepares_new_cluster(self) -> bool {
        !matches!(self, UpgradeStrategy::None)
    }
}

/// The desired child cluster, summarised by the spec hashes KubeRay compares.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DesiredCluster {
    /// `ray.io/hash-without-replicas-and-workers-to-delete` of `spec.rayClusterConfig`.
    pub hash: String,
    /// `prefix_hashes[n]` = the same hash computed with only the first `n` worker groups; used to
    /// recognise "groups appended at the end", which is applied in place. Length = number of groups.
    pub prefix_hashes: Vec<String>,
    /// Hash of `spec.serveConfigV2`; `None` when the RayService has no Serve config.
    pub serve_config_hash: Option<String>,
}

/// How an existing cluster relates to the desired spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashMatch {
    Equal,
    /// Only worker groups were appended: update the RayCluster in place.
    Appended,
    Different,
}

impl DesiredCluster {
    pub fn compare(&self, cluster: &ChildCluster) -> HashMatch {
        let Some(hash) = cluster.hash.as_deref() else {
            return HashMatch::Different;
        };
        if hash == self.hash {
            return HashMatch::Equal;
        }
        match cluster.num_worker_groups {
            Some(n) if n < self.prefix_hashes.len() && self.prefix_hashes[n] == hash => HashMatch::Appended,
            _ => HashMatch::Different,
        }
    }
}

/// One Serve application as the dashboard reported it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AppView {
    pub status: crate::rayservice::dashboard::types::AppStatus,
    pub message: String,
    /// deployment name -> (status, message)
    pub deployments: BTreeMap<String, (String, String)>,
}

/// What the shell learned from a cluster's dashboard this pass.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum ServeObservation {
    /// Not asked (head not ready, cluster gated, or not a current cluster).
    #[default]
    NotQueried,
    /// The dashboard errored or timed out; the message says why.
    Unreachable(String),
    /// `ready` is the dashboard module's verdict: at least one app, every app RUNNING and every
    /// deployment with its target number of RUNNING replicas.
    Apps {
        apps: BTreeMap<String, AppView>,
        ready: bool,
    },
}

/// A RayCluster owned by this RayService (found by the `ray.io/originated-from-*` labels).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ChildCluster {
    pub name: String,
    /// `ray.io/hash-without-replicas-and-workers-to-delete` annotation.
    pub hash: Option<String>,
    /// `ray.io/num-worker-groups` annotation.
    pub num_worker_groups: Option<usize>,
    /// `ray.io/kuberay-version` annotation.
    pub operator_version: Option<String>,
    /// The admission gate is closed: the RayCluster controller creates no pods for it.
    pub gated: bool,
    /// `HeadPodReady=True` on the RayCluster.
    pub head_ready: bool,
    /// Hash of the Serve config last accepted by this cluster's dashboard (annotation stamped after a
    /// successful PUT, so a restart does not re-push).
    pub served_config_hash: Option<String>,
    /// The text of that config is recorded on the cluster too (`quotagate.io/served-config`), so it
    /// can be given back to a head that lost its apps.
    pub own_config_known: bool,
    /// `(config hash, Ray's message)` when Ray refused that config outright (HTTP 400): it is not
    /// pushed again until the config changes.
    pub rejected_config: Option<(String, String)>,
    pub serve: ServeObservation,
    /// Current `ray.io/serve` label on the head pod, if there is a head pod.
    pub head_serve_label: Option<bool>,
    /// Answer of the head's Serve proxy (`GET /-/healthz` on the serve port); `None` = not probed (no
    /// head pod IP yet, or gated). Drives the head pod's `ray.io/serve` label, as in KubeRay.
    pub proxy_healthy: Option<bool>,
    /// `deletionTimestamp` is set.
    pub deleting: bool,
    /// Why it has no head: the RayCluster's `status.reason` while its head crash-loops
    /// (`cluster::head_backoff`), or `FailedCreateHeadPod: <message>` from its `ReplicaFailure`
    /// condition while the head pod cannot be created.
    pub head_failing: Option<String>,
    /// Serve's `target_capacity` as the dashboard reported it this pass, rounded to a whole percent
    /// (`None`: unset, or not asked).
    pub reported_capacity: Option<i32>,
    /// Since when its pods may run: the gate's opening (`QuotaGated=False`), or its creation when it
    /// never had a gate; `None` while gated. The upgrade deadline counts from here.
    pub running_since: Option<Timestamp>,
}

/// Which clusters the quota admission covers. The gate is driven from outside; the decisions only read it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Admission {
    /// No `kueue.x-k8s.io/queue-name` label: no gate.
    #[default]
    NotQueueManaged,
    /// Queue-managed: a pending cluster created during an upgrade stays gated until named here.
    /// (The first cluster needs no entry: the RayService itself stays suspended until admitted.)
    QueueManaged {
        admitted: BTreeSet<String>,
        /// Why the upgrade's slice waits (its name, LocalQueue and Kueue's reason), when one does.
        waiting: Option<String>,
        /// Clusters preemption may still take as growth: no traffic moves onto them until the
        /// admitted slice keeps them (`rayservice::job::growth`, the switch guard).
        exposed: BTreeSet<String>,
    },
}

impl Admission {
    /// Whether a cluster created now must be gated. The first cluster (no active one) is not.
    pub fn gate_new_cluster(&self, name: &str, has_active: bool) -> bool {
        match self {
            Admission::NotQueueManaged => false,
            Admission::QueueManaged { admitted, .. } => has_active && !admitted.contains(name),
        }
    }
    /// Whether traffic may move onto `name`: preemption can no longer take it as growth.
    pub fn may_take_traffic(&self, name: &str) -> bool {
        match self {
            Admission::NotQueueManaged => true,
            Admission::QueueManaged { exposed, .. } => !exposed.contains(name),
        }
    }
    pub fn admits(&self, name: &str) -> bool {
        match self {
            Admission::NotQueueManaged => true,
            Admission::QueueManaged { admitted, .. } => admitted.contains(name),
        }
    }
}

/// A condition as it stands in the stored status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriorCondition {
    pub type_: String,
    /// "True", "False" or "Unknown".
    pub status: String,
    pub reason: String,
    /// What the condition said (a failure already announced is not announced again).
    pub message: String,
    pub last_transition: Timestamp,
}

/// One cluster's incremental-upgrade bookkeeping as stored in its service status
/// (`targetCapacity`, `trafficRoutedPercent`, `lastTrafficMigratedTime`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TrafficStatus {
    pub target_capacity: Option<i32>,
    pub traffic: Option<i32>,
    pub last_migrated: Option<Timestamp>,
}

/// The parts of the stored status the decisions build on.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PriorStatus {
    pub active: Option<String>,
    pub pending: Option<String>,
    pub conditions: Vec<PriorCondition>,
    pub active_traffic: TrafficStatus,
    pub pending_traffic: TrafficStatus,
    /// `(cluster, application)` pairs the stored status already shows as DEPLOY_FAILED: their
    /// Warning event was recorded when they failed.
    pub failed_apps: BTreeSet<(String, String)>,
}

impl PriorStatus {
    pub fn condition(&self, type_: &str) -> Option<&PriorCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
    pub fn is_true(&self, type_: &str) -> bool {
        self.condition(type_)
            .is_some_and(|c| c.status == crate::api::conditions::TRUE)
    }
    pub fn reason_is(&self, type_: &str, reason: &str) -> bool {
        self.condition(type_).is_some_and(|c| c.reason == reason)
    }
}

/// `spec.upgradeStrategy.clusterUpgradeOptions` with KubeRay's defaults applied and ranges enforced
/// (validation already refused anything else).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncrementalOptions {
    /// Percent of capacity added to the gaining cluster per step (KubeRay default 100).
    pub max_surge: i32,
    /// Percent of traffic moved per step.
    pub step: i32,
    /// Minimum time between two traffic moves.
    pub interval: SignedDuration,
    pub gateway_class: String,
    /// Move traffic on the timer alone, as KubeRay does, instead of waiting for RUNNING replicas.
    /// Only for the benchmark that shows what that costs; never set by a RayService.
    pub timer_only: bool,
}

/// What the Gateway API objects of an incremental service say.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TrafficView {
    /// `<rs>-gateway`, or `<namespace>/<name>` of a Gateway the RayService does not own.
    pub gateway: String,
    /// `<rs>-gateway` exists with the wanted class and listener (always true for a Gateway the
    /// RayService does not own: it is never written).
    pub gateway_current: bool,
    /// `<rs>-gateway` is Accepted and Programmed.
    pub gateway_ready: bool,
    /// `<rs>-httproute` exists.
    pub route_exists: bool,
    /// `<rs>-httproute` is Accepted with its backends resolved by the gateway.
    pub route_ready: bool,
    /// ... and the gateway accepted its current generation (it has taken the current weights).
    pub route_current: bool,
    /// Backends of the route's rule, as `(cluster, weight)`, matched by the exact Service name
    /// `<cluster>-serve-svc` (a backend of any other name is listed under its own name).
    pub backends: Vec<(String, i32)>,
    /// The route's parent, match and ports are what we would write (only the weights may differ).
    pub route_shape_current: bool,
    /// Clusters whose `<cluster>-serve-svc` exists.
    pub serve_services: BTreeSet<String>,
    /// Why the route may not be written: a quotagate Gateway annotation names nothing usable
    /// (`adopt`). The upgrade waits; no Gateway or route is created in its place.
    pub problem: Option<String>,
}

impl TrafficView {
    /// Weight the route gives `cluster` (0 when it is not a backend).
    pub fn weight(&self, cluster: &str) -> i32 {
        self.backends
            .iter()
            .find(|(c, _)| c == cluster)
            .map_or(0, |(_, w)| *w)
    }
}

/// Everything one reconcile pass decides from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub now: Timestamp,
    pub generation: i64,
    /// `deletionTimestamp` is set on the RayService.
    pub deleting: bool,
    pub has_finalizer: bool,
    /// `spec.managedBy` names another controller (e.g. MultiKueue): do nothing.
    pub managed_externally: bool,
    /// Validation result of spec and metadata; `Some` = the first error, naming the field.
    pub invalid: Option<String>,
    pub suspend: bool,
    pub strategy: UpgradeStrategy,
    pub deletion_delay: SignedDuration,
    /// Parsed `ray.io/initializing-timeout` annotation.
    pub initializing_timeout: Option<SignedDuration>,
    /// How long an admitted pending cluster may take to be switched to (`quotagate.io/upgrade-deadline`,
    /// else the manager's default); `None`: unbounded, as in KubeRay.
    pub upgrade_deadline: Option<SignedDuration>,
    /// `quotagate.io/failed-upgrade`: the cluster-spec hash of an upgrade dropped at its deadline.
    pub failed_upgrade: Option<String>,
    pub exclude_head_from_serve: bool,
    pub desired: DesiredCluster,
    pub status: PriorStatus,
    /// Durable deletion deadlines of dangling clusters (see `schedule`).
    pub deletion_schedule: BTreeMap<String, Timestamp>,
    pub clusters: Vec<ChildCluster>,
    /// Cluster named in the `ray.io/cluster` selector of `<rs>-head-svc` / `<rs>-serve-svc` (None = absent).
    pub head_service: Option<String>,
    pub serve_service: Option<String>,
    /// Ready endpoints in the serve Service's EndpointSlices (`numServeEndpoints`); 0 without the Service.
    /// Incremental: the distinct ready pods of the active and the pending cluster's serve Services.
    pub serve_endpoints: i32,
    pub admission: Admission,
    /// Incremental upgrades only: the options and the Gateway API objects.
    pub incremental: Option<(IncrementalOptions, TrafficView)>,
    /// A name to use if this pass prepares a new cluster (`<rs>-<5 random chars>`), chosen by the shell.
    pub fresh_name: String,
    /// Value we stamp into `ray.io/kuberay-version`.
    pub operator_version: String,
}

impl Snapshot {
    pub fn cluster(&self, name: &str) -> Option<&ChildCluster> {
        self.clusters.iter().find(|c| c.name == name)
    }
}
