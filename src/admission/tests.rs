//! Table-style tests of the pure parts: the sync step over snapshots, and the status transitions.

use std::sync::Arc;

use super::conditions;
use super::sync::{Action, AdmissionState, Snapshot};
use crate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Workload};
use crate::queue::PendingReason;

fn cq(name: &str, cpu: &str) -> Arc<ClusterQueue> {
    let mut q = ClusterQueue::build(name)
        .flavor("default", [("cpu", cpu)])
        .build();
    q.metadata.resource_version = Some("1".into());
    Arc::new(q)
}

fn wl(name: &str, cpu: &str, rv: &str) -> Arc<Workload> {
    let mut w = Workload::build(name, "default")
        .queue("lq")
        .podset("main", 1, [("cpu", cpu)])
        .build();
    w.metadata.resource_version = Some(rv.into());
    Arc::new(w)
}

fn snapshot(cqs: Vec<Arc<ClusterQueue>>, flavors: &[&str], wls: Vec<Arc<Workload>>) -> Snapshot {
    Snapshot {
        cluster_queues: cqs,
        flavors: flavors
            .iter()
            .map(|f| Arc::new(ResourceFlavor::build(f).build()))
            .collect(),
        local_queues: vec![Arc::new(
            LocalQueue::build("lq", "default").cluster_queue("cq").build(),
        )],
        workloads: wls,
        ..Default::default()
    }
}

#[test]
fn cluster_queue_with_missing_flavor_steps_without_admitting() {
    let mut st = AdmissionState::new();
    let actions = st.step(&snapshot(vec![cq("cq", "4")], &[], vec![]), 0);
    assert!(actions.is_empty(), "{actions:?}");
    let actions = st.step(&snapshot(vec![cq("cq", "4")], &[], vec![wl("a", "1", "1")]), 0);
    // Kueue's scheduler: an inactive ClusterQueue leaves its workloads Suspended, "ClusterQueue
    // cq is inactive"; why (the missing flavor) is on the ClusterQueue's Active condition.
    assert!(
        matches!(&actions[..], [Action::Pending { reason, message, .. }]
            if reason == "Suspended" && message == "ClusterQueue cq is inactive"),
        "{actions:?}"
    );
}

fn admission(cq: &str) -> crate::api::kueue::Admission {
    crate::api::kueue::Admission {
        cluster_queue: cq.into(),
        pod_set_assignments: vec![],
    }
}

fn t(s: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_800_000_000 + s).unwrap()
}

#[test]
fn admitted_sets_reservation_and_ends_a_previous_eviction() {
    let w = wl("a", "1", "1");
    let cause = conditions::EvictionCause {
        by: conditions::EvictedBy::Preempted(crate::queue::PreemptedReason::InClusterQueue),
        message: "m".into(),
    };
    let mut evicted = (*w).clone();
    evicted.status = conditions::evicted(&w, &cause, t(0));
    let s = conditions::admitted(&evicted, admission("cq"), t(5));
    let got: Vec<(&str, &str, &str)> = s
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("Evicted", "False", "QuotaReserved"),
            ("Preempted", "False", "QuotaReserved"),
            ("QuotaReserved", "True", "QuotaReserved"),
            ("Admitted", "True", "Admitted")
        ]
    );
    assert_eq!(s.admission.unwrap().cluster_queue, "cq");
}

