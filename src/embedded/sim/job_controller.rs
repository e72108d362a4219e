//! The embedded cluster's Job controller, playing kube-controller-manager's part for batch/v1 Jobs:
//! while a Job runs it keeps as many pods as its parallelism and remaining completions ask for, counts
//! them into `active`/`ready`/`succeeded`/`failed`, deletes the active ones when the Job is suspended,
//! and ends it with the real controller's conditions (`Complete` once enough pods succeeded, `Failed`
//! past `backoffLimit`). A Job whose `spec.managedBy` names another controller is left alone, as the
//! real controller leaves it. The decision is [`decide`] (pure); [`run`] executes it.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;

use super::{RETRY, SimError};
use crate::api::batch as b;

/// The real controller's condition types, reasons and messages.
pub mod cond {
    pub const SUSPENDED: &str = "Suspended";
    pub const COMPLETE: &str = "Complete";
    pub const FAILED: &str = "Failed";
    pub const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
    pub const FAILURE_TARGET: &str = "FailureTarget";
    pub const REASON_SUSPENDED: &str = "JobSuspended";
    pub const MSG_SUSPENDED: &str = "Job suspended";
    pub const REASON_RESUMED: &str = "JobResumed";
    pub const MSG_RESUMED: &str = "Job resumed";
    pub const REASON_COMPLETIONS_REACHED: &str = "CompletionsReached";
    pub const MSG_COMPLETIONS_REACHED: &str = "Reached expected number of succeeded pods";
    pub const REASON_BACKOFF_LIMIT: &str = "BackoffLimitExceeded";
    pub const MSG_BACKOFF_LIMIT: &str = "Job has reached the specified backoff limit";
}

/// The completion index of an Indexed Job's pod.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// What to do with one Job.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// New pods, by completion index (`None` for a NonIndexed Job).
    pub create: Vec<Option<i32>>,
    /// Active pods to delete, by name.
    pub delete: Vec<String>,
    /// The status to write, when it changes.
    pub status: Option<JobStatus>,
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

fn is_active(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none() && !matches!(phase(p), "Succeeded" | "Failed")
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn index_of(p: &Pod) -> Option<i32> {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(COMPLETION_INDEX))
        .and_then(|v| v.parse().ok())
}

fn condition_true(status: &JobStatus, type_: &str) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// Sets a condition (its transition time changes only with its status); true when anything changed.
fn set_condition(
    status: &mut JobStatus,
    type_: &str,
    on: bool,
    reason: &str,
    message: &str,
    now: &Time,
) -> bool {
    let want = if on { "True" } else { "False" };
    let conds = status.conditions.get_or_insert_with(Vec::new);
    match conds.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == want && c.reason.as_deref() == Some(reason) => false,
        Some(c) => {
            if c.status != want {
                c.last_transition_time = Some(now.clone());
            }
            c.status = want.to_string();
            c.reason = Some(reason.to_string());
            c.message = Some(message.to_string());
            c.last_probe_time = Some(now.clone());
            true
        }
        None => {
            conds.push(JobCondition {
                type_: type_.to_string(),
                status: want.to_string(),
                reason: Some(reason.to_string()),
                message: Some(message.to_string()),
                last_probe_time: Some(now.clone()),
                last_transition_time: Some(now.clone()),
            });
            true
        }
    }
}

