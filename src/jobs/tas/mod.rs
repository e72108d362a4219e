//! Kueue's topology ungater (`pkg/controller/tas/topology_ungater.go`): the pods of a workload admitted
//! with a `topologyAssignment` are created behind the scheduling gate `kueue.x-k8s.io/topology` (the
//! admission info puts it on the job's pod templates), and once the workload is admitted each pod is let
//! through with a node selector pinning it to one assigned domain: the assignment's level labels with
//! that domain's values. Each domain gets exactly as many pods as its count, less the pods already
//! ungated into it.
//!
//! Which pod goes where: by rank when the podset names a pod index label (a batch Job's completion
//! index, a pod group's index) and every pod's index is readable, unique and in range, the pod of rank
//! `r` going to the domain holding the `r`-th pod of the assignment; otherwise greedily, the gated pods
//! in list order filling the domains in assignment order. A podset group (a leader and its workers)
//! shares one rank space, the smaller podset first. Pods of a node the workload marks unhealthy are left
//! gated until the assignment names a replacement.
//!
//! The decision is pure ([`pods_to_ungate`]); [`controller`] executes it.

pub mod controller;

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Pod;

use crate::api::kueue::constants::label;
use crate::api::kueue::tas::{
    DomainAssignment, HOSTNAME_LABEL, TOPOLOGY_SCHEDULING_GATE, WORKLOAD_ANNOTATION, decode_assignment,
};
use crate::api::kueue::{PodSetAssignment, PodSetTopologyRequest, Workload};

/// Kueue's `PodIndexOffsetAnnotation`: where a replica's pod indexes start in the podset's rank space.
pub const POD_INDEX_OFFSET: &str = "kueue.x-k8s.io/pod-index-offset";

/// Why a pass cannot decide (Kueue's `errParseOffsetAnnotation`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UngateError {
    #[error("failed to parse offset annotation {POD_INDEX_OFFSET}={value:?} of pod {pod:?}")]
    Offset { pod: String, value: String },
}

/// A gated pod to let through, and the node selector entries it gets.
#[derive(Debug, Clone, PartialEq)]
pub struct Ungate<'a> {
    pub pod: &'a Pod,
    pub node_selector: BTreeMap<String, String>,
}

/// Kueue's `IsAdmittedByTAS`: admitted, with a topology assignment on some podset.
pub fn is_admitted_by_tas(wl: &Workload) -> bool {
    wl.is_admitted()
        && wl.admission().is_some_and(|a| {
            a.pod_set_assignments
                .iter()
                .any(|p| p.topology_assignment.is_some())
        })
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn pod_label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The workload (slice) a pod belongs to, as Kueue indexes it (`IndexPodWorkloadSliceName`): its
/// slice-name annotation, else its `kueue.x-k8s.io/workload` annotation.
pub fn pod_workload(pod: &Pod) -> Option<&str> {
    annotation(pod, label::WORKLOAD_SLICE_NAME).or_else(|| annotation(pod, WORKLOAD_ANNOTATION))
}

pub fn has_gate(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == TOPOLOGY_SCHEDULING_GATE))
}

fn is_terminated(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The pod's values at `levels` from its node selector (missing ones empty, as Go's map reads).
fn level_values(levels: &[String], pod: &Pod) -> Vec<String> {
    let sel = pod.spec.as_ref().and_then(|s| s.node_selector.as_ref());
    levels
        .iter()
        .map(|l| sel.and_then(|s| s.get(l)).cloned().unwrap_or_default())
        .collect()
}

/// The domain holding the pod of `rank` (the assignment's pods in domain order), if any.
fn domain_of_rank(domains: &[DomainAssignment], rank: i64) -> Option<&[String]> {
    let mut first = 0i64;
    for d in domains {
        let next = first + i64::from(d.count.max(0));
        if rank < next {
            return Some(&d.values);
        }
        first = next;
    }
    None
}

/// Go's `strconv.ParseUint(v, 10, 0)` below `bound`.
fn uint_below(v: &str, bound: i64) -> Option<i64> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse::<i64>().ok().filter(|n| *n < bound)
}

