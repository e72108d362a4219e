//! Conversions from Kubernetes types into the admission core's model. Invalid input (a
//! quantity that does not parse, an unknown operator) gives an error naming the field.

use k8s_openapi::api::core::v1::{PodTemplateSpec, Taint as K8sTaint, Toleration as K8sToleration};

use super::QueueError;
use super::amount::Amount;
use super::model::{
    Admission, BorrowWithinCohort, BorrowWithinCohortPolicy, ClusterQueueModel, CohortModel, FairWeight,
    FlavorFungibility, FlavorModel, FlavorQuotas, FungibilityPolicy, FungibilityPreference, LabelSelector,
    PodSetAssignment, PreemptionPolicy, QueueingStrategy, ReclaimWithinCohort, ResourceGroup, ResourceQuota,
    StopPolicy, UpgradeClaim, WithinClusterQueue, WorkloadKey, WorkloadModel,
};
use super::model::{PodSetModel, Requirement, SelectorOp, Taint, TaintEffect, Toleration};
use super::requests::pod_requests;
use super::tas::{Placement, TasCluster, TasNode, TopologyRequest};
use crate::api::kueue;
use crate::api::quantity::{Quantity, resource_value};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as K8sLabelSelector;
use std::collections::BTreeMap;

fn effect(field: &str, e: &str) -> Result<TaintEffect, QueueError> {
    match e {
        "NoSchedule" => Ok(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Ok(TaintEffect::PreferNoSchedule),
        "NoExecute" => Ok(TaintEffect::NoExecute),
        other => Err(QueueError::invalid(
            field,
            format!("unknown taint effect {other:?}"),
        )),
    }
}

pub fn toleration(field: &str, t: &K8sToleration) -> Result<Toleration, QueueError> {
    let exists = match t.operator.as_deref() {
        None | Some("Equal") => false,
        Some("Exists") => true,
        Some(other) => {
            return Err(QueueError::invalid(
                format!("{field}.operator"),
                format!("unknown operator {other:?}"),
            ));
        }
    };
    let effect = match t.effect.as_deref() {
        None | Some("") => None,
        Some(e) => Some(effect(&format!("{field}.effect"), e)?),
    };
    Ok(Toleration {
        key: t.key.clone().unwrap_or_default(),
        exists,
        value: t.value.clone().unwrap_or_default(),
        effect,
    })
}

pub fn taint(field: &str, t: &K8sTaint) -> Result<Taint, QueueError> {
    Ok(Taint {
        key: t.key.clone(),
        value: t.value.clone().unwrap_or_default(),
        effect: effect(&format!("{field}.effect"), &t.effect)?,
    })
}

fn selector_op(field: &str, op: &str) -> Result<SelectorOp, QueueError> {
    Ok(match op {
        "In" => SelectorOp::In,
        "NotIn" => SelectorOp::NotIn,
        "Exists" => SelectorOp::Exists,
        "DoesNotExist" => SelectorOp::DoesNotExist,
        "Gt" => SelectorOp::Gt,
        "Lt" => SelectorOp::Lt,
        other => {
            return Err(QueueError::invalid(field, format!("unknown operator {other:?}")));
        }
    })
}

/// A podset from its pod template: per-pod requests (see `requests.rs`), node selector, required
/// node affinity and tolerations. `field` names the podset in errors, e.g. `spec.podSets[0]`.
pub fn podset_from_template(
    field: &str,
    name: &str,
    count: i64,
    template: &PodTemplateSpec,
) -> Result<PodSetModel, QueueError> {
    let spec_field = format!("{field}.template.spec");
    let Some(spec) = template.spec.as_ref() else {
        return Err(QueueError::invalid(spec_field, "pod template has no spec"));
    };
    let mut ps = PodSetModel {
        name: name.to_string(),
        count,
        requests: pod_requests(&spec_field, spec)?,
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        ..Default::default()
    };
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default();
    for (ti, term) in terms.iter().enumerate() {
        let mut reqs = Vec::new();
        for (ri, r) in term.match_expressions.iter().flatten().enumerate() {
            let f = format!(
                "{spec_field}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{ti}].matchExpressions[{ri}].operator"
            );
            reqs.push(Requirement {
                key: r.key.clone(),
                op: selector_op(&f, &r.operator)?,
                values: r.values.clone().unwrap_or_default(),
            });
        }
        ps.affinity_terms.push(reqs);
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        ps.tolerations
            .push(toleration(&format!("{spec_field}.tolerations[{i}]"), t)?);
    }
    Ok(ps)
}

// ---- Kueue API types -> model ----
fn amount(field: &str, resource: &str, q: &K8sQuantity) -> Result<Amount, QueueError> {
    let parsed = non_negative(field, q, "must be non-negative")?;
    Ok(Amount(resource_value(resource, &parsed)))
}

/// `q` parsed, refused with `rule` when negative.
fn non_negative(field: &str, q: &K8sQuantity, rule: &str) -> Result<Quantity, QueueError> {
    let invalid = |message: String| QueueError::InvalidQuantity {
        field: field.to_string(),
        value: q.0.clone(),
        message,
    };
    let parsed = Quantity::try_from(q).map_err(|e| invalid(e.to_string()))?;
    if parsed.is_negative() {
        return Err(invalid(rule.into()));
    }
    Ok(parsed)
}

/// `spec.fairSharing.weight`, Kueue's default 1 when absent.
fn fair_weight(fs: Option<&kueue::FairSharing>) -> Result<FairWeight, QueueError> {
    let Some(q) = fs.and_then(|f| f.weight.as_ref()) else {
        return Ok(FairWeight::default());
    };
    let parsed = non_negative("spec.fairSharing.weight", q, "must be greater than or equal to 0")?;
    Ok(FairWeight(parsed.nano_value()))
}

fn groups(field: &str, gs: &[kueue::ResourceGroup]) -> Result<Vec<ResourceGroup>, QueueError> {
    let mut out = Vec::new();
    for (gi, g) in gs.iter().enumerate() {
        let mut flavors = Vec::new();
        for (fi, f) in g.flavors.iter().enumerate() {
            let mut resources = BTreeMap::new();
            for (ri, r) in f.resources.iter().enumerate() {
                let p = format!("{field}.resourceGroups[{gi}].flavors[{fi}].resources[{ri}]");
                let q = ResourceQuota {
                    nominal: amount(&format!("{p}.nominalQuota"), &r.name, &r.nominal_quota)?,
                    borrowing_limit: r
                        .borrowing_limit
                        .as_ref()
                        .map(|b| amount(&format!("{p}.borrowingLimit"), &r.name, b))
                        .transpose()?,
                    lending_limit: r
                        .lending_limit
                        .as_ref()
                        .map(|l| amount(&format!("{p}.lendingLimit"), &r.name, l))
                        .transpose()?,
                };
                resources.insert(r.name.clone(), q);
            }
            flavors.push(FlavorQuotas {
                name: f.name.clone(),
                resources,
            });
        }
        out.push(ResourceGroup {
            covered_resources: g.covered_resources.clone(),
            flavors,
        });
    }
    Ok(out)
}

fn label_selector(field: &str, s: &K8sLabelSelector) -> Result<LabelSelector, QueueError> {
    let mut out = LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions: Vec::new(),
    };
    for (i, e) in s.match_expressions.iter().flatten().enumerate() {
        let op = match e.operator.as_str() {
            "In" => SelectorOp::In,
            "NotIn" => SelectorOp::NotIn,
            "Exists" => SelectorOp::Exists,
            "DoesNotExist" => SelectorOp::DoesNotExist,
            other => {
                return Err(QueueError::invalid(
                    format!("{field}.matchExpressions[{i}].operator"),
                    format!("unknown operator {other:?}"),
                ));
            }
        };
        out.match_expressions.push(Requirement {
            key: e.key.clone(),
            op,
            values: e.values.clone().unwrap_or_default(),
        });
    }
    Ok(out)
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Result<String, QueueError> {
    meta.name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| QueueError::invalid("metadata.name", "required"))
}