/// The Job controller's decision for one Job and the pods it owns.
pub fn decide(job: &Job, pods: &[&Pod], now: jiff::Timestamp) -> Plan {
    let mut plan = Plan::default();
    let spec = job.spec.clone().unwrap_or_default();
    if job.metadata.deletion_timestamp.is_some() || !b::managed_by_job_controller(&spec) {
        return plan;
    }
    let now = Time(now);
    let old = job.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    let active: Vec<&Pod> = pods.iter().copied().filter(|p| is_active(p)).collect();
    // Counts never go down: a finished pod deleted by someone is still counted.
    let succeeded_pods: Vec<&Pod> = pods.iter().copied().filter(|p| phase(p) == "Succeeded").collect();
    let succeeded = (succeeded_pods.len() as i32).max(old.succeeded.unwrap_or(0));
    let failed = (pods.iter().filter(|p| phase(p) == "Failed").count() as i32).max(old.failed.unwrap_or(0));
    status.succeeded = Some(succeeded);
    status.failed = Some(failed);
    let finished = condition_true(&old, cond::COMPLETE) || condition_true(&old, cond::FAILED);
    let parallelism = b::parallelism(&spec).max(0);
    let backoff_limit = spec.backoff_limit.unwrap_or(b::DEFAULT_BACKOFF_LIMIT);
    // An Indexed Job's completed indexes (below its completions: a scale-down drops the ones above),
    // kept in its status as the real controller keeps them, so a pod deleted after it succeeded still
    // counts.
    let completed = indexed.then(|| {
        let limit = spec.completions.unwrap_or(parallelism);
        let mut all = b::parse_indexes(old.completed_indexes.as_deref().unwrap_or_default(), limit);
        all.extend(
            succeeded_pods
                .iter()
                .filter_map(|p| index_of(p))
                .filter(|i| (0..limit).contains(i))
                .map(|i| (i, i)),
        );
        b::merge_indexes(all)
    });
    if let Some(done) = &completed {
        status.completed_indexes = Some(b::format_indexes(done));
    }
    let complete = match spec.completions {
        Some(c) if indexed => completed
            .as_ref()
            .is_some_and(|d| b::count_indexes(d) >= i64::from(c)),
        Some(c) => succeeded >= c,
        // A work queue: done once a pod succeeded and none is left running.
        None => succeeded > 0 && active.is_empty(),
    };
    let suspended = spec.suspend == Some(true);
    let mut keep: Vec<&Pod> = active.clone();
    if finished {
        keep.clear();
    } else if failed > backoff_limit {
        set_condition(
            &mut status,
            cond::FAILURE_TARGET,
            true,
            cond::REASON_BACKOFF_LIMIT,
            cond::MSG_BACKOFF_LIMIT,
            &now,
        );
        set_condition(
            &mut status,
            cond::FAILED,
            true,
            cond::REASON_BACKOFF_LIMIT,
            cond::MSG_BACKOFF_LIMIT,
            &now,
        );
        keep.clear();
    } else if complete {
        set_condition(
            &mut status,
            cond::SUCCESS_CRITERIA_MET,
            true,
            cond::REASON_COMPLETIONS_REACHED,
            cond::MSG_COMPLETIONS_REACHED,
            &now,
        );
        set_condition(
            &mut status,
            cond::COMPLETE,
            true,
            cond::REASON_COMPLETIONS_REACHED,
            cond::MSG_COMPLETIONS_REACHED,
            &now,
        );
        status.completion_time = Some(now.clone());
        keep.clear();
    } else if suspended {
        // Suspending deletes the active pods and resets the start time (as Kueue and the real
        // controller do between them), so the template may take new scheduling directives.
        if set_condition(
            &mut status,
            cond::SUSPENDED,
            true,
            cond::REASON_SUSPENDED,
            cond::MSG_SUSPENDED,
            &now,
        ) || status.start_time.is_some()
        {
            status.start_time = None;
        }
        keep.clear();
    } else {
        let was_suspended = condition_true(&old, cond::SUSPENDED);
        if was_suspended {
            set_condition(
                &mut status,
                cond::SUSPENDED,
                false,
                cond::REASON_RESUMED,
                cond::MSG_RESUMED,
                &now,
            );
        }
        if was_suspended || status.start_time.is_none() {
            status.start_time = Some(now.clone());
        }
        let want = match spec.completions {
            Some(c) => parallelism.min((c - succeeded).max(0)),
            None if succeeded > 0 => 0,
            None => parallelism,
        };
        let want = usize::try_from(want).unwrap_or(0);
        let total = spec.completions.unwrap_or(parallelism);
        keep = keep_for(keep, want, indexed.then_some(total));
        if indexed {
            let done = completed.clone().unwrap_or_default();
            let running: BTreeSet<i32> = keep.iter().copied().filter_map(index_of).collect();
            let free = |i: &i32| !running.contains(i) && !done.iter().any(|(a, b)| (*a..=*b).contains(i));
            plan.create = (0..total)
                .filter(free)
                .take(want.saturating_sub(keep.len()))
                .map(Some)
                .collect();
        } else {
            plan.create = vec![None; want.saturating_sub(keep.len())];
        }
    }
    let kept: BTreeSet<&str> = keep.iter().filter_map(|p| p.metadata.name.as_deref()).collect();
    plan.delete = active
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .filter(|n| !kept.contains(n.as_str()))
        .collect();
    status.active = Some(keep.len() as i32 + plan.create.len() as i32);
    status.ready = Some(keep.iter().filter(|p| is_ready(p)).count() as i32);
    if status != old {
        plan.status = Some(status);
    }
    plan
}

