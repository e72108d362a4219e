//! Admission scenarios. Every test checks quota safety on every Workload event (support::QuotaWatch).

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use quotagate::api::kueue::constants::{condition, reason};
use quotagate::api::kueue::{ClusterQueue, QueueingStrategy, StopPolicy};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admits_when_quota_fits_then_waits_then_admits_after_quota_raised() {
    let c = Cluster::start(Limits::default().cq("cq", 4000)).await;
    c.simple("cq", "lq", "4").await;
    c.workload("a", "lq", 0, "3").await;
    let wls = c.workloads();
    let a = wait_for(&wls, "a", "admitted", |w| w.is_admitted()).await;
    assert_eq!(
        condition(&a, condition::QUOTA_RESERVED).unwrap(),
        (
            "True".into(),
            reason::QUOTA_RESERVED.into(),
            "Quota reserved in ClusterQueue cq".into()
        )
    );
    assert_eq!(
        a.admission().unwrap().pod_set_assignments[0].flavors["cpu"],
        "default"
    );

    c.workload("b", "lq", 0, "2").await;
    let b = wait_for(&wls, "b", "pending with a reason", |w| {
        condition(w, condition::QUOTA_RESERVED).is_some_and(|c| c.1 == reason::WAITING_FOR_QUOTA)
    })
    .await;
    let (status, _, message) = condition(&b, condition::QUOTA_RESERVED).unwrap();
    assert_eq!(status, "False");
    assert_eq!(
        message,
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more needed"
    );

    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    let cq = wait_for(&cqs, "cq", "status counts", |q| {
        q.status
            .as_ref()
            .is_some_and(|s| s.pending_workloads == 1 && s.admitted_workloads == 1)
    })
    .await;
    let st = cq.status.unwrap();
    assert_eq!(st.flavors_usage[0].resources[0].total.as_ref().unwrap().0, "3");
    let active = st
        .conditions
        .iter()
        .find(|c| c.type_ == condition::ACTIVE)
        .unwrap();
    assert_eq!(
        (active.status.as_str(), active.reason.as_str()),
        ("True", "Ready")
    );

    let patch = serde_json::json!({"spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "5"}]}]}]}});
    let lqs: Api<quotagate::api::kueue::LocalQueue> = Api::namespaced(c.client.clone(), "default");
    let lq = wait_for(&lqs, "lq", "status counts", |q| {
        q.status
            .as_ref()
            .is_some_and(|s| s.pending_workloads == 1 && s.admitted_workloads == 1)
    })
    .await;
    let lst = lq.status.unwrap();
    assert_eq!(lst.flavors_usage[0].resources[0].total.as_ref().unwrap().0, "3");
    assert_eq!(lst.conditions[0].reason, "Ready");
    // Every admission is also a Kubernetes Event on the Workload.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(c.client.clone(), "default");
    let evs = events.list(&Default::default()).await.unwrap().items;
    assert!(
        evs.iter().any(|e| e.reason.as_deref() == Some("QuotaReserved")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("a")),
        "{evs:?}"
    );
    c.quota.set_cq_limit("cq", 5000);
    cqs.patch("cq", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for(&wls, "b", "admitted after the quota was raised", |w| {
        w.is_admitted()
    })
    .await;
    c.quota.assert_safe();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_queue_without_flavor_is_inactive_with_kueue_reason() {
    let c = Cluster::start(Limits::default()).await;
    c.cluster_queue(with_all_namespaces(cq_with("cq", "4").build()))
        .await;
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    let cq = wait_for(&cqs, "cq", "Active=False", |q| {
        q.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == condition::ACTIVE && c.status == "False")
        })
    })
    .await;
    let active = cq
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == condition::ACTIVE)
        .unwrap();
    assert_eq!(active.reason, "FlavorNotFound");
    assert_eq!(
        active.message,
        "Can't admit new workloads: references missing ResourceFlavor(s): default."
    );
    c.flavor("default").await;
    wait_for(&cqs, "cq", "Active=True", |q| {
        q.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == condition::ACTIVE && c.status == "True")
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn borrowing_within_cohort_and_reclaim() {
    let c = Cluster::start(Limits::default().group(&["a", "b"], 8000)).await;
    c.flavor("default").await;
    let mut qa = with_all_namespaces(cq_with("a", "4").cohort("co").build());
    qa.spec.preemption =
        Some(serde_json::from_value(serde_json::json!({"reclaimWithinCohort": "Any"})).unwrap());
    c.cluster_queue(qa).await;
    c.cluster_queue(with_all_namespaces(cq_with("b", "4").cohort("co").build()))
        .await;
    c.local_queue("la", "a").await;
    c.local_queue("lb", "b").await;
    let wls = c.workloads();
    // b borrows a's idle quota.
    c.workload("big", "lb", 0, "7").await;
    let big = wait_for(&wls, "big", "admitted by borrowing", |w| w.is_admitted()).await;
    assert_eq!(big.admission().unwrap().cluster_queue, "b");
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    let b = wait_for(&cqs, "b", "borrowed shown", |q| {
        q.status.as_ref().is_some_and(|s| s.admitted_workloads == 1)
    })
    .await;
    assert_eq!(
        b.status.unwrap().flavors_usage[0].resources[0]
            .borrowed
            .as_ref()
            .unwrap()
            .0,
        "3"
    );
    // a wants its nominal back: the borrower is preempted to reclaim it.
    c.workload("owner", "la", 0, "4").await;
    let evicted = wait_for(&wls, "big", "preempted", |w| {
        condition(w, condition::PREEMPTED).is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(
        condition(&evicted, condition::PREEMPTED).unwrap().1,
        reason::IN_COHORT_RECLAMATION
    );
    wait_for(&wls, "owner", "admitted after reclaim", |w| w.is_admitted()).await;
    c.quota.assert_safe();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn higher_priority_preempts_lower_priority() {
    let c = Cluster::start(Limits::default().cq("cq", 4000)).await;
    c.flavor("default").await;
    let mut q = with_all_namespaces(cq_with("cq", "4").build());
    q.spec.preemption =
        Some(serde_json::from_value(serde_json::json!({"withinClusterQueue": "LowerPriority"})).unwrap());
    c.cluster_queue(q).await;
    c.local_queue("lq", "cq").await;
    let wls = c.workloads();
    c.workload("low", "lq", 1, "3").await;
    wait_for(&wls, "low", "admitted", |w| w.is_admitted()).await;
    c.workload("high", "lq", 100, "3").await;
    let low = wait_for(&wls, "low", "evicted", |w| {
        condition(w, condition::EVICTED).is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(condition(&low, condition::EVICTED).unwrap().1, reason::PREEMPTED);
    assert_eq!(
        condition(&low, condition::PREEMPTED).unwrap().1,
        reason::IN_CLUSTER_QUEUE
    );
    wait_for(&wls, "high", "admitted", |w| w.is_admitted()).await;
    let low = wait_for(&wls, "low", "requeued and pending", |w| {
        !reserved(w) && condition(w, condition::REQUEUED).is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(condition(&low, condition::QUOTA_RESERVED).unwrap().0, "False");
    // Kueue backs off only after a PodsReady timeout: a preempted workload requeues at once.
    assert!(
        low.status
            .as_ref()
            .and_then(|s| s.requeue_state.as_ref())
            .is_none(),
        "no requeueState after a preemption"
    );
    c.quota.assert_safe();
}

async fn fifo(strategy: QueueingStrategy) -> bool {
    let c = Cluster::start(Limits::default().cq("cq", 4000)).await;
    c.flavor("default").await;
    let mut q = with_all_namespaces(cq_with("cq", "4").queueing_strategy(strategy).build());
    q.spec.preemption = None;
    c.cluster_queue(q).await;
    c.local_queue("lq", "cq").await;
    let wls = c.workloads();
    c.workload("running", "lq", 0, "3").await;
    wait_for(&wls, "running", "admitted", |w| w.is_admitted()).await;
    // Creation timestamps have one-second resolution; a higher priority makes `head` the head
    // whatever the tie-break between same-second workloads.
    c.workload("head", "lq", 1, "2").await;
    wait_for(&wls, "head", "pending", |w| {
        condition(w, condition::QUOTA_RESERVED)
            .is_some_and(|c| c.0 == "False" && c.1 == reason::WAITING_FOR_QUOTA)
    })
    .await;
    c.workload("small", "lq", 0, "1").await;
    let small = wait_for(&wls, "small", "decided", |w| {
        w.is_admitted()
            || condition(w, condition::QUOTA_RESERVED).is_some_and(|c| c.0 == "False" && !c.2.is_empty())
    })
    .await;
    c.quota.assert_safe();
    small.is_admitted()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_fifo_head_blocks_and_best_effort_does_not() {
    assert!(
        !fifo(QueueingStrategy::StrictFIFO).await,
        "StrictFIFO must keep the smaller workload behind the head"
    );
    assert!(
        fifo(QueueingStrategy::BestEffortFIFO).await,
        "BestEffortFIFO must admit the smaller workload"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_policy_hold_and_drain_evicts() {
    let c = Cluster::start(Limits::default().cq("cq", 4000)).await;
    c.simple("cq", "lq", "4").await;
    let wls = c.workloads();
    c.workload("a", "lq", 0, "2").await;
    wait_for(&wls, "a", "admitted", |w| w.is_admitted()).await;
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    cqs.patch(
        "cq",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"stopPolicy": "HoldAndDrain"}})),
    )
    .await
    .unwrap();
    let a = wait_for(&wls, "a", "evicted", |w| {
        condition(w, condition::EVICTED).is_some_and(|c| c.0 == "True") && !reserved(w)
    })
    .await;
    assert_eq!(
        condition(&a, condition::EVICTED).unwrap().1,
        reason::CLUSTER_QUEUE_STOPPED
    );
    let cq = wait_for(&cqs, "cq", "stopped", |q| {
        q.status
            .as_ref()
            .is_some_and(|s| s.conditions.iter().any(|c| c.reason == "Stopped"))
    })
    .await;
    assert_eq!(cq.spec.stop_policy(), StopPolicy::HoldAndDrain);
    let a = wait_for(&wls, "a", "pending while stopped", |w| {
        condition(w, condition::QUOTA_RESERVED).is_some_and(|c| c.1 == reason::SUSPENDED)
    })
    .await;
    assert!(!reserved(&a));
    // Kueue parks it (Requeued=False) until the ClusterQueue is restarted.
    let rq = condition(&a, condition::REQUEUED).unwrap();
    assert_eq!(
        (rq.0.as_str(), rq.1.as_str()),
        ("False", reason::CLUSTER_QUEUE_STOPPED)
    );
    cqs.patch(
        "cq",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"stopPolicy": "None"}})),
    )
    .await
    .unwrap();
    let a = wait_for(&wls, "a", "admitted again", |w| w.is_admitted()).await;
    let rq = condition(&a, condition::REQUEUED).unwrap();
    assert_eq!(
        (rq.0.as_str(), rq.1.as_str()),
        ("True", reason::CLUSTER_QUEUE_RESTARTED)
    );
    c.quota.assert_safe();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_workload_frees_its_quota() {
    let c = Cluster::start(Limits::default().cq("cq", 4000)).await;
    c.simple("cq", "lq", "4").await;
    let wls = c.workloads();
    c.workload("a", "lq", 0, "3").await;
    wait_for(&wls, "a", "admitted", |w| w.is_admitted()).await;
    c.workload("b", "lq", 0, "3").await;
    wait_for(&wls, "b", "pending", |w| {
        condition(w, condition::QUOTA_RESERVED)
            .is_some_and(|c| c.0 == "False" && c.1 == reason::WAITING_FOR_QUOTA)
    })
    .await;
    wls.delete("a", &DeleteParams::default()).await.unwrap();
    wait_for(&wls, "b", "admitted after a was deleted", |w| w.is_admitted()).await;
    c.quota.assert_safe();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inactive_workload_is_evicted_and_not_requeued() {
    let c = Cluster::start(Limits::default().cq("cq", 4000)).await;
    c.simple("cq", "lq", "4").await;
    let wls = c.workloads();
    c.workload("a", "lq", 0, "3").await;
    wait_for(&wls, "a", "admitted", |w| w.is_admitted()).await;
    wls.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"active": false}})),
    )
    .await
    .unwrap();
    let a = wait_for(&wls, "a", "deactivated", |w| {
        !reserved(w) && condition(w, condition::EVICTED).is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(condition(&a, condition::EVICTED).unwrap().1, reason::DEACTIVATED);
    c.workload("b", "lq", 0, "3").await;
    wait_for(&wls, "b", "admitted in the freed quota", |w| w.is_admitted()).await;
    c.quota.assert_safe();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_queue_hold_and_drain_evicts_and_holds_new_workloads() {
    let c = Cluster::start(Limits::default().cq("cq", 4000)).await;
    c.simple("cq", "lq", "4").await;
    let wls = c.workloads();
    c.workload("a", "lq", 0, "2").await;
    wait_for(&wls, "a", "admitted", |w| w.is_admitted()).await;
    let lqs: Api<quotagate::api::kueue::LocalQueue> = Api::namespaced(c.client.clone(), "default");
    lqs.patch(
        "lq",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"stopPolicy": "HoldAndDrain"}})),
    )
    .await
    .unwrap();
    let a = wait_for(&wls, "a", "drained", |w| {
        !reserved(w) && condition(w, condition::EVICTED).is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(
        condition(&a, condition::EVICTED).unwrap().1,
        reason::LOCAL_QUEUE_STOPPED
    );
    c.workload("b", "lq", 0, "1").await;
    let b = wait_for(&wls, "b", "held", |w| {
        condition(w, condition::QUOTA_RESERVED).is_some_and(|c| c.0 == "False")
    })
    .await;
    assert_eq!(
        condition(&b, condition::QUOTA_RESERVED).unwrap().2,
        "LocalQueue lq is inactive"
    );
    // The Stopped condition may be written before the drained reservation is seen: wait for both.
    wait_for(&lqs, "lq", "inactive with nothing reserved", |q| {
        q.status
            .as_ref()
            .is_some_and(|s| s.conditions.iter().any(|c| c.reason == "Stopped") && s.reserving_workloads == 0)
    })
    .await;
    lqs.patch(
        "lq",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"stopPolicy": "None"}})),
    )
    .await
    .unwrap();
    wait_for(&wls, "a", "admitted again", |w| w.is_admitted()).await;
    wait_for(&wls, "b", "admitted", |w| w.is_admitted()).await;
    c.quota.assert_safe();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_in_backoff_is_admitted_only_after_requeue_at() {
    let c = Cluster::start(Limits::default().cq("cq", 4000)).await;
    c.simple("cq", "lq", "4").await;
    let wls = c.workloads();
    // Queued to a LocalQueue that does not exist yet, so nothing admits it before the backoff is set.
    c.workload("b", "later", 0, "1").await;
    let requeue_at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(10);
    loop {
        let mut w = wls.get("b").await.unwrap();
        let s = w.status.get_or_insert_with(Default::default);
        s.requeue_state = Some(quotagate::api::kueue::RequeueState {
            count: Some(1),
            requeue_at: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(requeue_at)),
        });
        s.conditions.retain(|c| c.type_ != condition::REQUEUED);
        s.conditions.push(quotagate::api::kueue::builders::condition(
            condition::REQUEUED,
            false,
            reason::PODS_READY_TIMEOUT,
            "Exceeded the PodsReady timeout default/b",
        ));
        match wls.replace_status("b", &Default::default(), &w).await {
            Ok(_) => break,
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => panic!("{e}"),
        }
    }
    c.local_queue("later", "cq").await;
    // Quota is free, yet the workload waits out its backoff.
    let until = requeue_at - jiff::SignedDuration::from_millis(4000);
    let left = until.duration_since(jiff::Timestamp::now());
    assert!(left.is_positive(), "setup took too long to observe the backoff");
    tokio::time::sleep(left.unsigned_abs()).await;
    let w = wls.get("b").await.unwrap();
    assert!(!reserved(&w), "admitted before requeueAt");
    let w = wait_for(&wls, "b", "admitted after the backoff", reserved).await;
    let rq = condition(&w, condition::REQUEUED).unwrap();
    assert_eq!((rq.0.as_str(), rq.1.as_str()), ("True", reason::BACKOFF_FINISHED));
    let state = w.status.as_ref().and_then(|s| s.requeue_state.clone());
    assert!(
        state.is_none_or(|s| s.requeue_at.is_none()),
        "requeueAt cleared once the backoff finished"
    );
    let reserved_at = w
        .status
        .as_ref()
        .and_then(|s| s.condition(condition::QUOTA_RESERVED))
        .map(|c| c.last_transition_time.0)
        .unwrap();
    // Condition times have second precision.
    assert!(
        reserved_at.as_second() >= requeue_at.as_second(),
        "{reserved_at} < {requeue_at}"
    );
    c.quota.assert_safe();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_cohort_fair_share_is_cleared_without_fair_sharing() {
    use quotagate::api::kueue::{Cohort, CohortStatus, FairSharingStatus};
    let c = Cluster::start(Limits::default()).await;
    let cohorts: Api<Cohort> = Api::all(c.client.clone());
    let mut co = cohorts
        .create(&Default::default(), &Cohort::build("co").build())
        .await
        .unwrap();
    co.status = Some(CohortStatus {
        fair_sharing: Some(FairSharingStatus { weighted_share: 3 }),
    });
    // The manager may write first; it writes nothing for a cohort without a stale share.
    let written = cohorts
        .replace_status("co", &Default::default(), &co)
        .await
        .unwrap();
    assert!(written.status.and_then(|s| s.fair_sharing).is_some());
    wait_for(&cohorts, "co", "fairSharing cleared", |c| {
        c.status.as_ref().is_none_or(|s| s.fair_sharing.is_none())
    })
    .await;
}
