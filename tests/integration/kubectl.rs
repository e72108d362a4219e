//! kubectl against `run_embedded` listening on loopback: apply Kueue's single-ClusterQueue setup and
//! a Workload, then read ClusterQueue status and Workload conditions.
//! kubectl comes from QUOTAGATE_KUBECTL, .venv-kubectl/bin/kubectl or PATH; without it the test
//! prints a skip line (or fails when QUOTAGATE_REQUIRE_TOOLS=1).

use std::path::{Path, PathBuf};
use std::time::Duration;

use quotagate::wiring::manager::{EmbeddedOptions, ManagerOptions, run_embedded};

pub(super) fn kubectl_path() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("QUOTAGATE_KUBECTL") {
        return Some(PathBuf::from(p));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-kubectl/bin/kubectl");
    if venv.exists() {
        return Some(venv);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("kubectl"))
            .find(|p| p.exists())
    })
}

pub(super) async fn kubectl(bin: &Path, dir: &Path, args: &[&str]) -> (bool, String) {
    let out = tokio::process::Command::new(bin)
        .args(args)
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .env("KUBECACHEDIR", dir.join("cache"))
        .env("HOME", dir)
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

const WORKLOAD: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: sample
  namespace: default
spec:
  queueName: user-queue
  podSets:
  - name: main
    count: 2
    template:
      spec:
        restartPolicy: Never
        containers:
        - name: c
          image: busybox
          resources:
            requests:
              cpu: "1"
              memory: 200Mi
"#;

/// `run_embedded` on a loopback port with its kubeconfig in a fresh directory.
pub(super) struct Running {
    bin: PathBuf,
    pub(super) dir: PathBuf,
    stop: tokio::sync::oneshot::Sender<()>,
    manager: tokio::task::JoinHandle<Result<(), quotagate::wiring::manager::ManagerError>>,
}

impl Running {
    /// `None` (after a skip line) when kubectl is not installed and not required.
    async fn start(name: &str) -> Option<Running> {
        Self::start_with(name, |_| {}).await
    }

    /// As [`Running::start`], with `edit` applied to the options first.
    pub(super) async fn start_with(name: &str, edit: impl FnOnce(&mut EmbeddedOptions)) -> Option<Running> {
        let Some(bin) = kubectl_path() else {
            assert!(
                std::env::var("QUOTAGATE_REQUIRE_TOOLS").as_deref() != Ok("1"),
                "kubectl not installed and QUOTAGATE_REQUIRE_TOOLS=1"
            );
            println!("skipped: kubectl not installed, run scripts/install-kubectl.sh");
            return None;
        };
        let dir = std::env::temp_dir().join(format!("quotagate-integration-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let opts = EmbeddedOptions {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            kubeconfig_out: Some(dir.join("kubeconfig")),
            manager: ManagerOptions {
                leader_election: true,
                resync: Duration::from_millis(300),
                ..Default::default()
            },
            sims: Default::default(),
            ray_sims: Default::default(),
        };
        let mut opts = opts;
        edit(&mut opts);
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let manager = tokio::spawn(run_embedded(opts, async move {
            let _ = stop_rx.await;
        }));
        // The kubeconfig is written once the listener is bound (process start-up, not cluster state);
        // 30 s, as start-up on a machine busy compiling took over 10.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !dir.join("kubeconfig").exists() {
            assert!(
                !manager.is_finished(),
                "run_embedded ended before writing its kubeconfig"
            );
            assert!(
                tokio::time::Instant::now() < deadline,
                "run_embedded wrote no kubeconfig"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Some(Running {
            bin,
            dir,
            stop,
            manager,
        })
    }

    /// As [`Running::start`], with the simulated Ray dashboards (100 ms builds and replica starts).
    pub(super) async fn start_with_simulated_ray(name: &str) -> Option<Running> {
        Self::start_with(name, |o| {
            o.manager.ray = Some(quotagate::wiring::ray::Dashboards::simulated(
                Duration::from_millis(100),
                Duration::from_millis(100),
            ));
        })
        .await
    }

    pub(super) async fn kubectl(&self, args: &[&str]) -> (bool, String) {
        kubectl(&self.bin, &self.dir, args).await
    }

    async fn apply_setup(&self) {
        let setup = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/manifests/kueue/single-clusterqueue.yaml"
        );
        let (ok, out) = self.kubectl(&["apply", "-f", setup]).await;
        assert!(ok, "{out}");
        assert!(
            out.contains("clusterqueue.kueue.x-k8s.io/cluster-queue created"),
            "{out}"
        );
    }

    pub(super) async fn stop(self) {
        let _ = self.stop.send(());
        let result = tokio::time::timeout(Duration::from_secs(10), self.manager)
            .await
            .unwrap()
            .unwrap();
        assert!(result.is_ok(), "{result:?}");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_kueue_setup_and_sees_admission() {
    let Some(run) = Running::start("kubectl").await else {
        return;
    };
    let dir = run.dir.clone();
    run.apply_setup().await;
    std::fs::write(dir.join("wl.yaml"), WORKLOAD).unwrap();
    let (ok, out) = run
        .kubectl(&["apply", "-f", dir.join("wl.yaml").to_str().unwrap()])
        .await;
    assert!(ok, "{out}");
    // kubectl waits on a watch.
    let (ok, out) = run
        .kubectl(&[
            "wait",
            "--for=condition=Admitted",
            "workload/sample",
            "--timeout=30s",
        ])
        .await;
    assert!(ok, "{out}");
    let (ok, reason) = run
        .kubectl(&[
            "get",
            "workload",
            "sample",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"QuotaReserved\")].message}",
        ])
        .await;
    assert!(ok, "{reason}");
    assert_eq!(reason, "Quota reserved in ClusterQueue cluster-queue");
    let (ok, out) = run
        .kubectl(&[
            "wait",
            "--for=jsonpath={.status.admittedWorkloads}=1",
            "clusterqueue/cluster-queue",
            "--timeout=30s",
        ])
        .await;
    assert!(ok, "{out}");
    let (ok, usage) = run
        .kubectl(&[
            "get",
            "clusterqueue",
            "cluster-queue",
            "-o",
            "jsonpath={.status.flavorsUsage[0].resources[0].total}",
        ])
        .await;
    assert!(ok, "{usage}");
    assert_eq!(usage, "2");
    let (ok, table) = run.kubectl(&["get", "workloads"]).await;
    assert!(
        ok && table.contains("sample") && table.contains("cluster-queue"),
        "{table}"
    );
    let (ok, active) = run
        .kubectl(&[
            "get",
            "cq",
            "cluster-queue",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Active\")].reason}",
        ])
        .await;
    assert!(ok, "{active}");
    assert_eq!(active, "Ready");

    // Issue 13 items 1 and 6, as a careless user hits them: each refused with the field named, and
    // the admitted workload and the server unaffected.
    let bad_name = WORKLOAD.replace("name: sample", "name: stuck wl");
    let space_quota = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: spaced\nspec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: default-flavor\n      resources:\n      - name: cpu\n        nominalQuota: \" 1\"\n";
    let negative_cpu = "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n  name: neg\n  labels:\n    kueue.x-k8s.io/queue-name: user-queue\nspec:\n  headGroupSpec:\n    rayStartParams: {}\n    template:\n      spec:\n        containers:\n        - name: head\n          image: rayproject/ray\n          resources:\n            requests:\n              cpu: \"-1\"\n";
    for (file, yaml, want) in [
        ("badname.yaml", bad_name.as_str(), "metadata.name"),
        ("spaced.yaml", space_quota, "nominalQuota"),
        ("neg.yaml", negative_cpu, "resources.requests[cpu]"),
    ] {
        std::fs::write(dir.join(file), yaml).unwrap();
        let (ok, out) = run
            .kubectl(&["apply", "-f", dir.join(file).to_str().unwrap()])
            .await;
        assert!(
            !ok && out.contains(want),
            "{file} must be refused naming {want}: {out}"
        );
    }
    let (ok, out) = run.kubectl(&["get", "ns"]).await;
    assert!(ok && out.contains("default"), "{out}");
    let (ok, names) = run
        .kubectl(&["get", "workloads", "-o", "jsonpath={.items[*].metadata.name}"])
        .await;
    assert!(ok && names == "sample", "nothing else stored: {names}");
    run.stop().await;
}

/// Issue 44: the first thing a user does with a pending Workload is `kubectl describe` it. As in
/// Kueue (scheduler.go `requeueAndUpdate`), the scheduler's verdict is a Warning `Pending` event on
/// the Workload, and describe shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_of_a_pending_workload_shows_why_it_waits() {
    let Some(run) = Running::start("describe-pending").await else {
        return;
    };
    let dir = run.dir.clone();
    run.apply_setup().await;
    let big = WORKLOAD
        .replace("name: sample", "name: big")
        .replace("cpu: \"1\"", "cpu: \"100\"");
    std::fs::write(dir.join("big.yaml"), big).unwrap();
    let (ok, out) = run
        .kubectl(&["apply", "-f", dir.join("big.yaml").to_str().unwrap()])
        .await;
    assert!(ok, "{out}");
    let (ok, out) = run
        .kubectl(&[
            "wait",
            "--for=jsonpath={.status.conditions[?(@.type==\"QuotaReserved\")].reason}=ExceedsMaxQuota",
            "workload/big",
            "--timeout=30s",
        ])
        .await;
    assert!(ok, "{out}");
    let (ok, message) = run
        .kubectl(&[
            "get",
            "workload",
            "big",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"QuotaReserved\")].message}",
        ])
        .await;
    assert!(ok && message.contains("insufficient quota"), "{message}");
    // Events are published off the admission loop: give the write a moment to land.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let described = loop {
        let (ok, out) = run.kubectl(&["describe", "workload", "big"]).await;
        assert!(ok, "{out}");
        if out.contains("Pending") && out.contains("Warning") || tokio::time::Instant::now() > deadline {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let events = described.split("Events:").nth(1).unwrap_or_default();
    let line = events
        .lines()
        .find(|l| l.contains("Pending"))
        .unwrap_or_else(|| panic!("no Pending event: {described}"));
    assert!(
        line.trim_start().starts_with("Warning") && line.contains("insufficient quota"),
        "{line}"
    );
    run.stop().await;
}

/// Issue 13: a bounded load through kubectl with authentication on. 2,000 Workloads of 10m CPU
/// each against the 9-CPU ClusterQueue: exactly 900 admitted, 1,100 pending, none over quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_workloads_through_kubectl_are_admitted_to_the_quota() {
    let Some(run) = Running::start("kubectl-load").await else {
        return;
    };
    run.apply_setup().await;
    let docs: Vec<String> = (0..2000)
        .map(|i| {
            WORKLOAD
                .replace("name: sample", &format!("name: load-{i:04}"))
                .replace("count: 2", "count: 1")
                .replace("cpu: \"1\"", "cpu: 10m")
                .replace("memory: 200Mi", "memory: 1Mi")
        })
        .collect();
    let file = run.dir.join("load.yaml");
    std::fs::write(&file, docs.join("---\n")).unwrap();
    let (ok, out) = run.kubectl(&["create", "-f", file.to_str().unwrap()]).await;
    assert!(ok, "{}", &out[out.len().saturating_sub(2000)..]);
    let (ok, out) = run
        .kubectl(&[
            "wait",
            "--for=jsonpath={.status.admittedWorkloads}=900",
            "clusterqueue/cluster-queue",
            "--timeout=120s",
        ])
        .await;
    assert!(ok, "{out}");
    // Settled: the count stays at the quota, and the rest wait.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (ok, out) = run
        .kubectl(&[
            "get",
            "clusterqueue",
            "cluster-queue",
            "-o",
            "jsonpath={.status.admittedWorkloads} {.status.pendingWorkloads} {.status.flavorsUsage[0].resources[0].total}",
        ])
        .await;
    assert!(ok, "{out}");
    assert_eq!(out, "900 1100 9");
    let (ok, out) = run
        .kubectl(&[
            "get",
            "workloads",
            "-o",
            "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"QuotaReserved\")].status}{\"\\n\"}{end}",
        ])
        .await;
    assert!(ok, "{out}");
    let reserved = out.lines().filter(|l| *l == "True").count();
    assert_eq!((reserved, out.lines().count()), (900, 2000));
    run.stop().await;
}
