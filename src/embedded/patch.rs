//! The four PATCH flavours. Where they differ from the real API server:
//!
//! - **json-patch** (RFC 6902) and **merge-patch** (RFC 7386) are exact (json-patch crate).
//! - **strategic-merge-patch** (built-in kinds only; CRDs get 415 as on a real server): maps merge like
//!   merge-patch; lists with a known merge key (`name` for containers/env/volumes/..., `containerPort` or
//!   `port` for ports, `mountPath`, `type` for conditions, `uid` for ownerReferences) merge element-wise
//!   and honour `$patch: delete`; `finalizers` merge as a set; `$patch: replace` replaces a map;
//!   `$deleteFromPrimitiveList/<f>` removes values; `$setElementOrder/*` and `$retainKeys` are ignored.
//!   Other lists are replaced. The merge keys come from a small table, not from the OpenAPI schema.
//!   A `$patch` other than `replace`, `merge` or `delete` is refused with kube-apiserver's 500
//!   (`unknown patch type: X in map: map[...]`).
//! - **apply** (server-side apply) is `managed_fields.rs`: field ownership, conflicts, pruning.

use serde_json::{Map, Value};

use super::limits::json_len;
use super::limits::{MAX_DEPTH, MAX_JSON_PATCH_COPY_BYTES, MAX_JSON_PATCH_OPS, TOO_DEEP, depth_within};

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
            "application/apply-patch+yaml"
            | "application/apply-patch+json"
            | "application/apply-patch+cbor" => Some(PatchKind::Apply),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// kube-apiserver decodes the body into its handlers' `[]jsonPatchOp` first; Go's wording.
    #[error("error decoding patch: json: cannot unmarshal {0}")]
    BadJsonPatch(String),
    /// An operation the library cannot apply as written (an unknown `op`, a missing `path`):
    /// kube-apiserver answers with its generic 422, whose message names no cause.
    #[error("the server rejected our request due to an error in our request")]
    UnusableOperation,
    #[error("{0}")]
    JsonPatchFailed(String),
    /// kube-apiserver's wording (its 413 prefixes "Request entity too large: ").
    #[error("The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPS}, got {0}")]
    TooManyOperations(usize),
    /// The wording of the json-patch library kube-apiserver uses (`AccumulatedCopySizeError`).
    #[error(
        "Unable to complete the copy, the accumulated size increase of copy is {0}, exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}"
    )]
    CopyTooLarge(usize),
    #[error("operation '/{0}' would nest the object deeper than {MAX_DEPTH} levels: {TOO_DEEP}")]
    TooDeepAt(usize),
    #[error("the patched object nests deeper than {MAX_DEPTH} levels: {TOO_DEEP}")]
    TooDeep,
    /// kube-apiserver's wording, Go's `%v` of the map holding the directive.
    #[error("unknown patch type: {0} in map: {1}")]
    UnknownDirective(String, String),
}

impl PatchError {
    /// The status the real server answers with: 413 for too many operations, 400 for a body that is
    /// no patch, 422 for a patch that does not apply (its copy limit included).
    pub fn code(&self) -> u16 {
        match self {
            PatchError::TooManyOperations(_) => 413,
            PatchError::BadJsonPatch(_) => 400,
            PatchError::UnknownDirective(..) => 500,
            _ => 422,
        }
    }
}