/// Kueue's `readRanksForLabels`: each pod's rank, or `None` when ranks cannot be used (a pod without a
/// readable index, one out of range, two with the same rank).
fn read_ranks<'a>(
    count: i64,
    pods: &[&'a Pod],
    req: &PodSetTopologyRequest,
    index_label: &str,
    offset: i64,
    max_rank: i64,
) -> Option<BTreeMap<i64, &'a Pod>> {
    let mut single_job = count;
    let sub_group = match &req.sub_group_index_label {
        Some(l) => {
            let n = i64::from(req.sub_group_count.filter(|n| *n > 0)?);
            single_job = count / n;
            Some((l.as_str(), n))
        }
        None => None,
    };
    let mut out = BTreeMap::new();
    for pod in pods {
        let index = uint_below(pod_label(pod, index_label)?, max_rank)?;
        let mut rank = index - offset;
        if let Some((l, n)) = sub_group {
            let job = uint_below(pod_label(pod, l)?, n)?;
            if index >= single_job {
                return None;
            }
            rank = index + job * single_job - offset;
        }
        if rank >= count || rank < 0 || out.insert(rank, *pod).is_some() {
            return None;
        }
    }
    Some(out)
}

/// One podset's gated pods and their domains (Kueue's `assignGatedPodsToDomains`): by rank when the
/// ranks are usable and agree with where the ungated pods already went, else greedily.
fn assign<'a>(
    psa: &PodSetAssignment,
    count: i64,
    domains: &[DomainAssignment],
    pods: &[&'a Pod],
    req: Option<&PodSetTopologyRequest>,
    offset: i64,
    max_rank: i64,
) -> Vec<(&'a Pod, Vec<String>)> {
    let levels = psa
        .topology_assignment
        .as_ref()
        .map(|t| t.levels.as_slice())
        .unwrap_or_default();
    let ranked = req.and_then(|r| {
        let label = r.pod_index_label.as_deref()?;
        let ranks = read_ranks(count, pods, r, label, offset, max_rank)?;
        let mut out = Vec::new();
        for (rank, pod) in ranks {
            // Fewer assigned pods than the podset's count (a slice size that does not divide it): greedy.
            let expected = domain_of_rank(domains, rank)?;
            if !has_gate(pod) {
                if level_values(levels, pod) != expected {
                    return None;
                }
                continue;
            }
            out.push((pod, expected.to_vec()));
        }
        Some(out)
    });
    if let Some(r) = ranked {
        return r;
    }
    let mut gated = Vec::new();
    let mut ungated: HashMap<Vec<String>, i64> = HashMap::new();
    for pod in pods {
        if has_gate(pod) {
            gated.push(*pod);
        } else {
            *ungated.entry(level_values(levels, pod)).or_default() += 1;
        }
    }
    let mut out = Vec::new();
    let mut next = gated.into_iter();
    for d in domains {
        let already = ungated.get(&d.values).copied().unwrap_or(0);
        let room = (i64::from(d.count) - already).max(0);
        for pod in next.by_ref().take(usize::try_from(room).unwrap_or(0)) {
            out.push((pod, d.values.clone()));
        }
    }
    out
}