/// Kueue `pkg/scheduler/scheduler_test.go` expectations for a workload left pending (e.g.
/// "partial admission single variable pod set, preempt first"): `Admitted=False` reason
/// `NoReservation` "The workload has no reservation" beside `QuotaReserved=False`, and
/// `status.resourceRequests` with each podset's total (count times a pod's requests).
#[test]
fn pending_writes_no_reservation_and_resource_requests() {
    let w = Workload::build("a", "default")
        .queue("lq")
        .podset("one", 20, [("cpu", "250m"), ("example.com/gpu", "1")])
        .build();
    let s = conditions::pending(&w, "WaitingForQuota", "short", t(0)).unwrap();
    let admitted = s.condition("Admitted").unwrap();
    assert_eq!(
        (
            admitted.status.as_str(),
            admitted.reason.as_str(),
            admitted.message.as_str()
        ),
        ("False", "NoReservation", "The workload has no reservation")
    );
    assert_eq!(s.condition("QuotaReserved").unwrap().reason, "WaitingForQuota");
    assert_eq!(s.resource_requests.len(), 1);
    let rr = &s.resource_requests[0];
    assert_eq!(rr.name, "one");
    let got: Vec<(String, String)> = rr
        .resources
        .iter()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("cpu".to_string(), "5".to_string()),
            ("example.com/gpu".to_string(), "20".to_string())
        ]
    );
    // Written once: the same pending state again is no write.
    let mut again = w.clone();
    again.status = Some(s);
    assert!(conditions::pending(&again, "WaitingForQuota", "short", t(5)).is_none());
}

#[test]
fn pending_is_written_only_when_what_it_says_changes_in_substance() {
    let w = wl("a", "1", "1");
    let first = conditions::pending(&w, "WaitingForQuota", "cpu short by 1", t(0)).unwrap();
    let mut again = (*w).clone();
    again.status = Some(first.clone());
    assert!(conditions::pending(&again, "WaitingForQuota", "cpu short by 1", t(9)).is_none());
    // Only the amount moved: not rewritten (the backlog would rewrite every pending workload per cycle).
    assert!(conditions::pending(&again, "WaitingForQuota", "cpu short by 2", t(9)).is_none());
    let changed = conditions::pending(&again, "WaitingForQuota", "memory short by 2", t(9)).unwrap();
    // Same status: the transition time stays.
    assert_eq!(
        changed.conditions[0].last_transition_time,
        first.conditions[0].last_transition_time
    );
    assert!(conditions::pending(&again, "Inadmissible", "cpu short by 1", t(9)).is_some());
}

#[test]
fn clearing_a_reservation_requeues_with_the_eviction_reason() {
    let w = wl("a", "1", "1");
    let mut admitted = (*w).clone();
    admitted.status = Some(conditions::admitted(&w, admission("cq"), t(0)));
    assert!(
        conditions::clear_reservation(&w, t(1)).is_none(),
        "nothing reserved, nothing to clear"
    );
    let cause = conditions::EvictionCause {
        by: conditions::EvictedBy::ClusterQueueStopped,
        message: "The ClusterQueue cq is stopped".into(),
    };
    admitted.status = conditions::evicted(&admitted, &cause, t(1));
    let s = conditions::clear_reservation(&admitted, t(2)).unwrap();
    assert!(s.admission.is_none());
    let requeued = s.condition("Requeued").unwrap();
    assert_eq!(
        (requeued.status.as_str(), requeued.reason.as_str()),
        ("False", "ClusterQueueStopped"),
        "parked until the ClusterQueue restarts"
    );
    assert_eq!(s.condition("QuotaReserved").unwrap().status, "False");
    assert_eq!(s.condition("Admitted").unwrap().reason, "NoReservation");
}

#[test]
fn cluster_queue_active_condition_reasons() {
    use super::queue_status::cluster_queue_active;
    use crate::api::kueue::StopPolicy;
    let known: std::collections::BTreeSet<String> = ["default".to_string()].into();
    let none = std::collections::BTreeSet::new();
    let stopped = ClusterQueue::build("cq")
        .flavor("default", [("cpu", "1")])
        .stop_policy(StopPolicy::Hold)
        .build();
    // The queue, the flavors that exist, and (active, reason, message).
    type Case<'a> = (
        ClusterQueue,
        &'a std::collections::BTreeSet<String>,
        (bool, &'a str, &'a str),
    );
    let cases: Vec<Case> = vec![
        (
            (*cq("cq", "1")).clone(),
            &known,
            (true, "Ready", "Can admit new workloads"),
        ),
        (
            (*cq("cq", "1")).clone(),
            &none,
            (
                false,
                "FlavorNotFound",
                "Can't admit new workloads: references missing ResourceFlavor(s): default.",
            ),
        ),
        (
            stopped.clone(),
            &known,
            (false, "Stopped", "Can't admit new workloads: is stopped."),
        ),
        (
            stopped,
            &none,
            (
                false,
                "Stopped",
                "Can't admit new workloads: is stopped, references missing ResourceFlavor(s): default.",
            ),
        ),
    ];
    for (q, flavors, want) in cases {
        let (ok, reason, msg) = cluster_queue_active(&q, flavors, &Default::default(), None);
        assert_eq!((ok, reason.as_str(), msg.as_str()), want);
    }
}

