//! Requests the real API server refuses before it stores anything, with its words: options it does
//! not support (`dryRun` other than `All`, apply without `fieldManager`), a body whose `apiVersion`
//! or `kind` contradicts the URL, ConfigMap/Secret maps holding something other than strings, and
//! resource quantities that do not parse.

use http::Method;
use serde_json::Value;

use super::error::ApiError;
use super::registry::ResourceInfo;
use crate::api::validation::{ErrorType, FieldError};

/// The options kind of a write (`CreateOptions`, ...), as the real server names it in its 422.
fn options_kind(method: &Method) -> &'static str {
    match *method {
        Method::POST => "CreateOptions",
        Method::PUT => "UpdateOptions",
        Method::PATCH => "PatchOptions",
        _ => "DeleteOptions",
    }
}

fn invalid_options(method: &Method, e: FieldError) -> ApiError {
    let kind = options_kind(method);
    ApiError::invalid(&format!("{kind}.meta.k8s.io"), "", &[e]).details("", "meta.k8s.io", kind)
}

/// `dryRun` takes only `All` (`ValidateDryRun`); a write with anything else is a 422 naming the
/// supported values, and nothing is written.
pub fn dry_run(method: &Method, value: Option<&str>) -> Result<(), ApiError> {
    match value {
        None | Some("All") => Ok(()),
        Some(_) if *method == Method::GET => Ok(()),
        Some(v) => Err(invalid_options(
            method,
            FieldError::new(
                "dryRun",
                ErrorType::NotSupported,
                // kube-apiserver v1.36 prints the list as JSON.
                format!("[{v:?}]: supported values: \"All\""),
            ),
        )),
    }
}

/// `fieldValidation` is one of the directives or empty (`ValidateFieldValidation`): anything else is a
/// 422 on the request's options, naming the sorted list of what is supported.
pub fn field_validation(method: &Method, value: Option<&str>) -> Result<(), ApiError> {
    match value {
        None | Some("" | "Ignore" | "Strict" | "Warn") => Ok(()),
        Some(v) => Err(invalid_options(
            method,
            FieldError::new(
                "fieldValidation",
                ErrorType::NotSupported,
                format!("{v:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""),
            ),
        )),
    }
}

/// A delete's `propagationPolicy` is one of the three the API defines (`ValidateDeleteOptions`).
pub fn propagation_policy(value: Option<&str>) -> Result<(), ApiError> {
    match value {
        None | Some("Foreground" | "Background" | "Orphan") => Ok(()),
        Some(v) => Err(invalid_options(
            &Method::DELETE,
            FieldError::new(
                "propagationPolicy",
                ErrorType::NotSupported,
                format!("{v:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""),
            ),
        )),
    }
}

/// Server-side apply needs a field manager (`ValidatePatchOptions`): kubectl sends one, a hand-made
/// request must too.
pub fn field_manager(manager: Option<&str>) -> Result<(), ApiError> {
    match manager {
        Some(m) if !m.is_empty() => Ok(()),
        _ => Err(invalid_options(
            &Method::PATCH,
            FieldError::required("fieldManager", "is required for apply patch"),
        )),
    }
}

/// A create or update body's `apiVersion` and `kind` must be the URL's when given (the handlers'
/// `AcceptsGroupVersion` check, and the kind check of the decoder).
pub fn type_meta(info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    let want = info.api_version();
    if let Some(v) = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        && v != want
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({want})"
        )));
    }
    if let Some(k) = obj.get("kind").and_then(Value::as_str).filter(|k| !k.is_empty())
        && k != info.kind
    {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let qualified = if info.group.is_empty() {
            k.to_string()
        } else {
            format!("{k}.{}", info.group)
        };
        if !info.is_crd {
            // A built-in kind is decoded into its Go type, which fails converting the body's kind.
            let internal = match info.group.as_str() {
                "" | "events.k8s.io" => "core",
                g => g.split('.').next().unwrap_or(g),
            };
            return Err(ApiError::bad_request(format!(
                "{k} in version {:?} cannot be handled as a {kind}: converting ({version}.{k}) to ({internal}.{kind}): unknown conversion",
                info.version,
                kind = info.kind,
                version = info.version,
            )));
        }
        let fe = FieldError::invalid("kind", format!("{k:?}: must be {}", info.kind));
        return Err(ApiError::invalid(&qualified, name, &[fe]).details(name, &info.group, k));
    }
    Ok(())
}

fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        _ => "string",
    }
}

