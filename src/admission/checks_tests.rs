//! Admission checks: Kueue's unit tables for the pure parts, and the admission loop's step over
//! snapshots with checks (what it decides to write, before any I/O).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::checks::{self, CheckProblems, Verdict};
use super::conditions;
use super::sync::{Action, AdmissionState, Snapshot};
use crate::api::kueue::admission_check::{AUTO_READY_CONTROLLER, READY_AFTER_SECONDS_ANNOTATION};
use crate::api::kueue::constants::{condition, reason};
use crate::api::kueue::*;

fn t(s: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_800_000_000 + s).unwrap()
}

fn state(name: &str, s: CheckState) -> AdmissionCheckState {
    AdmissionCheckState {
        name: name.into(),
        state: s,
        last_transition_time: Some(Time(t(0))),
        message: String::new(),
        requeue_after_seconds: None,
        retry_count: None,
        pod_set_updates: vec![],
    }
}

fn c(type_: &str, status: bool, since: i64) -> Condition {
    crate::api::conditions::new(type_, status, "", "", None, t(since))
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// Kueue `pkg/workload/admissionchecks_test.go` `TestSyncAdmittedCondition`, the cases with
/// UnadmittedWorkloadsObservability on (Kueue's default, and what quotagate writes): reason and
/// status of Admitted, whether anything changed, and the accumulated admitted time.
#[test]
fn admitted_follows_reservation_and_checks() {
    use CheckState::*;
    struct Case {
        name: &'static str,
        checks: Vec<AdmissionCheckState>,
        conditions: Vec<Condition>,
        want: Option<(bool, &'static str)>,
        change: bool,
        admitted_time: Option<i32>,
    }
    let cases = vec![
        Case {
            name: "empty",
            checks: vec![],
            conditions: vec![],
            want: None,
            change: false,
            admitted_time: None,
        },
        Case {
            name: "reservation no checks",
            checks: vec![],
            conditions: vec![c(condition::QUOTA_RESERVED, true, 0)],
            want: Some((true, reason::ADMITTED)),
            change: true,
            admitted_time: None,
        },
        Case {
            name: "reservation, checks not ready with observability",
            checks: vec![state("check1", Pending), state("check2", Ready)],
            conditions: vec![c(condition::QUOTA_RESERVED, true, 0)],
            want: Some((false, reason::UNSATISFIED_ADMISSION_CHECKS)),
            change: true,
            admitted_time: None,
        },
        Case {
            name: "reservation, checks ready",
            checks: vec![state("check1", Ready), state("check2", Ready)],
            conditions: vec![c(condition::QUOTA_RESERVED, true, 0)],
            want: Some((true, reason::ADMITTED)),
            change: true,
            admitted_time: None,
        },
        Case {
            name: "reservation lost with observability",
            checks: vec![state("check1", Ready), state("check2", Ready)],
            conditions: vec![c(condition::ADMITTED, true, 9)],
            want: Some((false, reason::NO_RESERVATION)),
            change: true,
            admitted_time: Some(1),
        },
        Case {
            name: "check lost with observability",
            checks: vec![state("check1", Ready), state("check2", Pending)],
            conditions: vec![
                c(condition::QUOTA_RESERVED, true, 0),
                c(condition::ADMITTED, true, 9),
            ],
            want: Some((false, reason::UNSATISFIED_ADMISSION_CHECKS)),
            change: true,
            admitted_time: Some(1),
        },
        Case {
            name: "reservation and check lost with observability",
            checks: vec![state("check1", Ready), state("check2", Pending)],
            conditions: vec![c(condition::ADMITTED, true, 9)],
            want: Some((false, reason::NO_RESERVATION)),
            change: true,
            admitted_time: Some(1),
        },
        Case {
            name: "no reservation, no condition initially",
            checks: vec![state("check1", Pending)],
            conditions: vec![],
            want: None,
            change: false,
            admitted_time: None,
        },
    ];
    for case in cases {
        let mut s = WorkloadStatus {
            admission_checks: case.checks,
            conditions: case.conditions,
            ..Default::default()
        };
        let changed = checks::sync_admitted(&mut s, Some(1), t(10));
        assert_eq!(changed, case.change, "{}", case.name);
        let got = s
            .condition(condition::ADMITTED)
            .map(|c| (c.status == "True", c.reason.as_str()));
        assert_eq!(got, case.want, "{}", case.name);
        assert_eq!(
            s.accumulated_past_execution_time_seconds, case.admitted_time,
            "{}",
            case.name
        );
    }
}

/// Kueue `pkg/controller/core/workload_controller_test.go` `TestSyncCheckStates`.
#[test]
fn check_states_follow_the_wanted_checks() {
    use CheckState::*;
    assert_eq!(
        checks::synced_states(&[], &set(&[]), t(0)),
        None,
        "nil conditions, nil list"
    );
    let names = |v: &[AdmissionCheckState]| v.iter().map(|s| (s.name.clone(), s.state)).collect::<Vec<_>>();
    let added = checks::synced_states(&[], &set(&["ac1", "ac2"]), t(0)).expect("add to nil conditions");
    assert_eq!(names(&added), [("ac1".into(), Pending), ("ac2".into(), Pending)]);
    let both = [state("ac0", Pending), state("ac1", Pending)];
    let moved = checks::synced_states(&both, &set(&["ac1", "ac2"]), t(0)).expect("add and remove");
    assert_eq!(names(&moved), [("ac1".into(), Pending), ("ac2".into(), Pending)]);
    assert_eq!(
        checks::synced_states(&both, &set(&[]), t(0)),
        Some(vec![]),
        "cleanup"
    );
    let mut kept = state("ac0", Ready);
    kept.message = "Message one".into();
    assert_eq!(
        checks::synced_states(&[kept, state("ac1", Pending)], &set(&["ac0", "ac1"]), t(0)),
        None,
        "preserve conditions data"
    );
}

/// Kueue `pkg/workload/workload_test.go` `TestAdmissionChecksForWorkload`.
#[test]
fn checks_for_a_workload_depend_on_its_flavors() {
    let cq = ClusterQueue::build("cq")
        .flavor("flavor1", [("cpu", "1")])
        .flavor("flavor2", [("memory", "1")])
        .admission_check("ac1", &["flavor1"])
        .admission_check("ac2", &["flavor2"])
        .admission_check("ac3", &["flavor1", "flavor2"])
        .admission_check("ac4", &["flavor1", "flavor2", "non-existent-flavor"])
        .admission_check("ac5", &["non-existent-flavor"])
        .admission_check("ac6", &[])
        .build();
    let mut admitted = Workload::build("wl", "ns").build();
    admitted.status = Some(WorkloadStatus {
        admission: Some(Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: vec![PodSetAssignment {
                name: "main".into(),
                flavors: [
                    ("cpu".to_string(), "flavor1".to_string()),
                    ("memory".to_string(), "flavor2".to_string()),
                ]
                .into(),
                ..Default::default()
            }],
        }),
        ..Default::default()
    });
    assert_eq!(
        checks::checks_for_workload(&admitted, &cq),
        set(&["ac1", "ac2", "ac3", "ac4", "ac6"]),
        "Only relevant checks returned for an admitted workload"
    );
    let pending = Workload::build("wl", "ns").build();
    assert_eq!(
        checks::checks_for_workload(&pending, &cq),
        set(&["ac3", "ac4", "ac6"]),
        "Only correct checks covering all relevant flavors returned for Workload without Quota Reserved"
    );
}

/// Kueue `pkg/workload/admissionchecks_test.go` `TestGetMaxRetryTime`.
#[test]
fn retry_time_is_the_latest_of_the_retry_checks() {
    let retry = |name: &str, at: Option<i64>, after: Option<i32>| {
        let mut s = state(name, CheckState::Retry);
        s.last_transition_time = at.map(|a| Time(t(a)));
        s.requeue_after_seconds = after;
        s
    };
    let cases: Vec<(&str, Vec<AdmissionCheckState>, Option<jiff::Timestamp>)> = vec![
        ("no admission checks", vec![], None),
        (
            "admission check with nil RequeueAfterSeconds",
            vec![retry("check1", Some(0), None)],
            None,
        ),
        (
            "admission check with zero LastTransitionTime",
            vec![retry("check1", None, Some(60))],
            None,
        ),
        (
            "single admission check with valid retry time",
            vec![retry("check1", Some(0), Some(60))],
            Some(t(60)),
        ),
        (
            "multiple admission checks, returns max retry time",
            vec![
                retry("check1", Some(0), Some(60)),
                retry("check2", Some(0), Some(120)),
                retry("check3", Some(0), Some(30)),
            ],
            Some(t(120)),
        ),
        (
            "multiple checks with mixed nil and valid values",
            vec![
                retry("check1", Some(0), None),
                retry("check2", Some(0), Some(90)),
                retry("check3", None, Some(180)),
            ],
            Some(t(90)),
        ),
        (
            "checks with different base times",
            vec![
                retry("check1", Some(0), Some(60)),
                retry("check2", Some(30), Some(60)),
            ],
            Some(t(90)),
        ),
    ];
    for (name, states, want) in cases {
        assert_eq!(checks::max_retry_time(&states), want, "{name}");
    }
    // Only checks in Retry count.
    let mut ready = retry("check1", Some(0), Some(60));
    ready.state = CheckState::Ready;
    assert_eq!(checks::max_retry_time(&[ready]), None);
}

/// Kueue `workload_controller.go` `buildAdmissionChecksMessage`, as its integration tests see it
/// (`workload_controller_test.go`, "should evict then finish with failure an admitted workload when
/// a check is rejected": `AdmissionCheck in Rejected state: "check1" (check rejected)`).
#[test]
fn verdicts_name_the_failed_checks() {
    let mut rejected = state("check1", CheckState::Rejected);
    rejected.message = "check rejected".into();
    assert_eq!(
        checks::verdict(&[rejected.clone(), state("check2", CheckState::Retry)]),
        Some(Verdict::Deactivate(
            r#"AdmissionCheck in Rejected state: "check1" (check rejected)"#.into()
        )),
        "Rejected wins over Retry"
    );
    let mut b = state("b", CheckState::Retry);
    b.message = "no capacity".into();
    assert_eq!(
        checks::verdict(&[b, state("a", CheckState::Retry), state("c", CheckState::Ready)]),
        Some(Verdict::Evict(
            r#"Evicted due to AdmissionChecks in Retry state: "a"; "b" (no capacity)"#.into()
        ))
    );
    assert_eq!(
        checks::verdict(&[state("a", CheckState::Pending), state("b", CheckState::Ready)]),
        None
    );
}

/// Kueue `pkg/workload/evict/evict.go` `resetChecksOnEviction`, through our eviction write: every
/// check goes back to Pending, a Retry counts one more retry, and a Retry with
/// `requeueAfterSeconds` sets `requeueState.requeueAt`.
#[test]
fn eviction_resets_the_checks_and_keeps_the_retry_time() {
    let mut retry = state("b", CheckState::Retry);
    retry.requeue_after_seconds = Some(60);
    retry.retry_count = Some(1);
    let mut wl = Workload::build("w", "ns")
        .queue("lq")
        .podset("main", 1, [("cpu", "1")])
        .reserve_quota("cq", "default")
        .build();
    wl.status.as_mut().unwrap().admission_checks = vec![
        state("a", CheckState::Ready),
        retry,
        state("c", CheckState::Pending),
    ];
    let cause = conditions::EvictionCause {
        by: conditions::EvictedBy::AdmissionCheck,
        message: "m".into(),
    };
    let s = conditions::evicted(&wl, &cause, t(10)).expect("evicted");
    let got: Vec<(&str, CheckState, Option<i32>, &str)> = s
        .admission_checks
        .iter()
        .map(|c| (c.name.as_str(), c.state, c.retry_count, c.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "a",
                CheckState::Pending,
                None,
                "Reset to Pending after eviction. Previously: Ready"
            ),
            (
                "b",
                CheckState::Pending,
                Some(2),
                "Reset to Pending after eviction. Previously: Retry"
            ),
            ("c", CheckState::Pending, None, ""),
        ]
    );
    assert_eq!(
        s.condition(condition::EVICTED).map(|c| c.reason.as_str()),
        Some(reason::ADMISSION_CHECK)
    );
    assert_eq!(
        s.requeue_state.and_then(|r| r.requeue_at).map(|t| t.0),
        Some(t(60))
    );
}

