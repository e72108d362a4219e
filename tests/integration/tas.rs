//! Topology-aware scheduling end to end on the embedded cluster with nodes in racks: a Topology, a
//! ResourceFlavor naming it, and batch Jobs whose pod template asks for
//! `kueue.x-k8s.io/podset-required-topology`. Kueue: test/integration/singlecluster/tas/tas_test.go,
//! "should admit workload which fits in a required topology domain" and "should not admit workload
//! which does not fit to the required topology domain"; here the pods then run, inside the rack.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use quotagate::api::kueue::constants::label;
use quotagate::api::kueue::tas::{
    REQUIRED_TOPOLOGY, TOPOLOGY_SCHEDULING_GATE, WORKLOAD_ANNOTATION, decode_assignment,
};
use quotagate::api::kueue::{
    ClusterQueue, ResourceFlavor, Topology, TopologyLevel, TopologySpec, Workload, WorkloadPriorityClass,
};
use quotagate::embedded::sim::{self, SimConfig, node, nodes};
use quotagate::jobframework::names::NameLength;
use quotagate::jobframework::workload::workload_name_for_job;
use quotagate::jobs::batch::BatchJob;

use crate::support::*;

const RACK: &str = "cloud.provider.com/topology-rack";

fn job(name: &str, pods: i32, command: &str) -> Job {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {label::QUEUE_NAME: "lq"}},
        "spec": {"parallelism": pods, "completions": pods, "template": {
            "metadata": {"annotations": {REQUIRED_TOPOLOGY: RACK}},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox", "command": ["sh", "-c", command],
                 "resources": {"requests": {"cpu": "1"}}}]}}}
    }))
    .unwrap()
}

/// The Workload name of the batch Job `name` in `default`.
pub(crate) async fn workload_of(c: &Cluster, name: &str) -> String {
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let stored = jobs.get(name).await.unwrap();
    workload_name_for_job(&BatchJob::new(stored), NameLength::Long).unwrap()
}

/// Waits for Workload `name` to be pending with QuotaReserved=False naming the topology.
pub(crate) async fn pending_on_topology(wls: &Api<Workload>, name: &str) -> Workload {
    wait_for(
        wls,
        name,
        "pending with a reason naming the topology",
        |w: &Workload| {
            condition(w, "QuotaReserved").is_some_and(|(s, _, m)| s == "False" && m.contains("topology"))
        },
    )
    .await
}

/// A cluster with rack-a (two nodes of 2 cpu) and rack-b (one node of 2 cpu), all in the flavor's
/// node group, a Topology of `levels`, the TAS flavor naming it, and `lq` -> `cq`. The node agent runs
/// until the returned guard drops.
async fn racks(levels: &[&str]) -> (Cluster, tokio_util::sync::DropGuard) {
    racks_with(levels, None).await
}

/// [`racks`] with the ClusterQueue's `spec.preemption`.
async fn racks_with(
    levels: &[&str],
    preemption: Option<serde_json::Value>,
) -> (Cluster, tokio_util::sync::DropGuard) {
    let c = Cluster::start(Limits::default().cq("cq", 100_000)).await;
    let pools = vec![
        nodes::parse_pool(&format!(
            "name=rack-a,count=2,capacity=cpu=2,labels={RACK}=rack-a;group=tas"
        ))
        .unwrap(),
        nodes::parse_pool(&format!(
            "name=rack-b,count=1,capacity=cpu=2,labels={RACK}=rack-b;group=tas"
        ))
        .unwrap(),
    ];
    let list = nodes::expand(&pools, "sim-node").unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    sim::spawn(
        c.client.clone(),
        &SimConfig {
            node: Some(node::NodeAgentConfig {
                nodes: list.into_iter().map(|(n, p)| (n, p.clone())).collect(),
                ..Default::default()
            }),
            gateway: None,
            endpoints: false,
        },
        cancel.clone(),
    );
    // The node agent registers its nodes in the background: a test that reads the nodes (or
    // expects a domain's room) must not race it, least of all on a loaded machine.
    let nodes: Api<Node> = Api::all(c.client.clone());
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while nodes
        .list(&ListParams::default().labels("group=tas"))
        .await
        .unwrap()
        .items
        .len()
        < 3
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the node agent's three nodes not registered"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let topologies: Api<Topology> = Api::all(c.client.clone());
    topologies
        .create(
            &PostParams::default(),
            &Topology::new(
                "default",
                TopologySpec {
                    levels: levels
                        .iter()
                        .map(|l| TopologyLevel {
                            node_label: l.to_string(),
                        })
                        .collect(),
                },
            ),
        )
        .await
        .unwrap();
    let rf: Api<ResourceFlavor> = Api::all(c.client.clone());
    rf.create(
        &PostParams::default(),
        &ResourceFlavor::build("tas-flavor")
            .node_label("group", "tas")
            .topology("default")
            .build(),
    )
    .await
    .unwrap();
    let mut cq = ClusterQueue::build("cq")
        .flavor("tas-flavor", [("cpu", "100")])
        .build();
    cq.spec.preemption = preemption.map(|p| serde_json::from_value(p).unwrap());
    c.cluster_queue(with_all_namespaces(cq)).await;
    c.local_queue("lq", "cq").await;
    (c, cancel.drop_guard())
}

