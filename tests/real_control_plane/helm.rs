//! Issue 66 on real ground: the chart (`charts/quotagate`) with the real helm v3.22.0
//! (scripts/install-helm.sh) against the real control plane, the manager in-cluster as `install.rs`
//! runs it (`quotagate node-agent --runtime process` runs the Deployment's pods as this machine's
//! quotagate binary): `helm install --create-namespace --wait` (CRDs from `crds/`, then the
//! templates), the webhook serving through the Service (Kueue's refusal of a negative quota), `helm
//! upgrade --wait` of the chart with changed values (a new log level rolls the pods, one replica
//! fewer), the webhook still serving, and `helm uninstall --wait` removing every templated object and
//! keeping the CRDs (Helm never deletes `crds/`).
//!
//! Needs root and helm (env QUOTAGATE_HELM or the script's cache) besides the parent's tools; without
//! them the test prints one line and skips (fails with `QUOTAGATE_REQUIRE_TOOLS=1`).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::control_plane_support::helm_path;
use super::{Kubectl, kubectl_on_a_control_plane, root, skip, spawn_logged, wait_until};
use super::{Stopped, is_root};

struct Helm {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Helm {
    fn ok(&self, args: &[&str]) -> String {
        let out = Command::new(&self.bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .expect("helm runs");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "helm {args:?} failed:\n{stdout}{stderr}");
        stdout.into_owned()
    }
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

#[test]
fn helm_install_upgrade_and_uninstall_on_a_real_control_plane() {
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
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_quotagate"));
    cmd.args(["node-agent", "--kubeconfig"])
        .arg(&cp.kubeconfig)
        .args(["--runtime", "process"]);
    let agent = Stopped(spawn_logged(cmd, dir.join("node-agent.log")));

    // helm install --wait: the Deployment's pods run the manager and get Ready (they only do once they
    // serve the webhook with the certificate the leader wrote).
    let out = helm.ok(&[
        "install",
        "quotagate",
        chart,
        "--namespace",
        ns,
        "--create-namespace",
        "--wait",
        "--timeout",
        "5m",
    ]);
    println!("helm install after {:?}:\n{out}", started.elapsed());
    assert!(
        out.contains("STATUS: deployed") && out.contains("REVISION: 1"),
        "{out}"
    );
    let crds = k.ok(&["get", "crd", "-o", "name"], None);
    assert_eq!(
        crds.lines()
            .filter(|l| l.ends_with("kueue.x-k8s.io") || l.ends_with("ray.io"))
            .count(),
        12,
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
    println!("after install: {}", webhook_refuses(&k));

    // helm upgrade with changed values: the pods roll (a new RUST_LOG), one replica fewer; --wait
    // returns when the new pods are Ready, and the webhook goes on serving.
    let out = helm.ok(&[
        "upgrade",
        "quotagate",
        chart,
        "--namespace",
        ns,
        "--wait",
        "--timeout",
        "5m",
        "--set",
        "controllerManager.replicas=1",
        "--set",
        "controllerManager.manager.logLevel=quotagate=debug\\,info",
    ]);
    println!("helm upgrade after {:?}:\n{out}", started.elapsed());
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
    println!("after upgrade: {}", webhook_refuses(&k));

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

    let log = agent.0.log();
    assert!(!log.contains("cannot start"), "{log}");
    drop(agent);
    let _ = std::fs::remove_dir_all(&dir);
    println!("helm test done in {:?}", started.elapsed());
}
