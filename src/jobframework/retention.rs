//! Kueue's `objectRetentionPolicies.workloads.afterFinished` (KEP-1618): a finished Workload is
//! deleted once it has been finished for the configured duration (`0s`: at once). Off unless
//! configured, as in Kueue. Finished Workloads pile up otherwise: every step of an incremental
//! upgrade leaves a replaced slice behind.
//!
//! The decision ([`decide`]) is pure; [`spawn`] runs it as a controller on Workloads, acting only
//! while this replica leads (the deletes are writes), and requeueing a Workload for the moment its
//! retention ends.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kube::api::{Api, DeleteParams, Preconditions, PropagationPolicy};
use kube::runtime::Controller;
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tokio::sync::watch;

use crate::api::kueue::Workload;
use crate::api::kueue::constants::condition;

/// What the retention policy asks of one Workload now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retention {
    /// Not finished, already being deleted, or no policy: nothing to do.
    Keep,
    /// Finished, its retention not over: look again after this long.
    Wait(Duration),
    /// Finished for at least the retention period: delete it.
    Delete,
}

/// The retention of `wl` at `now` under `after_finished` (`None`: no policy). The period runs from the
/// `Finished` condition's last transition.
pub fn decide(wl: &Workload, after_finished: Option<Duration>, now: Timestamp) -> Retention {
    let Some(after) = after_finished else {
        return Retention::Keep;
    };
    if wl.metadata.deletion_timestamp.is_some() {
        return Retention::Keep;
    }
    let Some(finished) = wl
        .status
        .as_ref()
        .and_then(|s| s.condition(condition::FINISHED))
        .filter(|c| c.status == "True")
    else {
        return Retention::Keep;
    };
    let since = finished.last_transition_time.0;
    let elapsed = now.duration_since(since);
    let left = jiff::SignedDuration::try_from(after).unwrap_or(jiff::SignedDuration::MAX) - elapsed;
    if left <= jiff::SignedDuration::ZERO {
        return Retention::Delete;
    }
    Retention::Wait(Duration::try_from(left).unwrap_or(after))
}

struct Ctx {
    client: Client,
    after: Duration,
    leader: watch::Receiver<bool>,
}

#[derive(Debug, thiserror::Error)]
#[error("deleting a finished workload: {0}")]
struct RetentionError(#[from] kube::Error);

impl crate::kit::shell::ReconcileError for RetentionError {
    fn category(&self) -> &'static str {
        "kube"
    }
}

async fn reconcile(wl: Arc<Workload>, ctx: Arc<Ctx>) -> Result<Action, RetentionError> {
    if !*ctx.leader.borrow() {
        return Ok(Action::await_change());
    }
    match decide(&wl, Some(ctx.after), Timestamp::now()) {
        Retention::Keep => Ok(Action::await_change()),
        Retention::Wait(left) => Ok(Action::requeue(left)),
        Retention::Delete => {
            let api: Api<Workload> = Api::namespaced(ctx.client.clone(), &wl.namespace().unwrap_or_default());
            // The Workload read, not one made since under the same name.
            let dp = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                preconditions: Some(Preconditions {
                    uid: wl.uid(),
                    resource_version: None,
                }),
                ..Default::default()
            };
            crate::kit::shell::ignore_not_found(api.delete(&wl.name_any(), &dp).await)?;
            tracing::info!(workload = %wl.name_any(), namespace = %wl.namespace().unwrap_or_default(), "deleted a finished workload: its retention period (objectRetentionPolicies.workloads.afterFinished) is over");
            Ok(Action::await_change())
        }
    }
}

/// Runs the retention controller for `after_finished` on every Workload.
pub fn spawn(
    client: Client,
    after_finished: Duration,
    leader: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let api: Api<Workload> = Api::all(client.clone());
    let mut rx = leader.clone();
    let ctx = Arc::new(Ctx {
        client,
        after: after_finished,
        leader,
    });
    tokio::spawn(async move {
        // Becoming leader looks at every Workload again: a follower skipped them.
        let controller = Controller::new(api, watcher::Config::default())
            .reconcile_all_on(crate::kit::became_leader(&mut rx));
        crate::kit::shell::run(controller, "workload-retention", reconcile, ctx, |_| {
            Duration::from_secs(5)
        })
        .await;
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::kueue::WorkloadStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    fn finished_at(t: Timestamp) -> Workload {
        let mut wl = Workload::build("wl", "ns").build();
        wl.status = Some(WorkloadStatus {
            conditions: vec![Condition {
                type_: condition::FINISHED.into(),
                status: "True".into(),
                reason: "Succeeded".into(),
                message: "done".into(),
                last_transition_time: Time(t),
                observed_generation: None,
            }],
            ..Default::default()
        });
        wl
    }

    // Ported from Kueue pkg/controller/core/workload_controller_test.go (KEP-1618's unit cases).
    #[test]
    fn finished_workloads_are_kept_for_their_retention_then_deleted() {
        let t0: Timestamp = "2026-11-25T10:00:00Z".parse().unwrap();
        let hour = Duration::from_secs(3600);
        let wl = finished_at(t0);
        // "shouldn't delete the workload because, object retention not configured"
        assert_eq!(
            decide(&wl, None, t0 + jiff::SignedDuration::from_hours(5)),
            Retention::Keep
        );
        // "shouldn't try to delete the workload because the retention period hasn't elapsed yet"
        assert_eq!(
            decide(&wl, Some(hour), t0 + jiff::SignedDuration::from_mins(20)),
            Retention::Wait(Duration::from_secs(40 * 60))
        );
        // "should delete the workload because the retention period has elapsed"
        assert_eq!(
            decide(&wl, Some(hour), t0 + jiff::SignedDuration::from_hours(1)),
            Retention::Delete
        );
        // "should delete the workload immediately after it completed because the retention period is set to 0s"
        assert_eq!(decide(&wl, Some(Duration::ZERO), t0), Retention::Delete);
        // "shouldn't try to delete the workload (no event emitted) because it is already being deleted"
        let mut deleting = finished_at(t0);
        deleting.metadata.deletion_timestamp = Some(Time(t0));
        assert_eq!(
            decide(
                &deleting,
                Some(Duration::ZERO),
                t0 + jiff::SignedDuration::from_hours(2)
            ),
            Retention::Keep
        );
        // Not finished (or Finished=False): kept whatever the policy.
        let running = Workload::build("wl", "ns").build();
        assert_eq!(decide(&running, Some(Duration::ZERO), t0), Retention::Keep);
    }
}
