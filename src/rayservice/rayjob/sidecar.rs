//! SidecarMode, after KubeRay (`getSubmitterContainer` for the head and `BuildJobSubmitCommand` for
//! SidecarMode): the submitter runs as a container `ray-job-submitter` beside the head, in the head
//! pod, which then never restarts. It waits for the dashboard on loopback, submits the job under the
//! RayJob's id and waits for its end; no submitter Job is made. The container is part of the head's
//! podset, so the quota the Workload reserves covers it (Kueue's RayJob integration does the same).
//!
//! The controller reads the container's state from the head pod as it reads the submitter Job in
//! K8sJobMode: still running, ended with exit 0, or failed.
//!
//! With KubeRay's SidecarSubmitterRestart gate on, the container restarts on failure
//! (`restartPolicy: OnFailure`, the Kubernetes 1.35 per-container rule) and its script submits only a
//! job the head does not know (`ray job status`, then `submit --no-wait` and `logs --follow`, as the
//! K8sJobMode script does); a failure counts only once the restarts reach `submitterConfig.backoffLimit`.

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod};
use kube::ResourceExt;

use super::SubmitterView;
use crate::api::ray::RayClusterSpec;
use crate::api::ray::constants as c;
use crate::api::ray::rayjob::RayJob;

/// KubeRay's `SubmitterContainerName`.
pub const SUBMITTER_CONTAINER: &str = "ray-job-submitter";

/// The head's dashboard port: its container port named `dashboard`, else KubeRay's default.
fn dashboard_port(spec: &RayClusterSpec) -> i32 {
    spec.head_group_spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.ports.as_ref())
        .and_then(|ps| ps.iter().find(|p| p.name.as_deref() == Some("dashboard")))
        .map_or(c::DEFAULT_DASHBOARD_PORT, |p| p.container_port)
}

/// The submitter container for `job`, submitting under `job_id`; `restart` is the
/// SidecarSubmitterRestart gate.
pub fn container(
    job: &RayJob,
    spec: &RayClusterSpec,
    job_id: &str,
    restart: bool,
) -> Result<Container, String> {
    let port = dashboard_port(spec);
    let address = format!("127.0.0.1:{port}");
    let entrypoint = job.spec.entrypoint.as_deref().unwrap_or_default().trim();
    let options = super::submit_command::options(job, job_id)?;
    let wait = format!(
        "until wget -T 2 -q -O- http://localhost:{port}/api/gcs_healthz | grep success >/dev/null 2>&1 ; do echo \"Waiting for Ray Dashboard GCS to become healthy at http://{address} ...\" ; sleep 2 ; done ;"
    );
    // KubeRay's `BuildJobSubmitCommand`: a container that may restart checks the job first, so a
    // restart follows the job it already submitted instead of submitting it twice.
    let script = if restart {
        format!(
            "{wait} if ! ray job status --address http://{address} {job_id} >/dev/null 2>&1 ; then ray job submit --address http://{address} --no-wait{options} -- {entrypoint} ; fi ; ray job logs --address http://{address} --follow {job_id}"
        )
    } else {
        format!("{wait} ray job submit --address http://{address}{options} -- {entrypoint} ;")
    };
    let template = super::template::default_submitter_template(job);
    let mut container = template
        .spec
        .and_then(|s| s.containers.into_iter().next())
        .unwrap_or_default();
    container.name = SUBMITTER_CONTAINER.into();
    container.command = Some(vec!["/bin/bash".into(), "-ce".into(), "--".into()]);
    container.args = Some(vec![script]);
    container.env = Some(
        [
            ("PYTHONUNBUFFERED", "1".to_string()),
            ("RAY_DASHBOARD_ADDRESS", address),
            ("RAY_JOB_SUBMISSION_ID", job_id.to_string()),
        ]
        .into_iter()
        .map(|(name, value)| EnvVar {
            name: name.into(),
            value: Some(value),
            ..Default::default()
        })
        .collect(),
    );
    if restart {
        container.restart_policy = Some("OnFailure".into());
    }
    Ok(container)
}

/// Puts the submitter beside the head of `spec` (once) and keeps the head pod from restarting (the
/// submitter itself may, with `restart`, the SidecarSubmitterRestart gate).
pub fn add(spec: &mut RayClusterSpec, job: &RayJob, job_id: &str, restart: bool) -> Result<(), String> {
    let sidecar = container(job, spec, job_id, restart)?;
    let pod = spec
        .head_group_spec
        .template
        .spec
        .get_or_insert_with(Default::default);
    pod.containers.retain(|c| c.name != SUBMITTER_CONTAINER);
    pod.containers.push(sidecar);
    pod.restart_policy = Some("Never".into());
    Ok(())
}

