//! The quotagate binary: CLI wiring only; the work lives in the library.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// mimalloc instead of glibc's malloc: `perf` on `bench e2e` put a third of all CPU in glibc's
/// allocator (`_int_malloc`, `malloc_consolidate`, arena lock waits) under the API server's and the
/// controllers' small, cross-thread allocations.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use quotagate::api::ray::validation::RayFeatureGates;
use quotagate::wiring::install::InstallOptions;
use quotagate::wiring::ray::Dashboards;

#[derive(Parser)]
#[command(
    name = "quotagate",
    version,
    about = "Kueue-compatible quota admission with a quota-gated, KubeRay-compatible Ray operator"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every CustomResourceDefinition quotagate serves, as YAML (what config/crd/ holds).
    Crds,
    /// Print everything a cluster needs, in install order (Namespace, CRDs, RBAC, the manager's
    /// ConfigMap, Services, Deployment, webhook configurations): `kubectl apply --server-side -f -`.
    InstallManifests {
        /// The manager's image.
        #[arg(long, default_value = quotagate::wiring::install::IMAGE)]
        image: String,
        #[arg(long, default_value = quotagate::wiring::install::NAMESPACE)]
        namespace: String,
        #[arg(long, default_value_t = 2)]
        replicas: u32,
        /// The manager's RUST_LOG (`info`, `quotagate=debug,info`).
        #[arg(long, default_value = "info")]
        log_level: String,
        /// A Kueue Configuration file for the manager's ConfigMap (default: config/manager's).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The manager reaches Ray dashboards through the API server's service proxy (its
        /// --use-kubernetes-proxy, with the `services/proxy` grant); off by default, as in KubeRay.
        #[arg(long)]
        use_kubernetes_proxy: bool,
    },
    /// Check manifests offline: every problem with file, document, kind/name and field path.
    Validate {
        /// Files or directories (searched recursively for .yaml, .yml and .json).
        #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        /// KubeRay's feature gates, as `Name=true,...` (KubeRay v1.7 names and defaults; see README).
        #[arg(long, default_value = "", value_parser = quotagate::api::ray::features::parse)]
        feature_gates: RayFeatureGates,
    },
    /// The quota a RayService needs at steady state and at the peak of its upgrade strategy, per
    /// resource; with ClusterQueue files or a cluster, whether each would be admitted now and, if not,
    /// the shortfall and who holds the quota.
    Plan {
        /// The RayService (or several: each is planned, then what they need together through one
        /// queue), plus any ClusterQueue, Cohort, ResourceFlavor, LocalQueue and Workload to check
        /// against (several files allowed).
        #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        /// The changed RayService the upgrade goes to (default: the same spec, e.g. an image bump).
        #[arg(long)]
        to: Option<PathBuf>,
        /// Check against this ClusterQueue (in the files, else in the cluster).
        #[arg(long)]
        cluster_queue: Option<String>,
        /// Check against this cluster (default with --cluster-queue and no queues in the files:
        /// $KUBECONFIG or ~/.kube/config).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// How many such services upgrade at once through the queue: the spare quota they need
        /// (default 2).
        #[arg(long)]
        concurrent: Option<u32>,
        #[arg(short = 'o', long = "output", value_enum, default_value_t = quotagate::cli::plan::Output::Table)]
        output: quotagate::cli::plan::Output,
    },
    /// Why a Workload, RayService or RayCluster is pending or gated, in numbers: the scheduler's own
    /// record of its last decision (requested, available per flavor, borrowable, preemptible,
    /// holders), and for a RayService its upgrade state and each child's gate.
    Explain {
        #[arg(value_enum)]
        kind: quotagate::cli::explain::Kind,
        name: String,
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
        /// Default: $KUBECONFIG or ~/.kube/config.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
    },
    /// Pending workloads of a ClusterQueue or LocalQueue with their positions (what Kueue's
    /// visibility API answers), as a table.
    PendingWorkloads {
        #[arg(long, conflicts_with = "local_queue", required_unless_present = "local_queue")]
        cluster_queue: Option<String>,
        #[arg(long)]
        local_queue: Option<String>,
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
    },
    /// kueuectl's `list`: ClusterQueues, LocalQueues, Workloads or ResourceFlavors as tables.
    List {
        #[command(subcommand)]
        what: quotagate::cli::kueuectl::ListCmd,
        #[command(flatten)]
        conn: quotagate::cli::kueuectl::Conn,
    },
    /// kueuectl's `stop`: hold a ClusterQueue or LocalQueue (spec.stopPolicy), deactivate a Workload.
    Stop {
        #[command(subcommand)]
        what: quotagate::cli::kueuectl::StopCmd,
        #[command(flatten)]
        conn: quotagate::cli::kueuectl::Conn,
    },
    /// kueuectl's `resume`: undo `stop`.
    Resume {
        #[command(subcommand)]
        what: quotagate::cli::kueuectl::ResumeCmd,
        #[command(flatten)]
        conn: quotagate::cli::kueuectl::Conn,
    },
    /// kueuectl's `create clusterqueue|localqueue|resourceflavor`.
    Create {
        #[command(subcommand)]
        what: quotagate::cli::kueuectl::CreateCmd,
        #[command(flatten)]
        conn: quotagate::cli::kueuectl::Conn,
    },
    #[command(flatten)]
    Passthrough(quotagate::cli::kueuectl::passthrough::Commands),
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
        /// How long each step may take [default: 60s; 300s with --real-ray].
        #[arg(long, value_parser = parse_duration)]
        step_timeout: Option<Duration>,
        /// Run the story on real Ray: rayproject/ray pods run the Ray of --ray-venv as processes (each
        /// in a network namespace of its own: needs root, iproute2 and scripts/install-ray.sh), the
        /// RayService deploys a real Serve app, and real requests go to it through the upgrade, their
        /// counts printed at every step.
        #[arg(long)]
        real_ray: bool,
        /// With --real-ray: the venv with Ray Serve (scripts/install-ray.sh).
        #[arg(long, default_value = ".venv-ray", requires = "real_ray")]
        ray_venv: PathBuf,
        /// Keep the embedded cluster running after the demo (until Ctrl-C), to look around with kubectl
        /// (needs --listen) or in the web view (needs --ui-addr).
        #[arg(long)]
        keep_running: bool,
        /// With --keep-running: keep the cluster's objects in this directory. Started again on a
        /// directory that holds them, the walk-through is skipped and the kept cluster is served.
        #[arg(long, requires = "keep_running")]
        data_dir: Option<PathBuf>,
        /// Print the timeline as JSON (one object per step: seconds since start and what happened)
        /// instead of the text story.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        ui: DemoUiArgs,
        #[command(flatten)]
        sim: SimArgs,
    },
    /// Benchmarks: `bench e2e --config baseline`.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// HTTP/1.1 load at a fixed rate on a bounded keep-alive pool; prints per-second counts (sent, 2xx,
    /// non-2xx, connection errors, timeouts) and which cluster answered, as JSON.
    Load(LoadArgs),
    /// Seeded random runs of queue-managed RayService upgrades under faults on the embedded cluster,
    /// with DESIGN.md's invariants checked on every event and liveness checked once faults stop.
    /// Prints a line per run and a summary; a failing seed is printed with the shortest action list
    /// that still fails. Exits 1 on any failure.
    Chaos {
        /// The first seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// How many seeds, from --seed on.
        #[arg(long, default_value_t = 1)]
        runs: u64,
        /// Runs at once, each on its own embedded cluster.
        #[arg(long, default_value_t = 4)]
        jobs: usize,
        /// Re-runs allowed to shrink each failing seed's action list (0: no shrinking).
        #[arg(long, default_value_t = 40)]
        shrink: usize,
        /// `contention`: several services upgrading at once in quota sized for them to take turns;
        /// `clusters`: queue-managed RayClusters of their own edited at random (replicas, requests,
        /// elastic annotation).
        #[arg(long, value_enum, default_value_t = quotagate::cli::chaos::Scenario::Mixed)]
        scenario: quotagate::cli::chaos::Scenario,
    },
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
        /// Keep every object in this directory (an embedded redb database), durable before the API
        /// answers, and load it on start; without it the state lives in memory only.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// How long an Event lives after its last write (kube-apiserver's --event-ttl).
        #[arg(long, default_value = "1h", value_parser = parse_duration)]
        event_ttl: Duration,
        #[command(flatten)]
        limits: ApiLimitsArgs,
        #[command(flatten)]
        pods: RuntimeArgs,
        /// Serve as a real cluster's API server for a separately installed quotagate: no quotagate
        /// defaulting or validation in the server, registered admission webhooks called, apps/v1
        /// Deployments served (stored only). The install manifest applies and the manager runs
        /// beside it as its Deployment's pods would.
        #[arg(long)]
        real_cluster: bool,
    },
}

