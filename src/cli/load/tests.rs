use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A keep-alive HTTP/1.1 server answering `{"cluster": "a"}` until `switched`, then "b"; `/fail` is a 500.
/// With `one_per_conn`, it closes each connection after one answer without saying so (no
/// `Connection: close`), as a server closing idle keep-alive connections does.
async fn server(switched: Arc<AtomicBool>, one_per_conn: bool) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = l.accept().await {
            let switched = switched.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match c.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    buf.drain(..end);
                    let (status, body) = if head.starts_with("GET /fail") {
                        ("500 Internal Server Error", "{}".to_string())
                    } else {
                        (
                            "200 OK",
                            format!(
                                "{{\"cluster\": \"{}\"}}",
                                if switched.load(Ordering::SeqCst) { "b" } else { "a" }
                            ),
                        )
                    };
                    let resp = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if c.write_all(resp.as_bytes()).await.is_err() || one_per_conn {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

fn opts(url: String, rps: u32, ms: u64) -> Options {
    Options {
        url,
        rps,
        duration: Duration::from_millis(ms),
        connections: 4,
        timeout: Duration::from_secs(2),
        ..Options::default()
    }
}

#[tokio::test]
async fn counts_every_answer_and_the_clusters_in_order() {
    let switched = Arc::new(AtomicBool::new(false));
    let url = server(switched.clone(), false).await;
    let flip = tokio::spawn({
        let s = switched.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(1000)).await;
            s.store(true, Ordering::SeqCst);
        }
    });
    let r = run(&opts(format!("{url}/"), 40, 2000), CancellationToken::new(), None)
        .await
        .unwrap();
    flip.await.unwrap();
    assert!((70..=90).contains(&r.total.sent), "{r:?}");
    assert_eq!((r.total.ok, r.failed), (r.total.sent, 0), "{r:?}");
    assert_eq!(r.clusters_in_order, vec!["a".to_string(), "b".to_string()]);
    assert!(r.cluster_changes >= 1);
    assert!(r.per_second.len() >= 2 && r.per_second[0].second == 0 && r.per_second[1].second == 1);
    let by_cluster: u64 = r.per_second.iter().flat_map(|s| s.clusters.values()).sum();
    assert_eq!(by_cluster, r.total.ok);
    // Keep-alive: far fewer connections than requests (the pool holds what is idle).
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["per_second"][0]["second"], 0);
    assert!(json["per_second"][0]["clusters"].is_object());
}

#[tokio::test]
async fn non_2xx_connection_errors_and_stale_connections() {
    let url = server(Arc::new(AtomicBool::new(false)), false).await;
    let r = run(
        &opts(format!("{url}/fail"), 20, 500),
        CancellationToken::new(),
        None,
    )
    .await
    .unwrap();
    assert!(
        r.total.sent > 0 && r.total.non_2xx == r.total.sent && r.failed == r.total.sent,
        "{r:?}"
    );
    assert!(r.clusters_in_order.is_empty());

    // Nothing listens: every request is a connection error.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let r = run(
        &opts(format!("http://{free}/"), 20, 500),
        CancellationToken::new(),
        None,
    )
    .await
    .unwrap();
    assert!(r.total.sent > 0 && r.total.conn_errors == r.total.sent, "{r:?}");

    // A server that closes each connection after one answer: requests on pooled connections it closed
    // are sent again on a new one, and none fails.
    let url = server(Arc::new(AtomicBool::new(false)), true).await;
    let r = run(&opts(format!("{url}/"), 20, 1000), CancellationToken::new(), None)
        .await
        .unwrap();
    assert_eq!((r.failed, r.total.ok), (0, r.total.sent), "{r:?}");
}

#[tokio::test]
async fn stops_when_told_and_refuses_bad_options() {
    let url = server(Arc::new(AtomicBool::new(false)), false).await;
    let stop = CancellationToken::new();
    let s2 = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        s2.cancel();
    });
    let r = run(&opts(format!("{url}/"), 20, 60_000), stop, None)
        .await
        .unwrap();
    assert!(r.seconds < 5.0, "{r:?}");
    let bad = |o: Options| validate(&o).unwrap_err().to_string();
    assert_eq!(
        bad(Options {
            rps: 0,
            ..opts(url.clone(), 1, 1000)
        }),
        "--rps must be 1 to 100000, got 0"
    );
    assert_eq!(
        bad(Options {
            connections: 0,
            ..opts(url.clone(), 1, 1000)
        }),
        "--connections must be 1 to 4096, got 0"
    );
    assert_eq!(
        bad(opts(url.clone(), 1, 0)),
        "--duration must be more than 0 and at most 24h"
    );
    let e = run(
        &opts("https://x/".into(), 1, 1000),
        CancellationToken::new(),
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "--url \"https://x/\": only http:// URLs are supported"
    );
    assert_eq!(
        cluster_of(br#"{"cluster": "rs-abc", "ray": "2.60.0"}"#, "cluster").as_deref(),
        Some("rs-abc")
    );
    assert_eq!(cluster_of(b"not json", "cluster"), None);
}
