//! The authorization review APIs (`authorization.k8s.io/v1`) and impersonation, answered from the
//! RBAC the server enforces:
//!
//! - **Who asks.** The listener's token and the in-process `client()` may do everything (as
//!   `system:masters` may on a real cluster); a `client_as` principal has its given rules. A request
//!   with `Impersonate-User` (kubectl's `--as`, `--as-group`) is authorized as that user, with the
//!   rules the store's RoleBindings and ClusterRoleBindings grant it (a ServiceAccount user also gets
//!   `system:serviceaccounts[:<ns>]`, everyone `system:authenticated`), plus what every real cluster
//!   grants `system:authenticated` (`system:basic-user`: the self reviews; `system:discovery`). The
//!   impersonator needs `impersonate` on the user (or ServiceAccount) and groups, as on a real server.
//! - **SelfSubjectAccessReview** (`kubectl auth can-i VERB RESOURCE`): whether the caller's rules
//!   allow the attributes; **SelfSubjectRulesReview** (`kubectl auth can-i --list`): the caller's
//!   rules in a namespace; **SubjectAccessReview** and **LocalSubjectAccessReview** (webhooks): the
//!   same for the `spec.user`/`spec.groups` given, from the store's bindings (needs `create` on them).
//!
//! Not modelled: ClusterRole aggregation, `extra`, field and label selector attributes (they only
//! narrow a decision RBAC makes without them), the Node and Webhook authorizers.

use std::sync::Arc;

use http::{HeaderMap, Method};
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{Value, json};

use super::error::ApiError;
use super::protobuf;
use super::rbac::{Access, Authorizer, Principal};
use super::registry::{Registry, ResourceInfo};
use super::store::{ListOptions, Store};

pub const GROUP: &str = "authorization.k8s.io";
const RBAC: &str = "rbac.authorization.k8s.io";
const MASTERS: &str = "system:masters";
const AUTHENTICATED: &str = "system:authenticated";

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(owned(groups)),
        resources: Some(owned(resources)),
        verbs: owned(verbs),
        ..Default::default()
    }
}

fn non_resource(urls: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        non_resource_urls: Some(urls.iter().map(|s| s.to_string()).collect()),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// What a real cluster's bootstrap bindings give every authenticated user: `system:basic-user`
/// (the self reviews) and `system:discovery`.
fn authenticated_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            &[GROUP],
            &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            &["create"],
        ),
        rule(&["authentication.k8s.io"], &["selfsubjectreviews"], &["create"]),
        non_resource(
            &[
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ],
            &["get"],
        ),
    ]
}

/// Everything, as `system:masters` has it.
pub fn superuser(user: &str) -> Authorizer {
    Authorizer::from_rules(
        user,
        vec![
            (None, rule(&["*"], &["*"], &["*"])),
            (None, non_resource(&["*"], &["*"])),
        ],
    )
}

/// A user and the groups it is in, as an authenticator (or impersonation) hands them to RBAC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    pub user: String,
    pub groups: Vec<String>,
}

impl Subject {
    /// With the groups the real server adds: a ServiceAccount's, and `system:authenticated`.
    pub fn authenticated(user: &str, groups: &[String]) -> Subject {
        let mut all: Vec<String> = groups.to_vec();
        if let Some(ns) = user
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            .map(|(ns, _)| ns)
        {
            all.push("system:serviceaccounts".into());
            all.push(format!("system:serviceaccounts:{ns}"));
        }
        if user != "system:anonymous" {
            all.push(AUTHENTICATED.into());
        }
        all.sort();
        all.dedup();
        Subject {
            user: user.to_string(),
            groups: all,
        }
    }

    fn binds(&self, subject: &Value, binding_ns: &str) -> bool {
        let s = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
        match s("kind") {
            "User" => s("name") == self.user,
            "Group" => self.groups.iter().any(|g| g == s("name")),
            "ServiceAccount" => {
                let ns = if s("namespace").is_empty() {
                    binding_ns
                } else {
                    s("namespace")
                };
                self.user == format!("system:serviceaccount:{ns}:{}", s("name"))
            }
            _ => false,
        }
    }
}

