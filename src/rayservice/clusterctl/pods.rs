//! Which pods a RayCluster should create or delete this pass (KubeRay's `reconcilePods`), as a pure
//! function of the cluster's lifecycle flags and the pods that exist.

use std::collections::{BTreeMap, BTreeSet};

use crate::rayservice::cluster::podsets::HEAD_PODSET;

/// A pod of this cluster as the decisions see it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PodView {
    pub name: String,
    pub head: bool,
    /// `ray.io/group` (`headgroup` for the head).
    pub group: String,
    pub running: bool,
    pub ready: bool,
    /// Failed or Succeeded, or the Ray container terminated with restartPolicy Never: replace it.
    pub unhealthy: bool,
    pub deleting: bool,
    /// `ray.io/worker-group-replica-index`.
    pub replica_index: Option<usize>,
    /// `ray.io/worker-group-replica-name` (multi-host groups).
    pub replica_name: Option<String>,
    pub ip: Option<String>,
}

/// One worker group: desired replicas already clamped to [min, max] (0 when the group is suspended).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GroupView {
    pub name: String,
    pub replicas: usize,
    /// `numOfHosts`: pods per replica.
    pub hosts: usize,
    pub workers_to_delete: Vec<String>,
}

impl GroupView {
    /// The worker groups of a RayCluster as the pod planner sees them.
    pub fn of(rc: &crate::api::ray::RayCluster) -> Vec<GroupView> {
        rc.spec
            .worker_groups()
            .iter()
            .map(|g| GroupView {
                name: g.group_name.clone(),
                replicas: usize::try_from(crate::rayservice::cluster::replicas::desired_replicas(g))
                    .unwrap_or(0),
                hosts: usize::try_from(g.num_of_hosts_or_default()).unwrap_or(1),
                workers_to_delete: g.workers_to_delete().to_vec(),
            })
            .collect()
    }
}

/// Where a new worker pod sits: KubeRay stamps these as labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewWorker {
    pub replica_index: usize,
    pub host_index: usize,
    /// Which new replica of this action the pod belongs to: pods with the same ordinal share one
    /// replica name (multi-host); the shell picks the random name.
    pub replica_ordinal: usize,
}

/// The Recreate strategy's verdict (the cluster module's `recreate_decision`, over the head pod's stamp).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Recreate {
    #[default]
    Keep,
    /// Head stamped by another operator version: re-stamp, keep the pods.
    Restamp,
    /// The spec changed under `upgradeStrategy: Recreate`: all pods go.
    All,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodAction {
    /// Delete every pod of the cluster (suspend, gate, Recreate).
    DeleteAll {
        reason: &'static str,
    },
    CreateHead,
    /// Head stamped by another operator version: re-stamp hash and version, do not recreate.
    RestampHead {
        name: String,
    },
    DeletePod {
        name: String,
        reason: &'static str,
    },
    CreateWorkers {
        group: String,
        workers: Vec<NewWorker>,
    },
}

/// Pod-level inputs of one pass.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PodInputs {
    /// Closed admission gate: no pod may exist.
    pub gated: bool,
    pub recreate: Recreate,
    /// With the autoscaler on, only it removes surplus workers (KubeRay).
    pub autoscaling: bool,
    pub groups: Vec<GroupView>,
    pub pods: Vec<PodView>,
    /// Quota-gated child of a queue-managed RayService: pods per group (`head` for the head) the latest
    /// admitted workload slice covers. Creation never goes past it; `None` means not quota-gated.
    pub quota: Option<BTreeMap<String, i64>>,
    /// The head crash-loops and its back-off has not run out (`head_backoff`): no new head yet.
    pub head_backoff: bool,
}

/// Worker pods created in one pass at most, as the ReplicaSet controller's burst (500): a group asking
/// for millions of replicas gets them batch by batch, each batch bounded in memory and API calls.
pub const MAX_PODS_PER_PASS: usize = 500;

