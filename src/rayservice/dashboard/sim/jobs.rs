//! The Jobs API of the simulated head. A job is PENDING briefly (its runtime env being set up), then
//! RUNNING for as long as its entrypoint says, then SUCCEEDED, or FAILED for a non-zero exit:
//!
//! * `sleep N`, `time.sleep(N)` (e.g. `python -c "import time; time.sleep(3)"`): N seconds, summed;
//! * `exit K`, `sys.exit(K)`: ends there with code K (the sleeps before it still run);
//! * anything else runs `DEFAULT_RUN` and succeeds.
//!
//! Stop makes a running job STOPPED; delete removes an ended job. Like the Serve state, jobs advance
//! from tokio's clock, so a paused clock drives them.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::time::Instant;

use super::{RaySim, key};
use crate::rayservice::dashboard::jobs::{
    JobDetails, JobSubmitRequest, JobSubmitResponse, RayJobsApi, job_path,
};
use crate::rayservice::dashboard::{DashboardEndpoint, DashboardError};

/// PENDING -> RUNNING.
pub const PENDING_FOR: Duration = Duration::from_millis(100);
/// How long an entrypoint the simulator cannot read runs.
pub const DEFAULT_RUN: Duration = Duration::from_secs(1);
/// No simulated job runs longer (an absurd `sleep` cannot overflow the clock).
pub const MAX_RUN: Duration = Duration::from_secs(7 * 24 * 3600);

/// What an entrypoint does, as far as the simulator reads it.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Script {
    pub run_for: Duration,
    pub exit_code: i64,
}

/// Reads `sleep`/`time.sleep` and `exit`/`sys.exit` out of an entrypoint (see the module doc).
pub fn parse_entrypoint(entrypoint: &str) -> Script {
    let mut seconds = 0.0_f64;
    let mut exit_code = 0;
    let mut understood = false;
    let mut rest = entrypoint;
    while let Some((word, after)) = next_word(rest) {
        rest = after;
        match word {
            "sleep" => {
                if let Some((n, after)) = number_after(rest) {
                    seconds += n.max(0.0);
                    understood = true;
                    rest = after;
                }
            }
            "exit" => {
                if let Some((n, _)) = number_after(rest) {
                    exit_code = n as i64;
                    understood = true;
                    break;
                }
            }
            _ => {}
        }
    }
    let run_for = if understood {
        Duration::try_from_secs_f64(seconds)
            .unwrap_or(MAX_RUN)
            .min(MAX_RUN)
    } else {
        DEFAULT_RUN
    };
    Script { run_for, exit_code }
}

/// The next identifier-like word (`time.sleep` yields `time`, then `sleep`).
fn next_word(s: &str) -> Option<(&str, &str)> {
    let start = s.find(|c: char| c.is_ascii_alphabetic())?;
    let tail = &s[start..];
    let end = tail
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(tail.len());
    Some((&tail[..end], &tail[end..]))
}

/// A number right after a word: ` 3`, `(3)`, `( 2.5 )`.
fn number_after(s: &str) -> Option<(f64, &str)> {
    let t = s.trim_start_matches([' ', '\t']);
    let t = t.strip_prefix('(').unwrap_or(t).trim_start();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let n: f64 = t[..end].parse().ok()?;
    n.is_finite().then_some((n, &t[end..]))
}

/// Saved with the rest of the simulated Ray (`persist`): a process restart keeps a head's jobs, as
/// the head itself would.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct SimJob {
    request: JobSubmitRequest,
    #[serde(with = "super::wall_clock::instant")]
    submitted: Instant,
    /// Wall-clock milliseconds at `submitted`, for the times Ray reports.
    submitted_ms: u64,
    script: Script,
    #[serde(with = "super::wall_clock::opt_instant")]
    stopped_at: Option<Instant>,
}

