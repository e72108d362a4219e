//! Table tests of the RayService decisions: one snapshot in, the plan's actions, events and status out.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};

use super::conditions as cond;
use super::plan;
use super::plan::{Action, Plan};
use super::snapshot::*;

const V: &str = "v1.7.0";

pub(super) fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

pub(super) fn now() -> Timestamp {
    ts("2026-11-22T05:00:00Z")
}

pub(super) fn desired(hash: &str) -> DesiredCluster {
    DesiredCluster {
        hash: hash.into(),
        prefix_hashes: vec![format!("{hash}-g0"), format!("{hash}-g1")],
        serve_config_hash: Some("cfg1".into()),
    }
}

pub(super) fn base() -> Snapshot {
    Snapshot {
        now: now(),
        generation: 3,
        deleting: false,
        has_finalizer: true,
        managed_externally: false,
        invalid: None,
        suspend: false,
        strategy: UpgradeStrategy::NewCluster,
        deletion_delay: SignedDuration::from_secs(60),
        initializing_timeout: None,
        upgrade_deadline: None,
        failed_upgrade: None,
        exclude_head_from_serve: false,
        desired: desired("A"),
        status: PriorStatus::default(),
        deletion_schedule: BTreeMap::new(),
        clusters: vec![],
        head_service: None,
        serve_service: None,
        serve_endpoints: 0,
        admission: Admission::NotQueueManaged,
        incremental: None,
        fresh_name: "rs-fresh".into(),
        operator_version: V.into(),
    }
}

pub(super) fn running_apps(status: &str, message: &str) -> ServeObservation {
    let mut apps = BTreeMap::new();
    apps.insert(
        "app".to_string(),
        AppView {
            status: status.to_string().into(),
            message: message.into(),
            deployments: BTreeMap::new(),
        },
    );
    ServeObservation::Apps {
        ready: status == "RUNNING",
        apps,
    }
}

/// A healthy cluster built from spec hash `hash`, serving config `cfg1`.
pub(super) fn cluster(name: &str, hash: &str) -> ChildCluster {
    ChildCluster {
        name: name.into(),
        hash: Some(hash.into()),
        num_worker_groups: Some(2),
        operator_version: Some(V.into()),
        gated: false,
        head_ready: true,
        served_config_hash: Some("cfg1".into()),
        own_config_known: false,
        rejected_config: None,
        serve: running_apps("RUNNING", ""),
        head_serve_label: Some(true),
        proxy_healthy: Some(true),
        deleting: false,
        reported_capacity: None,
        head_failing: None,
        running_since: None,
    }
}

pub(super) fn cond_true(type_: &str, reason: &str) -> PriorCondition {
    PriorCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: reason.into(),
        message: String::new(),
        last_transition: ts("2026-11-22T04:00:00Z"),
    }
}

pub(super) fn cond_false(type_: &str, reason: &str, at: &str) -> PriorCondition {
    PriorCondition {
        type_: type_.into(),
        status: "False".into(),
        reason: reason.into(),
        message: String::new(),
        last_transition: ts(at),
    }
}

/// Steady state: active `rs-a` on spec A, Services on it, Ready.
pub(super) fn serving() -> Snapshot {
    let mut s = base();
    s.status.active = Some("rs-a".into());
    s.status.conditions = vec![cond_true(cond::READY, cond::NON_ZERO_SERVE_ENDPOINTS)];
    s.clusters = vec![cluster("rs-a", "A")];
    s.head_service = Some("rs-a".into());
    s.serve_service = Some("rs-a".into());
    s.serve_endpoints = 3;
    s
}

/// Mid-upgrade: active `rs-a` (spec A) serving, pending `rs-b` (spec B) exists, desired = B.
pub(super) fn upgrading() -> Snapshot {
    let mut s = serving();
    s.desired = desired("B");
    s.status.pending = Some("rs-b".into());
    let mut b = cluster("rs-b", "B");
    b.head_ready = false;
    b.serve = ServeObservation::NotQueried;
    b.served_config_hash = None;
    b.head_serve_label = Some(false);
    b.proxy_healthy = Some(false);
    s.clusters.push(b);
    s
}

pub(super) fn pending_mut<'a>(s: &'a mut Snapshot, name: &str) -> &'a mut ChildCluster {
    s.clusters.iter_mut().find(|c| c.name == name).unwrap()
}

pub(super) fn names(p: &Plan) -> (Option<String>, Option<String>) {
    let st = p.status.as_ref().expect("status planned");
    (
        st.active.as_ref().map(|a| a.cluster.clone()),
        st.pending.as_ref().map(|a| a.cluster.clone()),
    )
}

pub(super) fn cond_of(p: &Plan, type_: &str) -> (String, String, String) {
    let c = p
        .status
        .as_ref()
        .and_then(|s| s.condition(type_))
        .unwrap_or_else(|| panic!("no {type_} planned"));
    (c.status.to_string(), c.reason.to_string(), c.message.clone())
}

fn reasons(p: &Plan) -> Vec<&'static str> {
    p.events.iter().map(|e| e.reason).collect()
}

pub(super) fn touches(p: &Plan, cluster: &str) -> bool {
    p.actions.iter().any(|a| match a {
        Action::CreateCluster { name, .. }
        | Action::UpdateCluster { name }
        | Action::OpenGate { name }
        | Action::DeleteCluster { name } => name == cluster,
        Action::PushServeConfig { cluster: c, .. } | Action::SetHeadServeLabel { cluster: c, .. } => {
            c == cluster
        }
        _ => false,
    })
}

