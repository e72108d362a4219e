//! Sketches of the next job kinds written against the framework's contract alone (what `jobframework`
//! exports at its top, see `mod.rs`): a batch/v1 Job, a Pod group and a RayJob, as Kueue's
//! `pkg/controller/jobs/{job,pod,rayjob}` adapt them. Each test double names nothing below the framework's
//! top (no `core`, no submodule path), which is the point: if a kind needs more, the contract grows.
//! The tests drive each through the reconciler's pure decision, `plan`, and the slice-chain queries.

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::GroupVersionKind;

use crate::api::kueue::builders::podset;
use crate::api::kueue::constants::label;
use crate::api::kueue::{PodSet, ReclaimablePod, Workload};
use crate::jobframework as framework;
use framework::{
    Finished, GenericJob, JobFrameworkError, JobWithCustomStop, JobWithReclaimablePods, JobWithSkip,
    PodSetInfo, Step, StopReason, TopLevelJob,
};

fn meta(name: &str, queue: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("team-a".into()),
        uid: Some(format!("uid-{name}")),
        labels: queue.map(|q| [(label::QUEUE_NAME.to_string(), q.to_string())].into()),
        ..Default::default()
    }
}

fn templates(podsets: &mut [PodSet]) -> impl ExactSizeIterator<Item = (&mut ObjectMeta, &mut PodSpec)> {
    podsets.iter_mut().map(|p| {
        let t = &mut p.template;
        (
            t.metadata.get_or_insert_with(Default::default),
            t.spec.get_or_insert_with(Default::default),
        )
    })
}

fn restore_all(podsets: &mut [PodSet], infos: &[PodSetInfo]) -> bool {
    let mut changed = false;
    for ((m, s), info) in templates(podsets).zip(infos) {
        changed |= framework::restore_template(m, s, info);
    }
    changed
}

/// batch/v1 Job: one podset of `parallelism` pods; `spec.suspend`; pods that succeeded once no more are
/// needed give their quota back (Kueue's `JobWithReclaimablePods`).
struct BatchJob {
    meta: ObjectMeta,
    suspend: bool,
    main: Vec<PodSet>,
    completions: i32,
    succeeded: i32,
    active: i32,
}

impl JobWithReclaimablePods for BatchJob {
    fn reclaimable_pods(&self) -> Vec<ReclaimablePod> {
        let parallelism = self.main[0].count.unwrap_or(1);
        let remaining = (self.completions - self.succeeded).max(0);
        let reclaim = (parallelism - remaining).max(0);
        if reclaim == 0 {
            vec![]
        } else {
            vec![ReclaimablePod {
                name: "main".into(),
                count: reclaim,
            }]
        }
    }
}

impl GenericJob for BatchJob {
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk("batch", "v1", "Job")
    }
    fn is_suspended(&self) -> bool {
        self.suspend
    }
    fn suspend(&mut self) {
        self.suspend = true;
    }
    fn run_with_podsets_info(&mut self, infos: &[PodSetInfo]) -> Result<(), JobFrameworkError> {
        framework::merge_all(templates(&mut self.main), infos)?;
        self.suspend = false;
        Ok(())
    }
    fn restore_podsets_info(&mut self, infos: &[PodSetInfo]) -> bool {
        restore_all(&mut self.main, infos)
    }
    fn finished(&self) -> Option<Finished> {
        (self.succeeded >= self.completions).then(|| Finished {
            success: true,
            message: "Job finished successfully".into(),
        })
    }
    fn pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        Ok(self.main.clone())
    }
    fn is_active(&self) -> bool {
        self.active > 0
    }
    fn pods_ready(&self) -> bool {
        self.active >= self.main[0].count.unwrap_or(1)
    }
    fn as_with_reclaimable_pods(&self) -> Option<&dyn JobWithReclaimablePods> {
        Some(self)
    }
}

/// A Pod group (`kueue.x-k8s.io/pod-group-name`): one podset per role, held by a scheduling gate rather
/// than a `suspend` field; it stops by deleting its pods (Kueue's `JobWithCustomStop`) and owns its
/// workload whatever the pods' owners say (`TopLevelJob`).
struct PodGroup {
    meta: ObjectMeta,
    gated: bool,
    roles: Vec<PodSet>,
    running: usize,
    deleted_for: Option<StopReason>,
}

