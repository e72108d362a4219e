//! Admission fair sharing in the loop (Kueue's LocalQueue controller part of KEP 4136): every
//! LocalQueue is tracked in the core's ledger with its weight and ClusterQueue, sampled when its
//! `usageSamplingInterval` runs out (the loop wakes for it: no polling), and its ledger entry is
//! written to `status.fairSharing.admissionFairSharingStatus`. A restarted leader seeds each
//! LocalQueue from that status, so the history survives restarts (DESIGN I5).

use std::collections::HashSet;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::sync::Snapshot;
use crate::api::kueue::{
    LocalQueue, LocalQueueAdmissionFairSharingStatus, LocalQueueFairSharingStatus, LocalQueueStatus,
};
use crate::api::quantity::{Format, Quantity};
use crate::queue::AdmissionCore;
use crate::queue::admission_fair_sharing::{LocalQueueKey, Resources};

/// `spec.fairSharing.weight` as a number (1 when unset; Kueue's `LQWeightAsFloat64`). A weight that
/// does not parse (the API refuses one) counts as 1.
pub fn weight(lq: &LocalQueue) -> f64 {
    let Some(w) = lq.spec.fair_sharing.as_ref().and_then(|f| f.weight.as_ref()) else {
        return 1.0;
    };
    match Quantity::parse(&w.0) {
        Ok(q) => q.as_f64(),
        Err(e) => {
            tracing::debug!(local_queue = %lq.name_any(), error = %e, "spec.fairSharing.weight does not parse; using 1");
            1.0
        }
    }
}

/// The consumed resources persisted in status (resources that do not parse are left out).
pub fn persisted(lq: &LocalQueue) -> Option<Resources> {
    let s = lq.status.as_ref()?.fair_sharing.as_ref()?.admission_fair_sharing_status.as_ref()?;
    Some(
        s.consumed_resources
            .iter()
            .filter_map(|(r, q)| Some((r.clone(), Quantity::parse(&q.0).ok()?.nanos())))
            .collect(),
    )
}

/// Brings the ledger in line with the LocalQueues of the snapshot and samples those that are due.
pub fn sync(core: &mut AdmissionCore, snap: &Snapshot, now_ms: i64) {
    if core.admission_fair_sharing().is_none() {
        return;
    }
    let mut live: HashSet<LocalQueueKey> = HashSet::with_capacity(snap.local_queues.len());
    for lq in &snap.local_queues {
        let key = LocalQueueKey::new(lq.namespace().unwrap_or_default(), lq.name_any());
        core.track_local_queue(key.clone(), lq.spec.cluster_queue(), weight(lq), persisted(lq), now_ms);
        live.insert(key);
    }
    core.untrack_local_queues(|k| live.contains(k));
    core.sample_local_queues(now_ms);
}

/// `desired` (the rest of the LocalQueue's status, `None` when unchanged) with the ledger's entry
/// for it; `None` when nothing changed.
pub fn status(
    lq: &LocalQueue,
    desired: Option<LocalQueueStatus>,
    core: &AdmissionCore,
) -> Option<LocalQueueStatus> {
    let key = LocalQueueKey::new(lq.namespace().unwrap_or_default(), lq.name_any());
    let Some(e) = core.local_queue_usage(&key) else {
        return desired;
    };
    let old = lq.status.clone().unwrap_or_default();
    let mut s = desired.clone().unwrap_or_else(|| old.clone());
    let last_update = jiff::Timestamp::from_millisecond(e.last_update_ms).unwrap_or_else(|_| jiff::Timestamp::now());
    let afs = LocalQueueAdmissionFairSharingStatus {
        consumed_resources: e
            .consumed
            .iter()
            .map(|(r, n)| (r.clone(), ApiQuantity(Quantity::from_nanos(*n, Format::DecimalSi).canonical())))
            .collect(),
        last_update: Time(last_update),
    };
    let fs = s.fair_sharing.get_or_insert_with(LocalQueueFairSharingStatus::default);
    fs.admission_fair_sharing_status = Some(afs);
    if s == old { None } else { Some(s) }
}

/// Kueue's `local_queue_admission_fair_sharing_usage`, one series per tracked LocalQueue (none
/// while the feature is off).
pub fn report_usage(m: &crate::jobframework::metrics::Metrics, core: &AdmissionCore) {
    if core.admission_fair_sharing().is_none() {
        return;
    }
    let role = m.role();
    let values = core
        .local_queue_usages()
        .into_iter()
        .map(|(k, e, u)| {
            let l = crate::jobframework::metrics::LqCqLabels {
                name: k.name.clone(),
                namespace: k.namespace.clone(),
                cluster_queue: e.cluster_queue.clone(),
                replica_role: role,
            };
            (l, u)
        })
        .collect();
    m.local_queue_admission_fair_sharing_usage.replace(values, |g, v| {
        g.set(v);
    });
}
