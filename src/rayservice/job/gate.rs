//! The gate of a queue-managed RayService, computed from API objects only: the Workloads it owns and its
//! child RayClusters. No annotation, label or `suspend` field a user can write opens it. The RayCluster
//! controller caps pod creation with it; the RayService controller releases a held child and switches
//! traffic only to children it covers.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::Api;
use kube::{Client, ResourceExt};

use super::demand::{self, ChildDemand, LivePods};
use super::rayservice::{children_pods, load_children, service_demand};
use crate::admission::slices::may_lose_part;
use crate::api::kueue::Workload;
use crate::api::kueue::constants::condition;
use crate::api::kueue::managed_jobs::ManagedJobs;
use crate::api::ray::constants as c;
use crate::api::ray::{RayCluster, RayService};
use crate::jobframework::interface::queue_name;
use crate::jobframework::job_controller::owned_workloads;
use crate::jobframework::manages;

/// A slice waiting for quota, and Kueue's reason as its QuotaReserved condition states it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingSlice {
    pub workload: String,
    pub local_queue: String,
    pub message: String,
    /// Kueue tried it and found no quota: no reservation, `QuotaReserved=False` (not a slice waiting
    /// for admission checks, nor one no admission cycle has seen yet).
    pub quota_denied: bool,
}

/// What the gate lets each child run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gate {
    /// child -> group -> pods it may have.
    pub allowed: BTreeMap<String, BTreeMap<String, i64>>,
    /// Children whose every pod is covered.
    pub covered: BTreeSet<String>,
    /// The latest admitted slice, if any.
    pub admitted: Option<String>,
    /// A replacement (or first) slice still waiting for quota.
    pub pending: Option<PendingSlice>,
    /// Why no slice can be made for the current children at all (e.g. Kueue's podset limit).
    pub blocked: Option<String>,
    /// Children that preemption may still take from the admitted slice as growth
    /// (`slices::may_lose_part`): no traffic moves onto them (`growth`, the switch guard).
    pub exposed: BTreeSet<String>,
}

/// True when the RayService's clusters run only under admitted quota, under Kueue's default
/// configuration (no `manageJobsWithoutQueueName`): it names a queue. The controllers decide with
/// [`service_managed`], which knows the configuration.
pub fn queue_managed(rs: &RayService) -> bool {
    queue_name(&rs.metadata).is_some()
}

/// Whether Kueue manages the RayService (the job framework's [`manages`], the decision its job
/// reconciler takes too): its clusters then run only under admitted quota.
pub async fn service_managed(
    client: &Client,
    managed: &ManagedJobs,
    rs: &RayService,
) -> Result<bool, kube::Error> {
    manages(client, managed, &rs.metadata).await
}

/// The gate, from the service's workloads, its children in gate order and the pods they run now.
pub fn decide(rs: &RayService, children: &[RayCluster], workloads: &[Workload], live: &LivePods) -> Gate {
    let demands: Vec<ChildDemand> = match service_demand(rs, children, live) {
        Ok(d) if !children.is_empty() => d,
        // A child whose demand cannot be computed is covered by nothing.
        _ => demand::at_least_live(
            children
                .iter()
                .filter_map(|rc| demand::child_demand(rc, &Default::default()).ok())
                .collect(),
            live,
        ),
    };
    let blocked = demand::podsets(&demands).err().map(|e| e.to_string());
    let admitted = demand::admitted_slice(workloads);
    let mut allowed = demand::allowed_pods(admitted.map(|w| w.spec.pod_sets.as_slice()), &demands, live);
    let mut covered = demands
        .iter()
        .filter(|d| allowed.get(&d.name).is_some_and(|a| demand::covers(a, d)))
        .map(|d| d.name.clone())
        .collect();
    let exposed = admitted
        .map(|w| {
            demands
                .iter()
                .filter(|d| may_lose_part(w, &d.name))
                .map(|d| d.name.clone())
                .collect()
        })
        .unwrap_or_default();
    let taken = super::growth::close_growth(rs, admitted, &mut allowed, &mut covered);
    let pending = match (pending_slice(workloads), taken) {
        (Some(mut p), Some(why)) => {
            p.message = format!("{why}; {}", p.message);
            Some(p)
        }
        // Not asked for yet: the slice shrinks back first.
        (None, Some(why)) => admitted.map(|w| PendingSlice {
            workload: w.name_any(),
            local_queue: w.spec.queue_name.clone().unwrap_or_default(),
            message: why,
            quota_denied: false,
        }),
        (p, None) => p,
    };
    Gate {
        allowed,
        covered,
        admitted: admitted.map(|w| w.name_any()),
        pending,
        blocked,
        exposed,
    }
}

