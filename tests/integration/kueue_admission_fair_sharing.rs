//! Admission fair sharing on the embedded cluster with the real manager: the admission fair sharing
//! specs of Kueue's `test/integration/singlecluster/scheduler/fairsharing/fair_sharing_test.go`,
//! with Kueue's suite settings (usageHalfLifeTime 1s, usageSamplingInterval 1s) except where a spec
//! says otherwise. Usage is read
//! from `status.fairSharing.admissionFairSharingStatus.consumedResources` as Kueue's
//! `ExpectLocalQueueFairSharingUsageToBe` reads it (milli-CPU).
//!
//! Where Kueue's specs create competing workloads at priority 0 one after the other, the workload
//! fair sharing must NOT pick is given priority 1 here: creation timestamps have second
//! granularity, so the order by time alone is a tie broken by UID, and a spec could pass by chance
//! without fair sharing. With the higher priority on the wrong one, only the LocalQueue usage
//! (which Kueue compares before priority) makes the spec pass.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use quotagate::api::kueue::config::AfsConfig;
use quotagate::api::kueue::constants::condition;
use quotagate::api::kueue::{
    AdmissionMode, AdmissionScope, CheckState, ClusterQueue, FairSharing, LocalQueue, QueueingStrategy,
};

use crate::kueue_scheduler_more::{finish, pending};
use crate::support::*;

/// Kueue's suite waits on these windows; one at a time keeps each manager's timers honest on a
/// small machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn afs(sampling: Duration, half_life: Duration) -> AfsConfig {
    AfsConfig {
        usage_half_life_time: half_life,
        usage_sampling_interval: sampling,
        resource_weights: Default::default(),
    }
}

const SECOND: Duration = Duration::from_secs(1);

/// Restarts the cluster's manager with this admissionFairSharing (`None`: not configured).
async fn use_config(c: &mut Cluster, cfg: Option<AfsConfig>) {
    use_config_serving(c, cfg, None).await;
}

/// As [`use_config`], serving `/metrics` on `health` when given.
async fn use_config_serving(c: &mut Cluster, cfg: Option<AfsConfig>, health: Option<std::net::SocketAddr>) {
    c.restart_manager_with(|o| {
        o.admission_fair_sharing = cfg;
        o.health_addr = health;
    })
    .await;
}

fn afs_cq(cq: ClusterQueue) -> ClusterQueue {
    let mut cq = with_all_namespaces(cq);
    cq.spec.admission_scope = Some(AdmissionScope {
        admission_mode: AdmissionMode::UsageBasedAdmissionFairSharing,
    });
    cq
}

async fn local_queue(c: &Cluster, name: &str, cq: &str, weight: &str) {
    let mut lq = LocalQueue::build(name, "default").cluster_queue(cq).build();
    lq.spec.fair_sharing = Some(FairSharing {
        weight: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
            weight.into(),
        )),
    });
    lqs(c)
        .create(&Default::default(), &lq)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
}

fn lqs(c: &Cluster) -> Api<LocalQueue> {
    Api::namespaced(c.client.clone(), "default")
}

/// Kueue's "Using AdmissionFairSharing at ClusterQueue level" setup: `cq1` with 8 CPU in
/// UsageBasedAdmissionFairSharing mode, LocalQueues lq-a, lq-b, lq-c of weight 1.
async fn cq_level(cq: ClusterQueue) -> Cluster {
    let mut c = Cluster::start(Limits::default().cq("cq1", 8_000)).await;
    use_config(&mut c, Some(afs(SECOND, SECOND))).await;
    c.flavor("default").await;
    c.cluster_queue(afs_cq(cq)).await;
    for lq in ["lq-a", "lq-b", "lq-c"] {
        local_queue(&c, lq, "cq1", "1").await;
    }
    c
}

fn cq1() -> ClusterQueue {
    ClusterQueue::build("cq1")
        .flavor("default", [("cpu", "8")])
        .build()
}

/// Consumed milli-CPU in status and how many resources it lists.
fn usage(lq: &LocalQueue) -> Option<(usize, i64)> {
    let s = lq
        .status
        .as_ref()?
        .fair_sharing
        .as_ref()?
        .admission_fair_sharing_status
        .as_ref()?;
    let cpu = s.consumed_resources.get("cpu")?;
    let q = quotagate::api::quantity::Quantity::parse(&cpu.0).ok()?;
    Some((s.consumed_resources.len(), q.milli_value()))
}

