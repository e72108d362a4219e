//! RayJob end to end: Kueue's RayJob integration (`pkg/controller/jobs/rayjob`) with the embedded Ray
//! operator's RayJob controller (KubeRay's `rayjob_controller.go`) and the simulated Jobs API.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use quotagate::api::kueue::constants::{condition, label};
use quotagate::api::kueue::{ClusterQueue, Workload};
use quotagate::api::ray::rayjob::{JobDeploymentStatus, JobStatus};
use quotagate::api::ray::{RayCluster, RayJob};
use serde_json::json;

use crate::support::*;

fn ray_job(name: &str, entrypoint: &str) -> RayJob {
    let container = |n: &str| json!({"name": n, "image": "rayproject/ray:2.9.0", "resources": {"requests": {"cpu": "1"}}});
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name, "namespace": "default", "labels": {label::QUEUE_NAME: "lq"}},
        "spec": {
            "entrypoint": entrypoint,
            "submissionMode": "HTTPMode",
            "shutdownAfterJobFinishes": true,
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head")]}}},
                "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "rayStartParams": {},
                    "template": {"spec": {"containers": [container("ray-worker")]}}}]
            }
        }
    }))
    .unwrap()
}

fn owned_by(wls: Vec<Workload>, job: &RayJob) -> Vec<Workload> {
    wls.into_iter()
        .filter(|w| {
            w.owner_references()
                .iter()
                .any(|o| Some(&o.uid) == job.metadata.uid.as_ref())
        })
        .collect()
}

/// The Ray operator and the admission loop on the embedded cluster, with ClusterQueue `cq` of `cpu`
/// CPUs (flavor `default`) behind LocalQueue `lq`.
async fn queued_ray_jobs(cpu: &str) -> Cluster {
    let milli = cpu.parse::<i64>().expect("whole CPUs") * 1000;
    let c = Cluster::start_with_ray_operator(Limits::default().cq("cq", milli)).await;
    c.flavor("default").await;
    c.cluster_queue(with_all_namespaces(cq_with("cq", cpu).build()))
        .await;
    c.local_queue("lq", "cq").await;
    c
}

