//! RayJob as a Kueue job (Kueue's `pkg/controller/jobs/rayjob`): one Workload with podset `head`, one per
//! worker group (built like a RayCluster's, so it requests what the pods will), and `submitter` in
//! K8sJobMode. `spec.suspend` is the switch: KubeRay creates no cluster while it is true and deletes the
//! cluster when it becomes true, so admission starts the job and eviction stops it whole. A RayJob on an
//! existing cluster (`clusterSelector`) is not queue-managed.
//!
//! An elastic RayJob (`kueue.x-k8s.io/elastic-job: "true"`) with the in-tree autoscaler takes its worker
//! counts from its live cluster, as Kueue v0.20's `UpdatePodSets` does: when the autoscaler grows a group
//! the demand grows and the job framework asks for a new workload slice while the job runs on; the
//! cluster's gate keeps the new workers from being created until the slice is admitted. A smaller demand
//! shrinks the slice in place, once the pods it no longer covers are gone.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::GroupVersionKind;
use kube::{Api, Resource, ResourceExt};

use super::raycluster::{RayClusterJob, raycluster_podsets};
use crate::api::kueue::{PodSet, Workload};
use crate::api::ray::raycluster::ClusterState;
use crate::api::ray::rayjob::{JobDeploymentStatus, JobStatus, JobSubmissionMode};
use crate::api::ray::{RayCluster, RayJob};
use crate::jobframework::{
    ElasticWorkloadNameProvider, Finished, GenericJob, JobFrameworkError, JobKind, JobWithOnHold,
    JobWithSkip, PodSetInfo, merge_all, restore_template, workload_slice_enabled,
};
use crate::rayservice::rayjob::controller::default_submitter_template;

/// Kueue's podset name of the K8sJobMode submitter.
pub const SUBMITTER_PODSET: &str = "submitter";

pub struct RayJobJob {
    pub job: RayJob,
    /// The live cluster of an elastic, autoscaled job, with its pods: the Workload's worker counts.
    pub cluster: Option<RayClusterJob>,
    /// How its pods stand with the scheduler (Kueue v0.20's PodsScheduled), once
    /// [`JobKind::load_pods_scheduling`] read them.
    pub scheduling: Option<crate::jobframework::PodsScheduling>,
}

impl RayJobJob {
    /// A job whose podsets are its spec's (not elastic, or no cluster yet).
    pub fn new(job: RayJob) -> Self {
        RayJobJob {
            job,
            cluster: None,
            scheduling: None,
        }
    }
}

/// How a RayJob's pods stand with the scheduler, per podset of its Workload, as Kueue v0.20's
/// unscheduled-pods tracker counts the pods Kueue's RayJob integration labels: its cluster's pods
/// (`cluster_pods`, by `ray.io/cluster`) fill `head` and their worker group's podset, and in
/// K8sJobMode the submitter Job's pods (`submitter_pods`) fill `submitter`. A submitter not yet made
/// (KubeRay makes it once the cluster is ready) is a required pod not scheduled, as the tracker has
/// it; its job is `PodsReady` from then on, so no timeout of waitForPodsReady runs on it.
pub fn ray_job_pods_scheduling(
    cluster_pods: &[k8s_openapi::api::core::v1::Pod],
    submitter_pods: &[k8s_openapi::api::core::v1::Pod],
) -> crate::jobframework::PodsScheduling {
    let mut out = super::demand::pods_scheduling(cluster_pods);
    let submitter = crate::jobframework::count_pods_scheduling(
        submitter_pods.iter().map(|p| (p, SUBMITTER_PODSET.to_string())),
    );
    out.live += submitter.live;
    for (podset, n) in submitter.scheduled {
        *out.scheduled.entry(podset).or_default() += n;
    }
    out
}

/// Kueue's condition for following the cluster: workload slicing on the job and the in-tree autoscaler.
pub fn follows_autoscaler(job: &RayJob) -> bool {
    workload_slice_enabled(&job.metadata)
        && job
            .spec
            .ray_cluster_spec
            .as_ref()
            .is_some_and(|c| c.autoscaling_enabled())
}

impl JobKind for RayJobJob {
    type Object = RayJob;

