//! The Job controller's decision, against what kube-controller-manager's Job controller does
//! (`pkg/controller/job/job_controller.go`: pods up to parallelism, conditions and their reasons,
//! suspension deleting active pods and resetting startTime).

use super::*;
use serde_json::{Value, json};

fn job(spec: Value, status: Value) -> Job {
    let mut spec = spec;
    spec["template"] = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}});
    serde_json::from_value(json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "default", "uid": "u1"}, "spec": spec, "status": status})).unwrap()
}

fn pod(name: &str, phase: &str, ready: bool) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name}, "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})).unwrap()
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_700_000_000).unwrap()
}

fn cond_of(status: &JobStatus, type_: &str) -> Option<(String, String, String)> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

fn triple(s: &str, r: &str, m: &str) -> Option<(String, String, String)> {
    Some((s.into(), r.into(), m.into()))
}

#[test]
fn a_running_job_gets_pods_up_to_parallelism_and_remaining_completions() {
    let j = job(json!({"parallelism": 3, "completions": 4}), json!({}));
    let plan = decide(&j, &[], now());
    assert_eq!(plan.create.len(), 3);
    let status = plan.status.unwrap();
    assert_eq!((status.active, status.start_time), (Some(3), Some(Time(now()))));

    let (a, b, done) = (
        pod("a", "Running", true),
        pod("b", "Pending", false),
        pod("c", "Succeeded", false),
    );
    let d = pod("d", "Succeeded", false);
    let plan = decide(&j, &[&a, &b, &done, &d], now());
    assert_eq!(plan.create.len(), 0, "two remain and two run");
    let status = plan.status.unwrap();
    assert_eq!(
        (status.active, status.ready, status.succeeded),
        (Some(2), Some(1), Some(2))
    );

    let e = pod("e", "Succeeded", false);
    let plan = decide(&j, &[&a, &done, &d, &e], now());
    assert_eq!(
        (plan.create.len(), plan.delete.len()),
        (0, 0),
        "one completion left, one pod runs"
    );

    let unset = job(json!({}), json!({}));
    assert_eq!(
        decide(&unset, &[], now()).create,
        vec![None],
        "parallelism defaults to 1"
    );
}

#[test]
fn completions_reached_complete_the_job_with_the_real_reasons() {
    let j = job(
        json!({"parallelism": 2, "completions": 2}),
        json!({"startTime": "2023-11-14T22:13:00Z"}),
    );
    let (a, b, extra) = (
        pod("a", "Succeeded", false),
        pod("b", "Succeeded", false),
        pod("x", "Running", true),
    );
    let plan = decide(&j, &[&a, &b, &extra], now());
    let status = plan.status.unwrap();
    assert_eq!(
        cond_of(&status, "Complete"),
        triple(
            "True",
            "CompletionsReached",
            "Reached expected number of succeeded pods"
        )
    );
    assert_eq!(
        cond_of(&status, "SuccessCriteriaMet"),
        triple(
            "True",
            "CompletionsReached",
            "Reached expected number of succeeded pods"
        )
    );
    assert_eq!(status.completion_time, Some(Time(now())));
    assert_eq!((status.active, plan.delete), (Some(0), vec!["x".to_string()]));

    // A work queue (no completions): done once a pod succeeded and none runs any more.
    let queue = job(json!({"parallelism": 2}), json!({}));
    let running = pod("r", "Running", true);
    let plan = decide(&queue, &[&a, &running], now());
    assert!(plan.create.is_empty(), "no new pod once one succeeded");
    assert_eq!(cond_of(plan.status.as_ref().unwrap(), "Complete"), None);
    assert!(cond_of(&decide(&queue, &[&a], now()).status.unwrap(), "Complete").is_some());
}

