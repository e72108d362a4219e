//! Issue 36's first "done when", observed as a user would through the real kubectl against
//! `run_embedded` (the Ray operator with simulated dashboards, the batch Job controller and node
//! agent on): a queue-labelled RayJob in KubeRay's default mode (K8sJobMode) waits suspended with no
//! pod while over quota, is admitted once the quota is raised, its cluster starts, its Ray job runs to
//! SUCCEEDED, its cluster is deleted `ttlSecondsAfterFinished` after the end (not before), and the
//! quota is given back; a failing entrypoint is retried `backoffLimit` times and ends Failed.
//! `quotagate list pods --for rayjob/NAME` lists the running job's pods. Skipped without kubectl.

use std::time::Duration;

use super::kubectl::Running;

const QUOTA: &str = r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: default-flavor
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cq
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: "2"
      - name: memory
        nominalQuota: 48Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: user-queue
  namespace: default
spec:
  clusterQueue: cq
"#;

/// A RayJob as KubeRay's samples write it (no `submissionMode`: K8sJobMode), head and one worker of
/// 1 CPU each, plus KubeRay's default submitter (500m): 2.5 CPUs in all.
fn ray_job(name: &str, entrypoint: &str, backoff_limit: u32, ttl: u32) -> String {
    let pod = |indent: &str, container: &str| {
        let lines = [
            "template:".to_string(),
            "  spec:".into(),
            "    containers:".into(),
            format!("    - name: {container}"),
            "      image: rayproject/ray:2.46.0".into(),
            "      resources:".into(),
            "        requests:".into(),
            "          cpu: \"1\"".into(),
            "          memory: 1Gi".into(),
        ];
        lines.iter().map(|l| format!("{indent}{l}\n")).collect::<String>()
    };
    format!(
        "apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: {name}
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  entrypoint: {entrypoint}
  backoffLimit: {backoff_limit}
  shutdownAfterJobFinishes: true
  ttlSecondsAfterFinished: {ttl}
  rayClusterSpec:
    rayVersion: \"2.46.0\"
    headGroupSpec:
      rayStartParams: {{}}
{}    workerGroupSpecs:
    - groupName: workers
      replicas: 1
      minReplicas: 1
      maxReplicas: 1
      rayStartParams: {{}}
{}",
        pod("      ", "ray-head"),
        pod("      ", "ray-worker"),
    )
}

async fn get(run: &Running, args: &[&str]) -> String {
    let (ok, out) = run.kubectl(args).await;
    assert!(ok, "kubectl {args:?}: {out}");
    out
}

