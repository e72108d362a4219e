//! Kueue's `pkg/scheduler/scheduler_recompute_preemption_test.go`
//! (`TestScheduleRecomputePreemptionTargets`): the "hero workload" of the
//! `RecomputeAssignmentUponPreemptionTargetsOverlap` gate. A preemptor whose victims another
//! preemptor of the same cycle already claimed computes its assignment again as if those victims
//! were gone, keeping to the flavors it was nominated: it preempts other victims (`new_targets`),
//! waits for the cycle's preemptions because it then fits (`deferred_fit`), or is skipped
//! (`skipped`). Each test names its Kueue case; cpu in milli-CPU (Kueue's accounting unit).

use std::collections::BTreeMap;

use super::scheduler::{DEFERRED_FIT_MESSAGE, OVERLAP_SKIP_MESSAGE};
use super::tests::k;
use super::*;

/// `n` CPUs in milli-CPU.
const fn c(n: i64) -> i64 {
    n * 1000
}

fn wl(name: &str, cq: &str, cpus: i64) -> WorkloadModel {
    WorkloadModel::build("ns", name, cq).request(&[("cpu", c(cpus))])
}

fn reclaiming(cq: ClusterQueueModel) -> ClusterQueueModel {
    cq.within(WithinClusterQueue::LowerPriority)
        .reclaim(ReclaimWithinCohort::Any)
}

/// Kueue's `clusterQueues` and `defaultCohorts()` of the test: root-cohort (nominal 3005) over
/// parent-cohort-a (0; cq-hero 3000, cq-noisy 0), parent-cohort-b (cq-tiny 50) and
/// parent-cohort-c (cq-rest 0).
fn hero_core(fair: bool) -> AdmissionCore {
    let mut core = AdmissionCore::new();
    if fair {
        core.set_fair_sharing(Some(FairSharingConfig::default()));
    }
    core.upsert_flavor(FlavorModel::build("default"));
    core.upsert_flavor(FlavorModel::build("on-demand"));
    let cohorts = [
        CohortModel::build("root-cohort").flavor_limits("default", &[("cpu", c(3005), None, None)]),
        CohortModel::build("parent-cohort-a")
            .parent("root-cohort")
            .flavor_limits("default", &[("cpu", 0, None, None)]),
        CohortModel::build("parent-cohort-b").parent("root-cohort"),
        CohortModel::build("parent-cohort-c").parent("root-cohort"),
    ];
    for co in cohorts {
        core.upsert_cohort(co).unwrap();
    }
    for (name, cohort, cpus) in [
        ("cq-hero", "parent-cohort-a", 3000),
        ("cq-noisy", "parent-cohort-a", 0),
        ("cq-tiny", "parent-cohort-b", 50),
        ("cq-rest", "parent-cohort-c", 0),
    ] {
        let cq = ClusterQueueModel::build(name)
            .cohort(cohort)
            .flavor("default", &[("cpu", c(cpus))]);
        core.upsert_cluster_queue(reclaiming(cq)).unwrap();
    }
    core
}

fn admit(core: &mut AdmissionCore, w: WorkloadModel, flavor: &str) {
    let a = super::tests::admission_in(&w, &w.cluster_queue, flavor);
    core.record_admitted(w, a, 0).unwrap();
}

fn evicted(r: &CycleResult) -> Vec<&str> {
    let mut v: Vec<&str> = r.evictions.iter().map(|e| e.key.name.as_str()).collect();
    v.sort();
    v
}

fn recomputations(r: &CycleResult) -> BTreeMap<(&str, &str), usize> {
    r.preemption_target_recomputations
        .iter()
        .map(|((cq, res), n)| ((cq.as_str(), res.as_str()), *n))
        .collect()
}

fn pending(core: &AdmissionCore, name: &str) -> (PendingReason, String) {
    let (reason, msg) = core
        .pending_reason(&k(name))
        .unwrap_or_else(|| panic!("{name} is not pending"));
    (reason, msg.to_string())
}

fn inadmissible(core: &AdmissionCore, cq: &str) -> usize {
    let q = &core.queues[cq];
    q.len() - q.active_len()
}