async fn set_quota(c: &Cluster, cpu: &str) {
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    let patch = json!({"spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default",
        "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "64Gi"}]}]}]}});
    cqs.patch("cq", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Kueue's `test/integration/singlecluster/controller/jobs/rayjob` "Should reconcile RayJobs" (suspended on
/// create, one Workload, unsuspended on admission, Workload finished when the job ends), with KubeRay's
/// `rayjob_controller_test.go` expectations for the run (Initializing -> Running -> Complete with
/// SUCCEEDED; `shutdownAfterJobFinishes` deletes the cluster).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_rayjob_waits_for_quota_runs_to_success_and_gives_the_quota_back() {
    let c = queued_ray_jobs("1").await;
    let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
    let clusters: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");

    let job = jobs
        .create(&PostParams::default(), &ray_job("sleeper", "sleep 1"))
        .await
        .unwrap();
    assert_eq!(
        job.spec.suspend,
        Some(true),
        "a queue-labelled RayJob is created suspended"
    );

    // Over quota (head + worker ask 2 CPUs of 1): the Workload waits and KubeRay parks the job Suspended.
    let wls = c.workloads();
    let job = wait_for(&jobs, "sleeper", "Suspended while waiting", |j| {
        j.status.as_ref().and_then(|s| s.job_deployment_status) == Some(JobDeploymentStatus::Suspended)
    })
    .await;
    // KubeRay parks a suspended job whether or not its Workload exists yet: wait for it, as Kueue's
    // test does (`Eventually` the Workload is created), then there is exactly one.
    poll_workload(&c, &job).await;
    let mine = owned_by(wls.list(&ListParams::default()).await.unwrap().items, &job);
    assert_eq!(mine.len(), 1, "one Workload per RayJob");
    let wl_name = mine[0].name_any();
    let counts: Vec<(String, i32)> = mine[0]
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.clone().unwrap_or_default(), p.count.unwrap_or(0)))
        .collect();
    assert_eq!(
        counts,
        vec![("head".to_string(), 1), ("workers".to_string(), 1)],
        "HTTPMode has no submitter podset"
    );
    wait_for(&wls, &wl_name, "considered and found over quota", |w| {
        condition(w, condition::QUOTA_RESERVED).is_some_and(|(s, _, _)| s == "False")
    })
    .await;
    assert!(
        pods.list(&ListParams::default()).await.unwrap().items.is_empty(),
        "no pod runs before admission"
    );
    assert!(
        clusters
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "no cluster before admission"
    );

    // Quota raised: admitted, unsuspended, its cluster starts and the job runs to SUCCEEDED.
    c.quota.set_cq_limit("cq", 4000);
    set_quota(&c, "4").await;
    let running = wait_for(&jobs, "sleeper", "running on its cluster", |j| {
        j.status.as_ref().and_then(|s| s.job_deployment_status) == Some(JobDeploymentStatus::Running)
    })
    .await;
    assert_eq!(running.spec.suspend, Some(false));
    let cluster_name = running
        .status
        .as_ref()
        .and_then(|s| s.ray_cluster_name.clone())
        .unwrap();
    let rc = clusters.get(&cluster_name).await.unwrap();
    assert!(
        rc.owner_references()
            .iter()
            .any(|o| o.kind == "RayJob" && o.controller == Some(true))
    );
    let done = wait_for(&jobs, "sleeper", "Complete", |j| {
        j.status.as_ref().and_then(|s| s.job_deployment_status) == Some(JobDeploymentStatus::Complete)
    })
    .await;
    let status = done.status.unwrap();
    assert_eq!(status.job_status, Some(JobStatus::Succeeded));
    assert_eq!(status.succeeded, Some(1));
    assert!(status.end_time.is_some() && status.ray_job_info.and_then(|i| i.end_time).is_some());

    // shutdownAfterJobFinishes (ttl 0): the cluster goes, the Workload finishes and the quota is free.
    wait_gone(&clusters, &cluster_name).await;
    let wl = wait_for(&wls, &wl_name, "Finished", |w| w.is_finished()).await;
    assert_eq!(
        condition(&wl, condition::FINISHED).map(|(_, r, _)| r),
        Some("Succeeded".to_string())
    );
    c.quota.wait_reserved("cq", 0).await;
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    wait_for(&cqs, "cq", "no reserving workload", |q| {
        q.status.as_ref().is_some_and(|s| s.reserving_workloads == 0)
    })
    .await;
    c.quota.assert_safe();
}

/// Kueue's RayJob integration (`test/integration/singlecluster/controller/jobs/rayjob`): an evicted
/// Workload (here deactivated, reason Deactivated) suspends the job; KubeRay
/// (`rayjob_controller_suspended_test.go`) deletes its cluster on the way to Suspended and clears the
/// cluster name; the reservation is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_rayjob_is_suspended_and_its_cluster_deleted() {
    let c = queued_ray_jobs("4").await;
    let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
    let clusters: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
    let job = jobs
        .create(&PostParams::default(), &ray_job("long", "sleep 600"))
        .await
        .unwrap();
    let running = wait_for(&jobs, "long", "running its Ray job", |j| {
        j.status.as_ref().and_then(|s| s.job_status) == Some(JobStatus::Running)
    })
    .await;
    let cluster_name = running
        .status
        .as_ref()
        .and_then(|s| s.ray_cluster_name.clone())
        .unwrap();
    let wl_name = owned_by(
        c.workloads().list(&ListParams::default()).await.unwrap().items,
        &job,
    )[0]
    .name_any();

    let off = json!({"spec": {"active": false}});
    c.workloads()
        .patch(&wl_name, &PatchParams::default(), &Patch::Merge(&off))
        .await
        .unwrap();
    let suspended = wait_for(&jobs, "long", "Suspended", |j| {
        j.status.as_ref().and_then(|s| s.job_deployment_status) == Some(JobDeploymentStatus::Suspended)
    })
    .await;
    assert_eq!(suspended.spec.suspend, Some(true), "eviction suspends the RayJob");
    assert_eq!(
        suspended.status.as_ref().and_then(|s| s.ray_cluster_name.clone()),
        None
    );
    wait_gone(&clusters, &cluster_name).await;
    c.quota.wait_reserved("cq", 0).await;
    c.quota.assert_safe();
}

