//! The topology parts of the queue's model: a podset's topology request and its placement, below both
//! the model (`model.rs`) and the topology-aware placement that fills them (`tas.rs`).

use crate::api::kueue::tas::DomainAssignment;

/// A podset's topology request (`spec.podSets[].topologyRequest`), the parts placement reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TopologyRequest {
    pub required: Option<String>,
    pub preferred: Option<String>,
    pub unconstrained: bool,
    pub slice_topology: Option<String>,
    pub slice_size: Option<i32>,
}

impl TopologyRequest {
    /// The podset asks for TAS itself (Kueue's `IsExplicitlyRequestingTAS`).
    pub fn is_explicit(&self) -> bool {
        self.required.is_some()
            || self.preferred.is_some()
            || self.unconstrained
            || self.slice_topology.is_some()
    }
    pub(super) fn slice_only(&self) -> bool {
        self.required.is_none() && self.preferred.is_none() && self.slice_topology.is_some()
    }
}

/// A placement: the levels it names (only the lowest when that is `kubernetes.io/hostname`, else
/// all) and the domains with their pod counts, in domain order (Kueue's `utiltas.TopologyAssignment`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    pub levels: Vec<String>,
    pub domains: Vec<DomainAssignment>,
}

impl Placement {
    /// The first `count` pods of the placement, in its domain order (Kueue's `TruncateAssignment`,
    /// for a workload that shrinks in place).
    pub fn truncated(&self, count: i64) -> Placement {
        let mut left = count.max(0);
        let mut domains = Vec::new();
        for d in &self.domains {
            if left <= 0 {
                break;
            }
            let take = i64::from(d.count).min(left);
            left -= take;
            domains.push(DomainAssignment {
                values: d.values.clone(),
                count: i32::try_from(take).unwrap_or(i32::MAX),
            });
        }
        Placement {
            levels: self.levels.clone(),
            domains,
        }
    }
}
