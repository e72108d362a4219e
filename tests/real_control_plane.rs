//! Issue 58, the real-ground tier: quotagate against a real Kubernetes control plane (etcd,
//! kube-apiserver, kube-controller-manager and kube-scheduler built from their Go modules by
//! `scripts/control-plane.sh`), the install applied by the real kubectl with server-side apply, and the
//! manager as a separate process (`quotagate run --kubeconfig`).
//!
//! The control plane: `QUOTAGATE_REAL_KUBECONFIG` names a running one (nothing is started or stopped);
//! else the test runs `scripts/control-plane.sh up` in a directory of its own (building the binaries
//! when Go is there and they are not built yet) and `down` when it ends. Without the binaries and
//! without Go, or without kubectl (env QUOTAGATE_KUBECTL or .venv-kubectl/bin/kubectl), the test prints
//! one line and skips; with `QUOTAGATE_REQUIRE_TOOLS=1` it fails instead.
//!
//! What runs: the install without its webhook configurations (below); the manager (`quotagate run
//! --kubeconfig --simulated-ray-dashboards`) and the node agent (`quotagate node-agent --nodes 2`) as
//! processes of their own; two Ready Nodes whose Leases are renewed; a queue-labelled batch Job admitted,
//! resumed, its pods made by the real Job controller, bound by the real kube-scheduler, run to completion
//! by the agent, its Workload `Finished`; then the POC's gated upgrade (config/samples/gated-upgrade): a
//! 2-CPU RayService in a 3-CPU ClusterQueue Ready, its rayVersion bumped, the pending RayCluster with 0
//! pods and the usage at 2 while the quota is 3, the quota raised to 4, the pending cluster admitted and
//! switched to (the serve Service selects it, the real EndpointSlice controller lists its head), the old
//! cluster and its pods gone, the usage back at 2, and the invariant watcher
//! reporting no violation.
//!
//! Webhooks stay out of the install: the node agent's pods are simulated, so nothing serves the shipped
//! Service's endpoints (the Deployment's own pods wait, `ImageNotSimulated`), and an EndpointSlice may
//! not point at the manager on loopback ("may not be in the loopback range"). With `failurePolicy:
//! Fail` every Job and RayCluster create would then fail, so the test applies the install without its
//! two webhook configurations, and the batch Job is created suspended (as Kueue's docs ask when its
//! webhook is not in the path). A `url:` webhook would need the manager's certificate to name
//! 127.0.0.1, which its cert management (for the Service's DNS names) does not.
//! The install with its webhooks, the manager in-cluster in pods that the node agent's process runtime
//! runs, is `install.rs` beside this file; two such managers with the leader's process SIGKILLed
//! mid-upgrade, `leader.rs`.
//! The Helm chart with the real helm on that same path (install, two gated RayService upgrades under
//! the chart's managers, a `helm upgrade` in the middle of the second, uninstall) is `helm.rs`.
//!
//! Ray dashboards: the simulated pods run no Ray and their addresses reach nothing, so the manager
//! answers its own dashboard calls with the Ray dashboard simulator (`--simulated-ray-dashboards`), as
//! the embedded cluster does; the Serve status is the one simulated part of the upgrade.

#[path = "real_control_plane/install.rs"]
mod install;

#[path = "real_control_plane/helm.rs"]
mod helm;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "real_control_plane/workflows.rs"]
mod workflows;

#[path = "real_control_plane/leader.rs"]
mod leader;

#[path = "real_control_plane/agent_planes.rs"]
mod agent_planes;
#[path = "real_control_plane/bench.rs"]
mod bench;
#[path = "real_control_plane/done_when.rs"]
mod done_when;
#[path = "real_control_plane/multikueue_worker.rs"]
mod multikueue_worker;

mod control_plane_support;
use control_plane_support::{ControlPlane, is_root, kubectl_path, root, skip};

/// kubectl on a control plane of this test's own (the times `started` counts from); `None`, after the
/// skip line, when the tools are missing.
fn kubectl_on_a_control_plane(name: &str, started: Instant) -> Option<(ControlPlane, Kubectl)> {
    let Some(bin) = kubectl_path() else {
        skip("kubectl not installed (scripts/install-kubectl.sh)");
        return None;
    };
    let cp = match ControlPlane::start("real-cp") {
        Ok(cp) => cp,
        Err(why) => {
            skip(&why);
            return None;
        }
    };
    println!("{name}: control plane up after {:?}", started.elapsed());
    let k = Kubectl {
        bin,
        kubeconfig: cp.kubeconfig.clone(),
    };
    Some((cp, k))
}

