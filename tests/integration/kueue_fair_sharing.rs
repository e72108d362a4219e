//! Kueue's fair sharing on the embedded cluster with the real manager, fair sharing turned on as
//! Kueue's `fairSharing` config section turns it on. Ported from
//! `test/integration/singlecluster/scheduler/fairsharing/fair_sharing_test.go`; the expectations
//! are Kueue's, the code ours.


use kube::api::Api;
use quotagate::api::kueue::{ClusterQueue, Workload};
use quotagate::queue::FairSharingConfig;

use crate::kueue_scheduler_more::finish;
use crate::support::*;

/// A cluster whose manager runs with fair sharing on (Kueue's default strategies).
async fn fair_cluster(limits: Limits) -> Cluster {
    let mut c = Cluster::start(limits).await;
    c.restart_manager_with(|o| o.fair_sharing = Some(FairSharingConfig::default())).await;
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

/// `fair_sharing_test.go`, "Preemption is enabled and CQs have 0 weight" / "should not cause an
/// infinite preemption cycle": two weight-0 ClusterQueues borrowing all their quota from the
/// cohort's 8 CPU. b's workload takes the lower-priority one of a's by fair sharing; a's evicted
/// workload, evaluated again, may not take it back (both shares are infinite, a's ratio is the
/// higher), so the preemptions stop there. Both ClusterQueues show the infinite share as
/// `i64::MAX`; the root cohort has none (0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_weights_do_not_cause_an_infinite_preemption_cycle() {
    use quotagate::api::kueue::Cohort;
    use quotagate::api::kueue::constants::{condition, reason};
    let c = fair_cluster(Limits::default().group(&["a", "b"], 8000)).await;
    c.flavor("default").await;
    let cohorts: Api<Cohort> = Api::all(c.client.clone());
    cohorts
        .create(&Default::default(), &Cohort::build("top-cohort").flavor("default", [("cpu", "8")]).build())
        .await
        .unwrap();
    for name in ["a", "b"] {
        let mut q = with_all_namespaces(
            ClusterQueue::build(name).cohort("top-cohort").fair_weight("0").flavor("default", [("cpu", "0")]).build(),
        );
        q.spec.preemption = Some(serde_json::from_value(serde_json::json!({"reclaimWithinCohort": "Any"})).unwrap());
        c.cluster_queue(q).await;
        c.local_queue(name, name).await;
    }
    let wls = c.workloads();
    c.workload("a1", "a", 9001, "4").await;
    c.workload("a2", "a", 100, "4").await;
    for n in ["a1", "a2"] {
        wait_for(&wls, n, "admitted", |w| w.is_admitted()).await;
    }
    share_is(&c, "a", i64::MAX).await;
    share_is(&c, "b", 0).await;

    c.workload("b1", "b", 100, "4").await;
    let a2 = wait_for(&wls, "a2", "preempted", |w| {
        condition(w, condition::PREEMPTED).is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(condition(&a2, condition::PREEMPTED).unwrap().1, reason::IN_COHORT_FAIR_SHARING);
    wait_for(&wls, "b1", "admitted", |w| w.is_admitted()).await;
    // a2 evaluated again with b1 admitted: no victim allowed, it waits for quota.
    wait_for(&wls, "a2", "pending without a preemption", |w| {
        !reserved(w)
            && condition(w, condition::QUOTA_RESERVED)
                .is_some_and(|c| c.0 == "False" && c.1 == reason::WAITING_FOR_QUOTA)
    })
    .await;
    let a1 = wls.get("a1").await.unwrap();
    assert!(a1.is_admitted() && condition(&a1, condition::PREEMPTED).is_none_or(|c| c.0 != "True"), "{a1:?}");
    let b1 = wls.get("b1").await.unwrap();
    assert!(b1.is_admitted() && condition(&b1, condition::PREEMPTED).is_none_or(|c| c.0 != "True"), "{b1:?}");
    assert_eq!((c.quota.reserved_in("a"), c.quota.reserved_in("b")), (1, 1));
    share_is(&c, "a", i64::MAX).await;
    share_is(&c, "b", i64::MAX).await;
    wait_for(&cohorts, "top-cohort", "weightedShare 0", |co| {
        co.status.as_ref().and_then(|s| s.fair_sharing.as_ref()).is_some_and(|f| f.weighted_share == 0)
    })
    .await;
    assert!(c.quota.readmitted().is_empty(), "{:?}", c.quota.readmitted());
    c.quota.assert_safe();
}

/// `fair_sharing_test.go`, "using hierarchical cohorts" / "preempts workloads to enforce fair
/// share": 12 CPU at the root; best-effort (weight 0.5) and research (chemistry, physics, llm with
/// weight 2) below it. Low-priority work fills everything from best-effort and physics; six
/// high-priority workloads per ClusterQueue then preempt until the shares are fair at every level:
/// best-effort 4, chemistry 2, physics 2, llm 4, each Cohort's `weightedShare` as Kueue computes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hierarchical_cohorts_preempt_to_enforce_fair_share() {
    use quotagate::api::kueue::Cohort;
    let queues = ["chemistry", "physics", "llm", "best-effort"];
    let names: Vec<String> = queues.iter().map(|q| format!("{q}-queue")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let c = fair_cluster(Limits::default().group(&refs, 12_000)).await;
    c.flavor("default").await;
    let cohorts: Api<Cohort> = Api::all(c.client.clone());
    for co in [
        Cohort::build("root").flavor("default", [("cpu", "12")]).build(),
        Cohort::build("research").parent("root").build(),
        Cohort::build("chemistry").parent("research").build(),
        Cohort::build("physics").parent("research").build(),
        Cohort::build("llm").parent("research").fair_weight("2.0").build(),
        Cohort::build("best-effort").parent("root").fair_weight("0.5").build(),
    ] {
        cohorts.create(&Default::default(), &co).await.unwrap();
    }
    for q in queues {
        let mut cq = with_all_namespaces(ClusterQueue::build(&format!("{q}-queue")).cohort(q).flavor("default", [("cpu", "0")]).build());
        if q != "best-effort" {
            cq.spec.preemption =
                Some(serde_json::from_value(serde_json::json!({"reclaimWithinCohort": "LowerPriority"})).unwrap());
        }
        c.cluster_queue(cq).await;
        c.local_queue(&format!("{q}-queue"), &format!("{q}-queue")).await;
    }
    for i in 0..6 {
        c.workload(&format!("be-low-{i}"), "best-effort-queue", -1, "1").await;
        c.workload(&format!("physics-low-{i}"), "physics-queue", -1, "1").await;
    }
    c.quota.wait_reserved("best-effort-queue", 6).await;
    c.quota.wait_reserved("physics-queue", 6).await;
    let cohort_share = |name: &'static str, want: i64| {
        let cohorts = cohorts.clone();
        async move {
            wait_for(&cohorts, name, &format!("weightedShare {want}"), |co| {
                co.status.as_ref().and_then(|s| s.fair_sharing.as_ref()).is_some_and(|f| f.weighted_share == want)
            })
            .await;
        }
    };
    // best-effort borrows 6 of 12 with weight 0.5; physics 6 of 12 at its parent's level.
    cohort_share("best-effort", 1000).await;
    cohort_share("physics", 500).await;

    for i in 0..6 {
        for q in queues {
            c.workload(&format!("{q}-high-{i}"), &format!("{q}-queue"), 100, "1").await;
        }
    }
    for (q, n) in [("best-effort-queue", 4), ("chemistry-queue", 2), ("physics-queue", 2), ("llm-queue", 4)] {
        c.quota.wait_reserved(q, n).await;
    }
    // Rounded up, as Kueue's status writer does: 4/12/0.5, 8/12, 2/12, 2/12, 4/12/2 (per mille).
    for (co, want) in [("best-effort", 667), ("research", 667), ("chemistry", 167), ("physics", 167), ("llm", 167)] {
        cohort_share(co, want).await;
    }
    c.quota.assert_safe();
}

/// `fair_sharing_test.go`, "using hierarchical cohorts" / "admits workloads respecting fair
/// share": root over first-left (second-left, second-right, each with a 2-CPU ClusterQueue) and
/// first-right (bank, 10 CPU). Ten 1-CPU workloads, round robin, are all admitted; each Cohort's
/// share is its borrowing over the 14 CPU its parent can lend (rounded up in status).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hierarchical_cohorts_admit_respecting_fair_share() {
    use quotagate::api::kueue::Cohort;
    let c = fair_cluster(Limits::default().group(&["second-left", "second-right"], 14_000)).await;
    c.flavor("default").await;
    let cohorts: Api<Cohort> = Api::all(c.client.clone());
    for co in [
        Cohort::build("first-left").parent("root").build(),
        Cohort::build("first-right").parent("root").build(),
        Cohort::build("second-left").parent("first-left").build(),
        Cohort::build("second-right").parent("first-left").build(),
        Cohort::build("bank").parent("first-right").flavor("default", [("cpu", "10")]).build(),
    ] {
        cohorts.create(&Default::default(), &co).await.unwrap();
    }
    for q in ["second-left", "second-right"] {
        c.cluster_queue(with_all_namespaces(ClusterQueue::build(q).cohort(q).flavor("default", [("cpu", "2")]).build()))
            .await;
        c.local_queue(q, q).await;
    }
    let share = |name: &'static str, want: i64| {
        let cohorts = cohorts.clone();
        async move {
            wait_for(&cohorts, name, &format!("weightedShare {want}"), |co| {
                co.status.as_ref().and_then(|s| s.fair_sharing.as_ref()).is_some_and(|f| f.weighted_share == want)
            })
            .await;
        }
    };
    for co in ["first-left", "first-right", "bank"] {
        share(co, 0).await;
    }
    for i in 0..5 {
        c.workload(&format!("left-{i}"), "second-left", 0, "1").await;
        c.workload(&format!("right-{i}"), "second-right", 0, "1").await;
    }
    c.quota.wait_reserved("second-left", 5).await;
    c.quota.wait_reserved("second-right", 5).await;
    // 6/14, 0, 3/14, 3/14, 0 (per mille).
    for (co, want) in [("first-left", 429), ("first-right", 0), ("second-left", 215), ("second-right", 215), ("bank", 0)] {
        share(co, want).await;
    }
    c.quota.assert_safe();
}

