//! Requests of a podset from its pod template, by the Kubernetes rules Kueue uses: containers
//! summed, max'd with init containers (restartable init containers run alongside as sidecars),
//! pod overhead added, limits standing in for absent requests; then times the pod count.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use super::QueueError;
use super::amount::Amount;
use crate::api::quantity::{Quantity, resource_value};

/// The resource every pod takes one of on its node (`.status.allocatable.pods`).
pub const PODS: &str = "pods";

pub type Requests = BTreeMap<String, Amount>;

fn parse_list(field: &str, list: Option<&BTreeMap<String, K8sQuantity>>) -> Result<Requests, QueueError> {
    let mut out = Requests::new();
    for (r, q) in list.into_iter().flatten() {
        let parsed = Quantity::try_from(q).map_err(|e| QueueError::InvalidQuantity {
            field: format!("{field}[{r}]"),
            value: q.0.clone(),
            message: e.to_string(),
        })?;
        if parsed.is_negative() {
            return Err(QueueError::InvalidQuantity {
                field: format!("{field}[{r}]"),
                value: q.0.clone(),
                message: "must be non-negative".into(),
            });
        }
        out.insert(r.clone(), Amount(resource_value(r, &parsed)));
    }
    Ok(out)
}

/// Requests, with limits filling in resources that have no request (the API server's defaulting).
fn effective(field: &str, rr: Option<&ResourceRequirements>) -> Result<Requests, QueueError> {
    let Some(rr) = rr else {
        return Ok(Requests::new());
    };
    let mut req = parse_list(&format!("{field}.requests"), rr.requests.as_ref())?;
    for (r, v) in parse_list(&format!("{field}.limits"), rr.limits.as_ref())? {
        req.entry(r).or_insert(v);
    }
    Ok(req)
}

fn add(a: &mut Requests, b: &Requests) {
    for (r, v) in b {
        *a.entry(r.clone()).or_default() += *v;
    }
}

fn max_into(a: &mut Requests, b: &Requests) {
    for (r, v) in b {
        let e = a.entry(r.clone()).or_default();
        *e = (*e).max(*v);
    }
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Per-pod requests in Kueue's accounting units. `field` names the pod spec in errors
/// (e.g. `spec.podSets[0].template.spec`).
pub fn pod_requests(field: &str, spec: &PodSpec) -> Result<Requests, QueueError> {
    let mut reqs = Requests::new();
    for (i, c) in spec.containers.iter().enumerate() {
        add(
            &mut reqs,
            &effective(
                &format!("{field}.containers[{i}].resources"),
                c.resources.as_ref(),
            )?,
        );
    }
    // Sidecars run for the pod's lifetime, so they add to the regular containers; a regular init
    // container runs alone, next to the sidecars started before it.
    let mut sidecars = Requests::new();
    let mut init_peak = Requests::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let r = effective(
            &format!("{field}.initContainers[{i}].resources"),
            c.resources.as_ref(),
        )?;
        if is_sidecar(c) {
            add(&mut reqs, &r);
            add(&mut sidecars, &r);
            max_into(&mut init_peak, &sidecars);
        } else {
            let mut during = r;
            add(&mut during, &sidecars);
            max_into(&mut init_peak, &during);
        }
    }
    max_into(&mut reqs, &init_peak);
    // Pod-level resources, when set, replace the per-container aggregate for their resources.
    for (r, v) in effective(&format!("{field}.resources"), spec.resources.as_ref())? {
        reqs.insert(r, v);
    }
    add(
        &mut reqs,
        &parse_list(&format!("{field}.overhead"), spec.overhead.as_ref())?,
    );
    Ok(reqs)
}

