//! The token Secret KubeRay's RayCluster controller creates for `authOptions.mode: token` when the user
//! named none: `<cluster>` (name-checked), key `auth_token`, a random 32-byte token in base64, labelled
//! `ray.io/cluster` and owned by the cluster. Not created with Kubernetes token auth (ServiceAccount tokens
//! do the job) or when `secretName` is given (the user's Secret). Pure, except for the token the caller draws.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use rand::Rng;

use crate::api::ray::RayCluster;
use crate::api::ray::constants as c;
use crate::api::ray::raycluster::AuthMode;
use crate::rayservice::cluster::names;

/// A fresh token: 32 random bytes, base64 (KubeRay's `generateRandomToken(32)`).
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill(&mut bytes);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The Secret to create if absent, or `None` when the operator creates none for this cluster.
pub fn generated_secret(rc: &RayCluster, token: &str) -> Option<Secret> {
    let auth = rc.spec.auth_options.as_ref()?;
    if auth.mode != Some(AuthMode::Token)
        || auth.enable_k8s_token_auth == Some(true)
        || auth.secret_name.as_deref().is_some_and(|s| !s.is_empty())
    {
        return None;
    }
    let cluster = rc.metadata.name.clone()?;
    Some(Secret {
        metadata: ObjectMeta {
            name: Some(names::check_name(&cluster)),
            namespace: rc.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([(c::LABEL_CLUSTER.to_string(), cluster)])),
            owner_references: rc.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        string_data: Some(BTreeMap::from([(
            c::AUTH_TOKEN_KEY.to_string(),
            token.to_string(),
        )])),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ray::raycluster::AuthOptions;

    fn rc(mode: Option<AuthMode>, secret: Option<&str>, k8s: Option<bool>) -> RayCluster {
        let mut rc = RayCluster::new("demo", Default::default());
        rc.metadata.namespace = Some("ml".into());
        rc.metadata.uid = Some("u1".into());
        rc.spec.auth_options = Some(AuthOptions {
            mode,
            secret_name: secret.map(str::to_string),
            enable_k8s_token_auth: k8s,
        });
        rc
    }

    #[test]
    fn created_only_for_operator_managed_tokens() {
        let cases = [
            (Some(AuthMode::Token), None, None, true),
            (Some(AuthMode::Token), Some(""), Some(false), true),
            (Some(AuthMode::Token), Some("mine"), None, false),
            (Some(AuthMode::Token), None, Some(true), false),
            (Some(AuthMode::Disabled), None, None, false),
            (None, None, None, false),
        ];
        for (mode, secret, k8s, want) in cases {
            let got = generated_secret(&rc(mode, secret, k8s), "t");
            assert_eq!(got.is_some(), want, "{mode:?} {secret:?} {k8s:?}");
        }
        let s = generated_secret(&rc(Some(AuthMode::Token), None, None), "tok").unwrap();
        assert_eq!(s.metadata.name.as_deref(), Some("demo"));
        assert_eq!(s.metadata.namespace.as_deref(), Some("ml"));
        assert_eq!(s.metadata.labels.unwrap()[c::LABEL_CLUSTER], "demo");
        assert_eq!(s.metadata.owner_references.unwrap()[0].kind, "RayCluster");
        assert_eq!(s.string_data.unwrap()["auth_token"], "tok");
    }

    #[test]
    fn tokens_are_random_base64_of_32_bytes() {
        let (a, b) = (random_token(), random_token());
        assert_ne!(a, b);
        let raw = base64::engine::general_purpose::STANDARD.decode(&a).unwrap();
        assert_eq!(raw.len(), 32);
    }
}
