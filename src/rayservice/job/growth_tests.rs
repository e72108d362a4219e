//! An upgrade whose growth preemption took must ask for a new slice once it has shrunk back, for
//! an incremental upgrade whose traffic already moved in part too (issue 45, chaos seed 47).

use std::collections::BTreeMap;

use serde_json::json;

use super::demand::{self, LivePods};
use super::rayservice::RayServiceJob;
use crate::admission as conditions;
use crate::admission::slices::{GROWTH_FLOOR_ANNOTATION, GROWTH_KEEPS_ANNOTATION, format_floor};
use crate::api::kueue::{Admission, PodSet, Workload};
use crate::api::ray::{RayCluster, RayService};
use crate::jobframework::GenericJob;
use crate::jobframework::job_controller::{Step, plan};
use crate::rayservice::cluster::BuildOptions;
use crate::rayservice::cluster::child::child_cluster;

/// An incremental service (50% surge, two Serve replicas of 1 CPU, one per worker) mid-upgrade:
/// `rs-old` serving with `old` workers, `rs-new` pending with `new` workers in its spec.
fn upgrading(old: i32, new: i32) -> (RayService, Vec<RayCluster>) {
    let res = json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1"}});
    let mut rs: RayService = serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "rs", "namespace": "default", "uid": "u1",
                     "labels": {crate::api::kueue::constants::label::QUEUE_NAME: "lq"}},
        "spec": {
            "upgradeStrategy": {"type": "NewClusterWithIncrementalUpgrade",
                "clusterUpgradeOptions": {"gatewayClassName": "istio", "stepSizePercent": 50, "intervalSeconds": 1, "maxSurgePercent": 50}},
            "serveConfigV2": "applications:\n  - name: app\n    import_path: app.graph\n    route_prefix: /\n    deployments:\n      - name: D\n        num_replicas: 2\n        ray_actor_options:\n          num_cpus: 1\n",
            "rayClusterConfig": {
                "enableInTreeAutoscaling": true,
                "headGroupSpec": {"rayStartParams": {"num-cpus": "0"}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0", "resources": res}]}}},
                "workerGroupSpecs": [{"groupName": "workers", "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {"num-cpus": "1"},
                    "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0", "resources": res}]}}}]
            }
        }
    }))
    .expect("a valid RayService");
    let sized = |name: &str, workers: i32| {
        let mut rc = child_cluster(&rs, name, "", false);
        for g in rc.spec.worker_group_specs.iter_mut().flatten() {
            g.replicas = Some(workers);
        }
        rc
    };
    let children = vec![sized("rs-old", old), sized("rs-new", new)];
    rs.status = serde_json::from_value(json!({
        "activeServiceStatus": {"rayClusterName": "rs-old"},
        "pendingServiceStatus": {"rayClusterName": "rs-new"}
    }))
    .ok();
    (rs, children)
}

/// An admitted slice with these podsets, `GrowthPreempted=True`.
fn taken_slice(pod_sets: Vec<PodSet>) -> Workload {
    let mut wl = Workload::build("rs-slice-1", "default").queue("lq").build();
    wl.spec.pod_sets = pod_sets;
    let now = jiff::Timestamp::UNIX_EPOCH;
    let admission = Admission {
        cluster_queue: "cq".into(),
        pod_set_assignments: vec![],
    };
    wl.status = Some(conditions::admitted(&wl, admission, now));
    let mut tmp = wl.clone();
    tmp.status = conditions::growth_preempted(&wl, "InClusterQueue", "preempted", now);
    tmp
}

fn pods(groups: &[(&str, &[(&str, i64)])]) -> LivePods {
    groups
        .iter()
        .map(|(c, gs)| {
            (
                c.to_string(),
                gs.iter()
                    .map(|(g, n)| (g.to_string(), *n))
                    .collect::<BTreeMap<_, _>>(),
            )
        })
        .collect()
}

fn counts(ps: &[PodSet]) -> Vec<(String, i32)> {
    ps.iter()
        .map(|p| (p.name.clone().unwrap_or_default(), p.count()))
        .collect()
}

