//! Building the Workload for a job (Kueue's `ConstructWorkload` + `prepareWorkload`), and the
//! slice annotations of elastic jobs. The caller creates the returned object.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::JobFrameworkError;
use super::interface::{GenericJob, maximum_execution_time_seconds, queue_name};
use super::names::{NameLength, workload_name};
use super::priority::Priority;
use crate::api::kueue::constants::{RESOURCE_IN_USE_FINALIZER, label};
use crate::api::kueue::pods_ready_annotation;
use crate::api::kueue::{PodSet, Workload, WorkloadSpec};

/// Annotations with this prefix are copied to the workload (ProvisioningRequest parameters).
const PROV_REQ_ANNOTATION_PREFIX: &str = "provreq.kueue.x-k8s.io/";

/// Settings from the manager configuration that shape a new workload.
#[derive(Clone, Debug, Default)]
pub struct WorkloadOptions {
    /// Job labels copied to the workload (Kueue's `labelKeysToCopy`).
    pub label_keys_to_copy: Vec<String>,
    pub name_length: NameLength,
}

/// Name of the workload for a job; elastic jobs add their generation (or the provider's extra part)
/// so every slice gets its own name.
pub fn workload_name_for_job(job: &dyn GenericJob, len: NameLength) -> Result<String, JobFrameworkError> {
    let meta = job.meta();
    let gvk = job.gvk();
    let name = meta
        .name
        .as_deref()
        .ok_or_else(|| JobFrameworkError::MissingField {
            kind: gvk.kind.clone(),
            field: "metadata.name",
        })?;
    let uid = meta.uid.as_deref().unwrap_or_default();
    let extra = if job.uses_slices() {
        match job.as_elastic_workload_name_provider() {
            Some(p) => p.workload_name_extra(),
            None => meta.generation.unwrap_or(0).to_string(),
        }
    } else {
        String::new()
    };
    Ok(workload_name(name, uid, &gvk, &extra, len))
}

/// The controller owner reference a job puts on its workload.
pub fn owner_reference(job: &dyn GenericJob) -> Result<OwnerReference, JobFrameworkError> {
    let meta = job.meta();
    let gvk = job.gvk();
    let missing = |field| JobFrameworkError::MissingField {
        kind: gvk.kind.clone(),
        field,
    };
    Ok(OwnerReference {
        api_version: if gvk.group.is_empty() {
            gvk.version.clone()
        } else {
            format!("{}/{}", gvk.group, gvk.version)
        },
        kind: gvk.kind.clone(),
        name: meta.name.clone().ok_or_else(|| missing("metadata.name"))?,
        uid: meta.uid.clone().ok_or_else(|| missing("metadata.uid"))?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

/// A new Workload for `job` with the given podsets and resolved priority: name, namespace, owner,
/// finalizer, copied labels, job-uid label, ProvisioningRequest annotations, queue name and
/// maximum execution time from the job's labels, and `active` as the job asks (absent = active).
pub fn construct_workload(
    job: &dyn GenericJob,
    podsets: Vec<PodSet>,
    priority: Priority,
    opts: &WorkloadOptions,
) -> Result<Workload, JobFrameworkError> {
    let meta = job.meta();
    let name = workload_name_for_job(job, opts.name_length)?;
    let job_labels = meta.labels.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = job_labels
        .iter()
        .filter(|(k, _)| opts.label_keys_to_copy.contains(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(uid) = meta.uid.as_deref()
        && is_label_value(uid)
    {
        labels.insert(label::JOB_UID.to_string(), uid.to_string());
    }
    let annotations: BTreeMap<String, String> = meta
        .annotations
        .iter()
        .flatten()
        // Kueue v0.20 (KEP-4803) copies the job's `kueue.x-k8s.io/wait-for-pods-ready` too.
        .filter(|(k, _)| k.starts_with(PROV_REQ_ANNOTATION_PREFIX) || *k == pods_ready_annotation::ANNOTATION)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut wl = Workload {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: meta.namespace.clone(),
            labels: (!labels.is_empty()).then_some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            finalizers: Some(vec![RESOURCE_IN_USE_FINALIZER.to_string()]),
            owner_references: Some(vec![owner_reference(job)?]),
            ..Default::default()
        },
        spec: WorkloadSpec {
            pod_sets: podsets,
            queue_name: queue_name(meta).map(str::to_string),
            priority_class_ref: priority.class_ref,
            priority: Some(priority.value),
            maximum_execution_time_seconds: maximum_execution_time_seconds(meta),
            ..Default::default()
        },
        status: None,
    };
    if let Some(a) = job.as_with_custom_workload_activation() {
        wl.spec.active = Some(a.is_workload_active());
    }
    Ok(wl)
}

/// Marks an elastic job's new workload as a slice: the elastic-job annotation, the slice-chain
/// name, and `workload-slice-replacement-for: <ns>/<name>` when it replaces a not-finished slice.
/// More than one unfinished slice means a previous replacement has not settled yet.
pub fn prepare_workload_slice(
    wl: &mut Workload,
    unfinished_slices: &[&Workload],
) -> Result<(), JobFrameworkError> {
    let own_name = wl.metadata.name.clone().unwrap_or_default();
    let annotations = wl.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(label::ELASTIC_JOB.to_string(), "true".to_string());
    match unfinished_slices {
        [] => {
            annotations.insert(label::WORKLOAD_SLICE_NAME.to_string(), own_name);
        }
        [old] => {
            let old_name = old.metadata.name.clone().unwrap_or_default();
            let key = format!(
                "{}/{}",
                old.metadata.namespace.as_deref().unwrap_or_default(),
                old_name
            );
            annotations.insert(label::WORKLOAD_SLICE_REPLACEMENT_FOR.to_string(), key);
            let origin = old
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(label::WORKLOAD_SLICE_NAME))
                .filter(|n| !n.is_empty())
                .cloned()
                .unwrap_or(old_name);
            annotations.insert(label::WORKLOAD_SLICE_NAME.to_string(), origin);
        }
        more => return Err(JobFrameworkError::SliceCount(more.len())),
    }
    Ok(())
}

fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    b.is_empty()
        || (b.len() <= 63
            && alnum(&b[0])
            && alnum(&b[b.len() - 1])
            && b.iter().all(|c| alnum(c) || matches!(c, b'-' | b'_' | b'.')))
}