impl TryFrom<&kueue::ClusterQueue> for ClusterQueueModel {
    type Error = QueueError;
    fn try_from(cq: &kueue::ClusterQueue) -> Result<Self, QueueError> {
        let s = &cq.spec;
        let pol = s.preemption.clone().unwrap_or_default();
        let within = match pol.within_cluster_queue {
            None | Some(kueue::PreemptionPolicy::Never) => WithinClusterQueue::Never,
            Some(kueue::PreemptionPolicy::LowerPriority) => WithinClusterQueue::LowerPriority,
            Some(kueue::PreemptionPolicy::LowerOrNewerEqualPriority) => {
                WithinClusterQueue::LowerOrNewerEqualPriority
            }
            Some(kueue::PreemptionPolicy::Any) => {
                return Err(QueueError::invalid(
                    "spec.preemption.withinClusterQueue",
                    "Any is not allowed here",
                ));
            }
        };
        let reclaim = match pol.reclaim_within_cohort {
            None | Some(kueue::PreemptionPolicy::Never) => ReclaimWithinCohort::Never,
            Some(kueue::PreemptionPolicy::LowerPriority) => ReclaimWithinCohort::LowerPriority,
            Some(kueue::PreemptionPolicy::Any) => ReclaimWithinCohort::Any,
            Some(kueue::PreemptionPolicy::LowerOrNewerEqualPriority) => {
                return Err(QueueError::invalid(
                    "spec.preemption.reclaimWithinCohort",
                    "LowerOrNewerEqualPriority is not allowed here",
                ));
            }
        };
        let borrow = pol.borrow_within_cohort.clone().unwrap_or_default();
        let fung = s.flavor_fungibility.clone().unwrap_or_default();
        let policy = |p: Option<kueue::FlavorFungibilityPolicy>, default| match p {
            None => default,
            Some(kueue::FlavorFungibilityPolicy::MayStopSearch) => FungibilityPolicy::MayStopSearch,
            Some(kueue::FlavorFungibilityPolicy::TryNextFlavor) => FungibilityPolicy::TryNextFlavor,
        };
        Ok(ClusterQueueModel {
            name: name_of(&cq.metadata)?,
            cohort: s.cohort_name.clone().filter(|c| !c.is_empty()),
            resource_groups: groups("spec", s.resource_groups.as_deref().unwrap_or_default())?,
            queueing_strategy: match s.queueing_strategy {
                Some(kueue::QueueingStrategy::StrictFIFO) => QueueingStrategy::StrictFifo,
                _ => QueueingStrategy::BestEffortFifo,
            },
            preemption: PreemptionPolicy {
                within_cluster_queue: within,
                reclaim_within_cohort: reclaim,
                borrow_within_cohort: BorrowWithinCohort {
                    policy: match borrow.policy {
                        Some(kueue::BorrowWithinCohortPolicy::LowerPriority) => {
                            BorrowWithinCohortPolicy::LowerPriority
                        }
                        _ => BorrowWithinCohortPolicy::Never,
                    },
                    max_priority_threshold: borrow.max_priority_threshold,
                },
            },
            flavor_fungibility: FlavorFungibility {
                when_can_borrow: policy(fung.when_can_borrow, FungibilityPolicy::MayStopSearch),
                when_can_preempt: policy(fung.when_can_preempt, FungibilityPolicy::TryNextFlavor),
                preference: match fung.preference {
                    Some(kueue::FlavorFungibilityPreference::PreemptionOverBorrowing) => {
                        FungibilityPreference::PreemptionOverBorrowing
                    }
                    _ => FungibilityPreference::BorrowingOverPreemption,
                },
            },
            stop_policy: match s.stop_policy {
                Some(kueue::StopPolicy::Hold) => StopPolicy::Hold,
                Some(kueue::StopPolicy::HoldAndDrain) => StopPolicy::HoldAndDrain,
                _ => StopPolicy::None,
            },
            namespace_selector: s
                .namespace_selector
                .as_ref()
                .map(|n| label_selector("spec.namespaceSelector", n))
                .transpose()?,
            terminating: cq.metadata.deletion_timestamp.is_some(),
            fair_weight: fair_weight(s.fair_sharing.as_ref())?,
            admission_fair_sharing: s
                .admission_scope
                .as_ref()
                .is_some_and(|a| a.admission_mode == kueue::AdmissionMode::UsageBasedAdmissionFairSharing),
        })
    }
}