/// The gated pods of `wl` to let through now and the node selector of each (Kueue's topology ungater
/// `Reconcile`, after the expectations check). `pods` are the namespace's pods; those of other
/// workloads, of no podset, or terminated are not counted. Nothing when `wl` is not admitted by TAS.
pub fn pods_to_ungate<'a>(wl: &Workload, pods: &'a [Pod]) -> Result<Vec<Ungate<'a>>, UngateError> {
    let mut out = Vec::new();
    if !is_admitted_by_tas(wl) {
        return Ok(out);
    }
    let Some(admission) = wl.admission() else {
        return Ok(out);
    };
    let slice = crate::jobs::elastic::slice_name(wl);
    let requests: HashMap<&str, &PodSetTopologyRequest> = wl
        .spec
        .pod_sets
        .iter()
        .filter_map(|p| Some((p.name(), p.topology_request.as_ref()?)))
        .collect();
    let count_of = |psa: &PodSetAssignment| -> i64 {
        i64::from(psa.count.unwrap_or_else(|| {
            wl.spec
                .pod_sets
                .iter()
                .find(|p| p.name() == psa.name)
                .map_or(0, |p| p.count())
        }))
    };
    // Podset groups: the smaller podset (a leader) ranks first, the larger after it.
    let mut groups: BTreeMap<String, Vec<&PodSetAssignment>> = BTreeMap::new();
    for (i, psa) in admission.pod_set_assignments.iter().enumerate() {
        let group = requests
            .get(psa.name.as_str())
            .and_then(|r| r.pod_set_group_name.clone())
            .unwrap_or_else(|| i.to_string());
        groups.entry(group).or_default().push(psa);
    }
    let mut rank_offset: HashMap<&str, i64> = HashMap::new();
    let mut max_rank: HashMap<&str, i64> = HashMap::new();
    for psas in groups.values() {
        match psas.as_slice() {
            [a, b, ..] => {
                let (small, large) = if count_of(a) > count_of(b) { (b, a) } else { (a, b) };
                rank_offset.insert(&small.name, 0);
                rank_offset.insert(&large.name, count_of(small));
                max_rank.insert(&small.name, count_of(small));
                max_rank.insert(&large.name, count_of(large) + count_of(small));
            }
            [one] => {
                rank_offset.insert(&one.name, 0);
                max_rank.insert(&one.name, count_of(one));
            }
            [] => {}
        }
    }
    let unhealthy: Vec<&str> = wl
        .status
        .as_ref()
        .map(|s| s.unhealthy_nodes.iter().map(|n| n.name.as_str()).collect())
        .unwrap_or_default();
    for psa in &admission.pod_set_assignments {
        let Some(ta) = &psa.topology_assignment else {
            continue;
        };
        let mine: Vec<&Pod> = pods
            .iter()
            .filter(|p| {
                pod_workload(p) == Some(slice)
                    && pod_label(p, label::PODSET) == Some(psa.name.as_str())
                    && !is_terminated(p)
            })
            .collect();
        let mut offset = rank_offset.get(psa.name.as_str()).copied().unwrap_or(0);
        let mut max = max_rank.get(psa.name.as_str()).copied().unwrap_or(0);
        // The replicas of one podset share an offset: the first pod's says it.
        if let Some(first) = mine.first()
            && let Some(v) = annotation(first, POD_INDEX_OFFSET)
        {
            let n: i64 = v.parse().map_err(|_| UngateError::Offset {
                pod: first.metadata.name.clone().unwrap_or_default(),
                value: v.to_string(),
            })?;
            offset += n;
            max += n;
        }
        let domains = decode_assignment(ta);
        let mut assigned = assign(
            psa,
            count_of(psa),
            &domains,
            &mine,
            requests.get(psa.name.as_str()).copied(),
            offset,
            max,
        );
        // A pod is not sent to a node waiting for its replacement: it could never run there.
        if !unhealthy.is_empty() && ta.levels.last().is_some_and(|l| l == HOSTNAME_LABEL) {
            assigned.retain(|(_, values)| {
                values
                    .last()
                    .is_none_or(|host| !unhealthy.contains(&host.as_str()))
            });
        }
        out.extend(assigned.into_iter().map(|(pod, values)| Ungate {
            pod,
            node_selector: ta.levels.iter().cloned().zip(values).collect(),
        }));
    }
    Ok(out)
}

/// The pod without the topology gate (other gates stay) and with `node_selector` added to its own.
pub fn ungated(pod: &Pod, node_selector: &BTreeMap<String, String>) -> Pod {
    let mut after = pod.clone();
    let spec = after.spec.get_or_insert_with(Default::default);
    if let Some(gates) = spec.scheduling_gates.as_mut() {
        gates.retain(|g| g.name != TOPOLOGY_SCHEDULING_GATE);
    }
    if spec.scheduling_gates.as_ref().is_some_and(Vec::is_empty) {
        spec.scheduling_gates = None;
    }
    spec.node_selector
        .get_or_insert_with(Default::default)
        .extend(node_selector.iter().map(|(k, v)| (k.clone(), v.clone())));
    after
}

#[cfg(test)]
mod tests;
