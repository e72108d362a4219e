//! The loopback TCP face: kubeconfig written, kube::Client from it works, cancellation stops serving,
//! non-loopback addresses are refused; plus the response-delay fault.

mod embedded_support;

use embedded_support::*;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use quotagate::embedded::{ServeError, serve_tcp};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn kubeconfig_client_and_cancellation() {
    let srv = server();
    let dir = std::env::temp_dir().join(format!("quotagate-tcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kubeconfig");
    let cancel = CancellationToken::new();
    let (addr, handle) = srv
        .spawn_tcp("127.0.0.1:0".parse().unwrap(), Some(&path), cancel.clone())
        .await
        .unwrap();
    let kc = kube::config::Kubeconfig::read_from(&path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    assert_eq!(config.cluster_url.to_string(), format!("https://{addr}/"));
    let client = kube::Client::try_from(config).unwrap();
    let names: Vec<String> = Api::<Namespace>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"default".to_string()), "{names:?}");
    cancel.cancel();
    tokio::time::timeout(WAIT, handle)
        .await
        .expect("server stops when cancelled")
        .unwrap()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn serve_tcp_refuses_non_loopback_and_returns_on_cancel() {
    let err = serve_tcp(
        server(),
        "0.0.0.0:0".parse().unwrap(),
        None,
        CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ServeError::NotLoopback(_)), "{err}");
    let cancel = CancellationToken::new();
    cancel.cancel();
    tokio::time::timeout(
        WAIT,
        serve_tcp(server(), "127.0.0.1:0".parse().unwrap(), None, cancel),
    )
    .await
    .unwrap()
    .unwrap();
}

#[tokio::test]
async fn injected_response_delay() {
    let srv = server();
    let api: Api<Namespace> = Api::all(srv.client());
    srv.store.faults.set_delay(Some(Duration::from_millis(300)));
    let t = Instant::now();
    api.get("default").await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300), "{:?}", t.elapsed());
    srv.store.faults.set_delay(None);
    let t = Instant::now();
    api.get("default").await.unwrap();
    assert!(t.elapsed() < Duration::from_millis(300));
}

#[tokio::test]
async fn embedded_cluster_starts_server_listener_and_simulators() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::PostParams;
    use kube::runtime::wait::await_condition;
    use quotagate::embedded::{AllowAll, ClusterOptions, EmbeddedCluster};
    let dir = std::env::temp_dir().join(format!("quotagate-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let opts = ClusterOptions {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        kubeconfig_out: Some(dir.join("kc")),
        ..Default::default()
    };
    let cluster = EmbeddedCluster::start(&[], std::sync::Arc::new(AllowAll), opts)
        .await
        .unwrap();
    assert!(cluster.addr.is_some() && dir.join("kc").exists());
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
    let p: Pod = serde_json::from_value(
        serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .unwrap();
    pods.create(&PostParams::default(), &p).await.unwrap();
    let running = |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()).and_then(|s| s.phase.as_deref()) == Some("Running")
    };
    tokio::time::timeout(WAIT, await_condition(pods, "p", running))
        .await
        .unwrap()
        .unwrap();
    tokio::time::timeout(WAIT, cluster.stopped())
        .await
        .expect("simulators stop on shutdown");
    let _ = std::fs::remove_dir_all(&dir);
}