fn job(rs: &RayService, children: &[RayCluster], live: LivePods, wl: &Workload) -> RayServiceJob {
    RayServiceJob {
        rs: rs.clone(),
        children: children.to_vec(),
        live,
        slices: vec![wl.metadata.name.clone().unwrap_or_default()],
        growth_taken: super::growth::taken(std::slice::from_ref(wl)),
        pins: Default::default(),
        admitted: Vec::new(),
        scheduling: None,
    }
}

/// Chaos seed 47: the growth was taken after the first step (old cluster down to one worker, the
/// new one at one worker and asking for its second). The slice shrinks back to the serving
/// cluster, then a new slice waits for the whole pending cluster.
#[test]
fn an_incremental_upgrade_whose_growth_was_taken_asks_for_a_new_slice_after_shrinking() {
    let (rs, children) = upgrading(1, 2);
    let opts = BuildOptions::default();
    let mut at_step = children.clone();
    for g in at_step[1].spec.worker_group_specs.iter_mut().flatten() {
        g.replicas = Some(1);
    }
    let step_demand: Vec<_> = at_step
        .iter()
        .map(|c| demand::child_demand(c, &opts).expect("demand"))
        .collect();
    let wl = taken_slice(demand::podsets(&step_demand).expect("podsets"));
    assert_eq!(
        counts(&wl.spec.pod_sets),
        vec![("head".into(), 2), ("workers".into(), 2)]
    );

    // The pending cluster's pods are gone: shrink back to the serving cluster.
    let serving_only = pods(&[("rs-old", &[("head", 1), ("workers", 1)])]);
    let step = plan(&job(&rs, &children, serving_only.clone(), &wl), &[&wl]).expect("a step");
    let Step::ReplacePodSets { pod_sets, .. } = step else {
        panic!("expected a shrink, got {step:?}")
    };
    assert_eq!(counts(&pod_sets), vec![("head".into(), 1), ("workers".into(), 1)]);

    // Shrunk (still GrowthPreempted until a new slice replaces it), the floor written as the job
    // keeps it: a new slice for the upgrade.
    let mut shrunk = wl.clone();
    shrunk.spec.pod_sets = pod_sets;
    let j = job(&rs, &children, serving_only.clone(), &shrunk);
    let floor = j
        .growth_floor(&shrunk.spec.pod_sets)
        .expect("a floor during the upgrade");
    assert_eq!(
        floor,
        BTreeMap::from([("head".to_string(), 1), ("workers".to_string(), 1)])
    );
    assert_eq!(
        j.growth_keeps(),
        Some(vec!["rs-old".to_string()]),
        "a slice written before it named what it keeps keeps the serving cluster"
    );
    let stale = shrunk.clone();
    let annotations = shrunk.metadata.annotations.get_or_insert_with(Default::default);
    annotations.insert(GROWTH_FLOOR_ANNOTATION.into(), format_floor(&floor));
    annotations.insert(GROWTH_KEEPS_ANNOTATION.into(), "rs-old".into());
    let step = plan(&j, &[&shrunk]).expect("a step");
    assert_eq!(
        step,
        Step::CreateSlice {
            replaces: "rs-slice-1".into()
        }
    );

    // A floor not written yet (or stale) is written first, also while the slice waits to grow: the
    // admission core holds a slice whose growth was taken until it is at its floor.
    let step = plan(&job(&rs, &children, serving_only, &stale), &[&stale]).expect("a step");
    assert_eq!(
        step,
        Step::ReplacePodSets {
            name: "rs-slice-1".into(),
            pod_sets: stale.spec.pod_sets.clone()
        }
    );

    // Before the pending pods are gone, the pending cluster's growth waits for a slice too.
    let all = pods(&[
        ("rs-old", &[("head", 1), ("workers", 1)]),
        ("rs-new", &[("head", 1), ("workers", 1)]),
    ]);
    let step = plan(&job(&rs, &children, all, &wl), &[&wl]).expect("a step");
    assert!(
        matches!(step, Step::CreateSlice { .. } | Step::ReplacePodSets { .. }),
        "got {step:?}"
    );
}

