//! Issue 64, Build item 5: MultiKueue with a real control plane as the worker. The manager is an
//! embedded cluster (`quotagate run --embedded --listen`, its own API server on loopback); its
//! MultiKueueCluster `worker1` names a kubeconfig Secret holding the admin kubeconfig of a real control
//! plane (kube-apiserver, etcd, kube-controller-manager and kube-scheduler from
//! `scripts/control-plane.sh`) that runs the install (without webhooks, see the parent module), a
//! quotagate manager process and `quotagate node-agent` (one simulated Node).
//!
//! Checked, as Kueue's test/integration/multikueue/jobs_test.go "Should run a job on worker if admitted"
//! with a real worker: a queue-labelled batch Job created on the manager with
//! `spec.managedBy: kueue.x-k8s.io/multikueue` is admitted there, its Workload copied to the worker and
//! admitted by the worker's quotagate, the check turns `Ready` naming `worker1`; the Job's copy on the
//! worker (origin label, no `managedBy`) is resumed, its pod made by the real Job controller, bound by
//! the real scheduler and run by the agent; its status comes back (the manager's Job `Complete`, its
//! Workload `Finished`) and the worker's copies go. A second, long Job runs on the worker and is deleted
//! on the manager: its copy on the worker goes, and the worker's ClusterQueue gives its quota back.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{
    Kubectl, Proc, QUEUES, install_without_webhooks, jsonpath, kubectl_on_a_control_plane, spawn_logged,
    wait_until,
};

const ORIGIN_LABEL: &str = "kueue.x-k8s.io/multikueue-origin";

/// The manager's MultiKueue objects (the Secret's kubeconfig added by the test) and its queue: flavor,
/// a 4-CPU ClusterQueue whose admission check is `mk`, namespace `team` and its LocalQueue `lq`.
const MANAGER_OBJECTS: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata:
  name: worker1
spec:
  clusterSource:
    kubeConfig:
      locationType: Secret
      location: worker1
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata:
  name: mkc
spec:
  clusters: [worker1]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata:
  name: mk
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters:
    apiGroup: kueue.x-k8s.io
    kind: MultiKueueConfig
    name: mkc
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: default-flavor
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cq
spec:
  namespaceSelector: {}
  admissionChecksStrategy:
    admissionChecks:
    - name: mk
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: 4
      - name: memory
        nominalQuota: 16Gi
---
apiVersion: v1
kind: Namespace
metadata:
  name: team
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: lq
  namespace: team
spec:
  clusterQueue: cq
"#;

/// A queue-labelled Job of one 500m pod running `sleep secs`, MultiKueue's on the manager.
fn job(name: &str, secs: u32) -> String {
    serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"managedBy": "kueue.x-k8s.io/multikueue", "suspend": true, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                "command": ["sleep", secs.to_string()],
                "resources": {"requests": {"cpu": "500m", "memory": "100Mi"}}}]}}}
    })
    .to_string()
}

