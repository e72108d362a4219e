//! kueuectl's verbs as `quotagate` subcommands, with kueuectl's names, aliases and flags
//! (kubernetes-sigs/kueue:cmd/kueuectl/app/{list,stop,resume,create,passthrough}): `list`, `stop`,
//! `resume`, `create`, and `get|describe|edit|delete|patch` handed to kubectl. Tables are printed as kubectl prints them (upper-case headers, columns three spaces
//! apart, ages as `duration.HumanDuration`). Each verb decides in a pure function (rows, patches,
//! objects) and its async shell only reads and writes through the API.

pub mod create;
pub mod create_flavor;
pub mod list;
pub mod passthrough;
pub mod pods;
pub mod printed;
pub mod update;

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Worded as kubectl words the API's answer; the error is not a `source`, so it is not printed
    /// twice in a chain.
    #[error("{}", kube_message(.0))]
    Kube(kube::Error),
    /// A flag's value cannot be used; names the flag.
    #[error("invalid --{flag}: {message}")]
    Flag { flag: &'static str, message: String },
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("cannot print the result: {0}")]
    Print(String),
}

impl From<kube::Error> for CliError {
    fn from(e: kube::Error) -> Self {
        CliError::Kube(e)
    }
}

fn kube_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("Error from server ({}): {}", s.reason, s.message),
        other => other.to_string(),
    }
}

/// Where to connect and in which namespace (kubectl's `--kubeconfig` and `-n`).
#[derive(Args, Clone, Debug, Default)]
pub struct Conn {
    /// Default: $KUBECONFIG or ~/.kube/config (or in-cluster).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// Default: the kubeconfig context's namespace, else `default`.
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
}

impl Conn {
    pub async fn client(&self) -> Result<(kube::Client, String), CliError> {
        let client = super::kube_client(self.kubeconfig.as_deref())
            .await
            .map_err(CliError::Connect)?;
        let ns = self
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        Ok((client, ns))
    }
}

/// `-o`: kubectl's printers that apply here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Json,
    Yaml,
    Name,
}

/// `--dry-run`, as kubectl's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum DryRun {
    #[default]
    None,
    Client,
    Server,
}

