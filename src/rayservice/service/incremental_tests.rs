//! The incremental upgrade's decisions, driven pass by pass against a small model of the world (Serve
//! capacities with a replica start delay, the route, the status), with a simulated clock.
//!
//! The progressions are those of KubeRay's e2e
//! (`ray-operator/test/e2eincrementalupgrade/rayservice_incremental_upgrade_test.go`: step/interval/
//! surge 100/1/100, 25/5/50, 5/10/25): traffic to the new cluster only grows, steps are at least the
//! interval apart, and the upgrade ends promoted. Beyond KubeRay, every pass checks that no cluster
//! carries more traffic than the capacity it runs.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};

use super::incremental::{Move, Progress, next_move};
use super::plan::{Action, Plan};
use super::snapshot::{
    Admission, AppView, ChildCluster, DesiredCluster, IncrementalOptions, PriorStatus, ServeObservation,
    Snapshot, TrafficView, UpgradeStrategy,
};

const V: &str = "v1.7.0";

struct Model {
    hash: String,
    /// Reported capacity; `None` until a config is deployed.
    capacity: Option<i32>,
    /// Capacity whose replicas all run.
    serving: i32,
    ready_at: Timestamp,
}

struct World {
    now: Timestamp,
    start_delay: SignedDuration,
    status: PriorStatus,
    clusters: BTreeMap<String, Model>,
    route: Option<Vec<(String, i32)>>,
    serve_svcs: BTreeSet<String>,
    gateway: bool,
    head: Option<String>,
    schedule: BTreeMap<String, Timestamp>,
    desired: String,
    options: IncrementalOptions,
    fresh: u32,
    /// (time, traffic on the cluster named second) for each route change.
    moves: Vec<(Timestamp, String, i32)>,
    /// The pending cluster's admitted slice does not keep it yet: preemption may take it as growth.
    pending_exposed: bool,
}

fn options(step: i32, interval: i64, surge: i32) -> IncrementalOptions {
    IncrementalOptions {
        max_surge: surge,
        step,
        interval: SignedDuration::from_secs(interval),
        gateway_class: "istio".into(),
        timer_only: false,
    }
}

impl World {
    fn new(o: IncrementalOptions) -> Self {
        World {
            now: "2026-11-22T10:00:00Z".parse().unwrap(),
            start_delay: SignedDuration::from_secs(3),
            status: PriorStatus::default(),
            clusters: BTreeMap::new(),
            route: None,
            serve_svcs: BTreeSet::new(),
            gateway: false,
            head: None,
            schedule: BTreeMap::new(),
            desired: "A".into(),
            options: o,
            fresh: 0,
            moves: Vec::new(),
            pending_exposed: false,
        }
    }

