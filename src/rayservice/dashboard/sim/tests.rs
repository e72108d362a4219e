//! Simulator tests on tokio's paused clock.

use super::schema::configured_replicas;
use super::*;
use crate::rayservice::dashboard::{AppStatus, ServeReadiness, serve_readiness};
use serde_json::json;

pub(super) const URL: &str = "http://rs-a-head-svc.ns.svc.cluster.local:8265";
pub(super) const S: Duration = Duration::from_secs(1);

pub(super) fn ep() -> DashboardEndpoint {
    DashboardEndpoint::new(URL)
}

pub(super) fn sim() -> RaySim {
    RaySim::new(SimOptions::default())
}

pub(super) fn hello(replicas: u32) -> Value {
    json!({"name": "hello", "route_prefix": "/", "import_path": "app:app",
           "deployments": [{"name": "Hello", "num_replicas": replicas}]})
}

pub(super) fn config(apps: Vec<Value>) -> ServeConfig {
    ServeConfig::from_json(json!({"applications": apps})).unwrap()
}

pub(super) async fn details(sim: &RaySim) -> ServeDetails {
    sim.serve_details(&ep()).await.unwrap()
}

/// (app status, deployment status, target, replica states) of hello/Hello.
async fn hello_state(sim: &RaySim) -> (String, String, u32, Vec<String>) {
    let d = details(sim).await;
    let app = &d.applications["hello"];
    let dep = &app.deployments["Hello"];
    let states = dep.replicas.iter().map(|r| r.state.to_string()).collect();
    (
        app.status.to_string(),
        dep.status.to_string(),
        dep.target_num_replicas.unwrap(),
        states,
    )
}

fn st(app: &str, dep: &str, target: u32, replicas: &[&str]) -> (String, String, u32, Vec<String>) {
    (
        app.into(),
        dep.into(),
        target,
        replicas.iter().map(|s| s.to_string()).collect(),
    )
}

#[tokio::test(start_paused = true)]
async fn first_deploy_goes_deploying_starting_running() {
    let sim = sim();
    assert!(details(&sim).await.applications.is_empty());
    sim.deploy(&ep(), &config(vec![hello(2)]), None).await.unwrap();
    let d = details(&sim).await;
    assert_eq!(d.applications["hello"].status, AppStatus::Deploying);
    assert!(d.applications["hello"].deployments.is_empty());
    assert!(!serve_readiness(&d, None).is_ready());

    tokio::time::advance(S).await;
    assert_eq!(
        hello_state(&sim).await,
        st("DEPLOYING", "UPDATING", 2, &["STARTING", "STARTING"])
    );
    tokio::time::advance(2 * S).await;
    assert_eq!(
        hello_state(&sim).await,
        st("RUNNING", "HEALTHY", 2, &["RUNNING", "RUNNING"])
    );
    let d = details(&sim).await;
    assert_eq!(serve_readiness(&d, None), ServeReadiness::Ready);
    assert_eq!(d.applications["hello"].deployed_app_config, Some(hello(2)));
    assert_eq!(d.applications["hello"].route_prefix.as_deref(), Some("/"));
}

async fn running_hello(sim: &RaySim, replicas: u32) {
    sim.deploy(&ep(), &config(vec![hello(replicas)]), None)
        .await
        .unwrap();
    tokio::time::advance(3 * S).await;
    assert!(serve_readiness(&details(sim).await, None).is_ready());
}

