//! An upgrade whose growth preemption took must ask for a new slice once it has shrunk back, for
//! an incremental upgrade whose traffic already moved in part too (issue 45, chaos seed 47).

use std::collections::BTreeMap;

use serde_json::json;

use super::demand::{self, LivePods};
use super::rayservice::RayServiceJob;
use crate::api::kueue::{Admission, PodSet, Workload};
use crate::api::ray::{RayCluster, RayService};
use crate::jobframework::admission as conditions;
use crate::jobframework::GenericJob;
use crate::jobframework::job_controller::{Step, plan};
use crate::jobframework::slices::{GROWTH_FLOOR_ANNOTATION, format_floor};
use crate::rayservice::cluster::BuildOptions;
use crate::rayservice::cluster::child::child_cluster;

/// An incremental service (50% surge, two Serve replicas of 1 CPU, one per worker) mid-upgrade:
/// `rs-old` serving with `old` workers, `rs-new` pending with `new` workers in its spec.
fn upgrading(old: i32, new: i32) -> (RayService, Vec<RayCluster>) {
    let res = json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1"}});
    let mut rs: RayService = serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "rs", "namespace": "default", "uid": "u1",
                     "labels": {crate::api::kueue::constants::label::QUEUE_NAME: "lq"}},
        "spec": {
            "upgradeStrategy": {"type": "NewClusterWithIncrementalUpgrade",
                "clusterUpgradeOptions": {"gatewayClassName": "istio", "stepSizePercent": 50, "intervalSeconds": 1, "maxSurgePercent": 50}},
            "serveConfigV2": "applications:\n  - name: app\n    import_path: app.graph\n    route_prefix: /\n    deployments:\n      - name: D\n        num_replicas: 2\n        ray_actor_options:\n          num_cpus: 1\n",
            "rayClusterConfig": {
                "enableInTreeAutoscaling": true,
                "headGroupSpec": {"rayStartParams": {"num-cpus": "0"}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0", "resources": res}]}}},
                "workerGroupSpecs": [{"groupName": "workers", "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {"num-cpus": "1"},
                    "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0", "resources": res}]}}}]
            }
        }
    }))
    .expect("a valid RayService");
    let sized = |name: &str, workers: i32| {
        let mut rc = child_cluster(&rs, name, "", false);
        for g in rc.spec.worker_group_specs.iter_mut().flatten() {
            g.replicas = Some(workers);
        }
        rc
    };
    let children = vec![sized("rs-old", old), sized("rs-new", new)];
    rs.status = serde_json::from_value(json!({
        "activeServiceStatus": {"rayClusterName": "rs-old"},
        "pendingServiceStatus": {"rayClusterName": "rs-new"}
    }))
    .ok();
    (rs, children)
}

/// An admitted slice with these podsets, `GrowthPreempted=True`.
fn taken_slice(pod_sets: Vec<PodSet>) -> Workload {
    let mut wl = Workload::build("rs-slice-1", "default").queue("lq").build();
    wl.spec.pod_sets = pod_sets;
    let now = jiff::Timestamp::UNIX_EPOCH;
    let admission = Admission { cluster_queue: "cq".into(), pod_set_assignments: vec![] };
    wl.status = Some(conditions::admitted(&wl, admission, now));
    let mut tmp = wl.clone();
    tmp.status = conditions::growth_preempted(&wl, "InClusterQueue", "preempted", now);
    tmp
}

fn pods(groups: &[(&str, &[(&str, i64)])]) -> LivePods {
    groups
        .iter()
        .map(|(c, gs)| (c.to_string(), gs.iter().map(|(g, n)| (g.to_string(), *n)).collect::<BTreeMap<_, _>>()))
        .collect()
}

fn counts(ps: &[PodSet]) -> Vec<(String, i32)> {
    ps.iter().map(|p| (p.name.clone().unwrap_or_default(), p.count())).collect()
}

fn job(rs: &RayService, children: &[RayCluster], live: LivePods, wl: &Workload) -> RayServiceJob {
    RayServiceJob {
        rs: rs.clone(),
        children: children.to_vec(),
        live,
        slices: vec![wl.metadata.name.clone().unwrap_or_default()],
        growth_taken: super::growth::taken(std::slice::from_ref(wl)),
    }
}

/// Chaos seed 47: the growth was taken after the first step (old cluster down to one worker, the
/// new one at one worker and asking for its second). The slice shrinks back to the serving
/// cluster, then a new slice waits for the whole pending cluster.
#[test]
fn an_incremental_upgrade_whose_growth_was_taken_asks_for_a_new_slice_after_shrinking() {
    let (rs, children) = upgrading(1, 2);
    let opts = BuildOptions::default();
    let mut at_step = children.clone();
    for g in at_step[1].spec.worker_group_specs.iter_mut().flatten() {
        g.replicas = Some(1);
    }
    let step_demand: Vec<_> = at_step.iter().map(|c| demand::child_demand(c, &opts).expect("demand")).collect();
    let wl = taken_slice(demand::podsets(&step_demand).expect("podsets"));
    assert_eq!(counts(&wl.spec.pod_sets), vec![("head".into(), 2), ("workers".into(), 2)]);

    // The pending cluster's pods are gone: shrink back to the serving cluster.
    let serving_only = pods(&[("rs-old", &[("head", 1), ("workers", 1)])]);
    let step = plan(&job(&rs, &children, serving_only.clone(), &wl), &[&wl]).expect("a step");
    let Step::ReplacePodSets { pod_sets, .. } = step else { panic!("expected a shrink, got {step:?}") };
    assert_eq!(counts(&pod_sets), vec![("head".into(), 1), ("workers".into(), 1)]);

    // Shrunk (still GrowthPreempted until a new slice replaces it), the floor written as the job
    // keeps it: a new slice for the upgrade.
    let mut shrunk = wl.clone();
    shrunk.spec.pod_sets = pod_sets;
    let j = job(&rs, &children, serving_only.clone(), &shrunk);
    let floor = j.growth_floor(&shrunk.spec.pod_sets).expect("a floor during the upgrade");
    assert_eq!(floor, BTreeMap::from([("head".to_string(), 1), ("workers".to_string(), 1)]));
    let stale = shrunk.clone();
    shrunk.metadata.annotations.get_or_insert_with(Default::default).insert(GROWTH_FLOOR_ANNOTATION.into(), format_floor(&floor));
    let step = plan(&j, &[&shrunk]).expect("a step");
    assert_eq!(step, Step::CreateSlice { replaces: "rs-slice-1".into() });

    // A floor not written yet (or stale) is written first, also while the slice waits to grow: the
    // admission core holds a slice whose growth was taken until it is at its floor.
    let step = plan(&job(&rs, &children, serving_only, &stale), &[&stale]).expect("a step");
    assert_eq!(step, Step::ReplacePodSets { name: "rs-slice-1".into(), pod_sets: stale.spec.pod_sets.clone() });

    // Before the pending pods are gone, the pending cluster's growth waits for a slice too.
    let all = pods(&[("rs-old", &[("head", 1), ("workers", 1)]), ("rs-new", &[("head", 1), ("workers", 1)])]);
    let step = plan(&job(&rs, &children, all, &wl), &[&wl]).expect("a step");
    assert!(matches!(step, Step::CreateSlice { .. } | Step::ReplacePodSets { .. }), "got {step:?}");
}
