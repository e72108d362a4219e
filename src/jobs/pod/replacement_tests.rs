//! The `WaitingForReplacementPods` condition against Kueue's expectations
//! (`pkg/controller/jobs/pod/pod_controller_test.go` TestReconciler, and the pod-group cases of
//! `test/integration/singlecluster/controller/jobs/pod/pod_controller_test.go`).

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::group::PodGroup;
use super::replacement::{absent_pods, with_replacement_condition};
use super::tests::{member, pod, set_phase, ungated, wl_for};
use crate::api::kueue::Workload;
use crate::api::kueue::constants::condition;
use crate::api::pod as p;
use crate::jobframework::GenericJob;

const NOW: jiff::Timestamp = jiff::Timestamp::UNIX_EPOCH;

fn running(names: &[&str]) -> Vec<Pod> {
    names.iter().map(|n| ungated(member(n, "1"))).collect()
}

/// The group's Workload (its podsets from these pods), reserved, maybe evicted.
fn workload_of(pods: &[Pod], evicted: bool) -> Workload {
    wl_for(
        PodGroup::new("g", pods.to_vec()).unwrap().pod_sets().unwrap(),
        true,
        evicted,
    )
}

fn replacement(status: &crate::api::kueue::WorkloadStatus) -> (String, String, String) {
    let c = status
        .condition(condition::WAITING_FOR_REPLACEMENT_PODS)
        .expect("the condition");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

fn with_status(mut wl: Workload, status: crate::api::kueue::WorkloadStatus) -> Workload {
    wl.status = Some(status);
    wl
}

// Kueue: TestReconciler "workload is not deleted if the pod in group has been deleted after admission"
// and "replacement pod should be started for pod group of size 1" (a Failed pod leaves its role short:
// `True`, PodsFailed, "Some Failed pods need replacement"); a complete group writes nothing.
#[test]
fn a_failed_pod_sets_the_condition_and_a_complete_group_writes_none() {
    let pods = running(&["a", "b", "c"]);
    let wl = workload_of(&pods, false);
    let group = PodGroup::new("g", pods.clone()).unwrap();
    assert_eq!(absent_pods(&group, &wl, &[]), 0);
    assert_eq!(
        with_replacement_condition(&group, &wl, &[], NOW),
        None,
        "never needed: nothing written"
    );

    let mut one_failed = pods;
    set_phase(&mut one_failed[0], "Failed", None);
    let group = PodGroup::new("g", one_failed).unwrap();
    assert_eq!(absent_pods(&group, &wl, &[]), 1);
    let status = with_replacement_condition(&group, &wl, &[], NOW).unwrap();
    assert_eq!(
        replacement(&status),
        (
            "True".into(),
            "PodsFailed".into(),
            "Some Failed pods need replacement".into()
        )
    );
    assert_eq!(
        with_replacement_condition(&group, &with_status(wl, status), &[], NOW),
        None,
        "already says so"
    );
}

// Kueue: integration "Using pod group" / "Should set WaitingForReplacementPod workload condition to false
// after replacement": an evicted group whose pods are deleted waits with the eviction's reason and
// message (Preempted here), keeps them once re-admitted, and reads `False`, PodsReady, "No pods need
// replacement" once a replacement exists. And "Should keep the running pod group with the queue name if
// workload is evicted": a Succeeded pod still counts, the Failed one is missing.
#[test]
fn an_evicted_group_waits_with_the_eviction_reason_until_replaced() {
    let pods = running(&["a", "b"]);
    let evicted = workload_of(&pods, true);
    let group = PodGroup::new("g", pods.clone()).unwrap();
    let stopping: Vec<String> = vec!["a".into(), "b".into()];
    assert_eq!(
        absent_pods(&group, &evicted, &stopping),
        2,
        "the pods this pass deletes are missing"
    );
    let status = with_replacement_condition(&group, &evicted, &stopping, NOW).unwrap();
    let evicted_cond = status.condition(condition::EVICTED).unwrap().clone();
    assert_eq!(
        replacement(&status),
        (
            "True".into(),
            evicted_cond.reason.clone(),
            evicted_cond.message.clone()
        )
    );
    assert_eq!(evicted_cond.reason, "Preempted");

    // Bound pods seen with a deletion timestamp are missing too, unless they succeeded.
    let mut deleting = pods.clone();
    for x in &mut deleting {
        x.spec.as_mut().unwrap().node_name = Some("node1".into());
        x.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(NOW));
    }
    set_phase(&mut deleting[0], "Succeeded", None);
    assert_eq!(
        absent_pods(&PodGroup::new("g", deleting).unwrap(), &evicted, &[]),
        1
    );

    // Re-admitted (no longer evicted) while still short: the condition keeps the eviction's words.
    let mut again = status.clone();
    crate::api::conditions::set(
        &mut again.conditions,
        crate::api::conditions::new(
            condition::EVICTED,
            false,
            "QuotaReserved",
            "Previously: m",
            None,
            NOW,
        ),
    );
    let readmitted = with_status(workload_of(&pods, false), again);
    let only_b = PodGroup::new("g", vec![pods[1].clone()]).unwrap();
    assert_eq!(with_replacement_condition(&only_b, &readmitted, &[], NOW), None);

    let replaced = PodGroup::new("g", vec![pods[1].clone(), member("a2", "1")]).unwrap();
    let status = with_replacement_condition(&replaced, &readmitted, &[], NOW).unwrap();
    assert_eq!(
        replacement(&status),
        (
            "False".into(),
            "PodsReady".into(),
            "No pods need replacement".into()
        )
    );
}

