//! ServiceAccount tokens, as the TokenRequest API (`POST .../serviceaccounts/NAME/token`, what
//! `kubectl create token` and the kubelet's projected token volume call) issues them: a bearer token
//! that authenticates as `system:serviceaccount:NS:NAME` (groups `system:serviceaccounts`,
//! `system:serviceaccounts:NS`, `system:authenticated`), bound to the ServiceAccount's uid, and
//! authorized by the store's RBAC like any user.
//!
//! A JWT as kube-apiserver v1.36.3 signs it (k8s.io/kubernetes pkg/serviceaccount, `Claims` in
//! claims.go and `signerFromECDSAPrivateKey` in jwt.go): header `{"alg":"ES256","kid":...}`, the
//! kid the base64url SHA-256 of the public key's PKIX DER; claims `aud`, `exp`, `iat`, `iss`, `jti`,
//! `kubernetes.io` (namespace, serviceaccount name and uid), `nbf`, `sub`, in the sorted order Go's
//! map encoding gives them. The key is the listener's TLS serving key (ECDSA P-256), as
//! kube-apiserver verifies with `--tls-private-key-file` when no `--service-account-key-file` is
//! given; so tokens survive a restart with `--data-dir` exactly when the serving certificate does.
//! A token is checked as `JWTTokenAuthenticator` checks it: the signature, the issuer, an audience
//! of the API server's (the issuer), and `exp`, `nbf`, `iat` with go-jose's one-minute leeway; and it
//! stops working when its ServiceAccount is deleted or replaced (another uid), as a bound token does.

use std::sync::OnceLock;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, UnparsedPublicKey,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::error::ApiError;

/// The real server's floor for `spec.expirationSeconds` (10 minutes).
const MIN_EXPIRATION: i64 = 600;
/// kube-apiserver's default when the request names none (1 hour).
const DEFAULT_EXPIRATION: i64 = 3600;
/// The longest we issue (kube-apiserver's `--service-account-max-token-expiration` is unset by
/// default; a year bounds a token that leaks).
const MAX_EXPIRATION: i64 = 365 * 24 * 3600;
/// The issuer, and so the API server's own audience (`--api-audiences` defaults to the issuer),
/// as scripts/control-plane.sh runs kube-apiserver.
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// go-jose's `DefaultLeeway` for `exp`, `nbf` and `iat`.
const LEEWAY: i64 = 60;
/// The PKIX (SubjectPublicKeyInfo) DER prefix of a P-256 public key: id-ecPublicKey, prime256v1,
/// then the 65-byte uncompressed point as a BIT STRING (what Go's `x509.MarshalPKIXPublicKey` writes).
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86,
    0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// An ES256 signing key and its key id.
struct Signer {
    pair: EcdsaKeyPair,
    kid: String,
}

impl Signer {
    fn from_pkcs8(pkcs8: &[u8]) -> Option<Signer> {
        let rng = ring::rand::SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8, &rng).ok()?;
        let mut spki = P256_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(pair.public_key().as_ref());
        let kid = URL_SAFE_NO_PAD.encode(Sha256::digest(&spki));
        Some(Signer { pair, kid })
    }

    fn random() -> Option<Signer> {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).ok()?;
        Signer::from_pkcs8(pkcs8.as_ref())
    }
}

/// The signing key, set once per server: the listener's serving key when it starts, a random one
/// when a token is asked for before that (in-process only).
#[derive(Default)]
pub struct TokenKey(OnceLock<Signer>);

impl TokenKey {
    /// Signs with the ECDSA P-256 key of `pkcs8` (the listener's serving key; first caller wins).
    /// A key of another kind leaves a random one to be made on first use.
    pub fn init_from(&self, pkcs8: &[u8]) {
        if let Some(s) = Signer::from_pkcs8(pkcs8) {
            let _ = self.0.set(s);
        }
    }

    fn signer(&self) -> Option<&Signer> {
        if let Some(s) = self.0.get() {
            return Some(s);
        }
        let _ = self.0.set(Signer::random()?);
        self.0.get()
    }
}

