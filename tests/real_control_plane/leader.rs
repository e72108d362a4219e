//! Issue 58: two managers in-cluster, and the leader's process SIGKILLed mid-upgrade. The shipped
//! install (webhooks included) with its Deployment at 2 replicas, both pods run by `quotagate
//! node-agent --runtime process` as this machine's `quotagate` binary, with the shipped RBAC, their
//! ServiceAccount tokens and the Deployment's securityContext; the Ray pods run on a second, simulated
//! node agent's Nodes (this machine may have no Ray), and the managers answer their Ray dashboard calls
//! with the simulator (`--simulated-ray-dashboards`, added to the Deployment's args, the one change to
//! the install besides the node selector that puts the managers on the process runtime's Node).
//!
//! A RayService is upgraded through a ClusterQueue that holds only the running cluster, so the upgrade
//! waits at the gate. There the process of the pod holding the Lease is killed with SIGKILL, as a
//! node's OOM killer would: the runtime reports the container terminated (`lastState.terminated`,
//! exit code 137) and restarts it (`restartCount`) with the kubelet's back-off. The Lease's identity
//! is controller-runtime's (the pod's name, `_` and a UUID new at each start), so the restarted
//! container is a new candidate: it does not renew its killed incarnation's Lease but waits it out
//! with the other replica, and either may take it. The kill is repeated on each restart until the
//! other replica's pod holds the Lease. The new leader keeps the gate: the pending cluster has 0 pods
//! and the usage stays at the active cluster's. The quota is raised and the upgrade completes.
//!
//! Needs root (network namespaces); without it the test prints one line and skips.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::control_plane_support::pod_processes;
use super::workflows::{
    SERVICE_QUEUE, apply, cluster_gone, clusters_of, cpu_usage, ray_pods, rayservice, ready, set_cpu_quota,
    upgrade_gated,
};
use super::{
    Kubectl, Proc, Stopped, install_stream, is_root, jsonpath, kubectl_on_a_control_plane, skip,
    spawn_logged, wait_until,
};

const NS: [&str; 2] = ["-n", "quotagate-system"];
/// The process runtime's Node: 1 CPU holds both managers (100m each) and no 1-CPU Ray pod.
pub(super) const PROCESS_NODE: &str = "qg-proc-1";

/// The node agents for in-cluster managers running RayServices: the process runtime's one Node
/// (`PROCESS_NODE`), which runs the managers' pods as this machine's `quotagate` binary, and two
/// simulated Nodes of 8 CPU for the Ray pods; their logs in `dir`.
pub(super) fn manager_and_ray_agents(kubeconfig: &Path, dir: &Path) -> (Stopped, Proc) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    cmd.args(["node-agent", "--kubeconfig"]).arg(kubeconfig).args([
        "--runtime",
        "process",
        "--nodes",
        "1",
        "--node-prefix",
        "qg-proc",
        "--capacity",
        "cpu=1,memory=4Gi,pods=10",
    ]);
    let agent = Stopped(spawn_logged(cmd, dir.join("node-agent.log")));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    cmd.args(["node-agent", "--kubeconfig"]).arg(kubeconfig).args([
        "--runtime",
        "sim",
        "--nodes",
        "2",
        "--capacity",
        "cpu=8,memory=64Gi,pods=50",
    ]);
    let sim = spawn_logged(cmd, dir.join("sim-agent.log"));
    (agent, sim)
}

/// The holder of the managers' Lease: `<pod>_<UUID>`, the UUID new at each start of a manager.
pub(super) fn leader(k: &Kubectl) -> String {
    jsonpath(
        k,
        &["get", "lease", "quotagate-leader", NS[0], NS[1]],
        "{.spec.holderIdentity}",
    )
}

/// The pod of a holder identity (controller-runtime's `<hostname>_<UUID>`, the pod's name first).
pub(super) fn pod_of(holder: &str) -> &str {
    holder.split_once('_').map_or(holder, |(pod, _)| pod)
}

fn pod(k: &Kubectl, name: &str) -> Option<Value> {
    k.json(&["get", "pod", name, NS[0], NS[1]])
}

