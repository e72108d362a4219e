//! A Workload status write as a JSON merge patch (RFC 7386) of what changed, instead of a PUT of the
//! whole object: the request carries the changed status fields only (not the spec with its pod
//! templates), and the server parses and merges that much. The patch carries the resourceVersion the
//! decision read as a precondition (on the real API server as on the embedded one, a merge patch that
//! writes `metadata.resourceVersion` is refused with 409 Conflict when the object moved on), so a
//! write conflicts exactly where the PUT it replaces did.

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Map, Value};

use crate::api::kueue::{Workload, WorkloadStatus};

/// The merge patch that turns `old` into `new`: fields that differ are written, fields gone are
/// written as `null`, objects are compared field by field and everything else (arrays, scalars)
/// is replaced whole, as a merge patch applies it. A `null` field counts as absent. `None` when the
/// two are equal.
pub(super) fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = Map::new();
            for (k, nv) in n {
                if nv.is_null() {
                    continue;
                }
                match o.get(k).filter(|v| !v.is_null()) {
                    Some(ov) => {
                        if let Some(d) = merge_diff(ov, nv) {
                            patch.insert(k.clone(), d);
                        }
                    }
                    None => {
                        patch.insert(k.clone(), without_nulls(nv));
                    }
                }
            }
            for (k, ov) in o {
                if !ov.is_null() && n.get(k).is_none_or(Value::is_null) {
                    patch.insert(k.clone(), Value::Null);
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        _ if old == new => None,
        _ => Some(without_nulls(new)),
    }
}

/// `v` with its objects' `null` fields left out: in a merge patch a `null` deletes, and a new value
/// is written as it is meant to read.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k.clone(), without_nulls(x)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The body of the status write that turns `wl`'s status into `status`, with `wl`'s resourceVersion
/// as the precondition.
pub(super) fn body(wl: &Workload, status: &WorkloadStatus) -> Value {
    let old = wl
        .status
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or(Value::Null);
    let new = serde_json::to_value(status).unwrap_or(Value::Null);
    let diff = match (&old, merge_diff(&old, &new)) {
        // No status yet: the whole new one.
        (Value::Null, _) => without_nulls(&new),
        (_, Some(d)) => d,
        // Nothing changed: the write still checks the precondition, and changes nothing.
        (_, None) => Value::Object(Map::new()),
    };
    serde_json::json!({
        "metadata": {"resourceVersion": wl.resource_version()},
        "status": diff,
    })
}

/// Writes `status` over `wl`'s as a merge patch of what changed, conditional on `wl`'s
/// resourceVersion; returns the object as written.
pub(super) async fn write(
    api: &Api<Workload>,
    wl: &Workload,
    status: &WorkloadStatus,
) -> Result<Workload, kube::Error> {
    let body = body(wl, status);
    api.patch_status(&wl.name_any(), &PatchParams::default(), &Patch::Merge(&body))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 7386's merge, to check that applying a diff gives the new value.
    fn apply(target: &mut Value, patch: &Value) {
        let Value::Object(p) = patch else {
            *target = patch.clone();
            return;
        };
        if !target.is_object() {
            *target = Value::Object(Map::new());
        }
        let t = target.as_object_mut().expect("object");
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                apply(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }

    #[test]
    fn the_diff_applied_gives_the_new_status() {
        let cases = [
            (json!({}), json!({"a": 1})),
            (
                json!({"a": 1, "b": {"c": 1, "d": 2}}),
                json!({"a": 1, "b": {"c": 1}}),
            ),
            (json!({"a": [1, 2], "b": "x"}), json!({"a": [1, 3], "b": "x"})),
            (
                json!({"a": {"b": {"c": 1}}}),
                json!({"a": {"b": {"c": 2, "d": null}}}),
            ),
            (json!({"a": 1, "n": null}), json!({"a": 2})),
            (json!({"a": {"x": 1}}), json!({"a": 5})),
        ];
        for (old, new) in cases {
            let mut doc = old.clone();
            if let Some(d) = merge_diff(&old, &new) {
                apply(&mut doc, &d);
            }
            // A null field reads as an absent one.
            assert_eq!(without_nulls(&doc), without_nulls(&new), "{old} -> {new}");
        }
    }

    #[test]
    fn only_what_changed_is_written() {
        let old = json!({"conditions": [{"type": "QuotaReserved", "status": "False"}], "admission": null,
                         "requeueState": {"count": 1, "requeueAt": "t"}});
        let new = json!({"conditions": [{"type": "QuotaReserved", "status": "True"}],
                         "admission": {"clusterQueue": "cq"}, "requeueState": {"count": 1}});
        assert_eq!(
            merge_diff(&old, &new),
            Some(
                json!({"conditions": [{"type": "QuotaReserved", "status": "True"}],
                        "admission": {"clusterQueue": "cq"}, "requeueState": {"requeueAt": null}})
            )
        );
        assert_eq!(merge_diff(&old, &old), None);
    }

    #[test]
    fn the_body_carries_the_version_read() {
        let mut wl = Workload::new("w", Default::default());
        wl.metadata.resource_version = Some("7".into());
        let b = body(&wl, &WorkloadStatus::default());
        assert_eq!(b["metadata"]["resourceVersion"], json!("7"));
        assert!(b["status"].is_object());
        assert!(b.get("spec").is_none());
    }
}
