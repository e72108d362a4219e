//! Pod groups (Kueue's pod controller with `isGroup`): the Pods labelled `kueue.x-k8s.io/pod-group-name`
//! with the `kueue.x-k8s.io/pod-group-total-count` annotation share one Workload named after the group,
//! created once the group's total count of pods exists; its podsets are the pods' roles (Kueue's role
//! hash), counted. Admission ungates every pod with its role's info; the group finishes when all its pods
//! succeeded; a stop deletes every pod still running or ungated. The decision is the job framework's
//! [`plan_managed`] over a [`PodGroup`] (a `GenericJob` built from the group's pods), in [`decide`];
//! `group_controller` acts on it.
//!
//! A pod that failed leaves its group running on the Workload until a replacement (a new gated pod of
//! the same role) is ungated in its place; pods beyond what the group counts are deleted (Kueue's
//! excess pods). Not (yet) as Kueue: the `WaitingForReplacementPods` condition, the expectations that
//! wait to observe a deletion before deleting more, fast admission
//! (`kueue.x-k8s.io/pod-group-fast-admission`) and serving groups.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use kube::core::GroupVersionKind;

use super::readiness::{self, ReadinessGates};
use super::{finalizer_removable, gvk, pod_set, ungate};
use crate::api::kueue::constants::label;
use crate::api::kueue::{PodSet, ReclaimablePod, Workload};
use crate::api::pod as p;
use crate::jobframework::workload::{WorkloadOptions, construct_workload};
use crate::jobframework::{
    Finished, GenericJob, JobFrameworkError, JobWithReclaimablePods, PodSetInfo, Step, plan_managed,
};

/// Kueue's annotation on a group's Workload.
pub const IS_GROUP_WORKLOAD: &str = "kueue.x-k8s.io/is-group-workload";
/// Kueue allows at most 8 roles in a group (a Workload's podset limit).
pub const MAX_ROLES: usize = 8;

/// One pod group as a job: its pods (in the order listed) and its declared size.
#[derive(Clone, Debug)]
pub struct PodGroup {
    meta: ObjectMeta,
    pub pods: Vec<Pod>,
    pub total: i32,
    /// The podsets of the group's Workload when the pods still match it by Kueue's group rule.
    matched: Option<Vec<PodSet>>,
    /// The Kueue gates that decide the group's readiness.
    readiness: ReadinessGates,
}

/// Kueue's `isPodRunnableOrSucceeded`: not Failed, and not a deleted pod that never got a node.
pub fn runnable_or_succeeded(pod: &Pod) -> bool {
    let unbound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_none_or(str::is_empty);
    !(pod.metadata.deletion_timestamp.is_some() && unbound) && p::phase(pod) != "Failed"
}