fn rules_of(obj: &Value) -> Vec<PolicyRule> {
    obj.get("rules")
        .cloned()
        .and_then(|r| serde_json::from_value(r).ok())
        .unwrap_or_default()
}

fn list(store: &Store, registry: &Registry, plural: &str) -> Vec<Arc<Value>> {
    let Some(info) = registry.find(RBAC, "v1", plural) else {
        return Vec::new();
    };
    store
        .list(&info, None, &ListOptions::default())
        .map(|l| l.items)
        .unwrap_or_default()
}

fn get(store: &Store, registry: &Registry, plural: &str, ns: Option<&str>, name: &str) -> Option<Arc<Value>> {
    let info = registry.find(RBAC, "v1", plural)?;
    store.get(&info, ns, name).ok()
}

/// The authorizer of `subject` from the store's bindings: ClusterRoleBindings grant their
/// ClusterRole everywhere, RoleBindings their Role or ClusterRole in the binding's namespace.
pub fn authorizer_for(store: &Store, registry: &Registry, subject: &Subject) -> Authorizer {
    if subject.groups.iter().any(|g| g == MASTERS) {
        return superuser(&subject.user);
    }
    let text = |o: &Value, p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    // The first subject of a binding that names this one, described as kube-apiserver's RBAC
    // authorizer describes it.
    let bound = |b: &Value, ns: &str| {
        let s = b
            .get("subjects")
            .and_then(Value::as_array)?
            .iter()
            .find(|s| subject.binds(s, ns))?;
        let (kind, name) = (text(s, "/kind"), text(s, "/name"));
        Some(if kind == "ServiceAccount" {
            let sa_ns = Some(text(s, "/namespace")).filter(|n| !n.is_empty());
            format!(
                "{kind} {:?}",
                format!("{name}/{}", sa_ns.as_deref().unwrap_or(ns))
            )
        } else {
            format!("{kind} {name:?}")
        })
    };
    let mut rules: Vec<(Option<String>, PolicyRule)> = Vec::new();
    let mut sources: Vec<String> = Vec::new();
    for b in list(store, registry, "clusterrolebindings") {
        if text(&b, "/roleRef/kind") == "ClusterRole"
            && let Some(to) = bound(&b, "")
            && let Some(role) = get(store, registry, "clusterroles", None, &text(&b, "/roleRef/name"))
        {
            let source = format!(
                "ClusterRoleBinding {:?} of ClusterRole {:?} to {to}",
                text(&b, "/metadata/name"),
                text(&b, "/roleRef/name")
            );
            for r in rules_of(&role) {
                rules.push((None, r));
                sources.push(source.clone());
            }
        }
    }
    for b in list(store, registry, "rolebindings") {
        let ns = text(&b, "/metadata/namespace");
        let Some(to) = bound(&b, &ns) else {
            continue;
        };
        let name = text(&b, "/roleRef/name");
        let kind = text(&b, "/roleRef/kind");
        let role = match kind.as_str() {
            "Role" => get(store, registry, "roles", Some(&ns), &name),
            "ClusterRole" => get(store, registry, "clusterroles", None, &name),
            _ => None,
        };
        if let Some(role) = role {
            let source = format!(
                "RoleBinding {:?} of {kind} {name:?} to {to}",
                format!("{}/{ns}", text(&b, "/metadata/name"))
            );
            for r in rules_of(&role) {
                rules.push((Some(ns.clone()), r));
                sources.push(source.clone());
            }
        }
    }
    if subject.groups.iter().any(|g| g == AUTHENTICATED) {
        for r in authenticated_rules() {
            rules.push((None, r));
            sources.push(String::new());
        }
    }
    Authorizer::from_rules(&subject.user, rules).with_sources(sources)
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> Vec<&'a str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect()
}

