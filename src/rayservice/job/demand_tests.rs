//! The demand's side of a topology-aware upgrade: a replacement slice's podsets name where the
//! admitted slice put their running pods, and the queue's placement keeps them there.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::api::kueue::constants::label::WORKLOAD_SLICE_REPLACEMENT_FOR;
use crate::api::kueue::tas::{DomainAssignment, HOSTNAME_LABEL, encode_assignment};
use crate::api::kueue::{Admission, PodSetAssignment, WorkloadStatus};
use crate::queue::tas::{TasNode, TasSnapshot, TopologyRequest};
use crate::queue::topology::parse_running;

const RACK: &str = "cloud.com/topology-rack";

/// A child with a 1-CPU head (no topology request) and 2 workers of 1 CPU asking for one rack.
fn child(name: &str, tag: &str) -> RayCluster {
    let c = |n: &str| json!({"name": n, "image": format!("rayproject/ray:{tag}"), "resources": {"requests": {"cpu": "1"}}});
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [c("ray-head")]}}},
                 "workerGroupSpecs": [{"groupName": "small", "replicas": 2, "minReplicas": 0, "maxReplicas": 9, "rayStartParams": {},
                                       "template": {"metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}},
                                                    "spec": {"containers": [c("ray-worker")]}}}]}
    }))
    .unwrap()
}

fn demand(children: &[RayCluster]) -> Vec<ChildDemand> {
    children
        .iter()
        .map(|c| child_demand(c, &BuildOptions::default()).unwrap())
        .collect()
}

fn on_hosts(pods: &[(&str, i32)]) -> Vec<DomainAssignment> {
    pods.iter()
        .map(|(h, n)| DomainAssignment {
            values: vec![h.to_string()],
            count: *n,
        })
        .collect()
}

/// The admitted slice of the serving cluster `a` alone: its head on host h4, its workers on h1 and
/// h2, named by hostname only (the topology's lowest level is the hostname).
fn admitted_slice_of_a() -> Workload {
    let mut w = Workload::build("rs-first", "default").build();
    w.spec.pod_sets = podsets(&demand(&[child("a", "2.46.0")])).unwrap();
    let placed = |name: &str| match name {
        "head" => on_hosts(&[("h4", 1)]),
        _ => on_hosts(&[("h1", 1), ("h2", 1)]),
    };
    let levels = vec![HOSTNAME_LABEL.to_string()];
    w.status = Some(WorkloadStatus {
        admission: Some(Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: w
                .spec
                .pod_sets
                .iter()
                .map(|ps| PodSetAssignment {
                    name: ps.name.clone().unwrap(),
                    count: Some(ps.count()),
                    topology_assignment: Some(encode_assignment(
                        &levels,
                        &placed(ps.name.as_deref().unwrap()),
                    )),
                    ..Default::default()
                })
                .collect(),
        }),
        ..Default::default()
    });
    w
}

fn running_of(ps: &PodSet) -> Option<Vec<(String, i32)>> {
    let value = ps
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(ANNOTATION_TOPOLOGY_RUNNING)?;
    let p = parse_running(value, i64::from(ps.count())).unwrap();
    Some(p.domains.iter().map(|d| (d.values.join("/"), d.count)).collect())
}

#[test]
fn a_replacement_slice_names_where_the_serving_clusters_pods_run_merged_podsets_too() {
    let pins = pins(Some(&admitted_slice_of_a()));
    // A hostname-only assignment names no rack: no node selector pin, but the running pods.
    assert!(pins.domains.is_empty(), "{:?}", pins.domains);
    let d = demand(&[child("a", "2.46.0"), child("b", "2.47.0")]);
    let ps = podsets_pinned(&d, &pins).unwrap();
    let by_name: BTreeMap<String, &PodSet> = ps.iter().map(|p| (p.name.clone().unwrap(), p)).collect();
    // The head is one podset of both clusters' heads: the serving head runs on h4.
    assert_eq!(by_name["head"].count(), 2);
    assert_eq!(running_of(by_name["head"]), Some(vec![("h4".to_string(), 1)]));
    // Each cluster's workers are a podset of their own: a's run on h1 and h2, b's run nowhere yet.
    let workers: Vec<Option<Vec<(String, i32)>>> = ps
        .iter()
        .filter(|p| p.name.as_deref() != Some("head"))
        .map(running_of)
        .collect();
    assert_eq!(
        workers,
        vec![Some(vec![("h1".to_string(), 1), ("h2".to_string(), 1)]), None]
    );
    // The annotation is no part of the quota identity: the same podsets without it.
    assert_eq!(
        podset_names(&ps, &d[0]),
        podset_names(&podsets(&d).unwrap(), &d[0])
    );
}

#[test]
fn the_queue_keeps_a_merged_podsets_running_pods_where_they_run() {
    let d = demand(&[child("a", "2.46.0"), child("b", "2.47.0")]);
    let mut w = Workload::build("rs-second", "default").build();
    w.spec.pod_sets = podsets_pinned(&d, &pins(Some(&admitted_slice_of_a()))).unwrap();
    // Not a replacement: the annotation is not read (only a replacement has pods running).
    let model = crate::queue::convert::workload_model(&w, "cq", BTreeMap::new()).unwrap();
    assert!(model.podsets.iter().all(|p| p.running.is_none()));
    w.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(WORKLOAD_SLICE_REPLACEMENT_FOR.into(), "rs-first".into());
    let model = crate::queue::convert::workload_model(&w, "cq", BTreeMap::new()).unwrap();
    let head = model.podsets.iter().find(|p| p.name == "head").unwrap();
    // Two racks of two hosts, 1 CPU each but h4 with 2: without the running head, the two heads
    // would fill the hosts with least room first (h1, h2) and count the serving head off its host.
    let node = |h: &str, r: &str, cpu: i64| TasNode {
        name: h.into(),
        labels: [
            (RACK.to_string(), r.to_string()),
            (HOSTNAME_LABEL.to_string(), h.to_string()),
        ]
        .into(),
        allocatable: [
            ("cpu".to_string(), Amount(cpu * 1000)),
            ("pods".to_string(), Amount(10)),
        ]
        .into(),
        taints: Vec::new(),
        schedulable: true,
    };
    let nodes = [
        node("h1", "r1", 1),
        node("h2", "r1", 1),
        node("h3", "r2", 1),
        node("h4", "r2", 2),
    ];
    let snap = TasSnapshot::new("default", &[RACK.to_string(), HOSTNAME_LABEL.to_string()], &nodes);
    let p = snap.place(head, &TopologyRequest::default(), true, 2).unwrap();
    let got: Vec<(String, i32)> = p.domains.iter().map(|d| (d.values.join("/"), d.count)).collect();
    assert!(got.contains(&("h4".to_string(), 1)), "{got:?}");
    assert_eq!(got.iter().map(|(_, n)| n).sum::<i32>(), 2, "{got:?}");
    // A bad annotation is refused with the field named.
    let mut bad = w.clone();
    bad.spec.pod_sets[0]
        .template
        .metadata
        .get_or_insert_with(Default::default)
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(ANNOTATION_TOPOLOGY_RUNNING.into(), "{".into());
    let err = crate::queue::convert::workload_model(&bad, "cq", BTreeMap::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("spec.podSets[0].template.metadata.annotations[quotagate.io/topology-running]: not a topologyAssignment"),
        "{err}"
    );
}