impl PodGroup {
    /// The group of `pods` (all with the group's label), checked as Kueue's `validatePodGroupMetadata`:
    /// the same queue and total count on every pod that has not failed.
    pub fn new(name: &str, pods: Vec<Pod>) -> Result<PodGroup, String> {
        let first = pods
            .iter()
            .find(|x| p::phase(x) != "Failed")
            .or(pods.first())
            .ok_or_else(|| format!("pod group {name} has no pods"))?;
        let total = p::group_total_count(&first.metadata)?;
        let queue = |x: &Pod| {
            x.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(label::QUEUE_NAME))
                .cloned()
        };
        for other in pods.iter().filter(|x| p::phase(x) != "Failed") {
            if queue(other) != queue(first) {
                return Err(format!(
                    "pods '{}' and '{}' has different queue names: {}!={}",
                    first.name_any(),
                    other.name_any(),
                    queue(first).unwrap_or_default(),
                    queue(other).unwrap_or_default()
                ));
            }
            if p::group_total_count(&other.metadata) != Ok(total) {
                return Err(format!(
                    "pods '{}' and '{}' has different '{}' values",
                    first.name_any(),
                    other.name_any(),
                    p::GROUP_TOTAL_COUNT_ANNOTATION
                ));
            }
        }
        let meta = ObjectMeta {
            name: Some(name.to_string()),
            namespace: first.metadata.namespace.clone(),
            uid: first.metadata.uid.clone(),
            labels: first.metadata.labels.clone(),
            ..Default::default()
        };
        Ok(PodGroup {
            meta,
            pods,
            total,
            matched: None,
            readiness: ReadinessGates::default(),
        })
    }

    /// The group with these readiness gates instead of Kueue v0.20's defaults.
    pub fn with_readiness(mut self, gates: ReadinessGates) -> Self {
        self.readiness = gates;
        self
    }

    pub fn name(&self) -> &str {
        self.meta.name.as_deref().unwrap_or_default()
    }

    /// The pods that count towards the group (Kueue's `runnableOrSucceededPods`), less those on their
    /// way out: Kueue counts a deleted pod bound to a node until the kubelet ends it, which would
    /// count a stopped pod beside its replacement.
    pub fn runnable(&self) -> impl Iterator<Item = &Pod> {
        self.pods.iter().filter(|x| active(x))
    }

    /// Kueue's fast admission, asked by the group's pods.
    pub fn fast_admission(&self) -> bool {
        self.pods
            .iter()
            .any(|x| p::annotation_true(&x.metadata, p::GROUP_FAST_ADMISSION_ANNOTATION))
    }

    /// A serving group (Kueue's `isServing`).
    pub fn serving(&self) -> bool {
        self.pods
            .iter()
            .any(|x| p::annotation_true(&x.metadata, p::GROUP_SERVING_ANNOTATION))
    }

    /// The pods still match the group's Workload (set by [`PodGroup::match_workload`]).
    pub fn matches_workload(&self) -> bool {
        self.matched.is_some()
    }

    /// Kueue creates no Workload before the group's total count of pods exists.
    /// With fast admission, one runnable pod is enough: the Workload counts the group's total.
    pub fn complete(&self) -> bool {
        if self.fast_admission() {
            return self.runnable().next().is_some();
        }
        self.runnable().count() >= self.total as usize
    }

    /// The group's roles and counts as its pods are now (Kueue's `constructGroupPodSets`).
    /// With fast admission (Kueue's `constructGroupPodSetsFast`): one podset, the first runnable
    /// pod's role, counted at the group's total.
    pub fn own_pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        if self.fast_admission() {
            let first = self.runnable().next().ok_or_else(|| {
                JobFrameworkError::PodSets("failed to find a runnable pod in the group".into())
            })?;
            return Ok(vec![pod_set(first, &p::role_hash(first), self.total)]);
        }
        let mut roles: BTreeMap<String, (Pod, i32)> = BTreeMap::new();
        for pod in self.runnable() {
            roles
                .entry(p::role_hash(pod))
                .or_insert_with(|| (pod.clone(), 0))
                .1 += 1;
        }
        if roles.len() > MAX_ROLES {
            return Err(JobFrameworkError::PodSets(
                "pod group can't include more than 8 roles".into(),
            ));
        }
        Ok(roles
            .iter()
            .map(|(role, (pod, n))| pod_set(pod, role, *n))
            .collect())
    }

    /// Kueue's `equivalentToWorkload` for groups: the Workload is the group's and has every role the
    /// pods have, each with at least as many pods (a group missing a failed pod's replacement still
    /// runs on its Workload). When it holds, the group's demand is the Workload's.
    pub fn match_workload(&mut self, wl: &Workload) -> Result<(), JobFrameworkError> {
        let own = self.own_pod_sets()?;
        let finished = wl.is_finished();
        let covered = wl.metadata.name.as_deref() == Some(self.name())
            && (finished || wl.spec.pod_sets.len() >= own.len())
            && own.iter().all(|o| {
                wl.spec
                    .pod_sets
                    .iter()
                    .any(|w| w.name() == o.name() && (finished || w.count() >= o.count()))
            });
        self.matched = covered.then(|| wl.spec.pod_sets.clone());
        Ok(())
    }

    /// The group's Workload with every pod of the group among its owners; `None` when it has them all.
    pub fn with_all_owners(&self, wl: &Workload) -> Option<Workload> {
        let mut owners = wl.metadata.owner_references.clone().unwrap_or_default();
        let before = owners.len();
        for x in self
            .pods
            .iter()
            .filter(|x| x.metadata.deletion_timestamp.is_none())
        {
            let uid = x.metadata.uid.clone().unwrap_or_default();
            if !owners.iter().any(|o| o.uid == uid) {
                owners.push(owner_of(x));
            }
        }
        (owners.len() > before).then(|| {
            let mut out = wl.clone();
            out.metadata.owner_references = Some(owners);
            out
        })
    }

    /// The Workload for the group: named after it, owned by every pod, marked a group workload.
    pub fn workload(
        &self,
        prio: crate::jobframework::priority::Priority,
    ) -> Result<Workload, JobFrameworkError> {
        let mut wl = construct_workload(self, self.pod_sets()?, prio, &WorkloadOptions::default())?;
        wl.metadata.name = Some(self.name().to_string());
        if let Some(labels) = wl.metadata.labels.as_mut() {
            labels.remove(label::JOB_UID);
        }
        wl.metadata.labels = wl.metadata.labels.take().filter(|l| !l.is_empty());
        wl.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(IS_GROUP_WORKLOAD.to_string(), "true".to_string());
        wl.metadata.owner_references = Some(self.pods.iter().map(owner_of).collect());
        Ok(wl)
    }

    /// The pods to ungate with their role's info (each gated pod, changed in memory).
    pub fn ungated(&self, infos: &[PodSetInfo]) -> Result<Vec<(Pod, Pod)>, JobFrameworkError> {
        let mut out = Vec::new();
        for pod in self
            .pods
            .iter()
            .filter(|x| p::is_gated(x) && x.metadata.deletion_timestamp.is_none())
        {
            let role = p::role_hash(pod);
            let info = infos
                .iter()
                .find(|i| i.name == role)
                .ok_or(JobFrameworkError::UnknownPodSet(role))?;
            let mut after = pod.clone();
            ungate(&mut after, info)?;
            out.push((pod.clone(), after));
        }
        Ok(out)
    }
}

