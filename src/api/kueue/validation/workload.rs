//! Workload and WorkloadPriorityClass rules, including what may change while quota is reserved.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::Container;

use super::{IMMUTABLE_MSG, names, non_negative, parse_quantity, too_few, too_many, validate_tolerations};
use crate::api::kueue::common::ResourceList;
use crate::api::kueue::constants::{ANNOTATION_UPGRADE_CLAIM, label};
use crate::api::kueue::priority_class::WorkloadPriorityClass;
use crate::api::kueue::workload::{Admission, PodSet, PriorityClassGroup, PriorityClassKind, Workload};
use crate::api::quantity::resource_value;
use crate::api::validation::{ErrorType, FieldError, Path};

/// `spec.podSets` maxItems in Kueue v1beta2 (it was 8 in v1beta1).
pub const MAX_PODSETS: usize = 18;
const MAX_PREEMPTION_GATES: usize = 8;

pub fn validate_workload_priority_class(wpc: &WorkloadPriorityClass) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(d) = &wpc.spec.description
        && d.len() > 2048
    {
        errs.push(FieldError::new(
            "description",
            ErrorType::TooLong,
            "must have at most 2048 bytes",
        ));
    }
    errs
}

pub fn validate_workload(wl: &Workload) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &wl.spec;
    let path = Path::root("spec");
    let podsets_path = path.child("podSets");
    errs.extend(too_few(&podsets_path, spec.pod_sets.len(), 1));
    errs.extend(too_many(&podsets_path, spec.pod_sets.len(), MAX_PODSETS));
    let mut seen = HashSet::new();
    for (i, ps) in spec.pod_sets.iter().enumerate() {
        let p = podsets_path.index(i);
        if !seen.insert(ps.name()) {
            errs.push(FieldError::new(
                p.child("name").as_str(),
                ErrorType::Duplicate,
                format!("{:?}", ps.name()),
            ));
        }
        validate_podset(&p, ps, &mut errs);
    }
    let with_min = spec.pod_sets.iter().filter(|p| p.min_count.is_some()).count();
    if with_min > 1 {
        errs.push(FieldError::invalid(
            &podsets_path,
            format!("{with_min}: at most one podSet can use minCount"),
        ));
    }
    if with_min > 0 && is_elastic(wl) {
        errs.push(FieldError::invalid(
            &podsets_path,
            "partial admission and elastic job cannot be used together",
        ));
    }
    if let Some(q) = &spec.queue_name
        && !q.is_empty()
    {
        names::dns_subdomain(&path.child("queueName"), q, &mut errs);
    }
    if let Some(r) = &spec.priority_class_ref {
        let p = path.child("priorityClassRef");
        if spec.priority.is_none() {
            errs.push(FieldError::required(
                path.child("priority").as_str(),
                "priority should not be nil when priorityClassRef is set",
            ));
        }
        match (r.group, r.kind) {
            (PriorityClassGroup::Scheduling, PriorityClassKind::WorkloadPriorityClass) => {
                errs.push(FieldError::invalid(
                    p.child("kind").as_str(),
                    "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
                ))
            }
            (PriorityClassGroup::Kueue, PriorityClassKind::PriorityClass) => errs.push(FieldError::invalid(
                p.child("kind").as_str(),
                "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
            )),
            _ => {}
        }
        names::dns_subdomain(&p.child("name"), &r.name, &mut errs);
    }
    if let Some(s) = spec.maximum_execution_time_seconds
        && s < 1
    {
        errs.push(FieldError::invalid(
            path.child("maximumExecutionTimeSeconds").as_str(),
            format!("{s}: must be greater than or equal to 1"),
        ));
    }
    if let Some(gates) = &spec.preemption_gates {
        let p = path.child("preemptionGates");
        errs.extend(too_many(&p, gates.len(), MAX_PREEMPTION_GATES));
        let mut seen = HashSet::new();
        for (i, g) in gates.iter().enumerate() {
            if g.name.is_empty() || g.name.len() > 63 {
                errs.push(FieldError::invalid(
                    p.index(i).child("name").as_str(),
                    "must be 1 to 63 characters",
                ));
            }
            if !seen.insert(g.name.as_str()) {
                errs.push(FieldError::new(
                    p.index(i).child("name").as_str(),
                    ErrorType::Duplicate,
                    format!("{:?}", g.name),
                ));
            }
        }
    }
    validate_status(wl, &mut errs);
    errs
}

