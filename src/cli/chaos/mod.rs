//! `quotagate chaos`: seeded random runs of queue-managed RayServices under faults (issue 20). Each run
//! builds a small world from its seed (one ClusterQueue or two in a cohort, quotas, borrowing and
//! lending limits, priorities, one or two services with random shapes and upgrade strategies,
//! blue/green or incremental, background workloads) on a fresh embedded cluster and applies a random sequence of user
//! actions and faults, with the invariant watcher (DESIGN I1, I2, I4, I5, I6) checking on every event.
//! Once the faults stop, the quota is made ample and broken Serve configs are fixed, every service still
//! there must be Ready on its latest spec within a bound, each must hold exactly what its live clusters
//! request (I3), and nothing may be orphaned (liveness).
//!
//! A failing run is reported with its seed and its action list, then shrunk: actions are dropped one at
//! a time while the run still fails the same way, and the shortest list is printed as Rust, ready to
//! paste into a regression test as `run_ops(seed, Some(&[...]))`. `tests/integration/chaos.rs` runs the
//! same code on the CI seeds.

mod chain;
mod clusters;
mod contention;
mod env;
mod hostile;
pub mod invariants;
mod jitter;
mod run;
mod serving;
mod standalone;
mod usage;
mod world;

use std::fmt;
use std::time::Instant;

use futures::StreamExt;

pub use jitter::Timing;
pub use run::RunStats;
pub use world::Op;

/// Why a run failed.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// The watcher saw DESIGN I1, I2, I4, I5 or I6 broken.
    Invariant(String),
    /// The world did not converge once the faults stopped (or the manager died).
    Liveness(String),
    /// The run could not do what it meant to (a user write kept failing): neither of the above.
    Setup(String),
}

impl Failure {
    fn kind(&self) -> &'static str {
        match self {
            Failure::Invariant(_) => "invariant violation",
            Failure::Liveness(_) => "liveness failure",
            Failure::Setup(_) => "run error",
        }
    }

    fn same_kind(&self, other: &Failure) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (Failure::Invariant(m) | Failure::Liveness(m) | Failure::Setup(m)) = self;
        write!(f, "{}: {m}", self.kind())
    }
}

/// Which worlds and actions the seeds draw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// One or two services, every kind of user action and fault, quota made ample at the end.
    #[default]
    Mixed,
    /// Two or three services upgrading at once under random quotas, priorities, preemption policies
    /// and cohorts, urgent work arriving mid-upgrade, settling in at least the take-turns quota: a
    /// deadlock between upgrades is a liveness failure, a serving gap that growth-first eviction
    /// would have avoided an I8 violation (`contention.rs`, `serving.rs`).
    Contention,
    /// Queue-managed RayClusters of their own (plain, elastic, Recreate) whose replicas, worker requests
    /// and elastic annotation are edited at random beside batch work: pods never exceed what their
    /// admitted Workloads hold (`clusters.rs`).
    Clusters,
    /// One or two services upgrading with the quota cut below one step, under every hostile edit of
    /// issue 44 (hand resumes, the gate annotation removed, forged status, the waiting slice deleted,
    /// the active cluster resized, refused edits), settling in quota that fits: each upgrade must
    /// complete, and no wanted pods may go without a slice waiting for them (`hostile.rs`).
    Hostile,
}

fn generate(scenario: Scenario, seed: u64) -> Result<(world::World, Vec<Op>), Failure> {
    match scenario {
        Scenario::Mixed => Ok(world::generate(seed)),
        Scenario::Contention => contention::generate(seed).map_err(Failure::Setup),
        Scenario::Clusters => Ok(clusters::generate(seed)),
        Scenario::Hostile => hostile::generate(seed).map_err(Failure::Setup),
    }
}

/// The seed's own action list.
pub fn actions(seed: u64) -> Vec<Op> {
    world::generate(seed).1
}

/// One run: the seed's world, then `ops` (the seed's own when `None`).
pub async fn run_ops(seed: u64, ops: Option<&[Op]>) -> Result<RunStats, Failure> {
    run_scenario(Scenario::Mixed, seed, ops).await
}

/// One run of `scenario`'s world for `seed`, then `ops` (the seed's own when `None`).
pub async fn run_scenario(scenario: Scenario, seed: u64, ops: Option<&[Op]>) -> Result<RunStats, Failure> {
    run_scenario_timed(scenario, seed, ops, Timing::Plain).await
}

