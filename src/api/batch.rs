//! batch/v1 Job as Kueue handles it at admission (`pkg/controller/jobs/job/job_webhook.go` and the
//! job framework's `validation.go`): a queue-labelled Job is created suspended, and Kueue's rules for
//! its annotations and labels. Also the names the Job controller and Kueue share (labels, annotations,
//! Kueue's pod count), used by the Job adapter and the embedded Job controller alike.

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::kueue::config::Frameworks;
use super::kueue::constants::label;
use super::kueue::managed_jobs::{JobNamespace, ManagedJobs};
use super::validation::{FieldError, Path};

pub const API_VERSION: &str = "batch/v1";
pub const KIND: &str = "Job";

/// Partial admission: the fewest pods the Job accepts (Kueue's `JobMinParallelismAnnotation`).
pub const JOB_MIN_PARALLELISM: &str = "kueue.x-k8s.io/job-min-parallelism";
/// With partial admission, keep `completions` equal to `parallelism` (Indexed Jobs only).
pub const JOB_COMPLETIONS_EQUAL_PARALLELISM: &str = "kueue.x-k8s.io/job-completions-equal-parallelism";

/// Labels the Job controller puts on its pods (and Kueue keeps out of a Workload's podset).
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";
pub const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
pub const MANAGED_LABELS: [&str; 4] = [LEGACY_JOB_NAME_LABEL, LEGACY_CONTROLLER_UID_LABEL, JOB_NAME_LABEL, CONTROLLER_UID_LABEL];

/// `spec.managedBy` of a Job the built-in Job controller runs (also what an unset field means).
pub const JOB_CONTROLLER: &str = "kubernetes.io/job-controller";

/// The built-in controller's default `backoffLimit`.
pub const DEFAULT_BACKOFF_LIMIT: i32 = 6;

/// `spec.parallelism`, defaulted as the API server defaults it (1).
pub fn parallelism(spec: &JobSpec) -> i32 {
    spec.parallelism.unwrap_or(1)
}

