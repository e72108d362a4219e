//! The admission hook: called on every create/update/patch after the patch is applied and before the
//! object is stored. Mutating (defaulting) first, then validating, as a real API server's chain does.

use super::registry::ResourceInfo;
use crate::api::kueue::managed_jobs::{JobNamespace, ManagedJobs};
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
    fn admit(
        &self,
        op: Operation,
        resource: &ResourceInfo,
        new: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), Vec<FieldError>>;

    /// `admit`, with what the server knows of the object's namespace (Kueue's webhooks read the
    /// Namespace and the `default` LocalQueue). Hooks that need none of it keep the default.
    fn admit_in(
        &self,
        op: Operation,
        resource: &ResourceInfo,
        new: &mut Value,
        old: Option<&Value>,
        _ns: &JobNamespace,
    ) -> Result<(), Vec<FieldError>> {
        self.admit(op, resource, new, old)
    }
}

/// Admits everything unchanged.
pub struct AllowAll;

impl AdmissionHook for AllowAll {
    fn admit(
        &self,
        _: Operation,
        _: &ResourceInfo,
        _: &mut Value,
        _: Option<&Value>,
    ) -> Result<(), Vec<FieldError>> {
        Ok(())
    }
}

/// quotagate's own admission (`api::on_write::admit`): the same defaulting and validation the webhook
/// applies in a real cluster, so the embedded server rejects what a real cluster with quotagate would,
/// under the same Ray feature gates (`Default`: KubeRay's defaults).
#[derive(Clone, Debug, Default)]
pub struct QuotagateAdmission {
    pub gates: RayFeatureGates,
    /// The job kinds judged as Kueue jobs (`integrations.frameworks`).
    pub frameworks: crate::api::kueue::config::Frameworks,
    /// `manageJobsWithoutQueueName` and `managedJobsNamespaceSelector`.
    pub managed: ManagedJobs,
}

impl AdmissionHook for QuotagateAdmission {
    fn admit(
        &self,
        op: Operation,
        info: &ResourceInfo,
        new: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), Vec<FieldError>> {
        self.admit_in(op, info, new, old, &JobNamespace::default())
    }

    fn admit_in(
        &self,
        op: Operation,
        _: &ResourceInfo,
        new: &mut Value,
        old: Option<&Value>,
        ns: &JobNamespace,
    ) -> Result<(), Vec<FieldError>> {
        let op = match op {
            Operation::Create => crate::api::on_write::Operation::Create,
            // Status writes are validated as updates too: a real server checks the whole object's schema.
            Operation::Update | Operation::UpdateStatus => crate::api::on_write::Operation::Update,
        };
        crate::api::on_write::admit_in(op, new, old, self.gates, self.frameworks, &self.managed, ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::Registry;

    #[test]
    fn quotagate_admission_defaults_and_rejects() {
        let registry = Registry::new(&crate::api::all_crds());
        let info = registry
            .find("ray.io", "v1", "rayclusters")
            .expect("RayCluster is served");
        let mut rc = serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}}}}
        });
        QuotagateAdmission::default()
            .admit(Operation::Create, &info, &mut rc, None)
            .expect("valid");
        assert_eq!(rc["spec"]["suspend"], true, "queue-managed jobs start suspended");
        rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"] = serde_json::json!([]);
        let errs = QuotagateAdmission::default()
            .admit(Operation::Update, &info, &mut rc.clone(), Some(&rc))
            .expect_err("no head container");
        assert!(
            errs.iter().any(|e| e.field.starts_with("spec.headGroupSpec")),
            "{errs:?}"
        );
    }
}
