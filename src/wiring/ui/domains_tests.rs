//! The domain rows on a fixture shaped like Kueue's TAS tests (`tas_tests.rs`): a block of two racks
//! of two hosts each, levels block > rack > hostname.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;

const BLOCK: &str = "cloud.com/topology-block";
const RACK: &str = "cloud.com/topology-rack";
const HOST: &str = "kubernetes.io/hostname";
const GI: i64 = 1 << 30;

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> Arc<T> {
    Arc::new(serde_json::from_value(v).unwrap())
}

fn topology(name: &str) -> Arc<crate::api::kueue::Topology> {
    obj(
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}}),
    )
}

fn flavor(name: &str, topology: Option<&str>) -> Arc<ResourceFlavor> {
    let mut spec = json!({"nodeLabels": {"pool": "tas"}});
    if let Some(t) = topology {
        spec["topologyName"] = json!(t);
    }
    obj(
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}),
    )
}

fn node(rack: &str, host: &str, gpus: Option<&str>) -> Arc<k8s_openapi::api::core::v1::Node> {
    let mut allocatable = json!({"cpu": "4", "memory": "16Gi", "pods": "110"});
    if let Some(g) = gpus {
        allocatable["nvidia.com/gpu"] = json!(g);
    }
    obj(json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": host, "labels": {BLOCK: "b1", RACK: rack, HOST: host, "pool": "tas"}},
        "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]}}))
}

fn cluster_queue() -> Arc<crate::api::kueue::ClusterQueue> {
    let quota = |f: &str| json!({"name": f, "resources": [{"name": "cpu", "nominalQuota": "100"}, {"name": "memory", "nominalQuota": "1Ti"}]});
    obj(
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [quota("tas"), quota("plain")]}]}}),
    )
}

/// A Workload with quota reserved: `pods` pods of 1 cpu and 2Gi in flavor `flavor`, all on `host`.
fn admitted(name: &str, flavor: &str, host: &str, pods: i32) -> Arc<Workload> {
    obj(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": pods, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]}}}]},
        "status": {
            "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": pods,
                "flavors": {"cpu": flavor, "memory": flavor},
                "resourceUsage": {"cpu": pods.to_string(), "memory": format!("{}Gi", 2 * pods)},
                "topologyAssignment": {"levels": [HOST], "slices": [{"domainCount": 1,
                    "valuesPerLevel": [{"universal": host}], "podCounts": {"universal": pods}}]}}]},
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}))
}

fn two_racks() -> Snapshot {
    Snapshot {
        cluster_queues: vec![cluster_queue()],
        flavors: vec![flavor("plain", None), flavor("tas", Some("default"))],
        topologies: vec![topology("default")],
        nodes: vec![
            node("r1", "h1", Some("2")),
            node("r1", "h2", Some("2")),
            node("r2", "h3", None),
            node("r2", "h4", None),
        ],
        workloads: vec![admitted("train", "tas", "h2", 2)],
        ..Default::default()
    }
}

#[test]
fn a_hosts_free_room_drops_by_what_its_admitted_pods_request() {
    let got = domains(&two_racks());
    assert_eq!(
        got.len(),
        1,
        "the flavor without a topology shows nothing: {got:?}"
    );
    let f = &got[0];
    assert_eq!(
        (f.flavor.as_str(), f.topology.as_str(), f.note.as_deref()),
        ("tas", "default", None)
    );
    assert_eq!(f.levels, [BLOCK, RACK, HOST]);
    assert_eq!(f.resources, ["cpu", "memory", "nvidia.com/gpu"]);
    let values: Vec<String> = f.rows.iter().map(|r| r.values.join("/")).collect();
    assert_eq!(
        values,
        ["b1/r1/h1", "b1/r1/h2", "b1/r2/h3", "b1/r2/h4"],
        "grouped by block and rack"
    );
    assert_eq!(f.rows_total, 4);
    let row = |h: &str| f.rows.iter().find(|r| r.values[2] == h).unwrap();
    let h2 = row("h2");
    assert_eq!(h2.nodes, ["h2"]);
    assert_eq!(h2.allocatable, [4000, 16 * GI, 2]);
    assert_eq!(h2.held, [2000, 4 * GI, 0]);
    assert_eq!(h2.free, [2000, 12 * GI, 2]);
    assert_eq!(h2.workloads, [("ns".to_string(), "train".to_string())]);
    assert_eq!(h2.workloads_total, 1);
    for h in ["h1", "h3", "h4"] {
        let r = row(h);
        assert_eq!((r.held[0], r.free[0], r.workloads_total), (0, 4000, 0), "{h}");
    }
    assert_eq!(row("h3").allocatable[2], 0, "no gpu on h3");
}

