//! SidecarMode, after KubeRay (`getSubmitterContainer` for the head and `BuildJobSubmitCommand` for
//! SidecarMode): the submitter runs as a container `ray-job-submitter` beside the head, in the head
//! pod, which then never restarts. It waits for the dashboard on loopback, submits the job under the
//! RayJob's id and waits for its end; no submitter Job is made. The container is part of the head's
//! podset, so the quota the Workload reserves covers it (Kueue's RayJob integration does the same).
//!
//! The controller reads the container's state from the head pod as it reads the submitter Job in
//! K8sJobMode: still running, ended with exit 0, or failed.

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
        .map_or(i32::from(c::DEFAULT_DASHBOARD_PORT), |p| p.container_port)
}

/// The submitter container for `job`, submitting under `job_id`.
pub fn container(job: &RayJob, spec: &RayClusterSpec, job_id: &str) -> Result<Container, String> {
    let port = dashboard_port(spec);
    let address = format!("127.0.0.1:{port}");
    let entrypoint = job.spec.entrypoint.as_deref().unwrap_or_default().trim();
    let options = super::submit_command::options(job, job_id)?;
    let script = format!(
        "until wget -T 2 -q -O- http://localhost:{port}/api/gcs_healthz | grep success >/dev/null 2>&1 ; do echo \"Waiting for Ray Dashboard GCS to become healthy at http://{address} ...\" ; sleep 2 ; done ; ray job submit --address http://{address}{options} -- {entrypoint} ;"
    );
    let template = super::template::default_submitter_template(job);
    let mut container = template.spec.and_then(|s| s.containers.into_iter().next()).unwrap_or_default();
    container.name = SUBMITTER_CONTAINER.into();
    container.command = Some(vec!["/bin/bash".into(), "-ce".into(), "--".into()]);
    container.args = Some(vec![script]);
    container.env = Some(
        [("PYTHONUNBUFFERED", "1".to_string()), ("RAY_DASHBOARD_ADDRESS", address), ("RAY_JOB_SUBMISSION_ID", job_id.to_string())]
            .into_iter()
            .map(|(name, value)| EnvVar { name: name.into(), value: Some(value), ..Default::default() })
            .collect(),
    );
    Ok(container)
}

/// Puts the submitter beside the head of `spec` (once) and keeps the head pod from restarting.
pub fn add(spec: &mut RayClusterSpec, job: &RayJob, job_id: &str) -> Result<(), String> {
    let sidecar = container(job, spec, job_id)?;
    let pod = spec.head_group_spec.template.spec.get_or_insert_with(Default::default);
    pod.containers.retain(|c| c.name != SUBMITTER_CONTAINER);
    pod.containers.push(sidecar);
    pod.restart_policy = Some("Never".into());
    Ok(())
}

/// The submitter container's state in the cluster's head pod.
pub fn view(pods: &[Pod]) -> SubmitterView {
    let head = pods.iter().find(|p| p.labels().get(c::LABEL_NODE_TYPE).map(String::as_str) == Some(c::NODE_TYPE_HEAD));
    let Some(head) = head else { return SubmitterView::Absent };
    if head.metadata.deletion_timestamp.is_some() {
        return SubmitterView::Deleting;
    }
    let status = head.status.as_ref().and_then(|s| s.container_statuses.as_ref()).and_then(|cs| cs.iter().find(|c| c.name == SUBMITTER_CONTAINER));
    match status.and_then(|s| s.state.as_ref()).and_then(|s| s.terminated.as_ref()) {
        Some(t) if t.exit_code == 0 => SubmitterView::Complete,
        Some(t) => SubmitterView::Failed {
            reason: t.reason.clone().unwrap_or_else(|| "Error".into()),
            message: format!("container {SUBMITTER_CONTAINER} exited with code {}: {}", t.exit_code, t.message.clone().unwrap_or_default()),
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
        add(&mut spec, &j, "rj-abcde").unwrap();
        add(&mut spec, &j, "rj-abcde").unwrap();
        let pod = spec.head_group_spec.template.spec.unwrap();
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        assert_eq!(pod.containers.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["ray-head", SUBMITTER_CONTAINER], "added once");
        let sidecar = &pod.containers[1];
        assert_eq!(sidecar.image.as_deref(), Some("rayproject/ray:2.46.0"));
        assert_eq!(sidecar.resources.as_ref().and_then(|r| r.requests.as_ref()).map(|r| r["cpu"].0.as_str()), Some("500m"));
        let script = &sidecar.args.as_ref().unwrap()[0];
        assert!(script.starts_with("until wget"), "{script}");
        assert!(script.contains("ray job submit --address http://127.0.0.1:8265 --submission-id rj-abcde -- python -c"), "{script}");
        assert!(!script.contains("--no-wait"), "{script}");
        let sub = crate::rayservice::dashboard::sim::submitter::parse_container(sidecar).unwrap();
        assert_eq!((sub.address.as_str(), sub.follows), ("http://127.0.0.1:8265", true));
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
        assert_eq!(view(&[]), SubmitterView::Absent);
        assert_eq!(view(&[pod(json!({"running": {}}))]), SubmitterView::Active);
        assert_eq!(view(&[pod(json!({"terminated": {"exitCode": 0}}))]), SubmitterView::Complete);
        assert!(matches!(view(&[pod(json!({"terminated": {"exitCode": 1, "reason": "Error"}}))]), SubmitterView::Failed { .. }));
    }
}
