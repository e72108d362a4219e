//! ResourceFlavor, ClusterQueue, Cohort and LocalQueue rules.

use std::collections::HashSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::{
    IMMUTABLE_MSG, names, non_negative, quoted, too_few, too_many, validate_fair_sharing, validate_taints,
    validate_tolerations,
};
use crate::api::kueue::cluster_queue::{
    BorrowWithinCohortPolicy, ClusterQueue, FlavorFungibilityPolicy, PreemptionPolicy,
};
use crate::api::kueue::cohort::Cohort;
use crate::api::kueue::common::ResourceGroup;
use crate::api::kueue::local_queue::LocalQueue;
use crate::api::kueue::resource_flavor::ResourceFlavor;
use crate::api::validation::{ErrorType, FieldError, Path};

const MAX_RESOURCE_GROUPS: usize = 16;
const MAX_COVERED_RESOURCES: usize = 64;
const MAX_FLAVORS_PER_GROUP: usize = 64;
const MAX_TOTAL_FLAVORS: usize = 256;
const MAX_TOTAL_COVERED: usize = 256;
const MAX_FLAVOR_RESOURCE_PAIRS: usize = 512;
const MAX_FLAVOR_ITEMS: usize = 8;

pub fn validate_resource_flavor(rf: &ResourceFlavor) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(spec) = &rf.spec else { return errs };
    let path = Path::root("spec");
    if let Some(labels) = &spec.node_labels {
        let p = path.child("nodeLabels");
        errs.extend(too_many(&p, labels.len(), MAX_FLAVOR_ITEMS));
        names::labels(&p, labels, &mut errs);
    }
    let taints = spec.node_taints();
    errs.extend(too_many(
        &path.child("nodeTaints"),
        taints.len(),
        MAX_FLAVOR_ITEMS,
    ));
    validate_taints(&path.child("nodeTaints"), taints, &mut errs);
    let tolerations = spec.tolerations();
    errs.extend(too_many(
        &path.child("tolerations"),
        tolerations.len(),
        MAX_FLAVOR_ITEMS,
    ));
    validate_tolerations(&path.child("tolerations"), tolerations, &mut errs);
    if let Some(topology) = &spec.topology_name {
        names::dns_subdomain(&path.child("topologyName"), topology, &mut errs);
        if spec.node_labels.as_ref().is_none_or(|l| l.is_empty()) {
            errs.push(FieldError::required(
                path.child("nodeLabels").as_str(),
                "at least one nodeLabel is required when topology is set",
            ));
        }
    }
    if let Some(weights) = &spec.resource_weights {
        let p = path.child("resourceWeights");
        errs.extend(too_many(&p, weights.len(), 16));
        for (name, w) in weights {
            names::qualified_name(&p, name, &mut errs);
            if let Some(v) = non_negative(&p.key(name), w, &mut errs)
                && v.is_zero()
            {
                errs.push(FieldError::invalid(
                    p.key(name).as_str(),
                    "must be greater than 0",
                ));
            }
        }
    }
    errs
}

/// A flavor's spec is frozen once it names a topology (Kueue CRD rule).
pub fn validate_resource_flavor_update(old: &ResourceFlavor, new: &ResourceFlavor) -> Vec<FieldError> {
    let mut errs = validate_resource_flavor(new);
    if old.spec().topology_name.is_some() && old.spec() != new.spec() {
        errs.push(FieldError::invalid(
            "spec",
            "resourceFlavorSpec are immutable when topologyName is set",
        ));
    }
    errs
}

