//! Field ownership as kube-apiserver keeps it in `metadata.managedFields` (its `fieldmanager` package
//! over structured-merge-diff, `fieldset.rs`):
//!
//! - Every create, update and non-apply patch is an `Update` by its manager: the fields it added or
//!   changed join that manager's entry (one per manager, API version and subresource) and leave every
//!   other manager's; removed fields leave every entry. A write that changes nothing adds no entry.
//! - Apply (`apply`): the applier's entry becomes exactly the fields of its config; another manager
//!   owning a field the apply changes is a 409 `Conflict` naming each field, unless `force=true`, which
//!   takes the fields over; fields the applier owned last time, leaves out now and nobody else owns
//!   are removed from the object.
//! - `apiVersion`, `kind` and the server-set metadata (`name`, `uid`, `resourceVersion`, ...) are never
//!   owned; with a status subresource, main-resource writes own nothing under `status` and `/status`
//!   writes own only `status`.
//! - A client may write `managedFields` itself through any write but apply (which refuses it): a valid
//!   list replaces the stored one, an empty list or one of empty entries clears it, and an object
//!   without managed fields is not tracked by updates until it is next applied (the existing fields
//!   then belong to `before-first-apply`), as on the real server.
//!
//! - Client-side apply's annotation (`kubectl.kubernetes.io/last-applied-configuration`): an apply by
//!   `kubectl` may take the fields the annotation still holds from their other managers without a
//!   conflict, and rewrites the annotation to the applied configuration (kube-apiserver's
//!   lastAppliedManager and lastAppliedUpdater); kubectl then moves the client-side manager's fields.
//!
//! Not modelled: the cap of ten `Update` entries (older ones fold into `ancient-changes`) and conversion
//! of entries between API versions.

use serde_json::{Map, Value, json};

use super::error::{ApiError, Cause};
use super::fieldset::{Pe, Set, Shape, Walk, path_string};
use super::meta::same_except;
use super::registry::ResourceInfo;

/// Who writes, as the request names it.
#[derive(Clone, Copy, Debug)]
pub struct Writer<'a> {
    /// `fieldManager`, or the first part of the User-Agent (kube-apiserver's default).
    pub manager: &'a str,
    /// A `/status` write.
    pub status: bool,
    /// A `/scale` write: its entry names the `scale` subresource (kube-apiserver's scale handler).
    pub scale: bool,
    /// `force=true` on an apply.
    pub force: bool,
    /// The object's `managedFields` were computed already (a webhook-admitted object written again).
    pub given: bool,
}

impl<'a> Writer<'a> {
    pub fn new(manager: &'a str, status: bool) -> Self {
        Writer {
            manager,
            status,
            scale: false,
            force: false,
            given: false,
        }
    }
}

/// The manager kube-apiserver records when a request names none: the User-Agent up to its first `/`.
pub fn manager_from_user_agent(user_agent: &str) -> String {
    let prefix = user_agent.split('/').next().unwrap_or("").trim();
    // kube-apiserver keeps at most 128 characters of it.
    prefix.chars().take(128).collect()
}

#[derive(Clone, Debug, PartialEq)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    subresource: String,
    set: Set,
}

impl Entry {
    /// kube-apiserver's manager identifier: an applier's is independent of the API version.
    fn id(&self) -> (String, String, String, String) {
        let version = if self.operation == "Apply" {
            String::new()
        } else {
            self.api_version.clone()
        };
        (
            self.manager.clone(),
            self.operation.clone(),
            version,
            self.subresource.clone(),
        )
    }

    /// How conflict messages name a manager: `"one"`, `"three" using v1`, `... with subresource "status"`.
    fn printed(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.set.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(m)
    }

