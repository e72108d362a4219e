//! The four PATCH flavours. Where they differ from the real API server:
//!
//! - **json-patch** (RFC 6902) and **merge-patch** (RFC 7386) are exact (json-patch crate).
//! - **strategic-merge-patch** (built-in kinds only; CRDs get 415 as on a real server): maps merge like
//!   merge-patch; lists with a known merge key (`name` for containers/env/volumes/..., `containerPort` or
//!   `port` for ports, `mountPath`, `type` for conditions, `uid` for ownerReferences) merge element-wise
//!   and honour `$patch: delete`; `finalizers` merge as a set; `$patch: replace` replaces a map;
//!   `$deleteFromPrimitiveList/<f>` removes values; `$setElementOrder/*` and `$retainKeys` are ignored.
//!   Other lists are replaced. The merge keys come from a small table, not from the OpenAPI schema.
//! - **apply** (server-side apply) is approximated without field ownership: the applied config is
//!   deep-merged (maps merge, lists are replaced), and fields that the same field manager applied last
//!   time but left out now are removed. There are no conflicts between managers (`force` is ignored)
//!   and no `managedFields` are returned.

use serde_json::{Map, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PatchKind::Json => "json",
            PatchKind::Merge => "merge",
            PatchKind::Strategic => "strategic merge",
            PatchKind::Apply => "apply",
        }
    }

    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" | "application/apply-patch+cbor" => {
                Some(PatchKind::Apply)
            }
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    #[error("the body of a json patch must be an array of operations: {0}")]
    BadJsonPatch(String),
    #[error("{0}")]
    JsonPatchFailed(String),
}

/// Applies an RFC 6902 patch all or nothing. Applied to a copy that replaces `doc` only on success:
/// `json_patch::patch` undoes a failed patch in place, and its undo panics on some sequences a
/// client can send (a `move` followed by a failing operation; found by `fuzz.rs`).
pub fn json_patch(doc: &mut Value, body: &Value) -> Result<(), PatchError> {
    let p: json_patch::Patch =
        serde_json::from_value(body.clone()).map_err(|e| PatchError::BadJsonPatch(e.to_string()))?;
    let mut patched = doc.clone();
    json_patch::patch_unsafe(&mut patched, &p.0).map_err(|e| PatchError::JsonPatchFailed(e.to_string()))?;
    *doc = patched;
    Ok(())
}

pub fn merge_patch(doc: &mut Value, body: &Value) {
    json_patch::merge(doc, body);
}

fn merge_key(field: &str, sample: &Map<String, Value>) -> Option<&'static str> {
    match field {
        "containers" | "initContainers" | "ephemeralContainers" | "volumes" | "env" | "imagePullSecrets" => Some("name"),
        "ports" if sample.contains_key("containerPort") => Some("containerPort"),
        "ports" => Some("port"),
        "volumeMounts" => Some("mountPath"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        _ => None,
    }
}

/// Strategic merge patch, approximated as documented at the top of this module.
pub fn strategic_merge(doc: &mut Value, patch: &Value) {
    let Some(p) = patch.as_object() else {
        *doc = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut clean = p.clone();
        clean.remove("$patch");
        *doc = Value::Object(clean);
        return;
    }
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let Some(d) = doc.as_object_mut() else { return };
    for (k, v) in p {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(remove)) = (d.get_mut(field), v.as_array()) {
                list.retain(|x| !remove.contains(x));
            }
            continue;
        }
        match v {
            Value::Null => {
                d.remove(k);
            }
            Value::Object(_) => strategic_merge(d.entry(k.clone()).or_insert(Value::Null), v),
            Value::Array(items) => {
                let merged = merge_list(k, d.get(k), items);
                d.insert(k.clone(), merged);
            }
            _ => {
                d.insert(k.clone(), v.clone());
            }
        }
    }
}

fn merge_list(field: &str, current: Option<&Value>, items: &[Value]) -> Value {
    let cur = current.and_then(Value::as_array).cloned().unwrap_or_default();
    if field == "finalizers" {
        let mut out = cur;
        for i in items {
            if !out.contains(i) {
                out.push(i.clone());
            }
        }
        return Value::Array(out);
    }
    let key = items.iter().find_map(|i| i.as_object()).and_then(|o| merge_key(field, o));
    let Some(key) = key else { return Value::Array(items.to_vec()) };
    let mut out = cur;
    for item in items {
        let Some(kv) = item.get(key) else {
            out.push(item.clone());
            continue;
        };
        let pos = out.iter().position(|e| e.get(key) == Some(kv));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                out.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => strategic_merge(&mut out[i], item),
            (None, false) => {
                let mut fresh = Value::Null;
                strategic_merge(&mut fresh, item);
                out.push(fresh);
            }
        }
    }
    Value::Array(out)
}

