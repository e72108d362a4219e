//! Property tests of the admission core's invariants (DESIGN.md I1, I6) over random
//! configurations and random sequences of arrivals, cycles, releases and slice replacements.

use proptest::prelude::*;

use super::tree::QuotaTree;
use super::*;

#[derive(Clone, Debug)]
enum Op {
    Add {
        cq: usize,
        cpu: i64,
        prio: i32,
    },
    Cycle,
    /// Release the n-th admitted workload (modulo their number).
    Release(usize),
    /// Replace the n-th admitted workload with a slice of the given size.
    Replace {
        n: usize,
        cpu: i64,
    },
    /// Shrink the n-th admitted workload in place.
    Shrink(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 1..8i64, 0..3i32).prop_map(|(cq, cpu, prio)| Op::Add { cq, cpu, prio }),
        3 => Just(Op::Cycle),
        2 => (0..50usize).prop_map(Op::Release),
        1 => (0..50usize, 1..10i64).prop_map(|(n, cpu)| Op::Replace { n, cpu }),
        1 => (0..50usize).prop_map(Op::Shrink),
    ]
}

/// Per ClusterQueue: nominal, borrowingLimit, lendingLimit, within policy, reclaim policy.
type CqCfg = (i64, Option<i64>, Option<i64>, u8, u8);

fn config() -> impl Strategy<Value = Vec<CqCfg>> {
    // per ClusterQueue: nominal, borrowingLimit, lendingLimit, within policy, reclaim policy
    prop::collection::vec(
        (
            0..12i64,
            prop::option::of(0..6i64),
            prop::option::of(0..6i64),
            0..3u8,
            0..3u8,
        ),
        3,
    )
}

fn build(cfg: &[CqCfg], strict: bool) -> AdmissionCore {
    let mut core = AdmissionCore::new();
    core.upsert_flavor(FlavorModel::build("default"));
    for (i, (nominal, borrow, lend, within, reclaim)) in cfg.iter().enumerate() {
        let within = [
            WithinClusterQueue::Never,
            WithinClusterQueue::LowerPriority,
            WithinClusterQueue::LowerOrNewerEqualPriority,
        ][*within as usize];
        let reclaim = [
            ReclaimWithinCohort::Never,
            ReclaimWithinCohort::LowerPriority,
            ReclaimWithinCohort::Any,
        ][*reclaim as usize];
        let strategy = if strict {
            QueueingStrategy::StrictFifo
        } else {
            QueueingStrategy::BestEffortFifo
        };
        let cq = ClusterQueueModel::build(&format!("cq{i}"))
            .cohort("c")
            .flavor_limits("default", &[("cpu", *nominal, *borrow, *lend)])
            .within(within)
            .reclaim(reclaim)
            .strategy(strategy);
        core.upsert_cluster_queue(cq).unwrap();
    }
    core
}

/// I1, checked on a tree rebuilt from scratch from the admitted workloads alone: nothing may be
/// over any ClusterQueue's reachable quota, and the incremental tree must agree with the rebuild.
fn check_quota(core: &AdmissionCore) -> Result<(), TestCaseError> {
    let mut fresh = QuotaTree::build(core.cqs.values(), &core.cohorts);
    for a in core.admitted.values() {
        let i = fresh.cq(&a.admission.cluster_queue).unwrap();
        fresh.add_all(i, &a.usage);
    }
    let fr = FlavorResource::new("default", "cpu");
    for name in core.cqs.keys() {
        let i = fresh.cq(name).unwrap();
        prop_assert!(
            fresh.available(i, &fr) >= Amount::ZERO,
            "{name} over quota: available {}",
            fresh.available(i, &fr)
        );
        prop_assert_eq!(
            fresh.usage(i, &fr),
            core.tree.usage(core.tree.cq(name).unwrap(), &fr)
        );
    }
    let root = fresh.cohort("c").unwrap();
    prop_assert!(fresh.usage(root, &fr) <= fresh.subtree_quota(root, &fr));
    Ok(())
}

fn apply(core: &mut AdmissionCore, op: &Op, n: &mut i64, released: &mut Vec<WorkloadKey>) {
    match op {
        Op::Add { cq, cpu, prio } => {
            *n += 1;
            let w = WorkloadModel::build("ns", &format!("w{n}"), &format!("cq{cq}"))
                .request(&[("cpu", *cpu)])
                .priority(*prio)
                .at(*n);
            core.add_workload(w).unwrap();
        }
        Op::Cycle => {
            let res = core.schedule_cycle(*n);
            // The shell evicts the victims: they leave, their quota is released.
            for e in res.evictions {
                core.release(&e.key);
                released.push(e.key);
            }
        }
        Op::Release(i) => {
            let keys = core.admitted_keys();
            if !keys.is_empty() {
                let k = keys[i % keys.len()].clone();
                core.release(&k);
                released.push(k);
            }
        }
        Op::Replace { n: i, cpu } => {
            let keys = core.admitted_keys();
            if !keys.is_empty() {
                let old = keys[i % keys.len()].clone();
                let cq = core.admission(&old).unwrap().cluster_queue.clone();
                *n += 1;
                let w = WorkloadModel::build("ns", &format!("w{n}"), &cq)
                    .request(&[("cpu", *cpu)])
                    .at(*n)
                    .replaces(&old);
                // Refused when a replacement is already pending: that is the invariant at work.
                let _ = core.add_workload(w);
            }
        }
        Op::Shrink(i) => {
            let keys = core.admitted_keys();
            if !keys.is_empty() {
                let k = keys[i % keys.len()].clone();
                let mut m = core.admitted[&k].model.clone();
                for ps in &mut m.podsets {
                    for v in ps.requests.values_mut() {
                        *v = Amount(v.0 / 2);
                    }
                }
                core.shrink_admitted(m).unwrap();
            }
        }
    }
}

