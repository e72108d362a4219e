//! MultiKueue for plain Pods and pod groups, with the embedded clusters of `multikueue` (a manager
//! and two workers on loopback TCP, each with its own kubeconfig), every cluster with the pod webhook
//! and the `pod` framework on, the workers with the simulated node agent. The manager's Pods stay
//! gated (they never run there); their copies run on the worker that admitted the Workload, and the
//! copies' status comes back. Also the lost worker with a Pod, the evictions counter it moves, and
//! the garbage collector removing an orphaned group's Pods from a worker.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use quotagate::api::kueue::config::{Frameworks, PodsReadyConfig};
use quotagate::api::kueue::constants::{condition, label};
use quotagate::api::kueue::multikueue::ORIGIN_LABEL;
use quotagate::api::kueue::{CheckState, ClusterQueue, ResourceFlavor, Workload};
use quotagate::api::pod as p;
use quotagate::embedded::{EmbeddedServer, QuotagateAdmission};
use quotagate::jobframework::names::NameLength;
use quotagate::jobframework::workload::workload_name_for_job;
use quotagate::jobs::pod::PodJob;
use quotagate::wiring::manager::MultiKueueSettings;
use tokio_util::sync::CancellationToken;

use crate::multikueue::{
    Worker, break_connection, mk_settings, record_workload_names, register, restore_connection,
};
use crate::support::*;

fn frameworks() -> Frameworks {
    Frameworks {
        pod: true,
        ..Frameworks::default()
    }
}

/// A server whose webhook gates queue-labelled Pods (the pod framework on).
fn pod_server() -> Arc<EmbeddedServer> {
    EmbeddedServer::new(
        &quotagate::api::all_crds(),
        Arc::new(QuotagateAdmission {
            frameworks: frameworks(),
            ..Default::default()
        }),
    )
}

/// A worker as `multikueue::worker`, with the pod webhook and framework: flavor `on-demand`,
/// ClusterQueue `cq` of `cpu`, LocalQueue `lq`, the simulated node agent.
async fn pod_worker(name: &str, cpu: &str, milli: i64) -> Worker {
    let mut cluster = Cluster::start_on(pod_server(), Limits::default().cq("cq", milli)).await;
    cluster
        .restart_manager_with(|o| o.frameworks = frameworks())
        .await;
    let sims = CancellationToken::new();
    quotagate::embedded::sim::spawn(
        cluster.client.clone(),
        &quotagate::embedded::sim::SimConfig {
            gateway: None,
            endpoints: false,
            ..Default::default()
        },
        sims.clone(),
    );
    Api::<ResourceFlavor>::all(cluster.client.clone())
        .create(
            &PostParams::default(),
            &ResourceFlavor::build("on-demand")
                .node_label("instance", "on-demand")
                .build(),
        )
        .await
        .unwrap();
    cluster
        .cluster_queue(with_all_namespaces(
            ClusterQueue::build("cq")
                .flavor("on-demand", [("cpu", cpu)])
                .build(),
        ))
        .await;
    cluster.local_queue("lq", "cq").await;
    Worker::serve(cluster, name, Some(sims)).await
}

/// The manager: the pod webhook and framework, MultiKueue with `settings` (its `/metrics` on `health`
/// when given), flavor `on-demand`, ClusterQueue `cq` (2 cpu) with the check `mk`, LocalQueue `lq`;
/// no node agent (nothing may run here).
async fn pod_manager(settings: MultiKueueSettings, health: Option<std::net::SocketAddr>) -> Cluster {
    pod_manager_with(settings, health, None).await
}