/// Kueue's `podsCount`: parallelism, or fewer when fewer completions are asked for.
pub fn pods_count(spec: &JobSpec) -> i32 {
    let p = parallelism(spec);
    match spec.completions {
        Some(c) if c < p => c,
        _ => p,
    }
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

/// Kueue's `minPodsCount`: the min-parallelism annotation when it is a number.
pub fn min_pods_count(meta: &ObjectMeta) -> Option<i32> {
    annotation(meta, JOB_MIN_PARALLELISM).and_then(|v| v.parse::<i32>().ok())
}

/// Kueue's `syncCompletionWithParallelism`.
pub fn completions_follow_parallelism(meta: &ObjectMeta) -> bool {
    annotation(meta, JOB_COMPLETIONS_EQUAL_PARALLELISM).and_then(parse_go_bool) == Some(true)
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Whether the built-in Job controller runs this Job (`spec.managedBy` unset or its own name).
pub fn managed_by_job_controller(spec: &JobSpec) -> bool {
    spec.managed_by.as_deref().is_none_or(|m| m == JOB_CONTROLLER)
}

pub fn is_job(obj: &Value) -> bool {
    obj.get("apiVersion").and_then(Value::as_str) == Some(API_VERSION) && obj.get("kind").and_then(Value::as_str) == Some(KIND)
}

fn queue_name(meta: &ObjectMeta) -> Option<&str> {
    meta.labels.as_ref().and_then(|l| l.get(label::QUEUE_NAME)).map(String::as_str).filter(|q| !q.is_empty())
}

/// Kueue's `ApplyDefaultForSuspend`: a queue-labelled Job is created suspended. True when changed.
pub fn default_job(obj: &mut Value) -> bool {
    default_job_in(obj, &ManagedJobs::default(), &JobNamespace::default(), Frameworks::default())
}

/// Kueue's Job webhook `Default` on create: the queue name defaulted to the `default` LocalQueue when
/// it exists, then the Job suspended when Kueue manages it (a queue name, or none under
/// `manageJobsWithoutQueueName` in a selected namespace), unless a managed job owns it. True when
/// changed.
pub fn default_job_in(obj: &mut Value, managed: &ManagedJobs, ns: &JobNamespace, frameworks: Frameworks) -> bool {
    if super::pod::owner_managed(obj, frameworks) {
        return false;
    }
    let before = obj.pointer("/metadata/labels").cloned();
    let suspend = managed.default_new_job(obj, ns);
    let relabelled = obj.pointer("/metadata/labels").cloned() != before;
    if !suspend {
        return relabelled;
    }
    match obj.get_mut("spec").and_then(Value::as_object_mut) {
        Some(spec) if spec.get("suspend") != Some(&Value::Bool(true)) => {
            spec.insert("suspend".to_string(), Value::Bool(true));
            true
        }
        _ => relabelled,
    }
}

fn annotations_path(key: &str) -> Path {
    Path::root("metadata").child("annotations").key(key)
}

fn labels_path(key: &str) -> Path {
    Path::root("metadata").child("labels").key(key)
}

/// Kueue's `ValidateJobOnCreate` plus the Job webhook's create rules. Only queue-managed Jobs are
/// Kueue's business.
pub fn validate_create(job: &Job) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let meta = &job.metadata;
    if queue_name(meta).is_none() {
        return errs;
    }
    if let Some(q) = queue_name(meta) {
        super::names::dns_subdomain(&labels_path(label::QUEUE_NAME), q, &mut errs);
    }
    if let Some(v) = meta.labels.as_ref().and_then(|l| l.get(label::MAX_EXEC_TIME_SECONDS)) {
        let path = labels_path(label::MAX_EXEC_TIME_SECONDS);
        match v.parse::<i64>() {
            Err(e) => errs.push(FieldError::invalid(&path, format!("{v:?}: {e}"))),
            Ok(n) if n <= 0 => errs.push(FieldError::invalid(&path, format!("{n}: should be greater than 0"))),
            Ok(_) => {}
        }
    }
    errs.extend(validate_partial_admission(job));
    errs.extend(validate_sync_completions(job));
    errs
}

/// The min-parallelism annotation: a number between 1 and the pod count less one.
fn validate_partial_admission(job: &Job) -> Vec<FieldError> {
    let Some(v) = annotation(&job.metadata, JOB_MIN_PARALLELISM) else {
        return Vec::new();
    };
    let path = annotations_path(JOB_MIN_PARALLELISM);
    let count = job.spec.as_ref().map_or(1, pods_count);
    match v.parse::<i64>() {
        Err(e) => vec![FieldError::invalid(&path, format!("{v:?}: {e}"))],
        Ok(n) if n >= i64::from(count) || n <= 0 => {
            vec![FieldError::invalid(&path, format!("{n}: should be between 0 and {}", i64::from(count) - 1))]
        }
        Ok(_) => Vec::new(),
    }
}

fn validate_sync_completions(job: &Job) -> Vec<FieldError> {
    let Some(v) = annotation(&job.metadata, JOB_COMPLETIONS_EQUAL_PARALLELISM) else {
        return Vec::new();
    };
    let path = annotations_path(JOB_COMPLETIONS_EQUAL_PARALLELISM);
    let Some(on) = parse_go_bool(v) else {
        return vec![FieldError::invalid(&path, format!("{v:?}: invalid syntax"))];
    };
    let mut errs = Vec::new();
    if on {
        let spec = job.spec.clone().unwrap_or_default();
        if spec.completion_mode.as_deref().is_none_or(|m| m == "NonIndexed") {
            errs.push(FieldError::invalid(&path, format!("{v:?}: should not be enabled for NonIndexed jobs")));
        }
        if spec.parallelism.unwrap_or(1) != spec.completions.unwrap_or(1) {
            errs.push(FieldError::invalid(
                "spec.completions",
                format!("should be equal to parallelism when {JOB_COMPLETIONS_EQUAL_PARALLELISM} is annotation is true"),
            ));
        }
    }
    errs
}

fn suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

/// Kueue's Job webhook `validateUpdate`: the create rules on the new Job, and what may not change
/// while it runs (queue name, workload priority class, max execution time, parallelism under
/// partial admission).
pub fn validate_update(new: &Job, old: &Job) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if queue_name(&new.metadata).is_some() {
        let mut create = validate_create(new);
        // The min-parallelism annotation is judged again only when it changes.
        if annotation(&new.metadata, JOB_MIN_PARALLELISM) == annotation(&old.metadata, JOB_MIN_PARALLELISM) {
            let p = annotations_path(JOB_MIN_PARALLELISM);
            create.retain(|e| e.field != p.as_str());
        }
        errs.extend(create);
    }
    if !suspended(new) {
        for key in [label::QUEUE_NAME, label::PRIORITY_CLASS, label::MAX_EXEC_TIME_SECONDS] {
            let get = |j: &Job| j.metadata.labels.as_ref().and_then(|l| l.get(key)).cloned();
            if get(new) != get(old) {
                errs.push(FieldError::invalid(&labels_path(key), format!("{:?}: field is immutable", get(new).unwrap_or_default())));
            }
        }
    }
    if annotation(&old.metadata, JOB_MIN_PARALLELISM).is_some() && !suspended(old) {
        let p = |j: &Job| j.spec.as_ref().map_or(1, parallelism);
        if p(old) != p(new) {
            errs.push(FieldError::forbidden("spec.parallelism", "cannot change when partial admission is enabled and the job is not suspended"));
        }
    }
    if suspended(old) == suspended(new) && !suspended(new) && completions_follow_parallelism(&old.metadata) != completions_follow_parallelism(&new.metadata) {
        errs.push(FieldError::forbidden(
            annotations_path(JOB_COMPLETIONS_EQUAL_PARALLELISM).as_str(),
            "field is immutable while the job is not suspended",
        ));
    }
    errs
}

