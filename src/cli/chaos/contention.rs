//! The contention scenario (issue 45): two or three services upgrading at the same moment through
//! one ClusterQueue, or two in a cohort, blue/green and incremental mixed, with batch work and
//! higher-priority workloads arriving, and faults. The quota is sized as `plan` sizes it for services
//! taking turns: every service at steady state plus the largest single upgrade's extra (and up to one
//! more CPU), so every upgrade can complete, one after the other, and a deadlock between upgrades
//! shows as a liveness failure. The run keeps that quota when it settles (the mixed scenario raises
//! it), so liveness here means every upgrade completed in the quota it was given.
//!
//! Only the actions that keep that sizing true are drawn: version changes (upgrades, again while one
//! is under way), urgent and batch work that leaves at the end, manager restarts, write faults and
//! watch losses; no resize and no quota cut.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::world::{HEAD_CPUS, Op, Queue, Shape, VERSIONS, World, sizes};

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
        })
        .collect();
    let mut quotas = vec![0; if cohort { 2 } else { 1 }];
    let mut largest_extra = 0;
    for (i, s) in services.iter().enumerate() {
        let (steady, peak) = sizes(i, s)?;
        quotas[s.queue] += steady;
        largest_extra = largest_extra.max(peak - steady);
    }
    // The spare sits in the first queue; in a cohort the other borrows it.
    quotas[0] += largest_extra + rng.random_range(0..=2) * 500;
    let world = World {
        queues: quotas.into_iter().map(|quota| Queue { quota, borrowing_limit: None, lending_limit: None }).collect(),
        preempt: rng.random_bool(0.5),
        services,
        clusters: Vec::new(),
        background: (0..rng.random_range(0..=1)).map(|_| (0, rng.random_range(1..=2) * 500)).collect(),
        keep_quota: true,
        no_serving_gap: false,
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut rng);
    // Every service upgrades at once.
    let mut list: Vec<Op> = order.into_iter().map(|i| Op::Version(i, VERSIONS[rng.random_range(2..4)])).collect();
    let queues = world.queues.len();
    for _ in 0..rng.random_range(0..=4) {
        let op = match rng.random_range(0..8) {
            0 => Op::Version(rng.random_range(0..n), VERSIONS[rng.random_range(0..4)]),
            1..=2 => Op::Urgent(rng.random_range(0..queues), rng.random_range(1..=3) * 500),
            3 => Op::Finish,
            4 => Op::RestartManager,
            5..=6 => Op::WriteFault {
                plural: ["workloads", "rayclusters", "rayservices", "pods"][rng.random_range(0..4)],
                nth: rng.random_range(1..=4),
                conflict: rng.random_bool(0.5),
            },
            _ => Op::Watches { expire: rng.random_bool(0.5) },
        };
        let at = rng.random_range(0..=list.len());
        list.insert(at, op);
    }
    Ok((world, list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_world_fits_its_services_plus_the_largest_upgrade_and_upgrades_them_all() {
        for seed in 0..100 {
            let (w, list) = generate(seed).unwrap();
            let total: i64 = w.queues.iter().map(|q| q.quota).sum();
            let mut steady = 0;
            let mut extra = 0;
            for (i, s) in w.services.iter().enumerate() {
                let (st, pk) = sizes(i, s).unwrap();
                assert!(pk > st, "seed {seed}: an upgrade needs more than steady");
                steady += st;
                extra = i64::max(extra, pk - st);
            }
            assert!(total >= steady + extra && total <= steady + extra + 1000, "seed {seed}: {total} for {steady} + {extra}");
            let upgraded: std::collections::BTreeSet<usize> =
                list.iter().filter_map(|o| if let Op::Version(i, _) = o { Some(*i) } else { None }).collect();
            assert_eq!(upgraded.len(), w.services.len(), "seed {seed}: every service upgrades");
            assert!(w.keep_quota);
        }
    }
}
