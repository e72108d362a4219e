//! Kueue's queue gauges (pending, active, status, and the optional resource gauges a Kueue dashboard
//! reads) computed from one admission step: the snapshot, the core's per-ClusterQueue status and
//! which ClusterQueues are active. Pure; `report` then rewrites every gauge family at once, so a
//! deleted queue's series disappear as Kueue clears them.

use std::borrow::Cow;
use std::collections::HashMap;

use kube::ResourceExt;

use super::queue_status::local_queue_key;
use super::sync::Snapshot;
use crate::api::kueue::{ClusterQueue, LocalQueue, LocalQueueFlavorUsage, Workload};
use crate::jobframework::metrics::{CqLabels, CqResourceLabels, CqStatusLabels, LqActiveLabels, LqLabels, LqResourceLabels, LqStatusLabels, Metrics, Role};
use crate::queue::ClusterQueueStatus as CoreStatus;

#[derive(Debug, Default, PartialEq)]
pub struct QueueGauges {
    pub pending: Vec<(CqStatusLabels, i64)>,
    pub finished: Vec<(CqLabels, i64)>,
    pub reserving: Vec<(CqLabels, i64)>,
    pub admitted: Vec<(CqLabels, i64)>,
    pub status: Vec<(CqStatusLabels, i64)>,
    pub reservation: Vec<(CqResourceLabels, f64)>,
    pub usage: Vec<(CqResourceLabels, f64)>,
    pub nominal: Vec<(CqResourceLabels, f64)>,
    pub borrowing: Vec<(CqResourceLabels, f64)>,
    pub lending: Vec<(CqResourceLabels, f64)>,
    pub lq_pending: Vec<(LqStatusLabels, i64)>,
    pub lq_reserving: Vec<(LqLabels, i64)>,
    pub lq_admitted: Vec<(LqLabels, i64)>,
    pub lq_finished: Vec<(LqLabels, i64)>,
    pub lq_status: Vec<(LqActiveLabels, i64)>,
    pub lq_reservation: Vec<(LqResourceLabels, f64)>,
    pub lq_usage: Vec<(LqResourceLabels, f64)>,
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Kueue reports resources as floats in their base unit: CPU in cores, memory in bytes.
fn amount(resource: &str, v: i64) -> f64 {
    if resource == "cpu" { v as f64 / 1000.0 } else { v as f64 }
}

fn quantity(resource: &str, q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> f64 {
    // Stored objects passed validation; a quantity that does not parse reports 0 rather than failing
    // the step.
    crate::api::quantity::Quantity::parse(&q.0).map_or(0.0, |q| amount(resource, crate::api::quantity::resource_value(resource, &q)))
}

fn cq_resource(cq: &ClusterQueue, flavor: &str, resource: &str, role: Role) -> CqResourceLabels {
    CqResourceLabels {
        cohort: cq.spec.cohort_name.clone().unwrap_or_default(),
        cluster_queue: cq.name_any(),
        flavor: flavor.to_string(),
        resource: resource.to_string(),
        replica_role: role,
    }
}

fn core_usage(cq: &ClusterQueue, usage: &[crate::queue::FlavorUsage], role: Role) -> Vec<(CqResourceLabels, f64)> {
    usage.iter().flat_map(|f| f.resources.iter().map(move |r| (cq_resource(cq, &f.name, &r.name, role), amount(&r.name, r.total.0)))).collect()
}

fn lq_usage(lq: &LocalQueue, usage: &[LocalQueueFlavorUsage], role: Role) -> Vec<(LqResourceLabels, f64)> {
    usage
        .iter()
        .flat_map(|f| {
            f.resources.iter().map(move |r| {
                let l = LqResourceLabels { name: lq.name_any(), namespace: lq.namespace().unwrap_or_default(), flavor: f.name.clone(), resource: r.name.clone(), replica_role: role };
                (l, r.total.as_ref().map_or(0.0, |q| quantity(&r.name, q)))
            })
        })
        .collect()
}

fn counts(wls: &[&Workload]) -> (usize, usize, usize, usize) {
    let live = || wls.iter().filter(|w| !w.is_finished());
    let pending = live().filter(|w| w.spec.active() && !w.has_quota_reservation()).count();
    let reserving = live().filter(|w| w.has_quota_reservation()).count();
    let admitted = live().filter(|w| w.is_admitted()).count();
    let finished = wls.iter().filter(|w| w.is_finished()).count();
    (pending, reserving, admitted, finished)
}

pub fn gauges(snap: &Snapshot, core: &HashMap<String, CoreStatus>, active: &HashMap<String, bool>, role: Role) -> QueueGauges {
    let mut g = QueueGauges::default();
    let cq_labels = |name: &str| CqLabels { cluster_queue: name.to_string(), replica_role: role };
    let cq_status = |name: &str, status: &'static str| CqStatusLabels { cluster_queue: name.to_string(), status: Cow::Borrowed(status), replica_role: role };
    let mut finished_by_cq: HashMap<String, usize> = HashMap::new();
    for wl in snap.workloads.iter().filter(|w| w.is_finished()) {
        if let Some(a) = wl.admission() {
            *finished_by_cq.entry(a.cluster_queue.clone()).or_default() += 1;
        }
    }
    for cq in &snap.cluster_queues {
        let name = cq.name_any();
        let state = if cq.metadata.deletion_timestamp.is_some() {
            "terminating"
        } else if active.get(&name).copied().unwrap_or(false) {
            "active"
        } else {
            "pending"
        };
        for s in ["pending", "active", "terminating"] {
            g.status.push((cq_status(&name, s), i64::from(s == state)));
        }
        g.finished.push((cq_labels(&name), count(finished_by_cq.get(&name).copied().unwrap_or(0))));
        if let Some(c) = core.get(&name) {
            g.pending.push((cq_status(&name, "active"), count(c.active_pending_workloads)));
            g.pending.push((cq_status(&name, "inadmissible"), count(c.pending_workloads.saturating_sub(c.active_pending_workloads))));
            g.reserving.push((cq_labels(&name), count(c.reserving_workloads)));
            g.admitted.push((cq_labels(&name), count(c.admitted_workloads)));
            g.reservation.extend(core_usage(cq, &c.flavors_reservation, role));
            g.usage.extend(core_usage(cq, &c.flavors_usage, role));
        }
        for group in cq.spec.resource_groups.iter().flatten() {
            for flavor in &group.flavors {
                for r in &flavor.resources {
                    let l = cq_resource(cq, &flavor.name, &r.name, role);
                    g.nominal.push((l.clone(), quantity(&r.name, &r.nominal_quota)));
                    // Kueue reports an unset limit as +Inf (no limit).
                    g.borrowing.push((l.clone(), r.borrowing_limit.as_ref().map_or(f64::INFINITY, |q| quantity(&r.name, q))));
                    g.lending.push((l, r.lending_limit.as_ref().map_or(f64::INFINITY, |q| quantity(&r.name, q))));
                }
            }
        }
    }
    let mut by_lq: HashMap<(String, String), Vec<&Workload>> = HashMap::new();
    for wl in &snap.workloads {
        if let Some(k) = local_queue_key(wl) {
            by_lq.entry(k).or_default().push(wl);
        }
    }
    for lq in &snap.local_queues {
        let (ns, name) = (lq.namespace().unwrap_or_default(), lq.name_any());
        let l = LqLabels { name: name.clone(), namespace: ns.clone(), replica_role: role };
        let wls = by_lq.get(&(ns.clone(), name.clone())).map(Vec::as_slice).unwrap_or_default();
        let (pending, reserving, admitted, finished) = counts(wls);
        // The core parks inadmissible workloads per ClusterQueue, not per LocalQueue: a LocalQueue's
        // pending workloads are all reported as active.
        g.lq_pending.push((LqStatusLabels { name: name.clone(), namespace: ns.clone(), status: Cow::Borrowed("active"), replica_role: role }, count(pending)));
        g.lq_pending.push((LqStatusLabels { name: name.clone(), namespace: ns.clone(), status: Cow::Borrowed("inadmissible"), replica_role: role }, 0));
        g.lq_reserving.push((l.clone(), count(reserving)));
        g.lq_admitted.push((l.clone(), count(admitted)));
        g.lq_finished.push((l, count(finished)));
        let cond = lq.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == "Active")).map(|c| c.status.as_str());
        let state = match cond {
            Some("True") => "True",
            Some("False") => "False",
            _ => "Unknown",
        };
        for s in ["True", "False", "Unknown"] {
            g.lq_status.push((LqActiveLabels { name: name.clone(), namespace: ns.clone(), active: Cow::Borrowed(s), replica_role: role }, i64::from(s == state)));
        }
        if let Some(st) = &lq.status {
            g.lq_reservation.extend(lq_usage(lq, &st.flavors_reservation, role));
            g.lq_usage.extend(lq_usage(lq, &st.flavors_usage, role));
        }
    }
    g
}

