//! Issue 47: what fails in the middle of an upgrade, as decision tables. A head that lost its Serve
//! apps gets its own config back (the active one keeps the old config); a broken new version keeps
//! `Ready` True while the active cluster serves, and says what fails, once, as a Warning event.

use std::collections::BTreeMap;

use super::conditions as cond;
use super::plan;
use super::plan::{Action, EventType, Plan};
use super::snapshot::*;
use super::tests::{cond_of, pending_mut, running_apps, serving, upgrading};

fn no_apps() -> ServeObservation {
    ServeObservation::Apps {
        apps: BTreeMap::new(),
        ready: false,
    }
}

fn restores(p: &Plan) -> Vec<(String, Option<i32>)> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::RestoreServeConfig {
                cluster,
                target_capacity,
            } => Some((cluster.clone(), *target_capacity)),
            _ => None,
        })
        .collect()
}

fn pushes(p: &Plan) -> Vec<String> {
    p.actions
        .iter()
        .filter_map(|a| match a {
            Action::PushServeConfig { cluster, .. } => Some(cluster.clone()),
            _ => None,
        })
        .collect()
}

fn incremental_options(max_surge: i32, step: i32, interval_secs: i64) -> IncrementalOptions {
    IncrementalOptions {
        max_surge,
        step,
        interval: jiff::SignedDuration::from_secs(interval_secs),
        gateway_class: "istio".into(),
        timer_only: false,
    }
}

/// A ready route of `rs-a` and `rs-b` giving `rs-b` `to_b` percent.
fn route_to_b(to_b: i32) -> TrafficView {
    TrafficView {
        gateway: "rs-gateway".into(),
        gateway_current: true,
        gateway_ready: true,
        route_exists: true,
        route_ready: true,
        route_current: true,
        backends: vec![("rs-a".into(), 100 - to_b), ("rs-b".into(), to_b)],
        route_shape_current: true,
        serve_services: ["rs-a".to_string(), "rs-b".to_string()].into(),
        problem: None,
    }
}

/// The upgrade of `upgrading()` with the pending cluster up and serving its new config.
fn upgrading_with_pending_up() -> Snapshot {
    let mut s = upgrading();
    s.desired.serve_config_hash = Some("cfg2".into());
    let b = pending_mut(&mut s, "rs-b");
    b.head_ready = true;
    b.served_config_hash = Some("cfg2".into());
    b.serve = running_apps("DEPLOYING", "");
    s
}

/// KubeRay `rayservice_controller_unit_test.go` `TestCheckIfNeedSubmitServeApplications`: a cluster
/// whose dashboard reports zero applications (a head restarted without GCS fault tolerance) is
/// submitted its config again. Beyond KubeRay (which then skips the active cluster during an upgrade,
/// #3423), the active cluster gets ITS OWN config, recorded on it, never the pending one's.
#[test]
fn an_active_head_that_lost_its_apps_mid_upgrade_gets_its_own_config_back() {
    let mut s = upgrading_with_pending_up();
    let a = pending_mut(&mut s, "rs-a");
    a.serve = no_apps();
    a.own_config_known = true;
    let p = plan(&s);
    assert_eq!(restores(&p), vec![("rs-a".to_string(), None)]);
    assert!(
        pushes(&p).is_empty(),
        "the new config must not reach the active cluster: {:?}",
        p.actions
    );
    assert!(
        p.events
            .iter()
            .any(|e| e.reason == "UpdatedServeApplications" && e.message.contains("rs-a"))
    );
}

/// The decision table of `restore_own_config`, on the active cluster of an upgrade.
#[test]
fn restore_table() {
    // (apps reported, own config on record, head ready, gated) -> restored
    let table = [
        (no_apps(), true, true, false, true),
        (no_apps(), false, true, false, false), // nothing on record: KubeRay's behaviour, nothing sent
        (no_apps(), true, false, false, false), // head not ready: its dashboard is not asked
        (no_apps(), true, true, true, false),   // gated: no pods
        (running_apps("RUNNING", ""), true, true, false, false),
        (
            ServeObservation::Unreachable("timeout".into()),
            true,
            true,
            false,
            false,
        ),
        (ServeObservation::NotQueried, true, true, false, false),
    ];
    for (serve, known, head_ready, gated, want) in table {
        let mut s = upgrading_with_pending_up();
        let a = pending_mut(&mut s, "rs-a");
        a.serve = serve.clone();
        a.own_config_known = known;
        a.head_ready = head_ready;
        a.gated = gated;
        let restored = !restores(&plan(&s)).is_empty();
        assert_eq!(
            restored, want,
            "{serve:?} known={known} head_ready={head_ready} gated={gated}"
        );
    }
}

