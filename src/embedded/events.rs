//! Events, as the real API server keeps them: one store served as core `v1` `events` and as
//! `events.k8s.io/v1` `events`. Objects are stored with the core v1 field names (what kube-apiserver
//! writes to etcd) and converted at the edges, field by field as Kubernetes' own conversion does
//! (`pkg/apis/events/v1/conversion.go`): `involvedObject`/`regarding`, `message`/`note`,
//! `source`/`deprecatedSource`, `firstTimestamp`/`deprecatedFirstTimestamp`,
//! `lastTimestamp`/`deprecatedLastTimestamp`, `count`/`deprecatedCount`,
//! `reportingComponent`/`reportingController`; `reason`, `type`, `action`, `related`, `eventTime`,
//! `series` and `reportingInstance` carry the same names in both. The renames are all top-level, so
//! a request body, a merge or apply patch and a JSON patch's paths convert by their first key alone.
//!
//! Field selectors are each version's (`involvedObject.*` or `regarding.*`, `reason`, `type`,
//! `source`, `reportingComponent` or `reportingController`), and an event lives `event_ttl` after its
//! last write (kube-apiserver's `--event-ttl`, 1 h): [`spawn_ttl`] deletes it then, with a DELETED
//! watch event, as the etcd lease's expiry does. The store never merges events: two events are two
//! objects whatever they share (the correlator that makes series lives in the clients).

use super::event_fields::{Version, rename_key, renamed, strip_foreign, text, version_of};
use super::patch::PatchKind;
use super::registry::{Registry, ResourceInfo};
use super::selector::FieldSelector;
use super::store::{DeleteOptions, ListOptions, Store};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

pub use super::event_fields::{EVENTS_GROUP, source_field};

fn version(info: &ResourceInfo) -> Option<Version> {
    version_of(&info.group, &info.plural)
}

/// A stored Event (core names) as `info`'s version serves it; `None` when `info` is not an Event.
pub fn to_version(info: &ResourceInfo, stored: &Value) -> Option<Value> {
    super::event_fields::to_version(&info.group, &info.plural, stored)
}

/// The Table of Events (`table::events_table`); `None` for other kinds.
pub fn table(info: &ResourceInfo, objects: &[&Value], rv: &str, cont: Option<&str>) -> Option<Value> {
    super::table::events_table(info, objects, rv, cont)
}

/// kube-apiserver's `--event-ttl` default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(3600);

/// A request body in `info`'s version as the store keeps it (core names); other kinds unchanged.
pub fn to_storage(info: &ResourceInfo, body: Value) -> Value {
    let Some(v) = version(info) else { return body };
    let Value::Object(m) = body else { return body };
    let out = match v {
        Version::Core => strip_foreign(m, Version::Core),
        Version::EventsV1 => renamed(m, Version::Core),
    };
    Value::Object(out)
}

/// A patch written against `info`'s version, as a patch of the stored (core) object.
pub fn patch_to_storage(info: &ResourceInfo, kind: PatchKind, body: Value) -> Value {
    if version(info) != Some(Version::EventsV1) {
        return body;
    }
    match (kind, body) {
        (PatchKind::Json, Value::Array(ops)) => Value::Array(
            ops.into_iter()
                .filter_map(|op| json_op_to_storage(info, op))
                .collect(),
        ),
        (_, body) => {
            // A merge patch's `apiVersion` is not rewritten: the served version is set on the way out.
            let mut out = to_storage(info, body);
            if let Some(m) = out.as_object_mut() {
                m.remove("apiVersion");
            }
            out
        }
    }
}

/// One JSON-patch operation with its paths in core names; `None` for an operation on a field the
/// version does not have (dropped, as such a field would be).
fn json_op_to_storage(info: &ResourceInfo, mut op: Value) -> Option<Value> {
    for key in ["path", "from"] {
        let Some(path) = op.get(key).and_then(Value::as_str) else {
            continue;
        };
        let converted = json_path_to_storage(path)?;
        op[key] = json!(converted);
    }
    // A whole-document value (`path: ""`) is an object in the served version's names.
    if op.get("path").and_then(Value::as_str) == Some("")
        && let Some(value) = op.get_mut("value")
    {
        *value = to_storage(info, value.take());
    }
    Some(op)
}

