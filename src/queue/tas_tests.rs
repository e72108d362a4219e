//! Kueue's placement expectations, ported from `pkg/cache/scheduler/tas_cache_test.go`
//! (`TestFindTopologyAssignments`, which drives `tas_flavor_snapshot.go`); each case keeps Kueue's name.
//! Requests are per pod in accounting units (cpu in milli, memory in bytes), as Kueue's test writes them.

use super::*;

const BLOCK: &str = "cloud.com/topology-block";
const RACK: &str = "cloud.com/topology-rack";
const HOST: &str = "kubernetes.io/hostname";
const GI: i64 = 1 << 30;

fn node(name: &str, labels: &[(&str, &str)], cpu_milli: i64, memory: i64, pods: i64) -> TasNode {
    let mut allocatable = Requests::from([
        ("cpu".to_string(), Amount(cpu_milli)),
        (PODS.to_string(), Amount(pods)),
    ]);
    if memory > 0 {
        allocatable.insert("memory".into(), Amount(memory));
    }
    TasNode {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        allocatable,
        taints: Vec::new(),
        schedulable: true,
    }
}

fn brh(b: &str, r: &str, h: &str, cpu_milli: i64, memory: i64, pods: i64) -> TasNode {
    node(
        &format!("{b}-{r}-{h}"),
        &[(BLOCK, b), (RACK, r), (HOST, h)],
        cpu_milli,
        memory,
        pods,
    )
}

//      b1                   b2
//   /      \             /      \
//  r1       r2          r1       r2
//  |      /  |  \       |         |
//  x3    x5  x1  x6     x2       x4
fn default_nodes() -> Vec<TasNode> {
    vec![
        brh("b1", "r1", "x3", 1000, GI, 10),
        brh("b1", "r2", "x5", 1000, GI, 10),
        brh("b1", "r2", "x1", 1000, GI, 10),
        brh("b1", "r2", "x6", 1000, GI, 10),
        brh("b2", "r1", "x2", 1000, GI, 10),
        brh("b2", "r2", "x4", 2000, 4 * GI, 40),
    ]
}

//       b1           b2
//       |             |
//       r1           r1
//     /  |  \       /  \
//   x3  x5  x1     x6  x2
fn scattered_nodes() -> Vec<TasNode> {
    vec![
        brh("b1", "r1", "x3", 4000, GI, 10),
        brh("b1", "r1", "x5", 1000, GI, 10),
        brh("b1", "r1", "x1", 1000, GI, 10),
        brh("b2", "r1", "x6", 2000, GI, 10),
        brh("b2", "r1", "x2", 1000, GI, 10),
    ]
}

fn binary_trees_nodes() -> Vec<TasNode> {
    [
        ("b1", "r1", "x3"),
        ("b1", "r1", "x5"),
        ("b1", "r2", "x1"),
        ("b1", "r2", "x6"),
        ("b2", "r1", "x2"),
        ("b2", "r1", "x4"),
        ("b2", "r2", "x7"),
        ("b2", "r2", "x8"),
    ]
    .iter()
    .map(|(b, r, h)| brh(b, r, h, 1000, GI, 10))
    .collect()
}

fn levels(l: &[&str]) -> Vec<String> {
    l.iter().map(|s| s.to_string()).collect()
}

fn three() -> Vec<String> {
    levels(&[BLOCK, RACK, HOST])
}

fn two() -> Vec<String> {
    levels(&[BLOCK, RACK])
}

fn podset(count: i64, requests: &[(&str, i64)]) -> PodSetModel {
    PodSetModel {
        name: "main".into(),
        count,
        requests: requests
            .iter()
            .map(|(r, v)| (r.to_string(), Amount(*v)))
            .collect(),
        ..Default::default()
    }
}

fn required(l: &str) -> TopologyRequest {
    TopologyRequest {
        required: Some(l.into()),
        ..Default::default()
    }
}

fn preferred(l: &str) -> TopologyRequest {
    TopologyRequest {
        preferred: Some(l.into()),
        ..Default::default()
    }
}

fn unconstrained() -> TopologyRequest {
    TopologyRequest {
        unconstrained: true,
        ..Default::default()
    }
}

fn place(
    nodes: &[TasNode],
    lv: &[String],
    req: &TopologyRequest,
    count: i64,
    cpu: i64,
) -> Result<Vec<(String, i32)>, String> {
    let s = TasSnapshot::new("default", lv, nodes);
    let p = s.place(&podset(count, &[("cpu", cpu)]), req, false, count)?;
    Ok(p.domains.iter().map(|d| (d.values.join("/"), d.count)).collect())
}

fn want(d: &[(&str, i32)]) -> Result<Vec<(String, i32)>, String> {
    Ok(d.iter().map(|(v, c)| (v.to_string(), *c)).collect())
}

#[test]
fn minimize_the_number_of_used_racks_before_optimizing_the_number_of_nodes() {
    // Kueue: "minimize the number of used racks before optimizing the number of nodes; BestFit"
    let nodes = vec![
        brh("b1", "r1", "x3", 2000, 0, 10),
        brh("b1", "r2", "x5", 2000, 0, 20),
        brh("b1", "r3", "x1", 1000, 0, 10),
        brh("b1", "r3", "x6", 1000, 0, 10),
        brh("b1", "r3", "x2", 1000, 0, 10),
        brh("b1", "r3", "x4", 1000, 0, 10),
    ];
    assert_eq!(
        place(&nodes, &three(), &required(BLOCK), 4, 1000),
        want(&[("x1", 1), ("x2", 1), ("x4", 1), ("x6", 1)])
    );
}

#[test]
fn choose_the_node_that_can_accommodate_all_pods() {
    // Kueue: "choose the node that can accommodate all Pods"
    let nodes = vec![
        brh("b1", "r1", "x3", 2000, 0, 10),
        brh("b1", "r1", "x5", 1000, 0, 10),
        brh("b1", "r1", "x1", 1000, 0, 10),
    ];
    assert_eq!(
        place(&nodes, &three(), &required(BLOCK), 2, 1000),
        want(&[("x3", 2)])
    );
}

