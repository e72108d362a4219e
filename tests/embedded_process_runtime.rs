//! The embedded cluster's process runtime (issue 37): a RayCluster on `rayproject/ray:2.60.0` runs as
//! real Ray (the pinned one in `.venv-ray`), each pod in a network namespace of its own. Its head pod
//! becomes Running and Ready from the real process and a real exec readiness probe, gets an address of
//! the runtime's pod network, and the real dashboard answers on that address, and through a ClusterIP
//! Service from the host; inside the pods Service names resolve, so the worker (after KubeRay's
//! wait-gcs-ready init container) joins its head by the head Service's name; the pod's output is served as its log; deleting the RayCluster stops every process and removes the
//! namespace, and shutting the cluster down removes the bridge. A crashed run's leftovers (namespace,
//! process, bridge) are removed when a runtime starts.
//!
//!   scripts/install-ray.sh && cargo test --test embedded_process_runtime -- --nocapture
//!
//! Needs root and iproute2 (`ip netns`). Skipped without them or without `.venv-ray`, unless
//! `QUOTAGATE_REQUIRE_TOOLS=1`, which makes their absence a failure. One #[test]: one head, one worker.

mod process_support;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use process_support::{
    Manager, alive, bridge_gone_or_reused, netns_pids, repo_root, skip_without_tools, start_manager,
};
use quotagate::api::ray::RayCluster;
use quotagate::embedded::sim::process::{ProcessConfig, ProcessRuntime};
use quotagate::rayservice::dashboard::http::{HttpDashboard, HttpDashboardOptions};
use quotagate::rayservice::dashboard::{DashboardEndpoint, RayDashboard};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn netns_list() -> BTreeSet<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect()
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn environ(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

/// One plain GET from the host, as a user's curl would.
async fn get(addr: &str, path: &str) -> Option<String> {
    let mut s = tokio::time::timeout(Duration::from_secs(3), tokio::net::TcpStream::connect(addr))
        .await
        .ok()?
        .ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut out))
        .await
        .ok()?
        .ok()?;
    Some(out)
}

