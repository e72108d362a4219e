//! The slice-chain queries a kind needs (Kueue's workload slices, `kueue.x-k8s.io/workload-slice-replacement-for`):
//! which workload a scale-up slice replaces, and whether a workload is being evicted. Pure reads of the
//! Workload object; the admission loop answers the same questions with these functions.

use crate::api::kueue::Workload;
use crate::api::kueue::constants::{condition, label};
use crate::queue::WorkloadKey;

/// `kueue.x-k8s.io/workload-slice-replacement-for: <ns>/<name>` of a scale-up slice: the slice it replaces.
pub fn replacement_for(wl: &Workload) -> Option<WorkloadKey> {
    let v = wl.metadata.annotations.as_ref()?.get(label::WORKLOAD_SLICE_REPLACEMENT_FOR)?;
    Some(match v.split_once('/') {
        Some((ns, n)) => WorkloadKey::new(ns, n),
        None => WorkloadKey::new(wl.metadata.namespace.clone().unwrap_or_default(), v.clone()),
    })
}

/// An eviction is in progress: Evicted=True while quota is still reserved.
pub fn is_evicted(wl: &Workload) -> bool {
    wl.status.as_ref().is_some_and(|s| s.condition_true(condition::EVICTED))
}
