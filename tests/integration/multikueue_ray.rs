//! MultiKueue for the Ray kinds, on the manager and two workers of `multikueue.rs`: each worker runs
//! quotagate with the Ray operator on simulated dashboards; the manager runs the Ray operator too, which
//! leaves the `spec.managedBy: kueue.x-k8s.io/multikueue` objects alone. worker2's ClusterQueue is too
//! small for any of the jobs here, so worker1 wins each, by its own quota.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use quotagate::api::kueue::constants::{condition, label};
use quotagate::api::kueue::multikueue::{MULTIKUEUE_CONTROLLER_NAME, ORIGIN_LABEL};
use quotagate::api::kueue::{CheckState, ClusterQueue, ResourceFlavor, Workload};
use quotagate::api::ray::rayjob::{JobDeploymentStatus, JobStatus};
use quotagate::api::ray::{RayCluster, RayJob, RayService};
use quotagate::embedded::rbac::Authorizer;
use serde_json::json;

use super::gated::{active, pending, poll, ready};
use super::invariants::Invariants;
use super::multikueue::{Worker, assert_role_used, start_manager};
use crate::support::*;

const NS: &str = "default";

/// A worker with the Ray operator on simulated dashboards (`serving`: with the simulated autoscaler
/// and load, so RayServices become Ready), ClusterQueue `cq` of `cpu` in flavor `default`, LocalQueue `lq`.
async fn ray_worker(name: &str, cpu: &str, serving: bool) -> Worker {
    let milli = (cpu.parse::<f64>().unwrap() * 1000.0) as i64;
    let limits = Limits::default().cq("cq", milli);
    let c = if serving {
        Cluster::start_with_ray(limits).await
    } else {
        Cluster::start_with_ray_operator(limits).await
    };
    c.simple("cq", "lq", cpu).await;
    Worker::serve(c, name, None).await
}

/// The manager (Ray operator on, ClusterQueue `cq` of 4 CPUs behind the check `mk`) and two workers:
/// worker1 with `w1_cpu`, worker2 with 1 CPU (too small for any job here).
async fn three_clusters(
    w1_cpu: &str,
    serving: bool,
) -> (Cluster, Worker, Worker, std::sync::Arc<Authorizer>) {
    let w1 = ray_worker("worker1", w1_cpu, serving).await;
    let w2 = ray_worker("worker2", "1", serving).await;
    let m = Cluster::start_with_ray_operator(Limits::default().cq("cq", 4000)).await;
    let (m, authz) = start_manager(
        m,
        ResourceFlavor::build("default").build(),
        cq_with("cq", "4"),
        &w1,
        &w2,
    )
    .await;
    (m, w1, w2, authz)
}

/// The MultiKueue grants a Ray run uses: all but the batch Job's status.
fn ray_grants() -> Vec<&'static str> {
    MULTIKUEUE_GRANTS
        .into_iter()
        .filter(|g| !g.contains("batch/"))
        .collect()
}

/// The Workload owned by the object of `uid` on the manager, once there is one.
async fn workload_of(c: &Cluster, uid: &str) -> String {
    poll("the job's Workload", || async {
        c.workloads()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|w| w.owner_references().iter().any(|o| o.uid == uid))
            .map(|w| w.name_any())
    })
    .await
}

/// Kueue's `ExpectWorkloadsToBeAdmittedAndGetWorkerName`: the check `mk` turns Ready on worker1, which
/// holds the admitted copy (with the origin label); worker2's copy is gone.
async fn admitted_on_worker1(m: &Cluster, w1: &Worker, w2: &Worker, wl: &str) -> Workload {
    let local = wait_for(&m.workloads(), wl, "check mk Ready", |w| {
        w.status.as_ref().is_some_and(|s| {
            s.admission_checks
                .iter()
                .any(|a| a.name == "mk" && a.state == CheckState::Ready)
        })
    })
    .await;
    let st = local.status.clone().unwrap();
    assert_eq!(st.cluster_name.as_deref(), Some("worker1"));
    let remote = wait_for(&w1.cluster.workloads(), wl, "admitted copy on worker1", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.condition_true(condition::ADMITTED))
    })
    .await;
    assert_eq!(remote.spec, local.spec);
    assert_eq!(
        remote.labels().get(ORIGIN_LABEL).map(String::as_str),
        Some("multikueue")
    );
    wait_gone(&w2.cluster.workloads(), wl).await;
    local
}