#[test]
fn step_admits_then_waits_for_the_api_before_releasing() {
    let mut st = AdmissionState::new();
    let a = wl("a", "3", "1");
    let snap = snapshot(vec![cq("cq", "4")], &["default"], vec![a.clone()]);
    let actions = st.step(&snap, 0);
    assert!(
        matches!(&actions[..], [Action::Admit { key, .. }] if key.name == "a"),
        "{actions:?}"
    );
    // The cache has not caught up: the assumed admission still holds the quota.
    let b = wl("b", "2", "1");
    let snap = snapshot(vec![cq("cq", "4")], &["default"], vec![a.clone(), b.clone()]);
    let actions = st.step(&snap, 1);
    assert!(
        matches!(&actions[..], [Action::Pending { key, reason, .. }] if key.name == "b" && reason == "WaitingForQuota"),
        "{actions:?}"
    );
    // The write failed: forgetting frees the quota and both queue again; only one fits.
    st.forget(&super::sync::key_of(&a));
    let actions = st.step(&snap, 2);
    let admitted: Vec<&str> = actions
        .iter()
        .filter_map(|x| {
            if let Action::Admit { key, .. } = x {
                Some(key.name.as_str())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(admitted.len(), 1, "{actions:?}");
}

/// A workload of 3 CPU already holding quota in `cq`, as the API shows it after an admission.
fn reserved_3_cpu(name: &str) -> Workload {
    let mut a = (*wl(name, "3", "1")).clone();
    let assignment = crate::api::kueue::PodSetAssignment {
        name: "main".into(),
        flavors: [("cpu".to_string(), "default".to_string())].into(),
        resource_usage: [(
            "cpu".to_string(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("3".into()),
        )]
        .into(),
        count: Some(1),
        ..Default::default()
    };
    let adm = crate::api::kueue::Admission {
        cluster_queue: "cq".into(),
        pod_set_assignments: vec![assignment],
    };
    a.status = Some(conditions::admitted(&a, adm, t(0)));
    a
}

#[test]
fn step_records_admissions_found_in_the_api_after_a_restart() {
    let mut st = AdmissionState::new();
    let a = reserved_3_cpu("a");
    let b = wl("b", "2", "1");
    let actions = st.step(
        &snapshot(vec![cq("cq", "4")], &["default"], vec![Arc::new(a), b]),
        0,
    );
    assert!(
        matches!(&actions[..], [Action::Pending { key, .. }] if key.name == "b"),
        "no second admission after a restart: {actions:?}"
    );
}

/// Kueue's cache drops a workload on its delete event, not when its deletion starts: while the API still
/// shows it reserved (its finalizer not yet removed), its quota is not admitted to another. Found by
/// `quotagate chaos` seed 46 (a RayService deleted while another's upgrade waited for its quota).
#[test]
fn a_workload_being_deleted_holds_its_quota_until_it_is_gone() {
    use crate::api::kueue::constants::RESOURCE_IN_USE_FINALIZER;
    let mut st = AdmissionState::new();
    let mut a = reserved_3_cpu("a");
    let b = wl("b", "2", "1");
    let actions = st.step(
        &snapshot(
            vec![cq("cq", "4")],
            &["default"],
            vec![Arc::new(a.clone()), b.clone()],
        ),
        0,
    );
    assert!(
        matches!(&actions[..], [Action::Pending { key, .. }] if key.name == "b"),
        "{actions:?}"
    );
    // Its deletion starts: the finalizer goes, and the quota stays held.
    a.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t(1)));
    a.metadata.finalizers = Some(vec![RESOURCE_IN_USE_FINALIZER.into()]);
    a.metadata.resource_version = Some("2".into());
    let actions = st.step(
        &snapshot(vec![cq("cq", "4")], &["default"], vec![Arc::new(a), b.clone()]),
        1,
    );
    assert!(
        actions
            .iter()
            .any(|x| matches!(x, Action::RemoveFinalizer { key } if key.name == "a")),
        "{actions:?}"
    );
    assert!(
        !actions.iter().any(|x| matches!(x, Action::Admit { .. })),
        "admitted into quota still shown reserved: {actions:?}"
    );
    // Gone from the API: now b fits.
    let actions = st.step(&snapshot(vec![cq("cq", "4")], &["default"], vec![b]), 2);
    assert!(
        actions
            .iter()
            .any(|x| matches!(x, Action::Admit { key, .. } if key.name == "b")),
        "{actions:?}"
    );
}

#[test]
fn scaled_down_needs_an_elastic_workload_asking_for_fewer_pods() {
    use crate::api::kueue::constants::label;
    let admitted = |elastic: bool, admitted_count: i32, want: i32| {
        let mut b = Workload::build("e", "default")
            .queue("lq")
            .podset("main", admitted_count, [("cpu", "1")])
            .reserve_quota("cq", "default");
        if elastic {
            b = b.annotation(label::ELASTIC_JOB, "true");
        }
        let mut w = b.build();
        w.spec.pod_sets[0].count = Some(want);
        w
    };
    let cases = [
        ("elastic, 3 -> 1", admitted(true, 3, 1), true),
        ("elastic, unchanged", admitted(true, 3, 3), false),
        ("elastic, grown (needs a slice)", admitted(true, 3, 4), false),
        ("not elastic", admitted(false, 3, 1), false),
        (
            "not admitted",
            Workload::build("p", "default")
                .annotation(label::ELASTIC_JOB, "true")
                .podset("main", 1, [("cpu", "1")])
                .build(),
            false,
        ),
    ];
    for (name, w, want) in cases {
        assert_eq!(super::slices::scaled_down(&w), want, "{name}");
    }
}

#[test]
fn step_shrinks_an_elastic_workload_in_place_and_admits_into_the_freed_quota() {
    use crate::api::kueue::constants::label;
    let mut big = Workload::build("elastic", "default")
        .annotation(label::ELASTIC_JOB, "true")
        .queue("lq")
        .podset("main", 3, [("cpu", "1")])
        .reserve_quota("cq", "default")
        .admitted()
        .build();
    big.metadata.resource_version = Some("1".into());
    let mut st = AdmissionState::new();
    let waiting = wl("waiting", "3", "1");
    let actions = st.step(
        &snapshot(
            vec![cq("cq", "4")],
            &["default"],
            vec![Arc::new(big.clone()), waiting.clone()],
        ),
        0,
    );
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Admit { .. })),
        "3 of 4 cpu in use, 3 more do not fit: {actions:?}"
    );
    big.spec.pod_sets[0].count = Some(1);
    big.metadata.resource_version = Some("2".into());
    let actions = st.step(
        &snapshot(vec![cq("cq", "4")], &["default"], vec![Arc::new(big), waiting]),
        1,
    );
    let psa = st
        .core
        .admission(&crate::queue::WorkloadKey::new("default", "elastic"))
        .map(|a| a.pod_set_assignments[0].clone())
        .expect("still admitted");
    assert_eq!(psa.count, 1);
    assert_eq!(psa.flavors.get("cpu").map(String::as_str), Some("default"));
    // Milli-cpu: 1 cpu left to the shrunk workload + 3 cpu admitted into the freed quota.
    assert_eq!(
        st.core.cq_usage("cq").values().next().map(|a| a.to_string()),
        Some("4000".into())
    );
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Admit { key, .. } if key.name == "waiting")),
        "the freed quota admits the waiting workload: {actions:?}"
    );
}