/// The embedded API server's storage quota (etcd's) and kube-apiserver's in-flight limits for its
/// listener (429 with Retry-After past them; watches are not counted, the in-process controllers are
/// exempt).
#[derive(clap::Args, Clone, Copy, Debug)]
struct ApiLimitsArgs {
    /// Read requests served at once on the embedded API listener.
    #[arg(long, default_value_t = 400)]
    max_requests_inflight: usize,
    /// Mutating requests served at once on the embedded API listener.
    #[arg(long, default_value_t = 200)]
    max_mutating_requests_inflight: usize,
    /// Bytes of stored objects (as compact JSON) past which writes that grow the store are refused
    /// with etcd's "database space exceeded"; reads, watches and deletes go on.
    #[arg(long, default_value_t = quotagate::embedded::store::DEFAULT_QUOTA_BYTES)]
    storage_quota: usize,
}

impl ApiLimitsArgs {
    fn store(self) -> quotagate::embedded::StoreConfig {
        quotagate::embedded::StoreConfig {
            quota_bytes: self.storage_quota,
            ..Default::default()
        }
    }

    fn limits(self) -> quotagate::embedded::listener::ListenerLimits {
        quotagate::embedded::listener::ListenerLimits {
            max_requests_inflight: self.max_requests_inflight,
            max_mutating_requests_inflight: self.max_mutating_requests_inflight,
            ..Default::default()
        }
    }
}

