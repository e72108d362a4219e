//! Issue 58 item 4: the workflows that matter, on the real control plane, each test with a control
//! plane, a manager and a node agent of its own and the chaos tests' invariant watcher reporting no
//! violation.
//!
//! * `workflows_two_upgrades_a_gitops_reapply_and_manager_restarts`: two RayServices upgrading
//!   through one ClusterQueue that holds both plus one upgrade's surge (they take turns: the second's
//!   new cluster waits with 0 pods, the usage never above the quota); a GitOps re-apply of the
//!   queue-managed RayServices and of a batch Job (`kubectl apply --server-side` of the same manifest
//!   accepted, `kubectl diff --server-side` empty); then an upgrade held at the gate while the manager
//!   is SIGKILLed, a new manager takes the Lease, the quota is raised, the manager is killed again
//!   while the new cluster starts, and a third one completes the upgrade and settles the usage.
//! * `workflows_a_rayjob_and_a_pod_group`: a queue-labelled RayJob (KubeRay's default `K8sJobMode`)
//!   admitted, its RayCluster and submitter Job made, the job run to its end (the simulated
//!   dashboard's), the cluster and its pods deleted, the Workload `Finished`; a Kueue pod group created
//!   meanwhile waits gated with no Node (the real kube-scheduler reports `SchedulingGated`) until the
//!   RayJob's quota comes back, then it is ungated, bound, runs and finishes.
//!
//! The tier runs without webhooks (see the parent module), so what the webhooks would add at create
//! comes from elsewhere: the batch Job is created suspended by a MutatingAdmissionPolicy of the real
//! server's (`JOB_SUSPEND_POLICY`), the RayJob's manifest carries `suspend: true`, and the pod group's
//! Pods are put through the pod webhook's own defaulting (`api::pod::default_pod`: the admission
//! gate, the managed label, the finalizer, the role hash) before `kubectl create`.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{
    ControlPlane, Kubectl, Proc, install_without_webhooks, jsonpath, kubectl_on_a_control_plane,
    spawn_logged, wait_until, watch_invariants, watcher_runtime,
};

/// A control plane with the install (no webhooks), a manager, a node agent and the invariant watcher.
struct Ground {
    // Dropped in this order: the watcher, the manager and the agent before the control plane.
    inv: Option<quotagate::cli::chaos::invariants::Invariants>,
    rt: tokio::runtime::Runtime,
    manager: Option<Proc>,
    agent: Proc,
    k: Kubectl,
    dir: PathBuf,
    config: Option<PathBuf>,
    name: String,
    started: Instant,
    cp: ControlPlane,
}