/// Fair sharing on: per ClusterQueue a weight of 0, 0.5, 1 or 3, and one of Kueue's strategy lists.
fn fair() -> impl Strategy<Value = (Vec<u8>, u8)> {
    (prop::collection::vec(0..4u8, 3), 0..3u8)
}

fn build_fair(cfg: &[CqCfg], (weights, strategies): &(Vec<u8>, u8)) -> AdmissionCore {
    let mut core = build(cfg, false);
    for (i, w) in weights.iter().enumerate() {
        let name = format!("cq{i}");
        if let Some(cq) = core.cqs.get(&name).cloned() {
            core.upsert_cluster_queue(cq.weight([0.0, 0.5, 1.0, 3.0][*w as usize]))
                .unwrap();
        }
    }
    use FairPreemptionStrategy::{LessThanInitialShare as Initial, LessThanOrEqualToFinalShare as Final};
    let strategies = [vec![Final], vec![Initial], vec![Final, Initial]][*strategies as usize].clone();
    core.set_fair_sharing(Some(FairSharingConfig { strategies }));
    core
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// I1 with fair sharing on: the DRS tournament and fair-sharing preemption never admit over
    /// quota, and every simulation they run leaves the tree as it found it.
    #[test]
    fn quota_safety_with_fair_sharing(cfg in config(), fs in fair(), ops in prop::collection::vec(op(), 1..60)) {
        let mut core = build_fair(&cfg, &fs);
        let mut n = 0;
        let mut released = Vec::new();
        for op in &ops {
            apply(&mut core, op, &mut n, &mut released);
            check_quota(&core)?;
        }
        for k in core.admitted_keys() {
            core.release(&k);
        }
        for node in &core.tree.nodes {
            for (fr, v) in &node.usage {
                prop_assert_eq!(*v, Amount::ZERO, "{} keeps {} of {}", node.name, v, fr);
            }
        }
    }

    #[test]
    fn quota_safety_and_release_to_zero(cfg in config(), ops in prop::collection::vec(op(), 1..60)) {
        let mut core = build(&cfg, false);
        let mut n = 0;
        let mut released = Vec::new();
        for op in &ops {
            apply(&mut core, op, &mut n, &mut released);
            check_quota(&core)?;
            // I6: at most one pending replacement per chain, and never one replacing a pending workload.
            let mut replaced = std::collections::BTreeSet::new();
            for p in core.pending.values() {
                if let Some(old) = &p.model.replacement_for {
                    prop_assert!(replaced.insert(old.clone()), "two pending replacements of {}", old);
                    prop_assert!(!core.pending.contains_key(old));
                }
            }
        }
        for k in core.admitted_keys() {
            core.release(&k);
        }
        for node in &core.tree.nodes {
            for (fr, v) in &node.usage {
                prop_assert_eq!(*v, Amount::ZERO, "{} keeps {} of {}", node.name, v, fr);
            }
        }
    }

    #[test]
    fn strict_fifo_never_overtakes(nominal in 1..15i64, sizes in prop::collection::vec(1..10i64, 1..30), releases in prop::collection::vec(0..30usize, 0..30)) {
        let mut core = AdmissionCore::new();
        core.upsert_flavor(FlavorModel::build("default"));
        core.upsert_cluster_queue(ClusterQueueModel::build("cq").flavor("default", &[("cpu", nominal)]).strategy(QueueingStrategy::StrictFifo)).unwrap();
        for (i, cpu) in sizes.iter().enumerate() {
            core.add_workload(WorkloadModel::build("ns", &format!("w{i:03}"), "cq").request(&[("cpu", *cpu)]).at(i as i64)).unwrap();
        }
        let mut ever: Vec<usize> = Vec::new();
        let cycle = |core: &mut AdmissionCore, ever: &mut Vec<usize>| {
            for a in core.schedule_cycle(0).admissions {
                ever.push(a.key.name[1..].parse().unwrap());
            }
        };
        cycle(&mut core, &mut ever);
        for r in releases {
            let keys = core.admitted_keys();
            if !keys.is_empty() {
                core.release(&keys[r % keys.len()]);
            }
            cycle(&mut core, &mut ever);
        }
        // Equal priority: admissions happen exactly in queue order.
        let expected: Vec<usize> = (0..ever.len()).collect();
        prop_assert_eq!(ever, expected);
    }
}
