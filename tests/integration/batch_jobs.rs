//! batch/v1 Jobs as Kueue admits them, on the embedded cluster with its Job controller and node agent:
//! a queue-labelled Job waits suspended with no pod while over quota, runs on admission with the
//! flavor's node selector, completes, finishes its Workload and gives the quota back; a higher-priority
//! Job preempts a lower one, which is suspended (its pods deleted) and requeued.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use quotagate::api::kueue::constants::{condition, label, reason};
use quotagate::api::kueue::{ClusterQueue, ResourceFlavor, Workload, WorkloadPriorityClass};
use quotagate::jobframework::names::NameLength;
use quotagate::jobframework::workload::workload_name_for_job;
use quotagate::jobs::batch::BatchJob;

use crate::support::*;

fn job(name: &str, cpu: &str, command: &[&str], priority_class: Option<&str>) -> Job {
    let mut labels = serde_json::json!({label::QUEUE_NAME: "lq"});
    if let Some(p) = priority_class {
        labels[label::PRIORITY_CLASS] = p.into();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox", "command": command, "resources": {"requests": {"cpu": cpu}}}]}}}
    }))
    .unwrap()
}

/// The server, the manager, and the simulated node agent with its Job controller.
async fn cluster(cq: ClusterQueue) -> (Cluster, tokio_util::sync::DropGuard) {
    let c = Cluster::start(Limits::default().cq("cq", 2000)).await;
    let cancel = tokio_util::sync::CancellationToken::new();
    quotagate::embedded::sim::spawn(
        c.client.clone(),
        &quotagate::embedded::sim::SimConfig {
            gateway: None,
            endpoints: false,
            ..Default::default()
        },
        cancel.clone(),
    );
    let rf: Api<ResourceFlavor> = Api::all(c.client.clone());
    rf.create(
        &PostParams::default(),
        &ResourceFlavor::build("on-demand")
            .node_label("instance", "on-demand")
            .build(),
    )
    .await
    .unwrap();
    c.cluster_queue(with_all_namespaces(cq)).await;
    c.local_queue("lq", "cq").await;
    (c, cancel.drop_guard())
}

async fn workload_of(c: &Cluster, job: &Job) -> String {
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let stored = jobs.get(job.metadata.name.as_deref().unwrap()).await.unwrap();
    workload_name_for_job(&BatchJob::new(stored), NameLength::Long).unwrap()
}

async fn active_pods(c: &Cluster, job: &str) -> usize {
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let list = pods
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
        .await
        .unwrap();
    list.items
        .iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && !matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                )
        })
        .count()
}

