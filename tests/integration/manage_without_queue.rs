//! Kueue's `manageJobsWithoutQueueName` and `managedJobsNamespaceSelector`, and its LocalQueueDefaulting,
//! on the embedded cluster with its Job controller and node agent: a Job with no queue name in a
//! selected namespace is created suspended and gets a Workload with no queue, which waits; naming a
//! queue moves the Workload there and it runs; a namespace the selector leaves out is not Kueue's; a
//! `default` LocalQueue is named for a Job that names none.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use quotagate::api::kueue::config::{Frameworks, ManagedJobs, managed_jobs};
use quotagate::api::kueue::constants::{condition, label};
use quotagate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Workload};
use quotagate::api::pod as p;
use quotagate::embedded::{EmbeddedServer, QuotagateAdmission};
use quotagate::jobframework::names::NameLength;
use quotagate::jobframework::workload::workload_name_for_job;
use quotagate::jobs::batch::BatchJob;

use crate::support::*;

fn managed() -> ManagedJobs {
    ManagedJobs {
        without_queue_name: true,
        namespace_selector: managed_jobs::parse_selector(&serde_json::json!({"matchExpressions": [
            {"key": managed_jobs::NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": ["unmanaged-ns"]}]}))
        .unwrap(),
        ..ManagedJobs::default()
    }
}

fn frameworks() -> Frameworks {
    Frameworks {
        pod: true,
        ..Frameworks::default()
    }
}

fn job(ns: &str, name: &str, command: &[&str]) -> Job {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox", "command": command, "resources": {"requests": {"cpu": "1"}}}]}}}
    }))
    .unwrap()
}

/// The server and manager under the switches, the Job controller and node agent, a flavor, a
/// ClusterQueue for every namespace, LocalQueue `lq` in `default`, and the namespaces `unmanaged-ns`
/// and `team`.
async fn cluster() -> (Cluster, tokio_util::sync::DropGuard) {
    let admission = QuotagateAdmission {
        frameworks: frameworks(),
        managed: managed(),
        ..Default::default()
    };
    let server = EmbeddedServer::new(&quotagate::api::all_crds(), Arc::new(admission));
    let mut c = Cluster::start_on(server, Limits::default().cq("cq", 2000)).await;
    c.restart_manager_with(|o| {
        o.frameworks = frameworks();
        o.managed_jobs = managed();
    })
    .await;
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
    c.cluster_queue(with_all_namespaces(
        ClusterQueue::build("cq")
            .flavor("on-demand", [("cpu", "4")])
            .build(),
    ))
    .await;
    c.local_queue("lq", "cq").await;
    let nss: Api<Namespace> = Api::all(c.client.clone());
    for ns in ["unmanaged-ns", "team"] {
        nss.create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    }
    (c, cancel.drop_guard())
}

fn suspended(j: &Job) -> Option<bool> {
    j.spec.as_ref().and_then(|s| s.suspend)
}

fn complete(j: &Job) -> bool {
    j.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Complete" && c.status == "True"))
}

/// Kueue: test/integration/singlecluster/controller/jobs/job/job_controller_test.go (its manager runs
/// with `WithManageJobsWithoutQueueName(true)` and a selector excluding `unmanaged-ns`), "Should
/// reconcile workload and job for all jobs": the Job is suspended, its Workload is created with no
/// `.spec.queueName` and owned by the Job, and is "updated with queue name when the job does"; then it
/// is admitted with the flavor's node selector and finishes when the Job completes (here by running).
/// The waiting Workload says why as Kueue's workload controller does ("LocalQueue  doesn't exist").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_without_a_queue_name_is_held_until_it_names_one() {
    let (c, _sims) = cluster().await;
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let wls = c.workloads();

    let created = jobs
        .create(
            &PostParams::default(),
            &job("default", "no-queue", &["sleep", "1"]),
        )
        .await
        .unwrap();
    assert_eq!(
        suspended(&created),
        Some(true),
        "suspended on create although it names no queue"
    );
    let wl_name = workload_name_for_job(&BatchJob::new(created.clone()), NameLength::Long).unwrap();
    let held = wait_for(&wls, &wl_name, "held with no queue", |w: &Workload| {
        condition(w, condition::QUOTA_RESERVED)
            .is_some_and(|(s, _, m)| s == "False" && m == "LocalQueue  doesn't exist")
    })
    .await;
    assert_eq!(held.spec.queue_name, None, "the Workload has no queue");
    let owner = held
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.first())
        .unwrap();
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Job", created.metadata.uid.as_deref().unwrap(), Some(true))
    );
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let job_pods = ListParams::default().labels("batch.kubernetes.io/job-name=no-queue");
    assert!(
        pods.list(&job_pods).await.unwrap().items.is_empty(),
        "no pod while it waits"
    );

    let named = serde_json::json!({"metadata": {"labels": {label::QUEUE_NAME: "lq"}}});
    jobs.patch("no-queue", &PatchParams::default(), &Patch::Merge(&named))
        .await
        .unwrap();
    wait_for(
        &wls,
        &wl_name,
        "moved to the queue the Job names",
        |w: &Workload| w.spec.queue_name.as_deref() == Some("lq"),
    )
    .await;
    let running = wait_for(&jobs, "no-queue", "unsuspended", |j| suspended(j) == Some(false)).await;
    let selector = running
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
    assert_eq!(selector["instance"], "on-demand");
    wait_for(&jobs, "no-queue", "complete", complete).await;
    wait_for(&wls, &wl_name, "finished", |w: &Workload| w.is_finished()).await;
}