/// Issue 48 for a RayJob's own cluster: it carries the queue label but belongs to the RayJob's
/// Workload, and raising its workers by hand runs no pod that Workload does not cover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rayjobs_cluster_edited_by_hand_runs_no_pod_beyond_the_jobs_workload() {
    let c = queued_ray_jobs("8").await;
    let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
    let clusters: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    jobs.create(&PostParams::default(), &ray_job("long", "sleep 30"))
        .await
        .unwrap();
    let running = wait_for(&jobs, "long", "running on its cluster", |j| {
        j.status.as_ref().and_then(|s| s.job_deployment_status) == Some(JobDeploymentStatus::Running)
    })
    .await;
    let name = running
        .status
        .as_ref()
        .and_then(|s| s.ray_cluster_name.clone())
        .unwrap();
    let workers = || async {
        let sel = format!("ray.io/cluster={name},ray.io/node-type=worker");
        pods.list(&ListParams::default().labels(&sel))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .count()
    };
    assert_eq!(workers().await, 1);

    let patch = json!([{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 4}]);
    clusters
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(patch).unwrap()),
        )
        .await
        .unwrap();
    let gated = wait_for(
        &clusters,
        &name,
        "the gate saying what the Workload covers",
        |rc| {
            rc.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "QuotaGated" && c.status == "True"))
        },
    )
    .await;
    assert_eq!(
        gated.spec.worker_group_specs.as_ref().unwrap()[0].replicas,
        Some(4)
    );
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(
        workers().await,
        1,
        "workers beyond the RayJob's Workload were created"
    );
    c.quota.assert_safe();
}

/// A RayJob in KubeRay's default mode (`K8sJobMode`), queued: no `submissionMode` written.
fn k8s_job_mode(name: &str, entrypoint: &str, backoff_limit: i32) -> RayJob {
    let mut job = ray_job(name, entrypoint);
    job.spec.submission_mode = None;
    job.spec.backoff_limit = Some(backoff_limit);
    job
}

/// KubeRay's default mode end to end on the embedded cluster (`rayjob_controller_test.go` "RayJob in
/// K8sJobMode": Initializing, the submitter Job created once the cluster is ready, Running, Complete
/// with SUCCEEDED once both the Ray job and the submitter ended), with Kueue's RayJob integration
/// (`test/integration/singlecluster/controller/jobs/rayjob`: the submitter is a podset of the
/// Workload; the Workload finishes with the job). The submitter pod's `ray job submit` runs against the
/// simulated dashboard, as the Ray CLI in it would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_rayjob_in_k8s_job_mode_submits_from_its_submitter_pod_and_completes() {
    use k8s_openapi::api::batch::v1::Job;
    let c = queued_ray_jobs("4").await;
    let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
    let clusters: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
    let batch: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let job = jobs
        .create(&PostParams::default(), &k8s_job_mode("k8s", "sleep 1", 0))
        .await
        .unwrap();
    let wl = poll_workload(&c, &job).await;
    let counts: Vec<(String, i32)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.clone().unwrap_or_default(), p.count.unwrap_or(0)))
        .collect();
    assert_eq!(
        counts,
        [
            ("head".to_string(), 1),
            ("workers".to_string(), 1),
            ("submitter".to_string(), 1)
        ]
    );

    let done = wait_for(&jobs, "k8s", "Complete", |j| {
        j.status.as_ref().and_then(|s| s.job_deployment_status) == Some(JobDeploymentStatus::Complete)
    })
    .await;
    let status = done.status.unwrap();
    assert_eq!(
        (status.job_status, status.succeeded),
        (Some(JobStatus::Succeeded), Some(1))
    );
    let submitter = batch
        .get("k8s")
        .await
        .expect("the submitter Job stays for its logs");
    assert_eq!(
        submitter.status.as_ref().and_then(|s| s.succeeded),
        Some(1),
        "its pod's ray job submit ended with the job"
    );
    let cluster_name = status.ray_cluster_name.clone().unwrap_or_default();
    if !cluster_name.is_empty() {
        wait_gone(&clusters, &cluster_name).await;
    }
    let wl = wait_for(&c.workloads(), &wl.name_any(), "Finished", |w| w.is_finished()).await;
    assert_eq!(
        condition(&wl, condition::FINISHED).map(|(_, r, _)| r),
        Some("Succeeded".to_string())
    );
    c.quota.wait_reserved("cq", 0).await;
    c.quota.assert_safe();
}