/// The worker's copy of a job: the prebuilt-workload and origin labels, no `managedBy`.
fn assert_copy_labels(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, wl: &str) {
    let labels = meta.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get(label::PREBUILT_WORKLOAD_NAME).map(String::as_str),
        Some(wl)
    );
    assert_eq!(labels.get(ORIGIN_LABEL).map(String::as_str), Some("multikueue"));
}

/// No pod runs on the manager: its Ray operator leaves MultiKueue's objects alone.
async fn no_pods(c: &Cluster) {
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let names: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert!(names.is_empty(), "pods on the manager: {names:?}");
}

fn ray_job(name: &str) -> RayJob {
    let container = |n: &str| json!({"name": n, "image": "rayproject/ray:2.9.0", "resources": {"requests": {"cpu": "1"}}});
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name, "namespace": NS, "labels": {label::QUEUE_NAME: "lq"}},
        "spec": {
            "managedBy": MULTIKUEUE_CONTROLLER_NAME,
            "suspend": true,
            "entrypoint": "sleep 2",
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

/// Kueue: test/integration/multikueue/kuberay_test.go and test/e2e/multikueue/extended/e2e_test.go,
/// "Should run a RayJob on worker if admitted": the Workload is admitted on a worker (check Ready,
/// `clusterName`), the worker's RayJob status is mirrored on the manager (Running, then Complete
/// with SUCCEEDED), the manager's Workload finishes, and neither worker keeps the Workload or the
/// RayJob (`waitForWorkloadToFinishAndRemoteWorkloadToBeDeleted`, `ExpectObjectToBeDeletedOnClusters`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rayjob_runs_on_the_worker_that_admits_it_and_reports_back() {
    let (m, w1, w2, authz) = three_clusters("2", false).await;
    let jobs: Api<RayJob> = Api::namespaced(m.client.clone(), NS);
    let job = jobs
        .create(&PostParams::default(), &ray_job("rayjob1"))
        .await
        .unwrap();
    let wl = workload_of(&m, job.metadata.uid.as_deref().unwrap()).await;
    admitted_on_worker1(&m, &w1, &w2, &wl).await;

    let remote_jobs: Api<RayJob> = Api::namespaced(w1.cluster.client.clone(), NS);
    let remote = wait_for(&remote_jobs, "rayjob1", "running on worker1", |j| {
        j.spec.suspend == Some(false)
    })
    .await;
    assert_copy_labels(&remote.metadata, &wl);
    assert_eq!(remote.spec.managed_by, None);
    assert!(
        Api::<RayJob>::namespaced(w2.cluster.client.clone(), NS)
            .get_opt("rayjob1")
            .await
            .unwrap()
            .is_none(),
        "no RayJob on the loser"
    );

    let deployment = |j: &RayJob| j.status.as_ref().and_then(|s| s.job_deployment_status);
    wait_for(&jobs, "rayjob1", "Running mirrored", |j| {
        deployment(j) == Some(JobDeploymentStatus::Running)
    })
    .await;
    let done = wait_for(&jobs, "rayjob1", "Complete mirrored", |j| {
        deployment(j) == Some(JobDeploymentStatus::Complete)
    })
    .await;
    assert_eq!(done.status.unwrap().job_status, Some(JobStatus::Succeeded));
    let finished = wait_for(&m.workloads(), &wl, "finished", |w| w.is_finished()).await;
    assert_eq!(
        condition(&finished, condition::FINISHED).map(|(_, r, _)| r),
        Some("Succeeded".to_string())
    );
    wait_gone(&w1.cluster.workloads(), &wl).await;
    wait_gone(&remote_jobs, "rayjob1").await;
    no_pods(&m).await;
    assert_role_used(&authz, &ray_grants());
    m.quota.assert_safe();
    w1.cluster.quota.assert_safe();
    w2.cluster.quota.assert_safe();
}

