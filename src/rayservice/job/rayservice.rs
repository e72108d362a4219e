//! RayService as a Kueue job: one Workload chain per queue-labelled RayService, whose podsets are the live
//! child RayClusters' demand (`demand`), resized through workload slices as the upgrade creates and deletes
//! children. `spec.suspend` is the stop switch (KubeRay v1.7: suspending deletes every child and Service;
//! resuming recreates them), so admission starts the service and eviction stops it whole.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ListParams;
use kube::core::GroupVersionKind;
use kube::{Api, Resource, ResourceExt};

use super::demand::{self, ChildDemand, LivePods};
use crate::api::kueue::{PodSet, Workload};
use crate::api::ray::constants as c;
use crate::api::ray::{RayCluster, RayService};
use crate::jobframework::JobFrameworkError;
use crate::jobframework::interface::{DemandChange, ElasticWorkloadNameProvider, Finished, GenericJob};
use crate::jobframework::job_controller::JobKind;
use crate::jobframework::podset_info::PodSetInfo;
use crate::rayservice::cluster::BuildOptions;
use crate::rayservice::cluster::child::child_cluster;
use crate::rayservice::cluster::labels::origin_selector;

pub struct RayServiceJob {
    pub rs: RayService,
    /// Live children, the serving one first, then by creation (the gate's coverage order).
    pub children: Vec<RayCluster>,
    /// The pods the children run now: the demand never drops below them.
    pub live: LivePods,
    /// The names of the Workloads the service owns (finished and deleting slices included): a new
    /// slice's name is made from them, so it is none of theirs.
    pub slices: Vec<String>,
    /// The admitted slice whose growth preemption took (`GrowthPreempted`), until it has shrunk back
    /// to the clusters it keeps.
    pub growth_taken: Option<super::growth::Taken>,
    /// Where the running clusters' topology-requesting groups are placed (`demand::pins`, from the
    /// admitted slice): a new slice keeps them there.
    pub pins: demand::Pins,
    /// The podsets of the latest admitted slice (`demand::admitted_slice`), empty while none is:
    /// the pods Kueue v0.20's PodsScheduled counts are the ones they cover.
    pub admitted: Vec<PodSet>,
    /// How the pods the admitted slice covers stand with the scheduler, once
    /// [`JobKind::load_pods_scheduling`] read them.
    pub scheduling: Option<crate::jobframework::PodsScheduling>,
}

/// How the pods of a RayService's children stand with the scheduler, per podset of its latest
/// admitted slice (`admitted`), as Kueue v0.20's unscheduled-pods tracker counts a slice's pods: each
/// pod fills the podset that stands for its child's group (`demand::podset_names`, the podset whose
/// pods the cluster gate labels it from). A pod of a group no admitted podset stands for is none of
/// the slice's and is left out: a gated upgrade's pending cluster, which has no pods while its slice
/// waits for quota, never counts, and its pods count once a slice covering them is admitted (a new
/// admission, observed afresh). `children`: the service's children, `pods`: theirs.
pub fn service_pods_scheduling(
    admitted: &[PodSet],
    children: &[RayCluster],
    pods: &[Pod],
) -> crate::jobframework::PodsScheduling {
    let opts = BuildOptions::default();
    let names: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>> = children
        .iter()
        .filter_map(|rc| {
            let own = demand::child_demand(rc, &opts).ok()?;
            Some((own.name.clone(), demand::podset_names(admitted, &own)))
        })
        .collect();
    crate::jobframework::count_pods_scheduling(pods.iter().filter_map(|p| {
        let (cluster, group) = demand::cluster_and_podset(p)?;
        let podset = names.get(cluster)?.get(&group)?;
        Some((p, podset.clone()))
    }))
}

