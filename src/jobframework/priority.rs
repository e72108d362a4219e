//! A job's priority, resolved as Kueue does: the `kueue.x-k8s.io/priority-class` label names a
//! WorkloadPriorityClass; else the job's own PriorityClass (custom capability, then the first
//! podset's `priorityClassName`); else the cluster's global-default PriorityClass; else 0.
//! Under Kueue v0.20's `WorkloadPriorityClassDefaulting` gate a job naming no WorkloadPriorityClass
//! takes the one named `default` first, when it exists ([`default_workload_priority_class`]).

use k8s_openapi::api::scheduling::v1::PriorityClass;

use super::JobFrameworkError;
use super::interface::{GenericJob, workload_priority_class_name};
use crate::api::kueue::constants::DEFAULT_WORKLOAD_PRIORITY_CLASS_NAME;
use crate::api::kueue::{PodSet, PriorityClassRef, WorkloadPriorityClass};

/// Priority of workloads whose job names no class and when no global default exists.
pub const DEFAULT_PRIORITY: i32 = 0;

/// Where a job's priority comes from, before looking the class up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrioritySource {
    WorkloadPriorityClass(String),
    PriorityClass(String),
    Default,
}

/// Decides the priority source from the job and its podsets.
pub fn priority_source(job: &dyn GenericJob, podsets: &[PodSet]) -> PrioritySource {
    if let Some(wpc) = workload_priority_class_name(job.meta()) {
        return PrioritySource::WorkloadPriorityClass(wpc.to_string());
    }
    if let Some(custom) = job.as_with_priority_class() {
        return match custom.priority_class() {
            Some(pc) if !pc.is_empty() => PrioritySource::PriorityClass(pc),
            _ => PrioritySource::Default,
        };
    }
    podsets
        .iter()
        .filter_map(|p| {
            p.template
                .spec
                .as_ref()
                .and_then(|s| s.priority_class_name.clone())
        })
        .find(|n| !n.is_empty())
        .map_or(PrioritySource::Default, PrioritySource::PriorityClass)
}

/// Kueue's `ApplyDefaultWorkloadPriorityClass` (`jobframework/defaults.go`, KEP-10765): with the
/// `WorkloadPriorityClassDefaulting` gate on, a job that names no WorkloadPriorityClass, and whose
/// owner is not a managed job, takes the WorkloadPriorityClass named `default` when one exists, ahead
/// of any pod PriorityClass. Kueue writes the label on the job in its webhook; quotagate applies the
/// same rule where the Workload's priority is decided, so the Workload is the same.
pub fn default_workload_priority_class(
    source: PrioritySource,
    gate: bool,
    owner_managed: bool,
    workload_classes: &[WorkloadPriorityClass],
) -> PrioritySource {
    if !gate || owner_managed || matches!(source, PrioritySource::WorkloadPriorityClass(_)) {
        return source;
    }
    let exists = workload_classes
        .iter()
        .any(|c| c.metadata.name.as_deref() == Some(DEFAULT_WORKLOAD_PRIORITY_CLASS_NAME));
    if exists {
        PrioritySource::WorkloadPriorityClass(DEFAULT_WORKLOAD_PRIORITY_CLASS_NAME.to_string())
    } else {
        source
    }
}

/// The resolved priority and the class it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Priority {
    pub class_ref: Option<PriorityClassRef>,
    pub value: i32,
}

/// Looks the source up among the classes known to the caller.
pub fn resolve_priority(
    source: &PrioritySource,
    workload_classes: &[WorkloadPriorityClass],
    pod_classes: &[PriorityClass],
) -> Result<Priority, JobFrameworkError> {
    match source {
        PrioritySource::WorkloadPriorityClass(name) => workload_classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .map(|c| Priority {
                class_ref: Some(PriorityClassRef::workload_priority_class(name)),
                value: c.spec.value,
            })
            .ok_or_else(|| JobFrameworkError::WorkloadPriorityClassNotFound(name.clone())),
        PrioritySource::PriorityClass(name) => pod_classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .map(|c| Priority {
                class_ref: Some(PriorityClassRef::pod_priority_class(name)),
                value: c.value,
            })
            .ok_or_else(|| JobFrameworkError::PriorityClassNotFound(name.clone())),
        // Several global defaults can exist after a race; Kueue takes the lowest value.
        PrioritySource::Default => Ok(pod_classes
            .iter()
            .filter(|c| c.global_default == Some(true))
            .min_by_key(|c| c.value)
            .map_or(
                Priority {
                    class_ref: None,
                    value: DEFAULT_PRIORITY,
                },
                |c| Priority {
                    class_ref: Some(PriorityClassRef::pod_priority_class(
                        c.metadata.name.as_deref().unwrap_or_default(),
                    )),
                    value: c.value,
                },
            )),
    }
}
