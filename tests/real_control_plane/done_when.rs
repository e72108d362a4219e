//! Issue 58's "Done when", literally: on the real control plane, the install applied unchanged
//! (`quotagate install-manifests | kubectl apply --server-side -f -`) and `quotagate node-agent
//! --kubeconfig "$KUBECONFIG"` with no other flag. The agent's default runtime (`auto`) runs the
//! shipped Deployment's pods as this machine's `quotagate` binary and simulates the rest, serving the
//! simulated Ray heads' dashboards at their pod addresses; the in-cluster managers run exactly as
//! shipped (no `--simulated-ray-dashboards`), so their Ray dashboard calls go over HTTP to
//! `<head svc>.<ns>.svc.cluster.local:8265`, as on any cluster.
//!
//! Checked: kube-apiserver's `/version`; the Deployment `quotagate-controller-manager` Available
//! within 4 minutes; a ClusterQueue with `nominalQuota: "-3"` refused by the webhook; the POC's gated
//! upgrade (config/samples/gated-upgrade: a 2-CPU RayService in a 3-CPU ClusterQueue, its rayVersion
//! bumped: the pending cluster has 0 pods until the quota is raised to 4, then it is admitted, its
//! head's Serve proxy answers at the pod address, the serve Service's EndpointSlice lists it, the old
//! cluster goes and the usage settles at 2) under the invariant watcher; a queue-labelled batch Job
//! returned by `kubectl create` with `spec.suspend: true` whose Workload ends `Finished`; a
//! queue-labelled RayJob in KubeRay's default `K8sJobMode`, its submitter pod's `ray job submit`
//! played by the agent against the head it serves, run to `SUCCEEDED`.
//!
//! Needs root (network namespaces); without it the test prints one line and skips.

use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::install::negative_quota_refused;
use super::workflows::{cluster_gone, clusters_of, cpu_usage, ray_pods, ready, set_cpu_quota};
use super::{
    Stopped, is_root, jsonpath, kubectl_on_a_control_plane, quotagate, root, skip, spawn_logged, wait_until,
    watch_invariants, watcher_runtime,
};

