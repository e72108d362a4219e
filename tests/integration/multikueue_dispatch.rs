//! MultiKueue's dispatchers, the lost worker and the garbage collector, with the embedded clusters of
//! `multikueue` (a manager and workers on loopback TCP, each with its own kubeconfig; the setup is
//! shared from there).

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use quotagate::api::kueue::constants::condition;
use quotagate::api::kueue::multikueue::ORIGIN_LABEL;
use quotagate::api::kueue::{AdmissionCheckState, CheckState, Workload};
use quotagate::multikueue::Dispatcher;

use crate::multikueue::{
    break_connection, managed_job, manager, mk_settings, register, restore_connection, worker,
};
use crate::support::*;

fn check(w: &Workload) -> Option<&AdmissionCheckState> {
    w.status
        .as_ref()?
        .admission_checks
        .iter()
        .find(|a| a.name == "mk")
}

fn nominated(w: &Workload) -> Vec<String> {
    w.status
        .as_ref()
        .map(|s| s.nominated_cluster_names.clone())
        .unwrap_or_default()
}

fn cluster_name(w: &Workload) -> Option<String> {
    w.status.as_ref()?.cluster_name.clone()
}

/// Kueue: test/integration/multikueue/dispatcher_test.go, "MultiKueueDispatcherIncremental" / "Should
/// run a job on worker if admitted (ManagedBy)", with the rounds of
/// pkg/controller/workloaddispatcher/incrementaldispatcher.go made visible: a step of 1
/// (`incrementalDispatcherConfig.stepSize`) and a 4 s round. The first round nominates worker1 only
/// (the config's order) and only it gets a copy; worker1's quota is too small, so after the round
/// worker2 is nominated too (the earlier nomination kept) and gets a copy; worker2 admits it: worker1's
/// copy is removed, `clusterName` is worker2 and the nominations are cleared. Then the check is set
/// `Rejected` and, the Workload evicted, `clusterName` and `nominatedClusterNames` are reset and the
/// copy on worker2 is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_incremental_dispatcher_nominates_a_step_of_workers_each_round() {
    let w1 = worker("worker1", "500m", 500).await;
    let w2 = worker("worker2", "2", 2000).await;
    let mut settings = mk_settings();
    settings.dispatcher = Dispatcher::Incremental { step: 1 };
    settings.round_timeout = Duration::from_secs(4);
    let m = manager(settings, None).await;
    register(&m, &[("worker1", &w1), ("worker2", &w2)], &["worker1", "worker2"]).await;
    let wl_name = managed_job(&m, "job", 300).await;
    let first = wait_for(&m.workloads(), &wl_name, "worker1 nominated", |w| {
        !nominated(w).is_empty()
    })
    .await;
    assert_eq!(nominated(&first), vec!["worker1".to_string()]);
    wait_for(&w1.cluster.workloads(), &wl_name, "the copy on worker1", |_| true).await;
    assert!(
        w2.cluster.workloads().get_opt(&wl_name).await.unwrap().is_none(),
        "worker2 is not nominated in the first round"
    );

    let first_seen = Instant::now();
    let second = wait_for(&m.workloads(), &wl_name, "the second round", |w| {
        nominated(w).len() == 2
    })
    .await;
    let round = first_seen.elapsed();
    assert_eq!(
        nominated(&second),
        vec!["worker1".to_string(), "worker2".to_string()]
    );
    assert!(
        round >= Duration::from_secs(3),
        "the second round came {round:?} after the first (round 4 s)"
    );
    println!(
        "incremental: worker1 nominated, then worker2 {:.1}s later (round 4s)",
        round.as_secs_f64()
    );
    let ready = wait_for(&m.workloads(), &wl_name, "admitted on worker2", |w| {
        check(w).is_some_and(|c| c.state == CheckState::Ready)
    })
    .await;
    assert_eq!(
        check(&ready).unwrap().message,
        r#"The workload was admitted on "worker2""#
    );
    assert_eq!(cluster_name(&ready).as_deref(), Some("worker2"));
    assert!(nominated(&ready).is_empty(), "{:?}", nominated(&ready));
    wait_gone(&w1.cluster.workloads(), &wl_name).await;
    wait_for(
        &Api::<Job>::namespaced(w2.cluster.client.clone(), "default"),
        "job",
        "running on worker2",
        |j| j.spec.as_ref().unwrap().suspend == Some(false),
    )
    .await;

    // "setting the check conditions for eviction": Rejected resets the nomination.
    let mut tries = 0;
    loop {
        let mut wl = m.workloads().get(&wl_name).await.unwrap();
        let st = wl.status.as_mut().unwrap();
        let acs = st.admission_checks.iter_mut().find(|a| a.name == "mk").unwrap();
        acs.state = CheckState::Rejected;
        acs.message = "check rejected".into();
        match m
            .workloads()
            .replace_status(&wl_name, &PostParams::default(), &wl)
            .await
        {
            Ok(_) => break,
            Err(kube::Error::Api(e)) if e.code == 409 && tries < 20 => tries += 1,
            Err(e) => panic!("rejecting the check: {e}"),
        }
    }
    wait_for(&m.workloads(), &wl_name, "nomination reset", |w| {
        cluster_name(w).is_none() && nominated(w).is_empty()
    })
    .await;
    wait_gone(&w2.cluster.workloads(), &wl_name).await;
    m.quota.assert_safe();
    w1.cluster.quota.assert_safe();
    w2.cluster.quota.assert_safe();
}