// Kueue: "with fair sharing: hierarchical nominal-first prefers non-borrowing leaf CQ".
#[test]
fn the_hero_workload_finds_victims_no_one_claimed() {
    let mut core = hero_core(true);
    admit(&mut core, wl("wl-noisy-admitted", "cq-noisy", 3000), "default");
    admit(&mut core, wl("wl-tiny-admitted", "cq-tiny", 60), "default");
    admit(&mut core, wl("wl-rest-admitted", "cq-rest", 2995), "default");
    core.add_workload(wl("wl-hero", "cq-hero", 2990).at(1)).unwrap();
    core.add_workload(wl("wl-tiny-pending", "cq-tiny", 10).at(0))
        .unwrap();
    let r = core.schedule_cycle(100);
    assert!(r.admissions.is_empty(), "{:?}", r.admissions);
    assert_eq!(evicted(&r), ["wl-noisy-admitted", "wl-rest-admitted"]);
    assert_eq!(
        pending(&core, "wl-hero"),
        (
            PendingReason::WaitingForPreemptedWorkloads,
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 5 more needed. Pending the preemption of 1 workload(s)".to_string()
        )
    );
    assert_eq!(
        pending(&core, "wl-tiny-pending").0,
        PendingReason::WaitingForPreemptedWorkloads
    );
    assert_eq!(recomputations(&r), [(("cq-hero", "new_targets"), 1)].into());
    assert!(r.preemption_skips.is_empty(), "{:?}", r.preemption_skips);
}

// Kueue: "two workloads reclaim nominal quota; RecomputePreemptionTargetsUponOverlap enabled".
#[test]
fn the_hero_workload_waits_when_it_fits_once_the_cycles_preemptions_complete() {
    let mut core = hero_core(false);
    admit(&mut core, wl("wl-rest-admitted", "cq-rest", 6055), "default");
    core.add_workload(wl("wl-hero", "cq-hero", 2950).at(1)).unwrap();
    core.add_workload(wl("wl-tiny-pending", "cq-tiny", 50).at(0))
        .unwrap();
    let r = core.schedule_cycle(100);
    assert!(r.admissions.is_empty(), "{:?}", r.admissions);
    assert_eq!(evicted(&r), ["wl-rest-admitted"]);
    let preemptor = r.evictions[0].message.as_str();
    assert!(
        preemptor.contains("due to reclamation within the cohort; preemptor path: /root-cohort/parent-cohort-b/cq-tiny; preemptee path: /root-cohort/parent-cohort-c/cq-rest"),
        "{preemptor}"
    );
    assert_eq!(
        pending(&core, "wl-hero"),
        (
            PendingReason::WaitingForPreemptedWorkloads,
            DEFERRED_FIT_MESSAGE.to_string()
        )
    );
    assert_eq!(
        DEFERRED_FIT_MESSAGE,
        "Workload has overlapping preemption targets with another workload, but will fit after these preemptions complete"
    );
    assert_eq!(
        pending(&core, "wl-tiny-pending"),
        (
            PendingReason::WaitingForPreemptedWorkloads,
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 50 more needed. Pending the preemption of 1 workload(s)".to_string()
        )
    );
    assert_eq!(recomputations(&r), [(("cq-hero", "deferred_fit"), 1)].into());
    // Both stay in their queues' active sets (Kueue's `wantLeft`).
    assert_eq!(inadmissible(&core, "cq-hero"), 0);
    assert_eq!(inadmissible(&core, "cq-tiny"), 0);
}

/// Kueue's stickiness cases: cq-1 and cq-2 (5 CPU each of `default` and `on-demand`) in cohort
/// `root`; cq-1 holds 10 CPU on each flavor; a 10-CPU preemptor in each ClusterQueue.
fn stickiness_core(recompute: bool) -> AdmissionCore {
    let mut core = AdmissionCore::new();
    core.set_fair_sharing(Some(FairSharingConfig::default()));
    core.set_recompute_on_overlap(recompute);
    core.upsert_flavor(FlavorModel::build("default"));
    core.upsert_flavor(FlavorModel::build("on-demand"));
    core.upsert_cohort(CohortModel::build("root")).unwrap();
    for name in ["cq-1", "cq-2"] {
        let cq = ClusterQueueModel::build(name)
            .cohort("root")
            .flavor("default", &[("cpu", c(5))])
            .flavor("on-demand", &[("cpu", c(5))]);
        core.upsert_cluster_queue(reclaiming(cq)).unwrap();
    }
    admit(&mut core, wl("wl-admitted-default", "cq-1", 10), "default");
    admit(&mut core, wl("wl-admitted-on-demand", "cq-1", 10), "on-demand");
    core.add_workload(wl("wl-pending-high-prio-1", "cq-1", 10).priority(11).at(0))
        .unwrap();
    core.add_workload(wl("wl-pending-high-prio-2", "cq-2", 10).priority(10).at(1))
        .unwrap();
    core
}

