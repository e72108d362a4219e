//! The watcher's per-chain checks, on every event, for one queue-managed RayService and its Workloads:
//! - I4 no disruption: while an upgrade waits for quota (a slice of the chain is pending while another
//!   holds quota), the active cluster keeps its spec (KubeRay's hash, which leaves out worker counts:
//!   those are the autoscaler's and the user's), is not suspended and is not deleted. Eviction is not an
//!   upgrade: while a slice of the chain is evicted, or none holds quota, the active cluster may stop.
//! - I5 crash safety, as the API shows it: a chain never holds two slices that are not linked by
//!   `workload-slice-replacement-for` (a restarted or second manager admitting a duplicate would be).
//!
//! And, once a chaos run has settled (where "exact" is well defined; mid-upgrade a slice briefly covers
//! a cluster that is going away), I3 exact accounting: `exact`.

use std::collections::{BTreeMap, HashSet};

use kube::ResourceExt;

use crate::api::kueue::constants::{condition, label};
use crate::api::kueue::{ClusterQueue, Workload};
use crate::api::ray::{RayCluster, RayService};
use crate::queue::requests::{pod_requests, podset_total};
use crate::rayservice::cluster::hash::hash_without_replicas_and_workers_to_delete;
use crate::rayservice::job::demand;

/// The active cluster as it was when an upgrade of its service began to wait.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Baseline {
    uid: String,
    hash: String,
    suspended: bool,
}

/// A slice holding quota: admitted with its reservation, and not finished.
pub(super) fn holds_quota(w: &Workload) -> bool {
    w.admission().is_some() && w.has_quota_reservation() && !w.is_finished()
}

/// The chain's latest slice holding quota: while a replacement and the slice it replaces both hold
/// quota (the replacement admitted, the old one not yet finished), the replacement, as the gate reads it
/// (`demand::admitted_slice`).
pub(super) fn latest_holding<'a>(chain: &[&'a Workload]) -> Option<&'a Workload> {
    let held: Vec<&Workload> = chain.iter().copied().filter(|w| holds_quota(w)).collect();
    demand::latest_of(&held)
}

fn key(w: &Workload) -> String {
    format!("{}/{}", w.namespace().unwrap_or_default(), w.name_any())
}

fn baseline(rc: &RayCluster) -> Baseline {
    let mut spec = rc.spec.clone();
    spec.suspend = None;
    Baseline {
        uid: rc.metadata.uid.clone().unwrap_or_default(),
        hash: hash_without_replicas_and_workers_to_delete(&spec),
        suspended: rc.spec.suspend == Some(true),
    }
}

/// I4 for one service: compares its active cluster with the baseline taken when its upgrade began to
/// wait, keeps or drops the baseline in `seen` (keyed by the service's uid) and reports what changed.
pub(super) fn no_disruption(
    rs: &RayService,
    active: Option<&str>,
    chain: &[&Workload],
    clusters: &[RayCluster],
    seen: &mut BTreeMap<String, Baseline>,
) -> Option<String> {
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let evicted = chain.iter().any(|w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.condition_true(condition::EVICTED))
    });
    let pending = chain
        .iter()
        .any(|w| !holds_quota(w) && !w.is_finished() && w.metadata.deletion_timestamp.is_none());
    let waiting = pending
        && !evicted
        && chain.iter().any(|w| holds_quota(w))
        && rs.metadata.deletion_timestamp.is_none();
    let rc = active.and_then(|a| clusters.iter().find(|c| c.name_any() == a));
    let (Some(rc), true) = (rc, waiting) else {
        seen.remove(&uid);
        return None;
    };
    let now = baseline(rc);
    let Some(before) = seen.get(&uid).filter(|b| b.uid == now.uid).cloned() else {
        seen.insert(uid, now);
        return None;
    };
    let name = rc.name_any();
    let what = if rc.metadata.deletion_timestamp.is_some() {
        "was deleted"
    } else if now.hash != before.hash {
        "changed its spec"
    } else if now.suspended && !before.suspended {
        "was suspended"
    } else {
        return None;
    };
    // Report a change once; the next check compares with what it became.
    seen.insert(uid, now);
    Some(format!(
        "I4: RayService {}'s active cluster {name} {what} while its upgrade waited for quota",
        rs.name_any()
    ))
}

