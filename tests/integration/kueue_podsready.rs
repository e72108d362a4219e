//! waitForPodsReady on the embedded cluster with the real manager: Kueue's
//! `test/integration/singlecluster/scheduler/podsready/scheduler_test.go`, with plain Workloads whose
//! PodsReady condition the test writes (as Kueue's test does), and one RayCluster whose pods never
//! become ready. Timeouts are short, as Kueue's tests use them. (No job owns a plain Workload, so
//! Kueue's `FinishEvictionForWorkloads` step is what the admission loop does by itself here.)

use std::time::Duration;

use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use quotagate::api::kueue::config::PodsReadyConfig;
use quotagate::api::kueue::constants::{condition, reason};
use quotagate::api::kueue::{ClusterQueue, Workload};

use crate::support::*;

/// These tests measure real timeouts of a second or two: run side by side on a small machine, each
/// would starve the others' managers past those windows. One at a time keeps them exact.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Kueue's suite setup: `prod-cq` and `dev-cq`, 5 cpu each in cohort `all`, with LocalQueues
/// `prod-queue` and `dev-queue`; the manager runs with this waitForPodsReady.
async fn start(cfg: PodsReadyConfig) -> Cluster {
    let mut c = Cluster::start(Limits::default().group(&["prod-cq", "dev-cq"], 10_000)).await;
    use_config(&mut c, cfg).await;
    c.flavor("default").await;
    for name in ["prod-cq", "dev-cq"] {
        c.cluster_queue(with_all_namespaces(
            ClusterQueue::build(name)
                .cohort("all")
                .flavor("default", [("cpu", "5")])
                .build(),
        ))
        .await;
    }
    c.local_queue("prod-queue", "prod-cq").await;
    c.local_queue("dev-queue", "dev-cq").await;
    c
}

/// Restarts the cluster's manager with waitForPodsReady on.
async fn use_config(c: &mut Cluster, cfg: PodsReadyConfig) {
    use_config_serving(c, cfg, None).await;
}

/// As [`use_config`], serving `/metrics` on `health` when given.
async fn use_config_serving(c: &mut Cluster, cfg: PodsReadyConfig, health: Option<std::net::SocketAddr>) {
    c.restart_manager_with(|o| {
        o.pods_ready = Some(cfg);
        o.health_addr = health;
    })
    .await;
}

/// The settings of Kueue's suite: blockAdmission, backoff base 1 s.
fn suite(timeout: Duration, limit: Option<i32>) -> PodsReadyConfig {
    PodsReadyConfig {
        block_admission: true,
        backoff_limit_count: limit,
        backoff_base_seconds: 1,
        ..PodsReadyConfig::with_timeout(timeout)
    }
}

async fn create(c: &Cluster, name: &str, lq: &str, priority: i32, cpu: &str) {
    c.workload(name, lq, priority, cpu).await;
}

async fn reserved_in(c: &Cluster, name: &str, cq: &str) -> Workload {
    wait_for(&c.workloads(), name, &format!("quota reserved in {cq}"), |w| {
        reserved(w) && w.admission().is_some_and(|a| a.cluster_queue == cq)
    })
    .await
}

/// Kueue's `ExpectWorkloadsToBeWaiting`: QuotaReserved=False, waiting for the others' pods.
async fn waiting(c: &Cluster, name: &str) -> Workload {
    wait_for(&c.workloads(), name, "waiting for PodsReady", |w| {
        !reserved(w)
            && condition(w, condition::QUOTA_RESERVED).is_some_and(|q| {
                q.0 == "False"
                    && q.1 == reason::WAITING_FOR_PODS_READY
                    && q.2 == "waiting for all admitted workloads to be in PodsReady condition"
            })
    })
    .await
}

/// Writes PodsReady=True with `why`, as Kueue's test does with `SetStatusCondition` + status update.
async fn set_pods_ready(c: &Cluster, name: &str, why: &str) {
    let api = c.workloads();
    for _ in 0..50 {
        let mut w = api.get(name).await.unwrap();
        let s = w.status.get_or_insert_with(Default::default);
        quotagate::api::conditions::set(
            &mut s.conditions,
            quotagate::api::conditions::new(
                condition::PODS_READY,
                true,
                why,
                "",
                None,
                jiff::Timestamp::now(),
            ),
        );
        match api.replace_status(name, &PostParams::default(), &w).await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => panic!("{e}"),
        }
    }
    panic!("could not write PodsReady on {name}");
}

/// Kueue's `AwaitWorkloadEvictionByPodsReadyTimeout`, then the requeue count it left.
async fn evicted_by_timeout(c: &Cluster, name: &str, count: i32) -> Workload {
    let w = wait_for(
        &c.workloads(),
        name,
        &format!("evicted by the PodsReady timeout, requeue count {count}"),
        |w| {
            condition(w, condition::EVICTED)
                .is_some_and(|e| e.0 == "True" && e.1 == reason::PODS_READY_TIMEOUT)
                && w.status
                    .as_ref()
                    .and_then(|s| s.requeue_state.as_ref())
                    .and_then(|r| r.count)
                    == Some(count)
        },
    )
    .await;
    assert_eq!(
        condition(&w, condition::EVICTED).unwrap().2,
        format!("Exceeded the PodsReady timeout default/{name}")
    );
    w
}

/// "Long PodsReady timeout": "Should unblock admission of new workloads in other ClusterQueues once
/// the admitted workload exceeds timeout" — both variants, PodsReady=True written with the legacy
/// reason `PodsReady` and with `Started`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_workload_unblocks_admission_in_other_cluster_queues() {
    let _serial = SERIAL.lock().await;
    for why in ["PodsReady", reason::STARTED] {
        let c = start(suite(Duration::from_secs(45), None)).await;
        create(&c, "prod-wl", "prod-queue", 0, "2").await;
        reserved_in(&c, "prod-wl", "prod-cq").await;
        create(&c, "dev-wl", "dev-queue", 0, "2").await;
        waiting(&c, "dev-wl").await;
        set_pods_ready(&c, "prod-wl", why).await;
        reserved_in(&c, "dev-wl", "dev-cq").await;
        c.quota.assert_safe();
    }
}

