//! The embedded cluster with nodes with capacity (`run --embedded --nodes 2 --node-capacity cpu=2
//! --node-pool name=gpu,...`): Node objects as a kubelet registers them, and the scheduler binding a
//! pod only where it fits, else leaving it Pending with kube-scheduler's `Unschedulable` condition and
//! message, and binding it once another pod ends. Each message here is the one a real kube-scheduler
//! v1.36.3 wrote for the same pods on the same nodes (`scripts/control-plane.sh up` with `quotagate
//! node-agent --nodes 2 --node-capacity cpu=2,memory=8Gi --node-pool name=gpu,...` as below), and a
//! pod waiting for room went to the node the deleted pod left, there as here.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use quotagate::embedded::sim::{self, SimConfig, node, nodes};
use quotagate::embedded::{AllowAll, EmbeddedServer};
use serde_json::{Value, json};
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// Two plain nodes of 2 cpu, one GPU node of 8 cpu and 4 GPUs, labelled and tainted.
fn start() -> (Arc<EmbeddedServer>, CancellationToken) {
    let pools = vec![
        nodes::NodePool::plain(2, Some(&nodes::parse_capacity("cpu=2,memory=8Gi", ',').unwrap())),
        nodes::parse_pool(
            "name=gpu,count=1,capacity=cpu=8;nvidia.com/gpu=4,labels=accel=a100,taints=nvidia.com/gpu=present:NoSchedule",
        )
        .unwrap(),
    ];
    let list = nodes::expand(&pools, "sim-node").unwrap();
    let config = SimConfig {
        node: Some(node::NodeAgentConfig {
            nodes: list.into_iter().map(|(n, p)| (n, p.clone())).collect(),
            ..Default::default()
        }),
        gateway: None,
        endpoints: false,
    };
    let srv = EmbeddedServer::new(&Vec::<CustomResourceDefinition>::new(), Arc::new(AllowAll));
    let cancel = CancellationToken::new();
    sim::spawn(srv.client(), &config, cancel.clone());
    (srv, cancel)
}

fn pod(name: &str, requests: Value, extra: Value) -> Pod {
    let mut v = json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                                 "resources": {"requests": requests, "limits": requests}}]}});
    if let Value::Object(m) = extra {
        for (k, x) in m {
            v["spec"][k] = x;
        }
    }
    serde_json::from_value(v).unwrap()
}

