//! waitForPodsReady's pure parts, with the cases of Kueue's own tests (each named).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::{deadline, desired, with_condition};
use crate::admission::pods_ready;
use crate::admission::sync::{self, Action, AdmissionState};
use crate::api::conditions::new as cond;
use crate::api::kueue::config::PodsReadyConfig;
use crate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Workload};

const NOW: i64 = 1_800_000_000_000;

fn at(ms: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_millisecond(ms).unwrap()
}

fn c(type_: &str, status: &str, reason: &str, ms: i64) -> Condition {
    let mut x = cond(type_, status == "True", reason, "", None, at(ms));
    x.status = status.into();
    x
}

fn with(conds: Vec<Condition>) -> Workload {
    let mut w = Workload::build("w", "ns")
        .queue("lq")
        .podset("main", 1, [("cpu", "1")])
        .reserve_quota("cq", "default")
        .build();
    let s = w.status.get_or_insert_with(Default::default);
    for x in conds {
        crate::api::conditions::set(&mut s.conditions, x);
    }
    w
}

fn cfg(timeout_min: u64, recovery_min: Option<u64>) -> PodsReadyConfig {
    PodsReadyConfig {
        recovery_timeout: recovery_min.map(|m| Duration::from_secs(m * 60)),
        ..PodsReadyConfig::with_timeout(Duration::from_secs(timeout_min * 60))
    }
}