impl TryFrom<&kueue::Cohort> for CohortModel {
    type Error = QueueError;
    fn try_from(c: &kueue::Cohort) -> Result<Self, QueueError> {
        Ok(CohortModel {
            name: name_of(&c.metadata)?,
            parent: c.spec.parent_name.clone().filter(|p| !p.is_empty()),
            resource_groups: groups("spec", c.spec.resource_groups.as_deref().unwrap_or_default())?,
            fair_weight: fair_weight(c.spec.fair_sharing.as_ref())?,
        })
    }
}

impl TryFrom<&kueue::ResourceFlavor> for FlavorModel {
    type Error = QueueError;
    fn try_from(f: &kueue::ResourceFlavor) -> Result<Self, QueueError> {
        let spec = f.spec.clone().unwrap_or_default();
        let mut out = FlavorModel {
            name: name_of(&f.metadata)?,
            node_labels: spec.node_labels.unwrap_or_default(),
            topology: spec.topology_name.clone(),
            ..Default::default()
        };
        for (i, t) in spec.node_taints.iter().flatten().enumerate() {
            out.node_taints.push(taint(&format!("spec.nodeTaints[{i}]"), t)?);
        }
        for (i, t) in spec.tolerations.iter().flatten().enumerate() {
            out.tolerations
                .push(toleration(&format!("spec.tolerations[{i}]"), t)?);
        }
        Ok(out)
    }
}

