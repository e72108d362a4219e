//! Growth-first preemption of a RayService in the middle of an upgrade (beyond Kueue, which evicts
//! the whole job). The service's aggregated slice carries a floor, the pods of the clusters it keeps
//! (`kept`), and their names (`slices::GROWTH_KEEPS_ANNOTATION`), both derived here from the live
//! children on every reconcile and written on the slice by the job controller. When preemption takes
//! only the growth (`GrowthPreempted` on the slice), the gate covers the kept clusters alone (the
//! others' pods are removed), the slice shrinks back to them once those pods are gone, and the
//! upgrade then asks for a new slice as usual. Nothing here reads anything a user writes on the
//! RayService's spec.
//!
//! Which clusters are kept. The serving (active) cluster, always. The pending cluster too, once the
//! RayService controller has said in status that it is ready to take traffic (`switch_announced`),
//! and the RayService controller moves traffic onto a pending cluster only once the admitted slice
//! names it among those it keeps (`slices::may_lose_part`). The two meet on the slice: the admission
//! core writes `GrowthPreempted` only on the version of the slice whose floor it read (a conflict
//! otherwise), and the job controller writes the floor on a version too. So either the growth was
//! taken while the slice kept the serving cluster alone, and the RayService controller, reading the
//! slice, sees it and keeps the traffic where it is; or the slice kept the pending cluster first,
//! and no growth taken from then on can be it. Without this, a switch racing a preemption moved the
//! traffic onto a cluster whose pods the gate was removing (chaos seed 223). After the switch, an old
//! cluster waiting for deletion is growth: preemption takes it early instead of the service.

use std::collections::{BTreeMap, BTreeSet};

use super::demand::{self, ChildDemand, LivePods};
use crate::admission::slices::{growth_keeps, growth_preempted};
use crate::api::kueue::{PodSet, Workload};
use crate::api::ray::RayService;
use crate::api::ray::constants::app_status;

/// The serving (active) cluster's name, from the RayService's status.
pub fn active_cluster(rs: &RayService) -> Option<&str> {
    rs.status
        .as_ref()?
        .active_service_status
        .as_ref()?
        .ray_cluster_name
        .as_deref()
        .filter(|n| !n.is_empty())
}

/// The RayService controller has said the pending cluster is ready to take traffic: every Serve
/// application it reports for the pending cluster is RUNNING (with no application in the spec, as
/// soon as there is a pending cluster). Traffic moves onto it only once the slice keeps it.
pub fn switch_announced(rs: &RayService) -> bool {
    let Some(pending) = rs.status.as_ref().and_then(|s| s.pending_service_status.as_ref()) else {
        return false;
    };
    if pending.ray_cluster_name.as_deref().is_none_or(str::is_empty) {
        return false;
    }
    let no_apps = rs
        .spec
        .serve_config_v2
        .as_deref()
        .is_none_or(|c| c.trim().is_empty());
    match pending.applications.as_ref().filter(|a| !a.is_empty()) {
        Some(apps) => apps
            .values()
            .all(|a| a.status.as_deref() == Some(app_status::RUNNING)),
        None => no_apps,
    }
}

/// The clusters of `children` that preemption leaves running when it takes the growth: the serving
/// cluster, with the pending one once the switch is announced; `None` when none serves (preempted
/// whole). The serving cluster alone is kept too: its slice may still hold an old cluster just
/// deleted (until the scale-down slice replaces it), and that is growth, not a reason to evict the
/// service whole; with nothing beyond it, the floor is all the slice holds.
pub fn kept(rs: &RayService, children: &[&str]) -> Option<Vec<String>> {
    let active = active_cluster(rs).filter(|a| children.contains(a))?;
    let mut kept = vec![active.to_string()];
    if let Some(pending) = super::step::pending_cluster(rs).filter(|p| *p != active && children.contains(p))
        && switch_announced(rs)
    {
        kept.push(pending.to_string());
    }
    Some(kept)
}

/// Per podset of `pod_sets`, the pods of the `kept` children it stands for (0 for the others);
/// `None` when a kept pod has no podset (then no growth can be told apart: preempted whole).
pub fn floor(
    children: &[ChildDemand],
    pod_sets: &[PodSet],
    kept: &[String],
) -> Option<BTreeMap<String, i64>> {
    let mut out: BTreeMap<String, i64> = pod_sets.iter().map(|p| (p.name().to_string(), 0)).collect();
    for child in children.iter().filter(|c| kept.contains(&c.name)) {
        let names = demand::podset_names(pod_sets, child);
        for (id, n, _) in &child.pods {
            let name = names.get(&id.group)?;
            *out.entry(name.clone()).or_default() += *n;
        }
    }
    Some(out)
}

/// The admitted slice whose growth was taken, if that is the case: its podsets, and the clusters it
/// keeps as it names them (a slice written before it named them keeps the serving cluster).
#[derive(Clone, Debug, PartialEq)]
pub struct Taken {
    pub pod_sets: Vec<PodSet>,
    pub keeps: Option<Vec<String>>,
}

pub fn taken(workloads: &[Workload]) -> Option<Taken> {
    demand::admitted_slice(workloads)
        .filter(|w| growth_preempted(w))
        .map(|w| Taken {
            pod_sets: w.spec.pod_sets.clone(),
            keeps: growth_keeps(w),
        })
}

/// What a slice whose growth was taken keeps: what it names, else the serving cluster.
fn keeps_of(rs: &RayService, keeps: Option<Vec<String>>) -> Vec<String> {
    keeps.unwrap_or_else(|| active_cluster(rs).map(str::to_string).into_iter().collect())
}

/// The demand of the kept clusters alone, plus the pods the others still run until they are gone
/// (quota covers what runs): what a slice whose growth was taken shrinks back to.
pub fn kept_only(
    rs: &RayService,
    children: &[ChildDemand],
    live: &LivePods,
    taken: &Taken,
) -> Option<Vec<PodSet>> {
    let kept = keeps_of(rs, taken.keeps.clone());
    if kept.is_empty() {
        return None;
    }
    let zeroed: Vec<ChildDemand> = children
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if !kept.contains(&c.name) {
                for (_, n, _) in &mut c.pods {
                    *n = 0;
                }
            }
            c
        })
        .collect();
    demand::podsets(&demand::at_least_live(zeroed, live)).ok()
}

/// The gate of a slice whose growth was taken covers the clusters it keeps alone: every other
/// child's allowance drops to nothing, so its pods are removed. Returns why, for the service's
/// condition.
pub fn close_growth(
    rs: &RayService,
    admitted: Option<&Workload>,
    allowed: &mut BTreeMap<String, BTreeMap<String, i64>>,
    covered: &mut BTreeSet<String>,
) -> Option<String> {
    let w = admitted.filter(|w| growth_preempted(w))?;
    let kept = keeps_of(rs, growth_keeps(w));
    for (child, groups) in allowed.iter_mut() {
        if !kept.contains(child) {
            groups.values_mut().for_each(|n| *n = 0);
        }
    }
    covered.retain(|c| kept.contains(c));
    let why = w
        .status
        .as_ref()
        .and_then(|s| s.condition(crate::admission::slices::GROWTH_PREEMPTED))
        .map(|c| c.reason.clone())
        .unwrap_or_default();
    Some(format!(
        "the upgrade's growth was taken from workload slice {} ({why}): the serving cluster keeps serving, the upgrade waits for a new slice",
        w.metadata.name.as_deref().unwrap_or_default()
    ))
}
