//! The quotagate binary: parses the command line; the commands live in the library's `cli` module.

use std::process::ExitCode;

use clap::Parser;

/// mimalloc instead of glibc's malloc: `perf` on `bench e2e` put a third of all CPU in glibc's
/// allocator (`_int_malloc`, `malloc_consolidate`, arena lock waits) under the API server's and the
/// controllers' small, cross-thread allocations.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // A link named `minimalkueue` is Kueue's perf runner's manager binary (cli/kueue_runner.rs).
    let line = quotagate::cli::kueue_runner::command_line(std::env::args_os());
    quotagate::cli::dispatch::main(quotagate::cli::args::Cli::parse_from(line))
}
