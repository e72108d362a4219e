//! The RayJob's own head Service, `<job>-head-svc` (KubeRay's `reconcileServices` with
//! `BuildHeadServiceForRayJob`): the head Service of the cluster the job runs on, under a name that
//! stays the same across retries, pointed at the current cluster's head. Not made for a job on a
//! `clusterSelector` cluster.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};

use crate::api::ray::constants as c;
use crate::api::ray::{RayCluster, RayJob};
use crate::rayservice::cluster::service::head_service;
use crate::rayservice::cluster::{BuildError, BuildOptions, names};

/// `<job>-head-svc`: the cluster's head Service renamed, labelled as the job's, owned by the job.
pub fn build(job: &RayJob, cluster: &RayCluster) -> Result<Service, BuildError> {
    let mut svc = head_service(cluster, &BuildOptions::default())?;
    let name = job.name_any();
    svc.metadata.name = Some(names::owner_head_service_name(&name));
    svc.metadata.namespace = job.namespace();
    svc.metadata.labels = Some(BTreeMap::from([
        (c::LABEL_ORIGINATED_FROM_CR_NAME.to_string(), name.clone()),
        (
            c::LABEL_ORIGINATED_FROM_CRD.to_string(),
            c::CRD_RAY_JOB.to_string(),
        ),
        (c::LABEL_NODE_TYPE.to_string(), c::NODE_TYPE_HEAD.to_string()),
        (
            c::LABEL_IDENTIFIER.to_string(),
            names::identifier(&name, c::NODE_TYPE_HEAD),
        ),
    ]));
    svc.metadata.owner_references = job.controller_owner_ref(&()).map(|o| vec![o]);
    Ok(svc)
}

/// What [`ensure`] did, for the event KubeRay records.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Created(String),
    Updated(String),
    Unchanged,
}

/// Creates the Service, or points it at `cluster` when it still selects another one (a retry's new
/// cluster); the clusterIP, immutable, is kept.
pub async fn ensure(api: &Api<Service>, job: &RayJob, cluster: &RayCluster) -> Result<Outcome, kube::Error> {
    let Ok(wanted) = build(job, cluster) else {
        // A head group with no container: the cluster controller reports it on the cluster.
        return Ok(Outcome::Unchanged);
    };
    let name = wanted.name_any();
    let selects = |s: &Service| {
        s.spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .and_then(|s| s.get(c::LABEL_CLUSTER).cloned())
    };
    match api.get_opt(&name).await? {
        None => {
            api.create(&PostParams::default(), &wanted).await?;
            Ok(Outcome::Created(name))
        }
        Some(existing) if selects(&existing) == selects(&wanted) => Ok(Outcome::Unchanged),
        Some(mut existing) => {
            let mut spec = wanted.spec.unwrap_or_default();
            spec.cluster_ip = existing.spec.as_ref().and_then(|s| s.cluster_ip.clone());
            spec.cluster_ips = existing.spec.as_ref().and_then(|s| s.cluster_ips.clone());
            existing.spec = Some(spec);
            api.replace(&name, &PostParams::default(), &existing).await?;
            Ok(Outcome::Updated(name))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// KubeRay `common/job_test.go` TestBuildHeadServiceForRayJob (and `utils.GenerateHeadServiceName`
    /// for RayJobCRD): named `<job>-head-svc`, the job's origin and head labels, the cluster's head
    /// selector and ports, owned by the job.
    #[test]
    fn the_jobs_head_service_is_the_clusters_under_the_jobs_name() {
        let job: RayJob = serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rayjob-sample", "namespace": "ns", "uid": "u1"},
            "spec": {"entrypoint": "sleep 1"}
        }))
        .unwrap();
        let rc: RayCluster = serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rayjob-sample-abcde", "namespace": "ns"},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray",
                "ports": [{"name": "dashboard", "containerPort": 8265}, {"name": "gcs-server", "containerPort": 6379}]}]}}}}
        }))
        .unwrap();
        let svc = build(&job, &rc).unwrap();
        assert_eq!(svc.metadata.name.as_deref(), Some("rayjob-sample-head-svc"));
        let labels = svc.metadata.labels.clone().unwrap();
        assert_eq!(labels[c::LABEL_ORIGINATED_FROM_CR_NAME], "rayjob-sample");
        assert_eq!(labels[c::LABEL_ORIGINATED_FROM_CRD], "RayJob");
        assert_eq!(labels[c::LABEL_NODE_TYPE], "head");
        assert_eq!(labels[c::LABEL_IDENTIFIER], "rayjob-sample-head");
        let spec = svc.spec.unwrap();
        assert_eq!(spec.selector.unwrap()[c::LABEL_CLUSTER], "rayjob-sample-abcde");
        let ports: Vec<i32> = spec.ports.unwrap().iter().map(|p| p.port).collect();
        assert!(ports.contains(&8265) && ports.contains(&6379), "{ports:?}");
        let owner = &svc.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("RayJob", "u1", Some(true))
        );
    }
}
