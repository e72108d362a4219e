//! The kinds the embedded server serves: built from CRDs plus a hand-written table of built-in kinds.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::sync::Arc;

/// One server-rendered Table column (a CRD `additionalPrinterColumn`, or a built-in column).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub json_path: String,
    pub priority: i32,
    pub description: String,
}

/// Everything the server needs to know about one resource at one version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceInfo {
    /// Empty for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    /// A `/status` subresource exists: main writes keep the stored status, `generation` tracks the rest.
    pub has_status: bool,
    /// Defined by a CRD (merge-patch only, strategic merge is refused as the real server does).
    pub is_crd: bool,
    pub printer_columns: Vec<PrinterColumn>,
    /// A CRD version's `openAPIV3Schema`, against which field validation finds undeclared fields
    /// (`field_validation.rs`); none for built-in kinds.
    pub schema: Option<CrdSchema>,
}

/// A CRD version's `openAPIV3Schema` as JSON: given, or compiled in and parsed on first use
/// ([`Registry::compiled`]), so a server starts without paying for schemas nothing reads yet.
#[derive(Clone)]
pub struct CrdSchema(Arc<SchemaCell>);

struct SchemaCell {
    text: Option<crate::api::compiled_crds::SchemaText>,
    value: std::sync::OnceLock<serde_json::Value>,
}

impl CrdSchema {
    pub fn ready(value: serde_json::Value) -> Self {
        CrdSchema(Arc::new(SchemaCell {
            text: None,
            value: value.into(),
        }))
    }

    pub fn compiled(text: crate::api::compiled_crds::SchemaText) -> Self {
        CrdSchema(Arc::new(SchemaCell {
            text: Some(text),
            value: std::sync::OnceLock::new(),
        }))
    }

    /// The schema; a compiled one is parsed by the first caller. A compiled text that does not
    /// parse (only a hand-edited `crds.json`, which a test refuses) reads as `{}`: no checks.
    pub fn get(&self) -> &serde_json::Value {
        self.0.value.get_or_init(|| {
            let Some(text) = self.0.text else {
                return serde_json::Value::Object(Default::default());
            };
            text.value().unwrap_or_else(|e| {
                tracing::error!(crd = text.crd, version = text.version, "compiled CRD schema: {e}");
                serde_json::Value::Object(Default::default())
            })
        })
    }

    /// Parsed already (tests: start-up leaves schemas unparsed).
    pub fn is_parsed(&self) -> bool {
        self.0.value.get().is_some()
    }
}

impl PartialEq for CrdSchema {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for CrdSchema {}

impl std::fmt::Debug for CrdSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.0.value.get(), self.0.text) {
            (Some(v), _) => write!(f, "CrdSchema({v})"),
            (None, Some(t)) => write!(f, "CrdSchema(compiled {} {}, unparsed)", t.crd, t.version),
            (None, None) => write!(f, "CrdSchema(empty)"),
        }
    }
}

/// What a server serves beyond the built-in kinds: CRD objects (schemas converted now), or
/// [`QuotagateCrds`].
pub trait CrdSource {
    fn registry(&self) -> Registry;
}

impl CrdSource for [CustomResourceDefinition] {
    fn registry(&self) -> Registry {
        Registry::new(self)
    }
}

impl<const N: usize> CrdSource for [CustomResourceDefinition; N] {
    fn registry(&self) -> Registry {
        Registry::new(self)
    }
}

impl CrdSource for Vec<CustomResourceDefinition> {
    fn registry(&self) -> Registry {
        Registry::new(self)
    }
}

/// quotagate's own CRDs ([`crate::api::all_crds`]) as compiled into the binary: start-up parses
/// only their names and versions, each schema on first use ([`Registry::compiled`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct QuotagateCrds;

impl CrdSource for QuotagateCrds {
    fn registry(&self) -> Registry {
        Registry::compiled()
    }
}

impl ResourceInfo {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
    /// `configmaps` or `clusterqueues.kueue.x-k8s.io`, as error messages name a resource.
    pub fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
    /// `ClusterQueue.kueue.x-k8s.io` or `Pod`: how the real server names a kind in Invalid messages.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
    /// The storage key: every version of one resource shares one set of objects.
    pub fn key(&self) -> ResourceKey {
        // `events.k8s.io` Events are the core Events seen through another version, as on a real
        // server (`events.rs` converts between them).
        if self.group == super::event_fields::EVENTS_GROUP && self.plural == "events" {
            return ResourceKey {
                group: String::new(),
                plural: self.plural.clone(),
            };
        }
        ResourceKey {
            group: self.group.clone(),
            plural: self.plural.clone(),
        }
    }
}

/// Group + plural: identifies stored objects independently of the served version.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceKey {
    pub group: String,
    pub plural: String,
}

/// All served resources, in registration order (discovery lists them in this order).
#[derive(Clone, Debug, Default)]
pub struct Registry {
    resources: Vec<Arc<ResourceInfo>>,
}