fn is_elastic(wl: &Workload) -> bool {
    wl.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(label::ELASTIC_JOB))
        .is_some_and(|v| v == "true")
}

fn validate_podset(p: &Path, ps: &PodSet, errs: &mut Vec<FieldError>) {
    if let Some(name) = &ps.name {
        names::dns_label(&p.child("name"), name, errs);
    }
    let count = ps.count();
    if count < 0 {
        errs.push(FieldError::invalid(
            p.child("count").as_str(),
            format!("{count}: must be greater than or equal to 0"),
        ));
    }
    if let Some(min) = ps.min_count {
        // Kueue v0.20 (kueue#14720) lowered the minimum from 1 to 0: a podset may be admitted with
        // no pods at all, as `count: 0` always could.
        if min < 0 {
            errs.push(FieldError::invalid(
                p.child("minCount").as_str(),
                format!("{min}: must be greater than or equal to 0"),
            ));
        }
        if min > count {
            errs.push(FieldError::invalid(
                p.child("minCount").as_str(),
                "minCount should be less or equal to count",
            ));
        }
    }
    let Some(pod) = &ps.template.spec else { return };
    let sp = p.child("template").child("spec");
    let containers = |list: &[Container], name: &str, errs: &mut Vec<FieldError>| {
        for (i, c) in list.iter().enumerate() {
            let rp = sp.child(name).index(i).child("resources");
            if let Some(r) = &c.resources {
                validate_resource_list(&rp.child("requests"), r.requests.as_ref(), errs);
                validate_resource_list(&rp.child("limits"), r.limits.as_ref(), errs);
            }
        }
    };
    containers(
        pod.init_containers.as_deref().unwrap_or_default(),
        "initContainers",
        errs,
    );
    containers(&pod.containers, "containers", errs);
    if let Some(r) = &pod.resources {
        validate_resource_list(
            &sp.child("resources").child("requests"),
            r.requests.as_ref(),
            errs,
        );
        validate_resource_list(&sp.child("resources").child("limits"), r.limits.as_ref(), errs);
    }
}

/// `pods` is Kueue's own accounting resource; quantities must be well-formed and non-negative.
fn validate_resource_list(path: &Path, list: Option<&ResourceList>, errs: &mut Vec<FieldError>) {
    for (name, q) in list.into_iter().flatten() {
        let p = path.key(name);
        if name == "pods" {
            errs.push(FieldError::invalid(
                p.as_str(),
                "pods: the key is reserved for internal kueue use",
            ));
        }
        non_negative(&p, q, errs);
    }
}