/// `pkg/controller/core/workload_controller_test.go`, TestAdmittedNotReadyWorkload: which wait an
/// admitted workload is in and how long is left. (Kueue's "no timeout configured" case has no
/// counterpart: here the feature off means no config at all, and nothing is asked.)
#[test]
fn admitted_not_ready_workload() {
    let minute = 60_000;
    let ago = NOW - minute;
    type Case = (
        &'static str,
        Vec<Condition>,
        PodsReadyConfig,
        Option<(&'static str, i64)>,
    );
    let cases: Vec<Case> = vec![
        (
            "workload without Admitted condition; not counting",
            vec![],
            cfg(5, Some(5)),
            None,
        ),
        (
            "workload with Admitted=True, no PodsReady; counting",
            vec![c("Admitted", "True", "Admitted", ago)],
            cfg(5, Some(5)),
            Some(("WaitForStart", 4 * minute)),
        ),
        (
            "workload with Admitted=True, no PodsReady; timeout exceeded",
            vec![c("Admitted", "True", "Admitted", NOW - 7 * minute)],
            cfg(5, Some(5)),
            Some(("WaitForStart", 0)),
        ),
        (
            "with reason WaitForStart; counting since admitted.LastTransitionTime",
            vec![
                c("Admitted", "True", "Admitted", ago),
                c("PodsReady", "False", "WaitForStart", NOW),
            ],
            cfg(5, Some(5)),
            Some(("WaitForStart", 4 * minute)),
        ),
        (
            "with reason PodsReady; counting since admitted.LastTransitionTime",
            vec![
                c("Admitted", "True", "Admitted", ago),
                c("PodsReady", "False", "PodsReady", NOW),
            ],
            cfg(5, Some(5)),
            Some(("WaitForStart", 4 * minute)),
        ),
        (
            "Admitted=True, PodsReady=False, Reason=WaitForRecovery",
            vec![
                c("Admitted", "True", "Admitted", ago),
                c("PodsReady", "False", "WaitForRecovery", NOW),
            ],
            cfg(5, Some(3)),
            Some(("WaitForRecovery", 3 * minute)),
        ),
        (
            "Reason=WaitForRecovery, recoveryTimeout not configured",
            vec![
                c("Admitted", "True", "Admitted", ago),
                c("PodsReady", "False", "WaitForRecovery", NOW),
            ],
            cfg(5, None),
            None,
        ),
        (
            "workload with Admitted=Unknown; not counting",
            vec![c("Admitted", "Unknown", "Admitted", ago)],
            cfg(5, Some(5)),
            None,
        ),
        (
            "workload with Admitted=False, not counting",
            vec![c("Admitted", "False", "NoReservation", ago)],
            cfg(5, Some(5)),
            None,
        ),
        (
            "workload with Admitted=True, PodsReady=True; not counting",
            vec![
                c("Admitted", "True", "Admitted", ago),
                c("PodsReady", "True", "Started", NOW),
            ],
            cfg(5, Some(5)),
            None,
        ),
    ];
    for (name, conds, cfg, want) in cases {
        let got = deadline(&with(conds), &cfg).map(|(why, at)| (why, (at - NOW).max(0)));
        assert_eq!(got, want, "{name}");
    }
}

/// Kueue v0.20's per-workload waitForPodsReady (KEP-4803, kueue#15503; its e2e expectations "A job
/// with a per-workload timeout shorter / longer than the cluster wide timeout is evicted at per
/// workload deadline"): with `WorkloadLevelWaitForPodsReady` on, the Workload's
/// `kueue.x-k8s.io/wait-for-pods-ready` sets the deadline the eviction path uses; with the gate off
/// (Kueue's default) or a malformed value, the cluster-wide timeouts apply.
#[test]
fn per_workload_timeout_sets_the_deadline() {
    let minute = 60_000;
    let ago = NOW - minute;
    let annotated = |conds: Vec<Condition>, v: &str| {
        let mut w = with(conds);
        w.metadata.annotations = Some(
            [(
                crate::api::kueue::pods_ready_annotation::ANNOTATION.to_string(),
                v.to_string(),
            )]
            .into(),
        );
        w
    };
    let gate_on = |t: u64, r: Option<u64>| PodsReadyConfig {
        workload_level: Some(Duration::from_secs(7200)),
        ..cfg(t, r)
    };
    let admitted = || vec![c("Admitted", "True", "Admitted", ago)];
    let recovering = || {
        vec![
            c("Admitted", "True", "Admitted", ago),
            c("PodsReady", "False", "WaitForRecovery", NOW),
        ]
    };
    type Case = (
        &'static str,
        Workload,
        PodsReadyConfig,
        Option<(&'static str, i64)>,
    );
    let cases: Vec<Case> = vec![
        (
            "shorter than the cluster-wide timeout",
            annotated(admitted(), r#"{"timeoutSeconds": 120}"#),
            gate_on(5, Some(5)),
            Some(("WaitForStart", minute)),
        ),
        (
            "longer than the cluster-wide timeout",
            annotated(admitted(), r#"{"timeoutSeconds": 3600}"#),
            gate_on(5, Some(5)),
            Some(("WaitForStart", 59 * minute)),
        ),
        (
            "the gate off: the annotation is ignored",
            annotated(admitted(), r#"{"timeoutSeconds": 120}"#),
            cfg(5, Some(5)),
            Some(("WaitForStart", 4 * minute)),
        ),
        (
            "malformed: the cluster-wide timeout",
            annotated(admitted(), r#"{"timeoutSeconds": "2m"}"#),
            gate_on(5, Some(5)),
            Some(("WaitForStart", 4 * minute)),
        ),
        (
            "recovery: its own recoveryTimeoutSeconds",
            annotated(
                recovering(),
                r#"{"timeoutSeconds": 120, "recoveryTimeoutSeconds": 30}"#,
            ),
            gate_on(5, Some(5)),
            Some(("WaitForRecovery", minute / 2)),
        ),
        (
            "recovery: the timeout alone also bounds recovery, even with recovery off cluster-wide",
            annotated(recovering(), r#"{"timeoutSeconds": 120}"#),
            gate_on(5, None),
            Some(("WaitForRecovery", 2 * minute)),
        ),
    ];
    for (name, wl, cfg, want) in cases {
        let got = deadline(&wl, &cfg).map(|(why, at)| (why, (at - NOW).max(0)));
        assert_eq!(got, want, "{name}");
    }
    // The eviction path: past its own (shorter) deadline, the verdict is PodsReadyTimeout.
    let wl = annotated(admitted(), r#"{"timeoutSeconds": 30}"#);
    assert!(matches!(
        pods_ready::verdict(&wl, &gate_on(5, Some(5)), NOW),
        pods_ready::Verdict::Evict(_)
    ));
    assert!(matches!(
        pods_ready::verdict(&wl, &cfg(5, Some(5)), NOW),
        pods_ready::Verdict::Until(_)
    ));
}

/// `pkg/controller/jobs/job/job_controller_test.go`, the PodsReady cases of TestReconciler (the
/// condition the job reconciler writes from the job's readiness).
#[test]
fn pods_ready_condition_follows_the_job() {
    let admitted = || c("Admitted", "True", "Admitted", NOW);
    type Case = (
        &'static str,
        Vec<Condition>,
        bool,
        (bool, &'static str, &'static str),
    );
    let cases: Vec<Case> = vec![
        (
            "PodsReady=False before the workload is admitted",
            vec![],
            true,
            (false, "WaitForStart", pods_ready::NOT_READY_MESSAGE),
        ),
        (
            "PodsReady is set to True after Workload is Admitted and all Pods reached readiness",
            vec![admitted(), c("PodsReady", "False", "WaitForStart", NOW)],
            true,
            (true, "Started", pods_ready::READY_MESSAGE),
        ),
        (
            "... without previous PodsReady condition",
            vec![admitted()],
            true,
            (true, "Started", pods_ready::READY_MESSAGE),
        ),
        (
            "PodsReady is set to False after Workload is running and one pod failed",
            vec![admitted(), c("PodsReady", "True", "Started", NOW)],
            false,
            (false, "WaitForRecovery", pods_ready::WAITING_FOR_RECOVERY_MESSAGE),
        ),
        (
            "PodsReady continues to be False after a pod failed and workload is still recovering",
            vec![admitted(), c("PodsReady", "False", "WaitForRecovery", NOW)],
            false,
            (false, "WaitForRecovery", pods_ready::WAITING_FOR_RECOVERY_MESSAGE),
        ),
        (
            "PodsReady is set to True after failing pod recovered",
            vec![admitted(), c("PodsReady", "False", "WaitForRecovery", NOW)],
            true,
            (true, "Recovered", pods_ready::READY_MESSAGE),
        ),
        (
            "PodsReady=False has the new Reason if there was the old one before (pre v0.11.0)",
            vec![admitted(), c("PodsReady", "False", "PodsReady", NOW)],
            false,
            (false, "WaitForStart", pods_ready::NOT_READY_MESSAGE),
        ),
    ];
    for (name, conds, ready, want) in cases {
        let w = with(conds);
        assert_eq!(desired(&w, ready, false), want, "{name}");
        match with_condition(&w, ready, false, at(NOW + 1)) {
            Some(s) => {
                let pr = s.condition("PodsReady").unwrap();
                assert_eq!(
                    (pr.status == "True", pr.reason.as_str(), pr.message.as_str()),
                    want,
                    "{name}"
                );
            }
            // Same status and reason shown already: Kueue writes nothing.
            None => {
                let pr = w.status.as_ref().unwrap().condition("PodsReady").unwrap();
                assert_eq!(
                    (pr.status == "True", pr.reason.as_str()),
                    (want.0, want.1),
                    "{name}"
                );
            }
        }
    }
    // Kueue rewrites only when status or reason changes.
    let w = with(vec![admitted(), c("PodsReady", "True", "Started", NOW)]);
    assert!(with_condition(&w, true, false, at(NOW)).is_none());
}

#[test]
fn the_requeue_limit_deactivates_on_the_requeue_past_it() {
    let mut c = cfg(5, Some(5));
    let mut w = with(vec![]);
    assert!(!pods_ready::limit_reached(&w, &c), "no limit: never");
    c.backoff_limit_count = Some(2);
    for (count, want) in [(None, false), (Some(1), false), (Some(2), true)] {
        w.status.as_mut().unwrap().requeue_state = Some(crate::api::kueue::RequeueState {
            count,
            requeue_at: None,
        });
        assert_eq!(pods_ready::limit_reached(&w, &c), want, "{count:?}");
    }
    c.backoff_limit_count = Some(0);
    w.status.as_mut().unwrap().requeue_state = None;
    assert!(
        pods_ready::limit_reached(&w, &c),
        "limit 0: deactivated at the first timeout"
    );
}

fn snapshot(wls: Vec<Workload>) -> sync::Snapshot {
    let mut q = ClusterQueue::build("cq")
        .flavor("default", [("cpu", "4")])
        .build();
    q.metadata.resource_version = Some("1".into());
    sync::Snapshot {
        cluster_queues: vec![Arc::new(q)],
        flavors: vec![Arc::new(ResourceFlavor::build("default").build())],
        local_queues: vec![Arc::new(
            LocalQueue::build("lq", "ns").cluster_queue("cq").build(),
        )],
        workloads: wls.into_iter().map(Arc::new).collect(),
        ..Default::default()
    }
}

fn admitted_at(name: &str, ms: i64, extra: Vec<Condition>) -> Workload {
    let mut w = with(extra);
    w.metadata.name = Some(name.into());
    w.metadata.resource_version = Some("1".into());
    let s = w.status.get_or_insert_with(Default::default);
    crate::api::conditions::set(&mut s.conditions, c("Admitted", "True", "Admitted", ms));
    w
}

#[test]
fn the_loop_times_out_an_admitted_workload_and_keeps_a_timer_before() {
    let mut st = AdmissionState::with_pods_ready(Some(PodsReadyConfig {
        backoff_base_seconds: 1,
        ..PodsReadyConfig::with_timeout(Duration::from_secs(10))
    }));
    assert_eq!(st.backoff.base_seconds, 1, "the backoff comes from the config");
    let w = admitted_at("w", NOW, vec![]);
    let before = st.step(&snapshot(vec![w.clone()]), NOW + 9_000);
    assert!(before.is_empty(), "{before:?}");
    assert_eq!(
        st.pods_ready_deadline(),
        Some(NOW + 10_000),
        "a timer for the deadline"
    );
    let after = st.step(&snapshot(vec![w.clone()]), NOW + 10_000);
    match &after[..] {
        [Action::Evict { key, cause, clear }] => {
            assert_eq!(key.name, "w");
            assert_eq!(
                cause.by,
                crate::admission::conditions::EvictedBy::PodsReadyTimeout
            );
            assert_eq!(cause.message, "Exceeded the PodsReady timeout ns/w");
            assert!(*clear, "no job owns it: released at once");
        }
        other => panic!("{other:?}"),
    }
    let mut ready = w.clone();
    crate::api::conditions::set(
        &mut ready.status.as_mut().unwrap().conditions,
        c("PodsReady", "True", "Started", NOW),
    );
    let mut st2 =
        AdmissionState::with_pods_ready(Some(PodsReadyConfig::with_timeout(Duration::from_secs(10))));
    assert!(
        st2.step(&snapshot(vec![ready]), NOW + 60_000).is_empty(),
        "ready: never timed out"
    );
    assert_eq!(st2.pods_ready_deadline(), None);
    // Off (the default): no timer, no eviction.
    let mut off = AdmissionState::new();
    assert!(off.step(&snapshot(vec![w]), NOW + 3_600_000).is_empty());
    assert_eq!(off.pods_ready_deadline(), None);
}

#[test]
fn the_loop_deactivates_past_the_requeue_limit() {
    let mut st = AdmissionState::with_pods_ready(Some(PodsReadyConfig {
        backoff_limit_count: Some(1),
        ..PodsReadyConfig::with_timeout(Duration::from_secs(10))
    }));
    let mut w = admitted_at("w", NOW, vec![]);
    w.status.as_mut().unwrap().requeue_state = Some(crate::api::kueue::RequeueState {
        count: Some(1),
        requeue_at: None,
    });
    let actions = st.step(&snapshot(vec![w.clone()]), NOW + 10_000);
    assert!(
        matches!(&actions[..], [Action::Deactivate { key, .. }] if key.name == "w"),
        "{actions:?}"
    );
    let marked = pods_ready::mark_for_deactivation(
        &w,
        crate::api::kueue::constants::reason::REQUEUING_LIMIT_EXCEEDED,
        pods_ready::LIMIT_EXCEEDED_MESSAGE,
        at(NOW),
    )
    .unwrap();
    let dt = marked.condition("DeactivationTarget").unwrap();
    assert_eq!(
        (dt.status.as_str(), dt.reason.as_str(), dt.message.as_str()),
        (
            "True",
            "RequeuingLimitExceeded",
            "exceeding the maximum number of re-queuing retries"
        )
    );
    // Once inactive, the eviction says why (Kueue's wording).
    w.status = Some(marked);
    w.spec.active = Some(false);
    w.metadata.resource_version = Some("2".into());
    let actions = st.step(&snapshot(vec![w]), NOW + 11_000);
    match &actions[..] {
        [Action::Evict { cause, .. }] => {
            assert_eq!(cause.by, crate::admission::conditions::EvictedBy::Deactivated);
            assert_eq!(
                cause.message,
                "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// `test/integration/singlecluster/scheduler/podsready/scheduler_test.go`, "Should block admission of
/// one new workload if two are considered in the same scheduling cycle": with blockAdmission, one
/// admission per cycle, and none while an admitted workload is not PodsReady.
#[test]
fn block_admission_admits_one_then_waits_for_pods_ready() {
    let block = PodsReadyConfig {
        block_admission: true,
        ..PodsReadyConfig::with_timeout(Duration::from_secs(600))
    };
    let pending = |name: &str, ms: i64| {
        let mut w = Workload::build(name, "ns")
            .queue("lq")
            .podset("main", 1, [("cpu", "1")])
            .build();
        w.metadata.resource_version = Some("1".into());
        w.metadata.creation_timestamp = Some(Time(at(ms)));
        w
    };
    let mut st = AdmissionState::with_pods_ready(Some(block.clone()));
    let actions = st.step(&snapshot(vec![pending("a", NOW), pending("b", NOW + 1)]), NOW);
    let admitted: Vec<&str> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Admit { key, .. } => Some(key.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(admitted, vec!["a"], "{actions:?}");
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Pending { key, reason, message }
            if key.name == "b" && reason == "WaitingForPodsReady" && message == pods_ready::BLOCKED_MESSAGE)),
        "{actions:?}"
    );
    // A is admitted and not ready: b still waits; once a is PodsReady, b is admitted.
    let a = admitted_at("a", NOW, vec![]);
    let mut st = AdmissionState::with_pods_ready(Some(block));
    let actions = st.step(&snapshot(vec![a.clone(), pending("b", NOW + 1)]), NOW + 1000);
    assert!(
        !actions.iter().any(|x| matches!(x, Action::Admit { .. })),
        "{actions:?}"
    );
    let mut ready = a;
    crate::api::conditions::set(
        &mut ready.status.as_mut().unwrap().conditions,
        c("PodsReady", "True", "Started", NOW),
    );
    ready.metadata.resource_version = Some("2".into());
    let actions = st.step(&snapshot(vec![ready, pending("b", NOW + 1)]), NOW + 2000);
    assert!(
        actions
            .iter()
            .any(|x| matches!(x, Action::Admit { key, .. } if key.name == "b")),
        "{actions:?}"
    );
    // Without blockAdmission both go in one cycle.
    let mut st =
        AdmissionState::with_pods_ready(Some(PodsReadyConfig::with_timeout(Duration::from_secs(600))));
    let actions = st.step(&snapshot(vec![pending("a", NOW), pending("b", NOW + 1)]), NOW);
    assert_eq!(
        actions
            .iter()
            .filter(|a| matches!(a, Action::Admit { .. }))
            .count(),
        2,
        "{actions:?}"
    );
}

/// When Kueue's time-to-ready histograms are observed (`reconciler.go`: PodsReady=True with reason
/// Started written, not a recovery), and what they measure; and `evict.go`'s
/// `workloadsWithPodsReadyToEvictedTime`.
#[test]
fn pods_ready_metrics_arithmetic() {
    use crate::api::kueue::constants::{condition, reason};
    let admitted = c(condition::ADMITTED, "True", "Admitted", NOW);
    let w = with(vec![admitted.clone()]);
    let started = with_condition(&w, true, false, at(NOW + 5_000)).unwrap();
    assert!(pods_ready::first_ready(&w, &started));
    // Shown already, or a recovery: not a first readiness.
    let shown = with(vec![
        admitted.clone(),
        c(condition::PODS_READY, "True", reason::STARTED, NOW + 5_000),
    ]);
    assert!(!pods_ready::first_ready(&shown, &started));
    let lost = with(vec![
        admitted.clone(),
        c(
            condition::PODS_READY,
            "False",
            reason::WAIT_FOR_RECOVERY,
            NOW + 6_000,
        ),
    ]);
    let recovered = with_condition(&lost, true, false, at(NOW + 7_000)).unwrap();
    assert!(!pods_ready::first_ready(&lost, &recovered));
    // Not ready is never a readiness.
    let not_ready = with_condition(&w, false, false, at(NOW + 5_000)).unwrap();
    assert!(!pods_ready::first_ready(&w, &not_ready));
    // Queued 10 s before the admission, ready 5 s after it.
    let (queued, since_admitted) = pods_ready::ready_waits(&w, at(NOW - 10_000), at(NOW + 5_000));
    assert_eq!((queued, since_admitted), (15.0, Some(5.0)));
    assert_eq!(
        pods_ready::ready_waits(&with(vec![]), at(NOW), at(NOW + 1_000)).1,
        None
    );
    // Ready for 30 s, then evicted.
    let ready_then_evicted = with(vec![
        admitted.clone(),
        c(condition::PODS_READY, "True", reason::STARTED, NOW),
        c(condition::EVICTED, "True", reason::DEACTIVATED, NOW + 30_000),
    ]);
    let s = ready_then_evicted.status.clone().unwrap_or_default();
    assert_eq!(pods_ready::ready_to_evicted(&s), Some(30.0));
    // Never ready, or not evicted: nothing to observe.
    let never_ready = with(vec![
        admitted.clone(),
        c(condition::PODS_READY, "False", reason::WAIT_FOR_START, NOW),
        c(
            condition::EVICTED,
            "True",
            reason::PODS_READY_TIMEOUT,
            NOW + 30_000,
        ),
    ]);
    assert_eq!(
        pods_ready::ready_to_evicted(&never_ready.status.clone().unwrap_or_default()),
        None
    );
    let running = with(vec![
        admitted,
        c(condition::PODS_READY, "True", reason::STARTED, NOW),
    ]);
    assert_eq!(
        pods_ready::ready_to_evicted(&running.status.clone().unwrap_or_default()),
        None
    );
}

/// Kueue v0.20's `kueue_workload_recovery_wait_time_seconds` (kueue#14766): a workload whose pods
/// were ready, lost readiness (PodsReady=False, `WaitForRecovery`) and are ready again (`Recovered`)
/// is observed once, with the seconds since readiness was lost; a first readiness, a write that
/// keeps it not ready, or one that keeps it ready observe nothing.
#[test]
fn recovery_wait_is_observed_from_lost_readiness_to_ready_again() {
    use crate::admission::metrics::Metrics;
    use crate::admission::pods_ready_metrics::record_ready;
    use crate::api::kueue::constants::{condition, reason};
    let admitted = c(condition::ADMITTED, "True", "Admitted", NOW);
    let lost = with(vec![
        admitted.clone(),
        c(
            condition::PODS_READY,
            "False",
            reason::WAIT_FOR_RECOVERY,
            NOW + 6_000,
        ),
    ]);
    let recovered = with_condition(&lost, true, false, at(NOW + 18_500)).unwrap();
    assert_eq!(
        recovered
            .condition(condition::PODS_READY)
            .map(|c| c.reason.as_str()),
        Some(reason::RECOVERED)
    );
    assert_eq!(pods_ready::recovery_wait(&lost, &recovered), Some(12.5));
    // Still not ready: nothing.
    let still = c(
        condition::PODS_READY,
        "False",
        reason::WAIT_FOR_RECOVERY,
        NOW + 6_000,
    );
    let mut not_yet = lost.status.clone().unwrap_or_default();
    crate::api::conditions::set(&mut not_yet.conditions, still);
    assert_eq!(pods_ready::recovery_wait(&lost, &not_yet), None);
    // A first readiness is no recovery.
    let fresh = with(vec![admitted.clone()]);
    let started = with_condition(&fresh, true, false, at(NOW + 5_000)).unwrap();
    assert_eq!(pods_ready::recovery_wait(&fresh, &started), None);
    // Ready and staying ready: nothing.
    let ready = with(vec![
        admitted,
        c(condition::PODS_READY, "True", reason::RECOVERED, NOW + 18_500),
    ]);
    assert_eq!(pods_ready::recovery_wait(&ready, &recovered), None);

    let m = Metrics::new();
    m.set_role(crate::admission::metrics::Role::Leader);
    for (old, new) in [(&lost, &recovered), (&fresh, &started), (&ready, &recovered)] {
        record_ready(&m, old, new, at(NOW + 18_500));
    }
    let text = m.render();
    for want in [
        "kueue_workload_recovery_wait_time_seconds_count{cluster_queue=\"cq\",priority_class=\"\",replica_role=\"leader\"} 1",
        "kueue_workload_recovery_wait_time_seconds_sum{cluster_queue=\"cq\",priority_class=\"\",replica_role=\"leader\"} 12.5",
        // Kueue's generateExponentialBuckets(14): 12.5 s falls in the 20 s bucket, not the 10 s one.
        "kueue_workload_recovery_wait_time_seconds_bucket{le=\"10.0\",cluster_queue=\"cq\",priority_class=\"\",replica_role=\"leader\"} 0",
        "kueue_workload_recovery_wait_time_seconds_bucket{le=\"20.0\",cluster_queue=\"cq\",priority_class=\"\",replica_role=\"leader\"} 1",
        "le=\"10240.0\"",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    // The first readiness still feeds the time-to-ready histogram, once.
    assert!(
        text.contains("kueue_ready_wait_time_seconds_count{cluster_queue=\"cq\",priority_class=\"\",replica_role=\"leader\"} 1"),
        "{text}"
    );
}

/// Kueue v0.20's `unscheduledTimeout` (KEP-13502, kueue#15402/#15434), the cases of
/// `pkg/controller/core/workload_controller_test.go`: "evict with the WaitForScheduling cause when
/// the unscheduledTimeout is exceeded" (timeout 30m, unscheduledTimeout 3s, pods seen unscheduled
/// 4m ago: past it) and "gate off keeps the same unscheduled workload until the normal timeout"
/// (25m left of the 30m since the admission 5m ago); with the KEP's table, the deadline runs from
/// the PodsScheduled observation, is never later than `timeout` from the admission, and an
/// observation older than the admission is none.
#[test]
fn unscheduled_timeout_sets_the_scheduling_deadline() {
    let minute = 60_000;
    let waiting = |seen: i64| {
        vec![
            c("Admitted", "True", "ByTest", NOW - 5 * minute),
            c("PodsScheduled", "False", "WaitForScheduling", seen),
            c("PodsReady", "False", "WaitForScheduling", NOW - 4 * minute),
        ]
    };
    let unscheduled = |u: Duration| PodsReadyConfig {
        unscheduled_timeout: Some(u),
        ..cfg(30, Some(30))
    };
    type Case = (
        &'static str,
        Vec<Condition>,
        PodsReadyConfig,
        Option<(&'static str, i64)>,
    );
    let cases: Vec<Case> = vec![
        (
            "evict with the WaitForScheduling cause when the unscheduledTimeout is exceeded",
            waiting(NOW - 4 * minute),
            unscheduled(Duration::from_secs(3)),
            Some(("WaitForScheduling", 0)),
        ),
        (
            "gate off keeps the same unscheduled workload until the normal timeout",
            waiting(NOW - 4 * minute),
            cfg(30, Some(30)),
            Some(("WaitForScheduling", 25 * minute)),
        ),
        (
            "counting from the observation",
            waiting(NOW - 4 * minute),
            unscheduled(Duration::from_secs(600)),
            Some(("WaitForScheduling", 6 * minute)),
        ),
        (
            "never past the timeout since the admission",
            waiting(NOW - minute),
            PodsReadyConfig {
                unscheduled_timeout: Some(Duration::from_secs(600)),
                ..cfg(6, Some(6))
            },
            Some(("WaitForScheduling", minute)),
        ),
        (
            "an observation older than the admission is none: the timeout since the admission",
            waiting(NOW - 6 * minute),
            unscheduled(Duration::from_secs(3)),
            Some(("WaitForScheduling", 25 * minute)),
        ),
    ];
    for (name, conds, cfg, want) in cases {
        let w = with(conds);
        let got = deadline(&w, &cfg).map(|(why, at)| (why, (at - NOW).max(0)));
        assert_eq!(got, want, "{name}");
    }
    // Past it, the eviction is PodsReadyTimeout with Kueue's message, its cause WaitForScheduling.
    let w = with(waiting(NOW - 4 * minute));
    assert_eq!(
        pods_ready::verdict(&w, &unscheduled(Duration::from_secs(3)), NOW),
        pods_ready::Verdict::Evict(crate::admission::conditions::EvictionCause {
            by: crate::admission::conditions::EvictedBy::PodsReadyTimeout,
            message: "Exceeded the PodsReady timeout ns/w".into(),
        })
    );
    assert_eq!(
        crate::admission::conditions::underlying_cause(
            &w,
            crate::admission::conditions::EvictedBy::PodsReadyTimeout
        ),
        "WaitForScheduling"
    );
    let started = with(vec![c("Admitted", "True", "ByTest", NOW - 5 * minute)]);
    assert_eq!(
        crate::admission::conditions::underlying_cause(
            &started,
            crate::admission::conditions::EvictedBy::PodsReadyTimeout
        ),
        "WaitForStart"
    );
}

fn scheduling(live: usize, scheduled: i64) -> pods_ready::PodsScheduling {
    pods_ready::PodsScheduling {
        live,
        scheduled: [("main".to_string(), scheduled)].into(),
    }
}

fn shown(s: &crate::api::kueue::WorkloadStatus) -> Option<(String, String, String, i64)> {
    s.condition("PodsScheduled").map(|c| {
        (
            c.status.clone(),
            c.reason.clone(),
            c.message.clone(),
            c.last_transition_time.0.as_millisecond(),
        )
    })
}

/// KEP-13502's tracker (kueue#15468; the "Required-pod semantics" and "Writes" of the KEP): nothing
/// before a pod exists; `False`/`WaitForScheduling` once one is seen unbound, kept (its time too)
/// while some stay unbound; `True`/`AllRequiredPodsScheduled` once all are, and sticky for the rest
/// of the admission; none on an evicted workload; the eviction resets it to `False` with its reason.
#[test]
fn pods_scheduled_follows_the_pods() {
    use pods_ready::{ALL_PODS_SCHEDULED_MESSAGE, UNSCHEDULED_PODS_MESSAGE, with_pods_scheduled};
    let admitted = with(vec![c("Admitted", "True", "Admitted", NOW - 10_000)]);
    assert_eq!(
        with_pods_scheduled(&admitted, &scheduling(0, 0), at(NOW)),
        None,
        "no pod yet"
    );
    let s = with_pods_scheduled(&admitted, &scheduling(1, 0), at(NOW)).unwrap();
    assert_eq!(
        shown(&s),
        Some((
            "False".into(),
            "WaitForScheduling".into(),
            UNSCHEDULED_PODS_MESSAGE.into(),
            NOW
        ))
    );
    let mut unbound = admitted.clone();
    unbound.status = Some(s);
    assert_eq!(
        with_pods_scheduled(&unbound, &scheduling(1, 0), at(NOW + 5_000)),
        None,
        "still unbound: the first time stays"
    );
    // PodsReady says WaitForScheduling while tracking, WaitForStart without it.
    assert_eq!(
        desired(&unbound, false, true),
        (false, "WaitForScheduling", pods_ready::NOT_READY_MESSAGE)
    );
    assert_eq!(
        desired(&unbound, false, false),
        (false, "WaitForStart", pods_ready::NOT_READY_MESSAGE)
    );
    let s = with_pods_scheduled(&unbound, &scheduling(1, 1), at(NOW + 6_000)).unwrap();
    assert_eq!(
        shown(&s),
        Some((
            "True".into(),
            "AllRequiredPodsScheduled".into(),
            ALL_PODS_SCHEDULED_MESSAGE.into(),
            NOW + 6_000
        ))
    );
    let mut bound = unbound.clone();
    bound.status = Some(s);
    assert_eq!(
        with_pods_scheduled(&bound, &scheduling(0, 0), at(NOW + 7_000)),
        None,
        "True is sticky for the admission"
    );
    assert_eq!(desired(&bound, false, true).1, "WaitForStart");
    // Surplus pods are capped at the grant; a succeeded pod alone fills its slot.
    assert!(
        with_pods_scheduled(&admitted, &scheduling(0, 3), at(NOW))
            .is_some_and(|s| shown(&s).unwrap().0 == "True")
    );
    // Evicted: no observation; the eviction resets it with its reason and message.
    let cause = crate::admission::conditions::EvictionCause {
        by: crate::admission::conditions::EvictedBy::PodsReadyTimeout,
        message: "Exceeded the PodsReady timeout ns/w".into(),
    };
    let s = crate::admission::conditions::evicted(&unbound, &cause, at(NOW + 8_000)).unwrap();
    let (status, why, message, _) = shown(&s).unwrap();
    assert_eq!(
        (status.as_str(), why.as_str(), message.as_str()),
        ("False", "PodsReadyTimeout", "Exceeded the PodsReady timeout ns/w")
    );
    let mut evicted = unbound.clone();
    evicted.status = Some(s);
    assert_eq!(
        with_pods_scheduled(&evicted, &scheduling(1, 0), at(NOW + 9_000)),
        None
    );
    assert!(pods_ready::current_pods_scheduled(&evicted).is_none());
}
