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

/// Where the ServiceAccount admission plugin mounts the API credentials in every container.
pub const API_ACCESS_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The ServiceAccount admission plugin's token volume (`mountServiceAccountToken`, `TokenVolumeSource`
/// in `plugin/pkg/admission/serviceaccount/admission.go` v1.36.3), where a real cluster is modelled
/// (the projection names `kube-root-ca.crt`, which `root_ca.rs` publishes there): unless the pod or
/// its ServiceAccount turns automounting off, every init and regular container without a mount at
/// [`API_ACCESS_MOUNT_PATH`] gets one, read-only, of a `kube-api-access-<random>` projected volume of
/// a bound token, the CA bundle and the namespace.
pub fn mount_api_access(store: &Store, registry: &Registry, ns: &str, pod: &mut Value) {
    let Some(info) = service_accounts(registry) else {
        return;
    };
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let sa_name = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .unwrap_or(DEFAULT_SERVICE_ACCOUNT)
        .to_string();
    let automount = match spec.get("automountServiceAccountToken").and_then(Value::as_bool) {
        Some(pod_says) => pod_says,
        None => store
            .get(&info, Some(ns), &sa_name)
            .ok()
            .and_then(|sa| sa.get("automountServiceAccountToken").and_then(Value::as_bool))
            .unwrap_or(true),
    };
    if !automount {
        return;
    }
    let volume = format!("kube-api-access-{}", super::meta::name_suffix());
    let mut mounted = false;
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let mounts = c.entry("volumeMounts").or_insert_with(|| json!([]));
            let Some(mounts) = mounts.as_array_mut() else {
                continue;
            };
            if mounts
                .iter()
                .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(API_ACCESS_MOUNT_PATH))
            {
                continue;
            }
            mounts.push(json!({"name": volume, "readOnly": true, "mountPath": API_ACCESS_MOUNT_PATH}));
            mounted = true;
        }
    }
    if !mounted {
        return;
    }
    let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
    if let Some(volumes) = volumes.as_array_mut() {
        volumes.push(json!({"name": volume, "projected": {
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": super::root_ca::NAME, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]}}));
    }
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

    /// As the plugin's `mountServiceAccountToken`: one projected volume, mounted read-only in each
    /// container that has nothing at the path; none when the pod turns automounting off.
    #[test]
    fn the_api_access_volume_is_mounted_in_each_container() {
        let srv = EmbeddedServer::new(&[], std::sync::Arc::new(AllowAll));
        let mut p = pod(None);
        p["spec"]["initContainers"] = json!([{"name": "i", "image": "i"}]);
        p["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "own", "image": "i", "volumeMounts": [{"name": "x", "mountPath": API_ACCESS_MOUNT_PATH}]}));
        mount_api_access(&srv.store, &srv.registry, "default", &mut p);
        let volume = p["spec"]["volumes"][0]["name"].as_str().unwrap().to_string();
        assert!(
            volume.starts_with("kube-api-access-") && volume.len() == 21,
            "{volume}"
        );
        assert_eq!(
            p["spec"]["volumes"][0]["projected"]["sources"][1]["configMap"]["name"],
            "kube-root-ca.crt"
        );
        let mount = json!({"name": volume, "readOnly": true, "mountPath": API_ACCESS_MOUNT_PATH});
        assert_eq!(p["spec"]["initContainers"][0]["volumeMounts"], json!([mount]));
        assert_eq!(p["spec"]["containers"][0]["volumeMounts"], json!([mount]));
        assert_eq!(
            p["spec"]["containers"][1]["volumeMounts"]
                .as_array()
                .unwrap()
                .len(),
            1
        );

        let mut off = pod(None);
        off["spec"]["automountServiceAccountToken"] = json!(false);
        mount_api_access(&srv.store, &srv.registry, "default", &mut off);
        assert!(off["spec"].get("volumes").is_none());
    }
}
