//! The topology parts of the queue's model: a podset's topology request and its placement, below both
//! the model (`model.rs`) and the topology-aware placement that fills them (`tas.rs`).

use crate::api::kueue::TopologyAssignment;
use crate::api::kueue::tas::{DomainAssignment, decode_assignment, encode_assignment};

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

impl std::hash::Hash for Placement {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.levels.hash(state);
        for d in &self.domains {
            d.values.hash(state);
            d.count.hash(state);
        }
    }
}

/// Annotation on a podset template of a replacement slice: the podset's pods that already run and
/// their domains, as a `topologyAssignment` in Kueue's wire form (read from the slice it replaces).
/// Placement counts those pods where they are and places only the rest (`PodSetModel::running`).
pub const ANNOTATION_TOPOLOGY_RUNNING: &str = "quotagate.io/topology-running";

/// The value of [`ANNOTATION_TOPOLOGY_RUNNING`] for `running`.
pub fn running_annotation(running: &Placement) -> String {
    let ta = encode_assignment(&running.levels, &running.domains);
    serde_json::to_string(&ta).unwrap_or_default()
}

/// The running pods [`ANNOTATION_TOPOLOGY_RUNNING`] names on a podset of `count` pods, or why the
/// value is not one: not a `topologyAssignment`, no levels, more domains or pods than the podset
/// has, a negative count.
pub fn parse_running(value: &str, count: i64) -> Result<Placement, String> {
    let ta: TopologyAssignment =
        serde_json::from_str(value).map_err(|e| format!("not a topologyAssignment: {e}"))?;
    if ta.levels.is_empty() {
        return Err("names no levels".into());
    }
    check_domain_count(&ta, count)?;
    let domains = decode_assignment(&ta);
    let mut pods = 0i64;
    for d in &domains {
        if d.count < 0 {
            return Err(format!(
                "domain {:?}: count must be non-negative",
                d.values.join("/")
            ));
        }
        pods += i64::from(d.count);
    }
    if pods > count {
        return Err(format!("holds {pods} pods, more than the podset's {count}"));
    }
    Ok(Placement {
        levels: ta.levels,
        domains,
    })
}

/// Whether `ta` names at most `count` domains, checked before decoding it: each domain holds a pod,
/// so a podset of `count` pods has no more, and a decoder must not allocate what a count written
/// into a status claims.
pub fn check_domain_count(ta: &TopologyAssignment, count: i64) -> Result<(), String> {
    let mut domains = 0i64;
    for (i, slice) in ta.slices.iter().enumerate() {
        if slice.domain_count < 0 {
            return Err(format!("slices[{i}].domainCount: must be non-negative"));
        }
        domains = domains.saturating_add(i64::from(slice.domain_count));
    }
    if domains > count.max(0) {
        return Err(format!(
            "names {domains} domains, more than the podset's {count} pods"
        ));
    }
    Ok(())
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
