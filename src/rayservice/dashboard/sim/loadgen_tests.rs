//! The weighted split and the route reading as tables, then the generator against a fake API on
//! tokio's paused clock.

use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::rayservice::dashboard::RayDashboard;
use crate::rayservice::dashboard::sim::SimOptions;
use crate::rayservice::dashboard::sim::fake_api::FakeApi;
use crate::rayservice::dashboard::sim::tests::{S, config, ep, hello};

#[test]
fn each_backend_gets_its_exact_share_at_every_point() {
    let cases: &[(&[u64], u64)] = &[(&[90, 10], 1), (&[1, 1, 1], 2), (&[7, 0, 3], 5), (&[33, 67], 7)];
    for &(weights, per_tick) in cases {
        let mut s = Splitter::default();
        let total_w: u64 = weights.iter().sum();
        let mut given = vec![0u64; weights.len()];
        for tick in 1..=1000u64 {
            let out = s.split(weights, per_tick);
            assert_eq!(out.iter().sum::<u64>(), per_tick, "{weights:?}");
            for (g, o) in given.iter_mut().zip(out) {
                *g += o;
            }
            for (g, &w) in given.iter().zip(weights) {
                let exact = (tick * per_tick * w) as f64 / total_w as f64;
                assert!(
                    (*g as f64 - exact).abs() < 1.0 + 1e-9,
                    "{weights:?} tick {tick}: {given:?}"
                );
            }
        }
    }
    let mut s = Splitter::default();
    assert_eq!(s.split(&[0, 0], 5), [0, 0]);
    assert_eq!(s.split(&[], 5), Vec::<u64>::new());
    assert_eq!(s.split(&[3, 1], 1_000_000), [750_000, 250_000]);
    // New weights start afresh: no debt carried from the old split.
    assert_eq!(s.split(&[1, 1], 1), [1, 0]);
    assert_eq!(s.split(&[1, 1], 1), [0, 1]);
    assert_eq!(s.split(&[0, 1], 1), [0, 1]);
}

fn route(ns: &str, refs: Value) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
           "metadata": {"name": "rs-httproute", "namespace": ns},
           "spec": {"rules": [{"backendRefs": refs}, {"backendRefs": [{"name": "ignored-serve-svc"}]}]}})
}

#[test]
fn backends_come_from_the_first_rule_with_gateway_defaults() {
    let r: HTTPRoute = serde_json::from_value(route(
        "ns",
        json!([
            {"name": "a-serve-svc", "weight": 30},
            {"name": "b-serve-svc"},
            {"name": "c-serve-svc", "namespace": "other", "weight": -5},
        ]),
    ))
    .unwrap();
    assert_eq!(
        backends(&r, "ns"),
        [
            ("a-serve-svc".to_owned(), "ns".to_owned(), 30),
            ("b-serve-svc".to_owned(), "ns".to_owned(), 1),
            ("c-serve-svc".to_owned(), "other".to_owned(), 0),
        ]
    );
    let empty: HTTPRoute = serde_json::from_value(json!({"metadata": {"name": "r"}, "spec": {}})).unwrap();
    assert!(backends(&empty, "ns").is_empty());
    assert_eq!(cluster_of("rs-abcde-serve-svc"), Some("rs-abcde"));
    assert_eq!(cluster_of("-serve-svc"), None);
    assert_eq!(cluster_of("rs-serve-svcx"), None);
    assert_eq!(cluster_of("rs-head-svc"), None);
}

fn raycluster(name: &str) -> Value {
    json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name, "namespace": "ns"},
           "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray", "image": "ray"}]}}}}})
}

/// Requests sent, per backend (ok, failed) and failures per reason.
type Delta = (u64, BTreeMap<String, (u64, u64)>, BTreeMap<String, u64>);

