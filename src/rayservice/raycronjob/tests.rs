//! The RayCronJob decision. Expectations follow KubeRay's
//! `ray-operator/controllers/ray/raycronjob_controller_unit_test.go` (each test names its case) and
//! batch CronJob's missed-schedule rule (`pkg/controller/cronjob/utils.go`, `mostRecentScheduleTime`).

use std::time::Duration;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use serde_json::json;

use super::decide::*;
use crate::api::ray::RayCronJob;
use crate::api::ray::constants as c;
use crate::api::ray::validation::RayFeatureGates;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// KubeRay's `rayCronJobTemplate`.
fn cron(name: &str, schedule: &str) -> RayCronJob {
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCronJob",
        "metadata": {"name": name, "namespace": "default", "uid": "cron-uid", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"schedule": schedule, "jobTemplate": {"entrypoint": "python test.py", "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}}}}}}
    }))
    .unwrap()
}

fn with_last(mut c: RayCronJob, last: &str) -> RayCronJob {
    c.status = Some(crate::api::ray::RayCronJobStatus {
        last_schedule_time: Some(Time(ts(last))),
    });
    c
}

fn plan(c: &RayCronJob, now: &str) -> Plan {
    decide(&Snapshot {
        cron: c,
        now: ts(now),
        local: TimeZone::UTC,
        gates: RayFeatureGates::default(),
    })
}

/// `TestRayCronJobReconcile_InvalidSchedule`: a Warning event that says the schedule is invalid, and
/// nothing created.
#[test]
fn invalid_schedule() {
    let p = plan(
        &cron("invalid-cronjob", "invalid cron string"),
        "2024-01-01T00:05:30Z",
    );
    assert_eq!(p.create, None);
    assert_eq!(p.requeue, None);
    assert_eq!(p.events.len(), 1);
    let e = &p.events[0];
    assert_eq!(
        (e.type_, e.reason),
        (EventType::Warning, c::EVENT_INVALID_RAY_CRON_JOB_SPEC)
    );
    assert!(
        e.message.starts_with("default/invalid-cronjob: ") && e.message.contains("invalid cron schedule"),
        "{}",
        e.message
    );
}

/// `TestRayCronJobReconcile_FirstSchedule`: created at 00:00, `*/5`, now 00:05:30: the 00:05 time is
/// scheduled and the controller wakes at the next time (00:10), 4m30s later.
#[test]
fn first_schedule() {
    let p = plan(&cron("test-cronjob", "*/5 * * * *"), "2024-01-01T00:05:30Z");
    assert_eq!(p.last_schedule_time, Some(ts("2024-01-01T00:05:00Z")));
    assert_eq!(p.requeue, Some(Duration::from_secs(270)));
    assert!(p.create.is_some());
}

/// `TestRayCronJobReconcile_CreateRayJob`: from `lastScheduleTime` 00:00, one RayJob for 00:05 with
/// the `ray.io/cronjob-name` label and the template's entrypoint.
#[test]
fn create_ray_job() {
    let p = plan(
        &with_last(cron("test-cronjob", "*/5 * * * *"), "2024-01-01T00:00:00Z"),
        "2024-01-01T00:05:30Z",
    );
    let job = p.create.expect("a RayJob");
    assert_eq!(job.labels()[c::LABEL_CRON_JOB_NAME], "test-cronjob");
    assert_eq!(job.spec.entrypoint.as_deref(), Some("python test.py"));
    assert_eq!(p.last_schedule_time, Some(ts("2024-01-01T00:05:00Z")));
    assert_eq!(p.requeue, Some(Duration::from_secs(270)));
    // KubeRay's constructRayJob: the schedule time annotation, the namespace, the controller owner.
    assert_eq!(
        job.annotations()[c::ANNOTATION_CRON_JOB_SCHEDULED_TIMESTAMP],
        "2024-01-01T00:05:00Z"
    );
    assert_eq!(job.namespace().as_deref(), Some("default"));
    let owner = &job.owner_references()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        (
            "ray.io/v1",
            "RayCronJob",
            "test-cronjob",
            "cron-uid",
            Some(true),
            Some(true)
        )
    );
}

