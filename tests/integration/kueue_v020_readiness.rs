//! Kueue v0.20's readiness for pod groups and batch Jobs, on the embedded cluster with one node of
//! 2 cpu and its scheduler (`run --embedded --nodes 1 --node-capacity cpu=2,memory=8Gi`), an 8-cpu
//! queue, and the manager under waitForPodsReady:
//! - kueue#15734 (`PodIntegrationCountSucceededPodsAsReady`, on by default in v0.20): a pod group
//!   member that succeeds keeps the group ready, so the recoveryTimeout does not evict the group.
//! - kueue#15402 / #15434 (`unscheduledTimeout`): a batch Job's pods are observed for the Workload's
//!   `PodsScheduled`, so a Job that fits the quota but not the node is evicted with
//!   `WaitForScheduling`, and one that fits says `AllRequiredPodsScheduled`. The same for a RayJob
//!   (K8sJobMode): its cluster's pods and its submitter's are observed.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use quotagate::api::kueue::Workload;
use quotagate::api::kueue::config::PodsReadyConfig;
use quotagate::api::kueue::constants::{condition, label, reason};

use crate::support::*;

/// Real timeouts of a second or two: one test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The one-node cluster with this waitForPodsReady; `pods`: the plain Pod framework on too.
async fn small_node(pods: bool, cfg: PodsReadyConfig) -> Cluster {
    crate::kueue_podsready::small_node_with(pods, cfg).await
}

/// The reserved, unfinished Workload, once there is one.
async fn reserved_workload(c: &Cluster) -> Workload {
    for _ in 0..200 {
        let wls = c.workloads().list(&ListParams::default()).await.unwrap().items;
        if let Some(w) = wls.into_iter().find(|w| reserved(w) && !w.is_finished()) {
            return w;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no workload got quota");
}

fn group_pod(name: &str, command: &[&str]) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default",
            "labels": {label::QUEUE_NAME: "lq", "kueue.x-k8s.io/pod-group-name": "g"},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": command,
            "resources": {"requests": {"cpu": "500m"}}}]}
    }))
    .unwrap()
}

/// Kueue #15734 ("Pod: count succeeded pods as ready for PodsReady"): with a 1 s recoveryTimeout, a
/// group of two whose first pod completes while the second runs stays `PodsReady=True` and is not
/// evicted. Before, the completed pod's `Ready=False` turned the group to `WaitForRecovery`, and the
/// recoveryTimeout evicted it, deleting the running pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_15734_a_pod_group_member_that_succeeds_keeps_the_group_ready() {
    let _serial = SERIAL.lock().await;
    let c = small_node(
        true,
        PodsReadyConfig {
            recovery_timeout: Some(Duration::from_secs(1)),
            backoff_base_seconds: 600,
            ..PodsReadyConfig::with_timeout(Duration::from_secs(60))
        },
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    pods.create(&PostParams::default(), &group_pod("g-a", &["sleep", "2"]))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &group_pod("g-b", &["sleep", "3600"]))
        .await
        .unwrap();
    wait_for(&c.workloads(), "g", "PodsReady=True", |w| {
        condition(w, condition::PODS_READY).is_some_and(|p| p.0 == "True")
    })
    .await;
    wait_for(&pods, "g-a", "g-a Succeeded", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded")
    })
    .await;
    // Three recovery timeouts later: still ready, not evicted, g-b still running.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let w = c.workloads().get("g").await.unwrap();
    assert_eq!(
        condition(&w, condition::PODS_READY).map(|p| p.0),
        Some("True".to_string()),
        "{w:?}"
    );
    assert!(
        condition(&w, condition::EVICTED).is_none_or(|e| e.0 == "False"),
        "{w:?}"
    );
    let b = pods.get("g-b").await.unwrap();
    assert!(b.metadata.deletion_timestamp.is_none(), "g-b was stopped");
    assert_eq!(
        b.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    c.quota.assert_safe();
}

fn job(name: &str, parallelism: i32, cpu: &str) -> Job {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {label::QUEUE_NAME: "lq"}},
        "spec": {"parallelism": parallelism, "completions": parallelism, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
            "command": ["sleep", "3600"], "resources": {"requests": {"cpu": cpu}}}]}}}
    }))
    .unwrap()
}