/// A pod as an owner of its group's Workload (not its controller: the Workload has many owners).
fn owner_of(x: &Pod) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: x.name_any(),
        uid: x.metadata.uid.clone().unwrap_or_default(),
        ..Default::default()
    }
}

impl GenericJob for PodGroup {
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }

    fn gvk(&self) -> GroupVersionKind {
        gvk()
    }

    /// Kueue: a group is suspended while any of its pods is gated or ended.
    fn is_suspended(&self) -> bool {
        self.pods.iter().any(p::is_suspended)
    }

    fn suspend(&mut self) {}

    fn run_with_podsets_info(&mut self, infos: &[PodSetInfo]) -> Result<(), JobFrameworkError> {
        for (before, after) in self.ungated(infos)? {
            if let Some(slot) = self
                .pods
                .iter_mut()
                .find(|x| x.metadata.uid == before.metadata.uid)
            {
                *slot = after;
            }
        }
        Ok(())
    }

    fn restore_podsets_info(&mut self, _: &[PodSetInfo]) -> bool {
        false
    }

    /// Kueue: finished when as many pods succeeded as the group counts, or, for a group that is not
    /// retried (`retriable-in-group: "false"`), once none is left running.
    fn finished(&self) -> Option<Finished> {
        // A serving group runs until it is deleted.
        if self.serving() {
            return None;
        }
        let succeeded = self.pods.iter().filter(|x| p::phase(x) == "Succeeded").count();
        let active = self.pods.iter().any(|x| !p::is_terminated(x));
        let unretriable = self.pods.iter().any(|x| {
            x.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(p::RETRIABLE_IN_GROUP_ANNOTATION))
                .is_some_and(|v| v == "false")
        });
        (succeeded == self.total as usize || (!active && unretriable)).then(|| Finished {
            success: true,
            message: format!("Pods succeeded: {succeeded}/{}.", self.total),
        })
    }

    /// Kueue's `constructGroupPodSets` (one podset per role hash, named by it, counting the runnable
    /// pods of that role, sorted by name), or the Workload's when the pods match it.
    fn pod_sets(&self) -> Result<Vec<PodSet>, JobFrameworkError> {
        match &self.matched {
            Some(podsets) => Ok(podsets.clone()),
            None => self.own_pod_sets(),
        }
    }

    fn is_active(&self) -> bool {
        self.pods.iter().any(|x| p::phase(x) == "Running")
    }

    /// Kueue v0.20's group readiness ([`readiness::group_ready`]): the whole declared total there
    /// (#11654) and ready, a Succeeded pod counting as ready outside serving groups (#15734), less
    /// the `pod-group-max-not-ready-count` budget under its gate (#16059).
    fn pods_ready(&self) -> bool {
        readiness::group_ready(&self.pods, self.total, self.serving(), self.readiness)
    }

    fn pods_scheduling(&self) -> Option<crate::jobframework::PodsScheduling> {
        Some(crate::jobframework::count_pods_scheduling(
            self.pods.iter().map(|x| (x, p::role_hash(x))),
        ))
    }

    fn as_with_reclaimable_pods(&self) -> Option<&dyn JobWithReclaimablePods> {
        Some(self)
    }
}

