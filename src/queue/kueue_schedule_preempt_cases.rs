//! Kueue's `pkg/scheduler/scheduler_test.go` `TestSchedule`: the cases where the scheduling cycle
//! preempts (or must not), each `name` being Kueue's case name; victims, their Preempted reason
//! and message, and the preemptor's pending reason and message, as Kueue checks them.

use super::PendingReason::{WaitingForPreemptedWorkloads, WaitingForQuota};
use super::PreemptedReason::{InClusterQueue, InCohortReclamation};
use super::kueue_schedule_fixture::*;
use super::*;

use BorrowWithinCohortPolicy as Borrow;
use FungibilityPolicy::TryNextFlavor;
use ReclaimWithinCohort as Reclaim;
use WithinClusterQueue as Within;

fn main(key: &str, cq: &str, req: &[(&str, i64)]) -> WorkloadModel {
    wl(key, cq).request(req)
}

fn preemptor(key: &str, cq: &str, req: &[(&str, i64)]) -> WorkloadModel {
    uids(main(key, cq, req), "wl-preemptor", "job-preemptor")
}

/// Kueue's message for a victim of `uid`/`job` preempted from `victim_path` for `preemptor_path`.
fn msg(why: &str, uid: &str, preemptor_path: &str, victim_path: &str) -> String {
    format!(
        "Preempted to accommodate a workload (UID: {uid}, JobUID: job-{}) due to {why}; preemptor path: {preemptor_path}; preemptee path: {victim_path}",
        uid.trim_start_matches("wl-")
    )
}

const PRIO: &str = "prioritization in the ClusterQueue";
const RECLAIM: &str = "reclamation within the cohort";

/// A ClusterQueue in cohort `other` with one flavor group over `res`: (flavor, nominal).
fn other(name: &str, res: &str, fl: &[(&str, i64)], p: PreemptionPolicy) -> ClusterQueueModel {
    fl.iter().fold(
        ClusterQueueModel::build(name).cohort("other").preemption(p),
        |cq, (f, n)| cq.flavor(f, &[(res, *n)]),
    )
}

fn within_only() -> PreemptionPolicy {
    policy(Within::LowerPriority, Reclaim::Never, Borrow::Never)
}

