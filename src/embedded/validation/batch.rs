//! Jobs, after kube-apiserver's `pkg/apis/batch/validation/validation.go` (`ValidateJob`,
//! `validateJobSpec`, `ValidateJobSpecUpdate`): counts not negative, the completion mode, the pod
//! template as a pod spec with a restart policy of `OnFailure` or `Never`, and what stays fixed.

use serde_json::{Value, json};

use super::{invalid, non_negative, one_of, pod, str_at};
use crate::api::validation::{FieldError, Path};

/// `ValidateCronJobSpec` (`pkg/apis/batch/validation/validation.go`), without parsing the schedule:
/// a schedule is required, the counts are not negative, the concurrency policy is one of three, and
/// the job template's pod spec is a Job's.
pub fn validate_cron_job(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let path = Path::root("spec");
    if spec
        .get("schedule")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        errs.push(super::required(&path.child("schedule"), ""));
    }
    non_negative(spec, "startingDeadlineSeconds", &path, errs);
    one_of(
        spec,
        "concurrencyPolicy",
        &path,
        &["Allow", "Forbid", "Replace"],
        errs,
    );
    let job = spec.pointer("/jobTemplate/spec").unwrap_or(&Value::Null);
    let jpath = path.child("jobTemplate").child("spec");
    for field in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
    ] {
        non_negative(job, field, &jpath, errs);
    }
    let template_spec = job.pointer("/template/spec").unwrap_or(&Value::Null);
    let tpath = jpath.child("template").child("spec");
    pod::validate_pod_spec(template_spec, &tpath, errs);
    pod::template_restart_policy(template_spec, &tpath, errs);
    non_negative(spec, "successfulJobsHistoryLimit", &path, errs);
    non_negative(spec, "failedJobsHistoryLimit", &path, errs);
}

pub fn validate_job(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let path = Path::root("spec");
    for field in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
    ] {
        non_negative(spec, field, &path, errs);
    }
    one_of(spec, "completionMode", &path, &["NonIndexed", "Indexed"], errs);
    // `ValidateJobSpec`: the selector (generated, or the client's under `manualSelector`) selects the
    // template's labels.
    if let Some(sel) = spec.get("selector").filter(|s| s.is_object()) {
        let labels = spec.pointer("/template/metadata/labels").unwrap_or(&Value::Null);
        if !selects(sel, labels) {
            errs.push(invalid(
                &path.child("template").child("metadata").child("labels"),
                labels,
                "`selector` does not match template `labels`",
            ));
        }
    }
    let template_spec = spec.pointer("/template/spec").unwrap_or(&Value::Null);
    let tpath = path.child("template").child("spec");
    pod::validate_pod_spec(template_spec, &tpath, errs);
    pod::template_restart_policy(template_spec, &tpath, errs);
    if let Some(old) = old {
        validate_update(spec, old, &path, errs);
    }
}

/// Whether a `metav1.LabelSelector` selects `labels` (`LabelSelectorAsSelector(..).Matches`): every
/// `matchLabels` pair and every `matchExpressions` requirement holds; an empty selector selects all.
pub(super) fn selects(sel: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let pairs = sel.get("matchLabels").and_then(Value::as_object);
    if pairs.into_iter().flatten().any(|(k, v)| label(k) != v.as_str()) {
        return false;
    }
    let exprs = sel.get("matchExpressions").and_then(Value::as_array);
    exprs.into_iter().flatten().all(|e| {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" => label(key).is_some_and(|v| values.contains(&v)),
            "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
            "Exists" => label(key).is_some(),
            "DoesNotExist" => label(key).is_none(),
            _ => false,
        }
    })
}

fn suspended(spec: &Value) -> bool {
    spec.get("suspend").and_then(Value::as_bool) == Some(true)
}

/// `shouldAllowMutablePodTemplate` (v1.36, `MutablePodResourcesForSuspendedJobs` and
/// `MutableSchedulingDirectivesForSuspendedJobs` on by default): the Job is suspended with no active
/// pod, and either never started or carries `Suspended=True`.
fn template_may_change(old: &Value) -> bool {
    let status = old.get("status").unwrap_or(&Value::Null);
    let started = status.get("startTime").is_some_and(|t| !t.is_null());
    let suspended_condition = status
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| str_at(c, "type") == Some("Suspended") && str_at(c, "status") == Some("True"));
    let active = status.get("active").and_then(Value::as_i64).unwrap_or(0);
    suspended(old.get("spec").unwrap_or(&Value::Null)) && (!started || suspended_condition) && active == 0
}

/// Go's semantic equality of two parts of a spec.
fn same(a: &Value, b: &Value) -> bool {
    pod::normalized(a) == pod::normalized(b)
}