/// The model of a Workload. `cluster_queue` is what its LocalQueue points to and
/// `namespace_labels` the labels of its namespace (both resolved by the caller).
pub fn workload_model(
    w: &kueue::Workload,
    cluster_queue: &str,
    namespace_labels: BTreeMap<String, String>,
) -> Result<WorkloadModel, QueueError> {
    let name = name_of(&w.metadata)?;
    let namespace = w.metadata.namespace.clone().unwrap_or_default();
    let mut podsets = Vec::new();
    for (i, ps) in w.spec.pod_sets.iter().enumerate() {
        let ps_name = ps
            .name
            .clone()
            .unwrap_or_else(|| kueue::constants::DEFAULT_PODSET_NAME.to_string());
        let count = i64::from(ps.count.unwrap_or(1));
        let mut model = podset_from_template(&format!("spec.podSets[{i}]"), &ps_name, count, &ps.template)?;
        model.min_count = ps.min_count.map(i64::from);
        model.topology = ps.topology_request.as_ref().map(topology_request);
        podsets.push(model);
    }
    let replacement_for = w
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(kueue::constants::label::WORKLOAD_SLICE_REPLACEMENT_FOR))
        .map(|v| match v.split_once('/') {
            Some((ns, n)) => WorkloadKey::new(ns, n),
            None => WorkloadKey::new(namespace.clone(), v.clone()),
        });
    // Only a replacement slice has pods running before its admission (those of the slice it replaces).
    if replacement_for.is_some() {
        for (i, (ps, model)) in w.spec.pod_sets.iter().zip(podsets.iter_mut()).enumerate() {
            model.running = running(i, ps, model.count)?;
        }
    }
    Ok(WorkloadModel {
        key: WorkloadKey::new(namespace, name),
        uid: w.metadata.uid.clone().unwrap_or_default(),
        job_uid: w
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(kueue::constants::label::JOB_UID))
            .cloned(),
        cluster_queue: cluster_queue.to_string(),
        local_queue: w.spec.queue_name.clone().unwrap_or_default(),
        priority: w.spec.priority.unwrap_or(0),
        timestamp: w
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_millisecond()),
        podsets,
        namespace_labels,
        replacement_for,
        upgrade: upgrade_claim(w)?,
    })
}