#[test]
fn schedule_preemption_cases() {
    run(Case {
        name: "preempt workloads in ClusterQueue and cohort",
        admitted: vec![
            admitted(
                main("eng-alpha/use-all-spot", "eng-alpha", &[("cpu", c(100))]),
                &["spot"],
            ),
            admitted(
                main("eng-beta/low-1", "eng-beta", &[("cpu", c(30))]).priority(-1),
                &["on-demand"],
            ),
            admitted(
                main("eng-beta/low-2", "eng-beta", &[("cpu", c(10))]).priority(-2),
                &["on-demand"],
            ),
            admitted(
                main("eng-alpha/borrower", "eng-alpha", &[("cpu", c(60))]),
                &["on-demand"],
            ),
        ],
        pending: vec![preemptor(
            "eng-beta/preemptor",
            "eng-beta",
            &[("cpu", c(20))],
        )],
        want_evicted: vec![
            (
                "eng-alpha/borrower",
                InCohortReclamation,
                msg(RECLAIM, "wl-preemptor", "/eng/eng-beta", "/eng/eng-alpha"),
            ),
            (
                "eng-beta/low-2",
                InClusterQueue,
                msg(PRIO, "wl-preemptor", "/eng/eng-beta", "/eng/eng-beta"),
            ),
        ],
        want_pending: vec![(
            "eng-beta/preemptor",
            WaitingForPreemptedWorkloads,
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 20 more needed, insufficient unused quota for cpu in flavor spot, 20 more needed. Pending the preemption of 2 workload(s)",
        )],
        ..Default::default()
    });
    run(Case {
        name: "multiple CQs need preemption",
        cqs: vec![
            ClusterQueueModel::build("other-alpha")
                .cohort("other")
                .flavor_limits("on-demand", &[("cpu", c(50), Some(c(50)), None)]),
            ClusterQueueModel::build("other-beta")
                .cohort("other")
                .preemption(policy(Within::LowerPriority, Reclaim::Any, Borrow::Never))
                .flavor_limits("on-demand", &[("cpu", c(50), Some(c(10)), None)]),
        ],
        admitted: vec![admitted(
            main("eng-alpha/use-all", "other-alpha", &[("cpu", c(100))]),
            &["on-demand"],
        )],
        pending: vec![
            preemptor("eng-beta/preemptor", "other-beta", &[("cpu", c(1))]).priority(-1),
            main("eng-alpha/pending", "other-alpha", &[("cpu", c(1))]).priority(1),
        ],
        want_evicted: vec![(
            "eng-alpha/use-all",
            InCohortReclamation,
            msg(
                RECLAIM,
                "wl-preemptor",
                "/other/other-beta",
                "/other/other-alpha",
            ),
        )],
        want_pending: vec![
            (
                "eng-beta/preemptor",
                WaitingForPreemptedWorkloads,
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 1 more needed. Pending the preemption of 1 workload(s)",
            ),
            (
                "eng-alpha/pending",
                WaitingForQuota,
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 1 more needed",
            ),
        ],
        ..Default::default()
    });
    let lower_borrow = policy(Within::Never, Reclaim::LowerPriority, Borrow::LowerPriority);
    run(Case {
        name: "preemption while borrowing, workload waiting for preemption should not block a borrowing workload in another CQ",
        cqs: vec![
            ClusterQueueModel::build("cq_shared")
                .cohort("preemption-while-borrowing")
                .flavor_limits("default", &[("cpu", c(4), Some(0), None)]),
            ClusterQueueModel::build("cq_a")
                .cohort("preemption-while-borrowing")
                .preemption(lower_borrow)
                .flavor_limits("default", &[("cpu", 0, Some(c(3)), None)]),
            ClusterQueueModel::build("cq_b")
                .cohort("preemption-while-borrowing")
                .preemption(lower_borrow)
                .flavor("default", &[("cpu", 0)]),
        ],
        admitted: vec![admitted(
            main("eng-alpha/admitted_a", "cq_a", &[("cpu", c(2))]),
            &["default"],
        )],
        pending: vec![
            main("eng-alpha/a", "cq_a", &[("cpu", c(3))]).at(1),
            main("eng-beta/b", "cq_b", &[("cpu", c(1))]).at(2),
        ],
        want_admitted: vec![("eng-beta/b", "main*1 cpu=default")],
        want_pending: vec![(
            "eng-alpha/a",
            WaitingForQuota,
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 2 more needed",
        )],
        ..Default::default()
    });
    let any = policy(Within::LowerPriority, Reclaim::Any, Borrow::Never);
    run(Case {
        name: "minimal preemptions when target queue is exhausted",
        cqs: vec![
            other("other-alpha", "cpu", &[("on-demand", c(2))], any),
            other(
                "other-beta",
                "cpu",
                &[("on-demand", c(2))],
                PreemptionPolicy::default(),
            ),
            other(
                "other-gamma",
                "cpu",
                &[("on-demand", c(2))],
                PreemptionPolicy::default(),
            ),
        ],
        admitted: ["a1", "a2", "a3", "b1", "b2", "b3"]
            .into_iter()
            .map(|n| {
                let (cq, prio) = match n {
                    "a1" | "a2" => ("other-alpha", -2),
                    "a3" => ("other-alpha", -1),
                    _ => ("other-beta", 0),
                };
                let ns = if cq == "other-alpha" {
                    "eng-alpha"
                } else {
                    "eng-beta"
                };
                admitted(
                    main(&format!("{ns}/{n}"), cq, &[("cpu", c(1))]).priority(prio),
                    &["on-demand"],
                )
            })
            .collect(),
        pending: vec![uids(
            main("eng-alpha/incoming", "other-alpha", &[("cpu", c(2))]),
            "wl-incoming",
            "job-incoming",
        )],
        want_evicted: ["eng-alpha/a1", "eng-alpha/a2"]
            .into_iter()
            .map(|k| {
                (
                    k,
                    InClusterQueue,
                    msg(
                        PRIO,
                        "wl-incoming",
                        "/other/other-alpha",
                        "/other/other-alpha",
                    ),
                )
            })
            .collect(),
        want_pending: vec![(
            "eng-alpha/incoming",
            WaitingForPreemptedWorkloads,
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 2 more needed. Pending the preemption of 2 workload(s)",
        )],
        ..Default::default()
    });
    run(Case {
        name: "A workload is only eligible to do preemptions if it fits fully within nominal quota",
        cqs: vec![
            other("other-alpha", "cpu", &[("on-demand", c(2))], any),
            other(
                "other-beta",
                "cpu",
                &[("on-demand", c(2))],
                PreemptionPolicy::default(),
            ),
        ],
        admitted: vec![
            admitted(
                main("eng-alpha/a1", "other-alpha", &[("cpu", c(1))]).priority(-1),
                &["on-demand"],
            ),
            admitted(
                main("eng-beta/b1", "other-beta", &[("cpu", c(1))]).priority(-1),
                &["on-demand"],
            ),
        ],
        pending: vec![main("eng-alpha/incoming", "other-alpha", &[("cpu", c(3))]).priority(1)],
        want_pending: vec![(
            "eng-alpha/incoming",
            WaitingForQuota,
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 1 more needed",
        )],
        ..Default::default()
    });
    run(Case {
        name: "multiple preemptions without borrowing",
        cqs: vec![
            other("other-alpha", "cpu", &[("default", c(2))], within_only()),
            other("other-beta", "cpu", &[("default", c(2))], within_only()),
        ],
        admitted: vec![
            admitted(main("eng-alpha/a1", "other-alpha", &[("cpu", c(2))]), &["default"]),
            admitted(main("eng-beta/b1", "other-beta", &[("cpu", c(2))]), &["default"]),
        ],
        pending: vec![
            preemptor("eng-alpha/preemptor", "other-alpha", &[("cpu", c(2))]).priority(100),
            preemptor("eng-beta/preemptor", "other-beta", &[("cpu", c(2))]).priority(100),
        ],
        want_evicted: vec![
            ("eng-alpha/a1", InClusterQueue, msg(PRIO, "wl-preemptor", "/other/other-alpha", "/other/other-alpha")),
            ("eng-beta/b1", InClusterQueue, msg(PRIO, "wl-preemptor", "/other/other-beta", "/other/other-beta")),
        ],
        want_pending: ["eng-alpha/preemptor", "eng-beta/preemptor"]
            .into_iter()
            .map(|k| (k, WaitingForPreemptedWorkloads, "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 2 more needed. Pending the preemption of 1 workload(s)"))
            .collect(),
        ..Default::default()
    });
    run(Case {
        name: "multiple preemptions preemption possible after earlier workload fits",
        cqs: vec![
            other("other-alpha", "cpu", &[("default", c(1))], within_only()),
            other("other-beta", "cpu", &[("default", c(2))], within_only()),
        ],
        admitted: vec![admitted(
            main("eng-beta/b1", "other-beta", &[("cpu", c(2))]),
            &["default"],
        )],
        pending: vec![
            main("eng-alpha/fit", "other-alpha", &[("cpu", c(1))]).priority(100),
            preemptor("eng-beta/preemptor", "other-beta", &[("cpu", c(2))]).priority(99),
        ],
        want_admitted: vec![("eng-alpha/fit", "main*1 cpu=default")],
        want_evicted: vec![(
            "eng-beta/b1",
            InClusterQueue,
            msg(
                PRIO,
                "wl-preemptor",
                "/other/other-beta",
                "/other/other-beta",
            ),
        )],
        want_pending: vec![(
            "eng-beta/preemptor",
            WaitingForPreemptedWorkloads,
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more needed. Pending the preemption of 1 workload(s)",
        )],
        ..Default::default()
    });
    let borrow_lower = policy(Within::LowerPriority, Reclaim::Never, Borrow::LowerPriority);
    run(Case {
        name: "multiple preemptions skip preemption when shared limited resource",
        cqs: vec![
            other("other-alpha", "cpu", &[("default", c(2))], borrow_lower),
            other("other-beta", "cpu", &[("default", c(2))], borrow_lower),
            other(
                "resource-bank",
                "cpu",
                &[("default", c(1))],
                PreemptionPolicy::default(),
            ),
        ],
        admitted: vec![
            admitted(
                main("eng-alpha/a1", "other-alpha", &[("cpu", c(2))]),
                &["default"],
            ),
            admitted(
                main("eng-beta/b1", "other-beta", &[("cpu", c(2))]),
                &["default"],
            ),
        ],
        pending: vec![
            preemptor("eng-alpha/preemptor", "other-alpha", &[("cpu", c(3))]).priority(100),
            main(
                "eng-beta/pretending-preemptor",
                "other-beta",
                &[("cpu", c(3))],
            )
            .priority(99),
        ],
        want_evicted: vec![(
            "eng-alpha/a1",
            InClusterQueue,
            msg(
                PRIO,
                "wl-preemptor",
                "/other/other-alpha",
                "/other/other-alpha",
            ),
        )],
        want_pending: vec![
            (
                "eng-alpha/preemptor",
                WaitingForPreemptedWorkloads,
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 2 more needed. Pending the preemption of 1 workload(s)",
            ),
            // Kueue: "Workload no longer fits after processing another workload".
            ("eng-beta/pretending-preemptor", WaitingForQuota, ""),
        ],
        ..Default::default()
    });
    run(Case {
        name: "preempt when workload requests zero of a resource not defined in ClusterQueue",
        cqs: vec![
            ClusterQueueModel::build("preempt-zero-gpu-cq")
                .within(Within::LowerPriority)
                .flavor("default", &[("cpu", c(4))]),
        ],
        admitted: vec![admitted(
            main(
                "sales/low-priority",
                "preempt-zero-gpu-cq",
                &[("cpu", c(4))],
            )
            .priority(-1),
            &["default"],
        )],
        pending: vec![preemptor(
            "sales/preemptor",
            "preempt-zero-gpu-cq",
            &[("cpu", c(2)), (GPU, 0)],
        )],
        want_evicted: vec![(
            "sales/low-priority",
            InClusterQueue,
            msg(
                PRIO,
                "wl-preemptor",
                "/preempt-zero-gpu-cq",
                "/preempt-zero-gpu-cq",
            ),
        )],
        want_pending: vec![(
            "sales/preemptor",
            WaitingForPreemptedWorkloads,
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 2 more needed. Pending the preemption of 1 workload(s)",
        )],
        ..Default::default()
    });
    all_passed();
}