/// `TestRayCronJobReconcile_Suspend`: no RayJob, no requeue, a Normal `SuspendedRayCronJob` event.
#[test]
fn suspend() {
    let mut c = cron("suspended-cronjob", "*/5 * * * *");
    c.spec.suspend = Some(true);
    let p = plan(&c, "2024-01-01T00:05:30Z");
    assert_eq!((p.create, p.last_schedule_time, p.requeue), (None, None, None));
    assert_eq!(p.events.len(), 1);
    assert_eq!(
        (p.events[0].type_, p.events[0].reason),
        (EventType::Normal, "SuspendedRayCronJob")
    );
    assert!(
        p.events[0]
            .message
            .contains("RayCronJob suspended, no new RayJobs will be created")
    );
}

/// `TestGetRayJobName_Deterministic`: `<name>-<unix minutes>`, different for the next time.
#[test]
fn ray_job_name_is_deterministic() {
    let tick = ts("2024-01-01T00:05:00Z");
    assert_eq!(
        ray_job_name("test-cronjob", tick),
        format!("test-cronjob-{}", tick.as_second() / 60)
    );
    assert_ne!(
        ray_job_name("test-cronjob", tick),
        ray_job_name("test-cronjob", ts("2024-01-01T00:10:00Z"))
    );
    // The longest name validation lets through still makes a valid RayJob name (47).
    let longest = "a".repeat(c::MAX_RAY_CRON_JOB_NAME_LENGTH);
    assert!(ray_job_name(&longest, ts("2286-11-20T17:46:00Z")).len() <= c::MAX_RAY_JOB_NAME_LENGTH);
}

/// `TestRayCronJobReconcile_NoDuplicateOnStaleStatus`, the decision's half: a stale
/// `lastScheduleTime` decides the same RayJob name again (the shell's create then finds it).
#[test]
fn a_stale_status_names_the_same_ray_job() {
    let stale = with_last(cron("test-cronjob", "*/5 * * * *"), "2024-01-01T00:00:00Z");
    let a = plan(&stale, "2024-01-01T00:05:30Z").create.unwrap();
    let b = plan(&stale, "2024-01-01T00:06:10Z").create.unwrap();
    assert_eq!(a.name_any(), b.name_any());
}

/// `TestUpdateRayCronJobStatus` "LastScheduleTime unchanged": before the next time nothing is written.
#[test]
fn nothing_is_written_before_the_next_time() {
    let p = plan(
        &with_last(cron("test-cronjob", "*/5 * * * *"), "2024-01-01T00:05:00Z"),
        "2024-01-01T00:07:00Z",
    );
    assert_eq!((p.create, p.last_schedule_time), (None, None));
    assert_eq!(p.requeue, Some(Duration::from_secs(180)));
    assert!(p.events.is_empty());
}

/// A year without the controller: one RayJob, for the most recent time, and CronJob's warning
/// (KubeRay would create the year's RayJobs one reconcile at a time).
#[test]
fn a_year_missed_makes_one_ray_job_and_a_warning() {
    let c = with_last(cron("hourly", "0 * * * *"), "2023-01-01T00:00:00Z");
    let p = plan(&c, "2024-01-01T05:30:00Z");
    assert_eq!(p.last_schedule_time, Some(ts("2024-01-01T05:00:00Z")));
    assert_eq!(
        p.create.unwrap().name_any(),
        ray_job_name("hourly", ts("2024-01-01T05:00:00Z"))
    );
    assert_eq!(p.requeue, Some(Duration::from_secs(1800)));
    assert_eq!(p.events.len(), 1);
    assert_eq!(
        (p.events[0].type_, p.events[0].reason),
        (EventType::Warning, "TooManyMissedTimes")
    );
    assert!(
        p.events[0].message.contains(": 8765."),
        "hourly from 2023-01-01T01:00 to 2024-01-01T05:00: {}",
        p.events[0].message
    );
    // A few missed: the most recent only, no warning.
    let p = plan(
        &with_last(cron("hourly", "0 * * * *"), "2024-01-01T00:00:00Z"),
        "2024-01-01T05:30:00Z",
    );
    assert_eq!(p.last_schedule_time, Some(ts("2024-01-01T05:00:00Z")));
    assert!(p.events.is_empty());
}