impl JobWithCustomStop for PodGroup {
    fn stop(&mut self, infos: &[PodSetInfo], reason: StopReason) -> bool {
        let changed = self.running > 0 || !self.gated;
        restore_all(&mut self.roles, infos);
        self.running = 0;
        self.gated = true;
        self.deleted_for = Some(reason);
        changed
    }
}

impl TopLevelJob for PodGroup {
    fn is_top_level(&self) -> bool {
        true
    }
}

impl GenericJob for PodGroup {
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk("", "v1", "Pod")
    }
    fn is_suspended(&self) -> bool {
        self.gated
    }
    fn suspend(&mut self) {
        self.gated = true;
    }
    fn run_with_podsets_info(&mut self, infos: &[PodSetInfo]) -> Result<(), JobFrameworkError> {
        framework::merge_all(templates(&mut self.roles), infos)?;
        self.gated = false;
        Ok(())
    }
    fn restore_podsets_info(&mut self, infos: &[PodSetInfo]) -> bool {
        restore_all(&mut self.roles, infos)
    }
    fn finished(&self) -> Option<Finished> {
        None
    }
    fn pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        Ok(self.roles.clone())
    }
    fn is_active(&self) -> bool {
        self.running > 0
    }
    fn pods_ready(&self) -> bool {
        self.running
            == self
                .roles
                .iter()
                .map(|p| p.count.unwrap_or(1) as usize)
                .sum::<usize>()
    }
    fn as_top_level(&self) -> Option<&dyn TopLevelJob> {
        Some(self)
    }
    fn as_with_custom_stop(&mut self) -> Option<&mut dyn JobWithCustomStop> {
        Some(self)
    }
}

/// RayJob: a submitter, a head and worker groups as podsets; a RayJob that runs on an existing cluster
/// (`spec.clusterSelector`) is not queued itself (Kueue's `JobWithSkip`).
struct RayJob {
    meta: ObjectMeta,
    suspend: bool,
    cluster_selector: bool,
    podsets: Vec<PodSet>,
}

impl JobWithSkip for RayJob {
    fn skip(&self) -> bool {
        self.cluster_selector
    }
}

impl GenericJob for RayJob {
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk("ray.io", "v1", "RayJob")
    }
    fn is_suspended(&self) -> bool {
        self.suspend
    }
    fn suspend(&mut self) {
        self.suspend = true;
    }
    fn run_with_podsets_info(&mut self, infos: &[PodSetInfo]) -> Result<(), JobFrameworkError> {
        framework::merge_all(templates(&mut self.podsets), infos)?;
        self.suspend = false;
        Ok(())
    }
    fn restore_podsets_info(&mut self, infos: &[PodSetInfo]) -> bool {
        restore_all(&mut self.podsets, infos)
    }
    fn finished(&self) -> Option<Finished> {
        None
    }
    fn pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        Ok(self.podsets.clone())
    }
    fn is_active(&self) -> bool {
        !self.suspend
    }
    fn pods_ready(&self) -> bool {
        false
    }
    fn as_with_skip(&self) -> Option<&dyn JobWithSkip> {
        Some(self)
    }
}

fn batch(queue: Option<&str>) -> BatchJob {
    BatchJob {
        meta: meta("pi", queue),
        suspend: true,
        main: vec![podset("main", 3, [("cpu", "1")])],
        completions: 4,
        succeeded: 0,
        active: 0,
    }
}

fn pod_group() -> PodGroup {
    PodGroup {
        meta: meta("group", Some("lq")),
        gated: true,
        roles: vec![
            podset("driver", 1, [("cpu", "1")]),
            podset("workers", 2, [("cpu", "2")]),
        ],
        running: 0,
        deleted_for: None,
    }
}

fn ray_job(cluster_selector: bool) -> RayJob {
    RayJob {
        meta: meta("rj", Some("lq")),
        suspend: true,
        cluster_selector,
        podsets: vec![
            podset("submitter", 1, [("cpu", "500m")]),
            podset("head", 1, [("cpu", "1")]),
            podset("workers", 2, [("cpu", "1")]),
        ],
    }
}

/// A Workload for `job` holding quota in `cq`, built the way a kind's tests stage one.
fn admitted_for(job: &dyn GenericJob, name: &str) -> Workload {
    let mut w = Workload::build(name, "team-a").queue("lq").build();
    w.spec.pod_sets = job.pod_sets().unwrap();
    let admission = crate::api::kueue::Admission {
        cluster_queue: "cq".into(),
        pod_set_assignments: vec![],
    };
    w.status = Some(crate::admission::admitted(
        &w,
        admission,
        jiff::Timestamp::UNIX_EPOCH,
    ));
    w
}

