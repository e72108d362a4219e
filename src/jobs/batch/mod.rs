//! batch/v1 Job as a Kueue job (after Kueue's `pkg/controller/jobs/job/job_controller.go`): one podset
//! `main` of Kueue's pod count (parallelism, or fewer completions), partial admission through
//! `kueue.x-k8s.io/job-min-parallelism`, suspend through `spec.suspend`, finished by its `Complete` or
//! `Failed` condition. The Job controller (kube-controller-manager, or the embedded one) runs the pods.

pub mod multikueue;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::GroupVersionKind;

use crate::api::batch::{self as b, MANAGED_LABELS};
use crate::api::kueue::constants::{DEFAULT_PODSET_NAME, label};
use crate::api::kueue::{PodSet, ReclaimablePod, Workload};
use crate::jobframework::{
    Finished, GenericJob, JobFrameworkError, JobKind, JobWithReclaimablePods, PodSetInfo,
    merge_into_template, restore_template,
};

/// A batch/v1 Job under Kueue's admission.
pub struct BatchJob {
    pub job: Job,
    /// A running elastic Job's pod template as its admitted slice holds it: the template before
    /// admission injected the flavor's node selector and the podset label into it (the API server keeps
    /// a running Job's template as it is), so a new slice carries the chain's original template, and a
    /// Job stopped from that slice gets the original back, whatever flavor admits it next.
    admitted_template: Option<k8s_openapi::api::core::v1::PodTemplateSpec>,
    /// The Job's pods as they stand with the scheduler, read only while `PodsScheduled` is tracked
    /// ([`JobKind::load_pods_scheduling`]).
    scheduling: Option<crate::jobframework::PodsScheduling>,
}

impl BatchJob {
    pub fn new(job: Job) -> Self {
        BatchJob {
            job,
            admitted_template: None,
            scheduling: None,
        }
    }

    /// The Job with its Workloads as read: a running elastic Job takes its pod template from the
    /// newest unfinished slice holding quota.
    pub fn with_workloads(job: Job, workloads: &[Workload]) -> Self {
        let running = job.spec.as_ref().and_then(|s| s.suspend) != Some(true);
        let admitted_template = (running && crate::api::kueue::is_elastic_job(&job.metadata))
            .then(|| {
                workloads
                    .iter()
                    .filter(|w| {
                        !w.is_finished()
                            && w.metadata.deletion_timestamp.is_none()
                            && w.admission().is_some()
                            && w.has_quota_reservation()
                    })
                    .max_by_key(|w| w.metadata.creation_timestamp.as_ref().map(|t| t.0))
            })
            .flatten()
            .and_then(|w| w.spec.pod_sets.iter().find(|p| p.name() == DEFAULT_PODSET_NAME))
            .map(|p| p.template.clone());
        BatchJob {
            job,
            admitted_template,
            scheduling: None,
        }
    }

    fn spec(&self) -> k8s_openapi::api::batch::v1::JobSpec {
        self.job.spec.clone().unwrap_or_default()
    }

    /// Partial admission: the admitted count becomes `parallelism` (and `completions` too when the
    /// job asks for them to stay equal).
    fn set_parallelism(&mut self, n: i32) -> bool {
        let follow = b::completions_follow_parallelism(&self.job.metadata);
        let spec = self.job.spec.get_or_insert_with(Default::default);
        let changed = spec.parallelism.unwrap_or(1) != n || (follow && spec.completions != Some(n));
        spec.parallelism = Some(n);
        if follow {
            spec.completions = Some(n);
        }
        changed
    }
}

/// The Job's GroupVersionKind (Kueue's `batch/job` framework).
pub fn gvk() -> GroupVersionKind {
    GroupVersionKind::gvk("batch", "v1", "Job")
}

impl JobKind for BatchJob {
    type Object = Job;

    /// The Job itself (its status counts the pods) and, for a running elastic one, the template its
    /// admitted slice holds.
    async fn load(obj: &Job, workloads: &[Workload], _: &kube::Client) -> Result<Self, kube::Error> {
        Ok(BatchJob::with_workloads(obj.clone(), workloads))
    }

