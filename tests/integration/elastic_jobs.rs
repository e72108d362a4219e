//! Elastic batch/v1 Jobs (`kueue.x-k8s.io/elastic-job: "true"`) through workload slices, as Kueue v0.20
//! runs them, on the embedded cluster with its Job controller and node agent: a `parallelism` raised on
//! a running Job becomes a new slice (the old one keeps its pods running, the Job is not suspended), the
//! new pods wait behind the `kueue.x-k8s.io/elastic-job` scheduling gate until that slice is admitted,
//! then the ungater lets them through; a lowered `parallelism` shrinks the slice in place. The quota
//! watch checks the ClusterQueue's limit at every Workload event.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use quotagate::api::kueue::constants::{condition, label};
use quotagate::api::kueue::{ClusterQueue, ResourceFlavor, Workload};
use quotagate::api::quantity::{Quantity, resource_value};

use crate::support::*;

fn job(name: &str, cpu: &str, parallelism: i32, completions: i32, elastic: bool) -> Job {
    let annotations = if elastic {
        serde_json::json!({label::ELASTIC_JOB: "true"})
    } else {
        serde_json::json!({})
    };
    serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {label::QUEUE_NAME: "lq"}, "annotations": annotations},
        "spec": {"parallelism": parallelism, "completions": completions, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox", "command": ["sleep", "3600"], "resources": {"requests": {"cpu": cpu}}}]}}}
    }))
    .unwrap()
}

async fn cluster(milli_cpu: i64) -> (Cluster, tokio_util::sync::DropGuard) {
    let c = Cluster::start(Limits::default().cq("cq", milli_cpu)).await;
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
    rf.create(&PostParams::default(), &ResourceFlavor::build("default").build())
        .await
        .unwrap();
    let cpu = format!("{milli_cpu}m");
    c.cluster_queue(with_all_namespaces(
        ClusterQueue::build("cq")
            .flavor("default", [("cpu", cpu.as_str())])
            .build(),
    ))
    .await;
    c.local_queue("lq", "cq").await;
    (c, cancel.drop_guard())
}

fn is_gated(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == label::ELASTIC_JOB_SCHEDULING_GATE))
}

fn is_live(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && !matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
}

fn phase(p: &Pod) -> &str {
    p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// The Job's live pods as (gated, running ungated).
async fn pods_of(c: &Cluster, job: &str) -> (Vec<Pod>, Vec<Pod>) {
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let list = pods
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
        .await
        .unwrap();
    list.items.into_iter().filter(is_live).partition(is_gated)
}

/// Runs `check` once the watch on `api` has listed, and again after every event, until it answers
/// `Some` (never a sleep; no change is missed: one after the listing is an event); panics after 60 s.
pub(crate) async fn on_every_event<K, T, Fut>(
    api: Api<K>,
    cfg: watcher::Config,
    what: &str,
    mut check: impl FnMut() -> Fut,
) -> T
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    Fut: Future<Output = Option<T>>,
{
    let stream = watcher(api, cfg).default_backoff();
    futures::pin_mut!(stream);
    let found = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while stream.next().await.is_some() {
            if let Some(v) = check().await {
                return Some(v);
            }
        }
        None
    })
    .await;
    found
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("timed out waiting for {what}"))
}

/// Waits until `cond` holds for the Job's (gated, through the gate) live pods.
async fn wait_pods(
    c: &Cluster,
    job: &str,
    what: &str,
    cond: impl Fn(&[Pod], &[Pod]) -> bool,
) -> (Vec<Pod>, Vec<Pod>) {
    let api: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let cfg = watcher::Config::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
    on_every_event(api, cfg, &format!("the pods of {job}: {what}"), || async {
        let (gated, through) = pods_of(c, job).await;
        cond(&gated, &through).then_some((gated, through))
    })
    .await
}

/// Waits until the Job has `n` Workloads, first slice first.
async fn wait_workloads(c: &Cluster, uid: &str, n: usize) -> Vec<Workload> {
    let cfg = watcher::Config::default().labels(&format!("{}={uid}", label::JOB_UID));
    on_every_event(
        c.workloads(),
        cfg,
        &format!("{n} Workloads of the Job"),
        || async {
            let all = workloads_of(c, uid).await;
            (all.len() == n).then_some(all)
        },
    )
    .await
}

/// The Job's Workloads, the chain's first slice first (creation times have a second's resolution:
/// the slice that replaces none comes first).
async fn workloads_of(c: &Cluster, uid: &str) -> Vec<Workload> {
    let mut wls = c
        .workloads()
        .list(&ListParams::default().labels(&format!("{}={uid}", label::JOB_UID)))
        .await
        .unwrap()
        .items;
    wls.sort_by_key(|w| {
        (
            w.annotations()
                .contains_key(label::WORKLOAD_SLICE_REPLACEMENT_FOR),
            w.metadata.creation_timestamp.as_ref().map(|t| t.0),
        )
    });
    wls
}

