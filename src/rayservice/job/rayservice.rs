//! RayService as a Kueue job: one Workload chain per queue-labelled RayService, whose podsets are the live
//! child RayClusters' demand (`demand`), resized through workload slices as the upgrade creates and deletes
//! children. `spec.suspend` is the stop switch (KubeRay v1.7: suspending deletes every child and Service;
//! resuming recreates them), so admission starts the service and eviction stops it whole.

use std::collections::BTreeMap;

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
use crate::jobframework::interface::{
    DemandChange, ElasticWorkloadNameProvider, Finished, GenericJob,
};
use crate::jobframework::job_controller::JobKind;
use crate::jobframework::podset_info::{PodSetInfo, merge_into_template, restore_template};
use crate::rayservice::cluster::BuildOptions;
use crate::rayservice::cluster::child::child_cluster;
use crate::rayservice::cluster::labels::origin_selector;

pub struct RayServiceJob {
    pub rs: RayService,
    /// Live children, the serving one first, then by creation (the gate's coverage order).
    pub children: Vec<RayCluster>,
    /// The pods the children run now: the demand never drops below them.
    pub live: LivePods,
    /// Workloads the service owns (finished slices included): names each new slice uniquely.
    pub slices: usize,
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
pub async fn load_children(
    client: &kube::Client,
    rs: &RayService,
) -> Result<Vec<RayCluster>, kube::Error> {
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
pub async fn children_pods(client: &kube::Client, ns: &str, children: &[RayCluster]) -> Result<LivePods, kube::Error> {
    if children.is_empty() {
        return Ok(LivePods::new());
    }
    let names: Vec<String> = children.iter().map(|c| c.name_any()).collect();
    let selector = format!("{} in ({})", c::LABEL_CLUSTER, names.join(","));
    let pods = Api::<Pod>::namespaced(client.clone(), ns).list(&ListParams::default().labels(&selector)).await?;
    Ok(demand::live_pods(&pods.items))
}

impl RayServiceJob {
    /// The templates of `spec.rayClusterConfig` by podset group name.
    fn templates(
        &mut self,
    ) -> BTreeMap<String, (&mut ObjectMeta, &mut k8s_openapi::api::core::v1::PodSpec)> {
        let spec = &mut self.rs.spec.ray_cluster_config;
        let mut out = BTreeMap::new();
        let head = &mut spec.head_group_spec.template;
        out.insert(
            crate::rayservice::cluster::podsets::HEAD_PODSET.to_string(),
            (
                head.metadata.get_or_insert_with(Default::default),
                head.spec.get_or_insert_with(Default::default),
            ),
        );
        for g in spec.worker_group_specs.iter_mut().flatten() {
            let t = &mut g.template;
            out.insert(
                g.group_name.to_lowercase(),
                (
                    t.metadata.get_or_insert_with(Default::default),
                    t.spec.get_or_insert_with(Default::default),
                ),
            );
        }
        out
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

    /// Injects the flavors' node selectors and tolerations into `spec.rayClusterConfig` (children are
    /// created from it after the service resumes) and unsuspends the service.
    /// A slice-chain name left in the templates by an earlier admission is replaced
    /// (`merge_into_template`): after a preemption the service's next Workload may start a new chain.
    fn run_with_podsets_info(&mut self, infos: &[PodSetInfo]) -> Result<(), JobFrameworkError> {
        let mut templates = self.templates();
        let groups: Vec<String> = templates.keys().cloned().collect();
        for info in infos {
            let group = group_of(info, &groups)
                .ok_or_else(|| JobFrameworkError::UnknownPodSet(info.name.clone()))?;
            if let Some((meta, spec)) = templates.get_mut(group) {
                merge_into_template(meta, spec, info)?;
            }
        }
        self.rs.spec.suspend = Some(false);
        Ok(())
    }

    fn restore_podsets_info(&mut self, infos: &[PodSetInfo]) -> bool {
        let mut templates = self.templates();
        let groups: Vec<String> = templates.keys().cloned().collect();
        let mut changed = false;
        for info in infos {
            if let Some((meta, spec)) = group_of(info, &groups).and_then(|g| templates.get_mut(g)) {
                changed |= restore_template(meta, spec, info);
            }
        }
        changed
    }

    fn finished(&self) -> Option<Finished> {
        // A RayService serves until deleted.
        None
    }

    fn pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        let children = service_demand(&self.rs, &self.children, &self.live)
            .map_err(|e| JobFrameworkError::PodSets(e.to_string()))?;
        demand::podsets(&children).map_err(|e| JobFrameworkError::PodSets(e.to_string()))
    }

    /// Pods may run while any child exists (suspending deletes them all).
    fn is_active(&self) -> bool {
        !self.children.is_empty()
    }

    /// From the pods of its clusters (not Serve's readiness): every live child the quota covers has
    /// all its pods Running and Ready. A child still gated (`QuotaGated=True`, an upgrade waiting for
    /// its slice) has no pods to wait for yet.
    fn pods_ready(&self) -> bool {
        let covered: Vec<&RayCluster> = self
            .children
            .iter()
            .filter(|rc| rc.metadata.deletion_timestamp.is_none())
            .filter(|rc| {
                !crate::api::conditions::is_true(rc.status.as_ref().and_then(|s| s.conditions.as_deref()), c::COND_QUOTA_GATED)
            })
            .collect();
        !covered.is_empty() && covered.iter().all(|rc| super::raycluster::cluster_pods_ready(rc))
    }

    /// Every change of demand goes through slices: the upgrade's pending cluster is a scale-up of the
    /// same job, the old cluster's deletion a scale-down.
    fn uses_slices(&self) -> bool {
        true
    }

    fn compare_demand(
        &self,
        desired: &[PodSet],
        workload: &[PodSet],
        reserved: bool,
    ) -> DemandChange {
        demand::compare(desired, workload, reserved)
    }

    fn as_elastic_workload_name_provider(&self) -> Option<&dyn ElasticWorkloadNameProvider> {
        Some(self)
    }
}

impl ElasticWorkloadNameProvider for RayServiceJob {
    /// The generation and the count of slices so far: a new slice never reuses a finished one's name.
    fn workload_name_extra(&self) -> String {
        format!(
            "{}-{}",
            self.rs.metadata.generation.unwrap_or(0),
            self.slices
        )
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
            slices: workloads.len(),
        })
    }

    fn object(&self) -> &RayService {
        &self.rs
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