/// A Node as TAS sees it: labels, allocatable, taints, and whether new pods may land (Ready and
/// not cordoned).
pub fn tas_node(n: &k8s_openapi::api::core::v1::Node) -> Result<TasNode, QueueError> {
    let mut allocatable = BTreeMap::new();
    let status = n.status.as_ref();
    for (r, q) in status.and_then(|s| s.allocatable.as_ref()).into_iter().flatten() {
        allocatable.insert(r.clone(), amount(&format!("status.allocatable[{r}]"), r, q)?);
    }
    let spec = n.spec.as_ref();
    let mut taints = Vec::new();
    for (i, t) in spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        taints.push(taint(&format!("spec.taints[{i}]"), t)?);
    }
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let cordoned = spec.and_then(|s| s.unschedulable).unwrap_or(false);
    Ok(TasNode {
        name: n.metadata.name.clone().unwrap_or_default(),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        allocatable,
        taints,
        schedulable: ready && !cordoned,
    })
}

/// What TAS knows of the cluster: each Topology's levels by name, and the Nodes. A Node that does not
/// convert is left out and returned with its name and why.
pub fn tas_cluster<'a>(
    topologies: impl IntoIterator<Item = &'a kueue::Topology>,
    nodes: impl IntoIterator<Item = &'a k8s_openapi::api::core::v1::Node>,
) -> (TasCluster, Vec<(String, QueueError)>) {
    let topologies = topologies
        .into_iter()
        .map(|t| {
            let levels = t.spec.levels.iter().map(|l| l.node_label.clone()).collect();
            (t.metadata.name.clone().unwrap_or_default(), levels)
        })
        .collect();
    let mut ok = Vec::new();
    let mut failed = Vec::new();
    for n in nodes {
        match tas_node(n) {
            Ok(node) => ok.push(node),
            Err(e) => failed.push((n.metadata.name.clone().unwrap_or_default(), e)),
        }
    }
    (TasCluster::new(topologies, ok), failed)
}

/// The running pods a replacement slice's podset names (`ANNOTATION_TOPOLOGY_RUNNING`), if any.
fn running(i: usize, ps: &kueue::PodSet, count: i64) -> Result<Option<Placement>, QueueError> {
    let key = super::topology::ANNOTATION_TOPOLOGY_RUNNING;
    let Some(value) = ps
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(key))
    else {
        return Ok(None);
    };
    super::topology::parse_running(value, count)
        .map(Some)
        .map_err(|m| {
            QueueError::invalid(
                format!("spec.podSets[{i}].template.metadata.annotations[{key}]"),
                m,
            )
        })
}

/// The model of a podset's `topologyRequest` (the parts placement reads).
fn topology_request(r: &kueue::PodSetTopologyRequest) -> TopologyRequest {
    TopologyRequest {
        required: r.required.clone(),
        preferred: r.preferred.clone(),
        unconstrained: r.unconstrained == Some(true),
        slice_topology: r.pod_set_slice_required_topology.clone(),
        slice_size: r.pod_set_slice_size,
    }
}

/// The claim an upgrade's slice carries (`quotagate.io/upgrade-claim`), if any.
pub fn upgrade_claim(w: &kueue::Workload) -> Result<Option<UpgradeClaim>, QueueError> {
    let key = kueue::constants::ANNOTATION_UPGRADE_CLAIM;
    let Some(raw) = w.metadata.annotations.as_ref().and_then(|a| a.get(key)) else {
        return Ok(None);
    };
    let field = format!("metadata.annotations[{key}]");
    let parsed: BTreeMap<String, BTreeMap<String, i64>> = serde_json::from_str(raw).map_err(|e| {
        QueueError::invalid(
            &field,
            format!("not a claim ({{\"peak\":{{..}},\"done\":{{..}}}}): {e}"),
        )
    })?;
    let mut claim = UpgradeClaim::default();
    for (part, amounts) in parsed {
        let into = match part.as_str() {
            "peak" => &mut claim.peak,
            "done" => &mut claim.done,
            other => {
                return Err(QueueError::invalid(
                    &field,
                    format!("unknown part {other:?}: want peak and done"),
                ));
            }
        };
        for (r, v) in amounts {
            if v < 0 {
                return Err(QueueError::invalid(
                    format!("{field}.{part}.{r}"),
                    "must be non-negative",
                ));
            }
            into.insert(r, Amount(v));
        }
    }
    Ok(Some(claim))
}