/// With no upgrade the spec's config is the active cluster's own: it is pushed as before, once.
#[test]
fn without_an_upgrade_the_spec_config_is_pushed_not_restored() {
    let mut s = serving();
    let a = pending_mut(&mut s, "rs-a");
    a.serve = no_apps();
    a.own_config_known = true;
    let p = plan(&s);
    assert_eq!(pushes(&p), vec!["rs-a".to_string()]);
    assert!(restores(&p).is_empty());
}

/// The pending cluster that lost its apps gets the spec's config (its own), not a restore.
#[test]
fn a_pending_head_that_lost_its_apps_gets_the_spec_config() {
    let mut s = upgrading_with_pending_up();
    let b = pending_mut(&mut s, "rs-b");
    b.serve = no_apps();
    b.own_config_known = true;
    let p = plan(&s);
    assert_eq!(pushes(&p), vec!["rs-b".to_string()]);
    assert!(restores(&p).is_empty());
}

/// Incremental upgrades: the restored config carries the capacity the active cluster stands at.
#[test]
fn an_incremental_active_gets_its_config_back_at_its_capacity() {
    let mut s = upgrading_with_pending_up();
    s.strategy = UpgradeStrategy::NewClusterWithIncrementalUpgrade;
    s.incremental = Some((incremental_options(50, 25, 5), route_to_b(25)));
    s.status.active_traffic = TrafficStatus {
        target_capacity: Some(75),
        traffic: Some(75),
        last_migrated: None,
    };
    s.status.pending_traffic = TrafficStatus {
        target_capacity: Some(50),
        traffic: Some(25),
        last_migrated: None,
    };
    let a = pending_mut(&mut s, "rs-a");
    a.serve = no_apps();
    a.own_config_known = true;
    let p = plan(&s);
    assert_eq!(restores(&p), vec![("rs-a".to_string(), Some(75))]);
    assert!(!pushes(&p).contains(&"rs-a".to_string()));
}

/// KubeRay `calculateConditions`: Ready is True iff numServeEndpoints > 0. A new version failing to
/// deploy is said in Ready's message and in UpgradeInProgress, with one Warning event per failed
/// application when it fails (not again while the stored status already shows it).
#[test]
fn a_failing_new_version_warns_once_and_leaves_ready_true() {
    let mut s = upgrading_with_pending_up();
    pending_mut(&mut s, "rs-b").serve =
        running_apps("DEPLOY_FAILED", "Traceback\nImportError: no module named foo\n");
    let p = plan(&s);
    assert_eq!(cond_of(&p, cond::READY).0, "True");
    let upgrade = cond_of(&p, cond::UPGRADE_IN_PROGRESS).2;
    assert!(
        upgrade.contains("rs-b: application app DEPLOY_FAILED: ImportError: no module named foo"),
        "{upgrade}"
    );
    let warnings: Vec<_> = p
        .events
        .iter()
        .filter(|e| e.type_ == EventType::Warning)
        .collect();
    assert_eq!(warnings.len(), 1, "{:?}", p.events);
    assert_eq!(warnings[0].reason, cond::SERVE_DEPLOY_FAILED);
    assert!(warnings[0].message.contains("ImportError"));

    s.status.failed_apps.insert(("rs-b".into(), "app".into()));
    let again = plan(&s);
    assert!(
        again.events.iter().all(|e| e.type_ != EventType::Warning),
        "{:?}",
        again.events
    );
}

/// With nothing serving, Ready is False and says why (unchanged).
#[test]
fn with_no_endpoint_a_failure_makes_ready_false() {
    let mut s = upgrading_with_pending_up();
    s.serve_endpoints = 0;
    s.status.conditions = vec![super::tests::cond_false(
        cond::READY,
        cond::ZERO_SERVE_ENDPOINTS,
        "2026-11-22T04:00:00Z",
    )];
    pending_mut(&mut s, "rs-b").serve = running_apps("DEPLOY_FAILED", "boom");
    let (status, reason, message) = cond_of(&plan(&s), cond::READY);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", cond::ZERO_SERVE_ENDPOINTS)
    );
    assert!(message.contains("boom"));
}

/// A pending cluster whose head crash-loops: the RayService's upgrade condition says so (the
/// RayCluster's `status.reason`), and the active cluster keeps serving with Ready True.
#[test]
fn a_crash_looping_pending_head_is_named_in_the_upgrade_condition() {
    let mut s = upgrading();
    pending_mut(&mut s, "rs-b").head_failing = Some(
        "CrashLoopBackOff: head pod rs-b-head-x failed (3 in a row); the next head pod is created at T"
            .into(),
    );
    let p = plan(&s);
    assert_eq!(cond_of(&p, cond::READY).0, "True");
    let upgrade = cond_of(&p, cond::UPGRADE_IN_PROGRESS).2;
    assert!(
        upgrade.contains("rs-b: CrashLoopBackOff: head pod rs-b-head-x failed (3 in a row)"),
        "{upgrade}"
    );
}

