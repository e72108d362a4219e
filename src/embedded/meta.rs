//! Pure object-metadata rules: what the real API server stamps on create and keeps on update.

use super::error::ApiError;
use super::registry::ResourceInfo;
use crate::api::names::{self, NameRule};
use crate::api::validation::{FieldError, Path};
use serde_json::{Map, Value, json};

/// `2026-11-22T04:15:50Z`: seconds precision, as the API server writes timestamps.
pub fn now_rfc3339() -> String {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second())
        .map(|t| t.to_string())
        .unwrap_or_else(|_| now.to_string())
}

pub fn new_uid() -> String {
    let v: u128 = rand::random();
    let h = format!("{v:032x}");
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

/// Random suffix for `generateName`, from the same alphabet as the real server (no vowels).
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    meta(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let root = match obj.as_object_mut() {
        Some(r) => r,
        None => unreachable_object(),
    };
    let m = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    match m.as_object_mut() {
        Some(m) => m,
        None => unreachable_object(),
    }
}

// Both call sites have just made the value an object; this keeps the no-panic rule honest.
fn unreachable_object() -> ! {
    unreachable!("value was just set to an object")
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|f| f.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

pub fn is_deleting(obj: &Value) -> bool {
    meta(obj)
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|v| !v.is_null())
}

/// Kinds whose objects carry `metadata.generation` (all CRDs, Pods as in recent Kubernetes, and
/// batch Jobs, whose strategy bumps it on a spec change: an elastic Job's slices are named by it).
pub fn tracks_generation(info: &ResourceInfo) -> bool {
    info.is_crd
        || info.plural == "pods"
        || matches!(
            (info.group.as_str(), info.plural.as_str()),
            ("batch", "jobs")
                | ("apps", "deployments")
                | ("apiextensions.k8s.io", "customresourcedefinitions")
        )
}

/// Whether `a` and `b` agree on the parts of an object whose change bumps `generation`: everything but
/// metadata, and status too when a status subresource exists. Compared in place, without copies.
fn same_spec_view(info: &ResourceInfo, a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let outside =
        |k: &str| matches!(k, "metadata" | "apiVersion" | "kind") || (info.has_status && k == "status");
    same_except(a, b, outside, |_, v, w| v == w)
}

/// Two maps hold the same keys and, by `same`, values, leaving out the keys `skip` names.
pub(super) fn same_except(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    skip: impl Fn(&str) -> bool,
    same: impl Fn(&str, &Value, &Value) -> bool,
) -> bool {
    let count = |m: &Map<String, Value>| m.keys().filter(|k| !skip(k)).count();
    count(a) == count(b)
        && a.iter()
            .filter(|(k, _)| !skip(k))
            .all(|(k, v)| b.get(k).is_some_and(|w| same(k, v, w)))
}

/// Fields a client may not set: stamped by the server on create.
pub fn prepare_create(
    info: &ResourceInfo,
    obj: &mut Value,
    namespace: Option<&str>,
    uid: String,
    now: &str,
) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the request body must be a JSON object"));
    }
    if let Some(kind) = obj.get("kind").and_then(Value::as_str)
        && !kind.is_empty()
        && kind != info.kind
    {
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): its kind is {kind}",
            info.kind
        )));
    }
    let body_ns = meta_str(obj, "namespace").to_string();
    match namespace {
        Some(ns) if !body_ns.is_empty() && body_ns != ns => {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        _ => {}
    }
    let m = meta_mut(obj);
    match namespace {
        Some(ns) => {
            m.insert("namespace".into(), json!(ns));
        }
        None => {
            m.remove("namespace");
        }
    }
    m.insert("uid".into(), json!(uid));
    m.insert("creationTimestamp".into(), json!(now));
    m.remove("deletionTimestamp");
    m.remove("deletionGracePeriodSeconds");
    m.remove("managedFields");
    if tracks_generation(info) {
        m.insert("generation".into(), json!(1));
    } else {
        m.remove("generation");
    }
    if let Some(o) = obj.as_object_mut() {
        o.insert("apiVersion".into(), json!(info.api_version()));
        o.insert("kind".into(), json!(info.kind));
        if info.is_crd && info.has_status {
            o.remove("status");
        }
        match info.plural.as_str() {
            "pods" => {
                o.insert("status".into(), json!({"phase": "Pending"}));
            }
            "namespaces" => {
                o.insert("status".into(), json!({"phase": "Active"}));
            }
            "priorityclasses" if !o.contains_key("preemptionPolicy") => {
                o.insert("preemptionPolicy".into(), json!("PreemptLowerPriority"));
            }
            _ => {}
        }
    }
    fold_string_data(info, obj);
    reencode_bytes(info, obj);
    drop_empty_meta(obj);
    super::defaults::apply(info, obj, true);
    if info.group.is_empty() && info.plural == "pods" {
        let qos = qos_class(obj);
        if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
            status.insert("qosClass".into(), json!(qos));
        }
    }
    Ok(())
}

