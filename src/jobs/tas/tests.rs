//! The ungater's decision against Kueue's `pkg/controller/tas/topology_ungater_test.go` (TestReconcile):
//! the cases observable without a cluster, each named as there. Kueue compares the pods after one
//! reconcile; here the pods [`pods_to_ungate`] lets through are applied with [`ungated`] and the same
//! node-selector counts (and, for rank cases, exact node selectors) are compared.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::api::kueue::constants::label;
use crate::api::kueue::tas::{JOB_COMPLETION_INDEX, encode_assignment};

const BLOCK: &str = "cloud.com/topology-block";
const RACK: &str = "cloud.com/topology-rack";
/// LeaderWorkerSet's `leaderworkerset.sigs.k8s.io/worker-index`.
const LWS_WORKER_INDEX: &str = "leaderworkerset.sigs.k8s.io/worker-index";
/// JobSet's `jobset.sigs.k8s.io/job-index`.
const JOBSET_JOB_INDEX: &str = "jobset.sigs.k8s.io/job-index";

fn levels() -> Vec<String> {
    vec![BLOCK.to_string(), RACK.to_string()]
}

fn domains(d: &[(&str, &str, i32)]) -> Vec<DomainAssignment> {
    d.iter()
        .map(|(b, r, n)| DomainAssignment {
            values: vec![b.to_string(), r.to_string()],
            count: *n,
        })
        .collect()
}

/// A podset of the workload: name, count, its topology request, and where it was placed (`None`: no
/// topology assignment).
struct Ps<'a> {
    name: &'a str,
    count: i32,
    req: Option<PodSetTopologyRequest>,
    placed: Option<Vec<DomainAssignment>>,
}

fn ps<'a>(name: &'a str, count: i32, placed: &[(&str, &str, i32)]) -> Ps<'a> {
    Ps {
        name,
        count,
        req: None,
        placed: Some(domains(placed)),
    }
}

fn index_label(label: &str) -> Option<PodSetTopologyRequest> {
    Some(PodSetTopologyRequest {
        pod_index_label: Some(label.to_string()),
        ..Default::default()
    })
}

/// Workload `unit-test` in `ns` with quota reserved for `podsets`, admitted or not.
fn workload(podsets: Vec<Ps>, admitted: bool) -> Workload {
    let mut b = Workload::build("unit-test", "ns");
    for p in &podsets {
        b = b.podset(p.name, p.count, [("cpu", "1")]);
    }
    b = b.reserve_quota("cq", "unit-test-flavor");
    if admitted {
        b = b.admitted();
    }
    let mut wl = b.build();
    for (spec, p) in wl.spec.pod_sets.iter_mut().zip(&podsets) {
        spec.topology_request = p.req.clone();
    }
    let admission = wl.status.as_mut().unwrap().admission.as_mut().unwrap();
    for (psa, p) in admission.pod_set_assignments.iter_mut().zip(&podsets) {
        psa.count = Some(p.count);
        psa.topology_assignment = p.placed.as_ref().map(|d| encode_assignment(&levels(), d));
    }
    wl
}

struct P<'a> {
    name: &'a str,
    workload: Option<&'a str>,
    podset: Option<&'a str>,
    labels: Vec<(&'a str, &'a str)>,
    gates: Vec<&'a str>,
    selector: Option<(&'a str, &'a str)>,
    phase: Option<&'a str>,
}

/// A pod of `unit-test`'s `main` podset, gated by the topology gate.
fn gated(name: &str) -> P<'_> {
    P {
        name,
        workload: Some("unit-test"),
        podset: Some("main"),
        labels: Vec::new(),
        gates: vec![TOPOLOGY_SCHEDULING_GATE],
        selector: None,
        phase: None,
    }
}

/// A pod of `unit-test`'s `main` podset already let through to block/rack.
fn placed<'a>(name: &'a str, block: &'a str, rack: &'a str) -> P<'a> {
    P {
        gates: Vec::new(),
        selector: Some((block, rack)),
        ..gated(name)
    }
}

