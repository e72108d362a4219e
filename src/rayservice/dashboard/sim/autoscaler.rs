//! A simulated Ray in-tree autoscaler for RayClusters with `enableInTreeAutoscaling: true`.
//!
//! The real autoscaler runs beside each head, reads the resource demand of pending actors and
//! writes worker-group `replicas` on the RayCluster. This one does the same for every such cluster
//! from one loop, with the Serve simulator as the source of demand:
//!
//! 1. capacity = the CPUs of the cluster's RUNNING and Ready Pods (per Pod: the group's CPU
//!    `resources`, else `rayStartParams["num-cpus"]`, else the Ray container's CPU limit, else its
//!    request, rounded up to whole CPUs like `ray start` gets them; nothing declared = 0), handed
//!    to `RaySim::set_capacity`, so replicas run only on nodes that are up;
//! 2. demand = `RaySim::demand_cpus`; the head's CPUs count first, then each worker group in spec
//!    order takes as many workers as still needed, within [minReplicas, maxReplicas] and a sane
//!    cap (`AutoscalerConfig::max_replicas_per_group`), so no user number is ever allocated in
//!    proportion; groups that grow get their new count at once, groups that shrink lose one
//!    replica per period (Ray drains idle nodes one by one, after an idle timeout), naming the
//!    worker it removes in `scaleStrategy.workersToDelete` (KubeRay deletes only named workers when
//!    autoscaling is on); a group whose named workers still run is not rescaled, and its list is
//!    cleared once they are gone (`name_leaving`);
//! 3. the new counts are written with a JSON patch that tests each group's name (and old count)
//!    first, so a reordered or user-edited spec makes the patch fail and the next period re-reads.
//!
//! Demand the simulator has not observed since the head started (no Serve config given to it yet:
//! a head just restarted, or a process that just started) is unknown, not zero: it may scale a
//! group up to its minimum, never down (`plan_observed`).
//!
//! A head pod replaced by another (deleted, crashed and recreated) restarts its simulated head
//! with no Serve apps, as Ray without GCS fault tolerance loses them; with `gcsFaultToleranceOptions`
//! or the `ray.io/ft-enabled: "true"` annotation the apps survive (`head_restarts`).
//!
//! Only groups with `minReplicas` or `maxReplicas` set are scaled (others are the user's to size);
//! clusters without the in-tree autoscaler get unlimited capacity, and until the autoscaler has
//! looked at a cluster it has none (so no replica runs on nodes that are not there); a cluster that
//! goes away is forgotten. API errors are logged at
//! debug and retried next period. Not modelled: GPUs and custom resources, idle timeouts, bin
//! packing onto nodes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::RaySim;
use crate::api::quantity::Quantity;
use crate::api::ray::constants as c;
use crate::api::ray::{RayCluster, RayClusterSpec, WorkerGroupSpec};
use crate::rayservice::cluster::names::head_service_name;
use crate::rayservice::cluster::replicas::desired_replicas;
use crate::rayservice::dashboard::{DEFAULT_DASHBOARD_PORT, DashboardEndpoint};

/// Field manager of the autoscaler's patches.
pub const MANAGER: &str = "quotagate-sim-autoscaler";

#[derive(Clone, Debug)]
pub struct AutoscalerConfig {
    /// How often clusters are re-read and rescaled.
    pub period: Duration,
    /// Upper bound on any group's replicas, whatever its maxReplicas says.
    pub max_replicas_per_group: i32,
    /// For the dashboard URL the simulator keys clusters by.
    pub cluster_domain: String,
    pub dashboard_port: u16,
}

impl Default for AutoscalerConfig {
    fn default() -> Self {
        Self {
            period: Duration::from_millis(500),
            max_replicas_per_group: 100,
            cluster_domain: "cluster.local".into(),
            dashboard_port: DEFAULT_DASHBOARD_PORT,
        }
    }
}

/// One worker group's new replica count.
#[derive(Clone, Debug, PartialEq)]
pub struct Scale {
    pub index: usize,
    pub group: String,
    /// `replicas` as stored (None = unset, meaning minReplicas).
    pub stored: Option<i32>,
    pub to: i32,
}

