//! KubeRay's RayCluster e2e tests of GCS fault tolerance and multi-host worker groups
//! (`ray-operator/test/e2e/raycluster_gcs_ft_test.go`, `raycluster_embedded_gcs_ft_test.go`,
//! `raycluster_multi_host_test.go`), ported: what the operator writes into pods and how it numbers and
//! replaces them. Left out, because they need a real Ray or Redis: `TestRayClusterGCSFaultTolerance`
//! (detached actors surviving a head restart), `TestRayClusterEmbeddedGCSFaultTolerance` (RocksDB
//! recovery), and the Redis-emptied-after-deletion checks deferred in the two options tests (KubeRay's
//! Redis cleanup Job; quotagate serves no Jobs and has no cleanup step, see the README).

use std::collections::{BTreeMap, BTreeSet};

use super::e2e::{apply, apply_in, e2e_spec, head_template, wait_ready, worker_template};
use super::*;
use k8s_openapi::api::core::v1::{Namespace, Secret};

const REDIS_ADDRESS: &str = "redis:6379";
const REDIS_PASSWORD: &str = "5241590000000000";

async fn namespace(h: &Harness, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(h.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// RayClusterProvisioned True/AllPodRunningAndReadyFirstTime in `ns`, then the head pod named in
/// `status.head.podName`.
async fn provisioned_head(h: &Harness, ns: &str, name: &str) -> Pod {
    let clusters = Api::<RayCluster>::namespaced(h.client.clone(), ns);
    let rc = eventually(
        "RayClusterProvisioned True/AllPodRunningAndReadyFirstTime",
        || async {
            let rc = clusters.get(name).await.ok()?;
            let c = super::e2e::cond(&rc, "RayClusterProvisioned")?;
            (c.status == "True" && c.reason == "AllPodRunningAndReadyFirstTime").then_some(rc)
        },
    )
    .await;
    let pod_name = rc
        .status
        .and_then(|s| s.head)
        .and_then(|h| h.pod_name)
        .expect("status.head.podName");
    Api::<Pod>::namespaced(h.client.clone(), ns)
        .get(&pod_name)
        .await
        .unwrap()
}

fn ray_env(pod: &Pod) -> BTreeMap<String, k8s_openapi::api::core::v1::EnvVar> {
    let ray = &pod.spec.as_ref().unwrap().containers[0];
    ray.env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.clone()))
        .collect()
}

/// Source: `raycluster_gcs_ft_test.go` TestGcsFaultToleranceOptions, all five cases ("No Redis Password",
/// "Redis Password", "Redis Password and Username", "Redis Password In Secret", "Long RayCluster Name"),
/// each in its own namespace: the cluster is provisioned and the head's Ray container has
/// `RAY_REDIS_ADDRESS` and `RAY_external_storage_namespace`, and `REDIS_PASSWORD` exactly when a password
/// is configured; then the cluster is deleted.
#[test]
fn gcs_fault_tolerance_options() {
    scenario(async {
        let h = Harness::start();
        let secret_ref = json!({"secretKeyRef": {"name": "redis-password-secret", "key": "password"}});
        let cases = [
            (
                "no-password",
                "raycluster-gcsft",
                json!({"redisAddress": REDIS_ADDRESS}),
                false,
                false,
            ),
            (
                "password",
                "raycluster-gcsft",
                json!({"redisAddress": REDIS_ADDRESS, "redisPassword": {"value": REDIS_PASSWORD}}),
                true,
                false,
            ),
            (
                "password-and-username",
                "raycluster-gcsft",
                json!({"redisAddress": REDIS_ADDRESS, "redisUsername": {"value": "default"},
                    "redisPassword": {"value": REDIS_PASSWORD}}),
                true,
                false,
            ),
            (
                "password-in-secret",
                "raycluster-gcsft",
                json!({"redisAddress": REDIS_ADDRESS, "redisPassword": {"valueFrom": secret_ref}}),
                true,
                true,
            ),
            (
                "long-name",
                "raycluster-with-a-very-long-name-exceeding-k8s-limit",
                json!({"redisAddress": REDIS_ADDRESS}),
                false,
                false,
            ),
        ];
        for (ns, name, options, has_password, create_secret) in cases {
            namespace(&h, ns).await;
            if create_secret {
                let secret: Secret = serde_json::from_value(json!({
                    "metadata": {"name": "redis-password-secret", "namespace": ns},
                    "stringData": {"password": REDIS_PASSWORD}
                }))
                .unwrap();
                Api::<Secret>::namespaced(h.client.clone(), ns)
                    .create(&PostParams::default(), &secret)
                    .await
                    .unwrap();
            }
            let mut spec = e2e_spec();
            spec["gcsFaultToleranceOptions"] = options;
            apply_in(&h, ns, name, json!({}), spec)
                .await
                .unwrap_or_else(|e| panic!("{ns}: {e}"));
            let head = provisioned_head(&h, ns, name).await;
            let env = ray_env(&head);
            assert!(env.contains_key("RAY_REDIS_ADDRESS"), "{ns}");
            assert!(env.contains_key("RAY_external_storage_namespace"), "{ns}");
            assert_eq!(env.contains_key("REDIS_PASSWORD"), has_password, "{ns}");
            Api::<RayCluster>::namespaced(h.client.clone(), ns)
                .delete(name, &DeleteParams::default())
                .await
                .unwrap();
        }
    });
}

