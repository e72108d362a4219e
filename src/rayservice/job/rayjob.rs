//! RayJob as a Kueue job (Kueue's `pkg/controller/jobs/rayjob`): one Workload with podset `head`, one per
//! worker group (built like a RayCluster's, so it requests what the pods will), and `submitter` in
//! K8sJobMode. `spec.suspend` is the switch: KubeRay creates no cluster while it is true and deletes the
//! cluster when it becomes true, so admission starts the job and eviction stops it whole. A RayJob on an
//! existing cluster (`clusterSelector`) is not queue-managed.

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::GroupVersionKind;
use kube::Resource;

use super::raycluster::raycluster_podsets;
use crate::api::kueue::{PodSet, Workload};
use crate::api::ray::raycluster::ClusterState;
use crate::api::ray::rayjob::{JobDeploymentStatus, JobStatus, JobSubmissionMode};
use crate::api::ray::{RayCluster, RayJob};
use crate::jobframework::{
    Finished, GenericJob, JobFrameworkError, JobKind, JobWithOnHold, JobWithSkip, PodSetInfo, merge_all,
    restore_template,
};
use crate::rayservice::rayjob::controller::default_submitter_template;

/// Kueue's podset name of the K8sJobMode submitter.
pub const SUBMITTER_PODSET: &str = "submitter";

pub struct RayJobJob {
    pub job: RayJob,
}

impl JobKind for RayJobJob {
    type Object = RayJob;

    async fn load(obj: &RayJob, _: &[Workload], _: &kube::Client) -> Result<Self, kube::Error> {
        Ok(RayJobJob { job: obj.clone() })
    }

    fn object(&self) -> &RayJob {
        &self.job
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
        out.push((head.metadata.get_or_insert_with(Default::default), head.spec.get_or_insert_with(Default::default)));
        for g in cluster.worker_group_specs.iter_mut().flatten() {
            let t = &mut g.template;
            out.push((t.metadata.get_or_insert_with(Default::default), t.spec.get_or_insert_with(Default::default)));
        }
        if k8s_job && let Some(t) = spec.submitter_pod_template.as_mut() {
            out.push((t.metadata.get_or_insert_with(Default::default), t.spec.get_or_insert_with(Default::default)));
        }
        Ok(out)
    }

    /// How many podsets there are (the submitter counts even with the default template).
    fn podset_count(&self) -> usize {
        let workers = self.job.spec.ray_cluster_spec.as_ref().map_or(0, |c| c.worker_groups().len());
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
            return Err(JobFrameworkError::PodSetsInfoLength { want, got: infos.len() });
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
        let Ok(templates) = self.templates() else { return false };
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
    /// user wrote none: 500m CPU and 200Mi requested).
    fn pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        let spec = self.job.spec.ray_cluster_spec.clone().ok_or_else(no_cluster_spec)?;
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
            podsets.push(PodSet { name: Some(SUBMITTER_PODSET.into()), template, count: Some(1), ..Default::default() });
        }
        Ok(podsets)
    }

    /// Kueue: active unless Suspended (or not started): KubeRay deletes the cluster on the way there.
    fn is_active(&self) -> bool {
        let status = self.job.status.as_ref().and_then(|s| s.job_deployment_status);
        !matches!(status, None | Some(JobDeploymentStatus::Suspended))
    }

    fn pods_ready(&self) -> bool {
        self.job.status.as_ref().and_then(|s| s.ray_cluster_status.as_ref()).and_then(|s| s.state) == Some(ClusterState::Ready)
    }

    fn as_with_skip(&self) -> Option<&dyn JobWithSkip> {
        Some(self)
    }

    fn as_with_on_hold(&self) -> Option<&dyn JobWithOnHold> {
        Some(self)
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
        self.job.status.as_ref().and_then(|s| s.job_deployment_status) == Some(JobDeploymentStatus::ValidationFailed)
    }
}