/// The newest slice of a chain not yet admitted, with why: Kueue's reason while it waits for quota,
/// the admission checks still pending once quota is reserved.
fn pending_slice(workloads: &[Workload]) -> Option<PendingSlice> {
    workloads
        .iter()
        .filter(|w| {
            !w.is_finished()
                && (!w.has_quota_reservation() || !w.is_admitted())
                && w.metadata.deletion_timestamp.is_none()
        })
        .max_by_key(|w| w.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .map(|w| PendingSlice {
            workload: w.name_any(),
            local_queue: w.spec.queue_name.clone().unwrap_or_default(),
            message: waits_for(w),
            quota_denied: !w.has_quota_reservation()
                && w.status.as_ref().is_some_and(|s| {
                    s.condition(crate::api::kueue::constants::condition::QUOTA_RESERVED)
                        .is_some_and(|c| c.status == crate::api::conditions::FALSE)
                }),
        })
}

fn waits_for(w: &Workload) -> String {
    if let Some(a) = w.admission().filter(|_| w.has_quota_reservation()) {
        let checks: Vec<String> = w
            .status
            .iter()
            .flat_map(|s| s.admission_checks.iter())
            .filter(|c| c.state != crate::api::kueue::CheckState::Ready)
            .map(|c| {
                if c.message.is_empty() {
                    format!("{} ({:?})", c.name, c.state)
                } else {
                    format!("{} ({:?}: {})", c.name, c.state, c.message)
                }
            })
            .collect();
        return if checks.is_empty() {
            format!(
                "quota reserved in ClusterQueue {}; waiting for the Admitted condition",
                a.cluster_queue
            )
        } else {
            format!(
                "quota reserved in ClusterQueue {}; waiting for admission checks: {}",
                a.cluster_queue,
                checks.join(", ")
            )
        };
    }
    w.status
        .as_ref()
        .and_then(|s| s.condition(condition::QUOTA_RESERVED))
        .map(|c| with_topology_level(&w.spec.pod_sets, &c.message))
        .unwrap_or_else(|| "not yet considered by the scheduler".to_string())
}

/// Kueue's reason, and when it is a podset's topology having no room, the level that podset asks
/// one domain of: Kueue's message names only the Topology (`topology "default" allows to fit only
/// 1 out of 3 pod(s)`), not which level has no domain with room.
pub fn with_topology_level(pod_sets: &[crate::api::kueue::PodSet], message: &str) -> String {
    let level = message
        .strip_prefix("couldn't assign flavors to pod set ")
        .and_then(|rest| rest.split_once(": topology "))
        .and_then(|(podset, _)| pod_sets.iter().find(|p| p.name() == podset))
        .and_then(|p| {
            let req = p.topology_request.as_ref()?;
            let (name, n) = (p.name(), p.count());
            match (&req.required, &req.preferred) {
                (Some(l), _) => Some(format!(
                    "; podset {name} requires its {n} pod(s) in one domain of topology level {l}, and no {l} domain has room"
                )),
                (None, Some(l)) => Some(format!("; podset {name} prefers topology level {l}")),
                _ => None,
            }
        });
    match level {
        Some(l) => format!("{message}{l}"),
        None => message.to_string(),
    }
}

/// True when `rc` is a job of its own under quota, under Kueue's default configuration:
/// queue-labelled, and not a child of a Ray kind that is the job instead (a RayService's clusters are
/// gated by the service's chain). The controllers decide with [`manages`] on [`own_job`] clusters.
pub fn standalone_managed(rc: &RayCluster) -> bool {
    queue_name(&rc.metadata).is_some() && own_job(rc)
}

/// `rc` is not the child of a Ray kind that is the job instead (Kueue: a job owned by a managed job
/// is not a job of its own).
pub fn own_job(rc: &RayCluster) -> bool {
    !rc.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && (o.kind == c::CRD_RAY_SERVICE || o.kind == c::CRD_RAY_JOB))
}