/// Kueue's `ExpectLocalQueueFairSharingUsageToBe`: one resource listed, its milli-CPU compared.
async fn usage_is(c: &Cluster, lq: &str, what: &str, ok: impl Fn(i64) -> bool) -> LocalQueue {
    wait_for(&lqs(c), lq, what, |q| {
        usage(q).is_some_and(|(n, m)| n == 1 && ok(m))
    })
    .await
}

async fn admitted(c: &Cluster, name: &str) -> quotagate::api::kueue::Workload {
    wait_for(&c.workloads(), name, "admitted", reserved).await
}

async fn is_reserved(c: &Cluster, name: &str) -> bool {
    c.workloads().get(name).await.is_ok_and(|w| reserved(&w))
}

/// Holds until `n` workloads of `names` are reserved (watching one at a time is not enough: which
/// one is admitted is what is tested).
async fn reserved_count(c: &Cluster, names: &[&str], n: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut got = Vec::new();
        for name in names {
            if is_reserved(c, name).await {
                got.push(name.to_string());
            }
        }
        if got.len() >= n {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{n} of {names:?} reserved; got {got:?}"
        );
        c.quota.wait_any_event().await;
    }
}

/// "admits one workload from each LocalQueue when quota is limited".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admits_one_workload_from_each_local_queue_when_quota_is_limited() {
    let _serial = SERIAL.lock().await;
    let c = cq_level(cq1()).await;
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    let hold = serde_json::json!({"spec": {"stopPolicy": "Hold"}});
    cqs.patch("cq1", &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .unwrap();
    wait_for(&cqs, "cq1", "stopped", |q| {
        q.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::ACTIVE))
            .is_some_and(|c| c.status == "False")
    })
    .await;
    for (name, lq, prio) in [
        ("a1", "lq-a", 1),
        ("a2", "lq-a", 1),
        ("b1", "lq-b", 0),
        ("b2", "lq-b", 0),
    ] {
        c.workload(name, lq, prio, "4").await;
    }
    for name in ["a1", "a2", "b1", "b2"] {
        pending(&c.workloads(), name).await;
    }
    let resume = serde_json::json!({"spec": {"stopPolicy": "None"}});
    cqs.patch("cq1", &PatchParams::default(), &Patch::Merge(&resume))
        .await
        .unwrap();
    let got = reserved_count(&c, &["a1", "a2", "b1", "b2"], 2).await;
    let from_a = got.iter().filter(|n| n.starts_with('a')).count();
    assert_eq!(from_a, 1, "one from each LocalQueue: {got:?}");
    c.quota.assert_safe();
}

/// "prioritizes workloads from less active LocalQueues to maintain fairness".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prioritizes_workloads_from_less_active_local_queues() {
    let _serial = SERIAL.lock().await;
    let c = cq_level(cq1()).await;
    for name in ["a1", "a2"] {
        c.workload(name, "lq-a", 0, "4").await;
        admitted(&c, name).await;
    }
    for name in ["a3", "a4"] {
        c.workload(name, "lq-a", 1, "4").await;
        pending(&c.workloads(), name).await;
    }
    c.workload("b1", "lq-b", 0, "4").await;
    pending(&c.workloads(), "b1").await;
    usage_is(&c, "lq-a", "usage > 7500m", |m| m > 7_500).await;
    usage_is(&c, "lq-b", "usage == 0", |m| m == 0).await;
    finish(&c.workloads(), "a1").await;
    finish(&c.workloads(), "a2").await;
    admitted(&c, "b1").await;
    c.quota.assert_safe();
}

/// "admits workload from new LocalQueue when all others have high usage".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admits_the_new_local_queue_when_all_others_are_busy() {
    let _serial = SERIAL.lock().await;
    let c = cq_level(cq1()).await;
    for (name, lq) in [("a1", "lq-a"), ("b1", "lq-b")] {
        c.workload(name, lq, 0, "4").await;
        admitted(&c, name).await;
    }
    for (name, lq, prio) in [
        ("a2", "lq-a", 1),
        ("a3", "lq-a", 1),
        ("b2", "lq-b", 1),
        ("b3", "lq-b", 1),
        ("c1", "lq-c", 0),
    ] {
        c.workload(name, lq, prio, "4").await;
        pending(&c.workloads(), name).await;
    }
    usage_is(&c, "lq-a", "usage > 3900m", |m| m > 3_900).await;
    usage_is(&c, "lq-b", "usage > 3900m", |m| m > 3_900).await;
    usage_is(&c, "lq-c", "usage == 0", |m| m == 0).await;
    finish(&c.workloads(), "a1").await;
    finish(&c.workloads(), "b1").await;
    admitted(&c, "c1").await;
    c.quota.assert_safe();
}