impl<'a> P<'a> {
    fn label(mut self, k: &'a str, v: &'a str) -> Self {
        self.labels.push((k, v));
        self
    }
    fn podset(mut self, ps: &'a str) -> Self {
        self.podset = Some(ps);
        self
    }
    fn phase(mut self, p: &'a str) -> Self {
        self.phase = Some(p);
        self
    }
    fn pod(&self) -> Pod {
        let mut labels: BTreeMap<&str, &str> = self.labels.iter().copied().collect();
        if let Some(ps) = self.podset {
            labels.insert(label::PODSET, ps);
        }
        let mut v = json!({"metadata": {"name": self.name, "namespace": "ns", "labels": labels},
            "spec": {"containers": []}});
        if let Some(w) = self.workload {
            v["metadata"]["annotations"] = json!({WORKLOAD_ANNOTATION: w});
        }
        if !self.gates.is_empty() {
            v["spec"]["schedulingGates"] = self.gates.iter().map(|g| json!({"name": g})).collect();
        }
        if let Some((b, r)) = self.selector {
            v["spec"]["nodeSelector"] = json!({BLOCK: b, RACK: r});
        }
        if let Some(p) = self.phase {
            v["status"] = json!({"phase": p});
        }
        serde_json::from_value(v).unwrap()
    }
}

/// The pods after one pass: those let through replaced by their ungated form.
fn after(wl: &Workload, pods: &[P]) -> Vec<Pod> {
    let pods: Vec<Pod> = pods.iter().map(P::pod).collect();
    let through = pods_to_ungate(wl, &pods).unwrap();
    let mut out = pods.clone();
    for u in through {
        let i = pods.iter().position(|p| std::ptr::eq(p, u.pod)).unwrap();
        out[i] = ungated(u.pod, &u.node_selector);
    }
    out
}

/// Kueue's `extractCountsMapFromPods`: (block, rack) -> pods not gated and not terminated there.
fn counts(pods: &[Pod]) -> BTreeMap<(String, String), i32> {
    let mut out = BTreeMap::new();
    for p in pods.iter().filter(|p| !has_gate(p) && !is_terminated(p)) {
        let sel = p.spec.as_ref().unwrap().node_selector.clone().unwrap_or_default();
        let at = |k: &str| sel.get(k).cloned().unwrap_or_default();
        *out.entry((at(BLOCK), at(RACK))).or_default() += 1;
    }
    out
}

fn want(c: &[(&str, &str, i32)]) -> BTreeMap<(String, String), i32> {
    c.iter()
        .map(|(b, r, n)| ((b.to_string(), r.to_string()), *n))
        .collect()
}

/// (name, block, rack) of each pod, in order; gated pods as ("", "").
fn selectors(pods: &[Pod]) -> Vec<(String, String, String)> {
    pods.iter()
        .map(|p| {
            let sel = p.spec.as_ref().unwrap().node_selector.clone().unwrap_or_default();
            let at = |k: &str| sel.get(k).cloned().unwrap_or_default();
            (p.metadata.name.clone().unwrap(), at(BLOCK), at(RACK))
        })
        .collect()
}

