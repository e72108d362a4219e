//! The admission hook: called on every create/update/patch after the patch is applied and before the
//! object is stored. Mutating (defaulting) first, then validating, as a real API server's chain does.

use super::registry::ResourceInfo;
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