/// [`pod_manager`], with waitForPodsReady when `pods_ready` is given.
async fn pod_manager_with(
    settings: MultiKueueSettings,
    health: Option<std::net::SocketAddr>,
    pods_ready: Option<PodsReadyConfig>,
) -> Cluster {
    let mut m = Cluster::start_on(pod_server(), Limits::default().cq("cq", 2000)).await;
    m.restart_manager_with(|o| {
        o.frameworks = frameworks();
        o.multikueue = Some(settings);
        o.health_addr = health;
        o.pods_ready = pods_ready;
    })
    .await;
    Api::<ResourceFlavor>::all(m.client.clone())
        .create(
            &PostParams::default(),
            &ResourceFlavor::build("on-demand").build(),
        )
        .await
        .unwrap();
    m.cluster_queue(with_all_namespaces(
        ClusterQueue::build("cq")
            .flavor("on-demand", [("cpu", "2")])
            .admission_check("mk", &[])
            .build(),
    ))
    .await;
    m.local_queue("lq", "cq").await;
    m
}

/// A queue-labelled Pod of `cpu` sleeping `secs` seconds, in a group of `n` when given.
fn pod(name: &str, cpu: &str, secs: u32, group: Option<(&str, i32)>) -> Pod {
    let mut labels = serde_json::json!({label::QUEUE_NAME: "lq"});
    let mut annotations = serde_json::json!({});
    if let Some((g, n)) = group {
        labels[p::GROUP_NAME_LABEL] = g.into();
        annotations[p::GROUP_TOTAL_COUNT_ANNOTATION] = n.to_string().into();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox", "command": ["sleep", secs.to_string()],
                "resources": {"requests": {"cpu": cpu}}}]}
    }))
    .unwrap()
}

fn phase(x: &Pod) -> &str {
    x.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

fn pod_scheduled(x: &Pod) -> Option<String> {
    x.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| c.status.clone())
}

fn check_ready(w: &Workload) -> bool {
    w.status.as_ref().is_some_and(|s| {
        s.admission_checks
            .iter()
            .any(|a| a.name == "mk" && a.state == CheckState::Ready)
    })
}

fn admitted_on(w: &Workload) -> Option<String> {
    w.status.as_ref()?.cluster_name.clone()
}

