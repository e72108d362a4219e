//! The Pod adapter and the pod-group decision against Kueue's expectations
//! (`pkg/controller/jobs/pod/pod_controller_test.go`, the cases observable without a cluster), through
//! the generic reconciler's pure decision.

use super::group::{Decision, PodGroup, decide};
use super::*;
use crate::admission as conditions;
use crate::api::kueue::constants::label;
use crate::api::kueue::{Admission, PodSetAssignment};
use crate::jobframework::names::NameLength;
use crate::jobframework::workload::workload_name_for_job;
use crate::jobframework::{Step, plan};
use serde_json::{Value, json};

/// A queue-labelled Pod as the webhook leaves it (gated, managed, with the finalizer).
pub(super) fn pod(name: &str, cpu: &str, extra_labels: Value, annotations: Value) -> Pod {
    let mut v = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "labels": {label::QUEUE_NAME: "lq"}, "annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}});
    if let Some(m) = extra_labels.as_object() {
        for (k, x) in m {
            v["metadata"]["labels"][k] = x.clone();
        }
    }
    p::default_pod(
        &mut v,
        crate::api::kueue::config::Frameworks {
            pod: true,
            ..Default::default()
        },
    );
    serde_json::from_value(v).unwrap()
}

fn single() -> PodJob {
    PodJob::new(pod("p", "1", json!({}), json!({})))
}

pub(super) fn set_phase(x: &mut Pod, phase: &str, message: Option<&str>) {
    x.status = Some(serde_json::from_value(json!({"phase": phase, "message": message})).unwrap());
}

pub(super) fn ungated(mut x: Pod) -> Pod {
    x.spec.as_mut().unwrap().scheduling_gates = None;
    set_phase(&mut x, "Running", None);
    x
}

fn info(name: &str) -> PodSetInfo {
    PodSetInfo {
        name: name.into(),
        count: 1,
        node_selector: [("instance".to_string(), "on-demand".to_string())].into(),
        tolerations: vec![
            serde_json::from_value(json!({"key": "spot", "operator": "Exists", "effect": "NoSchedule"}))
                .unwrap(),
        ],
        ..Default::default()
    }
}

pub(super) fn wl_for(pod_sets: Vec<PodSet>, reserved: bool, evicted: bool) -> Workload {
    let mut w = Workload::build("w", "default").queue("lq").build();
    w.spec.pod_sets = pod_sets;
    let now = jiff::Timestamp::UNIX_EPOCH;
    if reserved {
        let assignments = w
            .spec
            .pod_sets
            .iter()
            .map(|x| PodSetAssignment {
                name: x.name().into(),
                count: x.count,
                ..Default::default()
            })
            .collect();
        w.status = Some(conditions::admitted(
            &w,
            Admission {
                cluster_queue: "cq".into(),
                pod_set_assignments: assignments,
            },
            now,
        ));
    }
    if evicted {
        let cause = conditions::EvictionCause {
            by: conditions::EvictedBy::Preempted(crate::queue::PreemptedReason::InClusterQueue),
            message: "m".into(),
        };
        w.status = conditions::evicted(&w, &cause, now);
    }
    w
}

fn finished_wl(mut w: Workload) -> Workload {
    w.status
        .get_or_insert_with(Default::default)
        .conditions
        .push(crate::api::conditions::new(
            "Finished",
            true,
            "Succeeded",
            "",
            None,
            jiff::Timestamp::UNIX_EPOCH,
        ));
    w
}

// Kueue: pod_controller_test.go TestReconciler "the workload is created when queue name is set", and
// GetWorkloadNameForPod: `pod-<name>-<hash>`, one podset `main` of one pod with the pod's spec.
#[test]
fn a_single_pod_is_one_workload_of_one_main_pod() {
    let j = single();
    assert!(j.is_suspended(), "gated");
    let ps = j.pod_sets().unwrap();
    assert_eq!((ps.len(), ps[0].name(), ps[0].count()), (1, "main", 1));
    assert_eq!(ps[0].template.spec, j.pod.spec);
    assert!(
        workload_name_for_job(&j, NameLength::Long)
            .unwrap()
            .starts_with("pod-p-")
    );
    assert_eq!(plan(&j, &[]).unwrap(), Step::CreateWorkload);
}

