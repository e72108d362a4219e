//! Issue 44's stall, replayed through the real kubectl on `run_embedded`: a RayService in the shape
//! of KubeRay's incremental-upgrade sample (`ray-service.incremental-istio.yaml`) under a queue (step and surge 25%, the in-tree autoscaler
//! on), the quota cut below one step, the upgrade started, every hostile edit the report made while
//! it waited, then the quota raised to what the upgrade needs. Before the fix the growth of the
//! pending cluster was never given a workload slice in 2 of 9 runs and the upgrade stalled for good
//! with quota free. Here it must complete, and well inside the job controller's 30 s resync, so a
//! lost event cannot hide behind the safety net.

use std::time::Duration;

use quotagate::wiring::ray::Dashboards;

use super::kubectl::Running;

const RS: &str = "rayservice-incremental-upgrade";

/// One flavor, ClusterQueue `cq` of `cpu` and 10 GiB, LocalQueue `lq` in `default`.
fn kueue_setup(cpu: &str) -> String {
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: default-flavor\n---\n\
         apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: cq\nspec:\n  namespaceSelector: {{}}\n  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors:\n    - name: default-flavor\n      resources:\n      - name: cpu\n        nominalQuota: \"{cpu}\"\n      - name: memory\n        nominalQuota: 10Gi\n---\n\
         apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: lq\n  namespace: default\nspec:\n  clusterQueue: cq\n"
    )
}

struct Stall {
    run: Running,
}

impl Stall {
    async fn ok(&self, args: &[&str]) -> String {
        let (ok, out) = self.run.kubectl(args).await;
        assert!(ok, "kubectl {args:?}: {out}");
        out
    }

    /// A hostile edit the server must refuse, naming `why`.
    async fn refused(&self, args: &[&str], why: &str) {
        let (ok, out) = self.run.kubectl(args).await;
        assert!(
            !ok && out.contains(why),
            "kubectl {args:?} must be refused naming {why:?}: {out}"
        );
    }

    /// `kubectl get` of one object, or of all of a kind when `name` is empty, through a jsonpath.
    async fn get(&self, what: &str, name: &str, path: &str) -> String {
        let jsonpath = format!("jsonpath={path}");
        let mut args = vec!["get", what];
        if !name.is_empty() {
            args.push(name);
        }
        args.extend(["-o", jsonpath.as_str()]);
        self.ok(&args).await
    }

    async fn apply(&self, file: &str, yaml: &str) {
        let path = self.run.dir.join(file);
        std::fs::write(&path, yaml).unwrap();
        self.ok(&["apply", "-f", path.to_str().unwrap()]).await;
    }

    async fn set_quota(&self, cpu: &str) {
        let patch = format!(
            r#"{{"spec":{{"resourceGroups":[{{"coveredResources":["cpu","memory"],"flavors":[{{"name":"default-flavor","resources":[{{"name":"cpu","nominalQuota":"{cpu}"}},{{"name":"memory","nominalQuota":"10Gi"}}]}}]}}]}}}}"#
        );
        self.ok(&["patch", "clusterqueue", "cq", "--type", "merge", "-p", &patch])
            .await;
    }