/// Kueue #15402 / #15434 (`unscheduledTimeout`, KEP-13502) for batch Jobs: a Job of two 1500m pods
/// fits the 8-cpu quota but only one of its pods fits the 2-cpu node. The other stays
/// Pending/`Unschedulable`; the Workload shows `PodsScheduled=False`/`WaitForScheduling` and is
/// evicted by the 2 s unscheduledTimeout, long before the 60 s timeout, with Kueue's event, and the
/// Job is suspended again. Before, a batch Job's pods were not observed, and only the timeout applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_15402_unscheduled_timeout_evicts_a_batch_job_that_fits_no_node() {
    let _serial = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let c = small_node(
        false,
        PodsReadyConfig {
            unscheduled_timeout: Some(Duration::from_secs(2)),
            backoff_base_seconds: 600,
            ..PodsReadyConfig::with_timeout(Duration::from_secs(60))
        },
    )
    .await;
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    jobs.create(&PostParams::default(), &job("big", 2, "1500m"))
        .await
        .unwrap();
    let name = reserved_workload(&c).await.metadata.name.unwrap();
    let w = wait_for(
        &c.workloads(),
        &name,
        "PodsScheduled=False/WaitForScheduling",
        |w| {
            condition(w, condition::PODS_SCHEDULED).is_some_and(|p| p.1 == reason::WAIT_FOR_SCHEDULING)
                || condition(w, condition::EVICTED).is_some_and(|e| e.0 == "True")
        },
    )
    .await;
    evicted_by_the_unscheduled_timeout(&c, &w, &name, started).await;
    wait_for(&jobs, "big", "suspended", |j| {
        j.spec.as_ref().and_then(|s| s.suspend) == Some(true)
    })
    .await;
    c.quota.assert_safe();
}

/// The same tracking for a Job whose pods fit: `PodsScheduled=True`/`AllRequiredPodsScheduled`, and
/// `PodsReady=True` once they run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_15402_a_batch_job_that_fits_reports_pods_scheduled() {
    let _serial = SERIAL.lock().await;
    let c = small_node(
        false,
        PodsReadyConfig {
            unscheduled_timeout: Some(Duration::from_secs(60)),
            ..PodsReadyConfig::with_timeout(Duration::from_secs(60))
        },
    )
    .await;
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    jobs.create(&PostParams::default(), &job("fits", 2, "500m"))
        .await
        .unwrap();
    let name = reserved_workload(&c).await.metadata.name.unwrap();
    let w = wait_for(&c.workloads(), &name, "PodsScheduled=True", |w| {
        condition(w, condition::PODS_SCHEDULED).is_some_and(|p| p.0 == "True")
    })
    .await;
    assert_eq!(
        condition(&w, condition::PODS_SCHEDULED),
        cond(
            "True",
            reason::ALL_REQUIRED_PODS_SCHEDULED,
            "All required pods were scheduled or succeeded"
        )
    );
    let w = wait_for(&c.workloads(), &name, "PodsReady=True", |w| {
        condition(w, condition::PODS_READY).is_some_and(|p| p.0 == "True")
    })
    .await;
    assert!(condition(&w, condition::EVICTED).is_none(), "{w:?}");
    c.quota.assert_safe();
}

/// A queue-labelled K8sJobMode RayJob: a 500m head and one worker of `worker_cpu`.
fn ray_job(name: &str, worker_cpu: &str) -> quotagate::api::ray::RayJob {
    let container = |n: &str, cpu: &str| {
        serde_json::json!({"name": n, "image": "rayproject/ray:2.9.0",
            "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}}})
    };
    serde_json::from_value(serde_json::json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name, "namespace": "default", "labels": {label::QUEUE_NAME: "lq"}},
        "spec": {
            "entrypoint": "sleep 600",
            "submissionMode": "K8sJobMode",
            "shutdownAfterJobFinishes": true,
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head", "500m")]}}},
                "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "rayStartParams": {},
                    "template": {"spec": {"containers": [container("ray-worker", worker_cpu)]}}}]
            }
        }
    }))
    .unwrap()
}

/// Kueue #15402 / #15434 (`unscheduledTimeout`, KEP-13502) for a RayJob: Kueue's tracker counts
/// every pod labelled for the Workload, the RayJob's cluster's and its submitter's. A worker of
/// 4 cpu fits the 8-cpu quota but not the 2-cpu node: it stays Pending/`Unschedulable`, the
/// Workload shows `PodsScheduled=False`/`WaitForScheduling` and `PodsReady=False`/
/// `WaitForScheduling`, and the 2 s unscheduledTimeout evicts it long before the 60 s timeout, with
/// Kueue's message and event; the RayJob is suspended again. Before, a RayJob's pods were not
/// observed, and only the timeout applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_15402_unscheduled_timeout_evicts_a_rayjob_whose_worker_fits_no_node() {
    let _serial = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let c = small_node(
        false,
        PodsReadyConfig {
            unscheduled_timeout: Some(Duration::from_secs(2)),
            backoff_base_seconds: 600,
            ..PodsReadyConfig::with_timeout(Duration::from_secs(60))
        },
    )
    .await;
    let jobs: Api<quotagate::api::ray::RayJob> = Api::namespaced(c.client.clone(), "default");
    jobs.create(&PostParams::default(), &ray_job("big", "4"))
        .await
        .unwrap();
    let name = reserved_workload(&c).await.metadata.name.unwrap();
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let worker = wait_for_pod(&pods, "ray.io/node-type=worker", |p| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            })
    })
    .await;
    assert_eq!(
        worker.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    let w = wait_for(&c.workloads(), &name, "PodsReady=False/WaitForScheduling", |w| {
        condition(w, condition::PODS_READY).is_some_and(|p| p.1 == reason::WAIT_FOR_SCHEDULING)
            || condition(w, condition::EVICTED).is_some_and(|e| e.0 == "True")
    })
    .await;
    evicted_by_the_unscheduled_timeout(&c, &w, &name, started).await;
    wait_for(&jobs, "big", "suspended", |j| j.spec.suspend == Some(true)).await;
    c.quota.assert_safe();
}

