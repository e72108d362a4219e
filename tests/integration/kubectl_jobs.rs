//! Issue 35: Kueue's batch/v1 Job integration through the real kubectl against `run_embedded` (its
//! Job controller and node agent on): a queue-labelled Job applied while the quota is held waits
//! suspended, its Workload pending, then runs and completes once the first Job ends; `kubectl get
//! workloads` lists both Jobs' Workloads. Skipped without kubectl, as the other kubectl tests.

use super::kubectl::Running;

fn job(name: &str, cpu: &str, seconds: u32) -> String {
    job_with(name, cpu, seconds, "", 1)
}

/// A queued Job manifest; `annotations` is YAML for `metadata.annotations` (empty: none).
fn job_with(name: &str, cpu: &str, seconds: u32, annotations: &str, completions: i32) -> String {
    let annotations = if annotations.is_empty() {
        String::new()
    } else {
        format!("\n  annotations:\n    {annotations}")
    };
    format!(
        r#"apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue{annotations}
spec:
  parallelism: 1
  completions: {completions}
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
    let setup = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/manifests/kueue/single-clusterqueue.yaml"
    );
    get(&run, &["apply", "-f", setup]).await;
    for (name, cpu, secs) in [("first", "9", 3), ("second", "1", 1)] {
        let path = run.dir.join(format!("{name}.yaml"));
        std::fs::write(&path, job(name, cpu, secs)).unwrap();
        let out = get(&run, &["apply", "-f", path.to_str().unwrap()]).await;
        assert!(out.contains(&format!("job.batch/{name} created")), "{out}");
        if name == "first" {
            // The first holds every CPU before the second arrives.
            get(
                &run,
                &[
                    "wait",
                    "--for=jsonpath={.spec.suspend}=false",
                    "job/first",
                    "--timeout=30s",
                ],
            )
            .await;
        }
    }
    let suspended = get(&run, &["get", "job", "second", "-o", "jsonpath={.spec.suspend}"]).await;
    assert_eq!(
        suspended, "true",
        "the second Job waits suspended while the first holds the quota"
    );
    let pods = get(
        &run,
        &[
            "get",
            "pods",
            "-l",
            "batch.kubernetes.io/job-name=second",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
    )
    .await;
    assert_eq!(pods, "", "no pod while it waits");
    let workloads = get(&run, &["get", "workloads"]).await;
    assert!(
        workloads.contains("job-first-")
            && workloads.contains("job-second-")
            && workloads.contains("user-queue"),
        "{workloads}"
    );
    let waiting = get(&run, &["get", "workloads", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"QuotaReserved\")].status};{end}"]).await;
    assert!(
        waiting
            .split(';')
            .any(|w| w.starts_with("job-second-") && w.ends_with("=False")),
        "{waiting}"
    );

    get(
        &run,
        &["wait", "--for=condition=Complete", "job/first", "--timeout=60s"],
    )
    .await;
    get(
        &run,
        &["wait", "--for=condition=Complete", "job/second", "--timeout=60s"],
    )
    .await;
    let second = get(
        &run,
        &[
            "get",
            "job",
            "second",
            "-o",
            "jsonpath={.spec.suspend} {.status.succeeded}",
        ],
    )
    .await;
    assert_eq!(second, "false 1");
    let listed = get(&run, &["get", "jobs"]).await;
    assert!(listed.contains("first") && listed.contains("second"), "{listed}");
    let finished = get(
        &run,
        &[
            "get",
            "workloads",
            "-o",
            "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Finished\")].reason};{end}",
        ],
    )
    .await;
    assert_eq!(finished, "Succeeded;Succeeded;", "both Workloads finished");
    run.stop().await;
}

/// Kueue: test/integration/singlecluster/controller/jobs/job/job_controller_test.go, "Job with elastic
/// jobs via workload-slices support" (scale-up through a new slice), as a user drives it with kubectl on
/// Kueue's single-ClusterQueue setup (9 CPUs): a 7-CPU Job holds most of the quota; an elastic Job of
/// 1 CPU runs; `kubectl patch` raises its parallelism to 3. Its 2 new pods are created but wait, gated
/// (`SchedulingGated`), while its new slice waits for quota, and the Job is not suspended; when the
/// 7-CPU Job is deleted, the slice is admitted, the old slice is finished as replaced, and all 3 pods
/// run. A quota watch over a client of the same server checks the ClusterQueue's 9 CPUs at every
/// Workload event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scales_an_elastic_job_whose_new_pods_wait_gated_for_their_slice() {
    let Some(run) = Running::start_with("kubectl-elastic-jobs", |_| {}).await else {
        return;
    };
    let setup = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/manifests/kueue/single-clusterqueue.yaml"
    );
    get(&run, &["apply", "-f", setup]).await;
    let kubeconfig = kube::config::Kubeconfig::read_from(run.dir.join("kubeconfig")).unwrap();
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap(),
    )
    .unwrap();
    let quota = crate::support::QuotaWatch::start(
        client.clone(),
        crate::support::Limits::default().cq("cluster-queue", 9000),
    )
    .await;

    for (name, yaml) in [
        ("big", job("big", "7", 3600)),
        (
            "elastic",
            job_with("elastic", "1", 3600, "kueue.x-k8s.io/elastic-job: \"true\"", 10),
        ),
    ] {
        let path = run.dir.join(format!("{name}.yaml"));
        std::fs::write(&path, yaml).unwrap();
        get(&run, &["apply", "-f", path.to_str().unwrap()]).await;
        get(
            &run,
            &[
                "wait",
                "--for=jsonpath={.status.ready}=1",
                &format!("job/{name}"),
                "--timeout=60s",
            ],
        )
        .await;
    }
    let gates = get(
        &run,
        &[
            "get",
            "job",
            "elastic",
            "-o",
            "jsonpath={.spec.template.spec.schedulingGates[*].name}",
        ],
    )
    .await;
    assert_eq!(
        gates, "kueue.x-k8s.io/elastic-job",
        "the webhook gated the elastic Job's pods"
    );

    let out = get(
        &run,
        &[
            "patch",
            "job",
            "elastic",
            "--type=merge",
            "-p",
            r#"{"spec":{"parallelism":3}}"#,
        ],
    )
    .await;
    assert!(out.contains("job.batch/elastic patched"), "{out}");
    // The Job controller makes the 2 new pods at once; they wait behind the gate.
    get(
        &run,
        &[
            "wait",
            "--for=jsonpath={.status.active}=3",
            "job/elastic",
            "--timeout=60s",
        ],
    )
    .await;
    let slices = r#"jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="QuotaReserved")].status}={.metadata.annotations.kueue\.x-k8s\.io/workload-slice-replacement-for};{end}"#;
    // Read again on every Workload event, for at most 60 s.
    let pending = |w: &str| {
        w.split(';')
            .any(|w| w.starts_with("job-elastic-") && w.contains("=False=default/job-elastic-"))
    };
    let waiting = crate::elastic_jobs::on_every_event(
        kube::Api::<quotagate::api::kueue::Workload>::all(client.clone()),
        Default::default(),
        "a pending slice",
        || async {
            let out = get(&run, &["get", "workloads", "-o", slices]).await;
            pending(&out).then_some(out)
        },
    )
    .await;
    assert!(pending(&waiting), "a new slice waits for quota: {waiting}");
    let pods = r#"jsonpath={range .items[*]}{.spec.schedulingGates[*].name}/{.status.phase}/{.status.conditions[?(@.type=="PodScheduled")].reason};{end}"#;
    let listed = get(
        &run,
        &[
            "get",
            "pods",
            "-l",
            "batch.kubernetes.io/job-name=elastic",
            "-o",
            pods,
        ],
    )
    .await;
    let mut seen: Vec<&str> = listed.split(';').filter(|s| !s.is_empty()).collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            "/Running/",
            "kueue.x-k8s.io/elastic-job/Pending/SchedulingGated",
            "kueue.x-k8s.io/elastic-job/Pending/SchedulingGated"
        ],
        "{listed}"
    );
    let suspend = get(&run, &["get", "job", "elastic", "-o", "jsonpath={.spec.suspend}"]).await;
    assert_eq!(suspend, "false", "the Job keeps running on its admitted slice");

    get(&run, &["delete", "job", "big", "--wait=false"]).await;
    get(
        &run,
        &[
            "wait",
            "--for=jsonpath={.status.ready}=3",
            "job/elastic",
            "--timeout=60s",
        ],
    )
    .await;
    let gates = get(
        &run,
        &[
            "get",
            "pods",
            "-l",
            "batch.kubernetes.io/job-name=elastic",
            "-o",
            "jsonpath={.items[*].spec.schedulingGates}",
        ],
    )
    .await;
    assert_eq!(gates.trim(), "", "every pod through the gate: {gates}");
    let finished = get(&run, &["get", "workloads", "-o", r#"jsonpath={range .items[?(@.metadata.name!="")]}{.metadata.name}={.status.conditions[?(@.type=="Finished")].reason};{end}"#]).await;
    assert!(
        finished
            .split(';')
            .any(|w| w.starts_with("job-elastic-") && w.ends_with("=WorkloadSliceReplaced")),
        "{finished}"
    );
    quota.assert_safe();
    run.stop().await;
}
