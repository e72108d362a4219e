//! Kueue's reconciler step 4 (`pkg/controller/jobframework/reconciler.go`): a job that reports
//! reclaimable pods has them written into its Workload's `status.reclaimablePods`, each count capped
//! at its podset's size (`LimitReclaimablePodsToPodSetSizes`), and written only when they differ as
//! sets (`ReclaimablePodsAreEqual`). The quota accounting (`admission::sync`) then leaves them out.

use std::collections::BTreeMap;

use super::GenericJob;
use crate::api::kueue::{ReclaimablePod, Workload};

/// The job's reclaimable pods capped at the Workload's podset sizes.
pub fn limited(wl: &Workload, pods: Vec<ReclaimablePod>) -> Vec<ReclaimablePod> {
    pods.into_iter()
        .map(|mut r| {
            if let Some(ps) = wl.spec.pod_sets.iter().find(|ps| ps.name() == r.name) {
                r.count = r.count.min(ps.count());
            }
            r
        })
        .collect()
}

/// Same length and the same count per name.
pub fn equal(a: &[ReclaimablePod], b: &[ReclaimablePod]) -> bool {
    let by_name = |x: &[ReclaimablePod]| {
        x.iter()
            .map(|r| (r.name.clone(), r.count))
            .collect::<BTreeMap<_, _>>()
    };
    a.len() == b.len() && by_name(a) == by_name(b)
}

/// The reclaimable pods to write on `wl`, or `None` when the job reports none or they are written.
pub fn update(job: &dyn GenericJob, wl: &Workload) -> Option<Vec<ReclaimablePod>> {
    let want = limited(wl, job.as_with_reclaimable_pods()?.reclaimable_pods());
    let have = wl
        .status
        .as_ref()
        .map(|s| s.reclaimable_pods.as_slice())
        .unwrap_or_default();
    (!equal(&want, have)).then_some(want)
}