/// Waits until the Pod is gone or being deleted (a running copy takes its grace period to go).
async fn wait_going(api: &Api<Pod>, name: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match api.get_opt(name).await.unwrap() {
            None => return,
            Some(x) if x.metadata.deletion_timestamp.is_some() => return,
            Some(_) if tokio::time::Instant::now() > deadline => panic!("{name} was not deleted"),
            Some(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Kueue: test/integration/multikueue/pod_test.go, "Should create a pod on worker if admitted": the
/// manager's Workload is copied to both workers; worker1 admits it (worker2's quota is too small), the
/// check turns Ready with `The workload was admitted on "worker1"` and worker2's copy is removed; the
/// Pod is created on worker1 with the prebuilt-workload and origin labels
/// (pkg/controller/jobs/pod/pod_multikueue_adapter.go, "sync creates missing remote pod") and runs
/// there; the worker's status comes back ("sync status from remote pod": Running, then Succeeded,
/// with the worker's `PodScheduled=True` once it is scheduled); the manager's Workload finishes and the
/// remote Workload and Pod are deleted (`waitForWorkloadToFinishAndRemoteWorkloadToBeDeleted`). The
/// manager's Pod is never ungated (Kueue's `ShouldSkipLocalExecution` in the reconciler's `startJob`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_runs_on_the_worker_that_admits_it_and_stays_gated_on_the_manager() {
    let w1 = pod_worker("worker1", "2", 2000).await;
    let w2 = pod_worker("worker2", "500m", 500).await;
    let m = pod_manager(mk_settings(), None).await;
    register(&m, &[("worker1", &w1), ("worker2", &w2)], &["worker1", "worker2"]).await;
    let seen_on_w2 = record_workload_names(w2.cluster.client.clone()).await;

    let pods: Api<Pod> = Api::namespaced(m.client.clone(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("pod1", "1", 6, None))
        .await
        .unwrap();
    assert!(p::is_gated(&created), "created gated by the manager's webhook");
    let wl_name = workload_name_for_job(&PodJob::new(created), NameLength::Long).unwrap();

    let wl = wait_for(&m.workloads(), &wl_name, "check mk Ready", check_ready).await;
    let acs = wl
        .status
        .as_ref()
        .unwrap()
        .admission_checks
        .iter()
        .find(|a| a.name == "mk")
        .unwrap();
    assert_eq!(acs.message, r#"The workload was admitted on "worker1""#);
    assert_eq!(admitted_on(&wl).as_deref(), Some("worker1"));
    wait_gone(&w2.cluster.workloads(), &wl_name).await;
    assert!(
        seen_on_w2.lock().unwrap().contains(&wl_name),
        "worker2 never got a copy"
    );

    // worker1 runs the copy, labelled for the manager's Workload; worker2 has no Pod.
    let w1_pods: Api<Pod> = Api::namespaced(w1.cluster.client.clone(), "default");
    let copy = wait_for(&w1_pods, "pod1", "ungated and running on worker1", |x| {
        !p::is_gated(x) && phase(x) == "Running"
    })
    .await;
    assert_eq!(copy.labels().get(label::PREBUILT_WORKLOAD_NAME), Some(&wl_name));
    assert_eq!(
        copy.labels().get(ORIGIN_LABEL).map(String::as_str),
        Some("multikueue")
    );
    assert!(
        Api::<Pod>::namespaced(w2.cluster.client.clone(), "default")
            .get_opt("pod1")
            .await
            .unwrap()
            .is_none(),
        "no Pod on the loser"
    );

    // The manager's Pod mirrors the copy, and stays gated.
    let running = wait_for(&pods, "pod1", "Running mirrored", |x| phase(x) == "Running").await;
    assert!(p::is_gated(&running), "the manager's Pod is never ungated");
    assert_eq!(pod_scheduled(&running).as_deref(), Some("True"));
    let done = wait_for(&pods, "pod1", "Succeeded mirrored", |x| phase(x) == "Succeeded").await;
    assert!(p::is_gated(&done), "the manager's Pod is never ungated");

    let finished = wait_for(&m.workloads(), &wl_name, "finished", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.condition_true(condition::FINISHED))
    })
    .await;
    assert_eq!(
        crate::support::condition(&finished, condition::FINISHED).map(|(_, r, _)| r),
        Some("Succeeded".to_string())
    );
    wait_gone(&w1.cluster.workloads(), &wl_name).await;
    wait_going(&w1_pods, "pod1").await;
    m.quota.assert_safe();
    w1.cluster.quota.assert_safe();
    w2.cluster.quota.assert_safe();
}

/// Kueue: test/integration/multikueue/pod_test.go, "Should create a pod group on worker if admitted":
/// the group's one Workload (named after the group) is copied to both workers, worker1 admits it
/// (worker2's quota is too small for the group), every Pod of the group is created on worker1 with the
/// prebuilt-workload label naming the group's Workload (pod_multikueue_adapter_test.go "sync creates
/// missing remote pods of the group"), runs there, and each Pod's status comes back ("sync status from
/// remote pod group"); the manager's Workload finishes once all succeeded, and the worker's Workload and
/// Pods are removed ("remote pod group is deleted"). No Pod of the group is ungated on the manager.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_runs_on_the_worker_that_admits_it_and_reports_back() {
    let w1 = pod_worker("worker1", "2", 2000).await;
    let w2 = pod_worker("worker2", "500m", 500).await;
    let m = pod_manager(mk_settings(), None).await;
    register(&m, &[("worker1", &w1), ("worker2", &w2)], &["worker1", "worker2"]).await;

    let pods: Api<Pod> = Api::namespaced(m.client.clone(), "default");
    let members = ["grp-a", "grp-b"];
    for name in members {
        pods.create(&PostParams::default(), &pod(name, "500m", 6, Some(("grp", 2))))
            .await
            .unwrap();
    }
    let wl = wait_for(&m.workloads(), "grp", "check mk Ready", check_ready).await;
    assert_eq!(admitted_on(&wl).as_deref(), Some("worker1"));
    assert_eq!(wl.spec.pod_sets.iter().map(|s| s.count()).sum::<i32>(), 2);
    wait_gone(&w2.cluster.workloads(), "grp").await;

    let w1_pods: Api<Pod> = Api::namespaced(w1.cluster.client.clone(), "default");
    for name in members {
        let copy = wait_for(&w1_pods, name, "ungated on worker1", |x| !p::is_gated(x)).await;
        assert_eq!(
            copy.labels()
                .get(label::PREBUILT_WORKLOAD_NAME)
                .map(String::as_str),
            Some("grp")
        );
        assert_eq!(
            copy.labels().get(p::GROUP_NAME_LABEL).map(String::as_str),
            Some("grp")
        );
    }
    for name in members {
        let done = wait_for(&pods, name, "Succeeded mirrored", |x| phase(x) == "Succeeded").await;
        assert!(p::is_gated(&done), "{name} was ungated on the manager");
    }
    wait_for(&m.workloads(), "grp", "finished", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.condition_true(condition::FINISHED))
    })
    .await;
    wait_gone(&w1.cluster.workloads(), "grp").await;
    for name in members {
        wait_going(&w1_pods, name).await;
    }
    m.quota.assert_safe();
    w1.cluster.quota.assert_safe();
}

