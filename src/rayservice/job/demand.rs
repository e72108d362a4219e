//! What a queue-managed RayService demands, from its live child RayClusters, and what an admitted workload
//! slice lets each child run (the gate). Pure: the job reconciler, the RayService controller and the
//! RayCluster controller all decide with these same functions.
//!
//! A child's podsets are its RayCluster podsets (`cluster::podsets`: built from the very pods the RayCluster
//! controller creates). Across children, podsets of the same group with the same *quota identity* (per-pod
//! requests, node selector, affinity, tolerations: what quota and flavor assignment depend on) are one podset
//! with the counts summed, so an image or rayVersion bump stays one podset per group; a resized group becomes
//! a podset of its own with its own requests (exact accounting, where Kueue's proof of concept counted every
//! child with the first child's template).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use kube::ResourceExt;
use sha2::{Digest, Sha256};

use crate::api::kueue::tas::{decode_assignment, podset_topology_request};
use crate::api::kueue::{PodSet, Workload};
use crate::api::ray::RayCluster;
use crate::api::ray::constants as c;
use crate::jobframework::interface::DemandChange;
use crate::queue::amount::Amount;
use crate::queue::requests::pod_requests;
use crate::queue::topology::{ANNOTATION_TOPOLOGY_RUNNING, Placement, running_annotation};
use crate::rayservice::cluster::BuildOptions;
use crate::rayservice::cluster::podsets::{HEAD_PODSET, cluster_podsets};

/// Kueue's limit on podsets per Workload.
pub const MAX_PODSETS: usize = crate::api::kueue::validation::MAX_PODSETS;

/// What quota and flavor assignment see of a pod: its group and per-pod requests, and its scheduling
/// constraints. Two pods with equal identities are interchangeable for quota.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct QuotaIdentity {
    pub group: String,
    requests: BTreeMap<String, Amount>,
    /// nodeSelector, affinity and tolerations as JSON (compared, never interpreted here).
    constraints: String,
    /// The child whose pods these are, for a group that asks for one topology domain
    /// (`podset-required-topology` / `podset-preferred-topology`): each cluster is placed in a
    /// domain of its own, as Kueue places each RayCluster, so the serving and the pending cluster
    /// never form one podset that would have to fit one domain together. The child is named by
    /// the spec hash KubeRay stamps on it (`ray.io/hash-without-replicas-and-workers-to-delete`,
    /// its name without one): the spec's demand before any child exists is the first child's.
    /// `None` for a group that asks for no domain.
    cluster: Option<String>,
}

/// Label on a podset template naming the child of [`QuotaIdentity::cluster`].
pub const LABEL_PODSET_CLUSTER: &str = "quotagate.io/podset-cluster";

/// The key of a child in [`QuotaIdentity::cluster`].
fn cluster_key(rc: &RayCluster) -> String {
    rc.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(c::ANNOTATION_HASH_WITHOUT_REPLICAS))
        .filter(|h| !h.is_empty())
        .cloned()
        .unwrap_or_else(|| rc.metadata.name.clone().unwrap_or_default())
}

/// Annotation on a podset template naming the topology level its node selector pins (see [`Pins`]).
pub const ANNOTATION_TOPOLOGY_PIN: &str = "quotagate.io/topology-pin";

/// Where the pods of each identity already run, read from the admitted slice's
/// `topologyAssignment`. A replacement slice is placed without the slice it replaces, so its
/// podsets carry this: they are placed where their pods are, and only the rest of the topology is
/// open to the pending cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pins {
    /// Per single-cluster identity: the level its podset asks one domain of and that domain's
    /// value, when all its pods are in one. Carried as a node selector on that level.
    pub domains: BTreeMap<QuotaIdentity, (String, String)>,
    /// Per identity, merged ones (a head, a slices-only group) included: the domains of its pods
    /// and their counts, at the assignment's levels (a hostname-only one too). Carried as
    /// [`ANNOTATION_TOPOLOGY_RUNNING`]: placement counts those pods there and places the rest.
    pub running: BTreeMap<QuotaIdentity, Placement>,
}

