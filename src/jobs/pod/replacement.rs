//! Kueue's `WaitingForReplacementPods` Workload condition for pod groups (`waitingForReplacementPodsCondition`
//! in `pkg/controller/jobs/pod/pod_controller.go`): `True` while a role of the group's Workload has fewer
//! pods that can still run or succeeded than it counts (with fast admission: while a role has none),
//! with the eviction's reason and message if the Workload is evicted, else `PodsFailed`; `False`
//! (`PodsReady`, "No pods need replacement") once none is missing. The queue keeps a Workload with the
//! condition `True` out of admission (Kueue's `IsAdmissible`), so an evicted group is not re-admitted
//! onto pods that are gone.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::group::{PodGroup, runnable_or_succeeded};
use crate::api::conditions;
use crate::api::kueue::constants::condition;
use crate::api::kueue::{Workload, WorkloadStatus};
use crate::api::pod as p;

/// Kueue's reason when failed pods, not an eviction, left a role short.
pub const PODS_FAILED: &str = "PodsFailed";
/// Kueue's reason when no pod is missing.
pub const PODS_READY: &str = "PodsReady";

/// A pod that counts as present: it can still run or it succeeded (Kueue's `isPodRunnableOrSucceeded`),
/// and it is not on its way out. Kueue still counts a deleted pod bound to a node until it ends; here
/// every pod is bound, so a stopped group would read complete for a moment after its eviction and its
/// Workload, requeued, could be admitted again with no pod to run.
fn present(x: &Pod, stopping: &[String]) -> bool {
    let leaving = x.metadata.deletion_timestamp.is_some() || stopping.iter().any(|s| *s == x.name_any());
    runnable_or_succeeded(x) && !(leaving && p::phase(x) != "Succeeded")
}

/// Kueue's `absentPods`: over the Workload's roles, how many pods are missing (fast admission: one
/// per role with a count and no pod). `stopping`: pods this pass deletes.
pub fn absent_pods(group: &PodGroup, wl: &Workload, stopping: &[String]) -> i32 {
    let fast = group.fast_admission();
    wl.spec
        .pod_sets
        .iter()
        .map(|ps| {
            let have = group
                .pods
                .iter()
                .filter(|x| p::role_hash(x) == ps.name() && present(x, stopping))
                .count() as i32;
            if fast {
                i32::from(ps.count() > 0 && have == 0)
            } else {
                (ps.count() - have).max(0)
            }
        })
        .sum()
}

/// The Workload's status with the condition brought up to date, or `None` when it already says so
/// (or, never having been needed, is still absent).
pub fn with_replacement_condition(
    group: &PodGroup,
    wl: &Workload,
    stopping: &[String],
    now: jiff::Timestamp,
) -> Option<WorkloadStatus> {
    let waiting = absent_pods(group, wl, stopping) > 0;
    let status = wl.status.clone().unwrap_or_default();
    let current = status.condition(condition::WAITING_FOR_REPLACEMENT_PODS);
    let (reason, message) = match (current, waiting) {
        (None, false) => return None,
        (_, false) => (PODS_READY.to_string(), "No pods need replacement".to_string()),
        (_, true) => match status
            .condition(condition::EVICTED)
            .filter(|c| c.status == conditions::TRUE)
        {
            Some(evicted) => (evicted.reason.clone(), evicted.message.clone()),
            // Already waiting (for an eviction since cleared, say): the reason stays.
            None => match current.filter(|c| c.status == conditions::TRUE) {
                Some(c) => (c.reason.clone(), c.message.clone()),
                None => (
                    PODS_FAILED.to_string(),
                    "Some Failed pods need replacement".to_string(),
                ),
            },
        },
    };
    let mut out = status;
    let c = conditions::new(
        condition::WAITING_FOR_REPLACEMENT_PODS,
        waiting,
        &reason,
        &message,
        wl.metadata.generation,
        now,
    );
    conditions::set(&mut out.conditions, c).then_some(out)
}