/// "admits workloads from less active LocalQueues after quota is released".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admits_less_active_local_queues_as_quota_is_released() {
    let _serial = SERIAL.lock().await;
    let c = cq_level(cq1()).await;
    for name in ["a1", "a2"] {
        c.workload(name, "lq-a", 0, "4").await;
        admitted(&c, name).await;
    }
    for (name, lq, prio) in [("b1", "lq-b", 0), ("b2", "lq-b", 1), ("c1", "lq-c", 0)] {
        c.workload(name, lq, prio, "4").await;
        pending(&c.workloads(), name).await;
    }
    usage_is(&c, "lq-a", "usage > 7500m", |m| m > 7_500).await;
    usage_is(&c, "lq-b", "usage == 0", |m| m == 0).await;
    usage_is(&c, "lq-c", "usage == 0", |m| m == 0).await;
    let waiting = ["b1", "b2", "c1"];
    finish(&c.workloads(), "a1").await;
    reserved_count(&c, &waiting, 1).await;
    finish(&c.workloads(), "a2").await;
    let got = reserved_count(&c, &waiting, 2).await;
    assert!(got.contains(&"c1".to_string()), "{got:?}");
    assert_eq!(got.iter().filter(|n| n.starts_with('b')).count(), 1, "{got:?}");
    c.quota.assert_safe();
}

/// "should update consumed resources and subtract entry penalties on workload admission" (the
/// part the API shows: the pending penalty itself is internal, checked by the core's unit tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumed_resources_grow_with_each_admission() {
    let _serial = SERIAL.lock().await;
    let mut c = cq_level(cq1()).await;
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    use_config_serving(&mut c, Some(afs(SECOND, SECOND)), Some(addr)).await;
    c.workload("a1", "lq-a", 0, "4").await;
    admitted(&c, "a1").await;
    usage_is(&c, "lq-a", "usage > 0", |m| m > 0).await;
    c.workload("a2", "lq-a", 0, "4").await;
    admitted(&c, "a2").await;
    usage_is(&c, "lq-a", "usage > 3900m", |m| m > 3_900).await;
    // Kueue's local_queue_admission_fair_sharing_usage: lq-a's usage in cores (weight 1), lq-b's 0.
    let value = |text: &str, lq: &str| usage_metric(text, lq, "cq1");
    let mut text = String::new();
    // /metrics has no watch to wait on: polled, bounded.
    for _ in 0..100 {
        text = scrape(addr).await;
        if value(&text, "lq-a").is_some_and(|v| v > 3.9) && value(&text, "lq-b").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(value(&text, "lq-a").is_some_and(|v| v > 3.9), "{text}");
    assert_eq!(value(&text, "lq-b"), Some(0.0), "{text}");
}

/// Kueue's `local_queue_admission_fair_sharing_usage` of a LocalQueue of "default" in `cq`, from a
/// /metrics text: its consumed resources plus its unsettled entry penalties, over its weight.
fn usage_metric(text: &str, lq: &str, cq: &str) -> Option<f64> {
    let series = format!(
        "kueue_local_queue_admission_fair_sharing_usage{{name=\"{lq}\",namespace=\"default\",cluster_queue=\"{cq}\""
    );
    let line = text.lines().find(|l| l.starts_with(&series))?;
    line.rsplit(' ').next()?.parse().ok()
}