#[test]
fn failures_past_the_backoff_limit_fail_the_job() {
    let j = job(
        json!({"parallelism": 2, "completions": 2, "backoffLimit": 1}),
        json!({}),
    );
    let (f1, running) = (pod("f1", "Failed", false), pod("r", "Running", true));
    let plan = decide(&j, &[&f1, &running], now());
    assert_eq!(
        plan.create.len(),
        1,
        "a failed pod is replaced while within the limit"
    );
    let f2 = pod("f2", "Failed", false);
    let plan = decide(&j, &[&f1, &f2, &running], now());
    let status = plan.status.unwrap();
    assert_eq!(
        cond_of(&status, "Failed"),
        triple(
            "True",
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit"
        )
    );
    assert_eq!(
        cond_of(&status, "FailureTarget"),
        triple(
            "True",
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit"
        )
    );
    assert_eq!(
        (plan.delete, plan.create.len(), status.failed),
        (vec!["r".to_string()], 0, Some(2))
    );
    let unset = job(json!({}), json!({}));
    let six: Vec<Pod> = (0..6).map(|i| pod(&format!("f{i}"), "Failed", false)).collect();
    let refs: Vec<&Pod> = six.iter().collect();
    assert_eq!(
        cond_of(decide(&unset, &refs, now()).status.as_ref().unwrap(), "Failed"),
        None,
        "backoffLimit defaults to 6"
    );
}

#[test]
fn suspension_deletes_active_pods_and_resets_the_start_time_and_resuming_sets_it_again() {
    let running = job(
        json!({"parallelism": 2, "completions": 4, "suspend": true}),
        json!({"startTime": "2023-11-14T22:13:00Z", "active": 2}),
    );
    let (a, b, done) = (
        pod("a", "Running", true),
        pod("b", "Pending", false),
        pod("c", "Succeeded", false),
    );
    let plan = decide(&running, &[&a, &b, &done], now());
    assert_eq!(
        (plan.delete, plan.create.len()),
        (vec!["a".to_string(), "b".to_string()], 0)
    );
    let status = plan.status.unwrap();
    assert_eq!(
        cond_of(&status, "Suspended"),
        triple("True", "JobSuspended", "Job suspended")
    );
    assert_eq!((status.start_time.clone(), status.active), (None, Some(0)));

    let mut resumed = running.clone();
    resumed.spec.as_mut().unwrap().suspend = Some(false);
    resumed.status = Some(status);
    let plan = decide(&resumed, &[], now());
    let status = plan.status.unwrap();
    assert_eq!(
        cond_of(&status, "Suspended"),
        triple("False", "JobResumed", "Job resumed")
    );
    assert_eq!((status.start_time, plan.create.len()), (Some(Time(now())), 2));

    let created_suspended = job(json!({"parallelism": 2, "suspend": true}), json!({}));
    let plan = decide(&created_suspended, &[], now());
    assert!(plan.create.is_empty());
    assert_eq!(
        cond_of(plan.status.as_ref().unwrap(), "Suspended"),
        triple("True", "JobSuspended", "Job suspended")
    );
}

