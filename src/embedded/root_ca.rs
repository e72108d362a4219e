//! kube-controller-manager's root-CA publisher (`pkg/controller/certificates/rootcacertpublisher`),
//! where a real cluster is modelled (`ServerConfig::real_cluster`): every namespace holds a
//! `kube-root-ca.crt` ConfigMap with the CA bundle that verifies the API server (`ca.crt`) and the
//! publisher's description annotation. The ServiceAccount admission plugin's `kube-api-access` volume
//! reads it, and the process runtime mounts it (`sim/process/incluster.rs`).

use serde_json::json;

use super::managed_fields::Writer;
use super::registry::Registry;
use super::store::{ListOptions, Store};

pub const NAME: &str = "kube-root-ca.crt";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when \
     using internal endpoints such as the internal service IP or kubernetes.default.svc. No other \
     usage is guaranteed across distributions of Kubernetes clusters.";
/// The field manager the publisher's writes carry on a real cluster.
const MANAGER: &str = "kube-controller-manager";

/// Creates `kube-root-ca.crt` in `ns` unless it exists (an existing one is left as it is).
pub fn publish(store: &Store, registry: &Registry, ns: &str, ca_pem: &str) {
    let Some(info) = registry.find("", "v1", "configmaps") else {
        return;
    };
    if store.get(&info, Some(ns), NAME).is_ok() {
        return;
    }
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": ns,
                     "annotations": {"kubernetes.io/description": DESCRIPTION}},
        "data": {"ca.crt": ca_pem}});
    // AlreadyExists from a concurrent create is the same outcome; a namespace that just went away
    // (or is terminating) leaves nothing to do.
    let _ = store.create_by(&info, Some(ns), cm, false, Writer::new(MANAGER, false));
}

/// Publishes in every namespace stored now (the publisher's first pass).
pub fn publish_all(store: &Store, registry: &Registry, ca_pem: &str) {
    let Some(info) = registry.find("", "v1", "namespaces") else {
        return;
    };
    let Ok(all) = store.list(&info, None, &ListOptions::default()) else {
        return;
    };
    for ns in &all.items {
        if let Some(name) = ns.pointer("/metadata/name").and_then(|v| v.as_str()) {
            publish(store, registry, name, ca_pem);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::EmbeddedServer;
    use crate::embedded::admission::AllowAll;
    use std::sync::Arc;

    #[test]
    fn every_namespace_gets_the_bundle_once() {
        let srv = EmbeddedServer::new(&[], Arc::new(AllowAll));
        publish_all(&srv.store, &srv.registry, "PEM");
        let cms = srv.registry.find("", "v1", "configmaps").unwrap();
        for ns in ["default", "kube-system", "kube-public"] {
            let cm = srv.store.get(&cms, Some(ns), NAME).unwrap();
            assert_eq!(cm["data"], json!({"ca.crt": "PEM"}));
            assert_eq!(
                cm["metadata"]["annotations"]["kubernetes.io/description"],
                DESCRIPTION
            );
            assert_eq!(cm["metadata"]["managedFields"][0]["manager"], MANAGER);
        }
        // A second pass leaves the stored one alone.
        let before = srv.store.get(&cms, Some("default"), NAME).unwrap();
        publish(&srv.store, &srv.registry, "default", "OTHER");
        assert_eq!(srv.store.get(&cms, Some("default"), NAME).unwrap(), before);
    }
}