/// "Long PodsReady timeout": "Should unblock admission of new workloads once the admitted workload
/// is deleted".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_admitted_workload_unblocks_admission() {
    let _serial = SERIAL.lock().await;
    let c = start(suite(Duration::from_secs(45), None)).await;
    create(&c, "prod-wl", "prod-queue", 0, "2").await;
    reserved_in(&c, "prod-wl", "prod-cq").await;
    create(&c, "dev-wl", "dev-queue", 0, "2").await;
    waiting(&c, "dev-wl").await;
    c.workloads()
        .delete("prod-wl", &DeleteParams::default())
        .await
        .unwrap();
    reserved_in(&c, "dev-wl", "dev-cq").await;
}

/// "Long PodsReady timeout": "Should block admission of one new workload if two are considered in
/// the same scheduling cycle": both fit once their ClusterQueue exists, the first created is admitted
/// and the other waits for its pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_one_of_two_in_the_same_cycle_is_admitted() {
    let _serial = SERIAL.lock().await;
    let c = start(suite(Duration::from_secs(45), None)).await;
    create(&c, "prod-wl", "prod-queue", 0, "11").await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    create(&c, "dev-wl", "dev-queue", 0, "11").await;
    for n in ["prod-wl", "dev-wl"] {
        wait_for(&c.workloads(), n, "pending", |w| {
            condition(w, condition::QUOTA_RESERVED).is_some_and(|q| q.0 == "False")
        })
        .await;
    }
    // Its quota is what lets either of them borrow enough (Kueue's test-cq: 25 cpu, no borrowing).
    let q = ClusterQueue::build("test-cq")
        .cohort("all")
        .flavor("default", [("cpu", "25")])
        .build();
    c.cluster_queue(with_all_namespaces(q)).await;
    reserved_in(&c, "prod-wl", "prod-cq").await;
    waiting(&c, "dev-wl").await;
}

/// "Short PodsReady timeout": "Should requeue a workload which exceeded the timeout to reach
/// PodsReady=True": evicted with PodsReadyTimeout, requeueState count 1 with a requeueAt, and the
/// next workload admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_workload_is_requeued_with_backoff() {
    let _serial = SERIAL.lock().await;
    let c = start(suite(Duration::from_secs(1), Some(2))).await;
    create(&c, "prod1", "prod-queue", 100, "2").await;
    create(&c, "prod2", "prod-queue", 0, "2").await;
    reserved_in(&c, "prod1", "prod-cq").await;
    waiting(&c, "prod2").await;
    let w = evicted_by_timeout(&c, "prod1", 1).await;
    assert!(
        w.status
            .as_ref()
            .unwrap()
            .requeue_state
            .as_ref()
            .unwrap()
            .requeue_at
            .is_some()
    );
    reserved_in(&c, "prod2", "prod-cq").await;
    let p1 = wait_for(&c.workloads(), "prod1", "released", |w| !reserved(w)).await;
    assert_eq!(
        condition(&p1, condition::REQUEUED).map(|r| (r.0, r.1)),
        Some(("False".into(), reason::PODS_READY_TIMEOUT.into())),
        "pending by backoff"
    );
}

/// "Short PodsReady timeout": "Should re-admit a timed out workload and deactivate a workload
/// exceeded the re-queue count limit. After that re-activating a workload".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeued_then_deactivated_past_the_limit_then_reactivated() {
    let _serial = SERIAL.lock().await;
    let c = start(suite(Duration::from_secs(1), Some(2))).await;
    let api = c.workloads();
    create(&c, "prod", "prod-queue", 0, "2").await;
    reserved_in(&c, "prod", "prod-cq").await;
    evicted_by_timeout(&c, "prod", 1).await;
    wait_for(&api, "prod", "re-admitted", |w| reserved(w) && w.is_admitted()).await;
    evicted_by_timeout(&c, "prod", 2).await;
    wait_for(&api, "prod", "re-admitted twice", |w| {
        reserved(w) && w.is_admitted() && condition(w, condition::EVICTED).is_some_and(|e| e.0 == "False")
    })
    .await;
    let w = wait_for(&api, "prod", "deactivated", |w| {
        w.spec.active == Some(false)
            && !reserved(w)
            && condition(w, condition::EVICTED).is_some_and(|e| e.0 == "True" && e.1 == reason::DEACTIVATED)
    })
    .await;
    assert_eq!(
        w.status.as_ref().unwrap().requeue_state,
        None,
        "the requeue history ends"
    );
    assert_eq!(
        condition(&w, condition::EVICTED).unwrap().2,
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    );
    assert!(
        condition(&w, condition::DEACTIVATION_TARGET).is_none(),
        "the mark is removed"
    );
    api.patch(
        "prod",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"active": true}})),
    )
    .await
    .unwrap();
    wait_for(&api, "prod", "re-admitted after reactivation", |w| {
        reserved(w) && w.is_admitted()
    })
    .await;
    evicted_by_timeout(&c, "prod", 1).await;
}

/// "Tiny PodsReady timeout": "Should unblock admission of new workloads in other ClusterQueues once
/// the admitted workload exceeds timeout": the ClusterQueue's usage is freed and the other queue's
/// workload admitted; the evicted one waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_unblocks_the_other_cluster_queue() {
    let _serial = SERIAL.lock().await;
    let c = start(suite(Duration::from_millis(500), Some(2))).await;
    create(&c, "prod", "prod-queue", 0, "2").await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    create(&c, "dev", "dev-queue", 0, "2").await;
    reserved_in(&c, "prod", "prod-cq").await;
    reserved_in(&c, "dev", "dev-cq").await;
    let prod = c.workloads().get("prod").await.unwrap();
    assert!(!reserved(&prod) || prod.status.as_ref().unwrap().requeue_state.is_some());
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    wait_for(&cqs, "prod-cq", "usage freed", |q| {
        q.status.as_ref().is_some_and(|s| s.reserving_workloads == 0)
    })
    .await;
}

