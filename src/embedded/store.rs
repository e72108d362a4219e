//! The object store: one monotonically increasing resourceVersion shared by every object and by the
//! bounded event history that watches replay from. All writes take one lock, so an RV order is a
//! total order of changes (what "events newer than N" needs).

use super::admission::{AdmissionHook, Operation};
use super::durable::{self, Durable, DurableError, Op};
use super::error::ApiError;
use super::faults::Faults;
use super::gc;
use super::managed_fields::{self, Writer};
use super::meta::{self, finalizers, is_deleting, meta_mut, meta_str};
use super::patch::{self, PatchKind};
use super::prune;
use super::registry::{ResourceInfo, ResourceKey};
use super::selector::{FieldSelector, LabelSelector};
use super::service_alloc;
use super::stored::{self, Stored, owner_uids};
use base64::Engine;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{broadcast, watch};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

#[derive(Clone, Debug)]
pub struct WatchEvent {
    pub rv: u64,
    pub key: ResourceKey,
    pub type_: EventType,
    pub object: Arc<Value>,
    /// The object before a MODIFIED, as compact JSON: lets a filtered watch turn "stopped matching"
    /// into DELETED (parsed only by a watch with a selector).
    pub previous: Option<Arc<[u8]>>,
}

/// An event kept for watch replay: its object's compact JSON, shared with the store while that is
/// the stored version (`stored.rs`), parsed again when a watch replays it. The object a MODIFIED
/// replaced is that JSON too, shared with the earlier event when it is retained.
struct Retained {
    rv: u64,
    key: ResourceKey,
    type_: EventType,
    object: Arc<[u8]>,
    previous: Option<Arc<[u8]>>,
    /// What the history's byte bound counts: the object's and the previous object's compact JSON.
    bytes: usize,
}

impl Retained {
    /// The event as a watch sends it.
    fn event(&self) -> Arc<WatchEvent> {
        Arc::new(WatchEvent {
            rv: self.rv,
            key: self.key.clone(),
            type_: self.type_,
            object: Arc::new(stored::parse(&self.object)),
            previous: self.previous.clone(),
        })
    }
}

/// Where a watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFrom {
    /// RV unset or "0": synthetic ADDED events for the current objects, then live events.
    Current,
    /// Replay the retained events newer than this RV, then live events (410 if compacted away).
    Rv(u64),
}

pub struct WatchStart {
    /// Current objects to send as ADDED (only for `WatchFrom::Current`).
    pub initial: Vec<Arc<Value>>,
    /// Retained events newer than the requested RV (only for `WatchFrom::Rv`).
    pub replay: Vec<Arc<WatchEvent>>,
    pub live: broadcast::Receiver<Arc<WatchEvent>>,
    /// The store's RV when the watch started (initial-events-end bookmark).
    pub rv: u64,
    /// Changes when `close_watches` is called.
    pub closed: watch::Receiver<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

pub struct ListResult {
    pub items: Vec<Arc<Value>>,
    pub rv: u64,
    pub continue_token: Option<String>,
    pub remaining: usize,
}

#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// "Background", "Foreground" or "Orphan"; none: the kind's default (`gc.rs`).
    pub propagation: Option<String>,
    /// The deprecated `orphanDependents`, which wins over `propagation` when set.
    pub orphan_dependents: Option<bool>,
    pub grace_period_seconds: Option<i64>,
    pub dry_run: bool,
    /// `preconditions.uid`: the delete is refused (409) unless the stored object has this uid.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`: the delete is refused (409) unless the stored object is at
    /// this version, so a delete decided on a stale read cannot remove what changed since.
    pub resource_version: Option<String>,
}

impl DeleteOptions {
    /// What the delete asks of the object's dependents (`gc.rs`).
    pub fn asked(&self) -> gc::Asked<'_> {
        gc::Asked {
            propagation: self.propagation.as_deref(),
            orphan_dependents: self.orphan_dependents,
        }
    }
}

#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Events kept for watch replay; older RVs get 410 Expired.
    pub history_limit: usize,
    /// The same bound in bytes of the events' objects as compact JSON (a MODIFIED event's object and
    /// the one it replaced): a few large objects written and deleted cannot hold memory that a count
    /// alone would let through. The history shares the stored versions with the store and holds
    /// the others as that JSON (`Retained`), so this bounds what it takes in memory (it once held
    /// every parsed version, about ten times this); 32 MiB keeps about as many events as the 16 MiB
    /// of objects alone did before previous objects were counted.
    pub history_bytes: usize,
    /// The storage quota (`--storage-quota`): bytes of memory the stored objects hold
    /// ([`held_bytes`]: each object at its parsed size, about ten times a pod's compact JSON, though the
    /// store keeps the JSON: what an in-process cache of it holds) past which a write that
    /// grows the store is refused, as etcd refuses writes past `--quota-backend-bytes`
    /// ("etcdserver: mvcc: database space exceeded"); reads, watches, deletes and writes that shrink
    /// keep working, and deleting below it resumes writes. etcd's default is 2 GiB on disk; ours is
    /// 256 MiB of memory, so a process stays under about 1 GiB whatever is stored (issue 60).
    pub quota_bytes: usize,
}

/// The storage quota's default (see [`StoreConfig::quota_bytes`]).
/// The field manager of the server's own writes (a namespace's default ServiceAccount, a quota's
/// status), as the real cluster's controllers name themselves.
pub const INTERNAL_MANAGER: &str = "kube-controller-manager";

pub const DEFAULT_QUOTA_BYTES: usize = 256 * 1024 * 1024;

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            history_limit: 100_000,
            history_bytes: 32 * 1024 * 1024,
            quota_bytes: DEFAULT_QUOTA_BYTES,
        }
    }
}

/// What the API server answers when etcd is past its quota (a 500 with etcd's error text).
fn space_exceeded() -> ApiError {
    ApiError::internal("etcdserver: mvcc: database space exceeded")
}

/// The largest object the store keeps, as compact JSON: etcd's default request limit (1.5 MiB).
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

pub use super::limits::{held_bytes, json_len};

/// 413 for an object over [`MAX_OBJECT_BYTES`], naming its size; the size otherwise.
fn sized(info: &ResourceInfo, obj: &Value) -> Result<usize, ApiError> {
    let n = json_len(obj);
    if n > MAX_OBJECT_BYTES {
        return Err(ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!(
                "{} {:?} is {n} bytes as JSON; the limit for one object is {MAX_OBJECT_BYTES} bytes",
                info.qualified_plural(),
                meta_str(obj, "name")
            ),
        ));
    }
    Ok(n)
}

/// A patch that did not apply, answered as the real server answers it.
fn patch_refused(e: patch::PatchError) -> ApiError {
    match e.code() {
        413 => ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: {e}"),
        ),
        400 => ApiError::bad_request(e.to_string()),
        500 => ApiError::new(500, "", e.to_string()),
        // kube-apiserver answers a JSON patch that does not apply with its generic 422, which keeps
        // no cause: the operation and path are lost to the client there as here.
        code @ 422 if matches!(e, patch::PatchError::JsonPatchFailed(_)) => {
            ApiError::new(code, "Invalid", patch::PatchError::UnusableOperation.to_string()).generic()
        }
        code => ApiError::new(code, "Invalid", e.to_string()).generic(),
    }
}