/// `fair_sharing_test.go`, "Preemption is enabled" / "Admits workloads respecting fair share":
/// a, b and c with 3 CPU each, reclaiming from the cohort. a takes 9 (share 6/9); b's five newer
/// workloads take back b's 3 and one more by fair sharing (a keeps 5, b 4: shares 2/9 and 1/9);
/// then c reclaims one unit from a, the ClusterQueue with the highest share (a's share 1/9, 112
/// rounded up in status). Kueue's test finishes each eviction by hand; here the evicted
/// Workloads let go at once, so only the settled states are checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_admits_workloads_respecting_fair_share() {
    let c = fair_cluster(Limits::default().group(&["a", "b", "c"], 9000)).await;
    c.flavor("default").await;
    for name in ["a", "b", "c"] {
        let mut q = with_all_namespaces(ClusterQueue::build(name).cohort("all").flavor("default", [("cpu", "3")]).build());
        q.spec.preemption = Some(
            serde_json::from_value(serde_json::json!({"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}))
                .unwrap(),
        );
        c.cluster_queue(q).await;
        c.local_queue(name, name).await;
    }
    for i in 0..10 {
        c.workload(&format!("a-{i}"), "a", 0, "1").await;
    }
    c.quota.wait_reserved("a", 9).await;
    share_is(&c, "a", 667).await;
    share_is(&c, "b", 0).await;
    share_is(&c, "c", 0).await;

    for i in 0..5 {
        c.workload(&format!("b-{i}"), "b", 0, "1").await;
    }
    c.quota.wait_reserved("b", 4).await;
    c.quota.wait_reserved("a", 5).await;
    share_is(&c, "a", 223).await;
    share_is(&c, "b", 112).await;
    share_is(&c, "c", 0).await;

    c.workload("c0", "c", 0, "1").await;
    c.quota.wait_reserved("c", 1).await;
    c.quota.wait_reserved("a", 4).await;
    assert_eq!(c.quota.reserved_in("b"), 4);
    share_is(&c, "a", 112).await;
    share_is(&c, "b", 112).await;
    share_is(&c, "c", 0).await;
    c.quota.assert_safe();
}
