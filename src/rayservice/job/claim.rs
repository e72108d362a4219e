//! The claim of a RayService's upgrade in flight, for the banker's check (`queue::banker`): the
//! most its slices hold at any state until the upgrade finishes (`peak`) and what they hold once
//! done (`done`), per resource. Derived from the spec and the live children, as the gate is, with
//! the sizes `quotagate plan` walks: each state of the strategy (`incremental_states`) is the
//! serving cluster at its Serve capacity plus the pending one at its own (`step::sized_for`).

use std::collections::BTreeMap;

use kube::ResourceExt;

use super::demand;
use super::step;
use crate::api::ray::rayservice::RayServiceUpgradeType;
use crate::api::ray::{RayCluster, RayService};
use crate::queue::amount::Amount;
use crate::queue::model::UpgradeClaim;
use crate::queue::requests::pod_requests;
use crate::rayservice::cluster::BuildOptions;
use crate::rayservice::cluster::replicas::desired_replicas;
use crate::rayservice::service::incremental::{Move, Progress, next_move};
use crate::rayservice::service::snapshot::IncrementalOptions;

/// Every (pending %, active %) capacity state an incremental upgrade passes through, in order, as
/// the upgrade's own `next_move` decides them (replicas always serving, timers always passed).
pub fn incremental_states(max_surge: i32, step: i32) -> Vec<(i32, i32)> {
    let o = IncrementalOptions {
        max_surge,
        step,
        interval: jiff::SignedDuration::ZERO,
        gateway_class: String::new(),
        timer_only: false,
    };
    let (mut gain, mut lose, mut traffic) = (0, 100, 0);
    let mut states = vec![(gain, lose)];
    // Each move changes one percentage by at least 1, so 3 x 101 moves reach Done; the bound only
    // guards against a decision function that stops converging.
    for _ in 0..400 {
        let p = Progress {
            gain_capacity: gain,
            lose_capacity: lose,
            traffic,
            gain_serving: true,
            interval_passed: true,
            traffic_settled: true,
        };
        match next_move(&p, &o) {
            Move::Traffic(t) => traffic = t,
            Move::Shrink(l) => lose = l,
            Move::Grow(g) => gain = g,
            Move::Done | Move::Wait(_) => break,
        }
        if states.last() != Some(&(gain, lose)) {
            states.push((gain, lose));
        }
    }
    states
}

/// The claim of `rs`'s upgrade, while it has one: a pending cluster beside a serving one, both
/// among `children`. `None` otherwise (no upgrade, strategy `None`, or a cluster that cannot be sized).
pub fn upgrade_claim(rs: &RayService, children: &[RayCluster]) -> Option<UpgradeClaim> {
    let pending_name = step::pending_cluster(rs)?;
    let active_name = rs
        .status
        .as_ref()?
        .active_service_status
        .as_ref()?
        .ray_cluster_name
        .as_deref()?;
    let live = |n: &str| {
        children
            .iter()
            .find(|c| c.name_any() == n && c.metadata.deletion_timestamp.is_none())
    };
    let (pending, active) = (live(pending_name)?, live(active_name)?);
    let states = match rs
        .spec
        .upgrade_type()
        .unwrap_or(RayServiceUpgradeType::NewCluster)
    {
        RayServiceUpgradeType::None => return None,
        RayServiceUpgradeType::NewCluster => vec![(100, 100)],
        RayServiceUpgradeType::NewClusterWithIncrementalUpgrade => {
            let o = rs.spec.cluster_upgrade_options();
            let surge = o.map_or(100, |o| o.max_surge_percent_or_default()).clamp(1, 100);
            incremental_states(
                surge,
                o.and_then(|o| o.step_size_percent).unwrap_or(100).clamp(1, 100),
            )
        }
    };
    let mut peak: BTreeMap<String, Amount> = BTreeMap::new();
    for (gain, lose) in states {
        let mut at = totals(&serving_at(active, lose))?;
        for (r, v) in totals(&pending_at(rs, pending, gain))? {
            *at.entry(r).or_default() += v;
        }
        for (r, v) in at {
            let e = peak.entry(r).or_default();
            *e = (*e).max(v);
        }
    }
    let done = totals(&pending_at(rs, pending, 100))?;
    Some(UpgradeClaim { peak, done })
}

/// The serving cluster at `capacity` percent: its autoscaled workers scaled with its Serve
/// replicas (never below `minReplicas`; as it is at 100%). A cluster without autoscaling keeps its
/// workers until it is deleted.
fn serving_at(rc: &RayCluster, capacity: i32) -> RayCluster {
    let mut rc = rc.clone();
    if capacity >= 100 || !rc.spec.autoscaling_enabled() {
        return rc;
    }
    for g in rc.spec.worker_group_specs.iter_mut().flatten() {
        let now = i64::from(desired_replicas(g));
        let scaled = (now * i64::from(capacity.max(0)) + 99) / 100;
        g.replicas = Some(
            i32::try_from(scaled)
                .unwrap_or(i32::MAX)
                .max(g.min_replicas_or_default()),
        );
    }
    rc
}

