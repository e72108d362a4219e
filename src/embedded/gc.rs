//! What a delete means for an object's dependents, as kube-apiserver decides it
//! (`registry/generic/registry/store.go`: `shouldOrphanDependents`, `shouldDeleteDependents`,
//! `deletionFinalizersForGarbageCollection`), and what kube-controller-manager's garbage collector
//! then does with the two finalizers it owns:
//! - `orphan`: the dependents lose their owner reference to the object, then the finalizer goes;
//! - `foregroundDeletion`: the dependents are deleted, and the finalizer goes once none of those that
//!   block their owner's deletion (`blockOwnerDeletion: true`) is left.
//!
//! The store runs the collector's steps as soon as the finalizer is written (`store.rs`), so a client
//! reads the pending object in the delete's answer, as on a real cluster, and finds it gone (or held
//! only by its other finalizers) right after.

use serde_json::Value;

use super::registry::ResourceInfo;

/// What a delete asks of the dependents: its `propagationPolicy` and the deprecated
/// `orphanDependents`, which wins when set.
#[derive(Clone, Copy, Debug, Default)]
pub struct Asked<'a> {
    pub propagation: Option<&'a str>,
    pub orphan_dependents: Option<bool>,
}

pub const ORPHAN: &str = "orphan";
pub const FOREGROUND: &str = "foregroundDeletion";

/// A kind's default policy when a delete names none (`DefaultGarbageCollectionPolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Default {
    /// The kind takes no part in garbage collection (events): the two finalizers are dropped.
    Unsupported,
    /// Kept for backwards compatibility in `batch/v1` Jobs and `v1` ReplicationControllers.
    Orphan,
    Delete,
}

fn default_policy(info: &ResourceInfo) -> Default {
    match (info.group.as_str(), info.plural.as_str()) {
        ("" | "events.k8s.io", "events") => Default::Unsupported,
        ("batch", "jobs") | ("", "replicationcontrollers") => Default::Orphan,
        _ => Default::Delete,
    }
}

fn should_orphan(info: &ResourceInfo, opts: Asked, finalizers: &[String]) -> bool {
    let default = default_policy(info);
    if default == Default::Unsupported {
        return false;
    }
    if let Some(orphan) = opts.orphan_dependents {
        return orphan;
    }
    match opts.propagation {
        Some("Orphan") => return true,
        Some("Background" | "Foreground") => return false,
        _ => {}
    }
    for f in finalizers {
        match f.as_str() {
            ORPHAN => return true,
            FOREGROUND => return false,
            _ => {}
        }
    }
    default == Default::Orphan
}

fn should_delete_in_foreground(info: &ResourceInfo, opts: Asked, finalizers: &[String]) -> bool {
    if default_policy(info) == Default::Unsupported {
        return false;
    }
    // Either value of the deprecated field means a background delete at most.
    if opts.orphan_dependents.is_some() {
        return false;
    }
    match opts.propagation {
        Some("Foreground") => return true,
        Some("Background" | "Orphan") => return false,
        _ => {}
    }
    finalizers.iter().any(|f| f == FOREGROUND)
}

/// The finalizers an object carries after a delete with `opts`, when they change: the object's own,
/// the two garbage-collector finalizers dropped and then added back as the delete asks.
pub fn finalizers_after_delete(
    info: &ResourceInfo,
    opts: Asked,
    finalizers: &[String],
) -> Option<Vec<String>> {
    let mut next: Vec<String> = finalizers
        .iter()
        .filter(|f| *f != ORPHAN && *f != FOREGROUND)
        .cloned()
        .collect();
    if should_orphan(info, opts, finalizers) {
        next.push(ORPHAN.into());
    }
    if should_delete_in_foreground(info, opts, finalizers) {
        next.push(FOREGROUND.into());
    }
    let same =
        |a: &[String], b: &[String]| a.iter().all(|x| b.contains(x)) && b.iter().all(|x| a.contains(x));
    (!same(&next, finalizers)).then_some(next)
}

/// The warning kube-apiserver's Job storage sends with a delete that names no policy, since a batch/v1
/// Job then orphans its pods (`registry/batch/job/storage`).
pub fn delete_warnings(info: &ResourceInfo, opts: Asked) -> Vec<String> {
    let job = info.group == "batch" && info.plural == "jobs";
    if job && opts.propagation.is_none() && opts.orphan_dependents.is_none() {
        return vec![
            "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to \
             remove them or set propagationPolicy=Orphan to suppress this warning"
                .into(),
        ];
    }
    Vec::new()
}

/// `dependent` without its owner references to `owner_uid` (what the collector writes when it
/// orphans it); `None` when it has none.
pub fn orphaned(dependent: &Value, owner_uid: &str) -> Option<Value> {
    let refs = dependent.pointer("/metadata/ownerReferences")?.as_array()?;
    let kept: Vec<Value> = refs
        .iter()
        .filter(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid))
        .cloned()
        .collect();
    if kept.len() == refs.len() {
        return None;
    }
    let mut next = dependent.clone();
    let meta = next.get_mut("metadata")?.as_object_mut()?;
    if kept.is_empty() {
        meta.remove("ownerReferences");
    } else {
        meta.insert("ownerReferences".into(), Value::Array(kept));
    }
    Some(next)
}

