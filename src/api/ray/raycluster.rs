//! `ray.io/v1` RayCluster, field for field as KubeRay v1.7 (`raycluster_types.go`).
//!
//! Everything optional is `Option` and skipped when absent so a manifest round-trips unchanged; KubeRay's CRD
//! defaults (minReplicas 0, maxReplicas 2^31-1, numOfHosts 1, ...) are applied by accessor methods, never on
//! deserialize.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EnvFromSource, EnvVar, EnvVarSource, PodTemplateSpec, ResourceRequirements, SecurityContext, Service,
    ServiceSpec, ServiceStatus, VolumeMount,
};
use k8s_openapi::api::networking::v1::{IngressTLS, NetworkPolicyEgressRule, NetworkPolicyIngressRule};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired state of a Ray cluster: one head group and any number of worker groups.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "ray.io",
    version = "v1",
    kind = "RayCluster",
    namespaced,
    status = "RayClusterStatus",
    derive = "PartialEq",
    category = "all",
    printcolumn = r#"{"name": "desired workers", "type": "integer", "jsonPath": ".status.desiredWorkerReplicas"}"#,
    printcolumn = r#"{"name": "available workers", "type": "integer", "jsonPath": ".status.availableWorkerReplicas"}"#,
    printcolumn = r#"{"name": "cpus", "type": "string", "jsonPath": ".status.desiredCPU"}"#,
    printcolumn = r#"{"name": "memory", "type": "string", "jsonPath": ".status.desiredMemory"}"#,
    printcolumn = r#"{"name": "gpus", "type": "string", "jsonPath": ".status.desiredGPU"}"#,
    printcolumn = r#"{"name": "tpus", "type": "string", "jsonPath": ".status.desiredTPU", "priority": 1}"#,
    printcolumn = r#"{"name": "status", "type": "string", "jsonPath": ".status.state"}"#,
    printcolumn = r#"{"name": "age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name": "head pod IP", "type": "string", "jsonPath": ".status.head.podIP", "priority": 1}"#,
    printcolumn = r#"{"name": "head service IP", "type": "string", "jsonPath": ".status.head.serviceIP", "priority": 1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RayClusterSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_strategy: Option<RayClusterUpgradeStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_options: Option<AuthOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// `ray.io/kuberay-operator` or `kueue.x-k8s.io/multikueue`; immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaler_options: Option<AutoscalerOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_service_annotations: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_in_tree_autoscaling: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcs_fault_tolerance_options: Option<GcsFaultToleranceOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_server_options: Option<HistoryServerOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkPolicyConfig>,
    #[serde(default, rename = "tlsOptions", skip_serializing_if = "Option::is_none")]
    pub tls_options: Option<TlsOptions>,
    pub head_group_spec: HeadGroupSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_group_specs: Option<Vec<WorkerGroupSpec>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct TlsOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RayClusterUpgradeType {
    /// Delete every Pod when the spec hash changes, then create new ones.
    Recreate,
    None,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct RayClusterUpgradeStrategy {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<RayClusterUpgradeType>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    Disabled,
    Token,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct AuthOptions {
    #[serde(
        default,
        rename = "enableK8sTokenAuth",
        skip_serializing_if = "Option::is_none"
    )]
    pub enable_k8s_token_auth: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
    /// KubeRay documents `token` as the default, but its validation and controller act only on an explicit `token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<AuthMode>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GcsFaultToleranceBackend {
    Redis,
    #[serde(rename = "rocksdb")]
    RocksDb,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct GcsFaultToleranceOptions {
    /// Unset means redis (backward compatible).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<GcsFaultToleranceBackend>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_username: Option<RedisCredential>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_password: Option<RedisCredential>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_storage_namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<GcsEmbeddedStorage>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum GcsStorageDeletionPolicy {
    DeleteWithCluster,
    Retain,
}

/// PVC backing the embedded RocksDB GCS store (backend `rocksdb`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct GcsEmbeddedStorage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_modes: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<GcsStorageDeletionPolicy>,
}

/// A literal value or a reference (Secret/ConfigMap key) for a Redis username or password.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct RedisCredential {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<EnvVarSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct HistoryServerOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collector_options: Option<CollectorOptions>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct CollectorOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum NetworkPolicyMode {
    DenyAll,
    DenyAllIngress,
    DenyAllEgress,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicyConfig {
    /// CRD default `DenyAll`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<NetworkPolicyMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<NetworkPolicyRules>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<NetworkPolicyRules>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_groups: Option<Vec<WorkerGroupNetworkPolicyRules>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct WorkerGroupNetworkPolicyRules {
    pub group_name: String,
    #[serde(flatten)]
    pub rules: NetworkPolicyRules,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicyRules {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_rules: Option<Vec<NetworkPolicyIngressRule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress_rules: Option<Vec<NetworkPolicyEgressRule>>,
}

/// The head Pod template and how it is exposed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct HeadGroupSpec {
    /// The Ray container must be at index 0.
    pub template: PodTemplateSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_service: Option<EmbeddedService>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_ingress: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_options: Option<IngressOptions>,
    /// Ray logical resources; override `--resources` from rayStartParams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<BTreeMap<String, String>>,
    /// Ray node labels (also Pod labels); override `--labels`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_start_params: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_type: Option<String>,
}

