//! ServiceAccount tokens, as the TokenRequest API (`POST .../serviceaccounts/NAME/token`, what
//! `kubectl create token` and the kubelet's projected token volume call) issues them: a bearer token
//! that authenticates as `system:serviceaccount:NS:NAME` (groups `system:serviceaccounts`,
//! `system:serviceaccounts:NS`, `system:authenticated`), bound to the ServiceAccount's uid, and
//! authorized by the store's RBAC like any user.
//!
//! Not a JWT: `qgsa.<payload>.<mac>`, the payload base64url JSON `{ns, name, uid, exp}`, the mac an
//! HMAC-SHA256 under a key derived from the listener's credentials, so tokens survive a restart
//! with `--data-dir` exactly when the admin token does. A token stops working at `exp`, and when its
//! ServiceAccount is deleted or replaced (another uid), as a bound token does.

use std::sync::OnceLock;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::error::ApiError;

const PREFIX: &str = "qgsa.";
/// The real server's floor for `spec.expirationSeconds` (10 minutes).
const MIN_EXPIRATION: i64 = 600;
/// kube-apiserver's default when the request names none (1 hour).
const DEFAULT_EXPIRATION: i64 = 3600;
/// The longest we issue (kube-apiserver's `--service-account-max-token-expiration` is unset by
/// default; a year bounds a token that leaks).
const MAX_EXPIRATION: i64 = 365 * 24 * 3600;
const DEFAULT_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// The signing key, set once per server: from the listener's credentials when it starts, random
/// when a token is asked for before that (in-process only).
#[derive(Default)]
pub struct TokenKey(OnceLock<[u8; 32]>);

impl TokenKey {
    /// Derives the key from the listener's admin token (first caller wins).
    pub fn init_from(&self, admin_token: &str) {
        let mut h = Sha256::new();
        h.update(b"quotagate serviceaccount token key\0");
        h.update(admin_token.as_bytes());
        let _ = self.0.set(h.finalize().into());
    }

    fn key(&self) -> &[u8; 32] {
        self.0.get_or_init(rand::random)
    }
}

/// Who a valid token names.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Claims {
    pub ns: String,
    pub name: String,
    pub uid: String,
    /// Expiry, seconds since the Unix epoch.
    pub exp: i64,
}

impl Claims {
    pub fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.ns, self.name)
    }
}

fn hmac(key: &[u8; 32], msg: &[u8]) -> [u8; 32] {
    // RFC 2104 with SHA-256 (block size 64).
    let mut k = [0u8; 64];
    k[..32].copy_from_slice(key);
    let pad = |b: u8| k.iter().map(|x| x ^ b).collect::<Vec<u8>>();
    let inner: [u8; 32] = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize()
        .into();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

pub fn issue(key: &TokenKey, claims: &Claims) -> String {
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).unwrap_or_default());
    let mac = URL_SAFE_NO_PAD.encode(hmac(key.key(), payload.as_bytes()));
    format!("{PREFIX}{payload}.{mac}")
}

/// The claims of `token` when it carries our mac and has not expired at `now` (Unix seconds).
pub fn verify(key: &TokenKey, token: &str, now: i64) -> Option<Claims> {
    let (payload, mac) = token.strip_prefix(PREFIX)?.split_once('.')?;
    let given = URL_SAFE_NO_PAD.decode(mac).ok()?;
    let want = hmac(key.key(), payload.as_bytes());
    // Constant time in the mac's content.
    if given.len() != want.len()
        || given
            .iter()
            .zip(want.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            != 0
    {
        return None;
    }
    let claims: Claims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
    (claims.exp > now).then_some(claims)
}

/// The bearer token of an `Authorization` header value.
pub fn bearer(authorization: Option<&str>) -> Option<&str> {
    let (scheme, rest) = authorization?.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| rest.trim())
        .filter(|t| !t.is_empty())
}

pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn rfc3339(unix: i64) -> String {
    jiff::Timestamp::from_second(unix)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// A refused TokenRequest: kube-apiserver names no object in it (`TokenRequest... "" is invalid`).
fn invalid(field: &str, why: &str) -> ApiError {
    let fe = crate::api::validation::FieldError::invalid(field, why);
    ApiError::invalid("TokenRequest.authentication.k8s.io", "", &[fe]).details(
        "",
        "authentication.k8s.io",
        "TokenRequest",
    )
}

/// Answers a TokenRequest `body` for the ServiceAccount `sa` (already looked up): the TokenRequest
/// with `status.token` and `status.expirationTimestamp`, as the real server returns it (201).
pub fn token_request(key: &TokenKey, sa: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let text = |p: &str| sa.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    let (ns, name, uid) = (
        text("/metadata/namespace"),
        text("/metadata/name"),
        text("/metadata/uid"),
    );
    let req: Value = if body.is_empty() {
        json!({})
    } else if body.starts_with(b"k8s\0") {
        // kubectl sends built-in kinds as protobuf.
        from_protobuf(body).ok_or_else(|| {
            ApiError::bad_request("the TokenRequest body is not a valid protobuf TokenRequest")
        })?
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the TokenRequest body is not valid JSON: {e}")))?
    };
    let spec = req.get("spec").cloned().unwrap_or_else(|| json!({}));
    let expiration = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION,
        Some(v) => {
            let secs = v
                .as_i64()
                .ok_or_else(|| invalid("spec.expirationSeconds", "must be an integer"))?;
            if secs < MIN_EXPIRATION {
                return Err(invalid(
                    "spec.expirationSeconds",
                    &format!("{secs}: may not specify a duration less than 10 minutes"),
                ));
            }
            secs.min(MAX_EXPIRATION)
        }
    };
    let audiences = match spec.get("audiences").and_then(Value::as_array) {
        Some(a) if !a.is_empty() => Value::Array(a.clone()),
        _ => json!([DEFAULT_AUDIENCE]),
    };
    let now = now_unix();
    let claims = Claims {
        ns: ns.clone(),
        name: name.clone(),
        uid: uid.clone(),
        exp: now.saturating_add(expiration),
    };
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        // The ServiceAccount's name, namespace and uid, as kube-apiserver fills them in.
        "metadata": {"name": name, "namespace": ns, "uid": uid, "creationTimestamp": rfc3339(now)},
        "spec": {"audiences": audiences, "expirationSeconds": expiration, "boundObjectRef": null},
        "status": {"token": issue(key, &claims), "expirationTimestamp": rfc3339(claims.exp)}
    }))
}

/// One protobuf field: its number and its value (varint or length-delimited; fixed widths skipped).
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn fields(mut buf: &[u8]) -> Option<Vec<(u64, Wire<'_>)>> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let value = match key & 7 {
            0 => Wire::Varint(varint(&mut buf)?),
            2 => {
                let n = usize::try_from(varint(&mut buf)?).ok()?;
                let (v, rest) = (buf.get(..n)?, buf.get(n..)?);
                buf = rest;
                Wire::Bytes(v)
            }
            1 => {
                buf = buf.get(8..)?;
                continue;
            }
            5 => {
                buf = buf.get(4..)?;
                continue;
            }
            _ => return None,
        };
        out.push((key >> 3, value));
    }
    Some(out)
}

fn bytes_field<'a>(f: &[(u64, Wire<'a>)], n: u64) -> Option<&'a [u8]> {
    f.iter().find_map(|(k, v)| match v {
        Wire::Bytes(b) if *k == n => Some(*b),
        _ => None,
    })
}