/// "Should move the evicted workload at the end of the queue" (the `Eviction` requeuing timestamp):
/// three 5-cpu workloads that all time out are admitted in a circle, each evicted one behind those
/// created before its eviction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_evicted_workload_goes_to_the_end_of_the_queue() {
    let _serial = SERIAL.lock().await;
    let c = start(suite(Duration::from_secs(2), Some(2))).await;
    for n in ["prod1", "prod2", "prod3"] {
        create(&c, n, "eviction-lq", 0, "5").await;
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    c.local_queue("eviction-lq", "prod-cq").await;
    let api = c.workloads();
    let holds = |n: &'static str| move |w: &Workload| w.metadata.name.as_deref() == Some(n) && reserved(w);
    wait_for(&api, "prod1", "admitted first", holds("prod1")).await;
    wait_for(&api, "prod2", "admitted after prod1's eviction", holds("prod2")).await;
    // prod1's backoff (1 s) is over long before prod2 times out, yet it queues behind prod3: its
    // eviction came after prod3's creation.
    wait_for(&api, "prod3", "admitted third", holds("prod3")).await;
    assert_eq!(
        c.quota.admissions("default/prod1"),
        1,
        "prod1 waited behind prod3"
    );
    let p1 = wait_for(&api, "prod1", "admitted again", holds("prod1")).await;
    assert_eq!(
        p1.status.unwrap().requeue_state.unwrap().count,
        Some(1),
        "the count stays on re-admission"
    );
    for n in ["prod2", "prod3"] {
        let w = api.get(n).await.unwrap();
        assert_eq!(
            w.status.unwrap().requeue_state.and_then(|r| r.count),
            Some(1),
            "{n}"
        );
    }
}

/// `SchedulerWithWaitForPodsReadyNonblockingMode`: "Should not block admission of one new workload if
/// two are considered in the same scheduling cycle" and "Should re-admit a timed out workload".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_blocking_mode_admits_both_and_readmits_after_a_timeout() {
    let _serial = SERIAL.lock().await;
    let c = start(PodsReadyConfig {
        block_admission: false,
        backoff_base_seconds: 1,
        ..PodsReadyConfig::with_timeout(Duration::from_secs(1))
    })
    .await;
    create(&c, "prod-wl", "prod-queue", 0, "2").await;
    create(&c, "dev-wl", "dev-queue", 0, "2").await;
    reserved_in(&c, "prod-wl", "prod-cq").await;
    reserved_in(&c, "dev-wl", "dev-cq").await;
    evicted_by_timeout(&c, "prod-wl", 1).await;
    wait_for(&c.workloads(), "prod-wl", "re-admitted", |w| {
        reserved(w) && w.is_admitted()
    })
    .await;
}

/// A queue-managed RayCluster whose worker pod fails to start.
fn failing_cluster(name: &str) -> quotagate::api::ray::RayCluster {
    queued_ray_cluster(
        name,
        serde_json::json!({quotagate::embedded::sim::node::FAIL_ANNOTATION: "true"}),
    )
}

