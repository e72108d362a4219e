//! The RayCronJob controller on the embedded API server, with the real kube-runtime `Controller`.
//! Schedules a minute apart run on tokio's paused clock (the controller reads a wall clock that moves
//! with it), so minutes of schedule pass in milliseconds. Expectations follow KubeRay's
//! `ray-operator/test/e2eraycronjob/raycronjob_test.go` and `raycronjob_controller_unit_test.go`
//! (each test names its case), and batch CronJob's missed-schedule rule.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use quotagate::api::ray::{RayCronJob, RayJob};
use quotagate::embedded::{AllowAll, EmbeddedServer};
use quotagate::rayservice::raycronjob::controller::{self as cronctl, tokio_clock};
use serde_json::json;

const NS: &str = "default";

/// Runs `f` on a paused current-thread runtime, on a thread with room for the large Ray types.
fn paused<F: std::future::Future<Output = ()> + Send + 'static>(f: F) {
    std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .start_paused(true)
                .build()
                .unwrap();
            rt.block_on(f);
        })
        .unwrap()
        .join()
        .unwrap();
}

fn cron(name: &str, schedule: &str) -> RayCronJob {
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCronJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"schedule": schedule, "jobTemplate": {"entrypoint": "sleep 1", "shutdownAfterJobFinishes": true, "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}}}}}
    }))
    .unwrap()
}

/// The RayJobs whose owner is the RayCronJob with `uid` (KubeRay e2e's `countRayJobsOwnedByUID`), by name.
async fn owned(client: &Client, uid: &str) -> Vec<RayJob> {
    let mut jobs: Vec<RayJob> = Api::<RayJob>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|j| j.owner_references().iter().any(|o| o.uid == uid))
        .collect();
    jobs.sort_by_key(|j| j.name_any());
    jobs
}

async fn wait_for_count(client: &Client, uid: &str, n: usize, within: Duration) -> Vec<RayJob> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let jobs = owned(client, uid).await;
        if jobs.len() >= n {
            return jobs;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{n} RayJobs not created within {within:?}: {:?}",
            jobs.iter().map(|j| j.name_any()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn reasons(client: &Client, name: &str) -> Vec<String> {
    let events = Api::<Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    events
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.reason)
        .collect()
}

fn last_schedule(c: &RayCronJob) -> Option<Timestamp> {
    c.status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .map(|t| t.0)
}

fn start() -> (Arc<EmbeddedServer>, Client) {
    let server = EmbeddedServer::new(&quotagate::api::all_crds(), Arc::new(AllowAll));
    let client = server.client();
    let mut ctx = cronctl::Context::new(client.clone());
    ctx.clock = tokio_clock();
    ctx.local = jiff::tz::TimeZone::UTC;
    tokio::spawn(cronctl::run(Arc::new(ctx)));
    (server, client)
}

/// A `* * * * *` RayCronJob over several minutes: one RayJob a minute, KubeRay's names, label,
/// annotation and owner; `lastScheduleTime` follows. KubeRay e2e `TestRayCronJobSuspend`: nothing
/// while suspended, RayJobs again once resumed; CronJob's rule: the resume creates one RayJob for the
/// minutes missed, not one per minute. KubeRay unit `TestRayCronJobReconcile_NoDuplicateOnStaleStatus`
/// and e2e `TestRayCronJobNoDuplicateRayJob`: a stale `lastScheduleTime` makes no second RayJob for a
/// time. A year-old `lastScheduleTime` makes no year of RayJobs, and a `TooManyMissedTimes` warning.
#[test]
fn a_minutely_ray_cron_job_suspends_resumes_and_never_catches_up_a_flood() {
    paused(async {
        let (_server, client) = start();
        let api: Api<RayCronJob> = Api::namespaced(client.clone(), NS);
        let created = api
            .create(&PostParams::default(), &cron("minutely", "* * * * *"))
            .await
            .unwrap();
        let uid = created.uid().unwrap();

        let jobs = wait_for_count(&client, &uid, 3, Duration::from_secs(4 * 60)).await;
        let minutes: Vec<i64> = jobs
            .iter()
            .map(|j| j.name_any().strip_prefix("minutely-").unwrap().parse().unwrap())
            .collect();
        assert_eq!(
            minutes,
            vec![minutes[0], minutes[0] + 1, minutes[0] + 2],
            "one RayJob a minute, named by its minute"
        );
        for (job, minute) in jobs.iter().zip(&minutes) {
            assert_eq!(job.labels()["ray.io/cronjob-name"], "minutely");
            let at: Timestamp = job.annotations()["ray.io/cronjob-scheduled-timestamp"]
                .parse()
                .unwrap();
            assert_eq!(at.as_second(), minute * 60, "the annotation is the schedule time");
            let owner = &job.owner_references()[0];
            assert_eq!(
                (owner.kind.as_str(), owner.controller, owner.block_owner_deletion),
                ("RayCronJob", Some(true), Some(true))
            );
            assert_eq!(
                job.spec.entrypoint.as_deref(),
                Some("sleep 1"),
                "the template's spec"
            );
        }
        let c = api.get("minutely").await.unwrap();
        assert!(last_schedule(&c).is_some_and(|t| t.as_second() >= minutes[2] * 60));
        assert!(
            reasons(&client, "minutely")
                .await
                .contains(&"CreatedRayJob".to_string())
        );

        // Suspended for three minutes: nothing new.
        api.patch(
            "minutely",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let before = owned(&client, &uid).await.len();
        tokio::time::sleep(Duration::from_secs(3 * 60)).await;
        assert_eq!(
            owned(&client, &uid).await.len(),
            before,
            "no RayJob while suspended"
        );
        assert!(
            reasons(&client, "minutely")
                .await
                .contains(&"SuspendedRayCronJob".to_string())
        );

        // Resumed: one RayJob for the three minutes missed, then one a minute again.
        api.patch(
            "minutely",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": false}})),
        )
        .await
        .unwrap();
        let jobs = wait_for_count(&client, &uid, before + 1, Duration::from_secs(5)).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            owned(&client, &uid).await.len(),
            before + 1,
            "the missed minutes make one RayJob: {:?}",
            jobs.iter().map(|j| j.name_any()).collect::<Vec<_>>()
        );
        wait_for_count(&client, &uid, before + 2, Duration::from_secs(61)).await;

        // A stale lastScheduleTime (one minute back): the same RayJob name again, no second RayJob.
        let c = api.get("minutely").await.unwrap();
        let last = last_schedule(&c).unwrap();
        let count = owned(&client, &uid).await.len();
        let stale = json!({"status": {"lastScheduleTime": last.checked_sub(jiff::SignedDuration::from_secs(60)).unwrap().to_string()}});
        api.patch_status("minutely", &PatchParams::default(), &Patch::Merge(&stale))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let c = api.get("minutely").await.unwrap();
        if last_schedule(&c) == Some(last) {
            assert_eq!(
                owned(&client, &uid).await.len(),
                count,
                "a time already scheduled makes no second RayJob"
            );
        }

        // A year-old lastScheduleTime (a controller down for a year): at most the latest minute's
        // RayJob, and CronJob's warning.
        api.patch(
            "minutely",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let count = owned(&client, &uid).await.len();
        let year_ago = last
            .checked_sub(jiff::SignedDuration::from_hours(24 * 365))
            .unwrap();
        api.patch_status(
            "minutely",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"lastScheduleTime": year_ago.to_string()}})),
        )
        .await
        .unwrap();
        api.patch(
            "minutely",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": false}})),
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after = owned(&client, &uid).await.len();
        assert!(after <= count + 1, "a year missed made {} RayJobs", after - count);
        assert!(
            reasons(&client, "minutely")
                .await
                .contains(&"TooManyMissedTimes".to_string())
        );
        let c = api.get("minutely").await.unwrap();
        assert!(
            last_schedule(&c).is_some_and(|t| t >= last),
            "lastScheduleTime moved to the latest minute, not a year back"
        );
    });
}

