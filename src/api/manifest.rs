//! Offline loading and checking of manifests: multi-document YAML in, one verdict per document out.
//! `quotagate validate`, the compatibility tests and the embedded API server's admission all come here,
//! so a manifest gets the same answer everywhere.

use serde::de::DeserializeOwned;
use serde_json::Value;
use thiserror::Error;

use super::ray::validation::RayFeatureGates;
use super::validation::FieldError;
use super::{gateway, kueue, ray};

#[derive(Debug, Error)]
#[error("line {line}: {message}")]
pub struct YamlError {
    pub line: usize,
    pub message: String,
}

/// The deepest nesting of a document that is read (serde_json's limit, which the embedded server's
/// request decoder keeps).
pub const MAX_DEPTH: usize = 127;

/// Splits a YAML stream into JSON documents; empty documents (a bare `---`) are dropped. Numbers are
/// read as kubectl reads them (YAML 1.1: `defaultMode: 0777` is octal 511).
pub fn load_documents(text: &str) -> Result<Vec<Value>, YamlError> {
    let mut opts = serde_saphyr::Options::default();
    opts.legacy_octal_numbers = true;
    // The nesting the API server reads (its JSON decoder, and the embedded server's, stop past 127
    // levels), where the YAML reader's own default stops at 64.
    let mut budget = opts.budget.clone().unwrap_or_default();
    budget.max_depth = MAX_DEPTH;
    opts.budget = Some(budget);
    match serde_saphyr::from_multiple_with_options::<Value>(text, opts) {
        Ok(docs) => Ok(docs.into_iter().filter(|d| !d.is_null()).collect()),
        Err(e) => {
            let line = e.location().map(|l| l.line() as usize).unwrap_or(0);
            Err(YamlError {
                line,
                message: e.to_string(),
            })
        }
    }
}

/// What quotagate makes of a document's `apiVersion` and `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocClass {
    /// One of quotagate's own kinds: parsed into our types and validated in full.
    Managed,
    /// A Kubernetes built-in kind: parsed with k8s-openapi types.
    BuiltIn,
    /// A kind of another API (or a Kueue/KubeRay kind quotagate does not run): listed, not failed.
    NotManaged,
    /// A kind in `kueue.x-k8s.io` or `ray.io` that neither Kueue nor KubeRay defines, or no kind at all.
    Unknown,
}

/// The verdict on one document.
#[derive(Debug)]
pub struct DocReport {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub class: DocClass,
    pub problems: Vec<FieldError>,
}

/// Kinds Kueue and KubeRay define that quotagate does not manage.
const FOREIGN_KINDS: &[(&str, &str)] = &[("kueue.x-k8s.io", "ProvisioningRequestConfig")];

fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map(|(g, _)| g).unwrap_or("")
}

/// Deserializes with the failing field's path in the error, as a field error.
fn parse<T: DeserializeOwned>(doc: &Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(doc).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "<root>".to_string() } else { path };
        FieldError::invalid(field, e.inner().to_string())
    })
}

fn check_typed<T: DeserializeOwned>(
    doc: &Value,
    validate: impl Fn(&T) -> Vec<FieldError>,
) -> Vec<FieldError> {
    match parse::<T>(doc) {
        Ok(obj) => validate(&obj),
        Err(e) => vec![e],
    }
}

fn no_rules<T>(_: &T) -> Vec<FieldError> {
    Vec::new()
}

/// Validation of a kind; only the Ray kinds read the feature gates.
type Check = fn(&Value, RayFeatureGates) -> Vec<FieldError>;
type RoundTrip = fn(&Value) -> Result<Value, FieldError>;

fn round_trip<T: DeserializeOwned + serde::Serialize>(doc: &Value) -> Result<Value, FieldError> {
    let obj: T = parse(doc)?;
    serde_json::to_value(&obj).map_err(|e| FieldError::invalid("<root>", e.to_string()))
}

macro_rules! kinds {
    ($($ty:ty => $validate:expr),* $(,)?) => {
        fn managed(api_version: &str, kind: &str) -> Option<(Check, RoundTrip)> {
            use kube::Resource;
            $(
                if api_version == <$ty>::api_version(&()) && kind == <$ty>::kind(&()) {
                    return Some((|d, gates| check_typed::<$ty>(d, |o| $validate(o, gates)), round_trip::<$ty>));
                }
            )*
            None
        }
    };
}