/// A RayCluster whose worker pod fails to start never reports its pods ready: its Workload gets
/// PodsReady=False/WaitForStart, is evicted with PodsReadyTimeout when the timeout runs out, the
/// cluster is suspended and its pods removed, and the Workload waits out its backoff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raycluster_whose_pods_never_become_ready_is_evicted() {
    let _serial = SERIAL.lock().await;
    let mut c = Cluster::start_with_ray(Limits::default().cq("cq", 4000)).await;
    use_config(
        &mut c,
        PodsReadyConfig {
            backoff_base_seconds: 600,
            ..PodsReadyConfig::with_timeout(Duration::from_secs(3))
        },
    )
    .await;
    c.flavor("default").await;
    c.cluster_queue(with_all_namespaces(cq_with("cq", "4").build()))
        .await;
    c.local_queue("lq", "cq").await;
    let rcs: Api<quotagate::api::ray::RayCluster> = Api::namespaced(c.client.clone(), "default");
    rcs.create(&PostParams::default(), &failing_cluster("flaky"))
        .await
        .unwrap();
    wait_for(&rcs, "flaky", "started", |r| r.spec.suspend == Some(false)).await;
    let wl_name = loop {
        let wls = c.workloads().list(&ListParams::default()).await.unwrap().items;
        if let Some(w) = wls.iter().find(|w| reserved(w)) {
            break w.metadata.name.clone().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let w = wait_for(&c.workloads(), &wl_name, "PodsReady=False", |w| {
        condition(w, condition::PODS_READY).is_some_and(|p| p.0 == "False")
    })
    .await;
    assert_eq!(
        condition(&w, condition::PODS_READY).unwrap().1,
        reason::WAIT_FOR_START
    );
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.client.clone(), "default");
    let sel = ListParams::default().labels("ray.io/cluster=flaky");
    // The head starts, the worker fails: some pods exist while it runs.
    let mut saw_pods = false;
    for _ in 0..50 {
        if !pods.list(&sel).await.unwrap().items.is_empty() {
            saw_pods = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(saw_pods, "the cluster's pods were created");
    let w = evicted_by_timeout(&c, &wl_name, 1).await;
    assert!(w.status.unwrap().requeue_state.unwrap().requeue_at.is_some());
    wait_for(&rcs, "flaky", "suspended", |r| r.spec.suspend == Some(true)).await;
    wait_for(&c.workloads(), &wl_name, "quota released", |w| !reserved(w)).await;
    let mut left = usize::MAX;
    for _ in 0..100 {
        left = pods.list(&sel).await.unwrap().items.len();
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(left, 0, "the cluster's pods are removed");
    c.quota.assert_safe();
}

/// Kueue's "Requeuing timestamp set to Creation" setup: a 1-cpu ClusterQueue and three 1-cpu
/// workloads created a second apart; `wl-1` is admitted, times out, `wl-2` is admitted and times out,
/// and `wl-1` (earliest created, backoff over) goes before `wl-3`.
async fn creation_order(block_admission: bool) -> Cluster {
    let c = start(PodsReadyConfig {
        timestamp: quotagate::api::kueue::config::RequeuingTimestamp::Creation,
        block_admission,
        // Well past the creations (two 1.1 s gaps): wl-1 is admitted at the first and must not time
        // out before the last (Kueue: ShortTimeout + 2 s for the same reason).
        ..suite(Duration::from_secs(5), None)
    })
    .await;
    c.cluster_queue(with_all_namespaces(
        ClusterQueue::build("standalone-cq")
            .flavor("default", [("cpu", "1")])
            .build(),
    ))
    .await;
    c.local_queue("standalone-queue", "standalone-cq").await;
    for (i, n) in ["wl-1", "wl-2", "wl-3"].into_iter().enumerate() {
        if i > 0 {
            // Creation timestamps have whole seconds: a second apart orders them.
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
        create(&c, n, "standalone-queue", 0, "1").await;
    }
    reserved_in(&c, "wl-1", "standalone-cq").await;
    evicted_by_timeout(&c, "wl-1", 1).await;
    reserved_in(&c, "wl-2", "standalone-cq").await;
    evicted_by_timeout(&c, "wl-2", 1).await;
    let w1 = wait_for(&c.workloads(), "wl-1", "admitted again, before wl-3", |w| {
        reserved(w) && w.is_admitted()
    })
    .await;
    assert_eq!(w1.status.unwrap().requeue_state.unwrap().count, Some(1));
    assert_eq!(
        c.quota.admissions("default/wl-3"),
        0,
        "wl-3, created last, still waits"
    );
    c
}

/// `SchedulerWithWaitForPodsReady`, "Requeuing timestamp set to Creation": "Should prioritize
/// workloads submitted earlier".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_creation_timestamp_the_earlier_workload_goes_first() {
    let _serial = SERIAL.lock().await;
    creation_order(true).await;
}

/// `SchedulerWithWaitForPodsReadyNonblockingMode`, "Requeuing timestamp set to Creation": "Should
/// keep the evicted workload at the front of the queue", with its requeue counts: `wl-1` evicted
/// twice (count 2, `requeueAt` cleared once its backoff is over), `wl-2` once, `wl-3` never admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_blocking_with_the_creation_timestamp_keeps_the_evicted_workload_in_front() {
    let _serial = SERIAL.lock().await;
    let c = creation_order(false).await;
    let api = c.workloads();
    wait_for(&api, "wl-1", "evicted twice, backoff over", |w| {
        w.status
            .as_ref()
            .and_then(|s| s.requeue_state.as_ref())
            .is_some_and(|r| r.count == Some(2) && r.requeue_at.is_none())
    })
    .await;
    let w2 = api.get("wl-2").await.unwrap();
    assert_eq!(w2.status.unwrap().requeue_state.and_then(|r| r.count), Some(1));
    let w3 = api.get("wl-3").await.unwrap();
    assert_eq!(
        w3.status.unwrap().requeue_state,
        None,
        "wl-3 had never been admitted"
    );
}

/// The recovery timeout (Kueue's `waitForPodsReady.recoveryTimeout`, counted from the PodsReady=False
/// / WaitForRecovery transition, `workload_controller.go` admittedNotReadyWorkload): a workload that
/// was ready and lost a pod is evicted once it has not recovered in time; one that recovers is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_that_does_not_recover_in_time_is_evicted() {
    let _serial = SERIAL.lock().await;
    let c = start(PodsReadyConfig {
        recovery_timeout: Some(Duration::from_secs(1)),
        backoff_base_seconds: 600,
        ..PodsReadyConfig::with_timeout(Duration::from_secs(600))
    })
    .await;
    create(&c, "prod", "prod-queue", 0, "2").await;
    reserved_in(&c, "prod", "prod-cq").await;
    set_pods_ready(&c, "prod", reason::STARTED).await;
    // Ready for longer than the recovery timeout: nothing happens.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        reserved(&c.workloads().get("prod").await.unwrap()),
        "a ready workload stays"
    );
    let api = c.workloads();
    for _ in 0..50 {
        let mut w = api.get("prod").await.unwrap();
        let s = w.status.get_or_insert_with(Default::default);
        quotagate::api::conditions::set(
            &mut s.conditions,
            quotagate::api::conditions::new(
                condition::PODS_READY,
                false,
                reason::WAIT_FOR_RECOVERY,
                "",
                None,
                jiff::Timestamp::now(),
            ),
        );
        match api.replace_status("prod", &PostParams::default(), &w).await {
            Ok(_) => break,
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => panic!("{e}"),
        }
    }
    evicted_by_timeout(&c, "prod", 1).await;
}

/// The reserved Workload of a job, once there is one.
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

async fn ray_cluster_with(cfg: PodsReadyConfig, cpu: &str) -> Cluster {
    let mut c = Cluster::start_with_ray(Limits::default().cq("cq", 4000)).await;
    use_config(&mut c, cfg).await;
    c.flavor("default").await;
    c.cluster_queue(with_all_namespaces(cq_with("cq", cpu).build()))
        .await;
    c.local_queue("lq", "cq").await;
    c
}

