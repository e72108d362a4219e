//! The structural markers Kueue's and KubeRay's CRDs carry and schemars does not generate:
//! `x-kubernetes-validations` (CEL rules with their messages), `maxItems`/`minItems`,
//! `maxLength`/`minLength`, `pattern`, `minimum`, `maxProperties`, missing `enum`s,
//! `x-kubernetes-list-type`/`-list-map-keys`/`-map-type`, and the `default` of a list-map key that
//! is not required (kube-apiserver refuses a list-map whose keys are neither required nor defaulted).
//! A marker given as `null` is taken out: the `[]`/`""`/`{}` default schemars writes for a
//! `#[serde(default)]` field that Kueue's CRD leaves without one, where the added `minItems`,
//! `minLength`, `pattern` or rule would refuse that default (and kube-apiserver refuses the CRD).
//!
//! Why a table applied to the rendered schema rather than `#[schemars(extend(...))]` on each field:
//! about half of these markers sit inside Kubernetes' own types (the pod template's containers,
//! ports, volumes, `Condition`, `LabelSelector`), whose schemas come from k8s-openapi and cannot carry
//! attributes of ours; and one place keyed by schema path is what a reviewer compares with Kueue's
//! and KubeRay's CRDs line by line. The table (`crd_markers.json`) is data: per CRD, a schema path
//! (`.spec.podSets[].name`; `[]` = the items of a list, `{}` = the values of a map) and the markers
//! to add; `podTemplate` holds the markers of a `PodTemplateSpec`, relative to where `podTemplateAt`
//! mounts one. A marker already in the generated schema is kept.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use serde_json::{Map, Value};

/// The table (see the module doc).
const TABLE: &str = include_str!("crd_markers.json");

/// One step of a schema path.
#[derive(Debug, PartialEq, Eq)]
enum Step<'a> {
    Property(&'a str),
    Items,
    Values,
}

fn steps(path: &str) -> Option<Vec<Step<'_>>> {
    let mut out = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("[]") {
            out.push(Step::Items);
            rest = r;
        } else if let Some(r) = rest.strip_prefix("{}") {
            out.push(Step::Values);
            rest = r;
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[', '{']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            out.push(Step::Property(&r[..end]));
            rest = &r[end..];
        } else {
            return None;
        }
    }
    Some(out)
}

/// The schema node at `path` under `schema`, if the schema has it.
fn node<'a>(schema: &'a mut Value, path: &str) -> Option<&'a mut Map<String, Value>> {
    let mut at = schema;
    for step in steps(path)? {
        at = match step {
            Step::Property(p) => at.get_mut("properties")?.get_mut(p)?,
            Step::Items => at.get_mut("items")?,
            Step::Values => at.get_mut("additionalProperties").filter(|v| v.is_object())?,
        };
    }
    at.as_object_mut()
}

fn add(node: &mut Map<String, Value>, markers: &Map<String, Value>) {
    for (k, v) in markers {
        if v.is_null() {
            node.remove(k);
        } else {
            node.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

/// Adds the table's markers to `crd`'s schemas; returns the table's paths the schema lacks (none
/// for quotagate's CRDs: a test holds that), each as `crd path`.
pub fn apply(crd: &mut CustomResourceDefinition) -> Vec<String> {
    let Ok(table) = serde_json::from_str::<Value>(TABLE) else {
        return vec!["crd_markers.json is not JSON".into()];
    };
    let name = crd.metadata.name.clone().unwrap_or_default();
    let entries = table
        .pointer("/crds")
        .and_then(|c| c.get(&name))
        .and_then(Value::as_object);
    let mounts = table
        .pointer("/podTemplateAt")
        .and_then(|c| c.get(&name))
        .and_then(Value::as_array);
    let template = table.get("podTemplate").and_then(Value::as_object);
    let mut unresolved = Vec::new();
    if entries.is_none() && mounts.is_none() {
        return unresolved;
    }
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        let Ok(mut value) = serde_json::to_value(&*schema) else {
            unresolved.push(format!("{name}: schema does not serialize"));
            continue;
        };
        for (path, markers) in entries.into_iter().flatten() {
            match (node(&mut value, path), markers.as_object()) {
                (Some(n), Some(m)) => add(n, m),
                _ => unresolved.push(format!("{name} {path}")),
            }
        }
        for mount in mounts.into_iter().flatten().filter_map(Value::as_str) {
            if node(&mut value, mount).is_none() {
                unresolved.push(format!("{name} {mount}"));
                continue;
            }
            for (rel, markers) in template.into_iter().flatten() {
                let path = format!("{mount}{rel}");
                match (node(&mut value, &path), markers.as_object()) {
                    (Some(n), Some(m)) => add(n, m),
                    _ => unresolved.push(format!("{name} {path}")),
                }
            }
        }
        match serde_json::from_value::<JSONSchemaProps>(value) {
            Ok(s) => *schema = s,
            Err(e) => unresolved.push(format!("{name}: {e}")),
        }
    }
    unresolved
}

/// `crds`, each with its markers added.
pub fn with_markers(mut crds: Vec<CustomResourceDefinition>) -> Vec<CustomResourceDefinition> {
    for crd in &mut crds {
        // The table names only paths the schemas have (`every_table_path_is_in_the_schema`).
        let _unresolved = apply(crd);
    }
    crds
}

/// A CRD as JSON, with its whole-number bounds written as integers. `JSONSchemaProps` keeps
/// `minimum`/`maximum` as `f64`, so `minimum: 0` would print `0.0`; Kueue's and KubeRay's CRDs (and
/// kustomize, re-reading ours) say `0`.
pub fn to_value(crd: &CustomResourceDefinition) -> serde_json::Result<serde_json::Value> {
    let mut v = serde_json::to_value(crd)?;
    integral_bounds(&mut v);
    Ok(v)
}

fn integral_bounds(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                let bound = k == "minimum" || k == "maximum";
                if let (true, Some(f)) = (bound, child.as_f64())
                    && child.is_f64()
                    && f.fract() == 0.0
                    && f.abs() < 9.0e15
                {
                    *child = Value::from(f as i64);
                } else {
                    integral_bounds(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_bounds),
        _ => {}
    }
}

#[cfg(test)]
#[path = "crd_markers_tests.rs"]
mod tests;
