//! The RayJob decision, state by state. Expectations follow KubeRay's
//! `ray-operator/controllers/ray/rayjob_controller_test.go` (the envtest walk New -> Initializing -> Running
//! -> Complete, suspend, retries) and `rayjob_controller_unit_test.go` (`TestUpdateStatusToSuspendingIfNeeded`,
//! `TestCheckBackoffLimitAndUpdateStatusIfNeeded`, `TestCheckActiveDeadlineAndUpdateStatusIfNeeded`,
//! deletion policy cases).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::decide::*;
use crate::api::ray::RayJobStatus;
use crate::api::ray::rayjob::{JobDeploymentStatus as D, JobFailedReason, JobStatus, RayJobSpec};
use crate::rayservice::dashboard::JobDetails;

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn spec(extra: serde_json::Value) -> RayJobSpec {
    let mut base = json!({
        "entrypoint": "sleep 1", "submissionMode": "HTTPMode", "shutdownAfterJobFinishes": true,
        "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}}}}
    });
    if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(base).unwrap()
}

fn status(deployment: Option<D>) -> RayJobStatus {
    RayJobStatus {
        job_deployment_status: deployment,
        job_id: deployment.map(|_| "job-abcde".into()),
        ray_cluster_name: deployment.map(|_| "job-fghij".into()),
        start_time: deployment.map(|_| Time(now() - SignedDuration::from_secs(10))),
        ..Default::default()
    }
}

fn ready_cluster() -> ClusterView {
    ClusterView::Present {
        ready: true,
        dashboard_url: Some("job-fghij-head-svc.ns.svc.cluster.local:8265".into()),
        workers_suspended: false,
        status: None,
    }
}

fn snap(spec: RayJobSpec, status: RayJobStatus) -> Snapshot {
    Snapshot {
        now: now(),
        namespace: "ns".into(),
        name: "job".into(),
        deleting: false,
        has_finalizer: true,
        managed_externally: false,
        invalid: None,
        invalid_status: None,
        spec,
        status,
        cluster: ClusterView::Absent,
        job: JobView::NotQueried,
        submitter: SubmitterView::Absent,
        generated_job_id: "job-abcde".into(),
        generated_cluster_name: "job-fghij".into(),
        deletion_policy_gate: true,
        delete_job_after_finish: false,
    }
}

fn details(status: &str) -> JobDetails {
    JobDetails {
        status: status.into(),
        start_time: Some(1_000),
        end_time: Some(2_000),
        message: Some(format!("job {status}")),
        ..Default::default()
    }
}

fn next(plan: &Plan) -> RayJobStatus {
    plan.status.clone().expect("a status write")
}

#[test]
fn a_new_job_gets_its_finalizer_ids_and_start_time_before_anything_is_created() {
    let mut s = snap(spec(json!({})), RayJobStatus::default());
    s.has_finalizer = false;
    let plan = decide(&s);
    assert_eq!(plan.actions, vec![Action::AddFinalizer]);
    let st = next(&plan);
    assert_eq!(st.job_deployment_status, Some(D::Initializing));
    assert_eq!(st.job_id.as_deref(), Some("job-abcde"));
    assert_eq!(st.ray_cluster_name.as_deref(), Some("job-fghij"));
    assert_eq!(st.start_time, Some(Time(now())));
    // spec.jobId wins; clusterSelector names the cluster; InteractiveMode waits for the user's id.
    let s = snap(
        spec(
            json!({"jobId": "mine", "clusterSelector": {"ray.io/cluster": "shared"}, "rayClusterSpec": null}),
        ),
        RayJobStatus::default(),
    );
    let st = next(&decide(&s));
    assert_eq!(
        (st.job_id.as_deref(), st.ray_cluster_name.as_deref()),
        (Some("mine"), Some("shared"))
    );
    let st = next(&decide(&snap(
        spec(json!({"submissionMode": "InteractiveMode"})),
        RayJobStatus::default(),
    )));
    assert_eq!(st.job_id, None);
}

