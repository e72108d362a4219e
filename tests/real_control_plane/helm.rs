//! Issue 66 on real ground: the chart (`charts/quotagate`) with the real helm v3.22.0
//! (scripts/install-helm.sh) against the real control plane, the manager in-cluster as `leader.rs`
//! runs it: `quotagate node-agent --runtime process` runs the Deployment's pods as this machine's
//! quotagate binary on its one Node, which the chart's `controllerManager.nodeSelector` picks, and a
//! second, simulated node agent runs the Ray pods; the managers answer their Ray dashboard calls with
//! the simulator, through the chart's `controllerManager.manager.extraArgs:
//! [--simulated-ray-dashboards]` (this machine may have no Ray).
//!
//! `helm install --create-namespace --wait` (CRDs from `crds/`, then the templates); the webhook
//! serving through the Service (Kueue's refusal of a negative quota); a RayService in a queue that
//! holds only its running cluster, its upgrade waiting at the gate with no pod for the new cluster,
//! the quota raised and the upgrade complete. Then a second upgrade waits at the gate, and `helm
//! upgrade --wait` of the chart (a new log level rolls the pods, one replica fewer) runs in the middle
//! of it: the RayService stays Ready with its serve Service's endpoints on the serving cluster at
//! every poll (and the invariant watcher's I8, no serving gap, watches throughout), the gate holds
//! under the new pods, the Lease goes to a new pod's manager, the managers never without a leader for
//! longer than a lease takes to run out (each handover measured from the Lease's own times: a round
//! of leader election without a time bound could leave them leaderless for minutes), and with the
//! quota raised the upgrade completes under it. `helm uninstall --wait` removes every templated
//! object and keeps the CRDs (Helm never deletes `crds/`).
//!
//! Needs root and helm (env QUOTAGATE_HELM or the script's cache) besides the parent's tools; without
//! them the test prints one line and skips (fails with `QUOTAGATE_REQUIRE_TOOLS=1`).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use super::control_plane_support::helm_path;
use super::leader::{PROCESS_NODE, manager_and_ray_agents, pod_of};
use super::workflows::{
    SERVICE_QUEUE, apply, cluster_gone, clusters_of, cpu_usage, ray_pods, rayservice, ready, set_cpu_quota,
    upgrade_gated,
};
use super::{
    Kubectl, is_root, jsonpath, kubectl_on_a_control_plane, root, skip, wait_until, watch_invariants,
    watcher_runtime,
};

#[derive(Clone)]
struct Helm {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Helm {
    /// Runs helm: whether it succeeded, and what it printed (stdout, then stderr).
    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(&self.bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .expect("helm runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.run(args);
        assert!(ok, "helm {args:?} failed:\n{stdout}{stderr}");
        stdout
    }

    /// `ok` for a call that waits on the manager (`--wait`): a failure also carries the manager
    /// pods' states and the end of their logs, so a run that fails once says why.
    fn ok_or_say_why(&self, k: &Kubectl, ns: &str, args: &[&str]) -> String {
        said_why(k, ns, args, self.run(args))
    }
}

/// The output of a helm call that waited on the managers, or a failure that says why they were not up.
fn said_why(k: &Kubectl, ns: &str, args: &[&str], (ok, stdout, stderr): (bool, String, String)) -> String {
    if !ok {
        panic!(
            "helm {args:?} failed:\n{stdout}{stderr}\n{}",
            super::managers_report(k, ns)
        );
    }
    stdout
}

/// The validating webhook, reached through the Service, refuses a negative quota (Kueue's message).
/// A call that fails to reach the webhook (a caBundle or endpoint not yet everywhere) is tried again.
fn webhook_refuses(k: &Kubectl) -> String {
    let cq = r#"{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"negative"},
        "spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu"],
        "flavors":[{"name":"default-flavor","resources":[{"name":"cpu","nominalQuota":"-3"}]}]}]}}"#;
    let refusal = wait_until("the webhook's refusal", Duration::from_secs(90), || {
        let (ok, out, err) = k.run(&["create", "-f", "-"], Some(cq));
        assert!(!ok, "a ClusterQueue with nominalQuota -3 was stored: {out}");
        (!err.contains("failed calling webhook")).then_some(err)
    });
    assert!(
        refusal.contains("admission webhook \"vclusterqueue.kb.io\" denied the request")
            && refusal.contains("must be greater than or equal to 0"),
        "{refusal}"
    );
    refusal.trim().to_string()
}

