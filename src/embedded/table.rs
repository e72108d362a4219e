//! Server-side `Table` rendering (`Accept: ...;as=Table`), the response `kubectl get` asks for, with
//! CRD printer columns evaluated through a small JSONPath subset.

use super::ages::age;
use super::event_fields::text;
use super::registry::{PrinterColumn, ResourceInfo};
use serde_json::{Value, json};

/// Evaluates the JSONPath subset printer columns use: `.a.b`, `[n]`, `[*]`, `[?(@.k=="v")]`, `{...}`.
/// Returns every match (kubectl joins multiple matches with commas).
pub fn jsonpath<'a>(obj: &'a Value, path: &str) -> Vec<&'a Value> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut cur: Vec<&Value> = vec![obj];
    let mut rest = path.trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let field = &r[..end];
            rest = &r[end..];
            if field.is_empty() {
                continue;
            }
            cur = cur.into_iter().filter_map(|v| v.get(field)).collect();
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = find_close(r) else {
                return Vec::new();
            };
            let inner = &r[..end];
            rest = &r[end + 1..];
            cur = cur.into_iter().flat_map(|v| index(v, inner)).collect();
        } else {
            return Vec::new();
        }
    }
    cur
}

fn find_close(s: &str) -> Option<usize> {
    let mut depth = 0;
    let mut in_str: Option<char> = None;
    for (i, c) in s.char_indices() {
        match (c, in_str) {
            ('"' | '\'', None) => in_str = Some(c),
            (q, Some(open)) if q == open => in_str = None,
            ('[', None) => depth += 1,
            (']', None) if depth == 0 => return Some(i),
            (']', None) => depth -= 1,
            _ => {}
        }
    }
    None
}

fn index<'a>(v: &'a Value, inner: &str) -> Vec<&'a Value> {
    let Some(arr) = v.as_array() else {
        // `['key']` on an object.
        let key = inner.trim_matches(|c| c == '\'' || c == '"');
        return v.get(key).into_iter().collect();
    };
    if inner == "*" {
        return arr.iter().collect();
    }
    if let Ok(i) = inner.parse::<i64>() {
        let idx = if i < 0 { arr.len() as i64 + i } else { i };
        return usize::try_from(idx)
            .ok()
            .and_then(|i| arr.get(i))
            .into_iter()
            .collect();
    }
    if let Some(filter) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
        let Some((lhs, rhs)) = filter.split_once("==") else {
            return Vec::new();
        };
        let field = lhs.trim().trim_start_matches('@');
        let want = rhs.trim().trim_matches(|c| c == '"' || c == '\'');
        return arr
            .iter()
            .filter(|e| {
                jsonpath(e, field).first().is_some_and(|x| match x {
                    Value::String(s) => s == want,
                    other => serde_json::to_string(other).is_ok_and(|s| s == want),
                })
            })
            .collect();
    }
    Vec::new()
}

fn cell(obj: &Value, c: &PrinterColumn) -> Value {
    let found = jsonpath(obj, &c.json_path);
    if found.is_empty() {
        return Value::Null;
    }
    if c.type_ == "date" {
        return json!(found[0].as_str().map(age).unwrap_or_default());
    }
    if found.len() == 1 {
        return found[0].clone();
    }
    json!(
        found
            .iter()
            .map(|v| v.as_str().map(String::from).unwrap_or_else(|| v.to_string()))
            .collect::<Vec<_>>()
            .join(",")
    )
}

fn columns(info: &ResourceInfo) -> Vec<PrinterColumn> {
    if info.printer_columns.is_empty() {
        return vec![PrinterColumn {
            name: "Age".into(),
            type_: "date".into(),
            format: String::new(),
            json_path: ".metadata.creationTimestamp".into(),
            priority: 0,
            description: "CreationTimestamp".into(),
        }];
    }
    info.printer_columns.clone()
}

fn partial(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}

/// A Table of `objects` (one row each). `rv` is the list resourceVersion (empty for single objects).
pub fn table(info: &ResourceInfo, objects: &[&Value], rv: &str, cont: Option<&str>) -> Value {
    if let Some(t) = events_table(info, objects, rv, cont) {
        return t;
    }
    if let Some(t) = super::printers::builtin_table(info, objects, rv, cont) {
        return t;
    }
    let cols = columns(info);
    let mut defs = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}),
    ];
    defs.extend(cols.iter().map(|c| {
        json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority})
    }));
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut cells = vec![o.pointer("/metadata/name").cloned().unwrap_or(json!(""))];
            cells.extend(cols.iter().map(|c| cell(o, c)));
            json!({"cells": cells, "object": partial(o)})
        })
        .collect();
    let mut md = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        md["continue"] = json!(c);
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": md, "columnDefinitions": defs, "rows": rows})
}

