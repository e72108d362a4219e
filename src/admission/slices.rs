//! The slice-chain queries a kind needs (Kueue's workload slices, `kueue.x-k8s.io/workload-slice-replacement-for`):
//! which workload a scale-up slice replaces, and whether a workload is being evicted. Pure reads of the
//! Workload object; the admission loop answers the same questions with these functions, and counts an
//! elastic slice scaled down in place (or with reclaimable pods) at what it still holds.

use crate::api::kueue::Workload;
use crate::api::kueue::constants::{condition, label};
use crate::queue::WorkloadKey;

/// `kueue.x-k8s.io/workload-slice-replacement-for: <ns>/<name>` of a scale-up slice: the slice it replaces.
pub fn replacement_for(wl: &Workload) -> Option<WorkloadKey> {
    let v = wl
        .metadata
        .annotations
        .as_ref()?
        .get(label::WORKLOAD_SLICE_REPLACEMENT_FOR)?;
    Some(match v.split_once('/') {
        Some((ns, n)) => WorkloadKey::new(ns, n),
        None => WorkloadKey::new(wl.metadata.namespace.clone().unwrap_or_default(), v.clone()),
    })
}

/// The UID of `wl`'s controller owner, its job. (`conditions::controller_owner` reads the same,
/// but that module imports this one.)
fn job_of(wl: &Workload) -> Option<&str> {
    wl.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// Whether `replaced` is the slice `wl` says it replaces, and a slice of the same job: named by the
/// annotation, in `wl`'s namespace, with the same controller owner (or neither has one). Anyone who
/// may create a Workload may write the annotation; a replacement takes over the quota of the slice
/// it replaces and finishes it once admitted, so one that names another job's Workload (or one in
/// another namespace) is taken as a workload of its own, at its full size, and the named one is left
/// alone. (Kueue takes the annotation as written; its job controllers are the only writers it
/// expects.)
pub fn genuine_replacement(wl: &Workload, replaced: &Workload) -> bool {
    let Some(key) = replacement_for(wl) else {
        return false;
    };
    let named = replaced.metadata.namespace.as_deref() == Some(key.namespace.as_str())
        && replaced.metadata.name.as_deref() == Some(key.name.as_str());
    let same_namespace = wl.metadata.namespace == replaced.metadata.namespace;
    named && same_namespace && job_of(wl) == job_of(replaced)
}

/// Whether `wl`'s podsets may name pods already running (`quotagate.io/topology-running`), which
/// placement counts where they are without looking for room: only a genuine replacement
/// (`genuine_replacement`) of a job's slice, `replaced`, while that one holds quota, is not being
/// evicted, and was placed in a TAS flavor. Anything else may carry the annotation (anyone may
/// write it) but claims no room with it.
pub fn may_name_running(wl: &Workload, replaced: Option<&Workload>) -> bool {
    let Some(r) = replaced else {
        return false;
    };
    let of_a_job = job_of(r).is_some_and(|uid| !uid.is_empty());
    let placed = r.has_quota_reservation()
        && !r.is_finished()
        && !is_evicted(r)
        && r.admission().is_some_and(|a| {
            a.pod_set_assignments
                .iter()
                .any(|p| p.topology_assignment.is_some())
        });
    genuine_replacement(wl, r) && of_a_job && placed
}

/// An eviction is in progress: Evicted=True while quota is still reserved.
pub fn is_evicted(wl: &Workload) -> bool {
    wl.status
        .as_ref()
        .is_some_and(|s| s.condition_true(condition::EVICTED))
}

/// Workload condition (beyond Kueue): preemption took the growth of this admitted slice (a service's
/// upgrade) instead of evicting it; True with Kueue's preemption reason until a new slice replaces it.
/// The slice then covers only its job's floor (`GROWTH_FLOOR_ANNOTATION`): the job shrinks it back.
pub const GROWTH_PREEMPTED: &str = "GrowthPreempted";

/// Annotation a job's controller writes on its slice: pods per podset that the job keeps running when
/// preemption takes its growth (a RayService: what its serving cluster holds), as `name=count,...`.
/// Derived from the live children on every reconcile, so an edit is written over.
pub const GROWTH_FLOOR_ANNOTATION: &str = "quotagate.io/growth-floor";

/// Annotation a job's controller writes on its slice beside the floor: the parts of the job the floor
/// stands for (a RayService: the child clusters it keeps running when its growth is taken), as
/// `name,name`. The job's controller freezes it once the growth is taken, so what stays is what the
/// preemption was decided on; and a part not named here may lose its pods to preemption at any time, so
/// the job moves nothing it cannot lose (a RayService's traffic) onto it.
pub const GROWTH_KEEPS_ANNOTATION: &str = "quotagate.io/growth-keeps";

/// GrowthPreempted=True on the workload.
pub fn growth_preempted(wl: &Workload) -> bool {
    wl.status
        .as_ref()
        .is_some_and(|s| s.condition_true(GROWTH_PREEMPTED))
}

/// The floor annotation's pod counts; `None` when absent or malformed (a malformed floor is no floor:
/// the workload is then preempted whole, as Kueue does).
pub fn growth_floor(wl: &Workload) -> Option<std::collections::BTreeMap<String, i64>> {
    parse_floor(wl.metadata.annotations.as_ref()?.get(GROWTH_FLOOR_ANNOTATION)?)
}

/// `name=count,...` as written by [`format_floor`].
pub fn parse_floor(v: &str) -> Option<std::collections::BTreeMap<String, i64>> {
    v.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (n, c) = p.split_once('=')?;
            let c: i64 = c.trim().parse().ok().filter(|c| *c >= 0)?;
            Some((n.trim().to_string(), c))
        })
        .collect()
}

