//! Non-TAS pods' usage in a domain's free room. Kueue's expectations, each naming its source:
//! `pkg/cache/scheduler/tas_cache_test.go` (`TestFindTopologyAssignments`, the "non-TAS pods"
//! cases), `test/integration/singlecluster/tas/tas_test.go` ("non-TAS pod exists") and
//! `pkg/controller/tas/pod_usage_controller.go` (which pods count). Ours where marked.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::queue::model::{FlavorModel, PodSetModel};
use crate::queue::tas::{TasCluster, TasNode, TasSnapshot, TopologyRequest};

const HOST: &str = "kubernetes.io/hostname";
const RACK: &str = "cloud.com/topology-rack";
const GI: i64 = 1 << 30;

/// A schedulable, untainted node (also the TAS requeue tests' nodes).
pub(in crate::queue) fn node(name: &str, labels: &[(&str, &str)], resources: &[(&str, i64)]) -> TasNode {
    TasNode {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        allocatable: resources
            .iter()
            .map(|(r, v)| (r.to_string(), Amount(*v)))
            .collect(),
        taints: Vec::new(),
        schedulable: true,
    }
}

/// A host `name` of 1 cpu, 1Gi and 10 pods (Kueue's x3 / x5).
fn host(name: &str) -> TasNode {
    node(
        name,
        &[(HOST, name)],
        &[("cpu", 1000), ("memory", GI), (PODS, 10)],
    )
}

/// A pod named `name` on `node` (none: unscheduled) in `phase` (none: not set) requesting `cpu`.
fn pod(name: &str, node: Option<&str>, phase: Option<&str>, cpu: Option<&str>) -> Pod {
    let mut p = json!({
        "metadata": {"name": name, "namespace": "test-ns"},
        "spec": {"containers": [{"name": "c"}]},
    });
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    if let Some(c) = cpu {
        p["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": c}});
    }
    if let Some(ph) = phase {
        p["status"] = json!({"phase": ph});
    }
    serde_json::from_value(p).unwrap()
}

/// The per-node sums of `pods`, as the admission loop's watch keeps them.
fn usage(pods: &[Pod]) -> Arc<NodeUsage> {
    let mut all = NonTasPods::default();
    for p in pods {
        all.set(pod_key(p), non_tas_usage(p).unwrap());
    }
    all.per_node()
}

fn podset(count: i64, requests: &[(&str, i64)]) -> PodSetModel {
    PodSetModel {
        name: "main".into(),
        count,
        requests: requests
            .iter()
            .map(|(r, v)| (r.to_string(), Amount(*v)))
            .collect(),
        ..Default::default()
    }
}

fn required_host() -> TopologyRequest {
    TopologyRequest {
        required: Some(HOST.into()),
        ..Default::default()
    }
}

/// Places `count` pods of `cpu` milli on hostname-level `nodes` with `pods` running there.
fn place(nodes: &[TasNode], pods: &[Pod], count: i64, cpu: i64) -> Result<Vec<(String, i32)>, String> {
    let s = TasSnapshot::with_non_tas("default", &[HOST.to_string()], nodes, &usage(pods));
    let p = s.place(&podset(count, &[("cpu", cpu)]), &required_host(), false, count)?;
    Ok(p.domains.iter().map(|d| (d.values.join("/"), d.count)).collect())
}

const CPU_FULL: &str =
    r#"topology "default" doesn't allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "cpu": 1"#;

#[test]
fn a_scheduled_non_tas_pod_takes_its_node_room() {
    // Kueue (tas_cache_test.go): "include usage from pending scheduled non-TAS pods, blocked
    // assignment; BestFit"
    let pending = pod("test-pending", Some("x3"), Some("Pending"), Some("600m"));
    assert_eq!(place(&[host("x3")], &[pending], 1, 600), Err(CPU_FULL.into()));
    // Kueue: "include usage from running non-TAS pods, blocked assignment; BestFit"
    let running = pod("test-running", Some("x3"), Some("Running"), Some("600m"));
    assert_eq!(place(&[host("x3")], &[running], 1, 600), Err(CPU_FULL.into()));
    // Kueue: "include usage from running non-TAS pods, found free capacity on another node; BestFit"
    let no_phase = pod("test-pod", Some("x3"), None, Some("600m"));
    assert_eq!(
        place(&[host("x3"), host("x5")], &[no_phase], 1, 600),
        Ok(vec![("x5".to_string(), 1)])
    );
}

#[test]
fn a_node_used_up_by_non_tas_pods_has_no_room() {
    // Kueue (tas_cache_test.go): "node allocatable capacity completely used by non-TAS pod; empty
    // remainingCapacity"
    let x3 = node("x3", &[(HOST, "x3")], &[("cpu", 1000), (PODS, 1)]);
    let running1 = pod("running1", Some("x3"), Some("Running"), Some("1"));
    assert_eq!(place(&[x3], &[running1], 1, 100), Err(CPU_FULL.into()));
}

