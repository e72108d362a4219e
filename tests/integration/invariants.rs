//! The invariant watcher of the gated-upgrade scenarios lives in the library
//! (`quotagate::cli::chaos::invariants`, shared with `quotagate chaos`); this wraps it with the
//! scenarios' assertion and checks that it catches a planted violation of each invariant.

use std::sync::Arc;

use kube::Client;
use kube::api::Api;

pub struct Invariants(quotagate::cli::chaos::invariants::Invariants);

impl Invariants {
    pub fn start(client: Client) -> Invariants {
        Invariants(quotagate::cli::chaos::invariants::Invariants::start(client))
    }

    /// Panics with every violation seen so far; returns how many checks ran.
    pub fn assert_clean(&self) -> u64 {
        let v = self.0.violations();
        assert!(v.is_empty(), "invariant violations:\n{}", v.join("\n"));
        let n = self.0.checks();
        assert!(n > 0, "the invariant watcher ran no check");
        n
    }

    /// Every violation seen so far.
    pub fn violations(&self) -> Vec<String> {
        self.0.violations()
    }
}

/// The watcher must report what it is there to catch: with no manager running and admission off, objects
/// written straight into the API break I1 (a ClusterQueue holding more than its quota), I2 (a pod of a
/// queue-managed RayService's child with no slice at all), I4 (the active cluster changed while an upgrade
/// waits), I5 (two unlinked slices of one chain holding quota) and I6 (two pending slices of one chain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_reports_a_planted_violation_of_each_invariant() {
    use kube::api::{Patch, PatchParams, PostParams};
    use serde_json::json;

    let server = quotagate::embedded::EmbeddedServer::new(
        &quotagate::api::all_crds(),
        Arc::new(quotagate::embedded::AllowAll),
    );
    let client = server.client();
    let inv = Invariants::start(client.clone());
    let pp = PostParams::default();
    let create = |v: serde_json::Value| serde_json::from_value::<kube::core::DynamicObject>(v).unwrap();
    let api = |group: &str, version: &str, kind: &str, plural: &str, ns: bool| {
        let ar = kube::core::ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: if group.is_empty() {
                version.into()
            } else {
                format!("{group}/{version}")
            },
            kind: kind.into(),
            plural: plural.into(),
        };
        if ns {
            Api::<kube::core::DynamicObject>::namespaced_with(client.clone(), "default", &ar)
        } else {
            Api::<kube::core::DynamicObject>::all_with(client.clone(), &ar)
        }
    };

    // I1: a 1-CPU ClusterQueue and a Workload reserving 2 CPU in it.
    api("kueue.x-k8s.io", "v1beta2", "ClusterQueue", "clusterqueues", false)
        .create(&pp, &create(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": "cq"}, "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
            "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}})))
        .await
        .unwrap();
    let wls = api("kueue.x-k8s.io", "v1beta2", "Workload", "workloads", true);
    let workload = |name: &str, job_uid: &str| {
        create(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/job-uid": job_uid}},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}}]}}))
    };
    wls.create(&pp, &workload("big", "none")).await.unwrap();
    let reserve = json!({"status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1,
        "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "2"}}]},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "planted",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    wls.patch_status("big", &PatchParams::default(), &Patch::Merge(&reserve))
        .await
        .unwrap();

    // I2 and I6: a queue-managed RayService, a child RayCluster it controls, a head pod of that child,
    // no admitted slice, and two pending slices of its chain.
    let rs = api("ray.io", "v1", "RayService", "rayservices", true)
        .create(&pp, &create(json!({"apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": "rs", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"rayClusterConfig": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "1"}}}]}}}}}})))
        .await
        .unwrap();
    let uid = rs.metadata.uid.clone().unwrap();
    api("ray.io", "v1", "RayCluster", "rayclusters", true)
        .create(&pp, &create(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rs-child", "namespace": "default", "ownerReferences": [{"apiVersion": "ray.io/v1",
                "kind": "RayService", "name": "rs", "uid": uid, "controller": true}]},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "1"}}}]}}}}})))
        .await
        .unwrap();
    api("", "v1", "Pod", "pods", true)
        .create(&pp, &create(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "rs-child-head", "namespace": "default", "labels": {"ray.io/cluster": "rs-child", "ray.io/node-type": "head"}},
            "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}})))
        .await
        .unwrap();
    wls.create(&pp, &workload("slice-a", &uid)).await.unwrap();
    wls.create(&pp, &workload("slice-b", &uid)).await.unwrap();

    // I5 and I4: two slices of the chain hold quota without a replacement link between them, and while
    // a slice of the chain waits for quota, the service's active cluster changes its spec.
    wls.create(&pp, &workload("slice-c", &uid)).await.unwrap();
    wls.patch_status("slice-c", &PatchParams::default(), &Patch::Merge(&reserve))
        .await
        .unwrap();
    wls.create(&pp, &workload("slice-d", &uid)).await.unwrap();
    wls.patch_status("slice-d", &PatchParams::default(), &Patch::Merge(&reserve))
        .await
        .unwrap();
    let active = json!({"status": {"activeServiceStatus": {"rayClusterName": "rs-child"}}});
    api("ray.io", "v1", "RayService", "rayservices", true)
        .patch_status("rs", &PatchParams::default(), &Patch::Merge(&active))
        .await
        .unwrap();
    // The watcher takes the active cluster's baseline on a check after the status write.
    let seen = inv.0.checks();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let cqs = api(
        "kueue.x-k8s.io",
        "v1beta2",
        "ClusterQueue",
        "clusterqueues",
        false,
    );
    let mut poke = 0;
    while inv.0.checks() < seen + 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watcher ran no check after the status write"
        );
        // Another event, so that a second check runs even when nothing else happens.
        poke += 1;
        let touch = json!({"metadata": {"annotations": {"test/poke": poke.to_string()}}});
        cqs.patch("cq", &PatchParams::default(), &Patch::Merge(&touch))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let upgrade = json!({"spec": {"rayVersion": "2.47.0"}});
    api("ray.io", "v1", "RayCluster", "rayclusters", true)
        .patch("rs-child", &PatchParams::default(), &Patch::Merge(&upgrade))
        .await
        .unwrap();

    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let v = inv.violations();
        let found = |p: &str| v.iter().any(|m| m.starts_with(p));
        if found("I1: ClusterQueue cq admitted a workload while using")
            && found("I2: RayCluster rs-child group head has 1 pods")
            && found("I6: RayService rs has 2 pending slices")
            && found("I5: RayService rs holds quota in 2 slices")
            && found("I4: RayService rs's active cluster rs-child changed its spec")
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watcher missed a planted violation; it reported: {v:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
