//! quotagate's CRDs (Kueue's and KubeRay's kinds) and the shared samples created and read back.

use super::engine::*;
use super::sequences::*;
use super::values::*;
use serde_json::{Value, json};

fn rf(name: &str) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}})
}

fn cq(name: &str, quota: Value) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"],
            "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": quota}]}]}]}})
}

fn raycluster(f: impl Fn(&mut Value)) -> Value {
    with(
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"}, "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "ray-head", "image": "rayproject/ray:2.9.0"}]}}},
            "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 0, "maxReplicas": 2,
                "rayStartParams": {}, "template": {"spec": {"containers": [
                    {"name": "ray-worker", "image": "rayproject/ray:2.9.0"}]}}}]}}),
        f,
    )
}

fn workload(f: impl Fn(&mut Value)) -> Value {
    with(
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w"}, "spec": {
            "queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "1"}}}]}}}]}}),
        f,
    )
}

pub fn crds() -> Vec<Sequence> {
    let cq_name = "cq-{ns}";
    let mut out = vec![
        create_read("resourceflavor empty", RF, "rf-{ns}", rf("rf-{ns}")),
        create_read(
            "resourceflavor with nodeLabels and taints",
            RF,
            "rf-{ns}",
            with(
                rf("rf-{ns}"),
                |r| r["spec"] = json!({"nodeLabels": {"pool": "a"}, "nodeTaints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}),
            ),
        ),
        create_read(
            "resourceflavor taint effect Bogus",
            RF,
            "rf-{ns}",
            with(rf("rf-{ns}"), |r| {
                r["spec"] = json!({"nodeTaints": [{"key": "k", "effect": "Bogus"}]})
            }),
        ),
        create_read("clusterqueue valid", CQ, cq_name, cq(cq_name, json!("3"))),
        create_read(
            "clusterqueue nominalQuota -3",
            CQ,
            cq_name,
            cq(cq_name, json!("-3")),
        ),
        create_read(
            "clusterqueue nominalQuota not a quantity",
            CQ,
            cq_name,
            cq(cq_name, json!("lots")),
        ),
        create_read(
            "clusterqueue queueingStrategy Bogus",
            CQ,
            cq_name,
            with(cq(cq_name, json!("3")), |c| {
                c["spec"]["queueingStrategy"] = json!("Bogus")
            }),
        ),
        create_read(
            "clusterqueue flavor resources not matching coveredResources",
            CQ,
            cq_name,
            with(cq(cq_name, json!("3")), |c| {
                c["spec"]["resourceGroups"][0]["coveredResources"] = json!(["cpu", "memory"])
            }),
        ),
        create_read(
            "clusterqueue cohort name invalid",
            CQ,
            cq_name,
            with(cq(cq_name, json!("3")), |c| {
                c["spec"]["cohortName"] = json!("Not_Valid")
            }),
        ),
        create_read("localqueue valid", LQ, "lq", lq("lq")),
        create_read(
            "localqueue without clusterQueue",
            LQ,
            "lq",
            with(lq("lq"), |l| l["spec"] = json!({})),
        ),
        seq(
            "localqueue clusterQueue change",
            vec![
                post(LQ, lq("lq")),
                patch(
                    &format!("{LQ}/lq"),
                    MERGE,
                    json!({"spec": {"clusterQueue": "cq2"}}),
                ),
            ],
        ),
        create_read("workload valid", WL, "w", workload(|_| {})),
        create_read(
            "workload count -1",
            WL,
            "w",
            workload(|w| w["spec"]["podSets"][0]["count"] = json!(-1)),
        ),
        create_read(
            "workload without podSets",
            WL,
            "w",
            workload(|w| w["spec"]["podSets"] = json!([])),
        ),
        create_read(
            "workload podSet name invalid",
            WL,
            "w",
            workload(|w| w["spec"]["podSets"][0]["name"] = json!("Not_Valid")),
        ),
        create_read("raycluster valid", RC, "rc", raycluster(|_| {})),
        create_read(
            "raycluster without headGroupSpec",
            RC,
            "rc",
            raycluster(|r| {
                r["spec"].as_object_mut().unwrap().remove("headGroupSpec");
            }),
        ),
        create_read(
            "raycluster headGroupSpec serviceType Bogus",
            RC,
            "rc",
            raycluster(|r| r["spec"]["headGroupSpec"]["serviceType"] = json!("Bogus")),
        ),
        create_read(
            "raycluster worker replicas -1",
            RC,
            "rc",
            raycluster(|r| r["spec"]["workerGroupSpecs"][0]["replicas"] = json!(-1)),
        ),
        create_read(
            "raycluster worker group without groupName",
            RC,
            "rc",
            raycluster(|r| {
                r["spec"]["workerGroupSpecs"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("groupName");
            }),
        ),
        create_read(
            "raycluster with an unknown spec field dropped",
            RC,
            "rc",
            raycluster(|r| r["spec"]["bogus"] = json!(1)),
        ),
    ];
    out.push(seq(
        "raycluster suspend by merge patch",
        vec![
            post(RC, raycluster(|_| {})),
            patch(&format!("{RC}/rc"), MERGE, json!({"spec": {"suspend": true}})),
        ],
    ));
    out
}

/// Kinds the samples hold that both grounds serve: (apiVersion, kind) → (collection, namespaced).
fn collection(api_version: &str, kind: &str) -> Option<(String, bool)> {
    let (group_path, plural, namespaced) = match (api_version, kind) {
        ("v1", "ConfigMap") => ("/api/v1", "configmaps", true),
        ("v1", "Secret") => ("/api/v1", "secrets", true),
        ("v1", "Service") => ("/api/v1", "services", true),
        ("batch/v1", "Job") => ("/apis/batch/v1", "jobs", true),
        ("ray.io/v1", "RayCluster") => ("/apis/ray.io/v1", "rayclusters", true),
        ("ray.io/v1", "RayService") => ("/apis/ray.io/v1", "rayservices", true),
        ("ray.io/v1", "RayJob") => ("/apis/ray.io/v1", "rayjobs", true),
        ("kueue.x-k8s.io/v1beta2", "LocalQueue") => ("/apis/kueue.x-k8s.io/v1beta2", "localqueues", true),
        ("kueue.x-k8s.io/v1beta2", "ClusterQueue") => {
            ("/apis/kueue.x-k8s.io/v1beta2", "clusterqueues", false)
        }
        ("kueue.x-k8s.io/v1beta2", "ResourceFlavor") => {
            ("/apis/kueue.x-k8s.io/v1beta2", "resourceflavors", false)
        }
        _ => return None,
    };
    Some(if namespaced {
        (format!("{group_path}/namespaces/{{ns}}/{plural}"), true)
    } else {
        (format!("{group_path}/{plural}"), false)
    })
}

/// Each document of each sample, created (POST) and applied (server-side, as kubectl would), then
/// read back. Cluster-scoped names carry the namespace so sequences do not meet.
pub fn samples() -> Vec<Sequence> {
    // The shared samples sit beside the checkout (`../shared/manifests`); a checkout elsewhere (a
    // worktree) names them with QUOTAGATE_SHARED_MANIFESTS.
    let dir = std::env::var_os("QUOTAGATE_SHARED_MANIFESTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/manifests"));
    let mut files: Vec<_> = ["kueue", "kuberay"]
        .iter()
        .flat_map(|d| std::fs::read_dir(dir.join(d)).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    if files.is_empty() {
        println!(
            "samples: none found in {} (set QUOTAGATE_SHARED_MANIFESTS)",
            dir.display()
        );
    }
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let Ok(docs) = quotagate::api::manifest::load_documents(&text) else {
            continue;
        };
        let file = f
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".yaml")
            .to_string();
        for (i, mut doc) in docs.into_iter().enumerate() {
            let (Some(av), Some(kind)) = (doc["apiVersion"].as_str(), doc["kind"].as_str()) else {
                continue;
            };
            let kind = kind.to_string();
            let Some((coll, namespaced)) = collection(av, &kind) else {
                continue;
            };
            let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) else {
                continue;
            };
            meta.remove("namespace");
            let mut name = meta.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            if !namespaced {
                name = format!("{name}-{{ns}}");
                meta.insert("name".into(), json!(name));
            }
            let sample = format!("sample {file} #{i} {kind}");
            if name.is_empty() {
                // generateName: created, and the answer compared; there is no name to apply or read.
                out.push(seq(
                    leak(format!("{sample} created")),
                    vec![post(&coll, doc.clone())],
                ));
                continue;
            }
            let path = format!("{coll}/{name}");
            let body = doc.to_string();
            out.push(seq(
                leak(format!("{sample} created")),
                vec![post(&coll, doc.clone()), get(&path)],
            ));
            out.push(seq(
                leak(format!("{sample} applied")),
                vec![
                    apply(
                        &format!("{path}?fieldManager=kubectl&fieldValidation=Strict"),
                        &body,
                    ),
                    get(&path),
                ],
            ));
        }
    }
    out
}