async fn scale(jobs: &Api<Job>, name: &str, parallelism: i32) {
    let patch = serde_json::json!({"spec": {"parallelism": parallelism}});
    jobs.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// The ClusterQueue's reserved cpu, in millis.
fn cq_cpu(q: &ClusterQueue) -> i64 {
    let usage = q
        .status
        .as_ref()
        .map(|s| s.flavors_reservation.clone())
        .unwrap_or_default();
    usage
        .iter()
        .flat_map(|f| f.resources.iter())
        .filter(|r| r.name == "cpu")
        .filter_map(|r| r.total.as_ref())
        .map(|q| resource_value("cpu", &Quantity::try_from(q).unwrap()))
        .sum()
}

/// Kueue: test/integration/singlecluster/controller/jobs/job/job_controller_test.go, "Job with elastic
/// jobs via workload-slices support" / "Should support job scale-down and scale-up": 3 pods of 100m
/// admitted (300m reserved); parallelism 1 shrinks the same Workload in place (100m, still admitted);
/// parallelism 2 makes a new slice, admitted (200m), and the old one finished. Here the pods run, so
/// the running pods are checked too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elastic_job_scales_down_in_place_and_up_through_a_new_slice() {
    let (c, _sims) = cluster(5000).await;
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    let created = jobs
        .create(&PostParams::default(), &job("job1", "100m", 3, 3, true))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let gates = created
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .scheduling_gates
        .clone()
        .unwrap_or_default();
    assert_eq!(
        gates.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(),
        vec![label::ELASTIC_JOB_SCHEDULING_GATE],
        "the webhook gates an elastic Job's pods"
    );

    wait_for(&jobs, "job1", "running 3 pods", |j| {
        j.status.as_ref().and_then(|s| s.ready) == Some(3)
    })
    .await;
    wait_for(&cqs, "cq", "300m reserved", |q| cq_cpu(q) == 300).await;
    let first = workloads_of(&c, &uid).await;
    assert_eq!(first.len(), 1);
    assert!(first[0].is_admitted());
    wait_pods(&c, "job1", "three through the gate", |gated, through| {
        gated.is_empty() && through.len() == 3
    })
    .await;

    scale(&jobs, "job1", 1).await;
    wait_for(&cqs, "cq", "100m reserved after the scale-down", |q| {
        cq_cpu(q) == 100
    })
    .await;
    let shrunk = wait_for(
        &c.workloads(),
        first[0].metadata.name.as_deref().unwrap(),
        "count 1",
        |w: &Workload| w.spec.pod_sets[0].count == Some(1),
    )
    .await;
    assert_eq!(
        shrunk.metadata.uid, first[0].metadata.uid,
        "the same Workload, shrunk in place"
    );
    assert!(shrunk.is_admitted());
    wait_for(&jobs, "job1", "one pod left", |j| {
        j.status.as_ref().and_then(|s| s.active) == Some(1)
    })
    .await;

    scale(&jobs, "job1", 2).await;
    wait_for(&cqs, "cq", "200m reserved after the scale-up", |q| {
        cq_cpu(q) == 200
    })
    .await;
    let old = wait_for(
        &c.workloads(),
        first[0].metadata.name.as_deref().unwrap(),
        "replaced",
        |w: &Workload| w.is_finished(),
    )
    .await;
    assert_eq!(
        condition(&old, condition::FINISHED).map(|(s, r, _)| (s, r)),
        Some(("True".into(), "WorkloadSliceReplaced".into()))
    );
    let all = wait_workloads(&c, &uid, 2).await;
    assert!(
        all[1].is_admitted() && all[1].spec.pod_sets[0].count == Some(2),
        "{:?}",
        all[1]
    );
    let podset_labels = all[1].spec.pod_sets[0]
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    assert!(
        !podset_labels.contains_key(label::PODSET),
        "the new slice has the chain's template, not the one admission wrote into the Job: {podset_labels:?}"
    );
    wait_for(&jobs, "job1", "two pods ready", |j| {
        j.status.as_ref().and_then(|s| s.ready) == Some(2)
    })
    .await;
    assert_eq!(
        jobs.get("job1").await.unwrap().spec.unwrap().suspend,
        Some(false),
        "never suspended"
    );
    c.quota.assert_safe();
}