/// The CPUs a Ray node of a group offers. `container` is the Ray container's resources.
pub fn node_cpus(
    params: Option<&BTreeMap<String, String>>,
    group_resources: Option<&BTreeMap<String, String>>,
    container: Option<&ResourceRequirements>,
) -> f64 {
    let parse = |raw: &str| Quantity::parse(raw.trim()).ok().map(|q| q.milli_value());
    // Rounded up like `ray start` gets them; milli values saturate at i64::MAX, so no overflow.
    let whole = |milli: i64| u64::try_from(milli).unwrap_or(0).div_ceil(1000);
    let from_resources = group_resources
        .into_iter()
        .flatten()
        .find(|(k, _)| k.eq_ignore_ascii_case("cpu"))
        .and_then(|(_, v)| parse(v))
        .map(|m| whole(m) as f64);
    let from_params = || {
        params
            .and_then(|p| p.get("num-cpus"))
            .and_then(|v| parse(v))
            .map(|m| m.max(0) as f64 / 1000.0)
    };
    let from_container = || {
        let amount = |list: Option<&BTreeMap<String, K8sQuantity>>| {
            list?.get("cpu").and_then(|q| parse(&q.0)).filter(|m| *m > 0)
        };
        let res = container?;
        amount(res.limits.as_ref())
            .or_else(|| amount(res.requests.as_ref()))
            .map(|m| whole(m) as f64)
    };
    from_resources
        .or_else(from_params)
        .or_else(from_container)
        .unwrap_or(0.0)
}

/// KubeRay's Ray container is the first one.
fn ray_container(pod: Option<&PodSpec>) -> Option<&ResourceRequirements> {
    pod?.containers.first()?.resources.as_ref()
}

/// CPUs of one Ray node of the head group or of a worker group, from the spec.
fn head_cpus(spec: &RayClusterSpec) -> f64 {
    let h = &spec.head_group_spec;
    node_cpus(
        h.ray_start_params.as_ref(),
        h.resources.as_ref(),
        ray_container(h.template.spec.as_ref()),
    )
}

fn group_cpus(g: &WorkerGroupSpec) -> f64 {
    node_cpus(
        g.ray_start_params.as_ref(),
        g.resources.as_ref(),
        ray_container(g.template.spec.as_ref()),
    )
}

/// Running, Ready and not being deleted: a Ray node Serve can place replicas on.
pub fn pod_is_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    pod.metadata.deletion_timestamp.is_none()
        && status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The CPUs the cluster's ready Pods offer: each Pod counted with its group's settings and its own
/// Ray container.
pub fn capacity(spec: &RayClusterSpec, pods: &[&Pod]) -> f64 {
    pods.iter()
        .filter(|p| pod_is_ready(p))
        .map(|p| {
            let labels = p.labels();
            let container = ray_container(p.spec.as_ref());
            if labels.get(c::LABEL_NODE_TYPE).map(String::as_str) == Some(c::NODE_TYPE_HEAD) {
                let h = &spec.head_group_spec;
                return node_cpus(h.ray_start_params.as_ref(), h.resources.as_ref(), container);
            }
            let group = labels.get(c::LABEL_GROUP);
            match spec.worker_groups().iter().find(|g| Some(&g.group_name) == group) {
                Some(g) => node_cpus(g.ray_start_params.as_ref(), g.resources.as_ref(), container),
                None => node_cpus(None, None, container),
            }
        })
        .sum()
}

/// New replica counts so that the head plus the workers offer at least `demand` CPUs (see the
/// module docs). Groups whose count stays are not listed.
pub fn plan(spec: &RayClusterSpec, demand: f64, cap: i32) -> Vec<Scale> {
    let mut remaining = demand - head_cpus(spec);
    let mut out = Vec::new();
    for (index, g) in spec.worker_groups().iter().enumerate() {
        if g.is_suspended() || (g.min_replicas.is_none() && g.max_replicas.is_none()) {
            continue;
        }
        let lo = g.min_replicas_or_default().clamp(0, cap.max(0));
        let hi = g.max_replicas_or_default().clamp(lo, cap.max(lo));
        let per_replica = group_cpus(g) * f64::from(g.num_of_hosts_or_default().max(1));
        let needed = if per_replica > 0.0 && remaining > 0.0 {
            // Saturating float-to-int; a NaN (never expected) counts as 0.
            (remaining / per_replica).ceil().min(f64::from(hi)) as i32
        } else {
            0
        };
        let wanted = needed.clamp(lo, hi);
        remaining -= f64::from(wanted) * per_replica;
        let current = desired_replicas(g);
        let to = if wanted >= current {
            wanted
        } else {
            // One replica at a time, but never above the (possibly lowered) bounds.
            (current - 1).max(wanted).min(hi)
        };
        if to != current {
            out.push(Scale {
                index,
                group: g.group_name.clone(),
                stored: g.replicas,
                to,
            });
        }
    }
    out
}

