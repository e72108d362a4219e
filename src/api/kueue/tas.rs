//! Topology-aware scheduling (TAS) on the API side, as Kueue v1beta2 has it: the podset annotations
//! and how a pod template's annotations become a podset's `topologyRequest` (Kueue's
//! `jobframework.NewPodSetTopologyRequest(...).Build()`), the job webhooks' refusals of bad ones
//! (`ValidateTASPodSetRequest`), the `Topology` kind's rules, and the compact wire encoding of a
//! `topologyAssignment` (`pkg/util/tas/tas_assignment.go`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::topology::Topology;
use super::workload::{
    PodSetTopologyRequest, TopologyAssignment, TopologyAssignmentSlice,
    TopologyAssignmentSliceLevelIndividualValues, TopologyAssignmentSliceLevelValues,
    TopologyAssignmentSlicePodCounts,
};
use crate::api::names;
use crate::api::validation::{ErrorType, FieldError, Path};

pub const REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-required-topology";
pub const PREFERRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-preferred-topology";
pub const UNCONSTRAINED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-unconstrained-topology";
pub const SLICE_REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-slice-required-topology";
pub const SLICE_SIZE: &str = "kueue.x-k8s.io/podset-slice-size";
/// Kueue's multi-layer slice annotation; quotagate reads it only to tell a TAS pod from another.
pub const SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS: &str =
    "kueue.x-k8s.io/podset-slice-required-topology-constraints";
pub const PODSET_GROUP_NAME: &str = "kueue.x-k8s.io/podset-group-name";
/// The scheduling gate a TAS pod waits behind until its domain's node selector is set.
pub const TOPOLOGY_SCHEDULING_GATE: &str = "kueue.x-k8s.io/topology";
/// Annotation on a TAS workload's pod templates naming the Workload (Kueue's `WorkloadAnnotation`), by
/// which the topology ungater finds the workload's pods.
pub const WORKLOAD_ANNOTATION: &str = "kueue.x-k8s.io/workload";
/// The node label of the lowest level when a topology goes down to single nodes.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// Index label of a batch Job's pods (`batchv1.JobCompletionIndexAnnotation`).
pub const JOB_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// Index label of a pod group's pods.
pub const POD_GROUP_POD_INDEX: &str = "kueue.x-k8s.io/pod-group-pod-index";
/// Kueue's `MaxItems` on `Topology.spec.levels`.
pub const MAX_LEVELS: usize = 16;

fn annotation<'a>(meta: Option<&'a ObjectMeta>, key: &str) -> Option<&'a str> {
    meta.and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// Whether a pod was placed by TAS (Kueue's `utiltas.IsTAS`): it carries a topology annotation, which
/// an implied (TAS-only ClusterQueue) placement sets as unconstrained. Other pods' requests on a node
/// are taken from that node's free room.
pub fn is_tas_pod(meta: &ObjectMeta) -> bool {
    [
        REQUIRED_TOPOLOGY,
        PREFERRED_TOPOLOGY,
        UNCONSTRAINED_TOPOLOGY,
        SLICE_REQUIRED_TOPOLOGY,
        SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS,
    ]
    .iter()
    .any(|k| annotation(Some(meta), k).is_some())
}

/// Go's `strconv.ParseBool`.
fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// A podset's topology request from its pod template's annotations (Kueue's
/// `podSetTopologyRequestBuilder.Build`): required, else preferred, else unconstrained; the slice
/// topology when both slice annotations are set. `pod_index_label` is what the job kind names
/// (a batch Job's completion index); with it the request is kept even without annotations, as Kueue does.
/// Errors are the webhook's (run [`validate_tas_podset_request`] first to name the field).
pub fn podset_topology_request(
    meta: Option<&ObjectMeta>,
    pod_index_label: Option<&str>,
) -> Result<Option<PodSetTopologyRequest>, String> {
    let mut req = PodSetTopologyRequest::default();
    let required = annotation(meta, REQUIRED_TOPOLOGY);
    let preferred = annotation(meta, PREFERRED_TOPOLOGY);
    let slice_topology = annotation(meta, SLICE_REQUIRED_TOPOLOGY);
    let slice_size = annotation(meta, SLICE_SIZE);
    if let Some(v) = required {
        req.required = Some(v.to_string());
    } else if let Some(v) = preferred {
        req.preferred = Some(v.to_string());
    } else if let Some(v) = annotation(meta, UNCONSTRAINED_TOPOLOGY) {
        let b = parse_bool(v).ok_or_else(|| format!("strconv.ParseBool: parsing {v:?}: invalid syntax"))?;
        req.unconstrained = Some(b);
    } else if (slice_topology.is_none() || slice_size.is_none()) && pod_index_label.is_none() {
        return Ok(None);
    }
    if let (Some(topology), Some(size)) = (slice_topology, slice_size) {
        let size: i32 = size
            .parse()
            .map_err(|_| format!("strconv.ParseInt: parsing {size:?}: invalid syntax"))?;
        req.pod_set_slice_required_topology = Some(topology.to_string());
        req.pod_set_slice_size = Some(size);
    }
    req.pod_index_label = pod_index_label.map(str::to_string);
    if let Some(group) = annotation(meta, PODSET_GROUP_NAME)
        && (required.is_some() || preferred.is_some())
    {
        req.pod_set_group_name = Some(group.to_string());
    }
    Ok(Some(req))
}