/// A RayCluster whose pods all start: its Workload goes PodsReady=True/Started (Kueue's message) and
/// stays admitted past the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raycluster_whose_pods_start_reports_pods_ready() {
    let _serial = SERIAL.lock().await;
    let c = ray_cluster_with(PodsReadyConfig::with_timeout(Duration::from_secs(2)), "4").await;
    let rcs: Api<quotagate::api::ray::RayCluster> = Api::namespaced(c.client.clone(), "default");
    let mut rc = failing_cluster("healthy");
    rc.spec.worker_group_specs.as_mut().unwrap()[0].template.metadata = None;
    rcs.create(&PostParams::default(), &rc).await.unwrap();
    let name = reserved_workload(&c).await.metadata.name.unwrap();
    let w = wait_for(&c.workloads(), &name, "PodsReady=True", |w| {
        condition(w, condition::PODS_READY).is_some_and(|p| p.0 == "True")
    })
    .await;
    let p = condition(&w, condition::PODS_READY).unwrap();
    assert_eq!(
        (p.1.as_str(), p.2.as_str()),
        (
            reason::STARTED,
            "All pods reached readiness and the workload is running"
        )
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let w = c.workloads().get(&name).await.unwrap();
    assert!(
        reserved(&w) && condition(&w, condition::EVICTED).is_none(),
        "{w:?}"
    );
}

/// A RayService reports PodsReady from its `Ready` condition (Kueue's RayService integration); an
/// upgrade waiting for quota (its new cluster gated, no pods) does not make it not ready, so the
/// admitted slice is not evicted while it waits. The timeout leaves the first cluster time to serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_rayservice_upgrade_does_not_time_out_the_serving_slice() {
    let _serial = SERIAL.lock().await;
    let c = ray_cluster_with(PodsReadyConfig::with_timeout(Duration::from_secs(6)), "3").await;
    let rss: Api<quotagate::api::ray::RayService> = Api::namespaced(c.client.clone(), "default");
    rss.create(
        &PostParams::default(),
        &super::gated::service("svc", "1", "2.46.0"),
    )
    .await
    .unwrap();
    wait_for(&rss, "svc", "Ready", super::gated::ready).await;
    let name = reserved_workload(&c).await.metadata.name.unwrap();
    wait_for(&c.workloads(), &name, "PodsReady=True", |w| {
        condition(w, condition::PODS_READY).is_some_and(|p| p.0 == "True" && p.1 == reason::STARTED)
    })
    .await;
    rss.patch(
        "svc",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"rayClusterConfig": {"rayVersion": "2.47.0"}}})),
    )
    .await
    .unwrap();
    // The upgrade's slice waits for quota (2 more cpu against 3); well past the timeouts, the serving
    // slice is still ready and admitted.
    let mut slices = 0;
    for _ in 0..200 {
        slices = c
            .workloads()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len();
        if slices == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(slices, 2, "the upgrade's slice waits beside the serving one");
    tokio::time::sleep(Duration::from_secs(7)).await;
    let w = c.workloads().get(&name).await.unwrap();
    assert!(reserved(&w) && !w.is_finished(), "{w:?}");
    assert_eq!(
        condition(&w, condition::PODS_READY).map(|p| p.0),
        Some("True".into())
    );
    assert!(condition(&w, condition::EVICTED).is_none(), "{w:?}");
    let pending: Vec<Workload> = c
        .workloads()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|w| !reserved(w))
        .collect();
    assert_eq!(pending.len(), 1, "the upgrade's slice still waits for quota");
}

/// Issue 47: an upgrade whose new head never starts, with waitForPodsReady on. Kueue's RayService
/// integration reads PodsReady from the service's `Ready` condition (`rayservice_controller.go`
/// `PodsReady`), and KubeRay keeps Ready True while the active cluster serves; so the admitted
/// replacement slice is not evicted, the service is not suspended and its active cluster serves
/// throughout, two timeouts long. (Before, the broken pending cluster's pods decided, the
/// chain was evicted at the timeout and the healthy active cluster deleted with it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_rayservice_upgrade_does_not_evict_the_serving_version() {
    let _serial = SERIAL.lock().await;
    // The timeout leaves the first cluster time to serve: Ready, not Running pods, now decides.
    let c = ray_cluster_with(PodsReadyConfig::with_timeout(Duration::from_secs(6)), "6").await;
    let rss: Api<quotagate::api::ray::RayService> = Api::namespaced(c.client.clone(), "default");
    let rcs: Api<quotagate::api::ray::RayCluster> = Api::namespaced(c.client.clone(), "default");
    rss.create(
        &PostParams::default(),
        &super::gated::service("svc", "1", "2.46.0"),
    )
    .await
    .unwrap();
    let rs = wait_for(&rss, "svc", "Ready", super::gated::ready).await;
    let serving = super::gated::active(&rs).unwrap();
    let fail = quotagate::embedded::sim::node::FAIL_ANNOTATION;
    rss.patch(
        "svc",
        &PatchParams::default(),
        &Patch::Merge(
            serde_json::json!({"spec": {"rayClusterConfig": {"rayVersion": "2.47.0",
            "headGroupSpec": {"template": {"metadata": {"annotations": {fail: "true"}}}}}}}),
        ),
    )
    .await
    .unwrap();
    // The replacement slice is admitted (4 cpu of 6) and the broken head is tried.
    let rs = wait_for(&rss, "svc", "a pending cluster", |rs| {
        super::gated::pending(rs).is_some()
    })
    .await;
    let broken = super::gated::pending(&rs).unwrap();
    wait_for(&rcs, &broken, "the broken cluster ungated", |rc| {
        !quotagate::api::conditions::is_true(
            rc.status.as_ref().and_then(|s| s.conditions.as_deref()),
            "QuotaGated",
        ) && rc
            .status
            .as_ref()
            .and_then(|s| s.reason.as_deref())
            .is_some_and(|r| r.starts_with("CrashLoopBackOff"))
    })
    .await;
    // Two timeouts: every 100 ms the service is ready, unsuspended and served by the old cluster.
    for _ in 0..120 {
        let rs = rss.get("svc").await.unwrap();
        assert!(
            super::gated::ready(&rs),
            "the service stopped serving: {:?}",
            rs.status
        );
        assert_eq!(rs.spec.suspend, Some(false), "the service was suspended");
        assert_eq!(super::gated::active(&rs).as_deref(), Some(serving.as_str()));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let wls = c.workloads().list(&ListParams::default()).await.unwrap().items;
    assert!(
        wls.iter().all(|w| condition(w, condition::EVICTED).is_none()),
        "{wls:?}"
    );
    let live: Vec<&Workload> = wls.iter().filter(|w| reserved(w) && !w.is_finished()).collect();
    assert_eq!(live.len(), 1, "the replacement slice holds the chain: {wls:?}");
    assert_eq!(
        condition(live[0], condition::PODS_READY).map(|p| p.0),
        Some("True".into())
    );
    c.quota.assert_safe();
}

