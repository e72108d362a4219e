//! Desired ClusterQueue and LocalQueue status, computed from the admission core and the Workloads
//! in the cache. Pure: the loop compares the result with what is stored and writes only differences.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::conditions::{cond, set_condition};
use crate::api::kueue::constants::{condition, reason};
use crate::api::kueue::{
    ClusterQueue, ClusterQueueStatus, FairSharingStatus, FlavorUsage, LocalQueue, LocalQueueFlavorUsage,
    LocalQueueResourceUsage, LocalQueueStatus, ResourceUsage, StopPolicy, Workload,
};
use crate::api::quantity::{resource_quantity, resource_value};
use crate::queue;

fn q(resource: &str, v: i64) -> Quantity {
    resource_quantity(resource, v).into()
}

/// Kueue's `Active` condition of a ClusterQueue: reason and message.
pub fn cluster_queue_active(
    cq: &ClusterQueue,
    known_flavors: &BTreeSet<String>,
    checks: &super::checks::CheckProblems,
    core_inactive: Option<&str>,
) -> (bool, String, String) {
    // Kueue's words for a deleted ClusterQueue its finalizer keeps (`clusterqueue_controller_test.go`,
    // "Should keep the status counters and Active condition accurate while terminating").
    if cq.metadata.deletion_timestamp.is_some() {
        return (
            false,
            reason::TERMINATING.to_string(),
            "Can't admit new workloads; clusterQueue is terminating".to_string(),
        );
    }
    let mut reasons = Vec::new();
    let mut messages = Vec::new();
    if cq.spec.stop_policy() != StopPolicy::None {
        reasons.push(reason::STOPPED);
        messages.push("is stopped".to_string());
    }
    let missing: Vec<&str> = cq
        .spec
        .resource_groups()
        .iter()
        .flat_map(|g| g.flavors.iter())
        .map(|f| f.name.as_str())
        .filter(|n| !known_flavors.contains(*n))
        .collect();
    if !missing.is_empty() {
        reasons.push(reason::FLAVOR_NOT_FOUND);
        messages.push(format!(
            "references missing ResourceFlavor(s): {}",
            missing.join(",")
        ));
    }
    if !checks.missing.is_empty() {
        reasons.push(reason::ADMISSION_CHECK_NOT_FOUND);
        messages.push(format!(
            "references missing AdmissionCheck(s): {}",
            checks.missing.join(",")
        ));
    }
    if !checks.inactive.is_empty() {
        reasons.push(reason::ADMISSION_CHECK_INACTIVE);
        messages.push(format!(
            "references inactive AdmissionCheck(s): {}",
            checks.inactive.join(",")
        ));
    }
    if reasons.is_empty() {
        if let Some(m) = core_inactive {
            return (
                false,
                reason::UNKNOWN.to_string(),
                format!("Can't admit new workloads: {m}."),
            );
        }
        return (
            true,
            reason::READY.to_string(),
            "Can admit new workloads".to_string(),
        );
    }
    (
        false,
        reasons[0].to_string(),
        format!("Can't admit new workloads: {}.", messages.join(", ")),
    )
}

fn usage_api(u: &[queue::FlavorUsage]) -> Vec<FlavorUsage> {
    u.iter()
        .map(|f| FlavorUsage {
            name: f.name.clone(),
            resources: f
                .resources
                .iter()
                .map(|r| ResourceUsage {
                    name: r.name.clone(),
                    total: Some(q(&r.name, r.total.0)),
                    borrowed: Some(q(&r.name, r.borrowed.0)),
                })
                .collect(),
        })
        .collect()
}

/// The whole desired status of a ClusterQueue; `None` when it equals `cq.status`.
///
/// `share`: the precise weighted share when fair sharing is on; without it a stale
/// `status.fairSharing` is cleared, as Kueue's ClusterQueue controller does.
pub fn cluster_queue(
    cq: &ClusterQueue,
    core: Option<&queue::ClusterQueueStatus>,
    known_flavors: &BTreeSet<String>,
    checks: &super::checks::CheckProblems,
    now: jiff::Timestamp,
    share: Option<f64>,
) -> Option<ClusterQueueStatus> {
    let old = cq.status.clone().unwrap_or_default();
    let mut s = old.clone();
    let (ok, why, msg) = cluster_queue_active(
        cq,
        known_flavors,
        checks,
        core.and_then(|c| c.inactive.as_deref()),
    );
    set_condition(
        &mut s.conditions,
        cond(condition::ACTIVE, ok, &why, &msg, cq.metadata.generation, now),
    );
    if let Some(c) = core {
        s.flavors_reservation = usage_api(&c.flavors_reservation);
        s.flavors_usage = usage_api(&c.flavors_usage);
        s.pending_workloads = i32::try_from(c.pending_workloads).unwrap_or(i32::MAX);
        s.reserving_workloads = i32::try_from(c.reserving_workloads).unwrap_or(i32::MAX);
        s.admitted_workloads = i32::try_from(c.admitted_workloads).unwrap_or(i32::MAX);
    }
    s.fair_sharing = share.map(fair_sharing_status);
    (s != old).then_some(s)
}

