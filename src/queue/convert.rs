//! Conversions from Kubernetes types into the admission core's model. Invalid input (a
//! quantity that does not parse, an unknown operator) gives an error naming the field.

use k8s_openapi::api::core::v1::{PodTemplateSpec, Taint as K8sTaint, Toleration as K8sToleration};

use super::QueueError;
use super::model::{PodSetModel, Requirement, SelectorOp, Taint, TaintEffect, Toleration};
use super::requests::pod_requests;

fn effect(field: &str, e: &str) -> Result<TaintEffect, QueueError> {
    match e {
        "NoSchedule" => Ok(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Ok(TaintEffect::PreferNoSchedule),
        "NoExecute" => Ok(TaintEffect::NoExecute),
        other => Err(QueueError::invalid(field, format!("unknown taint effect {other:?}"))),
    }
}

pub fn toleration(field: &str, t: &K8sToleration) -> Result<Toleration, QueueError> {
    let exists = match t.operator.as_deref() {
        None | Some("Equal") => false,
        Some("Exists") => true,
        Some(other) => return Err(QueueError::invalid(format!("{field}.operator"), format!("unknown operator {other:?}"))),
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
        other => return Err(QueueError::invalid(field, format!("unknown operator {other:?}"))),
    })
}

/// A podset from its pod template: per-pod requests (see `requests.rs`), node selector, required
/// node affinity and tolerations. `field` names the podset in errors, e.g. `spec.podSets[0]`.
pub fn podset_from_template(field: &str, name: &str, count: i64, template: &PodTemplateSpec) -> Result<PodSetModel, QueueError> {
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
            reqs.push(Requirement { key: r.key.clone(), op: selector_op(&f, &r.operator)?, values: r.values.clone().unwrap_or_default() });
        }
        ps.affinity_terms.push(reqs);
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        ps.tolerations.push(toleration(&format!("{spec_field}.tolerations[{i}]"), t)?);
    }
    Ok(ps)
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
        assert!(e.to_string().contains("spec.podSets[1].template.spec.containers[0].resources.requests[cpu]"), "{e}");
        let e = podset_from_template("spec.podSets[1]", "main", 1, &template("1", "Near")).unwrap_err();
        assert!(e.to_string().contains("matchExpressions[0].operator"), "{e}");
    }
}
