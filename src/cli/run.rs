//! `quotagate run`: the manager, against a real cluster or the embedded one.

use std::net::SocketAddr;
use std::time::Duration;

use super::apiserver::{embedded_server, shutdown_signal};
use super::args::*;
use crate::wiring::ray::Dashboards;

/// Reads `--config`: a Kueue `Configuration`; an error names the file and the field.
pub(crate) fn load_config(
    path: &std::path::Path,
) -> anyhow::Result<crate::api::kueue::config::Configuration> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("--config {}: {e}", path.display()))?;
    let cfg = crate::api::kueue::config::Configuration::parse(&text)
        .map_err(|e| anyhow::anyhow!("--config {}: {e}", path.display()))?;
    let ignored = cfg.ignored();
    if !ignored.is_empty() {
        tracing::info!(file = %path.display(), "configuration sections quotagate has no use for, ignored: {}", ignored.join(", "));
    }
    match cfg.wait_for_pods_ready() {
        Some(w) => {
            tracing::info!(timeout = ?w.timeout, block_admission = w.block_admission, backoff_limit_count = ?w.backoff_limit_count, "waitForPodsReady on")
        }
        None => tracing::info!("waitForPodsReady off"),
    }
    match cfg.fair_sharing() {
        Some(s) => tracing::info!(preemption_strategies = ?s, "fair sharing on"),
        None => tracing::info!("fair sharing off"),
    }
    if let Some(a) = cfg.admission_fair_sharing() {
        tracing::info!(half_life = ?a.usage_half_life_time, sampling = ?a.usage_sampling_interval, "admission fair sharing on");
    }
    Ok(cfg)
}

/// The config file's fair-sharing strategies as the admission core takes them.
pub(crate) fn fair_sharing_config(
    s: Vec<crate::api::kueue::config::PreemptionStrategy>,
) -> crate::queue::FairSharingConfig {
    use crate::api::kueue::config::PreemptionStrategy as S;
    use crate::queue::FairPreemptionStrategy as F;
    let strategies = s
        .into_iter()
        .map(|x| match x {
            S::LessThanOrEqualToFinalShare => F::LessThanOrEqualToFinalShare,
            S::LessThanInitialShare => F::LessThanInitialShare,
        })
        .collect();
    crate::queue::FairSharingConfig { strategies }
}

