//! One quota-gated RayService upgrade on real Ray (the process runtime), timed from the moment the
//! quota is raised: to the new cluster's first pod, to the first real request the new cluster answers,
//! and to promotion; with the failed requests of the load that runs through the whole upgrade. Used by
//! `quotagate bench incremental --real-ray` (through the Gateway's real proxy) and by
//! `GATE_REAL_RAY=1 cargo bench --bench gate` (blue/green, through the serve Service).
//!
//! The service is the tests' (`tests/real_ray_*.rs`): head-only, Serve on the head, 2 replicas of the
//! echo app asking no CPU, `num-cpus: 1`; its ClusterQueue holds one cluster until the quota is raised.
//! The answers name the cluster that served them, so the first answer from the new cluster is seen by
//! the load generator, which counts per second: that figure is to within a second.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::api::gateway::{Gateway, HTTPRoute};
use crate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor};
use crate::api::ray::{RayCluster, RayService};
use crate::cli::load::{self, Report};
use crate::embedded::sim::SimConfig;
use crate::embedded::sim::process::{ProcessConfig, ProcessRuntime, missing};
use crate::wiring::demo_real::RealRay;
use crate::wiring::manager::{EmbeddedOptions, ManagerOptions, embedded_server, run_embedded_on};
use crate::wiring::ray::Dashboards;

const NS: &str = "default";

#[derive(Clone, Debug)]
pub struct RealOptions {
    /// `NewClusterWithIncrementalUpgrade` through the Gateway, else blue/green through the serve Service.
    pub incremental: bool,
    pub step: i64,
    pub interval: i64,
    pub surge: i64,
    pub rps: u32,
    pub ray_venv: PathBuf,
    /// For each wait (the first cluster serving, then the upgrade).
    pub timeout: Duration,
}

impl Default for RealOptions {
    fn default() -> Self {
        RealOptions {
            incremental: true,
            step: 25,
            interval: 2,
            surge: 50,
            rps: 20,
            ray_venv: ".venv-ray".into(),
            timeout: Duration::from_secs(300),
        }
    }
}

/// What one run measured, from the quota raise.
#[derive(Clone, Debug)]
pub struct RealFigures {
    pub old: String,
    pub new: String,
    pub first_pod: Duration,
    /// The first second of the load in which the new cluster answered, from the quota raise (the
    /// load counts per second: the answer came within the second after this).
    pub first_new_answer: Duration,
    pub promoted: Duration,
    /// The new cluster's weight in the route as it changed (incremental), from the quota raise.
    pub weights: Vec<(Duration, u32)>,
    /// When the quota was raised, from the load's start.
    pub raise_at: Duration,
    pub load: Report,
}

fn service(app: &std::path::Path, o: &RealOptions, color: &str) -> Value {
    let mut rs = json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "echo", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "rayClusterDeletionDelaySeconds": 2,
            "serveConfigV2": "applications:\n  - name: echo\n    import_path: echo_app:app\n    route_prefix: /\n    deployments:\n      - name: Echo\n        num_replicas: 2\n        ray_actor_options:\n          num_cpus: 0\n",
            "rayClusterConfig": {
                "rayVersion": "2.60.0",
                "headGroupSpec": {"rayStartParams": {"num-cpus": "1", "object-store-memory": "100000000"}, "template": {"spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{"name": "ray-head", "image": "rayproject/ray:2.60.0",
                        "env": [{"name": "PYTHONPATH", "value": app.display().to_string()}, {"name": "COLOR", "value": color}],
                        "ports": [{"containerPort": 6379, "name": "gcs-server"}, {"containerPort": 8265, "name": "dashboard"},
                                  {"containerPort": 10001, "name": "client"}, {"containerPort": 8000, "name": "serve"}],
                        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}}]}}},
                "workerGroupSpecs": []
            }
        }
    });
    if o.incremental {
        rs["spec"]["upgradeStrategy"] = json!({"type": "NewClusterWithIncrementalUpgrade", "clusterUpgradeOptions": {
            "gatewayClassName": "istio", "maxSurgePercent": o.surge, "stepSizePercent": o.step, "intervalSeconds": o.interval}});
        rs["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = json!(true);
    }
    rs
}

