//! More of Kueue's `test/integration/singlecluster/scheduler/{scheduler,preemption}_test.go`, on the
//! embedded cluster with the real manager, each test naming the Kueue spec it ports. Kueue's
//! `FinishWorkloads` is a Finished=True condition written here; `FinishEvictionForWorkloads` is
//! done by our own admission loop for plain Workloads.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, PodSpec, Taint, Toleration};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use quotagate::api::kueue::builders::{ClusterQueueBuilder, condition as make_condition, podset};
use quotagate::api::kueue::constants::{condition, reason};
use quotagate::api::kueue::{
    ClusterQueue, ClusterQueuePreemption, FlavorFungibility, FlavorQuotas, LocalQueue, QueueingStrategy,
    ResourceFlavor, StopPolicy, Workload,
};

use crate::support::*;

pub(crate) fn json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).unwrap()
}

pub(crate) fn preemption(v: serde_json::Value) -> ClusterQueuePreemption {
    json(v)
}

pub(crate) fn fungibility(v: serde_json::Value) -> FlavorFungibility {
    json(v)
}

/// `flavor` with `cpu` nominal and optional borrowing and lending limits.
pub(crate) fn fq(flavor: &str, cpu: &str, borrowing: Option<&str>, lending: Option<&str>) -> FlavorQuotas {
    FlavorQuotas::build(flavor)
        .resource_with_limits("cpu", cpu, borrowing, lending)
        .build()
}

pub(crate) fn cq(name: &str) -> ClusterQueueBuilder {
    ClusterQueue::build(name)
}

/// Kueue's `spotTaintedFlavor` (`spot-taint=true:NoSchedule`) and its toleration.
pub(crate) async fn spot_tainted(c: &Cluster) {
    let api: Api<ResourceFlavor> = Api::all(c.client.clone());
    let taint = Taint {
        key: "spot-taint".into(),
        value: Some("true".into()),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    api.create(
        &PostParams::default(),
        &ResourceFlavor::build("spot-tainted").taint(taint).build(),
    )
    .await
    .unwrap();
}

pub(crate) fn tolerating(name: &str, lq: &str, cpu: &str) -> Workload {
    let mut ps = podset("main", 1, [("cpu", cpu)]);
    let spec: &mut PodSpec = ps.template.spec.as_mut().unwrap();
    spec.tolerations = Some(vec![Toleration {
        key: Some("spot-taint".into()),
        operator: Some("Equal".into()),
        value: Some("true".into()),
        effect: Some("NoSchedule".into()),
        ..Default::default()
    }]);
    Workload::build(name, "default").queue(lq).podset_spec(ps).build()
}

/// Kueue's `util.FinishWorkloads`: Finished=True, which releases the quota.
pub(crate) async fn finish(wls: &Api<Workload>, name: &str) {
    let mut w = wls.get_status(name).await.unwrap();
    let status = w.status.get_or_insert_with(Default::default);
    quotagate::api::conditions::set(
        &mut status.conditions,
        make_condition(condition::FINISHED, true, "ByTest", "finished by test"),
    );
    wls.replace_status(name, &PostParams::default(), &w)
        .await
        .unwrap();
}

pub(crate) fn cpu_flavor(w: &Workload) -> Option<String> {
    w.admission()?
        .pod_set_assignments
        .first()?
        .flavors
        .get("cpu")
        .cloned()
}

pub(crate) async fn admitted_in(wls: &Api<Workload>, name: &str, cq: &str, flavor: &str) {
    let w = wait_for(wls, name, "quota reserved", reserved).await;
    assert_eq!(w.admission().unwrap().cluster_queue, cq, "{name}");
    assert_eq!(cpu_flavor(&w).as_deref(), Some(flavor), "{name}");
}

pub(crate) async fn pending(wls: &Api<Workload>, name: &str) -> Workload {
    wait_for(wls, name, "pending", |w| {
        condition(w, condition::QUOTA_RESERVED).is_some_and(|c| c.0 == "False")
    })
    .await
}

/// Pending and evaluated with `why`.
pub(crate) async fn pending_with(wls: &Api<Workload>, name: &str, why: &str) {
    wait_for(wls, name, why, |w| {
        condition(w, condition::QUOTA_RESERVED).is_some_and(|c| c.0 == "False" && c.1 == why)
    })
    .await;
}

pub(crate) async fn preempted_with(wls: &Api<Workload>, name: &str, why: &str) -> Workload {
    wait_for(wls, name, why, |w| {
        condition(w, condition::PREEMPTED).is_some_and(|c| c.0 == "True" && c.1 == why)
    })
    .await
}

/// `scheduler_test.go`, "Should admit two small workloads after a big one finishes".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admits_two_small_workloads_after_a_big_one_finishes() {
    let c = Cluster::start(Limits::default().cq("prod-cq", 5000)).await;
    spot_tainted(&c).await;
    c.flavor("on-demand").await;
    c.cluster_queue(
        cq("prod-cq")
            .cohort("prod-cohort")
            .flavor_quotas(fq("spot-tainted", "5", Some("5"), None))
            .flavor_quotas(fq("on-demand", "5", None, None))
            .build(),
    )
    .await;
    c.local_queue("prod-queue", "prod-cq").await;
    let wls = c.workloads();
    c.workload("big-wl", "prod-queue", 0, "5").await;
    admitted_in(&wls, "big-wl", "prod-cq", "on-demand").await;
    c.workload("small-wl-1", "prod-queue", 0, "2.5").await;
    c.workload("small-wl-2", "prod-queue", 0, "2.5").await;
    pending(&wls, "small-wl-1").await;
    pending(&wls, "small-wl-2").await;
    finish(&wls, "big-wl").await;
    admitted_in(&wls, "small-wl-1", "prod-cq", "on-demand").await;
    admitted_in(&wls, "small-wl-2", "prod-cq", "on-demand").await;
    c.quota.assert_safe();
}