// Kueue: pod_controller_test.go TestReconciler "scheduling gate is removed and node selector is added if
// workload is admitted" (Run): the gate goes, the flavor's info comes in.
#[test]
fn admission_ungates_the_pod_with_the_flavors_node_selector_and_tolerations() {
    let mut j = single();
    let wl = wl_for(j.pod_sets().unwrap(), true, false);
    assert_eq!(plan(&j, &[&wl]).unwrap(), Step::Start("w".into()));
    j.run_with_podsets_info(&[info("main")]).unwrap();
    let spec = j.pod.spec.clone().unwrap();
    assert!(spec.scheduling_gates.is_none(), "the admission gate is removed");
    assert_eq!(spec.node_selector.unwrap()["instance"], "on-demand");
    assert_eq!(spec.tolerations.unwrap().len(), 1);
    assert!(!j.is_suspended());
    assert!(matches!(
        j.run_with_podsets_info(&[info("a"), info("b")]),
        Err(JobFrameworkError::PodSetsInfoLength { want: 1, got: 2 })
    ));

    // Another gate the user set stays.
    let mut other = single();
    other
        .pod
        .spec
        .as_mut()
        .unwrap()
        .scheduling_gates
        .as_mut()
        .unwrap()
        .push(serde_json::from_value(json!({"name": "user/gate"})).unwrap());
    other.run_with_podsets_info(&[info("main")]).unwrap();
    assert_eq!(other.pod.spec.unwrap().scheduling_gates.unwrap().len(), 1);
}

// Kueue: pod_controller_test.go TestReconciler ("pod is stopped when workload is evicted", "pod without
// scheduling gate is terminated if workload is not admitted", "pod is finalized when it's succeeded",
// "the pod reconciliation is skipped when 'kueue.x-k8s.io/managed' label is not set").
#[test]
fn the_reconciler_runs_pods_in_kueues_order() {
    let gated = single();
    let running = PodJob::new(ungated(gated.pod.clone()));
    let mut succeeded = PodJob::new(ungated(gated.pod.clone()));
    set_phase(&mut succeeded.pod, "Succeeded", None);
    let mut failed = PodJob::new(ungated(gated.pod.clone()));
    set_phase(&mut failed.pod, "Failed", Some("OOMKilled"));
    let ps = gated.pod_sets().unwrap();
    let cases: Vec<(&str, &PodJob, Vec<Workload>, Step)> = vec![
        ("gated, no workload", &gated, vec![], Step::CreateWorkload),
        (
            "gated, pending",
            &gated,
            vec![wl_for(ps.clone(), false, false)],
            Step::Nothing,
        ),
        (
            "gated, admitted",
            &gated,
            vec![wl_for(ps.clone(), true, false)],
            Step::Start("w".into()),
        ),
        (
            "gated, evicted: nothing runs, quota goes",
            &gated,
            vec![wl_for(ps.clone(), true, true)],
            Step::Stop("w".into()),
        ),
        (
            "running, admitted",
            &running,
            vec![wl_for(ps.clone(), true, false)],
            Step::Nothing,
        ),
        (
            "running, evicted",
            &running,
            vec![wl_for(ps.clone(), true, true)],
            Step::Stop("w".into()),
        ),
        ("running, no workload", &running, vec![], Step::SuspendThenCreate),
        (
            "running, not reserved",
            &running,
            vec![wl_for(ps.clone(), false, false)],
            Step::Suspend,
        ),
        (
            "succeeded",
            &succeeded,
            vec![wl_for(ps.clone(), true, false)],
            Step::Finish {
                name: "w".into(),
                finished: Finished {
                    success: true,
                    message: String::new(),
                },
            },
        ),
        (
            "failed",
            &failed,
            vec![wl_for(ps.clone(), true, false)],
            Step::Finish {
                name: "w".into(),
                finished: Finished {
                    success: false,
                    message: "OOMKilled".into(),
                },
            },
        ),
        (
            "succeeded, finished",
            &succeeded,
            vec![finished_wl(wl_for(ps.clone(), true, false))],
            Step::Nothing,
        ),
    ];
    for (name, j, wls, want) in cases {
        let refs: Vec<&Workload> = wls.iter().collect();
        assert_eq!(plan(j, &refs).unwrap(), want, "{name}");
    }
    let mut unmanaged = single();
    unmanaged
        .pod
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .remove(p::MANAGED_LABEL);
    assert_eq!(
        plan(&unmanaged, &[]).unwrap(),
        Step::Ignore,
        "Kueue's Skip: not marked by the webhook"
    );
    let member = PodJob::new(pod(
        "m",
        "1",
        json!({p::GROUP_NAME_LABEL: "g"}),
        json!({p::GROUP_TOTAL_COUNT_ANNOTATION: "2"}),
    ));
    assert_eq!(
        plan(&member, &[]).unwrap(),
        Step::Ignore,
        "a group's pod is the group's"
    );
}