/// Issue 47: a RayService that never serves (its head fails) is evicted at the timeout, as Kueue
/// does it, and its Workload keeps Kueue's requeue state: the same Workload, requeue count 1 and a
/// `requeueAt` in the future, with no other slice admitted while the back-off runs (before, the
/// eviction deleted the Workload and a new one was admitted 0.05 s later, count and back-off lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rayservice_that_never_serves_is_evicted_and_keeps_its_requeue_state() {
    let _serial = SERIAL.lock().await;
    let c = ray_cluster_with(
        PodsReadyConfig {
            backoff_base_seconds: 600,
            ..PodsReadyConfig::with_timeout(Duration::from_secs(3))
        },
        "6",
    )
    .await;
    let rss: Api<quotagate::api::ray::RayService> = Api::namespaced(c.client.clone(), "default");
    let mut rs = super::gated::service("svc", "1", "2.46.0");
    let fail = quotagate::embedded::sim::node::FAIL_ANNOTATION;
    rs.spec.ray_cluster_config.head_group_spec.template.metadata =
        Some(serde_json::from_value(serde_json::json!({"annotations": {fail: "true"}})).unwrap());
    rss.create(&PostParams::default(), &rs).await.unwrap();
    let name = reserved_workload(&c).await.metadata.name.unwrap();
    let w = evicted_by_timeout(&c, &name, 1).await;
    let requeue_at = w
        .status
        .as_ref()
        .and_then(|s| s.requeue_state.as_ref())
        .and_then(|r| r.requeue_at.clone());
    assert!(requeue_at.is_some_and(|t| t.0 > jiff::Timestamp::now()), "{w:?}");
    wait_for(&rss, "svc", "suspended", |r| r.spec.suspend == Some(true)).await;
    wait_for(&c.workloads(), &name, "quota released", |w| !reserved(w)).await;
    // For 3 s: the evicted Workload is still there with its back-off, and nothing holds quota.
    for _ in 0..30 {
        let wls = c.workloads().list(&ListParams::default()).await.unwrap().items;
        let live: Vec<&Workload> = wls.iter().filter(|w| !w.is_finished()).collect();
        assert_eq!(live.len(), 1, "one Workload for the service: {wls:?}");
        assert_eq!(
            live[0].metadata.name.as_deref(),
            Some(name.as_str()),
            "the Workload was replaced"
        );
        assert!(
            !reserved(live[0]),
            "re-admitted during the back-off: {:?}",
            live[0].status
        );
        let count = live[0]
            .status
            .as_ref()
            .and_then(|s| s.requeue_state.as_ref())
            .and_then(|r| r.count);
        assert_eq!(count, Some(1));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.quota.assert_safe();
}

/// "Long PodsReady timeout": "Should emit the PodsReadyToEvictedTimeSeconds metric": a workload
/// whose pods were ready is deactivated (`spec.active: false`, so evicted with reason Deactivated);
/// Kueue's `ExpectPodsReadyToEvictedTimeSeconds(prod-cq, Deactivated, "", 1)` is one observation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pods_ready_to_evicted_time_is_observed() {
    let _serial = SERIAL.lock().await;
    let mut c = start(suite(Duration::from_secs(45), None)).await;
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    use_config_serving(&mut c, suite(Duration::from_secs(45), None), Some(addr)).await;
    create(&c, "prod-wl", "prod-queue", 0, "2").await;
    reserved_in(&c, "prod-wl", "prod-cq").await;
    set_pods_ready(&c, "prod-wl", reason::STARTED).await;
    wait_for(&c.workloads(), "prod-wl", "PodsReady", |w| {
        condition(w, condition::PODS_READY).is_some_and(|p| p.0 == "True")
    })
    .await;
    let off = serde_json::json!({"spec": {"active": false}});
    c.workloads()
        .patch("prod-wl", &PatchParams::default(), &Patch::Merge(&off))
        .await
        .unwrap();
    wait_for(&c.workloads(), "prod-wl", "evicted as deactivated", |w| {
        condition(w, condition::EVICTED).is_some_and(|e| e.0 == "True" && e.1 == reason::DEACTIVATED)
    })
    .await;
    let want = "kueue_pods_ready_to_evicted_time_seconds_count{cluster_queue=\"prod-cq\",reason=\"Deactivated\",underlying_cause=\"\"";
    // /metrics has no watch to wait on: polled, bounded.
    let mut text = String::new();
    for _ in 0..100 {
        text = scrape(addr).await;
        if text.contains(want) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let line = text
        .lines()
        .find(|l| l.starts_with(want))
        .unwrap_or_else(|| panic!("no {want} in:\n{text}"));
    assert!(line.ends_with(" 1"), "{line}");
}

