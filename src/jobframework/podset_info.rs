//! What admission changes on a job's pod templates, and how to undo it (Kueue's `podset` package):
//! the assigned flavors' node labels become node selectors, their tolerations are added, the podset
//! label is set, and admission checks may add more. Restoring puts the job's originals back.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, PodSchedulingGate, PodSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::JobFrameworkError;
use crate::api::kueue::constants::label;
use crate::api::kueue::{PodSet, PodSetAssignment, PodSetUpdate, ResourceFlavor, Workload};

/// The admission-relevant part of one podset's pod template.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodSetInfo {
    pub name: String,
    pub count: i32,
    pub annotations: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
    pub node_selector: BTreeMap<String, String>,
    pub affinity: Option<Affinity>,
    pub tolerations: Vec<Toleration>,
    pub scheduling_gates: Vec<PodSchedulingGate>,
}

impl PodSetInfo {
    /// Info from an admission: every assigned flavor's node labels and tolerations, and the
    /// admitted count (the podset's own count unless partially admitted).
    pub fn from_assignment(
        assignment: &PodSetAssignment,
        podset: &PodSet,
        flavors: &BTreeMap<String, ResourceFlavor>,
    ) -> Result<Self, JobFrameworkError> {
        let mut info = PodSetInfo {
            name: assignment.name.clone(),
            count: assignment.count.unwrap_or_else(|| podset.count()),
            ..Default::default()
        };
        let mut seen: Vec<&str> = Vec::new();
        for flavor_name in assignment.flavors.values() {
            if seen.contains(&flavor_name.as_str()) {
                continue;
            }
            seen.push(flavor_name);
            let flavor = flavors
                .get(flavor_name)
                .ok_or_else(|| JobFrameworkError::FlavorNotFound(flavor_name.clone()))?;
            let spec = flavor.spec();
            if let Some(labels) = spec.node_labels() {
                info.node_selector
                    .extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            info.tolerations.extend(spec.tolerations().iter().cloned());
        }
        // Topology-aware placement (Kueue's `FromAssignment`): the pods are created behind the topology
        // gate, which the topology ungater lifts pod by pod with its domain's node selector. A podset
        // placed only because its ClusterQueue is TAS-only is marked unconstrained.
        if assignment.topology_assignment.is_some() {
            let req = podset.topology_request.as_ref();
            if req.is_none_or(|r| r.preferred.is_none() && r.required.is_none() && r.unconstrained.is_none())
            {
                info.annotations.insert(
                    crate::api::kueue::tas::UNCONSTRAINED_TOPOLOGY.to_string(),
                    "true".to_string(),
                );
            }
            info.scheduling_gates.push(PodSchedulingGate {
                name: crate::api::kueue::tas::TOPOLOGY_SCHEDULING_GATE.to_string(),
            });
        }
        Ok(info)
    }

    /// Info an admission check asks to add.
    pub fn from_update(update: &PodSetUpdate) -> Self {
        PodSetInfo {
            name: update.name.clone(),
            annotations: update.annotations.clone(),
            labels: update.labels.clone(),
            node_selector: update.node_selector.clone(),
            tolerations: update.tolerations.clone(),
            ..Default::default()
        }
    }

    /// The template's own info, saved before admission changes it so it can be restored.
    pub fn from_podset(ps: &PodSet) -> Self {
        let meta = ps.template.metadata.clone().unwrap_or_default();
        let spec = ps.template.spec.clone().unwrap_or_default();
        PodSetInfo {
            name: ps.name().to_string(),
            count: ps.count(),
            annotations: meta.annotations.unwrap_or_default(),
            labels: meta.labels.unwrap_or_default(),
            node_selector: spec.node_selector.unwrap_or_default(),
            affinity: spec.affinity,
            tolerations: spec.tolerations.unwrap_or_default(),
            scheduling_gates: spec.scheduling_gates.unwrap_or_default(),
        }
    }

    /// Adds `other`'s maps and lists; a key already set to a different value is a conflict.
    pub fn merge(&mut self, other: &PodSetInfo) -> Result<(), JobFrameworkError> {
        check_conflict("annotations", &self.annotations, &other.annotations)?;
        check_conflict("labels", &self.labels, &other.labels)?;
        check_conflict("nodeSelector", &self.node_selector, &other.node_selector)?;
        extend(&mut self.annotations, &other.annotations);
        extend(&mut self.labels, &other.labels);
        extend(&mut self.node_selector, &other.node_selector);
        for t in &other.tolerations {
            if !self.tolerations.contains(t) {
                self.tolerations.push(t.clone());
            }
        }
        for g in &other.scheduling_gates {
            if !self.scheduling_gates.contains(g) {
                self.scheduling_gates.push(g.clone());
            }
        }
        Ok(())
    }
}

fn extend(into: &mut BTreeMap<String, String>, from: &BTreeMap<String, String>) {
    into.extend(from.iter().map(|(k, v)| (k.clone(), v.clone())));
}

fn check_conflict(
    field: &'static str,
    have: &BTreeMap<String, String>,
    want: &BTreeMap<String, String>,
) -> Result<(), JobFrameworkError> {
    for (k, v) in want {
        if let Some(existing) = have.get(k)
            && existing != v
        {
            return Err(JobFrameworkError::PodSetUpdateConflict {
                field,
                key: k.clone(),
                existing: existing.clone(),
                requested: v.clone(),
            });
        }
    }
    Ok(())
}

fn non_empty_map(m: BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!m.is_empty()).then_some(m)
}