fn validate_status(wl: &Workload, errs: &mut Vec<FieldError>) {
    let Some(status) = &wl.status else { return };
    let path = Path::root("status");
    let podsets: BTreeMap<&str, &PodSet> = wl.spec.pod_sets.iter().map(|p| (p.name(), p)).collect();
    if wl.has_quota_reservation() {
        let ap = path.child("admission");
        match &status.admission {
            None => errs.push(FieldError::required(
                ap.as_str(),
                "must be set while the QuotaReserved condition is true",
            )),
            Some(a) => validate_admission(&ap, a, wl.spec.pod_sets.len(), &podsets, errs),
        }
    }
    for (i, c) in status.conditions.iter().enumerate() {
        let cp = path.child("conditions").index(i);
        if !matches!(c.status.as_str(), "True" | "False" | "Unknown") {
            errs.push(FieldError::new(
                cp.child("status").as_str(),
                ErrorType::NotSupported,
                "supported values: \"False\", \"True\", \"Unknown\"",
            ));
        }
        if c.reason.is_empty() {
            errs.push(FieldError::required(cp.child("reason").as_str(), "must be set"));
        }
    }
    for rp in &status.reclaimable_pods {
        let p = path.child("reclaimablePods").key(&rp.name);
        match podsets.get(rp.name.as_str()) {
            None => errs.push(FieldError::new(
                p.child("name").as_str(),
                ErrorType::NotSupported,
                format!("{:?}: not a podSet of this workload", rp.name),
            )),
            Some(ps) if rp.count > ps.count() => errs.push(FieldError::invalid(
                p.child("count").as_str(),
                format!("{}: should be less or equal to {}", rp.count, ps.count()),
            )),
            Some(_) => {}
        }
    }
    for (i, check) in status.admission_checks.iter().enumerate() {
        for (j, u) in check.pod_set_updates.iter().enumerate() {
            let p = path
                .child("admissionChecks")
                .index(i)
                .child("podSetUpdates")
                .index(j);
            if !podsets.contains_key(u.name.as_str()) {
                errs.push(FieldError::new(
                    p.child("name").as_str(),
                    ErrorType::NotSupported,
                    format!("{:?}: not a podSet of this workload", u.name),
                ));
            }
            validate_tolerations(&p.child("tolerations"), &u.tolerations, errs);
            names::labels(&p.child("nodeSelector"), &u.node_selector, errs);
            names::labels(&p.child("labels"), &u.labels, errs);
        }
    }
}

fn validate_admission(
    path: &Path,
    a: &Admission,
    n_podsets: usize,
    podsets: &BTreeMap<&str, &PodSet>,
    errs: &mut Vec<FieldError>,
) {
    names::dns_subdomain(&path.child("clusterQueue"), &a.cluster_queue, errs);
    let pp = path.child("podSetAssignments");
    if a.pod_set_assignments.len() != n_podsets {
        errs.push(FieldError::invalid(
            pp.as_str(),
            "podSetAssignments must have the same number of podSets as the spec",
        ));
    }
    for (i, psa) in a.pod_set_assignments.iter().enumerate() {
        let p = pp.index(i);
        if !podsets.contains_key(psa.name.as_str()) {
            errs.push(FieldError::invalid(
                p.child("name").as_str(),
                format!("{:?}: not found among the podSets", psa.name),
            ));
        }
        let count = psa.count.unwrap_or(0);
        for (res, q) in &psa.resource_usage {
            let up = p.child("resourceUsage").key(res);
            if let Some(v) = parse_quantity(&up, q, errs)
                && count > 0
                && resource_value(res, &v) % i64::from(count) != 0
            {
                errs.push(FieldError::invalid(
                    up.as_str(),
                    format!("{}: is not a multiple of {count}", q.0),
                ));
            }
        }
    }
}

