//! Optional Pod wiring driven by spec features: GCS fault tolerance (KubeRay's `configureGCSFaultTolerance`)
//! and token authentication (`configureTokenAuth`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, PersistentVolumeClaimVolumeSource, PodSpec, ProjectedVolumeSource,
    SecretKeySelector, ServiceAccountTokenProjection, Volume, VolumeMount, VolumeProjection,
};

use super::names;
use super::startcmd::NodeType;
use crate::api::ray::RayCluster;
use crate::api::ray::constants as c;
use crate::api::ray::raycluster::{
    AuthMode, GcsFaultToleranceBackend, GcsFaultToleranceOptions, RedisCredential,
};

const GCS_STORAGE_VOLUME: &str = "gcs-storage";
const GCS_STORAGE_PATH: &str = "/data/gcs";
const TOKEN_VOLUME: &str = "ray-token";
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/ray.io/serviceaccount";

fn has(c: &Container, name: &str) -> bool {
    c.env.iter().flatten().any(|e| e.name == name)
}

fn push(c: &mut Container, e: EnvVar) {
    c.env.get_or_insert_with(Vec::new).push(e);
}

fn plain(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    }
}

/// Whether GCS fault tolerance is on: `gcsFaultToleranceOptions` or the legacy `ray.io/ft-enabled: "true"`.
pub fn gcs_ft_enabled(cluster: &RayCluster) -> bool {
    let legacy = cluster
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(c::ANNOTATION_FT_ENABLED));
    legacy.is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || cluster.spec.gcs_fault_tolerance_options.is_some()
}

/// PVC of the embedded RocksDB store: the user's claim, else `<cluster>-gcs-pvc`.
pub fn gcs_storage_pvc_name(cluster: &RayCluster) -> String {
    let claim = cluster
        .spec
        .gcs_fault_tolerance_options
        .as_ref()
        .and_then(|o| o.storage.as_ref())
        .and_then(|s| s.claim_name.clone());
    claim
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| format!("{}-gcs-pvc", cluster.metadata.name.as_deref().unwrap_or("")))
}

/// Env, annotations, params and volumes for GCS fault tolerance. `params` are the node's rayStartParams.
pub(super) fn configure_gcs_ft(
    cluster: &RayCluster,
    node: NodeType,
    annotations: &mut BTreeMap<String, String>,
    params: &mut BTreeMap<String, String>,
    spec: &mut PodSpec,
) {
    let enabled = gcs_ft_enabled(cluster);
    if node == NodeType::Head {
        annotations.insert(c::ANNOTATION_FT_ENABLED.into(), enabled.to_string());
    }
    if !enabled {
        return;
    }
    let Some(ray) = spec.containers.first_mut() else {
        return;
    };
    if node == NodeType::Worker {
        worker_outlives_gcs_restart(ray);
        return;
    }
    let options = cluster.spec.gcs_fault_tolerance_options.as_ref();
    if options.and_then(|o| o.backend) == Some(GcsFaultToleranceBackend::RocksDb) {
        mount_rocksdb_store(cluster, options, ray, &mut spec.volumes);
        return;
    }
    let storage_ns = redis_storage_namespace(cluster, options);
    annotations.insert(
        c::ANNOTATION_EXTERNAL_STORAGE_NAMESPACE.into(),
        storage_ns.clone(),
    );
    if !has(ray, c::ENV_RAY_EXTERNAL_STORAGE_NS) {
        push(ray, plain(c::ENV_RAY_EXTERNAL_STORAGE_NS, &storage_ns));
    }
    redis_address_and_credentials(options, ray, params);
}

/// A worker's reconnect timeout: workers outlive a GCS restart (typically ~2 minutes) instead of
/// exiting after Ray's 60 s default.
fn worker_outlives_gcs_restart(ray: &mut Container) {
    if !has(ray, c::ENV_RAY_GCS_RPC_SERVER_RECONNECT_TIMEOUT_S) {
        push(
            ray,
            plain(
                c::ENV_RAY_GCS_RPC_SERVER_RECONNECT_TIMEOUT_S,
                c::DEFAULT_WORKER_GCS_RECONNECT_TIMEOUT_S,
            ),
        );
    }
}

/// The head's embedded RocksDB store: its env, its mount and the claim it lives on.
fn mount_rocksdb_store(
    cluster: &RayCluster,
    options: Option<&GcsFaultToleranceOptions>,
    ray: &mut Container,
    volumes: &mut Option<Vec<Volume>>,
) {
    if !has(ray, "RAY_gcs_storage") {
        push(ray, plain("RAY_gcs_storage", "rocksdb"));
    }
    if !has(ray, "RAY_gcs_storage_path") {
        push(ray, plain("RAY_gcs_storage_path", GCS_STORAGE_PATH));
    }
    let sub_path = options
        .and_then(|o| o.storage.as_ref())
        .and_then(|s| s.sub_path.clone())
        .filter(|s| !s.is_empty());
    ray.volume_mounts.get_or_insert_with(Vec::new).push(VolumeMount {
        name: GCS_STORAGE_VOLUME.into(),
        mount_path: GCS_STORAGE_PATH.into(),
        sub_path,
        ..Default::default()
    });
    volumes.get_or_insert_with(Vec::new).push(Volume {
        name: GCS_STORAGE_VOLUME.into(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: gcs_storage_pvc_name(cluster),
            ..Default::default()
        }),
        ..Default::default()
    });
}