    async fn load(obj: &RayJob, workloads: &[Workload], client: &kube::Client) -> Result<Self, kube::Error> {
        let name = obj
            .status
            .as_ref()
            .and_then(|s| s.ray_cluster_name.clone())
            .filter(|n| !n.is_empty());
        let (Some(name), true) = (name, follows_autoscaler(obj)) else {
            return Ok(RayJobJob::new(obj.clone()));
        };
        let api: Api<RayCluster> = Api::namespaced(client.clone(), &obj.namespace().unwrap_or_default());
        let cluster = match api.get_opt(&name).await? {
            Some(rc) => Some(<RayClusterJob as JobKind>::load(&rc, workloads, client).await?),
            None => None,
        };
        Ok(RayJobJob {
            job: obj.clone(),
            cluster,
            scheduling: None,
        })
    }

    fn object(&self) -> &RayJob {
        &self.job
    }

    /// Kueue v0.20 (#15402, #15434): the pods of its cluster (`status.rayClusterName`) and, in
    /// K8sJobMode, of its submitter Job (named as the RayJob; the `batch.kubernetes.io/job-name`
    /// label). A suspended job has none to count; one whose cluster is not named yet has none yet.
    async fn load_pods_scheduling(&mut self, client: &kube::Client) -> Result<(), kube::Error> {
        use k8s_openapi::api::core::v1::Pod;
        if self.is_suspended() {
            self.scheduling = None;
            return Ok(());
        }
        let ns = self.job.namespace().unwrap_or_default();
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let cluster = self
            .job
            .status
            .as_ref()
            .and_then(|s| s.ray_cluster_name.clone())
            .filter(|n| !n.is_empty());
        let cluster_pods = match cluster {
            Some(name) => {
                let selector = format!("{}={name}", crate::api::ray::constants::LABEL_CLUSTER);
                pods.list(&kube::api::ListParams::default().labels(&selector))
                    .await?
                    .items
            }
            None => Vec::new(),
        };
        let submitter_pods = if self.k8s_job_mode() {
            let selector = format!("{}={}", crate::api::batch::JOB_NAME_LABEL, self.job.name_any());
            pods.list(&kube::api::ListParams::default().labels(&selector))
                .await?
                .items
        } else {
            Vec::new()
        };
        self.scheduling = Some(ray_job_pods_scheduling(&cluster_pods, &submitter_pods));
        Ok(())
    }

    /// The autoscaler writing the cluster's replicas changes an elastic job's demand.
    fn watches(
        controller: kube::runtime::Controller<RayJob>,
        client: &kube::Client,
    ) -> kube::runtime::Controller<RayJob> {
        controller.owns(
            Api::<RayCluster>::all(client.clone()),
            kube::runtime::watcher::Config::default(),
        )
    }
}

impl RayJobJob {
    fn k8s_job_mode(&self) -> bool {
        self.job.spec.mode() == JobSubmissionMode::K8sJobMode
    }

    /// The pod templates admission writes into, in `pod_sets()` order. The submitter's only when the user
    /// wrote one (as Kueue: the default submitter template is not part of the spec).
    fn templates(&mut self) -> Result<Vec<(&mut ObjectMeta, &mut PodSpec)>, JobFrameworkError> {
        let k8s_job = self.k8s_job_mode();
        let spec = &mut self.job.spec;
        let cluster = spec.ray_cluster_spec.as_mut().ok_or_else(no_cluster_spec)?;
        let mut out = Vec::new();
        let head = &mut cluster.head_group_spec.template;
        out.push((
            head.metadata.get_or_insert_with(Default::default),
            head.spec.get_or_insert_with(Default::default),
        ));
        for g in cluster.worker_group_specs.iter_mut().flatten() {
            let t = &mut g.template;
            out.push((
                t.metadata.get_or_insert_with(Default::default),
                t.spec.get_or_insert_with(Default::default),
            ));
        }
        if k8s_job && let Some(t) = spec.submitter_pod_template.as_mut() {
            out.push((
                t.metadata.get_or_insert_with(Default::default),
                t.spec.get_or_insert_with(Default::default),
            ));
        }
        Ok(out)
    }

    /// How many podsets there are (the submitter counts even with the default template).
    fn podset_count(&self) -> usize {
        let workers = self
            .job
            .spec
            .ray_cluster_spec
            .as_ref()
            .map_or(0, |c| c.worker_groups().len());
        1 + workers + usize::from(self.k8s_job_mode())
    }
}

