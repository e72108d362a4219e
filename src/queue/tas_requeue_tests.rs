//! A change of the TAS cluster requeues only the ClusterQueues whose TAS flavors see it, with their
//! cohort trees (`tas_requeue`). Two TAS flavors over one hostname Topology: `a` on the Nodes of
//! pool a, `b` on those of pool b. Each parked workload asks for one pod of 2 CPU on one host, and
//! every host has 1 CPU until a test grows one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::non_tas::NodeUsage;
use super::non_tas::tests::node;
use super::requests::{PODS, Requests};
use super::tas::{TasCluster, TasNode, TopologyRequest};
use super::tas_requeue::changed_flavors;
use super::*;

const HOST: &str = "kubernetes.io/hostname";
const POOL: &str = "example.com/pool";

fn host(name: &str, pool: &str, cpu_milli: i64) -> TasNode {
    node(
        name,
        &[(HOST, name), (POOL, pool)],
        &[("cpu", cpu_milli), (PODS, 10)],
    )
}

/// a1 in pool a, b1 in pool b, `extra` after them.
fn cluster(a1_cpu: i64, b1_cpu: i64, extra: &[TasNode]) -> TasCluster {
    let mut nodes = vec![host("a1", "a", a1_cpu), host("b1", "b", b1_cpu)];
    nodes.extend_from_slice(extra);
    TasCluster::new([("hosts".to_string(), vec![HOST.to_string()])].into(), nodes)
}

/// ClusterQueues as (name, cohort, flavor), each with one parked workload `w-<name>` after two
/// cycles (the second evaluates nothing: everything is parked).
fn parked(cqs: &[(&str, &str, &str)]) -> AdmissionCore {
    let mut c = AdmissionCore::new();
    for f in ["a", "b"] {
        c.upsert_flavor(FlavorModel::build(f).label(POOL, f).with_topology("hosts"));
    }
    for (name, cohort, flavor) in cqs {
        c.upsert_cluster_queue(
            ClusterQueueModel::build(name)
                .cohort(cohort)
                .flavor(flavor, &[("cpu", 100_000)]),
        )
        .unwrap();
        let required = TopologyRequest {
            required: Some(HOST.into()),
            ..Default::default()
        };
        c.add_workload(
            WorkloadModel::build("ns", &format!("w-{name}"), name)
                .podset(PodSetModel::build("main", 1, &[("cpu", 2000)]).with_topology(required)),
        )
        .unwrap();
    }
    c.set_tas_cluster(cluster(1000, 1000, &[]));
    let first = c.schedule_cycle(1);
    assert!(first.admissions.is_empty(), "{first:?}");
    assert_eq!(first.pending.len(), cqs.len(), "{first:?}");
    let second = c.schedule_cycle(2);
    assert_eq!(second.attempts, 0, "all parked: {second:?}");
    c
}

/// The workloads a cycle evaluated, admitted or not, by name.
fn evaluated(res: &CycleResult) -> Vec<&str> {
    let mut v: Vec<&str> = res
        .admissions
        .iter()
        .map(|a| a.key.name.as_str())
        .chain(res.pending.iter().map(|p| p.key.name.as_str()))
        .collect();
    v.sort();
    v
}

fn admitted(res: &CycleResult) -> Vec<&str> {
    res.admissions.iter().map(|a| a.key.name.as_str()).collect()
}

/// Kueue `pkg/controller/tas/pod_usage_controller.go` (`drainPendingNodes`): room freed on a Node
/// retries the ClusterQueues using the flavors the Node matches (`ClusterQueuesUsingFlavor`), and
/// `resource_flavor.go`'s `nodeHandler` reacts to a Node only for the flavors it matches. The
/// ClusterQueue of flavor b, in another cohort, stays parked until b's own Node changes.
#[test]
fn a_node_of_flavor_a_requeues_the_queue_using_a_and_not_one_using_only_b() {
    let mut c = parked(&[("cq-a", "left", "a"), ("cq-b", "right", "b")]);
    c.set_tas_cluster(cluster(4000, 1000, &[]));
    let res = c.schedule_cycle(3);
    assert_eq!(admitted(&res), ["w-cq-a"], "{res:?}");
    assert_eq!(evaluated(&res), ["w-cq-a"], "w-cq-b stays parked: {res:?}");
    // b's Node grows: now its ClusterQueue is requeued, and its workload fits.
    c.set_tas_cluster(cluster(4000, 4000, &[]));
    let res = c.schedule_cycle(4);
    assert_eq!(admitted(&res), ["w-cq-b"], "{res:?}");
}

