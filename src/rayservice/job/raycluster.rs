//! RayCluster as a Kueue job (after Kueue's `jobs/raycluster`): podset `head` plus one per worker
//! group, built by the same code that builds the pods (`cluster::podsets`), suspend through `spec.suspend`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::GroupVersionKind;

use crate::api::kueue::{PodSet, Workload};
use crate::api::ray::RayCluster;
use crate::api::ray::raycluster::ClusterState;
use crate::jobframework::JobFrameworkError;
use crate::jobframework::interface::{Finished, GenericJob};
use crate::jobframework::job_controller::JobKind;
use crate::jobframework::podset_info::{PodSetInfo, merge_all, restore_template};
use crate::rayservice::cluster::BuildOptions;
use crate::rayservice::cluster::podsets::cluster_podsets;

pub use crate::rayservice::cluster::podsets::HEAD_PODSET;

pub struct RayClusterJob(pub RayCluster);

impl JobKind for RayClusterJob {
    type Object = RayCluster;

    async fn load(obj: &RayCluster, _: &[Workload], _: &kube::Client) -> Result<Self, kube::Error> {
        Ok(RayClusterJob(obj.clone()))
    }

    fn object(&self) -> &RayCluster {
        &self.0
    }
}

/// The podsets of a RayCluster, or an error naming what is wrong with its spec.
pub fn raycluster_podsets(rc: &RayCluster) -> Result<Vec<PodSet>, JobFrameworkError> {
    cluster_podsets(rc, &BuildOptions::default())
        .map_err(|e| JobFrameworkError::PodSets(e.to_string()))
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
        raycluster_podsets(&self.0)
    }

    fn is_active(&self) -> bool {
        !self.is_suspended()
            && self.0.status.as_ref().and_then(|s| s.state) == Some(ClusterState::Ready)
    }

    fn pods_ready(&self) -> bool {
        !self.is_suspended() && cluster_pods_ready(&self.0)
    }
}