fn no_cluster_spec() -> JobFrameworkError {
    JobFrameworkError::PodSets("a queue-managed RayJob needs spec.rayClusterSpec".into())
}

impl GenericJob for RayJobJob {
    fn meta(&self) -> &ObjectMeta {
        &self.job.metadata
    }

    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk(&RayJob::group(&()), &RayJob::version(&()), &RayJob::kind(&()))
    }

    fn is_suspended(&self) -> bool {
        self.job.spec.is_suspended()
    }

    fn suspend(&mut self) {
        self.job.spec.suspend = Some(true);
    }

    fn run_with_podsets_info(&mut self, infos: &[PodSetInfo]) -> Result<(), JobFrameworkError> {
        let want = self.podset_count();
        if infos.len() != want {
            return Err(JobFrameworkError::PodSetsInfoLength {
                want,
                got: infos.len(),
            });
        }
        let templates = self.templates()?;
        let n = templates.len();
        merge_all(templates.into_iter(), &infos[..n])?;
        self.job.spec.suspend = Some(false);
        Ok(())
    }

    fn restore_podsets_info(&mut self, infos: &[PodSetInfo]) -> bool {
        if infos.len() != self.podset_count() {
            return false;
        }
        let Ok(templates) = self.templates() else {
            return false;
        };
        let mut changed = false;
        for ((meta, spec), info) in templates.into_iter().zip(infos) {
            changed |= restore_template(meta, spec, info);
        }
        changed
    }

    /// Kueue: finished once `Complete` or `Failed`; a success only when the Ray job SUCCEEDED.
    fn finished(&self) -> Option<Finished> {
        let status = self.job.status.as_ref()?;
        status.job_deployment_status.filter(|d| d.is_terminal())?;
        Some(Finished {
            success: status.job_status == Some(JobStatus::Succeeded),
            message: status.message.clone().unwrap_or_default(),
        })
    }

    /// `head`, each worker group, and `submitter` in K8sJobMode (count 1; Kueue's default template when the
    /// user wrote none: 500m CPU and 200Mi requested). In SidecarMode the head podset holds the submitter.
    fn pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        let mut spec = self
            .job
            .spec
            .ray_cluster_spec
            .clone()
            .ok_or_else(no_cluster_spec)?;
        if self.job.spec.mode() == JobSubmissionMode::SidecarMode {
            // The submitter runs in the head pod: the head podset asks for it too.
            // The gate changes the script and restart policy, not what the head podset asks for.
            crate::rayservice::rayjob::sidecar::add(&mut spec, &self.job, "", false)
                .map_err(JobFrameworkError::PodSets)?;
        }
        let mut rc = RayCluster::new(self.job.metadata.name.as_deref().unwrap_or("rayjob"), spec);
        rc.metadata.namespace = self.job.metadata.namespace.clone();
        let mut podsets = raycluster_podsets(&rc)?;
        if self.k8s_job_mode() {
            let template: PodTemplateSpec = self
                .job
                .spec
                .submitter_pod_template
                .clone()
                .unwrap_or_else(|| default_submitter_template(&self.job));
            podsets.push(PodSet {
                name: Some(SUBMITTER_PODSET.into()),
                template,
                count: Some(1),
                ..Default::default()
            });
        }
        if let Some(cluster) = &self.cluster {
            // Kueue's `UpdatePodSets`: the live cluster's counts, the job's templates.
            let live: BTreeMap<String, i32> = cluster
                .elastic_pod_sets()?
                .iter()
                .map(|p| (p.name().to_string(), p.count()))
                .collect();
            for ps in podsets.iter_mut().filter(|p| p.name() != SUBMITTER_PODSET) {
                if let Some(n) = live.get(ps.name()) {
                    ps.count = Some(*n);
                }
            }
        }
        Ok(podsets)
    }

    fn as_elastic_workload_name_provider(&self) -> Option<&dyn ElasticWorkloadNameProvider> {
        Some(self)
    }

    /// Kueue: active unless Suspended (or not started): KubeRay deletes the cluster on the way there.
    fn is_active(&self) -> bool {
        let status = self.job.status.as_ref().and_then(|s| s.job_deployment_status);
        !matches!(status, None | Some(JobDeploymentStatus::Suspended))
    }

    fn pods_ready(&self) -> bool {
        self.job
            .status
            .as_ref()
            .and_then(|s| s.ray_cluster_status.as_ref())
            .and_then(|s| s.state)
            == Some(ClusterState::Ready)
    }

    fn pods_scheduling(&self) -> Option<crate::jobframework::PodsScheduling> {
        self.scheduling.clone()
    }

    fn as_with_skip(&self) -> Option<&dyn JobWithSkip> {
        Some(self)
    }

    fn as_with_on_hold(&self) -> Option<&dyn JobWithOnHold> {
        Some(self)
    }
}