impl Ground {
    /// `None` when the tools are missing (the test skips, or fails under `QUOTAGATE_REQUIRE_TOOLS=1`).
    /// `serving_gap` adds the watcher's I8: no RayService once serving stops serving.
    fn start(name: &str, config: Option<&str>, capacity: &str, serving_gap: bool) -> Option<Ground> {
        let started = Instant::now();
        let (cp, k) = kubectl_on_a_control_plane(name, started)?;
        let (install, _) = install_without_webhooks();
        k.ok(&["apply", "--server-side", "-f", "-"], Some(&install));
        k.ok(
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                "crd",
                "--all",
            ],
            None,
        );
        let dir = std::env::temp_dir().join(format!("quotagate-real-cp-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = config.map(|text| {
            let path = dir.join("config.yaml");
            std::fs::write(&path, text).unwrap();
            path
        });
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
        cmd.args(["node-agent", "--kubeconfig"])
            .arg(&cp.kubeconfig)
            .args(["--runtime", "sim", "--nodes", "2", "--capacity", capacity]);
        let agent = spawn_logged(cmd, dir.join("node-agent.log"));
        let rt = watcher_runtime();
        let mut g = Ground {
            inv: None,
            rt,
            manager: None,
            agent,
            k,
            dir,
            config,
            name: name.to_string(),
            started,
            cp,
        };
        g.manager = Some(g.spawn_manager(1));
        g.k.wait_for(
            &["get", "nodes"],
            Duration::from_secs(60),
            &format!("two Ready, untainted Nodes; node agent log:\n{}", g.agent.log()),
            |v| {
                let items = v["items"].as_array().cloned().unwrap_or_default();
                items.len() == 2
                    && items.iter().all(|n| {
                        n["spec"]["taints"].as_array().is_none_or(Vec::is_empty)
                            && conditions(n).any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
            },
        );
        g.inv = Some(watch_invariants(&g.rt, &g.cp.kubeconfig, serving_gap));
        Some(g)
    }

    fn identity(&self, n: u32) -> String {
        format!("{}-{n}", self.name)
    }

    /// The manager as its own process, with the admin kubeconfig and simulated Ray dashboards.
    fn spawn_manager(&self, n: u32) -> Proc {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
        cmd.args(["run", "--kubeconfig"])
            .arg(&self.cp.kubeconfig)
            .args([
                "--health-addr",
                "127.0.0.1:0",
                "--webhook-addr",
                "127.0.0.1:0",
                "--simulated-ray-dashboards",
                "--identity",
            ])
            .arg(self.identity(n));
        if let Some(config) = &self.config {
            cmd.arg("--config").arg(config);
        }
        spawn_logged(cmd, self.dir.join(format!("manager-{n}.log")))
    }

    fn manager_log(&self) -> String {
        self.manager.as_ref().map(Proc::log).unwrap_or_default()
    }

    /// SIGKILLs the running manager, starts manager `n` and waits until it holds the Lease.
    fn restart_manager(&mut self, n: u32) {
        let old = self.manager.take().expect("a manager runs");
        assert!(
            !old.log().contains("panicked"),
            "the manager panicked:\n{}",
            old.log()
        );
        drop(old);
        self.manager = Some(self.spawn_manager(n));
        let id = self.identity(n);
        wait_until(
            &format!("manager {id} holding the Lease; its log:\n{}", self.manager_log()),
            Duration::from_secs(60),
            || {
                (jsonpath(
                    &self.k,
                    &["get", "lease", "quotagate-leader", "-n", "default"],
                    "{.spec.holderIdentity}",
                ) == id)
                    .then_some(())
            },
        );
        println!("{}: {id} leads after {:?}", self.name, self.started.elapsed());
    }

    fn cpu_usage(&self, cq: &str) -> i64 {
        cpu_usage(&self.k, cq)
    }

    fn set_cpu_quota(&self, cq: &str, cpu: &str) {
        set_cpu_quota(&self.k, cq, cpu);
    }

    /// The invariant watcher saw no violation, and no process panicked.
    fn finish(mut self) {
        let inv = self.inv.take().expect("the watcher runs");
        let violations = inv.violations();
        assert!(
            violations.is_empty(),
            "invariant violations:\n{}",
            violations.join("\n")
        );
        assert!(inv.checks() > 0, "the invariant watcher ran no check");
        println!(
            "{}: {} invariant checks, 0 violations, done after {:?}",
            self.name,
            inv.checks(),
            self.started.elapsed()
        );
        drop(inv);
        for (who, log) in [("manager", self.manager_log()), ("node agent", self.agent.log())] {
            assert!(!log.contains("panicked"), "the {who} panicked:\n{log}");
        }
        self.manager = None;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The ClusterQueue's CPU usage in millicores.
pub(super) fn cpu_usage(k: &Kubectl, cq: &str) -> i64 {
    milli(&jsonpath(
        k,
        &["get", "clusterqueue", cq],
        "{.status.flavorsUsage[0].resources[?(@.name==\"cpu\")].total}",
    ))
}

pub(super) fn set_cpu_quota(k: &Kubectl, cq: &str, cpu: &str) {
    let patch = format!(
        r#"[{{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota","value":"{cpu}"}}]"#
    );
    k.ok(&["patch", "clusterqueue", cq, "--type=json", "-p", &patch], None);
}

fn conditions(obj: &Value) -> impl Iterator<Item = &Value> {
    obj["status"]["conditions"].as_array().into_iter().flatten()
}

fn has_condition(obj: &Value, type_: &str) -> bool {
    conditions(obj).any(|c| c["type"] == type_ && c["status"] == "True")
}

/// The Workloads of a `kubectl get workloads -o json` list owned by an object of this kind.
fn owned_by<'a>(list: &'a Value, kind: &str) -> Vec<&'a Value> {
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|w| {
            w["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|o| o["kind"] == kind)
        })
        .collect()
}

fn name_of(obj: &Value) -> String {
    obj["metadata"]["name"].as_str().unwrap_or_default().to_string()
}

/// A CPU quantity as the API server prints it (`4`, `2500m`) in millicores; 0 when empty.
fn milli(q: &str) -> i64 {
    let q = q.trim();
    match q.strip_suffix('m') {
        Some(m) => m.parse().unwrap_or_else(|_| panic!("a CPU quantity: {q:?}")),
        None if q.is_empty() => 0,
        None => {
            q.parse::<i64>()
                .unwrap_or_else(|_| panic!("a CPU quantity: {q:?}"))
                * 1000
        }
    }
}

/// `cluster -> pods` of the RayClusters in the default namespace.
pub(super) fn ray_pods(k: &Kubectl) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    let listing = jsonpath(
        k,
        &["get", "pods", "-n", "default", "-l", "ray.io/cluster"],
        "{range .items[*]}{.metadata.labels.ray\\.io/cluster}{\"\\n\"}{end}",
    );
    for cluster in listing.lines().filter(|l| !l.is_empty()) {
        *out.entry(cluster.to_string()).or_insert(0) += 1;
    }
    out
}

