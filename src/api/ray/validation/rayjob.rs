//! KubeRay's RayJob rules (`utils/validation.go`: `ValidateRayJobMetadata`, `ValidateRayJobSpec`,
//! `ValidateRayJobStatus`, `validateDeletionConfiguration`), every broken rule reported with its field.

use std::collections::BTreeMap;

use super::super::constants as c;
use super::super::rayjob::{DeletionPolicyType, JobDeploymentStatus, JobStatus, JobSubmissionMode, RayJob};
use super::{RayFeatureGates, validate_managed_by, validate_name, validate_ray_cluster_spec_with};
use crate::api::validation::{ErrorType, FieldError, Path};

/// Validates a RayJob as KubeRay would with KubeRay's default gates.
pub fn validate_ray_job(job: &RayJob) -> Vec<FieldError> {
    validate_ray_job_with(job, RayFeatureGates::default())
}

/// Validates a RayJob as KubeRay would with `gates` (`--feature-gates`).
pub fn validate_ray_job_with(job: &RayJob, gates: RayFeatureGates) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let meta = Path::root("metadata");
    validate_name(job.metadata.name.as_deref(), c::MAX_RAY_JOB_NAME_LENGTH, "RayJob", &meta, &mut errs);
    errs.extend(validate_ray_job_spec(job, gates));
    errs.extend(validate_ray_job_status(job));
    errs
}

/// `ValidateRayJobStatus`: only InteractiveMode waits for a job id.
pub fn validate_ray_job_status(job: &RayJob) -> Vec<FieldError> {
    let waiting = job.status.as_ref().and_then(|s| s.job_deployment_status) == Some(JobDeploymentStatus::Waiting);
    if waiting && job.spec.mode() != JobSubmissionMode::InteractiveMode {
        return vec![FieldError::invalid(
            "status.jobDeploymentStatus",
            "JobDeploymentStatus cannot be `Waiting` when SubmissionMode is not InteractiveMode",
        )];
    }
    Vec::new()
}

/// `ValidateRayJobSpec` and the CRD's own rules.
pub fn validate_ray_job_spec(job: &RayJob, gates: RayFeatureGates) -> Vec<FieldError> {
    let spec = &job.spec;
    let p = Path::root("spec");
    let mut errs = Vec::new();
    let suspend = spec.is_suspended();
    let shutdown = spec.shutdown_after_finish();
    if suspend && !shutdown {
        errs.push(FieldError::invalid(
            &p.child("suspend"),
            "a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended",
        ));
    }
    if spec.ttl_seconds() < 0 {
        errs.push(FieldError::invalid(&p.child("ttlSecondsAfterFinished"), "TTLSecondsAfterFinished must be a non-negative integer"));
    }
    validate_deletion(job, gates, &p, &mut errs);
    let selector_mode = spec.uses_cluster_selector();
    if suspend && selector_mode {
        errs.push(FieldError::invalid(&p.child("suspend"), "the ClusterSelector mode doesn't support the suspend operation"));
    }
    if spec.ray_cluster_spec.is_none() && !selector_mode {
        errs.push(FieldError::required(&p.child("rayClusterSpec"), "one of RayClusterSpec or ClusterSelector must be set"));
    }
    if selector_mode {
        if spec.selected_cluster().unwrap_or("").is_empty() {
            errs.push(FieldError::required(
                &p.child("clusterSelector").key(c::LABEL_CLUSTER),
                "cluster name in ClusterSelector should not be empty",
            ));
        }
        if spec.mode() == JobSubmissionMode::SidecarMode {
            errs.push(FieldError::forbidden(&p.child("clusterSelector"), "ClusterSelector is not supported in SidecarMode"));
        }
    }
    // KubeRay #3525: a retry keeps spec.jobId, so InteractiveMode cannot retry.
    if spec.mode() == JobSubmissionMode::InteractiveMode && spec.backoff_limit.is_some_and(|b| b > 0) {
        errs.push(FieldError::invalid(&p.child("backoffLimit"), "BackoffLimit is incompatible with InteractiveMode"));
    }
    if spec.mode() == JobSubmissionMode::SidecarMode {
        if spec.submitter_pod_template.is_some() {
            errs.push(FieldError::forbidden(&p.child("submitterPodTemplate"), "Currently, SidecarMode doesn't support SubmitterPodTemplate"));
        }
        if spec.submitter_config.is_some() {
            errs.push(FieldError::forbidden(&p.child("submitterConfig"), "Currently, SidecarMode doesn't support SubmitterConfig"));
        }
        let restart = spec
            .ray_cluster_spec
            .as_ref()
            .and_then(|c| c.head_group_spec.template.spec.as_ref())
            .and_then(|s| s.restart_policy.as_deref());
        if restart.is_some_and(|r| !r.is_empty() && r != "Never") {
            errs.push(FieldError::invalid(
                &p.child("rayClusterSpec").child("headGroupSpec").child("template").child("spec").child("restartPolicy"),
                "restartPolicy for head Pod should be Never or unset when using SidecarMode",
            ));
        }
    }
    if let Some(cluster) = &spec.ray_cluster_spec {
        let annotations = job.metadata.annotations.clone().unwrap_or_default();
        errs.extend(validate_ray_cluster_spec_with(cluster, &annotations, &p.child("rayClusterSpec"), gates));
    }
    if let Some(yaml) = spec.runtime_env_yaml.as_deref().filter(|y| !y.trim().is_empty())
        && let Err(msg) = check_runtime_env(yaml)
    {
        errs.push(FieldError::invalid(&p.child("runtimeEnvYAML"), msg));
    }
    if spec.active_deadline_seconds.is_some_and(|d| d <= 0) {
        errs.push(FieldError::invalid(&p.child("activeDeadlineSeconds"), "activeDeadlineSeconds must be a positive integer"));
    }
    if spec.backoff_limit.is_some_and(|b| b < 0) {
        errs.push(FieldError::invalid(&p.child("backoffLimit"), "backoffLimit must be a positive integer"));
    }
    validate_managed_by(spec.managed_by.as_deref(), &p, &mut errs);
    errs
}