/// Server-side apply approximation: deep merge of the applied config (lists replaced), then removal
/// of fields `previous` (this manager's last applied config) had and `applied` no longer has.
pub fn apply(doc: &mut Value, applied: &Value, previous: Option<&Value>) {
    if let Some(prev) = previous {
        prune(doc, prev, applied);
    }
    apply_merge(doc, applied);
}

fn apply_merge(doc: &mut Value, applied: &Value) {
    match (doc.as_object_mut(), applied.as_object()) {
        (Some(d), Some(a)) => {
            for (k, v) in a {
                if v.is_null() {
                    d.remove(k);
                } else if v.is_object() && d.get(k).is_some_and(Value::is_object) {
                    if let Some(slot) = d.get_mut(k) {
                        apply_merge(slot, v);
                    }
                } else {
                    d.insert(k.clone(), v.clone());
                }
            }
        }
        _ => *doc = applied.clone(),
    }
}

fn prune(doc: &mut Value, prev: &Value, new: &Value) {
    let (Some(d), Some(p)) = (doc.as_object_mut(), prev.as_object()) else { return };
    for (k, pv) in p {
        match new.get(k) {
            None => {
                d.remove(k);
            }
            Some(nv) => {
                if let Some(slot) = d.get_mut(k) {
                    prune(slot, pv, nv);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_failed_json_patch_leaves_the_object_as_it_was_without_panicking() {
        // Found by fuzz.rs: json_patch::patch's in-place undo panics on this sequence.
        let before = json!({"metadata": {"labels": {"app": "web"}}});
        let mut doc = before.clone();
        let ops = json!([
            {"op": "move", "from": "/metadata/labels/app", "path": ""},
            {"op": "add", "path": "/metadata/labels/app", "value": null}
        ]);
        assert!(matches!(json_patch(&mut doc, &ops), Err(PatchError::JsonPatchFailed(_))));
        assert_eq!(doc, before);
    }

    #[test]
    fn strategic_merge_table() {
        let cases = [
            (json!({"data": {"a": "1", "b": "2"}}), json!({"data": {"b": null, "c": "3"}}), json!({"data": {"a": "1", "c": "3"}})),
            (
                json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}),
                json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}]}}),
                json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "z"}, {"name": "c", "image": "w"}]}}),
            ),
            (
                json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
                json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}], "$setElementOrder/containers": [{"name": "b"}]}}),
                json!({"spec": {"containers": [{"name": "b"}]}}),
            ),
            (json!({"metadata": {"finalizers": ["a"]}}), json!({"metadata": {"finalizers": ["b", "a"]}}), json!({"metadata": {"finalizers": ["a", "b"]}})),
            (json!({"spec": {"args": ["a"]}}), json!({"spec": {"args": ["b"]}}), json!({"spec": {"args": ["b"]}})),
            (json!({"spec": {"x": {"a": 1}}}), json!({"spec": {"x": {"$patch": "replace", "b": 2}}}), json!({"spec": {"x": {"b": 2}}})),
            (
                json!({"metadata": {"finalizers": ["a", "b"]}}),
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
                json!({"metadata": {"finalizers": ["b"]}}),
            ),
        ];
        for (doc, patch, want) in cases {
            let mut d = doc.clone();
            strategic_merge(&mut d, &patch);
            assert_eq!(d, want, "{doc} + {patch}");
        }
    }

    #[test]
    fn apply_prunes_fields_the_manager_dropped() {
        let mut doc = json!({"status": {"a": 1, "b": 2, "other": 9}});
        apply(&mut doc, &json!({"status": {"a": 3}}), Some(&json!({"status": {"a": 1, "b": 2}})));
        assert_eq!(doc, json!({"status": {"a": 3, "other": 9}}));
    }

    #[test]
    fn json_patch_test_failure_is_an_error() {
        let mut doc = json!({"metadata": {}});
        let body = json!([{"op": "test", "path": "/metadata/finalizers", "value": ["x"]}]);
        assert!(json_patch(&mut doc, &body).is_err());
        assert!(json_patch(&mut doc, &json!({"op": "add"})).is_err());
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![Just(Value::Null), any::<bool>().prop_map(Value::from), "[a-c$/]{0,3}".prop_map(Value::from)];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::btree_map("[a-c$/]{1,2}|containers|name|finalizers|\\$patch", inner, 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        // Patch bodies come from users: no input may panic the server.
        #[test]
        fn patches_never_panic(doc in json_value(), body in json_value()) {
            let mut d = doc.clone();
            strategic_merge(&mut d, &body);
            let mut d = doc.clone();
            apply(&mut d, &body, Some(&doc));
            let mut d = doc;
            let _ = json_patch(&mut d, &body);
        }
    }
}
