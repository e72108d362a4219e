//! What an operator reads through the real kubectl on `run --embedded` (issue 44 item 3): the
//! controllers' events under `kubectl get events` and `kubectl get events.events.k8s.io` alike, and
//! `kubectl describe` of a RayService, its RayCluster, its Workload and the ClusterQueue showing
//! their own events and no one else's.

use std::collections::BTreeSet;

use super::kubectl::Running;

fn sample(name: &str) -> String {
    format!("{}/config/samples/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn names(out: &str) -> BTreeSet<String> {
    out.split_whitespace().map(String::from).collect()
}

/// The lines of `kubectl describe`'s trailing Events section.
fn events_section(describe: &str) -> Vec<String> {
    let Some(at) = describe.rfind("\nEvents:") else {
        return Vec::new();
    };
    describe[at + 1..]
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Type") && !l.starts_with("----"))
        .map(String::from)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_events_and_describe_show_each_objects_events() {
    let Some(run) = Running::start_with_simulated_ray("kubectl-ops-events").await else {
        return;
    };
    for f in ["quota.yaml", "rayservice.yaml"] {
        let (ok, out) = run.kubectl(&["apply", "-f", &sample(f)]).await;
        assert!(ok, "{out}");
    }
    let (ok, out) = run
        .kubectl(&[
            "wait",
            "--for=condition=Ready",
            "rayservice/fruit-stand",
            "--timeout=90s",
        ])
        .await;
    assert!(ok, "{out}");
    let get = |args: &'static [&'static str]| {
        let run = &run;
        async move {
            let (ok, out) = run.kubectl(args).await;
            assert!(ok, "kubectl {args:?}: {out}");
            out
        }
    };
    let cluster = get(&[
        "get",
        "rayservice",
        "fruit-stand",
        "-o",
        "jsonpath={.status.activeServiceStatus.rayClusterName}",
    ])
    .await;
    assert!(!cluster.is_empty());

    // One store, two versions: the same events under both names, each in its own field names.
    let core = names(&get(&["get", "events", "-o", "jsonpath={.items[*].metadata.name}"]).await);
    let v1 = names(
        &get(&[
            "get",
            "events.events.k8s.io",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .await,
    );
    assert!(!core.is_empty(), "the controllers published events");
    assert_eq!(core, v1);
    let core_objs = get(&[
        "get",
        "events",
        "-o",
        "jsonpath={range .items[*]}{.involvedObject.kind}/{.involvedObject.name}:{.message}{\"\\n\"}{end}",
    ])
    .await;
    let v1_objs = get(&[
        "get",
        "events.events.k8s.io",
        "-o",
        "jsonpath={range .items[*]}{.regarding.kind}/{.regarding.name}:{.note}{\"\\n\"}{end}",
    ])
    .await;
    assert_eq!(core_objs, v1_objs);
    assert!(
        core_objs.contains(&format!("RayCluster/{cluster}:")),
        "{core_objs}"
    );
    let table = get(&["get", "events"]).await;
    assert!(
        table.contains("LAST SEEN")
            && table.contains("REASON")
            && table.contains(&format!("raycluster/{cluster}")),
        "{table}"
    );

    // Field selectors of both versions, as describe and `kubectl events` send them.
    let rs_events = names(
        &get(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=RayService,involvedObject.name=fruit-stand",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .await,
    );
    let rs_events_v1 = names(
        &get(&[
            "get",
            "events.events.k8s.io",
            "--field-selector",
            "regarding.kind=RayService,regarding.name=fruit-stand",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .await,
    );
    assert!(!rs_events.is_empty());
    assert_eq!(rs_events, rs_events_v1);
    assert!(rs_events.is_subset(&core) && rs_events.len() < core.len());
    let (ok, out) = run
        .kubectl(&["get", "events", "--field-selector", "regarding.name=fruit-stand"])
        .await;
    assert!(
        !ok && out.contains("field label not supported: regarding.name"),
        "{out}"
    );

    // An event about the ClusterQueue (cluster-scoped: its events live in `default`) and one about
    // another RayService: describe shows the first on the ClusterQueue and neither elsewhere.
    let uid = get(&["get", "clusterqueue", "serving", "-o", "jsonpath={.metadata.uid}"]).await;
    let cq_event = format!(
        "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata:\n  name: serving.audit\n  namespace: default\neventTime: \"2026-01-01T00:00:00.000000Z\"\nreportingController: audit\nreportingInstance: audit-1\naction: Check\nreason: QuotaAudited\ntype: Normal\nnote: quota audited by hand\nregarding:\n  apiVersion: kueue.x-k8s.io/v1beta2\n  kind: ClusterQueue\n  name: serving\n  uid: {uid}\n"
    );
    let other = "apiVersion: v1\nkind: Event\nmetadata:\n  name: other.1\n  namespace: default\ninvolvedObject:\n  apiVersion: ray.io/v1\n  kind: RayService\n  name: other-stand\n  namespace: default\nreason: NotMine\nmessage: about another service\ntype: Warning\nsource:\n  component: test\n";
    let file = run.dir.join("events.yaml");
    std::fs::write(&file, format!("{cq_event}---\n{other}")).unwrap();
    let (ok, out) = run.kubectl(&["create", "-f", file.to_str().unwrap()]).await;
    assert!(ok, "{out}");

    let workload = get(&["get", "workloads", "-o", "jsonpath={.items[0].metadata.name}"]).await;
    for (kind, name) in [
        ("rayservice", "fruit-stand".to_string()),
        ("raycluster", cluster.clone()),
        ("workload", workload.clone()),
        ("clusterqueue", "serving".to_string()),
    ] {
        let (ok, describe) = run.kubectl(&["describe", kind, &name]).await;
        assert!(ok, "{describe}");
        let lines = events_section(&describe);
        assert!(
            !lines.is_empty()
                && !describe.contains("Events:         <none>")
                && !describe.contains("Events:  <none>"),
            "describe {kind} {name} shows its events:\n{describe}"
        );
        assert!(
            !describe.contains("NotMine"),
            "describe {kind} {name} shows another object's event:\n{describe}"
        );
        // Exactly the events whose involvedObject is this object.
        let k = match kind {
            "rayservice" => "RayService",
            "raycluster" => "RayCluster",
            "workload" => "Workload",
            _ => "ClusterQueue",
        };
        let (ok, own) = run
            .kubectl(&[
                "get",
                "events",
                "-A",
                "--field-selector",
                &format!("involvedObject.kind={k},involvedObject.name={name}"),
                "-o",
                "jsonpath={.items[*].metadata.name}",
            ])
            .await;
        assert!(ok, "{own}");
        assert_eq!(
            lines.len(),
            names(&own).len(),
            "describe {kind} {name}:\n{describe}\nown events: {own}"
        );
    }
    let (_, cq) = run.kubectl(&["describe", "clusterqueue", "serving"]).await;
    assert!(
        cq.contains("QuotaAudited") && cq.contains("quota audited by hand") && cq.contains("audit"),
        "{cq}"
    );
    run.stop().await;
}

/// Issue 45's done-when: `config/samples/two-services/` as a platform team would use it, through the
/// real kubectl. Both services serve in the shared queue, both are upgraded at once, and both complete
/// (their surge steps take turns in the quota `plan --concurrent 2` sized). The sample's 5 s step
/// interval and deletion delay are lowered to 1 s to keep the test short; nothing else is changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_two_services_sample_upgrades_both_through_one_queue() {
    let Some(run) = Running::start_with_simulated_ray("kubectl-two-services").await else {
        return;
    };
    let services = std::fs::read_to_string(sample("two-services/rayservices.yaml")).unwrap();
    let quick = services
        .replace("intervalSeconds: 5", "intervalSeconds: 1")
        .replace(
            "rayClusterDeletionDelaySeconds: 5",
            "rayClusterDeletionDelaySeconds: 1",
        );
    assert_eq!(
        quick.matches("intervalSeconds: 1").count(),
        2,
        "the sample changed"
    );
    let file = run.dir.join("rayservices.yaml");
    std::fs::write(&file, &quick).unwrap();
    for f in [
        sample("two-services/quota.yaml"),
        file.to_str().unwrap().to_string(),
    ] {
        let (ok, out) = run.kubectl(&["apply", "-f", &f]).await;
        assert!(ok, "{out}");
    }
    let active = |name: &'static str| {
        let run = &run;
        async move {
            let (ok, out) = run.kubectl(&["get", "rayservice", name, "-o", "jsonpath={.status.activeServiceStatus.rayClusterName},{.status.pendingServiceStatus.rayClusterName}"]).await;
            assert!(ok, "{out}");
            let (a, p) = out.split_once(',').unwrap_or((&out, ""));
            (a.to_string(), p.to_string())
        }
    };
    let mut old = Vec::new();
    for name in ["shop-a", "shop-b"] {
        let (ok, out) = run
            .kubectl(&[
                "wait",
                "--for=condition=Ready",
                &format!("rayservice/{name}"),
                "--timeout=120s",
            ])
            .await;
        assert!(ok, "{out}");
        old.push(active(name).await.0);
    }
    for name in ["shop-a", "shop-b"] {
        let (ok, out) = run
            .kubectl(&[
                "patch",
                "rayservice",
                name,
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"rayClusterConfig":{"rayVersion":"2.47.0"}}}"#,
            ])
            .await;
        assert!(ok, "{out}");
    }
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let now = [active("shop-a").await, active("shop-b").await];
        if now.iter().zip(&old).all(|((a, p), o)| a != o && p.is_empty()) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "both upgrades did not complete: {now:?} (old {old:?})"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    // Back at both services' steady state: 11 of the queue's 14.5 CPU.
    let (ok, out) = run
        .kubectl(&[
            "wait",
            "--for=jsonpath={.status.flavorsReservation[0].resources[0].total}=11",
            "clusterqueue/shared-cq",
            "--timeout=60s",
        ])
        .await;
    assert!(ok, "{out}");
    run.stop().await;
}