impl DryRun {
    /// kueuectl's suffix after the operation in the name printer (its dryrun.PrintFlagsWithStrategy
    /// says "client dry run" where kubectl says "dry run").
    fn suffix(self) -> &'static str {
        match self {
            DryRun::None => "",
            DryRun::Client => " (client dry run)",
            DryRun::Server => " (server dry run)",
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum ListCmd {
    /// ClusterQueues: NAME, COHORT, PENDING WORKLOADS, ADMITTED WORKLOADS, ACTIVE, AGE.
    #[command(visible_alias = "cq")]
    Clusterqueue {
        #[command(flatten)]
        filter: Selectors,
        /// Only active (true) or inactive (false) ClusterQueues.
        #[arg(long)]
        active: Option<bool>,
    },
    /// LocalQueues: NAME, CLUSTERQUEUE, PENDING WORKLOADS, ADMITTED WORKLOADS, AGE.
    #[command(visible_alias = "lq")]
    Localqueue {
        #[command(flatten)]
        filter: Selectors,
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// Only LocalQueues of this ClusterQueue.
        #[arg(short = 'c', long)]
        clusterqueue: Option<String>,
    },
    /// Workloads: NAME, JOB TYPE, JOB NAME, LOCALQUEUE, CLUSTERQUEUE, STATUS, POSITION IN QUEUE,
    /// EXEC TIME, AGE.
    #[command(visible_aliases = ["wl", "kwl", "kueueworkload"])]
    Workload {
        #[command(flatten)]
        filter: Selectors,
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// Only workloads with quota reserved in this ClusterQueue.
        #[arg(short = 'c', long)]
        clusterqueue: Option<String>,
        /// Only workloads submitted to this LocalQueue.
        #[arg(short = 'q', long)]
        localqueue: Option<String>,
        /// all, pending, quotareserved, admitted or finished (repeatable).
        #[arg(long)]
        status: Vec<String>,
        /// Only the workloads of this job, as TYPE[.GROUP]/NAME (e.g. raycluster/my-cluster).
        #[arg(long = "for")]
        for_object: Option<String>,
    },
    /// ResourceFlavors: NAME, NODE LABELS, AGE.
    #[command(visible_aliases = ["rf", "resourceflavors"])]
    Resourceflavor {
        #[command(flatten)]
        filter: Selectors,
    },
    /// The pods of a job (or of a Workload's job): NAME, READY, STATUS, RESTARTS, AGE.
    #[command(visible_alias = "po")]
    Pods {
        #[command(flatten)]
        filter: Selectors,
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// The job, as TYPE[.GROUP]/NAME (job/x, raycluster/x, rayservice/x, workload/x, ...).
        #[arg(long = "for", required = true)]
        for_object: String,
    },
}

/// kueuectl's list filters and printer flag.
#[derive(Args, Clone, Debug, Default)]
pub struct Selectors {
    /// Label selector (`-l key1=value1,key2=value2`).
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Field selector (`--field-selector key1=value1`).
    #[arg(long)]
    pub field_selector: Option<String>,
    /// json, yaml or name instead of the table.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
}

#[derive(Subcommand, Debug)]
pub enum StopCmd {
    /// Sets spec.stopPolicy: HoldAndDrain (evicts admitted workloads), or Hold with
    /// --keep-already-running.
    #[command(visible_alias = "cq")]
    Clusterqueue {
        name: String,
        #[arg(long)]
        keep_already_running: bool,
    },
    /// Sets spec.stopPolicy as for a ClusterQueue.
    #[command(visible_alias = "lq")]
    Localqueue {
        name: String,
        #[arg(long)]
        keep_already_running: bool,
    },
    /// Sets spec.active=false: the workload is evicted and not admitted again until resumed.
    #[command(visible_aliases = ["wl", "kwl"])]
    Workload {
        name: String,
        #[arg(long, value_enum, default_value_t = DryRun::None)]
        dry_run: DryRun,
    },
}

#[derive(Subcommand, Debug)]
pub enum ResumeCmd {
    /// Sets spec.stopPolicy=None.
    #[command(visible_alias = "cq")]
    Clusterqueue { name: String },
    /// Sets spec.stopPolicy=None.
    #[command(visible_alias = "lq")]
    Localqueue { name: String },
    /// Sets spec.active=true.
    #[command(visible_aliases = ["wl", "kwl"])]
    Workload {
        name: String,
        #[arg(long, value_enum, default_value_t = DryRun::None)]
        dry_run: DryRun,
    },
}

#[derive(Subcommand, Debug)]
pub enum CreateCmd {
    /// A ClusterQueue; quotas as FLAVOR:RESOURCE=QUANTITY;RESOURCE=QUANTITY,FLAVOR2:...
    #[command(visible_alias = "cq")]
    Clusterqueue(create::ClusterQueueArgs),
    /// A LocalQueue pointing at a ClusterQueue (which must exist unless --ignore-unknown-cq).
    #[command(visible_alias = "lq")]
    Localqueue {
        name: String,
        #[arg(short = 'c', long, required = true)]
        clusterqueue: String,
        #[arg(short = 'i', long)]
        ignore_unknown_cq: bool,
        #[arg(long, value_enum, default_value_t = DryRun::None)]
        dry_run: DryRun,
    },
    /// A ResourceFlavor with node labels, node taints and tolerations.
    #[command(visible_alias = "rf")]
    Resourceflavor(create_flavor::ResourceFlavorArgs),
}

impl CreateCmd {
    /// Creates the object (or only prints, with `--dry-run client`); what kueuectl prints.
    pub async fn run(&self, client: &kube::Client, ns: &str) -> Result<String, CliError> {
        match self {
            CreateCmd::Clusterqueue(a) => create::create_cluster_queue(client, a).await,
            CreateCmd::Localqueue {
                name,
                clusterqueue,
                ignore_unknown_cq,
                dry_run,
            } => {
                create::create_local_queue(client, ns, name, clusterqueue, *ignore_unknown_cq, *dry_run).await
            }
            CreateCmd::Resourceflavor(a) => create_flavor::create_resource_flavor(client, a).await,
        }
    }
}

/// kubectl's duration.HumanDuration: how `AGE` columns read.
pub fn human_duration(d: jiff::SignedDuration) -> String {
    let seconds = d.as_secs();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return match days % 365 {
            0 => format!("{years}y"),
            d => format!("{years}y{d}d"),
        };
    }
    format!("{years}y")
}

#[cfg(test)]
mod tests {
    use super::*;

    // kueuectl's create_resourceflavor_test "should create resource flavor with client dry run":
    // "resourceflavor.kueue.x-k8s.io/rf created (client dry run)".
    #[test]
    fn dry_run_suffixes_are_kueuectls() {
        assert_eq!(DryRun::Client.suffix(), " (client dry run)");
        assert_eq!(DryRun::Server.suffix(), " (server dry run)");
        assert_eq!(DryRun::None.suffix(), "");
    }

    // The cases of k8s.io/apimachinery/pkg/util/duration's TestHumanDuration.
    #[test]
    fn ages_read_as_kubectl_prints_them() {
        let s = jiff::SignedDuration::from_secs;
        for (secs, want) in [
            (1, "1s"),
            (70, "70s"),
            (190, "3m10s"),
            (200, "3m20s"),
            (600, "10m"),
            (3600, "60m"),
            (3 * 3600 + 1, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (8 * 3600, "8h"),
            (47 * 3600 + 59, "47h"),
            (48 * 3600 + 59, "2d"),
            (6 * 86400 + 3600, "6d1h"),
            (8 * 86400, "8d"),
            (2 * 365 * 86400 + 86400, "2y1d"),
            (8 * 365 * 86400, "8y"),
            (-1, "0s"),
            (-2, "<invalid>"),
        ] {
            assert_eq!(human_duration(s(secs)), want, "{secs}s");
        }
    }
}
