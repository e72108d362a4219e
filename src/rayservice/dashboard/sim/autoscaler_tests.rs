//! The autoscaler's decisions as tables, then its loop against a fake API on tokio's paused clock.

use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::rayservice::dashboard::sim::fake_api::FakeApi;
use crate::rayservice::dashboard::sim::tests::{S, URL, config, ep, hello};
use crate::rayservice::dashboard::{RayDashboard, sim::SimOptions};

fn cpu(limit: Option<&str>, request: Option<&str>) -> Value {
    let mut r = json!({});
    if let Some(l) = limit {
        r["limits"] = json!({"cpu": l});
    }
    if let Some(q) = request {
        r["requests"] = json!({"cpu": q});
    }
    r
}

fn template(resources: Value) -> Value {
    json!({"spec": {"containers": [{"name": "ray", "image": "ray", "resources": resources}]}})
}

fn group(name: &str, cpus: &str, min: Option<i32>, max: Option<i32>, replicas: Option<i32>) -> Value {
    let mut g = json!({"groupName": name, "rayStartParams": {"num-cpus": cpus},
                       "template": template(json!({}))});
    for (k, v) in [("minReplicas", min), ("maxReplicas", max), ("replicas", replicas)] {
        if let Some(v) = v {
            g[k] = json!(v);
        }
    }
    g
}

fn spec(head_cpus: &str, groups: Vec<Value>) -> RayClusterSpec {
    serde_json::from_value(json!({
        "enableInTreeAutoscaling": true,
        "headGroupSpec": {"rayStartParams": {"num-cpus": head_cpus}, "template": template(json!({}))},
        "workerGroupSpecs": groups,
    }))
    .unwrap()
}

/// (group, to) of a plan.
fn tos(scales: &[Scale]) -> Vec<(&str, i32)> {
    scales.iter().map(|s| (s.group.as_str(), s.to)).collect()
}

#[test]
fn node_cpus_follow_kuberay_precedence() {
    let res = |v: Value| serde_json::from_value::<ResourceRequirements>(v).unwrap();
    let params = |v: &str| BTreeMap::from([("num-cpus".to_owned(), v.to_owned())]);
    let group_res = BTreeMap::from([("CPU".to_owned(), "2500m".to_owned())]);
    let limit4 = res(cpu(Some("4"), Some("1")));
    /// (rayStartParams, group resources, container resources, CPUs)
    type Case<'a> = (
        Option<BTreeMap<String, String>>,
        Option<&'a BTreeMap<String, String>>,
        Option<ResourceRequirements>,
        f64,
    );
    let cases: Vec<Case> = vec![
        (Some(params("0")), Some(&group_res), Some(limit4.clone()), 3.0),
        (Some(params("0")), None, Some(limit4.clone()), 0.0),
        (Some(params("2")), None, None, 2.0),
        (None, None, Some(limit4), 4.0),
        (None, None, Some(res(cpu(Some("1500m"), None))), 2.0),
        (None, None, Some(res(cpu(Some("0"), Some("2")))), 2.0),
        (None, None, Some(res(cpu(None, Some("500m")))), 1.0),
        (Some(params("junk")), None, None, 0.0),
        (
            None,
            None,
            Some(res(cpu(Some("9E"), None))),
            9_223_372_036_854_776.0,
        ),
        (None, None, None, 0.0),
    ];
    for (i, (p, g, r, want)) in cases.into_iter().enumerate() {
        assert_eq!(node_cpus(p.as_ref(), g, r.as_ref()), want, "case {i}");
    }
}