/// Why a demand cannot be computed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DemandError {
    #[error("RayCluster {cluster}: {message}")]
    Cluster { cluster: String, message: String },
    #[error(
        "the RayService's clusters need {count} podsets (one per worker group and distinct resource shape), more than Kueue's limit of {MAX_PODSETS} per Workload"
    )]
    TooManyPodSets { count: usize },
}

/// The quota identity of a podset template of `group`.
pub fn identity(group: &str, template: &PodTemplateSpec) -> Result<QuotaIdentity, String> {
    let spec = template.spec.clone().unwrap_or_default();
    let requests = pod_requests("template.spec", &spec)
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|(_, v)| *v != Amount::ZERO)
        .collect();
    let constraints = serde_json::json!({
        "nodeSelector": spec.node_selector,
        "affinity": spec.affinity,
        "tolerations": spec.tolerations,
    })
    .to_string();
    Ok(QuotaIdentity {
        group: group.to_string(),
        requests,
        constraints,
        cluster: None,
    })
}

/// The level a podset template asks one domain of (required, else preferred), from its TAS
/// annotations.
fn domain_level(template: &PodTemplateSpec) -> Option<String> {
    let req = podset_topology_request(template.metadata.as_ref(), None).ok()??;
    req.required.or(req.preferred)
}

/// One child's share: its name and, per quota identity, how many pods it keeps.
#[derive(Clone, Debug, PartialEq)]
pub struct ChildDemand {
    pub name: String,
    pub pods: Vec<(QuotaIdentity, i64, PodTemplateSpec)>,
}

/// The demand of one child RayCluster.
pub fn child_demand(rc: &RayCluster, opts: &BuildOptions) -> Result<ChildDemand, DemandError> {
    let name = rc.metadata.name.clone().unwrap_or_default();
    let err = |message: String| DemandError::Cluster {
        cluster: name.clone(),
        message,
    };
    let podsets = cluster_podsets(rc, opts).map_err(|e| err(e.to_string()))?;
    let mut pods = Vec::with_capacity(podsets.len());
    for ps in podsets {
        let group = ps.name.clone().unwrap_or_default();
        let mut id = identity(&group, &ps.template).map_err(err)?;
        if domain_level(&ps.template).is_some() {
            id.cluster = Some(cluster_key(rc));
        }
        let leaving = leaving_pods(rc, &group);
        pods.push((id, i64::from(ps.count()) + leaving, ps.template));
    }
    Ok(ChildDemand { name, pods })
}

/// Workers of podset `group` the autoscaler scaled away and named in `workersToDelete`: they run
/// until the RayCluster controller deletes them, and the autoscaler clears the list once they are
/// gone, so a scale-down releases quota only after its pods left (I2), not before.
fn leaving_pods(rc: &RayCluster, group: &str) -> i64 {
    rc.spec
        .worker_groups()
        .iter()
        .find(|g| g.group_name.to_lowercase() == group)
        .map_or(0, |g| {
            let listed = i64::try_from(g.workers_to_delete().len()).unwrap_or(i64::MAX);
            listed.min(
                i64::from(g.max_replicas_or_default().max(0)) * i64::from(g.num_of_hosts_or_default().max(1)),
            )
        })
}

/// Raises each child's demand to the pods it runs now (`live`): a group can run more pods than its
/// spec asks for, e.g. an autoscaled group whose `replicas` went down without its surplus named in
/// `workersToDelete` (with autoscaling on, KubeRay then keeps those pods until the autoscaler names
/// them). Quota covers what runs, so a slice shrinks only once such pods are gone (I2).
pub fn at_least_live(mut children: Vec<ChildDemand>, live: &LivePods) -> Vec<ChildDemand> {
    for child in &mut children {
        let Some(groups) = live.get(&child.name) else {
            continue;
        };
        for (id, n, _) in &mut child.pods {
            if let Some(&running) = groups.get(&id.group) {
                *n = (*n).max(running);
            }
        }
    }
    children
}

