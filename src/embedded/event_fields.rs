//! The Event resource's two versions as data, with no other part of the server below it: the group,
//! the fields the two versions name differently and the conversion of a stored Event (core names) to
//! either version, and the `source` selectable field. The registry, selectors, the store and tables
//! read these; `events.rs` (request conversion, TTL) builds on them.

use serde_json::{Map, Value, json};

pub const EVENTS_GROUP: &str = "events.k8s.io";

/// (core v1 name, events.k8s.io/v1 name) of every field the two versions name differently.
pub(super) const RENAMES: [(&str, &str); 7] = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

/// Which version of the Event resource `info` serves, if it is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Core,
    EventsV1,
}

pub fn version_of(group: &str, plural: &str) -> Option<Version> {
    match (group, plural) {
        ("", "events") => Some(Version::Core),
        (EVENTS_GROUP, "events") => Some(Version::EventsV1),
        _ => None,
    }
}

/// A top-level key of `to`'s version: the other version's name renamed, a name only the other
/// version has dropped (it is no field of this version, as an unknown field is dropped), the rest kept.
pub(super) fn rename_key(key: &str, to: Version) -> Option<&str> {
    for (core, ev) in RENAMES {
        let (from, into) = match to {
            Version::Core => (ev, core),
            Version::EventsV1 => (core, ev),
        };
        if key == from {
            return Some(into);
        }
        if key == into {
            return None;
        }
    }
    Some(key)
}

/// An object in the other version's names, in `to`'s.
pub(super) fn renamed(obj: Map<String, Value>, to: Version) -> Map<String, Value> {
    obj.into_iter()
        .filter_map(|(k, v)| rename_key(&k, to).map(|nk| (nk.to_string(), v)))
        .collect()
}

pub(super) fn api_version(v: Version) -> &'static str {
    match v {
        Version::Core => "v1",
        Version::EventsV1 => "events.k8s.io/v1",
    }
}

/// A stored Event (core names) as `info`'s version serves it; `None` when `info` is not an Event.
pub fn to_version(group: &str, plural: &str, stored: &Value) -> Option<Value> {
    let v = version_of(group, plural)?;
    let Value::Object(m) = stored else {
        return Some(stored.clone());
    };
    let mut out = if v == Version::Core {
        strip_foreign(m.clone(), Version::Core)
    } else {
        renamed(m.clone(), Version::EventsV1)
    };
    out.insert("apiVersion".into(), json!(api_version(v)));
    out.insert("kind".into(), json!("Event"));
    go_zero_values(&mut out, v);
    Some(Value::Object(out))
}

/// The fields Go's `encoding/json` writes even when unset, as each version's Go type has them: its
/// times (`metav1.Time` and `MicroTime` write `null`), its struct-typed references and sources (`{}`:
/// `omitempty` leaves a struct in) and, in core v1, the reporter's two strings (no `omitempty`).
fn go_zero_values(out: &mut Map<String, Value>, v: Version) {
    let zeros: &[(&str, Value)] = match v {
        Version::Core => &[
            ("involvedObject", json!({})),
            ("source", json!({})),
            ("firstTimestamp", Value::Null),
            ("lastTimestamp", Value::Null),
            ("eventTime", Value::Null),
            ("reportingComponent", json!("")),
            ("reportingInstance", json!("")),
        ],
        Version::EventsV1 => &[
            ("eventTime", Value::Null),
            ("regarding", json!({})),
            ("deprecatedSource", json!({})),
            ("deprecatedFirstTimestamp", Value::Null),
            ("deprecatedLastTimestamp", Value::Null),
        ],
    };
    for (field, zero) in zeros {
        out.entry(*field).or_insert_with(|| zero.clone());
    }
}

/// Drops the other version's names from an object already in `v`'s names.
pub(super) fn strip_foreign(mut m: Map<String, Value>, v: Version) -> Map<String, Value> {
    for (core, ev) in RENAMES {
        m.remove(if v == Version::Core { ev } else { core });
    }
    m
}

/// The `source` selectable field of a stored Event: `source.component`, else the reporting
/// controller (`EventToSelectableFields`).
pub fn source_field(obj: &Value) -> String {
    let component = obj
        .pointer("/source/component")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !component.is_empty() {
        return component.to_string();
    }
    obj.get("reportingComponent")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

pub(super) fn text<'a>(obj: &'a Value, path: &str) -> &'a str {
    obj.pointer(path).and_then(Value::as_str).unwrap_or("")
}
