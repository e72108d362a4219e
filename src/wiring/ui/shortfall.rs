//! Why a pending workload waits, in numbers. One small function on purpose: `quotagate explain`
//! computes the same answer, and this is where the view will call it.

use crate::api::conditions::FALSE;
use crate::api::kueue::{ClusterQueue, Workload};

/// The scheduler's own words for a pending workload (its `QuotaReserved=False` message, e.g.
/// "couldn't assign flavors to pod set head: insufficient unused quota for cpu in flavor default-flavor,
/// 2 more needed"), or what the ClusterQueue's status says when the scheduler has not written one yet.
/// `None` for a workload that holds quota.
pub fn shortfall(wl: &Workload, cq: Option<&ClusterQueue>) -> Option<String> {
    if wl.has_quota_reservation() {
        return None;
    }
    let cond = wl.status.as_ref().and_then(|s| s.condition("QuotaReserved"));
    if let Some(c) = cond.filter(|c| c.status == FALSE && !c.message.is_empty()) {
        return Some(c.message.clone());
    }
    let Some(cq) = cq else {
        return Some(format!(
            "its LocalQueue {:?} leads to no ClusterQueue",
            wl.spec.queue_name()
        ));
    };
    let active = cq
        .status
        .as_ref()
        .and_then(|s| crate::api::conditions::find(Some(&s.conditions), "Active"));
    match active {
        Some(a) if a.status == FALSE => Some(format!(
            "ClusterQueue {} is not active: {}",
            cq.metadata.name.as_deref().unwrap_or(""),
            a.message
        )),
        _ => Some("waiting for the scheduler's next cycle".to_string()),
    }
}
