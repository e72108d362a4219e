//! `quotagate node-agent`: the embedded cluster's kubelet role as a process of its own, against any API
//! server (issue 58). It registers Nodes with the capacity given, heartbeats their Leases in
//! `kube-node-lease` as a kubelet does, and runs the pods a scheduler binds to them with the embedded
//! cluster's simulated runtime (`embedded::sim::node` in its kubelet role: Running and Ready with a pod
//! IP, `sleep`/`exit` commands ending their pods, terminating pods removed). Binding, Jobs' pods,
//! EndpointSlices and garbage collection are the real kube-scheduler's and kube-controller-manager's,
//! so the embedded cluster's scheduler, Job and endpoints simulators do not run here.
//!
//! Pods run by `--runtime`: `auto` (the default) runs quotagate's own image (the shipped Deployment)
//! as this machine's binary in a network namespace (`embedded::sim::process`), simulates every other
//! pod, and serves the simulated Ray heads' dashboards at their pod addresses (`heads.rs`) with a
//! Service proxy giving Services names and addresses in the process-run pods (`embedded::sim::proxy`),
//! so the in-cluster manager works as on any cluster. That Service proxy is also the Gateway data
//! plane, with the embedded cluster's gateway controller (`embedded::sim::gateway`) reporting
//! Gateways and HTTPRoutes as it serves them. Without root or iproute2 it says why and simulates
//! every pod (and serves no Gateway: nothing would carry the traffic). `sim` simulates every pod; `process` also runs `rayproject/ray` as real Ray.

mod heads;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::args::{AgentRuntime, NodeAgentArgs};
use crate::embedded::sim::nodes::{NodePool, expand, node_object, with_defaults};
use crate::rayservice::dashboard::sim::submitter;

/// The field manager of the agent's Node and Lease writes (a kubelet's are its node's name).
const FIELD_MANAGER: &str = "quotagate-node-agent";
/// A kubelet's defaults: the Lease is renewed every 10 s and lasts 40 s.
const LEASE_RENEW: Duration = Duration::from_secs(10);
const LEASE_DURATION_SECONDS: i32 = 40;
/// The Node's status (its Ready condition's heartbeat) is written again this often, as a kubelet's
/// `nodeStatusReportFrequency` (5 min) would, only sooner.
const STATUS_EVERY: u32 = 6;
impl NodeAgentArgs {
    /// The defaults, overridden by what `--capacity` names.
    fn capacity(&self) -> BTreeMap<String, String> {
        with_defaults(self.capacity.as_ref().map(|c| &c.0))
    }

    /// The --nodes nodes, then every --node-pool's, each with its pool; at most `MAX_NODES` in all.
    fn node_list(&self) -> anyhow::Result<Vec<(String, NodePool)>> {
        let mut pools = vec![NodePool::plain(self.nodes, self.capacity.as_ref().map(|c| &c.0))];
        pools.extend(self.node_pool.iter().cloned());
        let nodes =
            expand(&pools, &self.node_prefix).map_err(|e| anyhow::anyhow!("--nodes/--node-pool: {e}"))?;
        Ok(nodes.into_iter().map(|(n, p)| (n, p.clone())).collect())
    }

    #[cfg(test)]
    fn node_names(&self) -> Vec<String> {
        self.node_list()
            .map(|l| l.into_iter().map(|(n, _)| n).collect())
            .unwrap_or_default()
    }
}

/// Registers (or refreshes) the Node and its status; returns its uid, for the Lease's owner.
async fn register(nodes: &Api<Node>, name: &str, index: u32, pool: &NodePool) -> kube::Result<String> {
    let obj = node_object(name, index, pool);
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let node = nodes.patch(name, &pp, &Patch::Apply(&obj)).await?;
    // The status is a subresource: the object's apply above leaves it out.
    nodes
        .patch_status(
            name,
            &pp,
            &Patch::Apply(&json!({"apiVersion": "v1", "kind": "Node", "status": obj["status"]})),
        )
        .await?;
    Ok(node.metadata.uid.unwrap_or_default())
}

/// The node's Lease, renewed now.
fn lease_object(name: &str, node_uid: &str) -> Lease {
    Lease {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("kube-node-lease".into()),
            owner_references: (!node_uid.is_empty()).then(|| {
                vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name: name.to_string(),
                    uid: node_uid.to_string(),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(name.to_string()),
            lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
            renew_time: Some(MicroTime(jiff::Timestamp::now())),
            ..Default::default()
        }),
    }
}