/// KubeRay unmarshals `runtimeEnvYAML` into a map before sending it to Ray.
fn check_runtime_env(yaml: &str) -> Result<(), String> {
    match serde_saphyr::from_str::<serde_json::Value>(yaml) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err("runtimeEnvYAML must be a YAML mapping".to_string()),
        Err(e) => Err(format!("failed to unmarshal RuntimeEnvYAML: {e}")),
    }
}

/// `validateDeletionConfiguration`: TTL needs shutdown; a strategy needs the gate and is either both
/// legacy policies or a list of rules.
fn validate_deletion(job: &RayJob, gates: RayFeatureGates, p: &Path, errs: &mut Vec<FieldError>) {
    let spec = &job.spec;
    let shutdown = spec.shutdown_after_finish();
    if !shutdown && spec.ttl_seconds() > 0 {
        errs.push(FieldError::invalid(
            &p.child("ttlSecondsAfterFinished"),
            "a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished",
        ));
    }
    let Some(strategy) = &spec.deletion_strategy else { return };
    let sp = p.child("deletionStrategy");
    if !gates.job_deletion_policy {
        errs.push(FieldError::forbidden(&sp, "RayJobDeletionPolicy feature gate must be enabled to use DeletionStrategy"));
        return;
    }
    let legacy = strategy.on_success.is_some() || strategy.on_failure.is_some();
    let rules = strategy.deletion_rules.as_deref().unwrap_or(&[]);
    if !rules.is_empty() && shutdown {
        errs.push(FieldError::invalid(&sp.child("deletionRules"), "spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive"));
    }
    if !rules.is_empty() && legacy {
        errs.push(FieldError::invalid(&sp, "Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously"));
        return;
    }
    let selector = spec.uses_cluster_selector();
    let autoscaling = spec.ray_cluster_spec.as_ref().is_some_and(|c| c.autoscaling_enabled());
    if legacy {
        let (Some(on_success), Some(on_failure)) = (&strategy.on_success, &strategy.on_failure) else {
            errs.push(FieldError::required(&sp, "both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the legacy deletion policy fields of DeletionStrategy"));
            return;
        };
        let mut policies = Vec::new();
        for (field, policy) in [("onSuccess", on_success.policy), ("onFailure", on_failure.policy)] {
            match policy {
                None => errs.push(FieldError::required(&sp.child(field).child("policy"), "the DeletionPolicyType cannot be unset when DeletionStrategy is enabled")),
                Some(pol) => policies.push((field, pol)),
            }
        }
        for (field, pol) in policies {
            let fp = sp.child(field).child("policy");
            if selector && matches!(pol, DeletionPolicyType::DeleteCluster | DeletionPolicyType::DeleteWorkers) {
                errs.push(FieldError::forbidden(&fp, format!("the ClusterSelector mode doesn't support DeletionStrategy={pol:?}")));
            }
            if pol == DeletionPolicyType::DeleteWorkers && autoscaling {
                errs.push(FieldError::forbidden(&fp, "DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling enabled"));
            }
            if shutdown && pol == DeletionPolicyType::DeleteNone {
                errs.push(FieldError::invalid(&fp, "shutdownAfterJobFinishes is set to 'true' while deletion policy is 'DeleteNone'"));
            }
        }
        return;
    }
    if rules.is_empty() {
        errs.push(FieldError::required(&sp, "DeletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field (cannot be empty)"));
        return;
    }
    // Per rule, then TTLs non-decreasing along DeleteWorkers <= DeleteCluster <= DeleteSelf per trigger.
    let mut by_trigger: BTreeMap<String, BTreeMap<DeletionPolicyType, i32>> = BTreeMap::new();
    for (i, rule) in rules.iter().enumerate() {
        let rp = sp.child("deletionRules").index(i);
        let cond = &rule.condition;
        let trigger = match (cond.job_status, cond.job_deployment_status) {
            (Some(_), Some(_)) => {
                errs.push(FieldError::invalid(&rp.child("condition"), "JobStatus and JobDeploymentStatus cannot be used together within the same deletion condition."));
                continue;
            }
            (None, None) => {
                errs.push(FieldError::required(&rp.child("condition"), "the deletion condition requires either the JobStatus or the JobDeploymentStatus field."));
                continue;
            }
            (Some(s), None) if !matches!(s, JobStatus::Succeeded | JobStatus::Failed) => {
                errs.push(FieldError::new(&rp.child("condition").child("jobStatus"), ErrorType::NotSupported, format!("{:?}: supported values: \"SUCCEEDED\", \"FAILED\"", s.as_str())));
                continue;
            }
            (None, Some(d)) if d != JobDeploymentStatus::Failed => {
                errs.push(FieldError::new(&rp.child("condition").child("jobDeploymentStatus"), ErrorType::NotSupported, format!("{:?}: supported values: \"Failed\"", d.as_str())));
                continue;
            }
            (Some(s), None) => format!("JobStatus '{}'", s.as_str()),
            (None, Some(d)) => format!("JobDeploymentStatus '{}'", d.as_str()),
        };
        let ttl = cond.ttl_seconds.unwrap_or(0);
        if ttl < 0 {
            errs.push(FieldError::invalid(&rp.child("condition").child("ttlSeconds"), "TTLSeconds must be non-negative"));
            continue;
        }
        if selector && matches!(rule.policy, DeletionPolicyType::DeleteCluster | DeletionPolicyType::DeleteWorkers) {
            errs.push(FieldError::forbidden(&rp.child("policy"), format!("DeletionPolicyType '{:?}' not supported when ClusterSelector is set", rule.policy)));
            continue;
        }
        if autoscaling && rule.policy == DeletionPolicyType::DeleteWorkers {
            errs.push(FieldError::forbidden(&rp.child("policy"), "DeletionPolicyType 'DeleteWorkers' not supported with autoscaling enabled"));
            continue;
        }
        let per = by_trigger.entry(trigger.clone()).or_default();
        if per.insert(rule.policy, ttl).is_some() {
            errs.push(FieldError::new(&rp, ErrorType::Duplicate, format!("duplicate rule for DeletionPolicyType '{:?}' and {trigger}", rule.policy)));
        }
    }
    for (trigger, ttls) in &by_trigger {
        let order = [DeletionPolicyType::DeleteWorkers, DeletionPolicyType::DeleteCluster, DeletionPolicyType::DeleteSelf];
        let mut prev: Option<(DeletionPolicyType, i32)> = None;
        for pol in order {
            let Some(&ttl) = ttls.get(&pol) else { continue };
            if let Some((pp, pt)) = prev
                && ttl < pt
            {
                errs.push(FieldError::invalid(&sp.child("deletionRules"), format!("for {trigger}: {pol:?} TTL ({ttl}) must be >= {pp:?} TTL ({pt})")));
            }
            prev = Some((pol, ttl));
        }
    }
}