#[test]
fn initializing_creates_the_cluster_then_waits_for_it_to_be_ready() {
    let s = snap(spec(json!({})), status(Some(D::Initializing)));
    let plan = decide(&s);
    assert_eq!(
        plan.actions,
        vec![Action::CreateCluster {
            name: "job-fghij".into()
        }]
    );
    assert_eq!(plan.events[0].reason, "CreatedRayCluster");
    assert_eq!(plan.status, None, "nothing to write until the cluster is ready");
    let mut s = snap(spec(json!({})), status(Some(D::Initializing)));
    s.cluster = ClusterView::Present {
        ready: false,
        dashboard_url: Some("x:8265".into()),
        workers_suspended: false,
        status: None,
    };
    let plan = decide(&s);
    assert!(plan.actions.is_empty() && plan.status.is_none());
    assert_eq!(plan.requeue, Some(DEFAULT_REQUEUE));
    // Ready: HTTPMode runs with the dashboard address; K8sJobMode also creates its submitter.
    s.cluster = ready_cluster();
    let st = next(&decide(&s));
    assert_eq!(st.job_deployment_status, Some(D::Running));
    assert_eq!(
        st.dashboard_url.as_deref(),
        Some("job-fghij-head-svc.ns.svc.cluster.local:8265")
    );
    s.spec.submission_mode = None;
    let plan = decide(&s);
    assert_eq!(plan.actions, vec![Action::CreateSubmitter]);
    assert_eq!(next(&plan).job_deployment_status, Some(D::Running));
    s.spec.submission_mode = Some(crate::api::ray::rayjob::JobSubmissionMode::InteractiveMode);
    assert_eq!(next(&decide(&s)).job_deployment_status, Some(D::Waiting));
}

/// `TestUpdateStatusToSuspendingIfNeeded`: only Initializing and Running move to Suspending.
#[test]
fn suspend_is_taken_from_initializing_and_running_only() {
    for (from, to) in [
        (D::Initializing, Some(D::Suspending)),
        (D::Running, Some(D::Suspending)),
        (D::Complete, None),
        (D::Failed, None),
    ] {
        let mut s = snap(spec(json!({"suspend": true})), status(Some(from)));
        s.cluster = ready_cluster();
        let plan = decide(&s);
        assert_eq!(
            plan.status.map(|st| st.job_deployment_status),
            to.map(Some),
            "from {from:?}"
        );
    }
}

#[test]
fn running_submits_over_http_once_and_follows_the_job_to_its_end() {
    let mut s = snap(spec(json!({})), status(Some(D::Running)));
    s.cluster = ready_cluster();
    s.job = JobView::NotFound;
    let plan = decide(&s);
    assert_eq!(
        plan.actions,
        vec![
            Action::ReconcileHeadService {
                cluster: "job-fghij".into()
            },
            Action::SubmitJob {
                submission_id: "job-abcde".into()
            }
        ],
        "the job's head Service follows its cluster while it runs"
    );
    assert_eq!(plan.status, None);
    s.job = JobView::Found(Box::new(details("RUNNING")));
    let st = next(&decide(&s));
    assert_eq!(
        (st.job_deployment_status, st.job_status),
        (Some(D::Running), Some(JobStatus::Running))
    );
    s.job = JobView::Found(Box::new(details("SUCCEEDED")));
    let st = next(&decide(&s));
    assert_eq!(
        (st.job_deployment_status, st.job_status),
        (Some(D::Complete), Some(JobStatus::Succeeded))
    );
    assert_eq!((st.succeeded, st.failed), (Some(1), Some(0)));
    assert_eq!(st.end_time, Some(Time(now())));
    assert_eq!(
        st.ray_job_info.and_then(|i| i.end_time),
        Some(Time(Timestamp::from_millisecond(2_000).unwrap()))
    );
    // A dashboard that does not answer changes nothing.
    s.job = JobView::Error("unreachable".into());
    assert_eq!(decide(&s).status, None);
}

