//! ResourceQuota as a real cluster enforces it on pods: the API server's quota admission plugin refuses
//! a pod create whose usage would take a quota of its namespace past `status.hard` (403 Forbidden,
//! "exceeded quota: NAME, requested: ..., used: ..., limited: ...") or that leaves out a request or
//! limit the quota tracks ("failed quota: NAME: must specify ..."), and kube-controller-manager's quota
//! controller keeps `status.hard` and `status.used` current. Here both happen in the server, under one
//! lock, right after the write that changes usage, so `status.used` never lags.
//!
//! Counted as Kubernetes' pod evaluator counts (`pkg/quota/v1/evaluator/core/pods.go`): `pods`,
//! `count/pods`, `cpu`/`memory`/`ephemeral-storage` and their `requests.`/`limits.` forms, hugepages
//! and `requests.<extended resource>`; a pod's requests are its containers' sum, at least its largest
//! init container, plus `spec.overhead`; a request left out defaults to the limit (the API server's
//! pod defaulting). Terminal pods and pods past their deletion grace period do not count. Quotas with
//! `scopes` or a `scopeSelector`, and resources other than pods' (services, configmaps, ...), are not
//! enforced (README, "Where it differs").

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::error::ApiError;
use super::registry::{Registry, ResourceInfo};
use super::store::{ListOptions, Store};
use crate::api::quantity::Quantity;
use crate::api::validation::FieldError;

type Usage = BTreeMap<String, Quantity>;

/// The resource names a pod evaluator answers for (Kubernetes' `MatchingResources`).
fn matches(resource: &str) -> bool {
    const NAMED: &[&str] = &["pods", "count/pods", "cpu", "memory", "ephemeral-storage"];
    NAMED.contains(&resource)
        || resource.starts_with("requests.")
        || resource.starts_with("limits.")
        || resource.starts_with("hugepages-")
}

/// `a + b`; a zero `a` takes `b`'s format, as Go's `Quantity.Add` does.
fn add(a: &Quantity, b: &Quantity) -> Quantity {
    let sum = if a.is_zero() {
        b.checked_add(a)
    } else {
        a.checked_add(b)
    };
    sum.unwrap_or(*a)
}

fn add_into(total: &mut Usage, key: &str, q: &Quantity) {
    let next = add(total.get(key).unwrap_or(&Quantity::ZERO), q);
    total.insert(key.to_string(), next);
}

/// A resource list (`requests`, `limits`, `overhead`) of quantities; unparsable entries are skipped
/// (a real server would have refused the pod).
fn resource_list(v: Option<&Value>) -> Usage {
    let Some(m) = v.and_then(Value::as_object) else {
        return Usage::new();
    };
    m.iter()
        .filter_map(|(k, v)| Some((k.clone(), Quantity::parse(v.as_str()?).ok()?)))
        .collect()
}

/// A container's requests (each left-out request defaulted from its limit) and limits.
fn container_resources(c: &Value) -> (Usage, Usage) {
    let r = c.get("resources");
    let limits = resource_list(r.and_then(|r| r.get("limits")));
    let mut requests = resource_list(r.and_then(|r| r.get("requests")));
    for (k, v) in &limits {
        requests.entry(k.clone()).or_insert(*v);
    }
    (requests, limits)
}

fn containers<'a>(pod: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    pod.pointer(&format!("/spec/{field}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn requests_of(c: &Value) -> Usage {
    container_resources(c).0
}

fn limits_of(c: &Value) -> Usage {
    container_resources(c).1
}

/// Pod requests or limits (`pick` reads one container's): the containers' sum (sidecar init
/// containers, `restartPolicy: Always`, run beside them and add), at least each other init
/// container's, plus the pod overhead.
fn pod_resources(pod: &Value, pick: fn(&Value) -> Usage) -> Usage {
    let mut sum = Usage::new();
    let sidecar = |c: &&Value| c.get("restartPolicy").and_then(Value::as_str) == Some("Always");
    for c in containers(pod, "containers").chain(containers(pod, "initContainers").filter(sidecar)) {
        for (k, q) in pick(c) {
            add_into(&mut sum, &k, &q);
        }
    }
    for c in containers(pod, "initContainers").filter(|c| !sidecar(c)) {
        for (k, q) in pick(c) {
            if sum.get(&k).is_none_or(|s| q > *s) {
                sum.insert(k, q);
            }
        }
    }
    for (k, q) in resource_list(pod.pointer("/spec/overhead")) {
        add_into(&mut sum, &k, &q);
    }
    sum
}

