//! Issue 58, the install path on real ground with the webhooks reached through the shipped Service:
//! `quotagate install-manifests` applied unchanged (webhook configurations included) with `kubectl
//! apply --server-side`; `quotagate node-agent --runtime process` runs the Deployment's pods as this
//! machine's `quotagate` binary in network namespaces of their own, with the in-cluster environment and
//! their ServiceAccount's token (so the manager has the shipped RBAC only); the real EndpointSlice
//! controller lists the pods' addresses and kube-apiserver (`--enable-aggregator-routing`, no
//! kube-proxy here) calls the webhooks there. The manager's own cert management writes the Secret and
//! both `caBundle`s. Then the validating webhook refuses a ClusterQueue with `nominalQuota: "-3"` with
//! Kueue's message, and the mutating webhook suspends a queue-labelled Job at create, so the real Job
//! controller makes no pod before admission.
//!
//! Needs root (network namespaces) besides the parent's tools; without it the test prints one line and
//! skips (fails with `QUOTAGATE_REQUIRE_TOOLS=1`).

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{
    Kubectl, Stopped, is_root, kubectl_on_a_control_plane, quotagate, skip, spawn_logged, wait_until,
};

#[test]
fn install_with_webhooks_through_the_service_and_the_manager_in_cluster() {
    let started = Instant::now();
    if !is_root() {
        return skip("the node agent's process runtime needs root (network namespaces)");
    }
    let Some((cp, k)) = kubectl_on_a_control_plane("install with webhooks", started) else {
        return;
    };

    // The install exactly as shipped, webhook configurations included.
    let install = quotagate(&["install-manifests"]);
    let applied = k.ok(&["apply", "--server-side", "-f", "-"], Some(&install));
    for kind in [
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/quotagate-mutating-webhook-configuration",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/quotagate-validating-webhook-configuration",
        "deployment.apps/quotagate-controller-manager",
    ] {
        assert!(
            applied.contains(&format!("{kind} serverside-applied")),
            "{applied}"
        );
    }

    // The node agent runs the Deployment's pods as processes.
    let dir = std::env::temp_dir().join(format!("quotagate-real-cp-install-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    cmd.args(["node-agent", "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .args(["--runtime", "process"]);
    let agent = Stopped(spawn_logged(cmd, dir.join("node-agent.log")));
    let agent = &agent.0;

    let ns = ["-n", "quotagate-system"];
    let deploy = k.manager_available();
    println!(
        "Deployment Available after {:?}: {} of {} replicas ready",
        started.elapsed(),
        deploy["status"]["readyReplicas"],
        deploy["spec"]["replicas"]
    );

    // The pods run with addresses of the agent's pod network, and the real EndpointSlice controller
    // lists exactly those behind the webhook Service.
    let pods = k
        .json(&[
            "get",
            "pods",
            ns[0],
            ns[1],
            "-l",
            "control-plane=quotagate-controller-manager",
        ])
        .expect("the manager's pods");
    let mut ips: Vec<String> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["status"]["phase"] == "Running")
        .filter_map(|p| p["status"]["podIP"].as_str().map(str::to_owned))
        .collect();
    ips.sort();
    assert!(!ips.is_empty(), "no Running manager pod: {pods}");
    assert!(ips.iter().all(|ip| ip.starts_with("10.244.")), "{ips:?}");
    let listed = wait_until("the webhook Service's endpoints", Duration::from_secs(60), || {
        let s = k.json(&[
            "get",
            "endpointslice",
            ns[0],
            ns[1],
            "-l",
            "kubernetes.io/service-name=quotagate-webhook-service",
        ])?;
        let mut got: Vec<String> = s["items"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|e| e["endpoints"].as_array().cloned().unwrap_or_default())
            .filter(|e| e["conditions"]["ready"] == true)
            .flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default())
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect();
        got.sort();
        (got == ips).then_some(got)
    });
    println!("webhook Service endpoints: {listed:?}");

    // The leader is one of the pods, by the name its Downward API gave it.
    let lease = k.wait_for(
        &["get", "lease", "quotagate-leader", ns[0], ns[1]],
        Duration::from_secs(60),
        "the leader Lease",
        |l| {
            l["spec"]["holderIdentity"]
                .as_str()
                .is_some_and(|h| !h.is_empty())
        },
    );
    // controller-runtime's identity: the pod's name, `_` and a UUID new at each start.
    let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or("").to_owned();
    let pod = holder.split_once('_').map_or("", |(p, _)| p);
    let names: Vec<&str> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    assert!(
        names.contains(&pod),
        "the holder {holder} is none of the pods {names:?}"
    );
    println!("leader: {holder}");

    // The manager's cert management: the Secret and both caBundles.
    k.wait_for(
        &["get", "secret", "quotagate-webhook-server-cert", ns[0], ns[1]],
        Duration::from_secs(60),
        "the webhook certificate Secret",
        |s| s["data"]["tls.crt"].is_string(),
    );
    for kind in ["mutatingwebhookconfiguration", "validatingwebhookconfiguration"] {
        let name = format!("quotagate-{}-webhook-configuration", &kind[..kind.len() - 20]);
        k.wait_for(
            &["get", kind, &name],
            Duration::from_secs(60),
            "the caBundle",
            |c| {
                c["webhooks"].as_array().is_some_and(|w| {
                    !w.is_empty()
                        && w.iter().all(|h| {
                            h["clientConfig"]["caBundle"]
                                .as_str()
                                .is_some_and(|b| b.len() > 100)
                        })
                })
            },
        );
    }

    negative_quota_refused(&k);

    // The mutating webhook: a queue-labelled Job, created without `suspend`, is stored suspended.
    let job = r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"queued","namespace":"default",
        "labels":{"kueue.x-k8s.io/queue-name":"user-queue"}},"spec":{"template":{"spec":{
        "restartPolicy":"Never","containers":[{"name":"c","image":"busybox","command":["sleep","1"]}]}}}}"#;
    let created = k.ok(&["create", "-f", "-", "-o", "json"], Some(job));
    let created: Value = serde_json::from_str(&created).expect("the created Job");
    assert_eq!(created["spec"]["suspend"], true, "{created}");
    println!("Job created with spec.suspend: {}", created["spec"]["suspend"]);
    // No queue `user-queue` exists, so it stays unadmitted: the real Job controller makes no pod.
    std::thread::sleep(Duration::from_secs(5));
    let pods = k.json(&["get", "pods", "-n", "default"]).expect("pods");
    assert_eq!(
        pods["items"].as_array().map_or(0, Vec::len),
        0,
        "pods before admission: {pods}"
    );
    let job = k
        .json(&["get", "job", "queued", "-n", "default"])
        .expect("the Job");
    assert_eq!(job["spec"]["suspend"], true, "{job}");
    assert!(job["status"]["active"].is_null(), "{job}");

    // The agent saw nothing it could not run.
    let log = agent.log();
    assert!(!log.contains("cannot start"), "{log}");
    println!("install test done in {:?}", started.elapsed());
}

