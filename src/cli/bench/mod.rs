//! `quotagate bench e2e`: Kueue's scheduler performance runner, end to end through the API. A generator
//! config (Kueue's format; `baseline`, `large-scale` and `ci` ship with quotagate) is driven against the
//! embedded API server, or any API server a kubeconfig names (`remote`), and the real manager; the figures are printed beside Kueue's published ones and
//! the physical lower bound, and checked against a rangespec.
//!
//! `quotagate bench incremental`: an incremental RayService upgrade under load, once per traffic
//! policy, with each run's timeline and dropped requests.

pub mod config;
pub mod incremental;
pub mod incremental_real;
pub mod remote;
pub mod report;
pub mod runner;

use std::path::Path;

/// The API server a run drives.
#[derive(Clone, Debug)]
pub enum Ground {
    /// An embedded server of the run's own, the manager in this process.
    Embedded,
    /// The server a kubeconfig names (see [`remote`]).
    Remote {
        kubeconfig: std::path::PathBuf,
        admitter: remote::Admitter,
    },
}

/// Runs `config` (a shipped name or a file) at `scale` on `ground`; prints the table (or JSON) on
/// stdout. Returns the rangespec misses (empty: passed, or no rangespec to check).
pub async fn e2e(
    ground: &Ground,
    config: &str,
    rangespec: Option<&Path>,
    scale: f64,
    json: bool,
    progress: bool,
) -> Result<Vec<String>, String> {
    let (generator, spec) = match config::builtin(config) {
        Some((g, r)) => (g.to_string(), Some(r.to_string())),
        None => (
            std::fs::read_to_string(config)
                .map_err(|e| format!("--config {config}: not a shipped config (baseline, large-scale, ci, tas) and not a readable file: {e}"))?,
            None,
        ),
    };
    let spec = match rangespec {
        Some(p) => Some(std::fs::read_to_string(p).map_err(|e| format!("--rangespec {}: {e}", p.display()))?),
        None => spec,
    };
    let spec = spec.map(|s| config::RangeSpec::parse(&s)).transpose()?;
    let plan = config::Generator::parse(&generator)?.plan(scale)?;
    let m = match ground {
        Ground::Embedded => runner::run(&plan, progress).await?,
        Ground::Remote { kubeconfig, admitter } => {
            remote::run(&plan, kubeconfig, *admitter, progress).await?
        }
    };
    let name = Path::new(config)
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|_| config::builtin(config).is_none())
        .unwrap_or(config);
    let v = report::to_json(name, scale, &plan, &m);
    let misses = spec.as_ref().map(|s| report::check(s, &v)).unwrap_or_default();
    if json {
        let mut v = v;
        v["rangespecMisses"] = serde_json::json!(misses);
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{}", report::to_text(&v));
        if spec.is_some() {
            if misses.is_empty() {
                println!("rangespec: passed");
            } else {
                println!("rangespec: FAILED\n  {}", misses.join("\n  "));
            }
        }
    }
    Ok(misses)
}

/// Runs the incremental upgrade once per policy; prints each timeline and the comparison (or JSON).
pub async fn incremental(opts: &incremental::Options, json: bool) -> Result<(), incremental::Error> {
    opts.check()?;
    let mut runs = Vec::new();
    for policy in incremental::POLICIES {
        let run = incremental::run_policy(policy, opts).await?;
        if !json {
            println!("{}", incremental::render(&run));
        }
        runs.push(run);
    }
    if json {
        let v = incremental::to_json(&runs);
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        println!("{}", incremental::compare(&runs));
    }
    Ok(())
}