fn sel(v: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    v.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

fn gate_names(p: &Pod) -> Vec<String> {
    p.spec
        .as_ref()
        .unwrap()
        .scheduling_gates
        .iter()
        .flatten()
        .map(|g| g.name.clone())
        .collect()
}

#[test]
fn ungate_single_pod() {
    let wl = workload(vec![ps("main", 1, &[("b1", "r1", 1)])], true);
    let got = after(&wl, &[gated("pod")]);
    assert_eq!(counts(&got), want(&[("b1", "r1", 1)]));
    assert!(gate_names(&got[0]).is_empty());
}

#[test]
fn ungate_multiple_pods_in_a_single_domain() {
    let wl = workload(vec![ps("main", 2, &[("b1", "r1", 2)])], true);
    let got = after(&wl, &[gated("pod1"), gated("pod2")]);
    assert_eq!(counts(&got), want(&[("b1", "r1", 2)]));
}

#[test]
fn ungate_multiple_pods_across_multiple_domains() {
    let wl = workload(vec![ps("main", 2, &[("b1", "r1", 1), ("b1", "r2", 1)])], true);
    let got = after(&wl, &[gated("pod1"), gated("pod2")]);
    assert_eq!(counts(&got), want(&[("b1", "r1", 1), ("b1", "r2", 1)]));
}

#[test]
fn pods_remain_gated_without_admission_assignment_or_admitted_condition() {
    // "workload without admission - pod remains gated"
    let mut bare = Workload::build("unit-test", "ns")
        .podset("main", 2, [("cpu", "1")])
        .build();
    bare.status = None;
    assert!(pods_to_ungate(&bare, &[gated("pod1").pod()]).unwrap().is_empty());
    // "workload admitted but without topology assignment - pod remains gated"
    let no_ta = workload(
        vec![Ps {
            name: "main",
            count: 2,
            req: None,
            placed: None,
        }],
        true,
    );
    assert!(pods_to_ungate(&no_ta, &[gated("pod1").pod()]).unwrap().is_empty());
    // "workload with admission (reserved quota), but not admitted - pod remains gated"
    let reserved = workload(vec![ps("main", 2, &[("b1", "r1", 1)])], false);
    assert!(
        pods_to_ungate(&reserved, &[gated("pod1").pod()])
            .unwrap()
            .is_empty()
    );
}

#[test]
fn pods_without_the_workload_annotation_or_podset_label_remain_gated() {
    let wl = workload(vec![ps("main", 1, &[("b1", "r1", 1)])], true);
    let no_annotation = P {
        workload: None,
        ..gated("pod")
    };
    assert!(pods_to_ungate(&wl, &[no_annotation.pod()]).unwrap().is_empty());
    let no_podset = P {
        podset: None,
        ..gated("pod")
    };
    assert!(pods_to_ungate(&wl, &[no_podset.pod()]).unwrap().is_empty());
}

#[test]
fn another_gate_stays() {
    // "... with single pod without topology gate, remains gated by another gate"
    let wl = workload(vec![ps("main", 1, &[("b1", "r1", 1)])], true);
    let other = P {
        gates: vec!["example.com/gate"],
        ..placed("pod", "b1", "r1")
    };
    let got = after(&wl, &[other]);
    assert_eq!(gate_names(&got[0]), vec!["example.com/gate"]);
    assert_eq!(counts(&got), want(&[("b1", "r1", 1)]));
    // "... with topology gate and another gate, ungated, but remains gated by another gate"
    let both = P {
        gates: vec![TOPOLOGY_SCHEDULING_GATE, "example.com/gate"],
        ..gated("pod")
    };
    let got = after(&wl, &[both]);
    assert_eq!(gate_names(&got[0]), vec!["example.com/gate"]);
    assert_eq!(selectors(&got), sel(&[("pod", "b1", "r1")]));
}

#[test]
fn expect_single_pod_one_already_running_dont_ungate_second_pod() {
    let wl = workload(vec![ps("main", 1, &[("b1", "r1", 1)])], true);
    let got = after(
        &wl,
        &[
            placed("pod-already-running", "b1", "r1").phase("Running"),
            gated("pod-gated"),
        ],
    );
    assert_eq!(gate_names(&got[1]), vec![TOPOLOGY_SCHEDULING_GATE]);
    assert_eq!(counts(&got), want(&[("b1", "r1", 1)]));
}

#[test]
fn a_terminated_pod_is_replaced() {
    // "expect single pod; one ungated pod failed - ungate second pod" and "... succeeded ..."
    let wl = workload(vec![ps("main", 1, &[("b1", "r1", 1)])], true);
    for phase in ["Failed", "Succeeded"] {
        let got = after(
            &wl,
            &[placed("pod-done", "b1", "r1").phase(phase), gated("pod-gated")],
        );
        assert_eq!(selectors(&got[1..]), sel(&[("pod-gated", "b1", "r1")]), "{phase}");
    }
}

#[test]
fn two_pods_one_already_ungated_second_to_ungate() {
    let wl = workload(vec![ps("main", 2, &[("b1", "r1", 2)])], true);
    let got = after(&wl, &[placed("pod1", "b1", "r1"), gated("pod2")]);
    assert_eq!(counts(&got), want(&[("b1", "r1", 2)]));
}

#[test]
fn ranks_for_batch_job_some_pods_already_scheduled() {
    let mut p = ps("main", 5, &[("b1", "r1", 2), ("b1", "r2", 1), ("b2", "r1", 2)]);
    p.req = index_label(JOB_COMPLETION_INDEX);
    let wl = workload(vec![p], true);
    let got = after(
        &wl,
        &[
            placed("p0", "b1", "r1").label(JOB_COMPLETION_INDEX, "0"),
            gated("p1").label(JOB_COMPLETION_INDEX, "1"),
            gated("p2").label(JOB_COMPLETION_INDEX, "2"),
            placed("p3", "b2", "r1").label(JOB_COMPLETION_INDEX, "3"),
            gated("p4").label(JOB_COMPLETION_INDEX, "4"),
        ],
    );
    assert_eq!(
        selectors(&got),
        sel(&[
            ("p0", "b1", "r1"),
            ("p1", "b1", "r1"),
            ("p2", "b1", "r2"),
            ("p3", "b2", "r1"),
            ("p4", "b2", "r1"),
        ])
    );
}

#[test]
fn ranks_for_batch_job_for_all_pods() {
    // Listed out of index order: the rank, not the list, decides.
    let mut p = ps("main", 5, &[("b1", "r1", 2), ("b1", "r2", 1), ("b2", "r1", 2)]);
    p.req = index_label(JOB_COMPLETION_INDEX);
    let wl = workload(vec![p], true);
    let got = after(
        &wl,
        &[
            gated("p4").label(JOB_COMPLETION_INDEX, "4"),
            gated("p0").label(JOB_COMPLETION_INDEX, "0"),
            gated("p2").label(JOB_COMPLETION_INDEX, "2"),
            gated("p1").label(JOB_COMPLETION_INDEX, "1"),
            gated("p3").label(JOB_COMPLETION_INDEX, "3"),
        ],
    );
    assert_eq!(
        selectors(&got),
        sel(&[
            ("p4", "b2", "r1"),
            ("p0", "b1", "r1"),
            ("p2", "b1", "r2"),
            ("p1", "b1", "r1"),
            ("p3", "b2", "r1"),
        ])
    );
}

#[test]
fn ranks_for_leader_worker_set_for_all_pods() {
    // A podset group: the leader (1 pod) ranks 0, the workers (index 1..=3 within the group) after it.
    let group = |mut p: Ps<'static>| {
        p.req = Some(PodSetTopologyRequest {
            pod_index_label: Some(LWS_WORKER_INDEX.into()),
            pod_set_group_name: Some("lws-group".into()),
            ..Default::default()
        });
        p
    };
    let wl = workload(
        vec![
            group(ps("workers", 3, &[("b1", "r2", 1), ("b2", "r1", 2)])),
            group(ps("leader", 1, &[("b1", "r1", 1)])),
        ],
        true,
    );
    let got = after(
        &wl,
        &[
            gated("p0").podset("leader").label(LWS_WORKER_INDEX, "0"),
            gated("p1").podset("workers").label(LWS_WORKER_INDEX, "1"),
            gated("p2").podset("workers").label(LWS_WORKER_INDEX, "2"),
            gated("p3").podset("workers").label(LWS_WORKER_INDEX, "3"),
        ],
    );
    assert_eq!(
        selectors(&got),
        sel(&[
            ("p0", "b1", "r1"),
            ("p1", "b1", "r2"),
            ("p2", "b2", "r1"),
            ("p3", "b2", "r1"),
        ])
    );
}