fn non_empty_vec<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

/// Every ResourceFlavor by name, as `podsets_info_from_status` reads them (one list call).
pub async fn flavors_by_name(client: &kube::Client) -> Result<BTreeMap<String, ResourceFlavor>, kube::Error> {
    let list = kube::Api::<ResourceFlavor>::all(client.clone())
        .list(&kube::api::ListParams::default())
        .await?;
    Ok(list
        .items
        .into_iter()
        .map(|f| (kube::ResourceExt::name_any(&f), f))
        .collect())
}

/// Applies admission info to a pod template (Kueue's `podset.Merge`). Fails without changing
/// anything when the template already sets a key to a different value.
pub fn merge_into_template(
    meta: &mut ObjectMeta,
    spec: &mut PodSpec,
    info: &PodSetInfo,
) -> Result<(), JobFrameworkError> {
    let mut current = PodSetInfo {
        annotations: meta.annotations.clone().unwrap_or_default(),
        labels: meta.labels.clone().unwrap_or_default(),
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        tolerations: spec.tolerations.clone().unwrap_or_default(),
        scheduling_gates: spec.scheduling_gates.clone().unwrap_or_default(),
        ..Default::default()
    };
    // The slice-chain name an earlier admission left is replaced, not a conflict: after a stop the
    // job's next Workload may start a chain of its own.
    if info.annotations.contains_key(label::WORKLOAD_SLICE_NAME) {
        current.annotations.remove(label::WORKLOAD_SLICE_NAME);
    }
    current.merge(info)?;
    meta.annotations = non_empty_map(current.annotations);
    meta.labels = non_empty_map(current.labels);
    spec.node_selector = non_empty_map(current.node_selector);
    spec.tolerations = non_empty_vec(current.tolerations);
    spec.scheduling_gates = non_empty_vec(current.scheduling_gates);
    Ok(())
}

/// Puts a template's saved info back (Kueue's `podset.RestorePodSpec`); true when anything changed.
/// Absent and empty count as the same, as in Go.
pub fn restore_template(meta: &mut ObjectMeta, spec: &mut PodSpec, info: &PodSetInfo) -> bool {
    let mut changed = false;
    let mut set_map = |slot: &mut Option<BTreeMap<String, String>>, want: &BTreeMap<String, String>| {
        if slot.clone().unwrap_or_default() != *want {
            *slot = non_empty_map(want.clone());
            changed = true;
        }
    };
    set_map(&mut meta.annotations, &info.annotations);
    set_map(&mut meta.labels, &info.labels);
    set_map(&mut spec.node_selector, &info.node_selector);
    if spec.tolerations.clone().unwrap_or_default() != info.tolerations {
        spec.tolerations = non_empty_vec(info.tolerations.clone());
        changed = true;
    }
    if spec.scheduling_gates.clone().unwrap_or_default() != info.scheduling_gates {
        spec.scheduling_gates = non_empty_vec(info.scheduling_gates.clone());
        changed = true;
    }
    changed
}

