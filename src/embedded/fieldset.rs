//! Field sets as structured-merge-diff (the library kube-apiserver's server-side apply is built on)
//! makes them: a trie of path elements (`f:` a field, `k:` an associative-list item by its keys, `v:` a
//! set item by its value, `i:` an item by index), serialised as `FieldsV1`. With them: the set an
//! applied config names (`ToFieldSet`), the difference between two objects (`Compare`: added,
//! modified, removed), an applied config merged into a live object (`Merge`) and paths removed from
//! an object (`RemoveItems`).
//!
//! Which lists are associative and by which keys comes from a CRD's structural schema
//! (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`, key defaults) and,
//! for built-in kinds and every object's `metadata`, from the table in [`builtin_list`] (the
//! `+listType=map` markers of the Kubernetes types the server serves). Lists the schema does not mark
//! are atomic, as in kube-apiserver; a list whose items lack a key is treated as atomic.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// One step of a path, ordered as structured-merge-diff orders them (fields, keys, values, indexes).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pe {
    Field(String),
    /// The item's key fields as a JSON object, its keys sorted.
    Key(String),
    /// The item's value as JSON.
    Value(String),
    Index(usize),
}

impl Pe {
    fn encode(&self) -> String {
        match self {
            Pe::Field(f) => format!("f:{f}"),
            Pe::Key(k) => format!("k:{k}"),
            Pe::Value(v) => format!("v:{v}"),
            Pe::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(s: &str) -> Result<Pe, String> {
        let bad = || format!("invalid path element {s:?}");
        let (kind, rest) = s.split_once(':').ok_or_else(bad)?;
        match kind {
            "f" => Ok(Pe::Field(rest.to_string())),
            "k" => match serde_json::from_str::<Value>(rest) {
                Ok(Value::Object(m)) if !m.is_empty() => {
                    let sorted: BTreeMap<String, Value> = m.into_iter().collect();
                    Ok(Pe::Key(canonical(&sorted)))
                }
                _ => Err(bad()),
            },
            "v" => serde_json::from_str::<Value>(rest)
                .map(|v| Pe::Value(v.to_string()))
                .map_err(|_| bad()),
            "i" => rest.parse().map(Pe::Index).map_err(|_| bad()),
            _ => Err(bad()),
        }
    }
}

/// `.data.a`, `.spec.containers[name="c"].image`, `.metadata.finalizers[="f"]`, `[0]`: how
/// structured-merge-diff prints a path (conflict messages name fields so).
pub fn path_string(path: &[Pe]) -> String {
    let mut out = String::new();
    for pe in path {
        match pe {
            Pe::Field(f) => {
                out.push('.');
                out.push_str(f);
            }
            Pe::Key(k) => {
                let parts: Vec<String> = match serde_json::from_str::<Map<String, Value>>(k) {
                    Ok(m) => m.iter().map(|(n, v)| format!("{n}={v}")).collect(),
                    Err(_) => vec![k.clone()],
                };
                out.push_str(&format!("[{}]", parts.join(",")));
            }
            Pe::Value(v) => out.push_str(&format!("[={v}]")),
            Pe::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

fn canonical(keys: &BTreeMap<String, Value>) -> String {
    let m: Map<String, Value> = keys.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    Value::Object(m).to_string()
}

/// A set of paths: `members` end here, `children` go on. Children are never empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Set {
    members: BTreeSet<Pe>,
    children: BTreeMap<Pe, Set>,
}

impl Set {
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    pub fn insert(&mut self, path: &[Pe]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    pub fn has(&self, path: &[Pe]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, c) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(c),
                None => c.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// The members of `self` not in `other` (a member of `other` does not remove `self`'s paths below it).
    pub fn difference(&self, other: &Set) -> Set {
        let mut out = Set {
            members: self.members.difference(&other.members).cloned().collect(),
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            let d = match other.children.get(pe) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(pe.clone(), d);
            }
        }
        out
    }

    pub fn intersection(&self, other: &Set) -> Set {
        let mut out = Set {
            members: self.members.intersection(&other.members).cloned().collect(),
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let i = c.intersection(o);
                if !i.is_empty() {
                    out.children.insert(pe.clone(), i);
                }
            }
        }
        out
    }

    /// Every path of the set and every prefix of one, all as members (what pruning compares).
    pub fn with_prefixes(&self) -> Set {
        let mut out = Set {
            members: self.members.clone(),
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            out.members.insert(pe.clone());
            out.children.insert(pe.clone(), c.with_prefixes());
        }
        out
    }

    /// The set without the top-level field `field` and anything under it.
    pub fn without_top(&self, field: &str) -> Set {
        let pe = Pe::Field(field.to_string());
        let mut out = self.clone();
        out.members.remove(&pe);
        out.children.remove(&pe);
        out
    }

    /// Only the top-level field `field` and what is under it.
    pub fn only_top(&self, field: &str) -> Set {
        let pe = Pe::Field(field.to_string());
        let mut out = Set::default();
        if self.members.contains(&pe) {
            out.members.insert(pe.clone());
        }
        if let Some(c) = self.children.get(&pe) {
            out.children.insert(pe, c.clone());
        }
        out
    }

    /// The paths, each level's members before the paths under its children (structured-merge-diff's
    /// iteration order).
    pub fn paths(&self) -> Vec<Vec<Pe>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<Pe>, out: &mut Vec<Vec<Pe>>) {
        for m in &self.members {
            let mut p = prefix.clone();
            p.push(m.clone());
            out.push(p);
        }
        for (pe, c) in &self.children {
            prefix.push(pe.clone());
            c.collect(prefix, out);
            prefix.pop();
        }
    }

    /// `FieldsV1`: `{"f:data": {".": {}, "f:a": {}}}`, keys in structured-merge-diff's order.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.emit(false))
    }

    fn emit(&self, include_self: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if include_self {
            out.insert(".".into(), Value::Object(Map::new()));
        }
        let all: BTreeSet<&Pe> = self.members.iter().chain(self.children.keys()).collect();
        for pe in all {
            let v = match self.children.get(pe) {
                Some(c) => c.emit(self.members.contains(pe)),
                None => Map::new(),
            };
            out.insert(pe.encode(), Value::Object(v));
        }
        out
    }

    pub fn from_fields_v1(v: &Value) -> Result<Set, String> {
        let Value::Object(m) = v else {
            return Err("fieldsV1 must be an object".into());
        };
        let mut out = Set::default();
        for (k, child) in m {
            if k == "." {
                continue;
            }
            let pe = Pe::decode(k)?;
            let Value::Object(cm) = child else {
                return Err(format!("the value of {k:?} must be an object"));
            };
            if cm.is_empty() || cm.contains_key(".") {
                out.members.insert(pe.clone());
            }
            let sub = Set::from_fields_v1(child)?;
            if !sub.is_empty() {
                out.children.insert(pe, sub);
            }
        }
        Ok(out)
    }
}

/// How a list's items are told apart.
#[derive(Clone, Debug, PartialEq)]
pub enum ListKind {
    Atomic,
    Set,
    /// Key fields, each with its default when an item leaves it out.
    Map(Vec<(String, Option<Value>)>),
}

/// Where a value sits, for the rules above: a node of a CRD's schema (`None`: no schema, every map
/// granular, every list atomic) or a field of a built-in kind (its kind and field name).
#[derive(Clone, Copy, Debug)]
pub enum Shape<'a> {
    Crd(Option<&'a Value>),
    Builtin(&'a str, &'a str),
}

/// The `+listType=map`/`set` lists of the built-in kinds the server serves and of ObjectMeta, by
/// field name (the names do not collide across those kinds, ports aside).
pub fn builtin_list(kind: &str, field: &str) -> ListKind {
    let keys = |ks: &[&str]| ListKind::Map(ks.iter().map(|k| (k.to_string(), None)).collect());
    let tcp = || Some(Value::String("TCP".into()));
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "schedulingGates"
        | "resourceClaims"
        | "claims"
        | "secrets"
        | "resourceClaimStatuses" => keys(&["name"]),
        "ports" if kind == "Service" => {
            ListKind::Map(vec![("port".into(), None), ("protocol".into(), tcp())])
        }
        "ports" if kind == "Pod" || kind == "Job" || kind == "Deployment" => {
            ListKind::Map(vec![("containerPort".into(), None), ("protocol".into(), tcp())])
        }
        "volumeMounts" => keys(&["mountPath"]),
        "volumeDevices" => keys(&["devicePath"]),
        "hostAliases" | "podIPs" | "hostIPs" => keys(&["ip"]),
        "topologySpreadConstraints" => keys(&["topologyKey", "whenUnsatisfiable"]),
        "conditions" => keys(&["type"]),
        "ownerReferences" => keys(&["uid"]),
        "finalizers" => ListKind::Set,
        _ => ListKind::Atomic,
    }
}