impl SimJob {
    fn running_at(&self) -> Instant {
        self.submitted + PENDING_FOR
    }
    fn ends_at(&self) -> Instant {
        let natural = self.running_at() + self.script.run_for;
        self.stopped_at.map_or(natural, |s| s.min(natural))
    }
    fn status(&self, now: Instant) -> &'static str {
        let stopped = self
            .stopped_at
            .is_some_and(|s| s < self.running_at() + self.script.run_for);
        match () {
            _ if now >= self.ends_at() && stopped => "STOPPED",
            _ if now < self.running_at() => "PENDING",
            _ if now < self.ends_at() => "RUNNING",
            _ if self.script.exit_code == 0 => "SUCCEEDED",
            _ => "FAILED",
        }
    }
    fn terminal(&self, now: Instant) -> bool {
        now >= self.ends_at()
    }
    fn wall_ms(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.submitted);
        self.submitted_ms
            .saturating_add(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
    }
    fn details(&self, id: &str, now: Instant) -> JobDetails {
        let status = self.status(now);
        let message = match status {
            "PENDING" => {
                "Job has not started yet. It may be waiting for the runtime environment to be set up."
                    .to_string()
            }
            "RUNNING" => "Job is currently running.".to_string(),
            "SUCCEEDED" => "Job finished successfully.".to_string(),
            "STOPPED" => "Job was intentionally stopped.".to_string(),
            _ => format!(
                "Job entrypoint command failed with exit code {}",
                self.script.exit_code
            ),
        };
        let started = now >= self.running_at();
        JobDetails {
            type_: Some("SUBMISSION".into()),
            job_id: started.then(|| format!("{:08x}", self.submitted_ms % 0xffff_ffff)),
            submission_id: Some(id.to_owned()),
            status: status.to_owned(),
            entrypoint: Some(self.request.entrypoint.clone()),
            message: Some(message),
            error_type: (status == "FAILED").then(|| "JOB_ENTRYPOINT_COMMAND_ERROR".to_owned()),
            start_time: started.then(|| self.wall_ms(self.running_at())),
            end_time: self.terminal(now).then(|| self.wall_ms(self.ends_at())),
            metadata: self.request.metadata.clone(),
            runtime_env: self.request.runtime_env.clone(),
            driver_exit_code: (self.terminal(now) && status != "STOPPED").then_some(self.script.exit_code),
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn not_found(id: &str) -> DashboardError {
    DashboardError::from_status(404, format!("Job {id} does not exist").as_bytes())
}

impl RaySim {
    /// The status the head reports for a job now (`None`: unknown job or head). A sim view for tests.
    pub fn job_status(&self, base_url: &str, submission_id: &str) -> Option<String> {
        let now = Instant::now();
        let state = self.lock();
        state
            .clusters
            .get(&key(base_url))?
            .jobs
            .get(submission_id)
            .map(|j| j.status(now).to_owned())
    }

    /// Submission ids the head knows, in order.
    pub fn job_ids(&self, base_url: &str) -> Vec<String> {
        self.lock()
            .clusters
            .get(&key(base_url))
            .map(|c| c.jobs.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Runs `f` on the cluster's jobs after the usual reachability and auth checks.
    fn with_jobs<T>(
        &self,
        endpoint: &DashboardEndpoint,
        path: &str,
        f: impl FnOnce(&mut BTreeMap<String, SimJob>, Instant) -> Result<T, DashboardError>,
    ) -> Result<T, DashboardError> {
        let now = Instant::now();
        let mut state = self.lock();
        let url = format!("{}{path}", endpoint.base_url);
        let cluster = self.cluster(&mut state, endpoint, &url, now)?;
        f(&mut cluster.jobs, now)
    }
}

impl RayJobsApi for RaySim {
    fn submit_job<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        request: &'a JobSubmitRequest,
    ) -> BoxFuture<'a, Result<JobSubmitResponse, DashboardError>> {
        async move {
            self.with_jobs(endpoint, "/api/jobs/", |jobs, now| {
                if request.entrypoint.trim().is_empty() {
                    return Err(DashboardError::from_status(
                        400,
                        b"entrypoint must be a non-empty string",
                    ));
                }
                let id = match &request.submission_id {
                    Some(id) if !id.is_empty() => id.clone(),
                    _ => format!("raysubmit_{:016x}", now_ms().wrapping_add(jobs.len() as u64)),
                };
                if jobs.contains_key(&id) {
                    let msg = format!(
                        "Job with submission_id {id} already exists. Please use a different submission_id."
                    );
                    return Err(DashboardError::from_status(400, msg.as_bytes()));
                }
                let job = SimJob {
                    script: parse_entrypoint(&request.entrypoint),
                    request: request.clone(),
                    submitted: now,
                    submitted_ms: now_ms(),
                    stopped_at: None,
                };
                jobs.insert(id.clone(), job);
                Ok(JobSubmitResponse {
                    submission_id: id,
                    job_id: None,
                })
            })
        }
        .boxed()
    }

    fn job_info<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        submission_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<JobDetails>, DashboardError>> {
        async move {
            self.with_jobs(endpoint, &job_path(submission_id, ""), |jobs, now| {
                Ok(jobs.get(submission_id).map(|j| j.details(submission_id, now)))
            })
        }
        .boxed()
    }

    fn stop_job<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        submission_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, DashboardError>> {
        async move {
            self.with_jobs(endpoint, &job_path(submission_id, "/stop"), |jobs, now| {
                let job = jobs
                    .get_mut(submission_id)
                    .ok_or_else(|| not_found(submission_id))?;
                if job.terminal(now) {
                    return Ok(false);
                }
                job.stopped_at = Some(now);
                Ok(true)
            })
        }
        .boxed()
    }

    fn delete_job<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        submission_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, DashboardError>> {
        async move {
            self.with_jobs(endpoint, &job_path(submission_id, ""), |jobs, now| {
                let job = jobs.get(submission_id).ok_or_else(|| not_found(submission_id))?;
                if !job.terminal(now) {
                    let msg = format!("Attempted to delete job with submission_id {submission_id}, but it is in a non-terminal state {}.", job.status(now));
                    return Err(DashboardError::from_status(400, msg.as_bytes()));
                }
                jobs.remove(submission_id);
                Ok(true)
            })
        }
        .boxed()
    }

    fn job_logs<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        submission_id: &'a str,
    ) -> BoxFuture<'a, Result<String, DashboardError>> {
        async move {
            self.with_jobs(endpoint, &job_path(submission_id, "/logs"), |jobs, now| {
                let job = jobs.get(submission_id).ok_or_else(|| not_found(submission_id))?;
                let mut logs = String::new();
                if now >= job.running_at() {
                    logs.push_str(&format!(
                        "Running entrypoint for job {submission_id}: {}\n",
                        job.request.entrypoint
                    ));
                }
                if job.terminal(now) {
                    logs.push_str(&format!(
                        "{}\n",
                        job.details(submission_id, now).message.unwrap_or_default()
                    ));
                }
                Ok(logs)
            })
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rayservice::dashboard::sim::SimOptions;

    #[test]
    fn entrypoints_say_how_long_and_how_they_end() {
        let s = |secs: u64, code: i64| Script {
            run_for: Duration::from_secs(secs),
            exit_code: code,
        };
        assert_eq!(parse_entrypoint("sleep 3"), s(3, 0));
        assert_eq!(
            parse_entrypoint(r#"python -c "import time; time.sleep(3)""#),
            s(3, 0)
        );
        assert_eq!(parse_entrypoint("sleep 1; sleep 2 && exit 4"), s(3, 4));
        assert_eq!(parse_entrypoint("exit 2; sleep 9"), s(0, 2));
        assert_eq!(
            parse_entrypoint(r#"python -c "import sys; sys.exit(1)""#),
            s(0, 1)
        );
        assert_eq!(
            parse_entrypoint("python /home/ray/samples/sample_code.py").run_for,
            DEFAULT_RUN
        );
        assert_eq!(parse_entrypoint("sleep 99999999999999999999").run_for, MAX_RUN);
        assert_eq!(parse_entrypoint("sleep 0.5").run_for, Duration::from_millis(500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_runs_its_sleep_then_succeeds_or_fails() {
        let sim = RaySim::new(SimOptions::default());
        let ep = DashboardEndpoint::new("http://head:8265");
        let submit = |id: &str, entrypoint: &str| JobSubmitRequest {
            entrypoint: entrypoint.into(),
            submission_id: Some(id.into()),
            ..Default::default()
        };
        sim.submit_job(&ep, &submit("ok", "sleep 2")).await.unwrap();
        sim.submit_job(&ep, &submit("bad", "sleep 1; exit 3"))
            .await
            .unwrap();
        let dup = sim.submit_job(&ep, &submit("ok", "sleep 2")).await.unwrap_err();
        assert!(matches!(dup, DashboardError::Rejected { .. }), "{dup:?}");
        let status = |id: &'static str| {
            let (sim, ep) = (&sim, &ep);
            async move { sim.job_info(ep, id).await.unwrap().map(|d| d.status) }
        };
        assert_eq!(status("ok").await.as_deref(), Some("PENDING"));
        tokio::time::advance(Duration::from_millis(200)).await;
        assert_eq!(status("ok").await.as_deref(), Some("RUNNING"));
        let early = sim.delete_job(&ep, "ok").await.unwrap_err();
        assert!(
            matches!(early, DashboardError::Rejected { .. }),
            "a running job cannot be deleted: {early:?}"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(status("bad").await.as_deref(), Some("FAILED"));
        assert_eq!(status("ok").await.as_deref(), Some("RUNNING"));
        tokio::time::advance(Duration::from_secs(1)).await;
        let done = sim.job_info(&ep, "ok").await.unwrap().unwrap();
        assert_eq!(done.status, "SUCCEEDED");
        assert!(done.end_time.unwrap_or(0) >= done.start_time.unwrap_or(u64::MAX));
        assert!(
            !sim.stop_job(&ep, "ok").await.unwrap(),
            "an ended job is not stopped"
        );
        assert!(sim.delete_job(&ep, "ok").await.unwrap());
        assert_eq!(status("ok").await, None);
        assert!(sim.job_logs(&ep, "bad").await.unwrap().contains("exit code 3"));
    }

    #[tokio::test(start_paused = true)]
    async fn stop_ends_a_running_job_stopped() {
        let sim = RaySim::new(SimOptions::default());
        let ep = DashboardEndpoint::new("http://head:8265");
        let req = JobSubmitRequest {
            entrypoint: "sleep 60".into(),
            submission_id: Some("j".into()),
            ..Default::default()
        };
        sim.submit_job(&ep, &req).await.unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(sim.stop_job(&ep, "j").await.unwrap());
        assert_eq!(
            sim.job_status("http://head:8265", "j").as_deref(),
            Some("STOPPED")
        );
        sim.stop_cluster("http://head:8265");
        assert_eq!(
            sim.job_info(&ep, "j").await.unwrap(),
            None,
            "a restarted head forgets its jobs"
        );
    }
}