fn json_path_to_storage(path: &str) -> Option<String> {
    let Some(rest) = path.strip_prefix('/') else {
        return Some(path.to_string());
    };
    let (first, tail) = rest.split_once('/').map_or((rest, None), |(f, t)| (f, Some(t)));
    // JSON pointer escapes (`~0`, `~1`) cannot occur in these names, so the segment compares as is.
    let key = rename_key(first, Version::Core)?;
    Some(match tail {
        Some(t) => format!("/{key}/{t}"),
        None => format!("/{key}"),
    })
}

/// A field selector written for `info`'s version (already checked against its labels), in the
/// stored object's paths; other kinds unchanged.
pub fn field_selector_to_storage(info: &ResourceInfo, fs: FieldSelector) -> FieldSelector {
    if version(info) != Some(Version::EventsV1) {
        return fs;
    }
    let terms =
        fs.0.into_iter()
            .map(|(path, eq, value)| {
                let path = match path.split_once('.') {
                    Some(("regarding", rest)) => format!("involvedObject.{rest}"),
                    None if path == "reportingController" => "reportingComponent".to_string(),
                    _ => path,
                };
                (path, eq, value)
            })
            .collect();
    FieldSelector(terms)
}

/// When each resourceVersion was current: samples (instant, store RV). An object whose RV is at or
/// below a sample's was last written at or before that sample's instant, so an event older than
/// the TTL by the samples is older than the TTL in fact (it expires at most one sample late, never early).
#[derive(Debug, Default)]
pub struct RvClock {
    samples: VecDeque<(tokio::time::Instant, u64)>,
}

impl RvClock {
    pub fn observe(&mut self, at: tokio::time::Instant, rv: u64) {
        self.samples.push_back((at, rv));
    }

    /// The highest RV written no later than `cutoff`, if any sample is that old; older samples are
    /// forgotten (the one returned is kept, later cutoffs only move forward).
    pub fn written_by(&mut self, cutoff: tokio::time::Instant) -> Option<u64> {
        while self.samples.get(1).is_some_and(|(at, _)| *at <= cutoff) {
            self.samples.pop_front();
        }
        self.samples
            .front()
            .filter(|(at, _)| *at <= cutoff)
            .map(|(_, rv)| *rv)
    }
}

/// Deletes the Events last written at or before `horizon` (their RV), each only if it is still at the
/// RV seen, so an event written again meanwhile lives on. Returns how many went.
pub fn expire(store: &Store, info: &ResourceInfo, horizon: u64) -> usize {
    let Ok(all) = store.list(info, None, &ListOptions::default()) else {
        return 0;
    };
    let mut gone = 0;
    for obj in all.items {
        let rv = text(&obj, "/metadata/resourceVersion");
        if rv.parse::<u64>().map_or(true, |rv| rv > horizon) {
            continue;
        }
        let opts = DeleteOptions {
            resource_version: Some(rv.to_string()),
            ..Default::default()
        };
        let ns = text(&obj, "/metadata/namespace");
        if store
            .delete(info, Some(ns), text(&obj, "/metadata/name"), &opts)
            .is_ok()
        {
            gone += 1;
        }
    }
    gone
}