/// `rs` with its pending cluster's Serve app reported as `app_status` (`None`: nothing reported).
fn announced(mut rs: RayService, app_status: Option<&str>) -> RayService {
    let mut status = json!({"activeServiceStatus": {"rayClusterName": "rs-old"}, "pendingServiceStatus": {"rayClusterName": "rs-new"}});
    if let Some(s) = app_status {
        status["pendingServiceStatus"]["applicationStatuses"] = json!({"app": {"status": s}});
    }
    rs.status = serde_json::from_value(status).ok();
    rs
}

/// What preemption keeps of a service: the serving cluster while the upgrade's pending cluster is
/// not ready to take traffic, both once the service announced the switch, the new one alone after
/// it (the old one, waiting for deletion, is growth), the serving cluster alone once the old one is
/// gone, and nothing while none serves.
#[test]
fn kept_follows_the_upgrade_through_its_switch() {
    let (rs, _) = upgrading(1, 2);
    let both = ["rs-old", "rs-new"];
    let names = |k: Option<Vec<String>>| k.map(|v| v.join(","));
    assert_eq!(
        names(super::growth::kept(&announced(rs.clone(), None), &both)),
        Some("rs-old".into())
    );
    assert_eq!(
        names(super::growth::kept(
            &announced(rs.clone(), Some("DEPLOYING")),
            &both
        )),
        Some("rs-old".into())
    );
    assert_eq!(
        names(super::growth::kept(
            &announced(rs.clone(), Some("DEPLOY_FAILED")),
            &both
        )),
        Some("rs-old".into())
    );
    assert_eq!(
        names(super::growth::kept(
            &announced(rs.clone(), Some("RUNNING")),
            &both
        )),
        Some("rs-old,rs-new".into())
    );
    // Promoted: the new cluster serves, the old one waits for deletion and is growth.
    let mut promoted = rs.clone();
    promoted.status =
        serde_json::from_value(json!({"activeServiceStatus": {"rayClusterName": "rs-new"}})).ok();
    assert_eq!(
        names(super::growth::kept(&promoted, &both)),
        Some("rs-new".into())
    );
    // The old cluster deleted: the serving one alone is kept, so what the slice still holds for the
    // old one is growth; none serving: preempted whole.
    assert_eq!(
        names(super::growth::kept(&promoted, &["rs-new"])),
        Some("rs-new".into())
    );
    let mut starting = rs.clone();
    starting.status =
        serde_json::from_value(json!({"pendingServiceStatus": {"rayClusterName": "rs-new"}})).ok();
    assert_eq!(super::growth::kept(&starting, &both), None);
}

fn admitted_slice(pod_sets: Vec<PodSet>, floor: &str, keeps: &str) -> Workload {
    let mut wl = Workload::build("rs-slice-1", "default").queue("lq").build();
    wl.spec.pod_sets = pod_sets;
    let admission = Admission {
        cluster_queue: "cq".into(),
        pod_set_assignments: vec![],
    };
    wl.status = Some(conditions::admitted(&wl, admission, jiff::Timestamp::UNIX_EPOCH));
    let a = wl.metadata.annotations.get_or_insert_with(Default::default);
    a.insert(GROWTH_FLOOR_ANNOTATION.into(), floor.into());
    a.insert(GROWTH_KEEPS_ANNOTATION.into(), keeps.into());
    wl
}

