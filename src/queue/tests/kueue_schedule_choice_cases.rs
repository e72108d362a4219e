//! Kueue's `pkg/scheduler/scheduler_test.go` `TestSchedule`, continued: which flavor a
//! preempting workload picks (reclamation over priority, the first flavor, the fungibility
//! preference), on the fixture of `kueue_schedule_fixture.rs`.

use super::PendingReason::{WaitingForPreemptedWorkloads, WaitingForQuota};
use super::PreemptedReason::{InClusterQueue, InCohortReclamation};
use super::kueue_schedule_fixture::*;
use super::*;

use BorrowWithinCohortPolicy as Borrow;
use FungibilityPolicy::TryNextFlavor;
use ReclaimWithinCohort as Reclaim;
use WithinClusterQueue as Within;

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
            msg(RECLAIM, "wl-preemptor", "/other/other-alpha", "/other/other-beta"),
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
                msg(PRIO, "wl-preemptor", "/other/other-alpha", "/other/other-alpha"),
            )],
            want_pending: vec![("eng-alpha/preemptor", WaitingForPreemptedWorkloads, message)],
            ..Default::default()
        });
    }
    run(Case {
        name: "workload requiring reclaimation prioritized over wl in another full cq",
        cqs: vec![
            other("CQ1", "gpu", &[("on-demand", 10)], PreemptionPolicy::default()),
            other(
                "CQ2",
                "gpu",
                &[("on-demand", 10)],
                policy(Within::Never, Reclaim::Any, Borrow::Never),
            ),
            other("CQ3", "gpu", &[("on-demand", 0)], PreemptionPolicy::default()),
        ],
        admitted: vec![
            admitted(gpu("eng-alpha/Admitted-Workload-1", "CQ1", 5, 0), &["on-demand"]),
            admitted(gpu("eng-gamma/Admitted-Workload-2", "CQ3", 5, 0), &["on-demand"]),
            admitted(gpu("eng-gamma/Admitted-Workload-3", "CQ3", 5, 1), &["on-demand"]),
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
            msg(PRIO, "wl-high-pob", "/pob-cohort/pob-cq", "/pob-cohort/pob-cq"),
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
                .fungibility(fungibility(TryNextFlavor, TryNextFlavor, PreemptionOverBorrowing))
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
