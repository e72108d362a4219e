//! `plan` on RayServices in the shapes of KubeRay's getting-started and incremental-upgrade guides
//! (`tests/fixtures/manifests/kuberay/ray-service.{getting-started,incremental-istio}.yaml`) and a quota
//! in the shape of Kueue's single-ClusterQueue setup, each number worked out by hand in a comment.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;

use super::phases::{incremental_states, serve_cpus};
use super::*;
use crate::api::kueue::Workload;

fn manifest(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/manifests")
        .join(rel)
}

fn service(rel: &str) -> RayService {
    let docs = read_docs(&[manifest(rel)]).expect("sample reads");
    one_service(rel, &docs).expect("one RayService")
}

fn podset<'a>(p: &'a PhaseReport, name: &str) -> &'a PodSetReport {
    p.podsets
        .iter()
        .find(|ps| ps.name == name)
        .unwrap_or_else(|| panic!("podset {name} in {:?}", p.podsets))
}

fn queues(rel: &str) -> Snapshot {
    let mut snap = Snapshot::default();
    fit::add_documents(&mut snap, &read_docs(&[manifest(rel)]).expect("queues read"))
        .expect("queue documents parse");
    snap
}

#[test]
fn blue_green_sample_needs_both_clusters_at_peak() {
    // ray-service.getting-started.yaml: head requests cpu 2, memory 2Gi; one small-group worker (replicas 1)
    // requests cpu 500m, memory 2Gi. Steady: 2 + 0.5 = 2.5 CPU, 2 + 2 = 4Gi. No upgradeStrategy:
    // KubeRay's default NewCluster (blue/green), so the peak is two such clusters: 5 CPU, 8Gi.
    let rs = service("kuberay/ray-service.getting-started.yaml");
    let r = compute(&rs, &rs).unwrap();
    assert_eq!(r.strategy, "NewCluster");
    assert_eq!(r.steady.total["cpu"], "2500m");
    assert_eq!(r.steady.total["memory"], "4Gi");
    assert_eq!(r.peak.total["cpu"], "5");
    assert_eq!(r.peak.total["memory"], "8Gi");
    assert_eq!(r.upgrade_extra["cpu"], "2500m");
    assert_eq!(r.upgrade_extra["memory"], "4Gi");
    // Same shape in both clusters: one podset per group, counts summed (the admission's merge).
    assert_eq!(r.peak.podsets.len(), 2);
    assert_eq!(podset(&r.peak, "head").count, 2);
    assert_eq!(podset(&r.peak, "head").per_pod["cpu"], "2");
    assert_eq!(podset(&r.peak, "small-group").count, 2);
    assert_eq!(podset(&r.peak, "small-group").per_pod["cpu"], "500m");
}

#[test]
fn a_resized_target_spec_is_its_own_podset_at_peak() {
    // --to with the worker grown to 2 CPU and 3 replicas: peak = old (2 + 0.5) + new (2 + 3 x 2) = 10.5 CPU;
    // the two worker shapes stay separate podsets (exact accounting).
    let from = service("kuberay/ray-service.getting-started.yaml");
    let mut to = from.clone();
    let g = &mut to.spec.ray_cluster_config.worker_group_specs.as_mut().unwrap()[0];
    g.replicas = Some(3);
    let c = &mut g.template.spec.as_mut().unwrap().containers[0];
    c.resources.as_mut().unwrap().requests.as_mut().unwrap().insert(
        "cpu".into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()),
    );
    let r = compute(&from, &to).unwrap();
    assert_eq!(r.peak.total["cpu"], "10500m");
    assert_eq!(
        r.peak
            .podsets
            .iter()
            .filter(|p| p.name.starts_with("small-group-"))
            .count(),
        2,
        "{:?}",
        r.peak.podsets
    );
}