    fn from_value(v: &Value) -> Result<Entry, String> {
        let s = |f: &str| v.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        let operation = s("operation");
        if operation != "Apply" && operation != "Update" {
            return Err(format!("invalid operation {operation:?}"));
        }
        if s("fieldsType") != "FieldsV1" {
            return Err(format!("{:?} is not a valid fieldsType", s("fieldsType")));
        }
        let set = Set::from_fields_v1(v.get("fieldsV1").unwrap_or(&Value::Null))?;
        Ok(Entry {
            manager: s("manager"),
            operation,
            api_version: s("apiVersion"),
            time: v.get("time").and_then(Value::as_str).map(String::from),
            subresource: s("subresource"),
            set,
        })
    }
}

/// What an object's `metadata.managedFields` holds.
enum Stored {
    Absent,
    /// An empty list, or entries that are all empty: the client clears the field.
    Cleared,
    Entries(Vec<Entry>),
    Invalid,
}

fn stored(obj: &Value) -> Stored {
    match obj.pointer("/metadata/managedFields") {
        None | Some(Value::Null) => Stored::Absent,
        Some(Value::Array(_)) if cleared(obj) => Stored::Cleared,
        Some(Value::Array(items)) => items
            .iter()
            .map(Entry::from_value)
            .collect::<Result<Vec<_>, _>>()
            .map_or(Stored::Invalid, Stored::Entries),
        Some(_) => Stored::Invalid,
    }
}

fn entries(obj: Option<&Value>) -> Vec<Entry> {
    match obj.map(stored) {
        Some(Stored::Entries(e)) => e,
        _ => Vec::new(),
    }
}

/// The list to store, in kube-apiserver's order (operation, time, manager, version, subresource).
fn encode(mut list: Vec<Entry>) -> Option<Value> {
    list.retain(|e| !e.set.is_empty());
    if list.is_empty() {
        return None;
    }
    list.sort_by(|a, b| {
        let secs = |e: &Entry| {
            e.time
                .as_deref()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .map_or(0, |t| t.as_second())
        };
        (&a.operation, secs(a), &a.manager, &a.api_version, &a.subresource).cmp(&(
            &b.operation,
            secs(b),
            &b.manager,
            &b.api_version,
            &b.subresource,
        ))
    });
    Some(Value::Array(list.iter().map(Entry::to_value).collect()))
}

/// The paths no manager owns (kube-apiserver's `stripMetaManager`).
fn strip(set: &Set) -> Set {
    let mut s = Set::default();
    s.insert(&[Pe::Field("apiVersion".into())]);
    s.insert(&[Pe::Field("kind".into())]);
    s.insert(&[Pe::Field("metadata".into())]);
    for f in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        s.insert(&[Pe::Field("metadata".into()), Pe::Field(f.into())]);
    }
    set.difference(&s)
}

/// The object as the field sets see it: without its own `managedFields`.
fn bare(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    o
}

/// A built-in object as kube-apiserver's Update tracking sees it, a Go struct turned back into JSON:
/// `null` is no value, and `metadata`, `spec` and `status` (non-pointer structs) are always there, so
/// their appearing is no change of their own.
fn typed(info: &ResourceInfo, mut obj: Value) -> Value {
    fn drop_nulls(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|_, c| !c.is_null());
                m.values_mut().for_each(drop_nulls);
            }
            Value::Array(a) => a.iter_mut().for_each(drop_nulls),
            _ => {}
        }
    }
    if info.is_crd {
        return obj;
    }
    drop_nulls(&mut obj);
    if let Some(m) = obj.as_object_mut() {
        for f in ["metadata", "spec", "status"] {
            m.entry(f).or_insert_with(|| json!({}));
        }
    }
    obj
}

struct Ctx<'a> {
    info: &'a ResourceInfo,
    walk: Walk<'a>,
    shape: Shape<'a>,
    w: Writer<'a>,
}

impl<'a> Ctx<'a> {
    fn new(info: &'a ResourceInfo, w: Writer<'a>) -> Self {
        Ctx {
            info,
            walk: Walk { kind: &info.kind },
            shape: Shape::root(&info.kind, info.schema.as_ref().map(|s| s.get())),
            w,
        }
    }