fn same_quantity(a: &Value, b: Option<&Value>) -> bool {
    use crate::api::quantity::Quantity;
    let parse = |v: &Value| v.as_str().and_then(|s| Quantity::parse(s).ok());
    match (parse(a), b.and_then(parse)) {
        (Some(x), Some(y)) => x == y,
        _ => Some(a) == b,
    }
}

/// A Pod's QoS class as `PrepareForCreate` records it: `Guaranteed` when every container limits CPU and
/// memory at what it requests, `BestEffort` when none asks for either, `Burstable` otherwise.
fn qos_class(pod: &Value) -> &'static str {
    let containers = ["containers", "initContainers"]
        .iter()
        .filter_map(|f| pod.pointer(&format!("/spec/{f}")).and_then(Value::as_array))
        .flatten();
    let (mut any, mut guaranteed) = (false, true);
    for c in containers {
        let requests = c.pointer("/resources/requests").and_then(Value::as_object);
        let limits = c.pointer("/resources/limits").and_then(Value::as_object);
        for r in ["cpu", "memory"] {
            let req = requests.and_then(|m| m.get(r));
            let lim = limits.and_then(|m| m.get(r));
            any |= req.is_some() || lim.is_some();
            guaranteed &= lim.is_some() && req.is_none_or(|q| same_quantity(q, lim));
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// A Secret's `stringData` is write-only: the real server merges it into `data` (base64, a `stringData`
/// key wins over the same `data` key) and never stores it.
fn fold_string_data(info: &ResourceInfo, obj: &mut Value) {
    use base64::Engine as _;
    if !(info.group.is_empty() && info.plural == "secrets") {
        return;
    }
    let Some(o) = obj.as_object_mut() else { return };
    let Some(Value::Object(strings)) = o.remove("stringData") else {
        return;
    };
    let data = o.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    if let Some(d) = data.as_object_mut() {
        for (k, v) in strings {
            let text = v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string());
            d.insert(k, json!(base64::engine::general_purpose::STANDARD.encode(text)));
        }
    }
}

/// ObjectMeta's lists and maps are `omitempty`: an empty one is not written.
fn drop_empty_meta(obj: &mut Value) {
    let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    m.retain(|k, v| {
        let empty = match v {
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
            _ => false,
        };
        !(empty
            && matches!(
                k.as_str(),
                "labels" | "annotations" | "finalizers" | "ownerReferences"
            ))
    });
}

/// A Secret's `data` and a ConfigMap's `binaryData` are bytes: the real server decodes the base64 a
/// client sent (Go's decoder skips line breaks) and writes it again in one line. A value that does
/// not decode is left to validation's refusal. An empty `data` or `binaryData` is not written.
fn reencode_bytes(info: &ResourceInfo, obj: &mut Value) {
    use base64::Engine as _;
    let field = match (info.group.as_str(), info.plural.as_str()) {
        ("", "secrets") => "data",
        ("", "configmaps") => "binaryData",
        _ => return,
    };
    // Go's `omitempty` writes no empty map.
    for f in ["data", "binaryData"] {
        if obj
            .get(f)
            .and_then(Value::as_object)
            .is_some_and(|m| m.is_empty())
            && let Some(o) = obj.as_object_mut()
        {
            o.remove(f);
        }
    }
    let Some(map) = obj.get_mut(field).and_then(Value::as_object_mut) else {
        return;
    };
    let engine = &base64::engine::general_purpose::STANDARD;
    for v in map.values_mut() {
        let Some(s) = v.as_str().filter(|s| s.contains(['\n', '\r'])) else {
            continue;
        };
        let compact: String = s.chars().filter(|c| *c != '\n' && *c != '\r').collect();
        if let Ok(bytes) = engine.decode(&compact) {
            *v = json!(engine.encode(bytes));
        }
    }
}

/// The object to store for an update of `old` by `new`: a main-resource write keeps the stored status
/// (when a status subresource exists), a `/status` write keeps everything but status. System metadata
/// always comes from `old`; `generation` is bumped when the spec view changed.
pub fn prepare_update(info: &ResourceInfo, old: &Value, new: Value, status_write: bool) -> Value {
    let mut out = if status_write {
        status_onto(old, new)
    } else {
        let mut n = new;
        if let Some(obj) = n.as_object_mut()
            && info.has_status
        {
            match old.get("status") {
                Some(s) if obj.get("status") != Some(s) => {
                    obj.insert("status".into(), s.clone());
                }
                Some(_) => {}
                None => {
                    obj.remove("status");
                }
            }
        }
        n
    };
    if let Some(o) = out.as_object_mut() {
        o.insert("apiVersion".into(), json!(info.api_version()));
        o.insert("kind".into(), json!(info.kind));
    }
    let no_meta = Map::new();
    let old_meta = meta(old).unwrap_or(&no_meta);
    let m = meta_mut(&mut out);
    for f in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old_meta.get(f) {
            Some(v) => {
                m.insert(f.into(), v.clone());
            }
            None => {
                m.remove(f);
            }
        }
    }
    m.remove("managedFields");
    fold_string_data(info, &mut out);
    reencode_bytes(info, &mut out);
    drop_empty_meta(&mut out);
    if !status_write {
        super::defaults::apply(info, &mut out, false);
    }
    // A Deployment's annotations bump it too: they are copied to its ReplicaSets (the deployment
    // strategy's `PrepareForUpdate`).
    // Semantic equality: no annotations and an empty map are the same.
    let annotations = |o: &Value| {
        o.get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(Value::as_object)
            .filter(|a| !a.is_empty())
            .cloned()
    };
    let annotations_changed =
        info.group == "apps" && info.plural == "deployments" && annotations(old) != annotations(&out);
    if tracks_generation(info) && (!same_spec_view(info, old, &out) || annotations_changed) {
        let g = old_meta.get("generation").and_then(Value::as_i64).unwrap_or(0);
        meta_mut(&mut out).insert("generation".into(), json!(g + 1));
    }
    out
}