/// Kueue: the same suite's scale-up, with the quota taken: the new slice waits (only its delta must
/// fit), the Job keeps running on its old slice, and its new pods exist but stay gated (`SchedulingGated`)
/// until the slice is admitted; then they run. A pod watch checks at every event that no more of the
/// Job's pods are through the gate than the admitted slice grants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elastic_jobs_new_pods_wait_gated_until_their_slice_is_admitted() {
    let (c, _sims) = cluster(1000).await;
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    jobs.create(&PostParams::default(), &job("blocker", "600m", 1, 1, false))
        .await
        .unwrap();
    wait_for(&jobs, "blocker", "running", |j| {
        j.status.as_ref().and_then(|s| s.ready) == Some(1)
    })
    .await;
    let created = jobs
        .create(&PostParams::default(), &job("elastic", "200m", 2, 8, true))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    wait_for(&jobs, "elastic", "running 2 pods", |j| {
        j.status.as_ref().and_then(|s| s.ready) == Some(2)
    })
    .await;

    // Every pod event: the Job's pods through the gate never outnumber what is admitted.
    let allowed = Arc::new(AtomicUsize::new(2));
    let (a, pods_api) = (
        allowed.clone(),
        Api::<Pod>::namespaced(c.client.clone(), "default"),
    );
    let checker = tokio::spawn(async move {
        let cfg = watcher::Config::default().labels("batch.kubernetes.io/job-name=elastic");
        let stream = watcher(pods_api, cfg).default_backoff().applied_objects();
        futures::pin_mut!(stream);
        let mut through = std::collections::BTreeSet::new();
        while let Some(Ok(p)) = stream.next().await {
            let name = p.metadata.name.clone().unwrap_or_default();
            if is_live(&p) && !is_gated(&p) {
                through.insert(name);
            } else {
                through.remove(&name);
            }
            assert!(
                through.len() <= a.load(Ordering::SeqCst),
                "pods through the gate beyond the admitted slice: {through:?}"
            );
        }
    });

    scale(&jobs, "elastic", 4).await;
    let all = wait_workloads(&c, &uid, 2).await;
    let pending = wait_for(
        &c.workloads(),
        all[1].metadata.name.as_deref().unwrap(),
        "waiting for quota",
        |w: &Workload| condition(w, condition::QUOTA_RESERVED).is_some_and(|(s, _, _)| s == "False"),
    )
    .await;
    assert_eq!(
        pending
            .annotations()
            .get(label::WORKLOAD_SLICE_REPLACEMENT_FOR)
            .map(String::as_str),
        Some(format!("default/{}", all[0].metadata.name.as_deref().unwrap()).as_str()),
        "the new slice replaces the admitted one"
    );
    let (_, _, message) = condition(&pending, condition::QUOTA_RESERVED).unwrap();
    assert!(
        message.contains("insufficient unused quota for cpu in flavor default, 400m more needed"),
        "only the 400m delta must fit: {message}"
    );
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let (gated, running) = wait_pods(&c, "elastic", "two new pods, gated", |gated, _| gated.len() == 2).await;
    assert_eq!(running.len(), 2, "the old slice's pods keep running");
    for p in &gated {
        let held = wait_for(
            &pods,
            p.metadata.name.as_deref().unwrap(),
            "held by its gate",
            |p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c.type_ == "PodScheduled" && c.reason.as_deref() == Some("SchedulingGated")
                        })
                    })
            },
        )
        .await;
        assert_eq!(phase(&held), "Pending");
    }
    let j = jobs.get("elastic").await.unwrap();
    assert_eq!(
        j.spec.as_ref().unwrap().suspend,
        Some(false),
        "the Job is not suspended while its new slice waits"
    );
    assert_eq!(
        cq_cpu(&cqs.get("cq").await.unwrap()),
        1000,
        "the blocker and the old slice hold the quota"
    );

    // The blocker goes: the delta fits, the slice is admitted and its pods are let through.
    allowed.store(4, Ordering::SeqCst);
    jobs.delete("blocker", &DeleteParams::background()).await.unwrap();
    wait_for(
        &c.workloads(),
        all[1].metadata.name.as_deref().unwrap(),
        "admitted",
        |w: &Workload| w.is_admitted(),
    )
    .await;
    wait_for(&jobs, "elastic", "four pods ready", |j| {
        j.status.as_ref().and_then(|s| s.ready) == Some(4)
    })
    .await;
    let (gated, running) = pods_of(&c, "elastic").await;
    assert_eq!((gated.len(), running.len()), (0, 4));
    wait_for(&cqs, "cq", "800m reserved", |q| cq_cpu(q) == 800).await;
    assert!(
        !checker.is_finished(),
        "the pod watch saw every event without a violation"
    );
    checker.abort();
    c.quota.assert_safe();
}
