//! Deletion deadlines of dangling clusters (no longer active or pending). KubeRay keeps them in operator
//! memory, so a restart silently restarts the delay; we persist them in the RayService annotation
//! [`ANNOTATION`] as a JSON object `{"<cluster>": "<RFC 3339 deadline>"}`.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::plan::{Action, EventType, Plan};
use super::snapshot::Snapshot;

pub const ANNOTATION: &str = crate::api::ray::constants::ANNOTATION_CLUSTER_DELETION_DEADLINES;

/// Reads the annotation. A value we cannot read is treated as empty: the only effect is that deadlines
/// are re-recorded from now, which delays a deletion but never hastens one.
pub fn decode(value: Option<&str>) -> BTreeMap<String, Timestamp> {
    let Some(v) = value else {
        return BTreeMap::new();
    };
    let raw: BTreeMap<String, String> = serde_json::from_str(v).unwrap_or_default();
    raw.into_iter()
        .filter_map(|(name, at)| at.parse::<Timestamp>().ok().map(|t| (name, t)))
        .collect()
}

pub fn encode(schedule: &BTreeMap<String, Timestamp>) -> String {
    let raw: BTreeMap<&str, String> = schedule
        .iter()
        .map(|(k, v)| (k.as_str(), v.to_string()))
        .collect();
    serde_json::to_string(&raw).unwrap_or_else(|_| "{}".to_string())
}

/// [`reap_dangling`] for a pass that ends with `active` and `pending` named: every other cluster is
/// dangling, and the stored status says which were named before.
pub(crate) fn reap_unnamed(s: &Snapshot, active: &Option<String>, pending: &Option<String>, plan: &mut Plan) {
    let kept: Vec<&str> = [active, pending]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let was_named: Vec<&str> = [&s.status.active, &s.status.pending]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    reap_dangling(s, &kept, &was_named, plan);
}

/// Schedules and deletes dangling clusters. `kept` = the clusters named active/pending after this pass;
/// `was_named` = those named in the stored status. A cluster that stops being named in this very pass only
/// gets its deadline recorded: it is deleted on a later pass, after the new names are durable, so a lost
/// status write can never leave the status naming a deleted cluster.
pub(crate) fn reap_dangling(s: &Snapshot, kept: &[&str], was_named: &[&str], plan: &mut Plan) {
    let mut next = BTreeMap::new();
    for c in &s.clusters {
        if kept.contains(&c.name.as_str()) || c.deleting {
            continue;
        }
        // A cluster of an upgrade dropped at its deadline never served: nothing to drain, and its
        // quota is wanted back, so it goes as soon as it is unnamed durably.
        let failed = s.failed_upgrade.is_some() && c.hash == s.failed_upgrade;
        let deadline = if failed {
            s.now
        } else {
            s.deletion_schedule
                .get(&c.name)
                .copied()
                .unwrap_or_else(|| s.now.checked_add(s.deletion_delay).unwrap_or(s.now))
        };
        if !was_named.contains(&c.name.as_str()) && s.now >= deadline {
            plan.actions.push(Action::DeleteCluster { name: c.name.clone() });
            plan.event(
                EventType::Normal,
                "DeletedRayCluster",
                format!(
                    "deleting RayCluster {} ({}s after it stopped being active or pending)",
                    c.name,
                    s.deletion_delay.as_secs()
                ),
            );
        } else {
            next.insert(c.name.clone(), deadline);
        }
    }
    if next != s.deletion_schedule {
        plan.schedule = Some(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let mut s = BTreeMap::new();
        s.insert(
            "rs-abcde".to_string(),
            "2026-11-22T05:00:00Z".parse::<Timestamp>().unwrap(),
        );
        assert_eq!(decode(Some(&encode(&s))), s);
        assert!(decode(Some("not json")).is_empty());
        assert!(decode(None).is_empty());
        let partly = decode(Some(r#"{"a":"2026-11-22T05:00:00Z","b":"yesterday"}"#));
        assert_eq!(partly.keys().collect::<Vec<_>>(), ["a"]);
    }
}
