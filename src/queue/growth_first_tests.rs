//! Growth-first preemption (`growth_first`): tables over `find_targets` with candidates that carry a
//! floor. Without floors the answer is Kueue's (the classical tables in `preemption_tests` run with
//! `floor: None`); these cases check what a floor changes.
//!
//! Where a case follows a Kueue expectation it names it: Kueue evicts a workload slice whole
//! (`pkg/scheduler/preemption/preemption_test.go`, the cases with workload slices, e.g.
//! "preempt old workload slice when new slice is scheduled"; `test/integration/singlecluster/
//! controller/jobs/raycluster` elastic cases); growth-first keeps that answer whenever the growth
//! alone does not free enough.

use std::collections::BTreeMap;

use super::amount::{Amount, FlavorResource, FrAmounts};
use super::fair_preemption::fair_targets;
use super::model::{
    ClusterQueueModel, CohortModel, FairPreemptionStrategy, PreemptionPolicy, ReclaimWithinCohort,
    WithinClusterQueue, WorkloadKey,
};
use super::preemption::{Candidate, PreemptedReason, Preemptor, find_targets};
use super::tree::QuotaTree;

use PreemptedReason::{InClusterQueue, InCohortFairSharing, InCohortReclamation};

/// An admitted workload: name, ClusterQueue, priority, cpu used, cpu floor (if any).
type Adm = (&'static str, &'static str, i32, i64, Option<i64>);

fn cpu(v: i64) -> FrAmounts {
    [(FlavorResource::new("default", "cpu"), Amount(v))]
        .into_iter()
        .collect()
}

fn policy() -> PreemptionPolicy {
    PreemptionPolicy {
        within_cluster_queue: WithinClusterQueue::LowerPriority,
        reclaim_within_cohort: ReclaimWithinCohort::Any,
        ..Default::default()
    }
}

/// Victims as (name, reason, growth only), sorted; checks the tree is left as found.
fn targets(
    cqs: &[ClusterQueueModel],
    cohorts: &[CohortModel],
    admitted: &[Adm],
    incoming: (&str, i32, i64),
) -> Vec<(String, PreemptedReason, bool)> {
    search(cqs, cohorts, admitted, incoming, None)
}

/// [`targets`] with fair sharing on (Kueue's default strategies) when `fair`.
fn search(
    cqs: &[ClusterQueueModel],
    cohorts: &[CohortModel],
    admitted: &[Adm],
    incoming: (&str, i32, i64),
    fair: Option<&[FairPreemptionStrategy]>,
) -> Vec<(String, PreemptedReason, bool)> {
    let cohorts: BTreeMap<String, CohortModel> =
        cohorts.iter().map(|c| (c.name.clone(), c.clone())).collect();
    let mut tree = QuotaTree::build(cqs, &cohorts);
    let keys: Vec<WorkloadKey> = admitted.iter().map(|a| WorkloadKey::new("ns", a.0)).collect();
    let usages: Vec<FrAmounts> = admitted.iter().map(|a| cpu(a.3)).collect();
    let floors: Vec<Option<FrAmounts>> = admitted.iter().map(|a| a.4.map(cpu)).collect();
    let idx = |t: &QuotaTree, q: &str| t.cq(q).unwrap_or_else(|| panic!("no ClusterQueue {q}"));
    for (a, u) in admitted.iter().zip(&usages) {
        let i = idx(&tree, a.1);
        tree.add_all(i, u);
    }
    let cands: Vec<Candidate<'_>> = admitted
        .iter()
        .enumerate()
        .map(|(n, a)| Candidate {
            key: &keys[n],
            cq_idx: idx(&tree, a.1),
            priority: a.2,
            queue_timestamp: 0,
            // Later in the list: admitted more recently (Kueue takes those first at equal priority).
            admitted_at: i64::try_from(n).unwrap_or_default(),
            uid: a.0,
            usage: &usages[n],
            evicting: false,
            lq_usage: None,
            floor: floors[n].as_ref(),
        })
        .collect();
    let cq = cqs
        .iter()
        .find(|q| q.name == incoming.0)
        .unwrap_or_else(|| panic!("no ClusterQueue {}", incoming.0));
    let usage = cpu(incoming.2);
    let contested = usage.keys().cloned().collect();
    let p = Preemptor {
        cq_idx: idx(&tree, incoming.0),
        cq,
        priority: incoming.1,
        queue_timestamp: 0,
        usage: &usage,
        contested: &contested,
        tas_fits: None,
    };
    // A zero left where an amount was added and taken out again is no usage.
    let usage_of = |t: &QuotaTree| -> Vec<FrAmounts> {
        t.nodes
            .iter()
            .map(|n| {
                n.usage
                    .iter()
                    .filter(|(_, v)| **v != Amount::ZERO)
                    .map(|(k, v)| (k.clone(), *v))
                    .collect()
            })
            .collect()
    };
    let before = usage_of(&tree);
    let found = match fair {
        Some(strategies) => fair_targets(&mut tree, &p, &cands, strategies),
        None => find_targets(&mut tree, &p, &cands),
    };
    let mut got: Vec<(String, PreemptedReason, bool)> = found
        .into_iter()
        .map(|t| (t.key.name, t.reason, t.growth_only))
        .collect();
    let after = usage_of(&tree);
    assert_eq!(before, after, "the search must leave the tree as found");
    got.sort();
    got
}

