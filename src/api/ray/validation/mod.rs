//! KubeRay's admission rules for RayCluster and RayService (`utils/validation.go` in KubeRay v1.7), plus the
//! CRD-level rules (CEL, enums, minimums) a real API server would enforce, reported as field errors.
//!
//! Unlike KubeRay, which stops at the first broken rule, every broken rule is reported.

mod pod_resources;
mod raycronjob;
mod rayjob;
mod spec;
mod syntax;

use super::constants as c;
use super::raycluster::RayCluster;
use super::rayservice::{RayService, RayServiceUpgradeType};
use crate::api::validation::{ErrorType, FieldError, Path};

pub use raycronjob::{time_zone, validate_ray_cron_job_spec, validate_ray_cron_job_with};
pub use rayjob::{validate_ray_job, validate_ray_job_spec, validate_ray_job_status, validate_ray_job_with};
pub use spec::{validate_ray_cluster_spec, validate_ray_cluster_spec_with};
pub(crate) use syntax::is_dns1035_label;
pub use syntax::parse_initializing_timeout;

/// KubeRay v1.7 feature gates that change what validation accepts; `Default` is KubeRay's default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RayFeatureGates {
    pub history_server: bool,
    pub network_policy: bool,
    pub mtls: bool,
    pub embedded_gcs_storage: bool,
    /// Beta, on: off refuses worker-group `suspend` (KubeRay ties it to the RayJob deletion policy).
    pub job_deletion_policy: bool,
    /// Alpha, off: on, SidecarMode's submitter container restarts on failure (up to
    /// `submitterConfig.backoffLimit` times) and resubmits only a job the head does not know.
    pub sidecar_submitter_restart: bool,
    /// Alpha, off: on, the RayCronJob controller runs (KubeRay starts it only with the gate).
    pub ray_cron_job: bool,
}

impl Default for RayFeatureGates {
    /// The four alpha ones are off in KubeRay v1.7, RayJobDeletionPolicy (beta) is on.
    fn default() -> Self {
        Self {
            history_server: false,
            network_policy: false,
            mtls: false,
            embedded_gcs_storage: false,
            job_deletion_policy: true,
            sidecar_submitter_restart: false,
            ray_cron_job: false,
        }
    }
}

/// Validates a RayCluster as KubeRay would before reconciling it, with KubeRay's default gates.
pub fn validate_ray_cluster(rc: &RayCluster) -> Vec<FieldError> {
    validate_ray_cluster_with(rc, RayFeatureGates::default())
}

/// Validates a RayCluster as KubeRay would with `gates` (`--feature-gates`).
pub fn validate_ray_cluster_with(rc: &RayCluster, gates: RayFeatureGates) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let meta = Path::root("metadata");
    validate_name(
        rc.metadata.name.as_deref(),
        c::MAX_RAY_CLUSTER_NAME_LENGTH,
        "RayCluster",
        &meta,
        &mut errs,
    );
    let spec_path = Path::root("spec");
    if rc.spec.upgrade_type().is_some() {
        let creator = rc
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(c::LABEL_ORIGINATED_FROM_CRD));
        if let Some(creator) = creator.filter(|c2| *c2 == c::CRD_RAY_JOB || *c2 == c::CRD_RAY_SERVICE) {
            errs.push(FieldError::forbidden(
                &spec_path.child("upgradeStrategy"),
                format!("upgradeStrategy cannot be set when the RayCluster is created by {creator}"),
            ));
        }
    }
    let annotations = rc.metadata.annotations.clone().unwrap_or_default();
    errs.extend(validate_ray_cluster_spec_with(
        &rc.spec,
        &annotations,
        &spec_path,
        gates,
    ));
    if let Some(status) = &rc.status {
        let conds = status.conditions.as_deref().unwrap_or(&[]);
        let is_true = |t: &str| conds.iter().any(|x| x.type_ == t && x.status == "True");
        if is_true(c::COND_RAY_CLUSTER_SUSPENDING) && is_true(c::COND_RAY_CLUSTER_SUSPENDED) {
            errs.push(FieldError::invalid(
                "status.conditions",
                "RayClusterSuspending and RayClusterSuspended must not both be True",
            ));
        }
    }
    errs
}

/// Validates a RayService as KubeRay would before reconciling it, with KubeRay's default gates.
pub fn validate_ray_service(rs: &RayService) -> Vec<FieldError> {
    validate_ray_service_with(rs, RayFeatureGates::default())
}

