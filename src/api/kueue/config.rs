//! Kueue's manager configuration file (`apiVersion: config.kueue.x-k8s.io/v1beta2`, `kind:
//! Configuration`; `v1beta1` is read too), so that a platform team's Kueue config carries over.
//!
//! Like Kueue, decoding is strict: an unknown field is an error naming its path. The parts quotagate
//! implements (`waitForPodsReady`) are typed and defaulted as Kueue defaults them. Switches quotagate
//! does not implement are refused when they are turned on, so a config never silently means less than
//! it says; the rest of a Kueue config (controller, metrics, webhook, integrations, ...) is accepted,
//! used where quotagate has the equivalent, and otherwise named by [`Configuration::ignored`].

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

pub use crate::api::goduration::{GoDuration, parse as parse_go_duration};
pub use crate::api::kueue::managed_jobs::{self, ManagedJobs};
use crate::api::kueue::pods_ready_annotation;

pub const GROUP: &str = "config.kueue.x-k8s.io";
pub const KIND: &str = "Configuration";

/// Kueue's defaults (`apis/config/v1beta2/defaults.go`).
pub const DEFAULT_WAIT_FOR_PODS_READY_TIMEOUT: Duration = Duration::from_secs(30 * 60);
pub const DEFAULT_BACKOFF_BASE_SECONDS: i32 = 60;
pub const DEFAULT_BACKOFF_MAX_SECONDS: i32 = 3600;

/// The feature gate that turns waitForPodsReady off in `v1beta2`, where it is on by default.
pub const DISABLE_WAIT_FOR_PODS_READY: &str = "DisableWaitForPodsReady";

/// Kueue's `usageSamplingInterval` default (`apis/config/v1beta2/defaults.go`).
pub const DEFAULT_AFS_SAMPLING_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// The feature gate of admission fair sharing (beta, on by default since Kueue 0.15).
pub const ADMISSION_FAIR_SHARING_GATE: &str = "AdmissionFairSharing";
/// Kueue v0.20's alpha gate (off by default, KEP-4803): the `kueue.x-k8s.io/wait-for-pods-ready`
/// annotation sets a job's own timeouts, up to `waitForPodsReady.maxTimeoutOnWorkload`.
pub const WORKLOAD_LEVEL_WAIT_FOR_PODS_READY: &str = "WorkloadLevelWaitForPodsReady";
/// Kueue v0.20's alpha gate (off by default, KEP-13502): with `waitForPodsReady.unscheduledTimeout`
/// set, an admitted workload whose required pods stay unscheduled that long is evicted.
pub const WAIT_FOR_PODS_READY_UNSCHEDULED_TIMEOUT: &str = "WaitForPodsReadyUnscheduledTimeout";
/// Kueue's alpha gate (off by default): a preemptor waiting for its victims goes first.
pub const PRIORITIZE_PREEMPTOR_WORKLOADS: &str = "PrioritizePreemptorWorkloads";
/// Kueue v0.20's beta gate (on by default, KEP-10765): a job naming no WorkloadPriorityClass gets
/// the one named `default`, when it exists.
pub const WORKLOAD_PRIORITY_CLASS_DEFAULTING: &str = "WorkloadPriorityClassDefaulting";
/// Kueue v0.20's beta gate (on by default): a preemptor whose victims another preemptor of the
/// cycle already took computes its assignment again as if they were gone (the "hero workload").
pub const RECOMPUTE_UPON_PREEMPTION_TARGETS_OVERLAP: &str = "RecomputeAssignmentUponPreemptionTargetsOverlap";
/// Kueue v0.20's beta gate (on by default, #15734): a Succeeded pod counts as ready in a pod group
/// that does not serve.
pub const POD_INTEGRATION_COUNT_SUCCEEDED_PODS_AS_READY: &str = "PodIntegrationCountSucceededPodsAsReady";
/// Kueue v0.20's alpha gate (off by default, #16059, KEP-15423): a pod group may be ready with up to
/// its `kueue.x-k8s.io/pod-group-max-not-ready-count` pods not ready.
pub const WAIT_FOR_PODS_READY_MAX_NOT_READY: &str = "WaitForPodsReadyMaxNotReady";

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("not YAML: {0}")]
    Yaml(String),
    /// A field with a bad value, by its path (`waitForPodsReady.timeout`).
    #[error("{path}: {message}")]
    Field { path: String, message: String },
    /// A switch quotagate does not implement, turned on.
    #[error("{path}: not implemented by quotagate ({what}); remove it or turn it off")]
    NotImplemented { path: String, what: &'static str },
}

fn field(path: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Field {
        path: path.to_string(),
        message: message.into(),
    }
}

/// Which version of the file's API: they differ in how waitForPodsReady and fairSharing turn on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1beta1,
    V1beta2,
}

/// A Kueue `Configuration`. Sections quotagate has no use for are kept as raw values.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Configuration {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub manage_jobs_without_queue_name: Option<bool>,
    pub managed_jobs_namespace_selector: Option<Value>,
    pub internal_cert_management: Option<InternalCertManagement>,
    pub wait_for_pods_ready: Option<WaitForPodsReady>,
    pub client_connection: Option<Value>,
    pub integrations: Option<Integrations>,
    /// v1beta1 only.
    pub queue_visibility: Option<Value>,
    pub multi_kueue: Option<MultiKueue>,
    pub fair_sharing: Option<FairSharing>,
    pub admission_fair_sharing: Option<AdmissionFairSharing>,
    pub resources: Option<Resources>,
    pub feature_gates: Option<BTreeMap<String, bool>>,
    pub object_retention_policies: Option<ObjectRetentionPolicies>,
    pub visibility_server: Option<Value>,
    // The controller-manager part (inline in Kueue's type).
    pub webhook: Option<Webhook>,
    pub leader_election: Option<LeaderElection>,
    pub metrics: Option<Value>,
    pub health: Option<Health>,
    pub pprof_bind_address: Option<String>,
    pub controller: Option<Value>,
    pub tls: Option<Value>,
}

