//! `quotagate demo`: the quota-gated upgrade story on the embedded cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::apiserver::{embedded_server, shutdown_signal};
use super::args::*;

/// `demo --real-ray`: refuses, naming everything missing, when this host cannot run Ray pods as
/// processes; else starts the process runtime into `sims`.
pub(crate) fn real_ray(
    venv: &std::path::Path,
    sims: &mut crate::embedded::sim::SimConfig,
) -> anyhow::Result<crate::wiring::demo_real::RealRay> {
    use crate::embedded::sim::process::{ProcessConfig, ProcessRuntime, missing};
    let cfg = ProcessConfig {
        ray_venv: venv.to_owned(),
        ..Default::default()
    };
    let missing = missing(&cfg);
    if !missing.is_empty() {
        anyhow::bail!(
            "demo --real-ray runs Ray pods as real processes and needs what this host lacks:\n  - {}",
            missing.join("\n  - ")
        );
    }
    let Some(node) = sims.node.as_mut() else {
        anyhow::bail!("demo --real-ray needs the node agent")
    };
    let rt = ProcessRuntime::start(cfg)?;
    println!(
        "real Ray: rayproject/ray pods run {} as processes, pod network {}",
        venv.join("bin/ray").display(),
        rt.pod_cidr()
    );
    node.runtime = Some(rt);
    Ok(crate::wiring::demo_real::RealRay::new()?)
}

#[allow(
    clippy::too_many_arguments,
    reason = "one parameter per flag of `quotagate demo`"
)]
pub(crate) async fn demo(
    listen: Option<SocketAddr>,
    kubeconfig_out: Option<PathBuf>,
    step_timeout: Option<Duration>,
    real: Option<PathBuf>,
    keep_running: bool,
    data_dir: Option<PathBuf>,
    json: bool,
    ui: DemoUiArgs,
    sim: SimArgs,
) -> anyhow::Result<()> {
    use crate::wiring::manager::{self, EmbeddedOptions, ManagerOptions};
    let step_timeout = step_timeout.unwrap_or(Duration::from_secs(if real.is_some() { 300 } else { 60 }));
    let mut sims = sim.sims()?;
    // Checked before anything else starts: a refusal leaves nothing behind.
    let real = match &real {
        Some(venv) => Some(real_ray(venv, &mut sims)?),
        None => None,
    };
    let pause = if ui.ui.ui_addr.is_some() {
        ui.ui_pause
    } else {
        Duration::ZERO
    };
    let ui = ui.ui;
    if keep_running && listen.is_none() && ui.ui_addr.is_none() {
        anyhow::bail!(
            "--keep-running needs --listen (to look around with kubectl) or --ui-addr (to watch in a browser)"
        );
    }
    let ui = ui.bind()?;
    if let Some(ui) = &ui {
        // --json keeps stdout for the timeline.
        if json {
            eprintln!("{}", ui.announcement())
        } else {
            println!("{}", ui.announcement())
        }
    }
    let server = embedded_server(
        data_dir,
        crate::embedded::events::DEFAULT_TTL,
        None,
        Default::default(),
        Default::default(),
    )?;
    // A data directory that already holds a cluster: its objects would collide with the script's.
    let restored = server.store.restored_rv() > 0;
    let client = server.client();
    let opts = EmbeddedOptions {
        listen,
        kubeconfig_out: kubeconfig_out.clone(),
        manager: ManagerOptions {
            leader_election: false,
            ray: Some(sim.dashboards()),
            ui,
            ..ManagerOptions::default()
        },
        sims,
        ray_sims: sim.ray_sims(),
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    let cluster = tokio::spawn(manager::run_embedded_on(server, opts, async move {
        stopped.cancelled().await
    }));
    if let Some(path) = &kubeconfig_out {
        println!(
            "embedded cluster: kubectl --kubeconfig {} get rayclusters,workloads,clusterqueues",
            path.display()
        );
    }
    let mut interrupted = false;
    let result = if restored {
        println!(
            "the data directory holds a cluster already: skipping the walk-through, serving what it kept"
        );
        Ok(())
    } else if let Some(real) = &real {
        // Ctrl-C stops the story and then the cluster, whose shutdown stops the pods' processes.
        tokio::select! {
            r = crate::wiring::demo::run_real(client, step_timeout, json, pause, real) => r,
            _ = shutdown_signal() => {
                eprintln!("interrupted: stopping the pods' processes");
                interrupted = true;
                Ok(())
            }
        }
    } else {
        crate::wiring::demo::run_paced(client, step_timeout, json, pause).await
    };
    if result.is_ok() && keep_running {
        println!("the embedded cluster keeps running; Ctrl-C to stop");
        shutdown_signal().await;
    }
    stop.cancel();
    cluster.await??;
    result?;
    if interrupted {
        anyhow::bail!("the demo was interrupted");
    }
    Ok(())
}
