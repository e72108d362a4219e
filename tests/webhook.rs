//! The validating and defaulting webhook, over real TLS: an invalid object is denied with the field
//! path and rule, a queue-labelled RayCluster is defaulted to suspended, a valid one is allowed.

use std::sync::Arc;

use quotagate::wiring::webhook;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn review(op: &str, object: Value, old: Option<Value>) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3f1c2b6e-0000-4000-8000-000000000001",
            "kind": {"group": object["apiVersion"].as_str().unwrap().split('/').next().unwrap(), "version": "v1", "kind": object["kind"]},
            "resource": {"group": "ray.io", "version": "v1", "resource": "rayclusters"},
            "requestKind": {"group": "ray.io", "version": "v1", "kind": object["kind"]},
            "requestResource": {"group": "ray.io", "version": "v1", "resource": "rayclusters"},
            "name": object["metadata"]["name"],
            "namespace": "default",
            "operation": op,
            "userInfo": {"username": "alice"},
            "object": object,
            "oldObject": old,
            "dryRun": false,
            "options": null
        }
    })
}

fn raycluster(name: &str, queue: Option<&str>, min: i32, max: i32) -> Value {
    let mut labels = serde_json::Map::new();
    if let Some(q) = queue {
        labels.insert("kueue.x-k8s.io/queue-name".into(), json!(q));
    }
    json!({
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "minReplicas": min, "maxReplicas": max, "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0"}]}}}]
        }
    })
}

struct Tls {
    _dir: std::path::PathBuf,
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
}

fn tls() -> Tls {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    // One directory per call: tests run at once in one process, each with its own certificate.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("quotagate-webhook-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tls.crt"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), ck.signing_key.serialize_pem()).unwrap();
    let server = webhook::tls_config(&dir).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ck.cert.der().clone()).unwrap();
    let client =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    Tls {
        _dir: dir,
        server,
        client: Arc::new(client),
    }
}

async fn post(
    addr: std::net::SocketAddr,
    client: Arc<rustls::ClientConfig>,
    path: &str,
    body: &Value,
) -> Value {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(client)
        .connect(name, tcp)
        .await
        .unwrap();
    let body = serde_json::to_vec(body).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(&body).await.unwrap();
    let mut resp = Vec::new();
    let _ = tls.read_to_end(&mut resp).await;
    let text = String::from_utf8_lossy(&resp);
    let (headers, payload) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(headers.starts_with("HTTP/1.1 200"), "{headers}");
    serde_json::from_str(payload).expect("a JSON AdmissionReview")
}

/// The webhook on a loopback port: its address, the stop sender, and the serving task.
async fn start(
    tls: &Tls,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), webhook::WebhookError>>,
) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(webhook::serve(
        "127.0.0.1:0".parse().unwrap(),
        tls.server.clone(),
        tx,
        async {
            let _ = stop_rx.await;
        },
    ));
    (rx.await.unwrap(), stop_tx, server)
}

#[tokio::test]
async fn webhook_over_tls_denies_defaults_and_allows() {
    let tls = tls();
    let (addr, stop_tx, server) = start(&tls).await;

    // Invalid: minReplicas > maxReplicas. Denied with the field path and the rule.
    let denied = post(
        addr,
        tls.client.clone(),
        "/validate",
        &review("CREATE", raycluster("bad", None, 3, 2), None),
    )
    .await;
    let resp = &denied["response"];
    assert_eq!(resp["uid"], "3f1c2b6e-0000-4000-8000-000000000001");
    assert_eq!(resp["allowed"], false);
    let msg = resp["status"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("RayCluster \"bad\" is invalid: spec.workerGroupSpecs[0].minReplicas"),
        "{msg}"
    );

    // Queue-managed: created suspended (a JSONPatch adding spec.suspend).
    let defaulted = post(
        addr,
        tls.client.clone(),
        "/mutate",
        &review("CREATE", raycluster("managed", Some("user-queue"), 1, 2), None),
    )
    .await;
    let resp = &defaulted["response"];
    assert_eq!(resp["allowed"], true, "{resp}");
    assert_eq!(resp["patchType"], "JSONPatch");
    // kube-core sends the patch bytes as a JSON array of numbers, which Go's decoder accepts for []byte.
    let bytes: Vec<u8> = serde_json::from_value(resp["patch"].clone()).expect("patch bytes");
    let patch: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/suspend", "value": true}])
    );

    // Valid and not queue-managed: allowed unchanged.
    let allowed = post(
        addr,
        tls.client.clone(),
        "/mutate",
        &review("CREATE", raycluster("plain", None, 1, 2), None),
    )
    .await;
    assert_eq!(allowed["response"]["allowed"], true);
    assert!(allowed["response"].get("patch").is_none());

    // Changing the queue of a running (unsuspended) job is refused.
    let old = raycluster("running", Some("user-queue"), 1, 2);
    let new = raycluster("running", Some("other-queue"), 1, 2);
    let moved = post(
        addr,
        tls.client.clone(),
        "/validate",
        &review("UPDATE", new, Some(old)),
    )
    .await;
    assert_eq!(moved["response"]["allowed"], false);
    let msg = moved["response"]["status"]["message"].as_str().unwrap();
    assert!(msg.contains("metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: field is immutable while the job is admitted"), "{msg}");

    // Garbage in: a clear refusal, not a crash.
    let garbage = post(
        addr,
        tls.client.clone(),
        "/validate",
        &json!({"kind": "AdmissionReview"}),
    )
    .await;
    assert_eq!(garbage["response"]["allowed"], false);

    let _ = stop_tx.send(());
    server.await.unwrap().unwrap();
}

/// The webhook port is the one a real cluster's API server and anything on the cluster network reach
/// (issue 43): it has the embedded API server's listener limits. Headers past 1 MiB get 431, and a
/// client that stalls mid-headers holds nothing another request needs.
#[tokio::test]
async fn webhook_listener_has_the_api_servers_limits() {
    let tls = tls();
    let (addr, stop_tx, server) = start(&tls).await;
    let connect = || async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        tokio_rustls::TlsConnector::from(tls.client.clone())
            .connect(name, tcp)
            .await
            .unwrap()
    };

    // Half a request, never finished.
    let mut stalled = connect().await;
    stalled
        .write_all(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        .await
        .unwrap();

    let mut big = connect().await;
    let head = format!(
        "POST /validate HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        "a".repeat(2 << 20)
    );
    let _ = big.write_all(head.as_bytes()).await;
    let mut resp = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), big.read_to_end(&mut resp)).await;
    let text = String::from_utf8_lossy(&resp);
    assert!(
        text.starts_with("HTTP/1.1 431"),
        "{}",
        text.lines().next().unwrap_or("")
    );

    // The stalled client holds nothing another request needs.
    let allowed = post(
        addr,
        tls.client.clone(),
        "/mutate",
        &review("CREATE", raycluster("plain", None, 1, 2), None),
    )
    .await;
    assert_eq!(allowed["response"]["allowed"], true);
    drop(stalled);
    let _ = stop_tx.send(());
    server.await.unwrap().unwrap();
}
