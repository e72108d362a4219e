//! Events, after kube-apiserver's `pkg/apis/core/validation/events.go` (`ValidateEventCreate`) as the
//! `events.k8s.io` group (`pkg/apis/events/validation`) reaches it: a core `v1` Event keeps the legacy
//! rules (its involved object in its namespace), an `events.k8s.io/v1` one also needs an `eventTime`
//! and a `type` of `Normal` or `Warning`.

use serde_json::{Value, json};

use super::{invalid, required, str_at};
use crate::api::validation::{FieldError, Path};

fn namespace(obj: &Value) -> &str {
    obj.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The object an event is about lives in the event's namespace (checked when it names one).
fn involved_namespace(obj: &Value, field: &str, errs: &mut Vec<FieldError>) {
    let ns = obj
        .get(field)
        .and_then(|o| str_at(o, "namespace"))
        .unwrap_or_default();
    if !ns.is_empty() && ns != namespace(obj) {
        errs.push(invalid(
            &Path::root(field).child("namespace"),
            &json!(ns),
            "does not match event.namespace",
        ));
    }
}

pub fn validate_core_event(obj: &Value, errs: &mut Vec<FieldError>) {
    involved_namespace(obj, "involvedObject", errs);
}

pub fn validate_events_event(obj: &Value, errs: &mut Vec<FieldError>) {
    // The group's `regarding` is the core Event's `involvedObject`.
    involved_namespace(obj, "regarding", errs);
    if obj
        .get("eventTime")
        .is_none_or(|t| t.is_null() || t.as_str() == Some(""))
    {
        errs.push(required(&Path::root("eventTime"), ""));
    }
    let type_ = str_at(obj, "type").unwrap_or_default();
    if type_ != "Normal" && type_ != "Warning" {
        // The real server's words: the value shown is empty and the detail carries the type.
        errs.push(invalid(
            &Path::root("type"),
            &json!(""),
            &format!("has invalid value: {type_}"),
        ));
    }
}
