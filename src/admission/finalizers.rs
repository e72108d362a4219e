//! Kueue's `resource-in-use` finalizer on ClusterQueues and ResourceFlavors: added to every live
//! one, and released from a deleted one only once nothing uses it (for a ClusterQueue, no workload
//! holds quota in it; for a ResourceFlavor, no ClusterQueue references it). Pure: the loop applies
//! the change.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::kueue::constants::RESOURCE_IN_USE_FINALIZER;
use crate::api::kueue::{ClusterQueue, Workload};

/// What to do with an object's finalizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Add,
    Remove,
}

/// The change `meta` needs, given whether the object is in use.
pub fn decide(meta: &ObjectMeta, in_use: bool) -> Option<Change> {
    let has = meta
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == RESOURCE_IN_USE_FINALIZER);
    match (meta.deletion_timestamp.is_some(), has) {
        (false, false) => Some(Change::Add),
        (true, true) if !in_use => Some(Change::Remove),
        _ => None,
    }
}

/// The finalizers `meta` keeps after `change`, in their order.
pub fn apply(meta: &ObjectMeta, change: Change) -> Vec<String> {
    let mut kept: Vec<String> = meta
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != RESOURCE_IN_USE_FINALIZER)
        .cloned()
        .collect();
    if change == Change::Add {
        kept.push(RESOURCE_IN_USE_FINALIZER.to_string());
    }
    kept
}

/// Whether a workload of `workloads` holds quota in ClusterQueue `cq` (Kueue's
/// `ClusterQueueEmpty` is false).
pub fn cluster_queue_in_use<'a>(cq: &str, mut workloads: impl Iterator<Item = &'a Workload>) -> bool {
    workloads.any(|w| {
        !w.is_finished() && w.has_quota_reservation() && w.admission().is_some_and(|a| a.cluster_queue == cq)
    })
}

/// Whether a ClusterQueue of `cqs` references flavor `name` (Kueue's `ClusterQueuesUsingFlavor`).
pub fn flavor_in_use<'a>(name: &str, mut cqs: impl Iterator<Item = &'a ClusterQueue>) -> bool {
    cqs.any(|cq| {
        cq.spec
            .resource_groups()
            .iter()
            .flat_map(|g| g.flavors.iter())
            .any(|f| f.name == name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn meta(deleting: bool, finalizers: &[&str]) -> ObjectMeta {
        ObjectMeta {
            deletion_timestamp: deleting.then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
            finalizers: Some(finalizers.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn added_to_live_objects_released_from_deleted_ones_when_unused() {
        let other = "example.com/other";
        let cases = [
            (meta(false, &[]), false, Some(Change::Add)),
            (meta(false, &[other]), true, Some(Change::Add)),
            (meta(false, &[RESOURCE_IN_USE_FINALIZER]), true, None),
            (meta(true, &[RESOURCE_IN_USE_FINALIZER]), true, None),
            (
                meta(true, &[other, RESOURCE_IN_USE_FINALIZER]),
                false,
                Some(Change::Remove),
            ),
            // Another controller's finalizer is not ours to add to a deleted object.
            (meta(true, &[other]), false, None),
        ];
        for (i, (m, in_use, want)) in cases.into_iter().enumerate() {
            assert_eq!(decide(&m, in_use), want, "case {i}");
        }
        assert_eq!(
            apply(&meta(true, &[other, RESOURCE_IN_USE_FINALIZER]), Change::Remove),
            [other]
        );
        assert_eq!(
            apply(&meta(false, &[other]), Change::Add),
            [other, RESOURCE_IN_USE_FINALIZER]
        );
    }
}
