//! A small decoder for the protobuf request bodies kubectl's typed commands send
//! (`create configmap|secret|namespace`). Only those three kinds are decoded; the reply is JSON, which
//! kubectl accepts. Anything else is refused with 415 and a message naming the kind.

use base64::Engine;
use serde_json::{Map, Value, json};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtobufError {
    #[error("protobuf body does not start with the k8s\\0 magic")]
    Magic,
    #[error("malformed protobuf body: {0}")]
    Malformed(&'static str),
    #[error("protobuf request bodies are only decoded for ConfigMap, Secret and Namespace, not {0}; send JSON")]
    Unsupported(String),
}

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, ProtobufError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or(ProtobufError::Malformed("truncated varint"))?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(ProtobufError::Malformed("varint too long"))
}

fn fields(buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, ProtobufError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (num, wire) = (key >> 3, key & 7);
        match wire {
            0 => out.push((num, Field::Varint(varint(buf, &mut pos)?))),
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?).map_err(|_| ProtobufError::Malformed("length"))?;
                let end = pos.checked_add(len).filter(|e| *e <= buf.len()).ok_or(ProtobufError::Malformed("length past end"))?;
                out.push((num, Field::Bytes(&buf[pos..end])));
                pos = end;
            }
            1 => pos += 8,
            5 => pos += 4,
            _ => return Err(ProtobufError::Malformed("unsupported wire type")),
        }
    }
    Ok(out)
}

fn string(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A map<string, string|bytes> entry {1: key, 2: value}.
fn entry(b: &[u8], bytes_value: bool) -> Result<(String, Value), ProtobufError> {
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    for (n, f) in fields(b)? {
        if let Field::Bytes(x) = f {
            match n {
                1 => k = string(x),
                2 if bytes_value => v = json!(base64::engine::general_purpose::STANDARD.encode(x)),
                2 => v = json!(string(x)),
                _ => {}
            }
        }
    }
    Ok((k, v))
}

fn object_meta(b: &[u8]) -> Result<Value, ProtobufError> {
    let mut m = Map::new();
    let (mut labels, mut annotations) = (Map::new(), Map::new());
    for (n, f) in fields(b)? {
        let Field::Bytes(x) = f else { continue };
        match n {
            1 => {
                m.insert("name".into(), json!(string(x)));
            }
            2 => {
                m.insert("generateName".into(), json!(string(x)));
            }
            3 if !x.is_empty() => {
                m.insert("namespace".into(), json!(string(x)));
            }
            11 => {
                let (k, v) = entry(x, false)?;
                labels.insert(k, v);
            }
            12 => {
                let (k, v) = entry(x, false)?;
                annotations.insert(k, v);
            }
            _ => {}
        }
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    Ok(Value::Object(m))
}

/// Decodes a `k8s\0` + runtime.Unknown body into the JSON object it stands for.
pub fn decode(body: &[u8], kind: &str) -> Result<Value, ProtobufError> {
    let rest = body.strip_prefix(b"k8s\0").ok_or(ProtobufError::Magic)?;
    let mut raw: &[u8] = &[];
    for (n, f) in fields(rest)? {
        if let (2, Field::Bytes(x)) = (n, f) {
            raw = x;
        }
    }
    let mut obj = Map::new();
    let (mut data, mut binary) = (Map::new(), Map::new());
    for (n, f) in fields(raw)? {
        match (kind, n, f) {
            (_, 1, Field::Bytes(x)) => {
                obj.insert("metadata".into(), object_meta(x)?);
            }
            ("ConfigMap", 2, Field::Bytes(x)) => {
                let (k, v) = entry(x, false)?;
                data.insert(k, v);
            }
            ("ConfigMap", 3, Field::Bytes(x)) | ("Secret", 2, Field::Bytes(x)) => {
                let (k, v) = entry(x, true)?;
                binary.insert(k, v);
            }
            ("ConfigMap", 4, Field::Varint(v)) | ("Secret", 5, Field::Varint(v)) => {
                obj.insert("immutable".into(), json!(v != 0));
            }
            ("Secret", 3, Field::Bytes(x)) => {
                obj.insert("type".into(), json!(string(x)));
            }
            ("Secret", 4, Field::Bytes(x)) => {
                let (k, v) = entry(x, false)?;
                obj.entry("stringData").or_insert_with(|| json!({}))[&k] = v;
            }
            ("ConfigMap" | "Secret" | "Namespace", _, _) => {}
            (other, _, _) => return Err(ProtobufError::Unsupported(other.to_string())),
        }
    }
    match kind {
        "ConfigMap" if !data.is_empty() => {
            obj.insert("data".into(), Value::Object(data));
        }
        _ => {}
    }
    if !binary.is_empty() {
        let field = if kind == "Secret" { "data" } else { "binaryData" };
        obj.insert(field.into(), Value::Object(binary));
    }
    obj.insert("kind".into(), json!(kind));
    obj.insert("apiVersion".into(), json!("v1"));
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(num: u8, b: &[u8]) -> Vec<u8> {
        let mut v = vec![(num << 3) | 2, b.len() as u8];
        v.extend_from_slice(b);
        v
    }

    #[test]
    fn decodes_a_configmap_body() {
        let meta = [ld(1, b"cm1"), ld(11, &[ld(1, b"app"), ld(2, b"web")].concat())].concat();
        let raw = [ld(1, &meta), ld(2, &[ld(1, b"a"), ld(2, b"1")].concat())].concat();
        let body = [b"k8s\0".to_vec(), ld(1, &[ld(1, b"v1"), ld(2, b"ConfigMap")].concat()), ld(2, &raw)].concat();
        let v = decode(&body, "ConfigMap").unwrap();
        assert_eq!(v["metadata"]["name"], "cm1");
        assert_eq!(v["metadata"]["labels"]["app"], "web");
        assert_eq!(v["data"]["a"], "1");
        assert_eq!(decode(b"nope", "ConfigMap").unwrap_err(), ProtobufError::Magic);
        assert!(matches!(decode(&body, "Pod"), Err(ProtobufError::Unsupported(_))));
    }
}
