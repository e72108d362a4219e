//! `bindings`: a create-only core resource that assigns a pod to a node, as kube-apiserver's pod
//! `BindingREST` does (`pkg/registry/core/pod/storage/storage.go` v1.36.3): nothing is stored; the
//! named pod gets `spec.nodeName`, the binding's annotations and labels, and `PodScheduled=True`,
//! and the answer is a `Success` Status.

use serde_json::{Value, json};

use super::error::ApiError;
use super::managed_fields::Writer;
use super::registry::Registry;
use super::store::Store;

/// `ValidatePodBinding`: its errors as the real server answers them, joined as Go's aggregate and
/// sent as a plain error (500, reason `Unknown`: the storage returns them unwrapped).
fn validate(binding: &Value) -> Result<(), ApiError> {
    let text = |p: &str| binding.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let mut errs = Vec::new();
    let kind = text("/target/kind");
    if !kind.is_empty() && kind != "Node" {
        errs.push(format!(
            "target.kind: Unsupported value: {kind:?}: supported values: \"Node\", \"<empty>\""
        ));
    }
    if text("/target/name").is_empty() {
        errs.push("target.name: Required value".to_string());
    }
    match errs.len() {
        0 => Ok(()),
        1 => Err(ApiError::new(500, "Unknown", errs.remove(0))),
        _ => Err(ApiError::new(500, "Unknown", format!("[{}]", errs.join(", ")))),
    }
}

/// Binds the pod `binding.metadata.name` in `ns` to `binding.target.name`.
pub fn bind(
    store: &Store,
    registry: &Registry,
    ns: &str,
    binding: &Value,
    dry_run: bool,
    manager: &str,
) -> Result<Value, ApiError> {
    validate(binding)?;
    let pods = registry
        .find("", "v1", "pods")
        .ok_or_else(|| ApiError::internal("pods are not served"))?;
    let name = binding
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let pod = store.get(&pods, Some(ns), name)?;
    let refused = |why: String| {
        ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on pods/binding {name:?}: {why}"),
        )
        .details(name, "", "pods/binding")
    };
    if pod
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        return Err(refused(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        )));
    }
    let assigned = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !assigned.is_empty() {
        return Err(refused(format!(
            "pod {name} is already assigned to node {assigned:?}"
        )));
    }
    if pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty())
    {
        return Err(refused(format!("pod {name} has non-empty .spec.schedulingGates")));
    }
    // The binding's own preconditions (a uid or resourceVersion it names) hold against the pod.
    for field in ["uid", "resourceVersion"] {
        let want = binding
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let have = pod
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !want.is_empty() && want != have {
            return Err(ApiError::conflict("pods", name).details(name, "", "pods"));
        }
    }
    let mut next = (*pod).clone();
    next["spec"]["nodeName"] = json!(node);
    for field in ["annotations", "labels"] {
        if let Some(m) = binding
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
        {
            let meta = &mut next["metadata"];
            if !meta[field].is_object() {
                meta[field] = json!({});
            }
            for (k, v) in m {
                meta[field][k] = v.clone();
            }
        }
    }
    let bound = store.update_by(&pods, Some(ns), name, next, dry_run, Writer::new(manager, false))?;
    let mut with_status = (*bound).clone();
    let conditions = with_status["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let now = super::meta::now_rfc3339();
    let mut found = false;
    let mut conditions: Vec<Value> = conditions
        .into_iter()
        .map(|mut c| {
            if c["type"] == "PodScheduled" {
                found = true;
                if c["status"] != "True" {
                    c["status"] = json!("True");
                    c["lastTransitionTime"] = json!(now);
                }
            }
            c
        })
        .collect();
    if !found {
        conditions.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}));
    }
    with_status["status"]["conditions"] = json!(conditions);
    store.update_by(
        &pods,
        Some(ns),
        name,
        with_status,
        dry_run,
        Writer::new(manager, true),
    )?;
    Ok(json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::EmbeddedServer;
    use crate::embedded::admission::AllowAll;
    use std::sync::Arc;

    #[test]
    fn a_binding_assigns_the_pod_once() {
        let srv = EmbeddedServer::new(&[], Arc::new(AllowAll));
        let pods = srv.registry.find("", "v1", "pods").unwrap();
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        srv.store.create(&pods, Some("default"), pod, false).unwrap();
        let b = |node: &str| {
            json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "p", "annotations": {"a": "b"}}, "target": {"kind": "Node", "name": node}})
        };

        let err = bind(&srv.store, &srv.registry, "default", &b(""), false, "t").unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (500, "target.name: Required value")
        );

        let ok = bind(&srv.store, &srv.registry, "default", &b("n1"), false, "t").unwrap();
        assert_eq!(ok["status"], "Success");
        let stored = srv.store.get(&pods, Some("default"), "p").unwrap();
        assert_eq!(stored["spec"]["nodeName"], "n1");
        assert_eq!(stored["metadata"]["annotations"]["a"], "b");
        assert_eq!(stored["status"]["conditions"][0]["type"], "PodScheduled");
        assert_eq!(stored["status"]["conditions"][0]["status"], "True");

        let err = bind(&srv.store, &srv.registry, "default", &b("n2"), false, "t").unwrap_err();
        assert_eq!(err.code, 409);
        assert_eq!(
            err.message,
            "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"n1\""
        );
        let err = bind(
            &srv.store,
            &srv.registry,
            "default",
            &json!({"metadata": {"name": "q"}, "target": {"name": "n"}}),
            false,
            "t",
        )
        .unwrap_err();
        assert_eq!(err.code, 404);
    }
}
