//! Kueue's well-known names: labels, annotations, finalizers, condition types and reasons.
//! Values are Kueue's own so objects and tooling interoperate.

pub const GROUP: &str = "kueue.x-k8s.io";
pub const VERSION: &str = "v1beta2";
pub const API_VERSION: &str = "kueue.x-k8s.io/v1beta2";

/// Podset name used when a podset has none.
pub const DEFAULT_PODSET_NAME: &str = "main";
/// LocalQueue name assumed by Kueue's default-LocalQueue feature.
pub const DEFAULT_LOCAL_QUEUE_NAME: &str = "default";
/// WorkloadPriorityClass a job naming none gets under the `WorkloadPriorityClassDefaulting` gate
/// (Kueue's `constants.DefaultWorkloadPriorityClassName`), when it exists.
pub const DEFAULT_WORKLOAD_PRIORITY_CLASS_NAME: &str = "default";
/// Finalizer Kueue puts on flavors, queues and workloads that are in use.
pub const RESOURCE_IN_USE_FINALIZER: &str = "kueue.x-k8s.io/resource-in-use";
/// quotagate's own: on a slice of an upgrade in flight, what the chain may still hold (`peak`) and
/// keeps once done (`done`), per resource in accounting units, for the banker's check. Written by
/// the job controller; may be removed on update, never added or changed.
pub const ANNOTATION_UPGRADE_CLAIM: &str = "quotagate.io/upgrade-claim";

/// Labels and annotations on jobs, workloads and pods.
pub mod label {
    /// On a job: the LocalQueue to submit to.
    pub const QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";
    /// On a job: the WorkloadPriorityClass to use.
    pub const PRIORITY_CLASS: &str = "kueue.x-k8s.io/priority-class";
    pub const PREBUILT_WORKLOAD_NAME: &str = "kueue.x-k8s.io/prebuilt-workload-name";
    /// On a workload: uid of the job owning it.
    pub const JOB_UID: &str = "kueue.x-k8s.io/job-uid";
    /// On admitted pods: the podset they belong to.
    pub const PODSET: &str = "kueue.x-k8s.io/podset";
    pub const CLUSTER_QUEUE_NAME: &str = "kueue.x-k8s.io/cluster-queue-name";
    pub const LOCAL_QUEUE_NAME: &str = "kueue.x-k8s.io/local-queue-name";
    pub const MANAGED: &str = "kueue.x-k8s.io/managed";
    pub const MAX_EXEC_TIME_SECONDS: &str = "kueue.x-k8s.io/max-exec-time-seconds";
    /// Annotation on a job: elastic (resizable through workload slices).
    pub const ELASTIC_JOB: &str = "kueue.x-k8s.io/elastic-job";
    /// Annotation on a workload slice: the slice it replaces.
    pub const WORKLOAD_SLICE_REPLACEMENT_FOR: &str = "kueue.x-k8s.io/workload-slice-replacement-for";
    pub const WORKLOAD_SLICE_NAME: &str = "kueue.x-k8s.io/workload-slice-name";
    pub const ADMISSION_GATED_BY: &str = "kueue.x-k8s.io/admission-gated-by";
    pub const JOB_OWNER_GVK: &str = "kueue.x-k8s.io/job-owner-gvk";
    pub const JOB_OWNER_NAME: &str = "kueue.x-k8s.io/job-owner-name";
    pub const SAFE_TO_FORCEFULLY_DELETE: &str = "kueue.x-k8s.io/safe-to-forcefully-delete";
    /// Pod scheduling gate holding pods of an elastic job until their slice is admitted.
    pub const ELASTIC_JOB_SCHEDULING_GATE: &str = "kueue.x-k8s.io/elastic-job";
}

/// Condition types.
pub mod condition {
    /// ClusterQueue / LocalQueue.
    pub const ACTIVE: &str = "Active";
    pub const QUOTA_RESERVED: &str = "QuotaReserved";
    /// QuotaReserved and every admission check Ready.
    pub const ADMITTED: &str = "Admitted";
    pub const EVICTED: &str = "Evicted";
    pub const PREEMPTED: &str = "Preempted";
    pub const REQUEUED: &str = "Requeued";
    pub const PODS_READY: &str = "PodsReady";
    /// Kueue v0.20 (KEP-13502): whether every pod the admission requires was scheduled.
    pub const PODS_SCHEDULED: &str = "PodsScheduled";
    pub const FINISHED: &str = "Finished";
    pub const DEACTIVATION_TARGET: &str = "DeactivationTarget";
    pub const WAITING_FOR_REPLACEMENT_PODS: &str = "WaitingForReplacementPods";
    pub const BLOCKED_ON_PREEMPTION_GATES: &str = "BlockedOnPreemptionGates";
}