/// Kueue: jobframework/defaults_test.go TestWorkloadShouldBeSuspended "job without queue name with
/// manageJobs in unmanaged ns", and the reconciler's "Job is in a namespace not matched by the
/// ManagedJobsNamespaceSelector, ignoring": the Job runs on its own and gets no Workload. And
/// jobframework/defaults.go ApplyDefaultLocalQueue: in a namespace with a LocalQueue `default`, a Job
/// naming no queue is given that one, and runs under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unselected_namespaces_are_left_alone_and_the_default_queue_is_named() {
    let (c, _sims) = cluster().await;
    let outside: Api<Job> = Api::namespaced(c.client.clone(), "unmanaged-ns");
    let created = outside
        .create(
            &PostParams::default(),
            &job("unmanaged-ns", "free", &["sleep", "1"]),
        )
        .await
        .unwrap();
    assert_ne!(suspended(&created), Some(true), "not Kueue's: created as written");
    wait_for(&outside, "free", "complete on its own", complete).await;
    let wls: Api<Workload> = Api::namespaced(c.client.clone(), "unmanaged-ns");
    assert!(
        wls.list(&ListParams::default()).await.unwrap().items.is_empty(),
        "no Workload for it"
    );

    let lqs: Api<LocalQueue> = Api::namespaced(c.client.clone(), "team");
    lqs.create(
        &PostParams::default(),
        &LocalQueue::build("default", "team").cluster_queue("cq").build(),
    )
    .await
    .unwrap();
    let team: Api<Job> = Api::namespaced(c.client.clone(), "team");
    let created = team
        .create(&PostParams::default(), &job("team", "defaulted", &["sleep", "1"]))
        .await
        .unwrap();
    assert_eq!(
        created.metadata.labels.as_ref().unwrap()[label::QUEUE_NAME],
        "default"
    );
    assert_eq!(suspended(&created), Some(true));
    wait_for(&team, "defaulted", "complete under the default queue", complete).await;
    let wl = workload_name_for_job(&BatchJob::new(created), NameLength::Long).unwrap();
    let wls: Api<Workload> = Api::namespaced(c.client.clone(), "team");
    let finished = wait_for(&wls, &wl, "finished", |w: &Workload| w.is_finished()).await;
    assert_eq!(finished.spec.queue_name.as_deref(), Some("default"));
}