/// `quotagate ARGS --kubeconfig` (the built binary) against the running cluster.
async fn quotagate(run: &Running, args: &[&str]) -> (bool, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_quotagate"))
        .args(args)
        .arg("--kubeconfig")
        .arg(run.dir.join("kubeconfig"))
        .env("HOME", &run.dir)
        .kill_on_drop(true)
        .output()
        .await
        .expect("the quotagate binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The name of the Workload whose owner is RayJob `job`.
async fn workload_of(run: &Running, job: &str) -> String {
    for _ in 0..100 {
        let owners = get(
            run,
            &[
                "get",
                "workloads",
                "-o",
                "jsonpath={range .items[*]}{.metadata.ownerReferences[0].name}={.metadata.name};{end}",
            ],
        )
        .await;
        if let Some(name) = owners.split(';').find_map(|p| p.strip_prefix(&format!("{job}="))) {
            return name.to_string();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no Workload for RayJob {job}");
}

/// Kueue: test/integration/singlecluster/controller/jobs/rayjob/rayjob_controller_test.go, "Job
/// controller interacting with scheduler" / "Should schedule jobs as they fit in their ClusterQueue"
/// (suspended and pending while it does not fit, unsuspended once it does, the Workload finished
/// with the job); KubeRay: ray-operator/controllers/ray/rayjob_controller_test.go "RayJob in
/// K8sJobMode" (Initializing -> Running -> Complete, SUCCEEDED), "ttlSecondsAfterFinished" (the
/// cluster is kept until `endTime + ttl`, then deleted) and the backoffLimit retries
/// (`status.failed` counts every attempt).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_a_rayjob_wait_run_succeed_and_its_cluster_go_after_the_ttl() {
    // Boxed: the body's future is too large for the test thread's stack.
    Box::pin(async move {
        let Some(run) = Running::start_with_simulated_ray("kubectl-rayjobs").await else {
            return;
        };
        let write = |name: &str, text: &str| {
            let path = run.dir.join(name);
            std::fs::write(&path, text).unwrap();
            path.to_string_lossy().into_owned()
        };
        get(&run, &["apply", "-f", &write("quota.yaml", QUOTA)]).await;
        let out = get(&run, &["apply", "-f", &write("sleeper.yaml", &ray_job("sleeper", "sleep 6", 0, 4))]).await;
        assert!(out.contains("rayjob.ray.io/sleeper created"), "{out}");

        // Over quota (2.5 CPUs of 2): suspended, the Workload not admitted, no cluster and no pod.
        get(&run, &["wait", "--for=jsonpath={.status.jobDeploymentStatus}=Suspended", "rayjob/sleeper", "--timeout=30s"]).await;
        assert_eq!(get(&run, &["get", "rayjob", "sleeper", "-o", "jsonpath={.spec.suspend}"]).await, "true");
        let wl = workload_of(&run, "sleeper").await;
        get(&run, &["wait", "--for=jsonpath={.status.conditions[?(@.type==\"QuotaReserved\")].status}=False", &format!("workload/{wl}"), "--timeout=30s"]).await;
        let podsets = get(&run, &["get", "workload", &wl, "-o", "jsonpath={range .spec.podSets[*]}{.name}:{.count} {end}"]).await;
        assert_eq!(podsets.trim(), "head:1 workers:1 submitter:1", "K8sJobMode's Workload: head, workers and the submitter");
        assert_eq!(get(&run, &["get", "pods", "-o", "name"]).await, "", "no pod runs while over quota");
        assert_eq!(get(&run, &["get", "rayclusters", "-o", "name"]).await, "", "no cluster while over quota");

        // The quota raised: admitted, unsuspended, the cluster and the submitter start, the job runs.
        get(&run, &["patch", "clusterqueue", "cq", "--type=json", "-p", r#"[{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota","value":"6"}]"#]).await;
        get(&run, &["wait", "--for=jsonpath={.status.jobStatus}=RUNNING", "rayjob/sleeper", "--timeout=60s"]).await;
        assert_eq!(get(&run, &["get", "rayjob", "sleeper", "-o", "jsonpath={.spec.suspend}"]).await, "false");
        let cluster = get(&run, &["get", "rayjob", "sleeper", "-o", "jsonpath={.status.rayClusterName}"]).await;
        assert!(cluster.starts_with("sleeper-"), "KubeRay names the cluster after the job: {cluster}");
        let (ok, listed) = quotagate(&run, &["list", "pods", "--for", "rayjob/sleeper"]).await;
        assert!(ok, "{listed}");
        let rows: Vec<&str> = listed.lines().skip(1).collect();
        assert_eq!(rows.len(), 2, "the head and the worker (Kueue's RayJob pod selector: the cluster's pods):\n{listed}");
        assert!(rows.iter().all(|r| r.starts_with(&cluster) && r.contains("Running")), "{listed}");

        // A failing entrypoint beside it (2.5 + 2.5 of 6): one try and one retry, then Failed.
        get(&run, &["apply", "-f", &write("flaky.yaml", &ray_job("flaky", "exit 3", 1, 0))]).await;

        get(&run, &["wait", "--for=jsonpath={.status.jobDeploymentStatus}=Complete", "rayjob/sleeper", "--timeout=90s"]).await;
        let done = get(&run, &["get", "rayjob", "sleeper", "-o", "jsonpath={.status.jobStatus} {.status.succeeded} {.status.endTime}"]).await;
        let [job_status, succeeded, end_time] = done.split(' ').collect::<Vec<_>>()[..] else { panic!("{done}") };
        assert_eq!((job_status, succeeded), ("SUCCEEDED", "1"), "{done}");
        let end: jiff::Timestamp = end_time.parse().unwrap_or_else(|e| panic!("endTime {end_time}: {e}"));
        let (ok, out) = run.kubectl(&["get", "raycluster", &cluster, "-o", "name"]).await;
        let seen_at = jiff::Timestamp::now();
        if seen_at.duration_since(end) < jiff::SignedDuration::from_secs(4) {
            assert!(ok, "the cluster was deleted before ttlSecondsAfterFinished: {out}");
        }
        // The cluster goes once the TTL has passed, and not long after.
        let deleted_at = loop {
            let (ok, out) = run.kubectl(&["get", "raycluster", &cluster, "-o", "name"]).await;
            let now = jiff::Timestamp::now();
            if !ok {
                assert!(out.contains("NotFound") || out.contains("not found"), "{out}");
                break now;
            }
            assert!(now.duration_since(end) < jiff::SignedDuration::from_secs(30), "the cluster outlived its TTL by far");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let after = deleted_at.duration_since(end);
        assert!(after >= jiff::SignedDuration::from_secs(4), "the cluster was deleted {after:?} after the end, before its 4 s TTL");
        get(&run, &["wait", "--for=jsonpath={.status.conditions[?(@.type==\"Finished\")].reason}=Succeeded", &format!("workload/{wl}"), "--timeout=30s"]).await;

        get(&run, &["wait", "--for=jsonpath={.status.jobDeploymentStatus}=Failed", "rayjob/flaky", "--timeout=120s"]).await;
        let failed = get(&run, &["get", "rayjob", "flaky", "-o", "jsonpath={.status.jobStatus} {.status.failed} {.status.succeeded}"]).await;
        assert_eq!(failed.trim(), "FAILED 2 0", "backoffLimit 1: one try and one retry, both failed, none succeeded");
        let flaky_wl = workload_of(&run, "flaky").await;
        get(&run, &["wait", "--for=jsonpath={.status.conditions[?(@.type==\"Finished\")].status}=True", &format!("workload/{flaky_wl}"), "--timeout=30s"]).await;

        // Both ended: nothing holds the quota and no Ray pod is left.
        get(&run, &["wait", "--for=jsonpath={.status.reservingWorkloads}=0", "clusterqueue/cq", "--timeout=30s"]).await;
        get(&run, &["wait", "--for=jsonpath={.status.admittedWorkloads}=0", "clusterqueue/cq", "--timeout=30s"]).await;
        let ray_pods = get(&run, &["get", "pods", "-l", "ray.io/node-type", "-o", "name"]).await;
        assert_eq!(ray_pods, "", "no Ray pod outlives its job");
        run.stop().await;
    })
    .await;
}

/// How many RayJobs a RayCronJob made (they carry `ray.io/cronjob-name`).
async fn cron_made(run: &Running) -> usize {
    get(
        run,
        &["get", "rayjobs", "-l", "ray.io/cronjob-name", "-o", "name"],
    )
    .await
    .lines()
    .count()
}

/// Two RayCronJobs, each `@every 2s`, sharing a queue whose quota fits one of their RayJobs at a time
/// (head 1 CPU + worker 1 CPU + KubeRay's 500m submitter = 2.5 of 3 CPUs).
fn ray_cron_job(name: &str) -> String {
    let job = ray_job("unused", "sleep 10", 0, 0);
    let spec = job.split_once("spec:\n").map(|(_, s)| s).unwrap_or_default();
    let template: String = spec.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: ray.io/v1
kind: RayCronJob
metadata:
  name: {name}
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  schedule: \"@every 2s\"
  jobTemplate:
{template}"
    )
}

/// Issue 36's RayCronJob, through the real kubectl against `run_embedded` with KubeRay's `RayCronJob`
/// gate on. KubeRay: `ray-operator/test/e2eraycronjob/raycronjob_test.go` (`TestRayCronJobSuspend`:
/// the RayCronJob's RayJobs, owned by it, and none created while suspended; `TestRayCronJobNoDuplicateRayJob`:
/// one RayJob per schedule time however often it reconciles) and the CRD's printer columns; Kueue:
/// each RayJob is an ordinary queued RayJob, so the two wait for each other under a quota that fits
/// one, run to SUCCEEDED, and give the quota back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_ray_cron_jobs_make_queued_ray_jobs_that_run_under_quota() {
    Box::pin(async move {
        let Some(run) = Running::start_with("kubectl-raycronjobs", |o| {
            o.manager.ray = Some(quotagate::wiring::ray::Dashboards::simulated(Duration::from_millis(100), Duration::from_millis(100)));
            o.manager.ray_gates.ray_cron_job = true;
        })
        .await
        else {
            return;
        };
        let write = |name: &str, text: &str| {
            let path = run.dir.join(name);
            std::fs::write(&path, text).unwrap();
            path.to_string_lossy().into_owned()
        };
        get(&run, &["apply", "-f", &write("quota.yaml", &QUOTA.replace("nominalQuota: \"2\"", "nominalQuota: \"3\""))]).await;
        let out = get(&run, &["apply", "-f", &write("crons.yaml", &format!("{}---\n{}", ray_cron_job("nightly-a"), ray_cron_job("nightly-b")))]).await;
        assert!(out.contains("raycronjob.ray.io/nightly-a created") && out.contains("raycronjob.ray.io/nightly-b created"), "{out}");

        // Each schedules a RayJob named `<cron>-<unix minute>`, owned by it and labelled with it.
        let mut names = Vec::new();
        for cron in ["nightly-a", "nightly-b"] {
            let found = loop {
                let out = get(&run, &["get", "rayjobs", "-l", &format!("ray.io/cronjob-name={cron}"), "-o", "jsonpath={range .items[*]}{.metadata.name} {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {.metadata.labels.kueue\\.x-k8s\\.io/queue-name};{end}"]).await;
                if let Some(first) = out.split(';').find(|s| !s.is_empty()) {
                    break first.to_string();
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            };
            let parts: Vec<&str> = found.split(' ').collect();
            let minute: i64 = parts[0].strip_prefix(&format!("{cron}-")).and_then(|m| m.parse().ok()).unwrap_or_else(|| panic!("{found}"));
            assert!((minute * 60 - jiff::Timestamp::now().as_second()).abs() < 120, "named by its schedule minute: {found}");
            assert_eq!(&parts[1..], [&format!("RayCronJob/{cron}")[..], "user-queue"], "{found}");
            names.push(parts[0].to_string());
        }

        // `kubectl get raycronjob`: KubeRay's columns, the schedule, the time of the last RayJob.
        let table = get(&run, &["get", "raycronjob", "nightly-a"]).await;
        let header: Vec<&str> = table.lines().next().unwrap_or_default().split("  ").map(str::trim).filter(|s| !s.is_empty()).collect();
        assert_eq!(header, ["NAME", "SCHEDULE", "TIMEZONE", "LAST SCHEDULE", "AGE", "SUSPEND"], "{table}");
        let row = table.lines().nth(1).unwrap_or_default();
        assert!(row.starts_with("nightly-a") && row.contains("@every 2s") && !row.contains("<unknown>"), "{table}");

        // Suspended: no new RayJob, and kubectl shows it.
        for cron in ["nightly-a", "nightly-b"] {
            get(&run, &["patch", "raycronjob", cron, "--type=merge", "-p", r#"{"spec":{"suspend":true}}"#]).await;
        }
        let suspended = get(&run, &["get", "raycronjob", "-o", "jsonpath={range .items[*]}{.spec.suspend} {end}"]).await;
        assert_eq!(suspended.trim(), "true true");
        let count = cron_made(&run).await;
        assert!(count >= 2, "two RayJobs at least (one more if a minute turned before the suspend)");

        // The quota fits one: one runs while the other waits suspended with its Workload unreserved.
        let running = loop {
            let out = get(&run, &["get", "rayjobs", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.jobStatus}/{.status.jobDeploymentStatus};{end}"]).await;
            let states: Vec<(String, String)> = out.split(';').filter_map(|s| s.split_once('=')).map(|(a, b)| (a.to_string(), b.to_string())).collect();
            if let Some((name, _)) = states.iter().find(|(_, s)| s.starts_with("RUNNING/")) {
                let others: Vec<&(String, String)> = states.iter().filter(|(n, s)| n != name && !s.starts_with("SUCCEEDED")).collect();
                assert!(others.iter().all(|(_, s)| s.ends_with("/Suspended") || s.ends_with("/")), "only one runs under a quota for one: {out}");
                break name.clone();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let clusters = get(&run, &["get", "rayclusters", "-o", "name"]).await;
        assert_eq!(clusters.lines().count(), 1, "one cluster while one RayJob holds the quota: {clusters}");
        let waiting = names.iter().find(|n| **n != running).unwrap().clone();
        let wl = workload_of(&run, &waiting).await;
        get(&run, &["wait", "--for=jsonpath={.status.conditions[?(@.type==\"QuotaReserved\")].status}=False", &format!("workload/{wl}"), "--timeout=30s"]).await;

        // Both (and any made before the suspend) run to SUCCEEDED in turn; nothing holds the quota after.
        for name in get(&run, &["get", "rayjobs", "-l", "ray.io/cronjob-name", "-o", "name"]).await.lines() {
            get(&run, &["wait", "--for=jsonpath={.status.jobDeploymentStatus}=Complete", name, "--timeout=120s"]).await;
            assert_eq!(get(&run, &["get", name, "-o", "jsonpath={.status.jobStatus}"]).await, "SUCCEEDED");
        }
        assert_eq!(cron_made(&run).await, count, "no RayJob was created while suspended");
        get(&run, &["wait", "--for=jsonpath={.status.reservingWorkloads}=0", "clusterqueue/cq", "--timeout=30s"]).await;
        run.stop().await;
    })
    .await;
}
