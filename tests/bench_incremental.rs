//! `quotagate bench incremental`'s own policy, run through the library with short settings: an
//! incremental upgrade under load is promoted without a failed request. (Whether KubeRay's timer-only
//! policy drops requests is what the bench prints, not something asserted here.)

use std::time::Duration;

use quotagate::cli::bench::incremental::{Delays, Options, Policy, run_policy};

/// The controllers' futures nest deeply in debug builds; 8 MiB stacks as the binary gives them.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(8 << 20)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn running_capacity_upgrade_drops_no_request_and_is_promoted() {
    let opts = Options {
        step: 50,
        interval: 1,
        surge: 100,
        rps: 100.0,
        timeout: Duration::from_secs(30),
        delays: Delays {
            pod_start: Duration::from_millis(300),
            serve_build: Duration::from_millis(200),
            replica_start: Duration::from_millis(300),
            replica_stop: Duration::from_millis(300),
            autoscaler_period: Duration::from_millis(200),
        },
    };
    let run = runtime()
        .block_on(async move {
            tokio::spawn(async move { run_policy(Policy::RunningCapacity, &opts).await }).await
        })
        .unwrap()
        .unwrap_or_else(|e| panic!("the run did not complete: {e}"));
    let text = quotagate::cli::bench::incremental::render(&run);
    assert!(run.counts.sent > 0, "no load was sent:\n{text}");
    assert_eq!(run.counts.failed, 0, "requests failed:\n{text}");
    assert_eq!(run.counts.ok, run.counts.sent, "{text}");
    assert_ne!(run.new, run.old, "{text}");
    let new_svc = format!("{}-serve-svc", run.new);
    let on_new = run.counts.per_backend.get(&new_svc).map_or(0, |(ok, _)| *ok);
    assert!(
        on_new > 0,
        "no request reached the new cluster {new_svc}:\n{text}"
    );
    let last = run.rows.last().expect("a timeline");
    assert_eq!(
        (last.new.capacity, last.new.traffic, last.new.weight),
        (Some(100), Some(100), Some(100)),
        "the new cluster ends with all capacity, traffic and weight:\n{text}"
    );
    let weights: Vec<i32> = run.rows.iter().filter_map(|r| r.new.weight).collect();
    assert!(
        weights.windows(2).all(|w| w[1] >= w[0]),
        "traffic to the new cluster went back:\n{text}"
    );
    assert!(
        weights.iter().any(|&w| w > 0 && w < 100),
        "traffic moved in steps:\n{text}"
    );
}