// ---------------------------------------------------------------------------------------------------
// Two upgrades through one queue, a GitOps re-apply, manager restarts mid-upgrade.

/// Two services of 2 CPU plus one upgrade's surge (a new 2-CPU cluster): 6 CPU.
pub(super) const SERVICE_QUEUE: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: wf-flavor
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: svc-cq
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: wf-flavor
      resources:
      - name: cpu
        nominalQuota: "6"
      - name: memory
        nominalQuota: 64Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: svc
  namespace: default
spec:
  clusterQueue: svc-cq
"#;

/// The POC's RayService (config/samples/gated-upgrade/rayservice.yaml) as a GitOps repository holds
/// it, named `name` at `version`: head 1 CPU + one 1-CPU worker.
pub(super) fn rayservice(name: &str, version: &str) -> String {
    format!(
        r#"
apiVersion: ray.io/v1
kind: RayService
metadata:
  name: {name}
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: svc
spec:
  rayClusterDeletionDelaySeconds: 2
  serveConfigV2: |
    applications:
      - name: fruit_app
        import_path: fruit.deployment_graph
        route_prefix: /fruit
        deployments:
          - name: FruitMarket
            num_replicas: 1
  rayClusterConfig:
    rayVersion: "{version}"
    headGroupSpec:
      rayStartParams: {{}}
      template:
        spec:
          containers:
            - name: ray-head
              image: rayproject/ray:{version}
              resources:
                requests: {{cpu: "1", memory: 2Gi}}
                limits: {{cpu: "1", memory: 2Gi}}
    workerGroupSpecs:
      - groupName: workers
        replicas: 1
        minReplicas: 1
        maxReplicas: 2
        rayStartParams: {{}}
        template:
          spec:
            containers:
              - name: ray-worker
                image: rayproject/ray:{version}
                resources:
                  requests: {{cpu: "1", memory: 2Gi}}
                  limits: {{cpu: "1", memory: 2Gi}}
"#
    )
}