/// The LocalQueue a workload is queued in: `<namespace>/<spec.queueName>`.
pub fn local_queue_key(wl: &Workload) -> Option<(String, String)> {
    let q = wl.spec.queue_name.as_deref().filter(|q| !q.is_empty())?;
    Some((wl.metadata.namespace.clone().unwrap_or_default(), q.to_string()))
}

/// Desired LocalQueue status from the workloads queued in it; `None` when unchanged.
pub fn local_queue(
    lq: &LocalQueue,
    cq: Option<&ClusterQueue>,
    cq_active: bool,
    workloads: &[&Workload],
    now: jiff::Timestamp,
) -> Option<LocalQueueStatus> {
    let old = lq.status.clone().unwrap_or_default();
    let mut s = old.clone();
    let (ok, why, msg) = if lq.spec.stop_policy.unwrap_or_default() != StopPolicy::None {
        (false, reason::STOPPED, "LocalQueue is stopped")
    } else if cq.is_none() {
        (
            false,
            "ClusterQueueDoesNotExist",
            "Can't submit new workloads to clusterQueue",
        )
    } else if !cq_active {
        (
            false,
            "ClusterQueueIsInactive",
            "Can't submit new workloads to clusterQueue",
        )
    } else {
        (true, reason::READY, "Can submit new workloads to localQueue")
    };
    set_condition(
        &mut s.conditions,
        cond(condition::ACTIVE, ok, why, msg, lq.metadata.generation, now),
    );
    let (mut pending, mut reserving, mut admitted) = (0, 0, 0);
    let mut reserved: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    let mut used: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for wl in workloads {
        if wl.is_finished() {
            continue;
        }
        let Some(a) = wl.admission().filter(|_| wl.has_quota_reservation()) else {
            if super::conditions::is_active(wl) {
                pending += 1;
            }
            continue;
        };
        reserving += 1;
        let is_admitted = wl.is_admitted();
        if is_admitted {
            admitted += 1;
        }
        for psa in &a.pod_set_assignments {
            for (r, v) in &psa.resource_usage {
                let Some(f) = psa.flavors.get(r) else {
                    continue;
                };
                let Ok(v) = crate::api::quantity::Quantity::try_from(v) else {
                    continue;
                };
                let v = resource_value(r, &v);
                *reserved
                    .entry(f.clone())
                    .or_default()
                    .entry(r.clone())
                    .or_default() += v;
                if is_admitted {
                    *used.entry(f.clone()).or_default().entry(r.clone()).or_default() += v;
                }
            }
        }
    }
    // As Kueue's cache reports them (`localqueue_controller_test.go`): the ClusterQueue's flavors
    // and resources in its spec's order, zeros included; nothing reserved once it is gone.
    let to_api = |m: BTreeMap<String, BTreeMap<String, i64>>| -> Vec<LocalQueueFlavorUsage> {
        let groups = cq.map(|c| c.spec.resource_groups()).unwrap_or_default();
        groups
            .iter()
            .flat_map(|g| {
                g.flavors.iter().map(|f| LocalQueueFlavorUsage {
                    name: f.name.clone(),
                    resources: g
                        .covered_resources
                        .iter()
                        .map(|r| LocalQueueResourceUsage {
                            total: Some(q(
                                r,
                                m.get(&f.name).and_then(|rs| rs.get(r)).copied().unwrap_or(0),
                            )),
                            name: r.clone(),
                        })
                        .collect(),
                })
            })
            .collect()
    };
    if cq.is_none() {
        (reserving, admitted) = (0, 0);
    }
    s.pending_workloads = pending;
    s.reserving_workloads = reserving;
    s.admitted_workloads = admitted;
    s.flavors_reservation = to_api(reserved);
    s.flavors_usage = to_api(used);
    (s != old).then_some(s)
}

fn fair_sharing_status(precise: f64) -> FairSharingStatus {
    FairSharingStatus {
        weighted_share: queue::fair_sharing::status_weighted_share(precise),
    }
}

/// The Cohort status to write, if any: with fair sharing on (`share`), its weighted share;
/// without, Kueue's cohort controller computes nothing and only clears a stale `fairSharing`
/// (e.g. left by an earlier fair-sharing config).
pub fn cohort(c: &crate::api::kueue::Cohort, share: Option<f64>) -> Option<crate::api::kueue::CohortStatus> {
    let old = c.status.clone().unwrap_or_default();
    let mut s = old.clone();
    s.fair_sharing = share.map(fair_sharing_status);
    (s != old).then_some(s)
}