#[test]
fn first_pass_names_the_first_cluster_before_creating_it() {
    let mut s = base();
    s.has_finalizer = false;
    let p = plan(&s);
    assert_eq!(p.actions, vec![Action::AddFinalizer]);
    assert_eq!(names(&p), (None, Some("rs-fresh".into())));
    assert_eq!(cond_of(&p, cond::READY).1, cond::INITIALIZING);
    assert_eq!(
        cond_of(&p, cond::UPGRADE_IN_PROGRESS),
        (
            "False".into(),
            cond::INITIALIZING.into(),
            "no cluster has served yet".into()
        )
    );
    assert_eq!(reasons(&p), ["PreparingNewCluster"]);
    assert_eq!(p.requeue, Some(std::time::Duration::from_secs(2)));
}

#[test]
fn named_first_cluster_is_created_ungated_even_when_queue_managed() {
    for admission in [
        Admission::NotQueueManaged,
        Admission::QueueManaged {
            admitted: BTreeSet::new(),
            waiting: None,
            exposed: BTreeSet::new(),
        },
    ] {
        let mut s = base();
        s.status.pending = Some("rs-a".into());
        s.admission = admission;
        let p = plan(&s);
        assert_eq!(
            p.actions,
            vec![Action::CreateCluster {
                name: "rs-a".into(),
                gated: false,
                incremental: false
            }]
        );
        assert_eq!(names(&p), (None, Some("rs-a".into())));
    }
}

#[test]
fn first_cluster_progression_push_then_services_then_promotion() {
    // Head not ready: nothing to do but wait.
    let mut s = base();
    s.status.pending = Some("rs-a".into());
    let mut a = cluster("rs-a", "A");
    a.head_ready = false;
    a.serve = ServeObservation::NotQueried;
    a.served_config_hash = None;
    a.proxy_healthy = Some(false);
    a.head_serve_label = Some(false);
    s.clusters = vec![a];
    let p = plan(&s);
    assert!(p.actions.is_empty(), "{:?}", p.actions);

    // Head ready: push the config; its apps are not ready in the same pass.
    pending_mut(&mut s, "rs-a").head_ready = true;
    let p = plan(&s);
    assert_eq!(
        p.actions,
        vec![Action::PushServeConfig {
            cluster: "rs-a".into(),
            target_capacity: None
        }]
    );
    assert_eq!(names(&p), (None, Some("rs-a".into())));

    // Config stamped, apps RUNNING: create the Services and promote in the same pass.
    let c = pending_mut(&mut s, "rs-a");
    c.served_config_hash = Some("cfg1".into());
    c.serve = running_apps("RUNNING", "");
    c.proxy_healthy = Some(true);
    let p = plan(&s);
    assert_eq!(
        p.actions,
        vec![
            Action::PointServices {
                cluster: "rs-a".into()
            },
            Action::SetHeadServeLabel {
                cluster: "rs-a".into(),
                serving: true
            }
        ]
    );
    assert_eq!(names(&p), (Some("rs-a".into()), None));
    // The serve Service has no EndpointSlice yet: not Ready until one lists a ready endpoint.
    assert_eq!(
        cond_of(&p, cond::READY).1,
        cond::INITIALIZING,
        "no endpoints counted before the Service exists"
    );
    assert_eq!(p.status.as_ref().unwrap().num_serve_endpoints, 0);
    assert_eq!(reasons(&p), ["CreatedService"]);

    // Next pass: the Services exist and their slices list two ready pods.
    s.status.active = Some("rs-a".into());
    s.status.pending = None;
    s.head_service = Some("rs-a".into());
    s.serve_service = Some("rs-a".into());
    s.serve_endpoints = 2;
    pending_mut(&mut s, "rs-a").head_serve_label = Some(true);
    let p = plan(&s);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(
        cond_of(&p, cond::READY),
        (
            "True".into(),
            cond::NON_ZERO_SERVE_ENDPOINTS.into(),
            "2 serve endpoint(s) ready".into()
        )
    );
    assert_eq!(p.status.as_ref().unwrap().num_serve_endpoints, 2);
}

#[test]
fn steady_state_plans_no_writes() {
    let p = plan(&serving());
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert!(p.schedule.is_none());
    assert_eq!(names(&p), (Some("rs-a".into()), None));
    assert_eq!(
        cond_of(&p, cond::READY),
        (
            "True".into(),
            cond::NON_ZERO_SERVE_ENDPOINTS.into(),
            "3 serve endpoint(s) ready".into()
        )
    );
    assert_eq!(cond_of(&p, cond::UPGRADE_IN_PROGRESS).1, cond::NO_PENDING_CLUSTER);
}

#[test]
fn serve_config_only_change_is_pushed_in_place() {
    let mut s = serving();
    s.desired.serve_config_hash = Some("cfg2".into());
    let p = plan(&s);
    assert_eq!(
        p.actions,
        vec![Action::PushServeConfig {
            cluster: "rs-a".into(),
            target_capacity: None
        }]
    );
    assert_eq!(names(&p), (Some("rs-a".into()), None));
    // Services stay where they are, endpoints are still counted.
    assert_eq!(p.status.as_ref().unwrap().num_serve_endpoints, 3);
}

