//! The Tables of the built-in kinds, as kube-apiserver's printers render them for `kubectl get`:
//! the same columns (names, types, priorities: kubectl shows priority 1 only with `-o wide`) and the
//! same cell values. Kinds without a printer of their own get the generic `Name`, `Created At`.
//! Columns and cells follow kubernetes `pkg/printers/internalversion` (v1.36), observed against
//! kube-apiserver by the differential suite.

use super::ages::age;
use super::event_fields::text;
use super::printers_status::containers_images_selector;
use super::registry::ResourceInfo;
use serde_json::{Value, json};

/// A column: name, type, priority (the `Name` column has format `name`).
type Col = (&'static str, &'static str, u8);

const NAME: Col = ("Name", "string", 0);
const AGE: Col = ("Age", "string", 0);

/// The columns of a built-in kind with a printer; `None` for the rest.
fn columns(info: &ResourceInfo) -> Option<&'static [Col]> {
    const S: &str = "string";
    let cols: &'static [Col] = match (info.group.as_str(), info.plural.as_str()) {
        ("", "namespaces") => &[NAME, ("Status", S, 0), AGE],
        ("", "nodes") => &[
            NAME,
            ("Status", S, 0),
            ("Roles", S, 0),
            AGE,
            ("Version", S, 0),
            ("Internal-IP", S, 1),
            ("External-IP", S, 1),
            ("OS-Image", S, 1),
            ("Kernel-Version", S, 1),
            ("Container-Runtime", S, 1),
        ],
        ("", "pods") => &[
            NAME,
            ("Ready", S, 0),
            ("Status", S, 0),
            ("Restarts", S, 0),
            AGE,
            ("IP", S, 1),
            ("Node", S, 1),
            ("Nominated Node", S, 1),
            ("Readiness Gates", S, 1),
        ],
        ("", "services") => &[
            NAME,
            ("Type", S, 0),
            ("Cluster-IP", S, 0),
            ("External-IP", S, 0),
            ("Port(s)", S, 0),
            AGE,
            ("Selector", S, 1),
        ],
        ("", "configmaps") => &[NAME, ("Data", S, 0), AGE],
        ("", "secrets") => &[NAME, ("Type", S, 0), ("Data", S, 0), AGE],
        ("", "resourcequotas") => &[NAME, ("Request", S, 0), ("Limit", S, 0), AGE],
        ("", "serviceaccounts") => &[NAME, AGE],
        ("batch", "jobs") => &[
            NAME,
            ("Status", S, 0),
            ("Completions", S, 0),
            ("Duration", S, 0),
            AGE,
            ("Containers", S, 1),
            ("Images", S, 1),
            ("Selector", S, 1),
        ],
        ("apps", "deployments") => &[
            NAME,
            ("Ready", S, 0),
            ("Up-to-date", S, 0),
            ("Available", S, 0),
            AGE,
            ("Containers", S, 1),
            ("Images", S, 1),
            ("Selector", S, 1),
        ],
        ("coordination.k8s.io", "leases") => &[NAME, ("Holder", S, 0), AGE],
        ("discovery.k8s.io", "endpointslices") => &[
            NAME,
            ("AddressType", S, 0),
            ("Ports", S, 0),
            ("Endpoints", S, 0),
            AGE,
        ],
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => &[
            NAME,
            ("Role", S, 0),
            AGE,
            ("Users", S, 1),
            ("Groups", S, 1),
            ("ServiceAccounts", S, 1),
        ],
        ("scheduling.k8s.io", "priorityclasses") => &[
            NAME,
            ("Value", "integer", 0),
            ("Global-Default", "boolean", 0),
            AGE,
            ("PreemptionPolicy", S, 0),
        ],
        (
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations" | "validatingwebhookconfigurations",
        ) => &[NAME, ("Webhooks", "integer", 0), AGE],
        _ => return None,
    };
    Some(cols)
}

/// The Table of a built-in kind (`None` for custom resources, whose CRD names their columns).
pub fn builtin_table(info: &ResourceInfo, objects: &[&Value], rv: &str, cont: Option<&str>) -> Option<Value> {
    if info.is_crd {
        return None;
    }
    let generic: &[Col] = &[NAME, ("Created At", "date", 0)];
    let cols = columns(info).unwrap_or(generic);
    let defs: Vec<Value> = cols
        .iter()
        .map(|(name, type_, priority)| {
            let format = if *name == "Name" { "name" } else { "" };
            json!({"name": name, "type": type_, "format": format, "description": describe(name), "priority": priority})
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut cells = vec![json!(text(o, "/metadata/name"))];
            cells.extend(cells_of(info, o));
            let mut row = json!({"cells": cells, "object": partial(o)});
            if info.group.is_empty() && info.plural == "pods" {
                let phase = text(o, "/status/phase");
                if phase == "Succeeded" || phase == "Failed" {
                    row["conditions"] = json!([{"type": "Completed", "status": "True",
                        "reason": phase, "message": format!("The pod has {} with its containers.", phase.to_lowercase())}]);
                }
            }
            row
        })
        .collect();
    let mut md = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        md["continue"] = json!(c);
    }
    Some(
        json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": md, "columnDefinitions": defs, "rows": rows}),
    )
}

fn describe(name: &str) -> &'static str {
    match name {
        "Name" => "Name must be unique within a namespace.",
        "Age" => "Time since the object was created.",
        "Created At" => "When the object was created.",
        _ => "As kubectl prints it.",
    }
}

fn partial(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}

