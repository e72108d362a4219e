//! Container resource quantities in a group's pod template, checked as the API server checks a Pod's
//! (`ValidateResourceRequirements`): each value parses, none is negative, and a request is not above
//! its limit. A RayCluster is a custom resource whose schema only pattern-checks these, so without
//! this a `cpu: -1` would pass and fail later, at pod creation or in quota accounting.

use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use std::collections::BTreeMap;

use crate::api::quantity::Quantity;
use crate::api::validation::{FieldError, Path};

fn parsed(
    path: &Path,
    m: Option<&BTreeMap<String, ApiQuantity>>,
    errs: &mut Vec<FieldError>,
) -> BTreeMap<String, Quantity> {
    let mut out = BTreeMap::new();
    for (name, q) in m.into_iter().flatten() {
        let p = path.key(name);
        match Quantity::parse(&q.0) {
            Ok(v) if v.is_negative() => errs.push(FieldError::invalid(
                &p,
                format!("{:?}: must be greater than or equal to 0", q.0),
            )),
            Ok(v) => {
                out.insert(name.clone(), v);
            }
            Err(e) => errs.push(FieldError::invalid(&p, format!("{:?}: {e}", q.0))),
        }
    }
    out
}

fn container(c: &Container, path: &Path, errs: &mut Vec<FieldError>) {
    let Some(r) = &c.resources else { return };
    let path = path.child("resources");
    let limits = parsed(&path.child("limits"), r.limits.as_ref(), errs);
    let requests = parsed(&path.child("requests"), r.requests.as_ref(), errs);
    for (name, req) in &requests {
        if let Some(lim) = limits.get(name)
            && req > lim
        {
            errs.push(FieldError::invalid(
                &path.child("requests").key(name),
                format!("{req}: must be less than or equal to {name} limit of {lim}"),
            ));
        }
    }
}

/// Checks every container and init container of `template`; `path` names the template.
pub(super) fn validate_pod_resources(template: &PodTemplateSpec, path: &Path, errs: &mut Vec<FieldError>) {
    let Some(spec) = &template.spec else { return };
    let spec_path = path.child("spec");
    for (i, c) in spec.containers.iter().enumerate() {
        container(c, &spec_path.child("containers").index(i), errs);
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        container(c, &spec_path.child("initContainers").index(i), errs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(requests: serde_json::Value, limits: serde_json::Value) -> Vec<String> {
        let t: PodTemplateSpec = serde_json::from_value(json!({"spec": {"containers": [{"name": "c", "resources": {"requests": requests, "limits": limits}}]}})).unwrap();
        let mut errs = Vec::new();
        validate_pod_resources(&t, &Path::root("template"), &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    // Issue 13 item 6: each of these passed on RayClusters and RayServices before.
    #[test]
    fn bad_quantities_are_refused_naming_the_field() {
        for bad in ["-1", "abc", "", "NaN", "999999999999999Ei", " 1"] {
            let errs = errors(json!({"cpu": bad}), json!({}));
            assert_eq!(errs.len(), 1, "{bad:?}: {errs:?}");
            assert!(
                errs[0].starts_with("template.spec.containers[0].resources.requests[cpu]"),
                "{errs:?}"
            );
        }
        let errs = errors(json!({"cpu": "2"}), json!({"cpu": "1"}));
        assert!(
            errs.len() == 1 && errs[0].contains("must be less than or equal to cpu limit of 1"),
            "{errs:?}"
        );
        assert!(errors(json!({"cpu": "500m", "memory": "1Gi"}), json!({"cpu": "1"})).is_empty());
    }
}