/// Options mirroring Kueue feature gates that change the injected info.
#[derive(Clone, Copy, Debug, Default)]
pub struct InfoOptions {
    /// Kueue's AssignQueueLabelsForPods: pods get local- and cluster-queue labels.
    pub assign_queue_labels: bool,
}

/// The info to run an admitted workload's job with, one per podset in admission order (Kueue's
/// `getPodSetsInfoFromStatus`): flavor info, the podset label, slice annotation for elastic
/// workloads, and admission checks' podset updates.
pub fn podsets_info_from_status(
    wl: &Workload,
    flavors: &BTreeMap<String, ResourceFlavor>,
    opts: InfoOptions,
) -> Result<Vec<PodSetInfo>, JobFrameworkError> {
    let name = wl.metadata.name.clone().unwrap_or_default();
    let admission = wl
        .admission()
        .ok_or_else(|| JobFrameworkError::NotAdmitted(name.clone()))?;
    let status = wl
        .status
        .as_ref()
        .ok_or_else(|| JobFrameworkError::NotAdmitted(name.clone()))?;
    let elastic = crate::api::kueue::is_elastic_job(&wl.metadata);
    let mut out = Vec::with_capacity(admission.pod_set_assignments.len());
    for (i, assignment) in admission.pod_set_assignments.iter().enumerate() {
        // Kueue pairs assignments and podsets by position; a name mismatch means the admission is stale.
        let podset = wl
            .spec
            .pod_sets
            .get(i)
            .filter(|p| p.name() == assignment.name)
            .ok_or_else(|| JobFrameworkError::UnknownPodSet(assignment.name.clone()))?;
        let mut info = PodSetInfo::from_assignment(assignment, podset, flavors)?;
        // Kueue names the workload on every template (TAS being on); here on TAS podsets only, the
        // ones whose pods the topology ungater looks for.
        if assignment.topology_assignment.is_some() {
            info.annotations.insert(
                crate::api::kueue::tas::WORKLOAD_ANNOTATION.to_string(),
                name.clone(),
            );
        }
        if elastic {
            let slice = wl
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(label::WORKLOAD_SLICE_NAME))
                .cloned()
                .unwrap_or_else(|| name.clone());
            info.annotations
                .insert(label::WORKLOAD_SLICE_NAME.to_string(), slice);
        }
        info.labels
            .insert(label::PODSET.to_string(), assignment.name.clone());
        if opts.assign_queue_labels {
            info.labels.insert(
                label::LOCAL_QUEUE_NAME.to_string(),
                wl.spec.queue_name().to_string(),
            );
            if is_dns_label(&admission.cluster_queue) {
                info.labels.insert(
                    label::CLUSTER_QUEUE_NAME.to_string(),
                    admission.cluster_queue.clone(),
                );
            }
        }
        for check in &status.admission_checks {
            if let Some(update) = check.pod_set_updates.iter().find(|u| u.name == info.name) {
                info.merge(&PodSetInfo::from_update(update))?;
            }
        }
        out.push(info);
    }
    Ok(out)
}

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Applies infos to templates in order; the counts must match (Kueue's BadPodSetsInfoLenError).
/// Helper for `GenericJob::run_with_podsets_info` implementations.
pub fn merge_all<'a>(
    templates: impl ExactSizeIterator<Item = (&'a mut ObjectMeta, &'a mut PodSpec)>,
    infos: &[PodSetInfo],
) -> Result<(), JobFrameworkError> {
    if templates.len() != infos.len() {
        return Err(JobFrameworkError::PodSetsInfoLength {
            want: templates.len(),
            got: infos.len(),
        });
    }
    for ((meta, spec), info) in templates.zip(infos) {
        merge_into_template(meta, spec, info)?;
    }
    Ok(())
}