/// Kueue: test/integration/multikueue/jobs_test.go, "Should requeue the workload with a delay when the
/// connection to the admitting worker is lost", for a Pod: the worker running the copy is cut off; after
/// `workerLostTimeout` (4 s here) the check goes to Retry ("Admitting remote lost"), the Workload is
/// evicted, the manager's Pod (still gated) stops mirroring the lost copy so the quota is given back,
/// and the Workload is admitted again and its Pod runs on the other worker. The manager's
/// `multikueue_workloads_evicted_total` counts the loss once (reason `WorkerLost`, the lost worker).
/// Then the manager's Pod is deleted and its copy on the worker goes too (Kueue's
/// `DeleteRemoteObject`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_worker_requeues_its_pod_and_the_evictions_counter_moves() {
    let timeout = Duration::from_secs(4);
    let w1 = pod_worker("worker1", "2", 2000).await;
    let w2 = pod_worker("worker2", "2", 2000).await;
    let health = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut settings = mk_settings();
    settings.worker_lost_timeout = timeout;
    let m = pod_manager(settings, Some(health)).await;
    register(&m, &[("worker1", &w1), ("worker2", &w2)], &["worker1", "worker2"]).await;

    let pods: Api<Pod> = Api::namespaced(m.client.clone(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("pod1", "1", 300, None))
        .await
        .unwrap();
    let wl_name = workload_name_for_job(&PodJob::new(created), NameLength::Long).unwrap();
    let ready = wait_for(&m.workloads(), &wl_name, "admitted on a worker", check_ready).await;
    let lost = admitted_on(&ready).unwrap();
    let (dead, other, alive) = if lost == "worker1" {
        (&w1, "worker2", &w2)
    } else {
        (&w2, "worker1", &w1)
    };
    wait_for(
        &Api::<Pod>::namespaced(dead.cluster.client.clone(), "default"),
        "pod1",
        "running on the winner",
        |x| phase(x) == "Running",
    )
    .await;
    wait_for(&pods, "pod1", "Running mirrored", |x| phase(x) == "Running").await;

    dead.serving.cancel();
    let evicted = wait_for(&m.workloads(), &wl_name, "evicted for the lost worker", |w| {
        w.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == condition::EVICTED && c.reason == "AdmissionCheck")
        })
    })
    .await;
    let (_, _, msg) = crate::support::condition(&evicted, condition::EVICTED).unwrap();
    assert!(
        msg.contains(r#"Admitting remote lost, Previously: "Ready""#),
        "{msg}"
    );
    wait_for(
        &m.workloads(),
        &wl_name,
        "admitted again, on the other worker",
        |w| {
            check_ready(w)
                && admitted_on(w).as_deref() == Some(other)
                && w.status
                    .as_ref()
                    .is_some_and(|s| s.condition_true(condition::ADMITTED))
        },
    )
    .await;
    wait_for(
        &Api::<Pod>::namespaced(alive.cluster.client.clone(), "default"),
        "pod1",
        "running on the other worker",
        |x| !p::is_gated(x) && phase(x) == "Running",
    )
    .await;
    let mirrored = wait_for(&pods, "pod1", "Running mirrored again", |x| phase(x) == "Running").await;
    assert!(p::is_gated(&mirrored), "the manager's Pod is never ungated");

    let series = format!(
        r#"multikueue_workloads_evicted_total{{cluster_queue="cq",cluster="{lost}",reason="WorkerLost",replica_role="standalone"}} 1"#
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    let text = loop {
        let text = scrape(health).await;
        if text.lines().any(|l| l == series) || tokio::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    for l in text.lines().filter(|l| l.starts_with("multikueue_workloads")) {
        println!("metrics: {l}");
    }
    assert!(
        text.lines().any(|l| l == series),
        "missing {series} in /metrics:\n{text}"
    );
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("multikueue_workloads_evicted_total")
                && l.contains(&format!("cluster=\"{other}\""))),
        "nothing was evicted from {other}:\n{text}"
    );

    // The manager's Pod is deleted: its copy on the worker goes too.
    pods.delete("pod1", &DeleteParams::default()).await.unwrap();
    wait_going(
        &Api::<Pod>::namespaced(alive.cluster.client.clone(), "default"),
        "pod1",
    )
    .await;
    m.quota.assert_safe();
    alive.cluster.quota.assert_safe();
}

