//! RayCluster as a Kueue job (after Kueue's `jobs/raycluster`): podset `head` plus one per worker
//! group, built by the same code that builds the pods (`cluster::podsets`), suspend through `spec.suspend`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ListParams;
use kube::core::GroupVersionKind;
use kube::{Api, Resource, ResourceExt};

use super::demand;
use crate::api::ray::constants as c;

use crate::api::kueue::{PodSet, Workload};
use crate::api::ray::RayCluster;
use crate::jobframework::JobFrameworkError;
use crate::jobframework::interface::{Finished, GenericJob};
use crate::jobframework::job_controller::JobKind;
use crate::jobframework::podset_info::{PodSetInfo, merge_all};
use crate::rayservice::cluster::BuildOptions;
use crate::rayservice::cluster::podsets::cluster_podsets;

pub use crate::rayservice::cluster::podsets::HEAD_PODSET;

/// A queue-labelled RayCluster and the pods it has now, per group (`head` for the head), terminating
/// ones included: an elastic cluster's demand never drops below them, and it is active until they are
/// gone.
pub struct RayClusterJob {
    pub rc: RayCluster,
    pub pods: BTreeMap<String, i64>,
    /// Per podset, what the latest admitted slice holds, while the cluster's controller has not yet
    /// observed its current generation (empty once it has): an elastic cluster's demand does not drop
    /// below it until then (`spec_observed`).
    pub held: BTreeMap<String, i64>,
    /// How its pods stand with the scheduler (Kueue v0.20's PodsScheduled).
    pub scheduling: crate::jobframework::PodsScheduling,
}

impl RayClusterJob {
    /// A cluster with no pods yet.
    pub fn new(rc: RayCluster) -> Self {
        RayClusterJob {
            rc,
            pods: BTreeMap::new(),
            held: BTreeMap::new(),
            scheduling: Default::default(),
        }
    }
}

/// Whether the cluster's controller has reconciled its current spec: `status.observedGeneration` is
/// `metadata.generation`. A cluster no controller reports on (no status, or no `observedGeneration`)
/// has nothing to wait for.
pub fn spec_observed(rc: &RayCluster) -> bool {
    rc.status
        .as_ref()
        .and_then(|s| s.observed_generation)
        .is_none_or(|seen| Some(seen) == rc.metadata.generation)
}

/// The podset counts of the latest admitted slice of `workloads`, while `rc`'s controller has not
/// observed its spec: a pass of that controller that read an older spec (more replicas) and that slice
/// may still create pods after the job controller's pod list, so shrinking the slice now would leave
/// them uncovered (found by `chaos --scenario clusters`: a worker briefly beyond its Workload after a
/// scale-down). Its passes run one at a time, so once it reports the current generation every pod it
/// made from an older one is in the pods listed after.
fn held_until_observed(rc: &RayCluster, workloads: &[Workload]) -> BTreeMap<String, i64> {
    if spec_observed(rc) {
        return BTreeMap::new();
    }
    demand::admitted_slice(workloads)
        .map(|w| {
            w.spec
                .pod_sets
                .iter()
                .map(|p| (p.name().to_string(), i64::from(p.count())))
                .collect()
        })
        .unwrap_or_default()
}

impl JobKind for RayClusterJob {
    type Object = RayCluster;

    async fn load(
        obj: &RayCluster,
        workloads: &[Workload],
        client: &kube::Client,
    ) -> Result<Self, kube::Error> {
        // Read before the pods are listed: a pass that observed the spec made its pods before.
        let held = held_until_observed(obj, workloads);
        let ns = obj.namespace().unwrap_or_default();
        let selector = format!("{}={}", c::LABEL_CLUSTER, obj.name_any());
        let pods = Api::<Pod>::namespaced(client.clone(), &ns)
            .list(&ListParams::default().labels(&selector))
            .await?;
        let scheduling = demand::pods_scheduling(&pods.items);
        let pods = demand::pods_until_gone(&pods.items)
            .remove(&obj.name_any())
            .unwrap_or_default();
        Ok(RayClusterJob {
            rc: obj.clone(),
            pods,
            held,
            scheduling,
        })
    }

    fn object(&self) -> &RayCluster {
        &self.rc
    }