/// Kueue's `reconciler.go`: when the job controller writes PodsReady=True/Started for the first time,
/// `ready_wait_time_seconds` and `admitted_until_ready_wait_time_seconds` (and their `local_queue_`
/// variants) get one observation each; a workload not ready yet gets none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_time_to_ready_is_observed_once_a_job_is_ready() {
    let _serial = SERIAL.lock().await;
    let cfg = PodsReadyConfig::with_timeout(Duration::from_secs(60));
    let mut c = ray_cluster_with(cfg.clone(), "4").await;
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    use_config_serving(&mut c, cfg, Some(addr)).await;
    let rcs: Api<quotagate::api::ray::RayCluster> = Api::namespaced(c.client.clone(), "default");
    let mut rc = failing_cluster("healthy");
    rc.spec.worker_group_specs.as_mut().unwrap()[0].template.metadata = None;
    rcs.create(&PostParams::default(), &rc).await.unwrap();
    let name = reserved_workload(&c).await.metadata.name.unwrap();
    wait_for(&c.workloads(), &name, "PodsReady=True", |w| {
        condition(w, condition::PODS_READY).is_some_and(|p| p.0 == "True")
    })
    .await;
    let wants = [
        "kueue_ready_wait_time_seconds_count{cluster_queue=\"cq\",priority_class=\"\"",
        "kueue_admitted_until_ready_wait_time_seconds_count{cluster_queue=\"cq\",priority_class=\"\"",
        "kueue_local_queue_ready_wait_time_seconds_count{name=\"lq\",namespace=\"default\",priority_class=\"\"",
        "kueue_local_queue_admitted_until_ready_wait_time_seconds_count{name=\"lq\",namespace=\"default\",priority_class=\"\"",
    ];
    let mut text = String::new();
    for _ in 0..100 {
        text = scrape(addr).await;
        if wants.iter().all(|w| text.contains(w)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for want in wants {
        let line = text
            .lines()
            .find(|l| l.starts_with(want))
            .unwrap_or_else(|| panic!("no {want} in:\n{text}"));
        assert!(line.ends_with(" 1"), "{line}");
    }
    assert!(
        !text.contains("kueue_pods_ready_to_evicted_time_seconds_count"),
        "not evicted:\n{text}"
    );
}

/// The embedded cluster with one node of 2 cpu and its scheduler (`run --embedded --nodes 1
/// --node-capacity cpu=2,memory=8Gi`), an 8-cpu queue, and the manager with waitForPodsReady's
/// 60 s timeout and `unscheduled` as its unscheduledTimeout; `pods`: the plain Pod framework on too.
async fn one_small_node(pods: bool, unscheduled: Duration) -> Cluster {
    small_node_with(
        pods,
        PodsReadyConfig {
            unscheduled_timeout: Some(unscheduled),
            backoff_base_seconds: 600,
            ..PodsReadyConfig::with_timeout(Duration::from_secs(60))
        },
    )
    .await
}

/// [`one_small_node`] with the manager's waitForPodsReady as given.
pub(crate) async fn small_node_with(pods: bool, cfg: PodsReadyConfig) -> Cluster {
    use quotagate::embedded::sim::{SimConfig, node, nodes};
    let pools = vec![nodes::NodePool::plain(
        1,
        Some(&nodes::parse_capacity("cpu=2,memory=8Gi", ',').unwrap()),
    )];
    let sims = SimConfig {
        node: Some(node::NodeAgentConfig {
            nodes: nodes::expand(&pools, "sim-node")
                .unwrap()
                .into_iter()
                .map(|(n, p)| (n, p.clone()))
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let frameworks = quotagate::api::kueue::config::Frameworks {
        pod: pods,
        ..Default::default()
    };
    let server = quotagate::embedded::EmbeddedServer::new(
        &quotagate::embedded::QuotagateCrds,
        std::sync::Arc::new(quotagate::embedded::QuotagateAdmission {
            frameworks,
            ..Default::default()
        }),
    );
    let mut c = Cluster::start_with_ray_sims(server, Limits::default().cq("cq", 8000), sims).await;
    c.restart_manager_with(|o| {
        o.pods_ready = Some(cfg);
        o.frameworks = frameworks;
    })
    .await;
    c.flavor("default").await;
    c.cluster_queue(with_all_namespaces(cq_with("cq", "8").build()))
        .await;
    c.local_queue("lq", "cq").await;
    c
}

/// Waits for the `PodScheduled=False`/`Unschedulable` pod `sel` selects: its phase and message.
async fn unschedulable_pod(c: &Cluster, sel: &str) -> (Option<String>, String) {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.client.clone(), "default");
    let params = ListParams::default().labels(sel);
    for _ in 0..200 {
        let items = pods.list(&params).await.unwrap().items;
        let found = items.into_iter().find_map(|p| {
            let s = p.status.as_ref()?;
            let c = s
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "PodScheduled")?;
            (c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
                .then(|| (s.phase.clone(), c.message.clone().unwrap_or_default()))
        });
        if let Some(f) = found {
            return f;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no Unschedulable pod for {sel:?}");
}

/// The Workload `name` of an unschedulable job: `PodsReady=False`/`WaitForScheduling` (with
/// `PodsScheduled` saying why, until the eviction resets it), then evicted by the unscheduledTimeout
/// well before the 60 s timeout, with Kueue's event, and its `PodsScheduled` reset.
async fn evicted_for_scheduling(c: &Cluster, name: &str, started: std::time::Instant) {
    let w = wait_for(&c.workloads(), name, "PodsReady=False/WaitForScheduling", |w| {
        condition(w, condition::PODS_READY).is_some_and(|p| p.1 == reason::WAIT_FOR_SCHEDULING)
    })
    .await;
    assert_eq!(
        condition(&w, condition::PODS_READY),
        cond(
            "False",
            reason::WAIT_FOR_SCHEDULING,
            "Not all pods are ready or succeeded"
        )
    );
    let scheduled = condition(&w, condition::PODS_SCHEDULED);
    assert!(
        scheduled
            == cond(
                "False",
                reason::WAIT_FOR_SCHEDULING,
                "At least one required pod is not scheduled"
            )
            || condition(&w, condition::EVICTED).is_some_and(|e| e.0 == "True"),
        "{scheduled:?}"
    );
    let w = evicted_by_timeout(c, name, 1).await;
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "evicted by the unscheduledTimeout, not the timeout ({:?})",
        started.elapsed()
    );
    assert_eq!(
        condition(&w, condition::PODS_SCHEDULED),
        cond(
            "False",
            reason::PODS_READY_TIMEOUT,
            &format!("Exceeded the PodsReady timeout default/{name}")
        )
    );
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(c.client.clone(), "default");
    let mut seen = false;
    for _ in 0..100 {
        seen = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("EvictedDueToPodsReadyTimeoutDueToWaitForScheduling")
                    && e.note.as_deref() == Some(&format!("Exceeded the PodsReady timeout default/{name}"))
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
            });
        if seen {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen, "the eviction event names WaitForScheduling");
}

/// Kueue v0.20's `waitForPodsReady.unscheduledTimeout` (KEP-13502, kueue#15402 "Implement workload
/// eviction triggering by WaitForScheduling", #15434, the tracker of #15468; the expectations of
/// `pkg/controller/core/workload_controller_test.go` "evict with the WaitForScheduling cause when the
/// unscheduledTimeout is exceeded" and of the KEP's "Eviction and requeue"), on the embedded cluster
/// with nodes with capacity (`run --embedded --nodes 1 --node-capacity cpu=2,memory=8Gi`): a
/// RayCluster whose worker asks 4 cpu fits the 8-cpu quota but no node, so the worker stays
/// Pending/`Unschedulable`; its Workload shows `PodsScheduled=False`/`WaitForScheduling` and
/// `PodsReady=False`/`WaitForScheduling`, and is evicted after the 2 s unscheduledTimeout, long before
/// the 60 s timeout: `Evicted=True`/`PodsReadyTimeout` with Kueue's message, the event
/// `EvictedDueToPodsReadyTimeoutDueToWaitForScheduling`, the PodsScheduled condition reset to the
/// eviction's reason, and the cluster suspended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unscheduled_timeout_evicts_a_workload_whose_pods_fit_no_node() {
    let _serial = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let c = one_small_node(false, Duration::from_secs(2)).await;
    let rcs: Api<quotagate::api::ray::RayCluster> = Api::namespaced(c.client.clone(), "default");
    let mut rc = queued_ray_cluster("big", serde_json::json!({}));
    let worker = &mut rc.spec.worker_group_specs.as_mut().unwrap()[0];
    worker.template.spec.as_mut().unwrap().containers[0].resources =
        Some(serde_json::from_value(serde_json::json!({"requests": {"cpu": "4"}})).unwrap());
    rcs.create(&PostParams::default(), &rc).await.unwrap();
    let name = reserved_workload(&c).await.metadata.name.unwrap();
    // The worker fits the quota but no node: Pending, Unschedulable, with kube-scheduler's message.
    let (phase, message) = unschedulable_pod(&c, "ray.io/cluster=big,ray.io/node-type=worker").await;
    assert_eq!(phase.as_deref(), Some("Pending"));
    assert!(
        message.starts_with("0/1 nodes are available: 1 Insufficient cpu."),
        "{message}"
    );
    evicted_for_scheduling(&c, &name, started).await;
    wait_for(&rcs, "big", "suspended", |r| r.spec.suspend == Some(true)).await;
    c.quota.assert_safe();
}

/// The same with the plainest job there is: a queue-labelled Pod asking 4 cpu, which its 8-cpu
/// queue admits and its 2-cpu node cannot hold. Kueue's pod integration admits it (the scheduling
/// gate lifted), it stays Pending/Unschedulable, and the unscheduledTimeout evicts its Workload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unscheduled_timeout_evicts_a_plain_pod_that_fits_no_node() {
    let _serial = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let c = one_small_node(true, Duration::from_secs(2)).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.client.clone(), "default");
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "big", "namespace": "default",
            "labels": {quotagate::api::kueue::constants::label::QUEUE_NAME: "lq", "app": "big"}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
            "resources": {"requests": {"cpu": "4"}}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let name = reserved_workload(&c).await.metadata.name.unwrap();
    let (phase, message) = unschedulable_pod(&c, "app=big").await;
    assert_eq!(phase.as_deref(), Some("Pending"));
    assert!(
        message.starts_with("0/1 nodes are available: 1 Insufficient cpu."),
        "{message}"
    );
    evicted_for_scheduling(&c, &name, started).await;
    c.quota.assert_safe();
}