pub fn validate_cluster_queue(cq: &ClusterQueue) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = &cq.spec;
    let path = Path::root("spec");
    if let Some(cohort) = spec.cohort() {
        names::dns_subdomain(&path.child("cohortName"), cohort, &mut errs);
    }
    let groups = spec.resource_groups();
    validate_resource_groups(
        &path.child("resourceGroups"),
        groups,
        Limits {
            has_parent: spec.cohort().is_some(),
            parent_word: "cohort",
            lending_within_nominal: true,
        },
        &mut errs,
    );
    if let Some(sel) = &spec.namespace_selector {
        validate_label_selector(&path.child("namespaceSelector"), sel, &mut errs);
    }
    if let Some(p) = &spec.preemption
        && p.reclaim_within_cohort() == PreemptionPolicy::Never
        && p.borrow_within_cohort
            .as_ref()
            .is_some_and(|b| b.policy() != BorrowWithinCohortPolicy::Never)
    {
        errs.push(FieldError::invalid(
            path.child("preemption").as_str(),
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        ));
    }
    if let Some(p) = &spec.preemption {
        let pp = path.child("preemption");
        if matches!(
            p.reclaim_within_cohort,
            Some(PreemptionPolicy::LowerOrNewerEqualPriority)
        ) {
            errs.push(FieldError::new(
                pp.child("reclaimWithinCohort").as_str(),
                ErrorType::NotSupported,
                "supported values: \"Never\", \"LowerPriority\", \"Any\"",
            ));
        }
        if matches!(p.within_cluster_queue, Some(PreemptionPolicy::Any)) {
            errs.push(FieldError::new(
                pp.child("withinClusterQueue").as_str(),
                ErrorType::NotSupported,
                "supported values: \"Never\", \"LowerPriority\", \"LowerOrNewerEqualPriority\"",
            ));
        }
    }
    if let Some(f) = &spec.flavor_fungibility
        && let Some(pref) = f.preference
        && (f.when_can_borrow() != FlavorFungibilityPolicy::TryNextFlavor
            || f.when_can_preempt() != FlavorFungibilityPolicy::TryNextFlavor)
    {
        errs.push(FieldError::invalid(
            path.child("flavorFungibility").child("preference").as_str(),
            format!("preference {pref:?} requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor"),
        ));
    }
    validate_fair_sharing(&path.child("fairSharing"), spec.fair_sharing.as_ref(), &mut errs);
    if let Some(strategy) = &spec.admission_checks_strategy {
        let p = path.child("admissionChecksStrategy").child("admissionChecks");
        let checks = &strategy.admission_checks;
        errs.extend(too_few(&p, checks.len(), 1));
        errs.extend(too_many(&p, checks.len(), 64));
        let flavors: HashSet<&str> = groups
            .iter()
            .flat_map(|g| g.flavors.iter().map(|f| f.name.as_str()))
            .collect();
        let mut seen = HashSet::new();
        for (i, check) in checks.iter().enumerate() {
            let cp = p.index(i);
            if check.name.is_empty() || check.name.len() > 316 {
                errs.push(FieldError::invalid(
                    cp.child("name").as_str(),
                    "must be 1 to 316 characters",
                ));
            }
            if !seen.insert(check.name.as_str()) {
                errs.push(FieldError::new(
                    cp.child("name").as_str(),
                    ErrorType::Duplicate,
                    format!("{:?}", check.name),
                ));
            }
            let on = check.on_flavors.as_deref().unwrap_or_default();
            errs.extend(too_many(&cp.child("onFlavors"), on.len(), 64));
            for (j, f) in on.iter().enumerate() {
                if !flavors.contains(f.as_str()) {
                    let mut allowed: Vec<&str> = flavors.iter().copied().collect();
                    allowed.sort();
                    errs.push(FieldError::new(
                        cp.child("onFlavors").index(j).as_str(),
                        ErrorType::NotSupported,
                        format!("{f:?}: supported values: {allowed:?}"),
                    ));
                }
            }
        }
    }
    errs
}

/// Same rules as on create; Kueue also freezes `concurrentAdmissionPolicy`.
pub fn validate_cluster_queue_update(old: &ClusterQueue, new: &ClusterQueue) -> Vec<FieldError> {
    let mut errs = validate_cluster_queue(new);
    if old.spec.concurrent_admission_policy != new.spec.concurrent_admission_policy {
        errs.push(FieldError::invalid(
            "spec.concurrentAdmissionPolicy",
            IMMUTABLE_MSG,
        ));
    }
    errs
}

pub fn validate_cohort(cohort: &Cohort) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = Path::root("spec");
    if let Some(parent) = cohort.spec.parent() {
        names::dns_subdomain(&path.child("parentName"), parent, &mut errs);
        if cohort.metadata.name.as_deref() == Some(parent) {
            errs.push(FieldError::invalid(
                path.child("parentName").as_str(),
                "a cohort cannot be its own parent",
            ));
        }
    }
    validate_fair_sharing(
        &path.child("fairSharing"),
        cohort.spec.fair_sharing.as_ref(),
        &mut errs,
    );
    // Kueue does not bound a cohort's lendingLimit by its nominal quota: a cohort lends its subtree's quota.
    let limits = Limits {
        has_parent: cohort.spec.parent().is_some(),
        parent_word: "parent",
        lending_within_nominal: false,
    };
    validate_resource_groups(
        &path.child("resourceGroups"),
        cohort.spec.resource_groups(),
        limits,
        &mut errs,
    );
    errs
}

pub fn validate_local_queue(lq: &LocalQueue) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = Path::root("spec");
    if let Some(cq) = &lq.spec.cluster_queue {
        names::dns_subdomain(&path.child("clusterQueue"), cq, &mut errs);
    }
    validate_fair_sharing(
        &path.child("fairSharing"),
        lq.spec.fair_sharing.as_ref(),
        &mut errs,
    );
    errs
}

pub fn validate_local_queue_update(old: &LocalQueue, new: &LocalQueue) -> Vec<FieldError> {
    let mut errs = validate_local_queue(new);
    if old.spec.cluster_queue != new.spec.cluster_queue {
        errs.push(FieldError::invalid("spec.clusterQueue", IMMUTABLE_MSG));
    }
    errs
}

/// Where borrowing and lending limits are allowed and how they are bounded.
#[derive(Clone, Copy)]
struct Limits {
    /// A ClusterQueue with a cohort, or a Cohort with a parent.
    has_parent: bool,
    /// "cohort" or "parent", for the message.
    parent_word: &'static str,
    lending_within_nominal: bool,
}