/// Plans pod writes for a cluster that is neither suspending nor suspended.
pub fn plan_pods(i: &PodInputs) -> Vec<PodAction> {
    let live: Vec<&PodView> = i.pods.iter().filter(|p| !p.deleting).collect();
    let allowed = |group: &str| i.quota.as_ref().map(|q| q.get(group).copied().unwrap_or(0));
    // Nothing covered at all (never admitted, or evicted): the gate is closed.
    let closed = i.quota.as_ref().is_some_and(|q| q.values().all(|n| *n <= 0));
    if i.gated || closed {
        return if live.is_empty() {
            vec![]
        } else {
            vec![PodAction::DeleteAll {
                reason: "the admission gate is closed",
            }]
        };
    }
    let mut out = Vec::new();
    let heads: Vec<&PodView> = live.iter().copied().filter(|p| p.head).collect();
    match (i.recreate, heads.first()) {
        (Recreate::All, _) => {
            return vec![PodAction::DeleteAll {
                reason: "the spec changed and upgradeStrategy is Recreate",
            }];
        }
        (Recreate::Restamp, Some(h)) => out.push(PodAction::RestampHead { name: h.name.clone() }),
        _ => {}
    }
    let head_terminating = i.pods.iter().any(|p| p.head && p.deleting);
    let head_covered = allowed(HEAD_PODSET).is_none_or(|n| n >= 1);
    match heads.as_slice() {
        [] if !head_terminating && head_covered && !i.head_backoff => out.push(PodAction::CreateHead),
        [] => {}
        [h] if h.unhealthy => out.push(PodAction::DeletePod {
            name: h.name.clone(),
            reason: "the head pod failed",
        }),
        [_] => {}
        // More than one head: keep the oldest by name order, which is stable; remove the others.
        [_, rest @ ..] => {
            for h in rest {
                out.push(PodAction::DeletePod {
                    name: h.name.clone(),
                    reason: "more than one head pod",
                });
            }
        }
    }
    for g in &i.groups {
        let pods: Vec<&PodView> = live
            .iter()
            .copied()
            .filter(|p| !p.head && p.group == g.name)
            .collect();
        match allowed(&g.name.to_lowercase()) {
            // Creation stops at what the admitted slice covers; running pods are never taken away
            // here (a slice only shrinks once they are gone).
            Some(pods_allowed) => {
                // A terminating pod holds its share of the reservation until it is gone: its
                // replacement waits for it (DESIGN I2), where KubeRay alone would create it at once.
                let terminating = i
                    .pods
                    .iter()
                    .filter(|p| p.deleting && !p.head && p.group == g.name)
                    .count();
                let terminating = i64::try_from(terminating).unwrap_or(i64::MAX);
                let free = pods_allowed.saturating_sub(terminating).max(0);
                let limit = usize::try_from(free).unwrap_or(0) / g.hosts.max(1);
                let capped = GroupView {
                    replicas: g.replicas.min(limit.max(replica_count(g, &pods))),
                    ..g.clone()
                };
                plan_group(&capped, &pods, i.autoscaling, &mut out);
            }
            None => plan_group(g, &pods, i.autoscaling, &mut out),
        }
    }
    // Pods of groups that no longer exist in the spec.
    let known: BTreeSet<&str> = i.groups.iter().map(|g| g.name.as_str()).collect();
    for p in live
        .iter()
        .filter(|p| !p.head && !known.contains(p.group.as_str()))
    {
        out.push(PodAction::DeletePod {
            name: p.name.clone(),
            reason: "its worker group was removed",
        });
    }
    out
}

/// Replicas a group has now (multi-host replicas counted once).
fn replica_count(g: &GroupView, pods: &[&PodView]) -> usize {
    if g.hosts > 1 {
        pods.iter()
            .map(|p| p.replica_name.clone().unwrap_or_else(|| p.name.clone()))
            .collect::<BTreeSet<_>>()
            .len()
    } else {
        pods.len()
    }
}

fn plan_group(g: &GroupView, pods: &[&PodView], autoscaling: bool, out: &mut Vec<PodAction>) {
    let hosts = g.hosts.max(1);
    // Group pods into replicas: by replica name for multi-host groups, one pod per replica otherwise.
    let mut replicas: BTreeMap<String, Vec<&PodView>> = BTreeMap::new();
    for p in pods {
        let key = if hosts > 1 {
            p.replica_name.clone().unwrap_or_else(|| p.name.clone())
        } else {
            p.name.clone()
        };
        replicas.entry(key).or_default().push(p);
    }
    // 1. Unhealthy replicas go first; KubeRay creates nothing in such a pass (the next one refills).
    let mut broken = false;
    for members in replicas.values() {
        let incomplete = hosts > 1 && members.len() < hosts;
        if members.iter().any(|p| p.unhealthy) || incomplete {
            broken = true;
            for p in members {
                out.push(PodAction::DeletePod {
                    name: p.name.clone(),
                    reason: "unhealthy worker replica",
                });
            }
        }
    }
    if broken {
        return;
    }
    // 2. workersToDelete (the autoscaler's or the user's choice), whole replicas for multi-host.
    let mut removed: BTreeSet<String> = BTreeSet::new();
    for (key, members) in &replicas {
        if members.iter().any(|p| g.workers_to_delete.contains(&p.name)) {
            removed.insert(key.clone());
            for p in members {
                out.push(PodAction::DeletePod {
                    name: p.name.clone(),
                    reason: "listed in workersToDelete",
                });
            }
        }
    }
    let remaining: Vec<(&String, &Vec<&PodView>)> =
        replicas.iter().filter(|(k, _)| !removed.contains(*k)).collect();
    // 3. Scale to the desired count.
    if remaining.len() < g.replicas {
        let used: BTreeSet<usize> = remaining
            .iter()
            .flat_map(|(_, m)| m.iter().filter_map(|p| p.replica_index))
            .collect();
        let free = (0..).filter(|i| !used.contains(i));
        // In bounded batches, never in proportion to a number the user wrote: the next pass (the
        // created pods' events trigger it) creates the next batch.
        let batch = (MAX_PODS_PER_PASS / hosts).max(1);
        let mut workers = Vec::new();
        for (ordinal, replica_index) in free.take((g.replicas - remaining.len()).min(batch)).enumerate() {
            for host_index in 0..hosts {
                workers.push(NewWorker {
                    replica_index,
                    host_index,
                    replica_ordinal: ordinal,
                });
            }
        }
        out.push(PodAction::CreateWorkers {
            group: g.name.clone(),
            workers,
        });
    } else if remaining.len() > g.replicas && !autoscaling {
        // Surplus: remove not-ready replicas first, then the highest names (deterministic stand-in for
        // KubeRay's random pick).
        let mut order: Vec<&(&String, &Vec<&PodView>)> = remaining.iter().collect();
        order.sort_by_key(|(k, m)| (m.iter().all(|p| p.ready), std::cmp::Reverse((*k).clone())));
        for (_, members) in order.into_iter().take(remaining.len() - g.replicas) {
            for p in members.iter() {
                out.push(PodAction::DeletePod {
                    name: p.name.clone(),
                    reason: "more replicas than desired",
                });
            }
        }
    }
}