    /// The fields a write through this endpoint may own (kube-apiserver's reset fields).
    fn filter(&self, set: &Set) -> Set {
        if self.w.status {
            set.only_top("status")
        } else if self.info.has_status {
            set.without_top("status")
        } else {
            set.clone()
        }
    }

    fn subresource(&self) -> String {
        if self.w.status {
            "status".into()
        } else if self.w.scale {
            "scale".into()
        } else {
            String::new()
        }
    }

    fn update_entry(&self, set: Set, now: &str) -> Entry {
        Entry {
            manager: self.w.manager.to_string(),
            operation: "Update".into(),
            api_version: self.info.api_version(),
            time: Some(now.to_string()),
            subresource: self.subresource(),
            set,
        }
    }

    /// `Update` of `list` by `live` → `new`: changed fields move to the writer, removed ones go.
    fn record_update(&self, mut list: Vec<Entry>, live: &Value, new: &Value, now: &str) -> Vec<Entry> {
        let c = self.walk.compare(live, new, self.shape);
        let changed = self.filter(&c.changed());
        let removed = self.filter(&c.removed);
        for e in &mut list {
            e.set = e.set.difference(&changed).difference(&removed);
        }
        let mine = strip(&changed);
        if !mine.is_empty() {
            let fresh = self.update_entry(mine, now);
            match list.iter_mut().find(|e| e.id() == fresh.id()) {
                Some(e) => {
                    e.set = e.set.union(&fresh.set);
                    e.time = fresh.time;
                }
                None => list.push(fresh),
            }
        }
        list.retain(|e| !e.set.is_empty());
        list
    }
}

/// The `managedFields` to store after a create (`live` = `None`), an update or a non-apply patch that
/// turns `live` into `new` (`new` as the client's write made it, before the server's own stamps).
pub fn update(
    info: &ResourceInfo,
    live: Option<&Value>,
    new: &Value,
    w: Writer<'_>,
    now: &str,
) -> Option<Value> {
    if w.given {
        return new.pointer("/metadata/managedFields").cloned();
    }
    let ctx = Ctx::new(info, w);
    // A `/status` write's own list is never read: only whether it clears the field.
    let start = if w.status {
        if cleared(new) {
            return None;
        }
        entries(live)
    } else {
        match stored(new) {
            Stored::Cleared => return None,
            Stored::Entries(e) if !e.is_empty() => e,
            _ => entries(live),
        }
    };
    // An existing object without managed fields is not tracked by updates.
    if start.is_empty() && live.is_some() {
        return None;
    }
    let empty = json!({});
    let live = live.unwrap_or(&empty);
    // The walk never looks at `metadata.managedFields`, so a custom resource is compared as stored;
    // a built-in one as its Go struct sees it, which takes a copy.
    let list = if info.is_crd {
        ctx.record_update(start, live, new, now)
    } else {
        ctx.record_update(start, &typed(info, bare(live)), &typed(info, bare(new)), now)
    };
    encode(list)
}

/// An empty list, or entries that are all empty: the client clears the field. Decided without
/// reading the entries.
fn cleared(obj: &Value) -> bool {
    matches!(
        obj.pointer("/metadata/managedFields"),
        Some(Value::Array(items)) if items.iter().all(|i| i.as_object().is_some_and(Map::is_empty))
    )
}