/// Children in the order they were created (name breaks ties): older children are covered first, so the
/// serving cluster keeps its coverage while a newer one waits.
pub fn in_creation_order(children: &mut [&RayCluster]) {
    children.sort_by(|a, b| {
        let key = |r: &RayCluster| {
            (
                r.metadata.creation_timestamp.as_ref().map(|t| t.0),
                r.metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
}

fn short_hash(id: &QuotaIdentity) -> String {
    let mut h = Sha256::new();
    h.update(format!("{:?}{}", id.requests, id.constraints));
    if let Some(cluster) = &id.cluster {
        h.update(cluster.as_bytes());
    }
    let digest = h.finalize();
    digest
        .iter()
        .take(3)
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..5]
        .to_string()
}

/// The podsets of a whole demand: one per quota identity, counts summed, in first-seen order. A group with
/// one identity keeps its plain name (`head`, `<group>`); a group with several gets `<group>-<hash>` per
/// identity. Each template carries the group as `ray.io/group` so the identity can be read back.
pub fn podsets(children: &[ChildDemand]) -> Result<Vec<PodSet>, DemandError> {
    podsets_pinned(children, &Pins::default())
}

/// [`podsets`], each carrying its template's topology request, and each identity of `pins` pinned
/// to the domain its pods run in (a node selector on that level, named by
/// [`ANNOTATION_TOPOLOGY_PIN`] so the identity reads the same) and naming where its running pods
/// are ([`ANNOTATION_TOPOLOGY_RUNNING`], at most the podset's count of them).
pub fn podsets_pinned(children: &[ChildDemand], pins: &Pins) -> Result<Vec<PodSet>, DemandError> {
    let mut merged: Vec<(QuotaIdentity, i64, PodTemplateSpec)> = Vec::new();
    for child in children {
        for (id, count, template) in &child.pods {
            match merged.iter_mut().find(|(m, _, _)| m == id) {
                Some((_, n, _)) => *n = n.saturating_add(*count),
                None => merged.push((id.clone(), *count, template.clone())),
            }
        }
    }
    if merged.len() > MAX_PODSETS {
        return Err(DemandError::TooManyPodSets { count: merged.len() });
    }
    let shapes = |group: &str| merged.iter().filter(|(m, _, _)| m.group == group).count();
    Ok(merged
        .iter()
        .map(|(id, count, template)| {
            let name = if shapes(&id.group) > 1 {
                let base: String = id.group.chars().take(57).collect();
                format!("{}-{}", base.trim_end_matches('-'), short_hash(id))
            } else {
                id.group.clone()
            };
            let mut template = template.clone();
            let meta = template.metadata.get_or_insert_with(Default::default);
            let labels = meta.labels.get_or_insert_with(BTreeMap::new);
            labels.insert(c::LABEL_GROUP.to_string(), id.group.clone());
            if let Some(cluster) = &id.cluster {
                labels.insert(LABEL_PODSET_CLUSTER.to_string(), cluster.clone());
            }
            apply_pins(&mut template, id, *count, pins);
            // The slice asks for the topology the clusters' templates ask for (Kueue's
            // `BuildPodSets` reads it from the same annotations).
            let topology_request = podset_topology_request(template.metadata.as_ref(), None)
                .ok()
                .flatten();
            PodSet {
                name: Some(name),
                template,
                count: Some(i32::try_from(*count).unwrap_or(i32::MAX)),
                topology_request,
                ..Default::default()
            }
        })
        .collect())
}

/// Pins the podsets built by [`podsets`] (the plan's, say) as [`podsets_pinned`] does: each
/// identity of `pins` is kept where its pods run.
pub fn pin(podsets: &mut [PodSet], pins: &Pins) {
    for ps in podsets {
        if let Some(id) = podset_identity(ps) {
            let count = i64::from(ps.count());
            apply_pins(&mut ps.template, &id, count, pins);
        }
    }
}

/// The node selector pin and the running pods of identity `id` (`count` pods) on its template.
fn apply_pins(template: &mut PodTemplateSpec, id: &QuotaIdentity, count: i64, pins: &Pins) {
    if let Some(running) = pins.running.get(id).map(|r| r.truncated(count))
        && !running.domains.is_empty()
    {
        template
            .metadata
            .get_or_insert_with(Default::default)
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                ANNOTATION_TOPOLOGY_RUNNING.to_string(),
                running_annotation(&running),
            );
    }
    if let Some((level, value)) = pins.domains.get(id) {
        let selector = template
            .spec
            .get_or_insert_with(Default::default)
            .node_selector
            .get_or_insert_with(BTreeMap::new);
        // A selector the user wrote on that level already says where the pods are.
        if !selector.contains_key(level) {
            selector.insert(level.clone(), value.clone());
            template
                .metadata
                .get_or_insert_with(Default::default)
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(ANNOTATION_TOPOLOGY_PIN.to_string(), level.clone());
        }
    }
}

/// The quota identity a stored podset stands for (its group from the `ray.io/group` label, else its
/// name; its cluster from [`LABEL_PODSET_CLUSTER`]; a pinned node selector left out).
fn podset_identity(ps: &PodSet) -> Option<QuotaIdentity> {
    let meta = ps.template.metadata.as_ref();
    let label = |k: &str| {
        meta.and_then(|m| m.labels.as_ref())
            .and_then(|l| l.get(k))
            .cloned()
    };
    let group = label(c::LABEL_GROUP).or_else(|| ps.name.clone())?;
    let pinned = meta
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(ANNOTATION_TOPOLOGY_PIN));
    let mut id = match pinned {
        Some(level) => {
            let mut t = ps.template.clone();
            if let Some(spec) = t.spec.as_mut()
                && let Some(sel) = spec.node_selector.as_mut()
            {
                sel.remove(level);
                if sel.is_empty() {
                    spec.node_selector = None;
                }
            }
            identity(&group, &t).ok()?
        }
        None => identity(&group, &ps.template).ok()?,
    };
    id.cluster = label(LABEL_PODSET_CLUSTER);
    Some(id)
}

/// Where the pods of each identity of the admitted slice `w` run, from its `topologyAssignment`:
/// every identity's domains and counts ([`Pins::running`]), and for a single-cluster identity the
/// level its podset asks one domain of and that domain's value, when the assignment names that
/// level and puts every pod in one domain of it ([`Pins::domains`]). An assignment naming only
/// hostnames gives the running pods, not the domain: placement finds that from the hosts.
pub fn pins(w: Option<&Workload>) -> Pins {
    let mut out = Pins::default();
    let Some(w) = w else {
        return out;
    };
    let Some(admission) = w.admission() else {
        return out;
    };
    for ps in &w.spec.pod_sets {
        let Some(id) = podset_identity(ps) else {
            continue;
        };
        let Some(ta) = admission
            .pod_set_assignments
            .iter()
            .find(|a| Some(a.name.as_str()) == ps.name.as_deref())
            .and_then(|a| a.topology_assignment.as_ref())
        else {
            continue;
        };
        let domains: Vec<_> = decode_assignment(ta)
            .into_iter()
            .filter(|d| d.count > 0)
            .collect();
        if domains.is_empty() {
            continue;
        }
        let pin = domain_level(&ps.template)
            .filter(|_| id.cluster.is_some())
            .and_then(|level| {
                let at = ta.levels.iter().position(|l| *l == level)?;
                let mut values = domains.iter().filter_map(|d| d.values.get(at));
                let first = values.next()?;
                values.all(|v| v == first).then(|| (level, first.clone()))
            });
        if let Some(pin) = pin {
            out.domains.insert(id.clone(), pin);
        }
        out.running.insert(
            id,
            Placement {
                levels: ta.levels.clone(),
                domains,
            },
        );
    }
    out
}

/// Pods per quota identity that `podsets` provide.
fn capacity(podsets: &[PodSet]) -> Vec<(Option<QuotaIdentity>, i64)> {
    podsets
        .iter()
        .map(|p| (podset_identity(p), i64::from(p.count())))
        .collect()
}

/// How `desired` (from the live children) relates to a workload's podsets. Unreserved: anything is taken in
/// place. Reserved: a demand every identity of which the workload holds enough of is a shrink in place (the
/// workload keeps its podsets, counts lowered: Kueue keeps an admitted workload's podsets immutable but for
/// counts going down); anything more is a new slice.
pub fn compare(desired: &[PodSet], workload: &[PodSet], reserved: bool) -> DemandChange {
    let want = capacity(desired);
    let have = capacity(workload);
    if !reserved {
        return if want == have && names(desired) == names(workload) {
            DemandChange::Same
        } else {
            DemandChange::PodSets(desired.to_vec())
        };
    }
    let mut counts: Vec<i64> = vec![0; have.len()];
    for (id, n) in &want {
        if *n == 0 {
            continue;
        }
        let slot = have.iter().position(|(h, _)| h.is_some() && h == id);
        match slot {
            Some(i) if counts[i] + n <= have[i].1 => counts[i] += n,
            _ => return DemandChange::Grow,
        }
    }
    if counts.iter().zip(&have).all(|(c, (_, h))| c == h) {
        return DemandChange::Same;
    }
    let mut shrunk = workload.to_vec();
    for (ps, n) in shrunk.iter_mut().zip(counts) {
        ps.count = Some(i32::try_from(n).unwrap_or(i32::MAX));
    }
    DemandChange::PodSets(shrunk)
}

fn names(podsets: &[PodSet]) -> Vec<Option<&str>> {
    podsets.iter().map(|p| p.name.as_deref()).collect()
}

/// Per group of `child`, the name of the podset of `podsets` that stands for its pods (same quota
/// identity): what a new pod of that group carries from the slice's admission. A group no podset
/// stands for is left out.
pub fn podset_names(podsets: &[PodSet], child: &ChildDemand) -> BTreeMap<String, String> {
    child
        .pods
        .iter()
        .filter_map(|(id, _, _)| {
            let ps = podsets
                .iter()
                .find(|ps| podset_identity(ps).as_ref() == Some(id))?;
            Some((id.group.clone(), ps.name.clone()?))
        })
        .collect()
}

/// The latest admitted slice of a chain: quota reserved, admitted, not finished, not evicted. While a
/// replacement and the slice it replaces are both admitted (the moment between the two writes), the
/// replacement.
pub fn admitted_slice(workloads: &[Workload]) -> Option<&Workload> {
    let admitted: Vec<&Workload> = workloads
        .iter()
        .filter(|w| {
            w.metadata.deletion_timestamp.is_none()
                && !w.is_finished()
                && w.has_quota_reservation()
                && w.is_admitted()
                && !crate::jobframework::is_evicted(w)
        })
        .collect();
    latest_of(&admitted)
}

/// The latest of some slices of one chain: the one replacing another of them (a replacement and the
/// slice it replaces are both there between the two writes), else the first.
pub fn latest_of<'a>(slices: &[&'a Workload]) -> Option<&'a Workload> {
    slices
        .iter()
        .find(|w| {
            crate::jobframework::replacement_for(w).is_some_and(|k| {
                slices
                    .iter()
                    .any(|o| o.metadata.name.as_deref() == Some(k.name.as_str()))
            })
        })
        .or(slices.first())
        .copied()
}