    fn snapshot(&mut self) -> Snapshot {
        let now = self.now;
        let clusters = self
            .clusters
            .iter_mut()
            .map(|(name, m)| {
                if now >= m.ready_at {
                    m.serving = m.capacity.unwrap_or(0);
                }
                let serve = match m.capacity {
                    None => ServeObservation::Apps {
                        apps: BTreeMap::new(),
                        ready: false,
                    },
                    Some(_) => ServeObservation::Apps {
                        apps: BTreeMap::from([("app".to_string(), AppView::default())]),
                        ready: now >= m.ready_at,
                    },
                };
                ChildCluster {
                    name: name.clone(),
                    hash: Some(m.hash.clone()),
                    num_worker_groups: Some(1),
                    operator_version: Some(V.into()),
                    head_ready: true,
                    served_config_hash: m.capacity.map(|_| "cfg".to_string()),
                    serve,
                    head_serve_label: Some(true),
                    proxy_healthy: Some(true),
                    reported_capacity: m.capacity,
                    ..Default::default()
                }
            })
            .collect();
        let backends = self.route.clone().unwrap_or_default();
        let traffic = TrafficView {
            gateway: "rs-gateway".into(),
            gateway_current: self.gateway,
            gateway_ready: self.gateway,
            route_exists: self.route.is_some(),
            route_ready: self.route.is_some() && backends.iter().all(|(c, _)| self.serve_svcs.contains(c)),
            // The model's gateway takes every route change at once.
            route_current: self.route.is_some() && backends.iter().all(|(c, _)| self.serve_svcs.contains(c)),
            backends,
            route_shape_current: true,
            serve_services: self.serve_svcs.clone(),
            problem: None,
        };
        self.fresh += 1;
        Snapshot {
            now,
            generation: 1,
            deleting: false,
            has_finalizer: true,
            managed_externally: false,
            invalid: None,
            suspend: false,
            strategy: UpgradeStrategy::NewClusterWithIncrementalUpgrade,
            deletion_delay: SignedDuration::from_secs(60),
            initializing_timeout: None,
            upgrade_deadline: None,
            failed_upgrade: None,
            exclude_head_from_serve: false,
            desired: DesiredCluster {
                hash: self.desired.clone(),
                prefix_hashes: vec![],
                serve_config_hash: Some("cfg".into()),
            },
            status: self.status.clone(),
            deletion_schedule: self.schedule.clone(),
            clusters,
            head_service: self.head.clone(),
            serve_service: self.status.active.clone(),
            serve_endpoints: 1,
            admission: match (&self.status.pending, self.pending_exposed) {
                (Some(p), true) => Admission::QueueManaged {
                    admitted: self.clusters.keys().cloned().collect(),
                    waiting: None,
                    exposed: BTreeSet::from([p.clone()]),
                },
                _ => Admission::NotQueueManaged,
            },
            incremental: Some((self.options.clone(), traffic)),
            fresh_name: format!("rs-{}", self.fresh),
            operator_version: V.into(),
        }
    }

    fn apply(&mut self, p: &Plan) {
        for a in &p.actions {
            match a {
                Action::CreateCluster { name, .. } => {
                    self.clusters.insert(
                        name.clone(),
                        Model {
                            hash: self.desired.clone(),
                            capacity: None,
                            serving: 0,
                            ready_at: self.now,
                        },
                    );
                }
                Action::PushServeConfig {
                    cluster,
                    target_capacity,
                } => self.set_capacity(cluster, target_capacity.unwrap_or(100)),
                Action::SetTargetCapacity { cluster, percent } => self.set_capacity(cluster, *percent),
                Action::EnsureServeService { cluster } => {
                    self.serve_svcs.insert(cluster.clone());
                }
                Action::ApplyGateway => self.gateway = true,
                Action::SetRoute { backends } => {
                    if let Some((name, w)) = backends.get(1) {
                        self.moves.push((self.now, name.clone(), *w));
                    }
                    self.route = Some(backends.clone());
                }
                Action::PointHeadService { cluster } => self.head = Some(cluster.clone()),
                Action::DeleteCluster { name } => {
                    self.clusters.remove(name);
                    self.serve_svcs.remove(name);
                }
                _ => {}
            }
        }
        if let Some(st) = &p.status {
            let t = |x: &Option<super::plan::ServiceStatusPlan>| {
                x.as_ref().and_then(|x| x.traffic).unwrap_or_default()
            };
            self.status.active = st.active.as_ref().map(|a| a.cluster.clone());
            self.status.pending = st.pending.as_ref().map(|a| a.cluster.clone());
            self.status.active_traffic = t(&st.active);
            self.status.pending_traffic = t(&st.pending);
        }
        if let Some(sched) = &p.schedule {
            self.schedule = sched.clone();
        }
    }

    fn set_capacity(&mut self, cluster: &str, percent: i32) {
        let m = self.clusters.get_mut(cluster).expect("a known cluster");
        if percent > m.serving {
            m.ready_at = self.now + self.start_delay;
        } else {
            m.serving = percent;
        }
        m.capacity = Some(percent);
    }

