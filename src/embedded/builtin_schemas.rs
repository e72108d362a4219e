//! The schemas server-side field validation holds built-in kinds and every object's `metadata` to
//! (`field_validation.rs`): k8s-openapi's, for the Kubernetes version the server serves, generated
//! once on first use. Each is one JSON Schema whose named types sit under `$defs` and are reached by
//! `$ref`, as schemars writes them.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use k8s_openapi::api::{
    admissionregistration, authorization, batch, coordination, core, discovery, events, rbac, scheduling,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

fn schema<T: schemars::JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null)
}

/// `(group, version, kind)` of each built-in kind the server serves, and its schema.
static BUILTIN: LazyLock<BTreeMap<(&'static str, &'static str, &'static str), Value>> = LazyLock::new(|| {
    let mut m = BTreeMap::new();
    m.insert(("", "v1", "Namespace"), schema::<core::v1::Namespace>());
    m.insert(("", "v1", "Pod"), schema::<core::v1::Pod>());
    m.insert(("", "v1", "Node"), schema::<core::v1::Node>());
    m.insert(("", "v1", "Service"), schema::<core::v1::Service>());
    m.insert(("", "v1", "Event"), schema::<core::v1::Event>());
    m.insert(("", "v1", "ConfigMap"), schema::<core::v1::ConfigMap>());
    m.insert(("", "v1", "Secret"), schema::<core::v1::Secret>());
    m.insert(("", "v1", "ResourceQuota"), schema::<core::v1::ResourceQuota>());
    m.insert(("", "v1", "ServiceAccount"), schema::<core::v1::ServiceAccount>());
    m.insert(("", "v1", "Binding"), schema::<core::v1::Binding>());
    m.insert(("", "v1", "Endpoints"), schema::<core::v1::Endpoints>());
    m.insert(("", "v1", "LimitRange"), schema::<core::v1::LimitRange>());
    m.insert(
        ("", "v1", "PersistentVolumeClaim"),
        schema::<core::v1::PersistentVolumeClaim>(),
    );
    m.insert(("", "v1", "PodTemplate"), schema::<core::v1::PodTemplate>());
    m.insert(
        ("", "v1", "ReplicationController"),
        schema::<core::v1::ReplicationController>(),
    );
    m.insert(("batch", "v1", "Job"), schema::<batch::v1::Job>());
    m.insert(("batch", "v1", "CronJob"), schema::<batch::v1::CronJob>());
    // Served only with `ServerConfig::real_cluster` (`registry.rs`).
    m.insert(
        ("apps", "v1", "Deployment"),
        schema::<k8s_openapi::api::apps::v1::Deployment>(),
    );
    m.insert(
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        schema::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(),
    );
    m.insert(("events.k8s.io", "v1", "Event"), schema::<events::v1::Event>());
    m.insert(
        ("coordination.k8s.io", "v1", "Lease"),
        schema::<coordination::v1::Lease>(),
    );
    m.insert(
        ("discovery.k8s.io", "v1", "EndpointSlice"),
        schema::<discovery::v1::EndpointSlice>(),
    );
    m.insert(
        ("rbac.authorization.k8s.io", "v1", "Role"),
        schema::<rbac::v1::Role>(),
    );
    m.insert(
        ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
        schema::<rbac::v1::RoleBinding>(),
    );
    m.insert(
        ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
        schema::<rbac::v1::ClusterRole>(),
    );
    m.insert(
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
        schema::<rbac::v1::ClusterRoleBinding>(),
    );
    m.insert(
        ("authorization.k8s.io", "v1", "LocalSubjectAccessReview"),
        schema::<authorization::v1::LocalSubjectAccessReview>(),
    );
    m.insert(
        ("authorization.k8s.io", "v1", "SelfSubjectAccessReview"),
        schema::<authorization::v1::SelfSubjectAccessReview>(),
    );
    m.insert(
        ("authorization.k8s.io", "v1", "SelfSubjectRulesReview"),
        schema::<authorization::v1::SelfSubjectRulesReview>(),
    );
    m.insert(
        ("authorization.k8s.io", "v1", "SubjectAccessReview"),
        schema::<authorization::v1::SubjectAccessReview>(),
    );
    m.insert(
        ("scheduling.k8s.io", "v1", "PriorityClass"),
        schema::<scheduling::v1::PriorityClass>(),
    );
    m.insert(
        (
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
        ),
        schema::<admissionregistration::v1::MutatingWebhookConfiguration>(),
    );
    m.insert(
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
        ),
        schema::<admissionregistration::v1::ValidatingWebhookConfiguration>(),
    );
    m
});

static OBJECT_META: LazyLock<Value> = LazyLock::new(schema::<ObjectMeta>);

/// The schema of a built-in kind, if the server serves it.
pub fn builtin(group: &str, version: &str, kind: &str) -> Option<&'static Value> {
    BUILTIN
        .iter()
        .find(|((g, v, k), _)| *g == group && *v == version && *k == kind)
        .map(|(_, s)| s)
}

/// ObjectMeta's schema: what every object's `metadata` may hold.
pub fn object_meta() -> &'static Value {
    &OBJECT_META
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_kind_of_the_registry_has_a_schema() {
        for info in super::super::registry::builtins() {
            let s = builtin(&info.group, &info.version, &info.kind)
                .unwrap_or_else(|| panic!("no schema for {}/{} {}", info.group, info.version, info.kind));
            assert!(
                s.get("properties").is_some_and(Value::is_object),
                "{} has no properties",
                info.kind
            );
        }
        assert!(object_meta()["properties"]["labels"]["additionalProperties"].is_object());
    }
}
