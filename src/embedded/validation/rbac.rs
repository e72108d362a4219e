//! Roles and bindings, after kube-apiserver's `pkg/apis/rbac/validation/validation.go`
//! (`ValidatePolicyRule`, `ValidateRoleBindingSubject`, the role reference checks).

use serde_json::{Value, json};

use super::{invalid, list_at, not_supported, required, str_at};
use crate::api::validation::{FieldError, Path};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// `ValidatePolicyRule` for every rule of a Role (`namespaced`) or ClusterRole.
pub fn validate_role(obj: &Value, namespaced: bool, errs: &mut Vec<FieldError>) {
    for (i, rule) in list_at(obj, "rules").iter().enumerate() {
        let p = Path::root("rules").index(i);
        if list_at(rule, "verbs").is_empty() {
            errs.push(required(
                &p.child("verbs"),
                "verbs must contain at least one value",
            ));
        }
        let urls = list_at(rule, "nonResourceURLs");
        if !urls.is_empty() {
            let v = Value::Array(urls.to_vec());
            if namespaced {
                errs.push(invalid(
                    &p.child("nonResourceURLs"),
                    &v,
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if !list_at(rule, "apiGroups").is_empty() || !list_at(rule, "resources").is_empty() {
                errs.push(invalid(
                    &p.child("nonResourceURLs"),
                    &v,
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if list_at(rule, "apiGroups").is_empty() {
            errs.push(required(
                &p.child("apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if list_at(rule, "resources").is_empty() {
            errs.push(required(
                &p.child("resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
}

/// On update, a binding's `roleRef` may not change (`ValidateRoleBindingUpdate`,
/// `ValidateClusterRoleBindingUpdate`): the value is the JSON of the internal `rbac.RoleRef`, whose
/// fields have no JSON tags (so their Go names).
pub fn validate_binding_update(obj: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let field = |v: &Value, f: &str| {
        str_at(v.get("roleRef").unwrap_or(&Value::Null), f)
            .unwrap_or_default()
            .to_string()
    };
    let same = ["apiGroup", "kind", "name"]
        .iter()
        .all(|f| field(obj, f) == field(old, f));
    if !same {
        errs.push(FieldError::invalid(
            &Path::root("roleRef"),
            format!(
                "{}: cannot change roleRef",
                json!({"APIGroup": field(obj, "apiGroup"), "Kind": field(obj, "kind"), "Name": field(obj, "name")})
            ),
        ));
    }
}

/// A RoleBinding (`namespaced`) or ClusterRoleBinding: the role it names and each subject.
pub fn validate_binding(obj: &Value, namespaced: bool, errs: &mut Vec<FieldError>) {
    let role_ref = obj.get("roleRef").unwrap_or(&Value::Null);
    let rp = Path::root("roleRef");
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = str_at(role_ref, "kind").unwrap_or_default();
    if !kinds.contains(&kind) {
        errs.push(not_supported(&rp.child("kind"), &json!(kind), kinds));
    }
    if str_at(role_ref, "name").unwrap_or_default().is_empty() {
        errs.push(required(&rp.child("name"), ""));
    }
    for (i, s) in list_at(obj, "subjects").iter().enumerate() {
        let p = Path::root("subjects").index(i);
        if str_at(s, "name").unwrap_or_default().is_empty() {
            errs.push(required(&p.child("name"), ""));
        }
        let group = str_at(s, "apiGroup").unwrap_or_default();
        match str_at(s, "kind").unwrap_or_default() {
            "ServiceAccount" => {
                if !group.is_empty() {
                    errs.push(not_supported(&p.child("apiGroup"), &json!(group), &[""]));
                }
                if !namespaced && str_at(s, "namespace").unwrap_or_default().is_empty() {
                    errs.push(required(&p.child("namespace"), ""));
                }
            }
            "User" | "Group" => {
                // Unset, the defaults fill it in.
                if !group.is_empty() && group != RBAC_GROUP {
                    errs.push(not_supported(&p.child("apiGroup"), &json!(group), &[RBAC_GROUP]));
                }
            }
            other => errs.push(not_supported(
                &p.child("kind"),
                &json!(other),
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
}
