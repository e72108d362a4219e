//! API types (Kueue, KubeRay, Gateway API), quantities, validation and defaulting on write. No I/O.

pub mod batch;
pub mod compiled_crds;
pub mod conditions;
pub mod crd_markers;
#[cfg(test)]
mod fuzz;
pub mod gateway;
pub mod goduration;
pub mod kueue;
pub mod manifest;
pub mod merge_patch;
pub mod names;
pub mod on_write;
pub mod pod;
pub mod quantity;
pub mod ray;
pub mod validation;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// Every CRD quotagate serves: Kueue's, KubeRay's and the Gateway API kinds the Ray operator writes.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    let mut crds = kueue::crds();
    crds.extend(ray::crds());
    crds.extend(gateway::crds());
    crds
}

#[cfg(test)]
mod tests {
    /// kube-apiserver's CRD validation (apiextensions `validateAPIApproval`): a CRD in a protected
    /// group (`k8s.io`, `kubernetes.io` or a subdomain of either) needs an `api-approved.kubernetes.io`
    /// annotation, else "protected groups must have approval annotation" refuses it. Found applying
    /// `quotagate crds` to a real kube-apiserver (issue 58).
    #[test]
    fn crds_in_protected_groups_carry_the_approval_annotation() {
        let protected = |g: &str| {
            g == "k8s.io" || g == "kubernetes.io" || g.ends_with(".k8s.io") || g.ends_with(".kubernetes.io")
        };
        let mut checked = 0;
        for crd in super::all_crds() {
            if !protected(&crd.spec.group) {
                continue;
            }
            let approval = crd
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("api-approved.kubernetes.io"));
            assert_eq!(
                approval.map(String::as_str),
                Some(super::gateway::GATEWAY_API_APPROVAL),
                "{}",
                crd.metadata.name.unwrap_or_default()
            );
            checked += 1;
        }
        assert_eq!(checked, 3, "the three Gateway API CRDs");
    }
}