pub(crate) async fn run(args: RunArgs) -> anyhow::Result<()> {
    if args.pods.runtime == PodRuntime::Process && !args.embedded {
        anyhow::bail!("--runtime process runs the embedded cluster's pods: use it with --embedded");
    }
    if !args.embedded && (args.sim.nodes.is_some() || !args.sim.node_pool.is_empty()) {
        anyhow::bail!(
            "--nodes and --node-pool give the embedded cluster its nodes: use them with --embedded (a real cluster's simulated nodes: `quotagate node-agent`)"
        );
    }
    use crate::wiring::manager::{self, EmbeddedOptions, ManagerOptions};
    use crate::wiring::webhook::WebhookCerts;
    args.minimal_kueue.log_ignored();
    let ui = args.ui.bind()?;
    if let Some(ui) = &ui {
        tracing::info!(addr = %ui.addr, "{}", ui.announcement());
    }
    let config = match &args.config {
        Some(path) => Some(load_config(path)?),
        None => None,
    };
    let from_file = config
        .as_ref()
        .and_then(|c| c.leader_election.clone())
        .unwrap_or_default();
    let mut opts = ManagerOptions {
        ui,
        health_addr: args
            .health_addr
            .or_else(|| (args.minimal_kueue.metrics_port).map(|p| SocketAddr::from(([127, 0, 0, 1], p))))
            .or_else(|| config.as_ref().and_then(|c| c.health_addr())),
        leader_election: args
            .leader_elect
            .or(from_file.leader_elect)
            .unwrap_or(!args.embedded),
        lease_namespace: args
            .lease_namespace
            .clone()
            .or(from_file.resource_namespace)
            .unwrap_or_else(|| "default".into()),
        lease_name: args
            .lease_name
            .clone()
            .or(from_file.resource_name)
            .unwrap_or_else(|| "quotagate-leader".into()),
        pods_ready: config.as_ref().and_then(|c| c.wait_for_pods_ready()),
        workload_retention: config.as_ref().and_then(|c| c.workload_retention()),
        fair_sharing: config
            .as_ref()
            .and_then(|c| c.fair_sharing())
            .map(fair_sharing_config),
        admission_fair_sharing: config.as_ref().and_then(|c| c.admission_fair_sharing()),
        ray: (!args.no_ray_operator).then(|| {
            if args.embedded || args.simulated_ray_dashboards {
                args.sim.dashboards()
            } else if args.use_kubernetes_proxy {
                Dashboards::KubernetesProxy
            } else {
                Dashboards::Http
            }
        }),
        ray_gates: args.feature_gates,
        upgrade_deadline: args.upgrade_deadline,
        prioritize_preemptor_workloads: args.prioritize_preemptor_workloads
            || config
                .as_ref()
                .is_some_and(|c| c.prioritize_preemptor_workloads()),
        recompute_on_overlap: config
            .as_ref()
            .is_none_or(|c| c.recompute_upon_preemption_targets_overlap()),
        frameworks: config.as_ref().map(|c| c.frameworks()).unwrap_or_default(),
        managed_jobs: config.as_ref().map(|c| c.managed_jobs()).unwrap_or_default(),
        cycle_break_after: args.cycle_break_after,
        ..ManagerOptions::default()
    };
    // MultiKueue reads the workers' kubeconfig Secrets from the namespace quotagate runs in.
    // Its `multiKueue` section (origin, gcInterval, workerLostTimeout, dispatcherName) as Kueue reads it.
    if let Some(mk) = opts.multikueue.as_mut() {
        mk.namespace = opts.lease_namespace.clone();
        if let Some(c) = config.as_ref() {
            mk.apply(&c.multi_kueue());
        }
    }
    if let Some(id) = &args.identity {
        opts.identity = id.clone();
    }
    if args.embedded {
        let mut sims = args.sim.sims()?;
        args.pods.apply(&mut sims)?;
        let embedded = EmbeddedOptions {
            listen: args.listen,
            kubeconfig_out: args.kubeconfig_out.clone(),
            manager: opts,
            sims,
            ray_sims: args.sim.ray_sims(),
        };
        let (frameworks, managed) = (embedded.manager.frameworks, embedded.manager.managed_jobs.clone());
        manager::run_embedded_on(
            embedded_server(
                args.data_dir.clone(),
                args.event_ttl,
                Some(args.limits),
                frameworks,
                managed,
            )?,
            embedded,
            shutdown_signal(),
        )
        .await?;
        return Ok(());
    }
    let client = crate::cli::kube_client(args.kubeconfig.as_deref())
        .await
        .map_err(anyhow::Error::msg)?;
    let port = config
        .as_ref()
        .and_then(|c| c.webhook.as_ref())
        .and_then(|w| w.port)
        .unwrap_or(9443);
    let addr = args
        .webhook_addr
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], port)));
    let managed = config.clone().unwrap_or_default().cert_management();
    let certs = match (&args.webhook_cert_dir, managed) {
        (Some(dir), _) => Some(WebhookCerts::Static(crate::wiring::webhook::tls_config(dir)?)),
        // Kueue's internalCertManagement, on unless the configuration turns it off.
        (None, Some(m)) => Some(WebhookCerts::Managed(crate::wiring::certs::CertOptions {
            namespace: args
                .lease_namespace
                .clone()
                .unwrap_or_else(|| crate::wiring::install::NAMESPACE.into()),
            service: m.service_name,
            secret: m.secret_name,
            check_every: Duration::from_secs(30),
        })),
        (None, None) => None,
    };
    opts.webhook = certs.map(|certs| crate::wiring::webhook::WebhookServing { addr, certs });
    // With simulated dashboards no Ray runs, so the Ray side the embedded cluster simulates runs here
    // too, against the same simulator: the Ray CLI of RayJob submitter pods (their `ray job submit`,
    // which the node agent leaves Running), the in-tree autoscaler and the load through HTTPRoutes.
    // They write as this process's client (pod status, worker replicas): the admin kubeconfig of a
    // test or a developer, not the shipped RBAC.
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut ray_sims = Vec::new();
    if args.simulated_ray_dashboards
        && let Some(sim) = opts.ray.as_ref().and_then(|d| d.sim()).cloned()
    {
        ray_sims = crate::wiring::raysim::spawn(client.clone(), sim, &args.sim.ray_sims(), cancel.clone()).0;
    }
    let result = manager::run_manager(client, opts, shutdown_signal()).await;
    cancel.cancel();
    for task in ray_sims {
        let _ = task.await;
    }
    result?;
    Ok(())
}
