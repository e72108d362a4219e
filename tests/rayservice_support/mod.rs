//! The RayService test harness shared by the test binaries that drive the RayService and RayCluster
//! controllers on the embedded API server with the simulated node agent and Ray dashboard: the server,
//! the simulators, the controllers, and poll-with-deadline waits (see `scenario` for why not a watch).
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use quotagate::api::ray::{RayCluster, RayService};
use quotagate::embedded::sim::{self, SimConfig};
use quotagate::embedded::{AllowAll, EmbeddedServer};
use quotagate::rayservice::clusterctl::controller as clusterctl;
use quotagate::rayservice::dashboard::sim::{RaySim, SimOptions};
use quotagate::rayservice::dashboard::{DashboardEndpoint, RayDashboard};
use quotagate::rayservice::servicectl::controller::{self as rsctl, DashboardFactory};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const NS: &str = "default";

/// Runs a scenario on a multi-thread runtime with default (2 MiB) worker stacks.
///
/// Waits poll with GET instead of watching. Measured with gdb on a debug build: a watch on RayService
/// from inside the scenario overflowed 2 MiB, not because of the in-process API server but because of
/// kube-runtime's watcher state machine (one ~470 KiB frame) plus serde's derived `Deserialize` for the
/// ~7 KiB `RayService` (nested `deserialize_struct` frames of 30-90 KiB each) on top of the scenario's
/// own frame. Debug builds give every temporary its own stack slot, so these frames scale with
/// `size_of::<RayService>()`; the controllers' own watches fit (they start from a fresh task stack).
pub fn scenario<F: std::future::Future<Output = ()> + Send + 'static>(f: F) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move { tokio::spawn(f).await.unwrap() });
}

