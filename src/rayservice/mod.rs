//! The embedded Ray operator: RayCluster and RayService controllers, the Ray dashboard client, traffic,
//! and the pure building blocks they decide with. See ../shared/DESIGN.md.

pub mod cluster;
pub mod clusterctl;
pub mod dashboard;
pub mod job;
pub mod service;
