//! KubeRay's RayJob end-to-end tests (`ray-operator/test/e2erayjob/`) on the embedded cluster: the Ray
//! operator with simulated dashboards, the batch Job controller and node agent, no queue (KubeRay alone).
//! Each test names the KubeRay subtests it ports; KubeRay's Python scripts become the simulated
//! dashboard's entrypoints (`counter.py` -> `sleep 1`, `fail.py` -> `exit 1`, `long_running.py` ->
//! `sleep 600`; `stop.py`, which stops its own job, -> a stop through the Jobs API).

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use quotagate::api::ray::rayjob::{JobDeploymentStatus as D, JobFailedReason, JobStatus, JobSubmissionMode};
use quotagate::api::ray::{RayCluster, RayJob};
use quotagate::rayservice::dashboard::{DashboardEndpoint, RayJobsApi};
use quotagate::wiring::ray::Dashboards;
use serde_json::json;

use crate::support::*;

/// A RayJob as KubeRay's e2e `NewRayClusterSpec` writes it: a head and one worker, no queue label.
fn ray_job(name: &str, entrypoint: &str) -> RayJob {
    let container = |n: &str| json!({"name": n, "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "300m", "memory": "1G"}}});
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "entrypoint": entrypoint,
            "rayClusterSpec": {
                "rayVersion": "2.46.0",
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head")]}}},
                "workerGroupSpecs": [{"groupName": "small-group", "replicas": 1, "minReplicas": 1, "maxReplicas": 1, "rayStartParams": {},
                    "template": {"spec": {"containers": [container("ray-worker")]}}}]
            }
        }
    }))
    .unwrap()
}

fn deployment(j: &RayJob) -> Option<D> {
    j.status.as_ref().and_then(|s| s.job_deployment_status)
}