/// `old` with `new`'s status: what a `/status` write stores. `new` is reused when it already holds
/// `old`'s other fields (a status patch, or a PUT of the object as read), so the common write copies
/// nothing but what differs.
fn status_onto(old: &Value, new: Value) -> Value {
    let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
        return old.clone();
    };
    let others = |m: &Map<String, Value>| m.keys().filter(|k| *k != "status").count();
    let same_keys = others(o) == others(n)
        && o.keys()
            .filter(|k| *k != "status")
            .eq(n.keys().filter(|k| *k != "status"));
    if !same_keys {
        let mut out = old.clone();
        if let Some(obj) = out.as_object_mut() {
            match n.get("status") {
                Some(s) => {
                    obj.insert("status".into(), s.clone());
                }
                None => {
                    obj.remove("status");
                }
            }
        }
        return out;
    }
    let mut new = new;
    if let Some(n) = new.as_object_mut() {
        for (k, v) in o {
            if k != "status" && n.get(k) != Some(v) {
                n.insert(k.clone(), v.clone());
            }
        }
    }
    new
}

/// The name rule of a kind, as the real API server's registry strategies choose it.
pub fn name_rule(info: &ResourceInfo) -> NameRule {
    match (info.group.as_str(), info.plural.as_str()) {
        // kube-apiserver v1.36 names Services by RFC 1123 labels (`RelaxedServiceNameValidation`).
        ("", "namespaces" | "services") => NameRule::Label,
        _ => NameRule::Subdomain,
    }
}

