//! The command line's types: every subcommand and flag of `quotagate`, as clap reads them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::api::ray::validation::RayFeatureGates;
use crate::wiring::ray::Dashboards;

#[derive(Parser)]
#[command(
    name = "quotagate",
    version,
    about = "Kueue-compatible quota admission with a quota-gated, KubeRay-compatible Ray operator"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once at start-up and matched at once; boxing `run`'s flags buys nothing"
)]
pub enum Command {
    /// Print every CustomResourceDefinition quotagate serves, as YAML (what config/crd/ holds).
    Crds,
    /// Print everything a cluster needs, in install order (Namespace, CRDs, RBAC, the manager's
    /// ConfigMap, Services, Deployment, webhook configurations): `kubectl apply --server-side -f -`.
    InstallManifests {
        /// The manager's image.
        #[arg(long, default_value = crate::wiring::install::IMAGE)]
        image: String,
        #[arg(long, default_value = crate::wiring::install::NAMESPACE)]
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
        /// The manager container's resources, as YAML or JSON (`{requests: {cpu: 200m}}`; `{}`
        /// leaves them out); default: config/manager's.
        #[arg(long, value_name = "YAML")]
        resources: Option<String>,
        /// The manager pod's nodeSelector, as YAML or JSON (`{pool: system}`).
        #[arg(long, value_name = "YAML")]
        node_selector: Option<String>,
        /// The manager pod's tolerations, as a YAML or JSON list (`[{key: dedicated, operator: Exists}]`).
        #[arg(long, value_name = "YAML")]
        tolerations: Option<String>,
        /// A flag appended to the manager container's args (repeatable, in order; `run`'s flags:
        /// `--manager-arg=--upgrade-deadline=30m`).
        #[arg(long = "manager-arg", value_name = "ARG", allow_hyphen_values = true)]
        manager_args: Vec<String>,
        /// Write the Helm chart (charts/quotagate) into DIR instead of printing the manifest: the same
        /// objects, with values for these flags (the chart's files are generated, never edited).
        #[arg(long, value_name = "DIR", conflicts_with_all = ["image", "namespace", "replicas", "log_level", "config", "use_kubernetes_proxy", "resources", "node_selector", "tolerations", "manager_args"])]
        helm_chart: Option<PathBuf>,
    },
    /// Check manifests offline: every problem with file, document, kind/name and field path.
    Validate {
        /// Files or directories (searched recursively for .yaml, .yml and .json).
        #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        /// KubeRay's feature gates, as `Name=true,...` (KubeRay v1.7 names and defaults; see README).
        #[arg(long, default_value = "", value_parser = crate::api::ray::features::parse)]
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
        #[arg(short = 'o', long = "output", value_enum, default_value_t = crate::cli::plan::Output::Table)]
        output: crate::cli::plan::Output,
    },
    /// Why a Workload, RayService or RayCluster is pending or gated, in numbers: the scheduler's own
    /// record of its last decision (requested, available per flavor, borrowable, preemptible,
    /// holders), and for a RayService its upgrade state and each child's gate.
    Explain {
        #[arg(value_enum)]
        kind: crate::cli::explain::Kind,
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
        what: crate::cli::kueuectl::ListCmd,
        #[command(flatten)]
        conn: crate::cli::kueuectl::Conn,
    },
    /// kueuectl's `stop`: hold a ClusterQueue or LocalQueue (spec.stopPolicy), deactivate a Workload.
    Stop {
        #[command(subcommand)]
        what: crate::cli::kueuectl::StopCmd,
        #[command(flatten)]
        conn: crate::cli::kueuectl::Conn,
    },
    /// kueuectl's `resume`: undo `stop`.
    Resume {
        #[command(subcommand)]
        what: crate::cli::kueuectl::ResumeCmd,
        #[command(flatten)]
        conn: crate::cli::kueuectl::Conn,
    },
    /// kueuectl's `create clusterqueue|localqueue|resourceflavor`.
    Create {
        #[command(subcommand)]
        what: crate::cli::kueuectl::CreateCmd,
        #[command(flatten)]
        conn: crate::cli::kueuectl::Conn,
    },
    #[command(flatten)]
    Passthrough(crate::cli::kueuectl::passthrough::Commands),
    /// Run the controllers: quota admission, the RayCluster job integration and the Ray operator.
    Run(RunArgs),
    /// A kubelet for any API server, with simulated pods: registers Nodes, heartbeats their Leases
    /// and runs the pods the scheduler binds to them (Running and Ready, a pod IP), as the embedded
    /// cluster's node does. For a control plane without nodes (scripts/control-plane.sh).
    NodeAgent(NodeAgentArgs),
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
        /// These seeds instead of --seed/--runs, comma-separated (e.g. `61,173,257`).
        #[arg(long, value_delimiter = ',', num_args = 1.., conflicts_with_all = ["seed", "runs"])]
        seeds: Vec<u64>,
        /// Runs of each seed: the seeds are run once, then again, this many rounds in all, and one
        /// summary line tallies every run.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        repeat: u64,
        /// Each run under its seed's induced timing variation (worker stalls, slow API, pod start
        /// delays), as a loaded machine times it; `CHAOS_JITTER=1` is the same.
        #[arg(long)]
        jitter: bool,
        /// Runs at once, each on its own embedded cluster.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
        jobs: u64,
        /// Re-runs allowed to shrink each failing seed's action list (0: no shrinking).
        #[arg(long, default_value_t = 40)]
        shrink: usize,
        /// `contention`: several services upgrading at once in quota sized for them to take turns;
        /// `clusters`: queue-managed RayClusters of their own edited at random (replicas, requests,
        /// elastic annotation).
        #[arg(long, value_enum, default_value_t = crate::cli::chaos::Scenario::Mixed)]
        scenario: crate::cli::chaos::Scenario,
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
pub struct ApiLimitsArgs {
    /// Read requests served at once on the embedded API listener.
    #[arg(long, default_value_t = 400)]
    pub max_requests_inflight: usize,
    /// Mutating requests served at once on the embedded API listener.
    #[arg(long, default_value_t = 200)]
    pub max_mutating_requests_inflight: usize,
    /// Bytes of memory the stored objects hold (parsed: about ten times a pod's compact JSON) past
    /// which writes that grow the store are refused with etcd's "database space exceeded"; reads,
    /// watches and deletes go on.
    #[arg(long, default_value_t = crate::embedded::store::DEFAULT_QUOTA_BYTES)]
    pub storage_quota: usize,
}

impl ApiLimitsArgs {
    pub fn store(self) -> crate::embedded::StoreConfig {
        crate::embedded::StoreConfig {
            quota_bytes: self.storage_quota,
            ..Default::default()
        }
    }