#[test]
fn backoff_doubles_from_the_base_and_stops_at_the_cap() {
    use super::backoff::RequeueBackoff;
    let kueue = RequeueBackoff::default();
    let fast = RequeueBackoff {
        base_seconds: 1,
        max_seconds: 5,
    };
    let cases = [
        ("first requeue waits the base", kueue, 1, 0.0, 60_000),
        ("second doubles", kueue, 2, 0.0, 120_000),
        ("sixth", kueue, 6, 0.0, 1_920_000),
        ("seventh is capped at an hour", kueue, 7, 0.0, 3_600_000),
        ("huge counts stay capped", kueue, 1000, 0.0, 3_600_000),
        ("jitter adds at most 1/10000", kueue, 1, 0.999_999, 60_005),
        ("configurable base", fast, 1, 0.0, 1_000),
        ("configurable cap", fast, 4, 0.0, 5_000),
    ];
    for (name, b, count, jitter, want) in cases {
        assert_eq!(b.delay_ms(count, jitter), want, "{name}");
    }
    let s1 = kueue.next_state(None, t(0), 0.0);
    assert_eq!(s1.count, Some(1));
    assert_eq!(s1.requeue_at.as_ref().map(|x| x.0), Some(t(60)));
    let s2 = kueue.next_state(Some(&s1), t(100), 0.0);
    assert_eq!((s2.count, s2.requeue_at.map(|x| x.0)), (Some(2), Some(t(220))));
    assert!(conditions::EvictedBy::PodsReadyTimeout.backs_off());
    for r in [
        conditions::EvictedBy::Preempted(crate::queue::PreemptedReason::InClusterQueue),
        conditions::EvictedBy::ClusterQueueStopped,
        conditions::EvictedBy::LocalQueueStopped,
        conditions::EvictedBy::Deactivated,
    ] {
        assert!(!r.backs_off(), "{r:?} is requeued without backoff");
    }
}