#[test]
fn incremental_sample_peak_is_active_plus_one_surge_step() {
    // ray-service.incremental-istio.yaml: autoscaling on; head num-cpus 0 (no Serve replica on it),
    // requests cpu 1, memory 2Gi; small-group workers (min 0, max 4) offer 1 CPU each (their limit)
    // and request cpu 500m, memory 1Gi. Serve at 100%: Embedder 1 replica (autoscaling min) x 0.5
    // + Cache 1 x 0 + Logger 1 x 0 + Ranker 1 x 0.5 = 1 CPU -> 1 worker.
    let rs = service("kuberay/ray-service.incremental-istio.yaml");
    assert_eq!(serve_cpus(&rs, 100).unwrap(), 1.0);
    // At 10% Serve rounds each deployment's replicas half-up but keeps at least 1: still 1 CPU.
    assert_eq!(serve_cpus(&rs, 10).unwrap(), 1.0);
    assert_eq!(serve_cpus(&rs, 0).unwrap(), 0.0);
    let r = compute(&rs, &rs).unwrap();
    assert_eq!(r.strategy, "NewClusterWithIncrementalUpgrade");
    // With enableInTreeAutoscaling the head pod also runs KubeRay's autoscaler sidecar (requests
    // 500m, 512Mi), so the head podset asks 1500m and 2.5Gi per pod.
    // Steady: head 1500m + 1 worker 500m = 2 CPU; 2.5Gi + 1Gi = 3.5Gi.
    assert_eq!(r.peak.podsets[0].per_pod["cpu"], "1500m");
    assert_eq!(r.steady.total["cpu"], "2");
    assert_eq!(r.steady.total["memory"], "3584Mi");
    // maxSurgePercent 10: the first step puts the pending cluster at 10% beside the active one at
    // 100%; its 1 CPU of replicas needs 1 worker, so the peak is two heads and two workers:
    // 4 CPU, 7Gi. With replicas of 1, a 10% step costs as much as blue/green.
    assert_eq!(r.peak.name, "peak (incremental: pending at 10%, active at 100%)");
    assert_eq!(r.peak.total["cpu"], "4");
    assert_eq!(r.peak.total["memory"], "7Gi");
    assert_eq!(r.peak.clusters[1].workers["small-group"], 1);
}

#[test]
fn incremental_peak_is_smaller_than_blue_green_with_many_replicas() {
    // The incremental sample with FruitMarket at 10 replicas of 1 CPU each (Mango 0.5 stays) and
    // maxSurgePercent 20, workers up to 20: at 100% Serve needs 10.5 CPU -> 11 workers; a 20% step
    // needs Mango 1 x 0.5 + FruitMarket 2 x 1 = 2.5 CPU -> 3 workers. Peak: 11 + 3 = 14 workers,
    // not 22 as blue/green: 2 heads (2 x 1500m with the autoscaler sidecar) + 14 x 500m = 10 CPU.
    let mut rs = service("kuberay/ray-service.incremental-istio.yaml");
    rs.spec.serve_config_v2 = Some(
        "applications:\n  - name: fruit_app\n    import_path: fruit.deployment_graph\n    deployments:\n      \
         - name: MangoStand\n        ray_actor_options: {num_cpus: 0.5}\n        autoscaling_config: {min_replicas: 1, max_replicas: 3}\n      \
         - name: FruitMarket\n        num_replicas: 10\n        ray_actor_options: {num_cpus: 1}\n"
            .into(),
    );
    rs.spec
        .upgrade_strategy
        .as_mut()
        .unwrap()
        .cluster_upgrade_options
        .as_mut()
        .unwrap()
        .max_surge_percent = Some(20);
    rs.spec.ray_cluster_config.worker_group_specs.as_mut().unwrap()[0].max_replicas = Some(20);
    assert_eq!(serve_cpus(&rs, 100).unwrap(), 10.5);
    assert_eq!(serve_cpus(&rs, 20).unwrap(), 2.5);
    let r = compute(&rs, &rs).unwrap();
    assert_eq!(r.steady.total["cpu"], "7", "head 1500m + 11 workers x 500m");
    assert_eq!(r.peak.total["cpu"], "10");
    assert_eq!(r.peak.total["memory"], "19Gi", "2 x 2.5Gi + 14 x 1Gi");
    let mut bg = rs.clone();
    bg.spec.upgrade_strategy = None;
    assert_eq!(
        compute(&bg, &bg).unwrap().peak.total["cpu"],
        "14",
        "blue/green: 2 x 7"
    );
}

