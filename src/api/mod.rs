//! API types (Kueue, KubeRay, Gateway API), quantities and validation. No I/O.

pub mod kueue;
pub mod quantity;
pub mod validation;
pub mod gateway;
pub mod ray;