/// Pods each child runs now, per group (`head` for the head): child -> group -> pods not being deleted.
pub type LivePods = BTreeMap<String, BTreeMap<String, i64>>;

/// Counts live pods by the labels the RayCluster controller puts on them.
pub fn live_pods<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> LivePods {
    count_pods(
        pods.into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none()),
    )
}

/// Counts pods by the labels the RayCluster controller puts on them, terminating ones included: they
/// still run until gone, and quota must cover them until then.
pub fn pods_until_gone<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> LivePods {
    count_pods(pods)
}

fn count_pods<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> LivePods {
    let mut out = LivePods::new();
    for p in pods {
        let Some((cluster, group)) = cluster_and_podset(p) else {
            continue;
        };
        *out.entry(cluster.clone()).or_default().entry(group).or_default() += 1;
    }
    out
}

/// The cluster a Ray pod belongs to and its podset there (`head`, or its worker group lowercased).
pub fn cluster_and_podset(p: &Pod) -> Option<(&String, String)> {
    let labels = p.labels();
    let cluster = labels.get(c::LABEL_CLUSTER)?;
    let group = if labels.get(c::LABEL_NODE_TYPE).map(String::as_str) == Some(c::NODE_TYPE_HEAD) {
        HEAD_PODSET.to_string()
    } else {
        labels
            .get(c::LABEL_GROUP)
            .cloned()
            .unwrap_or_default()
            .to_lowercase()
    };
    Some((cluster, group))
}

