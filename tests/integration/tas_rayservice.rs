//! A quota-gated RayService upgrade under topology-aware scheduling (issue 65, "Go beyond Kueue where
//! Ray needs it"), end to end on the embedded cluster with the real manager, the Ray operator and nodes
//! in two racks. The worker group asks for `kueue.x-k8s.io/podset-required-topology: <rack>`; the
//! upgrade's slice asks for the same, so the pending cluster runs no pod until one rack has room for
//! all its workers, and then runs them inside that rack. Kueue's counterparts are tas_test.go "should
//! not admit workload which does not fit to the required topology domain" (the wait) and "should admit
//! workload which fits in a required topology domain" (the placement), applied to the upgrade's slice.

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use quotagate::api::kueue::constants::label;
use quotagate::api::kueue::tas::REQUIRED_TOPOLOGY;
use quotagate::api::kueue::{ClusterQueue, ResourceFlavor, Topology, TopologyLevel, TopologySpec, Workload};
use quotagate::api::ray::{RayCluster, RayService};
use quotagate::embedded::sim::{SimConfig, node, nodes};
use quotagate::queue::topology::{ANNOTATION_TOPOLOGY_RUNNING, parse_running};
use serde_json::json;

use super::gated::{active, pending, ready};
use super::invariants::Invariants;
use super::support::*;

const RACK: &str = "cloud.provider.com/topology-rack";
const NS: &str = "default";

/// A RayService whose head asks memory only (it fits anywhere) and whose 3 workers of 1 CPU each
/// must share one rack.
fn service(version: &str) -> RayService {
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "rs", "namespace": NS, "labels": {label::QUEUE_NAME: "lq"}},
        "spec": {
            "rayClusterDeletionDelaySeconds": 1,
            "serveConfigV2": "applications:\n  - name: app\n    import_path: app.graph\n    route_prefix: /\n    deployments:\n      - name: D\n        num_replicas: 1\n",
            "rayClusterConfig": {
                "rayVersion": version,
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head",
                    "image": format!("rayproject/ray:{version}"), "resources": {"requests": {"memory": "1Gi"}}}]}}},
                "workerGroupSpecs": [{"groupName": "workers", "replicas": 3, "minReplicas": 3, "maxReplicas": 3,
                    "rayStartParams": {},
                    "template": {
                        "metadata": {"annotations": {REQUIRED_TOPOLOGY: RACK}},
                        "spec": {"containers": [{"name": "ray-worker", "image": format!("rayproject/ray:{version}"),
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}]
            }
        }
    }))
    .unwrap()
}

/// A batch Job of `pods` pods of 1 CPU, all in one rack.
fn blocker(pods: i32) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "blocker", "namespace": NS, "labels": {label::QUEUE_NAME: "lq"}},
        "spec": {"parallelism": pods, "completions": pods, "template": {
            "metadata": {"annotations": {REQUIRED_TOPOLOGY: RACK}},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox", "command": ["sh", "-c", "sleep 3600"],
                 "resources": {"requests": {"cpu": "1"}}}]}}}
    }))
    .unwrap()
}

