//! End-to-end scenarios: the real manager (kube-runtime watches, the scheduler loop) against the
//! embedded API server, driven and observed only through `kube::Client`.

mod gated;
mod incremental;
mod invariants;
mod kubectl;
mod kubectl_incremental;
mod raycluster;
mod resilience;
mod scenarios;
mod support;
