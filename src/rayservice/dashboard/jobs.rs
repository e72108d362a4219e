//! The Ray Jobs REST API the RayJob controller uses (KubeRay's `dashboard_httpclient.go`): submit, read,
//! stop, delete a job and read its logs. `http::HttpDashboard` calls a real head, the simulator
//! (`sim::jobs`) plays one.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::{DashboardEndpoint, DashboardError};

/// Path of the Jobs API; the trailing slash is what Ray registers for the collection.
pub const JOBS_PATH: &str = "/api/jobs/";

/// `POST /api/jobs/` body (Ray's `JobSubmitRequest`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobSubmitRequest {
    pub entrypoint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_env: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_num_cpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_num_gpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint_resources: Option<BTreeMap<String, f64>>,
}

/// `POST /api/jobs/` answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobSubmitResponse {
    pub submission_id: String,
    #[serde(default)]
    pub job_id: Option<String>,
}

/// `GET /api/jobs/{id}` answer (the fields of Ray's `JobDetails` KubeRay reads). Times are
/// milliseconds since the epoch; 0 or absent means not yet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobDetails {
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    #[serde(default)]
    pub job_id: Option<String>,
    #[serde(default)]
    pub submission_id: Option<String>,
    /// Ray's status string: PENDING, RUNNING, STOPPED, SUCCEEDED, FAILED.
    pub status: String,
    #[serde(default)]
    pub entrypoint: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub error_type: Option<String>,
    #[serde(default)]
    pub start_time: Option<u64>,
    #[serde(default)]
    pub end_time: Option<u64>,
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
    /// The runtime env the job was submitted with.
    #[serde(default)]
    pub runtime_env: Option<serde_json::Value>,
    #[serde(default)]
    pub driver_exit_code: Option<i64>,
}

/// `POST /api/jobs/{id}/stop` answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StopResponse {
    pub stopped: bool,
}

/// `DELETE /api/jobs/{id}` answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeleteResponse {
    pub deleted: bool,
}

/// `GET /api/jobs/{id}/logs` answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogsResponse {
    pub logs: String,
}

/// The Jobs API calls. Object safe, like `RayDashboard`.
pub trait RayJobsApi: Send + Sync {
    /// Submits a job. A `submission_id` already known to the head is refused (HTTP 400).
    fn submit_job<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        request: &'a JobSubmitRequest,
    ) -> BoxFuture<'a, Result<JobSubmitResponse, DashboardError>>;

    /// The job's details; `Ok(None)` when the head knows no such job (HTTP 404).
    fn job_info<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        submission_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<JobDetails>, DashboardError>>;

    /// Asks the head to stop the job; `false` when it had already ended.
    fn stop_job<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        submission_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, DashboardError>>;

    /// Deletes an ended job's record (Ray refuses a job still running with HTTP 400).
    fn delete_job<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        submission_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, DashboardError>>;

    /// The driver's logs so far.
    fn job_logs<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        submission_id: &'a str,
    ) -> BoxFuture<'a, Result<String, DashboardError>>;
}

/// `/api/jobs/{id}` plus an optional tail (`/stop`, `/logs`); the id is percent-encoded so a user's
/// `jobId` cannot change the path.
pub fn job_path(submission_id: &str, tail: &str) -> String {
    let mut out = String::from(JOBS_PATH);
    for b in submission_id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out.push_str(tail);
    out
}

/// Decodes a 2xx JSON body of the Jobs API.
pub fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, DashboardError> {
    serde_json::from_slice(body).map_err(|e| DashboardError::Decode {
        reason: e.to_string(),
        body: super::error::shorten(&String::from_utf8_lossy(body)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_paths_escape_the_id() {
        assert_eq!(job_path("rayjob-abc12", ""), "/api/jobs/rayjob-abc12");
        assert_eq!(job_path("a/../b", "/stop"), "/api/jobs/a%2F..%2Fb/stop");
    }

    /// The shape a Ray 2.x head answers `GET /api/jobs/{id}` with decodes (extra fields ignored).
    #[test]
    fn job_details_decode() {
        let body = br#"{"type":"SUBMISSION","job_id":"02000000","submission_id":"j1","driver_info":null,
            "status":"SUCCEEDED","entrypoint":"sleep 1","message":"Job finished successfully.","error_type":null,
            "start_time":1700000000000,"end_time":1700000001000,"metadata":{},"runtime_env":{},"driver_exit_code":0}"#;
        let d: JobDetails = decode(body).unwrap();
        assert_eq!(d.status, "SUCCEEDED");
        assert_eq!(d.end_time, Some(1_700_000_001_000));
        assert!(decode::<JobDetails>(b"<html>").is_err());
    }
}
