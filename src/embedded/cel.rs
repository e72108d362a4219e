//! A CRD schema's CEL rules (`x-kubernetes-validations`) evaluated on a write, as kube-apiserver
//! does (apiextensions-apiserver `pkg/apiserver/schema/cel`): each rule with `self` bound to the
//! value at its schema node, and `oldSelf` to the stored value at the same path on an update. A
//! transition rule (one naming `oldSelf`) is skipped on create and where the old object has no
//! value there. A rule that is false is refused with its `message` (or `failed rule: <rule>`); one
//! that fails to evaluate (`no such key`) with the error and the message, as the real server words
//! them (checked against kube-apiserver v1.36.3):
//!
//! - an object or list: `spec: Invalid value: <message>`,
//! - a scalar: `spec.managedBy: Invalid value: "someone-else": <message>`,
//! - the root: `<nil>: Invalid value: <message>`,
//! - an evaluation error: `spec: Invalid value: "object": no such key: nodeLabels evaluating rule: <message>`.
//!
//! Not modelled: `messageExpression` (its `message` is used), `reason` and `fieldPath`, the cost
//! budget (the schema's `maxItems`/`maxLength`, checked first, bound the work), `oldSelf` inside
//! list items, ratcheting, and Kubernetes' CEL library functions beyond the standard ones (a rule
//! using one fails to compile and is reported as a failed evaluation).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use cel::objects::{Key, Map as CelMap};
use cel::{Context, ExecutionError, Program, Value as Cel};
use serde_json::Value;

use crate::api::validation::{ErrorType, FieldError};

/// Compiled rules by their text; cleared when it holds more than [`CACHE_MAX`] (a server's CRDs
/// carry a few hundred at most).
static PROGRAMS: LazyLock<Mutex<HashMap<String, Arc<Program>>>> = LazyLock::new(Default::default);
const CACHE_MAX: usize = 4096;

fn program(rule: &str) -> Result<Arc<Program>, String> {
    let mut cache = PROGRAMS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = cache.get(rule) {
        return Ok(p.clone());
    }
    let p = Arc::new(Program::compile(rule).map_err(|e| format!("compilation failed: {e}"))?);
    if cache.len() >= CACHE_MAX {
        cache.clear();
    }
    cache.insert(rule.to_string(), p.clone());
    Ok(p)
}

/// A JSON value as CEL sees it: integers as `int`, objects as maps keyed by string.
fn to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => Cel::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(a) => Cel::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => Cel::Map(CelMap {
            map: Arc::new(
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v)))
                    .collect(),
            ),
        }),
    }
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn field(path: &str) -> String {
    if path.is_empty() {
        "<nil>".into()
    } else {
        path.to_string()
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Evaluates the rules at `schema` for `new` (and `old`, on an update) at `path` ("" for the
/// object's root), and those of every schema node under it, appending each refusal.
pub fn validate(schema: &Value, new: &Value, old: Option<&Value>, path: &str, errors: &mut Vec<FieldError>) {
    if new.is_null() {
        return;
    }
    let rules = schema.get("x-kubernetes-validations").and_then(Value::as_array);
    for rule in rules.into_iter().flatten() {
        let Some(text) = rule.get("rule").and_then(Value::as_str) else {
            continue;
        };
        let transition = text.contains("oldSelf");
        let old = old.filter(|o| !o.is_null());
        if transition && old.is_none() {
            continue;
        }
        let message = rule
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("failed rule: {text}"));
        let outcome = program(text).and_then(|p| {
            let mut ctx = Context::default();
            ctx.add_variable_from_value("self", to_cel(new));
            if let Some(o) = old {
                ctx.add_variable_from_value("oldSelf", to_cel(o));
            }
            p.execute(&ctx).map_err(|e| match e {
                ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
                other => other.to_string(),
            })
        });
        match outcome {
            Ok(Cel::Bool(true)) => {}
            Ok(Cel::Bool(false)) => {
                let body = if new.is_object() || new.is_array() {
                    message
                } else {
                    format!("{}: {message}", shown(new))
                };
                errors.push(FieldError::new(field(path), ErrorType::Invalid, body));
            }
            Ok(other) => errors.push(FieldError::new(
                field(path),
                ErrorType::Invalid,
                format!("\"object\": rule did not evaluate to a bool ({other:?}) evaluating rule: {message}"),
            )),
            Err(e) => errors.push(FieldError::new(
                field(path),
                ErrorType::Invalid,
                format!("\"object\": {e} evaluating rule: {message}"),
            )),
        }
    }
    match new {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|s| s.is_object());
            for (k, v) in m {
                if path.is_empty() && matches!(k.as_str(), "metadata" | "apiVersion" | "kind") {
                    continue;
                }
                if let Some(s) = props.and_then(|p| p.get(k)).or(extra) {
                    let o = old.and_then(|o| o.get(k));
                    validate(s, v, o, &child(path, k), errors);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    validate(s, v, None, &format!("{path}[{i}]"), errors);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
#[path = "cel_tests.rs"]
mod tests;
