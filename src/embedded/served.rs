//! How a stored object is written into a LIST or a WATCH answer: serialized straight from the stored
//! object (a list of every pod used to copy every pod first), and for the in-process clients
//! without `metadata.managedFields`, as are their writes' answers.
//!
//! Why the in-process clients get no `managedFields` in lists and watches: under `run --embedded`
//! the manager's and the simulators' reflectors each cache every pod they watch (about ten caches
//! of all pods), and a pod's `managedFields` are about half its JSON and most of its parsed size.
//! kube-rs recommends that reflectors strip them (`watcher` streams' `.modify`); our controllers
//! never read them, and `Controller::new` gives no place to strip them, so the server leaves them
//! out for its own clients. Their writes' answers leave them out too: the admission loop's status
//! writes parsed them back at 8% of the whole process's CPU (a profile of `bench e2e --config
//! baseline --scale 0.25`). kubectl and every client over TCP get them, as from kube-apiserver; a
//! GET keeps them for everyone.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

/// A request made by the in-process client (`EmbeddedServer::client`, `client_as`): its lists,
/// watches and writes' answers leave out `metadata.managedFields`.
#[derive(Clone, Copy, Debug)]
pub struct InProcess;

/// `obj` as written to a reader, with or without its `metadata.managedFields`.
pub struct Served<'a> {
    pub obj: &'a Value,
    pub managed_fields: bool,
    /// An item of a built-in kind's list, as kube-apiserver's typed list writes it (a Go struct,
    /// whose `TypeMeta` the list encoder leaves empty): no `kind` and `apiVersion`, and `metadata`
    /// first with its keys in ObjectMeta's field order and each managedFields entry in
    /// ManagedFieldsEntry's (a label added by a patch then reads where Go writes it). The other
    /// fields keep their stored order.
    pub typed_item: bool,
}

impl Serialize for Served<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Some(map) = self
            .obj
            .as_object()
            .filter(|_| self.typed_item || !self.managed_fields)
        else {
            return self.obj.serialize(s);
        };
        let mut out = s.serialize_map(None)?;
        if self.typed_item
            && let Some(md) = map.get("metadata")
        {
            out.serialize_entry(
                "metadata",
                &GoMetadata {
                    md,
                    managed_fields: self.managed_fields,
                },
            )?;
        }
        for (k, v) in map {
            if self.typed_item && matches!(k.as_str(), "kind" | "apiVersion" | "metadata") {
                continue;
            }
            match v.as_object() {
                Some(md) if k == "metadata" && md.contains_key("managedFields") => {
                    out.serialize_entry(k, &Without(md, "managedFields"))?
                }
                _ => out.serialize_entry(k, v)?,
            }
        }
        out.end()
    }
}

/// `metav1.ObjectMeta`'s JSON fields in its struct order (k8s.io/apimachinery v0.36.3
/// pkg/apis/meta/v1/types.go).
pub const OBJECT_META_ORDER: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// `metav1.ManagedFieldsEntry`'s JSON fields in its struct order.
pub const MANAGED_FIELDS_ENTRY_ORDER: &[&str] = &[
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
];

/// The keys of `m` in `order`, then any others in their own order.
fn in_order<'m>(
    m: &'m Map<String, Value>,
    order: &'static [&'static str],
) -> impl Iterator<Item = (&'m String, &'m Value)> {
    let known = order.iter().filter_map(|k| m.get_key_value(*k));
    let rest = m.iter().filter(|(k, _)| !order.contains(&k.as_str()));
    known.chain(rest)
}

/// An object's metadata in ObjectMeta's field order, with or without its managedFields.
struct GoMetadata<'a> {
    md: &'a Value,
    managed_fields: bool,
}

impl Serialize for GoMetadata<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Some(md) = self.md.as_object() else {
            return self.md.serialize(s);
        };
        let mut out = s.serialize_map(None)?;
        for (k, v) in in_order(md, OBJECT_META_ORDER) {
            if k != "managedFields" {
                out.serialize_entry(k, v)?;
            } else if self.managed_fields {
                out.serialize_entry(k, &GoManagedFields(v))?;
            }
        }
        out.end()
    }
}

/// `metadata.managedFields`, each entry in ManagedFieldsEntry's field order.
struct GoManagedFields<'a>(&'a Value);

