//! Every KubeRay and Gateway API document in tests/fixtures/manifests/kuberay/ (and in the upstream
//! samples of ../shared/manifests/kuberay/, where a checkout beside this one has them) must survive
//! deserialize -> serialize without losing or inventing fields.

use std::path::PathBuf;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::gateway::{Gateway, GatewayClass, HTTPRoute};
use crate::api::ray::{RayCluster, RayJob, RayService};

/// The upstream KubeRay samples' folder, when a checkout beside this one has it.
pub(crate) fn upstream_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/manifests/kuberay");
    dir.is_dir().then_some(dir)
}

/// Every document of the repository's KubeRay fixtures, then of the upstream samples where present,
/// each with its file's name.
pub(crate) fn kuberay_docs() -> Vec<(String, Value)> {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifests/kuberay");
    let mut out = Vec::new();
    let mut files = Vec::new();
    for dir in std::iter::once(fixtures).chain(upstream_dir()) {
        let mut these: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        these.sort();
        files.extend(these);
    }
    for path in files {
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        // Kubernetes reads YAML 1.1, where `defaultMode: 0777` is octal (511), as kubectl does.
        let mut opts = serde_saphyr::Options::default();
        opts.legacy_octal_numbers = true;
        let docs: Vec<Value> = serde_saphyr::from_multiple_with_options(&text, opts).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            out.push((name.clone(), doc));
        }
    }
    out
}

/// Same tree, with the two normalisations a real API server also applies: k8s-openapi writes every Quantity as a
/// string (`cpu: 1` comes back as `"1"`), and a null field (`metadata:` with nothing after it) is dropped, as the
/// API server prunes nulls of non-nullable CRD fields.
fn same_tree(original: &Value, back: &Value) -> bool {
    match (original, back) {
        (Value::Object(a), Value::Object(b)) => {
            let kept: Vec<_> = a.iter().filter(|(_, v)| !v.is_null()).collect();
            kept.len() == b.len()
                && kept
                    .iter()
                    .all(|(k, v)| b.get(k.as_str()).is_some_and(|w| same_tree(v, w)))
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(v, w)| same_tree(v, w))
        }
        (Value::Number(n), Value::String(s)) => n.to_string() == *s,
        _ => original == back,
    }
}

fn roundtrip<T: DeserializeOwned + Serialize>(file: &str, doc: &Value) {
    let typed: T = serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{file}: {e}"));
    let back = serde_json::to_value(&typed).unwrap();
    assert!(
        same_tree(doc, &back),
        "{file}: round-trip changed the document\noriginal: {}\nback: {}",
        serde_json::to_string(doc).unwrap(),
        serde_json::to_string(&back).unwrap()
    );
}

#[test]
fn every_kuberay_sample_round_trips() {
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for (file, doc) in kuberay_docs() {
        let api_version = doc["apiVersion"].as_str().unwrap_or_default();
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        if !(api_version.starts_with("ray.io/") || api_version.starts_with("gateway.networking.k8s.io/")) {
            continue;
        }
        match kind.as_str() {
            "RayCluster" => roundtrip::<RayCluster>(&file, &doc),
            "RayService" => roundtrip::<RayService>(&file, &doc),
            "RayJob" => roundtrip::<RayJob>(&file, &doc),
            "GatewayClass" => roundtrip::<GatewayClass>(&file, &doc),
            "Gateway" => roundtrip::<Gateway>(&file, &doc),
            "HTTPRoute" => roundtrip::<HTTPRoute>(&file, &doc),
            other => panic!("{file}: no type for {api_version} {other}"),
        }
        *counts.entry(kind).or_default() += 1;
    }
    // The fixtures hold 11 RayClusters, 4 RayServices and one GatewayClass, the upstream samples 18,
    // 15 and one more; guard against a silent empty walk.
    let (clusters, services) = if upstream_dir().is_some() {
        (29, 19)
    } else {
        println!("skipped: no upstream KubeRay samples in ../shared/manifests/kuberay/");
        (11, 4)
    };
    assert!(
        counts.get("RayCluster").copied().unwrap_or(0) >= clusters,
        "{counts:?}"
    );
    assert!(
        counts.get("RayService").copied().unwrap_or(0) >= services,
        "{counts:?}"
    );
    assert!(
        counts.get("GatewayClass").copied().unwrap_or(0) >= 1,
        "{counts:?}"
    );
}

#[test]
fn unknown_gateway_fields_are_preserved() {
    let route = serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "ns"},
        "spec": {
            "parentRefs": [{"name": "g", "namespace": "ns"}],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/"}, "headers": [{"name": "x", "value": "y"}]}],
                "filters": [{"type": "RequestHeaderModifier"}],
                "timeouts": {"request": "10s"},
                "backendRefs": [{"name": "a-serve-svc", "port": 8000, "weight": 90, "filters": []}]
            }]
        },
        "status": {"parents": [{"parentRef": {"name": "g"}, "controllerName": "istio.io/gateway-controller",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]}
    });
    roundtrip::<HTTPRoute>("inline", &route);
    let typed: HTTPRoute = serde_json::from_value(route).unwrap();
    assert!(
        !typed.is_ready_for("g", "ns"),
        "ResolvedRefs is missing, so the route is not ready"
    );
}

