//! Expectations ported from kubernetes' `test/integration/apiserver/apply/apply_test.go` and
//! `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager` tests, and from answers of a real
//! kube-apiserver v1.36.3 to the same requests (measured with `scripts/control-plane.sh`).

use super::*;
use crate::embedded::registry::builtins;

const NOW: &str = "2026-11-27T02:31:29Z";
const LATER: &str = "2026-11-27T02:40:00Z";

fn cm_info() -> ResourceInfo {
    builtins().into_iter().find(|i| i.plural == "configmaps").unwrap()
}

fn pod_info() -> ResourceInfo {
    builtins().into_iter().find(|i| i.plural == "pods").unwrap()
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"}, "data": data})
}

fn applied(info: &ResourceInfo, live: Option<&Value>, cfg: &Value, manager: &str) -> Result<Value, ApiError> {
    apply(info, live, cfg, Writer::new(manager, false), NOW)
}

fn fields(obj: &Value) -> Value {
    obj.pointer("/metadata/managedFields")
        .cloned()
        .unwrap_or(Value::Null)
}

/// Real server: `one` applies data a,b and label x; `two` applying a different `a` is refused with
/// this exact message and cause; the same with three fields lists them under the manager.
#[test]
fn a_second_applier_changing_an_owned_field_conflicts() {
    let info = cm_info();
    let mut first = cm(json!({"a": "1", "b": "2"}));
    first["metadata"]["labels"] = json!({"x": "y"});
    let live = applied(&info, None, &first, "one").unwrap();
    assert_eq!(
        fields(&live),
        json!([{"manager": "one", "operation": "Apply", "apiVersion": "v1", "time": NOW, "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:x": {}}}}}])
    );
    let err = applied(&info, Some(&live), &cm(json!({"a": "2"})), "two").unwrap_err();
    assert_eq!(err.code, 409);
    assert_eq!(err.reason, "Conflict");
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"one\": .data.a"
    );
    assert_eq!(
        err.details.causes,
        vec![Cause {
            reason: "FieldManagerConflict".into(),
            field: ".data.a".into(),
            message: "conflict with \"one\"".into()
        }]
    );
    let mut three = cm(json!({"a": "2", "b": "3"}));
    three["metadata"]["labels"] = json!({"x": "z"});
    let err = applied(&info, Some(&live), &three, "two").unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 3 conflicts: conflicts with \"one\":\n- .data.a\n- .data.b\n- .metadata.labels.x"
    );
    assert_eq!(err.details.causes.len(), 3);
    // The same value is no conflict: both own it. `two` changed nothing, so its entry has no time and
    // sorts first (kube-apiserver sorts by operation, then time, then manager).
    let shared = applied(&info, Some(&live), &cm(json!({"a": "1"})), "two").unwrap();
    let list = fields(&shared);
    let managers: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert_eq!(managers, ["two", "one"]);
}

