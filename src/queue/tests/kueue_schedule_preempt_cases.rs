//! Kueue's `pkg/scheduler/scheduler_test.go` `TestSchedule`: the cases where the scheduling cycle
//! preempts (or must not), each `name` being Kueue's case name; victims, their Preempted reason
//! and message, and the preemptor's pending reason and message, as Kueue checks them.

use super::PendingReason::{WaitingForPreemptedWorkloads, WaitingForQuota};
use super::PreemptedReason::{InClusterQueue, InCohortReclamation};
use super::kueue_schedule_fixture::*;
use super::*;

use BorrowWithinCohortPolicy as Borrow;
use ReclaimWithinCohort as Reclaim;
use WithinClusterQueue as Within;

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
        pending: vec![preemptor("eng-beta/preemptor", "eng-beta", &[("cpu", c(20))])],
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
            msg(RECLAIM, "wl-preemptor", "/other/other-beta", "/other/other-alpha"),
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
                    msg(PRIO, "wl-incoming", "/other/other-alpha", "/other/other-alpha"),
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
            msg(PRIO, "wl-preemptor", "/other/other-beta", "/other/other-beta"),
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
            admitted(main("eng-beta/b1", "other-beta", &[("cpu", c(2))]), &["default"]),
        ],
        pending: vec![
            preemptor("eng-alpha/preemptor", "other-alpha", &[("cpu", c(3))]).priority(100),
            main("eng-beta/pretending-preemptor", "other-beta", &[("cpu", c(3))]).priority(99),
        ],
        want_evicted: vec![(
            "eng-alpha/a1",
            InClusterQueue,
            msg(PRIO, "wl-preemptor", "/other/other-alpha", "/other/other-alpha"),
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
            main("sales/low-priority", "preempt-zero-gpu-cq", &[("cpu", c(4))]).priority(-1),
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
