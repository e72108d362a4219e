//! The KubeRay walkthrough of docs/kubectl.md, as a person runs it: `quotagate run --embedded --listen`, then the
//! real kubectl applies a RayService in the shape of KubeRay's ray-service.sample.yaml
//! (tests/fixtures/manifests/kuberay/ray-service.getting-started.yaml), waits for Ready, changes rayVersion and sees
//! the blue/green upgrade switch to a new cluster. kubectl comes from QUOTAGATE_KUBECTL or
//! .venv-kubectl/bin/kubectl; without it the test prints a skip line, or fails when QUOTAGATE_REQUIRE_TOOLS=1.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn kubectl_path() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("QUOTAGATE_KUBECTL") {
        return Some(PathBuf::from(p));
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-kubectl/bin/kubectl");
    p.exists().then_some(p)
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn kubectl(bin: &PathBuf, kubeconfig: &PathBuf, args: &[&str]) -> String {
    let out = Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "kubectl {args:?} failed: {text}");
    text
}

/// Polls a jsonpath until `ok` holds (kubectl has no wait for "field changed to something else").
fn until(bin: &PathBuf, kc: &PathBuf, args: &[&str], what: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = kubectl(bin, kc, args);
        if ok(out.trim()) {
            return out.trim().to_string();
        }
        assert!(Instant::now() < deadline, "{what}: still {out:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn kuberay_sample_becomes_ready_and_upgrades_blue_green_with_kubectl() {
    let Some(bin) = kubectl_path() else {
        if std::env::var("QUOTAGATE_REQUIRE_TOOLS").as_deref() == Ok("1") {
            panic!("kubectl not installed and QUOTAGATE_REQUIRE_TOOLS=1: run scripts/install-kubectl.sh");
        }
        println!("skipped: kubectl not installed, run scripts/install-kubectl.sh");
        return;
    };
    let dir = std::env::temp_dir().join(format!("quotagate-walkthrough-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    let _server = Running(
        Command::new(env!("CARGO_BIN_EXE_quotagate"))
            .args([
                "run",
                "--embedded",
                "--listen",
                "127.0.0.1:0",
                "--pod-start-delay",
                "100ms",
                "--serve-build-delay",
                "200ms",
                "--replica-start-delay",
                "200ms",
                "--kubeconfig-out",
            ])
            .arg(&kc)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&kc).is_ok_and(|t| t.contains("server:")) {
        assert!(Instant::now() < deadline, "no kubeconfig written");
        std::thread::sleep(Duration::from_millis(50));
    }

    kubectl(
        &bin,
        &kc,
        &[
            "apply",
            "-f",
            "tests/fixtures/manifests/kuberay/ray-service.getting-started.yaml",
        ],
    );
    kubectl(
        &bin,
        &kc,
        &[
            "wait",
            "--for=condition=Ready",
            "rayservice/rayservice-sample",
            "--timeout=90s",
        ],
    );
    let first = until(
        &bin,
        &kc,
        &[
            "get",
            "rayservice",
            "rayservice-sample",
            "-o",
            "jsonpath={.status.activeServiceStatus.rayClusterName}",
        ],
        "active cluster",
        |s| !s.is_empty(),
    );
    let pods = kubectl(
        &bin,
        &kc,
        &["get", "pods", "-l", &format!("ray.io/cluster={first}")],
    );
    assert!(pods.contains("Running"), "{pods}");

    kubectl(
        &bin,
        &kc,
        &[
            "patch",
            "rayservice",
            "rayservice-sample",
            "--type=merge",
            "-p",
            r#"{"spec":{"rayClusterConfig":{"rayVersion":"2.47.0"}}}"#,
        ],
    );
    let second = until(
        &bin,
        &kc,
        &[
            "get",
            "rayservice",
            "rayservice-sample",
            "-o",
            "jsonpath={.status.activeServiceStatus.rayClusterName}",
        ],
        "switch to the new cluster",
        |s| !s.is_empty() && s != first,
    );
    let selector = kubectl(
        &bin,
        &kc,
        &[
            "get",
            "svc",
            "rayservice-sample-serve-svc",
            "-o",
            "jsonpath={.spec.selector.ray\\.io/cluster}",
        ],
    );
    assert_eq!(
        selector.trim(),
        second,
        "the serve Service follows the new cluster"
    );
    let ready = kubectl(
        &bin,
        &kc,
        &[
            "get",
            "rayservice",
            "rayservice-sample",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ],
    );
    assert_eq!(ready.trim(), "True");
    let _ = std::fs::remove_dir_all(&dir);
}