// The Event table (the real server's `printEvent`).

fn since(t: &str) -> String {
    if t.is_empty() {
        "<unknown>".to_string()
    } else {
        age(t)
    }
}

fn first_non_empty<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() { b } else { a }
}

/// One row of the real server's Event table (`printEvent`, always rendered wide; kubectl hides the
/// priority-1 columns unless `-o wide`).
fn row(obj: &Value) -> Value {
    let first = since(first_non_empty(
        text(obj, "/firstTimestamp"),
        text(obj, "/eventTime"),
    ));
    let mut last = if text(obj, "/lastTimestamp").is_empty() {
        first.clone()
    } else {
        since(text(obj, "/lastTimestamp"))
    };
    let mut count = obj.get("count").and_then(Value::as_i64).unwrap_or(0);
    if obj.get("series").is_some_and(|s| s.is_object()) {
        last = since(text(obj, "/series/lastObservedTime"));
        count = obj.pointer("/series/count").and_then(Value::as_i64).unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let kind = text(obj, "/involvedObject/kind").to_lowercase();
    let name = text(obj, "/involvedObject/name");
    let target = if name.is_empty() {
        kind
    } else {
        format!("{kind}/{name}")
    };
    let component = first_non_empty(text(obj, "/source/component"), text(obj, "/reportingComponent"));
    let instance = first_non_empty(text(obj, "/source/host"), text(obj, "/reportingInstance"));
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    let cells = json!([
        last,
        text(obj, "/type"),
        text(obj, "/reason"),
        target,
        text(obj, "/involvedObject/fieldPath"),
        source,
        text(obj, "/message").trim(),
        first,
        count,
        text(obj, "/metadata/name"),
    ]);
    let partial = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))});
    json!({"cells": cells, "object": partial})
}

/// The Table of Events (either version: the real server prints both from the same internal type);
/// `None` for other kinds.
pub fn events_table(info: &ResourceInfo, objects: &[&Value], rv: &str, cont: Option<&str>) -> Option<Value> {
    super::event_fields::version_of(&info.group, &info.plural)?;
    let col = |name: &str, priority: i32, description: &str| {
        let format = if name == "Name" { "name" } else { "" };
        json!({"name": name, "type": "string", "format": format, "description": description, "priority": priority})
    };
    let defs = json!([
        col(
            "Last Seen",
            0,
            "The time at which the most recent occurrence of this event was recorded."
        ),
        col(
            "Type",
            0,
            "Type of this event (Normal, Warning), new types could be added in the future"
        ),
        col(
            "Reason",
            0,
            "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."
        ),
        col("Object", 0, "The object that this event is about."),
        col(
            "Subobject",
            1,
            "The sub-object the event is about (the involved object's fieldPath)."
        ),
        col("Source", 1, "The component reporting this event."),
        col(
            "Message",
            0,
            "A human-readable description of the status of this operation."
        ),
        col("First Seen", 1, "The time at which the event was first recorded."),
        col("Count", 1, "The number of times this event has occurred."),
        col("Name", 1, "Name must be unique within a namespace."),
    ]);
    let rows: Vec<Value> = objects.iter().map(|o| row(o)).collect();
    let mut md = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        md["continue"] = json!(c);
    }
    Some(
        json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": md, "columnDefinitions": defs, "rows": rows}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonpath_table() {
        let o = json!({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}], "n": 3},
                       "spec": {"items": [{"x": 1}, {"x": 2}]}});
        let cases = [
            (".status.n", vec![json!(3)]),
            (
                ".status.conditions[?(@.type==\"Ready\")].status",
                vec![json!("True")],
            ),
            (".status.conditions[?(@.type=='A')].status", vec![json!("False")]),
            (".spec.items[*].x", vec![json!(1), json!(2)]),
            (".spec.items[-1].x", vec![json!(2)]),
            ("{.status.n}", vec![json!(3)]),
            (".missing.x", vec![]),
        ];
        for (p, want) in cases {
            let got: Vec<Value> = jsonpath(&o, p).into_iter().cloned().collect();
            assert_eq!(got, want, "{p}");
        }
    }
}