/// Counts gained between two snapshots.
fn delta(a: &LoadCounts, b: &LoadCounts) -> Delta {
    let per = b
        .per_backend
        .iter()
        .map(|(k, (ok, f))| {
            let (ok0, f0) = a.per_backend.get(k).copied().unwrap_or_default();
            (k.clone(), (ok - ok0, f - f0))
        })
        .filter(|(_, v)| *v != (0, 0))
        .collect();
    let reasons = b
        .failed_by_reason
        .iter()
        .map(|(k, n)| (k.clone(), n - a.failed_by_reason.get(k).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    (b.sent - a.sent, per, reasons)
}

#[tokio::test(start_paused = true)]
async fn requests_follow_the_route_weights_and_fail_without_running_replicas() {
    // rs-a's head Service URL is the shared test URL; rs-b has no app.
    let api = FakeApi::new(vec![
        raycluster("rs-a"),
        raycluster("rs-b"),
        route(
            "ns",
            json!([{"name": "rs-a-serve-svc", "weight": 100}, {"name": "rs-b-serve-svc", "weight": 0}]),
        ),
    ]);
    let sim = Arc::new(RaySim::new(SimOptions::default()));
    sim.deploy(&ep(), &config(vec![hello(1)]), None).await.unwrap();
    let started = tokio::time::Instant::now();
    let load = LoadGen::spawn(api.client(), sim.clone(), LoadConfig::new("ns", "rs-httproute"));

    // Replicas start at 3 s: before, every request fails; after, every one succeeds. Checks
    // happen 5 ms off the 10 ms ticks so no tick races them.
    tokio::time::sleep(2 * S + Duration::from_millis(5)).await;
    let c = load.counts();
    assert_eq!((c.sent, c.ok), (200, 0), "{c:?}");
    assert_eq!(c.failed_by_reason[REASON_NO_REPLICA], 200);
    tokio::time::sleep(S + S / 2).await;
    let before = load.counts();
    tokio::time::sleep(S).await;
    let (sent, per, reasons) = delta(&before, &load.counts());
    assert_eq!(sent, 100);
    assert_eq!(per, BTreeMap::from([("rs-a-serve-svc".to_owned(), (100, 0))]));
    assert!(reasons.is_empty());

    // Half the traffic to a cluster without replicas: those fail.
    api.put(route(
        "ns",
        json!([{"name": "rs-a-serve-svc", "weight": 50}, {"name": "rs-b-serve-svc", "weight": 50}]),
    ));
    tokio::time::sleep(S / 5).await;
    let before = load.counts();
    tokio::time::sleep(S).await;
    let (sent, per, reasons) = delta(&before, &load.counts());
    assert_eq!(sent, 100);
    assert_eq!(per["rs-a-serve-svc"], (50, 0));
    assert_eq!(per["rs-b-serve-svc"], (0, 50));
    assert_eq!(reasons, BTreeMap::from([(REASON_NO_REPLICA.to_owned(), 50)]));

    // A backend that is no serve Service, or whose cluster is gone, fails as such.
    api.put(route(
        "ns",
        json!([{"name": "web", "weight": 1}, {"name": "rs-gone-serve-svc", "weight": 1}]),
    ));
    tokio::time::sleep(S / 5).await;
    let before = load.counts();
    tokio::time::sleep(S).await;
    let (_, _, reasons) = delta(&before, &load.counts());
    assert_eq!(reasons, BTreeMap::from([(REASON_NO_CLUSTER.to_owned(), 100)]));

    // All weights 0, then no route at all.
    api.put(route("ns", json!([{"name": "rs-a-serve-svc", "weight": 0}])));
    tokio::time::sleep(S / 5).await;
    api.remove("HTTPRoute", "ns", "rs-httproute");
    tokio::time::sleep(S / 5).await;
    let before = load.counts();
    tokio::time::sleep(S).await;
    let (sent, per, reasons) = delta(&before, &load.counts());
    assert_eq!((sent, per.len()), (100, 0));
    assert_eq!(reasons, BTreeMap::from([(REASON_NO_ROUTE.to_owned(), 100)]));

    // Stopped: the counts are final. The API was read sparingly.
    load.stop().await;
    let ran = started.elapsed();
    let last = load.counts();
    tokio::time::sleep(S).await;
    assert_eq!(load.counts(), last);
    assert_eq!(last.sent, last.ok + last.failed);
    let requests = api.requests();
    let route_reads = requests.iter().filter(|r| r.as_str() == "GET httproutes").count();
    let cluster_reads = requests
        .iter()
        .filter(|r| r.as_str() == "GET rayclusters")
        .count();
    let most = ran.as_millis() / 100 + 1;
    assert!(
        route_reads as u128 <= most,
        "{route_reads} route reads in {ran:?}"
    );
    assert!(cluster_reads <= 15, "{cluster_reads} cluster reads: {requests:?}");
}
