//! See ../shared/DESIGN.md for what lives here.
pub mod dashboard;
pub mod clusterctl;
pub mod service;