/// rack-a: two nodes of 2 cpu; rack-b: one node of 2 cpu; all in the flavor's node group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_rack_lands_in_one_rack_or_waits_naming_why() {
    let (c, _sims) = racks(&[RACK]).await;
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let wls = c.workloads();

    // 4 pods of 1 cpu: only rack-a (4 cpu) holds them all.
    jobs.create(&PostParams::default(), &job("big", 4, "sleep 4"))
        .await
        .unwrap();
    let big = workload_of(&c, "big").await;
    let wl = wait_for(&wls, &big, "admitted", |w: &Workload| reserved(w)).await;
    let psa = &wl.admission().unwrap().pod_set_assignments[0];
    let ta = psa.topology_assignment.as_ref().expect("a topologyAssignment");
    assert_eq!(ta.levels, vec![RACK.to_string()]);
    let domains = decode_assignment(ta);
    assert_eq!(domains.len(), 1, "{ta:?}");
    assert_eq!((domains[0].values[0].as_str(), domains[0].count), ("rack-a", 4));

    // Its pods run with the rack's node selector, on rack-a's nodes only.
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let rack_a: Vec<String> = {
        let nodes: Api<Node> = Api::all(c.client.clone());
        nodes
            .list(&ListParams::default().labels(&format!("{RACK}=rack-a")))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect()
    };
    assert_eq!(rack_a.len(), 2);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let list = pods
            .list(&ListParams::default().labels("batch.kubernetes.io/job-name=big"))
            .await
            .unwrap();
        let bound: Vec<String> = list
            .items
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        if bound.len() == 4 {
            for p in &list.items {
                let spec = p.spec.as_ref().unwrap();
                assert_eq!(
                    spec.node_selector
                        .as_ref()
                        .and_then(|s| s.get(RACK))
                        .map(String::as_str),
                    Some("rack-a"),
                    "pod {:?}",
                    p.metadata.name
                );
            }
            assert!(
                bound.iter().all(|n| rack_a.contains(n)),
                "{bound:?} outside {rack_a:?}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "pods of big not all bound: {bound:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // 3 more pods: rack-a is full, rack-b holds 2; quota is ample, the rack is not.
    jobs.create(&PostParams::default(), &job("next", 3, "sleep 1"))
        .await
        .unwrap();
    let next = workload_of(&c, "next").await;
    let wl = pending_on_topology(&wls, &next).await;
    let (_, reason, message) = condition(&wl, "QuotaReserved").unwrap();
    assert_eq!(reason, "Pending");
    assert_eq!(
        message,
        r#"couldn't assign flavors to pod set main: topology "default" allows to fit only 2 out of 3 pod(s). Total nodes: 2; excluded: resource "cpu": 1"#
    );
    let j = jobs.get("next").await.unwrap();
    assert_eq!(j.spec.unwrap().suspend, Some(true), "the Job waits suspended");

    // When big finishes, rack-a is free again and next lands there.
    let wl = wait_for(&wls, &next, "admitted after big finished", |w: &Workload| {
        reserved(w)
    })
    .await;
    let ta = wl.admission().unwrap().pod_set_assignments[0]
        .topology_assignment
        .clone()
        .unwrap();
    let domains = decode_assignment(&ta);
    assert_eq!(domains.len(), 1);
    assert_eq!((domains[0].values[0].as_str(), domains[0].count), ("rack-a", 3));
}

/// Kueue's topology ungater (pkg/controller/tas/topology_ungater.go; its integration counterpart is
/// tas_test.go "should admit workload which fits in a required topology domain", checking the pods'
/// node selectors): with hostnames as the lowest level, the assignment names single nodes; the Job's
/// pods are created behind the `kueue.x-k8s.io/topology` gate and let through one by one with their
/// node's hostname, exactly as many per node as the assignment says, so each lands on its node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_ungated_onto_the_nodes_of_their_assigned_domain() {
    const HOST: &str = "kubernetes.io/hostname";
    let (c, _sims) = racks(&[RACK, HOST]).await;
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let wls = c.workloads();
    jobs.create(&PostParams::default(), &job("spread", 3, "sleep 30"))
        .await
        .unwrap();
    let name = workload_of(&c, "spread").await;
    let wl = wait_for(&wls, &name, "admitted", |w: &Workload| reserved(w)).await;
    let ta = wl.admission().unwrap().pod_set_assignments[0]
        .topology_assignment
        .clone()
        .expect("a topologyAssignment");
    assert_eq!(
        ta.levels,
        vec![HOST.to_string()],
        "only the lowest level, hostnames"
    );
    let mut assigned: std::collections::BTreeMap<String, usize> = decode_assignment(&ta)
        .into_iter()
        .map(|d| (d.values[0].clone(), d.count as usize))
        .collect();
    assert_eq!(assigned.values().sum::<usize>(), 3);

    // The running Job's template carries the gate and names the Workload.
    let started = wait_for(&jobs, "spread", "started", |j: &Job| {
        j.spec.as_ref().is_some_and(|s| s.suspend == Some(false))
    })
    .await;
    let template = started.spec.unwrap().template;
    let gates: Vec<String> = template
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.name)
        .collect();
    assert_eq!(gates, vec![TOPOLOGY_SCHEDULING_GATE.to_string()]);
    assert_eq!(
        template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(WORKLOAD_ANNOTATION)),
        Some(&name)
    );

    let rack_a: Vec<String> = Api::<Node>::all(c.client.clone())
        .list(&ListParams::default().labels(&format!("{RACK}=rack-a")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(
        assigned.keys().all(|h| rack_a.contains(h)),
        "{assigned:?} outside rack-a {rack_a:?}"
    );
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let bound = loop {
        let list = pods
            .list(&ListParams::default().labels("batch.kubernetes.io/job-name=spread"))
            .await
            .unwrap()
            .items;
        let bound: Vec<(String, String, Vec<String>)> = list
            .iter()
            .filter_map(|p| {
                let spec = p.spec.as_ref()?;
                Some((
                    spec.node_name.clone()?,
                    spec.node_selector.as_ref()?.get(HOST)?.clone(),
                    spec.scheduling_gates
                        .iter()
                        .flatten()
                        .map(|g| g.name.clone())
                        .collect(),
                ))
            })
            .collect();
        if bound.len() == 3 {
            break bound;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "pods of spread not all bound with a hostname selector: {list:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    for (node, selected, gates) in &bound {
        assert_eq!(node, selected, "each pod runs on the node its selector names");
        assert!(gates.is_empty(), "{gates:?}");
        let left = assigned.get_mut(node).expect("a node of the assignment");
        assert!(*left > 0, "more pods on {node} than assigned: {bound:?}");
        *left -= 1;
    }
    assert!(assigned.values().all(|n| *n == 0), "{assigned:?}");
}

/// Kueue's TAS preemption (tas_test.go "Preemption is enabled within ClusterQueue"), with real pods:
/// a high-priority Job needing a whole rack of 4 CPU preempts the low-priority Job holding rack-a,
/// not the one in rack-b (which could never hold it), and then runs inside rack-a.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_job_preempts_the_rack_it_needs() {
    let (c, _sims) = racks_with(
        &[RACK],
        Some(serde_json::json!({"withinClusterQueue": "LowerPriority"})),
    )
    .await;
    Api::<WorkloadPriorityClass>::all(c.client.clone())
        .create(
            &PostParams::default(),
            &quotagate::api::kueue::builders::workload_priority_class("high", 1000),
        )
        .await
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let wls = c.workloads();
    jobs.create(&PostParams::default(), &job("low-a", 4, "sleep 3600"))
        .await
        .unwrap();
    let low_a = workload_of(&c, "low-a").await;
    wait_for(&wls, &low_a, "admitted", |w: &Workload| reserved(w)).await;
    jobs.create(&PostParams::default(), &job("low-b", 2, "sleep 3600"))
        .await
        .unwrap();
    let low_b = workload_of(&c, "low-b").await;
    wait_for(&wls, &low_b, "admitted", |w: &Workload| reserved(w)).await;

    let mut high = job("high", 4, "sleep 3600");
    high.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(label::PRIORITY_CLASS.to_string(), "high".to_string());
    jobs.create(&PostParams::default(), &high).await.unwrap();
    let high = workload_of(&c, "high").await;
    wait_for(&wls, &low_a, "preempted", |w: &Workload| {
        condition(w, "Evicted").is_some_and(|(s, r, _)| s == "True" && r == "Preempted")
    })
    .await;
    let wl = wait_for(&wls, &high, "admitted after low-a left", |w: &Workload| {
        reserved(w)
    })
    .await;
    let ta = wl.admission().unwrap().pod_set_assignments[0]
        .topology_assignment
        .clone()
        .unwrap();
    let domains = decode_assignment(&ta);
    assert_eq!(domains.len(), 1);
    assert_eq!((domains[0].values[0].as_str(), domains[0].count), ("rack-a", 4));
    let b = wls.get(&low_b).await.unwrap();
    assert!(reserved(&b), "low-b in rack-b is not preempted");
    assert!(condition(&b, "Evicted").is_none_or(|(s, _, _)| s != "True"));
    // high's pods run in rack-a.
    let rack_a: Vec<String> = Api::<Node>::all(c.client.clone())
        .list(&ListParams::default().labels(&format!("{RACK}=rack-a")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let bound: Vec<String> = pods
            .list(&ListParams::default().labels("batch.kubernetes.io/job-name=high"))
            .await
            .unwrap()
            .items
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        if bound.len() == 4 {
            assert!(
                bound.iter().all(|n| rack_a.contains(n)),
                "{bound:?} outside {rack_a:?}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "high's pods not all bound: {bound:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Kueue's tas_test.go, "non-TAS pod exists": "non-TAS pod is deleted, releasing capacity". A pod TAS
/// did not place (no topology annotation) bound to a rack-a node takes that node's room: 3 pods of 1
/// cpu fit in no rack while it runs, and land in rack-a once it is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_tas_pod_takes_its_nodes_room_until_it_is_gone() {
    let (c, _sims) = racks(&[RACK]).await;
    let rack_a: Vec<String> = Api::<Node>::all(c.client.clone())
        .list(&ListParams::default().labels(&format!("{RACK}=rack-a")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(rack_a.len(), 2);
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let web: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"nodeName": rack_a[0], "terminationGracePeriodSeconds": 0, "containers": [
            {"name": "c", "image": "busybox", "command": ["sh", "-c", "sleep 600"],
             "resources": {"requests": {"cpu": "2"}}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &web).await.unwrap();

    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let wls = c.workloads();
    jobs.create(&PostParams::default(), &job("three", 3, "sleep 1"))
        .await
        .unwrap();
    let three = workload_of(&c, "three").await;
    let wl = pending_on_topology(&wls, &three).await;
    let (_, _, message) = condition(&wl, "QuotaReserved").unwrap();
    assert!(
        message.contains(r#"topology "default" allows to fit only 2 out of 3 pod(s)"#),
        "{message}"
    );

    pods.delete("web", &kube::api::DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let wl = wait_for(&wls, &three, "admitted once web is gone", |w: &Workload| {
        reserved(w)
    })
    .await;
    let ta = wl.admission().unwrap().pod_set_assignments[0]
        .topology_assignment
        .clone()
        .unwrap();
    let domains = decode_assignment(&ta);
    assert_eq!(domains.len(), 1, "{ta:?}");
    assert_eq!((domains[0].values[0].as_str(), domains[0].count), ("rack-a", 3));
}

/// Ours (Kueue reads a replacement slice's previous assignment from the slice it replaces, never
/// from an annotation): a Workload anyone could write, claiming to replace a slice that does not
/// exist and naming 2 "running" pods in rack-a, which `big` fills. The claim is not trusted: its pods
/// are placed as anyone's, in rack-b, not counted into the full rack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_pods_claim_on_a_slice_replacing_nothing_takes_no_room() {
    use quotagate::api::kueue::tas::{DomainAssignment, encode_assignment};
    use quotagate::queue::topology::ANNOTATION_TOPOLOGY_RUNNING;
    let (c, _sims) = racks(&[RACK]).await;
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    let wls = c.workloads();
    jobs.create(&PostParams::default(), &job("big", 4, "sleep 600"))
        .await
        .unwrap();
    let big = workload_of(&c, "big").await;
    wait_for(&wls, &big, "admitted", |w: &Workload| reserved(w)).await;

    let claim = encode_assignment(
        &[RACK.to_string()],
        &[DomainAssignment {
            values: vec!["rack-a".into()],
            count: 2,
        }],
    );
    let mut wl = Workload::build("claims", "default")
        .queue("lq")
        .annotation(label::WORKLOAD_SLICE_REPLACEMENT_FOR, "default/ghost")
        .podset("main", 2, [("cpu", "1")])
        .build();
    wl.spec.pod_sets[0].template.metadata = Some(kube::api::ObjectMeta {
        annotations: Some(
            [
                (REQUIRED_TOPOLOGY.to_string(), RACK.to_string()),
                (
                    ANNOTATION_TOPOLOGY_RUNNING.to_string(),
                    serde_json::to_string(&claim).unwrap(),
                ),
            ]
            .into(),
        ),
        ..Default::default()
    });
    wls.create(&PostParams::default(), &wl).await.unwrap();
    let wl = wait_for(&wls, "claims", "admitted", |w: &Workload| reserved(w)).await;
    let ta = wl.admission().unwrap().pod_set_assignments[0]
        .topology_assignment
        .clone()
        .unwrap();
    let domains = decode_assignment(&ta);
    assert_eq!(domains.len(), 1, "{ta:?}");
    assert_eq!((domains[0].values[0].as_str(), domains[0].count), ("rack-b", 2));
}
