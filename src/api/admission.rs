//! Admission in one place: defaulting and validation of quotagate's kinds on create and update. The
//! webhook, the embedded API server and `quotagate validate` call these same functions, so an object is
//! judged the same wherever it is written.

use serde_json::Value;

use super::kueue::constants::label::QUEUE_NAME as QUEUE_NAME_LABEL;
use super::kueue::validation as kueue_rules;
use super::manifest::check_document_with;
use super::ray::validation::RayFeatureGates;
use super::validation::{FieldError, Path};
use super::kueue;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

fn kind_of(obj: &Value) -> (&str, &str) {
    (obj.get("apiVersion").and_then(Value::as_str).unwrap_or(""), obj.get("kind").and_then(Value::as_str).unwrap_or(""))
}

fn queue_name(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/labels").and_then(|l| l.get(QUEUE_NAME_LABEL)).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn is_ray_job(api_version: &str, kind: &str) -> bool {
    api_version == "ray.io/v1" && (kind == "RayCluster" || kind == "RayService")
}

/// Kueue's job defaulting: a queue-managed job is created suspended, so nothing runs before admission.
/// Returns true when the object was changed.
pub fn default_object(op: Operation, obj: &mut Value) -> bool {
    let (api_version, kind) = kind_of(obj);
    if op != Operation::Create
        || !is_ray_job(api_version, kind)
        || queue_name(obj).is_none()
        // A child RayCluster: its parent's Workload covers it (Kueue's webhook skips jobs whose owner is a
        // managed job).
        || super::ray::child_guard::owned_by_service(obj)
    {
        return false;
    }
    match obj.get_mut("spec").and_then(Value::as_object_mut) {
        Some(spec) if spec.get("suspend") != Some(&Value::Bool(true)) => {
            spec.insert("suspend".to_string(), Value::Bool(true));
            true
        }
        _ => false,
    }
}

/// Rules that compare the old and new object (immutability while admitted or running).
fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let (api_version, kind) = kind_of(new);
    let parse = |v: &Value| serde_json::from_value::<kueue::Workload>(v.clone());
    match (api_version, kind) {
        ("kueue.x-k8s.io/v1beta2", "Workload") => match (parse(old), parse(new)) {
            (Ok(o), Ok(n)) => kueue_rules::validate_workload_update(&o, &n),
            _ => Vec::new(), // parse errors are reported by the full check of `new`
        },
        ("kueue.x-k8s.io/v1beta2", "LocalQueue") => {
            match (serde_json::from_value::<kueue::LocalQueue>(old.clone()), serde_json::from_value::<kueue::LocalQueue>(new.clone())) {
                (Ok(o), Ok(n)) => kueue_rules::validate_local_queue_update(&o, &n),
                _ => Vec::new(),
            }
        }
        ("kueue.x-k8s.io/v1beta2", "AdmissionCheck") => {
            match (serde_json::from_value::<kueue::AdmissionCheck>(old.clone()), serde_json::from_value::<kueue::AdmissionCheck>(new.clone())) {
                (Ok(o), Ok(n)) => kueue_rules::validate_admission_check_update(&o, &n),
                _ => Vec::new(),
            }
        }
        (av, k) if is_ray_job(av, k) => {
            // A child of a RayService answers to its parent's gate (and says so).
            let mut errs = if k == "RayCluster" { super::ray::child_guard::validate_child_update(new, old) } else { Vec::new() };
            // KubeRay's CEL rule on spec.managedBy, `self == oldSelf`: evaluated when both old and
            // new set it (a transition rule), so a set value never changes hands.
            let managed_by = |v: &Value| v.pointer("/spec/managedBy").and_then(Value::as_str).map(str::to_owned);
            if let (Some(o), Some(n)) = (managed_by(old), managed_by(new))
                && o != n
            {
                errs.push(FieldError::invalid(&Path::root("spec").child("managedBy"), format!("{n:?}: the managedBy field is immutable")));
            }
            // Kueue: the queue of a job cannot change while the job runs (it is admitted).
            let running = old.pointer("/spec/suspend") != Some(&Value::Bool(true));
            if errs.is_empty() && queue_name(old).is_some() && running && queue_name(old) != queue_name(new) {
                let path = Path::root("metadata").child("labels").key(QUEUE_NAME_LABEL);
                errs.push(FieldError::invalid(&path, "field is immutable while the job is admitted (unsuspended)"));
            }
            errs
        }
        _ => Vec::new(),
    }
}

/// Defaults, then validates. `Ok(())` lets the write through (with `new` possibly defaulted); `Err`
/// carries every broken rule. Objects that are not quotagate's kinds pass untouched.
pub fn admit(op: Operation, new: &mut Value, old: Option<&Value>) -> Result<(), Vec<FieldError>> {
    admit_with(op, new, old, RayFeatureGates::default())
}

/// `admit` with the Ray feature gates of `--feature-gates`.
pub fn admit_with(op: Operation, new: &mut Value, old: Option<&Value>, gates: RayFeatureGates) -> Result<(), Vec<FieldError>> {
    let (api_version, kind) = kind_of(new);
    if !super::manifest::is_managed(api_version, kind) {
        return Ok(());
    }
    default_object(op, new);
    let mut errors = check_document_with(new, gates).problems;
    if let (Operation::Update, Some(old)) = (op, old) {
        errors.extend(validate_update(new, old));
    }
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}
