//! Kueue v0.20's "Bug or Regression" fixes that apply to quotagate, each ported as the expectation
//! its fix restores (the upstream texts are summarised in each test): #18785, an admission check's
//! `Retry` back-off must not hold quota; #18975, a deleted ClusterQueue must not stay Terminating
//! once nothing holds quota in it; #14543, fair sharing must not preempt back and forth between two
//! cohort members.

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use quotagate::api::kueue::constants::{RESOURCE_IN_USE_FINALIZER, condition, reason};
use quotagate::api::kueue::{CheckState, ClusterQueue, Workload};
use quotagate::queue::FairSharingConfig;

use crate::kueue_core_queues::{active, gone};
use crate::kueue_scheduler_more::finish;
use crate::support::*;

/// Flavor `default`, ClusterQueue `cq` with 5 CPU and check `check1` (played by the test), LocalQueue
/// `lq`.
async fn checked_queue(c: &Cluster) {
    c.flavor("default").await;
    admission_check(c, "check1", "ctrl", true).await;
    let cq = cq_with("cq", "5").admission_check("check1", &[]).build();
    c.cluster_queue(with_all_namespaces(cq)).await;
    c.local_queue("lq", "cq").await;
}

fn requeue_at(w: &Workload) -> Option<jiff::Timestamp> {
    w.status
        .as_ref()?
        .requeue_state
        .as_ref()?
        .requeue_at
        .as_ref()
        .map(|t| t.0)
}

/// Kueue #18785 ("admission-check retry back-off holding quota", fixed in v0.20): an admitted
/// Workload whose check turns `Retry` with `requeueAfterSeconds` is evicted at once and gives its
/// quota back for the whole back-off; another workload takes the quota meanwhile; the first is
/// reserved again only once `requeueState.requeueAt` has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_18785_a_retry_back_off_does_not_hold_quota() {
    let c = Cluster::start(Limits::default().cq("cq", 5000)).await;
    checked_queue(&c).await;
    let wls = c.workloads();
    c.workload("wl", "lq", 0, "5").await;
    reserved_not_admitted(&c, "wl").await;
    set_check_state(&c, "wl", "check1", CheckState::Ready, "ready", None).await;
    wait_for(&wls, "wl", "admitted", |w| w.is_admitted()).await;

    const BACKOFF: i32 = 6;
    let t0 = jiff::Timestamp::now();
    set_check_state(
        &c,
        "wl",
        "check1",
        CheckState::Retry,
        "no capacity",
        Some(BACKOFF),
    )
    .await;
    let w = wait_for(&wls, "wl", "evicted and released", |w| {
        !reserved(w)
            && condition(w, condition::EVICTED).is_some_and(|(s, r, _)| s == "True" && r == "AdmissionCheck")
    })
    .await;
    let released = jiff::Timestamp::now();
    let at = requeue_at(&w).expect("requeueAt from requeueAfterSeconds");
    assert!(
        released < at,
        "quota released at {released}, only after the back-off ending {at}"
    );
    // requeueAt is lastTransitionTime (whole seconds) plus the back-off.
    assert!(
        at >= t0 + jiff::SignedDuration::from_secs(i64::from(BACKOFF) - 1),
        "requeueAt {at} from a Retry at {t0}"
    );

    // The quota is free during the back-off: another workload takes it at once.
    c.workload("other", "lq", 0, "5").await;
    reserved_not_admitted(&c, "other").await;
    assert!(
        jiff::Timestamp::now() < at,
        "the other workload was reserved only after the back-off"
    );
    assert!(
        !reserved(&wls.get("wl").await.unwrap()),
        "wl back before its requeueAt"
    );
    wls.delete("other", &DeleteParams::default()).await.unwrap();

    let w = wait_for(&wls, "wl", "reserved again after the back-off", reserved).await;
    let again = jiff::Timestamp::now();
    assert!(again >= at, "reserved again at {again}, before requeueAt {at}");
    assert_eq!(
        condition(&w, condition::REQUEUED).map(|r| r.1),
        Some("BackoffFinished".to_string())
    );
    c.quota.assert_safe();
}

/// ClusterQueue `foo-cq` (5 CPU, check `check1` when `checked`), LocalQueue `queue`, the finalizer
/// in place.
async fn deleting_setup(c: &Cluster, checked: bool) -> Api<ClusterQueue> {
    c.flavor("default").await;
    let mut cq = cq_with("foo-cq", "5");
    if checked {
        admission_check(c, "check1", "ctrl", true).await;
        cq = cq.admission_check("check1", &[]);
    }
    c.cluster_queue(with_all_namespaces(cq.build())).await;
    c.local_queue("queue", "foo-cq").await;
    let api: Api<ClusterQueue> = Api::all(c.client.clone());
    wait_for(&api, "foo-cq", "the resource-in-use finalizer", |q| {
        q.metadata.finalizers.as_deref() == Some(&[RESOURCE_IN_USE_FINALIZER.to_string()][..])
    })
    .await;
    api
}