/// Polls `name` every 50 ms until `cond` holds (its argument is `None` while the object is absent),
/// for at most `WAIT`. `Err` carries the last object seen.
pub async fn poll_until<K>(
    api: &Api<K>,
    name: &str,
    cond: impl Fn(Option<&K>) -> bool,
) -> Result<Option<K>, Option<K>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let got = api.get_opt(name).await.unwrap();
        if cond(got.as_ref()) {
            return Ok(got);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(got);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The object named `name` is gone, or replaced by one with another uid.
pub fn deleted<K: kube::Resource>(uid: String) -> impl Fn(Option<&K>) -> bool {
    move |o: Option<&K>| o.is_none_or(|o| o.meta().uid.as_deref() != Some(uid.as_str()))
}

pub const WAIT: Duration = Duration::from_secs(60);

pub struct Harness {
    pub client: Client,
    pub sim: Arc<RaySim>,
    pub cancel: CancellationToken,
    pub rs_controller: Option<JoinHandle<()>>,
    /// With the gateway: the simulated load through RayServices' HTTPRoutes.
    pub load: Option<quotagate::wiring::raysim::LoadBoard>,
    pub server: Arc<EmbeddedServer>,
}

impl Harness {
    pub fn start() -> Self {
        Self::start_with(true)
    }

    /// `auto_start: false`: a head's dashboard answers only once the test starts it in the simulator.
    pub fn start_with(auto_start: bool) -> Self {
        Self::start_opts(auto_start, false)
    }

    /// `gateway`: the simulated gateway controller runs (incremental upgrades need it).
    pub fn start_opts(auto_start: bool, gateway: bool) -> Self {
        let server = EmbeddedServer::new(&quotagate::api::all_crds(), Arc::new(AllowAll));
        Self::start_on(server, auto_start, gateway)
    }

    /// With quotagate's own admission (validation and defaulting) on the embedded API server, as
    /// `quotagate run --embedded` serves it; no gateway.
    pub fn start_admitted(auto_start: bool) -> Self {
        Self::start_on(quotagate::wiring::manager::embedded_server(), auto_start, false)
    }

    fn start_on(server: Arc<EmbeddedServer>, auto_start: bool, gateway: bool) -> Self {
        let client = server.client();
        let cancel = CancellationToken::new();
        let mut config = SimConfig::default();
        if !gateway {
            config.gateway = None;
        }
        sim::spawn(client.clone(), &config, cancel.clone());
        let sim = Arc::new(RaySim::new(SimOptions {
            build_delay: Duration::from_millis(50),
            replica_start_delay: Duration::from_millis(50),
            replica_stop_delay: Duration::from_millis(50),
            fail_delay: Duration::from_millis(100),
            auto_start,
        }));
        let mut rc_ctx = clusterctl::Context::new(client.clone());
        rc_ctx.config.busy_requeue = Duration::from_millis(200);
        tokio::spawn(clusterctl::run(Arc::new(rc_ctx)));
        // Incremental upgrades run with Ray's in-tree autoscaler and users' load, as on the
        // embedded cluster: 100 requests per second through every RayService's HTTPRoute.
        let load = gateway.then(|| {
            let opts = quotagate::wiring::raysim::RaySimOptions {
                load_rps: 100.0,
                route_scan: Duration::from_millis(100),
                ..Default::default()
            };
            quotagate::wiring::raysim::spawn(client.clone(), sim.clone(), &opts, cancel.clone()).1
        });
        let mut h = Harness {
            client,
            sim,
            cancel,
            rs_controller: None,
            load,
            server,
        };
        h.start_rayservice_controller();
        h
    }

    pub fn start_rayservice_controller(&mut self) {
        let dash: Arc<dyn RayDashboard> = self.sim.clone();
        let factory: DashboardFactory = Arc::new(move |_: &DashboardEndpoint| dash.clone());
        let mut ctx = rsctl::Context::new(self.client.clone(), factory);
        ctx.config.requeue = Duration::from_millis(200);
        ctx.config.error_backoff = Duration::from_millis(300);
        self.rs_controller = Some(tokio::spawn(rsctl::run(Arc::new(ctx))));
    }

    /// Simulates an operator crash: the controller task stops, all its memory is gone.
    pub fn stop_rayservice_controller(&mut self) {
        if let Some(h) = self.rs_controller.take() {
            h.abort();
        }
    }

    pub fn services(&self) -> Api<RayService> {
        Api::namespaced(self.client.clone(), NS)
    }
    pub fn clusters(&self) -> Api<RayCluster> {
        Api::namespaced(self.client.clone(), NS)
    }
    pub fn svcs(&self) -> Api<Service> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub async fn wait_rs(
        &self,
        name: &str,
        what: &str,
        cond: impl Fn(&RayService) -> bool + Send + 'static,
    ) -> RayService {
        match poll_until(&self.services(), name, |o| o.is_some_and(&cond)).await {
            Ok(Some(rs)) => rs,
            other => panic!(
                "timed out waiting for {what}\nlast status: {:#?}",
                other.unwrap_or_else(|last| last).and_then(|r| r.status)
            ),
        }
    }

    pub async fn patch_spec(&self, name: &str, spec: serde_json::Value) {
        self.services()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": spec })),
            )
            .await
            .unwrap();
    }

    pub async fn cluster_names(&self) -> Vec<String> {
        self.clusters()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|c| c.name_any())
            .collect()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.cancel.cancel();
        self.stop_rayservice_controller();
    }
}

pub fn serve_config(import_path: &str, price: u32) -> String {
    format!(
        "applications:\n  - name: fruit_app\n    import_path: {import_path}\n    route_prefix: /fruit\n    deployments:\n      - name: MangoStand\n        num_replicas: 1\n        user_config:\n          price: {price}\n"
    )
}