/// `scheduler_test.go`, "Using clusterQueue NamespaceSelector": "Should admit workloads from the
/// selected namespaces" once the namespace gets the matching label.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admits_workloads_from_the_selected_namespaces() {
    let c = Cluster::start(Limits::default().cq("cluster-queue-with-selector", 5000)).await;
    c.flavor("on-demand").await;
    let selector = json(serde_json::json!({
        "matchExpressions": [{"key": "dep", "operator": "In", "values": ["eng"]}]
    }));
    c.cluster_queue(
        cq("cluster-queue-with-selector")
            .namespace_selector(Some(selector))
            .flavor("on-demand", [("cpu", "5")])
            .build(),
    )
    .await;
    let nss: Api<Namespace> = Api::all(c.client.clone());
    let foo = Namespace {
        metadata: ObjectMeta {
            name: Some("foo".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    nss.create(&PostParams::default(), &foo).await.unwrap();
    c.local_queue("queue", "cluster-queue-with-selector").await;
    let lqs: Api<LocalQueue> = Api::namespaced(c.client.clone(), "foo");
    lqs.create(
        &PostParams::default(),
        &LocalQueue::build("foo", "foo")
            .cluster_queue("cluster-queue-with-selector")
            .build(),
    )
    .await
    .unwrap();
    let wls = c.workloads();
    let foo_wls: Api<Workload> = Api::namespaced(c.client.clone(), "foo");
    c.workload("wl1", "queue", 0, "1").await;
    foo_wls
        .create(
            &PostParams::default(),
            &Workload::build("wl2", "foo")
                .queue("foo")
                .podset("main", 1, [("cpu", "1")])
                .build(),
        )
        .await
        .unwrap();
    pending_with(&wls, "wl1", reason::MISCONFIGURED).await;
    pending_with(&foo_wls, "wl2", reason::MISCONFIGURED).await;
    let labels = serde_json::json!({"metadata": {"labels": {"dep": "eng"}}});
    nss.patch("default", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap();
    admitted_in(&wls, "wl1", "cluster-queue-with-selector", "on-demand").await;
    pending_with(&foo_wls, "wl2", reason::MISCONFIGURED).await;
    c.quota.assert_safe();
}

/// `scheduler_test.go`, "Referencing resourceFlavors in clusterQueue": "Should be inactive until
/// the flavor is created".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_queue_is_inactive_until_the_flavor_is_created() {
    let c = Cluster::start(Limits::default().cq("foo-cq", 15000)).await;
    c.cluster_queue(
        cq("foo-cq")
            .queueing_strategy(QueueingStrategy::BestEffortFIFO)
            .flavor("foo-flavor", [("cpu", "15")])
            .build(),
    )
    .await;
    c.local_queue("foo-queue", "foo-cq").await;
    let wls = c.workloads();
    c.workload("workload", "foo-queue", 0, "1").await;
    pending(&wls, "workload").await;
    // The ClusterQueue's status is its own write, which may land after the workload's.
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    wait_for(&cqs, "foo-cq", "Active=False/FlavorNotFound", |cq| {
        cq.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::ACTIVE))
            .is_some_and(|c| c.status == "False" && c.reason == "FlavorNotFound")
    })
    .await;
    c.flavor("foo-flavor").await;
    admitted_in(&wls, "workload", "foo-cq", "foo-flavor").await;
    c.quota.assert_safe();
}

