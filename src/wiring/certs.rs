//! The webhook's certificate, managed by the manager (Kueue's `internalCertManagement`, on unless the
//! Kueue Configuration turns it off for cert-manager): the leader makes a CA and a serving
//! certificate for the webhook Service, keeps them in one Secret of its namespace, writes the CA
//! into the `caBundle` of quotagate's webhook configurations and issues a new serving certificate
//! before the old one expires. Every replica loads the certificate from the Secret and serves the
//! webhook only once it has one; readiness waits for that.
//!
//! The decision is [`plan`] (pure); [`run`] is the loop around it.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use base64::Engine;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, PostParams};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::watch;

/// The CA lives ten years, a serving certificate one; both are replaced 90 days before they end
/// (a serving certificate is never issued past its CA's end).
pub const CA_VALIDITY: SignedDuration = SignedDuration::from_hours(24 * 365 * 10);
pub const SERVING_VALIDITY: SignedDuration = SignedDuration::from_hours(24 * 365);
pub const RENEW_BEFORE: SignedDuration = SignedDuration::from_hours(24 * 90);

/// The webhook configurations whose caBundle the leader keeps (`config/webhook/manifests.yaml`).
pub const MUTATING: &str = "quotagate-mutating-webhook-configuration";
pub const VALIDATING: &str = "quotagate-validating-webhook-configuration";

const CA_CRT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const TLS_CRT: &str = "tls.crt";
const TLS_KEY: &str = "tls.key";
const CA_NOT_AFTER: &str = "quotagate.io/ca-not-after";
const NOT_AFTER: &str = "quotagate.io/not-after";
const DNS_NAMES: &str = "quotagate.io/dns-names";

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("making a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("loading the serving certificate: {0}")]
    Load(String),
    #[error("Secret {0}: {1}")]
    Api(String, kube::Error),
}

/// The names the API server calls the webhook Service by.
pub fn dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// A CA and a serving certificate signed by it, PEM, with when each ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle {
    pub ca_cert: String,
    pub ca_key: String,
    pub cert: String,
    pub key: String,
    pub ca_not_after: Timestamp,
    pub not_after: Timestamp,
    pub names: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// The Secret's certificates are good: use them.
    Keep,
    /// A new serving certificate from the same CA (caBundle unchanged): the names changed or the
    /// certificate ends within [`RENEW_BEFORE`].
    Reissue,
    /// A new CA and serving certificate: none stored, unreadable, or the CA ends too soon to sign a
    /// full-length serving certificate.
    Rebuild,
}

/// What to do with what the Secret holds, at `now`.
pub fn plan(stored: Option<&Bundle>, names: &[String], now: Timestamp) -> Plan {
    let Some(b) = stored else { return Plan::Rebuild };
    if b.ca_not_after.duration_since(now) < SERVING_VALIDITY + RENEW_BEFORE {
        Plan::Rebuild
    } else if b.names != names || b.not_after.duration_since(now) < RENEW_BEFORE {
        Plan::Reissue
    } else {
        Plan::Keep
    }
}

/// Midnight UTC of the day `at` falls on, and that day: certificates are dated by the day.
fn day_of(at: Timestamp) -> (Timestamp, (i32, u8, u8)) {
    let date = at.to_zoned(jiff::tz::TimeZone::UTC).date();
    let midnight = date
        .to_zoned(jiff::tz::TimeZone::UTC)
        .map(|z| z.timestamp())
        .unwrap_or(at);
    // jiff's months and days are 1-12 and 1-31, so the narrowing is exact.
    (
        midnight,
        (i32::from(date.year()), date.month() as u8, date.day() as u8),
    )
}

fn ca_params(not_before: Timestamp, not_after: Timestamp) -> Result<rcgen::CertificateParams, rcgen::Error> {
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new())?;
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(rcgen::DnType::CommonName, "quotagate-webhook-ca");
    p.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut p, not_before, not_after);
    Ok(p)
}

fn set_validity(p: &mut rcgen::CertificateParams, not_before: Timestamp, not_after: Timestamp) {
    let (_, (y, m, d)) = day_of(not_before);
    p.not_before = rcgen::date_time_ymd(y, m, d);
    let (_, (y, m, d)) = day_of(not_after);
    p.not_after = rcgen::date_time_ymd(y, m, d);
}