/// Every pod of the cluster Running and Ready, as its controller last counted them: the head
/// (`HeadPodReady=True`) and as many ready workers as desired. Not `state: ready`, which KubeRay
/// keeps once reached: a pod that fails afterwards must show, for waitForPodsReady's recovery.
pub fn cluster_pods_ready(rc: &RayCluster) -> bool {
    let Some(s) = rc.status.as_ref() else {
        return false;
    };
    let head = crate::api::conditions::is_true(s.conditions.as_deref(), crate::api::ray::constants::COND_HEAD_POD_READY);
    let current = s.observed_generation.is_some() && s.observed_generation == rc.metadata.generation;
    head && current && s.ready_worker_replicas.unwrap_or(0) >= s.desired_worker_replicas.unwrap_or(0)
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

/// The generic reconciler's decisions for RayCluster jobs (Kueue's `ReconcileGenericJob` order).
#[cfg(test)]
mod plan_tests {
    use super::*;
    use crate::api::kueue::Admission;
    use crate::api::kueue::constants::label;
    use crate::jobframework::admission as conditions;
    use crate::jobframework::job_controller::{Step, plan};

    fn rc(suspended: bool, queue: bool) -> RayClusterJob {
        let mut labels = serde_json::Map::new();
        if queue {
            labels.insert(label::QUEUE_NAME.into(), "lq".into());
        }
        let mut rc: RayCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "default", "uid": "u1", "labels": labels},
            "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "resources": {"requests": {"cpu": "1"}}}]}}}}
        }))
        .unwrap();
        rc.spec.suspend = Some(suspended);
        RayClusterJob(rc)
    }

    fn wl_for(job: &RayClusterJob, name: &str, reserved: bool, evicted: bool) -> Workload {
        let mut w = Workload::build(name, "default").queue("lq").build();
        w.spec.pod_sets = job.pod_sets().unwrap();
        let now = jiff::Timestamp::UNIX_EPOCH;
        if reserved {
            w.status = Some(conditions::admitted(
                &w,
                Admission {
                    cluster_queue: "cq".into(),
                    pod_set_assignments: vec![],
                },
                now,
            ));
        }
        if evicted {
            let cause = conditions::EvictionCause {
                by: conditions::EvictedBy::Preempted(
                    crate::queue::PreemptedReason::InClusterQueue,
                ),
                message: "m".into(),
            };
            w.status = conditions::evicted(&w, &cause, now);
        }
        w
    }

    #[test]
    fn plan_follows_kueue_reconcile_order() {
        let suspended = rc(true, true);
        let running = rc(false, true);
        let unqueued = rc(false, false);
        let mut other = rc(true, true);
        other
            .0
            .spec
            .head_group_spec
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .name = "changed".into();
        let other_wl = wl_for(&other, "w", false, false);
        let cases: Vec<(&str, &RayClusterJob, Vec<Workload>, Step)> = vec![
            ("no queue label", &unqueued, vec![], Step::Ignore),
            (
                "suspended, no workload",
                &suspended,
                vec![],
                Step::CreateWorkload,
            ),
            (
                "running, no workload",
                &running,
                vec![],
                Step::SuspendThenCreate,
            ),
            (
                "duplicates",
                &suspended,
                vec![
                    wl_for(&suspended, "w1", false, false),
                    wl_for(&suspended, "w2", false, false),
                ],
                Step::DeleteWorkloads(vec!["w2".into()]),
            ),
            (
                "podsets changed while pending",
                &suspended,
                vec![other_wl],
                Step::DeleteWorkloads(vec!["w".into()]),
            ),
            (
                "admitted, suspended",
                &suspended,
                vec![wl_for(&suspended, "w", true, false)],
                Step::Start("w".into()),
            ),
            // Kueue deletes a Workload that no longer matches its suspended job even when it holds
            // quota: starting the job on it would run pods the reservation does not describe.
            (
                "admitted, suspended, podsets changed",
                &suspended,
                vec![wl_for(&other, "w", true, false)],
                Step::DeleteWorkloads(vec!["w".into()]),
            ),
            (
                "admitted, running",
                &running,
                vec![wl_for(&running, "w", true, false)],
                Step::Nothing,
            ),
            (
                "evicted",
                &running,
                vec![wl_for(&running, "w", true, true)],
                Step::Stop("w".into()),
            ),
            (
                "pending, running",
                &running,
                vec![wl_for(&running, "w", false, false)],
                Step::Suspend,
            ),
            (
                "pending, suspended",
                &suspended,
                vec![wl_for(&suspended, "w", false, false)],
                Step::Nothing,
            ),
        ];
        for (name, job, wls, want) in cases {
            let refs: Vec<&Workload> = wls.iter().collect();
            assert_eq!(plan(job, &refs).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn elastic_jobs_resize_through_slices() {
        let elastic = |suspended: bool, workers: i32| {
            let mut j = rc(suspended, true);
            j.0.metadata.annotations =
                Some([(label::ELASTIC_JOB.to_string(), "true".to_string())].into());
            j.0.spec.worker_group_specs = Some(vec![serde_json::from_value(serde_json::json!({"groupName": "w", "replicas": workers, "template": {"spec": {"containers": [{"name": "w"}]}}})).unwrap()]);
            j
        };
        let small_pending = wl_for(&elastic(true, 1), "w1", false, false);
        let small_running = wl_for(&elastic(false, 1), "w1", true, false);
        let mut slice = wl_for(&elastic(false, 3), "w2", false, false);
        slice.metadata.annotations = Some(
            [(
                label::WORKLOAD_SLICE_REPLACEMENT_FOR.to_string(),
                "default/w1".to_string(),
            )]
            .into(),
        );
        let cases: Vec<(&str, RayClusterJob, Vec<Workload>, Step)> = vec![
            (
                "pending grows in place",
                elastic(true, 2),
                vec![small_pending],
                Step::UpdateCounts("w1".into()),
            ),
            (
                "admitted grows by a slice",
                elastic(false, 2),
                vec![small_running.clone()],
                Step::CreateSlice {
                    replaces: "w1".into(),
                },
            ),
            (
                "admitted shrink updates the counts in place",
                elastic(false, 0),
                vec![small_running.clone()],
                Step::UpdateCounts("w1".into()),
            ),
            (
                "an evicted workload is stopped, not shrunk",
                elastic(false, 0),
                vec![wl_for(&elastic(false, 1), "w1", true, true)],
                Step::Stop("w1".into()),
            ),
            (
                "a pending slice waits beside the active one",
                elastic(false, 3),
                vec![small_running, slice],
                Step::Nothing,
            ),
        ];
        for (name, job, wls, want) in cases {
            let refs: Vec<&Workload> = wls.iter().collect();
            assert_eq!(plan(&job, &refs).unwrap(), want, "{name}");
        }
    }
}
