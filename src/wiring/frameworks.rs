//! The registry of job kinds (Kueue's integration registry): which kinds the generic job reconciler
//! runs for, picked by `integrations.frameworks`. The job framework itself names no kind.

use kube::core::GroupVersionKind;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::kueue::config::Frameworks;
use crate::api::ray::{RayCluster, RayJob, RayService};
use crate::jobframework::job_controller::{self, JobContext, JobKind};
use crate::jobs::batch::{self, BatchJob};
use crate::jobs::pod::{self, PodJob};
use crate::rayservice::job::multikueue::RayAdapter;
use crate::rayservice::job::raycluster::RayClusterJob;
use crate::rayservice::job::rayjob::RayJobJob;
use crate::rayservice::job::rayservice::RayServiceJob;

/// The kinds managed: a job whose controller owner is one of them is its parent's business.
pub fn managed_kinds(f: Frameworks) -> Vec<GroupVersionKind> {
    let ray = crate::rayservice::job::managed_kinds();
    let mut kinds = Vec::new();
    if f.batch_job {
        kinds.push(batch::gvk());
    }
    if f.pod {
        kinds.push(pod::gvk());
    }
    kinds.extend(ray.into_iter().filter(|g| match g.kind.as_str() {
        "RayCluster" => f.ray_cluster,
        "RayService" => f.ray_service,
        "RayJob" => f.ray_job,
        _ => true,
    }));
    kinds
}

fn spawn_kind<J: JobKind>(jobs: &JobContext, cancel: &CancellationToken) -> JoinHandle<()> {
    let c = cancel.clone();
    tokio::spawn(job_controller::run::<J>(jobs.clone(), async move {
        c.cancelled().await
    }))
}

/// The MultiKueue controllers' options with the adapters of the kinds managed that have one (the batch
/// Job, the Pod and the Ray kinds); `None` when MultiKueue is off or no kind has an adapter.
pub fn multikueue_options(
    f: Frameworks,
    settings: &Option<crate::multikueue::Settings>,
) -> Option<crate::multikueue::Options> {
    let s = settings.as_ref()?;
    let mut adapters: Vec<std::sync::Arc<dyn crate::jobframework::multikueue::MultiKueueAdapter>> =
        Vec::new();
    if f.batch_job {
        adapters.push(std::sync::Arc::new(batch::multikueue::BatchJobAdapter));
    }
    if f.pod {
        adapters.push(std::sync::Arc::new(crate::multikueue::pod::PodAdapter));
    }
    if f.ray_cluster {
        adapters.push(std::sync::Arc::new(RayAdapter::<RayCluster>::default()));
    }
    if f.ray_service {
        adapters.push(std::sync::Arc::new(RayAdapter::<RayService>::default()));
    }
    if f.ray_job {
        adapters.push(std::sync::Arc::new(RayAdapter::<RayJob>::default()));
    }
    (!adapters.is_empty()).then(|| crate::multikueue::Options {
        namespace: s.namespace.clone(),
        origin: s.origin.clone(),
        adapters,
        gc_interval: s.gc_interval,
        worker_lost_timeout: s.worker_lost_timeout,
        dispatcher: s.dispatcher,
        round_timeout: s.round_timeout,
        metrics: Default::default(),
    })
}

/// One job controller per managed kind, until `cancel` fires.
pub fn spawn(f: Frameworks, jobs: &JobContext, cancel: &CancellationToken) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    if f.ray_cluster {
        tasks.push(spawn_kind::<RayClusterJob>(jobs, cancel));
    }
    if f.ray_service {
        tasks.push(spawn_kind::<RayServiceJob>(jobs, cancel));
    }
    if f.ray_job {
        tasks.push(spawn_kind::<RayJobJob>(jobs, cancel));
    }
    if f.batch_job {
        tasks.push(spawn_kind::<BatchJob>(jobs, cancel));
        // Kueue's ElasticJobUngater: an elastic Job's pods wait behind their gate until a slice covers them.
        let c = cancel.clone();
        tasks.push(tokio::spawn(crate::jobs::elastic::controller::run::<
            k8s_openapi::api::batch::v1::Job,
        >(jobs.clone(), async move {
            c.cancelled().await
        })));
    }
    // Kueue's topology ungater: whatever the kind, a TAS workload's pods wait behind the topology gate
    // until it lifts it with their domain's node selector.
    let c = cancel.clone();
    tasks.push(tokio::spawn(crate::jobs::tas::controller::run(
        jobs.clone(),
        async move { c.cancelled().await },
    )));
    if f.pod {
        // Single Pods through the generic reconciler; groups (one Workload, many Pods) by their own.
        tasks.push(spawn_kind::<PodJob>(jobs, cancel));
        let c = cancel.clone();
        tasks.push(tokio::spawn(pod::group_controller::run(
            jobs.clone(),
            async move { c.cancelled().await },
        )));
    }
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_multikueue_adapters_follow_the_frameworks() {
        let settings = Some(crate::multikueue::Settings {
            namespace: "ns".into(),
            origin: "o".into(),
            ..Default::default()
        });
        let kinds = |f: Frameworks| {
            multikueue_options(f, &settings)
                .map(|o| o.adapters.iter().map(|a| a.gvk().kind).collect::<Vec<_>>())
                .unwrap_or_default()
        };
        assert_eq!(
            kinds(Frameworks::default()),
            vec!["Job", "RayCluster", "RayService", "RayJob"]
        );
        assert_eq!(kinds(Frameworks::from_names(["ray.io/rayjob"])), vec!["RayJob"]);
        assert_eq!(kinds(Frameworks::from_names(["pod"])), vec!["Pod"]);
        assert!(multikueue_options(Frameworks::default(), &None).is_none());
    }

    #[test]
    fn the_managed_kinds_follow_the_frameworks() {
        let kinds = |f: Frameworks| managed_kinds(f).into_iter().map(|g| g.kind).collect::<Vec<_>>();
        assert_eq!(
            kinds(Frameworks::default()),
            vec!["Job", "RayCluster", "RayService", "RayJob"]
        );
        assert_eq!(kinds(Frameworks::from_names(["ray.io/rayjob"])), vec!["RayJob"]);
        assert_eq!(kinds(Frameworks::from_names(["batch/job"])), vec!["Job"]);
        assert_eq!(
            kinds(Frameworks::from_names(["ray.io/rayservice", "pod"])),
            vec!["Pod", "RayService"]
        );
        assert!(
            !Frameworks::default().pod,
            "Kueue's default frameworks leave pod out"
        );
    }
}
