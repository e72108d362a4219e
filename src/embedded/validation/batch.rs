//! Jobs, after kube-apiserver's `pkg/apis/batch/validation/validation.go` (`ValidateJob`,
//! `validateJobSpec`, `ValidateJobSpecUpdate`): counts not negative, the completion mode, the pod
//! template as a pod spec with a restart policy of `OnFailure` or `Never`, and what stays fixed.

use serde_json::Value;

use super::{invalid, non_negative, one_of, pod};
use crate::api::validation::{FieldError, Path};

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
        validate_update(spec, old.get("spec").unwrap_or(&Value::Null), &path, errs);
    }
}

/// Whether a `metav1.LabelSelector` selects `labels` (`LabelSelectorAsSelector(..).Matches`): every
/// `matchLabels` pair and every `matchExpressions` requirement holds; an empty selector selects all.
fn selects(sel: &Value, labels: &Value) -> bool {
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

/// `ValidateJobSpecUpdate`: the selector stays, and so does the completion count but for an elastic
/// indexed Job (completions moving with parallelism). The template stays once the Job runs; while it is
/// suspended the real server lets its scheduling directives change (what Kueue writes on admission),
/// which this port allows as a whole.
fn validate_update(new: &Value, old: &Value, path: &Path, errs: &mut Vec<FieldError>) {
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
    if !suspended(old) && !suspended(new) {
        immutable("template", errs);
    }
}
