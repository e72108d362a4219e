//! Issue 34, the install path end to end, every part a separate process as on a cluster: the embedded
//! API server in real-cluster mode (`quotagate apiserver --real-cluster`: no quotagate logic in it,
//! webhooks called, RBAC enforced for ServiceAccount tokens), the install manifest applied by the real
//! kubectl (`apply --server-side`), and two manager processes started as the Deployment's pods run:
//! in-cluster configuration from KUBERNETES_SERVICE_HOST/PORT and the ServiceAccount token and CA
//! mounted at /var/run/secrets/kubernetes.io/serviceaccount (a private mount namespace per
//! process, `unshare -m`, stands for the pod's projected volume), no kubeconfig, `run
//! --leader-elect=true --config` with the manifest's Kueue Configuration.
//!
//! Needs kubectl (env QUOTAGATE_KUBECTL or .venv-kubectl/bin/kubectl) and a working `unshare -m`
//! (root); without them the test prints a skip line, or fails when QUOTAGATE_REQUIRE_TOOLS=1.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NS: &str = "quotagate-system";
const SA: &str = "quotagate-controller-manager";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn require_tools() -> bool {
    std::env::var("QUOTAGATE_REQUIRE_TOOLS").is_ok_and(|v| v == "1")
}

fn kubectl_path() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("QUOTAGATE_KUBECTL") {
        return Some(PathBuf::from(p));
    }
    let p = root().join(".venv-kubectl/bin/kubectl");
    p.exists().then_some(p)
}

fn unshare_works() -> bool {
    Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            "mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A child process killed (SIGKILL) when dropped, its stderr in a file.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(mut cmd: Command, log: PathBuf) -> Proc {
        let file = std::fs::File::create(&log).expect("log file");
        let child = cmd
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("the process starts");
        Proc { child, log }
    }

    fn log(&self) -> String {
        let mut s = String::new();
        let _ = std::fs::File::open(&self.log).and_then(|mut f| f.read_to_string(&mut s));
        s
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("kubectl runs");
        if let Some(text) = stdin {
            use std::io::Write;
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

    fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args, None);
        assert!(ok, "kubectl {args:?}: {err}");
        out
    }

    fn apply(&self, yaml: &str) -> (bool, String) {
        let (ok, out, err) = self.run(&["apply", "-f", "-"], Some(yaml));
        (ok, format!("{out}{err}"))
    }
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn http_status(port: u16, path: &str) -> Option<u16> {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    resp.split_whitespace().nth(1)?.parse().ok()
}

/// Starts a manager as the Deployment's pod would run it (see the module doc).
fn manager(dir: &Path, api_port: u16, name: &str, health: u16, webhook: u16) -> Proc {
    let sa = dir.join("sa");
    let script = format!(
        "mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount && cp {sa}/* /run/secrets/kubernetes.io/serviceaccount/ && exec \"$0\" \"$@\"",
        sa = sa.display()
    );
    let mut cmd = Command::new("unshare");
    cmd.args([
        "-m",
        "sh",
        "-c",
        &script,
        env!("CARGO_BIN_EXE_quotagate"),
        "run",
        "--leader-elect=true",
        "--use-kubernetes-proxy",
    ])
    .arg(format!(
        "--config={}",
        dir.join("controller_manager_config.yaml").display()
    ))
    .arg(format!("--health-addr=127.0.0.1:{health}"))
    .arg(format!("--webhook-addr=127.0.0.1:{webhook}"))
    .env_remove("KUBECONFIG")
    .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    .env("KUBERNETES_SERVICE_PORT", api_port.to_string())
    .env("POD_NAMESPACE", NS)
    .env("POD_NAME", name)
    .env("RUST_LOG", "info");
    Proc::spawn(cmd, dir.join(format!("{name}.log")))
}

