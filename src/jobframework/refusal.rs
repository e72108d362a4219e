//! Why a queue-managed job has no Workload, said on the job itself: a `QuotaGated` condition (True,
//! reason `InvalidPodSets` or `WorkloadRefused`) beside the Warning event, so `kubectl get -o yaml`
//! and `kubectl wait` see it, not only an event that ages out. Cleared once the job has a Workload.
//! The Ray controllers keep condition types they do not own, so the condition stays until cleared.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The condition type, as the RayCluster controller uses it for a gated cluster.
pub const QUOTA_GATED: &str = "QuotaGated";
/// The job's demand cannot be expressed as a Workload (e.g. too many podsets).
pub const REASON_INVALID_PODSETS: &str = "InvalidPodSets";
/// The API server refused the Workload built for the job.
pub const REASON_WORKLOAD_REFUSED: &str = "WorkloadRefused";

fn conditions_of<K: Serialize>(obj: &K) -> Vec<Condition> {
    let v = serde_json::to_value(obj).unwrap_or(Value::Null);
    v.pointer("/status/conditions")
        .cloned()
        .and_then(|c| serde_json::from_value(c).ok())
        .unwrap_or_default()
}

fn refused(c: &Condition) -> bool {
    c.type_ == QUOTA_GATED && (c.reason == REASON_INVALID_PODSETS || c.reason == REASON_WORKLOAD_REFUSED)
}

/// The conditions to write, or `None` when the job already says exactly this. `why`: the reason
/// and message to set; `None` clears a refusal this module set.
pub fn next_conditions<K: Serialize>(
    obj: &K,
    generation: Option<i64>,
    why: Option<(&str, &str)>,
    now: jiff::Timestamp,
) -> Option<Vec<Condition>> {
    let mut conds = conditions_of(obj);
    match why {
        Some((reason, message)) => {
            let c = crate::api::conditions::new(QUOTA_GATED, true, reason, message, generation, now);
            crate::api::conditions::set(&mut conds, c).then_some(conds)
        }
        None => {
            let before = conds.len();
            conds.retain(|c| !refused(c));
            (conds.len() != before).then_some(conds)
        }
    }
}

/// Writes the refusal (or clears it) on the job's status, on the resourceVersion it was read at: a
/// conflict means another writer moved first, and the next reconcile decides again.
pub async fn record<K>(api: &Api<K>, obj: &K, why: Option<(&str, &str)>) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let Some(conds) = next_conditions(obj, obj.meta().generation, why, jiff::Timestamp::now()) else {
        return Ok(());
    };
    let patch = json!({
        "metadata": {"resourceVersion": obj.resource_version()},
        "status": {"conditions": conds},
    });
    api.patch_status(&obj.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn a_refusal_is_set_once_kept_beside_others_and_cleared() {
        let ready = json!({"type": "Ready", "status": "True", "reason": "R", "message": "",
            "lastTransitionTime": "2027-01-15T08:00:00Z"});
        let obj = json!({"status": {"conditions": [ready]}});
        let set = next_conditions(&obj, Some(1), Some((REASON_WORKLOAD_REFUSED, "no")), t(0)).expect("set");
        assert_eq!(set.len(), 2);
        let with = json!({"status": {"conditions": set}});
        assert!(
            next_conditions(&with, Some(1), Some((REASON_WORKLOAD_REFUSED, "no")), t(5)).is_none(),
            "the same refusal is not rewritten"
        );
        let cleared = next_conditions(&with, Some(1), None, t(9)).expect("cleared");
        assert_eq!(cleared.len(), 1);
        assert_eq!(cleared[0].type_, "Ready");
        assert!(
            next_conditions(&obj, Some(1), None, t(9)).is_none(),
            "nothing to clear"
        );
        // A QuotaGated the gate set (another reason) is not this module's to clear.
        let gate = json!({"status": {"conditions": [{"type": QUOTA_GATED, "status": "True",
            "reason": "WaitingForWorkloadSlice", "message": "", "lastTransitionTime": "2027-01-15T08:00:00Z"}]}});
        assert!(next_conditions(&gate, Some(1), None, t(9)).is_none());
    }
}
