//! Kueue's own TAS sample, `tas.sample-gpu-queues.yaml` (site/static/examples/tas), applied unchanged:
//! its Topology of block, rack and hostname, the flavor naming it, the ClusterQueue of 16 GPUs and
//! the LocalQueue. Then GPU Jobs asking for one rack, as Kueue's TAS docs run them: one lands in a
//! rack with room, the next waits with a reason naming the topology, until the first finishes.
//! The sample is read from the upstream samples beside the repository (`../shared/manifests/`);
//! where they are absent the test says it skipped.

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use quotagate::api::kueue::constants::label;
use quotagate::api::kueue::tas::{REQUIRED_TOPOLOGY, decode_assignment};
use quotagate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Topology, Workload};
use quotagate::embedded::sim::{self, SimConfig, node, nodes};

use crate::support::*;
use crate::tas::{pending_on_topology, workload_of};

const RACK: &str = "cloud.provider.com/topology-rack";

fn sample() -> Option<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/manifests/kueue/tas.sample-gpu-queues.yaml"
    );
    match std::fs::read_to_string(path) {
        Ok(s) => Some(s),
        Err(_) => {
            println!("skipped: no upstream samples in ../shared/manifests/ beside the repository");
            None
        }
    }
}

/// Creates each document of the sample as written, by its kind.
async fn apply(c: &Cluster, text: &str) {
    let docs = quotagate::api::manifest::load_documents(text).unwrap();
    assert_eq!(docs.len(), 4, "the sample's four documents");
    let pp = PostParams::default();
    for d in docs {
        let kind = d["kind"].as_str().unwrap_or_default().to_string();
        match kind.as_str() {
            "Topology" => {
                let t: Topology = serde_json::from_value(d).unwrap();
                Api::<Topology>::all(c.client.clone())
                    .create(&pp, &t)
                    .await
                    .unwrap();
            }
            "ResourceFlavor" => {
                let f: ResourceFlavor = serde_json::from_value(d).unwrap();
                Api::<ResourceFlavor>::all(c.client.clone())
                    .create(&pp, &f)
                    .await
                    .unwrap();
            }
            "ClusterQueue" => {
                let q: ClusterQueue = serde_json::from_value(d).unwrap();
                Api::<ClusterQueue>::all(c.client.clone())
                    .create(&pp, &q)
                    .await
                    .unwrap();
            }
            "LocalQueue" => {
                let q: LocalQueue = serde_json::from_value(d).unwrap();
                Api::<LocalQueue>::namespaced(c.client.clone(), "default")
                    .create(&pp, &q)
                    .await
                    .unwrap();
            }
            other => panic!("unexpected kind {other} in the sample"),
        }
    }
}

/// `pods` pods of 4 GPUs each, in one rack.
fn gpu_job(name: &str, pods: i32, command: &str) -> Job {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {label::QUEUE_NAME: "tas-user-queue"}},
        "spec": {"parallelism": pods, "completions": pods, "template": {
            "metadata": {"annotations": {REQUIRED_TOPOLOGY: RACK}},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox", "command": ["sh", "-c", command],
                 "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "4"},
                               "limits": {"nvidia.com/gpu": "4"}}}]}}}
    }))
    .unwrap()
}

/// One block: rack r1 with two nodes of 4 GPUs, rack r2 with one; every node in the sample's node
/// group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueues_tas_sample_applies_unchanged_and_places_by_rack() {
    let Some(text) = sample() else { return };
    let c = Cluster::start(Limits::default().cq("tas-cluster-queue", 100_000)).await;
    let pool = |name: &str, count: u32, rack: &str| {
        nodes::parse_pool(&format!(
            "name={name},count={count},capacity=cpu=8;nvidia.com/gpu=4,labels=cloud.provider.com/topology-block=b1;{RACK}={rack};cloud.provider.com/node-group=tas-group"
        ))
        .unwrap()
    };
    let pools = vec![pool("r1", 2, "r1"), pool("r2", 1, "r2")];
    let list = nodes::expand(&pools, "gpu-node").unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let _sims = cancel.clone().drop_guard();
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
        cancel,
    );
    apply(&c, &text).await;
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    wait_for(&cqs, "tas-cluster-queue", "Active", |q: &ClusterQueue| {
        q.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Active" && c.status == "True")
        })
    })
    .await;

    // 2 pods of 4 GPUs: only r1 holds 8.
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    jobs.create(&PostParams::default(), &gpu_job("train", 2, "sleep 3"))
        .await
        .unwrap();
    let wls = c.workloads();
    let train = workload_of(&c, "train").await;
    let wl = wait_for(&wls, &train, "admitted", |w: &Workload| reserved(w)).await;
    let ta = wl.admission().unwrap().pod_set_assignments[0]
        .topology_assignment
        .clone()
        .expect("a topologyAssignment");
    let domains = decode_assignment(&ta);
    let hosts: std::collections::BTreeSet<&str> = domains
        .iter()
        .map(|d| d.values.last().map(String::as_str).unwrap_or_default())
        .collect();
    assert_eq!(domains.iter().map(|d| d.count).sum::<i32>(), 2, "{ta:?}");
    let r1 = rack_r1(&c).await;
    assert!(
        hosts.iter().all(|h| r1.contains(*h)),
        "every pod in rack r1 ({r1:?}): {ta:?}"
    );
    assert_eq!(hosts.len(), 2, "one pod per 4-GPU node: {ta:?}");

    // Another 2 x 4 GPUs: quota has room (16), no rack does until train finishes.
    jobs.create(&PostParams::default(), &gpu_job("next", 2, "sleep 1"))
        .await
        .unwrap();
    let next = workload_of(&c, "next").await;
    let wl = pending_on_topology(&wls, &next).await;
    let (_, _, message) = condition(&wl, "QuotaReserved").unwrap();
    assert!(
        message.contains(r#"topology "default" allows to fit only 1 out of 2 pod(s)"#),
        "{message}"
    );
    let wl = wait_for(&wls, &next, "admitted once train finished", |w: &Workload| {
        reserved(w)
    })
    .await;
    let ta = wl.admission().unwrap().pod_set_assignments[0]
        .topology_assignment
        .clone()
        .unwrap();
    assert!(
        decode_assignment(&ta)
            .iter()
            .all(|d| d.values.last().is_some_and(|h| r1.contains(h))),
        "{ta:?}"
    );
}

/// The names of rack r1's nodes (the lowest level, hostname, is what an assignment names).
async fn rack_r1(c: &Cluster) -> std::collections::BTreeSet<String> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(c.client.clone());
    nodes
        .list(&kube::api::ListParams::default().labels(&format!("{RACK}=r1")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect()
}