/// The gate of a queue-labelled RayCluster with a chain of its own: per group, the pods the latest
/// admitted Workload (or slice) covers with this cluster's own per-pod requests, whatever `replicas`,
/// `suspend` or the autoscaler say. Nothing admitted (pending, evicted, deleted) covers nothing.
pub fn decide_standalone(rc: &RayCluster, workloads: &[Workload], live: &LivePods) -> ClusterGate {
    let waiting = pending_slice(workloads);
    let Ok(own) = demand::child_demand(rc, &Default::default()) else {
        return ClusterGate {
            waiting,
            ..Default::default()
        };
    };
    let Some(child) = demand::at_least_live(vec![own], live).pop() else {
        return ClusterGate {
            waiting,
            ..Default::default()
        };
    };
    let admitted = demand::admitted_slice(workloads);
    let allowed = demand::allowed_by_requests(admitted.map(|w| w.spec.pod_sets.as_slice()), &child);
    ClusterGate {
        covered: demand::covers(&allowed, &child),
        allowed,
        waiting,
        admitted: admitted.cloned(),
        podset_of: BTreeMap::new(),
    }
}

/// The gate as the API shows it now (lists the children, the workloads and the children's pods).
pub async fn load(client: &Client, rs: &RayService) -> Result<Gate, kube::Error> {
    Ok(load_with_workloads(client, rs).await?.0)
}

/// `load`, and the service's Workloads it was decided on.
async fn load_with_workloads(client: &Client, rs: &RayService) -> Result<(Gate, Vec<Workload>), kube::Error> {
    let ns = rs.namespace().unwrap_or_default();
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let children = load_children(client, rs).await?;
    let workloads = owned_workloads(client, &ns, &uid).await?;
    let live = children_pods(client, &ns, &children).await?;
    Ok((decide(rs, &children, &workloads, &live), workloads))
}

/// The RayJob whose own cluster `rc` is: its controller owner of kind RayJob.
pub fn parent_ray_job(rc: &RayCluster) -> Option<String> {
    rc.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.kind == c::CRD_RAY_JOB)
        .map(|o| o.name.clone())
}

/// The gate of a queue-managed RayJob's own cluster: per group, the pods the RayJob's admitted
/// Workload covers with the cluster's own requests (its podsets are the cluster's, plus a submitter's),
/// whatever a user writes into the cluster afterwards. A RayJob that is not queue-managed leaves its
/// cluster ungated; one that cannot be found covers nothing.
async fn ray_job_cluster_gate(
    client: &Client,
    managed: &ManagedJobs,
    rc: &RayCluster,
    ns: &str,
    job: &str,
) -> Result<Option<ClusterGate>, kube::Error> {
    let api: Api<crate::api::ray::RayJob> = Api::namespaced(client.clone(), ns);
    let Some(rj) = api.get_opt(job).await? else {
        return Ok(Some(ClusterGate::default()));
    };
    if !manages(client, managed, &rj.metadata).await? {
        return Ok(None);
    }
    let uid = rj.metadata.uid.clone().unwrap_or_default();
    let workloads = owned_workloads(client, ns, &uid).await?;
    let live = children_pods(client, ns, std::slice::from_ref(rc)).await?;
    Ok(Some(decide_standalone(rc, &workloads, &live)))
}

