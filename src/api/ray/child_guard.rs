//! Edits that would take a RayService's child RayCluster out from under its parent's quota gate are
//! refused with a message that says why (Kueue's proof of concept had no such guard: its limitation 2).
//! The gate itself never depends on these fields (the RayCluster controller caps pods by the admitted
//! workload slice whatever they say); this is the layer that explains the refusal to the user.
//!
//! Refused on a child (a RayCluster whose stored controller owner is a RayService): removing or changing
//! that owner reference, changing or removing its `ray.io/originated-from-*` labels or its
//! `kueue.x-k8s.io/queue-name` label, changing `spec.managedBy`, and, for a queue-managed child, clearing
//! `spec.suspend` before its stored status says an admitted slice covers it (`QuotaGated=False`). That
//! status is written through the status subresource by the RayCluster controller: users who may edit a
//! RayCluster but not its status (the usual RBAC) cannot forge it, so only quotagate releases a held child.

use serde_json::Value;

use super::constants as c;
use crate::api::kueue::constants::label::QUEUE_NAME;
use crate::api::validation::{FieldError, Path};

fn controller_owner(obj: &Value) -> Option<&Value> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| o.get("controller") == Some(&Value::Bool(true)))
}

/// The object's controller owner is a RayService (`ray.io/v1`).
pub fn owned_by_service(obj: &Value) -> bool {
    controller_owner(obj).is_some_and(|o| {
        o.get("kind").and_then(Value::as_str) == Some(c::CRD_RAY_SERVICE)
            && o.get("apiVersion").and_then(Value::as_str) == Some("ray.io/v1")
    })
}

fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/labels")?.get(key)?.as_str()
}

/// The stored status carries `QuotaGated=False`: the RayCluster controller found it covered.
fn covered_in_status(obj: &Value) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some(c::COND_QUOTA_GATED)
                && c.get("status").and_then(Value::as_str) == Some("False")
        })
}

fn suspended(obj: &Value) -> bool {
    obj.pointer("/spec/suspend") == Some(&Value::Bool(true))
}