/// The announcement reaches the slice: its floor and what it keeps grow to the pending cluster, so
/// that no growth preemption decided from then on can take it; and the gate lets traffic onto a
/// cluster only once the slice keeps it.
#[test]
fn an_announced_switch_moves_the_floor_onto_the_pending_cluster_first() {
    let (rs, children) = upgrading(2, 2);
    let opts = BuildOptions::default();
    let demands: Vec<_> = children
        .iter()
        .map(|c| demand::child_demand(c, &opts).expect("demand"))
        .collect();
    let pod_sets = demand::podsets(&demands).expect("podsets");
    assert_eq!(counts(&pod_sets), vec![("head".into(), 2), ("workers".into(), 4)]);
    let live = pods(&[
        ("rs-old", &[("head", 1), ("workers", 2)]),
        ("rs-new", &[("head", 1), ("workers", 2)]),
    ]);
    let wl = admitted_slice(pod_sets.clone(), "head=1,workers=2", "rs-old");
    let job = |rs: &RayService| RayServiceJob {
        rs: rs.clone(),
        children: children.clone(),
        live: live.clone(),
        slices: vec![],
        growth_taken: None,
        pins: Default::default(),
        admitted: Vec::new(),
        scheduling: None,
    };

    // Not announced: the slice is as the job wants it, and the pending cluster is exposed.
    let waiting = announced(rs.clone(), Some("DEPLOYING"));
    assert_eq!(plan(&job(&waiting), &[&wl]).expect("a step"), Step::Nothing);
    let g = super::gate::decide(&waiting, &children, std::slice::from_ref(&wl), &live);
    assert_eq!(g.exposed.iter().collect::<Vec<_>>(), vec!["rs-new"]);
    assert!(
        g.covered.contains("rs-new"),
        "covered: its pods may run, but no traffic moves onto it"
    );

    // Announced: the floor is rewritten to keep both before any traffic moves.
    let ready = announced(rs.clone(), Some("RUNNING"));
    let j = job(&ready);
    assert_eq!(
        j.growth_keeps(),
        Some(vec!["rs-old".to_string(), "rs-new".to_string()])
    );
    assert_eq!(
        j.growth_floor(&pod_sets),
        Some(BTreeMap::from([
            ("head".to_string(), 2),
            ("workers".to_string(), 4)
        ]))
    );
    let step = plan(&j, &[&wl]).expect("a step");
    assert_eq!(
        step,
        Step::ReplacePodSets {
            name: "rs-slice-1".into(),
            pod_sets: pod_sets.clone()
        }
    );
    let kept_both = admitted_slice(pod_sets, "head=2,workers=4", "rs-old,rs-new");
    let g = super::gate::decide(&ready, &children, std::slice::from_ref(&kept_both), &live);
    assert!(g.exposed.is_empty(), "{:?}", g.exposed);
}

/// Chaos seed 223: the growth was taken on a slice that kept the serving cluster, and the service
/// was promoted afterwards. The gate keeps what the slice named when its growth was taken, not what
/// the status says now: the cluster the preemption counted on stays, the other one goes.
#[test]
fn a_slice_whose_growth_was_taken_keeps_what_it_named_whatever_the_status_says_since() {
    let (rs, children) = upgrading(2, 2);
    let opts = BuildOptions::default();
    let demands: Vec<_> = children
        .iter()
        .map(|c| demand::child_demand(c, &opts).expect("demand"))
        .collect();
    let live = pods(&[
        ("rs-old", &[("head", 1), ("workers", 2)]),
        ("rs-new", &[("head", 1), ("workers", 2)]),
    ]);
    let mut wl = admitted_slice(
        demand::podsets(&demands).expect("podsets"),
        "head=1,workers=2",
        "rs-old",
    );
    let mut tmp = wl.clone();
    tmp.status =
        conditions::growth_preempted(&wl, "InClusterQueue", "preempted", jiff::Timestamp::UNIX_EPOCH);
    wl.status = tmp.status;
    let mut promoted = rs.clone();
    promoted.status =
        serde_json::from_value(json!({"activeServiceStatus": {"rayClusterName": "rs-new"}})).ok();
    for rs in [&rs, &promoted] {
        let g = super::gate::decide(rs, &children, std::slice::from_ref(&wl), &live);
        assert_eq!(g.covered.iter().collect::<Vec<_>>(), vec!["rs-old"]);
        assert!(g.allowed["rs-new"].values().all(|n| *n == 0), "{:?}", g.allowed);
        assert!(g.exposed.contains("rs-new"));
        let j = RayServiceJob {
            rs: rs.clone(),
            children: children.clone(),
            live: live.clone(),
            slices: vec![],
            growth_taken: super::growth::taken(std::slice::from_ref(&wl)),
            pins: Default::default(),
            admitted: Vec::new(),
            scheduling: None,
        };
        assert_eq!(
            j.growth_keeps(),
            Some(vec!["rs-old".to_string()]),
            "frozen once taken"
        );
    }
}

