//! Issue 35's "done when", as a user sees it with the real kubectl against `run_embedded` (its Job
//! controller and node agent on, the `pod` framework enabled): a queue-labelled Job and a
//! queue-labelled pod group wait with no pod running (the Job suspended, the pods gated) while the
//! quota is held, with Kueue's message; they are admitted with the flavor's node selector, run, finish
//! and give the quota back; a higher-priority Job then preempts a running Job and a running pod group:
//! the Job is suspended, the group's pods are stopped (deleted), and both Workloads are requeued. Skipped without
//! kubectl, as the other kubectl tests.

use super::kubectl::Running;

const SETUP: &str = r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: on-demand
spec:
  nodeLabels:
    instance: on-demand
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cq
spec:
  namespaceSelector: {}
  preemption:
    withinClusterQueue: LowerPriority
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: on-demand
      resources:
      - name: cpu
        nominalQuota: 2
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: default
  name: lq
spec:
  clusterQueue: cq
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: high
value: 1000
"#;

fn job(name: &str, cpu: &str, seconds: u32, priority: Option<&str>) -> String {
    let priority = priority
        .map(|p| format!("\n    kueue.x-k8s.io/priority-class: {p}"))
        .unwrap_or_default();
    format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: lq{priority}
spec:
  parallelism: 1
  completions: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        command: ["sleep", "{seconds}"]
        resources:
          requests:
            cpu: "{cpu}"
"#
    )
}

