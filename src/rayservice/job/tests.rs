//! One definition of what a RayCluster's pods request: for generated specs, the requests of the pods the
//! RayCluster controller plans and builds add up to the job's podsets' requests times their counts
//! (Kueue's rules: containers summed, init containers max'd, pod overhead added).

use proptest::prelude::*;
use serde_json::json;

use crate::api::ray::RayCluster;
use crate::jobframework::GenericJob;
use crate::queue::amount::Amount;
use crate::queue::requests::{Requests, pod_requests, podset_total};
use crate::rayservice::cluster::BuildOptions;
use crate::rayservice::cluster::pod::{WorkerSlot, build_head_pod, build_worker_pod};
use crate::rayservice::cluster::replicas::desired_replicas;
use crate::rayservice::clusterctl::pods::{GroupView, PodAction, PodInputs, plan_pods};

use super::raycluster::RayClusterJob;

fn add(into: &mut Requests, r: &Requests) {
    for (k, v) in r {
        let e = into.entry(k.clone()).or_insert(Amount::ZERO);
        *e = *e + *v;
    }
}

fn nonzero(r: Requests) -> Requests {
    r.into_iter().filter(|(_, v)| *v != Amount::ZERO).collect()
}

fn resources(cpu_m: Option<u32>, mem_mi: Option<u32>) -> serde_json::Value {
    let mut req = serde_json::Map::new();
    if let Some(c) = cpu_m {
        req.insert("cpu".into(), json!(format!("{c}m")));
    }
    if let Some(m) = mem_mi {
        req.insert("memory".into(), json!(format!("{m}Mi")));
    }
    if req.is_empty() {
        json!({})
    } else {
        json!({"requests": req})
    }
}

prop_compose! {
    fn arb_container(prefix: &'static str)(cpu in proptest::option::of(0u32..4000), mem in proptest::option::of(0u32..8192), n in 0u8..3)
        -> serde_json::Value {
        json!({"name": format!("{prefix}{n}"), "image": "rayproject/ray:2.46.0", "resources": resources(cpu, mem)})
    }
}

prop_compose! {
    fn arb_template()(main in arb_container("ray"), extra in proptest::collection::vec(arb_container("side"), 0..2),
                      init in proptest::collection::vec(arb_container("init"), 0..2),
                      overhead in proptest::option::of(0u32..500)) -> serde_json::Value {
        let mut containers = vec![main];
        for (i, mut c) in extra.into_iter().enumerate() {
            c["name"] = json!(format!("side-{i}"));
            containers.push(c);
        }
        let init: Vec<_> = init.into_iter().enumerate().map(|(i, mut c)| { c["name"] = json!(format!("init-{i}")); c }).collect();
        let mut spec = json!({"containers": containers});
        if !init.is_empty() {
            spec["initContainers"] = json!(init);
        }
        if let Some(o) = overhead {
            spec["overhead"] = json!({"cpu": format!("{o}m")});
        }
        json!({"spec": spec})
    }
}

prop_compose! {
    fn arb_group(i: usize)(template in arb_template(), replicas in proptest::option::of(0i32..4), min in proptest::option::of(0i32..3),
                           hosts in proptest::option::of(1i32..3)) -> serde_json::Value {
        let mut g = json!({"groupName": format!("group-{i}"), "template": template, "rayStartParams": {}});
        if let Some(r) = replicas { g["replicas"] = json!(r); }
        if let Some(m) = min { g["minReplicas"] = json!(m); g["maxReplicas"] = json!(m + 3); }
        if let Some(h) = hosts { g["numOfHosts"] = json!(h); }
        g
    }
}

prop_compose! {
    fn arb_cluster()(head in arb_template(), g0 in arb_group(0), g1 in arb_group(1), groups in 0usize..3,
                     autoscaling in any::<bool>(), scaler in proptest::option::of((1u32..2000, 1u32..2048))) -> RayCluster {
        let workers: Vec<_> = [g0, g1].into_iter().take(groups).collect();
        let mut spec = json!({"headGroupSpec": {"template": head, "rayStartParams": {}}, "workerGroupSpecs": workers});
        if autoscaling {
            spec["enableInTreeAutoscaling"] = json!(true);
            if let Some((c, m)) = scaler {
                spec["autoscalerOptions"] = json!({"resources": resources(Some(c), Some(m))});
            }
        }
        serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "default", "uid": "u"}, "spec": spec})).unwrap()
    }
}

/// What the controller's pods request, summed over the pods it plans for an empty cluster.
fn planned_pod_requests(rc: &RayCluster) -> Requests {
    let opts = BuildOptions::default();
    let inputs = PodInputs {
        autoscaling: rc.spec.autoscaling_enabled(),
        groups: rc
            .spec
            .worker_groups()
            .iter()
            .map(|g| GroupView {
                name: g.group_name.clone(),
                replicas: usize::try_from(desired_replicas(g)).unwrap_or(0),
                hosts: usize::try_from(g.num_of_hosts_or_default()).unwrap_or(1),
                workers_to_delete: vec![],
            })
            .collect(),
        ..Default::default()
    };
    let mut total = Requests::new();
    for action in plan_pods(&inputs) {
        match action {
            PodAction::CreateHead => {
                let pod = build_head_pod(rc, &opts).unwrap();
                add(
                    &mut total,
                    &pod_requests("head", pod.spec.as_ref().unwrap()).unwrap(),
                );
            }
            PodAction::CreateWorkers { group, workers } => {
                for w in workers {
                    let slot = WorkerSlot {
                        replica_index: w.replica_index,
                        host_index: w.host_index,
                        replica_name: format!("{group}-x"),
                    };
                    let pod = build_worker_pod(rc, &group, &slot, &opts).unwrap();
                    add(
                        &mut total,
                        &pod_requests("worker", pod.spec.as_ref().unwrap()).unwrap(),
                    );
                }
            }
            other => panic!("an empty cluster plans only creations, got {other:?}"),
        }
    }
    total
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn podsets_request_what_the_pods_request(rc in arb_cluster()) {
        let mut from_podsets = Requests::new();
        for ps in RayClusterJob(rc.clone()).pod_sets().unwrap() {
            let per_pod = pod_requests("podset", ps.template.spec.as_ref().unwrap()).unwrap();
            add(&mut from_podsets, &podset_total(&per_pod, i64::from(ps.count())));
        }
        prop_assert_eq!(nonzero(from_podsets), nonzero(planned_pod_requests(&rc)));
    }
}