// Kueue: pod_controller.go Stop: pods already being deleted are left; gated or ended ones hold nothing
// and are left unless the Workload is gone.
#[test]
fn a_stop_deletes_only_pods_that_hold_something() {
    let gated = single().pod;
    let running = ungated(gated.clone());
    let mut ended = running.clone();
    set_phase(&mut ended, "Succeeded", None);
    let mut deleting = running.clone();
    deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::UNIX_EPOCH,
    ));
    let pods = vec![gated, running, ended, deleting];
    assert_eq!(to_stop(&pods, StopReason::WorkloadEvicted).len(), 1);
    assert_eq!(to_stop(&pods, StopReason::WorkloadDeleted).len(), 3);
}

// Kueue: pod_controller_test.go TestReconciler "pod is finalized when it's succeeded", and the
// integration test "Should remove finalizers from Pods that are actively deleted after being admitted".
#[test]
fn the_finalizer_goes_once_the_pod_is_done_with() {
    let gated = single().pod;
    let open = wl_for(single().pod_sets().unwrap(), true, false);
    assert!(!finalizer_removable(&gated, std::slice::from_ref(&open)));
    let mut ended = ungated(gated.clone());
    set_phase(&mut ended, "Succeeded", None);
    assert!(
        !finalizer_removable(&ended, std::slice::from_ref(&open)),
        "its Workload is not finished yet"
    );
    assert!(finalizer_removable(&ended, &[finished_wl(open.clone())]));
    assert!(finalizer_removable(&ended, &[]), "no Workload left to finish");
    let mut deleting = gated.clone();
    deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::UNIX_EPOCH,
    ));
    assert!(finalizer_removable(&deleting, &[open]));
    deleting.metadata.finalizers = None;
    assert!(!finalizer_removable(&deleting, &[]), "nothing to remove");
}

pub(super) fn member(name: &str, cpu: &str) -> Pod {
    pod(
        name,
        cpu,
        json!({p::GROUP_NAME_LABEL: "g"}),
        json!({p::GROUP_TOTAL_COUNT_ANNOTATION: "3"}),
    )
}

// Kueue: pod_controller_test.go TestReconciler "if there's not enough non-failed pods in the group,
// workload should not be created", "workload is composed and created for the pod group"
// (constructGroupPodSets: one podset per role hash, counted, sorted; the Workload named after the group
// and owned by every pod), "workload for pod group with different queue names shouldn't be created".
#[test]
fn a_group_waits_for_its_total_count_then_gets_one_workload_of_its_roles() {
    let two = PodGroup::new("g", vec![member("a", "1"), member("b", "1")]).unwrap();
    assert_eq!(two.total, 3);
    assert_eq!(
        decide(&mut two.clone(), None).unwrap().step,
        Step::Nothing,
        "waits for the third pod"
    );
    let three = PodGroup::new("g", vec![member("a", "1"), member("b", "1"), member("c", "2")]).unwrap();
    assert_eq!(
        decide(&mut three.clone(), None).unwrap().step,
        Step::CreateWorkload
    );
    let ps = three.pod_sets().unwrap();
    let mut want = vec![
        (p::role_hash(&member("a", "1")), 2),
        (p::role_hash(&member("c", "2")), 1),
    ];
    want.sort();
    assert_eq!(
        ps.iter()
            .map(|x| (x.name().to_string(), x.count()))
            .collect::<Vec<_>>(),
        want
    );
    let prio = crate::jobframework::priority::Priority {
        class_ref: None,
        value: 0,
    };
    let wl = three.workload(prio).unwrap();
    assert_eq!(wl.metadata.name.as_deref(), Some("g"));
    assert_eq!(wl.metadata.owner_references.as_ref().unwrap().len(), 3);
    assert_eq!(
        wl.metadata.annotations.as_ref().unwrap()[group::IS_GROUP_WORKLOAD],
        "true"
    );
    assert!(
        wl.metadata
            .labels
            .as_ref()
            .is_none_or(|l| !l.contains_key(label::JOB_UID))
    );
    assert_eq!(wl.spec.queue_name.as_deref(), Some("lq"));

    let mut other_queue = member("d", "1");
    other_queue
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(label::QUEUE_NAME.into(), "other".into());
    let err = PodGroup::new("g", vec![member("a", "1"), other_queue]).unwrap_err();
    assert!(err.contains("different queue names"), "{err}");
}