fn scheduled(p: &Pod) -> Option<(String, String, String)> {
    p.status.as_ref()?.conditions.as_ref()?.iter().find_map(|c| {
        (c.type_ == "PodScheduled").then(|| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
    })
}

fn node_of(p: &Pod) -> Option<String> {
    p.spec.as_ref()?.node_name.clone().filter(|n| !n.is_empty())
}

async fn until_unschedulable(pods: &Api<Pod>, name: &str) -> String {
    let got = timeout(
        WAIT,
        await_condition(pods.clone(), name, |p: Option<&Pod>| {
            p.and_then(scheduled)
                .is_some_and(|(s, r, _)| s == "False" && r == "Unschedulable")
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("{name}: Unschedulable in time"))
    .unwrap()
    .unwrap();
    assert_eq!(node_of(&got), None, "{name} stays unbound");
    assert_eq!(
        got.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    scheduled(&got).unwrap().2
}

async fn until_running(pods: &Api<Pod>, name: &str) -> String {
    let got = timeout(
        WAIT,
        await_condition(pods.clone(), name, |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref()).and_then(|s| s.phase.as_deref()) == Some("Running")
        }),
    )
    .await
    .unwrap_or_else(|_| panic!("{name}: Running in time"))
    .unwrap()
    .unwrap();
    node_of(&got).expect("bound")
}

#[tokio::test]
async fn nodes_are_registered_with_capacity_labels_and_taints() {
    let (srv, cancel) = start();
    let api: Api<Node> = Api::all(srv.client());
    let nodes = timeout(WAIT, async {
        loop {
            let l = api.list(&ListParams::default()).await.unwrap();
            if l.items.len() == 3 && l.items.iter().all(|n| n.status.is_some()) {
                return l.items;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("three nodes");
    let names: Vec<_> = nodes.iter().map(|n| n.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["sim-node-1", "sim-node-2", "sim-node-gpu-1"]);
    let gpu = serde_json::to_value(&nodes[2]).unwrap();
    assert_eq!(gpu["status"]["allocatable"]["nvidia.com/gpu"], "4");
    assert_eq!(gpu["status"]["capacity"]["cpu"], "8");
    assert_eq!(gpu["metadata"]["labels"]["accel"], "a100");
    assert_eq!(
        gpu["metadata"]["labels"]["kubernetes.io/hostname"],
        "sim-node-gpu-1"
    );
    assert_eq!(
        gpu["spec"]["taints"],
        json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    );
    let plain = serde_json::to_value(&nodes[0]).unwrap();
    assert_eq!(plain["status"]["allocatable"]["cpu"], "2");
    assert_eq!(
        plain["status"]["allocatable"]["pods"], "1k",
        "not named: unlimited"
    );
    cancel.cancel();
}

#[tokio::test]
async fn a_pod_no_node_fits_stays_pending_until_another_ends() {
    let (srv, cancel) = start();
    let pods: Api<Pod> = Api::namespaced(srv.client(), "default");
    let pp = PostParams::default();
    // Larger than any untainted node: no eviction could help.
    pods.create(&pp, &pod("huge", json!({"cpu": "3"}), json!({})))
        .await
        .unwrap();
    assert_eq!(
        until_unschedulable(&pods, "huge").await,
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    // Two pods fill the plain nodes, one each (the least allocated node wins).
    for name in ["a", "b"] {
        pods.create(&pp, &pod(name, json!({"cpu": "1500m"}), json!({})))
            .await
            .unwrap();
    }
    let (on_a, on_b) = (until_running(&pods, "a").await, until_running(&pods, "b").await);
    let mut on = [on_a.clone(), on_b];
    on.sort();
    assert_eq!(on, ["sim-node-1", "sim-node-2"]);
    pods.create(&pp, &pod("c", json!({"cpu": "1"}), json!({})))
        .await
        .unwrap();
    assert_eq!(
        until_unschedulable(&pods, "c").await,
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. no new claims to deallocate, preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod."
    );
    // `a` ends (deleted: its node agent removes it); `c` takes its room.
    pods.delete("a", &Default::default()).await.unwrap();
    assert_eq!(until_running(&pods, "c").await, on_a, "where a ran");
    let c = pods.get("c").await.unwrap();
    assert_eq!(scheduled(&c).map(|s| s.0), Some("True".into()));
    assert_eq!(
        scheduled(&pods.get("huge").await.unwrap()).map(|s| s.1),
        Some("Unschedulable".into()),
        "still too large"
    );
    cancel.cancel();
}

#[tokio::test]
async fn gpu_pods_go_where_tolerated_selected_and_free() {
    let (srv, cancel) = start();
    let pods: Api<Pod> = Api::namespaced(srv.client(), "default");
    let pp = PostParams::default();
    let toleration = json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]);
    // A GPU request without the toleration: the GPU node's taint, and no GPU elsewhere.
    pods.create(
        &pp,
        &pod("untolerated", json!({"nvidia.com/gpu": "1"}), json!({})),
    )
    .await
    .unwrap();
    assert_eq!(
        until_unschedulable(&pods, "untolerated").await,
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    // Tolerated and selected (a ResourceFlavor's nodeLabels and tolerations): the GPU node.
    pods.create(
        &pp,
        &pod(
            "train",
            json!({"nvidia.com/gpu": "3", "cpu": "2"}),
            json!({"tolerations": toleration, "nodeSelector": {"accel": "a100"}}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(until_running(&pods, "train").await, "sim-node-gpu-1");
    // Three of four GPUs taken: two more do not fit.
    pods.create(
        &pp,
        &pod(
            "more",
            json!({"nvidia.com/gpu": "2"}),
            json!({"tolerations": toleration}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        until_unschedulable(&pods, "more").await,
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
    );
    // Required node affinity away from the GPU node.
    let away = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "accel", "operator": "DoesNotExist"}]}]}}});
    pods.create(
        &pp,
        &pod(
            "cpu-only",
            json!({"cpu": "1"}),
            json!({"tolerations": toleration, "affinity": away}),
        ),
    )
    .await
    .unwrap();
    assert_ne!(until_running(&pods, "cpu-only").await, "sim-node-gpu-1");
    let nowhere = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "accel", "operator": "In", "values": ["h100"]}]}]}}});
    pods.create(
        &pp,
        &pod(
            "h100",
            json!({"cpu": "1"}),
            json!({"tolerations": toleration, "affinity": nowhere}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        until_unschedulable(&pods, "h100").await,
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    cancel.cancel();
}

#[tokio::test]
async fn a_gated_pod_is_never_bound_until_its_gates_go() {
    let (srv, cancel) = start();
    let pods: Api<Pod> = Api::namespaced(srv.client(), "default");
    pods.create(
        &PostParams::default(),
        &pod(
            "gated",
            json!({"cpu": "1"}),
            json!({"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}),
        ),
    )
    .await
    .unwrap();
    let got = timeout(
        WAIT,
        await_condition(pods.clone(), "gated", |p: Option<&Pod>| {
            p.and_then(scheduled)
                .is_some_and(|(_, r, _)| r == "SchedulingGated")
        }),
    )
    .await
    .expect("SchedulingGated in time")
    .unwrap()
    .unwrap();
    assert_eq!(node_of(&got), None);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(node_of(&pods.get("gated").await.unwrap()), None, "still unbound");
    pods.patch(
        "gated",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"schedulingGates": null}})),
    )
    .await
    .unwrap();
    assert_ne!(until_running(&pods, "gated").await, "sim-node-gpu-1");
    cancel.cancel();
}
