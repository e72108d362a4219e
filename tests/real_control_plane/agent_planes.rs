//! What `quotagate node-agent` serves besides pods, on the real control plane, with the install
//! applied unchanged (webhooks through the shipped Service) and the managers in-cluster as shipped
//! (no `--simulated-ray-dashboards`), the agent under its default `--runtime auto`:
//!
//! 1. a queue-labelled RayJob submitted over HTTP (`submissionMode: HTTPMode`) by the in-cluster
//!    manager to its simulated head's job API at the head's pod address, followed to `SUCCEEDED` and
//!    `Complete`, its Workload `Finished`;
//! 2. a RayService upgraded with `NewClusterWithIncrementalUpgrade` whose traffic goes through the
//!    agent's Gateway data plane: the Gateway Programmed at an address of the pod network, requests
//!    to it answered by the old cluster's head, then by both, then by the new one only, none failing;
//! 3. a head pod force-deleted (`--grace-period=0 --force`): its lent address stops answering.
//!
//! Needs root (network namespaces); without it the test prints one line and skips.

use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use super::workflows::{apply, cluster_gone, clusters_of, ready};
use super::{
    Stopped, is_root, jsonpath, kubectl_on_a_control_plane, quotagate, skip, spawn_logged, wait_until,
};

/// `GET http://<addr><path>` from this host (the pod network's bridge is local here): the status
/// line and the body, or why there was no answer.
fn http_get(addr: &str, path: &str) -> Result<(String, String), String> {
    let sock = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    let mut s = std::net::TcpStream::connect_timeout(&sock, Duration::from_secs(3))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out)
        .map_err(|e| format!("read {addr}: {e}"))?;
    let status = out.lines().next().unwrap_or("").to_string();
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

const QUEUE: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: agent-flavor
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: agent-cq
spec:
  namespaceSelector: {}
  resourceGroups:
    - coveredResources: ["cpu", "memory"]
      flavors:
        - name: agent-flavor
          resources:
            - name: cpu
              nominalQuota: "8"
            - name: memory
              nominalQuota: 64Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: agent-q
  namespace: default
spec:
  clusterQueue: agent-cq
"#;

const RAYJOB: &str = r#"
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: http-job
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: agent-q
spec:
  entrypoint: python -c "import time; time.sleep(5)"
  submissionMode: HTTPMode
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
"#;

/// A RayService upgraded incrementally through a Gateway (KubeRay's
/// `e2eincrementalupgrade/rayservice_incremental_upgrade_test.go` shape: in-tree autoscaling on,
/// `maxSurgePercent`, `stepSizePercent`, `intervalSeconds`), head-only, at `version`.
fn incremental(version: &str) -> String {
    format!(
        r#"
apiVersion: ray.io/v1
kind: RayService
metadata:
  name: inc
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: agent-q
spec:
  rayClusterDeletionDelaySeconds: 2
  upgradeStrategy:
    type: NewClusterWithIncrementalUpgrade
    clusterUpgradeOptions:
      gatewayClassName: quotagate
      maxSurgePercent: 50
      stepSizePercent: 25
      intervalSeconds: 2
  serveConfigV2: |
    applications:
      - name: echo
        import_path: echo_app:app
        route_prefix: /
        deployments:
          - name: Echo
            num_replicas: 2
  rayClusterConfig:
    rayVersion: "{version}"
    enableInTreeAutoscaling: true
    headGroupSpec:
      rayStartParams: {{}}
      template:
        spec:
          containers:
            - name: ray-head
              image: rayproject/ray:{version}
              resources:
                requests: {{cpu: "1", memory: 2Gi}}
    workerGroupSpecs: []
"#
    )
}