/// Kueue: test/integration/multikueue/kuberay_test.go and test/e2e/multikueue/extended/e2e_test.go,
/// "Should run a RayCluster on worker if admitted": admitted on a worker, the manager's RayCluster
/// shows the worker's `desiredWorkerReplicas`, `readyWorkerReplicas` and `availableWorkerReplicas` of
/// 1, which is the worker's whole status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raycluster_runs_on_the_worker_that_admits_it_and_reports_back() {
    let (m, w1, w2, authz) = three_clusters("2", false).await;
    let clusters: Api<RayCluster> = Api::namespaced(m.client.clone(), NS);
    let mut rc = queued_ray_cluster("raycluster1", json!({}));
    rc.spec.managed_by = Some(MULTIKUEUE_CONTROLLER_NAME.into());
    let rc = clusters.create(&PostParams::default(), &rc).await.unwrap();
    let wl = workload_of(&m, rc.metadata.uid.as_deref().unwrap()).await;
    admitted_on_worker1(&m, &w1, &w2, &wl).await;

    let remote_clusters: Api<RayCluster> = Api::namespaced(w1.cluster.client.clone(), NS);
    let remote = wait_for(&remote_clusters, "raycluster1", "on worker1", |_| true).await;
    assert_copy_labels(&remote.metadata, &wl);
    assert_eq!(remote.spec.managed_by, None);

    let local = wait_for(&clusters, "raycluster1", "worker replicas mirrored", |c| {
        c.status.as_ref().is_some_and(|s| {
            s.desired_worker_replicas == Some(1)
                && s.ready_worker_replicas == Some(1)
                && s.available_worker_replicas == Some(1)
        })
    })
    .await;
    assert_eq!(local.spec.suspend, Some(false), "admitted on the manager");
    // The whole status is the worker's (read twice: the worker's may move between the reads).
    poll("the manager's status to equal the worker's", || async {
        let here = clusters.get("raycluster1").await.unwrap().status;
        let there = remote_clusters.get("raycluster1").await.unwrap().status;
        (here.is_some() && here == there).then_some(())
    })
    .await;
    no_pods(&m).await;

    assert_role_used(&authz, &ray_grants());
    m.quota.assert_safe();
    w1.cluster.quota.assert_safe();
    w2.cluster.quota.assert_safe();
}

/// The "deleting them on the manager cleans the worker": the manager's RayCluster deleted, the
/// worker's RayCluster, its pods and the Workload copy go. The manager's Workload may be deleted and
/// its finalizer released before a pass of the MultiKueue Workload controller sees it deleting (about
/// one run in four under load before the fix): its Delete event removes the copies, as Kueue's
/// `deletedWlCache` does (`pkg/controller/admissionchecks/multikueue/workload.go`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_raycluster_on_the_manager_cleans_its_worker() {
    let (m, w1, w2, _authz) = three_clusters("2", false).await;
    let clusters: Api<RayCluster> = Api::namespaced(m.client.clone(), NS);
    let mut rc = queued_ray_cluster("raycluster1", json!({}));
    rc.spec.managed_by = Some(MULTIKUEUE_CONTROLLER_NAME.into());
    let rc = clusters.create(&PostParams::default(), &rc).await.unwrap();
    let wl = workload_of(&m, rc.metadata.uid.as_deref().unwrap()).await;
    admitted_on_worker1(&m, &w1, &w2, &wl).await;
    let remote_clusters: Api<RayCluster> = Api::namespaced(w1.cluster.client.clone(), NS);
    wait_for(&remote_clusters, "raycluster1", "running on worker1", |c| {
        c.status
            .as_ref()
            .is_some_and(|s| s.ready_worker_replicas == Some(1))
    })
    .await;

    // Deleted on the manager: the worker's RayCluster, its pods and the Workload copy go.
    clusters
        .delete("raycluster1", &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(&remote_clusters, "raycluster1").await;
    wait_gone(&w1.cluster.workloads(), &wl).await;
    let pods: Api<Pod> = Api::namespaced(w1.cluster.client.clone(), NS);
    poll("worker1's pods to go", || async {
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    wait_gone(&clusters, "raycluster1").await;
    m.quota.assert_safe();
    w1.cluster.quota.assert_safe();
    w2.cluster.quota.assert_safe();
}

/// Kueue: test/e2e/multikueue/baseline/e2e_test.go, "Should preempt a running low-priority workload
/// when a high-priority workload is admitted (same worker)": a Workload evicted on the manager while
/// its job runs on a worker has its copies removed from the workers and gives its quota back. Here
/// the eviction is a deactivation (`spec.active: false`) of a running RayCluster's Workload. The
/// manager's RayCluster, suspended, shows the status of a suspended copy (Kueue mirrors the copy its
/// worker suspended for `EvictedOnManagerCluster`), so its job controller sees it stopped and the
/// quota is released; the nomination is reset with the eviction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raycluster_evicted_on_the_manager_leaves_its_worker_and_gives_its_quota_back() {
    let (m, w1, w2, _authz) = three_clusters("2", false).await;
    let clusters: Api<RayCluster> = Api::namespaced(m.client.clone(), NS);
    let mut rc = queued_ray_cluster("raycluster1", json!({}));
    rc.spec.managed_by = Some(MULTIKUEUE_CONTROLLER_NAME.into());
    let rc = clusters.create(&PostParams::default(), &rc).await.unwrap();
    let wl = workload_of(&m, rc.metadata.uid.as_deref().unwrap()).await;
    admitted_on_worker1(&m, &w1, &w2, &wl).await;
    wait_for(&clusters, "raycluster1", "running on worker1, mirrored", |c| {
        c.status
            .as_ref()
            .is_some_and(|s| s.ready_worker_replicas == Some(1))
    })
    .await;

    m.workloads()
        .patch(
            &wl,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"active": false}})),
        )
        .await
        .unwrap();
    let remote_clusters: Api<RayCluster> = Api::namespaced(w1.cluster.client.clone(), NS);
    wait_gone(&remote_clusters, "raycluster1").await;
    wait_gone(&w1.cluster.workloads(), &wl).await;
    let released = wait_for(&m.workloads(), &wl, "quota given back", |w| {
        !w.has_quota_reservation()
    })
    .await;
    assert_eq!(
        condition(&released, condition::EVICTED).map(|(s, r, _)| (s, r)),
        Some(("True".to_string(), "Deactivated".to_string()))
    );
    let st = released.status.unwrap();
    assert_eq!(st.cluster_name, None);
    assert!(st.nominated_cluster_names.is_empty());
    let local = clusters.get("raycluster1").await.unwrap();
    assert_eq!(local.spec.suspend, Some(true));
    let s = local.status.unwrap();
    assert_eq!(
        s.state,
        Some(quotagate::api::ray::raycluster::ClusterState::Suspended)
    );
    assert_eq!(s.ready_worker_replicas, Some(0));
    assert_eq!(s.observed_generation, local.metadata.generation);
    no_pods(&m).await;
    m.quota.assert_safe();
    w1.cluster.quota.assert_safe();
    w2.cluster.quota.assert_safe();
}

