//! Admission fair sharing, ported from Kueue: the arithmetic of
//! `pkg/util/admissionfairsharing/admission_fair_sharing_test.go`, the ordering of
//! `pkg/cache/queue/cluster_queue_test.go` `TestFsAdmission`, and the entry-penalty lifecycle the
//! specs of `test/integration/singlecluster/scheduler/fairsharing/fair_sharing_test.go` check.

use super::*;
use crate::queue::{AdmissionCore, ClusterQueueModel, FlavorModel, WorkloadModel};

const CORE: i128 = NANO;

fn res(pairs: &[(&str, i128)]) -> Resources {
    pairs.iter().map(|(r, v)| (r.to_string(), *v)).collect()
}

fn cfg(half_life_ms: i64, sampling_ms: i64) -> AfsConfig {
    AfsConfig {
        usage_half_life_ms: half_life_ms,
        usage_sampling_interval_ms: sampling_ms,
        resource_weights: BTreeMap::new(),
    }
}

const MIN5: i64 = 5 * 60 * 1000;
const WEEK: i64 = 168 * 3600 * 1000;

// ---- arithmetic (admission_fair_sharing_test.go) ----

/// `TestCalculateEntryPenaltyWithDRAResources` and `TestCalculateEntryPenaltyWithLongHalfLife`.
#[test]
fn entry_penalty_covers_every_requested_resource() {
    for c in [cfg(10 * 60 * 1000, MIN5), cfg(WEEK, MIN5)] {
        let p = entry_penalty(
            &res(&[
                ("cpu", 4 * CORE),
                ("gpu-logical", 2 * CORE),
                ("nvidia.com/gpu", CORE),
            ]),
            &c,
        );
        for r in ["cpu", "gpu-logical", "nvidia.com/gpu"] {
            assert!(p.get(r).is_some_and(|v| *v > 0), "{r}: {p:?}");
        }
    }
    // One sampling interval of one half-life: half of the requests.
    let p = entry_penalty(&res(&[("cpu", 4 * CORE)]), &cfg(1000, 1000));
    assert_eq!(p, res(&[("cpu", 2 * CORE)]));
    // No half-life: no penalty.
    let p = entry_penalty(&res(&[("cpu", 4 * CORE)]), &cfg(0, 1000));
    assert_eq!(p, res(&[("cpu", 0)]));
}

/// `TestCalculateDecayedConsumedAccumulatesSubMilli`: with a week's half-life and 5m samples, each
/// sample adds less than a milli-CPU, and it still accumulates.
#[test]
fn decay_accumulates_below_a_milli() {
    let held = res(&[("cpu", 2 * CORE), ("nvidia.com/gpu", CORE)]);
    let mut consumed = Resources::new();
    let (mut cpu, mut gpu) = (0, 0);
    for sample in 1..=3 {
        consumed = decayed(&consumed, &held, MIN5 as f64, WEEK as f64);
        assert!(consumed["cpu"] > cpu, "sample {sample}: {consumed:?}");
        assert!(consumed["nvidia.com/gpu"] > gpu, "sample {sample}: {consumed:?}");
        assert!(
            consumed["cpu"] - cpu < 1_000_000,
            "sample {sample}: less than a milli-CPU more"
        );
        (cpu, gpu) = (consumed["cpu"], consumed["nvidia.com/gpu"]);
    }
}

/// `TestCalculateDecayedConsumedConvergesToUsage`: 2 CPU held for one, two, three half-lives of
/// 5m samples gives 1, 1.5, 1.75 CPU (within a milli), never more than held.
#[test]
fn decay_converges_to_what_is_held() {
    let held = res(&[("cpu", 2 * CORE)]);
    let mut consumed = Resources::new();
    for (half_lives, want_milli) in [(1, 1000), (2, 1500), (3, 1750)] {
        for _ in 0..2016 {
            consumed = decayed(&consumed, &held, MIN5 as f64, WEEK as f64);
        }
        let got = consumed["cpu"];
        assert!(
            (got - want_milli * 1_000_000).abs() <= 1_000_000,
            "after {half_lives}: {got}"
        );
        assert!(got <= 2 * CORE);
    }
}

