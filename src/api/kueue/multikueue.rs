//! MultiKueue (`kueue.x-k8s.io/v1beta2`, Kueue's `apis/kueue/v1beta2/multikueue_types.go`): the worker
//! clusters a manager dispatches workloads to (`MultiKueueCluster`, one connection each), the sets of
//! them an AdmissionCheck of [`MULTIKUEUE_CONTROLLER_NAME`] names through its `parameters`
//! (`MultiKueueConfig`), and their rules. Kueue has no webhook for these kinds: its rules are CRD
//! markers, kept here as validation so `validate` and the embedded server say the same.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::admission_check::AdmissionCheck;
use crate::api::validation::{ErrorType, FieldError, Path};

/// The AdmissionCheck controller name of MultiKueue.
pub const MULTIKUEUE_CONTROLLER_NAME: &str = "kueue.x-k8s.io/multikueue";
/// The key of a kubeconfig Secret that holds the kubeconfig.
pub const KUBECONFIG_SECRET_KEY: &str = "kubeconfig";
/// The condition type of a MultiKueueCluster's connection.
pub const CLUSTER_ACTIVE: &str = "Active";
/// Label on remote objects naming the manager that created them.
pub const ORIGIN_LABEL: &str = "kueue.x-k8s.io/multikueue-origin";
/// `spec.managedBy` of a job the manager keeps from running locally.
pub const MANAGED_BY: &str = MULTIKUEUE_CONTROLLER_NAME;
/// Kueue's limit on `spec.clusters`.
pub const MAX_CLUSTERS: usize = 20;

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum LocationType {
    /// A Secret in the manager's namespace, its kubeconfig under the key `kubeconfig`.
    #[default]
    Secret,
    /// A file on the manager's disk.
    Path,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfig {
    /// The Secret's name, or the file's path (1..256 characters).
    #[serde(default)]
    pub location: String,
    /// `Secret` (the default) or `Path`.
    #[serde(default)]
    pub location_type: LocationType,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileReference {
    #[serde(default)]
    pub name: String,
}

/// Exactly one of `kubeConfig` and `clusterProfileRef`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<KubeConfig>,
    /// Accepted as Kueue's API has it; quotagate does not connect through ClusterProfiles (the
    /// cluster stays `Active=False`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_profile_ref: Option<ClusterProfileReference>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "MultiKueueCluster",
    doc = "MultiKueueCluster is a worker cluster a MultiKueue manager dispatches workloads to.",
    plural = "multikueueclusters",
    shortname = "mkc",
    status = "MultiKueueClusterStatus",
    derive = "PartialEq",
    printcolumn = r#"{"name": "Connected", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Active')].status", "description": "MultiKueueCluster is connected"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "description": "Time this workload was created"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueClusterSpec {
    #[serde(default)]
    pub cluster_source: ClusterSource,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueClusterStatus {
    /// At most 16; type `Active` tells whether the cluster is connected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kueue.x-k8s.io",
    version = "v1beta2",
    kind = "MultiKueueConfig",
    doc = "MultiKueueConfig lists the MultiKueueClusters the workloads of a ClusterQueue are dispatched to.",
    plural = "multikueueconfigs",
    shortname = "mkconf",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct MultiKueueConfigSpec {
    /// MultiKueueCluster names (1..20, unique, each at most 256 characters), most preferred first.
    #[serde(default)]
    pub clusters: Vec<String>,
    /// `Manual` (the default) or `Automated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_management: Option<String>,
}

impl MultiKueueCluster {
    /// `Active=True`: the manager is connected to the worker.
    pub fn is_active(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == CLUSTER_ACTIVE && c.status == "True")
        })
    }
}

/// The MultiKueueConfig an AdmissionCheck of MultiKueue names, or why it names none (Kueue's
/// `ConfigFromRef`: `parameters` must be `kueue.x-k8s.io` / `MultiKueueConfig`).
pub fn config_name(ac: &AdmissionCheck) -> Result<&str, String> {
    let Some(p) = &ac.spec.parameters else {
        return Err("missing parameters".into());
    };
    if p.api_group != "kueue.x-k8s.io" || p.kind != "MultiKueueConfig" {
        return Err(format!(
            "wrong parameters kind: {}/{}, expected kueue.x-k8s.io/MultiKueueConfig",
            p.api_group, p.kind
        ));
    }
    Ok(&p.name)
}

fn length(path: &Path, v: &str, max: usize, errs: &mut Vec<FieldError>) {
    if v.is_empty() {
        errs.push(FieldError::required(
            path.as_str(),
            "must be at least 1 character",
        ));
    } else if v.chars().count() > max {
        errs.push(FieldError::new(
            path.as_str(),
            ErrorType::TooLong,
            format!("must be no more than {max} characters"),
        ));
    }
}

