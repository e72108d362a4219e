//! The job interface, after Kueue's `GenericJob`: a small required trait plus optional capability
//! traits reached through `as_*` accessors (Kueue's type assertions). Implementations work on the
//! job object they wrap; anything they need from the cluster (e.g. a RayService's live child
//! clusters) is loaded into the wrapper by the reconciler before these are called.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::GroupVersionKind;

use super::JobFrameworkError;
use super::podset_info::PodSetInfo;
use crate::api::kueue::constants::label;
use crate::api::kueue::{PodSet, ReclaimablePod};

pub use crate::admission::PodsScheduling;

/// How `pods` (each with the podset it fills) stand with the scheduler, counted as Kueue v0.20's
/// unscheduled-pods tracker counts them (KEP-13502): a pod bound to a node (`spec.nodeName`, or
/// `PodScheduled=True`) that is neither finished nor being deleted fills a slot, and so does one that
/// succeeded; a failed pod or one being deleted does not (it needs a replacement).
pub fn count_pods_scheduling<'a>(
    pods: impl IntoIterator<Item = (&'a k8s_openapi::api::core::v1::Pod, String)>,
) -> PodsScheduling {
    let mut out = PodsScheduling::default();
    for (p, podset) in pods {
        let status = p.status.as_ref();
        let fills = match status.and_then(|s| s.phase.as_deref()) {
            Some("Succeeded") => true,
            Some("Failed") => false,
            _ if p.metadata.deletion_timestamp.is_some() => false,
            _ => {
                out.live += 1;
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_some_and(|n| !n.is_empty())
                    || status
                        .and_then(|s| s.conditions.as_ref())
                        .into_iter()
                        .flatten()
                        .any(|c| c.type_ == "PodScheduled" && c.status == "True")
            }
        };
        if fills {
            *out.scheduled.entry(podset).or_default() += 1;
        }
    }
    out
}

/// How a finished job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finished {
    pub success: bool,
    /// Becomes the message of the workload's Finished condition.
    pub message: String,
}

/// Why a job is being stopped (Kueue's StopReason values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    WorkloadDeleted,
    WorkloadEvicted,
    NoMatchingWorkload,
    NotAdmitted,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::WorkloadDeleted => "WorkloadDeleted",
            StopReason::WorkloadEvicted => "WorkloadEvicted",
            StopReason::NoMatchingWorkload => "NoMatchingWorkload",
            StopReason::NotAdmitted => "NotAdmitted",
        }
    }
}

/// How a job's demand relates to a workload's podsets.
#[derive(Clone, Debug, PartialEq)]
pub enum DemandChange {
    Same,
    /// Only counts differ, and the workload can take them in place (pending, or shrinking).
    Counts,
    /// The workload can take these podsets in place (pending, or shrinking with its podsets kept).
    PodSets(Vec<PodSet>),
    /// More than the reserved workload holds: a new slice.
    Grow,
    /// Not comparable podset by podset.
    Incompatible,
}

/// A kind of job Kueue-style admission can manage.
pub trait GenericJob {
    /// Metadata of the job object (name, namespace, uid, labels, annotations, generation).
    fn meta(&self) -> &ObjectMeta;
    fn gvk(&self) -> GroupVersionKind;

    fn is_suspended(&self) -> bool;
    fn suspend(&mut self);
    /// Injects the admitted podset info (counts, node selectors, tolerations, labels) into the
    /// job's pod templates and unsuspends it. `infos` is in `pod_sets()` order.
    fn run_with_podsets_info(&mut self, infos: &[PodSetInfo]) -> Result<(), JobFrameworkError>;
    /// Puts back the templates' original info; true when anything changed.
    fn restore_podsets_info(&mut self, infos: &[PodSetInfo]) -> bool;
    /// `Some` once the job completed or failed.
    fn finished(&self) -> Option<Finished>;
    /// The podsets the job's workload should request.
    fn pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError>;
    /// True while any pod of the job may be running.
    fn is_active(&self) -> bool;
    /// True when every pod of the job is ready.
    fn pods_ready(&self) -> bool;
    /// Kueue v0.20 (KEP-13502): how the job's pods stand with the scheduler, for its Workload's
    /// `PodsScheduled` condition and `unscheduledTimeout`. `None`: this kind's pods are not observed,
    /// and only `timeout` applies to them.
    fn pods_scheduling(&self) -> Option<PodsScheduling> {
        None
    }

    /// Whether the job's demand changes go through workload slices (Kueue: the `elastic-job`
    /// annotation).
    fn uses_slices(&self) -> bool {
        workload_slice_enabled(self.meta())
    }
    /// How the job's `desired` podsets relate to a workload's (`reserved`: it holds quota).
    fn compare_demand(&self, desired: &[PodSet], workload: &[PodSet], reserved: bool) -> DemandChange {
        compare_counts(desired, workload, reserved)
    }

    /// True while a controller of the job's pods may still create pods from an older, larger spec
    /// than the one its demand was read from (a RayCluster whose `status.observedGeneration` is
    /// behind): a slice holding quota then waits to shrink in place.
    fn shrink_waits(&self) -> bool {
        false
    }

