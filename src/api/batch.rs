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
use super::kueue::pods_ready_annotation;
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
pub const MANAGED_LABELS: [&str; 4] = [
    LEGACY_JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    JOB_NAME_LABEL,
    CONTROLLER_UID_LABEL,
];

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
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
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

/// Index intervals in the Job status format (`completedIndexes`, `failedIndexes`: `"1,3-5"`), each
/// clamped below `limit` (the Job's completions: a scale-down leaves indexes above it that no longer
/// count, kueue#13117). Malformed or descending parts are skipped, as Kueue's `parseIndexRange` skips
/// them. Sorted and merged.
pub fn parse_indexes(s: &str, limit: i32) -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (Ok(first), Ok(last)) = (a.parse::<i32>(), b.parse::<i32>()) else {
            continue;
        };
        let last = last.min(limit.saturating_sub(1));
        if first >= 0 && first <= last {
            out.push((first, last));
        }
    }
    merge_indexes(out)
}

/// Sorts and merges overlapping or adjacent intervals.
pub fn merge_indexes(mut v: Vec<(i32, i32)>) -> Vec<(i32, i32)> {
    v.sort_unstable();
    let mut out: Vec<(i32, i32)> = Vec::with_capacity(v.len());
    for (first, last) in v {
        match out.last_mut() {
            Some(prev) if first <= prev.1.saturating_add(1) => prev.1 = prev.1.max(last),
            _ => out.push((first, last)),
        }
    }
    out
}

/// How many indexes the (merged) intervals hold.
pub fn count_indexes(v: &[(i32, i32)]) -> i64 {
    v.iter().map(|(a, b)| i64::from(*b) - i64::from(*a) + 1).sum()
}

/// The status string of merged intervals (`"0-3,5"`).
pub fn format_indexes(v: &[(i32, i32)]) -> String {
    v.iter()
        .map(|(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") })
        .collect::<Vec<_>>()
        .join(",")
}

/// Kueue's `terminalIndexesCount`: the indexes of an Indexed Job that will not run again (completed,
/// or failed past `backoffLimitPerIndex`), below `completions`, each counted once.
pub fn terminal_indexes_count(completed: &str, failed: &str, completions: i32) -> i32 {
    if completions <= 0 {
        return 0;
    }
    let mut all = parse_indexes(completed, completions);
    all.extend(parse_indexes(failed, completions));
    i32::try_from(count_indexes(&merge_indexes(all))).unwrap_or(i32::MAX)
}

/// Whether the built-in Job controller runs this Job/// Whether the built-in Job controller runs this Job (`spec.managedBy` unset or its own name).
pub fn managed_by_job_controller(spec: &JobSpec) -> bool {
    spec.managed_by.as_deref().is_none_or(|m| m == JOB_CONTROLLER)
}

pub fn is_job(obj: &Value) -> bool {
    obj.get("apiVersion").and_then(Value::as_str) == Some(API_VERSION)
        && obj.get("kind").and_then(Value::as_str) == Some(KIND)
}

fn queue_name(meta: &ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(label::QUEUE_NAME))
        .map(String::as_str)
        .filter(|q| !q.is_empty())
}

/// Kueue's `ApplyDefaultForSuspend`: a queue-labelled Job is created suspended. True when changed.
pub fn default_job(obj: &mut Value) -> bool {
    default_job_in(
        obj,
        &ManagedJobs::default(),
        &JobNamespace::default(),
        Frameworks::default(),
    )
}

/// Kueue's Job webhook `Default` on create: the queue name defaulted to the `default` LocalQueue when
/// it exists, then the Job suspended when Kueue manages it (a queue name, or none under
/// `manageJobsWithoutQueueName` in a selected namespace), unless a managed job owns it; an elastic
/// Job's pod template also gets the scheduling gate `kueue.x-k8s.io/elastic-job`. True when changed.
pub fn default_job_in(
    obj: &mut Value,
    managed: &ManagedJobs,
    ns: &JobNamespace,
    frameworks: Frameworks,
) -> bool {
    if super::pod::owner_managed(obj, frameworks) {
        return false;
    }
    let before = obj.pointer("/metadata/labels").cloned();
    let suspend = managed.default_new_job(obj, ns);
    let relabelled = obj.pointer("/metadata/labels").cloned() != before;
    if !suspend {
        return relabelled;
    }
    let gated = gate_elastic_template(obj);
    match obj.get_mut("spec").and_then(Value::as_object_mut) {
        Some(spec) if spec.get("suspend") != Some(&Value::Bool(true)) => {
            spec.insert("suspend".to_string(), Value::Bool(true));
            true
        }
        _ => relabelled || gated,
    }
}

fn is_elastic(obj: &Value) -> bool {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(label::ELASTIC_JOB))
        .and_then(Value::as_str)
        == Some("true")
}

