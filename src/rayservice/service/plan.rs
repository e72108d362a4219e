//! What one reconcile pass decided: actions (executed in order), events, status, deletion schedule.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;

use super::snapshot::{AppView, TrafficStatus};

/// One write the shell performs. Order in [`Plan::actions`] is execution order; the first failure ends
/// the pass without writing status, so the next pass re-plans from what really happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    AddFinalizer,
    RemoveFinalizer,
    /// Build the child RayCluster from `spec.rayClusterConfig` under this name (already in status).
    /// `gated`: carries the admission gate, so its controller creates no pods until the gate opens.
    /// `incremental`: a pending cluster of an incremental upgrade, created without worker `replicas`
    /// so it starts from `minReplicas` and grows with Serve's `target_capacity`.
    CreateCluster {
        name: String,
        gated: bool,
        incremental: bool,
    },
    /// Replace the child's spec (keeping its `suspend`), labels and annotations; re-stamps the hash.
    UpdateCluster {
        name: String,
    },
    /// Remove the admission gate from a cluster the quota now covers.
    OpenGate {
        name: String,
    },
    /// PUT `spec.serveConfigV2` to this cluster's dashboard (with `target_capacity` when given), then
    /// stamp the served-config annotation.
    PushServeConfig {
        cluster: String,
        target_capacity: Option<i32>,
    },
    /// PUT the config this cluster last accepted (recorded on it), not `spec.serveConfigV2`: its head
    /// lost its apps while the spec asks for a config meant for another cluster (the active cluster
    /// of an upgrade keeps the old config).
    RestoreServeConfig {
        cluster: String,
        target_capacity: Option<i32>,
    },
    /// Change only Serve's `target_capacity` on this cluster: re-PUT the config it already runs (as the
    /// dashboard reports it), so a cluster that must not get a new config keeps its own.
    SetTargetCapacity {
        cluster: String,
        percent: i32,
    },
    /// Set the head pod's `ray.io/serve` label (whether the head is a serve endpoint).
    SetHeadServeLabel {
        cluster: String,
        serving: bool,
    },
    /// Create `<rs>-head-svc` and `<rs>-serve-svc`, or switch their selectors, to this cluster.
    PointServices {
        cluster: String,
    },
    /// Create `<rs>-head-svc`, or switch its selector, to this cluster (incremental upgrades, where the
    /// Gateway is the stable serving endpoint).
    PointHeadService {
        cluster: String,
    },
    /// Create `<cluster>-serve-svc` (owned by the cluster, never updated).
    EnsureServeService {
        cluster: String,
    },
    /// Create or update `<rs>-gateway`.
    ApplyGateway,
    /// Create or update `<rs>-httproute` with these `(cluster, weight)` backends.
    SetRoute {
        backends: Vec<(String, i32)>,
    },
    DeleteCluster {
        name: String,
    },
    /// Delete the RayService-owned Services (suspend).
    DeleteServices,
    /// Record on the RayService (`quotagate.io/failed-upgrade`) that the upgrade to this cluster-spec
    /// hash was dropped at its deadline.
    RecordFailedUpgrade {
        hash: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// A Kubernetes Event to record on the RayService.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventPlan {
    pub type_: EventType,
    pub reason: &'static str,
    pub message: String,
}

pub use crate::rayservice::cluster::conditions::ConditionPlan;

/// `activeServiceStatus` / `pendingServiceStatus`. `applications: None` keeps what is stored (the
/// dashboard was not reachable this pass).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceStatusPlan {
    pub cluster: String,
    pub applications: Option<BTreeMap<String, AppView>>,
    /// Incremental upgrades: `targetCapacity`, `trafficRoutedPercent`, `lastTrafficMigratedTime`
    /// (`None`: not written).
    pub traffic: Option<TrafficStatus>,
}

/// The status to write. Conditions not listed keep their stored value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusPlan {
    pub active: Option<ServiceStatusPlan>,
    pub pending: Option<ServiceStatusPlan>,
    pub num_serve_endpoints: i32,
    pub conditions: Vec<ConditionPlan>,
    pub observed_generation: i64,
}

impl StatusPlan {
    pub fn condition(&self, type_: &str) -> Option<&ConditionPlan> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Plan {
    pub actions: Vec<Action>,
    pub events: Vec<EventPlan>,
    /// `None`: leave status untouched.
    pub status: Option<StatusPlan>,
    /// `Some`: the new deletion schedule to persist (it changed).
    pub schedule: Option<BTreeMap<String, Timestamp>>,
    /// `None`: wait for the next watch event.
    pub requeue: Option<Duration>,
}

impl Plan {
    pub(crate) fn event(&mut self, type_: EventType, reason: &'static str, message: impl Into<String>) {
        self.events.push(EventPlan {
            type_,
            reason,
            message: message.into(),
        });
    }
}