/// Source: `raycluster_gcs_ft_test.go` TestGcsFaultToleranceAnnotations, all four cases: the legacy
/// `ray.io/ft-enabled: "true"` annotation with `RAY_REDIS_ADDRESS` in the head template, a password from
/// the template's env or from rayStartParams `redis-password` (literal or `$REDIS_PASSWORD`), and a
/// `ray.io/external-storage-namespace` annotation: the head is provisioned with `RAY_REDIS_ADDRESS`,
/// `RAY_external_storage_namespace`, and `REDIS_PASSWORD` exactly when a password is configured.
#[test]
fn gcs_fault_tolerance_annotations() {
    scenario(async {
        let h = Harness::start();
        // (namespace, storage namespace, REDIS_PASSWORD env, rayStartParams redis-password)
        let cases = [
            ("without-password", "", "", ""),
            ("password-in-params", "", "", REDIS_PASSWORD),
            (
                "password-in-params-from-env",
                "",
                REDIS_PASSWORD,
                "$REDIS_PASSWORD",
            ),
            (
                "storage-namespace",
                "test-storage-ns",
                REDIS_PASSWORD,
                "$REDIS_PASSWORD",
            ),
        ];
        for (ns, storage_ns, password_env, password_param) in cases {
            namespace(&h, ns).await;
            let mut template = head_template("rayproject/ray:2.52.0");
            let mut env = vec![json!({"name": "RAY_REDIS_ADDRESS", "value": REDIS_ADDRESS})];
            if !password_env.is_empty() {
                env.push(json!({"name": "REDIS_PASSWORD", "value": password_env}));
            }
            template["spec"]["containers"][0]["env"] = json!(env);
            let mut params = json!({"dashboard-host": "0.0.0.0"});
            if !password_param.is_empty() {
                params["redis-password"] = json!(password_param);
            }
            let mut annotations = json!({"ray.io/ft-enabled": "true"});
            if !storage_ns.is_empty() {
                annotations["ray.io/external-storage-namespace"] = json!(storage_ns);
            }
            let spec = json!({"rayVersion": "2.52.0", "headGroupSpec": {"rayStartParams": params, "template": template}});
            let name = "raycluster-gcsft";
            apply_in(&h, ns, name, json!({"annotations": annotations}), spec)
                .await
                .unwrap_or_else(|e| panic!("{ns}: {e}"));
            let head = provisioned_head(&h, ns, name).await;
            let env = ray_env(&head);
            assert!(env.contains_key("RAY_REDIS_ADDRESS"), "{ns}");
            let storage = env
                .get("RAY_external_storage_namespace")
                .and_then(|e| e.value.clone());
            assert!(storage.is_some(), "{ns}");
            if !storage_ns.is_empty() {
                assert_eq!(storage.as_deref(), Some(storage_ns), "{ns}");
            }
            let has_password = !password_env.is_empty() || !password_param.is_empty();
            assert_eq!(env.contains_key("REDIS_PASSWORD"), has_password, "{ns}");
            Api::<RayCluster>::namespaced(h.client.clone(), ns)
                .delete(name, &DeleteParams::default())
                .await
                .unwrap();
        }
    });
}