/// Keeps the Nodes registered and their Leases renewed, forever. A failed round is logged and retried
/// at the next tick (a kubelet's Lease outlives a few missed renewals).
async fn heartbeat(client: kube::Client, nodes: Vec<(String, NodePool)>) {
    let node_api: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let mut uids: Vec<Option<String>> = vec![None; nodes.len()];
    let mut tick = tokio::time::interval(LEASE_RENEW);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut round: u32 = 0;
    loop {
        tick.tick().await;
        for (i, (name, pool)) in nodes.iter().enumerate() {
            let index = u32::try_from(i).unwrap_or(u32::MAX).saturating_add(1);
            if uids[i].is_none() || round.is_multiple_of(STATUS_EVERY) {
                match register(&node_api, name, index, pool).await {
                    Ok(uid) => {
                        if uids[i].is_none() {
                            tracing::info!(node = %name, "node registered");
                        }
                        uids[i] = Some(uid);
                    }
                    Err(e) => {
                        tracing::warn!(node = %name, error = %e, "node registration failed; retrying");
                        continue;
                    }
                }
            }
            let lease = lease_object(name, uids[i].as_deref().unwrap_or(""));
            if let Err(e) = leases.patch(name, &pp, &Patch::Apply(&lease)).await {
                tracing::warn!(node = %name, error = %e, "lease renewal failed; retrying");
                // The Node may have been deleted (its Lease with it): register it again.
                uids[i] = None;
            }
        }
        round = round.wrapping_add(1);
    }
}

