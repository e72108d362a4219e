//! RBAC for one principal, in a test mode: requests made through `EmbeddedServer::client_as` are
//! checked against the rules of the Roles and ClusterRoles given (Kubernetes' rule matching:
//! `apiGroups`, `resources` with `<resource>/<subresource>`, `verbs`, `resourceNames`, `*`), refused
//! with the real server's 403 when no rule allows them, and recorded. A test runs the whole manager
//! this way under the shipped Role and reads back what was denied (a missing grant) and which
//! granted verbs were never used (an excess grant).
//!
//! As with the real server, setting an owner reference with `blockOwnerDeletion: true` also needs
//! `update` on the owner's `finalizers` subresource (the OwnerReferencesPermissionEnforcement
//! admission plugin); the router checks it on creates and updates.

use std::collections::BTreeSet;
use std::sync::Mutex;

use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::Value;

use super::error::ApiError;

/// One request as RBAC sees it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    /// Empty for the core group.
    pub group: String,
    /// `pods`, or `workloads/status` for a subresource.
    pub resource: String,
    pub verb: String,
    pub name: Option<String>,
    /// `None` for cluster-scoped objects and requests across all namespaces.
    pub namespace: Option<String>,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "\"\""
        } else {
            &self.group
        };
        write!(f, "{} {}/{}", self.verb, group, self.resource)
    }
}

/// A principal and the rules that bind it, with what its requests used and were denied.
#[derive(Debug)]
pub struct Authorizer {
    pub user: String,
    /// Each rule with the namespace its Role binds it to (`None`: a ClusterRole, everywhere).
    rules: Vec<(Option<String>, PolicyRule)>,
    /// Where each rule (same index) comes from, as kube-apiserver's RBAC authorizer names it in an
    /// access review's `reason` (`RoleBinding "rb/ns" of Role "r" to User "jane"`); empty if unnamed.
    sources: Vec<String>,
    used: Mutex<BTreeSet<(String, String, String)>>,
    denied: Mutex<BTreeSet<Access>>,
}

fn matches(list: &[String], value: &str) -> bool {
    list.iter().any(|x| x == "*" || x == value)
}

fn resource_matches(list: &[String], resource: &str) -> bool {
    list.iter().any(|r| {
        r == "*"
            || r == resource
            || r.strip_suffix("/*")
                .is_some_and(|base| resource.split_once('/').is_some_and(|(b, _)| b == base))
            || r.strip_prefix("*/")
                .is_some_and(|sub| resource.split_once('/').is_some_and(|(_, s)| s == sub))
    })
}

fn rule_allows(rule: &PolicyRule, a: &Access) -> bool {
    let groups = rule.api_groups.as_deref().unwrap_or_default();
    let resources = rule.resources.as_deref().unwrap_or_default();
    let names = rule.resource_names.as_deref().unwrap_or_default();
    matches(&rule.verbs, &a.verb)
        && matches(groups, &a.group)
        && resource_matches(resources, &a.resource)
        && (names.is_empty() || a.name.as_deref().is_some_and(|n| names.iter().any(|x| x == n)))
}

impl Authorizer {
    /// The rules of every Role and ClusterRole among `docs` (other kinds are skipped), for `user`.
    pub fn from_documents(user: &str, docs: &[Value]) -> Result<Self, String> {
        let mut rules = Vec::new();
        for d in docs {
            let kind = d.get("kind").and_then(Value::as_str).unwrap_or_default();
            if kind != "Role" && kind != "ClusterRole" {
                continue;
            }
            let rs = d.get("rules").cloned().unwrap_or(Value::Array(vec![]));
            let parsed: Vec<PolicyRule> =
                serde_json::from_value(rs).map_err(|e| format!("{kind} rules: {e}"))?;
            let ns = (kind == "Role").then(|| {
                d.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("default")
                    .to_string()
            });
            rules.extend(parsed.into_iter().map(|r| (ns.clone(), r)));
        }
        if rules.is_empty() {
            return Err("no Role or ClusterRole rules".into());
        }
        Ok(Authorizer {
            user: user.to_string(),
            rules,
            sources: Vec::new(),
            used: Mutex::default(),
            denied: Mutex::default(),
        })
    }

    /// `user` with exactly these rules, each with the namespace it applies in (`None`: everywhere);
    /// no rule allows nothing. What a subject's bindings in the store grant (`review.rs`).
    pub fn from_rules(user: &str, rules: Vec<(Option<String>, PolicyRule)>) -> Self {
        Authorizer {
            user: user.to_string(),
            rules,
            sources: Vec::new(),
            used: Mutex::default(),
            denied: Mutex::default(),
        }
    }