fn job_condition(j: &Job, type_: &str) -> bool {
    j.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

/// Kueue: test/integration/singlecluster/controller/jobs/job/job_controller_test.go, "Job controller
/// interacting with scheduler" / "Should schedule jobs as they fit in their ClusterQueue": the first
/// job starts with the flavor's node selector, a second no-fit job stays suspended, and starts when
/// the first finishes. Here the first finishes by running (`sleep 3`, long enough to observe the second
/// waiting) rather than by a forged status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_waits_suspended_runs_when_admitted_completes_and_releases_quota() {
    let (c, _sims) = cluster(
        ClusterQueue::build("cq")
            .flavor("on-demand", [("cpu", "2")])
            .build(),
    )
    .await;
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let wls = c.workloads();

    let first = jobs
        .create(
            &PostParams::default(),
            &job("first", "2", &["sh", "-c", "sleep 3"], None),
        )
        .await
        .unwrap();
    assert_eq!(
        first.spec.as_ref().unwrap().suspend,
        Some(true),
        "a queue-labelled Job is created suspended"
    );
    let first = wait_for(&jobs, "first", "running", |j| {
        j.spec.as_ref().unwrap().suspend == Some(false)
    })
    .await;
    let selector = first
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .node_selector
        .clone()
        .unwrap();
    assert_eq!(
        selector["instance"], "on-demand",
        "admission injects the flavor's node labels"
    );
    let first_wl = workload_of(&c, &first).await;
    assert!(first_wl.starts_with("job-first-"), "{first_wl}");

    let second = jobs
        .create(&PostParams::default(), &job("second", "2", &["sleep", "1"], None))
        .await
        .unwrap();
    assert_eq!(second.spec.as_ref().unwrap().suspend, Some(true));
    let second_wl = workload_of(&c, &second).await;
    let pending = wait_for(
        &wls,
        &second_wl,
        "pending with Kueue's message",
        |w: &Workload| {
            condition(w, condition::QUOTA_RESERVED)
                .is_some_and(|(s, r, _)| s == "False" && r == reason::WAITING_FOR_QUOTA)
        },
    )
    .await;
    let (_, _, message) = condition(&pending, condition::QUOTA_RESERVED).unwrap();
    assert_eq!(
        message,
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 2 more needed"
    );
    assert_eq!(active_pods(&c, "second").await, 0, "a waiting Job has no pod");
    assert!(jobs.get("second").await.unwrap().spec.unwrap().suspend == Some(true));

    // The first runs its seconds, completes, and its Workload finishes; the second then runs.
    let done = wait_for(&jobs, "first", "complete", |j| job_condition(j, "Complete")).await;
    assert_eq!(done.status.as_ref().unwrap().succeeded, Some(1));
    let finished = wait_for(&wls, &first_wl, "finished", |w: &Workload| w.is_finished()).await;
    assert_eq!(
        condition(&finished, condition::FINISHED).map(|(_, r, m)| (r, m)),
        Some((
            "Succeeded".to_string(),
            "Reached expected number of succeeded pods".to_string()
        ))
    );
    wait_for(&jobs, "second", "running", |j| {
        j.spec.as_ref().unwrap().suspend == Some(false)
    })
    .await;
    wait_for(&jobs, "second", "complete", |j| job_condition(j, "Complete")).await;
    wait_for(&wls, &second_wl, "finished", |w: &Workload| w.is_finished()).await;
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    wait_for(&cqs, "cq", "no quota held", |q| {
        q.status
            .as_ref()
            .is_some_and(|s| s.reserving_workloads == 0 && s.admitted_workloads == 0)
    })
    .await;
    c.quota.assert_safe();
}

