//! The quota a RayService needs in each phase of its life: at steady state and at the peak of its
//! upgrade strategy. Every phase is a set of child RayClusters; their podsets come from the same
//! `rayservice::job::demand` code the admission runs on live children, so a phase's totals are
//! exactly what the scheduler would be asked to reserve.
//!
//! Worker counts follow what runs the service: the spec's `replicas` (clamped to min/max), and with
//! the in-tree autoscaler, the workers the autoscaler adds so the Serve replicas of that cluster fit
//! (the embedded autoscaler's CPU sizing: `autoscaler::plan`). An incremental upgrade's states are
//! walked with the upgrade's own decision function (`incremental::next_move`), each state being the
//! active cluster at its Serve capacity plus the pending one at its own.

use std::collections::BTreeMap;

use crate::api::kueue::PodSet;
use crate::api::ray::rayservice::RayServiceUpgradeType;
use crate::api::ray::{RayCluster, RayService};
use crate::queue::amount::Amount;
use crate::queue::requests::pod_requests;
use crate::rayservice::cluster::BuildOptions;
use crate::rayservice::cluster::child::child_cluster;
use crate::rayservice::cluster::replicas::desired_replicas;
use crate::rayservice::job::demand::{self, ChildDemand};
use crate::rayservice::job::step;

/// Why a plan cannot be computed.
#[derive(Debug, thiserror::Error)]
pub enum PhaseError {
    #[error("{0}")]
    Demand(#[from] demand::DemandError),
    #[error("spec.serveConfigV2: {0}")]
    ServeConfig(String),
    #[error("podset {podset}: {message}")]
    Requests { podset: String, message: String },
}

/// One child RayCluster of a phase.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ClusterInPhase {
    /// `active` (serving before the upgrade) or `pending` (the upgrade's new cluster).
    pub role: &'static str,
    /// Percent of the Serve replicas this cluster runs (Serve's `target_capacity`).
    pub serve_capacity: i32,
    /// Workers per group.
    pub workers: BTreeMap<String, i32>,
}

/// A moment in the service's life and what it asks of the quota.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    pub name: String,
    pub clusters: Vec<ClusterInPhase>,
    /// The podsets the Workload (slice) has in this phase.
    pub podsets: Vec<PodSet>,
    /// Per resource, over all podsets: per-pod requests times counts.
    pub totals: BTreeMap<String, Amount>,
}

/// The strategy of the spec being applied (KubeRay's default is `NewCluster`).
pub fn strategy(rs: &RayService) -> RayServiceUpgradeType {
    rs.spec
        .upgrade_type()
        .unwrap_or(RayServiceUpgradeType::NewCluster)
}

pub fn strategy_name(s: RayServiceUpgradeType) -> &'static str {
    match s {
        RayServiceUpgradeType::NewCluster => "NewCluster",
        RayServiceUpgradeType::NewClusterWithIncrementalUpgrade => "NewClusterWithIncrementalUpgrade",
        RayServiceUpgradeType::None => "None",
    }
}

/// The CPUs the Serve replicas of `rs` reserve at `capacity` percent (`rayservice::job::step`, the
/// same sizing the admission of an upgrade's first step uses).
pub fn serve_cpus(rs: &RayService, capacity: i32) -> Result<f64, PhaseError> {
    step::serve_cpus(rs, capacity).map_err(PhaseError::ServeConfig)
}

/// The child cluster `rs` runs at `capacity` percent of its Serve replicas. `pending_incremental`:
/// an incremental upgrade's new cluster, which starts from `minReplicas` and grows with Serve.
pub fn sized_cluster(
    rs: &RayService,
    role: &'static str,
    capacity: i32,
    pending_incremental: bool,
) -> Result<(RayCluster, ClusterInPhase), PhaseError> {
    let name = format!("{}-{role}", rs.metadata.name.as_deref().unwrap_or("rayservice"));
    let mut rc = step::sized_for(rs, &child_cluster(rs, &name, "", pending_incremental), capacity)
        .map_err(PhaseError::ServeConfig)?;
    // The pending cluster is a cluster of its own even when `--to` is the same spec (an image bump
    // planned as is): a group asking for one topology domain is then a podset per cluster, each
    // placed in a domain of its own, as the upgrade's slice asks (`demand::QuotaIdentity`).
    if role == "pending"
        && let Some(hash) = rc
            .metadata
            .annotations
            .as_mut()
            .and_then(|a| a.get_mut(crate::api::ray::constants::ANNOTATION_HASH_WITHOUT_REPLICAS))
    {
        hash.push_str("-pending");
    }
    let workers = rc
        .spec
        .worker_groups()
        .iter()
        .map(|g| (g.group_name.clone(), desired_replicas(g)))
        .collect();
    Ok((
        rc,
        ClusterInPhase {
            role,
            serve_capacity: capacity,
            workers,
        },
    ))
}

