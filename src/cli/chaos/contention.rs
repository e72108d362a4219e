//! The contention scenario (issue 45): two or three services upgrading at the same moment through
//! one ClusterQueue, or two in a cohort, blue/green and incremental mixed, each with a random
//! WorkloadPriorityClass (or none), beside batch work, with urgent higher-priority work arriving in
//! the middle of the upgrades, under random preemption policies (`withinClusterQueue` and, in a
//! cohort, `reclaimWithinCohort`) and faults.
//!
//! Quotas are drawn around the size `plan` gives for services taking turns (every service at steady
//! state plus the largest single upgrade's extra): below it (some upgrade must wait for the run to
//! settle), just that, more, or enough for every upgrade at once. Every service fits at steady state,
//! so each one serves before its upgrade. When the run settles, the urgent and batch work goes and
//! each queue is raised to at least the take-turns size (`World::settle_at_least`), so liveness means
//! every upgrade completes once the quota allows it: a deadlock between upgrades is a liveness failure.
//!
//! Urgent work is sized, most of the time, so that one upgrade's growth (its peak less its steady
//! state) could make room for it, and otherwise larger than every upgrade's growth together: the
//! first kind must never take a serving cluster down, the second may (I8, `serving.rs`).
//!
//! Only actions that keep the sizing meaningful are drawn: version changes (upgrades, again while one
//! is under way), batch and urgent work that leaves at the end, manager restarts, write faults and
//! watch losses; no resize, no quota cut, no deletion.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::world::{HEAD_CPUS, Op, Preemption, Queue, Shape, VERSIONS, World, sizes};

/// `withinClusterQueue` and `reclaimWithinCohort` policies drawn (LowerOrNewerEqualPriority is left
/// out: the I8 excuse counts victims by priority alone).
const WITHIN: [&str; 2] = ["Never", "LowerPriority"];
const RECLAIM: [&str; 3] = ["Never", "LowerPriority", "Any"];

/// Services' WorkloadPriorityClasses (none, low, prod); urgent work is prod or critical.
const SERVICE_CLASSES: [Option<&str>; 3] = [None, Some("low"), Some("prod")];
const URGENT_CLASSES: [&str; 2] = ["prod", "critical"];

/// The seed's contention world and actions.
pub(super) fn generate(seed: u64) -> Result<(World, Vec<Op>), String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0xc047_e471_0c04_7e47);
    let cohort = rng.random_bool(0.4);
    let n = rng.random_range(2..=3);
    let services: Vec<Shape> = (0..n)
        .map(|_| Shape {
            head_cpu: HEAD_CPUS[rng.random_range(0..2)],
            workers: rng.random_range(1..=2),
            version: VERSIONS[rng.random_range(0..2)],
            queue: if cohort { rng.random_range(0..2) } else { 0 },
            incremental: rng.random_bool(0.6).then(|| {
                // KubeRay requires stepSizePercent <= maxSurgePercent.
                let surge = [50, 100][rng.random_range(0..2)];
                (if surge == 50 { 25 } else { 50 }, surge)
            }),
            priority: SERVICE_CLASSES[rng.random_range(0..SERVICE_CLASSES.len())],
        })
        .collect();
    let queues = if cohort { 2 } else { 1 };
    let mut steady = vec![0; queues];
    let mut extras = Vec::new();
    for (i, s) in services.iter().enumerate() {
        let (st, peak) = sizes(i, s)?;
        steady[s.queue] += st;
        extras.push(peak - st);
    }
    let largest = extras.iter().copied().max().unwrap_or(0);
    let all: i64 = extras.iter().sum();
    // The spare beyond every steady state: below taking turns, just enough, more, or all at once.
    let spare = match rng.random_range(0..4) {
        0 => rng.random_range(0..(largest / 500).max(1)) * 500,
        1 => largest,
        2 => largest + rng.random_range(1..=4) * 500,
        _ => all,
    };
    // In a cohort the spare is split at random; a queue borrows what the other does not use.
    let first = if cohort {
        rng.random_range(0..=spare / 500) * 500
    } else {
        spare
    };
    let mut quotas = steady.clone();
    quotas[0] += first;
    if cohort {
        quotas[1] += spare - first;
    }
    let mut settle_at_least = steady;
    settle_at_least[0] += largest;
    let preemption = Preemption {
        within: WITHIN[rng.random_range(0..WITHIN.len())],
        reclaim: if cohort {
            RECLAIM[rng.random_range(0..RECLAIM.len())]
        } else {
            "Never"
        },
    };
    let world = World {
        queues: quotas
            .into_iter()
            .map(|quota| Queue {
                quota,
                borrowing_limit: None,
                lending_limit: None,
            })
            .collect(),
        preemption,
        services,
        clusters: Vec::new(),
        background: (0..rng.random_range(0..=1))
            .map(|_| (rng.random_range(0..queues), rng.random_range(1..=2) * 500))
            .collect(),
        keep_quota: true,
        no_serving_gap: true,
        settle_at_least,
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut rng);
    // Every service upgrades at once.
    let mut list: Vec<Op> = order
        .into_iter()
        .map(|i| Op::Version(i, VERSIONS[rng.random_range(2..4)]))
        .collect();
    // Urgent work arrives while the upgrades are under way (once one runs, next to them).
    for _ in 0..rng.random_range(0..=2) {
        let op = match urgent(&mut rng, &world, &extras) {
            Op::Work { queue, milli, class } => Op::MidUpgrade { queue, milli, class },
            other => other,
        };
        let at = rng.random_range(1..=list.len());
        list.insert(at, op);
    }
    for _ in 0..rng.random_range(0..=4) {
        let op = match rng.random_range(0..9) {
            0 => Op::Version(rng.random_range(0..n), VERSIONS[rng.random_range(0..4)]),
            1 => urgent(&mut rng, &world, &extras),
            2 => Op::Work {
                queue: rng.random_range(0..queues),
                milli: rng.random_range(1..=2) * 500,
                class: "low",
            },
            3 => Op::Finish,
            4 => Op::RestartManager,
            5..=6 => Op::WriteFault {
                plural: ["workloads", "rayclusters", "rayservices", "pods"][rng.random_range(0..4)],
                nth: rng.random_range(1..=4),
                conflict: rng.random_bool(0.5),
            },
            _ => Op::Watches {
                expire: rng.random_bool(0.5),
            },
        };
        let at = rng.random_range(0..=list.len());
        list.insert(at, op);
    }
    Ok((world, list))
}