/// What one pod (or container, for the constraint check) counts against a quota, by quota resource
/// name (Kubernetes' `podComputeUsageHelper`).
fn usage_of(requests: &Usage, limits: &Usage) -> Usage {
    let mut u = Usage::new();
    for (k, q) in requests {
        match k.as_str() {
            "cpu" | "memory" | "ephemeral-storage" => {
                u.insert(k.clone(), *q);
                u.insert(format!("requests.{k}"), *q);
            }
            r if r.starts_with("hugepages-") => {
                u.insert(k.clone(), *q);
                u.insert(format!("requests.{k}"), *q);
            }
            // Extended resources (`vendor.com/gpu`) count only as `requests.<name>`.
            r if r.contains('/') && !r.starts_with("kubernetes.io/") => {
                u.insert(format!("requests.{k}"), *q);
            }
            _ => {}
        }
    }
    for (k, q) in limits {
        if matches!(k.as_str(), "cpu" | "memory" | "ephemeral-storage") {
            u.insert(format!("limits.{k}"), *q);
        }
    }
    u
}

/// A pod's usage, with `pods` and `count/pods` 1.
pub fn pod_usage(pod: &Value) -> Usage {
    let mut u = usage_of(&pod_resources(pod, requests_of), &pod_resources(pod, limits_of));
    u.insert(
        "pods".into(),
        Quantity::from_value(1, crate::api::quantity::Format::DecimalSi),
    );
    u.insert(
        "count/pods".into(),
        Quantity::from_value(1, crate::api::quantity::Format::DecimalSi),
    );
    u
}

/// Whether a pod still counts (Kubernetes' `QuotaV1Pod`): not Succeeded or Failed, and not past the
/// end of its deletion grace period.
fn counts(pod: &Value, now: jiff::Timestamp) -> bool {
    if matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    ) {
        return false;
    }
    let meta = pod.get("metadata");
    let deleted = meta
        .and_then(|m| m.get("deletionTimestamp"))
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let grace = meta
        .and_then(|m| m.get("deletionGracePeriodSeconds"))
        .and_then(Value::as_i64);
    match (deleted, grace) {
        (Some(at), Some(g)) => at
            .checked_add(jiff::SignedDuration::from_secs(g))
            .is_ok_and(|end| now <= end),
        _ => true,
    }
}

/// The containers that leave out a request or limit a quota tracks, by resource (Kubernetes'
/// `enforcePodContainerConstraints`: only cpu and memory are required this way).
fn missing(pod: &Value, restricted: &BTreeSet<&str>) -> BTreeMap<String, BTreeSet<String>> {
    const REQUIRED: &[&str] = &[
        "cpu",
        "memory",
        "requests.cpu",
        "requests.memory",
        "limits.cpu",
        "limits.memory",
    ];
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for c in containers(pod, "containers").chain(containers(pod, "initContainers")) {
        let (req, lim) = container_resources(c);
        let has = usage_of(&req, &lim);
        let name = c.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        for r in REQUIRED
            .iter()
            .filter(|r| restricted.contains(**r) && !has.contains_key(**r))
        {
            out.entry(r.to_string()).or_default().insert(name.clone());
        }
    }
    out
}