pub fn rayservice(name: &str, image: &str) -> RayService {
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "rayClusterDeletionDelaySeconds": 1,
            "serveConfigV2": serve_config("fruit.deployment_graph", 3),
            "rayClusterConfig": {
                "rayVersion": "2.46.0",
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{
                    "name": "ray-head", "image": image,
                    "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
                    "ports": [{"containerPort": 6379, "name": "gcs-server"}, {"containerPort": 8265, "name": "dashboard"},
                              {"containerPort": 10001, "name": "client"}, {"containerPort": 8000, "name": "serve"}]}]}}},
                "workerGroupSpecs": [{"groupName": "small", "replicas": 1, "minReplicas": 1, "maxReplicas": 2, "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-worker", "image": image,
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}}}]
            }
        }
    }))
    .unwrap()
}

pub fn cond<'a>(
    rs: &'a RayService,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    rs.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

pub fn is_true(rs: &RayService, type_: &str) -> bool {
    cond(rs, type_).is_some_and(|c| c.status == "True")
}

pub fn active(rs: &RayService) -> Option<String> {
    rs.status
        .as_ref()?
        .active_service_status
        .as_ref()?
        .ray_cluster_name
        .clone()
}

pub fn pending(rs: &RayService) -> Option<String> {
    rs.status
        .as_ref()?
        .pending_service_status
        .as_ref()?
        .ray_cluster_name
        .clone()
}

pub fn endpoints(rs: &RayService) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.num_serve_endpoints)
        .unwrap_or(0)
}

pub async fn selector_cluster(h: &Harness, svc: &str) -> Option<String> {
    let s = h.svcs().get_opt(svc).await.unwrap()?;
    s.spec?.selector?.get("ray.io/cluster").cloned()
}

pub async fn create_and_wait_ready(h: &Harness, name: &str) -> RayService {
    h.services()
        .create(&PostParams::default(), &rayservice(name, "rayproject/ray:2.46.0"))
        .await
        .unwrap();
    let rs = h
        .wait_rs(name, "Ready=True", |rs| {
            is_true(rs, "Ready") && active(rs).is_some()
        })
        .await;
    let a = active(&rs).unwrap();
    assert!(a.starts_with(&format!("{name}-")), "{a}");
    assert!(endpoints(&rs) > 0);
    assert_eq!(
        selector_cluster(h, &format!("{name}-head-svc")).await.as_deref(),
        Some(a.as_str())
    );
    assert_eq!(
        selector_cluster(h, &format!("{name}-serve-svc")).await.as_deref(),
        Some(a.as_str())
    );
    rs
}

pub fn endpoint_of(cluster: &str) -> String {
    format!("http://{cluster}-head-svc.{NS}.svc.cluster.local:8265")
}

/// Ready endpoints listed by the EndpointSlices of Service `svc` (what the endpoints simulator maintains).
pub async fn slice_endpoints(h: &Harness, svc: &str) -> usize {
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    let slices: Api<EndpointSlice> = Api::namespaced(h.client.clone(), NS);
    slices
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={svc}")))
        .await
        .unwrap()
        .items
        .iter()
        .flat_map(|s| s.endpoints.iter())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .count()
}

pub async fn head_serve_label(h: &Harness, cluster: &str) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(h.client.clone(), NS);
    let head = pods
        .list(&ListParams::default().labels(&format!("ray.io/cluster={cluster},ray.io/node-type=head")))
        .await
        .unwrap()
        .items
        .into_iter()
        .next()?;
    head.labels().get("ray.io/serve").cloned()
}

/// A change the controller must act on after everything before it: once it shows, every earlier state
/// was reconciled (the bounded stand-in for Gomega's `Consistently`).
pub async fn barrier(h: &Harness, name: &str, cluster: &str, price: u32) -> RayService {
    h.patch_spec(
        name,
        json!({ "serveConfigV2": serve_config("fruit.deployment_graph", price) }),
    )
    .await;
    let sim = h.sim.clone();
    let url = endpoint_of(cluster);
    let before = sim.put_count(&url);
    h.wait_rs(name, "the barrier config pushed", move |rs| {
        sim.put_count(&url) > before
            && rs.status.as_ref().and_then(|s| s.observed_generation) == rs.metadata.generation
    })
    .await
}