/// Deletes `foo-cq` and waits until it says Terminating, held by the finalizer.
async fn delete_and_see_it_held(api: &Api<ClusterQueue>) {
    api.delete("foo-cq", &DeleteParams::default()).await.unwrap();
    wait_for(api, "foo-cq", "terminating", |q| {
        q.metadata.deletion_timestamp.is_some()
            && q.status
                .as_ref()
                .is_some_and(|s| active(&s.conditions).is_some_and(|a| a.1 == reason::TERMINATING))
    })
    .await;
    // Still held a moment later: a workload holds quota in it.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        api.get_opt("foo-cq").await.unwrap().is_some(),
        "held while a workload holds quota"
    );
}

/// Kueue #18975 ("ClusterQueue deletion blocked by its finalizer", fixed in v0.20) and
/// `clusterqueue_controller_test.go` "Deleting clusterQueues": a Terminating ClusterQueue whose
/// admitted workload is deleted (not finished) loses its finalizer and goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_18975_a_terminating_cluster_queue_goes_when_its_workload_is_deleted() {
    let c = Cluster::start(Limits::default().cq("foo-cq", 5000)).await;
    let api = deleting_setup(&c, false).await;
    let wls = c.workloads();
    c.workload("wl", "queue", 0, "5").await;
    wait_for(&wls, "wl", "admitted", |w| w.is_admitted()).await;
    delete_and_see_it_held(&api).await;
    wls.delete("wl", &DeleteParams::default()).await.unwrap();
    gone(&api, "foo-cq").await;
}

/// Kueue #18975: a Terminating ClusterQueue whose only workload is deactivated (evicted, its
/// quota released, the Workload kept) goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_18975_a_terminating_cluster_queue_goes_when_its_workload_is_deactivated() {
    let c = Cluster::start(Limits::default().cq("foo-cq", 5000)).await;
    let api = deleting_setup(&c, false).await;
    let wls = c.workloads();
    c.workload("wl", "queue", 0, "5").await;
    wait_for(&wls, "wl", "admitted", |w| w.is_admitted()).await;
    delete_and_see_it_held(&api).await;
    wls.patch(
        "wl",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"active": false}})),
    )
    .await
    .unwrap();
    wait_for(&wls, "wl", "released", |w| !reserved(w)).await;
    gone(&api, "foo-cq").await;
    assert!(wls.get_opt("wl").await.unwrap().is_some());
}

/// Kueue #18975 together with #18785: a Terminating ClusterQueue whose reserving workload is
/// evicted by a `Retry` check (pending again, in its back-off) goes; the workload pending on it does
/// not hold it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_18975_a_terminating_cluster_queue_goes_when_a_retry_evicts_its_workload() {
    let c = Cluster::start(Limits::default().cq("foo-cq", 5000)).await;
    let api = deleting_setup(&c, true).await;
    let wls = c.workloads();
    c.workload("wl", "queue", 0, "5").await;
    wait_for(&wls, "wl", "reserved", reserved).await;
    delete_and_see_it_held(&api).await;
    set_check_state(&c, "wl", "check1", CheckState::Retry, "no capacity", Some(1)).await;
    gone(&api, "foo-cq").await;
    let w = wls.get("wl").await.unwrap();
    assert!(!reserved(&w), "{w:?}");
}

/// Kueue #18975: a ClusterQueue with only pending workloads (none ever reserved) is deleted at once,
/// and one whose last workload finished while it was Terminating goes then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_18975_pending_workloads_do_not_hold_a_deleted_cluster_queue() {
    let c = Cluster::start(Limits::default().cq("foo-cq", 5000)).await;
    let api = deleting_setup(&c, false).await;
    let wls = c.workloads();
    c.workload("admitted", "queue", 0, "5").await;
    wait_for(&wls, "admitted", "admitted", |w| w.is_admitted()).await;
    c.workload("pending", "queue", 0, "5").await;
    wait_for(&wls, "pending", "pending", |w| {
        condition(w, condition::QUOTA_RESERVED).is_some_and(|c| c.0 == "False")
    })
    .await;
    delete_and_see_it_held(&api).await;
    finish(&wls, "admitted").await;
    gone(&api, "foo-cq").await;
    let p = wls.get("pending").await.unwrap();
    assert!(!reserved(&p), "nothing admits into a deleted ClusterQueue: {p:?}");
}

