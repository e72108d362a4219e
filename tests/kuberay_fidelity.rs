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
    let rc: RayCluster =
        serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": "default"}, "spec": spec}))
        .unwrap();
    rcs.create(&PostParams::default(), &rc).await.unwrap();
    let flip = |to: &str| Patch::Merge(json!({"spec": {"managedBy": to}}));
    let err = rcs
        .patch(
            "rc",
            &PatchParams::default(),
            &flip("ray.io/kuberay-operator"),
        )
        .await
        .expect_err("a managedBy change is refused");
    let msg = err.to_string();
    assert!(
        msg.contains("spec.managedBy") && msg.contains("the managedBy field is immutable"),
        "{msg}"
    );
    rcs.patch(
        "rc",
        &PatchParams::default(),
        &flip("kueue.x-k8s.io/multikueue"),
    )
    .await
    .expect("writing the same value is no change");
    let got = rcs.get("rc").await.unwrap();
    assert_eq!(
        got.spec.managed_by.as_deref(),
        Some("kueue.x-k8s.io/multikueue")
    );

    let rss: Api<RayService> = Api::namespaced(client, "default");
    let rs: RayService =
        serde_json::from_value(json!({"apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "rs", "namespace": "default"},
        "spec": {"managedBy": "ray.io/kuberay-operator", "rayClusterConfig": cluster_spec()}}))
        .unwrap();
    rss.create(&PostParams::default(), &rs).await.unwrap();
    let err = rss
        .patch(
            "rs",
            &PatchParams::default(),
            &flip("kueue.x-k8s.io/multikueue"),
        )
        .await
        .expect_err("a managedBy change is refused");
    assert!(
        err.to_string().contains("the managedBy field is immutable"),
        "{err}"
    );
}