/// Starts the TTL sweeper when called inside a Tokio runtime (a server made outside one keeps its
/// events): every `ttl / 20` (at least 50 ms, at most a minute) it deletes the events not written for
/// `ttl`. It ends when the store is dropped.
pub fn spawn_ttl(store: &Arc<Store>, registry: &Registry, ttl: Duration) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let Some(info) = registry.find("", "v1", "events") else {
        return;
    };
    let weak = Arc::downgrade(store);
    let tick = (ttl / 20).clamp(Duration::from_millis(50), Duration::from_secs(60));
    rt.spawn(async move {
        let mut clock = RvClock::default();
        loop {
            let Some(store) = weak.upgrade() else { return };
            let now = tokio::time::Instant::now();
            clock.observe(now, store.resource_version());
            if let Some(horizon) = now.checked_sub(ttl).and_then(|cutoff| clock.written_by(cutoff)) {
                let n = expire(&store, &info, horizon);
                if n > 0 {
                    tracing::debug!(expired = n, "events past the event TTL deleted");
                }
            }
            drop(store);
            tokio::time::sleep(tick).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::registry::builtins;

    fn info(group: &str) -> ResourceInfo {
        builtins()
            .into_iter()
            .find(|b| b.plural == "events" && b.group == group)
            .expect("served")
    }

    fn core_event() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e1", "namespace": "default"},
            "involvedObject": {"kind": "RayCluster", "name": "rc", "namespace": "default", "uid": "u1", "apiVersion": "ray.io/v1"},
            "reason": "Created", "message": "made it", "type": "Normal",
            "source": {"component": "c", "host": "h"},
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z", "count": 2,
            "reportingComponent": "rc-ctrl", "reportingInstance": "i-1",
            "action": "Create", "eventTime": null, "series": {"count": 3, "lastObservedTime": "2026-01-01T00:02:00.000000Z"},
            "related": {"kind": "Pod", "name": "p"}
        })
    }

    /// Kubernetes' `Convert_core_Event_To_v1_Event` and back: every field keeps its value.
    #[test]
    fn the_two_versions_convert_both_ways_without_loss() {
        let (core, ev) = (info(""), info(EVENTS_GROUP));
        let stored = core_event();
        let v1 = to_version(&ev, &stored).expect("an event");
        assert_eq!(v1["apiVersion"], "events.k8s.io/v1");
        assert_eq!(v1["regarding"]["name"], "rc");
        assert_eq!(v1["note"], "made it");
        assert_eq!(v1["deprecatedSource"]["component"], "c");
        assert_eq!(v1["deprecatedFirstTimestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(v1["deprecatedLastTimestamp"], "2026-01-01T00:01:00Z");
        assert_eq!(v1["deprecatedCount"], 2);
        assert_eq!(v1["reportingController"], "rc-ctrl");
        for same in [
            "reason",
            "type",
            "action",
            "series",
            "related",
            "reportingInstance",
        ] {
            assert_eq!(v1[same], stored[same], "{same}");
        }
        for core_only in [
            "involvedObject",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "reportingComponent",
        ] {
            assert!(
                v1.get(core_only).is_none(),
                "{core_only} is no events.k8s.io field"
            );
        }
        let mut back = to_storage(&ev, v1);
        back["apiVersion"] = json!("v1");
        assert_eq!(back, stored);
        assert_eq!(to_version(&core, &stored), Some(stored.clone()));
    }

    #[test]
    fn a_field_of_the_other_version_is_dropped_not_kept() {
        let core = info("");
        let body =
            json!({"metadata": {"name": "x"}, "message": "m", "note": "n", "regarding": {"name": "r"}});
        assert_eq!(
            to_storage(&core, body),
            json!({"metadata": {"name": "x"}, "message": "m"})
        );
        let ev = info(EVENTS_GROUP);
        let body = json!({"note": "n", "message": "stray"});
        assert_eq!(to_storage(&ev, body), json!({"message": "n"}));
    }

    #[test]
    fn patches_reach_the_stored_names() {
        let ev = info(EVENTS_GROUP);
        let merge = patch_to_storage(
            &ev,
            PatchKind::Merge,
            json!({"series": {"count": 2}, "note": "again", "apiVersion": "events.k8s.io/v1"}),
        );
        assert_eq!(merge, json!({"series": {"count": 2}, "message": "again"}));
        let ops = patch_to_storage(
            &ev,
            PatchKind::Json,
            json!([
                {"op": "replace", "path": "/regarding/name", "value": "b"},
                {"op": "copy", "from": "/note", "path": "/reason"},
                {"op": "add", "path": "/message", "value": "not a field"}
            ]),
        );
        assert_eq!(
            ops,
            json!([
                {"op": "replace", "path": "/involvedObject/name", "value": "b"},
                {"op": "copy", "from": "/message", "path": "/reason"}
            ])
        );
        // Core patches pass as written.
        let core = info("");
        assert_eq!(
            patch_to_storage(&core, PatchKind::Merge, json!({"message": "m"})),
            json!({"message": "m"})
        );
    }

    /// The real server's `events.k8s.io/v1` field label conversions (TestSelectableFieldConversion in
    /// kubernetes' pkg/api/testing/conversion_test.go) and `EventToSelectableFields`' `source`.
    #[test]
    fn field_selectors_of_either_version_select_the_same_events() {
        let ev = info(EVENTS_GROUP);
        let stored = core_event();
        for (label, value) in [
            ("regarding.name", "rc"),
            ("regarding.kind", "RayCluster"),
            ("regarding.uid", "u1"),
            ("regarding.apiVersion", "ray.io/v1"),
            ("reportingController", "rc-ctrl"),
            ("reason", "Created"),
            ("type", "Normal"),
        ] {
            let fs = FieldSelector::parse(&format!("{label}={value}")).expect("parses");
            fs.check_supported(EVENTS_GROUP, "events").expect("selectable");
            assert!(
                field_selector_to_storage(&ev, fs.clone()).matches(&stored),
                "{label}"
            );
            let other = FieldSelector::parse(&format!("{label}=other")).expect("parses");
            assert!(!field_selector_to_storage(&ev, other).matches(&stored), "{label}");
        }
        assert!(
            FieldSelector::parse("involvedObject.name=rc")
                .unwrap()
                .check_supported(EVENTS_GROUP, "events")
                .is_err()
        );
        assert!(
            FieldSelector::parse("regarding.name=rc")
                .unwrap()
                .check_supported("", "events")
                .is_err()
        );
        let mut no_source = stored.clone();
        no_source.as_object_mut().unwrap().remove("source");
        assert_eq!(source_field(&stored), "c");
        assert_eq!(source_field(&no_source), "rc-ctrl");
        assert!(
            FieldSelector::parse("source=rc-ctrl")
                .unwrap()
                .matches(&no_source)
        );
        assert!(FieldSelector::parse("source=c").unwrap().matches(&stored));
    }

    #[test]
    fn the_table_prints_what_kubectl_get_events_shows() {
        let stored = core_event();
        let t = table(&info(""), &[&stored], "7", None).expect("events table");
        let cells = t["rows"][0]["cells"].as_array().unwrap();
        assert_eq!(cells[1], "Normal");
        assert_eq!(cells[2], "Created");
        assert_eq!(cells[3], "raycluster/rc");
        assert_eq!(cells[5], "c, h");
        assert_eq!(cells[6], "made it");
        assert_eq!(cells[8], 3, "a series counts its occurrences");
        assert_eq!(cells[9], "e1");
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["priority"] == 0)
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Last Seen", "Type", "Reason", "Object", "Message"]);
        assert!(table(&builtins()[0], &[&stored], "", None).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn the_clock_never_expires_a_write_early() {
        let t0 = tokio::time::Instant::now();
        let mut c = RvClock::default();
        c.observe(t0, 10);
        c.observe(t0 + Duration::from_secs(1), 20);
        c.observe(t0 + Duration::from_secs(2), 30);
        assert_eq!(c.written_by(t0 - Duration::from_millis(1)), None);
        assert_eq!(c.written_by(t0), Some(10));
        assert_eq!(c.written_by(t0 + Duration::from_millis(1500)), Some(20));
        assert_eq!(c.written_by(t0 + Duration::from_secs(5)), Some(30));
        assert_eq!(c.samples.len(), 1);
    }
}
