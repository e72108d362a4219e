//! KubeRay's RayCluster e2e tests (`ray-operator/test/e2e/raycluster_test.go`, `raycluster_auth_test.go`
//! and the one TLS case that needs no cert-manager from `raycluster_tls_test.go`), ported: each test names the KubeRay test it comes from and asserts what
//! that test observes, on the embedded cluster. KubeRay writes with server-side apply
//! (`TestApplyOptions`: a field manager, forced); so do these tests. Steps that need a real Ray (jobs
//! submitted inside the head) are left out where they occur.

use super::*;
use k8s_openapi::api::core::v1::{ResourceQuota, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

const RAY_VERSION: &str = "2.52.0";
const RAY_IMAGE: &str = "rayproject/ray:2.52.0";

fn container(name: &str, image: &str, mem_limit: &str) -> serde_json::Value {
    json!({"name": name, "image": image, "resources": {
        "requests": {"cpu": "300m", "memory": "1G"},
        "limits": {"cpu": "500m", "memory": mem_limit}}})
}

/// KubeRay's `HeadPodTemplateApplyConfiguration` (the ports are the defaults, so left out).
pub(super) fn head_template(image: &str) -> serde_json::Value {
    json!({"spec": {"containers": [container("ray-head", image, "2G")]}})
}

/// KubeRay's `WorkerPodTemplateApplyConfiguration`.
pub(super) fn worker_template(image: &str) -> serde_json::Value {
    json!({"spec": {"containers": [container("ray-worker", image, "1G")]}})
}

/// KubeRay's `NewRayClusterSpec()`: a head and one worker group `small-group` of exactly one worker.
pub(super) fn e2e_spec() -> serde_json::Value {
    json!({
        "rayVersion": RAY_VERSION,
        "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"}, "template": head_template(RAY_IMAGE)},
        "workerGroupSpecs": [{"groupName": "small-group", "replicas": 1, "minReplicas": 1, "maxReplicas": 1,
            "rayStartParams": {"num-cpus": "1"}, "template": worker_template(RAY_IMAGE)}]
    })
}

/// `RayClusters(ns).Apply(ctx, ac, TestApplyOptions)`.
pub(super) async fn apply(
    h: &Harness,
    name: &str,
    spec: serde_json::Value,
) -> Result<RayCluster, kube::Error> {
    apply_in(h, NS, name, json!({}), spec).await
}

/// Applies a RayCluster in namespace `ns`, with `metadata` (annotations) besides its name.
pub(super) async fn apply_in(
    h: &Harness,
    ns: &str,
    name: &str,
    metadata: serde_json::Value,
    spec: serde_json::Value,
) -> Result<RayCluster, kube::Error> {
    let mut meta = json!({"name": name, "namespace": ns});
    meta.as_object_mut()
        .unwrap()
        .extend(metadata.as_object().cloned().unwrap_or_default());
    let body = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec});
    let pp = PatchParams::apply("kuberay-e2e").force();
    Api::<RayCluster>::namespaced(h.client.clone(), ns)
        .patch(name, &pp, &Patch::Apply(&body))
        .await
}

pub(super) fn cond<'a>(rc: &'a RayCluster, type_: &str) -> Option<&'a Condition> {
    rc.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Gomega's `StatusCondition(type)` + `MatchCondition(status, reason)`.
pub(super) async fn wait_condition(
    h: &Harness,
    name: &str,
    type_: &str,
    status: &str,
    reason: &str,
) -> RayCluster {
    let what = format!("{type_}={status}/{reason} on {name}");
    eventually(&what, || async {
        let rc = h.cluster(name).await;
        cond(&rc, type_)
            .is_some_and(|c| c.status == status && c.reason == reason)
            .then_some(rc)
    })
    .await
}

/// `RayClusterState` equal to `ready`.
pub(super) async fn wait_ready(h: &Harness, name: &str) -> RayCluster {
    eventually("state ready", || async {
        let rc = h.cluster(name).await;
        (rc.status.as_ref()?.state == Some(ClusterState::Ready)).then_some(rc)
    })
    .await
}

