//! Restarts and API faults: nothing is lost, nothing is admitted twice, quota is never exceeded.

use kube::Api;
use quotagate::embedded::WriteMatch;

use crate::support::*;

/// The admission loop's Workload status writes (merge patches of the status).
fn status_writes() -> WriteMatch {
    WriteMatch {
        verb: Some("patch".into()),
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
            condition(w, "QuotaReserved").is_some_and(|c| c.0 == "False" && c.1 == "WaitingForQuota")
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
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(c.client.clone(), "default");
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

/// A leader stopped cleanly (a rolling restart) gives its Lease up, so the other replica leads within
/// its retry period (2 s) instead of waiting out the 15 s lease, and admits what arrives next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanly_stopped_leader_hands_over_at_once() {
    let mut c = Cluster::start(Limits::default().cq("cq", 5_000)).await;
    if let Some(m) = c.manager.take() {
        m.stop().await;
    }
    let a = Manager::start(c.client.clone(), true, "replica-a");
    c.simple("cq", "lq", "5").await;
    c.workload("w0", "lq", 0, "1").await;
    c.quota.wait_reserved("cq", 1).await;
    let b = Manager::start(c.client.clone(), true, "replica-b");
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(c.client.clone(), "default");
    let holder = |l: &k8s_openapi::api::coordination::v1::Lease| {
        l.spec.as_ref().and_then(|s| s.holder_identity.clone())
    };
    assert_eq!(
        holder(&leases.get("quotagate-leader").await.unwrap()).as_deref(),
        Some("replica-a")
    );
    let stopped = std::time::Instant::now();
    a.stop().await;
    // Well under the 15 s the lease would otherwise take to run out.
    wait_for(&leases, "quotagate-leader", "held by replica-b", |l| {
        holder(l).as_deref() == Some("replica-b")
    })
    .await;
    let took = stopped.elapsed();
    assert!(
        took < std::time::Duration::from_secs(12),
        "replica-b led only after {took:?}"
    );
    c.workload("w1", "lq", 0, "1").await;
    c.quota.wait_reserved("cq", 2).await;
    c.quota.assert_safe();
    b.stop().await;
}

// Issue 13 item 1: an admission write the API server refuses for good (a 422, as for an object a
// later-installed validation rejects) is reported once, backs off, and gives back the quota it
// assumed, so the workloads queued behind it are admitted; before, the loop retried at once forever
// and kept the quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_admission_write_backs_off_and_releases_its_quota() {
    let c = Cluster::start(Limits::default().cq("cq", 2_000)).await;
    c.simple("cq", "lq", "2").await;
    let faults = &c.server.store.faults;
    let refused = WriteMatch {
        name: Some("refused".into()),
        ..status_writes()
    };
    for _ in 0..50 {
        let e = quotagate::embedded::ApiError::new(
            422,
            "Invalid",
            "Workload.kueue.x-k8s.io \"refused\" is invalid: injected",
        );
        faults.fail_nth_write(refused.clone(), 1, e);
    }
    c.workload("refused", "lq", 100, "2").await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    c.workload("behind", "lq", 0, "2").await;
    let wls = c.workloads();
    wait_for(
        &wls,
        "behind",
        "admitted in the quota the refused write gave back",
        reserved,
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let attempts = 50 - faults.pending_write_faults();
    assert!(
        (1..=4).contains(&attempts),
        "{attempts} admission writes in ~2.5 s: the loop must back off"
    );
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(c.client.clone(), "default");
    let warned: Vec<_> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("AdmissionWriteFailed"))
        .collect();
    assert_eq!(warned.len(), 1, "reported once per streak: {warned:?}");
    assert!(
        warned[0].note.as_deref().unwrap_or("").contains("quota released"),
        "{warned:?}"
    );
    c.quota.assert_safe();
}
