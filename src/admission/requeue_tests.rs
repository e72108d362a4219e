//! Requeueing: the backoff after a PodsReady timeout, and a parked workload released when its cause
//! is gone.

use std::sync::Arc;

use super::conditions;
use super::sync::{Action, AdmissionState};
use super::tests::*;
use crate::api::kueue::Workload;

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

pub(super) fn in_backoff(until: jiff::Timestamp) -> Workload {
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