pub fn format_floor(counts: &std::collections::BTreeMap<String, i64>) -> String {
    counts
        .iter()
        .map(|(n, c)| format!("{n}={c}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The parts of the job named by the slice's keeps annotation; `None` when absent.
pub fn growth_keeps(wl: &Workload) -> Option<Vec<String>> {
    let v = wl.metadata.annotations.as_ref()?.get(GROWTH_KEEPS_ANNOTATION)?;
    Some(
        v.split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect(),
    )
}

/// Whether preemption may still take `part` of the job as growth from this admitted slice: it has a
/// floor (so it has growth to give) that does not stand for `part`, or its growth was taken and `part`
/// is not what it keeps. A slice without a floor is preempted whole or not at all.
pub fn may_lose_part(wl: &Workload, part: &str) -> bool {
    let keeps = growth_keeps(wl).unwrap_or_default();
    let kept = keeps.iter().any(|k| k == part);
    (growth_preempted(wl) || growth_floor(wl).is_some()) && !kept
}

/// The workload as its quota is to be counted, when that is less than `status.admission` holds:
/// an elastic slice scaled down in place counts its spec's pods, and (Kueue's ReclaimablePods,
/// `clusterqueue_controller_test.go` "Should update status when workloads have reclaimable pods")
/// a podset's `status.reclaimablePods` are not counted.
pub(crate) fn counted_pods(wl: &Workload) -> Option<Workload> {
    let reclaimable = &wl.status.as_ref()?.reclaimable_pods;
    if reclaimable.is_empty() {
        return scaled_down(wl).then(|| wl.clone());
    }
    let a = wl.admission()?;
    let mut counted = wl.clone();
    for ps in &mut counted.spec.pod_sets {
        let name = ps
            .name
            .as_deref()
            .unwrap_or(crate::api::kueue::constants::DEFAULT_PODSET_NAME);
        let spec = ps.count.unwrap_or(1);
        let admitted = a
            .pod_set_assignments
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.count)
            .unwrap_or(spec);
        let gone = reclaimable.iter().find(|r| r.name == name).map_or(0, |r| r.count);
        ps.count = Some((spec.min(admitted) - gone).max(0));
    }
    Some(counted)
}

/// An elastic workload whose spec asks for fewer pods than `status.admission` holds (and for no
/// more anywhere): Kueue shrinks such a slice in place instead of creating a new one, and counts
/// only the spec's pods against the quota.
pub(crate) fn scaled_down(wl: &Workload) -> bool {
    if !crate::api::kueue::is_elastic_job(&wl.metadata) {
        return false;
    }
    let Some(a) = wl.admission() else {
        return false;
    };
    let mut smaller = false;
    for ps in &wl.spec.pod_sets {
        let name = ps
            .name
            .as_deref()
            .unwrap_or(crate::api::kueue::constants::DEFAULT_PODSET_NAME);
        let Some(admitted) = a
            .pod_set_assignments
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.count)
        else {
            return false;
        };
        let want = ps.count.unwrap_or(1);
        if want > admitted {
            return false;
        }
        smaller |= want < admitted;
    }
    smaller
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::kueue::tas::{DomainAssignment, encode_assignment};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn owned_by(mut w: Workload, uid: &str) -> Workload {
        w.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "ray.io/v1".into(),
            kind: "RayCluster".into(),
            name: "rc".into(),
            uid: uid.into(),
            controller: Some(true),
            ..Default::default()
        }]);
        w
    }

    /// The admitted slice `old`, its podset placed in a TAS flavor when `tas`.
    fn serving(tas: bool) -> Workload {
        let mut w = Workload::build("old", "ns")
            .podset("workers", 2, [("cpu", "1")])
            .reserve_quota("cq", "tas")
            .admitted()
            .build();
        if tas && let Some(a) = w.status.as_mut().and_then(|s| s.admission.as_mut()) {
            let levels = vec!["cloud.com/topology-rack".to_string()];
            let domains = [DomainAssignment {
                values: vec!["r1".into()],
                count: 2,
            }];
            a.pod_set_assignments[0].topology_assignment = Some(encode_assignment(&levels, &domains));
        }
        owned_by(w, "job-1")
    }

    fn replacement(names: &str, uid: &str) -> Workload {
        let w = Workload::build("new", "ns")
            .annotation(label::WORKLOAD_SLICE_REPLACEMENT_FOR, names)
            .podset("workers", 3, [("cpu", "1")])
            .build();
        owned_by(w, uid)
    }

    // Ours (Kueue takes a replacement's previous assignment from the slice it replaces, never from
    // an annotation: `tas_flavorassigner.go` `getPreviousTopologyAssignment`): running pods are
    // trusted only on a slice of the same job replacing an admitted slice placed by TAS.
    #[test]
    fn only_a_real_replacement_may_name_running_pods() {
        let old = serving(true);
        assert!(may_name_running(&replacement("ns/old", "job-1"), Some(&old)));
        let cases = [
            ("no replaced slice found", replacement("ns/old", "job-1"), None),
            (
                "another job's slice",
                replacement("ns/old", "job-2"),
                Some(old.clone()),
            ),
            (
                "names another slice",
                replacement("ns/other", "job-1"),
                Some(old.clone()),
            ),
            (
                "not placed by TAS",
                replacement("ns/old", "job-1"),
                Some(serving(false)),
            ),
            (
                "no owner",
                Workload::build("new", "ns")
                    .annotation(label::WORKLOAD_SLICE_REPLACEMENT_FOR, "ns/old")
                    .build(),
                Some(old.clone()),
            ),
            (
                "not a replacement",
                owned_by(Workload::build("new", "ns").build(), "job-1"),
                Some(old.clone()),
            ),
        ];
        for (name, wl, replaced) in cases {
            assert!(!may_name_running(&wl, replaced.as_ref()), "{name}");
        }
        let mut pending = old.clone();
        pending.status = None;
        assert!(
            !may_name_running(&replacement("ns/old", "job-1"), Some(&pending)),
            "replaced slice holds no quota"
        );
    }

    // Ours (hostile edits): a replacement takes over the quota of the slice it names only when that
    // one is a slice of the same job, in its namespace.
    #[test]
    fn only_a_slice_of_the_same_job_in_its_namespace_is_replaced() {
        let old = serving(false);
        assert!(genuine_replacement(&replacement("ns/old", "job-1"), &old));
        let mut elsewhere = old.clone();
        elsewhere.metadata.namespace = Some("other".into());
        let bare = |w: &Workload| {
            let mut w = w.clone();
            w.metadata.owner_references = None;
            w
        };
        let cases = [
            ("another job's slice", replacement("ns/old", "job-2"), old.clone()),
            (
                "names another slice",
                replacement("ns/other", "job-1"),
                old.clone(),
            ),
            (
                "in another namespace",
                replacement("other/old", "job-1"),
                elsewhere,
            ),
            (
                "no owner, the named one owned",
                bare(&replacement("ns/old", "job-1")),
                old.clone(),
            ),
            (
                "not a replacement",
                owned_by(Workload::build("new", "ns").build(), "job-1"),
                old.clone(),
            ),
        ];
        for (name, wl, replaced) in cases {
            assert!(!genuine_replacement(&wl, &replaced), "{name}");
        }
        // Two Workloads created by hand, neither owned: the user's own chain.
        assert!(genuine_replacement(
            &bare(&replacement("ns/old", "job-1")),
            &bare(&old)
        ));
    }
}