#[test]
fn leader_pod_killed_mid_upgrade_and_the_other_replica_completes_it() {
    let started = Instant::now();
    if !is_root() {
        return skip("the node agent's process runtime needs root (network namespaces)");
    }
    let Some((cp, k)) = kubectl_on_a_control_plane("leader", started) else {
        return;
    };

    // The shipped install, its Deployment's pods on the process runtime's Node and the dashboards
    // simulated.
    let (install, _) = install_stream(|d| {
        if d["kind"] == "Deployment" {
            assert_eq!(d["spec"]["replicas"], 2, "the shipped Deployment runs 2 replicas");
            let spec = &mut d["spec"]["template"]["spec"];
            spec["nodeSelector"] = serde_json::json!({"kubernetes.io/hostname": PROCESS_NODE});
            spec["containers"][0]["args"]
                .as_array_mut()
                .expect("the manager's args")
                .push("--simulated-ray-dashboards".into());
        }
        true
    });
    k.ok(&["apply", "--server-side", "-f", "-"], Some(&install));

    let dir = std::env::temp_dir().join(format!("quotagate-real-cp-leader-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (agent, sim) = manager_and_ray_agents(&cp.kubeconfig, &dir);
    let agent = &agent.0;

    let deploy = k.wait_for_or(
        &["get", "deployment", "quotagate-controller-manager", NS[0], NS[1]],
        Duration::from_secs(240),
        || {
            format!(
                "the Deployment's 2 replicas ready; node agent log:\n{}\n{}",
                agent.log(),
                super::managers_report(&k, NS[1])
            )
        },
        |d| d["status"]["readyReplicas"] == 2,
    );
    println!(
        "leader: Deployment ready after {:?}: {} of {} replicas",
        started.elapsed(),
        deploy["status"]["readyReplicas"],
        deploy["spec"]["replicas"]
    );
    let first_holder = wait_until("the leader Lease", Duration::from_secs(60), || {
        Some(leader(&k)).filter(|h| h.starts_with("quotagate-controller-manager-"))
    });
    let first = pod_of(&first_holder).to_owned();
    assert!(
        pod(&k, &first).is_some() && first_holder.len() == first.len() + 37,
        "the holder {first_holder}: a pod's name, `_` and a UUID"
    );
    // The webhooks serve before anything queue-managed is made (a fresh caBundle takes a moment).
    k.wait_for(
        &[
            "get",
            "mutatingwebhookconfiguration",
            "quotagate-mutating-webhook-configuration",
        ],
        Duration::from_secs(60),
        "the caBundle",
        |c| {
            c["webhooks"]
                .as_array()
                .is_some_and(|w| w.iter().all(|h| h["clientConfig"]["caBundle"].is_string()))
        },
    );
    println!("leader: {first_holder} leads after {:?}", started.elapsed());

    // The Deployment's securityContext holds in the pods: the manager runs as the image's user
    // (65532), with no capability and no_new_privs, on a read-only root; the seccomp profile it asks
    // for is reported as not applied.
    let ip = jsonpath(&k, &["get", "pod", &first, NS[0], NS[1]], "{.status.podIP}");
    let pids = pod_processes(&ip);
    assert_eq!(pids.len(), 1, "the leader pod's processes: {pids:?}");
    let status = std::fs::read_to_string(format!("/proc/{}/status", pids[0])).unwrap_or_default();
    let line = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    println!(
        "leader: the manager's process: Uid {}; Gid {}; NoNewPrivs {}; CapEff {}; CapBnd {}",
        line("Uid:"),
        line("Gid:"),
        line("NoNewPrivs:"),
        line("CapEff:"),
        line("CapBnd:")
    );
    assert_eq!(line("Uid:"), "65532 65532 65532 65532");
    assert_eq!(line("Gid:"), "65532 65532 65532 65532");
    assert_eq!(line("NoNewPrivs:"), "1");
    assert_eq!(line("CapEff:"), "0000000000000000");
    assert_eq!(line("CapBnd:"), "0000000000000000");
    let mounts = std::fs::read_to_string(format!("/proc/{}/mountinfo", pids[0])).unwrap_or_default();
    let root_options = mounts
        .lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .filter(|f| f.len() > 5 && f[4] == "/")
        .map(|f| f[5].to_string())
        .next_back()
        .unwrap_or_default();
    assert!(
        root_options.starts_with("ro"),
        "the root's mount options: {root_options}"
    );
    let events = jsonpath(
        &k,
        &[
            "get",
            "events",
            NS[0],
            NS[1],
            "--field-selector",
            "reason=SecurityContextNotEnforced",
        ],
        "{range .items[*]}{.involvedObject.name}: {.message}{\"\\n\"}{end}",
    );
    println!("leader: events: {}", events.trim());
    assert!(
        events.contains(&format!(
            "{first}: container manager: the process runtime does not apply seccompProfile: RuntimeDefault"
        )),
        "{events}"
    );

    // A container that would run as root under runAsNonRoot is not started, with the kubelet's message.
    let root_pod = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"as-root","namespace":"default"}},
        "spec":{{"nodeName":"{PROCESS_NODE}","securityContext":{{"runAsNonRoot":true}},
        "containers":[{{"name":"c","image":"rayproject/ray:2.46.0","command":["sleep","60"]}}]}}}}"#
    );
    k.ok(&["create", "-f", "-"], Some(&root_pod));
    let refused = k.wait_for(
        &["get", "pod", "as-root", "-n", "default"],
        Duration::from_secs(60),
        "the root container refused",
        |p| p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CreateContainerConfigError",
    );
    let message = refused["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    println!("leader: as-root: CreateContainerConfigError: {message}");
    let uid = refused["metadata"]["uid"].as_str().unwrap_or_default();
    assert_eq!(
        message,
        format!(
            "container has runAsNonRoot and image will run as root (pod: \"as-root_default({uid})\", container: c)"
        )
    );
    k.ok(
        &["delete", "pod", "as-root", "-n", "default", "--wait=false"],
        None,
    );

    // A RayService in a queue that holds it and not a second cluster: its upgrade waits at the gate.
    apply(&k, SERVICE_QUEUE);
    set_cpu_quota(&k, "svc-cq", "2");
    apply(&k, &rayservice("svc-a", "2.46.0"));
    wait_until(
        &format!("the RayService Ready; sim agent log:\n{}", sim.log()),
        Duration::from_secs(180),
        || ready(&k, "svc-a").then_some(()),
    );
    let active = clusters_of(&k, "svc-a").0;
    let pending = upgrade_gated(&k, "svc-a", "2.47.0");
    println!("leader: upgrade gated after {:?}", started.elapsed());

    // SIGKILL the leader's process, on each restart, until the other replica's pod holds the Lease.
    let killed_at = Instant::now();
    let mut kills = 0;
    let mut last_pid = None;
    let next = wait_until(
        &format!(
            "the other replica holding the Lease; node agent log:\n{}",
            agent.log()
        ),
        Duration::from_secs(120),
        || {
            let holder = leader(&k);
            if !holder.is_empty() && pod_of(&holder) != first {
                return Some(holder);
            }
            let pids = pod_processes(&ip);
            if let Some(&pid) = pids.first()
                && last_pid != Some(pid)
            {
                let ok = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status()
                    .is_ok_and(|s| s.success());
                assert!(ok, "kill -KILL {pid}");
                kills += 1;
                last_pid = Some(pid);
            }
            None
        },
    );
    println!(
        "leader: {next} leads {:?} after the first SIGKILL ({kills} kills of {first})",
        killed_at.elapsed()
    );
    assert!(next.starts_with("quotagate-controller-manager-"), "{next}");

    // The killed container as a kubelet reports it: terminated by SIGKILL, restarted.
    let killed = wait_until("the killed pod's restarts", Duration::from_secs(60), || {
        pod(&k, &first).filter(|p| {
            p["status"]["containerStatuses"][0]["restartCount"]
                .as_i64()
                .is_some_and(|n| n >= 1)
        })
    });
    let c = &killed["status"]["containerStatuses"][0];
    println!(
        "leader: {first}: restartCount {}, lastState {}, state {}",
        c["restartCount"], c["lastState"], c["state"]
    );
    assert_eq!(c["lastState"]["terminated"]["exitCode"], 137, "{c}");
    assert_eq!(c["lastState"]["terminated"]["reason"], "Error", "{c}");

    // The new leader keeps the gate.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(clusters_of(&k, "svc-a"), (active.clone(), pending.clone()));
    assert_eq!(ray_pods(&k).get(&pending), None, "the gated cluster has pods");
    assert_eq!(cpu_usage(&k, "svc-cq"), 2000);

    // Quota for the surge: the upgrade completes under the new leader.
    set_cpu_quota(&k, "svc-cq", "4");
    wait_until("the switch to the new cluster", Duration::from_secs(180), || {
        (clusters_of(&k, "svc-a") == (pending.clone(), String::new())).then_some(())
    });
    wait_until("the old cluster deleted", Duration::from_secs(60), || {
        cluster_gone(&k, &active).then_some(())
    });
    wait_until("the usage settled at 2 CPU", Duration::from_secs(60), || {
        (cpu_usage(&k, "svc-cq") == 2000).then_some(())
    });
    assert!(ready(&k, "svc-a"));
    assert_eq!(leader(&k), next, "the Lease stayed with the new leader");
    println!(
        "leader: upgrade completed under {next} after {:?}",
        started.elapsed()
    );

    // The killed pod's container runs again (after its back-off) and the Deployment is whole.
    k.wait_for(
        &["get", "deployment", "quotagate-controller-manager", NS[0], NS[1]],
        Duration::from_secs(360),
        "both replicas ready again",
        |d| d["status"]["readyReplicas"] == 2,
    );
    for (who, log) in [("node agent", agent.log()), ("sim agent", sim.log())] {
        assert!(!log.contains("panicked"), "the {who} panicked:\n{log}");
    }
    drop(sim);
    let _ = std::fs::remove_dir_all(&dir);
}
