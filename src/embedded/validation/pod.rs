//! Pods and pod templates, after kube-apiserver's `pkg/apis/core/validation/validation.go`
//! (`ValidatePodSpec`, `validateContainers`, `validateContainerPorts`,
//! `ValidateContainerResourceRequirements`, `ValidatePodUpdate`), the parts a client gets wrong.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::{
    PROTOCOLS, duplicate, invalid, list_at, not_supported, one_of, port_name, port_number, required, shown,
    str_at,
};
use crate::api::names;
use crate::api::quantity::Quantity;
use crate::api::validation::{ErrorType, FieldError, Path};

pub const RESTART_POLICIES: [&str; 3] = ["Always", "OnFailure", "Never"];
const DNS_POLICIES: [&str; 4] = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
const PULL_POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];

/// What `ValidatePodUpdate` lets change in a running pod's spec, in its words.
const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

pub fn validate_pod(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let path = Path::root("spec");
    validate_pod_spec(spec, &path, errs);
    if let Some(old) = old {
        let old_spec = old.get("spec").unwrap_or(&Value::Null);
        validate_pod_update(spec, old_spec, &path, errs);
    }
}

/// `ValidatePodSpec`: containers, init containers, then the pod-wide enums and limits.
pub fn validate_pod_spec(spec: &Value, path: &Path, errs: &mut Vec<FieldError>) {
    let containers = list_at(spec, "containers");
    let mut names = BTreeSet::new();
    if containers.is_empty() {
        errs.push(required(&path.child("containers"), ""));
    }
    let volumes: BTreeSet<&str> = list_at(spec, "volumes")
        .iter()
        .filter_map(|v| str_at(v, "name"))
        .collect();
    // Init containers' names must differ from each other and from the regular containers'.
    for field in ["containers", "initContainers"] {
        for (i, c) in list_at(spec, field).iter().enumerate() {
            let p = path.child(field).index(i);
            validate_container(c, &p, &mut names, errs);
            let mounts = list_at(c, "volumeMounts");
            validate_volume_mounts(mounts, &volumes, &p.child("volumeMounts"), errs);
        }
    }
    one_of(spec, "restartPolicy", path, &RESTART_POLICIES, errs);
    one_of(spec, "dnsPolicy", path, &DNS_POLICIES, errs);
    // `validateTolerations`: the operator, when given.
    for (i, t) in list_at(spec, "tolerations").iter().enumerate() {
        if str_at(t, "operator").is_some_and(|o| !o.is_empty()) {
            one_of(
                t,
                "operator",
                &path.child("tolerations").index(i),
                &["Equal", "Exists"],
                errs,
            );
        }
    }
    if let Some(h) = str_at(spec, "hostname").filter(|h| !h.is_empty()) {
        names::dns_label(&path.child("hostname"), h, errs);
    }
    if let Some(sel) = spec.get("nodeSelector").and_then(Value::as_object) {
        // `ValidateLabels` names the map itself for both keys and values.
        let p = path.child("nodeSelector");
        for (k, v) in sel {
            names::qualified_name(&p, k, errs);
            names::label_value(&p, v.as_str().unwrap_or_default(), errs);
        }
    }
    if let Some(v) = spec.get("activeDeadlineSeconds")
        && !v.is_null()
        && !v.as_i64().is_some_and(|n| (1..=i64::from(i32::MAX)).contains(&n))
    {
        errs.push(invalid(
            &path.child("activeDeadlineSeconds"),
            v,
            "must be between 1 and 2147483647, inclusive",
        ));
    }
}

fn validate_container(c: &Value, path: &Path, names: &mut BTreeSet<String>, errs: &mut Vec<FieldError>) {
    let name = str_at(c, "name").unwrap_or_default();
    let name_path = path.child("name");
    if name.is_empty() {
        errs.push(required(&name_path, ""));
    } else {
        names::dns_label(&name_path, name, errs);
        if !names.insert(name.to_string()) {
            errs.push(duplicate(&name_path, &json!(name)));
        }
    }
    let image = str_at(c, "image").unwrap_or_default();
    if image.is_empty() {
        errs.push(required(&path.child("image"), ""));
    } else if image.trim() != image {
        errs.push(invalid(
            &path.child("image"),
            &json!(image),
            "must not have leading or trailing whitespace",
        ));
    }
    one_of(c, "imagePullPolicy", path, &PULL_POLICIES, errs);
    // `ValidateEnv`: every variable has a name.
    for (i, e) in list_at(c, "env").iter().enumerate() {
        if str_at(e, "name").unwrap_or_default().is_empty() {
            errs.push(required(&path.child("env").index(i).child("name"), ""));
        }
    }
    validate_ports(list_at(c, "ports"), &path.child("ports"), errs);
    if let Some(res) = c.get("resources") {
        validate_resources(res, &path.child("resources"), errs);
    }
}

