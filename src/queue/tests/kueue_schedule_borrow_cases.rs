//! Kueue's `pkg/scheduler/scheduler_test.go` `TestSchedule`, continued: borrowing in cohorts,
//! capacity a lender holds, workload slices and overflow, on the fixture of
//! `kueue_schedule_fixture.rs`.

use super::PendingReason::{ExceedsMaxQuota, WaitingForQuota};
use super::kueue_schedule_fixture::*;
use super::*;

use FungibilityPolicy::{MayStopSearch, TryNextFlavor};

#[test]
fn schedule_borrowing_cases() {
    let preempt_any = || {
        policy(
            WithinClusterQueue::LowerPriority,
            ReclaimWithinCohort::Any,
            BorrowWithinCohortPolicy::Never,
        )
    };
    let r1r2 = |name: &str| {
        ClusterQueueModel::build(name)
            .cohort("co")
            .preemption(preempt_any())
            .flavor_limits(
                "default",
                &[("r1", 10, Some(10), None), ("r2", 10, Some(10), None)],
            )
    };
    let cqs = || vec![r1r2("cq1"), r1r2("cq2"), r1r2("cq3")];
    run(Case {
        name: "two workloads can borrow different resources from the same flavor in the same cycle",
        cqs: cqs(),
        pending: vec![
            main("sales/wl1", "cq1", &[("r1", 16)]).priority(-1),
            main("sales/wl2", "cq2", &[("r2", 16)]).priority(-2),
        ],
        want_admitted: vec![
            ("sales/wl1", "main*1 r1=default"),
            ("sales/wl2", "main*1 r2=default"),
        ],
        ..Default::default()
    });
    run(Case {
        name: "two workloads can borrow the same resources from the same flavor in the same cycle if fits in the cohort quota",
        cqs: cqs(),
        pending: vec![
            main("sales/wl1", "cq1", &[("r1", 16)]).priority(-1),
            main("sales/wl2", "cq2", &[("r1", 14)]).priority(-2),
        ],
        want_admitted: vec![
            ("sales/wl1", "main*1 r1=default"),
            ("sales/wl2", "main*1 r1=default"),
        ],
        ..Default::default()
    });
    run(Case {
        name: "only one workload can borrow one resources from the same flavor in the same cycle if cohort quota cannot fit",
        cqs: cqs(),
        pending: vec![
            main("sales/wl1", "cq1", &[("r1", 16)]).priority(-1),
            main("sales/wl2", "cq2", &[("r1", 16)]).priority(-2),
        ],
        want_admitted: vec![("sales/wl1", "main*1 r1=default")],
        want_pending: vec![("sales/wl2", WaitingForQuota, "")],
        ..Default::default()
    });
    let gamma = dep(
        ClusterQueueModel::build("eng-gamma")
            .cohort("eng")
            .preemption(preempt_any())
            .flavor_limits("on-demand", &[("cpu", c(50), Some(c(10)), None)])
            .flavor_limits("spot", &[("cpu", 0, Some(c(100)), None)]),
        "eng",
    );
    run(Case {
        name: "no overadmission while borrowing",
        cqs: vec![gamma],
        admitted: vec![admitted(
            wl("eng-gamma/existing", "eng-gamma")
                .podset(PodSetModel::build("borrow-on-demand", 51, &[("cpu", c(1))]))
                .podset(PodSetModel::build("use-all-spot", 100, &[("cpu", c(1))])),
            &["on-demand", "spot"],
        )],
        pending: vec![
            one("eng-beta/new", "eng-beta", "one", 50, &[("cpu", c(1))]).at(-2),
            one("eng-alpha/new-alpha", "eng-alpha", "one", 1, &[("cpu", c(1))]).at(-1),
            one("eng-gamma/new-gamma", "eng-gamma", "one", 50, &[("cpu", c(1))]).at(0),
        ],
        want_admitted: vec![
            ("eng-beta/new", "one*50 cpu=on-demand"),
            ("eng-alpha/new-alpha", "one*1 cpu=on-demand"),
        ],
        want_pending: vec![(
            "eng-gamma/new-gamma",
            WaitingForQuota,
            "couldn't assign flavors to pod set one: insufficient unused quota for cpu in flavor on-demand, 41 more needed, insufficient unused quota for cpu in flavor spot, 50 more needed",
        )],
        ..Default::default()
    });
    // ClusterQueueA (2 gpu) lends to ClusterQueueB (0); A's head (2) does not fit beside its
    // admitted 1. With reclaimWithinCohort Any, A can take its quota back later, so B borrows now;
    // otherwise A's nominal quota is held for A.
    for (name, reclaim, b_admitted) in [
        (
            "capacity not blocked when lending clusterqueue can reclaim (ReclaimWithinCohort=Any)",
            ReclaimWithinCohort::Any,
            true,
        ),
        (
            "capacity blocked when lending clusterqueue not guaranteed to reclaim (ReclaimWithinCohort=LowerPriority)",
            ReclaimWithinCohort::LowerPriority,
            false,
        ),
        (
            "capacity blocked when lending clusterqueue not guaranteed to reclaim (ReclaimWithinCohort=Never)",
            ReclaimWithinCohort::Never,
            false,
        ),
    ] {
        run(Case {
            name,
            cqs: vec![
                cq_in("ClusterQueueA", "root", &[("on-demand", "gpu", 2, None)]).reclaim(reclaim),
                cq_in("ClusterQueueB", "root", &[("on-demand", "gpu", 0, None)]),
            ],
            admitted: vec![admitted(
                main("eng-alpha/a1-admitted", "ClusterQueueA", &[("gpu", 1)]),
                &["on-demand"],
            )],
            pending: vec![
                main("eng-alpha/a2-pending", "ClusterQueueA", &[("gpu", 2)]),
                main("eng-beta/b1-pending", "ClusterQueueB", &[("gpu", 1)]),
            ],
            want_admitted: if b_admitted {
                vec![("eng-beta/b1-pending", "main*1 gpu=on-demand")]
            } else {
                vec![]
            },
            want_pending: {
                let mut v = vec![(
                    "eng-alpha/a2-pending",
                    WaitingForQuota,
                    "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 1 more needed",
                )];
                if !b_admitted {
                    v.push(("eng-beta/b1-pending", WaitingForQuota, ""));
                }
                v
            },
            ..Default::default()
        });
    }
    run(Case {
        name: "in a hierarchical cohort, workload borrowing less is scheduled first",
        cohorts: vec![
            CohortModel::build("root"),
            CohortModel::build("guaranteed")
                .parent("root")
                .flavor_limits("default", &[("cpu", c(4), None, None)]),
        ],
        cqs: vec![
            cq_in("guaranteed", "guaranteed", &[("default", "cpu", 0, None)]),
            cq_in("best-effort", "root", &[("default", "cpu", 0, None)]),
        ],
        pending: vec![
            one("eng-alpha/guaranteed", "guaranteed", "one", 1, &[("cpu", c(4))]).priority(0),
            one("eng-alpha/best-effort", "best-effort", "one", 1, &[("cpu", c(4))]).priority(3),
        ],
        want_admitted: vec![("eng-alpha/guaranteed", "one*1 cpu=default")],
        want_pending: vec![("eng-alpha/best-effort", WaitingForQuota, "")],
        ..Default::default()
    });
    run(Case {
        name: "don't assign flavor if there are no candidates for preemption",
        cqs: vec![
            cq_in(
                "cq1",
                "cohort",
                &[
                    ("on-demand", "cpu", 0, Some(c(1))),
                    ("spot", "cpu", 0, Some(c(1))),
                ],
            )
            .preemption(policy(
                WithinClusterQueue::LowerPriority,
                ReclaimWithinCohort::Any,
                BorrowWithinCohortPolicy::LowerPriority,
            ))
            .fungibility(fungibility(
                MayStopSearch,
                MayStopSearch,
                FungibilityPreference::default(),
            )),
            cq_in(
                "cq2",
                "cohort",
                &[("on-demand", "cpu", c(1), None), ("spot", "cpu", c(1), None)],
            ),
        ],
        admitted: vec![admitted(
            main("eng-alpha/admitted", "cq2", &[("cpu", c(1))]).priority(0),
            &["on-demand"],
        )],
        pending: vec![main("eng-alpha/new", "cq1", &[("cpu", c(1))]).priority(100)],
        want_admitted: vec![("eng-alpha/new", "main*1 cpu=spot")],
        ..Default::default()
    });
    run(Case {
        name: "admit to second flavor when first needs preemption; WhenCanPreempt: TryNextFlavor",
        cqs: vec![
            ClusterQueueModel::build("preempt-attempts-cq")
                .within(WithinClusterQueue::LowerPriority)
                .fungibility(fungibility(
                    MayStopSearch,
                    TryNextFlavor,
                    FungibilityPreference::default(),
                ))
                .flavor("on-demand", &[("cpu", c(1))])
                .flavor("spot", &[("cpu", c(1))]),
        ],
        admitted: vec![admitted(
            main("eng-alpha/blocker", "preempt-attempts-cq", &[("cpu", c(1))]).priority(50),
            &["on-demand"],
        )],
        pending: vec![main("eng-alpha/test-wl", "preempt-attempts-cq", &[("cpu", c(1))]).priority(100)],
        want_admitted: vec![("eng-alpha/test-wl", "main*1 cpu=spot")],
        ..Default::default()
    });
    all_passed();
}