#[test]
fn schedule_preemption_flavor_choice_cases() {
    let both_lower = policy(Within::LowerPriority, Reclaim::LowerPriority, Borrow::Never);
    let gpu_cqs = |beta: PreemptionPolicy| {
        vec![
            other(
                "other-alpha",
                "gpu",
                &[("on-demand", 10), ("spot", 10)],
                both_lower,
            ),
            other("other-beta", "gpu", &[("on-demand", 0), ("spot", 0)], beta),
        ]
    };
    let gpu = |key: &str, cq: &str, n: i64, prio: i32| main(key, cq, &[("gpu", n)]).priority(prio);
    run(Case {
        name: "prefer reclamation over cq priority based preemption",
        cqs: gpu_cqs(both_lower),
        admitted: vec![
            admitted(gpu("eng-alpha/a1", "other-alpha", 5, 50), &["on-demand"]),
            admitted(gpu("eng-beta/b1", "other-beta", 5, 50), &["spot"]),
        ],
        pending: vec![uids(
            gpu("eng-alpha/preemptor", "other-alpha", 6, 100),
            "wl-preemptor",
            "job-preemptor",
        )],
        want_evicted: vec![(
            "eng-beta/b1",
            InCohortReclamation,
            msg(
                RECLAIM,
                "wl-preemptor",
                "/other/other-alpha",
                "/other/other-beta",
            ),
        )],
        want_pending: vec![(
            "eng-alpha/preemptor",
            WaitingForPreemptedWorkloads,
            "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 1 more needed, insufficient unused quota for gpu in flavor spot, 1 more needed. Pending the preemption of 1 workload(s)",
        )],
        ..Default::default()
    });
    for (name, a1, b1_prio, preemptor_req, message) in [
        (
            "prefer first preemption flavor when second flavor requires both reclaim and cq priority preemption",
            5,
            50,
            6,
            "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 1 more needed, insufficient unused quota for gpu in flavor spot, 6 more needed. Pending the preemption of 1 workload(s)",
        ),
        (
            "prefer first preemption flavor when second flavor also requires cq preemption",
            6,
            9001,
            5,
            "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 1 more needed, insufficient unused quota for gpu in flavor spot, 5 more needed. Pending the preemption of 1 workload(s)",
        ),
    ] {
        run(Case {
            name,
            cqs: gpu_cqs(PreemptionPolicy::default()),
            admitted: vec![
                admitted(gpu("eng-alpha/a1", "other-alpha", a1, 50), &["on-demand"]),
                admitted(gpu("eng-alpha/a2", "other-alpha", 5, 50), &["spot"]),
                admitted(gpu("eng-beta/b1", "other-beta", 5, b1_prio), &["spot"]),
            ],
            pending: vec![uids(
                gpu("eng-alpha/preemptor", "other-alpha", preemptor_req, 100),
                "wl-preemptor",
                "job-preemptor",
            )],
            want_evicted: vec![(
                "eng-alpha/a1",
                InClusterQueue,
                msg(
                    PRIO,
                    "wl-preemptor",
                    "/other/other-alpha",
                    "/other/other-alpha",
                ),
            )],
            want_pending: vec![("eng-alpha/preemptor", WaitingForPreemptedWorkloads, message)],
            ..Default::default()
        });
    }
    run(Case {
        name: "workload requiring reclaimation prioritized over wl in another full cq",
        cqs: vec![
            other(
                "CQ1",
                "gpu",
                &[("on-demand", 10)],
                PreemptionPolicy::default(),
            ),
            other(
                "CQ2",
                "gpu",
                &[("on-demand", 10)],
                policy(Within::Never, Reclaim::Any, Borrow::Never),
            ),
            other(
                "CQ3",
                "gpu",
                &[("on-demand", 0)],
                PreemptionPolicy::default(),
            ),
        ],
        admitted: vec![
            admitted(
                gpu("eng-alpha/Admitted-Workload-1", "CQ1", 5, 0),
                &["on-demand"],
            ),
            admitted(
                gpu("eng-gamma/Admitted-Workload-2", "CQ3", 5, 0),
                &["on-demand"],
            ),
            admitted(
                gpu("eng-gamma/Admitted-Workload-3", "CQ3", 5, 1),
                &["on-demand"],
            ),
        ],
        pending: vec![
            gpu("eng-alpha/WL1", "CQ1", 10, 0).at(0),
            uids(gpu("eng-beta/WL2", "CQ2", 10, 0).at(1), "wl-WL2", "job-WL2"),
        ],
        want_evicted: vec![(
            "eng-gamma/Admitted-Workload-2",
            InCohortReclamation,
            msg(RECLAIM, "wl-WL2", "/other/CQ2", "/other/CQ3"),
        )],
        want_pending: vec![
            (
                "eng-alpha/WL1",
                WaitingForQuota,
                "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 5 more needed",
            ),
            (
                "eng-beta/WL2",
                WaitingForPreemptedWorkloads,
                "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 5 more needed. Pending the preemption of 1 workload(s)",
            ),
        ],
        ..Default::default()
    });
    all_passed();
}

