//! Simulated cluster components. Each is a small kube-runtime controller that talks to the API through
//! a `kube::Client`, like the real component would; each can be switched off, delays are configurable.
//! (The Ray dashboard simulator lives beside the dashboard client, in `rayservice::dashboard::sim`.)

pub mod endpoints;
pub mod gateway;
pub mod job_controller;
pub mod node;
pub mod nodes;
pub mod process;
pub mod proxy;
pub mod scheduler;

use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Which simulators run, and how.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub node: Option<node::NodeAgentConfig>,
    pub gateway: Option<gateway::GatewayConfig>,
    pub endpoints: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            node: Some(node::NodeAgentConfig::default()),
            gateway: Some(gateway::GatewayConfig::default()),
            endpoints: true,
        }
    }
}

/// Starts the enabled simulators; they stop when `cancel` fires.
pub fn spawn(client: kube::Client, config: &SimConfig, cancel: CancellationToken) -> Vec<JoinHandle<()>> {
    let mut handles = Vec::new();
    // With the process runtime, the Service proxy is also the Gateways' data plane.
    let mut plane = None;
    if let Some(n) = &config.node {
        let mut n = n.clone();
        if !n.nodes.is_empty() {
            // Nodes with capacity: the scheduler binds, the agent is their kubelet.
            n.kubelet_of = Some(n.nodes.iter().map(|(name, _)| name.clone()).collect());
            handles.push(tokio::spawn(until(
                cancel.clone(),
                scheduler::run(client.clone(), n.nodes.clone()),
            )));
        }
        let n = &n;
        handles.push(tokio::spawn(until(
            cancel.clone(),
            node::run(client.clone(), n.clone()),
        )));
        // Pods need a node to run on, and Jobs a controller to make their pods: they come together.
        handles.push(tokio::spawn(until(
            cancel.clone(),
            job_controller::run(client.clone()),
        )));
        if let Some(rt) = n.runtime.clone() {
            handles.push(tokio::spawn(until(
                cancel.clone(),
                rt.clone().follow_removals(client.clone()),
            )));
            let proxy = proxy::ServiceProxy::new(&rt);
            plane = Some(proxy.clone());
            handles.push(tokio::spawn(until(cancel.clone(), proxy.run(client.clone()))));
            // Not under `until`: on cancel, this is what stops the pods' processes and removes their network.
            let cancel = cancel.clone();
            handles.push(tokio::spawn(async move {
                cancel.cancelled().await;
                rt.shutdown(SHUTDOWN_GRACE).await;
            }));
        }
    }
    if let Some(g) = &config.gateway {
        handles.push(tokio::spawn(until(
            cancel.clone(),
            gateway::run(client.clone(), g.clone(), plane),
        )));
    }
    if config.endpoints {
        handles.push(tokio::spawn(until(
            cancel.clone(),
            endpoints::run(client.clone()),
        )));
    }
    handles
}

async fn until(cancel: CancellationToken, fut: impl std::future::Future<Output = ()>) {
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = fut => {}
    }
}

/// At most this long for a process-run pod to stop when the embedded cluster shuts down.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Retry delay after a failed reconcile (the API said no; try again soon).
pub(crate) const RETRY: Duration = Duration::from_millis(200);

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("kube API: {0}")]
    Kube(#[from] kube::Error),
}

pub(crate) fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) -> serde_json::Value {
    let c = crate::api::conditions::new(type_, status, reason, message, generation, jiff::Timestamp::now());
    serde_json::to_value(c).unwrap_or_default()
}
