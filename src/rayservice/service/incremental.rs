//! The running-service state machine for `NewClusterWithIncrementalUpgrade` (KubeRay v1.7, research
//! `kuberay.md` §3): capacity and traffic move between the active and the pending cluster in steps,
//! through Serve's `target_capacity` and the weights of `<rs>-httproute`.
//!
//! One move per pass, decided by [`next_move`] from the capacities Serve reports, the weights the
//! route holds and the timers stored in status (so a restart continues the same step):
//!
//! ```text
//! gaining cluster G, losing cluster L; C = capacity %, T = traffic % on G (L carries 100 - T)
//! T < C(G), G runs every replica wanted at C(G), interval passed  --> T = min(T + step, C(G))
//! T = C(G), C(L) > 100 - T, last move accepted, interval passed   --> C(L) = max(100 - T, C(L) - surge)
//! T = C(G), C(L) = 100 - T, C(G) < 100, G runs at C(G)             --> C(G) = min(100, C(G) + surge)
//! C(G) = 100, T = 100, C(L) = 0                                    --> done
//! ```
//!
//! Upgrading, G is the pending cluster; rolling back (the spec left the pending cluster's after
//! something moved), G is the active one and, once done, the pending cluster is dropped. Unlike
//! KubeRay, traffic moves only to capacity Serve reports as RUNNING *after* the capacity change was
//! applied, and capacity leaves a cluster only once the traffic it carried has moved: the gateway
//! accepted the route's current generation and an interval passed for its data plane to follow
//! (DESIGN, "Where we deliberately go beyond").

use jiff::Timestamp;

use super::bluegreen::{SpecDecision, apply_spec_decision, spec_decision};
use super::conditions as cond;
use super::plan::{Action, EventType, Plan};
use super::running;
use super::schedule::reap_unnamed;
use super::snapshot::{
    Admission, ChildCluster, HashMatch, IncrementalOptions, ServeObservation, Snapshot, TrafficStatus,
    TrafficView,
};
use crate::api::ray::constants as c;

/// One decision of the upgrade (or rollback) machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Move {
    /// Route this much traffic (percent) to the gaining cluster.
    Traffic(i32),
    /// Set the losing cluster's capacity.
    Shrink(i32),
    /// Set the gaining cluster's capacity.
    Grow(i32),
    Done,
    /// Nothing moves this pass, for this reason.
    Wait(String),
}

/// The state [`next_move`] decides from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    pub gain_capacity: i32,
    pub lose_capacity: i32,
    /// Traffic on the gaining cluster.
    pub traffic: i32,
    /// The gaining cluster runs every replica Serve wants at `gain_capacity`.
    pub gain_serving: bool,
    /// `intervalSeconds` have passed since the last traffic move.
    pub interval_passed: bool,
    /// The gateway accepted the route as it is now and `intervalSeconds` passed since the last
    /// traffic move: the data plane has had its time to stop sending the moved traffic.
    pub traffic_settled: bool,
}

/// The next move (pure; see the module table).
pub fn next_move(p: &Progress, o: &IncrementalOptions) -> Move {
    let (g, l, t) = (p.gain_capacity, p.lose_capacity, p.traffic);
    if g >= 100 && t >= 100 && l <= 0 {
        return Move::Done;
    }
    let serving = p.gain_serving || o.timer_only;
    if t < g {
        if !serving {
            return Move::Wait(format!(
                "traffic waits until every replica wanted at {g}% capacity is RUNNING"
            ));
        }
        if !p.interval_passed {
            return Move::Wait(format!("next traffic step after {}s", o.interval.as_secs()));
        }
        return Move::Traffic((t + o.step.max(1)).min(g).min(100));
    }
    if l > 100 - t {
        if !(p.traffic_settled || o.timer_only) {
            return Move::Wait(format!(
                "capacity leaves the losing cluster once the gateway took the last traffic move and {}s passed",
                o.interval.as_secs()
            ));
        }
        return Move::Shrink((l - o.max_surge.max(1)).max(100 - t).max(0));
    }
    if g < 100 {
        if !serving {
            return Move::Wait(format!(
                "capacity grows once every replica wanted at {g}% capacity is RUNNING"
            ));
        }
        return Move::Grow((g + o.max_surge.max(1)).min(100));
    }
    Move::Wait("traffic and capacity are settling".into())
}