/// Kueue: test/integration/multikueue/kuberay_test.go "Should forward a serveConfigV2 update to the
/// RayService on the worker if admitted" and test/e2e/multikueue/extended/e2e_test.go "Should run a
/// RayService on worker if admitted" (the manager's RayService unsuspended and Ready from the worker's
/// status; a serveConfigV2 edit reaches the worker's copy). Beyond Kueue (issue 64): the same edit
/// changes `rayClusterConfig` (a new Ray version) and `upgradeStrategy`; they reach the worker too,
/// where the worker's quotagate gates the upgrade on the worker's own ClusterQueue (the pending
/// cluster runs no pod while 3 CPUs cannot hold both clusters), the manager shows the gated pending
/// cluster, and once the worker's quota is raised the upgrade completes and the manager reports the
/// new active cluster. The manager's Workload stays the one admitted throughout, and the worker runs
/// under the invariant watcher.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rayservice_change_on_the_manager_upgrades_it_gated_on_its_worker() {
    let (m, w1, w2, authz) = three_clusters("3", true).await;
    let inv = Invariants::start(w1.cluster.client.clone());
    let services: Api<RayService> = Api::namespaced(m.client.clone(), NS);
    let mut rs = super::gated::service("rs", "1", "2.46.0");
    rs.spec.managed_by = Some(MULTIKUEUE_CONTROLLER_NAME.into());
    let rs = services.create(&PostParams::default(), &rs).await.unwrap();
    let wl = workload_of(&m, rs.metadata.uid.as_deref().unwrap()).await;
    admitted_on_worker1(&m, &w1, &w2, &wl).await;

    let remote_services: Api<RayService> = Api::namespaced(w1.cluster.client.clone(), NS);
    let remote = wait_for(&remote_services, "rs", "on worker1", |_| true).await;
    assert_copy_labels(&remote.metadata, &wl);
    assert_eq!(remote.spec.managed_by, None);
    assert_eq!(remote.spec.serve_config_v2, rs.spec.serve_config_v2);

    let poll_rs = |what: &'static str, cond: fn(&RayService) -> bool| {
        let services = services.clone();
        async move {
            poll(what, || async {
                services.get_opt("rs").await.unwrap().filter(cond)
            })
            .await
        }
    };
    let serving = poll_rs("Ready from the worker's status", |r| {
        r.spec.suspend == Some(false) && ready(r) && active(r).is_some()
    })
    .await;
    let first = active(&serving).unwrap();
    assert!(
        Api::<RayCluster>::namespaced(w1.cluster.client.clone(), NS)
            .get_opt(&first)
            .await
            .unwrap()
            .is_some(),
        "the active cluster is the worker's"
    );
    no_pods(&m).await;

    // One edit on the manager: a new serve config, a new Ray version, an explicit strategy.
    let serve2 = rs
        .spec
        .serve_config_v2
        .clone()
        .unwrap()
        .replace("num_replicas: 1", "num_replicas: 2");
    let patch = json!({"spec": {
        "serveConfigV2": serve2,
        "upgradeStrategy": {"type": "NewCluster"},
        "rayClusterConfig": {"rayVersion": "2.47.0"},
    }});
    services
        .patch("rs", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let forwarded = poll("the edit on worker1", || async {
        remote_services
            .get_opt("rs")
            .await
            .unwrap()
            .filter(|r| r.spec.ray_cluster_config.ray_version.as_deref() == Some("2.47.0"))
    })
    .await;
    assert_eq!(forwarded.spec.serve_config_v2.as_deref(), Some(serve2.as_str()));
    assert_eq!(
        forwarded.spec.upgrade_strategy,
        Some(serde_json::from_value(json!({"type": "NewCluster"})).unwrap())
    );
    assert_eq!(forwarded.spec.managed_by, None);

    // Gated on the worker: a pending cluster with no pod while worker1's 3 CPUs cannot hold both; the
    // manager's RayService shows it from the worker's status.
    let gated = poll_rs("the pending cluster mirrored", |r| pending(r).is_some()).await;
    let p = pending(&gated).unwrap();
    assert_eq!(active(&gated).as_deref(), Some(first.as_str()));
    let worker_pods: Api<Pod> = Api::namespaced(w1.cluster.client.clone(), NS);
    let pods_of = |cluster: String| {
        let worker_pods = worker_pods.clone();
        async move {
            worker_pods
                .list(&ListParams::default().labels(&format!("ray.io/cluster={cluster}")))
                .await
                .unwrap()
                .items
                .len()
        }
    };
    poll("the gate to say why on worker1", || async {
        let rc = Api::<RayCluster>::namespaced(w1.cluster.client.clone(), NS)
            .get_opt(&p)
            .await
            .unwrap()?;
        rc.status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .any(|c| c.type_ == "QuotaGated" && c.status == "True")
            .then_some(())
    })
    .await;
    assert_eq!(pods_of(p.clone()).await, 0, "a gated cluster runs no pod");
    assert!(ready(&services.get("rs").await.unwrap()), "still serving");

    // worker1's quota raised: the upgrade completes there, and the manager reports it.
    w1.cluster.quota.set_cq_limit("cq", 4000);
    let cqs: Api<ClusterQueue> = Api::all(w1.cluster.client.clone());
    let quota = json!({"spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default",
        "resources": [{"name": "cpu", "nominalQuota": "4"}, {"name": "memory", "nominalQuota": "64Gi"}]}]}]}});
    cqs.patch("cq", &PatchParams::default(), &Patch::Merge(&quota))
        .await
        .unwrap();
    let done = poll("the manager to report the new cluster", || async {
        services
            .get_opt("rs")
            .await
            .unwrap()
            .filter(|r| active(r).as_deref() == Some(p.as_str()) && pending(r).is_none() && ready(r))
    })
    .await;
    assert_eq!(active(&done).as_deref(), Some(p.as_str()));
    assert!(pods_of(p.clone()).await > 0, "the new cluster runs on worker1");
    let local = m.workloads().get(&wl).await.unwrap();
    assert!(
        local
            .status
            .as_ref()
            .is_some_and(|s| s.condition_true(condition::ADMITTED)),
        "the manager's Workload stays admitted"
    );
    no_pods(&m).await;

    inv.assert_clean();
    assert_role_used(&authz, &ray_grants());
    m.quota.assert_safe();
    w1.cluster.quota.assert_safe();
    w2.cluster.quota.assert_safe();
}

