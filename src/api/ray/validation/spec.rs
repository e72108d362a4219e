//! Rules for a `RayClusterSpec`, shared by RayCluster (`spec`) and RayService (`spec.rayClusterConfig`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, EnvVar};

use super::pod_resources::validate_pod_resources;
use super::syntax::{is_label_value, is_qualified_name, parse_version};
use super::{RayFeatureGates, validate_managed_by};
use crate::api::ray::constants as c;
use crate::api::ray::raycluster::{
    AuthMode, AutoscalerVersion, GcsFaultToleranceBackend, GcsFaultToleranceOptions, RayClusterSpec,
    WorkerGroupSpec,
};
use crate::api::validation::{ErrorType, FieldError, Path};

/// The most hosts one multi-host replica may have: its pods are created in one pass, so this bounds a
/// pass's memory. The largest TPU slices have a few thousand hosts.
pub const MAX_NUM_OF_HOSTS: i32 = 10_000;

const AUTOSCALER_V2_ENV: &str = c::ENV_RAY_ENABLE_AUTOSCALER_V2;
const GEN_AUTOSCALER_START_CMD: &str = "KUBERAY_GEN_AUTOSCALER_START_CMD";
const GCS_STORAGE_ENVS: [&str; 2] = ["RAY_gcs_storage", "RAY_gcs_storage_path"];
const GCS_STORAGE_VOLUME: &str = "gcs-storage";
const GCS_STORAGE_MOUNT_PATH: &str = "/data/gcs";
/// The cluster-spec rules shared by RayCluster (`spec`) and RayService (`spec.rayClusterConfig`), without
/// annotation-dependent rules and with KubeRay's default feature gates.
pub fn validate_ray_cluster_spec(spec: &RayClusterSpec, path: &Path) -> Vec<FieldError> {
    validate_ray_cluster_spec_with(spec, &BTreeMap::new(), path, RayFeatureGates::default())
}

/// The full cluster-spec rules; `annotations` are the owning object's (GCS fault tolerance reads them).
pub fn validate_ray_cluster_spec_with(
    spec: &RayClusterSpec,
    annotations: &BTreeMap<String, String>,
    path: &Path,
    gates: RayFeatureGates,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let head = &spec.head_group_spec;
    let head_path = path.child("headGroupSpec");
    let head_containers = head
        .template
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[]);
    let head_container = head_containers.first();
    if head_container.is_none() {
        errs.push(FieldError::required(
            &head_path.child("template").child("spec").child("containers"),
            "headGroupSpec should have at least one container",
        ));
    }
    let empty = BTreeMap::new();
    let head_params = head.ray_start_params.as_ref().unwrap_or(&empty);
    validate_group_resources(head_params, head.resources.as_ref(), &head_path, &mut errs);
    validate_group_labels(head_params, head.labels.as_ref(), &head_path, &mut errs);
    validate_pod_resources(&head.template, &head_path.child("template"), &mut errs);

    let autoscaling = spec.autoscaling_enabled();
    let head_env = head_container.and_then(|c| c.env.as_deref()).unwrap_or(&[]);
    let v2_env_on = env_value(head_env, AUTOSCALER_V2_ENV).is_some_and(|v| v == "1" || v == "true");
    let v2 =
        spec.autoscaler_options.as_ref().and_then(|o| o.version) == Some(AutoscalerVersion::V2) || v2_env_on;

    let mut names = BTreeSet::new();
    for (i, wg) in spec.worker_groups().iter().enumerate() {
        let p = path.child("workerGroupSpecs").index(i);
        validate_worker_group(
            wg,
            spec,
            autoscaling,
            v2,
            gates.job_deletion_policy,
            &p,
            &mut errs,
        );
        if !wg.group_name.is_empty() && !names.insert(wg.group_name.as_str()) {
            errs.push(FieldError::new(
                &p.child("groupName"),
                ErrorType::Duplicate,
                format!("worker group name {:?} is used more than once", wg.group_name),
            ));
        }
    }

    validate_gcs_ft(spec, annotations, head_container, path, gates, &mut errs);
    if head_params.get("redis-username").is_some_and(|v| !v.is_empty())
        || env_exists(head_env, c::ENV_REDIS_USERNAME)
    {
        errs.push(FieldError::forbidden(
            &head_path.child("rayStartParams").key("redis-username"),
            "cannot set redis username in rayStartParams or environment variables; use gcsFaultToleranceOptions.redisUsername",
        ));
    }

    validate_autoscaler(spec, autoscaling, head_env, path, &mut errs);
    validate_auth(spec, path, &mut errs);
    validate_managed_by(spec.managed_by.as_deref(), path, &mut errs);

    let gated = [
        (
            spec.history_server_options.is_some(),
            gates.history_server,
            "historyServerOptions",
            "RayClusterHistoryServer feature gate is not enabled",
            "the history server collector sidecar",
        ),
        (
            spec.network_policy.is_some(),
            gates.network_policy,
            "networkPolicy",
            "spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be enabled",
            "NetworkPolicy isolation",
        ),
        (
            spec.tls_options.is_some(),
            gates.mtls,
            "tlsOptions",
            "spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled",
            "mTLS through cert-manager",
        ),
    ];
    for (set, gate_on, field, gate_off, feature) in gated {
        if set {
            errs.push(FieldError::forbidden(
                &path.child(field),
                gated_message(gate_on, gate_off, feature),
            ));
        }
    }
    errs
}