/// Serve's capacity of this cluster in percent: what the dashboard reports once the cluster runs
/// applications (unset means 100), else what the status stored, else `default`.
fn capacity(c: Option<&ChildCluster>, stored: Option<i32>, default: i32) -> i32 {
    match c.and_then(reported) {
        Some(p) => p,
        None => stored.unwrap_or(default),
    }
}

fn reported(c: &ChildCluster) -> Option<i32> {
    match &c.serve {
        ServeObservation::Apps { apps, .. } if !apps.is_empty() => Some(c.reported_capacity.unwrap_or(100)),
        _ => None,
    }
}

/// Every replica wanted at `capacity` is RUNNING, read after the capacity was applied.
fn serving_at(c: &ChildCluster, capacity: i32, pushed: bool) -> bool {
    !c.gated
        && c.head_ready
        && !pushed
        && reported(c) == Some(capacity)
        && matches!(c.serve, ServeObservation::Apps { ready: true, .. })
}

pub(crate) fn step(s: &Snapshot, o: &IncrementalOptions, t: &TrafficView, p: &mut Plan) {
    let mut notes: Vec<String> = Vec::new();
    let mut active = s.status.active.clone();
    let mut pending = s.status.pending.clone();
    let active_obj = active.as_deref().and_then(|n| s.cluster(n));
    let stored_pending_obj = pending.as_deref().and_then(|n| s.cluster(n));
    let (at, pt) = (s.status.active_traffic, s.status.pending_traffic);

    // 1. Rollback: the spec left the pending cluster's after traffic or capacity moved to it.
    let (rolling_back, keep_spec, moved) =
        rollback(s, t, active_obj, stored_pending_obj, &active, &pending, p);
    let decision = if rolling_back || keep_spec {
        SpecDecision::Keep
    } else {
        // Past the upgrade deadline, a pending cluster is dropped only while nothing has moved to
        // it; after that, reverting the spec rolls back.
        spec_decision(s, !moved, &mut notes)
    };
    apply_spec_decision(
        s,
        &decision,
        active.is_some(),
        &mut pending,
        p,
        " for an incremental upgrade",
        " before anything moved",
    );
    let fresh = matches!(decision, SpecDecision::NewPending);
    let pending_obj = if fresh {
        None
    } else {
        pending.as_deref().and_then(|n| s.cluster(n))
    };

    // 2-4. Create the pending cluster, open gates, in-place updates (as blue/green does).
    if let (false, Some(name), None) = (fresh, &pending, pending_obj) {
        running::create_cluster(s, name, active_obj.is_some(), active_obj.is_some(), p);
    }
    running::open_gates(s, [active_obj, pending_obj], &mut notes, p);
    let may_touch_active = s.status.pending.is_none() && pending.is_none() && !fresh;
    running::update_in_place(s, [active_obj.filter(|_| may_touch_active), pending_obj], p);

    // 5. Capacities as they stand, and the Serve config where it is due (with the capacity).
    let mut levels = Levels {
        active_cap: capacity(active_obj, at.target_capacity, 100),
        pending_cap: match (pending_obj, active_obj) {
            (Some(pc), Some(_)) => capacity(Some(pc), pt.target_capacity, 0),
            // The first cluster, or one left without an active: all of it.
            _ => 100,
        },
        active_traffic: match active_obj {
            Some(a) => route_weight(t, &a.name, at.traffic, 100),
            None => 0,
        },
    };
    let serve_targets = [
        pending_obj
            .filter(|_| !rolling_back)
            .map(|c| (c, levels.pending_cap)),
        active_obj
            .filter(|_| may_touch_active)
            .map(|c| (c, levels.active_cap)),
    ];
    let mut pushed = push_serve_configs(s, serve_targets, &mut notes, p);
    // A cluster not given the desired config that lost its apps gets its own back, at the capacity
    // it stands at (issue 47).
    let pushed_names: Vec<&str> = pushed.iter().map(String::as_str).collect();
    let restored = running::restore_own_configs(
        [
            (active_obj, Some(levels.active_cap)),
            (pending_obj, Some(levels.pending_cap)),
        ],
        &pushed_names,
        p,
    );
    pushed.extend(restored);
    let was_pushed = |c: &ChildCluster| pushed.contains(&c.name);

    // 6. The per-cluster serve Services and the Gateway.
    ensure_traffic_objects(t, [active_obj, pending_obj], p);
    attachment_problem(s, t, &mut notes, p);

    // 7. The upgrade (or rollback) machine, one move per pass.
    let ended = match (active_obj, pending_obj) {
        (Some(a), Some(pc)) => upgrade_move(
            s,
            o,
            t,
            (a, pc),
            rolling_back,
            &was_pushed,
            &mut levels,
            &mut notes,
            p,
        ),
        _ => Ended::default(),
    };

    // 8. Capacity changes Serve has not applied yet (a PUT of the config each cluster already runs).
    for (c, cap) in [(active_obj, levels.active_cap), (pending_obj, levels.pending_cap)] {
        let Some(c) = c else { continue };
        if !was_pushed(c) && reported(c).is_some_and(|r| r != cap) && !c.gated && c.head_ready {
            p.actions.push(Action::SetTargetCapacity {
                cluster: c.name.clone(),
                percent: cap,
            });
        }
    }

    // 9. Promotion, rollback completion, or the first cluster coming up.
    settle_roles(
        s,
        &ended,
        (active_obj, pending_obj),
        &was_pushed,
        (&mut active, &mut pending),
        &mut levels,
        p,
    );

    // 10. The route: the active cluster, plus the pending one once its serve Service exists.
    let statuses = route(s, t, &active, &pending, &levels, (at, pt), p);

    // 11. Head pods' serve label, dangling clusters, status.
    running::head_serve_labels(s, [&active, &pending], p);
    reap_unnamed(s, &active, &pending, p);
    let traffic_of = |n: &str| statuses.iter().find(|(c, _)| c == n).map(|(_, t)| *t);
    let active_status = active
        .as_deref()
        .map(|n| running::service_status(s, n, traffic_of(n)));
    let pending_status = pending
        .as_deref()
        .map(|n| running::service_status(s, n, traffic_of(n)));
    let rollback_cond = rollback_condition(rolling_back && !ended.rollback_done, &active, &pending);
    running::status(s, active_status, pending_status, notes, Some(rollback_cond), p);
}