/// KubeRay's `ValidateRayServiceMetadata` prefix: its controller reports such errors with the event
/// reason `InvalidRayServiceMetadata` (`InvalidRayServiceSpec` for the others).
pub const RAY_SERVICE_METADATA_INVALID: &str = "The RayService metadata is invalid";

/// KubeRay's message for a RayService name over 47 characters (`ValidateRayServiceMetadata`,
/// `ray-operator/controllers/ray/utils/validation.go`), or `None` when the name fits.
pub fn ray_service_name_too_long(name: &str) -> Option<String> {
    (name.len() > c::MAX_RAY_SERVICE_NAME_LENGTH).then(|| {
        format!(
            "{RAY_SERVICE_METADATA_INVALID}: RayService name should be no more than {} characters",
            c::MAX_RAY_SERVICE_NAME_LENGTH
        )
    })
}

/// Whether `e` is the one RayService rule an object may break and still be stored: the name length.
/// KubeRay's CRD and its default install (webhook off) store a 48-character name and its controller
/// reports `Ready=False/ValidationFailed` without creating anything
/// (`ray-operator/test/e2erayservice/rayservice_validation_test.go`, "RayService name too long with 48
/// characters"); quotagate does the same (docs/kuberay-compatibility.md). `quotagate validate` still
/// lists it: the RayService would never run.
pub fn ray_service_stored_anyway(e: &FieldError) -> bool {
    e.field == "metadata.name" && e.kind == ErrorType::TooLong
}

/// Validates a RayService as KubeRay would with `gates` (`--feature-gates`).
pub fn validate_ray_service_with(rs: &RayService, gates: RayFeatureGates) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let meta = Path::root("metadata");
    validate_name(
        rs.metadata.name.as_deref(),
        c::MAX_RAY_SERVICE_NAME_LENGTH,
        "RayService",
        &meta,
        &mut errs,
    );
    let annotations = rs.metadata.annotations.clone().unwrap_or_default();
    for key in [c::ANNOTATION_INITIALIZING_TIMEOUT, c::ANNOTATION_UPGRADE_DEADLINE] {
        if let Some(value) = annotations.get(key).filter(|v| !v.is_empty())
            && let Err(msg) = syntax::parse_annotation_duration(key, value)
        {
            errs.push(FieldError::invalid(&meta.child("annotations").key(key), msg));
        }
    }

    let spec = &rs.spec;
    let path = Path::root("spec");
    let cluster_path = path.child("rayClusterConfig");
    let cluster = &spec.ray_cluster_config;
    if cluster
        .auth_options
        .as_ref()
        .and_then(|a| a.enable_k8s_token_auth)
        .unwrap_or(false)
    {
        errs.push(FieldError::forbidden(
            &cluster_path.child("authOptions").child("enableK8sTokenAuth"),
            "Kubernetes token auth is not supported for RayService",
        ));
    }
    errs.extend(validate_ray_cluster_spec_with(
        cluster,
        &annotations,
        &cluster_path,
        gates,
    ));
    if cluster
        .head_group_spec
        .head_service
        .as_ref()
        .is_some_and(|s| s.metadata.name.as_deref().is_some_and(|n| !n.is_empty()))
    {
        errs.push(FieldError::forbidden(
            &cluster_path
                .child("headGroupSpec")
                .child("headService")
                .child("metadata")
                .child("name"),
            "must not be set for a RayService: the operator names the head Service of each child cluster",
        ));
    }
    // KubeRay refuses upgradeStrategy on clusters a RayService creates; reject it up front instead of failing
    // every child cluster.
    if cluster
        .upgrade_strategy
        .as_ref()
        .is_some_and(|u| u.type_.is_some())
    {
        errs.push(FieldError::forbidden(
            &cluster_path.child("upgradeStrategy"),
            "upgradeStrategy cannot be set on a RayService's cluster; use spec.upgradeStrategy",
        ));
    }
    if let Some(d) = spec.ray_cluster_deletion_delay_seconds.filter(|d| *d < 0) {
        errs.push(FieldError::invalid(
            &path.child("rayClusterDeletionDelaySeconds"),
            format!("must be a non-negative integer, got {d}"),
        ));
    }
    validate_managed_by(spec.managed_by.as_deref(), &path, &mut errs);
    if spec.upgrade_type() == Some(RayServiceUpgradeType::NewClusterWithIncrementalUpgrade) {
        validate_incremental_upgrade(rs, &path, &mut errs);
    }
    if let Some(config) = spec.serve_config_v2.as_deref().filter(|s| !s.trim().is_empty())
        && let Err(msg) = check_serve_config(config)
    {
        errs.push(FieldError::invalid(&path.child("serveConfigV2"), msg));
    }
    errs
}