/// Polls until `cond` holds, for up to 90 s: retries and the submitter Job's own back-off take longer
/// than the support's usual wait.
async fn wait_long(jobs: &Api<RayJob>, name: &str, what: &str, cond: impl Fn(&RayJob) -> bool) -> RayJob {
    let start = std::time::Instant::now();
    loop {
        let j = jobs.get(name).await.unwrap();
        if cond(&j) {
            return j;
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "RayJob {name}: {what} not reached; last status {:?}",
            j.status
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn wait_deployment(jobs: &Api<RayJob>, name: &str, want: D) -> RayJob {
    wait_long(jobs, name, &format!("{want:?}"), |j| deployment(j) == Some(want)).await
}

/// The submitter Jobs (K8sJobMode) in `default`, not being deleted.
async fn submitters(c: &Cluster) -> Vec<String> {
    let api: Api<Job> = Api::namespaced(c.client.clone(), "default");
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .filter_map(|j| j.metadata.name)
        .collect()
}

/// `rayjob_test.go` "Successful RayJob", "Failing RayJob without cluster shutdown after finished",
/// "Failing submitter K8s Job", "Should transition to 'Complete' if the Ray job has stopped." and
/// "RayJob has passed ActiveDeadlineSeconds", run side by side as KubeRay runs them in one namespace.
/// The failing submitter points `ray job submit` at `http://do-not-exist:8265`, a name the cluster's
/// DNS does not resolve: the simulated CLI fails to connect as the real one does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kuberay_e2e_rayjob_runs_fails_stops_and_passes_its_deadline() {
    // Boxed: the body's future is too large for the test thread's stack.
    Box::pin(async move {
        let c = Cluster::start_with_ray_operator(Limits::default()).await;
        let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
        let clusters: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
        let create = |job: RayJob| {
            let jobs = jobs.clone();
            async move { jobs.create(&PostParams::default(), &job).await.unwrap() }
        };

        let mut counter = ray_job("counter", "sleep 1");
        counter.spec.runtime_env_yaml = Some("env_vars:\n  counter_name: test_counter\n".into());
        counter.spec.shutdown_after_job_finishes = Some(true);
        create(counter).await;
        let mut fail = ray_job("fail", "exit 1");
        fail.spec.shutdown_after_job_finishes = Some(false);
        create(fail).await;
        create(ray_job("stop", "sleep 600")).await;
        let mut long = ray_job("long-running", "sleep 600");
        long.spec.shutdown_after_job_finishes = Some(true);
        long.spec.ttl_seconds_after_finished = Some(600);
        long.spec.active_deadline_seconds = Some(3);
        create(long).await;
        // KubeRay's `JobSubmitterPodTemplateApplyConfiguration` with the command replaced.
        let mut fail_k8s_job = ray_job(
            "fail-k8s-job",
            "The command will be overridden by the submitter Job",
        );
        fail_k8s_job.spec.shutdown_after_job_finishes = Some(true);
        fail_k8s_job.spec.submitter_pod_template = Some(
            serde_json::from_value(json!({"spec": {"restartPolicy": "Never", "containers": [{
            "name": "ray-job-submitter", "image": "rayproject/ray:2.46.0",
            "command": ["ray", "job", "submit", "--address", "http://do-not-exist:8265", "--", "echo 123"],
            "resources": {"requests": {"cpu": "200m", "memory": "200Mi"}}}]}}))
            .unwrap(),
        );
        create(fail_k8s_job).await;

        // Successful RayJob: the job's own head Service (`GenerateHeadServiceName(RayJobCRD, ...)`) appears
        // and selects the job's cluster; SUCCEEDED, Complete, the Ray job's times, the cluster torn down,
        // the submitter Job kept; suspending a finished job changes nothing.
        let services: Api<Service> = Api::namespaced(c.client.clone(), "default");
        let svc = wait_for(&services, "counter-head-svc", "the RayJob's head Service", |_| {
            true
        })
        .await;
        let selected = svc
            .spec
            .and_then(|s| s.selector)
            .and_then(|s| s.get("ray.io/cluster").cloned())
            .unwrap_or_default();
        assert!(
            selected.starts_with("counter-"),
            "it selects the job's cluster: {selected}"
        );
        let done = wait_deployment(&jobs, "counter", D::Complete).await;
        let status = done.status.clone().unwrap();
        assert_eq!(status.job_status, Some(JobStatus::Succeeded));
        let info = status.ray_job_info.clone().expect("rayJobInfo");
        assert!(info.start_time.is_some() && info.end_time.is_some(), "{info:?}");
        wait_gone(&clusters, status.ray_cluster_name.as_deref().unwrap()).await;
        assert!(
            submitters(&c).await.contains(&"counter".to_string()),
            "the submitter Job is not deleted"
        );
        jobs.patch(
            "counter",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            deployment(&jobs.get("counter").await.unwrap()),
            Some(D::Complete),
            "a finished job stays Complete when suspended"
        );

        // Failing RayJob without cluster shutdown: FAILED, Failed with AppFailed; the cluster stays until
        // the RayJob is deleted, then it and the submitter Job go with it.
        let failed = wait_deployment(&jobs, "fail", D::Failed).await;
        let status = failed.status.clone().unwrap();
        assert_eq!(
            (status.job_status, status.reason),
            (Some(JobStatus::Failed), Some(JobFailedReason::AppFailed))
        );
        let fail_cluster = status.ray_cluster_name.clone().unwrap();
        assert!(
            clusters.get_opt(&fail_cluster).await.unwrap().is_some(),
            "shutdownAfterJobFinishes false keeps the cluster"
        );
        jobs.delete("fail", &DeleteParams::default()).await.unwrap();
        wait_gone(&clusters, &fail_cluster).await;
        wait_gone(&Api::<Job>::namespaced(c.client.clone(), "default"), "fail").await;

        // A Ray job stopped while it runs (stop.py stops itself): Complete with STOPPED.
        let running = wait_long(&jobs, "stop", "RUNNING", |j| {
            j.status.as_ref().and_then(|s| s.job_status) == Some(JobStatus::Running)
        })
        .await;
        let status = running.status.unwrap();
        let Some(Dashboards::Simulated(sim)) = &c.ray else {
            panic!("simulated dashboards")
        };
        let ep = DashboardEndpoint::new(format!("http://{}", status.dashboard_url.unwrap()));
        assert!(
            sim.stop_job(&ep, status.job_id.as_deref().unwrap())
                .await
                .unwrap(),
            "the Ray job stops"
        );
        let stopped = wait_deployment(&jobs, "stop", D::Complete).await;
        assert_eq!(
            stopped.status.and_then(|s| s.job_status),
            Some(JobStatus::Stopped)
        );

        // activeDeadlineSeconds passed while the job runs: Failed with DeadlineExceeded.
        let late = wait_deployment(&jobs, "long-running", D::Failed).await;
        assert_eq!(
            late.status.and_then(|s| s.reason),
            Some(JobFailedReason::DeadlineExceeded)
        );

        // Failing submitter K8s Job: the submitter cannot reach the cluster and its Job reaches its
        // back-off limit; the RayJob is Failed with SubmissionFailed and no Ray job status (New); the
        // cluster goes (shutdownAfterJobFinishes), the submitter Job stays until the RayJob is deleted.
        let failed = wait_deployment(&jobs, "fail-k8s-job", D::Failed).await;
        let status = failed.status.clone().unwrap();
        assert_eq!(
            (status.job_status, status.reason),
            (None, Some(JobFailedReason::SubmissionFailed)),
            "{status:?}"
        );
        wait_gone(&clusters, status.ray_cluster_name.as_deref().unwrap()).await;
        let submitter = Api::<Job>::namespaced(c.client.clone(), "default")
            .get("fail-k8s-job")
            .await
            .unwrap();
        let tries = submitter.status.as_ref().and_then(|s| s.failed).unwrap_or(0);
        assert_eq!(
            tries, 3,
            "KubeRay's submitter Job back-off limit (2): three tries, all failed"
        );
        jobs.delete("fail-k8s-job", &DeleteParams::default())
            .await
            .unwrap();
    })
    .await;
}

/// `rayjob_suspend_test.go` "Suspend the RayJob when its status is 'Running', and then resume it."
/// (Suspended, its cluster and submitter Job deleted, Running again once resumed) and "Create a
/// suspended RayJob, and then resume it." (Suspended, then Complete with SUCCEEDED; deleting the
/// RayJob takes its cluster).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kuberay_e2e_rayjob_suspend_and_resume() {
    // Boxed: the body's future is too large for the test thread's stack.
    Box::pin(async move {
        let c = Cluster::start_with_ray_operator(Limits::default()).await;
        let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
        let clusters: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
        let suspend = |on: bool| json!({"spec": {"suspend": on}});

        let mut long = ray_job("long-running", "sleep 600");
        long.spec.shutdown_after_job_finishes = Some(true);
        long.spec.ttl_seconds_after_finished = Some(600);
        jobs.create(&PostParams::default(), &long).await.unwrap();
        let mut counter = ray_job("counter", "sleep 1");
        counter.spec.suspend = Some(true);
        counter.spec.shutdown_after_job_finishes = Some(true);
        jobs.create(&PostParams::default(), &counter).await.unwrap();

        let running = wait_deployment(&jobs, "long-running", D::Running).await;
        let cluster = running.status.and_then(|s| s.ray_cluster_name).unwrap();
        jobs.patch(
            "long-running",
            &PatchParams::default(),
            &Patch::Merge(suspend(true)),
        )
        .await
        .unwrap();
        wait_deployment(&jobs, "long-running", D::Suspended).await;
        assert!(
            clusters.get_opt(&cluster).await.unwrap().is_none(),
            "the cluster is torn down before Suspended"
        );
        wait_gone(
            &Api::<Job>::namespaced(c.client.clone(), "default"),
            "long-running",
        )
        .await;
        jobs.patch(
            "long-running",
            &PatchParams::default(),
            &Patch::Merge(suspend(false)),
        )
        .await
        .unwrap();
        wait_deployment(&jobs, "long-running", D::Running).await;

        wait_deployment(&jobs, "counter", D::Suspended).await;
        assert!(
            clusters
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .iter()
                .all(|rc| !rc.metadata.name.as_deref().unwrap_or("").starts_with("counter-")),
            "no cluster while suspended"
        );
        jobs.patch("counter", &PatchParams::default(), &Patch::Merge(suspend(false)))
            .await
            .unwrap();
        let done = wait_deployment(&jobs, "counter", D::Complete).await;
        let status = done.status.unwrap();
        assert_eq!(status.job_status, Some(JobStatus::Succeeded));
        jobs.delete("counter", &DeleteParams::default()).await.unwrap();
        wait_gone(&clusters, status.ray_cluster_name.as_deref().unwrap()).await;
    })
    .await;
}

/// `rayjob_retry_test.go` "Failing RayJob with HttpMode submission mode" and "Failing RayJob with
/// SidecarMode submission mode": backoffLimit 2, a failing entrypoint: Failed, FAILED, AppFailed,
/// `failed` 3 (2 retries + 1 initial attempt) and `succeeded` 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kuberay_e2e_rayjob_retries_in_http_and_sidecar_mode() {
    // Boxed: the body's future is too large for the test thread's stack.
    Box::pin(async move {
        let c = Cluster::start_with_ray_operator(Limits::default()).await;
        let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
        for (name, mode) in [
            ("failing-rayjob-in-httpmode", JobSubmissionMode::HTTPMode),
            ("failing-rayjob-in-sidecar-mode", JobSubmissionMode::SidecarMode),
        ] {
            let mut job = ray_job(name, "exit 1");
            job.spec.submission_mode = Some(mode);
            job.spec.backoff_limit = Some(2);
            job.spec.shutdown_after_job_finishes = Some(false);
            jobs.create(&PostParams::default(), &job).await.unwrap();
        }
        for name in ["failing-rayjob-in-httpmode", "failing-rayjob-in-sidecar-mode"] {
            let failed = wait_long(&jobs, name, "Failed after its retries", |j| {
                deployment(j) == Some(D::Failed)
            })
            .await;
            let status = failed.status.unwrap();
            assert_eq!(
                (status.job_status, status.reason),
                (Some(JobStatus::Failed), Some(JobFailedReason::AppFailed)),
                "{name}: {status:?}"
            );
            assert_eq!(
                (status.failed, status.succeeded),
                (Some(3), Some(0)),
                "{name}: 2 retries + 1 initial attempt"
            );
        }
    })
    .await;
}