/// Kueue's `integrations`: which job kinds the manager manages. The lists quotagate has no use for
/// are kept raw.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Integrations {
    pub frameworks: Option<Vec<String>>,
    pub external_frameworks: Option<Vec<String>>,
    /// v1beta1 only, deprecated there "in favour of `managedJobsNamespaceSelector`", and dropped by
    /// Kueue's conversion to v1beta2 (`Convert_v1beta1_Integrations_To_v1beta2_Integrations`): read,
    /// never applied (the pod integration follows `managedJobsNamespaceSelector`). v1beta2 removed it,
    /// and refuses it as an unknown field.
    pub pod_options: Option<PodIntegrationOptions>,
    pub label_keys_to_copy: Option<Vec<String>>,
}

/// Kueue v1beta1's `PodIntegrationOptions`, decoded as strictly as Kueue decodes it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodIntegrationOptions {
    pub namespace_selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    pub pod_selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
}

/// Every framework name Kueue registers (`jobframework.GetIntegrationsList()`, sorted as Kueue lists
/// them in its refusal). A Kueue config naming one that quotagate does not implement still loads (the
/// name is reported by [`Configuration::ignored`]); a name outside this list is refused, as Kueue does.
pub const KUEUE_FRAMEWORKS: &[&str] = &[
    "batch/job",
    "deployment",
    "jobset.x-k8s.io/jobset",
    "kubeflow.org/jaxjob",
    "kubeflow.org/mpijob",
    "kubeflow.org/paddlejob",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob",
    "leaderworkerset.x-k8s.io/leaderworkerset",
    "pod",
    "ray.io/raycluster",
    "ray.io/rayjob",
    "ray.io/rayservice",
    "statefulset",
    "trainer.kubeflow.org/trainjob",
    "workload.codeflare.dev/appwrapper",
];

/// Framework names, as Kueue spells them.
pub mod framework {
    pub const BATCH_JOB: &str = "batch/job";
    pub const POD: &str = "pod";
    pub const RAY_CLUSTER: &str = "ray.io/raycluster";
    pub const RAY_SERVICE: &str = "ray.io/rayservice";
    pub const RAY_JOB: &str = "ray.io/rayjob";
}

/// The job kinds quotagate manages, from `integrations.frameworks`. Default: Kueue's default
/// (`batch/job`) plus the Ray kinds quotagate exists for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frameworks {
    pub batch_job: bool,
    pub ray_cluster: bool,
    pub ray_service: bool,
    pub ray_job: bool,
    /// Plain Pods and pod groups (`pod`): opt-in, as in Kueue, whose default set leaves it out (its
    /// webhook gates every queue-labelled Pod).
    pub pod: bool,
}

impl Default for Frameworks {
    fn default() -> Self {
        Frameworks {
            batch_job: true,
            ray_cluster: true,
            ray_service: true,
            ray_job: true,
            pod: false,
        }
    }
}

impl Frameworks {
    /// Only the named frameworks (names quotagate does not implement are skipped).
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut f = Frameworks {
            batch_job: false,
            ray_cluster: false,
            ray_service: false,
            ray_job: false,
            pod: false,
        };
        for n in names {
            match n {
                framework::BATCH_JOB => f.batch_job = true,
                framework::RAY_CLUSTER => f.ray_cluster = true,
                framework::RAY_SERVICE => f.ray_service = true,
                framework::RAY_JOB => f.ray_job = true,
                framework::POD => f.pod = true,
                _ => {}
            }
        }
        f
    }

    /// Whether quotagate implements the framework of this name.
    pub fn implemented(name: &str) -> bool {
        [
            framework::BATCH_JOB,
            framework::RAY_CLUSTER,
            framework::RAY_SERVICE,
            framework::RAY_JOB,
            framework::POD,
        ]
        .contains(&name)
    }
}

/// Kueue's `multiKueue` section (`apis/config/v1beta2/configuration_types.go` `MultiKueue`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MultiKueue {
    pub gc_interval: Option<GoDuration>,
    pub origin: Option<String>,
    pub worker_lost_timeout: Option<GoDuration>,
    pub dispatcher_name: Option<String>,
    /// Kept raw: refused when it lists any (quotagate has no generic adapter).
    pub external_frameworks: Option<Vec<Value>>,
    /// Kept raw: refused when present (quotagate does not connect through ClusterProfiles).
    pub cluster_profile: Option<Value>,
    pub incremental_dispatcher_config: Option<IncrementalDispatcherConfig>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IncrementalDispatcherConfig {
    pub step_size: Option<i32>,
}

/// Kueue's `MultiKueueDispatcherModeAllAtOnce`, the default: every worker of the config at once.
pub const DISPATCHER_ALL_AT_ONCE: &str = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once";
/// Kueue's `MultiKueueDispatcherModeIncremental`: workers nominated `stepSize` at a time.
pub const DISPATCHER_INCREMENTAL: &str = "kueue.x-k8s.io/multikueue-dispatcher-incremental";
/// Kueue's defaults (`apis/config/v1beta2/defaults.go`, `pkg/controller/workloaddispatcher`).
pub const DEFAULT_MULTIKUEUE_GC_INTERVAL: Duration = Duration::from_secs(60);
pub const DEFAULT_MULTIKUEUE_ORIGIN: &str = "multikueue";
pub const DEFAULT_MULTIKUEUE_WORKER_LOST_TIMEOUT: Duration = Duration::from_secs(15 * 60);
pub const DEFAULT_INCREMENTAL_STEP_SIZE: usize = 3;