/// KubeRay `rayjob_controller_test.go` (backoffLimit): a failing entrypoint in K8sJobMode is retried
/// on a new cluster `backoffLimit` times, then the RayJob ends Failed with every attempt counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_rayjob_in_k8s_job_mode_retries_its_backoff_limit_then_fails() {
    let c = queued_ray_jobs("4").await;
    let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
    jobs.create(&PostParams::default(), &k8s_job_mode("flaky", "exit 3", 1))
        .await
        .unwrap();
    let failed = wait_for(&jobs, "flaky", "Failed", |j| {
        j.status.as_ref().and_then(|s| s.job_deployment_status) == Some(JobDeploymentStatus::Failed)
    })
    .await;
    let status = failed.status.unwrap();
    assert_eq!(status.job_status, Some(JobStatus::Failed));
    assert_eq!(
        (status.failed, status.succeeded.unwrap_or(0)),
        (Some(2), 0),
        "one try and one retry: {status:?}"
    );
    c.quota.wait_reserved("cq", 0).await;
    c.quota.assert_safe();
}

async fn poll_workload(c: &Cluster, job: &RayJob) -> Workload {
    for _ in 0..200 {
        if let Some(w) = owned_by(
            c.workloads().list(&ListParams::default()).await.unwrap().items,
            job,
        )
        .into_iter()
        .next()
        {
            return w;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no Workload for RayJob {}", job.name_any());
}

/// KubeRay's SidecarMode (`rayjob_controller_test.go` "RayJob in SidecarMode": the submitter is a
/// container of the head pod, no submitter Job) with Kueue's RayJob integration (`rayjob` e2e "Should
/// account for the SidecarMode submitter in the head PodSet quota"): the head podset asks for the head
/// and the submitter together; the job runs to SUCCEEDED and the quota is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_rayjob_in_sidecar_mode_submits_from_its_head_pod() {
    use k8s_openapi::api::batch::v1::Job;
    let c = queued_ray_jobs("4").await;
    let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
    let batch: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let mut job = ray_job("side", "sleep 1");
    job.spec.submission_mode = Some(quotagate::api::ray::rayjob::JobSubmissionMode::SidecarMode);
    let job = jobs.create(&PostParams::default(), &job).await.unwrap();
    let wl = poll_workload(&c, &job).await;
    let head = wl
        .spec
        .pod_sets
        .iter()
        .find(|p| p.name.as_deref() == Some("head"))
        .expect("a head podset");
    let names: Vec<&str> = head
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["ray-head", "ray-job-submitter"],
        "the head podset holds the submitter"
    );
    assert_eq!(wl.spec.pod_sets.len(), 2, "no submitter podset in SidecarMode");

    let running = wait_for(&jobs, "side", "Running", |j| {
        j.status.as_ref().and_then(|s| s.job_deployment_status) == Some(JobDeploymentStatus::Running)
    })
    .await;
    let cluster = running
        .status
        .as_ref()
        .and_then(|s| s.ray_cluster_name.clone())
        .unwrap();
    let sel = format!("ray.io/cluster={cluster},ray.io/node-type=head");
    let head_pod = pods
        .list(&ListParams::default().labels(&sel))
        .await
        .unwrap()
        .items
        .into_iter()
        .next()
        .expect("a head pod");
    let spec = head_pod.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert!(spec.containers.iter().any(|c| c.name == "ray-job-submitter"));

    let done = wait_for(&jobs, "side", "Complete", |j| {
        j.status.as_ref().and_then(|s| s.job_deployment_status) == Some(JobDeploymentStatus::Complete)
    })
    .await;
    assert_eq!(
        done.status.as_ref().and_then(|s| s.job_status),
        Some(JobStatus::Succeeded)
    );
    assert!(
        batch.get_opt("side").await.unwrap().is_none(),
        "no submitter Job in SidecarMode"
    );
    let wl = wait_for(&c.workloads(), &wl.name_any(), "Finished", |w| w.is_finished()).await;
    assert_eq!(
        condition(&wl, condition::FINISHED).map(|(_, r, _)| r),
        Some("Succeeded".to_string())
    );
    c.quota.wait_reserved("cq", 0).await;
    c.quota.assert_safe();
}