/// Where capacity (Serve's `target_capacity`) and traffic (the active cluster's route weight) stand
/// during one pass, in percent.
struct Levels {
    active_cap: i32,
    pending_cap: i32,
    active_traffic: i32,
}

/// How the upgrade (or rollback) machine ended this pass.
#[derive(Default)]
struct Ended {
    rollback_done: bool,
    upgrade_done: bool,
}

/// Who is active once the machine ended its move: the pending cluster is promoted when the upgrade is
/// done, dropped when a rollback is, and the first cluster becomes active once it serves at full capacity.
fn settle_roles(
    s: &Snapshot,
    ended: &Ended,
    (active_obj, pending_obj): (Option<&ChildCluster>, Option<&ChildCluster>),
    was_pushed: &dyn Fn(&ChildCluster) -> bool,
    (active, pending): (&mut Option<String>, &mut Option<String>),
    levels: &mut Levels,
    p: &mut Plan,
) {
    if ended.upgrade_done {
        let (old, new) = (active.take(), pending.take());
        p.event(
            EventType::Normal,
            "PromotedPendingCluster",
            format!(
                "RayCluster {} is now active; {} will be deleted after {}s",
                new.as_deref().unwrap_or_default(),
                old.as_deref().unwrap_or_default(),
                s.deletion_delay.as_secs()
            ),
        );
        *active = new;
        levels.active_cap = 100;
    } else if ended.rollback_done {
        if let Some(old) = pending.take() {
            p.event(
                EventType::Normal,
                "RollbackComplete",
                format!(
                    "traffic and capacity are back on {}; {old} will be deleted after {}s",
                    active.as_deref().unwrap_or_default(),
                    s.deletion_delay.as_secs()
                ),
            );
        }
    } else if let (None, Some(pc)) = (active_obj, pending_obj)
        && serving_at(pc, 100, was_pushed(pc))
    {
        *active = pending.take();
        levels.active_cap = 100;
        levels.active_traffic = 100;
    }
}