    fn object(&self) -> &Job {
        &self.job
    }

    /// Kueue v0.20 (#15402, #15434): the pods the Job controller made for this Job (its
    /// `batch.kubernetes.io/controller-uid` label), each filling the `main` podset, counted as the
    /// unscheduled-pods tracker counts them. A suspended Job has none to count.
    async fn load_pods_scheduling(&mut self, client: &kube::Client) -> Result<(), kube::Error> {
        if self.is_suspended() {
            self.scheduling = None;
            return Ok(());
        }
        let ns = self.job.metadata.namespace.clone().unwrap_or_default();
        let uid = self.job.metadata.uid.clone().unwrap_or_default();
        let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), &ns)
            .list(&kube::api::ListParams::default().labels(&format!("{}={uid}", b::CONTROLLER_UID_LABEL)))
            .await?;
        self.scheduling = Some(crate::jobframework::count_pods_scheduling(
            pods.items.iter().map(|p| (p, DEFAULT_PODSET_NAME.to_string())),
        ));
        Ok(())
    }

    /// The API server lets a Job's template take new scheduling directives only while it is suspended
    /// with no `startTime`: stopping suspends it, resets `startTime`, then restores the template.
    const STOPS_IN_STEPS: bool = true;

    async fn after_suspend(mut suspended: Job, client: &kube::Client) -> Result<Job, kube::Error> {
        if suspended
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .is_none()
        {
            return Ok(suspended);
        }
        if let Some(status) = suspended.status.as_mut() {
            status.start_time = None;
        }
        let ns = suspended.metadata.namespace.clone().unwrap_or_default();
        let name = suspended.metadata.name.clone().unwrap_or_default();
        kube::Api::<Job>::namespaced(client.clone(), &ns)
            .replace_status(&name, &Default::default(), &suspended)
            .await
    }
}

impl GenericJob for BatchJob {
    fn meta(&self) -> &ObjectMeta {
        &self.job.metadata
    }

    fn gvk(&self) -> GroupVersionKind {
        gvk()
    }

    fn is_suspended(&self) -> bool {
        self.job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
    }

    fn suspend(&mut self) {
        self.job.spec.get_or_insert_with(Default::default).suspend = Some(true);
    }

    fn run_with_podsets_info(&mut self, infos: &[PodSetInfo]) -> Result<(), JobFrameworkError> {
        let [info] = infos else {
            return Err(JobFrameworkError::PodSetsInfoLength {
                want: 1,
                got: infos.len(),
            });
        };
        if b::min_pods_count(&self.job.metadata).is_some() {
            self.set_parallelism(info.count);
        }
        // An elastic Job's pods are let through by the ungater only: one created before Kueue managed
        // it (no gate from the webhook, then given a queue name while suspended) gets the gate here,
        // while its template still takes scheduling directives, so pods added later wait for a slice.
        let mut info = info.clone();
        if crate::api::kueue::is_elastic_job(&self.job.metadata) {
            info.scheduling_gates
                .push(k8s_openapi::api::core::v1::PodSchedulingGate {
                    name: label::ELASTIC_JOB_SCHEDULING_GATE.to_string(),
                });
        }
        let spec = self.job.spec.get_or_insert_with(Default::default);
        merge_into_template(
            spec.template.metadata.get_or_insert_with(Default::default),
            spec.template.spec.get_or_insert_with(Default::default),
            &info,
        )?;
        spec.suspend = Some(false);
        Ok(())
    }