#[test]
fn node_agent_serves_the_job_api_the_gateway_and_frees_head_addresses() {
    let started = Instant::now();
    if !is_root() {
        return skip("the node agent's default runtime runs the Deployment in network namespaces (root)");
    }
    let Some((cp, k)) = kubectl_on_a_control_plane("agent planes", started) else {
        return;
    };
    k.ok(
        &["apply", "--server-side", "-f", "-"],
        Some(&quotagate(&["install-manifests"])),
    );
    // The Gateway API CRDs are the Gateway API's own install on a cluster; quotagate's copies carry
    // the annotation their protected group needs.
    k.ok(
        &["apply", "--server-side", "-f", "-"],
        Some(&quotagate(&["crds"])),
    );
    let dir = std::env::temp_dir().join(format!("quotagate-real-cp-agent-planes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    cmd.args(["node-agent", "--kubeconfig"]).arg(&cp.kubeconfig);
    let agent = Stopped(spawn_logged(cmd, dir.join("node-agent.log")));
    let agent = &agent.0;
    let ns = ["-n", "quotagate-system"];
    let logs = || {
        let managers = k
            .run(
                &[
                    "logs",
                    "-l",
                    "control-plane=quotagate-controller-manager",
                    ns[0],
                    ns[1],
                    "--tail=60",
                ],
                None,
            )
            .1;
        format!("managers:\n{managers}\nnode agent:\n{}", agent.log())
    };
    k.manager_available();
    println!("Deployment Available after {:?}", started.elapsed());
    // The webhook may take a moment to answer for the queue objects.
    wait_until("the queue applied", Duration::from_secs(60), || {
        k.run(&["apply", "--server-side", "-f", "-"], Some(QUEUE))
            .0
            .then_some(())
    });

    // 1. A RayJob over HTTP to its simulated head's job API.
    k.ok(&["create", "-f", "-"], Some(RAYJOB));
    let rj = k.wait_for(
        &["get", "rayjob", "http-job", "-n", "default"],
        Duration::from_secs(180),
        &format!("the RayJob Complete; {}", logs()),
        |r| r["status"]["jobDeploymentStatus"] == "Complete",
    );
    assert_eq!(rj["status"]["jobStatus"], "SUCCEEDED", "{rj}");
    let dashboard = rj["status"]["dashboardURL"].as_str().unwrap_or("");
    assert!(dashboard.contains("svc"), "the head Service's dashboard: {rj}");
    k.wait_for(
        &["get", "workloads", "-n", "default"],
        Duration::from_secs(60),
        "the RayJob's Workload Finished",
        |v| {
            v["items"].as_array().into_iter().flatten().any(|w| {
                w["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
                    && w["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|c| c["type"] == "Finished" && c["status"] == "True")
            })
        },
    );
    let job_log = agent.log();
    assert!(
        job_log.contains("simulated Ray head's dashboard is served"),
        "the head served by the agent:\n{job_log}"
    );
    println!(
        "RayJob over HTTPMode SUCCEEDED and Complete after {:?} (dashboard {dashboard})",
        started.elapsed()
    );

    // 2. An incremental upgrade through the agent's Gateway data plane.
    apply(&k, &incremental("2.46.0"));
    wait_until(
        &format!("the RayService Ready; {}", logs()),
        Duration::from_secs(180),
        || ready(&k, "inc").then_some(()),
    );
    let first = clusters_of(&k, "inc").0;
    let gw = wait_until(
        &format!("the Gateway Programmed with an address; {}", logs()),
        Duration::from_secs(60),
        || {
            let v = jsonpath(
                &k,
                &["get", "gateways", "-n", "default"],
                "{.items[0].status.conditions[?(@.type==\"Programmed\")].status}|{.items[0].status.addresses[0].value}",
            );
            let (p, addr) = v.split_once('|')?;
            (p == "True" && addr.starts_with("10.")).then(|| addr.to_string())
        },
    );
    let url = format!("{gw}:80");
    let (status, body) = wait_until(
        "the old cluster answers through the Gateway",
        Duration::from_secs(60),
        || http_get(&url, "/").ok().filter(|(s, _)| s.contains(" 200 ")),
    );
    assert!(body.contains(&first), "{status} {body}");
    println!(
        "Gateway {gw} Programmed; {first} answers through it after {:?}",
        started.elapsed()
    );

    apply(&k, &incremental("2.47.0"));
    let t0 = Instant::now();
    let (mut failed, mut answers) = (Vec::new(), Vec::<String>::new());
    let mut pending = String::new();
    let mut both = false;
    while t0.elapsed() < Duration::from_secs(240) {
        match http_get(&url, "/") {
            Ok((s, b)) if s.contains(" 200 ") => answers.push(b),
            other => failed.push(format!("{:?}: {other:?}", t0.elapsed())),
        }
        let (active, p) = clusters_of(&k, "inc");
        if !p.is_empty() {
            pending = p;
        }
        let recent = &answers[answers.len().saturating_sub(20)..];
        if !pending.is_empty()
            && recent.iter().any(|a| a.contains(&first))
            && recent.iter().any(|a| a.contains(&pending))
        {
            both = true;
        }
        if !pending.is_empty() && active == pending && cluster_gone(&k, &first) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!pending.is_empty(), "no pending cluster; {}", logs());
    let ended_on = clusters_of(&k, "inc").0;
    let old = answers.iter().filter(|a| a.contains(&first)).count();
    let new = answers.iter().filter(|a| a.contains(&pending)).count();
    println!(
        "incremental upgrade {first} -> {pending} in {:?}: {} requests through the Gateway, {old} old, {new} new, {} failed",
        t0.elapsed(),
        answers.len() + failed.len(),
        failed.len()
    );
    // 3. The new head force-deleted: its lent address is released (nothing answers there). Checked
    // before the upgrade's own verdict, so a failed request does not hide it.
    let head = jsonpath(
        &k,
        &[
            "get",
            "pods",
            "-n",
            "default",
            "-l",
            &format!("ray.io/cluster={pending},ray.io/node-type=head"),
        ],
        "{.items[0].metadata.name}|{.items[0].status.podIP}|{.items[0].metadata.uid}",
    );
    let mut parts = head.split('|');
    let (head_pod, head_ip, head_uid) = match (parts.next(), parts.next(), parts.next()) {
        (Some(n), Some(ip), Some(uid)) if !uid.is_empty() => (n, ip, uid),
        _ => panic!("the head pod, its address and uid: {head:?}"),
    };
    let dash = format!("{head_ip}:8265");
    assert!(
        http_get(&dash, "/api/serve/applications/").is_ok(),
        "the head answers before"
    );
    k.ok(
        &[
            "delete",
            "pod",
            head_pod,
            "-n",
            "default",
            "--grace-period=0",
            "--force",
        ],
        None,
    );
    // Polled often: the head the RayCluster controller recreates may be lent the same address.
    // Released means both: nothing answers there, and the agent says it released the address.
    let forced = Instant::now();
    let mut answered_until = None;
    let mut why_not = String::new();
    let log = loop {
        match http_get(&dash, "/api/serve/applications/") {
            Ok(_) => answered_until = Some(forced.elapsed()),
            Err(e) if why_not.is_empty() => why_not = e,
            Err(_) => {}
        }
        let log = agent.log();
        let released = log
            .lines()
            .any(|l| l.contains("its address is released") && l.contains(head_uid));
        if released && !why_not.is_empty() {
            break log;
        }
        assert!(
            forced.elapsed() < Duration::from_secs(30),
            "the force-deleted head's address released: not within 30s (last answered after \
             {answered_until:?}; released in the log: {released}); node agent log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    println!(
        "head {head_pod} force-deleted: released after {:?}; {dash} last answered after \
         {answered_until:?}, then: {why_not}",
        forced.elapsed()
    );
    assert!(!log.contains("panicked"), "the node agent panicked:\n{log}");
    assert_eq!(
        ended_on,
        pending,
        "the upgrade ended on the new cluster; {}",
        logs()
    );
    assert!(
        failed.is_empty(),
        "failed requests through the Gateway: {failed:?}"
    );
    assert!(both, "no moment when both clusters answered (a split by weight)");
    let tail = &answers[answers.len().saturating_sub(10)..];
    assert!(
        !tail.is_empty() && tail.iter().all(|a| a.contains(&pending)),
        "the last answers come from the new cluster: {tail:?}"
    );
    println!("agent planes test done in {:?}", started.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
}