/// An alpha field: KubeRay's refusal while its gate is off; with the gate on, quotagate still refuses it,
/// saying the feature is what is missing (not the gate).
fn gated_message(gate_on: bool, gate_off: &str, feature: &str) -> String {
    if gate_on {
        format!(
            "{feature} is not implemented by quotagate (its feature gate is on, but quotagate has no such feature)"
        )
    } else {
        gate_off.to_string()
    }
}

fn validate_worker_group(
    wg: &WorkerGroupSpec,
    spec: &RayClusterSpec,
    autoscaling: bool,
    v2: bool,
    job_deletion_policy: bool,
    p: &Path,
    errs: &mut Vec<FieldError>,
) {
    let name = &wg.group_name;
    if name.is_empty() {
        errs.push(FieldError::required(
            &p.child("groupName"),
            "worker group name must not be empty",
        ));
    } else if name == c::NODE_TYPE_HEAD || name == c::HEAD_GROUP_NAME {
        // Pod labels use `headgroup` for the head; a worker group of that name would select head Pods.
        errs.push(FieldError::invalid(
            &p.child("groupName"),
            format!("worker group name {name:?} is reserved for the head group"),
        ));
    }
    let containers = wg.template.spec.as_ref().map(|s| s.containers.len()).unwrap_or(0);
    if containers == 0 {
        errs.push(FieldError::required(
            &p.child("template").child("spec").child("containers"),
            "workerGroupSpec should have at least one container",
        ));
    }
    // KubeRay also requires minReplicas and maxReplicas without autoscaling, but the CRD defaults them (0 and
    // 2^31-1) before KubeRay ever sees the object, so with an API server in front that rule never fires; the
    // defaults are applied here the same way.
    for (field, v) in [
        ("replicas", wg.replicas),
        ("minReplicas", wg.min_replicas),
        ("maxReplicas", wg.max_replicas),
    ] {
        if let Some(v) = v.filter(|v| *v < 0) {
            errs.push(FieldError::invalid(
                &p.child(field),
                format!("worker group {name} has negative {field} {v}"),
            ));
        }
    }
    let (min, max) = (wg.min_replicas_or_default(), wg.max_replicas_or_default());
    if min > max {
        errs.push(FieldError::invalid(
            &p.child("minReplicas"),
            format!("worker group {name} has minReplicas {min} greater than maxReplicas {max}"),
        ));
    }
    if let Some(n) = wg.num_of_hosts.filter(|n| *n < 1) {
        errs.push(FieldError::invalid(
            &p.child("numOfHosts"),
            format!("worker group {name}: numOfHosts must be at least 1, got {n}"),
        ));
    }
    if let Some(n) = wg.num_of_hosts.filter(|n| *n > MAX_NUM_OF_HOSTS) {
        errs.push(FieldError::invalid(
            &p.child("numOfHosts"),
            format!("worker group {name}: numOfHosts must be at most {MAX_NUM_OF_HOSTS} (a multi-host replica's pods are created together), got {n}"),
        ));
    }
    let empty = BTreeMap::new();
    let params = wg.ray_start_params.as_ref().unwrap_or(&empty);
    validate_group_resources(params, wg.resources.as_ref(), p, errs);
    validate_pod_resources(&wg.template, &p.child("template"), errs);
    validate_group_labels(params, wg.labels.as_ref(), p, errs);
    if let Some(t) = wg.idle_timeout_seconds {
        if t < 0 {
            errs.push(FieldError::invalid(
                &p.child("idleTimeoutSeconds"),
                format!("worker group {name}: idleTimeoutSeconds must be non-negative, got {t}"),
            ));
        } else if !v2 {
            errs.push(FieldError::invalid(
                &p.child("idleTimeoutSeconds"),
                format!("worker group {name}: idleTimeoutSeconds is set, but autoscaler v2 is not enabled; set spec.autoscalerOptions.version to v2"),
            ));
        }
    }
    if let Some(prio) = wg.priority.filter(|p| *p != 0) {
        let msg = match spec
            .ray_version
            .as_deref()
            .filter(|v| !v.is_empty())
            .map(parse_version)
        {
            None => Some(
                "priority is set, but rayVersion was not specified; Ray 2.56.0 or later is required"
                    .to_string(),
            ),
            Some(None) => Some(format!(
                "priority is set, but rayVersion {:?} is not a version",
                spec.ray_version.as_deref().unwrap_or("")
            )),
            Some(Some(v)) if v < (2, 56, 0) => Some(format!(
                "priority is set, but the minimum Ray version is 2.56.0, got {}",
                spec.ray_version.as_deref().unwrap_or("")
            )),
            Some(Some(_)) if !v2 => Some(format!(
                "priority is set to {prio}, but autoscaler v2 is not enabled"
            )),
            Some(Some(_)) => None,
        };
        if let Some(msg) = msg {
            errs.push(FieldError::invalid(
                &p.child("priority"),
                format!("worker group {name}: {msg}"),
            ));
        }
    }
    if wg.is_suspended() && autoscaling {
        errs.push(FieldError::forbidden(
            &p.child("suspend"),
            format!("worker group {name} cannot be suspended with the autoscaler enabled"),
        ));
    }
    if wg.is_suspended() && !job_deletion_policy {
        errs.push(FieldError::forbidden(
            &p.child("suspend"),
            format!("worker group {name} can be suspended only when the RayJobDeletionPolicy feature gate is enabled"),
        ));
    }
}