type ObjKey = (ResourceKey, String, String);

struct Inner {
    rv: u64,
    objects: HashMap<ResourceKey, BTreeMap<(String, String), Stored>>,
    by_uid: HashMap<String, ObjKey>,
    dependents: HashMap<String, BTreeSet<ObjKey>>,
    history: VecDeque<Retained>,
    history_limit: usize,
    history_bytes: usize,
    history_byte_limit: usize,
    /// Events with an RV at or below this are gone from history.
    compacted: u64,
    tx: broadcast::Sender<Arc<WatchEvent>>,
    /// With `--data-dir`: where every committed change is recorded, in RV order.
    durable: Option<Arc<Durable>>,
    /// The stored objects at their parsed size ([`held_bytes`]), against `quota_bytes`.
    stored_bytes: usize,
    quota_bytes: usize,
    /// Whether the quota refused a write since the store was last below it (one log line per episode).
    over_quota: bool,
    /// Owners whose dependents the collector is deleting now: a dependent's removal does not start
    /// another turn for them (which would recurse once per dependent).
    collecting: BTreeSet<String>,
    /// Set while aggregated ClusterRoles are being rewritten: those writes do not start another round.
    aggregating: bool,
}

pub struct Store {
    inner: Mutex<Inner>,
    durable: Option<Arc<Durable>>,
    /// The RV loaded from the data directory (0 when it was empty or there is none).
    restored_rv: u64,
    closer: watch::Sender<u64>,
    admission: Arc<dyn AdmissionHook>,
    pub faults: Faults,
    /// Set when a process runtime is registered: its Service proxy hands out the ClusterIPs
    /// (`service_alloc.rs`), not this store.
    cluster_ips_elsewhere: Arc<AtomicBool>,
}

/// Namespaces the real API server refuses to delete.
const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// A 422 naming every metadata field that breaks the API server's object-metadata rules, then every
/// value its kind's checks refuse (`validation`; on update, against the stored `old`).
fn invalid_meta(info: &ResourceInfo, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
    let mut errs = meta::validate_meta(info, obj);
    // `ValidateObjectMetaUpdate`: an object being deleted takes no new finalizer.
    if let Some(old) = old.filter(|o| is_deleting(o)) {
        let had = finalizers(old);
        let mut added: Vec<String> = finalizers(obj).into_iter().filter(|f| !had.contains(f)).collect();
        added.sort();
        added.dedup();
        if !added.is_empty() {
            let list = added
                .iter()
                .map(|f| format!("{f:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            errs.push(crate::api::validation::FieldError::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{list}}}"
                ),
            ));
        }
    }
    errs.extend(super::validation::validate(info, obj, old));
    if errs.is_empty() {
        return Ok(());
    }
    let name = meta_str(obj, "name");
    // An `events.k8s.io` Event is validated as the core Event it converts to, and named so.
    let (kind, group) = if info.group == super::event_fields::EVENTS_GROUP {
        (info.kind.clone(), "")
    } else {
        (info.qualified_kind(), info.group.as_str())
    };
    Err(ApiError::invalid(&kind, name, &errs).details(name, group, &info.kind))
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

use crate::api::kueue::constants::DEFAULT_LOCAL_QUEUE_NAME;
use crate::api::kueue::managed_jobs::JobNamespace;

fn priority_class_key() -> ResourceKey {
    ResourceKey {
        group: "scheduling.k8s.io".into(),
        plural: "priorityclasses".into(),
    }
}

fn cluster_role_key() -> ResourceKey {
    ResourceKey {
        group: "rbac.authorization.k8s.io".into(),
        plural: "clusterroles".into(),
    }
}

fn is_cluster_role(key: &ResourceKey) -> bool {
    key.plural == "clusterroles" && key.group == "rbac.authorization.k8s.io"
}

fn ns_key() -> ResourceKey {
    ResourceKey {
        group: String::new(),
        plural: "namespaces".into(),
    }
}

/// What Kueue's job webhooks read of a namespace: its labels, and whether the `default` LocalQueue is
/// there.
fn job_namespace(inner: &Inner, ns: &str) -> JobNamespace {
    let labels = inner
        .stored(&ns_key(), "", ns)
        .map(Stored::labels)
        .unwrap_or_default();
    let lq = ResourceKey {
        group: "kueue.x-k8s.io".into(),
        plural: "localqueues".into(),
    };
    JobNamespace {
        labels,
        default_queue: inner.exists(&lq, ns, DEFAULT_LOCAL_QUEUE_NAME),
    }
}

fn is_service(info: &ResourceInfo) -> bool {
    info.group.is_empty() && info.plural == "services"
}

impl Inner {
    /// The addresses and node ports the stored Services hold, but the one at `except` (namespace,
    /// name).
    fn services_taken(&self, except: Option<(&str, &str)>) -> service_alloc::Taken {
        let key = ResourceKey {
            group: String::new(),
            plural: "services".into(),
        };
        let services: Vec<Arc<Value>> = self
            .objects
            .get(&key)
            .into_iter()
            .flat_map(|m| m.iter())
            .filter(|((ns, name), _)| except.is_none_or(|(ens, en)| ns != ens || name != en))
            .map(|(_, s)| s.value())
            .collect();
        service_alloc::Taken::of(services.iter().map(|s| &**s))
    }

    fn stored(&self, key: &ResourceKey, ns: &str, name: &str) -> Option<&Stored> {
        self.objects
            .get(key)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
    }

    fn exists(&self, key: &ResourceKey, ns: &str, name: &str) -> bool {
        self.stored(key, ns, name).is_some()
    }

    /// The stored object, parsed.
    fn lookup(&self, key: &ResourceKey, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.stored(key, ns, name).map(Stored::value)
    }