/// `ValidateVolumeMounts`: each mount names a volume of the pod and a mount path of its own. An empty
/// name is both required and not found, as kube-apiserver reports it.
fn validate_volume_mounts(
    mounts: &[Value],
    volumes: &BTreeSet<&str>,
    path: &Path,
    errs: &mut Vec<FieldError>,
) {
    let mut paths = BTreeSet::new();
    for (i, m) in mounts.iter().enumerate() {
        let mp = path.index(i);
        let name = str_at(m, "name").unwrap_or_default();
        if name.is_empty() {
            errs.push(required(&mp.child("name"), ""));
        }
        if !volumes.contains(name) {
            errs.push(FieldError::new(
                &mp.child("name"),
                ErrorType::NotFound,
                shown(&json!(name)),
            ));
        }
        let mount_path = str_at(m, "mountPath").unwrap_or_default();
        if mount_path.is_empty() {
            errs.push(required(&mp.child("mountPath"), ""));
        }
        if !paths.insert(mount_path) {
            errs.push(invalid(
                &mp.child("mountPath"),
                &json!(mount_path),
                "must be unique",
            ));
        }
    }
}

/// `validateContainerPorts`.
fn validate_ports(ports: &[Value], path: &Path, errs: &mut Vec<FieldError>) {
    let mut seen = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let pp = path.index(i);
        if let Some(name) = str_at(p, "name").filter(|n| !n.is_empty()) {
            port_name(&pp.child("name"), name, errs);
            if !seen.insert(name.to_string()) {
                errs.push(duplicate(&pp.child("name"), &json!(name)));
            }
        }
        match p.get("containerPort") {
            None | Some(Value::Null) => errs.push(required(&pp.child("containerPort"), "")),
            Some(v) if v.as_i64() == Some(0) => errs.push(required(&pp.child("containerPort"), "")),
            Some(v) => port_number(&pp.child("containerPort"), v, errs),
        }
        if let Some(v) = p.get("hostPort")
            && !v.is_null()
            && v.as_i64() != Some(0)
        {
            port_number(&pp.child("hostPort"), v, errs);
        }
        one_of(p, "protocol", &pp, &PROTOCOLS, errs);
    }
}

/// The resource names a container may ask for: the standard ones, huge pages, and any name with a
/// domain (extended resources).
fn container_resource_name(name: &str, path: &Path, errs: &mut Vec<FieldError>) {
    if name.contains('/') {
        names::qualified_name(path, name, errs);
        return;
    }
    if matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-") {
        return;
    }
    let v = json!(name);
    errs.push(invalid(
        path,
        &v,
        "must be a standard resource type or fully qualified",
    ));
    errs.push(invalid(path, &v, "must be a standard resource for containers"));
}

/// `ValidateContainerResourceRequirements`: names, non-negative quantities, requests within limits.
fn validate_resources(res: &Value, path: &Path, errs: &mut Vec<FieldError>) {
    let map = |f: &str| res.get(f).and_then(Value::as_object).cloned().unwrap_or_default();
    let (limits, requests) = (map("limits"), map("requests"));
    let parsed = |m: &Map<String, Value>, k: &str| {
        m.get(k)
            .and_then(Value::as_str)
            .and_then(|s| Quantity::parse(s).ok())
    };
    for (field, m) in [("limits", &limits), ("requests", &requests)] {
        for (k, v) in m {
            let p = path.child(field).key(k);
            container_resource_name(k, &p, errs);
            if parsed(m, k).is_some_and(|q| q.is_negative()) {
                errs.push(invalid(&p, v, "must be greater than or equal to 0"));
            }
        }
    }
    for (k, v) in &requests {
        if let (Some(req), Some(lim)) = (parsed(&requests, k), parsed(&limits, k))
            && req > lim
        {
            let lim_s = limits.get(k).and_then(Value::as_str).unwrap_or_default();
            errs.push(invalid(
                &path.child("requests"),
                v,
                &format!("must be less than or equal to {k} limit of {lim_s}"),
            ));
        }
    }
}

