//! End-to-end scenarios: the real manager (kube-runtime watches, the scheduler loop) against the
//! embedded API server, driven and observed only through `kube::Client`.

mod admitted_elsewhere;
mod batch_jobs;
mod chaos;
mod contention;
mod explain;
mod gated;
mod incremental;
mod invariants;
mod kubectl;
mod kueue_admission_checks;
mod kueue_admission_fair_sharing;
mod kueue_core_lq_rf;
mod kueue_core_queues;
mod kueue_core_workloads;
mod kueue_fair_sharing;
mod kueue_podsready;
mod kueue_preemption;
mod kueue_scheduler;
mod kueue_scheduler_more;
mod kubectl_incremental;
mod kubectl_operators;
mod kueuectl;
mod metrics;
mod pod_ledger;
mod quota_holds;
mod raycluster;
mod reapply;
mod rayjob;
mod visibility;
mod resilience;
mod restart_traffic;
mod scenarios;
mod stall;
mod upgrade_failures;
mod support;
