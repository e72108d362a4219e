//! kueuectl's pass-through verbs (kubernetes-sigs/kueue:cmd/kueuectl/app/passthrough): `get`,
//! `describe`, `edit`, `delete` and `patch` of a Kueue kind run the real kubectl. kueuectl hands
//! kubectl its own arguments; quotagate also expands the kind to its full resource name
//! (`workloads.kueue.x-k8s.io`), so `kwl` works and another group's `workload` cannot be picked
//! instead. Every other argument goes to kubectl untouched.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::ValueEnum;

/// The verbs kueuectl passes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Get,
    Describe,
    Edit,
    Delete,
    Patch,
}

impl Verb {
    fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Describe => "describe",
            Verb::Edit => "edit",
            Verb::Delete => "delete",
            Verb::Patch => "patch",
        }
    }
}

/// The kinds kueuectl passes through, with its aliases (the CRDs' short names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    #[value(
        alias = "workloads",
        alias = "wl",
        alias = "kwl",
        alias = "kueueworkload",
        alias = "kueueworkloads"
    )]
    Workload,
    #[value(alias = "clusterqueues", alias = "cq")]
    Clusterqueue,
    #[value(alias = "localqueues", alias = "lq", alias = "queue", alias = "queues")]
    Localqueue,
    #[value(alias = "resourceflavors", alias = "rf", alias = "flavor", alias = "flavors")]
    Resourceflavor,
}

impl Kind {
    pub fn resource(self) -> &'static str {
        match self {
            Kind::Workload => "workloads.kueue.x-k8s.io",
            Kind::Clusterqueue => "clusterqueues.kueue.x-k8s.io",
            Kind::Localqueue => "localqueues.kueue.x-k8s.io",
            Kind::Resourceflavor => "resourceflavors.kueue.x-k8s.io",
        }
    }
}

/// `quotagate VERB KIND [ARGS...]`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// workload (kwl), clusterqueue (cq), localqueue (lq) or resourceflavor (rf).
    #[arg(value_enum)]
    pub kind: Kind,
    /// Everything else, handed to kubectl as it is (names, -n, -o, --kubeconfig, ...).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<OsString>,
}

/// The pass-through verbs as `quotagate` subcommands (flattened into its command list).
#[derive(clap::Subcommand, Clone, Debug)]
pub enum Commands {
    /// kueuectl's pass-through: `kubectl get` of a Workload, ClusterQueue, LocalQueue or ResourceFlavor.
    Get(Args),
    /// kueuectl's pass-through: `kubectl describe` of a Kueue kind.
    Describe(Args),
    /// kueuectl's pass-through: `kubectl edit` of a Kueue kind.
    Edit(Args),
    /// kueuectl's pass-through: `kubectl delete` of a Kueue kind.
    Delete(Args),
    /// kueuectl's pass-through: `kubectl patch` of a Kueue kind.
    Patch(Args),
}

impl Commands {
    /// Runs kubectl in this process's place; returns only when it cannot.
    pub fn exec(&self) -> PassthroughError {
        let (verb, a) = match self {
            Commands::Get(a) => (Verb::Get, a),
            Commands::Describe(a) => (Verb::Describe, a),
            Commands::Edit(a) => (Verb::Edit, a),
            Commands::Delete(a) => (Verb::Delete, a),
            Commands::Patch(a) => (Verb::Patch, a),
        };
        exec(verb, a.kind, &a.args)
    }
}

/// The arguments kubectl runs with.
pub fn kubectl_args(verb: Verb, kind: Kind, rest: &[OsString]) -> Vec<OsString> {
    let mut out = vec![OsString::from(verb.as_str()), OsString::from(kind.resource())];
    out.extend(rest.iter().cloned());
    out
}

#[derive(Debug, thiserror::Error)]
pub enum PassthroughError {
    #[error("pass-through commands need kubectl: not found in PATH ({path})")]
    NoKubectl { path: String },
    #[error("cannot run {}: {source}", .kubectl.display())]
    Exec {
        kubectl: PathBuf,
        source: std::io::Error,
    },
}

/// The first `kubectl` on `path` (kueuectl's `exec.LookPath`).
pub fn find_kubectl(path: Option<&std::ffi::OsStr>) -> Result<PathBuf, PassthroughError> {
    let found = path.and_then(|p| {
        std::env::split_paths(p)
            .map(|d| d.join("kubectl"))
            .find(|f| is_executable(f))
    });
    found.ok_or_else(|| PassthroughError::NoKubectl {
        path: path.map(|p| p.to_string_lossy().into_owned()).unwrap_or_default(),
    })
}

fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        p.is_file()
    }
}

/// Runs kubectl in this process's place (as kueuectl execs it), so `edit` gets the terminal and
/// kubectl's exit code is ours. Returns only on failure to start it.
pub fn exec(verb: Verb, kind: Kind, rest: &[OsString]) -> PassthroughError {
    let kubectl = match find_kubectl(std::env::var_os("PATH").as_deref()) {
        Ok(k) => k,
        Err(e) => return e,
    };
    let mut cmd = std::process::Command::new(&kubectl);
    cmd.args(kubectl_args(verb, kind, rest));
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let source = cmd.exec();
        PassthroughError::Exec { kubectl, source }
    }
    #[cfg(not(unix))]
    {
        match cmd.status() {
            Ok(s) => std::process::exit(s.code().unwrap_or(1)),
            Err(source) => PassthroughError::Exec { kubectl, source },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_is_expanded_and_the_rest_passed_untouched() {
        let rest: Vec<OsString> = ["wl-1", "-n", "team", "-o", "yaml"]
            .iter()
            .map(OsString::from)
            .collect();
        let args = kubectl_args(Verb::Get, Kind::from_str("kwl", true).unwrap(), &rest);
        assert_eq!(
            args,
            [
                "get",
                "workloads.kueue.x-k8s.io",
                "wl-1",
                "-n",
                "team",
                "-o",
                "yaml"
            ]
            .map(OsString::from)
        );
        for (alias, kind) in [
            ("cq", Kind::Clusterqueue),
            ("lq", Kind::Localqueue),
            ("queues", Kind::Localqueue),
            ("rf", Kind::Resourceflavor),
            ("kueueworkloads", Kind::Workload),
        ] {
            assert_eq!(Kind::from_str(alias, true), Ok(kind), "{alias}");
        }
    }

    #[test]
    fn a_missing_kubectl_is_named_with_the_path_searched() {
        let dir = std::env::temp_dir().join(format!("quotagate-no-kubectl-{}", std::process::id()));
        let e = find_kubectl(Some(dir.as_os_str())).unwrap_err().to_string();
        assert!(
            e.starts_with("pass-through commands need kubectl: not found in PATH")
                && e.contains("quotagate-no-kubectl"),
            "{e}"
        );
        assert!(find_kubectl(None).is_err());
    }
}