fn cq(cpu: &str) -> Value {
    json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor",
            "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "16Gi"}]}]}]}})
}

fn typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, String> {
    serde_json::from_value(v).map_err(|e| format!("bench object: {e}"))
}

/// Polls `f` every 200 ms until it returns Some, for at most `timeout`.
async fn until<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "real-Ray bench: {what} did not happen within {} s",
                timeout.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn cluster_of(rs: &RayService, pending: bool) -> Option<String> {
    let st = rs.status.as_ref()?;
    let s = if pending {
        st.pending_service_status.as_ref()?
    } else {
        st.active_service_status.as_ref()?
    };
    s.ray_cluster_name.clone().filter(|n| !n.is_empty())
}

/// Runs one upgrade; refuses up front, naming what is missing, when this host cannot run Ray pods.
pub async fn run(o: &RealOptions) -> Result<RealFigures, String> {
    let lacks = missing(&ProcessConfig {
        ray_venv: o.ray_venv.clone(),
        ..Default::default()
    });
    if !lacks.is_empty() {
        return Err(format!(
            "the real-Ray bench runs Ray pods as processes and needs what this host lacks:\n  - {}",
            lacks.join("\n  - ")
        ));
    }
    let runtime = ProcessRuntime::start(ProcessConfig {
        ray_venv: o.ray_venv.clone(),
        ..Default::default()
    })
    .map_err(|e| e.to_string())?;
    let app = RealRay::new().map_err(|e| format!("writing the Serve app: {e}"))?;
    let mut sims = SimConfig::default();
    if let Some(n) = sims.node.as_mut() {
        n.runtime = Some(runtime.clone());
    }
    let server = embedded_server();
    let client = server.client();
    let opts = EmbeddedOptions {
        sims,
        manager: ManagerOptions {
            leader_election: false,
            ray: Some(Dashboards::simulated(
                Duration::from_secs(1),
                Duration::from_secs(1),
            )),
            ..ManagerOptions::default()
        },
        ..EmbeddedOptions::default()
    };
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    let manager = tokio::spawn(run_embedded_on(
        server,
        opts,
        async move { stopped.cancelled().await },
    ));
    let result = upgrade(&client, o, &app).await;
    stop.cancel();
    // The manager's shutdown stops every pod's processes and removes the pod network.
    let _ = manager.await;
    drop(runtime);
    result
}

