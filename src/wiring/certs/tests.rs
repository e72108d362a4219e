use super::*;

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn names() -> Vec<String> {
    dns_names("quotagate-webhook-service", "quotagate-system")
}

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn plan_keeps_reissues_and_rebuilds_as_the_dates_say() {
    let now = at("2026-01-01T00:00:00Z");
    let b = issue(None, &names(), now).unwrap();
    assert_eq!(
        b.not_after,
        at("2027-01-01T00:00:00Z"),
        "one year, dated by the day"
    );
    assert_eq!(
        b.ca_not_after,
        at("2035-12-30T00:00:00Z"),
        "ten years of 365 days"
    );
    let day = SignedDuration::from_hours(24);
    type Case = (&'static str, Option<Bundle>, Vec<String>, Timestamp, Plan);
    let cases: Vec<Case> = vec![
        ("nothing stored", None, names(), now, Plan::Rebuild),
        ("fresh", Some(b.clone()), names(), now, Plan::Keep),
        (
            "91 days before the end",
            Some(b.clone()),
            names(),
            b.not_after - day * 91,
            Plan::Keep,
        ),
        (
            "89 days before the end",
            Some(b.clone()),
            names(),
            b.not_after - day * 89,
            Plan::Reissue,
        ),
        (
            "expired",
            Some(b.clone()),
            names(),
            b.not_after + day,
            Plan::Reissue,
        ),
        (
            "another namespace",
            Some(b.clone()),
            dns_names("quotagate-webhook-service", "platform"),
            now,
            Plan::Reissue,
        ),
        (
            "CA cannot cover a new certificate",
            Some(b.clone()),
            names(),
            b.ca_not_after - SERVING_VALIDITY - day * 89,
            Plan::Rebuild,
        ),
    ];
    for (why, stored, names, now, want) in cases {
        assert_eq!(plan(stored.as_ref(), &names, now), want, "{why}");
    }
}

#[test]
fn a_secret_round_trips_and_a_damaged_one_is_rebuilt() {
    let b = issue(None, &names(), Timestamp::now()).unwrap();
    let s = to_secret(Secret::default(), &b);
    assert_eq!(s.type_.as_deref(), Some("kubernetes.io/tls"));
    assert_eq!(from_secret(&s), Some(b.clone()));
    let mut bad = s.clone();
    bad.data
        .as_mut()
        .unwrap()
        .insert(TLS_KEY.into(), ByteString(b"not a key".to_vec()));
    assert_eq!(from_secret(&bad), None);
    let mut bad = s.clone();
    bad.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(NOT_AFTER.into(), "soon".into());
    assert_eq!(from_secret(&bad), None);
    assert_eq!(
        plan(from_secret(&bad).as_ref(), &names(), Timestamp::now()),
        Plan::Rebuild
    );
}

/// A TLS handshake as the API server makes it: the caBundle as the only root, the Service's name.
async fn handshake(resolver: &Arc<CertResolver>, ca_pem: &str, name: &str) -> Result<(), String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(c.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let client =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
    let (a, b) = tokio::io::duplex(64 * 1024);
    let acceptor = tokio_rustls::TlsAcceptor::from(resolver.server_config().map_err(|e| e.to_string())?);
    let server = tokio::spawn(async move {
        let mut s = acceptor.accept(b).await.map_err(|e| e.to_string())?;
        s.write_all(b"ok").await.map_err(|e| e.to_string())?;
        s.shutdown().await.map_err(|e| e.to_string())
    });
    let sni = rustls::pki_types::ServerName::try_from(name.to_string()).map_err(|e| e.to_string())?;
    let mut c = tokio_rustls::TlsConnector::from(Arc::new(client))
        .connect(sni, a)
        .await
        .map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got).await;
    server.await.map_err(|e| e.to_string())??;
    if got == b"ok" {
        Ok(())
    } else {
        Err(format!("read {got:?}"))
    }
}

#[tokio::test]
async fn a_reissued_certificate_verifies_under_the_same_ca_bundle() {
    let now = Timestamp::now();
    let first = issue(None, &names(), now).unwrap();
    let resolver = Arc::new(CertResolver::default());
    resolver.load(&first).unwrap();
    handshake(
        &resolver,
        &first.ca_cert,
        "quotagate-webhook-service.quotagate-system.svc",
    )
    .await
    .unwrap();
    let err = handshake(&resolver, &first.ca_cert, "other.quotagate-system.svc")
        .await
        .unwrap_err();
    assert!(err.contains("not valid for name"), "{err}");

    let again = issue(Some(&first), &names(), now).unwrap();
    assert_eq!(
        (again.ca_cert.as_str(), again.ca_not_after),
        (first.ca_cert.as_str(), first.ca_not_after)
    );
    assert_ne!(again.cert, first.cert);
    resolver.load(&again).unwrap();
    handshake(
        &resolver,
        &first.ca_cert,
        "quotagate-webhook-service.quotagate-system.svc",
    )
    .await
    .unwrap();

    let other = issue(None, &names(), now).unwrap();
    let err = handshake(
        &resolver,
        &other.ca_cert,
        "quotagate-webhook-service.quotagate-system.svc",
    )
    .await
    .unwrap_err();
    assert!(
        err.contains("BadSignature") || err.contains("UnknownIssuer"),
        "{err}"
    );
}

