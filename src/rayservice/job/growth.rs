//! Growth-first preemption of a RayService in the middle of an upgrade (beyond Kueue, which evicts
//! the whole job). The service's aggregated slice carries a floor: the pods its serving (active)
//! cluster holds, derived here from the live children on every reconcile and written on the slice by
//! the job controller. When preemption takes only the growth (`GrowthPreempted` on the slice), the
//! gate covers the serving cluster alone (the pending cluster's pods are removed), the slice shrinks
//! back to the serving cluster once they are gone, and the upgrade then asks for a new slice as
//! usual. Nothing here reads anything a user writes on the RayService.

use std::collections::BTreeMap;

use super::demand::{self, ChildDemand, LivePods};
use crate::api::kueue::{PodSet, Workload};
use crate::api::ray::RayService;
use crate::jobframework::slices::growth_preempted;

/// The serving cluster's name while an upgrade's pending cluster exists beside it.
pub fn serving_during_upgrade(rs: &RayService) -> Option<&str> {
    let active = rs
        .status
        .as_ref()?
        .active_service_status
        .as_ref()?
        .ray_cluster_name
        .as_deref()
        .filter(|n| !n.is_empty())?;
    let pending = super::step::pending_cluster(rs)?;
    (active != pending).then_some(active)
}

/// Per podset of `pod_sets`, the pods of the serving cluster it stands for (0 for the others);
/// `None` without an upgrade under way, or when a serving pod has no podset (then no growth can
/// be told apart: the service is preempted whole).
pub fn floor(rs: &RayService, children: &[ChildDemand], pod_sets: &[PodSet]) -> Option<BTreeMap<String, i64>> {
    let active = serving_during_upgrade(rs)?;
    let serving = children.iter().find(|c| c.name == active)?;
    let mut out: BTreeMap<String, i64> = pod_sets.iter().map(|p| (p.name().to_string(), 0)).collect();
    let names = demand::podset_names(pod_sets, serving);
    for (id, n, _) in &serving.pods {
        let name = names.get(&id.group)?;
        *out.entry(name.clone()).or_default() += *n;
    }
    Some(out)
}

/// The podsets of the admitted slice whose growth was taken, if that is the case.
pub fn taken(workloads: &[Workload]) -> Option<Vec<PodSet>> {
    demand::admitted_slice(workloads)
        .filter(|w| growth_preempted(w))
        .map(|w| w.spec.pod_sets.clone())
}

/// The demand of the serving cluster alone, plus the pods the others still run until they are
/// gone (quota covers what runs): what a slice whose growth was taken shrinks back to.
pub fn serving_only(rs: &RayService, children: &[ChildDemand], live: &LivePods) -> Option<Vec<PodSet>> {
    let active = serving_during_upgrade(rs)?;
    let kept: Vec<ChildDemand> = children
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if c.name != active {
                for (_, n, _) in &mut c.pods {
                    *n = 0;
                }
            }
            c
        })
        .collect();
    demand::podsets(&demand::at_least_live(kept, live)).ok()
}

/// The gate of a slice whose growth was taken covers the serving cluster alone: every other child's
/// allowance drops to nothing, so its pods are removed. Returns why, for the service's condition.
pub fn close_growth(
    rs: &RayService,
    admitted: Option<&Workload>,
    allowed: &mut BTreeMap<String, BTreeMap<String, i64>>,
    covered: &mut std::collections::BTreeSet<String>,
) -> Option<String> {
    let w = admitted.filter(|w| growth_preempted(w))?;
    let active = rs
        .status
        .as_ref()
        .and_then(|s| s.active_service_status.as_ref())
        .and_then(|a| a.ray_cluster_name.clone())
        .unwrap_or_default();
    for (child, groups) in allowed.iter_mut() {
        if *child != active {
            groups.values_mut().for_each(|n| *n = 0);
        }
    }
    covered.retain(|c| *c == active);
    let why = w
        .status
        .as_ref()
        .and_then(|s| s.condition(crate::jobframework::slices::GROWTH_PREEMPTED))
        .map(|c| c.reason.clone())
        .unwrap_or_default();
    Some(format!(
        "the upgrade's growth was taken from workload slice {} ({why}): the serving cluster keeps serving, the upgrade waits for a new slice",
        w.metadata.name.as_deref().unwrap_or_default()
    ))
}