pub(crate) async fn run(args: NodeAgentArgs) -> anyhow::Result<()> {
    let client = crate::cli::kube_client(args.kubeconfig.as_deref())
        .await
        .map_err(|e| match &args.kubeconfig {
            Some(path) => anyhow::anyhow!("--kubeconfig {}: {e}", path.display()),
            None => anyhow::anyhow!("no --kubeconfig given and none found: {e}"),
        })?;
    let nodes = args.node_list()?;
    let names: Vec<String> = nodes.iter().map(|(n, _)| n.clone()).collect();
    // Registered once before anything else, so that a kubeconfig without the rights fails at once.
    let node_api: Api<Node> = Api::all(client.clone());
    for (i, (name, pool)) in nodes.iter().enumerate() {
        register(&node_api, name, u32::try_from(i + 1).unwrap_or(u32::MAX), pool)
            .await
            .map_err(|e| anyhow::anyhow!("registering node {name}: {e}"))?;
    }
    tracing::info!(nodes = ?names, capacity = ?args.capacity(), "node agent: nodes registered; running the pods bound to them");
    let runtime = match args.runtime {
        AgentRuntime::Sim => None,
        AgentRuntime::Process => Some(process_runtime(&args, true).await?),
        AgentRuntime::Auto => match process_runtime(&args, false).await {
            Ok(rt) => Some(rt),
            Err(e) => {
                tracing::error!(
                    "node agent: --runtime auto simulates every pod, because quotagate's own image cannot run \
                     as a process here; the shipped Deployment's pods wait (ImageNotSimulated) and no \
                     in-cluster manager runs. {e:#}"
                );
                None
            }
        },
    };
    // Simulated Ray heads answer at their pod addresses (process-run heads are real Ray), and
    // Services get names and addresses in the process-run pods.
    let sim = std::sync::Arc::new(crate::rayservice::dashboard::sim::RaySim::new(Default::default()));
    let heads = runtime
        .as_ref()
        .map(|rt| heads::Heads::new(rt.clone(), sim.clone()));
    // The Ray CLI of the simulated RayJob submitter pods on these nodes (KubeRay's `K8sJobMode`):
    // their `ray job submit` reaches the heads served above, as it would over the pod network. Where
    // Ray runs as processes (`--runtime process`) the submitters are real Ray CLIs.
    let submitters = async {
        match (&heads, args.runtime) {
            (Some(_), AgentRuntime::Auto) => {
                let scope = submitter::Scope::Nodes(names.iter().cloned().collect());
                submitter::run_in(client.clone(), sim.clone(), scope).await
            }
            _ => std::future::pending().await,
        }
    };
    // The Service proxy is also the Gateways' data plane, as in the embedded cluster.
    let proxy = runtime
        .as_ref()
        .map(|rt| crate::embedded::sim::proxy::ServiceProxy::new(rt));
    let cfg = crate::embedded::sim::node::NodeAgentConfig {
        node_name: names[0].clone(),
        start_delay: args.pod_start_delay,
        kubelet_of: Some(names.clone()),
        // The shipped Deployment's image: shown Running and Ready, it would claim a manager (and
        // webhook endpoints) that does not run. The process runtime runs it.
        images_not_run: if runtime.is_some() {
            Vec::new()
        } else {
            vec!["quotagate".into()]
        },
        runtime: runtime.clone(),
        addresses: heads
            .clone()
            .map(|h| h as std::sync::Arc<dyn crate::embedded::sim::node::PodAddresses>),
        ..Default::default()
    };
    let removals = async {
        match &runtime {
            Some(rt) => rt.clone().follow_removals(client.clone()).await,
            None => std::future::pending().await,
        }
    };
    let services = async {
        match &proxy {
            Some(p) => p.clone().run(client.clone()).await,
            None => std::future::pending().await,
        }
    };
    // The gateway controller: Gateways Programmed at the data plane's address once their listeners
    // are bound, HTTPRoutes accepted once the routing table holds their generation. Without a data
    // plane (`--runtime sim`) nothing would carry the traffic, so it does not run.
    let gateways = async {
        match &proxy {
            Some(p) => {
                crate::embedded::sim::gateway::run(client.clone(), Default::default(), Some(p.clone())).await
            }
            None => std::future::pending().await,
        }
    };
    let head_removals = async {
        match &heads {
            Some(h) => h.clone().follow_removals(client.clone()).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = heartbeat(client.clone(), nodes) => {}
        _ = crate::embedded::sim::node::run(client.clone(), cfg) => {}
        _ = removals => {}
        _ = services => {}
        _ = gateways => {}
        _ = head_removals => {}
        _ = submitters => {}
        _ = super::apiserver::shutdown_signal() => {
            // As a kubelet: the Nodes stay; their Leases lapse and the node lifecycle controller
            // marks them NotReady.
            tracing::info!("node agent: stopping");
        }
    }
    if let Some(rt) = runtime {
        // The pods' processes stop and their network goes; the pod objects stay, as a kubelet's do.
        rt.shutdown(Duration::from_secs(10)).await;
    }
    Ok(())
}

/// The process runtime, given this binary for quotagate's image and the API server's loopback port;
/// `rayproject/ray` containers run as Ray too when `ray`.
async fn process_runtime(
    args: &NodeAgentArgs,
    ray: bool,
) -> anyhow::Result<std::sync::Arc<crate::embedded::sim::process::ProcessRuntime>> {
    use crate::embedded::sim::process::{ProcessConfig, ProcessRuntime, missing, seen_by_pods};
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| anyhow::anyhow!("--kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(|e| anyhow::anyhow!("--kubeconfig {}: {e}", path.display()))?
        }
        None => kube::Config::infer().await?,
    };
    let url = &config.cluster_url;
    let port = match (url.host(), url.port_u16()) {
        (Some("127.0.0.1" | "localhost"), Some(port)) => port,
        _ => anyhow::bail!(
            "--runtime {}: the API server is at {url}; pods reach it only on this machine's loopback (https://127.0.0.1:PORT)",
            runtime_name(args.runtime)
        ),
    };
    let bin = std::env::current_exe().map_err(|e| anyhow::anyhow!("this quotagate binary: {e}"))?;
    seen_by_pods(&bin).map_err(|e| anyhow::anyhow!("--runtime {}: {e}", runtime_name(args.runtime)))?;
    let cfg = ProcessConfig {
        ray_venv: args.ray_venv.clone(),
        quotagate: Some(bin),
        api_port: Some(port),
        ray,
        ..Default::default()
    };
    let lacks = missing(&cfg);
    if !lacks.is_empty() {
        anyhow::bail!(
            "--runtime {} runs quotagate's own image as processes and needs what this host lacks:\n  - {}",
            runtime_name(args.runtime),
            lacks.join("\n  - ")
        );
    }
    let rt = ProcessRuntime::start(cfg)
        .map_err(|e| anyhow::anyhow!("--runtime {}: {e}", runtime_name(args.runtime)))?;
    if ray {
        tracing::info!(pod_network = %rt.pod_cidr(), "node agent: quotagate and rayproject/ray pods run as processes");
    } else {
        tracing::info!(pod_network = %rt.pod_cidr(), "node agent: quotagate pods run as processes; other pods are simulated, Ray heads with their dashboards at their pod addresses");
    }
    Ok(rt)
}

