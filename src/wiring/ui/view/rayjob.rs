//! The RayJobs section: each job's place in KubeRay's state machine, its cluster, and what its
//! Workload says about quota (admitted by which ClusterQueue, or why it waits, in the scheduler's
//! words), so a training job waiting for GPUs says so beside the services holding them.

use std::fmt::Write as _;

use kube::ResourceExt;

use super::{esc, obj_link};
use crate::api::kueue::Workload;
use crate::api::kueue::constants::condition;
use crate::api::ray::RayJob;
use crate::wiring::ui::model::Snapshot;

/// The Workload the job's quota story is on: the open one, else the last finished one.
fn workload_of<'a>(snap: &'a Snapshot, job: &RayJob) -> Option<&'a Workload> {
    let (ns, name) = (job.namespace().unwrap_or_default(), job.name_any());
    let mut owned: Vec<&Workload> = snap
        .workloads
        .iter()
        .map(|w| w.as_ref())
        .filter(|w| {
            w.namespace().unwrap_or_default() == ns
                && w.owner_references()
                    .iter()
                    .any(|o| o.kind == "RayJob" && o.name == name)
        })
        .collect();
    owned.sort_by_key(|w| {
        (
            !w.is_finished(),
            w.metadata.creation_timestamp.as_ref().map(|t| t.0),
        )
    });
    owned.last().copied()
}

fn quota_cell(snap: &Snapshot, job: &RayJob) -> String {
    if job.spec.uses_cluster_selector() {
        return "on an existing cluster (not queue-managed)".into();
    }
    let Some(wl) = workload_of(snap, job) else {
        return "no Workload (no queue label)".into();
    };
    let link = obj_link("Workload", &wl.namespace().unwrap_or_default(), &wl.name_any());
    let cond = |t: &str| {
        wl.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == t))
    };
    if wl.is_finished() {
        let how = cond(condition::FINISHED)
            .map(|c| c.reason.clone())
            .unwrap_or_default();
        return format!("{link}: finished ({})", esc(&how));
    }
    match wl.admission().filter(|_| wl.has_quota_reservation()) {
        Some(a) => format!("{link}: admitted by ClusterQueue {}", esc(&a.cluster_queue)),
        None => {
            let why = cond(condition::QUOTA_RESERVED)
                .map(|c| c.message.clone())
                .unwrap_or_else(|| "pending".into());
            format!("{link}: <span class=\"why\">waiting: {}</span>", esc(&why))
        }
    }
}

/// The RayJobs table, or nothing when there are none.
pub fn ray_jobs(snap: &Snapshot) -> String {
    if snap.ray_jobs.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<section><h2>RayJobs</h2><table class=\"rayjobs\"><tr><th>RayJob</th><th>deployment</th><th>job</th><th>cluster</th><th>quota</th></tr>",
    );
    for job in &snap.ray_jobs {
        let st = job.status.clone().unwrap_or_default();
        let ns = job.namespace().unwrap_or_default();
        let cluster = st
            .ray_cluster_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .map_or_else(|| "-".to_string(), |n| obj_link("RayCluster", &ns, n));
        let _ = write!(
            s,
            "<tr class=\"rayjob\" data-rayjob=\"{}\"><td>{}</td><td>{}{}</td><td>{}</td><td>{cluster}</td><td>{}</td></tr>",
            esc(&job.name_any()),
            obj_link("RayJob", &ns, &job.name_any()),
            st.job_deployment_status.map_or("-", |d| d.as_str()),
            if job.spec.is_suspended() {
                " (suspended)"
            } else {
                ""
            },
            st.job_status.map_or("-", |j| j.as_str()),
            quota_cell(snap, job),
        );
    }
    s.push_str("</table></section>");
    s
}