    /// Emits an event. `json`: `object` as compact JSON (shared with the store while it is the
    /// stored version). `previous`: the replaced version's JSON.
    fn emit(
        &mut self,
        key: &ResourceKey,
        type_: EventType,
        object: Arc<Value>,
        json: Arc<[u8]>,
        previous: Option<Arc<[u8]>>,
    ) {
        let len = json.len();
        let kept = Retained {
            rv: self.rv,
            key: key.clone(),
            type_,
            object: json,
            bytes: len + previous.as_ref().map_or(0, |p| p.len()),
            previous: previous.clone(),
        };
        let ev = Arc::new(WatchEvent {
            rv: self.rv,
            key: key.clone(),
            type_,
            object,
            previous,
        });
        self.history_bytes += kept.bytes;
        self.history.push_back(kept);
        while self.history.len() > self.history_limit
            || (self.history_bytes > self.history_byte_limit && self.history.len() > 1)
        {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.rv;
                self.history_bytes -= old.bytes;
            }
        }
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(ev);
    }

    /// Stores `obj` under a fresh RV and emits ADDED or MODIFIED.
    fn put(&mut self, key: &ResourceKey, mut obj: Value, type_: EventType) -> Arc<Value> {
        self.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        let ns = meta_str(&obj, "namespace").to_string();
        let name = meta_str(&obj, "name").to_string();
        let uid = meta_str(&obj, "uid").to_string();
        let okey = (key.clone(), ns.clone(), name.clone());
        let stored = Stored::new(&obj);
        let json = stored.json().clone();
        let counted = stored.counted();
        let old = self
            .objects
            .entry(key.clone())
            .or_default()
            .insert((ns, name), stored);
        self.stored_bytes =
            (self.stored_bytes + counted).saturating_sub(old.as_ref().map_or(0, Stored::counted));
        if let Some(old) = &old {
            for o in old.owners() {
                if let Some(set) = self.dependents.get_mut(o) {
                    set.remove(&okey);
                }
            }
        }
        for o in owner_uids(&obj) {
            self.dependents.entry(o).or_default().insert(okey.clone());
        }
        if let Some(d) = &self.durable {
            d.record(Op::Put {
                key: key.clone(),
                ns: okey.1.clone(),
                name: okey.2.clone(),
                object: json.clone(),
                rv: self.rv,
            });
        }
        self.by_uid.insert(uid, okey);
        let obj = Arc::new(obj);
        self.emit(key, type_, obj.clone(), json, old.map(|o| o.json().clone()));
        if is_cluster_role(key) {
            self.aggregate_cluster_roles();
        }
        obj
    }

    /// Brings every aggregated ClusterRole's rules up to date with the roles its selectors match
    /// (`rbac_bootstrap`), round after round until nothing changes: a chain of aggregations takes a
    /// round per link, and the rounds are bounded by the number of aggregated roles.
    fn aggregate_cluster_roles(&mut self) {
        if self.aggregating {
            return;
        }
        self.aggregating = true;
        let key = cluster_role_key();
        let rounds = self.objects.get(&key).map_or(0, |m| {
            m.values()
                .filter(|r| r.value().get("aggregationRule").is_some())
                .count()
        });
        for _ in 0..=rounds {
            let all: Vec<Arc<Value>> = self
                .objects
                .get(&key)
                .map(|m| m.values().map(Stored::value).collect())
                .unwrap_or_default();
            let stale = super::rbac_bootstrap::stale(&all);
            if stale.is_empty() {
                break;
            }
            for (name, rules) in stale {
                let Some(current) = self.lookup(&key, "", &name) else {
                    continue;
                };
                let mut next = Arc::unwrap_or_clone(current);
                if let Some(m) = next.as_object_mut() {
                    m.insert("rules".into(), Value::Array(rules));
                }
                self.put(&key, next, EventType::Modified);
            }
        }
        self.aggregating = false;
    }

    /// Indexes an object loaded from the data directory (no RV, no event).
    fn load(&mut self, key: ResourceKey, obj: Value) {
        let ns = meta_str(&obj, "namespace").to_string();
        let name = meta_str(&obj, "name").to_string();
        let okey = (key.clone(), ns.clone(), name.clone());
        for o in owner_uids(&obj) {
            self.dependents.entry(o).or_default().insert(okey.clone());
        }
        self.by_uid.insert(meta_str(&obj, "uid").to_string(), okey);
        let stored = Stored::new(&obj);
        self.stored_bytes += stored.counted();
        self.objects.entry(key).or_default().insert((ns, name), stored);
    }

    /// Removes an object for good (DELETED event at a fresh RV), then garbage-collects what it owned.
    fn remove(&mut self, key: &ResourceKey, ns: &str, name: &str, cascade: bool) -> Option<Arc<Value>> {
        let old = self
            .objects
            .get_mut(key)?
            .remove(&(ns.to_string(), name.to_string()))?;
        self.stored_bytes = self.stored_bytes.saturating_sub(old.counted());
        self.rv += 1;
        let mut gone = stored::parse(old.json());
        // Pods are always deleted gracefully on the real server: one removed at once (unscheduled,
        // or a grace period of 0) leaves with a deletionTimestamp and a grace period of 0.
        if key.group.is_empty() && key.plural == "pods" && !is_deleting(&gone) {
            mark_deleting(&mut gone, 0);
        }
        meta_mut(&mut gone).insert("resourceVersion".into(), json!(self.rv.to_string()));
        let gone = Arc::new(gone);
        let uid = meta_str(&gone, "uid").to_string();
        self.by_uid.remove(&uid);
        let okey = (key.clone(), ns.to_string(), name.to_string());
        for o in old.owners() {
            if let Some(set) = self.dependents.get_mut(o) {
                set.remove(&okey);
            }
        }
        if let Some(d) = &self.durable {
            d.record(Op::Delete {
                key: key.clone(),
                ns: ns.to_string(),
                name: name.to_string(),
                rv: self.rv,
            });
        }
        let json: Arc<[u8]> = serde_json::to_vec(&*gone).unwrap_or_default().into();
        self.emit(key, EventType::Deleted, gone.clone(), json, None);
        if is_cluster_role(key) {
            self.aggregate_cluster_roles();
        }
        // An owner deleted in the foreground waits for this dependent: it may go now.
        for o in old.owners() {
            if let Some((k, n, m)) = self.by_uid.get(o).cloned() {
                self.collect_finalizers(&k, &n, &m);
            }
        }
        if cascade {
            self.collect_garbage(&uid);
            if *key == ns_key() {
                self.empty_namespace(name);
            }
        }
        Some(gone)
    }

    /// Background cascade: a dependent goes once none of its owners exists any more.
    fn collect_garbage(&mut self, owner_uid: &str) {
        let deps: Vec<ObjKey> = self
            .dependents
            .remove(owner_uid)
            .map(|s| s.into_iter().collect())
            .unwrap_or_default();
        for (k, ns, name) in deps {
            let Some(stored) = self.stored(&k, &ns, &name) else {
                continue;
            };
            if stored.owners().any(|u| self.by_uid.contains_key(u)) {
                continue;
            }
            let obj = stored.value();
            self.delete_now(&k, &ns, &name, &obj, true);
        }
    }

    /// The garbage collector's turn on an object being deleted with its `orphan` or
    /// `foregroundDeletion` finalizer (`gc.rs`): orphan the dependents, or delete them and wait for
    /// those that block; then drop the finalizer, and the object when it was the last.
    fn collect_finalizers(&mut self, key: &ResourceKey, ns: &str, name: &str) {
        let Some(obj) = self.lookup(key, ns, name) else {
            return;
        };
        let have = finalizers(&obj);
        if !is_deleting(&obj) || !have.iter().any(|f| f == gc::ORPHAN || f == gc::FOREGROUND) {
            return;
        }
        let uid = meta_str(&obj, "uid").to_string();
        if !self.collecting.insert(uid.clone()) {
            return;
        }
        let deps: Vec<ObjKey> = self
            .dependents
            .get(&uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let mut next = have.clone();
        if have.iter().any(|f| f == gc::ORPHAN) {
            for (k, dns, dname) in &deps {
                let orphaned = self.lookup(k, dns, dname).and_then(|d| gc::orphaned(&d, &uid));
                if let Some(d) = orphaned {
                    self.put(k, d, EventType::Modified);
                }
            }
            next.retain(|f| f != gc::ORPHAN);
        } else {
            for (k, dns, dname) in &deps {
                if let Some(d) = self.lookup(k, dns, dname)
                    && !is_deleting(&d)
                {
                    self.delete_dependent(k, dns, dname, &d);
                }
            }
            let blocked = self.dependents.get(&uid).is_some_and(|s| {
                s.iter()
                    .any(|(k, n, m)| self.lookup(k, n, m).is_some_and(|d| gc::blocks(&d, &uid)))
            });
            if !blocked {
                next.retain(|f| f != gc::FOREGROUND);
            }
        }
        self.collecting.remove(&uid);
        // The object may be gone already: a dependent's removal came back here for it.
        let Some(now) = self.lookup(key, ns, name) else {
            return;
        };
        if next == have || finalizers(&now) != have {
            return;
        }
        let grace = now
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if next.is_empty() && grace == 0 {
            self.remove(key, ns, name, true);
        } else {
            self.put(key, gc::with_finalizers(&now, &next), EventType::Modified);
        }
    }

    /// The collector's delete of a dependent of an owner deleted in the foreground: a pod bound to a
    /// node terminates gracefully, anything else as a background delete.
    fn delete_dependent(&mut self, key: &ResourceKey, ns: &str, name: &str, obj: &Arc<Value>) {
        let bound = key.group.is_empty()
            && key.plural == "pods"
            && obj
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
        let grace = obj
            .pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30);
        if bound && grace > 0 {
            let mut marked = (**obj).clone();
            mark_deleting(&mut marked, grace);
            self.put(key, marked, EventType::Modified);
        } else {
            self.delete_now(key, ns, name, obj, true);
        }
    }

    fn empty_namespace(&mut self, ns: &str) {
        let keys: Vec<ResourceKey> = self.objects.keys().cloned().collect();
        for k in keys {
            let names: Vec<String> = self
                .objects
                .get(&k)
                .map(|m| {
                    m.keys()
                        .filter(|(n, _)| n == ns)
                        .map(|(_, name)| name.clone())
                        .collect()
                })
                .unwrap_or_default();
            for name in names {
                self.remove(&k, ns, &name, true);
            }
        }
    }

    /// Refuses a write that would take the stored objects from `before` to `after` bytes past the
    /// quota; a write that does not grow the store always passes (a finalizer removed, a field
    /// cleared: what lets a full store be emptied).
    fn within_quota(&mut self, before: usize, after: usize) -> Result<(), ApiError> {
        if after <= before || self.stored_bytes - before.min(self.stored_bytes) + after <= self.quota_bytes {
            if self.stored_bytes <= self.quota_bytes && self.over_quota {
                self.over_quota = false;
                tracing::info!(
                    stored_bytes = self.stored_bytes,
                    quota_bytes = self.quota_bytes,
                    "storage back under its quota; writes resume"
                );
            }
            return Ok(());
        }
        if !self.over_quota {
            self.over_quota = true;
            tracing::warn!(
                stored_bytes = self.stored_bytes,
                quota_bytes = self.quota_bytes,
                "storage quota reached: writes that grow the store are refused (database space exceeded) until objects are deleted"
            );
        }
        Err(space_exceeded())
    }

    /// Delete honouring finalizers: with finalizers the object only gets a deletionTimestamp.
    fn delete_now(
        &mut self,
        key: &ResourceKey,
        ns: &str,
        name: &str,
        obj: &Arc<Value>,
        cascade: bool,
    ) -> Arc<Value> {
        if finalizers(obj).is_empty() {
            return self.remove(key, ns, name, cascade).unwrap_or_else(|| obj.clone());
        }
        if is_deleting(obj) {
            return obj.clone();
        }
        let mut marked = (**obj).clone();
        mark_deleting(&mut marked, 0);
        self.put(key, marked, EventType::Modified)
    }
}