/// A child process killed when dropped, its stderr in a file.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn log(&self) -> String {
        let mut s = String::new();
        let _ = std::fs::File::open(&self.log).and_then(|mut f| f.read_to_string(&mut s));
        s
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A node agent stopped with SIGTERM (its process runtime then stops the pods' processes and removes
/// their network namespaces, as SIGKILL would not), even when the test fails.
struct Stopped(Proc);

impl Drop for Stopped {
    fn drop(&mut self) {
        let pid = self.0.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline && matches!(self.0.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("kubectl runs");
        if let Some(text) = stdin {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(text.as_bytes())
                .expect("stdin written");
        }
        let out = child.wait_with_output().expect("kubectl ends");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.run(args, stdin);
        assert!(ok, "kubectl {args:?} failed: {err}");
        out
    }

    fn json(&self, args: &[&str]) -> Option<Value> {
        let mut a = args.to_vec();
        a.extend(["-o", "json", "--show-managed-fields"]);
        let (ok, out, _) = self.run(&a, None);
        ok.then(|| serde_json::from_str(&out).ok()).flatten()
    }

    /// Polls `args` as JSON until `done` holds, failing with `what` after `timeout`.
    fn wait_for(&self, args: &[&str], timeout: Duration, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        self.wait_for_or(args, timeout, || what.to_string(), done)
    }

    /// `wait_for` whose failure message is made when it fails (a log read then, not at the start).
    fn wait_for_or(
        &self,
        args: &[&str],
        timeout: Duration,
        what: impl Fn() -> String,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let start = Instant::now();
        loop {
            if let Some(v) = self.json(args)
                && done(&v)
            {
                return v;
            }
            assert!(start.elapsed() < timeout, "{}: not within {timeout:?}", what());
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Waits (at most 4 minutes) for the shipped manager Deployment in `quotagate-system` to be
    /// Available, and returns it. If it is not, the failure carries the Deployment, its pods and the
    /// end of each manager's log, so a run that fails once says why.
    fn manager_available(&self) -> Value {
        let args = [
            "get",
            "deployment",
            "quotagate-controller-manager",
            "-n",
            "quotagate-system",
        ];
        let timeout = Duration::from_secs(240);
        let start = Instant::now();
        loop {
            let d = self.json(&args);
            if let Some(d) = &d
                && d["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Available" && c["status"] == "True")
            {
                return d.clone();
            }
            if start.elapsed() >= timeout {
                panic!(
                    "the Deployment Available: not within {timeout:?}\ndeployment status: {}\n{}",
                    d.map(|d| d["status"].to_string()).unwrap_or_default(),
                    managers_report(self, "quotagate-system")
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// Why the managers in `ns` may not be up: each pod's state, the namespace's last events (a failed
/// probe says why it failed) and the end of each manager log the process runtime still holds.
fn managers_report(k: &Kubectl, ns: &str) -> String {
    let pods = k.json(&["get", "pods", "-n", ns]);
    let (_, events, _) = k.run(&["get", "events", "-n", ns, "--sort-by=.lastTimestamp"], None);
    let events: Vec<&str> = events.lines().collect();
    format!(
        "pods: {}\nevents (last 30):\n{}\n{}",
        pods.map(|p| pod_states(&p)).unwrap_or_default(),
        events[events.len().saturating_sub(30)..].join("\n"),
        manager_logs()
    )
}

/// Each pod's name, phase and container readiness, one line each.
fn pod_states(pods: &Value) -> String {
    let mut out = String::new();
    for p in pods["items"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "\n  {} {} {}",
            p["metadata"]["name"], p["status"]["phase"], p["status"]["containerStatuses"]
        ));
    }
    out
}

/// The last lines of every manager container log the process runtime still holds.
fn manager_logs() -> String {
    fn walk(dir: &std::path::Path, found: &mut Vec<PathBuf>, depth: usize) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() && depth < 6 {
                walk(&path, found, depth + 1);
            } else if path.file_name().is_some_and(|n| n == "manager.log") {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(std::path::Path::new("/var/tmp/quotagate-pods"), &mut found, 0);
    let mut out = String::new();
    for path in found {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        out.push_str(&format!("--- {} (last 40 lines)\n", path.display()));
        for l in &lines[lines.len().saturating_sub(40)..] {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

fn quotagate(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_quotagate"))
        .args(args)
        .output()
        .expect("quotagate runs");
    assert!(
        out.status.success(),
        "quotagate {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `quotagate install-manifests` as a stream of JSON documents, without the webhook configurations (see the module
/// comment).
fn install_without_webhooks() -> (String, usize) {
    install_stream(|d| {
        !matches!(
            d["kind"].as_str(),
            Some("ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration")
        )
    })
}

/// `quotagate install-manifests` as a stream of JSON documents, each document first given to `keep`,
/// which may change it and drops it by returning false; with the number of CRDs kept.
fn install_stream(mut keep: impl FnMut(&mut Value) -> bool) -> (String, usize) {
    let docs = quotagate::api::manifest::load_documents(&quotagate(&["install-manifests"]))
        .expect("the install manifest parses");
    let items: Vec<Value> = docs
        .into_iter()
        .filter_map(|mut d| keep(&mut d).then_some(d))
        .collect();
    let crds = items
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .count();
    // One JSON document per YAML document: kubectl validates a `List`'s items client-side, and its
    // client-side validation refuses the `null` the CRDs list among an optional enum's values.
    let stream = items
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n---\n");
    (stream, crds)
}

const QUEUES: &str = include_str!("fixtures/install/queues.yaml");

const JOB: &str = r#"
apiVersion: batch/v1
kind: Job
metadata:
  name: pi
  namespace: team
  labels:
    kueue.x-k8s.io/queue-name: lq
spec:
  suspend: true
  parallelism: 2
  completions: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: pi
        image: busybox
        command: ["sleep", "2"]
        resources:
          requests:
            cpu: "1"
            memory: 1Gi
"#;

fn managers(obj: &Value) -> Vec<String> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str().map(str::to_string))
        .collect()
}

/// `kubectl get` with a JSONPath, as text ("" when the object is not there).
fn jsonpath(k: &Kubectl, args: &[&str], path: &str) -> String {
    let mut a = args.to_vec();
    let output = format!("jsonpath={path}");
    a.extend(["-o", &output]);
    let (ok, out, _) = k.run(&a, None);
    if ok { out } else { String::new() }
}

/// Polls `f` until it gives a value, failing with `what` after `timeout`.
fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A runtime of two workers for what a test runs beside the control plane (the invariant watcher).
fn watcher_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The invariant watcher (the chaos and integration tests' one) on the control plane of `kubeconfig`,
/// checking I1-I6 on every Workload, RayCluster, Pod and ClusterQueue event; `serving_gap` adds I8.
fn watch_invariants(
    rt: &tokio::runtime::Runtime,
    kubeconfig: &std::path::Path,
    serving_gap: bool,
) -> quotagate::cli::chaos::invariants::Invariants {
    rt.block_on(async {
        let client = quotagate::cli::kube_client(Some(kubeconfig))
            .await
            .expect("a client for the admin kubeconfig");
        quotagate::cli::chaos::invariants::Invariants::start_with(client, serving_gap)
    })
}

fn spawn_logged(mut cmd: Command, log: PathBuf) -> Proc {
    let child = cmd
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("quotagate starts");
    Proc { child, log }
}

#[test]
fn install_a_batch_job_and_the_gated_upgrade_on_a_real_control_plane() {
    let started = Instant::now();
    let Some((cp, k)) = kubectl_on_a_control_plane("install", started) else {
        return;
    };

    // The server is the Kubernetes the control plane was built from.
    let version: Value = serde_json::from_str(&k.ok(&["version", "-o", "json"], None)).expect("version JSON");
    let git = version["serverVersion"]["gitVersion"].as_str().unwrap_or("");
    assert!(git.starts_with("v1.36."), "server version {git}");

    // Every CRD `quotagate crds` lists, the Gateway API's included, passes the real server's checks.
    let crds = quotagate(&["crds"]);
    k.ok(
        &["apply", "--server-side", "--dry-run=server", "-f", "-"],
        Some(&crds),
    );

    // The install, applied by the real kubectl with server-side apply, accepted whole.
    let (install, crd_count) = install_without_webhooks();
    k.ok(&["apply", "--server-side", "-f", "-"], Some(&install));
    let established = k.wait_for(
        &["get", "crd"],
        Duration::from_secs(60),
        "CRDs established",
        |v| {
            let items = v["items"].as_array().cloned().unwrap_or_default();
            let ours: Vec<&Value> = items
                .iter()
                .filter(|c| {
                    let g = c["spec"]["group"].as_str().unwrap_or("");
                    g == "kueue.x-k8s.io" || g == "ray.io"
                })
                .collect();
            ours.len() == crd_count
                && ours.iter().all(|c| {
                    c["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|x| x["type"] == "Established" && x["status"] == "True")
                })
        },
    );
    assert!(
        established["items"]
            .as_array()
            .is_some_and(|i| i.len() >= crd_count)
    );

    // The manager as its own process, with the admin kubeconfig; the Ray dashboards it calls are the
    // simulator's (the node agent's pods run no Ray, and their addresses reach nothing).
    let dir = std::env::temp_dir().join(format!("quotagate-real-cp-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    cmd.args(["run", "--kubeconfig"]).arg(&cp.kubeconfig).args([
        "--health-addr",
        "127.0.0.1:0",
        "--webhook-addr",
        "127.0.0.1:0",
        "--identity",
        "real-cp-test",
        "--simulated-ray-dashboards",
    ]);
    let manager = spawn_logged(cmd, dir.join("manager.log"));

    // The node agent: two Nodes of 4 CPU that the real scheduler binds pods to.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    cmd.args(["node-agent", "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .args([
            "--runtime",
            "sim",
            "--nodes",
            "2",
            "--capacity",
            "cpu=4,memory=16Gi,pods=20",
        ]);
    let agent = spawn_logged(cmd, dir.join("node-agent.log"));
    let nodes = k.wait_for(
        &["get", "nodes"],
        Duration::from_secs(60),
        &format!("two Ready, untainted Nodes; node agent log:\n{}", agent.log()),
        |v| {
            let items = v["items"].as_array().cloned().unwrap_or_default();
            items.len() == 2
                && items.iter().all(|n| {
                    // The TaintNodesByCondition admission plugin taints a new Node not-ready; the
                    // node lifecycle controller lifts it once it sees the Ready condition.
                    n["spec"]["taints"].as_array().is_none_or(Vec::is_empty)
                        && n["status"]["conditions"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
        },
    );
    assert_eq!(nodes["items"][0]["status"]["allocatable"]["cpu"], "4", "{nodes}");
    assert_eq!(
        jsonpath(
            &k,
            &["get", "lease", "quotagate-node-1", "-n", "kube-node-lease"],
            "{.spec.holderIdentity}"
        ),
        "quotagate-node-1",
        "the Node's Lease, heartbeated"
    );

    // The shipped Deployment's pods are bound too, but the agent cannot run quotagate's image: they
    // wait (`ImageNotSimulated`) rather than claim a manager and webhook endpoints that are not there.
    let waiting = k.wait_for(
        &["get", "pods", "-n", "quotagate-system"],
        Duration::from_secs(60),
        "the Deployment's pods bound and waiting",
        |v| {
            v["items"].as_array().is_some_and(|p| {
                !p.is_empty()
                    && p.iter().all(|p| {
                        p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                            == "ImageNotSimulated"
                    })
            })
        },
    );
    for p in waiting["items"].as_array().into_iter().flatten() {
        assert_eq!(p["status"]["phase"], "Pending", "{p}");
    }
    assert_eq!(
        jsonpath(
            &k,
            &[
                "get",
                "deployment",
                "quotagate-controller-manager",
                "-n",
                "quotagate-system"
            ],
            "{.status.conditions[?(@.type==\"Available\")].status}"
        ),
        "False",
        "no replica of the shipped Deployment is available"
    );

    k.ok(&["apply", "--server-side", "-f", "-"], Some(QUEUES));
    k.ok(&["create", "-f", "-"], Some(JOB));

    // The manager admits the Job's Workload into the 3-CPU queue (2 pods of 1 CPU each)...
    let wl = k.wait_for(
        &["get", "workloads", "-n", "team"],
        Duration::from_secs(90),
        &format!("the Job's Workload admitted; manager log:\n{}", manager.log()),
        |v| {
            v["items"].as_array().into_iter().flatten().any(|w| {
                w["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "QuotaReserved" && c["status"] == "True")
            })
        },
    );
    let wl = &wl["items"][0];
    let assigned = &wl["status"]["admission"]["podSetAssignments"][0];
    assert_eq!(assigned["count"], 2, "{wl}");
    assert_eq!(assigned["resourceUsage"]["cpu"], "2", "{wl}");
    assert!(
        managers(wl).iter().any(|m| m == "quotagate"),
        "the Workload's managedFields name quotagate: {:?}",
        managers(wl)
    );

    // ...and unsuspends it; the real Job controller starts it and creates its pods, the real
    // scheduler binds them to the agent's Nodes, the agent runs them (`sleep 2`) to completion.
    let job = k.wait_for(
        &["get", "job", "pi", "-n", "team"],
        Duration::from_secs(60),
        "the Job resumed and started by the Job controller",
        |j| j["spec"]["suspend"] == false && j["status"]["startTime"].is_string(),
    );
    let job_managers = managers(&job);
    assert!(
        job_managers.iter().any(|m| m == "quotagate"),
        "the Job's managedFields name quotagate for the resume: {job_managers:?}"
    );
    assert!(
        !job_managers.iter().any(|m| m == "unknown"),
        "a write without a field manager: {job_managers:?}"
    );
    let pods = k.wait_for(
        &["get", "pods", "-n", "team", "-l", "job-name=pi"],
        Duration::from_secs(60),
        "the Job controller's pods, bound by the scheduler",
        |v| {
            v["items"]
                .as_array()
                .is_some_and(|p| p.len() == 2 && p.iter().all(|p| p["spec"]["nodeName"].is_string()))
        },
    );
    for p in pods["items"].as_array().into_iter().flatten() {
        let node = p["spec"]["nodeName"].as_str().unwrap_or("");
        assert!(node.starts_with("quotagate-node-"), "bound to {node}");
    }
    k.wait_for(
        &["get", "job", "pi", "-n", "team"],
        Duration::from_secs(60),
        &format!("the Job complete; node agent log:\n{}", agent.log()),
        |j| j["status"]["succeeded"] == 2,
    );
    k.wait_for(
        &["get", "workloads", "-n", "team"],
        Duration::from_secs(60),
        "the Job's Workload Finished",
        |v| {
            v["items"].as_array().into_iter().flatten().any(|w| {
                w["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Finished" && c["status"] == "True")
            })
        },
    );
    println!("batch Job done after {:?}", started.elapsed());

    // The POC's gated upgrade (config/samples/gated-upgrade, POC-TESTING.md section 3), on real
    // ground: a 2-CPU RayService in a 3-CPU ClusterQueue. The invariant watcher (the chaos and
    // integration tests' one) checks I1-I6 on every Workload, RayCluster, Pod and ClusterQueue event.
    let rt = watcher_runtime();
    let inv = watch_invariants(&rt, &cp.kubeconfig, false);
    let samples = root().join("config/samples/gated-upgrade");
    for f in ["quota.yaml", "rayservice.yaml"] {
        k.ok(
            &["apply", "--server-side", "-f", samples.join(f).to_str().unwrap()],
            None,
        );
    }
    let poc = |path: &str| jsonpath(&k, &["get", "rayservice", "poc"], path);
    let usage = || {
        jsonpath(
            &k,
            &["get", "clusterqueue", "ray-cq"],
            "{.status.flavorsUsage[0].resources[?(@.name==\"cpu\")].total}",
        )
    };
    wait_until(
        &format!(
            "the RayService Ready; manager log:\n{}\nnode agent log:\n{}",
            manager.log(),
            agent.log()
        ),
        Duration::from_secs(120),
        || (poc("{.status.conditions[?(@.type==\"Ready\")].status}") == "True").then_some(()),
    );
    let first = poc("{.status.activeServiceStatus.rayClusterName}");
    assert!(!first.is_empty());
    assert_eq!(usage(), "2", "the active cluster's 2 CPU");
    println!("RayService Ready after {:?}", started.elapsed());

    // The upgrade: both clusters need 4 CPU, the queue has 3; the pending cluster waits at the gate.
    k.ok(
        &[
            "patch",
            "rayservice",
            "poc",
            "--type=merge",
            "-p",
            r#"{"spec":{"rayClusterConfig":{"rayVersion":"2.47.0"}}}"#,
        ],
        None,
    );
    let pending = wait_until("the pending cluster", Duration::from_secs(60), || {
        Some(poc("{.status.pendingServiceStatus.rayClusterName}")).filter(|p| !p.is_empty())
    });
    wait_until("the wait explained", Duration::from_secs(60), || {
        poc("{.status.conditions[?(@.type==\"UpgradeInProgress\")].message}")
            .contains("is gated: waiting for workload slice")
            .then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    let pods_of = |cluster: &str| {
        jsonpath(
            &k,
            &["get", "pods", "-l", &format!("ray.io/cluster={cluster}")],
            "{range .items[*]}{.metadata.name}{\"\\n\"}{end}",
        )
    };
    assert_eq!(
        poc("{.status.activeServiceStatus.rayClusterName}"),
        first,
        "no switch while the upgrade waits for quota"
    );
    assert!(
        pods_of(&pending).trim().is_empty(),
        "the pending cluster is gated: {}",
        pods_of(&pending)
    );
    assert_eq!(usage(), "2", "the gated cluster holds no quota");
    assert_eq!(
        jsonpath(
            &k,
            &["get", "clusterqueue", "ray-cq"],
            "{.spec.resourceGroups[0].flavors[0].resources[0].nominalQuota}"
        ),
        "3"
    );

    // Quota raised to 4: the pending cluster is admitted, its pods run, it takes the traffic and the
    // old cluster goes; the usage settles at 2.
    k.ok(&["patch", "clusterqueue", "ray-cq", "--type=json", "-p", r#"[{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota","value":"4"}]"#], None);
    wait_until("the pending cluster's pods", Duration::from_secs(60), || {
        (!pods_of(&pending).trim().is_empty()).then_some(())
    });
    wait_until(
        &format!("the switch to the new cluster; manager log:\n{}", manager.log()),
        Duration::from_secs(120),
        || (poc("{.status.activeServiceStatus.rayClusterName}") == pending).then_some(()),
    );
    // The traffic: the serve Service selects the new cluster, and the real EndpointSlice controller
    // lists the new cluster's head pod behind it.
    assert_eq!(
        jsonpath(
            &k,
            &["get", "service", "poc-serve-svc"],
            "{.spec.selector.ray\\.io/cluster}"
        ),
        pending
    );
    wait_until(
        "the serve Service's EndpointSlice on the new head",
        Duration::from_secs(60),
        || {
            let targets = jsonpath(
                &k,
                &[
                    "get",
                    "endpointslices",
                    "-l",
                    "kubernetes.io/service-name=poc-serve-svc",
                ],
                "{range .items[*].endpoints[*]}{.targetRef.name}{\"\\n\"}{end}",
            );
            let lines: Vec<&str> = targets.lines().filter(|l| !l.is_empty()).collect();
            (!lines.is_empty() && lines.iter().all(|l| l.starts_with(&pending))).then_some(())
        },
    );
    wait_until("the old cluster deleted", Duration::from_secs(60), || {
        let (_, out, err) = k.run(&["get", "raycluster", &first, "-o", "name"], None);
        (out.trim().is_empty() && err.contains("NotFound")).then_some(())
    });
    wait_until("the old cluster's pods gone", Duration::from_secs(60), || {
        pods_of(&first).trim().is_empty().then_some(())
    });
    wait_until("the usage settled at 2", Duration::from_secs(60), || {
        (usage() == "2").then_some(())
    });
    assert_eq!(poc("{.status.conditions[?(@.type==\"Ready\")].status}"), "True");
    println!("gated upgrade done after {:?}", started.elapsed());
    let violations = inv.violations();
    assert!(
        violations.is_empty(),
        "invariant violations:\n{}",
        violations.join("\n")
    );
    assert!(inv.checks() > 0, "the invariant watcher ran no check");
    drop(inv);
    drop(rt);

    for (who, p) in [("manager", &manager), ("node agent", &agent)] {
        let log = p.log();
        assert!(!log.contains("panicked"), "the {who} panicked:\n{log}");
    }
    drop(manager);
    drop(agent);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A queue-managed RayCluster as a GitOps repository holds it: no `suspend`, nothing of Kueue's but
/// the queue label. Head and one worker of 1 CPU each: 2 of the queue's 3 CPU.
const RAYCLUSTER: &str = r#"
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: rc
  namespace: team
  labels:
    kueue.x-k8s.io/queue-name: lq
spec:
  rayVersion: "2.46.0"
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.46.0
          resources:
            requests:
              cpu: "1"
              memory: 1Gi
  workerGroupSpecs:
  - groupName: workers
    replicas: 1
    minReplicas: 1
    maxReplicas: 1
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.46.0
          resources:
            requests:
              cpu: "1"
              memory: 1Gi
"#;

/// Issue 58, the GitOps re-apply: after admission, the user's unchanged `kubectl apply --server-side`
/// of a queue-managed RayCluster succeeds and `kubectl diff --server-side` finds nothing. Admission
/// used to merge the podset label and the flavor's node selector into the pod templates; with
/// `workerGroupSpecs` an atomic list, that write made the manager the owner of the whole list, and
/// the re-apply failed with a conflict on `.spec.workerGroupSpecs`.
#[test]
fn a_gitops_reapply_of_an_admitted_raycluster_has_no_conflict_and_no_diff() {
    let Some((cp, k)) = kubectl_on_a_control_plane("gitops", Instant::now()) else {
        return;
    };
    let (install, _) = install_without_webhooks();
    k.ok(&["apply", "--server-side", "-f", "-"], Some(&install));
    k.ok(
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/rayclusters.ray.io",
            "crd/workloads.kueue.x-k8s.io",
            "crd/clusterqueues.kueue.x-k8s.io",
            "crd/localqueues.kueue.x-k8s.io",
        ],
        None,
    );
    let dir = std::env::temp_dir().join(format!("quotagate-real-cp-gitops-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("manager.log");
    let child = Command::new(env!("CARGO_BIN_EXE_quotagate"))
        .args(["run", "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .args([
            "--health-addr",
            "127.0.0.1:0",
            "--webhook-addr",
            "127.0.0.1:0",
            "--identity",
            "real-cp-gitops",
        ])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("the manager starts");
    let manager = Proc { child, log };
    k.ok(&["apply", "--server-side", "-f", "-"], Some(QUEUES));
    k.ok(&["apply", "--server-side", "-f", "-"], Some(RAYCLUSTER));

    // Admitted and running: its Workload holds quota and the cluster is unsuspended.
    k.wait_for(
        &["get", "workloads", "-n", "team"],
        Duration::from_secs(90),
        &format!(
            "the RayCluster's Workload admitted; manager log:\n{}",
            manager.log()
        ),
        |v| {
            v["items"].as_array().into_iter().flatten().any(|w| {
                w["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "QuotaReserved" && c["status"] == "True")
            })
        },
    );
    let rc = k.wait_for(
        &["get", "raycluster", "rc", "-n", "team"],
        Duration::from_secs(60),
        "the RayCluster unsuspended",
        |r| r["spec"]["suspend"] == false,
    );
    // The user's unchanged re-apply: accepted, and no difference left.
    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", "-"], Some(RAYCLUSTER));
    assert!(ok, "the re-apply failed: {err}");
    let (same, diff, err) = k.run(&["diff", "--server-side", "-f", "-"], Some(RAYCLUSTER));
    assert!(same, "kubectl diff --server-side found a difference: {diff}{err}");

    // No field of the templates is the manager's.
    let template_owners: Vec<String> = rc["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| {
            let spec = &m["fieldsV1"]["f:spec"];
            spec.get("f:workerGroupSpecs").is_some() || spec.get("f:headGroupSpec").is_some()
        })
        .filter_map(|m| m["manager"].as_str().map(str::to_string))
        .collect();
    assert_eq!(template_owners, vec!["kubectl".to_string()], "{rc}");

    let log = manager.log();
    assert!(!log.contains("panicked"), "the manager panicked:\n{log}");
    drop(manager);
    let _ = std::fs::remove_dir_all(&dir);
}