fn want(v: &[(&str, PreemptedReason, bool)]) -> Vec<(String, PreemptedReason, bool)> {
    let mut v: Vec<_> = v.iter().map(|(n, r, g)| (n.to_string(), *r, *g)).collect();
    v.sort();
    v
}

fn one_cq(cpu: i64) -> Vec<ClusterQueueModel> {
    vec![
        ClusterQueueModel::build("cq")
            .flavor("default", &[("cpu", cpu)])
            .preemption(policy()),
    ]
}

/// A service holding 6 (4 serving, 2 of its upgrade's growth) in a full queue of 6: a higher
/// priority workload asking 2 takes only the growth; asking 3 it takes the whole service (as
/// Kueue would: the growth alone does not free enough).
#[test]
fn growth_suffices_or_not_within_the_cluster_queue() {
    let cqs = one_cq(6);
    let svc: Adm = ("svc", "cq", 0, 6, Some(4));
    assert_eq!(
        targets(&cqs, &[], &[svc], ("cq", 10, 2)),
        want(&[("svc", InClusterQueue, true)])
    );
    assert_eq!(
        targets(&cqs, &[], &[svc], ("cq", 10, 3)),
        want(&[("svc", InClusterQueue, false)])
    );
    // No floor: Kueue's answer, whole.
    let plain: Adm = ("svc", "cq", 0, 6, None);
    assert_eq!(
        targets(&cqs, &[], &[plain], ("cq", 10, 2)),
        want(&[("svc", InClusterQueue, false)])
    );
    // A floor that covers everything offers no growth.
    let at_floor: Adm = ("svc", "cq", 0, 6, Some(6));
    assert_eq!(
        targets(&cqs, &[], &[at_floor], ("cq", 10, 2)),
        want(&[("svc", InClusterQueue, false)])
    );
}

/// Growth is tried before whole victims: a batch workload ordered before the service (lower
/// priority) is not evicted when the service's growth frees enough; when it does not, the growth
/// plus the batch workload are taken, the service's serving part stays.
#[test]
fn growth_first_mixed_with_whole_victims() {
    let cqs = one_cq(8);
    let batch: Adm = ("batch", "cq", -5, 2, None);
    let svc: Adm = ("svc", "cq", 0, 6, Some(4));
    assert_eq!(
        targets(&cqs, &[], &[batch, svc], ("cq", 10, 2)),
        want(&[("svc", InClusterQueue, true)])
    );
    assert_eq!(
        targets(&cqs, &[], &[batch, svc], ("cq", 10, 4)),
        want(&[("batch", InClusterQueue, false), ("svc", InClusterQueue, true)])
    );
    // Needing everything: both whole.
    assert_eq!(
        targets(&cqs, &[], &[batch, svc], ("cq", 10, 8)),
        want(&[("batch", InClusterQueue, false), ("svc", InClusterQueue, false)])
    );
    // Two services: the growths of both before either is evicted.
    let a: Adm = ("a", "cq", 0, 4, Some(3));
    let b: Adm = ("b", "cq", 0, 4, Some(3));
    assert_eq!(
        targets(&cqs, &[], &[a, b], ("cq", 10, 2)),
        want(&[("a", InClusterQueue, true), ("b", InClusterQueue, true)])
    );
    // The minimal set: one growth is enough, the other is put back.
    assert_eq!(targets(&cqs, &[], &[a, b], ("cq", 10, 1)).len(), 1);
}

/// Priorities still decide who may be a victim at all: a service of equal or higher priority
/// offers nothing under LowerPriority, its growth included.
#[test]
fn growth_of_a_service_not_preemptible_is_not_taken() {
    let cqs = one_cq(6);
    let svc: Adm = ("svc", "cq", 10, 6, Some(4));
    assert!(targets(&cqs, &[], &[svc], ("cq", 10, 2)).is_empty());
    let batch: Adm = ("batch", "cq", 0, 2, None);
    let svc: Adm = ("svc", "cq", 10, 4, Some(2));
    assert_eq!(
        targets(&cqs, &[], &[batch, svc], ("cq", 5, 2)),
        want(&[("batch", InClusterQueue, false)])
    );
}

