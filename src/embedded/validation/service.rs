//! Services, after kube-apiserver's `pkg/apis/core/validation/validation.go` (`ValidateService`,
//! `validateServicePort`, `ValidateServiceUpdate`).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{
    PROTOCOLS, duplicate, invalid, ip_address, list_at, one_of, port_name, port_number, required, str_at,
};
use crate::api::names;
use crate::api::validation::{FieldError, Path};

const SERVICE_TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
const SESSION_AFFINITIES: [&str; 2] = ["ClientIP", "None"];

/// The addresses a Service asks for: `clusterIPs`, or the one `clusterIP` the defaults copy into it.
fn cluster_ips(spec: &Value) -> Vec<String> {
    let ips: Vec<String> = list_at(spec, "clusterIPs")
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_string())
        .collect();
    if !ips.is_empty() {
        return ips;
    }
    match str_at(spec, "clusterIP") {
        Some(ip) if !ip.is_empty() => vec![ip.to_string()],
        _ => Vec::new(),
    }
}

pub fn validate_service(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let path = Path::root("spec");
    let type_ = str_at(spec, "type").unwrap_or("ClusterIP");
    let external = type_ == "ExternalName";
    let headless = str_at(spec, "clusterIP") == Some("None");
    one_of(spec, "type", &path, &SERVICE_TYPES, errs);
    if external && str_at(spec, "externalName").unwrap_or_default().is_empty() {
        errs.push(required(&path.child("externalName"), ""));
    }
    let ports = list_at(spec, "ports");
    if ports.is_empty() && !external && !headless {
        errs.push(required(&path.child("ports"), ""));
    }
    let mut names_seen = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        validate_port(
            p,
            ports.len() > 1,
            &path.child("ports").index(i),
            &mut names_seen,
            errs,
        );
    }
    // One port per (port, protocol).
    let mut pairs = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let proto = str_at(p, "protocol").filter(|s| !s.is_empty()).unwrap_or("TCP");
        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !pairs.insert((port, proto.to_string())) {
            let go = json!({
                "Name": str_at(p, "name").unwrap_or_default(),
                "Protocol": proto,
                "AppProtocol": p.get("appProtocol").cloned().unwrap_or(Value::Null),
                "Port": port,
                "TargetPort": p.get("targetPort").cloned().unwrap_or(json!(0)),
                "NodePort": p.get("nodePort").and_then(Value::as_i64).unwrap_or(0),
            });
            // Go prints the struct's fields in declaration order, which serde_json's sorted map
            // does not keep: the message is built by hand.
            let shown = format!(
                "{{\"Name\":{},\"Protocol\":{},\"AppProtocol\":{},\"Port\":{},\"TargetPort\":{},\"NodePort\":{}}}",
                go["Name"], go["Protocol"], go["AppProtocol"], go["Port"], go["TargetPort"], go["NodePort"]
            );
            errs.push(FieldError::new(
                &path.child("ports").index(i),
                crate::api::validation::ErrorType::Duplicate,
                shown,
            ));
        }
    }
    if type_ == "ClusterIP" {
        for (i, p) in ports.iter().enumerate() {
            if p.get("nodePort").and_then(Value::as_i64).is_some_and(|n| n != 0) {
                errs.push(FieldError::forbidden(
                    &path.child("ports").index(i).child("nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }
    if !external {
        let ips = cluster_ips(spec);
        if let Some(ip) = str_at(spec, "clusterIP").filter(|s| !s.is_empty())
            && ips.first().is_some_and(|first| first != ip)
        {
            errs.push(invalid(
                &path.child("clusterIPs"),
                &json!(ips),
                "first value must match `clusterIP`",
            ));
        }
        for (i, ip) in ips.iter().enumerate() {
            if i == 0 && ip == "None" {
                continue;
            }
            ip_address(&path.child("clusterIPs").index(i), ip, errs);
        }
    }
    if let Some(sel) = spec.get("selector").and_then(Value::as_object) {
        let p = path.child("selector");
        for (k, v) in sel {
            names::qualified_name(&p, k, errs);
            names::label_value(&p, v.as_str().unwrap_or_default(), errs);
        }
    }
    one_of(spec, "sessionAffinity", &path, &SESSION_AFFINITIES, errs);
    if let Some(old) = old {
        validate_update(spec, old.get("spec").unwrap_or(&Value::Null), &path, errs);
    }
}

/// `validateServicePort`: a name (required when there are several, an RFC 1123 label, unique), the
/// port, the protocol, and the target port (the port itself when unset, as the defaults make it).
fn validate_port(
    p: &Value,
    require_name: bool,
    path: &Path,
    seen: &mut BTreeSet<String>,
    errs: &mut Vec<FieldError>,
) {
    let name = str_at(p, "name").unwrap_or_default();
    if name.is_empty() {
        if require_name {
            errs.push(required(&path.child("name"), ""));
        }
    } else {
        names::dns_label(&path.child("name"), name, errs);
        if !seen.insert(name.to_string()) {
            errs.push(duplicate(&path.child("name"), &json!(name)));
        }
    }
    let port = p.get("port").cloned().unwrap_or(json!(0));
    port_number(&path.child("port"), &port, errs);
    one_of(p, "protocol", path, &PROTOCOLS, errs);
    match p.get("targetPort") {
        Some(Value::String(s)) => port_name(&path.child("targetPort"), s, errs),
        Some(v @ Value::Number(_)) => port_number(&path.child("targetPort"), v, errs),
        _ => port_number(&path.child("targetPort"), &port, errs),
    }
}

/// `ValidateServiceUpdate`: an allocated cluster IP stays (the node simulator's first write of an
/// address into an empty one is the allocation). A move to `ExternalName` releases it.
fn validate_update(new: &Value, old: &Value, path: &Path, errs: &mut Vec<FieldError>) {
    if str_at(new, "type") == Some("ExternalName") {
        return;
    }
    let (new_ips, old_ips) = (cluster_ips(new), cluster_ips(old));
    if let (Some(n), Some(o)) = (new_ips.first(), old_ips.first())
        && n != o
    {
        errs.push(invalid(
            &path.child("clusterIPs").index(0),
            &json!(new_ips),
            "may not change once set",
        ));
    }
}