const PRIO_2_MESSAGE: &str = "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 10 more needed, insufficient unused quota for cpu in flavor on-demand, 10 more needed. Pending the preemption of 1 workload(s)";

// Kueue: "flavor stickiness with RecomputePreemptionTargetsUponOverlap" (and its variants "... and
// TAS disabled", "... and TAS recomputation disabled", which expect the same).
#[test]
fn a_recomputed_assignment_keeps_to_its_nominated_flavors() {
    let mut core = stickiness_core(true);
    let r = core.schedule_cycle(100);
    assert!(r.admissions.is_empty(), "{:?}", r.admissions);
    assert_eq!(evicted(&r), ["wl-admitted-default"]);
    assert!(
        r.evictions[0].message.contains(
            "due to Fair Sharing within the cohort; preemptor path: /root/cq-2; preemptee path: /root/cq-1"
        ),
        "{}",
        r.evictions[0].message
    );
    assert_eq!(
        pending(&core, "wl-pending-high-prio-1"),
        (
            PendingReason::WaitingForQuota,
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 10 more needed, skipping flavor on-demand as it is not found in the nomination mapping for resource cpu".to_string()
        )
    );
    assert_eq!(
        pending(&core, "wl-pending-high-prio-2"),
        (
            PendingReason::WaitingForPreemptedWorkloads,
            PRIO_2_MESSAGE.to_string()
        )
    );
    assert_eq!(inadmissible(&core, "cq-1"), 1, "wantInadmissibleLeft cq-1");
    assert_eq!(inadmissible(&core, "cq-2"), 0, "wantLeft cq-2");
    assert_eq!(recomputations(&r), [(("cq-1", "skipped"), 1)].into());
}

// Kueue: "legacy overlap skip with RecomputePreemptionTargetsUponOverlap disabled".
#[test]
fn with_the_gate_off_an_overlapping_preemptor_is_skipped() {
    let mut core = stickiness_core(false);
    let r = core.schedule_cycle(100);
    assert!(r.admissions.is_empty(), "{:?}", r.admissions);
    assert_eq!(evicted(&r), ["wl-admitted-default"]);
    assert_eq!(
        pending(&core, "wl-pending-high-prio-1"),
        (PendingReason::WaitingForQuota, OVERLAP_SKIP_MESSAGE.to_string())
    );
    assert_eq!(
        OVERLAP_SKIP_MESSAGE,
        "Workload has overlapping preemption targets with another workload"
    );
    assert_eq!(
        pending(&core, "wl-pending-high-prio-2"),
        (
            PendingReason::WaitingForPreemptedWorkloads,
            PRIO_2_MESSAGE.to_string()
        )
    );
    assert_eq!(inadmissible(&core, "cq-1"), 0, "wantLeft cq-1");
    assert_eq!(r.preemption_skips, [("cq-1".to_string(), 1)].into());
    assert!(r.preemption_target_recomputations.is_empty());
}