/// Which MultiKueue dispatcher nominates the workers of a Workload (`multiKueue.dispatcherName`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dispatcher {
    /// Every connected worker of the MultiKueueConfig gets a copy at once.
    #[default]
    AllAtOnce,
    /// `step` more workers (in the MultiKueueConfig's order) each round, a round lasting Kueue's
    /// 5 minutes unless one of them admits the copy.
    Incremental { step: usize },
}

/// The `multiKueue` section with Kueue's defaults filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct MultiKueueSettings {
    /// Zero turns the garbage collector off (as in Kueue).
    pub gc_interval: Duration,
    pub origin: String,
    pub worker_lost_timeout: Duration,
    pub dispatcher: Dispatcher,
}

impl Default for MultiKueueSettings {
    fn default() -> Self {
        MultiKueueSettings {
            gc_interval: DEFAULT_MULTIKUEUE_GC_INTERVAL,
            origin: DEFAULT_MULTIKUEUE_ORIGIN.to_string(),
            worker_lost_timeout: DEFAULT_MULTIKUEUE_WORKER_LOST_TIMEOUT,
            dispatcher: Dispatcher::AllAtOnce,
        }
    }
}

impl MultiKueue {
    /// Kueue's `validateMultiKueue` (`pkg/config/validation.go`) and quotagate's refusals: only the
    /// two built-in dispatchers are run (an external dispatcher's name is refused).
    fn validate(&self) -> Result<(), ConfigError> {
        const NEGATIVE: &str = "must be greater than or equal to 0";
        let p = "multiKueue";
        if self.gc_interval.is_some_and(|d| d.negative && !d.value.is_zero()) {
            return Err(field(&format!("{p}.gcInterval"), NEGATIVE));
        }
        if self
            .worker_lost_timeout
            .is_some_and(|d| d.negative && !d.value.is_zero())
        {
            return Err(field(&format!("{p}.workerLostTimeout"), NEGATIVE));
        }
        if let Some(o) = &self.origin
            && !crate::api::names::is_label_value(o)
        {
            return Err(field(
                &format!("{p}.origin"),
                format!(
                    "Invalid value: {o:?}: must be a label value (at most 63 characters, alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric)"
                ),
            ));
        }
        if let Some(name) = &self.dispatcher_name
            && name != DISPATCHER_ALL_AT_ONCE
            && name != DISPATCHER_INCREMENTAL
        {
            return Err(field(
                &format!("{p}.dispatcherName"),
                format!(
                    "Unsupported value: {name:?}: supported values: {DISPATCHER_ALL_AT_ONCE:?}, {DISPATCHER_INCREMENTAL:?} (quotagate runs no external dispatcher)"
                ),
            ));
        }
        if let Some(idc) = &self.incremental_dispatcher_config {
            let idc_path = format!("{p}.incrementalDispatcherConfig");
            if self.dispatcher_name.as_deref() != Some(DISPATCHER_INCREMENTAL) {
                return Err(field(
                    &idc_path,
                    "incrementalDispatcherConfig is only valid when dispatcherName is set to the incremental dispatcher",
                ));
            }
            if idc.step_size.is_some_and(|s| s < 1) {
                return Err(field(
                    &format!("{idc_path}.stepSize"),
                    "must be greater than or equal to 1",
                ));
            }
        }
        if self.external_frameworks.as_ref().is_some_and(|f| !f.is_empty()) {
            return Err(ConfigError::NotImplemented {
                path: format!("{p}.externalFrameworks"),
                what: "MultiKueue's generic adapter for external frameworks",
            });
        }
        if self.cluster_profile.is_some() {
            return Err(ConfigError::NotImplemented {
                path: format!("{p}.clusterProfile"),
                what: "connecting to workers through ClusterProfiles",
            });
        }
        Ok(())
    }