#[test]
fn a_job_managed_by_another_controller_or_already_finished_is_left_alone() {
    let other = job(
        json!({"parallelism": 2, "managedBy": "kueue.x-k8s.io/multikueue"}),
        json!({}),
    );
    assert_eq!(decide(&other, &[], now()), Plan::default());
    let own = job(
        json!({"parallelism": 1, "managedBy": "kubernetes.io/job-controller"}),
        json!({}),
    );
    assert_eq!(decide(&own, &[], now()).create.len(), 1);
    let done = job(
        json!({"parallelism": 1}),
        json!({"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1, "active": 0, "failed": 0, "ready": 0}),
    );
    let stale = pod("s", "Running", true);
    let plan = decide(&done, &[&stale], now());
    assert_eq!((plan.create.len(), plan.delete), (0, vec!["s".to_string()]));
}

#[test]
fn indexed_jobs_create_the_missing_indexes() {
    let j = job(
        json!({"parallelism": 2, "completions": 3, "completionMode": "Indexed"}),
        json!({}),
    );
    let mut zero = pod("z", "Succeeded", false);
    zero.metadata.annotations = Some([(COMPLETION_INDEX.to_string(), "0".to_string())].into());
    let plan = decide(&j, &[&zero], now());
    assert_eq!(plan.create, vec![Some(1), Some(2)]);
    let p = pod_for(&j, Some(1));
    assert_eq!(p.metadata.generate_name.as_deref(), Some("j-1-"));
    assert_eq!(p.metadata.annotations.unwrap()[COMPLETION_INDEX], "1");
    let labels = p.metadata.labels.unwrap();
    assert_eq!(
        (
            labels["app"].as_str(),
            labels[b::CONTROLLER_UID_LABEL].as_str(),
            labels[b::JOB_NAME_LABEL].as_str()
        ),
        ("x", "u1", "j")
    );
    assert_eq!(p.metadata.owner_references.unwrap()[0].controller, Some(true));
}

fn indexed_pod(name: &str, phase: &str, index: i32) -> Pod {
    let mut p = pod(name, phase, phase == "Running");
    p.metadata.annotations = Some([(COMPLETION_INDEX.to_string(), index.to_string())].into());
    p
}

// kube-controller-manager's Job controller keeps `status.completedIndexes` ("0-2,5"), only below
// `completions`, and counts completion by it: a succeeded pod deleted since still counts.
#[test]
fn indexed_jobs_keep_their_completed_indexes() {
    let j = job(
        json!({"parallelism": 2, "completions": 4, "completionMode": "Indexed"}),
        json!({"completedIndexes": "0"}),
    );
    let (one, three) = (indexed_pod("a", "Succeeded", 1), indexed_pod("b", "Succeeded", 3));
    let plan = decide(&j, &[&one, &three], now());
    let status = plan.status.unwrap();
    assert_eq!(status.completed_indexes.as_deref(), Some("0-1,3"));
    assert_eq!(plan.create, vec![Some(2)], "index 0 was done before its pod went");
    let scaled = job(
        json!({"parallelism": 2, "completions": 2, "completionMode": "Indexed"}),
        json!({"completedIndexes": "0-1,3"}),
    );
    let status = decide(&scaled, &[], now()).status.unwrap();
    assert_eq!(
        status.completed_indexes.as_deref(),
        Some("0-1"),
        "indexes past completions are dropped"
    );
    assert_eq!(cond_of(&status, "Complete").map(|c| c.0), Some("True".into()));
}

// kube-controller-manager: job_controller.go `activePodsForRemoval` and controller.ActivePods' order:
// lowering parallelism deletes the pods least far along (unscheduled and gated, then pending, then not
// ready) before running ones; an Indexed Job first deletes pods whose index is out of range.
#[test]
fn a_scale_down_deletes_the_pods_least_far_along_first() {
    let j = job(json!({"parallelism": 1, "completions": 5}), json!({}));
    let mut running = pod("a-running", "Running", true);
    running.spec = Some(serde_json::from_value(json!({"nodeName": "node", "containers": []})).unwrap());
    let mut gated = pod("b-gated", "Pending", false);
    gated.spec = Some(
        serde_json::from_value(
            json!({"schedulingGates": [{"name": "kueue.x-k8s.io/elastic-job"}], "containers": []}),
        )
        .unwrap(),
    );
    let plan = decide(&j, &[&running, &gated], now());
    assert_eq!(
        plan.delete,
        vec!["b-gated".to_string()],
        "the gated pod goes, the running one stays"
    );
    let plan = decide(&j, &[&gated, &running], now());
    assert_eq!(
        plan.delete,
        vec!["b-gated".to_string()],
        "whatever the listing order"
    );

    let ix = job(
        json!({"parallelism": 2, "completions": 2, "completionMode": "Indexed"}),
        json!({}),
    );
    let (zero, one, four, dup) = (
        indexed_pod("p0", "Running", 0),
        indexed_pod("p1", "Pending", 1),
        indexed_pod("p4", "Running", 4),
        indexed_pod("q0", "Running", 0),
    );
    let plan = decide(&ix, &[&zero, &one, &four, &dup], now());
    assert_eq!(
        plan.delete,
        vec!["p4".to_string(), "q0".to_string()],
        "out of range, and the second pod of index 0"
    );
    assert!(plan.create.is_empty());
}