impl Registry {
    /// Built-in kinds plus every served version of every CRD given.
    pub fn new(crds: &[CustomResourceDefinition]) -> Self {
        let mut r = Registry {
            resources: builtins().into_iter().map(Arc::new).collect(),
        };
        for crd in crds {
            for info in from_crd(crd) {
                r.add(info);
            }
        }
        r
    }

    /// As `Registry::new(&crate::api::all_crds())`, from the compiled-in CRDs
    /// (`api/compiled_crds.rs`) with each schema parsed on first use. Should the compiled text not
    /// read (a test refuses that), the CRDs are generated instead.
    pub fn compiled() -> Self {
        let compiled = match crate::api::compiled_crds::compiled() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("{e}; generating the CRDs instead");
                return Registry::new(&crate::api::all_crds());
            }
        };
        let mut r = Registry {
            resources: builtins().into_iter().map(Arc::new).collect(),
        };
        for crd in &compiled.heads {
            let name = crd.metadata.name.as_deref().unwrap_or_default();
            for mut info in from_crd(crd) {
                info.schema = compiled
                    .schemas
                    .iter()
                    .find(|s| s.crd == name && s.version == info.version)
                    .map(|s| CrdSchema::compiled(*s));
                r.add(info);
            }
        }
        r
    }

    /// Also serves what an install manifest needs beyond these ([`REAL_CLUSTER`]).
    pub fn serve_real_cluster_kinds(&mut self) {
        for b in REAL_CLUSTER {
            self.add(info_of(b));
        }
    }

    pub fn add(&mut self, info: ResourceInfo) {
        self.resources
            .retain(|r| !(r.group == info.group && r.version == info.version && r.plural == info.plural));
        self.resources.push(Arc::new(info));
    }

    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        self.resources
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
    }

    /// Any version of a stored resource (for cascade deletion and fault matching).
    pub fn by_key(&self, key: &ResourceKey) -> Option<Arc<ResourceInfo>> {
        self.resources
            .iter()
            .find(|r| r.group == key.group && r.plural == key.plural)
            .cloned()
    }

    pub fn all(&self) -> &[Arc<ResourceInfo>] {
        &self.resources
    }

    /// Distinct (group, version) pairs, core first, in registration order.
    pub fn group_versions(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for r in &self.resources {
            let gv = (r.group.clone(), r.version.clone());
            if !out.contains(&gv) {
                out.push(gv);
            }
        }
        out
    }
}

/// One `ResourceInfo` per served version of the CRD.
pub fn from_crd(crd: &CustomResourceDefinition) -> Vec<ResourceInfo> {
    let spec = &crd.spec;
    let names = &spec.names;
    spec.versions
        .iter()
        .filter(|v| v.served)
        .map(|v| ResourceInfo {
            group: spec.group.clone(),
            version: v.name.clone(),
            kind: names.kind.clone(),
            plural: names.plural.clone(),
            singular: names
                .singular
                .clone()
                .unwrap_or_else(|| names.kind.to_lowercase()),
            short_names: names.short_names.clone().unwrap_or_default(),
            categories: names.categories.clone().unwrap_or_default(),
            namespaced: spec.scope == "Namespaced",
            has_status: v.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some(),
            is_crd: true,
            schema: v
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .and_then(|s| serde_json::to_value(s).ok())
                .map(CrdSchema::ready),
            printer_columns: v
                .additional_printer_columns
                .iter()
                .flatten()
                .map(|c| PrinterColumn {
                    name: c.name.clone(),
                    type_: c.type_.clone(),
                    format: c.format.clone().unwrap_or_default(),
                    json_path: c.json_path.clone(),
                    priority: c.priority.unwrap_or(0),
                    description: c.description.clone().unwrap_or_default(),
                })
                .collect(),
        })
        .collect()
}

struct B {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    namespaced: bool,
    has_status: bool,
}

