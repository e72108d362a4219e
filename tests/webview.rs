//! The web view in a real browser: `quotagate run --embedded --ui-addr` (the built binary), a gated
//! RayService upgrade driven through kube::Client, and headless Chromium loading the page at each step.
//! The scenario is the happy path of Kueue's proof of concept (kubernetes-sigs/kueue PR #11264,
//! `test/e2e/singlecluster/extended/kuberay_test.go`: ClusterQueue 3 CPU, a 2-CPU RayService, the
//! upgrade waits until the quota is raised, then settles back at 2), here checked as a person sees it.
//!
//! Chromium comes from $CHROMIUM or `chromium` on PATH (scripts/install-chromium.sh); without it the
//! test prints a skip line, or fails when QUOTAGATE_REQUIRE_TOOLS=1. With QUOTAGATE_WRITE_SCREENSHOT=1
//! the gated state's screenshot is also written to docs/webview.png (the picture in docs/web-view.md).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use quotagate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Workload};
use quotagate::api::ray::RayService;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NS: &str = "default";
const STEP: Duration = Duration::from_secs(90);

fn chromium_path() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file())
}

/// Kills the server when the test ends, passed or not.
struct Running(tokio::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

/// Headless Chromium with a fresh profile; `args` are the page-specific ones. Killed after a minute.
async fn chromium(bin: &Path, profile: &Path, args: &[String]) -> String {
    let run = tokio::process::Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--window-size=1280,860",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        // Lets the page's script open the event stream and apply the first update before the dump.
        .arg("--timeout=3000")
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("chromium did not finish within 60 s")
        .expect("chromium runs");
    assert!(out.status.success(), "chromium failed: {:?}", out.status);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The DOM Chromium builds for the page, after its script ran.
async fn browser_dom(bin: &Path, profile: &Path, url: &str) -> String {
    let dom = chromium(bin, profile, &["--dump-dom".to_string(), url.to_string()]).await;
    assert!(dom.contains("<main id=\"live\">"), "not the view's page: {dom}");
    // The dump comes at the load event, which does not wait for the event stream's first message:
    // the script must have opened it (connecting), and may have heard from it (connected).
    assert!(
        dom.contains("data-live=\"connecting\"") || dom.contains("data-live=\"connected\""),
        "the page's script did not open the live stream: {dom}"
    );
    dom
}

/// The first message of the view's event stream (what the page's script swaps in).
async fn first_live_update(addr: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(
        format!("GET /events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some(line) = text
            .lines()
            .find(|l| l.starts_with("data:") && text.contains("\n\n"))
        {
            let v: serde_json::Value =
                serde_json::from_str(line.trim_start_matches("data:").trim()).expect("an update is JSON");
            return v["body"]
                .as_str()
                .expect("an update has the page body")
                .to_string();
        }
        let n = tokio::time::timeout_at(deadline, s.read(&mut buf))
            .await
            .expect("an update within 10 s")
            .unwrap();
        assert!(n > 0, "the event stream closed: {text}");
        got.extend_from_slice(&buf[..n]);
    }
}

/// The page as served (a plain HTTP/1.0 GET), to wait until the view caught up before the browser looks.
async fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// Polls the page (twice a second, the view's render rate) until `ok`, failing with the last page.
async fn until_page(addr: &str, what: &str, ok: impl Fn(&str) -> bool) {
    let deadline = tokio::time::Instant::now() + STEP;
    let mut last = String::new();
    loop {
        if let Some(p) = http_get(addr, "/").await {
            if ok(&p) {
                return;
            }
            last = p;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: the page never showed it; last page:\n{last}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits on a watch until `check` over the listed objects returns Some.
async fn wait_list<K, R>(api: &Api<K>, what: &str, check: impl Fn(&[K]) -> Option<R>) -> R
where
    K: kube::Resource + Clone + std::fmt::Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default,
{
    let deadline = tokio::time::Instant::now() + STEP;
    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    loop {
        let items = api.list(&ListParams::default()).await.expect("list").items;
        if let Some(r) = check(&items) {
            return r;
        }
        if tokio::time::timeout_at(deadline, events.try_next())
            .await
            .is_err()
        {
            panic!(
                "{what} did not happen within {} s: {} object(s)",
                STEP.as_secs(),
                items.len()
            );
        }
    }
}

fn typed<T: DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn service(version: &str) -> RayService {
    let res = |cpu: &str| json!({"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": cpu, "memory": "1Gi"}});
    typed(json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "fruit-stand", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "rayClusterDeletionDelaySeconds": 1,
            "serveConfigV2": "applications:\n  - name: fruit_app\n    import_path: fruit.deployment_graph\n    route_prefix: /fruit\n    deployments:\n      - name: FruitMarket\n        num_replicas: 1\n",
            "rayClusterConfig": {
                "rayVersion": version,
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": format!("rayproject/ray:{version}"), "resources": res("1")}]}}},
                "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "minReplicas": 1, "maxReplicas": 2, "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-worker", "image": format!("rayproject/ray:{version}"), "resources": res("1")}]}}}]
            }
        }
    }))
}

fn cluster_queue(cpu: &str) -> serde_json::Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor",
            "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "16Gi"}]}]}]}})
}

fn active_cluster(rs: &RayService) -> Option<String> {
    rs.status
        .as_ref()?
        .active_service_status
        .as_ref()?
        .ray_cluster_name
        .clone()
        .filter(|n| !n.is_empty())
}

/// The cpu bar of ClusterQueue cq as the page has it: `data-nominal="3" data-reserved="2"`.
fn cpu_bar(page: &str) -> String {
    let start = page
        .find("data-cq=\"cq\" data-flavor=\"default-flavor\" data-resource=\"cpu\"")
        .unwrap_or_else(|| panic!("no cpu bar for cq:\n{page}"));
    let rest = &page[start..];
    rest[..rest.find('>').unwrap_or(rest.len())].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_sees_the_bar_the_shortfall_and_the_gate_change_through_a_gated_upgrade() {
    let Some(chrome) = chromium_path() else {
        if std::env::var("QUOTAGATE_REQUIRE_TOOLS").as_deref() == Ok("1") {
            panic!("chromium not installed and QUOTAGATE_REQUIRE_TOOLS=1: run scripts/install-chromium.sh");
        }
        println!("skipped: chromium not installed, run scripts/install-chromium.sh");
        return;
    };
    let dir = std::env::temp_dir().join(format!("quotagate-webview-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    // A free loopback port for the view (the binary refuses anything but loopback anyway).
    let ui = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let _server = Running(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_quotagate"))
            .args([
                "run",
                "--embedded",
                "--listen",
                "127.0.0.1:0",
                "--ui-addr",
                &ui,
                "--sim-load-rps",
                "0",
            ])
            .args([
                "--pod-start-delay",
                "100ms",
                "--serve-build-delay",
                "200ms",
                "--replica-start-delay",
                "200ms",
                "--kubeconfig-out",
            ])
            .arg(&kc)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap(),
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&kc).is_ok_and(|t| t.contains("server:")) {
        assert!(tokio::time::Instant::now() < deadline, "no kubeconfig written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kc).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    let client = Client::try_from(config).unwrap();
    let url = format!("http://{ui}/");
    until_page(&ui, "the view is up", |p| p.contains("no ClusterQueues yet")).await;

    // Quota of 3 CPU; a RayService of 2 CPU becomes Ready inside it.
    let pp = PostParams::default();
    let cqs: Api<ClusterQueue> = Api::all(client.clone());
    let wls: Api<Workload> = Api::namespaced(client.clone(), NS);
    let rss: Api<RayService> = Api::namespaced(client.clone(), NS);
    Api::<ResourceFlavor>::all(client.clone())
        .create(&pp, &typed(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}})))
        .await
        .unwrap();
    cqs.create(&pp, &typed(cluster_queue("3"))).await.unwrap();
    Api::<LocalQueue>::namespaced(client.clone(), NS)
        .create(&pp, &typed(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": NS}, "spec": {"clusterQueue": "cq"}})))
        .await
        .unwrap();
    rss.create(&pp, &service("2.46.0")).await.unwrap();
    let first = wait_list(&rss, "fruit-stand serves", |s| s.first().and_then(active_cluster)).await;
    until_page(&ui, "2 CPU reserved and the service serving", |p| {
        p.contains("data-reserved=\"2\"") && p.contains(">Serving<")
    })
    .await;
    let dom = browser_dom(&chrome, &dir.join("profile-1"), &url).await;
    let bar = cpu_bar(&dom);
    assert!(
        bar.contains("data-nominal=\"3\"") && bar.contains("data-reserved=\"2\""),
        "bar before the upgrade: {bar}"
    );
    assert!(
        dom.contains("data-gate=\"none\""),
        "no upgrade yet, no gate: {dom}"
    );
    assert!(!dom.contains("class=\"shortfall\""), "nothing waits yet: {dom}");

    // The upgrade needs 2 more CPU than the 1 left: its workload slice waits, the gate is closed.
    rss.patch(
        "fruit-stand",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"rayClusterConfig": {"rayVersion": "2.47.0"}}})),
    )
    .await
    .unwrap();
    let (slice, why) = wait_list(&wls, "the new workload slice waits for quota", |w| {
        w.iter().find_map(|w| {
            let c = w.status.as_ref().and_then(|s| s.condition("QuotaReserved"))?;
            (c.status == "False" && !c.message.is_empty()).then(|| (w.name_any(), c.message.clone()))
        })
    })
    .await;
    assert!(
        why.contains("cpu") && why.chars().any(|c| c.is_ascii_digit()),
        "the scheduler's message has the numbers: {why}"
    );
    until_page(&ui, "the closed gate", |p| {
        p.contains("data-gate=\"closed\"") && p.contains("class=\"shortfall\"")
    })
    .await;
    let shot = dir.join("gated.png");
    let dom = browser_dom(&chrome, &dir.join("profile-2"), &url).await;
    assert!(
        dom.contains("data-gate=\"closed\""),
        "gate closed while the slice waits: {dom}"
    );
    assert!(
        dom.contains(&format!("waits for workload slice {slice}")),
        "the gate names the slice it waits for: {dom}"
    );
    let row = dom
        .find(&format!("data-workload=\"{slice}\" data-state=\"Pending\""))
        .map(|i| &dom[i..])
        .unwrap_or_else(|| panic!("no pending row for {slice}: {dom}"));
    let row = &row[..row.find("</tr>").unwrap_or(row.len())];
    assert!(row.contains("<td>1</td>"), "first in its queue: {row}");
    // As the browser serializes text: only &, < and > escaped.
    let shown = why
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(
        row.contains(&format!("<span class=\"shortfall\">{shown}</span>")),
        "the scheduler's shortfall {why:?} in the row: {row}"
    );
    assert!(
        dom.contains(">Upgrade gated: waiting for quota<"),
        "the upgrade's phase: {dom}"
    );
    assert!(
        cpu_bar(&dom).contains("data-reserved=\"2\""),
        "the waiting slice reserves nothing: {}",
        cpu_bar(&dom)
    );
    let live = first_live_update(&ui).await;
    assert!(
        live.contains("data-gate=\"closed\"") && live.contains("class=\"shortfall\""),
        "the live stream carries the same view: {live}"
    );
    chromium(
        &chrome,
        &dir.join("profile-3"),
        &[format!("--screenshot={}", shot.display()), url.clone()],
    )
    .await;
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 20_000,
        "a real screenshot: {} bytes",
        png.len()
    );
    if std::env::var("QUOTAGATE_WRITE_SCREENSHOT").as_deref() == Ok("1") {
        std::fs::write(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/webview.png"),
            &png,
        )
        .unwrap();
    }

    // Raising the quota admits the slice: the gate opens, the service switches, the bar follows.
    cqs.patch("cq", &PatchParams::default(), &Patch::Merge(&cluster_queue("6")))
        .await
        .unwrap();
    let second = wait_list(&rss, "the switch to the new cluster", |s| {
        s.first().and_then(active_cluster).filter(|n| *n != first)
    })
    .await;
    until_page(&ui, "the upgraded service", |p| {
        p.contains(&format!("data-role=\"active\" data-cluster=\"{second}\""))
            && p.contains("data-gate=\"none\"")
            && p.contains("data-nominal=\"6\"")
            && p.contains("data-reserved=\"2\"")
    })
    .await;
    let dom = browser_dom(&chrome, &dir.join("profile-4"), &url).await;
    let bar = cpu_bar(&dom);
    assert!(
        bar.contains("data-nominal=\"6\"") && bar.contains("data-reserved=\"2\""),
        "bar after the upgrade settles: {bar}"
    );
    assert!(
        !dom.contains("class=\"shortfall\""),
        "nothing waits any more: {dom}"
    );
    assert!(
        !dom.contains("data-gate=\"closed\""),
        "the gate is no longer closed: {dom}"
    );
    assert!(
        dom.contains(&format!("data-role=\"active\" data-cluster=\"{second}\"")),
        "serving from the new cluster: {dom}"
    );
    assert!(
        dom.contains("class=\"switch\""),
        "the chart marks the switch: {dom}"
    );
    assert!(
        dom.contains("<ul class=\"events\"><li"),
        "recent events of the service and its clusters: {dom}"
    );

    // Every object's YAML on click: the link the page carries serves the cached object.
    let yaml = http_get(&ui, &format!("/yaml?kind=RayService&ns={NS}&name=fruit-stand"))
        .await
        .unwrap();
    assert!(
        yaml.contains("200 OK")
            && yaml.contains("kind: RayService")
            && yaml.contains("rayVersion:")
            && yaml.contains("2.47.0"),
        "{yaml}"
    );
    assert!(!yaml.contains("managedFields"), "{yaml}");
    assert!(
        yaml.to_ascii_lowercase()
            .contains("x-content-type-options: nosniff"),
        "plain text is never sniffed as HTML: {yaml}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Refusals of the binary itself: no browser needed.
#[test]
fn ui_addr_is_loopback_only_unless_allowed_and_keep_running_needs_a_way_to_look() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_quotagate"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (code, out) = run(&["run", "--embedded", "--ui-addr", "0.0.0.0:0"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("--ui-addr 0.0.0.0:0 is not a loopback address") && out.contains("--ui-allow-remote"),
        "{out}"
    );
    let (code, out) = run(&["run", "--ui-allow-remote"]);
    assert_eq!(code, Some(2), "--ui-allow-remote alone is a usage error: {out}");
    let (code, out) = run(&["demo", "--keep-running"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("--keep-running needs --listen") && out.contains("--ui-addr"),
        "{out}"
    );
    let (code, out) = run(&["demo", "--ui-pause", "1s"]);
    assert_eq!(code, Some(2), "--ui-pause without --ui-addr: {out}");
}