/// apply_test.go `TestApplyManagedFields`-like: an Update manager conflicts `using` its version; force
/// takes the field over and the loser's emptied entry goes (real server: `three` disappears).
#[test]
fn force_takes_fields_from_appliers_and_updaters() {
    let info = cm_info();
    let live = applied(&info, None, &cm(json!({"a": "1", "b": "2"})), "one").unwrap();
    let mut patched = live.clone();
    patched["data"]["b"] = json!("9");
    let mf = update(&info, Some(&live), &patched, Writer::new("three", false), NOW).unwrap();
    patched["metadata"]["managedFields"] = mf;
    let err = applied(&info, Some(&patched), &cm(json!({"b": "3"})), "two").unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"three\" using v1: .data.b"
    );
    assert_eq!(err.details.causes[0].message, "conflict with \"three\" using v1");
    let w = Writer {
        force: true,
        ..Writer::new("two", false)
    };
    let forced = apply(&info, Some(&patched), &cm(json!({"a": "2", "b": "3"})), w, NOW).unwrap();
    assert_eq!(forced["data"], json!({"a": "2", "b": "3"}));
    assert_eq!(
        fields(&forced),
        json!([{"manager": "two", "operation": "Apply", "apiVersion": "v1", "time": NOW, "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}, "f:b": {}}}}])
    );
}

/// apply_test.go `TestApplyRemovesEmptyManagedFields` / GitOps: a field the applier alone owned and
/// drops is removed; one another manager also owns stays.
#[test]
fn fields_dropped_from_the_config_are_removed_unless_someone_else_owns_them() {
    let info = cm_info();
    let live = applied(&info, None, &cm(json!({"a": "1", "b": "2", "c": "3"})), "one").unwrap();
    let live = applied(&info, Some(&live), &cm(json!({"c": "3"})), "two").unwrap();
    let out = applied(&info, Some(&live), &cm(json!({"a": "1"})), "one").unwrap();
    assert_eq!(out["data"], json!({"a": "1", "c": "3"}));
    let out = applied(
        &info,
        Some(&out),
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"}}),
        "one",
    )
    .unwrap();
    assert_eq!(out["data"], json!({"c": "3"}));
    assert_eq!(out["metadata"]["name"], "cm1");
}

/// Real server: create by POST records an Update entry with `.` for new maps; a later PUT by another
/// agent adds its own entry; a write that only clears `managedFields` leaves none, and updates of an
/// object without managed fields are not tracked.
#[test]
fn updates_record_what_changed_and_a_cleared_list_stops_tracking() {
    let info = cm_info();
    let mut body = json!({"metadata": {"name": "cm2", "labels": {"l": "1"}}, "data": {"a": "1"}});
    let mf = update(&info, None, &body, Writer::new("myagent", false), NOW).unwrap();
    assert_eq!(
        mf,
        json!([{"manager": "myagent", "operation": "Update", "apiVersion": "v1", "time": NOW, "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:l": {}}}}}])
    );
    body["metadata"]["managedFields"] = mf;
    let mut put = json!({"metadata": {"name": "cm2", "labels": {"l": "1"}}, "data": {"a": "1", "c": "3"}});
    let mf2 = update(&info, Some(&body), &put, Writer::new("other", false), LATER).unwrap();
    assert_eq!(mf2[1]["manager"], "other");
    assert_eq!(mf2[1]["fieldsV1"], json!({"f:data": {"f:c": {}}}));
    put["metadata"]["managedFields"] = json!([]);
    assert_eq!(
        update(&info, Some(&body), &put, Writer::new("x", false), LATER),
        None
    );
    put["metadata"]["managedFields"] = json!([{}]);
    assert_eq!(
        update(&info, Some(&body), &put, Writer::new("x", false), LATER),
        None
    );
    let untracked = json!({"metadata": {"name": "cm2", "uid": "u"}, "data": {"a": "1"}});
    let next = json!({"metadata": {"name": "cm2", "uid": "u"}, "data": {"a": "1", "b": "2"}});
    assert_eq!(
        update(&info, Some(&untracked), &next, Writer::new("a2", false), LATER),
        None
    );
    // ... until an apply: what exists is before-first-apply's (real server: 409 naming it).
    let err = applied(&info, Some(&next), &cm(json!({"b": "3"})), "ap").unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.b"
    );
}

/// Real server: `metadata.managedFields` in an applied config is a 400 with this message.
#[test]
fn an_applied_config_may_not_carry_managed_fields() {
    let mut cfg = cm(json!({}));
    cfg["metadata"]["managedFields"] = json!([]);
    let err = applied(&cm_info(), None, &cfg, "one").unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (400, "metadata.managedFields must be nil")
    );
}

/// apply_test.go `TestApplyUpdateApplyConflictForced`-like for lists: containers are keyed by name, a
/// conflict names the item, and an item the applier dropped goes while another's stays.
#[test]
fn containers_are_owned_item_by_item() {
    let info = pod_info();
    let pod = |containers: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}});
    let live = applied(
        &info,
        None,
        &pod(json!([{"name": "a", "image": "x"}, {"name": "b", "image": "y"}])),
        "one",
    )
    .unwrap();
    let err = applied(
        &info,
        Some(&live),
        &pod(json!([{"name": "b", "image": "z"}])),
        "two",
    )
    .unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"one\": .spec.containers[name=\"b\"].image"
    );
    let live = applied(
        &info,
        Some(&live),
        &pod(json!([{"name": "c", "image": "w"}])),
        "two",
    )
    .unwrap();
    let out = applied(
        &info,
        Some(&live),
        &pod(json!([{"name": "a", "image": "x"}])),
        "one",
    )
    .unwrap();
    assert_eq!(
        out["spec"]["containers"],
        json!([{"name": "a", "image": "x"}, {"name": "c", "image": "w"}])
    );
}

/// A re-apply of the same config changes nothing but the time, which the store then ignores.
#[test]
fn a_reapply_differs_only_in_time() {
    let info = cm_info();
    let live = applied(&info, None, &cm(json!({"a": "1"})), "one").unwrap();
    let again = apply(
        &info,
        Some(&live),
        &cm(json!({"a": "1"})),
        Writer::new("one", false),
        LATER,
    )
    .unwrap();
    assert!(same_but_times(&live, &again));
}

#[test]
fn the_user_agent_names_the_manager() {
    assert_eq!(
        manager_from_user_agent("kubectl/v1.36.3 (linux/amd64) kubernetes/abc"),
        "kubectl"
    );
    assert_eq!(manager_from_user_agent("myagent"), "myagent");
}