/// ConfigMap `data`/`binaryData` and Secret `data`/`stringData` are maps of strings (base64 for the
/// byte maps); anything else fails to decode on the real server with a 400 naming the field, e.g.
/// `ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into
/// Go struct field ConfigMap.data of type string`. Null values decode to empty in Go and pass.
pub fn string_maps(info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    string_maps_decoded(info, obj).map_err(|e| {
        ApiError::bad_request(format!(
            "{kind} in version \"{}\" cannot be handled as a {kind}: {e}",
            info.version,
            kind = info.kind
        ))
    })
}

/// [`string_maps`]' check with Go's decoding error alone, as kube-apiserver's JSON and merge patch
/// handler quotes it (`patch_decode_refused`).
pub fn string_maps_decoded(info: &ResourceInfo, obj: &Value) -> Result<(), String> {
    let fields: &[(&str, &str)] = match (info.group.as_str(), info.plural.as_str()) {
        ("", "configmaps") => &[("data", "string"), ("binaryData", "[]uint8")],
        ("", "secrets") => &[("data", "[]uint8"), ("stringData", "string")],
        _ => return Ok(()),
    };
    let kind = &info.kind;
    let refuse = |field: &str, v: &Value, of: &str| {
        format!(
            "json: cannot unmarshal {} into Go struct field {kind}.{field} of type {of}",
            go_type(v)
        )
    };
    for (field, of) in fields {
        match obj.get(*field) {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                if let Some(bad) = m.values().find(|v| !(v.is_string() || v.is_null())) {
                    return Err(refuse(field, bad, of));
                }
                // A byte map's values are base64, decoded by Go's `encoding/json` as it reads them.
                if *of == "[]uint8"
                    && let Some(at) = m
                        .values()
                        .filter_map(Value::as_str)
                        .find_map(|s| super::validation::go_base64(s).err())
                {
                    return Err(format!("illegal base64 data at input byte {at}"));
                }
            }
            Some(other) => return Err(refuse(field, other, &format!("map[string]{of}"))),
        }
    }
    Ok(())
}

/// An applied configuration names exactly the kind and version of the URL: field management's
/// version check refuses anything else, missing `apiVersion` or `kind` included, with a 400 quoting
/// the body's group, version and kind (`invalid object type: /v1, Kind=`).
pub fn apply_type(info: &ResourceInfo, body: &Value) -> Result<(), ApiError> {
    let text = |f: &str| body.get(f).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if api_version == info.api_version() && kind == info.kind {
        return Ok(());
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Err(ApiError::bad_request(format!(
        "invalid object type: {group}/{version}, Kind={kind}"
    )))
}

/// Where a built-in kind keeps its pod spec: the quantities in it are `resource.Quantity` to Go.
fn pod_spec_pointer(info: &ResourceInfo) -> Option<&'static str> {
    Some(match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => "/spec",
        ("", "podtemplates") => "/template/spec",
        ("", "replicationcontrollers")
        | ("batch", "jobs")
        | ("apps", "deployments" | "replicasets" | "statefulsets" | "daemonsets") => "/spec/template/spec",
        ("batch", "cronjobs") => "/spec/jobTemplate/spec/template/spec",
        _ => return None,
    })
}

/// Every quantity map of a pod spec: each container's requests and limits, the pod-level resources
/// and the overhead.
fn pod_spec_quantities(spec: &Value) -> impl Iterator<Item = &Value> {
    let containers = ["containers", "initContainers", "ephemeralContainers"]
        .into_iter()
        .filter_map(|f| spec.get(f).and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c.get("resources"));
    containers
        .chain(spec.get("resources"))
        .flat_map(|r| [r.get("requests"), r.get("limits")])
        .flatten()
        .chain(spec.get("overhead"))
}

/// A quantity Go's `Quantity.UnmarshalJSON` refuses while decoding the body: the message of
/// `ParseQuantity`'s error. Strings and numbers are parsed; null decodes to zero.
fn quantity_refusal(v: &Value) -> Option<&'static str> {
    use crate::api::quantity::{Quantity, QuantityError};
    const FORMAT: &str =
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
    let text = match v {
        Value::Null => return None,
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return Some(FORMAT),
    };
    match Quantity::parse(&text) {
        Err(QuantityError::Empty | QuantityError::Format(_)) => Some(FORMAT),
        Err(QuantityError::Suffix(..)) => Some("unable to parse quantity's suffix"),
        // Go keeps a quantity past our range (rounded); the value checks decide about it.
        Err(QuantityError::TooLarge(_)) | Ok(_) => None,
    }
}

