//! Admission webhooks, as kube-apiserver calls them (`ServerConfig::admission_webhooks`, on in
//! `apiserver --real-cluster`): every `admissionregistration.k8s.io/v1` Mutating- and
//! ValidatingWebhookConfiguration stored here whose rules, `namespaceSelector` and `objectSelector`
//! match a create or update is sent an `AdmissionReview` v1 over HTTPS (`webhook_client.rs`).
//! Mutating hooks run first, one after another in configuration-name order, each seeing the last
//! one's JSONPatch applied; then every validating hook. A hook that cannot be called refuses the
//! write under `failurePolicy: Fail` (the default) with the real server's message and is skipped
//! under `Ignore`; a hook that denies refuses it ("admission webhook ... denied the request: ...").
//!
//! A dry-run request reaching a hook whose `sideEffects` is not `None`/`NoneOnDryRun` is refused (400
//! "admission webhook ... does not support dry run"), as the real server refuses it.
//!
//! `reinvocationPolicy: IfNeeded` reruns a hook once when a later one changed the object (`admit`).
//! Not modelled: `matchConditions` (CEL; a configuration carrying them is refused, see `crd_schema.rs`),
//! `matchPolicy` (every version of a kind shares storage here, so Exact and Equivalent agree),
//! DELETE and CONNECT operations (hooks are only called on create and update).

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine;
use serde_json::{Value, json};

use super::error::ApiError;
use super::registry::{Registry, ResourceInfo};
use super::selector::{labels, selector_matches};
use super::store::{ListOptions, Store};

/// One admission request: what is written, by whom.
pub struct Call<'a> {
    pub info: &'a ResourceInfo,
    pub namespace: Option<&'a str>,
    /// "status" for a write to the status subresource.
    pub subresource: Option<&'a str>,
    /// "CREATE" or "UPDATE".
    pub operation: &'a str,
    pub old: Option<&'a Value>,
    pub user: &'a str,
    pub groups: &'a [String],
    pub dry_run: bool,
}

const GROUP: &str = "admissionregistration.k8s.io";

/// The webhooks of every configuration of `plural` that match `call` on `object`, in configuration
/// name order (the store lists by name), each as (webhook entry).
pub fn matching(
    store: &Store,
    registry: &Registry,
    plural: &str,
    call: &Call<'_>,
    object: &Value,
) -> Vec<Value> {
    let Some(info) = registry.find(GROUP, "v1", plural) else {
        return Vec::new();
    };
    let Ok(list) = store.list(&info, None, &ListOptions::default()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for config in list.items {
        for hook in config
            .get("webhooks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if hook_matches(store, registry, hook, call, object) {
                out.push(hook.clone());
            }
        }
    }
    out
}

/// Whether any hook of either kind matches `call` on `object`.
pub fn any_match(store: &Store, registry: &Registry, call: &Call<'_>, object: &Value) -> bool {
    ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]
        .iter()
        .any(|p| !matching(store, registry, p, call, object).is_empty())
}

/// Whether any configuration of either kind exists (the common case, none, costs two lookups).
pub fn any_configured(store: &Store, registry: &Registry) -> bool {
    ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]
        .iter()
        .any(|p| {
            registry
                .find(GROUP, "v1", p)
                .and_then(|info| {
                    store
                        .list(
                            &info,
                            None,
                            &ListOptions {
                                limit: Some(1),
                                ..ListOptions::default()
                            },
                        )
                        .ok()
                })
                .is_some_and(|l| !l.items.is_empty())
        })
}

fn hook_matches(store: &Store, registry: &Registry, hook: &Value, call: &Call<'_>, object: &Value) -> bool {
    let rules = hook.get("rules").and_then(Value::as_array);
    if !rules.into_iter().flatten().any(|r| rule_matches(r, call)) {
        return false;
    }
    // objectSelector: the new or the old object's labels (either matching is enough).
    if let Some(sel) = hook.get("objectSelector") {
        let matches = |o: Option<&Value>| o.is_some_and(|o| selector_matches(sel, &labels(o)));
        if !matches(Some(object)) && !matches(call.old) {
            return false;
        }
    }
    // namespaceSelector: a namespaced object's namespace's labels; a Namespace its own; other
    // cluster-scoped objects always match.
    if let Some(sel) = hook.get("namespaceSelector") {
        let ns_labels = if call.info.group.is_empty() && call.info.plural == "namespaces" {
            Some(labels(object))
        } else {
            call.namespace.map(|ns| namespace_labels(store, registry, ns))
        };
        if let Some(l) = ns_labels
            && !selector_matches(sel, &l)
        {
            return false;
        }
    }
    true
}

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// One `RuleWithOperations`: operations, apiGroups, apiVersions, resources (with `*`,
/// `resource/sub`, `*/sub`, `resource/*`), scope.
pub fn rule_matches(rule: &Value, call: &Call<'_>) -> bool {
    let any = |list: Vec<&str>, want: &str| list.iter().any(|x| *x == "*" || *x == want);
    if !any(strings(rule.get("operations")), call.operation)
        || !any(strings(rule.get("apiGroups")), &call.info.group)
        || !any(strings(rule.get("apiVersions")), &call.info.version)
    {
        return false;
    }
    let sub = call.subresource.unwrap_or("");
    let resource_ok = strings(rule.get("resources")).iter().any(|r| {
        let (res, rsub) = r.split_once('/').unwrap_or((r, ""));
        let res_ok = res == "*" || res == call.info.plural;
        // "*" alone is every resource without a subresource; "x/*" is x with or without one.
        let sub_ok = rsub == "*" || rsub == sub;
        res_ok && sub_ok
    });
    if !resource_ok {
        return false;
    }
    match rule.get("scope").and_then(Value::as_str).unwrap_or("*") {
        "Cluster" => !call.info.namespaced,
        "Namespaced" => call.info.namespaced,
        _ => true,
    }
}