/// Applies an RFC 6902 patch all or nothing, under kube-apiserver's limits: at most
/// [`MAX_JSON_PATCH_OPS`] operations, at most [`MAX_JSON_PATCH_COPY_BYTES`] added by `copy`
/// operations (counted before each copy is made, so a patch that doubles the object per operation
/// stops before it has grown), and no operation may nest the object deeper than [`MAX_DEPTH`]
/// (checked before it is applied). Applied to a copy that replaces `doc` only on success:
/// `json_patch::patch` undoes a failed patch in place, and its undo panics on some sequences a
/// client can send (a `move` followed by a failing operation; found by `fuzz.rs`).
pub fn json_patch(doc: &mut Value, body: &Value) -> Result<(), PatchError> {
    if let Some(n) = body.as_array().map(Vec::len).filter(|n| *n > MAX_JSON_PATCH_OPS) {
        return Err(PatchError::TooManyOperations(n));
    }
    decodes_as_ops(body)?;
    // Go decodes `null` as an empty list of operations.
    if body.is_null() {
        return Ok(());
    }
    let p: json_patch::Patch =
        serde_json::from_value(body.clone()).map_err(|_| PatchError::UnusableOperation)?;
    let mut patched = doc.clone();
    // An upper bound of the document's depth, kept as operations apply; exact depths are computed
    // only where the bound says an operation might pass the limit.
    let mut depth = depth_within(&patched, MAX_DEPTH).ok_or(PatchError::TooDeep)?;
    let mut copied = 0usize;
    for (i, op) in p.0.iter().enumerate() {
        use json_patch::PatchOperation as O;
        let placed = match op {
            O::Add(o) => Some((tokens(o.path.as_str()), depth_within(&o.value, MAX_DEPTH))),
            O::Replace(o) => Some((tokens(o.path.as_str()), depth_within(&o.value, MAX_DEPTH))),
            // A missing `from` fails below, with the library's message.
            O::Copy(o) => match patched.pointer(o.from.as_str()) {
                None => None,
                Some(from) => {
                    copied = copied.saturating_add(json_len(from));
                    if copied > MAX_JSON_PATCH_COPY_BYTES {
                        return Err(PatchError::CopyTooLarge(copied));
                    }
                    Some((tokens(o.path.as_str()), depth_within(from, MAX_DEPTH)))
                }
            },
            O::Move(o) => {
                let (to, from) = (tokens(o.path.as_str()), tokens(o.from.as_str()));
                if to + depth.saturating_sub(from) <= MAX_DEPTH {
                    Some((to, Some(depth.saturating_sub(from))))
                } else {
                    let value = patched.pointer(o.from.as_str());
                    Some((to, value.map_or(Some(0), |v| depth_within(v, MAX_DEPTH))))
                }
            }
            O::Remove(_) | O::Test(_) => None,
        };
        if let Some((at, value_depth)) = placed {
            match value_depth.map(|d| at + d) {
                Some(d) if d <= MAX_DEPTH => depth = depth.max(d),
                _ => return Err(PatchError::TooDeepAt(i)),
            }
        }
        apply_one(&mut patched, op, i)?;
    }
    *doc = patched;
    Ok(())
}

/// The body decodes as Go's `[]jsonPatchOp` (`op`, `path` and `from` strings, any `value`), or fails
/// with Go's decoding error naming the first value of the wrong type.
fn decodes_as_ops(body: &Value) -> Result<(), PatchError> {
    let go = |v: &Value| match v {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::String(_) => "string",
        Value::Null => "null",
    };
    let ops = match body {
        Value::Array(ops) => ops,
        Value::Null => return Ok(()),
        v => {
            return Err(PatchError::BadJsonPatch(format!(
                "{} into Go value of type []handlers.jsonPatchOp",
                go(v)
            )));
        }
    };
    for op in ops {
        match op {
            Value::Object(m) => {
                for f in ["op", "path", "from"] {
                    if let Some(v) = m.get(f).filter(|v| !v.is_string() && !v.is_null()) {
                        return Err(PatchError::BadJsonPatch(format!(
                            "{} into Go struct field jsonPatchOp.{f} of type string",
                            go(v)
                        )));
                    }
                }
            }
            Value::Null => {}
            v => {
                return Err(PatchError::BadJsonPatch(format!(
                    "{} into Go value of type handlers.jsonPatchOp",
                    go(v)
                )));
            }
        }
    }
    Ok(())
}

/// One operation, its error naming its index in the whole patch as the library would. A `replace` of a
/// missing key of an existing map adds it, as kube-apiserver's json-patch library does.
fn apply_one(doc: &mut Value, op: &json_patch::PatchOperation, index: usize) -> Result<(), PatchError> {
    let added;
    let mut op = op;
    if let json_patch::PatchOperation::Replace(r) = op
        && doc.pointer(r.path.as_str()).is_none()
        && let Some((parent, _)) = r.path.as_str().rsplit_once('/')
        && doc.pointer(parent).is_some_and(Value::is_object)
    {
        added = json_patch::PatchOperation::Add(json_patch::AddOperation {
            path: r.path.clone(),
            value: r.value.clone(),
        });
        op = &added;
    }
    json_patch::patch_unsafe(doc, std::slice::from_ref(op)).map_err(|e| {
        PatchError::JsonPatchFailed(format!(
            "operation '/{index}' failed at path '{}': {}",
            e.path, e.kind
        ))
    })
}

/// How many reference tokens a JSON pointer has: the containers a value placed there sits in.
fn tokens(pointer: &str) -> usize {
    pointer.matches('/').count()
}

pub fn merge_patch(doc: &mut Value, body: &Value) {
    json_patch::merge(doc, body);
}

fn merge_key(field: &str, sample: &Map<String, Value>) -> Option<&'static str> {
    match field {
        "containers" | "initContainers" | "ephemeralContainers" | "volumes" | "env" | "imagePullSecrets" => {
            Some("name")
        }
        "ports" if sample.contains_key("containerPort") => Some("containerPort"),
        "ports" => Some("port"),
        "volumeMounts" => Some("mountPath"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        _ => None,
    }
}

