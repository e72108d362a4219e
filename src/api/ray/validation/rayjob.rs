//! KubeRay's RayJob rules (`utils/validation.go`: `ValidateRayJobMetadata`, `ValidateRayJobSpec`,
//! `ValidateRayJobStatus`, `validateDeletionConfiguration`), every broken rule reported with its field.

use std::collections::BTreeMap;

use super::super::constants as c;
use super::super::rayjob::{
    DeletionPolicyType, JobDeploymentStatus, JobStatus, JobSubmissionMode, RayJob, RayJobSpec,
};
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
    validate_name(
        job.metadata.name.as_deref(),
        c::MAX_RAY_JOB_NAME_LENGTH,
        "RayJob",
        &meta,
        &mut errs,
    );
    errs.extend(validate_ray_job_spec(job, gates));
    errs.extend(validate_ray_job_status(job));
    errs
}

/// `ValidateRayJobStatus`: only InteractiveMode waits for a job id.
pub fn validate_ray_job_status(job: &RayJob) -> Vec<FieldError> {
    let waiting =
        job.status.as_ref().and_then(|s| s.job_deployment_status) == Some(JobDeploymentStatus::Waiting);
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
    let annotations = job.metadata.annotations.clone().unwrap_or_default();
    validate_spec_at(&job.spec, &annotations, &Path::root("spec"), gates)
}

