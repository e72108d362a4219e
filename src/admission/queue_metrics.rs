//! Kueue's queue gauges (pending, active, status, and the optional resource gauges a Kueue dashboard
//! reads; the cohort tree's info and subtree gauges) computed from one admission step: the snapshot,
//! the core's per-ClusterQueue status and quota tree, and which ClusterQueues are active. Pure;
//! `report` then rewrites every gauge family at once, so a deleted queue's series disappear as Kueue
//! clears them. Admissions and finishes seen in the snapshot are counted there too, each once
//! (`transition_metrics`).

use std::borrow::Cow;
use std::collections::HashMap;

use kube::ResourceExt;

use super::queue_status::local_queue_key;
use super::sync::{AdmissionState, Snapshot};
pub(crate) use super::transition_metrics::Transition;
use super::transition_metrics::{count_transitions, transitions};
use crate::admission::metrics::{
    CohortInfoLabels, CohortLabels, CohortResourceLabels, CqCohortLabels, CqInfoLabels, CqLabels,
    CqPendingResourceLabels, CqResourceLabels, CqResultLabels, CqStatusLabels, LqActiveLabels, LqLabels,
    LqResourceLabels, LqStatusLabels, Metrics, Role,
};
use crate::api::kueue::{ClusterQueue, LocalQueue, LocalQueueFlavorUsage, Workload};
use crate::queue::ClusterQueueStatus as CoreStatus;
use crate::queue::tree::{NodeKind, QuotaTree};

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
    pub preemption_skips: Vec<(CqLabels, i64)>,
    /// Recomputations since the last report, to add to the counter.
    pub recomputations: Vec<(CqResultLabels, u64)>,
    pub resource_pending: Vec<(CqPendingResourceLabels, f64)>,
    pub cq_info: Vec<(CqInfoLabels, i64)>,
    pub cohort_info: Vec<(CohortInfoLabels, i64)>,
    pub cohort_quota: Vec<(CohortResourceLabels, f64)>,
    pub cohort_reservations: Vec<(CohortResourceLabels, f64)>,
    pub cohort_admitted_active: Vec<(CohortLabels, i64)>,
    pub cq_weighted_share: Vec<(CqCohortLabels, f64)>,
    pub cohort_weighted_share: Vec<(CohortLabels, f64)>,
    /// Every admission and finish the snapshot shows; `report` counts the ones not counted before.
    pub transitions: Vec<Transition>,
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Kueue reports resources as floats in their base unit: CPU in cores, memory in bytes.
fn amount(resource: &str, v: i64) -> f64 {
    if resource == "cpu" {
        v as f64 / 1000.0
    } else {
        v as f64
    }
}