/// Server-side apply of `config` to `live` (`None`: the object is created). Returns the object to store
/// (its `managedFields` set) or the 409 conflict / 400 refusal kube-apiserver answers.
pub fn apply(
    info: &ResourceInfo,
    live: Option<&Value>,
    config: &Value,
    w: Writer<'_>,
    now: &str,
) -> Result<Value, ApiError> {
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let ctx = Ctx::new(info, w);
    let live_bare = live.map_or(json!({}), bare);
    let mut list = entries(live);
    if list.is_empty() && live.is_some() {
        // kube-apiserver's skipNonAppliedManager: what exists belongs to `before-first-apply`.
        let first = Ctx::new(info, Writer::new("before-first-apply", w.status));
        list = first.record_update(Vec::new(), &json!({}), &live_bare, now);
    }
    let applier = Entry {
        manager: w.manager.to_string(),
        operation: "Apply".into(),
        api_version: info.api_version(),
        time: None,
        subresource: ctx.subresource(),
        set: Set::default(),
    };
    let position = list.iter().position(|e| e.id() == applier.id());
    let previous = position.map(|i| list.remove(i));
    let last = previous.as_ref().map(|e| e.set.clone()).unwrap_or_default();
    let config_set = ctx.filter(&ctx.walk.to_set(config, ctx.shape));
    let mut merged = ctx.walk.merge(&live_bare, config, ctx.shape);
    // Prune: what the applier had and nobody owns now (its new set included) goes.
    if !last.is_empty() {
        let owned = list
            .iter()
            .fold(config_set.clone(), |acc, e| acc.union(&e.set))
            .with_prefixes();
        let gone = last.with_prefixes().difference(&owned);
        ctx.walk.remove(&mut merged, &gone, ctx.shape);
    }
    let c = ctx.walk.compare(&live_bare, &merged, ctx.shape);
    let changed = ctx.filter(&c.changed());
    let removed = ctx.filter(&c.removed);
    let mut conflicts: Vec<(&Entry, Vec<Vec<Pe>>)> = Vec::new();
    for e in &list {
        let clash = e.set.intersection(&changed);
        if !clash.is_empty() {
            conflicts.push((e, clash.paths()));
        }
    }
    if !conflicts.is_empty() && !w.force {
        // kube-apiserver's lastAppliedManager: `kubectl` moving from client-side apply takes over the
        // fields its last-applied configuration still holds as they are live, as if forced.
        let allowed = (w.manager == LAST_APPLIED_MANAGER)
            .then(|| live.and_then(|l| allowed_from_last_applied(&ctx, l)))
            .flatten()
            .unwrap_or_default();
        conflicts.retain(|(_, paths)| paths.iter().any(|p| !allowed.has(p)));
        for (_, paths) in &mut conflicts {
            paths.retain(|p| !allowed.has(p));
        }
        if !conflicts.is_empty() {
            return Err(conflict_error(conflicts));
        }
    }
    drop(conflicts);
    for e in &mut list {
        e.set = e.set.difference(&changed).difference(&removed);
    }
    let object_changed = merged != live_bare;
    list.push(Entry {
        set: strip(&config_set.difference(&removed)),
        time: if object_changed {
            Some(now.to_string())
        } else {
            previous.and_then(|p| p.time)
        },
        ..applier
    });
    if let Some(m) = merged.as_object_mut() {
        let meta = m.entry("metadata").or_insert_with(|| json!({}));
        if let (Some(meta), Some(fields)) = (meta.as_object_mut(), encode(list)) {
            meta.insert("managedFields".into(), fields);
        }
    }
    if w.manager == LAST_APPLIED_MANAGER {
        sync_last_applied(&mut merged, config);
    }
    Ok(merged)
}

/// The field manager whose applies kube-apiserver reconciles with client-side apply's annotation.
const LAST_APPLIED_MANAGER: &str = "kubectl";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The fields `live`'s last-applied configuration sets and still holds with the same value
/// (kube-apiserver's `allowedConflictsFromLastApplied`): `None` without a usable annotation.
fn allowed_from_last_applied(ctx: &Ctx<'_>, live: &Value) -> Option<Set> {
    let text = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())?;
    let last: Value = serde_json::from_str(text).ok().filter(Value::is_object)?;
    if last.get("apiVersion").and_then(Value::as_str) != Some(&ctx.info.api_version()) {
        return None;
    }
    let last = typed(ctx.info, last);
    let live = typed(ctx.info, bare(live));
    let c = ctx.walk.compare(&last, &live, ctx.shape);
    Some(
        ctx.walk
            .to_set(&last, ctx.shape)
            .difference(&c.modified)
            .difference(&c.added)
            .difference(&c.removed),
    )
}

