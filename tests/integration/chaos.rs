//! Seeded random runs of queue-managed RayServices under faults (issue 20): the CI seeds of the runner
//! behind `quotagate chaos` (`quotagate::cli::chaos`, where the worlds, actions, faults and liveness
//! checks are described). `CHAOS_SEEDS=a..b` runs other seeds; `CHAOS_SHRINK=N` shrinks a failure
//! with up to N re-runs and prints the shortest action list still failing, ready to paste below as a
//! regression test.

use quotagate::cli::chaos::{Options, run_base, run_many};

fn seeds(default: std::ops::Range<u64>) -> std::ops::Range<u64> {
    std::env::var("CHAOS_SEEDS")
        .ok()
        .and_then(|s| s.split_once("..").and_then(|(a, b)| Some(a.parse().ok()?..b.parse().ok()?)))
        .unwrap_or(default)
}

async fn run_seeds(range: std::ops::Range<u64>) {
    let shrink = std::env::var("CHAOS_SHRINK").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let opts = Options { seeds: seeds(range), jobs: 4, shrink };
    let summary = run_many(&opts, |line| eprintln!("{line}")).await;
    let failures: Vec<String> = summary.failures.iter().map(ToString::to_string).collect();
    assert!(summary.passed(), "{summary}\n{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_upgrade_runs_under_faults_keep_the_invariants_a() {
    run_seeds(0..25).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_upgrade_runs_under_faults_keep_the_invariants_b() {
    run_seeds(25..50).await;
}

/// Seed 23 of the first generator (one ClusterQueue, blue/green only): its burst of expired watches once
/// stalled the RayService controller's triggers for a minute (kube-runtime's shared trigger backoff; see
/// `jobframework::shell::TriggerBackoff`), so a service with an admitted Workload never got its cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_seed_23_expired_watches_do_not_stall_the_triggers() {
    if let Err(f) = run_base(23).await {
        panic!("seed 23 (base world): {f}");
    }
}