/// KubeRay #1919: in K8sJobMode a terminal Ray job completes the RayJob only once its submitter finished.
#[test]
fn k8s_job_mode_waits_for_the_submitter_and_fails_with_it() {
    let mut s = snap(
        spec(json!({"submissionMode": "K8sJobMode"})),
        status(Some(D::Running)),
    );
    s.cluster = ready_cluster();
    s.job = JobView::Found(Box::new(details("SUCCEEDED")));
    s.submitter = SubmitterView::Active;
    assert_eq!(next(&decide(&s)).job_deployment_status, Some(D::Running));
    s.submitter = SubmitterView::Complete;
    assert_eq!(next(&decide(&s)).job_deployment_status, Some(D::Complete));
    s.submitter = SubmitterView::Failed {
        reason: "BackoffLimitExceeded".into(),
        message: "Job has reached the specified backoff limit".into(),
    };
    let st = next(&decide(&s));
    assert_eq!(
        (st.job_deployment_status, st.reason),
        (Some(D::Failed), Some(JobFailedReason::SubmissionFailed))
    );
    assert!(st.message.unwrap_or_default().contains("BackoffLimitExceeded"));
}

/// `TestCheckBackoffLimitAndUpdateStatusIfNeeded`: a failure retries while `failed < backoffLimit + 1`;
/// a missed deadline never retries.
#[test]
fn failures_retry_backoff_limit_times_then_fail() {
    for (failed_before, want) in [(0, D::Retrying), (1, D::Retrying), (2, D::Failed)] {
        let mut st = status(Some(D::Running));
        st.failed = Some(failed_before);
        let mut s = snap(spec(json!({"backoffLimit": 2})), st);
        s.cluster = ready_cluster();
        s.job = JobView::Found(Box::new(details("FAILED")));
        let st = next(&decide(&s));
        assert_eq!(
            st.job_deployment_status,
            Some(want),
            "after {failed_before} failures"
        );
        assert_eq!(st.failed, Some(failed_before + 1));
        assert_eq!(st.reason, Some(JobFailedReason::AppFailed));
    }
    let mut s = snap(
        spec(json!({"backoffLimit": 2, "activeDeadlineSeconds": 5})),
        status(Some(D::Running)),
    );
    s.cluster = ready_cluster();
    let st = next(&decide(&s));
    assert_eq!(
        (st.job_deployment_status, st.reason),
        (Some(D::Failed), Some(JobFailedReason::DeadlineExceeded))
    );
}

#[test]
fn retrying_and_suspending_delete_the_cluster_first_then_reset() {
    for (from, to) in [(D::Suspending, Some(D::Suspended)), (D::Retrying, None)] {
        let mut s = snap(spec(json!({})), status(Some(from)));
        s.cluster = ready_cluster();
        let plan = decide(&s);
        assert_eq!(
            plan.actions,
            vec![Action::DeleteCluster {
                name: "job-fghij".into()
            }]
        );
        assert_eq!(plan.status, None, "no transition while the cluster goes");
        s.cluster = ClusterView::Deleting;
        assert_eq!(decide(&s).status, None);
        s.cluster = ClusterView::Absent;
        let st = next(&decide(&s));
        assert_eq!(st.job_deployment_status, to, "from {from:?}");
        assert_eq!(
            (st.ray_cluster_name, st.job_id, st.dashboard_url, st.job_status),
            (None, None, None, None)
        );
    }
    // Unsuspended again: back to New, which starts over with new ids.
    let mut s = snap(spec(json!({})), status(Some(D::Suspended)));
    s.spec.suspend = Some(false);
    assert_eq!(next(&decide(&s)).job_deployment_status, None);
    s.spec.suspend = Some(true);
    assert_eq!(
        decide(&s),
        Plan::default(),
        "a suspended job waits for its spec to change"
    );
}