/// `scheduler_test.go`, "Using taints in resourceFlavors": "Should schedule workloads on tolerated
/// flavors".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_workloads_on_tolerated_flavors() {
    let c = Cluster::start(Limits::default().cq("cluster-queue", 10000)).await;
    spot_tainted(&c).await;
    c.flavor("on-demand").await;
    c.cluster_queue(
        cq("cluster-queue")
            .queueing_strategy(QueueingStrategy::BestEffortFIFO)
            .cohort("cohort")
            .flavor_quotas(fq("spot-tainted", "5", Some("5"), None))
            .flavor_quotas(fq("on-demand", "5", None, None))
            .build(),
    )
    .await;
    c.local_queue("queue", "cluster-queue").await;
    let wls = c.workloads();
    c.workload("on-demand-wl1", "queue", 0, "5").await;
    admitted_in(&wls, "on-demand-wl1", "cluster-queue", "on-demand").await;
    c.workload("on-demand-wl2", "queue", 0, "5").await;
    pending(&wls, "on-demand-wl2").await;
    wls.create(&PostParams::default(), &tolerating("on-demand-wl3", "queue", "5"))
        .await
        .unwrap();
    admitted_in(&wls, "on-demand-wl3", "cluster-queue", "spot-tainted").await;
    assert!(!reserved(&wls.get("on-demand-wl2").await.unwrap()));
    c.quota.assert_safe();
}

/// `scheduler_test.go`, "Using cohorts for sharing unused resources": "Should admit workloads
/// using borrowed ClusterQueue" (borrowingLimit 0 on the tainted flavor sends the workload to
/// on-demand once a fallback ClusterQueue lends it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admits_workloads_using_borrowed_cluster_queue() {
    let c = Cluster::start(Limits::default().group(&["prod-cq", "fallback-cq"], 20000)).await;
    spot_tainted(&c).await;
    c.flavor("on-demand").await;
    c.cluster_queue(
        cq("prod-cq")
            .cohort("all")
            .flavor_quotas(fq("spot-tainted", "5", Some("0"), None))
            .flavor_quotas(fq("on-demand", "5", None, None))
            .build(),
    )
    .await;
    c.local_queue("queue", "prod-cq").await;
    let wls = c.workloads();
    wls.create(&PostParams::default(), &tolerating("wl", "queue", "10"))
        .await
        .unwrap();
    pending(&wls, "wl").await;
    c.cluster_queue(
        cq("fallback-cq")
            .cohort("all")
            .flavor("spot-tainted", [("cpu", "5")])
            .flavor("on-demand", [("cpu", "5")])
            .build(),
    )
    .await;
    admitted_in(&wls, "wl", "prod-cq", "on-demand").await;
    c.quota.assert_safe();
}

/// `scheduler_test.go`, "Should start workloads that are under min quota before borrowing": with
/// quota freed, the prod workload within its nominal quota goes before the earlier dev workload
/// that would borrow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_workloads_under_min_quota_before_borrowing() {
    let c = Cluster::start(Limits::default().group(&["prod-cq", "dev-cq"], 2000)).await;
    c.flavor("on-demand").await;
    for (name, quota) in [("prod-cq", "2"), ("dev-cq", "0")] {
        c.cluster_queue(
            cq(name)
                .cohort("all")
                .queueing_strategy(QueueingStrategy::StrictFIFO)
                .flavor("on-demand", [("cpu", quota)])
                .build(),
        )
        .await;
    }
    c.local_queue("prod-queue", "prod-cq").await;
    c.local_queue("dev-queue", "dev-cq").await;
    let wls = c.workloads();
    c.workload("p-wl-1", "prod-queue", 0, "2").await;
    admitted_in(&wls, "p-wl-1", "prod-cq", "on-demand").await;
    c.workload("d-wl-1", "dev-queue", 0, "1").await;
    pending(&wls, "d-wl-1").await;
    c.workload("p-wl-2", "prod-queue", 0, "2").await;
    pending(&wls, "p-wl-2").await;
    finish(&wls, "p-wl-1").await;
    admitted_in(&wls, "p-wl-2", "prod-cq", "on-demand").await;
    assert!(
        !reserved(&wls.get("d-wl-1").await.unwrap()),
        "d-wl-1 must still wait"
    );
    finish(&wls, "p-wl-2").await;
    admitted_in(&wls, "d-wl-1", "dev-cq", "on-demand").await;
    c.quota.assert_safe();
}