impl<'a> Shape<'a> {
    /// The shape of an object of `kind`, given its CRD schema if it has one.
    pub fn root(kind: &'a str, schema: Option<&'a Value>) -> Shape<'a> {
        match schema {
            Some(s) => Shape::Crd(Some(s)),
            None => Shape::Builtin(kind, ""),
        }
    }

    /// The child at `key` of an object, and whether it is a declared field (a struct's) rather than a
    /// map entry. `metadata` of a CRD object is ObjectMeta (`kind` names the object's kind).
    fn child(&self, key: &str, top: bool, kind: &'a str) -> (Shape<'a>, bool) {
        match self {
            Shape::Builtin(k, _) => (Shape::Builtin(k, key_static(key)), true),
            Shape::Crd(_) if top && key == "metadata" => (Shape::Builtin(kind, "metadata"), true),
            Shape::Crd(None) => (Shape::Crd(None), false),
            Shape::Crd(Some(s)) => {
                if let Some(p) = s.get("properties").and_then(|p| p.get(key)) {
                    return (Shape::Crd(Some(p)), true);
                }
                match s.get("additionalProperties") {
                    Some(ap @ Value::Object(_)) => (Shape::Crd(Some(ap)), false),
                    _ => (Shape::Crd(None), false),
                }
            }
        }
    }

    fn items(&self) -> Shape<'a> {
        match self {
            Shape::Builtin(k, _) => Shape::Builtin(k, ""),
            Shape::Crd(Some(s)) => Shape::Crd(s.get("items")),
            Shape::Crd(None) => Shape::Crd(None),
        }
    }

    fn atomic_map(&self) -> bool {
        match self {
            Shape::Crd(Some(s)) => s.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"),
            // `+mapType=atomic` (a Service's selector, a pod's nodeSelector) and `+structType=atomic`
            // (LabelSelector) of the built-in kinds.
            Shape::Builtin(_, f) => BUILTIN_ATOMIC.contains(f),
            Shape::Crd(None) => false,
        }
    }

    fn list_kind(&self) -> ListKind {
        match self {
            Shape::Builtin(k, f) => builtin_list(k, f),
            Shape::Crd(None) => ListKind::Atomic,
            Shape::Crd(Some(s)) => match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => ListKind::Set,
                Some("map") => {
                    let props = s.get("items").and_then(|i| i.get("properties"));
                    let keys = s
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|ks| {
                            ks.iter()
                                .filter_map(Value::as_str)
                                .map(|k| {
                                    let default = props
                                        .and_then(|p| p.get(k))
                                        .and_then(|p| p.get("default"))
                                        .cloned();
                                    (k.to_string(), default)
                                })
                                .collect::<Vec<_>>()
                        })
                        .unwrap_or_default();
                    if keys.is_empty() {
                        ListKind::Atomic
                    } else {
                        ListKind::Map(keys)
                    }
                }
                _ => ListKind::Atomic,
            },
        }
    }
}