#[tokio::test(start_paused = true)]
async fn target_capacity_scales_like_serve() {
    let sim = sim();
    running_hello(&sim, 2).await;

    // Downscale: a replica STOPPING, app DEPLOYING until it is gone (as seen on Ray 2.60).
    sim.deploy(&ep(), &config(vec![hello(2)]), Some(50.0))
        .await
        .unwrap();
    assert_eq!(
        hello_state(&sim).await,
        st("DEPLOYING", "DOWNSCALING", 1, &["RUNNING", "STOPPING"])
    );
    let d = details(&sim).await;
    assert_eq!(d.target_capacity, Some(50.0));
    assert_eq!(
        d.applications["hello"].deployments["Hello"].message,
        "Downscaling from 2 to 1 replicas."
    );
    tokio::time::advance(2 * S).await;
    assert_eq!(hello_state(&sim).await, st("RUNNING", "HEALTHY", 1, &["RUNNING"]));

    // Upscale: one replica STARTING, app DEPLOYING until it runs.
    sim.deploy(&ep(), &config(vec![hello(2)]), Some(100.0))
        .await
        .unwrap();
    assert_eq!(
        hello_state(&sim).await,
        st("DEPLOYING", "UPSCALING", 2, &["RUNNING", "STARTING"])
    );
    let d = details(&sim).await;
    assert_eq!(
        d.applications["hello"].deployments["Hello"].message,
        "Upscaling from 1 to 2 replicas."
    );
    assert!(!serve_readiness(&d, None).is_ready());
    tokio::time::advance(2 * S).await;
    assert_eq!(
        hello_state(&sim).await,
        st("RUNNING", "HEALTHY", 2, &["RUNNING", "RUNNING"])
    );

    let cases: &[(u32, Option<f64>, u32)] = &[
        (3, Some(0.0), 0),
        (3, Some(34.0), 1),
        (3, Some(50.0), 2),
        (3, None, 3),
    ];
    for (n, tc, want) in cases {
        sim.deploy(&ep(), &config(vec![hello(*n)]), *tc).await.unwrap();
        tokio::time::advance(2 * S).await;
        let (app, _, target, replicas) = hello_state(&sim).await;
        assert_eq!(
            (app.as_str(), target, replicas.len() as u32),
            ("RUNNING", *want, *want),
            "n={n} tc={tc:?}"
        );
        // Omitting the capacity resets it.
        assert_eq!(details(&sim).await.target_capacity, *tc);
    }
}

#[tokio::test(start_paused = true)]
async fn schema_errors_are_400_with_pydantic_like_text() {
    let sim = sim();
    let cases: Vec<(Value, &str)> = vec![
        (json!({}), "applications\n  Field required"),
        (
            json!({"applications": [{"name": "x"}]}),
            "applications.0.import_path\n  Field required [type=missing]",
        ),
        (
            json!({"applications": [{"import_path": "a:b", "deployments": [{"num_replicas": 1}]}]}),
            "applications.0.deployments.0.name\n  Field required",
        ),
        (
            json!({"applications": [{"import_path": "a:b", "deployments": [{"name": "A", "num_replicas": 0}]}]}),
            "applications.0.deployments.0.num_replicas\n  Input should be greater than 0",
        ),
        (
            json!({"applications": [{"name": "x", "import_path": "a:b", "route_prefix": "/a"},
                                     {"name": "x", "import_path": "a:b", "route_prefix": "/b"}]}),
            "Found multiple configs for application \"x\"",
        ),
        (
            json!({"applications": [{"name": "x", "import_path": "a:b", "runtime_env": {"working_dir": "/some/dir"}}]}),
            "Expected URI but received path /some/dir",
        ),
        (
            json!({"target_capacity": 150, "applications": []}),
            "target_capacity\n  Input should be within 0 and 100",
        ),
        (
            json!({"applications": [{"import_path": "a:b", "route_prefix": "x"}]}),
            "route_prefix must start with",
        ),
    ];
    for (body, want) in cases {
        let err = sim
            .deploy(&ep(), &ServeConfig::from_json(body.clone()).unwrap(), None)
            .await
            .unwrap_err();
        match err {
            DashboardError::Rejected { message } => {
                assert!(message.contains("for ServeDeploySchema"), "{body}: {message}");
                assert!(message.contains(want), "{body}: {message}");
            }
            other => panic!("{body}: want Rejected, got {other:?}"),
        }
    }
    // Several errors are reported together, as pydantic does.
    let body = json!({"target_capacity": 150, "applications": [{"name": "x"}]});
    let err = sim
        .deploy(&ep(), &ServeConfig::from_json(body).unwrap(), None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("2 validation errors"), "{err}");
    // A rejected PUT changes nothing.
    assert_eq!(sim.put_count(URL), 0);
    assert!(details(&sim).await.applications.is_empty());
    // An out-of-range injected capacity never leaves the client.
    let err = sim
        .deploy(&ep(), &config(vec![hello(1)]), Some(150.0))
        .await
        .unwrap_err();
    assert_eq!(err.category(), "invalid_config");
}