#[test]
fn only_live_reservations_in_this_flavor_hold_room() {
    let mut snap = two_racks();
    let mut done = (*admitted("done", "tas", "h1", 1)).clone();
    let finished = json!({"type": "Finished", "status": "True", "reason": "Succeeded", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z"});
    done.status
        .as_mut()
        .unwrap()
        .conditions
        .push(serde_json::from_value(finished).unwrap());
    snap.workloads.push(Arc::new(done));
    snap.workloads.push(admitted("elsewhere", "plain", "h3", 1));
    // A slice replaced by a reserved one: only the replacement holds (here, on h2 too).
    snap.workloads.push(admitted("old-slice", "tas", "h4", 1));
    let mut new = (*admitted("new-slice", "tas", "h2", 1)).clone();
    new.metadata.annotations = Some(
        [(
            "kueue.x-k8s.io/workload-slice-replacement-for".to_string(),
            "ns/old-slice".to_string(),
        )]
        .into(),
    );
    snap.workloads.push(Arc::new(new));
    let f = &domains(&snap)[0];
    assert!(
        f.rows.iter().all(|r| r.values[2] == "h2" || r.held[0] == 0),
        "{f:?}"
    );
    let h2 = &f.rows[1];
    assert_eq!((h2.held[0], h2.workloads_total), (3000, 2), "{h2:?}");
}

#[test]
fn a_topology_without_nodes_or_a_missing_one_says_so() {
    let mut snap = two_racks();
    snap.nodes.clear();
    let f = &domains(&snap)[0];
    assert!(f.rows.is_empty());
    assert!(
        f.note
            .as_deref()
            .is_some_and(|n| n.contains("no Node is in this topology") && n.contains("pool=tas")),
        "{f:?}"
    );

    let mut snap = two_racks();
    snap.topologies.clear();
    let f = &domains(&snap)[0];
    assert_eq!(f.note.as_deref(), Some("Topology \"default\" does not exist"));
    assert!(f.levels.is_empty() && f.rows.is_empty());

    let plain = Snapshot {
        flavors: vec![flavor("plain", None)],
        ..two_racks()
    };
    assert!(
        domains(&plain).is_empty(),
        "no flavor names a topology: no section"
    );
}

#[test]
fn lists_are_bounded_and_a_claimed_domain_count_is_not_allocated() {
    let mut snap = two_racks();
    snap.workloads = (0..DOMAIN_WORKLOADS + 3)
        .map(|i| admitted(&format!("w{i:02}"), "tas", "h1", 1))
        .collect();
    let mut huge = (*admitted("huge", "tas", "h1", 1)).clone();
    let psa = &mut huge
        .status
        .as_mut()
        .unwrap()
        .admission
        .as_mut()
        .unwrap()
        .pod_set_assignments[0];
    psa.topology_assignment.as_mut().unwrap().slices[0].domain_count = i32::MAX;
    snap.workloads.push(Arc::new(huge));
    let f = &domains(&snap)[0];
    let h1 = &f.rows[0];
    assert_eq!(h1.workloads.len(), DOMAIN_WORKLOADS);
    assert_eq!(
        h1.workloads_total,
        DOMAIN_WORKLOADS + 3,
        "the malformed one is left out"
    );
    assert_eq!(h1.held[0], 1000 * (DOMAIN_WORKLOADS as i64 + 3));

    snap.nodes = (0..DOMAIN_ROWS + 5)
        .map(|i| node("r1", &format!("h{i:03}"), None))
        .collect();
    let f = &domains(&snap)[0];
    assert_eq!((f.rows.len(), f.rows_total), (DOMAIN_ROWS, DOMAIN_ROWS + 5));
}

/// Kueue's `SerializeFreeCapacityPerDomain` (`tas_flavor_snapshot.go`) reports a leaf's free capacity
/// net of non-TAS pods and its TAS usage apart: here a host's free room drops by what a pod TAS did
/// not place requests there too, shown in its own column, as placement counts it.
#[test]
fn a_hosts_free_room_drops_by_what_other_pods_request() {
    let mut snap = two_racks();
    let other: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"nodeName": "h2", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]},
        "status": {"phase": "Running"}}))
    .unwrap();
    let mut pods = crate::queue::non_tas::NonTasPods::default();
    pods.set(
        crate::queue::non_tas::pod_key(&other),
        crate::queue::non_tas::non_tas_usage(&other).unwrap(),
    );
    snap.non_tas = Some(pods.per_node());
    let got = domains(&snap);
    let h2 = got[0].rows.iter().find(|r| r.values[2] == "h2").unwrap();
    assert_eq!(h2.non_tas, [1500, 0, 0]);
    assert_eq!(h2.held, [2000, 4 * GI, 0]);
    assert_eq!(h2.free, [500, 12 * GI, 2]);
    let h1 = got[0].rows.iter().find(|r| r.values[2] == "h1").unwrap();
    assert_eq!((h1.non_tas[0], h1.free[0]), (0, 4000));
    assert!(got[0].non_tas_counted);
    // Until the pods are listed the room shown leaves them out, and the flavor says so.
    snap.non_tas = None;
    let got = domains(&snap);
    assert!(!got[0].non_tas_counted);
    let h2 = got[0].rows.iter().find(|r| r.values[2] == "h2").unwrap();
    assert_eq!((h2.non_tas[0], h2.free[0]), (0, 2000));
}