    /// One pass, then the checks that must hold after every pass.
    fn pass(&mut self) -> Plan {
        let s = self.snapshot();
        let p = super::plan(&s);
        self.apply(&p);
        // No cluster carries more traffic than the capacity it runs.
        for (name, w) in self.route.iter().flatten() {
            let serving = self.clusters.get(name).map_or(0, |m| m.serving);
            assert!(
                *w <= serving || *w == 0,
                "{name} carries {w}% but runs {serving}% at {}",
                self.now
            );
        }
        self.now += SignedDuration::from_secs(1);
        p
    }

    fn run_until(&mut self, limit: usize, done: impl Fn(&World) -> bool) {
        for _ in 0..limit {
            if done(self) {
                return;
            }
            self.pass();
        }
        panic!(
            "not done after {limit} passes: status {:?}, route {:?}",
            self.status, self.route
        );
    }

    fn serving_alone(&self) -> Option<String> {
        let a = self.status.active.clone()?;
        (self.status.pending.is_none() && self.route == Some(vec![(a.clone(), 100)])).then_some(a)
    }
}

fn started(o: IncrementalOptions) -> (World, String) {
    let mut w = World::new(o);
    w.run_until(30, |w| w.serving_alone().is_some());
    let a = w.serving_alone().unwrap();
    assert_eq!(w.head.as_deref(), Some(a.as_str()));
    assert!(w.gateway);
    (w, a)
}

#[test]
fn first_cluster_serves_through_the_gateway_at_full_capacity() {
    let (w, a) = started(options(10, 1, 10));
    assert_eq!(w.clusters[&a].capacity, Some(100));
    assert_eq!(w.status.active_traffic.traffic, Some(100));
    assert_eq!(w.status.active_traffic.target_capacity, Some(100));
}

#[test]
fn kuberay_e2e_progressions_are_monotone_spaced_and_end_promoted() {
    for (step, interval, surge) in [(100, 1, 100), (25, 5, 50), (5, 10, 25)] {
        let (mut w, a) = started(options(step, interval, surge));
        w.desired = "B".into();
        w.moves.clear();
        w.run_until(2000, |w| {
            w.serving_alone().is_some_and(|n| n != a) && !w.clusters.contains_key(&a)
        });
        let b = w.serving_alone().unwrap();
        let ups: Vec<(Timestamp, i32)> = w
            .moves
            .iter()
            .filter(|(_, n, _)| *n == b)
            .map(|(t, _, v)| (*t, *v))
            .collect();
        assert!(!ups.is_empty(), "{step}/{interval}/{surge}: no traffic step");
        let mut last: Option<(Timestamp, i32)> = None;
        for (t, v) in &ups {
            if let Some((lt, lv)) = last
                && *v != lv
            {
                assert!(
                    *v > lv,
                    "{step}/{interval}/{surge}: traffic went back {lv} -> {v}"
                );
                assert!(
                    *v - lv <= step,
                    "{step}/{interval}/{surge}: a step of {} > {step}",
                    v - lv
                );
                // The first move may come at once (no earlier move to space it from).
                assert!(
                    lv == 0 || t.duration_since(lt).as_secs() >= interval,
                    "{step}/{interval}/{surge}: steps {}s apart",
                    t.duration_since(lt).as_secs()
                );
            }
            if last.is_none_or(|(_, lv)| *v != lv) {
                last = Some((*t, *v));
            }
        }
        assert_eq!(last.map(|(_, v)| v), Some(100));
        let distinct: BTreeSet<i32> = ups.iter().map(|(_, v)| *v).collect();
        let expected_steps = 100usize.div_ceil(step as usize);
        assert!(
            distinct.len() >= expected_steps,
            "{step}/{interval}/{surge}: {distinct:?}"
        );
        assert_eq!(w.status.active_traffic.target_capacity, Some(100));
    }
}

