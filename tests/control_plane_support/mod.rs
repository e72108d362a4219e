//! What the real-ground tests share (`tests/real_control_plane.rs`, `tests/differential.rs`,
//! `tests/helm_chart.rs`): finding
//! the tools, skipping without them, and a control plane of `scripts/control-plane.sh` started in a
//! directory of the test's own and stopped when it drops.
//!
//! `QUOTAGATE_REAL_KUBECONFIG` names a running control plane instead (nothing is started or stopped).
//! Without the binaries and without Go, or without kubectl where one is needed, a test prints one
//! `skipped:` line; under `QUOTAGATE_REQUIRE_TOOLS=1` it fails instead.

#![allow(dead_code)] // each test binary uses its part

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn require_tools() -> bool {
    std::env::var("QUOTAGATE_REQUIRE_TOOLS").is_ok_and(|v| v == "1")
}

pub fn skip(why: &str) {
    if require_tools() {
        panic!("QUOTAGATE_REQUIRE_TOOLS=1 but {why}");
    }
    println!("skipped: {why}");
}

/// Whether this test runs as root (the node agent's process runtime makes network namespaces).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The processes of the pod at `pod_ip` that the node agent's process runtime runs: those in its
/// network namespace (`qg-B-H` for 10.244.B.H, `ip netns pids`). Empty when there are none.
pub fn pod_processes(pod_ip: &str) -> Vec<u32> {
    let parts: Vec<&str> = pod_ip.split('.').collect();
    let [_, _, block, host] = parts[..] else {
        return Vec::new();
    };
    let Ok(out) = Command::new("ip")
        .args(["netns", "pids", &format!("qg-{block}-{host}")])
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// `QUOTAGATE_KUBECTL`, else the checkout's `.venv-kubectl/bin/kubectl` (scripts/install-kubectl.sh).
pub fn kubectl_path() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("QUOTAGATE_KUBECTL") {
        return Some(PathBuf::from(p));
    }
    let p = root().join(".venv-kubectl/bin/kubectl");
    p.exists().then_some(p)
}

/// QUOTAGATE_HELM, else where scripts/install-helm.sh puts helm v3.22.0.
pub fn helm_path() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("QUOTAGATE_HELM") {
        return Some(PathBuf::from(p));
    }
    let cache = std::env::var_os("QUOTAGATE_HELM_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            let base = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            Some(base.join("quotagate/helm/v3.22.0"))
        })?;
    let p = cache.join("bin/helm");
    p.exists().then_some(p)
}

pub fn script() -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(root().join("scripts/control-plane.sh"));
    cmd
}

/// The four binaries are built, or Go is there to build them.
fn control_plane_buildable() -> Result<(), String> {
    let out = script().arg("bin-dir").output().map_err(|e| e.to_string())?;
    let bin = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let built = [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ]
    .iter()
    .all(|c| bin.join(c).exists());
    let go = Command::new("go")
        .arg("version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if built || go {
        Ok(())
    } else {
        Err(
            "the control-plane binaries are not built and Go is not installed \
             (scripts/control-plane.sh build)"
                .into(),
        )
    }
}

/// A control plane this test started (stopped on drop), or one it was given.
pub struct ControlPlane {
    pub kubeconfig: PathBuf,
    /// The directory `up` ran in, when this test started it.
    owned: Option<PathBuf>,
}

impl ControlPlane {
    /// `Err` when it cannot be had here (the caller skips); a failing `up` where the tools are is a
    /// test failure. `name` names its directory; the tests of one binary run at once, each with its own.
    pub fn start(name: &str) -> Result<ControlPlane, String> {
        if let Ok(k) = std::env::var("QUOTAGATE_REAL_KUBECONFIG") {
            return Ok(ControlPlane {
                kubeconfig: k.into(),
                owned: None,
            });
        }
        control_plane_buildable()?;
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("quotagate-{name}-{}-{n}", std::process::id()));
        let out = script()
            .arg("up")
            .env("QUOTAGATE_CONTROL_PLANE_DIR", &dir)
            .output()
            .map_err(|e| e.to_string())?;
        let cp = ControlPlane {
            kubeconfig: dir.join("kubeconfig"),
            owned: Some(dir),
        };
        assert!(
            out.status.success(),
            "scripts/control-plane.sh up failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let env = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            env.trim(),
            format!("export KUBECONFIG={}", cp.kubeconfig.display()),
            "`up` ends with the line `env` prints"
        );
        Ok(cp)
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if let Some(dir) = &self.owned {
            let _ = script()
                .arg("down")
                .env("QUOTAGATE_CONTROL_PLANE_DIR", dir)
                .status();
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