fn condition_true(obj: &Value, type_: &str) -> bool {
    obj["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == type_ && c["status"] == "True")
}

/// The Workload of Job `name` in `team` (owned by it), if there is one.
fn workload_of(k: &Kubectl, job: &str) -> Option<Value> {
    let list = k.json(&["get", "workloads", "-n", "team"])?;
    list["items"].as_array()?.iter().find_map(|w| {
        w["metadata"]["ownerReferences"]
            .as_array()?
            .iter()
            .any(|o| o["kind"] == "Job" && o["name"] == job)
            .then(|| w.clone())
    })
}

fn gone(k: &Kubectl, args: &[&str]) -> bool {
    let (ok, _, err) = k.run(args, None);
    !ok && err.contains("NotFound")
}

#[test]
fn multikueue_runs_a_job_on_a_real_control_plane_worker() {
    let started = Instant::now();
    let Some((cp, worker)) = kubectl_on_a_control_plane("multikueue worker", started) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("quotagate-real-cp-mk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    // The worker: the install, a quotagate manager, one simulated Node, the install tests' queue.
    let (install, _) = install_without_webhooks();
    worker.ok(&["apply", "--server-side", "-f", "-"], Some(&install));
    worker.ok(
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd",
            "--all",
        ],
        None,
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    cmd.args(["run", "--kubeconfig"]).arg(&cp.kubeconfig).args([
        "--health-addr",
        "127.0.0.1:0",
        "--webhook-addr",
        "127.0.0.1:0",
        "--identity",
        "mk-worker",
        "--simulated-ray-dashboards",
    ]);
    let worker_manager = spawn_logged(cmd, dir.join("worker-manager.log"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    cmd.args(["node-agent", "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .args([
            "--runtime",
            "sim",
            "--nodes",
            "1",
            "--capacity",
            "cpu=4,memory=16Gi,pods=20",
        ]);
    let agent = spawn_logged(cmd, dir.join("node-agent.log"));
    worker.wait_for(
        &["get", "nodes"],
        Duration::from_secs(60),
        &format!("a Ready, untainted Node; node agent log:\n{}", agent.log()),
        |v| {
            v["items"].as_array().is_some_and(|items| {
                items.len() == 1
                    && items.iter().all(|n| {
                        n["spec"]["taints"].as_array().is_none_or(Vec::is_empty) && condition_true(n, "Ready")
                    })
            })
        },
    );
    worker.ok(&["apply", "--server-side", "-f", "-"], Some(QUEUES));

    // The manager: an embedded cluster served on loopback, MultiKueue reading Secrets in `default`.
    let manager_kubeconfig = dir.join("manager.kubeconfig");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    cmd.args(["run", "--embedded", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&manager_kubeconfig)
        .args(["--health-addr", "127.0.0.1:0"])
        .env("POD_NAMESPACE", "default");
    let manager_proc: Proc = spawn_logged(cmd, dir.join("manager.log"));
    let manager = Kubectl {
        bin: worker.bin.clone(),
        kubeconfig: manager_kubeconfig.clone(),
    };
    wait_until(
        &format!("the embedded manager serving; its log:\n{}", manager_proc.log()),
        Duration::from_secs(60),
        || (manager_kubeconfig.exists() && manager.run(&["get", "namespaces"], None).0).then_some(()),
    );
    let secret = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "worker1", "namespace": "default"},
        "stringData": {"kubeconfig": std::fs::read_to_string(&cp.kubeconfig).unwrap()}
    });
    manager.ok(&["apply", "-f", "-"], Some(&secret.to_string()));
    manager.ok(&["apply", "-f", "-"], Some(MANAGER_OBJECTS));
    manager.wait_for(
        &["get", "multikueuecluster", "worker1"],
        Duration::from_secs(60),
        &format!("worker1 Active; manager log:\n{}", manager_proc.log()),
        |c| condition_true(c, "Active"),
    );
    println!("multikueue worker: worker1 Active after {:?}", started.elapsed());

    // A short Job: dispatched, run on the real worker, its status back, the worker's copies gone.
    manager.ok(&["create", "-f", "-"], Some(&job("short", 3)));
    let remote = worker.wait_for(
        &["get", "job", "short", "-n", "team"],
        Duration::from_secs(90),
        &format!(
            "the Job's copy on the worker; manager log:\n{}\nworker manager log:\n{}",
            manager_proc.log(),
            worker_manager.log()
        ),
        |j| j["metadata"]["labels"][ORIGIN_LABEL].is_string(),
    );
    assert!(remote["spec"]["managedBy"].is_null(), "{remote}");
    let pods = worker.wait_for(
        &[
            "get",
            "pods",
            "-n",
            "team",
            "-l",
            "batch.kubernetes.io/job-name=short",
        ],
        Duration::from_secs(60),
        "the copy's pod bound by the real scheduler",
        |v| {
            v["items"]
                .as_array()
                .is_some_and(|p| p.len() == 1 && p[0]["spec"]["nodeName"] == "quotagate-node-1")
        },
    );
    println!(
        "multikueue worker: pod {} bound on the worker after {:?}",
        pods["items"][0]["metadata"]["name"],
        started.elapsed()
    );
    let wl = wait_until(
        "the manager's Workload admitted through worker1",
        Duration::from_secs(60),
        || {
            workload_of(&manager, "short").filter(|w| {
                w["status"]["clusterName"] == "worker1"
                    && w["status"]["admissionChecks"]
                        .as_array()
                        .is_some_and(|a| a.iter().any(|c| c["name"] == "mk" && c["state"] == "Ready"))
            })
        },
    );
    let wl_name = wl["metadata"]["name"].as_str().unwrap().to_string();
    let done = manager.wait_for(
        &["get", "job", "short", "-n", "team"],
        Duration::from_secs(90),
        &format!("the manager's Job Complete; manager log:\n{}", manager_proc.log()),
        |j| condition_true(j, "Complete"),
    );
    assert_eq!(done["status"]["succeeded"], 1, "{done}");
    assert_eq!(
        done["spec"]["managedBy"], "kueue.x-k8s.io/multikueue",
        "the manager's Job stays MultiKueue's: {done}"
    );
    manager.wait_for(
        &["get", "workload", &wl_name, "-n", "team"],
        Duration::from_secs(60),
        "the manager's Workload Finished",
        |w| condition_true(w, "Finished"),
    );
    wait_until(
        "the worker's Workload removed once finished",
        Duration::from_secs(60),
        || gone(&worker, &["get", "workload", &wl_name, "-n", "team"]).then_some(()),
    );
    println!(
        "multikueue worker: the short Job Complete on the manager after {:?}",
        started.elapsed()
    );

    // A long Job: running on the worker, deleted on the manager, its copies go.
    manager.ok(&["create", "-f", "-"], Some(&job("long", 600)));
    worker.wait_for(
        &["get", "job", "long", "-n", "team"],
        Duration::from_secs(90),
        "the long Job running on the worker",
        |j| j["status"]["active"] == 1,
    );
    manager.wait_for(
        &["get", "job", "long", "-n", "team"],
        Duration::from_secs(60),
        "its active pod mirrored on the manager",
        |j| j["status"]["active"] == 1,
    );
    let long_wl = workload_of(&manager, "long").expect("the long Job's Workload");
    let long_wl = long_wl["metadata"]["name"].as_str().unwrap().to_string();
    manager.ok(&["delete", "job", "long", "-n", "team", "--wait=false"], None);
    wait_until(
        "the long Job's copy and Workload removed from the worker",
        Duration::from_secs(90),
        || {
            (gone(&worker, &["get", "job", "long", "-n", "team"])
                && gone(&worker, &["get", "workload", &long_wl, "-n", "team"]))
            .then_some(())
        },
    );
    wait_until(
        "the worker's ClusterQueue reserves nothing",
        Duration::from_secs(60),
        || {
            let r = jsonpath(
                &worker,
                &["get", "clusterqueue", "cq"],
                "{.status.flavorsReservation[0].resources[?(@.name==\"cpu\")].total}",
            );
            (r == "0" || r.is_empty()).then_some(())
        },
    );
    println!(
        "multikueue worker: the long Job cleaned from the worker after {:?}",
        started.elapsed()
    );
    for (who, log) in [
        ("manager", manager_proc.log()),
        ("worker's manager", worker_manager.log()),
        ("node agent", agent.log()),
    ] {
        assert!(!log.contains("panicked"), "the {who} panicked:\n{log}");
    }
    drop((manager_proc, worker_manager, agent));
    let _ = std::fs::remove_dir_all(&dir);
}