/// Kueue's "Using AdmissionFairSharing with AdmissionChecks" setup: check1 (controller `ctrl`, made
/// Active by the test), `cq-with-check` with 8 CPU in UsageBasedAdmissionFairSharing mode behind
/// check1, and lq-a of weight 1. Kueue's specs read the pending entry penalty from the manager's
/// ledger; here the ledger is frozen instead (sampling interval and half-life of an hour: consumed
/// resources move only when a penalty settles), so the penalty is what `/metrics` (consumed plus
/// penalties) shows above the status (consumed only). A 4 CPU workload's penalty is then half of it.
async fn with_admission_check() -> (Cluster, std::net::SocketAddr) {
    let mut c = Cluster::start(Limits::default().cq("cq-with-check", 8_000)).await;
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let hour = Duration::from_secs(3600);
    use_config_serving(&mut c, Some(afs(hour, hour)), Some(addr)).await;
    c.flavor("default").await;
    admission_check(&c, "check1", "ctrl", true).await;
    let cq = ClusterQueue::build("cq-with-check")
        .flavor("default", [("cpu", "8")])
        .admission_check("check1", &[])
        .build();
    c.cluster_queue(afs_cq(cq)).await;
    local_queue(&c, "lq-a", "cq-with-check", "1").await;
    (c, addr)
}

/// lq-a's consumed milli-CPU as its status shows it, and its unsettled entry penalty (milli-CPU):
/// what `/metrics` shows above that. `None` until both are there.
async fn lq_a_ledger(c: &Cluster, addr: std::net::SocketAddr) -> Option<(i64, i64)> {
    let shown = usage_metric(&scrape(addr).await, "lq-a", "cq-with-check")?;
    let (_, consumed) = usage(&lqs(c).get("lq-a").await.ok()?)?;
    Some((consumed, (shown * 1000.0).round() as i64 - consumed))
}

/// Holds until lq-a's (consumed, penalty) satisfy `ok`. The penalty has no watch to wait on:
/// `/metrics` is polled, bounded by `WAIT`.
async fn lq_a_ledger_until(
    c: &Cluster,
    addr: std::net::SocketAddr,
    what: &str,
    ok: impl Fn(i64, i64) -> bool,
) -> (i64, i64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut last = None;
    while tokio::time::Instant::now() < deadline {
        last = lq_a_ledger(c, addr).await;
        if let Some((consumed, penalty)) = last
            && ok(consumed, penalty)
        {
            return (consumed, penalty);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let text = scrape(addr).await;
    let series: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("admission_fair_sharing_usage"))
        .collect();
    let status = lqs(c).get("lq-a").await.ok().and_then(|q| q.status);
    panic!(
        "lq-a: {what}; last (consumed, penalty) in milli-CPU: {last:?}; /metrics: {series:?}; status: {status:?}"
    );
}

/// Kueue's penalty for a 4 CPU workload here: 4 CPU times alpha(interval, half-life) = 1/2.
const PENALTY_4_CPU: i64 = 2_000;

/// The LocalQueue status written in the cycle that first saw the reservation (its
/// reservingWorkloads counts it) shows the consumed resources of that cycle.
async fn lq_a_once_reserving(c: &Cluster) -> LocalQueue {
    wait_for(&lqs(c), "lq-a", "counts the reservation", |q| {
        q.status
            .as_ref()
            .is_some_and(|s| s.reserving_workloads == 1 && s.admitted_workloads == 0)
    })
    .await
}

/// "should subtract the entry penalty when the workload is admitted via an AdmissionCheck": the
/// penalty stays pending while the workload waits for its check (nothing is folded into the
/// consumed resources at the reservation), and is settled once the check admits it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entry_penalty_is_settled_when_an_admission_check_admits() {
    let _serial = SERIAL.lock().await;
    let (c, addr) = with_admission_check().await;
    c.workload("wl", "lq-a", 0, "4").await;
    reserved_not_admitted(&c, "wl").await;
    let q = lq_a_once_reserving(&c).await;
    assert_eq!(
        usage(&q),
        Some((1, 0)),
        "nothing settled at the reservation: {:?}",
        q.status
    );
    lq_a_ledger_until(&c, addr, "the entry penalty pending", |consumed, penalty| {
        consumed == 0 && penalty == PENALTY_4_CPU
    })
    .await;

    set_check_state(&c, "wl", "check1", CheckState::Ready, "check ready", None).await;
    wait_for(&c.workloads(), "wl", "Admitted", |w| w.is_admitted()).await;
    // Settled: the penalty moved into the consumed resources (plus the little the 4 CPU held add
    // over a few seconds of an hour's half-life).
    lq_a_ledger_until(&c, addr, "the entry penalty settled", |consumed, penalty| {
        penalty.abs() <= 1 && (PENALTY_4_CPU..PENALTY_4_CPU + 100).contains(&consumed)
    })
    .await;
    c.quota.assert_safe();
}

