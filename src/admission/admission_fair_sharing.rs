//! Admission fair sharing in the loop (Kueue's LocalQueue controller part of KEP 4136): every
//! LocalQueue is tracked in the core's ledger with its weight and ClusterQueue, sampled when its
//! `usageSamplingInterval` runs out (the loop wakes for it: no polling), and its ledger entry is
//! written to `status.fairSharing.admissionFairSharingStatus`. A restarted leader seeds each
//! LocalQueue from that status, so the history survives restarts (DESIGN I5).

use std::collections::HashSet;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::snapshot::Snapshot;
use crate::api::kueue::{
    LocalQueue, LocalQueueAdmissionFairSharingStatus, LocalQueueFairSharingStatus, LocalQueueStatus, Workload,
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
    let s = lq
        .status
        .as_ref()?
        .fair_sharing
        .as_ref()?
        .admission_fair_sharing_status
        .as_ref()?;
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
        // The persisted history only seeds a LocalQueue not tracked yet.
        let seed = if core.local_queue_usage(&key).is_none() {
            persisted(lq)
        } else {
            None
        };
        core.track_local_queue(key.clone(), lq.spec.cluster_queue(), weight(lq), seed, now_ms);
        live.insert(key);
    }
    core.untrack_local_queues(|k| live.contains(k));
    core.sample_local_queues(now_ms);
}

/// The LocalQueue under which a workload's unsettled entry penalty can still settle (Kueue's
/// `reconcileAfsPenaltiesOnUpdate`): its own while it is not finished and either active or still
/// holding its reservation (reactivated in place, it can be admitted without a new reservation).
/// `None`: the penalty can never settle and is dropped. An evicted, active workload keeps it.
pub fn penalty_home(wl: &Workload) -> Option<LocalQueueKey> {
    let queue = wl.spec.queue_name.as_deref().filter(|q| !q.is_empty())?;
    let can_settle = !wl.is_finished() && (super::conditions::is_active(wl) || wl.has_quota_reservation());
    can_settle.then(|| LocalQueueKey::new(wl.namespace().unwrap_or_default(), queue))
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
    // Whole seconds, as the API keeps a Time: with the milliseconds, the status read back would
    // never equal the one computed, and every cycle would write it again.
    let last_update = jiff::Timestamp::from_second(e.last_update_ms.div_euclid(1000))
        .unwrap_or_else(|_| jiff::Timestamp::now());
    let afs = LocalQueueAdmissionFairSharingStatus {
        consumed_resources: e
            .consumed
            .iter()
            .map(|(r, n)| {
                (
                    r.clone(),
                    ApiQuantity(Quantity::from_nanos(*n, Format::DecimalSi).canonical()),
                )
            })
            .collect(),
        last_update: Time(last_update),
    };
    let fs = s
        .fair_sharing
        .get_or_insert_with(LocalQueueFairSharingStatus::default);
    fs.admission_fair_sharing_status = Some(afs);
    if s == old { None } else { Some(s) }
}

