//! The quotagate binary: CLI wiring only; the work lives in the library.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "quotagate", version, about = "Kueue-compatible quota admission with a quota-gated, KubeRay-compatible Ray operator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every CustomResourceDefinition quotagate serves, as YAML (what config/crd/ holds).
    Crds,
    /// Check manifests offline: every problem with file, document, kind/name and field path.
    Validate {
        /// Files or directories (searched recursively for .yaml, .yml and .json).
        #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
        files: Vec<PathBuf>,
    },
    /// Run the embedded Kubernetes API server (with the node, endpoints and gateway simulators) on a
    /// loopback port, for kubectl and for `quotagate run` pointed at it.
    Apiserver {
        /// Loopback address to listen on (port 0 picks a free one).
        #[arg(long, default_value = "127.0.0.1:6443")]
        listen: SocketAddr,
        /// Write a kubeconfig for the server here (use with `kubectl --kubeconfig FILE`).
        #[arg(long)]
        kubeconfig_out: Option<PathBuf>,
        /// Do not run the simulated node agent, endpoints and gateway controllers.
        #[arg(long)]
        no_simulators: bool,
        /// How long the simulated node agent takes to start a pod.
        #[arg(long, default_value = "500ms", value_parser = parse_duration)]
        pod_start_delay: Duration,
    },
}

/// `250ms`, `2s`, `1m`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a duration like 500ms, 2s or 1m"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(format!("{s:?}: unknown unit {unit:?} (use ms, s or m)")),
    }
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
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

async fn apiserver(listen: SocketAddr, kubeconfig_out: Option<PathBuf>, simulators: bool, pod_start_delay: Duration) -> anyhow::Result<()> {
    use quotagate::embedded::{ClusterOptions, EmbeddedCluster, QuotagateAdmission, sim};
    let mut sims = if simulators { sim::SimConfig::default() } else { sim::SimConfig { node: None, gateway: None, endpoints: false } };
    if let Some(node) = sims.node.as_mut() {
        node.start_delay = pod_start_delay;
    }
    let opts = ClusterOptions { sims, listen: Some(listen), kubeconfig_out: kubeconfig_out.clone(), ..Default::default() };
    let cluster = EmbeddedCluster::start(&quotagate::api::all_crds(), Arc::new(QuotagateAdmission), opts).await?;
    let addr = cluster.addr.unwrap_or(listen);
    match &kubeconfig_out {
        Some(path) => println!("embedded API server on http://{addr}; kubeconfig written to {}", path.display()),
        None => println!("embedded API server on http://{addr}"),
    }
    shutdown_signal().await;
    cluster.stopped().await;
    Ok(())
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

fn run_async(fut: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(fut) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    match cli.command {
        Command::Apiserver { listen, kubeconfig_out, no_simulators, pod_start_delay } => {
            run_async(apiserver(listen, kubeconfig_out, !no_simulators, pod_start_delay))
        }
        Command::Crds => match quotagate::cli::crds_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: cannot render CRDs: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Validate { files } => {
            let outcome = quotagate::cli::validate::run(&files);
            print!("{}", outcome.report);
            for line in &outcome.not_managed {
                println!("{line}");
            }
            if outcome.problems > 0 {
                println!("{} problem(s) in {} document(s)", outcome.problems, outcome.documents);
                ExitCode::FAILURE
            } else {
                println!("{} document(s) valid", outcome.documents);
                ExitCode::SUCCESS
            }
        }
    }
}
