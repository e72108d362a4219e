//! Every preemption search consults the topology (Kueue's `workloadFits`, which ends with
//! `FindTopologyAssignmentsForWorkload`, is what the classical search, both fair-sharing strategies
//! and `fillBackWorkloads` call: `pkg/scheduler/preemption/preemption.go`): victims are taken until
//! both the quota and the topology have room, and the ones neither needs are put back.
//!
//! Two kinds of cases: the search alone, with a topology that has room only once named workloads
//! are gone (growth-first and fair sharing, classical and fair), and the admission core over real
//! nodes with fair sharing on, porting Kueue's `pkg/scheduler/scheduler_tas_test.go`
//! `TestScheduleForTASPreemption` expectations (Kueue runs them with the classical search; the same
//! victims are expected with fair sharing, whose own-ClusterQueue path takes the same candidates
//! in the same order).

use std::collections::BTreeMap;

use super::amount::{Amount, FlavorResource, FrAmounts};
use super::fair_preemption::fair_targets;
use super::model::{
    ClusterQueueModel, FairPreemptionStrategy, FairSharingConfig, PreemptionPolicy, ReclaimWithinCohort,
    WithinClusterQueue, WorkloadKey,
};
use super::preemption::{Candidate, PreemptedReason, Preemptor, find_targets};
use super::tree::QuotaTree;

use PreemptedReason::InClusterQueue;