/// Source: `raycluster_embedded_gcs_ft_test.go` TestRayClusterEmbeddedGCSFaultToleranceWiring, with the
/// GCSFaultToleranceEmbeddedStorage gate on as KubeRay runs it. Deliberate difference: KubeRay creates an
/// operator-managed `<cluster>-gcs-pvc` (1Gi, ReadWriteOnce, owned by the RayCluster); quotagate does not
/// make PVCs, so that spec is refused at admission naming `spec.gcsFaultToleranceOptions.backend` (README,
/// "Differences from KubeRay"). With the user's own claim (`storage.claimName`) the head is wired as
/// KubeRay wires it: `RAY_gcs_storage=rocksdb`, `RAY_gcs_storage_path=/data/gcs`, no `RAY_REDIS_ADDRESS`,
/// and the `gcs-storage` volume on that claim mounted at `/data/gcs`.
#[test]
fn embedded_gcs_fault_tolerance_wiring() {
    scenario(async {
        let gates = RayFeatureGates {
            embedded_gcs_storage: true,
            ..Default::default()
        };
        let h = Harness::start_with(gates);
        let name = "raycluster-embedded-gcsft-wiring";
        let mut spec = e2e_spec();
        spec["gcsFaultToleranceOptions"] =
            json!({"backend": "rocksdb", "storage": {"size": "1Gi", "accessModes": ["ReadWriteOnce"]}});
        let err = apply(&h, name, spec.clone())
            .await
            .expect_err("no operator-made PVC");
        assert!(
            err.to_string().contains("spec.gcsFaultToleranceOptions.backend"),
            "{err}"
        );
        assert!(
            err.to_string().contains("storage.claimName"),
            "the message says what to do instead: {err}"
        );

        spec["gcsFaultToleranceOptions"]["storage"] = json!({"claimName": "my-gcs-claim"});
        apply(&h, name, spec).await.expect("the user's claim is accepted");
        let heads = eventually("the head pod", || async {
            let p = h.pods(&head(name)).await;
            (p.len() == 1).then_some(p)
        })
        .await;
        let env = ray_env(&heads[0]);
        let value = |n: &str| env.get(n).and_then(|e| e.value.clone());
        assert_eq!(value("RAY_gcs_storage").as_deref(), Some("rocksdb"));
        assert_eq!(value("RAY_gcs_storage_path").as_deref(), Some("/data/gcs"));
        assert!(
            !env.contains_key("RAY_REDIS_ADDRESS"),
            "no Redis env on the embedded path"
        );
        let spec = heads[0].spec.as_ref().unwrap();
        let mounted = spec.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == "gcs-storage" && m.mount_path == "/data/gcs");
        assert!(mounted, "the gcs-storage mount");
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == "gcs-storage")
            .expect("the gcs-storage volume");
        assert_eq!(
            volume
                .persistent_volume_claim
                .as_ref()
                .map(|p| p.claim_name.as_str()),
            Some("my-gcs-claim")
        );
    });
}

/// KubeRay's `verifyWorkerGroupIndices`: `replicas * hosts` live pods in `group`; single-host pods carry
/// only a unique `ray.io/worker-group-replica-index`; multi-host pods also a replica name and a host index,
/// every replica with one index and `hosts` distinct host indices. `indices`, when given, is the exact set
/// of replica indices.
fn check_indices(
    pods: &[Pod],
    group: &str,
    hosts: usize,
    replicas: usize,
    indices: Option<&[u32]>,
) -> Result<(), String> {
    let pods: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.labels().get("ray.io/group").map(String::as_str) == Some(group))
        .collect();
    if pods.len() != replicas * hosts {
        return Err(format!(
            "{} pods in {group}, want {}",
            pods.len(),
            replicas * hosts
        ));
    }
    let label = |p: &Pod, k: &str| p.labels().get(k).cloned();
    let number = |p: &Pod, k: &str| -> Result<u32, String> {
        let v = label(p, k).ok_or_else(|| format!("{} has no {k}", p.name_any()))?;
        v.parse().map_err(|_| format!("{} has {k}={v}", p.name_any()))
    };
    let mut seen = BTreeSet::new();
    if hosts > 1 {
        let mut replicas_by_name: BTreeMap<String, (u32, BTreeSet<u32>)> = BTreeMap::new();
        for p in &pods {
            let id = label(p, "ray.io/worker-group-replica-name")
                .ok_or_else(|| format!("{} has no replica name", p.name_any()))?;
            let index = number(p, "ray.io/worker-group-replica-index")?;
            let host = number(p, "ray.io/replica-host-index")?;
            seen.insert(index);
            let entry = replicas_by_name
                .entry(id.clone())
                .or_insert((index, BTreeSet::new()));
            if entry.0 != index {
                return Err(format!("replica {id} has indices {} and {index}", entry.0));
            }
            if !entry.1.insert(host) {
                return Err(format!("replica {id} has host index {host} twice"));
            }
        }
        if replicas_by_name.len() != replicas || replicas_by_name.values().any(|(_, h)| h.len() != hosts) {
            return Err(format!("replicas and hosts: {replicas_by_name:?}"));
        }
    } else {
        for p in &pods {
            if label(p, "ray.io/worker-group-replica-name").is_some()
                || label(p, "ray.io/replica-host-index").is_some()
            {
                return Err(format!("single-host pod {} has multi-host labels", p.name_any()));
            }
            if !seen.insert(number(p, "ray.io/worker-group-replica-index")?) {
                return Err(format!("duplicate replica index on {}", p.name_any()));
            }
        }
    }
    match indices {
        Some(want) if seen != want.iter().copied().collect::<BTreeSet<_>>() => {
            Err(format!("replica indices {seen:?}, want {want:?}"))
        }
        _ => Ok(()),
    }
}