fn in_backoff(until: jiff::Timestamp) -> Workload {
    let mut w = (*wl("b", "1", "1")).clone();
    let s = w.status.get_or_insert_with(Default::default);
    s.requeue_state = Some(crate::api::kueue::RequeueState {
        count: Some(1),
        requeue_at: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(until)),
    });
    s.conditions.push(crate::api::kueue::builders::condition(
        "Requeued",
        false,
        "PodsReadyTimeout",
        "Exceeded the PodsReady timeout",
    ));
    w
}

#[test]
fn a_workload_in_backoff_waits_for_requeue_at_then_is_released() {
    let mut st = AdmissionState::new();
    let w = in_backoff(t(10));
    let snap = |w: Workload| snapshot(vec![cq("cq", "4")], &["default"], vec![Arc::new(w)]);
    let before = st.step(&snap(w.clone()), t(9).as_millisecond());
    assert!(before.is_empty(), "kept out of the queue: {before:?}");
    let after = st.step(&snap(w.clone()), t(10).as_millisecond());
    assert!(
        matches!(&after[..], [Action::BackoffFinished { key }] if key.name == "b"),
        "{after:?}"
    );
    let status = super::backoff::finished(&w, t(10)).unwrap();
    let rq = status.condition("Requeued").unwrap();
    assert_eq!(
        (rq.status.as_str(), rq.reason.as_str()),
        ("True", "BackoffFinished")
    );
    let state = status.requeue_state.clone().unwrap();
    assert_eq!(
        (state.count, state.requeue_at),
        (Some(1), None),
        "count kept, requeueAt cleared"
    );
    assert!(
        super::backoff::finished(&w, t(9)).is_none(),
        "not before requeueAt"
    );
    let mut released = w;
    released.status = Some(status);
    released.metadata.resource_version = Some("2".into());
    let admitted = st.step(&snap(released), t(11).as_millisecond());
    assert!(
        matches!(&admitted[..], [Action::Admit { key, .. }] if key.name == "b"),
        "{admitted:?}"
    );
}