/// `svc` serves: Ready, its serve Service selecting one of `clusters`, and the real EndpointSlice
/// controller listing a ready head of that cluster behind it; else what is missing.
fn serving(k: &Kubectl, svc: &str, clusters: &[&str]) -> Result<(), String> {
    if !ready(k, svc) {
        return Err(format!("{svc} not Ready"));
    }
    let service = format!("{svc}-serve-svc");
    let selected = jsonpath(
        k,
        &["get", "service", &service, "-n", "default"],
        "{.spec.selector.ray\\.io/cluster}",
    );
    if !clusters.contains(&selected.as_str()) {
        return Err(format!("{service} selects {selected:?}, not one of {clusters:?}"));
    }
    let label = format!("kubernetes.io/service-name={service}");
    let slices = k
        .json(&["get", "endpointslices", "-n", "default", "-l", &label])
        .unwrap_or_default();
    let heads: Vec<&str> = slices["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
        .filter(|e| e["conditions"]["ready"] == true)
        .filter_map(|e| e["targetRef"]["name"].as_str())
        .collect();
    let on = |cluster: &str| heads.iter().any(|h| h.starts_with(&format!("{cluster}-")));
    if on(&selected) {
        return Ok(());
    }
    // Two reads, not one: the switch may fall between them, the EndpointSlice controller following the
    // new selector before the slices were read (seen once in four runs under load). The selector read
    // again says whether the slices are the switched Service's.
    let now = jsonpath(
        k,
        &["get", "service", &service, "-n", "default"],
        "{.spec.selector.ray\\.io/cluster}",
    );
    if now != selected && clusters.contains(&now.as_str()) && on(&now) {
        return Ok(());
    }
    Err(format!(
        "{service} has no ready endpoint on {selected} (then {now}): {heads:?}"
    ))
}

/// [`serving`], asserted: at every poll of the upgrades.
fn assert_serving(k: &Kubectl, svc: &str, clusters: &[&str]) {
    if let Err(e) = serving(k, svc, clusters) {
        panic!("{e}");
    }
}

/// The gated upgrade from `active` to `pending`, admitted: polled until the service switched and the
/// old cluster is gone, serving at every poll; the usage back at the one cluster's 2 CPU.
fn upgrade_completes(k: &Kubectl, svc: &str, active: &str, pending: &str) -> usize {
    let mut polls = 0;
    wait_until(
        &format!("{svc}'s switch to {pending}"),
        Duration::from_secs(180),
        || {
            assert_serving(k, svc, &[active, pending]);
            polls += 1;
            (clusters_of(k, svc) == (pending.to_string(), String::new())).then_some(())
        },
    );
    wait_until("the old cluster deleted", Duration::from_secs(60), || {
        assert_serving(k, svc, &[pending]);
        polls += 1;
        cluster_gone(k, active).then_some(())
    });
    wait_until("the usage settled at 2 CPU", Duration::from_secs(60), || {
        (cpu_usage(k, "svc-cq") == 2000).then_some(())
    });
    assert_serving(k, svc, &[pending]);
    polls
}

/// The managers' Lease as polled: holder, acquireTime and renewTime at each poll, to measure how long
/// the managers were without a leader across the chart's rollout.
#[derive(Default)]
struct LeaseLog(Vec<(String, Option<jiff::Timestamp>, Option<jiff::Timestamp>)>);

impl LeaseLog {
    /// Polls the Lease; returns its holder ("" when none holds it, as after a release).
    fn poll(&mut self, k: &Kubectl) -> String {
        let Some(l) = k.json(&["get", "lease", "quotagate-leader", "-n", "quotagate-system"]) else {
            return String::new();
        };
        let time = |f: &str| l["spec"][f].as_str().and_then(|t| t.parse().ok());
        let holder = l["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        self.0
            .push((holder.clone(), time("acquireTime"), time("renewTime")));
        holder
    }

    fn holders(&self) -> BTreeSet<&str> {
        self.0.iter().map(|(h, ..)| h.as_str()).collect()
    }

    /// Each acquisition seen after another holder's (or a release's) renewal: the holder and the time
    /// from the latest renewal seen under someone else to its acquireTime. That is the time without a
    /// leader, or more by at most the time between two polls.
    fn handovers(&self) -> Vec<(String, Duration)> {
        let mut out: Vec<(String, Duration)> = Vec::new();
        for (holder, acquired, _) in &self.0 {
            let Some(acquired) = acquired.filter(|_| !holder.is_empty()) else {
                continue;
            };
            if out.iter().any(|(h, _)| h == holder) {
                continue;
            }
            let before = (self.0.iter())
                .filter(|(h, _, r)| h != holder && r.is_some_and(|r| r <= acquired))
                .filter_map(|(_, _, r)| *r)
                .max();
            if let Some(before) = before {
                let gap = acquired.duration_since(before).unsigned_abs();
                out.push((holder.clone(), gap));
            }
        }
        out
    }
}

/// The names of the manager's pods, terminating ones aside.
fn manager_pods(k: &Kubectl, ns: &str) -> BTreeSet<String> {
    let pods = k
        .json(&[
            "get",
            "pods",
            "-n",
            ns,
            "-l",
            "control-plane=quotagate-controller-manager",
        ])
        .unwrap_or_default();
    pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn helm_install_gated_upgrades_a_helm_upgrade_mid_upgrade_and_uninstall_on_a_real_control_plane() {
    let started = Instant::now();
    if !is_root() {
        return skip("the node agent's process runtime needs root (network namespaces)");
    }
    let Some(helm) = helm_path() else {
        return skip("helm not installed (scripts/install-helm.sh)");
    };
    let Some((cp, k)) = kubectl_on_a_control_plane("helm", started) else {
        return;
    };
    let helm = Helm {
        bin: helm,
        kubeconfig: cp.kubeconfig.clone(),
    };
    let chart = root().join("charts/quotagate");
    let chart = chart.to_str().unwrap();
    let ns = "quotagate-system";

    let dir = std::env::temp_dir().join(format!("quotagate-real-cp-helm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (agent, sim) = manager_and_ray_agents(&cp.kubeconfig, &dir);
    // The values a user sets: the managers on the process runtime's Node, the dashboards simulated.
    let values = dir.join("values.yaml");
    std::fs::write(
        &values,
        json!({"controllerManager": {
            "nodeSelector": {"kubernetes.io/hostname": PROCESS_NODE},
            "manager": {"extraArgs": ["--simulated-ray-dashboards"]}}})
        .to_string(),
    )
    .unwrap();
    let values = values.to_str().unwrap();

    // helm install --wait: the Deployment's pods run the manager and get Ready (they only do once they
    // serve the webhook with the certificate the leader wrote).
    let out = helm.ok_or_say_why(
        &k,
        ns,
        &[
            "install",
            "quotagate",
            chart,
            "--namespace",
            ns,
            "--create-namespace",
            "-f",
            values,
            "--wait",
            "--timeout",
            "5m",
        ],
    );
    println!("helm install after {:?}:\n{out}", started.elapsed());
    assert!(
        out.contains("STATUS: deployed") && out.contains("REVISION: 1"),
        "{out}"
    );
    // Every CRD of the chart's crds/ is installed, and no other of ours.
    let crds = k.ok(&["get", "crd", "-o", "name"], None);
    let shipped = std::fs::read_dir(std::path::Path::new(chart).join("crds"))
        .expect("the chart's crds/")
        .count();
    assert_eq!(
        crds.lines()
            .filter(|l| l.ends_with("kueue.x-k8s.io") || l.ends_with("ray.io"))
            .count(),
        shipped,
        "the chart's crds/: {crds}"
    );
    let deploy = k
        .json(&["get", "deployment", "quotagate-controller-manager", "-n", ns])
        .expect("the Deployment");
    assert_eq!(deploy["status"]["readyReplicas"], 2, "{deploy}");
    assert_eq!(
        deploy["metadata"]["annotations"]["meta.helm.sh/release-name"], "quotagate",
        "{deploy}"
    );
    let args = &deploy["spec"]["template"]["spec"]["containers"][0]["args"];
    println!("the manager's args: {args}");
    assert_eq!(
        args.as_array().and_then(|a| a.last()),
        Some(&json!("--simulated-ray-dashboards"))
    );
    println!("after install: {}", webhook_refuses(&k));

    // The invariant watcher, I8 (no serving gap) included, from here to the uninstall.
    let rt = watcher_runtime();
    let inv = watch_invariants(&rt, &cp.kubeconfig, true);

    // A RayService in a queue that holds it and not a second cluster: its upgrade waits at the gate
    // with no pod for the new cluster until the quota is raised, then completes.
    apply(&k, SERVICE_QUEUE);
    set_cpu_quota(&k, "svc-cq", "2");
    apply(&k, &rayservice("svc-a", "2.46.0"));
    wait_until(
        &format!("the RayService Ready; sim agent log:\n{}", sim.log()),
        Duration::from_secs(180),
        || ready(&k, "svc-a").then_some(()),
    );
    let first = clusters_of(&k, "svc-a").0;
    wait_until(
        "svc-a serving, the usage at 2 CPU",
        Duration::from_secs(60),
        || (cpu_usage(&k, "svc-cq") == 2000 && serving(&k, "svc-a", &[&first]).is_ok()).then_some(()),
    );
    println!("svc-a Ready on {first} after {:?}", started.elapsed());
    let pending = upgrade_gated(&k, "svc-a", "2.47.0");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(clusters_of(&k, "svc-a"), (first.clone(), pending.clone()));
    assert_eq!(ray_pods(&k).get(&pending), None, "the gated cluster has pods");
    assert_eq!(cpu_usage(&k, "svc-cq"), 2000);
    assert_serving(&k, "svc-a", &[&first]);
    println!(
        "gated upgrade 1: {pending} pending with 0 pods, usage 2 CPU of 2, after {:?}",
        started.elapsed()
    );
    set_cpu_quota(&k, "svc-cq", "4");
    let polls = upgrade_completes(&k, "svc-a", &first, &pending);
    println!(
        "gated upgrade 1 completed on {pending} after {:?}, serving at each of {polls} polls",
        started.elapsed()
    );

    // The second upgrade waits at the gate; helm upgrade of the chart runs in the middle of it.
    set_cpu_quota(&k, "svc-cq", "2");
    let active = pending;
    let pending = upgrade_gated(&k, "svc-a", "2.48.0");
    let old_pods = manager_pods(&k, ns);
    let mut lease = LeaseLog::default();
    let old_leader = lease.poll(&k);
    println!("gated upgrade 2: {pending} pending with 0 pods; managers {old_pods:?}, {old_leader} leads");
    let upgrade_args = [
        "upgrade",
        "quotagate",
        chart,
        "--namespace",
        ns,
        "-f",
        values,
        "--wait",
        "--timeout",
        "5m",
        "--set",
        "controllerManager.replicas=1",
        "--set",
        "controllerManager.manager.logLevel=quotagate=debug\\,info",
    ];
    let upgrade = {
        let helm = helm.clone();
        let args: Vec<String> = upgrade_args.iter().map(|a| a.to_string()).collect();
        std::thread::spawn(move || helm.run(&args.iter().map(String::as_str).collect::<Vec<_>>()))
    };
    let helm_started = Instant::now();
    let mut polls = 0;
    while !upgrade.is_finished() {
        assert_serving(&k, "svc-a", &[&active]);
        assert_eq!(clusters_of(&k, "svc-a"), (active.clone(), pending.clone()));
        assert_eq!(ray_pods(&k).get(&pending), None, "the gated cluster has pods");
        lease.poll(&k);
        polls += 1;
        assert!(
            helm_started.elapsed() < Duration::from_secs(330),
            "helm upgrade did not return; node agent log:\n{}\n{}",
            agent.0.log(),
            super::managers_report(&k, ns)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let out = said_why(&k, ns, &upgrade_args, upgrade.join().expect("helm upgrade"));
    println!(
        "helm upgrade after {:?} ({:?} mid-upgrade; svc-a serving at each of {polls} polls, Lease \
         holders seen {:?}):\n{out}",
        started.elapsed(),
        helm_started.elapsed(),
        lease.holders()
    );
    assert!(
        out.contains("STATUS: deployed") && out.contains("REVISION: 2"),
        "{out}"
    );
    let deploy = k.wait_for(
        &["get", "deployment", "quotagate-controller-manager", "-n", ns],
        Duration::from_secs(120),
        "the upgraded Deployment rolled out",
        |d| {
            d["status"]["updatedReplicas"] == 1
                && d["status"]["readyReplicas"] == 1
                && d["status"]["replicas"] == 1
        },
    );
    let env = &deploy["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        env.as_array().is_some_and(|e| e
            .iter()
            .any(|v| v["name"] == "RUST_LOG" && v["value"] == "quotagate=debug,info")),
        "{env}"
    );
    // The new pod leads (the old ones' Lease released or expired), and the gate holds under it.
    // Once in three full runs this took longer than 120 s; the panic says what it saw.
    let deadline = Instant::now() + Duration::from_secs(240);
    let new_leader = loop {
        assert_serving(&k, "svc-a", &[&active]);
        let now = manager_pods(&k, ns);
        let holder = lease.poll(&k);
        if now.len() == 1 && now.is_disjoint(&old_pods) && now.contains(pod_of(&holder)) {
            break holder;
        }
        assert!(
            Instant::now() < deadline,
            "a new pod holding the Lease: not within 240 s; manager pods {now:?} (before the upgrade \
             {old_pods:?}), Lease holder {holder:?}; node agent log:\n{}\n{}",
            agent.0.log(),
            super::managers_report(&k, ns)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    // Never without a leader for longer than a killed leader's lease takes to run out and a retry
    // (15 s + 2 s; a leader stopped by the rollout releases its lease, and the next takes it within
    // the 2 s retry), with room for the time between polls on a loaded machine. A round that stalls
    // (a request without an answer, the client's retries of 429/503/504) shows here as minutes.
    let handovers = lease.handovers();
    println!("Lease handovers (time without a leader): {handovers:?}");
    assert!(
        handovers.iter().any(|(h, _)| *h == new_leader),
        "the new leader's acquisition not seen: {handovers:?}"
    );
    for (holder, gap) in &handovers {
        assert!(
            *gap <= Duration::from_secs(30),
            "{holder} took the Lease {gap:?} after the previous leader's last renewal seen"
        );
    }
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(clusters_of(&k, "svc-a"), (active.clone(), pending.clone()));
    assert_eq!(ray_pods(&k).get(&pending), None, "the gated cluster has pods");
    assert_eq!(cpu_usage(&k, "svc-cq"), 2000);
    println!("after upgrade: {new_leader} leads; {}", webhook_refuses(&k));

    // The quota for the surge: the upgrade completes under the new pod.
    set_cpu_quota(&k, "svc-cq", "4");
    let polls = upgrade_completes(&k, "svc-a", &active, &pending);
    assert_eq!(
        jsonpath(
            &k,
            &["get", "raycluster", &pending, "-n", "default"],
            "{.spec.rayVersion}"
        ),
        "2.48.0"
    );
    assert_eq!(
        lease.poll(&k),
        new_leader,
        "the Lease stayed with the new pod's manager (a restart would take a new identity)"
    );
    println!(
        "gated upgrade 2 completed on {pending} under {new_leader} after {:?}, serving at each of \
         {polls} polls",
        started.elapsed()
    );
    let violations = inv.violations();
    assert!(
        violations.is_empty(),
        "invariant violations:\n{}",
        violations.join("\n")
    );
    println!("{} invariant checks (I8 included), 0 violations", inv.checks());
    assert!(inv.checks() > 0, "the invariant watcher ran no check");
    drop(inv);

    // helm uninstall: every templated object goes, the CRDs stay.
    let out = helm.ok(&[
        "uninstall",
        "quotagate",
        "--namespace",
        ns,
        "--wait",
        "--timeout",
        "2m",
    ]);
    println!("helm uninstall after {:?}:\n{out}", started.elapsed());
    assert!(out.contains("release \"quotagate\" uninstalled"), "{out}");
    for (kind, name, namespaced) in [
        ("deployment", "quotagate-controller-manager", true),
        ("service", "quotagate-webhook-service", true),
        ("configmap", "quotagate-manager-config", true),
        (
            "validatingwebhookconfiguration",
            "quotagate-validating-webhook-configuration",
            false,
        ),
        (
            "mutatingwebhookconfiguration",
            "quotagate-mutating-webhook-configuration",
            false,
        ),
        ("clusterrole", "quotagate-manager-role", false),
    ] {
        let mut args = vec!["get", kind, name, "-o", "name"];
        if namespaced {
            args.extend(["-n", ns]);
        }
        let (ok, out, err) = k.run(&args, None);
        assert!(!ok && err.contains("NotFound"), "{kind} {name} left: {out}{err}");
    }
    let crds = k.ok(&["get", "crd", "-o", "name"], None);
    assert!(crds.contains("rayservices.ray.io"), "{crds}");
    let releases = helm.ok(&["list", "--all-namespaces", "-q"]);
    assert!(releases.trim().is_empty(), "{releases}");

    for (who, log) in [("node agent", agent.0.log()), ("sim agent", sim.log())] {
        assert!(!log.contains("cannot start"), "the {who}: {log}");
        assert!(!log.contains("panicked"), "the {who} panicked:\n{log}");
    }
    drop(sim);
    drop(agent);
    drop(rt);
    let _ = std::fs::remove_dir_all(&dir);
    println!("helm test done in {:?}", started.elapsed());
}