/// `run_scenario` with `timing` (`Timing::Jitter`: under the seed's induced timing variation).
pub async fn run_scenario_timed(
    scenario: Scenario,
    seed: u64,
    ops: Option<&[Op]>,
    timing: Timing,
) -> Result<RunStats, Failure> {
    let (w, own) = generate(scenario, seed)?;
    // Boxed: a run's future is large, and a debug build's test thread has a small stack.
    Box::pin(run::run(seed, &w, ops.unwrap_or(&own), timing)).await
}

/// One run of the seed's base world and actions (`world::generate_base`: one ClusterQueue, blue/green
/// services, no Serve config breakage), as the runner drew them before cohorts, incremental upgrades and
/// broken Serve configs were added: a seed that found a bug then stays its regression test.
pub async fn run_base(seed: u64) -> Result<RunStats, Failure> {
    let (w, own) = world::generate_base(seed);
    Box::pin(run::run(seed, &w, &own, Timing::Plain)).await
}

/// Drops one action at a time, keeping each drop after which the run still fails the same way as
/// `failure`, within `budget` re-runs. Returns the shortest list found.
pub async fn shrink(seed: u64, list: Vec<Op>, failure: &Failure, budget: usize) -> Vec<Op> {
    shrink_scenario((Scenario::Mixed, Timing::Plain), seed, list, failure, budget).await
}

async fn shrink_scenario(
    (scenario, timing): (Scenario, Timing),
    seed: u64,
    mut list: Vec<Op>,
    failure: &Failure,
    budget: usize,
) -> Vec<Op> {
    let mut runs = 0;
    let mut i = 0;
    while i < list.len() && runs < budget {
        let mut shorter = list.clone();
        shorter.remove(i);
        runs += 1;
        match run_scenario_timed(scenario, seed, Some(&shorter), timing).await {
            Err(f) if f.same_kind(failure) => list = shorter,
            _ => i += 1,
        }
    }
    list
}

#[derive(Clone, Debug)]
pub struct Options {
    pub seeds: std::ops::Range<u64>,
    /// These seeds instead of `seeds` when not empty (`--seeds 61,173,257`).
    pub list: Vec<u64>,
    /// Rounds: every seed runs once per round, `repeat` rounds in all (0 counts as 1). The runs are
    /// drawn one at a time, so a large count costs no memory.
    pub repeat: u64,
    /// Runs at once, each on its own embedded cluster (they mostly wait on timers).
    pub jobs: usize,
    /// Re-runs allowed to shrink each failure (0: no shrinking).
    pub shrink: usize,
}

impl Options {
    /// `seeds`, run once each, `jobs` at a time.
    pub fn range(seeds: std::ops::Range<u64>, jobs: usize, shrink: usize) -> Options {
        Options {
            seeds,
            list: Vec::new(),
            repeat: 1,
            jobs,
            shrink,
        }
    }

    /// Every run, round after round: (round from 1, seed).
    fn runs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (1..=self.repeat.max(1)).flat_map(move |round| {
            let seeds: Box<dyn Iterator<Item = u64> + '_> = if self.list.is_empty() {
                Box::new(self.seeds.clone())
            } else {
                Box::new(self.list.iter().copied())
            };
            seeds.map(move |seed| (round, seed))
        })
    }
}

/// `run_many` of `scenario` under `timing`.
pub async fn run_many_timed(
    scenario: Scenario,
    timing: Timing,
    opts: &Options,
    progress: impl FnMut(&str),
) -> Summary {
    run_seeds((scenario, timing), opts, progress).await
}

/// One failed seed, with the actions that failed and the shortest list that still failed.
#[derive(Clone, Debug)]
pub struct SeedFailure {
    pub seed: u64,
    pub failure: Failure,
    pub actions: Vec<Op>,
    pub shortest: Vec<Op>,
}

impl fmt::Display for SeedFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seed {} failed: {}", self.seed, self.failure)?;
        writeln!(f, "  actions: {:?}", self.actions)?;
        write!(
            f,
            "  shortest still failing: run_ops({}, Some(&{:?}))",
            self.seed, self.shortest
        )
    }
}