// Kueue: pod_controller_test.go TestReconciler "scheduling gate is removed for all pods in the group if
// workload is admitted", "workload is not finished if the pod in the group is running", "workload is
// finished if all pods in the group has finished" ("Pods succeeded: n/n."), and Stop for a group.
#[test]
fn a_group_is_ungated_together_finishes_together_and_stops_together() {
    let pods = vec![member("a", "1"), member("b", "1"), member("c", "2")];
    let group = PodGroup::new("g", pods.clone()).unwrap();
    let ps = group.pod_sets().unwrap();
    let admitted = wl_for(ps.clone(), true, false);
    assert_eq!(
        decide(&mut group.clone(), Some(&admitted)).unwrap().step,
        Step::Start("w".into())
    );
    let infos: Vec<PodSetInfo> = ps.iter().map(|x| info(x.name())).collect();
    let changes = group.ungated(&infos).unwrap();
    assert_eq!(changes.len(), 3);
    assert!(changes.iter().all(|(_, after)| !p::is_gated(after)
        && after.spec.as_ref().unwrap().node_selector.as_ref().unwrap()["instance"] == "on-demand"));
    assert!(
        matches!(
            group.ungated(&infos[..1]),
            Err(JobFrameworkError::UnknownPodSet(_))
        ),
        "a role the admission does not name"
    );

    let running: Vec<Pod> = pods.iter().cloned().map(ungated).collect();
    let group = PodGroup::new("g", running.clone()).unwrap();
    assert_eq!(
        decide(&mut group.clone(), Some(&admitted)).unwrap().step,
        Step::Nothing
    );
    assert_eq!(
        decide(&mut group.clone(), Some(&wl_for(ps.clone(), true, true)))
            .unwrap()
            .step,
        Step::Stop("w".into())
    );

    let mut done = running.clone();
    for x in &mut done {
        set_phase(x, "Succeeded", None);
    }
    let group = PodGroup::new("g", done.clone()).unwrap();
    let Decision { step, finalize, .. } = decide(&mut group.clone(), Some(&admitted)).unwrap();
    assert_eq!(
        step,
        Step::Finish {
            name: "w".into(),
            finished: Finished {
                success: true,
                message: "Pods succeeded: 3/3.".into()
            }
        }
    );
    assert!(
        finalize.is_empty(),
        "finalizers stay until the Workload is finished"
    );
    let finalize = decide(&mut group.clone(), Some(&finished_wl(admitted.clone())))
        .unwrap()
        .finalize;
    assert_eq!(finalize.len(), 3);

    let mut partly = running;
    set_phase(&mut partly[0], "Succeeded", None);
    let group = PodGroup::new("g", partly).unwrap();
    assert_eq!(group.finished(), None, "one of three succeeded");
}

