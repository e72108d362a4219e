//! One hostile request or one hostile local user against `quotagate apiserver` as a child process
//! (issue "no single request and no other local user can take the control plane"): patches built to
//! blow the stack or the heap, half-sent requests, planted kubeconfig paths, data-directory modes.
//! Driven over HTTPS with the kubeconfig's token, as a user with ordinary rights would.

use kube::Client;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::process::{Child, Command};

struct Server {
    child: Child,
    client: Client,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("quotagate-abuse-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

async fn client_from(path: &Path) -> Option<Client> {
    let kc = kube::config::Kubeconfig::read_from(path).ok()?;
    let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.ok()?;
    Client::try_from(config).ok()
}

/// `quotagate apiserver` on a free loopback port, once it answers.
async fn start(name: &str, extra: &[&str]) -> Server {
    let dir = scratch(name);
    let kubeconfig = dir.join("kubeconfig");
    let child = Command::new(env!("CARGO_BIN_EXE_quotagate"))
        .args(["apiserver", "--no-simulators", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start quotagate apiserver");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(client) = client_from(&kubeconfig).await
            && client.apiserver_version().await.is_ok()
        {
            return Server { child, client, dir };
        }
        assert!(tokio::time::Instant::now() < deadline, "the server did not answer within 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends a raw request; returns the status and the body as JSON (Null when it is not JSON).
async fn send(client: &Client, method: &str, path: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(kube::client::Body::from(body))
        .expect("a request");
    let resp = client.send(req).await.expect("an answer");
    let code = resp.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(resp.into_body()).await.expect("a body").to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// The process's peak resident set (VmHWM), in KiB.
fn peak_rss_kib(child: &Child) -> u64 {
    let pid = child.id().expect("running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

const CM: &str = "/api/v1/namespaces/default/configmaps";

/// The two reported patches: ~16,800 levels of nesting by `copy` (the process aborted with a stack
/// overflow) and 19 doubling copies (+1.4 GiB). Both are refused with the real server's status, the
/// object is unchanged, the process keeps serving, and its peak RSS grows by less than 150 MiB.
#[tokio::test]
async fn patches_built_to_exhaust_the_stack_or_the_heap_are_refused() {
    let s = start("patch", &[]).await;
    let mut deep = json!("leaf");
    for _ in 0..100 {
        deep = json!({ "a": deep });
    }
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "victim", "annotations": {"seed": "x".repeat(1000)}}, "data": {"k": "v"}});
    let (code, _) = send(&s.client, "POST", CM, "application/json", cm.to_string().into_bytes()).await;
    assert_eq!(code, 201);
    let (_, before) = send(&s.client, "GET", &format!("{CM}/victim"), "application/json", vec![]).await;
    let base = peak_rss_kib(&s.child);

    // The nesting patch: an annotation 100 levels deep is impossible (annotations are strings), so
    // the reported shape puts it under a new field by `add`, then copies the object into itself.
    let mut into = String::from("/deep");
    for _ in 0..100 {
        into.push_str("/a");
    }
    let mut ops = vec![json!({"op": "add", "path": "/deep", "value": deep})];
    ops.extend((0..8).map(|i| json!({"op": "copy", "from": "/deep", "path": format!("{into}/c{i}")})));
    let (code, status) = send(&s.client, "PATCH", &format!("{CM}/victim"), "application/json-patch+json", Value::Array(ops).to_string().into_bytes()).await;
    assert_eq!(code, 422, "{status}");
    assert!(status["message"].as_str().unwrap_or_default().contains("exceeded max depth"), "{status}");

    let doubling: Vec<Value> = (0..19)
        .map(|i| json!({"op": "copy", "from": "/metadata/annotations", "path": format!("/metadata/annotations/k{i}")}))
        .collect();
    let (code, status) = send(&s.client, "PATCH", &format!("{CM}/victim"), "application/json-patch+json", Value::Array(doubling).to_string().into_bytes()).await;
    assert_eq!(code, 422, "{status}");
    let msg = status["message"].as_str().unwrap_or_default();
    assert!(msg.starts_with("Unable to complete the copy, the accumulated size increase of copy is"), "{status}");

    let many = vec![json!({"op": "test", "path": "/data/k", "value": "v"}); 10_001];
    let (code, status) = send(&s.client, "PATCH", &format!("{CM}/victim"), "application/json-patch+json", Value::Array(many).to_string().into_bytes()).await;
    assert_eq!(code, 413, "{status}");
    assert_eq!(status["message"], "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001");

    // Still serving, object unchanged, memory bounded.
    let (code, after) = send(&s.client, "GET", &format!("{CM}/victim"), "application/json", vec![]).await;
    assert_eq!(code, 200);
    assert_eq!(after, before);
    let grown = peak_rss_kib(&s.child).saturating_sub(base);
    println!("peak RSS before the patches {} MiB, growth {} KiB (bound 150 MiB)", base / 1024, grown);
    assert!(grown < 150 * 1024, "peak RSS grew by {grown} KiB");
}
