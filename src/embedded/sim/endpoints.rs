//! An endpoints controller: one EndpointSlice per Service with a selector (`<svc>-sim`, labelled
//! `kubernetes.io/service-name`, owned by the Service), listing the matching pods that are Ready, or,
//! for a Service with `publishNotReadyAddresses`, every matching pod with an address that is neither
//! being deleted nor finished, marked `ready` (its `serving` says whether the pod is Ready), as the
//! EndpointSlice controller does: KubeRay's head Service sets it so that workers find the head before
//! its probes pass.

use super::{RETRY, SimError};
use crate::embedded::selector::LabelSelector;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde_json::{Value, json};
use std::sync::Arc;

pub const MANAGER: &str = "quotagate-sim-endpoints";

fn pod_ready(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status.as_ref().is_some_and(|s| {
            s.pod_ip.as_deref().is_some_and(|ip| !ip.is_empty())
                && s.conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == crate::api::conditions::TRUE)
        })
}

/// A pod a `publishNotReadyAddresses` Service lists: it has an address, is not being deleted and has
/// not finished.
fn pod_published(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status.as_ref().is_some_and(|s| {
            s.pod_ip.as_deref().is_some_and(|ip| !ip.is_empty())
                && !matches!(s.phase.as_deref(), Some("Succeeded" | "Failed"))
        })
}

/// The desired slice for `svc` given every pod in its namespace; None when the Service has no selector.
pub fn desired_slice(svc: &Service, pods: &[Pod]) -> Option<Value> {
    let selector = svc.spec.as_ref()?.selector.as_ref().filter(|s| !s.is_empty())?;
    let sel = LabelSelector::from_map(selector);
    let name = svc.metadata.name.clone()?;
    let ns = svc.metadata.namespace.clone().unwrap_or_default();
    let publish = svc.spec.as_ref().and_then(|s| s.publish_not_ready_addresses) == Some(true);
    let mut endpoints: Vec<Value> = pods
        .iter()
        .filter(|p| (pod_ready(p) || (publish && pod_published(p))) && p.metadata.labels.as_ref().is_some_and(|l| sel.matches_labels(l)))
        .map(|p| {
            let ip = p.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap_or_default();
            json!({"addresses": [ip], "conditions": {"ready": true, "serving": pod_ready(p), "terminating": false},
                   "nodeName": p.spec.as_ref().and_then(|s| s.node_name.clone()),
                   "targetRef": {"kind": "Pod", "namespace": ns, "name": p.metadata.name, "uid": p.metadata.uid}})
        })
        .collect();
    endpoints.sort_by_key(|e| {
        e.pointer("/targetRef/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    });
    let ports: Vec<Value> = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    let target = p.target_port.as_ref().map(|t| match t {
                        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(i) => *i,
                        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(_) => p.port,
                    });
                    json!({"name": p.name.clone().unwrap_or_default(), "port": target.unwrap_or(p.port), "protocol": p.protocol.clone().unwrap_or("TCP".into())})
                })
                .collect()
        })
        .unwrap_or_default();
    Some(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{name}-sim"), "namespace": ns,
                     "labels": {"kubernetes.io/service-name": name, "endpointslice.kubernetes.io/managed-by": MANAGER},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name, "uid": svc.metadata.uid, "controller": true, "blockOwnerDeletion": true}]},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports,
    }))
}

/// The Service's selector as a list's label selector (`k=v,k2=v2`), so a reconcile parses only the
/// pods it selects: under a RayCluster of thousands of workers, the head Service's every reconcile
/// listed (and parsed, at about six times their JSON) every pod of the namespace. `None` (list them
/// all, `desired_slice` selects) for no selector, or one a list's selector could not say as written.
fn list_selector(svc: &Service) -> Option<String> {
    let selector = svc.spec.as_ref()?.selector.as_ref().filter(|s| !s.is_empty())?;
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'))
    };
    selector
        .iter()
        .map(|(k, v)| (plain(k) && plain(v)).then(|| format!("{k}={v}")))
        .collect::<Option<Vec<_>>>()
        .map(|terms| terms.join(","))
}

