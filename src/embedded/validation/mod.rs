//! The value checks kube-apiserver runs on the built-in kinds this server stores, on create and on
//! update, ported as Rust (one file per API group or kind, each naming the Go source it follows). They
//! run after the object-metadata checks (`meta::validate_meta`) and answer the same 422 `Invalid`: the
//! field path, the error type (`FieldValueInvalid`, `FieldValueNotSupported`, ...) and the message as
//! kube-apiserver v1.36 words them.
//!
//! The store defaults built-in objects before these run (`defaults.rs`); `quotagate validate` reads
//! manifests as written, so a field the real server would have defaulted is checked only when it is
//! present, except where the default itself is refused (a Job template's `restartPolicy`).

use serde_json::Value;

use super::registry::ResourceInfo;
use crate::api::validation::{ErrorType, FieldError, Path};

mod apps;
mod batch;
mod config;
mod coordination;
mod discovery;
mod events;
mod pod;
mod rbac;
mod service;
#[cfg(test)]
mod tests;

pub use config::go_base64;

/// Every value error of `obj` (and, on update, of its change from `old`), in kube-apiserver's order.
/// Kinds with no port here (custom resources, namespaces, ...) have none.
pub fn validate(info: &ResourceInfo, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => pod::validate_pod(obj, old, &mut errs),
        ("", "services") => service::validate_service(obj, old, &mut errs),
        ("", "configmaps") => config::validate_config_map(obj, old, &mut errs),
        ("", "secrets") => config::validate_secret(obj, old, &mut errs),
        ("", "events") => events::validate_core_event(obj, &mut errs),
        ("events.k8s.io", "events") => events::validate_events_event(obj, &mut errs),
        ("batch", "jobs") => batch::validate_job(obj, old, &mut errs),
        ("batch", "cronjobs") => batch::validate_cron_job(obj, &mut errs),
        ("apps", "deployments") => apps::validate_deployment(obj, &mut errs),
        ("coordination.k8s.io", "leases") => coordination::validate_lease(obj, &mut errs),
        ("discovery.k8s.io", "endpointslices") => discovery::validate_endpoint_slice(obj, &mut errs),
        ("rbac.authorization.k8s.io", "roles") => rbac::validate_role(obj, true, &mut errs),
        ("rbac.authorization.k8s.io", "clusterroles") => rbac::validate_role(obj, false, &mut errs),
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            rbac::validate_binding(obj, info.plural == "rolebindings", &mut errs);
            if let Some(old) = old {
                rbac::validate_binding_update(obj, old, &mut errs);
            }
        }
        _ => {}
    }
    errs
}

/// A JSON value as Go's `%v`/`%q` prints it in a field error: strings quoted, numbers bare, lists and
/// maps as JSON.
pub(crate) fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// `field.Invalid(path, value, detail)`.
pub(crate) fn invalid(path: &Path, v: &Value, detail: &str) -> FieldError {
    FieldError::invalid(path, format!("{}: {detail}", shown(v)))
}

/// `field.Required(path, detail)`.
pub(crate) fn required(path: &Path, detail: &str) -> FieldError {
    FieldError::required(path, detail)
}

/// `field.NotSupported(path, value, supported)`: the supported values quoted, in the Go order.
pub(crate) fn not_supported(path: &Path, v: &Value, supported: &[&str]) -> FieldError {
    let list = supported
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    FieldError::new(
        path,
        ErrorType::NotSupported,
        format!("{}: supported values: {list}", shown(v)),
    )
}

/// `field.Duplicate(path, value)`.
pub(crate) fn duplicate(path: &Path, v: &Value) -> FieldError {
    FieldError::new(path, ErrorType::Duplicate, shown(v))
}

/// The string at `field` of `obj`, if it is one.
pub(crate) fn str_at<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get(field).and_then(Value::as_str)
}

/// The list at `field` of `obj` (absent or null: empty).
pub(crate) fn list_at<'a>(obj: &'a Value, field: &str) -> &'a [Value] {
    obj.get(field)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// An enum field: absent or null passes (the real server defaults it), anything else must be listed.
pub(crate) fn one_of(obj: &Value, field: &str, path: &Path, supported: &[&str], errs: &mut Vec<FieldError>) {
    match obj.get(field) {
        None | Some(Value::Null) => {}
        Some(v) if v.as_str().is_some_and(|s| supported.contains(&s)) => {}
        Some(v) => errs.push(not_supported(&path.child(field), v, supported)),
    }
}

/// An integer field that must be at least 0 when present (`ValidateNonnegativeField`).
pub(crate) fn non_negative(obj: &Value, field: &str, path: &Path, errs: &mut Vec<FieldError>) {
    if let Some(v) = obj.get(field)
        && v.as_i64().is_some_and(|n| n < 0)
    {
        errs.push(invalid(
            &path.child(field),
            v,
            "must be greater than or equal to 0",
        ));
    }
}

/// `validation.IsValidPortNum`: 1 through 65535.
pub(crate) fn port_number(path: &Path, v: &Value, errs: &mut Vec<FieldError>) {
    if !v.as_i64().is_some_and(|n| (1..=65535).contains(&n)) {
        errs.push(invalid(path, v, "must be between 1 and 65535, inclusive"));
    }
}

/// `validation.IsValidPortName` (an IANA service name): every rule broken is its own error.
pub(crate) fn port_name(path: &Path, name: &str, errs: &mut Vec<FieldError>) {
    let v = Value::String(name.to_string());
    if name.len() > 15 {
        errs.push(invalid(path, &v, "must be no more than 15 characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errs.push(invalid(
            path,
            &v,
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
        ));
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push(invalid(path, &v, "must contain at least one letter (a-z)"));
    }
    if name.contains("--") {
        errs.push(invalid(path, &v, "must not contain consecutive hyphens"));
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push(invalid(path, &v, "must not begin or end with a hyphen"));
    }
}

/// `validation.IsValidIP`.
pub(crate) fn ip_address(path: &Path, ip: &str, errs: &mut Vec<FieldError>) {
    if ip.parse::<std::net::IpAddr>().is_err() {
        errs.push(invalid(
            path,
            &Value::String(ip.to_string()),
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ));
    }
}

/// The transport protocols of a port (`supportedPortProtocols`).
pub(crate) const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];