/// A new serving certificate for `names` from `ca` (`None`: a new CA too), valid from the day
/// before `now` (clocks differ) for [`SERVING_VALIDITY`].
pub fn issue(ca: Option<&Bundle>, names: &[String], now: Timestamp) -> Result<Bundle, CertError> {
    let start = now - SignedDuration::from_hours(24);
    let (ca_cert, ca_key_pem, ca_not_after, ca_params) = match ca {
        Some(b) => {
            // The same key and name sign as the stored CA: what verifies a certificate is the
            // issuer's name and public key, so the stored certificate stays the caBundle.
            (
                b.ca_cert.clone(),
                b.ca_key.clone(),
                b.ca_not_after,
                ca_params(start, b.ca_not_after)?,
            )
        }
        None => {
            let key = rcgen::KeyPair::generate()?;
            let not_after = day_of(now + CA_VALIDITY).0;
            let params = ca_params(start, not_after)?;
            let cert = params.self_signed(&key)?;
            (cert.pem(), key.serialize_pem(), not_after, params)
        }
    };
    let ca_key = rcgen::KeyPair::from_pem(&ca_key_pem)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let mut p = rcgen::CertificateParams::new(names.to_vec())?;
    p.distinguished_name.push(
        rcgen::DnType::CommonName,
        names.first().map(String::as_str).unwrap_or("quotagate-webhook"),
    );
    p.use_authority_key_identifier_extension = true;
    p.key_usages = vec![
        rcgen::KeyUsagePurpose::DigitalSignature,
        rcgen::KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let not_after = day_of(now + SERVING_VALIDITY).0.min(ca_not_after);
    set_validity(&mut p, start, not_after);
    let key = rcgen::KeyPair::generate()?;
    let cert = p.signed_by(&key, &issuer)?;
    Ok(Bundle {
        ca_cert,
        ca_key: ca_key_pem,
        cert: cert.pem(),
        key: key.serialize_pem(),
        ca_not_after,
        not_after,
        names: names.to_vec(),
    })
}

/// The bundle a Secret holds; `None` when anything is missing or unreadable (then it is rebuilt).
pub fn from_secret(s: &Secret) -> Option<Bundle> {
    let data = s.data.as_ref()?;
    let text = |k: &str| data.get(k).and_then(|b| String::from_utf8(b.0.clone()).ok());
    let ann = s.metadata.annotations.as_ref()?;
    let at = |k: &str| ann.get(k)?.parse::<Timestamp>().ok();
    let b = Bundle {
        ca_cert: text(CA_CRT)?,
        ca_key: text(CA_KEY)?,
        cert: text(TLS_CRT)?,
        key: text(TLS_KEY)?,
        ca_not_after: at(CA_NOT_AFTER)?,
        not_after: at(NOT_AFTER)?,
        names: ann.get(DNS_NAMES)?.split(',').map(str::to_string).collect(),
    };
    // A key that does not load is as good as none.
    certified_key(&b).ok()?;
    rcgen::KeyPair::from_pem(&b.ca_key).ok()?;
    Some(b)
}

/// `b` written into `secret` (kubernetes.io/tls, plus the CA's certificate and key).
pub fn to_secret(mut secret: Secret, b: &Bundle) -> Secret {
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    secret.type_ = Some("kubernetes.io/tls".to_string());
    secret.data = Some(
        [
            (CA_CRT, &b.ca_cert),
            (CA_KEY, &b.ca_key),
            (TLS_CRT, &b.cert),
            (TLS_KEY, &b.key),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), bytes(v)))
        .collect(),
    );
    let ann = secret.metadata.annotations.get_or_insert_with(Default::default);
    ann.insert(CA_NOT_AFTER.to_string(), b.ca_not_after.to_string());
    ann.insert(NOT_AFTER.to_string(), b.not_after.to_string());
    ann.insert(DNS_NAMES.to_string(), b.names.join(","));
    secret
}

fn certified_key(b: &Bundle) -> Result<CertifiedKey, CertError> {
    let load = |e: &dyn std::fmt::Display| CertError::Load(e.to_string());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(b.cert.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| load(&e))?;
    let key = PrivateKeyDer::from_pem_slice(b.key.as_bytes()).map_err(|e| load(&e))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| load(&e))?;
    Ok(CertifiedKey::new(certs, signer))
}

/// The serving certificate the webhook presents, swapped in place when the Secret changes.
#[derive(Debug)]
pub struct CertResolver {
    current: RwLock<Option<(Bundle, Arc<CertifiedKey>)>>,
    loaded: watch::Sender<bool>,
}

impl Default for CertResolver {
    fn default() -> Self {
        CertResolver {
            current: RwLock::new(None),
            loaded: watch::channel(false).0,
        }
    }
}

impl CertResolver {
    /// Serves `b` from now on (a no-op when it is what is served).
    pub fn load(&self, b: &Bundle) -> Result<(), CertError> {
        let key = Arc::new(certified_key(b)?);
        let mut cur = self.current.write().unwrap_or_else(|e| e.into_inner());
        if cur.as_ref().is_some_and(|(held, _)| held == b) {
            return Ok(());
        }
        *cur = Some((b.clone(), key));
        self.loaded.send_replace(true);
        Ok(())
    }

    /// What is served now.
    pub fn current(&self) -> Option<Bundle> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|(b, _)| b.clone())
    }

    /// Until a certificate is loaded.
    pub async fn loaded(&self) {
        let mut rx = self.loaded.subscribe();
        let _ = rx.wait_for(|l| *l).await;
    }

    /// A TLS configuration presenting whatever certificate is loaded at each handshake.
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|(_, k)| k.clone())
    }
}

/// Where the certificate lives and what it is for.
#[derive(Clone, Debug)]
pub struct CertOptions {
    pub namespace: String,
    pub service: String,
    pub secret: String,
    /// How often the Secret is looked at again (renewal, another replica's write).
    pub check_every: Duration,
}

