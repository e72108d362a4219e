//! ConfigMaps and Secrets, after kube-apiserver's `pkg/apis/core/validation/validation.go`
//! (`ValidateConfigMap`, `ValidateSecret`) and apimachinery's `IsConfigMapKey`; and Go's
//! `encoding/base64` decoder, whose error the real server answers (400) for a byte map that is no
//! base64.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};

use super::{invalid, required, str_at};
use crate::api::validation::{FieldError, Path};

static CONFIG_KEY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[-._a-zA-Z0-9]+$").expect("constant regex"));
const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// `IsConfigMapKey`: every rule broken is its own error on `path`.
fn config_key(path: &Path, key: &str, errs: &mut Vec<FieldError>) {
    let v = json!(key);
    if key.len() > 253 {
        errs.push(invalid(path, &v, "must be no more than 253 characters"));
    }
    if !CONFIG_KEY.is_match(key) {
        errs.push(invalid(path, &v, CONFIG_KEY_MSG));
    }
    if key == "." {
        errs.push(invalid(path, &v, "must not be '.'"));
    } else if key == ".." {
        errs.push(invalid(path, &v, "must not be '..'"));
    } else if key.starts_with("..") {
        errs.push(invalid(path, &v, "must not start with '..'"));
    }
}

fn keys<'a>(obj: &'a Value, field: &str) -> Vec<&'a String> {
    obj.get(field)
        .and_then(Value::as_object)
        .map(|m| m.keys().collect())
        .unwrap_or_default()
}

/// `ValidateConfigMapUpdate` and `ValidateSecretUpdate`: once `immutable` is set, it stays, and so
/// do the data fields.
fn immutable_data(obj: &Value, old: &Value, fields: &[&str], errs: &mut Vec<FieldError>) {
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    const WHY: &str = "field is immutable when `immutable` is set";
    if obj.get("immutable").and_then(Value::as_bool) != Some(true) {
        errs.push(FieldError::forbidden("immutable", WHY));
    }
    let present = |v: &Value, f: &str| v.get(f).filter(|d| !d.is_null()).cloned();
    for f in fields {
        if present(obj, f) != present(old, f) {
            errs.push(FieldError::forbidden(*f, WHY));
        }
    }
}

pub fn validate_config_map(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    if let Some(old) = old {
        immutable_data(obj, old, &["data", "binaryData"], errs);
    }
    let data = keys(obj, "data");
    for k in &data {
        config_key(&Path::root("data").key(k), k, errs);
    }
    for k in keys(obj, "binaryData") {
        config_key(&Path::root("binaryData").key(k), k, errs);
        if data.contains(&k) {
            errs.push(invalid(
                &Path::root("data").key(k),
                &json!(k),
                "duplicate of key present in binaryData",
            ));
        }
    }
}

/// `ValidateSecret` (after `stringData` was folded into `data`): the keys, and the keys a typed secret
/// must carry.
pub fn validate_secret(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    if let Some(old) = old {
        // `ValidateImmutableField` on the type (both defaulted to `Opaque`).
        let type_of = |v: &Value| {
            str_at(v, "type")
                .filter(|t| !t.is_empty())
                .unwrap_or("Opaque")
                .to_string()
        };
        if type_of(obj) != type_of(old) {
            errs.push(invalid(
                &Path::root("type"),
                &json!(type_of(obj)),
                "field is immutable",
            ));
        }
        immutable_data(obj, old, &["data"], errs);
    }
    // The store folds `stringData` in before this runs; `quotagate validate` reads the manifest as
    // written, so its keys count here too.
    let mut data = keys(obj, "data");
    for k in keys(obj, "stringData") {
        if !data.contains(&k) {
            data.push(k);
        }
    }
    for k in &data {
        config_key(&Path::root("data").key(k), k, errs);
    }
    let must_have: &[&str] = match str_at(obj, "type").unwrap_or_default() {
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/basic-auth" => &[],
        "kubernetes.io/ssh-auth" => &["ssh-privatekey"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        _ => &[],
    };
    for k in must_have {
        if !data.iter().any(|d| d == k) {
            errs.push(required(&Path::root("data").key(k), ""));
        }
    }
}

/// Go's `base64.StdEncoding.Decode` as `encoding/json` runs it on a `[]byte` field: `Err(offset)` is
/// the byte its `CorruptInputError` names. Line breaks are skipped; padding is required.
pub fn go_base64(s: &str) -> Result<(), usize> {
    let src = s.as_bytes();
    let valid = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/';
    let newline = |b: u8| b == b'\n' || b == b'\r';
    let mut si = 0usize;
    loop {
        let mut j = 0usize;
        while j < 4 {
            if si == src.len() {
                return if j == 0 { Ok(()) } else { Err(si - j) };
            }
            let c = src[si];
            si += 1;
            if valid(c) {
                j += 1;
                continue;
            }
            if newline(c) {
                continue;
            }
            if c != b'=' {
                return Err(si - 1);
            }
            match j {
                0 | 1 => return Err(si - 1),
                2 => {
                    while si < src.len() && newline(src[si]) {
                        si += 1;
                    }
                    if si == src.len() {
                        return Err(src.len());
                    }
                    if src[si] != b'=' {
                        return Err(si - 1);
                    }
                    si += 1;
                }
                _ => {}
            }
            while si < src.len() && newline(src[si]) {
                si += 1;
            }
            return if si < src.len() { Err(si) } else { Ok(()) };
        }
    }
}