/// Whether a podset asks for TAS itself (Kueue's `IsExplicitlyRequestingTAS`).
pub fn explicitly_requests_tas(req: Option<&PodSetTopologyRequest>) -> bool {
    req.is_some_and(|r| {
        r.required.is_some()
            || r.preferred.is_some()
            || r.unconstrained == Some(true)
            || r.pod_set_slice_required_topology.is_some()
    })
}

/// Kueue's `ValidateTASPodSetRequest`: the job webhooks' rules on a pod template's TAS annotations.
/// `meta_path` is the template's metadata (`spec.template.metadata`).
pub fn validate_tas_podset_request(meta_path: &Path, meta: Option<&ObjectMeta>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let required = annotation(meta, REQUIRED_TOPOLOGY);
    let preferred = annotation(meta, PREFERRED_TOPOLOGY);
    let unconstrained = annotation(meta, UNCONSTRAINED_TOPOLOGY);
    let slice_topology = annotation(meta, SLICE_REQUIRED_TOPOLOGY);
    let slice_size = annotation(meta, SLICE_SIZE);
    let annotations = meta_path.child("annotations");
    let found = [required.is_some(), preferred.is_some(), unconstrained.is_some()]
        .into_iter()
        .filter(|b| *b)
        .count();
    if found > 1 {
        errs.push(FieldError::invalid(
            &annotations,
            format!(
                "must not contain more than one topology annotation: [{REQUIRED_TOPOLOGY:?}, {PREFERRED_TOPOLOGY:?}, {UNCONSTRAINED_TOPOLOGY:?}]"
            ),
        ));
    }
    for (key, value) in [
        (REQUIRED_TOPOLOGY, required),
        (PREFERRED_TOPOLOGY, preferred),
        (SLICE_REQUIRED_TOPOLOGY, slice_topology),
    ] {
        if let Some(v) = value {
            names::qualified_name(&annotations.key(key), v, &mut errs);
        }
    }
    if let Some(group) = annotation(meta, PODSET_GROUP_NAME) {
        let path = annotations.key(PODSET_GROUP_NAME);
        if group.parse::<u64>().is_ok() {
            errs.push(FieldError::invalid(
                &path,
                format!("{group:?}: must not be a number"),
            ));
        }
        if slice_size.is_some() {
            errs.push(FieldError::forbidden(
                path.as_str(),
                format!("may not be set when '{SLICE_SIZE}' is specified"),
            ));
        }
        if slice_topology.is_some() {
            errs.push(FieldError::forbidden(
                path.as_str(),
                format!("may not be set when '{SLICE_REQUIRED_TOPOLOGY}' is specified"),
            ));
        }
        if required.is_none() && preferred.is_none() {
            errs.push(FieldError::forbidden(
                path.as_str(),
                format!(
                    "may not be set when neither '{PREFERRED_TOPOLOGY}' nor '{REQUIRED_TOPOLOGY}' is specified"
                ),
            ));
        }
    }
    if let Some(v) = unconstrained
        && parse_bool(v).is_none()
    {
        errs.push(FieldError::invalid(
            &annotations.key(UNCONSTRAINED_TOPOLOGY),
            format!("{v:?}: must be a boolean value"),
        ));
    }
    if let Some(v) = slice_size {
        let path = annotations.key(SLICE_SIZE);
        match v.parse::<i32>() {
            Err(_) => errs.push(FieldError::invalid(
                &path,
                format!("{v:?}: must be a numeric value"),
            )),
            Ok(n) if n < 1 => errs.push(FieldError::invalid(
                &path,
                format!("{v:?}: must be greater than or equal to 1"),
            )),
            Ok(_) => {}
        }
    }
    if slice_topology.is_some() && slice_size.is_none() {
        errs.push(FieldError::required(
            annotations.key(SLICE_SIZE).as_str(),
            format!("must be set when '{SLICE_REQUIRED_TOPOLOGY}' is specified"),
        ));
    }
    if slice_topology.is_none() && slice_size.is_some() {
        errs.push(FieldError::forbidden(
            annotations.key(SLICE_SIZE).as_str(),
            format!("may not be set when '{SLICE_REQUIRED_TOPOLOGY}' is not specified"),
        ));
    }
    errs
}