/// I5 for one service: the slices holding quota form one replacement chain.
pub(super) fn one_chain(rs: &RayService, chain: &[&Workload]) -> Option<String> {
    let holding: Vec<&Workload> = chain.iter().copied().filter(|w| holds_quota(w)).collect();
    if holding.len() < 2 {
        return None;
    }
    let keys: HashSet<String> = holding.iter().map(|w| key(w)).collect();
    let links = holding
        .iter()
        .filter(|w| {
            w.annotations()
                .get(label::WORKLOAD_SLICE_REPLACEMENT_FOR)
                .is_some_and(|o| keys.contains(o))
        })
        .count();
    (links + 1 < holding.len()).then(|| {
        let mut names: Vec<String> = keys.into_iter().collect();
        names.sort();
        format!(
            "I5: RayService {} holds quota in {} slices that are not one replacement chain: {names:?}",
            rs.name_any(),
            holding.len()
        )
    })
}

/// I3 for a settled service: one slice holds quota for it, and what it holds is exactly its live
/// children's own pod requests times their counts.
pub(super) fn exact(rs: &RayService, chain: &[&Workload], clusters: &[RayCluster]) -> Result<(), String> {
    let name = rs.name_any();
    let holding: Vec<&Workload> = chain.iter().copied().filter(|w| holds_quota(w)).collect();
    let [slice] = holding.as_slice() else {
        return Err(format!(
            "I3: {name} holds quota in {} slices once settled",
            holding.len()
        ));
    };
    let uid = rs.metadata.uid.as_deref();
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    let live = clusters.iter().filter(|c| {
        c.metadata.deletion_timestamp.is_none()
            && c.owner_references().iter().any(|o| Some(o.uid.as_str()) == uid)
    });
    for rc in live {
        let d = demand::child_demand(rc, &Default::default())
            .map_err(|e| format!("I3: {}: {e}", rc.name_any()))?;
        for (_, count, template) in &d.pods {
            let spec = template.spec.clone().unwrap_or_default();
            let per_pod =
                pod_requests("template.spec", &spec).map_err(|e| format!("I3: {}: {e}", rc.name_any()))?;
            for (r, v) in podset_total(&per_pod, *count) {
                *want.entry(r).or_default() += v.0;
            }
        }
    }
    want.retain(|_, v| *v != 0);
    let mut got = super::usage::held(slice);
    got.retain(|_, v| *v != 0);
    if got != want {
        return Err(format!(
            "I3: {name}'s slice {} reserves {got:?}, its live clusters request {want:?}",
            slice.name_any()
        ));
    }
    Ok(())
}