/// kube-apiserver's lastAppliedUpdater: after `kubectl`'s apply, an object that carries the
/// client-side apply annotation gets the applied configuration there (without the annotation itself),
/// as Go encodes an unstructured object: keys sorted, HTML characters escaped, a newline at the end.
fn sync_last_applied(obj: &mut Value, config: &Value) {
    let Some(annotations) = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if annotations
        .get(LAST_APPLIED)
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return;
    }
    let mut config = config.clone();
    if let Some(a) = config
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(LAST_APPLIED);
    }
    annotations.insert(LAST_APPLIED.into(), json!(go_json(&sorted(config)) + "\n"));
}

/// `v` with every object's keys in order, as Go writes a map.
fn sorted(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut pairs: Vec<(String, Value)> = m.into_iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(pairs.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// Compact JSON with Go's HTML escaping of `<`, `>` and `&` (which JSON allows only inside strings).
fn go_json(v: &Value) -> String {
    v.to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// kube-apiserver's 409 for an apply that changes fields other managers own.
fn conflict_error(mut conflicts: Vec<(&Entry, Vec<Vec<Pe>>)>) -> ApiError {
    conflicts.sort_by_key(|(e, _)| e.id());
    let total: usize = conflicts.iter().map(|(_, p)| p.len()).sum();
    let mut causes = Vec::new();
    for (e, paths) in &conflicts {
        for p in paths {
            causes.push(Cause {
                reason: "FieldManagerConflict".into(),
                field: path_string(p),
                message: format!("conflict with {}", e.printed()),
            });
        }
    }
    let message = if total == 1 {
        format!(
            "Apply failed with 1 conflict: {}: {}",
            causes[0].message, causes[0].field
        )
    } else {
        let mut lines = Vec::new();
        for (e, paths) in &conflicts {
            lines.push(format!("conflicts with {}:", e.printed()));
            lines.extend(paths.iter().map(|p| format!("- {}", path_string(p))));
        }
        format!("Apply failed with {total} conflicts: {}", lines.join("\n"))
    };
    let mut err = ApiError::new(409, "Conflict", message);
    err.details.causes = causes;
    err
}

/// Whether two objects differ only in their `resourceVersion` and their managed fields' timestamps
/// (kube-apiserver then writes nothing: a re-apply of the same config is a no-op). Compared in place:
/// every write asks, so it copies nothing.
pub fn same_but_times(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    fn meta<'m>(v: Option<&'m Value>, empty: &'m Map<String, Value>) -> Option<&'m Map<String, Value>> {
        v.map_or(Some(empty), Value::as_object)
    }
    let empty = Map::new();
    let same_meta = match (meta(a.get("metadata"), &empty), meta(b.get("metadata"), &empty)) {
        (Some(x), Some(y)) => same_except(
            x,
            y,
            |k| k == "resourceVersion",
            |k, p, q| {
                if k == "managedFields" {
                    same_entries_but_times(p, q)
                } else {
                    p == q
                }
            },
        ),
        _ => a.get("metadata") == b.get("metadata"),
    };
    same_meta && same_except(a, b, |k| k == "metadata", |_, p, q| p == q)
}

fn same_entries_but_times(a: &Value, b: &Value) -> bool {
    match (a.as_array(), b.as_array()) {
        (Some(x), Some(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(p, q)| match (p.as_object(), q.as_object()) {
                        (Some(p), Some(q)) => same_except(p, q, |k| k == "time", |_, v, w| v == w),
                        _ => p == q,
                    })
        }
        _ => a == b,
    }
}

#[cfg(test)]
#[path = "managed_fields_tests.rs"]
mod tests;