/// Kueue's CRD markers on MultiKueueConfig: 1..20 clusters, unique, each at most 256 characters;
/// `quotaManagement` is `Manual` or `Automated`.
pub fn validate_multikueue_config(c: &MultiKueueConfig) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = Path::root("spec").child("clusters");
    if c.spec.clusters.is_empty() {
        errs.push(FieldError::required(
            path.as_str(),
            "should have at least 1 items",
        ));
    }
    if c.spec.clusters.len() > MAX_CLUSTERS {
        errs.push(FieldError::new(
            path.as_str(),
            ErrorType::TooMany,
            format!("must have at most {MAX_CLUSTERS} items"),
        ));
    }
    for (i, name) in c.spec.clusters.iter().enumerate().take(MAX_CLUSTERS + 1) {
        if name.chars().count() > 256 {
            errs.push(FieldError::new(
                path.index(i).as_str(),
                ErrorType::TooLong,
                "must be no more than 256 characters",
            ));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    if c.spec.clusters.iter().any(|n| !seen.insert(n)) {
        errs.push(FieldError::invalid(path.as_str(), "must be unique"));
    }
    if let Some(q) = &c.spec.quota_management
        && q != "Manual"
        && q != "Automated"
    {
        errs.push(FieldError::new(
            Path::root("spec").child("quotaManagement").as_str(),
            ErrorType::NotSupported,
            format!("{q:?}: supported values: \"Manual\", \"Automated\""),
        ));
    }
    errs
}

/// Kueue's CRD markers on MultiKueueCluster: exactly one of `kubeConfig` and `clusterProfileRef`;
/// `location` and the profile's `name` 1..256 characters.
pub fn validate_multikueue_cluster(c: &MultiKueueCluster) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let src = &c.spec.cluster_source;
    let path = Path::root("spec").child("clusterSource");
    match (&src.kube_config, &src.cluster_profile_ref) {
        (Some(_), Some(_)) | (None, None) => errs.push(FieldError::invalid(
            path.as_str(),
            "exactly one of the fields in [kubeConfig clusterProfileRef] must be set",
        )),
        _ => {}
    }
    if let Some(k) = &src.kube_config {
        length(
            &path.child("kubeConfig").child("location"),
            &k.location,
            256,
            &mut errs,
        );
    }
    if let Some(p) = &src.cluster_profile_ref {
        length(
            &path.child("clusterProfileRef").child("name"),
            &p.name,
            256,
            &mut errs,
        );
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(clusters: &[&str]) -> MultiKueueConfig {
        MultiKueueConfig::new(
            "c",
            MultiKueueConfigSpec {
                clusters: clusters.iter().map(|c| c.to_string()).collect(),
                quota_management: None,
            },
        )
    }

    fn fields(errs: &[FieldError]) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    }

    /// Kueue's CRD (config/components/crd/bases/kueue.x-k8s.io_multikueueconfigs.yaml): clusters
    /// minItems 1, maxItems 20, items maxLength 256, "must be unique".
    #[test]
    fn config_rules_are_kueues_markers() {
        assert!(validate_multikueue_config(&config(&["w1", "w2"])).is_empty());
        let e = fields(&validate_multikueue_config(&config(&[])));
        assert!(e.len() == 1 && e[0].contains("spec.clusters"), "{e:?}");
        let e = fields(&validate_multikueue_config(&config(&["w1", "w1"])));
        assert!(e.len() == 1 && e[0].contains("must be unique"), "{e:?}");
        let many: Vec<String> = (0..21).map(|i| format!("w{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let e = fields(&validate_multikueue_config(&config(&refs)));
        assert!(e.len() == 1 && e[0].contains("at most 20"), "{e:?}");
        let long = "x".repeat(257);
        let e = fields(&validate_multikueue_config(&config(&[&long])));
        assert!(e.len() == 1 && e[0].contains("spec.clusters[0]"), "{e:?}");
        let mut q = config(&["w1"]);
        q.spec.quota_management = Some("Sometimes".into());
        let e = fields(&validate_multikueue_config(&q));
        assert!(e.len() == 1 && e[0].contains("spec.quotaManagement"), "{e:?}");
    }

    /// Kueue's CRD (kueue.x-k8s.io_multikueueclusters.yaml): exactly one of kubeConfig and
    /// clusterProfileRef; location 1..256; locationType defaults to Secret.
    #[test]
    fn cluster_rules_are_kueues_markers() {
        let c: MultiKueueCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": "w1"},
            "spec": {"clusterSource": {"kubeConfig": {"location": "w1-secret"}}}
        }))
        .unwrap();
        assert!(validate_multikueue_cluster(&c).is_empty());
        let kc = c.spec.cluster_source.kube_config.clone().unwrap();
        assert_eq!(kc.location_type, LocationType::Secret);
        let mut both = c.clone();
        both.spec.cluster_source.cluster_profile_ref = Some(ClusterProfileReference { name: "p".into() });
        let e = fields(&validate_multikueue_cluster(&both));
        assert!(e.len() == 1 && e[0].contains("exactly one of"), "{e:?}");
        let none = MultiKueueCluster::new("w", Default::default());
        assert_eq!(validate_multikueue_cluster(&none).len(), 1);
        let mut empty = c;
        empty.spec.cluster_source.kube_config.as_mut().unwrap().location = String::new();
        let e = fields(&validate_multikueue_cluster(&empty));
        assert!(e.len() == 1 && e[0].contains("location"), "{e:?}");
        let bad: Result<MultiKueueCluster, _> = serde_json::from_value(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": "w1"},
            "spec": {"clusterSource": {"kubeConfig": {"location": "x", "locationType": "Url"}}}
        }));
        assert!(bad.is_err());
    }
}