#[test]
fn strategy_none_needs_nothing_extra() {
    let mut rs = service("kuberay/ray-service.getting-started.yaml");
    rs.spec.upgrade_strategy = Some(serde_json::from_value(json!({"type": "None"})).unwrap());
    let r = compute(&rs, &rs).unwrap();
    assert_eq!(r.peak.total, r.steady.total);
    assert_eq!(r.upgrade_extra["cpu"], "0");
}

#[test]
fn incremental_states_follow_the_upgrades_own_moves() {
    // surge 50, step 50: grow the pending to 50, move traffic to it, shrink the active to 50,
    // grow the pending to 100, move the rest of the traffic, shrink the active to 0.
    assert_eq!(
        incremental_states(50, 50),
        vec![(0, 100), (50, 100), (50, 50), (100, 50), (100, 0)]
    );
    let s = incremental_states(10, 10);
    assert_eq!(s.first(), Some(&(0, 100)));
    assert_eq!(s.last(), Some(&(100, 0)));
    assert!(
        s.iter().all(|(g, l)| g + l <= 110),
        "never more than one surge step above 100%: {s:?}"
    );
}

#[test]
fn kueues_single_clusterqueue_admits_the_sample_at_peak() {
    // single-clusterqueue.yaml: cluster-queue has 9 CPU and 36Gi in default-flavor;
    // the blue/green peak (5 CPU, 8Gi) fits.
    let rs = service("kuberay/ray-service.getting-started.yaml");
    let snap = queues("kueue/single-clusterqueue.yaml");
    let mut r = compute(&rs, &rs).unwrap();
    check_against(&mut r, &snap, &rs, &rs, Some("cluster-queue"), 1_000).unwrap();
    let peak = r.peak.admission.as_ref().unwrap();
    assert!(peak.admitted, "{peak:?}");
    assert_eq!(peak.flavors["head"]["cpu"], "default-flavor");
    assert!(r.steady.admission.as_ref().unwrap().admitted);
}

fn holder(cpu: &str, priority: i32) -> Workload {
    serde_json::from_value(json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "training", "namespace": "team-a", "uid": "u-training", "resourceVersion": "7"},
        "spec": {"queueName": "user-queue", "priority": priority, "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]},
        "status": {
            "admission": {"clusterQueue": "cluster-queue", "podSetAssignments": [{"name": "main", "count": 1,
                "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": cpu}}]},
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
        }
    }))
    .unwrap()
}

#[test]
fn a_peak_that_does_not_fit_names_the_shortfall_and_the_holder() {
    // 9 CPU nominal, an admitted training job holds 6: 3 CPU left. Steady (2.5) fits; the peak (5)
    // is 2 CPU short, and the training job holds the quota. The ClusterQueue preempts nothing.
    let rs = service("kuberay/ray-service.getting-started.yaml");
    let mut snap = queues("kueue/single-clusterqueue.yaml");
    snap.workloads.push(Arc::new(holder("6", 0)));
    let mut r = compute(&rs, &rs).unwrap();
    check_against(&mut r, &snap, &rs, &rs, Some("cluster-queue"), 1_000).unwrap();
    assert!(r.steady.admission.as_ref().unwrap().admitted);
    let peak = r.peak.admission.as_ref().unwrap();
    assert!(!peak.admitted);
    assert_eq!(peak.reason, "WaitingForQuota");
    let e = peak.explanation.as_ref().expect("the scheduler's record");
    let cpu = e
        .podsets
        .iter()
        .flat_map(|p| &p.resources)
        .find(|r| r.resource == "cpu" && r.flavors.iter().any(|f| !f.fits))
        .expect("a short cpu");
    let f = &cpu.flavors[0];
    assert_eq!(
        (
            f.flavor.as_str(),
            f.nominal.as_str(),
            f.used.as_str(),
            f.available.as_str()
        ),
        ("default-flavor", "9", "6", "3")
    );
    assert_eq!(e.holders.len(), 1);
    assert_eq!(e.holders[0].workload, "team-a/training");
    assert_eq!(
        e.holders[0].holds,
        vec![("cpu in flavor default-flavor".to_string(), "6".to_string())]
    );
    assert!(!e.holders[0].preemptible);
    assert_eq!(
        e.preemption.why,
        "the ClusterQueue's preemption policy allows no preemption"
    );
    let table = render(&r, Output::Table).unwrap();
    assert!(table.contains("team-a/training"), "{table}");
    assert!(table.contains("no (WaitingForQuota)"), "{table}");
}