/// The validating webhook, called through the Service, refuses a ClusterQueue with `nominalQuota:
/// "-3"` with Kueue's message (returned).
pub(super) fn negative_quota_refused(k: &Kubectl) -> String {
    // The validating webhook, called through the Service: Kueue's refusal. A freshly written caBundle
    // can take a moment to reach the API server's webhook clients, so a call failing to reach the
    // webhook is tried again; a refusal is final.
    let cq = r#"{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"negative"},
        "spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu"],
        "flavors":[{"name":"default-flavor","resources":[{"name":"cpu","nominalQuota":"-3"}]}]}]}}"#;
    let refusal = wait_until(
        "the ClusterQueue refused by the webhook",
        Duration::from_secs(60),
        || {
            let (ok, out, err) = k.run(&["create", "-f", "-"], Some(cq));
            assert!(!ok, "a ClusterQueue with nominalQuota -3 was stored: {out}");
            (!err.contains("failed calling webhook")).then_some(err)
        },
    );
    println!("ClusterQueue refused: {}", refusal.trim());
    assert!(
        refusal.contains("admission webhook \"vclusterqueue.kb.io\" denied the request"),
        "{refusal}"
    );
    // Kueue: `spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: "-3": must be
    // greater than or equal to 0` (pkg/webhooks/clusterqueue_webhook.go, validateResourceQuantity).
    assert!(
        refusal.contains(
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: \"-3\": \
             must be greater than or equal to 0"
        ),
        "{refusal}"
    );
    refusal
}