#[test]
fn waits_are_capped_and_impossible_schedules_say_so() {
    let p = plan(
        &with_last(cron("yearly", "@yearly"), "2024-01-01T00:00:00Z"),
        "2024-01-02T00:00:00Z",
    );
    assert_eq!((p.create.is_none(), p.requeue), (true, Some(MAX_REQUEUE)));
    let p = plan(&cron("never", "0 0 30 2 *"), "2024-01-02T00:00:00Z");
    assert_eq!(p.create, None);
    assert_eq!(p.events[0].reason, c::EVENT_INVALID_RAY_CRON_JOB_SPEC);
    assert!(
        p.events[0].message.contains("no time in the next 5 years"),
        "{}",
        p.events[0].message
    );
}

/// `timeZone` moves the wall-clock time (KubeRay's `ray-cronjob-timezone.sample.yaml`: 09:00 in
/// Asia/Taipei is 01:00 UTC); without it the operator's zone is used.
#[test]
fn time_zone_and_the_operator_zone() {
    let mut c = cron("taipei", "0 9 * * *");
    c.spec.time_zone = Some("Asia/Taipei".into());
    let p = plan(&c, "2024-01-01T01:00:30Z");
    assert_eq!(p.last_schedule_time, Some(ts("2024-01-01T01:00:00Z")));
    c.spec.time_zone = None;
    assert_eq!(
        plan(&c, "2024-01-01T01:00:30Z").create,
        None,
        "09:00 UTC has not come"
    );
    let local = TimeZone::get("Asia/Taipei").unwrap();
    let p = decide(&Snapshot {
        cron: &c,
        now: ts("2024-01-01T01:00:30Z"),
        local,
        gates: RayFeatureGates::default(),
    });
    assert_eq!(p.last_schedule_time, Some(ts("2024-01-01T01:00:00Z")));
}

/// Kueue's queue and priority labels on the RayCronJob go onto its RayJobs; other labels do not
/// (KubeRay copies none).
#[test]
fn kueue_labels_are_carried_to_the_ray_jobs() {
    let mut c = cron("queued", "* * * * *");
    c.metadata.labels = Some(
        [
            ("kueue.x-k8s.io/queue-name", "user-queue"),
            ("kueue.x-k8s.io/priority-class", "low"),
            ("team", "a"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    let job = plan(&c, "2024-01-01T00:01:30Z").create.unwrap();
    let labels = job.labels();
    assert_eq!(
        labels.get("kueue.x-k8s.io/queue-name").map(String::as_str),
        Some("user-queue")
    );
    assert_eq!(
        labels.get("kueue.x-k8s.io/priority-class").map(String::as_str),
        Some("low")
    );
    assert_eq!(labels.get("team"), None);
}

/// `@every` times inside one minute share a RayJob name: KubeRay makes one RayJob per minute at most.
#[test]
fn every_few_seconds_is_one_ray_job_a_minute() {
    let c = with_last(cron("fast", "@every 10s"), "2024-01-01T00:00:10Z");
    let p = plan(&c, "2024-01-01T00:00:21Z");
    assert_eq!(p.last_schedule_time, Some(ts("2024-01-01T00:00:20Z")));
    assert_eq!(
        p.create.unwrap().name_any(),
        ray_job_name("fast", ts("2024-01-01T00:00:10Z"))
    );
    assert_eq!(p.requeue, Some(Duration::from_secs(9)));
}