const BUILTIN_ATOMIC: &[&str] = &[
    "selector",
    "nodeSelector",
    "labelSelector",
    "namespaceSelector",
    "podSelector",
];

/// Built-in field names are matched against a fixed table: keep the `&'static str` the table needs
/// without allocating (names outside the table cannot be list fields that matter).
fn key_static(key: &str) -> &'static str {
    const NAMES: &[&str] = &[
        "containers",
        "initContainers",
        "ephemeralContainers",
        "volumes",
        "env",
        "imagePullSecrets",
        "schedulingGates",
        "resourceClaims",
        "claims",
        "secrets",
        "resourceClaimStatuses",
        "ports",
        "volumeMounts",
        "volumeDevices",
        "hostAliases",
        "podIPs",
        "hostIPs",
        "topologySpreadConstraints",
        "conditions",
        "ownerReferences",
        "finalizers",
        "metadata",
    ];
    NAMES
        .iter()
        .chain(BUILTIN_ATOMIC)
        .find(|n| **n == key)
        .copied()
        .unwrap_or("")
}

/// The path elements of a granular list's items, or `None` when the list must be handled as atomic
/// (an item without a key, a duplicate, a non-scalar set item).
fn item_pes(list: &[Value], kind: &ListKind) -> Option<Vec<Pe>> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(list.len());
    for item in list {
        let pe = match kind {
            ListKind::Atomic => return None,
            ListKind::Set => {
                if item.is_object() || item.is_array() {
                    return None;
                }
                Pe::Value(item.to_string())
            }
            ListKind::Map(keys) => {
                let o = item.as_object()?;
                let mut k = BTreeMap::new();
                for (name, default) in keys {
                    match o.get(name).or(default.as_ref()) {
                        Some(v) if !v.is_null() => {
                            k.insert(name.clone(), v.clone());
                        }
                        _ => return None,
                    }
                }
                Pe::Key(canonical(&k))
            }
        };
        if !seen.insert(pe.clone()) {
            return None;
        }
        out.push(pe);
    }
    Some(out)
}

