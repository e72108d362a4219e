//! What a real cluster does for ServiceAccounts that our controllers and kubectl can tell apart:
//! the serviceaccount controller's `default` ServiceAccount in every namespace (created here with the
//! namespace, so a pod right after it never races it), and the ServiceAccount admission plugin's rules
//! for a new pod: no `serviceAccountName` means `default`, and a ServiceAccount that does not exist in
//! the pod's namespace is a 403 Forbidden with the plugin's message.

use serde_json::{Value, json};

use super::error::ApiError;
use super::registry::{Registry, ResourceInfo};
use super::store::Store;

pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

fn service_accounts(registry: &Registry) -> Option<std::sync::Arc<ResourceInfo>> {
    registry.find("", "v1", "serviceaccounts")
}

/// Creates `default` in `ns` unless it exists (the serviceaccount controller's job).
pub fn ensure_default(store: &Store, registry: &Registry, ns: &str) {
    let Some(info) = service_accounts(registry) else {
        return;
    };
    if store.get(&info, Some(ns), DEFAULT_SERVICE_ACCOUNT).is_ok() {
        return;
    }
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": ns}});
    // AlreadyExists from a concurrent create is the same outcome; anything else (the namespace just
    // went away) leaves nothing to do.
    let _ = store.create(&info, Some(ns), sa, false);
}

/// The admission plugin on a pod create: default the ServiceAccount, then require that it exists.
pub fn admit_pod(store: &Store, registry: &Registry, ns: &str, pod: &mut Value) -> Result<(), ApiError> {
    let Some(info) = service_accounts(registry) else {
        return Ok(());
    };
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let named = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from);
    let sa = match named {
        Some(sa) => sa,
        None => {
            spec.insert("serviceAccountName".into(), json!(DEFAULT_SERVICE_ACCOUNT));
            DEFAULT_SERVICE_ACCOUNT.to_string()
        }
    };
    if store.get(&info, Some(ns), &sa).is_ok() {
        return Ok(());
    }
    // The plugin names the pod by its name, or its generateName before one is generated.
    let meta = pod.get("metadata");
    let field = |k: &str| {
        meta.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let name = field("name")
        .or_else(|| field("generateName"))
        .unwrap_or("Unknown");
    let message = format!(
        "pods \"{name}\" is forbidden: error looking up service account {ns}/{sa}: serviceaccount \"{sa}\" not found"
    );
    Err(ApiError::new(403, "Forbidden", message).details(name, "", "pods"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::{AllowAll, EmbeddedServer};

    fn pod(sa: Option<&str>) -> Value {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        if let Some(sa) = sa {
            p["spec"]["serviceAccountName"] = json!(sa);
        }
        p
    }

    /// As Kubernetes' ServiceAccount admission plugin (`plugin/pkg/admission/serviceaccount`): an unnamed
    /// ServiceAccount becomes `default`; a missing one is refused with the plugin's words.
    #[test]
    fn defaults_then_requires_the_service_account() {
        let srv = EmbeddedServer::new(&[], std::sync::Arc::new(AllowAll));
        let mut p = pod(None);
        admit_pod(&srv.store, &srv.registry, "default", &mut p).expect("default exists at start");
        assert_eq!(p["spec"]["serviceAccountName"], "default");

        let err = admit_pod(&srv.store, &srv.registry, "default", &mut pod(Some("autoscaler")))
            .expect_err("absent");
        assert_eq!((err.code, err.reason.as_str()), (403, "Forbidden"));
        assert_eq!(
            err.message,
            "pods \"p\" is forbidden: error looking up service account default/autoscaler: serviceaccount \"autoscaler\" not found"
        );
    }
}