    /// The pods it owns going away, and its Workloads' admission, change what it may run.
    fn watches(
        controller: kube::runtime::Controller<RayCluster>,
        client: &kube::Client,
    ) -> kube::runtime::Controller<RayCluster> {
        controller.owns(
            Api::<Pod>::all(client.clone()),
            kube::runtime::watcher::Config::default().labels(c::LABEL_CLUSTER),
        )
    }
}

impl RayClusterJob {
    /// The podsets of an elastic cluster: its spec's counts (what the autoscaler wrote), never below
    /// the pods it has (terminating ones included) nor below its admitted slice while its controller
    /// has not observed its spec. An elastic RayJob's Workload takes its cluster's counts from here.
    pub fn elastic_pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        let mut podsets = raycluster_podsets(&self.rc)?;
        for ps in &mut podsets {
            let group = ps.name.clone().unwrap_or_default();
            let have = self.pods.get(&group).copied().unwrap_or(0);
            let held = self.held.get(&group).copied().unwrap_or(0);
            ps.count = Some(i32::try_from(i64::from(ps.count()).max(have).max(held)).unwrap_or(i32::MAX));
        }
        Ok(podsets)
    }
}

/// The podsets of a RayCluster, or an error naming what is wrong with its spec.
pub fn raycluster_podsets(rc: &RayCluster) -> Result<Vec<PodSet>, JobFrameworkError> {
    cluster_podsets(rc, &BuildOptions::default()).map_err(|e| JobFrameworkError::PodSets(e.to_string()))
}

impl GenericJob for RayClusterJob {
    fn meta(&self) -> &ObjectMeta {
        &self.rc.metadata
    }

    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk(
            &RayCluster::group(&()),
            &RayCluster::version(&()),
            &RayCluster::kind(&()),
        )
    }

    fn is_suspended(&self) -> bool {
        self.rc.spec.suspend == Some(true)
    }

    fn suspend(&mut self) {
        self.rc.spec.suspend = Some(true);
    }

    /// Checks that the admission's info fits the cluster's templates (one per podset, no key set to
    /// another value), then unsuspends it. Nothing of the admission is written into the spec, unlike
    /// Kueue, which merges it into the pod templates: `workerGroupSpecs` is an atomic list, so one
    /// write into a template makes our field manager the owner of the whole list, and the user's
    /// unchanged `kubectl apply --server-side` then conflicts on `.spec.workerGroupSpecs` (issue 58).
    /// The RayCluster controller puts each podset's node selector, tolerations, labels and
    /// annotations on the pods it creates, from the admitted Workload (`gate::decide_standalone`), as
    /// it does for a RayService's children.
    fn run_with_podsets_info(&mut self, infos: &[PodSetInfo]) -> Result<(), JobFrameworkError> {
        let mut probe = self.rc.spec.clone();
        let head = &mut probe.head_group_spec.template;
        let mut templates: Vec<(&mut ObjectMeta, &mut k8s_openapi::api::core::v1::PodSpec)> = Vec::new();
        templates.push((
            head.metadata.get_or_insert_with(Default::default),
            head.spec.get_or_insert_with(Default::default),
        ));
        for g in probe.worker_group_specs.iter_mut().flatten() {
            let t = &mut g.template;
            templates.push((
                t.metadata.get_or_insert_with(Default::default),
                t.spec.get_or_insert_with(Default::default),
            ));
        }
        merge_all(templates.into_iter(), infos)?;
        self.rc.spec.suspend = Some(false);
        Ok(())
    }

    /// Nothing to restore: `run_with_podsets_info` wrote nothing into the spec (writing the saved
    /// originals back would also take the user's templates, and undo their edits since).
    fn restore_podsets_info(&mut self, _infos: &[PodSetInfo]) -> bool {
        false
    }

    fn finished(&self) -> Option<Finished> {
        // A RayCluster runs until deleted.
        None
    }

    /// Head and worker groups. An elastic cluster's counts never drop below the pods it has,
    /// terminating ones and workers named in `workersToDelete` included (a scale-down releases quota
    /// once they are gone), nor below its admitted slice while its controller has not observed its
    /// spec; a name left in `workersToDelete` after its pod went counts for nothing.
    /// A plain cluster's counts are its spec's.
    fn pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        if !self.uses_slices() {
            return raycluster_podsets(&self.rc);
        }
        self.elastic_pod_sets()
    }

    /// While any of its pods exists (terminating ones included), and while a suspended cluster's
    /// controller has not said so: stopping gives the quota back only once they are gone and no pod
    /// can still come. The pods listed here are not enough: the RayCluster controller may have read
    /// the admitted Workload before the suspend and create a pod after this list (found by `chaos
    /// --scenario clusters`: a pod briefly running on no Workload). That controller's passes run
    /// one at a time and list the pods afresh, so once it reports `RayClusterSuspended` for the
    /// suspending generation, every pod it made is in a list it read and is gone.
    fn is_active(&self) -> bool {
        self.pods.values().any(|n| *n > 0) || (self.is_suspended() && !suspension_acknowledged(&self.rc))
    }

    fn pods_ready(&self) -> bool {
        !self.is_suspended() && cluster_pods_ready(&self.rc)
    }

    fn pods_scheduling(&self) -> Option<crate::jobframework::PodsScheduling> {
        Some(self.scheduling.clone())
    }
}