#[test]
fn ranks_going_below_zero_fall_back_to_greedy() {
    // "ranks: gracefully handle situation with ranks going below 0": the workers' indexes restart at 0.
    let group = |mut p: Ps<'static>| {
        p.req = Some(PodSetTopologyRequest {
            pod_index_label: Some(LWS_WORKER_INDEX.into()),
            pod_set_group_name: Some("lws-group".into()),
            ..Default::default()
        });
        p
    };
    let wl = workload(
        vec![
            group(ps(
                "workers",
                4,
                &[("b1", "r1", 1), ("b1", "r2", 1), ("b2", "r1", 2)],
            )),
            group(ps("leader", 1, &[("b1", "r1", 1)])),
        ],
        true,
    );
    let got = after(
        &wl,
        &[
            gated("p0").podset("leader").label(LWS_WORKER_INDEX, "0"),
            gated("p1").podset("workers").label(LWS_WORKER_INDEX, "0"),
            gated("p2").podset("workers").label(LWS_WORKER_INDEX, "1"),
            gated("p3").podset("workers").label(LWS_WORKER_INDEX, "2"),
            gated("p4").podset("workers").label(LWS_WORKER_INDEX, "3"),
        ],
    );
    assert_eq!(
        selectors(&got),
        sel(&[
            ("p0", "b1", "r1"),
            ("p1", "b1", "r1"),
            ("p2", "b1", "r2"),
            ("p3", "b2", "r1"),
            ("p4", "b2", "r1"),
        ])
    );
}