/// The children of `rs` that it controls (origin labels and a controller owner reference to it), the
/// active one first, the pending one last, the others (a dangling former pending cluster) oldest first
/// between them. The pending cluster is the newest by construction, and it must stay behind a dangling
/// one whose pods already run until that one is gone; among dangling ones the older keeps its coverage.
/// Creation timestamps have whole seconds: children made within one second would be ordered by name,
/// handing a running cluster's coverage to a newer one, so the controller's nanosecond
/// `quotagate.io/created-at` stamp orders them (creationTimestamp where it is missing).
pub fn children_in_gate_order(rs: &RayService, listed: Vec<RayCluster>) -> Vec<RayCluster> {
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let mut owned: Vec<RayCluster> = listed
        .into_iter()
        .filter(|rc| {
            rc.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        })
        .collect();
    let status = rs.status.as_ref();
    let active = status
        .and_then(|s| s.active_service_status.as_ref())
        .and_then(|a| a.ray_cluster_name.clone());
    let pending = status
        .and_then(|s| s.pending_service_status.as_ref())
        .and_then(|p| p.ray_cluster_name.clone())
        .filter(|n| !n.is_empty());
    owned.sort_by(|a, b| {
        let key = |r: &RayCluster| {
            (
                r.metadata.name != active,
                pending.is_some() && r.metadata.name == pending,
                created_at(r),
                r.metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    owned
}

/// When a child was made: the controller's nanosecond stamp, else its creationTimestamp.
fn created_at(rc: &RayCluster) -> Option<jiff::Timestamp> {
    rc.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::api::ray::constants::ANNOTATION_CREATED_AT))
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .or_else(|| rc.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// Lists the children of `rs` in gate order.
pub async fn load_children(client: &kube::Client, rs: &RayService) -> Result<Vec<RayCluster>, kube::Error> {
    let ns = rs.namespace().unwrap_or_default();
    let api: Api<RayCluster> = Api::namespaced(client.clone(), &ns);
    let listed = api
        .list(&ListParams::default().labels(&origin_selector(&rs.name_any())))
        .await?
        .items;
    Ok(children_in_gate_order(rs, listed))
}

/// Each child's demand, in gate order, never below the pods it runs now (`demand::at_least_live`)
/// and, for the pending cluster, never below its first step (`step::at_least_first_step`); with no
/// child yet, the demand of the cluster the spec would create.
pub fn service_demand(
    rs: &RayService,
    children: &[RayCluster],
    live: &LivePods,
) -> Result<Vec<ChildDemand>, demand::DemandError> {
    let opts = BuildOptions::default();
    if children.is_empty() {
        let name = format!("{}-spec", rs.name_any());
        return Ok(vec![demand::child_demand(
            &child_cluster(rs, &name, "", false),
            &opts,
        )?]);
    }
    // The pending cluster counts at no less than its first step: admitted with its head, never
    // after it (`step`).
    let own = children
        .iter()
        .map(|rc| demand::child_demand(&super::step::at_least_first_step(rs, rc), &opts))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(demand::at_least_live(own, live))
}

/// The live pods of `children`, per child and group (one list, by the `ray.io/cluster` label).
pub async fn children_pods(
    client: &kube::Client,
    ns: &str,
    children: &[RayCluster],
) -> Result<LivePods, kube::Error> {
    if children.is_empty() {
        return Ok(LivePods::new());
    }
    let names: Vec<String> = children.iter().map(|c| c.name_any()).collect();
    let selector = format!("{} in ({})", c::LABEL_CLUSTER, names.join(","));
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&selector))
        .await?;
    Ok(demand::live_pods(&pods.items))
}

impl RayServiceJob {
    /// The podset group of each template: `head` and every worker group, lowercased as podsets name them.
    fn groups(&self) -> Vec<String> {
        let spec = &self.rs.spec.ray_cluster_config;
        std::iter::once(crate::rayservice::cluster::podsets::HEAD_PODSET.to_string())
            .chain(
                spec.worker_group_specs
                    .iter()
                    .flatten()
                    .map(|g| g.group_name.to_lowercase()),
            )
            .collect()
    }
}

/// The group a podset info belongs to: podsets of a resized group are named `<group>-<hash>`.
fn group_of<'a>(info: &'a PodSetInfo, groups: &[String]) -> Option<&'a str> {
    let name = info.name.as_str();
    if groups.iter().any(|g| g == name) {
        return Some(name);
    }
    name.rsplit_once('-')
        .map(|(g, _)| g)
        .filter(|g| groups.iter().any(|x| x == g))
}

impl GenericJob for RayServiceJob {
    fn meta(&self) -> &ObjectMeta {
        &self.rs.metadata
    }

    fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk(
            &RayService::group(&()),
            &RayService::version(&()),
            &RayService::kind(&()),
        )
    }

    fn is_suspended(&self) -> bool {
        self.rs.spec.suspend == Some(true)
    }

    fn suspend(&mut self) {
        self.rs.spec.suspend = Some(true);
    }

    /// Checks that every admitted podset stands for a group of the service, then unsuspends it.
    /// Nothing of the admission is written into `spec.rayClusterConfig`: the user owns that spec, and
    /// a GitOps re-apply would undo it into a new cluster (issue 46). The RayCluster controller puts
    /// each podset's node selector, tolerations, labels and annotations on the child's pods when it
    /// creates them, from the admitted slice (`gate::cluster_gate`).
    fn run_with_podsets_info(&mut self, infos: &[PodSetInfo]) -> Result<(), JobFrameworkError> {
        let groups = self.groups();
        if let Some(unknown) = infos.iter().find(|i| group_of(i, &groups).is_none()) {
            return Err(JobFrameworkError::UnknownPodSet(unknown.name.clone()));
        }
        self.rs.spec.suspend = Some(false);
        Ok(())
    }

    /// Nothing to restore: `run_with_podsets_info` wrote nothing into the spec.
    fn restore_podsets_info(&mut self, _infos: &[PodSetInfo]) -> bool {
        false
    }

    fn finished(&self) -> Option<Finished> {
        // A RayService serves until deleted.
        None
    }

    fn pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        let children = service_demand(&self.rs, &self.children, &self.live)
            .map_err(|e| JobFrameworkError::PodSets(e.to_string()))?;
        // Preemption took the upgrade's growth: the slice shrinks back to the serving cluster
        // (once the pending cluster's pods are gone), then the upgrade asks for a new slice.
        if let Some(taken) = &self.growth_taken
            && let Some(kept) = super::growth::kept_only(&self.rs, &children, &self.live, taken)
            && demand::compare(&kept, &taken.pod_sets, true) != DemandChange::Same
        {
            return Ok(kept);
        }
        demand::podsets_pinned(&children, &self.pins).map_err(|e| JobFrameworkError::PodSets(e.to_string()))
    }

    fn growth_floor(&self, pod_sets: &[PodSet]) -> Option<std::collections::BTreeMap<String, i64>> {
        let children = service_demand(&self.rs, &self.children, &self.live).ok()?;
        super::growth::floor(&children, pod_sets, &self.growth_keeps()?)
    }

    /// The clusters kept when growth is taken: frozen as the slice names them once it was taken.
    fn growth_keeps(&self) -> Option<Vec<String>> {
        match &self.growth_taken {
            Some(t) => Some(t.keeps.clone().unwrap_or_else(|| {
                super::growth::active_cluster(&self.rs)
                    .map(str::to_string)
                    .into_iter()
                    .collect()
            }))
            .filter(|k| !k.is_empty()),
            None => {
                let names: Vec<&str> = self
                    .children
                    .iter()
                    .filter_map(|c| c.metadata.name.as_deref())
                    .collect();
                super::growth::kept(&self.rs, &names)
            }
        }
    }

    /// Pods may run while any child exists (suspending deletes them all).
    fn is_active(&self) -> bool {
        !self.children.is_empty()
    }

    /// The RayService's `Ready` condition, as Kueue's RayService integration decides it: True while a
    /// serve endpoint is ready. A broken or gated upgrade's pending cluster does not make a serving
    /// service not ready, so waitForPodsReady never evicts the serving version for the new one's
    /// failure (a stuck upgrade is bounded by the upgrade deadline instead); a service that never
    /// serves is evicted at the timeout, as Kueue has it.
    fn pods_ready(&self) -> bool {
        !self.children.is_empty()
            && crate::api::conditions::is_true(
                self.rs.status.as_ref().and_then(|s| s.conditions.as_deref()),
                c::COND_READY,
            )
    }

    /// Every change of demand goes through slices: the upgrade's pending cluster is a scale-up of the
    /// same job, the old cluster's deletion a scale-down.
    fn uses_slices(&self) -> bool {
        true
    }

    /// A child whose controller has not reported its current generation may still make pods from an
    /// older spec (chaos `hostile` seed 174: a hand-grown active cluster shrunk back while a pass
    /// that read it grown was creating workers; the slice shrank under them). The children were read
    /// before the pods were listed, so once every child reports, its pods are all counted. A child
    /// being deleted, or another controller's, makes no pods here.
    fn shrink_waits(&self) -> bool {
        self.children.iter().any(|rc| {
            crate::rayservice::cluster::is_ours_and_live(rc) && !super::raycluster::spec_observed(rc)
        })
    }

    fn compare_demand(&self, desired: &[PodSet], workload: &[PodSet], reserved: bool) -> DemandChange {
        if reserved && super::multikueue::worker_accounts_changes(&self.rs) {
            return DemandChange::Same;
        }
        demand::compare(desired, workload, reserved)
    }

    fn as_elastic_workload_name_provider(&self) -> Option<&dyn ElasticWorkloadNameProvider> {
        Some(self)
    }

    fn upgrade_claim(&self) -> Option<crate::queue::model::UpgradeClaim> {
        super::claim::upgrade_claim(&self.rs, &self.children)
    }

    /// Kueue v0.20 (KEP-13502): the pods its admitted slice covers. While the service serves
    /// (`Ready`), its Workload is `PodsReady` and no timeout runs, so an upgrade's new cluster whose
    /// pods do not schedule is reported here but never evicts the serving version (its upgrade
    /// deadline bounds it instead).
    fn pods_scheduling(&self) -> Option<crate::jobframework::PodsScheduling> {
        self.scheduling.clone()
    }
}