/// Condition reasons.
pub mod reason {
    // ClusterQueue Active.
    pub const READY: &str = "Ready";
    pub const TERMINATING: &str = "Terminating";
    pub const STOPPED: &str = "Stopped";
    pub const FLAVOR_NOT_FOUND: &str = "FlavorNotFound";
    pub const ADMISSION_CHECK_NOT_FOUND: &str = "AdmissionCheckNotFound";
    pub const ADMISSION_CHECK_INACTIVE: &str = "AdmissionCheckInactive";
    pub const TOPOLOGY_NOT_FOUND: &str = "TopologyNotFound";
    pub const MULTIPLE_MULTI_KUEUE_ADMISSION_CHECKS: &str = "MultipleMultiKueueAdmissionChecks";
    pub const UNKNOWN: &str = "Unknown";

    // QuotaReserved=True, and QuotaReserved=False (granular "why pending").
    pub const QUOTA_RESERVED: &str = "QuotaReserved";
    pub const NO_MATCHING_FLAVOR: &str = "NoMatchingFlavor";
    pub const WAITING_FOR_QUOTA: &str = "WaitingForQuota";
    pub const EXCEEDS_MAX_QUOTA: &str = "ExceedsMaxQuota";
    pub const TOPOLOGY_PLACEMENT_FAILED: &str = "TopologyPlacementFailed";
    pub const WAITING_FOR_PREEMPTED_WORKLOADS: &str = "WaitingForPreemptedWorkloads";
    pub const MISCONFIGURED: &str = "Misconfigured";
    pub const SUSPENDED: &str = "Suspended";
    pub const PENDING_EVALUATION: &str = "PendingEvaluation";
    pub const WAITING_FOR_PODS_READY: &str = "WaitingForPodsReady";
    pub const ADMISSION_GATED: &str = "AdmissionGated";
    pub const ON_HOLD: &str = "OnHold";
    pub const INADMISSIBLE: &str = "Inadmissible";
    /// Deprecated generic reasons, still understood.
    pub const PENDING: &str = "Pending";
    pub const WAITING: &str = "Waiting";

    // Admitted=False.
    pub const NO_RESERVATION: &str = "NoReservation";
    pub const UNSATISFIED_ADMISSION_CHECKS: &str = "UnsatisfiedAdmissionChecks";
    pub const PENDING_DELAYED_TOPOLOGY_REQUESTS: &str = "PendingDelayedTopologyRequests";
    pub const ADMITTED: &str = "Admitted";

    // Evicted.
    pub const PREEMPTED: &str = "Preempted";
    pub const PODS_READY_TIMEOUT: &str = "PodsReadyTimeout";
    pub const ADMISSION_CHECK: &str = "AdmissionCheck";
    pub const CLUSTER_QUEUE_STOPPED: &str = "ClusterQueueStopped";
    pub const LOCAL_QUEUE_STOPPED: &str = "LocalQueueStopped";
    pub const DEACTIVATED: &str = "Deactivated";
    pub const NODE_FAILURES: &str = "NodeFailures";
    pub const EVICTED_ON_MANAGER_CLUSTER: &str = "EvictedOnManagerCluster";
    pub const FLAVOR_MIGRATION: &str = "FlavorMigration";
    pub const MAXIMUM_EXECUTION_TIME_EXCEEDED: &str = "MaximumExecutionTimeExceeded";
    pub const REQUEUING_LIMIT_EXCEEDED: &str = "RequeuingLimitExceeded";

    // Preempted.
    pub const IN_CLUSTER_QUEUE: &str = "InClusterQueue";
    pub const IN_COHORT_RECLAMATION: &str = "InCohortReclamation";
    pub const IN_COHORT_FAIR_SHARING: &str = "InCohortFairSharing";
    pub const IN_COHORT_RECLAIM_WHILE_BORROWING: &str = "InCohortReclaimWhileBorrowing";
    pub const PREEMPTION_GATED: &str = "PreemptionGated";

    // Requeued (also the eviction reason itself).
    pub const REACTIVATED: &str = "Reactivated";
    pub const BACKOFF_FINISHED: &str = "BackoffFinished";
    pub const CLUSTER_QUEUE_RESTARTED: &str = "ClusterQueueRestarted";
    pub const LOCAL_QUEUE_RESTARTED: &str = "LocalQueueRestarted";

    // PodsReady.
    pub const WAIT_FOR_START: &str = "WaitForStart";
    pub const WAIT_FOR_RECOVERY: &str = "WaitForRecovery";
    pub const STARTED: &str = "Started";
    pub const RECOVERED: &str = "Recovered";
    /// Kueue v0.20 (KEP-13502): a PodsScheduled=False observation, a PodsReady reason and an
    /// eviction's underlying cause.
    pub const WAIT_FOR_SCHEDULING: &str = "WaitForScheduling";
    /// PodsScheduled=True.
    pub const ALL_REQUIRED_PODS_SCHEDULED: &str = "AllRequiredPodsScheduled";

    // Finished.
    pub const SUCCEEDED: &str = "Succeeded";
    pub const FAILED: &str = "Failed";
    pub const OUT_OF_SYNC: &str = "OutOfSync";
    pub const OWNER_NOT_FOUND: &str = "OwnerNotFound";
    pub const WORKLOAD_SLICE_REPLACED: &str = "WorkloadSliceReplaced";
}