fn endpoint_slice(name: &str, port: u16) -> String {
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}\n  namespace: {NS}\n  labels:\n    kubernetes.io/service-name: quotagate-webhook-service\naddressType: IPv4\nports:\n- name: webhook\n  port: {port}\n  protocol: TCP\nendpoints:\n- addresses: [\"127.0.0.1\"]\n  conditions:\n    ready: true\n"
    )
}

const QUEUES: &str = include_str!("fixtures/install/queues.yaml");

/// Kueue's ClusterQueue webhook refuses `lendingLimit` above `nominalQuota`, and without a cohort
/// (`pkg/webhooks/clusterqueue_webhook_test.go`, "lendingLimit should be less than or equal to nominalQuota").
const BAD_CQ: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: bad
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: 1
        lendingLimit: 2
"#;

const RAYSERVICE: &str = r#"
apiVersion: ray.io/v1
kind: RayService
metadata:
  name: fruit
  namespace: team
  labels:
    kueue.x-k8s.io/queue-name: lq
spec:
  rayClusterConfig:
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers:
          - name: ray-head
            image: rayproject/ray:2.46.0
            resources:
              requests: {cpu: "1", memory: 2Gi}
              limits: {cpu: "1", memory: 2Gi}
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
              requests: {cpu: "1", memory: 2Gi}
              limits: {cpu: "1", memory: 2Gi}
"#;