/// `plan` on the demand observed, if any. Unobserved demand only lifts groups to their minimum: a
/// serving cluster is never scaled down on a demand nobody has seen since start-up.
pub fn plan_observed(spec: &RayClusterSpec, demand: Option<f64>, cap: i32) -> Vec<Scale> {
    let scales = plan(spec, demand.unwrap_or(0.0), cap);
    if demand.is_some() {
        return scales;
    }
    let groups = spec.worker_groups();
    scales
        .into_iter()
        .filter(|s| groups.get(s.index).is_some_and(|g| s.to > desired_replicas(g)))
        .collect()
}

/// Whether a cluster keeps its Serve apps when its head restarts (GCS fault tolerance).
pub fn survives_head_restart(rc: &RayCluster) -> bool {
    rc.spec.gcs_fault_tolerance_options.is_some()
        || rc
            .annotations()
            .get(c::ANNOTATION_FT_ENABLED)
            .is_some_and(|v| v == "true")
}

/// The head pod's uid: the live head pod, not being deleted.
fn head_uid(pods: &[&Pod]) -> Option<String> {
    pods.iter()
        .find(|p| p.metadata.deletion_timestamp.is_none() && is_head(p))
        .and_then(|p| p.metadata.uid.clone())
}

fn is_head(pod: &Pod) -> bool {
    pod.labels().get(c::LABEL_NODE_TYPE).map(String::as_str) == Some(c::NODE_TYPE_HEAD)
}

/// A head that was seen and is now another pod restarted. A head not seen before (a process that
/// just started, a new cluster) did not.
pub fn head_restarted(seen: Option<&str>, now: Option<&str>) -> bool {
    matches!((seen, now), (Some(a), Some(b)) if a != b)
}

/// Names the workers a scale-down removes and keeps a group still at its scale while named workers
/// run, as Ray's autoscaler does with `scaleStrategy.workersToDelete` (with autoscaling on, KubeRay
/// deletes only the workers named there). Returns the scales to write and the extra patch ops: the
/// names of each shrink's surplus workers (not-ready first, then the youngest), and the clearing of a
/// list whose workers are all gone. A group that runs more workers than its `replicas` with none
/// named (its scale-down was written while the operator was still creating a pod) gets its surplus
/// named too, as Ray's autoscaler terminates a node it no longer wants.
pub fn name_leaving(spec: &RayClusterSpec, pods: &[&Pod], scales: Vec<Scale>) -> (Vec<Scale>, Vec<Value>) {
    let mut ops = Vec::new();
    let mut held = Vec::new();
    for (index, g) in spec.worker_groups().iter().enumerate() {
        let listed = g.workers_to_delete();
        if listed.is_empty() {
            continue;
        }
        let base = format!("/spec/workerGroupSpecs/{index}");
        if pods.iter().any(|p| listed.iter().any(|n| *n == p.name_any())) {
            held.push(index);
        } else {
            ops.push(json!({"op": "test", "path": format!("{base}/groupName"), "value": g.group_name}));
            ops.push(json!({"op": "add", "path": format!("{base}/scaleStrategy"), "value": {"workersToDelete": []}}));
        }
    }
    let mut out = Vec::new();
    for (index, g) in spec.worker_groups().iter().enumerate() {
        if held.contains(&index) || g.is_suspended() {
            continue;
        }
        let scale = scales.iter().find(|s| s.index == index);
        let to = match scale {
            Some(s) => s.to,
            // Only an autoscaled group's surplus is the autoscaler's to name.
            None if g.min_replicas.is_some() || g.max_replicas.is_some() => desired_replicas(g),
            None => continue,
        };
        let base = format!("/spec/workerGroupSpecs/{index}");
        let names = surplus(g, pods, to);
        if !names.is_empty() {
            if scale.is_none() {
                // Guarded by what it was computed from, as the scales' own ops are.
                ops.push(json!({"op": "test", "path": format!("{base}/groupName"), "value": g.group_name}));
                if let Some(stored) = g.replicas {
                    ops.push(json!({"op": "test", "path": format!("{base}/replicas"), "value": stored}));
                }
            }
            ops.push(json!({"op": "add", "path": format!("{base}/scaleStrategy"), "value": {"workersToDelete": names}}));
        }
        if let Some(s) = scale {
            out.push(s.clone());
        }
    }
    (out, ops)
}