async fn upgrade(client: &kube::Client, o: &RealOptions, app: &RealRay) -> Result<RealFigures, String> {
    let pp = PostParams::default();
    let e = |e: kube::Error| e.to_string();
    Api::<ResourceFlavor>::all(client.clone())
        .create(&pp, &typed(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}}))?)
        .await
        .map_err(e)?;
    // One cluster (head 1 CPU, plus KubeRay's autoscaler sidecar of 500m for incremental), not two.
    let (short, enough) = if o.incremental { ("2", "3") } else { ("1500m", "2") };
    let cqs: Api<ClusterQueue> = Api::all(client.clone());
    cqs.create(&pp, &typed(cq(short))?).await.map_err(e)?;
    Api::<LocalQueue>::namespaced(client.clone(), NS)
        .create(&pp, &typed(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": NS}, "spec": {"clusterQueue": "cq"}}))?)
        .await
        .map_err(e)?;
    let rss: Api<RayService> = Api::namespaced(client.clone(), NS);
    rss.create(&pp, &typed(service(app.app_dir(), o, "blue"))?)
        .await
        .map_err(e)?;
    let old = until("the first cluster serving", o.timeout, || async {
        rss.get("echo").await.ok().and_then(|r| cluster_of(&r, false))
    })
    .await?;
    let url = if o.incremental {
        let gws: Api<Gateway> = Api::namespaced(client.clone(), NS);
        let ip = until("the Gateway's address", o.timeout, || async {
            let g = gws.get_opt("echo-gateway").await.ok().flatten()?;
            let ip = g
                .status
                .as_ref()?
                .extra
                .get("addresses")?
                .pointer("/0/value")?
                .as_str()?
                .to_owned();
            (g.is_ready() && ip.starts_with("10.")).then_some(ip)
        })
        .await?;
        format!("http://{ip}:80/")
    } else {
        let svcs: Api<Service> = Api::namespaced(client.clone(), NS);
        let ip = until("the serve Service's ClusterIP", o.timeout, || async {
            svcs.get_opt("echo-serve-svc")
                .await
                .ok()
                .flatten()?
                .spec?
                .cluster_ip
                .filter(|ip| ip.starts_with("10."))
        })
        .await?;
        format!("http://{ip}:8000/")
    };
    until("the first answer", o.timeout, || async {
        let probe = load::Options {
            url: url.clone(),
            rps: 5,
            duration: Duration::from_millis(400),
            connections: 2,
            ..Default::default()
        };
        let r = load::run(&probe, CancellationToken::new(), None).await.ok()?;
        (r.total.ok > 0 && r.failed == 0).then_some(())
    })
    .await?;

    // The load, from here to the end.
    let stop_load = CancellationToken::new();
    let load_opts = load::Options {
        url,
        rps: o.rps,
        duration: load::MAX_DURATION,
        connections: 64,
        timeout: Duration::from_secs(5),
        ..Default::default()
    };
    let load_start = Instant::now();
    let latest: std::sync::Arc<std::sync::Mutex<Report>> = std::sync::Arc::default();
    let load_task = tokio::spawn({
        let (stop, latest) = (stop_load.clone(), latest.clone());
        async move {
            let progress = move |r: &Report| {
                *latest.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = r.clone()
            };
            load::run(&load_opts, stop, Some(&progress)).await
        }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The upgrade, gated until the quota is raised.
    let mut rs = rss.get("echo").await.map_err(e)?;
    rs.spec = typed::<RayService>(service(app.app_dir(), o, "green"))?.spec;
    rss.replace("echo", &pp, &rs).await.map_err(e)?;
    let new = until("the pending cluster", o.timeout, || async {
        rss.get("echo").await.ok().and_then(|r| cluster_of(&r, true))
    })
    .await?;
    let rcs: Api<RayCluster> = Api::namespaced(client.clone(), NS);
    until("the pending cluster gated", o.timeout, || async {
        rcs.get_opt(&new)
            .await
            .ok()
            .flatten()
            .filter(|c| c.spec.suspend == Some(true))
            .map(|_| ())
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    if !pods
        .list(&ListParams::default().labels(&format!("ray.io/cluster={new}")))
        .await
        .map_err(e)?
        .items
        .is_empty()
    {
        return Err(format!("{new} has a pod before the quota was raised"));
    }
    let mut first_pod = watcher(
        pods,
        watcher::Config::default().labels(&format!("ray.io/cluster={new}")),
    )
    .applied_objects()
    .boxed();
    let raised = Instant::now();
    cqs.patch("cq", &PatchParams::default(), &Patch::Merge(cq(enough)))
        .await
        .map_err(e)?;
    let first_pod = match tokio::time::timeout(o.timeout, first_pod.next()).await {
        Ok(Some(Ok(_))) => raised.elapsed(),
        _ => {
            return Err(format!(
                "no pod of {new} within {} s of the quota raise",
                o.timeout.as_secs()
            ));
        }
    };
    // Promotion, with the route's weights on the way (incremental).
    let routes: Api<HTTPRoute> = Api::namespaced(client.clone(), NS);
    let mut weights: Vec<(Duration, u32)> = Vec::new();
    let deadline = Instant::now() + o.timeout;
    let promoted = loop {
        if o.incremental
            && let Ok(Some(r)) = routes.get_opt("echo-httproute").await
        {
            let w = r
                .spec
                .rules
                .iter()
                .flatten()
                .flat_map(|rule| rule.backend_refs.iter().flatten())
                .find(|b| b.name.starts_with(&new))
                .and_then(|b| b.weight);
            let w = w.map_or(0, |w| u32::try_from(w).unwrap_or(0));
            if weights.last().map_or(w > 0, |(_, l)| *l != w) {
                weights.push((raised.elapsed(), w));
            }
        }
        let rs = rss.get("echo").await.map_err(e)?;
        if cluster_of(&rs, false).as_deref() == Some(new.as_str()) && cluster_of(&rs, true).is_none() {
            break raised.elapsed();
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{new} not promoted within {} s of the quota raise",
                o.timeout.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    until("the old cluster deleted", o.timeout, || async {
        rcs.get_opt(&old)
            .await
            .ok()
            .and_then(|c| c.is_none().then_some(()))
    })
    .await?;
    // Through a ClusterIP, keep-alive connections stay with the old head until its processes stop
    // serving them: wait for the new cluster's answers, then a few seconds of them.
    until("answers from the new cluster", o.timeout, || async {
        latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clusters_in_order
            .contains(&new)
            .then_some(())
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop_load.cancel();
    let load = load_task
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let raise_at = raised.saturating_duration_since(load_start);
    let first_new_second = load
        .per_second
        .iter()
        .find(|s| s.clusters.contains_key(&new))
        .map(|s| s.second);
    let first_new_answer = match first_new_second {
        Some(s) => Duration::from_secs(s).saturating_sub(raise_at),
        None => {
            return Err(format!(
                "the new cluster {new} never answered a request of the load"
            ));
        }
    };
    Ok(RealFigures {
        old,
        new,
        first_pod,
        first_new_answer,
        promoted,
        weights,
        raise_at,
        load,
    })
}

/// The figures as printed.
pub fn render(o: &RealOptions, f: &RealFigures) -> String {
    let mut out = String::new();
    let how = if o.incremental {
        format!(
            "NewClusterWithIncrementalUpgrade (step {}%, interval {}s, surge {}%) through the Gateway's proxy",
            o.step, o.interval, o.surge
        )
    } else {
        "blue/green through the serve Service's ClusterIP".to_owned()
    };
    out.push_str(&format!(
        "== real Ray: {} -> {}, {how}, load {} requests/s\n",
        f.old, f.new, o.rps
    ));
    for (t, w) in &f.weights {
        out.push_str(&format!(
            "  +{:>6.2} s  route: {w}% to {}\n",
            t.as_secs_f64(),
            f.new
        ));
    }
    out.push_str(&format!(
        "  quota raised -> first pod of the new cluster   {:>7.2} s\n",
        f.first_pod.as_secs_f64()
    ));
    out.push_str(&format!(
        "  quota raised -> first answer from it (to 1 s)  {:>7.2} s\n",
        f.first_new_answer.as_secs_f64()
    ));
    out.push_str(&format!(
        "  quota raised -> promotion                      {:>7.2} s\n",
        f.promoted.as_secs_f64()
    ));
    let t = &f.load.total;
    // Where the failures fell, in seconds from the quota raise.
    let raise_at = f.raise_at.as_secs();
    let failed: Vec<String> = f
        .load
        .per_second
        .iter()
        .filter(|s| s.counts.failed() > 0)
        .map(|s| {
            format!(
                "{:+}: {}",
                i128::from(s.second) - i128::from(raise_at),
                s.counts.failed()
            )
        })
        .collect();
    if !failed.is_empty() {
        out.push_str(&format!(
            "  failed requests by second from the quota raise: {}\n",
            failed.join(", ")
        ));
    }
    out.push_str(&format!(
        "  requests: sent {}, ok {}, failed {} ({} non-2xx, {} connection errors, {} timeouts), skipped {}; answered by {}",
        t.sent,
        t.ok,
        f.load.failed,
        t.non_2xx,
        t.conn_errors,
        t.timeouts,
        t.skipped,
        f.load.clusters_in_order.join(" then ")
    ));
    out
}
