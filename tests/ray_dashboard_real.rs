//! The dashboard client against a real Ray head (Ray Serve 2.60 on loopback, started by
//! `scripts/ray-peer.sh`), and the same scenarios against the simulator, so the simulator
//! is held to what real Ray does: the Serve API of the RayService controller and the Jobs API of the
//! RayJob controller's HTTPMode.
//!
//!   scripts/install-ray.sh && cargo test --test ray_dashboard_real -- --nocapture
//!
//! The real test needs `scripts/install-ray.sh`; it starts and stops the head with
//! `scripts/ray-peer.sh` (with token auth on), or reuses the one at `QUOTAGATE_RAY_DASHBOARD`
//! (token from `QUOTAGATE_RAY_TOKEN` if that head uses one). It is one #[test] on purpose: there is
//! one head at a time and `ray stop` is host-wide.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use quotagate::api::ray::RayJob;
use quotagate::rayservice::dashboard::http::{HttpDashboard, HttpDashboardOptions};
use quotagate::rayservice::dashboard::sim::{RaySim, SimOptions};
use quotagate::rayservice::dashboard::{
    DashboardEndpoint, DashboardError, JobDetails, JobSubmitRequest, RayDashboard, RayJobsApi, ServeConfig,
    ServeDetails, ServeReadiness, serve_readiness,
};
use quotagate::rayservice::rayjob::controller::submit_request;
use serde_json::json;
use sha2::{Digest, Sha256};
// tokio's clock, so the simulator run (paused clock) and the real run share the polling code.
use tokio::time::Instant;