/// The head pod's submitter container as the kubelet shows it after `restarts` restarts, the last
/// one ended with exit 137 (`crictl stop`), running again.
async fn restart_submitter(pods: &Api<Pod>, head: &str, restarts: i32) {
    let pod = pods.get(head).await.unwrap();
    let mut statuses =
        serde_json::to_value(pod.status.and_then(|s| s.container_statuses).unwrap_or_default()).unwrap();
    let sub = statuses
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|s| s["name"] == "ray-job-submitter")
        .expect("a submitter status");
    sub["restartCount"] = json!(restarts);
    sub["lastState"] = json!({"terminated": {"exitCode": 137, "reason": "Error", "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z"}});
    sub["state"] = json!({"running": {"startedAt": "2026-01-01T00:00:01Z"}});
    pods.patch_status(
        head,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"containerStatuses": statuses}})),
    )
    .await
    .unwrap();
}

async fn head_pod_of(jobs: &Api<RayJob>, pods: &Api<Pod>, job: &str) -> Pod {
    let running = wait_for(jobs, job, "its Ray job RUNNING", |j| {
        j.status.as_ref().and_then(|s| s.job_status) == Some(JobStatus::Running)
    })
    .await;
    let cluster = running
        .status
        .as_ref()
        .and_then(|s| s.ray_cluster_name.clone())
        .unwrap();
    let sel = format!("ray.io/cluster={cluster},ray.io/node-type=head");
    pods.list(&ListParams::default().labels(&sel))
        .await
        .unwrap()
        .items
        .into_iter()
        .next()
        .expect("a head pod")
}

/// KubeRay's SidecarSubmitterRestart gate: `ray-operator/test/e2erayjob/rayjob_sidecar_mode_test.go`
/// "RayJob Sidecar Mode should restart submitter container on non-zero exit" (the submitter container
/// stopped under a running job restarts; the RayJob stays Running with the same job id and then
/// completes), and `rayjob_controller.go` `checkIsRestartCountExceeded` (restarts reaching
/// `submitterConfig.backoffLimit` fail the RayJob, SubmissionFailed). The kubelet's restart is written
/// into the head pod's status as the kubelet would write it.
#[test]
fn with_sidecar_submitter_restart_a_restarted_submitter_follows_its_job_until_the_limit() {
    // Its own thread with a larger stack: restarting a manager that runs the Ray operator (for the
    // gate) drops the old manager's futures on this thread, deeper than a test thread's 2 MiB.
    let body = || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(sidecar_restart_body());
    };
    std::thread::Builder::new()
        .stack_size(32 << 20)
        .spawn(body)
        .unwrap()
        .join()
        .unwrap();
}

async fn sidecar_restart_body() {
    Box::pin(async move {
        use quotagate::api::ray::rayjob::{JobFailedReason, JobSubmissionMode};
        let mut c = queued_ray_jobs("8").await;
        c.restart_manager_with(|o| o.ray_gates.sidecar_submitter_restart = true)
            .await;
        let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
        let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
        let sidecar = |name: &str, entrypoint: &str| {
            let mut job = ray_job(name, entrypoint);
            job.spec.submission_mode = Some(JobSubmissionMode::SidecarMode);
            job
        };

        jobs.create(&PostParams::default(), &sidecar("restarts", "sleep 4"))
            .await
            .unwrap();
        let head = head_pod_of(&jobs, &pods, "restarts").await;
        let spec = head.spec.as_ref().unwrap();
        let container = spec
            .containers
            .iter()
            .find(|c| c.name == "ray-job-submitter")
            .unwrap();
        assert_eq!(
            container.restart_policy.as_deref(),
            Some("OnFailure"),
            "the gate lets the submitter restart"
        );
        assert!(
            container.args.as_ref().unwrap()[0].contains("ray job logs"),
            "it follows the job it finds"
        );
        let id = jobs
            .get("restarts")
            .await
            .unwrap()
            .status
            .and_then(|s| s.job_id)
            .unwrap();
        restart_submitter(&pods, &head.metadata.name.clone().unwrap(), 1).await;
        tokio::time::sleep(std::time::Duration::from_millis(700)).await;
        let after = jobs.get("restarts").await.unwrap().status.unwrap();
        assert_eq!(
            after.job_deployment_status,
            Some(JobDeploymentStatus::Running),
            "one restart does not fail the job: {after:?}"
        );
        assert_eq!(after.job_id.as_deref(), Some(id.as_str()), "the same Ray job");
        let done = wait_for(&jobs, "restarts", "Complete", |j| {
            j.status
                .as_ref()
                .and_then(|s| s.job_deployment_status)
                .is_some_and(|d| d.is_terminal())
        })
        .await;
        let status = done.status.unwrap();
        assert_eq!(
            (status.job_deployment_status, status.job_status),
            (Some(JobDeploymentStatus::Complete), Some(JobStatus::Succeeded)),
            "{status:?}"
        );
        assert_eq!(status.failed.unwrap_or(0), 0);

        jobs.create(&PostParams::default(), &sidecar("exhausted", "sleep 600"))
            .await
            .unwrap();
        let head = head_pod_of(&jobs, &pods, "exhausted").await;
        restart_submitter(&pods, &head.metadata.name.clone().unwrap(), 2).await;
        let failed = wait_for(&jobs, "exhausted", "Failed", |j| {
            j.status.as_ref().and_then(|s| s.job_deployment_status) == Some(JobDeploymentStatus::Failed)
        })
        .await;
        let status = failed.status.unwrap();
        assert_eq!(
            status.reason,
            Some(JobFailedReason::SubmissionFailed),
            "{status:?}"
        );
        assert!(
            status
                .message
                .as_deref()
                .unwrap_or_default()
                .contains("exceeding the maximum restart count"),
            "{status:?}"
        );
        c.quota.wait_reserved("cq", 0).await;
        c.quota.assert_safe();
    })
    .await;
}