/// Kueue `pkg/controller/tas/resource_flavor.go` (`nodeHandler.Generic`, through
/// `pkg/util/tas/node.go` `NodeMatchesFlavor`): a Node that lacks a flavor's node labels or one of
/// its Topology's level labels triggers nothing for that flavor. The cluster is still replaced.
#[test]
fn a_node_no_tas_flavor_sees_requeues_nothing() {
    let mut c = parked(&[("cq-a", "left", "a"), ("cq-b", "right", "b")]);
    let elsewhere = host("x1", "other", 8000);
    let no_level = node("a2", &[(POOL, "a")], &[("cpu", 8000), (PODS, 10)]);
    let next = cluster(1000, 1000, &[elsewhere, no_level]);
    c.set_tas_cluster(next.clone());
    assert!(c.tas == next, "the cluster is replaced whole");
    let res = c.schedule_cycle(3);
    assert_eq!(res.attempts, 0, "{res:?}");
    // Cordoning a Node of pool a is seen by flavor a, growing an unseen Node is not.
    let mut cordoned = host("a1", "a", 1000);
    cordoned.schedulable = false;
    let nodes = vec![cordoned, host("b1", "b", 1000), host("x1", "other", 9000)];
    c.set_tas_cluster(TasCluster::new(next.topologies.clone(), nodes));
    assert_eq!(evaluated(&c.schedule_cycle(4)), ["w-cq-a"]);
}

/// Kueue `pkg/cache/queue/inadmissible_workloads.go` (`NotifyRetryInadmissible`): a ClusterQueue
/// with a parent has its whole cohort tree requeued (`requeueWorkloadsCohort`). cq-left2 uses only
/// flavor b but shares cq-a's cohort, so it is evaluated again; cq-b, also on b, in another cohort,
/// is not.
#[test]
fn a_queue_in_the_cohort_of_an_affected_queue_is_requeued() {
    let mut c = parked(&[
        ("cq-a", "left", "a"),
        ("cq-left2", "left", "b"),
        ("cq-b", "right", "b"),
    ]);
    c.set_tas_cluster(cluster(4000, 1000, &[]));
    let res = c.schedule_cycle(3);
    assert_eq!(admitted(&res), ["w-cq-a"], "{res:?}");
    assert_eq!(evaluated(&res), ["w-cq-a", "w-cq-left2"], "{res:?}");
}

/// Kueue `pkg/controller/tas/topology_controller.go` (`Update`): new levels retry the ClusterQueues
/// using that Topology (`ClusterQueuesUsingTopology`); a Topology no flavor names changes nothing.
#[test]
fn a_topology_change_requeues_the_queues_of_its_flavors() {
    let mut c = parked(&[("cq-a", "left", "a"), ("cq-b", "right", "b")]);
    let mut next = cluster(1000, 1000, &[]);
    next.topologies.insert("unused".into(), vec![POOL.into()]);
    c.set_tas_cluster(next.clone());
    assert_eq!(c.schedule_cycle(3).attempts, 0);
    next.topologies
        .insert("hosts".into(), vec![POOL.into(), HOST.into()]);
    c.set_tas_cluster(next);
    assert_eq!(evaluated(&c.schedule_cycle(4)), ["w-cq-a", "w-cq-b"]);
}

fn flavors() -> BTreeMap<String, FlavorModel> {
    ["a", "b"]
        .into_iter()
        .map(|f| {
            (
                f.to_string(),
                FlavorModel::build(f).label(POOL, f).with_topology("hosts"),
            )
        })
        .chain([("plain".to_string(), FlavorModel::build("plain"))])
        .collect()
}

fn usage(node: &str, cpu_milli: i64) -> Option<Arc<NodeUsage>> {
    let on_node = Requests::from([("cpu".to_string(), Amount(cpu_milli))]);
    Some(Arc::new(NodeUsage::from([(node.to_string(), on_node)])))
}

/// The order Nodes come in is not a change; what non-TAS pods request on a Node is one for the
/// flavors that see the Node; non-TAS pods becoming listed is one for every TAS flavor.
#[test]
fn changed_flavors_reads_each_flavors_own_view() {
    let fl = flavors();
    let base = cluster(1000, 1000, &[host("x1", "other", 1000)]);
    let mut reversed = base.clone();
    reversed.nodes.reverse();
    assert!(base != reversed);
    assert!(changed_flavors(&fl, &base, &reversed).is_empty());

    let on_b1 = base.clone().with_non_tas(usage("b1", 500));
    assert_eq!(changed_flavors(&fl, &base, &on_b1), BTreeSet::from(["b"]));
    let on_x1 = base.clone().with_non_tas(usage("x1", 500));
    assert!(changed_flavors(&fl, &base, &on_x1).is_empty());

    let unlisted = base.clone().with_non_tas(None);
    assert_eq!(changed_flavors(&fl, &unlisted, &base), BTreeSet::from(["a", "b"]));

    let mut tainted = base.clone();
    tainted.nodes[0].taints.push(Taint {
        key: "k".into(),
        value: "v".into(),
        effect: TaintEffect::NoSchedule,
    });
    assert_eq!(changed_flavors(&fl, &base, &tainted), BTreeSet::from(["a"]));
}