#[test]
fn appended_worker_groups_and_version_restamp_update_in_place() {
    let mut s = serving();
    s.desired = desired("A2");
    s.desired.prefix_hashes = vec!["x".into(), "y".into(), "A".into()]; // first 2 groups hash to A
    let p = plan(&s);
    assert_eq!(p.actions, vec![Action::UpdateCluster { name: "rs-a".into() }]);
    assert_eq!(names(&p), (Some("rs-a".into()), None));

    let mut s = serving();
    pending_mut(&mut s, "rs-a").operator_version = Some("v1.6.0".into());
    assert_eq!(
        plan(&s).actions,
        vec![Action::UpdateCluster { name: "rs-a".into() }]
    );
}

#[test]
fn cluster_change_prepares_a_pending_and_leaves_the_active_alone() {
    let mut s = serving();
    s.desired = desired("B");
    s.desired.serve_config_hash = Some("cfg2".into()); // also a new serve config: must not reach rs-a
    let p = plan(&s);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(names(&p), (Some("rs-a".into()), Some("rs-fresh".into())));
    assert_eq!(
        cond_of(&p, cond::UPGRADE_IN_PROGRESS).1,
        cond::BOTH_ACTIVE_PENDING_CLUSTERS_EXIST
    );
    assert_eq!(reasons(&p), ["PreparingNewCluster"]);
}

#[test]
fn strategy_none_ignores_cluster_changes_but_applies_serve_config() {
    let mut s = serving();
    s.strategy = UpgradeStrategy::None;
    s.desired = desired("B");
    s.desired.serve_config_hash = Some("cfg2".into());
    let p = plan(&s);
    assert_eq!(
        p.actions,
        vec![Action::PushServeConfig {
            cluster: "rs-a".into(),
            target_capacity: None
        }]
    );
    assert_eq!(names(&p), (Some("rs-a".into()), None));
    let (_, reason, message) = cond_of(&p, cond::UPGRADE_IN_PROGRESS);
    assert_eq!(reason, cond::NO_PENDING_CLUSTER);
    assert!(message.contains("upgradeStrategy.type is None"), "{message}");
}

#[test]
fn upgrade_waits_for_the_pending_without_touching_the_active() {
    let mut s = upgrading();
    s.desired.serve_config_hash = Some("cfg2".into());
    let p = plan(&s);
    assert!(!touches(&p, "rs-a"), "{:?}", p.actions);
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a, Action::PointServices { .. }))
    );
    assert_eq!(names(&p), (Some("rs-a".into()), Some("rs-b".into())));
    assert_eq!(cond_of(&p, cond::READY).0, "True");
}

#[test]
fn ready_pending_gets_the_services_and_is_promoted_then_old_is_deleted_after_the_delay() {
    let mut s = upgrading();
    let b = pending_mut(&mut s, "rs-b");
    b.head_ready = true;
    b.served_config_hash = Some("cfg1".into());
    b.serve = running_apps("RUNNING", "");
    b.proxy_healthy = Some(true);
    let p = plan(&s);
    assert_eq!(
        p.actions,
        vec![
            Action::PointServices {
                cluster: "rs-b".into()
            },
            Action::SetHeadServeLabel {
                cluster: "rs-b".into(),
                serving: true
            }
        ]
    );
    assert_eq!(names(&p), (Some("rs-b".into()), None));
    // Counted from the slices as they stand: the old cluster's until the endpoints follow the switch.
    assert_eq!(p.status.as_ref().unwrap().num_serve_endpoints, 3);
    assert_eq!(reasons(&p), ["UpdatedService", "PromotedPendingCluster"]);
    // The old active only gets its deadline now; no delete in the pass that un-names it.
    let deadline = now().checked_add(SignedDuration::from_secs(60)).unwrap();
    assert_eq!(p.schedule, Some(BTreeMap::from([("rs-a".to_string(), deadline)])));

    // Next pass after promotion, before the deadline: nothing; after it: delete.
    let mut next = serving();
    next.status.active = Some("rs-b".into());
    next.head_service = Some("rs-b".into());
    next.serve_service = Some("rs-b".into());
    next.desired = desired("B");
    next.clusters = vec![cluster("rs-a", "A"), cluster("rs-b", "B")];
    next.deletion_schedule = BTreeMap::from([("rs-a".to_string(), deadline)]);
    next.now = deadline.checked_sub(SignedDuration::from_secs(1)).unwrap();
    let p = plan(&next);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert!(p.schedule.is_none());
    next.now = deadline;
    let p = plan(&next);
    assert_eq!(p.actions, vec![Action::DeleteCluster { name: "rs-a".into() }]);
    assert_eq!(p.schedule, Some(BTreeMap::new()));
    assert_eq!(reasons(&p), ["DeletedRayCluster"]);
}

#[test]
fn dangling_cluster_without_a_deadline_gets_one_and_zero_delay_deletes_on_the_next_pass() {
    let mut s = serving();
    s.clusters.push(cluster("rs-old", "Z"));
    let p = plan(&s);
    assert!(p.actions.is_empty());
    assert_eq!(
        p.schedule.as_ref().and_then(|m| m.get("rs-old")).copied(),
        now().checked_add(SignedDuration::from_secs(60)).ok()
    );

    s.deletion_delay = SignedDuration::ZERO;
    let p = plan(&s);
    assert_eq!(
        p.actions,
        vec![Action::DeleteCluster {
            name: "rs-old".into()
        }]
    );
}