impl ElasticWorkloadNameProvider for RayServiceJob {
    /// The generation and a digest of the slices the service owns now. A count of them would come
    /// round again once one is deleted (a finished slice removed by the retention policy, a waiting
    /// one deleted by hand) and name the new slice as one still there, whose create then answers
    /// AlreadyExists: no slice would wait and the upgrade would stall until the count changed. A set
    /// of names that holds the one made from it cannot be the set it is made from again.
    fn workload_name_extra(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut names = self.slices.clone();
        names.sort();
        let digest = Sha256::digest(names.join("\n").as_bytes());
        let short: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
        format!("{}-{short}", self.rs.metadata.generation.unwrap_or(0))
    }
}

impl JobKind for RayServiceJob {
    type Object = RayService;

    async fn load(
        obj: &RayService,
        workloads: &[Workload],
        client: &kube::Client,
    ) -> Result<Self, kube::Error> {
        let children = load_children(client, obj).await?;
        let live = children_pods(client, &obj.namespace().unwrap_or_default(), &children).await?;
        Ok(RayServiceJob {
            rs: obj.clone(),
            children,
            live,
            slices: workloads.iter().map(|w| w.name_any()).collect(),
            growth_taken: super::growth::taken(workloads),
            pins: demand::pins(demand::admitted_slice(workloads)),
            admitted: demand::admitted_slice(workloads)
                .map(|w| w.spec.pod_sets.clone())
                .unwrap_or_default(),
            scheduling: None,
        })
    }

    fn object(&self) -> &RayService {
        &self.rs
    }

    /// Kueue v0.20 (#15402, #15434): lists its children's pods (one list, by `ray.io/cluster`) and
    /// counts those its admitted slice covers. A suspended service, or one with no admitted slice or
    /// no child, has none to count.
    async fn load_pods_scheduling(&mut self, client: &kube::Client) -> Result<(), kube::Error> {
        if self.is_suspended() || self.admitted.is_empty() || self.children.is_empty() {
            self.scheduling = None;
            return Ok(());
        }
        let names: Vec<String> = self.children.iter().map(|c| c.name_any()).collect();
        let selector = format!("{} in ({})", c::LABEL_CLUSTER, names.join(","));
        let pods = Api::<Pod>::namespaced(client.clone(), &self.rs.namespace().unwrap_or_default())
            .list(&ListParams::default().labels(&selector))
            .await?;
        self.scheduling = Some(service_pods_scheduling(
            &self.admitted,
            &self.children,
            &pods.items,
        ));
        Ok(())
    }

    /// A child appearing, resizing or going away changes the demand.
    fn watches(
        controller: kube::runtime::Controller<RayService>,
        client: &kube::Client,
    ) -> kube::runtime::Controller<RayService> {
        controller.owns(
            Api::<RayCluster>::all(client.clone()),
            kube::runtime::watcher::Config::default(),
        )
    }
}