/// `TestCalculateDecayedConsumedKeepsLargeQuantitiesPositive`.
#[test]
fn decay_keeps_large_quantities_positive() {
    for gib in [16_i128, 1024, 64 * 1024] {
        let held = res(&[("memory", gib * (1 << 30) * CORE)]);
        let c = decayed(&Resources::new(), &held, MIN5 as f64, WEEK as f64);
        assert!(c["memory"] > 0, "{gib}Gi: {c:?}");
    }
}

/// `TestCalculateUsageWithDRA`, every case.
#[test]
fn usage_is_weighted_per_resource_and_divided_by_the_queue_weight() {
    type Case = (
        &'static str,
        Resources,
        Resources,
        f64,
        Vec<(&'static str, f64)>,
        f64,
    );
    let cases: Vec<Case> = vec![
        (
            "DRA resource with default weight",
            res(&[("gpu-logical", 2 * CORE)]),
            res(&[]),
            1.0,
            vec![],
            2.0,
        ),
        (
            "DRA resource with explicit weight",
            res(&[("gpu-logical", 2 * CORE)]),
            res(&[]),
            1.0,
            vec![("gpu-logical", 3.0)],
            6.0,
        ),
        (
            "mixed CPU and DRA resources",
            res(&[("cpu", 4 * CORE), ("gpu-logical", 2 * CORE)]),
            res(&[]),
            1.0,
            vec![("cpu", 1.0), ("gpu-logical", 5.0)],
            14.0,
        ),
        (
            "DRA resource with weight zero contributes nothing",
            res(&[("gpu-logical", 10 * CORE)]),
            res(&[]),
            1.0,
            vec![("gpu-logical", 0.0)],
            0.0,
        ),
        (
            "DRA resource in penalty only",
            res(&[]),
            res(&[("gpu-logical", 3 * CORE)]),
            1.0,
            vec![],
            3.0,
        ),
        (
            "DRA resource in both consumed and penalty",
            res(&[("gpu-logical", 2 * CORE)]),
            res(&[("gpu-logical", CORE)]),
            2.0,
            vec![("gpu-logical", 4.0)],
            6.0,
        ),
    ];
    for (name, consumed, penalty, lq_weight, weights, want) in cases {
        let w: BTreeMap<String, f64> = weights.into_iter().map(|(r, v)| (r.to_string(), v)).collect();
        assert_eq!(usage(&consumed, &penalty, lq_weight, &w), want, "{name}");
    }
}

/// `TestCalculateUsageWithNonPositiveWeight`: +Inf (sorted last), never NaN.
#[test]
fn a_queue_with_no_weight_has_infinite_usage() {
    for (name, consumed, w) in [
        ("zero weight, idle queue (no usage)", res(&[]), 0.0),
        ("zero weight, active queue", res(&[("cpu", 4 * CORE)]), 0.0),
        ("negative weight", res(&[("cpu", 4 * CORE)]), -1.0),
    ] {
        let u = usage(&consumed, &res(&[]), w, &BTreeMap::new());
        assert!(u.is_infinite() && u > 0.0, "{name}: {u}");
        assert!(rank(u) > rank(1e300), "{name}: sorted last");
    }
}

#[test]
fn rank_keeps_the_order_of_usages() {
    let us = [0.0, 1e-9, 0.5, 1.0, 2.0, 7.5, 1e12, f64::INFINITY];
    for w in us.windows(2) {
        assert!(rank(w[0]) < rank(w[1]), "{w:?}");
    }
    assert_eq!(rank(f64::NAN), 0);
}

// ---- ordering (cluster_queue_test.go TestFsAdmission) ----

fn afs_cq(name: &str, cpu: i64, on: bool) -> ClusterQueueModel {
    ClusterQueueModel {
        admission_fair_sharing: on,
        ..ClusterQueueModel::build(name).flavor("default", &[("cpu", cpu), ("gpu", 1000)])
    }
}

fn wl(name: &str, lq: &str, priority: i32, req: &[(&str, i64)]) -> WorkloadModel {
    WorkloadModel {
        local_queue: lq.to_string(),
        ..WorkloadModel::build("default", name, "cq")
            .priority(priority)
            .request(req)
    }
}

fn lq(name: &str) -> LocalQueueKey {
    LocalQueueKey::new("default", name)
}

fn core_with(cq: ClusterQueueModel, c: Option<AfsConfig>) -> AdmissionCore {
    let mut core = AdmissionCore::new();
    core.upsert_flavor(FlavorModel::build("default"));
    core.set_admission_fair_sharing(c);
    core.upsert_cluster_queue(cq).unwrap_or_else(|e| panic!("{e}"));
    core
}

fn admitted_names(core: &mut AdmissionCore, now: i64) -> Vec<String> {
    let mut v: Vec<String> = core
        .schedule_cycle(now)
        .admissions
        .into_iter()
        .map(|a| a.key.name)
        .collect();
    v.sort();
    v
}

/// Every case of `TestFsAdmission`: with room for one workload, the one Kueue pops first is admitted.
#[test]
fn pending_workloads_are_ordered_by_their_local_queue_usage() {
    type Case = (
        &'static str,
        bool,
        Option<AfsConfig>,
        Vec<(&'static str, f64, Resources)>,
        Vec<WorkloadModel>,
        &'static str,
    );
    let gpu_weights = AfsConfig {
        resource_weights: [("cpu".to_string(), 0.0), ("gpu".to_string(), 1.0)].into(),
        ..cfg(0, MIN5)
    };
    let one = |n: &'static str, lqn: &'static str, p: i32| wl(n, lqn, p, &[("cpu", 1)]);
    let cases: Vec<Case> = vec![
        (
            "workloads are ordered by LQ usage, instead of priorities",
            true,
            Some(cfg(0, MIN5)),
            vec![
                ("lqA", 1.0, res(&[("cpu", 2 * CORE)])),
                ("lqB", 1.0, res(&[("cpu", CORE)])),
            ],
            vec![one("wlA-high", "lqA", 2), one("wlB-low", "lqB", 1)],
            "wlB-low",
        ),
        (
            "workloads are ordered by LQ usage with respect to resource weights",
            true,
            Some(gpu_weights),
            vec![
                ("lqA", 1.0, res(&[("cpu", CORE), ("gpu", 10 * CORE)])),
                ("lqB", 1.0, res(&[("cpu", 1000 * CORE), ("gpu", CORE)])),
            ],
            vec![one("wlA-high", "lqA", 2), one("wlB-low", "lqB", 1)],
            "wlB-low",
        ),
        (
            "workloads are ordered by LQ usage with respect to LQs' fair sharing weights",
            true,
            Some(cfg(0, MIN5)),
            vec![
                ("lqA", 1.0, res(&[("cpu", 10 * CORE)])),
                ("lqB", 2.0, res(&[("cpu", 6 * CORE)])),
            ],
            vec![one("wlA-high", "lqA", 2), one("wlB-low", "lqB", 1)],
            "wlB-low",
        ),
        (
            "workloads with the same LQ usage are ordered by priority",
            true,
            Some(cfg(0, MIN5)),
            vec![("lqA", 1.0, res(&[("cpu", 10 * CORE)]))],
            vec![one("wlA-low", "lqA", 1), one("wlA-high", "lqA", 2)],
            "wlA-high",
        ),
        (
            "workloads with NoFairSharing CQ are ordered by priority",
            false,
            Some(cfg(0, MIN5)),
            vec![("lqA", 1.0, res(&[]))],
            vec![one("wlA-low", "lqA", 1), one("wlA-high", "lqA", 2)],
            "wlA-high",
        ),
        (
            "workloads with no FS config are ordered by priority",
            false,
            None,
            vec![("lqA", 1.0, res(&[]))],
            vec![one("wlA-low", "lqA", 1), one("wlA-high", "lqA", 2)],
            "wlA-high",
        ),
    ];
    for (name, mode, c, lqs, wls, want) in cases {
        let mut core = core_with(afs_cq("cq", 1, mode), c);
        for (n, w, consumed) in lqs {
            core.track_local_queue(lq(n), "cq", w, Some(consumed), 0);
        }
        for w in wls {
            core.add_workload(w).unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(admitted_names(&mut core, 1), [want], "{name}");
    }
    // The same with the high-priority workload's queue busier but AFS configured off: priority wins.
    let mut core = core_with(afs_cq("cq", 1, true), None);
    core.track_local_queue(lq("lqA"), "cq", 1.0, Some(res(&[("cpu", 2 * CORE)])), 0);
    core.add_workload(one("wlA-high", "lqA", 2))
        .unwrap_or_else(|e| panic!("{e}"));
    core.add_workload(one("wlB-low", "lqB", 1))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(admitted_names(&mut core, 1), ["wlA-high"]);
}

/// `fair_sharing_test.go` "admits one workload from each LocalQueue when quota is limited": two
/// LocalQueues with no history, two 4-CPU workloads each, 8 CPU. The first admission's entry
/// penalty puts its LocalQueue behind the other within the same cycle.
#[test]
fn the_entry_penalty_reorders_within_a_cycle() {
    let setup = |on: bool| {
        let mut core = core_with(afs_cq("cq", 8000, on), Some(cfg(1000, 1000)));
        for n in ["lq-a", "lq-b"] {
            core.track_local_queue(lq(n), "cq", 1.0, None, 0);
        }
        // lq-a's workloads are older: without fair sharing both of them go first.
        for (i, (n, q)) in [("a1", "lq-a"), ("a2", "lq-a"), ("b1", "lq-b"), ("b2", "lq-b")]
            .into_iter()
            .enumerate()
        {
            let w = wl(n, q, 0, &[("cpu", 4000)]).at(i as i64);
            core.add_workload(w).unwrap_or_else(|e| panic!("{e}"));
        }
        core
    };
    assert_eq!(admitted_names(&mut setup(true), 10), ["a1", "b1"]);
    assert_eq!(admitted_names(&mut setup(false), 10), ["a1", "a2"]);
}

// ---- the entry penalty's lifecycle and sampling ----

fn penalty_of(core: &AdmissionCore, n: &str) -> Resources {
    core.local_queue_usage(&lq(n))
        .map(|e| e.pending_penalty())
        .unwrap_or_default()
}

/// `fair_sharing_test.go` "should update consumed resources and subtract entry penalties on
/// workload admission": the admission's penalty is pending until the API shows it, then folded
/// into the consumed resources, and the next admission adds to them.
#[test]
fn the_penalty_is_settled_into_consumed_resources_when_the_admission_shows() {
    let mut core = core_with(afs_cq("cq", 8000, true), Some(cfg(1000, 1000)));
    core.track_local_queue(lq("lq-a"), "cq", 1.0, None, 0);
    core.add_workload(wl("a1", "lq-a", 0, &[("cpu", 4000)]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(admitted_names(&mut core, 0), ["a1"]);
    // alpha(1s, 1s) = 1/2 of 4 CPU.
    assert_eq!(penalty_of(&core, "lq-a"), res(&[("cpu", 2 * CORE)]));
    core.settle_admission(&WorkloadKey::new("default", "a1"), 0);
    let e = core.local_queue_usage(&lq("lq-a")).cloned().unwrap_or_default();
    assert!(!e.has_pending_penalty(), "{e:?}");
    // Every resource of the ClusterQueue shows, as Kueue's LocalQueue usage lists them.
    assert_eq!(e.consumed, res(&[("cpu", 2 * CORE), ("gpu", 0)]));
    core.add_workload(wl("a2", "lq-a", 0, &[("cpu", 4000)]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(admitted_names(&mut core, 0), ["a2"]);
    core.settle_admission(&WorkloadKey::new("default", "a2"), 0);
    let e = core.local_queue_usage(&lq("lq-a")).cloned().unwrap_or_default();
    assert!(!e.has_pending_penalty());
    assert!(e.consumed["cpu"] > 3_900_000_000, "{e:?}");
}

/// Kueue's `TestUpdateDropsUnsettleableAfsEntryPenalty` and `entry_penalties_test.go`, in the core:
/// an eviction keeps the unsettled penalty, the next admission replaces it (one penalty, not two),
/// settling twice folds it once, and a penalty that can no longer settle (deleted, or moved to
/// another LocalQueue) is dropped.
#[test]
fn an_unsettled_penalty_is_kept_on_eviction_replaced_not_stacked_and_dropped_when_it_cannot_settle() {
    let mut core = core_with(afs_cq("cq", 8000, true), Some(cfg(1000, 1000)));
    core.track_local_queue(lq("lq-a"), "cq", 1.0, None, 0);
    let a1 = WorkloadKey::new("default", "a1");
    core.add_workload(wl("a1", "lq-a", 0, &[("cpu", 4000)]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(admitted_names(&mut core, 0), ["a1"]);
    assert!(core.release(&a1));
    assert_eq!(
        penalty_of(&core, "lq-a"),
        res(&[("cpu", 2 * CORE)]),
        "evicted back to pending: kept"
    );
    core.retain_entry_penalty(&a1, Some(&lq("lq-a")));
    assert!(core.has_entry_penalty(&a1), "still on its LocalQueue: kept");
    core.add_workload(wl("a1", "lq-a", 0, &[("cpu", 4000)]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(admitted_names(&mut core, 0), ["a1"]);
    assert_eq!(
        penalty_of(&core, "lq-a"),
        res(&[("cpu", 2 * CORE)]),
        "replaced, not stacked"
    );
    // Settling twice folds it once (no time passed: nothing decays).
    core.settle_admission(&a1, 0);
    core.settle_admission(&a1, 0);
    let e = core.local_queue_usage(&lq("lq-a")).cloned().unwrap_or_default();
    assert_eq!(e.consumed["cpu"], 2 * CORE);
    assert!(!core.has_entry_penalty(&a1));

    for home in [None, Some(lq("lq-b"))] {
        let a2 = WorkloadKey::new("default", "a2");
        core.add_workload(wl("a2", "lq-a", 0, &[("cpu", 2000)]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(admitted_names(&mut core, 0), ["a2"]);
        assert_eq!(penalty_of(&core, "lq-a"), res(&[("cpu", CORE)]));
        core.retain_entry_penalty(&a2, home.as_ref());
        assert_eq!(penalty_of(&core, "lq-a"), res(&[]), "{home:?}: dropped");
        let e = core.local_queue_usage(&lq("lq-a")).cloned().unwrap_or_default();
        assert_eq!(e.consumed["cpu"], 2 * CORE, "{home:?}: dropped, not settled");
        assert!(core.delete_workload(&a2));
    }
}

/// A LocalQueue seen before its ClusterQueue lists the ClusterQueue's resources (at 0) once that is
/// known, without waiting for a sample: Kueue's first reconcile waits for the ClusterQueue.
#[test]
fn a_local_queue_seen_before_its_cluster_queue_lists_its_resources_once_known() {
    let mut core = AdmissionCore::new();
    core.upsert_flavor(FlavorModel::build("default"));
    core.set_admission_fair_sharing(Some(cfg(3_600_000, 3_600_000)));
    core.track_local_queue(lq("lq-a"), "cq", 1.0, None, 0);
    let consumed = |core: &AdmissionCore| {
        core.local_queue_usage(&lq("lq-a"))
            .map(|e| e.consumed.clone())
            .unwrap_or_default()
    };
    assert_eq!(consumed(&core), res(&[]));
    core.upsert_cluster_queue(afs_cq("cq", 8000, true))
        .unwrap_or_else(|e| panic!("{e}"));
    core.track_local_queue(lq("lq-a"), "cq", 1.0, None, 1);
    assert_eq!(consumed(&core), res(&[("cpu", 0), ("gpu", 0)]));
}

/// Kueue's LocalQueue reconcile: a LocalQueue is sampled once its interval has run out, its
/// consumed resources decaying toward what its admitted workloads hold; with no half-life they are
/// reset; a new LocalQueue starts from its persisted status.
#[test]
fn sampling_decays_toward_what_is_held() {
    let mut core = core_with(afs_cq("cq", 8000, true), Some(cfg(1000, 1000)));
    core.track_local_queue(lq("lq-a"), "cq", 1.0, Some(res(&[("cpu", 6 * CORE)])), 0);
    core.track_local_queue(lq("lq-b"), "cq", 1.0, None, 500);
    assert_eq!(core.next_sample_ms(), Some(1000));
    assert_eq!(core.sample_local_queues(999), 0);
    core.add_workload(wl("a1", "lq-a", 0, &[("cpu", 2000)]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(admitted_names(&mut core, 999), ["a1"]);
    core.settle_admission(&WorkloadKey::new("default", "a1"), 999);
    // Settled at 999: 6 decayed by alpha(999ms) toward 2 held, plus the 1 CPU penalty.
    let after_settle = core
        .local_queue_usage(&lq("lq-a"))
        .map(|e| e.consumed["cpu"])
        .unwrap_or_default();
    assert!(
        after_settle > 5 * CORE && after_settle < 6 * CORE,
        "{after_settle}"
    );
    assert_eq!(core.sample_local_queues(1500), 1, "only lq-b is due");
    assert_eq!(
        core.sample_local_queues(1999),
        1,
        "lq-a, one interval after its settlement"
    );
    let e = core.local_queue_usage(&lq("lq-a")).cloned().unwrap_or_default();
    assert_eq!(e.last_update_ms, 1999);
    // One half-life later: half way from the settled value toward the 2 CPU held.
    let want = after_settle / 2 + CORE;
    assert!(
        (e.consumed["cpu"] - want).abs() < 2_000_000,
        "{} vs {want}",
        e.consumed["cpu"]
    );
    assert_eq!(core.next_sample_ms(), Some(2500));
    // No half-life: reset at each sample.
    let mut core = core_with(afs_cq("cq", 8000, true), Some(cfg(0, 1000)));
    core.track_local_queue(lq("lq-a"), "cq", 1.0, Some(res(&[("cpu", 6 * CORE)])), 0);
    core.sample_local_queues(1000);
    assert_eq!(
        core.local_queue_usage(&lq("lq-a")).map(|e| e.consumed.clone()),
        Some(res(&[]))
    );
    // Without the feature nothing is tracked.
    let mut core = core_with(afs_cq("cq", 8000, true), None);
    core.track_local_queue(lq("lq-a"), "cq", 1.0, None, 0);
    assert!(core.local_queue_usage(&lq("lq-a")).is_none());
    assert_eq!(core.next_sample_ms(), None);
}

/// A LocalQueue's sampled usage moves its parked and active workloads alike, and a raised weight
/// (`fair_sharing_test.go` "admits from the LocalQueue whose weight is raised through the API")
/// puts its workloads first.
#[test]
fn a_raised_weight_puts_the_queue_first() {
    let mut core = core_with(afs_cq("cq", 1000, true), Some(cfg(0, MIN5)));
    core.track_local_queue(lq("lq-a"), "cq", 1.0, Some(res(&[("cpu", 4 * CORE)])), 0);
    core.track_local_queue(lq("lq-b"), "cq", 1.0, Some(res(&[("cpu", 2 * CORE)])), 0);
    core.add_workload(wl("a", "lq-a", 0, &[("cpu", 1000)]).at(0))
        .unwrap_or_else(|e| panic!("{e}"));
    core.add_workload(wl("b", "lq-b", 0, &[("cpu", 1000)]).at(1))
        .unwrap_or_else(|e| panic!("{e}"));
    let pos = core.queue_positions();
    assert_eq!(pos[&WorkloadKey::new("default", "b")].1, 0);
    core.track_local_queue(lq("lq-a"), "cq", 4.0, None, 0);
    assert_eq!(admitted_names(&mut core, 1), ["a"]);
}

// ---- preemption (preemption_test.go TestCandidatesOrdering; fair_sharing_test.go) ----

/// `TestCandidatesOrdering` "workloads with higher LQ usage first" (in the preemptor's own
/// ClusterQueue) and "workloads from different CQ are sorted based on priority and timestamp", and
/// `fair_sharing_test.go` "should preempt a workload from LQ with higher recent usage": cq2
/// reclaims its quota from cq1, whose busier LocalQueue's workload goes first despite its priority.
#[test]
fn preemption_takes_the_busier_local_queue_first() {
    use crate::queue::{PreemptionPolicy, ReclaimWithinCohort, WithinClusterQueue};
    let setup = |on: bool| {
        let mut core = AdmissionCore::new();
        core.upsert_flavor(FlavorModel::build("default"));
        core.set_admission_fair_sharing(Some(cfg(1000, 1000)));
        let cq1 = ClusterQueueModel {
            admission_fair_sharing: on,
            ..ClusterQueueModel::build("cq1")
                .cohort("all")
                .flavor("default", &[("cpu", 16_000)])
        };
        let cq2 = ClusterQueueModel::build("cq2")
            .cohort("all")
            .flavor("default", &[("cpu", 16_000)])
            .preemption(PreemptionPolicy {
                reclaim_within_cohort: ReclaimWithinCohort::Any,
                within_cluster_queue: WithinClusterQueue::LowerPriority,
                ..Default::default()
            });
        for cq in [cq1, cq2] {
            core.upsert_cluster_queue(cq).unwrap_or_else(|e| panic!("{e}"));
        }
        // lq-a holds 20 CPU, lq-b 12: lq-a's usage is higher.
        core.track_local_queue(lq("lq-a"), "cq1", 1.0, Some(res(&[("cpu", 20 * CORE)])), 0);
        core.track_local_queue(lq("lq-b"), "cq1", 1.0, Some(res(&[("cpu", 12 * CORE)])), 0);
        for (n, q, p, cpu) in [("high-a", "lq-a", 10, 20_000), ("low-b", "lq-b", 1, 12_000)] {
            let w = WorkloadModel {
                cluster_queue: "cq1".into(),
                ..wl(n, q, p, &[("cpu", cpu)])
            };
            let a = crate::queue::Admission {
                cluster_queue: "cq1".into(),
                pod_set_assignments: vec![crate::queue::PodSetAssignment {
                    name: "main".into(),
                    flavors: [("cpu".to_string(), "default".to_string())].into(),
                    resource_usage: [("cpu".to_string(), crate::queue::Amount(cpu))].into(),
                    count: 1,
                    topology: None,
                }],
            };
            core.record_admitted(w, a, 0).unwrap_or_else(|e| panic!("{e}"));
        }
        let c = WorkloadModel {
            cluster_queue: "cq2".into(),
            ..wl("c", "lq-c", 0, &[("cpu", 10_000)])
        };
        core.add_workload(c).unwrap_or_else(|e| panic!("{e}"));
        let res = core.schedule_cycle(1);
        res.evictions.into_iter().map(|e| e.key.name).collect::<Vec<_>>()
    };
    assert_eq!(setup(true), ["high-a"], "the busier LocalQueue first");
    assert_eq!(
        setup(false),
        ["low-b"],
        "without fair sharing: the lower priority first"
    );
}

/// Turned off with workloads already ranked, the usual order is back at once.
#[test]
fn turning_it_off_restores_the_usual_order() {
    let mut core = core_with(afs_cq("cq", 1000, true), Some(cfg(0, MIN5)));
    core.track_local_queue(lq("lqA"), "cq", 1.0, Some(res(&[("cpu", 2 * CORE)])), 0);
    core.add_workload(wl("wlA-high", "lqA", 2, &[("cpu", 1000)]))
        .unwrap_or_else(|e| panic!("{e}"));
    core.add_workload(wl("wlB-low", "lqB", 1, &[("cpu", 1000)]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        core.queue_positions()[&WorkloadKey::new("default", "wlB-low")].1,
        0
    );
    core.set_admission_fair_sharing(None);
    assert_eq!(admitted_names(&mut core, 1), ["wlA-high"]);
}