/// KubeRay's default `submitterConfig.backoffLimit` for a restarting sidecar.
pub const DEFAULT_RESTART_LIMIT: i32 = 2;

/// The submitter container's state in the cluster's head pod. `restart_limit` is set when the
/// SidecarSubmitterRestart gate is on (`submitterConfig.backoffLimit`, default 2): an exit other than
/// 0 is then a restart, and the submitter has failed only once it restarted that many times
/// (KubeRay's `checkIsRestartCountExceeded`).
pub fn view(pods: &[Pod], restart_limit: Option<i32>) -> SubmitterView {
    let head = pods
        .iter()
        .find(|p| p.labels().get(c::LABEL_NODE_TYPE).map(String::as_str) == Some(c::NODE_TYPE_HEAD));
    let Some(head) = head else {
        return SubmitterView::Absent;
    };
    if head.metadata.deletion_timestamp.is_some() {
        return SubmitterView::Deleting;
    }
    let status = head
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == SUBMITTER_CONTAINER));
    let terminated = status
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.terminated.as_ref());
    if let (Some(limit), Some(st)) = (restart_limit, status) {
        if terminated.is_some_and(|t| t.exit_code == 0) {
            return SubmitterView::Complete;
        }
        let restarted = st.last_state.as_ref().is_some_and(|s| s.terminated.is_some());
        if restarted && st.restart_count >= limit {
            return SubmitterView::Failed {
                reason: "RestartCountExceeded".into(),
                message: format!(
                    "Ray head pod submitter container {SUBMITTER_CONTAINER} terminated after exceeding the maximum restart count"
                ),
            };
        }
        return SubmitterView::Active;
    }
    match terminated {
        Some(t) if t.exit_code == 0 => SubmitterView::Complete,
        Some(t) => SubmitterView::Failed {
            reason: t.reason.clone().unwrap_or_else(|| "Error".into()),
            message: format!(
                "container {SUBMITTER_CONTAINER} exited with code {}: {}",
                t.exit_code,
                t.message.clone().unwrap_or_default()
            ),
        },
        None => SubmitterView::Active,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn job() -> RayJob {
        serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "rj", "namespace": "ns", "uid": "u1"},
            "spec": {"entrypoint": "python -c \"import time; time.sleep(3)\"", "submissionMode": "SidecarMode",
                "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}}}}
        }))
        .unwrap()
    }

    /// KubeRay `TestBuildJobSubmitCommandWithSidecarMode` and `getSubmitterContainer`: wait for the
    /// dashboard on loopback, submit with the job's id and no `--no-wait`; the container is named
    /// `ray-job-submitter`, uses the head's image, asks KubeRay's default resources; the head pod never
    /// restarts. The simulated CLI reads it as the Ray CLI would.
    #[test]
    fn the_sidecar_waits_for_the_dashboard_submits_and_waits_for_the_end() {
        let j = job();
        let mut spec = j.spec.ray_cluster_spec.clone().unwrap();
        add(&mut spec, &j, "rj-abcde", false).unwrap();
        add(&mut spec, &j, "rj-abcde", false).unwrap();
        let pod = spec.head_group_spec.template.spec.unwrap();
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        assert_eq!(
            pod.containers.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["ray-head", SUBMITTER_CONTAINER],
            "added once"
        );
        let sidecar = &pod.containers[1];
        assert_eq!(sidecar.image.as_deref(), Some("rayproject/ray:2.46.0"));
        assert_eq!(
            sidecar
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .map(|r| r["cpu"].0.as_str()),
            Some("500m")
        );
        let script = &sidecar.args.as_ref().unwrap()[0];
        assert!(script.starts_with("until wget"), "{script}");
        assert!(
            script.contains(
                "ray job submit --address http://127.0.0.1:8265 --submission-id rj-abcde -- python -c"
            ),
            "{script}"
        );
        assert!(
            !script.contains("--no-wait") && !script.contains("ray job status"),
            "{script}"
        );
        assert_eq!(
            sidecar.restart_policy, None,
            "without the gate the container never restarts"
        );
        let sub = crate::rayservice::dashboard::sim::submitter::parse_container(sidecar).unwrap();
        assert_eq!(
            (sub.address.as_str(), sub.follows),
            ("http://127.0.0.1:8265", true)
        );
        assert_eq!(sub.entrypoint, r#"python -c "import time; time.sleep(3)""#);
    }

    #[test]
    fn the_head_pods_submitter_container_is_the_submitter() {
        let pod = |state: serde_json::Value| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "h", "labels": {"ray.io/node-type": "head"}},
                "status": {"containerStatuses": [{"name": "ray-head", "ready": true, "restartCount": 0, "image": "", "imageID": "", "state": {"running": {}}},
                    {"name": SUBMITTER_CONTAINER, "ready": false, "restartCount": 0, "image": "", "imageID": "", "state": state}]}}))
            .unwrap()
        };
        assert_eq!(view(&[], None), SubmitterView::Absent);
        assert_eq!(view(&[pod(json!({"running": {}}))], None), SubmitterView::Active);
        assert_eq!(
            view(&[pod(json!({"terminated": {"exitCode": 0}}))], None),
            SubmitterView::Complete
        );
        assert!(matches!(
            view(
                &[pod(json!({"terminated": {"exitCode": 1, "reason": "Error"}}))],
                None
            ),
            SubmitterView::Failed { .. }
        ));
        // With the gate on, an exit without restarts yet is a restart to come, not a failure.
        assert_eq!(
            view(
                &[pod(json!({"terminated": {"exitCode": 1, "reason": "Error"}}))],
                Some(2)
            ),
            SubmitterView::Active
        );
    }

    /// KubeRay `ray-operator/controllers/ray/common/job_test.go`
    /// TestBuildJobSubmitCommandWithSidecarModeAndFeatureGate and `rayjob_controller_unit_test.go`
    /// TestGetSubmitterContainerWithFeatureGate: with SidecarSubmitterRestart on, the script checks
    /// the job's status first, submits with `--no-wait` only if the head does not know it, then
    /// follows its logs; the container restarts on failure. The simulated CLI reads it as a follower.
    #[test]
    fn with_the_restart_gate_the_sidecar_resubmits_only_an_unknown_job_and_restarts_on_failure() {
        let j = job();
        let mut spec = j.spec.ray_cluster_spec.clone().unwrap();
        add(&mut spec, &j, "rj-abcde", true).unwrap();
        let pod = spec.head_group_spec.template.spec.unwrap();
        assert_eq!(
            pod.restart_policy.as_deref(),
            Some("Never"),
            "the pod never restarts; its submitter container may"
        );
        let sidecar = &pod.containers[1];
        assert_eq!(sidecar.restart_policy.as_deref(), Some("OnFailure"));
        let script = &sidecar.args.as_ref().unwrap()[0];
        let after_wait = script
            .split_once("done ; ")
            .map(|(_, rest)| rest)
            .unwrap_or_default();
        assert_eq!(
            after_wait,
            "if ! ray job status --address http://127.0.0.1:8265 rj-abcde >/dev/null 2>&1 ; then ray job submit --address http://127.0.0.1:8265 --no-wait --submission-id rj-abcde -- python -c \"import time; time.sleep(3)\" ; fi ; ray job logs --address http://127.0.0.1:8265 --follow rj-abcde"
        );
        let sub = crate::rayservice::dashboard::sim::submitter::parse_container(sidecar).unwrap();
        assert!(sub.follows, "the logs are followed to the job's end");
        assert_eq!(sub.submission_id.as_deref(), Some("rj-abcde"));
        assert_eq!(sub.entrypoint, r#"python -c "import time; time.sleep(3)""#);
    }

    /// KubeRay `rayjob_controller_unit_test.go` TestCheckIsRestartCountExceeded (limit 2): below the
    /// limit the submitter is still at work, at the limit it failed, a successful exit never fails;
    /// and a container that never ended is at work.
    #[test]
    fn a_restarting_submitter_fails_once_its_restarts_reach_the_limit() {
        let pod = |restarts: i32, exit: i32, last: bool| -> Pod {
            let mut st = json!({"name": SUBMITTER_CONTAINER, "ready": false, "restartCount": restarts, "image": "", "imageID": "",
                "state": {"terminated": {"exitCode": exit}}});
            if last {
                st["lastState"] = json!({"terminated": {"exitCode": 1}});
            }
            serde_json::from_value(json!({"metadata": {"name": "h", "labels": {"ray.io/node-type": "head"}}, "status": {"containerStatuses": [st]}})).unwrap()
        };
        assert_eq!(
            view(&[pod(1, 1, true)], Some(2)),
            SubmitterView::Active,
            "restart count below limit of 2"
        );
        let SubmitterView::Failed { message, .. } = view(&[pod(2, 1, true)], Some(2)) else {
            panic!("restart count at limit of 2")
        };
        assert_eq!(
            message,
            "Ray head pod submitter container ray-job-submitter terminated after exceeding the maximum restart count"
        );
        assert_eq!(
            view(&[pod(3, 0, true)], Some(2)),
            SubmitterView::Complete,
            "successful exit should not trigger failure"
        );
        assert_eq!(
            view(&[pod(5, 1, false)], Some(2)),
            SubmitterView::Active,
            "no termination recorded yet"
        );
        assert!(
            matches!(view(&[pod(1, 1, true)], Some(1)), SubmitterView::Failed { .. }),
            "submitterConfig.backoffLimit 1"
        );
    }
}