/// Serve proxy port for the test apps: not 8000, which other local tools like to use.
const SERVE_PORT: u16 = 18000;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// 64 hex characters, the token format Ray's token auth uses; fresh per run.
fn fresh_token() -> String {
    let seed = format!("{:?}-{}", std::time::SystemTime::now(), std::process::id());
    Sha256::digest(seed.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Stops the head on drop, including when an assertion fails, if this test started it.
struct Head {
    url: String,
    token: Option<String>,
    started_here: bool,
}

impl Head {
    fn start(root: &Path) -> Head {
        let token = fresh_token();
        let t = std::time::Instant::now();
        let out = Command::new(root.join("scripts/ray-peer.sh"))
            .arg("start")
            .env("RAY_PEER_AUTH_TOKEN", &token)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "ray-peer.sh start failed: {}\n{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
        let url = stdout.lines().last().unwrap().trim().to_owned();
        println!("head at {url} (healthy after {:.1?})", t.elapsed());
        Head {
            url,
            token: Some(token),
            started_here: true,
        }
    }
}

impl Drop for Head {
    fn drop(&mut self) {
        if self.started_here {
            let t = std::time::Instant::now();
            let status = Command::new(repo_root().join("scripts/ray-peer.sh"))
                .arg("stop")
                .status();
            println!("ray-peer stop: {status:?} in {:.1?}", t.elapsed());
        }
    }
}

#[test]
fn ray_dashboard_against_real_head() {
    let root = repo_root();
    let reuse = std::env::var("QUOTAGATE_RAY_DASHBOARD")
        .ok()
        .filter(|s| !s.is_empty());
    if reuse.is_none() && !root.join(".venv-ray/bin/ray").exists() {
        if std::env::var("QUOTAGATE_REQUIRE_TOOLS").as_deref() == Ok("1") {
            panic!("QUOTAGATE_REQUIRE_TOOLS=1 but .venv-ray is missing: run scripts/install-ray.sh");
        }
        println!("skipped: run scripts/install-ray.sh (no .venv-ray with Ray Serve)");
        return;
    }
    let head = match reuse {
        Some(url) => Head {
            url,
            token: std::env::var("QUOTAGATE_RAY_TOKEN")
                .ok()
                .filter(|t| !t.is_empty()),
            started_here: false,
        },
        None => Head::start(&root),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = HttpDashboard::new(HttpDashboardOptions {
            // The first PUT starts the Serve controller synchronously (1.6–3.2 s measured).
            request_timeout: Duration::from_secs(30),
            ..Default::default()
        });
        // The Jobs API first: it needs no Serve controller, whose start-up is the slowest step.
        job_scenarios(
            &client,
            &head.url,
            head.token.as_deref(),
            Duration::from_millis(250),
            true,
        )
        .await;
        scenarios(
            &client,
            &head.url,
            head.token.as_deref(),
            &root,
            Duration::from_millis(500),
        )
        .await;

        println!("6. closed port -> unreachable, fast");
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let t = std::time::Instant::now();
        let err = client
            .serve_details(&DashboardEndpoint::new(format!("http://{closed}")))
            .await
            .unwrap_err();
        println!("  {err} (after {:.1?})", t.elapsed());
        assert!(matches!(err, DashboardError::Unreachable { .. }), "{err:?}");
        assert!(t.elapsed() < Duration::from_secs(1));
    });
}

/// The same scenarios against the simulator, on the paused clock: no Ray needed.
#[tokio::test(start_paused = true)]
async fn simulator_matches_the_real_scenarios() {
    let sim = RaySim::new(SimOptions::default());
    let url = "http://rs-sim-head-svc.default.svc.cluster.local:8265";
    let token = fresh_token();
    sim.set_auth_token(url, Some(token.clone()));
    let client: &dyn RayDashboard = &sim;
    scenarios(
        client,
        url,
        Some(&token),
        &repo_root(),
        Duration::from_millis(500),
    )
    .await;
    job_scenarios(&sim, url, Some(&token), Duration::from_millis(250), false).await;
}

/// Polls a job until `done` holds on its status; panics after `limit`.
async fn wait_job(
    client: &dyn RayJobsApi,
    ep: &DashboardEndpoint,
    id: &str,
    what: &str,
    poll: Duration,
    done: impl Fn(&str) -> bool,
) -> JobDetails {
    let limit = Duration::from_secs(90);
    let start = Instant::now();
    loop {
        let d = client
            .job_info(ep, id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("job {id} unknown to the head"));
        if done(&d.status) {
            println!("  {id}: {} after {:.1?}", d.status, start.elapsed());
            return d;
        }
        assert!(
            start.elapsed() < limit,
            "job {id}: {what} not reached in {limit:?}; last {d:?}"
        );
        tokio::time::sleep(poll).await;
    }
}

/// The Jobs API the RayJob controller's HTTPMode uses (KubeRay's `dashboard_httpclient.go`): submit,
/// read, logs, stop, delete, and what the head refuses. Shell entrypoints, so the head's own Python
/// environment does not matter; the simulator reads the same `sleep N` and `exit K`.
async fn job_scenarios(client: &dyn RayJobsApi, url: &str, token: Option<&str>, poll: Duration, real: bool) {
    let mut ep = DashboardEndpoint::new(url);
    if let Some(t) = token {
        ep = ep.with_token(t.to_owned());
    }
    let run = fresh_token()[..8].to_owned();
    let id = |what: &str| format!("qg-{what}-{run}");

    println!("jobs 1. an unknown submission id reads as none");
    assert_eq!(client.job_info(&ep, &id("never")).await.unwrap(), None);

    println!("jobs 2. a job that succeeds, its logs, and the same id refused");
    let ok = JobSubmitRequest {
        entrypoint: "echo hello from a ray job".into(),
        submission_id: Some(id("ok")),
        metadata: Some([("owner".to_string(), "quotagate".to_string())].into()),
        ..Default::default()
    };
    let submitted = client.submit_job(&ep, &ok).await.unwrap();
    assert_eq!(submitted.submission_id, id("ok"));
    assert!(
        client.submit_job(&ep, &ok).await.is_err(),
        "a known submission id is refused"
    );
    let d = wait_job(client, &ep, &id("ok"), "SUCCEEDED", poll, |s| {
        s == "SUCCEEDED" || s == "FAILED"
    })
    .await;
    assert_eq!(d.status, "SUCCEEDED", "{d:?}");
    assert_eq!(
        d.metadata
            .as_ref()
            .and_then(|m| m.get("owner"))
            .map(String::as_str),
        Some("quotagate")
    );
    let logs = client.job_logs(&ep, &id("ok")).await.unwrap();
    assert!(logs.contains("hello from a ray job"), "{logs}");

    println!("jobs 3. a non-zero exit fails");
    let bad = JobSubmitRequest {
        entrypoint: "exit 3".into(),
        submission_id: Some(id("bad")),
        ..Default::default()
    };
    client.submit_job(&ep, &bad).await.unwrap();
    let d = wait_job(client, &ep, &id("bad"), "FAILED", poll, |s| {
        s == "SUCCEEDED" || s == "FAILED"
    })
    .await;
    assert_eq!(d.status, "FAILED", "{d:?}");

    println!("jobs 4. a running job cannot be deleted; stopped, it can, once");
    let long = JobSubmitRequest {
        entrypoint: "sleep 60".into(),
        submission_id: Some(id("long")),
        ..Default::default()
    };
    client.submit_job(&ep, &long).await.unwrap();
    wait_job(client, &ep, &id("long"), "RUNNING", poll, |s| s == "RUNNING").await;
    assert!(
        client.delete_job(&ep, &id("long")).await.is_err(),
        "a running job's record is not deleted"
    );
    assert!(
        client.stop_job(&ep, &id("long")).await.unwrap(),
        "a running job stops"
    );
    wait_job(client, &ep, &id("long"), "STOPPED", poll, |s| s == "STOPPED").await;
    assert!(
        !client.stop_job(&ep, &id("long")).await.unwrap(),
        "an ended job is not stopped again"
    );
    println!("jobs 5. a RayJob in HTTPMode: the request the RayJob controller builds from its spec");
    // KubeRay: ray-operator/controllers/ray/utils/dashboard_httpclient.go (SubmitJobReq with the
    // request of ConvertRayJobToReq); ray-operator/test/e2erayjob/rayjob_lightweight_test.go
    // "Successful RayJob in HTTP mode with auth token" (the head here runs with token auth too): the
    // job submitted over the Jobs API runs to SUCCEEDED with its runtime env and metadata.
    let ray_job: RayJob = serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "http-mode", "namespace": "default"},
        "spec": {
            "submissionMode": "HTTPMode",
            "entrypoint": "echo greeting=$GREETING",
            "runtimeEnvYAML": "env_vars:\n  GREETING: hello-from-runtime-env\n",
            "metadata": {"rayjob": "http-mode"},
            "entrypointNumCpus": 0.5,
            "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}}}
        }
    }))
    .unwrap();
    let request = submit_request(&ray_job, &id("rayjob")).unwrap();
    assert_eq!(
        client.submit_job(&ep, &request).await.unwrap().submission_id,
        id("rayjob")
    );
    let d = wait_job(client, &ep, &id("rayjob"), "SUCCEEDED", poll, |s| {
        s == "SUCCEEDED" || s == "FAILED"
    })
    .await;
    assert_eq!(d.status, "SUCCEEDED", "{d:?}");
    assert_eq!(
        d.metadata
            .as_ref()
            .and_then(|m| m.get("rayjob"))
            .map(String::as_str),
        Some("http-mode"),
        "{d:?}"
    );
    let env = d
        .runtime_env
        .as_ref()
        .and_then(|e| e.get("env_vars"))
        .and_then(|v| v.get("GREETING"))
        .and_then(|v| v.as_str());
    assert_eq!(
        env,
        Some("hello-from-runtime-env"),
        "the runtime env as submitted: {d:?}"
    );
    let logs = client.job_logs(&ep, &id("rayjob")).await.unwrap();
    if real {
        // The simulator echoes the entrypoint as written; the real head runs it in the runtime env.
        assert!(logs.contains("greeting=hello-from-runtime-env"), "{logs}");
    }
    for what in ["ok", "bad", "long", "rayjob"] {
        assert!(client.delete_job(&ep, &id(what)).await.unwrap(), "{what} deleted");
        assert_eq!(
            client.job_info(&ep, &id(what)).await.unwrap(),
            None,
            "{what} gone"
        );
    }
}