/// The Workloads on the manager owned by the object of `uid`.
async fn workloads_of(c: &Cluster, uid: &str) -> Vec<Workload> {
    c.workloads()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|w| w.owner_references().iter().any(|o| o.uid == uid))
        .collect()
}

/// Issue 64's upgrade through MultiKueue, with new requests: a worker group's CPU edited on the
/// manager. Kueue (`rayservice_controller.go` podsets from the spec, its reconciler replacing a
/// Workload whose podsets no longer match) would make a new Workload, stopping the service and
/// dispatching it again. Here the manager keeps the one Workload it admitted, the edit reaches
/// worker1, and worker1's quotagate runs it as a slice of its own Workload: gated while worker1's
/// 3 CPUs cannot hold both clusters (2 + 3), done once they can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rayservice_resource_change_on_the_manager_keeps_one_workload_there() {
    let (m, w1, w2, _authz) = three_clusters("3", true).await;
    let inv = Invariants::start(w1.cluster.client.clone());
    let services: Api<RayService> = Api::namespaced(m.client.clone(), NS);
    let mut rs = super::gated::service("rs", "1", "2.46.0");
    rs.spec.managed_by = Some(MULTIKUEUE_CONTROLLER_NAME.into());
    let rs = services.create(&PostParams::default(), &rs).await.unwrap();
    let uid = rs.metadata.uid.clone().unwrap();
    let wl = workload_of(&m, &uid).await;
    admitted_on_worker1(&m, &w1, &w2, &wl).await;
    let serving = poll("Ready from the worker's status", || async {
        services
            .get_opt("rs")
            .await
            .unwrap()
            .filter(|r| ready(r) && active(r).is_some())
    })
    .await;
    let first = active(&serving).unwrap();

    // The worker group's CPU from 1 to 2.
    let mut edited = services.get("rs").await.unwrap();
    let groups = edited
        .spec
        .ray_cluster_config
        .worker_group_specs
        .as_mut()
        .unwrap();
    let container = &mut groups[0].template.spec.as_mut().unwrap().containers[0];
    let requests = container.resources.as_mut().unwrap().requests.as_mut().unwrap();
    requests.insert(
        "cpu".into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()),
    );
    services
        .replace("rs", &PostParams::default(), &edited)
        .await
        .unwrap();
    let remote_services: Api<RayService> = Api::namespaced(w1.cluster.client.clone(), NS);
    poll("the edit on worker1", || async {
        remote_services
            .get_opt("rs")
            .await
            .unwrap()
            .filter(|r| r.spec.ray_cluster_config == edited.spec.ray_cluster_config)
    })
    .await;
    let gated = poll("the pending cluster mirrored", || async {
        services
            .get_opt("rs")
            .await
            .unwrap()
            .filter(|r| pending(r).is_some())
    })
    .await;
    let p = pending(&gated).unwrap();
    assert_eq!(active(&gated).as_deref(), Some(first.as_str()));
    let names = |ws: Vec<Workload>| ws.iter().map(|w| w.name_any()).collect::<Vec<_>>();
    assert_eq!(
        names(workloads_of(&m, &uid).await),
        vec![wl.clone()],
        "one Workload on the manager"
    );
    // The worker made the slice: its copy's chain grew there, not on the manager.
    poll("a slice on worker1", || async {
        let ws = w1
            .cluster
            .workloads()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        ws.iter()
            .any(|w| {
                w.annotations()
                    .get("kueue.x-k8s.io/workload-slice-replacement-for")
                    .is_some_and(|r| r.ends_with(&wl))
            })
            .then_some(())
    })
    .await;

    w1.cluster.quota.set_cq_limit("cq", 5000);
    let cqs: Api<ClusterQueue> = Api::all(w1.cluster.client.clone());
    let quota = json!({"spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default",
        "resources": [{"name": "cpu", "nominalQuota": "5"}, {"name": "memory", "nominalQuota": "64Gi"}]}]}]}});
    cqs.patch("cq", &PatchParams::default(), &Patch::Merge(&quota))
        .await
        .unwrap();
    poll("the manager to report the new cluster", || async {
        services
            .get_opt("rs")
            .await
            .unwrap()
            .filter(|r| active(r).as_deref() == Some(p.as_str()) && pending(r).is_none() && ready(r))
    })
    .await;
    let after = workloads_of(&m, &uid).await;
    assert_eq!(
        names(after.clone()),
        vec![wl.clone()],
        "still one Workload on the manager"
    );
    assert!(
        after[0]
            .status
            .as_ref()
            .is_some_and(|s| s.condition_true(condition::ADMITTED)),
        "the manager's Workload stays admitted"
    );
    no_pods(&m).await;
    inv.assert_clean();
    m.quota.assert_safe();
    w1.cluster.quota.assert_safe();
    w2.cluster.quota.assert_safe();
}