/// Kueue's `applyWorkloadSliceSchedulingGate`: every pod of an elastic Job is created behind the gate
/// `kueue.x-k8s.io/elastic-job`, which the elastic-job ungater lifts for as many pods as the Job's
/// admitted slice covers; so a `parallelism` raised while the Job runs starts no pod before its new
/// slice is admitted. Kueue gates any Job with the annotation; quotagate only one it manages (here,
/// one the webhook suspends), since no slice would ever lift the gate of another. True when changed.
fn gate_elastic_template(obj: &mut Value) -> bool {
    if !is_elastic(obj) {
        return false;
    }
    let Some(spec) = obj
        .pointer_mut("/spec/template/spec")
        .and_then(Value::as_object_mut)
    else {
        return false;
    };
    let gates = spec
        .entry("schedulingGates")
        .or_insert_with(|| Value::Array(Vec::new()));
    if gates.is_null() {
        *gates = Value::Array(Vec::new());
    }
    let Some(list) = gates.as_array_mut() else {
        return false; // not a list: the schema check refuses the Job
    };
    if list
        .iter()
        .any(|g| g.get("name").and_then(Value::as_str) == Some(label::ELASTIC_JOB_SCHEDULING_GATE))
    {
        return false;
    }
    list.push(serde_json::json!({"name": label::ELASTIC_JOB_SCHEDULING_GATE}));
    true
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
    if let Some(v) = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(label::MAX_EXEC_TIME_SECONDS))
    {
        let path = labels_path(label::MAX_EXEC_TIME_SECONDS);
        match v.parse::<i64>() {
            Err(e) => errs.push(FieldError::invalid(&path, format!("{v:?}: {e}"))),
            Ok(n) if n <= 0 => errs.push(FieldError::invalid(
                &path,
                format!("{n}: should be greater than 0"),
            )),
            Ok(_) => {}
        }
    }
    errs.extend(validate_partial_admission(job));
    errs.extend(validate_sync_completions(job));
    // Kueue's `validateTopologyRequest`: the template's TAS annotations.
    let template = job.spec.as_ref().and_then(|s| s.template.metadata.as_ref());
    let meta_path = Path::root("spec").child("template").child("metadata");
    errs.extend(super::kueue::tas::validate_tas_podset_request(
        &meta_path, template,
    ));
    if let Some(spec) = &job.spec {
        errs.extend(super::kueue::tas::validate_slice_size_upper_bound(
            &meta_path,
            template,
            pods_count(spec),
        ));
    }
    errs
}