#[test]
fn repeated_ranks_fall_back_to_greedy() {
    let mut p = ps("main", 4, &[("b1", "r1", 2), ("b1", "r2", 1), ("b2", "r1", 1)]);
    p.req = index_label(JOB_COMPLETION_INDEX);
    let wl = workload(vec![p], true);
    let got = after(
        &wl,
        &[
            gated("p0").label(JOB_COMPLETION_INDEX, "0"),
            gated("p1").label(JOB_COMPLETION_INDEX, "1"),
            gated("p2").label(JOB_COMPLETION_INDEX, "0"),
            gated("p3").label(JOB_COMPLETION_INDEX, "1"),
        ],
    );
    assert_eq!(
        counts(&got),
        want(&[("b1", "r1", 2), ("b1", "r2", 1), ("b2", "r1", 1)])
    );
}

#[test]
fn ranks_when_parallelism_is_below_completions() {
    // parallelism=1, completions=2: index 0 failed, index 1 runs; index 1 is out of the count's range.
    let mut p = ps("main", 1, &[("b1", "r1", 1)]);
    p.req = index_label(JOB_COMPLETION_INDEX);
    let wl = workload(vec![p], true);
    let got = after(
        &wl,
        &[
            placed("p0", "b1", "r1")
                .label(JOB_COMPLETION_INDEX, "0")
                .phase("Failed"),
            gated("p1").label(JOB_COMPLETION_INDEX, "1"),
        ],
    );
    assert_eq!(selectors(&got), sel(&[("p0", "b1", "r1"), ("p1", "b1", "r1")]));
}

#[test]
fn ranks_for_job_set_with_sub_groups() {
    // "ranks: support rank-based ordering for JobSet - for all Pods": 2 jobs of 2 pods each.
    let mut p = ps(
        "main",
        4,
        &[("b1", "r1", 1), ("b1", "r2", 1), ("b2", "r1", 1), ("b2", "r2", 1)],
    );
    p.req = Some(PodSetTopologyRequest {
        pod_index_label: Some(JOB_COMPLETION_INDEX.into()),
        sub_group_index_label: Some(JOBSET_JOB_INDEX.into()),
        sub_group_count: Some(2),
        ..Default::default()
    });
    let wl = workload(vec![p], true);
    let pod = |name, job, index| {
        gated(name)
            .label(JOBSET_JOB_INDEX, job)
            .label(JOB_COMPLETION_INDEX, index)
    };
    let got = after(
        &wl,
        &[
            pod("p3", "1", "1"),
            pod("p0", "0", "0"),
            pod("p2", "1", "0"),
            pod("p1", "0", "1"),
        ],
    );
    assert_eq!(
        selectors(&got),
        sel(&[
            ("p3", "b2", "r2"),
            ("p0", "b1", "r1"),
            ("p2", "b2", "r1"),
            ("p1", "b1", "r2"),
        ])
    );
}

#[test]
fn sub_group_label_without_a_count_falls_back_to_greedy() {
    // "ungate single pod with sub group index label but no sub group count" (and zero count).
    for sub_group_count in [None, Some(0)] {
        let mut p = ps("main", 1, &[("b1", "r1", 1)]);
        p.req = Some(PodSetTopologyRequest {
            pod_index_label: Some(JOB_COMPLETION_INDEX.into()),
            sub_group_index_label: Some(JOBSET_JOB_INDEX.into()),
            sub_group_count,
            ..Default::default()
        });
        let wl = workload(vec![p], true);
        let got = after(
            &wl,
            &[gated("pod")
                .label(JOB_COMPLETION_INDEX, "0")
                .label(JOBSET_JOB_INDEX, "0")],
        );
        assert_eq!(counts(&got), want(&[("b1", "r1", 1)]), "{sub_group_count:?}");
    }
}

