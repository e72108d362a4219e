//! What the loop's metrics read off a Workload: the priority class they are labelled with, and since
//! when it waits. Shared by the admission loop and the waitForPodsReady metrics.

use crate::api::kueue::Workload;

/// The priority class Kueue's metrics label a workload with (`""` without one).
pub(super) fn priority_class(wl: &Workload) -> String {
    wl.spec
        .priority_class_ref
        .as_ref()
        .map(|r| r.name.clone())
        .unwrap_or_default()
}

/// Since when a workload waits: its last requeue (`Requeued=True`), else its creation, as Kueue's
/// `QueuedWaitTime`.
pub(super) fn queued_since(wl: &Workload) -> jiff::Timestamp {
    let requeued = wl
        .status
        .as_ref()
        .and_then(|s| s.condition(crate::api::kueue::constants::condition::REQUEUED))
        .filter(|c| c.status == "True");
    requeued
        .map(|c| c.last_transition_time.0)
        .or_else(|| wl.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .unwrap_or_else(jiff::Timestamp::now)
}
