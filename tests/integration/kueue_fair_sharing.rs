//! Kueue's fair sharing on the embedded cluster with the real manager, fair sharing turned on as
//! Kueue's `fairSharing` config section turns it on. Ported from
//! `test/integration/singlecluster/scheduler/fairsharing/fair_sharing_test.go`; the expectations
//! are Kueue's, the code ours.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::Api;
use quotagate::api::kueue::constants::{condition, reason};
use quotagate::api::kueue::{ClusterQueue, Cohort, FlavorQuotas, Workload};
use quotagate::queue::FairSharingConfig;

use crate::kueue_scheduler_more::{finish, fungibility, pending, preemption};
use crate::support::*;

/// A cluster whose manager runs with fair sharing on (Kueue's default strategies).
async fn fair_cluster(limits: Limits) -> Cluster {
    let mut c = Cluster::start(limits).await;
    c.restart_manager_with(|o| o.fair_sharing = Some(FairSharingConfig::default()))
        .await;
    c
}

async fn share_is(c: &Cluster, cq: &str, want: i64) {
    let api: Api<ClusterQueue> = Api::all(c.client.clone());
    wait_for(
        &api,
        cq,
        &format!("status.fairSharing.weightedShare {want}"),
        |q| {
            q.status
                .as_ref()
                .and_then(|s| s.fair_sharing.as_ref())
                .is_some_and(|f| f.weighted_share == want)
        },
    )
    .await;
}