#[test]
fn plans_fill_the_head_then_groups_in_order_within_bounds() {
    let one = |min, max, replicas| spec("1", vec![group("g", "2", min, max, replicas)]);
    /// (spec, demand, scales)
    type Case = (RayClusterSpec, f64, Vec<(&'static str, i32)>);
    let cases: Vec<Case> = vec![
        // The head's CPU covers the first one.
        (one(Some(0), Some(5), None), 0.0, vec![]),
        (one(Some(0), Some(5), None), 1.0, vec![]),
        (one(Some(0), Some(5), None), 4.0, vec![("g", 2)]),
        (one(Some(0), Some(5), None), 1e9, vec![("g", 5)]),
        (one(Some(0), Some(5), None), f64::INFINITY, vec![("g", 5)]),
        // Unset means minReplicas, which KubeRay keeps anyway; already right is left alone.
        (one(Some(2), Some(5), None), 0.0, vec![]),
        (one(Some(0), Some(5), Some(2)), 4.0, vec![]),
        // Demand fell: one replica per period.
        (one(Some(0), Some(5), Some(5)), 1.0, vec![("g", 4)]),
        (one(Some(0), Some(5), Some(3)), 3.0, vec![("g", 2)]),
        // Only max or only min still counts as autoscaled; neither is the user's group.
        (one(None, Some(5), None), 4.0, vec![("g", 2)]),
        (one(Some(1), None, None), 4.0, vec![("g", 2)]),
        (one(None, None, None), 100.0, vec![]),
        // Unbounded max is held to the sane cap; a stored count above it comes down at once.
        (one(Some(0), None, None), 1e12, vec![("g", 100)]),
        (one(Some(0), None, Some(150)), 1e12, vec![("g", 100)]),
        (one(Some(500), None, None), 0.0, vec![("g", 100)]),
    ];
    for (i, (s, demand, want)) in cases.iter().enumerate() {
        assert_eq!(tos(&plan(s, *demand, 100)), *want, "case {i}");
    }

    // First group up to its max, the rest to the next; a CPU-less group stays at its min.
    let s = spec(
        "1",
        vec![
            group("small", "2", Some(0), Some(1), None),
            group("none", "0", Some(1), Some(9), Some(3)),
            group("big", "4", Some(0), Some(10), None),
        ],
    );
    assert_eq!(tos(&plan(&s, 11.0, 100)), [("small", 1), ("none", 2), ("big", 2)]);
    // Multi-host replicas bring numOfHosts nodes each; suspended groups are skipped.
    let mut g = group("tpu", "2", Some(0), Some(8), None);
    g["numOfHosts"] = json!(2);
    let mut off = group("off", "2", Some(0), Some(8), None);
    off["suspend"] = json!(true);
    assert_eq!(tos(&plan(&spec("0", vec![off, g]), 9.0, 100)), [("tpu", 3)]);
}

#[test]
fn patches_test_what_they_were_computed_from() {
    let scales = [
        Scale {
            index: 0,
            group: "a".into(),
            stored: None,
            to: 2,
        },
        Scale {
            index: 2,
            group: "c".into(),
            stored: Some(5),
            to: 4,
        },
    ];
    assert_eq!(
        patch_for(&scales),
        json!([
            {"op": "test", "path": "/spec/workerGroupSpecs/0/groupName", "value": "a"},
            {"op": "add", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2},
            {"op": "test", "path": "/spec/workerGroupSpecs/2/groupName", "value": "c"},
            {"op": "test", "path": "/spec/workerGroupSpecs/2/replicas", "value": 5},
            {"op": "add", "path": "/spec/workerGroupSpecs/2/replicas", "value": 4},
        ])
    );
}

fn pod(ns: &str, name: &str, cluster: &str, node: &str, group: &str, ready: bool, res: Value) -> Value {
    let phase = if ready { "Running" } else { "Pending" };
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": ns, "labels": {
               c::LABEL_CLUSTER: cluster, c::LABEL_NODE_TYPE: node, c::LABEL_GROUP: group}},
           "spec": {"containers": [{"name": "ray", "image": "ray", "resources": res}]},
           "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
}

#[test]
fn capacity_counts_ready_pods_with_their_groups_settings() {
    let s = spec("0", vec![group("g", "2", Some(0), Some(5), None)]);
    let mut deleting = pod("ns", "w3", "rs-a", "worker", "g", true, json!({}));
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let pods: Vec<Pod> = [
        pod("ns", "h", "rs-a", "head", "headgroup", true, cpu(Some("8"), None)),
        pod("ns", "w1", "rs-a", "worker", "g", true, json!({})),
        pod("ns", "w2", "rs-a", "worker", "g", false, json!({})),
        deleting,
        pod("ns", "w4", "rs-a", "worker", "gone", true, cpu(None, Some("1"))),
    ]
    .into_iter()
    .map(|p| serde_json::from_value(p).unwrap())
    .collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    assert_eq!(capacity(&s, &refs), 3.0);
}