    /// Names where each rule comes from (index for index with the rules), for [`Self::reason`].
    pub fn with_sources(mut self, sources: Vec<String>) -> Self {
        self.sources = sources;
        self
    }

    /// Why `a` is allowed, as kube-apiserver's RBAC authorizer says it: `RBAC: allowed by <source>` of
    /// the first rule that allows it; `None` when denied or the rule's source is unnamed.
    pub fn reason(&self, a: &Access) -> Option<String> {
        let i = self
            .rules
            .iter()
            .position(|(ns, r)| (ns.is_none() || *ns == a.namespace) && rule_allows(r, a))?;
        let source = self.sources.get(i).filter(|s| !s.is_empty())?;
        Some(format!("RBAC: allowed by {source}"))
    }

    /// The rules that apply in `namespace` (those bound everywhere, and those bound there), as a
    /// SelfSubjectRulesReview lists them; `None` lists only those bound everywhere.
    pub fn rules_in<'a>(&'a self, namespace: Option<&'a str>) -> impl Iterator<Item = &'a PolicyRule> + 'a {
        self.rules
            .iter()
            .filter(move |(ns, _)| ns.is_none() || ns.as_deref() == namespace)
            .map(|(_, r)| r)
    }

    /// Whether a rule allows `verb` on the non-resource URL `path` (`/healthz`, `/apis/*`, `*`).
    pub fn allows_non_resource(&self, verb: &str, path: &str) -> bool {
        self.rules.iter().any(|(ns, r)| {
            ns.is_none()
                && matches(&r.verbs, verb)
                && r.non_resource_urls.iter().flatten().any(|u| {
                    u == "*"
                        || u == path
                        || u.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
                })
        })
    }

    /// Whether a rule allows `a`, recorded nowhere: a probe before choosing which check to record.
    pub fn would_allow(&self, a: &Access) -> bool {
        self.rules
            .iter()
            .any(|(ns, r)| (ns.is_none() || *ns == a.namespace) && rule_allows(r, a))
    }

    /// Whether a rule allows `a`; recorded either way.
    pub fn allows(&self, a: &Access) -> bool {
        let ok = self.would_allow(a);
        if ok {
            self.used
                .lock()
                .unwrap()
                .insert((a.group.clone(), a.resource.clone(), a.verb.clone()));
        } else {
            self.denied.lock().unwrap().insert(a.clone());
        }
        ok
    }

    /// The real server's message for a denied request.
    pub fn forbidden_message(&self, a: &Access) -> String {
        let namespace = a.namespace.as_deref();
        let (res, sub) = a
            .resource
            .split_once('/')
            .map_or((a.resource.as_str(), None), |(r, s)| (r, Some(s)));
        let qualified = if a.group.is_empty() {
            res.to_string()
        } else {
            format!("{res}.{}", a.group)
        };
        let subject = match &a.name {
            Some(n) => format!("{qualified} \"{n}\" is forbidden"),
            None => format!("{qualified} is forbidden"),
        };
        let what = match sub {
            Some(s) => format!("resource \"{res}/{s}\""),
            None => format!("resource \"{res}\""),
        };
        let scope = match namespace {
            Some(ns) => format!(" in the namespace \"{ns}\""),
            None => " at the cluster scope".to_string(),
        };
        format!(
            "{subject}: User \"{}\" cannot {} {what} in API group \"{}\"{scope}",
            self.user, a.verb, a.group
        )
    }

    /// The real server's refusal of a denied request: its message, and details naming the group, the
    /// resource (without the subresource) and the object, as `apierrors.NewForbidden` fills them.
    pub fn forbidden(&self, a: &Access) -> ApiError {
        let resource = a.resource.split_once('/').map_or(a.resource.as_str(), |(r, _)| r);
        ApiError::new(403, "Forbidden", self.forbidden_message(a)).details(
            a.name.as_deref().unwrap_or_default(),
            &a.group,
            resource,
        )
    }

    /// Requests no rule allowed, in order.
    pub fn denied(&self) -> Vec<Access> {
        self.denied.lock().unwrap().iter().cloned().collect()
    }

    /// Granted (group, resource, verb) triples never used; wildcards and `resourceNames` rules
    /// cannot be expanded and are not reported.
    pub fn unused(&self) -> Vec<String> {
        let used = self.used.lock().unwrap();
        let mut out = Vec::new();
        for (_, r) in &self.rules {
            if r.resource_names.as_ref().is_some_and(|n| !n.is_empty()) {
                continue;
            }
            for g in r.api_groups.iter().flatten() {
                for res in r.resources.iter().flatten() {
                    for v in &r.verbs {
                        if g == "*" || res.contains('*') || v == "*" {
                            continue;
                        }
                        if !used.contains(&(g.clone(), res.clone(), v.clone())) {
                            let group = if g.is_empty() { "\"\"" } else { g };
                            out.push(format!("{v} {group}/{res}"));
                        }
                    }
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

/// The principal of an in-process request, put in its extensions by `EmbeddedServer::client_as`.
#[derive(Clone, Debug)]
pub struct Principal(pub std::sync::Arc<Authorizer>);

/// The owners a new object's `ownerReferences` block deletion of (`blockOwnerDeletion: true`), as
/// (apiVersion, kind, name).
pub fn blocking_owners(obj: &Value) -> Vec<(String, String, String)> {
    let refs = obj.pointer("/metadata/ownerReferences").and_then(Value::as_array);
    refs.into_iter()
        .flatten()
        .filter(|r| r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true))
        .map(|r| {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            (s("apiVersion"), s("kind"), s("name"))
        })
        .collect()
}

/// The RBAC verb of a request: `get`/`list`/`watch` for reads, `deletecollection` for a delete
/// without a name.
pub fn verb(method: &http::Method, named: bool, watch: bool) -> &'static str {
    match *method {
        http::Method::GET | http::Method::HEAD if watch => "watch",
        http::Method::GET | http::Method::HEAD if named => "get",
        http::Method::GET | http::Method::HEAD => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn access(group: &str, resource: &str, verb: &str, name: Option<&str>) -> Access {
        let namespace = Some("default".to_string());
        Access {
            group: group.into(),
            resource: resource.into(),
            verb: verb.into(),
            name: name.map(String::from),
            namespace,
        }
    }

    #[test]
    fn rules_match_as_kubernetes_matches_them() {
        let role = json!({"kind": "ClusterRole", "rules": [
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list"]},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["token"]},
            {"apiGroups": ["ray.io"], "resources": ["rayclusters/*"], "verbs": ["*"]}
        ]});
        let a = Authorizer::from_documents("u", &[role, json!({"kind": "ConfigMap"})]).unwrap();
        for (acc, want) in [
            (access("kueue.x-k8s.io", "workloads", "get", Some("w")), true),
            (access("kueue.x-k8s.io", "workloads", "watch", None), false),
            (
                access("kueue.x-k8s.io", "workloads/status", "patch", Some("w")),
                true,
            ),
            (
                access("kueue.x-k8s.io", "workloads/status", "update", Some("w")),
                false,
            ),
            (access("", "workloads", "get", Some("w")), false),
            (access("", "secrets", "get", Some("token")), true),
            (access("", "secrets", "get", Some("other")), false),
            (access("", "secrets", "list", None), false),
            (access("ray.io", "rayclusters/status", "update", Some("c")), true),
            (access("ray.io", "rayclusters", "update", Some("c")), false),
        ] {
            assert_eq!(a.allows(&acc), want, "{acc}");
        }
        assert_eq!(a.unused(), vec!["list kueue.x-k8s.io/workloads".to_string()]);
        assert_eq!(a.denied().len(), 6);
    }

    #[test]
    fn the_forbidden_message_is_the_real_servers() {
        let a = Authorizer::from_documents(
            "system:serviceaccount:ns:sa",
            &[
                json!({"kind": "Role", "metadata": {"namespace": "default"}, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
            ],
        )
        .unwrap();
        assert_eq!(
            a.forbidden_message(&access("", "pods", "delete", Some("p"))),
            "pods \"p\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot delete resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        assert_eq!(
            a.forbidden_message(&Access {
                namespace: None,
                ..access("kueue.x-k8s.io", "clusterqueues/status", "update", Some("cq"))
            }),
            "clusterqueues.kueue.x-k8s.io \"cq\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot update resource \"clusterqueues/status\" in API group \"kueue.x-k8s.io\" at the cluster scope"
        );
        let elsewhere = Access {
            namespace: Some("other".into()),
            ..access("", "pods", "get", Some("p"))
        };
        assert!(!a.allows(&elsewhere), "a Role grants only in its namespace");
        assert!(a.allows(&access("", "pods", "get", Some("p"))));
        assert_eq!(verb(&http::Method::GET, false, true), "watch");
        assert_eq!(verb(&http::Method::DELETE, false, false), "deletecollection");
    }
}