    /// The section with Kueue's defaults (`SetDefaults_Configuration`): gcInterval 1m, origin
    /// `multikueue`, workerLostTimeout 15m, the AllAtOnce dispatcher, stepSize 3.
    pub fn settings(&self) -> MultiKueueSettings {
        let dispatcher = match self.dispatcher_name.as_deref() {
            Some(DISPATCHER_INCREMENTAL) => Dispatcher::Incremental {
                step: self
                    .incremental_dispatcher_config
                    .as_ref()
                    .and_then(|c| c.step_size)
                    .and_then(|s| usize::try_from(s).ok())
                    .filter(|s| *s >= 1)
                    .unwrap_or(DEFAULT_INCREMENTAL_STEP_SIZE),
            },
            _ => Dispatcher::AllAtOnce,
        };
        MultiKueueSettings {
            gc_interval: self
                .gc_interval
                .map(|d| d.value)
                .unwrap_or(DEFAULT_MULTIKUEUE_GC_INTERVAL),
            origin: self
                .origin
                .clone()
                .filter(|o| !o.is_empty())
                .unwrap_or_else(|| DEFAULT_MULTIKUEUE_ORIGIN.to_string()),
            worker_lost_timeout: self
                .worker_lost_timeout
                .map(|d| d.value)
                .unwrap_or(DEFAULT_MULTIKUEUE_WORKER_LOST_TIMEOUT),
            dispatcher,
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitForPodsReady {
    /// v1beta1's switch (off by default). In v1beta2 the feature is on by default; `enable: false`
    /// is still read there as the way to turn it off.
    pub enable: Option<bool>,
    pub timeout: Option<GoDuration>,
    pub block_admission: Option<bool>,
    pub requeuing_strategy: Option<RequeuingStrategy>,
    pub recovery_timeout: Option<GoDuration>,
    /// Kueue v0.20 (KEP-4803): the largest timeout a job's `kueue.x-k8s.io/wait-for-pods-ready`
    /// annotation may ask for (2h when left out).
    pub max_timeout_on_workload: Option<GoDuration>,
    /// Kueue v0.20 (KEP-13502, under `WaitForPodsReadyUnscheduledTimeout`): how long an admitted
    /// workload's required pods may stay unscheduled; `0s` or left out: only `timeout` applies.
    pub unscheduled_timeout: Option<GoDuration>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequeuingStrategy {
    pub timestamp: Option<RequeuingTimestamp>,
    /// `null` (the default): requeued without limit.
    pub backoff_limit_count: Option<i32>,
    pub backoff_base_seconds: Option<i32>,
    pub backoff_max_seconds: Option<i32>,
}

/// What orders a workload requeued after a PodsReady timeout in its queue.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum RequeuingTimestamp {
    /// The workload's creation.
    Creation,
    /// The eviction (the default): it goes behind the workloads already waiting.
    #[default]
    Eviction,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FairSharing {
    /// v1beta1's switch; in v1beta2 the section's presence turns fair sharing on.
    pub enable: Option<bool>,
    pub preemption_strategies: Option<Vec<PreemptionStrategy>>,
}

/// `fairSharing.preemptionStrategies` entries.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum PreemptionStrategy {
    LessThanOrEqualToFinalShare,
    LessThanInitialShare,
}

/// The strategy lists Kueue accepts, in its order.
const STRATEGY_SETS: [&[PreemptionStrategy]; 3] = [
    &[PreemptionStrategy::LessThanOrEqualToFinalShare],
    &[PreemptionStrategy::LessThanInitialShare],
    &[
        PreemptionStrategy::LessThanOrEqualToFinalShare,
        PreemptionStrategy::LessThanInitialShare,
    ],
];
/// `admissionFairSharing`: LocalQueues' recent usage orders the pending workloads of ClusterQueues
/// with `admissionScope.admissionMode: UsageBasedAdmissionFairSharing`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionFairSharing {
    /// After this time the recorded usage has decayed by half; `0s` (Kueue's value when absent)
    /// forgets it at every sample.
    pub usage_half_life_time: Option<GoDuration>,
    /// How often consumed resources are sampled; defaults to 5m.
    pub usage_sampling_interval: Option<GoDuration>,
    /// Weight of each resource in a LocalQueue's usage; 1 for a resource not named.
    pub resource_weights: Option<BTreeMap<String, f64>>,
}

/// admissionFairSharing, resolved: Kueue's defaults applied.
#[derive(Clone, Debug, PartialEq)]
pub struct AfsConfig {
    pub usage_half_life_time: Duration,
    pub usage_sampling_interval: Duration,
    pub resource_weights: BTreeMap<String, f64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resources {
    pub quota_check_strategy: Option<String>,
    pub exclude_resource_prefixes: Option<Vec<String>>,
    pub transformations: Option<Vec<Value>>,
    pub device_class_mappings: Option<Vec<Value>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectRetentionPolicies {
    pub workloads: Option<WorkloadRetention>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadRetention {
    pub after_finished: Option<GoDuration>,
    pub after_deactivated_by_kueue: Option<GoDuration>,
}

/// Kueue's `internalCertManagement`: the manager makes and renews its webhook's certificate
/// itself (on unless `enable: false`, as with cert-manager).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InternalCertManagement {
    pub enable: Option<bool>,
    pub webhook_service_name: Option<String>,
    pub webhook_secret_name: Option<String>,
}

/// `internalCertManagement` resolved: quotagate's names where Kueue's defaults name Kueue's objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertManagement {
    pub service_name: String,
    pub secret_name: String,
}

/// The webhook Service and Secret of the shipped manifests (`config/webhook`).
pub const WEBHOOK_SERVICE: &str = "quotagate-webhook-service";
pub const WEBHOOK_SECRET: &str = "quotagate-webhook-server-cert";

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Webhook {
    pub port: Option<u16>,
    pub host: Option<String>,
    pub cert_dir: Option<String>,
}

/// component-base's `LeaderElectionConfiguration`: the fields quotagate uses, the rest kept raw.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaderElection {
    pub leader_elect: Option<bool>,
    pub resource_name: Option<String>,
    pub resource_namespace: Option<String>,
    pub resource_lock: Option<String>,
    pub lease_duration: Option<GoDuration>,
    pub renew_deadline: Option<GoDuration>,
    pub retry_period: Option<GoDuration>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Health {
    pub health_probe_bind_address: Option<String>,
    pub readiness_endpoint_name: Option<String>,
    pub liveness_endpoint_name: Option<String>,
}

/// waitForPodsReady, resolved: Kueue's defaults applied and the feature known to be on.
#[derive(Clone, Debug, PartialEq)]
pub struct PodsReadyConfig {
    pub timeout: Duration,
    /// `None`: no recovery timeout (`recoveryTimeout: 0s`).
    pub recovery_timeout: Option<Duration>,
    pub block_admission: bool,
    pub timestamp: RequeuingTimestamp,
    pub backoff_limit_count: Option<i32>,
    pub backoff_base_seconds: i32,
    pub backoff_max_seconds: i32,
    /// With the `WorkloadLevelWaitForPodsReady` gate on: `maxTimeoutOnWorkload`, and a workload's
    /// `kueue.x-k8s.io/wait-for-pods-ready` annotation overrides the timeouts above for it.
    pub workload_level: Option<Duration>,
    /// With the `WaitForPodsReadyUnscheduledTimeout` gate on and a positive `unscheduledTimeout`:
    /// the workload's `PodsScheduled` condition is kept from its pods, and one whose required pods
    /// stay unscheduled this long after that was first seen is evicted (Kueue's
    /// `PodsScheduledTrackingEnabled`).
    pub unscheduled_timeout: Option<Duration>,
}

impl PodsReadyConfig {
    /// The feature on with Kueue's defaults and this timeout.
    pub fn with_timeout(timeout: Duration) -> Self {
        PodsReadyConfig {
            timeout,
            recovery_timeout: Some(timeout),
            block_admission: false,
            timestamp: RequeuingTimestamp::Eviction,
            backoff_limit_count: None,
            backoff_base_seconds: DEFAULT_BACKOFF_BASE_SECONDS,
            backoff_max_seconds: DEFAULT_BACKOFF_MAX_SECONDS,
            workload_level: None,
            unscheduled_timeout: None,
        }
    }

    /// The timeout and recovery timeout that apply to `wl`: its annotation's under the
    /// `WorkloadLevelWaitForPodsReady` gate, each falling back to the cluster-wide one.
    pub fn timeouts_for(
        &self,
        annotations: Option<&BTreeMap<String, String>>,
    ) -> (Duration, Option<Duration>) {
        match self.workload_level.and(pods_ready_annotation::of(annotations)) {
            Some(w) => (w.timeout(self.timeout), w.recovery_timeout(self.recovery_timeout)),
            None => (self.timeout, self.recovery_timeout),
        }
    }
}

impl Configuration {
    /// Reads a configuration file: YAML, strictly decoded, validated, and refused where it turns on
    /// what quotagate does not implement. Errors name the field path.
    pub fn parse(text: &str) -> Result<Configuration, ConfigError> {
        let raw: Value = serde_saphyr::from_str(text).map_err(|e| ConfigError::Yaml(e.to_string()))?;
        if !raw.is_object() {
            return Err(ConfigError::Yaml("the file is not a mapping of fields".into()));
        }
        let cfg: Configuration = serde_path_to_error::deserialize(raw).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." {
                "(top level)".to_string()
            } else {
                path
            };
            field(&path, e.into_inner().to_string())
        })?;
        cfg.version()?;
        cfg.validate()?;
        cfg.refuse_unimplemented()?;
        Ok(cfg)
    }