/// The Redis namespace that isolates this cluster's keys: the options' one, else the legacy
/// annotation's, else the cluster's UID.
fn redis_storage_namespace(cluster: &RayCluster, options: Option<&GcsFaultToleranceOptions>) -> String {
    let mut storage_ns = cluster.metadata.uid.clone().unwrap_or_default();
    if let Some(v) = cluster
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(c::ANNOTATION_EXTERNAL_STORAGE_NAMESPACE))
    {
        storage_ns = v.clone();
    }
    if let Some(ns) = options
        .and_then(|o| o.external_storage_namespace.clone())
        .filter(|s| !s.is_empty())
    {
        storage_ns = ns;
    }
    storage_ns
}

/// The head's Redis address and credentials as env vars (the start flags reference them), or with
/// the legacy annotation the literal password param exported for the Redis cleanup Job.
fn redis_address_and_credentials(
    options: Option<&GcsFaultToleranceOptions>,
    ray: &mut Container,
    params: &mut BTreeMap<String, String>,
) {
    match options {
        Some(o) => {
            push(
                ray,
                plain(c::ENV_RAY_REDIS_ADDRESS, o.redis_address.as_deref().unwrap_or("")),
            );
            // Credentials travel as env vars (possibly from Secrets); the flags reference them.
            let creds = [
                ("redis-username", c::ENV_REDIS_USERNAME, &o.redis_username),
                ("redis-password", c::ENV_REDIS_PASSWORD, &o.redis_password),
            ];
            for (param, env, cred) in creds {
                if let Some(RedisCredential { value, value_from }) = cred {
                    params.insert(param.into(), format!("${env}"));
                    push(
                        ray,
                        EnvVar {
                            name: env.into(),
                            value: value.clone(),
                            value_from: value_from.clone(),
                        },
                    );
                }
            }
        }
        None => {
            // Legacy annotation with a literal password param: export it for the Redis cleanup Job.
            if !has(ray, c::ENV_REDIS_PASSWORD)
                && let Some(pw) = params.get("redis-password").cloned()
            {
                push(ray, plain(c::ENV_REDIS_PASSWORD, &pw));
            }
        }
    }
}

/// Token-auth env (and the projected token volume for Kubernetes token auth) on the Ray container and on the
/// autoscaler sidecar and `wait-gcs-ready` init container when present.
pub(super) fn configure_token_auth(cluster: &RayCluster, spec: &mut PodSpec) {
    let Some(auth) = cluster
        .spec
        .auth_options
        .as_ref()
        .filter(|a| a.mode == Some(AuthMode::Token))
    else {
        return;
    };
    let k8s = auth.enable_k8s_token_auth.unwrap_or(false);
    let secret = auth
        .secret_name
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| names::check_name(cluster.metadata.name.as_deref().unwrap_or("")));
    let wire = |c: &mut Container| {
        if !has(c, c::ENV_RAY_AUTH_MODE) {
            push(c, plain(c::ENV_RAY_AUTH_MODE, "token"));
        }
        if k8s {
            if !has(c, "RAY_ENABLE_K8S_TOKEN_AUTH") {
                push(c, plain("RAY_ENABLE_K8S_TOKEN_AUTH", "true"));
            }
            let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
            if !mounts.iter().any(|m| m.name == TOKEN_VOLUME) {
                mounts.push(VolumeMount {
                    name: TOKEN_VOLUME.into(),
                    mount_path: TOKEN_MOUNT_PATH.into(),
                    read_only: Some(true),
                    ..Default::default()
                });
            }
        } else if !has(c, c::ENV_RAY_AUTH_TOKEN) {
            push(
                c,
                EnvVar {
                    name: c::ENV_RAY_AUTH_TOKEN.into(),
                    value_from: Some(EnvVarSource {
                        secret_key_ref: Some(SecretKeySelector {
                            name: secret.clone(),
                            key: "auth_token".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            );
        }
    };
    for (i, container) in spec.containers.iter_mut().enumerate() {
        if i == 0 || container.name == "autoscaler" {
            wire(container);
        }
    }
    for init in spec
        .init_containers
        .iter_mut()
        .flatten()
        .filter(|c| c.name == "wait-gcs-ready")
    {
        wire(init);
    }
    if k8s {
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        if !volumes.iter().any(|v| v.name == TOKEN_VOLUME) {
            volumes.push(Volume {
                name: TOKEN_VOLUME.into(),
                projected: Some(ProjectedVolumeSource {
                    sources: Some(vec![VolumeProjection {
                        service_account_token: Some(ServiceAccountTokenProjection {
                            path: "token".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
    }
}
