//! Discovery documents (aggregated v2 and legacy), `/version`, and the minimal `/openapi/v3` that lets
//! kubectl's default `--validate=strict` hand validation to the server.

use super::registry::{Registry, ResourceInfo};
use serde_json::{Value, json};

/// The exact Content-Type kubectl needs to recognise an aggregated discovery document.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

pub fn version() -> Value {
    // The Kubernetes version whose API is modelled (kube-apiserver v1.36.3, emulating itself), so
    // kubectl's version-skew warning is the one it gives against that server.
    json!({"major": "1", "minor": "36", "emulationMajor": "1", "emulationMinor": "36",
           "minCompatibilityMajor": "1", "minCompatibilityMinor": "35",
           "gitVersion": "v1.36.3-quotagate-embedded", "gitCommit": "", "gitTreeState": "clean",
           "buildDate": "", "goVersion": "", "compiler": "rustc", "platform": "linux/amd64"})
}

fn response_kind(r: &ResourceInfo) -> Value {
    json!({"group": r.group, "version": r.version, "kind": r.kind})
}

/// The reviews of `authorization.k8s.io` and core `bindings` can only be created, as on the real server.
fn verbs(r: &ResourceInfo) -> &'static [&'static str] {
    if r.group == super::review::GROUP || (r.group.is_empty() && r.plural == "bindings") {
        &["create"]
    } else {
        &VERBS
    }
}

/// Subresources beyond `status`: a pod's `log` (`logs.rs`).
fn extra_subresources(r: &ResourceInfo) -> &'static [&'static str] {
    if r.group.is_empty() && r.plural == "pods" {
        &["log"]
    } else {
        &[]
    }
}

fn aggregated_resource(r: &ResourceInfo) -> Value {
    let mut v = json!({
        "resource": r.plural,
        "responseKind": response_kind(r),
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": verbs(r),
    });
    if !r.short_names.is_empty() {
        v["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        v["categories"] = json!(r.categories);
    }
    let mut subs = Vec::new();
    if super::scale::has_scale(r) {
        subs.push(json!({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]}));
    }
    if r.has_status {
        subs.push(json!({"subresource": "status", "responseKind": response_kind(r), "verbs": ["get", "patch", "update"]}));
    }
    for s in extra_subresources(r) {
        subs.push(json!({"subresource": s, "responseKind": response_kind(r), "verbs": ["get"]}));
    }
    if !subs.is_empty() {
        v["subresources"] = json!(subs);
    }
    v
}

/// `/api` (core = true) or `/apis` as an APIGroupDiscoveryList.
pub fn aggregated(reg: &Registry, core: bool) -> Value {
    let mut groups: Vec<Value> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for (g, _) in reg.group_versions() {
        if g.is_empty() != core || names.contains(&g) {
            continue;
        }
        names.push(g.clone());
        let versions: Vec<Value> = reg
            .group_versions()
            .into_iter()
            .filter(|(gg, _)| *gg == g)
            .map(|(_, v)| {
                let resources: Vec<Value> = reg
                    .all()
                    .iter()
                    .filter(|r| r.group == g && r.version == v)
                    .map(|r| aggregated_resource(r))
                    .collect();
                json!({"version": v, "freshness": "Current", "resources": resources})
            })
            .collect();
        groups.push(json!({"metadata": {"name": g}, "versions": versions}));
    }
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": groups})
}

/// `/api`. `server`: the address the client reached the server at (its `Host`), which kube-apiserver
/// lists for every client network (`0.0.0.0/0`) as its advertise address and port.
pub fn legacy_api(server: Option<&str>) -> Value {
    let addresses: Vec<Value> = server
        .filter(|s| !s.is_empty())
        .map(|s| json!({"clientCIDR": "0.0.0.0/0", "serverAddress": s}))
        .into_iter()
        .collect();
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": addresses})
}