/// How a cluster's pods stand with the scheduler, per podset (Kueue v0.20's PodsScheduled).
pub fn pods_scheduling<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> crate::jobframework::PodsScheduling {
    crate::jobframework::count_pods_scheduling(
        pods.into_iter()
            .filter_map(|p| cluster_and_podset(p).map(|(_, group)| (p, group))),
    )
}

/// The gate: how many pods of each group each child may have, given the latest admitted slice's podsets.
/// Children are covered in order (pass them oldest first), in two rounds: first the pods each child
/// runs now (`live`), then what each wants beyond them, from what is left. A child whose demand grows
/// (the autoscaler, a rollback) thus never takes the coverage of pods another child already runs:
/// its growth waits for a larger slice instead of running beside them past the quota.
pub fn allowed_pods(
    admitted: Option<&[PodSet]>,
    children: &[ChildDemand],
    live: &LivePods,
) -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut left = admitted.map(capacity).unwrap_or_default();
    let mut take = |id: &QuotaIdentity, mut want: i64| {
        let mut taken = 0;
        for (_, n) in left.iter_mut().filter(|(h, _)| h.as_ref() == Some(id)) {
            let t = (*n).min(want);
            *n -= t;
            want -= t;
            taken += t;
        }
        taken
    };
    let running = |child: &str, group: &str| live.get(child).and_then(|g| g.get(group)).copied().unwrap_or(0);
    let mut granted: Vec<Vec<i64>> = children
        .iter()
        .map(|child| {
            child
                .pods
                .iter()
                .map(|(id, want, _)| take(id, (*want).min(running(&child.name, &id.group))))
                .collect()
        })
        .collect();
    for (child, got) in children.iter().zip(granted.iter_mut()) {
        for ((id, want, _), g) in child.pods.iter().zip(got.iter_mut()) {
            *g += take(id, want - *g);
        }
    }
    children
        .iter()
        .zip(granted)
        .map(|(child, got)| {
            let mut groups: BTreeMap<String, i64> = BTreeMap::new();
            for ((id, _, _), g) in child.pods.iter().zip(got) {
                *groups.entry(id.group.clone()).or_default() += g;
            }
            (child.name.clone(), groups)
        })
        .collect()
}

