//! Errors of the RayService controller shell.

use crate::rayservice::dashboard::DashboardError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("RayService has no {0}")]
    MissingField(&'static str),
    #[error("Serve config of RayCluster {cluster}: {source}")]
    Dashboard { cluster: String, source: DashboardError },
    #[error("Ray dashboard of RayCluster {cluster} did not answer within {secs}s")]
    DashboardTimeout { cluster: String, secs: u64 },
    #[error("auth token of RayCluster {cluster}: {reason}")]
    AuthToken { cluster: String, reason: String },
    #[error("RayCluster {0} named in the plan was not found")]
    ClusterGone(String),
    #[error("encoding {what}: {source}")]
    Encode {
        what: &'static str,
        source: serde_json::Error,
    },
}

impl Error {
    /// Low-cardinality label for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::MissingField(_) => "invalid_object",
            Error::Dashboard { .. } | Error::DashboardTimeout { .. } => "dashboard",
            Error::AuthToken { .. } => "auth",
            Error::ClusterGone(_) => "stale_snapshot",
            Error::Encode { .. } => "encode",
        }
    }
}
