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
//! Webhooks: with no node agent yet, no pod runs, so the shipped Service `quotagate-webhook-service`
//! has no endpoints, and an EndpointSlice may not point at the manager on loopback ("may not be in the
//! loopback range"). With `failurePolicy: Fail` every Job and RayCluster create would then fail, so the
//! test applies the install without its two webhook configurations, and the batch Job is created
//! suspended (as Kueue's docs ask when its webhook is not in the path). A `url:` webhook would need the
//! manager's certificate to name 127.0.0.1, which its cert management (for the Service's DNS names)
//! does not.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn require_tools() -> bool {
    std::env::var("QUOTAGATE_REQUIRE_TOOLS").is_ok_and(|v| v == "1")
}

fn skip(why: &str) {
    if require_tools() {
        panic!("QUOTAGATE_REQUIRE_TOOLS=1 but {why}");
    }
    println!("skipped: {why}");
}

fn kubectl_path() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("QUOTAGATE_KUBECTL") {
        return Some(PathBuf::from(p));
    }
    let p = root().join(".venv-kubectl/bin/kubectl");
    p.exists().then_some(p)
}

fn script() -> Command {
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
struct ControlPlane {
    kubeconfig: PathBuf,
    /// The directory `up` ran in, when this test started it.
    owned: Option<PathBuf>,
}

impl ControlPlane {
    fn start() -> Result<ControlPlane, String> {
        if let Ok(k) = std::env::var("QUOTAGATE_REAL_KUBECONFIG") {
            return Ok(ControlPlane {
                kubeconfig: k.into(),
                owned: None,
            });
        }
        control_plane_buildable()?;
        let dir = std::env::temp_dir().join(format!("quotagate-real-cp-{}", std::process::id()));
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
        let start = Instant::now();
        loop {
            if let Some(v) = self.json(args)
                && done(&v)
            {
                return v;
            }
            assert!(start.elapsed() < timeout, "{what}: not within {timeout:?}");
            std::thread::sleep(Duration::from_millis(500));
        }
    }
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
    let docs = quotagate::api::manifest::load_documents(&quotagate(&["install-manifests"]))
        .expect("the install manifest parses");
    let items: Vec<Value> = docs
        .into_iter()
        .filter(|d| {
            !matches!(
                d["kind"].as_str(),
                Some("ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration")
            )
        })
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
        command: ["true"]
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

#[test]
fn install_and_admit_a_batch_job_on_a_real_control_plane() {
    let Some(bin) = kubectl_path() else {
        return skip("kubectl not installed (scripts/install-kubectl.sh)");
    };
    let cp = match ControlPlane::start() {
        Ok(cp) => cp,
        Err(why) => return skip(&why),
    };
    let k = Kubectl {
        bin,
        kubeconfig: cp.kubeconfig.clone(),
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

    // The manager as its own process, with the admin kubeconfig.
    let dir = std::env::temp_dir().join(format!("quotagate-real-cp-test-{}", std::process::id()));
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
            "real-cp-test",
        ])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("the manager starts");
    let manager = Proc { child, log };

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

    // ...and unsuspends it; the real Job controller then starts it and creates its pods (Pending:
    // there is no node yet).
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
    k.wait_for(
        &["get", "pods", "-n", "team", "-l", "job-name=pi"],
        Duration::from_secs(60),
        "the Job controller's pods",
        |v| v["items"].as_array().is_some_and(|p| p.len() == 2),
    );

    let log = manager.log();
    assert!(!log.contains("panicked"), "the manager panicked:\n{log}");
    drop(manager);
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
    let Some(bin) = kubectl_path() else {
        return skip("kubectl not installed (scripts/install-kubectl.sh)");
    };
    let cp = match ControlPlane::start() {
        Ok(cp) => cp,
        Err(why) => return skip(&why),
    };
    let k = Kubectl {
        bin,
        kubeconfig: cp.kubeconfig.clone(),
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