pub fn validate_workload_update(old: &Workload, new: &Workload) -> Vec<FieldError> {
    let mut errs = validate_workload(new);
    let spec = Path::root("spec");
    let old_reserved = old.has_quota_reservation();
    let both_reserved = old_reserved && new.has_quota_reservation();
    if old_reserved {
        validate_immutable_podsets(&spec.child("podSets"), old, new, &mut errs);
        let (o, n) = (&old.spec.priority_class_ref, &new.spec.priority_class_ref);
        let moved = match (o, n) {
            (None, None) => false,
            (Some(o), Some(n)) => {
                o.group != n.group
                    || o.kind != n.kind
                    || (n.group == PriorityClassGroup::Scheduling && o.name != n.name)
            }
            _ => true,
        };
        if moved {
            errs.push(FieldError::invalid(
                spec.child("priorityClassRef").as_str(),
                "priorityClassRef is immutable while workload quota reserved",
            ));
        }
    }
    if both_reserved && old.spec.queue_name != new.spec.queue_name {
        errs.push(FieldError::invalid(
            spec.child("queueName").as_str(),
            "queueName is immutable while workload quota reserved",
        ));
    }
    if old.is_admitted()
        && new.is_admitted()
        && old.spec.maximum_execution_time_seconds.unwrap_or(0)
            != new.spec.maximum_execution_time_seconds.unwrap_or(0)
    {
        errs.push(FieldError::invalid(
            spec.child("maximumExecutionTimeSeconds").as_str(),
            "maximumExecutionTimeSeconds is immutable while workload quota reserved",
        ));
    }
    // Admission may be set or cleared, never changed in place (topology details may be filled in).
    if let (Some(o), Some(n)) = (old.admission(), new.admission()) {
        let strip = |a: &Admission| {
            let mut a = a.clone();
            for p in &mut a.pod_set_assignments {
                p.topology_assignment = None;
                p.delayed_topology_request = None;
            }
            a
        };
        if strip(o) != strip(n) {
            errs.push(FieldError::invalid("status.admission", IMMUTABLE_MSG));
        }
    }
    if both_reserved {
        validate_reclaimable_pods_update(old, new, &mut errs);
    }
    // The banker's claim is the job controller's, from the job: it may go when the upgrade ends,
    // never be added or changed (a lower claim would let an unsafe upgrade in).
    let claim = |w: &Workload| {
        w.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_UPGRADE_CLAIM))
            .cloned()
    };
    if let Some(n) = claim(new)
        && claim(old) != Some(n)
    {
        let path = format!("metadata.annotations[{ANNOTATION_UPGRADE_CLAIM}]");
        errs.push(FieldError::invalid(
            path.as_str(),
            "may be removed, never added or changed",
        ));
    }
    errs
}

/// PodSets are frozen while quota is reserved; an elastic workload may still scale a podset down.
fn validate_immutable_podsets(path: &Path, old: &Workload, new: &Workload, errs: &mut Vec<FieldError>) {
    let (o, n) = (&old.spec.pod_sets, &new.spec.pod_sets);
    if o.len() != n.len() {
        errs.push(FieldError::invalid(path, IMMUTABLE_MSG));
        return;
    }
    let elastic = is_elastic(new);
    for (i, (a, b)) in o.iter().zip(n).enumerate() {
        let mut b = b.clone();
        if elastic && b.count() < a.count() {
            b.count = a.count;
        }
        if *a != b {
            errs.push(FieldError::invalid(path.index(i).as_str(), IMMUTABLE_MSG));
        }
    }
}

/// While quota is reserved, reclaimable counts only grow (except for podsets that scaled down).
fn validate_reclaimable_pods_update(old: &Workload, new: &Workload, errs: &mut Vec<FieldError>) {
    let (Some(os), Some(ns)) = (&old.status, &new.status) else {
        return;
    };
    let path = Path::root("status").child("reclaimablePods");
    let scaled_down = |name: &str| {
        let count = |w: &Workload| {
            w.spec
                .pod_sets
                .iter()
                .find(|p| p.name() == name)
                .map(PodSet::count)
        };
        matches!((count(old), count(new)), (Some(a), Some(b)) if b < a)
    };
    for o in &os.reclaimable_pods {
        match ns.reclaimable_pods.iter().find(|n| n.name == o.name) {
            Some(n) if n.count < o.count && !scaled_down(&n.name) => {
                errs.push(FieldError::invalid(
                    path.key(&n.name).child("count").as_str(),
                    format!("{}: cannot be less than {}", n.count, o.count),
                ));
            }
            None if !scaled_down(&o.name) => errs.push(FieldError::required(
                path.key(&o.name).as_str(),
                "cannot be removed while quota is reserved",
            )),
            _ => {}
        }
    }
}
