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

use std::collections::BTreeSet;

use super::conditions as cond;
use super::plan::{Action, EventType, Plan, ServiceStatusPlan, StatusPlan};
use super::schedule::reap_dangling;
use super::snapshot::{Admission, ChildCluster, HashMatch, ServeObservation, Snapshot};

pub(crate) fn step(s: &Snapshot, p: &mut Plan) {
    let mut notes: Vec<String> = Vec::new();
    let mut active = s.status.active.clone();
    let mut pending = s.status.pending.clone();

    // 1. Does the desired spec need a new cluster, or does a revert cancel the pending one?
    let decision = spec_decision(s, &mut notes);
    match &decision {
        SpecDecision::NewPending => {
            let message = match &pending {
                Some(old) => format!(
                    "cluster spec changed again: pending cluster {old} is replaced by {}",
                    s.fresh_name
                ),
                None if active.is_some() => format!(
                    "cluster spec changed: preparing pending cluster {}",
                    s.fresh_name
                ),
                None => format!("preparing the first cluster {}", s.fresh_name),
            };
            p.event(EventType::Normal, "PreparingNewCluster", message);
            pending = Some(s.fresh_name.clone());
        }
        SpecDecision::CancelPending => {
            if let Some(old) = pending.take() {
                p.event(
                    EventType::Normal,
                    "UpgradeCancelled",
                    format!("cluster spec reverted to the active cluster's: pending cluster {old} is no longer needed"),
                );
            }
        }
        SpecDecision::Keep => {}
    }
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
        let gated = s.admission.gate_new_cluster(name, active_obj.is_some());
        p.actions.push(Action::CreateCluster {
            name: name.clone(),
            gated,
        });
        let why = if gated {
            " behind the admission gate (no pods until quota admits it)"
        } else {
            ""
        };
        p.event(
            EventType::Normal,
            "CreatedRayCluster",
            format!("creating RayCluster {name}{why}"),
        );
    }

    // 3. Open gates the quota now covers.
    for c in [active_obj, pending_obj]
        .into_iter()
        .flatten()
        .filter(|c| c.gated)
    {
        if s.admission.admits(&c.name) {
            p.actions.push(Action::OpenGate {
                name: c.name.clone(),
            });
            p.event(
                EventType::Normal,
                "OpenedAdmissionGate",
                format!("quota admits RayCluster {}: its pods may start", c.name),
            );
        } else {
            notes.push(match &s.admission {
                Admission::QueueManaged {
                    waiting: Some(why), ..
                } => format!("pending cluster {} is gated: {why}", c.name),
                _ => format!("pending cluster {} waits for quota admission", c.name),
            });
        }
    }

    // 4. In-place updates: appended worker groups or an operator-version re-stamp.
    // Only once "no pending" is durable: not in the pass that cancels or names one.
    let may_touch_active = s.status.pending.is_none() && pending.is_none() && !fresh;
    let in_place = [active_obj.filter(|_| may_touch_active), pending_obj];
    for c in in_place.into_iter().flatten() {
        let restamp = c.operator_version.as_deref() != Some(s.operator_version.as_str());
        if restamp || s.desired.compare(c) == HashMatch::Appended {
            p.actions.push(Action::UpdateCluster {
                name: c.name.clone(),
            });
            p.event(
                EventType::Normal,
                "UpdatedRayCluster",
                format!("updating RayCluster {} in place", c.name),
            );
        }
    }

    // 5. Serve config: to the pending cluster; to the active only when no other cluster is coming
    //    (a config meant for a new cluster spec must not reach the old one — KubeRay #3423).
    let mut pushed: BTreeSet<&str> = BTreeSet::new();
    let serve_targets = [pending_obj, active_obj.filter(|_| may_touch_active)];
    for c in serve_targets.into_iter().flatten() {
        if let Some(reason) = push_reason(s, c) {
            p.actions.push(Action::PushServeConfig {
                cluster: c.name.clone(),
            });
            p.event(
                EventType::Normal,
                "UpdatedServeApplications",
                format!("deploying the Serve config to {} ({reason})", c.name),
            );
            pushed.insert(&c.name);
        }
        if let ServeObservation::Unreachable(e) = &c.serve {
            notes.push(format!("dashboard of {} unreachable: {e}", c.name));
        }
    }
    // A status read before this pass's PUT says nothing about the new config (KubeRay §3.6).
    let ready = |c: &ChildCluster| {
        !c.gated
            && c.head_ready
            && !pushed.contains(c.name.as_str())
            && matches!(c.serve, ServeObservation::Apps { ready: true, .. })
    };

    // 6. Services follow the pending cluster once it is ready, else the active one. Once they point at
    //    the pending cluster they never swing back: that switch is the commit point of the upgrade.
    let serve_on_pending =
        pending.is_some() && !fresh && s.serve_service.as_deref() == pending.as_deref();
    let target: Option<String> = if serve_on_pending {
        pending.clone()
    } else if let Some(c) = pending_obj.filter(|c| ready(c)) {
        Some(c.name.clone())
    } else {
        active_obj.filter(|c| ready(c)).map(|c| c.name.clone())
    };
    if let Some(t) = target.as_deref()
        && (s.head_service.as_deref() != Some(t) || s.serve_service.as_deref() != Some(t))
    {
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
    let serving: Option<String> = target.or_else(|| s.serve_service.clone());

    // 7. Promote once traffic goes to the pending cluster.
    if pending.is_some() && !fresh && serving == pending {
        let promoted = pending.take();
        if let (Some(new), Some(old)) = (&promoted, &active) {
            p.event(
                EventType::Normal,
                "PromotedPendingCluster",
                format!(
                    "RayCluster {new} is now active; {old} will be deleted after {}s",
                    s.deletion_delay.as_secs()
                ),
            );
        }
        active = promoted;
    }

    // 8. Head pods as serve endpoints (`ray.io/serve`), unless excluded.
    for name in [&active, &pending].into_iter().flatten() {
        let Some(c) = s.cluster(name).filter(|c| !c.gated) else {
            continue;
        };
        let Some(current) = c.head_serve_label else {
            continue;
        };
        // KubeRay: the label is the proxy's health, forced false when the head is excluded.
        let wanted = match (s.exclude_head_from_serve, c.proxy_healthy) {
            (true, _) => false,
            (false, Some(healthy)) => healthy,
            (false, None) => current,
        };
        if wanted != current {
            p.actions.push(Action::SetHeadServeLabel {
                cluster: name.clone(),
                serving: wanted,
            });
        }
    }

    // 9. Dangling clusters: deadline first, deletion on a later pass.
    let kept: Vec<&str> = [&active, &pending]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let was_named: Vec<&str> = [&s.status.active, &s.status.pending]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    reap_dangling(s, &kept, &was_named, p);

    // 10. Status.
    // What the serve Service's EndpointSlices list (KubeRay); a Service created or switched in this
    // pass is counted on the next one, once the slices follow.
    let endpoints = if s.serve_service.is_some() {
        s.serve_endpoints
    } else {
        0
    };
    let failure = [&active, &pending]
        .into_iter()
        .flatten()
        .filter_map(|n| s.cluster(n))
        .find_map(|c| rejection(s, c).or_else(|| cond::deploy_failure(&c.name, &c.serve)));
    if let Some(f) = &failure {
        notes.push(f.clone());
    }
    let ready_cond = cond::ready(&s.status, endpoints, failure.as_deref());
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    let upgrade_cond = cond::upgrade(
        active.as_deref(),
        pending.as_deref(),
        ready_cond.reason,
        note,
    );
    p.status = Some(StatusPlan {
        active: active.as_deref().map(|n| service_status(s, n)),
        pending: pending.as_deref().map(|n| service_status(s, n)),
        num_serve_endpoints: endpoints,
        conditions: vec![ready_cond, upgrade_cond],
        observed_generation: s.generation,
    });
}