/// `rayjob_cluster_selector_test.go` "Successful RayJob", "Failing RayJob", "RayJob should be created
/// but not to be updated when managed externally" and "RayJob should not be created due to managedBy
/// invalid value", on a RayCluster `raycluster` made first and Ready; and `rayjob_test.go` "RayJob
/// should be created, but not updated when managed externally" (`managedBy` cannot change, no
/// cluster and no submitter Job are made).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kuberay_e2e_rayjob_on_a_selected_cluster_and_managed_externally() {
    Box::pin(async move {
        let c = Cluster::start_with_ray_operator(Limits::default()).await;
        let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
        let clusters: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
        let spec = serde_json::to_value(ray_job("x", "x").spec.ray_cluster_spec).unwrap();
        let rc: RayCluster = serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "raycluster", "namespace": "default"}, "spec": spec})).unwrap();
        clusters.create(&PostParams::default(), &rc).await.unwrap();
        wait_for(&clusters, "raycluster", "Ready", |rc| rc.status.as_ref().and_then(|s| s.state).is_some_and(|s| format!("{s:?}") == "Ready")).await;

        let on_selected = |name: &str, entrypoint: &str| {
            let mut job = ray_job(name, entrypoint);
            job.spec.ray_cluster_spec = None;
            job.spec.cluster_selector = Some([("ray.io/cluster".to_string(), "raycluster".to_string())].into());
            job
        };
        let mut counter = on_selected("counter", "sleep 1");
        counter.spec.runtime_env_yaml = Some("env_vars:\n  counter_name: test_counter\n".into());
        jobs.create(&PostParams::default(), &counter).await.unwrap();
        let mut fail = on_selected("fail", "exit 1");
        fail.spec.shutdown_after_job_finishes = Some(false);
        jobs.create(&PostParams::default(), &fail).await.unwrap();
        let mut external = on_selected("managed-externally", "sleep 1");
        external.spec.managed_by = Some("kueue.x-k8s.io/multikueue".into());
        jobs.create(&PostParams::default(), &external).await.unwrap();
        let mut own_external = ray_job("managed-externally-own", "sleep 1");
        own_external.spec.managed_by = Some("kueue.x-k8s.io/multikueue".into());
        jobs.create(&PostParams::default(), &own_external).await.unwrap();
        let mut invalid = on_selected("managed-externally-invalid", "sleep 1");
        invalid.spec.managed_by = Some("invalid.com/controller".into());
        let err = jobs.create(&PostParams::default(), &invalid).await.expect_err("an unknown managedBy is refused");
        assert!(matches!(&err, kube::Error::Api(e) if e.code == 422), "{err:?}");

        let terminal = |j: &RayJob| j.status.as_ref().and_then(|s| s.job_status).is_some_and(|s| s.is_terminal());
        assert_eq!(wait_long(&jobs, "counter", "terminal", terminal).await.status.and_then(|s| s.job_status), Some(JobStatus::Succeeded));
        assert_eq!(wait_long(&jobs, "fail", "terminal", terminal).await.status.and_then(|s| s.job_status), Some(JobStatus::Failed));
        assert!(clusters.get_opt("raycluster").await.unwrap().is_some(), "a selected cluster is never deleted by the job");

        // Managed externally: the status stays New for 3 s, and managedBy cannot change.
        for _ in 0..6 {
            for name in ["managed-externally", "managed-externally-own"] {
                assert_eq!(deployment(&jobs.get(name).await.unwrap()), None, "{name} is left to its manager");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let change = json!({"spec": {"managedBy": "ray.io/kuberay-operator"}});
        assert!(jobs.patch("managed-externally-own", &PatchParams::default(), &Patch::Merge(&change)).await.is_err(), "managedBy is immutable");
        assert!(clusters.list(&ListParams::default()).await.unwrap().items.iter().all(|rc| !rc.metadata.name.as_deref().unwrap_or("").starts_with("managed-externally")));
        let submitters = submitters(&c).await;
        assert!(!submitters.iter().any(|s| s.starts_with("managed-externally")), "{submitters:?}");
    })
    .await;
}
