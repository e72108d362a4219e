//! Admissions and finishes counted once each: Kueue's `cohort_subtree_admitted_workloads_total`,
//! `finished_workloads_total` and `execution_time_seconds` (and their LocalQueue twins). Every step
//! reads the transitions the snapshot shows ([`transitions`], pure); [`count_transitions`] counts the
//! ones not counted before.

use kube::ResourceExt;

use super::metric_labels::priority_class;
use super::queue_status::local_queue_key;
use super::sync::Snapshot;
use crate::admission::metrics::{CohortPriorityLabels, CqPriorityLabels, LqPriorityLabels, Metrics};
use crate::api::kueue::constants::condition;
use crate::queue::tree::QuotaTree;

/// An admission or a finish, keyed so that it is counted once: by UID and, for an admission, the
/// time of its `Admitted` condition (a re-admission after an eviction counts again).
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub key: String,
    pub at: jiff::Timestamp,
    pub what: Counted,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Counted {
    /// Kueue's `cohort_subtree_admitted_workloads_total`: once for each cohort above the workload's
    /// ClusterQueue.
    Admitted {
        cohorts: Vec<String>,
        priority_class: String,
    },
    /// Kueue's `finished_workloads_total` and `execution_time_seconds` (Admitted to Finished, plus
    /// time run before earlier evictions), per ClusterQueue and LocalQueue.
    Finished {
        cluster_queue: String,
        local_queue: Option<(String, String)>,
        priority_class: String,
        execution_seconds: Option<f64>,
    },
}

/// The cohorts above a node, nearest first.
fn cohorts_above(tree: &QuotaTree, i: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = tree.nodes[i].parent;
    while let Some(p) = cur {
        out.push(tree.nodes[p].name.clone());
        cur = tree.nodes[p].parent;
    }
    out
}

/// Admissions and finishes in the snapshot (see [`Transition`]).
pub(super) fn transitions(snap: &Snapshot, tree: &QuotaTree) -> Vec<Transition> {
    let mut out = Vec::new();
    for wl in &snap.workloads {
        let Some(status) = wl.status.as_ref() else {
            continue;
        };
        let Some(cq) = wl.admission().map(|a| a.cluster_queue.clone()) else {
            continue;
        };
        let uid = wl
            .metadata
            .uid
            .clone()
            .unwrap_or_else(|| format!("{}/{}", wl.namespace().unwrap_or_default(), wl.name_any()));
        let admitted = status
            .condition(condition::ADMITTED)
            .filter(|c| c.status == "True");
        let finished = status
            .condition(condition::FINISHED)
            .filter(|c| c.status == "True");
        if let Some(a) = admitted {
            let cohorts = tree.cq(&cq).map(|i| cohorts_above(tree, i)).unwrap_or_default();
            let at = a.last_transition_time.0;
            out.push(Transition {
                key: format!("admitted/{uid}/{}", at.as_second()),
                at,
                what: Counted::Admitted {
                    cohorts,
                    priority_class: priority_class(wl),
                },
            });
        }
        if let Some(f) = finished {
            let past = f64::from(status.accumulated_past_execution_time_seconds.unwrap_or(0));
            let execution_seconds = admitted.map(|a| {
                past + f
                    .last_transition_time
                    .0
                    .duration_since(a.last_transition_time.0)
                    .as_secs_f64()
            });
            out.push(Transition {
                key: format!("finished/{uid}"),
                at: f.last_transition_time.0,
                what: Counted::Finished {
                    cluster_queue: cq,
                    local_queue: local_queue_key(wl),
                    priority_class: priority_class(wl),
                    execution_seconds,
                },
            });
        }
    }
    out
}

/// Counts each transition once: not counted before, and not before this process started counting.
/// Keeps only the keys still in the snapshot, so the set stays as large as the workloads.
pub(super) fn count_transitions(m: &Metrics, transitions: Vec<Transition>) {
    let mut counted = m.counted.lock().unwrap_or_else(|p| p.into_inner());
    let mut now = std::collections::HashSet::with_capacity(transitions.len());
    let role = m.role();
    for t in transitions {
        let fresh = !counted.contains(&t.key) && t.at >= m.counting_since;
        now.insert(t.key);
        if !fresh {
            continue;
        }
        match t.what {
            Counted::Admitted {
                cohorts,
                priority_class,
            } => {
                for cohort in cohorts {
                    m.cohort_subtree_admitted_workloads_total
                        .get_or_create(&CohortPriorityLabels {
                            cohort,
                            priority_class: priority_class.clone(),
                            replica_role: role,
                        })
                        .inc();
                }
            }
            Counted::Finished {
                cluster_queue,
                local_queue,
                priority_class,
                execution_seconds,
            } => {
                let cq = CqPriorityLabels {
                    cluster_queue,
                    priority_class: priority_class.clone(),
                    replica_role: role,
                };
                m.finished_workloads_total.get_or_create(&cq).inc();
                let lq = local_queue.map(|(namespace, name)| LqPriorityLabels {
                    name,
                    namespace,
                    priority_class,
                    replica_role: role,
                });
                if let Some(l) = &lq {
                    m.local_queue_finished_workloads_total.get_or_create(l).inc();
                }
                if let Some(secs) = execution_seconds {
                    m.execution_time_seconds.get_or_create(&cq).observe(secs.max(0.0));
                    if let Some(l) = &lq {
                        m.local_queue_execution_time_seconds
                            .get_or_create(l)
                            .observe(secs.max(0.0));
                    }
                }
            }
        }
    }
    *counted = now;
}
