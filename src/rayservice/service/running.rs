//! Steps both running-service state machines (`bluegreen`, `incremental`) take the same way: creating
//! the pending cluster, opening gates the quota covers, in-place updates, the head pods' serve label,
//! when a Serve config must be (re)pushed, and the status with its conditions.

use super::conditions as cond;
use super::plan::{Action, ConditionPlan, EventType, Plan, ServiceStatusPlan, StatusPlan};
use super::snapshot::{Admission, ChildCluster, HashMatch, ServeObservation, Snapshot, TrafficStatus};
use crate::api::ray::constants::{REASON_AUTOSCALER_SA_NOT_FOUND, REASON_FAILED_CREATE_HEAD_POD};

/// Creates the named cluster, gated when queue-managed and not yet admitted.
pub(super) fn create_cluster(s: &Snapshot, name: &str, has_active: bool, incremental: bool, p: &mut Plan) {
    let gated = s.admission.gate_new_cluster(name, has_active);
    p.actions.push(Action::CreateCluster {
        name: name.to_string(),
        gated,
        incremental,
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

/// Opens the gates the quota now covers; says why the others wait.
pub(super) fn open_gates<'a>(
    s: &Snapshot,
    clusters: impl IntoIterator<Item = Option<&'a ChildCluster>>,
    notes: &mut Vec<String>,
    p: &mut Plan,
) {
    for c in clusters.into_iter().flatten() {
        if !c.gated {
            // Released once, not covered now (e.g. preemption took the upgrade's growth): say why.
            if s.status.pending.as_deref() == Some(c.name.as_str())
                && !s.admission.admits(&c.name)
                && let Admission::QueueManaged {
                    waiting: Some(why), ..
                } = &s.admission
            {
                notes.push(format!("pending cluster {} waits: {why}", c.name));
            }
            continue;
        }
        if s.admission.admits(&c.name) {
            p.actions.push(Action::OpenGate { name: c.name.clone() });
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
}

/// Appended worker groups or an operator-version re-stamp are applied in place.
pub(super) fn update_in_place<'a>(
    s: &Snapshot,
    clusters: impl IntoIterator<Item = Option<&'a ChildCluster>>,
    p: &mut Plan,
) {
    for c in clusters.into_iter().flatten() {
        let restamp = c.operator_version.as_deref() != Some(s.operator_version.as_str());
        if restamp || s.desired.compare(c) == HashMatch::Appended {
            p.actions.push(Action::UpdateCluster { name: c.name.clone() });
            p.event(
                EventType::Normal,
                "UpdatedRayCluster",
                format!("updating RayCluster {} in place", c.name),
            );
        }
    }
}

/// Head pods as serve endpoints (`ray.io/serve`): the proxy's health, forced false when the head is
/// excluded (KubeRay).
pub(super) fn head_serve_labels<'a>(
    s: &Snapshot,
    names: impl IntoIterator<Item = &'a Option<String>>,
    p: &mut Plan,
) {
    for name in names.into_iter().flatten() {
        let Some(c) = s.cluster(name).filter(|c| !c.gated) else {
            continue;
        };
        let Some(current) = c.head_serve_label else {
            continue;
        };
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
}

/// Why the Serve config must be (re)deployed to this cluster, if it must.
pub(super) fn push_reason(s: &Snapshot, c: &ChildCluster) -> Option<&'static str> {
    let wanted = s.desired.serve_config_hash.as_deref()?;
    if c.gated || !c.head_ready || rejection(s, c).is_some() {
        return None;
    }
    match &c.serve {
        ServeObservation::Unreachable(_) => None,
        // Apps vanish when the head restarted without GCS fault tolerance.
        ServeObservation::Apps { apps, .. } if apps.is_empty() => Some("the cluster reports no applications"),
        _ if c.served_config_hash.as_deref() != Some(wanted) => Some("new or changed serveConfigV2"),
        _ => None,
    }
}

/// Whether this cluster gets its own config back: its head reports no applications (restarted
/// without GCS fault tolerance, as KubeRay's `checkIfNeedSubmitServeApplications` reads an empty
/// answer) and the config it last accepted is on record. For a cluster the desired config is not
/// pushed to this pass: the active cluster during an upgrade, whose config is not the spec's.
pub(super) fn restore_own_config(c: &ChildCluster) -> bool {
    !c.gated
        && c.head_ready
        && c.own_config_known
        && matches!(&c.serve, ServeObservation::Apps { apps, .. } if apps.is_empty())
}

/// The current clusters not given the desired config this pass that get their own back, with the
/// event that says so. `capacity` gives each cluster's Serve `target_capacity` (incremental).
pub(super) fn restore_own_configs<'a>(
    clusters: impl IntoIterator<Item = (Option<&'a ChildCluster>, Option<i32>)>,
    pushed: &[&str],
    p: &mut Plan,
) -> Vec<String> {
    let mut restored = Vec::new();
    for (c, target_capacity) in clusters {
        let Some(c) = c.filter(|c| !pushed.contains(&c.name.as_str()) && restore_own_config(c)) else {
            continue;
        };
        p.actions.push(Action::RestoreServeConfig {
            cluster: c.name.clone(),
            target_capacity,
        });
        p.event(
            EventType::Normal,
            "UpdatedServeApplications",
            format!(
                "re-deploying the Serve config RayCluster {} last accepted (the cluster reports no applications)",
                c.name
            ),
        );
        restored.push(c.name.clone());
    }
    restored
}

/// The failure message when Ray refused the currently desired config on this cluster.
pub(super) fn rejection(s: &Snapshot, c: &ChildCluster) -> Option<String> {
    let wanted = s.desired.serve_config_hash.as_deref()?;
    let (hash, message) = c.rejected_config.as_ref()?;
    (hash == wanted).then(|| format!("{}: Ray rejected the Serve config: {message}", c.name))
}

/// A Warning event for each application that has just failed (the stored status does not show it
/// failed yet), so `kubectl describe` says what broke without anyone polling the status.
fn failure_events(s: &Snapshot, named: [&Option<ServiceStatusPlan>; 2], p: &mut Plan) {
    for c in named
        .into_iter()
        .flatten()
        .filter_map(|st| s.cluster(&st.cluster))
    {
        let ServeObservation::Apps { apps, .. } = &c.serve else {
            continue;
        };
        for (app, view) in apps {
            let known = s.status.failed_apps.contains(&(c.name.clone(), app.clone()));
            if view.status != crate::rayservice::dashboard::types::AppStatus::DeployFailed || known {
                continue;
            }
            let single = ServeObservation::Apps {
                apps: [(app.clone(), view.clone())].into(),
                ready: false,
            };
            if let Some(message) = cond::deploy_failure(&c.name, &single) {
                p.event(EventType::Warning, cond::SERVE_DEPLOY_FAILED, message);
            }
        }
    }
}

pub(super) fn service_status(s: &Snapshot, name: &str, traffic: Option<TrafficStatus>) -> ServiceStatusPlan {
    let applications = match s.cluster(name).map(|c| &c.serve) {
        Some(ServeObservation::Apps { apps, .. }) => Some(apps.clone()),
        _ => None,
    };
    ServiceStatusPlan {
        cluster: name.to_string(),
        applications,
        traffic,
    }
}

/// The status of a running service: `Ready` from the serve endpoints and any Serve failure,
/// `UpgradeInProgress` from the clusters named, plus `extra` conditions (incremental: rollback).
pub(super) fn status(
    s: &Snapshot,
    active: Option<ServiceStatusPlan>,
    pending: Option<ServiceStatusPlan>,
    mut notes: Vec<String>,
    extra: Option<ConditionPlan>,
    p: &mut Plan,
) {
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
        .filter_map(|st| s.cluster(&st.cluster))
        .find_map(|c| rejection(s, c).or_else(|| cond::deploy_failure(&c.name, &c.serve)));
    if let Some(f) = &failure {
        notes.push(f.clone());
    }
    // A crash-looping head, or one that cannot be created, says so in the RayService too (issues 47,
    // 63), with a Warning event for each failure the stored upgrade condition does not mention yet.
    let said = s
        .status
        .condition(cond::UPGRADE_IN_PROGRESS)
        .map_or("", |c| c.message.as_str());
    for c in [&active, &pending]
        .into_iter()
        .flatten()
        .filter_map(|st| s.cluster(&st.cluster))
    {
        if let Some(why) = &c.head_failing {
            let note = format!("{}: {why}", c.name);
            // The failure itself, without the time of the next head.
            let failure = note.split(';').next().unwrap_or(&note);
            if !said.contains(failure) {
                // A head that cannot be created is announced under its own reason.
                let reason = [REASON_FAILED_CREATE_HEAD_POD, REASON_AUTOSCALER_SA_NOT_FOUND]
                    .into_iter()
                    .find(|r| why.starts_with(&format!("{r}:")))
                    .unwrap_or("HeadPodBackOff");
                p.event(EventType::Warning, reason, note.clone());
            }
            notes.push(note);
        }
    }
    failure_events(s, [&active, &pending], p);
    let ready_cond = cond::ready(&s.status, endpoints, failure.as_deref());
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    let upgrade_cond = cond::upgrade(
        active.as_ref().map(|a| a.cluster.as_str()),
        pending.as_ref().map(|a| a.cluster.as_str()),
        ready_cond.reason,
        note,
    );
    let mut conditions = vec![ready_cond, upgrade_cond];
    conditions.extend(extra);
    p.status = Some(StatusPlan {
        active,
        pending,
        num_serve_endpoints: endpoints,
        conditions,
        observed_generation: s.generation,
    });
}