/// KubeRay unit `TestRayCronJobReconcile_InvalidSchedule`, through the controller: a RayCronJob the
/// server took (this one admits everything) but KubeRay's rules refuse gets an `InvalidRayCronJobSpec`
/// warning and no RayJob.
#[test]
fn an_invalid_ray_cron_job_gets_a_warning_and_no_ray_job() {
    paused(async {
        let (_server, client) = start();
        let api: Api<RayCronJob> = Api::namespaced(client.clone(), NS);
        let created = api
            .create(
                &PostParams::default(),
                &cron("invalid-cronjob", "invalid cron string"),
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert!(owned(&client, &created.uid().unwrap()).await.is_empty());
        assert!(
            reasons(&client, "invalid-cronjob")
                .await
                .contains(&"InvalidRayCronJobSpec".to_string())
        );
    });
}

/// KubeRay runs its RayCronJob controller only with the `RayCronJob` feature gate (`main.go`): the
/// Ray operator without it leaves a RayCronJob alone; the same RayCronJob gets its RayJob once an
/// operator with the gate runs. Real time, a second of schedule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feature_gate_starts_the_controller() {
    let gates = |on: bool| quotagate::api::ray::validation::RayFeatureGates {
        ray_cron_job: on,
        ..Default::default()
    };
    let dashboards =
        quotagate::wiring::ray::Dashboards::simulated(Duration::from_millis(100), Duration::from_millis(100));
    let server = EmbeddedServer::new(&quotagate::api::all_crds(), Arc::new(AllowAll));
    let client = server.client();
    let api: Api<RayCronJob> = Api::namespaced(client.clone(), NS);
    let uid = api
        .create(&PostParams::default(), &cron("gated", "@every 1s"))
        .await
        .unwrap()
        .uid()
        .unwrap();

    let without = quotagate::wiring::ray::spawn_ray_operator(
        client.clone(),
        &dashboards,
        gates(false),
        None,
        Default::default(),
        None,
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        owned(&client, &uid).await.is_empty(),
        "no RayJob without the gate"
    );
    assert_eq!(last_schedule(&api.get("gated").await.unwrap()), None);
    drop(without);

    let _with = quotagate::wiring::ray::spawn_ray_operator(
        client.clone(),
        &dashboards,
        gates(true),
        None,
        Default::default(),
        None,
    );
    wait_for_count(&client, &uid, 1, Duration::from_secs(20)).await;
    // The controller creates the RayJob first and writes `lastScheduleTime` after it (and after the
    // event), so the status may trail the RayJob a moment, as KubeRay's envtest waits for it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while last_schedule(&api.get("gated").await.unwrap()).is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "lastScheduleTime not written within 10 s of the RayJob"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
