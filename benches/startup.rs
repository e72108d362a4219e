//! Start-up CPU of `quotagate apiserver` and `quotagate run --embedded` (the binary of this build:
//! `cargo bench --bench startup` uses the release one; or `QUOTAGATE_BIN=target/release/quotagate cargo
//! test --bench startup` measures that binary from a debug-built bench). Prints figures; not a timed test.
//!
//! Each command is started with `--listen 127.0.0.1:0 --kubeconfig-out FILE`; the kubeconfig appears
//! once the listener serves. Printed: the wall time until then, the process's CPU (user + system,
//! from /proc, in 10 ms ticks) at that moment, and its CPU one second later (what settling costs:
//! the simulators' and controllers' first lists and watches). Runs each three times.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// User + system CPU of `pid` in milliseconds (`/proc/PID/stat` fields 14 and 15, clock ticks).
/// The binary measured: `QUOTAGATE_BIN` when set (a release binary measured by a bench built in
/// another profile), else this build's.
fn quotagate_bin() -> std::path::PathBuf {
    std::env::var_os("QUOTAGATE_BIN").map_or_else(|| env!("CARGO_BIN_EXE_quotagate").into(), Into::into)
}

fn cpu_ms(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after its `)`.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let hz = 100; // USER_HZ is 100 on Linux for /proc's tick counts.
    Some(ticks * 1000 / hz)
}

fn one(name: &str, args: &[&str], dir: &Path) -> Result<(Duration, u64, u64), String> {
    let kubeconfig = dir.join(format!("{name}.kubeconfig"));
    let _ = std::fs::remove_file(&kubeconfig);
    let mut cmd = Command::new(quotagate_bin());
    cmd.args(args)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("spawning quotagate: {e}"))?;
    let pid = child.id();
    let outcome = (|| {
        while !kubeconfig.exists() {
            if start.elapsed() > Duration::from_secs(60) {
                return Err("no kubeconfig after 60 s".to_string());
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("quotagate exited: {status}"));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let ready = start.elapsed();
        let at_ready = cpu_ms(pid).ok_or("reading /proc")?;
        std::thread::sleep(Duration::from_secs(1));
        let settled = cpu_ms(pid).ok_or("reading /proc")?;
        Ok((ready, at_ready, settled))
    })();
    let _ = child.kill();
    let _ = child.wait();
    outcome
}

fn main() {
    let dir = std::env::temp_dir().join(format!("quotagate-startup-bench-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("temporary directory: {e}");
        std::process::exit(1);
    }
    let commands: [(&str, &[&str]); 2] = [
        ("apiserver", &["apiserver"]),
        ("run --embedded", &["run", "--embedded"]),
    ];
    let mut failed = false;
    for (name, args) in commands {
        for i in 1..=3 {
            match one(&name.replace(' ', "_"), args, &dir) {
                Ok((ready, at_ready, settled)) => println!(
                    "{name} #{i}: listening after {:.0} ms wall; CPU {at_ready} ms at that moment, {settled} ms one second later",
                    ready.as_secs_f64() * 1000.0
                ),
                Err(e) => {
                    println!("{name} #{i}: {e}");
                    failed = true;
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if failed {
        std::process::exit(1);
    }
}