/// The active pods a Job keeps when it wants `want` of them (the real controller's
/// `activePodsForRemoval`): an Indexed Job first drops pods whose index is out of range (`total`, its
/// completions) or taken twice; then the pods to go are the least far along, as `controller.ActivePods`
/// sorts them: not yet scheduled (held by a scheduling gate) before scheduled, Pending before Running,
/// not ready before ready, the newest first. A scale-down thus takes an elastic Job's gated pods before
/// its running ones.
fn keep_for(active: Vec<&Pod>, want: usize, total: Option<i32>) -> Vec<&Pod> {
    let mut seen = BTreeSet::new();
    let mut keep: Vec<&Pod> = active
        .into_iter()
        .filter(|p| match total {
            Some(t) => index_of(p).is_some_and(|i| (0..t).contains(&i) && seen.insert(i)),
            None => true,
        })
        .collect();
    if keep.len() <= want {
        return keep;
    }
    let scheduled = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    };
    let phase_rank = |p: &Pod| match phase(p) {
        "Pending" => 0,
        "Running" => 2,
        _ => 1,
    };
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    // Most worth keeping first; ties by name so the choice is the same on every pass.
    keep.sort_by(|a, b| {
        (scheduled(b), phase_rank(b), is_ready(b))
            .cmp(&(scheduled(a), phase_rank(a), is_ready(a)))
            .then_with(|| created(a).cmp(&created(b)))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    keep.truncate(want);
    keep
}

/// A pod of the Job, as the real controller makes it: the template, the controller's labels, an owner
/// reference, and the completion index of an Indexed Job.
pub fn pod_for(job: &Job, index: Option<i32>) -> Pod {
    let name = job.metadata.name.clone().unwrap_or_default();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let template: PodTemplateSpec = job.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let mut meta: ObjectMeta = template.metadata.unwrap_or_default();
    let labels = meta.labels.get_or_insert_with(Default::default);
    for (k, v) in [
        (b::CONTROLLER_UID_LABEL, &uid),
        (b::LEGACY_CONTROLLER_UID_LABEL, &uid),
        (b::JOB_NAME_LABEL, &name),
        (b::LEGACY_JOB_NAME_LABEL, &name),
    ] {
        labels.insert(k.to_string(), v.clone());
    }
    if let Some(i) = index {
        meta.annotations
            .get_or_insert_with(Default::default)
            .insert(COMPLETION_INDEX.to_string(), i.to_string());
    }
    meta.name = None;
    meta.generate_name = Some(match index {
        Some(i) => format!("{name}-{i}-"),
        None => format!("{name}-"),
    });
    meta.namespace = job.metadata.namespace.clone();
    meta.owner_references = Some(vec![OwnerReference {
        api_version: b::API_VERSION.to_string(),
        kind: b::KIND.to_string(),
        name,
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    Pod {
        metadata: meta,
        spec: template.spec,
        status: None,
    }
}

async fn reconcile(job: Arc<Job>, client: Arc<kube::Client>) -> Result<Action, SimError> {
    let ns = job.metadata.namespace.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let pods_api: Api<Pod> = Api::namespaced((*client).clone(), &ns);
    let pods = pods_api
        .list(&ListParams::default().labels(&format!("{}={uid}", b::CONTROLLER_UID_LABEL)))
        .await?
        .items;
    let refs: Vec<&Pod> = pods.iter().collect();
    let plan = decide(&job, &refs, jiff::Timestamp::now());
    for n in &plan.delete {
        match pods_api.delete(n, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    for index in &plan.create {
        pods_api
            .create(&PostParams::default(), &pod_for(&job, *index))
            .await?;
    }
    if let Some(status) = plan.status {
        let jobs: Api<Job> = Api::namespaced((*client).clone(), &ns);
        let mut obj = (*job).clone();
        obj.status = Some(status);
        jobs.replace_status(&name, &PostParams::default(), &obj).await?;
    }
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Job>, _: &SimError, _: Arc<kube::Client>) -> Action {
    Action::requeue(RETRY)
}

/// Runs until the stream ends (never, while the API is up).
pub async fn run(client: kube::Client) {
    let ctx = Arc::new(client.clone());
    Controller::new(Api::<Job>::all(client.clone()), watcher::Config::default())
        .owns(
            Api::<Pod>::all(client),
            watcher::Config::default().labels(b::CONTROLLER_UID_LABEL),
        )
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

#[cfg(test)]
mod tests;