/// A queue-managed batch Job as a repository holds it: no `suspend` (Kueue's webhook sets it at
/// create), one pod of 1 CPU.
const BATCH_JOB: &str = r#"
apiVersion: batch/v1
kind: Job
metadata:
  name: nightly
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: svc
spec:
  parallelism: 1
  completions: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        command: ["sleep", "2"]
        resources:
          requests:
            cpu: "1"
"#;

/// What Kueue's Job webhook does at create, as the real server's own MutatingAdmissionPolicy (GA in
/// v1.36), for this tier without webhooks: a queue-labelled Job is created suspended. A manifest
/// carrying `suspend: true` itself (the way without a webhook) cannot be re-applied: the resume
/// takes `.spec.suspend` from the applier, and the real server refuses the re-apply with "conflict
/// with \"quotagate\" using batch/v1: .spec.suspend" (so would any controller's resume).
const JOB_SUSPEND_POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: test-kueue-job-suspend
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["batch"]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["jobs"]
  matchConditions:
  - name: queue-labelled
    expression: "has(object.metadata.labels) && 'kueue.x-k8s.io/queue-name' in object.metadata.labels"
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{spec: Object.spec{suspend: true}}"
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: test-kueue-job-suspend
spec:
  policyName: test-kueue-job-suspend
"#;

/// `active|pending` cluster names of a RayService.
pub(super) fn clusters_of(k: &Kubectl, svc: &str) -> (String, String) {
    let s = jsonpath(
        k,
        &["get", "rayservice", svc, "-n", "default"],
        "{.status.activeServiceStatus.rayClusterName}|{.status.pendingServiceStatus.rayClusterName}",
    );
    let (a, p) = s.split_once('|').unwrap_or(("", ""));
    (a.to_string(), p.to_string())
}

pub(super) fn ready(k: &Kubectl, svc: &str) -> bool {
    jsonpath(
        k,
        &["get", "rayservice", svc, "-n", "default"],
        "{.status.conditions[?(@.type==\"Ready\")].status}",
    ) == "True"
}

pub(super) fn apply(k: &Kubectl, manifest: &str) {
    k.ok(&["apply", "--server-side", "-f", "-"], Some(manifest));
}

/// The user's unchanged re-apply is accepted and leaves no difference against the server's field
/// ownership.
fn reapply_has_no_diff(k: &Kubectl, what: &str, manifest: &str) {
    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", "-"], Some(manifest));
    assert!(ok, "{what}: the re-apply failed: {err}");
    let (same, diff, err) = k.run(&["diff", "--server-side", "-f", "-"], Some(manifest));
    assert!(
        same,
        "{what}: kubectl diff --server-side found a difference:\n{diff}{err}"
    );
}

/// The RayService `svc` (in a queue without room for a second cluster) applied at `version`: its
/// pending cluster, once the upgrade waits at the gate with no pod.
pub(super) fn upgrade_gated(k: &Kubectl, svc: &str, version: &str) -> String {
    apply(k, &rayservice(svc, version));
    let pending = wait_until(
        &format!("{svc}'s pending cluster"),
        Duration::from_secs(60),
        || Some(clusters_of(k, svc).1).filter(|p| !p.is_empty()),
    );
    wait_until(&format!("{svc}'s upgrade gated"), Duration::from_secs(60), || {
        jsonpath(
            k,
            &["get", "rayservice", svc, "-n", "default"],
            "{.status.conditions[?(@.type==\"UpgradeInProgress\")].message}",
        )
        .contains("is gated: waiting for workload slice")
        .then_some(())
    });
    assert_eq!(ray_pods(k).get(&pending), None, "the gated cluster has pods");
    pending
}

pub(super) fn cluster_gone(k: &Kubectl, name: &str) -> bool {
    let (_, out, err) = k.run(&["get", "raycluster", name, "-n", "default", "-o", "name"], None);
    out.trim().is_empty() && err.contains("NotFound")
}

