//! `quotagate demo`: a scripted walk through quota admission and a RayService blue/green upgrade on the
//! embedded cluster, printing what happens and how long each step took. Every step waits on the API
//! (a watch with a deadline) for the state a user would check with kubectl; a step that does not
//! happen in time fails the demo with the state it found.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use thiserror::Error;

use super::demo_real::{RealRay, summary};
use crate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Workload};
use crate::api::ray::{RayCluster, RayService};
use crate::cli::load;

const NS: &str = "default";

#[derive(Debug, Error)]
pub enum DemoError {
    #[error("step {step:?} did not happen within {secs} s; last seen: {last}")]
    Timeout { step: String, secs: u64, last: String },
    #[error("API call failed during {step:?}: {source}")]
    Api { step: String, source: kube::Error },
    #[error("demo object {what} does not deserialize: {source}")]
    Object {
        what: &'static str,
        source: serde_json::Error,
    },
    #[error("the load generator: {0}")]
    Load(#[from] load::LoadError),
    #[error("requests failed during the upgrade: {0}")]
    RequestsFailed(String),
}

/// Prints progress lines with the time since the demo started, or, for `--json`, keeps them for one JSON
/// timeline at the end.
struct Clock {
    start: Instant,
    json: Option<std::cell::RefCell<Vec<Value>>>,
    /// With the web view open: how long to hold the states worth looking at (zero: no hold).
    pause: Duration,
}

impl Clock {
    fn say(&self, line: &str) {
        let t = self.start.elapsed().as_secs_f64();
        match &self.json {
            Some(steps) => steps
                .borrow_mut()
                .push(json!({"seconds": (t * 1000.0).round() / 1000.0, "event": line})),
            None => println!("[{t:>6.1}s] {line}"),
        }
    }

    /// Holds an interesting state for `pause`, so someone watching the web view sees it (the story
    /// itself moves on in milliseconds).
    async fn hold(&self, what: &str) {
        if self.pause.is_zero() {
            return;
        }
        self.say(&format!(
            "holding {} s for the web view: {what}",
            self.pause.as_secs()
        ));
        tokio::time::sleep(self.pause).await;
    }

    fn finish(&self) {
        if let Some(steps) = &self.json {
            println!("{}", Value::Array(steps.borrow().clone()));
        }
    }
}

fn typed<T: DeserializeOwned>(what: &'static str, v: Value) -> Result<T, DemoError> {
    serde_json::from_value(v).map_err(|source| DemoError::Object { what, source })
}

fn api_err(step: &str) -> impl FnOnce(kube::Error) -> DemoError + '_ {
    move |source| DemoError::Api {
        step: step.to_string(),
        source,
    }
}

/// Waits until `check` over the listed objects returns Some, re-listing on every watch event.
async fn wait_list<K, R>(
    api: &Api<K>,
    lp: &ListParams,
    step: &str,
    timeout: Duration,
    check: impl Fn(&[K]) -> Option<R>,
) -> Result<R, DemoError>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    loop {
        let items = api.list(lp).await.map_err(api_err(step))?.items;
        if let Some(r) = check(&items) {
            return Ok(r);
        }
        let last = format!(
            "{} object(s): {}",
            items.len(),
            items.iter().map(|o| o.name_any()).collect::<Vec<_>>().join(", ")
        );
        match tokio::time::timeout_at(deadline, events.try_next()).await {
            Ok(_) => continue,
            Err(_) => {
                return Err(DemoError::Timeout {
                    step: step.to_string(),
                    secs: timeout.as_secs(),
                    last,
                });
            }
        }
    }
}

fn condition<'a>(
    conds: Option<&'a Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
    t: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    crate::api::conditions::find(conds.map(Vec::as_slice), t)
}

fn workload_of<'a>(wls: &'a [Workload], owner: &str) -> Option<&'a Workload> {
    wls.iter()
        .find(|w| w.owner_references().iter().any(|o| o.name == owner))
}

fn running_pods(pods: &[Pod], cluster: &str) -> usize {
    pods.iter()
        .filter(|p| p.labels().get("ray.io/cluster").map(String::as_str) == Some(cluster))
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .count()
}

/// "1 pod", "2 pods".
fn pods_count(n: usize) -> String {
    format!("{n} pod{}", if n == 1 { "" } else { "s" })
}