/// I3 for a ClusterQueue: what its status reports reserved equals the sum of the Workloads holding
/// quota in it.
pub(super) fn queue_exact(cq: &ClusterQueue, workloads: &[Workload]) -> Result<(), String> {
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    for w in workloads
        .iter()
        .filter(|w| holds_quota(w) && w.admission().is_some_and(|a| a.cluster_queue == cq.name_any()))
    {
        for (r, v) in super::usage::held(w) {
            *want.entry(r).or_default() += v;
        }
    }
    let mut got: BTreeMap<String, i64> = BTreeMap::new();
    for f in cq.status.iter().flat_map(|s| s.flavors_reservation.iter()) {
        for r in &f.resources {
            if let Some(t) = &r.total {
                *got.entry(r.name.clone()).or_default() += super::usage::amount(t, &r.name);
            }
        }
    }
    want.retain(|_, v| *v != 0);
    got.retain(|_, v| *v != 0);
    if got != want {
        return Err(format!(
            "I3: ClusterQueue {} reports {got:?} reserved, its Workloads hold {want:?}",
            cq.name_any()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wl(name: &str, reserved: bool, replaces: Option<&str>, evicted: bool) -> Workload {
        let mut conds = Vec::new();
        let cond = |t: &str| json!({"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"});
        if reserved {
            conds.push(cond("QuotaReserved"));
        }
        if evicted {
            conds.push(cond("Evicted"));
        }
        let mut v = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "annotations": {}},
            "spec": {"queueName": "lq", "podSets": []},
            "status": {"conditions": conds}});
        if reserved {
            v["status"]["admission"] = json!({"clusterQueue": "cq", "podSetAssignments": []});
        }
        if let Some(r) = replaces {
            v["metadata"]["annotations"][label::WORKLOAD_SLICE_REPLACEMENT_FOR] = json!(format!("ns/{r}"));
        }
        serde_json::from_value(v).unwrap()
    }

    /// Chaos seed 918: with the replacement admitted and its predecessor not yet finished, the watcher
    /// read the predecessor (the later of the two by name) and reported pods the replacement covers.
    #[test]
    fn the_latest_holding_slice_is_the_replacement_while_both_hold_quota() {
        let (old, new) = (
            wl("rayservice-rs-e0a99", true, Some("first"), false),
            wl("rayservice-rs-17cee", true, Some("rayservice-rs-e0a99"), false),
        );
        for chain in [vec![&old, &new], vec![&new, &old]] {
            assert_eq!(
                latest_holding(&chain).map(|w| w.name_any()),
                Some("rayservice-rs-17cee".to_string())
            );
        }
        let waiting = wl("rayservice-rs-17cee", false, Some("rayservice-rs-e0a99"), false);
        assert_eq!(
            latest_holding(&[&old, &waiting]).map(|w| w.name_any()),
            Some("rayservice-rs-e0a99".to_string())
        );
        assert!(latest_holding(&[&waiting]).is_none());
    }

    fn rs() -> RayService {
        serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": "rs", "namespace": "ns", "uid": "u1"},
            "spec": {"rayClusterConfig": {"headGroupSpec": {"rayStartParams": {}, "template": {}}}}}))
        .unwrap()
    }

    fn rc(version: &str, suspend: bool) -> RayCluster {
        serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rs-a", "namespace": "ns", "uid": "c1"},
            "spec": {"rayVersion": version, "suspend": suspend, "headGroupSpec": {"rayStartParams": {}, "template": {}},
                "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "rayStartParams": {}, "template": {}}]}})).unwrap()
    }

    #[test]
    fn a_waiting_upgrade_may_not_touch_the_active_cluster() {
        let (old, new) = (wl("old", true, None, false), wl("new", false, Some("old"), false));
        let chain = [&old, &new];
        let mut seen = BTreeMap::new();
        let check = |c: RayCluster, seen: &mut BTreeMap<String, Baseline>| {
            no_disruption(&rs(), Some("rs-a"), &chain, &[c], seen)
        };
        assert_eq!(check(rc("2.46.0", false), &mut seen), None);
        // Worker counts belong to the autoscaler and the user: not a disruption.
        let mut scaled = rc("2.46.0", false);
        scaled.spec.worker_group_specs.as_mut().unwrap()[0].replicas = Some(3);
        assert_eq!(check(scaled, &mut seen), None);
        let changed = check(rc("2.47.0", false), &mut seen).expect("a spec change is a disruption");
        assert!(changed.contains("changed its spec"), "{changed}");
        let stopped = check(rc("2.47.0", true), &mut seen).expect("a suspend is a disruption");
        assert!(stopped.contains("was suspended"), "{stopped}");
    }

    #[test]
    fn eviction_or_no_waiting_upgrade_lets_the_active_cluster_change() {
        let mut seen = BTreeMap::new();
        let (old, new) = (wl("old", true, None, true), wl("new", false, Some("old"), false));
        for c in [rc("2.46.0", false), rc("2.46.0", true)] {
            assert_eq!(
                no_disruption(&rs(), Some("rs-a"), &[&old, &new], &[c], &mut seen),
                None
            );
        }
        let alone = wl("old", true, None, false);
        for c in [rc("2.46.0", false), rc("2.47.0", true)] {
            assert_eq!(
                no_disruption(&rs(), Some("rs-a"), &[&alone], &[c], &mut seen),
                None
            );
        }
    }

    #[test]
    fn slices_holding_quota_must_be_one_chain() {
        let (a, b, c) = (
            wl("a", true, None, false),
            wl("b", true, Some("a"), false),
            wl("c", true, Some("b"), false),
        );
        assert_eq!(one_chain(&rs(), &[&a, &b, &c]), None);
        let stray = wl("d", true, None, false);
        let found =
            one_chain(&rs(), &[&a, &b, &stray]).expect("an unlinked second slice is a duplicate admission");
        assert!(
            found.starts_with("I5: RayService rs holds quota in 3 slices"),
            "{found}"
        );
        assert_eq!(one_chain(&rs(), &[&a, &wl("p", false, None, false)]), None);
    }
}