#[test]
fn schedule_slice_and_overflow_cases() {
    // Kueue: "workload-slice fits in single clusterQueue". Only the growth (5) must fit; the old
    // slice is finished as replaced when its successor is admitted.
    let old = one("sales/foo-1", "sales", "one", 10, &[("cpu", c(1))]);
    let mut core = setup(&Case {
        name: "workload-slice fits in single clusterQueue",
        admitted: vec![admitted(old.clone(), &["default"])],
        pending: vec![one("sales/foo-2", "sales", "one", 15, &[("cpu", c(1))]).replaces(&old.key)],
        ..Default::default()
    });
    let res = core.schedule_cycle(1);
    let got: Vec<(String, String)> = res
        .admissions
        .iter()
        .map(|a| (a.key.to_string(), render(&a.admission)))
        .collect();
    assert_eq!(
        got,
        [("sales/foo-2".to_string(), "one*15 cpu=default".to_string())]
    );
    assert_eq!(res.finished_slices.len(), 1);
    assert_eq!(res.finished_slices[0].key, old.key);
    assert!(!core.is_admitted(&old.key));

    run(Case {
        name: "prevent integer overflow when sum of requests over podsets exceeds MaxInt64",
        cqs: vec![ClusterQueueModel::build("overflow-cq").flavor("default", &[("cpu", c(10_000))])],
        pending: vec![
            wl("default/vuln-wl", "overflow-cq")
                .podset(PodSetModel::build("ps1", 1, &[("cpu", 1_000_000)]))
                .podset(PodSetModel::build(
                    "ps2",
                    1,
                    &[("cpu", 9_223_372_036_854_775_000)],
                )),
        ],
        want_pending: vec![(
            "default/vuln-wl",
            ExceedsMaxQuota,
            "couldn't assign flavors to pod set ps2: insufficient quota for cpu in flavor default, previously considered podsets requests (1k) + current podset request (9223372036854775) > maximum capacity (10k)",
        )],
        ..Default::default()
    });
    all_passed();
}