/// The live workers of `g` beyond `to` replicas: not ready first, then the youngest (the last to
/// take load), then by name.
fn surplus(g: &crate::api::ray::WorkerGroupSpec, pods: &[&Pod], to: i32) -> Vec<String> {
    let hosts = usize::try_from(g.num_of_hosts_or_default().max(1)).unwrap_or(1);
    let mut live: Vec<&Pod> = pods
        .iter()
        .copied()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_none() && p.labels().get(c::LABEL_GROUP) == Some(&g.group_name)
        })
        .collect();
    let keep = usize::try_from(to.max(0)).unwrap_or(0).saturating_mul(hosts);
    if live.len() <= keep {
        return Vec::new();
    }
    live.sort_by_key(|p| {
        (
            pod_is_ready(p),
            std::cmp::Reverse(p.metadata.creation_timestamp.clone()),
            std::cmp::Reverse(p.name_any()),
        )
    });
    live.iter()
        .take(live.len() - keep)
        .map(|p| p.name_any())
        .collect()
}

/// The JSON patch writing `scales`, guarded by `test` ops on what it was computed from.
pub fn patch_for(scales: &[Scale]) -> Value {
    let mut ops = Vec::new();
    for s in scales {
        let base = format!("/spec/workerGroupSpecs/{}", s.index);
        ops.push(json!({"op": "test", "path": format!("{base}/groupName"), "value": s.group}));
        if let Some(stored) = s.stored {
            ops.push(json!({"op": "test", "path": format!("{base}/replicas"), "value": stored}));
        }
        ops.push(json!({"op": "add", "path": format!("{base}/replicas"), "value": s.to}));
    }
    Value::Array(ops)
}

/// Runs forever: every `cfg.period`, rescales every autoscaled RayCluster. Stop it by dropping or
/// aborting its task. From its start, a cluster it has not looked at yet runs no replica (the
/// simulator's unknown capacity is 0): a new cluster's replicas wait for its nodes, never run on
/// an unlimited pool until the first period.
pub async fn run(client: kube::Client, sim: Arc<RaySim>, cfg: AutoscalerConfig) {
    sim.set_unknown_capacity(Some(0.0));
    let mut tracked = Tracked::default();
    // A zero period would make `interval` panic.
    let mut every = tokio::time::interval(cfg.period.max(Duration::from_millis(1)));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if let Err(e) = step(&client, &sim, &cfg, &mut tracked).await {
            tracing::debug!(error = %e, "sim autoscaler: listing failed, retrying next period");
        }
    }
}

/// What the loop remembers between periods: the clusters given a capacity (their dashboard URL and
/// whether they are autoscaled) and each cluster's head pod uid.
#[derive(Default)]
struct Tracked {
    clusters: HashMap<(String, String), (String, bool)>,
    heads: HashMap<(String, String), String>,
}

