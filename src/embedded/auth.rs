//! Credentials of the loopback listener, as a single-node Kubernetes hands them out: a self-signed CA
//! and a serving certificate for the loopback names, and a random bearer token. Both are written only
//! into the kubeconfig the server emits (mode 0600); a request without the token is answered 401.
//! The in-process client (`EmbeddedServer::client`) does not go through the listener and needs none.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};

/// Why credentials could not be made.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("generating the serving certificate: {0}")]
    Cert(#[from] rcgen::Error),
    #[error("building the TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("{path}: {detail}")]
    Stored { path: String, detail: String },
}

/// What a data directory keeps so a restarted server serves the same CA and token (a kubeconfig
/// written before a restart keeps working, as k3s keeps its TLS under its data directory).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    ca_pem: String,
    /// base64 DER: the serving certificate, the CA certificate, the serving key (PKCS#8).
    cert_der: String,
    ca_der: String,
    key_der: String,
    token: String,
}

/// The credentials file inside a data directory (mode 0600).
pub const CREDENTIALS_FILE: &str = "credentials.json";

/// What a client needs to reach the listener, and what the listener checks.
pub struct Credentials {
    /// PEM of the CA that signed the serving certificate (the kubeconfig's
    /// `certificate-authority-data`).
    pub ca_pem: String,
    /// The bearer token every request must carry.
    pub token: String,
    /// The listener's TLS configuration (ALPN `h2`, `http/1.1`).
    pub tls: Arc<rustls::ServerConfig>,
    /// The serving key (PKCS#8 DER, ECDSA P-256), which also signs ServiceAccount tokens
    /// (`satoken.rs`), as kube-apiserver falls back to its TLS key for them.
    pub key_pkcs8: Vec<u8>,
    token_digest: [u8; 32],
}

impl Credentials {
    /// A fresh CA, a serving certificate for `127.0.0.1`, `::1` and `localhost` signed by it, and a
    /// 256-bit random token.
    pub fn generate() -> Result<Self, AuthError> {
        Self::from_stored(Self::fresh()?)
    }

    /// The credentials kept in `dir` (made and written there, mode 0600, the first time).
    pub fn load_or_generate(dir: &Path) -> Result<Self, AuthError> {
        let path = dir.join(CREDENTIALS_FILE);
        let bad = |detail: String| AuthError::Stored {
            path: path.display().to_string(),
            detail,
        };
        match std::fs::read(&path) {
            Ok(bytes) => {
                let stored: Stored =
                    serde_json::from_slice(&bytes).map_err(|e| bad(format!("not valid credentials: {e}")))?;
                Self::from_stored(stored).map_err(|e| bad(e.to_string()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let stored = Self::fresh()?;
                let text = serde_json::to_vec(&stored).map_err(|e| bad(e.to_string()))?;
                write_private(&path, &text).map_err(|e| bad(e.to_string()))?;
                Self::from_stored(stored)
            }
            Err(e) => Err(bad(e.to_string())),
        }
    }

    fn fresh() -> Result<Stored, AuthError> {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "quotagate-embedded-ca");
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = rcgen::KeyPair::generate()?;
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = rcgen::Issuer::new(ca_params, ca_key);

        let names: Vec<String> = vec!["127.0.0.1".into(), "::1".into(), "localhost".into()];
        let mut params = rcgen::CertificateParams::new(names)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "quotagate-embedded");
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let key = rcgen::KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;

        Ok(Stored {
            ca_pem: ca_cert.pem(),
            cert_der: STANDARD.encode(cert.der()),
            ca_der: STANDARD.encode(ca_cert.der()),
            key_der: STANDARD.encode(key.serialize_der()),
            token: URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>()),
        })
    }

    fn from_stored(stored: Stored) -> Result<Self, AuthError> {
        let der = |field: &str, b64: &str| {
            STANDARD.decode(b64).map_err(|e| AuthError::Stored {
                path: field.to_string(),
                detail: format!("not base64: {e}"),
            })
        };
        let chain = vec![
            CertificateDer::from(der("certDer", &stored.cert_der)?),
            CertificateDer::from(der("caDer", &stored.ca_der)?),
        ];
        let key_pkcs8 = der("keyDer", &stored.key_der)?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_pkcs8.clone()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key_der)?;
        // As kube-apiserver: HTTP/2 first, so clients multiplex their watches over one connection.
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];

        Ok(Credentials {
            ca_pem: stored.ca_pem,
            token_digest: Sha256::digest(stored.token.as_bytes()).into(),
            token: stored.token,
            key_pkcs8,
            tls: Arc::new(tls),
        })
    }

    /// Whether an `Authorization` header value carries the token (`Bearer <token>`, the scheme in
    /// any case, as the API server reads it). Compared as digests, so the time taken says nothing
    /// about how much of a guess was right.
    pub fn accepts(&self, authorization: Option<&str>) -> bool {
        let Some((scheme, rest)) = authorization.and_then(|v| v.split_once(' ')) else {
            return false;
        };
        let given = rest.split(' ').next().unwrap_or_default();
        if !scheme.eq_ignore_ascii_case("bearer") || given.is_empty() {
            return false;
        }
        let d: [u8; 32] = Sha256::digest(given.as_bytes()).into();
        d.iter()
            .zip(self.token_digest.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }

    /// A kubeconfig for `https://ADDR` with the CA and the token, namespace default.
    pub fn kubeconfig(&self, addr: SocketAddr) -> String {
        let host = match addr {
            SocketAddr::V4(a) => a.to_string(),
            SocketAddr::V6(a) => format!("[{}]:{}", a.ip(), a.port()),
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: quotagate-embedded\n  cluster:\n    server: https://{host}\n    certificate-authority-data: {ca}\nusers:\n- name: quotagate\n  user:\n    token: {token}\ncontexts:\n- name: quotagate-embedded\n  context:\n    cluster: quotagate-embedded\n    user: quotagate\n    namespace: default\ncurrent-context: quotagate-embedded\n",
            ca = STANDARD.encode(self.ca_pem.as_bytes()),
            token = self.token,
        )
    }

    /// Writes the kubeconfig readable by its owner only (0600), into a new file renamed over `path`;
    /// a `path` that is a symbolic link or another user's file is refused (`private.rs`).
    pub fn write_kubeconfig(&self, path: &Path, addr: SocketAddr) -> std::io::Result<()> {
        write_private(path, self.kubeconfig(addr).as_bytes())
    }
}