#[derive(clap::Args, Debug)]
struct LoadArgs {
    /// `http://host:port/path` (e.g. a serve Service's ClusterIP).
    #[arg(long)]
    url: String,
    #[arg(long, default_value_t = 10)]
    rps: u32,
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Requests in flight at most (connections open at most).
    #[arg(long, default_value_t = 8)]
    connections: usize,
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    timeout: Duration,
    /// The answer's JSON field naming the cluster that answered.
    #[arg(long, default_value = "cluster")]
    cluster_field: String,
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
        /// Instead: one quota-gated incremental upgrade on real Ray (rayproject/ray pods run as
        /// processes: root, iproute2 and scripts/install-ray.sh), the load through the Gateway's real
        /// proxy; prints the times from the quota raise to the new cluster's first pod, its first
        /// answer and promotion, and the failed requests. Use a --timeout of minutes.
        #[arg(long, conflicts_with = "json")]
        real_ray: bool,
        /// With --real-ray: the venv with Ray Serve.
        #[arg(long, default_value = ".venv-ray", requires = "real_ray")]
        ray_venv: PathBuf,
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
    /// With --embedded: keep every object in this directory (an embedded redb database), durable
    /// before the API answers, and load it on start; without it the state lives in memory only.
    #[arg(long, requires = "embedded")]
    data_dir: Option<PathBuf>,
    /// With --embedded: how long an Event lives after its last write (kube-apiserver's --event-ttl).
    #[arg(long, default_value = "1h", value_parser = parse_duration, requires = "embedded")]
    event_ttl: Duration,
    #[command(flatten)]
    limits: ApiLimitsArgs,
    /// Without --embedded: the kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, conflicts_with = "embedded")]
    kubeconfig: Option<PathBuf>,
    /// Serve /healthz, /readyz and /metrics here.
    #[arg(long)]
    health_addr: Option<SocketAddr>,
    /// Elect a leader on a coordination Lease; only the leader writes (default: on, off with --embedded).
    #[arg(long)]
    leader_elect: Option<bool>,
    /// The Lease's namespace [default: default].
    #[arg(long, env = "POD_NAMESPACE")]
    lease_namespace: Option<String>,
    /// The Lease's name [default: quotagate-leader].
    #[arg(long)]
    lease_name: Option<String>,
    /// This replica's identity in the Lease.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Serve the validating/defaulting webhook over TLS with tls.crt and tls.key from this directory
    /// (cert-manager's). Without it the manager makes and renews its own certificate (the Kueue
    /// Configuration's internalCertManagement, on unless `enable: false`), in the Secret of
    /// $POD_NAMESPACE [default: quotagate-system].
    #[arg(long, conflicts_with = "embedded")]
    webhook_cert_dir: Option<PathBuf>,
    /// [default: 0.0.0.0:9443]
    #[arg(long)]
    webhook_addr: Option<SocketAddr>,
    /// A Kueue manager configuration file (`config.kueue.x-k8s.io` `Configuration`, as Kueue's
    /// controller_manager_config.yaml): waitForPodsReady, fairSharing, admissionFairSharing,
    /// leaderElection, health and webhook.port are used; flags win over it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Do not run the Ray operator (RayCluster and RayService controllers): admission only.
    #[arg(long)]
    no_ray_operator: bool,
    /// Reach Ray dashboards through the API server's service proxy (KubeRay's flag of the same name),
    /// for a manager outside the cluster network; needs `services/proxy` (`install-manifests
    /// --use-kubernetes-proxy` grants it).
    #[arg(long)]
    use_kubernetes_proxy: bool,
    /// KubeRay's feature gates, as `Name=true,...` (KubeRay v1.7 names and defaults; see README).
    #[arg(long, default_value = "", value_parser = quotagate::api::ray::features::parse)]
    feature_gates: RayFeatureGates,
    /// Drop a RayService upgrade whose pending cluster has not taken the traffic this long after quota
    /// admitted it (releasing its quota; the active cluster keeps serving). Per service with the
    /// `quotagate.io/upgrade-deadline` annotation. Off by default, as KubeRay has no such bound.
    #[arg(long, value_parser = parse_duration)]
    upgrade_deadline: Option<Duration>,
    /// Kueue's PrioritizePreemptorWorkloads feature gate (alpha, off in Kueue): a preemptor waiting
    /// for its victims goes before other ClusterQueues' heads, so they cannot take its quota. Also
    /// on with `featureGates: {PrioritizePreemptorWorkloads: true}` in `--config`.
    #[arg(long)]
    prioritize_preemptor_workloads: bool,
    /// How long a wait-for cycle among RayService upgrades (each waiting for quota the other holds)
    /// may last before the growth of the lower-priority, then younger, upgrade is released
    /// (`GrowthPreempted`, reason `WaitForCycle`); its old cluster keeps serving and it retries.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    cycle_break_after: Duration,
    #[command(flatten)]
    ui: UiArgs,
    #[command(flatten)]
    sim: SimArgs,
    #[command(flatten)]
    pods: RuntimeArgs,
}