/// [`validate_ray_job_spec`] of a spec at `p` (a RayCronJob's `spec.jobTemplate`).
pub(super) fn validate_spec_at(
    spec: &RayJobSpec,
    annotations: &BTreeMap<String, String>,
    p: &Path,
    gates: RayFeatureGates,
) -> Vec<FieldError> {
    let p = p.clone();
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
        errs.push(FieldError::invalid(
            &p.child("ttlSecondsAfterFinished"),
            "TTLSecondsAfterFinished must be a non-negative integer",
        ));
    }
    validate_deletion(spec, gates, &p, &mut errs);
    let selector_mode = spec.uses_cluster_selector();
    if suspend && selector_mode {
        errs.push(FieldError::invalid(
            &p.child("suspend"),
            "the ClusterSelector mode doesn't support the suspend operation",
        ));
    }
    if spec.ray_cluster_spec.is_none() && !selector_mode {
        errs.push(FieldError::required(
            &p.child("rayClusterSpec"),
            "one of RayClusterSpec or ClusterSelector must be set",
        ));
    }
    if selector_mode {
        if spec.selected_cluster().unwrap_or("").is_empty() {
            errs.push(FieldError::required(
                &p.child("clusterSelector").key(c::LABEL_CLUSTER),
                "cluster name in ClusterSelector should not be empty",
            ));
        }
        if spec.mode() == JobSubmissionMode::SidecarMode {
            errs.push(FieldError::forbidden(
                &p.child("clusterSelector"),
                "ClusterSelector is not supported in SidecarMode",
            ));
        }
    }
    // KubeRay #3525: a retry keeps spec.jobId, so InteractiveMode cannot retry.
    if spec.mode() == JobSubmissionMode::InteractiveMode && spec.backoff_limit.is_some_and(|b| b > 0) {
        errs.push(FieldError::invalid(
            &p.child("backoffLimit"),
            "BackoffLimit is incompatible with InteractiveMode",
        ));
    }
    if spec.mode() == JobSubmissionMode::SidecarMode {
        if spec.submitter_pod_template.is_some() {
            errs.push(FieldError::forbidden(
                &p.child("submitterPodTemplate"),
                "Currently, SidecarMode doesn't support SubmitterPodTemplate",
            ));
        }
        if spec.submitter_config.is_some() {
            errs.push(FieldError::forbidden(
                &p.child("submitterConfig"),
                "Currently, SidecarMode doesn't support SubmitterConfig",
            ));
        }
        let restart = spec
            .ray_cluster_spec
            .as_ref()
            .and_then(|c| c.head_group_spec.template.spec.as_ref())
            .and_then(|s| s.restart_policy.as_deref());
        if restart.is_some_and(|r| !r.is_empty() && r != "Never") {
            errs.push(FieldError::invalid(
                &p.child("rayClusterSpec")
                    .child("headGroupSpec")
                    .child("template")
                    .child("spec")
                    .child("restartPolicy"),
                "restartPolicy for head Pod should be Never or unset when using SidecarMode",
            ));
        }
    }
    if let Some(cluster) = &spec.ray_cluster_spec {
        errs.extend(validate_ray_cluster_spec_with(
            cluster,
            annotations,
            &p.child("rayClusterSpec"),
            gates,
        ));
    }
    if let Some(yaml) = spec.runtime_env_yaml.as_deref().filter(|y| !y.trim().is_empty())
        && let Err(msg) = check_runtime_env(yaml)
    {
        errs.push(FieldError::invalid(&p.child("runtimeEnvYAML"), msg));
    }
    if spec.active_deadline_seconds.is_some_and(|d| d <= 0) {
        errs.push(FieldError::invalid(
            &p.child("activeDeadlineSeconds"),
            "activeDeadlineSeconds must be a positive integer",
        ));
    }
    if spec.backoff_limit.is_some_and(|b| b < 0) {
        errs.push(FieldError::invalid(
            &p.child("backoffLimit"),
            "backoffLimit must be a positive integer",
        ));
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
fn validate_deletion(spec: &RayJobSpec, gates: RayFeatureGates, p: &Path, errs: &mut Vec<FieldError>) {
    let shutdown = spec.shutdown_after_finish();
    if !shutdown && spec.ttl_seconds() > 0 {
        errs.push(FieldError::invalid(
            &p.child("ttlSecondsAfterFinished"),
            "a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished",
        ));
    }
    let Some(strategy) = &spec.deletion_strategy else {
        return;
    };
    let sp = p.child("deletionStrategy");
    if !gates.job_deletion_policy {
        errs.push(FieldError::forbidden(
            &sp,
            "RayJobDeletionPolicy feature gate must be enabled to use DeletionStrategy",
        ));
        return;
    }
    let legacy = strategy.on_success.is_some() || strategy.on_failure.is_some();
    let rules = strategy.deletion_rules.as_deref().unwrap_or(&[]);
    if !rules.is_empty() && shutdown {
        errs.push(FieldError::invalid(
            &sp.child("deletionRules"),
            "spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive",
        ));
    }
    if !rules.is_empty() && legacy {
        errs.push(FieldError::invalid(
            &sp,
            "Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously",
        ));
        return;
    }
    let selector = spec.uses_cluster_selector();
    let autoscaling = spec
        .ray_cluster_spec
        .as_ref()
        .is_some_and(|c| c.autoscaling_enabled());
    if legacy {
        let (Some(on_success), Some(on_failure)) = (&strategy.on_success, &strategy.on_failure) else {
            errs.push(FieldError::required(&sp, "both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the legacy deletion policy fields of DeletionStrategy"));
            return;
        };
        let mut policies = Vec::new();
        for (field, policy) in [("onSuccess", on_success.policy), ("onFailure", on_failure.policy)] {
            match policy {
                None => errs.push(FieldError::required(
                    &sp.child(field).child("policy"),
                    "the DeletionPolicyType cannot be unset when DeletionStrategy is enabled",
                )),
                Some(pol) => policies.push((field, pol)),
            }
        }
        for (field, pol) in policies {
            let fp = sp.child(field).child("policy");
            if selector
                && matches!(
                    pol,
                    DeletionPolicyType::DeleteCluster | DeletionPolicyType::DeleteWorkers
                )
            {
                errs.push(FieldError::forbidden(
                    &fp,
                    format!("the ClusterSelector mode doesn't support DeletionStrategy={pol:?}"),
                ));
            }
            if pol == DeletionPolicyType::DeleteWorkers && autoscaling {
                errs.push(FieldError::forbidden(&fp, "DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling enabled"));
            }
            if shutdown && pol == DeletionPolicyType::DeleteNone {
                errs.push(FieldError::invalid(
                    &fp,
                    "shutdownAfterJobFinishes is set to 'true' while deletion policy is 'DeleteNone'",
                ));
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
                errs.push(FieldError::required(
                    &rp.child("condition"),
                    "the deletion condition requires either the JobStatus or the JobDeploymentStatus field.",
                ));
                continue;
            }
            (Some(s), None) if !matches!(s, JobStatus::Succeeded | JobStatus::Failed) => {
                errs.push(FieldError::new(
                    &rp.child("condition").child("jobStatus"),
                    ErrorType::NotSupported,
                    format!("{:?}: supported values: \"SUCCEEDED\", \"FAILED\"", s.as_str()),
                ));
                continue;
            }
            (None, Some(d)) if d != JobDeploymentStatus::Failed => {
                errs.push(FieldError::new(
                    &rp.child("condition").child("jobDeploymentStatus"),
                    ErrorType::NotSupported,
                    format!("{:?}: supported values: \"Failed\"", d.as_str()),
                ));
                continue;
            }
            (Some(s), None) => format!("JobStatus '{}'", s.as_str()),
            (None, Some(d)) => format!("JobDeploymentStatus '{}'", d.as_str()),
        };
        let ttl = cond.ttl_seconds.unwrap_or(0);
        if ttl < 0 {
            errs.push(FieldError::invalid(
                &rp.child("condition").child("ttlSeconds"),
                "TTLSeconds must be non-negative",
            ));
            continue;
        }
        if selector
            && matches!(
                rule.policy,
                DeletionPolicyType::DeleteCluster | DeletionPolicyType::DeleteWorkers
            )
        {
            errs.push(FieldError::forbidden(
                &rp.child("policy"),
                format!(
                    "DeletionPolicyType '{:?}' not supported when ClusterSelector is set",
                    rule.policy
                ),
            ));
            continue;
        }
        if autoscaling && rule.policy == DeletionPolicyType::DeleteWorkers {
            errs.push(FieldError::forbidden(
                &rp.child("policy"),
                "DeletionPolicyType 'DeleteWorkers' not supported with autoscaling enabled",
            ));
            continue;
        }
        let per = by_trigger.entry(trigger.clone()).or_default();
        if per.insert(rule.policy, ttl).is_some() {
            errs.push(FieldError::new(
                &rp,
                ErrorType::Duplicate,
                format!(
                    "duplicate rule for DeletionPolicyType '{:?}' and {trigger}",
                    rule.policy
                ),
            ));
        }
    }
    for (trigger, ttls) in &by_trigger {
        let order = [
            DeletionPolicyType::DeleteWorkers,
            DeletionPolicyType::DeleteCluster,
            DeletionPolicyType::DeleteSelf,
        ];
        let mut prev: Option<(DeletionPolicyType, i32)> = None;
        for pol in order {
            let Some(&ttl) = ttls.get(&pol) else { continue };
            if let Some((pp, pt)) = prev
                && ttl < pt
            {
                errs.push(FieldError::invalid(
                    &sp.child("deletionRules"),
                    format!("for {trigger}: {pol:?} TTL ({ttl}) must be >= {pp:?} TTL ({pt})"),
                ));
            }
            prev = Some((pol, ttl));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn basic_cluster() -> Value {
        json!({"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.9.0"}]}}}})
    }

    fn job(spec: Value) -> RayJob {
        serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "job", "namespace": "ns"}, "spec": spec}))
            .unwrap()
    }

    fn gates(deletion_policy: bool) -> RayFeatureGates {
        RayFeatureGates {
            job_deletion_policy: deletion_policy,
            ..RayFeatureGates::default()
        }
    }

    /// KubeRay `ray-operator/controllers/ray/utils/validation_test.go`, `TestValidateRayJobSpec` (its
    /// cases by name; that test runs with the RayJobDeletionPolicy gate off).
    #[test]
    fn kuberay_validate_ray_job_spec_cases() {
        let cluster = basic_cluster();
        let legacy = |on_success: &str, on_failure: &str| json!({"onSuccess": {"policy": on_success}, "onFailure": {"policy": on_failure}});
        let cases: Vec<(&str, Value, bool)> = vec![
            (
                "one of RayClusterSpec or ClusterSelector must be set",
                json!({}),
                true,
            ),
            (
                "not allowed to be suspended",
                json!({"suspend": true, "shutdownAfterJobFinishes": false, "rayClusterSpec": cluster}),
                true,
            ),
            (
                "valid RayJob",
                json!({"suspend": true, "shutdownAfterJobFinishes": true, "rayClusterSpec": cluster}),
                false,
            ),
            (
                "ClusterSelector mode doesn't support suspend",
                json!({"suspend": true, "shutdownAfterJobFinishes": true, "clusterSelector": {"key": "value"}}),
                true,
            ),
            (
                "failed to unmarshal RuntimeEnvYAML",
                json!({"runtimeEnvYAML": "invalid_yaml_str", "rayClusterSpec": cluster}),
                true,
            ),
            (
                "backoffLimit must be a positive integer",
                json!({"backoffLimit": -1, "rayClusterSpec": cluster}),
                true,
            ),
            (
                "DeletionStrategy needs its gate",
                json!({"deletionStrategy": legacy("DeleteCluster", "DeleteCluster"), "shutdownAfterJobFinishes": true, "rayClusterSpec": cluster}),
                true,
            ),
            (
                "BackoffLimit is incompatible with InteractiveMode",
                json!({"backoffLimit": 1, "submissionMode": "InteractiveMode", "rayClusterSpec": cluster}),
                true,
            ),
            (
                "BackoffLimit 0 with InteractiveMode",
                json!({"backoffLimit": 0, "submissionMode": "InteractiveMode", "rayClusterSpec": cluster}),
                false,
            ),
            (
                "BackoffLimit nil with InteractiveMode",
                json!({"submissionMode": "InteractiveMode", "rayClusterSpec": cluster}),
                false,
            ),
            (
                "TTL without shutdown",
                json!({"ttlSecondsAfterFinished": 5, "rayClusterSpec": cluster}),
                true,
            ),
            (
                "TTL with shutdown",
                json!({"ttlSecondsAfterFinished": 5, "shutdownAfterJobFinishes": true, "rayClusterSpec": cluster}),
                false,
            ),
            (
                "negative TTL",
                json!({"ttlSecondsAfterFinished": -5, "shutdownAfterJobFinishes": true, "rayClusterSpec": cluster}),
                true,
            ),
            (
                "SidecarMode",
                json!({"submissionMode": "SidecarMode", "rayClusterSpec": cluster}),
                false,
            ),
            (
                "SidecarMode doesn't support SubmitterPodTemplate",
                json!({"submissionMode": "SidecarMode", "submitterPodTemplate": {"spec": {"containers": []}}, "rayClusterSpec": cluster}),
                true,
            ),
            (
                "SidecarMode doesn't support SubmitterConfig",
                json!({"submissionMode": "SidecarMode", "submitterConfig": {"backoffLimit": 1}, "rayClusterSpec": cluster}),
                true,
            ),
            (
                "SidecarMode head restartPolicy",
                json!({"submissionMode": "SidecarMode", "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"restartPolicy": "Always", "containers": [{"name": "h", "image": "ray"}]}}}}}),
                true,
            ),
            (
                "SidecarMode doesn't support ClusterSelector",
                json!({"submissionMode": "SidecarMode", "clusterSelector": {"ray.io/cluster": "ray-cluster"}}),
                true,
            ),
            (
                "no cluster name in ClusterSelector",
                json!({"clusterSelector": {"key": "value"}}),
                true,
            ),
            (
                "empty cluster name in ClusterSelector",
                json!({"clusterSelector": {"ray.io/cluster": ""}}),
                true,
            ),
            (
                "cluster name in ClusterSelector",
                json!({"clusterSelector": {"ray.io/cluster": "ray-cluster"}}),
                false,
            ),
            (
                "non-positive activeDeadlineSeconds",
                json!({"activeDeadlineSeconds": 0, "rayClusterSpec": cluster}),
                true,
            ),
            (
                "headGroupSpec should have at least one container",
                json!({"rayClusterSpec": {"headGroupSpec": {"template": {}}}}),
                true,
            ),
        ];
        for (name, spec, want_error) in cases {
            let errs = validate_ray_job_spec(&job(spec), gates(false));
            assert_eq!(!errs.is_empty(), want_error, "{name}: {errs:?}");
        }
    }

    /// KubeRay `validation_test.go`, `TestValidateRayJobSpecWithFeatureGate` (gate on).
    #[test]
    fn kuberay_deletion_strategy_cases() {
        let cluster = basic_cluster();
        let autoscaled = json!({"enableInTreeAutoscaling": true, "headGroupSpec": cluster["headGroupSpec"]});
        let legacy = |p: &str| json!({"onSuccess": {"policy": p}, "onFailure": {"policy": p}});
        let rule = |policy: &str, status: &str, ttl: i32| json!({"policy": policy, "condition": {"jobStatus": status, "ttlSeconds": ttl}});
        let rules = |r: Vec<Value>| json!({"deletionRules": r});
        let cases: Vec<(&str, Value, bool)> = vec![
            (
                "ClusterSelector and DeleteCluster",
                json!({"deletionStrategy": legacy("DeleteCluster"), "clusterSelector": {"ray.io/cluster": "c"}}),
                true,
            ),
            (
                "ClusterSelector and DeleteWorkers",
                json!({"deletionStrategy": legacy("DeleteWorkers"), "clusterSelector": {"ray.io/cluster": "c"}}),
                true,
            ),
            (
                "DeleteWorkers with autoscaling",
                json!({"deletionStrategy": legacy("DeleteWorkers"), "rayClusterSpec": autoscaled}),
                true,
            ),
            (
                "valid DeleteCluster",
                json!({"deletionStrategy": legacy("DeleteCluster"), "shutdownAfterJobFinishes": true, "rayClusterSpec": cluster}),
                false,
            ),
            (
                "shutdown with DeleteNone",
                json!({"deletionStrategy": legacy("DeleteNone"), "shutdownAfterJobFinishes": true, "rayClusterSpec": cluster}),
                true,
            ),
            (
                "OnSuccess unset",
                json!({"deletionStrategy": {"onFailure": {"policy": "DeleteNone"}}, "rayClusterSpec": cluster}),
                true,
            ),
            (
                "OnFailure policy unset",
                json!({"deletionStrategy": {"onSuccess": {"policy": "DeleteNone"}, "onFailure": {}}, "rayClusterSpec": cluster}),
                true,
            ),
            (
                "valid deletionRules",
                json!({"deletionStrategy": rules(vec![rule("DeleteSelf", "SUCCEEDED", 10)]), "rayClusterSpec": cluster}),
                false,
            ),
            (
                "deletionRules with shutdown",
                json!({"deletionStrategy": rules(vec![rule("DeleteSelf", "SUCCEEDED", 10)]), "shutdownAfterJobFinishes": true, "rayClusterSpec": cluster}),
                true,
            ),
            (
                "deletionRules with legacy",
                json!({"deletionStrategy": {"onSuccess": {"policy": "DeleteCluster"}, "deletionRules": [rule("DeleteSelf", "SUCCEEDED", 10)]}, "rayClusterSpec": cluster}),
                true,
            ),
            (
                "empty DeletionStrategy",
                json!({"deletionStrategy": {}, "rayClusterSpec": cluster}),
                true,
            ),
            (
                "empty deletionRules",
                json!({"deletionStrategy": rules(vec![]), "rayClusterSpec": cluster}),
                true,
            ),
            (
                "duplicate rule",
                json!({"deletionStrategy": rules(vec![rule("DeleteSelf", "SUCCEEDED", 10), rule("DeleteSelf", "SUCCEEDED", 20)]), "rayClusterSpec": cluster}),
                true,
            ),
            (
                "negative ttlSeconds",
                json!({"deletionStrategy": rules(vec![rule("DeleteSelf", "SUCCEEDED", -10)]), "rayClusterSpec": cluster}),
                true,
            ),
            (
                "rules, ClusterSelector and DeleteWorkers",
                json!({"deletionStrategy": rules(vec![rule("DeleteWorkers", "SUCCEEDED", 10)]), "clusterSelector": {"ray.io/cluster": "c"}}),
                true,
            ),
            (
                "rules with autoscaling and DeleteWorkers",
                json!({"deletionStrategy": rules(vec![rule("DeleteWorkers", "SUCCEEDED", 10)]), "rayClusterSpec": autoscaled}),
                true,
            ),
            (
                "DeleteCluster before DeleteWorkers",
                json!({"deletionStrategy": rules(vec![rule("DeleteWorkers", "SUCCEEDED", 20), rule("DeleteCluster", "SUCCEEDED", 10)]), "rayClusterSpec": cluster}),
                true,
            ),
            (
                "DeleteSelf before DeleteCluster",
                json!({"deletionStrategy": rules(vec![rule("DeleteCluster", "SUCCEEDED", 20), rule("DeleteSelf", "SUCCEEDED", 10)]), "rayClusterSpec": cluster}),
                true,
            ),
            (
                "same TTLs per status are fine",
                json!({"deletionStrategy": rules(vec![rule("DeleteWorkers", "FAILED", 10), rule("DeleteCluster", "FAILED", 10), rule("DeleteSelf", "SUCCEEDED", 0)]), "rayClusterSpec": cluster}),
                false,
            ),
        ];
        for (name, spec, want_error) in cases {
            let errs = validate_ray_job_spec(&job(spec), gates(true));
            assert_eq!(!errs.is_empty(), want_error, "{name}: {errs:?}");
        }
    }

    /// KubeRay `validation_test.go` `TestValidateRayJobStatus` and `TestValidateRayJobMetadata`.
    #[test]
    fn status_and_name_rules() {
        let mut waiting = job(json!({"rayClusterSpec": basic_cluster()}));
        waiting.status = Some(serde_json::from_value(json!({"jobDeploymentStatus": "Waiting"})).unwrap());
        assert_eq!(validate_ray_job_status(&waiting).len(), 1);
        waiting.spec.submission_mode = Some(JobSubmissionMode::InteractiveMode);
        assert!(validate_ray_job_status(&waiting).is_empty());
        let mut long = job(json!({"rayClusterSpec": basic_cluster()}));
        long.metadata.name = Some("a".repeat(48));
        let errs = validate_ray_job(&long);
        assert!(
            errs.iter()
                .any(|e| e.field == "metadata.name" && e.message.contains("47")),
            "{errs:?}"
        );
        long.metadata.name = Some("Bad_Name".into());
        assert!(validate_ray_job(&long).iter().any(|e| e.field == "metadata.name"));
    }

    /// A RayJob as a Kueue user writes it (`tests/fixtures/manifests/kueue/jobs.yaml`: queue label,
    /// entrypoint, runtime env, a cluster spec) is valid as it is.
    #[test]
    fn the_fixture_rayjob_is_valid_and_round_trips() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifests/kueue/jobs.yaml");
        let text = std::fs::read_to_string(path).unwrap();
        let docs = crate::api::manifest::load_documents(&text).unwrap();
        let rayjobs: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "RayJob").collect();
        assert_eq!(rayjobs.len(), 1);
        let report = crate::api::manifest::check_document(rayjobs[0]);
        assert_eq!(report.class, crate::api::manifest::DocClass::Managed);
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        let back = crate::api::manifest::round_trip_managed(rayjobs[0])
            .unwrap()
            .unwrap();
        let typed: RayJob = serde_json::from_value(back).unwrap();
        assert_eq!(
            typed.spec.mode(),
            JobSubmissionMode::K8sJobMode,
            "submissionMode defaults to K8sJobMode"
        );
        assert!(
            typed
                .spec
                .runtime_env_yaml
                .as_deref()
                .is_some_and(|y| y.contains("WORDS"))
        );
    }
}