/// Kueue's `local_queue_admission_fair_sharing_usage`, one series per tracked LocalQueue (none
/// while the feature is off).
pub fn report_usage(m: &crate::admission::metrics::Metrics, core: &AdmissionCore) {
    if core.admission_fair_sharing().is_none() {
        return;
    }
    let role = m.role();
    let values = core
        .local_queue_usages()
        .into_iter()
        .map(|(k, e, u)| {
            let l = crate::admission::metrics::LqCqLabels {
                name: k.name.clone(),
                namespace: k.namespace.clone(),
                cluster_queue: e.cluster_queue.clone(),
                replica_role: role,
            };
            (l, u)
        })
        .collect();
    m.local_queue_admission_fair_sharing_usage
        .replace(values, |g, v| {
            g.set(v);
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::kueue::FairSharing;

    /// `admission_fair_sharing_test.go` `TestResolveLQWeight`: "configured weight", "default weight";
    /// (a missing LocalQueue is simply not tracked: its workloads rank with no usage). A weight the
    /// API would refuse counts as the default.
    #[test]
    fn local_queue_weight() {
        let lq = |w: Option<&str>| {
            let mut q = LocalQueue::build("lq", "ns").cluster_queue("cq").build();
            q.spec.fair_sharing = w.map(|w| FairSharing {
                weight: Some(ApiQuantity(w.into())),
            });
            q
        };
        assert_eq!(weight(&lq(Some("2"))), 2.0);
        assert_eq!(weight(&lq(Some("500m"))), 0.5);
        assert_eq!(weight(&lq(None)), 1.0);
        assert_eq!(weight(&lq(Some("two"))), 1.0);
    }

    /// Kueue's `TestUpdateDropsUnsettleableAfsEntryPenalty` (and "finishing without admission"): where
    /// an unsettled entry penalty may still settle, by the workload as the API shows it.
    #[test]
    fn an_entry_penalty_stays_only_while_it_can_settle() {
        use crate::api::kueue::constants::condition;
        let at = jiff::Timestamp::from_second(1_800_000_000).unwrap_or_else(|e| panic!("{e}"));
        let wl = |queue: &str, active: bool, reserved: bool, finished: bool| {
            let mut w = Workload::build("wl", "ns")
                .queue(queue)
                .podset("main", 1, [("cpu", "4")])
                .build();
            w.spec.active = (!active).then_some(false);
            let mut s = crate::api::kueue::WorkloadStatus::default();
            for (type_, on) in [
                (condition::QUOTA_RESERVED, reserved),
                (condition::FINISHED, finished),
            ] {
                if on {
                    s.conditions
                        .push(crate::api::conditions::new(type_, true, "Test", "", None, at));
                }
            }
            w.status = Some(s);
            w
        };
        let home = Some(LocalQueueKey::new("ns", "lq"));
        let cases = [
            (
                "evicted back to pending on the same LocalQueue keeps it",
                wl("lq", true, false, false),
                home.clone(),
            ),
            ("reserved keeps it", wl("lq", true, true, false), home.clone()),
            (
                "deactivated keeping the reservation keeps it",
                wl("lq", false, true, false),
                home.clone(),
            ),
            (
                "deactivated with the reservation gone drops it",
                wl("lq", false, false, false),
                None,
            ),
            (
                "finished without admission drops it",
                wl("lq", true, true, true),
                None,
            ),
            (
                "moved to another LocalQueue: only that one",
                wl("lq2", true, false, false),
                Some(LocalQueueKey::new("ns", "lq2")),
            ),
        ];
        for (name, w, want) in cases {
            assert_eq!(penalty_home(&w), want, "{name}");
        }
    }

    /// The status shows the ledger in Kueue's units: cores for cpu, nine decimals at most.
    #[test]
    fn status_shows_the_ledger() {
        use crate::queue::admission_fair_sharing::AfsConfig;
        use crate::queue::{ClusterQueueModel, FlavorModel};
        let mut core = AdmissionCore::new();
        core.upsert_flavor(FlavorModel::build("default"));
        core.set_admission_fair_sharing(Some(AfsConfig {
            usage_half_life_ms: 1000,
            usage_sampling_interval_ms: 1000,
            resource_weights: Default::default(),
        }));
        let cq = ClusterQueueModel::build("cq").flavor("default", &[("cpu", 8000), ("memory", 1 << 30)]);
        core.upsert_cluster_queue(cq).unwrap_or_else(|e| panic!("{e}"));
        let persisted: Resources = [
            ("cpu".to_string(), 7_500_000_000_i128),
            ("memory".to_string(), 1_000_000_001),
        ]
        .into();
        core.track_local_queue(
            LocalQueueKey::new("ns", "lq"),
            "cq",
            1.0,
            Some(persisted),
            1_800_000_000_123,
        );
        let lq = LocalQueue::build("lq", "ns").cluster_queue("cq").build();
        let s = status(&lq, None, &core).unwrap_or_else(|| panic!("a status"));
        let afs = s
            .fair_sharing
            .and_then(|f| f.admission_fair_sharing_status)
            .unwrap_or_else(|| panic!("afs"));
        let shown: Vec<(String, String)> = afs
            .consumed_resources
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        assert_eq!(
            shown,
            [
                ("cpu".to_string(), "7500m".to_string()),
                ("memory".to_string(), "1000000001n".to_string())
            ]
        );
        assert_eq!(afs.last_update.0.as_millisecond(), 1_800_000_000_000);
        // Written once and read back through the API's JSON: the same ledger again is no change.
        let mut written = lq.clone();
        written.status = Some(status(&lq, None, &core).unwrap_or_default());
        let json = serde_json::to_value(&written).unwrap_or_else(|e| panic!("{e}"));
        let read: LocalQueue = serde_json::from_value(json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(status(&read, None, &core), None);
    }
}