/// `scheduler_test.go`, "Should try next flavor instead of borrowing" (`whenCanBorrow:
/// TryNextFlavor`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tries_next_flavor_instead_of_borrowing() {
    let c = Cluster::start(Limits::default()).await;
    spot_tainted(&c).await;
    c.flavor("on-demand").await;
    c.cluster_queue(
        cq("prod-cq")
            .cohort("all")
            .flavor_quotas(fq("on-demand", "10", Some("10"), None))
            .build(),
    )
    .await;
    c.cluster_queue(
        cq("dev-cq")
            .cohort("all")
            .flavor_fungibility(fungibility(serde_json::json!({"whenCanBorrow": "TryNextFlavor"})))
            .flavor_quotas(fq("on-demand", "10", Some("10"), None))
            .flavor_quotas(fq("spot-tainted", "11", None, None))
            .build(),
    )
    .await;
    c.local_queue("prod-queue", "prod-cq").await;
    c.local_queue("dev-queue", "dev-cq").await;
    let wls = c.workloads();
    c.workload("wl-1", "prod-queue", 0, "9").await;
    admitted_in(&wls, "wl-1", "prod-cq", "on-demand").await;
    wls.create(&PostParams::default(), &tolerating("wl-2", "dev-queue", "11"))
        .await
        .unwrap();
    admitted_in(&wls, "wl-2", "dev-cq", "spot-tainted").await;
}

/// `scheduler_test.go`, "Should preempt before try next flavor" (`whenCanPreempt: MayStopSearch`,
/// `reclaimWithinCohort: Any`): the borrowing workload in dev-cq is preempted, and the preemptor is
/// admitted in the first flavor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempts_before_trying_next_flavor() {
    let c = Cluster::start(Limits::default()).await;
    c.flavor("on-demand").await;
    c.flavor("spot-untainted").await;
    c.cluster_queue(
        cq("prod-cq")
            .cohort("all")
            .flavor_quotas(fq("on-demand", "10", Some("10"), None))
            .flavor_quotas(fq("spot-untainted", "11", None, None))
            .preemption(preemption(serde_json::json!({"reclaimWithinCohort": "Any"})))
            .flavor_fungibility(fungibility(
                serde_json::json!({"whenCanPreempt": "MayStopSearch"}),
            ))
            .build(),
    )
    .await;
    c.cluster_queue(
        cq("dev-cq")
            .cohort("all")
            .flavor_fungibility(fungibility(serde_json::json!({"whenCanBorrow": "TryNextFlavor"})))
            .flavor_quotas(fq("on-demand", "10", Some("10"), None))
            .build(),
    )
    .await;
    c.local_queue("prod-queue", "prod-cq").await;
    c.local_queue("dev-queue", "dev-cq").await;
    let wls = c.workloads();
    c.workload("wl-1", "dev-queue", 0, "9").await;
    c.workload("wl-2", "dev-queue", 1, "9").await;
    wait_for(&wls, "wl-1", "admitted", |w| w.is_admitted()).await;
    wait_for(&wls, "wl-2", "admitted", |w| w.is_admitted()).await;
    c.workload("wl-3", "prod-queue", 0, "5").await;
    preempted_with(&wls, "wl-1", reason::IN_COHORT_RECLAMATION).await;
    admitted_in(&wls, "wl-3", "prod-cq", "on-demand").await;
    assert!(
        reserved(&wls.get("wl-2").await.unwrap()),
        "only wl-1 is preempted"
    );
}

/// `scheduler_test.go`, "Using cohorts for sharing with LendingLimit": "Should admit workloads
/// using borrowed ClusterQueue": 9 CPU needs 4 lent by dev-cq (lendingLimit 4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admits_workloads_borrowing_within_the_lending_limit() {
    let c = Cluster::start(Limits::default().group(&["prod-cq", "dev-cq"], 10000)).await;
    c.flavor("on-demand").await;
    c.cluster_queue(
        cq("prod-cq")
            .cohort("all")
            .flavor_quotas(fq("on-demand", "5", None, Some("1")))
            .build(),
    )
    .await;
    c.local_queue("queue", "prod-cq").await;
    let wls = c.workloads();
    c.workload("wl", "queue", 0, "9").await;
    pending(&wls, "wl").await;
    c.cluster_queue(
        cq("dev-cq")
            .cohort("all")
            .flavor_quotas(fq("on-demand", "5", None, Some("4")))
            .build(),
    )
    .await;
    admitted_in(&wls, "wl", "prod-cq", "on-demand").await;
    c.quota.assert_safe();
}