/// The leader's part: the Secret holds a good bundle (made, reissued or kept) afterwards.
async fn ensure_secret(api: &Api<Secret>, o: &CertOptions, now: Timestamp) -> Result<Bundle, CertError> {
    let err = |e| CertError::Api(o.secret.clone(), e);
    let names = dns_names(&o.service, &o.namespace);
    let existing = api.get_opt(&o.secret).await.map_err(err)?;
    let stored = existing.as_ref().and_then(from_secret);
    let fresh = match plan(stored.as_ref(), &names, now) {
        Plan::Keep => return stored.ok_or_else(|| CertError::Load("kept bundle vanished".into())),
        Plan::Reissue => issue(stored.as_ref(), &names, now)?,
        Plan::Rebuild => issue(None, &names, now)?,
    };
    match existing {
        // resourceVersion kept: a write by another replica since is a conflict, and the next pass reads it.
        Some(s) => api
            .replace(&o.secret, &PostParams::default(), &to_secret(s, &fresh))
            .await
            .map_err(err)?,
        None => {
            let mut s = Secret::default();
            s.metadata.name = Some(o.secret.clone());
            s.metadata.namespace = Some(o.namespace.clone());
            s.metadata.labels = Some(
                [(
                    "app.kubernetes.io/managed-by".to_string(),
                    "quotagate".to_string(),
                )]
                .into(),
            );
            api.create(&PostParams::default(), &to_secret(s, &fresh))
                .await
                .map_err(err)?
        }
    };
    tracing::info!(secret = %o.secret, not_after = %fresh.not_after, ca_not_after = %fresh.ca_not_after, "webhook certificate written");
    Ok(fresh)
}

/// Writes `ca` into every webhook's caBundle of quotagate's two configurations. An absent
/// configuration (not installed) is skipped.
async fn ensure_ca_bundle(client: &Client, ca: &str) -> Result<(), kube::Error> {
    let want = ByteString(ca.as_bytes().to_vec());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    if let Some(mut c) = mutating.get_opt(MUTATING).await? {
        let hooks = c.webhooks.iter_mut().flatten();
        if hooks.fold(false, |changed, w| {
            changed | set_bundle(&mut w.client_config.ca_bundle, &want)
        }) {
            mutating.replace(MUTATING, &PostParams::default(), &c).await?;
            tracing::info!(configuration = MUTATING, "caBundle written");
        }
    }
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    if let Some(mut c) = validating.get_opt(VALIDATING).await? {
        let hooks = c.webhooks.iter_mut().flatten();
        if hooks.fold(false, |changed, w| {
            changed | set_bundle(&mut w.client_config.ca_bundle, &want)
        }) {
            validating.replace(VALIDATING, &PostParams::default(), &c).await?;
            tracing::info!(configuration = VALIDATING, "caBundle written");
        }
    }
    Ok(())
}

fn set_bundle(slot: &mut Option<ByteString>, want: &ByteString) -> bool {
    if slot.as_ref() == Some(want) {
        return false;
    }
    *slot = Some(want.clone());
    true
}

/// Keeps the certificate until `cancel`: the leader writes the Secret and the caBundles; every
/// replica loads the Secret's certificate into `resolver`. Errors are logged and retried.
pub async fn run(
    client: Client,
    o: CertOptions,
    mut leader: watch::Receiver<bool>,
    resolver: Arc<CertResolver>,
    cancel: tokio_util::sync::CancellationToken,
) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &o.namespace);
    loop {
        let leads = *leader.borrow_and_update();
        let bundle = if leads {
            match ensure_secret(&secrets, &o, Timestamp::now()).await {
                Ok(b) => {
                    if let Err(e) = ensure_ca_bundle(&client, &b.ca_cert).await {
                        tracing::warn!(error = %e, "cannot write the webhook caBundle; retrying");
                    }
                    Some(b)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot keep the webhook certificate; retrying");
                    None
                }
            }
        } else {
            match secrets.get_opt(&o.secret).await {
                Ok(s) => s.as_ref().and_then(from_secret),
                Err(e) => {
                    tracing::warn!(error = %e, secret = %o.secret, "cannot read the webhook certificate; retrying");
                    None
                }
            }
        };
        if let Some(b) = &bundle
            && let Err(e) = resolver.load(b)
        {
            tracing::warn!(error = %e, "cannot load the webhook certificate");
        }
        // Quickly until a certificate is served, then at the check interval; at once on a change
        // of leadership.
        let wait = if resolver.current().is_some() {
            o.check_every
        } else {
            o.check_every.min(Duration::from_secs(1))
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
            r = leader.changed() => if r.is_err() { return },
        }
    }
}

/// The CA to trust for the webhook, as a caBundle holds it (base64 of the PEM), for logs and tests.
pub fn ca_bundle_b64(b: &Bundle) -> String {
    base64::engine::general_purpose::STANDARD.encode(b.ca_cert.as_bytes())
}

#[cfg(test)]
mod tests;