/// Kueue: pkg/controller/jobs/pod/pod_webhook.go `Default` (a Pod outside the
/// managedJobsNamespaceSelector is left alone; inside it, `WorkloadShouldBeSuspended` decides, which
/// under manageJobsWithoutQueueName takes a Pod with no queue name): a Pod naming no queue in a
/// selected namespace is gated and managed; one in `unmanaged-ns` is left as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_without_a_queue_name_are_gated_where_the_selector_says() {
    let (c, _sims) = cluster().await;
    let pod = |ns: &str| -> Pod {
        serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "30"], "resources": {"requests": {"cpu": "1"}}}]}}))
        .unwrap()
    };
    let managed_pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let gated = managed_pods
        .create(&PostParams::default(), &pod("default"))
        .await
        .unwrap();
    assert!(
        p::is_gated(&gated) && p::is_managed(&gated.metadata),
        "gated and managed with no queue name"
    );
    let free: Api<Pod> = Api::namespaced(c.client.clone(), "unmanaged-ns");
    let plain = free
        .create(&PostParams::default(), &pod("unmanaged-ns"))
        .await
        .unwrap();
    assert!(!p::is_gated(&plain) && !p::is_managed(&plain.metadata));
}

/// The server (admission under the switches), the manager and the Ray operator, both under the
/// switches, a ClusterQueue for every namespace, LocalQueue `lq` in `default`, and `unmanaged-ns`.
async fn ray_cluster() -> Cluster {
    let admission = QuotagateAdmission {
        managed: managed(),
        ..Default::default()
    };
    let server = EmbeddedServer::new(&quotagate::api::all_crds(), Arc::new(admission));
    let mut c = Cluster::start_with_ray_on(server, Limits::default().cq("cq", 4000)).await;
    c.restart_manager_with(|o| o.managed_jobs = managed()).await;
    c.flavor("on-demand").await;
    // (A worker's init container, which waits for the head, asks for memory too.)
    c.cluster_queue(with_all_namespaces(
        ClusterQueue::build("cq")
            .flavor("on-demand", [("cpu", "4"), ("memory", "4Gi")])
            .build(),
    ))
    .await;
    c.local_queue("lq", "cq").await;
    let nss: Api<Namespace> = Api::all(c.client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(serde_json::json!({"metadata": {"name": "unmanaged-ns"}})).unwrap(),
    )
    .await
    .unwrap();
    c
}

/// A RayCluster naming no queue, written unsuspended: a 1-CPU head and one 1-CPU worker.
fn unqueued_ray_cluster(ns: &str) -> quotagate::api::ray::RayCluster {
    let mut rc = queued_ray_cluster("rc", serde_json::json!({}));
    rc.metadata.namespace = Some(ns.into());
    rc.metadata.labels = None;
    rc.spec.suspend = Some(false);
    rc
}