async fn wait_indices(
    h: &Harness,
    name: &str,
    group: &str,
    hosts: usize,
    replicas: usize,
    indices: Option<&[u32]>,
) {
    let what = format!("{replicas} replicas x {hosts} hosts in {group}, indices {indices:?}");
    let labels = format!("ray.io/cluster={name},ray.io/node-type=worker");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match check_indices(&h.pods(&labels).await, group, hosts, replicas, indices) {
            Ok(()) => return,
            Err(e) if tokio::time::Instant::now() >= deadline => panic!("timed out waiting for {what}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

fn multi_host_spec(
    group: &str,
    head_params: serde_json::Value,
    replicas: i32,
    min: i32,
    hosts: i32,
) -> serde_json::Value {
    json!({
        "rayVersion": "2.52.0",
        "headGroupSpec": {"rayStartParams": head_params, "template": head_template("rayproject/ray:2.52.0")},
        "workerGroupSpecs": [{"groupName": group, "replicas": replicas, "minReplicas": min, "maxReplicas": 5,
            "numOfHosts": hosts, "rayStartParams": {"num-cpus": "1"}, "template": worker_template("rayproject/ray:2.52.0")}]
    })
}

async fn delete_pod_where(h: &Harness, name: &str, pick: impl Fn(&Pod) -> bool) {
    let pods = h
        .pods(&format!("ray.io/cluster={name},ray.io/node-type=worker"))
        .await;
    let pod = pods.iter().find(|p| pick(p)).expect("a pod to delete");
    h.api::<Pod>()
        .delete(&pod.name_any(), &DeleteParams::default())
        .await
        .unwrap();
}

/// Source: `raycluster_multi_host_test.go` TestRayClusterSingleHostMultiSlice (RayMultiHostIndexing on,
/// as in quotagate always): three single-host workers numbered 0..2; the one with index 1 deleted comes
/// back as index 1; scaling to four adds index 3.
#[test]
fn single_host_multi_slice() {
    scenario(async {
        let h = Harness::start();
        let (name, group) = ("raycluster-singlehost", "single-host-group");
        apply(
            &h,
            name,
            multi_host_spec(group, json!({"num-cpus": "0"}), 3, 0, 1),
        )
        .await
        .expect("applied");
        wait_ready(&h, name).await;
        wait_indices(&h, name, group, 1, 3, Some(&[0, 1, 2])).await;

        delete_pod_where(&h, name, |p| {
            p.labels()
                .get("ray.io/worker-group-replica-index")
                .map(String::as_str)
                == Some("1")
        })
        .await;
        wait_indices(&h, name, group, 1, 3, Some(&[0, 1, 2])).await;

        apply(
            &h,
            name,
            multi_host_spec(group, json!({"num-cpus": "0"}), 4, 0, 1),
        )
        .await
        .expect("scaled up");
        wait_indices(&h, name, group, 1, 4, Some(&[0, 1, 2, 3])).await;
    });
}

/// Source: `raycluster_multi_host_test.go` TestRayClusterMultiHostMultiSlice: two replicas of four hosts
/// (8 pods, replica indices 0 and 1); scaling to one removes a whole replica (4 pods); scaling to three
/// gives 12 pods with indices 0..2; deleting one pod of a replica re-creates that replica whole, back to
/// 12 pods with indices 0..2.
#[test]
fn multi_host_multi_slice() {
    scenario(async {
        let h = Harness::start();
        let (name, group) = ("raycluster-multihost", "multi-host-group");
        let params = json!({"dashboard-host": "0.0.0.0"});
        apply(&h, name, multi_host_spec(group, params.clone(), 2, 0, 4))
            .await
            .expect("applied");
        wait_ready(&h, name).await;
        wait_indices(&h, name, group, 4, 2, Some(&[0, 1])).await;

        apply(&h, name, multi_host_spec(group, params.clone(), 1, 0, 4))
            .await
            .expect("scaled down");
        wait_indices(&h, name, group, 4, 1, None).await;

        apply(&h, name, multi_host_spec(group, params, 3, 0, 4))
            .await
            .expect("scaled up");
        wait_indices(&h, name, group, 4, 3, Some(&[0, 1, 2])).await;

        delete_pod_where(&h, name, |_| true).await;
        wait_indices(&h, name, group, 4, 3, Some(&[0, 1, 2])).await;
    });
}