/// Waits, on the quota watch's events, until `cond` holds; panics after `WAIT`.
async fn until(c: &Cluster, what: &str, cond: impl Fn(&Cluster) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !cond(c) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
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
            ClusterQueue::build(name)
                .cohort("all")
                .flavor("default", [("cpu", cpu)])
                .build(),
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
    let admitted_in_a = |c: &Cluster| {
        (0..10)
            .filter(|i| c.quota.admissions(&format!("default/a-{i}")) > 0)
            .count()
    };
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
        .create(
            &Default::default(),
            &Cohort::build("top-cohort")
                .flavor("default", [("cpu", "8")])
                .build(),
        )
        .await
        .unwrap();
    for name in ["a", "b"] {
        let mut q = with_all_namespaces(
            ClusterQueue::build(name)
                .cohort("top-cohort")
                .fair_weight("0")
                .flavor("default", [("cpu", "0")])
                .build(),
        );
        q.spec.preemption =
            Some(serde_json::from_value(serde_json::json!({"reclaimWithinCohort": "Any"})).unwrap());
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
    assert_eq!(
        condition(&a2, condition::PREEMPTED).unwrap().1,
        reason::IN_COHORT_FAIR_SHARING
    );
    wait_for(&wls, "b1", "admitted", |w| w.is_admitted()).await;
    // a2 evaluated again with b1 admitted: no victim allowed, it waits for quota.
    wait_for(&wls, "a2", "pending without a preemption", |w| {
        !reserved(w)
            && condition(w, condition::QUOTA_RESERVED)
                .is_some_and(|c| c.0 == "False" && c.1 == reason::WAITING_FOR_QUOTA)
    })
    .await;
    let a1 = wls.get("a1").await.unwrap();
    assert!(
        a1.is_admitted() && condition(&a1, condition::PREEMPTED).is_none_or(|c| c.0 != "True"),
        "{a1:?}"
    );
    let b1 = wls.get("b1").await.unwrap();
    assert!(
        b1.is_admitted() && condition(&b1, condition::PREEMPTED).is_none_or(|c| c.0 != "True"),
        "{b1:?}"
    );
    assert_eq!((c.quota.reserved_in("a"), c.quota.reserved_in("b")), (1, 1));
    share_is(&c, "a", i64::MAX).await;
    share_is(&c, "b", i64::MAX).await;
    wait_for(&cohorts, "top-cohort", "weightedShare 0", |co| {
        co.status
            .as_ref()
            .and_then(|s| s.fair_sharing.as_ref())
            .is_some_and(|f| f.weighted_share == 0)
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
        Cohort::build("best-effort")
            .parent("root")
            .fair_weight("0.5")
            .build(),
    ] {
        cohorts.create(&Default::default(), &co).await.unwrap();
    }
    for q in queues {
        let mut cq = with_all_namespaces(
            ClusterQueue::build(&format!("{q}-queue"))
                .cohort(q)
                .flavor("default", [("cpu", "0")])
                .build(),
        );
        if q != "best-effort" {
            cq.spec.preemption = Some(
                serde_json::from_value(serde_json::json!({"reclaimWithinCohort": "LowerPriority"})).unwrap(),
            );
        }
        c.cluster_queue(cq).await;
        c.local_queue(&format!("{q}-queue"), &format!("{q}-queue")).await;
    }
    for i in 0..6 {
        c.workload(&format!("be-low-{i}"), "best-effort-queue", -1, "1")
            .await;
        c.workload(&format!("physics-low-{i}"), "physics-queue", -1, "1")
            .await;
    }
    c.quota.wait_reserved("best-effort-queue", 6).await;
    c.quota.wait_reserved("physics-queue", 6).await;
    let cohort_share = |name: &'static str, want: i64| {
        let cohorts = cohorts.clone();
        async move {
            wait_for(&cohorts, name, &format!("weightedShare {want}"), |co| {
                co.status
                    .as_ref()
                    .and_then(|s| s.fair_sharing.as_ref())
                    .is_some_and(|f| f.weighted_share == want)
            })
            .await;
        }
    };
    // best-effort borrows 6 of 12 with weight 0.5; physics 6 of 12 at its parent's level.
    cohort_share("best-effort", 1000).await;
    cohort_share("physics", 500).await;

    for i in 0..6 {
        for q in queues {
            c.workload(&format!("{q}-high-{i}"), &format!("{q}-queue"), 100, "1")
                .await;
        }
    }
    for (q, n) in [
        ("best-effort-queue", 4),
        ("chemistry-queue", 2),
        ("physics-queue", 2),
        ("llm-queue", 4),
    ] {
        c.quota.wait_reserved(q, n).await;
    }
    // Rounded up, as Kueue's status writer does: 4/12/0.5, 8/12, 2/12, 2/12, 4/12/2 (per mille).
    for (co, want) in [
        ("best-effort", 667),
        ("research", 667),
        ("chemistry", 167),
        ("physics", 167),
        ("llm", 167),
    ] {
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
        Cohort::build("bank")
            .parent("first-right")
            .flavor("default", [("cpu", "10")])
            .build(),
    ] {
        cohorts.create(&Default::default(), &co).await.unwrap();
    }
    for q in ["second-left", "second-right"] {
        c.cluster_queue(with_all_namespaces(
            ClusterQueue::build(q)
                .cohort(q)
                .flavor("default", [("cpu", "2")])
                .build(),
        ))
        .await;
        c.local_queue(q, q).await;
    }
    let share = |name: &'static str, want: i64| {
        let cohorts = cohorts.clone();
        async move {
            wait_for(&cohorts, name, &format!("weightedShare {want}"), |co| {
                co.status
                    .as_ref()
                    .and_then(|s| s.fair_sharing.as_ref())
                    .is_some_and(|f| f.weighted_share == want)
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
    for (co, want) in [
        ("first-left", 429),
        ("first-right", 0),
        ("second-left", 215),
        ("second-right", 215),
        ("bank", 0),
    ] {
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
        let mut q = with_all_namespaces(
            ClusterQueue::build(name)
                .cohort("all")
                .flavor("default", [("cpu", "3")])
                .build(),
        );
        q.spec.preemption = Some(
            serde_json::from_value(
                serde_json::json!({"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}),
            )
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

// ---- More of `fair_sharing_test.go`. Kueue's suite finishes each eviction by hand
// (`FinishEvictionForWorkloads`); our admission loop lets a plain Workload go at once. Where a spec
// needs an eviction to stay unfinished for a while, its Workloads get a controller owner (as a
// job's Workload has), so the loop evicts them but leaves the quota held until `finish_eviction`.

async fn cohort_share_is(c: &Cluster, name: &str, want: i64) {
    let api: Api<Cohort> = Api::all(c.client.clone());
    wait_for(
        &api,
        name,
        &format!("status.fairSharing.weightedShare {want}"),
        |co| {
            co.status
                .as_ref()
                .and_then(|s| s.fair_sharing.as_ref())
                .is_some_and(|f| f.weighted_share == want)
        },
    )
    .await;
}

async fn create_cohort(c: &Cluster, co: Cohort) {
    let api: Api<Cohort> = Api::all(c.client.clone());
    api.create(&Default::default(), &co).await.unwrap();
}

/// A ClusterQueue and its LocalQueue of the same name, once the manager shows the ClusterQueue
/// active (as Kueue's `createQueue` waits): a workload created after it is evaluated against it.
async fn queue(c: &Cluster, cq: ClusterQueue) {
    let name = cq.metadata.name.clone().unwrap();
    c.cluster_queue(with_all_namespaces(cq)).await;
    let api: Api<ClusterQueue> = Api::all(c.client.clone());
    wait_for(&api, &name, "active", |q| {
        q.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == condition::ACTIVE && c.status == "True")
        })
    })
    .await;
    c.local_queue(&name, &name).await;
}

/// Kueue's fair-sharing fixtures' fungibility and preemption (TryNextFlavor; Any / LowerPriority).
fn try_next_any_lower(cq: quotagate::api::kueue::builders::ClusterQueueBuilder) -> ClusterQueue {
    cq.flavor_fungibility(fungibility(
        serde_json::json!({"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}),
    ))
    .preemption(preemption(
        serde_json::json!({"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}),
    ))
    .build()
}

/// The owner of held Workloads: a ConfigMap standing for their job.
async fn job_owner(c: &Cluster) -> OwnerReference {
    let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), "default");
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("job".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let cm = api.create(&Default::default(), &cm).await.unwrap();
    OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "job".into(),
        uid: cm.metadata.uid.unwrap(),
        controller: Some(true),
        ..Default::default()
    }
}

/// A one-pod Workload with these requests, owned by `owner` when given.
async fn workload_with(
    c: &Cluster,
    name: &str,
    lq: &str,
    priority: i32,
    requests: &[(&str, &str)],
    owner: Option<&OwnerReference>,
) {
    let mut wl = Workload::build(name, "default")
        .queue(lq)
        .priority(priority)
        .podset("main", 1, requests.iter().copied())
        .build();
    wl.metadata.owner_references = owner.map(|o| vec![o.clone()]);
    c.workloads().create(&Default::default(), &wl).await.unwrap();
}

async fn preempted(wls: &Api<Workload>, name: &str) -> Workload {
    wait_for(wls, name, "evicted by preemption", |w| {
        condition(w, condition::EVICTED).is_some_and(|c| c.0 == "True" && c.1 == reason::PREEMPTED)
    })
    .await
}

/// Kueue's `FinishEvictionForWorkloads`: once evicted, the held Workload gives its quota back
/// (written again on a conflict, as Kueue's helper retries).
async fn finish_eviction(wls: &Api<Workload>, name: &str) {
    let mut w = preempted(wls, name).await;
    loop {
        let status = quotagate::admission::clear_reservation(&w, jiff::Timestamp::now())
            .expect("an evicted Workload holding quota");
        w.status = Some(status);
        match wls.replace_status(name, &Default::default(), &w).await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => w = wls.get(name).await.unwrap(),
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

/// Pending, and evaluated by the scheduler with a message containing `part`.
async fn pending_saying(wls: &Api<Workload>, name: &str, part: &str) -> Workload {
    wait_for(wls, name, &format!("pending: {part}"), |w| {
        !reserved(w)
            && condition(w, condition::QUOTA_RESERVED).is_some_and(|c| c.0 == "False" && c.2.contains(part))
    })
    .await
}

/// `fair_sharing_test.go`, "Preemption is disabled" / "Shouldn't reserve quota because not enough
/// resources": a 10-CPU workload in a, whose cohort has 8 CPU in all, is refused with Kueue's
/// reason and message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn does_not_reserve_quota_beyond_the_cohort() {
    let c = fair_cluster(Limits::default().group(&["a", "b", "shared"], 8000)).await;
    c.flavor("default").await;
    for (name, cpu) in [("a", "3"), ("b", "1"), ("shared", "4")] {
        queue(
            &c,
            ClusterQueue::build(name)
                .cohort("all")
                .flavor("default", [("cpu", cpu)])
                .build(),
        )
        .await;
    }
    c.workload("big", "a", 0, "10").await;
    let want = "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, previously considered podsets requests (0) + current podset request (10) > maximum capacity (8)";
    wait_for(&c.workloads(), "big", want, |w| {
        condition(w, condition::QUOTA_RESERVED)
            .is_some_and(|(s, r, m)| s == "False" && r == reason::EXCEEDS_MAX_QUOTA && m == want)
    })
    .await;
    assert_eq!(c.quota.admissions("default/big"), 0);
}

/// `fair_sharing_test.go`, "Preemption is enabled and CQs have 0 weight" / "Should prevent other
/// workloads from stealing quota when preemptor is waiting for multiple evictions", with Kueue's
/// `PrioritizePreemptorWorkloads` gate on as the spec sets it: cq-1 has the CPU and cq-2 the
/// memory; wl-a and wl-b borrow 1 CPU each in cq-2 (their evictions held), then cq-1's preemptor
/// needs all 10 CPU and cq-2's 10 memory and evicts both. wl-a, released first, is evaluated while
/// wl-b still holds its CPU and must not take back the CPU the preemptor waits for (without the
/// gate it would: cq-2's share is the lower); once wl-b lets go the preemptor is admitted, and
/// wl-a was reserved only once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemptor_waiting_for_several_evictions_keeps_its_quota() {
    let mut c = Cluster::start(Limits::default().group(&["cq-1", "cq-2"], 10_000)).await;
    c.restart_manager_with(|o| {
        o.fair_sharing = Some(FairSharingConfig::default());
        o.prioritize_preemptor_workloads = true;
    })
    .await;
    c.flavor("default").await;
    create_cohort(&c, Cohort::build("thrash-cohort").build()).await;
    for (name, cpu, mem) in [("cq-1", "10", "0"), ("cq-2", "0", "10")] {
        queue(
            &c,
            ClusterQueue::build(name)
                .cohort("thrash-cohort")
                .flavor("default", [("cpu", cpu), ("memory", mem)])
                .preemption(preemption(serde_json::json!({"reclaimWithinCohort": "Any"})))
                .build(),
        )
        .await;
    }
    let owner = job_owner(&c).await;
    let wls = c.workloads();
    for n in ["wl-a", "wl-b"] {
        workload_with(&c, n, "cq-2", 100, &[("cpu", "1"), ("memory", "0")], Some(&owner)).await;
    }
    for n in ["wl-a", "wl-b"] {
        wait_for(&wls, n, "admitted", |w| w.is_admitted()).await;
    }
    workload_with(
        &c,
        "preemptor",
        "cq-1",
        0,
        &[("cpu", "10"), ("memory", "10")],
        None,
    )
    .await;
    preempted(&wls, "wl-a").await;
    preempted(&wls, "wl-b").await;
    finish_eviction(&wls, "wl-a").await;
    // Kueue checks this for a while; here the scheduler's own verdict on wl-a, written after it
    // let go, is the event: it waits for quota instead of taking it.
    let a = pending_saying(&wls, "wl-a", "insufficient unused quota").await;
    assert_eq!(
        condition(&a, condition::QUOTA_RESERVED).unwrap().1,
        reason::WAITING_FOR_QUOTA
    );
    finish_eviction(&wls, "wl-b").await;
    wait_for(&wls, "preemptor", "admitted", |w| w.is_admitted()).await;
    assert_eq!(
        c.quota.admissions("default/wl-a"),
        1,
        "wl-a took quota back in the interim"
    );
    assert!(!reserved(&wls.get("wl-a").await.unwrap()));
    c.quota.assert_safe();
}

/// "ClusterQueue head is ineligible for admission due to DominantResourceShare" (kueue#7101):
/// cohort-a (under root-cohort) has 9 CPU of flavor1; cq-p1 and cq-p2 have none. cq-p1 fills 8 of
/// it with four 2-CPU workloads.
async fn drs_setup() -> Cluster {
    let c = fair_cluster(Limits::default().group(&["cq-p1", "cq-p2"], 9000)).await;
    c.flavor("flavor1").await;
    create_cohort(
        &c,
        Cohort::build("cohort-a")
            .parent("root-cohort")
            .fair_weight("1")
            .flavor("flavor1", [("cpu", "9")])
            .build(),
    )
    .await;
    for name in ["cq-p1", "cq-p2"] {
        queue(
            &c,
            try_next_any_lower(
                ClusterQueue::build(name)
                    .cohort("cohort-a")
                    .fair_weight("1")
                    .flavor("flavor1", [("cpu", "0")]),
            ),
        )
        .await;
    }
    for i in 0..4 {
        c.workload(&format!("p1-{i}"), "cq-p1", 0, "2").await;
    }
    c.quota.wait_reserved("cq-p1", 4).await;
    c
}

/// The end of every DRS spec: cq-p2's `admits` is in, two of cq-p1's four were preempted (and not
/// admitted again), `never` was never admitted, and the shares are 4/9 and `p2_cpu`/9.
async fn drs_outcome(c: &Cluster, admits: &str, never: &[&str], p2_cpu: i64) {
    let wls = c.workloads();
    wait_for(&wls, admits, "admitted", |w| w.is_admitted()).await;
    c.quota.wait_reserved("cq-p1", 2).await;
    c.quota.wait_reserved("cq-p2", 1).await;
    share_is(c, "cq-p1", 445).await;
    share_is(c, "cq-p2", (p2_cpu * 1000 + 8) / 9).await;
    for i in 0..4 {
        assert_eq!(c.quota.admissions(&format!("default/p1-{i}")), 1, "p1-{i}");
    }
    for n in never {
        assert_eq!(c.quota.admissions(&format!("default/{n}")), 0, "{n}");
    }
    c.quota.assert_safe();
}

/// `fair_sharing_test.go`, DominantResourceShare / "workload of size 5 preempts using
/// LessThanInitialShare policy and admits": the first victim satisfies
/// LessThanOrEqualToFinalShare (5/9 <= 6/9), the second only LessThanInitialShare (5/9 < 6/9).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drs_size_5_preempts_by_less_than_initial_share() {
    let c = drs_setup().await;
    c.workload("p2-5", "cq-p2", 0, "5").await;
    drs_outcome(&c, "p2-5", &[], 5).await;
}

/// `fair_sharing_test.go`, DominantResourceShare / "workload of size 5 admits with inadmissible
/// higher priority workload at ClusterQueue head": a 6-CPU head of priority 999 finds no second
/// victim (6/9 <= 4/9 and 6/9 < 6/9 both false) and stays pending; the 5-CPU workload behind it
/// is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drs_size_5_admits_behind_an_inadmissible_head() {
    let c = drs_setup().await;
    c.workload("p2-6", "cq-p2", 999, "6").await;
    pending(&c.workloads(), "p2-6").await;
    c.workload("p2-5", "cq-p2", 0, "5").await;
    drs_outcome(&c, "p2-5", &["p2-6"], 5).await;
}

/// `fair_sharing_test.go`, DominantResourceShare / "workload of size 4 admits with inadmissible
/// higher priority workload at ClusterQueue head": the 4-CPU workload's second victim satisfies
/// LessThanOrEqualToFinalShare (4/9 <= 4/9).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drs_size_4_admits_behind_an_inadmissible_head() {
    let c = drs_setup().await;
    c.workload("p2-6", "cq-p2", 999, "6").await;
    pending(&c.workloads(), "p2-6").await;
    c.workload("p2-4", "cq-p2", 0, "4").await;
    drs_outcome(&c, "p2-4", &["p2-6"], 4).await;
}

/// `fair_sharing_test.go`, DominantResourceShare / "workload admits when several higher priority
/// blocking workloads in front": 7- and 6-CPU heads of priority 999 stay pending, the 5-CPU
/// workload behind them is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drs_admits_behind_several_inadmissible_heads() {
    let c = drs_setup().await;
    c.workload("p2-7", "cq-p2", 999, "7").await;
    c.workload("p2-6", "cq-p2", 999, "6").await;
    pending(&c.workloads(), "p2-7").await;
    pending(&c.workloads(), "p2-6").await;
    c.workload("p2-5", "cq-p2", 0, "5").await;
    drs_outcome(&c, "p2-5", &["p2-7", "p2-6"], 5).await;
}

/// "ClusterQueue head has inadmissible workload" (kueue#6929): cohort-a (under root, 3 CPU of
/// flavor1) holds cq1, root holds cq2, neither with quota. cq2 borrows 2 CPU with two 1-CPU
/// workloads (held by a job owner when `held`).
async fn head_setup(held: bool) -> Cluster {
    let c = fair_cluster(Limits::default().group(&["cq1", "cq2"], 3000)).await;
    c.flavor("flavor1").await;
    create_cohort(
        &c,
        Cohort::build("cohort-a")
            .parent("root")
            .fair_weight("1")
            .flavor("flavor1", [("cpu", "3")])
            .build(),
    )
    .await;
    for (name, cohort) in [("cq1", "cohort-a"), ("cq2", "root")] {
        queue(
            &c,
            try_next_any_lower(
                ClusterQueue::build(name)
                    .cohort(cohort)
                    .fair_weight("1")
                    .flavor("flavor1", [("cpu", "0")]),
            ),
        )
        .await;
    }
    let owner = if held { Some(job_owner(&c).await) } else { None };
    for n in ["cq2-0", "cq2-1"] {
        workload_with(&c, n, "cq2", 0, &[("cpu", "1")], owner.as_ref()).await;
    }
    c.quota.wait_reserved("cq2", 2).await;
    c
}

/// The end of every head spec: `admits` holds cohort-a's CPU in cq1 (share 1000), cq2's two
/// were preempted once and hold nothing (share 0), `never` was never admitted.
async fn head_outcome(c: &Cluster, admits: &str, never: &[&str]) {
    let wls = c.workloads();
    wait_for(&wls, admits, "admitted", |w| w.is_admitted()).await;
    c.quota.wait_reserved("cq1", 1).await;
    c.quota.wait_reserved("cq2", 0).await;
    share_is(c, "cq1", 1000).await;
    share_is(c, "cq2", 0).await;
    for n in ["cq2-0", "cq2-1"] {
        assert_eq!(c.quota.admissions(&format!("default/{n}")), 1, "{n}");
    }
    for n in never {
        assert_eq!(c.quota.admissions(&format!("default/{n}")), 0, "{n}");
    }
    c.quota.assert_safe();
}

/// `fair_sharing_test.go`, "ClusterQueue head has inadmissible workload" / "workload which fits
/// behind ClusterQueue head is able to admit": cq1's 4-CPU head of priority 999 can never fit
/// in cohort-a's 3; the 3-CPU workload behind it reclaims cohort-a from cq2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_inadmissible_workload_behind_it_admits() {
    let c = head_setup(false).await;
    c.workload("cq1-4", "cq1", 999, "4").await;
    pending(&c.workloads(), "cq1-4").await;
    c.workload("cq1-3", "cq1", 0, "3").await;
    head_outcome(&c, "cq1-3", &["cq1-4"]).await;
}

/// `fair_sharing_test.go`, "ClusterQueue head has inadmissible workload" / "sticky workload
/// becomes inadmissible. next workload admits": cq1's 3-CPU workload of priority 99 preempts cq2's
/// two (their evictions held); a 2-CPU one waits behind it. cohort-a shrinks to 2 CPU, so the
/// preemptor no longer fits at all; when the evictions finish, the 2-CPU workload is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_sticky_workload_becomes_inadmissible() {
    let c = head_setup(true).await;
    let wls = c.workloads();
    c.workload("sticky", "cq1", 99, "3").await;
    pending_saying(&wls, "sticky", "insufficient unused quota").await;
    preempted(&wls, "cq2-0").await;
    preempted(&wls, "cq2-1").await;
    c.workload("next", "cq1", 9, "2").await;
    pending(&wls, "next").await;
    let cohorts: Api<Cohort> = Api::all(c.client.clone());
    let mut co = cohorts.get("cohort-a").await.unwrap();
    co.spec.resource_groups.as_mut().unwrap()[0].flavors[0] =
        FlavorQuotas::build("flavor1").resource("cpu", "2").build();
    cohorts
        .replace("cohort-a", &Default::default(), &co)
        .await
        .unwrap();
    pending_saying(&wls, "sticky", "insufficient quota for cpu in flavor flavor1").await;
    finish_eviction(&wls, "cq2-0").await;
    finish_eviction(&wls, "cq2-1").await;
    head_outcome(&c, "next", &["sticky"]).await;
}

/// `fair_sharing_test.go`, "ClusterQueue head has inadmissible workload" / "sticky workload
/// deleted, next workload can admit": cq1's 3-CPU workload of priority 99 preempts cq2's two
/// (their evictions held) and is deleted before they finish; the next 3-CPU workload takes its
/// place once they do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_sticky_workload_deleted() {
    let c = head_setup(true).await;
    let wls = c.workloads();
    c.workload("sticky", "cq1", 99, "3").await;
    pending(&wls, "sticky").await;
    preempted(&wls, "cq2-0").await;
    preempted(&wls, "cq2-1").await;
    c.workload("next", "cq1", 0, "3").await;
    pending(&wls, "next").await;
    wls.delete("sticky", &Default::default()).await.unwrap();
    finish_eviction(&wls, "cq2-0").await;
    finish_eviction(&wls, "cq2-1").await;
    head_outcome(&c, "next", &["sticky"]).await;
}

/// `fair_sharing_test.go`, "Preemption is enabled in fairsharing and there are large values of
/// quota and weights" / "Queue can reclaim its nominal quota": a and b have 600 CPU each and weight
/// 300; a borrows 400 of b's with ten 100-CPU workloads, then b's 500-CPU workload reclaims its
/// nominal quota by preempting three of them (shares that large must still compare as Kueue's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_quota_and_weights_reclaim_nominal_quota() {
    let c = fair_cluster(Limits::default().group(&["a", "b"], 1_200_000)).await;
    c.flavor("default").await;
    for name in ["a", "b"] {
        queue(
            &c,
            ClusterQueue::build(name)
                .cohort("all")
                .fair_weight("300")
                .flavor("default", [("cpu", "600")])
                .preemption(preemption(
                    serde_json::json!({"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}),
                ))
                .build(),
        )
        .await;
    }
    for i in 0..10 {
        c.workload(&format!("a-{i}"), "a", 0, "100").await;
    }
    c.quota.wait_reserved("a", 10).await;
    c.workload("b-0", "b", 0, "500").await;
    wait_for(&c.workloads(), "b-0", "admitted", |w| w.is_admitted()).await;
    c.quota.wait_reserved("a", 7).await;
    c.quota.wait_reserved("b", 1).await;
    c.quota.assert_safe();
}

/// `fair_sharing_test.go`, "Preemption is enabled in fairsharing and there are best effort and
/// guaranteed workloads" / "Guaranteed workloads cause preemption of a single best effort
/// workload": best-effort-a and best-effort-b (no quota) each borrow 4 of guaranteed's 8 CPU;
/// guaranteed's 4-CPU workload reclaims by preempting only one of them, the lower-priority one.
/// Here best-effort-b's workload (priority 1) is created first, so it is the older one: the
/// ordering by admission time would pick best-effort-a's, and only priority picks b's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guaranteed_workload_preempts_a_single_best_effort_workload() {
    let c =
        fair_cluster(Limits::default().group(&["best-effort-a", "best-effort-b", "guaranteed"], 8000)).await;
    c.flavor("default").await;
    for name in ["best-effort-a", "best-effort-b"] {
        queue(
            &c,
            ClusterQueue::build(name)
                .cohort("all")
                .flavor("default", [("cpu", "0")])
                .build(),
        )
        .await;
    }
    queue(
        &c,
        ClusterQueue::build("guaranteed")
            .cohort("all")
            .flavor("default", [("cpu", "8")])
            .preemption(preemption(serde_json::json!({"reclaimWithinCohort": "Any"})))
            .build(),
    )
    .await;
    let wls = c.workloads();
    c.workload("be-b", "best-effort-b", 1, "4").await;
    wait_for(&wls, "be-b", "admitted", |w| w.is_admitted()).await;
    c.workload("be-a", "best-effort-a", 2, "4").await;
    wait_for(&wls, "be-a", "admitted", |w| w.is_admitted()).await;
    c.workload("guaranteed", "guaranteed", 0, "4").await;
    preempted(&wls, "be-b").await;
    wait_for(&wls, "guaranteed", "admitted", |w| w.is_admitted()).await;
    let a = wls.get("be-a").await.unwrap();
    assert!(
        a.is_admitted() && condition(&a, condition::EVICTED).is_none(),
        "{a:?}"
    );
    assert_eq!(c.quota.admissions("default/be-a"), 1);
    assert!(!reserved(&wls.get("be-b").await.unwrap()));
    c.quota.assert_safe();
}

/// `fair_sharing_test.go`, "using hierarchical cohorts with several flavors" / "Prefers flavor
/// with remaining guarantees at Cohort level": cohort-a (cq-p1, cq-p2, cq-p3: 8 CPU of flavor1 and
/// 10 of flavor2 in all) and cohort-b (cq-p4: 2 of flavor1) under root-cohort, every quota with a
/// borrowing limit of 10. cq-p1's 18 workloads all fit within cohort-a's 18, so they go to
/// whichever flavor cohort-a still has a guarantee in, never borrowing cq-p4's flavor1 through
/// the root: cq-p1 borrows 12 of the 20 it can reach (share 600) and cohort-a none (0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefers_flavor_with_remaining_guarantees_at_cohort_level() {
    let c = fair_cluster(Limits::default().group(&["cq-p1", "cq-p2", "cq-p3", "cq-p4"], 20_000)).await;
    c.flavor("flavor1").await;
    c.flavor("flavor2").await;
    let limited = |f: &str, cpu: &str| {
        FlavorQuotas::build(f)
            .resource_with_limits("cpu", cpu, Some("10"), None)
            .build()
    };
    create_cohort(&c, Cohort::build("root-cohort").build()).await;
    for co in ["cohort-a", "cohort-b"] {
        create_cohort(
            &c,
            Cohort::build(co)
                .parent("root-cohort")
                .fair_weight("1")
                .flavor_quotas(limited("flavor1", "0"))
                .flavor_quotas(limited("flavor2", "0"))
                .build(),
        )
        .await;
    }
    for (name, cohort, f1, f2) in [
        ("cq-p1", "cohort-a", "3", "3"),
        ("cq-p2", "cohort-a", "3", "3"),
        ("cq-p3", "cohort-a", "2", "4"),
        ("cq-p4", "cohort-b", "2", "0"),
    ] {
        queue(
            &c,
            try_next_any_lower(
                ClusterQueue::build(name)
                    .cohort(cohort)
                    .fair_weight("1")
                    .flavor_quotas(limited("flavor1", f1))
                    .flavor_quotas(limited("flavor2", f2)),
            ),
        )
        .await;
    }
    for i in 0..18 {
        c.workload(&format!("p1-{i}"), "cq-p1", 0, "1").await;
    }
    c.quota.wait_reserved("cq-p1", 18).await;
    share_is(&c, "cq-p1", 600).await;
    cohort_share_is(&c, "cohort-a", 0).await;
    let wls = c.workloads();
    let mut per_flavor = std::collections::BTreeMap::new();
    for w in wls.list(&Default::default()).await.unwrap() {
        *per_flavor
            .entry(crate::kueue_scheduler_more::cpu_flavor(&w).unwrap_or_default())
            .or_insert(0) += 1;
    }
    assert_eq!(
        per_flavor,
        [("flavor1".to_string(), 8), ("flavor2".to_string(), 10)]
            .into_iter()
            .collect()
    );
    c.quota.assert_safe();
}

