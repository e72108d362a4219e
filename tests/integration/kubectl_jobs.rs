//! Issue 35: Kueue's batch/v1 Job integration through the real kubectl against `run_embedded` (its
//! Job controller and node agent on): a queue-labelled Job applied while the quota is held waits
//! suspended, its Workload pending, then runs and completes once the first Job ends; `kubectl get
//! workloads` lists both Jobs' Workloads. Skipped without kubectl, as the other kubectl tests.

use super::kubectl::Running;

fn job(name: &str, cpu: &str, seconds: u32) -> String {
    format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
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
            memory: 200Mi
"#
    )
}

async fn get(run: &Running, args: &[&str]) -> String {
    let (ok, out) = run.kubectl(args).await;
    assert!(ok, "kubectl {args:?}: {out}");
    out
}

/// Kueue: test/integration/singlecluster/controller/jobs/job/job_controller_test.go, "Job controller
/// interacting with scheduler" / "Should schedule jobs as they fit in their ClusterQueue" (a Job that
/// does not fit stays suspended and starts when the first one finishes), observed as a user would:
/// kubectl apply, get and wait, on Kueue's single-ClusterQueue setup (9 CPUs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_a_job_wait_suspended_then_complete() {
    let Some(run) = Running::start_with("kubectl-jobs", |_| {}).await else {
        return;
    };
    let setup = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/manifests/kueue/admin.single-clusterqueue-setup.yaml");
    get(&run, &["apply", "-f", setup]).await;
    for (name, cpu, secs) in [("first", "9", 3), ("second", "1", 1)] {
        let path = run.dir.join(format!("{name}.yaml"));
        std::fs::write(&path, job(name, cpu, secs)).unwrap();
        let out = get(&run, &["apply", "-f", path.to_str().unwrap()]).await;
        assert!(out.contains(&format!("job.batch/{name} created")), "{out}");
        if name == "first" {
            // The first holds every CPU before the second arrives.
            get(&run, &["wait", "--for=jsonpath={.spec.suspend}=false", "job/first", "--timeout=30s"]).await;
        }
    }
    let suspended = get(&run, &["get", "job", "second", "-o", "jsonpath={.spec.suspend}"]).await;
    assert_eq!(suspended, "true", "the second Job waits suspended while the first holds the quota");
    let pods = get(&run, &["get", "pods", "-l", "batch.kubernetes.io/job-name=second", "-o", "jsonpath={.items[*].metadata.name}"]).await;
    assert_eq!(pods, "", "no pod while it waits");
    let workloads = get(&run, &["get", "workloads"]).await;
    assert!(workloads.contains("job-first-") && workloads.contains("job-second-") && workloads.contains("user-queue"), "{workloads}");
    let waiting = get(&run, &["get", "workloads", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"QuotaReserved\")].status};{end}"]).await;
    assert!(waiting.split(';').any(|w| w.starts_with("job-second-") && w.ends_with("=False")), "{waiting}");

    get(&run, &["wait", "--for=condition=Complete", "job/first", "--timeout=60s"]).await;
    get(&run, &["wait", "--for=condition=Complete", "job/second", "--timeout=60s"]).await;
    let second = get(&run, &["get", "job", "second", "-o", "jsonpath={.spec.suspend} {.status.succeeded}"]).await;
    assert_eq!(second, "false 1");
    let listed = get(&run, &["get", "jobs"]).await;
    assert!(listed.contains("first") && listed.contains("second"), "{listed}");
    let finished = get(&run, &["get", "workloads", "-o", "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Finished\")].reason};{end}"]).await;
    assert_eq!(finished, "Succeeded;Succeeded;", "both Workloads finished");
    run.stop().await;
}