#[test]
fn plan_refuses_input_it_cannot_use_with_a_clear_error() {
    let rs = service("kuberay/ray-service.getting-started.yaml");
    let mut snap = queues("kueue/single-clusterqueue.yaml");
    let mut r = compute(&rs, &rs).unwrap();
    let e = check_against(&mut r, &snap, &rs, &rs, Some("no-such-cq"), 0).unwrap_err();
    assert_eq!(e.to_string(), "ClusterQueue no-such-cq does not exist");
    let e = check_against(&mut r, &snap, &rs, &rs, None, 0).unwrap_err();
    assert!(e.to_string().contains("--cluster-queue"), "{e}");
    snap.cluster_queues.clear();
    let docs = vec![(0, json!({"kind": "ClusterQueue", "metadata": {"name": 5}}))];
    assert!(
        fit::add_documents(&mut snap, &docs)
            .unwrap_err()
            .to_string()
            .starts_with("document 0 (ClusterQueue)")
    );
    let mut bad = service("kuberay/ray-service.incremental-istio.yaml");
    bad.spec.serve_config_v2 = Some(
        "applications:\n  - name: a\n    deployments:\n      - name: d\n        num_replicas: -3\n".into(),
    );
    assert!(
        compute(&bad, &bad)
            .unwrap_err()
            .to_string()
            .contains("applications[0].deployments[0].num_replicas")
    );
}

/// The project's incremental sample: one 50% step of the new cluster is its head (1 CPU + the 500m
/// autoscaler sidecar) and 2 one-CPU workers, 3.5 CPU (the sample quota.yaml's own sizing). Two such
/// services upgrading at once without waiting need twice that spare; taking turns, once.
#[test]
fn concurrent_upgrades_of_the_incremental_sample() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/samples/incremental/rayservice.yaml");
    let docs = read_docs(&[path]).expect("sample reads");
    let rs = one_service("sample", &docs).expect("one RayService");
    let r = compute(&rs, &rs).unwrap();
    assert_eq!(r.upgrade_extra.get("cpu").map(String::as_str), Some("3500m"));
    assert_eq!(r.concurrent.upgrades, 2);
    assert_eq!(
        r.concurrent.without_waiting.get("cpu").map(String::as_str),
        Some("7")
    );
    assert_eq!(
        r.concurrent.taking_turns.get("cpu").map(String::as_str),
        Some("3500m")
    );
    let text = render(&r, Output::Table).unwrap();
    assert!(text.contains("2 concurrent upgrades, none waiting"), "{text}");
}

/// Issue 45: two different services in one `plan`: each keeps its own report, and together they
/// need both steady states, the sum of their extras to upgrade at once without waiting, and only
/// the larger extra to take turns.
#[test]
fn several_services_are_planned_together() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/samples");
    let inc = one_service(
        "inc",
        &read_docs(&[root.join("incremental/rayservice.yaml")]).unwrap(),
    )
    .unwrap();
    let gated = one_service(
        "gated",
        &read_docs(&[root.join("gated-upgrade/rayservice.yaml")]).unwrap(),
    )
    .unwrap();
    let (a, b) = (compute(&inc, &inc).unwrap(), compute(&gated, &gated).unwrap());
    let t = several::together(&[inc, gated]).unwrap();
    let milli = |s: &str| crate::api::quantity::Quantity::parse(s).unwrap().milli_value();
    let cpu = |m: &std::collections::BTreeMap<String, String>| milli(m.get("cpu").unwrap());
    assert_eq!(cpu(&t.steady), cpu(&a.steady.total) + cpu(&b.steady.total));
    assert_eq!(
        cpu(&t.without_waiting),
        cpu(&a.upgrade_extra) + cpu(&b.upgrade_extra)
    );
    assert_eq!(
        cpu(&t.taking_turns),
        cpu(&a.upgrade_extra).max(cpu(&b.upgrade_extra))
    );
    assert_ne!(
        cpu(&a.upgrade_extra),
        cpu(&b.upgrade_extra),
        "two different extras make the test tell sum from max"
    );
    let plans = several::Plans {
        services: vec![a, b],
        together: Some(t),
        jobs: Vec::new(),
    };
    let text = several::render_all(&plans, Output::Table).unwrap();
    assert!(
        text.contains("Together: 2 RayServices") && text.contains("spare for upgrades taking turns"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&several::render_all(&plans, Output::Json).unwrap()).unwrap();
    assert_eq!(json["services"].as_array().map(Vec::len), Some(2));
}