enum SpecDecision {
    Keep,
    NewPending,
    CancelPending,
}

/// KubeRay's `shouldPrepareNewCluster`, plus: reverting to the active spec while the pending cluster is
/// not yet serving cancels the upgrade instead of building a third cluster (KubeRay #4989's A->B->A).
fn spec_decision(s: &Snapshot, notes: &mut Vec<String>) -> SpecDecision {
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
            Some(c)
                if s.desired.compare(c) == HashMatch::Different
                    && s.strategy.prepares_new_cluster() =>
            {
                SpecDecision::NewPending
            }
            Some(_) => SpecDecision::Keep,
        };
    }
    match active {
        // Nothing named yet, or the active cluster vanished: a cluster is needed whatever the strategy.
        None => SpecDecision::NewPending,
        Some(a) if s.desired.compare(a) != HashMatch::Different => SpecDecision::Keep,
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

/// Why the Serve config must be (re)deployed to this cluster, if it must.
fn push_reason(s: &Snapshot, c: &ChildCluster) -> Option<&'static str> {
    let wanted = s.desired.serve_config_hash.as_deref()?;
    if c.gated || !c.head_ready || rejection(s, c).is_some() {
        return None;
    }
    match &c.serve {
        ServeObservation::Unreachable(_) => None,
        // Apps vanish when the head restarted without GCS fault tolerance.
        ServeObservation::Apps { apps, .. } if apps.is_empty() => {
            Some("the cluster reports no applications")
        }
        _ if c.served_config_hash.as_deref() != Some(wanted) => {
            Some("new or changed serveConfigV2")
        }
        _ => None,
    }
}

/// The failure message when Ray refused the currently desired config on this cluster.
fn rejection(s: &Snapshot, c: &ChildCluster) -> Option<String> {
    let wanted = s.desired.serve_config_hash.as_deref()?;
    let (hash, message) = c.rejected_config.as_ref()?;
    (hash == wanted).then(|| format!("{}: Ray rejected the Serve config: {message}", c.name))
}

fn service_status(s: &Snapshot, name: &str) -> ServiceStatusPlan {
    let applications = match s.cluster(name).map(|c| &c.serve) {
        Some(ServeObservation::Apps { apps, .. }) => Some(apps.clone()),
        _ => None,
    };
    ServiceStatusPlan {
        cluster: name.to_string(),
        applications,
    }
}