    /// Pods per podset of `pod_sets` the job keeps running when preemption takes only its growth
    /// (beyond Kueue; e.g. a RayService's serving cluster while its upgrade is admitted). `None`: no
    /// growth to give back, the job is preempted whole. Written on the slice
    /// (`slices::GROWTH_FLOOR_ANNOTATION`) from what the job controller knows of the job, never from
    /// anything a user writes on the job.
    fn growth_floor(&self, _pod_sets: &[PodSet]) -> Option<std::collections::BTreeMap<String, i64>> {
        None
    }

    /// The parts of the job the floor stands for (a RayService: the child clusters it keeps), written
    /// beside it (`slices::GROWTH_KEEPS_ANNOTATION`); a job whose growth was taken returns what its
    /// slice already names, so what stays is what the preemption was decided on.
    fn growth_keeps(&self) -> Option<Vec<String>> {
        None
    }

    /// While the job is an upgrade in flight (a RayService with a pending cluster), what its slices
    /// may still hold and keep once done, for the banker's check (`queue::banker`). Derived from
    /// the job and its live children, never from anything its user writes.
    fn upgrade_claim(&self) -> Option<crate::queue::model::UpgradeClaim> {
        None
    }

    fn as_with_reclaimable_pods(&self) -> Option<&dyn JobWithReclaimablePods> {
        None
    }
    fn as_with_skip(&self) -> Option<&dyn JobWithSkip> {
        None
    }
    fn as_with_on_hold(&self) -> Option<&dyn JobWithOnHold> {
        None
    }
    fn as_with_priority_class(&self) -> Option<&dyn JobWithPriorityClass> {
        None
    }
    fn as_with_custom_workload_activation(&self) -> Option<&dyn JobWithCustomWorkloadActivation> {
        None
    }
    fn as_elastic_workload_name_provider(&self) -> Option<&dyn ElasticWorkloadNameProvider> {
        None
    }
    fn as_top_level(&self) -> Option<&dyn TopLevelJob> {
        None
    }
    fn as_with_custom_stop(&mut self) -> Option<&mut dyn JobWithCustomStop> {
        None
    }
}

/// Pods that finished and whose quota can be given back before the whole job ends.
pub trait JobWithReclaimablePods {
    fn reclaimable_pods(&self) -> Vec<ReclaimablePod>;
}

/// The job should not be reconciled at all in its current state (e.g. a RayJob using an existing cluster).
pub trait JobWithSkip {
    fn skip(&self) -> bool;
}

/// The job asks for its workload to be held (e.g. it failed validation).
pub trait JobWithOnHold {
    fn is_on_hold(&self) -> bool;
}

/// The job names its own pod PriorityClass instead of the podsets' `priorityClassName`.
pub trait JobWithPriorityClass {
    fn priority_class(&self) -> Option<String>;
}

/// The job decides whether its workload is active (`spec.active`).
pub trait JobWithCustomWorkloadActivation {
    fn is_workload_active(&self) -> bool;
}

/// Extra part of an elastic job's workload name, instead of its generation.
pub trait ElasticWorkloadNameProvider {
    fn workload_name_extra(&self) -> String;
}

/// The job owns its workload whatever its own owner references say.
pub trait TopLevelJob {
    fn is_top_level(&self) -> bool;
}

/// A job that stops differently from `suspend` + `restore_podsets_info`. Returns whether it changed.
pub trait JobWithCustomStop {
    fn stop(&mut self, infos: &[PodSetInfo], reason: StopReason) -> bool;
}

/// The LocalQueue named by the job's `kueue.x-k8s.io/queue-name` label, if any.
pub fn queue_name(meta: &ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(label::QUEUE_NAME))
        .map(String::as_str)
        .filter(|q| !q.is_empty())
}

/// The WorkloadPriorityClass named by the job's `kueue.x-k8s.io/priority-class` label, if any.
pub fn workload_priority_class_name(meta: &ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(label::PRIORITY_CLASS))
        .map(String::as_str)
        .filter(|q| !q.is_empty())
}

/// `kueue.x-k8s.io/max-exec-time-seconds`; ignored unless a positive int32, as Kueue does.
pub fn maximum_execution_time_seconds(meta: &ObjectMeta) -> Option<i32> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(label::MAX_EXEC_TIME_SECONDS))
        .and_then(|v| v.parse::<i32>().ok())
        .filter(|v| *v > 0)
}

pub use crate::api::kueue::is_elastic_job as workload_slice_enabled;

/// Kueue's comparison for elastic jobs: same podsets by name and containers, only counts may differ.
/// (Labels, node selectors and tolerations are ignored: admission injects them into a running job's
/// templates.)
pub fn compare_counts(desired: &[PodSet], workload: &[PodSet], reserved: bool) -> DemandChange {
    let containers = |p: &PodSet| {
        p.template
            .spec
            .as_ref()
            .map(|s| (s.containers.clone(), s.init_containers.clone()))
    };
    let same_shape = desired.len() == workload.len()
        && desired
            .iter()
            .zip(workload)
            .all(|(x, y)| x.name() == y.name() && containers(x) == containers(y));
    if !same_shape {
        return DemandChange::Incompatible;
    }
    let pairs = || desired.iter().zip(workload);
    if pairs().all(|(a, b)| a.count() == b.count()) {
        DemandChange::Same
    } else if reserved && pairs().any(|(a, b)| a.count() > b.count()) {
        DemandChange::Grow
    } else {
        DemandChange::Counts
    }
}