fn validate_group_resources(
    params: &BTreeMap<String, String>,
    resources: Option<&BTreeMap<String, String>>,
    p: &Path,
    errs: &mut Vec<FieldError>,
) {
    let in_params = ["num-cpus", "num-gpus", "memory", "resources"]
        .iter()
        .any(|k| params.get(*k).is_some_and(|v| !v.is_empty()));
    if in_params && resources.is_some_and(|r| !r.is_empty()) {
        errs.push(FieldError::invalid(
            &p.child("resources"),
            "resource fields must not be set in both rayStartParams and resources; use only one",
        ));
    }
}

fn validate_group_labels(
    params: &BTreeMap<String, String>,
    labels: Option<&BTreeMap<String, String>>,
    p: &Path,
    errs: &mut Vec<FieldError>,
) {
    if params.contains_key("labels") {
        errs.push(FieldError::forbidden(
            &p.child("rayStartParams").key("labels"),
            "rayStartParams['labels'] is not supported; use the labels field instead",
        ));
    }
    for (k, v) in labels.into_iter().flatten() {
        if !is_qualified_name(k) {
            errs.push(FieldError::invalid(
                &p.child("labels").key(k),
                format!("invalid label key {k:?}: must be a qualified name"),
            ));
        }
        if !is_label_value(v) {
            errs.push(FieldError::invalid(
                &p.child("labels").key(k),
                format!("invalid label value {v:?} for key {k:?}"),
            ));
        }
    }
}