#[test]
fn install_manifest_two_in_cluster_managers_webhooks_and_failover() {
    let Some(bin) = kubectl_path() else {
        assert!(
            !require_tools(),
            "kubectl is required (QUOTAGATE_REQUIRE_TOOLS=1)"
        );
        eprintln!("skipped: no kubectl (scripts/install-kubectl.sh)");
        return;
    };
    if !unshare_works() {
        assert!(
            !require_tools(),
            "`unshare -m` is required (QUOTAGATE_REQUIRE_TOOLS=1)"
        );
        eprintln!("skipped: `unshare -m` does not work here (needs root)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("quotagate-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sa")).unwrap();
    let kubeconfig = dir.join("kubeconfig");

    // 1. The API server, as a real cluster's.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    cmd.args([
        "apiserver",
        "--real-cluster",
        "--listen",
        "127.0.0.1:0",
        "--pod-start-delay",
        "100ms",
        "--kubeconfig-out",
    ])
    .arg(&kubeconfig)
    .env("RUST_LOG", "info");
    let server = Proc::spawn(cmd, dir.join("apiserver.log"));
    let kc_text = wait_for("the kubeconfig", Duration::from_secs(30), || {
        std::fs::read_to_string(&kubeconfig)
            .ok()
            .filter(|t| t.contains("token: "))
    });
    let api_port: u16 = kc_text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://127.0.0.1:"))
        .and_then(|p| p.parse().ok())
        .expect("the kubeconfig names the server");
    let k = Kubectl { bin, kubeconfig };

    // 2. The install manifest, as a platform team applies it: the shipped one, then the same with
    // the knob a manager outside the cluster network needs (`--use-kubernetes-proxy`: Ray dashboards
    // through the API server's service proxy, and the `services/proxy` grant for it).
    let manifest = root().join("dist/install.yaml");
    let (ok, out, err) = k.run(
        &["apply", "--server-side", "-f", manifest.to_str().unwrap()],
        None,
    );
    assert!(ok, "apply --server-side of the install manifest: {err}\n{out}");
    assert!(
        out.contains("deployment.apps/quotagate-controller-manager serverside-applied"),
        "{out}"
    );
    let printed = Command::new(env!("CARGO_BIN_EXE_quotagate"))
        .args(["install-manifests", "--use-kubernetes-proxy"])
        .output()
        .expect("install-manifests runs");
    assert!(
        printed.status.success(),
        "{}",
        String::from_utf8_lossy(&printed.stderr)
    );
    let proxied = dir.join("install-proxy.yaml");
    std::fs::write(&proxied, &printed.stdout).unwrap();
    let (ok, out, err) = k.run(&["apply", "--server-side", "-f", proxied.to_str().unwrap()], None);
    assert!(
        ok,
        "apply --server-side of the manifest with --use-kubernetes-proxy: {err}\n{out}"
    );
    assert!(
        out.contains(
            "clusterrole.rbac.authorization.k8s.io/quotagate-kubernetes-proxy-role serverside-applied"
        ),
        "{out}"
    );
    let args = k.ok(&[
        "get",
        "deploy",
        "quotagate-controller-manager",
        "-n",
        NS,
        "-o",
        "jsonpath={.spec.template.spec.containers[0].args}",
    ]);
    assert!(args.contains("--use-kubernetes-proxy"), "{args}");

    // 3. What the kubelet gives the pods: a token for the ServiceAccount (TokenRequest), the CA, the
    // namespace; and the Kueue Configuration from the ConfigMap.
    let token = k.ok(&["create", "token", SA, "-n", NS, "--duration=2h"]);
    std::fs::write(dir.join("sa/token"), token.trim()).unwrap();
    let ca = k.ok(&[
        "config",
        "view",
        "--raw",
        "-o",
        "jsonpath={.clusters[0].cluster.certificate-authority-data}",
    ]);
    use base64::Engine;
    std::fs::write(
        dir.join("sa/ca.crt"),
        base64::engine::general_purpose::STANDARD
            .decode(ca.trim())
            .unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join("sa/namespace"), NS).unwrap();
    let config = k.ok(&[
        "get",
        "configmap",
        "quotagate-manager-config",
        "-n",
        NS,
        "-o",
        "jsonpath={.data.controller_manager_config\\.yaml}",
    ]);
    std::fs::write(dir.join("controller_manager_config.yaml"), config).unwrap();

    // 4. Two replicas; the webhook Service's endpoints are where they listen (as the endpoints
    // controller would list the pods' IPs).
    let (w1, w2, h1, h2) = (free_port(), free_port(), free_port(), free_port());
    for (name, port) in [
        ("quotagate-webhook-service-m1", w1),
        ("quotagate-webhook-service-m2", w2),
    ] {
        let (ok, out) = k.apply(&endpoint_slice(name, port));
        assert!(ok, "{out}");
    }
    let mut managers = vec![
        manager(&dir, api_port, "m1", h1, w1),
        manager(&dir, api_port, "m2", h2, w2),
    ];

    // Exactly one leads, named in the Lease.
    let holder = wait_for("a leader", Duration::from_secs(30), || {
        let (ok, out, _) = k.run(
            &[
                "get",
                "lease",
                "quotagate-leader",
                "-n",
                NS,
                "-o",
                "jsonpath={.spec.holderIdentity}",
            ],
            None,
        );
        (ok && !out.is_empty()).then_some(out)
    });
    // controller-runtime's identity: the pod's name, `_` and a UUID new at each start.
    let pod = holder.split_once('_').map(|(p, _)| p);
    assert!(pod == Some("m1") || pod == Some("m2"), "{holder}");
    // The certificate lands: the caBundle is in both configurations, both replicas serve and are ready.
    for config in [
        "validatingwebhookconfiguration/quotagate-validating-webhook-configuration",
        "mutatingwebhookconfiguration/quotagate-mutating-webhook-configuration",
    ] {
        wait_for("the caBundle", Duration::from_secs(30), || {
            let out = k.ok(&[
                "get",
                config,
                "-o",
                "jsonpath={.webhooks[0].clientConfig.caBundle}",
            ]);
            (!out.is_empty()).then_some(())
        });
    }
    for port in [h1, h2] {
        wait_for("/readyz", Duration::from_secs(30), || {
            (http_status(port, "/readyz") == Some(200)).then_some(())
        });
    }
    let leaders: Vec<&Proc> = managers
        .iter()
        .filter(|m| m.log().contains("became leader"))
        .collect();
    assert_eq!(leaders.len(), 1, "exactly one leads");

    // 5. The validating webhook refuses a bad ClusterQueue with Kueue's message.
    let (ok, out) = k.apply(BAD_CQ);
    assert!(!ok, "{out}");
    assert!(
        out.contains("admission webhook \"vclusterqueue.kb.io\" denied the request"),
        "{out}"
    );
    assert!(
        out.contains("lendingLimit: Invalid value: \"2\": must be less than or equal to the nominalQuota"),
        "{out}"
    );

    // The server's own check is the CRD's schema, in the real server's words.
    let (ok, out) = k.apply(&BAD_CQ.replace("name: bad", "name: odd").replace(
        "  resourceGroups:",
        "  queueingStrategy: Sometimes\n  resourceGroups:",
    ));
    assert!(!ok, "{out}");
    assert!(out.contains("spec.queueingStrategy: Unsupported value: \"Sometimes\": supported values: \"StrictFIFO\", \"BestEffortFIFO\""), "{out}");

    // 6. A queue-labelled RayService arrives suspended (the mutating webhook) and stays so while its
    // LocalQueue does not exist; once the queues are there, the leader's Kueue controllers admit its
    // Workload into the 3-CPU ClusterQueue.
    let (ok, out) = k.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n");
    assert!(ok, "{out}");
    let (ok, out) = k.apply(RAYSERVICE);
    assert!(ok, "{out}");
    let created = k.ok(&[
        "get",
        "rayservice",
        "fruit",
        "-n",
        "team",
        "-o",
        "jsonpath={.spec.suspend}",
    ]);
    assert_eq!(created, "true", "created suspended by the webhook");
    let (ok, out) = k.apply(QUEUES);
    assert!(ok, "{out}");
    let admitted = |k: &Kubectl| {
        let out = k.ok(&["get", "workloads", "-n", "team", "-o", "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"QuotaReserved\")].status}{\"\\n\"}{end}"]);
        out.lines().any(|l| l == "True").then_some(())
    };
    wait_for(
        "the RayService's Workload admitted",
        Duration::from_secs(30),
        || admitted(&k),
    );

    // 7. The POC's gated upgrade (config/samples/gated-upgrade, POC-TESTING.md section 3) with the
    // leader killed in the middle of it. The invariant watcher (the chaos and integration tests'
    // one) checks I1-I6 on every Workload, RayCluster, Pod and ClusterQueue event from here on.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let inv = rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(&k.kubeconfig).expect("the kubeconfig reads");
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .expect("the kubeconfig is usable");
        quotagate::cli::chaos::invariants::Invariants::start(
            kube::Client::try_from(config).expect("a client"),
        )
    });
    let samples = root().join("config/samples/gated-upgrade");
    for f in ["quota.yaml", "rayservice.yaml"] {
        k.ok(&["apply", "-f", samples.join(f).to_str().unwrap()]);
    }
    let poc = |path: &str| k.ok(&["get", "rayservice", "poc", "-o", &format!("jsonpath={path}")]);
    // Ready needs the Serve apps RUNNING, which the manager reads from the head's dashboard through
    // the API server's service proxy (the simulated head answers there).
    k.ok(&["wait", "--for=condition=Ready", "rayservice/poc", "--timeout=60s"]);
    let first = poc("{.status.activeServiceStatus.rayClusterName}");
    assert!(!first.is_empty());
    let version = k.ok(&[
        "get",
        "--raw",
        &format!("/api/v1/namespaces/default/services/{first}-head-svc:8265/proxy/api/version"),
    ]);
    assert!(
        version.contains("\"ray_version\""),
        "kubectl get --raw through the service proxy: {version}"
    );
    // The upgrade: both clusters need 4 CPU, the queue has 3; the pending cluster waits at the gate.
    k.ok(&[
        "patch",
        "rayservice",
        "poc",
        "--type=merge",
        "-p",
        r#"{"spec":{"rayClusterConfig":{"rayVersion":"2.47.0"}}}"#,
    ]);
    let pending = wait_for("the pending cluster", Duration::from_secs(30), || {
        Some(poc("{.status.pendingServiceStatus.rayClusterName}")).filter(|p| !p.is_empty())
    });
    wait_for("the wait explained", Duration::from_secs(30), || {
        poc("{.status.conditions[?(@.type==\"UpgradeInProgress\")].message}")
            .contains("is gated: waiting for workload slice")
            .then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    let pods_of = |cluster: &str| {
        k.ok(&[
            "get",
            "pods",
            "-l",
            &format!("ray.io/cluster={cluster}"),
            "-o",
            "name",
        ])
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
    // Quota raised: the pending cluster starts. Once its pods exist, and before the switch, the leader
    // dies without a word (kill -9).
    k.ok(&["patch", "clusterqueue", "ray-cq", "--type=json", "-p", r#"[{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota","value":"4"}]"#]);
    wait_for("the pending cluster's pods", Duration::from_secs(30), || {
        (!pods_of(&pending).trim().is_empty()).then_some(())
    });
    assert_eq!(
        poc("{.status.activeServiceStatus.rayClusterName}"),
        first,
        "killed before the switch"
    );
    let leader_index = managers
        .iter()
        .position(|m| m.log().contains("became leader"))
        .unwrap();
    let other = if leader_index == 0 { "m2" } else { "m1" };
    managers[leader_index].kill();
    let killed_at = Instant::now();
    wait_for("the other replica to lead", Duration::from_secs(30), || {
        let out = k.ok(&[
            "get",
            "lease",
            "quotagate-leader",
            "-n",
            NS,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ]);
        (out.split_once('_').map(|(p, _)| p) == Some(other)).then_some(())
    });
    let lease_duration = k.ok(&[
        "get",
        "lease",
        "quotagate-leader",
        "-n",
        NS,
        "-o",
        "jsonpath={.spec.leaseDurationSeconds}",
    ]);
    let lease_duration: u64 = lease_duration.parse().unwrap_or(15);
    assert!(
        killed_at.elapsed() <= Duration::from_secs(lease_duration + 5),
        "taken over after {:?}",
        killed_at.elapsed()
    );
    // The new leader finishes the upgrade: the traffic on the new cluster, the old one deleted.
    wait_for("the switch to the new cluster", Duration::from_secs(45), || {
        (poc("{.status.activeServiceStatus.rayClusterName}") == pending).then_some(())
    });
    wait_for("the old cluster deleted", Duration::from_secs(30), || {
        let (_, out, err) = k.run(&["get", "raycluster", &first, "-o", "name"], None);
        (out.trim().is_empty() && err.contains("NotFound")).then_some(())
    });
    assert_eq!(poc("{.status.conditions[?(@.type==\"Ready\")].status}"), "True");
    let violations = inv.violations();
    assert!(
        violations.is_empty(),
        "invariant violations:\n{}",
        violations.join("\n")
    );
    assert!(inv.checks() > 0, "the invariant watcher ran no check");
    drop(inv);
    drop(rt);
    let (ok, out) = k.apply(
        &RAYSERVICE
            .replace("name: fruit", "name: veg")
            .replace("cpu: \"1\"", "cpu: 500m"),
    );
    assert!(ok, "the webhook still answers (the survivor's endpoint): {out}");
    wait_for(
        "the second Workload admitted by the new leader",
        Duration::from_secs(30),
        || {
            let out = k.ok(&["get", "workloads", "-n", "team", "-o", "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"QuotaReserved\")].status}{\"\\n\"}{end}"]);
            (out.lines().filter(|l| *l == "True").count() >= 2).then_some(())
        },
    );

    // 8. No request of either manager was refused by RBAC (the server logs every refusal).
    let server_log = server.log();
    assert!(!server_log.contains("RBAC denied"), "{server_log}");
    for m in &managers {
        let log = m.log();
        assert!(!log.contains("is forbidden"), "{log}");
    }

    // 9. The webhook down (every manager stopped): failurePolicy Fail refuses writes with the real
    // server's message, and what was stored is all still there.
    for m in managers.iter_mut() {
        m.kill();
    }
    let (ok, out) = k.apply(&QUEUES.replace("name: cq", "name: cq2"));
    assert!(!ok, "{out}");
    assert!(out.contains("failed calling webhook \"vclusterqueue.kb.io\": failed to call webhook: Post \"https://quotagate-webhook-service.quotagate-system.svc:443/validate-kueue-x-k8s-io-v1beta2-clusterqueue?timeout=10s\": dial tcp 127.0.0.1:"), "{out}");
    assert!(out.contains("connect: connection refused"), "{out}");
    let stored = k.ok(&["get", "rayservices,clusterqueues", "-A", "-o", "name"]);
    for want in [
        "rayservice.ray.io/fruit",
        "rayservice.ray.io/veg",
        "clusterqueue.kueue.x-k8s.io/cq",
    ] {
        assert!(stored.contains(want), "{want} in {stored}");
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A ServiceAccount token from TokenRequest (`kubectl create token`) authenticates as the
/// ServiceAccount, which may do exactly what its bindings allow; the admin kubeconfig is not needed.
#[test]
fn a_service_account_token_is_authorized_by_rbac() {
    let Some(bin) = kubectl_path() else {
        assert!(
            !require_tools(),
            "kubectl is required (QUOTAGATE_REQUIRE_TOOLS=1)"
        );
        eprintln!("skipped: no kubectl (scripts/install-kubectl.sh)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("quotagate-satoken-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    cmd.args([
        "apiserver",
        "--real-cluster",
        "--no-simulators",
        "--listen",
        "127.0.0.1:0",
        "--kubeconfig-out",
    ])
    .arg(&kubeconfig);
    let server = Proc::spawn(cmd, dir.join("apiserver.log"));
    wait_for("the kubeconfig", Duration::from_secs(30), || {
        std::fs::read_to_string(&kubeconfig)
            .ok()
            .filter(|t| t.contains("token: "))
    });
    let admin = Kubectl {
        bin: bin.clone(),
        kubeconfig: kubeconfig.clone(),
    };
    admin.ok(&["create", "serviceaccount", "bot"]);
    admin.ok(&[
        "create",
        "role",
        "cm-reader",
        "--verb=get,list",
        "--resource=configmaps",
    ]);
    admin.ok(&[
        "create",
        "rolebinding",
        "bot-reads",
        "--role=cm-reader",
        "--serviceaccount=default:bot",
    ]);
    let (ok, _, err) = admin.run(&["create", "token", "bot", "--duration=5m"], None);
    assert!(
        !ok && err.contains("may not specify a duration less than 10 minutes"),
        "{err}"
    );
    let token = admin.ok(&["create", "token", "bot"]).trim().to_string();
    let as_bot = |args: &[&str]| {
        let mut all = vec!["--token", token.as_str()];
        all.extend_from_slice(args);
        admin.run(&all, None)
    };
    let (ok, _, err) = as_bot(&["get", "configmaps"]);
    assert!(ok, "{err}");
    let (ok, _, err) = as_bot(&["create", "configmap", "x"]);
    assert!(!ok, "create is not granted");
    assert!(
        err.contains("User \"system:serviceaccount:default:bot\" cannot create resource \"configmaps\""),
        "{err}"
    );
    let (ok, _, err) = as_bot(&["get", "secrets"]);
    assert!(!ok && err.contains("cannot list resource \"secrets\""), "{err}");
    let (_, _, err) = admin.run(&["--token", "qgsa.forged.token", "get", "configmaps"], None);
    assert!(
        err.contains("Unauthorized")
            || err.contains("the server has asked for the client to provide credentials"),
        "{err}"
    );
    // A deleted ServiceAccount's token no longer authenticates, even recreated under the same name.
    admin.ok(&["delete", "serviceaccount", "bot"]);
    admin.ok(&["create", "serviceaccount", "bot"]);
    let (ok, _, err) = as_bot(&["get", "configmaps"]);
    assert!(!ok, "a token bound to the deleted ServiceAccount: {err}");
    assert!(server.log().contains("RBAC denied"), "refusals are logged");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