/// Kueue `clusterqueue_controller_test.go` "Should update status when the admission checks are
/// missing or inactive" (the messages), and `pkg/cache/scheduler/clusterqueue.go`'s order of reasons.
#[test]
fn missing_or_inactive_checks_make_the_cluster_queue_inactive() {
    let cq = ClusterQueue::build("cq")
        .flavor("default", [("cpu", "1")])
        .admission_check("check1", &[])
        .admission_check("check2", &[])
        .build();
    let flavors: BTreeSet<String> = set(&["default"]);
    let known = |v: &[(&str, bool)]| {
        v.iter()
            .map(|(n, a)| (n.to_string(), *a))
            .collect::<checks::KnownChecks>()
    };
    let active = |k: &checks::KnownChecks| {
        let p = checks::cluster_queue_problems(&cq, k);
        super::queue_status::cluster_queue_active(&cq, &flavors, &p, None)
    };
    assert_eq!(
        active(&known(&[])),
        (
            false,
            "AdmissionCheckNotFound".into(),
            "Can't admit new workloads: references missing AdmissionCheck(s): check1,check2.".into()
        )
    );
    assert_eq!(
        active(&known(&[("check1", true)])),
        (
            false,
            "AdmissionCheckNotFound".into(),
            "Can't admit new workloads: references missing AdmissionCheck(s): check2.".into()
        )
    );
    assert_eq!(
        active(&known(&[("check1", true), ("check2", false)])),
        (
            false,
            "AdmissionCheckInactive".into(),
            "Can't admit new workloads: references inactive AdmissionCheck(s): check2.".into()
        )
    );
    assert_eq!(
        active(&known(&[("check1", true), ("check2", true)])),
        (true, "Ready".into(), "Can admit new workloads".into())
    );
    assert_eq!(
        checks::cluster_queue_problems(&cq, &known(&[("check1", false)])),
        CheckProblems {
            missing: vec!["check2".into()],
            inactive: vec!["check1".into()]
        }
    );
}