async fn reconcile(svc: Arc<Service>, client: Arc<kube::Client>) -> Result<Action, SimError> {
    let ns = svc.metadata.namespace.clone().unwrap_or_default();
    let mut params = ListParams::default();
    if let Some(selector) = list_selector(&svc) {
        params = params.labels(&selector);
    }
    let pods: Vec<Pod> = Api::<Pod>::namespaced((*client).clone(), &ns)
        .list(&params)
        .await?
        .items;
    let Some(slice) = desired_slice(&svc, &pods) else {
        return Ok(Action::await_change());
    };
    let name = slice
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let api: Api<EndpointSlice> = Api::namespaced((*client).clone(), &ns);
    if let Some(current) = api.get_opt(&name).await? {
        let cur = serde_json::to_value(&current).unwrap_or(Value::Null);
        // A slice left by an earlier Service of the same name is still owned by it, and the garbage
        // collector will delete it: it is rewritten for this Service even when its endpoints agree.
        let owned = current
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| Some(&o.uid) == svc.metadata.uid.as_ref());
        if owned
            && cur.get("endpoints").unwrap_or(&json!([])) == &slice["endpoints"]
            && cur.get("ports") == slice.get("ports")
        {
            return Ok(Action::await_change());
        }
    }
    api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(slice))
        .await?;
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Service>, _: &SimError, _: Arc<kube::Client>) -> Action {
    Action::requeue(RETRY)
}

pub async fn run(client: kube::Client) {
    let ctrl = Controller::new(Api::<Service>::all(client.clone()), watcher::Config::default());
    let services = ctrl.store();
    // A slice deleted under it (the garbage collector taking a slice a Service of the same name left)
    // is written again: its Service is reconciled when one of its slices changes or goes.
    let ctrl = ctrl.owns(
        Api::<EndpointSlice>::all(client.clone()),
        watcher::Config::default().labels(&format!("endpointslice.kubernetes.io/managed-by={MANAGER}")),
    );
    // Any pod change may change any Service's slice in its namespace.
    ctrl.watches(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default(),
        move |pod: Pod| {
            let ns = pod.metadata.namespace.clone();
            services
                .state()
                .into_iter()
                .filter(|s| s.metadata.namespace == ns)
                .map(|s| ObjectRef::from_obj(&*s))
                .collect::<Vec<_>>()
        },
    )
    .run(reconcile, error_policy, Arc::new(client))
    .for_each(|_| async {})
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ip: &str, ready: bool, phase: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns", "uid": name, "labels": {"app": "a"}},
            "status": {"phase": phase, "podIP": ip, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}}))
        .unwrap()
    }

    #[test]
    fn a_reconcile_lists_only_the_selected_pods_when_the_selector_can_say_so() {
        let svc = |selector: Value| -> Service {
            serde_json::from_value(
                json!({"metadata": {"name": "s", "namespace": "ns"}, "spec": {"selector": selector}}),
            )
            .unwrap()
        };
        assert_eq!(
            list_selector(&svc(
                json!({"ray.io/cluster": "rc-1", "ray.io/node-type": "head"})
            ))
            .as_deref(),
            Some("ray.io/cluster=rc-1,ray.io/node-type=head")
        );
        for all in [
            json!({}),
            json!({"a": ""}),
            json!({"a": "x,y"}),
            json!({"a b": "c"}),
        ] {
            assert_eq!(list_selector(&svc(all.clone())), None, "{all}");
        }
    }

    /// Kubernetes' EndpointSlice controller (pkg/controller/endpointslice, `podToEndpoint`): a
    /// `publishNotReadyAddresses` Service lists pods before they are Ready, marked ready, with `serving`
    /// from the pod; an ordinary Service lists Ready pods only. Pods without an address or finished
    /// are listed by neither.
    #[test]
    fn publish_not_ready_addresses_lists_pods_before_they_are_ready() {
        let svc = |publish: bool| -> Service {
            serde_json::from_value(json!({"metadata": {"name": "s", "namespace": "ns", "uid": "u"},
                "spec": {"selector": {"app": "a"}, "publishNotReadyAddresses": publish, "ports": [{"name": "gcs", "port": 6379}]}}))
            .unwrap()
        };
        let pods = [
            pod("a", "10.244.1.2", true, "Running"),
            pod("b", "10.244.1.3", false, "Running"),
            pod("c", "", false, "Pending"),
            pod("d", "10.244.1.4", false, "Failed"),
        ];
        let names = |v: &Value| -> Vec<(String, bool, bool)> {
            v["endpoints"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    (
                        e["targetRef"]["name"].as_str().unwrap().to_owned(),
                        e["conditions"]["ready"].as_bool().unwrap(),
                        e["conditions"]["serving"].as_bool().unwrap(),
                    )
                })
                .collect()
        };
        let plain = desired_slice(&svc(false), &pods).unwrap();
        assert_eq!(names(&plain), [("a".to_string(), true, true)]);
        let published = desired_slice(&svc(true), &pods).unwrap();
        assert_eq!(
            names(&published),
            [("a".to_string(), true, true), ("b".to_string(), true, false)]
        );
    }
}
