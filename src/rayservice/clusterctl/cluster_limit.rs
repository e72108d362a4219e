//! A worker count no Kubernetes cluster can run (issue 41): past Kubernetes' documented scalability
//! limit of 150,000 pods in a cluster ("Considerations for large clusters"), the RayCluster's
//! `status.reason` says so from its first status write, with a Warning event, before the API server
//! (its storage quota, a ResourceQuota) or the scheduler refuses the pods one by one. KubeRay says
//! nothing and creates pods until something refuses them; pods are still created here, in bounded
//! batches, so a cluster that merely grows large behaves as in KubeRay.

use crate::api::ray::RayClusterStatus;

/// Kubernetes' supported maximum of pods in one cluster.
pub const MAX_CLUSTER_PODS: i64 = 150_000;

pub const REASON_PREFIX: &str = "ReplicasBeyondClusterLimit:";

/// The `status.reason` for `desired_workers` worker pods, if they are past the limit.
pub fn reason(desired_workers: i64) -> Option<String> {
    (desired_workers > MAX_CLUSTER_PODS).then(|| {
        format!(
            "{REASON_PREFIX} the worker groups ask for {desired_workers} pods; no Kubernetes cluster runs more than {MAX_CLUSTER_PODS}, so pods will stop being created when the API server or the scheduler refuses them"
        )
    })
}

/// Sets or clears this module's `status.reason`; a reason of another kind (the head's back-off) is
/// left as it is. Returns the reason when it is new (for a Warning event).
pub fn apply(status: &mut RayClusterStatus, desired_workers: i64) -> Option<String> {
    let ours = |r: &Option<String>| r.as_deref().is_some_and(|r| r.starts_with(REASON_PREFIX));
    let other = status.reason.is_some() && !ours(&status.reason);
    match reason(desired_workers) {
        Some(_) if other => None,
        Some(r) => {
            let new = status.reason.as_deref() != Some(r.as_str());
            status.reason = Some(r.clone());
            new.then_some(r)
        }
        None => {
            if ours(&status.reason) {
                status.reason = None;
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_past_the_limit_is_said_once_and_cleared_when_it_drops() {
        let mut s = RayClusterStatus::default();
        assert_eq!(apply(&mut s, MAX_CLUSTER_PODS), None, "at the limit: nothing");
        assert!(s.reason.is_none());
        let said = apply(&mut s, i64::from(i32::MAX)).expect("said when new");
        assert!(
            said.contains("2147483647 pods") && said.contains("150000"),
            "{said}"
        );
        assert_eq!(apply(&mut s, i64::from(i32::MAX)), None, "not said twice");
        assert!(s.reason.as_deref().is_some_and(|r| r.starts_with(REASON_PREFIX)));
        assert_eq!(apply(&mut s, 4), None);
        assert!(
            s.reason.is_none(),
            "cleared once the count is back within the limit"
        );
        s.reason = Some("CrashLoopBackOff: head pod h failed".into());
        assert_eq!(apply(&mut s, i64::from(i32::MAX)), None);
        assert!(
            s.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("CrashLoopBackOff")),
            "the head's back-off is kept"
        );
    }
}
