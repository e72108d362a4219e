//! The embedded Ray operator (see docs/design.md): pure building blocks (`cluster`), the RayCluster
//! controller where the quota gate is enforced (`clusterctl`), the RayService decisions (`service`, pure)
//! and their controller shell (`servicectl`), the Ray dashboard client and its simulator (`dashboard`),
//! the RayJob controller (`rayjob`), and RayCluster, RayService and RayJob as Kueue jobs with the gate
//! rule (`job`).

pub mod cluster;
pub mod clusterctl;
pub mod dashboard;
pub mod job;
pub mod metrics;
pub mod raycronjob;
pub mod rayjob;
pub mod service;
pub mod servicectl;