// Kueue: test/integration/singlecluster/scheduler/fairsharing/fair_sharing_test.go, "hero workload
// sticks to preferred flavor if overlap resolved", cycle by cycle: cq-hero (100 CPU of each
// flavor), cq-tiny (50 of each) and cq-rest (none) in cohort-a; cq-rest runs wlA on flavor1 and
// wlB on flavor2, 150 CPU each. Tiny (priority 50) and hero (100) both want wlA's flavor1; tiny
// goes first and preempts wlA; hero waits for that preemption instead of preempting wlB on flavor2,
// and both are admitted on flavor1 once wlA is gone. wlB is never preempted.
#[test]
fn the_hero_workload_sticks_to_its_preferred_flavor() {
    let mut core = AdmissionCore::new();
    core.set_fair_sharing(Some(FairSharingConfig::default()));
    core.upsert_flavor(FlavorModel::build("flavor1"));
    core.upsert_flavor(FlavorModel::build("flavor2"));
    core.upsert_cohort(CohortModel::build("cohort-a")).unwrap();
    for (name, cpus) in [("cq-hero", 100), ("cq-tiny", 50), ("cq-rest", 0)] {
        let cq = ClusterQueueModel::build(name)
            .cohort("cohort-a")
            .flavor("flavor1", &[("cpu", c(cpus))])
            .flavor("flavor2", &[("cpu", c(cpus))]);
        core.upsert_cluster_queue(reclaiming(cq)).unwrap();
    }
    core.add_workload(wl("wlA", "cq-rest", 150).priority(10).at(0))
        .unwrap();
    let r = core.schedule_cycle(1);
    assert_eq!(r.admissions.len(), 1);
    assert_eq!(super::tests::cpu_flavor(&r.admissions[0].admission), "flavor1");
    core.add_workload(wl("wlB", "cq-rest", 150).priority(10).at(1))
        .unwrap();
    let r = core.schedule_cycle(2);
    assert_eq!(r.admissions.len(), 1);
    assert_eq!(super::tests::cpu_flavor(&r.admissions[0].admission), "flavor2");

    core.add_workload(wl("wlHero", "cq-hero", 100).priority(100).at(2))
        .unwrap();
    core.add_workload(wl("wlTiny", "cq-tiny", 50).priority(50).at(3))
        .unwrap();
    let r = core.schedule_cycle(3);
    assert_eq!(evicted(&r), ["wlA"], "{:?}", r.pending);
    assert!(r.admissions.is_empty(), "{:?}", r.admissions);
    assert_eq!(
        recomputations(&r).keys().map(|(_, res)| *res).collect::<Vec<_>>(),
        ["deferred_fit"]
    );
    // While wlA is still being evicted, nobody turns to wlB.
    let r = core.schedule_cycle(4);
    assert!(r.evictions.is_empty(), "{:?}", r.evictions);
    assert!(r.admissions.is_empty(), "{:?}", r.admissions);
    // wlA's eviction finishes: its quota is released and it is pending again.
    assert!(core.release(&k("wlA")));
    core.add_workload(wl("wlA", "cq-rest", 150).priority(10).at(0))
        .unwrap();
    let r = core.schedule_cycle(5);
    let mut got: Vec<(&str, String)> = r
        .admissions
        .iter()
        .map(|a| (a.key.name.as_str(), super::tests::cpu_flavor(&a.admission)))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("wlHero", "flavor1".to_string()),
            ("wlTiny", "flavor1".to_string())
        ]
    );
    assert!(r.evictions.is_empty(), "{:?}", r.evictions);
    assert!(core.is_admitted(&k("wlB")));
}

// Kueue: "with fair sharing: two workloads reclaim nominal quota; RecomputePreemptionTargetsUponOverlap
// enabled".
#[test]
fn with_fair_sharing_the_hero_workload_waits_and_a_borrower_does_not_fit() {
    let mut core = hero_core(true);
    admit(&mut core, wl("wl-rest-admitted", "cq-rest", 6055), "default");
    core.add_workload(wl("wl-hero", "cq-hero", 2950).at(1)).unwrap();
    core.add_workload(wl("wl-tiny-pending", "cq-tiny", 50).at(0))
        .unwrap();
    core.add_workload(wl("wl-rest-pending", "cq-rest", 4000).priority(10).at(2))
        .unwrap();
    let r = core.schedule_cycle(100);
    assert!(r.admissions.is_empty(), "{:?}", r.admissions);
    assert_eq!(evicted(&r), ["wl-rest-admitted"]);
    assert!(
        r.evictions[0].message.contains(
            "due to reclamation within the cohort; preemptor path: /root-cohort/parent-cohort-b/cq-tiny"
        ),
        "{}",
        r.evictions[0].message
    );
    assert_eq!(
        pending(&core, "wl-hero"),
        (
            PendingReason::WaitingForPreemptedWorkloads,
            DEFERRED_FIT_MESSAGE.to_string()
        )
    );
    assert_eq!(
        pending(&core, "wl-rest-pending"),
        (
            PendingReason::WaitingForQuota,
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 945 more needed".to_string()
        )
    );
    assert_eq!(inadmissible(&core, "cq-rest"), 1, "wantInadmissibleLeft cq-rest");
    // Kueue's test checks only the series it lists (cq-hero's `deferred_fit`). wl-rest-pending's
    // targets overlapped too: its "945 more needed" is what its recomputation found (quota with
    // both preemptors' reservations and no victim left), so it is counted `skipped`.
    assert_eq!(
        recomputations(&r),
        [(("cq-hero", "deferred_fit"), 1), (("cq-rest", "skipped"), 1)].into()
    );
}