#[tokio::test(start_paused = true)]
async fn bad_import_fails_later_with_a_traceback() {
    let sim = sim();
    running_hello(&sim, 1).await;
    let broken = json!({"name": "broken", "route_prefix": "/broken", "import_path": "no_such_module:app"});
    sim.deploy(&ep(), &config(vec![hello(1), broken]), None)
        .await
        .unwrap();
    assert_eq!(
        details(&sim).await.applications["broken"].status,
        AppStatus::Deploying
    );
    tokio::time::advance(3 * S).await;
    let d = details(&sim).await;
    let app = &d.applications["broken"];
    assert_eq!(app.status, AppStatus::DeployFailed);
    assert!(app.deployments.is_empty());
    assert!(app.message.contains("Traceback (most recent call last):"));
    assert!(
        app.message.contains('\u{1b}'),
        "message carries ANSI escapes like Ray's"
    );
    assert_eq!(
        serve_readiness(&d, None),
        ServeReadiness::Failed {
            app: "broken".into(),
            status: AppStatus::DeployFailed,
            message: "ModuleNotFoundError: No module named 'no_such_module'".into(),
        }
    );
    assert_eq!(d.applications["hello"].status, AppStatus::Running);
}

#[tokio::test(start_paused = true)]
async fn in_place_failure_then_fix() {
    let sim = sim();
    running_hello(&sim, 1).await;
    sim.fail_import_path("app:broken_app");
    let mut bad = hello(1);
    bad["import_path"] = json!("app:broken_app");
    sim.deploy(&ep(), &config(vec![bad.clone()]), None).await.unwrap();
    tokio::time::advance(3 * S).await;
    let d = details(&sim).await;
    let app = &d.applications["hello"];
    assert_eq!(app.status, AppStatus::DeployFailed);
    assert!(
        app.deployments.is_empty(),
        "Ray reports no deployments for a failed app"
    );
    assert_eq!(app.deployed_app_config, Some(bad));
    assert!(app.message.contains("No module named 'app'"));

    sim.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap();
    tokio::time::advance(3 * S).await;
    assert_eq!(hello_state(&sim).await, st("RUNNING", "HEALTHY", 1, &["RUNNING"]));
}