/// Defaults and validates a Job write (the embedded server's and the webhook's Job rules). Objects
/// that are not Jobs, or do not parse as one, are left to the schema check.
pub fn admit(create: bool, new: &mut Value, old: Option<&Value>) -> Vec<FieldError> {
    admit_in(create, new, old, &ManagedJobs::default(), &JobNamespace::default(), Frameworks::default())
}

/// [`admit`] knowing the configuration's managed-jobs switches and the Job's namespace.
pub fn admit_in(create: bool, new: &mut Value, old: Option<&Value>, managed: &ManagedJobs, ns: &JobNamespace, frameworks: Frameworks) -> Vec<FieldError> {
    if create {
        default_job_in(new, managed, ns, frameworks);
    }
    let Ok(job) = serde_json::from_value::<Job>(new.clone()) else {
        return Vec::new();
    };
    match old.map(|o| serde_json::from_value::<Job>(o.clone())) {
        Some(Ok(old)) if !create => {
            // Kueue's webhooks judge the spec and labels; a status write is not theirs to refuse.
            if old.spec == job.spec && old.metadata.labels == job.metadata.labels && old.metadata.annotations == job.metadata.annotations {
                return Vec::new();
            }
            validate_update(&job, &old)
        }
        _ => validate_create(&job),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(labels: Value, annotations: Value, spec: Value) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "default", "labels": labels, "annotations": annotations},
            "spec": spec})
    }

    fn parse(v: &Value) -> Job {
        serde_json::from_value(v.clone()).unwrap()
    }

    fn fields(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.field.clone()).collect()
    }

    fn template() -> Value {
        json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}})
    }

    // Kueue: pkg/controller/jobs/job/job_webhook_test.go TestDefault ("add a suspend field when a queue
    // name is set", "job without queue name is not suspended").
    #[test]
    fn a_queue_labelled_job_is_created_suspended() {
        let mut queued = job(json!({label::QUEUE_NAME: "lq"}), json!({}), json!({"template": template()}));
        assert!(admit(true, &mut queued, None).is_empty());
        assert_eq!(queued["spec"]["suspend"], true);
        let mut plain = job(json!({}), json!({}), json!({"template": template()}));
        assert!(admit(true, &mut plain, None).is_empty());
        assert!(plain["spec"].get("suspend").is_none(), "not Kueue's business without a queue");
    }

    // Kueue: job_webhook_test.go TestValidateCreate ("invalid queue-name label", "min-parallelism
    // out of range", "invalid sync completions annotation for NonIndexed job", "max-exec-time").
    #[test]
    fn create_rules_follow_kueues_job_webhook() {
        let spec = json!({"parallelism": 4, "completions": 6, "template": template()});
        let cases: Vec<(&str, Value, Value, Value, Vec<&str>)> = vec![
            ("valid", json!({label::QUEUE_NAME: "lq"}), json!({}), spec.clone(), vec![]),
            ("bad queue name", json!({label::QUEUE_NAME: "Bad_Queue"}), json!({}), spec.clone(), vec!["metadata.labels[kueue.x-k8s.io/queue-name]"]),
            ("min parallelism in range", json!({label::QUEUE_NAME: "lq"}), json!({JOB_MIN_PARALLELISM: "3"}), spec.clone(), vec![]),
            ("min parallelism = pods", json!({label::QUEUE_NAME: "lq"}), json!({JOB_MIN_PARALLELISM: "4"}), spec.clone(), vec!["metadata.annotations[kueue.x-k8s.io/job-min-parallelism]"]),
            ("min parallelism zero", json!({label::QUEUE_NAME: "lq"}), json!({JOB_MIN_PARALLELISM: "0"}), spec.clone(), vec!["metadata.annotations[kueue.x-k8s.io/job-min-parallelism]"]),
            ("min parallelism not a number", json!({label::QUEUE_NAME: "lq"}), json!({JOB_MIN_PARALLELISM: "x"}), spec.clone(), vec!["metadata.annotations[kueue.x-k8s.io/job-min-parallelism]"]),
            ("sync completions on NonIndexed", json!({label::QUEUE_NAME: "lq"}), json!({JOB_COMPLETIONS_EQUAL_PARALLELISM: "true"}), json!({"parallelism": 4, "completions": 4, "template": template()}), vec!["metadata.annotations[kueue.x-k8s.io/job-completions-equal-parallelism]"]),
            ("sync completions, Indexed, unequal", json!({label::QUEUE_NAME: "lq"}), json!({JOB_COMPLETIONS_EQUAL_PARALLELISM: "true"}), json!({"completionMode": "Indexed", "parallelism": 4, "completions": 6, "template": template()}), vec!["spec.completions"]),
            ("max exec time zero", json!({label::QUEUE_NAME: "lq", label::MAX_EXEC_TIME_SECONDS: "0"}), json!({}), spec.clone(), vec!["metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]"]),
            ("no queue: not judged", json!({}), json!({JOB_MIN_PARALLELISM: "40"}), spec.clone(), vec![]),
        ];
        for (name, labels, annotations, spec, want) in cases {
            let mut obj = job(labels, annotations, spec);
            assert_eq!(fields(&admit(true, &mut obj, None)), want, "{name}");
        }
    }

    // Kueue: job_webhook_test.go TestValidateUpdate ("queue name can change while suspended", "queue
    // name immutable while running", "parallelism immutable under partial admission while running",
    // "workload priority class immutable while running").
    #[test]
    fn update_rules_follow_kueues_job_webhook() {
        let with = |queue: &str, suspend: bool, parallelism: i32, min: Option<&str>| {
            let annotations = match min {
                Some(m) => json!({JOB_MIN_PARALLELISM: m}),
                None => json!({}),
            };
            parse(&job(json!({label::QUEUE_NAME: queue}), annotations, json!({"suspend": suspend, "parallelism": parallelism, "template": template()})))
        };
        assert!(validate_update(&with("b", true, 2, None), &with("a", true, 2, None)).is_empty());
        assert_eq!(fields(&validate_update(&with("b", false, 2, None), &with("a", false, 2, None))), vec!["metadata.labels[kueue.x-k8s.io/queue-name]"]);
        assert_eq!(fields(&validate_update(&with("a", false, 3, Some("1")), &with("a", false, 2, Some("1")))), vec!["spec.parallelism"]);
        assert!(validate_update(&with("a", true, 3, Some("1")), &with("a", true, 2, Some("1"))).is_empty(), "suspended: free to change");
        // An annotation out of range stored before is judged again only when it changes.
        assert!(validate_update(&with("a", true, 1, Some("1")), &with("a", true, 1, Some("1"))).is_empty());
        let mut wpc = with("a", false, 2, None);
        wpc.metadata.labels.as_mut().unwrap().insert(label::PRIORITY_CLASS.into(), "high".into());
        assert_eq!(fields(&validate_update(&wpc, &with("a", false, 2, None))), vec!["metadata.labels[kueue.x-k8s.io/priority-class]"]);
    }

    #[test]
    fn pods_count_is_kueues() {
        let spec = |p: Option<i32>, c: Option<i32>| JobSpec { parallelism: p, completions: c, ..Default::default() };
        assert_eq!(pods_count(&spec(None, None)), 1);
        assert_eq!(pods_count(&spec(Some(4), None)), 4);
        assert_eq!(pods_count(&spec(Some(4), Some(2))), 2);
        assert_eq!(pods_count(&spec(Some(4), Some(9))), 4);
    }
}
