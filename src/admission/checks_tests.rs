//! Admission checks: Kueue's unit tables for the pure parts (the step over snapshots with checks is
//! in `checks_step_tests.rs`, with admission fair sharing in `checks_afs_tests.rs`).

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::checks::{self, CheckProblems, Verdict};
use super::conditions;
use crate::api::kueue::constants::{condition, reason};
use crate::api::kueue::*;

pub(super) fn t(s: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_800_000_000 + s).unwrap()
}

pub(super) fn state(name: &str, s: CheckState) -> AdmissionCheckState {
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

pub(super) fn c(type_: &str, status: bool, since: i64) -> Condition {
    crate::api::conditions::new(type_, status, "", "", None, t(since))
}

pub(super) fn set(names: &[&str]) -> BTreeSet<String> {
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