/// "should drop the entry penalty when the workload is deleted while waiting for the admission
/// check": the penalty is dropped, not left pending, and never reaches the consumed resources.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entry_penalty_is_dropped_when_the_workload_is_deleted_waiting_for_its_check() {
    let _serial = SERIAL.lock().await;
    let (c, addr) = with_admission_check().await;
    c.workload("wl", "lq-a", 0, "4").await;
    reserved_not_admitted(&c, "wl").await;
    lq_a_ledger_until(&c, addr, "the entry penalty pending", |consumed, penalty| {
        consumed == 0 && penalty == PENALTY_4_CPU
    })
    .await;

    c.workloads().delete("wl", &Default::default()).await.unwrap();
    wait_gone(&c.workloads(), "wl").await;
    lq_a_ledger_until(&c, addr, "the entry penalty dropped", |_, penalty| penalty == 0).await;
    let q = wait_for(&lqs(&c), "lq-a", "the deletion counted", |q| {
        q.status.as_ref().is_some_and(|s| s.reserving_workloads == 0)
    })
    .await;
    assert_eq!(usage(&q), Some((1, 0)), "dropped, not settled: {:?}", q.status);
}

/// "should not stack entry penalties when an evicted workload reserves quota again": a Retry
/// evicts the workload waiting for its check; reserved again, it has one penalty, not two (and
/// none was settled, as it was never admitted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_workload_reserving_again_does_not_stack_entry_penalties() {
    let _serial = SERIAL.lock().await;
    let (c, addr) = with_admission_check().await;
    c.workload("wl", "lq-a", 0, "4").await;
    reserved_not_admitted(&c, "wl").await;
    let first = lq_a_ledger_until(&c, addr, "the entry penalty pending", |consumed, penalty| {
        consumed == 0 && penalty == PENALTY_4_CPU
    })
    .await;

    set_check_state(&c, "wl", "check1", CheckState::Retry, "retry", None).await;
    wait_for(&c.workloads(), "wl", "evicted by the check", |w| {
        condition(w, condition::EVICTED).is_some_and(|(s, r, _)| s == "True" && r == "AdmissionCheck")
    })
    .await;
    wait_for(&c.workloads(), "wl", "reserved again after the retry", |w| {
        let retried = w
            .status
            .as_ref()
            .and_then(|s| s.admission_checks.first())
            .and_then(|s| s.retry_count)
            == Some(1);
        let evicted = condition(w, condition::EVICTED).is_some_and(|(s, _, _)| s == "True");
        reserved(w) && retried && !evicted
    })
    .await;
    // Kueue holds this for ConsistentDuration (300ms); a second here, scraped every 50ms.
    let until = tokio::time::Instant::now() + SECOND;
    while tokio::time::Instant::now() < until {
        let now = lq_a_ledger(&c, addr).await;
        assert_eq!(
            now,
            Some(first),
            "(consumed, penalty) after reserving again, milli-CPU"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.quota.assert_safe();
}

/// Kueue's "Using AdmissionFairSharing at Cohort level" setup: `cq1` (StrictFIFO, AFS, no preemption
/// within) and `cq2`, 16 CPU each in cohort `all`; lq-a and lq-b in cq1, lq-c in cq2.
async fn cohort_level() -> Cluster {
    let mut c = Cluster::start(Limits::default().group(&["cq1", "cq2"], 32_000)).await;
    use_config(&mut c, Some(afs(SECOND, SECOND))).await;
    c.flavor("default").await;
    c.cluster_queue(afs_cq(
        ClusterQueue::build("cq1")
            .cohort("all")
            .flavor("default", [("cpu", "16")])
            .queueing_strategy(QueueingStrategy::StrictFIFO)
            .build(),
    ))
    .await;
    c.cluster_queue(with_all_namespaces(
        ClusterQueue::build("cq2")
            .cohort("all")
            .flavor("default", [("cpu", "16")])
            .preemption(crate::kueue_scheduler_more::preemption(serde_json::json!({
                "reclaimWithinCohort": "Any",
                "withinClusterQueue": "LowerPriority",
            })))
            .build(),
    ))
    .await;
    local_queue(&c, "lq-a", "cq1", "1").await;
    local_queue(&c, "lq-b", "cq1", "1").await;
    local_queue(&c, "lq-c", "cq2", "1").await;
    c
}

/// "should promote a workload from LQ with lower recent usage".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promotes_the_local_queue_with_lower_recent_usage() {
    let _serial = SERIAL.lock().await;
    let c = cohort_level().await;
    c.workload("first", "lq-a", 0, "32").await;
    admitted(&c, "first").await;
    usage_is(&c, "lq-a", "usage > 0", |m| m > 0).await;
    c.workload("wl-a", "lq-a", 1, "32").await;
    c.workload("wl-b", "lq-b", 0, "32").await;
    pending(&c.workloads(), "wl-b").await;
    finish(&c.workloads(), "first").await;
    admitted(&c, "wl-b").await;
    pending(&c.workloads(), "wl-a").await;
    assert!(!is_reserved(&c, "wl-a").await);
    c.quota.assert_safe();
}

