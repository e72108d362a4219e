//! Admission checks through the admission loop's step over snapshots: what it decides to write,
//! before any I/O.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::checks;
use super::checks_tests::*;
use super::conditions;
use super::sync::{Action, AdmissionState, Snapshot};
use crate::api::kueue::admission_check::{AUTO_READY_CONTROLLER, READY_AFTER_SECONDS_ANNOTATION};
use crate::api::kueue::constants::{condition, reason};
use crate::api::kueue::*;

pub(super) fn admission_check(name: &str, controller: &str, active: bool) -> Arc<AdmissionCheck> {
    let mut ac = AdmissionCheck::new(
        name,
        AdmissionCheckSpec {
            controller_name: controller.into(),
            parameters: None,
        },
    );
    if active {
        ac.status = Some(AdmissionCheckStatus {
            conditions: vec![c(condition::ACTIVE, true, 0)],
        });
    }
    Arc::new(ac)
}

pub(super) fn snapshot(checks: Vec<Arc<AdmissionCheck>>, wls: Vec<Workload>) -> Snapshot {
    let mut cq = ClusterQueue::build("cq")
        .flavor("default", [("cpu", "4")])
        .admission_check("check1", &[])
        .build();
    cq.metadata.resource_version = Some("1".into());
    Snapshot {
        cluster_queues: vec![Arc::new(cq)],
        flavors: vec![Arc::new(ResourceFlavor::build("default").build())],
        local_queues: vec![Arc::new(
            LocalQueue::build("lq", "default").cluster_queue("cq").build(),
        )],
        workloads: wls.into_iter().map(Arc::new).collect(),
        admission_checks: checks,
        ..Default::default()
    }
}

pub(super) fn pending_wl() -> Workload {
    let mut w = Workload::build("w", "default")
        .queue("lq")
        .podset("main", 1, [("cpu", "1")])
        .build();
    w.metadata.resource_version = Some("1".into());
    w
}

pub(super) fn checks_written(actions: &[Action]) -> Option<&WorkloadStatus> {
    actions.iter().find_map(|a| match a {
        Action::Checks { status, .. } => Some(status.as_ref()),
        _ => None,
    })
}

/// Kueue `workload_controller_test.go` "the workload should have checks updated when changed on the
/// cluster queue" (first step) and the scheduler's admission with checks: a pending workload first
/// gets its checks as Pending; admitted into quota it is reserved, not admitted, until they pass.
#[test]
fn a_workload_is_reserved_with_its_checks_pending_then_admitted_when_they_are_ready() {
    let mut st = AdmissionState::new();
    let check = admission_check("check1", "ctrl", true);
    let actions = st.step(
        &snapshot(vec![check.clone()], vec![pending_wl()]),
        t(0).as_millisecond(),
    );
    let s = checks_written(&actions).expect("the check states are written first");
    assert_eq!(
        s.admission_checks
            .iter()
            .map(|c| (c.name.as_str(), c.state))
            .collect::<Vec<_>>(),
        [("check1", CheckState::Pending)]
    );
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Admit { .. })),
        "nothing else is decided before that write shows: {actions:?}"
    );

    let mut w = pending_wl();
    w.status = Some(s.clone());
    w.metadata.resource_version = Some("2".into());
    let actions = st.step(
        &snapshot(vec![check.clone()], vec![w.clone()]),
        t(1).as_millisecond(),
    );
    let Some(Action::Admit {
        checks, admission, ..
    }) = actions.iter().find(|a| matches!(a, Action::Admit { .. }))
    else {
        panic!("admitted into quota: {actions:?}")
    };
    assert_eq!(checks, &set(&["check1"]));
    let reserved =
        conditions::admitted_with_checks(&w, crate::queue::convert::admission_api(admission), checks, t(1));
    assert!(reserved.condition_true(condition::QUOTA_RESERVED));
    let admitted = reserved.condition(condition::ADMITTED).unwrap();
    assert_eq!(
        (
            admitted.status.as_str(),
            admitted.reason.as_str(),
            admitted.message.as_str()
        ),
        (
            "False",
            "UnsatisfiedAdmissionChecks",
            "The workload has not all checks ready"
        )
    );

    // The reservation shows; nothing to write while the check is Pending.
    w.status = Some(reserved);
    w.metadata.resource_version = Some("3".into());
    let actions = st.step(
        &snapshot(vec![check.clone()], vec![w.clone()]),
        t(2).as_millisecond(),
    );
    assert!(
        actions
            .iter()
            .all(|a| !matches!(a, Action::Checks { .. } | Action::Evict { .. })),
        "{actions:?}"
    );

    // The check's controller says Ready: Admitted=True is written.
    w.status.as_mut().unwrap().admission_checks[0].state = CheckState::Ready;
    w.metadata.resource_version = Some("4".into());
    let actions = st.step(&snapshot(vec![check], vec![w]), t(3).as_millisecond());
    let s = checks_written(&actions).expect("Admitted is written");
    let admitted = s.condition(condition::ADMITTED).unwrap();
    assert_eq!(
        (admitted.status.as_str(), admitted.reason.as_str()),
        ("True", "Admitted")
    );
}