fn app_config(root: &Path, target_capacity: Option<f64>, extra_apps: Vec<serde_json::Value>) -> ServeConfig {
    let working_dir = format!("local://{}", root.join("tests/fixtures/serve_app").display());
    let mut apps = vec![json!({
        "name": "hello", "route_prefix": "/", "import_path": "app:app",
        "runtime_env": {"working_dir": working_dir},
        "deployments": [{"name": "Hello", "num_replicas": 2, "ray_actor_options": {"num_cpus": 0.1}}]
    })];
    apps.extend(extra_apps);
    let config = ServeConfig::from_json(json!({
        "http_options": {"host": "127.0.0.1", "port": SERVE_PORT},
        "applications": apps,
    }))
    .unwrap();
    // Through the injection path the controller uses, not by writing the key by hand.
    config.with_target_capacity(target_capacity).unwrap()
}

/// Polls until `done` holds, printing each new readiness reason; panics after `limit`.
async fn wait_for(
    client: &dyn RayDashboard,
    ep: &DashboardEndpoint,
    what: &str,
    limit: Duration,
    poll: Duration,
    sent: &ServeConfig,
    done: impl Fn(&ServeDetails, &ServeReadiness) -> bool,
) -> ServeDetails {
    let started = Instant::now();
    let mut last_reason = String::new();
    loop {
        match client.serve_details(ep).await {
            Ok(details) => {
                let readiness = serve_readiness(&details, Some(sent));
                if done(&details, &readiness) {
                    println!(
                        "  {what}: reached after {:.1?} ({})",
                        started.elapsed(),
                        readiness.reason()
                    );
                    return details;
                }
                let reason = readiness.reason();
                if reason != last_reason {
                    println!("  {what}: +{:.1?} {reason}", started.elapsed());
                    last_reason = reason;
                }
            }
            Err(e) => println!("  {what}: +{:.1?} GET failed: {e}", started.elapsed()),
        }
        assert!(
            started.elapsed() < limit,
            "{what}: not reached within {limit:?}; last: {last_reason}"
        );
        tokio::time::sleep(poll).await;
    }
}

