//! How a stored object is written into a LIST or a WATCH answer: serialized straight from the stored
//! object (a list of every pod used to copy every pod first), and for the in-process clients
//! without `metadata.managedFields`.
//!
//! Why the in-process clients get no `managedFields` in lists and watches: under `run --embedded`
//! the manager's and the simulators' reflectors each cache every pod they watch (about ten caches
//! of all pods), and a pod's `managedFields` are about half its JSON and most of its parsed size.
//! kube-rs recommends that reflectors strip them (`watcher` streams' `.modify`); our controllers
//! never read them, and `Controller::new` gives no place to strip them, so the server leaves them
//! out for its own clients. kubectl and every client over TCP get them, as from kube-apiserver;
//! a GET keeps them for everyone.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

/// A request made by the in-process client (`EmbeddedServer::client`, `client_as`): its lists and
/// watches leave out `metadata.managedFields`.
#[derive(Clone, Copy, Debug)]
pub struct InProcess;

/// `obj` as written to a reader, with or without its `metadata.managedFields`.
pub struct Served<'a> {
    pub obj: &'a Value,
    pub managed_fields: bool,
}

impl Serialize for Served<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Some(map) = self.obj.as_object().filter(|_| !self.managed_fields) else {
            return self.obj.serialize(s);
        };
        let mut out = s.serialize_map(Some(map.len()))?;
        for (k, v) in map {
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
        })
        .unwrap();
        assert_eq!(with, serde_json::to_string(&pod).unwrap());
        let without = serde_json::to_string(&Served {
            obj: &pod,
            managed_fields: false,
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
            })
            .unwrap();
            assert_eq!(out, serde_json::to_string(&plain).unwrap());
        }
    }
}