/// Kueue's `ReclaimablePods` for a group: its Succeeded pods, per role, give their quota back; a
/// serving group (`kueue.x-k8s.io/pod-group-serving: "true"`) reports none.
impl JobWithReclaimablePods for PodGroup {
    fn reclaimable_pods(&self) -> Vec<ReclaimablePod> {
        if self.serving() {
            return Vec::new();
        }
        let mut out: Vec<ReclaimablePod> = Vec::new();
        for x in self.pods.iter().filter(|x| p::phase(x) == "Succeeded") {
            let role = p::role_hash(x);
            match out.iter_mut().find(|r| r.name == role) {
                Some(r) => r.count += 1,
                None => out.push(ReclaimablePod { name: role, count: 1 }),
            }
        }
        out
    }
}

/// What one pass does for a group.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The framework's step once the group is complete (before that, nothing but waiting).
    pub step: Step,
    /// The pods whose finalizer can go.
    pub finalize: Vec<String>,
    /// Kueue's excess pods, to delete: more than the group counts.
    pub excess: Vec<String>,
}

fn has_finalizer(x: &Pod) -> bool {
    x.metadata.finalizers.iter().flatten().any(|f| f == p::FINALIZER)
}

impl PodGroup {
    /// Kueue's excess pods: the runnable pods beyond the group's total count (before it has a
    /// Workload) or beyond each role's count in its Workload, the youngest first given up (Kueue's
    /// `sortActivePods` keeps pods with the finalizer, then ungated ones, then older ones). They leave
    /// the group and are returned for deletion; pods of a role the Workload does not have leave the
    /// group too, as Kueue keeps only the Workload's roles.
    pub fn trim(&mut self, wl: Option<&Workload>) -> Vec<Pod> {
        // A pod on its way out is no longer counted (it would push its replacement out as excess).
        let mut runnable: Vec<Pod> = self.pods.iter().filter(|x| active(x)).cloned().collect();
        runnable.sort_by_key(|x| {
            (
                !has_finalizer(x),
                p::is_gated(x),
                x.metadata.creation_timestamp.as_ref().map(|t| t.0),
                x.name_any(),
            )
        });
        let (kept, excess): (Vec<Pod>, Vec<Pod>) = match wl {
            None => {
                let total = self.total.max(0) as usize;
                let excess = runnable.split_off(total.min(runnable.len()));
                (runnable, excess)
            }
            Some(wl) => {
                let mut seen: BTreeMap<String, i32> = BTreeMap::new();
                let (mut kept, mut excess) = (Vec::new(), Vec::new());
                for x in runnable {
                    let role = p::role_hash(&x);
                    let Some(ps) = wl.spec.pod_sets.iter().find(|ps| ps.name() == role) else {
                        continue;
                    };
                    let n = seen.entry(role).or_default();
                    *n += 1;
                    if *n <= ps.count() {
                        kept.push(x)
                    } else {
                        excess.push(x)
                    }
                }
                (kept, excess)
            }
        };
        self.pods
            .retain(|x| !active(x) || kept.iter().any(|k| k.metadata.uid == x.metadata.uid));
        excess
    }
}