/// Kueue #14543 (the fair-sharing preemption loop, fixed in v0.20): two equal-weight ClusterQueues
/// of a cohort (3 CPU nominal each). `a` fills the cohort with three 2-CPU workloads; `b` submits
/// three (created in the same second: which goes first is the loop's order among equals). Kueue's
/// strategies (LessThanOrEqualToFinalShare, then LessThanInitialShare) let one of `b`'s preempt one
/// of `a`'s (b 2 CPU, a 4 CPU); none of the others may preempt, in either direction, so the
/// preemptions stop there and no workload is admitted twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_14543_fair_sharing_does_not_preempt_back_and_forth() {
    let mut c = Cluster::start(Limits::default().group(&["a", "b"], 6000)).await;
    c.restart_manager_with(|o| o.fair_sharing = Some(FairSharingConfig::default()))
        .await;
    c.flavor("default").await;
    for name in ["a", "b"] {
        let mut q = with_all_namespaces(cq_with(name, "3").cohort("co").build());
        q.spec.preemption =
            Some(serde_json::from_value(serde_json::json!({"reclaimWithinCohort": "Any"})).unwrap());
        c.cluster_queue(q).await;
        c.local_queue(name, name).await;
    }
    let wls = c.workloads();
    for n in ["a1", "a2", "a3"] {
        c.workload(n, "a", 0, "2").await;
        wait_for(&wls, n, "admitted", |w| w.is_admitted()).await;
    }
    for n in ["b1", "b2", "b3"] {
        c.workload(n, "b", 0, "2").await;
    }
    // One of b's preempts its way in (which one is the loop's order among equals).
    let deadline = tokio::time::Instant::now() + WAIT;
    while c.quota.reserved_in("b") == 0 {
        if tokio::time::Instant::now() > deadline {
            panic!("no workload of b reserved: {}", summary(&wls).await);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Let the loop run many cycles over the pending workloads of both sides.
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let preempted: Vec<String> = wls
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|w| condition(w, condition::PREEMPTED).is_some_and(|c| c.0 == "True"))
        .filter_map(|w| w.metadata.name.clone())
        .collect();
    let all = summary(&wls).await;
    assert_eq!(preempted.len(), 1, "exactly one of a's preempted: {all}");
    assert!(preempted[0].starts_with('a'), "{preempted:?}");
    assert_eq!(
        (c.quota.reserved_in("a"), c.quota.reserved_in("b")),
        (2, 1),
        "{all}"
    );
    assert!(
        c.quota.readmitted().is_empty(),
        "{:?} {all}",
        c.quota.readmitted()
    );
    c.quota.assert_safe();
}

/// Each workload's name, whether it holds quota, and its QuotaReserved and Preempted conditions.
async fn summary(wls: &Api<Workload>) -> String {
    let mut out = String::new();
    for w in wls.list(&Default::default()).await.unwrap().items {
        out.push_str(&format!(
            "\n{} reserved={} quotaReserved={:?} preempted={:?}",
            w.metadata.name.clone().unwrap_or_default(),
            reserved(&w),
            condition(&w, condition::QUOTA_RESERVED),
            condition(&w, condition::PREEMPTED),
        ));
    }
    out
}

/// Kueue #18975, with a Workload that carries finalizers as a job's does: deleted while admitted in a
/// Terminating ClusterQueue, it loses Kueue's `resource-in-use` finalizer at once (Kueue's
/// `FinalizeOrphanedWorkload` for a deleted Workload); while another controller's finalizer keeps
/// it (quota reserved, being deleted) the ClusterQueue stays Terminating, as Kueue's cache keeps it
/// until the delete event; once that finalizer goes, so does the ClusterQueue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_18975_a_terminating_cluster_queue_goes_once_its_deleted_workload_is_gone() {
    use kube::api::PostParams;
    let c = Cluster::start(Limits::default().cq("foo-cq", 5000)).await;
    let api = deleting_setup(&c, false).await;
    let wls = c.workloads();
    let mut wl = Workload::build("wl", "default")
        .queue("queue")
        .podset("main", 1, [("cpu", "5")])
        .build();
    wl.metadata.finalizers = Some(vec![
        RESOURCE_IN_USE_FINALIZER.to_string(),
        "example.com/hold".to_string(),
    ]);
    wls.create(&PostParams::default(), &wl).await.unwrap();
    wait_for(&wls, "wl", "admitted", |w| w.is_admitted()).await;
    delete_and_see_it_held(&api).await;
    wls.delete("wl", &DeleteParams::default()).await.unwrap();
    wait_for(&wls, "wl", "only the other finalizer left", |w| {
        w.metadata.finalizers.as_deref() == Some(&["example.com/hold".to_string()][..])
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        api.get_opt("foo-cq").await.unwrap().is_some(),
        "held while the deleted workload still holds quota"
    );
    wls.patch(
        "wl",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    wait_gone(&wls, "wl").await;
    gone(&api, "foo-cq").await;
}