fn mark_deleting(obj: &mut Value, grace: i64) {
    let m = meta_mut(obj);
    m.insert("deletionTimestamp".into(), json!(meta::now_rfc3339()));
    m.insert("deletionGracePeriodSeconds".into(), json!(grace));
    if let Some(g) = m.get("generation").and_then(Value::as_i64) {
        m.insert("generation".into(), json!(g + 1));
    }
}

fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{rv}|{ns}|{name}"))
}

fn decode_continue(tok: &str) -> Result<(u64, String, String), ApiError> {
    let bad = || {
        ApiError::bad_request(format!(
            "invalid continue token: continue key is not valid: {tok}"
        ))
    };
    // A token that is not base64 is refused in the words of Go's decoder, as kube-apiserver's is.
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(tok)
        .map_err(|e| {
            use base64::DecodeError as E;
            let at = match e {
                E::InvalidByte(at, _) | E::InvalidLastSymbol(at, _) => at,
                E::InvalidLength(n) => n.saturating_sub(1),
                E::InvalidPadding => tok.len().saturating_sub(1),
            };
            ApiError::bad_request(format!(
                "invalid continue token: continue key is not valid: illegal base64 data at input byte {at}"
            ))
        })?;
    let s = String::from_utf8(raw).map_err(|_| bad())?;
    let mut parts = s.splitn(3, '|');
    let rv = parts.next().and_then(|r| r.parse().ok()).ok_or_else(bad)?;
    let ns = parts.next().ok_or_else(bad)?.to_string();
    let name = parts.next().ok_or_else(bad)?.to_string();
    Ok((rv, ns, name))
}

impl Store {
    /// An in-memory store: everything is lost when it is dropped.
    pub fn new(config: StoreConfig, admission: Arc<dyn AdmissionHook>) -> Self {
        Self::build(config, admission, None)
    }

    /// A store kept in `data_dir`: loads what is there (objects, RV counter, uids, timestamps exactly
    /// as written) and records every committed write before the API answers (see `durable.rs`).
    /// Watch history starts empty at the loaded RV, so a client resuming from an older RV gets 410
    /// and relists, as after a real API server's restart.
    pub fn open(
        config: StoreConfig,
        admission: Arc<dyn AdmissionHook>,
        data_dir: &std::path::Path,
    ) -> Result<Self, DurableError> {
        let (d, loaded) = durable::open(data_dir)?;
        Ok(Self::build(config, admission, Some((Arc::new(d), loaded))))
    }

    fn build(
        config: StoreConfig,
        admission: Arc<dyn AdmissionHook>,
        durable: Option<(Arc<Durable>, durable::Loaded)>,
    ) -> Self {
        let (tx, _) = broadcast::channel(4096);
        let (durable, loaded) = match durable {
            Some((d, l)) => (Some(d), Some(l)),
            None => (None, None),
        };
        let mut inner = Inner {
            rv: 0,
            objects: HashMap::new(),
            by_uid: HashMap::new(),
            dependents: HashMap::new(),
            history: VecDeque::new(),
            history_limit: config.history_limit.max(1),
            history_bytes: 0,
            history_byte_limit: config.history_bytes,
            compacted: 0,
            tx,
            durable: durable.clone(),
            collecting: BTreeSet::new(),
            aggregating: false,
            stored_bytes: 0,
            quota_bytes: config.quota_bytes,
            over_quota: false,
        };
        let restored_rv = loaded.as_ref().map_or(0, |l| l.rv);
        if let Some(l) = loaded {
            inner.rv = l.rv;
            inner.compacted = l.rv;
            for (key, obj) in l.objects {
                inner.load(key, obj);
            }
        }
        let (closer, _) = watch::channel(0);
        let store = Store {
            inner: Mutex::new(inner),
            durable,
            restored_rv,
            closer,
            admission,
            faults: Faults::default(),
            cluster_ips_elsewhere: Arc::new(AtomicBool::new(false)),
        };
        store.seed_cluster_roles();
        // A real cluster starts with these namespaces.
        for ns in ["default", "kube-system", "kube-public"] {
            if store.lock().exists(&ns_key(), "", ns) {
                continue;
            }
            let mut obj = json!({"metadata": {"name": ns}});
            let info = super::registry::builtins()
                .into_iter()
                .find(|b| b.plural == "namespaces");
            if let Some(info) = info {
                let _ = meta::prepare_create(&info, &mut obj, None, meta::new_uid(), &meta::now_rfc3339());
                store.lock().put(&ns_key(), obj, EventType::Added);
            }
        }
        store
    }

