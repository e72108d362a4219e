//! `quotagate apiserver`: the embedded API server alone, and what every command that serves it shares.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::args::*;

/// Resolves on Ctrl-C or SIGTERM.
pub(crate) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

/// The embedded API server every command serves: quotagate's CRDs and admission, kept in
/// `data_dir` when given.
pub(crate) fn embedded_server(
    data_dir: Option<PathBuf>,
    event_ttl: Duration,
    limits: Option<ApiLimitsArgs>,
    frameworks: crate::api::kueue::config::Frameworks,
    managed: crate::api::kueue::config::ManagedJobs,
) -> anyhow::Result<Arc<crate::embedded::EmbeddedServer>> {
    use crate::embedded::{EmbeddedServer, QuotagateAdmission, ServerConfig};
    let mut config = ServerConfig {
        data_dir,
        event_ttl,
        ..ServerConfig::default()
    };
    if let Some(l) = limits {
        config.listener = l.limits();
        config.store = l.store();
    }
    let server = EmbeddedServer::open(
        &crate::embedded::QuotagateCrds,
        Arc::new(QuotagateAdmission {
            frameworks,
            managed,
            ..QuotagateAdmission::default()
        }),
        config,
    )?;
    if let Some(file) = server.store.data_file() {
        tracing::info!(file = %file.display(), resource_version = server.store.restored_rv(), "state loaded from the data directory");
    }
    Ok(server)
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn apiserver(
    listen: SocketAddr,
    kubeconfig_out: Option<PathBuf>,
    simulators: bool,
    pod_start_delay: Duration,
    data_dir: Option<PathBuf>,
    event_ttl: Duration,
    limits: ApiLimitsArgs,
    real_cluster: bool,
    pods: RuntimeArgs,
) -> anyhow::Result<()> {
    use crate::embedded::{
        AdmissionHook, ClusterOptions, EmbeddedCluster, QuotagateAdmission, ServerConfig, sim,
    };
    let mut sims = if simulators {
        sim::SimConfig::default()
    } else {
        sim::SimConfig {
            node: None,
            gateway: None,
            endpoints: false,
        }
    };
    if let Some(node) = sims.node.as_mut() {
        node.start_delay = pod_start_delay;
    }
    if !listen.ip().is_loopback() {
        return Err(crate::embedded::ServeError::NotLoopback(listen).into());
    }
    let Some(path) = kubeconfig_out else {
        anyhow::bail!(
            "--kubeconfig-out is required: the listener's CA and token are written only there, and it refuses requests without them"
        );
    };
    pods.apply(&mut sims)?;
    let simulated_heads = pods.runtime == PodRuntime::Sim;
    let server = ServerConfig {
        data_dir,
        event_ttl,
        listener: limits.limits(),
        store: limits.store(),
        real_cluster,
        ..ServerConfig::default()
    };
    let opts = ClusterOptions {
        server,
        sims,
        listen: Some(listen),
        kubeconfig_out: Some(path.clone()),
    };
    // On a real cluster quotagate's own admission is its webhooks', reached over HTTPS.
    let hook: Arc<dyn AdmissionHook> = if real_cluster {
        Arc::new(crate::embedded::crd_schema::CrdSchemaAdmission)
    } else {
        Arc::new(QuotagateAdmission::default())
    };
    // The CRDs still come with the server here (not only from the manifest) so the simulators,
    // which watch RayClusters, start; applying the manifest's CRDs over them changes nothing.
    let cluster = EmbeddedCluster::start(&crate::embedded::QuotagateCrds, hook, opts).await?;
    if simulated_heads {
        // Simulated Ray heads answer `services/proxy` (KubeRay's --use-kubernetes-proxy) as real ones would.
        let sim = crate::rayservice::dashboard::sim::RaySim::new(Default::default());
        cluster
            .server
            .pod_networks
            .register(Arc::new(crate::wiring::sim_pod_network::SimulatedHeads::new(
                Arc::new(sim),
            )));
    }
    let addr = cluster.addr.unwrap_or(listen);
    let mode = if real_cluster {
        " (real-cluster mode: webhooks, no in-process quotagate admission)"
    } else {
        ""
    };
    println!(
        "embedded API server on https://{addr}{mode}; kubeconfig (CA and token) written to {}",
        path.display()
    );
    shutdown_signal().await;
    cluster.stopped().await;
    Ok(())
}