/// True when the allowance covers every pod the child wants.
pub fn covers(allowed: &BTreeMap<String, i64>, child: &ChildDemand) -> bool {
    let mut want: BTreeMap<&str, i64> = BTreeMap::new();
    for (id, n, _) in &child.pods {
        *want.entry(id.group.as_str()).or_default() += n;
    }
    want.iter()
        .all(|(g, n)| allowed.get(*g).copied().unwrap_or(0) >= *n)
}

/// What the latest admitted podsets let ONE cluster with a chain of its own (a queue-labelled RayCluster)
/// run, per group: a podset covers the group of its name while its per-pod requests equal the cluster's
/// own. Placement constraints do not count here: admission itself injects the flavor's node selector and
/// tolerations into a running cluster's templates. A group whose requests were edited (a Recreate to new
/// resources) is covered by nothing until a workload with the new requests is admitted.
pub fn allowed_by_requests(admitted: Option<&[PodSet]>, child: &ChildDemand) -> BTreeMap<String, i64> {
    child
        .pods
        .iter()
        .map(|(id, _, _)| {
            let n = admitted
                .unwrap_or_default()
                .iter()
                .filter(|ps| ps.name.as_deref() == Some(id.group.as_str()))
                .filter(|ps| identity(&id.group, &ps.template).is_ok_and(|w| w.requests == id.requests))
                .map(|ps| i64::from(ps.count().max(0)))
                .sum();
            (id.group.clone(), n)
        })
        .collect()
}

#[cfg(test)]
#[path = "demand_tests.rs"]
mod tests;