/// The RayService a RayCluster belongs to: its controller owner of kind RayService, else (an owner
/// reference removed by hand) its `ray.io/originated-from-*` labels.
pub fn parent_service(rc: &RayCluster) -> Option<String> {
    let by_owner = rc
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.kind == c::CRD_RAY_SERVICE)
        .map(|o| o.name.clone());
    let labels = rc.labels();
    let by_label = (labels.get(c::LABEL_ORIGINATED_FROM_CRD).map(String::as_str) == Some(c::CRD_RAY_SERVICE))
        .then(|| labels.get(c::LABEL_ORIGINATED_FROM_CR_NAME).cloned())
        .flatten();
    by_owner.or(by_label)
}

/// What the gate lets one RayCluster run, and the slice it waits for, if any.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterGate {
    /// Pods per group (`head` for the head).
    pub allowed: BTreeMap<String, i64>,
    /// Every pod the cluster wants is covered.
    pub covered: bool,
    pub waiting: Option<PendingSlice>,
    /// The admitted Workload (or slice) covering the cluster: its admission says what each new pod
    /// carries (the flavor's node selector and tolerations, the podset label), whatever the templates
    /// say after a re-apply. For a RayService's child, the service's slice: nothing of it is written
    /// into the user's RayService.
    pub admitted: Option<Workload>,
    /// Group -> the podset of `admitted` that stands for its pods, where its name is not the group's
    /// (a RayService's podsets are per quota identity, `<group>-<hash>` when a group has several).
    pub podset_of: BTreeMap<String, String>,
}

impl ClusterGate {
    /// The `QuotaGated` condition's message: why the cluster waits, or what covers it.
    pub fn message(&self) -> String {
        match (&self.waiting, self.covered) {
            (_, true) => "an admitted workload slice covers every pod".to_string(),
            (Some(p), false) => format!(
                "waiting for workload slice {} (LocalQueue {}): {}",
                p.workload, p.local_queue, p.message
            ),
            (None, false) => "no admitted workload slice covers this cluster".to_string(),
        }
    }

    /// Per group (`head` or a worker group), how many of the pods `rc` wants the gate does not let
    /// it run; groups it covers are left out.
    pub fn short_of(&self, rc: &RayCluster) -> BTreeMap<String, i64> {
        let Ok(child) = demand::child_demand(rc, &Default::default()) else {
            return BTreeMap::new();
        };
        let mut want: BTreeMap<String, i64> = BTreeMap::new();
        for (id, n, _) in &child.pods {
            *want.entry(id.group.clone()).or_default() += n;
        }
        want.into_iter()
            .filter_map(|(g, n)| {
                let short = n.saturating_sub(self.allowed.get(&g).copied().unwrap_or(0));
                (short > 0).then_some((g, short))
            })
            .collect()
    }
}

/// The gate of `rc`, or `None` when `rc` is not quota-gated (neither managed itself nor the child of a
/// managed RayService or RayJob; managed as the job reconciler decides it, [`manages`] under the
/// configuration's `manageJobsWithoutQueueName`). A parent that cannot be found covers nothing.
pub async fn cluster_gate(
    client: &Client,
    managed: &ManagedJobs,
    rc: &RayCluster,
) -> Result<Option<ClusterGate>, kube::Error> {
    let ns = rc.namespace().unwrap_or_default();
    if let Some(job) = parent_ray_job(rc) {
        return ray_job_cluster_gate(client, managed, rc, &ns, &job).await;
    }
    let Some(parent) = parent_service(rc) else {
        if !own_job(rc) || !manages(client, managed, &rc.metadata).await? {
            return Ok(None);
        }
        let uid = rc.metadata.uid.clone().unwrap_or_default();
        let workloads = owned_workloads(client, &ns, &uid).await?;
        let live = children_pods(client, &ns, std::slice::from_ref(rc)).await?;
        return Ok(Some(decide_standalone(rc, &workloads, &live)));
    };
    let api: Api<RayService> = Api::namespaced(client.clone(), &ns);
    let Some(rs) = api.get_opt(&parent).await? else {
        return Ok(Some(ClusterGate::default()));
    };
    if !service_managed(client, managed, &rs).await? {
        return Ok(None);
    }
    let (gate, workloads) = load_with_workloads(client, &rs).await?;
    let name = rc.name_any();
    let admitted = demand::admitted_slice(&workloads).cloned();
    let podset_of = match (&admitted, demand::child_demand(rc, &Default::default())) {
        (Some(w), Ok(own)) => demand::podset_names(&w.spec.pod_sets, &own),
        _ => BTreeMap::new(),
    };
    Ok(Some(ClusterGate {
        allowed: gate.allowed.get(&name).cloned().unwrap_or_default(),
        covered: gate.covered.contains(&name),
        waiting: gate.pending,
        admitted,
        podset_of,
    }))
}

