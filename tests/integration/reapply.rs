//! Issue 46: re-applying an unchanged manifest changes nothing. GitOps tools apply a RayService's
//! manifest every few minutes; no controller may write into the spec a user owns, so `kubectl diff`
//! stays empty, `kubectl apply` says `unchanged`, and no re-apply starts an upgrade. Driven only
//! through the real kubectl, with the quick start's quota and RayService (`config/samples/`).

use std::time::Duration;

use super::kubectl::Running;

fn sample(name: &str) -> String {
    format!("{}/config/samples/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// What a re-apply must leave as it was.
#[derive(Debug, PartialEq)]
struct Seen {
    generation: String,
    active: String,
    pending: String,
    clusters: String,
    workloads: String,
}

async fn get(run: &Running, args: &[&str]) -> String {
    let (ok, out) = run.kubectl(args).await;
    assert!(ok, "kubectl {args:?}: {out}");
    out.trim().to_string()
}

async fn seen(run: &Running) -> Seen {
    let rs = |path: &'static str| {
        let jsonpath = format!("jsonpath={path}");
        async move { get(run, &["get", "rayservice", "fruit-stand", "-o", &jsonpath]).await }
    };
    Seen {
        generation: rs("{.metadata.generation}").await,
        active: rs("{.status.activeServiceStatus.rayClusterName}").await,
        pending: rs("{.status.pendingServiceStatus.rayClusterName}").await,
        clusters: get(
            run,
            &["get", "rayclusters", "-o", "jsonpath={.items[*].metadata.name}"],
        )
        .await,
        workloads: get(
            run,
            &["get", "workloads", "-o", "jsonpath={.items[*].metadata.name}"],
        )
        .await,
    }
}

/// The quick start's quota and RayService applied through kubectl, once it is Ready: the manifest's
/// path and what the cluster shows then.
async fn quick_start(run: &Running) -> (String, Seen) {
    let manifest = sample("rayservice.yaml");
    for f in [sample("quota.yaml"), manifest.clone()] {
        let (ok, out) = run.kubectl(&["apply", "-f", &f]).await;
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
    (manifest, seen(run).await)
}

/// Ten re-applies of `file`, client-side and server-side, each checked with `kubectl diff` first;
/// afterwards everything is as `before`.
async fn reapply_ten_times(run: &Running, file: &str, before: &Seen) {
    for i in 0..10 {
        let (same, diff) = run.kubectl(&["diff", "-f", file]).await;
        assert!(
            same,
            "re-apply {i}: kubectl diff shows a change nobody made:\n{diff}"
        );
        let out = if i % 2 == 0 {
            get(run, &["apply", "-f", file]).await
        } else {
            get(run, &["apply", "--server-side", "-f", file]).await
        };
        if i % 2 == 0 && i > 0 {
            // After kubectl's server-side apply, kube-apiserver rewrites the client-side apply
            // annotation from the applied configuration (apimachinery's lastAppliedUpdater), which
            // lacks the empty `annotations` map kubectl's own annotation carries: the next
            // client-side apply writes its annotation back and says `configured` (so does
            // kube-apiserver v1.36.3), and the one after that changes nothing.
            assert!(
                out.contains("rayservice.ray.io/fruit-stand configured")
                    || out.contains("rayservice.ray.io/fruit-stand unchanged"),
                "re-apply {i}: {out}"
            );
            let again = get(run, &["apply", "-f", file]).await;
            assert!(
                again.contains("rayservice.ray.io/fruit-stand unchanged"),
                "re-apply {i}, client-side again: {again}"
            );
        } else if i == 0 {
            assert!(
                out.contains("rayservice.ray.io/fruit-stand unchanged"),
                "re-apply {i}: {out}"
            );
        } else {
            assert!(
                out.contains("rayservice.ray.io/fruit-stand serverside-applied"),
                "re-apply {i}: {out}"
            );
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(&seen(run).await, before, "re-apply {i} changed the service");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reapplying_the_quick_start_changes_nothing_before_and_after_an_upgrade() {
    let Some(run) = Running::start_with_simulated_ray("reapply").await else {
        return;
    };
    let (manifest, before) = quick_start(&run).await;
    assert!(
        !before.active.is_empty() && before.pending.is_empty(),
        "{before:?}"
    );
    assert!(!before.workloads.is_empty(), "{before:?}");
    reapply_ten_times(&run, &manifest, &before).await;

    // The spec as the user wrote it; what admission adds is on the pods.
    let spec = get(
        &run,
        &[
            "get",
            "rayservice",
            "fruit-stand",
            "-o",
            "jsonpath={.spec.rayClusterConfig}",
        ],
    )
    .await;
    assert!(
        !spec.contains("kueue.x-k8s.io/"),
        "admission wrote into the user's spec: {spec}"
    );
    let podsets = get(
        &run,
        &[
            "get",
            "pods",
            "-l",
            &format!("ray.io/cluster={}", before.active),
            "-o",
            "jsonpath={.items[*].metadata.labels.kueue\\.x-k8s\\.io/podset}",
        ],
    )
    .await;
    assert_eq!(
        podsets.split_whitespace().count(),
        2,
        "every pod carries its podset label: {podsets}"
    );

    // An upgrade the user did make, then ten re-applies of the new manifest.
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("2.46.0", "2.47.0");
    let upgraded = run.dir.join("rayservice-2.47.yaml");
    std::fs::write(&upgraded, text).unwrap();
    let upgraded = upgraded.to_str().unwrap();
    let out = get(&run, &["apply", "-f", upgraded]).await;
    assert!(out.contains("configured"), "{out}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let after = loop {
        let now = seen(&run).await;
        if now.active != before.active && now.pending.is_empty() && !now.clusters.contains(&before.active) {
            break now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the upgrade did not complete: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (ok, out) = run
        .kubectl(&[
            "wait",
            "--for=condition=Ready",
            "rayservice/fruit-stand",
            "--timeout=30s",
        ])
        .await;
    assert!(ok, "{out}");
    let after = Seen {
        workloads: get(
            &run,
            &["get", "workloads", "-o", "jsonpath={.items[*].metadata.name}"],
        )
        .await,
        ..after
    };
    reapply_ten_times(&run, upgraded, &after).await;
    run.stop().await;
}

/// Issue 47 item 5, as GitOps rolls back: an upgrade applied while the quota cannot take it waits,
/// gated; re-applying the manifest it came from cancels it. The pending cluster and its waiting slice
/// are deleted, the active cluster serves on untouched, no third cluster is made (before issue 46
/// the controller's writes into the spec made the old manifest a new hash), and the service is
/// back to exactly what it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reapplying_the_previous_manifest_cancels_a_waiting_upgrade() {
    let Some(run) = Running::start_with_simulated_ray("rollback").await else {
        return;
    };
    let (manifest, before) = quick_start(&run).await;
    let pods_of = format!("ray.io/cluster={}", before.active);
    let pod_uids = [
        "get",
        "pods",
        "-l",
        pods_of.as_str(),
        "-o",
        "jsonpath={.items[*].metadata.uid}",
    ];
    let serving_pods = get(&run, &pod_uids).await;
    // 3 CPU serve; 4 leave no room for the upgrade's second 3.
    let cut = r#"{"spec":{"resourceGroups":[{"coveredResources":["cpu","memory"],"flavors":[{"name":"default-flavor","resources":[{"name":"cpu","nominalQuota":"4"},{"name":"memory","nominalQuota":"48Gi"}]}]}]}}"#;
    get(
        &run,
        &["patch", "clusterqueue", "serving", "--type", "merge", "-p", cut],
    )
    .await;

    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("2.46.0", "2.47.0");
    let upgraded = run.dir.join("rayservice-2.47.yaml");
    std::fs::write(&upgraded, text).unwrap();
    get(&run, &["apply", "-f", upgraded.to_str().unwrap()]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let waiting = loop {
        let now = seen(&run).await;
        if !now.pending.is_empty() && now.workloads.split_whitespace().count() == 2 {
            break now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no gated upgrade: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(waiting.active, before.active);

    // The rollback: the manifest the service came from.
    let out = get(&run, &["apply", "-f", &manifest]).await;
    assert!(out.contains("configured"), "{out}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let now = seen(&run).await;
        let clusters: Vec<&str> = now.clusters.split_whitespace().collect();
        assert!(
            clusters
                .iter()
                .all(|c| *c == before.active || *c == waiting.pending),
            "a third cluster: {now:?}"
        );
        if now.pending.is_empty() && now.clusters == before.clusters && now.workloads == before.workloads {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the upgrade was not cancelled: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        get(&run, &pod_uids).await,
        serving_pods,
        "the serving cluster was touched"
    );
    let (ok, out) = run
        .kubectl(&[
            "wait",
            "--for=condition=Ready",
            "rayservice/fruit-stand",
            "--timeout=10s",
        ])
        .await;
    assert!(ok, "{out}");
    let (same, diff) = run.kubectl(&["diff", "-f", &manifest]).await;
    assert!(same, "{diff}");
    run.stop().await;
}

/// What admission adds goes onto a RayService's pods, never into its spec: with a flavor that has node
/// labels, every pod of the serving cluster and, through a resized upgrade (two head shapes, so the
/// heads' podsets are `head-<hash>`), every pod of the new cluster carries the flavor's node selector
/// and the podset it belongs to, while `spec.rayClusterConfig` stays as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_services_pods_carry_their_podsets_flavor_through_a_resized_upgrade() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::ResourceExt;
    use kube::api::{Api, Patch, PatchParams};
    use quotagate::api::kueue::ResourceFlavor;
    use serde_json::json;

    use super::gated::{Scenario, pending, service};

    let s = Scenario::start("5", 5000).await;
    let flavors: Api<ResourceFlavor> = Api::all(s.c.client.clone());
    let labels = json!({"spec": {"nodeLabels": {"pool": "blue"}}});
    flavors
        .patch("default", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap();
    let written = service("rs", "1", "2.46.0");
    let old = s.serving(written.clone()).await;

    let podset_of = |p: &Pod| {
        p.labels()
            .get("kueue.x-k8s.io/podset")
            .cloned()
            .unwrap_or_default()
    };
    let check = |pods: Vec<Pod>, what: &str| {
        assert!(!pods.is_empty(), "{what}: no pods");
        for p in &pods {
            let selector = p
                .spec
                .as_ref()
                .and_then(|s| s.node_selector.clone())
                .unwrap_or_default();
            assert_eq!(
                selector.get("pool").map(String::as_str),
                Some("blue"),
                "{what}: pod {} lacks the flavor's node selector",
                p.name_any()
            );
            let is_head = p.labels().get("ray.io/node-type").map(String::as_str) == Some("head");
            let group = if is_head {
                "head".to_string()
            } else {
                p.labels()
                    .get("ray.io/group")
                    .cloned()
                    .unwrap_or_default()
                    .to_lowercase()
            };
            let podset = podset_of(p);
            assert!(
                podset == group || podset.starts_with(&format!("{group}-")),
                "{what}: pod {} is labelled podset {podset:?}",
                p.name_any()
            );
        }
    };
    check(s.pods_of(&old).await, "serving cluster");

    // A bigger head: the old and new heads are two podsets of the same slice.
    let patch = json!({"spec": {"rayClusterConfig": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head",
        "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]}}}}}});
    s.services()
        .patch("rs", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let rs = s
        .wait_rs("rs", "a pending cluster", |r| pending(r).is_some())
        .await;
    let new = pending(&rs).unwrap();
    s.wait_cq_cpu(5000).await;
    let rs = s.wait_active("rs", &new).await;
    let pods = s.pods_of(&new).await;
    let heads: Vec<String> = pods
        .iter()
        .filter(|p| p.labels().get("ray.io/node-type").map(String::as_str) == Some("head"))
        .map(podset_of)
        .collect();
    assert!(
        heads.len() == 1 && heads[0].starts_with("head-"),
        "the new head belongs to its own shape's podset: {heads:?}"
    );
    check(pods, "upgraded cluster");

    let mut want = written.spec.ray_cluster_config.clone();
    want.head_group_spec.template =
        serde_json::from_value(patch["spec"]["rayClusterConfig"]["headGroupSpec"]["template"].clone())
            .unwrap();
    assert_eq!(
        rs.spec.ray_cluster_config, want,
        "spec.rayClusterConfig is as the user wrote it"
    );
    s.inv.assert_clean();
}

/// Issue 46 item 2, over every queue-managed manifest we ship or must load: the samples' three
/// RayServices and a RayService, RayCluster and RayJob in the shapes of Kueue's samples
/// (`tests/fixtures/manifests/kueue/*.user-queue.yaml`; Kueue's batch Job sample uses `generateName`,
/// which `kubectl apply` refuses, so none is here).
/// Applied, admitted and running, then `kubectl diff` exits 0 for each (for a RayJob it shows only
/// what Kueue too writes into its templates, and the first re-apply taking it out restarts nothing), `kubectl apply` says `unchanged`, `kubectl apply --server-side` changes no
/// generation, and in the next 15 s no cluster, Workload or pod is created or replaced. The RayJob's own cluster and pods run its job to the end
/// meanwhile, so only its manifest's generation and diff are held.
/// The kinds whose templates Kueue itself writes the admission into when it starts them.
const KUEUE_WRITES_TEMPLATES: [&str; 1] = ["ray-job.user-queue.yaml"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_queue_managed_manifest_reapplies_unchanged() {
    let Some(run) = Running::start_with_simulated_ray("reapply-all").await else {
        return;
    };
    let fixture = |f: &str| {
        format!(
            "{}/tests/fixtures/manifests/kueue/{f}",
            env!("CARGO_MANIFEST_DIR")
        )
    };
    for q in [
        sample("quota.yaml"),
        sample("gated-upgrade/quota.yaml"),
        sample("incremental/quota.yaml"),
    ] {
        get(&run, &["apply", "-f", &q]).await;
    }
    // Room for everything at once in the quick start's queue (Kueue's samples use `user-queue`).
    let room = r#"{"spec":{"resourceGroups":[{"coveredResources":["cpu","memory"],"flavors":[{"name":"default-flavor","resources":[{"name":"cpu","nominalQuota":"64"},{"name":"memory","nominalQuota":"512Gi"}]}]}]}}"#;
    get(
        &run,
        &["patch", "clusterqueue", "serving", "--type=merge", "-p", room],
    )
    .await;
    let manifests = [
        sample("rayservice.yaml"),
        sample("gated-upgrade/rayservice.yaml"),
        sample("incremental/rayservice.yaml"),
        fixture("ray-service.user-queue.yaml"),
        fixture("ray-cluster.user-queue.yaml"),
        fixture("ray-job.user-queue.yaml"),
    ];
    for m in &manifests {
        get(&run, &["apply", "-f", m]).await;
    }
    for rs in ["fruit-stand", "poc", "inc", "test-rayservice"] {
        let (ok, out) = run
            .kubectl(&[
                "wait",
                "--for=condition=Ready",
                &format!("rayservice/{rs}"),
                "--timeout=120s",
            ])
            .await;
        assert!(ok, "{rs}: {out}");
    }
    let (ok, out) = run
        .kubectl(&[
            "wait",
            "--for=jsonpath={.status.state}=ready",
            "raycluster/raycluster-complete",
            "--timeout=60s",
        ])
        .await;
    assert!(ok, "{out}");
    let (ok, out) = run
        .kubectl(&[
            "wait",
            "--for=condition=Admitted",
            "workloads",
            "--all",
            "--timeout=60s",
        ])
        .await;
    assert!(ok, "{out}");

    let not_the_ray_jobs = "ray.io/originated-from-crd!=RayJob";
    let snapshot = || async {
        let generations = get(
            &run,
            &[
                "get",
                "rayservices,rayclusters,rayjobs",
                "-o",
                "jsonpath={range .items[*]}{.kind}/{.metadata.name}={.metadata.generation} {end}",
            ],
        )
        .await;
        let clusters = get(
            &run,
            &[
                "get",
                "rayclusters",
                "-l",
                not_the_ray_jobs,
                "-o",
                "jsonpath={.items[*].metadata.uid}",
            ],
        )
        .await;
        // A Ray pod carries its cluster's name, not the cluster's origin labels (KubeRay's
        // `labelPod`), so the RayJob's pods are left out by the names of the other clusters: the
        // job may end, and its cluster and pods go, while the re-applies run.
        let names = get(
            &run,
            &[
                "get",
                "rayclusters",
                "-l",
                not_the_ray_jobs,
                "-o",
                "jsonpath={.items[*].metadata.name}",
            ],
        )
        .await;
        let names: Vec<&str> = names.split_whitespace().collect();
        let pods = get(
            &run,
            &[
                "get",
                "pods",
                "-l",
                &format!("ray.io/cluster in ({})", names.join(",")),
                "-o",
                "jsonpath={range .items[*]}{.metadata.name}={.metadata.uid} {end}",
            ],
        )
        .await;
        let workloads = get(
            &run,
            &[
                "get",
                "workloads",
                "-o",
                "jsonpath={range .items[*]}{.metadata.ownerReferences[0].kind}/{.metadata.uid} {end}",
            ],
        )
        .await;
        let workloads: Vec<String> = workloads
            .split_whitespace()
            .filter(|w| !w.starts_with("RayJob/"))
            .map(String::from)
            .collect();
        (generations, clusters, pods, workloads)
    };
    let before = snapshot().await;
    assert!(before.0.contains("RayJob/rayjob-sample="), "{}", before.0);
    assert!(
        !before.2.is_empty() && !before.2.contains("rayjob-sample"),
        "the snapshot holds the services' and the RayCluster's pods, not the RayJob's: {}",
        before.2
    );
    for m in &manifests {
        let (same, diff) = run.kubectl(&["diff", "-f", m]).await;
        if KUEUE_WRITES_TEMPLATES.iter().any(|k| m.ends_with(k)) {
            // As Kueue does, admission put the podset label (and any flavor's node selector) into a
            // RayJob's templates; the diff shows exactly that and the generation it bumped. A
            // RayCluster's admission writes nothing into its templates (issue 58: the RayCluster
            // controller puts them on the pods), so its re-apply is a no-op like the others.
            let changed: Vec<&str> = diff
                .lines()
                .filter(|l| {
                    (l.starts_with('+') || l.starts_with('-'))
                        && !l.starts_with("+++")
                        && !l.starts_with("---")
                })
                .collect();
            assert!(
                !same
                    && changed.iter().all(|l| [
                        "generation:",
                        "kueue.x-k8s.io/",
                        "labels:",
                        "metadata:",
                        "nodeSelector:"
                    ]
                    .iter()
                    .any(|k| l.contains(k))),
                "{m}: the diff shows more than Kueue's own writes:\n{diff}"
            );
        } else {
            assert!(same, "{m}: kubectl diff shows a change nobody made:\n{diff}");
        }
        get(&run, &["apply", "-f", m]).await;
    }
    // The first re-apply took Kueue's writes out of a RayJob's templates; from here
    // on every re-apply is a no-op, and none of them restarted or re-queued anything.
    let generations = snapshot().await.0;
    for m in &manifests {
        let (same, diff) = run.kubectl(&["diff", "-f", m]).await;
        assert!(same, "{m}: kubectl diff after a re-apply:\n{diff}");
        let out = get(&run, &["apply", "-f", m]).await;
        assert!(out.lines().all(|l| l.ends_with(" unchanged")), "{m}: {out}");
        get(&run, &["apply", "--server-side", "-f", m]).await;
    }
    tokio::time::sleep(Duration::from_secs(15)).await;
    let after = snapshot().await;
    assert_eq!(
        after.0, generations,
        "a re-apply of an unchanged manifest changed a generation"
    );
    assert_eq!(after.1, before.1, "a re-apply created or replaced a RayCluster");
    assert_eq!(
        after.2, before.2,
        "a pod was created or replaced after the re-applies"
    );
    assert_eq!(
        after.3, before.3,
        "a Workload was created or replaced after the re-applies"
    );
    run.stop().await;
}