/// The cluster's controller has seen this generation (whose `suspend` is true) and reports every pod
/// gone: `status.observedGeneration == metadata.generation` with `RayClusterSuspended=True` and
/// `RayClusterSuspending` not True. A controller that reports no suspend conditions (KubeRay with
/// its status conditions off) has acknowledged once it observed the generation; a cluster no
/// controller reports on (no status, or none with `observedGeneration`: no Ray operator runs it)
/// has nothing to wait for, and its listed pods are all there is to go by.
///
/// A cluster MultiKueue runs on a worker (`spec.managedBy`) shows its copy's status, whose
/// `observedGeneration` counts the copy's generations, not this object's: equal by chance, it
/// acknowledged a suspension while the copy still ran (the quota given back early). Only an explicit
/// `RayClusterSuspended=True` at this generation counts there: the released status the manager writes
/// once the copies are gone.
pub fn suspension_acknowledged(rc: &RayCluster) -> bool {
    use crate::api::conditions::{find, is_true};
    let Some(s) = rc.status.as_ref() else {
        return true;
    };
    let Some(seen) = s.observed_generation else {
        return true;
    };
    if Some(seen) != rc.metadata.generation {
        return false;
    }
    let conds = s.conditions.as_deref();
    let mirrored = rc.spec.managed_by.as_deref() == Some(crate::api::kueue::multikueue::MANAGED_BY);
    !is_true(conds, c::COND_RAY_CLUSTER_SUSPENDING)
        && (is_true(conds, c::COND_RAY_CLUSTER_SUSPENDED)
            || (!mirrored && find(conds, c::COND_RAY_CLUSTER_SUSPENDED).is_none()))
}

/// Every pod of the cluster Running and Ready, as its controller last counted them: the head
/// (`HeadPodReady=True`) and as many ready workers as desired. Not `state: ready`, which KubeRay
/// keeps once reached: a pod that fails afterwards must show, for waitForPodsReady's recovery.
pub fn cluster_pods_ready(rc: &RayCluster) -> bool {
    let Some(s) = rc.status.as_ref() else {
        return false;
    };
    let head = crate::api::conditions::is_true(
        s.conditions.as_deref(),
        crate::api::ray::constants::COND_HEAD_POD_READY,
    );
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
        let ps = RayClusterJob::new(cluster(false)).pod_sets().unwrap();
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
        let ps = RayClusterJob::new(cluster(true)).pod_sets().unwrap();
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

    /// Issue 58: admission writes nothing into the user's templates (the RayCluster controller puts
    /// the info on the pods), but still refuses info that does not fit them, as Kueue's merge does.
    #[test]
    fn run_checks_the_info_and_unsuspends_without_writing_into_the_templates() {
        let mut job = RayClusterJob::new(cluster(false));
        job.suspend();
        let before = job.rc.spec.clone();
        let info = |n: &str| PodSetInfo {
            name: n.into(),
            count: 1,
            node_selector: [("pool".to_string(), "a".to_string())].into(),
            ..Default::default()
        };
        let infos = vec![info("head"), info("small"), info("multi")];
        job.run_with_podsets_info(&infos).unwrap();
        assert!(!job.is_suspended());
        let mut after = job.rc.spec.clone();
        after.suspend = before.suspend;
        assert_eq!(after, before, "the templates are the user's");
        assert!(matches!(
            job.run_with_podsets_info(&infos[..2]),
            Err(JobFrameworkError::PodSetsInfoLength { want: 3, got: 2 })
        ));
        let mut mine = RayClusterJob::new(cluster(false));
        mine.rc
            .spec
            .head_group_spec
            .template
            .spec
            .get_or_insert_with(Default::default)
            .node_selector = Some([("pool".to_string(), "mine".to_string())].into());
        assert!(matches!(
            mine.run_with_podsets_info(&infos),
            Err(JobFrameworkError::PodSetUpdateConflict { .. })
        ));
        let originals: Vec<PodSetInfo> = RayClusterJob::new(cluster(false))
            .pod_sets()
            .unwrap()
            .iter()
            .map(PodSetInfo::from_podset)
            .collect();
        assert!(!job.restore_podsets_info(&originals), "nothing to restore");
    }
}