/// Urgent work: most of the time no larger than one upgrade's growth (in that service's queue, or
/// the other one of a cohort, reclaiming), else larger than every upgrade's growth together.
fn urgent(rng: &mut StdRng, w: &World, extras: &[i64]) -> Op {
    let class = URGENT_CLASSES[rng.random_range(0..URGENT_CLASSES.len())];
    let queue = rng.random_range(0..w.queues.len());
    let i = rng.random_range(0..extras.len());
    let milli = if rng.random_bool(0.75) {
        rng.random_range(1..=(extras[i] / 500).max(1)) * 500
    } else {
        extras.iter().sum::<i64>() + rng.random_range(1..=2) * 500
    };
    Op::Work { queue, milli, class }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::chaos::world::class_value;

    #[test]
    fn every_world_serves_its_services_settles_in_take_turns_quota_and_upgrades_them_all() {
        for seed in 0..200 {
            let (w, list) = generate(seed).unwrap();
            let total: i64 = w.queues.iter().map(|q| q.quota).sum();
            let (mut steady, mut extra, mut all) = (0, 0, 0);
            for (i, s) in w.services.iter().enumerate() {
                let (st, pk) = sizes(i, s).unwrap();
                assert!(pk > st, "seed {seed}: an upgrade needs more than steady");
                steady += st;
                extra = i64::max(extra, pk - st);
                all += pk - st;
            }
            assert!(
                total >= steady && total <= steady + all.max(extra + 2000),
                "seed {seed}: {total} for {steady} + {extra}"
            );
            let settled: i64 = w
                .queues
                .iter()
                .zip(&w.settle_at_least)
                .map(|(q, l)| q.quota.max(*l))
                .sum();
            assert!(
                settled >= steady + extra,
                "seed {seed}: settles in {settled}, taking turns needs {}",
                steady + extra
            );
            let upgraded: std::collections::BTreeSet<usize> = list
                .iter()
                .filter_map(|o| if let Op::Version(i, _) = o { Some(*i) } else { None })
                .collect();
            assert_eq!(
                upgraded.len(),
                w.services.len(),
                "seed {seed}: every service upgrades"
            );
            assert!(w.keep_quota && w.no_serving_gap);
        }
    }

    #[test]
    fn the_draws_cover_every_sizing_policy_and_both_kinds_of_urgent_work() {
        let (mut below, mut just, mut all_at_once, mut reclaim, mut within) = (0, 0, 0, 0, 0);
        let (mut growth_sized, mut larger, mut outranks) = (0, 0, 0);
        for seed in 0..200 {
            let (w, list) = generate(seed).unwrap();
            let total: i64 = w.queues.iter().map(|q| q.quota).sum();
            let extras: Vec<i64> = w
                .services
                .iter()
                .enumerate()
                .map(|(i, s)| sizes(i, s).map(|(st, pk)| pk - st).unwrap())
                .collect();
            let steady: i64 = w
                .services
                .iter()
                .enumerate()
                .map(|(i, s)| sizes(i, s).unwrap().0)
                .sum();
            let largest = extras.iter().copied().max().unwrap_or(0);
            let spare = total - steady;
            below += usize::from(spare < largest);
            just += usize::from(spare == largest);
            all_at_once += usize::from(spare >= extras.iter().sum::<i64>() && extras.len() > 1);
            reclaim += usize::from(w.queues.len() == 2 && w.preemption.reclaim != "Never");
            within += usize::from(w.preemption.within == "LowerPriority");
            for op in &list {
                if let Op::Work { milli, class, .. } | Op::MidUpgrade { milli, class, .. } = op
                    && *class != "low"
                {
                    if extras.iter().any(|e| milli <= e) {
                        growth_sized += 1;
                    } else {
                        larger += usize::from(*milli > extras.iter().sum::<i64>());
                    }
                    outranks += usize::from(
                        w.services
                            .iter()
                            .any(|s| class_value(s.priority) < class_value(Some(class))),
                    );
                }
            }
        }
        for (what, n) in [
            ("below taking turns", below),
            ("just enough", just),
            ("all at once", all_at_once),
            ("reclaim", reclaim),
            ("withinClusterQueue", within),
            ("growth-sized urgent work", growth_sized),
            ("urgent work larger than every growth", larger),
            ("urgent work outranking a service", outranks),
        ] {
            assert!(n >= 10, "only {n} of 200 seeds draw {what}");
        }
    }
}