#[test]
fn workflows_two_upgrades_a_gitops_reapply_and_manager_restarts() {
    let Some(mut g) = Ground::start("wf-upgrades", None, "cpu=8,memory=64Gi,pods=50", true) else {
        return;
    };
    apply(&g.k, SERVICE_QUEUE);
    apply(&g.k, JOB_SUSPEND_POLICY);
    let services = ["svc-a", "svc-b"];
    for s in services {
        apply(&g.k, &rayservice(s, "2.46.0"));
    }
    wait_until(
        &format!("both RayServices Ready; manager log:\n{}", g.manager_log()),
        Duration::from_secs(180),
        || services.iter().all(|s| ready(&g.k, s)).then_some(()),
    );
    let old: Vec<String> = services.iter().map(|s| clusters_of(&g.k, s).0).collect();
    assert!(old.iter().all(|c| !c.is_empty()), "{old:?}");
    wait_until("the usage at 4 CPU", Duration::from_secs(30), || {
        (g.cpu_usage("svc-cq") == 4000).then_some(())
    });
    println!("two services Ready after {:?}", g.started.elapsed());

    // (a) Both upgraded at once, the GitOps way (the new manifest applied): the queue fits one new
    // cluster, so they take turns. Sampled until both end: never two new clusters with pods, the
    // second's new cluster seen waiting with 0 pods while the first's runs, the usage within quota.
    for s in services {
        apply(&g.k, &rayservice(s, "2.47.0"));
    }
    let (mut max_usage, mut turns_seen, mut samples) = (0, false, 0);
    let new = wait_until(
        &format!("both upgrades complete; manager log:\n{}", g.manager_log()),
        Duration::from_secs(300),
        || {
            let now: Vec<(String, String)> = services.iter().map(|s| clusters_of(&g.k, s)).collect();
            let pods = ray_pods(&g.k);
            max_usage = max_usage.max(g.cpu_usage("svc-cq"));
            samples += 1;
            let pending: Vec<usize> = now
                .iter()
                .filter(|(_, p)| !p.is_empty())
                .map(|(_, p)| pods.get(p).copied().unwrap_or(0))
                .collect();
            assert!(
                pending.iter().filter(|n| **n > 0).count() <= 1,
                "two new clusters with pods at once: {now:?} {pods:?}"
            );
            if pending.len() == 2 && pending.contains(&0) && pending.iter().any(|n| *n > 0) {
                turns_seen = true;
            }
            let done = now
                .iter()
                .zip(&old)
                .all(|((a, p), o)| !a.is_empty() && a != o && p.is_empty());
            done.then(|| now.into_iter().map(|(a, _)| a).collect::<Vec<_>>())
        },
    );
    assert!(
        turns_seen,
        "the second upgrade's new cluster was never seen waiting with 0 pods while the first's ran \
         ({samples} samples)"
    );
    assert!(max_usage <= 6000, "usage {max_usage}m above the 6-CPU quota");
    for o in &old {
        wait_until(
            &format!("old cluster {o} deleted"),
            Duration::from_secs(60),
            || cluster_gone(&g.k, o).then_some(()),
        );
    }
    wait_until("the old clusters' pods gone", Duration::from_secs(60), || {
        let pods = ray_pods(&g.k);
        old.iter().all(|o| !pods.contains_key(o)).then_some(())
    });
    wait_until("the usage settled at 4 CPU", Duration::from_secs(60), || {
        (g.cpu_usage("svc-cq") == 4000).then_some(())
    });
    for c in &new {
        assert_eq!(
            jsonpath(
                &g.k,
                &["get", "raycluster", c, "-n", "default"],
                "{.spec.rayVersion}"
            ),
            "2.47.0"
        );
    }
    println!(
        "(a) two upgrades took turns and completed after {:?} ({samples} samples, max usage {max_usage}m)",
        g.started.elapsed()
    );

    // (d) GitOps: the same manifests applied again, by the repository's sync, after the upgrades.
    for s in services {
        reapply_has_no_diff(&g.k, s, &rayservice(s, "2.47.0"));
    }
    let created: Value = serde_json::from_str(&g.k.ok(
        &["apply", "--server-side", "-o", "json", "-f", "-"],
        Some(BATCH_JOB),
    ))
    .expect("the Job as created");
    assert_eq!(created["spec"]["suspend"], true, "created suspended: {created}");
    g.k.wait_for(
        &["get", "job", "nightly", "-n", "default"],
        Duration::from_secs(90),
        &format!(
            "the batch Job resumed and complete; manager log:\n{}",
            g.manager_log()
        ),
        |j| j["spec"]["suspend"] == false && j["status"]["succeeded"] == 1,
    );
    g.k.wait_for(
        &["get", "workloads", "-n", "default"],
        Duration::from_secs(60),
        "the batch Job's Workload Finished",
        |v| {
            let w = owned_by(v, "Job");
            w.len() == 1 && has_condition(w[0], "Finished")
        },
    );
    reapply_has_no_diff(&g.k, "the batch Job", BATCH_JOB);
    println!("(d) GitOps re-applies clean after {:?}", g.started.elapsed());

    // (e) Manager restarts mid-upgrade. The quota cut to the two services' 4 CPU: svc-a's next
    // upgrade waits at the gate; the manager is killed there.
    g.set_cpu_quota("svc-cq", "4");
    let active = clusters_of(&g.k, "svc-a").0;
    let pending = upgrade_gated(&g.k, "svc-a", "2.48.0");
    g.restart_manager(2);
    // The new manager keeps the one pending cluster, still gated, the service still served by the old.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(clusters_of(&g.k, "svc-a"), (active.clone(), pending.clone()));
    assert_eq!(ray_pods(&g.k).get(&pending), None, "the gated cluster has pods");
    assert_eq!(g.cpu_usage("svc-cq"), 4000);

    // Quota back: the pending cluster is admitted; the manager is killed again as its pods start.
    g.set_cpu_quota("svc-cq", "6");
    wait_until(
        &format!("the pending cluster's pods; manager log:\n{}", g.manager_log()),
        Duration::from_secs(60),
        || ray_pods(&g.k).contains_key(&pending).then_some(()),
    );
    assert_eq!(clusters_of(&g.k, "svc-a").0, active, "switched before the kill");
    g.restart_manager(3);
    wait_until(
        &format!("the switch to the new cluster; manager log:\n{}", g.manager_log()),
        Duration::from_secs(120),
        || (clusters_of(&g.k, "svc-a") == (pending.clone(), String::new())).then_some(()),
    );
    wait_until("svc-a's old cluster deleted", Duration::from_secs(60), || {
        cluster_gone(&g.k, &active).then_some(())
    });
    wait_until("the usage settled at 4 CPU", Duration::from_secs(60), || {
        (g.cpu_usage("svc-cq") == 4000).then_some(())
    });
    assert!(ready(&g.k, "svc-a") && ready(&g.k, "svc-b"));
    assert_eq!(
        jsonpath(
            &g.k,
            &["get", "raycluster", &pending, "-n", "default"],
            "{.spec.rayVersion}"
        ),
        "2.48.0"
    );
    println!(
        "(e) the upgrade survived two manager kills after {:?}",
        g.started.elapsed()
    );
    g.finish();
}