fn group_doc(reg: &Registry, g: &str) -> Value {
    let versions: Vec<Value> = reg
        .group_versions()
        .into_iter()
        .filter(|(gg, _)| gg == g)
        .map(|(_, v)| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(json!({}));
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": g, "versions": versions, "preferredVersion": preferred})
}

pub fn legacy_apis(reg: &Registry) -> Value {
    let mut names: Vec<String> = Vec::new();
    for (g, _) in reg.group_versions() {
        if !g.is_empty() && !names.contains(&g) {
            names.push(g);
        }
    }
    let groups: Vec<Value> = names.iter().map(|g| group_doc(reg, g)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn api_group(reg: &Registry, g: &str) -> Option<Value> {
    reg.group_versions()
        .iter()
        .any(|(gg, _)| gg == g)
        .then(|| group_doc(reg, g))
}

/// apiserver `discovery.StorageVersionHash`: the first 8 bytes of the SHA-256 of the storage
/// version's `group/version/kind`, in base64. Each kind is stored in the version it is served in.
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

/// `/api/v1` or `/apis/{g}/{v}` as an APIResourceList.
pub fn resource_list(reg: &Registry, g: &str, v: &str) -> Option<Value> {
    let rs: Vec<&std::sync::Arc<ResourceInfo>> = reg
        .all()
        .iter()
        .filter(|r| r.group == g && r.version == v)
        .collect();
    if rs.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for r in rs {
        // `metav1.APIResource`: empty short names and categories are left out (`omitempty`).
        let mut main = json!({"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                              "kind": r.kind, "verbs": verbs(r)});
        if !r.short_names.is_empty() {
            main["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            main["categories"] = json!(r.categories);
        }
        main["storageVersionHash"] = json!(storage_version_hash(&r.group, &r.version, &r.kind));
        resources.push(main);
        if super::scale::has_scale(r) {
            resources.push(json!({"name": format!("{}/scale", r.plural), "singularName": "", "namespaced": r.namespaced,
                "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
        }
        if r.has_status {
            resources.push(
                json!({"name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced,
                                  "kind": r.kind, "verbs": ["get", "patch", "update"]}),
            );
        }
        for s in extra_subresources(r) {
            resources.push(json!({"name": format!("{}/{s}", r.plural), "singularName": "", "namespaced": r.namespaced, "kind": r.kind, "verbs": ["get"]}));
        }
    }
    // The installer registers each group version's paths in name order.
    resources.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let gv = if g.is_empty() {
        v.to_string()
    } else {
        format!("{g}/{v}")
    };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}))
}

fn gv_path(g: &str, v: &str) -> String {
    if g.is_empty() {
        format!("api/{v}")
    } else {
        format!("apis/{g}/{v}")
    }
}

pub fn openapi_v3_root(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    for (g, v) in reg.group_versions() {
        let p = gv_path(&g, &v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}")}),
        );
    }
    json!({"paths": paths})
}

/// One `patch` operation per kind, carrying `x-kubernetes-group-version-kind` and a `fieldValidation`
/// parameter: what kubectl looks for before trusting the server to validate; and the custom
/// resource kinds' schemas, for `kubectl explain`.
pub fn openapi_v3_gv(reg: &Registry, path: &str) -> Option<Value> {
    let (g, v) = match path.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => (String::new(), v.to_string()),
        ["apis", g, v] => (g.to_string(), v.to_string()),
        _ => return None,
    };
    let mut paths = serde_json::Map::new();
    for r in reg.all().iter().filter(|r| r.group == g && r.version == v) {
        let url = if r.namespaced {
            format!(
                "/{}/namespaces/{{namespace}}/{}/{{name}}",
                gv_path(&g, &v),
                r.plural
            )
        } else {
            format!("/{}/{}/{{name}}", gv_path(&g, &v), r.plural)
        };
        paths.insert(
            url,
            json!({"patch": {
                "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
                "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
                "responses": {}
            }}),
        );
    }
    if paths.is_empty() {
        return None;
    }
    // Each custom resource kind's schema, tagged with its kind, which is where `kubectl explain`
    // looks a kind up (the built-in kinds have none here).
    let mut schemas = serde_json::Map::new();
    for r in reg.all().iter().filter(|r| r.group == g && r.version == v) {
        if let Some(schema) = r.schema.as_ref().filter(|_| r.is_crd) {
            let mut s = schema.get().clone();
            if let Some(o) = s.as_object_mut() {
                o.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([{"group": r.group, "kind": r.kind, "version": r.version}]),
                );
            }
            schemas.insert(crd_schema_name(r), s);
        }
    }
    let mut doc =
        json!({"openapi": "3.0.0", "info": {"title": "quotagate embedded", "version": "v1"}, "paths": paths});
    if !schemas.is_empty() {
        doc["components"] = json!({"schemas": schemas});
    }
    Some(doc)
}

/// The name apiextensions-apiserver publishes a CRD kind's schema under: its group's labels
/// reversed, the version and the kind (`kueue.x-k8s.io` v1beta2 ClusterQueue ->
/// `io.x-k8s.kueue.v1beta2.ClusterQueue`).
fn crd_schema_name(r: &ResourceInfo) -> String {
    let group: Vec<&str> = r.group.split('.').rev().collect();
    format!("{}.{}.{}", group.join("."), r.version, r.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hashes kube-apiserver v1.36.3 lists for these kinds in `/api/v1` and `/apis/batch/v1`.
    #[test]
    fn storage_version_hashes_are_the_real_servers() {
        assert_eq!(storage_version_hash("", "v1", "Pod"), "xPOwRZ+Yhw8=");
        assert_eq!(storage_version_hash("", "v1", "ConfigMap"), "qFsyl6wFWjQ=");
        assert_eq!(storage_version_hash("batch", "v1", "Job"), "mudhfqk/qZY=");
    }

    /// `kubectl explain` finds a custom resource kind among the document's schemas by its
    /// `x-kubernetes-group-version-kind`, under the name apiextensions-apiserver publishes it with.
    #[test]
    fn a_crd_kinds_schema_is_published_for_explain() {
        let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
            serde_json::from_value(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.quotagate.io"},
                "spec": {"group": "example.quotagate.io", "scope": "Namespaced",
                    "names": {"kind": "Widget", "plural": "widgets"},
                    "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "description": "The widget.",
                            "properties": {"size": {"type": "integer"}}}}}}}]}}))
            .unwrap();
        let doc = openapi_v3_gv(&Registry::new(&[crd]), "apis/example.quotagate.io/v1").unwrap();
        let schema = &doc["components"]["schemas"]["io.quotagate.example.v1.Widget"];
        assert_eq!(
            schema["x-kubernetes-group-version-kind"],
            json!([{"group": "example.quotagate.io", "kind": "Widget", "version": "v1"}])
        );
        assert_eq!(schema["properties"]["spec"]["description"], "The widget.");
        // Built-in kinds publish no schema here.
        assert!(
            openapi_v3_gv(&Registry::new(&[]), "api/v1")
                .unwrap()
                .get("components")
                .is_none()
        );
    }

    /// `/apis/batch/v1`: name order, no empty `shortNames`, the status subresource after its kind.
    #[test]
    fn a_resource_list_is_in_name_order_without_empty_fields() {
        let list = resource_list(&Registry::new(&[]), "batch", "v1").unwrap();
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]);
        assert_eq!(list["resources"][0]["shortNames"], json!(["cj"]));
        assert!(list["resources"][2].get("shortNames").is_none());
        assert_eq!(list["resources"][2]["categories"], json!(["all"]));
        assert_eq!(list["resources"][2]["storageVersionHash"], "mudhfqk/qZY=");
    }
}