/// Whether `dependent` holds back the foreground deletion of `owner_uid`.
pub fn blocks(dependent: &Value, owner_uid: &str) -> bool {
    dependent
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                r.get("uid").and_then(Value::as_str) == Some(owner_uid)
                    && r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
            })
        })
}

/// `obj` with `finalizers` (the field dropped when empty, as the API server stores it).
pub fn with_finalizers(obj: &Value, finalizers: &[String]) -> Value {
    let mut next = obj.clone();
    if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
        if finalizers.is_empty() {
            meta.remove("finalizers");
        } else {
            meta.insert("finalizers".into(), serde_json::json!(finalizers));
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(group: &str, plural: &str) -> ResourceInfo {
        crate::embedded::registry::builtins()
            .into_iter()
            .find(|b| b.plural == plural && b.group == group)
            .expect("served")
    }

    fn opts(propagation: Option<&str>, orphan: Option<bool>) -> Asked<'_> {
        Asked {
            propagation,
            orphan_dependents: orphan,
        }
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    /// kube-apiserver `registry/generic/registry/store_test.go`, `TestStoreDeleteWithOrphanDependents`
    /// and `TestStoreDeletionPropagation`: the finalizers a delete leaves (`None`: the object goes, or
    /// keeps the finalizers it had, in their order), by the deprecated `orphanDependents`, by the
    /// policy, by the finalizers already there, and by the kind's default (a ConfigMap deletes its
    /// dependents, a batch/v1 Job orphans them). Events take no part.
    #[test]
    fn the_finalizers_a_delete_leaves() {
        let del = info("", "configmaps");
        let orph = info("batch", "jobs");
        let ev = info("", "events");
        let (x, y, o, f) = ("foo.com/x", "bar.com/y", ORPHAN, FOREGROUND);
        let t = Some(true);
        let n = Some(false);
        type Case<'a> = (&'a ResourceInfo, Asked<'a>, Vec<&'a str>, Option<Vec<&'a str>>);
        let cases: Vec<Case> = vec![
            // orphanDependents: true
            (&del, opts(None, t), vec![x, o, y], None),
            (&del, opts(None, t), vec![x, y], Some(vec![x, y, o])),
            (&del, opts(None, t), vec![], Some(vec![o])),
            (&del, opts(None, t), vec![o], None),
            // orphanDependents: false beats the kind's default
            (&orph, opts(None, n), vec![x, o, y], Some(vec![x, y])),
            (&orph, opts(None, n), vec![x, y], None),
            (&orph, opts(None, n), vec![], None),
            (&orph, opts(None, n), vec![o], Some(vec![])),
            // neither: a finalizer already there, else the kind's default
            (&del, opts(None, None), vec![x, o, y], None),
            (&orph, opts(None, None), vec![x, o, y], None),
            (&del, opts(None, None), vec![x, y], None),
            (&orph, opts(None, None), vec![x, y], Some(vec![x, y, o])),
            (&del, opts(None, None), vec![], None),
            (&orph, opts(None, None), vec![], Some(vec![o])),
            (&del, opts(None, None), vec![o], None),
            (&orph, opts(None, None), vec![o], None),
            // propagationPolicy, with no finalizers, an orphan one, a foreground one
            (&del, opts(Some("Foreground"), None), vec![], Some(vec![f])),
            (&orph, opts(Some("Foreground"), None), vec![], Some(vec![f])),
            (&orph, opts(Some("Background"), None), vec![], None),
            (&del, opts(Some("Orphan"), None), vec![], Some(vec![o])),
            (&del, opts(Some("Foreground"), None), vec![o], Some(vec![f])),
            (&orph, opts(Some("Background"), None), vec![o], Some(vec![])),
            (&del, opts(Some("Orphan"), None), vec![o], None),
            (&del, opts(Some("Foreground"), None), vec![f], None),
            (&orph, opts(Some("Background"), None), vec![f], Some(vec![])),
            (&del, opts(Some("Orphan"), None), vec![f], Some(vec![o])),
            (&orph, opts(None, None), vec![f], None),
            // events: both finalizers go, whatever is asked
            (&ev, opts(Some("Orphan"), None), vec![o], Some(vec![])),
            (&ev, opts(Some("Foreground"), None), vec![], None),
        ];
        for (info, o, have, want) in cases {
            let have = s(&have);
            assert_eq!(
                finalizers_after_delete(info, o, &have),
                want.map(|w| s(&w)),
                "{}/{} {:?} {:?} {have:?}",
                info.group,
                info.plural,
                o.propagation,
                o.orphan_dependents
            );
        }
    }

    #[test]
    fn orphaning_drops_only_the_owners_reference() {
        let dep = json!({"metadata": {"name": "d", "ownerReferences": [
            {"uid": "a", "name": "a"}, {"uid": "b", "name": "b", "blockOwnerDeletion": true}]}});
        let once = orphaned(&dep, "a").unwrap();
        assert_eq!(
            once["metadata"]["ownerReferences"],
            json!([{"uid": "b", "name": "b", "blockOwnerDeletion": true}])
        );
        assert!(blocks(&once, "b") && !blocks(&once, "a"));
        let twice = orphaned(&once, "b").unwrap();
        assert_eq!(twice["metadata"].get("ownerReferences"), None);
        assert_eq!(orphaned(&twice, "b"), None);
    }
}