pub(super) fn reserved_with(check: CheckState, message: &str) -> Workload {
    let mut w = pending_wl().reserved_for_test();
    let mut s = state("check1", check);
    s.message = message.into();
    w.status.as_mut().unwrap().admission_checks = vec![s];
    w
}

pub(super) trait ReservedForTest {
    fn reserved_for_test(self) -> Self;
}

impl ReservedForTest for Workload {
    fn reserved_for_test(mut self) -> Self {
        let a = Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: vec![PodSetAssignment {
                name: "main".into(),
                flavors: [("cpu".to_string(), "default".to_string())].into(),
                ..Default::default()
            }],
        };
        self.status = Some(conditions::admitted_with_checks(
            &self,
            a,
            &set(&["check1"]),
            t(0),
        ));
        self
    }
}

/// Kueue `workload_controller.go` `reconcileCheckBasedEviction`: Retry evicts with reason
/// `AdmissionCheck`; Rejected deactivates (`workload_controller_test.go`, "should finish an
/// unadmitted workload with failure when a check is rejected").
#[test]
fn a_retry_check_evicts_and_a_rejected_one_deactivates() {
    let check = admission_check("check1", "ctrl", true);
    let mut st = AdmissionState::new();
    let actions = st.step(
        &snapshot(
            vec![check.clone()],
            vec![reserved_with(CheckState::Retry, "no capacity")],
        ),
        t(1).as_millisecond(),
    );
    assert!(
        matches!(&actions[..], [Action::Evict { cause, .. }]
            if cause.by == conditions::EvictedBy::AdmissionCheck && cause.message == r#"Evicted due to AdmissionCheck in Retry state: "check1" (no capacity)"#),
        "{actions:?}"
    );
    let mut st = AdmissionState::new();
    let actions = st.step(
        &snapshot(
            vec![check],
            vec![reserved_with(CheckState::Rejected, "check rejected")],
        ),
        t(1).as_millisecond(),
    );
    assert!(
        matches!(&actions[..], [Action::Deactivate { reason, message, .. }]
            if *reason == "AdmissionCheck" && message == r#"AdmissionCheck in Rejected state: "check1" (check rejected)"#),
        "{actions:?}"
    );
}

/// A pending workload with a failed check is not considered (Kueue's scheduler: "The workload has
/// failed admission checks", PendingEvaluation), and a ClusterQueue whose check is missing or
/// inactive admits nothing ("ClusterQueue cq is inactive").
#[test]
fn failed_checks_and_inactive_queues_admit_nothing() {
    let mut st = AdmissionState::new();
    let mut w = pending_wl();
    w.status = Some(WorkloadStatus {
        admission_checks: vec![state("check1", CheckState::Retry)],
        ..Default::default()
    });
    let actions = st.step(
        &snapshot(vec![admission_check("check1", "ctrl", true)], vec![w]),
        t(0).as_millisecond(),
    );
    assert!(
        matches!(&actions[..], [Action::Pending { reason, message, .. }] if reason == "PendingEvaluation" && message == checks::FAILED_MESSAGE),
        "{actions:?}"
    );
    for checks in [vec![], vec![admission_check("check1", "ctrl", false)]] {
        let mut st = AdmissionState::new();
        let mut w = pending_wl();
        w.status = Some(WorkloadStatus {
            admission_checks: vec![state("check1", CheckState::Pending)],
            ..Default::default()
        });
        let actions = st.step(&snapshot(checks.clone(), vec![w]), t(0).as_millisecond());
        assert!(
            matches!(&actions[..], [Action::Pending { reason, message, .. }] if reason == "Suspended" && message == "ClusterQueue cq is inactive"),
            "{} checks: {actions:?}",
            checks.len()
        );
        // Once the check exists and is Active, the same workload is admitted.
        let mut w = pending_wl();
        w.status = Some(WorkloadStatus {
            admission_checks: vec![state("check1", CheckState::Pending)],
            ..Default::default()
        });
        let actions = st.step(
            &snapshot(vec![admission_check("check1", "ctrl", true)], vec![w]),
            t(1).as_millisecond(),
        );
        assert!(
            actions.iter().any(|a| matches!(a, Action::Admit { .. })),
            "{actions:?}"
        );
    }
}

/// quotagate's built-in check: Ready at once, or once its delay since the reservation has passed
/// (and the loop is told when to look again).
#[test]
fn the_auto_ready_check_passes_after_its_delay() {
    let w = reserved_with(CheckState::Pending, "");
    let mut st = AdmissionState::new();
    let actions = st.step(
        &snapshot(
            vec![admission_check("check1", AUTO_READY_CONTROLLER, true)],
            vec![w.clone()],
        ),
        t(0).as_millisecond(),
    );
    let s = checks_written(&actions).expect("passed at once");
    assert_eq!(s.admission_checks[0].state, CheckState::Ready);
    assert_eq!(s.admission_checks[0].message, checks::AUTO_READY_MESSAGE);
    assert!(s.condition_true(condition::ADMITTED));

    let mut delayed = (*admission_check("check1", AUTO_READY_CONTROLLER, true)).clone();
    delayed.metadata.annotations =
        Some([(READY_AFTER_SECONDS_ANNOTATION.to_string(), "30".to_string())].into());
    let delayed = Arc::new(delayed);
    let mut st = AdmissionState::new();
    let actions = st.step(
        &snapshot(vec![delayed.clone()], vec![w.clone()]),
        t(10).as_millisecond(),
    );
    assert!(checks_written(&actions).is_none(), "not yet: {actions:?}");
    assert_eq!(st.wake_deadline(), Some(t(30).as_millisecond()));
    let actions = st.step(&snapshot(vec![delayed], vec![w]), t(30).as_millisecond());
    assert_eq!(
        checks_written(&actions).expect("due").admission_checks[0].state,
        CheckState::Ready
    );
    // Another controller's check is left alone.
    let mut st = AdmissionState::new();
    let actions = st.step(
        &snapshot(
            vec![admission_check("check1", "ctrl", true)],
            vec![reserved_with(CheckState::Pending, "")],
        ),
        t(0).as_millisecond(),
    );
    assert!(checks_written(&actions).is_none(), "{actions:?}");
}

/// Kueue `pkg/scheduler/scheduler_test.go` `TestSchedule`, "workload fits in single clusterQueue,
/// with check state ready" and "… with check state pending" (the `sales` queue names no check): the
/// reservation keeps the workload's check states and sets Admitted from them. Then, as Kueue's
/// workload controller, the next cycle drops the check the queue does not name and admits it. (In a
/// cluster the workload controller drops such a check before the reservation already.)
#[test]
fn the_reservation_keeps_the_check_states_and_admitted_follows_them() {
    for (check, want) in [
        (
            CheckState::Ready,
            ("True", "Admitted", "The workload is admitted"),
        ),
        (
            CheckState::Pending,
            (
                "False",
                "UnsatisfiedAdmissionChecks",
                "The workload has not all checks ready",
            ),
        ),
    ] {
        let mut cq = ClusterQueue::build("sales")
            .flavor("default", [("cpu", "50")])
            .build();
        cq.metadata.resource_version = Some("1".into());
        let mut w = Workload::build("foo", "default")
            .queue("main")
            .podset("one", 10, [("cpu", "1")])
            .build();
        w.metadata.generation = Some(1);
        w.metadata.resource_version = Some("1".into());
        w.status = Some(WorkloadStatus {
            admission_checks: vec![state("check", check)],
            ..Default::default()
        });
        let snap = |w: &Workload| Snapshot {
            cluster_queues: vec![Arc::new(cq.clone())],
            flavors: vec![Arc::new(ResourceFlavor::build("default").build())],
            local_queues: vec![Arc::new(
                LocalQueue::build("main", "default")
                    .cluster_queue("sales")
                    .build(),
            )],
            workloads: vec![Arc::new(w.clone())],
            ..Default::default()
        };
        // Kueue's scheduler alone (its test runs no workload controller): the assignment it expects.
        let admission = Admission {
            cluster_queue: "sales".into(),
            pod_set_assignments: vec![PodSetAssignment {
                name: "one".into(),
                flavors: [("cpu".to_string(), "default".to_string())].into(),
                count: Some(10),
                ..Default::default()
            }],
        };
        let s = conditions::admitted_with_checks(&w, admission, &BTreeSet::new(), t(0));
        let qr = s.condition(condition::QUOTA_RESERVED).unwrap();
        assert_eq!(
            (qr.status.as_str(), qr.reason.as_str(), qr.message.as_str()),
            ("True", "QuotaReserved", "Quota reserved in ClusterQueue sales")
        );
        let a = s.condition(condition::ADMITTED).unwrap();
        assert_eq!(
            (a.status.as_str(), a.reason.as_str(), a.message.as_str()),
            want,
            "{check:?}"
        );
        assert_eq!(
            s.admission_checks
                .iter()
                .map(|c| (c.name.as_str(), c.state))
                .collect::<Vec<_>>(),
            [("check", check)]
        );
        // The workload controller's sync: the stale check goes, and the workload is admitted.
        w.status = Some(s);
        w.metadata.resource_version = Some("2".into());
        let mut st = AdmissionState::new();
        let actions = st.step(&snap(&w), t(1).as_millisecond());
        let synced = checks_written(&actions);
        match check {
            CheckState::Ready => assert!(
                synced
                    .is_some_and(|s| s.admission_checks.is_empty() && s.condition_true(condition::ADMITTED)),
                "{actions:?}"
            ),
            _ => {
                let s = synced.expect("the stale check is dropped");
                assert!(s.admission_checks.is_empty());
                assert!(s.condition_true(condition::ADMITTED), "{actions:?}");
            }
        }
    }
}

/// `workload_controller_test.go`, the rejected-check specs' `ExpectEvictedWorkloadsTotalMetric(cq,
/// "Deactivated", "AdmissionCheck", …)`: the eviction of a workload deactivated by a check is counted
/// with the underlying cause `AdmissionCheck` (a preemption with its own reason, others with none).
#[test]
fn a_deactivation_by_a_check_is_counted_with_its_cause() {
    let reserved = reserved_with(CheckState::Rejected, "check rejected");
    let marked = super::pods_ready::mark_for_deactivation(
        &reserved,
        reason::ADMISSION_CHECK,
        "AdmissionCheck in Rejected state: \"check1\"",
        t(1),
    )
    .unwrap();
    let mut w = reserved.clone();
    w.status = Some(marked);
    assert_eq!(
        conditions::underlying_cause(&w, conditions::EvictedBy::Deactivated),
        "AdmissionCheck"
    );
    assert_eq!(
        conditions::underlying_cause(&reserved, conditions::EvictedBy::Deactivated),
        "",
        "deactivated by hand"
    );
    assert_eq!(
        conditions::underlying_cause(&w, conditions::EvictedBy::AdmissionCheck),
        ""
    );
    assert_eq!(
        conditions::underlying_cause(
            &w,
            conditions::EvictedBy::Preempted(crate::queue::PreemptedReason::InClusterQueue)
        ),
        "InClusterQueue"
    );
}

/// Kueue `workload_controller_test.go` `TestReconcile`: "assign Admission Checks from
/// ClusterQueue.spec.AdmissionCheckStrategy" (a reservation gets the checks of its flavor and those
/// of every flavor), "admit" (a reserved workload whose checks are Ready, in a ClusterQueue the
/// controller does not know, becomes Admitted and keeps its check) and "already admitted" (nothing
/// to write).
#[test]
fn reconcile_assigns_checks_and_admits() {
    let mut cq = ClusterQueue::build("cq")
        .flavor("flavor1", [("cpu", "1")])
        .flavor("flavor2", [("memory", "1")])
        .admission_check("ac1", &["flavor1"])
        .admission_check("ac2", &[])
        .build();
    cq.metadata.resource_version = Some("1".into());
    let reserved_in = |cq: &str, states: Vec<AdmissionCheckState>| {
        let mut w = Workload::build("wl", "default")
            .queue("queue")
            .podset("main", 1, [("cpu", "1")])
            .build();
        w.metadata.resource_version = Some("1".into());
        w.status = Some(WorkloadStatus {
            admission: Some(Admission {
                cluster_queue: cq.into(),
                pod_set_assignments: vec![PodSetAssignment {
                    name: "main".into(),
                    flavors: [("cpu".to_string(), "flavor1".to_string())].into(),
                    ..Default::default()
                }],
            }),
            conditions: vec![crate::api::conditions::new(
                condition::QUOTA_RESERVED,
                true,
                reason::QUOTA_RESERVED,
                "Quota reserved in ClusterQueue cq",
                None,
                t(0),
            )],
            admission_checks: states,
            ..Default::default()
        });
        w
    };
    let snap = |w: Workload| Snapshot {
        cluster_queues: vec![Arc::new(cq.clone())],
        flavors: vec![
            Arc::new(ResourceFlavor::build("flavor1").build()),
            Arc::new(ResourceFlavor::build("flavor2").build()),
        ],
        local_queues: vec![Arc::new(
            LocalQueue::build("queue", "default").cluster_queue("cq").build(),
        )],
        workloads: vec![Arc::new(w)],
        admission_checks: vec![
            admission_check("ac1", "ctrl", true),
            admission_check("ac2", "ctrl", true),
        ],
        ..Default::default()
    };
    let actions = AdmissionState::new().step(&snap(reserved_in("cq", vec![])), t(1).as_millisecond());
    let s = checks_written(&actions).expect("the checks are assigned");
    assert_eq!(
        s.admission_checks
            .iter()
            .map(|c| (c.name.as_str(), c.state))
            .collect::<Vec<_>>(),
        [("ac1", CheckState::Pending), ("ac2", CheckState::Pending)]
    );

    let actions = AdmissionState::new().step(
        &snap(reserved_in("q1", vec![state("check", CheckState::Ready)])),
        t(1).as_millisecond(),
    );
    let s = checks_written(&actions).expect("admit");
    let a = s.condition(condition::ADMITTED).unwrap();
    assert_eq!(
        (a.status.as_str(), a.reason.as_str(), a.message.as_str()),
        ("True", "Admitted", "The workload is admitted")
    );
    assert_eq!(
        s.admission_checks
            .iter()
            .map(|c| (c.name.as_str(), c.state))
            .collect::<Vec<_>>(),
        [("check", CheckState::Ready)]
    );

    let mut already = reserved_in("q1", vec![state("check", CheckState::Ready)]);
    already.status = Some(s.clone());
    let actions = AdmissionState::new().step(&snap(already), t(2).as_millisecond());
    assert!(
        checks_written(&actions).is_none(),
        "already admitted: {actions:?}"
    );
}