/// Who the request is for authorization: `None` may do everything (the listener's token, the
/// in-process client); otherwise the `client_as` principal, or the user it impersonates.
pub fn principal(
    store: &Store,
    registry: &Registry,
    headers: &HeaderMap,
    given: Option<&Principal>,
) -> Result<Option<Arc<Authorizer>>, ApiError> {
    let given = given.map(|p| p.0.clone());
    let user = header_values(headers, "impersonate-user")
        .first()
        .map(|u| u.to_string());
    let groups: Vec<String> = header_values(headers, "impersonate-group")
        .into_iter()
        .map(String::from)
        .collect();
    let Some(user) = user else {
        if !groups.is_empty() {
            return Err(ApiError::new(
                403,
                "Forbidden",
                "requested impersonation of groups without impersonating a user",
            ));
        }
        return Ok(given);
    };
    if let Some(authz) = &given {
        let mut wanted = vec![match user
            .strip_prefix("system:serviceaccount:")
            .and_then(|r| r.split_once(':'))
        {
            Some((ns, name)) => Access {
                group: String::new(),
                resource: "serviceaccounts".into(),
                verb: "impersonate".into(),
                name: Some(name.into()),
                namespace: Some(ns.into()),
            },
            None => Access {
                group: String::new(),
                resource: "users".into(),
                verb: "impersonate".into(),
                name: Some(user.clone()),
                namespace: None,
            },
        }];
        wanted.extend(groups.iter().map(|g| Access {
            group: String::new(),
            resource: "groups".into(),
            verb: "impersonate".into(),
            name: Some(g.clone()),
            namespace: None,
        }));
        if let Some(denied) = wanted.iter().find(|a| !authz.allows(a)) {
            return Err(authz.forbidden(denied));
        }
    }
    Ok(Some(Arc::new(authorizer_for(
        store,
        registry,
        &Subject::authenticated(&user, &groups),
    ))))
}

fn invalid(kind: &str, field: &str, why: &str) -> ApiError {
    let fe = crate::api::validation::FieldError::invalid(field, why);
    ApiError::invalid(&format!("{kind}.{GROUP}"), "", &[fe]).details("", GROUP, kind)
}

/// A SubjectAccessReview's own refusal: kube-apiserver builds it from the decoded review, which
/// carries no kind, so the qualified kind is `.authorization.k8s.io` and `details` has only the group.
fn invalid_review(field: &str, why: &str) -> ApiError {
    let fe = crate::api::validation::FieldError::invalid(field, why);
    ApiError::invalid(&format!(".{GROUP}"), "", &[fe]).details("", GROUP, "")
}

/// An access review's `status`: `allowed`, and for a resource request that a binding allows, the RBAC
/// authorizer's `reason` naming it.
fn decide(
    authz: Option<&Authorizer>,
    spec: &Value,
    kind: &str,
    namespace: Option<&str>,
) -> Result<Value, ApiError> {
    let res = spec.get("resourceAttributes").filter(|v| v.is_object());
    let non = spec.get("nonResourceAttributes").filter(|v| v.is_object());
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match (res, non) {
        (Some(r), None) => {
            let resource = match s(r, "subresource").as_str() {
                "" => s(r, "resource"),
                sub => format!("{}/{sub}", s(r, "resource")),
            };
            let ns = namespace
                .map(String::from)
                .or_else(|| Some(s(r, "namespace")).filter(|n| !n.is_empty()));
            let name = Some(s(r, "name")).filter(|n| !n.is_empty());
            let access = Access {
                group: s(r, "group"),
                resource,
                verb: s(r, "verb"),
                name,
                namespace: ns,
            };
            let mut status = json!({"allowed": authz.is_none_or(|a| a.would_allow(&access))});
            if let Some(reason) = authz.and_then(|a| a.reason(&access)) {
                status["reason"] = json!(reason);
            }
            Ok(status)
        }
        (None, Some(n)) => Ok(json!({
            "allowed": authz.is_none_or(|a| a.allows_non_resource(&s(n, "verb"), &s(n, "path")))
        })),
        _ => Err(invalid(
            kind,
            "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
    }
}

fn rules_review(authz: Option<&Authorizer>, namespace: &str) -> Value {
    let rules: Vec<PolicyRule> = match authz {
        None => superuser("").rules_in(None).cloned().collect(),
        Some(a) => {
            let mut r: Vec<PolicyRule> = a
                .rules_in(Some(namespace).filter(|n| !n.is_empty()))
                .cloned()
                .collect();
            // What every authenticated user holds, whether or not the principal's own rules say so.
            for x in authenticated_rules() {
                if !r.contains(&x) {
                    r.push(x);
                }
            }
            r
        }
    };
    let list = |v: &Option<Vec<String>>| json!(v.clone().unwrap_or_default());
    let resource_rules: Vec<Value> = rules
        .iter()
        .filter(|r| r.resources.as_ref().is_some_and(|x| !x.is_empty()))
        .map(|r| json!({"verbs": r.verbs, "apiGroups": list(&r.api_groups), "resources": list(&r.resources), "resourceNames": list(&r.resource_names)}))
        .collect();
    let non_resource_rules: Vec<Value> = rules
        .iter()
        .filter(|r| r.non_resource_urls.as_ref().is_some_and(|x| !x.is_empty()))
        .map(|r| json!({"verbs": r.verbs, "nonResourceURLs": list(&r.non_resource_urls)}))
        .collect();
    json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false})
}