/// The old template with the scheduling directives a suspended Job may change taken from the new one
/// (`validatePodTemplateUpdate`): labels, annotations, node selector, tolerations, scheduling gates and
/// node affinity (an affinity holding only node affinity may go away).
fn with_new_directives(old: &Value, new: &Value) -> Value {
    let mut t = old.clone();
    let take = |t: &mut Value, pointer: &str, parent: &str, field: &str| {
        let v = new.pointer(pointer).cloned().unwrap_or(Value::Null);
        if let Some(p) = t.pointer_mut(parent).and_then(Value::as_object_mut) {
            p.insert(field.into(), v);
        }
    };
    for (parent, field) in [("/metadata", "labels"), ("/metadata", "annotations")] {
        ensure_object(&mut t, parent);
        take(&mut t, &format!("{parent}/{field}"), parent, field);
    }
    ensure_object(&mut t, "/spec");
    for field in ["nodeSelector", "tolerations", "schedulingGates"] {
        take(&mut t, &format!("/spec/{field}"), "/spec", field);
    }
    let new_affinity = new.pointer("/spec/affinity").filter(|a| !a.is_null());
    let old_affinity = t.pointer_mut("/spec/affinity").filter(|a| !a.is_null());
    match (new_affinity, old_affinity) {
        (None, Some(a)) => {
            if let Some(m) = a.as_object_mut() {
                m.remove("nodeAffinity");
            }
            if pod::normalized(a).is_none() {
                *a = Value::Null;
            }
        }
        (Some(n), None) => {
            let node = n.get("nodeAffinity").cloned().unwrap_or(Value::Null);
            take_value(&mut t, json!({"nodeAffinity": node}));
        }
        (Some(n), Some(a)) => {
            if let Some(m) = a.as_object_mut() {
                m.insert(
                    "nodeAffinity".into(),
                    n.get("nodeAffinity").cloned().unwrap_or(Value::Null),
                );
            }
        }
        (None, None) => {}
    }
    t
}

fn ensure_object(t: &mut Value, pointer: &str) {
    let field = pointer.trim_start_matches('/');
    if let Some(m) = t.as_object_mut() {
        let v = m.entry(field).or_insert_with(|| json!({}));
        if !v.is_object() {
            *v = json!({});
        }
    }
}

fn take_value(t: &mut Value, affinity: Value) {
    if let Some(spec) = t.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("affinity".into(), affinity);
    }
}

/// `validatePodResourceUpdatesOnly`: the old pod spec with each container's (and init container's)
/// resources taken from the new one, when the lists pair up by position and name.
fn with_new_resources(old: &Value, new: &Value) -> Value {
    let mut t = old.clone();
    for list in ["containers", "initContainers"] {
        let news = new.get(list).and_then(Value::as_array);
        let Some(olds) = t.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        let Some(news) = news.filter(|n| n.len() == olds.len()) else {
            continue;
        };
        for (o, n) in olds.iter_mut().zip(news) {
            if o.get("name") == n.get("name")
                && let Some(m) = o.as_object_mut()
            {
                m.insert(
                    "resources".into(),
                    n.get("resources").cloned().unwrap_or(Value::Null),
                );
            }
        }
    }
    t
}

/// `ValidateJobSpecUpdate`: the selector stays, and so does the completion count but for an elastic
/// indexed Job (completions moving with parallelism). The template stays once the Job runs. A Job
/// suspended before its pods start (or again, with none left) may change its scheduling directives,
/// which Kueue writes at admission and restores at eviction, and its containers' resources.
fn validate_update(new: &Value, old_job: &Value, path: &Path, errs: &mut Vec<FieldError>) {
    let old = old_job.get("spec").unwrap_or(&Value::Null);
    let immutable = |field: &str, errs: &mut Vec<FieldError>| {
        if let (Some(n), Some(o)) = (new.get(field), old.get(field))
            && n != o
        {
            errs.push(invalid(&path.child(field), n, "field is immutable"));
        }
    };
    immutable("selector", errs);
    let elastic = new.get("completionMode").and_then(Value::as_str) == Some("Indexed")
        && new.get("completions") == new.get("parallelism");
    if !elastic {
        immutable("completions", errs);
    }
    let (template, old_template) = (
        new.get("template").unwrap_or(&Value::Null),
        old.get("template").unwrap_or(&Value::Null),
    );
    if !template_may_change(old_job) {
        if !same(template, old_template) {
            errs.push(invalid(&path.child("template"), template, "field is immutable"));
        }
        return;
    }
    let relaxed = with_new_directives(old_template, template);
    let pod_spec = template.get("spec").unwrap_or(&Value::Null);
    let allowed = with_new_resources(relaxed.get("spec").unwrap_or(&Value::Null), pod_spec);
    if !same(pod_spec, &allowed) {
        errs.push(invalid(
            &path.child("template").child("spec"),
            pod_spec,
            "field is immutable",
        ));
    }
}