/// rack-a and rack-b, two nodes of 2 CPU each, in the TAS flavor's node group; Topology `default`
/// of the rack level; ClusterQueue `cq` (ample quota: only the racks constrain) and `lq`.
async fn two_racks() -> Cluster {
    let pools = vec![
        nodes::parse_pool(&format!(
            "name=rack-a,count=2,capacity=cpu=2,labels={RACK}=rack-a;group=tas"
        ))
        .unwrap(),
        nodes::parse_pool(&format!(
            "name=rack-b,count=2,capacity=cpu=2,labels={RACK}=rack-b;group=tas"
        ))
        .unwrap(),
    ];
    let list = nodes::expand(&pools, "sim-node").unwrap();
    let sims = SimConfig {
        node: Some(node::NodeAgentConfig {
            nodes: list.into_iter().map(|(n, p)| (n, p.clone())).collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let c = Cluster::start_with_ray_sims(
        quotagate::wiring::manager::embedded_server(),
        Limits::default().cq("cq", 100_000),
        sims,
    )
    .await;
    Api::<Topology>::all(c.client.clone())
        .create(
            &PostParams::default(),
            &Topology::new(
                "default",
                TopologySpec {
                    levels: vec![TopologyLevel {
                        node_label: RACK.to_string(),
                    }],
                },
            ),
        )
        .await
        .unwrap();
    Api::<ResourceFlavor>::all(c.client.clone())
        .create(
            &PostParams::default(),
            &ResourceFlavor::build("tas-flavor")
                .node_label("group", "tas")
                .topology("default")
                .build(),
        )
        .await
        .unwrap();
    let cq = ClusterQueue::build("cq")
        .flavor("tas-flavor", [("cpu", "100"), ("memory", "1000Gi")])
        .build();
    c.cluster_queue(with_all_namespaces(cq)).await;
    c.local_queue("lq", "cq").await;
    c
}

/// Waits for `f` (polled every 200 ms, up to 120 s: the machine may be loaded); on timeout fails
/// with the state of the namespace's Workloads and pods.
async fn poll<T, F, Fut>(c: &Cluster, what: &str, f: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if std::time::Instant::now() >= deadline {
            panic!("timed out waiting for {what}:\n{}", state(c).await);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The Workloads (conditions and topology assignments) and pods (node, gates, selector) of the
/// namespace, for a failure message.
async fn state(c: &Cluster) -> String {
    let mut out = String::new();
    for w in c.workloads().list(&ListParams::default()).await.unwrap().items {
        let conds: Vec<String> = w
            .status
            .as_ref()
            .map(|s| {
                s.conditions
                    .iter()
                    .map(|c| format!("{}={} {}", c.type_, c.status, c.message))
                    .collect()
            })
            .unwrap_or_default();
        let ta: Vec<String> = w
            .admission()
            .map(|a| {
                a.pod_set_assignments
                    .iter()
                    .map(|p| format!("{}: {:?}", p.name, p.topology_assignment))
                    .collect()
            })
            .unwrap_or_default();
        out.push_str(&format!("workload {}: {conds:?} {ta:?}\n", w.name_any()));
    }
    for r in Api::<RayService>::namespaced(c.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        let status = serde_json::to_string(&r.status).unwrap_or_default();
        out.push_str(&format!("rayservice {}: {status}\n", r.name_any()));
    }
    for rc in Api::<RayCluster>::namespaced(c.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        let status = serde_json::to_string(&rc.status).unwrap_or_default();
        out.push_str(&format!(
            "raycluster {}: suspend {:?} {status}\n",
            rc.name_any(),
            rc.spec.suspend
        ));
    }
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        let spec = p.spec.clone().unwrap_or_default();
        let status = p.status.clone().unwrap_or_default();
        let conds: Vec<String> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| format!("{}={}", c.type_, c.status))
            .collect();
        out.push_str(&format!(
            "pod {}: node {:?} gates {:?} selector {:?} phase {:?} conditions {conds:?}\n",
            p.name_any(),
            spec.node_name,
            spec.scheduling_gates.map(|g| g.len()),
            spec.node_selector,
            status.phase
        ));
    }
    out
}

/// Node name -> its rack.
async fn racks_of_nodes(c: &Cluster) -> std::collections::BTreeMap<String, String> {
    Api::<Node>::all(c.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| {
            let rack = n.labels().get(RACK)?.clone();
            Some((n.name_any(), rack))
        })
        .collect()
}

/// The racks the bound pods selected by `selector` run in, once `want` of them are bound. The
/// nodes are read after the pods: the node agent registers its nodes in the background, and a map
/// read before a pod's node was registered named it "no rack" (seen in a CI rehearsal).
async fn racks_of(c: &Cluster, selector: &str, want: usize) -> BTreeSet<String> {
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let bound = poll(c, &format!("{want} bound pods of {selector}"), || async {
        let bound: Vec<String> = pods
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.spec?.node_name)
            .collect();
        (bound.len() == want).then_some(bound)
    })
    .await;
    let by_node = racks_of_nodes(c).await;
    bound
        .iter()
        .map(|n| by_node.get(n).cloned().unwrap_or_else(|| format!("no rack: {n}")))
        .collect()
}

fn message_of(
    conditions: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
    type_: &str,
) -> String {
    conditions
        .into_iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// Issue 65's done-when "a gated RayService upgrade with a required topology waits until one domain
/// has room, then completes with every new pod inside it". A blocker Job holds 3 CPU of one rack;
/// the serving cluster's 3 workers take the other rack; the upgrade's 3 new workers fit in neither
/// (1 CPU left in each), so the pending cluster runs no pod and the RayService and the held
/// RayCluster say which level has no room. Once the blocker is deleted its rack has room: the
/// upgrade is admitted there, traffic moves, and every new worker runs inside that one rack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_upgrade_with_a_required_rack_waits_for_one_then_runs_inside_it() {
    let c = two_racks().await;
    let inv = Invariants::start(c.client.clone());
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), NS);
    jobs.create(&PostParams::default(), &blocker(3)).await.unwrap();
    let held = racks_of(&c, "batch.kubernetes.io/job-name=blocker", 3).await;
    assert_eq!(held.len(), 1, "the blocker runs in one rack: {held:?}");

    let services: Api<RayService> = Api::namespaced(c.client.clone(), NS);
    let clusters: Api<RayCluster> = Api::namespaced(c.client.clone(), NS);
    services
        .create(&PostParams::default(), &service("2.46.0"))
        .await
        .unwrap();
    let rs = poll(&c, "the service to serve", || async {
        services
            .get_opt("rs")
            .await
            .unwrap()
            .filter(|r| ready(r) && active(r).is_some())
    })
    .await;
    let old = active(&rs).unwrap();
    let serving = racks_of(&c, &format!("ray.io/cluster={old},ray.io/node-type=worker"), 3).await;
    assert_eq!(
        serving.len(),
        1,
        "the serving workers share one rack: {serving:?}"
    );
    assert!(
        serving.is_disjoint(&held),
        "{serving:?} is the blocker's {held:?}"
    );

    // The upgrade: 3 new workers fit in no rack (1 CPU free in each).
    let patch = json!({"spec": {"rayClusterConfig": {"rayVersion": "2.47.0"}}});
    services
        .patch(
            "rs",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let rs = poll(&c, "a pending cluster", || async {
        services
            .get_opt("rs")
            .await
            .unwrap()
            .filter(|r| pending(r).is_some())
    })
    .await;
    let new = pending(&rs).unwrap();
    let rs = poll(&c, "the service to name the rack level", || async {
        services.get_opt("rs").await.unwrap().filter(|r| {
            message_of(
                r.status.as_ref().and_then(|s| s.conditions.as_ref()),
                "UpgradeInProgress",
            )
            .contains(&format!("no {RACK} domain has room"))
        })
    })
    .await;
    let said = message_of(
        rs.status.as_ref().and_then(|s| s.conditions.as_ref()),
        "UpgradeInProgress",
    );
    assert!(
        said.contains("is gated: waiting for workload slice")
            && said.contains(r#"topology "default" allows to fit only 1 out of 3 pod(s)"#),
        "{said}"
    );
    assert_eq!(active(&rs).as_deref(), Some(old.as_str()));
    let gated = poll(&c, "the held cluster to name the rack level", || async {
        clusters.get_opt(&new).await.unwrap().filter(|rc| {
            message_of(
                rc.status.as_ref().and_then(|s| s.conditions.as_ref()),
                "QuotaGated",
            )
            .contains(&format!("one domain of topology level {RACK}"))
        })
    })
    .await;
    assert_eq!(gated.spec.suspend, Some(true), "born held");
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), NS);
    let new_pods = || async {
        pods.list(&ListParams::default().labels(&format!("ray.io/cluster={new}")))
            .await
            .unwrap()
            .items
            .len()
    };
    assert_eq!(new_pods().await, 0, "a gated cluster runs no pod");
    // The slice asks for the rack: its podset for the new workers carries the request.
    let wls: Vec<Workload> = c
        .workloads()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|w| w.owner_references().iter().any(|o| o.kind == "RayService"))
        .filter(|w| !w.is_finished() && !reserved(w))
        .collect();
    assert_eq!(wls.len(), 1, "one pending slice");
    // Its podsets name the serving cluster's pods where they run: the head (one podset of both
    // clusters' heads, implied unconstrained in this TAS-only ClusterQueue) and the serving workers.
    let head_rack = racks_of(&c, &format!("ray.io/cluster={old},ray.io/node-type=head"), 1).await;
    let mut running: Vec<(i32, Vec<(String, i32)>)> = wls[0]
        .spec
        .pod_sets
        .iter()
        .filter_map(|p| {
            let value = p
                .template
                .metadata
                .as_ref()?
                .annotations
                .as_ref()?
                .get(ANNOTATION_TOPOLOGY_RUNNING)?;
            let placed = parse_running(value, i64::from(p.count())).unwrap();
            let domains = placed
                .domains
                .iter()
                .map(|d| (d.values.join("/"), d.count))
                .collect();
            Some((p.count(), domains))
        })
        .collect();
    running.sort();
    let rack = |r: &BTreeSet<String>| r.iter().next().cloned().unwrap_or_default();
    assert_eq!(
        running,
        vec![(2, vec![(rack(&head_rack), 1)]), (3, vec![(rack(&serving), 3)])],
        "the serving head and workers are named where they run: {}",
        state(&c).await
    );
    let asks: Vec<Option<String>> = wls[0]
        .spec
        .pod_sets
        .iter()
        .map(|p| p.topology_request.as_ref().and_then(|r| r.required.clone()))
        .collect();
    assert_eq!(
        asks.iter().filter(|r| r.as_deref() == Some(RACK)).count(),
        2,
        "the serving and the pending workers each ask for one rack: {asks:?}"
    );
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(new_pods().await, 0, "still no pod while no rack has room");

    // Room: the blocker's rack frees up; the upgrade lands there and completes.
    jobs.delete(
        "blocker",
        &DeleteParams {
            propagation_policy: Some(kube::api::PropagationPolicy::Foreground),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let moved =
        tokio::time::timeout(
            std::time::Duration::from_secs(110),
            poll(&c, "traffic on the new cluster", || async {
                services.get_opt("rs").await.unwrap().filter(|r| {
                    active(r).as_deref() == Some(new.as_str()) && pending(r).is_none() && ready(r)
                })
            }),
        )
        .await;
    assert!(moved.is_ok(), "traffic did not move: {}", state(&c).await);
    let landed = racks_of(&c, &format!("ray.io/cluster={new},ray.io/node-type=worker"), 3).await;
    assert_eq!(
        landed, held,
        "every new worker runs inside the rack that had room"
    );
    poll(&c, "the old cluster to be deleted", || async {
        clusters.get_opt(&old).await.unwrap().is_none().then_some(())
    })
    .await;
    inv.assert_clean();
    c.quota.assert_safe();
}
