//! The RayCluster controller on the embedded API server with the simulated node agent: pods, Services,
//! status, Recreate, suspend, failed pod replacement. Waits poll the cluster and watch pods, with a deadline.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use quotagate::api::ray::RayCluster;
use quotagate::api::ray::raycluster::ClusterState;
use quotagate::embedded::sim::{self, SimConfig, node};
use quotagate::embedded::{AllowAll, EmbeddedServer};
use quotagate::rayservice::clusterctl::controller as clusterctl;
use serde_json::json;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

const NS: &str = "default";
const WAIT: Duration = Duration::from_secs(60);

/// Default (2 MiB) worker stacks. Waits on RayClusters poll rather than watch: in debug builds a watch on the
/// large Ray types from inside the scenario runs close to that limit (see tests/rayservice_controller.rs).
fn scenario<F: std::future::Future<Output = ()> + Send + 'static>(f: F) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move { tokio::spawn(f).await.unwrap() });
}

struct Harness {
    client: Client,
    cancel: CancellationToken,
    _server: Arc<EmbeddedServer>,
}

impl Harness {
    fn start() -> Self {
        let server = EmbeddedServer::new(&quotagate::api::all_crds(), Arc::new(AllowAll));
        let client = server.client();
        let cancel = CancellationToken::new();
        let config = SimConfig {
            node: Some(node::NodeAgentConfig::default()),
            gateway: None,
            endpoints: true,
        };
        sim::spawn(client.clone(), &config, cancel.clone());
        let mut ctx = clusterctl::Context::new(client.clone());
        ctx.config.busy_requeue = Duration::from_millis(200);
        tokio::spawn(clusterctl::run(Arc::new(ctx)));
        Harness {
            client,
            cancel,
            _server: server,
        }
    }
    fn clusters(&self) -> Api<RayCluster> {
        Api::namespaced(self.client.clone(), NS)
    }
    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), NS)
    }
    async fn wait_cluster(
        &self,
        name: &str,
        what: &str,
        cond: impl Fn(&RayCluster) -> bool + Send + 'static,
    ) -> RayCluster {
        // A poll, not a watch: see the stack note at `scenario`.
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let got = self.clusters().get_opt(name).await.unwrap();
            match got {
                Some(rc) if cond(&rc) => return rc,
                _ if tokio::time::Instant::now() >= deadline => {
                    panic!("timed out waiting for {what}: last seen {got:?}")
                }
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
    async fn pod_names(&self, cluster: &str) -> BTreeSet<String> {
        let lp = ListParams::default().labels(&format!("ray.io/cluster={cluster}"));
        self.pods()
            .list(&lp)
            .await
            .unwrap()
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| p.name_any())
            .collect()
    }
}

/// Re-checks `pred` over the pods matching `labels` after every pod watch event, until it holds.
async fn wait_pods(api: &Api<Pod>, labels: &str, what: &str, pred: impl Fn(&[Pod]) -> bool) {
    let mut events = watcher(api.clone(), watcher::Config::default().labels(labels)).boxed();
    let lp = ListParams::default().labels(labels);
    let found = timeout(WAIT, async {
        loop {
            if pred(&api.list(&lp).await.unwrap().items) {
                return;
            }
            if events.next().await.is_none() {
                panic!("pod watch ended");
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

fn live_names(pods: &[Pod]) -> BTreeSet<String> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.name_any())
        .collect()
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn raycluster(name: &str, image: &str, workers: i32, recreate: bool) -> RayCluster {
    let mut v = json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "rayVersion": "2.46.0",
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{
                "name": "ray-head", "image": image,
                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}}]}}},
            "workerGroupSpecs": [{"groupName": "small", "replicas": workers, "minReplicas": 0, "maxReplicas": 5, "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-worker", "image": image,
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}}}]
        }
    });
    if recreate {
        v["spec"]["upgradeStrategy"] = json!({"type": "Recreate"});
    }
    serde_json::from_value(v).unwrap()
}