#[test]
fn another_change_while_pending_exists_replaces_the_pending() {
    let mut s = upgrading();
    s.desired = desired("C");
    let p = plan(&s);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(names(&p), (Some("rs-a".into()), Some("rs-fresh".into())));
    assert!(p.schedule.as_ref().is_some_and(|m| m.contains_key("rs-b")));
    assert!(p.events[0].message.contains("rs-b is replaced by rs-fresh"));
}

#[test]
fn reverting_to_the_active_spec_cancels_the_upgrade() {
    let mut s = upgrading();
    s.desired = desired("A");
    let p = plan(&s);
    assert_eq!(names(&p), (Some("rs-a".into()), None));
    assert_eq!(reasons(&p), ["UpgradeCancelled"]);
    assert!(p.schedule.as_ref().is_some_and(|m| m.contains_key("rs-b")));
    // Pending named but not created yet: cancelled too, nothing created.
    let mut s = upgrading();
    s.desired = desired("A");
    s.clusters.retain(|c| c.name != "rs-b");
    let p = plan(&s);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(names(&p), (Some("rs-a".into()), None));
}

#[test]
fn restart_mid_upgrade_resumes_without_a_second_pending() {
    // Everything the decision needs is in status: same plan whether or not the process restarted.
    let s = upgrading();
    let p = plan(&s);
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a, Action::CreateCluster { .. }))
    );
    assert!(!reasons(&p).contains(&"PreparingNewCluster"));
    // Pending named but the create was lost in the crash: created under the same name.
    let mut s = upgrading();
    s.clusters.retain(|c| c.name != "rs-b");
    let p = plan(&s);
    assert_eq!(
        p.actions,
        vec![Action::CreateCluster {
            name: "rs-b".into(),
            gated: false,
            incremental: false
        }]
    );
}

#[test]
fn services_already_on_pending_finish_the_promotion_and_never_swing_back() {
    let mut s = upgrading();
    s.head_service = Some("rs-b".into());
    s.serve_service = Some("rs-b".into());
    // The pending is momentarily not ready (e.g. a push this pass); still no switch back to rs-a.
    let p = plan(&s);
    assert!(
        !p.actions
            .iter()
            .any(|a| matches!(a, Action::PointServices { .. })),
        "{:?}",
        p.actions
    );
    assert_eq!(names(&p), (Some("rs-b".into()), None));
}

#[test]
fn queue_managed_pending_is_gated_until_admitted() {
    let mut s = upgrading();
    s.admission = Admission::QueueManaged {
        admitted: BTreeSet::new(),
        waiting: None,
        exposed: BTreeSet::new(),
    };
    s.clusters.retain(|c| c.name != "rs-b");
    let p = plan(&s);
    assert_eq!(
        p.actions,
        vec![Action::CreateCluster {
            name: "rs-b".into(),
            gated: true,
            incremental: false
        }]
    );

    let mut s = upgrading();
    s.admission = Admission::QueueManaged {
        admitted: BTreeSet::new(),
        waiting: None,
        exposed: BTreeSet::new(),
    };
    let b = pending_mut(&mut s, "rs-b");
    b.gated = true;
    b.head_ready = true; // even if something claims so, a gated cluster is never pushed to or switched to
    b.serve = running_apps("RUNNING", "");
    s.desired.serve_config_hash = Some("cfg2".into());
    let p = plan(&s);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert!(
        cond_of(&p, cond::UPGRADE_IN_PROGRESS)
            .2
            .contains("rs-b waits for quota admission")
    );

    s.admission = Admission::QueueManaged {
        admitted: BTreeSet::from(["rs-b".to_string()]),
        waiting: None,
        exposed: BTreeSet::new(),
    };
    let p = plan(&s);
    assert_eq!(p.actions, vec![Action::OpenGate { name: "rs-b".into() }]);
    assert!(!touches(&p, "rs-a"));
}

/// Chaos seed 223 (issue 45): the switch raced a preemption of the upgrade's growth, decided on a
/// slice that kept the serving cluster alone, and moved the traffic onto the cluster whose pods the
/// gate was removing. A ready pending cluster takes the traffic only once the admitted slice keeps
/// it (`rayservice::job::growth`); until then the active one keeps serving and the status says why.
#[test]
fn a_ready_pending_cluster_preemption_may_still_take_gets_no_traffic() {
    let ready_pending = |exposed: &[&str]| {
        let mut s = upgrading();
        s.admission = Admission::QueueManaged {
            admitted: BTreeSet::from(["rs-a".to_string(), "rs-b".to_string()]),
            waiting: None,
            exposed: exposed.iter().map(|n| n.to_string()).collect(),
        };
        let b = pending_mut(&mut s, "rs-b");
        b.head_ready = true;
        b.served_config_hash = Some("cfg1".into());
        b.serve = running_apps("RUNNING", "");
        b.proxy_healthy = Some(true);
        s
    };
    let switched = |p: &Plan| {
        p.actions
            .iter()
            .any(|a| matches!(a, Action::PointServices { .. }))
    };

    let p = plan(&ready_pending(&["rs-b"]));
    assert!(!switched(&p), "{:?}", p.actions);
    assert_eq!(
        names(&p),
        (Some("rs-a".into()), Some("rs-b".into())),
        "not promoted either"
    );
    let message = cond_of(&p, cond::UPGRADE_IN_PROGRESS).2;
    assert!(
        message.contains("traffic moves to it once its workload slice keeps it"),
        "{message}"
    );
    assert_eq!(
        cond_of(&p, cond::READY).0,
        "True",
        "the active cluster keeps serving"
    );

    // Once the slice keeps it, the same pass switches and promotes, as without a queue.
    let p = plan(&ready_pending(&[]));
    assert!(switched(&p), "{:?}", p.actions);
    assert_eq!(names(&p), (Some("rs-b".into()), None));
}

