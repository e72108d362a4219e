//! Server-side field validation, as kube-apiserver does it since 1.27: the `fieldValidation` query
//! parameter of a create, update or patch says what to do with a field the object's schema does not
//! know or a field given twice. `Strict` (kubectl's default) refuses the request with 400 and every
//! such field named; `Warn` (the default when the parameter is absent) accepts it and says so in a
//! `Warning` header per field; `Ignore` says nothing.
//!
//! What is checked here: duplicate keys anywhere in a JSON body (JSON and the JSON that kubectl sends
//! as `apply-patch+yaml`), and fields the kind's schema does not declare (`properties`,
//! `additionalProperties`, `items`, `$ref` and `x-kubernetes-preserve-unknown-fields`): a CRD's
//! structural schema, a built-in kind's (`builtin_schemas.rs`), and ObjectMeta's for every object's
//! `metadata`; in full objects, in merge, strategic-merge and apply patch bodies (whose `$`
//! directives are not fields), and in what a JSON patch makes of the stored object.
//! What is accepted is then pruned before it is stored (`prune.rs`), as a real server drops it.

use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::error::ApiError;
use super::registry::ResourceInfo;
use super::served::{MANAGED_FIELDS_ENTRY_ORDER, OBJECT_META_ORDER};

/// The `fieldValidation` directive of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Directive {
    Strict,
    Warn,
    Ignore,
}

