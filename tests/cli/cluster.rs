//! The built binary as a user runs it: `quotagate plan` on KubeRay's samples (offline), and the
//! platform-team verbs against `quotagate run --embedded --listen ... --kubeconfig-out ...`, set up
//! with the real kubectl: `explain workload`, `pending-workloads`, kueuectl's `create resourceflavor`,
//! `list pods` and the kubectl pass-through.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// (exit code, stdout, stderr).
fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("the command runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The cells of the table row whose first cell is `first` (kubectl's columns are 3+ spaces apart).
fn row(table: &str, first: &str) -> Vec<String> {
    table
        .lines()
        .map(|l| {
            l.split("   ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .find(|cells| cells.first().map(String::as_str) == Some(first))
        .unwrap_or_else(|| panic!("no row {first:?} in\n{table}"))
}

/// RayServices in the shapes KubeRay's getting-started and incremental-upgrade guides use.
const SAMPLE: &str = "tests/fixtures/manifests/kuberay/ray-service.getting-started.yaml";
const INCREMENTAL: &str = "tests/fixtures/manifests/kuberay/ray-service.incremental-istio.yaml";
const SETUP: &str = "tests/fixtures/manifests/kueue/single-clusterqueue.yaml";

/// The README's numbers, checked by hand there: the sample's head 2 CPU/2Gi + one worker 500m/2Gi,
/// doubled by blue/green; Kueue's single-ClusterQueue setup (9 CPU, 36Gi) admits both.
#[test]
fn plan_prints_the_numbers_the_readme_checks_by_hand() {
    let (code, out, err) = run(bin().args([
        "plan",
        "-f",
        SAMPLE,
        "-f",
        SETUP,
        "--cluster-queue",
        "cluster-queue",
    ]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with(
            "RayService default/rayservice-sample   upgrade strategy NewCluster\nClusterQueue cluster-queue\n"
        ),
        "{out}"
    );
    assert_eq!(
        row(&out, "steady (spec)"),
        ["steady (spec)", "2500m", "4Gi", "yes (default-flavor)"]
    );
    assert_eq!(
        row(&out, "peak (blue/green: both clusters)"),
        [
            "peak (blue/green: both clusters)",
            "5",
            "8Gi",
            "yes (default-flavor)"
        ]
    );
    assert_eq!(
        row(&out, "upgrade needs on top of steady"),
        ["upgrade needs on top of steady", "2500m", "4Gi"]
    );

    // Head 1 CPU/2Gi + the autoscaler sidecar 500m/512Mi + one worker 500m/1Gi; at a 10% surge
    // Serve still runs one replica of each deployment, so the pending cluster is a full one.
    let (code, out, err) = run(bin().args(["plan", "-f", INCREMENTAL]));
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(row(&out, "steady (spec)"), ["steady (spec)", "2", "3584Mi"]);
    assert_eq!(
        row(&out, "peak (incremental: pending at 10%, active at 100%)"),
        ["peak (incremental: pending at 10%, active at 100%)", "4", "7Gi"]
    );
    assert_eq!(
        row(&out, "upgrade needs on top of steady"),
        ["upgrade needs on top of steady", "2", "3584Mi"]
    );

    let (code, _, err) = run(bin().args(["plan", "-f", "does-not-exist.yaml"]));
    assert_eq!(code, 1);
    assert!(err.contains("does-not-exist.yaml"), "{err}");
}

fn kubectl_path() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("QUOTAGATE_KUBECTL") {
        return Some(PathBuf::from(p));
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-kubectl/bin/kubectl");
    if venv.exists() {
        return Some(venv);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("kubectl"))
            .find(|p| p.exists())
    })
}

/// `quotagate run --embedded` on a loopback port; killed on drop.
struct Server {
    child: std::process::Child,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Server {
    fn start(name: &str) -> Server {
        let dir = std::env::temp_dir().join(format!("quotagate-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let kc = dir.join("kubeconfig");
        let child = bin()
            .args([
                "run",
                "--embedded",
                "--listen",
                "127.0.0.1:0",
                "--pod-start-delay",
                "100ms",
                "--kubeconfig-out",
            ])
            .arg(&kc)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Server { child, dir };
        // The kubeconfig is written once the listener is bound (process start-up, not cluster state).
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(&kc).is_ok_and(|t| t.contains("token:")) {
            assert!(Instant::now() < deadline, "no kubeconfig written");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    fn kubectl(&self, kubectl: &Path, args: &[&str]) -> String {
        let (code, out, err) = run(Command::new(kubectl)
            .args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", &self.dir)
            .env("KUBECACHEDIR", self.dir.join("cache")));
        assert_eq!(code, 0, "kubectl {args:?}: {out}{err}");
        out
    }

    /// The binary against this cluster, with `path` as PATH (the pass-through looks kubectl up there).
    fn quotagate(&self, args: &[&str], path: &std::ffi::OsStr) -> (i32, String, String) {
        run(bin()
            .args(args)
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .env("HOME", &self.dir)
            .env("PATH", path))
    }

    fn apply(&self, kubectl: &Path, name: &str, yaml: &str) {
        let p = self.dir.join(format!("{name}.yaml"));
        std::fs::write(&p, yaml).unwrap();
        self.kubectl(kubectl, &["apply", "-f", p.to_str().unwrap()]);
    }
}

fn workload(name: &str, priority: i32, cpu: &str) -> String {
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  queueName: user-queue\n  priority: {priority}\n  podSets:\n  - name: main\n    count: 1\n    template:\n      spec:\n        containers:\n        - name: c\n          image: busybox\n          resources:\n            requests:\n              cpu: \"{cpu}\"\n"
    )
}

const RAYCLUSTER: &str = "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n  name: rc\n  namespace: default\n  labels:\n    kueue.x-k8s.io/queue-name: user-queue\nspec:\n  headGroupSpec:\n    rayStartParams: {}\n    template:\n      spec:\n        containers:\n        - name: ray-head\n          image: rayproject/ray:2.46.0\n          resources:\n            requests:\n              cpu: \"1\"\n";

/// Kueue's single-ClusterQueue setup (9 CPU): a RayCluster (1 CPU) and "running" (4 CPU) are
/// admitted; "low" and "high" (5 CPU each) wait, 1 CPU short, high first.
#[test]
fn platform_verbs_through_the_binary_against_run_embedded() {
    let Some(kubectl) = kubectl_path() else {
        assert!(
            std::env::var("QUOTAGATE_REQUIRE_TOOLS").as_deref() != Ok("1"),
            "kubectl not installed and QUOTAGATE_REQUIRE_TOOLS=1"
        );
        println!("skipped: kubectl not installed, run scripts/install-kubectl.sh");
        return;
    };
    let kubectl = std::fs::canonicalize(&kubectl).unwrap_or(kubectl);
    let path = kubectl.parent().unwrap().as_os_str().to_owned();
    let s = Server::start("verbs");
    let q = |args: &[&str]| s.quotagate(args, &path);
    s.kubectl(&kubectl, &["apply", "-f", SETUP]);
    s.apply(&kubectl, "rc", RAYCLUSTER);
    s.apply(&kubectl, "running", &workload("running", 0, "4"));
    s.kubectl(
        &kubectl,
        &[
            "wait",
            "--for=condition=QuotaReserved",
            "workload/running",
            "--timeout=30s",
        ],
    );
    for (name, prio) in [("low", 1), ("high", 10)] {
        s.apply(&kubectl, name, &workload(name, prio, "5"));
    }
    for name in ["low", "high"] {
        s.kubectl(
            &kubectl,
            &[
                "wait",
                "--for=jsonpath={.status.conditions[?(@.type==\"QuotaReserved\")].reason}=WaitingForQuota",
                &format!("workload/{name}"),
                "--timeout=30s",
            ],
        );
    }

    // explain: the shortfall in numbers and who holds the quota.
    let (code, out, err) = q(&["explain", "workload", "high"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("WaitingForQuota: couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, 1 more needed\n"), "{out}");
    let main = row(&out, "main");
    assert_eq!(
        main[..8],
        ["main", "1", "cpu", "5", "default-flavor", "9", "5", "4"],
        "{out}"
    );
    assert_eq!(
        row(&out, "default/running")[..4],
        [
            "default/running",
            "cluster-queue",
            "0",
            "4 cpu in flavor default-flavor"
        ],
        "{out}"
    );

    // pending-workloads: the visibility API's order, per ClusterQueue and per LocalQueue.
    let (code, out, err) = q(&["pending-workloads", "--cluster-queue", "cluster-queue"]);
    assert_eq!(code, 0, "{out}{err}");
    let cells = |out: &str| -> Vec<Vec<String>> {
        out.lines()
            .skip(1)
            .map(|l| l.split_whitespace().map(String::from).collect())
            .collect()
    };
    assert!(
        out.starts_with("NAMESPACE   NAME   LOCALQUEUE   PRIORITY   POSITION IN CQ   POSITION IN LQ\n"),
        "{out}"
    );
    assert_eq!(
        cells(&out),
        [
            ["default", "high", "user-queue", "10", "0", "0"],
            ["default", "low", "user-queue", "1", "1", "1"]
        ],
        "{out}"
    );
    let (code, lq, _) = q(&[
        "pending-workloads",
        "--local-queue",
        "user-queue",
        "-n",
        "default",
    ]);
    assert_eq!((code, lq), (0, out));

    // create resourceflavor, with kueuectl's flags; kubectl sees what was created.
    let (code, out, err) = q(&[
        "create",
        "rf",
        "gpu",
        "--node-labels",
        "pool=gpu,zone=a",
        "--node-taints",
        "nvidia.com/gpu=present:NoSchedule",
        "--tolerations",
        "nvidia.com/gpu:NoSchedule",
    ]);
    assert_eq!(
        (code, out.as_str()),
        (0, "resourceflavor.kueue.x-k8s.io/gpu created\n"),
        "{err}"
    );
    let got = s.kubectl(&kubectl, &["get", "rf", "gpu", "-o", "jsonpath={.spec.nodeLabels.pool} {.spec.nodeTaints[0].key}={.spec.nodeTaints[0].value}:{.spec.nodeTaints[0].effect} {.spec.tolerations[0].operator}"]);
    assert_eq!(got, "gpu nvidia.com/gpu=present:NoSchedule Exists");
    let (code, out, _) = q(&["create", "resourceflavor", "dry", "--dry-run", "client"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "resourceflavor.kueue.x-k8s.io/dry created (client dry run)\n")
    );
    let (code, _, err) = q(&["create", "rf", "bad", "--node-taints", "key=value:Sometimes"]);
    assert!(
        code != 0 && err.contains("invalid --node-taints: invalid taint effect: Sometimes"),
        "{err}"
    );

    // list pods: the RayCluster's, directly and through its Workload.
    s.kubectl(
        &kubectl,
        &[
            "wait",
            "--for=jsonpath={.status.state}=ready",
            "raycluster/rc",
            "--timeout=30s",
        ],
    );
    let (code, out, err) = q(&["list", "pods", "--for", "raycluster/rc"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("NAME "), "{out}");
    let head = out
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(head.starts_with("rc-head"), "{out}");
    assert_eq!(row(&out, &head)[1..4], ["1/1", "Running", "0"], "{out}");
    let (_, wl, _) = q(&["list", "workload", "--for", "raycluster/rc", "-o", "name"]);
    let wl = wl
        .trim()
        .trim_start_matches("workload.kueue.x-k8s.io/")
        .to_string();
    assert!(!wl.is_empty());
    let (code, via, _) = q(&["list", "po", "--for", &format!("workload/{wl}")]);
    // The same pods either way; AGE (the last column) may tick between the two calls.
    let without_age = |t: &str| -> Vec<Vec<String>> {
        t.lines()
            .map(|l| {
                let cols: Vec<String> = l.split_whitespace().map(String::from).collect();
                cols[..cols.len().saturating_sub(1)].to_vec()
            })
            .collect()
    };
    assert_eq!(code, 0, "{via}");
    assert_eq!(without_age(&via), without_age(&out), "{via}\n{out}");
    let (code, out, err) = q(&["list", "pods", "--for", "raycluster/ghost"]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "", "No resources found in default namespace.\n")
    );

    // The pass-through runs the real kubectl with the kind's full name.
    let (code, out, err) = q(&[
        "get",
        "cq",
        "cluster-queue",
        "-o",
        "jsonpath={.spec.resourceGroups[0].flavors[0].resources[0].nominalQuota}",
    ]);
    assert_eq!((code, out.as_str()), (0, "9"), "{err}");
    let (code, out, _) = q(&["get", "kwl", "-o", "name"]);
    assert_eq!(code, 0);
    assert!(out.contains("workload.kueue.x-k8s.io/high\n"), "{out}");
    let (code, out, err) = q(&["delete", "rf", "gpu"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("deleted"), "{out}");
    let (code, _, err) = s.quotagate(&["describe", "lq", "user-queue"], std::ffi::OsStr::new(""));
    assert!(
        code != 0 && err.contains("pass-through commands need kubectl: not found in PATH"),
        "{err}"
    );
}