#[tokio::test(start_paused = true)]
async fn failure_flag_is_per_cluster_and_clearable() {
    let sim = sim();
    let other = DashboardEndpoint::new("http://rs-b-head-svc.ns.svc.cluster.local:8265");
    sim.set_fail_deploys(URL, true);
    sim.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap();
    sim.deploy(&other, &config(vec![hello(1)]), None).await.unwrap();
    tokio::time::advance(3 * S).await;
    let d = details(&sim).await;
    assert_eq!(d.applications["hello"].status, AppStatus::DeployFailed);
    assert!(
        serve_readiness(&d, None)
            .reason()
            .contains("simulated deploy failure")
    );
    assert!(serve_readiness(&sim.serve_details(&other).await.unwrap(), None).is_ready());

    // Clearing the flag and re-sending the same config recovers.
    sim.set_fail_deploys(URL, false);
    sim.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap();
    tokio::time::advance(3 * S).await;
    assert!(serve_readiness(&details(&sim).await, None).is_ready());
    assert_eq!(sim.cluster_urls().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn code_change_rebuilds_while_old_replicas_serve() {
    let sim = sim();
    running_hello(&sim, 1).await;
    let old_id = details(&sim).await.applications["hello"].deployments["Hello"].replicas[0]
        .replica_id
        .clone();
    let mut v2 = hello(1);
    v2["runtime_env"] = json!({"env_vars": {"VERSION": "2"}});
    sim.deploy(&ep(), &config(vec![v2]), None).await.unwrap();
    assert_eq!(
        hello_state(&sim).await,
        st("DEPLOYING", "UPDATING", 1, &["RUNNING"])
    );
    tokio::time::advance(S).await;
    assert_eq!(
        hello_state(&sim).await,
        st("DEPLOYING", "UPDATING", 1, &["RUNNING", "STARTING"])
    );
    tokio::time::advance(2 * S).await;
    assert_eq!(hello_state(&sim).await, st("RUNNING", "HEALTHY", 1, &["RUNNING"]));
    let new_id = details(&sim).await.applications["hello"].deployments["Hello"].replicas[0]
        .replica_id
        .clone();
    assert_ne!(old_id, new_id);

    // Re-sending an identical config restarts nothing.
    sim.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap();
    tokio::time::advance(3 * S).await;
    let again = details(&sim).await.applications["hello"].deployments["Hello"].replicas[0]
        .replica_id
        .clone();
    sim.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap();
    let d = details(&sim).await;
    assert_eq!(d.applications["hello"].status, AppStatus::Running);
    assert_eq!(
        d.applications["hello"].deployments["Hello"].replicas[0].replica_id,
        again
    );
    assert_eq!(sim.put_count(URL), 4);
}

#[tokio::test(start_paused = true)]
async fn declarative_puts_remove_unlisted_apps_and_delete_clears() {
    let sim = sim();
    let other = json!({"name": "other", "route_prefix": "/o", "import_path": "other:app"});
    sim.deploy(&ep(), &config(vec![hello(1), other]), None)
        .await
        .unwrap();
    tokio::time::advance(3 * S).await;
    let d = details(&sim).await;
    assert_eq!(d.applications.keys().collect::<Vec<_>>(), ["hello", "other"]);
    // No deployments listed: one named after the imported attribute.
    assert_eq!(
        d.applications["other"].deployments.keys().collect::<Vec<_>>(),
        ["app"]
    );
    sim.deploy(&ep(), &config(vec![hello(1)]), Some(50.0))
        .await
        .unwrap();
    assert_eq!(
        details(&sim).await.applications.keys().collect::<Vec<_>>(),
        ["hello"]
    );
    sim.delete_applications(&ep()).await.unwrap();
    let d = details(&sim).await;
    assert!(d.applications.is_empty());
    assert_eq!(d.target_capacity, None);
}

#[tokio::test(start_paused = true)]
async fn reachability_restart_and_auth() {
    let sim = RaySim::new(SimOptions {
        auto_start: false,
        ..Default::default()
    });
    let err = sim.serve_details(&ep()).await.unwrap_err();
    assert_eq!(err.category(), "unreachable");
    sim.start_cluster(URL);
    running_hello(&sim, 1).await;

    sim.set_reachable(URL, false);
    assert_eq!(
        sim.serve_details(&ep()).await.unwrap_err().category(),
        "unreachable"
    );
    assert_eq!(
        sim.deploy(&ep(), &config(vec![hello(1)]), None)
            .await
            .unwrap_err()
            .category(),
        "unreachable"
    );
    sim.set_reachable(URL, true);
    assert!(
        serve_readiness(&details(&sim).await, None).is_ready(),
        "state survives a partition"
    );

    sim.set_auth_token(URL, Some("tok".into()));
    let cases = [(None, Some(401)), (Some("nope"), Some(403)), (Some("tok"), None)];
    for (token, want) in cases {
        let mut e = ep();
        e.auth_token = token.map(str::to_owned);
        match (sim.serve_details(&e).await, want) {
            (Ok(_), None) => {}
            (Err(DashboardError::Unauthorized { status, .. }), Some(w)) => assert_eq!(status, w),
            (other, w) => panic!("token {token:?}: want {w:?}, got {other:?}"),
        }
    }
    sim.set_auth_token(URL, None);

    // A head restart without GCS fault tolerance loses every app.
    sim.stop_cluster(URL);
    assert_eq!(
        sim.serve_details(&ep()).await.unwrap_err().category(),
        "unreachable"
    );
    sim.start_cluster(URL);
    assert!(details(&sim).await.applications.is_empty());
}

#[test]
fn autoscaling_and_auto_replicas_start_at_initial_or_min() {
    let cases: &[(Value, Result<u32, ()>)] = &[
        (json!({"name": "A"}), Ok(1)),
        (json!({"name": "A", "num_replicas": 4}), Ok(4)),
        (json!({"name": "A", "num_replicas": "auto"}), Ok(1)),
        (
            json!({"name": "A", "autoscaling_config": {"min_replicas": 2, "max_replicas": 5}}),
            Ok(2),
        ),
        (
            json!({"name": "A", "autoscaling_config": {"min_replicas": 2, "initial_replicas": 3}}),
            Ok(3),
        ),
        (json!({"name": "A", "num_replicas": -1}), Err(())),
        (json!({"name": "A", "num_replicas": "many"}), Err(())),
    ];
    for (d, want) in cases {
        assert_eq!(configured_replicas(d).map_err(|_| ()), *want, "{d}");
    }
}

#[tokio::test(start_paused = true)]
async fn proxy_is_healthy_once_routes_are_populated_and_needs_no_token() {
    let sim = sim();
    let proxy = "http://10.0.0.7:8000";
    // A head never seen answers nothing (there is no proxy process yet).
    assert!(sim.proxy_healthy(&ep(), proxy).await.is_err());
    sim.set_auth_token(URL, Some("tok".into()));
    assert!(!sim.proxy_healthy(&ep(), proxy).await.unwrap());
    let authed = ep().with_token("tok");
    sim.deploy(&authed, &config(vec![hello(2)]), Some(50.0))
        .await
        .unwrap();
    assert!(
        !sim.proxy_healthy(&ep(), proxy).await.unwrap(),
        "still building: no routes"
    );
    tokio::time::advance(10 * S).await;
    assert!(sim.proxy_healthy(&ep(), proxy).await.unwrap());
    // A target_capacity step makes the app DEPLOYING while it scales up; Ray's head proxy stays
    // healthy (`ready_for_traffic(is_head=True)`), as the node agent's heads answer (issue 58).
    sim.deploy(&authed, &config(vec![hello(2)]), Some(100.0))
        .await
        .unwrap();
    let details = sim.serve_details(&authed).await.unwrap();
    assert_eq!(details.applications["hello"].status, AppStatus::Deploying);
    assert!(
        sim.proxy_healthy(&ep(), proxy).await.unwrap(),
        "scaling for a capacity step"
    );
    // A head restart brings a proxy with no routes.
    sim.start_cluster(URL);
    assert!(
        !sim.proxy_healthy(&ep(), proxy).await.unwrap(),
        "a restarted head"
    );
    sim.set_reachable(URL, false);
    assert!(sim.proxy_healthy(&ep(), proxy).await.is_err());
}

// Issue 13 item 3: `num_replicas: 1000000000` made the simulator allocate every replica (64 GB) and
// abort the process. It places at most SIM_MAX_REPLICAS and reports the rest unscheduled; the app is
// never ready, as on a real Ray cluster without the resources.
#[tokio::test(start_paused = true)]
async fn a_billion_replicas_stay_unscheduled_without_allocating_them() {
    let sim = sim();
    sim.deploy(&ep(), &config(vec![hello(1_000_000_000)]), None)
        .await
        .unwrap();
    tokio::time::advance(10 * S).await;
    let d = details(&sim).await;
    let dep = &d.applications["hello"].deployments["Hello"];
    assert_eq!(dep.target_num_replicas, Some(1_000_000_000));
    assert_eq!(
        dep.replicas.len(),
        usize::try_from(state::SIM_MAX_REPLICAS).unwrap()
    );
    assert!(dep.message.contains("cannot be scheduled"), "{}", dep.message);
    assert!(!serve_readiness(&d, None).is_ready());
    // Scaling a running app up to the same absurd number is bounded the same way.
    let sim = super::RaySim::new(SimOptions::default());
    running_hello(&sim, 2).await;
    sim.deploy(&ep(), &config(vec![hello(u32::MAX)]), None)
        .await
        .unwrap();
    tokio::time::advance(10 * S).await;
    let d = details(&sim).await;
    assert_eq!(
        d.applications["hello"].deployments["Hello"].replicas.len(),
        usize::try_from(state::SIM_MAX_REPLICAS).unwrap()
    );
}