/// After the switch the old cluster is deleted before the scale-down slice replaces the one that
/// holds both: the serving cluster alone is the floor, so what the slice still holds for the old
/// one is growth a preemptor takes first, not a reason to evict the serving cluster whole.
#[test]
fn a_lone_serving_cluster_is_the_floor_of_a_slice_still_holding_its_deleted_predecessor() {
    let (mut rs, children) = upgrading(1, 2);
    let opts = BuildOptions::default();
    let both: Vec<_> = children
        .iter()
        .map(|c| demand::child_demand(c, &opts).expect("demand"))
        .collect();
    let mut wl = Workload::build("rs-slice-1", "default").queue("lq").build();
    wl.spec.pod_sets = demand::podsets(&both).expect("podsets");
    assert_eq!(
        counts(&wl.spec.pod_sets),
        vec![("head".into(), 2), ("workers".into(), 3)]
    );
    rs.status = serde_json::from_value(json!({"activeServiceStatus": {"rayClusterName": "rs-new"}})).ok();
    let new_only = &children[1..];
    let live = pods(&[("rs-new", &[("head", 1), ("workers", 2)])]);
    let j = RayServiceJob {
        rs,
        children: new_only.to_vec(),
        live,
        slices: vec!["rs-slice-1".into()],
        growth_taken: None,
        pins: Default::default(),
        admitted: Vec::new(),
        scheduling: None,
    };
    assert_eq!(j.growth_keeps(), Some(vec!["rs-new".to_string()]));
    let floor = j
        .growth_floor(&wl.spec.pod_sets)
        .expect("a floor: the serving cluster");
    assert_eq!(
        floor,
        BTreeMap::from([("head".to_string(), 1), ("workers".to_string(), 2)])
    );
}

/// Chaos `hostile` seed 174: a user grew the serving cluster to three workers, its slice grew to
/// cover them, and the user shrank it back to one while a pass of the RayCluster controller that
/// read it at three was still creating workers. The slice must not shrink in place until that
/// controller reports the current generation: the workers it was making are listed only after.
#[test]
fn a_slice_shrinks_only_once_every_childs_controller_reports_its_current_spec() {
    let (mut rs, children) = upgrading(1, 1);
    rs.status = serde_json::from_value(json!({"activeServiceStatus": {"rayClusterName": "rs-old"}})).ok();
    let mut serving = children[0].clone();
    serving.metadata.generation = Some(3);
    serving.status = serde_json::from_value(json!({"observedGeneration": 2})).ok();
    let mut at_three = serving.clone();
    for g in at_three.spec.worker_group_specs.iter_mut().flatten() {
        g.replicas = Some(3);
    }
    let grown = vec![demand::child_demand(&at_three, &BuildOptions::default()).expect("demand")];
    let mut wl = Workload::build("rs-slice-1", "default").queue("lq").build();
    wl.spec.pod_sets = demand::podsets(&grown).expect("podsets");
    let admission = Admission {
        cluster_queue: "cq".into(),
        pod_set_assignments: vec![],
    };
    wl.status = Some(conditions::admitted(&wl, admission, jiff::Timestamp::UNIX_EPOCH));
    let listed = pods(&[("rs-old", &[("head", 1), ("workers", 1)])]);

    let behind = job(&rs, std::slice::from_ref(&serving), listed.clone(), &wl);
    assert!(behind.shrink_waits());
    let step = plan(&behind, &[&wl]).expect("a step");
    assert!(
        !matches!(step, Step::ReplacePodSets { .. } | Step::UpdateCounts(_)),
        "shrank under a controller still behind: {step:?}"
    );

    serving.status = serde_json::from_value(json!({"observedGeneration": 3})).ok();
    let caught_up = job(&rs, std::slice::from_ref(&serving), listed, &wl);
    assert!(!caught_up.shrink_waits());
    let Step::ReplacePodSets { pod_sets, .. } = plan(&caught_up, &[&wl]).expect("a step") else {
        panic!("expected the shrink")
    };
    assert_eq!(counts(&pod_sets), vec![("head".into(), 1), ("workers".into(), 1)]);
}