fn ready(rc: &RayCluster) -> bool {
    rc.status
        .as_ref()
        .is_some_and(|s| s.state == Some(ClusterState::Ready))
}

fn cond_status(rc: &RayCluster, type_: &str) -> Option<String> {
    rc.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

#[test]
fn creates_pods_services_and_status_then_scales() {
    scenario(async {
        let h = Harness::start();
        h.clusters()
            .create(
                &PostParams::default(),
                &raycluster("rc", "rayproject/ray:2.46.0", 2, false),
            )
            .await
            .unwrap();
        let rc = h.wait_cluster("rc", "ready", ready).await;
        let s = rc.status.clone().unwrap();
        assert_eq!(
            (
                s.desired_worker_replicas,
                s.ready_worker_replicas,
                s.available_worker_replicas
            ),
            (Some(2), Some(2), Some(2))
        );
        assert_eq!(s.desired_cpu.map(|q| q.0).as_deref(), Some("3"));
        assert_eq!(cond_status(&rc, "HeadPodReady").as_deref(), Some("True"));
        assert_eq!(cond_status(&rc, "RayClusterProvisioned").as_deref(), Some("True"));
        assert!(s.head.and_then(|h| h.pod_ip).is_some());
        assert_eq!(h.pod_names("rc").await.len(), 3);
        let svcs: Api<Service> = Api::namespaced(h.client.clone(), NS);
        assert!(svcs.get_opt("rc-head-svc").await.unwrap().is_some());

        // Scale down to one worker: the surplus pod goes (no autoscaler).
        h.clusters()
            .patch("rc", &PatchParams::default(), &Patch::Merge(json!({"spec": {"workerGroupSpecs": [{"groupName": "small", "replicas": 1, "minReplicas": 0, "maxReplicas": 5, "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0"}]}}}]}})))
            .await
            .unwrap();
        h.wait_cluster("rc", "one worker", |rc| {
            rc.status.as_ref().is_some_and(|s| {
                s.desired_worker_replicas == Some(1) && s.available_worker_replicas == Some(1)
            })
        })
        .await;
        assert_eq!(h.pod_names("rc").await.len(), 2);
    });
}

#[test]
fn recreate_strategy_replaces_every_pod_on_a_spec_change() {
    scenario(async {
        let h = Harness::start();
        h.clusters()
            .create(
                &PostParams::default(),
                &raycluster("rec", "rayproject/ray:2.46.0", 1, true),
            )
            .await
            .unwrap();
        h.wait_cluster("rec", "ready", ready).await;
        let before = h.pod_names("rec").await;
        assert_eq!(before.len(), 2);

        let spec = raycluster("rec", "rayproject/ray:2.47.0", 1, true).spec;
        h.clusters()
            .patch(
                "rec",
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": spec })),
            )
            .await
            .unwrap();
        let pods = h.pods();
        let selector = ListParams::default().labels("ray.io/cluster=rec");
        wait_pods(&pods, "ray.io/cluster=rec", "all pods recreated", |ps| {
            let names = live_names(ps);
            names.len() == 2 && names.is_disjoint(&before)
        })
        .await;
        let rc = h.wait_cluster("rec", "ready again", ready).await;
        let images: Vec<String> = pods
            .list(&selector)
            .await
            .unwrap()
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| p.spec.as_ref().unwrap().containers[0].image.clone().unwrap())
            .collect();
        assert!(images.iter().all(|i| i == "rayproject/ray:2.47.0"), "{images:?}");
        assert!(ready(&rc));
    });
}

