//! The running-service state machine for `NewCluster` (blue/green) and `None`.
//!
//! Phases are read from the names stored in status, which is the source of truth for "which clusters
//! are mine" (a pending name is written before its RayCluster exists):
//!
//! ```text
//! Starting (no active)  --name pending--> Starting(pending) --create--> ... --pending ready: point
//!                                          Services, promote--> Serving(active)
//! Serving(active)       --spec change, NewCluster--> Upgrading(active, pending)
//!                       --spec change, None--> Serving (change ignored, said so in status)
//!                       --groups appended / serve config--> Serving (applied in place)
//! Upgrading(a, p)       --another change--> Upgrading(a, p') (p dangles, deleted after the delay)
//!                       --change reverted to a's spec--> Serving(a) (p dangles)
//!                       --p admitted + ready: switch Services--> Serving(p) (a dangles)
//! ```
//! While a pending cluster exists the active one is never updated or re-configured (DESIGN I4).

use super::plan::{Action, EventType, Plan};
use super::running;
use super::schedule::reap_unnamed;
use super::snapshot::{ChildCluster, HashMatch, ServeObservation, Snapshot};

pub(crate) fn step(s: &Snapshot, p: &mut Plan) {
    let mut notes: Vec<String> = Vec::new();
    let mut active = s.status.active.clone();
    let mut pending = s.status.pending.clone();

    // 1. Does the desired spec need a new cluster, or does a revert cancel the pending one?
    let decision = spec_decision(s, true, &mut notes);
    apply_spec_decision(s, &decision, active.is_some(), &mut pending, p, "", "");
    let fresh = matches!(decision, SpecDecision::NewPending);
    let active_obj = active.as_deref().and_then(|n| s.cluster(n));
    // A pending named in this pass is created on the next one, once its name is durable in status.
    let pending_obj = if fresh {
        None
    } else {
        pending.as_deref().and_then(|n| s.cluster(n))
    };

    // 2. Create the named pending cluster (gated when queue-managed and not yet admitted).
    if let (false, Some(name), None) = (fresh, &pending, pending_obj) {
        running::create_cluster(s, name, active_obj.is_some(), false, p);
    }

    // 3. Open gates the quota now covers.
    running::open_gates(s, [active_obj, pending_obj], &mut notes, p);

    // 4. In-place updates: appended worker groups or an operator-version re-stamp.
    // Only once "no pending" is durable: not in the pass that cancels or names one.
    let may_touch_active = s.status.pending.is_none() && pending.is_none() && !fresh;
    running::update_in_place(s, [active_obj.filter(|_| may_touch_active), pending_obj], p);

    // 5. Serve config: to the pending cluster; to the active only when no other cluster is coming
    //    (a config meant for a new cluster spec must not reach the old one — KubeRay #3423).
    let serve_targets = [pending_obj, active_obj.filter(|_| may_touch_active)];
    let mut pushed = push_serve_configs(s, serve_targets, &mut notes, p);
    // A cluster not given the desired config that lost its apps gets its own back (issue 47).
    let pushed_names: Vec<&str> = pushed.iter().map(String::as_str).collect();
    let restored = running::restore_own_configs([(active_obj, None), (pending_obj, None)], &pushed_names, p);
    pushed.extend(restored);

    // 6. Services follow the pending cluster once it is ready, else the active one. Once they point at
    //    the pending cluster they never swing back: that switch is the commit point of the upgrade.
    let serve_on_pending = pending.is_some() && !fresh && s.serve_service.as_deref() == pending.as_deref();
    let target = if serve_on_pending {
        pending.clone()
    } else {
        services_target(s, [pending_obj, active_obj], &pushed, &mut notes)
    };
    point_services(s, target.as_deref(), p);
    let serving: Option<String> = target.or_else(|| s.serve_service.clone());

    // 7. Promote once traffic goes to the pending cluster.
    if pending.is_some() && !fresh && serving == pending {
        active = promote(s, pending.take(), active.as_deref(), p);
    }

    // 8. Head pods as serve endpoints (`ray.io/serve`), unless excluded.
    running::head_serve_labels(s, [&active, &pending], p);

    // 9. Dangling clusters: deadline first, deletion on a later pass.
    reap_unnamed(s, &active, &pending, p);

    // 10. Status.
    let (active_status, pending_status) = (
        active.as_deref().map(|n| running::service_status(s, n, None)),
        pending.as_deref().map(|n| running::service_status(s, n, None)),
    );
    running::status(s, active_status, pending_status, notes, None, p);
}

