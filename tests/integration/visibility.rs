//! Kueue's visibility API and `quotagate explain`'s group through the real kubectl, against
//! `run_embedded` on loopback: `kubectl get --raw .../pendingworkloads` answers a
//! PendingWorkloadsSummary as Kueue's does (kubernetes-sigs/kueue:apis/visibility/v1beta2/types.go;
//! expectations from Kueue's test/e2e visibility tests: positions by priority, per LocalQueue too).

use serde_json::Value;

use super::kubectl::Running;

fn workload(name: &str, priority: i32) -> String {
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  queueName: user-queue\n  priority: {priority}\n  podSets:\n  - name: main\n    count: 1\n    template:\n      spec:\n        containers:\n        - name: c\n          image: busybox\n          resources:\n            requests:\n              cpu: \"5\"\n"
    )
}

async fn get(run: &Running, path: &str) -> Value {
    let (ok, out) = run.kubectl(&["get", "--raw", path]).await;
    assert!(ok, "{path}: {out}");
    serde_json::from_str::<Value>(&out).unwrap_or_else(|e| panic!("{path}: {e}: {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_pending_workloads_and_explanations() {
    let Some(run) = Running::start_with("visibility", |_| {}).await else {
        return;
    };
    let dir = run.dir.clone();
    let setup = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/manifests/kueue/single-clusterqueue.yaml"
    );
    let (ok, out) = run.kubectl(&["apply", "-f", setup]).await;
    assert!(ok, "{out}");
    let apply = |name: &str, priority: i32| {
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(&path, workload(name, priority)).unwrap();
        path
    };
    // 9 CPU: "running" (5) is admitted; "low" and "high" (5 each) wait, high first.
    let p = apply("running", 0);
    assert!(run.kubectl(&["apply", "-f", p.to_str().unwrap()]).await.0);
    let (ok, out) = run
        .kubectl(&[
            "wait",
            "--for=condition=QuotaReserved",
            "workload/running",
            "--timeout=20s",
        ])
        .await;
    assert!(ok, "{out}");
    for (name, prio) in [("low", 1), ("high", 10)] {
        let p = apply(name, prio);
        assert!(run.kubectl(&["apply", "-f", p.to_str().unwrap()]).await.0);
    }
    for name in ["low", "high"] {
        let (ok, out) = run
            .kubectl(&[
                "wait",
                "--for=jsonpath={.status.conditions[?(@.type==\"QuotaReserved\")].reason}=WaitingForQuota",
                &format!("workload/{name}"),
                "--timeout=20s",
            ])
            .await;
        assert!(ok, "{out}");
    }
    let cq = get(
        &run,
        "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue/pendingworkloads",
    )
    .await;
    assert_eq!(cq["kind"], "PendingWorkloadsSummary");
    assert_eq!(cq["apiVersion"], "visibility.kueue.x-k8s.io/v1beta2");
    let items = cq["items"].as_array().unwrap();
    let rows: Vec<(&str, i64, i64, i64, &str)> = items
        .iter()
        .map(|i| {
            (
                i["metadata"]["name"].as_str().unwrap(),
                i["priority"].as_i64().unwrap(),
                i["positionInClusterQueue"].as_i64().unwrap(),
                i["positionInLocalQueue"].as_i64().unwrap(),
                i["localQueueName"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![("high", 10, 0, 0, "user-queue"), ("low", 1, 1, 1, "user-queue")]
    );
    assert_eq!(items[0]["metadata"]["namespace"], "default");
    let lq = get(&run, "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/default/localqueues/user-queue/pendingworkloads?limit=1&offset=1").await;
    let names: Vec<&str> = lq["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["low"], "offset 1, limit 1");

    let e = get(
        &run,
        "/apis/explain.quotagate.io/v1alpha1/namespaces/default/workloads/high",
    )
    .await;
    assert_eq!(e["kind"], "WorkloadExplanation");
    assert_eq!(e["reason"], "WaitingForQuota");
    assert_eq!(e["holders"][0]["workload"], "default/running");
    let (ok, out) = run
        .kubectl(&[
            "get",
            "--raw",
            "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue/pendingworkloads?limit=x",
        ])
        .await;
    assert!(!ok && out.contains("BadRequest"), "{out}");
    run.stop().await;
}