    /// The RayService's pending cluster, once it has one.
    async fn pending(&self) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let p = self
                .get("rayservice", RS, "{.status.pendingServiceStatus.rayClusterName}")
                .await;
            if !p.is_empty() {
                return p;
            }
            assert!(tokio::time::Instant::now() < deadline, "no pending cluster");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The pending cluster's Workload slice that is not admitted, if any.
    async fn waiting_slice(&self, rs_uid: &str) -> Option<String> {
        let out = self
            .get(
                "workloads",
                "",
                r#"{range .items[*]}{.metadata.name} {.metadata.ownerReferences[0].uid} {.status.conditions[?(@.type=="QuotaReserved")].status}{"\n"}{end}"#,
            )
            .await;
        out.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.get(1) == Some(&rs_uid) && f.get(2) != Some(&"True"))
            .map(|f| f[0].to_string())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_edits_while_an_upgrade_waits_do_not_stall_it_once_quota_is_free() {
    let Some(run) = Running::start_with("stall", |o| {
        o.manager.ray = Some(Dashboards::simulated(
            Duration::from_millis(100),
            Duration::from_millis(100),
        ));
    })
    .await
    else {
        return;
    };
    let s = Stall { run };
    s.apply("kueue.yaml", &kueue_setup("4")).await;
    let sample = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/manifests/kuberay/ray-service.incremental-istio.yaml"
    ))
    .unwrap();
    let sample = sample
        .replace(
            "  name: rayservice-incremental-upgrade\n",
            "  name: rayservice-incremental-upgrade\n  labels:\n    kueue.x-k8s.io/queue-name: lq\n",
        )
        .replace("stepSizePercent: 10", "stepSizePercent: 25")
        .replace("intervalSeconds: 30", "intervalSeconds: 1")
        .replace("maxSurgePercent: 10", "maxSurgePercent: 25");
    assert!(
        sample.contains("queue-name: lq") && sample.contains("intervalSeconds: 1"),
        "the sample changed"
    );
    s.apply("sample.yaml", &sample).await;
    s.ok(&[
        "wait",
        "--for=condition=Ready",
        &format!("rayservice/{RS}"),
        "--timeout=90s",
    ])
    .await;
    let old = s
        .get("rayservice", RS, "{.status.activeServiceStatus.rayClusterName}")
        .await;
    let rs_uid = s.get("rayservice", RS, "{.metadata.uid}").await;
    // Steady: the head (1.5 CPU with the autoscaler's sidecar) and the one worker Serve needs.
    s.ok(&[
        "wait",
        "--for=jsonpath={.status.flavorsReservation[0].resources[0].total}=2",
        "clusterqueue/cq",
        "--timeout=30s",
    ])
    .await;

    // Below one step (a new head is 1.5 CPU): the upgrade starts and its new cluster waits for quota.
    s.set_quota("3").await;
    s.ok(&[
        "patch",
        "rayservice",
        RS,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"rayClusterConfig":{"rayVersion":"2.52.0"}}}"#,
    ])
    .await;
    let p = s.pending().await;

    // The hostile edits, each refused where the gate refuses it. (A gated child of a service is held
    // by the gate annotation, not by `suspend`, so a `suspend: false` is a no-op the server takes.)
    let _ = s
        .run
        .kubectl(&[
            "patch",
            "raycluster",
            &p,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"suspend":false}}"#,
        ])
        .await;
    s.refused(
        &["label", "raycluster", &p, "kueue.x-k8s.io/queue-name-"],
        "kueue.x-k8s.io/queue-name",
    )
    .await;
    s.refused(
        &["label", "raycluster", &p, "ray.io/originated-from-crd-"],
        "ray.io/originated-from",
    )
    .await;
    s.refused(
        &[
            "patch",
            "raycluster",
            &p,
            "--type",
            "json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/ownerReferences"}]"#,
        ],
        "ownerReferences",
    )
    .await;
    s.refused(
        &[
            "patch",
            "raycluster",
            &p,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"managedBy":"someone-else"}}"#,
        ],
        "managedBy",
    )
    .await;
    // The gate annotation removed and the cluster resumed: whatever the server keeps, no pod may run
    // unadmitted (the invariant tests hold that); what matters here is what follows.
    let _ = s
        .run
        .kubectl(&["annotate", "raycluster", &p, "quotagate.io/admission-gated-"])
        .await;
    let _ = s
        .run
        .kubectl(&[
            "patch",
            "raycluster",
            &p,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"suspend":false}}"#,
        ])
        .await;
    // A forged QuotaGated=False in its status.
    let forged = r#"{"status":{"conditions":[{"type":"QuotaGated","status":"False","reason":"Forged","message":"forged","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#;
    let _ = s
        .run
        .kubectl(&[
            "patch",
            "raycluster",
            &p,
            "--subresource=status",
            "--type",
            "merge",
            "-p",
            forged,
        ])
        .await;
    // Its waiting slice deleted.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let slice = loop {
        if let Some(slice) = s.waiting_slice(&rs_uid).await {
            break slice;
        }
        if tokio::time::Instant::now() > deadline {
            let (_, all) = s.run.kubectl(&["get", "workloads", "-o", "yaml"]).await;
            panic!("no waiting slice for the upgrade (service uid {rs_uid}):\n{all}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Not waiting for it to be gone: the job controller may make it again under the same name.
    s.ok(&["delete", "workload", &slice, "--wait=false"]).await;
    // The active cluster's worker group grown to 6 and back to 4.
    for n in [6, 4] {
        let patch = format!(r#"[{{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":{n}}}]"#);
        let _ = s
            .run
            .kubectl(&["patch", "raycluster", &old, "--type", "json", "-p", &patch])
            .await;
    }

    // Quota for the running service plus the new head and one new worker, as the report had it.
    s.set_quota("4").await;
    let raised = tokio::time::Instant::now();
    let deadline = raised + Duration::from_secs(25);
    loop {
        let active = s
            .get("rayservice", RS, "{.status.activeServiceStatus.rayClusterName}")
            .await;
        let pending = s
            .get("rayservice", RS, "{.status.pendingServiceStatus.rayClusterName}")
            .await;
        if active != old && pending.is_empty() {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            let (_, explained) = s.run.kubectl(&["get", "workloads", "-o", "wide"]).await;
            let (_, rs) = s
                .run
                .kubectl(&["get", "rayservice", RS, "-o", "jsonpath={.status}"])
                .await;
            let (_, rcs) = s.run.kubectl(&["get", "rayclusters", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.suspend} {.spec.workerGroupSpecs[0].replicas} {.status.conditions}{\"\\n\"}{end}"]).await;
            panic!(
                "the upgrade stalled 25 s after the quota was raised (active {active}, pending {pending}):\n{explained}\n{rs}\n{rcs}"
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!("promoted {:?} after the quota was raised", raised.elapsed());
    s.run.stop().await;
}