#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub runs: usize,
    pub actions: usize,
    pub faults: usize,
    pub checks: u64,
    pub violations: usize,
    pub liveness: usize,
    pub errors: usize,
    pub failures: Vec<SeedFailure>,
    pub seconds: f64,
}

impl Summary {
    pub fn passed(&self) -> bool {
        self.failures.is_empty() && self.errors == 0
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "chaos: runs {}, actions {}, faults injected {}, invariant checks {}, invariant violations {}, liveness failures {}, run errors {}, {:.0} s",
            self.runs,
            self.actions,
            self.faults,
            self.checks,
            self.violations,
            self.liveness,
            self.errors,
            self.seconds
        )
    }
}

/// Runs every seed of `opts`, `jobs` at a time, telling `progress` one line per run; failures are
/// shrunk afterwards, one at a time.
pub async fn run_many(opts: &Options, progress: impl FnMut(&str)) -> Summary {
    run_seeds((Scenario::Mixed, Timing::Plain), opts, progress).await
}

async fn run_seeds(
    (scenario, timing): (Scenario, Timing),
    opts: &Options,
    mut progress: impl FnMut(&str),
) -> Summary {
    let start = Instant::now();
    let mut sum = Summary::default();
    if timing == Timing::Jitter {
        progress("timing: each run under its seed's induced jitter (worker stalls, slow API, pod starts)");
    }
    let mut failed = Vec::new();
    let rounds = opts.repeat > 1;
    let mut runs = futures::stream::iter(opts.runs())
        .map(|(round, seed)| async move {
            let t = Instant::now();
            let list = generate(scenario, seed).map(|(_, l)| l).unwrap_or_default();
            let r = run_scenario_timed(scenario, seed, Some(&list), timing).await;
            (round, seed, list, r, t.elapsed().as_secs_f64())
        })
        .buffer_unordered(opts.jobs.max(1));
    while let Some((round, seed, list, r, secs)) = runs.next().await {
        let seed_name = if rounds {
            format!("{seed} (round {round})")
        } else {
            seed.to_string()
        };
        sum.runs += 1;
        sum.actions += list.len();
        sum.faults += list.iter().filter(|o| o.is_fault()).count();
        match r {
            Ok(stats) => {
                sum.checks += stats.checks;
                let excused = if stats.preempted > 0 {
                    format!(
                        ", {} service preemption(s), {} legitimate takedown(s)",
                        stats.preempted, stats.excused
                    )
                } else {
                    String::new()
                };
                progress(&format!(
                    "seed {seed_name}: ok, {} actions ({} faults), {} checks{excused}, {secs:.1} s",
                    stats.actions, stats.faults, stats.checks
                ));
            }
            Err(f) => {
                match f {
                    Failure::Invariant(_) => sum.violations += 1,
                    Failure::Liveness(_) => sum.liveness += 1,
                    Failure::Setup(_) => sum.errors += 1,
                }
                progress(&format!("seed {seed_name}: FAILED, {f}"));
                failed.push((seed, list, f));
            }
        }
    }
    drop(runs);
    failed.sort_by_key(|(s, _, _)| *s);
    let mut shrunk = std::collections::BTreeSet::new();
    for (seed, list, failure) in failed {
        // A seed that failed in several rounds is shrunk once.
        let shortest = if opts.shrink > 0 && shrunk.insert(seed) {
            progress(&format!(
                "seed {seed}: shrinking {} actions (up to {} re-runs)",
                list.len(),
                opts.shrink
            ));
            shrink_scenario((scenario, timing), seed, list.clone(), &failure, opts.shrink).await
        } else {
            list.clone()
        };
        sum.failures.push(SeedFailure {
            seed,
            failure,
            actions: list,
            shortest,
        });
    }
    sum.seconds = start.elapsed().as_secs_f64();
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_list_runs_round_after_round() {
        let mut o = Options::range(5..7, 2, 0);
        assert_eq!(o.runs().collect::<Vec<_>>(), vec![(1, 5), (1, 6)]);
        o.list = vec![257, 61];
        o.repeat = 2;
        assert_eq!(
            o.runs().collect::<Vec<_>>(),
            vec![(1, 257), (1, 61), (2, 257), (2, 61)]
        );
        // Drawn lazily: a huge count is only a bound.
        o.repeat = u64::MAX;
        assert_eq!(o.runs().nth(5), Some((3, 61)));
    }
}