#[test]
fn broken_serve_config_on_the_pending_keeps_the_active_serving() {
    let mut s = upgrading();
    let b = pending_mut(&mut s, "rs-b");
    b.head_ready = true;
    b.served_config_hash = Some("cfg1".into());
    b.head_serve_label = Some(true);
    b.proxy_healthy = Some(true);
    b.serve = running_apps(
        "DEPLOY_FAILED",
        "Traceback (most recent call last):\n  File x\nImportError: no module named foo\n",
    );
    let p = plan(&s);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(names(&p), (Some("rs-a".into()), Some("rs-b".into())));
    // KubeRay's rule (issue 47): Ready stays True while endpoints serve; the failure is said in
    // its message and in the upgrade condition.
    let (status, reason, message) = cond_of(&p, cond::READY);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", cond::NON_ZERO_SERVE_ENDPOINTS)
    );
    assert!(
        message.ends_with("rs-b: application app DEPLOY_FAILED: ImportError: no module named foo"),
        "{message}"
    );
    assert!(
        cond_of(&p, cond::UPGRADE_IN_PROGRESS)
            .2
            .contains("DEPLOY_FAILED: ImportError")
    );
    assert_eq!(p.status.as_ref().unwrap().num_serve_endpoints, 3);
    let pending_apps = p
        .status
        .as_ref()
        .unwrap()
        .pending
        .as_ref()
        .unwrap()
        .applications
        .as_ref()
        .unwrap();
    assert_eq!(pending_apps["app"].status.as_str(), "DEPLOY_FAILED");
}

#[test]
fn broken_serve_config_on_the_active_reports_and_keeps_serving() {
    let mut s = serving();
    s.desired.serve_config_hash = Some("cfg2".into());
    let a = pending_mut(&mut s, "rs-a");
    a.served_config_hash = Some("cfg2".into());
    a.serve = running_apps("DEPLOY_FAILED", "ValueError: bad option");
    let p = plan(&s);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(cond_of(&p, cond::READY).1, cond::NON_ZERO_SERVE_ENDPOINTS);
    assert!(
        cond_of(&p, cond::UPGRADE_IN_PROGRESS)
            .2
            .contains("ValueError: bad option")
    );
    assert_eq!(p.status.as_ref().unwrap().num_serve_endpoints, 3);
}

#[test]
fn config_rejected_by_ray_is_reported_and_not_resent_until_it_changes() {
    let mut s = serving();
    s.desired.serve_config_hash = Some("cfg2".into());
    pending_mut(&mut s, "rs-a").rejected_config =
        Some(("cfg2".into(), "applications.0.import_path Field required".into()));
    let p = plan(&s);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    let (status, reason, message) = cond_of(&p, cond::READY);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", cond::NON_ZERO_SERVE_ENDPOINTS)
    );
    assert!(message.contains("rs-a: Ray rejected the Serve config: applications.0.import_path"));
    // Even a cluster reporting no apps (first deploy refused) is not re-sent the same config.
    pending_mut(&mut s, "rs-a").serve = ServeObservation::Apps {
        apps: BTreeMap::new(),
        ready: false,
    };
    assert!(plan(&s).actions.is_empty());
    // A corrected config goes out again.
    s.desired.serve_config_hash = Some("cfg3".into());
    assert_eq!(
        plan(&s).actions,
        vec![Action::PushServeConfig {
            cluster: "rs-a".into(),
            target_capacity: None
        }]
    );
}

#[test]
fn broken_first_config_stays_initializing_with_the_error() {
    let mut s = base();
    s.status.pending = Some("rs-a".into());
    let mut a = cluster("rs-a", "A");
    a.serve = running_apps("DEPLOY_FAILED", "boom");
    s.clusters = vec![a];
    let p = plan(&s);
    let (status, reason, message) = cond_of(&p, cond::READY);
    assert_eq!((status.as_str(), reason.as_str()), ("False", cond::INITIALIZING));
    assert!(message.contains("boom"));
}

#[test]
fn zero_apps_after_head_restart_repushes_and_unreachable_dashboard_does_not() {
    let mut s = serving();
    pending_mut(&mut s, "rs-a").serve = ServeObservation::Apps {
        apps: BTreeMap::new(),
        ready: false,
    };
    assert_eq!(
        plan(&s).actions,
        vec![Action::PushServeConfig {
            cluster: "rs-a".into(),
            target_capacity: None
        }]
    );

    let mut s = serving();
    s.desired.serve_config_hash = Some("cfg2".into());
    pending_mut(&mut s, "rs-a").serve = ServeObservation::Unreachable("timeout after 2s".into());
    let p = plan(&s);
    assert!(p.actions.is_empty());
    assert!(
        cond_of(&p, cond::UPGRADE_IN_PROGRESS)
            .2
            .contains("timeout after 2s")
    );
    assert!(
        p.status.unwrap().active.unwrap().applications.is_none(),
        "stored app statuses are kept"
    );
}