/// Real server (kubectl create namespace): `spec: {}` in the body is no field of the creator's; a
/// Service's selector is an atomic map (`f:selector: {}`).
#[test]
fn built_in_structs_and_atomic_maps_as_the_real_server_tracks_them() {
    let ns = builtins().into_iter().find(|i| i.plural == "namespaces").unwrap();
    let body = json!({"metadata": {"name": "x"}, "spec": {}, "status": {}});
    assert_eq!(
        update(&ns, None, &body, Writer::new("kubectl-create", false), NOW),
        None
    );
    let svc = builtins().into_iter().find(|i| i.plural == "services").unwrap();
    let cfg = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s1"},
        "spec": {"selector": {"a": "b"}, "ports": [{"port": 80, "targetPort": 8080}]}});
    let out = applied(&svc, None, &cfg, "one").unwrap();
    assert_eq!(
        fields(&out)[0]["fieldsV1"],
        json!({"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}, "f:targetPort": {}}},
            "f:selector": {}}})
    );
}

/// Through the store, as a request reaches it: apply creates, a second applier conflicts (409, nothing
/// written), a re-apply of the same config writes nothing (same resourceVersion, as kube-apiserver
/// ignores a change of timestamps alone), `force` takes over, and a merge patch joins as an Update.
#[test]
fn the_store_enforces_ownership_on_every_write() {
    use crate::embedded::patch::PatchKind;
    use crate::embedded::{AllowAll, EmbeddedServer};
    let srv = EmbeddedServer::new(&[], std::sync::Arc::new(AllowAll));
    let info = cm_info();
    let apply_as = |manager: &str, force: bool, data: Value| {
        let w = Writer {
            force,
            ..Writer::new(manager, false)
        };
        srv.store.patch(
            &info,
            Some("default"),
            "cm1",
            PatchKind::Apply,
            cm(data),
            false,
            w,
        )
    };
    let (created, was_created) = apply_as("one", false, json!({"a": "1"})).unwrap();
    assert!(was_created);
    assert_eq!(created["metadata"]["managedFields"][0]["manager"], "one");
    let err = apply_as("two", false, json!({"a": "2"})).unwrap_err();
    assert_eq!(err.code, 409);
    let (again, _) = apply_as("one", false, json!({"a": "1"})).unwrap();
    assert_eq!(
        again["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let (forced, _) = apply_as("two", true, json!({"a": "2"})).unwrap();
    assert_eq!(forced["data"], json!({"a": "2"}));
    assert_eq!(forced["metadata"]["managedFields"].as_array().unwrap().len(), 1);
    let (patched, _) = srv
        .store
        .patch(
            &info,
            Some("default"),
            "cm1",
            PatchKind::Merge,
            json!({"data": {"b": "3"}}),
            false,
            Writer::new("kubectl-patch", false),
        )
        .unwrap();
    let list = &patched["metadata"]["managedFields"];
    assert_eq!(list[1]["manager"], "kubectl-patch");
    assert_eq!(list[1]["operation"], "Update");
    assert_eq!(list[1]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
}

/// apimachinery's lastAppliedManager and lastAppliedUpdater (`lastappliedmanager_test.go`): `kubectl`
/// applying server-side over a client-side-applied object takes the fields the annotation still
/// holds, and the annotation becomes the applied configuration; another manager still conflicts, and
/// so does a field the annotation no longer holds as it is live.
#[test]
fn kubectl_moves_from_client_side_apply_without_conflicts() {
    let info = cm_info();
    let last = r#"{"apiVersion":"v1","data":{"k":"v2"},"kind":"ConfigMap","metadata":{"annotations":{},"name":"cm1","namespace":"blind"}}
"#;
    let mut csa = cm(json!({"k": "v2", "extra": "e"}));
    csa["metadata"]["annotations"] = json!({LAST_APPLIED: last});
    let live = update(
        &info,
        None,
        &csa,
        Writer::new("kubectl-client-side-apply", false),
        NOW,
    );
    csa["metadata"]["managedFields"] = live.unwrap();
    let cfg = cm(json!({"k": "v3"}));

    let out = applied(&info, Some(&csa), &cfg, "kubectl").unwrap();
    assert_eq!(out["data"], json!({"k": "v3", "extra": "e"}));
    assert_eq!(
        out["metadata"]["annotations"][LAST_APPLIED],
        "{\"apiVersion\":\"v1\",\"data\":{\"k\":\"v3\"},\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm1\"}}\n"
    );
    // Apply entries sort before Update ones (`sortEncodedManagedFields`); kubectl's own migration
    // then moves the client-side manager's fields.
    let managers: Vec<(&str, &str)> = out["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["manager"].as_str().unwrap(), e["operation"].as_str().unwrap()))
        .collect();
    assert_eq!(
        managers,
        [("kubectl", "Apply"), ("kubectl-client-side-apply", "Update")]
    );

    // Another manager name gets the conflict, and so does `kubectl` on a field the annotation
    // does not hold (`extra` was written by the client-side apply outside its configuration).
    let err = applied(&info, Some(&csa), &cfg, "other").unwrap_err();
    assert_eq!(err.code, 409);
    let err = applied(
        &info,
        Some(&csa),
        &cm(json!({"k": "v2", "extra": "x"})),
        "kubectl",
    )
    .unwrap_err();
    // An Update manager is named with its apiVersion, as apimachinery's `printManager` does.
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .data.extra"
    );
}