#[test]
fn each_kind_gets_one_workload_then_starts_when_admitted() {
    let jobs: Vec<(&str, Box<dyn GenericJob>)> = vec![
        ("batch Job", Box::new(batch(Some("lq")))),
        ("Pod group", Box::new(pod_group())),
        ("RayJob", Box::new(ray_job(false))),
    ];
    for (kind, job) in &jobs {
        assert_eq!(
            framework::plan(job.as_ref(), &[]).unwrap(),
            Step::CreateWorkload,
            "{kind}"
        );
        let wl = admitted_for(job.as_ref(), "wl");
        assert_eq!(
            framework::plan(job.as_ref(), &[&wl]).unwrap(),
            Step::Start("wl".into()),
            "{kind}"
        );
    }
    assert_eq!(
        framework::plan(&batch(None), &[]).unwrap(),
        Step::Ignore,
        "no queue label"
    );
}

#[test]
fn admitted_info_goes_onto_the_templates_and_comes_back_off() {
    let mut group = pod_group();
    let infos: Vec<PodSetInfo> = group
        .roles
        .iter()
        .map(|p| PodSetInfo {
            name: p.name().to_string(),
            count: p.count.unwrap_or(1),
            node_selector: [("pool".to_string(), "spot".to_string())].into(),
            ..Default::default()
        })
        .collect();
    // What the templates held before admission, as Kueue keeps it to restore on stop.
    let original: Vec<PodSetInfo> = infos
        .iter()
        .map(|i| PodSetInfo {
            name: i.name.clone(),
            count: i.count,
            ..Default::default()
        })
        .collect();
    group.run_with_podsets_info(&infos).unwrap();
    assert!(!group.is_suspended());
    let selector = |p: &PodSet| {
        p.template
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default()
    };
    assert!(
        group
            .roles
            .iter()
            .all(|p| selector(p).get("pool").map(String::as_str) == Some("spot"))
    );
    group.running = 3;
    let stop = group.as_with_custom_stop().expect("a Pod group stops itself");
    assert!(stop.stop(&original, StopReason::WorkloadEvicted));
    assert!(
        group.roles.iter().all(|p| selector(p).is_empty()),
        "the injected node selector is gone"
    );
    assert_eq!(
        (group.running, group.deleted_for),
        (0, Some(StopReason::WorkloadEvicted))
    );
}

#[test]
fn optional_capabilities_answer_only_where_a_kind_opts_in() {
    let mut job = batch(Some("lq"));
    job.succeeded = 2;
    let reclaim = job
        .as_with_reclaimable_pods()
        .expect("a batch Job reclaims")
        .reclaimable_pods();
    assert_eq!(
        reclaim,
        vec![ReclaimablePod {
            name: "main".into(),
            count: 1
        }],
        "2 of 4 left with 3 in parallel"
    );
    assert!(job.as_with_skip().is_none() && job.as_top_level().is_none());
    assert!(ray_job(true).as_with_skip().is_some_and(|s| s.skip()));
    assert!(!ray_job(false).as_with_skip().is_some_and(|s| s.skip()));
    assert!(pod_group().as_top_level().is_some_and(|t| t.is_top_level()));
}

#[test]
fn slice_chain_queries_read_the_workload_alone() {
    let job = ray_job(false);
    let old = admitted_for(&job, "old");
    let mut new = admitted_for(&job, "new");
    new.metadata.annotations = Some(
        [(
            label::WORKLOAD_SLICE_REPLACEMENT_FOR.to_string(),
            "team-a/old".to_string(),
        )]
        .into(),
    );
    assert_eq!(
        framework::replacement_for(&new).map(|k| k.name),
        Some("old".to_string())
    );
    assert_eq!(framework::replacement_for(&old), None);
    let cause = crate::admission::EvictionCause {
        by: crate::admission::EvictedBy::Preempted(crate::queue::PreemptedReason::InClusterQueue),
        message: "m".into(),
    };
    assert!(!framework::is_evicted(&old));
    let mut evicted = old.clone();
    evicted.status = crate::admission::evicted(&old, &cause, jiff::Timestamp::UNIX_EPOCH);
    assert!(framework::is_evicted(&evicted));
    assert_eq!(
        framework::plan(&job, &[&evicted]).unwrap(),
        Step::Stop("old".into())
    );
}
