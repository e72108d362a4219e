//! KubeRay fidelity through the embedded API server (issue 15), one KubeRay rule per test, each naming
//! where KubeRay states it.

use kube::api::{Api, Patch, PatchParams, PostParams};
use quotagate::api::ray::{RayCluster, RayService};
use serde_json::json;

fn cluster_spec() -> serde_json::Value {
    json!({
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}},
        "workerGroupSpecs": []
    })
}

/// Source: KubeRay `ray-operator/apis/ray/v1/raycluster_types.go` and `rayservice_types.go`,
/// `spec.managedBy` with the CEL rule `self == oldSelf` ("the managedBy field is immutable"): a
/// MultiKueue-managed object cannot be handed to the KubeRay operator (which would start its pods),
/// nor the other way. Like a CEL transition rule, it applies when both versions set the field.
#[tokio::test]
async fn managed_by_is_immutable_on_rayclusters_and_rayservices() {
    let server = quotagate::wiring::manager::embedded_server();
    let client = server.client();
    let rcs: Api<RayCluster> = Api::namespaced(client.clone(), "default");
    let mut spec = cluster_spec();
    spec["managedBy"] = json!("kueue.x-k8s.io/multikueue");
    let rc: RayCluster = serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "default"}, "spec": spec}))
    .unwrap();
    rcs.create(&PostParams::default(), &rc).await.unwrap();
    let flip = |to: &str| Patch::Merge(json!({"spec": {"managedBy": to}}));
    let err = rcs
        .patch("rc", &PatchParams::default(), &flip("ray.io/kuberay-operator"))
        .await
        .expect_err("a managedBy change is refused");
    let msg = err.to_string();
    assert!(
        msg.contains("spec.managedBy") && msg.contains("the managedBy field is immutable"),
        "{msg}"
    );
    rcs.patch("rc", &PatchParams::default(), &flip("kueue.x-k8s.io/multikueue"))
        .await
        .expect("writing the same value is no change");
    let got = rcs.get("rc").await.unwrap();
    assert_eq!(got.spec.managed_by.as_deref(), Some("kueue.x-k8s.io/multikueue"));

    let rss: Api<RayService> = Api::namespaced(client, "default");
    let rs: RayService = serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "rs", "namespace": "default"},
        "spec": {"managedBy": "ray.io/kuberay-operator", "rayClusterConfig": cluster_spec()}}))
    .unwrap();
    rss.create(&PostParams::default(), &rs).await.unwrap();
    let err = rss
        .patch("rs", &PatchParams::default(), &flip("kueue.x-k8s.io/multikueue"))
        .await
        .expect_err("a managedBy change is refused");
    assert!(
        err.to_string().contains("the managedBy field is immutable"),
        "{err}"
    );
}

/// Source: KubeRay `ray-operator/controllers/ray/utils/validation.go` (ValidateRayClusterSpec) with the
/// v1.7 gates of `pkg/features/features.go`: `spec.tlsOptions` with RayClusterMTLS off is refused in
/// KubeRay's words; with the gate on (`--feature-gates`, reaching the embedded server's admission),
/// quotagate still refuses it, saying the feature is what it lacks.
#[tokio::test]
async fn alpha_fields_are_refused_by_gate_then_as_not_implemented() {
    let mut spec = cluster_spec();
    spec["tlsOptions"] = json!({});
    let rc: RayCluster = serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "tls", "namespace": "default"}, "spec": spec}))
    .unwrap();
    let refusal = |gates: &'static str| {
        let rc = rc.clone();
        async move {
            let gates = quotagate::api::ray::features::parse(gates).unwrap();
            let server = quotagate::wiring::manager::embedded_server_with(gates);
            let rcs: Api<RayCluster> = Api::namespaced(server.client(), "default");
            rcs.create(&PostParams::default(), &rc)
                .await
                .expect_err("refused")
                .to_string()
        }
    };
    let off = refusal("").await;
    assert!(
        off.contains("spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled"),
        "{off}"
    );
    let on = refusal("RayClusterMTLS=true").await;
    assert!(
        on.contains("spec.tlsOptions") && on.contains("not implemented by quotagate"),
        "{on}"
    );
    assert!(!on.contains("feature gate to be enabled"), "{on}");
}

/// `quotagate validate --feature-gates`: KubeRay's embedded-GCS sample is refused for its gate by default;
/// with the gate on, for the operator-managed PVC quotagate does not create; an unknown gate name is a
/// usage error, as in KubeRay ("unrecognized feature gate").
#[test]
fn validate_takes_kuberay_feature_gates() {
    let sample = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/manifests/kuberay/ray-cluster.embedded-gcs-ft.yaml"
    );
    let run = |gates: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_quotagate"))
            .args(["validate", "--feature-gates", gates, "-f", sample])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    let (code, out) = run("");
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("requires the GCSFaultToleranceEmbeddedStorage feature gate to be enabled"),
        "{out}"
    );
    let (code, out) = run("GCSFaultToleranceEmbeddedStorage=true");
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("is not implemented by quotagate"), "{out}");
    let (code, out) = run("NoSuchGate=true");
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("unrecognized feature gate: NoSuchGate"), "{out}");
}