/// Pushes the desired Serve config to each target where it is due; returns the clusters it was pushed
/// to.
fn push_serve_configs(
    s: &Snapshot,
    targets: [Option<&ChildCluster>; 2],
    notes: &mut Vec<String>,
    p: &mut Plan,
) -> Vec<String> {
    let mut pushed: Vec<String> = Vec::new();
    for c in targets.into_iter().flatten() {
        if let Some(reason) = running::push_reason(s, c) {
            p.actions.push(Action::PushServeConfig {
                cluster: c.name.clone(),
                target_capacity: None,
            });
            p.event(
                EventType::Normal,
                "UpdatedServeApplications",
                format!("deploying the Serve config to {} ({reason})", c.name),
            );
            pushed.push(c.name.clone());
        }
        if let ServeObservation::Unreachable(e) = &c.serve {
            notes.push(format!("dashboard of {} unreachable: {e}", c.name));
        }
    }
    pushed
}

/// The first of `candidates` (pending, then active) ready to take traffic. A status read before this
/// pass's PUT says nothing about the new config (KubeRay §3.6), so a cluster just pushed to waits.
/// A ready cluster that preemption may still take as growth waits until the admitted slice keeps it
/// (the status written this pass announces it: `rayservice::job::growth`).
fn services_target(
    s: &Snapshot,
    candidates: [Option<&ChildCluster>; 2],
    pushed: &[String],
    notes: &mut Vec<String>,
) -> Option<String> {
    let ready = |c: &ChildCluster| {
        !c.gated
            && c.head_ready
            && !pushed.contains(&c.name)
            && matches!(c.serve, ServeObservation::Apps { ready: true, .. })
    };
    for c in candidates.into_iter().flatten().filter(|c| ready(c)) {
        if s.admission.may_take_traffic(&c.name) {
            return Some(c.name.clone());
        }
        notes.push(format!(
            "RayCluster {} is ready; traffic moves to it once its workload slice keeps it from preemption",
            c.name
        ));
    }
    None
}

/// Points the head and serve Services at `target` unless both already point there.
fn point_services(s: &Snapshot, target: Option<&str>, p: &mut Plan) {
    let Some(t) = target else {
        return;
    };
    if s.head_service.as_deref() == Some(t) && s.serve_service.as_deref() == Some(t) {
        return;
    }
    p.actions.push(Action::PointServices {
        cluster: t.to_string(),
    });
    let (reason, verb) = if s.serve_service.is_none() {
        ("CreatedService", "creating")
    } else {
        ("UpdatedService", "switching")
    };
    p.event(
        EventType::Normal,
        reason,
        format!("{verb} the head and serve Services to RayCluster {t}"),
    );
}

/// The pending cluster becomes the active one; the old active is left to dangle and be deleted later.
/// Returns the new active name.
fn promote(s: &Snapshot, promoted: Option<String>, old: Option<&str>, p: &mut Plan) -> Option<String> {
    if let (Some(new), Some(old)) = (&promoted, old) {
        p.event(
            EventType::Normal,
            "PromotedPendingCluster",
            format!(
                "RayCluster {new} is now active; {old} will be deleted after {}s",
                s.deletion_delay.as_secs()
            ),
        );
    }
    promoted
}

pub(super) enum SpecDecision {
    Keep,
    NewPending,
    CancelPending,
    /// The pending cluster ran past the upgrade deadline without taking the traffic: drop it and
    /// record its spec as failed. The message says so.
    Abandon(String),
}

