//! The dashboard client against a real Ray head (Ray Serve 2.60 on loopback, see
//! ../shared/research/ray-peer.md). Needs `scripts/install-ray.sh`; the test starts and stops the head
//! with `scripts/ray-peer.sh` (with token auth on), or reuses the one at `QUOTAGATE_RAY_DASHBOARD`
//! (token from `QUOTAGATE_RAY_TOKEN` if that head uses one).
//!
//!   scripts/install-ray.sh && cargo test --test ray_dashboard_real -- --nocapture
//!
//! One #[test] on purpose: there is one head at a time and `ray stop` is host-wide.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use quotagate::rayservice::dashboard::http::{HttpDashboard, HttpDashboardOptions};
use quotagate::rayservice::dashboard::{
    DashboardEndpoint, DashboardError, RayDashboard, ServeConfig, ServeDetails, ServeReadiness, serve_readiness,
};
use serde_json::json;
use sha2::{Digest, Sha256};

/// Serve proxy port for the test apps: not 8000, which other local tools like to use.
const SERVE_PORT: u16 = 18000;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Stops the head on drop, including when an assertion fails, if this test started it.
struct Head {
    url: String,
    token: Option<String>,
    started_here: bool,
}

/// 64 hex characters, the token format Ray's token auth uses; fresh per run.
fn fresh_token() -> String {
    let seed = format!("{:?}-{}", std::time::SystemTime::now(), std::process::id());
    Sha256::digest(seed.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

impl Head {
    fn start(root: &Path) -> Head {
        let token = fresh_token();
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
        Head { url, token: Some(token), started_here: true }
    }
}

impl Drop for Head {
    fn drop(&mut self) {
        if self.started_here {
            let t = Instant::now();
            let status = Command::new(repo_root().join("scripts/ray-peer.sh")).arg("stop").status();
            println!("ray-peer stop: {status:?} in {:.1?}", t.elapsed());
        }
    }
}

#[test]
fn ray_dashboard_against_real_head() {
    let root = repo_root();
    let reuse = std::env::var("QUOTAGATE_RAY_DASHBOARD").ok().filter(|s| !s.is_empty());
    if reuse.is_none() && !root.join(".venv-ray/bin/ray").exists() {
        if std::env::var("QUOTAGATE_REQUIRE_TOOLS").as_deref() == Ok("1") {
            panic!("QUOTAGATE_REQUIRE_TOOLS=1 but .venv-ray is missing: run scripts/install-ray.sh");
        }
        println!("skipped: run scripts/install-ray.sh (no .venv-ray with Ray Serve)");
        return;
    }
    let t = Instant::now();
    let head = match reuse {
        Some(url) => Head {
            url,
            token: std::env::var("QUOTAGATE_RAY_TOKEN").ok().filter(|t| !t.is_empty()),
            started_here: false,
        },
        None => Head::start(&root),
    };
    println!("head at {} (ready after {:.1?})", head.url, t.elapsed());

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(scenarios(&head, &root));
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
    client: &HttpDashboard,
    ep: &DashboardEndpoint,
    what: &str,
    limit: Duration,
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
                    println!("  {what}: reached after {:.1?} ({})", started.elapsed(), readiness.reason());
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
        assert!(started.elapsed() < limit, "{what}: not reached within {limit:?}; last: {last_reason}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn hello_target_and_running(d: &ServeDetails) -> Option<(u32, usize)> {
    let dep = d.applications.get("hello")?.deployments.get("Hello")?;
    Some((dep.target_num_replicas?, dep.running_replicas()))
}

async fn scenarios(head: &Head, root: &Path) {
    let client = HttpDashboard::new(HttpDashboardOptions {
        // The first PUT starts the Serve controller synchronously (1.6–3.2 s measured).
        request_timeout: Duration::from_secs(30),
        ..Default::default()
    });
    let mut ep = DashboardEndpoint::new(&head.url);

    if let Some(token) = &head.token {
        println!("0. token auth: x-ray-authorization");
        match client.serve_details(&ep).await {
            Err(DashboardError::Unauthorized { status: 401, body }) => println!("  no token -> 401 {body}"),
            other => panic!(
                "want 401 without a token, got {other:?}; is a head without token auth already running? \
                 stop it with scripts/ray-peer.sh stop"
            ),
        }
        match client.serve_details(&ep.clone().with_token("0".repeat(64))).await {
            Err(DashboardError::Unauthorized { status: 403, .. }) => println!("  wrong token -> 403"),
            other => panic!("want 403 with a wrong token, got {other:?}"),
        }
        ep = ep.with_token(token.clone());
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
    let d = wait_for(&client, &ep, "hello ready", Duration::from_secs(90), &sent, |_, r| r.is_ready()).await;
    assert_eq!(d.applications["hello"].status.as_str(), "RUNNING");
    assert_eq!(hello_target_and_running(&d), Some((2, 2)));
    assert_eq!(d.target_capacity, None);

    println!("2. target_capacity 50 -> target_num_replicas follows");
    let sent = app_config(root, Some(50.0), vec![]);
    client.deploy(&ep, &sent, None).await.unwrap();
    let d = wait_for(&client, &ep, "capacity 50", Duration::from_secs(60), &sent, |d, r| {
        d.target_capacity == Some(50.0) && hello_target_and_running(d).map(|(t, _)| t) == Some(1) && r.is_ready()
    })
    .await;
    println!("  hello (target, running) = {:?}", hello_target_and_running(&d));

    // The same through the trait's own injection argument, as the controller calls it.
    let plain = app_config(root, None, vec![]);
    client.deploy(&ep, &plain, Some(100.0)).await.unwrap();
    let sent = plain.with_target_capacity(Some(100.0)).unwrap();
    let d = wait_for(&client, &ep, "capacity 100", Duration::from_secs(60), &sent, |d, r| {
        d.target_capacity == Some(100.0) && hello_target_and_running(d).map(|(t, _)| t) == Some(2) && r.is_ready()
    })
    .await;
    assert_eq!(hello_target_and_running(&d), Some((2, 2)));

    println!("3. schema error -> 400 with Ray's message");
    let missing_import = ServeConfig::from_json(json!({"applications": [{"name": "x", "route_prefix": "/x"}]})).unwrap();
    match client.deploy(&ep, &missing_import, None).await {
        Err(DashboardError::Rejected { message }) => {
            println!("  {}", message.lines().take(3).collect::<Vec<_>>().join(" | "));
            assert!(message.contains("applications.0.import_path"), "{message}");
            assert!(message.contains("Field required"), "{message}");
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
    println!("  PUT accepted in {:.1?} (validation of imports is asynchronous)", t.elapsed());
    let d = wait_for(&client, &ep, "broken fails", Duration::from_secs(60), &sent, |_, r| {
        matches!(r, ServeReadiness::Failed { .. })
    })
    .await;
    match serve_readiness(&d, None) {
        ServeReadiness::Failed { app, status, message } => {
            assert_eq!(app, "broken");
            assert_eq!(status.as_str(), "DEPLOY_FAILED");
            assert_eq!(message, "ModuleNotFoundError: No module named 'no_such_module'");
            let raw = &d.applications["broken"].message;
            println!("  raw message: {} bytes, summary: {message}", raw.len());
        }
        other => panic!("want Failed, got {other:?}"),
    }
    // The healthy app next to it is untouched.
    assert_eq!(d.applications["hello"].status.as_str(), "RUNNING");

    println!("5. closed port -> unreachable, fast");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let t = Instant::now();
    let err = client.serve_details(&DashboardEndpoint::new(format!("http://{closed}"))).await.unwrap_err();
    println!("  {err} (after {:.1?})", t.elapsed());
    assert!(matches!(err, DashboardError::Unreachable { .. }), "{err:?}");
    assert!(t.elapsed() < Duration::from_secs(1));

    println!("6. delete -> no applications");
    client.delete_applications(&ep).await.unwrap();
    let d = client.serve_details(&ep).await.unwrap();
    assert!(d.applications.is_empty(), "{:?}", d.applications.keys().collect::<Vec<_>>());
}
