//! The RayCluster's suspend state machine and status facts, pure.
//!
//! ```text
//! suspend=true          -> RayClusterSuspending=True (commit point; nothing deleted this pass)
//! Suspending            -> delete all pods (even if suspend flipped back) -> when none:
//!                          Suspending=False, Suspended=True, RayClusterProvisioned=False,
//!                          HeadPodReady=False/HeadPodNotFound, state=suspended
//! Suspended, suspend    -> nothing
//! Suspended, !suspend   -> Suspended=False and pods are planned again in the same pass
//! ```

use crate::api::ray::constants as c;

use super::pods::{PodAction, PodInputs, PodView, plan_pods};
use crate::rayservice::cluster::conditions::{ConditionPlan, FALSE, TRUE};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Running,
    Suspending,
    Suspended,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterDecision {
    pub phase: Phase,
    pub pods: Vec<PodAction>,
    /// Suspend-machine conditions to set (the status computation adds the rest).
    pub conditions: Vec<ConditionPlan>,
}

fn cond(type_: &'static str, status: &'static str, reason: &'static str, message: &str) -> ConditionPlan {
    ConditionPlan {
        type_,
        status,
        reason,
        message: message.to_string(),
        refresh: false,
    }
}

pub fn decide(
    suspend: bool,
    was_suspending: bool,
    was_suspended: bool,
    inputs: &PodInputs,
) -> ClusterDecision {
    let live = inputs.pods.iter().filter(|p| !p.deleting).count();
    if was_suspending {
        if inputs.pods.is_empty() {
            return ClusterDecision {
                phase: Phase::Suspended,
                pods: vec![],
                // KubeRay's set (raycluster_controller calculateStatus): the head is gone, the
                // cluster provisions again on resume; Suspending keeps its own reason.
                conditions: vec![
                    cond(
                        c::COND_RAY_CLUSTER_SUSPENDING,
                        FALSE,
                        "RayClusterSuspending",
                        "all pods are deleted",
                    ),
                    cond(
                        c::COND_RAY_CLUSTER_SUSPENDED,
                        TRUE,
                        "RayClusterSuspended",
                        "all pods are deleted",
                    ),
                    cond(
                        c::COND_RAY_CLUSTER_PROVISIONED,
                        FALSE,
                        c::REASON_RAY_CLUSTER_PODS_PROVISIONING,
                        "RayCluster has been suspended",
                    ),
                    cond(
                        c::COND_HEAD_POD_READY,
                        FALSE,
                        c::REASON_HEAD_POD_NOT_FOUND,
                        "no head pod: the cluster is suspended",
                    ),
                ],
            };
        }
        let pods = if live > 0 {
            vec![PodAction::DeleteAll {
                reason: "the cluster is suspending",
            }]
        } else {
            vec![]
        };
        return ClusterDecision {
            phase: Phase::Suspending,
            pods,
            conditions: vec![],
        };
    }
    // Suspended with no pod left. A pod there means the cluster ran since its status last said
    // Suspended (a resume whose status write was lost, then a suspend again): suspend it again, or
    // that pod would run on without a Workload.
    if was_suspended && suspend && inputs.pods.is_empty() {
        return ClusterDecision {
            phase: Phase::Suspended,
            pods: vec![],
            conditions: vec![],
        };
    }
    if suspend {
        let mut conditions = vec![cond(
            c::COND_RAY_CLUSTER_SUSPENDING,
            TRUE,
            "RayClusterSuspending",
            "spec.suspend is true: deleting all pods",
        )];
        if was_suspended {
            // A stale Suspended=True beside Suspending=True is a status the API refuses, and a
            // refused write would leave this pass's pods running for good.
            conditions.push(cond(
                c::COND_RAY_CLUSTER_SUSPENDED,
                FALSE,
                "RayClusterSuspended",
                "pods were found running: suspending again",
            ));
        }
        return ClusterDecision {
            phase: Phase::Suspending,
            pods: vec![],
            conditions,
        };
    }
    let mut conditions = vec![];
    if was_suspended {
        // KubeRay keeps the reason RayClusterSuspended on the False condition.
        conditions.push(cond(
            c::COND_RAY_CLUSTER_SUSPENDED,
            FALSE,
            "RayClusterSuspended",
            "spec.suspend is false: resumed",
        ));
    }
    ClusterDecision {
        phase: Phase::Running,
        pods: plan_pods(inputs),
        conditions,
    }
}

/// What the pods say about the cluster, for status.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Facts {
    pub ready_workers: i32,
    pub available_workers: i32,
    pub head: Option<PodView>,
    /// Exactly desired workers + 1 head, all running and ready.
    pub all_ready: bool,
}

pub fn facts(pods: &[PodView], desired_workers: i64) -> Facts {
    let live: Vec<&PodView> = pods.iter().filter(|p| !p.deleting).collect();
    let workers = live.iter().filter(|p| !p.head);
    let ready_workers = workers.clone().filter(|p| p.running && p.ready).count();
    let available_workers = workers.filter(|p| p.running).count();
    let all_ready = live.len() as i64 == desired_workers + 1 && live.iter().all(|p| p.running && p.ready);
    Facts {
        ready_workers: i32::try_from(ready_workers).unwrap_or(i32::MAX),
        available_workers: i32::try_from(available_workers).unwrap_or(i32::MAX),
        head: live.iter().find(|p| p.head).map(|p| (*p).clone()),
        all_ready,
    }
}

/// `HeadPodReady` and `RayClusterProvisioned` (sticky once True, reset only by suspend).
pub fn running_conditions(f: &Facts, was_provisioned: bool) -> Vec<ConditionPlan> {
    let head = match &f.head {
        None => cond(
            c::COND_HEAD_POD_READY,
            FALSE,
            c::REASON_HEAD_POD_NOT_FOUND,
            "no head pod",
        ),
        Some(h) if h.running && h.ready => cond(
            c::COND_HEAD_POD_READY,
            TRUE,
            c::REASON_HEAD_POD_RUNNING_AND_READY,
            "the head pod is running and ready",
        ),
        Some(h) => cond(
            c::COND_HEAD_POD_READY,
            FALSE,
            c::REASON_UNKNOWN,
            &format!("head pod {} is not ready", h.name),
        ),
    };
    let provisioned = if was_provisioned || f.all_ready {
        cond(
            c::COND_RAY_CLUSTER_PROVISIONED,
            TRUE,
            c::REASON_ALL_POD_RUNNING_AND_READY_FIRST_TIME,
            "all pods were running and ready",
        )
    } else {
        cond(
            c::COND_RAY_CLUSTER_PROVISIONED,
            FALSE,
            c::REASON_RAY_CLUSTER_PODS_PROVISIONING,
            "waiting for all pods to be running and ready",
        )
    };
    vec![head, provisioned]
}