/// Who a valid token names.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// The JWT for `claims`, issued at `now` for `audiences`, as kube-apiserver's `GenerateToken`
/// writes it; `None` only when no key could be made.
fn issue(key: &TokenKey, claims: &Claims, audiences: &Value, now: i64) -> Option<String> {
    let signer = key.signer()?;
    let header = json!({"alg": "ES256", "kid": signer.kid});
    // Keys in sorted order: go-jose merges the public and private claims into a Go map.
    let payload = json!({
        "aud": audiences,
        "exp": claims.exp,
        "iat": now,
        "iss": ISSUER,
        "jti": super::meta::new_uid(),
        "kubernetes.io": {
            "namespace": claims.ns,
            "serviceaccount": {"name": claims.name, "uid": claims.uid}
        },
        "nbf": now,
        "sub": claims.username(),
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header).ok()?),
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&payload).ok()?)
    );
    let rng = ring::rand::SystemRandom::new();
    let sig = signer.pair.sign(&rng, signing_input.as_bytes()).ok()?;
    Some(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(sig.as_ref())
    ))
}

/// The claims of `token` when it is a JWT this server signed, for the API server's audience, and
/// valid at `now` (Unix seconds), as `JWTTokenAuthenticator` and its validator check it.
pub fn verify(key: &TokenKey, token: &str, now: i64) -> Option<Claims> {
    let signer = key.signer()?;
    let mut parts = token.split('.');
    let (h, p, s) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(h).ok()?).ok()?;
    if header.get("alg")?.as_str()? != "ES256" {
        return None;
    }
    if let Some(kid) = header.get("kid")
        && kid.as_str()? != signer.kid
    {
        return None;
    }
    let sig = URL_SAFE_NO_PAD.decode(s).ok()?;
    let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, signer.pair.public_key().as_ref());
    public.verify(format!("{h}.{p}").as_bytes(), &sig).ok()?;
    let c: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).ok()?).ok()?;
    if c.get("iss")?.as_str()? != ISSUER {
        return None;
    }
    // No audience means the API server's own; otherwise it must be among them.
    let for_us = match c.get("aud") {
        None | Some(Value::Null) => true,
        Some(Value::String(a)) => a == ISSUER,
        Some(Value::Array(a)) => a.is_empty() || a.iter().any(|a| a.as_str() == Some(ISSUER)),
        Some(_) => false,
    };
    let time = |k: &str| c.get(k).and_then(Value::as_i64);
    let exp = time("exp")?;
    let expired = now - LEEWAY > exp;
    let early = |k| time(k).is_some_and(|t| now + LEEWAY < t);
    if !for_us || expired || early("nbf") || early("iat") {
        return None;
    }
    let k8s = c.get("kubernetes.io")?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(String::from);
    Some(Claims {
        ns: text(k8s.get("namespace"))?,
        name: text(k8s.pointer("/serviceaccount/name"))?,
        uid: text(k8s.pointer("/serviceaccount/uid"))?,
        exp,
    })
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
        _ => json!([ISSUER]),
    };
    let now = now_unix();
    let claims = Claims {
        ns: ns.clone(),
        name: name.clone(),
        uid: uid.clone(),
        exp: now.saturating_add(expiration),
    };
    let token = issue(key, &claims, &audiences, now)
        .ok_or_else(|| ApiError::internal("no ServiceAccount token signing key could be made"))?;
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        // The ServiceAccount's name, namespace and uid, as kube-apiserver fills them in.
        "metadata": {"name": name, "namespace": ns, "uid": uid, "creationTimestamp": rfc3339(now)},
        "spec": {"audiences": audiences, "expirationSeconds": expiration, "boundObjectRef": null},
        "status": {"token": token, "expirationTimestamp": rfc3339(claims.exp)}
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

    fn key() -> TokenKey {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let key = TokenKey::default();
        key.init_from(pkcs8.as_ref());
        key
    }

    fn part(token: &str, i: usize) -> Value {
        let p = token.split('.').nth(i).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap()
    }

    /// Signs `payload` with `key` as `issue` does, for tokens the server would not issue itself.
    fn signed(key: &TokenKey, payload: &Value) -> String {
        let s = key.signer().unwrap();
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json!({"alg": "ES256", "kid": s.kid})).unwrap()),
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(payload).unwrap())
        );
        let sig = s
            .pair
            .sign(&ring::rand::SystemRandom::new(), input.as_bytes())
            .unwrap();
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
    }

    /// The token's shape as k8s.io/kubernetes v1.36.3 pkg/serviceaccount writes it: `Claims`
    /// (claims.go) merged into a map by go-jose's builder, so the keys come sorted; the ES256 header
    /// with the kid of `keyIDFromPublicKey` (jwt.go); accepted up to go-jose's one-minute leeway
    /// past `exp` (claims.go `Validate`).
    #[test]
    fn issued_tokens_are_the_real_servers_jwts_and_verify_until_they_expire() {
        let key = key();
        let resp = token_request(&key, &sa(), br#"{"spec":{"expirationSeconds":600}}"#).unwrap();
        let token = resp["status"]["token"].as_str().unwrap();
        assert!(token.starts_with("eyJ"), "{token}");
        let header = part(token, 0);
        let mut spki = P256_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(key.signer().unwrap().pair.public_key().as_ref());
        assert_eq!(spki.len(), 91, "a P-256 SubjectPublicKeyInfo");
        assert_eq!(
            header,
            json!({"alg": "ES256", "kid": URL_SAFE_NO_PAD.encode(Sha256::digest(&spki))})
        );
        let payload = part(token, 1);
        let keys: Vec<&str> = payload.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["aud", "exp", "iat", "iss", "jti", "kubernetes.io", "nbf", "sub"]
        );
        assert_eq!(payload["aud"], json!([ISSUER]));
        assert_eq!(payload["iss"], ISSUER);
        assert_eq!(payload["sub"], "system:serviceaccount:qs:mgr");
        assert_eq!(
            payload["kubernetes.io"],
            json!({"namespace": "qs", "serviceaccount": {"name": "mgr", "uid": "u-1"}})
        );
        let iat = payload["iat"].as_i64().unwrap();
        assert_eq!(payload["nbf"].as_i64(), Some(iat));
        assert_eq!(payload["exp"].as_i64(), Some(iat + 600));

        let claims = verify(&key, token, iat).expect("fresh token verifies");
        assert_eq!(claims.username(), "system:serviceaccount:qs:mgr");
        assert_eq!(claims.uid, "u-1");
        assert!(
            verify(&key, token, claims.exp + LEEWAY).is_some(),
            "within the leeway"
        );
        assert!(verify(&key, token, claims.exp + LEEWAY + 1).is_none(), "expired");
        assert!(verify(&key, token, iat - LEEWAY - 1).is_none(), "not valid yet");
        assert_eq!(resp["spec"]["expirationSeconds"], 600);
        assert_eq!(resp["spec"]["audiences"], json!([ISSUER]));
    }

    #[test]
    fn forged_foreign_or_other_audience_tokens_do_not_verify() {
        let key = key();
        let now = now_unix();
        let token = token_request(&key, &sa(), b"").unwrap()["status"]["token"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(verify(&key, &token, now).is_some());
        assert!(verify(&self::key(), &token, now).is_none(), "another key");
        // The payload changed to name another ServiceAccount, the signature kept.
        let mut payload = part(&token, 1);
        payload["kubernetes.io"]["serviceaccount"]["name"] = json!("admin");
        let parts: Vec<&str> = token.split('.').collect();
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&payload).unwrap()),
            parts[2]
        );
        assert!(verify(&key, &forged, now).is_none(), "forged payload");
        // Signed by us, but for another audience or issuer (JWTTokenAuthenticator refuses both).
        let mut other_aud = part(&token, 1);
        other_aud["aud"] = json!(["vault"]);
        assert!(verify(&key, &signed(&key, &other_aud), now).is_none(), "audience");
        let mut other_iss = part(&token, 1);
        other_iss["iss"] = json!("https://elsewhere");
        assert!(verify(&key, &signed(&key, &other_iss), now).is_none(), "issuer");
        // The same claims signed again verify: the checks above are what refused.
        assert!(verify(&key, &signed(&key, &part(&token, 1)), now).is_some());
        for junk in [
            "",
            "a.b",
            "a.b.c",
            "Bearer x",
            "x.y.z.w",
            &token[..token.len() - 2],
        ] {
            assert!(verify(&key, junk, now).is_none(), "{junk}");
        }
    }

    #[test]
    fn a_token_request_for_another_audience_does_not_authenticate_here() {
        let key = key();
        let resp = token_request(&key, &sa(), br#"{"spec":{"audiences":["vault"]}}"#).unwrap();
        assert_eq!(resp["spec"]["audiences"], json!(["vault"]));
        let token = resp["status"]["token"].as_str().unwrap();
        assert_eq!(part(token, 1)["aud"], json!(["vault"]));
        assert!(verify(&key, token, now_unix()).is_none());
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
}
