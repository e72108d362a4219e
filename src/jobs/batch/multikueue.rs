//! The batch Job's MultiKueue adapter (Kueue's `pkg/controller/jobs/job/job_multikueue_adapter.go`):
//! a Job with `spec.managedBy: kueue.x-k8s.io/multikueue` is copied to the worker that won its
//! Workload (no selector, no controller labels, no `managedBy`, with the origin and prebuilt-workload
//! labels), and the copy's status is brought back.

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, PostParams};
use kube::core::GroupVersionKind;

use crate::api::batch::MANAGED_LABELS;
use crate::api::kueue::multikueue::MANAGED_BY;
use crate::jobframework::multikueue::{
    JobKey, MultiKueueAdapter, clone_meta_for_creation, delete_remote_job, set_multikueue_meta,
};

/// The adapter for `batch/v1` Jobs.
pub struct BatchJobAdapter;

fn suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

fn condition_true(status: Option<&JobStatus>, type_: &str) -> bool {
    status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

fn finished(job: &Job) -> bool {
    ["Complete", "Failed"]
        .iter()
        .any(|t| condition_true(job.status.as_ref(), t))
}

/// Kueue's `determineStatusUpdate`: the status the manager's Job should carry, and whether the copy
/// is deferred. A running manager's Job, a suspended copy or a finished one take the copy's status;
/// a suspended manager's Job whose copy runs keeps its own status, with `Suspended=True` (Kubernetes
/// refuses a suspended Job's status that says otherwise), until it is unsuspended.
pub fn status_update(local: &Job, remote: &Job, now: jiff::Timestamp) -> (JobStatus, bool) {
    let remote_status = remote.status.clone().unwrap_or_default();
    if !suspended(local) || suspended(remote) || finished(remote) {
        return (remote_status, false);
    }
    let mut status = local.status.clone().unwrap_or_default();
    if !condition_true(Some(&status), "Suspended") {
        let cond = JobCondition {
            type_: "Suspended".into(),
            status: "True".into(),
            reason: Some("MultiKueueAdapter".into()),
            message: Some("Set by MultiKueue adapter".into()),
            last_transition_time: Some(Time(now)),
            last_probe_time: Some(Time(now)),
        };
        let conds = status.conditions.get_or_insert_with(Vec::new);
        match conds.iter_mut().find(|c| c.type_ == "Suspended") {
            Some(c) => *c = cond,
            None => conds.push(cond),
        }
    }
    (status, true)
}

/// The status of a suspended manager's Job whose copies are gone: no pod counted as active or ready
/// (no Job controller acts on a Job managed by MultiKueue, so nothing else would zero them). `None`
/// while the Job still runs or when nothing changes.
pub fn released_status(local: &Job) -> Option<JobStatus> {
    let mut status = local.status.clone()?;
    if !suspended(local) || (status.active.unwrap_or(0) == 0 && status.ready.unwrap_or(0) == 0) {
        return None;
    }
    status.active = Some(0);
    status.ready = Some(0);
    Some(status)
}

/// Kueue's copy of the manager's Job for a worker.
pub fn remote_copy(local: &Job, workload_name: &str, origin: &str) -> Job {
    let mut meta = clone_meta_for_creation(&local.metadata);
    set_multikueue_meta(&mut meta, workload_name, origin);
    let mut spec = local.spec.clone().unwrap_or_default();
    spec.selector = None;
    spec.managed_by = None;
    if let Some(labels) = spec.template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        for l in MANAGED_LABELS {
            labels.remove(l);
        }
    }
    Job {
        metadata: meta,
        spec: Some(spec),
        status: None,
    }
}

impl MultiKueueAdapter for BatchJobAdapter {
    fn gvk(&self) -> GroupVersionKind {
        super::gvk()
    }