// ---------------------------------------------------------------------------------------------------
// A RayJob and a pod group.

/// The manager's Kueue configuration: the default frameworks and Kueue's `pod` integration.
const POD_CONFIG: &str = r#"apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
integrations:
  frameworks: ["batch/job", "ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice", "pod"]
"#;

/// 3 CPU: the RayJob (head and worker of 1 CPU, KubeRay's submitter of 500m) or the pod group of
/// 2 x 1 CPU, not both.
const BATCH_QUEUE: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: wf-flavor
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: batch-cq
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: wf-flavor
      resources:
      - name: cpu
        nominalQuota: "3"
      - name: memory
        nominalQuota: 64Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: lq
  namespace: default
spec:
  clusterQueue: batch-cq
"#;

/// A queue-labelled RayJob in KubeRay's default submission mode (a submitter Job running
/// `ray job submit`), deleting its cluster when the job ends, as Kueue asks; created suspended, as
/// without Kueue's webhook.
const RAYJOB: &str = r#"
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: etl
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: lq
spec:
  entrypoint: python -c "import time; time.sleep(10)"
  suspend: true
  shutdownAfterJobFinishes: true
  rayClusterSpec:
    rayVersion: "2.46.0"
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers:
          - name: ray-head
            image: rayproject/ray:2.46.0
            resources:
              requests: {cpu: "1", memory: 1Gi}
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
              requests: {cpu: "1", memory: 1Gi}
