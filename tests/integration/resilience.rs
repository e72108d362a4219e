//! Restarts and API faults: nothing is lost, nothing is admitted twice, quota is never exceeded.

use kube::Api;
use quotagate::embedded::WriteMatch;

use crate::support::*;

fn status_writes() -> WriteMatch {
    WriteMatch {
        verb: Some("update".into()),
        plural: Some("workloads".into()),
        name: None,
        status: Some(true),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_restart_mid_flight_converges_without_double_admission() {
    let mut c = Cluster::start(Limits::default().cq("cq", 10_000)).await;
    c.simple("cq", "lq", "10").await;
    for i in 0..15 {
        c.workload(&format!("w{i:02}"), "lq", 0, "1").await;
    }
    // Stop the manager as soon as the first admission lands, while the rest are being written.
    c.quota.wait_reserved_at_least("cq", 1).await;
    c.restart_manager("m2").await;
    c.quota.wait_reserved("cq", 10).await;
    c.restart_manager("m3").await;
    // A new manager reading the same state changes nothing.
    c.workload("late", "lq", 0, "1").await;
    let wls = c.workloads();
    wait_for(&wls, "late", "pending behind the full queue", |w| {
        condition(w, "QuotaReserved").is_some_and(|c| c.0 == "False" && c.1 == "WaitingForQuota")
    })
    .await;
    assert_eq!(c.quota.reserved_in("cq"), 10);
    assert!(
        c.quota.readmitted().is_empty(),
        "admitted twice: {:?}",
        c.quota.readmitted()
    );
    c.quota.assert_safe();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_closed_watches_and_expired_versions_lose_nothing() {
    let c = Cluster::start(Limits::default().cq("cq", 6_000)).await;
    c.simple("cq", "lq", "6").await;
    let faults = &c.server.store.faults;
    for n in [1, 2, 4, 7] {
        faults.fail_nth_write_409(status_writes(), n);
    }
    faults.fail_nth_write_500(status_writes(), 9);
    for i in 0..5 {
        c.workload(&format!("w{i}"), "lq", 0, "1").await;
    }
    c.server.store.close_watches();
    for i in 5..10 {
        c.workload(&format!("w{i}"), "lq", 0, "1").await;
    }
    c.server.store.compact();
    c.server.store.close_watches();
    c.quota.wait_reserved("cq", 6).await;
    let wls = c.workloads();
    let list = wls.list(&Default::default()).await.unwrap();
    let pending: Vec<_> = list.items.iter().filter(|w| !reserved(w)).collect();
    assert_eq!(pending.len(), 4);
    for w in pending {
        let name = w.metadata.name.clone().unwrap();
        wait_for(&wls, &name, "pending with a reason", |w| {
            condition(w, "QuotaReserved")
                .is_some_and(|c| c.0 == "False" && c.1 == "WaitingForQuota")
        })
        .await;
    }
    assert!(
        c.quota.readmitted().is_empty(),
        "admitted twice: {:?}",
        c.quota.readmitted()
    );
    c.quota.assert_safe();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_with_leader_election_admit_each_workload_once() {
    let mut c = Cluster::start(Limits::default().cq("cq", 5_000)).await;
    // Replace the default (election-less) manager by two electing replicas.
    if let Some(m) = c.manager.take() {
        m.stop().await;
    }
    let a = Manager::start(c.client.clone(), true, "replica-a");
    let b = Manager::start(c.client.clone(), true, "replica-b");
    c.simple("cq", "lq", "5").await;
    for i in 0..8 {
        c.workload(&format!("w{i}"), "lq", 0, "1").await;
    }
    c.quota.wait_reserved("cq", 5).await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(c.client.clone(), "default");
    let holder = leases
        .get("quotagate-leader")
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity
        .unwrap();
    assert!(holder == "replica-a" || holder == "replica-b", "{holder}");
    assert!(
        c.quota.readmitted().is_empty(),
        "admitted twice: {:?}",
        c.quota.readmitted()
    );
    c.quota.assert_safe();
    a.stop().await;
    b.stop().await;
}
