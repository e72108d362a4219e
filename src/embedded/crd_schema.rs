//! What kube-apiserver does with a CRD's `openAPIV3Schema` on every write, for real-cluster mode
//! (`CrdSchemaAdmission`): `default`s filled into objects that lack the field, then the structural
//! checks (`type`, `x-kubernetes-int-or-string`, `required`, `enum`, `minimum`/`maximum` and their
//! exclusive forms, `minLength`/`maxLength`, `pattern`, `minItems`/`maxItems`, `properties`,
//! `additionalProperties`, `items`, the uniqueness of `x-kubernetes-list-type: set` items and of
//! `map` items' keys), each refusal worded as the real server words it. `metadata`,
//! `apiVersion` and `kind` are the server's own; then, on a structurally valid object, the CEL
//! `x-kubernetes-validations` (`cel.rs`). Not modelled: `format`, `uniqueItems`, map-type checks, ratcheting of unchanged invalid values on
//! update (unknown fields are pruned at the store's write, `prune.rs`), and
//! defaulting happens at the store's write, after mutating webhooks (the real server defaults when it
//! decodes the request, before them).

use serde_json::{Map, Value};

use super::admission::{AdmissionHook, Operation};
use super::registry::ResourceInfo;
use crate::api::validation::{ErrorType, FieldError};

/// Defaulting and validation by the CRD schema only: no quotagate logic.
pub struct CrdSchemaAdmission;

impl AdmissionHook for CrdSchemaAdmission {
    fn admit(
        &self,
        _: Operation,
        resource: &ResourceInfo,
        new: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), Vec<FieldError>> {
        let refused = super::webhooks::refuse_match_conditions(resource, new);
        if !refused.is_empty() {
            return Err(refused);
        }
        let Some(schema) = resource.schema.as_ref().map(super::registry::CrdSchema::get) else {
            return Ok(());
        };
        let Some(obj) = new.as_object_mut() else {
            return Ok(());
        };
        let props = schema.get("properties").and_then(Value::as_object);
        let mut errors = Vec::new();
        for (key, value) in obj.iter_mut() {
            if matches!(key.as_str(), "metadata" | "apiVersion" | "kind") {
                continue;
            }
            if let Some(s) = props.and_then(|p| p.get(key)) {
                default(s, value);
                check(s, value, key, &mut errors);
            }
        }
        for (key, s) in props.into_iter().flatten() {
            if !obj.contains_key(key)
                && !matches!(key.as_str(), "metadata" | "apiVersion" | "kind")
                && let Some(d) = s.get("default")
            {
                let mut d = d.clone();
                default(s, &mut d);
                obj.insert(key.clone(), d);
            }
        }
        for r in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !obj.contains_key(r) {
                errors.push(FieldError::new(r, ErrorType::Required, ""));
            }
        }
        // As kube-apiserver (apiextensions' `hasBlockingErr`): a missing, unsupported, too long, too
        // many or wrongly typed value stops the CEL rules, whose work the schema's bounds limit, and
        // the refusal says so in one more cause; other schema errors let them run.
        if errors.iter().any(blocks_cel) {
            errors.push(FieldError::new(
                "<nil>",
                ErrorType::Invalid,
                "null: some validation rules were not checked because the object was invalid; \
                 correct the existing errors to complete validation",
            ));
        } else {
            super::cel::validate(schema, new, old, "", &mut errors);
        }
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }
}

/// Fills `default`s of missing properties, in every object present under `value`.
pub fn default(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, s) in props {
                    match m.get_mut(k) {
                        Some(v) => default(s, v),
                        None => {
                            // As kube-apiserver's structural defaulting, a default is itself
                            // defaulted (`preemption: {}` gains `borrowWithinCohort.policy`).
                            if let Some(d) = s.get("default") {
                                let mut d = d.clone();
                                default(s, &mut d);
                                m.insert(k.clone(), d);
                            }
                        }
                    }
                }
            } else if let Some(s) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                for v in m.values_mut() {
                    default(s, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for v in items {
                    default(s, v);
                }
            }
        }
        _ => {}
    }
}