    pub fn version(&self) -> Result<Version, ConfigError> {
        if self.kind != KIND {
            return Err(field("kind", format!("must be {KIND:?}, not {:?}", self.kind)));
        }
        match self.api_version.split_once('/') {
            Some((GROUP, "v1beta2")) => Ok(Version::V1beta2),
            Some((GROUP, "v1beta1")) => Ok(Version::V1beta1),
            _ => Err(field(
                "apiVersion",
                format!(
                    "must be {GROUP}/v1beta2 or {GROUP}/v1beta1, not {:?}",
                    self.api_version
                ),
            )),
        }
    }

    fn gate(&self, name: &str) -> bool {
        self.gate_or(name, false)
    }

    /// A gate as configured, else Kueue's default for it.
    fn gate_or(&self, name: &str, default: bool) -> bool {
        self.feature_gates
            .as_ref()
            .and_then(|g| g.get(name))
            .copied()
            .unwrap_or(default)
    }

    /// Whether `featureGates.WorkloadPriorityClassDefaulting` is on (on by default, as in Kueue v0.20).
    pub fn workload_priority_class_defaulting(&self) -> bool {
        self.gate_or(WORKLOAD_PRIORITY_CLASS_DEFAULTING, true)
    }

    /// Whether `featureGates.RecomputeAssignmentUponPreemptionTargetsOverlap` is on (on by default,
    /// as in Kueue v0.20).
    pub fn recompute_upon_preemption_targets_overlap(&self) -> bool {
        self.gate_or(RECOMPUTE_UPON_PREEMPTION_TARGETS_OVERLAP, true)
    }

    /// `maxTimeoutOnWorkload` when the `WorkloadLevelWaitForPodsReady` gate is on and waitForPodsReady
    /// is (`None`: the annotation is ignored, as in Kueue with the gate off).
    pub fn workload_level_max_timeout(&self) -> Option<Duration> {
        if !self.gate(WORKLOAD_LEVEL_WAIT_FOR_PODS_READY) || !self.wait_for_pods_ready_enabled() {
            return None;
        }
        let max = self
            .wait_for_pods_ready
            .as_ref()
            .and_then(|w| w.max_timeout_on_workload)
            .map(|d| d.value)
            .filter(|d| !d.is_zero());
        Some(max.unwrap_or(pods_ready_annotation::DEFAULT_MAX_TIMEOUT_ON_WORKLOAD))
    }

    /// Whether `featureGates.PrioritizePreemptorWorkloads` turns Kueue's gate on (off by default).
    pub fn prioritize_preemptor_workloads(&self) -> bool {
        self.gate(PRIORITIZE_PREEMPTOR_WORKLOADS)
    }

    /// Whether waitForPodsReady is on (Kueue: on by default in v1beta2, off unless `enable` in v1beta1).
    pub fn wait_for_pods_ready_enabled(&self) -> bool {
        let w = self.wait_for_pods_ready.as_ref();
        let enable = w.and_then(|w| w.enable);
        match self.version() {
            Ok(Version::V1beta1) => enable == Some(true),
            Ok(Version::V1beta2) => enable != Some(false) && !self.gate(DISABLE_WAIT_FOR_PODS_READY),
            Err(_) => false,
        }
    }

    /// `objectRetentionPolicies.workloads.afterFinished`: how long a finished Workload is kept before
    /// it is deleted (`None`: kept for good, Kueue's default).
    pub fn workload_retention(&self) -> Option<std::time::Duration> {
        self.object_retention_policies
            .as_ref()?
            .workloads
            .as_ref()?
            .after_finished
            .map(|d| d.value)
    }

