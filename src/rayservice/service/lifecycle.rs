//! The top-level RayService lifecycle: which phase applies this pass, before any upgrade strategy runs.
//!
//! ```text
//! managedBy elsewhere -> nothing
//! deleting            -> delete every child now, then drop the finalizer
//! invalid             -> Ready=False/ValidationFailed, nothing created or deleted
//! Suspending=True     -> delete owned clusters and Services (even if suspend flipped back) -> Suspended
//! Suspended=True      -> wait; suspend=false -> Suspended=False/RayServiceResumed, Ready re-armed
//! spec.suspend        -> stage Suspending=True (the durable commit point), act next pass
//! InitializingTimeout -> terminal: only reap clusters
//! running             -> the strategy's state machine (bluegreen)
//! ```

use std::time::Duration;

use super::conditions::{self as cond, set};
use super::plan::{Action, ConditionPlan, EventType, Plan, StatusPlan};
use super::schedule::reap_dangling;
use super::snapshot::Snapshot;
use super::{bluegreen, incremental};
use crate::api::ray::validation::RAY_SERVICE_METADATA_INVALID;

/// KubeRay's `ServiceDefaultRequeueDuration`: poll while work is in flight.
pub const REQUEUE: Duration = Duration::from_secs(2);

/// Decides one reconcile pass. Pure: same snapshot, same plan.
pub fn plan(s: &Snapshot) -> Plan {
    let mut p = Plan::default();
    if s.managed_externally {
        return p;
    }
    if s.deleting {
        deleting(s, &mut p);
        return p;
    }
    if let Some(err) = &s.invalid {
        // KubeRay's event reasons: metadata errors apart from spec errors.
        let reason = if err.starts_with(RAY_SERVICE_METADATA_INVALID) {
            "InvalidRayServiceMetadata"
        } else {
            "InvalidRayServiceSpec"
        };
        p.event(EventType::Warning, reason, err.clone());
        p.status = Some(bare_status(
            s,
            vec![set(
                cond::READY,
                cond::FALSE,
                cond::VALIDATION_FAILED,
                err.clone(),
            )],
        ));
        return p;
    }
    if !s.has_finalizer {
        p.actions.push(Action::AddFinalizer);
    }
    p.requeue = Some(REQUEUE);
    if s.status.is_true(cond::SUSPENDING) {
        suspending(s, &mut p);
    } else if s.status.is_true(cond::SUSPENDED) {
        suspended(s, &mut p);
    } else if s.suspend {
        p.event(
            EventType::Normal,
            cond::SUSPEND_REQUESTED,
            "spec.suspend is true: deleting the RayService's clusters and Services",
        );
        p.status = Some(bare_status(
            s,
            vec![
                set(
                    cond::SUSPENDING,
                    cond::TRUE,
                    cond::SUSPEND_REQUESTED,
                    "Spec.Suspend is true; will delete all Kubernetes resources owned by this RayService.",
                ),
                set(
                    cond::READY,
                    cond::FALSE,
                    cond::SUSPEND_IN_PROGRESS,
                    "RayService is suspending.",
                ),
                set(
                    cond::UPGRADE_IN_PROGRESS,
                    cond::FALSE,
                    cond::SUSPEND_IN_PROGRESS,
                    NO_UPGRADE,
                ),
                set(
                    cond::ROLLBACK_IN_PROGRESS,
                    cond::FALSE,
                    cond::SUSPEND_IN_PROGRESS,
                    NO_ROLLBACK,
                ),
            ],
        ));
    } else if s.status.reason_is(cond::READY, cond::INITIALIZING_TIMEOUT) {
        // Terminal as in KubeRay: the RayService must be recreated. Only finish deleting its clusters.
        p.requeue = if s.clusters.is_empty() {
            None
        } else {
            Some(REQUEUE)
        };
        reap_dangling(s, &[], &[], &mut p);
    } else if let Some(message) = initializing_timed_out(s) {
        p.event(EventType::Warning, cond::INITIALIZING_TIMEOUT, message.clone());
        p.status = Some(bare_status(
            s,
            vec![
                set(cond::READY, cond::FALSE, cond::INITIALIZING_TIMEOUT, message),
                cond::upgrade(None, None, cond::INITIALIZING_TIMEOUT, None),
            ],
        ));
        let named: Vec<&str> = [&s.status.active, &s.status.pending]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        reap_dangling(s, &[], &named, &mut p);
    } else if let Some((options, traffic)) = &s.incremental {
        incremental::step(s, options, traffic, &mut p);
    } else {
        bluegreen::step(s, &mut p);
    }
    p
}

/// Status with no clusters named and no endpoints.
fn bare_status(s: &Snapshot, conditions: Vec<ConditionPlan>) -> StatusPlan {
    StatusPlan {
        active: None,
        pending: None,
        num_serve_endpoints: 0,
        conditions,
        observed_generation: s.generation,
    }
}