/// A cluster's weight in the route as the gateway holds it, else what status stored.
fn route_weight(t: &TrafficView, name: &str, stored: Option<i32>, default: i32) -> i32 {
    if t.route_exists && !t.backends.is_empty() {
        t.weight(name)
    } else {
        stored.unwrap_or(default)
    }
}

/// Whether to roll back (the spec left the pending cluster's after traffic or capacity moved to it,
/// and the active cluster is there to go back to), whether the spec decision is held either way, and
/// whether traffic or capacity moved at all. With the active cluster gone, the upgrade continues,
/// with a Warning event.
fn rollback(
    s: &Snapshot,
    t: &TrafficView,
    active_obj: Option<&ChildCluster>,
    stored_pending_obj: Option<&ChildCluster>,
    active: &Option<String>,
    pending: &Option<String>,
    p: &mut Plan,
) -> (bool, bool, bool) {
    let (at, pt) = (s.status.active_traffic, s.status.pending_traffic);
    let moved = stored_pending_obj.is_some_and(|pc| {
        route_weight(t, &pc.name, pt.traffic, 0) > 0
            || capacity(Some(pc), pt.target_capacity, 0) > 0
            || capacity(active_obj, at.target_capacity, 100) < 100
    });
    let spec_left_pending =
        stored_pending_obj.is_some_and(|pc| s.desired.compare(pc) == HashMatch::Different);
    let rolling_back = moved && spec_left_pending && active_obj.is_some();
    if moved && spec_left_pending && active_obj.is_none() {
        p.event(
            EventType::Warning,
            "RollbackImpossible",
            format!(
                "the cluster spec changed but active cluster {} is gone: upgrade continues on {}",
                active.as_deref().unwrap_or("<none>"),
                pending.as_deref().unwrap_or("<none>")
            ),
        );
    }
    (rolling_back, moved && spec_left_pending, moved)
}

/// Pushes the Serve config, with its capacity, to each target where it is due; returns the clusters
/// it was pushed to.
fn push_serve_configs(
    s: &Snapshot,
    targets: [Option<(&ChildCluster, i32)>; 2],
    notes: &mut Vec<String>,
    p: &mut Plan,
) -> Vec<String> {
    let mut pushed: Vec<String> = Vec::new();
    for (c, cap) in targets.into_iter().flatten() {
        if let Some(reason) = running::push_reason(s, c) {
            p.actions.push(Action::PushServeConfig {
                cluster: c.name.clone(),
                target_capacity: Some(cap),
            });
            p.event(
                EventType::Normal,
                "UpdatedServeApplications",
                format!(
                    "deploying the Serve config to {} at {cap}% capacity ({reason})",
                    c.name
                ),
            );
            pushed.push(c.name.clone());
        }
        if let ServeObservation::Unreachable(e) = &c.serve {
            notes.push(format!("dashboard of {} unreachable: {e}", c.name));
        }
    }
    pushed
}

/// The per-cluster serve Services and the Gateway.
fn ensure_traffic_objects(t: &TrafficView, clusters: [Option<&ChildCluster>; 2], p: &mut Plan) {
    for c in clusters.into_iter().flatten() {
        if !c.deleting && !t.serve_services.contains(&c.name) {
            p.actions.push(Action::EnsureServeService {
                cluster: c.name.clone(),
            });
        }
    }
    if !t.gateway_current {
        p.actions.push(Action::ApplyGateway);
    }
}

/// A Gateway annotation that names nothing usable (`adopt`) is said in the upgrade condition, with
/// a Warning event when the stored condition does not say it yet.
fn attachment_problem(s: &Snapshot, t: &TrafficView, notes: &mut Vec<String>, p: &mut Plan) {
    let Some(problem) = &t.problem else { return };
    let said = s
        .status
        .condition(cond::UPGRADE_IN_PROGRESS)
        .is_some_and(|c| c.message.contains(problem.as_str()));
    if !said {
        p.event(EventType::Warning, "InvalidGatewayAttachment", problem.clone());
    }
    notes.push(problem.clone());
}