fn validate_incremental_upgrade(rs: &RayService, path: &Path, errs: &mut Vec<FieldError>) {
    let strategy = path.child("upgradeStrategy");
    if !rs.spec.ray_cluster_config.autoscaling_enabled() {
        errs.push(FieldError::required(
            &path.child("rayClusterConfig").child("enableInTreeAutoscaling"),
            "the Ray autoscaler is required for NewClusterWithIncrementalUpgrade",
        ));
    }
    let Some(opts) = rs.spec.cluster_upgrade_options() else {
        errs.push(FieldError::required(
            &strategy.child("clusterUpgradeOptions"),
            "clusterUpgradeOptions are required for NewClusterWithIncrementalUpgrade",
        ));
        return;
    };
    let p = strategy.child("clusterUpgradeOptions");
    let surge = opts.max_surge_percent_or_default();
    if !(0..=100).contains(&surge) {
        errs.push(FieldError::invalid(
            &p.child("maxSurgePercent"),
            "maxSurgePercent must be between 0 and 100",
        ));
    }
    match opts.step_size_percent {
        None => errs.push(FieldError::required(
            &p.child("stepSizePercent"),
            "stepSizePercent must be between 0 and 100",
        )),
        Some(step) if !(0..=100).contains(&step) => errs.push(FieldError::invalid(
            &p.child("stepSizePercent"),
            "stepSizePercent must be between 0 and 100",
        )),
        Some(step) if step > surge => errs.push(FieldError::invalid(
            &p.child("stepSizePercent"),
            "stepSizePercent must be less than or equal to maxSurgePercent",
        )),
        Some(_) => {}
    }
    match opts.interval_seconds {
        None => errs.push(FieldError::required(
            &p.child("intervalSeconds"),
            "intervalSeconds must be greater than 0",
        )),
        Some(i) if i <= 0 => errs.push(FieldError::invalid(
            &p.child("intervalSeconds"),
            "intervalSeconds must be greater than 0",
        )),
        Some(_) => {}
    }
    // A RayService attached to an existing Gateway (`quotagate.io/gateway-ref`, KubeRay PR #5018's
    // `gatewayRef`) or HTTPRoute (`quotagate.io/http-route-name`, KubeRay #4956) makes no Gateway
    // of its own, so it needs no class for one (a malformed value is reported by the upgrade).
    let attached = [c::ANNOTATION_GATEWAY_REF, c::ANNOTATION_HTTP_ROUTE_NAME]
        .iter()
        .any(|k| {
            rs.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(*k))
                .is_some_and(|v| !v.trim().is_empty())
        });
    if !attached && opts.gateway_class_name.as_deref().unwrap_or("").is_empty() {
        errs.push(FieldError::required(
            &p.child("gatewayClassName"),
            "gatewayClassName is required for NewClusterWithIncrementalUpgrade",
        ));
    }
}

pub(super) fn validate_managed_by(managed_by: Option<&str>, path: &Path, errs: &mut Vec<FieldError>) {
    if let Some(m) = managed_by
        && m != c::MANAGED_BY_KUBERAY
        && m != c::MANAGED_BY_MULTIKUEUE
    {
        errs.push(FieldError::new(
            &path.child("managedBy"),
            ErrorType::NotSupported,
            format!(
                "the managedBy field value must be either '{}' or '{}', got {m:?}",
                c::MANAGED_BY_KUBERAY,
                c::MANAGED_BY_MULTIKUEUE
            ),
        ));
    }
}

fn validate_name(name: Option<&str>, max: usize, kind: &str, meta: &Path, errs: &mut Vec<FieldError>) {
    let p = meta.child("name");
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        errs.push(FieldError::required(&p, format!("{kind} name is required")));
        return;
    };
    if name.len() > max {
        errs.push(FieldError::new(
            &p.clone(),
            ErrorType::TooLong,
            format!("{kind} name should be no more than {max} characters"),
        ));
    }
    if !is_dns1035_label(name) {
        errs.push(FieldError::invalid(
            &p,
            format!("{kind} name should be a valid DNS-1035 label: lower-case alphanumerics or '-', starting with a letter and ending with an alphanumeric"),
        ));
    }
}

/// Serve config must be a YAML mapping (KubeRay unmarshals it into a map before sending it to Serve).
fn check_serve_config(config: &str) -> Result<(), String> {
    match serde_saphyr::from_str::<serde_json::Value>(config) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err("serveConfigV2 must be a YAML mapping".to_string()),
        Err(e) => Err(format!("serveConfigV2 is not valid YAML: {e}")),
    }
}

#[cfg(test)]
mod tests;