/// `ValidateObjectMeta` as far as a client can get it wrong: the name under its kind's rule, label
/// keys and values, annotation keys and total size, finalizer names.
pub fn validate_meta(info: &ResourceInfo, obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = Path::root("metadata");
    names::object_name(
        &path.child("name"),
        name_rule(info),
        meta_str(obj, "name"),
        false,
        &mut errs,
    );
    let Some(m) = meta(obj) else { return errs };
    let map_of = |field: &str, errs: &mut Vec<FieldError>| match m.get(field) {
        None | Some(Value::Null) => None,
        Some(Value::Object(o)) => Some(o),
        Some(_) => {
            errs.push(FieldError::invalid(
                &path.child(field),
                "must be a map of strings",
            ));
            None
        }
    };
    if let Some(labels) = map_of("labels", &mut errs) {
        names::label_map(&path.child("labels"), labels, &mut errs);
    }
    if let Some(ann) = map_of("annotations", &mut errs) {
        names::annotations(&path.child("annotations"), ann, &mut errs);
    }
    for (i, f) in finalizers(obj).iter().enumerate() {
        names::qualified_name(&path.child("finalizers").index(i), f, &mut errs);
    }
    if info.group == "scheduling.k8s.io" && info.plural == "priorityclasses" {
        priority_class(obj, &mut errs);
    }
    errs
}

/// The highest value a PriorityClass not named `system-*` may have (Kubernetes'
/// `HighestUserDefinablePriority`); above it are the system classes.
const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;

/// `ValidatePriorityClass`: the system prefix is reserved, a user class's value is an int32 no higher
/// than one billion.
fn priority_class(obj: &Value, errs: &mut Vec<FieldError>) {
    if meta_str(obj, "name").starts_with("system-") {
        errs.push(FieldError::forbidden(
            "metadata.name",
            "priority class names with 'system-' prefix are reserved for system use only",
        ));
        return;
    }
    match obj.get("value") {
        None | Some(Value::Null) => errs.push(FieldError::required("value", "Required value")),
        Some(v) => match v.as_i64().filter(|n| i32::try_from(*n).is_ok()) {
            None => errs.push(FieldError::invalid(
                "value",
                format!("{v}: must be a 32-bit integer"),
            )),
            Some(n) if n > HIGHEST_USER_DEFINABLE_PRIORITY => errs.push(FieldError::forbidden(
                "value",
                format!(
                    "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
                ),
            )),
            Some(_) => {}
        },
    }
}