fn namespace_labels(store: &Store, registry: &Registry, ns: &str) -> BTreeMap<String, String> {
    let mut l = registry
        .find("", "v1", "namespaces")
        .and_then(|info| store.get(&info, None, ns).ok())
        .map(|n| labels(&n))
        .unwrap_or_default();
    // The real server labels every namespace with its name (NamespaceDefaultLabelName).
    l.insert("kubernetes.io/metadata.name".into(), ns.to_string());
    l
}

/// The `AdmissionReview` v1 request kube-apiserver sends for `call` on `object`.
pub fn review(call: &Call<'_>, object: &Value, uid: &str) -> Value {
    let info = call.info;
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = json!({"group": info.group, "version": info.version, "kind": info.kind});
    let resource = json!({"group": info.group, "version": info.version, "resource": info.plural});
    let mut req = json!({
        "uid": uid,
        "kind": kind, "resource": resource, "requestKind": kind, "requestResource": resource,
        "name": name,
        "operation": call.operation,
        "userInfo": {"username": call.user, "groups": call.groups},
        "object": object,
        "oldObject": call.old.cloned().unwrap_or(Value::Null),
        "dryRun": call.dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": if call.operation == "CREATE" { "CreateOptions" } else { "UpdateOptions" }},
    });
    if let Some(ns) = call.namespace {
        req["namespace"] = json!(ns);
    }
    if let Some(sub) = call.subresource {
        req["subResource"] = json!(sub);
        req["requestSubResource"] = json!(sub);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
}

/// The refusal for a hook that answered `allowed: false` (kube-apiserver's `webhookerrors.ToStatusErr`).
pub fn denied(hook_name: &str, status: Option<&Value>) -> ApiError {
    let s = |k: &str| {
        status
            .and_then(|s| s.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let by = format!("admission webhook \"{hook_name}\" denied the request");
    let message = match (s("message"), s("reason")) {
        (m, _) if !m.is_empty() => format!("{by}: {m}"),
        (_, r) if !r.is_empty() => format!("{by}: {r}"),
        _ => format!("{by} without explanation"),
    };
    let code = status
        .and_then(|s| s.get("code"))
        .and_then(Value::as_u64)
        .filter(|c| (400..600).contains(c))
        .unwrap_or(400) as u16;
    let reason = match s("reason") {
        r if !r.is_empty() => r,
        _ if code == 403 => "Forbidden".into(),
        _ => "BadRequest".into(),
    };
    ApiError::new(code, &reason, message)
}

/// The refusal for a hook that could not be called under `failurePolicy: Fail`.
pub fn call_failed(hook_name: &str, why: &str) -> ApiError {
    ApiError::internal(format!("failed calling webhook \"{hook_name}\": {why}"))
}

/// Runs the matching mutating then validating hooks on `object`; returns the object as mutated.
///
/// `reinvocationPolicy: IfNeeded` as kube-apiserver's mutating dispatcher has it: a hook with it that
/// was called before another hook changed the object is called once more after the first pass (only
/// those, in order, still matching); a change in that second pass starts no third one.
pub async fn admit(
    store: &Arc<Store>,
    registry: &Arc<Registry>,
    call: &Call<'_>,
    mut object: Value,
) -> Result<Value, ApiError> {
    let mut invoked_if_needed: Vec<String> = Vec::new();
    let mut reinvoke: Vec<String> = Vec::new();
    for hook in matching(store, registry, "mutatingwebhookconfigurations", call, &object) {
        let name = hook_name(&hook);
        if call_hook(store, registry, call, &hook, &mut object, true).await? {
            reinvoke.append(&mut invoked_if_needed);
        }
        if hook.get("reinvocationPolicy").and_then(Value::as_str) == Some("IfNeeded") {
            invoked_if_needed.push(name);
        }
    }
    if !reinvoke.is_empty() {
        for hook in matching(store, registry, "mutatingwebhookconfigurations", call, &object) {
            if reinvoke.contains(&hook_name(&hook)) {
                call_hook(store, registry, call, &hook, &mut object, true).await?;
            }
        }
    }
    for hook in matching(store, registry, "validatingwebhookconfigurations", call, &object) {
        call_hook(store, registry, call, &hook, &mut object, false).await?;
    }
    Ok(object)
}

/// A webhook configuration with `matchConditions` is refused (422, naming the field): they are CEL,
/// which this server does not evaluate, and calling the hook for objects its conditions exclude
/// (as ignoring them would) could do what its author ruled out. A real 1.33 server evaluates them.
pub fn refuse_match_conditions(
    resource: &ResourceInfo,
    obj: &Value,
) -> Vec<crate::api::validation::FieldError> {
    use crate::api::validation::{ErrorType, FieldError};
    if resource.group != GROUP
        || !matches!(
            resource.plural.as_str(),
            "mutatingwebhookconfigurations" | "validatingwebhookconfigurations"
        )
    {
        return Vec::new();
    }
    let hooks = obj
        .get("webhooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate();
    hooks
        .filter(|(_, h)| h.get("matchConditions").and_then(Value::as_array).is_some_and(|c| !c.is_empty()))
        .map(|(i, _)| {
            let message = "not supported by this API server (CEL match conditions are not evaluated); select with objectSelector or namespaceSelector instead";
            FieldError::new(format!("webhooks[{i}].matchConditions"), ErrorType::Forbidden, message)
        })
        .collect()
}

fn hook_name(hook: &Value) -> String {
    hook.get("name").and_then(Value::as_str).unwrap_or("").to_string()
}

/// Calls one hook on `object` (a mutating one's patch applied to it); whether it changed the object.
async fn call_hook(
    store: &Arc<Store>,
    registry: &Arc<Registry>,
    call: &Call<'_>,
    hook: &Value,
    object: &mut Value,
    mutating: bool,
) -> Result<bool, ApiError> {
    let name = hook_name(hook);
    let fail = hook
        .get("failurePolicy")
        .and_then(Value::as_str)
        .unwrap_or("Fail")
        != "Ignore";
    // A dry run may only reach hooks that declare they have no side effects.
    let side_effects = hook
        .get("sideEffects")
        .and_then(Value::as_str)
        .unwrap_or("Unknown");
    if call.dry_run && !matches!(side_effects, "None" | "NoneOnDryRun") {
        return Err(ApiError::bad_request(format!(
            "admission webhook \"{name}\" does not support dry run"
        )));
    }
    let uid = super::meta::new_uid();
    let response = match super::webhook_client::call(store, registry, hook, &review(call, object, &uid)).await
    {
        Ok(r) => r,
        Err(why) if fail => return Err(call_failed(&name, &why)),
        Err(why) => {
            tracing::warn!(webhook = %name, "failed calling webhook, failing open (failurePolicy Ignore): {why}");
            return Ok(false);
        }
    };
    if response.get("uid").and_then(Value::as_str) != Some(uid.as_str()) {
        let why = format!(
            "expected response.uid=\"{uid}\", got {}",
            response.get("uid").unwrap_or(&Value::Null)
        );
        return if fail {
            Err(call_failed(&name, &why))
        } else {
            Ok(false)
        };
    }
    if response.get("allowed").and_then(Value::as_bool) != Some(true) {
        return Err(denied(&name, response.get("status")));
    }
    if mutating && let Some(patch) = response.get("patch").and_then(Value::as_str) {
        let before = object.clone();
        if let Err(why) = apply_patch(object, response.get("patchType").and_then(Value::as_str), patch) {
            return Err(call_failed(&name, &why));
        }
        return Ok(*object != before);
    }
    Ok(false)
}

fn apply_patch(object: &mut Value, patch_type: Option<&str>, patch: &str) -> Result<(), String> {
    if patch_type != Some("JSONPatch") {
        return Err(format!("unsupported patch type {:?}", patch_type.unwrap_or("")));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .map_err(|e| format!("the patch is not base64: {e}"))?;
    let ops: Value = serde_json::from_slice(&bytes).map_err(|e| format!("the patch is not JSON: {e}"))?;
    let mut next = object.clone();
    super::patch::json_patch(&mut next, &ops).map_err(|e| e.to_string())?;
    *object = next;
    Ok(())
}

#[cfg(test)]
#[path = "webhooks_tests.rs"]
mod tests;
