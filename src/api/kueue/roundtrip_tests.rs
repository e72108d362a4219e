//! Every Kueue document under tests/fixtures/manifests/kueue/ (and the upstream samples in
//! ../shared/manifests/kueue/, where a checkout beside this one has them) round-trips through our
//! types, and the generated CRDs carry Kueue's names, scope and printer columns.

use std::path::Path;

use kube::CustomResourceExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::*;

/// Equal JSON trees, except that a YAML number where a quantity is expected comes back as the
/// same number in string form (`nominalQuota: 9` → `"9"`), as it does from a real API server.
fn same_tree(original: &Value, back: &Value) -> bool {
    match (original, back) {
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| same_tree(v, w)))
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(v, w)| same_tree(v, w))
        }
        (Value::Number(n), Value::String(s)) => n.to_string() == *s,
        _ => original == back,
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(doc: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

fn round_trip_kind(kind: &str, doc: &Value) -> Result<Value, String> {
    match kind {
        "ResourceFlavor" => round_trip::<ResourceFlavor>(doc),
        "ClusterQueue" => round_trip::<ClusterQueue>(doc),
        "Cohort" => round_trip::<Cohort>(doc),
        "LocalQueue" => round_trip::<LocalQueue>(doc),
        "Workload" => round_trip::<Workload>(doc),
        "WorkloadPriorityClass" => round_trip::<WorkloadPriorityClass>(doc),
        "Topology" => round_trip::<Topology>(doc),
        "AdmissionCheck" => round_trip::<AdmissionCheck>(doc),
        "MultiKueueConfig" => round_trip::<MultiKueueConfig>(doc),
        "MultiKueueCluster" => round_trip::<MultiKueueCluster>(doc),
        other => Err(format!("no type for kind {other}")),
    }
}

/// The upstream Kueue samples' folder, when a checkout beside this one has it.
pub(crate) fn upstream_kueue_dir() -> Option<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/manifests/kueue");
    dir.is_dir().then_some(dir)
}

/// Every Kueue document of the repository's fixtures, then of the upstream samples where present,
/// each named `file#index`.
pub(crate) fn kueue_manifest_docs() -> Vec<(String, Value)> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifests/kueue");
    let mut files = Vec::new();
    for dir in std::iter::once(fixtures).chain(upstream_kueue_dir()) {
        let mut these: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        these.sort();
        files.extend(these);
    }
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        for (i, doc) in docs.into_iter().enumerate() {
            let is_kueue = doc
                .get("apiVersion")
                .and_then(Value::as_str)
                .is_some_and(|v| v.starts_with("kueue.x-k8s.io/"));
            if is_kueue {
                out.push((format!("{}#{i}", f.file_name().unwrap().to_string_lossy()), doc));
            }
        }
    }
    out
}

#[test]
fn kueue_manifests_round_trip() {
    let docs = kueue_manifest_docs();
    let want = if upstream_kueue_dir().is_some() {
        25
    } else {
        println!("skipped: no upstream Kueue samples in ../shared/manifests/kueue/");
        10
    };
    assert!(
        docs.len() >= want,
        "expected the Kueue sample manifests, found {}",
        docs.len()
    );
    for (name, doc) in docs {
        let kind = doc["kind"].as_str().unwrap();
        let back = round_trip_kind(kind, &doc).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            same_tree(&doc, &back),
            "{name} ({kind}) changed on round trip:\n{doc:#}\n---\n{back:#}"
        );
    }
}

#[test]
fn round_trip_keeps_absent_and_empty_apart() {
    // No spec stays no spec; an empty selector stays `{}` (all namespaces), absent stays absent (none).
    let rf = serde_json::json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}});
    assert_eq!(round_trip_kind("ResourceFlavor", &rf).unwrap(), rf);
    let cq = serde_json::json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "a"},
        "spec": {"namespaceSelector": {}, "preemption": {"borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
        "reclaimWithinCohort": "Any"}, "flavorFungibility": {"whenCanBorrow": "TryNextFlavor"}, "stopPolicy": "Hold"}});
    assert_eq!(round_trip_kind("ClusterQueue", &cq).unwrap(), cq);
    let wpc = serde_json::json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "p"}, "value": 1000, "description": "d"});
    assert_eq!(round_trip_kind("WorkloadPriorityClass", &wpc).unwrap(), wpc);
}