fn admission_check(name: &str, controller: &str, active: bool) -> Arc<AdmissionCheck> {
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

fn snapshot(checks: Vec<Arc<AdmissionCheck>>, wls: Vec<Workload>) -> Snapshot {
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

fn pending_wl() -> Workload {
    let mut w = Workload::build("w", "default")
        .queue("lq")
        .podset("main", 1, [("cpu", "1")])
        .build();
    w.metadata.resource_version = Some("1".into());
    w
}

fn checks_written(actions: &[Action]) -> Option<&WorkloadStatus> {
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

/// `snapshot` with the ClusterQueue in UsageBasedAdmissionFairSharing mode.
fn afs_snapshot(checks: Vec<Arc<AdmissionCheck>>, wls: Vec<Workload>) -> Snapshot {
    let mut snap = snapshot(checks, wls);
    let mut cq = (*snap.cluster_queues[0]).clone();
    cq.spec.admission_scope = Some(AdmissionScope {
        admission_mode: AdmissionMode::UsageBasedAdmissionFairSharing,
    });
    snap.cluster_queues[0] = Arc::new(cq);
    snap
}

/// A state with admission fair sharing (1s half-life and sampling: the penalty is half the
/// request) and `w` reserved, its check Pending, as the API shows it; with `w` at that point.
fn afs_reserved_waiting_for_its_check(check: &Arc<AdmissionCheck>) -> (AdmissionState, Workload) {
    let cfg = crate::api::kueue::config::AfsConfig {
        usage_half_life_time: std::time::Duration::from_secs(1),
        usage_sampling_interval: std::time::Duration::from_secs(1),
        resource_weights: Default::default(),
    };
    let mut st = AdmissionState::new().with_admission_fair_sharing(Some(&cfg));
    let actions = st.step(
        &afs_snapshot(vec![check.clone()], vec![pending_wl()]),
        t(0).as_millisecond(),
    );
    let mut w = pending_wl();
    w.status = checks_written(&actions).cloned();
    w.metadata.resource_version = Some("2".into());
    let actions = st.step(
        &afs_snapshot(vec![check.clone()], vec![w.clone()]),
        t(0).as_millisecond(),
    );
    let Some(Action::Admit {
        checks, admission, ..
    }) = actions.iter().find(|a| matches!(a, Action::Admit { .. }))
    else {
        panic!("admitted into quota: {actions:?}")
    };
    w.status = Some(conditions::admitted_with_checks(
        &w,
        crate::queue::convert::admission_api(admission),
        checks,
        t(0),
    ));
    w.metadata.resource_version = Some("3".into());
    st.step(
        &afs_snapshot(vec![check.clone()], vec![w.clone()]),
        t(0).as_millisecond(),
    );
    (st, w)
}

fn lq_usage(st: &AdmissionState) -> crate::queue::admission_fair_sharing::LocalQueueUsage {
    let lq = crate::queue::admission_fair_sharing::LocalQueueKey::new("default", "lq");
    st.core.local_queue_usage(&lq).cloned().unwrap_or_default()
}

/// Kueue `TestUpdateSettlesAfsEntryPenalty` ("Pending to QuotaReserved does not settle", "QuotaReserved
/// to Admitted settles", "Admitted to Admitted does not settle again") through the loop's step: the
/// entry penalty stays pending while the workload waits for its check, and is folded into the
/// LocalQueue's consumed resources once the API shows it Admitted.
#[test]
fn the_entry_penalty_settles_when_the_checks_admit_not_at_the_reservation() {
    let check = admission_check("check1", "ctrl", true);
    let (mut st, mut w) = afs_reserved_waiting_for_its_check(&check);
    let e = lq_usage(&st);
    assert!(e.has_pending_penalty(), "pending while QuotaReserved: {e:?}");
    assert_eq!(
        e.consumed.get("cpu").copied().unwrap_or_default(),
        0,
        "not folded at the reservation: {e:?}"
    );

    w.status.as_mut().unwrap().admission_checks[0].state = CheckState::Ready;
    w.metadata.resource_version = Some("4".into());
    let actions = st.step(
        &afs_snapshot(vec![check.clone()], vec![w.clone()]),
        t(1).as_millisecond(),
    );
    w.status = checks_written(&actions).cloned();
    assert!(w.is_admitted());
    assert!(
        lq_usage(&st).has_pending_penalty(),
        "settled when the API shows Admitted, not when it is written"
    );
    w.metadata.resource_version = Some("5".into());
    st.step(
        &afs_snapshot(vec![check.clone()], vec![w.clone()]),
        t(1).as_millisecond(),
    );
    let settled = lq_usage(&st);
    assert!(!settled.has_pending_penalty(), "{settled:?}");
    // Half of the 1 CPU request, plus the decay toward the 1 CPU held over the second elapsed.
    assert_eq!(settled.consumed["cpu"], 1_000_000_000, "{settled:?}");
    w.metadata.resource_version = Some("6".into());
    st.step(&afs_snapshot(vec![check], vec![w]), t(1).as_millisecond());
    assert_eq!(
        lq_usage(&st).consumed,
        settled.consumed,
        "seen Admitted again: nothing settles twice"
    );
}

/// Kueue `TestDeleteSubtractsPendingAfsEntryPenalty`: a workload deleted while it waits for its
/// check drops its entry penalty; it never reaches the consumed resources.
#[test]
fn a_workload_deleted_while_waiting_for_its_check_drops_its_entry_penalty() {
    let check = admission_check("check1", "ctrl", true);
    let (mut st, _) = afs_reserved_waiting_for_its_check(&check);
    assert!(lq_usage(&st).has_pending_penalty());
    // Deleted before a sampling interval has passed: only a settled penalty could show in consumed.
    st.step(&afs_snapshot(vec![check], vec![]), t(0).as_millisecond());
    let e = lq_usage(&st);
    assert!(!e.has_pending_penalty(), "{e:?}");
    assert_eq!(
        e.consumed.get("cpu").copied().unwrap_or_default(),
        0,
        "dropped, not settled: {e:?}"
    );
}

fn reserved_with(check: CheckState, message: &str) -> Workload {
    let mut w = pending_wl().reserved_for_test();
    let mut s = state("check1", check);
    s.message = message.into();
    w.status.as_mut().unwrap().admission_checks = vec![s];
    w
}

trait ReservedForTest {
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

/// DESIGN I4/I6 with admission checks: a scale-up slice reserved on a queue with checks is not
/// admitted yet, so the slice it replaces stays (admitted, its pods covered) and is finished only
/// once the replacement is Admitted.
#[test]
fn a_replaced_slice_finishes_only_once_its_successor_passed_its_checks() {
    let check = admission_check("check1", "ctrl", true);
    let mut old = Workload::build("old", "default")
        .queue("lq")
        .podset("main", 2, [("cpu", "1")])
        .reserve_quota("cq", "default")
        .admitted()
        .build();
    old.metadata.resource_version = Some("1".into());
    let mut new = Workload::build("new", "default")
        .queue("lq")
        .podset("main", 3, [("cpu", "1")])
        .annotation(
            crate::api::kueue::constants::label::WORKLOAD_SLICE_REPLACEMENT_FOR,
            "default/old",
        )
        .build();
    new.status = Some(WorkloadStatus {
        admission_checks: vec![state("check1", CheckState::Pending)],
        ..Default::default()
    });
    new.metadata.resource_version = Some("1".into());
    let mut st = AdmissionState::new();
    let actions = st.step(
        &snapshot(vec![check.clone()], vec![old.clone(), new.clone()]),
        t(0).as_millisecond(),
    );
    let Some(Action::Admit {
        admission, checks, ..
    }) = actions.iter().find(|a| matches!(a, Action::Admit { .. }))
    else {
        panic!("the replacement gets the quota: {actions:?}")
    };
    assert!(
        !actions.iter().any(|a| matches!(a, Action::FinishSlice { .. })),
        "not finished at reservation: {actions:?}"
    );
    // The reservation shows, the check still Pending: the old slice stays.
    new.status = Some(conditions::admitted_with_checks(
        &new,
        crate::queue::convert::admission_api(admission),
        checks,
        t(0),
    ));
    new.metadata.resource_version = Some("2".into());
    assert!(!new.is_admitted());
    let actions = st.step(
        &snapshot(vec![check.clone()], vec![old.clone(), new.clone()]),
        t(1).as_millisecond(),
    );
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::FinishSlice { .. } | Action::Admit { .. })),
        "{actions:?}"
    );
    // The check passes and the replacement is Admitted: now the old slice is finished.
    new.status.as_mut().unwrap().admission_checks[0].state = CheckState::Ready;
    checks::sync_admitted(new.status.as_mut().unwrap(), None, t(2));
    new.metadata.resource_version = Some("3".into());
    let actions = st.step(&snapshot(vec![check], vec![old, new]), t(2).as_millisecond());
    assert!(
        actions.iter().any(|a| matches!(a, Action::FinishSlice { key, replaced_by } if key.name == "old" && replaced_by.name == "new")),
        "{actions:?}"
    );
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

/// Kueue `pkg/controller/core/workload_controller_test.go` `TestReconcileSyncAdmissionChecks`
/// (`spec.admissionChecks` of v1beta1 is a strategy whose rules name no flavor in v1beta2).
#[test]
fn reconcile_sync_admission_checks() {
    use CheckState::*;
    let cq = |rules: &[(&str, &[&str])]| {
        rules
            .iter()
            .fold(
                ClusterQueue::build("cq")
                    .flavor("flavor1", [("cpu", "1")])
                    .flavor("flavor2", [("memory", "1")]),
                |b, (n, on)| b.admission_check(n, on),
            )
            .build()
    };
    let plain = Workload::build("wl", "ns").build();
    let mut admitted = Workload::build("wl", "ns").build();
    admitted.status = Some(WorkloadStatus {
        admission: Some(Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: vec![PodSetAssignment {
                name: "p1".into(),
                flavors: [("cpu".to_string(), "flavor1".to_string())].into(),
                ..Default::default()
            }],
        }),
        ..Default::default()
    });
    let mut with_states = Workload::build("wl", "ns").build();
    with_states.status = Some(WorkloadStatus {
        admission_checks: vec![state("ac1", Ready), state("ac3", Ready)],
        ..Default::default()
    });
    type Case<'a> = (&'a str, &'a Workload, ClusterQueue, Vec<(&'a str, CheckState)>);
    let cases: Vec<Case> = vec![
        ("no checks in cq", &plain, cq(&[]), vec![]),
        (
            "add checks from cq",
            &plain,
            cq(&[("ac1", &[]), ("ac2", &[])]),
            vec![("ac1", Pending), ("ac2", Pending)],
        ),
        (
            "add only checks covering all flavors to unadmitted wl from cq with strategy",
            &plain,
            cq(&[("ac1", &["flavor1"]), ("ac2", &[])]),
            vec![("ac2", Pending)],
        ),
        (
            "add checks to admitted wl from cq with strategy",
            &admitted,
            cq(&[("ac1", &["flavor1"]), ("ac2", &["flavor2"]), ("ac3", &[])]),
            vec![("ac1", Pending), ("ac3", Pending)],
        ),
        (
            "keep only existing valid checks",
            &with_states,
            cq(&[("ac1", &[]), ("ac2", &[])]),
            vec![("ac1", Ready), ("ac2", Pending)],
        ),
    ];
    for (name, wl, cq, want) in cases {
        let current = wl
            .status
            .as_ref()
            .map(|s| s.admission_checks.clone())
            .unwrap_or_default();
        let wanted = checks::checks_for_workload(wl, &cq);
        let got = checks::synced_states(&current, &wanted, t(0)).unwrap_or(current);
        assert_eq!(
            got.iter().map(|c| (c.name.as_str(), c.state)).collect::<Vec<_>>(),
            want,
            "{name}"
        );
    }
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
