//! `ray.io/v1` RayJob, field for field as KubeRay v1.7 (`rayjob_types.go`).
//!
//! As for RayCluster, optional fields stay `Option` so a manifest round-trips unchanged; KubeRay's CRD
//! defaults (`submissionMode: K8sJobMode`, `backoffLimit: 0`, `ttlSecondsAfterFinished: 0`) are
//! applied by accessors.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::raycluster::{RayClusterSpec, RayClusterStatus};

/// A Ray job (an entrypoint) and the cluster it runs on: one the RayJob creates from
/// `rayClusterSpec`, or an existing one named by `clusterSelector`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "ray.io",
    version = "v1",
    kind = "RayJob",
    namespaced,
    status = "RayJobStatus",
    derive = "PartialEq",
    category = "all",
    printcolumn = r#"{"name": "job status", "type": "string", "jsonPath": ".status.jobStatus"}"#,
    printcolumn = r#"{"name": "deployment status", "type": "string", "jsonPath": ".status.jobDeploymentStatus"}"#,
    printcolumn = r#"{"name": "ray cluster name", "type": "string", "jsonPath": ".status.rayClusterName"}"#,
    printcolumn = r#"{"name": "start time", "type": "string", "jsonPath": ".status.startTime"}"#,
    printcolumn = r#"{"name": "end time", "type": "string", "jsonPath": ".status.endTime"}"#,
    printcolumn = r#"{"name": "age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RayJobSpec {
    /// Seconds the job may be active before it is failed with `DeadlineExceeded`; positive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i32>,
    /// Retries (each on a new RayCluster) before the job is `Failed`; CRD default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_spec: Option<RayClusterSpec>,
    /// The pod that runs `ray job submit` in K8sJobMode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitter_pod_template: Option<PodTemplateSpec>,
    /// Stored with the Ray job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    /// `ray.io/cluster: <name>` runs the job on that existing cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitter_config: Option<SubmitterConfig>,
    /// `ray.io/kuberay-operator` or `kueue.x-k8s.io/multikueue`; immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
    /// Needs the RayJobDeletionPolicy feature gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_strategy: Option<DeletionStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    #[serde(default, rename = "runtimeEnvYAML", skip_serializing_if = "Option::is_none")]
    pub runtime_env_yaml: Option<String>,
    /// Submission id; generated (`<name>-<suffix>`) when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission_mode: Option<JobSubmissionMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_resources: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_num_cpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_num_gpus: Option<f64>,
    /// Seconds after the end before the cluster is deleted (with `shutdownAfterJobFinishes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_after_job_finishes: Option<bool>,
    /// True: no cluster exists (an existing one is deleted); Kueue holds a queued job here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum JobSubmissionMode {
    /// A submitter batch Job runs `ray job submit` (the default).
    #[default]
    K8sJobMode,
    /// The operator submits through the dashboard's Jobs REST API.
    HTTPMode,
    /// The user submits and then sets `spec.jobId`.
    InteractiveMode,
    /// A submitter container in the head pod.
    SidecarMode,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct SubmitterConfig {
    /// The submitter Job's `backoffLimit` (KubeRay uses 2 when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, PartialOrd, Ord)]
pub enum DeletionPolicyType {
    DeleteCluster,
    DeleteWorkers,
    DeleteSelf,
    DeleteNone,
}

/// Either both legacy policies (`onSuccess`, `onFailure`) or `deletionRules`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct DeletionStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_success: Option<DeletionPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<DeletionPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_rules: Option<Vec<DeletionRule>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct DeletionPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<DeletionPolicyType>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletionRule {
    pub policy: DeletionPolicyType,
    pub condition: DeletionCondition,
}

/// Exactly one of `jobStatus` (SUCCEEDED or FAILED) and `jobDeploymentStatus` (Failed).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct DeletionCondition {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_status: Option<JobStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_deployment_status: Option<JobDeploymentStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<i32>,
}

