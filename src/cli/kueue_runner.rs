//! Kueue's performance runner (`test/performance/scheduler/runner`) starts its `--minimalKueue`
//! binary as `<path> --kubeconfig F [--cpuprofile F] [--zap-log-level=N] [--metricsPort N]` and
//! stops it with SIGINT. quotagate takes those flags on `run`, and a binary named `minimalkueue`
//! (a link to quotagate) is `quotagate run --no-ray-operator --leader-elect=false`, so the runner
//! times quotagate with no wrapper script (docs/performance.md).

use std::ffi::OsString;
use std::path::PathBuf;

/// The flags of Kueue's minimalkueue (`test/performance/scheduler/minimalkueue`) the runner passes.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct MinimalKueueArgs {
    /// Serve /metrics, /healthz and /readyz on 127.0.0.1:PORT (loopback: no token needed), as
    /// minimalkueue's `--metricsPort` does for the runner's scraper. Same as --health-addr 127.0.0.1:PORT.
    #[arg(
        long = "metricsPort",
        value_name = "PORT",
        conflicts_with = "health_addr",
        hide = true
    )]
    pub metrics_port: Option<u16>,
    /// controller-runtime's log level: debug, info, error, panic, or an integer >= 1 (more verbose
    /// than info: debug). RUST_LOG, when set, wins.
    #[arg(long = "zap-log-level", value_name = "LEVEL", hide = true)]
    pub zap_log_level: Option<String>,
    /// Accepted for the runner, ignored with one log line: quotagate writes no pprof profile (the
    /// runner's own rusage figures still measure it).
    #[arg(long = "cpuprofile", value_name = "FILE", hide = true)]
    pub cpuprofile: Option<PathBuf>,
    /// As --cpuprofile.
    #[arg(long = "memprofile", value_name = "FILE", hide = true)]
    pub memprofile: Option<PathBuf>,
    /// Accepted, ignored with one log line: quotagate has no topology-aware scheduling yet.
    #[arg(long = "enableTAS", hide = true)]
    pub enable_tas: bool,
}

impl MinimalKueueArgs {
    /// The tracing filter `--zap-log-level` asks for; an error names the flag and the value.
    pub fn log_level(&self) -> anyhow::Result<Option<&'static str>> {
        let Some(v) = self.zap_log_level.as_deref() else {
            return Ok(None);
        };
        let level = match v {
            "debug" => "debug",
            "info" => "info",
            "error" | "panic" => "error",
            n => match n.parse::<u32>() {
                Ok(0) | Err(_) => anyhow::bail!(
                    "--zap-log-level {v:?}: not debug, info, error, panic or an integer above 0"
                ),
                Ok(_) => "debug",
            },
        };
        Ok(Some(level))
    }

    /// One line per flag that is accepted and not acted on.
    pub fn log_ignored(&self) {
        for (flag, file) in [
            ("--cpuprofile", &self.cpuprofile),
            ("--memprofile", &self.memprofile),
        ] {
            if let Some(f) = file {
                tracing::info!(file = %f.display(), "{flag} ignored: quotagate writes no pprof profile");
            }
        }
        if self.enable_tas {
            tracing::info!("--enableTAS ignored: quotagate has no topology-aware scheduling yet");
        }
    }
}

/// The command line as quotagate parses it: unchanged, unless the binary was started as
/// `minimalkueue` (a link named as Kueue's), which runs the manager alone as minimalkueue does.
pub fn command_line(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    let invoked_as = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .map(str::to_owned);
    if invoked_as.as_deref() == Some("minimalkueue") {
        let rest = args.split_off(1);
        args.extend(["run", "--no-ray-operator", "--leader-elect=false"].map(OsString::from));
        args.extend(rest);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::{Cli, Command};
    use clap::Parser;

    fn parse(line: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(command_line(line.iter().map(OsString::from)))
    }

    /// The runner's exact invocation (runner/main.go, runCommand) parses as `run`.
    #[test]
    fn the_runners_command_line_runs_the_manager_alone() {
        let cli = parse(&[
            "/tmp/out/minimalkueue",
            "--kubeconfig",
            "/tmp/out/kubeconfig",
            "--cpuprofile",
            "/tmp/out/minimalkueue.cpu.prof",
            "--zap-log-level=2",
            "--metricsPort",
            "40123",
        ])
        .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert!(run.no_ray_operator);
        assert_eq!(run.leader_elect, Some(false));
        assert_eq!(
            run.kubeconfig.as_deref(),
            Some(std::path::Path::new("/tmp/out/kubeconfig"))
        );
        assert_eq!(run.minimal_kueue.metrics_port, Some(40123));
        assert_eq!(run.minimal_kueue.log_level().unwrap(), Some("debug"));
        assert!(run.minimal_kueue.cpuprofile.is_some());
    }

    #[test]
    fn quotagate_by_its_own_name_is_unchanged() {
        let line = ["quotagate", "run", "--embedded"].map(OsString::from);
        assert_eq!(command_line(line.clone()), line.to_vec());
    }

    #[test]
    fn a_bad_log_level_names_the_flag_and_metrics_port_excludes_health_addr() {
        let cli = parse(&["quotagate", "run", "--zap-log-level", "loud"]).unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        let e = run.minimal_kueue.log_level().unwrap_err().to_string();
        assert!(e.starts_with("--zap-log-level \"loud\""), "{e}");
        let both = parse(&[
            "quotagate",
            "run",
            "--metricsPort",
            "1",
            "--health-addr",
            "127.0.0.1:2",
        ]);
        assert!(both.is_err());
    }
}