/// Issue 63: a pending cluster whose head pod cannot be created (its ServiceAccount is missing) says so
/// on the RayCluster (`ReplicaFailure=True/FailedCreateHeadPod`, as KubeRay's RayCluster controller);
/// the RayService names that failure in `UpgradeInProgress` with a Warning event, as it does for a
/// crash-looping head, instead of only saying the cluster "is prepared" while it holds the surge.
#[test]
fn a_pending_cluster_that_cannot_create_its_head_is_named_in_the_upgrade_condition() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    let why = "pods \"rs-b-head\" is forbidden: error looking up service account default/ray-sa: serviceaccount \"ray-sa\" not found";
    let mut rc = crate::api::ray::RayCluster::new("rs-b", Default::default());
    rc.status = Some(crate::api::ray::RayClusterStatus {
        conditions: Some(vec![Condition {
            type_: "ReplicaFailure".into(),
            status: "True".into(),
            reason: "FailedCreateHeadPod".into(),
            message: why.into(),
            last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
            observed_generation: None,
        }]),
        ..Default::default()
    });
    let view = super::observe::child_view(&rc, &[], ServeObservation::NotQueried);
    let said = format!("FailedCreateHeadPod: {why}");
    assert_eq!(view.head_failing.as_deref(), Some(said.as_str()));

    let mut s = upgrading();
    pending_mut(&mut s, "rs-b").head_failing = view.head_failing;
    let p = plan(&s);
    assert_eq!(cond_of(&p, cond::READY).0, "True", "the active keeps serving");
    let upgrade = cond_of(&p, cond::UPGRADE_IN_PROGRESS).2;
    assert!(upgrade.contains(&format!("rs-b: {said}")), "{upgrade}");
    let warned: Vec<_> = p
        .events
        .iter()
        .filter(|e| e.reason == "FailedCreateHeadPod")
        .collect();
    assert_eq!(warned.len(), 1, "{:?}", p.events);
    assert_eq!(warned[0].type_, EventType::Warning);
}

/// The RayService announces each head failure of its clusters once: a Warning event when the stored
/// upgrade condition does not mention it yet, none once it does.
#[test]
fn a_head_failure_is_announced_on_the_rayservice_once() {
    let mut s = upgrading();
    let why = "CrashLoopBackOff: head pod rs-b-head-x failed (2 in a row); the next head pod is created at T";
    pending_mut(&mut s, "rs-b").head_failing = Some(why.into());
    let p = plan(&s);
    let warned: Vec<_> = p.events.iter().filter(|e| e.reason == "HeadPodBackOff").collect();
    assert_eq!(warned.len(), 1, "{:?}", p.events);
    assert_eq!(warned[0].type_, EventType::Warning);
    assert!(
        warned[0]
            .message
            .starts_with("rs-b: CrashLoopBackOff: head pod rs-b-head-x failed (2 in a row)")
    );

    let written = p
        .status
        .as_ref()
        .unwrap()
        .condition(cond::UPGRADE_IN_PROGRESS)
        .unwrap()
        .message
        .clone();
    let mut prior = super::tests::cond_true(
        cond::UPGRADE_IN_PROGRESS,
        cond::BOTH_ACTIVE_PENDING_CLUSTERS_EXIST,
    );
    prior.message = written;
    s.status.conditions.push(prior);
    assert!(
        plan(&s).events.iter().all(|e| e.reason != "HeadPodBackOff"),
        "announced twice"
    );
    // The next failure (3 in a row) is new.
    pending_mut(&mut s, "rs-b").head_failing = Some(why.replace("(2 in a row)", "(3 in a row)"));
    assert!(plan(&s).events.iter().any(|e| e.reason == "HeadPodBackOff"));
}

/// The upgrade deadline (issue 47 item 4): a pending cluster admitted longer ago than the deadline,
/// not yet switched to, is dropped with a Warning event; its spec is recorded as failed, and the
/// active cluster keeps the Services.
#[test]
fn a_pending_cluster_past_the_upgrade_deadline_is_dropped_and_recorded() {
    let mut s = upgrading();
    s.upgrade_deadline = Some(jiff::SignedDuration::from_mins(10));
    pending_mut(&mut s, "rs-b").running_since = Some(super::tests::ts("2026-11-22T04:55:00Z"));
    let p = plan(&s);
    assert_eq!(
        super::tests::names(&p),
        (Some("rs-a".into()), Some("rs-b".into())),
        "5 of 10 minutes: kept"
    );
    assert!(p.events.iter().all(|e| e.type_ != EventType::Warning));

    pending_mut(&mut s, "rs-b").running_since = Some(super::tests::ts("2026-11-22T04:50:00Z"));
    let p = plan(&s);
    assert_eq!(super::tests::names(&p), (Some("rs-a".into()), None));
    assert!(
        p.actions
            .contains(&Action::RecordFailedUpgrade { hash: "B".into() }),
        "{:?}",
        p.actions
    );
    let warning = p
        .events
        .iter()
        .find(|e| e.reason == "UpgradeDeadlineExceeded")
        .expect("a Warning event");
    assert_eq!(warning.type_, EventType::Warning);
    assert!(
        warning.message.contains("rs-b") && warning.message.contains("600s"),
        "{}",
        warning.message
    );
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a, Action::PointServices { .. })),
        "the Services stay on rs-a"
    );
    assert!(
        cond_of(&p, cond::UPGRADE_IN_PROGRESS)
            .2
            .contains("upgrade deadline")
    );
    assert_eq!(cond_of(&p, cond::READY).0, "True");
}