impl ElasticWorkloadNameProvider for RayJobJob {
    /// Kueue's `GetWorkloadNameExtraPart`: the job's generation and its cluster's, so a slice for a
    /// cluster the autoscaler grew gets a name of its own (the job's generation does not move). The
    /// cluster's name too: a retry's new cluster counts its generations from 1 again.
    fn workload_name_extra(&self) -> String {
        let generation = self.job.metadata.generation.unwrap_or(0);
        match &self.cluster {
            Some(c) => format!(
                "{generation}_{}_{}",
                c.rc.name_any(),
                c.rc.metadata.generation.unwrap_or(0)
            ),
            None => generation.to_string(),
        }
    }
}

impl JobWithSkip for RayJobJob {
    /// Kueue's rule: a RayJob on an existing cluster is not queue-managed.
    fn skip(&self) -> bool {
        self.job.spec.uses_cluster_selector()
    }
}

impl JobWithOnHold for RayJobJob {
    fn is_on_hold(&self) -> bool {
        self.job.status.as_ref().and_then(|s| s.job_deployment_status)
            == Some(JobDeploymentStatus::ValidationFailed)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::kueue::constants::label;
    use crate::jobframework::{Step, plan};

    fn job(mode: &str, extra: serde_json::Value) -> RayJobJob {
        let mut spec = json!({
            "submissionMode": mode, "shutdownAfterJobFinishes": true, "entrypoint": "sleep 1",
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "head", "image": "rayproject/ray:2.9.0", "resources": {"requests": {"cpu": "1"}}}]}}},
                "workerGroupSpecs": [{"groupName": "Small", "replicas": 2, "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "w", "image": "ray", "resources": {"requests": {"cpu": "1"}}}]}}}]
            }
        });
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                s.insert(k.clone(), v.clone());
            }
        }
        let job = serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": "rj", "namespace": "default", "uid": "u1", "labels": {label::QUEUE_NAME: "lq"}},
            "spec": spec
        }))
        .unwrap();
        RayJobJob::new(job)
    }

    fn names_and_counts(j: &RayJobJob) -> Vec<(String, i32)> {
        j.pod_sets()
            .unwrap()
            .iter()
            .map(|p| (p.name.clone().unwrap_or_default(), p.count.unwrap_or(0)))
            .collect()
    }

    /// Kueue `pkg/controller/jobs/rayjob/rayjob_controller_test.go` `TestPodSets`: head, the worker groups
    /// (lower-cased names), and in K8sJobMode a `submitter` of 1 with Kueue's default requests.
    #[test]
    fn podsets_are_head_workers_and_the_k8s_job_submitter() {
        let k8s = job("K8sJobMode", json!({}));
        assert_eq!(
            names_and_counts(&k8s),
            vec![
                ("head".into(), 1),
                ("small".into(), 2),
                (SUBMITTER_PODSET.into(), 1)
            ]
        );
        let submitter = k8s.pod_sets().unwrap().pop().unwrap();
        let requests = submitter.template.spec.unwrap().containers[0]
            .resources
            .clone()
            .unwrap()
            .requests
            .unwrap();
        assert_eq!(
            (requests["cpu"].0.as_str(), requests["memory"].0.as_str()),
            ("500m", "200Mi")
        );
        let http = job("HTTPMode", json!({}));
        assert_eq!(
            names_and_counts(&http),
            vec![("head".into(), 1), ("small".into(), 2)]
        );
    }

    /// Kueue `rayjob_controller_test.go` `TestGetCustomAnnotations` ("first call sets annotation with all
    /// podset counts": the job asks 1 worker of group1, its live cluster has 5, the podset says 5): an
    /// elastic, autoscaled job's worker counts are its live cluster's, never below the pods it still
    /// has; the submitter stays 1; the slice name moves with the cluster's generation. A job that is not
    /// elastic keeps its spec's counts.
    #[test]
    fn an_elastic_autoscaled_job_counts_its_live_clusters_workers() {
        let mut j = job(
            "K8sJobMode",
            json!({"rayClusterSpec": {
                "enableInTreeAutoscaling": true,
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "head", "image": "ray", "resources": {"requests": {"cpu": "1"}}}]}}},
                "workerGroupSpecs": [{"groupName": "group1", "replicas": 1, "maxReplicas": 8, "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "w", "image": "ray", "resources": {"requests": {"cpu": "1"}}}]}}}]
            }}),
        );
        j.job.metadata.annotations = Some([(label::ELASTIC_JOB.to_string(), "true".to_string())].into());
        j.job.metadata.generation = Some(1);
        assert!(follows_autoscaler(&j.job));
        let mut rc = RayCluster::new("rj-abcde", j.job.spec.ray_cluster_spec.clone().unwrap());
        rc.metadata.generation = Some(4);
        rc.spec.worker_group_specs.as_mut().unwrap()[0].replicas = Some(5);
        let before = j.workload_name_extra();
        j.cluster = Some(RayClusterJob::new(rc.clone()));
        assert_eq!(
            names_and_counts(&j),
            vec![
                ("head".into(), 1),
                ("group1".into(), 5),
                (SUBMITTER_PODSET.into(), 1)
            ]
        );
        assert_eq!(
            (before.as_str(), j.workload_name_extra().as_str()),
            ("1", "1_rj-abcde_4")
        );
        // The autoscaler scaled down to 2 while 3 workers still run: the demand holds 3 until they go.
        rc.spec.worker_group_specs.as_mut().unwrap()[0].replicas = Some(2);
        j.cluster = Some(RayClusterJob {
            rc,
            pods: [("group1".to_string(), 3)].into(),
            held: Default::default(),
            scheduling: Default::default(),
        });
        assert_eq!(names_and_counts(&j)[1], ("group1".into(), 3));
        // Not elastic: the spec's count, whatever the cluster says.
        j.job.metadata.annotations = None;
        assert!(!follows_autoscaler(&j.job));
        assert_eq!(
            names_and_counts(&RayJobJob::new(j.job.clone()))[1],
            ("group1".into(), 1)
        );
    }

    /// Kueue `TestRunWithPodSetsInfo`-style: admission writes each podset's node selector into its template
    /// and unsuspends; a wrong number of infos is refused; restore puts the templates back.
    #[test]
    fn admission_injects_flavors_and_unsuspends() {
        let mut j = job(
            "K8sJobMode",
            json!({"suspend": true, "submitterPodTemplate": {"spec": {"restartPolicy": "Never", "containers": [{"name": "s", "image": "ray"}]}}}),
        );
        let info = |name: &str| PodSetInfo {
            name: name.into(),
            node_selector: [("pool".to_string(), name.to_string())].into_iter().collect(),
            ..Default::default()
        };
        assert!(
            j.run_with_podsets_info(&[info("head")]).is_err(),
            "one info per podset"
        );
        let infos = [info("head"), info("small"), info(SUBMITTER_PODSET)];
        j.run_with_podsets_info(&infos).unwrap();
        assert!(!j.is_suspended());
        let spec = &j.job.spec;
        let selector = |t: &Option<PodSpec>| {
            t.as_ref()
                .and_then(|s| s.node_selector.clone())
                .unwrap_or_default()
        };
        let cluster = spec.ray_cluster_spec.as_ref().unwrap();
        assert_eq!(selector(&cluster.head_group_spec.template.spec)["pool"], "head");
        assert_eq!(
            selector(&cluster.worker_groups()[0].template.spec)["pool"],
            "small"
        );
        assert_eq!(
            selector(&spec.submitter_pod_template.as_ref().unwrap().spec)["pool"],
            SUBMITTER_PODSET
        );
        let originals = [
            PodSetInfo::default(),
            PodSetInfo::default(),
            PodSetInfo::default(),
        ];
        assert!(j.restore_podsets_info(&originals));
        assert!(
            selector(
                &j.job
                    .spec
                    .ray_cluster_spec
                    .as_ref()
                    .unwrap()
                    .head_group_spec
                    .template
                    .spec
            )
            .is_empty()
        );
    }

    /// Kueue `Finished`: Complete or Failed ends the job, a success only when the Ray job SUCCEEDED; the
    /// generic reconciler then finishes the Workload. `IsActive` until KubeRay reports Suspended.
    #[test]
    fn finished_active_and_skip_follow_kueue() {
        let mut j = job("HTTPMode", json!({}));
        assert!(j.finished().is_none() && !j.is_active());
        j.job.status = Some(
            serde_json::from_value(json!({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}))
                .unwrap(),
        );
        assert!(j.finished().is_none() && j.is_active());
        j.job.status = Some(
            serde_json::from_value(
                json!({"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "message": "exit 1"}),
            )
            .unwrap(),
        );
        assert_eq!(
            j.finished(),
            Some(Finished {
                success: false,
                message: "exit 1".into()
            })
        );
        j.job.status = Some(
            serde_json::from_value(json!({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}))
                .unwrap(),
        );
        assert!(j.finished().is_some_and(|f| f.success));
        let mut wl = Workload::build("rayjob-rj-1", "default").queue("lq").build();
        wl.metadata.uid = Some("w".into());
        assert!(
            matches!(plan(&j, &[&wl]), Ok(Step::Finish { .. })),
            "a finished job finishes its Workload"
        );
        j.job.status = Some(serde_json::from_value(json!({"jobDeploymentStatus": "Suspended"})).unwrap());
        assert!(!j.is_active());
        // A RayJob on an existing cluster is not queue-managed: no Workload, not suspended.
        let selected = job(
            "HTTPMode",
            json!({"rayClusterSpec": null, "clusterSelector": {"ray.io/cluster": "shared"}}),
        );
        assert_eq!(plan(&selected, &[]).unwrap(), Step::Ignore);
        assert_eq!(
            plan(&job("HTTPMode", json!({"suspend": true})), &[]).unwrap(),
            Step::CreateWorkload
        );
    }
    fn pod(labels: serde_json::Value, bound: bool, phase: &str) -> k8s_openapi::api::core::v1::Pod {
        let node = if bound { json!("sim-node-0") } else { json!(null) };
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "ray"}]},
            "status": {"phase": phase}
        }))
        .unwrap()
    }

    /// Kueue v0.20's unscheduled-pods tracker (KEP-13502, kueue#15402) over a RayJob's Workload: the
    /// cluster's head and workers fill `head` and their group's podset, the submitter's pod fills
    /// `submitter`; a failed submitter pod fills nothing, a succeeded one does.
    #[test]
    fn a_rayjobs_pods_scheduled_counts_its_cluster_and_its_submitter() {
        use crate::api::ray::constants as c;
        let head = pod(
            json!({c::LABEL_CLUSTER: "rj-x", c::LABEL_NODE_TYPE: c::NODE_TYPE_HEAD}),
            true,
            "Running",
        );
        let worker = |bound| {
            pod(
                json!({c::LABEL_CLUSTER: "rj-x", c::LABEL_NODE_TYPE: c::NODE_TYPE_WORKER, c::LABEL_GROUP: "Small"}),
                bound,
                "Pending",
            )
        };
        let submitter = |phase| pod(json!({crate::api::batch::JOB_NAME_LABEL: "rj"}), true, phase);
        let s = ray_job_pods_scheduling(&[head.clone(), worker(true), worker(false)], &[]);
        assert_eq!(s.live, 3);
        assert_eq!(
            s.scheduled,
            BTreeMap::from([("head".to_string(), 1), ("small".to_string(), 1)])
        );
        let s = ray_job_pods_scheduling(
            std::slice::from_ref(&head),
            &[submitter("Failed"), submitter("Running")],
        );
        assert_eq!(s.live, 2);
        assert_eq!(s.scheduled.get(SUBMITTER_PODSET), Some(&1));
        let s = ray_job_pods_scheduling(&[head], &[submitter("Succeeded")]);
        assert_eq!((s.live, s.scheduled.get(SUBMITTER_PODSET)), (1, Some(&1)));
        // Not loaded (the tracking is off, or nothing read yet): no observation.
        assert!(job("K8sJobMode", json!({})).pods_scheduling().is_none());
    }
}