/// The min-parallelism annotation: a number between 1 and the pod count less one.
fn validate_partial_admission(job: &Job) -> Vec<FieldError> {
    let Some(v) = annotation(&job.metadata, JOB_MIN_PARALLELISM) else {
        return Vec::new();
    };
    let path = annotations_path(JOB_MIN_PARALLELISM);
    let count = job.spec.as_ref().map_or(1, pods_count);
    let mut errs = match v.parse::<i64>() {
        Err(e) => vec![FieldError::invalid(&path, format!("{v:?}: {e}"))],
        Ok(n) if n >= i64::from(count) || n <= 0 => {
            vec![FieldError::invalid(
                &path,
                format!("{n}: should be between 0 and {}", i64::from(count) - 1),
            )]
        }
        Ok(_) => Vec::new(),
    };
    // Kueue: an elastic Job is resized through workload slices, each admitted whole.
    if super::kueue::is_elastic_job(&job.metadata) {
        errs.push(FieldError::invalid(
            &path,
            format!("{v:?}: partial admission and elastic job cannot be used together"),
        ));
    }
    errs
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
            errs.push(FieldError::invalid(
                &path,
                format!("{v:?}: should not be enabled for NonIndexed jobs"),
            ));
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
/// partial admission), and the elastic-job annotation, never.
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
        for key in [
            label::QUEUE_NAME,
            label::PRIORITY_CLASS,
            label::MAX_EXEC_TIME_SECONDS,
        ] {
            let get = |j: &Job| j.metadata.labels.as_ref().and_then(|l| l.get(key)).cloned();
            if get(new) != get(old) {
                errs.push(FieldError::invalid(
                    &labels_path(key),
                    format!("{:?}: field is immutable", get(new).unwrap_or_default()),
                ));
            }
        }
    }
    if annotation(&old.metadata, JOB_MIN_PARALLELISM).is_some() && !suspended(old) {
        let p = |j: &Job| j.spec.as_ref().map_or(1, parallelism);
        if p(old) != p(new) {
            errs.push(FieldError::forbidden(
                "spec.parallelism",
                "cannot change when partial admission is enabled and the job is not suspended",
            ));
        }
    }
    // Kueue's `validatedUpdateForEnabledWorkloadSlice`: whether a Job is elastic is fixed at creation
    // (its Workloads, and its pods' gate, are made one way or the other).
    let elastic = |j: &Job| super::kueue::is_elastic_job(&j.metadata);
    if elastic(old) != elastic(new) {
        errs.push(FieldError::invalid(
            &annotations_path(label::ELASTIC_JOB),
            format!("{}: field is immutable", elastic(new)),
        ));
    }
    if suspended(old) == suspended(new)
        && !suspended(new)
        && completions_follow_parallelism(&old.metadata) != completions_follow_parallelism(&new.metadata)
    {
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
    admit_in(
        create,
        new,
        old,
        &ManagedJobs::default(),
        &JobNamespace::default(),
        Frameworks::default(),
    )
}

/// [`admit`] knowing the configuration's managed-jobs switches and the Job's namespace.
pub fn admit_in(
    create: bool,
    new: &mut Value,
    old: Option<&Value>,
    managed: &ManagedJobs,
    ns: &JobNamespace,
    frameworks: Frameworks,
) -> Vec<FieldError> {
    if create {
        default_job_in(new, managed, ns, frameworks);
    }
    let Ok(job) = serde_json::from_value::<Job>(new.clone()) else {
        return Vec::new();
    };
    match old.map(|o| serde_json::from_value::<Job>(o.clone())) {
        Some(Ok(old)) if !create => {
            // Kueue's webhooks judge the spec and labels; a status write is not theirs to refuse.
            if old.spec == job.spec
                && old.metadata.labels == job.metadata.labels
                && old.metadata.annotations == job.metadata.annotations
            {
                return Vec::new();
            }
            let mut errs = validate_update(&job, &old);
            if let Some(max) = pods_ready_max(&job, managed) {
                errs.extend(pods_ready_annotation::validate_update(
                    job.metadata.annotations.as_ref(),
                    old.metadata.annotations.as_ref(),
                    suspended(&old),
                    max,
                ));
            }
            errs
        }
        _ => {
            let mut errs = validate_create(&job);
            if let Some(max) = pods_ready_max(&job, managed) {
                errs.extend(pods_ready_annotation::validate(
                    job.metadata.annotations.as_ref(),
                    max,
                ));
            }
            errs
        }
    }
}