/// A Service embedded in a Ray spec (`headService`, `serveService`). k8s-openapi's `Service` always writes
/// `apiVersion`/`kind`, which would change user manifests on a round-trip, so the embedded form is its own type.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddedService {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "is_empty_meta")]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<ServiceSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ServiceStatus>,
}

fn is_empty_meta(m: &ObjectMeta) -> bool {
    *m == ObjectMeta::default()
}

impl EmbeddedService {
    /// The full Service object this template describes.
    pub fn to_service(&self) -> Service {
        Service {
            metadata: self.metadata.clone(),
            spec: self.spec.clone(),
            status: self.status.clone(),
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum IngressPathType {
    Exact,
    Prefix,
    ImplementationSpecific,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct IngressOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_type: Option<IngressPathType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Vec<IngressTLS>>,
}

/// One group of identical worker Pods (or, with numOfHosts > 1, of multi-host replicas).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct WorkerGroupSpec {
    /// Internal: only RayJob's deletion policy sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    pub group_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_seconds: Option<i32>,
    /// Autoscaler v2 preference among groups (Ray >= 2.56).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_start_params: Option<BTreeMap<String, String>>,
    pub template: PodTemplateSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_strategy: Option<ScaleStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_of_hosts: Option<i32>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct ScaleStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers_to_delete: Option<Vec<String>>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum UpscalingMode {
    Default,
    Aggressive,
    Conservative,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AutoscalerVersion {
    V1,
    V2,
}

/// Settings for the autoscaler sidecar in the head Pod.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalerOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upscaling_mode: Option<UpscalingMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<AutoscalerVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_from: Option<Vec<EnvFromSource>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mounts: Option<Vec<VolumeMount>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
}

/// Deprecated overall state (conditions replace it); `failed` is kept only so old objects still parse.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ClusterState {
    Ready,
    Failed,
    Suspended,
}

/// Observed state of a RayCluster.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct RayClusterStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ClusterState>,
    #[serde(default, rename = "desiredCPU", skip_serializing_if = "Option::is_none")]
    pub desired_cpu: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_memory: Option<Quantity>,
    #[serde(default, rename = "desiredGPU", skip_serializing_if = "Option::is_none")]
    pub desired_gpu: Option<Quantity>,
    #[serde(default, rename = "desiredTPU", skip_serializing_if = "Option::is_none")]
    pub desired_tpu: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_transition_times: Option<BTreeMap<ClusterState, Time>>,
    /// Head Service port name -> port number (as a string, like KubeRay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<HeadInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_worker_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_worker_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_worker_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_worker_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_worker_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct HeadInfo {
    #[serde(default, rename = "podIP", skip_serializing_if = "Option::is_none")]
    pub pod_ip: Option<String>,
    #[serde(default, rename = "serviceIP", skip_serializing_if = "Option::is_none")]
    pub service_ip: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
}

/// KubeRay's CRD defaults and derived values, applied on read instead of on deserialize.
impl WorkerGroupSpec {
    pub fn min_replicas_or_default(&self) -> i32 {
        self.min_replicas.unwrap_or(0)
    }
    pub fn max_replicas_or_default(&self) -> i32 {
        self.max_replicas.unwrap_or(i32::MAX)
    }
    pub fn num_of_hosts_or_default(&self) -> i32 {
        self.num_of_hosts.unwrap_or(1)
    }
    pub fn workers_to_delete(&self) -> &[String] {
        self.scale_strategy
            .as_ref()
            .and_then(|s| s.workers_to_delete.as_deref())
            .unwrap_or(&[])
    }
    pub fn is_suspended(&self) -> bool {
        self.suspend.unwrap_or(false)
    }
}

impl RayClusterSpec {
    pub fn worker_groups(&self) -> &[WorkerGroupSpec] {
        self.worker_group_specs.as_deref().unwrap_or(&[])
    }
    pub fn autoscaling_enabled(&self) -> bool {
        self.enable_in_tree_autoscaling.unwrap_or(false)
    }
    pub fn is_suspended(&self) -> bool {
        self.suspend.unwrap_or(false)
    }
    pub fn upgrade_type(&self) -> Option<RayClusterUpgradeType> {
        self.upgrade_strategy.as_ref().and_then(|s| s.type_)
    }
}