fn blocks_cel(e: &FieldError) -> bool {
    matches!(
        e.kind,
        ErrorType::Required
            | ErrorType::NotSupported
            | ErrorType::TooLong
            | ErrorType::TooMany
            | ErrorType::TypeInvalid
    )
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn invalid(path: &str, v: &Value, why: String) -> FieldError {
    FieldError::new(path, ErrorType::Invalid, format!("{}: {why}", shown(v)))
}

/// A value of the wrong type (`... in body must be of type X: "Y"`): apiextensions reports every
/// schema type error as `field.TypeInvalid` (reason `FieldValueTypeInvalid`).
fn type_invalid(path: &str, v: &Value, why: String) -> FieldError {
    FieldError::new(path, ErrorType::TypeInvalid, format!("{}: {why}", shown(v)))
}

fn child(path: &str, key: &str) -> String {
    format!("{path}.{key}")
}

/// Checks `value` at `path` against `schema`, appending each refusal.
pub fn check(schema: &Value, value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    if value.is_null() {
        // A null of a non-nullable field without a default is dropped by the real server when it
        // decodes a body (`prune.rs`); one that reaches validation (a server-side applied
        // configuration is not decoded so) is refused as a value of the wrong type.
        let nullable = schema.get("nullable").and_then(Value::as_bool) == Some(true);
        if let (false, None, Some(want)) = (
            nullable,
            schema.get("default"),
            schema.get("type").and_then(Value::as_str),
        ) {
            errors.push(type_invalid(
                path,
                &Value::String("null".into()),
                format!("{path} in body must be of type {want}: \"null\""),
            ));
        }
        return;
    }
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    let uint = |k: &str| schema.get(k).and_then(Value::as_u64);
    let got = type_name(value);
    let int_or_string = schema.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true);
    if int_or_string {
        if got != "integer" && got != "string" {
            errors.push(type_invalid(
                path,
                &Value::String(got.into()),
                format!("{path} in body must be of type integer,string: {:?}", got),
            ));
            return;
        }
        // A string (a quantity) still meets the schema's `pattern` and lengths.
        if !value.is_string() {
            return;
        }
    }
    if let Some(want) = schema.get("type").and_then(Value::as_str) {
        let fits = want == got || (want == "number" && got == "integer");
        if !fits {
            errors.push(type_invalid(
                path,
                &Value::String(got.into()),
                format!("{path} in body must be of type {want}: {got:?}"),
            ));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let list = allowed.iter().map(shown).collect::<Vec<_>>().join(", ");
        errors.push(FieldError::new(
            path,
            ErrorType::NotSupported,
            format!("{}: supported values: {list}", shown(value)),
        ));
    }
    match value {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            let exclusive = |k: &str| schema.get(k).and_then(Value::as_bool) == Some(true);
            if let Some(max) = num("maximum") {
                if exclusive("exclusiveMaximum") && x >= max {
                    errors.push(invalid(
                        path,
                        value,
                        format!("{path} in body should be less than {max}"),
                    ));
                } else if x > max {
                    errors.push(invalid(
                        path,
                        value,
                        format!("{path} in body should be less than or equal to {max}"),
                    ));
                }
            }
            if let Some(min) = num("minimum") {
                if exclusive("exclusiveMinimum") && x <= min {
                    errors.push(invalid(
                        path,
                        value,
                        format!("{path} in body should be greater than {min}"),
                    ));
                } else if x < min {
                    errors.push(invalid(
                        path,
                        value,
                        format!("{path} in body should be greater than or equal to {min}"),
                    ));
                }
            }
        }
        Value::String(s) => {
            let len = s.chars().count() as u64;
            if let Some(max) = uint("maxLength")
                && len > max
            {
                errors.push(FieldError::new(
                    path,
                    ErrorType::TooLong,
                    format!("may not be more than {max} bytes"),
                ));
            }
            if let Some(min) = uint("minLength")
                && len < min
            {
                errors.push(invalid(
                    path,
                    value,
                    format!("{path} in body should be at least {min} chars long"),
                ));
            }
            if let Some(p) = schema.get("pattern").and_then(Value::as_str)
                && let Ok(re) = regex::Regex::new(p)
                && !re.is_match(s)
            {
                errors.push(invalid(path, value, format!("{path} in body should match '{p}'")));
            }
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(max) = uint("maxItems")
                && n > max
            {
                errors.push(FieldError::new(
                    path,
                    ErrorType::TooMany,
                    format!("{n}: must have at most {max} items"),
                ));
            }
            if let Some(min) = uint("minItems")
                && n < min
            {
                // kube-apiserver shows the list's length as the value.
                errors.push(invalid(
                    path,
                    &Value::from(n),
                    format!("{path} in body should have at least {min} items"),
                ));
            }
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    check(s, v, &format!("{path}[{i}]"), errors);
                }
            }
            check_list_type(schema, items, path, errors);
        }
        Value::Object(m) => check_object(schema, m, path, errors),
        _ => {}
    }
}

/// `x-kubernetes-list-type: set` and `map`: no two items equal, no two items with the same
/// values of the `x-kubernetes-list-map-keys` (apiextensions' `listtype` validation). Each
/// duplicate is reported once, at its own index, as kube-apiserver does.
fn check_list_type(schema: &Value, items: &[Value], path: &str, errors: &mut Vec<FieldError>) {
    let keys: Vec<&str> = match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => Vec::new(),
        Some("map") => schema
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|k| k.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default(),
        _ => return,
    };
    let is_map = !keys.is_empty();
    let mut seen: Vec<Value> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let key = if is_map {
            let Some(obj) = item.as_object() else { continue };
            let mut key = Map::new();
            for k in &keys {
                // A missing key counts as its schema default (already filled in) or absent.
                if let Some(v) = obj.get(*k) {
                    key.insert((*k).to_string(), v.clone());
                }
            }
            Value::Object(key)
        } else {
            item.clone()
        };
        if seen.contains(&key) {
            // kube-apiserver 1.36 shows the item (set) or its keys (map) as JSON:
            // `spec.resourceGroups[0].flavors[1]: Duplicate value: {"name":"default"}`.
            errors.push(FieldError::new(
                format!("{path}[{i}]"),
                ErrorType::Duplicate,
                key.to_string(),
            ));
        } else {
            seen.push(key);
        }
    }
}

fn check_object(schema: &Value, m: &Map<String, Value>, path: &str, errors: &mut Vec<FieldError>) {
    let props = schema.get("properties").and_then(Value::as_object);
    for r in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if m.get(r).is_none_or(Value::is_null) {
            errors.push(FieldError::new(child(path, r), ErrorType::Required, ""));
        }
    }
    for (k, v) in m {
        if let Some(s) = props.and_then(|p| p.get(k)) {
            check(s, v, &child(path, k), errors);
        } else if let Some(s) = schema.get("additionalProperties").filter(|s| s.is_object()) {
            check(s, v, &child(path, k), errors);
        }
    }
}

#[cfg(test)]
#[path = "crd_schema_tests.rs"]
mod tests;