fn ray_cluster(name: &str, head_cpu: &str, workers: i32, worker_cpu: &str, real: bool) -> Value {
    // On real Ray: the Ray that runs (the process runtime's pinned one), and a small object store, as
    // Ray would otherwise reserve 30% of the host's memory per node.
    let version = if real { "2.60.0" } else { "2.46.0" };
    let params = if real {
        json!({"object-store-memory": "100000000"})
    } else {
        json!({})
    };
    let container = |n: &str, cpu: &str, mem: &str| {
        json!({"name": n, "image": format!("rayproject/ray:{version}"),
               "resources": {"requests": {"cpu": cpu, "memory": mem}, "limits": {"cpu": cpu, "memory": mem}}})
    };
    let grace = if real { json!(5) } else { Value::Null };
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "demo-queue"}},
        "spec": {
            "rayVersion": version,
            "headGroupSpec": {"rayStartParams": params, "template": {"spec": {"terminationGracePeriodSeconds": grace, "containers": [container("ray-head", head_cpu, "4Gi")]}}},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": workers, "minReplicas": 0, "maxReplicas": 10, "rayStartParams": params,
                "template": {"spec": {"terminationGracePeriodSeconds": grace, "containers": [container("ray-worker", worker_cpu, "2Gi")]}}}]
        }
    })
}

fn ray_service(version: &str) -> Value {
    let image = format!("rayproject/ray:{version}");
    let res = |cpu: &str, mem: &str| json!({"requests": {"cpu": cpu, "memory": mem}, "limits": {"cpu": cpu, "memory": mem}});
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": "fruit-stand", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "demo-queue"}},
        "spec": {
            "rayClusterDeletionDelaySeconds": 3,
            "serveConfigV2": "applications:\n  - name: fruit_app\n    import_path: fruit.deployment_graph\n    route_prefix: /fruit\n    deployments:\n      - name: FruitMarket\n        num_replicas: 2\n",
            "rayClusterConfig": {
                "rayVersion": version,
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": image, "resources": res("1", "2Gi"),
                    "ports": [{"containerPort": 6379, "name": "gcs-server"}, {"containerPort": 8265, "name": "dashboard"},
                              {"containerPort": 10001, "name": "client"}, {"containerPort": 8000, "name": "serve"}]}]}}},
                "workerGroupSpecs": [{"groupName": "small-group", "replicas": 1, "minReplicas": 1, "maxReplicas": 3, "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-worker", "image": image, "resources": res("1", "2Gi")}]}}}]
            }
        }
    })
}

/// CPU in use in the ClusterQueue (its flavorsUsage), as Kubernetes prints it.
fn cq_cpu_used(cq: &ClusterQueue) -> Option<String> {
    let status = cq.status.as_ref()?;
    status
        .flavors_usage
        .iter()
        .flat_map(|f| f.resources.iter())
        .find(|r| r.name == "cpu")
        .map(|r| {
            r.total
                .as_ref()
                .map(|q| q.0.clone())
                .unwrap_or_else(|| "0".into())
        })
}

fn owned_by_service<'a>(wls: &'a [Workload], rs: &str) -> impl Iterator<Item = &'a Workload> {
    wls.iter().filter(move |w| {
        w.owner_references()
            .iter()
            .any(|o| o.kind == "RayService" && o.name == rs)
    })
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

fn is_ready(rs: &RayService) -> bool {
    crate::api::conditions::is_true(rs.status.as_ref().and_then(|s| s.conditions.as_deref()), "Ready")
}

/// Runs the scripted walk-through against a cluster whose manager and Ray operator are running.
pub async fn run(client: Client, step_timeout: Duration, json_timeline: bool) -> Result<(), DemoError> {
    run_paced(client, step_timeout, json_timeline, Duration::ZERO).await
}

/// As [`run`], holding the pending RayCluster and the gated upgrade for `pause` each (for the web view).
pub async fn run_paced(
    client: Client,
    step_timeout: Duration,
    json_timeline: bool,
    pause: Duration,
) -> Result<(), DemoError> {
    let clock = Clock {
        start: Instant::now(),
        json: json_timeline.then(Default::default),
        pause,
    };
    let result = story(&client, step_timeout, &clock, None).await;
    // The timeline so far is printed even when a step failed: it shows where.
    clock.finish();
    result
}

/// As [`run_paced`] on real Ray (the embedded cluster runs rayproject/ray pods as processes): the
/// RayService deploys a real Serve app and real requests go to it from Ready to the end; their counts
/// are printed at every step, and any failed request fails the demo.
pub async fn run_real(
    client: Client,
    step_timeout: Duration,
    json_timeline: bool,
    pause: Duration,
    real: &RealRay,
) -> Result<(), DemoError> {
    let clock = Clock {
        start: Instant::now(),
        json: json_timeline.then(Default::default),
        pause,
    };
    let result = story(&client, step_timeout, &clock, Some(real)).await;
    clock.finish();
    result
}

