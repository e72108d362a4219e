//! A pod group's `PodsReady` for waitForPodsReady, as Kueue v0.20's pod controller decides it.
//!
//! - Kueue #11654: the group is not ready while fewer pods than its total count exist.
//! - Kueue #15734 (`PodIntegrationCountSucceededPodsAsReady`, beta and on by default in v0.20): a
//!   Succeeded pod counts as ready (the kubelet sets its `Ready` to False when it completes), except in
//!   a serving group (`kueue.x-k8s.io/pod-group-serving: "true"`), where every pod must be ready.
//! - Kueue #16059 (KEP-15423, the alpha `WaitForPodsReadyMaxNotReady` gate, off by default): with the
//!   gate on, the `kueue.x-k8s.io/pod-group-max-not-ready-count` annotation lets a group be ready with
//!   up to that many of its total count not ready (not ready, not created yet or deleted). The budget
//!   is the smallest value among the group's pods; a pod without the annotation, or with a value that
//!   is not an integer in `[0, total - 1]`, counts as 0. Admission and quota stay at the full total.

use k8s_openapi::api::core::v1::Pod;

use super::ready;
use crate::api::pod as p;

/// Kueue's `GroupMaxNotReadyCountAnnotation` (KEP-15423).
pub const GROUP_MAX_NOT_READY_COUNT_ANNOTATION: &str = "kueue.x-k8s.io/pod-group-max-not-ready-count";

/// The Kueue feature gates that change a group's readiness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadinessGates {
    /// `PodIntegrationCountSucceededPodsAsReady` (Kueue #15734).
    pub count_succeeded: bool,
    /// `WaitForPodsReadyMaxNotReady` (Kueue #16059).
    pub max_not_ready: bool,
}

impl ReadinessGates {
    /// Kueue v0.20's defaults: the beta gate on, the alpha gate off.
    pub const KUEUE_V020: ReadinessGates = ReadinessGates {
        count_succeeded: true,
        max_not_ready: false,
    };
}

impl Default for ReadinessGates {
    fn default() -> Self {
        ReadinessGates::KUEUE_V020
    }
}

/// Whether `pod` counts as ready in its group: `Ready=True`, or Succeeded in a group that does not
/// serve, with the gate on.
pub fn counts_as_ready(pod: &Pod, serving: bool, gates: ReadinessGates) -> bool {
    ready(pod) || (gates.count_succeeded && !serving && p::phase(pod) == "Succeeded")
}

/// The not-ready budget `pod` asks for in a group of `total`: its annotation when that is an integer in
/// `[0, total - 1]`, else 0 (KEP-15423's silent fallback).
pub fn max_not_ready(pod: &Pod, total: i64) -> i64 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(GROUP_MAX_NOT_READY_COUNT_ANNOTATION))
        .and_then(|v| v.trim().parse::<i64>().ok())
        .filter(|m| (0..total).contains(m))
        .unwrap_or(0)
}

/// Whether a group of `total` made of `pods` is ready.
pub fn group_ready(pods: &[Pod], total: i32, serving: bool, gates: ReadinessGates) -> bool {
    let total = i64::from(total.max(0));
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    if !gates.max_not_ready {
        // All or nothing: the whole total there, every pod of it ready.
        return count(pods.len()) >= total && pods.iter().all(|x| counts_as_ready(x, serving, gates));
    }
    let readies = count(pods.iter().filter(|x| counts_as_ready(x, serving, gates)).count());
    let allowed = pods.iter().map(|x| max_not_ready(x, total)).min().unwrap_or(0);
    total - readies <= allowed
}