fn head_cluster() -> RayCluster {
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "real", "namespace": "default"},
        "spec": {"rayVersion": "2.60.0", "headGroupSpec": {
            "rayStartParams": {"num-cpus": "1", "object-store-memory": "100000000"},
            "template": {"spec": {
                // Ray drains for up to 30 s on SIGTERM; 5 s then SIGKILL keeps the test short.
                "terminationGracePeriodSeconds": 5,
                "containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0",
                    // As KubeRay's samples give it to the head.
                    "env": [{"name": "MY_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                    // An exec readiness probe (KubeRay keeps a user's probe; its own liveness probe is an
                    // httpGet for Ray >= 2.53). It asks localhost, which is only the pod's inside the pod.
                    "readinessProbe": {"exec": {"command": ["python", "-c",
                        "import sys, urllib.request as u; sys.exit(b'success' not in u.urlopen('http://localhost:52365/api/local_raylet_healthz', timeout=4).read())"]},
                        "initialDelaySeconds": 5, "periodSeconds": 2, "timeoutSeconds": 5, "failureThreshold": 30},
                    "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}}]}}},
            // One worker: it joins its head by the head Service's name, as KubeRay starts it (after its
            // wait-gcs-ready init container saw the GCS through the same name).
            "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 0, "maxReplicas": 1,
                "rayStartParams": {"num-cpus": "1", "object-store-memory": "100000000"},
                "template": {"spec": {"terminationGracePeriodSeconds": 5, "containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}}}]}
    }))
    .unwrap()
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[test]
fn a_raycluster_head_runs_as_real_ray_in_a_network_namespace_of_its_own() {
    if skip_without_tools() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // What a crashed run leaves: a pod namespace with a process in it, and its bridge, under a /24
        // whose lock no live quotagate holds. Starting a runtime removes them.
        let stale_ns = "qg-254-9";
        if !netns_list().contains(stale_ns) {
            assert!(Command::new("ip").args(["netns", "add", stale_ns]).status().unwrap().success());
        }
        let mut stale = Command::new("ip").args(["netns", "exec", stale_ns, "sleep", "300"]).spawn().unwrap();
        let _ = Command::new("ip").args(["link", "add", "qgbr254", "type", "bridge"]).status();
        let runtime = ProcessRuntime::start(ProcessConfig { ray_venv: repo_root().join(".venv-ray"), ..ProcessConfig::default() }).unwrap();
        assert!(!netns_list().contains(stale_ns), "a crashed run's namespace is removed on start");
        assert!(!Command::new("ip").args(["link", "show", "qgbr254"]).output().unwrap().status.success(), "and its bridge");
        let waited = stale.wait().unwrap();
        assert!(!waited.success(), "the process left in it was killed: {waited:?}");
        let cidr = runtime.pod_cidr();
        let prefix = cidr.trim_end_matches("0/24").to_owned();
        let bridge = format!("qgbr{}", cidr.split('.').nth(2).unwrap());
        println!("pod network {cidr} on {bridge}");
        let Manager { client, stop_tx, manager } = start_manager(&runtime);
        drop(runtime);

        let rcs: Api<RayCluster> = Api::namespaced(client.clone(), "default");
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let t0 = Instant::now();
        rcs.create(&PostParams::default(), &head_cluster()).await.unwrap();

        // 1. The head pod: Running, with an address of the pod network, then Ready from its real probe.
        let heads = ListParams::default().labels("ray.io/cluster=real,ray.io/node-type=head");
        let mut said = String::new();
        let head = loop {
            let list = pods.list(&heads).await.unwrap();
            if let Some(p) = list.items.first() {
                let s = p.status.clone().unwrap_or_default();
                let now = format!("{} ip={} ready={}", s.phase.clone().unwrap_or_default(), s.pod_ip.clone().unwrap_or_default(), ready(p));
                if now != said {
                    println!("  +{:.1?} head {now}", t0.elapsed());
                    said = now;
                }
                if ready(p) {
                    break p.clone();
                }
            }
            assert!(t0.elapsed() < Duration::from_secs(120), "the head pod was not Ready within 120 s; last: {said}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let name = head.metadata.name.clone().unwrap();
        let probes = &head.spec.as_ref().unwrap().containers[0];
        assert!(probes.readiness_probe.as_ref().unwrap().exec.is_some(), "the exec readiness probe made it Ready");
        assert!(probes.liveness_probe.as_ref().unwrap().http_get.is_some(), "and KubeRay's httpGet liveness probe runs beside it");
        let status = head.status.clone().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        let ip = status.pod_ip.clone().unwrap();
        assert!(ip.starts_with(&prefix), "{ip} is not in {cidr}");
        let cs = &status.container_statuses.clone().unwrap()[0];
        assert_eq!((cs.name.as_str(), cs.restart_count, cs.ready), ("ray-head", 0, true));
        assert!(cs.state.as_ref().unwrap().running.is_some(), "{cs:?}");

        // 2. Real Ray processes in the pod's own namespace, with the pod's environment.
        let ns = format!("qg-{}-{}", cidr.split('.').nth(2).unwrap(), ip.rsplit('.').next().unwrap());
        assert!(netns_list().contains(&ns), "no namespace {ns}: {:?}", netns_list());
        let pids = netns_pids(&ns);
        let names: BTreeSet<String> = pids.iter().map(|p| comm(*p)).collect();
        println!("  {} processes in {ns}: {names:?}", pids.len());
        assert!(names.contains("gcs_server") && names.contains("raylet"), "{names:?}");
        let raylet = pids.iter().copied().find(|p| comm(*p) == "raylet").unwrap();
        let env = environ(raylet);
        for want in [format!("MY_POD_IP={ip}"), "RAY_ADDRESS=127.0.0.1:6379".into(), "RAY_CLUSTER_NAME=real".into(), format!("RAY_CLOUD_INSTANCE_ID={name}")] {
            assert!(env.contains(&want), "{want} not in the raylet's environment");
        }

        // 3. The real dashboard on the pod's address: its version, and Serve through the project's client.
        // The Ready probe asks the dashboard agent; the dashboard itself may come a little later.
        let version = loop {
            match get(&format!("{ip}:8265"), "/api/version").await {
                Some(v) if v.starts_with("HTTP/1.1 200") => break v,
                other => assert!(t0.elapsed() < Duration::from_secs(150), "the dashboard does not answer on {ip}:8265: {other:?}"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        println!("  +{:.1?} dashboard answers on {ip}:8265", t0.elapsed());
        assert!(version.starts_with("HTTP/1.1 200") && version.contains("\"ray_version\": \"2.60.0\""), "{version}");
        let dashboard = HttpDashboard::new(HttpDashboardOptions::default());
        let serve = dashboard.serve_details(&DashboardEndpoint::new(format!("http://{ip}:8265"))).await.unwrap();
        assert!(serve.applications.is_empty(), "a fresh head runs no Serve app");
        assert!(get("127.0.0.1:8265", "/api/version").await.is_none_or(|v| !v.contains(&ip)), "the pod's port 8265 is its own, not the host's");

        // 3b. Services: a ClusterIP Service reaches the dashboard from the host through the in-process
        // proxy, and inside the pod Service names resolve (the pod's hosts file): the headless head
        // Service to the head's address, the ClusterIP Service by its short name.
        let svcs: Api<Service> = Api::namespaced(client.clone(), "default");
        let dash: Service = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "dash", "namespace": "default"},
            "spec": {"selector": {"ray.io/cluster": "real", "ray.io/node-type": "head"}, "ports": [{"name": "dashboard", "port": 80, "targetPort": 8265}]}}))
        .unwrap();
        svcs.create(&PostParams::default(), &dash).await.unwrap();
        let cluster_ip = loop {
            let s = svcs.get("dash").await.unwrap();
            if let Some(ip) = s.spec.and_then(|s| s.cluster_ip).filter(|ip| !ip.is_empty()) {
                break ip;
            }
            assert!(t0.elapsed() < Duration::from_secs(180), "no ClusterIP on Service dash");
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        assert!(cluster_ip.starts_with(&format!("10.96.{}.", cidr.split('.').nth(2).unwrap())), "{cluster_ip}");
        let through_proxy = loop {
            match get(&format!("{cluster_ip}:80"), "/api/version").await {
                Some(v) if v.starts_with("HTTP/1.1 200") => break v,
                other => assert!(t0.elapsed() < Duration::from_secs(180), "no answer through {cluster_ip}:80: {other:?}"),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        assert!(through_proxy.contains("\"ray_version\": \"2.60.0\""), "{through_proxy}");
        let python = repo_root().join(".venv-ray/bin/python");
        let script = "import socket, sys, urllib.request as u\n\
            print(socket.gethostbyname('real-head-svc.default.svc.cluster.local'))\n\
            print(u.urlopen('http://dash/api/version', timeout=5).status)\n\
            print(u.urlopen('http://dash.default.svc.cluster.local:80/api/version', timeout=5).status)";
        let inside = loop {
            let out = Command::new("ip").args(["netns", "exec", &ns]).arg(&python).args(["-c", script]).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.status.success() {
                break text;
            }
            assert!(t0.elapsed() < Duration::from_secs(180), "names inside the pod: {text} {}", String::from_utf8_lossy(&out.stderr));
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        assert_eq!(inside, format!("{ip}\n200\n200\n"), "inside the pod");
        println!("  +{:.1?} Service dash at {cluster_ip}:80 answers from the host; names resolve inside the pod", t0.elapsed());

        // 3c. The worker joined its head by the head Service's name: the head's GCS lists its address.
        let workers = ListParams::default().labels("ray.io/cluster=real,ray.io/node-type=worker");
        let worker = loop {
            let list = pods.list(&workers).await.unwrap();
            if let Some(p) = list.items.first().filter(|p| ready(p)) {
                break p.clone();
            }
            assert!(t0.elapsed() < Duration::from_secs(240), "the worker pod was not Ready within 240 s: {:?}", list.items.first().and_then(|p| p.status.clone()));
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let worker_ip = worker.status.clone().unwrap().pod_ip.unwrap();
        let spec = worker.spec.clone().unwrap();
        assert!(spec.init_containers.iter().flatten().any(|c| c.name == "wait-gcs-ready"), "KubeRay's init container ran first");
        // Its status as the kubelet shows it: the init container's own status, exited 0, Initialized.
        let st = worker.status.clone().unwrap();
        let init = st.init_container_statuses.unwrap_or_default();
        assert_eq!(init.len(), 1, "{init:?}");
        assert_eq!(init[0].name, "wait-gcs-ready");
        let done = init[0].state.as_ref().and_then(|s| s.terminated.as_ref()).expect("wait-gcs-ready terminated");
        assert_eq!((done.exit_code, done.reason.as_deref()), (0, Some("Completed")));
        assert!(st.conditions.iter().flatten().any(|c| c.type_ == "Initialized" && c.status == "True"));
        let args = spec.containers[0].args.clone().unwrap_or_default().join(" ");
        assert!(args.contains("--address=real-head-svc.default.svc.cluster.local:6379"), "{args}");
        let nodes = loop {
            match get(&format!("{ip}:8265"), "/api/v0/nodes").await {
                Some(v) if v.contains(&format!("\"{worker_ip}\"")) => break v,
                other => assert!(t0.elapsed() < Duration::from_secs(240), "the head does not list the worker {worker_ip}: {other:?}"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        assert!(nodes.contains(&format!("\"{ip}\"")), "{nodes}");
        let worker_ns = format!("qg-{}-{}", cidr.split('.').nth(2).unwrap(), worker_ip.rsplit('.').next().unwrap());
        let worker_pids = netns_pids(&worker_ns);
        assert!(worker_pids.iter().any(|p| comm(*p) == "raylet"), "a raylet runs in the worker's namespace");
        println!("  +{:.1?} worker {worker_ip} joined the head through real-head-svc", t0.elapsed());

        // 4. Its output is the pod's log.
        let log = pods.logs(&name, &LogParams { container: Some("ray-head".into()), ..Default::default() }).await.unwrap();
        assert!(log.contains("Ray runtime started"), "{log}");

        // 5. Deleting the RayCluster stops every process (SIGTERM, SIGKILL after the 5 s grace) and
        // removes the namespace. (The embedded garbage collector removes the pod object at once.)
        let t1 = Instant::now();
        rcs.delete("real", &DeleteParams::default()).await.unwrap();
        loop {
            let left: Vec<(u32, String)> = pids.iter().chain(&worker_pids).copied().filter(|p| alive(*p)).map(|p| (p, comm(p))).collect();
            if left.is_empty() && !netns_list().contains(&ns) && !netns_list().contains(&worker_ns) {
                break;
            }
            assert!(t1.elapsed() < Duration::from_secs(30), "30 s after the delete: namespace listed: {}, processes left: {left:?}", netns_list().contains(&ns));
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        println!("  processes and namespace gone {:.1?} after the RayCluster's delete", t1.elapsed());
        assert!(pods.get_opt(&name).await.unwrap().is_none(), "the head pod is gone");

        // 6. Shutdown removes the pod network.
        let _ = stop_tx.send(());
        manager.await.unwrap().unwrap();
        assert!(bridge_gone_or_reused(&bridge), "bridge {bridge} left behind");
        println!("done in {:.1?}", t0.elapsed());
    });
}

/// The flag's refusals, before anything starts (no root or Ray needed).
#[test]
fn runtime_flag_refusals_name_the_problem() {
    let qg = env!("CARGO_BIN_EXE_quotagate");
    let out = Command::new(qg)
        .args(["run", "--runtime", "process"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--runtime process runs the embedded cluster's pods: use it with --embedded"),
        "{err}"
    );
    let kc = std::env::temp_dir().join(format!("qg-rt-flag-{}.kubeconfig", std::process::id()));
    // `apiserver --runtime process --ray-venv VENV` refused; its stderr.
    let refused_venv = |venv: &std::path::Path| {
        let out = Command::new(qg)
            .args([
                "apiserver",
                "--listen",
                "127.0.0.1:0",
                "--runtime",
                "process",
                "--ray-venv",
            ])
            .arg(venv)
            .arg("--kubeconfig-out")
            .arg(&kc)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = refused_venv("/nonexistent/venv".as_ref());
    assert!(
        err.contains("--ray-venv /nonexistent/venv: no bin/ray there (run scripts/install-ray.sh)"),
        "{err}"
    );
    // A Ray under /tmp: every pod has a /tmp of its own, so its processes could not see it.
    let tmp_venv = std::path::PathBuf::from(format!("/tmp/qg-rt-venv-{}", std::process::id()));
    std::fs::create_dir_all(tmp_venv.join("bin")).unwrap();
    std::fs::write(tmp_venv.join("bin/ray"), "").unwrap();
    let err = refused_venv(&tmp_venv);
    let _ = std::fs::remove_dir_all(&tmp_venv);
    assert!(
        err.contains(&format!(
            "--ray-venv {}: under /tmp, which every pod replaces with a /tmp of its own",
            tmp_venv.display()
        )),
        "{err}"
    );
    let out = Command::new(qg)
        .args(["run", "--embedded", "--runtime", "docker"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid value 'docker' for '--runtime <RUNTIME>'")
    );
    let _ = std::fs::remove_file(kc);
}

/// quotagate's own image runs as this machine's quotagate binary; one under the host's /tmp is out of
/// every pod's sight (each has a /tmp of its own), so `node-agent --runtime process` refuses it.
#[test]
fn a_quotagate_binary_under_tmp_is_refused_naming_why() {
    use quotagate::embedded::sim::process::seen_by_pods;
    let qg = std::path::Path::new(env!("CARGO_BIN_EXE_quotagate"));
    let dir = std::path::PathBuf::from(format!("/tmp/qg-rt-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("quotagate");
    std::fs::write(&copy, "").unwrap();
    let err = seen_by_pods(&copy)
        .map(|()| String::new())
        .unwrap_or_else(|e| e.to_string());
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        err.contains(&format!(
            "this quotagate binary, {}, is under /tmp, which every pod replaces with a /tmp of its own",
            copy.display()
        )),
        "{err}"
    );
    if !qg.canonicalize().unwrap().starts_with("/tmp") {
        assert!(seen_by_pods(qg).is_ok(), "the build's own binary is seen");
    }
}