/// The serve Service's ClusterIP once the proxy gave it one, and the first answer through it.
async fn first_answer(client: &Client, step: &str, step_timeout: Duration) -> Result<String, DemoError> {
    let svcs: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), NS);
    let deadline = tokio::time::Instant::now() + step_timeout;
    let mut last = String::from("no ClusterIP yet");
    while tokio::time::Instant::now() < deadline {
        let ip = svcs
            .get_opt("fruit-stand-serve-svc")
            .await
            .map_err(api_err(step))?
            .and_then(|s| s.spec?.cluster_ip)
            .filter(|ip| ip.starts_with("10."));
        if let Some(ip) = ip {
            let url = format!("http://{ip}:8000/");
            let probe = load::Options {
                url: url.clone(),
                rps: 5,
                duration: Duration::from_millis(400),
                connections: 2,
                ..Default::default()
            };
            let r = load::run(&probe, tokio_util::sync::CancellationToken::new(), None).await?;
            if r.total.ok > 0 && r.failed == 0 {
                return Ok(url);
            }
            last = format!("{url}: {:?}", r.total);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(DemoError::Timeout {
        step: step.to_string(),
        secs: step_timeout.as_secs(),
        last,
    })
}

async fn story(
    client: &Client,
    step_timeout: Duration,
    clock: &Clock,
    real: Option<&RealRay>,
) -> Result<(), DemoError> {
    // Each step's line, with the load's counts so far once it runs.
    let say = |line: &str| {
        clock.say(&format!(
            "{line}{}",
            real.map(RealRay::counts).unwrap_or_default()
        ))
    };
    let pp = PostParams::default();
    let lp = ListParams::default();
    let flavors: Api<ResourceFlavor> = Api::all(client.clone());
    let cqs: Api<ClusterQueue> = Api::all(client.clone());
    let lqs: Api<LocalQueue> = Api::namespaced(client.clone(), NS);
    let wls: Api<Workload> = Api::namespaced(client.clone(), NS);
    let rcs: Api<RayCluster> = Api::namespaced(client.clone(), NS);
    let rss: Api<RayService> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);

    // 1. Quota.
    let step = "create the quota";
    flavors.create(&pp, &typed("ResourceFlavor", json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}}))?).await.map_err(api_err(step))?;
    let cq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "demo"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor",
            "resources": [{"name": "cpu", "nominalQuota": "8"}, {"name": "memory", "nominalQuota": "32Gi"}]}]}]}});
    cqs.create(&pp, &typed("ClusterQueue", cq)?)
        .await
        .map_err(api_err(step))?;
    let lq = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "demo-queue", "namespace": NS}, "spec": {"clusterQueue": "demo"}});
    lqs.create(&pp, &typed("LocalQueue", lq)?)
        .await
        .map_err(api_err(step))?;
    clock.say("quota: ClusterQueue demo (8 CPU, 32Gi in default-flavor), LocalQueue default/demo-queue");

    // 2. A RayCluster that fits: created suspended, admitted, then its pods run.
    let step = "admit RayCluster alpha";
    rcs.create(
        &pp,
        &typed("RayCluster", ray_cluster("alpha", "2", 2, "1", real.is_some()))?,
    )
    .await
    .map_err(api_err(step))?;
    clock.say(
        "RayCluster alpha created with kueue.x-k8s.io/queue-name=demo-queue (head 2 CPU + 2 workers x 1 CPU)",
    );
    let wl = wait_list(&wls, &lp, step, step_timeout, |w| {
        workload_of(w, "alpha")
            .filter(|w| w.has_quota_reservation())
            .map(|w| w.name_any())
    })
    .await?;
    clock.say(&format!("Workload {wl} admitted into ClusterQueue demo"));
    let step = "start alpha's pods";
    let n = wait_list(&pods, &lp, step, step_timeout, |p| {
        Some(running_pods(p, "alpha")).filter(|n| *n == 3)
    })
    .await?;
    clock.say(&format!("RayCluster alpha unsuspended: {n} pods Running"));

    // 3. A RayCluster that does not fit while alpha holds quota: pending with a reason a person can act on.
    let step = "queue RayCluster beta";
    rcs.create(
        &pp,
        &typed("RayCluster", ray_cluster("beta", "2", 3, "1", real.is_some()))?,
    )
    .await
    .map_err(api_err(step))?;
    clock.say("RayCluster beta created (head 2 CPU + 3 workers x 1 CPU = 5 CPU; 4 of 8 CPU are in use)");
    let (reason, message) = wait_list(&wls, &lp, step, step_timeout, |w| {
        let c = condition(
            workload_of(w, "beta")?.status.as_ref().map(|s| &s.conditions),
            "QuotaReserved",
        )?;
        (c.status == crate::api::conditions::FALSE && !c.message.is_empty())
            .then(|| (c.reason.clone(), c.message.clone()))
    })
    .await?;
    clock.say(&format!("beta pending: QuotaReserved=False {reason}: {message}"));
    let beta_pods = running_pods(&pods.list(&lp).await.map_err(api_err(step))?.items, "beta");
    clock.say(&format!("beta has {beta_pods} pods while it waits"));
    clock.hold("beta waits for quota").await;

    // 4. Freeing quota admits the waiting cluster.
    let step = "admit beta after alpha is deleted";
    rcs.delete("alpha", &DeleteParams::default())
        .await
        .map_err(api_err(step))?;
    clock.say("RayCluster alpha deleted");
    wait_list(&wls, &lp, step, step_timeout, |w| {
        workload_of(w, "beta")
            .filter(|w| w.has_quota_reservation())
            .map(|_| ())
    })
    .await?;
    let n = wait_list(&pods, &lp, step, step_timeout, |p| {
        Some(running_pods(p, "beta")).filter(|n| *n == 4)
    })
    .await?;
    clock.say(&format!("beta admitted: {n} pods Running"));

    // 5. A queue-managed RayService: admitted as one workload, Ready on its first cluster.
    let step = "admit and serve RayService fruit-stand";
    match real {
        None => {
            rss.create(&pp, &typed("RayService", ray_service("2.46.0"))?)
                .await
                .map_err(api_err(step))?;
            clock.say("RayService fruit-stand created with kueue.x-k8s.io/queue-name=demo-queue (head 1 CPU + 1 worker x 1 CPU)");
        }
        Some(r) => {
            rss.create(
                &pp,
                &typed("RayService", super::demo_real::ray_service(r.app_dir(), "blue"))?,
            )
            .await
            .map_err(api_err(step))?;
            clock.say("RayService fruit-stand created with kueue.x-k8s.io/queue-name=demo-queue (head 2 CPU, Serve on the head: 2 replicas of an app that answers with its cluster's name)");
        }
    }
    let first_wl = wait_list(&wls, &lp, step, step_timeout, |w| {
        owned_by_service(w, "fruit-stand")
            .find(|w| w.has_quota_reservation())
            .map(|w| w.name_any())
    })
    .await?;
    clock.say(&format!("Workload {first_wl} admitted: fruit-stand unsuspended"));
    let first = wait_list(&rss, &lp, step, step_timeout, |s| {
        s.iter().find(|r| is_ready(r)).and_then(active_cluster)
    })
    .await?;
    let used = wait_list(&cqs, &lp, step, step_timeout, |q| {
        q.iter().find(|q| q.name_any() == "demo").and_then(cq_cpu_used)
    })
    .await?;
    clock.say(&format!(
        "fruit-stand Ready, serving from RayCluster {first}; ClusterQueue demo uses {used} of 8 CPU"
    ));
    if let Some(r) = real {
        let url = first_answer(
            client,
            "reach fruit-stand through its serve Service",
            step_timeout,
        )
        .await?;
        r.start_load(url.clone());
        clock.say(&format!(
            "load: {} requests/s to {url} (fruit-stand-serve-svc) from now to the end",
            super::demo_real::LOAD_RPS
        ));
        // A few seconds of answers before the upgrade starts.
        tokio::time::sleep(Duration::from_secs(3)).await;
    }

    // 6. The upgrade needs 2 more CPU than the ClusterQueue has left: its cluster waits behind the gate.
    let step = "gate the upgrade of fruit-stand";
    match real {
        None => {
            let patch = json!({"spec": {"rayClusterConfig": {"rayVersion": "2.47.0"}}});
            rss.patch("fruit-stand", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_err(step))?;
            clock.say("rayVersion changed to 2.47.0");
        }
        Some(r) => {
            // The process runtime has one Ray: the upgrade is a change of the head's environment.
            let green = super::demo_real::ray_service(r.app_dir(), "green");
            let patch = json!({"spec": {"rayClusterConfig": green.pointer("/spec/rayClusterConfig")}});
            rss.patch("fruit-stand", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_err(step))?;
            say("head container env COLOR changed from blue to green: a new cluster spec");
        }
    }
    let pending = wait_list(&rss, &lp, step, step_timeout, |s| {
        s.first()?
            .status
            .as_ref()?
            .pending_service_status
            .as_ref()?
            .ray_cluster_name
            .clone()
            .filter(|n| !n.is_empty())
    })
    .await?;
    let (slice, why) = wait_list(&wls, &lp, step, step_timeout, |w| {
        owned_by_service(w, "fruit-stand").find_map(|w| {
            let c = condition(w.status.as_ref().map(|s| &s.conditions), "QuotaReserved")?;
            (c.status == crate::api::conditions::FALSE && !c.message.is_empty())
                .then(|| (w.name_any(), c.message.clone()))
        })
    })
    .await?;
    say(&format!(
        "pending RayCluster {pending} created beside {first}, gated: workload slice {slice} waits: {why}"
    ));
    let all_pods = pods.list(&lp).await.map_err(api_err(step))?.items;
    say(&format!(
        "while gated: {pending} has {} pods, {first} keeps its {} and serves",
        all_pods
            .iter()
            .filter(|p| p.labels().get("ray.io/cluster") == Some(&pending))
            .count(),
        pods_count(running_pods(&all_pods, &first))
    ));
    clock.hold("the upgrade waits behind the closed gate").await;

    // 7. Raising the quota admits the slice: the gate opens, traffic moves, the old cluster goes.
    let step = "open the gate by raising the quota";
    let raise = json!({"spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor",
        "resources": [{"name": "cpu", "nominalQuota": "10"}, {"name": "memory", "nominalQuota": "32Gi"}]}]}]}});
    cqs.patch("demo", &PatchParams::default(), &Patch::Merge(&raise))
        .await
        .map_err(api_err(step))?;
    say("ClusterQueue demo raised to 10 CPU");
    wait_list(&wls, &lp, step, step_timeout, |w| {
        w.iter()
            .find(|w| w.name_any() == slice && w.has_quota_reservation())
            .map(|_| ())
    })
    .await?;
    say(&format!(
        "workload slice {slice} admitted; {first_wl} finished as WorkloadSliceReplaced"
    ));
    let pods_per_cluster = if real.is_some() { 1 } else { 2 };
    let n = wait_list(&pods, &lp, step, step_timeout, |p| {
        Some(running_pods(p, &pending)).filter(|n| *n == pods_per_cluster)
    })
    .await?;
    say(&format!("gate open: {pending} has {} Running", pods_count(n)));
    let second = wait_list(&rss, &lp, step, step_timeout, |s| {
        s.first().and_then(active_cluster).filter(|n| *n != first)
    })
    .await?;
    say(&format!(
        "traffic switched: fruit-stand-serve-svc now selects {second}"
    ));
    wait_list(&rcs, &lp, step, step_timeout, |c| {
        (!c.iter().any(|c| c.name_any() == first)).then_some(())
    })
    .await?;
    say(&format!(
        "old RayCluster {first} deleted after rayClusterDeletionDelaySeconds"
    ));
    let settled = wait_list(&cqs, &lp, step, step_timeout, |q| {
        q.iter()
            .find(|q| q.name_any() == "demo")
            .and_then(cq_cpu_used)
            .filter(|u| *u == used)
    })
    .await?;
    say(&format!(
        "usage settled: ClusterQueue demo uses {settled} CPU, as before the upgrade"
    ));
    if let Some(r) = real {
        // Keep-alive connections stay with the old head until it stops serving them; then the answers
        // come from the new one. A few seconds of those, then the load's whole count.
        let deadline = tokio::time::Instant::now() + step_timeout;
        while !r.answered_by(&second) {
            if tokio::time::Instant::now() >= deadline {
                return Err(DemoError::Timeout {
                    step: "answers from the new cluster".into(),
                    secs: step_timeout.as_secs(),
                    last: r.counts(),
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        say(&format!("answers now come from {second}"));
        tokio::time::sleep(Duration::from_secs(3)).await;
        if let Some(report) = r.finish_load().await {
            let report = report?;
            clock.say(&format!("load stopped: {}", summary(&report)));
            if report.failed > 0 {
                let seconds: Vec<u64> = report
                    .per_second
                    .iter()
                    .filter(|s| s.counts.failed() > 0)
                    .map(|s| s.second)
                    .collect();
                return Err(DemoError::RequestsFailed(format!(
                    "{} ({} non-2xx, {} connection errors, {} timeouts; in {} of the load's seconds, from +{} s to +{} s)",
                    summary(&report),
                    report.total.non_2xx,
                    report.total.conn_errors,
                    report.total.timeouts,
                    seconds.len(),
                    seconds.first().copied().unwrap_or(0),
                    seconds.last().copied().unwrap_or(0)
                )));
            }
        }
    }
    clock.say("demo complete");
    Ok(())
}