/// What a write may not change about an object's identity, checked on the object a PUT or PATCH would
/// store against the stored one. The real server refuses these instead of dropping them silently.
pub fn check_identity(info: &ResourceInfo, old: &Value, new: &Value) -> Result<(), ApiError> {
    let name = meta_str(old, "name");
    for (field, what) in [("kind", "kind"), ("apiVersion", "API version")] {
        let (was, now) = (
            old.get(field).and_then(Value::as_str),
            new.get(field).and_then(Value::as_str),
        );
        if let (Some(was), Some(now)) = (was, now)
            && was != now
            && !(field == "apiVersion" && now == info.api_version())
        {
            return Err(ApiError::bad_request(format!(
                "the {what} in the data ({now}) does not match the expected {what} ({was}) of {} {name:?}",
                info.qualified_plural()
            )));
        }
    }
    let new_ns = meta_str(new, "namespace");
    if !new_ns.is_empty() && new_ns != meta_str(old, "namespace") {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    // ValidateNoNewFinalizers: an object being deleted may lose finalizers, never gain one.
    if old.pointer("/metadata/deletionTimestamp").is_some() {
        let finalizers = |v: &Value| -> std::collections::BTreeSet<String> {
            v.pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        };
        let was = finalizers(old);
        let extra: Vec<String> = finalizers(new)
            .difference(&was)
            .map(|f| format!("{f:?}"))
            .collect();
        if !extra.is_empty() {
            let fe = FieldError::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    extra.join(", ")
                ),
            );
            // kube-apiserver checks the metadata twice (the strategy and the generic update) and
            // lists both causes; the message names the error once.
            let mut e = ApiError::invalid(&info.qualified_kind(), name, std::slice::from_ref(&fe));
            e.details.causes.extend(e.details.causes.clone());
            return Err(e.details(name, &info.group, &info.kind));
        }
    }
    let new_uid = meta_str(new, "uid");
    if !new_uid.is_empty() && new_uid != meta_str(old, "uid") {
        let fe = FieldError::invalid("metadata.uid", format!("{new_uid:?}: field is immutable"));
        return Err(ApiError::invalid(&info.qualified_kind(), name, &[fe]).details(
            name,
            &info.group,
            &info.kind,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::registry::{ResourceInfo, builtins};

    fn crd(has_status: bool) -> ResourceInfo {
        ResourceInfo {
            group: "example.io".into(),
            version: "v1".into(),
            kind: "Thing".into(),
            plural: "things".into(),
            singular: "thing".into(),
            short_names: vec![],
            categories: vec![],
            namespaced: true,
            has_status,
            is_crd: true,
            printer_columns: vec![],
            schema: None,
        }
    }

    fn base() -> Value {
        json!({"metadata": {"name": "a", "namespace": "d", "uid": "u", "generation": 1, "creationTimestamp": "t", "resourceVersion": "5"},
               "spec": {"x": 1}, "status": {"s": 1}})
    }

    #[test]
    fn update_rules_table() {
        // (has_status, status_write, new, want spec.x, want status.s, want generation)
        let cases = [
            (
                true,
                false,
                json!({"metadata": {"name": "a"}, "spec": {"x": 2}, "status": {"s": 9}}),
                2,
                Some(1),
                2,
            ),
            (
                true,
                false,
                json!({"metadata": {"name": "a", "labels": {"l": "v"}}, "spec": {"x": 1}}),
                1,
                Some(1),
                1,
            ),
            (
                true,
                true,
                json!({"metadata": {"name": "a"}, "spec": {"x": 7}, "status": {"s": 9}}),
                1,
                Some(9),
                1,
            ),
            (
                true,
                true,
                json!({"metadata": {"name": "a"}, "spec": {"x": 7}}),
                1,
                None,
                1,
            ),
            (
                false,
                false,
                json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"s": 9}}),
                1,
                Some(9),
                2,
            ),
        ];
        for (i, (has_status, status_write, new, x, s, g)) in cases.into_iter().enumerate() {
            let out = prepare_update(&crd(has_status), &base(), new.clone(), status_write);
            assert_eq!(
                out.pointer("/spec/x").and_then(Value::as_i64),
                Some(x),
                "case {i}"
            );
            assert_eq!(out.pointer("/status/s").and_then(Value::as_i64), s, "case {i}");
            assert_eq!(
                out.pointer("/metadata/generation").and_then(Value::as_i64),
                Some(g),
                "case {i}"
            );
            assert_eq!(meta_str(&out, "uid"), "u", "case {i}");
        }
    }

    #[test]
    fn create_stamps_system_fields_and_drops_crd_status() {
        let mut o = json!({"metadata": {"name": "a", "uid": "forged", "generation": 9}, "status": {"s": 1}});
        prepare_create(&crd(true), &mut o, Some("d"), "u1".into(), "t").unwrap();
        assert_eq!(meta_str(&o, "uid"), "u1");
        assert_eq!(meta_str(&o, "namespace"), "d");
        assert_eq!(o.pointer("/metadata/generation"), Some(&json!(1)));
        assert!(o.get("status").is_none());
        let cm = builtins().into_iter().find(|b| b.plural == "configmaps").unwrap();
        let mut o = json!({"metadata": {"name": "a", "namespace": "other"}});
        assert_eq!(
            prepare_create(&cm, &mut o, Some("d"), "u".into(), "t")
                .unwrap_err()
                .code,
            400
        );
        assert!(new_uid().len() == 36 && name_suffix().len() == 5);
    }

    /// kube-apiserver's Job strategy: `generation` 1 on create, bumped by a spec change only (an
    /// elastic Job's workload slices are named after it).
    #[test]
    fn a_jobs_generation_follows_its_spec() {
        let jobs = builtins()
            .into_iter()
            .find(|b| b.group == "batch" && b.plural == "jobs")
            .unwrap();
        let mut o = json!({"metadata": {"name": "j"}, "spec": {"parallelism": 1}});
        prepare_create(&jobs, &mut o, Some("d"), "u".into(), "t").unwrap();
        assert_eq!(o.pointer("/metadata/generation"), Some(&json!(1)));
        let scaled = prepare_update(
            &jobs,
            &o,
            json!({"metadata": {"name": "j"}, "spec": {"parallelism": 3}}),
            false,
        );
        assert_eq!(scaled.pointer("/metadata/generation"), Some(&json!(2)));
        let status = prepare_update(
            &jobs,
            &scaled,
            json!({"metadata": {"name": "j"}, "spec": {"parallelism": 3}, "status": {"active": 3}}),
            true,
        );
        assert_eq!(status.pointer("/metadata/generation"), Some(&json!(2)));
    }

    /// kube-apiserver's Deployment strategy (`pkg/registry/apps/deployment/strategy.go`): `generation` 1
    /// on create, bumped by a spec change and by an annotation change (annotations are copied to the
    /// ReplicaSets), not by a label change.
    #[test]
    fn a_deployments_generation_follows_its_spec_and_annotations() {
        let deployments = ResourceInfo {
            group: "apps".into(),
            plural: "deployments".into(),
            kind: "Deployment".into(),
            ..builtins().into_iter().find(|b| b.plural == "configmaps").unwrap()
        };
        let mut o = json!({"metadata": {"name": "d"}, "spec": {"replicas": 1}});
        prepare_create(&deployments, &mut o, Some("d"), "u".into(), "t").unwrap();
        assert_eq!(o.pointer("/metadata/generation"), Some(&json!(1)));
        let labelled = prepare_update(
            &deployments,
            &o,
            json!({"metadata": {"name": "d", "labels": {"a": "b"}, "annotations": {}}, "spec": {"replicas": 1}}),
            false,
        );
        assert_eq!(labelled.pointer("/metadata/generation"), Some(&json!(1)));
        let annotated = prepare_update(
            &deployments,
            &labelled,
            json!({"metadata": {"name": "d", "annotations": {"note": "x"}}, "spec": {"replicas": 1}}),
            false,
        );
        assert_eq!(annotated.pointer("/metadata/generation"), Some(&json!(2)));
        let image = prepare_update(
            &deployments,
            &annotated,
            json!({"metadata": {"name": "d", "annotations": {"note": "x"}}, "spec": {"replicas": 2}}),
            false,
        );
        assert_eq!(image.pointer("/metadata/generation"), Some(&json!(3)));
    }

    /// As the real server: `stringData` lands base64-encoded in `data`, winning over the same key, and
    /// is not stored; on an update too.
    #[test]
    fn secret_string_data_folds_into_data() {
        let secrets = builtins().into_iter().find(|b| b.plural == "secrets").unwrap();
        let mut o = json!({"metadata": {"name": "s"}, "data": {"a": "eA==", "b": "eQ=="}, "stringData": {"a": "tok"}});
        prepare_create(&secrets, &mut o, Some("d"), "u".into(), "t").unwrap();
        assert_eq!(o["data"], json!({"a": "dG9r", "b": "eQ=="}));
        assert!(o.get("stringData").is_none());
        let out = prepare_update(
            &secrets,
            &o,
            json!({"metadata": {"name": "s"}, "stringData": {"c": "z"}}),
            false,
        );
        assert_eq!(out["data"], json!({"c": "eg=="}));
        assert!(out.get("stringData").is_none());
    }
}