/// The annotation value for `claim` (the inverse of `upgrade_claim`).
pub fn upgrade_claim_annotation(claim: &UpgradeClaim) -> String {
    let part = |m: &BTreeMap<String, Amount>| {
        m.iter()
            .map(|(r, v)| (r.clone(), v.0))
            .collect::<BTreeMap<_, _>>()
    };
    serde_json::json!({"peak": part(&claim.peak), "done": part(&claim.done)}).to_string()
}

/// The model of `status.admission`.
pub fn admission_model(a: &kueue::Admission) -> Result<Admission, QueueError> {
    let mut out = Admission {
        cluster_queue: a.cluster_queue.clone(),
        pod_set_assignments: Vec::new(),
    };
    for (i, psa) in a.pod_set_assignments.iter().enumerate() {
        let mut usage = BTreeMap::new();
        for (r, q) in &psa.resource_usage {
            usage.insert(
                r.clone(),
                amount(
                    &format!("status.admission.podSetAssignments[{i}].resourceUsage[{r}]"),
                    r,
                    q,
                )?,
            );
        }
        let count = i64::from(psa.count.unwrap_or(0));
        // Bounded before decoding: a status claiming more domains than pods (each domain holds one)
        // is not decoded. Its quota still counts; only the placement is dropped, with the cause.
        let topology = psa.topology_assignment.as_ref().and_then(|ta| {
            match super::topology::check_domain_count(ta, count) {
                Ok(()) => Some(Placement {
                    levels: ta.levels.clone(),
                    domains: kueue::tas::decode_assignment(ta),
                }),
                Err(e) => {
                    tracing::warn!(
                        field = %format!("status.admission.podSetAssignments[{i}].topologyAssignment"),
                        error = %e,
                        "topology assignment not decoded; its quota is counted without a placement"
                    );
                    None
                }
            }
        });
        out.pod_set_assignments.push(PodSetAssignment {
            name: psa.name.clone(),
            flavors: psa.flavors.clone(),
            resource_usage: usage,
            count,
            topology,
        });
    }
    Ok(out)
}