/// Kueue: test/integration/multikueue/jobs_test.go, "Should requeue the workload with a delay when the
/// connection to the admitting worker is lost" and "Should not immediately evict but eventually retry
/// admitted workloads ... while the admitting worker is unreachable" (pkg/controller/admissionchecks/
/// multikueue/workload.go, step 6a): the worker that admitted the job is killed (its server stops);
/// for `workerLostTimeout` (4 s here) the Workload stays admitted there; then the check is set to
/// `Retry` with "Admitting remote lost", the Workload is evicted for it and requeued (the check back to
/// Pending with `retryCount` 1), admitted again, and dispatched to the other worker, where the job runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_worker_requeues_its_workload_after_the_worker_lost_timeout() {
    let timeout = Duration::from_secs(4);
    let w1 = worker("worker1", "2", 2000).await;
    let w2 = worker("worker2", "2", 2000).await;
    let mut settings = mk_settings();
    settings.worker_lost_timeout = timeout;
    let m = manager(settings, None).await;
    register(&m, &[("worker1", &w1), ("worker2", &w2)], &["worker1", "worker2"]).await;
    let wl_name = managed_job(&m, "job", 300).await;

    let ready = wait_for(&m.workloads(), &wl_name, "admitted on a worker", |w| {
        check(w).is_some_and(|c| c.state == CheckState::Ready)
    })
    .await;
    let lost = cluster_name(&ready).unwrap();
    let (dead, other) = if lost == "worker1" {
        (&w1, "worker2")
    } else {
        (&w2, "worker1")
    };
    wait_for(
        &Api::<Job>::namespaced(dead.cluster.client.clone(), "default"),
        "job",
        "running on the winner",
        |j| j.spec.as_ref().unwrap().suspend == Some(false),
    )
    .await;

    dead.serving.cancel();
    let killed = Instant::now();
    // Kueue's `expectNoEviction` for part of the grace: still admitted on the lost worker.
    tokio::time::sleep(timeout / 2).await;
    let during = m.workloads().get(&wl_name).await.unwrap();
    assert_eq!(check(&during).map(|c| c.state), Some(CheckState::Ready));
    assert_eq!(cluster_name(&during).as_deref(), Some(lost.as_str()));
    assert!(
        during
            .status
            .as_ref()
            .unwrap()
            .condition_true(condition::ADMITTED),
        "not evicted within workerLostTimeout"
    );

    let evicted = wait_for(&m.workloads(), &wl_name, "evicted for the lost worker", |w| {
        w.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == condition::EVICTED && c.reason == "AdmissionCheck")
        })
    })
    .await;
    let after = killed.elapsed();
    assert!(
        after >= timeout,
        "requeued {after:?} after the kill, before {timeout:?}"
    );
    let cond = evicted
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == condition::EVICTED)
        .unwrap();
    assert!(
        cond.message
            .contains(r#"Admitting remote lost, Previously: "Ready""#),
        "{}",
        cond.message
    );

    let again = wait_for(&m.workloads(), &wl_name, "admitted on the other worker", |w| {
        check(w).is_some_and(|c| c.state == CheckState::Ready) && cluster_name(w).as_deref() == Some(other)
    })
    .await;
    assert_eq!(check(&again).unwrap().retry_count, Some(1));
    assert_eq!(
        check(&again).unwrap().message,
        format!("The workload was admitted on {other:?}")
    );
    let alive = if other == "worker1" { &w1 } else { &w2 };
    wait_for(
        &Api::<Job>::namespaced(alive.cluster.client.clone(), "default"),
        "job",
        "running on the other worker",
        |j| j.spec.as_ref().unwrap().suspend == Some(false),
    )
    .await;
    println!(
        "lost worker {lost}: evicted {:.1}s after the kill (workerLostTimeout {}s), running on {other}",
        after.as_secs_f64(),
        timeout.as_secs()
    );
    m.quota.assert_safe();
    alive.cluster.quota.assert_safe();
}