/// `GET http://<ip>:<port>/-/healthz` from this host (the pod network's bridge is local here): the
/// status line.
fn serve_proxy_health(ip: &str, port: u16) -> String {
    let Ok(mut s) = std::net::TcpStream::connect_timeout(
        &format!("{ip}:{port}").parse().expect("an address"),
        Duration::from_secs(5),
    ) else {
        return "no connection".into();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = write!(
        s,
        "GET /-/healthz HTTP/1.1\r\nHost: {ip}:{port}\r\nConnection: close\r\n\r\n"
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines().next().unwrap_or("").to_string()
}

/// A queue-labelled RayJob in KubeRay's default submission mode, its cluster deleted at its end.
const RAYJOB: &str = r#"
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: done-when
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: ray-queue
spec:
  entrypoint: python -c "import time; time.sleep(2)"
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
              requests: {cpu: 500m, memory: 512Mi}
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
              requests: {cpu: 500m, memory: 512Mi}
"#;

#[test]
fn done_when_the_literal_flow_runs_the_gated_upgrade() {
    let started = Instant::now();
    if !is_root() {
        return skip("the node agent's default runtime runs the Deployment in network namespaces (root)");
    }
    let Some((cp, k)) = kubectl_on_a_control_plane("done when", started) else {
        return;
    };
    let version: Value = serde_json::from_str(&k.ok(&["version", "-o", "json"], None)).expect("version JSON");
    let git = version["serverVersion"]["gitVersion"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(git.starts_with("v1.3"), "{version}");
    println!("kube-apiserver {git}");

    // quotagate install-manifests | kubectl apply --server-side -f -
    k.ok(
        &["apply", "--server-side", "-f", "-"],
        Some(&quotagate(&["install-manifests"])),
    );
    // quotagate node-agent --kubeconfig "$KUBECONFIG" &
    let dir = std::env::temp_dir().join(format!("quotagate-real-cp-done-when-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    cmd.args(["node-agent", "--kubeconfig"]).arg(&cp.kubeconfig);
    let agent = Stopped(spawn_logged(cmd, dir.join("node-agent.log")));
    let agent = &agent.0;

    let ns = ["-n", "quotagate-system"];
    k.manager_available();
    println!("Deployment Available after {:?}", started.elapsed());
    let args = jsonpath(
        &k,
        &["get", "deployment", "quotagate-controller-manager", ns[0], ns[1]],
        "{.spec.template.spec.containers[0].args}",
    );
    assert!(!args.contains("simulated"), "the Deployment as shipped: {args}");

    negative_quota_refused(&k);

    // The POC's gated upgrade, under the invariant watcher.
    let rt = watcher_runtime();
    let inv = watch_invariants(&rt, &cp.kubeconfig, false);
    let samples = root().join("config/samples/gated-upgrade");
    for f in ["quota.yaml", "rayservice.yaml"] {
        k.ok(
            &["apply", "--server-side", "-f", samples.join(f).to_str().unwrap()],
            None,
        );
    }
    let logs = || {
        let managers = k
            .run(
                &[
                    "logs",
                    "-l",
                    "control-plane=quotagate-controller-manager",
                    ns[0],
                    ns[1],
                    "--tail=40",
                ],
                None,
            )
            .1;
        format!("managers:\n{managers}\nnode agent:\n{}", agent.log())
    };
    wait_until("the RayService Ready", Duration::from_secs(180), || {
        ready(&k, "poc").then_some(())
    });
    let first = clusters_of(&k, "poc").0;
    assert!(!first.is_empty());
    assert_eq!(cpu_usage(&k, "ray-cq"), 2000, "the active cluster's 2 CPU");
    println!("RayService Ready after {:?}", started.elapsed());

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
        Some(clusters_of(&k, "poc").1).filter(|p| !p.is_empty())
    });
    wait_until("the wait explained", Duration::from_secs(60), || {
        jsonpath(
            &k,
            &["get", "rayservice", "poc"],
            "{.status.conditions[?(@.type==\"UpgradeInProgress\")].message}",
        )
        .contains("is gated: waiting for workload slice")
        .then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(clusters_of(&k, "poc").0, first, "no switch while gated");
    assert_eq!(ray_pods(&k).get(&pending), None, "the gated cluster has pods");
    assert_eq!(cpu_usage(&k, "ray-cq"), 2000, "the gated cluster holds no quota");
    println!("upgrade gated with 0 pods after {:?}", started.elapsed());

    set_cpu_quota(&k, "ray-cq", "4");
    wait_until(
        &format!("the switch to the new cluster; {}", logs()),
        Duration::from_secs(180),
        || (clusters_of(&k, "poc").0 == pending).then_some(()),
    );
    // The traffic: the new head's Serve proxy answers at its pod address, and the real EndpointSlice
    // controller lists that head behind the serve Service.
    let head_ip = jsonpath(
        &k,
        &[
            "get",
            "pods",
            "-l",
            &format!("ray.io/cluster={pending},ray.io/node-type=head"),
        ],
        "{.items[0].status.podIP}",
    );
    assert!(head_ip.starts_with("10.244."), "the head's address: {head_ip:?}");
    let health = serve_proxy_health(&head_ip, 8000);
    assert!(health.contains(" 200 "), "the new head's Serve proxy: {health}");
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
        cluster_gone(&k, &first).then_some(())
    });
    wait_until("the old cluster's pods gone", Duration::from_secs(60), || {
        (!ray_pods(&k).contains_key(&first)).then_some(())
    });
    wait_until("the usage settled at 2", Duration::from_secs(60), || {
        (cpu_usage(&k, "ray-cq") == 2000).then_some(())
    });
    assert!(ready(&k, "poc"));
    println!(
        "gated upgrade done after {:?}: head {head_ip} {health}",
        started.elapsed()
    );

    // A queue-labelled batch Job: stored suspended by the mutating webhook, then run to its end.
    let job = r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"done-when","namespace":"default",
        "labels":{"kueue.x-k8s.io/queue-name":"ray-queue"}},"spec":{"template":{"spec":{
        "restartPolicy":"Never","containers":[{"name":"c","image":"busybox","command":["sleep","1"],
        "resources":{"requests":{"cpu":"1"}}}]}}}}"#;
    let created: Value =
        serde_json::from_str(&k.ok(&["create", "-f", "-", "-o", "json"], Some(job))).expect("the Job");
    assert_eq!(created["spec"]["suspend"], true, "{created}");
    k.wait_for(
        &["get", "workloads", "-n", "default"],
        Duration::from_secs(120),
        "the Job's Workload Finished",
        |v| {
            v["items"].as_array().into_iter().flatten().any(|w| {
                w["metadata"]["ownerReferences"][0]["kind"] == "Job"
                    && w["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|c| c["type"] == "Finished" && c["status"] == "True")
            })
        },
    );
    println!("batch Job Finished after {:?}", started.elapsed());

    // A queue-labelled RayJob in KubeRay's default `K8sJobMode`: the in-cluster manager makes its
    // cluster and submitter Job; the real Job controller and scheduler put the submitter pod on an
    // agent node, whose `ray job submit` reaches the head the agent serves through the head Service's
    // EndpointSlice; the manager follows the job over HTTP to its end.
    k.ok(&["create", "-f", "-"], Some(RAYJOB));
    let rj = k.wait_for(
        &["get", "rayjob", "done-when", "-n", "default"],
        Duration::from_secs(180),
        &format!("the RayJob Complete; {}", logs()),
        |r| r["status"]["jobDeploymentStatus"] == "Complete",
    );
    assert_eq!(rj["status"]["jobStatus"], "SUCCEEDED", "{rj}");
    let submitter = k.wait_for(
        &["get", "job", "done-when", "-n", "default"],
        Duration::from_secs(60),
        "the submitter Job succeeded",
        |j| j["status"]["succeeded"] == 1,
    );
    assert_eq!(
        submitter["status"]["failed"],
        Value::Null,
        "the submitter never failed: {submitter}"
    );
    println!("K8sJobMode RayJob Complete after {:?}", started.elapsed());

    let violations = inv.violations();
    assert!(
        violations.is_empty(),
        "invariant violations:\n{}",
        violations.join("\n")
    );
    assert!(inv.checks() > 0, "the invariant watcher ran no check");
    println!("{} invariant checks, 0 violations", inv.checks());
    drop(inv);
    drop(rt);
    let log = agent.log();
    assert!(!log.contains("panicked"), "the node agent panicked:\n{log}");
    println!("done-when test done in {:?}", started.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
}