#[test]
fn shutdown_after_job_finishes_deletes_the_cluster_after_the_ttl() {
    let mut st = status(Some(D::Complete));
    st.end_time = Some(Time(now() - SignedDuration::from_secs(4)));
    let mut s = snap(spec(json!({"ttlSecondsAfterFinished": 10})), st);
    s.cluster = ready_cluster();
    let plan = decide(&s);
    assert!(plan.actions.is_empty());
    assert_eq!(plan.requeue, Some(Duration::from_secs(6)));
    s.now = now() + SignedDuration::from_secs(6);
    let plan = decide(&s);
    assert_eq!(
        plan.actions,
        vec![Action::DeleteCluster {
            name: "job-fghij".into()
        }]
    );
    assert_eq!(plan.requeue, None);
    s.delete_job_after_finish = true;
    assert_eq!(decide(&s).actions, vec![Action::DeleteSelf]);
    // Without shutdownAfterJobFinishes, or on a selected cluster, nothing is deleted.
    s.delete_job_after_finish = false;
    s.spec.shutdown_after_job_finishes = Some(false);
    assert!(decide(&s).actions.is_empty());
}

#[test]
fn deletion_rules_run_the_most_impactful_overdue_rule() {
    let rules = json!({"shutdownAfterJobFinishes": false, "deletionStrategy": {"deletionRules": [
        {"policy": "DeleteWorkers", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 0}},
        {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 10}},
        {"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 20}},
        {"policy": "DeleteSelf", "condition": {"jobDeploymentStatus": "Failed", "ttlSeconds": 0}}
    ]}});
    let mut st = status(Some(D::Complete));
    st.job_status = Some(JobStatus::Succeeded);
    st.end_time = Some(Time(now()));
    let mut s = snap(spec(rules), st);
    s.cluster = ready_cluster();
    let plan = decide(&s);
    assert_eq!(
        plan.actions,
        vec![Action::SuspendWorkerGroups {
            name: "job-fghij".into()
        }]
    );
    assert_eq!(
        plan.requeue,
        Some(Duration::from_secs(10)),
        "woken for the next rule"
    );
    s.now = now() + SignedDuration::from_secs(25);
    assert_eq!(
        decide(&s).actions,
        vec![Action::DeleteSelf],
        "a controller back from downtime deletes the job first"
    );
    // Off gate: the strategy is ignored and shutdownAfterJobFinishes (false here) decides.
    s.deletion_policy_gate = false;
    assert!(decide(&s).actions.is_empty());
}

#[test]
fn deleting_stops_a_job_that_may_still_run_and_drops_the_finalizer() {
    let mut s = snap(spec(json!({})), status(Some(D::Running)));
    s.deleting = true;
    s.cluster = ready_cluster();
    assert_eq!(
        decide(&s).actions,
        vec![
            Action::StopJob {
                submission_id: "job-abcde".into()
            },
            Action::RemoveFinalizer
        ]
    );
    s.status.job_status = Some(JobStatus::Succeeded);
    assert_eq!(decide(&s).actions, vec![Action::RemoveFinalizer]);
}

#[test]
fn invalid_jobs_fail_validation_and_external_ones_are_left_alone() {
    let mut s = snap(spec(json!({})), RayJobStatus::default());
    s.invalid = Some("spec.backoffLimit: Invalid value".into());
    let plan = decide(&s);
    let st = next(&plan);
    assert_eq!(
        (st.job_deployment_status, st.reason),
        (Some(D::ValidationFailed), Some(JobFailedReason::ValidationFailed))
    );
    assert_eq!(plan.events[0].reason, "InvalidRayJobSpec");
    s.status = st;
    assert_eq!(decide(&s), Plan::default(), "ValidationFailed is final");
    let mut s = snap(
        spec(json!({"managedBy": "kueue.x-k8s.io/multikueue"})),
        RayJobStatus::default(),
    );
    s.managed_externally = true;
    assert_eq!(decide(&s), Plan::default());
}

#[test]
fn a_job_whose_deployment_status_lags_is_ended_after_the_grace_period() {
    let mut st = status(Some(D::Running));
    st.job_status = Some(JobStatus::Failed);
    st.ray_job_info = Some(crate::api::ray::rayjob::RayJobStatusInfo {
        start_time: None,
        end_time: Some(Time(now() - SignedDuration::from_secs(301))),
    });
    let s = snap(spec(json!({})), st);
    let st = next(&decide(&s));
    assert_eq!(
        (st.job_deployment_status, st.reason),
        (
            Some(D::Failed),
            Some(JobFailedReason::JobDeploymentStatusTransitionGracePeriodExceeded)
        )
    );
}