fn raycluster(ns: &str, name: &str, autoscaling: bool) -> Value {
    let mut s = serde_json::to_value(spec("0", vec![group("g", "1", Some(0), Some(4), None)])).unwrap();
    s["enableInTreeAutoscaling"] = json!(autoscaling);
    json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
           "metadata": {"name": name, "namespace": ns}, "spec": s})
}

fn replicas(api: &FakeApi, name: &str) -> Option<i64> {
    api.get("RayCluster", "ns", name)?
        .pointer("/spec/workerGroupSpecs/0/replicas")?
        .as_i64()
}

/// Waits in virtual time for `f`, failing after `limit`.
async fn eventually(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn the_loop_scales_workers_to_demand_and_capacity_follows_ready_pods() {
    // `rs-a`'s head Service URL is the shared test URL.
    let api = FakeApi::new(vec![
        raycluster("ns", "rs-a", true),
        raycluster("ns", "static", false),
        pod("ns", "h", "rs-a", "head", "headgroup", true, json!({})),
    ]);
    let sim = Arc::new(RaySim::new(SimOptions::default()));
    let task = tokio::spawn(run(api.client(), sim.clone(), AutoscalerConfig::default()));
    let static_url = "http://static-head-svc.ns.svc.cluster.local:8265";

    sim.deploy(&ep(), &config(vec![hello(3)]), None).await.unwrap();
    eventually(3 * S, "3 workers asked for", || replicas(&api, "rs-a") == Some(3)).await;
    // No worker is up: nothing runs, however long.
    tokio::time::sleep(5 * S).await;
    assert_eq!(sim.running_replicas(URL)["hello"], 0);
    // KubeRay and the kubelet bring two workers up; two replicas run start delay later.
    for w in ["w1", "w2"] {
        api.put(pod("ns", w, "rs-a", "worker", "g", true, json!({})));
    }
    eventually(3 * S, "2 running", || sim.running_replicas(URL)["hello"] == 2).await;

    // Demand falls to 1: down one replica per period.
    sim.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap();
    eventually(2 * S, "scaled to 2", || replicas(&api, "rs-a") == Some(2)).await;
    eventually(2 * S, "scaled to 1", || replicas(&api, "rs-a") == Some(1)).await;
    // With two workers up for one wanted, the youngest (the name breaks the tie) is named for
    // KubeRay to delete; the group waits while it runs, and the list is cleared once it is gone.
    let named = || {
        api.get("RayCluster", "ns", "rs-a").and_then(|rc| {
            rc.pointer("/spec/workerGroupSpecs/0/scaleStrategy/workersToDelete")
                .cloned()
        })
    };
    assert_eq!(named(), Some(json!(["w2"])));
    tokio::time::sleep(2 * S).await;
    assert_eq!(named(), Some(json!(["w2"])), "kept while w2 runs");
    api.remove("Pod", "ns", "w2");
    eventually(2 * S, "the list cleared", || named() == Some(json!([]))).await;

    // API errors are survived.
    api.set_failing(true);
    tokio::time::sleep(2 * S).await;
    api.set_failing(false);
    sim.deploy(&ep(), &config(vec![hello(4)]), None).await.unwrap();
    eventually(3 * S, "scaled to 4", || replicas(&api, "rs-a") == Some(4)).await;

    // The cluster goes away: forgotten, so back to the unknown capacity (0): its nodes went with it.
    api.remove("RayCluster", "ns", "rs-a");
    eventually(5 * S, "nothing running", || {
        sim.running_replicas(URL)["hello"] == 0
    })
    .await;

    // The cluster without the autoscaler was never patched and is unlimited.
    assert_eq!(replicas(&api, "static"), None);
    let patches = api.requests().iter().filter(|r| r.starts_with("PATCH")).count();
    assert!(
        (3..=8).contains(&patches),
        "{patches} patches: {:?}",
        api.requests()
    );
    sim.deploy(&DashboardEndpoint::new(static_url), &config(vec![hello(2)]), None)
        .await
        .unwrap();
    tokio::time::sleep(4 * S).await;
    assert_eq!(sim.running_replicas(static_url)["hello"], 2);
    task.abort();
}

/// The `workersToDelete` ops of a `name_leaving` result, per group index.
fn named(ops: &[Value]) -> Vec<(String, Value)> {
    ops.iter()
        .filter(|o| o["path"].as_str().is_some_and(|p| p.ends_with("/scaleStrategy")))
        .map(|o| {
            (
                o["path"].as_str().unwrap().to_string(),
                o["value"]["workersToDelete"].clone(),
            )
        })
        .collect()
}

/// Chaos seed 629: a scale-down written while the operator was still creating the group's second
/// pod left 2 workers on `replicas: 1` with none named, which KubeRay (autoscaling on) keeps for
/// good. The autoscaler names such a surplus as it names a scale-down's, guarded by the replicas it
/// read; it leaves a group at its count, and a group it does not scale, alone.
#[test]
fn a_surplus_nobody_named_is_named_for_deletion() {
    let ns = "ns";
    let worker = |name: &str| {
        serde_json::from_value::<Pod>(pod(ns, name, "rc", "worker", "gpu", true, json!({}))).unwrap()
    };
    let (w1, w2) = (worker("w1"), worker("w2"));
    let s = spec("0", vec![group("gpu", "1", Some(0), Some(4), Some(1))]);
    let (scales, ops) = name_leaving(&s, &[&w1, &w2], vec![]);
    assert!(scales.is_empty());
    assert_eq!(
        named(&ops),
        vec![(
            "/spec/workerGroupSpecs/0/scaleStrategy".to_string(),
            json!(["w2"])
        )]
    );
    assert!(
        ops.contains(&json!({"op": "test", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1})),
        "{ops:?}"
    );
    let (_, ops) = name_leaving(&s, &[&w1], vec![]);
    assert!(ops.is_empty(), "a group at its count: {ops:?}");
    let fixed = spec("0", vec![group("gpu", "1", None, None, Some(1))]);
    let (_, ops) = name_leaving(&fixed, &[&w1, &w2], vec![]);
    assert!(
        ops.is_empty(),
        "a group without the autoscaler is the operator's to shrink: {ops:?}"
    );
    // A scale-down from 2 to 1 names its surplus once, with the scale kept.
    let two = spec("0", vec![group("gpu", "1", Some(0), Some(4), Some(2))]);
    let down = Scale {
        index: 0,
        group: "gpu".into(),
        stored: Some(2),
        to: 1,
    };
    let (scales, ops) = name_leaving(&two, &[&w1, &w2], vec![down.clone()]);
    assert_eq!(scales, vec![down]);
    assert_eq!(
        named(&ops),
        vec![(
            "/spec/workerGroupSpecs/0/scaleStrategy".to_string(),
            json!(["w2"])
        )]
    );
}

/// Issue 47: after a restart the autoscaler saw "zero demand" on a serving cluster it knew nothing
/// about and scaled it 4 -> 0. Unknown demand lifts groups to their minimum and never lowers them;
/// observed demand (zero included) scales as before.
#[test]
fn unobserved_demand_never_scales_a_group_down() {
    let serving = spec("0", vec![group("w", "1", Some(0), Some(8), Some(4))]);
    assert!(plan_observed(&serving, None, 100).is_empty());
    assert_eq!(tos(&plan_observed(&serving, Some(0.0), 100)), vec![("w", 3)]);
    assert_eq!(tos(&plan_observed(&serving, Some(6.0), 100)), vec![("w", 6)]);
}

#[test]
fn a_head_restarted_only_when_a_seen_head_is_replaced() {
    // (head uid seen before, head uid now) -> restarted
    let table = [
        (None, None, false),
        (None, Some("a"), false), // first sight: a new cluster or a process that just started
        (Some("a"), Some("a"), false),
        (Some("a"), None, false), // deleted, not yet replaced
        (Some("a"), Some("b"), true),
    ];
    for (seen, now, want) in table {
        assert_eq!(head_restarted(seen, now), want, "{seen:?} -> {now:?}");
    }
}

#[test]
fn gcs_fault_tolerance_keeps_the_apps_across_a_head_restart() {
    let mut rc = RayCluster::new("c", spec("1", vec![]));
    assert!(!survives_head_restart(&rc));
    rc.metadata.annotations = Some([(c::ANNOTATION_FT_ENABLED.to_owned(), "true".to_owned())].into());
    assert!(survives_head_restart(&rc));
}