fn validate_resource_groups(
    path: &Path,
    groups: &[ResourceGroup],
    limits: Limits,
    errs: &mut Vec<FieldError>,
) {
    errs.extend(too_many(path, groups.len(), MAX_RESOURCE_GROUPS));
    let mut seen_resources = HashSet::new();
    let mut seen_flavors = HashSet::new();
    for (i, g) in groups.iter().enumerate() {
        let gp = path.index(i);
        let covered_path = gp.child("coveredResources");
        errs.extend(too_few(&covered_path, g.covered_resources.len(), 1));
        errs.extend(too_many(
            &covered_path,
            g.covered_resources.len(),
            MAX_COVERED_RESOURCES,
        ));
        for (j, r) in g.covered_resources.iter().enumerate() {
            names::qualified_name(&covered_path.index(j), r, errs);
            if !seen_resources.insert(r.as_str()) {
                errs.push(FieldError::new(
                    covered_path.index(j).as_str(),
                    ErrorType::Duplicate,
                    format!("{r:?}: a resource can be covered by only one resource group"),
                ));
            }
        }
        let flavors_path = gp.child("flavors");
        errs.extend(too_few(&flavors_path, g.flavors.len(), 1));
        errs.extend(too_many(&flavors_path, g.flavors.len(), MAX_FLAVORS_PER_GROUP));
        let pairs: usize = g.flavors.iter().map(|f| f.resources.len()).sum();
        if pairs > MAX_FLAVOR_RESOURCE_PAIRS {
            errs.push(FieldError::invalid(
                &gp,
                format!(
                    "number of flavor-resource combinations in a resourceGroup must be ≤ 512, got {pairs}"
                ),
            ));
        }
        for (j, f) in g.flavors.iter().enumerate() {
            let fp = flavors_path.index(j);
            names::dns_subdomain(&fp.child("name"), &f.name, errs);
            if !seen_flavors.insert(f.name.as_str()) {
                errs.push(FieldError::new(
                    fp.child("name").as_str(),
                    ErrorType::Duplicate,
                    format!("{:?}: flavor names must be unique across resource groups", f.name),
                ));
            }
            if f.resources.len() != g.covered_resources.len() {
                errs.push(FieldError::invalid(
                    fp.child("resources").as_str(),
                    "flavors must have the same number of resources as the coveredResources",
                ));
            }
            for (k, rq) in f.resources.iter().enumerate() {
                let rp = fp.child("resources").index(k);
                if g.covered_resources.get(k) != Some(&rq.name) {
                    errs.push(FieldError::invalid(
                        rp.child("name").as_str(),
                        format!("{:?}: must match the name in coveredResources", rq.name),
                    ));
                }
                let nominal = non_negative(&rp.child("nominalQuota"), &rq.nominal_quota, errs);
                for (field, limit) in [
                    ("borrowingLimit", &rq.borrowing_limit),
                    ("lendingLimit", &rq.lending_limit),
                ] {
                    let Some(limit) = limit else { continue };
                    let lp = rp.child(field);
                    let value = non_negative(&lp, limit, errs);
                    let shown = value.as_ref().map_or_else(|| format!("{:?}", limit.0), quoted);
                    if !limits.has_parent {
                        errs.push(FieldError::invalid(
                            lp.as_str(),
                            format!("{shown}: must be nil when {} is empty", limits.parent_word),
                        ));
                    }
                    if field == "lendingLimit"
                        && limits.lending_within_nominal
                        && let (Some(v), Some(n)) = (value, nominal)
                        && v > n
                    {
                        errs.push(FieldError::invalid(
                            lp.as_str(),
                            format!("{shown}: must be less than or equal to the nominalQuota"),
                        ));
                    }
                }
            }
        }
    }
    let total_flavors: usize = groups.iter().map(|g| g.flavors.len()).sum();
    if total_flavors > MAX_TOTAL_FLAVORS {
        errs.push(FieldError::invalid(
            path,
            format!("total number of flavors across all resourceGroups must be ≤ 256, got {total_flavors}"),
        ));
    }
    let total_covered: usize = groups.iter().map(|g| g.covered_resources.len()).sum();
    if total_covered > MAX_TOTAL_COVERED {
        errs.push(FieldError::invalid(path, format!("total number of covered resources across all resourceGroups must be ≤ 256, got {total_covered}")));
    }
}

/// The API server's LabelSelector rules: valid labels, and operators with the right values.
fn validate_label_selector(path: &Path, sel: &LabelSelector, errs: &mut Vec<FieldError>) {
    if let Some(m) = &sel.match_labels {
        names::labels(&path.child("matchLabels"), m, errs);
    }
    for (i, e) in sel.match_expressions.iter().flatten().enumerate() {
        let p = path.child("matchExpressions").index(i);
        names::qualified_name(&p.child("key"), &e.key, errs);
        let n = e.values.as_ref().map_or(0, Vec::len);
        match e.operator.as_str() {
            "In" | "NotIn" if n == 0 => errs.push(FieldError::required(
                p.child("values").as_str(),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if n > 0 => errs.push(FieldError::forbidden(
                p.child("values").as_str(),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.push(FieldError::invalid(
                p.child("operator").as_str(),
                format!("{other:?}: not a valid selector operator"),
            )),
        }
    }
}
