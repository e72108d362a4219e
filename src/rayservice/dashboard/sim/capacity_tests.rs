//! Placement by CPU capacity, on tokio's paused clock (build 1 s, start 2 s, stop 2 s).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::schema::replica_cpu_units;
use super::tests::{S, URL, config, details, ep, hello, sim};
use super::*;
use crate::rayservice::dashboard::AppStatus;

/// Replica states of hello/Hello in list order.
async fn states(sim: &RaySim) -> Vec<String> {
    let d = details(sim).await;
    d.applications["hello"].deployments["Hello"]
        .replicas
        .iter()
        .map(|r| r.state.to_string())
        .collect()
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn running(app: &str, n: u32) -> BTreeMap<String, u32> {
    BTreeMap::from([(app.to_owned(), n)])
}

async fn put(sim: &RaySim, apps: Vec<Value>) {
    sim.deploy(&ep(), &config(apps), None).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn replicas_wait_for_capacity_and_run_start_delay_after_it_appears() {
    let sim = sim();
    // Set before the head is known: the endpoint gets it when it starts.
    sim.set_capacity(URL, Some(1.0));
    put(&sim, vec![hello(3)]).await;
    tokio::time::advance(3 * S).await;
    assert_eq!(states(&sim).await, strs(&["RUNNING", "STARTING", "STARTING"]));
    let d = details(&sim).await;
    let app = &d.applications["hello"];
    assert_eq!(app.status, AppStatus::Deploying);
    let msg = &app.deployments["Hello"].message;
    assert!(
        msg.contains("has 2 replicas that cannot be scheduled yet"),
        "{msg}"
    );
    assert!(
        msg.contains(r#"each replica: {"CPU": 1.0}, resources available: {"CPU": 0.0}"#),
        "{msg}"
    );
    assert_eq!(sim.demand_cpus(URL), 3.0);
    assert_eq!(sim.running_replicas(URL), running("hello", 1));

    // Waiting does not start them; capacity does, start delay after it appears.
    tokio::time::advance(10 * S).await;
    assert_eq!(sim.running_replicas(URL), running("hello", 1));
    sim.set_capacity(URL, Some(3.0));
    tokio::time::advance(S).await;
    assert_eq!(states(&sim).await, strs(&["RUNNING", "STARTING", "STARTING"]));
    tokio::time::advance(S).await;
    assert_eq!(states(&sim).await, strs(&["RUNNING", "RUNNING", "RUNNING"]));
    let d = details(&sim).await;
    assert_eq!(d.applications["hello"].status, AppStatus::Running);
    assert_eq!(d.applications["hello"].deployments["Hello"].message, "");
}

#[tokio::test(start_paused = true)]
async fn shrinking_capacity_sends_the_youngest_back_to_starting() {
    let sim = sim();
    put(&sim, vec![hello(3)]).await;
    tokio::time::advance(3 * S).await;
    assert_eq!(sim.running_replicas(URL), running("hello", 3));
    let ids = |d: &ServeDetails| -> Vec<String> {
        let dep = &d.applications["hello"].deployments["Hello"];
        dep.replicas.iter().map(|r| r.replica_id.clone()).collect()
    };
    let before = ids(&details(&sim).await);

    sim.set_capacity(URL, Some(2.0));
    assert_eq!(states(&sim).await, strs(&["RUNNING", "RUNNING", "STARTING"]));
    assert_eq!(
        ids(&details(&sim).await),
        before,
        "the same replicas, the youngest waiting"
    );
    assert_eq!(
        details(&sim).await.applications["hello"].status,
        AppStatus::Deploying
    );
    sim.set_capacity(URL, Some(0.0));
    assert_eq!(sim.running_replicas(URL), running("hello", 0));
    assert_eq!(sim.demand_cpus(URL), 3.0);

    // Back to unlimited: everything is placed now and runs after the start delay.
    sim.set_capacity(URL, None);
    tokio::time::advance(S).await;
    assert_eq!(sim.running_replicas(URL), running("hello", 0));
    tokio::time::advance(S).await;
    assert_eq!(sim.running_replicas(URL), running("hello", 3));
}

#[tokio::test(start_paused = true)]
async fn a_downscale_stops_waiting_replicas_first_and_demand_drops_at_once() {
    let sim = sim();
    sim.set_capacity(URL, Some(1.0));
    put(&sim, vec![hello(3)]).await;
    tokio::time::advance(3 * S).await;
    put(&sim, vec![hello(1)]).await;
    assert_eq!(states(&sim).await, strs(&["RUNNING", "STOPPING", "STOPPING"]));
    assert_eq!(sim.demand_cpus(URL), 1.0);
    tokio::time::advance(2 * S).await;
    assert_eq!(states(&sim).await, strs(&["RUNNING"]));
}

/// A code change on a full cluster: the new replica waits until the old one retires (2 s after
/// the build), then starts. Polling every 100 ms and looking only at the end must agree.
#[tokio::test(start_paused = true)]
async fn lazy_ticks_place_at_the_time_of_each_event() {
    let eager = sim();
    let lazy = sim();
    let v2 = json!({"name": "hello", "import_path": "app:v2",
                    "deployments": [{"name": "Hello", "num_replicas": 1}]});
    for s in [&eager, &lazy] {
        s.set_capacity(URL, Some(1.0));
        put(s, vec![hello(1)]).await;
    }
    tokio::time::advance(3 * S).await;
    for s in [&eager, &lazy] {
        put(s, vec![v2.clone()]).await;
    }
    // Built at +1 s with the old replica holding the CPU; it retires at +3 s, the new one is
    // placed then and runs at +5 s.
    let mut seen = Vec::new();
    for _ in 0..45 {
        tokio::time::advance(S / 10).await;
        seen.push(states(&eager).await);
    }
    assert_eq!(states(&lazy).await, strs(&["STARTING"]));
    assert_eq!(seen.last(), Some(&strs(&["STARTING"])));
    assert!(seen.contains(&strs(&["RUNNING", "STARTING"])), "{seen:?}");
    tokio::time::advance(S / 2).await;
    assert_eq!(states(&lazy).await, strs(&["RUNNING"]));
    assert_eq!(states(&eager).await, strs(&["RUNNING"]));
}

#[tokio::test(start_paused = true)]
async fn num_cpus_sums_exactly_zero_needs_nothing_and_the_app_counts_its_weakest_deployment() {
    let sim = sim();
    let app = json!({"name": "hello", "import_path": "app:app", "deployments": [
        {"name": "Hello", "num_replicas": 3, "ray_actor_options": {"num_cpus": 0.1}},
        {"name": "Router", "num_replicas": 2, "ray_actor_options": {"num_cpus": 0}},
        {"name": "Model", "num_replicas": 2, "ray_actor_options": {"num_cpus": "0.5"}}]});
    sim.set_capacity(URL, Some(0.8));
    put(&sim, vec![app]).await;
    tokio::time::advance(3 * S).await;
    let d = details(&sim).await;
    let running_of = |dep: &str| {
        let dep = &d.applications["hello"].deployments[dep];
        dep.replicas
            .iter()
            .filter(|r| r.state.to_string() == "RUNNING")
            .count()
    };
    // 0.1 * 3 = 0.3 exactly, then one 0.5 fits and the second does not.
    assert_eq!(
        (running_of("Hello"), running_of("Router"), running_of("Model")),
        (3, 2, 1)
    );
    assert_eq!(sim.running_replicas(URL), running("hello", 1));
    assert!((sim.demand_cpus(URL) - 1.3).abs() < 1e-9);

    sim.set_capacity(URL, Some(0.0));
    assert_eq!(sim.running_replicas(URL), running("hello", 0));
    let d = details(&sim).await;
    assert_eq!(d.applications["hello"].deployments["Router"].replicas.len(), 2);
    assert!(
        d.applications["hello"].deployments["Router"]
            .replicas
            .iter()
            .all(|r| r.state.to_string() == "RUNNING")
    );
}

#[tokio::test(start_paused = true)]
async fn capacity_outlives_head_restarts_and_unknown_endpoints_are_empty() {
    let sim = sim();
    assert_eq!(sim.demand_cpus(URL), 0.0);
    assert!(sim.running_replicas(URL).is_empty());
    sim.set_capacity(URL, Some(0.0));
    put(&sim, vec![hello(1)]).await;
    sim.start_cluster(URL);
    put(&sim, vec![hello(1)]).await;
    tokio::time::advance(5 * S).await;
    assert_eq!(states(&sim).await, strs(&["STARTING"]));
    sim.stop_cluster(URL);
    assert_eq!(sim.demand_cpus(URL), 0.0);
    assert!(sim.running_replicas(URL).is_empty());
}

#[tokio::test(start_paused = true)]
async fn bad_num_cpus_is_a_400_like_other_schema_errors() {
    let sim = sim();
    let cases = [
        (
            json!({"num_cpus": -1}),
            "ray_actor_options.num_cpus\n  Input should be greater than or equal to 0 [type=greater_than_equal]",
        ),
        (
            json!({"num_cpus": "lots"}),
            "ray_actor_options.num_cpus\n  Input should be a valid number, unable to parse string as a number [type=float_parsing]",
        ),
        (
            json!({"num_cpus": [1]}),
            "ray_actor_options.num_cpus\n  Input should be a valid number [type=float_type]",
        ),
        (
            json!(5),
            "deployments.0.ray_actor_options\n  Input should be a valid dictionary [type=dict_type]",
        ),
    ];
    for (options, want) in cases {
        let body = json!({"applications": [{"import_path": "a:b", "deployments": [
            {"name": "A", "ray_actor_options": options}]}]});
        let err = sim
            .deploy(&ep(), &ServeConfig::from_json(body).unwrap(), None)
            .await
            .unwrap_err();
        match err {
            DashboardError::Rejected { message } => assert!(message.contains(want), "{message}"),
            other => panic!("{options}: want Rejected, got {other:?}"),
        }
    }
    let units = |v: Value| replica_cpu_units(&json!({"name": "A", "ray_actor_options": v}));
    assert_eq!(units(json!({})), Ok(10_000));
    assert_eq!(units(json!({"num_cpus": null})), Ok(10_000));
    assert_eq!(units(json!({"num_cpus": 0.25})), Ok(2_500));
    assert_eq!(units(json!({"num_cpus": 0})), Ok(0));
    assert_eq!(replica_cpu_units(&json!({"name": "A"})), Ok(10_000));
}

#[tokio::test(start_paused = true)]
async fn old_version_replicas_serve_until_the_new_ones_run() {
    let sim = sim();
    put(&sim, vec![hello(1)]).await;
    tokio::time::advance(3 * S).await;
    let v2 = json!({"name": "hello", "import_path": "app:v2",
                    "deployments": [{"name": "Hello", "num_replicas": 1}]});
    put(&sim, vec![v2]).await;
    for _ in 0..50 {
        assert_eq!(sim.running_replicas(URL), running("hello", 1));
        tokio::time::advance(S / 10).await;
    }
    assert_eq!(states(&sim).await, strs(&["RUNNING"]));
}

/// With an autoscaler attached (unknown capacity 0), a cluster runs nothing until its capacity is
/// said; forgetting it goes back to the unknown capacity.
#[tokio::test(start_paused = true)]
async fn an_unknown_cluster_has_the_unknown_capacity_until_told() {
    let sim = sim();
    sim.set_unknown_capacity(Some(0.0));
    put(&sim, vec![hello(2)]).await;
    tokio::time::advance(4 * S).await;
    assert_eq!(sim.running_replicas(URL), running("hello", 0));
    sim.set_capacity(URL, None);
    tokio::time::advance(3 * S).await;
    assert_eq!(sim.running_replicas(URL), running("hello", 2));
    sim.forget_capacity(URL);
    assert_eq!(sim.running_replicas(URL), running("hello", 0));
}
