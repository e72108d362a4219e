//! Kueue's fair sharing on the embedded cluster with the real manager, fair sharing turned on as
//! Kueue's `fairSharing` config section turns it on. Ported from
//! `test/integration/singlecluster/scheduler/fairsharing/fair_sharing_test.go`; the expectations
//! are Kueue's, the code ours.

use std::time::Duration;

use kube::api::Api;
use quotagate::api::kueue::{ClusterQueue, Workload};
use quotagate::queue::FairSharingConfig;
use quotagate::wiring::manager::ManagerOptions;

use crate::kueue_scheduler_more::finish;
use crate::support::*;

/// A cluster whose manager runs with fair sharing on (Kueue's default strategies).
async fn fair_cluster(limits: Limits) -> Cluster {
    let mut c = Cluster::start(limits).await;
    if let Some(m) = c.manager.take() {
        m.stop().await;
    }
    c.manager = Some(Manager::start_opts(
        c.client.clone(),
        ManagerOptions {
            leader_election: false,
            identity: "m1".into(),
            resync: Duration::from_millis(300),
            fair_sharing: Some(FairSharingConfig::default()),
            ..Default::default()
        },
    ));
    c
}

async fn share_is(c: &Cluster, cq: &str, want: i64) {
    let api: Api<ClusterQueue> = Api::all(c.client.clone());
    wait_for(&api, cq, &format!("status.fairSharing.weightedShare {want}"), |q| {
        q.status
            .as_ref()
            .and_then(|s| s.fair_sharing.as_ref())
            .is_some_and(|f| f.weighted_share == want)
    })
    .await;
}

/// Waits, on the quota watch's events, until `cond` holds; panics after `WAIT`.
async fn until(c: &Cluster, what: &str, cond: impl Fn(&Cluster) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond(c) {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        c.quota.wait_any_event().await;
    }
}

async fn reserved_names(wls: &Api<Workload>, cq: &str) -> Vec<String> {
    let list = wls.list(&Default::default()).await.unwrap();
    let mut v: Vec<String> = list
        .items
        .iter()
        .filter(|w| !w.is_finished() && reserved(w) && w.admission().is_some_and(|a| a.cluster_queue == cq))
        .filter_map(|w| w.metadata.name.clone())
        .collect();
    v.sort();
    v
}

/// `fair_sharing_test.go`, "Preemption is disabled" / "Admits workloads respecting fair share":
/// a (3 CPU), b (1) and shared (4) in one cohort. a takes all 8 and shows a weighted share of
/// 625 (5 borrowed of 8 lendable); as a's workloads finish, b's (newer, but with the lower share
/// once admitted) get the freed CPU three times, then a's share is the lower and a gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admits_workloads_respecting_fair_share() {
    let c = fair_cluster(Limits::default().group(&["a", "b", "shared"], 8000)).await;
    c.flavor("default").await;
    for (name, cpu) in [("a", "3"), ("b", "1"), ("shared", "4")] {
        c.cluster_queue(with_all_namespaces(
            ClusterQueue::build(name).cohort("all").flavor("default", [("cpu", cpu)]).build(),
        ))
        .await;
        c.local_queue(name, name).await;
    }
    let wls = c.workloads();
    for i in 0..10 {
        c.workload(&format!("a-{i}"), "a", 0, "1").await;
    }
    c.quota.wait_reserved("a", 8).await;
    share_is(&c, "a", 625).await;
    share_is(&c, "b", 0).await;
    share_is(&c, "shared", 0).await;

    for i in 0..5 {
        c.workload(&format!("b-{i}"), "b", 0, "1").await;
    }
    for i in 0..5 {
        wait_for(&wls, &format!("b-{i}"), "pending", |w| !reserved(w)).await;
    }
    assert_eq!(c.quota.reserved_in("b"), 0);
    share_is(&c, "a", 625).await;

    // Each finish frees one CPU of a's borrowing: b's share with its next workload (0, 125, 250)
    // stays below a's (625, 500, 375), so b gets it.
    for (b, a) in [(1, 7), (2, 6), (3, 5)] {
        let victim = reserved_names(&wls, "a").await.remove(0);
        finish(&wls, &victim).await;
        c.quota.wait_reserved("b", b).await;
        c.quota.wait_reserved("a", a).await;
    }
    // Now a's share with its next workload (250) is below b's (375): a gets the CPU.
    let admitted_in_a = |c: &Cluster| (0..10).filter(|i| c.quota.admissions(&format!("default/a-{i}")) > 0).count();
    assert_eq!(admitted_in_a(&c), 8);
    let victim = reserved_names(&wls, "a").await.remove(0);
    finish(&wls, &victim).await;
    until(&c, "a's ninth workload admitted", |c| admitted_in_a(c) == 9).await;
    c.quota.wait_reserved("a", 5).await;
    assert_eq!(c.quota.reserved_in("b"), 3);
    // a: 5 used of 3 (2 borrowed), b: 3 of 1 (2 borrowed), over 8 lendable.
    share_is(&c, "a", 250).await;
    share_is(&c, "b", 250).await;
    share_is(&c, "shared", 0).await;
    c.quota.assert_safe();
}
