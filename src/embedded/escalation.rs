//! RBAC escalation prevention for an in-process principal (`client_as`), as the real server applies
//! it: creating or replacing a Role needs every permission it grants to be held already (or `escalate`
//! on roles), and a RoleBinding needs the permissions of the Role it references (or `bind` on it).
//! So the manager's shipped Role must hold what the autoscaler Role it creates grants.

use serde_json::Value;

use super::error::ApiError;
use super::rbac::{Access, Authorizer};
use super::registry::Registry;
use super::store::Store;
use k8s_openapi::api::rbac::v1::PolicyRule;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Every (group, resource, verb, name) a rule grants, or `None` when a wildcard makes it unlistable
/// (then only `escalate`/`bind` can allow it).
fn grants(rule: &PolicyRule, ns: &str) -> Option<Vec<Access>> {
    let names: Vec<Option<String>> = match rule.resource_names.as_deref() {
        Some(n) if !n.is_empty() => n.iter().cloned().map(Some).collect(),
        _ => vec![None],
    };
    let mut out = Vec::new();
    for g in rule.api_groups.iter().flatten() {
        for r in rule.resources.iter().flatten() {
            for v in &rule.verbs {
                if g == "*" || r.contains('*') || v == "*" {
                    return None;
                }
                for n in &names {
                    out.push(Access {
                        group: g.clone(),
                        resource: r.clone(),
                        verb: v.clone(),
                        name: n.clone(),
                        namespace: Some(ns.to_string()),
                    });
                }
            }
        }
    }
    Some(out)
}

/// Ok when the principal may write this Role or RoleBinding (`plural`) in `ns`.
pub fn check(
    authz: &Authorizer,
    store: &Store,
    registry: &Registry,
    plural: &str,
    ns: &str,
    obj: &Value,
) -> Result<(), ApiError> {
    let (rules, escape_verb, escape_name) = match plural {
        "roles" => (rules_of(obj), "escalate", obj.pointer("/metadata/name")),
        "rolebindings" => (
            referenced_rules(store, registry, ns, obj),
            "bind",
            obj.pointer("/roleRef/name"),
        ),
        _ => return Ok(()),
    };
    let name = |v: Option<&Value>| v.and_then(Value::as_str).map(String::from);
    let wanted: Option<Vec<Access>> = rules
        .iter()
        .map(|r| grants(r, ns))
        .collect::<Option<Vec<_>>>()
        .map(|v| v.concat());
    if let Some(wanted) = &wanted
        && wanted.iter().all(|a| authz.would_allow(a))
    {
        // Held: the permissions granted count as used by the manager.
        wanted.iter().for_each(|a| {
            authz.allows(a);
        });
        return Ok(());
    }
    let cluster_role = plural == "rolebindings"
        && obj.pointer("/roleRef/kind").and_then(Value::as_str) == Some("ClusterRole");
    let escape_resource = if cluster_role { "clusterroles" } else { "roles" };
    let escape = Access {
        group: RBAC_GROUP.into(),
        resource: escape_resource.into(),
        verb: escape_verb.into(),
        name: name(escape_name),
        namespace: Some(ns.to_string()),
    };
    if authz.would_allow(&escape) {
        authz.allows(&escape);
        return Ok(());
    }
    let missing: Vec<&Access> = wanted.iter().flatten().filter(|a| !authz.allows(a)).collect();
    let held: Vec<String> = missing
        .iter()
        .map(|a| {
            format!(
                "{{APIGroups:[{:?}], Resources:[{:?}], Verbs:[{:?}]}}",
                a.group, a.resource, a.verb
            )
        })
        .collect();
    let obj_name = name(obj.pointer("/metadata/name")).unwrap_or_default();
    let message = format!(
        "{plural}.{RBAC_GROUP} {obj_name:?} is forbidden: user {:?} is attempting to grant RBAC permissions not currently held:\n{}",
        authz.user,
        held.join("\n")
    );
    Err(ApiError::new(403, "Forbidden", message).details(&obj_name, RBAC_GROUP, plural))
}

fn rules_of(obj: &Value) -> Vec<PolicyRule> {
    obj.get("rules")
        .cloned()
        .and_then(|r| serde_json::from_value(r).ok())
        .unwrap_or_default()
}

/// The rules of the Role a RoleBinding references (a ClusterRole or an absent Role: none known, so
/// only `bind` allows it, as the real server does when it cannot resolve them).
fn referenced_rules(store: &Store, registry: &Registry, ns: &str, binding: &Value) -> Vec<PolicyRule> {
    let kind = binding.pointer("/roleRef/kind").and_then(Value::as_str);
    let name = binding
        .pointer("/roleRef/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(info) = registry.find(RBAC_GROUP, "v1", "roles") else {
        return vec![];
    };
    match (kind, store.get(&info, Some(ns), name)) {
        (Some("Role"), Ok(role)) => rules_of(&role),
        _ => vec![PolicyRule {
            api_groups: Some(vec!["*".into()]),
            resources: Some(vec!["*".into()]),
            verbs: vec!["*".into()],
            ..Default::default()
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::{AllowAll, EmbeddedServer};
    use serde_json::json;

    fn authz(pod_verbs: &[&str]) -> Authorizer {
        let role = json!({"kind": "ClusterRole", "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": pod_verbs}]});
        Authorizer::from_documents("system:serviceaccount:q:m", &[role]).expect("rules")
    }

    /// Kubernetes' escalation prevention: a Role may grant only what its creator holds.
    #[test]
    fn a_role_grants_only_what_its_creator_holds() {
        let srv = EmbeddedServer::new(&[], std::sync::Arc::new(AllowAll));
        let role = json!({"metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]});
        let short = authz(&["list"]);
        let err =
            check(&short, &srv.store, &srv.registry, "roles", "ml", &role).expect_err("pods get not held");
        assert_eq!(err.code, 403);
        assert!(
            err.message
                .contains("attempting to grant RBAC permissions not currently held"),
            "{}",
            err.message
        );
        assert!(err.message.contains("Verbs:[\"get\"]"), "{}", err.message);
        let full = authz(&["get", "list"]);
        check(&full, &srv.store, &srv.registry, "roles", "ml", &role).expect("held");
        assert!(
            full.unused().is_empty(),
            "granting counts as using: {:?}",
            full.unused()
        );
        let binding = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "admin"}});
        check(&full, &srv.store, &srv.registry, "rolebindings", "ml", &binding)
            .expect_err("a ClusterRole needs bind");
    }
}
