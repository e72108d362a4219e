//! The ClusterRoles a real cluster starts with that users bind to: `cluster-admin`, and `admin`,
//! `edit` and `view` with the `system:aggregate-to-*` roles they are built from, and the aggregation
//! that builds them (kube-controller-manager's `clusterroleaggregation` controller).
//!
//! `bootstrap_roles.json` holds them as kube-apiserver v1.36.3 creates them (its RBAC bootstrap
//! policy), read from a running server with `kubectl get clusterrole NAME -o json` and kept to name,
//! labels, annotations, `aggregationRule` and `rules`. A `RoleBinding` to `edit` or `view` therefore
//! grants here what it grants on a real cluster, and a ClusterRole labelled
//! `rbac.authorization.k8s.io/aggregate-to-edit: "true"` (as Kueue's and quotagate's installs ship)
//! extends them.
//!
//! Aggregation runs inside the store on every ClusterRole write, so an aggregated role is up to date
//! when that write is answered; the real controller converges a moment later.

use std::sync::Arc;

use serde_json::Value;

use super::selector::{labels, selector_matches};

/// The bootstrap ClusterRoles, aggregated ones with no rules yet.
pub fn bootstrap_roles() -> Vec<Value> {
    serde_json::from_str(include_str!("bootstrap_roles.json")).unwrap_or_default()
}

fn name(role: &Value) -> &str {
    role.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The rules `role` aggregates from `all` ClusterRoles, as the controller builds them: for each
/// selector in turn, the matching roles (itself excluded) by name, each rule appended unless an equal
/// one is there already. `None` when `role` has no `aggregationRule`.
pub fn aggregated_rules(role: &Value, all: &[Arc<Value>]) -> Option<Vec<Value>> {
    let selectors = role
        .pointer("/aggregationRule/clusterRoleSelectors")?
        .as_array()?;
    let mut sorted: Vec<&Arc<Value>> = all.iter().collect();
    sorted.sort_by(|a, b| name(a).cmp(name(b)));
    let mut rules: Vec<Value> = Vec::new();
    for selector in selectors {
        for other in &sorted {
            if name(other) == name(role) {
                continue;
            }
            // An empty selector selects every ClusterRole, as `LabelSelectorAsSelector` makes it.
            if !selector_matches(selector, &labels(other)) {
                continue;
            }
            for rule in other.get("rules").and_then(Value::as_array).into_iter().flatten() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    Some(rules)
}

/// Every aggregated role of `all` whose rules differ from what aggregation gives, with those rules.
/// Applying them and asking again reaches a fixed point: a chain of aggregations (`view` into `edit`
/// into `admin`) takes one round per link.
pub fn stale(all: &[Arc<Value>]) -> Vec<(String, Vec<Value>)> {
    all.iter()
        .filter_map(|role| {
            let want = aggregated_rules(role, all)?;
            let have = role.get("rules").and_then(Value::as_array);
            (have.map(Vec::as_slice).unwrap_or(&[]) != want.as_slice())
                .then(|| (name(role).to_string(), want))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Aggregates the bootstrap roles to a fixed point, as the store does.
    fn converge(mut roles: Vec<Value>) -> Vec<Value> {
        for _ in 0..8 {
            let all: Vec<Arc<Value>> = roles.iter().cloned().map(Arc::new).collect();
            let changes = stale(&all);
            if changes.is_empty() {
                return roles;
            }
            for (n, rules) in changes {
                if let Some(r) = roles.iter_mut().find(|r| name(r) == n) {
                    r["rules"] = Value::Array(rules);
                }
            }
        }
        panic!("no fixed point");
    }

    /// kube-apiserver v1.36.3 with kube-controller-manager: `edit` holds the 15 rules of
    /// `system:aggregate-to-edit` then `view`'s 12, and `admin` `edit`'s 27 then the 2 of
    /// `system:aggregate-to-admin` (roles taken by name), as `kubectl get clusterrole admin -o json`
    /// shows them on the real control plane.
    #[test]
    fn the_bootstrap_roles_aggregate_as_on_a_real_cluster() {
        let roles = converge(bootstrap_roles());
        let rules = |n: &str| {
            roles
                .iter()
                .find(|r| name(r) == n)
                .and_then(|r| r["rules"].as_array().cloned())
                .unwrap()
        };
        let own = |n: &str| {
            bootstrap_roles()
                .into_iter()
                .find(|r| name(r) == n)
                .and_then(|r| r["rules"].as_array().cloned())
                .unwrap()
        };
        assert_eq!(rules("view"), own("system:aggregate-to-view"));
        assert_eq!(rules("edit").len(), 27);
        assert_eq!(rules("edit")[..15], own("system:aggregate-to-edit")[..]);
        assert_eq!(rules("edit")[15..], rules("view")[..]);
        assert_eq!(rules("admin").len(), 29);
        assert_eq!(rules("admin")[..27], rules("edit")[..]);
        assert_eq!(rules("admin")[27..], own("system:aggregate-to-admin")[..]);
        assert_eq!(rules("cluster-admin").len(), 2);
    }

    /// The controller's cases (`clusterroleaggregation_controller_test.go`): a labelled role adds its
    /// rules once; a rule already there is not repeated; a role matching no selector adds nothing; an
    /// empty selector selects every other role.
    #[test]
    fn a_labelled_role_extends_the_aggregate() {
        let agg = json!({"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"team": "a"}}]}, "rules": []});
        let r1 = json!({"metadata": {"name": "r1", "labels": {"team": "a"}},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
        let r2 = json!({"metadata": {"name": "r2", "labels": {"team": "a"}},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                      {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list"]}]});
        let other = json!({"metadata": {"name": "r3", "labels": {"team": "b"}},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]});
        let all: Vec<Arc<Value>> = [agg.clone(), r1, r2, other].into_iter().map(Arc::new).collect();
        let changes = stale(&all);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].0, "agg");
        assert_eq!(changes[0].1.len(), 2, "{:?}", changes[0].1);
        let empty = json!({"metadata": {"name": "none"}, "aggregationRule": {"clusterRoleSelectors": [{}]}});
        assert_eq!(aggregated_rules(&empty, &all).map(|r| r.len()), Some(3));
    }
}