#[test]
fn workload_with_status_round_trips() {
    let wl = serde_json::json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "job-a-1f2e3", "namespace": "ns"},
        "spec": {"queueName": "lq", "priority": 10,
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
            "podSets": [{"name": "main", "count": 2, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
        "status": {
            "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "2"}, "count": 2}]},
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "requeueState": {"count": 1, "requeueAt": "2026-01-01T00:01:00Z"},
            "schedulingStats": {"evictions": [{"reason": "Preempted", "underlyingCause": "InClusterQueue", "count": 1}]},
            "admissionChecks": [{"name": "ac", "state": "Ready", "lastTransitionTime": "2026-01-01T00:00:00Z", "message": ""}]}});
    assert_eq!(round_trip_kind("Workload", &wl).unwrap(), wl);
    let typed: Workload = serde_json::from_value(wl).unwrap();
    assert!(typed.has_quota_reservation());
    assert!(!typed.is_admitted());
}

#[test]
fn crds_carry_kueue_names_scope_and_columns() {
    let crds = crds();
    let find = |name: &str| {
        crds.iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .unwrap()
    };
    let cases = [
        (
            "resourceflavors.kueue.x-k8s.io",
            "Cluster",
            vec!["flavor", "flavors", "rf"],
            vec![],
        ),
        (
            "clusterqueues.kueue.x-k8s.io",
            "Cluster",
            vec!["cq"],
            vec!["Cohort", "Strategy", "Pending Workloads", "Admitted Workloads"],
        ),
        ("cohorts.kueue.x-k8s.io", "Cluster", vec!["co"], vec![]),
        (
            "localqueues.kueue.x-k8s.io",
            "Namespaced",
            vec!["queue", "queues", "lq"],
            vec!["ClusterQueue", "Pending Workloads", "Admitted Workloads"],
        ),
        (
            "workloads.kueue.x-k8s.io",
            "Namespaced",
            vec!["kwl", "kueueworkload", "kueueworkloads"],
            vec!["Queue", "Reserved in", "Admitted", "Finished", "Age"],
        ),
        (
            "workloadpriorityclasses.kueue.x-k8s.io",
            "Cluster",
            vec!["wpc"],
            vec!["Value"],
        ),
        ("topologies.kueue.x-k8s.io", "Cluster", vec!["topo"], vec![]),
        ("admissionchecks.kueue.x-k8s.io", "Cluster", vec!["ac"], vec![]),
        (
            "multikueueconfigs.kueue.x-k8s.io",
            "Cluster",
            vec!["mkconf"],
            vec![],
        ),
        (
            "multikueueclusters.kueue.x-k8s.io",
            "Cluster",
            vec!["mkc"],
            vec!["Connected", "Age"],
        ),
    ];
    assert_eq!(crds.len(), cases.len());
    for (name, scope, short, columns) in cases {
        let crd = find(name);
        assert_eq!(crd.spec.scope, scope, "{name}");
        assert_eq!(
            crd.spec.names.short_names.clone().unwrap_or_default(),
            short,
            "{name}"
        );
        let v = &crd.spec.versions[0];
        assert_eq!(v.name, "v1beta2");
        let got: Vec<String> = v
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(got, columns, "{name}");
    }
    let cq = &find("clusterqueues.kueue.x-k8s.io").spec.versions[0];
    let priorities: Vec<Option<i32>> = cq
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.priority)
        .collect();
    assert_eq!(
        priorities,
        [None, Some(1), None, Some(1)],
        "Strategy and Admitted Workloads only with -o wide"
    );
    let wl = &find("workloads.kueue.x-k8s.io").spec.versions[0];
    let age = wl
        .additional_printer_columns
        .iter()
        .flatten()
        .find(|c| c.name == "Age")
        .unwrap();
    assert_eq!(
        (age.type_.as_str(), age.json_path.as_str()),
        ("date", ".metadata.creationTimestamp")
    );
    let selectable: Vec<&str> = wl
        .selectable_fields
        .iter()
        .flatten()
        .map(|f| f.json_path.as_str())
        .collect();
    assert_eq!(selectable, [".status.admission.clusterQueue"]);
    // Kueue: status subresource on CQ, Cohort, LQ and Workload; none on RF, WPC, Topology.
    for (name, has_status) in [
        ("admissionchecks", true),
        ("clusterqueues", true),
        ("cohorts", true),
        ("localqueues", true),
        ("workloads", true),
        ("resourceflavors", false),
        ("workloadpriorityclasses", false),
        ("multikueueclusters", true),
        ("multikueueconfigs", false),
    ] {
        let crd = find(&format!("{name}.kueue.x-k8s.io"));
        let status = crd.spec.versions[0]
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some();
        assert_eq!(status, has_status, "{name}");
    }
}