    /// The ClusterRoles kube-apiserver creates at start (`rbac_bootstrap`), each made when absent, as
    /// its RBAC bootstrap does on every start: one a user deleted comes back, one a user changed is
    /// kept.
    fn seed_cluster_roles(&self) {
        let info = super::registry::builtins()
            .into_iter()
            .find(|b| b.plural == "clusterroles" && b.group == "rbac.authorization.k8s.io");
        let Some(info) = info else { return };
        let key = cluster_role_key();
        let mut inner = self.lock();
        for mut role in super::rbac_bootstrap::bootstrap_roles() {
            let name = role
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if inner.exists(&key, "", &name) {
                continue;
            }
            if meta::prepare_create(&info, &mut role, None, meta::new_uid(), &meta::now_rfc3339()).is_ok() {
                inner.put(&key, role, EventType::Added);
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-written object (writes are single inserts).
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The flag that, once set, leaves Services' ClusterIPs to another allocator (a process
    /// runtime's Service proxy, `logs::Runtimes::register`).
    pub fn cluster_ips_elsewhere(&self) -> Arc<AtomicBool> {
        self.cluster_ips_elsewhere.clone()
    }

    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// The RV the data directory held at start; 0 for an in-memory store or an empty directory.
    pub fn restored_rv(&self) -> u64 {
        self.restored_rv
    }

    /// The database file, with `--data-dir`.
    pub fn data_file(&self) -> Option<&std::path::Path> {
        self.durable.as_deref().map(Durable::file)
    }

    /// Resolves once every change up to `rv` is on disk (at once in memory). What the API waits for
    /// before it answers, so nothing a client sees (a write's result, a read, a watch event, an RV)
    /// can be lost by a crash.
    pub async fn synced(&self, rv: u64) -> Result<(), ApiError> {
        match &self.durable {
            None => Ok(()),
            Some(d) => d.synced(rv).await.map_err(|e| ApiError::internal(e.to_string())),
        }
    }

    /// [`Store::synced`], but waiting through a disk alarm instead of failing (for watches).
    pub async fn persisted(&self, rv: u64) -> Result<(), ApiError> {
        match &self.durable {
            None => Ok(()),
            Some(d) => d
                .persisted(rv)
                .await
                .map_err(|e| ApiError::internal(e.to_string())),
        }
    }

    /// True while the data directory refuses writes (reads are then answered from memory).
    pub fn disk_alarm(&self) -> bool {
        self.durable.as_ref().is_some_and(|d| d.failure().is_some())
    }

    /// The data directory's fault switch, with `--data-dir` (tests).
    pub fn disk_faults(&self) -> Option<&durable::DiskFaults> {
        self.durable.as_deref().map(Durable::disk_faults)
    }

    /// [`Store::synced`] for the current RV: everything committed so far.
    pub async fn synced_now(&self) -> Result<(), ApiError> {
        if self.durable.is_none() {
            return Ok(());
        }
        let rv = self.resource_version();
        self.synced(rv).await
    }

    fn admit(
        &self,
        inner: &Inner,
        op: Operation,
        info: &ResourceInfo,
        new: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        let ns = if info.namespaced {
            job_namespace(inner, meta_str(new, "namespace"))
        } else {
            JobNamespace::default()
        };
        self.admission.admit_in(op, info, new, old, &ns).map_err(|errs| {
            ApiError::invalid(&info.qualified_kind(), meta_str(new, "name"), &errs).details(
                meta_str(new, "name"),
                &info.group,
                &info.kind,
            )
        })
    }

    fn fault(&self, verb: &str, info: &ResourceInfo, name: &str, status: bool) -> Result<(), ApiError> {
        if let Some(e) = self.durable.as_ref().and_then(|d| d.failure()) {
            return Err(ApiError::internal(e.to_string()));
        }
        match self.faults.check_write(verb, &info.plural, name, status) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn not_found(info: &ResourceInfo, name: &str) -> ApiError {
        ApiError::not_found(&info.qualified_plural(), name).details(name, &info.group, &info.plural)
    }

    /// Rewrites apiVersion for the version being served (all versions share storage, no conversion).
    pub fn at_version(info: &ResourceInfo, obj: Arc<Value>) -> Arc<Value> {
        if let Some(converted) = super::event_fields::to_version(&info.group, &info.plural, &obj) {
            return Arc::new(converted);
        }
        let want = info.api_version();
        if obj.get("apiVersion").and_then(Value::as_str) == Some(want.as_str()) {
            return obj;
        }
        let mut o = (*obj).clone();
        if let Some(m) = o.as_object_mut() {
            m.insert("apiVersion".into(), json!(want));
        }
        Arc::new(o)
    }

    /// A create by the server's own controllers (`managedFields` name [`INTERNAL_MANAGER`]).
    pub fn create(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        obj: Value,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        self.create_by(info, ns, obj, dry_run, Writer::new(INTERNAL_MANAGER, false))
    }

    /// A create by `w`, who becomes the owner of the fields it sets (`managed_fields.rs`).
    pub fn create_by(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        obj: Value,
        dry_run: bool,
        w: Writer<'_>,
    ) -> Result<Arc<Value>, ApiError> {
        let mut obj = obj;
        prune::prune(info, &mut obj);
        let fields = managed_fields::update(info, None, &obj, w, &meta::now_rfc3339());
        let mut inner = self.lock();
        self.create_locked(&mut inner, info, ns, obj, dry_run, fields)
    }

    fn create_locked(
        &self,
        inner: &mut Inner,
        info: &ResourceInfo,
        ns: Option<&str>,
        mut obj: Value,
        dry_run: bool,
        fields: Option<Value>,
    ) -> Result<Arc<Value>, ApiError> {
        let ns = if info.namespaced {
            Some(ns.unwrap_or("default"))
        } else {
            None
        };
        // Before `stringData` is merged into `data`: the body as the client sent it.
        super::refusals::string_maps(info, &obj)?;
        super::refusals::quantities(info, &obj)?;
        meta::prepare_create(info, &mut obj, ns, meta::new_uid(), &meta::now_rfc3339())?;
        let key = info.key();
        let nsk = ns.unwrap_or("").to_string();
        if meta_str(&obj, "name").is_empty() {
            let prefix = meta_str(&obj, "generateName").to_string();
            if prefix.is_empty() {
                let fe = crate::api::validation::FieldError::required(
                    "metadata.name",
                    "name or generateName is required",
                );
                return Err(ApiError::invalid(&info.qualified_kind(), "", &[fe]).details(
                    "",
                    &info.group,
                    &info.kind,
                ));
            }
            let name = loop {
                let candidate = format!("{prefix}{}", meta::name_suffix());
                if !inner.exists(&key, &nsk, &candidate) {
                    break candidate;
                }
            };
            meta_mut(&mut obj).insert("name".into(), json!(name));
            // What waited for the name (a Job's generated labels carry it).
            super::defaults::apply(info, &mut obj, true);
        }
        if let Some(f) = fields {
            meta_mut(&mut obj).insert("managedFields".into(), f);
        }
        let name = meta_str(&obj, "name").to_string();
        if info.group.is_empty() && info.plural == "pods" {
            let pcs = priority_class_key();
            let classes: Vec<(&str, Arc<Value>)> = inner
                .objects
                .get(&pcs)
                .into_iter()
                .flatten()
                .map(|((_, n), v)| (n.as_str(), v.value()))
                .collect();
            super::priority::on_create(
                &mut obj,
                |n| classes.iter().find(|(c, _)| *c == n).map(|(_, v)| &**v),
                classes.iter().map(|(_, v)| &**v),
            )?;
        }
        invalid_meta(info, &obj, None)?;
        if is_service(info) {
            let taken = inner.services_taken(None);
            let pick = !self.cluster_ips_elsewhere.load(Ordering::Relaxed);
            service_alloc::on_create(&mut obj, &taken, pick)
                .map_err(|e| service_alloc::refused(&name, &e))?;
        }
        self.fault("create", info, &name, false)?;
        if let Some(ns) = ns
            && !inner.exists(&ns_key(), "", ns)
        {
            return Err(ApiError::not_found("namespaces", ns).details(ns, "", "namespaces"));
        }
        if inner.exists(&key, &nsk, &name) {
            return Err(ApiError::already_exists(&info.qualified_plural(), &name).details(
                &name,
                &info.group,
                &info.plural,
            ));
        }
        self.admit(inner, Operation::Create, info, &mut obj, None)?;
        sized(info, &obj)?;
        inner.within_quota(0, held_bytes(&obj))?;
        if dry_run {
            return Ok(Arc::new(obj));
        }
        let owners = owner_uids(&obj);
        let created = inner.put(&key, obj, EventType::Added);
        // Kubernetes' garbage collector removes a dependent none of whose owners exists, also one made
        // after its owner went (a controller acting on a stale cache): the create succeeds, then it goes.
        if !owners.is_empty() && !owners.iter().any(|u| inner.by_uid.contains_key(u)) {
            inner.delete_now(&key, &nsk, &name, &created, true);
        }
        Ok(created)
    }

    pub fn get(&self, info: &ResourceInfo, ns: Option<&str>, name: &str) -> Result<Arc<Value>, ApiError> {
        let inner = self.lock();
        let ns = if info.namespaced {
            ns.unwrap_or("default")
        } else {
            ""
        };
        inner
            .lookup(&info.key(), ns, name)
            .ok_or_else(|| Self::not_found(info, name))
    }

    /// `ns = None` lists across namespaces (or a cluster-scoped resource).
    pub fn list(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ListResult, ApiError> {
        let inner = self.lock();
        let (rv, after) = match &opts.continue_token {
            Some(t) if !t.is_empty() => {
                let (rv, ns, name) = decode_continue(t)?;
                (rv, Some((ns, name)))
            }
            _ => (inner.rv, None),
        };
        let ns = if info.namespaced { ns } else { None };
        // Selected under the lock (labels from the index, fields from the parsed object); each item
        // is its JSON and, when the field selector parsed it, the object, else parsed after the lock.
        type Picked = (Arc<[u8]>, Option<Arc<Value>>);
        let mut picked: Vec<Picked> = Vec::new();
        let mut remaining = 0usize;
        let mut more = false;
        let mut last: Option<(String, String)> = None;
        let by_labels = !opts.labels.selects_all();
        let by_fields = !opts.fields.0.is_empty();
        if let Some(m) = inner.objects.get(&info.key()) {
            type Entries<'a> = Box<dyn Iterator<Item = (&'a (String, String), &'a Stored)> + 'a>;
            let range: Entries<'_> = match &after {
                Some(a) => {
                    Box::new(m.range((std::ops::Bound::Excluded(a.clone()), std::ops::Bound::Unbounded)))
                }
                None => Box::new(m.iter()),
            };
            for ((ons, oname), obj) in range {
                if ns.is_some_and(|n| n != ons) {
                    continue;
                }
                let full = opts.limit.is_some_and(|l| l > 0 && picked.len() >= l);
                let mut parsed = None;
                let selected = (!by_labels || opts.labels.matches_labels(&obj.labels()))
                    && (!by_fields || opts.fields.matches(parsed.insert(obj.value())));
                // Once the page is full, kube-apiserver's storage hands out a continue token while
                // any object is left unscanned, whether or not it matches the selectors.
                if full {
                    more = true;
                    remaining += usize::from(selected);
                    continue;
                }
                if !selected {
                    continue;
                }
                last = Some((ons.clone(), oname.clone()));
                picked.push((obj.json().clone(), parsed));
            }
        }
        drop(inner);
        let items = picked
            .into_iter()
            .map(|(json, parsed)| parsed.unwrap_or_else(|| Arc::new(stored::parse(&json))))
            .collect();
        let continue_token = if more {
            last.map(|(n, name)| encode_continue(rv, &n, &name))
        } else {
            None
        };
        Ok(ListResult {
            items,
            rv,
            continue_token,
            remaining,
        })
    }

    /// An update by the server's own controllers (`managedFields` name [`INTERNAL_MANAGER`]).
    pub fn update(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        obj: Value,
        status: bool,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        self.update_by(
            info,
            ns,
            name,
            obj,
            dry_run,
            Writer::new(INTERNAL_MANAGER, status),
        )
    }

    /// PUT. A stale `metadata.resourceVersion` is 409; CRDs require one, built-in kinds allow none.
    pub fn update_by(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        obj: Value,
        dry_run: bool,
        w: Writer<'_>,
    ) -> Result<Arc<Value>, ApiError> {
        let status = w.status;
        let mut inner = self.lock();
        let ns = if info.namespaced {
            ns.unwrap_or("default")
        } else {
            ""
        };
        let body_name = meta_str(&obj, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        self.fault("update", info, name, status)?;
        let Some(old) = inner.lookup(&info.key(), ns, name) else {
            return Err(Self::not_found(info, name));
        };
        meta::check_identity(info, &old, &obj)?;
        let rv = meta_str(&obj, "resourceVersion");
        if rv.is_empty() && info.is_crd {
            let fe = crate::api::validation::FieldError::invalid(
                "metadata.resourceVersion",
                "must be specified for an update",
            );
            return Err(ApiError::invalid(&info.qualified_kind(), name, &[fe]).details(
                name,
                &info.group,
                &info.kind,
            ));
        }
        if !rv.is_empty() && rv != meta_str(&old, "resourceVersion") {
            return Err(ApiError::conflict(&info.qualified_plural(), name).details(
                name,
                &info.group,
                &info.plural,
            ));
        }
        let mut obj = obj;
        prune::prune(info, &mut obj);
        let fields = managed_fields::update(info, Some(&old), &obj, w, &meta::now_rfc3339());
        self.commit_update(&mut inner, info, &old, obj, status, dry_run, fields)
    }

    #[allow(clippy::too_many_arguments)]
    fn commit_update(
        &self,
        inner: &mut Inner,
        info: &ResourceInfo,
        old: &Arc<Value>,
        new: Value,
        status: bool,
        dry_run: bool,
        fields: Option<Value>,
    ) -> Result<Arc<Value>, ApiError> {
        super::refusals::string_maps(info, &new)?;
        super::refusals::quantities(info, &new)?;
        let mut next = meta::prepare_update(info, old, new, status);
        if !status && is_service(info) {
            let taken = inner.services_taken(Some((meta_str(old, "namespace"), meta_str(old, "name"))));
            service_alloc::on_update(old, &mut next, &taken)
                .map_err(|e| service_alloc::refused(meta_str(old, "name"), &e))?;
        }
        if let Some(f) = fields {
            meta_mut(&mut next).insert("managedFields".into(), f);
        }
        if !status && info.group.is_empty() && info.plural == "pods" {
            super::priority::on_update(&mut next, old);
        }
        if !status {
            invalid_meta(info, &next, Some(old))?;
        }
        let op = if status {
            Operation::UpdateStatus
        } else {
            Operation::Update
        };
        self.admit(inner, op, info, &mut next, Some(old))?;
        if managed_fields::same_but_times(&next, old) {
            return Ok(old.clone());
        }
        sized(info, &next)?;
        let before = inner
            .stored(&info.key(), meta_str(old, "namespace"), meta_str(old, "name"))
            .map_or(0, Stored::counted);
        inner.within_quota(before, held_bytes(&next))?;
        if dry_run {
            // Nothing was written: the answer carries the stored version, as kube-apiserver's does.
            meta_mut(&mut next).insert("resourceVersion".into(), json!(meta_str(old, "resourceVersion")));
            return Ok(Arc::new(next));
        }
        let key = info.key();
        let (ns, name) = (
            meta_str(old, "namespace").to_string(),
            meta_str(old, "name").to_string(),
        );
        let grace = next
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if is_deleting(&next) && finalizers(&next).is_empty() && grace == 0 {
            // The last finalizer went: the pending deletion completes. The writer gets the object it
            // sent, as `deleteWithoutFinalizers` answers; the DELETED event carries the stored one.
            inner.remove(&key, &ns, &name, true);
            return Ok(Arc::new(next));
        }
        Ok(inner.put(&key, next, EventType::Modified))
    }

    /// PATCH of any kind. Apply creates a missing object. Returns (object, created).
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        kind: PatchKind,
        body: Value,
        dry_run: bool,
        w: Writer<'_>,
    ) -> Result<(Arc<Value>, bool), ApiError> {
        let status = w.status;
        let now = meta::now_rfc3339();
        let mut inner = self.lock();
        let nsk = if info.namespaced {
            ns.unwrap_or("default")
        } else {
            ""
        };
        if kind == PatchKind::Strategic && info.is_crd {
            return Err(ApiError::unsupported_media(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        if kind != PatchKind::Json && !body.is_object() {
            return Err(ApiError::bad_request(format!(
                "the body of a {} patch must be a JSON object, not {}",
                kind.as_str(),
                json_type(&body)
            )));
        }
        if kind == PatchKind::Apply {
            let body_name = meta_str(&body, "name");
            if !body_name.is_empty() && body_name != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({body_name}) does not match the name on the URL ({name})"
                )));
            }
        }
        self.fault("patch", info, name, status)?;
        // An applied configuration owns only the fields that are kept.
        let mut body = body;
        if kind == PatchKind::Apply {
            prune::prune_applied(info, &mut body);
        }
        let old = match inner.lookup(&info.key(), nsk, name) {
            Some(o) => o,
            None if kind == PatchKind::Apply && !status => {
                let mut obj = managed_fields::apply(info, None, &body, w, &now)?;
                meta_mut(&mut obj).insert("name".into(), json!(name));
                let fields = meta_mut(&mut obj).remove("managedFields");
                let created = self.create_locked(&mut inner, info, ns, obj, dry_run, fields)?;
                return Ok((created, true));
            }
            None => return Err(Self::not_found(info, name)),
        };
        let mut doc = (*old).clone();
        match kind {
            PatchKind::Json => patch::json_patch(&mut doc, &body).map_err(patch_refused)?,
            PatchKind::Merge => patch::merge_patch(&mut doc, &body),
            PatchKind::Strategic => patch::strategic_merge(&mut doc, &body).map_err(patch_refused)?,
            PatchKind::Apply => doc = managed_fields::apply(info, Some(&old), &body, w, &now)?,
        }
        // Merge-type patches nest no deeper than the object or the body, both checked already; this
        // keeps the bound true whatever a patch type's rules become (README "Limits").
        if !super::limits::within_depth(&doc) {
            return Err(patch_refused(patch::PatchError::TooDeep));
        }
        // The JSON and merge patch handler decodes the patched object before anything else.
        if matches!(kind, PatchKind::Json | PatchKind::Merge)
            && let Err(e) = super::refusals::string_maps_decoded(info, &doc)
        {
            let patched = super::field_validation::go_patched_object(
                &doc,
                match kind {
                    PatchKind::Json => body.as_array().into_iter().flatten().any(|op| {
                        ["path", "from"].iter().any(|f| {
                            op.get(*f)
                                .and_then(Value::as_str)
                                .is_some_and(|p| p.starts_with("/metadata"))
                        })
                    }),
                    _ => body.get("metadata").is_some(),
                },
            );
            return Err(super::field_validation::patch_decode_refused(&patched, &e));
        }
        // An applied configuration's nulls stay for validation to judge, as on the real server.
        if kind == PatchKind::Apply {
            prune::prune_applied(info, &mut doc);
        } else {
            prune::prune(info, &mut doc);
        }
        meta::check_identity(info, &old, &doc)?;
        // A resourceVersion written by the patch is a precondition, as on the real server.
        if meta_str(&doc, "resourceVersion") != meta_str(&old, "resourceVersion") {
            return Err(ApiError::conflict(&info.qualified_plural(), name).details(
                name,
                &info.group,
                &info.plural,
            ));
        }
        if meta_str(&doc, "name") != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta_str(&doc, "name")
            )));
        }
        let fields = match kind {
            PatchKind::Apply => meta_mut(&mut doc).remove("managedFields"),
            _ => managed_fields::update(info, Some(&old), &doc, w, &now),
        };
        Ok((
            self.commit_update(&mut inner, info, &old, doc, status, dry_run, fields)?,
            false,
        ))
    }

    pub fn delete(
        &self,
        info: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Arc<Value>, ApiError> {
        let mut inner = self.lock();
        let nsk = if info.namespaced {
            ns.unwrap_or("default")
        } else {
            ""
        };
        self.fault("delete", info, name, false)?;
        let key = info.key();
        let Some(obj) = inner.lookup(&key, nsk, name) else {
            return Err(Self::not_found(info, name));
        };
        Self::check_preconditions(info, name, &obj, opts)?;
        if key == ns_key() && IMMORTAL_NAMESPACES.contains(&name) {
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!("namespaces {name:?} is forbidden: this namespace may not be deleted"),
            )
            .details(name, "", "namespaces"));
        }
        if opts.dry_run {
            return Ok(obj);
        }
        let cascade = opts.propagation.as_deref() != Some("Orphan");
        // The garbage collector's finalizers as the delete asks (`orphan`, `foregroundDeletion`): the
        // object waits on them, and the collector's steps run once they are stored.
        let obj = match gc::finalizers_after_delete(info, opts.asked(), &finalizers(&obj)) {
            Some(next) if is_deleting(&obj) => {
                let out = inner.put(&key, gc::with_finalizers(&obj, &next), EventType::Modified);
                inner.collect_finalizers(&key, nsk, name);
                return Ok(out);
            }
            Some(next) => Arc::new(gc::with_finalizers(&obj, &next)),
            None => obj,
        };
        let out = self.delete_stored(&mut inner, info, nsk, name, obj, opts, cascade);
        inner.collect_finalizers(&key, nsk, name);
        Ok(out)
    }

    /// A delete once its finalizers are decided: a pod bound to a node terminates gracefully,
    /// anything else goes now or waits on its finalizers.
    #[allow(clippy::too_many_arguments)]
    fn delete_stored(
        &self,
        inner: &mut Inner,
        info: &ResourceInfo,
        nsk: &str,
        name: &str,
        obj: Arc<Value>,
        opts: &DeleteOptions,
        cascade: bool,
    ) -> Arc<Value> {
        let key = info.key();
        // A pod bound to a node terminates gracefully: the node agent removes it.
        if info.plural == "pods"
            && !obj
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
        {
            let grace = opts
                .grace_period_seconds
                .or_else(|| {
                    obj.pointer("/spec/terminationGracePeriodSeconds")
                        .and_then(Value::as_i64)
                })
                .unwrap_or(30);
            if grace > 0 && !is_deleting(&obj) {
                let mut marked = (*obj).clone();
                mark_deleting(&mut marked, grace);
                return inner.put(&key, marked, EventType::Modified);
            }
            if grace == 0 && finalizers(&obj).is_empty() {
                return inner.remove(&key, nsk, name, cascade).unwrap_or(obj);
            }
        }
        inner.delete_now(&key, nsk, name, &obj, cascade)
    }

    /// The real server's delete preconditions: a mismatch is a 409 Conflict naming both values.
    fn check_preconditions(
        info: &ResourceInfo,
        name: &str,
        obj: &Value,
        opts: &DeleteOptions,
    ) -> Result<(), ApiError> {
        let checks = [
            ("UID", "uid", &opts.uid, "deleted and then recreated"),
            (
                "ResourceVersion",
                "resourceVersion",
                &opts.resource_version,
                "modified",
            ),
        ];
        for (label, field, want, why) in checks {
            let Some(want) = want else { continue };
            let have = meta_str(obj, field);
            if want != have {
                // kube-apiserver's wording, naming the kind (its storage layer's precondition check).
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!(
                        "Operation cannot be fulfilled on {} \"{name}\": the {label} in the precondition ({want}) does not match the {label} in record ({have}). The object might have been {why}",
                        info.qualified_kind()
                    ),
                )
                .details(name, &info.group, &info.kind));
            }
        }
        Ok(())
    }

    pub fn watch(&self, key: &ResourceKey, from: WatchFrom) -> Result<WatchStart, ApiError> {
        let inner = self.lock();
        let live = inner.tx.subscribe();
        let closed = self.closer.subscribe();
        match from {
            WatchFrom::Current => {
                let current: Vec<Arc<[u8]>> = inner
                    .objects
                    .get(key)
                    .map(|m| m.values().map(|o| o.json().clone()).collect())
                    .unwrap_or_default();
                let rv = inner.rv;
                drop(inner);
                let initial = current.iter().map(|j| Arc::new(stored::parse(j))).collect();
                Ok(WatchStart {
                    initial,
                    replay: Vec::new(),
                    live,
                    rv,
                    closed,
                })
            }
            WatchFrom::Rv(rv) => {
                let replay = Self::since(&inner, key, rv)?;
                Ok(WatchStart {
                    initial: Vec::new(),
                    replay,
                    live,
                    rv: inner.rv,
                    closed,
                })
            }
        }
    }

    fn since(inner: &Inner, key: &ResourceKey, rv: u64) -> Result<Vec<Arc<WatchEvent>>, ApiError> {
        if rv < inner.compacted {
            return Err(ApiError::expired(format!(
                "too old resource version: {rv} ({})",
                inner.compacted + 1
            )));
        }
        let start = inner.history.partition_point(|e| e.rv <= rv);
        Ok(inner
            .history
            .range(start..)
            .filter(|e| e.key == *key)
            .map(Retained::event)
            .collect())
    }

    /// Retained events newer than `rv` (a watch that fell behind the live channel catches up here).
    pub fn events_since(&self, key: &ResourceKey, rv: u64) -> Result<Vec<Arc<WatchEvent>>, ApiError> {
        Self::since(&self.lock(), key, rv)
    }

    /// Fault: forget all history, so any watch resuming from an older RV gets 410 Expired.
    pub fn compact(&self) {
        let mut inner = self.lock();
        // Its slots freed too (what `tests/embedded_memory.rs` measures the history by).
        inner.history = VecDeque::new();
        inner.history_bytes = 0;
        inner.compacted = inner.rv;
    }

    /// Fault: advance the RV (as writes elsewhere in a real cluster would) and compact, so every RV a
    /// client holds is expired: its next watch resume gets a 410 ERROR event and must relist.
    pub fn expire_all(&self) {
        let mut inner = self.lock();
        inner.rv += 1;
        if let Some(d) = &inner.durable {
            d.record(Op::Rv(inner.rv));
        }
        inner.history.clear();
        inner.history_bytes = 0;
        inner.compacted = inner.rv;
    }

    /// Fault: end every open watch stream (clients resume from their last RV).
    pub fn close_watches(&self) {
        self.closer.send_modify(|g| *g += 1);
    }

    /// Number of stored objects and their total compact-JSON size in bytes.
    /// Events retained for watch replay, and their objects' size as compact JSON.
    pub fn history_size(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.history.len(), inner.history_bytes)
    }

    /// The stored objects at their parsed size ([`held_bytes`]), as the storage quota counts them, and
    /// the quota.
    pub fn quota_usage(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.stored_bytes, inner.quota_bytes)
    }

    pub fn stored_size(&self) -> (usize, usize) {
        let inner = self.lock();
        let mut n = 0;
        let mut bytes = 0;
        for m in inner.objects.values() {
            for o in m.values() {
                n += 1;
                bytes += o.json().len();
            }
        }
        (n, bytes)
    }
}