/// The spec of a protobuf TokenRequest (`k8s\0` + runtime.Unknown{raw: TokenRequest}): `audiences`
/// (field 1) and `expirationSeconds` (field 4) of TokenRequestSpec (field 2).
fn from_protobuf(body: &[u8]) -> Option<Value> {
    let unknown = fields(body.strip_prefix(b"k8s\0")?)?;
    let request = fields(bytes_field(&unknown, 2)?)?;
    let Some(spec) = bytes_field(&request, 2) else {
        return Some(json!({}));
    };
    let spec = fields(spec)?;
    let mut out = serde_json::Map::new();
    let audiences: Vec<String> = spec
        .iter()
        .filter_map(|(k, v)| match v {
            Wire::Bytes(b) if *k == 1 => std::str::from_utf8(b).ok().map(String::from),
            _ => None,
        })
        .collect();
    if !audiences.is_empty() {
        out.insert("audiences".into(), json!(audiences));
    }
    if let Some(secs) = spec.iter().find_map(|(k, v)| match v {
        Wire::Varint(n) if *k == 4 => Some(*n as i64),
        _ => None,
    }) {
        out.insert("expirationSeconds".into(), json!(secs));
    }
    Some(json!({"spec": out}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa() -> Value {
        json!({"metadata": {"name": "mgr", "namespace": "qs", "uid": "u-1"}})
    }

    #[test]
    fn issued_tokens_verify_until_they_expire() {
        let key = TokenKey::default();
        key.init_from("admin");
        let resp = token_request(&key, &sa(), br#"{"spec":{"expirationSeconds":600}}"#).unwrap();
        let token = resp["status"]["token"].as_str().unwrap();
        let claims = verify(&key, token, now_unix()).expect("fresh token verifies");
        assert_eq!(claims.username(), "system:serviceaccount:qs:mgr");
        assert_eq!(claims.uid, "u-1");
        assert!(verify(&key, token, claims.exp).is_none(), "expired at exp");
        assert_eq!(resp["spec"]["expirationSeconds"], 600);
        assert_eq!(resp["spec"]["audiences"], json!([DEFAULT_AUDIENCE]));
    }

    #[test]
    fn forged_or_foreign_tokens_do_not_verify() {
        let key = TokenKey::default();
        key.init_from("admin");
        let claims = Claims {
            ns: "qs".into(),
            name: "mgr".into(),
            uid: "u".into(),
            exp: now_unix() + 1000,
        };
        let token = issue(&key, &claims);
        let other = TokenKey::default();
        other.init_from("another server");
        assert!(verify(&other, &token, now_unix()).is_none(), "another key");
        // The payload changed to name another ServiceAccount, the mac kept.
        let (_, mac) = token.rsplit_once('.').unwrap();
        let forged_claims = Claims {
            name: "admin".into(),
            ..claims
        };
        let forged = format!(
            "{PREFIX}{}.{mac}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged_claims).unwrap())
        );
        assert!(verify(&key, &forged, now_unix()).is_none(), "forged payload");
        for junk in ["", "qgsa.", "qgsa.x.y", "Bearer x", &token[..token.len() - 2]] {
            assert!(verify(&key, junk, now_unix()).is_none(), "{junk}");
        }
    }

    #[test]
    fn a_too_short_expiration_is_refused_as_the_real_server_does() {
        let key = TokenKey::default();
        let err = token_request(&key, &sa(), br#"{"spec":{"expirationSeconds":60}}"#).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.message
                .contains("may not specify a duration less than 10 minutes"),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_protobuf_token_request_is_read() {
        // spec{audiences: ["a"], expirationSeconds: 700} inside TokenRequest inside runtime.Unknown.
        let spec = [0x0a, 0x01, b'a', 0x20, 0xbc, 0x05];
        let mut request = vec![0x12, spec.len() as u8];
        request.extend_from_slice(&spec);
        let mut body = b"k8s\0".to_vec();
        body.extend_from_slice(&[0x12, request.len() as u8]);
        body.extend_from_slice(&request);
        assert_eq!(
            from_protobuf(&body),
            Some(json!({"spec": {"audiences": ["a"], "expirationSeconds": 700}}))
        );
        assert_eq!(from_protobuf(b"k8s\0\x12\xff"), None, "truncated");
    }

    #[test]
    fn hmac_matches_rfc4231_case_2_shape() {
        // RFC 4231 test case 2 uses a 4-byte key "Jefe"; our key is 32 bytes zero-padded the same way.
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let mac = hmac(&key, b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