#[test]
fn each_non_tas_pod_takes_one_pod_slot() {
    // Kueue (tas_cache_test.go): "include usage from non-TAS pods; pod usage"
    let x3 = node("x3", &[(HOST, "x3")], &[(PODS, 10)]);
    let pods = [
        pod("running1", Some("x3"), Some("Running"), None),
        pod("running2", Some("x3"), Some("Running"), None),
    ];
    assert_eq!(
        place(&[x3], &pods, 9, 0),
        Err(r#"topology "default" allows to fit only 8 out of 9 pod(s)"#.into())
    );
}

#[test]
fn which_pods_count() {
    // Kueue (tas_test.go "non-TAS pod exists"): a pod that terminates releases its room, whether it
    // succeeded or failed; a pod with no node assignment takes none; a TAS pod is counted by its
    // workload's assignment, not again here ("... not double-counted"); a terminating pod (deletion
    // timestamp set, still running) keeps it ("non-TAS pod terminating; capacity not released").
    let x3 = || host("x3");
    for phase in ["Succeeded", "Failed"] {
        let done = pod("pod", Some("x3"), Some(phase), Some("1"));
        assert_eq!(
            place(&[x3()], &[done], 1, 1000),
            Ok(vec![("x3".into(), 1)]),
            "{phase}"
        );
    }
    let unscheduled = pod("pod", None, None, Some("1"));
    assert_eq!(
        place(&[x3()], &[unscheduled], 1, 1000),
        Ok(vec![("x3".into(), 1)])
    );
    let mut tas = pod("tas-pod", Some("x3"), Some("Running"), Some("400m"));
    tas.metadata.annotations = Some(
        [(
            "kueue.x-k8s.io/podset-unconstrained-topology".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    assert_eq!(non_tas_usage(&tas), Ok(None));
    let mut terminating = pod("pod", Some("x3"), Some("Running"), Some("1"));
    terminating.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    assert_eq!(place(&[x3()], &[terminating], 1, 1000), Err(CPU_FULL.into()));
}

#[test]
fn requests_follow_the_pod_rules() {
    // Kueue (tas_non_tas_pod_cache.go): a pod's usage is `NewRequestsFromPodSpec` (containers
    // summed, max'd with init containers, overhead added), plus one pod.
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": "x3",
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m"}}},
                {"name": "b", "resources": {"requests": {"cpu": "200m"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "500m"}}}],
            "overhead": {"cpu": "10m"}},
    }))
    .unwrap();
    assert_eq!(
        usage(&[p])["x3"],
        Requests::from([("cpu".into(), Amount(510)), (PODS.into(), Amount(1))])
    );
}

// Ours: a node whose non-TAS pods ask more than it has gives zero room, never negative, and takes
// nothing from the other nodes of its domain.
#[test]
fn an_overfull_node_gives_zero_room_not_less() {
    let rack = |n: &str, cpu| node(n, &[(RACK, "r1")], &[("cpu", cpu), (PODS, 10)]);
    let nodes = [rack("n1", 1000), rack("n2", 1000)];
    let big = pod("big", Some("n1"), Some("Running"), Some("3"));
    let s = TasSnapshot::with_non_tas("default", &[RACK.to_string()], &nodes, &usage(&[big]));
    let free = s.free_per_leaf();
    assert_eq!(free[&vec!["r1".to_string()]]["cpu"], Amount(1000));
    let leaf = s.leaves().next().unwrap();
    assert_eq!(
        (leaf.allocatable["cpu"], leaf.non_tas["cpu"], leaf.non_tas[PODS]),
        (Amount(2000), Amount(3000), Amount(1))
    );
    let one_rack = TopologyRequest {
        required: Some(RACK.into()),
        ..Default::default()
    };
    assert!(s.place(&podset(1, &[("cpu", 1000)]), &one_rack, false, 1).is_ok());
    assert!(
        s.place(&podset(2, &[("cpu", 1000)]), &one_rack, false, 2)
            .is_err()
    );
}

// Ours: the per-node sum follows each pod's changes and is empty again once they are all gone;
// an unchanged pod changes nothing (so it does not wake the admission loop).
#[test]
fn the_per_node_sum_follows_pod_changes() {
    let mut all = NonTasPods::default();
    let p = pod("p", Some("x3"), Some("Pending"), Some("600m"));
    assert!(all.set(pod_key(&p), non_tas_usage(&p).unwrap()));
    let running = pod("p", Some("x3"), Some("Running"), Some("600m"));
    assert!(!all.set(pod_key(&running), non_tas_usage(&running).unwrap()));
    let q = pod("q", Some("x3"), Some("Running"), Some("1"));
    assert!(all.set(pod_key(&q), non_tas_usage(&q).unwrap()));
    assert_eq!(all.per_node()["x3"]["cpu"], Amount(1600));
    assert_eq!(all.per_node()["x3"][PODS], Amount(2));
    let done = pod("p", Some("x3"), Some("Succeeded"), Some("600m"));
    assert!(all.set(pod_key(&done), non_tas_usage(&done).unwrap()));
    assert_eq!(all.per_node()["x3"]["cpu"], Amount(1000));
    assert!(all.set(pod_key(&q), None));
    assert!(all.per_node().is_empty() && all.is_empty());
    assert!(!all.set(pod_key(&q), None));
}

// Ours: while the pods are not listed a node's room is unknown, so nothing is placed; and the
// cluster differs when the sums do (the admission core requeues parked workloads on a change).
#[test]
fn a_cluster_without_the_pods_listed_places_nothing() {
    let flavor = FlavorModel {
        name: "tas".into(),
        topology: Some("default".into()),
        ..Default::default()
    };
    let empty = TasCluster::new(
        [("default".to_string(), vec![HOST.to_string()])].into(),
        vec![host("x3")],
    );
    let unlisted = empty.clone().with_non_tas(None);
    let err = unlisted
        .snapshot(&flavor, "default", std::iter::empty())
        .unwrap_err();
    assert!(err.contains("not listed yet"), "{err}");
    let used = empty
        .clone()
        .with_non_tas(Some(usage(&[pod("p", Some("x3"), None, Some("1"))])));
    assert_ne!(used, empty);
    let s = used.snapshot(&flavor, "default", std::iter::empty()).unwrap();
    assert_eq!(s.free_per_leaf()[&vec!["x3".to_string()]]["cpu"], Amount(0));
}
