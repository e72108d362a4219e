//! RayCluster controller: pure pod and lifecycle decisions (`pods`, `lifecycle`: pod creation capped by the
//! quota gate of `rayservice::job::gate`), and the I/O shell.

pub mod auth_secret;
pub mod autoscaler_rbac;
pub mod cluster_limit;
pub mod context;
pub mod controller;
pub mod lifecycle;
pub mod pods;

#[cfg(test)]
mod tests;