/// Kueue: test/integration/singlecluster/scheduler/preemption_test.go, "In a single ClusterQueue" /
/// "Should preempt Workloads with lower priority when there is not enough quota", with Jobs: the low
/// Job is suspended, its pods are deleted, its Workload is evicted (Preempted) and requeued, and the
/// high Job runs. (job_controller_test.go "Should suspend a job when its workload is evicted".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_job_preempts_a_lower_one_which_is_suspended_and_requeued() {
    let mut q = ClusterQueue::build("cq")
        .flavor("on-demand", [("cpu", "2")])
        .build();
    q.spec.preemption =
        Some(serde_json::from_value(serde_json::json!({"withinClusterQueue": "LowerPriority"})).unwrap());
    let (c, _sims) = cluster(q).await;
    let wpc: Api<WorkloadPriorityClass> = Api::all(c.client.clone());
    wpc.create(
        &PostParams::default(),
        &quotagate::api::kueue::builders::workload_priority_class("high", 1000),
    )
    .await
    .unwrap();
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let wls = c.workloads();

    let low = jobs
        .create(&PostParams::default(), &job("low", "2", &["sleep", "3600"], None))
        .await
        .unwrap();
    let low_wl = workload_of(&c, &low).await;
    wait_for(&jobs, "low", "running with a pod", |j| {
        j.status.as_ref().and_then(|s| s.active) == Some(1)
    })
    .await;
    assert_eq!(active_pods(&c, "low").await, 1);

    jobs.create(
        &PostParams::default(),
        &job("high", "2", &["sleep", "3600"], Some("high")),
    )
    .await
    .unwrap();
    // Kueue stops a Job in steps (suspend, reset startTime, restore the template), so the restored
    // template shows a moment after the suspension (job_controller_test.go "the node selector should
    // be restored").
    wait_for(
        &jobs,
        "low",
        "suspended by the eviction, its template restored",
        |j| {
            let spec = j.spec.as_ref().unwrap();
            spec.suspend == Some(true)
                && spec
                    .template
                    .spec
                    .as_ref()
                    .unwrap()
                    .node_selector
                    .as_ref()
                    .is_none_or(|s| s.is_empty())
        },
    )
    .await;
    wait_for(&jobs, "high", "running", |j| {
        j.status.as_ref().and_then(|s| s.active) == Some(1)
    })
    .await;
    let requeued = wait_for(&wls, &low_wl, "evicted and pending again", |w: &Workload| {
        !reserved(w)
            && condition(w, condition::EVICTED).is_some_and(|(s, r, _)| s == "True" && r == "Preempted")
    })
    .await;
    assert!(
        condition(&requeued, condition::PREEMPTED)
            .is_some_and(|(s, r, _)| s == "True" && r == "InClusterQueue"),
        "{:?}",
        requeued.status
    );
    let low = wait_for(&jobs, "low", "no active pod", |j| {
        j.status.as_ref().and_then(|s| s.active) == Some(0)
    })
    .await;
    assert!(
        job_condition(&low, "Suspended"),
        "the Job controller says it is suspended"
    );
    assert_eq!(
        low.status.as_ref().unwrap().start_time,
        None,
        "startTime is reset on suspension"
    );
    assert_eq!(active_pods(&c, "low").await, 0);
    c.quota.assert_safe();
}

/// Kueue: test/e2e/singlecluster/e2e_test.go, "Should partially admit the Job if configured and not
/// fully fits" (job_controller_test.go "partial admission"): parallelism 3 of 500m each, completions 4,
/// `job-min-parallelism: 1`, in 1 CPU: admitted with parallelism 2 (completions untouched), never more
/// than 2 pods at once, and it completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_with_min_parallelism_is_partially_admitted_and_completes() {
    let (c, _sims) = cluster(
        ClusterQueue::build("cq")
            .flavor("on-demand", [("cpu", "1")])
            .build(),
    )
    .await;
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let mut j = job("partial", "500m", &["sleep", "0.3"], None);
    j.metadata.annotations = Some(
        [(
            quotagate::api::batch::JOB_MIN_PARALLELISM.to_string(),
            "1".to_string(),
        )]
        .into(),
    );
    let spec = j.spec.as_mut().unwrap();
    (spec.parallelism, spec.completions) = (Some(3), Some(4));
    jobs.create(&PostParams::default(), &j).await.unwrap();
    let running = wait_for(&jobs, "partial", "running", |j| {
        j.spec.as_ref().unwrap().suspend == Some(false)
    })
    .await;
    let spec = running.spec.as_ref().unwrap();
    assert_eq!(
        (spec.parallelism, spec.completions),
        (Some(2), Some(4)),
        "parallelism is the admitted count"
    );
    let wl = c.workloads().get(&workload_of(&c, &running).await).await.unwrap();
    assert_eq!(
        wl.spec.pod_sets[0].count,
        Some(3),
        "the Workload keeps the Job's own demand"
    );
    assert_eq!(wl.spec.pod_sets[0].min_count, Some(1));
    assert_eq!(wl.admission().unwrap().pod_set_assignments[0].count, Some(2));
    let done = wait_for(&jobs, "partial", "complete", |j| {
        assert!(
            j.status.as_ref().and_then(|s| s.active).unwrap_or(0) <= 2,
            "more pods than admitted: {:?}",
            j.status
        );
        job_condition(j, "Complete")
    })
    .await;
    assert_eq!(done.status.as_ref().unwrap().succeeded, Some(4));
    c.quota.assert_safe();
}
