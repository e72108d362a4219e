//! Errors of the job framework's pure parts.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum JobFrameworkError {
    #[error("WorkloadPriorityClass {0:?} not found")]
    WorkloadPriorityClassNotFound(String),
    #[error("PriorityClass {0:?} not found")]
    PriorityClassNotFound(String),
    #[error("ResourceFlavor {0:?} not found")]
    FlavorNotFound(String),
    /// Kueue's ErrInvalidPodsetInfo: the job and the admission disagree on podsets.
    #[error("invalid podset infos: expecting {want} podset, got {got}")]
    PodSetsInfoLength { want: usize, got: usize },
    /// Kueue's ErrInvalidPodSetUpdate: an admission check asks for a value the template already sets differently.
    #[error(
        "invalid admission check PodSetUpdate: conflict for {field}: conflict for key={key}, value1={existing}, value2={requested}"
    )]
    PodSetUpdateConflict {
        field: &'static str,
        key: String,
        existing: String,
        requested: String,
    },
    #[error("workload {0:?} has no admission")]
    NotAdmitted(String),
    #[error("admission names podset {0:?}, which the workload does not have")]
    UnknownPodSet(String),
    #[error("job {kind} has no {field}")]
    MissingField { kind: String, field: &'static str },
    #[error("unexpected workload slices count: {0}")]
    SliceCount(usize),
    /// The job's podsets cannot be built from its spec (the message names the field).
    #[error("podsets of the job: {0}")]
    PodSets(String),
    /// The job could not be written: its object does not encode as JSON.
    #[error("encoding the job: {0}")]
    Encode(String),
}

impl JobFrameworkError {
    /// Low-cardinality label for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            Self::WorkloadPriorityClassNotFound(_) | Self::PriorityClassNotFound(_) => "priority",
            Self::FlavorNotFound(_) => "flavor",
            Self::PodSetsInfoLength { .. } | Self::PodSetUpdateConflict { .. } | Self::UnknownPodSet(_) => {
                "podset_info"
            }
            Self::NotAdmitted(_) => "not_admitted",
            Self::MissingField { .. } => "job",
            Self::SliceCount(_) => "slices",
            Self::PodSets(_) => "podsets",
            Self::Encode(_) => "encode",
        }
    }

    /// Permanent errors will not go away by retrying (Kueue's `podset.IsPermanent`).
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            Self::PodSetsInfoLength { .. } | Self::PodSetUpdateConflict { .. }
        )
    }
}
