//! Process wiring shared by `quotagate run` and `quotagate run --embedded`: leader election, health and
//! metrics endpoints.

pub mod leader;
pub mod metrics;
pub mod health;
pub mod webhook;
pub mod manager;