#[test]
fn schedule_fungibility_preference_cases() {
    use FungibilityPreference::{BorrowingOverPreemption, PreemptionOverBorrowing};
    let cq = |name: &str, cohort: &str, pref| {
        ClusterQueueModel::build(name)
            .cohort(cohort)
            .within(Within::LowerPriority)
            .fungibility(fungibility(TryNextFlavor, TryNextFlavor, pref))
            .flavor_limits("on-demand", &[("cpu", c(5), Some(0), None)])
            .flavor_limits("spot", &[("cpu", 0, Some(c(5)), None)])
    };
    let lender = |name: &str, cohort: &str| {
        ClusterQueueModel::build(name)
            .cohort(cohort)
            .flavor("on-demand", &[("cpu", 0)])
            .flavor("spot", &[("cpu", c(5))])
    };
    run(Case {
        name: "PreemptionOverBorrowing preference: preempt in first flavor instead of borrowing in second",
        cqs: vec![
            cq("pob-cq", "pob-cohort", PreemptionOverBorrowing),
            lender("pob-lender", "pob-cohort"),
        ],
        admitted: vec![admitted(
            main("default/low-pob", "pob-cq", &[("cpu", c(5))]).priority(-1),
            &["on-demand"],
        )],
        pending: vec![uids(
            main("default/high-pob", "pob-cq", &[("cpu", c(5))]),
            "wl-high-pob",
            "job-high-pob",
        )],
        want_evicted: vec![(
            "default/low-pob",
            InClusterQueue,
            msg(
                PRIO,
                "wl-high-pob",
                "/pob-cohort/pob-cq",
                "/pob-cohort/pob-cq",
            ),
        )],
        want_pending: vec![(
            "default/high-pob",
            WaitingForPreemptedWorkloads,
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 5 more needed. Pending the preemption of 1 workload(s)",
        )],
        ..Default::default()
    });
    run(Case {
        name: "BorrowingOverPreemption preference: borrow in second flavor instead of preempting in first",
        cqs: vec![
            cq("bop-cq", "bop-cohort", BorrowingOverPreemption),
            lender("bop-lender", "bop-cohort"),
        ],
        admitted: vec![admitted(
            main("default/low-bop", "bop-cq", &[("cpu", c(5))]).priority(-1),
            &["on-demand"],
        )],
        pending: vec![main("default/high-bop", "bop-cq", &[("cpu", c(5))])],
        want_admitted: vec![("default/high-bop", "main*1 cpu=spot")],
        ..Default::default()
    });
    run(Case {
        name: "PreemptionOverBorrowing preference: select fitting second flavor over first flavor with no preemption candidates",
        cohorts: vec![
            CohortModel::build("nopc-root")
                .flavor_limits("on-demand", &[("cpu", 0, None, None)])
                .flavor_limits("spot", &[("cpu", c(5), None, None)]),
            CohortModel::build("nopc-mid").parent("nopc-root"),
        ],
        cqs: vec![
            ClusterQueueModel::build("nopc-cq")
                .cohort("nopc-mid")
                .within(Within::LowerPriority)
                .fungibility(fungibility(
                    TryNextFlavor,
                    TryNextFlavor,
                    PreemptionOverBorrowing,
                ))
                .flavor_limits("on-demand", &[("cpu", c(5), Some(0), None)])
                .flavor("spot", &[("cpu", 0)]),
            ClusterQueueModel::build("nopc-sibling")
                .cohort("nopc-mid")
                .flavor("on-demand", &[("cpu", c(5))])
                .flavor("spot", &[("cpu", 0)]),
        ],
        admitted: vec![admitted(
            main("default/admitted-nopc", "nopc-cq", &[("cpu", c(5))]),
            &["on-demand"],
        )],
        pending: vec![main("default/pending-nopc", "nopc-cq", &[("cpu", c(5))])],
        want_admitted: vec![("default/pending-nopc", "main*1 cpu=spot")],
        ..Default::default()
    });
    all_passed();
}
