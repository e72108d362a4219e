//! Admission checks and workload slices: a replaced slice stays until its replacement passed its
//! checks, and the two are counted once meanwhile.

use super::checks;
use super::checks_step_tests::*;
use super::checks_tests::*;
use super::conditions;
use super::sync::{Action, AdmissionState};
use crate::api::kueue::*;

/// An admitted 2-pod slice `old` and its 3-pod replacement `new`, reserved on no queue yet, with
/// `check1` Pending.
fn old_and_scale_up() -> (Workload, Workload) {
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
    (old, new)
}

/// DESIGN I4/I6 with admission checks: a scale-up slice reserved on a queue with checks is not
/// admitted yet, so the slice it replaces stays (admitted, its pods covered) and is finished only
/// once the replacement is Admitted.
#[test]
fn a_replaced_slice_finishes_only_once_its_successor_passed_its_checks() {
    let check = admission_check("check1", "ctrl", true);
    let (old, mut new) = old_and_scale_up();
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

/// Issue 63 (found deleting a RayService while its new slice waited on an admission check): while
/// a replaced slice and its replacement are both being deleted, the replacement's reservation is
/// the chain's and the ClusterQueue counts it once (DESIGN I3, I6), as Kueue's cache holds one
/// workload per slice chain (`pkg/workloadslicing`: the replaced slice's usage is the new one's).
/// Counting the replaced slice again showed 7,500m reserved of 5,000m, borrowed with no cohort, and
/// two admitted workloads where one was.
#[test]
fn a_replaced_slice_being_deleted_is_not_counted_beside_its_replacement() {
    let check = admission_check("check1", "ctrl", true);
    let (mut old, mut new) = old_and_scale_up();
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
    // The reservation shows, its check Pending: the old slice stays, admitted.
    new.status = Some(conditions::admitted_with_checks(
        &new,
        crate::queue::convert::admission_api(admission),
        checks,
        t(0),
    ));
    new.metadata.resource_version = Some("2".into());
    st.step(
        &snapshot(vec![check.clone()], vec![old.clone(), new.clone()]),
        t(1).as_millisecond(),
    );
    let cpu = |st: &AdmissionState| {
        let s = st.core.cluster_queue_status("cq").expect("cq");
        let r = &s.flavors_reservation[0].resources[0];
        (s.reserving_workloads, r.total.0, r.borrowed.0)
    };
    assert_eq!(cpu(&st), (1, 3000, 0), "the replacement's 3 CPU, once");
    // Both are being deleted (their job is), the API still shows both reserved.
    let deleting = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t(2)));
    for w in [&mut old, &mut new] {
        w.metadata.deletion_timestamp = deleting.clone();
        w.metadata.finalizers = Some(vec![
            crate::api::kueue::constants::RESOURCE_IN_USE_FINALIZER.into(),
        ]);
        w.metadata.resource_version = Some("3".into());
    }
    st.step(&snapshot(vec![check], vec![old, new]), t(2).as_millisecond());
    assert_eq!(cpu(&st), (1, 3000, 0), "not 5 CPU of 4 by two workloads");
}

/// `old_and_scale_up`'s two Workloads owned (as controller) by jobs of the given UIDs.
fn owned_by(mut w: Workload, uid: &str) -> Workload {
    w.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "ray.io/v1".into(),
            kind: "RayCluster".into(),
            name: format!("job-{uid}"),
            uid: uid.into(),
            controller: Some(true),
            ..Default::default()
        },
    ]);
    w
}

/// Ours (hostile edits): a Workload naming another job's admitted slice in
/// `workload-slice-replacement-for` takes none of its quota and never finishes it. As a workload of
/// its own its 3 CPU do not fit beside the 2 the named slice holds (4 CPU of quota), so it waits,
/// and once something admits it anyway the named slice stays counted and running.
#[test]
fn a_replacement_naming_another_jobs_slice_is_a_workload_of_its_own() {
    let check = admission_check("check1", "ctrl", true);
    let (old, new) = old_and_scale_up();
    let old = owned_by(old, "job-a");
    let hostile = owned_by(new.clone(), "job-b");
    let mut st = AdmissionState::new();
    let actions = st.step(
        &snapshot(vec![check.clone()], vec![old.clone(), hostile]),
        t(0).as_millisecond(),
    );
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::Admit { .. } | Action::FinishSlice { .. })),
        "{actions:?}"
    );
    // The same slice from the same job replaces it (the quota of the two is counted once).
    let own = owned_by(new, "job-a");
    let mut st = AdmissionState::new();
    let actions = st.step(
        &snapshot(vec![check.clone()], vec![old.clone(), own]),
        t(0).as_millisecond(),
    );
    assert!(
        actions.iter().any(|a| matches!(a, Action::Admit { .. })),
        "{actions:?}"
    );
    // Admitted by someone else's hand: the named slice is not finished.
    let mut admitted = Workload::build("new", "default")
        .queue("lq")
        .podset("main", 1, [("cpu", "1")])
        .annotation(
            crate::api::kueue::constants::label::WORKLOAD_SLICE_REPLACEMENT_FOR,
            "default/old",
        )
        .reserve_quota("cq", "default")
        .admitted()
        .build();
    admitted.metadata.resource_version = Some("1".into());
    let admitted = owned_by(admitted, "job-b");
    let mut st = AdmissionState::new();
    let actions = st.step(&snapshot(vec![check], vec![old, admitted]), t(0).as_millisecond());
    assert!(
        !actions.iter().any(|a| matches!(a, Action::FinishSlice { .. })),
        "{actions:?}"
    );
}
