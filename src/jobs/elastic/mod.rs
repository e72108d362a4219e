//! Kueue's `ElasticJobUngater` (`pkg/controller/elasticjobs/elastic_job_ungater.go`): the pods of an
//! elastic job are created behind the scheduling gate `kueue.x-k8s.io/elastic-job` (its webhook puts it
//! on the pod template), and this controller lifts it from as many of them, per podset, as the job's
//! active workload slice grants. So a job resized while it runs (a batch Job's `parallelism` raised)
//! keeps its running pods, and its new pods wait, gated, until the new slice is admitted.
//!
//! The active slice is Kueue's `FindLatestActiveWorkload`: of the job's unfinished Workloads, the
//! newest that holds a quota reservation and is not being evicted, and only once fully admitted. The
//! decision is pure ([`active_slice`], [`pods_to_ungate`]); [`controller`] executes it. In quotagate only
//! batch Jobs use this gate (the Ray kinds are gated where their pods are created).

pub mod controller;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::api::kueue::Workload;
use crate::api::kueue::constants::label;
use crate::jobframework::is_evicted;

/// Kueue's `SliceName`: the chain's stable name (the first slice's), or the workload's own.
pub fn slice_name(wl: &Workload) -> &str {
    wl.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(label::WORKLOAD_SLICE_NAME))
        .map(String::as_str)
        .unwrap_or_else(|| wl.metadata.name.as_deref().unwrap_or_default())
}

/// The slice chain a pod belongs to: the slice-name annotation admission put on its template.
pub fn pod_slice_name(pod: &Pod) -> Option<&str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(label::WORKLOAD_SLICE_NAME))
        .map(String::as_str)
}

pub fn has_gate(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == label::ELASTIC_JOB_SCHEDULING_GATE))
}

fn is_terminated(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The job's active slice among its Workloads, if it may let pods through: the newest unfinished,
/// elastic one holding quota and not evicted (an eviction sets its condition before it gives the
/// reservation back, and capacity on its way out grants nothing), and only when admitted (quota alone is
/// not enough while admission checks are pending).
pub fn active_slice(workloads: &[Workload]) -> Option<&Workload> {
    let mut live: Vec<&Workload> = workloads.iter().filter(|w| !w.is_finished()).collect();
    // Oldest first, same-second ties by uid (Kueue's `FindNotFinishedWorkloads`).
    live.sort_by(|a, b| {
        let at = |w: &Workload| w.metadata.creation_timestamp.as_ref().map(|t| t.0);
        at(a)
            .cmp(&at(b))
            .then_with(|| a.metadata.uid.cmp(&b.metadata.uid))
    });
    let latest = live
        .into_iter()
        .rev()
        .find(|w| w.has_quota_reservation() && !is_evicted(w))?;
    (crate::api::kueue::is_elastic_job(&latest.metadata) && latest.is_admitted()).then_some(latest)
}

/// The gated pods of `active`'s chain to let through: per podset (the pod's `kueue.x-k8s.io/podset`
/// label), as many as the slice grants less the chain's pods already ungated and not terminated, the
/// lowest names first. A pod with no podset label is granted nothing; capacity is never shared between
/// podsets.
pub fn pods_to_ungate<'a>(active: &Workload, pods: &'a [Pod]) -> Vec<&'a Pod> {
    let chain = slice_name(active);
    let granted: BTreeMap<&str, i64> = active
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name(), i64::from(p.count())))
        .collect();
    let mut gated: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    let mut ungated: BTreeMap<&str, i64> = BTreeMap::new();
    for pod in pods
        .iter()
        .filter(|p| pod_slice_name(p) == Some(chain) && !is_terminated(p))
    {
        let podset = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(label::PODSET))
            .map(String::as_str)
            .unwrap_or_default();
        if has_gate(pod) {
            gated.entry(podset).or_default().push(pod);
        } else {
            *ungated.entry(podset).or_default() += 1;
        }
    }
    let mut out = Vec::new();
    for (podset, mut candidates) in gated {
        let room = granted.get(podset).copied().unwrap_or(0) - ungated.get(podset).copied().unwrap_or(0);
        let room = usize::try_from(room).unwrap_or(0);
        candidates.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        out.extend(candidates.into_iter().take(room));
    }
    out
}

/// The pod without the elastic-job gate (other gates stay).
pub fn ungated(pod: &Pod) -> Pod {
    let mut after = pod.clone();
    if let Some(spec) = after.spec.as_mut() {
        if let Some(gates) = spec.scheduling_gates.as_mut() {
            gates.retain(|g| g.name != label::ELASTIC_JOB_SCHEDULING_GATE);
        }
        if spec.scheduling_gates.as_ref().is_some_and(Vec::is_empty) {
            spec.scheduling_gates = None;
        }
    }
    after
}

#[cfg(test)]
mod tests;
