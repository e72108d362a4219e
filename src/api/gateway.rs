//! Gateway API (`gateway.networking.k8s.io/v1`) GatewayClass, Gateway and HTTPRoute, hand-written.
//!
//! Only the fields the RayService incremental upgrade reads or writes are typed; every other field lands in
//! an `extra` map at its level, so objects written by a Gateway controller or a user survive a
//! read-modify-write untouched. The CRD schemas mark those levels `x-kubernetes-preserve-unknown-fields`.
//! (The `gateway-api` crate pins an older kube, hence hand-written types.)

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Fields we do not model, kept verbatim.
pub type Extra = BTreeMap<String, Value>;

/// Cluster-scoped: which controller implements Gateways of this class.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "GatewayClass",
    status = "GatewayClassStatus",
    derive = "PartialEq",
    shortname = "gc",
    category = "gateway-api",
    printcolumn = r#"{"name": "Controller", "type": "string", "jsonPath": ".spec.controllerName"}"#,
    printcolumn = r#"{"name": "Accepted", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Accepted\")].status"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name": "Description", "type": "string", "jsonPath": ".spec.description", "priority": 1}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct GatewayClassSpec {
    pub controller_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct GatewayClassStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// A load balancer instance of a GatewayClass with its listeners.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "Gateway",
    namespaced,
    status = "GatewayStatus",
    derive = "PartialEq",
    shortname = "gtw",
    category = "gateway-api",
    printcolumn = r#"{"name": "Class", "type": "string", "jsonPath": ".spec.gatewayClassName"}"#,
    printcolumn = r#"{"name": "Address", "type": "string", "jsonPath": ".status.addresses[*].value"}"#,
    printcolumn = r#"{"name": "Programmed", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Programmed\")].status"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct GatewaySpec {
    pub gateway_class_name: String,
    #[serde(default)]
    pub listeners: Vec<Listener>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct Listener {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    pub port: i32,
    /// `HTTP`, `HTTPS`, `TLS`, `TCP`, `UDP` or a domain-prefixed custom protocol.
    pub protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_routes: Option<AllowedRoutes>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct AllowedRoutes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<RouteNamespaces>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<RouteGroupKind>>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct RouteNamespaces {
    /// `All`, `Same` (default) or `Selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct RouteGroupKind {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub kind: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct GatewayStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listeners: Option<Vec<ListenerStatus>>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ListenerStatus {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_routes: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// HTTP routing from parent Gateways to weighted backends.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "HTTPRoute",
    plural = "httproutes",
    namespaced,
    status = "HTTPRouteStatus",
    derive = "PartialEq",
    category = "gateway-api",
    printcolumn = r#"{"name": "Hostnames", "type": "string", "jsonPath": ".spec.hostnames"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct HTTPRouteSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_refs: Option<Vec<ParentReference>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostnames: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<HTTPRouteRule>>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ParentReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct HTTPRouteRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<Vec<HTTPRouteMatch>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_refs: Option<Vec<HTTPBackendRef>>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct HTTPRouteMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<HTTPPathMatch>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct HTTPPathMatch {
    /// `Exact`, `PathPrefix` (default) or `RegularExpression`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct HTTPBackendRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// Relative share of traffic; Gateway API default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct HTTPRouteStatus {
    #[serde(default)]
    pub parents: Vec<RouteParentStatus>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// How one parent Gateway's controller judged this route (`Accepted`, `ResolvedRefs`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct RouteParentStatus {
    pub parent_ref: ParentReference,
    pub controller_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Extra,
}

/// Gateway condition types the upgrade waits on.
pub const COND_ACCEPTED: &str = "Accepted";
pub const COND_PROGRAMMED: &str = "Programmed";
pub const COND_RESOLVED_REFS: &str = "ResolvedRefs";

/// The approval link upstream's Gateway API CRDs carry (its generator's `ApprovalLink`, unchanged since
/// v1.2). A real kube-apiserver refuses a CRD in a `*.k8s.io` group without an
/// `api-approved.kubernetes.io` annotation ("protected groups must have approval annotation").
pub const GATEWAY_API_APPROVAL: &str = "https://github.com/kubernetes-sigs/gateway-api/pull/3328";

/// CRDs the embedded API server serves for the Gateway API. `quotagate install-manifests` leaves them
/// out (on a cluster they belong to the Gateway API's own install); `quotagate crds` lists them with
/// upstream's approval annotation, so a cluster without the Gateway API accepts them too.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![GatewayClass::crd(), Gateway::crd(), HTTPRoute::crd()];
    for crd in &mut crds {
        crd.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("api-approved.kubernetes.io".into(), GATEWAY_API_APPROVAL.into());
    }
    crds
}

/// True when a condition of this type has status "True".
pub fn condition_true(conditions: Option<&[Condition]>, type_: &str) -> bool {
    conditions
        .unwrap_or(&[])
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

impl Gateway {
    /// Ready for traffic: the controller accepted and programmed it.
    pub fn is_ready(&self) -> bool {
        let conds = self.status.as_ref().and_then(|s| s.conditions.as_deref());
        condition_true(conds, COND_ACCEPTED) && condition_true(conds, COND_PROGRAMMED)
    }
}

impl HTTPRoute {
    /// The status `gateway` (in `namespace`) wrote for this route.
    fn parent_status(&self, gateway: &str, namespace: &str) -> Option<&RouteParentStatus> {
        self.status.as_ref()?.parents.iter().find(|p| {
            p.parent_ref.name == gateway && p.parent_ref.namespace.as_deref().is_none_or(|ns| ns == namespace)
        })
    }

    /// Ready for traffic through `gateway` (in `namespace`): that parent accepted it and resolved its backends.
    pub fn is_ready_for(&self, gateway: &str, namespace: &str) -> bool {
        self.parent_status(gateway, namespace).is_some_and(|p| {
            condition_true(p.conditions.as_deref(), COND_ACCEPTED)
                && condition_true(p.conditions.as_deref(), COND_RESOLVED_REFS)
        })
    }

    /// As [`HTTPRoute::is_ready_for`], and that parent accepted the route's current generation: the
    /// gateway has taken the current weights. An acceptance without `observedGeneration` counts as
    /// current (the field is optional on a condition).
    pub fn is_current_for(&self, gateway: &str, namespace: &str) -> bool {
        let generation = self.metadata.generation;
        self.is_ready_for(gateway, namespace)
            && self.parent_status(gateway, namespace).is_some_and(|p| {
                p.conditions.as_deref().unwrap_or(&[]).iter().any(|c| {
                    c.type_ == COND_ACCEPTED
                        && c.status == "True"
                        && (c.observed_generation.is_none() || c.observed_generation == generation)
                })
            })
    }
}