    /// waitForPodsReady with Kueue's defaults, when on.
    pub fn wait_for_pods_ready(&self) -> Option<PodsReadyConfig> {
        if !self.wait_for_pods_ready_enabled() {
            return None;
        }
        let w = self.wait_for_pods_ready.clone().unwrap_or_default();
        let timeout = w
            .timeout
            .map(|d| d.value)
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_WAIT_FOR_PODS_READY_TIMEOUT);
        // Kueue: recoveryTimeout defaults to the timeout; "0s" turns the recovery check off.
        let recovery_timeout = match w.recovery_timeout {
            None => Some(timeout),
            Some(d) if d.value.is_zero() => None,
            Some(d) => Some(d.value),
        };
        // v1beta1 defaulted blockAdmission to `enable` (true); v1beta2 defaults it to false.
        let block_default = self.version().ok() == Some(Version::V1beta1);
        let s = w.requeuing_strategy.unwrap_or_default();
        Some(PodsReadyConfig {
            timeout,
            recovery_timeout,
            block_admission: w.block_admission.unwrap_or(block_default),
            timestamp: s.timestamp.unwrap_or_default(),
            backoff_limit_count: s.backoff_limit_count,
            backoff_base_seconds: s.backoff_base_seconds.unwrap_or(DEFAULT_BACKOFF_BASE_SECONDS),
            backoff_max_seconds: s.backoff_max_seconds.unwrap_or(DEFAULT_BACKOFF_MAX_SECONDS),
            workload_level: self.workload_level_max_timeout(),
            unscheduled_timeout: w
                .unscheduled_timeout
                .filter(|_| self.gate(WAIT_FOR_PODS_READY_UNSCHEDULED_TIMEOUT))
                .map(|d| d.value)
                .filter(|d| !d.is_zero()),
        })
    }

    /// Fair sharing's preemption strategies when it is on (Kueue: the section's presence in
    /// v1beta2, `enable: true` in v1beta1, where an empty list defaults to both strategies).
    pub fn fair_sharing(&self) -> Option<Vec<PreemptionStrategy>> {
        let fs = self.fair_sharing.as_ref()?;
        let v1beta1 = self.version().ok()? == Version::V1beta1;
        if v1beta1 && fs.enable != Some(true) {
            return None;
        }
        match fs.preemption_strategies.clone().unwrap_or_default() {
            s if s.is_empty() => Some(STRATEGY_SETS[2].to_vec()),
            s => Some(s),
        }
    }

    /// admissionFairSharing with Kueue's defaults, when configured and its feature gate is not
    /// turned off (Kueue's `admissionfairsharing.Enabled`).
    pub fn admission_fair_sharing(&self) -> Option<AfsConfig> {
        let a = self.admission_fair_sharing.as_ref()?;
        let gate_off = self
            .feature_gates
            .as_ref()
            .and_then(|g| g.get(ADMISSION_FAIR_SHARING_GATE))
            == Some(&false);
        if gate_off {
            return None;
        }
        Some(AfsConfig {
            usage_half_life_time: a.usage_half_life_time.map(|d| d.value).unwrap_or_default(),
            usage_sampling_interval: a
                .usage_sampling_interval
                .map(|d| d.value)
                .filter(|d| !d.is_zero())
                .unwrap_or(DEFAULT_AFS_SAMPLING_INTERVAL),
            resource_weights: a.resource_weights.clone().unwrap_or_default(),
        })
    }

    /// `manageJobsWithoutQueueName` and `managedJobsNamespaceSelector`, Kueue's defaults filled in (the
    /// selector defaults to every namespace but kube-system and the controller's).
    pub fn managed_jobs(&self) -> ManagedJobs {
        self.managed_jobs_checked().unwrap_or_default()
    }

    fn managed_jobs_checked(&self) -> Result<ManagedJobs, ConfigError> {
        let namespace_selector = match &self.managed_jobs_namespace_selector {
            Some(v) => managed_jobs::parse_selector(v).map_err(|(at, why)| {
                let path = if at.is_empty() {
                    "managedJobsNamespaceSelector".to_string()
                } else {
                    format!("managedJobsNamespaceSelector.{at}")
                };
                field(&path, why)
            })?,
            None => managed_jobs::default_selector(self.namespace.as_deref()),
        };
        Ok(ManagedJobs {
            without_queue_name: self.manage_jobs_without_queue_name == Some(true),
            namespace_selector,
            pods_ready_max_on_workload: self.workload_level_max_timeout(),
            default_workload_priority_class: self.workload_priority_class_defaulting(),
            count_succeeded_pods_as_ready: self.gate_or(POD_INTEGRATION_COUNT_SUCCEEDED_PODS_AS_READY, true),
            pod_group_max_not_ready: self.gate(WAIT_FOR_PODS_READY_MAX_NOT_READY),
        })
    }

    /// The job kinds to manage: `integrations.frameworks` when given, else the default set.
    pub fn frameworks(&self) -> Frameworks {
        match self.integrations.as_ref().and_then(|i| i.frameworks.as_ref()) {
            Some(names) => Frameworks::from_names(names.iter().map(String::as_str)),
            None => Frameworks::default(),
        }
    }

    /// Kueue's `validateIntegrations`: every framework a name Kueue registers, none twice. (Kueue
    /// defaults an absent list to `batch/job` before validating, so absence is no error.)
    fn validate_integrations(&self) -> Result<(), ConfigError> {
        // Kueue decodes its file strictly into v1beta2's types, which have no `podOptions`.
        if self.version()? == Version::V1beta2
            && self
                .integrations
                .as_ref()
                .is_some_and(|i| i.pod_options.is_some())
        {
            return Err(field(
                "integrations.podOptions",
                "strict decoding error: unknown field \"integrations.podOptions\"",
            ));
        }
        let Some(names) = self.integrations.as_ref().and_then(|i| i.frameworks.as_ref()) else {
            return Ok(());
        };
        for (i, name) in names.iter().enumerate() {
            let path = format!("integrations.frameworks[{i}]");
            if !KUEUE_FRAMEWORKS.contains(&name.as_str()) {
                let supported: Vec<String> = KUEUE_FRAMEWORKS.iter().map(|n| format!("{n:?}")).collect();
                return Err(field(
                    &path,
                    format!(
                        "Unsupported value: {name:?}: supported values: {}",
                        supported.join(", ")
                    ),
                ));
            }
            if names[..i].contains(name) {
                return Err(field(&path, format!("Duplicate value: {name:?}")));
            }
        }
        Ok(())
    }

    /// The `multiKueue` section with Kueue's defaults (all defaults when the section is absent).
    pub fn multi_kueue(&self) -> MultiKueueSettings {
        self.multi_kueue
            .as_ref()
            .map(MultiKueue::settings)
            .unwrap_or_default()
    }

    /// Kueue's own checks of the fields quotagate uses (`pkg/config/validation.go`).
    fn validate(&self) -> Result<(), ConfigError> {
        self.validate_integrations()?;
        if let Some(mk) = &self.multi_kueue {
            mk.validate()?;
        }
        // KEP-4803: "Enabling DisableWaitForPodsReady and WorkloadLevelWaitForPodsReady feature
        // gates is not allowed."
        if self.gate(DISABLE_WAIT_FOR_PODS_READY) && self.gate(WORKLOAD_LEVEL_WAIT_FOR_PODS_READY) {
            return Err(field(
                "featureGates",
                "DisableWaitForPodsReady and WorkloadLevelWaitForPodsReady cannot both be enabled",
            ));
        }
        self.managed_jobs_checked()?;
        if self.fair_sharing().is_some() {
            let p = "fairSharing.preemptionStrategies";
            let given = self
                .fair_sharing
                .as_ref()
                .and_then(|f| f.preemption_strategies.clone());
            let v1beta2 = self.version()? == Version::V1beta2;
            match given {
                None => {
                    if v1beta2 {
                        return Err(field(p, "Required value: must be specified"));
                    }
                }
                Some(s) if s.is_empty() && v1beta2 => {
                    return Err(field(p, "Required value: must be specified"));
                }
                Some(s) if !s.is_empty() && !STRATEGY_SETS.contains(&s.as_slice()) => {
                    return Err(field(
                        p,
                        format!(
                            "Unsupported value: {s:?}: supported values: [LessThanOrEqualToFinalShare], [LessThanInitialShare], [LessThanOrEqualToFinalShare LessThanInitialShare]"
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        const NEGATIVE: &str = "must be greater than or equal to 0";
        if let Some(w) = self
            .object_retention_policies
            .as_ref()
            .and_then(|o| o.workloads.as_ref())
            && w.after_finished.is_some_and(|d| d.negative && !d.value.is_zero())
        {
            return Err(field("objectRetentionPolicies.workloads.afterFinished", NEGATIVE));
        }
        if let Some(w) = &self.wait_for_pods_ready {
            let p = "waitForPodsReady";
            if w.timeout.is_some_and(|d| d.negative && !d.value.is_zero()) {
                return Err(field(&format!("{p}.timeout"), NEGATIVE));
            }
            if w.recovery_timeout
                .is_some_and(|d| d.negative && !d.value.is_zero())
            {
                return Err(field(&format!("{p}.recoveryTimeout"), NEGATIVE));
            }
            if w.max_timeout_on_workload
                .is_some_and(|d| d.negative && !d.value.is_zero())
            {
                return Err(field(&format!("{p}.maxTimeoutOnWorkload"), NEGATIVE));
            }
            if w.unscheduled_timeout
                .is_some_and(|d| d.negative && !d.value.is_zero())
            {
                return Err(field(&format!("{p}.unscheduledTimeout"), NEGATIVE));
            }
            if let Some(s) = &w.requeuing_strategy {
                for (name, v) in [
                    ("backoffLimitCount", s.backoff_limit_count),
                    ("backoffBaseSeconds", s.backoff_base_seconds),
                    ("backoffMaxSeconds", s.backoff_max_seconds),
                ] {
                    if v.is_some_and(|v| v < 0) {
                        return Err(field(&format!("{p}.requeuingStrategy.{name}"), NEGATIVE));
                    }
                }
            }
        }
        if let Some(a) = &self.admission_fair_sharing {
            let p = "admissionFairSharing";
            if a.usage_half_life_time
                .is_some_and(|d| d.negative && !d.value.is_zero())
            {
                return Err(field(&format!("{p}.usageHalfLifeTime"), NEGATIVE));
            }
            // Kueue defaults a zero interval to 5m before validating, so only a negative one fails.
            if a.usage_sampling_interval
                .is_some_and(|d| d.negative && !d.value.is_zero())
            {
                return Err(field(
                    &format!("{p}.usageSamplingInterval"),
                    "must be greater than 0",
                ));
            }
            for (name, w) in a.resource_weights.iter().flatten() {
                if !w.is_finite() || *w < 0.0 {
                    return Err(field(&format!("{p}.resourceWeights[{name}]"), NEGATIVE));
                }
            }
        }
        if let Some(port) = self.webhook.as_ref().and_then(|w| w.port)
            && port == 0
        {
            return Err(field("webhook.port", "must be a port number (1-65535)"));
        }
        if let Some(addr) = self
            .health
            .as_ref()
            .and_then(|h| h.health_probe_bind_address.as_deref())
        {
            bind_address(addr).map_err(|e| field("health.healthProbeBindAddress", e))?;
        }
        Ok(())
    }

    /// Switches quotagate does not implement, refused when turned on.
    fn refuse_unimplemented(&self) -> Result<(), ConfigError> {
        let no = |path: &str, what: &'static str| {
            Err(ConfigError::NotImplemented {
                path: path.to_string(),
                what,
            })
        };
        if let Some(r) = &self.resources {
            if r.transformations.as_ref().is_some_and(|t| !t.is_empty()) {
                return no("resources.transformations", "resource transformations");
            }
            if r.exclude_resource_prefixes
                .as_ref()
                .is_some_and(|t| !t.is_empty())
            {
                return no(
                    "resources.excludeResourcePrefixes",
                    "excluding resources from quota",
                );
            }
            if r.device_class_mappings.as_ref().is_some_and(|t| !t.is_empty()) {
                return no("resources.deviceClassMappings", "dynamic resource allocation");
            }
            if r.quota_check_strategy
                .as_deref()
                .is_some_and(|s| s != "BlockUndeclared")
            {
                return no(
                    "resources.quotaCheckStrategy",
                    "quota check strategies other than BlockUndeclared",
                );
            }
        }
        if let Some(w) = self
            .object_retention_policies
            .as_ref()
            .and_then(|o| o.workloads.as_ref())
            && w.after_deactivated_by_kueue.is_some()
        {
            return no(
                "objectRetentionPolicies.workloads.afterDeactivatedByKueue",
                "deleting deactivated workloads",
            );
        }
        Ok(())
    }

    /// The sections present in the file that quotagate reads but has no use for (logged once).
    pub fn ignored(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut note = |present: bool, name: &'static str| {
            if present {
                out.push(name);
            }
        };
        note(self.client_connection.is_some(), "clientConnection");
        let integrations = self.integrations.as_ref();
        note(
            integrations
                .and_then(|i| i.frameworks.as_ref())
                .is_some_and(|f| f.iter().any(|n| !Frameworks::implemented(n))),
            "integrations.frameworks (other than batch/job, pod, ray.io/raycluster, ray.io/rayservice, ray.io/rayjob)",
        );
        note(
            integrations.is_some_and(|i| i.external_frameworks.is_some() || i.label_keys_to_copy.is_some()),
            "integrations.externalFrameworks/labelKeysToCopy",
        );
        note(
            integrations.is_some_and(|i| i.pod_options.is_some()),
            "integrations.podOptions (deprecated in v1beta1 and not applied, as Kueue drops it: managedJobsNamespaceSelector picks the Pods' namespaces)",
        );
        note(self.queue_visibility.is_some(), "queueVisibility");
        note(
            self.fair_sharing.is_some() && self.fair_sharing().is_none(),
            "fairSharing",
        );
        note(self.resources.is_some(), "resources");
        note(
            self.object_retention_policies.is_some() && self.workload_retention().is_none(),
            "objectRetentionPolicies",
        );
        note(self.visibility_server.is_some(), "visibilityServer");
        note(self.metrics.is_some(), "metrics");
        note(self.pprof_bind_address.is_some(), "pprofBindAddress");
        note(self.controller.is_some(), "controller");
        note(self.tls.is_some(), "tls");
        let w = self.webhook.as_ref();
        note(
            w.is_some_and(|w| w.host.is_some() || w.cert_dir.is_some()),
            "webhook.host/certDir",
        );
        let h = self.health.as_ref();
        note(
            h.is_some_and(|h| h.readiness_endpoint_name.is_some() || h.liveness_endpoint_name.is_some()),
            "health endpoint names",
        );
        let l = self.leader_election.as_ref();
        note(
            l.is_some_and(|l| {
                l.resource_lock.is_some()
                    || l.lease_duration.is_some()
                    || l.renew_deadline.is_some()
                    || l.retry_period.is_some()
            }),
            "leaderElection timings/resourceLock",
        );
        let gates = self.feature_gates.as_ref();
        note(
            gates.is_some_and(|g| {
                g.keys().any(|k| {
                    ![
                        DISABLE_WAIT_FOR_PODS_READY,
                        ADMISSION_FAIR_SHARING_GATE,
                        PRIORITIZE_PREEMPTOR_WORKLOADS,
                        WORKLOAD_LEVEL_WAIT_FOR_PODS_READY,
                        WAIT_FOR_PODS_READY_UNSCHEDULED_TIMEOUT,
                        WORKLOAD_PRIORITY_CLASS_DEFAULTING,
                        RECOMPUTE_UPON_PREEMPTION_TARGETS_OVERLAP,
                        POD_INTEGRATION_COUNT_SUCCEEDED_PODS_AS_READY,
                        WAIT_FOR_PODS_READY_MAX_NOT_READY,
                    ]
                    .contains(&k.as_str())
                })
            }),
            "featureGates (other than DisableWaitForPodsReady, AdmissionFairSharing, PrioritizePreemptorWorkloads, WorkloadLevelWaitForPodsReady, WaitForPodsReadyUnscheduledTimeout, WorkloadPriorityClassDefaulting, RecomputeAssignmentUponPreemptionTargetsOverlap, PodIntegrationCountSucceededPodsAsReady, WaitForPodsReadyMaxNotReady)",
        );
        out
    }

    /// Whether the manager keeps its webhook certificate itself, and under which names (on by
    /// default, as in Kueue).
    pub fn cert_management(&self) -> Option<CertManagement> {
        let c = self.internal_cert_management.clone().unwrap_or_default();
        (c.enable != Some(false)).then(|| CertManagement {
            service_name: c
                .webhook_service_name
                .unwrap_or_else(|| WEBHOOK_SERVICE.to_string()),
            secret_name: c
                .webhook_secret_name
                .unwrap_or_else(|| WEBHOOK_SECRET.to_string()),
        })
    }

    /// `health.healthProbeBindAddress` as a socket address.
    pub fn health_addr(&self) -> Option<std::net::SocketAddr> {
        let a = self.health.as_ref()?.health_probe_bind_address.as_deref()?;
        bind_address(a).ok()
    }
}

/// A Go bind address (`":8081"`, `"127.0.0.1:8081"`); an empty host binds every interface.
pub fn bind_address(a: &str) -> Result<std::net::SocketAddr, String> {
    let full = if a.starts_with(':') {
        format!("0.0.0.0{a}")
    } else {
        a.to_string()
    };
    full.parse()
        .map_err(|_| format!("{a:?} is not an address like \":8081\" or \"127.0.0.1:8081\""))
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