#[test]
fn a_slow_pending_cluster_holds_traffic() {
    let (mut w, a) = started(options(50, 1, 50));
    w.start_delay = SignedDuration::from_secs(40);
    w.desired = "B".into();
    for _ in 0..30 {
        w.pass();
    }
    let b = w.status.pending.clone().expect("an upgrade in progress");
    assert_eq!(w.clusters[&b].capacity, Some(50), "capacity was raised");
    assert_eq!(
        w.route
            .as_ref()
            .unwrap()
            .iter()
            .find(|(n, _)| *n == b)
            .map(|(_, v)| *v),
        Some(0),
        "no traffic before the replicas run"
    );
    assert_eq!(w.clusters[&a].capacity, Some(100));
    w.run_until(400, |w| w.serving_alone().is_some_and(|n| n == b));
}

/// The switch guard of `rayservice::job::growth` (issue 45): no traffic moves onto a pending
/// cluster that preemption may still take as growth; once its slice keeps it, the upgrade goes on.
#[test]
fn no_traffic_moves_onto_a_pending_cluster_preemption_may_still_take() {
    let (mut w, a) = started(options(50, 1, 50));
    w.pending_exposed = true;
    w.desired = "B".into();
    for _ in 0..30 {
        w.pass();
    }
    let b = w.status.pending.clone().expect("an upgrade in progress");
    let on_b = w
        .route
        .iter()
        .flatten()
        .find(|(n, _)| *n == b)
        .map_or(0, |(_, v)| *v);
    assert_eq!(on_b, 0, "no traffic on {b} while it may be taken: {:?}", w.route);
    assert_eq!(
        w.clusters[&a].capacity,
        Some(100),
        "the active cluster keeps its capacity"
    );
    w.pending_exposed = false;
    w.run_until(400, |w| w.serving_alone().is_some_and(|n| n == b));
}

#[test]
fn rollback_a_b_a_moves_traffic_back_and_drops_the_pending() {
    let (mut w, a) = started(options(20, 1, 40));
    w.desired = "B".into();
    // Until some traffic is on the new cluster.
    w.run_until(200, |w| w.status.pending_traffic.traffic.is_some_and(|t| t >= 40));
    let b = w.status.pending.clone().unwrap();
    w.desired = "A".into();
    let p = w.pass();
    let rb = p
        .status
        .as_ref()
        .and_then(|s| s.condition("RollbackInProgress"))
        .unwrap();
    assert_eq!((rb.status, rb.reason), ("True", "DesiredClusterSpecChanged"));
    w.moves.clear();
    w.run_until(400, |w| w.serving_alone().is_some_and(|n| n == a));
    // Traffic on the pending cluster only fell during the rollback.
    let on_b: Vec<i32> = w
        .moves
        .iter()
        .filter(|(_, n, _)| *n == b)
        .map(|(_, _, v)| *v)
        .collect();
    assert!(on_b.windows(2).all(|x| x[1] <= x[0]), "{on_b:?}");
    assert_eq!(w.clusters[&a].capacity, Some(100));
    w.run_until(200, |w| !w.clusters.contains_key(&b));
}

#[test]
fn rollback_a_b_c_rolls_back_then_upgrades_to_c() {
    let (mut w, a) = started(options(20, 1, 40));
    w.desired = "B".into();
    w.run_until(200, |w| w.status.pending_traffic.traffic.is_some_and(|t| t >= 20));
    let b = w.status.pending.clone().unwrap();
    w.desired = "C".into();
    w.run_until(400, |w| w.status.pending.as_deref().is_some_and(|p| p != b));
    // C starts only once B has drained.
    assert_eq!(w.status.active.as_deref(), Some(a.as_str()));
    assert_eq!(w.status.active_traffic.traffic, Some(100));
    w.run_until(600, |w| {
        w.serving_alone()
            .is_some_and(|n| w.clusters.get(&n).is_some_and(|m| m.hash == "C"))
    });
}

#[test]
fn reverting_before_anything_moved_cancels_at_once() {
    let (mut w, a) = started(options(20, 1, 40));
    w.start_delay = SignedDuration::from_secs(100);
    w.desired = "B".into();
    w.pass(); // names the pending cluster
    w.pass(); // creates it
    assert!(w.status.pending.is_some());
    w.desired = "A".into();
    let p = w.pass();
    assert!(
        p.events.iter().any(|e| e.reason == "UpgradeCancelled"),
        "{:?}",
        p.events
    );
    assert_eq!(w.serving_alone().as_deref(), Some(a.as_str()));
}