"#;

/// Pod `name` of Kueue's pod group `group` of `total`, 1 CPU, `sleep 2`, as the pod webhook makes it.
fn group_pod(group: &str, name: &str, total: usize) -> String {
    let mut pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {
                "kueue.x-k8s.io/queue-name": "lq",
                "kueue.x-k8s.io/pod-group-name": group,
            },
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": total.to_string()},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "main",
                "image": "busybox",
                "command": ["sleep", "2"],
                "resources": {"requests": {"cpu": "1"}},
            }],
        },
    });
    let frameworks = quotagate::api::kueue::config::Frameworks::from_names(["pod"]);
    assert!(
        quotagate::api::pod::default_pod(&mut pod, frameworks),
        "the pod webhook manages {name}"
    );
    pod.to_string()
}

/// `name:nodeName:gates:PodScheduled reason:phase;` for the group's pods.
fn group_state(k: &Kubectl) -> String {
    jsonpath(
        k,
        &[
            "get",
            "pods",
            "-n",
            "default",
            "-l",
            "kueue.x-k8s.io/pod-group-name=g",
        ],
        "{range .items[*]}{.metadata.name}:{.spec.nodeName}:{.spec.schedulingGates[*].name}:\
         {.status.conditions[?(@.type==\"PodScheduled\")].reason}:{.status.phase};{end}",
    )
}

