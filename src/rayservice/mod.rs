//! See ../shared/DESIGN.md for what lives here.
pub mod dashboard;