/// Context a walk carries: the object's kind (for built-in list keys under a CRD's metadata).
#[derive(Clone, Copy)]
pub struct Walk<'a> {
    pub kind: &'a str,
}

impl<'a> Walk<'a> {
    /// The fields an applied config sets (`ToFieldSet`).
    pub fn to_set(&self, v: &Value, shape: Shape<'a>) -> Set {
        let mut out = Set::default();
        self.set_of(v, shape, &mut Vec::new(), &mut out, true);
        out
    }

    fn set_of(&self, v: &Value, shape: Shape<'a>, path: &mut Vec<Pe>, out: &mut Set, top: bool) {
        match v {
            Value::Object(m) if !shape.atomic_map() => {
                for (k, cv) in m {
                    let (cs, declared) = shape.child(k, top, self.kind);
                    path.push(Pe::Field(k.clone()));
                    self.set_of(cv, cs, path, out, false);
                    let empty = matches!(cv, Value::Null) || cv.as_object().is_some_and(Map::is_empty);
                    if empty || !declared {
                        out.insert(path);
                    }
                    path.pop();
                }
            }
            Value::Array(items) => match item_pes(items, &shape.list_kind()) {
                Some(pes) => {
                    for (item, pe) in items.iter().zip(pes) {
                        path.push(pe);
                        self.set_of(item, shape.items(), path, out, false);
                        out.insert(path);
                        path.pop();
                    }
                }
                None => out.insert(path),
            },
            _ => out.insert(path),
        }
    }

    /// What changed from `old` to `new` (`Compare`). `metadata.managedFields` is never compared: no
    /// manager owns it, and a write's own list is not a change of the object.
    pub fn compare(&self, old: &Value, new: &Value, shape: Shape<'a>) -> Comparison {
        let mut c = Comparison::default();
        self.cmp(Some(old), Some(new), shape, &mut Vec::new(), &mut c, true);
        c
    }