/// Kueue: test/integration/singlecluster/controller/jobs/raycluster/raycluster_controller_test.go, whose
/// manager runs with `WithManageJobsWithoutQueueName(true)` and a selector excluding `unmanaged-ns`,
/// "Should reconcile RayClusters": a cluster created unsuspended with no queue name is suspended, its
/// Workload is created with no `.spec.queueName` and owned by it, and takes the queue name when the
/// cluster does; then (here) it is admitted and the cluster runs. Before that the quota gate, which
/// decides "managed" as the job reconciler does, lets no pod of it be created, even when its user
/// unsuspends it by hand (checked at every pod event). In `unmanaged-ns` the same cluster runs as
/// written, with no Workload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ray_cluster_without_a_queue_name_is_held_until_it_names_one() {
    use quotagate::api::ray::RayCluster;
    use quotagate::api::ray::constants::LABEL_CLUSTER;
    let c = ray_cluster().await;
    let rcs: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let admitted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (seen, watch_pods) = (admitted.clone(), pods.clone());
    let checker = tokio::spawn(async move {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let stream = watcher(
            watch_pods,
            watcher::Config::default().labels(&format!("{LABEL_CLUSTER}=rc")),
        )
        .default_backoff()
        .applied_objects();
        futures::pin_mut!(stream);
        while let Some(Ok(p)) = stream.next().await {
            assert!(
                seen.load(std::sync::atomic::Ordering::SeqCst),
                "a pod before admission: {:?}",
                p.metadata.name
            );
        }
    });

    let created = rcs
        .create(&PostParams::default(), &unqueued_ray_cluster("default"))
        .await
        .unwrap();
    assert_eq!(
        created.spec.suspend,
        Some(true),
        "suspended on create although it names no queue"
    );
    let uid = created.metadata.uid.clone().unwrap();
    let wls = c.workloads();
    let by_uid = kube::runtime::watcher::Config::default().labels(&format!("{}={uid}", label::JOB_UID));
    let held =
        crate::elastic_jobs::on_every_event(wls.clone(), by_uid, "the cluster's Workload, held", || async {
            let list = wls
                .list(&ListParams::default().labels(&format!("{}={uid}", label::JOB_UID)))
                .await
                .unwrap()
                .items;
            list.into_iter()
                .find(|w| condition(w, condition::QUOTA_RESERVED).is_some_and(|(s, _, _)| s == "False"))
        })
        .await;
    assert_eq!(held.spec.queue_name, None, "the Workload has no queue");
    let owner = held
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.first())
        .unwrap();
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("RayCluster", uid.as_str(), Some(true))
    );

    // Its user unsuspends it by hand: suspended again, and no pod meanwhile.
    let resume = serde_json::json!({"spec": {"suspend": false}});
    rcs.patch("rc", &PatchParams::default(), &Patch::Merge(&resume))
        .await
        .unwrap();
    wait_for(&rcs, "rc", "suspended again", |r| r.spec.suspend == Some(true)).await;
    assert!(
        pods.list(&ListParams::default().labels(&format!("{LABEL_CLUSTER}=rc")))
            .await
            .unwrap()
            .items
            .is_empty()
    );

    admitted.store(true, std::sync::atomic::Ordering::SeqCst);
    let named = serde_json::json!({"metadata": {"labels": {label::QUEUE_NAME: "lq"}}});
    rcs.patch("rc", &PatchParams::default(), &Patch::Merge(&named))
        .await
        .unwrap();
    let name = held.metadata.name.clone().unwrap();
    wait_for(
        &wls,
        &name,
        "moved to the queue the cluster names, and admitted",
        |w: &Workload| w.spec.queue_name.as_deref() == Some("lq") && w.is_admitted(),
    )
    .await;
    wait_for(&rcs, "rc", "running", |r| {
        r.spec.suspend == Some(false) && r.status.as_ref().and_then(|s| s.ready_worker_replicas) == Some(1)
    })
    .await;
    assert!(!checker.is_finished(), "no pod was created before admission");
    checker.abort();

    let outside: Api<RayCluster> = Api::namespaced(c.client.clone(), "unmanaged-ns");
    let free = outside
        .create(&PostParams::default(), &unqueued_ray_cluster("unmanaged-ns"))
        .await
        .unwrap();
    assert_eq!(free.spec.suspend, Some(false), "not Kueue's: created as written");
    wait_for(&outside, "rc", "running on its own", |r| {
        r.status.as_ref().and_then(|s| s.ready_worker_replicas) == Some(1)
    })
    .await;
    let wls: Api<Workload> = Api::namespaced(c.client.clone(), "unmanaged-ns");
    assert!(
        wls.list(&ListParams::default()).await.unwrap().items.is_empty(),
        "no Workload for it"
    );
    c.quota.assert_safe();
}
