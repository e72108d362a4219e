//! Pod labels (KubeRay's `labelPod`): the selector-relevant keys cannot be overridden by the template.

use std::collections::BTreeMap;

use super::names;
use crate::api::ray::constants as c;

/// Labels of a Ray Pod: KubeRay's defaults, then the template's and group's labels except for
/// `ray.io/node-type`, `ray.io/group` and `ray.io/cluster`, which Services and the operator select on.
pub fn pod_labels(
    node_type: &str,
    cluster: &str,
    group: &str,
    overrides: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (c::LABEL_IS_RAY_NODE.to_string(), c::IS_RAY_NODE_YES.to_string()),
        (c::LABEL_CLUSTER.to_string(), cluster.to_string()),
        (c::LABEL_NODE_TYPE.to_string(), node_type.to_string()),
        (c::LABEL_GROUP.to_string(), group.to_string()),
        (
            c::LABEL_IDENTIFIER.to_string(),
            names::identifier(cluster, node_type),
        ),
        (c::LABEL_APP_NAME.to_string(), c::APPLICATION_NAME.to_string()),
        (c::LABEL_CREATED_BY.to_string(), c::COMPONENT_NAME.to_string()),
    ]);
    for (k, v) in overrides {
        if k == c::LABEL_NODE_TYPE || k == c::LABEL_GROUP || k == c::LABEL_CLUSTER {
            continue;
        }
        labels.insert(k.clone(), v.clone());
    }
    labels
}

/// Template labels overlaid with the group's Ray node labels (which also become Pod labels).
pub fn merge(
    template: Option<&BTreeMap<String, String>>,
    group: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut out = template.cloned().unwrap_or_default();
    out.extend(group.cloned().unwrap_or_default());
    out
}

/// Selector of a RayCluster's head Service (and of the RayService head Service pointing at it).
pub fn head_service_selector(cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (c::LABEL_CLUSTER.to_string(), cluster.to_string()),
        (c::LABEL_NODE_TYPE.to_string(), c::NODE_TYPE_HEAD.to_string()),
        (
            c::LABEL_IDENTIFIER.to_string(),
            names::identifier(cluster, c::NODE_TYPE_HEAD),
        ),
        (c::LABEL_APP_NAME.to_string(), c::APPLICATION_NAME.to_string()),
        (c::LABEL_CREATED_BY.to_string(), c::COMPONENT_NAME.to_string()),
    ])
}

/// The value of one label on a Pod, if set.
pub fn pod_label<'a>(p: &'a k8s_openapi::api::core::v1::Pod, key: &str) -> Option<&'a str> {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// Labels that mark an object as this RayService's (used to list its children).
pub fn origin_labels(rs: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (c::LABEL_ORIGINATED_FROM_CR_NAME.to_string(), rs.to_string()),
        (
            c::LABEL_ORIGINATED_FROM_CRD.to_string(),
            c::CRD_RAY_SERVICE.to_string(),
        ),
    ])
}

/// [`origin_labels`] as a label selector.
pub fn origin_selector(rs: &str) -> String {
    origin_labels(rs)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_labels_cannot_be_overridden() {
        let overrides = BTreeMap::from([
            ("ray.io/cluster".to_string(), "other".to_string()),
            ("ray.io/group".to_string(), "other".to_string()),
            ("ray.io/node-type".to_string(), "head".to_string()),
            ("team".to_string(), "a".to_string()),
            ("ray.io/is-ray-node".to_string(), "custom".to_string()),
        ]);
        let l = pod_labels("worker", "rc", "small", &overrides);
        assert_eq!(l["ray.io/cluster"], "rc");
        assert_eq!(l["ray.io/group"], "small");
        assert_eq!(l["ray.io/node-type"], "worker");
        assert_eq!(l["ray.io/identifier"], "rc-worker");
        assert_eq!(l["team"], "a");
        assert_eq!(
            l["ray.io/is-ray-node"], "custom",
            "other defaults may be overridden, as in KubeRay"
        );
        assert_eq!(l["app.kubernetes.io/created-by"], "kuberay-operator");
    }

    #[test]
    fn group_labels_win_over_template() {
        let t = BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "1".to_string()),
        ]);
        let g = BTreeMap::from([("b".to_string(), "2".to_string())]);
        let m = merge(Some(&t), Some(&g));
        assert_eq!((m["a"].as_str(), m["b"].as_str()), ("1", "2"));
    }
}
