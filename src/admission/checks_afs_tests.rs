//! Admission checks and admission fair sharing: the entry penalty settles when the checks admit.

use std::sync::Arc;

use super::checks_step_tests::*;
use super::checks_tests::*;
use super::conditions;
use super::sync::{Action, AdmissionState, Snapshot};
use crate::api::kueue::*;

/// `snapshot` with the ClusterQueue in UsageBasedAdmissionFairSharing mode.
pub(super) fn afs_snapshot(checks: Vec<Arc<AdmissionCheck>>, wls: Vec<Workload>) -> Snapshot {
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
pub(super) fn afs_reserved_waiting_for_its_check(check: &Arc<AdmissionCheck>) -> (AdmissionState, Workload) {
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

pub(super) fn lq_usage(st: &AdmissionState) -> crate::queue::admission_fair_sharing::LocalQueueUsage {
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