/// Pods matching `labels`, terminating ones included (KubeRay's `GetWorkerPods`/`WorkerPods` list).
pub(super) async fn listed(h: &Harness, labels: &str) -> Vec<Pod> {
    h.api::<Pod>()
        .list(&ListParams::default().labels(labels))
        .await
        .unwrap()
        .items
}

/// Gomega's `Consistently`: `probe` holds at every check for `window`.
pub(super) async fn consistently<F, Fut>(what: &str, window: Duration, probe: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let end = tokio::time::Instant::now() + window;
    while tokio::time::Instant::now() < end {
        if let Err(e) = probe().await {
            panic!("{what} stopped holding: {e}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Source: `raycluster_test.go` TestRayClusterManagedBy, "Successful creation of cluster, managed by
/// Kuberay Operator": `managedBy: ray.io/kuberay-operator` becomes Ready.
#[test]
fn managed_by_kuberay_becomes_ready() {
    scenario(async {
        let h = Harness::start();
        let mut spec = e2e_spec();
        spec["managedBy"] = json!("ray.io/kuberay-operator");
        apply(&h, "raycluster-ok", spec).await.expect("applied");
        wait_ready(&h, "raycluster-ok").await;
    });
}

/// Source: `raycluster_test.go` TestRayClusterManagedBy, "Creation of cluster skipped, managed by Kueue":
/// a MultiKueue-managed cluster is left alone (no conditions for 3 s, no pods), and moving `managedBy`
/// afterwards is refused, leaving it as it was.
#[test]
fn managed_by_multikueue_is_not_reconciled() {
    scenario(async {
        let h = Harness::start();
        let name = "raycluster-skip";
        let mut spec = e2e_spec();
        spec["managedBy"] = json!("kueue.x-k8s.io/multikueue");
        apply(&h, name, spec.clone()).await.expect("applied");
        consistently("no conditions and no pods", Duration::from_secs(3), || async {
            let rc = h.cluster(name).await;
            let conditions = rc
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .map_or(0, Vec::len);
            let pods = listed(&h, &format!("ray.io/cluster={name}")).await.len();
            if conditions == 0 && pods == 0 {
                Ok(())
            } else {
                Err(format!("{conditions} conditions, {pods} pods"))
            }
        })
        .await;

        spec["managedBy"] = json!("ray.io/kuberay-operator");
        let err = apply(&h, name, spec).await.expect_err("managedBy is immutable");
        assert!(err.to_string().contains("spec.managedBy"), "{err}");
        let rc = h.cluster(name).await;
        assert_eq!(rc.spec.managed_by.as_deref(), Some("kueue.x-k8s.io/multikueue"));
    });
}

/// Source: `raycluster_test.go` TestRayClusterManagedBy, "Failed creation of cluster, managed by external
/// non supported controller": refused as Invalid (422).
#[test]
fn managed_by_an_unsupported_controller_is_invalid() {
    scenario(async {
        let h = Harness::start();
        let mut spec = e2e_spec();
        spec["managedBy"] = json!("controller.com/not-supported");
        let err = apply(&h, "raycluster-fail", spec).await.expect_err("refused");
        let kube::Error::Api(s) = &err else {
            panic!("{err}")
        };
        assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{err}");
        assert!(s.message.contains("spec.managedBy"), "{}", s.message);
    });
}

/// Source: `raycluster_test.go` TestRayClusterSuspend: Ready (HeadPodReady True/HeadPodRunningAndReady,
/// RayClusterProvisioned True/AllPodRunningAndReadyFirstTime); `suspend: true` gives RayClusterSuspended
/// True, HeadPodReady False/HeadPodNotFound and RayClusterProvisioned False/RayClusterPodsProvisioning;
/// `suspend: false` brings all three back.
#[test]
fn raycluster_suspend() {
    scenario(async {
        let h = Harness::start();
        let name = "raycluster-suspend";
        apply(&h, name, e2e_spec()).await.expect("applied");
        wait_condition(&h, name, "HeadPodReady", "True", "HeadPodRunningAndReady").await;
        wait_condition(
            &h,
            name,
            "RayClusterProvisioned",
            "True",
            "AllPodRunningAndReadyFirstTime",
        )
        .await;

        let mut spec = e2e_spec();
        spec["suspend"] = json!(true);
        apply(&h, name, spec.clone()).await.expect("suspended");
        wait_condition(&h, name, "RayClusterSuspended", "True", "RayClusterSuspended").await;
        wait_condition(&h, name, "HeadPodReady", "False", "HeadPodNotFound").await;
        wait_condition(
            &h,
            name,
            "RayClusterProvisioned",
            "False",
            "RayClusterPodsProvisioning",
        )
        .await;
        assert!(
            h.pods(&format!("ray.io/cluster={name}")).await.is_empty(),
            "a suspended cluster runs no pod"
        );

        spec["suspend"] = json!(false);
        apply(&h, name, spec).await.expect("resumed");
        wait_condition(&h, name, "RayClusterSuspended", "False", "RayClusterSuspended").await;
        wait_condition(&h, name, "HeadPodReady", "True", "HeadPodRunningAndReady").await;
        wait_condition(
            &h,
            name,
            "RayClusterProvisioned",
            "True",
            "AllPodRunningAndReadyFirstTime",
        )
        .await;
    });
}

/// Source: `raycluster_test.go` TestRayClusterWithResourceQuota: under a namespace ResourceQuota of
/// `limits.cpu: 0.1`, `limits.memory: 0.1Gi` (KubeRay's `CreateResourceQuota`) the head pod is refused and
/// the cluster reports ReplicaFailure True/FailedCreateHeadPod with the API server's "forbidden: exceeded
/// quota" message. Beyond KubeRay's test: the refusal is also a Warning event, no pod exists, the quota's
/// `status.used` stays 0, and the failed create is retried at the controller's requeue interval, not in a
/// tight loop (at most one attempt per interval, plus the watch-triggered first few).
#[test]
fn raycluster_with_resource_quota() {
    scenario(async {
        let h = Harness::start();
        let quota: ResourceQuota = serde_json::from_value(json!({
            "metadata": {"name": "test-quota", "namespace": NS},
            "spec": {"hard": {"limits.cpu": "0.1", "limits.memory": "0.1Gi"}}
        }))
        .unwrap();
        h.api::<ResourceQuota>()
            .create(&PostParams::default(), &quota)
            .await
            .unwrap();
        let name = "raycluster-resource-quota";
        apply(&h, name, e2e_spec()).await.expect("applied");
        let rc = wait_condition(&h, name, "ReplicaFailure", "True", "FailedCreateHeadPod").await;
        let message = &cond(&rc, "ReplicaFailure").unwrap().message;
        assert!(
            message.contains("forbidden: exceeded quota: test-quota"),
            "{message}"
        );
        assert!(
            !message.contains("Status {"),
            "the API's message, not a debug dump: {message}"
        );
        assert!(message.contains("limited: limits.cpu=100m"), "{message}");

        let warned = || async {
            let events = h.api::<Event>().list(&ListParams::default()).await.unwrap().items;
            events
                .iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
                .filter(|e| e.reason.as_deref() == Some("FailedCreateHeadPod"))
                .map(|e| 1 + e.series.as_ref().map_or(0, |s| s.count.max(1) - 1))
                .sum::<i32>()
        };
        let first = eventually("a FailedCreateHeadPod event", || async {
            Some(warned().await).filter(|n| *n > 0)
        })
        .await;
        let window = Duration::from_secs(2);
        tokio::time::sleep(window).await;
        let attempts = warned().await - first;
        // The harness requeues a busy cluster every 200 ms: ten intervals in the window, so ten attempts
        // (nine to ten measured), a few more allowed for watch-triggered passes.
        assert!(
            attempts <= 13,
            "{attempts} failed creates in {window:?}: a hot loop"
        );
        assert!(listed(&h, &format!("ray.io/cluster={name}")).await.is_empty());
        let rq = h.api::<ResourceQuota>().get("test-quota").await.unwrap();
        let used = rq.status.and_then(|s| s.used).unwrap_or_default();
        assert_eq!(used.get("limits.cpu").map(|q| q.0.as_str()), Some("0"));
    });
}

/// Source: `raycluster_test.go` TestRayClusterScalingDown: head and worker templates carry a finalizer,
/// two workers (min 1, max 5); once Ready, scaling to one worker marks exactly one worker pod for deletion
/// and leaves the head alone; removing the finalizers then lets it go.
#[test]
fn raycluster_scaling_down() {
    scenario(async {
        let h = Harness::start();
        let name = "raycluster-scaling-down";
        let with_finalizer = |mut t: serde_json::Value| {
            t["metadata"] = json!({"finalizers": ["test.kuberay.io/finalizers"]});
            t
        };
        let spec = |replicas: i32| {
            json!({
                "rayVersion": RAY_VERSION,
                "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"},
                    "template": with_finalizer(head_template(RAY_IMAGE))},
                "workerGroupSpecs": [{"groupName": "small-group", "replicas": replicas, "minReplicas": 1, "maxReplicas": 5,
                    "rayStartParams": {"num-cpus": "1"}, "template": with_finalizer(worker_template(RAY_IMAGE))}]
            })
        };
        apply(&h, name, spec(2)).await.expect("applied");
        wait_ready(&h, name).await;
        let all = listed(&h, &format!("ray.io/cluster={name}")).await;
        assert_eq!(all.len(), 3, "a head and two workers");

        apply(&h, name, spec(1)).await.expect("scaled down");
        eventually("exactly one of the two workers marked for deletion", || async {
            let workers = listed(&h, &workers(name)).await;
            let deleting = workers
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_some())
                .count();
            (workers.len() == 2 && deleting == 1).then_some(())
        })
        .await;
        let heads = listed(&h, &head(name)).await;
        assert_eq!(heads.len(), 1);
        assert!(
            heads[0].metadata.deletion_timestamp.is_none(),
            "the head is not deleted"
        );

        for p in &all {
            let patch = Patch::Merge(json!({"metadata": {"finalizers": []}}));
            h.api::<Pod>()
                .patch(&p.name_any(), &PatchParams::default(), &patch)
                .await
                .unwrap();
        }
        eventually("the scaled-down worker gone", || async {
            (listed(&h, &workers(name)).await.len() == 1).then_some(())
        })
        .await;
    });
}

/// Source: `raycluster_test.go` TestRayClusterUpgradeStrategy: with `upgradeStrategy.type: Recreate`, a new
/// rayVersion and image replace the head pod (a new name, Running, a different
/// `ray.io/upgrade-strategy-recreate-hash`) and leave one worker.
#[test]
fn raycluster_upgrade_strategy_recreate() {
    scenario(async {
        let h = Harness::start();
        let name = "raycluster-upgrade-recreate";
        let mut spec = e2e_spec();
        spec["upgradeStrategy"] = json!({"type": "Recreate"});
        apply(&h, name, spec.clone()).await.expect("applied");
        wait_ready(&h, name).await;
        let hash_key = "ray.io/upgrade-strategy-recreate-hash";
        let old_head = h.pods(&head(name)).await.remove(0);
        let old_hash = old_head.annotations().get(hash_key).cloned();
        assert!(old_hash.is_some(), "the head carries the recreate hash");
        assert_eq!(h.pods(&workers(name)).await.len(), 1);

        spec["rayVersion"] = json!("2.51.0");
        spec["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = json!("rayproject/ray:2.51.0");
        spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] =
            json!("rayproject/ray:2.51.0");
        apply(&h, name, spec).await.expect("updated");
        let new_head = eventually("a new head pod Running", || async {
            let heads = h.pods(&head(name)).await;
            heads.into_iter().find(|p| {
                p.name_any() != old_head.name_any()
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
        })
        .await;
        assert_ne!(new_head.annotations().get(hash_key).cloned(), old_hash);
        let image = &new_head.spec.as_ref().unwrap().containers[0].image;
        assert_eq!(image.as_deref(), Some("rayproject/ray:2.51.0"));
        worker_count(&h, name, 1).await;
    });
}

/// Source: `raycluster_auth_test.go` TestRayClusterAuthOptions, "RayCluster with token authentication
/// enabled": Ready, and the Ray container of the head and of every worker has `RAY_AUTH_MODE=token` and
/// `RAY_AUTH_TOKEN` from a Secret key holding a non-empty token. Left out: its "Submit job with (in)correct
/// auth token" steps, which run `ray job submit` inside the head (a real Ray).
#[test]
fn raycluster_with_token_auth() {
    scenario(async {
        let h = Harness::start();
        let name = "raycluster-auth-token";
        let mut spec = e2e_spec();
        spec["authOptions"] = json!({"mode": "token"});
        apply(&h, name, spec).await.expect("applied");
        wait_ready(&h, name).await;
        let mut pods = h.pods(&head(name)).await;
        assert_eq!(pods.len(), 1);
        let worker_pods = h.pods(&workers(name)).await;
        assert!(!worker_pods.is_empty());
        pods.extend(worker_pods);
        for pod in &pods {
            let ray = &pod.spec.as_ref().unwrap().containers[0];
            let env = |n: &str| ray.env.iter().flatten().find(|e| e.name == n).cloned();
            assert_eq!(
                env("RAY_AUTH_MODE").and_then(|e| e.value).as_deref(),
                Some("token"),
                "{}",
                pod.name_any()
            );
            let key = env("RAY_AUTH_TOKEN")
                .and_then(|e| e.value_from)
                .and_then(|v| v.secret_key_ref)
                .unwrap_or_else(|| panic!("RAY_AUTH_TOKEN from a Secret key in {}", pod.name_any()));
            let secret = h.api::<Secret>().get(&key.name).await.unwrap();
            let token = secret
                .data
                .unwrap_or_default()
                .remove(&key.key)
                .map(|b| b.0)
                .unwrap_or_default();
            assert!(!token.is_empty(), "the token in Secret {}", key.name);
        }
    });
}

/// Source: `raycluster_tls_test.go` TestRayClusterTLSEdgeCases, "TLS disabled has no TLS resources": a
/// cluster without `tlsOptions` becomes Ready with no `RAY_USE_TLS` env and no `ray-tls` volume on any
/// pod, and no `<cluster>-ca-secret…` Secret. The other TLS tests need cert-manager and are not ported:
/// quotagate does not implement mTLS, and refuses `spec.tlsOptions` at admission, even with the
/// RayClusterMTLS gate on (README, "Differences from KubeRay"), which the last step asserts.
#[test]
fn raycluster_without_tls_has_no_tls_resources() {
    scenario(async {
        let h = Harness::start();
        let name = "tls-disabled";
        apply(&h, name, e2e_spec()).await.expect("applied");
        wait_ready(&h, name).await;
        let pods = h.pods(&format!("ray.io/cluster={name}")).await;
        assert_eq!(pods.len(), 2, "a head and a worker");
        for pod in &pods {
            let spec = pod.spec.as_ref().unwrap();
            assert!(
                spec.containers[0]
                    .env
                    .iter()
                    .flatten()
                    .all(|e| e.name != "RAY_USE_TLS"),
                "{}",
                pod.name_any()
            );
            assert!(
                spec.volumes.iter().flatten().all(|v| v.name != "ray-tls"),
                "{}",
                pod.name_any()
            );
        }
        let secrets = h
            .api::<Secret>()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        let prefix = format!("{name}-ca-secret");
        assert!(
            secrets.iter().all(|s| !s.name_any().starts_with(&prefix)),
            "no CA secret"
        );

        let gates = RayFeatureGates {
            mtls: true,
            ..Default::default()
        };
        let h = Harness::start_with(gates);
        let mut spec = e2e_spec();
        spec["tlsOptions"] = json!({"enabled": true});
        let err = apply(&h, "tls-enabled", spec)
            .await
            .expect_err("mTLS is not implemented");
        assert!(err.to_string().contains("spec.tlsOptions"), "{err}");
    });
}