/// One period.
async fn step(
    client: &kube::Client,
    sim: &RaySim,
    cfg: &AutoscalerConfig,
    all: &mut Tracked,
) -> Result<(), kube::Error> {
    let tracked = &mut all.clusters;
    let clusters = Api::<RayCluster>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let mut seen = HashMap::new();
    let url_of = |rc: &RayCluster| {
        let service = head_service_name(&rc.name_any(), &rc.spec);
        let ns = rc.namespace().unwrap_or_default();
        DashboardEndpoint::for_head_service(&service, &ns, &cfg.cluster_domain, cfg.dashboard_port).base_url
    };
    // Clusters without the autoscaler are the user's to size: unlimited.
    for rc in clusters.iter().filter(|rc| !rc.spec.autoscaling_enabled()) {
        let key = (rc.namespace().unwrap_or_default(), rc.name_any());
        let entry = (url_of(rc), false);
        if tracked.get(&key) != Some(&entry) {
            sim.set_capacity(&entry.0, None);
        }
        seen.insert(key, entry);
    }
    let autoscaled: Vec<&RayCluster> = clusters
        .iter()
        .filter(|rc| rc.spec.autoscaling_enabled())
        .collect();
    // Every cluster's head (a replaced head loses its Serve apps), and the other pods of the
    // autoscaled clusters only: a cluster sized by hand has its workers never read, and a huge one,
    // listed whole every period, was most of this loop's memory.
    let mut pods = if clusters.is_empty() {
        Vec::new()
    } else {
        let heads = format!(
            "{},{}={}",
            c::LABEL_CLUSTER,
            c::LABEL_NODE_TYPE,
            c::NODE_TYPE_HEAD
        );
        Api::<Pod>::all(client.clone())
            .list(&ListParams::default().labels(&heads))
            .await?
            .items
    };
    for rc in &autoscaled {
        let members = format!("{}={}", c::LABEL_CLUSTER, rc.name_any());
        let listed = Api::<Pod>::namespaced(client.clone(), &rc.namespace().unwrap_or_default())
            .list(&ListParams::default().labels(&members))
            .await?
            .items;
        pods.extend(listed.into_iter().filter(|p| !is_head(p)));
    }
    let mut by_cluster: HashMap<(String, &str), Vec<&Pod>> = HashMap::new();
    for p in &pods {
        if let Some(cluster) = p.labels().get(c::LABEL_CLUSTER) {
            let key = (p.namespace().unwrap_or_default(), cluster.as_str());
            by_cluster.entry(key).or_default().push(p);
        }
    }
    let mut heads = HashMap::new();
    for rc in &clusters {
        let key = (rc.namespace().unwrap_or_default(), rc.name_any());
        let uid = by_cluster
            .get(&(key.0.clone(), key.1.as_str()))
            .and_then(|pods| head_uid(pods));
        let seen = all.heads.get(&key).map(String::as_str);
        if head_restarted(seen, uid.as_deref()) && !survives_head_restart(rc) {
            tracing::info!(ns = %key.0, cluster = %key.1, "sim: head pod replaced, its Serve apps are gone (no GCS fault tolerance)");
            sim.start_cluster(&url_of(rc));
        }
        // A head pod gone and not yet replaced keeps the uid last seen.
        if let Some(uid) = uid.or_else(|| all.heads.get(&key).cloned()) {
            heads.insert(key, uid);
        }
    }
    all.heads = heads;
    for rc in autoscaled {
        let (ns, name) = (rc.namespace().unwrap_or_default(), rc.name_any());
        let url = url_of(rc);
        let mine = by_cluster.get(&(ns.clone(), name.as_str()));
        sim.set_capacity(&url, Some(capacity(&rc.spec, mine.map_or(&[], Vec::as_slice))));
        seen.insert((ns.clone(), name.clone()), (url.clone(), true));
        if rc.meta().deletion_timestamp.is_some() || rc.spec.is_suspended() {
            continue;
        }
        let demand = sim.observed_demand_cpus(&url);
        let scales = plan_observed(&rc.spec, demand, cfg.max_replicas_per_group);
        let (scales, extra) = name_leaving(&rc.spec, mine.map_or(&[], Vec::as_slice), scales);
        if scales.is_empty() && extra.is_empty() {
            continue;
        }
        let Value::Array(mut ops) = patch_for(&scales) else {
            continue;
        };
        ops.extend(extra);
        let patch = match serde_json::from_value::<json_patch::Patch>(Value::Array(ops)) {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(error = %e, "sim autoscaler: building the patch failed");
                continue;
            }
        };
        let params = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..PatchParams::default()
        };
        let api = Api::<RayCluster>::namespaced(client.clone(), &ns);
        match api.patch(&name, &params, &Patch::Json::<()>(patch)).await {
            Ok(_) => {
                tracing::info!(%ns, cluster = %name, ?demand, ?scales, "sim autoscaler: scaled")
            }
            Err(e) => {
                tracing::debug!(%ns, cluster = %name, error = %e, "sim autoscaler: patch failed, retrying next period")
            }
        }
    }
    // Gone, or a renamed head Service: the old endpoint is forgotten.
    for (key, (url, _)) in tracked.drain() {
        if seen.get(&key).is_none_or(|(u, _)| *u != url) {
            sim.forget_capacity(&url);
        }
    }
    *tracked = seen;
    Ok(())
}

#[cfg(test)]
#[path = "autoscaler_tests.rs"]
mod tests;