#[test]
fn unconstrained_fills_the_least_free_hosts_first() {
    let scattered = want(&[("x1", 1), ("x3", 1), ("x5", 1), ("x2", 1), ("x6", 2)]);
    // Kueue: "no annotation; implied default to unconstrained; 6 pods fit into hosts scattered across
    // the whole datacenter even they could fit into single rack; BestFit"
    let s = TasSnapshot::new("default", &three(), &scattered_nodes());
    let p = s
        .place(&podset(6, &[("cpu", 1000)]), &TopologyRequest::default(), true, 6)
        .unwrap();
    let got: Vec<(String, i32)> = p.domains.iter().map(|d| (d.values.join("/"), d.count)).collect();
    assert_eq!(Ok(got), scattered);
    assert_eq!(p.levels, levels(&[HOST]));
    // Kueue: "unconstrained; 6 pods fit into hosts scattered across the whole datacenter even they
    // could fit into single rack; BestFit"
    assert_eq!(
        place(&scattered_nodes(), &three(), &unconstrained(), 6, 1000),
        scattered
    );
    // Kueue: "unconstrained; a single pod fits into each host; BestFit" (and the LeastFreeCapacity twin)
    assert_eq!(
        place(&default_nodes(), &three(), &unconstrained(), 1, 1000),
        want(&[("x3", 1)])
    );
}

#[test]
fn required_levels_on_three_level_topologies() {
    // Kueue: "block required; 4 pods fit into one host each; BestFit"
    assert_eq!(
        place(&binary_trees_nodes(), &three(), &required(BLOCK), 4, 1000),
        want(&[("x3", 1), ("x5", 1), ("x1", 1), ("x6", 1)])
    );
    // Kueue: "host required; single Pod fits in the host; BestFit"
    assert_eq!(
        place(&default_nodes(), &three(), &required(HOST), 1, 1000),
        want(&[("x3", 1)])
    );
}

