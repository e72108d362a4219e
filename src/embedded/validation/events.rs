//! Events, after kube-apiserver's `pkg/apis/core/validation/events.go` (`ValidateEventCreate`) as the
//! `events.k8s.io` group reaches it: a core `v1` Event keeps the legacy rules (`legacyValidateEvent`:
//! its involved object in its namespace; with an `eventTime`, a reporter, an action and a reason), an
//! `events.k8s.io/v1` one also needs an `eventTime`, a `type` of `Normal` or `Warning` and no
//! deprecated field.

use serde_json::{Value, json};

use super::{invalid, required, str_at};
use crate::api::validation::{FieldError, Path};

fn namespace(obj: &Value) -> &str {
    obj.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn text<'a>(obj: &'a Value, field: &str) -> &'a str {
    str_at(obj, field).unwrap_or_default()
}

fn unset_time(obj: &Value, field: &str) -> bool {
    obj.get(field)
        .is_none_or(|t| t.is_null() || t.as_str() == Some(""))
}

/// `field.Invalid(path, "", "can have at most N characters")`, as `legacyValidateEvent` words it.
fn at_most(obj: &Value, field: &str, limit: usize, errs: &mut Vec<FieldError>) {
    if text(obj, field).chars().count() > limit {
        errs.push(invalid(
            &Path::root(field),
            &json!(""),
            &format!("can have at most {limit} characters"),
        ));
    }
}

/// `legacyValidateEvent`, on the stored (core) names; `reporting` is the name the reporting
/// controller's errors carry (`source` through core v1, `reportingController` through
/// events.k8s.io). An Event without an `eventTime` is an old one: its involved object lives in its
/// namespace (or names none, in `default`); a new one also names its reporter, action and reason.
fn legacy(obj: &Value, reporting: &str, errs: &mut Vec<FieldError>) {
    let ns = namespace(obj);
    let involved = obj
        .get("involvedObject")
        .and_then(|o| str_at(o, "namespace"))
        .unwrap_or_default();
    let mismatch = || {
        invalid(
            &Path::root("involvedObject").child("namespace"),
            &json!(involved),
            "does not match event.namespace",
        )
    };
    if unset_time(obj, "eventTime") {
        let ok = if involved.is_empty() {
            ns.is_empty() || ns == "default"
        } else {
            ns == involved
        };
        if !ok {
            errs.push(mismatch());
        }
        return;
    }
    if involved.is_empty() && ns != "default" && ns != "kube-system" {
        errs.push(mismatch());
    }
    let controller = text(obj, "reportingComponent");
    let rpath = Path::root(reporting);
    if controller.is_empty() {
        errs.push(required(&rpath, ""));
        // `IsQualifiedName("")` finds the name part both empty and not matching its pattern.
        errs.push(FieldError::invalid(&rpath, "\"\": name part must be non-empty"));
        errs.push(FieldError::invalid(
            &rpath,
            "\"\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ));
    } else {
        crate::api::names::qualified_name(&rpath, controller, errs);
    }
    for (field, limit) in [("reportingInstance", 128), ("action", 128), ("reason", 128)] {
        if text(obj, field).is_empty() {
            errs.push(required(&Path::root(field), ""));
        }
        at_most(obj, field, limit, errs);
    }
    at_most(obj, "message", 1024, errs);
}

pub fn validate_core_event(obj: &Value, errs: &mut Vec<FieldError>) {
    legacy(obj, "source", errs);
}

/// `ValidateEventCreate` for `events.k8s.io/v1`: the legacy checks, then an `eventTime`, a `type` of
/// `Normal` or `Warning`, and none of the deprecated fields.
pub fn validate_events_event(obj: &Value, errs: &mut Vec<FieldError>) {
    legacy(obj, "reportingController", errs);
    if unset_time(obj, "eventTime") {
        errs.push(required(&Path::root("eventTime"), ""));
    }
    let type_ = text(obj, "type");
    if type_ != "Normal" && type_ != "Warning" {
        // The real server's words: the value shown is empty and the detail carries the type.
        errs.push(invalid(
            &Path::root("type"),
            &json!(""),
            &format!("has invalid value: {type_}"),
        ));
    }
    let unset = |field: &str, errs: &mut Vec<FieldError>| {
        errs.push(invalid(&Path::root(field), &json!(""), "needs to be unset"));
    };
    for field in ["firstTimestamp", "lastTimestamp"] {
        if !unset_time(obj, field) {
            unset(field, errs);
        }
    }
    if obj.get("count").and_then(Value::as_i64).is_some_and(|c| c != 0) {
        unset("count", errs);
    }
    let source = obj.get("source").unwrap_or(&Value::Null);
    if !text(source, "component").is_empty() || !text(source, "host").is_empty() {
        unset("source", errs);
    }
}
