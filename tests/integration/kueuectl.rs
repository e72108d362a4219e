//! kueuectl's verbs as `quotagate` subcommands, the built binary run against `run_embedded` on
//! loopback through the kubeconfig it wrote, each effect checked with the real kubectl: create a
//! ClusterQueue and LocalQueue, list them and the workloads, stop and resume each kind.

use std::path::Path;

use super::kubectl::Running;

async fn quotagate(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let kubeconfig = dir.join("kubeconfig");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_quotagate"))
        .args(args)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env("HOME", dir)
        .kill_on_drop(true)
        .output()
        .await
        .expect("the quotagate binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn workload(name: &str, cpu: &str) -> String {
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  queueName: lq\n  podSets:\n  - name: main\n    count: 1\n    template:\n      spec:\n        containers:\n        - name: c\n          image: busybox\n          resources:\n            requests:\n              cpu: \"{cpu}\"\n"
    )
}

/// The cells of the table row whose first cell is `name` (columns are three or more spaces apart).
fn row(table: &str, name: &str) -> Vec<String> {
    table
        .lines()
        .map(|l| {
            l.split("   ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .find(|cells| cells.first().map(String::as_str) == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueuectl_verbs_work_against_the_embedded_cluster() {
    let Some(run) = Running::start_with("kueuectl", |_| {}).await else {
        return;
    };
    let dir = run.dir.clone();
    let q = |args: &'static [&'static str]| quotagate(&dir, args);
    let kubectl_ok = async |args: &[&str]| {
        let (ok, out) = run.kubectl(args).await;
        assert!(ok, "kubectl {args:?}: {out}");
        out
    };
    let rf = dir.join("rf.yaml");
    std::fs::write(&rf, "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: default-flavor\n  labels: {tier: a}\nspec:\n  nodeLabels: {pool: big}\n").unwrap();
    kubectl_ok(&["apply", "-f", rf.to_str().unwrap()]).await;

    let (ok, out, err) = q(&[
        "create",
        "clusterqueue",
        "cq",
        "--cohort",
        "co",
        "--nominal-quota",
        "default-flavor:cpu=4;memory=4Gi",
        "--preemption-within-cluster-queue",
        "LowerPriority",
    ])
    .await;
    assert!(ok, "{out}{err}");
    assert_eq!(out, "clusterqueue.kueue.x-k8s.io/cq created\n");
    let spec = kubectl_ok(&["get", "cq", "cq", "-o", "jsonpath={.spec.cohortName} {.spec.resourceGroups[0].flavors[0].resources[*].nominalQuota} {.spec.preemption.withinClusterQueue}"]).await;
    assert_eq!(spec, "co 4 4Gi LowerPriority");
    let (ok, out, err) = q(&[
        "create",
        "cq",
        "bad",
        "--nominal-quota",
        "default-flavor:cpu=four",
    ])
    .await;
    assert!(
        !ok && out.is_empty() && err.contains("invalid --nominal-quota") && err.contains("quantity of cpu"),
        "{out}{err}"
    );
    let (ok, out, err) = q(&["create", "localqueue", "stray", "-c", "nope"]).await;
    assert!(
        !ok && err.contains("not found"),
        "a LocalQueue for an unknown ClusterQueue is refused: {out}{err}"
    );
    let (ok, out, _) = q(&[
        "create",
        "lq",
        "stray",
        "-c",
        "nope",
        "--ignore-unknown-cq",
        "--dry-run",
        "server",
    ])
    .await;
    assert!(
        ok && out == "localqueue.kueue.x-k8s.io/stray created (server dry run)\n",
        "{out}"
    );
    let (ok, out, err) = q(&["create", "lq", "lq", "-c", "cq"]).await;
    assert!(ok, "{out}{err}");
    assert_eq!(out, "localqueue.kueue.x-k8s.io/lq created\n");
    assert_eq!(
        kubectl_ok(&["get", "lq", "-o", "name"]).await,
        "localqueue.kueue.x-k8s.io/lq\n",
        "the dry run stored nothing"
    );

    // 4 CPU: "first" (3) is admitted, "second" (3) waits.
    for (name, cpu) in [("first", "3"), ("second", "3")] {
        let p = dir.join(format!("{name}.yaml"));
        std::fs::write(&p, workload(name, cpu)).unwrap();
        kubectl_ok(&["apply", "-f", p.to_str().unwrap()]).await;
        if name == "first" {
            kubectl_ok(&[
                "wait",
                "--for=condition=Admitted",
                "workload/first",
                "--timeout=20s",
            ])
            .await;
        }
    }
    kubectl_ok(&[
        "wait",
        "--for=jsonpath={.status.pendingWorkloads}=1",
        "cq/cq",
        "--timeout=20s",
    ])
    .await;
    kubectl_ok(&[
        "wait",
        "--for=jsonpath={.status.admittedWorkloads}=1",
        "lq/lq",
        "--timeout=20s",
    ])
    .await;

    let (ok, cqs, _) = q(&["list", "clusterqueue"]).await;
    assert!(ok, "{cqs}");
    assert!(
        cqs.starts_with("NAME   COHORT   PENDING WORKLOADS   ADMITTED WORKLOADS   ACTIVE   AGE\n"),
        "{cqs}"
    );
    assert_eq!(row(&cqs, "cq")[..5], ["cq", "co", "1", "1", "true"]);
    let (_, lqs, _) = q(&["list", "lq", "-A"]).await;
    assert!(
        lqs.starts_with("NAMESPACE   NAME   CLUSTERQUEUE   PENDING WORKLOADS   ADMITTED WORKLOADS   AGE\n"),
        "{lqs}"
    );
    assert_eq!(row(&lqs, "default")[..5], ["default", "lq", "cq", "1", "1"]);
    let (_, rfs, _) = q(&["list", "rf", "-l", "tier=a"]).await;
    assert_eq!(row(&rfs, "default-flavor")[..2], ["default-flavor", "pool=big"]);
    let (_, wls, _) = q(&["list", "workload"]).await;
    assert!(wls.starts_with("NAME     JOB TYPE   JOB NAME   LOCALQUEUE   CLUSTERQUEUE   STATUS     POSITION IN QUEUE   EXEC TIME   AGE\n"), "{wls}");
    assert_eq!(row(&wls, "first")[..4], ["first", "lq", "cq", "ADMITTED"]);
    assert_eq!(row(&wls, "second")[..5], ["second", "lq", "cq", "PENDING", "0"]);
    let (_, pending, _) = q(&["list", "wl", "--status", "pending", "-o", "name"]).await;
    assert_eq!(pending, "workload.kueue.x-k8s.io/second\n");
    let (ok, _, err) = q(&["list", "wl", "--status", "running"]).await;
    assert!(!ok && err.contains("invalid --status"), "{err}");
    let (ok, out, err) = q(&["list", "wl", "-n", "empty"]).await;
    assert!(
        ok && out.is_empty() && err == "No resources found in empty namespace.\n",
        "{out}{err}"
    );

    // stop workload: spec.active=false, the admitted one is evicted; resume brings it back.
    let (ok, out, _) = q(&["stop", "workload", "first"]).await;
    assert!(ok && out == "workload.kueue.x-k8s.io/first stopped\n", "{out}");
    assert_eq!(
        kubectl_ok(&["get", "workload", "first", "-o", "jsonpath={.spec.active}"]).await,
        "false"
    );
    kubectl_ok(&[
        "wait",
        "--for=condition=Admitted",
        "workload/second",
        "--timeout=20s",
    ])
    .await;
    let (ok, out, _) = q(&["resume", "kwl", "first"]).await;
    assert!(ok && out == "workload.kueue.x-k8s.io/first resumed\n", "{out}");
    assert_eq!(
        kubectl_ok(&["get", "workload", "first", "-o", "jsonpath={.spec.active}"]).await,
        "true"
    );

    // stop clusterqueue: HoldAndDrain evicts what runs and the queue turns inactive.
    let (ok, out, _) = q(&["stop", "cq", "cq"]).await;
    assert!(ok && out == "clusterqueue.kueue.x-k8s.io/cq stopped\n", "{out}");
    assert_eq!(
        kubectl_ok(&["get", "cq", "cq", "-o", "jsonpath={.spec.stopPolicy}"]).await,
        "HoldAndDrain"
    );
    kubectl_ok(&["wait", "--for=condition=Active=False", "cq/cq", "--timeout=20s"]).await;
    kubectl_ok(&[
        "wait",
        "--for=condition=Admitted=False",
        "workload/second",
        "--timeout=20s",
    ])
    .await;
    let (_, inactive, _) = q(&["list", "cq", "--active", "false", "-o", "name"]).await;
    assert_eq!(inactive, "clusterqueue.kueue.x-k8s.io/cq\n");
    let (ok, _, _) = q(&["resume", "clusterqueue", "cq"]).await;
    assert!(ok);
    assert_eq!(
        kubectl_ok(&["get", "cq", "cq", "-o", "jsonpath={.spec.stopPolicy}"]).await,
        "None"
    );
    kubectl_ok(&["wait", "--for=condition=Active=True", "cq/cq", "--timeout=20s"]).await;

    // stop localqueue --keep-already-running: Hold.
    let (ok, out, _) = q(&["stop", "lq", "lq", "--keep-already-running"]).await;
    assert!(ok && out == "localqueue.kueue.x-k8s.io/lq stopped\n", "{out}");
    assert_eq!(
        kubectl_ok(&["get", "lq", "lq", "-o", "jsonpath={.spec.stopPolicy}"]).await,
        "Hold"
    );
    let (ok, _, _) = q(&["resume", "localqueue", "lq"]).await;
    assert!(ok);
    assert_eq!(
        kubectl_ok(&["get", "lq", "lq", "-o", "jsonpath={.spec.stopPolicy}"]).await,
        "None"
    );
    let (ok, _, err) = q(&["stop", "workload", "ghost"]).await;
    assert!(!ok && err.contains("not found"), "{err}");
    run.stop().await;
}
