//! Edits that would take a RayService's child RayCluster out from under its parent's quota gate are
//! refused with a message that says why (Kueue's proof of concept had no such guard: its limitation 2).
//! The gate itself never depends on these fields (the RayCluster controller caps pods by the admitted
//! workload slice whatever they say); this is the layer that explains the refusal to the user.
//!
//! Refused on a child (a RayCluster whose stored controller owner is a RayService): removing or changing
//! that owner reference, changing or removing its `ray.io/originated-from-*` labels or its
//! `kueue.x-k8s.io/queue-name` label, changing `spec.managedBy`, and clearing `spec.suspend` while the child
//! is still held by the gate (`quotagate.io/admission-gated` present, or being removed in the same write).

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

fn owned_by_service(obj: &Value) -> bool {
    controller_owner(obj).is_some_and(|o| {
        o.get("kind").and_then(Value::as_str) == Some(c::CRD_RAY_SERVICE)
            && o.get("apiVersion").and_then(Value::as_str) == Some("ray.io/v1")
    })
}

fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/labels")?.get(key)?.as_str()
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")?.get(key)?.as_str()
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
    if new.pointer("/spec/managedBy") != old.pointer("/spec/managedBy") {
        errs.push(FieldError::forbidden(
            Path::root("spec").child("managedBy").as_str(),
            format!("cannot be changed: {why}"),
        ));
    }
    let held = annotation(old, c::ANNOTATION_ADMISSION_GATED).is_some();
    if held && suspended(old) && !suspended(new) {
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

    fn child(suspend: bool, held: bool) -> Value {
        let mut annotations = serde_json::Map::new();
        if held {
            annotations.insert(c::ANNOTATION_ADMISSION_GATED.into(), json!("true"));
        }
        json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rs-b", "namespace": "default", "annotations": annotations,
                "labels": {c::LABEL_ORIGINATED_FROM_CR_NAME: "rs", c::LABEL_ORIGINATED_FROM_CRD: "RayService", QUEUE_NAME: "lq"},
                "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayService", "name": "rs", "uid": "u1", "controller": true}]},
            "spec": {"suspend": suspend}
        })
    }

    fn fields(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.field.clone()).collect()
    }

    #[test]
    fn every_tampering_path_is_refused_with_a_reason() {
        let old = child(true, true);
        let cases: Vec<(&str, Box<dyn Fn(&mut Value)>, &str)> = vec![
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
    fn ordinary_edits_and_released_children_pass() {
        let released = child(false, false);
        let mut scaled = released.clone();
        scaled["spec"]["suspend"] = json!(true);
        assert!(
            validate_child_update(&scaled, &released).is_empty(),
            "suspending is the user's right"
        );
        let mut resumed = child(true, false);
        assert!(
            validate_child_update(&released, &resumed).is_empty(),
            "a child no longer held may resume"
        );
        resumed["metadata"]["ownerReferences"] = json!([]);
        assert!(
            validate_child_update(&json!({"metadata": {}}), &json!({"metadata": {}})).is_empty(),
            "not a child"
        );
    }
}