    fn cmp<'v>(
        &self,
        l: Option<&'v Value>,
        r: Option<&'v Value>,
        shape: Shape<'a>,
        path: &mut Vec<Pe>,
        c: &mut Comparison,
        top: bool,
    ) {
        // Equal values hold no change: one comparison in place instead of a walk that names each
        // field (most writes change a few fields of a large object).
        if let (Some(lv), Some(rv)) = (l, r)
            && lv == rv
        {
            return;
        }
        let at_meta = matches!(path.as_slice(), [Pe::Field(f)] if f == "metadata");
        let children = |v: &'v Value| {
            self.children(v, shape, top).map(|mut kids| {
                if at_meta {
                    kids.retain(|(pe, _, _)| !matches!(pe, Pe::Field(f) if f == "managedFields"));
                }
                kids
            })
        };
        let (lc, rc) = (l.map(children), r.map(children));
        match (l, r) {
            (Some(lv), Some(rv)) => match (lc.flatten(), rc.flatten()) {
                (Some(lk), Some(rk)) => {
                    let mut keys: Vec<&Pe> = lk.iter().map(|(p, _, _)| p).collect();
                    for (p, _, _) in &rk {
                        if !lk.iter().any(|(q, _, _)| q == p) {
                            keys.push(p);
                        }
                    }
                    for pe in keys {
                        let a = lk.iter().find(|(q, _, _)| q == pe);
                        let b = rk.iter().find(|(q, _, _)| q == pe);
                        let s = a.or(b).map(|(_, s, _)| *s).unwrap_or(Shape::Crd(None));
                        path.push(pe.clone());
                        self.cmp(a.map(|(_, _, v)| *v), b.map(|(_, _, v)| *v), s, path, c, false);
                        path.pop();
                    }
                }
                _ => {
                    if lv != rv {
                        c.modified.insert(path);
                    }
                }
            },
            (None, Some(_)) => {
                c.added.insert(path);
                for (pe, s, v) in rc.flatten().unwrap_or_default() {
                    path.push(pe);
                    self.cmp(None, Some(v), s, path, c, false);
                    path.pop();
                }
            }
            (Some(_), None) => {
                c.removed.insert(path);
                for (pe, s, v) in lc.flatten().unwrap_or_default() {
                    path.push(pe);
                    self.cmp(Some(v), None, s, path, c, false);
                    path.pop();
                }
            }
            (None, None) => {}
        }
    }

    /// A granular value's children with their path elements and shapes; `None` for a leaf (a scalar,
    /// an atomic list or map).
    #[allow(clippy::type_complexity)]
    fn children<'v>(
        &self,
        v: &'v Value,
        shape: Shape<'a>,
        top: bool,
    ) -> Option<Vec<(Pe, Shape<'a>, &'v Value)>> {
        match v {
            Value::Object(m) if !shape.atomic_map() => Some(
                m.iter()
                    .map(|(k, cv)| (Pe::Field(k.clone()), shape.child(k, top, self.kind).0, cv))
                    .collect(),
            ),
            Value::Array(items) => {
                let pes = item_pes(items, &shape.list_kind())?;
                Some(
                    pes.into_iter()
                        .zip(items)
                        .map(|(pe, item)| (pe, shape.items(), item))
                        .collect(),
                )
            }
            _ => None,
        }
    }

    /// `config` merged into `live` (`Merge`): maps merge, granular lists merge item by item keeping
    /// the live order with new items placed as the config orders them, everything else is replaced.
    /// A `null` in the config removes the field.
    pub fn merge(&self, live: &Value, config: &Value, shape: Shape<'a>) -> Value {
        self.merge_at(live, config, shape, true)
    }

    fn merge_at(&self, live: &Value, config: &Value, shape: Shape<'a>, top: bool) -> Value {
        match (live, config) {
            (Value::Object(l), Value::Object(r)) if !shape.atomic_map() => {
                let mut out = l.clone();
                for (k, rv) in r {
                    if rv.is_null() {
                        out.remove(k);
                        continue;
                    }
                    let merged = match l.get(k) {
                        Some(lv) => self.merge_at(lv, rv, shape.child(k, top, self.kind).0, false),
                        None => rv.clone(),
                    };
                    out.insert(k.clone(), merged);
                }
                Value::Object(out)
            }
            (Value::Array(l), Value::Array(r)) => {
                let kind = shape.list_kind();
                match (item_pes(l, &kind), item_pes(r, &kind)) {
                    (Some(lp), Some(rp)) => Value::Array(self.merge_list(l, &lp, r, &rp, shape.items())),
                    _ => config.clone(),
                }
            }
            _ => config.clone(),
        }
    }

    /// structured-merge-diff's list merge: live items in their order, config items merged into their
    /// live match; items only in the config placed where the config's order puts them.
    fn merge_list(&self, l: &[Value], lp: &[Pe], r: &[Value], rp: &[Pe], item: Shape<'a>) -> Vec<Value> {
        let in_r = |pe: &Pe| rp.iter().position(|q| q == pe);
        let in_l = |pe: &Pe| lp.iter().position(|q| q == pe);
        let mut shared: std::collections::VecDeque<&Pe> = rp.iter().filter(|p| in_l(p).is_some()).collect();
        let mut done: BTreeSet<&Pe> = BTreeSet::new();
        let mut out = Vec::with_capacity(l.len() + r.len());
        let (mut li, mut ri) = (0, 0);
        while li < l.len() || ri < r.len() {
            if li < l.len() && ri < r.len() {
                if lp[li] == rp[ri] {
                    done.insert(&rp[ri]);
                    out.push(self.merge_at(&l[li], &r[ri], item, false));
                    if shared.front() == Some(&&rp[ri]) {
                        shared.pop_front();
                    }
                    li += 1;
                    ri += 1;
                    continue;
                }
                if in_r(&lp[li]).is_some() && shared.front().is_some_and(|s| **s != lp[li]) {
                    li += 1;
                    continue;
                }
            }
            if li < l.len() {
                if in_r(&lp[li]).is_none() {
                    out.push(l[li].clone());
                    li += 1;
                    continue;
                }
                if done.contains(&lp[li]) {
                    li += 1;
                    continue;
                }
            }
            if ri < r.len() {
                let pe = &rp[ri];
                done.insert(pe);
                out.push(match in_l(pe) {
                    Some(i) => self.merge_at(&l[i], &r[ri], item, false),
                    None => r[ri].clone(),
                });
                if shared.front() == Some(&pe) {
                    shared.pop_front();
                }
                ri += 1;
            } else if li < l.len() {
                // A live item shared with the config that was already placed.
                li += 1;
            }
        }
        out
    }

    /// `v` without the paths that are members of `set` (and everything under them).
    pub fn remove(&self, v: &mut Value, set: &Set, shape: Shape<'a>) {
        self.remove_at(v, set, shape, true);
    }

    fn remove_at(&self, v: &mut Value, set: &Set, shape: Shape<'a>, top: bool) {
        match v {
            Value::Object(m) if !shape.atomic_map() => {
                for pe in &set.members {
                    if let Pe::Field(f) = pe {
                        m.remove(f);
                    }
                }
                for (pe, sub) in &set.children {
                    if let Pe::Field(f) = pe
                        && let Some(cv) = m.get_mut(f)
                    {
                        let s = shape.child(f, top, self.kind).0;
                        self.remove_at(cv, sub, s, false);
                    }
                }
            }
            Value::Array(items) => {
                let Some(pes) = item_pes(items, &shape.list_kind()) else {
                    return;
                };
                let mut keep = Vec::with_capacity(items.len());
                for (mut item, pe) in std::mem::take(items).into_iter().zip(pes) {
                    if set.members.contains(&pe) {
                        continue;
                    }
                    if let Some(sub) = set.children.get(&pe) {
                        self.remove_at(&mut item, sub, shape.items(), false);
                    }
                    keep.push(item);
                }
                *items = keep;
            }
            _ => {}
        }
    }
}

