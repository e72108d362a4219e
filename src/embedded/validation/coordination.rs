//! Leases, after kube-apiserver's `pkg/apis/coordination/validation/validation.go` (`ValidateLeaseSpec`).

use serde_json::Value;

use super::{invalid, non_negative, one_of};
use crate::api::validation::{FieldError, Path};

pub fn validate_lease(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(spec) = obj.get("spec") else { return };
    let path = Path::root("spec");
    if let Some(v) = spec.get("leaseDurationSeconds")
        && v.as_i64().is_some_and(|n| n <= 0)
    {
        errs.push(invalid(
            &path.child("leaseDurationSeconds"),
            v,
            "must be greater than 0",
        ));
    }
    non_negative(spec, "leaseTransitions", &path, errs);
    one_of(spec, "strategy", &path, &["OldestEmulationVersion"], errs);
}