/// Kueue `test/integration/singlecluster/controller/jobs/rayjob/rayjob_controller_test.go`, "Job
/// controller with preemption enabled" / "Should preempt lower priority rayJobs when resource
/// insufficient": a ClusterQueue of 5 CPUs preempting `LowerPriority`; a low-priority RayJob (head 1,
/// workers 2) runs; a high-priority one (head 2, workers 2; its head names a PriorityClass) is admitted
/// and the low one suspended with its Workload not admitted; once the high one is deleted, the low one
/// is admitted and unsuspended again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_rayjob_preempts_a_lower_one_which_resumes_after() {
    Box::pin(async move {
        use k8s_openapi::api::scheduling::v1::PriorityClass;
        use quotagate::api::kueue::{ClusterQueuePreemption, PreemptionPolicy};
        let c = Cluster::start_with_ray_operator(Limits::default().cq("cq", 5000)).await;
        c.flavor("default").await;
        let preempting = ClusterQueuePreemption { within_cluster_queue: Some(PreemptionPolicy::LowerPriority), ..Default::default() };
        c.cluster_queue(with_all_namespaces(cq_with("cq", "5").preemption(preempting).build())).await;
        c.local_queue("lq", "cq").await;
        let pcs: Api<PriorityClass> = Api::all(c.client.clone());
        let pc: PriorityClass = serde_json::from_value(json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "test-priority-class"}, "value": 100})).unwrap();
        pcs.create(&PostParams::default(), &pc).await.unwrap();
        let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
        let sized = |name: &str, head: &str, workers: &str, class: Option<&str>| {
            let mut job = ray_job(name, "sleep 600");
            let spec = job.spec.ray_cluster_spec.as_mut().unwrap();
            let pod = spec.head_group_spec.template.spec.as_mut().unwrap();
            pod.priority_class_name = class.map(str::to_string);
            pod.containers[0].resources = Some(serde_json::from_value(json!({"requests": {"cpu": head}})).unwrap());
            let w = spec.worker_group_specs.as_mut().unwrap()[0].template.spec.as_mut().unwrap();
            w.containers[0].resources = Some(serde_json::from_value(json!({"requests": {"cpu": workers}})).unwrap());
            job
        };
        let suspended = |j: &RayJob| j.spec.suspend == Some(true);

        let low = jobs.create(&PostParams::default(), &sized("rayjob-with-low-priority", "1", "2", None)).await.unwrap();
        wait_for(&jobs, "rayjob-with-low-priority", "admitted", |j| !suspended(j)).await;
        let high = jobs.create(&PostParams::default(), &sized("rayjob-with-high-priority", "2", "2", Some("test-priority-class"))).await.unwrap();
        let high_wl = poll_workload(&c, &high).await;
        wait_for(&c.workloads(), &high_wl.name_any(), "admitted", |w| condition(w, condition::ADMITTED).is_some_and(|(s, _, _)| s == "True")).await;
        let low_wl = poll_workload(&c, &low).await;
        wait_for(&c.workloads(), &low_wl.name_any(), "not admitted", |w| condition(w, condition::ADMITTED).is_some_and(|(s, _, _)| s == "False")).await;
        wait_for(&jobs, "rayjob-with-low-priority", "suspended", suspended).await;

        jobs.delete("rayjob-with-high-priority", &Default::default()).await.unwrap();
        wait_for(&c.workloads(), &low_wl.name_any(), "admitted again", |w| condition(w, condition::ADMITTED).is_some_and(|(s, _, _)| s == "True")).await;
        wait_for(&jobs, "rayjob-with-low-priority", "unsuspended", |j| !suspended(j)).await;
        c.quota.assert_safe();
    })
    .await;
}