/// The cells after `Name`, in the order of [`columns`].
fn cells_of(info: &ResourceInfo, o: &Value) -> Vec<Value> {
    let created = age(text(o, "/metadata/creationTimestamp"));
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "namespaces") => vec![json!(text(o, "/status/phase")), json!(created)],
        ("", "nodes") => super::printers_status::node(o, created),
        ("", "pods") => super::printers_status::pod(o, created),
        ("", "services") => super::printers_status::service(o, created),
        ("", "configmaps") => vec![json!(len(o, "data") + len(o, "binaryData")), json!(created)],
        ("", "secrets") => vec![json!(text(o, "/type")), json!(len(o, "data")), json!(created)],
        ("", "resourcequotas") => {
            let (requests, limits) = quota(o);
            vec![json!(requests), json!(limits), json!(created)]
        }
        ("", "serviceaccounts") => vec![json!(created)],
        ("batch", "jobs") => super::printers_status::job(o, created),
        ("apps", "deployments") => {
            let n = |p: &str| o.pointer(p).and_then(Value::as_i64).unwrap_or(0);
            let want = o.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
            let mut cells = vec![
                json!(format!("{}/{want}", n("/status/readyReplicas"))),
                json!(n("/status/updatedReplicas")),
                json!(n("/status/availableReplicas")),
                json!(created),
            ];
            cells.extend(containers_images_selector(o, "/spec/template/spec"));
            cells
        }
        ("coordination.k8s.io", "leases") => vec![json!(text(o, "/spec/holderIdentity")), json!(created)],
        ("discovery.k8s.io", "endpointslices") => {
            let (ports, endpoints) = endpoint_slice(o);
            vec![
                json!(text(o, "/addressType")),
                json!(ports),
                json!(endpoints),
                json!(created),
            ]
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => binding(o, created),
        ("scheduling.k8s.io", "priorityclasses") => vec![
            o.get("value").cloned().unwrap_or(json!(0)),
            json!(o.get("globalDefault").and_then(Value::as_bool).unwrap_or(false)),
            json!(created),
            json!(text(o, "/preemptionPolicy")),
        ],
        ("admissionregistration.k8s.io", _) if columns(info).is_some() => {
            vec![json!(len(o, "webhooks")), json!(created)]
        }
        _ => vec![json!(text(o, "/metadata/creationTimestamp"))],
    }
}

fn len(o: &Value, field: &str) -> usize {
    match o.get(field) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

/// `Request` and `Limit`: `resource: used/hard` for each resource of `status.hard` (empty until the
/// quota controller has counted), sorted, `limits.*` in the second.
fn quota(o: &Value) -> (String, String) {
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    let mut hard: Vec<(&String, &Value)> = o
        .pointer("/status/hard")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .collect();
    hard.sort_by(|a, b| a.0.cmp(b.0));
    for (resource, h) in hard {
        let used = o
            .pointer("/status/used")
            .and_then(|u| u.get(resource))
            .and_then(Value::as_str)
            .unwrap_or("0");
        let entry = format!("{resource}: {used}/{}", h.as_str().unwrap_or(""));
        if resource
            .split_once('.')
            .is_some_and(|(first, _)| first == "limits")
        {
            limits.push(entry);
        } else {
            requests.push(entry);
        }
    }
    (requests.join(", "), limits.join(", "))
}

/// `Ports` and `Endpoints` of an EndpointSlice (three addresses at most, then `+ N more...`).
fn endpoint_slice(o: &Value) -> (String, String) {
    let ports: Vec<String> = o
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            p.get("port")
                .and_then(Value::as_i64)
                .map_or("<unset>".into(), |n| n.to_string())
        })
        .collect();
    let ports = if ports.is_empty() {
        "<unset>".to_string()
    } else {
        ports.join(",")
    };
    let addresses: Vec<&str> = o
        .get("endpoints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|e| e.get("addresses").and_then(Value::as_array).into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    let endpoints = match addresses.len() {
        0 => "<unset>".to_string(),
        n if n > 3 => format!("{} + {} more...", addresses[..3].join(","), n - 3),
        _ => addresses.join(","),
    };
    (ports, endpoints)
}

fn binding(o: &Value, created: String) -> Vec<Value> {
    let role = format!("{}/{}", text(o, "/roleRef/kind"), text(o, "/roleRef/name"));
    let subjects = o
        .get("subjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let of = |kind: &str| -> String {
        subjects
            .iter()
            .filter(|s| text(s, "/kind") == kind)
            .map(|s| {
                let ns = text(s, "/namespace");
                if kind == "ServiceAccount" {
                    format!("{ns}/{}", text(s, "/name"))
                } else {
                    text(s, "/name").to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        json!(role),
        json!(created),
        json!(of("User")),
        json!(of("Group")),
        json!(of("ServiceAccount")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// printers_test.go TestPrintResourceQuota: requests and limits apart, sorted, from the status.
    #[test]
    fn quota_columns_come_from_the_status() {
        let q = json!({"spec": {"hard": {"pods": "3"}},
            "status": {"hard": {"pods": "3", "limits.cpu": "2", "cpu": "1"}, "used": {"pods": "1", "cpu": "500m"}}});
        assert_eq!(
            quota(&q),
            ("cpu: 500m/1, pods: 1/3".into(), "limits.cpu: 0/2".into())
        );
        let fresh = json!({"spec": {"hard": {"pods": "3"}}});
        assert_eq!(quota(&fresh), (String::new(), String::new()));
    }
}