/// The Ray job's own status, as the dashboard reports it. Absent is KubeRay's `New` ("").
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobStatus {
    Pending,
    Running,
    Stopped,
    Succeeded,
    Failed,
}

impl JobStatus {
    /// Ray's `is_terminal()`.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobStatus::Stopped | JobStatus::Succeeded | JobStatus::Failed
        )
    }
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Pending => "PENDING",
            JobStatus::Running => "RUNNING",
            JobStatus::Stopped => "STOPPED",
            JobStatus::Succeeded => "SUCCEEDED",
            JobStatus::Failed => "FAILED",
        }
    }
    /// Parses Ray's wire value; `None` for a value Ray added later (treated as not terminal).
    pub fn parse(s: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(s.to_owned())).ok()
    }
}

/// KubeRay's `jobDeploymentStatus` state machine. Absent is `New`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum JobDeploymentStatus {
    Initializing,
    Running,
    Complete,
    Failed,
    ValidationFailed,
    Suspending,
    Suspended,
    Retrying,
    Waiting,
}

impl JobDeploymentStatus {
    /// `Complete` or `Failed` (KubeRay's `IsJobDeploymentTerminal`).
    pub fn is_terminal(self) -> bool {
        matches!(self, JobDeploymentStatus::Complete | JobDeploymentStatus::Failed)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            JobDeploymentStatus::Initializing => "Initializing",
            JobDeploymentStatus::Running => "Running",
            JobDeploymentStatus::Complete => "Complete",
            JobDeploymentStatus::Failed => "Failed",
            JobDeploymentStatus::ValidationFailed => "ValidationFailed",
            JobDeploymentStatus::Suspending => "Suspending",
            JobDeploymentStatus::Suspended => "Suspended",
            JobDeploymentStatus::Retrying => "Retrying",
            JobDeploymentStatus::Waiting => "Waiting",
        }
    }
}

/// Why a RayJob ended `Failed` (KubeRay's `JobFailedReason`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum JobFailedReason {
    SubmissionFailed,
    DeadlineExceeded,
    AppFailed,
    JobDeploymentStatusTransitionGracePeriodExceeded,
    ValidationFailed,
}

/// What the dashboard said about the Ray job's run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct RayJobStatusInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct RayJobStatus {
    #[serde(default, rename = "rayJobInfo", skip_serializing_if = "Option::is_none")]
    pub ray_job_info: Option<RayJobStatusInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_name: Option<String>,
    #[serde(default, rename = "dashboardURL", skip_serializing_if = "Option::is_none")]
    pub dashboard_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_status: Option<JobStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_deployment_status: Option<JobDeploymentStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<JobFailedReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When `jobDeploymentStatus` left `New` (the base of `activeDeadlineSeconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When it became `Complete` or `Failed` (the base of `ttlSecondsAfterFinished`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray_cluster_status: Option<RayClusterStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl RayJobSpec {
    pub fn mode(&self) -> JobSubmissionMode {
        self.submission_mode.unwrap_or_default()
    }
    pub fn is_suspended(&self) -> bool {
        self.suspend.unwrap_or(false)
    }
    pub fn shutdown_after_finish(&self) -> bool {
        self.shutdown_after_job_finishes.unwrap_or(false)
    }
    pub fn ttl_seconds(&self) -> i32 {
        self.ttl_seconds_after_finished.unwrap_or(0)
    }
    /// The existing cluster `clusterSelector` names (`ray.io/cluster`), if the job uses one.
    pub fn selected_cluster(&self) -> Option<&str> {
        self.cluster_selector.as_ref().filter(|s| !s.is_empty()).map(|s| {
            s.get(super::constants::LABEL_CLUSTER)
                .map(String::as_str)
                .unwrap_or("")
        })
    }
    /// A non-empty selector: the job runs on a cluster it does not own.
    pub fn uses_cluster_selector(&self) -> bool {
        self.cluster_selector.as_ref().is_some_and(|s| !s.is_empty())
    }
}