fn hello_target_and_running(d: &ServeDetails) -> Option<(u32, usize)> {
    let dep = d.applications.get("hello")?.deployments.get("Hello")?;
    Some((dep.target_num_replicas?, dep.running_replicas()))
}

async fn scenarios(client: &dyn RayDashboard, url: &str, token: Option<&str>, root: &Path, poll: Duration) {
    let mut ep = DashboardEndpoint::new(url);

    if let Some(token) = token {
        println!("0. token auth: x-ray-authorization");
        match client.serve_details(&ep).await {
            Err(DashboardError::Unauthorized { status: 401, body }) => {
                println!("  no token -> 401 {body}")
            }
            other => panic!(
                "want 401 without a token, got {other:?}; is a head without token auth already running? \
                 stop it with scripts/ray-peer.sh stop"
            ),
        }
        match client.serve_details(&ep.clone().with_token("0".repeat(64))).await {
            Err(DashboardError::Unauthorized { status: 403, .. }) => {
                println!("  wrong token -> 403")
            }
            other => panic!("want 403 with a wrong token, got {other:?}"),
        }
        ep = ep.with_token(token);
        client.serve_details(&ep).await.unwrap();
        println!("  right token -> 200");
    }

    // A reused head may run Serve already; start clean so http_options of the first PUT apply.
    client.delete_applications(&ep).await.unwrap();

    println!("1. deploy hello with 2 replicas");
    let t = Instant::now();
    let sent = app_config(root, None, vec![]);
    client.deploy(&ep, &sent, None).await.unwrap();
    println!("  PUT accepted in {:.1?}", t.elapsed());
    let d = wait_for(
        client,
        &ep,
        "hello ready",
        Duration::from_secs(90),
        poll,
        &sent,
        |_, r| r.is_ready(),
    )
    .await;
    assert_eq!(d.applications["hello"].status.as_str(), "RUNNING");
    assert_eq!(hello_target_and_running(&d), Some((2, 2)));
    assert_eq!(d.target_capacity, None);

    println!("2. target_capacity 50 -> target_num_replicas follows");
    let sent = app_config(root, Some(50.0), vec![]);
    client.deploy(&ep, &sent, None).await.unwrap();
    let d = wait_for(
        client,
        &ep,
        "capacity 50",
        Duration::from_secs(60),
        poll,
        &sent,
        |d, r| {
            d.target_capacity == Some(50.0)
                && hello_target_and_running(d).map(|(t, _)| t) == Some(1)
                && r.is_ready()
        },
    )
    .await;
    assert_eq!(hello_target_and_running(&d), Some((1, 1)));

    // The same through the trait's own injection argument, as the controller calls it.
    let plain = app_config(root, None, vec![]);
    client.deploy(&ep, &plain, Some(100.0)).await.unwrap();
    let sent = plain.with_target_capacity(Some(100.0)).unwrap();
    let d = wait_for(
        client,
        &ep,
        "capacity 100",
        Duration::from_secs(60),
        poll,
        &sent,
        |d, r| {
            d.target_capacity == Some(100.0)
                && hello_target_and_running(d).map(|(t, _)| t) == Some(2)
                && r.is_ready()
        },
    )
    .await;
    assert_eq!(hello_target_and_running(&d), Some((2, 2)));

    println!("3. schema error -> 400 with Ray's message");
    let missing_import =
        ServeConfig::from_json(json!({"applications": [{"name": "x", "route_prefix": "/x"}]})).unwrap();
    match client.deploy(&ep, &missing_import, None).await {
        Err(DashboardError::Rejected { message }) => {
            println!("  {}", message.lines().take(3).collect::<Vec<_>>().join(" | "));
            assert!(
                message.contains("1 validation error for ServeDeploySchema"),
                "{message}"
            );
            assert!(
                message.contains("applications.0.import_path\n  Field required"),
                "{message}"
            );
        }
        other => panic!("want Rejected, got {other:?}"),
    }

    println!("4. bad import path -> DEPLOY_FAILED with the traceback's last line");
    let working_dir = format!("local://{}", root.join("tests/fixtures/serve_app").display());
    let broken = json!({"name": "broken", "route_prefix": "/broken", "import_path": "no_such_module:app",
                        "runtime_env": {"working_dir": working_dir}});
    let t = Instant::now();
    let sent = app_config(root, None, vec![broken]);
    client.deploy(&ep, &sent, None).await.unwrap();
    println!(
        "  PUT accepted in {:.1?} (validation of imports is asynchronous)",
        t.elapsed()
    );
    let d = wait_for(
        client,
        &ep,
        "broken fails",
        Duration::from_secs(60),
        poll,
        &sent,
        |_, r| matches!(r, ServeReadiness::Failed { .. }),
    )
    .await;
    match serve_readiness(&d, None) {
        ServeReadiness::Failed { app, status, message } => {
            assert_eq!(app, "broken");
            assert_eq!(status.as_str(), "DEPLOY_FAILED");
            assert_eq!(message, "ModuleNotFoundError: No module named 'no_such_module'");
            let raw = &d.applications["broken"].message;
            assert!(
                raw.starts_with("Deploying app 'broken' failed with exception:\nTraceback"),
                "{raw}"
            );
            println!("  raw message: {} bytes, summary: {message}", raw.len());
        }
        other => panic!("want Failed, got {other:?}"),
    }
    assert!(d.applications["broken"].deployments.is_empty());
    // The healthy app next to it is untouched.
    assert_eq!(d.applications["hello"].status.as_str(), "RUNNING");

    println!("5. delete -> no applications");
    client.delete_applications(&ep).await.unwrap();
    let d = client.serve_details(&ep).await.unwrap();
    assert!(
        d.applications.is_empty(),
        "{:?}",
        d.applications.keys().collect::<Vec<_>>()
    );
    assert_eq!(d.target_capacity, None);
}