// Kueue: `constructGroupPodSetsFast` and `countAbsentPods` with `kueue.x-k8s.io/pod-group-fast-admission: "true"`: a role is missing
// only when it has no pod at all.
#[test]
fn with_fast_admission_a_role_waits_only_when_it_has_no_pod() {
    let fast = |name: &str| {
        ungated(pod(
            name,
            "1",
            json!({p::GROUP_NAME_LABEL: "g"}),
            json!({p::GROUP_TOTAL_COUNT_ANNOTATION: "3", p::GROUP_FAST_ADMISSION_ANNOTATION: "true"}),
        ))
    };
    let pods = vec![fast("a"), fast("b"), fast("c")];
    let wl = workload_of(&pods, false);
    let one_left = PodGroup::new("g", vec![pods[0].clone()]).unwrap();
    // Kueue: integration "Should ungate pods when admitted with fast admission": the first pod makes
    // the group's Workload, one role counted at the group's total.
    assert!(one_left.complete());
    let ps = one_left.pod_sets().unwrap();
    assert_eq!((ps.len(), ps[0].count()), (1, 3));
    assert_eq!(wl.spec.pod_sets.len(), 1);
    assert_eq!(wl.spec.pod_sets[0].count(), 3);
    assert!(one_left.fast_admission());
    assert_eq!(absent_pods(&one_left, &wl, &[]), 0);
    let mut failed = pods[0].clone();
    set_phase(&mut failed, "Failed", None);
    assert_eq!(
        absent_pods(&PodGroup::new("g", vec![failed]).unwrap(), &wl, &[]),
        1
    );
}

// Kueue: pod_controller_test.go TestReconciler "workload is not finished if the pod in the group is
// running" (one Succeeded pod: the Workload gets `reclaimablePods` {role: 1}); and integration "Should
// ungate pod after Succeeded phase when serving workload is enabled" (a serving group reports no
// reclaimable pods and is not finished by its pods succeeding).
#[test]
fn a_groups_succeeded_pods_are_reclaimable_unless_it_serves() {
    use crate::api::kueue::ReclaimablePod;
    use crate::jobframework::{JobWithReclaimablePods, Step};
    let mut pods = running(&["a", "b", "c"]);
    set_phase(&mut pods[0], "Succeeded", None);
    let mut wl = workload_of(&pods, false);
    wl.metadata.name = Some("g".into());
    let role = p::role_hash(&pods[0]);
    let want = vec![ReclaimablePod { name: role, count: 1 }];
    let mut group = PodGroup::new("g", pods.clone()).unwrap();
    assert_eq!(
        super::group::decide(&mut group, Some(&wl)).unwrap().step,
        Step::UpdateReclaimablePods {
            name: "g".into(),
            pods: want.clone()
        }
    );
    wl.status.as_mut().unwrap().reclaimable_pods = want;
    let mut group = PodGroup::new("g", pods).unwrap();
    // Written: the pass goes on (a group with an ended pod reads suspended, so Start, which ungates
    // nothing here).
    assert_eq!(
        super::group::decide(&mut group, Some(&wl)).unwrap().step,
        Step::Start("g".into())
    );

    let serving = |name: &str| {
        let mut x = ungated(pod(
            name,
            "1",
            json!({p::GROUP_NAME_LABEL: "s"}),
            json!({p::GROUP_TOTAL_COUNT_ANNOTATION: "2", p::GROUP_SERVING_ANNOTATION: "true"}),
        ));
        set_phase(&mut x, "Succeeded", None);
        x
    };
    let group = PodGroup::new("s", vec![serving("a"), serving("b")]).unwrap();
    assert!(group.serving());
    assert!(group.reclaimable_pods().is_empty());
    assert_eq!(group.finished(), None, "a serving group runs until deleted");
}

// Kueue: pod_controller_test.go integration "Should keep the running pod group with the queue name if
// workload is evicted" ("checking that pod2 fully removed" only after its replacement exists), and
// TestReconciler's `replacedInactivePods`: while the group's Workload is open, its stopped pods keep
// the finalizer (they own the Workload) until replacements fill their role.
#[test]
fn stopped_pods_keep_the_finalizer_until_replaced() {
    let mut pods = running(&["a", "b"]);
    let wl = {
        let mut w = workload_of(&pods, true);
        w.metadata.name = Some("g".into());
        w
    };
    for x in &mut pods {
        x.spec.as_mut().unwrap().node_name = Some("node1".into());
        x.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(NOW));
        set_phase(x, "Failed", None);
    }
    let mut group = PodGroup::new("g", pods.clone()).unwrap();
    assert!(
        super::group::decide(&mut group, Some(&wl))
            .unwrap()
            .finalize
            .is_empty(),
        "kept while not replaced"
    );
    let mut with_one = pods.clone();
    with_one.push(member("a2", "1"));
    let mut group = PodGroup::new("g", with_one).unwrap();
    assert_eq!(
        super::group::decide(&mut group, Some(&wl))
            .unwrap()
            .finalize
            .len(),
        1,
        "one replaced"
    );
    let mut with_two = pods;
    with_two.extend([member("a2", "1"), member("b2", "1")]);
    let mut group = PodGroup::new("g", with_two).unwrap();
    assert_eq!(
        super::group::decide(&mut group, Some(&wl))
            .unwrap()
            .finalize
            .len(),
        2
    );
}
