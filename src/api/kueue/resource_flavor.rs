//! ResourceFlavor: a kind of node (labels, taints) that quota is given for. Has no status.
//!
//! Written by hand rather than with the `CustomResource` derive because `spec` is optional
//! (`kind: ResourceFlavor` with only metadata is the common case) and must stay absent on a
//! round trip; the derive always writes `spec`. A private derived twin supplies the CRD.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ClusterResourceScope, Resource};
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFlavorSpec {
    /// Labels of the matching nodes; injected as node selectors into admitted pods (≤8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_labels: Option<BTreeMap<String, String>>,
    /// Taints of the matching nodes; podsets must tolerate them (≤8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_taints: Option<Vec<Taint>>,
    /// Tolerations added to admitted pods (≤8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Topology for topology-aware scheduling; needs at least one node label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_name: Option<String>,
    /// Fair-sharing weight multiplier per resource (>0, ≤16 entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_weights: Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
}

impl ResourceFlavorSpec {
    pub fn node_labels(&self) -> Option<&BTreeMap<String, String>> {
        self.node_labels.as_ref()
    }
    pub fn node_taints(&self) -> &[Taint] {
        self.node_taints.as_deref().unwrap_or_default()
    }
    pub fn tolerations(&self) -> &[Toleration] {
        self.tolerations.as_deref().unwrap_or_default()
    }
}

/// A Kueue ResourceFlavor (`kueue.x-k8s.io/v1beta2`, cluster-scoped).
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFlavor {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<ResourceFlavorSpec>,
}

impl ResourceFlavor {
    pub fn new(name: &str, spec: ResourceFlavorSpec) -> Self {
        ResourceFlavor {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            spec: Some(spec),
        }
    }
    /// The spec, or the empty one when absent.
    pub fn spec(&self) -> Cow<'_, ResourceFlavorSpec> {
        match &self.spec {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(ResourceFlavorSpec::default()),
        }
    }
}

impl Serialize for ResourceFlavor {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut obj = ser.serialize_struct("ResourceFlavor", 3 + usize::from(self.spec.is_some()))?;
        obj.serialize_field("apiVersion", &<Self as Resource>::api_version(&()))?;
        obj.serialize_field("kind", &<Self as Resource>::kind(&()))?;
        obj.serialize_field("metadata", &self.metadata)?;
        if let Some(spec) = &self.spec {
            obj.serialize_field("spec", spec)?;
        }
        obj.end()
    }
}

impl Resource for ResourceFlavor {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "ResourceFlavor".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "kueue.x-k8s.io".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1beta2".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "resourceflavors".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl CustomResourceExt for ResourceFlavor {
    fn crd() -> CustomResourceDefinition {
        ResourceFlavorCrdTwin::crd()
    }
    fn crd_name() -> &'static str {
        ResourceFlavorCrdTwin::crd_name()
    }
    fn api_resource() -> kube::core::ApiResource {
        ResourceFlavorCrdTwin::api_resource()
    }
    fn shortnames() -> &'static [&'static str] {
        ResourceFlavorCrdTwin::shortnames()
    }
}

/// Only for the CRD: `no_spec` flattens this body onto the root, so `spec` is an optional property.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "ResourceFlavor",
    doc = "ResourceFlavor describes a kind of node that quota is given for: its labels, taints and the tolerations to add.",
    root = "ResourceFlavorCrdTwin",
    plural = "resourceflavors",
    shortname = "flavor",
    shortname = "flavors",
    shortname = "rf",
    no_spec
)]
struct ResourceFlavorBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spec: Option<ResourceFlavorSpec>,
}