#[test]
fn a_restart_mid_upgrade_neither_repeats_nor_skips_a_wait() {
    // The decisions hold no memory: a pass planned from the same snapshot twice (a restart between
    // them) plans the same thing, and a traffic step never comes sooner than the interval.
    let (mut w, _a) = started(options(10, 30, 10));
    w.desired = "B".into();
    w.run_until(200, |w| w.status.pending_traffic.traffic == Some(10));
    let s = w.snapshot();
    assert_eq!(super::plan(&s).actions, super::plan(&s).actions);
    let moved_at = w.status.pending_traffic.last_migrated.unwrap();
    w.run_until(200, |w| w.status.pending_traffic.traffic == Some(20));
    let second = w.status.pending_traffic.last_migrated.unwrap();
    assert!(second.duration_since(moved_at).as_secs() >= 30);
}

#[test]
fn a_route_changed_without_its_status_restarts_the_interval() {
    let (mut w, _a) = started(options(10, 5, 10));
    w.desired = "B".into();
    w.run_until(200, |w| {
        w.status
            .pending
            .as_ref()
            .and_then(|b| w.clusters.get(b))
            .is_some_and(|m| m.capacity == Some(20))
    });
    assert_eq!(w.status.pending_traffic.traffic, Some(10));
    // The status write of the next move is lost: the route says 20, status still 10.
    let b = w.status.pending.clone().unwrap();
    let a = w.status.active.clone().unwrap();
    w.route = Some(vec![(a, 80), (b, 20)]);
    w.now += SignedDuration::from_secs(60);
    let p = w.pass();
    assert!(
        !p.actions.iter().any(|x| matches!(x, Action::SetRoute { .. })),
        "no move in the pass that notices: {:?}",
        p.actions
    );
    assert_eq!(w.status.pending_traffic.traffic, Some(20));
}

#[test]
fn next_move_table() {
    let o = options(10, 5, 30);
    let p = |g, l, t, serving, interval| Progress {
        gain_capacity: g,
        lose_capacity: l,
        traffic: t,
        gain_serving: serving,
        interval_passed: interval,
        traffic_settled: interval,
    };
    let cases = [
        (p(0, 100, 0, true, true), Move::Grow(30)),
        (p(30, 100, 0, true, true), Move::Traffic(10)),
        (p(30, 100, 25, true, true), Move::Traffic(30)),
        (p(30, 100, 30, true, true), Move::Shrink(70)),
        (p(30, 70, 30, true, true), Move::Grow(60)),
        (p(90, 10, 90, true, true), Move::Grow(100)),
        (p(100, 10, 100, true, true), Move::Shrink(0)),
        (p(100, 0, 100, false, false), Move::Done),
    ];
    for (progress, want) in cases {
        assert_eq!(next_move(&progress, &o), want, "{progress:?}");
    }
    assert!(matches!(
        next_move(&p(30, 100, 0, false, true), &o),
        Move::Wait(_)
    ));
    assert!(matches!(
        next_move(&p(30, 100, 0, true, false), &o),
        Move::Wait(_)
    ));
    // KubeRay's timer-only policy (benchmark contrast) moves traffic to replicas not yet running.
    let timer = IncrementalOptions {
        timer_only: true,
        ..o.clone()
    };
    assert_eq!(next_move(&p(30, 100, 0, false, true), &timer), Move::Traffic(10));
    // Capacity leaves the losing cluster only once its traffic has settled elsewhere.
    assert!(matches!(
        next_move(&p(30, 100, 30, true, false), &o),
        Move::Wait(_)
    ));
    assert_eq!(next_move(&p(30, 100, 30, true, false), &timer), Move::Shrink(70));
    // Capacity never leaves the losing cluster below the traffic it carries.
    assert_eq!(
        next_move(&p(30, 100, 20, true, false), &o),
        Move::Wait("next traffic step after 5s".into())
    );
}