    /// Puts back the podset's original template info and, under partial admission, its original
    /// parallelism. The Job controller's labels on the template stay (the API server would refuse a
    /// template that no longer matches the Job's selector).
    fn restore_podsets_info(&mut self, infos: &[PodSetInfo]) -> bool {
        let Some(first) = infos.first() else {
            return false;
        };
        let mut changed = false;
        if b::min_pods_count(&self.job.metadata).is_some() {
            changed |= self.set_parallelism(first.count);
        }
        let mut info = first.clone();
        let spec = self.job.spec.get_or_insert_with(Default::default);
        let meta = spec.template.metadata.get_or_insert_with(Default::default);
        for key in MANAGED_LABELS {
            if let Some(v) = meta.labels.as_ref().and_then(|l| l.get(key)) {
                info.labels.insert(key.to_string(), v.clone());
            }
        }
        changed |= restore_template(
            meta,
            spec.template.spec.get_or_insert_with(Default::default),
            &info,
        );
        changed
    }

    fn finished(&self) -> Option<Finished> {
        let conditions = self.job.status.as_ref().and_then(|s| s.conditions.as_ref())?;
        conditions
            .iter()
            .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
            .map(|c| Finished {
                success: c.type_ != "Failed",
                message: c.message.clone().unwrap_or_default(),
            })
    }

    /// One podset `main`: the Job's template (a running elastic Job's as its admitted slice holds it)
    /// without the Job controller's labels, Kueue's pod count, and the min-parallelism annotation as
    /// `minCount`.
    fn pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        let spec = self.spec();
        let mut template = self
            .admitted_template
            .clone()
            .unwrap_or_else(|| spec.template.clone());
        if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            for key in MANAGED_LABELS {
                labels.remove(key);
            }
        }
        Ok(vec![PodSet {
            name: Some(DEFAULT_PODSET_NAME.to_string()),
            count: Some(b::pods_count(&spec)),
            min_count: b::min_pods_count(&self.job.metadata),
            // Kueue: the template's TAS annotations, with the completion index as the pod index.
            topology_request: crate::api::kueue::tas::podset_topology_request(
                template.metadata.as_ref(),
                Some(crate::api::kueue::tas::JOB_COMPLETION_INDEX),
            )
            .map_err(JobFrameworkError::PodSets)?,
            template,
        }])
    }

    fn is_active(&self) -> bool {
        self.job.status.as_ref().and_then(|s| s.active).unwrap_or(0) != 0
    }

    fn pods_ready(&self) -> bool {
        let status = self.job.status.clone().unwrap_or_default();
        status.succeeded.unwrap_or(0) + status.ready.unwrap_or(0) >= b::pods_count(&self.spec())
    }

    fn pods_scheduling(&self) -> Option<crate::jobframework::PodsScheduling> {
        self.scheduling.clone()
    }

    fn as_with_reclaimable_pods(&self) -> Option<&dyn JobWithReclaimablePods> {
        Some(self)
    }
}

/// Kueue's `ReclaimablePods`: once fewer completions remain than pods run in parallel, the pods no
/// longer needed give their quota back. An Indexed Job counts its terminal indexes below `completions`
/// (completed, or failed for good), so an elastic scale-down that removed indexes never reclaims more
/// than the shrunk podset holds (kueue#12670, #13117).
impl JobWithReclaimablePods for BatchJob {
    fn reclaimable_pods(&self) -> Vec<ReclaimablePod> {
        let spec = self.spec();
        let status = self.job.status.clone().unwrap_or_default();
        let parallelism = b::parallelism(&spec);
        let completions = spec.completions.unwrap_or(parallelism);
        let terminal = if spec.completion_mode.as_deref() == Some("Indexed") {
            b::terminal_indexes_count(
                status.completed_indexes.as_deref().unwrap_or_default(),
                status.failed_indexes.as_deref().unwrap_or_default(),
                completions,
            )
        } else {
            status.succeeded.unwrap_or(0)
        };
        if parallelism <= 1 || terminal <= 0 {
            return Vec::new();
        }
        let remaining = completions.saturating_sub(terminal).max(0);
        if remaining >= parallelism {
            return Vec::new();
        }
        vec![ReclaimablePod {
            name: DEFAULT_PODSET_NAME.to_string(),
            count: parallelism - remaining,
        }]
    }
}

#[cfg(test)]
mod tests;