fn phase(name: String, clusters: Vec<(RayCluster, ClusterInPhase)>) -> Result<Phase, PhaseError> {
    let opts = BuildOptions::default();
    let demands: Vec<ChildDemand> = clusters
        .iter()
        .map(|(rc, _)| demand::child_demand(rc, &opts))
        .collect::<Result<_, _>>()?;
    let podsets = demand::podsets(&demands)?;
    let mut totals: BTreeMap<String, Amount> = BTreeMap::new();
    for ps in &podsets {
        let podset = ps.name.clone().unwrap_or_default();
        let spec = ps.template.spec.clone().unwrap_or_default();
        let per_pod = pod_requests("template.spec", &spec).map_err(|e| PhaseError::Requests {
            podset,
            message: e.to_string(),
        })?;
        for (r, v) in per_pod {
            *totals.entry(r).or_default() += v.times(i64::from(ps.count()));
        }
    }
    totals.retain(|_, v| *v != Amount::ZERO);
    Ok(Phase {
        name,
        clusters: clusters.into_iter().map(|(_, c)| c).collect(),
        podsets,
        totals,
    })
}

/// Steady state of `rs`: one cluster serving every replica.
pub fn steady(rs: &RayService, label: &str) -> Result<Phase, PhaseError> {
    phase(
        format!("steady ({label})"),
        vec![sized_cluster(rs, "active", 100, false)?],
    )
}

/// The peak of upgrading `from` to `to` with `to`'s strategy.
pub fn peak(from: &RayService, to: &RayService) -> Result<Phase, PhaseError> {
    match strategy(to) {
        RayServiceUpgradeType::None => {
            let mut p = steady(from, "strategy None: the cluster is not replaced")?;
            p.name = "peak (None: no second cluster)".into();
            Ok(p)
        }
        RayServiceUpgradeType::NewCluster => phase(
            "peak (blue/green: both clusters)".into(),
            vec![
                sized_cluster(from, "active", 100, false)?,
                sized_cluster(to, "pending", 100, false)?,
            ],
        ),
        RayServiceUpgradeType::NewClusterWithIncrementalUpgrade => incremental_peak(from, to),
    }
}

/// Every (pending %, active %) capacity state an incremental upgrade passes through, in order
/// (the same walk the banker's claim of an upgrade in flight is computed over).
pub fn incremental_states(max_surge: i32, step: i32) -> Vec<(i32, i32)> {
    crate::rayservice::job::claim::incremental_states(max_surge, step)
}

/// The incremental state asking the most: the largest share of the per-resource maxima over all
/// states (ties: the earliest).
fn incremental_peak(from: &RayService, to: &RayService) -> Result<Phase, PhaseError> {
    let opts = to.spec.cluster_upgrade_options();
    let surge = opts.map_or(100, |o| o.max_surge_percent.unwrap_or(100));
    let step = opts.and_then(|o| o.step_size_percent).unwrap_or(100);
    let mut phases = Vec::new();
    for (gain, lose) in incremental_states(surge, step) {
        let name = format!("peak (incremental: pending at {gain}%, active at {lose}%)");
        phases.push(phase(
            name,
            vec![
                sized_cluster(from, "active", lose, false)?,
                sized_cluster(to, "pending", gain, true)?,
            ],
        )?);
    }
    let mut max: BTreeMap<String, Amount> = BTreeMap::new();
    for p in &phases {
        for (r, v) in &p.totals {
            let e = max.entry(r.clone()).or_default();
            *e = (*e).max(*v);
        }
    }
    let share = |p: &Phase| -> f64 {
        p.totals
            .iter()
            .map(|(r, v)| v.0 as f64 / max.get(r).map_or(1.0, |m| m.0.max(1) as f64))
            .sum()
    };
    let mut best: Option<(f64, Phase)> = None;
    for p in phases {
        let s = share(&p);
        if best.as_ref().is_none_or(|(b, _)| s > *b) {
            best = Some((s, p));
        }
    }
    // `incremental_states` always yields the starting state, so there is a best.
    best.map(|(_, p)| p)
        .ok_or_else(|| PhaseError::ServeConfig("no incremental upgrade state".into()))
}