/// "should preempt a workload from LQ with higher recent usage": cq2 reclaims its quota from cq1,
/// and the workload of cq1's busier LocalQueue is preempted despite its higher priority (without
/// fair sharing the lower-priority one would be, and it alone would free enough).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempts_the_workload_of_the_busier_local_queue() {
    let _serial = SERIAL.lock().await;
    let c = cohort_level().await;
    c.workload("high-a", "lq-a", 10, "20").await;
    c.workload("low-b", "lq-b", 1, "12").await;
    admitted(&c, "high-a").await;
    admitted(&c, "low-b").await;
    // Kueue waits until the scheduler sees lq-a busier than lq-b; the status shows the same ledger.
    let a = usage_is(&c, "lq-a", "usage > 0", |m| m > 0).await;
    let (_, a) = usage(&a).unwrap_or_default();
    usage_is(&c, "lq-b", "usage below lq-a's", |m| m > 0 && m < a).await;
    c.workload("reclaimer", "lq-c", 0, "10").await;
    wait_for(&c.workloads(), "high-a", "preempted", |w| {
        condition(w, condition::EVICTED).is_some_and(|e| e.0 == "True" && e.1 == "Preempted")
    })
    .await;
    admitted(&c, "reclaimer").await;
    assert!(is_reserved(&c, "low-b").await);
    c.quota.assert_safe();
}

/// "admits from the LocalQueue whose weight is raised through the API".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_weight_raised_through_the_api_changes_the_order() {
    let _serial = SERIAL.lock().await;
    let c = cohort_level().await;
    c.workload("b-usage", "lq-b", 0, "32").await;
    admitted(&c, "b-usage").await;
    usage_is(&c, "lq-b", "usage > 0", |m| m > 0).await;
    finish(&c.workloads(), "b-usage").await;
    c.workload("blocker", "lq-a", 0, "32").await;
    admitted(&c, "blocker").await;
    // The weight is raised before the two workloads come: the manager learns it from its
    // LocalQueue watch, which is not ordered with its Workload watch, so a raise written just
    // before the blocker finishes could reach the admission loop after the cycle that refills.
    let raise = serde_json::json!({"spec": {"fairSharing": {"weight": "1000000"}}});
    lqs(&c)
        .patch("lq-a", &PatchParams::default(), &Patch::Merge(&raise))
        .await
        .unwrap();
    wait_for(&lqs(&c), "lq-a", "weight raised", |q| {
        q.spec
            .fair_sharing
            .as_ref()
            .and_then(|f| f.weight.as_ref())
            .is_some_and(|w| w.0 == "1000000")
    })
    .await;
    c.workload("wl-a", "lq-a", 0, "32").await;
    c.workload("wl-b", "lq-b", 1, "32").await;
    pending(&c.workloads(), "wl-a").await;
    pending(&c.workloads(), "wl-b").await;
    finish(&c.workloads(), "blocker").await;
    admitted(&c, "wl-a").await;
    assert!(!is_reserved(&c, "wl-b").await);
    c.quota.assert_safe();
}