impl Serialize for GoManagedFields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Some(entries) = self.0.as_array() else {
            return self.0.serialize(s);
        };
        let mut out = s.serialize_seq(Some(entries.len()))?;
        for e in entries {
            match e.as_object() {
                Some(m) => out.serialize_element(&Ordered(m, MANAGED_FIELDS_ENTRY_ORDER))?,
                None => out.serialize_element(e)?,
            }
        }
        out.end()
    }
}

/// A map written in `order`, then its other keys.
struct Ordered<'a>(&'a Map<String, Value>, &'static [&'static str]);

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in in_order(self.0, self.1) {
            out.serialize_entry(k, v)?;
        }
        out.end()
    }
}

/// A map without one of its keys.
struct Without<'a>(&'a Map<String, Value>, &'static str);

impl Serialize for Without<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Without(map, left_out) = *self;
        let mut out = s.serialize_map(Some(map.len().saturating_sub(1)))?;
        for (k, v) in map.iter().filter(|(k, _)| k.as_str() != left_out) {
            out.serialize_entry(k, v)?;
        }
        out.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// With managedFields the bytes are the object's own; without, the same object less that key,
    /// key order kept; objects without metadata or managedFields are written as they are.
    #[test]
    fn leaves_out_managed_fields_only_when_asked() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "managedFields": [{"manager": "m"}], "uid": "u"},
            "spec": {"managedFields": "kept: not metadata"}});
        let with = serde_json::to_string(&Served {
            obj: &pod,
            managed_fields: true,
            typed_item: false,
        })
        .unwrap();
        assert_eq!(with, serde_json::to_string(&pod).unwrap());
        let without = serde_json::to_string(&Served {
            obj: &pod,
            managed_fields: false,
            typed_item: false,
        })
        .unwrap();
        let mut expected = pod.clone();
        expected["metadata"]
            .as_object_mut()
            .unwrap()
            .shift_remove("managedFields");
        assert_eq!(without, serde_json::to_string(&expected).unwrap());
        assert!(
            without.contains("\"metadata\":{\"name\":\"p\",\"uid\":\"u\"}"),
            "{without}"
        );
        for plain in [
            json!({"metadata": {"name": "p"}}),
            json!("text"),
            json!({"metadata": 1}),
        ] {
            let out = serde_json::to_string(&Served {
                obj: &plain,
                managed_fields: false,
                typed_item: false,
            })
            .unwrap();
            assert_eq!(out, serde_json::to_string(&plain).unwrap());
        }
    }

    /// A ConfigMap as an item of kube-apiserver v1.36.3's typed list (`GET /api/v1/.../configmaps`):
    /// no kind or apiVersion, metadata first in ObjectMeta's struct order and each managedFields
    /// entry in ManagedFieldsEntry's (k8s.io/apimachinery pkg/apis/meta/v1/types.go), whatever order
    /// the patches that added labels and annotations left in the stored object.
    #[test]
    fn a_typed_list_item_is_written_in_go_struct_order() {
        let cm = json!({"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "cm1", "namespace": "blind", "managedFields": [
                {"manager": "kubectl-label", "time": "t", "operation": "Update", "apiVersion": "v1",
                 "fieldsV1": {}, "fieldsType": "FieldsV1"}],
                "annotations": {"note": "hello"}, "uid": "u", "labels": {"env": "prod"},
                "resourceVersion": "7", "creationTimestamp": "c"},
            "data": {"a": "1"}});
        let item = |managed_fields| {
            serde_json::to_string(&Served {
                obj: &cm,
                managed_fields,
                typed_item: true,
            })
            .unwrap()
        };
        let meta = r#"{"name":"cm1","namespace":"blind","uid":"u","resourceVersion":"7","creationTimestamp":"c","labels":{"env":"prod"},"annotations":{"note":"hello"}"#;
        assert_eq!(
            item(true),
            format!(
                r#"{{"metadata":{meta},"managedFields":[{{"manager":"kubectl-label","operation":"Update","apiVersion":"v1","time":"t","fieldsType":"FieldsV1","fieldsV1":{{}}}}]}},"data":{{"a":"1"}}}}"#
            )
        );
        assert_eq!(
            item(false),
            format!(r#"{{"metadata":{meta}}},"data":{{"a":"1"}}}}"#)
        );
    }
}
