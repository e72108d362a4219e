//! `ray.io/v1` RayService, field for field as KubeRay v1.7 (`rayservice_types.go`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::raycluster::{EmbeddedService, RayClusterSpec, RayClusterStatus};

/// A Ray Serve application plus the RayCluster template it runs on.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "ray.io",
    version = "v1",
    kind = "RayService",
    namespaced,
    status = "RayServiceStatuses",
    derive = "PartialEq",
    category = "all",
    printcolumn = r#"{"name": "service status", "type": "string", "jsonPath": ".status.serviceStatus"}"#,
    printcolumn = r#"{"name": "num serve endpoints", "type": "string", "jsonPath": ".status.numServeEndpoints"}"#,
    // quotagate's own, after KubeRay's: the pending cluster's gate, copied into the service's status
    // with that cluster's conditions (empty when no upgrade is pending or the service is not queued).
    printcolumn = r#"{"name": "quota gate", "type": "string", "jsonPath": ".status.pendingServiceStatus.rayClusterStatus.conditions[?(@.type=='QuotaGated')].reason", "description": "The pending cluster's quota gate: WaitingForWorkloadSlice while closed, WorkloadSliceAdmitted once open"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RayServiceSpec {
    /// Delay before a cluster that is neither active nor pending is deleted; default 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_deletion_delay_seconds: Option<i32>,
    /// Deprecated and unused since KubeRay #1685; accepted so old manifests still apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_unhealthy_second_threshold: Option<i32>,
    /// Deprecated and unused since KubeRay #1685.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_unhealthy_second_threshold: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_service: Option<EmbeddedService>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_strategy: Option<RayServiceUpgradeStrategy>,
    /// `ray.io/kuberay-operator` or `kueue.x-k8s.io/multikueue`; immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
    /// Ray Serve multi-application config as a YAML string.
    #[serde(default, rename = "serveConfigV2", skip_serializing_if = "Option::is_none")]
    pub serve_config_v2: Option<String>,
    #[serde(rename = "rayClusterConfig")]
    pub ray_cluster_config: RayClusterSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_head_pod_from_serve_svc: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RayServiceUpgradeType {
    /// Blue/green: build a new cluster, switch Services when it is ready.
    NewCluster,
    /// Move capacity and traffic step by step through a Gateway API HTTPRoute.
    NewClusterWithIncrementalUpgrade,
    /// Ignore cluster spec changes.
    None,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct RayServiceUpgradeStrategy {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<RayServiceUpgradeType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_upgrade_options: Option<ClusterUpgradeOptions>,
}

/// Incremental upgrade knobs (only for `NewClusterWithIncrementalUpgrade`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct ClusterUpgradeOptions {
    /// CRD default 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge_percent: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_size_percent: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_class_name: Option<String>,
}

/// `Running` or empty; deprecated mirror of the `Ready` condition.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ServiceStatus {
    Running,
    #[serde(rename = "")]
    NotRunning,
}

/// Observed state of a RayService.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct RayServiceStatuses {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_status: Option<ServiceStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_service_status: Option<RayServiceStatus>,
    /// Names the cluster being prepared; written before the RayCluster object exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_service_status: Option<RayServiceStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_serve_endpoints: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// What one child cluster (active or pending) is serving.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct RayServiceStatus {
    #[serde(
        default,
        rename = "applicationStatuses",
        skip_serializing_if = "Option::is_none"
    )]
    pub applications: Option<BTreeMap<String, AppStatus>>,
    /// Serve `target_capacity` percent (incremental upgrade).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_capacity: Option<i32>,
    /// HTTPRoute weight of this cluster (incremental upgrade).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_routed_percent: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_traffic_migrated_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_name: Option<String>,
    /// Copy of the child's status, for observability only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_status: Option<RayClusterStatus>,
}

/// Serve application status; `status` holds Serve's own enum strings (see `constants::app_status`), kept as
/// strings because Serve adds values between releases.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct AppStatus {
    #[serde(
        default,
        rename = "serveDeploymentStatuses",
        skip_serializing_if = "Option::is_none"
    )]
    pub deployments: Option<BTreeMap<String, ServeDeploymentStatus>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct ServeDeploymentStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl RayServiceSpec {
    pub fn upgrade_type(&self) -> Option<RayServiceUpgradeType> {
        self.upgrade_strategy.as_ref().and_then(|s| s.type_)
    }
    pub fn cluster_upgrade_options(&self) -> Option<&ClusterUpgradeOptions> {
        self.upgrade_strategy
            .as_ref()
            .and_then(|s| s.cluster_upgrade_options.as_ref())
    }
    pub fn is_incremental_upgrade(&self) -> bool {
        self.upgrade_type() == Some(RayServiceUpgradeType::NewClusterWithIncrementalUpgrade)
    }
    pub fn deletion_delay_seconds(&self) -> i32 {
        self.ray_cluster_deletion_delay_seconds
            .unwrap_or(super::constants::DEFAULT_RAY_CLUSTER_DELETION_DELAY_SECONDS)
    }
    pub fn is_suspended(&self) -> bool {
        self.suspend.unwrap_or(false)
    }
    pub fn excludes_head_from_serve(&self) -> bool {
        self.exclude_head_pod_from_serve_svc.unwrap_or(false)
    }
}

impl ClusterUpgradeOptions {
    pub fn max_surge_percent_or_default(&self) -> i32 {
        self.max_surge_percent.unwrap_or(100)
    }
}