/// KubeRay's `shouldPrepareNewCluster`, plus: reverting to the active spec while the pending cluster is
/// not yet serving cancels the upgrade instead of building a third cluster (KubeRay #4989's A->B->A);
/// a pending cluster past the upgrade deadline is dropped when `may_abandon` (nothing moved to it
/// yet), and a spec dropped so is not tried again until it changes.
pub(super) fn spec_decision(s: &Snapshot, may_abandon: bool, notes: &mut Vec<String>) -> SpecDecision {
    let active = s.status.active.as_deref().and_then(|n| s.cluster(n));
    if let Some(pending) = s.status.pending.as_deref() {
        if s.serve_service.as_deref() == Some(pending) {
            return SpecDecision::Keep; // already switched; promotion finishes it
        }
        if active.is_some_and(|a| s.desired.compare(a) == HashMatch::Equal) {
            return SpecDecision::CancelPending;
        }
        return match s.cluster(pending) {
            None => SpecDecision::Keep, // about to be created from the current spec
            Some(c) if s.desired.compare(c) == HashMatch::Different && s.strategy.prepares_new_cluster() => {
                SpecDecision::NewPending
            }
            Some(c) => match past_deadline(s, c).filter(|_| may_abandon && active.is_some()) {
                Some(why) => {
                    notes.push(why.clone());
                    SpecDecision::Abandon(why)
                }
                None => SpecDecision::Keep,
            },
        };
    }
    match active {
        // Nothing named yet, or the active cluster vanished: a cluster is needed whatever the strategy.
        None => SpecDecision::NewPending,
        Some(a) if s.desired.compare(a) != HashMatch::Different => SpecDecision::Keep,
        Some(a) if s.failed_upgrade.as_deref() == Some(s.desired.hash.as_str()) => {
            notes.push(format!(
                "the upgrade to this cluster spec passed its deadline and was dropped (cluster {} keeps serving): change the spec, or remove the {} annotation, to try again",
                a.name,
                crate::api::ray::constants::ANNOTATION_FAILED_UPGRADE
            ));
            SpecDecision::Keep
        }
        Some(_) if s.strategy.prepares_new_cluster() => SpecDecision::NewPending,
        Some(a) => {
            notes.push(format!(
                "cluster spec change ignored: upgradeStrategy.type is None (cluster {} keeps its spec)",
                a.name
            ));
            SpecDecision::Keep
        }
    }
}

/// A spec decision's event, applied to the pending cluster's name: a new pending cluster (replacing
/// one not yet switched to), or the pending cluster dropped by a revert. `purpose` and `cancel_when`
/// qualify the messages (" for an incremental upgrade", " before anything moved").
pub(crate) fn apply_spec_decision(
    s: &Snapshot,
    decision: &SpecDecision,
    has_active: bool,
    pending: &mut Option<String>,
    p: &mut Plan,
    purpose: &str,
    cancel_when: &str,
) {
    match decision {
        SpecDecision::NewPending => {
            let message = match pending.as_deref() {
                Some(old) => format!(
                    "cluster spec changed again: pending cluster {old} is replaced by {}",
                    s.fresh_name
                ),
                None if has_active => format!(
                    "cluster spec changed: preparing pending cluster {}{purpose}",
                    s.fresh_name
                ),
                None => format!("preparing the first cluster {}", s.fresh_name),
            };
            p.event(EventType::Normal, "PreparingNewCluster", message);
            *pending = Some(s.fresh_name.clone());
        }
        SpecDecision::CancelPending => {
            if let Some(old) = pending.take() {
                p.event(
                    EventType::Normal,
                    "UpgradeCancelled",
                    format!("cluster spec reverted to the active cluster's{cancel_when}: pending cluster {old} is no longer needed"),
                );
            }
        }
        SpecDecision::Abandon(why) => {
            if pending.take().is_some() {
                p.actions.push(Action::RecordFailedUpgrade {
                    hash: s.desired.hash.clone(),
                });
                p.event(
                    EventType::Warning,
                    crate::api::ray::constants::REASON_UPGRADE_DEADLINE_EXCEEDED,
                    why.clone(),
                );
            }
        }
        SpecDecision::Keep => {}
    }
}

/// Why the pending cluster `c` is past the upgrade deadline, if it is: it has been allowed to run
/// (admitted) for longer than the deadline.
fn past_deadline(s: &Snapshot, c: &ChildCluster) -> Option<String> {
    let deadline = s.upgrade_deadline?;
    let since = c.running_since?;
    let due = since.checked_add(deadline).ok()?;
    (s.now >= due).then(|| {
        format!(
            "pending cluster {} did not take the traffic within the upgrade deadline ({}s after quota admitted it): the upgrade is dropped and the cluster deleted to release its quota; the active cluster keeps serving",
            c.name,
            deadline.as_secs()
        )
    })
}