fn group(group: &str, pods: &[&str], cpu: &str, seconds: u32) -> String {
    pods.iter()
        .map(|name| {
            format!(
                r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: lq
    kueue.x-k8s.io/pod-group-name: {group}
  annotations:
    kueue.x-k8s.io/pod-group-total-count: "{total}"
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sleep", "{seconds}"]
    resources:
      requests:
        cpu: "{cpu}"
"#,
                total = pods.len()
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

async fn get(run: &Running, args: &[&str]) -> String {
    let (ok, out) = run.kubectl(args).await;
    assert!(ok, "kubectl {args:?}: {out}");
    out
}

async fn apply(run: &Running, file: &str, yaml: &str) -> String {
    let path = run.dir.join(file);
    std::fs::write(&path, yaml).unwrap();
    get(run, &["apply", "-f", path.to_str().unwrap()]).await
}

/// `name=value;` per Workload, `value` from the jsonpath `expr` over each.
async fn per_workload(run: &Running, expr: &str) -> String {
    get(
        run,
        &[
            "get",
            "workloads",
            "-o",
            &format!("jsonpath={{range .items[*]}}{{.metadata.name}}={expr};{{end}}"),
        ],
    )
    .await
}

fn of<'a>(listing: &'a str, prefix: &str) -> Option<&'a str> {
    listing
        .split(';')
        .find(|w| w.starts_with(prefix))
        .and_then(|w| w.split_once('='))
        .map(|(_, v)| v)
}

/// Polls `per_workload(expr)` until `prefix`'s value satisfies `ok`.
async fn wait_workload(
    run: &Running,
    expr: &str,
    prefix: &str,
    what: &str,
    ok: impl Fn(&str) -> bool,
) -> String {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let listing = per_workload(run, expr).await;
        if of(&listing, prefix).is_some_and(&ok) {
            return listing;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{prefix}: {what}; last: {listing}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

const QUOTA: &str = r#"{.status.conditions[?(@.type=="QuotaReserved")].status}"#;

/// Kueue: test/integration/singlecluster/controller/jobs/pod/pod_controller_test.go, "Pod controller
/// interacting with scheduler" / "Should schedule pod groups as they fit in their ClusterQueue", and
/// .../jobs/job/job_controller_test.go "Should schedule jobs as they fit in their ClusterQueue"; the
/// preemption part after test/integration/singlecluster/scheduler/preemption_test.go "Should preempt
/// Workloads with lower priority when there is not enough quota", with a Job and a pod group as the
/// victims, and pod_controller_test.go "Should keep the running pod group with the queue name if
/// workload is evicted" (the group's pods deleted, its Workload waiting for replacement pods).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_a_job_and_a_pod_group_wait_run_finish_and_get_preempted() {
    let Some(run) = Running::start_with("kubectl-pods", |o| o.manager.frameworks.pod = true).await else {
        return;
    };
    apply(&run, "setup.yaml", SETUP).await;

    // A Job holds both CPUs; the group that comes next waits gated, with no pod running.
    apply(&run, "hold.yaml", &job("hold", "2", 4, None)).await;
    get(
        &run,
        &[
            "wait",
            "--for=jsonpath={.spec.suspend}=false",
            "job/hold",
            "--timeout=30s",
        ],
    )
    .await;
    let selector = get(
        &run,
        &[
            "get",
            "job",
            "hold",
            "-o",
            "jsonpath={.spec.template.spec.nodeSelector.instance}",
        ],
    )
    .await;
    assert_eq!(
        selector, "on-demand",
        "the Job runs with the flavor's node selector"
    );
    let out = apply(&run, "g.yaml", &group("g", &["g-a", "g-b"], "1", 1)).await;
    assert!(
        out.contains("pod/g-a created") && out.contains("pod/g-b created"),
        "{out}"
    );
    let message = r#"{.status.conditions[?(@.type=="QuotaReserved")].message}"#;
    let listing = wait_workload(&run, message, "g=", "pending for quota", |m| {
        m.contains("insufficient")
    })
    .await;
    let m = of(&listing, "g=").unwrap_or_default();
    assert!(
        m.starts_with("couldn't assign flavors to pod set ")
            && m.ends_with(": insufficient unused quota for cpu in flavor on-demand, 2 more needed"),
        "Kueue's message: {m}"
    );
    let gates = get(&run, &["get", "pods", "-l", "kueue.x-k8s.io/pod-group-name=g", "-o", "jsonpath={range .items[*]}{.metadata.name}:{.status.phase}:{.spec.schedulingGates[*].name}:{.status.conditions[?(@.type==\"PodScheduled\")].reason};{end}"]).await;
    assert_eq!(
        gates,
        "g-a:Pending:kueue.x-k8s.io/admission:SchedulingGated;g-b:Pending:kueue.x-k8s.io/admission:SchedulingGated;",
        "gated, none running"
    );

    // The Job completes; the group is ungated with the flavor's node selector, runs and finishes.
    get(
        &run,
        &["wait", "--for=condition=Complete", "job/hold", "--timeout=60s"],
    )
    .await;
    for pod in ["g-a", "g-b"] {
        get(
            &run,
            &[
                "wait",
                "--for=jsonpath={.status.phase}=Succeeded",
                &format!("pod/{pod}"),
                "--timeout=60s",
            ],
        )
        .await;
        let ns = get(
            &run,
            &[
                "get",
                "pod",
                pod,
                "-o",
                "jsonpath={.spec.nodeSelector.instance}|{.spec.schedulingGates}",
            ],
        )
        .await;
        assert_eq!(ns, "on-demand|", "{pod}: ungated with the flavor's node selector");
    }
    let finished = r#"{.status.conditions[?(@.type=="Finished")].message}"#;
    wait_workload(&run, finished, "g=", "finished", |m| m == "Pods succeeded: 2/2.").await;
    get(
        &run,
        &[
            "wait",
            "--for=jsonpath={.status.admittedWorkloads}=0",
            "clusterqueue/cq",
            "--timeout=30s",
        ],
    )
    .await;

    // A low Job and a low group share the two CPUs; a high Job preempts both.
    apply(&run, "low.yaml", &job("low", "1", 3600, None)).await;
    apply(&run, "lg.yaml", &group("lg", &["lg-a", "lg-b"], "500m", 3600)).await;
    get(
        &run,
        &[
            "wait",
            "--for=jsonpath={.status.active}=1",
            "job/low",
            "--timeout=30s",
        ],
    )
    .await;
    for pod in ["lg-a", "lg-b"] {
        get(
            &run,
            &[
                "wait",
                "--for=jsonpath={.status.phase}=Running",
                &format!("pod/{pod}"),
                "--timeout=30s",
            ],
        )
        .await;
    }
    apply(&run, "high.yaml", &job("high", "2", 3600, Some("high"))).await;
    get(
        &run,
        &[
            "wait",
            "--for=jsonpath={.status.active}=1",
            "job/high",
            "--timeout=60s",
        ],
    )
    .await;
    let low = get(&run, &["get", "job", "low", "-o", "jsonpath={.spec.suspend}"]).await;
    assert_eq!(low, "true", "the preempted Job is suspended");
    // The group's pods are stopped; Kueue keeps them, terminating, until replacements exist.
    for pod in ["lg-a", "lg-b"] {
        get(
            &run,
            &[
                "wait",
                "--for=jsonpath={.metadata.deletionTimestamp}",
                &format!("pod/{pod}"),
                "--timeout=30s",
            ],
        )
        .await;
    }
    let evicted = r#"{.status.conditions[?(@.type=="Evicted")].reason}"#;
    let listing = wait_workload(&run, evicted, "job-low-", "evicted", |r| r == "Preempted").await;
    assert_eq!(of(&listing, "lg="), Some("Preempted"), "{listing}");
    let requeued = per_workload(&run, QUOTA).await;
    assert_eq!(
        (of(&requeued, "job-low-"), of(&requeued, "lg=")),
        (Some("False"), Some("False")),
        "both requeued, waiting: {requeued}"
    );
    let replacement = per_workload(
        &run,
        r#"{.status.conditions[?(@.type=="WaitingForReplacementPods")].status}"#,
    )
    .await;
    assert_eq!(
        of(&replacement, "lg="),
        Some("True"),
        "the group waits for replacement pods: {replacement}"
    );
    let pods = get(
        &run,
        &[
            "get",
            "pods",
            "-l",
            "batch.kubernetes.io/job-name=low",
            "-o",
            "jsonpath={range .items[*]}{.status.phase};{end}",
        ],
    )
    .await;
    assert!(
        !pods.contains("Running") && !pods.contains("Pending"),
        "no pod of the suspended Job runs: {pods}"
    );
    run.stop().await;
}
