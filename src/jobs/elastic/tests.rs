//! The ungater's decision against Kueue's `pkg/controller/elasticjobs/elastic_job_ungater_test.go`
//! (TestReconcile, every case observable without a cluster) and `workloadslicing.FindLatestActiveWorkload`.

use super::*;
use crate::api::conditions;
use crate::api::kueue::constants::{condition, label};
use serde_json::json;

fn slice(name: &str, podsets: &[(&str, i32)]) -> crate::api::kueue::builders::WorkloadBuilder {
    let mut b = Workload::build(name, "ns").annotation(label::ELASTIC_JOB, "true");
    for (ps, n) in podsets {
        b = b.podset(ps, *n, [("cpu", "1")]);
    }
    b
}

fn admitted(name: &str, podsets: &[(&str, i32)]) -> Workload {
    slice(name, podsets)
        .reserve_quota("cq", "flavor")
        .admitted()
        .build()
}

/// A pod of chain `wl` in `podset` (no label when `None`), gated or not.
fn pod(name: &str, podset: Option<&str>, gated: bool, phase: Option<&str>) -> Pod {
    let mut v = json!({"metadata": {"name": name, "namespace": "ns", "annotations": {label::WORKLOAD_SLICE_NAME: "wl"}}, "spec": {"containers": []}});
    if let Some(ps) = podset {
        v["metadata"]["labels"] = json!({label::PODSET: ps});
    }
    if gated {
        v["spec"]["schedulingGates"] = json!([{"name": label::ELASTIC_JOB_SCHEDULING_GATE}]);
    }
    if let Some(p) = phase {
        v["status"] = json!({"phase": p});
    }
    serde_json::from_value(v).unwrap()
}

fn names(pods: Vec<&Pod>) -> Vec<&str> {
    pods.into_iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect()
}

fn evicted(mut w: Workload) -> Workload {
    let status = w.status.get_or_insert_with(Default::default);
    conditions::set(
        &mut status.conditions,
        conditions::new(
            condition::EVICTED,
            true,
            "Preempted",
            "preempted",
            None,
            jiff::Timestamp::UNIX_EPOCH,
        ),
    );
    w
}

#[test]
fn pods_are_ungated_up_to_what_the_slice_grants_per_podset() {
    let one = admitted("wl", &[("main", 1)]);
    // "ungate single pod"
    assert_eq!(
        names(pods_to_ungate(&one, &[pod("pod", Some("main"), true, None)])),
        vec!["pod"]
    );
    // "ungate multiple pods"
    let three = admitted("wl", &[("main", 3)]);
    let pods = [
        pod("pod-0", Some("main"), true, None),
        pod("pod-1", Some("main"), true, None),
        pod("pod-2", Some("main"), true, None),
    ];
    assert_eq!(
        names(pods_to_ungate(&three, &pods)),
        vec!["pod-0", "pod-1", "pod-2"]
    );
    // "skip already ungated pods": two granted, one already through.
    let two = admitted("wl", &[("main", 2)]);
    let pods = [
        pod("pod-ungated", Some("main"), false, None),
        pod("pod-gated", Some("main"), true, None),
        pod("pod-gated-2", Some("main"), true, None),
    ];
    assert_eq!(names(pods_to_ungate(&two, &pods)), vec!["pod-gated"]);

    let head_workers = admitted("wl", &[("head", 1), ("workers", 2)]);
    // "ungate pods independently per podset"
    let pods = [
        pod("head-0", Some("head"), true, None),
        pod("head-1", Some("head"), true, None),
        pod("worker-0", Some("workers"), true, None),
        pod("worker-1", Some("workers"), true, None),
        pod("worker-2", Some("workers"), true, None),
    ];
    assert_eq!(
        names(pods_to_ungate(&head_workers, &pods)),
        vec!["head-0", "worker-0", "worker-1"]
    );
    // "do not share spare capacity between podsets"
    let pods = [
        pod("head-running", Some("head"), false, None),
        pod("head-waiting", Some("head"), true, None),
        pod("worker-waiting", Some("workers"), true, None),
    ];
    assert_eq!(
        names(pods_to_ungate(&head_workers, &pods)),
        vec!["worker-waiting"]
    );
    // "terminal pod frees capacity only in its podset"
    let pods = [
        pod("head-succeeded", Some("head"), false, Some("Succeeded")),
        pod("head-waiting", Some("head"), true, None),
        pod("worker-running-0", Some("workers"), false, Some("Running")),
        pod("worker-running-1", Some("workers"), false, Some("Running")),
        pod("worker-waiting", Some("workers"), true, None),
    ];
    assert_eq!(names(pods_to_ungate(&head_workers, &pods)), vec!["head-waiting"]);
    // "do not ungate pod without podset label"
    assert!(pods_to_ungate(&head_workers, &[pod("pod", None, true, None)]).is_empty());
    // A pod of another chain is neither let through nor counted.
    let mut other = pod("other", Some("main"), true, None);
    other.metadata.annotations =
        Some([(label::WORKLOAD_SLICE_NAME.to_string(), "another".to_string())].into());
    assert!(pods_to_ungate(&one, &[other]).is_empty());
}