/// Kueue: test/integration/multikueue/jobs_test.go, "Should remove the worker's workload and job after
/// reconnect when the managers job and workload are deleted", for a pod group (and `remoteClient.runGC`
/// in multikueuecluster.go, which removes a copy's job through its controller owner). In Kueue a
/// group's copy on the worker has no controller: each of its Pods owns it, so Kueue's collector removes
/// only the Workload; quotagate's removes every owning Pod through the Pod adapter too. The worker's own
/// pod integration also stops Pods whose Workload is gone, so this test passes with either (a run with
/// the collector limited to controllers passed too): it checks the end state, and
/// `multikueue::gc::tests` check the collector's choice. Here: the group runs on worker1, its copy
/// owned by both Pods in Kueue's shape (no controller), the connection is cut (its kubeconfig broken, as Kueue's
/// `BreakConnection`), the manager's Pods and Workload are removed (their finalizers dropped: the
/// manager cannot reach the copies they mirror), the copies stay while the worker is unreachable;
/// once it is back, the collector (every 1 s here) removes the Workload and both Pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_garbage_collector_removes_an_orphaned_groups_pods() {
    let w1 = pod_worker("worker1", "2", 2000).await;
    let mut settings = mk_settings();
    settings.gc_interval = Duration::from_secs(1);
    let m = pod_manager(settings, None).await;
    register(&m, &[("worker1", &w1)], &["worker1"]).await;

    let pods: Api<Pod> = Api::namespaced(m.client.clone(), "default");
    let members = ["orph-a", "orph-b"];
    for name in members {
        pods.create(&PostParams::default(), &pod(name, "500m", 300, Some(("orph", 2))))
            .await
            .unwrap();
    }
    wait_for(&m.workloads(), "orph", "check mk Ready", check_ready).await;
    let w1_pods: Api<Pod> = Api::namespaced(w1.cluster.client.clone(), "default");
    for name in members {
        wait_for(&w1_pods, name, "running on worker1", |x| phase(x) == "Running").await;
    }
    let copy = wait_for(&w1.cluster.workloads(), "orph", "owned by its Pods", |w| {
        w.owner_references().len() == 2
    })
    .await;
    // Kueue's shape of a group's copy (`EnsureWorkloadOwnedByAllMembers`): each Pod an owner, none
    // the controller (a real API server allows one controller only), so the collector cannot find
    // the Pods through a controller.
    assert!(
        copy.owner_references()
            .iter()
            .all(|o| o.kind == "Pod" && o.controller != Some(true)),
        "{:?}",
        copy.owner_references()
    );

    // BreakConnection: the kubeconfig names no server that answers; the cluster reconnects.
    let good = break_connection(&m, "worker1", &w1).await;
    // Any collection pass begun while the worker was connected has ended.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // The manager's Pods and Workload go (deleted first: a finalizer cannot come back after).
    let no_finalizers = serde_json::json!({"metadata": {"finalizers": null}});
    for name in members {
        let _ = pods.delete(name, &DeleteParams::default()).await;
        let _ = pods
            .patch(name, &PatchParams::default(), &Patch::Merge(&no_finalizers))
            .await;
    }
    for name in members {
        wait_gone(&pods, name).await;
    }
    let _ = m.workloads().delete("orph", &DeleteParams::default()).await;
    let _ = m
        .workloads()
        .patch("orph", &PatchParams::default(), &Patch::Merge(&no_finalizers))
        .await;
    wait_gone(&m.workloads(), "orph").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        w1.cluster.workloads().get_opt("orph").await.unwrap().is_some(),
        "the copy stays while the worker is unreachable"
    );
    for name in members {
        let x = w1_pods.get(name).await.unwrap();
        assert!(
            x.metadata.deletion_timestamp.is_none(),
            "{name} stays while the worker is unreachable"
        );
    }

    // The connection comes back: the collector removes the copy and every Pod of the group.
    restore_connection(&m, "worker1", &w1, good).await;
    wait_gone(&w1.cluster.workloads(), "orph").await;
    for name in members {
        wait_going(&w1_pods, name).await;
    }
    w1.cluster.quota.assert_safe();
}