// Kueue: pod_controller_test.go TestReconciler "replacement pod should be started for set of Running,
// Failed, Succeeded pods" (equivalentToWorkload: a group with fewer runnable pods than its Workload
// still matches it): a failed pod stops nothing, and its gated replacement is ungated on the same
// Workload.
#[test]
fn a_failed_pod_leaves_its_group_running_and_its_replacement_is_ungated() {
    let pods: Vec<Pod> = vec![member("a", "1"), member("b", "1"), member("c", "1")]
        .into_iter()
        .map(ungated)
        .collect();
    let group = PodGroup::new("g", pods.clone()).unwrap();
    let admitted = wl_for(group.pod_sets().unwrap(), true, false);
    let mut named = admitted.clone();
    named.metadata.name = Some("g".into());
    let mut one_failed = pods.clone();
    set_phase(&mut one_failed[0], "Failed", None);
    let mut group = PodGroup::new("g", one_failed.clone()).unwrap();
    // As in Kueue, an ended pod makes the group count as suspended, so it is started again: with no
    // pod gated that changes nothing, and nothing is stopped.
    assert_eq!(
        decide(&mut group, Some(&named)).unwrap().step,
        Step::Start("g".into()),
        "the others keep running"
    );
    let infos: Vec<PodSetInfo> = named.spec.pod_sets.iter().map(|x| info(x.name())).collect();
    assert!(group.ungated(&infos).unwrap().is_empty());

    let mut replaced = one_failed;
    replaced.push(member("a2", "1"));
    let mut group = PodGroup::new("g", replaced).unwrap();
    let step = decide(&mut group, Some(&named)).unwrap().step;
    assert_eq!(step, Step::Start("g".into()));
    let ungated = group.ungated(&infos).unwrap();
    assert_eq!(
        ungated
            .iter()
            .map(|(x, _)| x.metadata.name.clone().unwrap())
            .collect::<Vec<_>>(),
        vec!["a2"],
        "the replacement is ungated"
    );
}

// Kueue: pod_controller_test.go TestReconciler "replacement pods are owning the workload"
// (ensureWorkloadOwnedByAllMembers): every live pod of the group owns its Workload.
#[test]
fn a_replacement_pod_becomes_an_owner_of_the_groups_workload() {
    let group = PodGroup::new("g", vec![member("a", "1"), member("b", "1")]).unwrap();
    let wl = group
        .workload(crate::jobframework::priority::Priority {
            class_ref: None,
            value: 0,
        })
        .unwrap();
    assert!(group.with_all_owners(&wl).is_none(), "already owned by both");
    let bigger = PodGroup::new("g", vec![member("a", "1"), member("b", "1"), member("b2", "1")]).unwrap();
    let owned = bigger.with_all_owners(&wl).expect("b2 added");
    let owners: Vec<&str> = owned
        .metadata
        .owner_references
        .iter()
        .flatten()
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(owners, vec!["a", "b", "b2"]);
    assert!(
        owned
            .metadata
            .owner_references
            .iter()
            .flatten()
            .all(|o| o.controller.is_none()),
        "no pod controls the group's Workload"
    );
}

// Kueue: pod_controller_test.go TestReconciler "excess pods before wl creation, youngest pods are
// deleted", "excess pods in pod set after admission, youngest pods are deleted", "delete excess pod that
// is gated".
#[test]
fn pods_beyond_the_groups_count_are_the_youngest_and_deleted() {
    let at = |x: &mut Pod, secs: i64| {
        x.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::from_second(secs).unwrap(),
        ));
    };
    let mut pods = vec![
        member("a", "1"),
        member("b", "1"),
        member("c", "1"),
        member("d", "1"),
    ];
    for (i, x) in pods.iter_mut().enumerate() {
        at(x, 100 + i as i64);
    }
    let mut before = PodGroup::new("g", pods.clone()).unwrap();
    let d = decide(&mut before, None).unwrap();
    assert_eq!(d.excess, vec!["d"], "three counted, the youngest goes");
    assert_eq!(d.step, Step::CreateWorkload);
    assert_eq!(before.pod_sets().unwrap()[0].count(), 3);

    // Admitted for three; a running group keeps its three, the gated newcomer is the excess.
    let mut running: Vec<Pod> = pods[..3].iter().cloned().map(ungated).collect();
    let wl = wl_for(
        PodGroup::new("g", running.clone()).unwrap().pod_sets().unwrap(),
        true,
        false,
    );
    let mut late = member("e", "1");
    at(&mut late, 50);
    running.push(late);
    let mut after = PodGroup::new("g", running).unwrap();
    let d = decide(&mut after, Some(&wl)).unwrap();
    assert_eq!(
        d.excess,
        vec!["e"],
        "an ungated pod is kept over a gated one, however old"
    );
    assert_eq!(d.step, Step::Nothing, "the rest runs on");
}