#[test]
fn ungating_takes_only_the_elastic_gate() {
    let mut p = pod("p", Some("main"), true, None);
    p.spec
        .as_mut()
        .unwrap()
        .scheduling_gates
        .as_mut()
        .unwrap()
        .push(serde_json::from_value(json!({"name": "user/gate"})).unwrap());
    let gates = ungated(&p).spec.unwrap().scheduling_gates.unwrap();
    assert_eq!(
        gates.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(),
        vec!["user/gate"]
    );
    assert!(
        ungated(&pod("q", Some("main"), true, None))
            .spec
            .unwrap()
            .scheduling_gates
            .is_none()
    );
}

#[test]
fn the_active_slice_is_the_newest_admitted_one_not_being_evicted() {
    let t = |s: i64| jiff::Timestamp::from_second(1_700_000_000 + s).unwrap();
    let old = slice("wl", &[("main", 1)])
        .created_at(t(0))
        .reserve_quota("cq", "flavor")
        .admitted()
        .build();
    let newer = slice("wl-2", &[("main", 3)])
        .annotation(label::WORKLOAD_SLICE_NAME, "wl")
        .created_at(t(60))
        .reserve_quota("cq", "flavor")
        .admitted()
        .build();
    assert_eq!(
        active_slice(&[old.clone(), newer.clone()]).and_then(|w| w.metadata.name.as_deref()),
        Some("wl-2")
    );
    assert_eq!(slice_name(&newer), "wl", "the chain keeps its first slice's name");
    // "an evicted slice does not set the ungating cap": the older one still holds its capacity.
    let both = [old.clone(), evicted(newer.clone())];
    let chosen = active_slice(&both).unwrap();
    assert_eq!(chosen.metadata.name.as_deref(), Some("wl"));
    let pods = [
        pod("pod-0", Some("main"), true, None),
        pod("pod-1", Some("main"), true, None),
    ];
    assert_eq!(names(pods_to_ungate(chosen, &pods)), vec!["pod-0"]);
    // "keep pod gated while admission check is pending": quota alone does not open it.
    assert!(active_slice(&[slice("wl", &[("main", 1)]).reserve_quota("cq", "flavor").build()]).is_none());
    // A pending replacement beside the admitted slice grants nothing yet.
    let pending = slice("wl-3", &[("main", 5)]).created_at(t(120)).build();
    assert_eq!(
        active_slice(&[old.clone(), pending]).and_then(|w| w.metadata.name.as_deref()),
        Some("wl")
    );
    // Finished (replaced) slices are not the chain's any more; a workload that is not elastic opens nothing.
    let mut finished = old.clone();
    conditions::set(
        &mut finished.status.as_mut().unwrap().conditions,
        conditions::new(condition::FINISHED, true, "WorkloadSliceReplaced", "", None, t(0)),
    );
    assert!(active_slice(&[finished]).is_none());
    assert!(
        active_slice(&[Workload::build("plain", "ns")
            .podset("main", 1, [("cpu", "1")])
            .reserve_quota("cq", "f")
            .admitted()
            .build()])
        .is_none()
    );
    assert!(
        active_slice(&[evicted(old)]).is_none(),
        "\"Should stop ungating once the slice holding the reservation is evicted\""
    );
}

// Kueue: test/integration/singlecluster/controller/jobs/job/job_controller_test.go, "Should ungate chain
// pods after the origin workload slice is deleted" and "Should keep chain pods gated when the origin
// slice is deleted and no active slice survives": the ungater finds a job's slices by their owner, and
// a chain keeps its first slice's name, so the origin being gone changes nothing; with no admitted
// slice left, nothing is let through.
#[test]
fn a_deleted_origin_slice_neither_strands_nor_frees_the_chains_pods() {
    let survivor = slice("wl-2", &[("main", 2)])
        .annotation(label::WORKLOAD_SLICE_NAME, "wl")
        .reserve_quota("cq", "flavor")
        .admitted()
        .build();
    let only = [survivor];
    let active = active_slice(&only).unwrap();
    assert_eq!(
        names(pods_to_ungate(
            active,
            &[pod("worker-0", Some("main"), true, None)]
        )),
        vec!["worker-0"]
    );
    assert!(active_slice(&[]).is_none());
}