#[test]
fn a_running_pod_off_its_rank_domain_means_greedy() {
    // "ungate replacement pod for unhealthy node": p1 (rank 1) runs where rank 0 belongs, so the
    // replacement p0 takes the domain left.
    let mut p = ps("main", 2, &[("b1", "r1", 1), ("b1", "r2", 1)]);
    p.req = index_label(JOB_COMPLETION_INDEX);
    let wl = workload(vec![p], true);
    let got = after(
        &wl,
        &[
            placed("p1-running", "b1", "r1").label(JOB_COMPLETION_INDEX, "1"),
            gated("p0-replacement").label(JOB_COMPLETION_INDEX, "0"),
        ],
    );
    assert_eq!(
        selectors(&got),
        sel(&[("p1-running", "b1", "r1"), ("p0-replacement", "b1", "r2")])
    );
}

#[test]
fn an_assignment_shorter_than_the_count_falls_back_to_greedy() {
    // "ranks: TopologyAssignment shorter than the PodSet count falls back to greedy assignment"
    let mut p = ps("main", 3, &[("b1", "r1", 2)]);
    p.req = index_label(JOB_COMPLETION_INDEX);
    let wl = workload(vec![p], true);
    let got = after(
        &wl,
        &[
            gated("p0").label(JOB_COMPLETION_INDEX, "0"),
            gated("p1").label(JOB_COMPLETION_INDEX, "1"),
            gated("p2").label(JOB_COMPLETION_INDEX, "2"),
        ],
    );
    assert_eq!(counts(&got), want(&[("b1", "r1", 2)]));
}

#[test]
fn offsets_shift_ranks_and_a_bad_one_is_an_error() {
    // "ranks: support rank-based ordering for kubeflow with valid offset annotation" and "... invalid ...".
    let mut p = ps("main", 2, &[("b1", "r1", 1), ("b2", "r1", 1)]);
    p.req = index_label(JOB_COMPLETION_INDEX);
    let wl = workload(vec![p], true);
    let with_offset = |name, index, offset| {
        let mut pod = gated(name).label(JOB_COMPLETION_INDEX, index).pod();
        pod.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(POD_INDEX_OFFSET.to_string(), String::from(offset));
        pod
    };
    let pods = vec![with_offset("p1", "2", "1"), with_offset("p0", "1", "1")];
    let mut got: Vec<(String, String)> = pods_to_ungate(&wl, &pods)
        .unwrap()
        .into_iter()
        .map(|u| {
            (
                u.pod.metadata.name.clone().unwrap(),
                u.node_selector[BLOCK].clone(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(got, vec![("p0".into(), "b1".into()), ("p1".into(), "b2".into())]);
    let bad = vec![with_offset("p0", "0", "x")];
    assert_eq!(
        pods_to_ungate(&wl, &bad).unwrap_err(),
        UngateError::Offset {
            pod: "p0".into(),
            value: "x".into()
        }
    );
}

#[test]
fn pods_of_an_unhealthy_node_stay_gated() {
    // "does not ungate a pod onto a node marked unhealthy": hostname is the lowest level.
    let mut wl = workload(vec![ps("main", 1, &[("b1", "r1", 1)])], true);
    let psa = &mut wl
        .status
        .as_mut()
        .unwrap()
        .admission
        .as_mut()
        .unwrap()
        .pod_set_assignments[0];
    psa.topology_assignment = Some(encode_assignment(
        &[HOSTNAME_LABEL.to_string()],
        &[DomainAssignment {
            values: vec!["x1".into()],
            count: 1,
        }],
    ));
    let pods = vec![gated("pod").pod()];
    assert_eq!(pods_to_ungate(&wl, &pods).unwrap().len(), 1);
    wl.status.as_mut().unwrap().unhealthy_nodes =
        vec![crate::api::kueue::UnhealthyNode { name: "x1".into() }];
    assert!(pods_to_ungate(&wl, &pods).unwrap().is_empty());
}