/// "should retain the LocalQueue's historical usage across a restart".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_survives_a_restart() {
    let _serial = SERIAL.lock().await;
    let mut c = Cluster::start(Limits::default().cq("cq-restart", 16_000)).await;
    use_config(&mut c, Some(afs(SECOND, SECOND))).await;
    c.flavor("default").await;
    c.cluster_queue(afs_cq(
        ClusterQueue::build("cq-restart")
            .cohort("all")
            .flavor("default", [("cpu", "16")])
            .build(),
    ))
    .await;
    local_queue(&c, "lq-restart", "cq-restart", "1").await;
    c.workload("wl1", "lq-restart", 0, "8").await;
    admitted(&c, "wl1").await;
    usage_is(&c, "lq-restart", "usage > 7000m", |m| m > 7_000).await;
    finish(&c.workloads(), "wl1").await;
    if let Some(m) = c.manager.take() {
        m.stop().await;
    }
    let frozen = lqs(&c).get("lq-restart").await.unwrap();
    let (_, frozen) = usage(&frozen).unwrap_or_default();
    assert!(
        frozen > 2_000,
        "persisted usage decayed too much before the stop: {frozen}m"
    );
    // A long half-life freezes the history; the finished workload holds nothing any more, so only
    // a ledger seeded from status keeps the usage near the frozen value.
    let restart = jiff::Timestamp::now();
    use_config(&mut c, Some(afs(SECOND, Duration::from_secs(3600)))).await;
    c.workload("wl2", "lq-restart", 0, "1").await;
    admitted(&c, "wl2").await;
    wait_for(
        &lqs(&c),
        "lq-restart",
        "a status written after the restart keeping the history",
        |q| {
            let s = q
                .status
                .as_ref()
                .and_then(|s| s.fair_sharing.as_ref())
                .and_then(|f| f.admission_fair_sharing_status.as_ref());
            s.is_some_and(|s| s.last_update.0 > restart) && usage(q).is_some_and(|(_, m)| m > frozen * 7 / 10)
        },
    )
    .await;
    // Kept, not overwritten by later samples (three sampling intervals).
    for _ in 0..3 {
        tokio::time::sleep(SECOND).await;
        let q = lqs(&c).get("lq-restart").await.unwrap();
        let (_, m) = usage(&q).unwrap_or_default();
        assert!(m > frozen * 7 / 10, "{m}m after the restart, {frozen}m before");
    }
}

/// "should maintain non-zero CPU ConsumedResources across sampling intervals": a 500m workload in
/// a ClusterQueue without admission fair sharing still shows in its LocalQueue's usage, which
/// samples do not truncate to zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_cpu_usage_is_not_truncated_by_samples() {
    let _serial = SERIAL.lock().await;
    let mut c = Cluster::start(Limits::default().cq("cq-afs-cpu", 4_000)).await;
    use_config(&mut c, Some(afs(SECOND, SECOND))).await;
    c.flavor("default").await;
    c.cluster_queue(with_all_namespaces(
        ClusterQueue::build("cq-afs-cpu")
            .cohort("cohort")
            .flavor("default", [("cpu", "4")])
            .build(),
    ))
    .await;
    c.local_queue("lq-afs-cpu", "cq-afs-cpu").await;
    c.workload("wl", "lq-afs-cpu", 0, "500m").await;
    admitted(&c, "wl").await;
    usage_is(&c, "lq-afs-cpu", "usage > 0", |m| m > 0).await;
    for _ in 0..3 {
        tokio::time::sleep(SECOND).await;
        let q = lqs(&c).get("lq-afs-cpu").await.unwrap();
        assert!(usage(&q).is_some_and(|(_, m)| m > 0), "{:?}", q.status);
    }
}

/// "Scheduler with AdmissionFairSharing = nil" / "should ignore FairSharing": without the config
/// section a LocalQueue gets no fair-sharing status, and the mode is ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_config_the_mode_is_ignored() {
    let _serial = SERIAL.lock().await;
    let mut c = Cluster::start(Limits::default().cq("cq1", 32_000)).await;
    use_config(&mut c, None).await;
    c.flavor("default").await;
    c.cluster_queue(afs_cq(
        ClusterQueue::build("cq1")
            .cohort("all")
            .flavor("default", [("cpu", "32")])
            .queueing_strategy(QueueingStrategy::StrictFIFO)
            .build(),
    ))
    .await;
    local_queue(&c, "lq-a", "cq1", "1").await;
    c.workload("wl", "lq-a", 0, "32").await;
    admitted(&c, "wl").await;
    let q = wait_for(&lqs(&c), "lq-a", "counts the admission", |q| {
        q.status.as_ref().is_some_and(|s| s.admitted_workloads == 1)
    })
    .await;
    assert!(
        q.status.as_ref().and_then(|s| s.fair_sharing.as_ref()).is_none(),
        "{:?}",
        q.status
    );
}