#[test]
fn a_parked_workload_is_released_when_its_cause_is_gone() {
    let parked = |status: bool, why: &str| {
        let mut w = (*wl("p", "1", "1")).clone();
        w.status.get_or_insert_with(Default::default).conditions.push(
            crate::api::kueue::builders::condition("Requeued", status, why, "m"),
        );
        w
    };
    let cases = [
        (
            "CQ restarted",
            parked(false, "ClusterQueueStopped"),
            false,
            Some("ClusterQueueRestarted"),
        ),
        (
            "CQ still stopped",
            parked(false, "ClusterQueueStopped"),
            true,
            None,
        ),
        (
            "LQ restarted",
            parked(false, "LocalQueueStopped"),
            false,
            Some("LocalQueueRestarted"),
        ),
        (
            "reactivated",
            parked(false, "Deactivated"),
            false,
            Some("Reactivated"),
        ),
        (
            "backoff over",
            parked(false, "PodsReadyTimeout"),
            false,
            Some("BackoffFinished"),
        ),
        ("backoff still running", in_backoff(t(10)), false, None),
        ("already requeued", parked(true, "Preempted"), false, None),
        ("unknown reason left alone", parked(false, "Other"), false, None),
        ("never evicted", (*wl("n", "1", "1")).clone(), false, None),
    ];
    for (name, w, cq_stopped, want) in cases {
        assert_eq!(
            super::backoff::release(&w, cq_stopped).map(|r| r.0),
            want,
            "{name}"
        );
    }
}

#[test]
fn only_preemption_requeues_at_once_when_the_reservation_is_cleared() {
    let w = wl("a", "1", "1");
    let mut admitted = (*w).clone();
    admitted.status = Some(conditions::admitted(&w, admission("cq"), t(0)));
    use conditions::EvictedBy;
    for (by, why, want) in [
        (
            EvictedBy::Preempted(crate::queue::PreemptedReason::InClusterQueue),
            "Preempted",
            "True",
        ),
        (EvictedBy::ClusterQueueStopped, "ClusterQueueStopped", "False"),
        (EvictedBy::LocalQueueStopped, "LocalQueueStopped", "False"),
        (EvictedBy::Deactivated, "Deactivated", "False"),
        (EvictedBy::PodsReadyTimeout, "PodsReadyTimeout", "False"),
    ] {
        let mut e = admitted.clone();
        let cause = conditions::EvictionCause {
            by,
            message: "m".into(),
        };
        e.status = conditions::evicted(&e, &cause, t(1));
        let s = conditions::clear_reservation(&e, t(2)).unwrap();
        let rq = s.condition("Requeued").unwrap();
        assert_eq!((rq.status.as_str(), rq.reason.as_str()), (want, why), "{why}");
        // Kueue (workload_controller.go, resolveGranularUnadmittedQuotaReservedCondition): a
        // deactivated workload's QuotaReserved=False says Deactivated.
        let qr = s.condition("QuotaReserved").unwrap();
        let want_qr = if why == "Deactivated" {
            "Deactivated"
        } else {
            "Pending"
        };
        assert_eq!(qr.reason, want_qr, "{why}");
    }
}

#[test]
fn cohort_status_clears_a_stale_share_and_writes_it_with_fair_sharing() {
    use crate::api::kueue::{Cohort, CohortStatus, FairSharingStatus};
    let with = |status: Option<CohortStatus>| {
        let mut c = Cohort::build("co").build();
        c.status = status;
        c
    };
    let stale = Some(CohortStatus {
        fair_sharing: Some(FairSharingStatus { weighted_share: 3 }),
    });
    let cases = [
        ("no status", with(None), None),
        ("empty status", with(Some(CohortStatus::default())), None),
        ("stale weighted share", with(stale), Some(CohortStatus::default())),
    ];
    for (name, c, want) in cases {
        assert_eq!(super::queue_status::cohort(&c, None), want, "{name}");
    }
    // Fair sharing on: Kueue's WeightedShare rounding, +Inf as MaxInt64, no write when unchanged.
    let share = |w: i64| {
        Some(CohortStatus {
            fair_sharing: Some(FairSharingStatus { weighted_share: w }),
        })
    };
    assert_eq!(super::queue_status::cohort(&with(None), Some(2.5)), share(3));
    assert_eq!(
        super::queue_status::cohort(&with(None), Some(f64::INFINITY)),
        share(i64::MAX)
    );
    assert_eq!(super::queue_status::cohort(&with(share(3)), Some(2.1)), None);
}