fn quantity(resource: &str, q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> f64 {
    // Stored objects passed validation; a quantity that does not parse reports 0 rather than failing
    // the step.
    crate::api::quantity::Quantity::parse(&q.0).map_or(0.0, |q| {
        amount(resource, crate::api::quantity::resource_value(resource, &q))
    })
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

fn core_usage(
    cq: &ClusterQueue,
    usage: &[crate::queue::FlavorUsage],
    role: Role,
) -> Vec<(CqResourceLabels, f64)> {
    usage
        .iter()
        .flat_map(|f| {
            f.resources.iter().map(move |r| {
                (
                    cq_resource(cq, &f.name, &r.name, role),
                    amount(&r.name, r.total.0),
                )
            })
        })
        .collect()
}

fn lq_usage(lq: &LocalQueue, usage: &[LocalQueueFlavorUsage], role: Role) -> Vec<(LqResourceLabels, f64)> {
    usage
        .iter()
        .flat_map(|f| {
            f.resources.iter().map(move |r| {
                let l = LqResourceLabels {
                    name: lq.name_any(),
                    namespace: lq.namespace().unwrap_or_default(),
                    flavor: f.name.clone(),
                    resource: r.name.clone(),
                    replica_role: role,
                };
                (l, r.total.as_ref().map_or(0.0, |q| quantity(&r.name, q)))
            })
        })
        .collect()
}

fn counts(wls: &[&Workload]) -> (usize, usize, usize, usize) {
    let live = || wls.iter().filter(|w| !w.is_finished());
    let pending = live()
        .filter(|w| w.spec.active() && !w.has_quota_reservation())
        .count();
    let reserving = live().filter(|w| w.has_quota_reservation()).count();
    let admitted = live().filter(|w| w.is_admitted()).count();
    let finished = wls.iter().filter(|w| w.is_finished()).count();
    (pending, reserving, admitted, finished)
}

/// Kueue's pending resource requests per ClusterQueue: every covered resource (0 when nothing
/// waits) plus the requests of its pending workloads, before any flavor is chosen.
fn resource_pending(snap: &Snapshot, role: Role) -> Vec<(CqPendingResourceLabels, f64)> {
    let lq_cq: HashMap<(String, String), String> = snap
        .local_queues
        .iter()
        .map(|l| {
            (
                (l.namespace().unwrap_or_default(), l.name_any()),
                l.spec.cluster_queue().to_string(),
            )
        })
        .collect();
    let mut pending: HashMap<String, std::collections::BTreeMap<String, i64>> = HashMap::new();
    for cq in &snap.cluster_queues {
        let e = pending.entry(cq.name_any()).or_default();
        for r in cq
            .spec
            .resource_groups
            .iter()
            .flatten()
            .flat_map(|g| &g.covered_resources)
        {
            e.entry(r.clone()).or_default();
        }
    }
    for wl in snap
        .workloads
        .iter()
        .filter(|w| !w.is_finished() && w.spec.active() && !w.has_quota_reservation())
    {
        let Some(cq) = local_queue_key(wl).and_then(|k| lq_cq.get(&k)) else {
            continue;
        };
        let Some(totals) = pending.get_mut(cq) else {
            continue;
        };
        // A workload whose requests do not parse is refused by the admission loop; it adds nothing.
        let Ok(model) = crate::queue::convert::workload_model(wl, cq, Default::default()) else {
            continue;
        };
        for ps in &model.podsets {
            for r in ps.requests.keys() {
                *totals.entry(r.clone()).or_default() += ps.total(r).0;
            }
        }
    }
    let mut out: Vec<(CqPendingResourceLabels, f64)> = pending
        .into_iter()
        .flat_map(|(cq, rs)| {
            rs.into_iter().map(move |(r, v)| {
                (
                    CqPendingResourceLabels {
                        cluster_queue: cq.clone(),
                        resource: r.clone(),
                        replica_role: role,
                    },
                    amount(&r, v),
                )
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.0.cluster_queue, &a.0.resource).cmp(&(&b.0.cluster_queue, &b.0.resource)));
    out
}

/// Kueue's cohort gauges: each ClusterQueue's and cohort's place in the tree, and per cohort its
/// subtree quota, the reservations of every ClusterQueue under it and their admitted workloads.
/// Zero subtree amounts are left out, as Kueue clears them; a cohort in a cycle reports nothing.
fn cohort_gauges(g: &mut QueueGauges, tree: &QuotaTree, core: &HashMap<String, CoreStatus>, role: Role) {
    let name = |i: usize| tree.nodes[i].name.clone();
    for (i, n) in tree.nodes.iter().enumerate() {
        let parent = n.parent.map(name).unwrap_or_default();
        let root = n.parent.map(|p| name(tree.root(p))).unwrap_or_default();
        match n.kind {
            NodeKind::ClusterQueue => g.cq_info.push((
                CqInfoLabels {
                    cluster_queue: n.name.clone(),
                    parent_cohort: parent,
                    root_cohort: root,
                    replica_role: role,
                },
                1,
            )),
            NodeKind::Cohort if n.disabled.is_none() => {
                let root = name(tree.root(i));
                g.cohort_info.push((
                    CohortInfoLabels {
                        cohort: n.name.clone(),
                        parent_cohort: parent,
                        root_cohort: root,
                        replica_role: role,
                    },
                    1,
                ));
                let label = |fr: &crate::queue::amount::FlavorResource| CohortResourceLabels {
                    cohort: n.name.clone(),
                    flavor: fr.flavor.clone(),
                    resource: fr.resource.clone(),
                    replica_role: role,
                };
                for (fr, q) in &n.subtree {
                    if q.0 > 0 {
                        g.cohort_quota.push((label(fr), amount(&fr.resource, q.0)));
                    }
                }
                let cqs = tree.cqs_under(i);
                let mut reserved: std::collections::BTreeMap<&crate::queue::amount::FlavorResource, i64> =
                    Default::default();
                for &c in &cqs {
                    for (fr, v) in &tree.nodes[c].usage {
                        *reserved.entry(fr).or_default() += v.0;
                    }
                }
                for (fr, v) in reserved {
                    if v > 0 {
                        g.cohort_reservations.push((label(fr), amount(&fr.resource, v)));
                    }
                }
                let admitted: usize = cqs
                    .iter()
                    .filter_map(|&c| core.get(&tree.nodes[c].name))
                    .map(|s| s.admitted_workloads)
                    .sum();
                g.cohort_admitted_active.push((
                    CohortLabels {
                        cohort: n.name.clone(),
                        replica_role: role,
                    },
                    count(admitted),
                ));
            }
            NodeKind::Cohort => {}
        }
    }
}

/// Kueue's weighted-share gauges, reported only with fair sharing on; an infinite share shows as
/// NaN, as Kueue reports it.
fn weighted_shares(g: &mut QueueGauges, state: &AdmissionState, role: Role) {
    let tree = state.core.tree();
    let value = |v: f64| if v.is_infinite() { f64::NAN } else { v };
    for n in &tree.nodes {
        match n.kind {
            NodeKind::ClusterQueue => {
                if let Some(v) = state.core.cluster_queue_share(&n.name) {
                    let cohort = n.parent.map(|p| tree.nodes[p].name.clone()).unwrap_or_default();
                    g.cq_weighted_share.push((
                        CqCohortLabels {
                            cluster_queue: n.name.clone(),
                            cohort,
                            replica_role: role,
                        },
                        value(v),
                    ));
                }
            }
            NodeKind::Cohort => {
                if let Some(v) = state.core.cohort_share(&n.name) {
                    g.cohort_weighted_share.push((
                        CohortLabels {
                            cohort: n.name.clone(),
                            replica_role: role,
                        },
                        value(v),
                    ));
                }
            }
        }
    }
}

pub fn gauges(
    snap: &Snapshot,
    core: &HashMap<String, CoreStatus>,
    active: &HashMap<String, bool>,
    state: &AdmissionState,
    role: Role,
) -> QueueGauges {
    let mut g = QueueGauges::default();
    let tree = state.core.tree();
    g.preemption_skips = snap
        .cluster_queues
        .iter()
        .filter_map(|cq| {
            state.preemption_skips.get(&cq.name_any()).map(|n| {
                (
                    CqLabels {
                        cluster_queue: cq.name_any(),
                        replica_role: role,
                    },
                    count(*n),
                )
            })
        })
        .collect();
    g.recomputations = std::mem::take(
        &mut *state
            .preemption_target_recomputations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
    .into_iter()
    .map(|((cq, result), n)| {
        let labels = CqResultLabels {
            cluster_queue: cq,
            result: result.as_str().into(),
            replica_role: role,
        };
        (labels, n)
    })
    .collect();
    g.resource_pending = resource_pending(snap, role);
    g.transitions = transitions(snap, tree);
    cohort_gauges(&mut g, tree, core, role);
    weighted_shares(&mut g, state, role);
    let cq_labels = |name: &str| CqLabels {
        cluster_queue: name.to_string(),
        replica_role: role,
    };
    let cq_status = |name: &str, status: &'static str| CqStatusLabels {
        cluster_queue: name.to_string(),
        status: Cow::Borrowed(status),
        replica_role: role,
    };
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
        g.finished.push((
            cq_labels(&name),
            count(finished_by_cq.get(&name).copied().unwrap_or(0)),
        ));
        if let Some(c) = core.get(&name) {
            // Kueue's reportCQPendingWorkloads: an inactive ClusterQueue admits nothing, so all its
            // pending workloads are inadmissible.
            let is_active = active.get(&name).copied().unwrap_or(false);
            let queued = if is_active { c.active_pending_workloads } else { 0 };
            g.pending.push((cq_status(&name, "active"), count(queued)));
            g.pending.push((
                cq_status(&name, "inadmissible"),
                count(c.pending_workloads.saturating_sub(queued)),
            ));
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
                    g.borrowing.push((
                        l.clone(),
                        r.borrowing_limit
                            .as_ref()
                            .map_or(f64::INFINITY, |q| quantity(&r.name, q)),
                    ));
                    g.lending.push((
                        l,
                        r.lending_limit
                            .as_ref()
                            .map_or(f64::INFINITY, |q| quantity(&r.name, q)),
                    ));
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
        let l = LqLabels {
            name: name.clone(),
            namespace: ns.clone(),
            replica_role: role,
        };
        let wls = by_lq
            .get(&(ns.clone(), name.clone()))
            .map(Vec::as_slice)
            .unwrap_or_default();
        let (pending, reserving, admitted, finished) = counts(wls);
        // The core parks inadmissible workloads per ClusterQueue, not per LocalQueue: a LocalQueue's
        // pending workloads are all reported as active, unless its ClusterQueue is inactive (then
        // all inadmissible, as Kueue's reportLQPendingWorkloads).
        let cq_active = active.get(lq.spec.cluster_queue()).copied().unwrap_or(false);
        let (queued, parked) = if cq_active { (pending, 0) } else { (0, pending) };
        g.lq_pending.push((
            LqStatusLabels {
                name: name.clone(),
                namespace: ns.clone(),
                status: Cow::Borrowed("active"),
                replica_role: role,
            },
            count(queued),
        ));
        g.lq_pending.push((
            LqStatusLabels {
                name: name.clone(),
                namespace: ns.clone(),
                status: Cow::Borrowed("inadmissible"),
                replica_role: role,
            },
            count(parked),
        ));
        g.lq_reserving.push((l.clone(), count(reserving)));
        g.lq_admitted.push((l.clone(), count(admitted)));
        g.lq_finished.push((l, count(finished)));
        let cond = lq
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Active"))
            .map(|c| c.status.as_str());
        let state = match cond {
            Some("True") => "True",
            Some("False") => "False",
            _ => "Unknown",
        };
        for s in ["True", "False", "Unknown"] {
            g.lq_status.push((
                LqActiveLabels {
                    name: name.clone(),
                    namespace: ns.clone(),
                    active: Cow::Borrowed(s),
                    replica_role: role,
                },
                i64::from(s == state),
            ));
        }
        if let Some(st) = &lq.status {
            g.lq_reservation
                .extend(lq_usage(lq, &st.flavors_reservation, role));
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
    let float = |gauge: &prometheus_client::metrics::gauge::Gauge<f64, std::sync::atomic::AtomicU64>,
                 v: f64| {
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
    m.local_queue_reserving_active_workloads
        .replace(g.lq_reserving, int);
    m.local_queue_admitted_active_workloads
        .replace(g.lq_admitted, int);
    m.local_queue_finished_workloads.replace(g.lq_finished, int);
    m.local_queue_status.replace(g.lq_status, int);
    m.local_queue_resource_reservation
        .replace(g.lq_reservation, float);
    m.local_queue_resource_usage.replace(g.lq_usage, float);
    m.admission_cycle_preemption_skips
        .replace(g.preemption_skips, int);
    for (labels, n) in g.recomputations {
        m.preemption_target_recomputations_total
            .get_or_create(&labels)
            .inc_by(n);
    }
    m.cluster_queue_resource_pending
        .replace(g.resource_pending, float);
    m.cluster_queue_info.replace(g.cq_info, int);
    m.cohort_info.replace(g.cohort_info, int);
    m.cohort_subtree_quota.replace(g.cohort_quota, float);
    m.cohort_subtree_resource_reservations
        .replace(g.cohort_reservations, float);
    m.cohort_subtree_admitted_active_workloads
        .replace(g.cohort_admitted_active, int);
    m.cluster_queue_weighted_share.replace(g.cq_weighted_share, float);
    m.cohort_weighted_share.replace(g.cohort_weighted_share, float);
    count_transitions(m, g.transitions);
}

#[cfg(test)]
#[path = "queue_metrics_tests.rs"]
mod tests;