/// Resource quantities of built-in kinds that do not parse fail to decode on the real server, a 400
/// before any value check: `Pod in version "v1" cannot be handled as a Pod: quantities must match the
/// regular expression ...`. Covers pod specs (pods, templates, workloads), quotas and limit ranges.
pub fn quantities(info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    let maps: Vec<&Value> = match (info.group.as_str(), info.plural.as_str()) {
        ("", "resourcequotas") => ["/spec/hard", "/status/hard", "/status/used"]
            .iter()
            .filter_map(|p| obj.pointer(p))
            .collect(),
        ("", "limitranges") => obj
            .pointer("/spec/limits")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .flat_map(|l| {
                ["max", "min", "default", "defaultRequest", "maxLimitRequestRatio"].map(|f| l.get(f))
            })
            .flatten()
            .collect(),
        _ => match pod_spec_pointer(info).and_then(|p| obj.pointer(p)) {
            Some(spec) => pod_spec_quantities(spec).collect(),
            None => return Ok(()),
        },
    };
    let refusal = maps
        .into_iter()
        .filter_map(Value::as_object)
        .flat_map(|m| m.values())
        .find_map(quantity_refusal);
    match refusal {
        Some(why) => Err(ApiError::bad_request(format!(
            "{kind} in version \"{}\" cannot be handled as a {kind}: {why}",
            info.version,
            kind = info.kind
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn builtin(plural: &str) -> ResourceInfo {
        let all = super::super::registry::builtins();
        all.into_iter().find(|b| b.plural == plural).unwrap()
    }

    #[test]
    fn an_applied_body_names_the_urls_kind() {
        let cms = builtin("configmaps");
        assert!(apply_type(&cms, &json!({"apiVersion": "v1", "kind": "ConfigMap"})).is_ok());
        let e = apply_type(&cms, &json!({"apiVersion": "v1", "metadata": {"name": "c1"}})).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "invalid object type: /v1, Kind=")
        );
        let e = apply_type(&cms, &json!({"apiVersion": "apps/v1", "kind": "ConfigMap"})).unwrap_err();
        assert_eq!(e.message, "invalid object type: apps/v1, Kind=ConfigMap");
    }

    #[test]
    fn quantities_that_do_not_parse_fail_to_decode() {
        let pod = |q: Value| json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": q}}}]}});
        let pods = builtin("pods");
        let e = quantities(&pods, &pod(json!("lots"))).unwrap_err();
        assert_eq!(
            e.message,
            "Pod in version \"v1\" cannot be handled as a Pod: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        assert_eq!(e.code, 400);
        let e = quantities(&pods, &pod(json!("1iK"))).unwrap_err();
        assert!(
            e.message.ends_with("unable to parse quantity's suffix"),
            "{}",
            e.message
        );
        for ok in [json!("500m"), json!(2), json!(0.5), Value::Null] {
            assert!(quantities(&pods, &pod(ok.clone())).is_ok(), "{ok}");
        }
        let job = json!({"spec": {"template": {"spec": {"containers": [{"resources": {"limits": {"memory": true}}}]}}}});
        assert!(quantities(&builtin("jobs"), &job).is_err());
        let quota = json!({"spec": {"hard": {"pods": "ten"}}});
        assert!(quantities(&builtin("resourcequotas"), &quota).is_err());
        assert!(quantities(&builtin("configmaps"), &json!({"data": {"a": "lots"}})).is_ok());
    }

    #[test]
    fn the_real_servers_words() {
        let e = dry_run(&Method::POST, Some("Garbage")).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                422,
                "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Garbage\"]: supported values: \"All\""
            )
        );
        assert!(dry_run(&Method::DELETE, Some("All")).is_ok());
        let e = field_manager(None).unwrap_err();
        assert_eq!(
            e.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
        );
        let cm = builtin("configmaps");
        let e = string_maps(&cm, &json!({"data": {"a": 1}})).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
            )
        );
        assert!(string_maps(&cm, &json!({"data": {"a": "1", "b": null}})).is_ok());
        let e = string_maps(&builtin("secrets"), &json!({"stringData": {"a": {"x": 1}}})).unwrap_err();
        assert!(
            e.message
                .ends_with("cannot unmarshal object into Go struct field Secret.stringData of type string"),
            "{}",
            e.message
        );
        let e = type_meta(&cm, &json!({"apiVersion": "v2", "kind": "ConfigMap"})).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "the API version in the data (v2) does not match the expected API version (v1)"
            )
        );
        let e = type_meta(
            &cm,
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}),
        )
        .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "Secret in version \"v1\" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion"
            )
        );
        assert!(type_meta(&cm, &json!({"metadata": {}})).is_ok());
    }
}