/// Kueue's `ValidateSliceSizeAnnotationUpperBound`: a slice may not be larger than the podset.
pub fn validate_slice_size_upper_bound(
    meta_path: &Path,
    meta: Option<&ObjectMeta>,
    count: i32,
) -> Vec<FieldError> {
    let Some(v) = annotation(meta, SLICE_SIZE) else {
        return Vec::new();
    };
    let path = meta_path.child("annotations").key(SLICE_SIZE);
    match v.parse::<i32>() {
        Err(_) => vec![FieldError::invalid(
            &path,
            format!("{v:?}: must be a numeric value"),
        )],
        Ok(n) if n > count => vec![FieldError::invalid(
            &path,
            format!("{v:?}: must not be greater than pod set count {count}"),
        )],
        Ok(_) => Vec::new(),
    }
}

const HOSTNAME_LOWEST_MSG: &str =
    "the kubernetes.io/hostname label can only be used at the lowest level of topology";
const LEVELS_MUTABLE_MSG: &str = "levels are mutable only when kubernetes.io/hostname is the lowest level both before and after the change";

/// The `Topology` CRD's rules: 1 to 16 levels, each a label key (≤316 characters), unique, and
/// `kubernetes.io/hostname` only as the lowest level.
pub fn validate_topology(t: &Topology) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = Path::root("spec").child("levels");
    let levels = &t.spec.levels;
    if levels.is_empty() {
        errs.push(FieldError::required(&path, "must have at least 1 item"));
    }
    if levels.len() > MAX_LEVELS {
        errs.push(FieldError::new(
            &path,
            ErrorType::TooMany,
            format!("must have at most {MAX_LEVELS} items, got {}", levels.len()),
        ));
    }
    for (i, l) in levels.iter().enumerate() {
        let p = path.index(i).child("nodeLabel");
        if l.node_label.is_empty() {
            errs.push(FieldError::required(&p, ""));
        } else if l.node_label.len() > 316 {
            errs.push(FieldError::new(
                &p,
                ErrorType::TooLong,
                "may not be more than 316 bytes",
            ));
        } else {
            names::qualified_name(&p, &l.node_label, &mut errs);
        }
    }
    let unique: std::collections::BTreeSet<&str> = levels.iter().map(|l| l.node_label.as_str()).collect();
    if unique.len() != levels.len() {
        errs.push(FieldError::invalid(&path, "must be unique"));
    }
    let hostname_at = levels.iter().position(|l| l.node_label == HOSTNAME_LABEL);
    if hostname_at.is_some_and(|i| i + 1 != levels.len()) {
        errs.push(FieldError::invalid(&path, HOSTNAME_LOWEST_MSG));
    }
    errs
}

/// Updates: the create rules, and levels change only with `kubernetes.io/hostname` lowest both
/// before and after (Kueue's CRD transition rule).
pub fn validate_topology_update(old: &Topology, new: &Topology) -> Vec<FieldError> {
    let mut errs = validate_topology(new);
    let lowest_is_host = |t: &Topology| {
        t.spec
            .levels
            .last()
            .is_some_and(|l| l.node_label == HOSTNAME_LABEL)
    };
    if old.spec.levels != new.spec.levels && !(lowest_is_host(old) && lowest_is_host(new)) {
        errs.push(FieldError::invalid("spec.levels", LEVELS_MUTABLE_MSG));
    }
    errs
}

/// One domain of an assignment: its value at each assigned level and the pods it gets
/// (Kueue's `utiltas.TopologyDomainAssignment`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainAssignment {
    pub values: Vec<String>,
    pub count: i32,
}