    pub fn limits(self) -> crate::embedded::listener::ListenerLimits {
        crate::embedded::listener::ListenerLimits {
            max_requests_inflight: self.max_requests_inflight,
            max_mutating_requests_inflight: self.max_mutating_requests_inflight,
            ..Default::default()
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct LoadArgs {
    /// `http://host:port/path` (e.g. a serve Service's ClusterIP).
    #[arg(long)]
    pub url: String,
    #[arg(long, default_value_t = 10)]
    pub rps: u32,
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Requests in flight at most (connections open at most).
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// The answer's JSON field naming the cluster that answered.
    #[arg(long, default_value = "cluster")]
    pub cluster_field: String,
}

/// Benchmarks users can run.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// Kueue's scheduler performance runner end to end through the API: a generator config's queues and
    /// workloads against the embedded API server and the real manager; prints wall time, time to
    /// admission per class and ClusterQueue usage beside Kueue's published figures and the physical
    /// lower bound. Exits 1 when a rangespec threshold is missed.
    E2e {
        /// A shipped config (baseline, large-scale, ci, tas) or a generator.yaml in Kueue's format.
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
        /// Run against the API server this kubeconfig names (over HTTPS) instead of an embedded one:
        /// missing CRDs are installed, the run's objects are its own (`qgb-<run>-` names, label
        /// quotagate.io/bench-e2e-run) and deleted at the end. TAS configs run embedded only.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// With --kubeconfig: start no manager; a quotagate (or Kueue) already running against that
        /// server admits, and the runner only drives and measures. Without it, do not point the run at
        /// a server where one runs: two admitters would share the quota.
        #[arg(long, requires = "kubeconfig")]
        no_manager: bool,
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
pub struct RunArgs {
    /// Run against the embedded API server (with simulated nodes, gateway and Ray dashboards) instead of
    /// a real cluster.
    #[arg(long)]
    pub embedded: bool,
    /// With --embedded: also serve the API on this loopback address, for kubectl (its credentials go
    /// to --kubeconfig-out).
    #[arg(long, requires_all = ["embedded", "kubeconfig_out"])]
    pub listen: Option<SocketAddr>,
    /// With --embedded and --listen: write a kubeconfig for that address here.
    #[arg(long, requires = "listen")]
    pub kubeconfig_out: Option<PathBuf>,
    /// With --embedded: keep every object in this directory (an embedded redb database), durable
    /// before the API answers, and load it on start; without it the state lives in memory only.
    #[arg(long, requires = "embedded")]
    pub data_dir: Option<PathBuf>,
    /// With --embedded: how long an Event lives after its last write (kube-apiserver's --event-ttl).
    #[arg(long, default_value = "1h", value_parser = parse_duration, requires = "embedded")]
    pub event_ttl: Duration,
    #[command(flatten)]
    pub limits: ApiLimitsArgs,
    /// Without --embedded: the kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, conflicts_with = "embedded")]
    pub kubeconfig: Option<PathBuf>,
    /// Serve /healthz, /readyz and /metrics here.
    #[arg(long)]
    pub health_addr: Option<SocketAddr>,
    /// Elect a leader on a coordination Lease; only the leader writes (default: on, off with --embedded).
    #[arg(long)]
    pub leader_elect: Option<bool>,
    /// The Lease's namespace [default: default].
    #[arg(long, env = "POD_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// The Lease's name [default: quotagate-leader].
    #[arg(long)]
    pub lease_name: Option<String>,
    /// This replica's identity in the Lease [default: $POD_NAME (else the host name), `_` and a UUID
    /// new at each start, as controller-runtime's, so a restarted container is a new candidate].
    #[arg(long)]
    pub identity: Option<String>,
    /// Serve the validating/defaulting webhook over TLS with tls.crt and tls.key from this directory
    /// (cert-manager's). Without it the manager makes and renews its own certificate (the Kueue
    /// Configuration's internalCertManagement, on unless `enable: false`), in the Secret of
    /// $POD_NAMESPACE [default: quotagate-system].
    #[arg(long, conflicts_with = "embedded")]
    pub webhook_cert_dir: Option<PathBuf>,
    /// [default: 0.0.0.0:9443]
    #[arg(long)]
    pub webhook_addr: Option<SocketAddr>,
    /// A Kueue manager configuration file (`config.kueue.x-k8s.io` `Configuration`, as Kueue's
    /// controller_manager_config.yaml): waitForPodsReady, fairSharing, admissionFairSharing,
    /// leaderElection, health and webhook.port are used; flags win over it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Do not run the Ray operator (RayCluster and RayService controllers): admission only.
    #[arg(long)]
    pub no_ray_operator: bool,
    /// Reach Ray dashboards through the API server's service proxy (KubeRay's flag of the same name),
    /// for a manager outside the cluster network; needs `services/proxy` (`install-manifests
    /// --use-kubernetes-proxy` grants it).
    #[arg(long)]
    pub use_kubernetes_proxy: bool,
    /// Answer the Ray operator's dashboard calls with the Ray dashboard simulator (as `--embedded`
    /// does) instead of real Ray heads: for a cluster whose pods `quotagate node-agent` simulates,
    /// where no Ray runs and no pod address is reachable.
    #[arg(long, conflicts_with_all = ["embedded", "use_kubernetes_proxy", "no_ray_operator"])]
    pub simulated_ray_dashboards: bool,
    /// KubeRay's feature gates, as `Name=true,...` (KubeRay v1.7 names and defaults; see README).
    #[arg(long, default_value = "", value_parser = crate::api::ray::features::parse)]
    pub feature_gates: RayFeatureGates,
    /// Drop a RayService upgrade whose pending cluster has not taken the traffic this long after quota
    /// admitted it (releasing its quota; the active cluster keeps serving). Per service with the
    /// `quotagate.io/upgrade-deadline` annotation. Off by default, as KubeRay has no such bound.
    #[arg(long, value_parser = parse_duration)]
    pub upgrade_deadline: Option<Duration>,
    /// Kueue's PrioritizePreemptorWorkloads feature gate (alpha, off in Kueue): a preemptor waiting
    /// for its victims goes before other ClusterQueues' heads, so they cannot take its quota. Also
    /// on with `featureGates: {PrioritizePreemptorWorkloads: true}` in `--config`.
    #[arg(long)]
    pub prioritize_preemptor_workloads: bool,
    /// How long a wait-for cycle among RayService upgrades (each waiting for quota the other holds)
    /// may last before the growth of the lower-priority, then younger, upgrade is released
    /// (`GrowthPreempted`, reason `WaitForCycle`); its old cluster keeps serving and it retries.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub cycle_break_after: Duration,
    #[command(flatten)]
    pub ui: UiArgs,
    #[command(flatten)]
    pub sim: SimArgs,
    #[command(flatten)]
    pub pods: RuntimeArgs,
    #[command(flatten)]
    pub minimal_kueue: super::kueue_runner::MinimalKueueArgs,
}

/// How the embedded cluster runs pods.
#[derive(clap::Args, Clone)]
pub struct RuntimeArgs {
    /// `sim`: the node agent simulates every pod. `process`: pods with a rayproject/ray image run
    /// their real command with the Ray of --ray-venv, each in a network namespace of its own (needs
    /// root and iproute2; see src/embedded/README.md); other pods stay simulated.
    #[arg(long, value_enum, default_value = "sim")]
    pub runtime: PodRuntime,
    /// With --runtime process: the venv with Ray Serve (scripts/install-ray.sh).
    #[arg(long, default_value = ".venv-ray")]
    pub ray_venv: PathBuf,
}

/// `quotagate node-agent --runtime`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentRuntime {
    Auto,
    Sim,
    Process,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodRuntime {
    Sim,
    Process,
}

impl RuntimeArgs {
    /// Starts the process runtime (claiming a pod network) when asked for, into the node agent.
    pub fn apply(&self, sims: &mut crate::embedded::sim::SimConfig) -> anyhow::Result<()> {
        if self.runtime == PodRuntime::Sim {
            return Ok(());
        }
        let Some(node) = sims.node.as_mut() else {
            anyhow::bail!("--runtime process runs pods for the node agent, which --no-simulators turns off");
        };
        let cfg = crate::embedded::sim::process::ProcessConfig {
            ray_venv: self.ray_venv.clone(),
            ..Default::default()
        };
        let rt = crate::embedded::sim::process::ProcessRuntime::start(cfg)?;
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
pub struct UiArgs {
    /// Serve the web view (quota, queues, RayService upgrades; live) here. Loopback only unless
    /// --ui-allow-remote; without a value: 127.0.0.1:8080.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = crate::wiring::ui::DEFAULT_ADDR)]
    pub ui_addr: Option<SocketAddr>,
    /// Allow a non-loopback --ui-addr: everyone who reaches it sees every queue, workload and RayService.
    #[arg(long, requires = "ui_addr")]
    pub ui_allow_remote: bool,
}

/// `demo`'s pacing for the web view.
#[derive(clap::Args, Clone)]
pub struct DemoUiArgs {
    #[command(flatten)]
    pub ui: UiArgs,
    /// With --ui-addr: hold the waiting RayCluster and the gated upgrade this long each, to watch them.
    #[arg(long, default_value = "10s", value_parser = parse_duration, requires = "ui_addr")]
    pub ui_pause: Duration,
}

impl UiArgs {
    /// Binds the view's address now, so a refused or busy address fails before anything starts.
    pub fn bind(&self) -> anyhow::Result<Option<crate::wiring::ui::UiListener>> {
        let Some(addr) = self.ui_addr else { return Ok(None) };
        Ok(Some(crate::wiring::ui::UiListener::bind(
            addr,
            self.ui_allow_remote,
        )?))
    }
}

/// Delays of the embedded cluster's simulators.
#[derive(clap::Args, Clone)]
pub struct SimArgs {
    /// Simulated node agent: how long a pod takes to become Running and Ready.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub pod_start_delay: Duration,
    /// Simulated Ray dashboard: how long a Serve deploy takes before replicas are created.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub serve_build_delay: Duration,
    /// Simulated Ray dashboard: how long a Serve replica takes to become RUNNING.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub replica_start_delay: Duration,
    /// Simulated load: requests per second through each RayService's HTTPRoute (incremental
    /// upgrades), counted in /metrics as quotagate_sim_requests_total; 0 sends none.
    #[arg(long, default_value_t = 20.0, value_parser = parse_rps)]
    pub sim_load_rps: f64,
    /// Nodes with capacity instead of one unlimited node: this many Nodes (sim-node-1, -2, ...)
    /// offering --node-capacity, and a scheduler that binds each pod only to a node where it fits
    /// (requests, nodeSelector, required node affinity, taints and tolerations); a pod that fits
    /// nowhere stays Pending, PodScheduled=False/Unschedulable with kube-scheduler's message. At most
    /// 100 nodes with the pools.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_NODES as i64))]
    pub nodes: Option<u32>,
    /// With --nodes: what each of those Nodes offers, `name=quantity,...` (`cpu=8,memory=32Gi,
    /// nvidia.com/gpu=4`); cpu, memory and pods not named stay unlimited (cpu=1k,memory=4Ti,pods=1k).
    #[arg(long, value_parser = parse_capacity, requires = "nodes")]
    pub node_capacity: Option<Capacity>,
    /// A pool of Nodes (repeatable; with or without --nodes): `name=gpu,count=2,
    /// capacity=cpu=8;nvidia.com/gpu=4,labels=k=v;k2=v2,taints=k=v:NoSchedule`, named sim-node-gpu-1,
    /// ...; labelled node.quotagate.io/pool=NAME and kubernetes.io/hostname besides the labels given
    /// (what a ResourceFlavor's nodeLabels select), tainted as given (what its nodeTaints name).
    #[arg(long, value_parser = parse_node_pool)]
    pub node_pool: Vec<NodePool>,
}

impl SimArgs {
    pub fn sims(&self) -> anyhow::Result<crate::embedded::sim::SimConfig> {
        let mut sims = crate::embedded::sim::SimConfig::default();
        let nodes = self.node_list()?;
        if let Some(node) = sims.node.as_mut() {
            node.start_delay = self.pod_start_delay;
            node.nodes = nodes;
        }
        Ok(sims)
    }

    /// Every node --nodes and --node-pool ask for, with its pool (empty: one unlimited node).
    pub fn node_list(&self) -> anyhow::Result<Vec<(String, NodePool)>> {
        let mut pools: Vec<NodePool> = self
            .nodes
            .map(|n| NodePool::plain(n, self.node_capacity.as_ref().map(|c| &c.0)))
            .into_iter()
            .collect();
        pools.extend(self.node_pool.iter().cloned());
        let nodes = crate::embedded::sim::nodes::expand(&pools, "sim-node")
            .map_err(|e| anyhow::anyhow!("--nodes/--node-pool: {e}"))?;
        Ok(nodes.into_iter().map(|(n, p)| (n, p.clone())).collect())
    }
    pub fn ray_sims(&self) -> crate::wiring::raysim::RaySimOptions {
        crate::wiring::raysim::RaySimOptions {
            load_rps: self.sim_load_rps,
            ..Default::default()
        }
    }
    pub fn dashboards(&self) -> Dashboards {
        Dashboards::simulated(self.serve_build_delay, self.replica_start_delay)
    }
}

/// A request rate: finite, 0 to 10 million per second.
pub fn parse_rps(s: &str) -> Result<f64, String> {
    let r: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of requests per second"))?;
    if !(0.0..=crate::rayservice::dashboard::sim::loadgen::MAX_REQUESTS_PER_SECOND).contains(&r) {
        return Err(format!(
            "{s}: requests per second must be between 0 and {}",
            crate::rayservice::dashboard::sim::loadgen::MAX_REQUESTS_PER_SECOND
        ));
    }
    Ok(r)
}

/// `250ms`, `2s`, `1m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
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

// `quotagate node-agent` (its body in `node_agent.rs`).

pub use crate::embedded::sim::nodes::{DEFAULT_CAPACITY, MAX_NODES, NodePool};

/// Flags of `quotagate node-agent`.
#[derive(clap::Args, Clone, Debug)]
pub struct NodeAgentArgs {
    /// The API server's kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster). It needs
    /// to create Nodes and Leases and to write pods' status.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// How many Nodes to register (1 to 100), named <--node-prefix>-1, -2, ...
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=MAX_NODES as i64))]
    pub nodes: u32,
    /// What each Node offers, as `name=quantity,...` (`cpu=8,memory=32Gi,pods=110`, extended
    /// resources such as `nvidia.com/gpu=4` too); cpu, memory and pods not named keep their defaults
    /// [default: cpu=1k,memory=4Ti,pods=1k].
    #[arg(long, alias = "node-capacity", value_parser = parse_capacity)]
    pub capacity: Option<Capacity>,
    /// A pool of Nodes besides the --nodes ones (repeatable): `name=gpu,count=2,
    /// capacity=cpu=8;nvidia.com/gpu=4,labels=k=v;k2=v2,taints=k=v:NoSchedule`, named
    /// <--node-prefix>-gpu-1, ...; labelled node.quotagate.io/pool=NAME besides the labels given.
    /// All nodes together: at most 100.
    #[arg(long, value_parser = parse_node_pool)]
    pub node_pool: Vec<NodePool>,
    /// The Nodes' name prefix.
    #[arg(long, default_value = "quotagate-node", value_parser = parse_node_prefix)]
    pub node_prefix: String,
    /// How long a bound pod takes to become Running and Ready.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub pod_start_delay: Duration,
    /// How bound pods run. `auto` (the default): quotagate's own image (the shipped Deployment) runs
    /// as this machine's `quotagate` binary, each pod in a network namespace with an address the API
    /// server reaches, the in-cluster environment and its ServiceAccount's token; every other pod is
    /// simulated (Running and Ready, nothing executes), Ray heads with the Ray dashboard simulator
    /// served at their pod address, so an in-cluster manager reaches their dashboards; needs root and
    /// iproute2 (see docs/install.md): without them it says why and simulates every pod. `sim`: every
    /// pod simulated, quotagate's own image left waiting (`ImageNotSimulated`). `process`: as `auto`,
    /// and `rayproject/ray` as real Ray from --ray-venv.
    #[arg(long, value_enum, default_value = "auto")]
    pub runtime: AgentRuntime,
    /// With --runtime process: the venv with Ray Serve (scripts/install-ray.sh); without one, only
    /// Ray containers fail.
    #[arg(long, default_value = ".venv-ray")]
    pub ray_venv: PathBuf,
}

/// Resource name -> quantity, each checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Capacity(pub BTreeMap<String, String>);

/// `cpu=8,memory=32Gi`: every entry a resource name and a non-negative quantity.
pub fn parse_capacity(s: &str) -> Result<Capacity, String> {
    crate::embedded::sim::nodes::parse_capacity(s, ',').map(Capacity)
}

/// `name=gpu,count=2,capacity=cpu=8;nvidia.com/gpu=4,labels=k=v,taints=k=v:NoSchedule`.
pub fn parse_node_pool(s: &str) -> Result<NodePool, String> {
    crate::embedded::sim::nodes::parse_pool(s)
}

/// A DNS label prefix short enough for `-100` after it.
fn parse_node_prefix(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 59
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?}: a node name prefix is 1-59 lower-case letters, digits and '-', starting and ending with a letter or digit"
        ))
    }
}
