//! Token auth towards a child cluster's dashboard, read as KubeRay reads it: with `authOptions.mode: token`
//! the token is key `auth_token` of the Secret `authOptions.secretName` (default: the cluster's name) in the
//! cluster's namespace, and goes out as `x-ray-authorization: Bearer <token>`. Pure.

use k8s_openapi::api::core::v1::Secret;

use crate::api::ray::RayCluster;
use crate::api::ray::raycluster::AuthMode;
use crate::rayservice::cluster::names;

pub use crate::api::ray::constants::AUTH_TOKEN_KEY as TOKEN_KEY;

/// The Secret holding the cluster's token, or `None` when the cluster does not use token auth.
pub fn token_secret_name(rc: &RayCluster) -> Option<String> {
    let auth = rc
        .spec
        .auth_options
        .as_ref()
        .filter(|a| a.mode == Some(AuthMode::Token))?;
    Some(
        auth.secret_name
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| names::check_name(rc.metadata.name.as_deref().unwrap_or(""))),
    )
}

/// The token stored in `secret`; the error names what is missing.
pub fn token_from_secret(secret: &Secret) -> Result<String, String> {
    let name = secret.metadata.name.as_deref().unwrap_or("");
    if let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(TOKEN_KEY)) {
        return String::from_utf8(bytes.0.clone())
            .map_err(|_| format!("key {TOKEN_KEY:?} of Secret {name} is not UTF-8"));
    }
    // `stringData` is write-only on a real API server, but an object built in memory may carry it.
    if let Some(s) = secret.string_data.as_ref().and_then(|d| d.get(TOKEN_KEY)) {
        return Ok(s.clone());
    }
    Err(format!("Secret {name} has no key {TOKEN_KEY:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ray::raycluster::AuthOptions;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    fn cluster(mode: Option<AuthMode>, secret: Option<&str>) -> RayCluster {
        let mut rc = RayCluster::new("svc-abcde", Default::default());
        rc.spec.auth_options = Some(AuthOptions {
            mode,
            secret_name: secret.map(str::to_string),
            enable_k8s_token_auth: None,
        });
        rc
    }

    #[test]
    fn secret_name_follows_auth_options() {
        let cases = [
            (Some(AuthMode::Token), None, Some("svc-abcde")),
            (Some(AuthMode::Token), Some(""), Some("svc-abcde")),
            (Some(AuthMode::Token), Some("tok"), Some("tok")),
            (Some(AuthMode::Disabled), Some("tok"), None),
            (None, Some("tok"), None),
        ];
        for (mode, secret, want) in cases {
            assert_eq!(
                token_secret_name(&cluster(mode, secret)).as_deref(),
                want,
                "{mode:?} {secret:?}"
            );
        }
        let mut plain = cluster(None, None);
        plain.spec.auth_options = None;
        assert_eq!(token_secret_name(&plain), None);
    }

    #[test]
    fn token_is_read_from_the_auth_token_key() {
        let mut s = Secret::default();
        s.metadata.name = Some("tok".into());
        assert_eq!(
            token_from_secret(&s).unwrap_err(),
            "Secret tok has no key \"auth_token\""
        );
        s.data = Some(BTreeMap::from([(
            TOKEN_KEY.to_string(),
            ByteString(b"s3cret".to_vec()),
        )]));
        assert_eq!(token_from_secret(&s).unwrap(), "s3cret");
        s.data = Some(BTreeMap::from([(
            TOKEN_KEY.to_string(),
            ByteString(vec![0xff, 0xfe]),
        )]));
        assert!(token_from_secret(&s).unwrap_err().contains("not UTF-8"));
    }
}