/// waitForPodsReady on the manager, for a single Pod MultiKueue runs on a worker: Kueue's reconciler
/// updates the Workload's PodsReady condition (pkg/controller/jobframework/reconciler.go, before
/// `startJob`, where `ShouldSkipLocalExecution` skips the local start) from the job's pods, here the
/// manager's gated Pod carrying the status mirrored from its copy. So the manager's Workload turns
/// `PodsReady=True` once the copy runs Ready on the worker, while the manager's Pod stays gated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_run_on_a_worker_makes_its_workload_pods_ready_on_the_manager() {
    let w1 = pod_worker("worker1", "2", 2000).await;
    let m = pod_manager_with(
        mk_settings(),
        None,
        Some(PodsReadyConfig::with_timeout(Duration::from_secs(300))),
    )
    .await;
    register(&m, &[("worker1", &w1)], &["worker1"]).await;

    let pods: Api<Pod> = Api::namespaced(m.client.clone(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("ready1", "500m", 60, None))
        .await
        .unwrap();
    let wl_name = workload_name_for_job(&PodJob::new(created), NameLength::Long).unwrap();
    wait_for(&m.workloads(), &wl_name, "check mk Ready", check_ready).await;
    let running = wait_for(&pods, "ready1", "Ready mirrored from worker1", |x| {
        phase(x) == "Running" && quotagate::jobs::pod::ready(x)
    })
    .await;
    assert!(p::is_gated(&running), "the manager's Pod is never ungated");
    let wl = wait_for(&m.workloads(), &wl_name, "PodsReady=True on the manager", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.condition_true(condition::PODS_READY))
    })
    .await;
    assert!(wl.is_admitted(), "{:?}", wl.status);
    pods.delete("ready1", &DeleteParams::default()).await.unwrap();
    wait_going(
        &Api::<Pod>::namespaced(w1.cluster.client.clone(), "default"),
        "ready1",
    )
    .await;
    m.quota.assert_safe();
}