/// One move of the upgrade (or, `rolling_back`, the rollback) machine between the active cluster `a`
/// and the pending one `pc`: what blocks it, else [`next_move`] on where things stand; the move is
/// applied to `levels`.
#[allow(clippy::too_many_arguments)]
fn upgrade_move(
    s: &Snapshot,
    o: &IncrementalOptions,
    t: &TrafficView,
    (a, pc): (&ChildCluster, &ChildCluster),
    rolling_back: bool,
    was_pushed: &dyn Fn(&ChildCluster) -> bool,
    levels: &mut Levels,
    notes: &mut Vec<String>,
    p: &mut Plan,
) -> Ended {
    let mut ended = Ended::default();
    let both_routed = t.route_shape_current
        && t.backends.iter().any(|(n, _)| *n == a.name)
        && t.backends.iter().any(|(n, _)| *n == pc.name);
    let blocker = if pc.gated {
        Some(match &s.admission {
            Admission::QueueManaged {
                waiting: Some(why), ..
            } => format!("pending cluster {} is gated: {why}", pc.name),
            _ => format!("pending cluster {} waits for quota admission", pc.name),
        })
    } else if !rolling_back && !s.admission.may_take_traffic(&pc.name) {
        Some(format!(
            "pending cluster {} takes traffic once its workload slice keeps it from preemption",
            pc.name
        ))
    } else if t.problem.is_some() {
        Some("traffic moves once the Gateway annotation names a usable Gateway and HTTPRoute".into())
    } else if !t.gateway_ready {
        Some(format!(
            "Gateway {} is not Accepted and Programmed yet",
            t.gateway
        ))
    } else if !t.route_ready || !both_routed {
        Some("the HTTPRoute does not route to both clusters yet".into())
    } else {
        None
    };
    let Levels {
        active_cap,
        pending_cap,
        active_traffic,
    } = *levels;
    let pending_traffic = 100 - active_traffic;
    let last = last_move(s, t, a, pc);
    let interval_passed = last.is_none_or(|l| s.now >= l + o.interval);
    let (gain, lose) = if rolling_back { (a, pc) } else { (pc, a) };
    let progress = Progress {
        gain_capacity: if rolling_back { active_cap } else { pending_cap },
        lose_capacity: if rolling_back { pending_cap } else { active_cap },
        traffic: if rolling_back {
            active_traffic
        } else {
            pending_traffic
        },
        gain_serving: serving_at(
            gain,
            if rolling_back { active_cap } else { pending_cap },
            was_pushed(gain),
        ),
        interval_passed,
        traffic_settled: interval_passed && t.route_current,
    };
    let mv = match blocker {
        Some(why) => Move::Wait(why),
        None => next_move(&progress, o),
    };
    match mv {
        Move::Traffic(to_gain) => {
            let new_active = if rolling_back { to_gain } else { 100 - to_gain };
            p.event(
                EventType::Normal,
                "UpdatedHTTPRoute",
                format!(
                    "traffic {} {new_active}% / {} {}%",
                    a.name,
                    pc.name,
                    100 - new_active
                ),
            );
            levels.active_traffic = new_active;
        }
        Move::Shrink(v) => {
            p.event(
                EventType::Normal,
                "UpdatedTargetCapacity",
                format!("{} target_capacity {v}%", lose.name),
            );
            if rolling_back {
                levels.pending_cap = v
            } else {
                levels.active_cap = v
            }
        }
        Move::Grow(v) => {
            p.event(
                EventType::Normal,
                "UpdatedTargetCapacity",
                format!("{} target_capacity {v}%", gain.name),
            );
            if rolling_back {
                levels.active_cap = v
            } else {
                levels.pending_cap = v
            }
        }
        Move::Done if rolling_back => ended.rollback_done = true,
        Move::Done => ended.upgrade_done = true,
        Move::Wait(why) => notes.push(why),
    }
    ended
}