/// Kueue `rayjob_controller_test.go` "Should skip reconciliation for RayJobs with clusterSelector": a
/// queue-labelled RayJob on a selected cluster, created unsuspended, gets no Workload and stays
/// unsuspended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_labelled_rayjob_with_a_cluster_selector_is_not_queue_managed() {
    let c = queued_ray_jobs("4").await;
    let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
    let mut job = ray_job("rayjob-with-selector", "sleep 1");
    job.spec.ray_cluster_spec = None;
    job.spec.cluster_selector = Some([("ray.io/cluster".to_string(), "existing-cluster".to_string())].into());
    job.spec.suspend = Some(false);
    let job = jobs.create(&PostParams::default(), &job).await.unwrap();
    for _ in 0..10 {
        assert!(
            owned_by(
                c.workloads().list(&ListParams::default()).await.unwrap().items,
                &job
            )
            .is_empty(),
            "no Workload"
        );
        assert_eq!(
            jobs.get("rayjob-with-selector").await.unwrap().spec.suspend,
            Some(false),
            "not suspended"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// An elastic RayJob (`kueue.x-k8s.io/elastic-job: "true"`, the in-tree autoscaler on): head 1 CPU (plus
/// the autoscaler's 500m), workers of 1 CPU, one to start, up to four.
fn elastic_ray_job(name: &str) -> RayJob {
    let mut job = ray_job(name, "sleep 120");
    job.metadata.annotations = Some([(label::ELASTIC_JOB.to_string(), "true".to_string())].into());
    let spec = job.spec.ray_cluster_spec.as_mut().unwrap();
    spec.enable_in_tree_autoscaling = Some(true);
    let group = &mut spec.worker_group_specs.as_mut().unwrap()[0];
    (group.min_replicas, group.max_replicas) = (Some(1), Some(4));
    job
}

/// Kueue v0.20's elastic RayJob (`pkg/controller/jobs/rayjob` `PodSets` with `raycluster.UpdatePodSets`,
/// `TestGetCustomAnnotations` "first call sets annotation with all podset counts": the worker podset
/// follows the live cluster's replicas; `test/e2e/singlecluster/extended/kuberay_test.go` "Should run a
/// rayjob with InTreeAutoscaling": the autoscaler's workers run under an admitted workload, one
/// unfinished Workload at a time) with Kueue's workload-slice rules (KEP 77): the autoscaler growing
/// the job's cluster makes a replacement slice while the job runs on; the new workers wait behind the
/// gate until the slice is admitted, which finishes the old one (`WorkloadSliceReplaced`); a smaller
/// cluster shrinks the slice in place once the workers are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elastic_rayjob_grows_through_a_slice_while_it_runs_and_shrinks_in_place() {
    Box::pin(async move {
        let c = queued_ray_jobs("3").await;
        let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
        let clusters: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
        let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
        let wls = c.workloads();
        jobs.create(&PostParams::default(), &elastic_ray_job("elastic"))
            .await
            .unwrap();
        let running = wait_for(&jobs, "elastic", "running", |j| {
            j.status.as_ref().and_then(|s| s.job_status) == Some(JobStatus::Running)
        })
        .await;
        let name = running
            .status
            .as_ref()
            .and_then(|s| s.ray_cluster_name.clone())
            .unwrap();
        let workers = || async {
            let sel = format!("ray.io/cluster={name},ray.io/node-type=worker");
            pods.list(&ListParams::default().labels(&sel))
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .count()
        };
        let live = || async {
            let all = wls.list(&ListParams::default()).await.unwrap().items;
            owned_by(all, &running)
                .into_iter()
                .filter(|w| !w.is_finished())
                .collect::<Vec<_>>()
        };
        let worker_count = |w: &Workload| {
            w.spec
                .pod_sets
                .iter()
                .find(|p| p.name() == "workers")
                .map(|p| p.count())
        };
        let first = live().await;
        assert_eq!(first.len(), 1);
        let first = first[0].name_any();
        assert_eq!(worker_count(&wls.get(&first).await.unwrap()), Some(1));

        // The autoscaler asks for 3 workers: 1.5 + 3 CPUs, over the 3 of the queue. A replacement slice
        // waits; the job runs on with its one worker; the cluster says what it waits for.
        let scale =
            |n: i32| json!([{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": n}]);
        clusters
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Json::<()>(serde_json::from_value(scale(3)).unwrap()),
            )
            .await
            .unwrap();
        let second = loop {
            let found = live().await.into_iter().find(|w| {
                w.annotations().get(label::WORKLOAD_SLICE_REPLACEMENT_FOR)
                    == Some(&format!("default/{first}"))
            });
            if let Some(w) = found {
                break w;
            }
            c.quota.wait_any_event().await;
        };
        assert_eq!(
            worker_count(&second),
            Some(3),
            "the slice asks for what the autoscaler wrote"
        );
        let second = second.name_any();
        wait_for(&wls, &second, "waiting for quota", |w| {
            condition(w, condition::QUOTA_RESERVED).is_some_and(|c| c.0 == "False")
        })
        .await;
        wait_for(&clusters, &name, "gated", |rc| {
            rc.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "QuotaGated" && c.status == "True"))
        })
        .await;
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        assert_eq!(workers().await, 1, "no worker beyond the admitted slice");
        let j = jobs.get("elastic").await.unwrap();
        assert_eq!(
            (j.spec.suspend, j.status.as_ref().and_then(|s| s.job_status)),
            (Some(false), Some(JobStatus::Running)),
            "the job runs on while its slice waits"
        );
        assert!(
            reserved(&wls.get(&first).await.unwrap()),
            "the running slice keeps its quota"
        );

        // Quota for it: the slice is admitted, replaces the first, and the two new workers start.
        c.quota.set_cq_limit("cq", 5000);
        set_quota(&c, "5").await;
        let old = wait_for(&wls, &first, "replaced", |w| {
            condition(w, "Finished").is_some_and(|c| c.0 == "True")
        })
        .await;
        assert_eq!(condition(&old, "Finished").unwrap().1, "WorkloadSliceReplaced");
        wait_for(&wls, &second, "admitted", reserved).await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while workers().await < 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "the admitted slice's workers did not start"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }

        Box::pin(shrink_in_place(&c, &name, &second, &running)).await;
        c.quota.assert_safe();
    })
    .await;
}