/// The pending cluster at `capacity` percent: autoscaled workers from `minReplicas`, raised to what
/// the Serve replicas of `rs` at that capacity need (as `quotagate plan` sizes it).
fn pending_at(rs: &RayService, rc: &RayCluster, capacity: i32) -> RayCluster {
    let mut base = rc.clone();
    if base.spec.autoscaling_enabled() {
        for g in base.spec.worker_group_specs.iter_mut().flatten() {
            g.replicas = None;
        }
    }
    step::sized_for(rs, &base, capacity).unwrap_or(base)
}

/// Per resource, what a cluster's pods request together (accounting units).
fn totals(rc: &RayCluster) -> Option<BTreeMap<String, Amount>> {
    let d = demand::child_demand(rc, &BuildOptions::default()).ok()?;
    let mut out: BTreeMap<String, Amount> = BTreeMap::new();
    for (_, count, template) in &d.pods {
        let spec = template.spec.clone().unwrap_or_default();
        for (r, v) in pod_requests("template.spec", &spec).ok()? {
            *out.entry(r).or_default() += v.times(*count);
        }
    }
    out.retain(|_, v| *v != Amount::ZERO);
    Some(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::rayservice::cluster::child::child_cluster;

    /// An incremental service (50% surge and step, two Serve replicas of 1 CPU) whose head asks
    /// `head` CPUs and each worker `worker` CPUs, with Ray seeing one CPU per worker.
    fn service(head: &str, worker: &str) -> RayService {
        let res = |cpu: &str| json!({"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": cpu}});
        serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": "rs", "namespace": "default"},
            "spec": {
                "upgradeStrategy": {"type": "NewClusterWithIncrementalUpgrade",
                    "clusterUpgradeOptions": {"gatewayClassName": "istio", "stepSizePercent": 50, "intervalSeconds": 1, "maxSurgePercent": 50}},
                "serveConfigV2": "applications:\n  - name: app\n    import_path: app.graph\n    route_prefix: /\n    deployments:\n      - name: D\n        num_replicas: 2\n        ray_actor_options:\n          num_cpus: 1\n",
                "rayClusterConfig": {
                    "enableInTreeAutoscaling": true,
                    "headGroupSpec": {"rayStartParams": {"num-cpus": "0"}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0", "resources": res(head)}]}}},
                    "workerGroupSpecs": [{"groupName": "workers", "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {"num-cpus": "1"},
                        "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0", "resources": res(worker)}]}}}]
                }
            }
        }))
        .expect("a valid RayService")
    }

    /// The new version (a 1-CPU head, 3-CPU workers) upgrading from the old (a 4-CPU head, 1-CPU
    /// workers at two replicas), as the job adapter sees it.
    fn upgrading(strategy: Option<&str>) -> (RayService, Vec<RayCluster>) {
        let old = service("4", "1");
        let mut new = service("1", "3");
        if let Some(t) = strategy {
            new.spec
                .upgrade_strategy
                .get_or_insert_with(Default::default)
                .type_ = serde_json::from_value(json!(t)).ok();
        }
        let mut active = child_cluster(&old, "rs-old", "", false);
        for g in active.spec.worker_group_specs.iter_mut().flatten() {
            g.replicas = Some(2);
        }
        let pending = child_cluster(&new, "rs-new", "", true);
        new.status = serde_json::from_value(json!({
            "activeServiceStatus": {"rayClusterName": "rs-old"},
            "pendingServiceStatus": {"rayClusterName": "rs-new"}
        }))
        .ok();
        (new, vec![active, pending])
    }

    fn cpu(m: &BTreeMap<String, Amount>) -> i64 {
        m.get("cpu").copied().unwrap_or_default().0
    }

    #[test]
    fn the_claim_walks_the_states_of_the_strategy() {
        // Heads carry the autoscaler sidecar (0.5 CPU). Incremental: old 4.5 + 2, first step +1.5 + 3,
        // old half gone 4.5 + 1 + 4.5, new whole 4.5 + 1 + 7.5 = 13 (the peak), done 1.5 + 6.
        let (rs, children) = upgrading(None);
        let c = upgrade_claim(&rs, &children).expect("an upgrade in flight");
        assert_eq!((cpu(&c.peak), cpu(&c.done)), (13000, 7500), "{c:?}");
        // Blue/green: both clusters whole at once.
        let (rs, children) = upgrading(Some("NewCluster"));
        let c = upgrade_claim(&rs, &children).expect("an upgrade in flight");
        assert_eq!((cpu(&c.peak), cpu(&c.done)), (6500 + 7500, 7500), "{c:?}");
    }

    #[test]
    fn no_claim_without_an_upgrade() {
        let (mut rs, children) = upgrading(None);
        let mut no_pending = rs.clone();
        if let Some(s) = no_pending.status.as_mut() {
            s.pending_service_status = None;
        }
        assert_eq!(upgrade_claim(&no_pending, &children), None);
        // A first deployment: a pending cluster, nothing serving yet.
        if let Some(s) = rs.status.as_mut() {
            s.active_service_status = None;
        }
        assert_eq!(upgrade_claim(&rs, &children), None);
        let (rs, children) = upgrading(Some("None"));
        assert_eq!(upgrade_claim(&rs, &children), None);
    }
}
