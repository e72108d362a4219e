//! Fresh-connection GET latency through the embedded server's TLS listener, as every `kubectl` call
//! makes one: connect (the client sets TCP_NODELAY), TLS handshake, one authenticated GET with
//! `Connection: close`, read to the end. Prints the median and the 99th percentile; not a timed test.
//! `cargo bench --bench listener` (`-- 2000` for another number of requests).

use quotagate::embedded::{AllowAll, EmbeddedServer};
use rustls_pki_types::pem::PemObject;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    let dir = std::env::temp_dir().join(format!("quotagate-bench-listener-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let kubeconfig = dir.join("kubeconfig");
    let srv = EmbeddedServer::new(&[], Arc::new(AllowAll));
    let cancel = CancellationToken::new();
    let (addr, _serving) = srv
        .spawn_tcp(
            "127.0.0.1:0".parse().expect("addr"),
            Some(&kubeconfig),
            cancel.clone(),
        )
        .await
        .expect("listen");
    let text = std::fs::read_to_string(&kubeconfig).expect("kubeconfig");
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .expect("kubeconfig field")
            .trim()
            .to_string()
    };
    let pem = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        field("certificate-authority-data:"),
    )
    .expect("CA");
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from_pem_slice(&pem).expect("CA PEM"))
        .expect("root");
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls));
    let request = format!(
        "GET /api/v1/namespaces/default HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        field("token:")
    );
    let mut took: Vec<Duration> = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
        let mut s = connector.connect(name, tcp).await.expect("TLS");
        s.write_all(request.as_bytes()).await.expect("write");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        assert!(
            out.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&out)
        );
        took.push(t.elapsed());
    }
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    println!(
        "fresh-connection GET over TLS, {n} requests: median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        took[took.len() - 1].as_secs_f64() * 1e3
    );
    cancel.cancel();
    let _ = std::fs::remove_dir_all(&dir);
}
