//! The ServiceAccount, Role and RoleBinding KubeRay's RayCluster controller creates for the in-tree
//! autoscaler sidecar (`common/rbac.go`): the sidecar lists and patches the cluster's pods and patches
//! the RayCluster's replicas. Named after the cluster (name-checked); the ServiceAccount is the head
//! template's own `serviceAccountName` when set, and then the user must create it. Pure: the shell creates
//! whichever is absent, owned by the RayCluster.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};

use crate::api::ray::RayCluster;
use crate::api::ray::constants as c;
use crate::rayservice::cluster::names;

/// The ServiceAccount the head pod runs as with autoscaling on (KubeRay's
/// `GetHeadGroupServiceAccountName`): the template's own, or the cluster's name.
pub fn service_account_name(rc: &RayCluster) -> String {
    rc.spec
        .head_group_spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| rc.name_any())
}

/// True when the head template names its ServiceAccount: the user creates it, the operator never does.
pub fn user_names_service_account(rc: &RayCluster) -> bool {
    rc.spec
        .head_group_spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.as_deref())
        .is_some_and(|s| !s.is_empty())
}

fn meta(rc: &RayCluster, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(names::check_name(name)),
        namespace: rc.namespace(),
        labels: Some(BTreeMap::from([
            (c::LABEL_CLUSTER.to_string(), rc.name_any()),
            (c::LABEL_APP_NAME.to_string(), c::APPLICATION_NAME.to_string()),
            (c::LABEL_CREATED_BY.to_string(), c::COMPONENT_NAME.to_string()),
        ])),
        owner_references: rc.controller_owner_ref(&()).map(|o| vec![o]),
        ..Default::default()
    }
}

pub fn service_account(rc: &RayCluster) -> ServiceAccount {
    ServiceAccount {
        metadata: meta(rc, &service_account_name(rc)),
        ..Default::default()
    }
}

fn rule(group: &str, resource: &str, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(vec![resource.to_string()]),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

/// KubeRay's `BuildRole`: exactly what the autoscaler sidecar does.
pub fn role(rc: &RayCluster) -> Role {
    Role {
        metadata: meta(rc, &rc.name_any()),
        rules: Some(vec![
            rule("", "pods", &["get", "list", "watch", "patch"]),
            rule("", "pods/resize", &["patch"]),
            rule(c::RAY_GROUP, "rayclusters", &["get", "patch"]),
        ]),
    }
}

/// KubeRay's `BuildRoleBinding`: the Role above, bound to the head pod's ServiceAccount.
pub fn role_binding(rc: &RayCluster) -> RoleBinding {
    RoleBinding {
        metadata: meta(rc, &rc.name_any()),
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: names::check_name(&service_account_name(rc)),
            namespace: rc.namespace(),
            ..Default::default()
        }]),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: names::check_name(&rc.name_any()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rc(sa: Option<&str>) -> RayCluster {
        let mut v = serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "raycluster-autoscaler", "namespace": "ml", "uid": "u1"},
            "spec": {"enableInTreeAutoscaling": true, "headGroupSpec": {"rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}}}
        });
        if let Some(sa) = sa {
            v["spec"]["headGroupSpec"]["template"]["spec"]["serviceAccountName"] = sa.into();
        }
        serde_json::from_value(v).expect("a RayCluster")
    }

    /// KubeRay `common/rbac.go` BuildServiceAccount / BuildRole / BuildRoleBinding: named after the
    /// cluster, KubeRay's labels, the three rules, the subject in the cluster's namespace.
    #[test]
    fn named_after_the_cluster_with_kuberay_rules() {
        let rc = rc(None);
        let sa = service_account(&rc);
        assert_eq!(sa.metadata.name.as_deref(), Some("raycluster-autoscaler"));
        assert_eq!(sa.metadata.namespace.as_deref(), Some("ml"));
        let labels = sa.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels[c::LABEL_CLUSTER], "raycluster-autoscaler");
        assert_eq!(labels[c::LABEL_APP_NAME], "kuberay");
        assert_eq!(labels[c::LABEL_CREATED_BY], "kuberay-operator");
        let owner = &sa.metadata.owner_references.clone().unwrap_or_default()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("RayCluster", Some(true))
        );

        let rules = role(&rc).rules.unwrap_or_default();
        let flat: Vec<(String, String, Vec<String>)> = rules
            .iter()
            .map(|r| {
                (
                    r.api_groups.clone().unwrap_or_default().join(","),
                    r.resources.clone().unwrap_or_default().join(","),
                    r.verbs.clone(),
                )
            })
            .collect();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            flat,
            vec![
                ("".into(), "pods".into(), s(&["get", "list", "watch", "patch"])),
                ("".into(), "pods/resize".into(), s(&["patch"])),
                ("ray.io".into(), "rayclusters".into(), s(&["get", "patch"])),
            ]
        );
        let rb = role_binding(&rc);
        assert_eq!(rb.role_ref.name, "raycluster-autoscaler");
        assert_eq!(rb.role_ref.kind, "Role");
        let subject = &rb.subjects.unwrap_or_default()[0];
        assert_eq!(
            (
                subject.kind.as_str(),
                subject.name.as_str(),
                subject.namespace.as_deref()
            ),
            ("ServiceAccount", "raycluster-autoscaler", Some("ml"))
        );
    }

    /// KubeRay `common/rbac_test.go` TestBuildRoleBindingSubjectAndRoleRefName: the user's own
    /// ServiceAccount is the subject (and never created by the operator); a long cluster name is clipped
    /// in both the subject and the role reference.
    #[test]
    fn a_user_named_service_account_is_bound_not_owned() {
        let rc = rc(Some("my-sa"));
        assert!(user_names_service_account(&rc));
        assert_eq!(service_account_name(&rc), "my-sa");
        assert_eq!(role_binding(&rc).subjects.unwrap_or_default()[0].name, "my-sa");
        assert_eq!(role(&rc).metadata.name.as_deref(), Some("raycluster-autoscaler"));
        assert!(!user_names_service_account(&super::tests::rc(Some(""))));
        let mut long = super::tests::rc(None);
        long.metadata.name = Some("r".repeat(60));
        let rb = role_binding(&long);
        assert_eq!(rb.role_ref.name.len(), 50);
        assert_eq!(rb.subjects.unwrap_or_default()[0].name, rb.role_ref.name);
    }
}