#[test]
fn vanished_active_gets_a_replacement_and_endpoints_drop_to_zero() {
    let mut s = serving();
    s.clusters.clear();
    // Its pods went with it, so the serve Service's slices list nothing.
    s.serve_endpoints = 0;
    let p = plan(&s);
    assert_eq!(names(&p), (Some("rs-a".into()), Some("rs-fresh".into())));
    assert_eq!(cond_of(&p, cond::READY).1, cond::ZERO_SERVE_ENDPOINTS);
}

#[test]
fn head_serve_label_follows_exclusion() {
    let mut s = serving();
    s.exclude_head_from_serve = true;
    assert_eq!(
        plan(&s).actions,
        vec![Action::SetHeadServeLabel {
            cluster: "rs-a".into(),
            serving: false
        }]
    );
}

#[test]
fn head_serve_label_follows_the_proxy_health() {
    // (proxy answer, current label, excluded) -> wanted label change
    let cases = [
        (Some(false), Some(true), false, Some(false)),
        (Some(true), Some(false), false, Some(true)),
        (Some(true), Some(true), false, None),
        (None, Some(true), false, None),
        (None, Some(true), true, Some(false)),
        (Some(true), Some(false), true, None),
        (Some(true), None, false, None),
    ];
    for (healthy, current, excluded, want) in cases {
        let mut s = serving();
        s.exclude_head_from_serve = excluded;
        let a = pending_mut(&mut s, "rs-a");
        a.proxy_healthy = healthy;
        a.head_serve_label = current;
        let got = plan(&s).actions.into_iter().find_map(|a| match a {
            Action::SetHeadServeLabel { serving, .. } => Some(serving),
            _ => None,
        });
        assert_eq!(got, want, "{healthy:?} {current:?} excluded={excluded}");
    }
}

#[test]
fn endpoints_come_from_the_serve_service_slices() {
    let mut s = serving();
    s.serve_endpoints = 0;
    let p = plan(&s);
    assert_eq!(
        cond_of(&p, cond::READY),
        (
            "False".into(),
            cond::ZERO_SERVE_ENDPOINTS.into(),
            "no serve endpoint is ready".into()
        )
    );
    // Slices of a Service that is gone are not counted.
    let mut s = serving();
    s.serve_service = None;
    s.head_service = None;
    assert_eq!(plan(&s).status.unwrap().num_serve_endpoints, 0);
}

#[test]
fn suspend_state_machine() {
    // 1. Requested: stage the commit point only.
    let mut s = upgrading();
    s.suspend = true;
    let p = plan(&s);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(names(&p), (None, None));
    assert_eq!(cond_of(&p, cond::SUSPENDING).0, "True");
    assert_eq!(cond_of(&p, cond::READY).1, cond::SUSPEND_IN_PROGRESS);
    assert_eq!(p.status.as_ref().unwrap().num_serve_endpoints, 0);

    // 2. Suspending: delete everything, even though suspend flipped back to false meanwhile.
    s.suspend = false;
    s.status = PriorStatus {
        conditions: vec![cond_true(cond::SUSPENDING, cond::SUSPEND_REQUESTED)],
        ..Default::default()
    };
    s.deletion_schedule = BTreeMap::from([("rs-x".to_string(), now())]);
    let p = plan(&s);
    assert_eq!(
        p.actions,
        vec![
            Action::DeleteCluster { name: "rs-a".into() },
            Action::DeleteCluster { name: "rs-b".into() },
            Action::DeleteServices
        ]
    );
    // KubeRay's Case 3 while resources remain: Suspending=True/SuspendInProgress, once.
    assert_eq!(
        cond_of(&p, cond::SUSPENDING),
        (
            "True".into(),
            cond::SUSPEND_IN_PROGRESS.into(),
            "Waiting for all Kubernetes resources owned by this RayService to be deleted.".into()
        )
    );
    assert_eq!(p.schedule, Some(BTreeMap::new()));
    let mut again = s.clone();
    again.status.conditions = vec![cond_true(cond::SUSPENDING, cond::SUSPEND_IN_PROGRESS)];
    assert!(plan(&again).status.is_none(), "no rewrite while waiting");

    // 3. Nothing left: Suspended.
    s.clusters.clear();
    s.head_service = None;
    s.serve_service = None;
    s.deletion_schedule.clear();
    let p = plan(&s);
    assert!(p.actions.is_empty());
    assert_eq!(cond_of(&p, cond::SUSPENDING).0, "False");
    assert_eq!(
        cond_of(&p, cond::SUSPENDED),
        (
            "True".into(),
            cond::SUSPEND_COMPLETE.into(),
            "All owned resources have been deleted.".into()
        )
    );
    // KubeRay: Ready, UpgradeInProgress and RollbackInProgress all end False/SuspendComplete.
    for type_ in [cond::READY, cond::UPGRADE_IN_PROGRESS, cond::ROLLBACK_IN_PROGRESS] {
        let (status, reason, _) = cond_of(&p, type_);
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", cond::SUSPEND_COMPLETE),
            "{type_}"
        );
    }

    // 4. Suspended and still suspend=true: nothing, no polling.
    s.suspend = true;
    s.status.conditions = vec![cond_true(cond::SUSPENDED, cond::SUSPEND_COMPLETE)];
    let p = plan(&s);
    assert_eq!(p, Plan::default());

    // 5. Resume: Suspended=False, Ready re-armed with a fresh transition time.
    s.suspend = false;
    let p = plan(&s);
    assert_eq!(cond_of(&p, cond::SUSPENDED).1, cond::RAY_SERVICE_RESUMED);
    let ready = p.status.as_ref().unwrap().condition(cond::READY).unwrap();
    assert_eq!((ready.reason, ready.refresh), (cond::INITIALIZING, true));
    assert!(p.actions.is_empty());
}