/// What [`Walk::compare`] finds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    pub added: Set,
    pub modified: Set,
    pub removed: Set,
}

impl Comparison {
    /// Fields written: added or modified.
    pub fn changed(&self) -> Set {
        self.added.union(&self.modified)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn walk() -> Walk<'static> {
        Walk { kind: "Pod" }
    }

    #[test]
    fn fields_v1_round_trips_in_structured_merge_diffs_order() {
        let v = json!({"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {"f:x": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}});
        let s = Set::from_fields_v1(&v).unwrap();
        assert_eq!(s.to_fields_v1(), v);
        assert_eq!(
            serde_json::to_string(&s.to_fields_v1()).unwrap(),
            serde_json::to_string(&v).unwrap()
        );
        assert!(Set::from_fields_v1(&json!({"x:y": {}})).is_err());
        assert!(Set::from_fields_v1(&json!({"f:y": 1})).is_err());
    }

    /// The apply set of a container list: items by name, `.` for each item (as kube-apiserver writes it).
    #[test]
    fn an_applied_pod_names_its_containers_by_key() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}});
        let s = walk().to_set(&pod, Shape::root("Pod", None));
        let want = json!({"f:apiVersion": {}, "f:kind": {}, "f:metadata": {"f:labels": {"f:a": {}}, "f:name": {}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {},
                "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}}}});
        assert_eq!(s.to_fields_v1(), want);
        let paths: Vec<String> = s.paths().iter().map(|p| path_string(p)).collect();
        assert!(
            paths.contains(&".spec.containers[name=\"c\"].image".to_string()),
            "{paths:?}"
        );
    }

    #[test]
    fn compare_marks_new_maps_and_their_fields_added() {
        let old = json!({"data": {"a": "1"}});
        let new = json!({"data": {"a": "2", "b": "3"}, "metadata": {"labels": {"l": "1"}}});
        let c = walk().compare(&old, &new, Shape::root("ConfigMap", None));
        assert_eq!(
            c.added.to_fields_v1(),
            json!({"f:data": {"f:b": {}}, "f:metadata": {".": {}, "f:labels": {".": {}, "f:l": {}}}})
        );
        assert_eq!(c.modified.to_fields_v1(), json!({"f:data": {"f:a": {}}}));
        let back = walk().compare(&new, &old, Shape::root("ConfigMap", None));
        assert_eq!(back.removed, c.added);
    }

    #[test]
    fn merge_keeps_live_items_and_merges_matching_ones() {
        let live = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y", "tty": true}],
            "args": ["1", "2"]}});
        let cfg = json!({"spec": {"containers": [{"name": "b", "image": "z"}, {"name": "c", "image": "w"}], "args": ["3"]}});
        let out = walk().merge(&live, &cfg, Shape::root("Pod", None));
        assert_eq!(
            out,
            json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "z", "tty": true},
                {"name": "c", "image": "w"}], "args": ["3"]}})
        );
    }

    #[test]
    fn remove_takes_out_fields_and_list_items() {
        let mut v = json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"containers": [{"name": "a"}, {"name": "b", "image": "i"}]}});
        let mut s = Set::default();
        s.insert(&[
            Pe::Field("metadata".into()),
            Pe::Field("finalizers".into()),
            Pe::Value("\"a\"".into()),
        ]);
        s.insert(&[
            Pe::Field("spec".into()),
            Pe::Field("containers".into()),
            Pe::Key("{\"name\":\"b\"}".into()),
            Pe::Field("image".into()),
        ]);
        walk().remove(&mut v, &s, Shape::root("Pod", None));
        assert_eq!(
            v,
            json!({"metadata": {"finalizers": ["b"]}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}})
        );
    }

    #[test]
    fn crd_lists_follow_the_schema() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "groups": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}}},
            "tags": {"type": "array", "items": {"type": "string"}},
            "sel": {"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "string"}}}}}}}});
        let obj =
            json!({"spec": {"groups": [{"name": "g", "n": 1}], "tags": ["a"], "sel": {"k": {"x": "1"}}}});
        let s = Walk { kind: "Thing" }.to_set(&obj, Shape::root("Thing", Some(&schema)));
        assert_eq!(
            s.to_fields_v1(),
            json!({"f:spec": {"f:groups": {"k:{\"name\":\"g\"}": {".": {}, "f:n": {}, "f:name": {}}},
                "f:sel": {"f:k": {".": {}, "f:x": {}}}, "f:tags": {}}})
        );
    }
}