/// No deadline (KubeRay's behaviour), a cluster still gated (its wait for quota does not count), or
/// one the Services already point at (the commit point passed): nothing is dropped.
#[test]
fn the_upgrade_deadline_spares_gated_switched_and_unbounded_upgrades() {
    let long_ago = Some(super::tests::ts("2026-11-22T01:00:00Z"));
    let mut unbounded = upgrading();
    pending_mut(&mut unbounded, "rs-b").running_since = long_ago;
    let mut gated = upgrading();
    gated.upgrade_deadline = Some(jiff::SignedDuration::from_mins(10));
    pending_mut(&mut gated, "rs-b").gated = true;
    let mut switched = upgrading();
    switched.upgrade_deadline = Some(jiff::SignedDuration::from_mins(10));
    pending_mut(&mut switched, "rs-b").running_since = long_ago;
    switched.serve_service = Some("rs-b".into());
    for (name, s) in [("unbounded", unbounded), ("gated", gated), ("switched", switched)] {
        let p = plan(&s);
        assert!(
            !p.actions
                .iter()
                .any(|a| matches!(a, Action::RecordFailedUpgrade { .. })),
            "{name}: {:?}",
            p.actions
        );
        assert!(
            p.events.iter().all(|e| e.reason != "UpgradeDeadlineExceeded"),
            "{name}"
        );
    }
}

/// After the drop: the failed spec is not tried again (no new pending cluster, the status says why
/// and how to retry), the dropped cluster is deleted at once, and a changed spec upgrades again.
#[test]
fn a_dropped_spec_is_not_retried_until_it_changes() {
    let mut s = upgrading();
    s.status.pending = None;
    s.failed_upgrade = Some("B".into());
    s.deletion_schedule
        .insert("rs-b".into(), super::tests::ts("2026-11-22T06:00:00Z"));
    let p = plan(&s);
    assert_eq!(super::tests::names(&p), (Some("rs-a".into()), None));
    assert!(
        p.actions.contains(&Action::DeleteCluster { name: "rs-b".into() }),
        "{:?}",
        p.actions
    );
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a, Action::CreateCluster { .. }))
    );
    let note = cond_of(&p, cond::UPGRADE_IN_PROGRESS).2;
    assert!(note.contains("quotagate.io/failed-upgrade"), "{note}");

    s.desired = super::tests::desired("C");
    let p = plan(&s);
    assert_eq!(
        super::tests::names(&p),
        (Some("rs-a".into()), Some("rs-fresh".into())),
        "a new spec upgrades"
    );
}

/// `upgrading()` as an incremental upgrade whose route gives the pending cluster `moved` percent.
fn incremental_upgrading(moved: i32) -> Snapshot {
    let mut s = upgrading();
    s.strategy = UpgradeStrategy::NewClusterWithIncrementalUpgrade;
    s.status.pending_traffic = TrafficStatus {
        target_capacity: Some(moved),
        traffic: Some(moved),
        last_migrated: None,
    };
    s.status.active_traffic = TrafficStatus {
        target_capacity: Some(100),
        traffic: Some(100 - moved),
        last_migrated: None,
    };
    s.incremental = Some((incremental_options(100, 20, 1), route_to_b(moved)));
    s.upgrade_deadline = Some(jiff::SignedDuration::from_mins(10));
    pending_mut(&mut s, "rs-b").running_since = Some(super::tests::ts("2026-11-22T01:00:00Z"));
    s
}

/// Incremental: past the deadline, a pending cluster nothing moved to yet is dropped; once traffic
/// moved, the upgrade is past dropping (reverting the spec rolls it back).
#[test]
fn the_incremental_deadline_drops_only_before_anything_moved() {
    let p = plan(&incremental_upgrading(0));
    assert!(
        p.actions
            .contains(&Action::RecordFailedUpgrade { hash: "B".into() }),
        "{:?}",
        p.actions
    );
    let p = plan(&incremental_upgrading(20));
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a, Action::RecordFailedUpgrade { .. })),
        "{:?}",
        p.actions
    );
}