const BUILTINS: &[B] = &[
    B {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        short: &["ns"],
        categories: &[],
        namespaced: false,
        has_status: true,
    },
    B {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        short: &["no"],
        categories: &[],
        namespaced: false,
        has_status: true,
    },
    B {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        short: &["po"],
        categories: &["all"],
        namespaced: true,
        has_status: true,
    },
    B {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        short: &["svc"],
        categories: &["all"],
        namespaced: true,
        has_status: true,
    },
    B {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        short: &["ev"],
        categories: &[],
        namespaced: true,
        has_status: false,
    },
    B {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        short: &["cm"],
        categories: &[],
        namespaced: true,
        has_status: false,
    },
    B {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        short: &[],
        categories: &[],
        namespaced: true,
        has_status: false,
    },
    B {
        group: "",
        version: "v1",
        kind: "ResourceQuota",
        plural: "resourcequotas",
        short: &["quota"],
        categories: &[],
        namespaced: true,
        has_status: true,
    },
    B {
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        short: &["sa"],
        categories: &[],
        namespaced: true,
        has_status: false,
    },
    B {
        group: "",
        version: "v1",
        kind: "Binding",
        plural: "bindings",
        short: &[],
        categories: &[],
        namespaced: true,
        has_status: false,
    },
    B {
        group: "",
        version: "v1",
        kind: "Endpoints",
        plural: "endpoints",
        short: &["ep"],
        categories: &[],
        namespaced: true,
        has_status: false,
    },
    B {
        group: "",
        version: "v1",
        kind: "LimitRange",
        plural: "limitranges",
        short: &["limits"],
        categories: &[],
        namespaced: true,
        has_status: false,
    },
    B {
        group: "",
        version: "v1",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        short: &["pvc"],
        categories: &[],
        namespaced: true,
        has_status: true,
    },
    B {
        group: "",
        version: "v1",
        kind: "PodTemplate",
        plural: "podtemplates",
        short: &[],
        categories: &[],
        namespaced: true,
        has_status: false,
    },
    B {
        group: "",
        version: "v1",
        kind: "ReplicationController",
        plural: "replicationcontrollers",
        short: &["rc"],
        categories: &["all"],
        namespaced: true,
        has_status: true,
    },
    B {
        group: "batch",
        version: "v1",
        kind: "CronJob",
        plural: "cronjobs",
        short: &["cj"],
        categories: &["all"],
        namespaced: true,
        has_status: true,
    },
    B {
        group: "batch",
        version: "v1",
        kind: "Job",
        plural: "jobs",
        short: &[],
        categories: &["all"],
        namespaced: true,
        has_status: true,
    },
    B {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        plural: "events",
        short: &["ev"],
        categories: &[],
        namespaced: true,
        has_status: false,
    },
    B {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        short: &[],
        categories: &[],
        namespaced: true,
        has_status: false,
    },
    B {
        group: "discovery.k8s.io",
        version: "v1",
        kind: "EndpointSlice",
        plural: "endpointslices",
        short: &[],
        categories: &[],
        namespaced: true,
        has_status: false,
    },
    B {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "Role",
        plural: "roles",
        short: &[],
        categories: &[],
        namespaced: true,
        has_status: false,
    },
    B {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "RoleBinding",
        plural: "rolebindings",
        short: &[],
        categories: &[],
        namespaced: true,
        has_status: false,
    },
    B {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRole",
        plural: "clusterroles",
        short: &[],
        categories: &[],
        namespaced: false,
        has_status: false,
    },
    B {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRoleBinding",
        plural: "clusterrolebindings",
        short: &[],
        categories: &[],
        namespaced: false,
        has_status: false,
    },
    // Create-only reviews, answered and never stored (`review.rs`).
    B {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "LocalSubjectAccessReview",
        plural: "localsubjectaccessreviews",
        short: &[],
        categories: &[],
        namespaced: true,
        has_status: false,
    },
    B {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectAccessReview",
        plural: "selfsubjectaccessreviews",
        short: &[],
        categories: &[],
        namespaced: false,
        has_status: false,
    },
    B {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectRulesReview",
        plural: "selfsubjectrulesreviews",
        short: &[],
        categories: &[],
        namespaced: false,
        has_status: false,
    },
    B {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SubjectAccessReview",
        plural: "subjectaccessreviews",
        short: &[],
        categories: &[],
        namespaced: false,
        has_status: false,
    },
    B {
        group: "scheduling.k8s.io",
        version: "v1",
        kind: "PriorityClass",
        plural: "priorityclasses",
        short: &["pc"],
        categories: &[],
        namespaced: false,
        has_status: false,
    },
    B {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "MutatingWebhookConfiguration",
        plural: "mutatingwebhookconfigurations",
        short: &[],
        categories: &["api-extensions"],
        namespaced: false,
        has_status: false,
    },
    B {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingWebhookConfiguration",
        plural: "validatingwebhookconfigurations",
        short: &[],
        categories: &["api-extensions"],
        namespaced: false,
        has_status: false,
    },
];

/// The built-in kinds quotagate touches (their Tables: `printers.rs`).
pub fn builtins() -> Vec<ResourceInfo> {
    BUILTINS.iter().map(info_of).collect()
}

/// Served, stored only, where a real cluster is modelled (`ServerConfig::real_cluster`), so an
/// install manifest applies: apps/v1 Deployments (no controller runs them) and CRDs (the kinds
/// served stay the ones the server started with; a CRD of another kind is stored, not served).
/// Elsewhere both are NotFound as before.
const REAL_CLUSTER: &[B] = &[
    B {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        short: &["deploy"],
        categories: &["all"],
        namespaced: true,
        has_status: true,
    },
    B {
        group: "apiextensions.k8s.io",
        version: "v1",
        kind: "CustomResourceDefinition",
        plural: "customresourcedefinitions",
        short: &["crd", "crds"],
        categories: &["api-extensions"],
        namespaced: false,
        has_status: true,
    },
];

fn info_of(b: &B) -> ResourceInfo {
    ResourceInfo {
        group: b.group.into(),
        version: b.version.into(),
        kind: b.kind.into(),
        plural: b.plural.into(),
        singular: b.kind.to_lowercase(),
        short_names: b.short.iter().map(|s| s.to_string()).collect(),
        categories: b.categories.iter().map(|s| s.to_string()).collect(),
        namespaced: b.namespaced,
        has_status: b.has_status,
        is_crd: false,
        schema: None,
        printer_columns: Vec::new(),
    }
}