const RACK: &str = "cloud.provider.com/topology-rack";

/// Two racks of `per_rack` nodes of 2 CPU, a Topology of the rack level, the TAS flavor naming it
/// and ClusterQueue `cq` with ample quota in it: only the racks can be short.
fn racks(per_rack: usize) -> Snapshot {
    let mut docs = vec![
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": RACK}]}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "tas-flavor"},
            "spec": {"nodeLabels": {"group": "tas"}, "topologyName": "default"}}),
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory"],
                "flavors": [{"name": "tas-flavor", "resources": [
                    {"name": "cpu", "nominalQuota": "100"}, {"name": "memory", "nominalQuota": "1000Gi"}]}]}]}}),
    ];
    for rack in ["rack-a", "rack-b"] {
        for i in 0..per_rack {
            docs.push(json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": format!("{rack}-{i}"), "labels": {RACK: rack, "group": "tas"}},
                "status": {"allocatable": {"cpu": "2", "memory": "64Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}]}}));
        }
    }
    let mut snap = Snapshot::default();
    let docs: Vec<(usize, serde_json::Value)> = docs.into_iter().enumerate().collect();
    fit::add_documents(&mut snap, &docs).expect("queue documents parse");
    snap
}

/// A RayService whose head asks memory only and whose `workers` workers of 1 CPU require one rack.
fn rack_service(workers: i32) -> RayService {
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "rs", "namespace": "default"},
        "spec": {"rayClusterConfig": {"rayVersion": "2.46.0",
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head",
                "image": "rayproject/ray:2.46.0", "resources": {"requests": {"memory": "1Gi"}}}]}}},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": workers, "minReplicas": workers,
                "maxReplicas": workers, "rayStartParams": {},
                "template": {"metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}},
                    "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}]}}
    }))
    .unwrap()
}