/// The rules for an update of a RayCluster from `old` to `new`; nothing for clusters no RayService owns.
pub fn validate_child_update(new: &Value, old: &Value) -> Vec<FieldError> {
    if !owned_by_service(old) {
        return Vec::new();
    }
    let parent = controller_owner(old)
        .and_then(|o| o.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let why = format!("the RayCluster belongs to RayService {parent}, whose quota gate covers it");
    let mut errs = Vec::new();
    let meta = Path::root("metadata");
    if controller_owner(new).map(|o| (o.get("uid"), o.get("kind")))
        != controller_owner(old).map(|o| (o.get("uid"), o.get("kind")))
    {
        errs.push(FieldError::forbidden(
            meta.child("ownerReferences").as_str(),
            format!("the controller owner reference cannot be removed or changed: {why}"),
        ));
    }
    for key in [
        c::LABEL_ORIGINATED_FROM_CR_NAME,
        c::LABEL_ORIGINATED_FROM_CRD,
        QUEUE_NAME,
    ] {
        if label(new, key) != label(old, key) {
            errs.push(FieldError::forbidden(
                meta.child("labels").key(key).as_str(),
                format!("cannot be changed: {why}"),
            ));
        }
    }
    let created_at = |o: &Value| {
        o.pointer("/metadata/annotations")
            .and_then(|a| a.get(c::ANNOTATION_CREATED_AT))
            .cloned()
    };
    if created_at(new) != created_at(old) {
        errs.push(FieldError::forbidden(
            meta.child("annotations").key(c::ANNOTATION_CREATED_AT).as_str(),
            format!("cannot be changed: it orders the quota gate's coverage; {why}"),
        ));
    }
    if new.pointer("/spec/managedBy") != old.pointer("/spec/managedBy") {
        errs.push(FieldError::forbidden(
            Path::root("spec").child("managedBy").as_str(),
            format!("cannot be changed: {why}"),
        ));
    }
    let queue_managed = label(old, QUEUE_NAME).is_some_and(|q| !q.is_empty());
    if queue_managed && suspended(old) && !suspended(new) && !covered_in_status(old) {
        errs.push(FieldError::forbidden(
            Path::root("spec").child("suspend").as_str(),
            format!(
                "the RayCluster waits for quota: only quotagate releases it, once an admitted workload slice of RayService {parent} covers it"
            ),
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A queue-managed child; `covered`: its status says an admitted slice covers it.
    fn child(suspend: bool, covered: bool) -> Value {
        let mut annotations = serde_json::Map::new();
        annotations.insert(c::ANNOTATION_ADMISSION_GATED.into(), json!("true"));
        let gated = if covered { "False" } else { "True" };
        json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rs-b", "namespace": "default", "annotations": annotations,
                "labels": {c::LABEL_ORIGINATED_FROM_CR_NAME: "rs", c::LABEL_ORIGINATED_FROM_CRD: "RayService", QUEUE_NAME: "lq"},
                "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayService", "name": "rs", "uid": "u1", "controller": true}]},
            "spec": {"suspend": suspend},
            "status": {"conditions": [{"type": c::COND_QUOTA_GATED, "status": gated, "reason": "r", "message": "",
                "lastTransitionTime": "2026-11-22T00:00:00Z"}]}
        })
    }

    fn fields(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.field.clone()).collect()
    }

    /// A case: what the edit is, the edit, and the field its refusal names.
    type Tampering = (&'static str, Box<dyn Fn(&mut Value)>, &'static str);

    #[test]
    fn every_tampering_path_is_refused_with_a_reason() {
        let old = child(true, false);
        let cases: Vec<Tampering> = vec![
            (
                "clear suspend while held",
                Box::new(|v| v["spec"]["suspend"] = json!(false)),
                "spec.suspend",
            ),
            (
                "clear suspend and the marker at once",
                Box::new(|v| {
                    v["spec"]["suspend"] = json!(false);
                    v["metadata"]["annotations"] = json!({});
                }),
                "spec.suspend",
            ),
            (
                "remove the owner",
                Box::new(|v| v["metadata"]["ownerReferences"] = json!([])),
                "metadata.ownerReferences",
            ),
            (
                "point the owner elsewhere",
                Box::new(|v| v["metadata"]["ownerReferences"][0]["uid"] = json!("other")),
                "metadata.ownerReferences",
            ),
            (
                "drop the origin label",
                Box::new(|v| {
                    v["metadata"]["labels"]
                        .as_object_mut()
                        .unwrap()
                        .remove(c::LABEL_ORIGINATED_FROM_CR_NAME);
                }),
                "metadata.labels[ray.io/originated-from-cr-name]",
            ),
            (
                "move to another queue",
                Box::new(|v| v["metadata"]["labels"][QUEUE_NAME] = json!("other")),
                "metadata.labels[kueue.x-k8s.io/queue-name]",
            ),
            (
                "reorder the gate's coverage",
                Box::new(|v| {
                    v["metadata"]["annotations"][c::ANNOTATION_CREATED_AT] = json!("2000-01-01T00:00:00Z")
                }),
                "metadata.annotations[quotagate.io/created-at]",
            ),
            (
                "hand it to another manager",
                Box::new(|v| v["spec"]["managedBy"] = json!("kueue.x-k8s.io/multikueue")),
                "spec.managedBy",
            ),
        ];
        for (name, edit, field) in cases {
            let mut new = old.clone();
            edit(&mut new);
            let errs = validate_child_update(&new, &old);
            assert_eq!(fields(&errs), vec![field.to_string()], "{name}");
            assert!(
                errs[0].to_string().contains("RayService rs"),
                "{name}: {}",
                errs[0]
            );
        }
    }

    #[test]
    fn ordinary_edits_and_covered_children_pass() {
        let released = child(false, true);
        let mut suspended = released.clone();
        suspended["spec"]["suspend"] = json!(true);
        assert!(
            validate_child_update(&suspended, &released).is_empty(),
            "suspending is the user's right"
        );
        assert!(
            validate_child_update(&released, &child(true, true)).is_empty(),
            "a covered child may resume"
        );
        let mut no_status = child(true, false);
        no_status.as_object_mut().unwrap().remove("status");
        let mut resumed = no_status.clone();
        resumed["spec"]["suspend"] = json!(false);
        assert_eq!(
            validate_child_update(&resumed, &no_status).len(),
            1,
            "no status yet: not known to be covered"
        );
        assert!(
            validate_child_update(&json!({"metadata": {}}), &json!({"metadata": {}})).is_empty(),
            "not a child"
        );
    }
}
