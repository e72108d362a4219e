//! RayService controller: the I/O shell (`controller`) that reads a snapshot, calls the pure decisions of
//! `rayservice::service` and executes the plan, with the errors it meets (`error`).

pub mod controller;
pub mod error;
