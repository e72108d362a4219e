//! Usage and counts per ClusterQueue and Cohort, in the shape of their Kueue status fields.

use super::amount::{Amount, FlavorResource};
use super::fair_sharing::drs;
use super::scheduler::AdmissionCore;
use super::tree::NodeKind;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceUsage {
    pub name: String,
    pub total: Amount,
    /// Usage above the node's own (subtree) quota, drawn from its cohort.
    pub borrowed: Amount,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlavorUsage {
    pub name: String,
    pub resources: Vec<ResourceUsage>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterQueueStatus {
    /// `status.flavorsReservation`; equal to `flavors_usage` since this core has no admission checks.
    pub flavors_reservation: Vec<FlavorUsage>,
    pub flavors_usage: Vec<FlavorUsage>,
    pub pending_workloads: usize,
    /// Of `pending_workloads`, those in the active queue (the rest are parked as inadmissible
    /// until an event can change their outcome).
    pub active_pending_workloads: usize,
    pub reserving_workloads: usize,
    pub admitted_workloads: usize,
    /// Why the ClusterQueue is not active (`Active=False` message), if it is not.
    pub inactive: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CohortStatus {
    pub usage: Vec<FlavorUsage>,
    /// Subtree quota per flavor and resource (`total` = quota, `borrowed` = borrowed from the parent).
    pub quota: Vec<FlavorUsage>,
    pub disabled: Option<String>,
}

impl AdmissionCore {
    fn flavor_usage(&self, idx: usize) -> Vec<FlavorUsage> {
        let node = &self.tree.nodes[idx];
        let mut out: Vec<FlavorUsage> = Vec::new();
        // Spec order, as Kueue's cache lists them: resource groups, their flavors, the covered
        // resources; then anything still in use that the spec no longer names.
        let spec: Vec<FlavorResource> = self
            .cqs
            .get(&node.name)
            .filter(|_| node.kind == NodeKind::ClusterQueue)
            .into_iter()
            .flat_map(|cq| &cq.resource_groups)
            .flat_map(|g| {
                g.flavors.iter().flat_map(|f| {
                    g.covered_resources
                        .iter()
                        .map(|r| FlavorResource::new(&f.name, r.as_str()))
                })
            })
            .collect();
        let frs = spec.iter().chain(node.quotas.keys()).chain(node.usage.keys());
        for fr in frs {
            let total = self.tree.usage(idx, fr);
            let borrowed = (total - self.tree.subtree_quota(idx, fr)).clamp_zero();
            let entry = match out.iter_mut().position(|f| f.name == fr.flavor) {
                Some(p) => &mut out[p],
                None => {
                    out.push(FlavorUsage {
                        name: fr.flavor.clone(),
                        resources: Vec::new(),
                    });
                    let last = out.len() - 1;
                    &mut out[last]
                }
            };
            if !entry.resources.iter().any(|r| r.name == fr.resource) {
                entry.resources.push(ResourceUsage {
                    name: fr.resource.clone(),
                    total,
                    borrowed,
                });
            }
        }
        out
    }

    pub fn cluster_queue_status(&self, name: &str) -> Option<ClusterQueueStatus> {
        let idx = self.tree.cq(name)?;
        let usage = self.flavor_usage(idx);
        let admitted = self.admitted_by_cq.get(name).map_or(0, |s| s.len());
        Some(ClusterQueueStatus {
            flavors_reservation: usage.clone(),
            flavors_usage: usage,
            pending_workloads: self.queues.get(name).map_or(0, |q| q.len()),
            active_pending_workloads: self.queues.get(name).map_or(0, |q| q.active_len()),
            reserving_workloads: admitted,
            admitted_workloads: admitted,
            // The detail a workload's message leaves out (a cohort cycle) goes on the
            // ClusterQueue's Active condition.
            inactive: self.tree.disabled_reason(idx).map(str::to_string),
        })
    }

    pub fn cohort_status(&self, name: &str) -> Option<CohortStatus> {
        let idx = self.tree.cohort(name)?;
        let node = &self.tree.nodes[idx];
        if node.kind != NodeKind::Cohort {
            return None;
        }
        let mut quota: Vec<FlavorUsage> = Vec::new();
        for (fr, q) in &node.subtree {
            let borrowed = (self.tree.usage(idx, fr) - *q).clamp_zero();
            match quota.iter_mut().find(|f| f.name == fr.flavor) {
                Some(f) => f.resources.push(ResourceUsage {
                    name: fr.resource.clone(),
                    total: *q,
                    borrowed,
                }),
                None => quota.push(FlavorUsage {
                    name: fr.flavor.clone(),
                    resources: vec![ResourceUsage {
                        name: fr.resource.clone(),
                        total: *q,
                        borrowed,
                    }],
                }),
            }
        }
        Some(CohortStatus {
            usage: self.flavor_usage(idx),
            quota,
            disabled: self.tree.disabled_reason(idx).map(str::to_string),
        })
    }
}

impl AdmissionCore {
    /// The precise weighted share of a node of this kind, when fair sharing is on and the node is
    /// in a working tree (Kueue reports none for a cohort in a cycle).
    fn share_of(&self, i: Option<usize>, kind: NodeKind) -> Option<f64> {
        self.fair_sharing.as_ref()?;
        let i = i?;
        (self.tree.nodes[i].kind == kind && self.tree.disabled_reason(i).is_none())
            .then(|| drs(&self.tree, i, None).precise())
    }

    /// A ClusterQueue's weighted share (`status.fairSharing`, `kueue_cluster_queue_weighted_share`).
    pub fn cluster_queue_share(&self, name: &str) -> Option<f64> {
        self.share_of(self.tree.cq(name), NodeKind::ClusterQueue)
    }

    /// A Cohort's weighted share (`status.fairSharing`, `kueue_cohort_weighted_share`).
    pub fn cohort_share(&self, name: &str) -> Option<f64> {
        self.share_of(self.tree.cohort(name), NodeKind::Cohort)
    }
}
