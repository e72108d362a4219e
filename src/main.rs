//! The quotagate binary: CLI wiring only; the work lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
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