/// Serves a request to `authorization.k8s.io` (`info`): POST of a review, answered 201 with its
/// status; any other method 405, as the real server (reviews are create-only and never stored).
pub fn serve(
    srv: &super::EmbeddedServer,
    authz: Option<&Authorizer>,
    info: &ResourceInfo,
    url_namespace: Option<&str>,
    method: &Method,
    content_type: &str,
    body: &[u8],
) -> Result<(u16, Value), ApiError> {
    if *method != Method::POST {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({method} {})",
            info.qualified_plural()
        )));
    }
    let ct = content_type.split(';').next().unwrap_or("").trim();
    let mut obj: Value = if ct == "application/vnd.kubernetes.protobuf" {
        protobuf::decode(body, info).map_err(|e| ApiError::unsupported_media(e.to_string()))?
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))?
    };
    if !obj.is_object() {
        return Err(ApiError::bad_request("the request body must be a JSON object"));
    }
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let kind = info.kind.as_str();
    let status = match kind {
        "SelfSubjectAccessReview" => decide(authz, &spec, kind, None)?,
        "SelfSubjectRulesReview" => {
            rules_review(authz, spec.get("namespace").and_then(Value::as_str).unwrap_or(""))
        }
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let access = Access {
                group: GROUP.into(),
                resource: info.plural.clone(),
                verb: "create".into(),
                name: None,
                namespace: url_namespace.map(String::from),
            };
            if let Some(a) = authz
                && !a.allows(&access)
            {
                return Err(a.forbidden(&access));
            }
            if let (Some(url_ns), Some(ns)) = (
                url_namespace,
                spec.pointer("/resourceAttributes/namespace")
                    .and_then(Value::as_str),
            ) && !ns.is_empty()
                && ns != url_ns
            {
                return Err(invalid(
                    kind,
                    "spec.resourceAttributes.namespace",
                    "must match metadata.namespace",
                ));
            }
            let user = spec.get("user").and_then(Value::as_str).unwrap_or("");
            let groups: Vec<String> = spec
                .get("groups")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|g| g.as_str().map(String::from))
                .collect();
            if user.is_empty() && groups.is_empty() {
                return Err(invalid_review(
                    "spec.user",
                    // The user, empty, as the value kube-apiserver prints.
                    "\"\": at least one of user or group must be specified",
                ));
            }
            // The subject is exactly who the spec names (no groups added: a webhook passes them on).
            let subject = Subject {
                user: user.to_string(),
                groups,
            };
            let theirs = authorizer_for(&srv.store, &srv.registry, &subject);
            decide(Some(&theirs), &spec, kind, url_namespace)?
        }
        other => return Err(ApiError::not_found(&info.qualified_plural(), other)),
    };
    obj["status"] = status;
    obj["apiVersion"] = json!(info.api_version());
    obj["kind"] = json!(kind);
    if obj.get("metadata").is_none_or(|m| !m.is_object()) {
        obj["metadata"] = json!({});
    }
    Ok((201, obj))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::{AllowAll, EmbeddedServer};

    fn srv_with(docs: &[Value]) -> Arc<EmbeddedServer> {
        let srv = EmbeddedServer::new(&[], Arc::new(AllowAll));
        for d in docs {
            let (group, version) = d["apiVersion"]
                .as_str()
                .unwrap()
                .split_once('/')
                .unwrap_or(("", "v1"));
            let kind = d["kind"].as_str().unwrap();
            let info = srv
                .registry
                .all()
                .iter()
                .find(|r| r.group == group && r.version == version && r.kind == kind)
                .cloned()
                .unwrap();
            let ns = d.pointer("/metadata/namespace").and_then(Value::as_str);
            if let Some(ns) = ns {
                let nsi = srv.registry.find("", "v1", "namespaces").unwrap();
                let _ = srv
                    .store
                    .create(&nsi, None, json!({"metadata": {"name": ns}}), false);
            }
            srv.store.create(&info, ns, d.clone(), false).unwrap();
        }
        srv
    }

    fn access(group: &str, resource: &str, verb: &str, ns: Option<&str>) -> Access {
        Access {
            group: group.into(),
            resource: resource.into(),
            verb: verb.into(),
            name: None,
            namespace: ns.map(String::from),
        }
    }

    /// Kubernetes RBAC's binding semantics: a RoleBinding grants in its namespace (also a
    /// ClusterRole's rules), a ClusterRoleBinding everywhere, subjects by user, group or ServiceAccount.
    #[test]
    fn bindings_in_the_store_grant_what_real_rbac_grants() {
        let srv = srv_with(&[
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "reader", "namespace": "team"},
                   "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "bot-reads", "namespace": "team"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
                   "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "team"}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "wl-editor"},
                   "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["create"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "ml-edits", "namespace": "ml"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "wl-editor"},
                   "subjects": [{"kind": "Group", "name": "ml-team"}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "alice-everywhere"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "wl-editor"},
                   "subjects": [{"kind": "User", "name": "alice"}]}),
        ]);
        let bot = authorizer_for(
            &srv.store,
            &srv.registry,
            &Subject::authenticated("system:serviceaccount:team:bot", &[]),
        );
        assert!(bot.would_allow(&access("", "pods", "list", Some("team"))));
        assert!(!bot.would_allow(&access("", "pods", "list", Some("other"))));
        assert!(
            !bot.would_allow(&access("", "pods", "list", None)),
            "all namespaces needs a cluster-wide grant"
        );
        assert!(!bot.would_allow(&access("", "pods", "delete", Some("team"))));
        assert!(
            bot.would_allow(&access(GROUP, "selfsubjectaccessreviews", "create", None)),
            "system:basic-user"
        );
        let ml = authorizer_for(
            &srv.store,
            &srv.registry,
            &Subject::authenticated("bob", &["ml-team".into()]),
        );
        assert!(ml.would_allow(&access("kueue.x-k8s.io", "workloads", "create", Some("ml"))));
        assert!(!ml.would_allow(&access("kueue.x-k8s.io", "workloads", "create", Some("team"))));
        let alice = authorizer_for(&srv.store, &srv.registry, &Subject::authenticated("alice", &[]));
        assert!(alice.would_allow(&access("kueue.x-k8s.io", "workloads", "create", Some("anywhere"))));
        let admin = authorizer_for(
            &srv.store,
            &srv.registry,
            &Subject::authenticated("root", &[MASTERS.into()]),
        );
        assert!(
            admin.would_allow(&access("x", "y", "z", None)) && admin.allows_non_resource("get", "/metrics")
        );
        assert!(
            bot.allows_non_resource("get", "/apis/ray.io") && !bot.allows_non_resource("get", "/metrics")
        );
    }

    #[test]
    fn reviews_answer_from_the_callers_rules() {
        let srv = srv_with(&[]);
        let info = |kind: &str| {
            srv.registry
                .all()
                .iter()
                .find(|r| r.kind == kind)
                .cloned()
                .unwrap()
        };
        let ssar = |verb: &str, ns: &str| {
            serde_json::to_vec(
                &json!({"spec": {"resourceAttributes": {"verb": verb, "resource": "pods", "namespace": ns}}}),
            )
            .unwrap()
        };
        let role = json!({"kind": "Role", "metadata": {"namespace": "team"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
        let authz = Authorizer::from_documents("u", &[role]).unwrap();
        let post = |authz: Option<&Authorizer>, kind: &str, body: &[u8]| {
            serve(
                &srv,
                authz,
                &info(kind),
                None,
                &Method::POST,
                "application/json",
                body,
            )
        };
        let (code, out) = post(Some(&authz), "SelfSubjectAccessReview", &ssar("get", "team")).unwrap();
        assert_eq!((code, out["status"]["allowed"].as_bool()), (201, Some(true)));
        assert_eq!(out["apiVersion"], "authorization.k8s.io/v1");
        let (_, out) = post(Some(&authz), "SelfSubjectAccessReview", &ssar("delete", "team")).unwrap();
        assert_eq!(out["status"]["allowed"], false);
        let (_, out) = post(Some(&authz), "SelfSubjectAccessReview", &ssar("get", "other")).unwrap();
        assert_eq!(out["status"]["allowed"], false);
        let (_, out) = post(None, "SelfSubjectAccessReview", &ssar("delete", "")).unwrap();
        assert_eq!(
            out["status"]["allowed"], true,
            "the listener's token may do everything"
        );
        let err = post(Some(&authz), "SelfSubjectAccessReview", br#"{"spec": {}}"#).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message
                .contains("exactly one of nonResourceAttributes or resourceAttributes"),
            "{}",
            err.message
        );
        let (_, rules) = post(
            Some(&authz),
            "SelfSubjectRulesReview",
            br#"{"spec": {"namespace": "team"}}"#,
        )
        .unwrap();
        let rr = rules["status"]["resourceRules"].as_array().unwrap();
        assert!(
            rr.iter()
                .any(|r| r["resources"] == json!(["pods"]) && r["verbs"] == json!(["get"])),
            "{rules}"
        );
        let (_, elsewhere) = post(
            Some(&authz),
            "SelfSubjectRulesReview",
            br#"{"spec": {"namespace": "other"}}"#,
        )
        .unwrap();
        assert!(
            !elsewhere["status"]["resourceRules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["resources"] == json!(["pods"]))
        );
        // A SubjectAccessReview needs create on it, and judges the subject named, not the caller.
        let sar = br#"{"spec": {"user": "nobody", "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "team"}}}"#;
        assert_eq!(
            post(Some(&authz), "SubjectAccessReview", sar).unwrap_err().code,
            403
        );
        let (_, out) = post(None, "SubjectAccessReview", sar).unwrap();
        assert_eq!(out["status"]["allowed"], false);
        let masters = br#"{"spec": {"user": "x", "groups": ["system:masters"], "resourceAttributes": {"verb": "get", "resource": "pods"}}}"#;
        assert_eq!(
            post(None, "SubjectAccessReview", masters).unwrap().1["status"]["allowed"],
            true
        );
        assert_eq!(
            post(
                None,
                "SubjectAccessReview",
                br#"{"spec": {"resourceAttributes": {}}}"#
            )
            .unwrap_err()
            .code,
            422
        );
        let get = serve(
            &srv,
            None,
            &info("SelfSubjectAccessReview"),
            None,
            &Method::GET,
            "",
            b"",
        );
        assert_eq!(get.unwrap_err().code, 405);
    }

    #[test]
    fn impersonation_needs_the_impersonate_verb() {
        let srv = srv_with(&[]);
        let mut headers = HeaderMap::new();
        headers.insert(
            "impersonate-user",
            "system:serviceaccount:team:bot".parse().unwrap(),
        );
        let p = principal(&srv.store, &srv.registry, &headers, None)
            .unwrap()
            .expect("impersonated");
        assert_eq!(p.user, "system:serviceaccount:team:bot");
        assert!(!p.would_allow(&access("", "pods", "get", Some("team"))));
        let weak = Authorizer::from_documents("u", &[json!({"kind": "ClusterRole", "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})]).unwrap();
        let err = principal(
            &srv.store,
            &srv.registry,
            &headers,
            Some(&Principal(Arc::new(weak))),
        )
        .unwrap_err();
        assert_eq!(err.code, 403);
        assert!(
            err.message
                .contains("cannot impersonate resource \"serviceaccounts\""),
            "{}",
            err.message
        );
        let mut groups_only = HeaderMap::new();
        groups_only.insert("impersonate-group", "g".parse().unwrap());
        assert_eq!(
            principal(&srv.store, &srv.registry, &groups_only, None)
                .unwrap_err()
                .code,
            403
        );
        assert!(
            principal(&srv.store, &srv.registry, &HeaderMap::new(), None)
                .unwrap()
                .is_none()
        );
    }
}