/// The same tracking for a RayJob that fits the node (head, worker and the default 500m submitter:
/// 1.5 of 2 cpu): `PodsScheduled=True`/`AllRequiredPodsScheduled` once the submitter KubeRay makes
/// after the cluster is ready is bound too, `PodsReady=True`, and no eviction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_15402_a_rayjob_that_fits_reports_all_required_pods_scheduled() {
    let _serial = SERIAL.lock().await;
    let c = small_node(
        false,
        PodsReadyConfig {
            unscheduled_timeout: Some(Duration::from_secs(30)),
            ..PodsReadyConfig::with_timeout(Duration::from_secs(60))
        },
    )
    .await;
    let jobs: Api<quotagate::api::ray::RayJob> = Api::namespaced(c.client.clone(), "default");
    jobs.create(&PostParams::default(), &ray_job("fits", "500m"))
        .await
        .unwrap();
    let wl = reserved_workload(&c).await;
    let name = wl.metadata.name.clone().unwrap();
    let podsets: Vec<String> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| p.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(podsets, ["head", "workers", "submitter"]);
    let w = wait_for(&c.workloads(), &name, "PodsScheduled=True", |w| {
        condition(w, condition::PODS_SCHEDULED).is_some_and(|p| p.0 == "True")
    })
    .await;
    assert_eq!(
        condition(&w, condition::PODS_SCHEDULED),
        cond(
            "True",
            reason::ALL_REQUIRED_PODS_SCHEDULED,
            "All required pods were scheduled or succeeded"
        )
    );
    // The submitter is one of the pods it waited for: bound by the time the condition turned.
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let submitter = pods
        .list(&ListParams::default().labels("batch.kubernetes.io/job-name=fits"))
        .await
        .unwrap()
        .items;
    assert!(
        submitter
            .iter()
            .any(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some()),
        "{submitter:?}"
    );
    let w = wait_for(&c.workloads(), &name, "PodsReady=True", |w| {
        condition(w, condition::PODS_READY).is_some_and(|p| p.0 == "True")
    })
    .await;
    assert!(condition(&w, condition::EVICTED).is_none(), "{w:?}");
    c.quota.assert_safe();
}

/// The first pod matching `selector` for which `ok` holds, once there is one.
async fn wait_for_pod(pods: &Api<Pod>, selector: &str, ok: impl Fn(&Pod) -> bool) -> Pod {
    let params = ListParams::default().labels(selector);
    for _ in 0..300 {
        if let Some(p) = pods
            .list(&params)
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|p| ok(p))
        {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no pod matching {selector:?} as wanted");
}

/// Whether the event `EvictedDueToPodsReadyTimeoutDueToWaitForScheduling` names Workload `name`
/// within five seconds.
/// After `w` was seen waiting for scheduling (or already evicted): `PodsScheduled=False` while not
/// evicted, then evicted with Kueue's PodsReady timeout reason and message well before the 60 s
/// `timeout` (so by the `unscheduledTimeout`), and the eviction's event naming WaitForScheduling.
async fn evicted_by_the_unscheduled_timeout(
    c: &Cluster,
    w: &Workload,
    name: &str,
    started: std::time::Instant,
) {
    if condition(w, condition::EVICTED).is_none_or(|e| e.0 != "True") {
        assert_eq!(
            condition(w, condition::PODS_SCHEDULED),
            cond(
                "False",
                reason::WAIT_FOR_SCHEDULING,
                "At least one required pod is not scheduled"
            )
        );
    }
    let w = wait_for(&c.workloads(), name, "evicted by the PodsReady timeout", |w| {
        condition(w, condition::EVICTED).is_some_and(|e| e.0 == "True" && e.1 == reason::PODS_READY_TIMEOUT)
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "evicted by the unscheduledTimeout, not the timeout ({:?})",
        started.elapsed()
    );
    assert_eq!(
        condition(&w, condition::EVICTED).unwrap().2,
        format!("Exceeded the PodsReady timeout default/{name}")
    );
    assert!(
        eviction_event(c, name).await,
        "the eviction event names WaitForScheduling"
    );
}

async fn eviction_event(c: &Cluster, name: &str) -> bool {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(c.client.clone(), "default");
    for _ in 0..100 {
        let seen = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("EvictedDueToPodsReadyTimeoutDueToWaitForScheduling")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
            });
        if seen {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