/// The case 3: two ClusterQueues in a cohort, reclaimWithinCohort Any. Service A borrows
/// for its upgrade's growth; B reclaims its nominal quota. When what B needs is within A's growth,
/// A only shrinks back to its serving cluster (Kueue: `preemption_test.go` "reclaim quota from
/// borrower" evicts the borrower whole; here the borrower keeps what serves).
#[test]
fn cohort_reclaim_takes_the_borrowers_growth_first() {
    let cohort = CohortModel::build("co");
    let cqs = vec![
        ClusterQueueModel::build("a")
            .cohort("co")
            .flavor("default", &[("cpu", 2)])
            .preemption(policy()),
        ClusterQueueModel::build("b")
            .cohort("co")
            .flavor("default", &[("cpu", 4)])
            .preemption(policy()),
    ];
    // A: 3 serving + 2 growth, borrowing 3 of B's 4; 1 is free.
    let a: Adm = ("svc-a", "a", 0, 5, Some(3));
    assert_eq!(
        targets(&cqs, std::slice::from_ref(&cohort), &[a], ("b", 0, 3)),
        want(&[("svc-a", InCohortReclamation, true)])
    );
    // B asks its whole nominal 4: A's growth (2) is not enough, A is reclaimed whole, as Kueue does.
    assert_eq!(
        targets(&cqs, &[cohort], &[a], ("b", 0, 4)),
        want(&[("svc-a", InCohortReclamation, false)])
    );
}

/// Fair sharing on (issue 45: growth-first was classical preemption only). Kueue's fair-sharing
/// preemption evicts whole (`pkg/scheduler/preemption/preemption_test.go`, the fair-sharing cases
/// "reclaim nominal quota from lowest priority workload, excluding non-borrowing" and the
/// `preemption/fairsharing` strategies); here the same strategies first judge the candidates' growth
/// alone, and whole victims are taken only when the growth is not enough.
#[test]
fn fair_sharing_takes_the_borrowers_growth_first() {
    use FairPreemptionStrategy::{LessThanInitialShare, LessThanOrEqualToFinalShare};
    let kueue_default = [LessThanOrEqualToFinalShare, LessThanInitialShare];
    let cohort = CohortModel::build("co");
    let cqs = vec![
        ClusterQueueModel::build("a")
            .cohort("co")
            .flavor("default", &[("cpu", 4000)])
            .preemption(policy()),
        ClusterQueueModel::build("b")
            .cohort("co")
            .flavor("default", &[("cpu", 4000)])
            .preemption(policy()),
    ];
    let fair = |admitted: &[Adm], incoming| {
        search(
            &cqs,
            std::slice::from_ref(&cohort),
            admitted,
            incoming,
            Some(&kueue_default),
        )
    };
    // B's service: 4 serving + 2 growth (borrowing 2 of A's); A runs 1. A asks 2 within its nominal:
    // only the growth goes.
    let svc: Adm = ("svc", "b", 0, 6000, Some(4000));
    let own: Adm = ("own", "a", 0, 1000, None);
    assert_eq!(
        fair(&[own, svc], ("a", 0, 2000)),
        want(&[("svc", InCohortReclamation, true)])
    );
    // A asks 3: the growth (2) and the free quota (1) are enough, still no whole victim.
    assert_eq!(
        fair(&[own, svc], ("a", 0, 3000)),
        want(&[("svc", InCohortReclamation, true)])
    );
    // Without a floor: Kueue's answer, the borrower whole.
    let plain: Adm = ("svc", "b", 0, 6000, None);
    assert_eq!(
        fair(&[own, plain], ("a", 0, 2000)),
        want(&[("svc", InCohortReclamation, false)])
    );
    // B borrows 3 (5 serving, 2 growth), 1 free: A's 2 is the growth and the free quota.
    let big: Adm = ("svc", "b", 0, 7000, Some(5000));
    assert_eq!(
        fair(&[big], ("a", 0, 2000)),
        want(&[("svc", InCohortReclamation, true)])
    );
    // A asks beyond its nominal (5 of 4): the strategies compare shares. B at its nominal lends
    // nothing and is no candidate, its growth included.
    let within: Adm = ("svc", "b", 0, 4000, Some(3000));
    assert_eq!(fair(&[within], ("a", 0, 5000)), want(&[]));
    // Both borrowing-capable: A over its nominal takes from B only what the shares allow; B
    // borrowing 2 of growth, A asking 5 with 1 free: the growth is judged as a victim of its own
    // and taken (A's share after, 1/4, does not exceed B's after, 0).
    let lender: Adm = ("svc", "b", 0, 6000, Some(4000));
    let none: [Adm; 0] = [];
    assert!(fair(&none, ("a", 0, 5000)).is_empty());
    assert_eq!(
        fair(&[lender], ("a", 0, 4000)),
        want(&[("svc", InCohortReclamation, true)])
    );
    assert_eq!(
        fair(&[lender], ("a", 0, 5000)),
        want(&[("svc", InCohortFairSharing, false)])
    );
}