fn runtime_name(r: AgentRuntime) -> &'static str {
    match r {
        AgentRuntime::Auto => "auto",
        AgentRuntime::Sim => "sim",
        AgentRuntime::Process => "process",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: NodeAgentArgs,
    }

    fn parse(args: &[&str]) -> Result<NodeAgentArgs, String> {
        T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
            .map(|t| t.a)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn capacity_defaults_and_overrides() {
        let a = parse(&["--nodes", "3", "--capacity", "cpu=8, nvidia.com/gpu=2"]).unwrap();
        assert_eq!(
            a.node_names(),
            ["quotagate-node-1", "quotagate-node-2", "quotagate-node-3"]
        );
        let cap = a.capacity();
        assert_eq!(cap["cpu"], "8");
        assert_eq!(cap["nvidia.com/gpu"], "2");
        assert_eq!((cap["memory"].as_str(), cap["pods"].as_str()), ("4Ti", "1k"));
        let d = parse(&[]).unwrap();
        assert_eq!(d.node_names(), ["quotagate-node-1"]);
        assert_eq!(
            d.runtime,
            AgentRuntime::Auto,
            "the shipped Deployment runs by default"
        );
        assert_eq!(parse(&["--runtime", "sim"]).unwrap().runtime, AgentRuntime::Sim);
        assert_eq!(d.capacity()["cpu"], "1k");
    }

    #[test]
    fn pools_add_labelled_tainted_nodes_under_the_prefix() {
        let a = parse(&[
            "--nodes",
            "2",
            "--node-capacity",
            "cpu=4",
            "--node-pool",
            "name=gpu,count=2,capacity=nvidia.com/gpu=4,labels=accel=a100,taints=nvidia.com/gpu=present:NoSchedule",
        ])
        .unwrap();
        assert_eq!(
            a.node_names(),
            [
                "quotagate-node-1",
                "quotagate-node-2",
                "quotagate-node-gpu-1",
                "quotagate-node-gpu-2"
            ]
        );
        let nodes = a.node_list().unwrap();
        assert_eq!(nodes[0].1.capacity["cpu"], "4", "--node-capacity is --capacity");
        let gpu = node_object(&nodes[2].0, 3, &nodes[2].1);
        assert_eq!(gpu["metadata"]["labels"]["accel"], "a100");
        assert_eq!(gpu["spec"]["taints"][0]["effect"], "NoSchedule");
        assert_eq!(gpu["status"]["allocatable"]["nvidia.com/gpu"], "4");
        let too_many = parse(&["--nodes", "100", "--node-pool", "name=a"]).unwrap();
        let err = too_many.node_list().unwrap_err().to_string();
        assert!(
            err.contains("--nodes/--node-pool") && err.contains("101 nodes"),
            "{err}"
        );
        let err = parse(&["--node-pool", "name=gpu,count=lots"])
            .map(|_| ())
            .unwrap_err();
        assert!(err.contains("--node-pool") && err.contains("count=lots"), "{err}");
    }

    #[test]
    fn bad_flags_name_the_flag() {
        for (args, want) in [
            (&["--nodes", "0"][..], "--nodes"),
            (&["--nodes", "101"], "--nodes"),
            (&["--nodes", "many"], "--nodes"),
            (&["--capacity", "cpu=-1"], "cannot be negative"),
            (&["--capacity", "cpu"], "is not name=quantity"),
            (&["--capacity", "cpu=lots"], "cpu=lots"),
            (&["--capacity", "cpu=1,cpu=2"], "cpu named twice"),
            (&["--capacity", ""], "no resource given"),
            (&["--capacity", "c p u=1"], "is not a resource name"),
            (&["--node-prefix", "Node"], "node name prefix"),
            (&["--pod-start-delay", "soon"], "--pod-start-delay"),
            (&["--runtime", "docker"], "--runtime"),
        ] {
            let err = parse(args).expect_err(&format!("{args:?} refused"));
            assert!(err.contains(want), "{args:?}: {err}");
            assert!(err.contains(args[0]), "{args:?} names its flag: {err}");
        }
    }

    #[test]
    fn the_node_offers_its_capacity_and_is_ready() {
        let a = parse(&["--capacity", "cpu=4"]).unwrap();
        let nodes = a.node_list().unwrap();
        let n = node_object(&nodes[0].0, 1, &nodes[0].1);
        assert_eq!(n["status"]["allocatable"]["cpu"], "4");
        assert_eq!(n["status"]["capacity"]["pods"], "1k");
        let ready = n["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["status"], "True");
        let lease = serde_json::to_value(lease_object("n-1", "u1")).unwrap();
        assert_eq!(lease["spec"]["holderIdentity"], "n-1");
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
        assert_eq!(lease["metadata"]["ownerReferences"][0]["uid"], "u1");
    }
}