/// The autoscaler lets two of the elastic job's three workers go (`replicas` and the two in
/// `workersToDelete`): its admitted slice shrinks in place to one worker once they are gone.
async fn shrink_in_place(c: &Cluster, name: &str, second: &str, running: &RayJob) {
    let jobs: Api<RayJob> = Api::namespaced(c.client.clone(), "default");
    let clusters: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let wls = c.workloads();
    let sel = format!("ray.io/cluster={name},ray.io/node-type=worker");
    let live_pods = pods
        .list(&ListParams::default().labels(&sel))
        .await
        .unwrap()
        .items;
    let victims: Vec<String> = live_pods.iter().take(2).map(|p| p.name_any()).collect();
    let down = json!([
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1},
        {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": victims}}
    ]);
    clusters
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(down).unwrap()),
        )
        .await
        .unwrap();
    let shrunk = wait_for(&wls, second, "shrunk to 1 worker", |w| {
        w.spec
            .pod_sets
            .iter()
            .any(|p| p.name() == "workers" && p.count() == 1)
    })
    .await;
    assert!(
        reserved(&shrunk),
        "the same Workload keeps its smaller reservation"
    );
    let left = pods
        .list(&ListParams::default().labels(&sel))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count();
    assert_eq!(left, 1);
    let all = wls.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(
        owned_by(all, running)
            .into_iter()
            .filter(|w| !w.is_finished())
            .count(),
        1,
        "one unfinished Workload"
    );
    let j = jobs.get("elastic").await.unwrap();
    assert_eq!(
        j.status.as_ref().and_then(|s| s.job_status),
        Some(JobStatus::Running)
    );
}