/// Issue 65: `plan` says whether the upgrade fits topologically, not only by quota. The peak of a
/// blue/green upgrade is two clusters, each of whose workers must share a rack (Kueue tas_test.go
/// "should admit workload which fits in a required topology domain" / "should not admit workload
/// which does not fit to the required topology domain", applied per cluster). Racks of 4 CPU hold 3
/// workers each: the serving cluster in one, the pending one in the other. Racks of 2 CPU (one node)
/// hold no cluster's 3 workers: quota has room, the topology does not, and the plan says which level.
#[test]
fn plan_says_whether_the_upgrade_fits_the_topology_not_only_the_quota() {
    let rs = rack_service(3);
    let mut r = compute(&rs, &rs).unwrap();
    assert_eq!(
        r.peak
            .podsets
            .iter()
            .filter(|p| p.name.starts_with("workers-"))
            .count(),
        2,
        "each cluster's workers are a podset of their own: {:?}",
        r.peak.podsets
    );
    check_against(&mut r, &racks(2), &rs, &rs, Some("cq"), 1_000).unwrap();
    let peak = r.peak.admission.as_ref().unwrap();
    assert!(peak.admitted, "{peak:?}");
    let t = peak.topology.as_ref().expect("a topology verdict");
    assert_eq!((t.fits, t.by_quota), (Some(true), true));
    let worker_racks: Vec<&Vec<(String, i32)>> = t
        .placements
        .iter()
        .filter(|(p, _)| p.starts_with("workers-"))
        .map(|(_, d)| d)
        .collect();
    assert_eq!(worker_racks.len(), 2, "{t:?}");
    assert!(worker_racks.iter().all(|d| d.len() == 1 && d[0].1 == 3), "{t:?}");
    assert_ne!(worker_racks[0][0].0, worker_racks[1][0].0, "two racks: {t:?}");
    let table = render(&r, Output::Table).unwrap();
    assert!(
        table.contains("topology: fits yes; by quota alone: yes"),
        "{table}"
    );

    let mut r = compute(&rs, &rs).unwrap();
    check_against(&mut r, &racks(1), &rs, &rs, Some("cq"), 1_000).unwrap();
    let steady = r.steady.admission.as_ref().unwrap();
    assert!(!steady.admitted, "3 workers fit in no rack of 2 CPU: {steady:?}");
    let peak = r.peak.admission.as_ref().unwrap();
    assert!(!peak.admitted);
    let t = peak.topology.as_ref().expect("a topology verdict");
    assert_eq!((t.fits, t.by_quota), (Some(false), true), "{t:?}");
    assert!(
        t.why
            .contains(r#"topology "default" allows to fit only 2 out of 3 pod(s)"#)
            && t.why.contains(&format!("in one domain of topology level {RACK}")),
        "{}",
        t.why
    );
    let table = render(&r, Output::Table).unwrap();
    assert!(
        table.contains("topology: fits no; by quota alone: yes"),
        "{table}"
    );
}

/// The admitted slice of `rs` serving alone, with every podset placed in `rack`.
fn admitted_in(rs: &RayService, rack: &str) -> Workload {
    let mut b = Workload::build("rs-first", "default").queue(fit::PLAN_LOCAL_QUEUE);
    for ps in phases::steady(rs, "spec").unwrap().podsets {
        b = b.podset_spec(ps);
    }
    let mut w = b.reserve_quota("cq", "tas-flavor").admitted().build();
    w.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "ray.io/v1".into(),
            kind: "RayService".into(),
            name: "rs".into(),
            uid: "rs-uid".into(),
            controller: Some(true),
            ..Default::default()
        },
    ]);
    let counts: Vec<i32> = w.spec.pod_sets.iter().map(|p| p.count()).collect();
    let admission = w.status.as_mut().unwrap().admission.as_mut().unwrap();
    for (psa, n) in admission.pod_set_assignments.iter_mut().zip(counts) {
        psa.topology_assignment = Some(crate::api::kueue::tas::encode_assignment(
            &[RACK.to_string()],
            &[crate::api::kueue::tas::DomainAssignment {
                values: vec![rack.to_string()],
                count: n,
            }],
        ));
    }
    w
}

/// Issue 65: against a live cluster, `plan` keeps the serving cluster where its pods run, as the
/// upgrade's slice does (`demand::pins`). Both racks hold 3 workers; placed anew, the serving
/// workers would go to rack-a (BestFit, ties by name), though they run in rack-b.
#[test]
fn plan_against_a_live_cluster_keeps_the_serving_cluster_where_it_runs() {
    let rs = rack_service(3);
    let mut snap = racks(2);
    snap.workloads.push(Arc::new(admitted_in(&rs, "rack-b")));
    let mut r = compute(&rs, &rs).unwrap();
    check_against(&mut r, &snap, &rs, &rs, Some("cq"), 1_000).unwrap();
    assert_eq!(r.replaces.as_deref(), Some("default/rs-first"));
    let names: Vec<String> = phases::peak(&rs, &rs)
        .unwrap()
        .podsets
        .iter()
        .filter_map(|p| p.name.clone())
        .filter(|n| n.starts_with("workers-"))
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let (serving, pending) = (&names[0], &names[1]);
    let peak = r.peak.admission.as_ref().unwrap();
    assert!(peak.admitted, "{peak:?}");
    let t = peak.topology.as_ref().expect("a topology verdict");
    assert_eq!(t.placements[serving], vec![("rack-b".to_string(), 3)], "{t:?}");
    assert_eq!(t.placements[pending], vec![("rack-a".to_string(), 3)], "{t:?}");
    // Both heads are one podset: the serving one stays counted in rack-b.
    let heads = &t.placements["head"];
    assert_eq!(heads.iter().map(|(_, n)| n).sum::<i32>(), 2, "{t:?}");
    assert!(heads.iter().any(|(r, n)| r == "rack-b" && *n >= 1), "{t:?}");
    let steady = r.steady.admission.as_ref().unwrap();
    let t = steady.topology.as_ref().expect("a topology verdict");
    assert_eq!(t.placements["workers"], vec![("rack-b".to_string(), 3)], "{t:?}");
    assert_eq!(t.placements["head"], vec![("rack-b".to_string(), 1)], "{t:?}");
}
