//! RayCluster controller: pure pod and lifecycle decisions (`pods`, `lifecycle`), and the I/O shell.

pub mod auth_secret;
pub mod controller;
pub mod lifecycle;
pub mod pods;

#[cfg(test)]
mod tests;

/// Admission gate on a RayCluster: while present, the controller creates no pods for it (DESIGN step 4).
/// Set by the RayService controller on a queue-managed upgrade's pending cluster, removed once quota admits it.
pub const GATE_ANNOTATION: &str = crate::api::ray::constants::ANNOTATION_ADMISSION_GATED;
