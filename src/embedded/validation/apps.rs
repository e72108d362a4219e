//! Deployments (served in real-cluster mode, stored only), after kube-apiserver's
//! `pkg/apis/apps/validation/validation.go` (`ValidateDeploymentSpec`,
//! `ValidatePodTemplateSpecForReplicaSet`): counts not negative, a selector that is there, not empty
//! and selects the template's labels, the template as a pod spec that restarts `Always`.

use serde_json::{Value, json};

use super::{batch, invalid, non_negative, not_supported, pod, required, str_at};
use crate::api::validation::{FieldError, Path};

pub fn validate_deployment(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let path = Path::root("spec");
    non_negative(spec, "replicas", &path, errs);
    let selector = spec.get("selector").filter(|s| s.is_object());
    match selector {
        None => errs.push(required(&path.child("selector"), "")),
        Some(sel) => {
            let count = |f: &str| {
                sel.get(f)
                    .map(|v| v.as_object().map_or(0, |m| m.len()) + v.as_array().map_or(0, Vec::len))
                    .unwrap_or(0)
            };
            if count("matchLabels") + count("matchExpressions") == 0 {
                errs.push(invalid(
                    &path.child("selector"),
                    sel,
                    "empty selector is invalid for deployment",
                ));
            }
        }
    }
    let labels = spec.pointer("/template/metadata/labels").unwrap_or(&Value::Null);
    // A nil selector is no selector (`selector.Empty()`): the template's labels are not checked.
    if let Some(sel) = selector
        && !batch::selects(sel, labels)
    {
        errs.push(invalid(
            &path.child("template").child("metadata").child("labels"),
            labels,
            "`selector` does not match template `labels`",
        ));
    }
    let template_spec = spec.pointer("/template/spec").unwrap_or(&Value::Null);
    let tpath = path.child("template").child("spec");
    pod::validate_pod_spec(template_spec, &tpath, errs);
    if let Some(policy) = str_at(template_spec, "restartPolicy")
        && policy != "Always"
    {
        errs.push(not_supported(
            &tpath.child("restartPolicy"),
            &json!(policy),
            &["Always"],
        ));
    }
    for field in [
        "minReadySeconds",
        "revisionHistoryLimit",
        "progressDeadlineSeconds",
    ] {
        non_negative(spec, field, &path, errs);
    }
}