fn deleting(s: &Snapshot, p: &mut Plan) {
    for c in s.clusters.iter().filter(|c| !c.deleting) {
        p.actions.push(Action::DeleteCluster { name: c.name.clone() });
        p.event(
            EventType::Normal,
            "DeletedRayCluster",
            format!("deleting RayCluster {}: the RayService is being deleted", c.name),
        );
    }
    if s.clusters.is_empty() {
        if s.has_finalizer {
            p.actions.push(Action::RemoveFinalizer);
        }
    } else {
        p.requeue = Some(REQUEUE);
    }
}

/// Second and later passes of a suspend: runs to completion whatever `spec.suspend` says now.
fn suspending(s: &Snapshot, p: &mut Plan) {
    for c in s.clusters.iter().filter(|c| !c.deleting) {
        p.actions.push(Action::DeleteCluster { name: c.name.clone() });
        p.event(
            EventType::Normal,
            "DeletedRayCluster",
            format!("deleting RayCluster {}: the RayService is suspending", c.name),
        );
    }
    if s.head_service.is_some() || s.serve_service.is_some() {
        p.actions.push(Action::DeleteServices);
        p.event(
            EventType::Normal,
            "DeletedService",
            "deleting the RayService's head and serve Services: suspending",
        );
    }
    if !s.deletion_schedule.is_empty() {
        p.schedule = Some(Default::default());
    }
    if s.clusters.is_empty() && s.head_service.is_none() && s.serve_service.is_none() {
        p.event(
            EventType::Normal,
            cond::SUSPEND_COMPLETE,
            "every owned resource is deleted",
        );
        // KubeRay's words; every condition a user might wait on ends at SuspendComplete.
        let all_deleted = "All owned resources have been deleted.";
        p.status = Some(bare_status(
            s,
            vec![
                set(cond::SUSPENDING, cond::FALSE, cond::SUSPEND_COMPLETE, all_deleted),
                set(cond::SUSPENDED, cond::TRUE, cond::SUSPEND_COMPLETE, all_deleted),
                set(
                    cond::READY,
                    cond::FALSE,
                    cond::SUSPEND_COMPLETE,
                    "RayService is suspended.",
                ),
                set(
                    cond::UPGRADE_IN_PROGRESS,
                    cond::FALSE,
                    cond::SUSPEND_COMPLETE,
                    NO_UPGRADE,
                ),
                set(
                    cond::ROLLBACK_IN_PROGRESS,
                    cond::FALSE,
                    cond::SUSPEND_COMPLETE,
                    NO_ROLLBACK,
                ),
            ],
        ));
        p.requeue = None;
    } else if !s.status.reason_is(cond::SUSPENDING, cond::SUSPEND_IN_PROGRESS) {
        p.status = Some(bare_status(
            s,
            vec![set(
                cond::SUSPENDING,
                cond::TRUE,
                cond::SUSPEND_IN_PROGRESS,
                "Waiting for all Kubernetes resources owned by this RayService to be deleted.",
            )],
        ));
    }
}

const NO_UPGRADE: &str = "No upgrade in progress.";
const NO_ROLLBACK: &str = "No rollback in progress.";

fn suspended(s: &Snapshot, p: &mut Plan) {
    if s.suspend {
        p.requeue = None;
        return;
    }
    p.event(
        EventType::Normal,
        cond::RAY_SERVICE_RESUMED,
        "spec.suspend is false: recreating the cluster",
    );
    let mut ready = set(
        cond::READY,
        cond::FALSE,
        cond::INITIALIZING,
        "resumed: waiting for the first cluster to serve",
    );
    // Restart lastTransitionTime so the initializing timeout counts from the resume (KubeRay #4894).
    ready.refresh = true;
    p.status = Some(bare_status(
        s,
        vec![
            set(
                cond::SUSPENDED,
                cond::FALSE,
                cond::RAY_SERVICE_RESUMED,
                "spec.suspend is false",
            ),
            ready,
            set(
                cond::UPGRADE_IN_PROGRESS,
                cond::FALSE,
                cond::INITIALIZING,
                "no cluster has served yet",
            ),
        ],
    ));
}

/// `Some(message)` when `Ready` has been `False/Initializing` for longer than the annotation allows.
fn initializing_timed_out(s: &Snapshot) -> Option<String> {
    let timeout = s.initializing_timeout?;
    let ready = s.status.condition(cond::READY)?;
    if ready.status == cond::TRUE || ready.reason != cond::INITIALIZING {
        return None;
    }
    let waited = s.now.duration_since(ready.last_transition);
    (waited >= timeout).then(|| {
        // KubeRay's wording first (tools match on it), then the numbers.
        format!(
            "RayService failed to become ready within the configured timeout: not ready {}s after initialization began (ray.io/initializing-timeout {}s); delete and recreate the RayService",
            waited.as_secs(),
            timeout.as_secs()
        )
    })
}