/// Kueue #11654 ("Fix PodsReady returning true when pod group is incomplete", its
/// pod_controller_test.go cases): a group whose pods are all Ready is not PodsReady while fewer than
/// its `pod-group-total-count` exist; with all of them Ready it is.
#[test]
fn an_incomplete_group_is_not_pods_ready() {
    use crate::jobframework::GenericJob;
    let ready = |name: &str| {
        let mut x = member(name, "1");
        x.status = Some(
            serde_json::from_value(json!({"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]}))
            .unwrap(),
        );
        x
    };
    let two = PodGroup::new("g", vec![ready("a"), ready("b")]).unwrap();
    assert!(!two.pods_ready(), "2 of 3 pods");
    let three = PodGroup::new("g", vec![ready("a"), ready("b"), ready("c")]).unwrap();
    assert!(three.pods_ready());
    let mut one_not = three.clone();
    one_not.pods[2].status = None;
    assert!(!one_not.pods_ready());
    // The pods' scheduling, per role: bound Running pods fill their role's slots.
    let s = three.pods_scheduling().unwrap();
    assert_eq!(s.live, 3);
    assert_eq!(
        s.scheduled.values().sum::<i64>(),
        0,
        "no node named, no PodScheduled=True"
    );
}

// Kueue: pkg/controller/jobframework/reconciler.go `startJob` with `ShouldSkipLocalExecution`
// (pkg/util/admissioncheck/admissioncheck.go), as test/integration/multikueue/pod_test.go relies on it:
// an admitted Pod whose Workload has a MultiKueue check is not ungated on the manager; a check of
// another controller, or one that does not exist, does not keep it from running here.
#[test]
fn an_admitted_pod_of_a_multikueue_workload_stays_gated() {
    use crate::api::kueue::multikueue::MULTIKUEUE_CONTROLLER_NAME;
    use crate::api::kueue::{AdmissionCheckSpec, AdmissionCheckState};
    let mut j = single();
    let mut wl = wl_for(j.pod_sets().unwrap(), true, false);
    let check = |name: &str, controller: &str| {
        AdmissionCheck::new(
            name,
            AdmissionCheckSpec {
                controller_name: controller.into(),
                parameters: None,
            },
        )
    };
    let checks = [
        check("mk", MULTIKUEUE_CONTROLLER_NAME),
        check("prov", "kueue.x-k8s.io/provisioning-request"),
    ];
    assert!(!runs_on_a_worker(&wl, &checks), "no check on the Workload");
    let state = |name: &str| -> AdmissionCheckState {
        serde_json::from_value(json!({"name": name, "state": "Ready"})).unwrap()
    };
    wl.status.as_mut().unwrap().admission_checks = vec![state("prov"), state("gone")];
    assert!(!runs_on_a_worker(&wl, &checks), "no MultiKueue check");
    wl.status.as_mut().unwrap().admission_checks.push(state("mk"));
    assert!(runs_on_a_worker(&wl, &checks));
    assert!(
        !runs_on_a_worker(&wl, &checks[1..]),
        "the MultiKueue check does not exist"
    );

    // What `load` decides: the Start step is skipped; the Pod is left as it is.
    assert_eq!(plan(&j, &[&wl]).unwrap(), Step::Start("w".into()));
    j.runs_on_a_worker = true;
    assert_eq!(plan(&j, &[&wl]).unwrap(), Step::Ignore);
    assert!(j.is_suspended());
}

// The manager's Pod that MultiKueue ran on a worker mirrors the copy's end: it finishes its Workload
// as any Pod does (Kueue: pod_test.go "finishing the worker pod", the manager's Workload finishes).
#[test]
fn a_mirrored_end_finishes_the_multikueue_workload() {
    let mut j = single();
    let wl = wl_for(j.pod_sets().unwrap(), true, false);
    set_phase(&mut j.pod, "Succeeded", None);
    assert!(matches!(plan(&j, &[&wl]).unwrap(), Step::Finish { .. }));
}