use super::private::write_private;

/// The Status a real API server sends for a request without valid credentials.
pub fn unauthorized() -> serde_json::Value {
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_token_is_accepted() {
        let c = Credentials::generate().unwrap();
        assert!(c.accepts(Some(&format!("Bearer {}", c.token))));
        assert!(c.accepts(Some(&format!("bearer {}", c.token))));
        for bad in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer "),
            Some(c.token.as_str()),
            Some(&format!("Basic {}", c.token)),
            Some(&format!("Bearer {}x", c.token)),
            Some(&format!("Bearer {}", &c.token[1..])),
        ] {
            assert!(!c.accepts(bad), "{bad:?}");
        }
        let other = Credentials::generate().unwrap();
        assert_ne!(c.token, other.token);
        assert_ne!(c.ca_pem, other.ca_pem);
    }

    #[test]
    fn a_data_directory_keeps_the_same_ca_and_token() {
        let dir = std::env::temp_dir().join(format!("quotagate-auth-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let first = Credentials::load_or_generate(&dir).unwrap();
        let again = Credentials::load_or_generate(&dir).unwrap();
        assert_eq!(
            (first.ca_pem.as_str(), first.token.as_str()),
            (again.ca_pem.as_str(), again.token.as_str())
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join(CREDENTIALS_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(dir.join(CREDENTIALS_FILE), b"{not json").unwrap();
        let err = Credentials::load_or_generate(&dir).err().unwrap().to_string();
        assert!(
            err.contains(CREDENTIALS_FILE) && err.contains("not valid credentials"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_kubeconfig_carries_https_the_ca_and_the_token() {
        let c = Credentials::generate().unwrap();
        let text = c.kubeconfig("127.0.0.1:6443".parse().unwrap());
        assert!(text.contains("server: https://127.0.0.1:6443\n"), "{text}");
        assert!(text.contains(&format!("token: {}\n", c.token)), "{text}");
        let kc = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        let ca = cluster.certificate_authority_data.as_deref().unwrap();
        assert_eq!(STANDARD.decode(ca).unwrap(), c.ca_pem.as_bytes());
        let v6 = c.kubeconfig("[::1]:6443".parse().unwrap());
        assert!(v6.contains("server: https://[::1]:6443\n"), "{v6}");
    }
}