/// GCS fault tolerance: how it is switched on, then what the options forbid elsewhere and what
/// their backend forbids.
fn validate_gcs_ft(
    spec: &RayClusterSpec,
    annotations: &BTreeMap<String, String>,
    head: Option<&Container>,
    path: &Path,
    gates: RayFeatureGates,
    errs: &mut Vec<FieldError>,
) {
    let opts_path = path.child("gcsFaultToleranceOptions");
    let head_path = path.child("headGroupSpec");
    let env = head.and_then(|c| c.env.as_deref()).unwrap_or(&[]);
    validate_gcs_ft_switch(spec, annotations, env, &opts_path, errs);
    let Some(opts) = &spec.gcs_fault_tolerance_options else {
        return;
    };
    validate_gcs_ft_settings_outside_options(spec, annotations, env, &head_path, errs);
    match opts.backend.unwrap_or(GcsFaultToleranceBackend::Redis) {
        GcsFaultToleranceBackend::Redis => {
            if opts.storage.is_some() {
                errs.push(FieldError::forbidden(
                    &opts_path.child("storage"),
                    "storage only applies to the rocksdb backend",
                ));
            }
        }
        GcsFaultToleranceBackend::RocksDb => {
            validate_rocksdb_options(opts, &opts_path, gates, errs);
            validate_rocksdb_head(spec, head, env, &head_path, errs);
        }
    }
}

/// GCS fault tolerance is switched on one way: not both the legacy annotation and the options, and
/// not implicitly by a Redis address on the head container.
fn validate_gcs_ft_switch(
    spec: &RayClusterSpec,
    annotations: &BTreeMap<String, String>,
    env: &[EnvVar],
    opts_path: &Path,
    errs: &mut Vec<FieldError>,
) {
    let ft_annotation = annotations.get(c::ANNOTATION_FT_ENABLED);
    if ft_annotation.is_some_and(|v| !v.is_empty()) && spec.gcs_fault_tolerance_options.is_some() {
        errs.push(FieldError::invalid(
            &opts_path.clone(),
            format!("the {} annotation and gcsFaultToleranceOptions are both set; use only gcsFaultToleranceOptions", c::ANNOTATION_FT_ENABLED),
        ));
    }
    let ft_enabled = ft_annotation.is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || spec.gcs_fault_tolerance_options.is_some();
    if !ft_enabled && env_exists(env, c::ENV_RAY_REDIS_ADDRESS) {
        errs.push(FieldError::invalid(
            &opts_path.clone(),
            format!("{} is set on the head container, which implicitly enables GCS fault tolerance; set gcsFaultToleranceOptions", c::ENV_RAY_REDIS_ADDRESS),
        ));
    }
}

/// With gcsFaultToleranceOptions, the Redis settings it carries may not also be written elsewhere:
/// in rayStartParams, the head container's env or the external storage annotation.
fn validate_gcs_ft_settings_outside_options(
    spec: &RayClusterSpec,
    annotations: &BTreeMap<String, String>,
    env: &[EnvVar],
    head_path: &Path,
    errs: &mut Vec<FieldError>,
) {
    let head_params = spec.head_group_spec.ray_start_params.as_ref();
    if head_params
        .and_then(|p| p.get("redis-password"))
        .is_some_and(|v| !v.is_empty())
    {
        errs.push(FieldError::forbidden(
            &head_path.child("rayStartParams").key("redis-password"),
            "cannot set redis-password in rayStartParams with gcsFaultToleranceOptions; use gcsFaultToleranceOptions.redisPassword",
        ));
    }
    for (var, instead) in [
        (c::ENV_REDIS_PASSWORD, "redisPassword"),
        (c::ENV_RAY_REDIS_ADDRESS, "redisAddress"),
    ] {
        if env_exists(env, var) {
            errs.push(FieldError::forbidden(
                &head_path.child("template").child("spec").child("containers").index(0).child("env"),
                format!("cannot set {var} on the head container with gcsFaultToleranceOptions; use gcsFaultToleranceOptions.{instead}"),
            ));
        }
    }
    if annotations
        .get(c::ANNOTATION_EXTERNAL_STORAGE_NAMESPACE)
        .is_some_and(|v| !v.is_empty())
    {
        errs.push(FieldError::forbidden(
            &Path::root("metadata").child("annotations").key(c::ANNOTATION_EXTERNAL_STORAGE_NAMESPACE),
            "cannot be set with gcsFaultToleranceOptions; use gcsFaultToleranceOptions.externalStorageNamespace",
        ));
    }
}

