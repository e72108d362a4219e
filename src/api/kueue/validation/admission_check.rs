//! AdmissionCheck rules: Kueue's CRD limits and its immutable `controllerName`.

use super::{IMMUTABLE_MSG, names};
use crate::api::kueue::admission_check::{
    AUTO_READY_CONTROLLER, AdmissionCheck, READY_AFTER_SECONDS_ANNOTATION,
};
use crate::api::validation::{ErrorType, FieldError, Path};

fn length(path: &Path, v: &str, max: usize, errs: &mut Vec<FieldError>) {
    if v.is_empty() {
        errs.push(FieldError::required(
            path.as_str(),
            "must be at least 1 character",
        ));
    } else if v.len() > max {
        errs.push(FieldError::new(
            path.as_str(),
            ErrorType::TooLong,
            format!("must be no more than {max} characters"),
        ));
    }
}

/// Kueue's kind pattern, `^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$`.
fn is_kind(v: &str) -> bool {
    let b = v.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphabetic)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
}

pub fn validate_admission_check(ac: &AdmissionCheck) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = Path::root("spec");
    length(
        &path.child("controllerName"),
        &ac.spec.controller_name,
        253,
        &mut errs,
    );
    if let Some(p) = &ac.spec.parameters {
        let pp = path.child("parameters");
        length(&pp.child("apiGroup"), &p.api_group, 253, &mut errs);
        if !p.api_group.is_empty() {
            names::dns_subdomain(&pp.child("apiGroup"), &p.api_group, &mut errs);
        }
        length(&pp.child("kind"), &p.kind, 63, &mut errs);
        if !p.kind.is_empty() && !is_kind(&p.kind) {
            errs.push(FieldError::invalid(
                pp.child("kind").as_str(),
                format!("{:?}: should match '^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$'", p.kind),
            ));
        }
        length(&pp.child("name"), &p.name, 63, &mut errs);
        if !p.name.is_empty() {
            names::dns_label(&pp.child("name"), &p.name, &mut errs);
        }
    }
    if ac.spec.controller_name == AUTO_READY_CONTROLLER
        && let Some(v) = ac
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(READY_AFTER_SECONDS_ANNOTATION))
        && v.parse::<u32>().is_err()
    {
        errs.push(FieldError::invalid(
            format!("metadata.annotations[{READY_AFTER_SECONDS_ANNOTATION}]"),
            format!("{v:?}: must be a whole number of seconds, 0 or more"),
        ));
    }
    errs
}

/// Kueue's CEL rule `self == oldSelf` on `spec.controllerName`.
pub fn validate_admission_check_update(old: &AdmissionCheck, new: &AdmissionCheck) -> Vec<FieldError> {
    let mut errs = validate_admission_check(new);
    if old.spec.controller_name != new.spec.controller_name {
        errs.push(FieldError::invalid("spec.controllerName", IMMUTABLE_MSG));
    }
    errs
}