#[test]
fn crds_have_kuberay_names_and_columns() {
    let crds = crate::api::ray::crds();
    let names: Vec<_> = crds.iter().map(|c| c.metadata.name.clone().unwrap()).collect();
    assert_eq!(
        names,
        [
            "rayclusters.ray.io",
            "rayservices.ray.io",
            "rayjobs.ray.io",
            "raycronjobs.ray.io"
        ]
    );
    // KubeRay's `raycronjob_types.go` printer columns, in its order, and `timeZone`'s MinLength=1.
    let cron = &crds[3].spec.versions[0];
    let cols: Vec<(&str, &str, &str)> = cron
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.type_.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        cols,
        [
            ("schedule", "string", ".spec.schedule"),
            ("timezone", "string", ".spec.timeZone"),
            ("last schedule", "date", ".status.lastScheduleTime"),
            ("age", "date", ".metadata.creationTimestamp"),
            ("suspend", "boolean", ".spec.suspend"),
        ]
    );
    let schema = serde_json::to_value(&cron.schema).unwrap();
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["properties"]["timeZone"]["minLength"], 1);
    let required: Vec<&str> = spec["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(required, ["jobTemplate", "schedule"]);
    assert!(cron.subresources.as_ref().is_some_and(|s| s.status.is_some()));
    let rc = &crds[0].spec;
    assert_eq!(rc.names.categories.as_deref(), Some(&["all".to_string()][..]));
    let cols: Vec<_> = rc.versions[0]
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(
        cols,
        [
            "desired workers",
            "available workers",
            "cpus",
            "memory",
            "gpus",
            "tpus",
            "status",
            "age",
            "head pod IP",
            "head service IP"
        ]
    );
    assert!(rc.versions[0].subresources.as_ref().unwrap().status.is_some());
    let gw: Vec<_> = crate::api::gateway::crds()
        .iter()
        .map(|c| (c.metadata.name.clone().unwrap(), c.spec.scope.clone()))
        .collect();
    assert_eq!(
        gw,
        [
            (
                "gatewayclasses.gateway.networking.k8s.io".to_string(),
                "Cluster".to_string()
            ),
            (
                "gateways.gateway.networking.k8s.io".to_string(),
                "Namespaced".to_string()
            ),
            (
                "httproutes.gateway.networking.k8s.io".to_string(),
                "Namespaced".to_string()
            ),
        ]
    );
}

#[test]
fn gateway_schemas_preserve_unknown_fields() {
    let crds = crate::api::gateway::crds();
    let route = serde_json::to_value(&crds[2]).unwrap();
    let spec = &route["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(
        spec["x-kubernetes-preserve-unknown-fields"],
        Value::Bool(true),
        "{spec}"
    );
    let backend = &spec["properties"]["rules"]["items"]["properties"]["backendRefs"]["items"];
    assert_eq!(
        backend["x-kubernetes-preserve-unknown-fields"],
        Value::Bool(true),
        "{backend}"
    );
    assert!(backend.get("additionalProperties").is_none(), "{backend}");
}

/// A RayCronJob written as KubeRay's `ray-cronjob-timezone.sample.yaml` is (a schedule, a zone, a
/// RayJob template with a cluster) round-trips with no field lost and is valid.
#[test]
fn a_ray_cron_job_round_trips() {
    let doc = serde_json::json!({
        "apiVersion": "ray.io/v1", "kind": "RayCronJob", "metadata": {"name": "raycronjob-sample"},
        "spec": {
            "schedule": "0 9 * * 1-5", "timeZone": "Asia/Taipei", "suspend": false,
            "jobTemplate": {
                "entrypoint": "python /home/ray/samples/sample_code.py",
                "shutdownAfterJobFinishes": true, "ttlSecondsAfterFinished": 600,
                "runtimeEnvYAML": "pip:\n  - requests==2.26.0\n",
                "rayClusterSpec": {"rayVersion": "2.46.0", "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}},
                    "workerGroupSpecs": [{"groupName": "small-group", "replicas": 1, "minReplicas": 1, "maxReplicas": 5, "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0"}]}}}]}
            }
        },
        "status": {"lastScheduleTime": "2026-01-05T01:00:00Z"}
    });
    roundtrip::<crate::api::ray::RayCronJob>("inline", &doc);
    let typed: crate::api::ray::RayCronJob = serde_json::from_value(doc).unwrap();
    assert!(crate::api::ray::validation::validate_ray_cron_job_with(&typed, Default::default()).is_empty());
}