#[test]
fn workflows_a_rayjob_and_a_pod_group() {
    let Some(g) = Ground::start("wf-batch", Some(POD_CONFIG), "cpu=4,memory=32Gi,pods=50", false) else {
        return;
    };
    apply(&g.k, BATCH_QUEUE);
    g.k.ok(&["create", "-f", "-"], Some(RAYJOB));

    // (c) The RayJob: admitted, its cluster and submitter made.
    let wl = g.k.wait_for(
        &["get", "workloads", "-n", "default"],
        Duration::from_secs(90),
        &format!(
            "the RayJob's Workload admitted; manager log:\n{}",
            g.manager_log()
        ),
        |v| {
            let w = owned_by(v, "RayJob");
            w.len() == 1 && has_condition(w[0], "QuotaReserved")
        },
    );
    let rayjob_wl = name_of(owned_by(&wl, "RayJob")[0]);
    let cluster = wait_until("the RayJob's RayCluster", Duration::from_secs(60), || {
        Some(jsonpath(
            &g.k,
            &["get", "rayjob", "etl", "-n", "default"],
            "{.status.rayClusterName}",
        ))
        .filter(|c| !c.is_empty())
    });
    wait_until(
        &format!("the RayJob's submitter Job; manager log:\n{}", g.manager_log()),
        Duration::from_secs(90),
        || {
            let (ok, _, _) = g.k.run(&["get", "job", "etl", "-n", "default"], None);
            ok.then_some(())
        },
    );
    println!(
        "(c) RayJob admitted, cluster {cluster} and submitter made after {:?}",
        g.started.elapsed()
    );

    // (b) A pod group of 2 x 1 CPU while the RayJob holds its quota: created gated, and the real
    // scheduler leaves it unbound (SchedulingGated) though the Nodes have room.
    for p in ["g-0", "g-1"] {
        g.k.ok(&["create", "-f", "-"], Some(&group_pod("g", p, 2)));
    }
    wait_until(
        "the group's pods seen by the scheduler",
        Duration::from_secs(30),
        || {
            let s = group_state(&g.k);
            (s.matches(":kueue.x-k8s.io/admission:SchedulingGated:Pending;")
                .count()
                == 2)
                .then_some(())
        },
    );
    let waiting = g.k.wait_for(
        &["get", "workloads", "-n", "default"],
        Duration::from_secs(30),
        &format!("the group's one Workload; manager log:\n{}", g.manager_log()),
        |v| owned_by(v, "Pod").len() == 1,
    );
    let group = owned_by(&waiting, "Pod")[0];
    assert!(
        !has_condition(group, "QuotaReserved"),
        "the group admitted beside the RayJob: {group}"
    );
    let group_wl = name_of(group);
    assert!(
        !jsonpath(
            &g.k,
            &["get", "rayjob", "etl", "-n", "default"],
            "{.status.jobDeploymentStatus}"
        )
        .contains("Complete"),
        "the RayJob ended before the group could be seen waiting"
    );
    let s = group_state(&g.k);
    assert_eq!(
        s.matches("::kueue.x-k8s.io/admission:SchedulingGated:Pending;")
            .count(),
        2,
        "the group gated and unbound while it waits: {s}"
    );

    // The RayJob runs to its end on the simulated dashboard; its Workload Finished, its cluster deleted.
    let rj = g.k.wait_for(
        &["get", "rayjob", "etl", "-n", "default"],
        Duration::from_secs(120),
        &format!("the RayJob Complete; manager log:\n{}", g.manager_log()),
        |r| r["status"]["jobDeploymentStatus"] == "Complete",
    );
    assert_eq!(rj["status"]["jobStatus"], "SUCCEEDED", "{rj}");
    g.k.wait_for(
        &["get", "workload", &rayjob_wl, "-n", "default"],
        Duration::from_secs(60),
        "the RayJob's Workload Finished",
        |w| has_condition(w, "Finished"),
    );
    wait_until("the RayJob's cluster deleted", Duration::from_secs(60), || {
        cluster_gone(&g.k, &cluster).then_some(())
    });
    wait_until("its pods gone", Duration::from_secs(60), || {
        (!ray_pods(&g.k).contains_key(&cluster)).then_some(())
    });
    println!("(c) RayJob finished after {:?}", g.started.elapsed());

    // The quota back: the group is admitted, ungated, bound by the scheduler, runs and finishes.
    g.k.wait_for(
        &["get", "workload", &group_wl, "-n", "default"],
        Duration::from_secs(60),
        &format!("the group admitted; manager log:\n{}", g.manager_log()),
        |w| has_condition(w, "QuotaReserved"),
    );
    let pods = g.k.wait_for(
        &[
            "get",
            "pods",
            "-n",
            "default",
            "-l",
            "kueue.x-k8s.io/pod-group-name=g",
        ],
        Duration::from_secs(60),
        "the group's pods ungated and bound",
        |v| {
            v["items"].as_array().is_some_and(|p| {
                p.len() == 2
                    && p.iter()
                        .all(|p| p["spec"]["nodeName"].is_string() && p["spec"]["schedulingGates"].is_null())
            })
        },
    );
    for p in pods["items"].as_array().into_iter().flatten() {
        let node = p["spec"]["nodeName"].as_str().unwrap_or("");
        assert!(node.starts_with("quotagate-node-"), "bound to {node}");
    }
    wait_until(
        &format!("the group's pods Succeeded; node agent log:\n{}", g.agent.log()),
        Duration::from_secs(60),
        || (group_state(&g.k).matches(":Succeeded;").count() == 2).then_some(()),
    );
    g.k.wait_for(
        &["get", "workload", &group_wl, "-n", "default"],
        Duration::from_secs(60),
        "the group's Workload Finished",
        |w| has_condition(w, "Finished"),
    );
    println!("(b) pod group ran after {:?}", g.started.elapsed());
    g.finish();
}