/// Rewrites every queue gauge from `g`.
pub fn report(m: &Metrics, g: QueueGauges) {
    let int = |gauge: &prometheus_client::metrics::gauge::Gauge, v: i64| {
        gauge.set(v);
    };
    let float = |gauge: &prometheus_client::metrics::gauge::Gauge<f64, std::sync::atomic::AtomicU64>, v: f64| {
        gauge.set(v);
    };
    m.pending_workloads.replace(g.pending, int);
    m.finished_workloads.replace(g.finished, int);
    m.reserving_active_workloads.replace(g.reserving, int);
    m.admitted_active_workloads.replace(g.admitted, int);
    m.cluster_queue_status.replace(g.status, int);
    m.cluster_queue_resource_reservation.replace(g.reservation, float);
    m.cluster_queue_resource_usage.replace(g.usage, float);
    m.cluster_queue_nominal_quota.replace(g.nominal, float);
    m.cluster_queue_borrowing_limit.replace(g.borrowing, float);
    m.cluster_queue_lending_limit.replace(g.lending, float);
    m.local_queue_pending_workloads.replace(g.lq_pending, int);
    m.local_queue_reserving_active_workloads.replace(g.lq_reserving, int);
    m.local_queue_admitted_active_workloads.replace(g.lq_admitted, int);
    m.local_queue_finished_workloads.replace(g.lq_finished, int);
    m.local_queue_status.replace(g.lq_status, int);
    m.local_queue_resource_reservation.replace(g.lq_reservation, float);
    m.local_queue_resource_usage.replace(g.lq_usage, float);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Amount;
    use crate::queue::{FlavorUsage as CoreFlavor, ResourceUsage};
    use serde_json::json;
    use std::sync::Arc;

    // Kueue's metrics: a ClusterQueue reports its quota and usage per flavor and resource in base
    // units, exactly one status series is 1, and a deleted queue's series go away.
    #[test]
    fn gauges_follow_kueue_and_deleted_queues_disappear() {
        let cq: ClusterQueue = serde_json::from_value(json!({"metadata": {"name": "cq"}, "spec": {"cohortName": "co", "resourceGroups": [{"coveredResources": ["cpu", "memory"],
            "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "1500m", "borrowingLimit": "2"}, {"name": "memory", "nominalQuota": "1Gi"}]}]}]}})).unwrap();
        let snap = Snapshot { cluster_queues: vec![Arc::new(cq)], cohorts: vec![], flavors: vec![], local_queues: vec![], workloads: vec![], namespaces: Default::default() };
        let usage = vec![CoreFlavor { name: "f".into(), resources: vec![ResourceUsage { name: "cpu".into(), total: Amount(500), borrowed: Amount(0) }] }];
        let core = HashMap::from([("cq".to_string(), CoreStatus { flavors_reservation: usage.clone(), flavors_usage: usage, pending_workloads: 3, active_pending_workloads: 1, reserving_workloads: 2, admitted_workloads: 2, inactive: None })]);
        let g = gauges(&snap, &core, &HashMap::from([("cq".to_string(), true)]), Role::Leader);
        let m = Metrics::new();
        report(&m, g);
        let text = m.render();
        for want in [
            "kueue_cluster_queue_nominal_quota{cohort=\"co\",cluster_queue=\"cq\",flavor=\"f\",resource=\"cpu\",replica_role=\"leader\"} 1.5",
            "kueue_cluster_queue_nominal_quota{cohort=\"co\",cluster_queue=\"cq\",flavor=\"f\",resource=\"memory\",replica_role=\"leader\"} 1073741824.0",
            "kueue_cluster_queue_borrowing_limit{cohort=\"co\",cluster_queue=\"cq\",flavor=\"f\",resource=\"cpu\",replica_role=\"leader\"} 2.0",
            // Kueue's reportResourceMetrics: an unset limit is +Inf (the encoder writes `inf`).
            "kueue_cluster_queue_borrowing_limit{cohort=\"co\",cluster_queue=\"cq\",flavor=\"f\",resource=\"memory\",replica_role=\"leader\"} inf",
            "kueue_cluster_queue_lending_limit{cohort=\"co\",cluster_queue=\"cq\",flavor=\"f\",resource=\"cpu\",replica_role=\"leader\"} inf",
            "kueue_cluster_queue_resource_usage{cohort=\"co\",cluster_queue=\"cq\",flavor=\"f\",resource=\"cpu\",replica_role=\"leader\"} 0.5",
            "kueue_pending_workloads{cluster_queue=\"cq\",status=\"inadmissible\",replica_role=\"leader\"} 2",
            "kueue_cluster_queue_status{cluster_queue=\"cq\",status=\"active\",replica_role=\"leader\"} 1",
            "kueue_cluster_queue_status{cluster_queue=\"cq\",status=\"pending\",replica_role=\"leader\"} 0",
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
        let empty = Snapshot { cluster_queues: vec![], ..snap };
        report(&m, gauges(&empty, &HashMap::new(), &HashMap::new(), Role::Leader));
        assert!(!m.render().contains("cluster_queue=\"cq\""), "{}", m.render());
    }
}
