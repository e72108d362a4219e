//! The CEL rules of quotagate's CRDs (Kueue's and KubeRay's, `api/crd_markers.rs`), with the
//! messages kube-apiserver v1.36.3 answered for the same objects (issue 58).

use super::*;
use serde_json::json;

fn refused(crd: &str, new: Value, old: Option<Value>) -> Vec<String> {
    let crds = crate::api::all_crds();
    let crd = crds
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(crd))
        .unwrap();
    let v = crd.spec.versions.iter().find(|v| v.storage).unwrap();
    let schema =
        serde_json::to_value(v.schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap()).unwrap();
    let mut errors = Vec::new();
    validate(&schema, &new, old.as_ref(), "", &mut errors);
    errors.iter().map(|e| e.to_string()).collect()
}

fn cq(spec: Value) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec})
}

#[test]
fn cluster_queue_rules() {
    let crd = "clusterqueues.kueue.x-k8s.io";
    let group = |borrow: bool| {
        let mut r = json!({"name": "cpu", "nominalQuota": "3"});
        if borrow {
            r["borrowingLimit"] = json!("1");
        }
        json!([{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [r]}]}])
    };
    assert_eq!(
        refused(crd, cq(json!({"resourceGroups": group(false)})), None),
        Vec::<String>::new()
    );
    assert_eq!(
        refused(
            crd,
            cq(json!({"cohortName": "c", "resourceGroups": group(true)})),
            None
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        refused(crd, cq(json!({"resourceGroups": group(true)})), None),
        ["spec: Invalid value: borrowingLimit must be nil when cohort is empty"]
    );
    let two = json!([{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "3"}]}]}]);
    assert_eq!(
        refused(crd, cq(json!({"resourceGroups": two})), None),
        [
            "spec.resourceGroups[0]: Invalid value: flavors must have the same number of resources as the coveredResources"
        ]
    );
    assert_eq!(
        refused(
            crd,
            cq(
                json!({"flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor", "preference": "BorrowingOverPreemption"}})
            ),
            None
        ),
        [
            "spec.flavorFungibility: Invalid value: preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor"
        ]
    );
    assert_eq!(
        refused(
            crd,
            cq(
                json!({"preemption": {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}})
            ),
            None
        ),
        ["spec.preemption: Invalid value: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"]
    );
}

#[test]
fn transition_rules_need_the_old_object() {
    let lq = |cq: &str| json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "default"}, "spec": {"clusterQueue": cq}});
    let crd = "localqueues.kueue.x-k8s.io";
    assert!(refused(crd, lq("cq-b"), None).is_empty());
    assert!(refused(crd, lq("cq-a"), Some(lq("cq-a"))).is_empty());
    assert_eq!(
        refused(crd, lq("cq-b"), Some(lq("cq-a"))),
        ["spec.clusterQueue: Invalid value: \"cq-b\": field is immutable"]
    );
}

#[test]
fn an_evaluation_error_is_worded_as_the_real_servers() {
    let rf = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "rf"}, "spec": {"topologyName": "default"}});
    assert_eq!(
        refused("resourceflavors.kueue.x-k8s.io", rf, None),
        [
            "spec: Invalid value: \"object\": no such key: nodeLabels evaluating rule: at least one nodeLabel is required when topology is set"
        ]
    );
    let rf = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "rf"}, "spec": {"tolerations": [{"operator": "Equal", "value": "x", "effect": "NoSchedule"}]}});
    assert_eq!(
        refused("resourceflavors.kueue.x-k8s.io", rf, None),
        [
            "spec.tolerations: Invalid value: operator must be Exists when 'key' is empty, which means 'match all values and all keys'"
        ]
    );
}

#[test]
fn workload_rules_at_the_root_and_in_lists() {
    let crd = "workloads.kueue.x-k8s.io";
    let wl = |min: i64, assignments: Value| {
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "default"},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 2, "minCount": min, "template": {"spec": {"containers": [{"name": "c", "image": "b"}]}}}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "admission": {"clusterQueue": "cq", "podSetAssignments": assignments}}})
    };
    let one = json!([{"name": "main", "count": 2}]);
    assert_eq!(refused(crd, wl(1, one.clone()), None), Vec::<String>::new());
    // Kueue v0.20 (kueue#14720): `minimum: 0`.
    assert_eq!(refused(crd, wl(0, one.clone()), None), Vec::<String>::new());
    assert_eq!(
        refused(crd, wl(3, one), None),
        ["spec.podSets[0]: Invalid value: minCount should be less or equal to count"]
    );
    assert_eq!(
        refused(
            crd,
            wl(
                1,
                json!([{"name": "main", "count": 2}, {"name": "other", "count": 1}])
            ),
            None
        ),
        ["<nil>: Invalid value: podSetAssignments must have the same number of podSets as the spec"]
    );
}

#[test]
fn raycluster_managed_by() {
    let rc = |by: &str| {
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r", "namespace": "default"},
        "spec": {"managedBy": by, "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}}}}})
    };
    assert!(refused("rayclusters.ray.io", rc("ray.io/kuberay-operator"), None).is_empty());
    assert_eq!(
        refused("rayclusters.ray.io", rc("someone-else"), None),
        [
            "spec.managedBy: Invalid value: \"someone-else\": the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"
        ]
    );
}