/// What the workload's podsets look like once its admission info is applied; `None` when not
/// reserved or the info cannot be built (Kueue's `expectedRunningPodSets`).
pub fn expected_running_podsets(
    wl: &Workload,
    flavors: &BTreeMap<String, ResourceFlavor>,
    opts: InfoOptions,
) -> Option<Vec<PodSet>> {
    if !wl.has_quota_reservation() {
        return None;
    }
    let infos = podsets_info_from_status(wl, flavors, opts).ok()?;
    let partial = wl.spec.pod_sets.iter().any(|p| p.min_count.is_some());
    let mut podsets = wl.spec.pod_sets.clone();
    for ps in &mut podsets {
        let info = infos.iter().find(|i| i.name == ps.name())?;
        let mut meta = ps.template.metadata.take().unwrap_or_default();
        let mut spec = ps.template.spec.take().unwrap_or_default();
        merge_into_template(&mut meta, &mut spec, info).ok()?;
        ps.template.metadata = Some(meta);
        ps.template.spec = Some(spec);
        if partial && ps.min_count.is_some() {
            ps.count = Some(info.count);
        }
    }
    Some(podsets)
}

/// Kueue's podset equality for "does this workload still match the job" (`equality.ComparePodSetSlices`):
/// count, minCount, (unless ignored) tolerations, and the resources of the containers and init containers,
/// pairwise. Other container fields (image, command, env) do not affect scheduling, so an image bump does
/// not make a job mismatch its workload.
pub fn podsets_equivalent(a: &[PodSet], b: &[PodSet], ignore_tolerations: bool) -> bool {
    let resources = |cs: &[k8s_openapi::api::core::v1::Container]| -> Vec<Option<k8s_openapi::api::core::v1::ResourceRequirements>> {
        cs.iter().map(|c| c.resources.clone().filter(|r| *r != Default::default())).collect()
    };
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            let (sx, sy) = (
                x.template.spec.clone().unwrap_or_default(),
                y.template.spec.clone().unwrap_or_default(),
            );
            x.count() == y.count()
                && x.min_count == y.min_count
                && (ignore_tolerations
                    || sx.tolerations.unwrap_or_default() == sy.tolerations.unwrap_or_default())
                && resources(sx.init_containers.as_deref().unwrap_or_default())
                    == resources(sy.init_containers.as_deref().unwrap_or_default())
                && resources(&sx.containers) == resources(&sy.containers)
        })
}

/// Takes out of a template what `merge_into_template` put in with `info` (its node selector keys,
/// labels, annotations, tolerations and scheduling gates), so a template compares as its user wrote it
/// whether or not a re-apply already dropped them.
pub fn strip_template(meta: &mut ObjectMeta, spec: &mut PodSpec, info: &PodSetInfo) {
    let strip = |slot: &mut Option<BTreeMap<String, String>>, keys: &BTreeMap<String, String>| {
        if let Some(m) = slot.as_mut() {
            m.retain(|k, _| !keys.contains_key(k));
        }
        if slot.as_ref().is_some_and(BTreeMap::is_empty) {
            *slot = None;
        }
    };
    strip(&mut meta.annotations, &info.annotations);
    strip(&mut meta.labels, &info.labels);
    strip(&mut spec.node_selector, &info.node_selector);
    if let Some(t) = spec.tolerations.as_mut() {
        t.retain(|x| !info.tolerations.contains(x));
    }
    if let Some(g) = spec.scheduling_gates.as_mut() {
        g.retain(|x| !info.scheduling_gates.contains(x));
    }
    spec.tolerations = spec.tolerations.take().filter(|t| !t.is_empty());
    spec.scheduling_gates = spec.scheduling_gates.take().filter(|g| !g.is_empty());
}