/// An admitted workload in the one ClusterQueue: name, priority, cpu used, cpu floor (if any).
type Adm = (&'static str, i32, i64, Option<i64>);

fn cpu(v: i64) -> FrAmounts {
    [(FlavorResource::new("default", "cpu"), Amount(v))]
        .into_iter()
        .collect()
}

/// Victims as (name, reason, growth only), sorted, for a preemptor of `prio` asking `ask` cpu in a
/// ClusterQueue of `quota` cpu, whose topology has room only once every workload of `needs` is
/// gone. `fair`: the fair-sharing search with these strategies, else the classical one.
fn victims(
    quota: i64,
    admitted: &[Adm],
    (prio, ask): (i32, i64),
    needs: &[&str],
    fair: Option<&[FairPreemptionStrategy]>,
) -> Vec<(String, PreemptedReason, bool)> {
    let cq = ClusterQueueModel::build("cq")
        .flavor("default", &[("cpu", quota)])
        .preemption(PreemptionPolicy {
            within_cluster_queue: WithinClusterQueue::LowerPriority,
            reclaim_within_cohort: ReclaimWithinCohort::Any,
            ..Default::default()
        });
    let mut tree = QuotaTree::build(std::slice::from_ref(&cq), &BTreeMap::new());
    let idx = tree.cq("cq").unwrap_or_else(|| panic!("no ClusterQueue cq"));
    let keys: Vec<WorkloadKey> = admitted.iter().map(|a| WorkloadKey::new("ns", a.0)).collect();
    let usages: Vec<FrAmounts> = admitted.iter().map(|a| cpu(a.2)).collect();
    let floors: Vec<Option<FrAmounts>> = admitted.iter().map(|a| a.3.map(cpu)).collect();
    for u in &usages {
        tree.add_all(idx, u);
    }
    let cands: Vec<Candidate<'_>> = admitted
        .iter()
        .enumerate()
        .map(|(n, a)| Candidate {
            key: &keys[n],
            cq_idx: idx,
            priority: a.1,
            queue_timestamp: 0,
            admitted_at: i64::try_from(n).unwrap_or_default(),
            uid: a.0,
            usage: &usages[n],
            evicting: false,
            lq_usage: None,
            floor: floors[n].as_ref(),
        })
        .collect();
    let usage = cpu(ask);
    let contested = usage.keys().cloned().collect();
    let room = |gone: &[&WorkloadKey]| needs.iter().all(|n| gone.iter().any(|k| k.name == *n));
    let p = Preemptor {
        cq_idx: idx,
        cq: &cq,
        priority: prio,
        queue_timestamp: 0,
        usage: &usage,
        contested: &contested,
        tas_fits: Some(&room),
    };
    let found = match fair {
        Some(strategies) => fair_targets(&mut tree, &p, &cands, strategies),
        None => find_targets(&mut tree, &p, &cands),
    };
    assert_eq!(
        tree.usage(idx, &FlavorResource::new("default", "cpu")),
        Amount(admitted.iter().map(|a| a.2).sum()),
        "the search must leave the tree as found"
    );
    let mut got: Vec<(String, PreemptedReason, bool)> = found
        .into_iter()
        .map(|t| (t.key.name, t.reason, t.growth_only))
        .collect();
    got.sort();
    got
}

fn whole(names: &[&str]) -> Vec<(String, PreemptedReason, bool)> {
    let mut v: Vec<_> = names
        .iter()
        .map(|n| (n.to_string(), InClusterQueue, false))
        .collect();
    v.sort();
    v
}

fn both_searches() -> [Option<&'static [FairPreemptionStrategy]>; 2] {
    const FAIR: &[FairPreemptionStrategy] = &[
        FairPreemptionStrategy::LessThanOrEqualToFinalShare,
        FairPreemptionStrategy::LessThanInitialShare,
    ];
    [None, Some(FAIR)]
}

/// A service's growth frees quota but no known domain (which of its pods a shrink deletes is not
/// known): when the topology needs the batch workload's domain, the batch workload goes whole and
/// the service keeps its growth; when it needs the service's, the service goes whole. Before the
/// fix both searches took the growth alone, which left the preemptor with no room to run.
#[test]
fn growth_taken_only_when_the_topology_does_not_need_a_whole_victim() {
    let batch: Adm = ("batch", -5, 2, None);
    let svc: Adm = ("svc", 0, 6, Some(4));
    for fair in both_searches() {
        // No topology limit beyond quota: the growth alone (growth-first, unchanged).
        assert_eq!(
            victims(8, &[batch, svc], (10, 2), &[], fair),
            vec![("svc".to_string(), InClusterQueue, true)],
            "fair: {fair:?}"
        );
        assert_eq!(
            victims(8, &[batch, svc], (10, 2), &["batch"], fair),
            whole(&["batch"]),
            "fair: {fair:?}"
        );
        assert_eq!(
            victims(8, &[batch, svc], (10, 2), &["svc"], fair),
            whole(&["svc"]),
            "fair: {fair:?}"
        );
    }
}

/// Quota ample (the topology is the limit): the first candidate in Kueue's order (lowest priority)
/// frees quota the preemptor does not need, so it is put back; the one whose domain the preemptor
/// needs is taken. Before the fix fair sharing took the first candidate and stopped.
#[test]
fn victims_are_taken_until_the_topology_has_room_then_the_unneeded_put_back() {
    let low: Adm = ("low", 1, 1, None);
    let mid: Adm = ("mid", 2, 3, None);
    let high: Adm = ("high", 9, 2, None);
    for fair in both_searches() {
        assert_eq!(
            victims(100, &[low, mid, high], (5, 3), &["mid"], fair),
            whole(&["mid"]),
            "fair: {fair:?}"
        );
        // Both needed: both go.
        assert_eq!(
            victims(100, &[low, mid, high], (5, 3), &["low", "mid"], fair),
            whole(&["low", "mid"]),
            "fair: {fair:?}"
        );
        // A domain only a non-candidate (higher priority) frees: nothing is preempted.
        assert!(
            victims(100, &[low, mid, high], (5, 3), &["high"], fair).is_empty(),
            "fair: {fair:?}"
        );
    }
}

mod core {
    //! The admission core with fair sharing on, over TAS nodes (Kueue's
    //! `pkg/scheduler/scheduler_tas_test.go`, `TestScheduleForTASPreemption`: one-level hostname
    //! topology, nodes of 5 CPU, a ClusterQueue of 50 CPU preempting lower priorities within it).
    use super::*;
    use crate::queue::requests::Requests;
    use crate::queue::tas::{PODS, TasCluster, TasNode, TopologyRequest};
    use crate::queue::{AdmissionCore, CycleResult, FlavorModel, PodSetModel, WorkloadModel};

    const HOST: &str = "kubernetes.io/hostname";

    fn host(name: &str, cpu_milli: i64) -> TasNode {
        TasNode {
            name: name.into(),
            labels: [(HOST.to_string(), name.to_string())].into(),
            allocatable: Requests::from([
                ("cpu".to_string(), Amount(cpu_milli)),
                (PODS.to_string(), Amount(10)),
            ]),
            taints: Vec::new(),
            schedulable: true,
        }
    }

    fn fair_core(nodes: Vec<TasNode>) -> AdmissionCore {
        let mut c = AdmissionCore::new();
        c.upsert_cluster_queue(
            ClusterQueueModel::build("cq")
                .flavor("tas", &[("cpu", 50_000)])
                .within(WithinClusterQueue::LowerPriority),
        )
        .unwrap();
        c.upsert_flavor(FlavorModel::build("tas").with_topology("default"));
        c.set_tas_cluster(TasCluster::new(
            [("default".to_string(), vec![HOST.to_string()])].into(),
            nodes,
        ));
        c.set_fair_sharing(Some(FairSharingConfig::default()));
        c
    }

    fn req(required: bool) -> TopologyRequest {
        TopologyRequest {
            required: required.then(|| HOST.to_string()),
            preferred: (!required).then(|| HOST.to_string()),
            ..Default::default()
        }
    }

    fn w(name: &str, pods: i64, cpu_milli: i64, prio: i32, at: i64, required: bool) -> WorkloadModel {
        WorkloadModel::build("ns", name, "cq")
            .podset(PodSetModel::build("one", pods, &[("cpu", cpu_milli)]).with_topology(req(required)))
            .priority(prio)
            .at(at)
    }

    fn evicted(res: &CycleResult) -> Vec<String> {
        let mut v: Vec<String> = res.evictions.iter().map(|e| e.key.name.clone()).collect();
        v.sort();
        v
    }

    fn admit(c: &mut AdmissionCore, wl: WorkloadModel, now: i64) {
        c.add_workload(wl).unwrap();
        let res = c.schedule_cycle(now);
        assert_eq!(res.admissions.len(), 1, "{res:?}");
    }

    /// Kueue: "low priority workload is preempted, mid-priority workload survives". One node of
    /// 5 CPU holding mid (2) and low (2); foo (priority 3) prefers a host for 2 CPU: only low goes.
    #[test]
    fn low_priority_is_preempted_mid_priority_survives() {
        let mut c = fair_core(vec![host("x1", 5000)]);
        admit(&mut c, w("mid", 1, 2000, 2, 0, true), 1);
        admit(&mut c, w("low", 1, 2000, 1, 1, true), 2);
        c.add_workload(w("foo", 1, 2000, 3, 2, false)).unwrap();
        let res = c.schedule_cycle(3);
        assert_eq!(evicted(&res), vec!["low"], "{res:?}");
        c.release(&WorkloadKey::new("ns", "low"));
        let res = c.schedule_cycle(4);
        assert_eq!(res.admissions.len(), 1, "{res:?}");
        assert_eq!(res.admissions[0].key.name, "foo");
    }

    /// Kueue: "low priority workload is preempted even though there is enough capacity, but
    /// fragmented". Two nodes of 5 CPU, each 4/5 used (mid on one, low on the other); foo needs 2
    /// pods of 1 CPU on one host: the 2 free units are on two hosts, so low goes, mid stays.
    #[test]
    fn low_priority_is_preempted_when_the_free_capacity_is_fragmented() {
        let mut c = fair_core(vec![host("x1", 5000), host("y1", 5000)]);
        admit(&mut c, w("mid", 1, 4000, 2, 0, true), 1);
        admit(&mut c, w("low", 1, 4000, 1, 1, true), 2);
        c.add_workload(w("foo", 2, 1000, 3, 2, true)).unwrap();
        let res = c.schedule_cycle(3);
        assert_eq!(evicted(&res), vec!["low"], "{res:?}");
        c.release(&WorkloadKey::new("ns", "low"));
        let res = c.schedule_cycle(4);
        assert_eq!(res.admissions.len(), 1, "{res:?}");
        assert_eq!(res.admissions[0].key.name, "foo");
    }

    /// The lowest priority candidate sits on the host another, higher priority workload keeps
    /// busy: evicting it frees quota (ample anyway) but no host with room for 3 pods. With fair
    /// sharing on, only the workload holding a whole host goes (before the fix, the lowest
    /// priority went and the preemptor still had no room).
    #[test]
    fn fair_sharing_preempts_the_workload_whose_host_it_needs() {
        let mut c = fair_core(vec![host("x1", 3000), host("y1", 3000)]);
        // keep takes 2 of one host; right the whole other host; wrong the last unit beside keep.
        admit(&mut c, w("keep", 2, 1000, 9, 0, true), 1);
        admit(&mut c, w("right", 3, 1000, 2, 1, true), 2);
        admit(&mut c, w("wrong", 1, 1000, 1, 2, true), 3);
        c.add_workload(w("new", 3, 1000, 5, 3, true)).unwrap();
        let res = c.schedule_cycle(4);
        assert_eq!(evicted(&res), vec!["right"], "{res:?}");
        c.release(&WorkloadKey::new("ns", "right"));
        let res = c.schedule_cycle(5);
        assert_eq!(res.admissions.len(), 1, "{res:?}");
        assert_eq!(res.admissions[0].key.name, "new");
        // keep and wrong were never evicted.
        assert!(res.evictions.is_empty(), "{res:?}");
    }
}
