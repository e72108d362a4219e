//! The RayCronJob decision: from the RayCronJob, the clock and the operator's time zone, whether to
//! create a RayJob now (and which), what to write to `status.lastScheduleTime`, which events to
//! record and when to look again. No I/O.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::ResourceExt;

use crate::api::kueue::constants::label as kueue_label;
use crate::api::ray::constants as c;
use crate::api::ray::cron::Schedule;
use crate::api::ray::validation::{RayFeatureGates, time_zone, validate_ray_cron_job_with};
use crate::api::ray::{RayCronJob, RayJob};

/// The longest wait before looking again: the schedule may be years away, and a timer that long is
/// not worth holding (tokio's delay queue refuses past about two years).
pub const MAX_REQUEUE: Duration = Duration::from_secs(3600);

/// CronJob's threshold for `TooManyMissedTimes`.
pub const MANY_MISSED: i64 = 100;

pub struct Snapshot<'a> {
    pub cron: &'a RayCronJob,
    pub now: Timestamp,
    /// The operator's own zone: a schedule without `timeZone` runs in it (KubeRay's `time.Local`).
    pub local: TimeZone,
    pub gates: RayFeatureGates,
}

/// The events a decision records, as the RayJob controller's.
pub use crate::rayservice::rayjob::decide::{Event, EventType};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// The RayJob of the schedule time that came (an existing one of that name counts as created).
    pub create: Option<RayJob>,
    /// The new `status.lastScheduleTime`, when it changes.
    pub last_schedule_time: Option<Timestamp>,
    pub events: Vec<Event>,
    /// When to look again; `None` waits for a change to the RayCronJob.
    pub requeue: Option<Duration>,
}

pub fn decide(s: &Snapshot) -> Plan {
    let cron = s.cron;
    let who = format!("{}/{}", cron.namespace().unwrap_or_default(), cron.name_any());
    let invalid = |message: String| Plan {
        events: vec![Event {
            type_: EventType::Warning,
            reason: c::EVENT_INVALID_RAY_CRON_JOB_SPEC,
            message: format!("{who}: {message}"),
        }],
        ..Plan::default()
    };
    if let Some(e) = validate_ray_cron_job_with(cron, s.gates).first() {
        return invalid(e.to_string());
    }
    if cron.spec.is_suspended() {
        return Plan {
            events: vec![Event {
                type_: EventType::Normal,
                reason: c::EVENT_SUSPENDED_RAY_CRON_JOB,
                message: "RayCronJob suspended, no new RayJobs will be created".into(),
            }],
            ..Plan::default()
        };
    }
    // Validation accepted both; a failure here would be a zone database that changed under us.
    let (schedule, tz) = match (Schedule::parse(&cron.spec.schedule), zone(cron, &s.local)) {
        (Ok(schedule), Ok(tz)) => (schedule, tz),
        (Err(e), _) | (_, Err(e)) => return invalid(e),
    };
    let earliest = earliest(cron, s.now);
    let Some(tick) = schedule.latest(earliest, s.now, &tz) else {
        return match schedule.next(earliest, &tz) {
            Some(next) => Plan {
                requeue: Some(wait(s.now, next)),
                ..Plan::default()
            },
            None => Plan {
                requeue: Some(MAX_REQUEUE),
                ..invalid(format!(
                    "schedule {:?} has no time in the next 5 years",
                    cron.spec.schedule
                ))
            },
        };
    };
    let mut events = Vec::new();
    let missed = missed(&schedule, &tz, earliest, s.now);
    if missed > MANY_MISSED {
        events.push(Event {
            type_: EventType::Warning,
            reason: "TooManyMissedTimes",
            message: format!("too many missed start times: {missed}. Only the most recent, {tick}, creates a RayJob; check clock skew"),
        });
    }
    let requeue = schedule
        .next(tick, &tz)
        .map_or(MAX_REQUEUE, |next| wait(s.now, next));
    Plan {
        create: Some(ray_job(cron, tick)),
        last_schedule_time: Some(tick),
        events,
        requeue: Some(requeue),
    }
}

fn zone(cron: &RayCronJob, local: &TimeZone) -> Result<TimeZone, String> {
    match &cron.spec.time_zone {
        Some(name) => time_zone(name),
        None => Ok(local.clone()),
    }
}

/// KubeRay: the last schedule time, or the creation time before the first.
fn earliest(cron: &RayCronJob, now: Timestamp) -> Timestamp {
    let last = cron.status.as_ref().and_then(|s| s.last_schedule_time.as_ref());
    last.or(cron.metadata.creation_timestamp.as_ref())
        .map_or(now, |t| t.0)
}

/// CronJob's estimate of the times missed since `earliest` (the gap between the first two times
/// counted across the elapsed span: a division, however long the span).
fn missed(schedule: &Schedule, tz: &TimeZone, earliest: Timestamp, now: Timestamp) -> i64 {
    let Some(t1) = schedule.next(earliest, tz) else {
        return 0;
    };
    let Some(t2) = schedule.next(t1, tz) else { return 1 };
    let between = t2.as_second().saturating_sub(t1.as_second()).max(1);
    now.as_second().saturating_sub(t1.as_second()) / between + 1
}

fn wait(now: Timestamp, until: Timestamp) -> Duration {
    let d = until.duration_since(now);
    Duration::try_from(d)
        .unwrap_or(Duration::ZERO)
        .clamp(Duration::from_millis(10), MAX_REQUEUE)
}

/// KubeRay's `getRayJobName`: the RayCronJob's name and the schedule time in whole minutes since
/// the epoch, so a second create for the same time finds the first (and two times in one minute,
/// `@every 10s`, make one RayJob).
pub fn ray_job_name(cron_name: &str, tick: Timestamp) -> String {
    format!("{cron_name}-{}", tick.as_second() / 60)
}

/// KubeRay's `constructRayJob`: the template's spec, the `ray.io/cronjob-name` label, the schedule
/// time annotation (RFC 3339, UTC) and the RayCronJob as controller owner. Kueue's queue and priority
/// labels on the RayCronJob are copied too (KubeRay's template has no metadata of its own, so this is
/// how its RayJobs get a queue other than the namespace's `default` LocalQueue).
pub fn ray_job(cron: &RayCronJob, tick: Timestamp) -> RayJob {
    let name = cron.name_any();
    let mut labels = BTreeMap::from([(c::LABEL_CRON_JOB_NAME.to_string(), name.clone())]);
    for key in [kueue_label::QUEUE_NAME, kueue_label::PRIORITY_CLASS] {
        if let Some(v) = cron.labels().get(key) {
            labels.insert(key.to_string(), v.clone());
        }
    }
    let annotations = BTreeMap::from([(
        c::ANNOTATION_CRON_JOB_SCHEDULED_TIMESTAMP.to_string(),
        tick.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )]);
    let owner = OwnerReference {
        api_version: "ray.io/v1".into(),
        kind: c::CRD_RAY_CRON_JOB.into(),
        name: name.clone(),
        uid: cron.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    RayJob {
        metadata: ObjectMeta {
            name: Some(ray_job_name(&name, tick)),
            namespace: cron.namespace(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: cron.spec.job_template.clone(),
        status: None,
    }
}

/// `status.lastScheduleTime` as the API writes it.
pub fn to_time(t: Timestamp) -> Time {
    Time(t)
}