/// The route: the active cluster, plus the pending one once its serve Service exists; the head
/// Service on the active cluster. Returns each routed cluster's traffic status (`stored`: the active
/// and pending ones as status held them).
fn route(
    s: &Snapshot,
    t: &TrafficView,
    active: &Option<String>,
    pending: &Option<String>,
    levels: &Levels,
    (at, pt): (TrafficStatus, TrafficStatus),
    p: &mut Plan,
) -> Vec<(String, TrafficStatus)> {
    let mut statuses: Vec<(String, TrafficStatus)> = Vec::new();
    let Levels {
        active_cap,
        pending_cap,
        active_traffic,
    } = *levels;
    if let Some(a) = active.as_deref().filter(|a| s.cluster(a).is_some()) {
        let mut backends = vec![(a.to_string(), active_traffic)];
        if let Some(pn) = pending.as_deref().filter(|n| t.serve_services.contains(*n)) {
            backends.push((pn.to_string(), 100 - active_traffic));
        } else {
            backends[0].1 = 100;
        }
        // A Gateway annotation that names nothing usable: no route is written in its place.
        let writable = t.problem.is_none();
        if writable && (!t.route_exists || !t.route_shape_current || t.backends != backends) {
            let reason = if t.route_exists {
                "UpdatedHTTPRoute"
            } else {
                "CreatedHTTPRoute"
            };
            if !t.route_exists {
                p.event(
                    EventType::Normal,
                    reason,
                    format!("routing {} through {}", a, t.gateway),
                );
            }
            p.actions.push(Action::SetRoute {
                backends: backends.clone(),
            });
        }
        for (name, weight) in &backends {
            let is_active = name == a;
            let prior = if Some(name) == s.status.active.as_ref() {
                at
            } else if Some(name) == s.status.pending.as_ref() {
                pt
            } else {
                TrafficStatus::default()
            };
            let cap = if is_active { active_cap } else { pending_cap };
            statuses.push((name.clone(), traffic_status(s, prior, cap, *weight)));
        }
        if s.head_service.as_deref() != Some(a) {
            p.actions.push(Action::PointHeadService {
                cluster: a.to_string(),
            });
        }
    } else if let Some(pn) = pending.as_deref() {
        statuses.push((pn.to_string(), traffic_status(s, pt, pending_cap, 0)));
    }
    statuses
}

/// `RollbackInProgress`: true while a rollback runs (`in_progress`), naming the two clusters.
fn rollback_condition(
    in_progress: bool,
    active: &Option<String>,
    pending: &Option<String>,
) -> super::plan::ConditionPlan {
    if in_progress {
        cond::set(
            c::COND_ROLLBACK_IN_PROGRESS,
            cond::TRUE,
            c::REASON_DESIRED_CLUSTER_SPEC_CHANGED,
            format!(
                "the cluster spec no longer matches pending cluster {}: traffic and capacity move back to {}",
                pending.as_deref().unwrap_or_default(),
                active.as_deref().unwrap_or_default()
            ),
        )
    } else {
        cond::set(
            c::COND_ROLLBACK_IN_PROGRESS,
            cond::FALSE,
            c::REASON_NO_PENDING_CLUSTER,
            "no rollback in progress",
        )
    }
}

/// When traffic last moved: the later of the two stored times, or now when the route's weights no
/// longer match what status recorded (a move whose status write was lost: the interval restarts).
fn last_move(s: &Snapshot, t: &TrafficView, a: &ChildCluster, pc: &ChildCluster) -> Option<Timestamp> {
    let (at, pt) = (s.status.active_traffic, s.status.pending_traffic);
    let unrecorded = t.route_exists
        && (at.traffic.is_some_and(|v| v != t.weight(&a.name))
            || pt.traffic.is_some_and(|v| v != t.weight(&pc.name)));
    if unrecorded {
        return Some(s.now);
    }
    at.last_migrated.max(pt.last_migrated).map(end_of_second)
}

/// `lastTrafficMigratedTime` is a metav1.Time, stored to the second: the move happened up to a
/// second after what status says, so intervals count from the end of that second (never early).
fn end_of_second(t: Timestamp) -> Timestamp {
    if t.subsec_nanosecond() == 0 {
        t.checked_add(jiff::SignedDuration::from_secs(1)).unwrap_or(t)
    } else {
        t
    }
}

/// A cluster's status bookkeeping after this pass: `lastTrafficMigratedTime` moves when its traffic
/// changed from what status recorded.
fn traffic_status(s: &Snapshot, prior: TrafficStatus, capacity: i32, traffic: i32) -> TrafficStatus {
    let changed = prior.traffic != Some(traffic);
    TrafficStatus {
        target_capacity: Some(capacity),
        traffic: Some(traffic),
        last_migrated: if changed && prior.traffic.is_some() {
            Some(s.now)
        } else {
            prior.last_migrated
        },
    }
}
