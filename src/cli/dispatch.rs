//! From the parsed command line to the command: the log level, the async runtime, and each
//! subcommand's call.

use std::path::PathBuf;
use std::process::ExitCode;

use super::args::*;
use crate::api::ray::validation::RayFeatureGates;
use crate::wiring::install::InstallOptions;

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

/// Runs the command `cli` names; what the binary's `main` returns.
pub fn main(cli: Cli) -> ExitCode {
    // The demo prints its own story on stdout; controller logs would drown it.
    // So does a benchmark's table.
    let level = match &cli.command {
        Command::Run(args) => match args.minimal_kueue.log_level() {
            Ok(level) => level,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        },
        _ => None,
    };
    init_tracing(level.unwrap_or(if prints_own_output(&cli.command) {
        "warn"
    } else {
        "info"
    }));
    match cli.command {
        Command::Run(args) => run_async(super::run::run(args)),
        Command::NodeAgent(args) => run_async(super::node_agent::run(args)),
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
        } => run_async(super::demo::demo(
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
        } => run_async(super::apiserver::apiserver(
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
            seeds,
            repeat,
            jitter,
            jobs,
            shrink,
            scenario,
        } => run_async(chaos(
            crate::cli::chaos::Options {
                seeds: seed..seed.saturating_add(runs),
                list: seeds,
                repeat,
                jobs: usize::try_from(jobs).unwrap_or(1),
                shrink,
            },
            jitter,
            scenario,
        )),
        Command::Bench(BenchCommand::E2e {
            config,
            rangespec,
            scale,
            json,
            kubeconfig,
            no_manager,
        }) => run_async(async move {
            use crate::cli::bench::{Ground, remote::Admitter};
            let ground = match kubeconfig {
                None => Ground::Embedded,
                Some(kubeconfig) => Ground::Remote {
                    kubeconfig,
                    admitter: if no_manager {
                        Admitter::AlreadyRunning
                    } else {
                        Admitter::InProcess
                    },
                },
            };
            let misses = crate::cli::bench::e2e(&ground, &config, rangespec.as_deref(), scale, json, !json)
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
            use crate::cli::bench::incremental_real as real;
            // The same checks as the simulated run's.
            crate::cli::bench::incremental::Options {
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
            let opts = crate::cli::bench::incremental::Options {
                step,
                interval,
                surge,
                rps,
                timeout,
                ..Default::default()
            };
            crate::cli::bench::incremental(&opts, json).await?;
            Ok(())
        }),
        Command::Load(a) => run_async(async move {
            let opts = crate::cli::load::Options {
                url: a.url,
                rps: a.rps,
                duration: a.duration,
                connections: a.connections,
                timeout: a.timeout,
                cluster_field: a.cluster_field,
            };
            let report =
                crate::cli::load::run(&opts, tokio_util::sync::CancellationToken::new(), None).await?;
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
            let opts = crate::cli::plan::Options {
                files,
                to,
                cluster_queue,
                kubeconfig,
                concurrent,
            };
            let plans = crate::cli::plan::run_all(&opts).await?;
            print!(
                "{}",
                crate::cli::plan::several::render_all(&plans, output).map_err(anyhow::Error::msg)?
            );
            Ok(())
        }),
        Command::Explain {
            kind,
            name,
            namespace,
            kubeconfig,
        } => run_async(async move {
            let client = crate::cli::kube_client(kubeconfig.as_deref())
                .await
                .map_err(anyhow::Error::msg)?;
            print!(
                "{}",
                crate::cli::explain::run(&client, kind, &namespace, &name).await?
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
            let out = crate::cli::kueuectl::list::run(&client, &ns, &what).await?;
            print!("{}", out.stdout);
            eprint!("{}", out.stderr);
            Ok(())
        }),
        Command::Stop { what, conn } => run_async(async move {
            let (client, ns) = conn.client().await?;
            print!(
                "{}",
                crate::cli::kueuectl::update::apply(&client, &ns, &crate::cli::kueuectl::update::stop(&what))
                    .await?
            );
            Ok(())
        }),
        Command::Resume { what, conn } => run_async(async move {
            let (client, ns) = conn.client().await?;
            print!(
                "{}",
                crate::cli::kueuectl::update::apply(
                    &client,
                    &ns,
                    &crate::cli::kueuectl::update::resume(&what)
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
            resources,
            node_selector,
            tolerations,
            manager_args,
            helm_chart,
        } => {
            if let Some(dir) = helm_chart {
                return write_helm_chart(&dir);
            }
            let parsed = (|| -> Result<_, String> {
                Ok((
                    resources.map(|t| yaml_flag("--resources", &t)).transpose()?,
                    node_selector
                        .map(|t| yaml_flag("--node-selector", &t))
                        .transpose()?
                        .unwrap_or_default(),
                    tolerations
                        .map(|t| yaml_flag("--tolerations", &t))
                        .transpose()?
                        .unwrap_or_default(),
                ))
            })();
            let (resources, node_selector, tolerations) = match parsed {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            install_manifests(
                InstallOptions {
                    image,
                    namespace,
                    replicas,
                    log_level,
                    config: String::new(),
                    use_kubernetes_proxy,
                    resources,
                    node_selector,
                    tolerations,
                    extra_args: manager_args,
                },
                config,
            )
        }
        Command::Crds => print_crds(),
        Command::Validate { files, feature_gates } => validate(&files, feature_gates),
    }
}

/// `quotagate chaos`: a line per run, then the summary; an error when any run failed. `--jitter` or
/// `CHAOS_JITTER=1` runs each under its seed's induced timing; an invalid `CHAOS_JITTER` is an error
/// before any run, flag or not.
async fn chaos(
    opts: crate::cli::chaos::Options,
    jitter: bool,
    scenario: crate::cli::chaos::Scenario,
) -> anyhow::Result<()> {
    let env = crate::cli::chaos::Timing::from_env().map_err(anyhow::Error::msg)?;
    let timing = if jitter {
        crate::cli::chaos::Timing::Jitter
    } else {
        env
    };
    let summary = crate::cli::chaos::run_many_timed(scenario, timing, &opts, |line| println!("{line}")).await;
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
    use crate::cli::pending::Queue;
    let queue = match (cluster_queue, local_queue) {
        (Some(cq), _) => Queue::Cluster(cq),
        (None, Some(name)) => Queue::Local { namespace, name },
        (None, None) => anyhow::bail!("name a queue: --cluster-queue NAME or --local-queue NAME"),
    };
    let client = crate::cli::kube_client(kubeconfig.as_deref())
        .await
        .map_err(anyhow::Error::msg)?;
    print!("{}", crate::cli::pending::run(&client, &queue).await?);
    Ok(())
}

/// A flag's YAML (or JSON) value as `T`, the error naming the flag and the field.
fn yaml_flag<T: serde::de::DeserializeOwned>(flag: &str, text: &str) -> Result<T, String> {
    serde_saphyr::from_str(text).map_err(|e| format!("{flag} {text:?}: {e}"))
}

/// `quotagate install-manifests --helm-chart DIR`: the chart's files, written into DIR.
fn write_helm_chart(dir: &std::path::Path) -> ExitCode {
    let files = match crate::wiring::helm::chart() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    for (path, text) in files {
        let target = dir.join(&path);
        let written = target
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&target, text));
        if let Err(e) = written {
            eprintln!("error: --helm-chart {}: {e}", target.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// `quotagate install-manifests`: everything a cluster needs, as YAML on stdout.
fn install_manifests(opts: InstallOptions, config: Option<PathBuf>) -> ExitCode {
    use crate::wiring::install::manifests;
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
    match crate::cli::crds_yaml() {
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
    let outcome = crate::cli::validate::run_with(files, feature_gates);
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