/// `maxTimeoutOnWorkload` when Kueue v0.20's `WorkloadLevelWaitForPodsReady` is on and the Job is
/// Kueue's (it names a queue, or `manageJobsWithoutQueueName` takes it).
fn pods_ready_max(job: &Job, managed: &ManagedJobs) -> Option<std::time::Duration> {
    let max = managed.pods_ready_max_on_workload?;
    (queue_name(&job.metadata).is_some() || managed.without_queue_name).then_some(max)
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

    /// Kueue v0.20 (KEP-4803, kueue#15503): the Job webhook judges `kueue.x-k8s.io/wait-for-pods-ready`
    /// only under the `WorkloadLevelWaitForPodsReady` gate, on create and on a change while running.
    #[test]
    fn the_wait_for_pods_ready_annotation_is_judged_under_its_gate() {
        let gated = ManagedJobs {
            pods_ready_max_on_workload: Some(std::time::Duration::from_secs(600)),
            ..ManagedJobs::default()
        };
        let ns = JobNamespace::default();
        let fw = Frameworks::default();
        let with = |v: &str, suspend: bool| {
            job(
                json!({"kueue.x-k8s.io/queue-name": "lq"}),
                json!({"kueue.x-k8s.io/wait-for-pods-ready": v}),
                json!({"parallelism": 1, "suspend": suspend, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}),
            )
        };
        let msgs = |errs: Vec<FieldError>| -> Vec<String> {
            errs.iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect()
        };
        let at = "metadata.annotations[kueue.x-k8s.io/wait-for-pods-ready]";
        let mut big = with(r#"{"timeoutSeconds": 900}"#, true);
        assert_eq!(
            msgs(admit_in(true, &mut big, None, &gated, &ns, fw)),
            [format!(
                "{at}: timeoutSeconds: 900: must not exceed waitForPodsReady.maxTimeoutOnWorkload (600s)"
            )]
        );
        // Kueue with the gate off does not read the annotation at all.
        let mut big = with(r#"{"timeoutSeconds": 900}"#, true);
        assert!(admit_in(true, &mut big, None, &ManagedJobs::default(), &ns, fw).is_empty());
        let mut ok = with(r#"{"timeoutSeconds": 300}"#, true);
        assert!(admit_in(true, &mut ok, None, &gated, &ns, fw).is_empty());
        let running = with(r#"{"timeoutSeconds": 300}"#, false);
        let mut changed = with(r#"{"timeoutSeconds": 200}"#, false);
        assert_eq!(
            msgs(admit_in(false, &mut changed, Some(&running), &gated, &ns, fw)),
            [format!("{at}: field is immutable while the job is not suspended")]
        );
        let suspended = with(r#"{"timeoutSeconds": 300}"#, true);
        let mut changed = with(r#"{"timeoutSeconds": 200}"#, true);
        assert!(admit_in(false, &mut changed, Some(&suspended), &gated, &ns, fw).is_empty());
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
        let mut queued = job(
            json!({label::QUEUE_NAME: "lq"}),
            json!({}),
            json!({"template": template()}),
        );
        assert!(admit(true, &mut queued, None).is_empty());
        assert_eq!(queued["spec"]["suspend"], true);
        let mut plain = job(json!({}), json!({}), json!({"template": template()}));
        assert!(admit(true, &mut plain, None).is_empty());
        assert!(
            plain["spec"].get("suspend").is_none(),
            "not Kueue's business without a queue"
        );
    }

    // Kueue: job_webhook_test.go TestValidateCreate ("invalid queue-name label", "min-parallelism
    // out of range", "invalid sync completions annotation for NonIndexed job", "max-exec-time").
    #[test]
    fn create_rules_follow_kueues_job_webhook() {
        let spec = json!({"parallelism": 4, "completions": 6, "template": template()});
        let cases: Vec<(&str, Value, Value, Value, Vec<&str>)> = vec![
            (
                "valid",
                json!({label::QUEUE_NAME: "lq"}),
                json!({}),
                spec.clone(),
                vec![],
            ),
            (
                "bad queue name",
                json!({label::QUEUE_NAME: "Bad_Queue"}),
                json!({}),
                spec.clone(),
                vec!["metadata.labels[kueue.x-k8s.io/queue-name]"],
            ),
            (
                "min parallelism in range",
                json!({label::QUEUE_NAME: "lq"}),
                json!({JOB_MIN_PARALLELISM: "3"}),
                spec.clone(),
                vec![],
            ),
            (
                "min parallelism = pods",
                json!({label::QUEUE_NAME: "lq"}),
                json!({JOB_MIN_PARALLELISM: "4"}),
                spec.clone(),
                vec!["metadata.annotations[kueue.x-k8s.io/job-min-parallelism]"],
            ),
            (
                "min parallelism zero",
                json!({label::QUEUE_NAME: "lq"}),
                json!({JOB_MIN_PARALLELISM: "0"}),
                spec.clone(),
                vec!["metadata.annotations[kueue.x-k8s.io/job-min-parallelism]"],
            ),
            (
                "min parallelism not a number",
                json!({label::QUEUE_NAME: "lq"}),
                json!({JOB_MIN_PARALLELISM: "x"}),
                spec.clone(),
                vec!["metadata.annotations[kueue.x-k8s.io/job-min-parallelism]"],
            ),
            (
                "sync completions on NonIndexed",
                json!({label::QUEUE_NAME: "lq"}),
                json!({JOB_COMPLETIONS_EQUAL_PARALLELISM: "true"}),
                json!({"parallelism": 4, "completions": 4, "template": template()}),
                vec!["metadata.annotations[kueue.x-k8s.io/job-completions-equal-parallelism]"],
            ),
            (
                "sync completions, Indexed, unequal",
                json!({label::QUEUE_NAME: "lq"}),
                json!({JOB_COMPLETIONS_EQUAL_PARALLELISM: "true"}),
                json!({"completionMode": "Indexed", "parallelism": 4, "completions": 6, "template": template()}),
                vec!["spec.completions"],
            ),
            (
                "max exec time zero",
                json!({label::QUEUE_NAME: "lq", label::MAX_EXEC_TIME_SECONDS: "0"}),
                json!({}),
                spec.clone(),
                vec!["metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]"],
            ),
            (
                "no queue: not judged",
                json!({}),
                json!({JOB_MIN_PARALLELISM: "40"}),
                spec.clone(),
                vec![],
            ),
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
            parse(&job(
                json!({label::QUEUE_NAME: queue}),
                annotations,
                json!({"suspend": suspend, "parallelism": parallelism, "template": template()}),
            ))
        };
        assert!(validate_update(&with("b", true, 2, None), &with("a", true, 2, None)).is_empty());
        assert_eq!(
            fields(&validate_update(
                &with("b", false, 2, None),
                &with("a", false, 2, None)
            )),
            vec!["metadata.labels[kueue.x-k8s.io/queue-name]"]
        );
        assert_eq!(
            fields(&validate_update(
                &with("a", false, 3, Some("1")),
                &with("a", false, 2, Some("1"))
            )),
            vec!["spec.parallelism"]
        );
        assert!(
            validate_update(&with("a", true, 3, Some("1")), &with("a", true, 2, Some("1"))).is_empty(),
            "suspended: free to change"
        );
        // An annotation out of range stored before is judged again only when it changes.
        assert!(validate_update(&with("a", true, 1, Some("1")), &with("a", true, 1, Some("1"))).is_empty());
        let mut wpc = with("a", false, 2, None);
        wpc.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(label::PRIORITY_CLASS.into(), "high".into());
        assert_eq!(
            fields(&validate_update(&wpc, &with("a", false, 2, None))),
            vec!["metadata.labels[kueue.x-k8s.io/priority-class]"]
        );
    }

    // Kueue: job_webhook.go `applyWorkloadSliceSchedulingGate` (TestDefault's elastic cases): an
    // elastic Job's pod template gets the elastic-job scheduling gate, once.
    #[test]
    fn an_elastic_job_is_created_suspended_with_its_pods_gated() {
        let elastic = json!({label::ELASTIC_JOB: "true"});
        let gates = |v: &Value| v.pointer("/spec/template/spec/schedulingGates").cloned();
        let mut queued = job(
            json!({label::QUEUE_NAME: "lq"}),
            elastic.clone(),
            json!({"parallelism": 2, "template": template()}),
        );
        assert!(admit(true, &mut queued, None).is_empty());
        assert_eq!(queued["spec"]["suspend"], true);
        assert_eq!(
            gates(&queued),
            Some(json!([{"name": label::ELASTIC_JOB_SCHEDULING_GATE}]))
        );
        // A gate already there (or the user's own beside it) is kept, not doubled.
        let mut t = template();
        t["spec"]["schedulingGates"] =
            json!([{"name": "user/gate"}, {"name": label::ELASTIC_JOB_SCHEDULING_GATE}]);
        let mut again = job(
            json!({label::QUEUE_NAME: "lq"}),
            elastic.clone(),
            json!({"template": t}),
        );
        assert!(admit(true, &mut again, None).is_empty());
        assert_eq!(
            gates(&again),
            Some(json!([{"name": "user/gate"}, {"name": label::ELASTIC_JOB_SCHEDULING_GATE}]))
        );
        let mut plain = job(
            json!({label::QUEUE_NAME: "lq"}),
            json!({}),
            json!({"template": template()}),
        );
        assert!(admit(true, &mut plain, None).is_empty());
        assert_eq!(gates(&plain), None, "only elastic Jobs are gated");
        // Kueue gates this one too, and nothing would ever lift it: quotagate leaves a Job it does not
        // manage alone.
        let mut unqueued = job(json!({}), elastic, json!({"template": template()}));
        assert!(admit(true, &mut unqueued, None).is_empty());
        assert_eq!((gates(&unqueued), unqueued["spec"].get("suspend")), (None, None));
    }

    // Kueue: job_webhook_test.go TestValidateCreate "partial admission and elastic job cannot be used
    // together" (here with a queue name: quotagate judges only the Jobs it manages).
    #[test]
    fn partial_admission_is_refused_on_an_elastic_job() {
        let mut j = job(
            json!({label::QUEUE_NAME: "lq"}),
            json!({JOB_MIN_PARALLELISM: "2", label::ELASTIC_JOB: "true"}),
            json!({"parallelism": 4, "completions": 6, "template": template()}),
        );
        let errs = admit(true, &mut j, None);
        let got: Vec<(String, String)> = errs
            .iter()
            .map(|e| (e.field.clone(), e.message.clone()))
            .collect();
        assert_eq!(
            got,
            vec![(
                format!("metadata.annotations[{JOB_MIN_PARALLELISM}]"),
                "\"2\": partial admission and elastic job cannot be used together".to_string()
            )]
        );
    }

    // Kueue: pkg/controller/jobframework/validation_test.go (validatedUpdateForEnabledWorkloadSlice):
    // the elastic-job annotation can be neither added nor removed; parallelism stays free to change.
    #[test]
    fn the_elastic_annotation_is_immutable_on_a_job() {
        let with = |elastic: bool, parallelism: i32| {
            let annotations = if elastic {
                json!({label::ELASTIC_JOB: "true"})
            } else {
                json!({})
            };
            parse(&job(
                json!({label::QUEUE_NAME: "lq"}),
                annotations,
                json!({"suspend": false, "parallelism": parallelism, "template": template()}),
            ))
        };
        let path = format!("metadata.annotations[{}]", label::ELASTIC_JOB);
        let msgs = |errs: Vec<FieldError>| errs.into_iter().map(|e| (e.field, e.message)).collect::<Vec<_>>();
        assert_eq!(
            msgs(validate_update(&with(true, 2), &with(false, 2))),
            vec![(path.clone(), "true: field is immutable".to_string())]
        );
        assert_eq!(
            msgs(validate_update(&with(false, 2), &with(true, 2))),
            vec![(path, "false: field is immutable".to_string())]
        );
        assert!(
            validate_update(&with(true, 5), &with(true, 2)).is_empty(),
            "a running elastic Job may be resized"
        );
    }

    // Kueue: pkg/controller/jobs/job/job_controller_test.go TestTerminalIndexesCount, every case.
    #[test]
    fn terminal_indexes_are_counted_as_kueue_counts_them() {
        let cases = [
            ("", "", 10, 0),
            ("0-9", "", 0, 0),
            ("0", "", 10, 1),
            ("", "1", 10, 1),
            ("0-4", "", 10, 5),
            ("0-4,7,9-11", "", 10, 7),
            ("0-2,7", "3-5,8", 10, 8),
            ("0-4", "3-7", 10, 8),
            ("0-9", "2-3", 10, 10),
            ("0-8", "", 10, 9),
            ("0-14", "", 10, 10),
            ("5-19", "", 10, 5),
            ("10-19", "", 10, 0),
            ("", "5-19", 10, 5),
            ("", "10-19", 10, 0),
            ("", "4", 3, 0),
            ("0-1", "2-19", 5, 5),
            ("0-4", "", 3, 3),
            ("3,5,7", "", 10, 3),
            ("3,5,12", "", 10, 2),
            ("abc,0-2", "", 10, 3),
            ("0-x,4", "", 10, 1),
        ];
        for (completed, failed, completions, want) in cases {
            assert_eq!(
                terminal_indexes_count(completed, failed, completions),
                want,
                "{completed:?} {failed:?} {completions}"
            );
        }
        assert_eq!(
            format_indexes(&merge_indexes(vec![(5, 5), (0, 1), (2, 3), (7, 9)])),
            "0-3,5,7-9"
        );
        // A forged range costs nothing in proportion to its numbers.
        assert_eq!(terminal_indexes_count("0-2147483646", "", i32::MAX), i32::MAX);
    }

    #[test]
    fn pods_count_is_kueues() {
        let spec = |p: Option<i32>, c: Option<i32>| JobSpec {
            parallelism: p,
            completions: c,
            ..Default::default()
        };
        assert_eq!(pods_count(&spec(None, None)), 1);
        assert_eq!(pods_count(&spec(Some(4), None)), 4);
        assert_eq!(pods_count(&spec(Some(4), Some(2))), 2);
        assert_eq!(pods_count(&spec(Some(4), Some(9))), 4);
    }
}