/// Drops what Go's semantic equality treats as unset: nulls, empty strings, zeros, `false`, and
/// empty lists and maps.
pub(super) fn normalized(v: &Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Bool(false) => None,
        Value::String(s) if s.is_empty() => None,
        Value::Number(n) if n.as_f64() == Some(0.0) => None,
        Value::Array(a) => {
            let items: Vec<Value> = a.iter().map(|x| normalized(x).unwrap_or(Value::Null)).collect();
            (!items.is_empty()).then_some(Value::Array(items))
        }
        Value::Object(m) => {
            let o: Map<String, Value> = m
                .iter()
                .filter_map(|(k, x)| normalized(x).map(|x| (k.clone(), x)))
                .collect();
            (!o.is_empty()).then_some(Value::Object(o))
        }
        other => Some(other.clone()),
    }
}

/// `ValidatePodUpdate`: the spec is fixed but for the fields it names. Where the real server binds a
/// pod through the `binding` subresource, the node simulator writes `spec.nodeName` once: setting it
/// from empty passes, as do the changes a gated pod may take (gates removed, node selector or
/// affinity added).
fn validate_pod_update(new: &Value, old: &Value, path: &Path, errs: &mut Vec<FieldError>) {
    let old_gates: Vec<&Value> = list_at(old, "schedulingGates").iter().collect();
    for (i, g) in list_at(new, "schedulingGates").iter().enumerate() {
        if !old_gates.contains(&g) {
            let name = str_at(g, "name").unwrap_or_default();
            errs.push(FieldError::forbidden(
                &path.child("schedulingGates").index(i),
                format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            ));
            return;
        }
    }
    let (Some(mut n), Some(o)) = (new.as_object().cloned(), old.as_object()) else {
        return;
    };
    for field in ["containers", "initContainers"] {
        let olds = list_at(old, field);
        if let Some(Value::Array(cs)) = n.get_mut(field) {
            for (c, oc) in cs.iter_mut().zip(olds) {
                if let (Some(c), Some(img)) = (c.as_object_mut(), oc.get("image")) {
                    c.insert("image".into(), img.clone());
                }
            }
        }
    }
    let keep_old = |n: &mut Map<String, Value>, field: &str| match o.get(field) {
        Some(v) => {
            n.insert(field.into(), v.clone());
        }
        None => {
            n.remove(field);
        }
    };
    keep_old(&mut n, "activeDeadlineSeconds");
    keep_old(&mut n, "terminationGracePeriodSeconds");
    keep_old(&mut n, "schedulingGates");
    let old_tols = list_at(old, "tolerations");
    if old_tols.iter().all(|t| list_at(new, "tolerations").contains(t)) {
        keep_old(&mut n, "tolerations");
    }
    if str_at(old, "nodeName").unwrap_or_default().is_empty() {
        keep_old(&mut n, "nodeName");
    }
    if !old_gates.is_empty() {
        let old_sel = old.get("nodeSelector").and_then(Value::as_object);
        let new_sel = new.get("nodeSelector").and_then(Value::as_object);
        let added_only =
            old_sel.is_none_or(|os| os.iter().all(|(k, v)| new_sel.and_then(|m| m.get(k)) == Some(v)));
        if added_only {
            keep_old(&mut n, "nodeSelector");
        }
        keep_old(&mut n, "affinity");
    }
    if normalized(&Value::Object(n)) != normalized(old) {
        errs.push(FieldError::forbidden(path, POD_UPDATE_FORBIDDEN));
    }
}

/// A Job's pod template restart policy: `OnFailure` or `Never`. Unset, the pod defaults make it
/// `Always`, and both are answered "Required"; another value is unsupported (on top of the pod spec's
/// own error for a value no pod takes).
pub fn template_restart_policy(spec: &Value, path: &Path, errs: &mut Vec<FieldError>) {
    let p = path.child("restartPolicy");
    match str_at(spec, "restartPolicy") {
        Some("OnFailure" | "Never") => {}
        None | Some("" | "Always") => errs.push(required(&p, "valid values: \"OnFailure\", \"Never\"")),
        Some(v) => errs.push(not_supported(&p, &json!(v), &["OnFailure", "Never"])),
    }
}