#[test]
fn created_suspended_goes_straight_to_suspended() {
    let mut s = base();
    s.suspend = true;
    let p = plan(&s);
    assert_eq!(cond_of(&p, cond::SUSPENDING).0, "True");
    s.status.conditions = vec![cond_true(cond::SUSPENDING, cond::SUSPEND_REQUESTED)];
    let p = plan(&s);
    assert!(p.actions.is_empty());
    assert_eq!(cond_of(&p, cond::SUSPENDED).0, "True");
}

#[test]
fn initializing_timeout_is_terminal() {
    let mut s = base();
    s.initializing_timeout = Some(SignedDuration::from_mins(30));
    s.status.pending = Some("rs-a".into());
    s.status.conditions = vec![cond_false(
        cond::READY,
        cond::INITIALIZING,
        "2026-11-22T04:29:59Z",
    )];
    let mut a = cluster("rs-a", "A");
    a.serve = running_apps("DEPLOYING", "");
    s.clusters = vec![a];
    let p = plan(&s);
    assert_eq!(cond_of(&p, cond::READY).1, cond::INITIALIZING_TIMEOUT);
    // Source: KubeRay rayservice_controller (issue 15 item 3): its message, then our numbers.
    assert!(
        cond_of(&p, cond::READY)
            .2
            .starts_with("RayService failed to become ready within the configured timeout"),
        "{:?}",
        cond_of(&p, cond::READY)
    );
    assert_eq!(names(&p), (None, None));
    assert!(
        p.actions.is_empty(),
        "the just-unnamed cluster is only scheduled: {:?}",
        p.actions
    );
    assert!(p.schedule.as_ref().is_some_and(|m| m.contains_key("rs-a")));

    // Not yet timed out one second earlier.
    s.status.conditions[0].last_transition = ts("2026-11-22T04:30:01Z");
    assert_eq!(cond_of(&plan(&s), cond::READY).1, cond::INITIALIZING);

    // Terminal: afterwards only reaping, never a new cluster.
    let mut t = base();
    t.status.conditions = vec![cond_false(
        cond::READY,
        cond::INITIALIZING_TIMEOUT,
        "2026-11-22T04:40:00Z",
    )];
    t.clusters = vec![cluster("rs-a", "A")];
    t.deletion_schedule = BTreeMap::from([("rs-a".to_string(), now())]);
    let p = plan(&t);
    assert_eq!(p.actions, vec![Action::DeleteCluster { name: "rs-a".into() }]);
    assert!(p.status.is_none());
}

#[test]
fn invalid_spec_creates_and_deletes_nothing() {
    for mut s in [base(), upgrading()] {
        s.invalid = Some("spec.rayClusterConfig.headGroupSpec.template: Required value".into());
        s.has_finalizer = false;
        s.clusters.push(cluster("rs-dangling", "Z"));
        s.deletion_schedule = BTreeMap::from([("rs-dangling".to_string(), ts("2026-01-01T00:00:00Z"))]);
        let p = plan(&s);
        assert!(p.actions.is_empty(), "{:?}", p.actions);
        assert!(p.schedule.is_none());
        assert_eq!(p.requeue, None);
        let (status, reason, message) = cond_of(&p, cond::READY);
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", cond::VALIDATION_FAILED)
        );
        assert!(message.contains("headGroupSpec"));
        assert_eq!(reasons(&p), ["InvalidRayServiceSpec"]);
    }
}

/// Source: KubeRay `rayservice_controller.go` Reconcile (`validateRayService`: metadata first, event
/// reason `InvalidRayServiceMetadata`, `Ready=False/ValidationFailed` with the error's message) and
/// `test/e2erayservice/rayservice_validation_test.go` ("RayService name too long with 48 characters").
#[test]
fn a_too_long_name_is_reported_as_kuberay_reports_it_and_creates_nothing() {
    let msg = crate::api::ray::validation::ray_service_name_too_long(&"a".repeat(48)).unwrap();
    let mut s = base();
    s.invalid = Some(msg.clone());
    s.has_finalizer = false;
    let p = plan(&s);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    let (status, reason, message) = cond_of(&p, cond::READY);
    assert_eq!(
        (status.as_str(), reason.as_str(), message.as_str()),
        ("False", cond::VALIDATION_FAILED, msg.as_str())
    );
    assert_eq!(reasons(&p), ["InvalidRayServiceMetadata"]);
}