/// The generic reconciler's decisions for RayCluster jobs (Kueue's `ReconcileGenericJob` order).
#[cfg(test)]
mod plan_tests {
    use super::*;
    use crate::admission as conditions;
    use crate::api::kueue::Admission;
    use crate::api::kueue::constants::label;
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
        if suspended {
            // A suspended cluster with no pod, as its controller reports it.
            rc.metadata.generation = Some(1);
            rc.status = Some(serde_json::from_value(serde_json::json!({
                "observedGeneration": 1,
                "conditions": [{"type": "RayClusterSuspended", "status": "True", "reason": "RayClusterSuspended",
                                "message": "all pods are deleted", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
            })).unwrap());
        }
        RayClusterJob::new(rc)
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
                by: conditions::EvictedBy::Preempted(crate::queue::PreemptedReason::InClusterQueue),
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
        // Kueue compares podsets by count and container resources (an image or a name is not a podset
        // change): the other cluster asks for more CPU.
        let mut other = rc(true, true);
        other
            .rc
            .spec
            .head_group_spec
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .resources = serde_json::from_value(serde_json::json!({"requests": {"cpu": "2"}})).unwrap();
        let other_wl = wl_for(&other, "w", false, false);
        let cases: Vec<(&str, &RayClusterJob, Vec<Workload>, Step)> = vec![
            ("no queue label", &unqueued, vec![], Step::Ignore),
            ("suspended, no workload", &suspended, vec![], Step::CreateWorkload),
            ("running, no workload", &running, vec![], Step::SuspendThenCreate),
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
            j.rc.metadata.annotations = Some([(label::ELASTIC_JOB.to_string(), "true".to_string())].into());
            j.rc.spec.worker_group_specs = Some(vec![serde_json::from_value(serde_json::json!({"groupName": "w", "replicas": workers, "template": {"spec": {"containers": [{"name": "w"}]}}})).unwrap()]);
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

/// A running cluster edited so that its podsets no longer match its admitted Workload (Kueue's
/// `EquivalentToWorkload`: counts and container resources, tolerations ignored once admitted).
#[cfg(test)]
mod mismatch_tests {
    use super::*;
    use crate::admission as conditions;
    use crate::api::kueue::constants::label;
    use crate::api::kueue::{Admission, PodSetAssignment};
    use crate::jobframework::job_controller::{Step, plan};

    fn job(suspended: bool, workers: i32, cpu: &str, pods: i64) -> RayClusterJob {
        let mut rc: RayCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "default", "uid": "u1", "labels": {label::QUEUE_NAME: "lq"}},
            "spec": {
                "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "ray:1", "resources": {"requests": {"cpu": "1"}}}]}}},
                "workerGroupSpecs": [{"groupName": "w", "replicas": workers, "template": {"spec": {"containers": [{"name": "w", "image": "ray:1", "resources": {"requests": {"cpu": cpu}}}]}}}]
            }
        }))
        .unwrap();
        rc.spec.suspend = Some(suspended);
        rc.metadata.generation = Some(2);
        if suspended && pods == 0 {
            // What the RayCluster controller reports once a suspend has taken every pod.
            rc.status = Some(serde_json::from_value(serde_json::json!({
                "observedGeneration": 2,
                "conditions": [{"type": "RayClusterSuspended", "status": "True", "reason": "RayClusterSuspended",
                                "message": "all pods are deleted", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
            })).unwrap());
        }
        let mut j = RayClusterJob::new(rc);
        if pods > 0 {
            j.pods = [("head".to_string(), 1), ("w".to_string(), pods - 1)].into();
        }
        j
    }

    fn admitted_for(j: &RayClusterJob) -> Workload {
        let mut w = Workload::build("w", "default").queue("lq").build();
        w.spec.pod_sets = j.pod_sets().unwrap();
        let assignments = w
            .spec
            .pod_sets
            .iter()
            .map(|p| PodSetAssignment {
                name: p.name().to_string(),
                count: p.count,
                ..Default::default()
            })
            .collect();
        w.status = Some(conditions::admitted(
            &w,
            Admission {
                cluster_queue: "cq".into(),
                pod_set_assignments: assignments,
            },
            jiff::Timestamp::UNIX_EPOCH,
        ));
        w
    }

    #[test]
    fn edits_of_counts_or_requests_stop_a_running_cluster_and_nothing_else_does() {
        let admitted = admitted_for(&job(false, 1, "1", 2));
        let mut image = job(false, 1, "1", 2);
        image.rc.spec.worker_group_specs.as_mut().unwrap()[0]
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .image = Some("ray:2".into());
        let mut tolerated = job(false, 1, "1", 2);
        tolerated.rc.spec.worker_group_specs.as_mut().unwrap()[0]
            .template
            .spec
            .as_mut()
            .unwrap()
            .tolerations = Some(vec![
            serde_json::from_value(serde_json::json!({"key": "spot", "operator": "Exists"})).unwrap(),
        ]);
        let mut elastic = job(false, 1, "2", 2);
        elastic.rc.metadata.annotations = Some([(label::ELASTIC_JOB.to_string(), "true".to_string())].into());
        let mut elastic_admitted = admitted.clone();
        elastic_admitted.metadata.annotations = elastic.rc.metadata.annotations.clone();
        let mut unacknowledged = job(true, 6, "1", 0);
        unacknowledged.rc.status = Some(serde_json::from_value(serde_json::json!({
            "observedGeneration": 2,
            "conditions": [{"type": "RayClusterSuspending", "status": "True", "reason": "RayClusterSuspending",
                            "message": "spec.suspend is true: deleting all pods", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
        })).unwrap());
        let mut stale_ack = job(true, 6, "1", 0);
        stale_ack.rc.metadata.generation = Some(3);
        let cases: Vec<(&str, RayClusterJob, &Workload, Step)> = vec![
            (
                "replicas raised",
                job(false, 6, "1", 2),
                &admitted,
                Step::StopNotMatching("w".into()),
            ),
            (
                "replicas lowered",
                job(false, 0, "1", 2),
                &admitted,
                Step::StopNotMatching("w".into()),
            ),
            (
                "requests changed (Recreate to bigger workers)",
                job(false, 1, "2", 2),
                &admitted,
                Step::StopNotMatching("w".into()),
            ),
            (
                "requests changed, Recreate between old and new pods: stopped before the Workload goes",
                job(false, 1, "2", 0),
                &admitted,
                Step::StopNotMatching("w".into()),
            ),
            (
                "an image bump is no podset change",
                image,
                &admitted,
                Step::Nothing,
            ),
            (
                "tolerations injected by admission are ignored",
                tolerated,
                &admitted,
                Step::Nothing,
            ),
            (
                "stopped, pods still terminating: wait",
                job(true, 6, "1", 2),
                &admitted,
                Step::Nothing,
            ),
            (
                "stopped, pods gone: the reservation goes",
                job(true, 6, "1", 0),
                &admitted,
                Step::DeleteWorkloads(vec!["w".into()]),
            ),
            (
                "stopped, no pod listed, the cluster's controller still suspending: wait",
                unacknowledged,
                &admitted,
                Step::Nothing,
            ),
            (
                "stopped, no pod listed, only an older generation reported suspended: wait",
                stale_ack,
                &admitted,
                Step::Nothing,
            ),
            (
                "elastic, new requests: stopped as a plain job",
                elastic,
                &elastic_admitted,
                Step::StopNotMatching("w".into()),
            ),
        ];
        for (name, j, wl, want) in cases {
            assert_eq!(plan(&j, &[wl]).unwrap(), want, "{name}");
        }
    }

    /// The race `chaos --scenario clusters` found (a pod created by a pass that read the admitted
    /// Workload before the suspend, after the job controller's pod list): the quota waits for the
    /// cluster's controller to report the suspend, or for no controller at all.
    #[test]
    fn a_suspended_cluster_is_active_until_its_controller_reports_the_suspend() {
        let status = |v: serde_json::Value| Some(serde_json::from_value(v).unwrap());
        let mut j = job(true, 1, "1", 0);
        assert!(!j.is_active(), "reported Suspended at this generation");
        j.rc.status = None;
        assert!(!j.is_active(), "no controller reports on it");
        j.rc.status = status(serde_json::json!({"observedGeneration": 1}));
        assert!(j.is_active(), "the controller has not seen the suspend yet");
        j.rc.status = status(serde_json::json!({"observedGeneration": 2}));
        assert!(
            !j.is_active(),
            "a controller without suspend conditions has seen it"
        );
        let running = job(false, 1, "1", 0);
        assert!(!running.is_active(), "running with no pod yet");
    }

    #[test]
    fn an_elastic_cluster_demands_at_least_the_pods_it_still_has() {
        let mut j = job(false, 1, "1", 4);
        j.rc.metadata.annotations = Some([(label::ELASTIC_JOB.to_string(), "true".to_string())].into());
        let counts = |j: &RayClusterJob| {
            j.pod_sets()
                .unwrap()
                .iter()
                .map(|p| p.count())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            counts(&j),
            vec![1, 3],
            "three workers run while the spec asks for one"
        );
        j.pods.clear();
        assert_eq!(counts(&j), vec![1, 1]);
        assert!(!j.is_active(), "no pod left");
        let plain = job(false, 1, "1", 4);
        assert_eq!(
            counts(&plain),
            vec![1, 1],
            "a plain cluster's podsets are its spec's"
        );
        assert!(plain.is_active());
    }

    /// An elastic cluster scaled down does not give back its slice's quota before its controller has
    /// reconciled the new spec: until then a pass on the old spec may still create the pods the slice
    /// covers. Once observed, the demand is the pods and the spec again.
    #[test]
    fn an_elastic_scale_down_waits_for_the_controller_to_observe_it() {
        let mut j = job(false, 1, "1", 1);
        j.rc.metadata.annotations = Some([(label::ELASTIC_JOB.to_string(), "true".to_string())].into());
        let status = |v: serde_json::Value| Some(serde_json::from_value(v).unwrap());
        j.rc.metadata.generation = Some(3);
        j.rc.status = status(serde_json::json!({"observedGeneration": 2}));
        let slice = admitted_for(&job(false, 3, "1", 0));
        let counts = |j: &RayClusterJob| {
            j.pod_sets()
                .unwrap()
                .iter()
                .map(|p| p.count())
                .collect::<Vec<_>>()
        };
        j.held = super::held_until_observed(&j.rc, std::slice::from_ref(&slice));
        assert_eq!(
            counts(&j),
            vec![1, 3],
            "generation 3 not observed: the slice's three workers are held"
        );
        j.rc.status = status(serde_json::json!({"observedGeneration": 3}));
        j.held = super::held_until_observed(&j.rc, std::slice::from_ref(&slice));
        assert_eq!(counts(&j), vec![1, 1], "observed: the one worker left");
        j.rc.status = None;
        assert!(
            super::held_until_observed(&j.rc, std::slice::from_ref(&slice)).is_empty(),
            "no controller reports: nothing to wait for"
        );
    }

    /// Found by `chaos --scenario clusters` (seed 3): a `workersToDelete` name whose pod is gone (the
    /// autoscaler has not cleared the list yet) held one worker more than the cluster runs, for good.
    #[test]
    fn a_stale_workers_to_delete_name_holds_nothing() {
        let mut j = job(false, 1, "1", 2);
        j.rc.metadata.annotations = Some([(label::ELASTIC_JOB.to_string(), "true".to_string())].into());
        j.rc.spec.worker_group_specs.as_mut().unwrap()[0].scale_strategy =
            Some(serde_json::from_value(serde_json::json!({"workersToDelete": ["gone"]})).unwrap());
        let counts = |j: &RayClusterJob| {
            j.pod_sets()
                .unwrap()
                .iter()
                .map(|p| p.count())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            counts(&j),
            vec![1, 1],
            "the named pod is gone: only the one that runs counts"
        );
        j.pods.insert("w".into(), 2);
        assert_eq!(
            counts(&j),
            vec![1, 2],
            "while the named pod still exists it counts"
        );
    }
}