/// `fair_sharing_test.go`, "Preemption is enabled and CQs have 0 weight" / "should have NaN
/// weighted share metric": a weight-0 ClusterQueue borrowing 4 of top-cohort's 8 CPU has an
/// infinite share, served as NaN in `kueue_cluster_queue_weighted_share` (and `i64::MAX` in status).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_weight_share_metric_is_nan() {
    let mut c =
        Cluster::start(Limits::default().group(&["best-effort-cq-a", "best-effort-cq-b"], 8000)).await;
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    c.restart_manager_with(|o| {
        o.fair_sharing = Some(FairSharingConfig::default());
        o.health_addr = Some(addr);
    })
    .await;
    c.flavor("default").await;
    create_cohort(
        &c,
        Cohort::build("top-cohort")
            .flavor("default", [("cpu", "8")])
            .build(),
    )
    .await;
    for name in ["best-effort-cq-a", "best-effort-cq-b"] {
        queue(
            &c,
            ClusterQueue::build(name)
                .cohort("top-cohort")
                .fair_weight("0")
                .preemption(preemption(serde_json::json!({"reclaimWithinCohort": "Any"})))
                .flavor("default", [("cpu", "0")])
                .build(),
        )
        .await;
    }
    c.workload("a1", "best-effort-cq-a", 100, "4").await;
    wait_for(&c.workloads(), "a1", "admitted", |w| w.is_admitted()).await;
    share_is(&c, "best-effort-cq-a", i64::MAX).await;
    let series =
        "kueue_cluster_queue_weighted_share{cluster_queue=\"best-effort-cq-a\",cohort=\"top-cohort\"";
    let value = |text: &str| {
        text.lines()
            .find(|l| l.starts_with(series))
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_string)
    };
    // The gauges may trail the status by a pass: scraped again until they show it (or WAIT).
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut text = scrape(addr).await;
    while value(&text).as_deref() != Some("NaN") && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        text = scrape(addr).await;
    }
    assert_eq!(value(&text).as_deref(), Some("NaN"), "{text}");
}
