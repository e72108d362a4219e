//! The quotagate binary: CLI wiring only; the work lives in the library.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use quotagate::wiring::ray::Dashboards;

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
    /// Run the controllers: quota admission, the RayCluster job integration and the Ray operator.
    Run(RunArgs),
    /// A scripted walk-through on the embedded cluster: quota admission of RayClusters, then a RayService
    /// blue/green upgrade. Prints each step and how long it took; exits 1 if a step does not happen.
    Demo {
        /// Also serve the embedded API on this loopback address, to watch with kubectl (its
        /// credentials go to --kubeconfig-out).
        #[arg(long, requires = "kubeconfig_out")]
        listen: Option<SocketAddr>,
        /// With --listen: write a kubeconfig for that address here.
        #[arg(long, requires = "listen")]
        kubeconfig_out: Option<PathBuf>,
        /// How long each step may take.
        #[arg(long, default_value = "60s", value_parser = parse_duration)]
        step_timeout: Duration,
        /// Keep the embedded cluster running after the demo (until Ctrl-C), to look around with kubectl.
        #[arg(long, requires = "listen")]
        keep_running: bool,
        /// Print the timeline as JSON (one object per step: seconds since start and what happened)
        /// instead of the text story.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        sim: SimArgs,
    },
    /// Benchmarks: `bench e2e --config baseline`.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Run the embedded Kubernetes API server (with the node, endpoints and gateway simulators) on a
    /// loopback port, for kubectl and for `quotagate run` pointed at it.
    Apiserver {
        /// Loopback address to listen on (port 0 picks a free one).
        #[arg(long, default_value = "127.0.0.1:6443")]
        listen: SocketAddr,
        /// Write a kubeconfig for the server here (use with `kubectl --kubeconfig FILE`): its CA and
        /// bearer token are written nowhere else. Required.
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

/// Benchmarks users can run.
#[derive(Subcommand)]
enum BenchCommand {
    /// Kueue's scheduler performance runner end to end through the API: a generator config's queues and
    /// workloads against the embedded API server and the real manager; prints wall time, time to
    /// admission per class and ClusterQueue usage beside Kueue's published figures and the physical
    /// lower bound. Exits 1 when a rangespec threshold is missed.
    E2e {
        /// A shipped config (baseline, large-scale, ci) or a generator.yaml in Kueue's format.
        #[arg(long, default_value = "baseline")]
        config: String,
        /// Thresholds in Kueue's rangespec format (default: the shipped config's own).
        #[arg(long)]
        rangespec: Option<PathBuf>,
        /// Multiply every workload set's count (0.25, 0.5, 2, ...).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Print the figures as JSON.
        #[arg(long)]
        json: bool,
    },
    /// An incremental RayService upgrade (NewClusterWithIncrementalUpgrade) under load on the embedded
    /// cluster, once per traffic policy: running-capacity (ours: traffic only to replicas RUNNING at the
    /// pushed target_capacity) and timer-only (KubeRay's). Prints each timeline, the upgrade's duration
    /// and the failed requests; exits 1 if a run does not reach promotion in time.
    Incremental {
        /// stepSizePercent: traffic moved per step (1-100).
        #[arg(long, default_value_t = 25, allow_negative_numbers = true)]
        step: i64,
        /// intervalSeconds: seconds between traffic steps (1-60).
        #[arg(long, default_value_t = 2, allow_negative_numbers = true)]
        interval: i64,
        /// maxSurgePercent: capacity added or removed per step (1-100).
        #[arg(long, default_value_t = 50, allow_negative_numbers = true)]
        surge: i64,
        /// Requests per second through the service's HTTPRoute.
        #[arg(long, default_value_t = 100.0, allow_negative_numbers = true)]
        rps: f64,
        /// How long the service may take to become Ready, and then the upgrade to be promoted.
        #[arg(long, default_value = "90s", value_parser = parse_duration)]
        timeout: Duration,
        /// Print the runs as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Flags of `quotagate run`.
#[derive(clap::Args)]
struct RunArgs {
    /// Run against the embedded API server (with simulated nodes, gateway and Ray dashboards) instead of
    /// a real cluster.
    #[arg(long)]
    embedded: bool,
    /// With --embedded: also serve the API on this loopback address, for kubectl (its credentials go
    /// to --kubeconfig-out).
    #[arg(long, requires_all = ["embedded", "kubeconfig_out"])]
    listen: Option<SocketAddr>,
    /// With --embedded and --listen: write a kubeconfig for that address here.
    #[arg(long, requires = "listen")]
    kubeconfig_out: Option<PathBuf>,
    /// Without --embedded: the kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, conflicts_with = "embedded")]
    kubeconfig: Option<PathBuf>,
    /// Serve /healthz, /readyz and /metrics here.
    #[arg(long)]
    health_addr: Option<SocketAddr>,
    /// Elect a leader on a coordination Lease; only the leader writes (default: on, off with --embedded).
    #[arg(long)]
    leader_elect: Option<bool>,
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    #[arg(long, default_value = "quotagate-leader")]
    lease_name: String,
    /// This replica's identity in the Lease.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Serve the validating/defaulting webhook over TLS with tls.crt and tls.key from this directory.
    #[arg(long, conflicts_with = "embedded")]
    webhook_cert_dir: Option<PathBuf>,
    #[arg(long, default_value = "0.0.0.0:9443")]
    webhook_addr: SocketAddr,
    /// Do not run the Ray operator (RayCluster and RayService controllers): admission only.
    #[arg(long)]
    no_ray_operator: bool,
    #[command(flatten)]
    sim: SimArgs,
}

/// Delays of the embedded cluster's simulators.
#[derive(clap::Args, Clone)]
struct SimArgs {
    /// Simulated node agent: how long a pod takes to become Running and Ready.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pod_start_delay: Duration,
    /// Simulated Ray dashboard: how long a Serve deploy takes before replicas are created.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    serve_build_delay: Duration,
    /// Simulated Ray dashboard: how long a Serve replica takes to become RUNNING.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    replica_start_delay: Duration,
    /// Simulated load: requests per second through each RayService's HTTPRoute (incremental
    /// upgrades), counted in /metrics as quotagate_sim_requests_total; 0 sends none.
    #[arg(long, default_value_t = 20.0, value_parser = parse_rps)]
    sim_load_rps: f64,
}

impl SimArgs {
    fn sims(&self) -> quotagate::embedded::sim::SimConfig {
        let mut sims = quotagate::embedded::sim::SimConfig::default();
        if let Some(node) = sims.node.as_mut() {
            node.start_delay = self.pod_start_delay;
        }
        sims
    }
    fn ray_sims(&self) -> quotagate::wiring::raysim::RaySimOptions {
        quotagate::wiring::raysim::RaySimOptions { load_rps: self.sim_load_rps, ..Default::default() }
    }
    fn dashboards(&self) -> Dashboards {
        Dashboards::simulated(self.serve_build_delay, self.replica_start_delay)
    }
}

/// A request rate: finite, 0 to 10 million per second.
fn parse_rps(s: &str) -> Result<f64, String> {
    let r: f64 = s.parse().map_err(|_| format!("{s:?} is not a number of requests per second"))?;
    if !(0.0..=quotagate::rayservice::dashboard::sim::loadgen::MAX_REQUESTS_PER_SECOND).contains(&r) {
        return Err(format!("{s}: requests per second must be between 0 and {}", quotagate::rayservice::dashboard::sim::loadgen::MAX_REQUESTS_PER_SECOND));
    }
    Ok(r)
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
    if !listen.ip().is_loopback() {
        return Err(quotagate::embedded::ServeError::NotLoopback(listen).into());
    }
    let Some(path) = kubeconfig_out else {
        anyhow::bail!("--kubeconfig-out is required: the listener's CA and token are written only there, and it refuses requests without them");
    };
    let opts = ClusterOptions { sims, listen: Some(listen), kubeconfig_out: Some(path.clone()), ..Default::default() };
    let cluster = EmbeddedCluster::start(&quotagate::api::all_crds(), Arc::new(QuotagateAdmission), opts).await?;
    let addr = cluster.addr.unwrap_or(listen);
    println!("embedded API server on https://{addr}; kubeconfig (CA and token) written to {}", path.display());
    shutdown_signal().await;
    cluster.stopped().await;
    Ok(())
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    use quotagate::wiring::manager::{self, EmbeddedOptions, ManagerOptions};
    let mut opts = ManagerOptions {
        health_addr: args.health_addr,
        leader_election: args.leader_elect.unwrap_or(!args.embedded),
        lease_namespace: args.lease_namespace.clone(),
        lease_name: args.lease_name.clone(),
        ray: (!args.no_ray_operator).then(|| if args.embedded { args.sim.dashboards() } else { Dashboards::Http }),
        ..ManagerOptions::default()
    };
    if let Some(id) = &args.identity {
        opts.identity = id.clone();
    }
    if args.embedded {
        let embedded = EmbeddedOptions { listen: args.listen, kubeconfig_out: args.kubeconfig_out.clone(), manager: opts, sims: args.sim.sims(), ray_sims: args.sim.ray_sims() };
        manager::run_embedded(embedded, shutdown_signal()).await?;
        return Ok(());
    }
    let client = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)?;
            let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
            kube::Client::try_from(config)?
        }
        None => kube::Client::try_default().await?,
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let _stop_webhook = cancel.clone().drop_guard();
    if let Some(dir) = &args.webhook_cert_dir {
        let tls = quotagate::wiring::webhook::tls_config(dir)?;
        let (tx, _rx) = tokio::sync::oneshot::channel();
        let c = cancel.clone();
        let addr = args.webhook_addr;
        tokio::spawn(async move {
            if let Err(e) = quotagate::wiring::webhook::serve(addr, tls, tx, c.cancelled_owned()).await {
                tracing::error!(error = %e, "webhook server stopped");
            }
        });
    }
    manager::run_manager(client, opts, shutdown_signal()).await?;
    Ok(())
}

async fn demo(listen: Option<SocketAddr>, kubeconfig_out: Option<PathBuf>, step_timeout: Duration, keep_running: bool, json: bool, sim: SimArgs) -> anyhow::Result<()> {
    use quotagate::wiring::manager::{self, EmbeddedOptions, ManagerOptions};
    let server = manager::embedded_server();
    let client = server.client();
    let opts = EmbeddedOptions {
        listen,
        kubeconfig_out: kubeconfig_out.clone(),
        manager: ManagerOptions { leader_election: false, ray: Some(sim.dashboards()), ..ManagerOptions::default() },
        sims: sim.sims(),
        ray_sims: sim.ray_sims(),
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    let cluster = tokio::spawn(manager::run_embedded_on(server, opts, async move { stopped.cancelled().await }));
    if let Some(path) = &kubeconfig_out {
        println!("embedded cluster: kubectl --kubeconfig {} get rayclusters,workloads,clusterqueues", path.display());
    }
    let result = quotagate::wiring::demo::run(client, step_timeout, json).await;
    if result.is_ok() && keep_running {
        println!("the embedded cluster keeps running; Ctrl-C to stop");
        shutdown_signal().await;
    }
    stop.cancel();
    cluster.await??;
    result?;
    Ok(())
}

/// Logs to stderr, filtered by RUST_LOG (default: `default_level`).
fn init_tracing(default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

fn run_async(fut: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    // Debug builds of the controllers' futures nest deeply; 8 MiB worker stacks leave room.
    let runtime = match tokio::runtime::Builder::new_multi_thread().thread_stack_size(8 << 20).enable_all().build() {
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
    // The demo prints its own story on stdout; controller logs would drown it.
    // So does a benchmark's table.
    init_tracing(if matches!(cli.command, Command::Demo { .. } | Command::Bench(_)) { "warn" } else { "info" });
    match cli.command {
        Command::Run(args) => run_async(run(args)),
        Command::Demo { listen, kubeconfig_out, step_timeout, keep_running, json, sim } => {
            run_async(demo(listen, kubeconfig_out, step_timeout, keep_running, json, sim))
        }
        Command::Apiserver { listen, kubeconfig_out, no_simulators, pod_start_delay } => {
            run_async(apiserver(listen, kubeconfig_out, !no_simulators, pod_start_delay))
        }
        Command::Bench(BenchCommand::E2e { config, rangespec, scale, json }) => run_async(async move {
            let misses = quotagate::cli::bench::e2e(&config, rangespec.as_deref(), scale, json, !json)
                .await
                .map_err(anyhow::Error::msg)?;
            if misses.is_empty() { Ok(()) } else { anyhow::bail!("{} rangespec threshold(s) missed", misses.len()) }
        }),
        Command::Bench(BenchCommand::Incremental { step, interval, surge, rps, timeout, json }) => run_async(async move {
            let opts = quotagate::cli::bench::incremental::Options { step, interval, surge, rps, timeout, ..Default::default() };
            quotagate::cli::bench::incremental(&opts, json).await?;
            Ok(())
        }),
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