/// The shipped cert Role (`config/rbac/cert_role.yaml`) allows exactly what the controller does.
fn cert_role() -> Vec<serde_json::Value> {
    crate::api::manifest::load_documents(include_str!("../../../config/rbac/cert_role.yaml")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_writes_secret_and_ca_bundles_and_a_follower_serves_the_same() {
    use crate::wiring::install::{InstallOptions, objects};
    let server = crate::wiring::manager::embedded_server();
    let admin = server.client();
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    let mut n = k8s_openapi::api::core::v1::Namespace::default();
    n.metadata.name = Some("quotagate-system".into());
    ns.create(&PostParams::default(), &n).await.unwrap();
    for d in objects(&InstallOptions::default()).unwrap() {
        match d["kind"].as_str() {
            Some("MutatingWebhookConfiguration") => {
                let c: MutatingWebhookConfiguration = serde_json::from_value(d).unwrap();
                Api::all(admin.clone())
                    .create(&PostParams::default(), &c)
                    .await
                    .unwrap();
            }
            Some("ValidatingWebhookConfiguration") => {
                let c: ValidatingWebhookConfiguration = serde_json::from_value(d).unwrap();
                Api::all(admin.clone())
                    .create(&PostParams::default(), &c)
                    .await
                    .unwrap();
            }
            _ => {}
        }
    }
    let authz = Arc::new(
        crate::embedded::rbac::Authorizer::from_documents(
            "system:serviceaccount:quotagate-system:quotagate-controller-manager",
            &cert_role(),
        )
        .unwrap(),
    );
    let client = server.client_as(authz.clone());
    let opts = CertOptions {
        namespace: "quotagate-system".into(),
        service: "quotagate-webhook-service".into(),
        secret: "quotagate-webhook-server-cert".into(),
        check_every: Duration::from_secs(3600),
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let (lead_tx, lead_rx) = watch::channel(true);
    let leader = Arc::new(CertResolver::default());
    tokio::spawn(run(
        client.clone(),
        opts.clone(),
        lead_rx,
        leader.clone(),
        cancel.clone(),
    ));
    tokio::time::timeout(Duration::from_secs(20), leader.loaded())
        .await
        .expect("the leader serves a certificate");
    let served = leader.current().unwrap();

    let secret = Api::<Secret>::namespaced(admin.clone(), "quotagate-system")
        .get("quotagate-webhook-server-cert")
        .await
        .unwrap();
    assert_eq!(from_secret(&secret), Some(served.clone()));
    let want = Some(ByteString(served.ca_cert.as_bytes().to_vec()));
    let m: MutatingWebhookConfiguration = Api::all(admin.clone()).get(MUTATING).await.unwrap();
    let v: ValidatingWebhookConfiguration = Api::all(admin.clone()).get(VALIDATING).await.unwrap();
    assert!(
        m.webhooks
            .iter()
            .flatten()
            .all(|w| w.client_config.ca_bundle == want),
        "mutating caBundle"
    );
    assert!(
        v.webhooks
            .iter()
            .flatten()
            .all(|w| w.client_config.ca_bundle == want),
        "validating caBundle"
    );
    assert_eq!(
        v.webhooks.iter().flatten().count(),
        12,
        "every validating hook of the manifest, RayCronJob's included"
    );

    // A follower never writes; it serves what the leader stored.
    let (_f_tx, f_rx) = watch::channel(false);
    let follower = Arc::new(CertResolver::default());
    tokio::spawn(run(
        client.clone(),
        opts.clone(),
        f_rx,
        follower.clone(),
        cancel.clone(),
    ));
    tokio::time::timeout(Duration::from_secs(20), follower.loaded())
        .await
        .expect("the follower serves the certificate");
    assert_eq!(follower.current(), Some(served.clone()));
    handshake(
        &follower,
        &served.ca_cert,
        "quotagate-webhook-service.quotagate-system.svc",
    )
    .await
    .unwrap();

    // A new leader (after a restart) reuses the stored certificate rather than replacing it.
    cancel.cancel();
    drop(lead_tx);
    let cancel = tokio_util::sync::CancellationToken::new();
    let (_tx, rx) = watch::channel(true);
    let restarted = Arc::new(CertResolver::default());
    tokio::spawn(run(
        client.clone(),
        opts.clone(),
        rx,
        restarted.clone(),
        cancel.clone(),
    ));
    tokio::time::timeout(Duration::from_secs(20), restarted.loaded())
        .await
        .expect("reloaded");
    assert_eq!(restarted.current(), Some(served.clone()));
    cancel.cancel();

    // A certificate within RENEW_BEFORE of its end is reissued under the same CA (the Secret is
    // updated, the caBundle stays).
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "quotagate-system");
    let soon = (Timestamp::now() + SignedDuration::from_hours(24 * 10)).to_string();
    let patch = serde_json::json!({"metadata": {"annotations": {NOT_AFTER: soon}}});
    secrets
        .patch(
            "quotagate-webhook-server-cert",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let (_tx, rx) = watch::channel(true);
    let renewed = Arc::new(CertResolver::default());
    tokio::spawn(run(client, opts, rx, renewed.clone(), cancel.clone()));
    tokio::time::timeout(Duration::from_secs(20), renewed.loaded())
        .await
        .expect("renewed");
    let fresh = renewed.current().unwrap();
    assert_ne!(fresh.cert, served.cert);
    assert_eq!(fresh.ca_cert, served.ca_cert);
    handshake(
        &renewed,
        &served.ca_cert,
        "quotagate-webhook-service.quotagate-system.svc",
    )
    .await
    .unwrap();
    cancel.cancel();
    assert_eq!(authz.denied(), vec![], "the cert Role refused a request");
    assert_eq!(
        authz.unused(),
        Vec::<String>::new(),
        "the cert Role grants a verb nothing used"
    );
}
