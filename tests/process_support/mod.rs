//! Helpers shared by the tests that run Ray pods as real processes in network namespaces of their own
//! (`embedded_process_runtime.rs`, `real_ray_upgrade.rs`).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Why this host cannot run the test, if it cannot.
pub fn missing_tool() -> Option<String> {
    if !repo_root().join(".venv-ray/bin/ray").exists() {
        return Some("no .venv-ray with Ray (run scripts/install-ray.sh)".into());
    }
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).and_then(|l| l.split_whitespace().nth(1).map(String::from)));
    if uid.as_deref() != Some("0") {
        return Some("not root: network namespaces need root".into());
    }
    match Command::new("ip").args(["netns", "list"]).output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!("`ip netns list` failed: {}", String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Some(format!("no `ip` (install iproute2): {e}")),
    }
}

/// Whether pod bridge `bridge` is gone, or is another live instance's: once an instance releases its
/// /24, a quotagate started meanwhile (another test on this host) may take it and make its own bridge.
pub fn bridge_gone_or_reused(bridge: &str) -> bool {
    if !Command::new("ip").args(["link", "show", bridge]).output().unwrap().status.success() {
        return true;
    }
    let block = bridge.trim_start_matches("qgbr");
    let lock = std::fs::OpenOptions::new().write(true).open(format!("/run/quotagate/pod-net/{block}.lock"));
    lock.is_ok_and(|f| f.try_lock().is_err())
}

pub fn netns_pids(ns: &str) -> Vec<u32> {
    let out = Command::new("ip").args(["netns", "pids", ns]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

/// A process that exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.rsplit(')').next().and_then(|r| r.split_whitespace().next()) != Some("Z"))
}