/// Kueue's ClusterQueue controller namespace handler (a namespace whose labels change requeues its
/// inadmissible workloads): relabelling a namespace to match the namespaceSelector admits its
/// workloads without any change to the workloads themselves.
#[test]
fn relabelling_a_namespace_requeues_its_workloads() {
    let mut q = ClusterQueue::build("cq")
        .flavor("default", [("cpu", "4")])
        .namespace_selector(Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some([("team".to_string(), "a".to_string())].into()),
                ..Default::default()
            },
        ))
        .build();
    q.metadata.resource_version = Some("1".into());
    let mut snap = snapshot(vec![Arc::new(q)], &["default"], vec![wl("a", "1", "1")]);
    let mut st = AdmissionState::new();
    let actions = st.step(&snap, 0);
    assert!(
        matches!(&actions[..], [Action::Pending { reason, .. }] if reason == "Misconfigured"),
        "{actions:?}"
    );
    snap.namespaces
        .insert("default".into(), [("team".into(), "a".into())].into());
    let actions = st.step(&snap, 1);
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Admit { key, .. } if key.name == "a")),
        "{actions:?}"
    );
}

#[test]
fn each_workload_is_classified_from_the_snapshot_alone() {
    use super::classify::{Class, View};
    use crate::api::kueue::constants::RESOURCE_IN_USE_FINALIZER;
    let mut deleted = (*wl("deleted", "1", "1")).clone();
    deleted.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t(0)));
    deleted.metadata.finalizers = Some(vec![RESOURCE_IN_USE_FINALIZER.into()]);
    let mut reserved = (*wl("reserved", "1", "1")).clone();
    reserved.status = Some(conditions::admitted(&reserved, admission("cq"), t(0)));
    let mut deactivated = reserved.clone();
    deactivated.metadata.name = Some("deactivated".into());
    deactivated.spec.active = Some(false);
    let mut no_queue = (*wl("no-queue", "1", "1")).clone();
    no_queue.spec.queue_name = None;
    let mut missing_queue = (*wl("missing-queue", "1", "1")).clone();
    missing_queue.spec.queue_name = Some("nope".into());
    let queued = (*wl("queued", "1", "1")).clone();
    let mut inactive = queued.clone();
    inactive.metadata.name = Some("inactive".into());
    inactive.spec.active = Some(false);
    let all = [
        deleted,
        reserved,
        deactivated,
        no_queue,
        missing_queue,
        queued,
        inactive,
    ];
    let snap = snapshot(
        vec![cq("cq", "4")],
        &["default"],
        all.iter().cloned().map(Arc::new).collect(),
    );
    let view = View::new(&snap);
    let got: Vec<Class> = all.iter().map(|w| view.classify(w, 0)).collect();
    let want = vec![
        Class::Gone {
            remove_finalizer: true,
        },
        Class::Reserved {
            evicted: false,
            owned: false,
            stop: None,
            rejected: None,
        },
        Class::Reserved {
            evicted: false,
            owned: false,
            stop: Some(conditions::EvictionCause {
                by: conditions::EvictedBy::Deactivated,
                message: "The workload is deactivated".into(),
            }),
            rejected: None,
        },
        // Kueue's `workload_controller_test.go`, "the queue is not defined in the workload".
        Class::Held {
            why: (PendingReason::Misconfigured, "LocalQueue  doesn't exist".into()),
        },
        Class::Held {
            why: (
                PendingReason::Misconfigured,
                "LocalQueue nope doesn't exist".into(),
            ),
        },
        Class::Queue {
            cluster_queue: "cq".into(),
        },
        // Kueue's workload controller: QuotaReserved=False, reason Deactivated.
        Class::Held {
            why: (PendingReason::Deactivated, "The workload is deactivated".into()),
        },
    ];
    assert_eq!(got, want);
}