#[test]
fn required_levels_on_two_level_topologies() {
    let n = default_nodes();
    // Kueue: "rack required; single Pod fits in a rack; BestFit"
    assert_eq!(place(&n, &two(), &required(RACK), 1, 1000), want(&[("b1/r1", 1)]));
    // Kueue: "rack required; multiple Pods fit in a rack; BestFit"
    assert_eq!(place(&n, &two(), &required(RACK), 3, 1000), want(&[("b1/r2", 3)]));
    // Kueue: "rack required; multiple Pods fit in some racks; BestFit"
    assert_eq!(place(&n, &two(), &required(RACK), 2, 1000), want(&[("b2/r2", 2)]));
    // Kueue: "rack required; too many pods to fit in any rack; BestFit"
    assert_eq!(
        place(&n, &two(), &required(RACK), 4, 1000),
        Err(r#"topology "default" allows to fit only 3 out of 4 pod(s)"#.to_string())
    );
    // Kueue: "block required; single Pod fits in a block and a single rack; BestFit"
    assert_eq!(
        place(&n, &two(), &required(BLOCK), 1, 1000),
        want(&[("b2/r1", 1)])
    );
    // Kueue: "block required; Pods fit in a block spread across two racks; BestFit"
    assert_eq!(
        place(&n, &two(), &required(BLOCK), 4, 1000),
        want(&[("b1/r1", 1), ("b1/r2", 3)])
    );
    // Kueue: "block required; single Pod which cannot be split; BestFit"
    assert_eq!(
        place(&n, &two(), &required(BLOCK), 1, 4000),
        Err(r#"topology "default" doesn't allow to fit any of 1 pod(s). Total nodes: 4; excluded: resource "cpu": 4"#.to_string())
    );
    // Kueue: "block required; too many Pods to fit requested; BestFit"
    assert_eq!(
        place(&n, &two(), &required(BLOCK), 5, 1000),
        Err(r#"topology "default" allows to fit only 4 out of 5 pod(s)"#.to_string())
    );
    // Kueue: "rack required; single Pod requiring memory; BestFit"
    let s = TasSnapshot::new("default", &two(), &n);
    let p = s
        .place(&podset(4, &[("memory", 1024)]), &required(RACK), false, 4)
        .unwrap();
    assert_eq!(
        p.domains,
        vec![DomainAssignment {
            values: levels(&["b1", "r1"]),
            count: 4
        }]
    );
}

#[test]
fn preferred_levels_fall_back_upwards_then_to_the_fewest_domains() {
    let n = default_nodes();
    // Kueue: "rack preferred; but only block can accommodate the workload; BestFit"
    assert_eq!(
        place(&n, &two(), &preferred(RACK), 4, 1000),
        want(&[("b1/r1", 1), ("b1/r2", 3)])
    );
    let spread = want(&[("b1/r1", 1), ("b1/r2", 3), ("b2/r2", 2)]);
    // Kueue: "rack preferred; but only multiple blocks can accommodate the workload; BestFit"
    assert_eq!(place(&n, &two(), &preferred(RACK), 6, 1000), spread);
    // Kueue: "block preferred; but only multiple blocks can accommodate the workload; BestFit"
    assert_eq!(place(&n, &two(), &preferred(BLOCK), 6, 1000), spread);
    // Kueue: "block preferred; but the workload cannot be accommodate in entire topology; BestFit"
    assert_eq!(
        place(&n, &two(), &preferred(BLOCK), 10, 1000),
        Err(r#"topology "default" allows to fit only 7 out of 10 pod(s)"#.to_string())
    );
    // Kueue: "block preferred; Pods fit in 2 blocks; BestFit"
    let blocks = vec![
        node("b1", &[(BLOCK, "b1")], 2000, 0, 20),
        node("b2", &[(BLOCK, "b2")], 1000, 0, 10),
        node("b3", &[(BLOCK, "b3")], 4000, 0, 40),
    ];
    assert_eq!(
        place(&blocks, &levels(&[BLOCK]), &preferred(BLOCK), 5, 1000),
        want(&[("b2", 1), ("b3", 4)])
    );
}

#[test]
fn slices_are_placed_whole_inside_their_level() {
    // Kueue: "block required for podset; host required for slices; BestFit"
    let nodes = vec![
        brh("b1", "r1", "x3", 3000, 0, 10),
        brh("b1", "r1", "x5", 3000, 0, 10),
        brh("b1", "r1", "x1", 3000, 0, 10),
    ];
    let req = TopologyRequest {
        required: Some(BLOCK.into()),
        slice_topology: Some(HOST.into()),
        slice_size: Some(2),
        ..Default::default()
    };
    assert_eq!(
        place(&nodes, &three(), &req, 6, 1000),
        want(&[("x1", 2), ("x3", 2), ("x5", 2)])
    );
    let no_size = TopologyRequest {
        slice_size: None,
        ..req
    };
    assert_eq!(
        place(&nodes, &three(), &no_size, 6, 1000),
        Err("slice topology requested, but slice size not provided".into())
    );
}

#[test]
fn nodes_filtered_out_are_counted_in_the_message() {
    let host_only = levels(&[HOST]);
    // Kueue: "skip node which has untolerated taint; BestFit"
    let mut x3 = node("x3", &[("zone", "zone-a"), (HOST, "x3")], 1000, GI, 10);
    x3.taints.push(Taint {
        key: "example.com/gpu".into(),
        value: "present".into(),
        effect: TaintEffect::NoSchedule,
    });
    assert_eq!(
        place(std::slice::from_ref(&x3), &host_only, &required(HOST), 1, 1000),
        Err(r#"topology "default" doesn't allow to fit any of 1 pod(s). Total nodes: 1; excluded: taint "example.com/gpu=present:NoSchedule": 1"#.into())
    );
    // Kueue: "detailed failure message with exclusion stats"
    let mut x1 = node("x1", &[(HOST, "x1")], 1000, 0, 10);
    x1.taints.push(Taint {
        key: "key".into(),
        value: "value".into(),
        effect: TaintEffect::NoSchedule,
    });
    let nodes = vec![
        x1,
        node("x2", &[(HOST, "x2"), ("zone", "zone-b")], 1000, 0, 10),
        node("x3", &[(HOST, "x3"), ("zone", "zone-b")], 1000, 0, 10),
        node("x4", &[(HOST, "x4"), ("zone", "zone-a")], 500, 0, 10),
    ];
    let s = TasSnapshot::new("default", &host_only, &nodes);
    let mut ps = podset(1, &[("cpu", 1000)]);
    ps.node_selector.insert("zone".into(), "zone-a".into());
    assert_eq!(
        s.place(&ps, &required(HOST), false, 1),
        Err(r#"topology "default" doesn't allow to fit any of 1 pod(s). Total nodes: 4; excluded: nodeSelector: 2, resource "cpu": 1, taint "key=value:NoSchedule": 1"#.into())
    );
    // Kueue: "no assignment as node is unschedulable; BestFit"
    let mut cordoned = node("x3", &[("zone", "zone-a"), (HOST, "x3")], 1000, GI, 10);
    cordoned.schedulable = false;
    assert_eq!(
        place(&[cordoned], &host_only, &required(HOST), 1, 1000),
        Err("no topology domains at level: kubernetes.io/hostname".into())
    );
}

// Ours: what a reader outside placement (the web view) sees of each leaf: its nodes, allocatable
// and what an admitted hostname-only assignment holds there, found by its host.
#[test]
fn leaves_show_nodes_allocatable_and_what_is_held() {
    let mut s = TasSnapshot::new("default", &three(), &default_nodes());
    let held = Placement {
        levels: levels(&[HOST]),
        domains: vec![DomainAssignment {
            values: levels(&["x1"]),
            count: 2,
        }],
    };
    assert_eq!(
        s.leaf_values(&held.levels, &held.domains[0].values),
        Some(&levels(&["b1", "r2", "x1"])[..])
    );
    assert_eq!(s.leaf_values(&held.levels, &levels(&["gone"])), None);
    s.add_usage(&held, &Requests::from([("cpu".to_string(), Amount(300))]));
    let x1 = s
        .leaves()
        .find(|l| l.values == levels(&["b1", "r2", "x1"]))
        .unwrap();
    assert_eq!(x1.nodes, ["b1-r2-x1"]);
    assert_eq!(x1.allocatable["cpu"], Amount(1000));
    assert_eq!((x1.held["cpu"], x1.held[PODS]), (Amount(600), Amount(2)));
    assert_eq!(s.leaves().count(), 6);
    assert!(
        s.leaves()
            .filter(|l| l.values[2] != "x1")
            .all(|l| l.held.is_empty())
    );
}

// Ours: what admitted assignments hold is not free for the next one (Kueue's `addTASUsage`).
#[test]
fn admitted_usage_takes_room_from_its_domains() {
    let n = default_nodes();
    let mut s = TasSnapshot::new("default", &two(), &n);
    let ps = podset(3, &[("cpu", 1000)]);
    let first = s.place(&ps, &required(RACK), false, 3).unwrap();
    assert_eq!(
        first.domains,
        vec![DomainAssignment {
            values: levels(&["b1", "r2"]),
            count: 3
        }]
    );
    s.add_usage(&first, &ps.requests);
    // b1/r2 is full now; no other rack holds 3.
    assert_eq!(
        s.place(&ps, &required(RACK), false, 3),
        Err(r#"topology "default" allows to fit only 2 out of 3 pod(s). Total nodes: 4; excluded: resource "cpu": 1"#.into())
    );
    let two_pods = podset(2, &[("cpu", 1000)]);
    let p = s.place(&two_pods, &required(RACK), false, 2).unwrap();
    assert_eq!(
        p.domains,
        vec![DomainAssignment {
            values: levels(&["b2", "r2"]),
            count: 2
        }]
    );
    // A hostname-only assignment is found by its host.
    let mut hosts = TasSnapshot::new("default", &three(), &n);
    let p = hosts.place(&ps, &required(RACK), false, 3).unwrap();
    assert_eq!(p.levels, levels(&[HOST]));
    hosts.add_usage(&p, &ps.requests);
    let free = hosts.free_per_leaf();
    assert_eq!(free[&levels(&["b1", "r2", "x1"])]["cpu"], Amount(0));
    assert_eq!(free[&levels(&["b1", "r2", "x1"])][PODS], Amount(9));
}

#[test]
fn requests_for_levels_the_topology_lacks_are_refused_by_name() {
    let n = default_nodes();
    assert_eq!(
        place(&n, &two(), &required("cloud.com/zone"), 1, 1000),
        Err("no requested topology level: cloud.com/zone".into())
    );
    let s = TasSnapshot::new("default", &two(), &n);
    assert!(!s.has_level(&required("cloud.com/zone")));
    assert!(s.has_level(&required(RACK)));
    assert_eq!(
        place(&n, &two(), &TopologyRequest::default(), 1, 1000),
        Err("topology level not specified".into())
    );
}

mod core {
    //! The admission core with a TAS flavor, as Kueue's integration test
    //! (`test/integration/singlecluster/tas/tas_test.go`, "should not admit workload which does not
    //! fit to the required topology domain" / "should admit workload which fits in a required
    //! topology domain"): quota is ample, racks are the limit.
    use super::*;
    use crate::queue::{
        AdmissionCore, ClusterQueueModel, FlavorModel, PendingReason, WorkloadKey, WorkloadModel,
    };

    fn core(nodes: Vec<TasNode>) -> AdmissionCore {
        let mut c = AdmissionCore::new();
        c.upsert_cluster_queue(ClusterQueueModel::build("cq").flavor("tas", &[("cpu", 100_000)]))
            .unwrap();
        c.upsert_flavor(FlavorModel::build("tas").with_topology("default"));
        c.set_tas_cluster(TasCluster::new([("default".to_string(), two())].into(), nodes));
        c
    }

    fn wl(name: &str, count: i64, req: TopologyRequest) -> WorkloadModel {
        WorkloadModel::build("ns", name, "cq")
            .podset(PodSetModel::build("main", count, &[("cpu", 1000)]).with_topology(req))
    }

    #[test]
    fn a_required_rack_admits_into_one_rack_or_waits_naming_why() {
        let mut c = core(default_nodes());
        c.add_workload(wl("a", 3, required(RACK))).unwrap();
        c.add_workload(wl("b", 3, required(RACK)).at(1)).unwrap();
        let res = c.schedule_cycle(1);
        assert_eq!(res.admissions.len(), 1, "{res:?}");
        let a = &res.admissions[0];
        assert_eq!(a.key, WorkloadKey::new("ns", "a"));
        let p = a.admission.pod_set_assignments[0].topology.clone().unwrap();
        assert_eq!(p.levels, two());
        assert_eq!(
            p.domains,
            vec![DomainAssignment {
                values: levels(&["b1", "r2"]),
                count: 3
            }]
        );
        let (reason, msg) = c.pending_reason(&WorkloadKey::new("ns", "b")).unwrap();
        assert_eq!(reason, PendingReason::Pending);
        assert_eq!(
            msg,
            r#"couldn't assign flavors to pod set main: topology "default" allows to fit only 2 out of 3 pod(s). Total nodes: 4; excluded: resource "cpu": 1"#
        );
        // The API form round-trips through the model.
        let api = crate::queue::convert::admission_api(&a.admission);
        assert_eq!(crate::queue::convert::admission_model(&api).unwrap(), a.admission);
        // When a finishes, b gets its rack.
        c.release(&WorkloadKey::new("ns", "a"));
        let res = c.schedule_cycle(2);
        assert_eq!(res.admissions.len(), 1, "{res:?}");
        let p = res.admissions[0].admission.pod_set_assignments[0]
            .topology
            .clone()
            .unwrap();
        assert_eq!(
            p.domains,
            vec![DomainAssignment {
                values: levels(&["b1", "r2"]),
                count: 3
            }]
        );
    }

    /// Kueue's TAS usage of an admitted workload is its `status.admission` topology assignment,
    /// immutable, so an in-place scale-down (`tas_flavor_snapshot.go` counting usage from the
    /// admission) frees quota but no domain: which pods the job deletes is its own choice.
    #[test]
    fn an_in_place_scale_down_keeps_its_domains_counted() {
        let mut c = core(default_nodes());
        c.add_workload(wl("a", 3, required(RACK))).unwrap();
        c.add_workload(wl("c", 2, required(RACK)).at(1)).unwrap();
        let res = c.schedule_cycle(1);
        assert_eq!(res.admissions.len(), 2, "{res:?}");
        // a holds b1/r2 (3 CPU), c holds b2/r2 (2 CPU). a scales down to one pod in place.
        let a = c.shrink_admitted(wl("a", 1, required(RACK))).unwrap();
        assert_eq!(a.pod_set_assignments[0].count, 1);
        let kept = a.pod_set_assignments[0].topology.clone().unwrap();
        assert_eq!(
            kept.domains,
            vec![DomainAssignment {
                values: levels(&["b1", "r2"]),
                count: 3
            }]
        );
        // Two pods needing one rack: b1/r2 is still held whole, so nothing fits.
        c.add_workload(wl("b", 2, required(RACK)).at(2)).unwrap();
        let res = c.schedule_cycle(2);
        assert!(res.admissions.is_empty(), "{res:?}");
        // Once a is gone, its rack is free.
        c.release(&WorkloadKey::new("ns", "a"));
        let res = c.schedule_cycle(3);
        assert_eq!(res.admissions.len(), 1, "{res:?}");
    }

    /// `explain` names the domains: where a pending podset would go, or Kueue's reason it fits none
    /// and the racks with most room (b1/r2 holds 3 CPU, b2/r2 2, the others 1; pods of 1 CPU).
    #[test]
    fn explain_names_the_domains_or_why_none_fits() {
        let mut c = core(default_nodes());
        c.add_workload(wl("a", 3, required(RACK))).unwrap();
        let e = c.explain(&WorkloadKey::new("ns", "a")).unwrap();
        assert_eq!(e.topology.len(), 1, "{e:?}");
        let t = &e.topology[0];
        assert_eq!(
            (t.podset.as_str(), t.flavor.as_str(), t.topology.as_str()),
            ("main", "tas", "default")
        );
        assert_eq!(t.request, format!("required {RACK}"));
        assert_eq!(t.level, RACK);
        assert_eq!(t.placement, vec![("b1/r2".to_string(), 3)]);
        assert_eq!(t.no_fit, "");
        let room = |v: &[(&str, i64)]| v.iter().map(|(d, n)| (d.to_string(), *n)).collect::<Vec<_>>();
        assert_eq!(
            t.roomiest,
            room(&[("b1/r2", 3), ("b2/r2", 2), ("b1/r1", 1), ("b2/r1", 1)])
        );
        c.schedule_cycle(1);
        c.add_workload(wl("b", 3, required(RACK)).at(1)).unwrap();
        c.schedule_cycle(2);
        let e = c.explain(&WorkloadKey::new("ns", "b")).unwrap();
        let t = &e.topology[0];
        assert_eq!(t.placement, vec![]);
        assert_eq!(
            t.no_fit,
            r#"topology "default" allows to fit only 2 out of 3 pod(s). Total nodes: 4; excluded: resource "cpu": 1"#
        );
        assert_eq!(
            t.roomiest,
            room(&[("b2/r2", 2), ("b1/r1", 1), ("b2/r1", 1), ("b1/r2", 0)])
        );
        // A podset asking for nothing in a ClusterQueue with a non-TAS flavor too has no view.
        let mut c = AdmissionCore::new();
        c.upsert_cluster_queue(
            ClusterQueueModel::build("cq")
                .flavor("plain", &[("cpu", 1000)])
                .flavor("tas", &[("cpu", 100_000)]),
        )
        .unwrap();
        c.upsert_flavor(FlavorModel::build("plain"));
        c.upsert_flavor(FlavorModel::build("tas").with_topology("default"));
        c.set_tas_cluster(TasCluster::new(
            [("default".to_string(), two())].into(),
            default_nodes(),
        ));
        c.add_workload(
            WorkloadModel::build("ns", "plain", "cq").podset(PodSetModel::build("main", 2, &[("cpu", 1000)])),
        )
        .unwrap();
        assert!(
            c.explain(&WorkloadKey::new("ns", "plain"))
                .unwrap()
                .topology
                .is_empty()
        );
    }

    /// A core whose ClusterQueue preempts lower priorities within itself (quota ample: the topology
    /// is the limit), over `nodes` with the Topology `lv`.
    fn preempting_core(nodes: Vec<TasNode>, lv: Vec<String>, cpu_quota: i64) -> AdmissionCore {
        let mut c = AdmissionCore::new();
        c.upsert_cluster_queue(
            ClusterQueueModel::build("cq")
                .flavor("tas", &[("cpu", cpu_quota)])
                .within(crate::queue::model::WithinClusterQueue::LowerPriority),
        )
        .unwrap();
        c.upsert_flavor(FlavorModel::build("tas").with_topology("default"));
        c.set_tas_cluster(TasCluster::new([("default".to_string(), lv)].into(), nodes));
        c
    }

    fn evicted(res: &crate::queue::CycleResult) -> Vec<String> {
        let mut v: Vec<String> = res.evictions.iter().map(|e| e.key.name.clone()).collect();
        v.sort();
        v
    }

    /// Kueue test/integration/singlecluster/tas/tas_test.go, "Preemption is enabled within
    /// ClusterQueue": "should preempt the low and mid priority workloads to fit the high-priority
    /// workload". Two hosts of 5 CPU in one block (b1: r1/x2, r2/x1), quota 20 CPU: the quota fits
    /// the high-priority workload's 2 pods of 5 CPU, the block does not until both others go.
    #[test]
    fn a_higher_priority_workload_preempts_to_free_its_topology() {
        let nodes = vec![
            brh("b1", "r1", "x2", 5000, 5 * GI, 10),
            brh("b1", "r2", "x1", 5000, 5 * GI, 10),
        ];
        let mut c = preempting_core(nodes, three(), 20_000);
        let w = |name: &str, count: i64, prio: i32, at: i64| {
            WorkloadModel::build("ns", name, "cq")
                .podset(PodSetModel::build("worker", count, &[("cpu", 5000)]).with_topology(preferred(BLOCK)))
                .priority(prio)
                .at(at)
        };
        c.add_workload(w("wl1", 1, 1, 0)).unwrap();
        assert_eq!(c.schedule_cycle(1).admissions.len(), 1);
        c.add_workload(w("wl2", 1, 2, 1)).unwrap();
        assert_eq!(c.schedule_cycle(2).admissions.len(), 1);
        c.add_workload(w("wl3", 2, 3, 2)).unwrap();
        let res = c.schedule_cycle(3);
        assert_eq!(evicted(&res), vec!["wl1", "wl2"], "{res:?}");
        assert!(res.admissions.is_empty());
        // Not admitted while the victims still hold their hosts, and not evicted twice.
        let res = c.schedule_cycle(4);
        assert!(res.admissions.is_empty() && res.evictions.is_empty(), "{res:?}");
        c.release(&WorkloadKey::new("ns", "wl1"));
        c.release(&WorkloadKey::new("ns", "wl2"));
        let res = c.schedule_cycle(5);
        assert_eq!(res.admissions.len(), 1, "{res:?}");
        assert_eq!(res.admissions[0].key, WorkloadKey::new("ns", "wl3"));
    }

    /// A rack needed by a higher priority: only the lower-priority workload in the rack it needs is
    /// preempted (the fewest victims), not one in another rack; an equal priority is not preempted,
    /// and a podset no rack could hold even empty does not preempt at all.
    #[test]
    fn a_required_rack_preempts_only_inside_the_rack_it_frees() {
        let mut c = preempting_core(default_nodes(), two(), 100_000);
        let w = |name: &str, count: i64, prio: i32, at: i64| {
            wl(name, count, required(RACK)).priority(prio).at(at)
        };
        // low-a takes b1/r2 (3 CPU), low-b the rack with 2 (b2/r2).
        c.add_workload(w("low-a", 3, 1, 0)).unwrap();
        c.add_workload(w("low-b", 2, 1, 1)).unwrap();
        assert_eq!(c.schedule_cycle(1).admissions.len(), 2);
        // 3 pods in one rack: only b1/r2 can hold them, so low-a goes and low-b stays.
        c.add_workload(w("high", 3, 5, 2)).unwrap();
        let res = c.schedule_cycle(2);
        assert_eq!(evicted(&res), vec!["low-a"], "{res:?}");
        c.release(&WorkloadKey::new("ns", "low-a"));
        let res = c.schedule_cycle(3);
        assert_eq!(res.admissions.len(), 1, "{res:?}");
        let p = res.admissions[0].admission.pod_set_assignments[0]
            .topology
            .clone()
            .unwrap();
        assert_eq!(
            p.domains,
            vec![DomainAssignment {
                values: levels(&["b1", "r2"]),
                count: 3
            }]
        );
        // An equal priority does not preempt high: it waits, naming the topology.
        c.add_workload(w("peer", 3, 5, 3)).unwrap();
        let res = c.schedule_cycle(4);
        assert!(res.evictions.is_empty(), "{res:?}");
        let (reason, msg) = c.pending_reason(&WorkloadKey::new("ns", "peer")).unwrap();
        assert_eq!(reason, PendingReason::Pending);
        assert!(
            msg.contains(r#"topology "default" allows to fit only 1 out of 3 pod(s)"#),
            "{msg}"
        );
        // 4 pods in one rack fit no rack even empty: no preemption, Kueue's message.
        c.add_workload(w("huge", 4, 9, 4)).unwrap();
        let res = c.schedule_cycle(5);
        assert!(res.evictions.is_empty(), "{res:?}");
        let (reason, msg) = c.pending_reason(&WorkloadKey::new("ns", "huge")).unwrap();
        assert_eq!(reason, PendingReason::Pending);
        assert!(msg.contains("allows to fit only"), "{msg}");
    }

    #[test]
    fn a_podset_without_a_request_does_not_take_a_tas_flavor_unless_the_queue_is_tas_only() {
        // TAS-only ClusterQueue: placed as unconstrained (Kueue's implied TAS).
        let mut c = core(default_nodes());
        c.add_workload(
            WorkloadModel::build("ns", "plain", "cq").podset(PodSetModel::build("main", 2, &[("cpu", 1000)])),
        )
        .unwrap();
        let res = c.schedule_cycle(1);
        assert_eq!(res.admissions.len(), 1, "{res:?}");
        assert!(
            res.admissions[0].admission.pod_set_assignments[0]
                .topology
                .is_some()
        );
        // A podset asking for TAS where no flavor has a topology is refused by the flavor.
        let mut c = AdmissionCore::new();
        c.upsert_cluster_queue(ClusterQueueModel::build("cq").flavor("plain", &[("cpu", 100_000)]))
            .unwrap();
        c.upsert_flavor(FlavorModel::build("plain"));
        c.add_workload(wl("t", 1, required(RACK))).unwrap();
        c.schedule_cycle(1);
        let (_, msg) = c.pending_reason(&WorkloadKey::new("ns", "t")).unwrap();
        assert!(
            msg.contains(r#"Flavor "plain" does not support TopologyAwareScheduling"#),
            "{msg}"
        );
    }
}

// Kueue pkg/cache/scheduler/tas_flavor_snapshot_test.go, `TestTruncateAssignment`.
#[test]
fn truncation_keeps_the_first_pods_in_assignment_order() {
    let p = |d: &[(&str, i32)]| Placement {
        levels: levels(&[HOST]),
        domains: d
            .iter()
            .map(|(v, c)| DomainAssignment {
                values: levels(&[v]),
                count: *c,
            })
            .collect(),
    };
    let cases = [
        ("truncate to zero", p(&[("node-a", 2)]), 0, p(&[])),
        (
            "no truncation needed",
            p(&[("node-a", 2), ("node-b", 1)]),
            3,
            p(&[("node-a", 2), ("node-b", 1)]),
        ),
        (
            "truncate to single domain",
            p(&[("node-a", 3), ("node-b", 2)]),
            3,
            p(&[("node-a", 3)]),
        ),
        (
            "truncation preserves assignment order not lex order",
            p(&[("node-z", 3), ("node-a", 2)]),
            3,
            p(&[("node-z", 3)]),
        ),
        (
            "partial domain truncation",
            p(&[("node-a", 3), ("node-b", 3)]),
            4,
            p(&[("node-a", 3), ("node-b", 1)]),
        ),
        (
            "truncate within first domain",
            p(&[("node-a", 5), ("node-b", 3)]),
            2,
            p(&[("node-a", 2)]),
        ),
    ];
    for (name, have, count, want) in cases {
        assert_eq!(have.truncated(count), want, "{name}");
    }
}

/// Beyond Kueue (its `fillInCounts` filters by node selector only at hostname leaves): a podset
/// selecting a value of a topology level's label is placed only in that domain, on a topology whose
/// lowest level is not hostnames too. A RayService upgrade's slice pins its serving cluster so.
#[test]
fn a_node_selector_on_a_level_label_keeps_pods_in_that_domain() {
    let n = default_nodes();
    // Without the selector 3 pods go to b1/r2 (BestFit, as Kueue's "rack required; multiple Pods
    // fit in a rack; BestFit"); selecting block b2 leaves only b2/r2 (2 cpu) for the rack.
    let s = TasSnapshot::new("default", &two(), &n);
    let mut ps = podset(2, &[("cpu", 1000)]);
    ps.node_selector = [(BLOCK.to_string(), "b2".to_string())].into();
    let p = s.place(&ps, &required(RACK), false, 2).unwrap();
    let got: Vec<(String, i32)> = p.domains.iter().map(|d| (d.values.join("/"), d.count)).collect();
    assert_eq!(Ok(got), want(&[("b2/r2", 2)]));
    // Three pods fit in no rack of block b2; the two racks of b1 are left out by the selector.
    ps.count = 3;
    assert_eq!(
        s.place(&ps, &required(RACK), false, 3),
        Err(r#"topology "default" allows to fit only 2 out of 3 pod(s). Total nodes: 4; excluded: nodeSelector: 2"#.to_string())
    );
    // A selector on a label that is no level of the topology does not filter here.
    ps.node_selector = [("instance".to_string(), "spot".to_string())].into();
    assert!(s.place(&ps, &required(RACK), false, 3).is_ok());
}

/// A hostname-only placement of `pods` per host, as an admitted slice's assignment names it.
fn on_hosts(pods: &[(&str, i32)]) -> Placement {
    Placement {
        levels: levels(&[HOST]),
        domains: pods
            .iter()
            .map(|(h, n)| DomainAssignment {
                values: levels(&[h]),
                count: *n,
            })
            .collect(),
    }
}

fn domains(p: &Placement) -> Vec<(String, i32)> {
    p.domains.iter().map(|d| (d.values.join("/"), d.count)).collect()
}

// Ours: a replacement slice's podset merges the serving cluster's running pods with the pending
// cluster's new ones (a head without a topology request in a TAS-only ClusterQueue). The running
// pod is counted on its host, never moved, and only the new pod is placed.
#[test]
fn running_pods_of_a_merged_podset_stay_where_they_run_and_only_the_rest_is_placed() {
    let n = default_nodes();
    let s = TasSnapshot::new("default", &three(), &n);
    let mut ps = podset(2, &[("cpu", 1000)]);
    // Without running pods, two heads go to the hosts with least room first.
    let fresh = s.place(&ps, &TopologyRequest::default(), true, 2).unwrap();
    assert!(
        !domains(&fresh).contains(&("x4".to_string(), 1)),
        "{:?}",
        domains(&fresh)
    );
    // The serving head runs on x4: it stays counted there.
    ps.running = Some(on_hosts(&[("x4", 1)]));
    let p = s.place(&ps, &TopologyRequest::default(), true, 2).unwrap();
    assert_eq!(p.levels, levels(&[HOST]));
    let got = domains(&p);
    assert_eq!(got.iter().map(|(_, c)| c).sum::<i32>(), 2, "{got:?}");
    assert!(got.contains(&("x4".to_string(), 1)), "{got:?}");
    // A running pod takes its host's room: x3 holds one pod of 1 cpu, so the new one goes elsewhere.
    ps.running = Some(on_hosts(&[("x3", 1)]));
    let got = domains(&s.place(&ps, &TopologyRequest::default(), true, 2).unwrap());
    assert_eq!(got.iter().filter(|(h, _)| h == "x3").count(), 1, "{got:?}");
    assert!(got.contains(&("x3".to_string(), 1)), "{got:?}");
    // All pods running: nothing is placed anew.
    ps.running = Some(on_hosts(&[("x5", 1), ("x2", 1)]));
    let got = domains(&s.place(&ps, &TopologyRequest::default(), true, 2).unwrap());
    assert_eq!(got, want(&[("x5", 1), ("x2", 1)]).unwrap());
    // More running than the podset holds now: the first ones in assignment order.
    ps.count = 1;
    let got = domains(&s.place(&ps, &TopologyRequest::default(), true, 1).unwrap());
    assert_eq!(got, want(&[("x5", 1)]).unwrap());
}

// Kueue's `tas_cache_test.go` `TestFindTopologyAssignments` "elastic workload scale down: truncates
// assignment" and "elastic workload same count: reuses previous assignment exactly"
// (`tas_elastic_workloads.go` `handleScaleDown`), and `tas_flavor_snapshot_test.go`
// `TestTruncateAssignment` "truncation preserves assignment order not lex order": a slice whose podset
// has no more pods than its previous assignment keeps that assignment's first pods, in its order.
#[test]
fn a_shrinking_podset_keeps_its_first_pods_in_assignment_order() {
    let host = |h: &str| node(h, &[(HOST, h)], 4000, GI, 10);
    let n = vec![host("x1"), host("x2")];
    let s = TasSnapshot::new("default", &levels(&[HOST]), &n);
    let mut ps = podset(3, &[("cpu", 1000)]);
    let cases = [
        (
            "scale down: truncates",
            &[("x1", 3), ("x2", 2)],
            3,
            &[("x1", 3)][..],
        ),
        (
            "same count: reused exactly",
            &[("x1", 2), ("x2", 1)],
            3,
            &[("x1", 2), ("x2", 1)][..],
        ),
        (
            "assignment order, not lex order",
            &[("x2", 2), ("x1", 2)],
            3,
            &[("x2", 2), ("x1", 1)][..],
        ),
    ];
    for (name, previous, count, kept) in cases {
        ps.count = count;
        ps.running = Some(on_hosts(previous));
        let p = s.place(&ps, &unconstrained(), false, count).unwrap();
        assert_eq!(p.levels, levels(&[HOST]), "{name}");
        assert_eq!(Ok(domains(&p)), want(kept), "{name}");
    }
}

// Ours: a cluster asking for one rack, whose running pods an assignment names only by host. The
// rest joins them in their rack, or the podset does not fit: its running pods never move.
#[test]
fn the_rest_of_a_required_podset_joins_its_running_pods_rack_or_waits() {
    let n = default_nodes();
    let s = TasSnapshot::new("default", &three(), &n);
    let mut ps = podset(2, &[("cpu", 1000)]);
    // Without running pods BestFit picks b2/r2 (x4 holds 2).
    let fresh = s.place(&ps, &required(RACK), false, 2).unwrap();
    assert_eq!(domains(&fresh), want(&[("x4", 2)]).unwrap());
    // One pod runs on x5 (b1/r2): the other goes to x1 or x6 of that rack.
    ps.running = Some(on_hosts(&[("x5", 1)]));
    let got = domains(&s.place(&ps, &required(RACK), false, 2).unwrap());
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.contains(&("x5".to_string(), 1)), "{got:?}");
    assert!(
        got.iter().all(|(h, _)| ["x5", "x1", "x6"].contains(&h.as_str())),
        "{got:?}"
    );
    // One pod runs on x3, alone in b1/r1 and full: the other has no room in that rack.
    ps.running = Some(on_hosts(&[("x3", 1)]));
    assert_eq!(
        s.place(&ps, &required(RACK), false, 2),
        Err(r#"topology "default" doesn't allow to fit any of 1 pod(s). Total nodes: 6; excluded: outside the domain its running pods are in: 5, resource "cpu": 1"#.into())
    );
    // Preferred: the rest goes elsewhere rather than wait.
    let got = domains(&s.place(&ps, &preferred(RACK), false, 2).unwrap());
    assert!(got.contains(&("x3".to_string(), 1)), "{got:?}");
    assert_eq!(got.iter().map(|(_, c)| c).sum::<i32>(), 2, "{got:?}");
}

// Ours: a slices-only podset (slices of 2 in a rack, no podset level) merged across clusters:
// the serving cluster's slice stays in its rack, the new slice is placed whole.
#[test]
fn a_slices_only_podset_keeps_its_running_slice_and_places_the_new_one_whole() {
    let n = default_nodes();
    let s = TasSnapshot::new("default", &three(), &n);
    let mut ps = podset(4, &[("cpu", 1000)]);
    let req = TopologyRequest {
        slice_topology: Some(RACK.into()),
        slice_size: Some(2),
        ..Default::default()
    };
    // Without running pods the rack b1/r2 takes one slice on its first hosts (x1, x5).
    let fresh = domains(&s.place(&ps, &req, false, 4).unwrap());
    assert!(!fresh.contains(&("x6".to_string(), 1)), "{fresh:?}");
    ps.running = Some(on_hosts(&[("x5", 1), ("x6", 1)]));
    let got = domains(&s.place(&ps, &req, false, 4).unwrap());
    assert_eq!(got, want(&[("x5", 1), ("x6", 1), ("x4", 2)]).unwrap());
}

// Ours: the annotation a replacement slice's podset carries reads back, and bad values are refused
// with the reason, bounded by the podset's count before anything is decoded.
#[test]
fn the_running_annotation_round_trips_and_bad_values_are_refused() {
    use super::super::topology::{parse_running, running_annotation};
    let p = on_hosts(&[("x5", 2), ("x1", 1)]);
    assert_eq!(parse_running(&running_annotation(&p), 3), Ok(p.clone()));
    assert_eq!(
        parse_running(&running_annotation(&p), 2),
        Err("holds 3 pods, more than the podset's 2".into())
    );
    let huge = r#"{"levels":["kubernetes.io/hostname"],"slices":[{"domainCount":2000000000,"valuesPerLevel":[{"universal":"x"}],"podCounts":{"universal":1}}]}"#;
    assert_eq!(
        parse_running(huge, 4),
        Err("names 2000000000 domains, more than the podset's 4 pods".into())
    );
    assert!(
        parse_running("{", 4)
            .unwrap_err()
            .starts_with("not a topologyAssignment")
    );
    assert_eq!(
        parse_running(r#"{"levels":[],"slices":[]}"#, 4),
        Err("names no levels".into())
    );
}

// Ours: a replacement slice's podsets with running pods are placed first, so a new podset listed
// before them never takes the room their pods hold. Here the new cluster's 3 workers would take
// b1/r2 (the only rack holding 3) where the serving cluster's 2 workers run: it must wait instead.
#[test]
fn podsets_with_running_pods_hold_their_domains_before_new_ones_are_placed() {
    use crate::queue::model::{FlavorModel, PodSetAssignment, WorkloadModel};
    let c = TasCluster::new([("default".to_string(), two())].into(), default_nodes());
    let flavors: BTreeMap<String, FlavorModel> = [(
        "tas".to_string(),
        FlavorModel::build("tas").with_topology("default"),
    )]
    .into();
    let mut serving = PodSetModel::build("serving", 2, &[("cpu", 1000)]).with_topology(required(RACK));
    serving.running = Some(Placement {
        levels: two(),
        domains: vec![DomainAssignment {
            values: levels(&["b1", "r2"]),
            count: 2,
        }],
    });
    let w = WorkloadModel::build("ns", "second", "cq")
        .podset(PodSetModel::build("pending", 3, &[("cpu", 1000)]).with_topology(required(RACK)))
        .podset(serving);
    let psa = |name: &str, count: i64| PodSetAssignment {
        name: name.into(),
        flavors: [("cpu".to_string(), "tas".to_string())].into(),
        count,
        ..Default::default()
    };
    let mut podsets = vec![psa("pending", 3), psa("serving", 2)];
    let got = c.place_workload(&flavors, false, &w, &mut podsets, std::iter::empty());
    assert_eq!(
        got,
        Err(r#"couldn't assign flavors to pod set pending: topology "default" allows to fit only 2 out of 3 pod(s)"#.into())
    );
    // With the serving cluster's rack left alone, 2 new workers fit beside it in b2/r2.
    let w = WorkloadModel {
        podsets: vec![
            PodSetModel::build("pending", 2, &[("cpu", 1000)]).with_topology(required(RACK)),
            w.podsets[1].clone(),
        ],
        ..w
    };
    let mut podsets = vec![psa("pending", 2), psa("serving", 2)];
    c.place_workload(&flavors, false, &w, &mut podsets, std::iter::empty())
        .unwrap();
    let at = |i: usize| podsets[i].topology.as_ref().map(domains);
    assert_eq!(at(0), Some(want(&[("b2/r2", 2)]).unwrap()));
    assert_eq!(at(1), Some(want(&[("b1/r2", 2)]).unwrap()));
}