kinds! {
    kueue::ResourceFlavor => |o, _| kueue::validation::validate_resource_flavor(o),
    kueue::ClusterQueue => |o, _| kueue::validation::validate_cluster_queue(o),
    kueue::Cohort => |o, _| kueue::validation::validate_cohort(o),
    kueue::LocalQueue => |o, _| kueue::validation::validate_local_queue(o),
    kueue::Workload => |o, _| kueue::validation::validate_workload(o),
    kueue::WorkloadPriorityClass => |o, _| kueue::validation::validate_workload_priority_class(o),
    kueue::AdmissionCheck => |o, _| kueue::validation::validate_admission_check(o),
    kueue::Topology => |o, _| kueue::tas::validate_topology(o),
    kueue::MultiKueueConfig => |o, _| kueue::multikueue::validate_multikueue_config(o),
    kueue::MultiKueueCluster => |o, _| kueue::multikueue::validate_multikueue_cluster(o),
    ray::RayCluster => ray::validation::validate_ray_cluster_with,
    ray::RayService => ray::validation::validate_ray_service_with,
    ray::RayJob => ray::validation::validate_ray_job_with,
    ray::RayCronJob => ray::validation::validate_ray_cron_job_with,
    gateway::GatewayClass => |o, _| no_rules(o),
    gateway::Gateway => |o, _| no_rules(o),
    gateway::HTTPRoute => |o, _| no_rules(o),
}

/// Base64 fields (`Secret.data`, `ConfigMap.binaryData`) as the API server decodes them: Go's decoder
/// skips line breaks, so a folded literal block is valid there; k8s-openapi's is stricter.
fn without_base64_line_breaks(doc: &Value) -> Value {
    let mut doc = doc.clone();
    for field in ["data", "binaryData"] {
        let is_binary = field == "binaryData" || doc.get("kind").and_then(Value::as_str) == Some("Secret");
        if let (true, Some(map)) = (is_binary, doc.get_mut(field).and_then(Value::as_object_mut)) {
            for v in map.values_mut() {
                if let Value::String(s) = v {
                    s.retain(|c| c != '\n' && c != '\r');
                }
            }
        }
    }
    doc
}

macro_rules! builtins {
    ($($ty:ty),* $(,)?) => {
        fn builtin(api_version: &str, kind: &str) -> Option<Check> {
            use k8s_openapi::Resource;
            $(
                if api_version == <$ty>::API_VERSION && kind == <$ty>::KIND {
                    return Some(|d, _| check_typed::<$ty>(&without_base64_line_breaks(d), no_rules));
                }
            )*
            None
        }
    };
}

mod k {
    pub use k8s_openapi::api::{
        admissionregistration::v1 as admreg, apps::v1 as apps, autoscaling::v2 as autoscaling,
        batch::v1 as batch, coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery,
        events::v1 as events, networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
        scheduling::v1 as scheduling, storage::v1 as storage,
    };
    pub use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
}

builtins! {
    k::core::Namespace, k::core::Pod, k::core::Service, k::core::ConfigMap, k::core::Secret,
    k::core::ServiceAccount, k::core::PersistentVolumeClaim, k::core::PersistentVolume, k::core::Event,
    k::core::Node, k::core::Endpoints, k::core::LimitRange, k::core::ResourceQuota, k::core::PodTemplate,
    k::apps::Deployment, k::apps::StatefulSet, k::apps::DaemonSet, k::apps::ReplicaSet,
    k::batch::Job, k::batch::CronJob,
    k::rbac::Role, k::rbac::RoleBinding, k::rbac::ClusterRole, k::rbac::ClusterRoleBinding,
    k::networking::Ingress, k::networking::NetworkPolicy, k::networking::IngressClass,
    k::policy::PodDisruptionBudget, k::scheduling::PriorityClass, k::coordination::Lease,
    k::discovery::EndpointSlice, k::events::Event, k::autoscaling::HorizontalPodAutoscaler,
    k::storage::StorageClass, k::apiext::CustomResourceDefinition,
    k::admreg::ValidatingWebhookConfiguration, k::admreg::MutatingWebhookConfiguration,
}