    fn unmanaged_reason<'a>(
        &'a self,
        local: &'a kube::Client,
        key: &'a JobKey,
    ) -> BoxFuture<'a, Result<Option<String>, kube::Error>> {
        async move {
            let job = Api::<Job>::namespaced(local.clone(), &key.namespace)
                .get(&key.name)
                .await?;
            let by = job
                .spec
                .as_ref()
                .and_then(|s| s.managed_by.clone())
                .unwrap_or_default();
            Ok((by != MANAGED_BY)
                .then(|| format!("Expecting spec.managedBy to be {MANAGED_BY:?} not {by:?}")))
        }
        .boxed()
    }

    fn sync_job<'a>(
        &'a self,
        local: &'a kube::Client,
        remote: &'a kube::Client,
        key: &'a JobKey,
        workload_name: &'a str,
        origin: &'a str,
    ) -> BoxFuture<'a, Result<bool, kube::Error>> {
        async move {
            let locals = Api::<Job>::namespaced(local.clone(), &key.namespace);
            let remotes = Api::<Job>::namespaced(remote.clone(), &key.namespace);
            let mut local_job = locals.get(&key.name).await?;
            match remotes.get_opt(&key.name).await? {
                Some(remote_job) => {
                    let (status, deferred) = status_update(&local_job, &remote_job, jiff::Timestamp::now());
                    if local_job.status.clone().unwrap_or_default() != status {
                        local_job.status = Some(status);
                        locals
                            .replace_status(&key.name, &PostParams::default(), &local_job)
                            .await?;
                    }
                    Ok(deferred)
                }
                None => {
                    let copy = remote_copy(&local_job, workload_name, origin);
                    remotes.create(&PostParams::default(), &copy).await?;
                    Ok(false)
                }
            }
        }
        .boxed()
    }

    fn delete_remote_object<'a>(
        &'a self,
        remote: &'a kube::Client,
        key: &'a JobKey,
        origin: &'a str,
    ) -> BoxFuture<'a, Result<(), kube::Error>> {
        delete_remote_job::<Job>(remote, key, origin).boxed()
    }

    fn release_local<'a>(
        &'a self,
        local: &'a kube::Client,
        key: &'a JobKey,
    ) -> BoxFuture<'a, Result<(), kube::Error>> {
        async move {
            let locals = Api::<Job>::namespaced(local.clone(), &key.namespace);
            let Some(mut job) = locals.get_opt(&key.name).await? else {
                return Ok(());
            };
            if let Some(status) = released_status(&job) {
                job.status = Some(status);
                locals
                    .replace_status(&key.name, &PostParams::default(), &job)
                    .await?;
            }
            Ok(())
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(v: serde_json::Value) -> Job {
        serde_json::from_value(v).unwrap()
    }

    /// Kueue `job_multikueue_adapter.go` `SyncJob` (creation): no selector, no managedBy, the
    /// controller labels dropped from the template, origin and prebuilt labels set.
    #[test]
    fn remote_copy_is_clean() {
        let local = job(serde_json::json!({
            "metadata": {"name": "j", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"managedBy": MANAGED_BY, "suspend": true,
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
                "template": {"metadata": {"labels": {"batch.kubernetes.io/controller-uid": "u",
                    "controller-uid": "u", "job-name": "j", "batch.kubernetes.io/job-name": "j", "app": "x"}},
                    "spec": {"containers": []}}}
        }));
        let copy = remote_copy(&local, "wl", "origin-a");
        assert_eq!(copy.metadata.uid, None);
        assert_eq!(copy.metadata.resource_version, None);
        let labels = copy.metadata.labels.clone().unwrap();
        assert_eq!(labels["kueue.x-k8s.io/queue-name"], "lq");
        assert_eq!(labels["kueue.x-k8s.io/prebuilt-workload-name"], "wl");
        assert_eq!(labels["kueue.x-k8s.io/multikueue-origin"], "origin-a");
        let spec = copy.spec.unwrap();
        assert_eq!(spec.managed_by, None);
        assert_eq!(spec.selector, None);
        assert_eq!(spec.suspend, Some(true));
        let tl = spec.template.metadata.unwrap().labels.unwrap();
        assert_eq!(tl.keys().collect::<Vec<_>>(), vec!["app"]);
    }

    /// Kueue `job_multikueue_adapter_test.go`: a suspended manager's Job whose copy runs is marked
    /// `Suspended=True` and deferred; once it runs it takes the copy's status.
    #[test]
    fn status_update_defers_while_local_suspended() {
        let local = job(serde_json::json!({"spec": {"suspend": true, "template": {}}}));
        let remote = job(serde_json::json!({"spec": {"suspend": false, "template": {}},
            "status": {"active": 1}}));
        let (status, deferred) = status_update(&local, &remote, jiff::Timestamp::UNIX_EPOCH);
        assert!(deferred);
        assert_eq!(status.active, None);
        assert!(condition_true(Some(&status), "Suspended"));
        let running = job(serde_json::json!({"spec": {"suspend": false, "template": {}}}));
        let (status, deferred) = status_update(&running, &remote, jiff::Timestamp::UNIX_EPOCH);
        assert!(!deferred);
        assert_eq!(status.active, Some(1));
        let done = job(serde_json::json!({"spec": {"suspend": false, "template": {}},
            "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}}));
        let (status, deferred) = status_update(&local, &done, jiff::Timestamp::UNIX_EPOCH);
        assert!(!deferred);
        assert_eq!(status.succeeded, Some(1));
    }

    /// A suspended manager's Job whose copies were removed counts no running pod; a running one, or
    /// one counting none already, is left alone.
    #[test]
    fn released_status_zeroes_the_mirrored_pods_once_suspended() {
        let stopped = job(serde_json::json!({"spec": {"suspend": true, "template": {}},
            "status": {"active": 1, "ready": 1, "succeeded": 0}}));
        let s = released_status(&stopped).unwrap();
        assert_eq!((s.active, s.ready, s.succeeded), (Some(0), Some(0), Some(0)));
        let running = job(serde_json::json!({"spec": {"suspend": false, "template": {}},
            "status": {"active": 1}}));
        assert_eq!(released_status(&running), None);
        let idle = job(serde_json::json!({"spec": {"suspend": true, "template": {}},
            "status": {"active": 0}}));
        assert_eq!(released_status(&idle), None);
    }
}