#[test]
fn suspend_deletes_pods_and_resume_recreates_them() {
    scenario(async {
        let h = Harness::start();
        h.clusters()
            .create(
                &PostParams::default(),
                &raycluster("sus", "rayproject/ray:2.46.0", 1, false),
            )
            .await
            .unwrap();
        h.wait_cluster("sus", "ready", ready).await;
        h.clusters()
            .patch(
                "sus",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"suspend": true}})),
            )
            .await
            .unwrap();
        let rc = h
            .wait_cluster("sus", "suspended", |rc| {
                rc.status
                    .as_ref()
                    .is_some_and(|s| s.state == Some(ClusterState::Suspended))
            })
            .await;
        assert_eq!(cond_status(&rc, "RayClusterSuspended").as_deref(), Some("True"));
        assert_eq!(
            cond_status(&rc, "RayClusterProvisioned").as_deref(),
            Some("False")
        );
        // Source: KubeRay raycluster_controller calculateStatus (issue 15 item 2): a suspended
        // cluster's head is not ready, and status no longer names the deleted head pod.
        let rc = h
            .wait_cluster("sus", "the head gone from status", |rc| {
                cond_status(rc, "HeadPodReady").as_deref() == Some("False")
            })
            .await;
        let reason = |t: &str| {
            rc.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == t).map(|c| c.reason.clone()))
        };
        assert_eq!(reason("HeadPodReady").as_deref(), Some("HeadPodNotFound"));
        assert_eq!(
            reason("RayClusterProvisioned").as_deref(),
            Some("RayClusterPodsProvisioning")
        );
        assert_eq!(
            reason("RayClusterSuspending").as_deref(),
            Some("RayClusterSuspending")
        );
        let head = rc
            .status
            .as_ref()
            .and_then(|s| s.head.clone())
            .unwrap_or_default();
        assert_eq!(
            (head.pod_name, head.pod_ip),
            (None, None),
            "status names a deleted pod"
        );
        assert!(h.pod_names("sus").await.is_empty());
        h.clusters()
            .patch(
                "sus",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"suspend": false}})),
            )
            .await
            .unwrap();
        let rc = h.wait_cluster("sus", "ready again", ready).await;
        assert_eq!(cond_status(&rc, "RayClusterSuspended").as_deref(), Some("False"));
        let suspended = rc
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.type_ == "RayClusterSuspended")
                    .map(|c| c.reason.clone())
            });
        assert_eq!(
            suspended.as_deref(),
            Some("RayClusterSuspended"),
            "KubeRay keeps the reason on resume"
        );
        assert_eq!(cond_status(&rc, "HeadPodReady").as_deref(), Some("True"));
        assert_eq!(h.pod_names("sus").await.len(), 2);
    });
}

#[test]
fn failed_worker_is_replaced() {
    scenario(async {
        let h = Harness::start();
        // Pods of group "small" carrying the fail annotation crash; the template is fixed after the first failure.
        let mut rc = raycluster("fail", "rayproject/ray:2.46.0", 1, false);
        let groups = rc.spec.worker_group_specs.as_mut().unwrap();
        groups[0].template.metadata = Some(kube::api::ObjectMeta {
            annotations: Some([(node::FAIL_ANNOTATION.to_string(), "true".to_string())].into()),
            ..Default::default()
        });
        h.clusters().create(&PostParams::default(), &rc).await.unwrap();
        let pods = h.pods();
        let workers = "ray.io/cluster=fail,ray.io/node-type=worker";
        wait_pods(&pods, workers, "a failed worker", |ps| {
            ps.iter()
                .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
        })
        .await;
        let failed: Vec<String> = pods
            .list(&ListParams::default().labels(workers))
            .await
            .unwrap()
            .items
            .iter()
            .map(|p| p.name_any())
            .collect();
        let spec = raycluster("fail", "rayproject/ray:2.46.0", 1, false).spec;
        h.clusters()
            .patch(
                "fail",
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": spec })),
            )
            .await
            .unwrap();
        h.wait_cluster("fail", "ready with a replacement", ready).await;
        let now = live_names(
            &pods
                .list(&ListParams::default().labels(workers))
                .await
                .unwrap()
                .items,
        );
        assert_eq!(now.len(), 1);
        assert!(
            failed.iter().all(|f| !now.contains(f)),
            "failed {failed:?} still there: {now:?}"
        );
    });
}