/// The rocksdb backend's options: the feature gate and a claim of the user's, no Redis field, and a
/// claim name without the fields that would size a new claim.
fn validate_rocksdb_options(
    opts: &GcsFaultToleranceOptions,
    opts_path: &Path,
    gates: RayFeatureGates,
    errs: &mut Vec<FieldError>,
) {
    // With the gate on, the head pod mounts the user's claim as KubeRay does; an
    // operator-managed `<cluster>-gcs-pvc` is the part quotagate does not create.
    let own_claim = opts
        .storage
        .as_ref()
        .and_then(|s| s.claim_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if !gates.embedded_gcs_storage || !own_claim {
        errs.push(FieldError::forbidden(
            &opts_path.child("backend"),
            gated_message(
                gates.embedded_gcs_storage,
                "the embedded RocksDB GCS fault tolerance backend (GcsFaultToleranceOptions.Backend: 'rocksdb') requires the GCSFaultToleranceEmbeddedStorage feature gate to be enabled",
                "an operator-managed PersistentVolumeClaim for the embedded RocksDB GCS store (set storage.claimName to a claim you created instead)",
            ),
        ));
    }
    let redis_fields = [
        (
            "redisAddress",
            opts.redis_address.as_deref().is_some_and(|s| !s.is_empty()),
        ),
        ("redisUsername", opts.redis_username.is_some()),
        ("redisPassword", opts.redis_password.is_some()),
        (
            "externalStorageNamespace",
            opts.external_storage_namespace
                .as_deref()
                .is_some_and(|s| !s.is_empty()),
        ),
    ];
    for (field, set) in redis_fields {
        if set {
            errs.push(FieldError::forbidden(
                &opts_path.child(field),
                "cannot be set when backend is rocksdb",
            ));
        }
    }
    if let Some(st) = opts
        .storage
        .as_ref()
        .filter(|s| s.claim_name.as_deref().is_some_and(|n| !n.is_empty()))
        && (st.size.is_some()
            || st.storage_class_name.is_some()
            || st.access_modes.as_ref().is_some_and(|a| !a.is_empty()))
    {
        errs.push(FieldError::invalid(
            &opts_path.child("storage").child("claimName"),
            "claimName is mutually exclusive with size, storageClassName and accessModes",
        ));
    }
}

/// The rocksdb backend's store on the head is the operator's: no storage env, mount or volume of
/// the user's with its names.
fn validate_rocksdb_head(
    spec: &RayClusterSpec,
    head: Option<&Container>,
    env: &[EnvVar],
    head_path: &Path,
    errs: &mut Vec<FieldError>,
) {
    let container_path = head_path
        .child("template")
        .child("spec")
        .child("containers")
        .index(0);
    if GCS_STORAGE_ENVS.iter().any(|v| env_exists(env, v)) {
        errs.push(FieldError::forbidden(
            &container_path.child("env"),
            "RAY_gcs_storage and RAY_gcs_storage_path are managed by the operator with the rocksdb backend",
        ));
    }
    let mounts = head.and_then(|c| c.volume_mounts.as_deref()).unwrap_or(&[]);
    if mounts
        .iter()
        .any(|m| m.mount_path == GCS_STORAGE_MOUNT_PATH || m.name == GCS_STORAGE_VOLUME)
    {
        errs.push(FieldError::forbidden(
            &container_path.child("volumeMounts"),
            "the gcs-storage mount is managed by the operator with the rocksdb backend",
        ));
    }
    let volumes = spec
        .head_group_spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or(&[]);
    if volumes.iter().any(|v| v.name == GCS_STORAGE_VOLUME) {
        errs.push(FieldError::forbidden(
            &head_path.child("template").child("spec").child("volumes"),
            "the gcs-storage volume is managed by the operator with the rocksdb backend",
        ));
    }
}

fn validate_autoscaler(
    spec: &RayClusterSpec,
    autoscaling: bool,
    head_env: &[EnvVar],
    path: &Path,
    errs: &mut Vec<FieldError>,
) {
    let head_env_path = path
        .child("headGroupSpec")
        .child("template")
        .child("spec")
        .child("containers")
        .index(0)
        .child("env");
    if !autoscaling {
        if let Some(v) = env_value(head_env, AUTOSCALER_V2_ENV).filter(|v| *v == "1" || *v == "true") {
            errs.push(FieldError::invalid(
                &head_env_path.clone(),
                format!("{AUTOSCALER_V2_ENV} cannot be {v:?} when enableInTreeAutoscaling is false"),
            ));
        }
    } else {
        let opts = spec.autoscaler_options.as_ref();
        if opts.and_then(|o| o.version).is_some() && env_exists(head_env, AUTOSCALER_V2_ENV) {
            errs.push(FieldError::invalid(
                &head_env_path,
                format!("both spec.autoscalerOptions.version and head env {AUTOSCALER_V2_ENV} are set; use only the former"),
            ));
        }
        if opts.and_then(|o| o.version) == Some(AutoscalerVersion::V2) {
            let never_or_unset = |t: &k8s_openapi::api::core::v1::PodTemplateSpec| {
                t.spec
                    .as_ref()
                    .and_then(|s| s.restart_policy.as_deref())
                    .is_none_or(|r| r.is_empty() || r == "Never")
            };
            if !never_or_unset(&spec.head_group_spec.template) {
                errs.push(FieldError::invalid(
                    &path
                        .child("headGroupSpec")
                        .child("template")
                        .child("spec")
                        .child("restartPolicy"),
                    "restartPolicy for the head Pod must be Never or unset with autoscaler v2",
                ));
            }
            for (i, wg) in spec.worker_groups().iter().enumerate() {
                if !never_or_unset(&wg.template) {
                    errs.push(FieldError::invalid(
                        &path
                            .child("workerGroupSpecs")
                            .index(i)
                            .child("template")
                            .child("spec")
                            .child("restartPolicy"),
                        format!(
                            "restartPolicy for worker group {} must be Never or unset with autoscaler v2",
                            wg.group_name
                        ),
                    ));
                }
            }
        }
    }
    if let Some(opts) = &spec.autoscaler_options {
        let p = path.child("autoscalerOptions");
        if let Some(t) = opts.idle_timeout_seconds.filter(|t| *t < 0) {
            errs.push(FieldError::invalid(
                &p.child("idleTimeoutSeconds"),
                format!("must be non-negative, got {t}"),
            ));
        }
        if env_exists(opts.env.as_deref().unwrap_or(&[]), GEN_AUTOSCALER_START_CMD) {
            errs.push(FieldError::forbidden(
                &p.child("env"),
                format!("must not contain {GEN_AUTOSCALER_START_CMD}: the operator injects it"),
            ));
        }
    }
}

fn validate_auth(spec: &RayClusterSpec, path: &Path, errs: &mut Vec<FieldError>) {
    let Some(auth) = &spec.auth_options else {
        return;
    };
    let p = path.child("authOptions");
    let k8s_auth = auth.enable_k8s_token_auth.unwrap_or(false);
    if auth.mode != Some(AuthMode::Token) {
        if k8s_auth {
            errs.push(FieldError::invalid(
                &p.child("enableK8sTokenAuth"),
                "enableK8sTokenAuth requires authOptions.mode token",
            ));
        }
        return;
    }
    let version_path = path.child("rayVersion");
    let Some(raw) = spec.ray_version.as_deref().filter(|v| !v.is_empty()) else {
        errs.push(FieldError::required(
            &version_path,
            "authOptions.mode is token, which requires rayVersion 2.52.0 or later",
        ));
        return;
    };
    let Some(v) = parse_version(raw) else {
        errs.push(FieldError::invalid(
            &version_path,
            format!("authOptions.mode is token but rayVersion {raw:?} is not a version"),
        ));
        return;
    };
    if v < (2, 52, 0) {
        errs.push(FieldError::invalid(
            &version_path.clone(),
            format!("authOptions.mode is token, which requires Ray 2.52.0 or later, got {raw}"),
        ));
    }
    if k8s_auth {
        if v < (2, 55, 0) {
            errs.push(FieldError::invalid(
                &version_path,
                format!("enableK8sTokenAuth requires Ray 2.55.0 or later, got {raw}"),
            ));
        }
        if auth.secret_name.as_deref().is_some_and(|s| !s.is_empty()) {
            errs.push(FieldError::invalid(
                &p.child("secretName"),
                "cannot be set together with enableK8sTokenAuth",
            ));
        }
    }
}

fn env_exists(env: &[EnvVar], name: &str) -> bool {
    env.iter().any(|e| e.name == name)
}

fn env_value<'a>(env: &'a [EnvVar], name: &str) -> Option<&'a str> {
    env.iter()
        .find(|e| e.name == name)
        .map(|e| e.value.as_deref().unwrap_or(""))
}