#[cfg(test)]
mod standalone_tests {
    use super::*;
    use crate::admission as conditions;
    use crate::api::kueue::constants::label;
    use crate::api::kueue::{Admission, PodSetAssignment};
    use crate::jobframework::GenericJob;
    use crate::rayservice::job::raycluster::RayClusterJob;

    fn rc(workers: i32, cpu: &str) -> RayCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "rc", "namespace": "default", "uid": "u1", "labels": {label::QUEUE_NAME: "lq"}},
            "spec": {
                "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "resources": {"requests": {"cpu": "1"}}}]}}},
                "workerGroupSpecs": [{"groupName": "Workers", "replicas": workers, "template": {"spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": cpu}}}]}}}]
            }
        }))
        .unwrap()
    }

    fn workload(of: &RayCluster, admitted: bool) -> Workload {
        let mut w = Workload::build("w", "default").queue("lq").build();
        w.spec.pod_sets = RayClusterJob::new(of.clone()).pod_sets().unwrap();
        if admitted {
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
        }
        w
    }

    fn allowed(g: &ClusterGate) -> Vec<(String, i64)> {
        g.allowed.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    #[test]
    fn a_standalone_cluster_runs_what_its_admitted_workload_covers_and_no_more() {
        let admitted = workload(&rc(1, "1"), true);
        // Raised replicas: creation stops at the one worker the Workload holds.
        let g = decide_standalone(&rc(6, "1"), std::slice::from_ref(&admitted), &LivePods::new());
        assert_eq!(allowed(&g), vec![("head".into(), 1), ("workers".into(), 1)]);
        assert!(!g.covered);
        // New requests: nothing of the group is covered by the old reservation.
        let g = decide_standalone(&rc(1, "2"), std::slice::from_ref(&admitted), &LivePods::new());
        assert_eq!(allowed(&g), vec![("head".into(), 1), ("workers".into(), 0)]);
        // Exactly what is admitted.
        let g = decide_standalone(&rc(1, "1"), std::slice::from_ref(&admitted), &LivePods::new());
        assert!(g.covered);
        assert_eq!(g.admitted.as_ref().map(|w| w.name_any()), Some("w".to_string()));
        // Pending only: the gate is closed and says what it waits for.
        let pending = workload(&rc(1, "1"), false);
        let g = decide_standalone(&rc(1, "1"), std::slice::from_ref(&pending), &LivePods::new());
        assert_eq!(allowed(&g), vec![("head".into(), 0), ("workers".into(), 0)]);
        assert_eq!(g.waiting.map(|p| p.workload), Some("w".to_string()));
        // No workload at all.
        assert!(
            decide_standalone(&rc(1, "1"), &[], &LivePods::new())
                .allowed
                .values()
                .all(|n| *n == 0)
        );
    }

    #[test]
    fn only_queue_labelled_clusters_that_are_no_child_of_a_ray_kind_are_standalone() {
        let mut c = rc(1, "1");
        assert!(standalone_managed(&c));
        c.metadata.owner_references = Some(vec![serde_json::from_value(serde_json::json!({"apiVersion": "ray.io/v1", "kind": "RayService", "name": "s", "uid": "u", "controller": true})).unwrap()]);
        assert!(!standalone_managed(&c));
        let mut plain = rc(1, "1");
        plain.metadata.labels = None;
        assert!(!standalone_managed(&plain));
    }
}