/// Go's `%v` of a decoded JSON value: `map[a:1 b:map[c:x]]`, `[a b]`, `<nil>` (keys sorted).
fn go_format(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_format).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", go_format(&m[*k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
        other => other.to_string(),
    }
}

/// Refuses a `$patch` directive kube-apiserver does not know, anywhere in the patch.
fn check_directives(patch: &Value) -> Result<(), PatchError> {
    match patch {
        Value::Object(m) => {
            if let Some(d) = m.get("$patch") {
                let known = matches!(d.as_str(), Some("replace" | "merge" | "delete"));
                if !known {
                    return Err(PatchError::UnknownDirective(go_format(d), go_format(patch)));
                }
            }
            m.values().try_for_each(check_directives)
        }
        Value::Array(items) => items.iter().try_for_each(check_directives),
        _ => Ok(()),
    }
}

/// Strategic merge patch, approximated as documented at the top of this module.
pub fn strategic_merge(doc: &mut Value, patch: &Value) -> Result<(), PatchError> {
    check_directives(patch)?;
    merge_strategic(doc, patch);
    Ok(())
}

fn merge_strategic(doc: &mut Value, patch: &Value) {
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
            Value::Object(o) if o.get("$patch").and_then(Value::as_str) == Some("delete") => {
                d.remove(k);
            }
            Value::Object(_) => merge_strategic(d.entry(k.clone()).or_insert(Value::Null), v),
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
    let key = items
        .iter()
        .find_map(|i| i.as_object())
        .and_then(|o| merge_key(field, o));
    let Some(key) = key else {
        return Value::Array(items.to_vec());
    };
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
            (Some(i), false) => merge_strategic(&mut out[i], item),
            (None, false) => {
                let mut fresh = Value::Null;
                merge_strategic(&mut fresh, item);
                out.push(fresh);
            }
        }
    }
    Value::Array(out)
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
        assert!(matches!(
            json_patch(&mut doc, &ops),
            Err(PatchError::JsonPatchFailed(_))
        ));
        assert_eq!(doc, before);
    }

    /// The reported abort: `copy` ops nesting an object into itself (100 levels copied 8 times would be
    /// about 16,800 levels). Refused at the first op that would pass the limit, object unchanged.
    #[test]
    fn a_copy_nesting_an_object_into_itself_is_refused_before_it_applies() {
        let before = json!({"metadata": {"name": "a"}, "data": {"x": crate::embedded::limits::nested(100)}});
        let mut doc = before.clone();
        let mut into = String::from("/data/x");
        for _ in 0..50 {
            into.push_str("/a/0");
        }
        let ops: Vec<Value> = (0..8)
            .map(|i| json!({"op": "copy", "from": "/data", "path": format!("{into}/c{i}")}))
            .collect();
        let err = json_patch(&mut doc, &Value::Array(ops)).unwrap_err();
        assert_eq!(err, PatchError::TooDeepAt(0));
        assert!(err.to_string().contains("exceeded max depth"), "{err}");
        assert_eq!(err.code(), 422);
        assert_eq!(doc, before);
    }

    /// The reported 700 MiB growth: 19 copies of the annotations map into itself, each doubling it.
    /// Refused once the copies add up to more than 3 MiB, before the next copy is made.
    #[test]
    fn copies_doubling_the_object_stop_at_the_copy_limit() {
        let before = json!({"metadata": {"name": "a", "annotations": {"seed": "x".repeat(2000)}}});
        let mut doc = before.clone();
        let ops: Vec<Value> =
            (0..19).map(|i| json!({"op": "copy", "from": "/metadata/annotations", "path": format!("/metadata/annotations/k{i}")})).collect();
        let err = json_patch(&mut doc, &Value::Array(ops)).unwrap_err();
        let PatchError::CopyTooLarge(n) = err else {
            panic!("{err:?}")
        };
        // 2 KB doubling: the 11th copy passes 3 MiB (2 KiB * 2^11 = 4 MiB accumulated at most).
        assert!(
            n > MAX_JSON_PATCH_COPY_BYTES && n < 2 * MAX_JSON_PATCH_COPY_BYTES,
            "{n}"
        );
        assert!(
            err.to_string()
                .starts_with("Unable to complete the copy, the accumulated size increase of copy is"),
            "{err}"
        );
        assert_eq!(doc, before);
        // Copies that stay under the limit apply.
        let small: Vec<Value> = (0..3)
            .map(|i| json!({"op": "copy", "from": "/metadata/name", "path": format!("/metadata/n{i}")}))
            .collect();
        json_patch(&mut doc, &Value::Array(small)).unwrap();
        assert_eq!(doc["metadata"]["n2"], "a");
    }

    #[test]
    fn more_than_ten_thousand_operations_are_refused_with_the_count() {
        let mut doc = json!({"metadata": {}});
        let op = json!({"op": "test", "path": "/metadata", "value": {}});
        let err = json_patch(&mut doc, &Value::Array(vec![op.clone(); MAX_JSON_PATCH_OPS + 1])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "The allowed maximum operations in a JSON patch is 10000, got 10001"
        );
        assert_eq!(err.code(), 413);
        json_patch(&mut doc, &Value::Array(vec![op; MAX_JSON_PATCH_OPS])).unwrap();
    }

    #[test]
    fn adds_and_moves_are_held_to_the_depth_limit_and_errors_name_the_operation() {
        let mut doc = json!({"a": crate::embedded::limits::nested(120), "b": {}});
        let deep_add = json!([{"op": "add", "path": "/b/c", "value": crate::embedded::limits::nested(126)}]);
        assert_eq!(json_patch(&mut doc, &deep_add), Err(PatchError::TooDeepAt(0)));
        let mut path = String::from("/b");
        for i in 0..10 {
            let step = json!([{"op": "add", "path": format!("{path}/x{i}"), "value": {}}]);
            json_patch(&mut doc, &step).unwrap();
            path = format!("{path}/x{i}");
        }
        let deep_move = json!([{"op": "test", "path": "/b", "value": doc["b"].clone()}, {"op": "move", "from": "/a", "path": format!("{path}/m")}]);
        assert_eq!(json_patch(&mut doc, &deep_move), Err(PatchError::TooDeepAt(1)));
        let missing = json!([{"op": "test", "path": "/b", "value": doc["b"].clone()}, {"op": "copy", "from": "/nope", "path": "/c"}]);
        let err = json_patch(&mut doc, &missing).unwrap_err().to_string();
        assert!(err.starts_with("operation '/1' failed"), "{err}");
    }

    #[test]
    fn strategic_merge_table() {
        let cases = [
            (
                json!({"data": {"a": "1", "b": "2"}}),
                json!({"data": {"b": null, "c": "3"}}),
                json!({"data": {"a": "1", "c": "3"}}),
            ),
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
            (
                json!({"metadata": {"finalizers": ["a"]}}),
                json!({"metadata": {"finalizers": ["b", "a"]}}),
                json!({"metadata": {"finalizers": ["a", "b"]}}),
            ),
            (
                json!({"spec": {"args": ["a"]}}),
                json!({"spec": {"args": ["b"]}}),
                json!({"spec": {"args": ["b"]}}),
            ),
            (
                json!({"spec": {"x": {"a": 1}}}),
                json!({"spec": {"x": {"$patch": "replace", "b": 2}}}),
                json!({"spec": {"x": {"b": 2}}}),
            ),
            (
                json!({"metadata": {"finalizers": ["a", "b"]}}),
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
                json!({"metadata": {"finalizers": ["b"]}}),
            ),
        ];
        for (doc, patch, want) in cases {
            let mut d = doc.clone();
            strategic_merge(&mut d, &patch).unwrap();
            assert_eq!(d, want, "{doc} + {patch}");
        }
    }

    /// kube-apiserver v1.36.3, measured: `{"$patch":"bogus","data":{"x":"1"}}` on a ConfigMap is a 500
    /// with this message; `replace` of a missing key of an existing map adds it (200), one under a
    /// missing map still fails.
    #[test]
    fn unknown_directives_are_refused_and_replace_adds_a_missing_key() {
        let mut doc = json!({"data": {"a": "1"}});
        let err = strategic_merge(&mut doc, &json!({"$patch": "bogus", "data": {"x": "1"}})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown patch type: bogus in map: map[$patch:bogus data:map[x:1]]"
        );
        assert_eq!(err.code(), 500);
        let err = strategic_merge(&mut doc, &json!({"data": {"$patch": "bogus"}})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown patch type: bogus in map: map[$patch:bogus]"
        );
        assert_eq!(doc, json!({"data": {"a": "1"}}));
        strategic_merge(&mut doc, &json!({"data": {"$patch": "delete"}})).unwrap();
        assert_eq!(doc, json!({}));
        let mut doc = json!({"data": {"a": "1"}});
        json_patch(
            &mut doc,
            &json!([{"op": "replace", "path": "/data/nokey", "value": "v"}]),
        )
        .unwrap();
        assert_eq!(doc, json!({"data": {"a": "1", "nokey": "v"}}));
        assert!(
            json_patch(
                &mut doc,
                &json!([{"op": "replace", "path": "/nothere/nokey", "value": "v"}])
            )
            .is_err()
        );
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
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            "[a-c$/]{0,3}".prop_map(Value::from)
        ];
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
            let _ = strategic_merge(&mut d, &body);
            let mut d = doc;
            let _ = json_patch(&mut d, &body);
        }
    }
}
