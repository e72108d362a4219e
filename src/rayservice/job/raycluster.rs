//! RayCluster as a Kueue job (after Kueue's `jobs/raycluster`): podset `head` plus one per worker
//! group (count = replicas x numOfHosts), the autoscaler sidecar counted in the head when in-tree
//! autoscaling is on, suspend through `spec.suspend`.

use k8s_openapi::api::core::v1::{Container, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::GroupVersionKind;

use super::JobFrameworkError;
use super::interface::{Finished, GenericJob};
use super::podset_info::{PodSetInfo, merge_all, restore_template};
use crate::api::kueue::PodSet;
use crate::api::ray::RayCluster;
use crate::api::ray::raycluster::ClusterState;

/// Podset name of the head group.
pub const HEAD_PODSET: &str = "head";
/// What KubeRay gives the autoscaler sidecar when `autoscalerOptions.resources` is unset.
const AUTOSCALER_CPU: &str = "500m";
const AUTOSCALER_MEMORY: &str = "512Mi";

pub struct RayClusterJob(pub RayCluster);

fn autoscaler_container(rc: &RayCluster) -> Container {
    let resources = rc
        .spec
        .autoscaler_options
        .as_ref()
        .and_then(|o| o.resources.clone())
        .unwrap_or_else(|| {
            let list = [
                ("cpu".to_string(), Quantity(AUTOSCALER_CPU.into())),
                ("memory".to_string(), Quantity(AUTOSCALER_MEMORY.into())),
            ]
            .into_iter()
            .collect();
            ResourceRequirements {
                requests: Some(list),
                ..Default::default()
            }
        });
    Container {
        name: "autoscaler".into(),
        resources: Some(resources),
        ..Default::default()
    }
}

fn podset(name: &str, count: i32, template: PodTemplateSpec) -> PodSet {
    PodSet {
        name: Some(name.to_string()),
        template,
        count: Some(count),
        ..Default::default()
    }
}

impl GenericJob for RayClusterJob {
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }

    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk(
            &RayCluster::group(&()),
            &RayCluster::version(&()),
            &RayCluster::kind(&()),
        )
    }

    fn is_suspended(&self) -> bool {
        self.0.spec.suspend == Some(true)
    }

    fn suspend(&mut self) {
        self.0.spec.suspend = Some(true);
    }

    fn run_with_podsets_info(&mut self, infos: &[PodSetInfo]) -> Result<(), JobFrameworkError> {
        let spec = &mut self.0.spec;
        let head = &mut spec.head_group_spec.template;
        let mut templates: Vec<(&mut ObjectMeta, &mut k8s_openapi::api::core::v1::PodSpec)> =
            Vec::new();
        templates.push((
            head.metadata.get_or_insert_with(Default::default),
            head.spec.get_or_insert_with(Default::default),
        ));
        for g in spec.worker_group_specs.iter_mut().flatten() {
            let t = &mut g.template;
            templates.push((
                t.metadata.get_or_insert_with(Default::default),
                t.spec.get_or_insert_with(Default::default),
            ));
        }
        merge_all(templates.into_iter(), infos)?;
        spec.suspend = Some(false);
        Ok(())
    }

    fn restore_podsets_info(&mut self, infos: &[PodSetInfo]) -> bool {
        let spec = &mut self.0.spec;
        let mut changed = false;
        let head = &mut spec.head_group_spec.template;
        if let Some(info) = infos.first() {
            changed |= restore_template(
                head.metadata.get_or_insert_with(Default::default),
                head.spec.get_or_insert_with(Default::default),
                info,
            );
        }
        for (g, info) in spec
            .worker_group_specs
            .iter_mut()
            .flatten()
            .zip(infos.iter().skip(1))
        {
            let t = &mut g.template;
            changed |= restore_template(
                t.metadata.get_or_insert_with(Default::default),
                t.spec.get_or_insert_with(Default::default),
                info,
            );
        }
        changed
    }

    fn finished(&self) -> Option<Finished> {
        // A RayCluster runs until deleted.
        None
    }

    fn pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        let spec = &self.0.spec;
        let mut head = spec.head_group_spec.template.clone();
        if spec.enable_in_tree_autoscaling == Some(true) {
            head.spec
                .get_or_insert_with(Default::default)
                .containers
                .push(autoscaler_container(&self.0));
        }
        let mut out = vec![podset(HEAD_PODSET, 1, head)];
        for g in spec.worker_group_specs.iter().flatten() {
            let count = g
                .replicas
                .unwrap_or(1)
                .saturating_mul(g.num_of_hosts_or_default().max(1));
            out.push(podset(
                &g.group_name.to_lowercase(),
                count,
                g.template.clone(),
            ));
        }
        Ok(out)
    }

    fn is_active(&self) -> bool {
        !self.is_suspended()
            && self.0.status.as_ref().and_then(|s| s.state) == Some(ClusterState::Ready)
    }

    fn pods_ready(&self) -> bool {
        self.0.status.as_ref().and_then(|s| s.state) == Some(ClusterState::Ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::kueue::constants::label;

    fn cluster(autoscale: bool) -> RayCluster {
        let mut rc: RayCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "default", "uid": "u1", "labels": {label::QUEUE_NAME: "lq"}},
            "spec": {
                "headGroupSpec": {"template": {"spec": {"containers": [{"name": "head", "resources": {"requests": {"cpu": "1"}}}]}}},
                "workerGroupSpecs": [
                    {"groupName": "Small", "replicas": 2, "template": {"spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": "1"}}}]}}},
                    {"groupName": "multi", "replicas": 3, "numOfHosts": 2, "template": {"spec": {"containers": [{"name": "w"}]}}}
                ]
            }
        }))
        .unwrap();
        rc.spec.enable_in_tree_autoscaling = Some(autoscale);
        rc
    }

    #[test]
    fn podsets_are_head_then_groups_with_hosts_counted() {
        let ps = RayClusterJob(cluster(false)).pod_sets().unwrap();
        let got: Vec<(String, i32, usize)> = ps
            .iter()
            .map(|p| {
                (
                    p.name.clone().unwrap(),
                    p.count.unwrap(),
                    p.template.spec.as_ref().map_or(0, |s| s.containers.len()),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("head".into(), 1, 1),
                ("small".into(), 2, 1),
                ("multi".into(), 6, 1)
            ]
        );
    }

    #[test]
    fn in_tree_autoscaling_counts_the_sidecar_in_the_head() {
        let ps = RayClusterJob(cluster(true)).pod_sets().unwrap();
        let head = ps[0].template.spec.as_ref().unwrap();
        assert_eq!(head.containers.len(), 2);
        let req = head.containers[1]
            .resources
            .as_ref()
            .unwrap()
            .requests
            .as_ref()
            .unwrap();
        assert_eq!(req["cpu"].0, "500m");
        assert_eq!(req["memory"].0, "512Mi");
    }

    #[test]
    fn run_injects_flavor_info_and_unsuspends_and_restore_undoes_it() {
        let mut job = RayClusterJob(cluster(false));
        job.suspend();
        let info = |n: &str| PodSetInfo {
            name: n.into(),
            count: 1,
            node_selector: [("pool".to_string(), "a".to_string())].into(),
            ..Default::default()
        };
        let infos = vec![info("head"), info("small"), info("multi")];
        job.run_with_podsets_info(&infos).unwrap();
        assert!(!job.is_suspended());
        let sel = job.0.spec.worker_group_specs.as_ref().unwrap()[1]
            .template
            .spec
            .as_ref()
            .unwrap()
            .node_selector
            .clone()
            .unwrap();
        assert_eq!(sel["pool"], "a");
        assert!(matches!(
            job.run_with_podsets_info(&infos[..2]),
            Err(JobFrameworkError::PodSetsInfoLength { want: 3, got: 2 })
        ));
        let originals: Vec<PodSetInfo> = RayClusterJob(cluster(false))
            .pod_sets()
            .unwrap()
            .iter()
            .map(PodSetInfo::from_podset)
            .collect();
        assert!(job.restore_podsets_info(&originals));
        assert!(
            job.0
                .spec
                .head_group_spec
                .template
                .spec
                .as_ref()
                .unwrap()
                .node_selector
                .as_ref()
                .is_none_or(|s| s.is_empty())
        );
    }
}