/// Kueue: test/integration/multikueue/jobs_test.go, "Should remove the worker's workload and job after
/// reconnect when the managers job and workload are deleted" (and `remoteClient.runGC` in
/// multikueuecluster.go): the worker is cut off (its kubeconfig broken, as Kueue's `BreakConnection`),
/// the manager's Job and Workload are deleted, the worker's copies stay; once the connection is back,
/// the garbage collector (every 1 s here) removes the Workload and its Job. A Workload labelled with
/// another manager's origin is never touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_garbage_collector_removes_copies_whose_workload_is_gone() {
    let w1 = worker("worker1", "2", 2000).await;
    let mut settings = mk_settings();
    settings.gc_interval = Duration::from_secs(1);
    let m = manager(settings, None).await;
    register(&m, &[("worker1", &w1)], &["worker1"]).await;
    let wl_name = managed_job(&m, "job", 300).await;
    wait_for(&m.workloads(), &wl_name, "admitted on worker1", |w| {
        check(w).is_some_and(|c| c.state == CheckState::Ready)
    })
    .await;
    let remote_jobs: Api<Job> = Api::namespaced(w1.cluster.client.clone(), "default");
    wait_for(&remote_jobs, "job", "running on worker1", |j| {
        j.spec.as_ref().unwrap().suspend == Some(false)
    })
    .await;
    // Another manager's copy on the same worker.
    let foreign: Workload = serde_json::from_value(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "foreign", "namespace": "default", "labels": {ORIGIN_LABEL: "other-manager"}},
        "spec": {"queueName": "no-such-queue", "podSets": [{"name": "main", "count": 1,
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}
    }))
    .unwrap();
    w1.cluster
        .workloads()
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();

    // BreakConnection: the kubeconfig names no server that answers; the cluster reconnects.
    let good = break_connection(&m, "worker1", &w1).await;

    // The manager's Job and Workload are deleted, after any collection pass begun while the worker
    // was connected (whose client, unlike a dead worker's, still answers) has ended.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    Api::<Job>::namespaced(m.client.clone(), "default")
        .delete("job", &DeleteParams::background())
        .await
        .unwrap();
    let _ = m.workloads().delete(&wl_name, &DeleteParams::default()).await;
    wait_gone(&m.workloads(), &wl_name).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        w1.cluster.workloads().get_opt(&wl_name).await.unwrap().is_some(),
        "the copy stays while the worker is unreachable"
    );
    assert!(remote_jobs.get_opt("job").await.unwrap().is_some());

    // The connection comes back: the collector removes the copy and its job.
    restore_connection(&m, "worker1", &w1, good).await;
    wait_gone(&w1.cluster.workloads(), &wl_name).await;
    wait_gone(&remote_jobs, "job").await;
    // Two more collections: another manager's copy is still there.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let kept = w1.cluster.workloads().get("foreign").await.unwrap();
    assert_eq!(kept.labels()[ORIGIN_LABEL], "other-manager");
    w1.cluster.quota.assert_safe();
}
