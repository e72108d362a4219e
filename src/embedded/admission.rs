//! The admission hook: called on every create/update/patch after the patch is applied and before the
//! object is stored. Mutating (defaulting) first, then validating, as a real API server's chain does.

use super::registry::ResourceInfo;
use crate::api::ray::validation::RayFeatureGates;
use crate::api::validation::FieldError;
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    /// A write to the `/status` subresource.
    UpdateStatus,
}

pub trait AdmissionHook: Send + Sync {
    /// Default `new` in place, then validate it; errors become a 422 `Invalid` Status with one cause each.
    fn admit(&self, op: Operation, resource: &ResourceInfo, new: &mut Value, old: Option<&Value>) -> Result<(), Vec<FieldError>>;
}

/// Admits everything unchanged.
pub struct AllowAll;

impl AdmissionHook for AllowAll {
    fn admit(&self, _: Operation, _: &ResourceInfo, _: &mut Value, _: Option<&Value>) -> Result<(), Vec<FieldError>> {
        Ok(())
    }
}

/// quotagate's own admission (`api::admission::admit`): the same defaulting and validation the webhook
/// applies in a real cluster, so the embedded server rejects what a real cluster with quotagate would,
/// under the same Ray feature gates (`Default`: KubeRay's defaults).
#[derive(Clone, Copy, Debug, Default)]
pub struct QuotagateAdmission {
    pub gates: RayFeatureGates,
    /// The job kinds judged as Kueue jobs (`integrations.frameworks`).
    pub frameworks: crate::api::kueue::config::Frameworks,
}

impl AdmissionHook for QuotagateAdmission {
    fn admit(&self, op: Operation, _: &ResourceInfo, new: &mut Value, old: Option<&Value>) -> Result<(), Vec<FieldError>> {
        let op = match op {
            Operation::Create => crate::api::admission::Operation::Create,
            // Status writes are validated as updates too: a real server checks the whole object's schema.
            Operation::Update | Operation::UpdateStatus => crate::api::admission::Operation::Update,
        };
        crate::api::admission::admit_for(op, new, old, self.gates, self.frameworks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::Registry;

    #[test]
    fn quotagate_admission_defaults_and_rejects() {
        let registry = Registry::new(&crate::api::all_crds());
        let info = registry.find("ray.io", "v1", "rayclusters").expect("RayCluster is served");
        let mut rc = serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}}}}
        });
        QuotagateAdmission::default().admit(Operation::Create, &info, &mut rc, None).expect("valid");
        assert_eq!(rc["spec"]["suspend"], true, "queue-managed jobs start suspended");
        rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"] = serde_json::json!([]);
        let errs = QuotagateAdmission::default().admit(Operation::Update, &info, &mut rc.clone(), Some(&rc)).expect_err("no head container");
        assert!(errs.iter().any(|e| e.field.starts_with("spec.headGroupSpec")), "{errs:?}");
    }
}