/// `status.admission` from a model admission (quantities printed as Kueue does).
pub fn admission_api(a: &Admission) -> kueue::Admission {
    kueue::Admission {
        cluster_queue: a.cluster_queue.clone(),
        pod_set_assignments: a
            .pod_set_assignments
            .iter()
            .map(|p| kueue::PodSetAssignment {
                name: p.name.clone(),
                flavors: p.flavors.clone(),
                resource_usage: p
                    .resource_usage
                    .iter()
                    .map(|(r, v)| (r.clone(), crate::api::quantity::resource_quantity(r, v.0).into()))
                    .collect(),
                count: i32::try_from(p.count).ok(),
                topology_assignment: p
                    .topology
                    .as_ref()
                    .map(|t| kueue::tas::encode_assignment(&t.levels, &t.domains)),
                ..Default::default()
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec,
        ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn template(cpu: &str, op: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some([("cpu".to_string(), Quantity(cpu.to_string()))].into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                node_selector: Some([("instance".to_string(), "spot".to_string())].into()),
                affinity: Some(Affinity {
                    node_affinity: Some(NodeAffinity {
                        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                            node_selector_terms: vec![NodeSelectorTerm {
                                match_expressions: Some(vec![NodeSelectorRequirement {
                                    key: "zone".into(),
                                    operator: op.into(),
                                    values: Some(vec!["a".into()]),
                                }]),
                                ..Default::default()
                            }],
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                tolerations: Some(vec![K8sToleration {
                    key: Some("spot".into()),
                    operator: Some("Exists".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn podset_from_pod_template() {
        let ps = podset_from_template("spec.podSets[0]", "main", 3, &template("250m", "In")).unwrap();
        assert_eq!(ps.requests["cpu"].0, 250);
        assert_eq!(ps.total("cpu").0, 750);
        assert_eq!(ps.node_selector["instance"], "spot");
        assert_eq!(ps.affinity_terms[0][0].op, SelectorOp::In);
        assert!(ps.tolerations[0].exists);
    }

    #[test]
    fn errors_name_the_field() {
        let e = podset_from_template("spec.podSets[1]", "main", 1, &template("1x", "In")).unwrap_err();
        assert!(
            e.to_string()
                .contains("spec.podSets[1].template.spec.containers[0].resources.requests[cpu]"),
            "{e}"
        );
        let e = podset_from_template("spec.podSets[1]", "main", 1, &template("1", "Near")).unwrap_err();
        assert!(e.to_string().contains("matchExpressions[0].operator"), "{e}");
    }

    mod kueue_types {
        use super::super::*;
        use crate::api::kueue::{self, ClusterQueue, Cohort, ResourceFlavor, Workload};
        use crate::queue::{AdmissionCore, Amount, FlavorResource};

        fn load<T: serde::de::DeserializeOwned>(file: &str, kind: &str) -> T {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/manifests/kueue")
                .join(file);
            let text = std::fs::read_to_string(path).unwrap();
            let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
            let doc = docs.into_iter().find(|d| d["kind"] == kind).unwrap();
            serde_json::from_value(doc).unwrap()
        }

        #[test]
        fn real_manifest_admits_a_workload() {
            let cq: ClusterQueue = load("single-clusterqueue.yaml", "ClusterQueue");
            let rf: ResourceFlavor = load("single-clusterqueue.yaml", "ResourceFlavor");
            let cqm = ClusterQueueModel::try_from(&cq).unwrap();
            assert_eq!(
                cqm.resource_groups[0].flavors[0].resources["cpu"].nominal,
                Amount(9000)
            );
            assert_eq!(
                cqm.resource_groups[0].flavors[0].resources["memory"].nominal,
                Amount(36 << 30)
            );
            assert!(cqm.namespace_selector.is_some());
            let mut core = AdmissionCore::new();
            core.upsert_flavor(FlavorModel::try_from(&rf).unwrap());
            core.upsert_cluster_queue(cqm).unwrap();
            let w = Workload::build("job-1", "default")
                .queue("user-queue")
                .priority(3)
                .podset("main", 3, [("cpu", "1"), ("memory", "200Mi")])
                .annotation(
                    kueue::constants::label::WORKLOAD_SLICE_REPLACEMENT_FOR,
                    "default/job-0",
                )
                .build();
            let m = workload_model(&w, "cluster-queue", BTreeMap::new()).unwrap();
            assert_eq!(m.priority, 3);
            assert_eq!(m.replacement_for, Some(WorkloadKey::new("default", "job-0")));
            assert_eq!(m.podsets[0].total("cpu"), Amount(3000));
            core.add_workload(m).unwrap();
            let res = core.schedule_cycle(0);
            assert_eq!(res.admissions.len(), 1, "{:?}", res.pending);
            let api = admission_api(&res.admissions[0].admission);
            assert_eq!(api.pod_set_assignments[0].resource_usage["cpu"].0, "3");
            assert_eq!(api.pod_set_assignments[0].resource_usage["memory"].0, "600Mi");
            let back = admission_model(&api).unwrap();
            assert_eq!(back, res.admissions[0].admission);
            assert_eq!(
                core.cq_usage("cluster-queue")
                    .get(&FlavorResource::new("default-flavor", "memory")),
                Some(&Amount(600 << 20))
            );
        }

        #[test]
        fn policies_cohorts_and_flavors_convert() {
            let cq = ClusterQueue::build("cq")
                .cohort("org")
                .queueing_strategy(kueue::QueueingStrategy::StrictFIFO)
                .flavor_quotas(
                    kueue::FlavorQuotas::build("spot")
                        .resource_with_limits("cpu", "4", Some("2"), Some("1"))
                        .build(),
                )
                .preemption(kueue::ClusterQueuePreemption {
                    within_cluster_queue: Some(kueue::PreemptionPolicy::LowerOrNewerEqualPriority),
                    reclaim_within_cohort: Some(kueue::PreemptionPolicy::Any),
                    ..Default::default()
                })
                .stop_policy(kueue::StopPolicy::Hold)
                .build();
            let m = ClusterQueueModel::try_from(&cq).unwrap();
            assert_eq!(m.cohort.as_deref(), Some("org"));
            assert_eq!(m.queueing_strategy, QueueingStrategy::StrictFifo);
            assert_eq!(
                m.preemption.within_cluster_queue,
                WithinClusterQueue::LowerOrNewerEqualPriority
            );
            assert_eq!(m.preemption.reclaim_within_cohort, ReclaimWithinCohort::Any);
            assert_eq!(m.stop_policy, StopPolicy::Hold);
            let q = m.resource_groups[0].flavors[0].resources["cpu"];
            assert_eq!(
                (q.nominal, q.borrowing_limit, q.lending_limit),
                (Amount(4000), Some(Amount(2000)), Some(Amount(1000)))
            );
            let co = Cohort::build("team")
                .parent("org")
                .flavor("spot", [("cpu", "10")])
                .build();
            let cm = CohortModel::try_from(&co).unwrap();
            assert_eq!(cm.parent.as_deref(), Some("org"));
            let rf = ResourceFlavor::build("spot")
                .node_label("instance", "spot")
                .taint(K8sTaint {
                    key: "spot".into(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                })
                .build();
            let fm = FlavorModel::try_from(&rf).unwrap();
            assert_eq!(fm.node_taints[0].effect, TaintEffect::NoSchedule);
            assert_eq!(fm.node_labels["instance"], "spot");
        }

        #[test]
        fn invalid_quantities_name_the_field() {
            let cq = ClusterQueue::build("cq")
                .flavor("default", [("cpu", "ten")])
                .build();
            let e = ClusterQueueModel::try_from(&cq).unwrap_err();
            assert!(
                e.to_string()
                    .contains("spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"),
                "{e}"
            );
            let bad_policy = ClusterQueue::build("cq")
                .preemption(kueue::ClusterQueuePreemption {
                    within_cluster_queue: Some(kueue::PreemptionPolicy::Any),
                    ..Default::default()
                })
                .build();
            let e = ClusterQueueModel::try_from(&bad_policy).unwrap_err();
            assert!(
                e.to_string().contains("spec.preemption.withinClusterQueue"),
                "{e}"
            );
            let w = Workload::build("w", "ns")
                .podset("main", 1, [("cpu", "1q")])
                .build();
            let e = workload_model(&w, "cq", BTreeMap::new()).unwrap_err();
            assert!(
                e.to_string()
                    .contains("spec.podSets[0].template.spec.containers[0].resources.requests[cpu]"),
                "{e}"
            );
        }
    }

    /// A status claiming more topology domains than the podset has pods is not decoded (it would
    /// allocate one entry per claimed domain); its quota still counts.
    #[test]
    fn a_claimed_domain_count_is_not_allocated_and_the_quota_still_counts() {
        use crate::api::kueue::{
            TopologyAssignment, TopologyAssignmentSlice, TopologyAssignmentSliceLevelValues,
            TopologyAssignmentSlicePodCounts,
        };
        let slice = |domain_count| TopologyAssignmentSlice {
            domain_count,
            values_per_level: vec![TopologyAssignmentSliceLevelValues {
                universal: Some("h1".into()),
                individual: None,
            }],
            pod_counts: TopologyAssignmentSlicePodCounts {
                universal: Some(1),
                individual: Vec::new(),
            },
        };
        let admission = |domain_count| kueue::Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: vec![kueue::PodSetAssignment {
                name: "main".into(),
                flavors: [("cpu".to_string(), "tas".to_string())].into(),
                resource_usage: [("cpu".to_string(), Quantity("2".into()))].into(),
                count: Some(2),
                topology_assignment: Some(TopologyAssignment {
                    levels: vec!["kubernetes.io/hostname".into()],
                    slices: vec![slice(domain_count)],
                }),
                ..Default::default()
            }],
        };
        let fine = admission_model(&admission(2)).unwrap();
        let placed = fine.pod_set_assignments[0].topology.as_ref().expect("decoded");
        assert_eq!(placed.domains.len(), 2);
        let huge = admission_model(&admission(i32::MAX)).unwrap();
        let psa = &huge.pod_set_assignments[0];
        assert!(psa.topology.is_none(), "not decoded");
        assert_eq!(psa.resource_usage["cpu"], Amount(2000), "its quota counts");
    }
}