/// One pass for a group: its excess pods trimmed, then the framework's decision (before the group is
/// complete, nothing but waiting), and the pods whose finalizer can go.
pub fn decide(group: &mut PodGroup, workload: Option<&Workload>) -> Result<Decision, JobFrameworkError> {
    let live = workload.filter(|w| w.metadata.deletion_timestamp.is_none() && !w.is_finished());
    let excess = if live.is_some() || group.complete() {
        group.trim(live)
    } else {
        Vec::new()
    };
    if let Some(wl) = workload {
        group.match_workload(wl)?;
    }
    let group = &*group;
    let wls: Vec<&Workload> = workload.into_iter().collect();
    let step = if live.is_none() && !group.complete() && group.finished().is_none() {
        Step::Nothing
    } else {
        // The group's pods carry the managed label, which the webhook puts only on pods Kueue manages
        // (queue-labelled, or any in a selected namespace under manageJobsWithoutQueueName).
        plan_managed(group, &wls, true)?
    };
    let owned: Vec<Workload> = wls.iter().map(|w| (*w).clone()).collect();
    let finished_wl = wls.iter().any(|w| w.is_finished());
    let finalize = match live {
        // Kueue's `replacedInactivePods`: while the group runs on its Workload, a pod that ended or is
        // being deleted keeps its finalizer (so the Workload it owns stays) until its role has the
        // pods it counts without it.
        Some(wl) if !finished_wl => replaced_inactive(group, wl),
        _ => group
            .pods
            .iter()
            .filter(|x| has_finalizer(x))
            .filter(|x| finished_wl || finalizer_removable(x, &owned))
            .map(|x| x.name_any())
            .collect(),
    };
    Ok(Decision {
        step,
        finalize,
        excess: excess.iter().map(|x| x.name_any()).collect(),
    })
}

/// A pod that can still run or succeeded and is not on its way out.
fn active(x: &Pod) -> bool {
    runnable_or_succeeded(x) && (x.metadata.deletion_timestamp.is_none() || p::phase(x) == "Succeeded")
}

/// Per role of `wl`, the inactive pods (ended or being deleted) holding the finalizer beyond what the
/// role's active pods leave missing: `min(inactive, inactive + active - count)`, the earliest listed.
/// Pods of a role the Workload does not have lose it too.
fn replaced_inactive(group: &PodGroup, wl: &Workload) -> Vec<String> {
    let mut out = Vec::new();
    for x in group.pods.iter().filter(|x| has_finalizer(x) && !active(x)) {
        if !wl.spec.pod_sets.iter().any(|ps| ps.name() == p::role_hash(x)) {
            out.push(x.name_any());
        }
    }
    for ps in &wl.spec.pod_sets {
        let role = |x: &&Pod| p::role_hash(x) == ps.name();
        let active_n = group.pods.iter().filter(role).filter(|x| active(x)).count() as i32;
        let inactive: Vec<&Pod> = group
            .pods
            .iter()
            .filter(role)
            .filter(|x| has_finalizer(x) && !active(x))
            .collect();
        let n = (inactive.len() as i32)
            .min(inactive.len() as i32 + active_n - ps.count())
            .max(0) as usize;
        out.extend(inactive.iter().take(n).map(|x| x.name_any()));
    }
    out
}