/// `scheduler_test.go`, "Queueing with StrictFIFO": "Should schedule workloads by their priority
/// strictly" (wl3 fits but waits behind wl2) and "Workloads not matching namespaceSelector should
/// not block others".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_fifo_blocks_behind_the_head_but_not_behind_misconfigured() {
    let c = Cluster::start(Limits::default().cq("strict-fifo-cq", 5000)).await;
    c.flavor("on-demand").await;
    let selector = json(serde_json::json!({
        "matchExpressions": [{"key": "dep", "operator": "In", "values": ["eng"]}]
    }));
    c.cluster_queue(
        cq("strict-fifo-cq")
            .queueing_strategy(QueueingStrategy::StrictFIFO)
            .namespace_selector(Some(selector))
            .cohort("cohort")
            .flavor_quotas(fq("on-demand", "5", Some("0"), None))
            .build(),
    )
    .await;
    let nss: Api<Namespace> = Api::all(c.client.clone());
    for (ns, labels) in [("matching", Some("eng")), ("other", None)] {
        let n = Namespace {
            metadata: ObjectMeta {
                name: Some(ns.into()),
                labels: labels.map(|v| BTreeMap::from([("dep".to_string(), v.to_string())])),
                ..Default::default()
            },
            ..Default::default()
        };
        nss.create(&PostParams::default(), &n).await.unwrap();
        let lqs: Api<LocalQueue> = Api::namespaced(c.client.clone(), ns);
        lqs.create(
            &PostParams::default(),
            &LocalQueue::build("q", ns).cluster_queue("strict-fifo-cq").build(),
        )
        .await
        .unwrap();
    }
    let matching: Api<Workload> = Api::namespaced(c.client.clone(), "matching");
    let other: Api<Workload> = Api::namespaced(c.client.clone(), "other");
    let mk = |name: &str, ns: &str, cpu: &str, prio: i32| {
        Workload::build(name, ns)
            .queue("q")
            .priority(prio)
            .podset("main", 1, [("cpu", cpu)])
            .build()
    };
    // First spec: wl2 (5) cannot fit beside wl1 (2); wl3 (1) would fit but waits.
    matching
        .create(&PostParams::default(), &mk("wl1", "matching", "2", 100))
        .await
        .unwrap();
    matching
        .create(&PostParams::default(), &mk("wl2", "matching", "5", 10))
        .await
        .unwrap();
    matching
        .create(&PostParams::default(), &mk("wl3", "matching", "1", 1))
        .await
        .unwrap();
    admitted_in(&matching, "wl1", "strict-fifo-cq", "on-demand").await;
    pending_with(&matching, "wl2", reason::WAITING_FOR_QUOTA).await;
    let wl3 = pending(&matching, "wl3").await;
    assert!(!reserved(&wl3));
    // Second spec: a workload from a namespace the selector rejects does not block.
    other
        .create(&PostParams::default(), &mk("wl4", "other", "5", 1000))
        .await
        .unwrap();
    pending_with(&other, "wl4", reason::MISCONFIGURED).await;
    matching.delete("wl2", &Default::default()).await.unwrap();
    admitted_in(&matching, "wl3", "strict-fifo-cq", "on-demand").await;
    c.quota.assert_safe();
}

/// `scheduler_test.go`, "Using clusterQueue stop policy": "Should evict workloads when stop policy
/// is drain", then admits again once the policy is None.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_policy_drain_evicts_and_none_readmits() {
    let c = Cluster::start(Limits::default().cq("cq", 5000)).await;
    c.flavor("on-demand").await;
    c.cluster_queue(cq("cq").flavor("on-demand", [("cpu", "5")]).build())
        .await;
    c.local_queue("q", "cq").await;
    let wls = c.workloads();
    c.workload("wl", "q", 0, "4").await;
    wait_for(&wls, "wl", "admitted", |w| w.is_admitted()).await;
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    let drain = serde_json::json!({"spec": {"stopPolicy": StopPolicy::HoldAndDrain}});
    cqs.patch("cq", &PatchParams::default(), &Patch::Merge(&drain))
        .await
        .unwrap();
    let w = wait_for(&wls, "wl", "evicted", |w| {
        condition(w, condition::EVICTED).is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(
        condition(&w, condition::EVICTED).unwrap().1,
        reason::CLUSTER_QUEUE_STOPPED
    );
    wait_for(&wls, "wl", "released", |w| !reserved(w)).await;
    let none = serde_json::json!({"spec": {"stopPolicy": StopPolicy::None}});
    cqs.patch("cq", &PatchParams::default(), &Patch::Merge(&none))
        .await
        .unwrap();
    wait_for(&wls, "wl", "admitted again", |w| w.is_admitted()).await;
    c.quota.assert_safe();
}
