//! Validation of Kueue objects: Kueue's webhook rules plus the CRD rules (OpenAPI limits, CEL) a
//! real API server would enforce. Every error names the field path and the rule, with Kueue's or
//! Kubernetes' own wording where one exists. Pure functions; the webhook/API server call them.

use crate::api::names;
mod admission_check;
mod queues;
mod workload;

#[cfg(test)]
mod tests;

pub use admission_check::{validate_admission_check, validate_admission_check_update};
pub use queues::{
    validate_cluster_queue, validate_cluster_queue_update, validate_cohort, validate_local_queue,
    validate_local_queue_update, validate_resource_flavor, validate_resource_flavor_update,
};
pub use workload::{
    MAX_PODSETS, validate_workload, validate_workload_priority_class, validate_workload_update,
};

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as WireQuantity;

use super::common::FairSharing;
use crate::api::quantity::Quantity;
use crate::api::validation::{ErrorType, FieldError, Path};

/// Kubernetes' `IsNegativeErrorMsg`.
const NEGATIVE_MSG: &str = "must be greater than or equal to 0";
/// Kubernetes' `FieldImmutableErrorMsg`.
pub(crate) const IMMUTABLE_MSG: &str = "field is immutable";

fn too_many(path: &Path, len: usize, max: usize) -> Option<FieldError> {
    (len > max).then(|| {
        FieldError::new(
            path,
            ErrorType::TooMany,
            format!("must have at most {max} items, got {len}"),
        )
    })
}

fn too_few(path: &Path, len: usize, min: usize) -> Option<FieldError> {
    (len < min).then(|| {
        FieldError::required(
            path,
            format!("must have at least {min} item{}", if min == 1 { "" } else { "s" }),
        )
    })
}

/// Parses a quantity, reporting a malformed one at `path`.
fn parse_quantity(path: &Path, q: &WireQuantity, errs: &mut Vec<FieldError>) -> Option<Quantity> {
    match Quantity::try_from(q) {
        Ok(v) => Some(v),
        Err(e) => {
            errs.push(FieldError::invalid(path, e.to_string()));
            None
        }
    }
}

/// A well-formed, non-negative quantity.
fn non_negative(path: &Path, q: &WireQuantity, errs: &mut Vec<FieldError>) -> Option<Quantity> {
    let v = parse_quantity(path, q, errs)?;
    if v.is_negative() {
        errs.push(FieldError::invalid(
            path,
            format!("{}: {NEGATIVE_MSG}", quoted(&v)),
        ));
    }
    Some(v)
}

/// A quantity as Kueue's webhooks print it in `Invalid value: "-3"`: they pass the canonical string to
/// `field.Invalid`, which quotes strings.
pub(crate) fn quoted(v: &Quantity) -> String {
    format!("{:?}", v.canonical())
}

/// Weight ≥ 0 and, when not 0, above 1n (Kueue: 0 means an infinite share).
fn validate_fair_sharing(path: &Path, fs: Option<&FairSharing>, errs: &mut Vec<FieldError>) {
    let Some(w) = fs.and_then(|f| f.weight.as_ref()) else {
        return;
    };
    let Some(v) = parse_quantity(path, w, errs) else {
        return;
    };
    if v.is_negative() {
        errs.push(FieldError::invalid(
            path,
            format!("{}: {NEGATIVE_MSG}", quoted(&v)),
        ));
    } else if !v.is_zero() && v <= Quantity::parse("1n").unwrap_or(Quantity::ZERO) {
        errs.push(FieldError::invalid(
            path,
            format!("{}: When not 0, weight must be > 10e-9", quoted(&v)),
        ));
    }
}

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
const EFFECT_MSG: &str = "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'";

/// Node taints: valid key and value, a known effect, unique by (key, effect).
fn validate_taints(path: &Path, taints: &[Taint], errs: &mut Vec<FieldError>) {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, t) in taints.iter().enumerate() {
        let p = path.index(i);
        names::qualified_name(&p.child("key"), &t.key, errs);
        if let Some(v) = &t.value {
            names::label_value(&p.child("value"), v, errs);
        }
        if !TAINT_EFFECTS.contains(&t.effect.as_str()) {
            errs.push(FieldError::new(
                p.child("effect").as_str(),
                ErrorType::NotSupported,
                EFFECT_MSG,
            ));
        }
        if seen.contains(&(t.key.as_str(), t.effect.as_str())) {
            errs.push(FieldError::new(
                &p,
                ErrorType::Duplicate,
                "taints must be unique by key and effect pair",
            ));
        } else {
            seen.push((t.key.as_str(), t.effect.as_str()));
        }
    }
}

/// Tolerations as Kueue's CRD rules and webhook check them.
fn validate_tolerations(path: &Path, tolerations: &[Toleration], errs: &mut Vec<FieldError>) {
    for (i, t) in tolerations.iter().enumerate() {
        let p = path.index(i);
        let key = t.key.as_deref().unwrap_or_default();
        let op = t.operator.as_deref();
        if key.is_empty() {
            if op != Some("Exists") {
                errs.push(FieldError::invalid(p.child("operator").as_str(), "operator must be Exists when 'key' is empty, which means 'match all values and all keys'"));
            }
        } else {
            names::qualified_name(&p.child("key"), key, errs);
        }
        if t.toleration_seconds.is_some() && t.effect.as_deref() != Some("NoExecute") {
            errs.push(FieldError::invalid(
                p.child("effect").as_str(),
                "effect must be 'NoExecute' when 'tolerationSeconds' is set",
            ));
        }
        if let Some(op) = op
            && op != "Equal"
            && op != "Exists"
        {
            errs.push(FieldError::new(
                p.child("operator").as_str(),
                ErrorType::NotSupported,
                "supported toleration values: 'Equal'(default), 'Exists'",
            ));
        }
        if op == Some("Exists") && t.value.is_some() {
            errs.push(FieldError::invalid(
                p.child("value").as_str(),
                "a value must be empty when 'operator' is 'Exists'",
            ));
        }
        if let Some(e) = t.effect.as_deref()
            && !TAINT_EFFECTS.contains(&e)
        {
            errs.push(FieldError::new(
                p.child("effect").as_str(),
                ErrorType::NotSupported,
                EFFECT_MSG,
            ));
        }
    }
}
