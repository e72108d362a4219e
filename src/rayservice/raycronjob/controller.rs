//! The RayCronJob controller's I/O shell: read the clock, call [`decide`], create the RayJob, write
//! `status.lastScheduleTime`, record the events. Nothing is decided here.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::events::{EventType as KEventType, Reporter};
use kube::runtime::{Controller, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tracing::instrument;

use super::decide::{EventType, Snapshot, decide, to_time};
use crate::api::ray::validation::RayFeatureGates;
use crate::api::ray::{RayCronJob, RayJob};
use crate::kit::events::Recorder;
use crate::kit::shell;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("RayCronJob has no metadata.namespace")]
    NoNamespace,
}

impl shell::ReconcileError for Error {
    fn category(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::NoNamespace => "invalid_object",
        }
    }
}

/// Where the controller reads the time: the system clock, or a test's (tokio's paused clock).
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// Wall-clock time that moves with tokio's clock from the moment it is made: under a paused tokio
/// runtime, schedules minutes apart pass as fast as the work between them.
pub fn tokio_clock() -> Clock {
    let (start, wall) = (tokio::time::Instant::now(), Timestamp::now());
    Arc::new(move || {
        let elapsed = jiff::SignedDuration::try_from(start.elapsed()).unwrap_or(jiff::SignedDuration::MAX);
        wall.checked_add(elapsed).unwrap_or(Timestamp::MAX)
    })
}

pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub gates: RayFeatureGates,
    pub clock: Clock,
    /// A schedule without `timeZone` runs in this zone (KubeRay: the operator's local zone).
    pub local: TimeZone,
    pub error_backoff: Duration,
}

impl Context {
    pub fn new(client: Client) -> Self {
        let reporter = Reporter {
            controller: "raycronjob-controller".into(),
            instance: None,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            gates: RayFeatureGates::default(),
            clock: Arc::new(Timestamp::now),
            local: TimeZone::system(),
            error_backoff: Duration::from_secs(3),
        }
    }
}

/// Runs the controller until the stream ends. It watches RayCronJobs only, as KubeRay's does: the
/// RayJobs it creates run on their own.
pub async fn run(ctx: Arc<Context>) {
    let controller = Controller::new(
        Api::<RayCronJob>::all(ctx.client.clone()),
        watcher::Config::default(),
    );
    shell::run(controller, "raycronjob", reconcile, ctx, |c| c.error_backoff).await;
}

#[instrument(skip_all, fields(name = %cron.name_any(), ns = cron.namespace().unwrap_or_default()))]
pub async fn reconcile(cron: Arc<RayCronJob>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    let ns = cron.namespace().ok_or(Error::NoNamespace)?;
    let plan = decide(&Snapshot {
        cron: &cron,
        now: (ctx.clock)(),
        local: ctx.local.clone(),
        gates: ctx.gates,
    });
    let me = cron.object_ref(&());
    if let Some(job) = &plan.create {
        let name = job.name_any();
        match shell::ignore_already_exists(
            Api::<RayJob>::namespaced(ctx.client.clone(), &ns)
                .create(&PostParams::default(), job)
                .await,
        ) {
            Ok(Some(_)) => {
                shell::publish(
                    &ctx.recorder,
                    &me,
                    KEventType::Normal,
                    "CreatedRayJob",
                    format!("Created RayJob {ns}/{name}"),
                )
                .await;
            }
            // The RayJob of this schedule time exists: an earlier pass created it (KubeRay #4849).
            Ok(None) => tracing::debug!(rayjob = %name, "RayJob for this schedule time already exists"),
            Err(e) => {
                shell::publish(
                    &ctx.recorder,
                    &me,
                    KEventType::Warning,
                    "FailedToCreateRayJob",
                    format!("Failed to create RayJob {ns}/{name}: {e}"),
                )
                .await;
                return Err(e.into());
            }
        }
    }
    if let Some(t) = plan.last_schedule_time {
        let patch = json!({"status": {"lastScheduleTime": to_time(t)}});
        Api::<RayCronJob>::namespaced(ctx.client.clone(), &ns)
            .patch_status(&cron.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    for e in &plan.events {
        let type_ = match e.type_ {
            EventType::Normal => KEventType::Normal,
            EventType::Warning => KEventType::Warning,
        };
        shell::publish(&ctx.recorder, &me, type_, e.reason, e.message.clone()).await;
    }
    Ok(plan.requeue.map_or_else(Requeue::await_change, Requeue::requeue))
}
