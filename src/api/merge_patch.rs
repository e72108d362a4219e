//! JSON merge patches (RFC 7386) computed between two states of one object, so a controller writes
//! only what it changed and leaves every other field as stored (a user's `cpu: 4` stays a number; a
//! whole-object PUT of a typed copy would rewrite it as `"4"` and show up in `kubectl diff`).

use serde_json::{Map, Value};

/// The merge patch that turns `old` into `new`: objects recurse, keys only in `old` become null,
/// anything else (arrays included, as RFC 7386 has it) is `new`'s value. `{}` when they are equal.
pub fn merge_diff(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut out = Map::new();
            for (k, nv) in n {
                match o.get(k) {
                    Some(ov) if ov == nv => {}
                    Some(ov) => {
                        out.insert(k.clone(), merge_diff(ov, nv));
                    }
                    None => {
                        out.insert(k.clone(), nv.clone());
                    }
                }
            }
            for k in o.keys().filter(|k| !n.contains_key(*k)) {
                out.insert(k.clone(), Value::Null);
            }
            Value::Object(out)
        }
        _ => new.clone(),
    }
}

/// The merge patch from `before` (as read) to `after` (as a controller changed it), guarded by the
/// resourceVersion `before` was read at: the API server answers 409 if the object changed since, as it
/// would to a PUT. `None` when nothing changed.
pub fn guarded<T: serde::Serialize>(before: &T, after: &T) -> Result<Option<Value>, serde_json::Error> {
    let before = serde_json::to_value(before)?;
    let mut patch = merge_diff(&before, &serde_json::to_value(after)?);
    if patch.as_object().is_none_or(Map::is_empty) {
        return Ok(None);
    }
    let version = before
        .pointer("/metadata/resourceVersion")
        .cloned()
        .unwrap_or(Value::Null);
    patch["metadata"]["resourceVersion"] = version;
    Ok(Some(patch))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::merge_diff;

    #[test]
    fn only_what_changed_is_written() {
        let old = json!({"spec": {"suspend": true, "a": {"cpu": 4, "keep": [1, 2]}, "gone": 1}});
        let new = json!({"spec": {"suspend": false, "a": {"cpu": 4, "keep": [1, 2]}, "added": {"x": 1}}});
        assert_eq!(
            merge_diff(&old, &new),
            json!({"spec": {"suspend": false, "added": {"x": 1}, "gone": null}})
        );
        assert_eq!(merge_diff(&old, &old), json!({}));
        // Arrays are replaced whole.
        assert_eq!(
            merge_diff(&json!({"l": [1, 2]}), &json!({"l": [1]})),
            json!({"l": [1]})
        );
    }

    #[test]
    fn a_guarded_patch_carries_the_version_read() {
        let before = json!({"metadata": {"name": "a", "resourceVersion": "7"}, "spec": {"suspend": true}});
        let after = json!({"metadata": {"name": "a", "resourceVersion": "7"}, "spec": {"suspend": false}});
        assert_eq!(
            super::guarded(&before, &after).unwrap(),
            Some(json!({"metadata": {"resourceVersion": "7"}, "spec": {"suspend": false}}))
        );
        assert_eq!(super::guarded(&before, &before).unwrap(), None);
    }
}