/// How the embedded cluster runs pods.
#[derive(clap::Args, Clone)]
struct RuntimeArgs {
    /// `sim`: the node agent simulates every pod. `process`: pods with a rayproject/ray image run
    /// their real command with the Ray of --ray-venv, each in a network namespace of its own (needs
    /// root and iproute2; see src/embedded/README.md); other pods stay simulated.
    #[arg(long, value_enum, default_value = "sim")]
    runtime: PodRuntime,
    /// With --runtime process: the venv with Ray Serve (scripts/install-ray.sh).
    #[arg(long, default_value = ".venv-ray")]
    ray_venv: PathBuf,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum PodRuntime {
    Sim,
    Process,
}

impl RuntimeArgs {
    /// Starts the process runtime (claiming a pod network) when asked for, into the node agent.
    fn apply(&self, sims: &mut quotagate::embedded::sim::SimConfig) -> anyhow::Result<()> {
        if self.runtime == PodRuntime::Sim {
            return Ok(());
        }
        let Some(node) = sims.node.as_mut() else {
            anyhow::bail!("--runtime process runs pods for the node agent, which --no-simulators turns off");
        };
        let cfg = quotagate::embedded::sim::process::ProcessConfig {
            ray_venv: self.ray_venv.clone(),
            ..Default::default()
        };
        let rt = quotagate::embedded::sim::process::ProcessRuntime::start(cfg)?;
        println!(
            "process runtime: rayproject/ray pods run as processes, pod network {}",
            rt.pod_cidr()
        );
        node.runtime = Some(rt);
        Ok(())
    }
}

/// The web view's flags.
#[derive(clap::Args, Clone)]
struct UiArgs {
    /// Serve the web view (quota, queues, RayService upgrades; live) here. Loopback only unless
    /// --ui-allow-remote; without a value: 127.0.0.1:8080.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = quotagate::wiring::ui::DEFAULT_ADDR)]
    ui_addr: Option<SocketAddr>,
    /// Allow a non-loopback --ui-addr: everyone who reaches it sees every queue, workload and RayService.
    #[arg(long, requires = "ui_addr")]
    ui_allow_remote: bool,
}

/// `demo`'s pacing for the web view.
#[derive(clap::Args, Clone)]
struct DemoUiArgs {
    #[command(flatten)]
    ui: UiArgs,
    /// With --ui-addr: hold the waiting RayCluster and the gated upgrade this long each, to watch them.
    #[arg(long, default_value = "10s", value_parser = parse_duration, requires = "ui_addr")]
    ui_pause: Duration,
}

impl UiArgs {
    /// Binds the view's address now, so a refused or busy address fails before anything starts.
    fn bind(&self) -> anyhow::Result<Option<quotagate::wiring::ui::UiListener>> {
        let Some(addr) = self.ui_addr else { return Ok(None) };
        Ok(Some(quotagate::wiring::ui::UiListener::bind(
            addr,
            self.ui_allow_remote,
        )?))
    }
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
        quotagate::wiring::raysim::RaySimOptions {
            load_rps: self.sim_load_rps,
            ..Default::default()
        }
    }
    fn dashboards(&self) -> Dashboards {
        Dashboards::simulated(self.serve_build_delay, self.replica_start_delay)
    }
}