impl Directive {
    /// From the query parameter; absent is `Warn`, as kube-apiserver defaults it.
    pub fn parse(raw: Option<&str>) -> Result<Directive, ApiError> {
        match raw {
            None | Some("") | Some("Warn") => Ok(Directive::Warn),
            Some("Strict") => Ok(Directive::Strict),
            Some("Ignore") => Ok(Directive::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// What field validation found in one request body: paths as kube-apiserver writes them
/// (`spec.workerGroupSpecs[0].replicas`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Findings {
    pub unknown: Vec<String>,
    pub duplicate: Vec<String>,
}

impl Findings {
    /// Each finding in the real server's words (`unknown field "…"`, `duplicate field "…"`).
    pub fn messages(&self) -> Vec<String> {
        let unknown = self.unknown.iter().map(|p| format!("unknown field \"{p}\""));
        let duplicate = self.duplicate.iter().map(|p| format!("duplicate field \"{p}\""));
        unknown.chain(duplicate).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.unknown.is_empty() && self.duplicate.is_empty()
    }

    /// Under `Strict`, a 400 naming every field; otherwise the warnings to send (none for `Ignore`).
    pub fn judge(&self, directive: Directive, info: &ResourceInfo) -> Result<Vec<String>, ApiError> {
        let messages = self.messages();
        match directive {
            _ if messages.is_empty() => Ok(Vec::new()),
            Directive::Ignore => Ok(Vec::new()),
            Directive::Warn => Ok(messages),
            Directive::Strict => Err(ApiError::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
                messages.join(", "),
                kind = info.kind,
                version = info.version,
            ))),
        }
    }
}

/// A JSON patch refused under `Strict`, as kube-apiserver's patch handler refuses it: 422 on the
/// field `patch`, quoting the patched object (top-level keys sorted, as its JSON patch library writes
/// them), the patch body's duplicates (`json patch duplicate field`) before the object's unknown fields.
pub fn json_patch_refused(f: &Findings, patched: &Value) -> ApiError {
    let errors = f
        .duplicate
        .iter()
        .map(|p| format!("json patch duplicate field \"{p}\""))
        .chain(f.unknown.iter().map(|p| format!("unknown field \"{p}\"")))
        .collect::<Vec<_>>()
        .join(", ");
    patch_decode_refused(patched, &format!("strict decoding error: {errors}"))
}

/// kube-apiserver's JSON and merge patch handler when the patched object does not decode: 422 on the
/// field `patch`, quoting the patched object (top-level keys sorted, as its JSON patch library writes
/// them) and Go's decoding error.
pub fn patch_decode_refused(patched: &Value, error: &str) -> ApiError {
    let mut sorted: Vec<(&String, &Value)> = patched.as_object().into_iter().flatten().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let object: serde_json::Map<String, Value> =
        sorted.into_iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let text = Value::Object(object).to_string();
    let e = crate::api::validation::FieldError::invalid("patch", format!("{text:?}: {error}"));
    ApiError::invalid("", "", &[e])
}

/// The patched object of a map-only kind (a ConfigMap or Secret) as kube-apiserver's merge patch
/// writes it: every map's keys sorted (Go writes maps so), and `metadata`, which the patch did not
/// touch (`metadata_patched` false), as the stored object encoded it, in ObjectMeta's field order.
pub fn go_patched_object(patched: &Value, metadata_patched: bool) -> Value {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut pairs: Vec<(&String, &Value)> = m.iter().collect();
                pairs.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(pairs.into_iter().map(|(k, v)| (k.clone(), sorted(v))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    fn in_order(v: &Value, order: &[&str]) -> Value {
        let Some(m) = v.as_object() else {
            return v.clone();
        };
        let mut out = serde_json::Map::new();
        for k in order.iter().filter(|k| m.contains_key(**k)) {
            out.insert((*k).to_string(), m[*k].clone());
        }
        for (k, v) in m.iter().filter(|(k, _)| !order.contains(&k.as_str())) {
            out.insert(k.clone(), v.clone());
        }
        Value::Object(out)
    }
    let mut out = sorted(patched);
    if !metadata_patched && let Some(meta) = patched.get("metadata") {
        let mut meta = in_order(meta, OBJECT_META_ORDER);
        if let Some(fields) = meta.get_mut("managedFields").and_then(Value::as_array_mut) {
            for e in fields.iter_mut() {
                *e = in_order(e, MANAGED_FIELDS_ENTRY_ORDER);
            }
        }
        out["metadata"] = meta;
    }
    out
}

/// Most findings reported for one request: a body full of mistakes gets a bounded answer.
pub const MAX_FINDINGS: usize = 64;

/// The findings for a request body of `info`'s kind. `body` is the raw bytes (for duplicates; only
/// JSON is scanned) and `value` the decoded object or merge/apply patch.
pub fn inspect(info: &ResourceInfo, body: &[u8], value: &Value) -> Findings {
    Findings {
        duplicate: duplicates(body),
        unknown: unknown(info, value),
    }
}

/// Paths in `value` (an object, or a merge, strategic or apply patch of one) that `info`'s kind does
/// not declare: against the CRD's schema or the built-in kind's, and `metadata` against ObjectMeta's.
pub fn unknown(info: &ResourceInfo, value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let builtin = if info.is_crd {
        None
    } else {
        super::builtin_schemas::builtin(&info.group, &info.version, &info.kind)
    };
    if let Some(schema) = info
        .schema
        .as_ref()
        .map(super::registry::CrdSchema::get)
        .or(builtin)
    {
        unknown_fields(value, Schema::root(schema), &mut String::new(), true, &mut out);
    }
    if let Some(meta) = value.get("metadata") {
        let m = super::builtin_schemas::object_meta();
        unknown_fields(
            meta,
            Schema::root(m),
            &mut "metadata".to_string(),
            false,
            &mut out,
        );
    }
    out.truncate(MAX_FINDINGS);
    out
}

/// Paths of keys given twice in one JSON object, anywhere in `body`. Bodies that are not JSON (YAML,
/// protobuf) have none found here.
pub fn duplicates(body: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let seed = Walk {
        path: String::new(),
        found: &mut found,
    };
    if seed.deserialize(&mut de).is_err() {
        return Vec::new();
    }
    found
}

/// A JSON value walked for duplicate keys, at `path`.
struct Walk<'a> {
    path: String,
    found: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = child(&self.path, &key);
            if !seen.insert(key) && self.found.len() < MAX_FINDINGS && !self.found.contains(&path) {
                self.found.push(path.clone());
            }
            map.next_value_seed(Walk {
                path,
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        while seq
            .next_element_seed(Walk {
                path: format!("{}[{i}]", self.path),
                found: &mut *self.found,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// A schema node and the document it belongs to (whose `$defs` its `$ref`s name); pruning
/// (`prune.rs`) walks the same schemas.
#[derive(Clone, Copy)]
pub(super) struct Schema<'a> {
    pub(super) node: &'a Value,
    doc: &'a Value,
}

impl<'a> Schema<'a> {
    /// A whole schema document, at its root.
    pub(super) fn root(doc: &'a Value) -> Schema<'a> {
        Schema { node: doc, doc }
    }
    /// Whether the node sets the boolean extension `name` (`x-kubernetes-...`) to true.
    pub(super) fn flag(self, name: &str) -> bool {
        self.node.get(name) == Some(&Value::Bool(true))
    }
    /// The node a `$ref` (`#/$defs/<name>`) points at, followed a few times; the node itself without one.
    pub(super) fn resolved(self) -> Schema<'a> {
        let mut node = self.node;
        for _ in 0..8 {
            let Some(name) = node
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/$defs/"))
            else {
                break;
            };
            match self.doc.get("$defs").and_then(|d| d.get(name)) {
                Some(target) => node = target,
                None => break,
            }
        }
        Schema { node, doc: self.doc }
    }
    pub(super) fn at(self, node: &'a Value) -> Schema<'a> {
        Schema { node, doc: self.doc }
    }
}

/// Fields of `value` that `schema` (an OpenAPI v3 structural schema, or a JSON Schema with `$defs`)
/// does not declare, appended to `out` as paths. `metadata` at the root is checked against ObjectMeta
/// by the caller. Keys starting with `$` are a strategic merge patch's directives, not fields. Nesting
/// is bounded by the server's depth limit on every body (`limits.rs`).
fn unknown_fields(value: &Value, schema: Schema, path: &mut String, root: bool, out: &mut Vec<String>) {
    let schema = schema.resolved();
    if out.len() >= MAX_FINDINGS || schema.flag("x-kubernetes-preserve-unknown-fields") {
        return;
    }
    match value {
        Value::Object(map) => {
            let props = schema.node.get("properties").and_then(Value::as_object);
            let additional = schema.node.get("additionalProperties");
            for (key, v) in map {
                if (root && matches!(key.as_str(), "metadata" | "apiVersion" | "kind"))
                    || key.starts_with('$')
                {
                    continue;
                }
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                match (props.and_then(|p| p.get(key)), additional) {
                    (Some(s), _) => unknown_fields(v, schema.at(s), path, false, out),
                    (None, Some(s)) if s.is_object() => unknown_fields(v, schema.at(s), path, false, out),
                    // Declared free-form, or an object whose schema names no field at all: nothing to
                    // hold the key to. A null only removes (a merge patch's deletion).
                    (None, Some(Value::Bool(true))) => {}
                    (None, _) if props.is_none() || v.is_null() => {}
                    (None, _) => {
                        if out.len() < MAX_FINDINGS {
                            out.push(path.clone());
                        }
                    }
                }
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.node.get("items") {
                for (i, v) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    unknown_fields(v, schema.at(s), path, false, out);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

/// What a JSON patch added that the kind does not declare: the unknown fields of the patched object
/// `after` that the stored object `before` did not already have (a real server never stores them;
/// this one keeps what `Warn` accepted, and a later patch is not blamed for it).
pub fn introduced(info: &ResourceInfo, before: &Value, after: &Value) -> Vec<String> {
    let old = unknown(info, before);
    unknown(info, after)
        .into_iter()
        .filter(|p| !old.contains(p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(schema: Option<Value>) -> ResourceInfo {
        ResourceInfo {
            group: "ray.io".into(),
            version: "v1".into(),
            kind: "RayCluster".into(),
            plural: "rayclusters".into(),
            singular: "raycluster".into(),
            short_names: vec![],
            categories: vec![],
            namespaced: true,
            has_status: true,
            is_crd: true,
            printer_columns: vec![],
            schema: schema.map(crate::embedded::CrdSchema::ready),
        }
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "suspend": {"type": "boolean"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "groups": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }}
        }})
    }

    #[test]
    fn duplicate_keys_are_found_at_their_path() {
        let body = br#"{"metadata":{"name":"a","name":"b"},"spec":{"groups":[{"name":"x","name":"y"}],"suspend":true,"suspend":false}}"#;
        assert_eq!(
            duplicates(body),
            vec!["metadata.name", "spec.groups[0].name", "spec.suspend"]
        );
        assert!(
            duplicates(br#"{"a":{"b":1},"c":{"b":2}}"#).is_empty(),
            "the same key in two objects is no duplicate"
        );
        assert!(
            duplicates(b"kind: Foo\nkind: Bar\n").is_empty(),
            "not JSON: not scanned here"
        );
    }

    #[test]
    fn undeclared_fields_are_found_against_the_structural_schema() {
        let v = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "a", "whatever": 1},
            "spec": {"suspend": true, "bogus": 1, "labels": {"any": "x"}, "groups": [{"name": "g"}, {"nmae": "h"}],
                     "free": {"deep": {"x": 1}}, "gone": null}, "extra": {}});
        let f = inspect(&info(Some(schema())), b"", &v);
        assert_eq!(
            f.unknown,
            vec!["spec.bogus", "spec.groups[1].nmae", "extra", "metadata.whatever"]
        );
        assert_eq!(
            inspect(&info(None), b"", &v).unknown,
            vec!["metadata.whatever"],
            "a CRD without a schema: metadata only"
        );
    }

    /// A built-in kind's own schema (k8s-openapi's, through `$ref`s), and ObjectMeta's for `metadata`
    /// of every kind, as a real server's strict decoding finds them.
    #[test]
    fn built_in_kinds_and_metadata_are_held_to_their_schemas() {
        let pods = super::super::registry::builtins()
            .into_iter()
            .find(|i| i.plural == "pods")
            .unwrap();
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"any": "x"}, "lables": {}, "annotations": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicy": "Always",
                "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 80, "hostnet": 1}]}],
                "nodeSelector": {"k": "v"}, "tolerations": [{"key": "k", "operator": "Exists"}], "bogus": true},
            "status": {"phase": "Running"}});
        let f = inspect(&pods, b"", &pod);
        assert_eq!(
            f.unknown,
            vec![
                "spec.containers[0].ports[0].hostnet",
                "spec.bogus",
                "metadata.lables"
            ]
        );
        // A strategic merge patch's directives are no fields; a merge patch's null deletes.
        let smp = json!({"spec": {"$setElementOrder/containers": [{"name": "c"}], "containers": [{"name": "c", "$patch": "delete"}]},
            "metadata": {"labels": {"gone": null}}});
        assert!(inspect(&pods, b"", &smp).unknown.is_empty());
        // A CRD's metadata too, beside its own schema.
        let v = json!({"metadata": {"name": "a", "nmae": "b"}, "spec": {"suspend": true}});
        assert_eq!(
            inspect(&info(Some(schema())), b"", &v).unknown,
            vec!["metadata.nmae"]
        );
    }

    /// A JSON patch is judged by what it adds to the stored object, not by what the object already had.
    #[test]
    fn a_json_patch_is_blamed_only_for_what_it_adds() {
        let cms = super::super::registry::builtins()
            .into_iter()
            .find(|i| i.plural == "configmaps")
            .unwrap();
        let before = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}, "old": 1});
        let mut after = before.clone();
        super::super::patch::json_patch(&mut after, &json!([{"op": "add", "path": "/dta", "value": {}}, {"op": "add", "path": "/data/b", "value": "2"}])).unwrap();
        assert_eq!(introduced(&cms, &before, &after), vec!["dta"]);
    }

    #[test]
    fn each_directive_does_what_kube_apiserver_does() {
        let f = Findings {
            unknown: vec!["spec.bogus".into()],
            duplicate: vec!["spec.suspend".into()],
        };
        let i = info(None);
        let err = f.judge(Directive::Strict, &i).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "RayCluster in version \"v1\" cannot be handled as a RayCluster: strict decoding error: unknown field \"spec.bogus\", duplicate field \"spec.suspend\""
        );
        assert_eq!(
            f.judge(Directive::Warn, &i).unwrap(),
            vec!["unknown field \"spec.bogus\"", "duplicate field \"spec.suspend\""]
        );
        assert!(f.judge(Directive::Ignore, &i).unwrap().is_empty());
        assert_eq!(Directive::parse(None).unwrap(), Directive::Warn);
        assert!(Directive::parse(Some("Loose")).is_err());
    }
}