#[test]
fn crd_schemas_are_optional_where_kueue_is_and_show_defaults() {
    let schema = |crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition| {
        serde_json::to_value(crd.spec.versions[0].schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap()).unwrap()
    };
    let rf = schema(ResourceFlavor::crd());
    let required = rf.get("required").cloned().unwrap_or(Value::Array(vec![]));
    assert!(
        !required.as_array().unwrap().iter().any(|r| r == "spec"),
        "ResourceFlavor spec must be optional: {required}"
    );
    assert!(rf["properties"]["spec"]["properties"]["nodeLabels"].is_object());

    let cq = schema(ClusterQueue::crd());
    let spec = &cq["properties"]["spec"]["properties"];
    assert_eq!(spec["queueingStrategy"]["default"], "BestEffortFIFO");
    assert_eq!(
        spec["preemption"]["properties"]["reclaimWithinCohort"]["default"],
        "Never"
    );
    assert_eq!(
        spec["flavorFungibility"]["properties"]["whenCanPreempt"]["default"],
        "TryNextFlavor"
    );

    let wpc = schema(WorkloadPriorityClass::crd());
    assert!(
        wpc["properties"]["value"].is_object(),
        "value is top-level: {wpc}"
    );
    assert!(wpc["properties"].get("spec").is_none());
}

#[test]
fn accessors_give_kueue_defaults() {
    let cq = ClusterQueueSpec::default();
    assert_eq!(cq.queueing_strategy(), QueueingStrategy::BestEffortFIFO);
    assert_eq!(cq.stop_policy(), StopPolicy::None);
    assert_eq!(cq.preemption().reclaim_within_cohort(), PreemptionPolicy::Never);
    assert_eq!(
        cq.preemption().borrow_within_cohort().policy(),
        BorrowWithinCohortPolicy::Never
    );
    assert_eq!(
        cq.flavor_fungibility().when_can_borrow(),
        FlavorFungibilityPolicy::MayStopSearch
    );
    assert_eq!(
        cq.flavor_fungibility().when_can_preempt(),
        FlavorFungibilityPolicy::TryNextFlavor
    );
    assert_eq!(cq.cohort(), None);
    let ps = PodSet::default();
    assert_eq!((ps.name(), ps.count()), ("main", 1));
    assert!(WorkloadSpec::default().active());
    assert_eq!(FairSharing::default().weight().0, "1");
}

#[test]
fn builders_make_what_they_say() {
    let cq = ClusterQueue::build("cq")
        .cohort("c")
        .flavor("on-demand", [("cpu", "10"), ("memory", "10Gi")])
        .flavor("spot", [("cpu", "5"), ("memory", "5Gi")])
        .flavor("gpu-a", [("nvidia.com/gpu", "8")])
        .build();
    let groups = cq.spec.resource_groups();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].covered_resources, ["cpu", "memory"]);
    assert_eq!(
        groups[0]
            .flavors
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>(),
        ["on-demand", "spot"]
    );
    assert_eq!(groups[1].flavors[0].resources[0].nominal_quota.0, "8");
    assert_eq!(cq.spec.cohort(), Some("c"));

    let wl = Workload::build("w", "ns")
        .queue("lq")
        .podset("main", 3, [("cpu", "500m"), ("memory", "1Gi")])
        .reserve_quota("cq", "on-demand")
        .build();
    assert!(wl.has_quota_reservation() && !wl.is_admitted());
    let a = wl.admission().unwrap();
    assert_eq!(a.pod_set_assignments[0].flavors["cpu"], "on-demand");
    assert_eq!(a.pod_set_assignments[0].count, Some(3));
    let usage = &a.pod_set_assignments[0].resource_usage;
    assert_eq!(
        (usage["cpu"].0.as_str(), usage["memory"].0.as_str()),
        ("1500m", "3Gi")
    );
}

/// Kueue's own AdmissionCheck shape (`config/components/crd/bases/kueue.x-k8s.io_admissionchecks.yaml`,
/// the ProvisioningRequest sample of its docs): every field survives a round trip, status included.
#[test]
fn admission_check_round_trips() {
    let ac = serde_json::json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
        "metadata": {"name": "sample-prov"},
        "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prov-test-config"}},
        "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active", "message": "The admission check is active",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    assert_eq!(round_trip_kind("AdmissionCheck", &ac).unwrap(), ac);
    let typed: AdmissionCheck = serde_json::from_value(ac).unwrap();
    assert!(typed.is_active());
    let bare = serde_json::json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "c"}, "spec": {"controllerName": "x"}});
    assert_eq!(round_trip_kind("AdmissionCheck", &bare).unwrap(), bare);
    assert!(
        !serde_json::from_value::<AdmissionCheck>(bare)
            .unwrap()
            .is_active()
    );
}
