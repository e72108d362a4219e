//! The `scale` subresource of Deployments, an `autoscaling/v1` `Scale`, as kube-apiserver v1.36 serves
//! it (`pkg/registry/apps/deployment/storage/storage.go`): what `kubectl scale` and a
//! HorizontalPodAutoscaler read and write.
//!
//! A read makes the Scale from the Deployment: its name, namespace, uid, resourceVersion and creation
//! time, `spec.replicas`, `status.replicas` and the selector printed as apimachinery prints it. A write
//! (update or patch) is applied to that Scale, checked (`spec.replicas` not negative, a uid given must
//! be the Deployment's), and moves `spec.replicas` and the Scale's resourceVersion (a precondition when
//! set, none when empty) into the Deployment, which is then written as any update; the answer is the
//! Scale made from what was written. Field ownership records the writer on `spec.replicas` with
//! subresource `scale`, as the real server's scale handler does.

use serde_json::{Value, json};

use super::error::ApiError;
use super::patch::{self, PatchKind};
use super::registry::ResourceInfo;
use super::selector::selector_string;
use crate::api::validation::FieldError;

/// The kinds served with a `scale` subresource (of the built-in kinds this server stores).
pub fn has_scale(info: &ResourceInfo) -> bool {
    !info.is_crd && info.group == "apps" && info.version == "v1" && info.plural == "deployments"
}

/// The Scale of `parent`.
pub fn of(parent: &Value) -> Value {
    let meta = |k: &str| parent.pointer(&format!("/metadata/{k}")).cloned();
    let mut metadata = serde_json::Map::new();
    for k in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = meta(k) {
            metadata.insert(k.into(), v);
        }
    }
    let replicas = |p: &str| parent.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let selector = parent
        .pointer("/spec/selector")
        .map(selector_string)
        .unwrap_or_default();
    let mut status = json!({"replicas": replicas("/status/replicas")});
    if !selector.is_empty() {
        status["selector"] = json!(selector);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": replicas("/spec/replicas")},
        "status": status,
    })
}

/// `scale` after a patch of `kind`. Apply has no field ownership of its own here: its `spec.replicas`
/// is merged in (the only field a Scale's writer may set).
pub fn patched(scale: &Value, kind: PatchKind, body: &Value) -> Result<Value, ApiError> {
    let mut next = scale.clone();
    let refused = |e: patch::PatchError| ApiError::new(e.code(), "Invalid", e.to_string()).generic();
    match kind {
        PatchKind::Json => patch::json_patch(&mut next, body).map_err(refused)?,
        PatchKind::Merge => patch::merge_patch(&mut next, body),
        PatchKind::Strategic => patch::strategic_merge(&mut next, body).map_err(refused)?,
        PatchKind::Apply => {
            if let Some(r) = body.pointer("/spec/replicas") {
                next["spec"]["replicas"] = r.clone();
            }
        }
    }
    Ok(next)
}

/// `parent` with the written Scale's replicas and resourceVersion, after the Scale's checks.
pub fn into_parent(parent: &Value, scale: &Value) -> Result<Value, ApiError> {
    let name = parent
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let replicas = match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_i64().filter(|n| i32::try_from(*n).is_ok()).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Scale in version \"v1\" cannot be handled as a Scale: spec.replicas: {v} is not an int32"
            ))
        })?,
    };
    if replicas < 0 {
        let e = FieldError::invalid(
            "spec.replicas",
            format!("{replicas}: must be greater than or equal to 0"),
        );
        return Err(ApiError::invalid("Scale.autoscaling", name, &[e]));
    }
    let uid = scale
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let own_uid = parent
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !uid.is_empty() && uid != own_uid {
        let mut e =
            ApiError::conflict("deployments.apps/scale", name).details(name, "apps", "deployments/scale");
        e.message = format!(
            "Operation cannot be fulfilled on deployments.apps/scale \"{name}\": Precondition failed: UID in precondition: {uid}, UID in object meta: {own_uid}"
        );
        return Err(e);
    }
    let mut next = parent.clone();
    next["spec"]["replicas"] = json!(replicas);
    let rv = scale
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    match next.get_mut("metadata").and_then(Value::as_object_mut) {
        Some(m) if rv.is_empty() => {
            m.remove("resourceVersion");
        }
        Some(m) => {
            m.insert("resourceVersion".into(), json!(rv));
        }
        None => {}
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "default", "uid": "u1", "resourceVersion": "7",
                "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1, "labels": {"x": "y"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d", "a": "b"}}},
            "status": {"replicas": 1}})
    }

    // The Scale kube-apiserver v1.36.3 answers for `GET deployments/d/scale` (the differential
    // suite's "deployment scale subresource get and update"): only these metadata fields, and the
    // selector sorted by key.
    #[test]
    fn a_deployment_reads_as_its_scale() {
        assert_eq!(
            of(&deployment()),
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": "d", "namespace": "default", "uid": "u1", "resourceVersion": "7",
                    "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"replicas": 1}, "status": {"replicas": 1, "selector": "a=b,app=d"}})
        );
    }

    #[test]
    fn a_merge_patch_moves_replicas_and_keeps_the_precondition() {
        let d = deployment();
        let s = patched(&of(&d), PatchKind::Merge, &json!({"spec": {"replicas": 3}})).unwrap();
        let next = into_parent(&d, &s).unwrap();
        assert_eq!(next["spec"]["replicas"], 3);
        assert_eq!(next["metadata"]["resourceVersion"], "7");
        assert_eq!(next["metadata"]["labels"], json!({"x": "y"}));
    }

    #[test]
    fn an_update_without_resource_version_is_unconditional() {
        let d = deployment();
        let s = json!({"metadata": {"name": "d"}, "spec": {"replicas": 2}});
        let next = into_parent(&d, &s).unwrap();
        assert!(next["metadata"].get("resourceVersion").is_none());
    }

    #[test]
    fn negative_replicas_and_a_foreign_uid_are_refused() {
        let d = deployment();
        let e = into_parent(&d, &json!({"spec": {"replicas": -1}})).unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            r#"Scale.autoscaling "d" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"#
        );
        let e = into_parent(
            &d,
            &json!({"metadata": {"uid": "other"}, "spec": {"replicas": 1}}),
        )
        .unwrap_err();
        assert_eq!(e.code, 409);
        assert!(e.message.contains("UID in precondition: other"), "{}", e.message);
        let e = into_parent(&d, &json!({"spec": {"replicas": 1u64 << 40}})).unwrap_err();
        assert_eq!(e.code, 400);
    }
}
