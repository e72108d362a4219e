//! Table-style tests of the pure parts: the sync step over snapshots, and the helpers the other
//! test files share (status transitions are in `status_tests.rs`, requeueing in `requeue_tests.rs`).

use std::sync::Arc;

use super::conditions;
use super::sync::{Action, AdmissionState, Snapshot};
use crate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Workload};
use crate::queue::PendingReason;

pub(super) fn cq(name: &str, cpu: &str) -> Arc<ClusterQueue> {
    let mut q = ClusterQueue::build(name)
        .flavor("default", [("cpu", cpu)])
        .build();
    q.metadata.resource_version = Some("1".into());
    Arc::new(q)
}

pub(super) fn wl(name: &str, cpu: &str, rv: &str) -> Arc<Workload> {
    let mut w = Workload::build(name, "default")
        .queue("lq")
        .podset("main", 1, [("cpu", cpu)])
        .build();
    w.metadata.resource_version = Some(rv.into());
    Arc::new(w)
}

pub(super) fn snapshot(cqs: Vec<Arc<ClusterQueue>>, flavors: &[&str], wls: Vec<Arc<Workload>>) -> Snapshot {
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

pub(super) fn admission(cq: &str) -> crate::api::kueue::Admission {
    crate::api::kueue::Admission {
        cluster_queue: cq.into(),
        pod_set_assignments: vec![],
    }
}

pub(super) fn t(s: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_800_000_000 + s).unwrap()
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
pub(super) fn reserved_3_cpu(name: &str) -> Workload {
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