/// Issue 67 (chaos `hostile` seed 257 under load): the claim a waiting slice carries for the banker's
/// check is written when the slice is made, and its podsets then follow the demand in place. A
/// serving cluster grown by hand (3 workers) while the upgrade's next step waited made the slice with
/// a claim sized for 3; the autoscaler took the serving cluster back to 2 as the pending one grew to
/// 2, so the podsets matched again (4 workers either way) while the claim still asked 1 CPU more than
/// the upgrade can ever need: in quota sized for the upgrade, the check kept it waiting for good. The
/// job makes such a slice again, with the claim it makes now.
#[test]
fn a_waiting_slice_whose_claim_the_job_no_longer_makes_is_made_again() {
    let opts = BuildOptions::default();
    let demand_of = |children: &[RayCluster]| {
        let d: Vec<_> = children
            .iter()
            .map(|c| demand::child_demand(c, &opts).expect("demand"))
            .collect();
        demand::podsets(&d).expect("podsets")
    };
    let claim_of = |rs: &RayService, children: &[RayCluster]| {
        super::claim::upgrade_claim(rs, children).expect("an upgrade in flight")
    };
    // Admitted: the serving cluster at 2 workers, the pending one at its first step (1 worker).
    let (rs, at_step) = upgrading(2, 1);
    let mut admitted = Workload::build("rs-slice-1", "default").queue("lq").build();
    admitted.spec.pod_sets = demand_of(&at_step);
    admitted.status = Some(conditions::admitted(
        &admitted,
        Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: vec![],
        },
        jiff::Timestamp::UNIX_EPOCH,
    ));
    let j = job(&rs, &at_step, LivePods::default(), &admitted);
    let floor = j.growth_floor(&admitted.spec.pod_sets).map(|f| format_floor(&f));
    let a = admitted.metadata.annotations.get_or_insert_with(Default::default);
    if let Some(f) = floor {
        a.insert(GROWTH_FLOOR_ANNOTATION.into(), f);
        a.insert(
            GROWTH_KEEPS_ANNOTATION.into(),
            j.growth_keeps().unwrap_or_default().join(","),
        );
    }

    // The serving cluster grown by hand to 3: the next slice is made with the claim of that moment.
    let (_, grown) = upgrading(3, 1);
    let mut waiting = Workload::build("rs-slice-2", "default").queue("lq").build();
    waiting.spec.pod_sets = demand_of(&grown);
    crate::jobframework::workload::prepare_workload_slice(&mut waiting, &[&admitted]).expect("a slice");
    let stale = claim_of(&rs, &grown);
    waiting
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            crate::api::kueue::constants::ANNOTATION_UPGRADE_CLAIM.into(),
            crate::queue::convert::upgrade_claim_annotation(&stale),
        );

    // Back to 2 serving while the pending cluster grew to 2: the same podsets, a smaller claim.
    let (_, now) = upgrading(2, 2);
    assert_eq!(counts(&demand_of(&now)), counts(&waiting.spec.pod_sets));
    let current = claim_of(&rs, &now);
    let cpu = |c: &crate::queue::model::UpgradeClaim| c.peak.get("cpu").map(|a| a.0);
    assert_eq!(
        cpu(&stale).zip(cpu(&current)).map(|(s, c)| s - c),
        Some(1000),
        "the stale claim asks 1 CPU more: {stale:?} {current:?}"
    );
    let j = job(&rs, &now, LivePods::default(), &admitted);
    assert_eq!(
        plan(&j, &[&admitted, &waiting]).expect("a step"),
        Step::DeleteWorkloads(vec!["rs-slice-2".into()])
    );

    // With the claim the job makes now, it waits as it is.
    waiting
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            crate::api::kueue::constants::ANNOTATION_UPGRADE_CLAIM.into(),
            crate::queue::convert::upgrade_claim_annotation(&current),
        );
    let step = plan(&j, &[&admitted, &waiting]).expect("a step");
    assert!(
        !matches!(&step, Step::DeleteWorkloads(w) if w.contains(&"rs-slice-2".to_string())),
        "got {step:?}"
    );
}
