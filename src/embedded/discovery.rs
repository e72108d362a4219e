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
    json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-quotagate-embedded", "gitCommit": "", "gitTreeState": "clean",
           "buildDate": "", "goVersion": "", "compiler": "rustc", "platform": "linux/amd64"})
}

fn response_kind(r: &ResourceInfo) -> Value {
    json!({"group": r.group, "version": r.version, "kind": r.kind})
}

/// The reviews of `authorization.k8s.io` can only be created, as on the real server.
fn verbs(r: &ResourceInfo) -> &'static [&'static str] {
    if r.group == super::review::GROUP {
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

pub fn legacy_api() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
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
        resources.push(
            json!({"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
                              "verbs": verbs(r), "shortNames": r.short_names, "categories": r.categories}),
        );
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
/// parameter: what kubectl looks for before trusting the server to validate. No schemas.
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
    Some(
        json!({"openapi": "3.0.0", "info": {"title": "quotagate embedded", "version": "v1"}, "paths": paths}),
    )
}
