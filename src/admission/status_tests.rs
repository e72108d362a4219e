//! Status transitions of a Workload (admitted, pending, cleared) and of ClusterQueues and Cohorts.

use std::sync::Arc;

use super::conditions;
use super::sync::{Action, AdmissionState};
use super::tests::*;
use crate::api::kueue::{ClusterQueue, Workload};

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

/// Kueue `pkg/scheduler/scheduler.go` `requeueAndUpdate`: `UnsetQuotaReservationWithCondition` is
/// true whenever the `QuotaReserved=False` message changes, and the scheduler then writes the status
/// and records a `Pending` event. A workload asking for more than its queue can ever hold keeps its
/// reason when the quota is raised but not enough, and its message follows the new maximum; an
/// unchanged message is not written again.
#[test]
fn a_pending_message_follows_a_raised_quota_while_its_reason_stays() {
    let exceeds = |actions: &[Action]| match actions {
        [Action::Pending { reason, message, .. }] if reason == "ExceedsMaxQuota" => message.clone(),
        other => panic!("expected one ExceedsMaxQuota pending write: {other:?}"),
    };
    let big = wl("big", "4", "1");
    let mut st = AdmissionState::new();
    let first = exceeds(&st.step(&snapshot(vec![cq("cq", "3")], &["default"], vec![big.clone()]), 0));
    assert!(first.contains("maximum capacity (3)"), "{first}");
    // The API shows that message.
    let mut shown = (*big).clone();
    shown.status = conditions::pending(&big, "ExceedsMaxQuota", &first, t(0));
    shown.metadata.resource_version = Some("2".into());
    let shown = Arc::new(shown);
    let mut raised = (*cq("cq", "3500m")).clone();
    raised.metadata.resource_version = Some("2".into());
    let raised = Arc::new(raised);
    let snap = snapshot(vec![raised.clone()], &["default"], vec![shown.clone()]);
    let second = exceeds(&st.step(&snap, 1000));
    assert!(second.contains("maximum capacity (3500m)"), "{second}");
    let written = conditions::pending(&shown, "ExceedsMaxQuota", &second, t(1)).expect("rewritten");
    assert_eq!(written.condition("QuotaReserved").unwrap().message, second);
    // Once the API shows the new message, nothing more is written.
    let mut now_shown = (*shown).clone();
    now_shown.status = Some(written);
    now_shown.metadata.resource_version = Some("3".into());
    let snap = snapshot(vec![raised], &["default"], vec![Arc::new(now_shown.clone())]);
    let actions = st.step(&snap, 2000);
    assert!(actions.is_empty(), "{actions:?}");
    assert!(conditions::pending(&now_shown, "ExceedsMaxQuota", &second, t(2)).is_none());
}