#[test]
fn deletion_deletes_children_now_then_releases_the_finalizer() {
    let mut s = upgrading();
    s.deleting = true;
    let p = plan(&s);
    assert_eq!(
        p.actions,
        vec![
            Action::DeleteCluster { name: "rs-a".into() },
            Action::DeleteCluster { name: "rs-b".into() }
        ]
    );
    s.clusters.iter_mut().for_each(|c| c.deleting = true);
    assert!(plan(&s).actions.is_empty());
    s.clusters.clear();
    assert_eq!(plan(&s).actions, vec![Action::RemoveFinalizer]);
}

#[test]
fn managed_elsewhere_is_left_alone() {
    let mut s = upgrading();
    s.managed_externally = true;
    assert_eq!(plan(&s), Plan::default());
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn arb_cluster(name: &'static str) -> impl Strategy<Value = Option<ChildCluster>> {
        (
            any::<bool>(),
            prop::sample::select(vec!["A", "B", "C"]),
            any::<bool>(),
            any::<bool>(),
            0..3u8,
            any::<bool>(),
        )
            .prop_map(move |(exists, hash, gated, head_ready, serve, served)| {
                exists.then(|| {
                    let mut c = cluster(name, hash);
                    c.gated = gated;
                    c.head_ready = head_ready;
                    c.serve = match serve {
                        0 => ServeObservation::NotQueried,
                        1 => running_apps("RUNNING", ""),
                        _ => running_apps("DEPLOY_FAILED", "x"),
                    };
                    if !served {
                        c.served_config_hash = None;
                    }
                    c
                })
            })
    }

    prop_compose! {
        fn arb_snapshot()(
            a in arb_cluster("rs-a"), b in arb_cluster("rs-b"), old in arb_cluster("rs-old"),
            named_a in any::<bool>(), named_b in any::<bool>(),
            svc in prop::sample::select(vec![None, Some("rs-a"), Some("rs-b"), Some("rs-old")]),
            want in prop::sample::select(vec!["A", "B", "C"]),
            none_strategy in any::<bool>(), managed in any::<bool>(), admitted in any::<bool>(),
            sched_past in any::<bool>(),
        ) -> Snapshot {
            let mut s = base();
            s.clusters = [a, b, old].into_iter().flatten().collect();
            s.status.active = named_a.then(|| "rs-a".to_string());
            s.status.pending = named_b.then(|| "rs-b".to_string());
            s.head_service = svc.map(str::to_string);
            s.serve_service = svc.map(str::to_string);
            s.desired = desired(want);
            if none_strategy { s.strategy = UpgradeStrategy::None; }
            if managed {
                let admitted = if admitted { BTreeSet::from(["rs-b".to_string()]) } else { BTreeSet::new() };
                s.admission = Admission::QueueManaged { admitted, waiting: None, exposed: BTreeSet::new() };
            }
            if sched_past {
                for c in ["rs-a", "rs-b", "rs-old"] { s.deletion_schedule.insert(c.to_string(), ts("2026-01-01T00:00:00Z")); }
            }
            s
        }
    }

    proptest! {
        /// A cluster named in the stored status or in the planned status is never deleted.
        #[test]
        fn named_clusters_are_never_deleted(s in arb_snapshot()) {
            let p = plan(&s);
            let (a, b) = p.status.as_ref().map(|st| (st.active.as_ref().map(|x| x.cluster.clone()), st.pending.as_ref().map(|x| x.cluster.clone()))).unwrap_or_default();
            for act in &p.actions {
                if let Action::DeleteCluster { name } = act {
                    prop_assert!(Some(name) != s.status.active.as_ref() && Some(name) != s.status.pending.as_ref(), "deleted named {name}");
                    prop_assert!(Some(name) != a.as_ref() && Some(name) != b.as_ref());
                }
            }
        }

        /// I4: while a pending cluster exists and traffic is not on it, the active is never written to.
        #[test]
        fn waiting_upgrade_never_touches_the_active(mut s in arb_snapshot()) {
            s.status.active = Some("rs-a".into());
            s.status.pending = Some("rs-b".into());
            prop_assume!(s.serve_service != s.status.pending);
            let p = plan(&s);
            let touched = p.actions.iter().any(|a| matches!(a,
                Action::UpdateCluster { name } | Action::DeleteCluster { name } if name == "rs-a")
                || matches!(a, Action::PushServeConfig { cluster, .. } if cluster == "rs-a"));
            prop_assert!(!touched, "{:?}", p.actions);
        }

        /// I2 at the decision level: a not-yet-admitted cluster of a queue-managed service is never
        /// un-gated, and traffic never moves to a gated cluster.
        #[test]
        fn gate_opens_only_on_admission(s in arb_snapshot()) {
            let p = plan(&s);
            for act in &p.actions {
                match act {
                    Action::OpenGate { name } => prop_assert!(s.admission.admits(name)),
                    Action::PointServices { cluster } => prop_assert!(!s.cluster(cluster).is_some_and(|c| c.gated)),
                    _ => {}
                }
            }
        }

        /// Same snapshot, same plan; and at most one new cluster per pass.
        #[test]
        fn deterministic_and_at_most_one_create(s in arb_snapshot()) {
            let p = plan(&s);
            prop_assert_eq!(&p, &plan(&s));
            let creates = p.actions.iter().filter(|a| matches!(a, Action::CreateCluster { .. })).count();
            prop_assert!(creates <= 1, "{} creates", creates);
        }
    }
}