/// A pod group under waitForPodsReady (Kueue's pod integration, `pod_controller.go` PodsReady with
/// #11654's total count): its Workload gets `PodsReady=True`/`Started` once its two pods run on the
/// node, and `PodsScheduled=True`/`AllRequiredPodsScheduled` with the tracking on, so it is not
/// evicted as a workload that never became ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_pod_group_reports_pods_ready() {
    let _serial = SERIAL.lock().await;
    // Pods that fit are bound at once, but a loaded machine may take seconds to do it: a timeout
    // that long asserts readiness, not the scheduler's speed.
    let c = one_small_node(true, Duration::from_secs(60)).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.client.clone(), "default");
    for name in ["g-a", "g-b"] {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                "labels": {quotagate::api::kueue::constants::label::QUEUE_NAME: "lq",
                           "kueue.x-k8s.io/pod-group-name": "g"},
                "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                "resources": {"requests": {"cpu": "500m"}}}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let w = wait_for(&c.workloads(), "g", "PodsReady=True", |w| {
        condition(w, condition::PODS_READY).is_some_and(|p| p.0 == "True")
    })
    .await;
    assert_eq!(
        condition(&w, condition::PODS_READY),
        cond(
            "True",
            reason::STARTED,
            "All pods reached readiness and the workload is running"
        )
    );
    let w = wait_for(&c.workloads(), "g", "PodsScheduled=True", |w| {
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
    assert!(condition(&w, condition::EVICTED).is_none(), "{w:?}");
    c.quota.assert_safe();
}
