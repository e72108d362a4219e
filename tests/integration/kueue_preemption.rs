//! Kueue's `test/integration/singlecluster/scheduler/preemption_test.go`, on the embedded cluster
//! with the real manager, each test naming the Kueue spec it ports (helpers in
//! `kueue_scheduler_more.rs`).

use quotagate::api::kueue::constants::{condition, reason};

use crate::kueue_scheduler_more::*;
use crate::support::*;

/// `preemption_test.go`, "In a single ClusterQueue": "Should preempt Workloads with lower priority
/// when there is not enough quota" (LowerOrNewerEqualPriority, 4 CPU).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempts_lower_priority_workloads_when_quota_is_short() {
    let c = Cluster::start(Limits::default().cq("cq", 4000)).await;
    c.flavor("alpha").await;
    c.cluster_queue(
        cq("cq")
            .flavor("alpha", [("cpu", "4")])
            .preemption(preemption(
                serde_json::json!({"withinClusterQueue": "LowerOrNewerEqualPriority"}),
            ))
            .build(),
    )
    .await;
    c.local_queue("q", "cq").await;
    let wls = c.workloads();
    for (name, prio) in [
        ("low-wl-1", -10),
        ("low-wl-2", -10),
        ("mid-wl", 0),
        ("high-wl-1", 10),
    ] {
        c.workload(name, "q", prio, "1").await;
    }
    for name in ["low-wl-1", "low-wl-2", "mid-wl", "high-wl-1"] {
        wait_for(&wls, name, "admitted", |w| w.is_admitted()).await;
    }
    c.workload("low-wl-3", "q", -10, "1").await;
    pending(&wls, "low-wl-3").await;
    c.workload("high-wl-2", "q", 10, "2").await;
    for name in ["low-wl-1", "low-wl-2"] {
        preempted_with(&wls, name, reason::IN_CLUSTER_QUEUE).await;
    }
    admitted_in(&wls, "high-wl-2", "cq", "alpha").await;
    for name in ["low-wl-1", "low-wl-2", "low-wl-3"] {
        wait_for(&wls, name, "pending", |w| !reserved(w)).await;
    }
    assert!(reserved(&wls.get("mid-wl").await.unwrap()));
    c.quota.assert_safe();
}

/// Kueue's "In a ClusterQueue that is part of a cohort" setup: alpha-cq and gamma-cq (2 CPU,
/// LowerPriority within, reclaim Any) and beta-cq (2 CPU, no preemption) in cohort `all`.
async fn three_in_a_cohort() -> Cluster {
    let c = Cluster::start(Limits::default().group(&["alpha-cq", "beta-cq", "gamma-cq"], 6000)).await;
    c.flavor("alpha").await;
    let policy = serde_json::json!({
        "withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"
    });
    for name in ["alpha-cq", "beta-cq", "gamma-cq"] {
        let q = cq(name).cohort("all").flavor("alpha", [("cpu", "2")]);
        let q = if name == "beta-cq" {
            q
        } else {
            q.preemption(preemption(policy.clone()))
        };
        c.cluster_queue(q.build()).await;
    }
    for (lq, cq) in [
        ("alpha-q", "alpha-cq"),
        ("beta-q", "beta-cq"),
        ("gamma-q", "gamma-cq"),
    ] {
        c.local_queue(lq, cq).await;
    }
    c
}

/// `preemption_test.go`, "In a ClusterQueue that is part of a cohort": "Should preempt Workloads
/// in the cohort borrowing quota, when the ClusterQueue is using less than nominal quota", and
/// the victims are admitted again once the preemptor finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reclaims_from_borrowers_when_within_nominal_quota() {
    let c = three_in_a_cohort().await;
    let wls = c.workloads();
    c.workload("alpha-low", "alpha-q", -10, "1").await;
    c.workload("beta-mid", "beta-q", 0, "1").await;
    c.workload("beta-high", "beta-q", 10, "4").await;
    for name in ["alpha-low", "beta-mid", "beta-high"] {
        wait_for(&wls, name, "admitted", |w| w.is_admitted()).await;
    }
    c.workload("alpha-mid", "alpha-q", 0, "2").await;
    preempted_with(&wls, "alpha-low", reason::IN_CLUSTER_QUEUE).await;
    let beta = preempted_with(&wls, "beta-mid", reason::IN_COHORT_RECLAMATION).await;
    let msg = condition(&beta, condition::PREEMPTED).unwrap().2;
    assert!(
        msg.ends_with(
            "due to reclamation within the cohort; preemptor path: /all/alpha-cq; preemptee path: /all/beta-cq"
        ),
        "{msg}"
    );
    admitted_in(&wls, "alpha-mid", "alpha-cq", "alpha").await;
    assert!(reserved(&wls.get("beta-high").await.unwrap()));
    finish(&wls, "alpha-mid").await;
    wait_for(&wls, "alpha-low", "readmitted", reserved).await;
    wait_for(&wls, "beta-mid", "readmitted", reserved).await;
    c.quota.assert_safe();
}

/// `preemption_test.go`, "In a ClusterQueue that is part of a cohort": "Should not preempt
/// Workloads in the cohort, if the ClusterQueue requires borrowing".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn does_not_reclaim_when_the_preemptor_would_borrow() {
    let c = three_in_a_cohort().await;
    let wls = c.workloads();
    c.workload("alpha-high-1", "alpha-q", 10, "2").await;
    c.workload("beta-low", "beta-q", -10, "4").await;
    wait_for(&wls, "alpha-high-1", "admitted", |w| w.is_admitted()).await;
    wait_for(&wls, "beta-low", "admitted", |w| w.is_admitted()).await;
    c.workload("alpha-high-2", "alpha-q", 10, "2").await;
    pending(&wls, "alpha-high-2").await;
    let beta_low = wls.get("beta-low").await.unwrap();
    assert!(reserved(&beta_low) && condition(&beta_low, condition::PREEMPTED).is_none());
    c.quota.assert_safe();
}

/// `preemption_test.go`, "With lending limit": "Should be able to preempt when lending limit
/// enabled": prod-cq (5, lendingLimit 4) reclaims from dev-cq's borrowing wl-1, and wl-2 stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempts_when_lending_limit_is_set() {
    let c = Cluster::start(Limits::default().group(&["prod-cq", "dev-cq"], 10000)).await;
    c.flavor("alpha").await;
    c.cluster_queue(
        cq("prod-cq")
            .cohort("all")
            .flavor_quotas(fq("alpha", "5", None, Some("4")))
            .preemption(preemption(serde_json::json!({"reclaimWithinCohort": "Any"})))
            .build(),
    )
    .await;
    c.cluster_queue(cq("dev-cq").cohort("all").flavor("alpha", [("cpu", "5")]).build())
        .await;
    c.local_queue("prod-queue", "prod-cq").await;
    c.local_queue("dev-queue", "dev-cq").await;
    let wls = c.workloads();
    c.workload("wl-1", "dev-queue", 0, "4").await;
    c.workload("wl-2", "dev-queue", 1, "5").await;
    wait_for(&wls, "wl-1", "admitted", |w| w.is_admitted()).await;
    wait_for(&wls, "wl-2", "admitted", |w| w.is_admitted()).await;
    c.workload("wl-3", "prod-queue", 0, "4").await;
    preempted_with(&wls, "wl-1", reason::IN_COHORT_RECLAMATION).await;
    admitted_in(&wls, "wl-3", "prod-cq", "alpha").await;
    assert!(
        reserved(&wls.get("wl-2").await.unwrap()),
        "only wl-1 is preempted"
    );
    c.quota.assert_safe();
}