fn str_at<'a>(doc: &'a Value, path: &[&str]) -> &'a str {
    let mut v = doc;
    for p in path {
        v = match v.get(p) {
            Some(x) => x,
            None => return "",
        };
    }
    v.as_str().unwrap_or("")
}

/// Classifies and checks one document.
pub fn check_document(doc: &Value) -> DocReport {
    check_document_with(doc, RayFeatureGates::default())
}

/// `check_document` with the Ray feature gates of `--feature-gates`.
pub fn check_document_with(doc: &Value, gates: RayFeatureGates) -> DocReport {
    let api_version = str_at(doc, &["apiVersion"]).to_string();
    let kind = str_at(doc, &["kind"]).to_string();
    let name = match str_at(doc, &["metadata", "name"]) {
        "" => str_at(doc, &["metadata", "generateName"]).to_string(),
        n => n.to_string(),
    };
    let mut report = DocReport {
        api_version,
        kind,
        name,
        class: DocClass::Unknown,
        problems: Vec::new(),
    };
    if !doc.is_object() {
        report.problems.push(FieldError::invalid(
            "<root>",
            "a manifest document must be a mapping",
        ));
        return report;
    }
    if report.api_version.is_empty() || report.kind.is_empty() {
        let missing = if report.api_version.is_empty() {
            "apiVersion"
        } else {
            "kind"
        };
        report.problems.push(FieldError::required(
            missing,
            "every Kubernetes object needs apiVersion and kind",
        ));
        return report;
    }
    if let Some((check, _)) = managed(&report.api_version, &report.kind) {
        report.class = DocClass::Managed;
        report.problems = check(doc, gates);
    } else if let Some(check) = builtin(&report.api_version, &report.kind) {
        report.class = DocClass::BuiltIn;
        report.problems = check(doc, gates);
    } else {
        let group = group_of(&report.api_version);
        let ours = group == "kueue.x-k8s.io" || group == "ray.io";
        let foreign = FOREIGN_KINDS
            .iter()
            .any(|(g, k)| *g == group && *k == report.kind);
        if ours && !foreign {
            // One of our kinds in a version we do not serve, or a kind neither API defines.
            let served = ["v1beta2", "v1", "v1beta1", "v1alpha1"]
                .iter()
                .map(|v| format!("{group}/{v}"))
                .find(|av| managed(av, &report.kind).is_some());
            let (field, message) = match served {
                Some(served) => (
                    "apiVersion",
                    format!(
                        "{:?}: quotagate serves kind {:?} as {served} only",
                        report.api_version, report.kind
                    ),
                ),
                None => (
                    "kind",
                    format!(
                        "{} does not define kind {:?} (neither Kueue nor KubeRay has it)",
                        report.api_version, report.kind
                    ),
                ),
            };
            report.problems.push(FieldError::new(
                field,
                super::validation::ErrorType::NotSupported,
                message,
            ));
        } else {
            report.class = DocClass::NotManaged;
        }
    }
    report
}

/// Parses a document of one of quotagate's kinds into our type and serializes it back. `None` when the
/// document is not one of our kinds. Used by the compatibility tests: nothing may be dropped.
pub fn round_trip_managed(doc: &Value) -> Option<Result<Value, FieldError>> {
    let (api_version, kind) = (str_at(doc, &["apiVersion"]), str_at(doc, &["kind"]));
    managed(api_version, kind).map(|(_, rt)| rt(doc))
}

/// Whether `apiVersion`/`kind` name one of quotagate's own kinds.
pub fn is_managed(api_version: &str, kind: &str) -> bool {
    managed(api_version, kind).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key given twice is an error naming its line, as a real API server refuses a duplicate field
    /// under `fieldValidation=Strict` (issue 41); `quotagate validate` reports it.
    #[test]
    fn a_duplicate_key_is_an_error_with_its_line() {
        let text = "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n  name: a\n  name: b\n";
        let err = load_documents(text).unwrap_err();
        assert_eq!(err.line, 5, "{}", err.message);
        assert!(
            err.message.to_lowercase().contains("duplicate"),
            "{}",
            err.message
        );
    }
}