/// `k1=v1,k2=v2`, sorted, as the plugin prints a resource list.
fn pretty(u: &Usage) -> String {
    u.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// One quota's `spec.hard`, parsed; entries that do not parse are not enforced (POST and PUT refuse them).
fn hard_of(quota: &Value) -> Usage {
    resource_list(quota.pointer("/spec/hard"))
}

fn scoped(quota: &Value) -> bool {
    let spec = quota.get("spec");
    spec.and_then(|s| s.get("scopes"))
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
        || spec
            .and_then(|s| s.get("scopeSelector"))
            .is_some_and(|s| !s.is_null())
}

/// Why `pod` may not be created, checked against one quota with `used` being the namespace's current
/// usage; `None` when it fits.
fn refusal(
    quota_name: &str,
    hard: &Usage,
    used: &Usage,
    pod: &Value,
    requested_all: &Usage,
) -> Option<String> {
    let restricted: BTreeSet<&str> = hard.keys().map(String::as_str).filter(|k| matches(k)).collect();
    if restricted.is_empty() {
        return None;
    }
    let missing = missing(pod, &restricted);
    if !missing.is_empty() {
        let parts: Vec<String> = missing
            .iter()
            .map(|(r, names)| format!("{r} for: {}", names.iter().cloned().collect::<Vec<_>>().join(",")))
            .collect();
        return Some(format!(
            "failed quota: {quota_name}: must specify {}",
            parts.join("; ")
        ));
    }
    let exceeded: BTreeSet<&str> = restricted
        .iter()
        .copied()
        .filter(|k| {
            requested_all
                .get(*k)
                .is_some_and(|req| add(used.get(*k).unwrap_or(&Quantity::ZERO), req) > hard[*k])
        })
        .collect();
    if exceeded.is_empty() {
        return None;
    }
    let mask = |u: &Usage| -> Usage {
        exceeded
            .iter()
            .map(|k| (k.to_string(), *u.get(*k).unwrap_or(&Quantity::ZERO)))
            .collect()
    };
    Some(format!(
        "exceeded quota: {quota_name}, requested: {}, used: {}, limited: {}",
        pretty(&mask(requested_all)),
        pretty(&mask(used)),
        pretty(&mask(hard))
    ))
}

fn info(registry: &Registry, plural: &str) -> Option<std::sync::Arc<ResourceInfo>> {
    registry.find("", "v1", plural)
}

fn quotas(store: &Store, registry: &Registry, ns: &str) -> Vec<std::sync::Arc<Value>> {
    let Some(i) = info(registry, "resourcequotas") else {
        return Vec::new();
    };
    store
        .list(&i, Some(ns), &ListOptions::default())
        .map(|r| r.items)
        .unwrap_or_default()
}

/// Whether `ns` has any ResourceQuota (writes elsewhere need no quota work).
pub fn any(store: &Store, registry: &Registry, ns: &str) -> bool {
    !quotas(store, registry, ns).is_empty()
}

/// The namespace's usage over every pod that counts.
fn namespace_usage(store: &Store, registry: &Registry, ns: &str) -> Usage {
    let Some(i) = info(registry, "pods") else {
        return Usage::new();
    };
    let pods = store
        .list(&i, Some(ns), &ListOptions::default())
        .map(|r| r.items)
        .unwrap_or_default();
    let now = jiff::Timestamp::now();
    let mut total = Usage::new();
    for p in pods.iter().filter(|p| counts(p, now)) {
        for (k, q) in pod_usage(p) {
            add_into(&mut total, &k, &q);
        }
    }
    total
}

/// The quota admission plugin on a pod create in `ns` (call with the server's quota lock held, and
/// create the pod under it): 403 Forbidden when a quota refuses it.
pub fn admit_pod(store: &Store, registry: &Registry, ns: &str, pod: &Value) -> Result<(), ApiError> {
    let quotas = quotas(store, registry, ns);
    if quotas.is_empty() || !counts(pod, jiff::Timestamp::now()) {
        return Ok(());
    }
    let used = namespace_usage(store, registry, ns);
    let requested = pod_usage(pod);
    for q in quotas.iter().filter(|q| !scoped(q)) {
        let qname = q.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        if let Some(why) = refusal(qname, &hard_of(q), &used, pod, &requested) {
            let meta = pod.get("metadata");
            let field = |k: &str| {
                meta.and_then(|m| m.get(k))
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
            };
            let name = field("name")
                .or_else(|| field("generateName"))
                .unwrap_or("Unknown");
            return Err(
                ApiError::new(403, "Forbidden", format!("pods \"{name}\" is forbidden: {why}"))
                    .details(name, "", "pods"),
            );
        }
    }
    Ok(())
}

/// The quota controller's pass over `ns`: every quota's `status.hard` is its `spec.hard` and
/// `status.used` the usage of what counts (call with the server's quota lock held).
pub fn refresh(store: &Store, registry: &Registry, ns: &str) {
    let quotas = quotas(store, registry, ns);
    let Some(i) = info(registry, "resourcequotas").filter(|_| !quotas.is_empty()) else {
        return;
    };
    let total = namespace_usage(store, registry, ns);
    for q in &quotas {
        let hard = hard_of(q);
        let used: serde_json::Map<String, Value> = hard
            .keys()
            .filter(|k| matches(k) && !scoped(q))
            .map(|k| {
                (
                    k.clone(),
                    json!(total.get(k).unwrap_or(&Quantity::ZERO).to_string()),
                )
            })
            .collect();
        let hard: serde_json::Map<String, Value> = hard
            .iter()
            .map(|(k, v)| (k.clone(), json!(v.to_string())))
            .collect();
        let status = json!({"hard": hard, "used": used});
        if q.get("status") == Some(&status) {
            continue;
        }
        let mut next = (**q).clone();
        next["status"] = status;
        let name = q.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        // A concurrent write to the quota (409) leaves it for the next pass, which comes with the next
        // change of usage or of the quota.
        let _ = store.update(&i, Some(ns), name, next, true, false);
    }
}

/// A ResourceQuota's own rules on create and replace: every `spec.hard` value a non-negative quantity.
pub fn validate(quota: &Value) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    for (k, v) in quota
        .pointer("/spec/hard")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let field = format!("spec.hard[{k}]");
        match v.as_str().map(Quantity::parse) {
            Some(Ok(q)) if q.is_negative() => errs.push(FieldError::invalid(
                field,
                format!("{v}: must be greater than or equal to 0"),
            )),
            Some(Ok(_)) => {}
            Some(Err(e)) => errs.push(FieldError::invalid(field, format!("{v}: {e}"))),
            None => errs.push(FieldError::invalid(
                field,
                format!("{v}: a quantity must be a string"),
            )),
        }
    }
    if errs.is_empty() {
        return Ok(());
    }
    let name = quota
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    Err(ApiError::invalid("ResourceQuota", name, &errs).details(name, "", "ResourceQuota"))
}

#[cfg(test)]
#[path = "quota_tests.rs"]
mod tests;