/// Total requests of `count` pods.
pub fn podset_total(per_pod: &Requests, count: i64) -> Requests {
    per_pod.iter().map(|(r, v)| (r.clone(), v.times(count))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(req: &[(&str, &str)], lim: &[(&str, &str)]) -> Option<ResourceRequirements> {
        let m = |l: &[(&str, &str)]| {
            (!l.is_empty()).then(|| {
                l.iter()
                    .map(|(k, v)| (k.to_string(), K8sQuantity(v.to_string())))
                    .collect()
            })
        };
        Some(ResourceRequirements {
            requests: m(req),
            limits: m(lim),
            ..Default::default()
        })
    }

    fn c(req: &[(&str, &str)], lim: &[(&str, &str)], sidecar: bool) -> Container {
        Container {
            name: "c".into(),
            resources: res(req, lim),
            restart_policy: sidecar.then(|| "Always".to_string()),
            ..Default::default()
        }
    }

    fn cpu_mem(r: &Requests) -> (i64, i64) {
        (
            r.get("cpu").copied().unwrap_or_default().0,
            r.get("memory").copied().unwrap_or_default().0,
        )
    }

    #[test]
    fn kubernetes_rules_table() {
        struct Case {
            name: &'static str,
            containers: Vec<Container>,
            init: Vec<Container>,
            overhead: &'static [(&'static str, &'static str)],
            want: (i64, i64),
        }
        let cases = vec![
            Case {
                name: "containers summed",
                containers: vec![
                    c(&[("cpu", "1"), ("memory", "1Gi")], &[], false),
                    c(&[("cpu", "500m")], &[], false),
                ],
                init: vec![],
                overhead: &[],
                want: (1500, 1 << 30),
            },
            Case {
                name: "limits stand in for requests",
                containers: vec![
                    c(&[], &[("cpu", "2")], false),
                    c(&[("cpu", "1")], &[("cpu", "3")], false),
                ],
                init: vec![],
                overhead: &[],
                want: (3000, 0),
            },
            Case {
                name: "init container larger than containers",
                containers: vec![c(&[("cpu", "1")], &[], false)],
                init: vec![c(&[("cpu", "4")], &[], false)],
                overhead: &[],
                want: (4000, 0),
            },
            Case {
                name: "sidecar adds to containers and to later init containers",
                containers: vec![c(&[("cpu", "1")], &[], false)],
                init: vec![c(&[("cpu", "500m")], &[], true), c(&[("cpu", "2")], &[], false)],
                overhead: &[],
                // containers + sidecar = 1.5; init phase = 2 + 0.5 = 2.5
                want: (2500, 0),
            },
            Case {
                name: "init before sidecar does not see it",
                containers: vec![c(&[("cpu", "1")], &[], false)],
                init: vec![c(&[("cpu", "1200m")], &[], false), c(&[("cpu", "1")], &[], true)],
                overhead: &[],
                want: (2000, 0),
            },
            Case {
                name: "overhead added",
                containers: vec![c(&[("cpu", "1"), ("memory", "1Gi")], &[], false)],
                init: vec![],
                overhead: &[("cpu", "250m"), ("memory", "128Mi")],
                want: (1250, (1 << 30) + (128 << 20)),
            },
        ];
        for case in cases {
            let spec = PodSpec {
                containers: case.containers,
                init_containers: Some(case.init),
                overhead: (!case.overhead.is_empty()).then(|| {
                    case.overhead
                        .iter()
                        .map(|(k, v)| (k.to_string(), K8sQuantity(v.to_string())))
                        .collect()
                }),
                ..Default::default()
            };
            let got = pod_requests("spec", &spec).unwrap();
            assert_eq!(cpu_mem(&got), case.want, "{}", case.name);
        }
    }

    #[test]
    fn count_and_invalid_quantity() {
        let spec = PodSpec {
            containers: vec![c(&[("cpu", "1500m")], &[], false)],
            ..Default::default()
        };
        let per = pod_requests("spec", &spec).unwrap();
        assert_eq!(podset_total(&per, 4).get("cpu"), Some(&Amount(6000)));
        let bad = PodSpec {
            containers: vec![c(&[("cpu", "lots")], &[], false)],
            ..Default::default()
        };
        let err = pod_requests("spec.template.spec", &bad).unwrap_err();
        assert!(
            err.to_string()
                .contains("spec.template.spec.containers[0].resources.requests[cpu]"),
            "{err}"
        );
    }
}