/// A request rate: finite, 0 to 10 million per second.
fn parse_rps(s: &str) -> Result<f64, String> {
    let r: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of requests per second"))?;
    if !(0.0..=quotagate::rayservice::dashboard::sim::loadgen::MAX_REQUESTS_PER_SECOND).contains(&r) {
        return Err(format!(
            "{s}: requests per second must be between 0 and {}",
            quotagate::rayservice::dashboard::sim::loadgen::MAX_REQUESTS_PER_SECOND
        ));
    }
    Ok(r)
}

/// `250ms`, `2s`, `1m`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 500ms, 2s or 1m"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n.saturating_mul(60))),
        "h" => Ok(Duration::from_secs(n.saturating_mul(3600))),
        _ => Err(format!("{s:?}: unknown unit {unit:?} (use ms, s, m or h)")),
    }
}

/// Reads `--config`: a Kueue `Configuration`; an error names the file and the field.
fn load_config(path: &std::path::Path) -> anyhow::Result<quotagate::api::kueue::config::Configuration> {
    let text =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("--config {}: {e}", path.display()))?;
    let cfg = quotagate::api::kueue::config::Configuration::parse(&text)
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
fn fair_sharing_config(
    s: Vec<quotagate::api::kueue::config::PreemptionStrategy>,
) -> quotagate::queue::FairSharingConfig {
    use quotagate::api::kueue::config::PreemptionStrategy as S;
    use quotagate::queue::FairPreemptionStrategy as F;
    let strategies = s
        .into_iter()
        .map(|x| match x {
            S::LessThanOrEqualToFinalShare => F::LessThanOrEqualToFinalShare,
            S::LessThanInitialShare => F::LessThanInitialShare,
        })
        .collect();
    quotagate::queue::FairSharingConfig { strategies }
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

/// The embedded API server every command serves: quotagate's CRDs and admission, kept in
/// `data_dir` when given.
fn embedded_server(
    data_dir: Option<PathBuf>,
    event_ttl: Duration,
    limits: Option<ApiLimitsArgs>,
    frameworks: quotagate::api::kueue::config::Frameworks,
    managed: quotagate::api::kueue::config::ManagedJobs,
) -> anyhow::Result<Arc<quotagate::embedded::EmbeddedServer>> {
    use quotagate::embedded::{EmbeddedServer, QuotagateAdmission, ServerConfig};
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
        &quotagate::api::all_crds(),
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
async fn apiserver(
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
    use quotagate::embedded::{
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
        return Err(quotagate::embedded::ServeError::NotLoopback(listen).into());
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
        Arc::new(quotagate::embedded::crd_schema::CrdSchemaAdmission)
    } else {
        Arc::new(QuotagateAdmission::default())
    };
    // The CRDs still come with the server here (not only from the manifest) so the simulators,
    // which watch RayClusters, start; applying the manifest's CRDs over them changes nothing.
    let cluster = EmbeddedCluster::start(&quotagate::api::all_crds(), hook, opts).await?;
    if simulated_heads {
        // Simulated Ray heads answer `services/proxy` (KubeRay's --use-kubernetes-proxy) as real ones would.
        let sim = quotagate::rayservice::dashboard::sim::RaySim::new(Default::default());
        cluster.server.pod_networks.register(Arc::new(
            quotagate::wiring::sim_pod_network::SimulatedHeads::new(Arc::new(sim)),
        ));
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

async fn run(args: RunArgs) -> anyhow::Result<()> {
    if args.pods.runtime == PodRuntime::Process && !args.embedded {
        anyhow::bail!("--runtime process runs the embedded cluster's pods: use it with --embedded");
    }
    use quotagate::wiring::manager::{self, EmbeddedOptions, ManagerOptions};
    use quotagate::wiring::webhook::WebhookCerts;
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
            if args.embedded {
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
        frameworks: config.as_ref().map(|c| c.frameworks()).unwrap_or_default(),
        managed_jobs: config.as_ref().map(|c| c.managed_jobs()).unwrap_or_default(),
        cycle_break_after: args.cycle_break_after,
        ..ManagerOptions::default()
    };
    if let Some(id) = &args.identity {
        opts.identity = id.clone();
    }
    if args.embedded {
        let mut sims = args.sim.sims();
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
    let client = quotagate::cli::kube_client(args.kubeconfig.as_deref())
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
        (Some(dir), _) => Some(WebhookCerts::Static(quotagate::wiring::webhook::tls_config(dir)?)),
        // Kueue's internalCertManagement, on unless the configuration turns it off.
        (None, Some(m)) => Some(WebhookCerts::Managed(quotagate::wiring::certs::CertOptions {
            namespace: args
                .lease_namespace
                .clone()
                .unwrap_or_else(|| quotagate::wiring::install::NAMESPACE.into()),
            service: m.service_name,
            secret: m.secret_name,
            check_every: Duration::from_secs(30),
        })),
        (None, None) => None,
    };
    opts.webhook = certs.map(|certs| quotagate::wiring::webhook::WebhookServing { addr, certs });
    manager::run_manager(client, opts, shutdown_signal()).await?;
    Ok(())
}

/// `demo --real-ray`: refuses, naming everything missing, when this host cannot run Ray pods as
/// processes; else starts the process runtime into `sims`.
fn real_ray(
    venv: &std::path::Path,
    sims: &mut quotagate::embedded::sim::SimConfig,
) -> anyhow::Result<quotagate::wiring::demo_real::RealRay> {
    use quotagate::embedded::sim::process::{ProcessConfig, ProcessRuntime, missing};
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
    Ok(quotagate::wiring::demo_real::RealRay::new()?)
}

#[allow(
    clippy::too_many_arguments,
    reason = "one parameter per flag of `quotagate demo`"
)]
async fn demo(
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
    use quotagate::wiring::manager::{self, EmbeddedOptions, ManagerOptions};
    let step_timeout = step_timeout.unwrap_or(Duration::from_secs(if real.is_some() { 300 } else { 60 }));
    let mut sims = sim.sims();
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
        quotagate::embedded::events::DEFAULT_TTL,
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
            r = quotagate::wiring::demo::run_real(client, step_timeout, json, pause, real) => r,
            _ = shutdown_signal() => {
                eprintln!("interrupted: stopping the pods' processes");
                interrupted = true;
                Ok(())
            }
        }
    } else {
        quotagate::wiring::demo::run_paced(client, step_timeout, json, pause).await
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

/// Logs to stderr, filtered by RUST_LOG (default: `default_level`).
fn init_tracing(default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    // Colours only for a person at a terminal: a log redirected to a file or a CI log stays plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

fn run_async(fut: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    // Debug builds of the controllers' futures nest deeply; 8 MiB worker stacks leave room.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(8 << 20)
        .enable_all()
        .build()
    {
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

/// The commands whose own output is the point (a story, a table, a report): controller logs would
/// drown it, so they log only warnings.
fn prints_own_output(command: &Command) -> bool {
    matches!(
        command,
        Command::Demo { .. }
            | Command::Bench(_)
            | Command::Load(_)
            | Command::Chaos { .. }
            | Command::Plan { .. }
            | Command::Explain { .. }
            | Command::PendingWorkloads { .. }
            | Command::List { .. }
            | Command::Stop { .. }
            | Command::Resume { .. }
            | Command::Create { .. }
    )
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo prints its own story on stdout; controller logs would drown it.
    // So does a benchmark's table.
    init_tracing(if prints_own_output(&cli.command) {
        "warn"
    } else {
        "info"
    });
    match cli.command {
        Command::Run(args) => run_async(run(args)),
        Command::Demo {
            listen,
            kubeconfig_out,
            step_timeout,
            real_ray,
            ray_venv,
            keep_running,
            data_dir,
            json,
            ui,
            sim,
        } => run_async(demo(
            listen,
            kubeconfig_out,
            step_timeout,
            real_ray.then_some(ray_venv),
            keep_running,
            data_dir,
            json,
            ui,
            sim,
        )),
        Command::Apiserver {
            listen,
            kubeconfig_out,
            no_simulators,
            pod_start_delay,
            data_dir,
            event_ttl,
            limits,
            real_cluster,
            pods,
        } => run_async(apiserver(
            listen,
            kubeconfig_out,
            !no_simulators,
            pod_start_delay,
            data_dir,
            event_ttl,
            limits,
            real_cluster,
            pods,
        )),
        Command::Chaos {
            seed,
            runs,
            jobs,
            shrink,
            scenario,
        } => run_async(chaos(seed, runs, jobs, shrink, scenario)),
        Command::Bench(BenchCommand::E2e {
            config,
            rangespec,
            scale,
            json,
        }) => run_async(async move {
            let misses = quotagate::cli::bench::e2e(&config, rangespec.as_deref(), scale, json, !json)
                .await
                .map_err(anyhow::Error::msg)?;
            if misses.is_empty() {
                Ok(())
            } else {
                anyhow::bail!("{} rangespec threshold(s) missed", misses.len())
            }
        }),
        Command::Bench(BenchCommand::Incremental {
            step,
            interval,
            surge,
            rps,
            timeout,
            json,
            real_ray: true,
            ray_venv,
        }) => run_async(async move {
            use quotagate::cli::bench::incremental_real as real;
            // The same checks as the simulated run's.
            quotagate::cli::bench::incremental::Options {
                step,
                interval,
                surge,
                rps,
                timeout,
                ..Default::default()
            }
            .check()?;
            let _ = json;
            let rps = (rps.round() as u32).max(1);
            let opts = real::RealOptions {
                incremental: true,
                step,
                interval,
                surge,
                rps,
                ray_venv,
                timeout,
            };
            let figures = real::run(&opts).await.map_err(anyhow::Error::msg)?;
            println!("{}", real::render(&opts, &figures));
            if figures.load.failed > 0 {
                anyhow::bail!("{} request(s) failed", figures.load.failed);
            }
            Ok(())
        }),
        Command::Bench(BenchCommand::Incremental {
            step,
            interval,
            surge,
            rps,
            timeout,
            json,
            ..
        }) => run_async(async move {
            let opts = quotagate::cli::bench::incremental::Options {
                step,
                interval,
                surge,
                rps,
                timeout,
                ..Default::default()
            };
            quotagate::cli::bench::incremental(&opts, json).await?;
            Ok(())
        }),
        Command::Load(a) => run_async(async move {
            let opts = quotagate::cli::load::Options {
                url: a.url,
                rps: a.rps,
                duration: a.duration,
                connections: a.connections,
                timeout: a.timeout,
                cluster_field: a.cluster_field,
            };
            let report =
                quotagate::cli::load::run(&opts, tokio_util::sync::CancellationToken::new(), None).await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(())
        }),
        Command::Plan {
            files,
            to,
            cluster_queue,
            kubeconfig,
            concurrent,
            output,
        } => run_async(async move {
            let opts = quotagate::cli::plan::Options {
                files,
                to,
                cluster_queue,
                kubeconfig,
                concurrent,
            };
            let plans = quotagate::cli::plan::run_all(&opts).await?;
            print!(
                "{}",
                quotagate::cli::plan::several::render_all(&plans, output).map_err(anyhow::Error::msg)?
            );
            Ok(())
        }),
        Command::Explain {
            kind,
            name,
            namespace,
            kubeconfig,
        } => run_async(async move {
            let client = quotagate::cli::kube_client(kubeconfig.as_deref())
                .await
                .map_err(anyhow::Error::msg)?;
            print!(
                "{}",
                quotagate::cli::explain::run(&client, kind, &namespace, &name).await?
            );
            Ok(())
        }),
        Command::PendingWorkloads {
            cluster_queue,
            local_queue,
            namespace,
            kubeconfig,
        } => run_async(pending_workloads(
            cluster_queue,
            local_queue,
            namespace,
            kubeconfig,
        )),
        Command::List { what, conn } => run_async(async move {
            let (client, ns) = conn.client().await?;
            let out = quotagate::cli::kueuectl::list::run(&client, &ns, &what).await?;
            print!("{}", out.stdout);
            eprint!("{}", out.stderr);
            Ok(())
        }),
        Command::Stop { what, conn } => run_async(async move {
            let (client, ns) = conn.client().await?;
            print!(
                "{}",
                quotagate::cli::kueuectl::update::apply(
                    &client,
                    &ns,
                    &quotagate::cli::kueuectl::update::stop(&what)
                )
                .await?
            );
            Ok(())
        }),
        Command::Resume { what, conn } => run_async(async move {
            let (client, ns) = conn.client().await?;
            print!(
                "{}",
                quotagate::cli::kueuectl::update::apply(
                    &client,
                    &ns,
                    &quotagate::cli::kueuectl::update::resume(&what)
                )
                .await?
            );
            Ok(())
        }),
        Command::Create { what, conn } => run_async(async move {
            let (client, ns) = conn.client().await?;
            print!("{}", what.run(&client, &ns).await?);
            Ok(())
        }),
        Command::Passthrough(c) => {
            eprintln!("error: {}", c.exec());
            ExitCode::FAILURE
        }
        Command::InstallManifests {
            image,
            namespace,
            replicas,
            log_level,
            config,
            use_kubernetes_proxy,
        } => install_manifests(
            InstallOptions {
                image,
                namespace,
                replicas,
                log_level,
                config: String::new(),
                use_kubernetes_proxy,
            },
            config,
        ),
        Command::Crds => print_crds(),
        Command::Validate { files, feature_gates } => validate(&files, feature_gates),
    }
}

/// `quotagate chaos`: a line per run, then the summary; an error when any run failed.
async fn chaos(
    seed: u64,
    runs: u64,
    jobs: usize,
    shrink: usize,
    scenario: quotagate::cli::chaos::Scenario,
) -> anyhow::Result<()> {
    let opts = quotagate::cli::chaos::Options {
        seeds: seed..seed.saturating_add(runs),
        jobs,
        shrink,
    };
    let summary = quotagate::cli::chaos::run_many_scenario(scenario, &opts, |line| println!("{line}")).await;
    for f in &summary.failures {
        println!("{f}");
    }
    println!("{summary}");
    if summary.passed() {
        Ok(())
    } else {
        anyhow::bail!("{} of {} chaos runs failed", summary.failures.len(), summary.runs)
    }
}

/// `quotagate pending-workloads`: the named ClusterQueue's or LocalQueue's pending workloads.
async fn pending_workloads(
    cluster_queue: Option<String>,
    local_queue: Option<String>,
    namespace: String,
    kubeconfig: Option<PathBuf>,
) -> anyhow::Result<()> {
    use quotagate::cli::pending::Queue;
    let queue = match (cluster_queue, local_queue) {
        (Some(cq), _) => Queue::Cluster(cq),
        (None, Some(name)) => Queue::Local { namespace, name },
        (None, None) => anyhow::bail!("name a queue: --cluster-queue NAME or --local-queue NAME"),
    };
    let client = quotagate::cli::kube_client(kubeconfig.as_deref())
        .await
        .map_err(anyhow::Error::msg)?;
    print!("{}", quotagate::cli::pending::run(&client, &queue).await?);
    Ok(())
}

/// `quotagate install-manifests`: everything a cluster needs, as YAML on stdout.
fn install_manifests(opts: InstallOptions, config: Option<PathBuf>) -> ExitCode {
    use quotagate::wiring::install::manifests;
    let config = match config
        .map(|p| std::fs::read_to_string(&p).map_err(|e| format!("--config {}: {e}", p.display())))
        .transpose()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let defaults = InstallOptions::default();
    let opts = InstallOptions {
        config: config.unwrap_or(defaults.config),
        ..opts
    };
    match manifests(&opts) {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `quotagate crds`: every CustomResourceDefinition served, as YAML on stdout.
fn print_crds() -> ExitCode {
    match quotagate::cli::crds_yaml() {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot render CRDs: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `quotagate validate`: the report, then a count of problems (failure) or of valid documents.
fn validate(files: &[PathBuf], feature_gates: RayFeatureGates) -> ExitCode {
    let outcome = quotagate::cli::validate::run_with(files, feature_gates);
    print!("{}", outcome.report);
    for line in &outcome.not_managed {
        println!("{line}");
    }
    if outcome.problems > 0 {
        println!(
            "{} problem(s) in {} document(s)",
            outcome.problems, outcome.documents
        );
        ExitCode::FAILURE
    } else {
        println!("{} document(s) valid", outcome.documents);
        ExitCode::SUCCESS
    }
}
