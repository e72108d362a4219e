//! The unit of admission of an upgrade: a pending cluster is admitted together with the workers of
//! its first step, never its head alone.
//!
//! Why. An autoscaled pending cluster is created with its `minReplicas` (often 0): alone, its
//! demand is its head. Admitted as a slice of its own, the head holds quota while the workers of the
//! first step (that Serve asks for once the head runs) wait for a second slice. Two upgrades whose
//! spare quota fits both heads but not a head plus a step then each hold a head and wait for the
//! other's quota: neither old cluster shrinks, for good (issue 45).
//!
//! The rule. While a cluster is its RayService's pending cluster, its demand never drops below what
//! its first step runs: the workers the autoscaler adds so that the Serve replicas at the first
//! step's capacity fit (`maxSurgePercent` for an incremental upgrade, 100% for blue/green), sized as
//! `quotagate plan` sizes them. The first slice of an upgrade is thus head plus first step, admitted
//! whole or not at all, and an admitted upgrade can always take its first step.
//!
//! What is held and what each waits for. An upgrade not yet admitted holds nothing of its pending
//! cluster. An admitted one holds its serving cluster and its pending cluster at its current step
//! (at least the first). Its next move is traffic (no quota), a shrink of the serving cluster (frees
//! quota) or a grow of the pending one by one surge step, which comes after a shrink of the serving
//! cluster by the same share: with one shape per group (old and new replicas asking the same), the
//! grow needs no more than that shrink freed. So an admitted upgrade waits only for quota it freed
//! itself and that someone admitted meanwhile took; a holder that is an upgrade got it as a whole
//! first step, so it moves on by the same argument and, once done, deletes a whole serving cluster.
//! The head-alone hold of the issue (each waiting for the other's head to leave) cannot form.
//! A new version asking more per replica than the old grows by more than its shrink frees: there
//! the banker's check over the ClusterQueue and its Cohort keeps upgrades from waiting on each
//! other (`queue::banker`, with the claim from `claim`).

use serde_json::Value;

use crate::api::ray::rayservice::RayServiceUpgradeType;
use crate::api::ray::{RayCluster, RayService};
use crate::rayservice::cluster::replicas::desired_replicas;
use crate::rayservice::dashboard::config::{ServeConfig, capacity_adjusted_replicas};
use crate::rayservice::dashboard::sim::autoscaler::{self, AutoscalerConfig};
use crate::rayservice::dashboard::sim::schema::{CPU_UNITS, configured_replicas, replica_cpu_units};

/// The CPUs the Serve replicas of `rs` reserve at `capacity` percent: per deployment, Serve's
/// capacity-adjusted replica count times `ray_actor_options.num_cpus` (Serve's defaults: 1 replica,
/// 1 CPU). The error names the field of `spec.serveConfigV2` at fault.
pub fn serve_cpus(rs: &RayService, capacity: i32) -> Result<f64, String> {
    let Some(yaml) = rs
        .spec
        .serve_config_v2
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    else {
        return Ok(0.0);
    };
    let config = ServeConfig::from_yaml(yaml).map_err(|e| e.to_string())?;
    let mut units: u64 = 0;
    let apps = config
        .as_json()
        .get("applications")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for (ai, app) in apps.iter().enumerate() {
        let deployments = app
            .get("deployments")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for (di, d) in deployments.iter().enumerate() {
            let at = |field: &str| format!("applications[{ai}].deployments[{di}].{field}");
            let n = configured_replicas(d).map_err(|m| format!("{}: {m}", at("num_replicas")))?;
            let per = replica_cpu_units(d).map_err(|(f, m, _)| format!("{}: {m}", at(f)))?;
            let replicas = capacity_adjusted_replicas(n, Some(f64::from(capacity)));
            units = units.saturating_add(per.saturating_mul(u64::from(replicas)));
        }
    }
    Ok(units as f64 / CPU_UNITS)
}

/// `rc` with each autoscaled worker group raised to the replicas the autoscaler adds so the Serve
/// replicas of `rs` at `capacity` percent fit (never lowered). Unchanged without autoscaling.
pub fn sized_for(rs: &RayService, rc: &RayCluster, capacity: i32) -> Result<RayCluster, String> {
    let mut rc = rc.clone();
    if !rc.spec.autoscaling_enabled() {
        return Ok(rc);
    }
    let want = serve_cpus(rs, capacity)?;
    let cap = AutoscalerConfig::default().max_replicas_per_group;
    for s in autoscaler::plan(&rc.spec, want, cap) {
        if let Some(g) = rc
            .spec
            .worker_group_specs
            .as_mut()
            .and_then(|gs| gs.get_mut(s.index))
            && s.to > desired_replicas(g)
        {
            g.replicas = Some(s.to);
        }
    }
    Ok(rc)
}

/// The Serve capacity of a pending cluster's first step: `maxSurgePercent` (1 to 100) for an
/// incremental upgrade, all of it for blue/green; `None` for a spec that replaces no cluster.
pub fn first_step_capacity(rs: &RayService) -> Option<i32> {
    match rs
        .spec
        .upgrade_type()
        .unwrap_or(RayServiceUpgradeType::NewCluster)
    {
        RayServiceUpgradeType::None => None,
        RayServiceUpgradeType::NewCluster => Some(100),
        RayServiceUpgradeType::NewClusterWithIncrementalUpgrade => Some(
            rs.spec
                .cluster_upgrade_options()
                .map_or(100, |o| o.max_surge_percent_or_default())
                .clamp(1, 100),
        ),
    }
}

/// The name of the service's pending cluster, if an upgrade is under way.
pub fn pending_cluster(rs: &RayService) -> Option<&str> {
    rs.status
        .as_ref()?
        .pending_service_status
        .as_ref()?
        .ray_cluster_name
        .as_deref()
        .filter(|n| !n.is_empty())
}

/// `rc` as the admission sees it: the pending cluster of `rs` at no less than its first step (see
/// the module doc); any other child, or a spec whose first step cannot be sized, as it is.
pub fn at_least_first_step(rs: &RayService, rc: &RayCluster) -> RayCluster {
    let pending = pending_cluster(rs).is_some_and(|p| rc.metadata.name.as_deref() == Some(p));
    match first_step_capacity(rs) {
        Some(capacity) if pending && rc.metadata.deletion_timestamp.is_none() => {
            sized_for(rs, rc, capacity).unwrap_or_else(|_| rc.clone())
        }
        _ => rc.clone(),
    }
}
