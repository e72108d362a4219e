//! A stored object as the store keeps it: its compact JSON, shared with the watch history and the
//! disk writer, and beside it the two things the store's indexes read without parsing it (its
//! labels, for label selectors, and its owners' uids, for the garbage collector). Parsed, a pod took
//! about nine heap bytes per byte of its JSON (issue 60); kept as JSON it takes about one. A read
//! parses it again: a few microseconds for a pod, the cost a GET already paid to serialize it.
//! The storage quota still counts each object at its parsed size (`limits::held_bytes`), kept here
//! as `counted`: see there why.

use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

pub(crate) struct Stored {
    json: Arc<[u8]>,
    /// Label keys and values, each a little-endian u32 length and its bytes, in key order.
    labels: Box<[u8]>,
    owners: Box<[Box<str>]>,
    /// What the storage quota counts for it (`limits::held_bytes`).
    counted: usize,
}

impl Stored {
    /// The object as stored: serialized once, here.
    pub fn new(obj: &Value) -> Self {
        Self::with_json(serde_json::to_vec(obj).unwrap_or_default().into(), obj)
    }

    /// `json` is `obj` serialized.
    pub fn with_json(json: Arc<[u8]>, obj: &Value) -> Self {
        let mut labels = Vec::new();
        if let Some(m) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
            let mut pairs: Vec<(&str, &str)> = m
                .iter()
                .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
                .collect();
            pairs.sort_unstable();
            for (k, v) in pairs {
                for s in [k, v] {
                    labels.extend_from_slice(&(s.len() as u32).to_le_bytes());
                    labels.extend_from_slice(s.as_bytes());
                }
            }
        }
        Stored {
            json,
            labels: labels.into_boxed_slice(),
            owners: owner_uids(obj).into_iter().map(String::into_boxed_str).collect(),
            counted: super::limits::held_bytes(obj),
        }
    }

    pub fn json(&self) -> &Arc<[u8]> {
        &self.json
    }

    /// The object, parsed. The store wrote this JSON from a value within the depth limit
    /// (`limits::MAX_DEPTH`), so it parses; were it ever not to, the read sees an empty object and the
    /// cause is logged.
    pub fn value(&self) -> Arc<Value> {
        Arc::new(parse(&self.json))
    }

    /// `metadata.labels` (non-string values are left out, as `selector::labels` leaves them).
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut rest = &self.labels[..];
        let mut next = || -> Option<String> {
            let (len, tail) = rest.split_first_chunk::<4>()?;
            let n = u32::from_le_bytes(*len) as usize;
            let (s, tail) = tail.split_at_checked(n)?;
            rest = tail;
            Some(String::from_utf8_lossy(s).into_owned())
        };
        while let (Some(k), Some(v)) = (next(), next()) {
            out.insert(k, v);
        }
        out
    }

    /// The uids in `metadata.ownerReferences`.
    pub fn owners(&self) -> impl Iterator<Item = &str> {
        self.owners.iter().map(|o| &**o)
    }

    /// What the storage quota counts for this object: its size parsed.
    pub fn counted(&self) -> usize {
        self.counted
    }
}

/// Compact JSON the store wrote, parsed.
pub(crate) fn parse(json: &[u8]) -> Value {
    match serde_json::from_slice(json) {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(error = %e, "a stored object did not parse: read as an empty object");
            Value::Object(Default::default())
        }
    }
}

pub(crate) fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_the_object_its_labels_and_owners() {
        let obj = json!({
            "metadata": {"name": "p", "labels": {"b": "2", "a": "1", "n": 3},
                "ownerReferences": [{"uid": "u1"}, {"uid": "u2"}]},
            "spec": {"x": [1, 2, {"y": null}]}
        });
        let s = Stored::new(&obj);
        assert_eq!(*s.value(), obj);
        let labels = s.labels();
        assert_eq!(labels.len(), 2);
        assert_eq!(labels["a"], "1");
        assert_eq!(labels["b"], "2");
        assert_eq!(s.owners().collect::<Vec<_>>(), ["u1", "u2"]);
    }

    #[test]
    fn empty_labels_and_owners_allocate_nothing() {
        let s = Stored::new(&json!({"metadata": {"name": "p"}}));
        assert!(s.labels().is_empty());
        assert_eq!(s.owners().count(), 0);
        assert_eq!(s.labels.len() + s.owners.len(), 0);
    }

    /// A label key or value of any bytes survives the encoding.
    #[test]
    fn labels_round_trip_any_text() {
        let obj = json!({"metadata": {"labels": {"": "", "k\u{0}": "v\u{1}w", "é": "x".repeat(300)}}});
        let labels = Stored::new(&obj).labels();
        assert_eq!(labels.len(), 3);
        assert_eq!(labels["k\u{0}"], "v\u{1}w");
        assert_eq!(labels["é"].len(), 300);
    }
}