/// The domains of a wire assignment in order (Kueue's `InternalSeqFrom`). Malformed slices (too
/// few roots or counts) yield the domains that are whole.
pub fn decode_assignment(ta: &TopologyAssignment) -> Vec<DomainAssignment> {
    let mut out = Vec::new();
    for slice in &ta.slices {
        if slice.values_per_level.len() != ta.levels.len() {
            continue;
        }
        for i in 0..usize::try_from(slice.domain_count).unwrap_or(0) {
            let count = match (slice.pod_counts.universal, slice.pod_counts.individual.get(i)) {
                (Some(u), _) => u,
                (None, Some(c)) => *c,
                (None, None) => break,
            };
            let mut values = Vec::with_capacity(ta.levels.len());
            for lv in &slice.values_per_level {
                match (&lv.universal, &lv.individual) {
                    (Some(u), _) => values.push(u.clone()),
                    (None, Some(ind)) => match ind.roots.get(i) {
                        Some(root) => values.push(format!(
                            "{}{root}{}",
                            ind.prefix.as_deref().unwrap_or(""),
                            ind.suffix.as_deref().unwrap_or("")
                        )),
                        None => break,
                    },
                    (None, None) => break,
                }
            }
            if values.len() == ta.levels.len() {
                out.push(DomainAssignment { values, count });
            }
        }
    }
    out
}

/// Kueue's single-slice compact encoding (`compactSliceEncoding`): per level either one universal
/// value or the roots left after the longest common prefix and suffix; pod counts universal when equal.
pub fn encode_assignment(levels: &[String], domains: &[DomainAssignment]) -> TopologyAssignment {
    let mut out = TopologyAssignment {
        levels: levels.to_vec(),
        slices: Vec::new(),
    };
    let Some(first) = domains.first() else {
        return out;
    };
    let values_per_level = (0..levels.len())
        .map(|l| compact_values(domains.iter().map(|d| d.values[l].as_str())))
        .collect();
    let same = domains.iter().all(|d| d.count == first.count);
    out.slices.push(TopologyAssignmentSlice {
        domain_count: i32::try_from(domains.len()).unwrap_or(i32::MAX),
        values_per_level,
        pod_counts: TopologyAssignmentSlicePodCounts {
            universal: same.then_some(first.count),
            individual: if same {
                Vec::new()
            } else {
                domains.iter().map(|d| d.count).collect()
            },
        },
    });
    out
}

/// Kueue's `fillSingleCompactSliceValues` (byte-wise prefix and suffix, as Go slices strings).
fn compact_values<'a>(values: impl Iterator<Item = &'a str> + Clone) -> TopologyAssignmentSliceLevelValues {
    let mut prefix: &[u8] = &[];
    let mut suffix: &[u8] = &[];
    let (mut max_len, mut min_len) = (0usize, usize::MAX);
    for (n, s) in values.clone().enumerate() {
        let b = s.as_bytes();
        if n == 0 {
            prefix = b;
            suffix = b;
        } else {
            let p = prefix.iter().zip(b).take_while(|(x, y)| x == y).count();
            prefix = &prefix[..p];
            let q = suffix
                .iter()
                .rev()
                .zip(b.iter().rev())
                .take_while(|(x, y)| x == y)
                .count();
            suffix = &suffix[suffix.len() - q..];
        }
        max_len = max_len.max(b.len());
        min_len = min_len.min(b.len());
    }
    if prefix.len() == max_len {
        return TopologyAssignmentSliceLevelValues {
            universal: Some(String::from_utf8_lossy(prefix).into_owned()),
            individual: None,
        };
    }
    if prefix.len() + suffix.len() > min_len {
        prefix = &prefix[..min_len - suffix.len()];
    }
    let (p, s) = (prefix.len(), suffix.len());
    let text = |b: &[u8]| (!b.is_empty()).then(|| String::from_utf8_lossy(b).into_owned());
    TopologyAssignmentSliceLevelValues {
        universal: None,
        individual: Some(TopologyAssignmentSliceLevelIndividualValues {
            prefix: text(prefix),
            suffix: text(suffix),
            roots: values
                .map(|v| String::from_utf8_lossy(&v.as_bytes()[p..v.len() - s]).into_owned())
                .collect(),
        }),
    }
}

#[cfg(test)]
#[path = "tas_tests.rs"]
mod tests;
