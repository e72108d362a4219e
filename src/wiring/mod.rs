//! Process wiring: leader election, health and metrics endpoints, the webhook, the manager (`quotagate
//! run`, `run --embedded`), the Ray operator start-up, the demo and the web view.

pub mod leader;
pub use crate::admission::metrics;
pub mod certs;
pub mod demo;
pub mod demo_real;
pub mod explain;
pub mod frameworks;
pub mod health;
pub mod helm;
pub mod install;
pub mod manager;
pub mod ray;
pub mod ray_metrics;
pub mod ray_routed;
pub mod raysim;
pub mod sim_pod_network;
pub mod tasks;
pub mod ui;
pub mod visibility;
pub mod webhook;
