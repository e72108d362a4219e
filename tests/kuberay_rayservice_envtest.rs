//! KubeRay's RayService tests as our acceptance suite: the envtest
//! `ray-operator/controllers/ray/rayservice_controller_test.go` (here) and the e2e tests of
//! `ray-operator/test/e2erayservice/` (modules `e2e_upgrade` and `e2e_lifecycle`), each test naming the
//! KubeRay test it ports and asserting what it asserts, through the embedded API server with
//! quotagate's admission on, the simulated node agent and Ray dashboard, and our controllers.
//!
//! KubeRay's envtest sets head pods Running by hand and fakes the dashboard; here the node agent runs the
//! pods and the Ray simulator answers for the heads. Harnesses start with `auto_start: false` where a test
//! must hold a cluster pending: its head answers only once the test starts it (KubeRay's
//! `updateHeadPodToRunningAndReady`). Expectations that need a real Ray (curl answers, Locust load, GCS
//! restarts) are not ported; see docs/kuberay-compatibility.md.

mod rayservice_support;

#[path = "kuberay_rayservice/e2e_lifecycle.rs"]
mod e2e_lifecycle;
#[path = "kuberay_rayservice/e2e_upgrade.rs"]
mod e2e_upgrade;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use quotagate::api::ray::rayservice::AppStatus;
use quotagate::api::ray::{RayCluster, RayService};
use quotagate::rayservice::dashboard::{DashboardEndpoint, RayDashboard};
use rayservice_support::*;
use serde_json::json;

// ---- helpers shared by the three modules of this binary

/// A Serve config with one app named `app` whose `MangoStand` has `price`.
fn serve_app(app: &str, price: u32) -> String {
    format!(
        "applications:\n  - name: {app}\n    import_path: fruit.deployment_graph\n    route_prefix: /fruit\n    deployments:\n      - name: MangoStand\n        num_replicas: 1\n        user_config:\n          price: {price}\n"
    )
}

/// KubeRay's `rayServiceTemplate`: annotation `foo: bar`, upgrade strategy `NewCluster`, app `app1`.
fn kuberay_template(name: &str) -> RayService {
    let mut rs = rayservice(name, "rayproject/ray:2.46.0");
    rs.metadata.annotations = Some([("foo".to_string(), "bar".to_string())].into());
    rs.spec.serve_config_v2 = Some(serve_app("app1", 3));
    rs.spec.upgrade_strategy = Some(serde_json::from_value(json!({"type": "NewCluster"})).unwrap());
    rs
}

/// A RayService whose only Serve node is its head (no worker group), as KubeRay's e2e samples that
/// count exactly one serve endpoint.
fn head_only(name: &str) -> RayService {
    let mut rs = rayservice(name, "rayproject/ray:2.46.0");
    rs.spec.ray_cluster_config.worker_group_specs = Some(vec![]);
    rs
}

async fn create(h: &Harness, rs: &RayService) -> RayService {
    h.services().create(&PostParams::default(), rs).await.unwrap()
}

/// The applications of the active (or pending) side of the status.
fn apps(rs: &RayService, pending_side: bool) -> BTreeMap<String, AppStatus> {
    let s = rs.status.as_ref();
    let side = if pending_side {
        s.and_then(|s| s.pending_service_status.as_ref())
    } else {
        s.and_then(|s| s.active_service_status.as_ref())
    };
    side.and_then(|a| a.applications.clone()).unwrap_or_default()
}

/// Starts the head of `cluster` in the Ray simulator (KubeRay's `updateHeadPodToRunningAndReady`).
fn start_head(h: &Harness, cluster: &str) {
    h.sim.start_cluster(&endpoint_of(cluster));
}

/// The `price` of the first deployment in the config the cluster's Serve is applying, as Ray reports it.
async fn served_price(h: &Harness, cluster: &str) -> Option<i64> {
    let ep = DashboardEndpoint::new(endpoint_of(cluster));
    let details = h.sim.serve_details(&ep).await.ok()?;
    let app = details.applications.values().next()?;
    let config = app.deployed_app_config.as_ref()?;
    config.pointer("/deployments/0/user_config/price")?.as_i64()
}

/// Re-checks `probe` until it returns `Some`, or fails naming `what` after `WAIT` (Gomega's Eventually).
async fn eventually<T, F, Fut>(what: &str, probe: F) -> T
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Gomega's `Consistently`: `probe` holds on every check for `window` (checked every 100 ms).
async fn consistently<F, Fut>(what: &str, window: Duration, probe: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let end = tokio::time::Instant::now() + window;
    while tokio::time::Instant::now() < end {
        if let Err(why) = probe().await {
            panic!("{what} stopped holding: {why}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn pods(h: &Harness, labels: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(h.client.clone(), NS);
    let lp = ListParams::default().labels(labels);
    let all = api.list(&lp).await.unwrap().items;
    all.into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

async fn head_pod(h: &Harness, cluster: &str) -> Option<Pod> {
    pods(h, &format!("ray.io/cluster={cluster},ray.io/node-type=head"))
        .await
        .into_iter()
        .next()
}

/// (pod name, pod uid) of every ready endpoint of Service `svc`'s EndpointSlices.
async fn ready_targets(h: &Harness, svc: &str) -> Vec<(String, String)> {
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    let slices: Api<EndpointSlice> = Api::namespaced(h.client.clone(), NS);
    let lp = ListParams::default().labels(&format!("kubernetes.io/service-name={svc}"));
    let items = slices.list(&lp).await.unwrap().items;
    items
        .iter()
        .flat_map(|s| s.endpoints.iter())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .filter_map(|e| e.target_ref.as_ref())
        .map(|t| {
            (
                t.name.clone().unwrap_or_default(),
                t.uid.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// Clusters originated from the RayService `name` (KubeRay lists them by this label).
async fn originated_clusters(h: &Harness, name: &str) -> Vec<RayCluster> {
    let lp = ListParams::default().labels(&format!("ray.io/originated-from-cr-name={name}"));
    h.clusters().list(&lp).await.unwrap().items
}

async fn add_finalizer(h: &Harness, cluster: &str, finalizer: &str) {
    let rc = h.clusters().get(cluster).await.unwrap();
    let mut fs = rc.finalizers().to_vec();
    fs.push(finalizer.to_string());
    let patch = Patch::Merge(json!({"metadata": {"finalizers": fs}}));
    h.clusters()
        .patch(cluster, &PatchParams::default(), &patch)
        .await
        .unwrap();
}

async fn remove_finalizer(h: &Harness, cluster: &str, finalizer: &str) {
    let rc = h.clusters().get(cluster).await.unwrap();
    let fs: Vec<String> = rc
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    let patch = Patch::Merge(json!({"metadata": {"finalizers": fs}}));
    h.clusters()
        .patch(cluster, &PatchParams::default(), &patch)
        .await
        .unwrap();
}

/// The worker groups of the named cluster (none while it does not exist).
async fn group_count(h: &Harness, cluster: &str) -> usize {
    let rc = h.clusters().get_opt(cluster).await.unwrap();
    rc.and_then(|rc| rc.spec.worker_group_specs)
        .map_or(0, |g| g.len())
}

/// The RayService's worker groups with a copy of the first named `group` appended (KubeRay's
/// `appendNewWorkerGroup`).
fn with_group_appended(rs: &RayService, group: &str) -> serde_json::Value {
    let mut groups =
        serde_json::to_value(rs.spec.ray_cluster_config.worker_group_specs.clone().unwrap()).unwrap();
    let mut extra = groups[0].clone();
    extra["groupName"] = json!(group);
    groups.as_array_mut().unwrap().push(extra);
    groups
}

// ---- `rayservice_controller_test.go`

/// `Describe("After a RayService is running")`, its `BeforeEach`: "Conditions should be initialized
/// correctly" (UpgradeInProgress and Ready not True), "Should create a pending RayCluster", "Promote the
/// pending RayCluster to the active RayCluster" (the same name), the RayService's annotations on the
/// RayCluster, the serve application RUNNING with every deployment HEALTHY in the status, the head and
/// serve Services by KubeRay's names, and Ready=True once the serve Service has endpoints. Needs a harness
/// started with `auto_start: false`. Returns the service and its active cluster.
async fn running_service(h: &Harness, name: &str) -> (RayService, String) {
    create(h, &kuberay_template(name)).await;
    let rs = h
        .wait_rs(name, "conditions initialized", |rs| cond(rs, "Ready").is_some())
        .await;
    assert!(!is_true(&rs, "UpgradeInProgress"), "{:?}", rs.status);
    assert!(!is_true(&rs, "Ready"), "{:?}", rs.status);
    let rs = h
        .wait_rs(name, "a pending cluster", |rs| pending(rs).is_some())
        .await;
    let first = pending(&rs).unwrap();
    assert_eq!(active(&rs), None);

    start_head(h, &first);
    let wanted = first.clone();
    let rs = h
        .wait_rs(name, "promotion of the pending cluster", move |rs| {
            active(rs).as_deref() == Some(wanted.as_str()) && pending(rs).is_none()
        })
        .await;
    let rc = h.clusters().get(&first).await.unwrap();
    assert_eq!(
        rc.annotations().get("foo").map(String::as_str),
        Some("bar"),
        "annotations reach the RayCluster"
    );

    let app_status = apps(&rs, false);
    assert!(!app_status.is_empty(), "applications in the active status");
    for (app, st) in &app_status {
        assert_eq!(st.status.as_deref(), Some("RUNNING"), "{app}");
        for (d, ds) in st.deployments.iter().flatten() {
            assert_eq!(ds.status.as_deref(), Some("HEALTHY"), "{app}/{d}");
        }
    }
    for svc in [format!("{name}-head-svc"), format!("{name}-serve-svc")] {
        assert!(h.svcs().get_opt(&svc).await.unwrap().is_some(), "{svc}");
    }
    let rs = h.wait_rs(name, "serve endpoints", |rs| endpoints(rs) > 0).await;
    assert!(
        is_true(&rs, "Ready"),
        "Ready once there are serve endpoints: {:?}",
        rs.status
    );
    (rs, first)
}

/// `Describe("After a RayService is running")` `BeforeEach`, on its own (see `running_service`).
#[test]
fn after_a_rayservice_is_running() {
    scenario(async {
        let h = Harness::start_admitted(false);
        running_service(&h, "test-base-path-1").await;
    });
}

/// `When("Testing in-place update: updating the serveConfigV2")`: "New serve application should be shown
/// in the RayService status", "Should create an UpdatedServeApplications event" (regarding the
/// RayService), "Should not create a new pending cluster", "Should not switch to a new active cluster".
#[test]
fn in_place_update_of_the_serve_config() {
    scenario(async {
        let h = Harness::start_admitted(false);
        let name = "test-base-path-2";
        let (rs, first) = running_service(&h, name).await;
        h.patch_spec(name, json!({"serveConfigV2": serve_app("newAppName", 3)}))
            .await;
        let after = h
            .wait_rs(name, "newAppName in the status", |rs| {
                apps(rs, false).contains_key("newAppName")
            })
            .await;
        let uid = rs.uid().unwrap();
        let events: Api<Event> = Api::namespaced(h.client.clone(), NS);
        eventually("an UpdatedServeApplications event", || async {
            let list = events.list(&ListParams::default()).await.unwrap().items;
            list.into_iter().find(|e| {
                e.reason.as_deref() == Some("UpdatedServeApplications")
                    && e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid.as_str())
            })
        })
        .await;
        assert_eq!(pending(&after), None);
        assert_eq!(active(&after).as_deref(), Some(first.as_str()));
    });
}

/// `Describe("Autoscaler updates RayCluster should not trigger zero downtime upgrade")`: "Should create a
/// pending RayCluster", "Autoscaler updates the pending RayCluster and should not switch to a new
/// RayCluster", "Promote the pending RayCluster to the active RayCluster". (Its last `It`, the active
/// cluster, is `kuberay_envtest_autoscaler_updates_do_not_trigger_an_upgrade` in
/// `rayservice_controller.rs`.)
#[test]
fn autoscaler_updates_to_the_pending_cluster_do_not_trigger_an_upgrade() {
    scenario(async {
        let h = Harness::start_admitted(false);
        let name = "test-autoscaler";
        create(&h, &kuberay_template(name)).await;
        let rs = h
            .wait_rs(name, "a pending cluster", |rs| pending(rs).is_some())
            .await;
        let first = pending(&rs).unwrap();
        let rc = eventually("the pending RayCluster", || async {
            h.clusters().get_opt(&first).await.unwrap()
        })
        .await;
        let mut groups = serde_json::to_value(rc.spec.worker_group_specs.unwrap()).unwrap();
        let replicas = groups[0]["replicas"].as_i64().unwrap();
        groups[0]["replicas"] = json!(replicas + 1);
        let patch = Patch::Merge(json!({"spec": {"workerGroupSpecs": groups}}));
        h.clusters()
            .patch(&first, &PatchParams::default(), &patch)
            .await
            .unwrap();
        // The stand-in for Gomega's Consistently: a RayService change the controller acts on (it writes
        // observedGeneration) after it has seen the autoscaler's write.
        h.patch_spec(name, json!({"serveConfigV2": serve_app("app1", 4)}))
            .await;
        let rs = h
            .wait_rs(name, "the spec change observed", |rs| {
                rs.status.as_ref().and_then(|s| s.observed_generation) == rs.metadata.generation
            })
            .await;
        assert_eq!(
            pending(&rs).as_deref(),
            Some(first.as_str()),
            "no other pending cluster"
        );
        assert_eq!(h.cluster_names().await, vec![first.clone()]);

        start_head(&h, &first);
        let wanted = first.clone();
        h.wait_rs(name, "promotion", move |rs| {
            active(rs).as_deref() == Some(wanted.as_str())
        })
        .await;
        let replicas_now = h
            .clusters()
            .get(&first)
            .await
            .unwrap()
            .spec
            .worker_group_specs
            .unwrap()[0]
            .replicas;
        assert_eq!(
            replicas_now,
            Some(i32::try_from(replicas + 1).unwrap()),
            "the autoscaler's write stays"
        );
    });
}

/// `When("During the zero-downtime upgrade process")`, its `BeforeEach`: a new rayVersion names a pending
/// cluster and creates it. Returns (active, pending).
async fn upgrade_started(h: &Harness, name: &str) -> (String, String) {
    let (_, first) = running_service(h, name).await;
    h.patch_spec(
        name,
        json!({"rayClusterConfig": {"rayVersion": "mock-ray-version-1"}}),
    )
    .await;
    let rs = h
        .wait_rs(name, "a pending cluster", |rs| pending(rs).is_some())
        .await;
    let next = pending(&rs).unwrap();
    assert_ne!(next, first);
    eventually("the pending RayCluster", || async {
        h.clusters().get_opt(&next).await.unwrap()
    })
    .await;
    (first, next)
}

/// `When("During the zero-downtime upgrade process")` / `When("Promote the pending RayCluster to the
/// active RayCluster")`: "Update the head pod to Running and Ready" makes the pending cluster active.
#[test]
fn zero_downtime_upgrade_promotes_the_pending_cluster() {
    scenario(async {
        let h = Harness::start_admitted(false);
        let name = "test-upgrade-promote";
        let (_, next) = upgrade_started(&h, name).await;
        start_head(&h, &next);
        let wanted = next.clone();
        h.wait_rs(name, "promotion", move |rs| {
            active(rs).as_deref() == Some(wanted.as_str())
        })
        .await;
    });
}

/// `When("Updating the RayVersion again to prepare a new pending cluster")`: "Should prepare a new pending
/// cluster" (another name than the first pending cluster's).
#[test]
fn a_second_ray_version_change_prepares_a_new_pending_cluster() {
    scenario(async {
        let h = Harness::start_admitted(false);
        let name = "test-upgrade-again";
        let (first, next) = upgrade_started(&h, name).await;
        h.patch_spec(
            name,
            json!({"rayClusterConfig": {"rayVersion": "mock-ray-version-2"}}),
        )
        .await;
        let stale = next.clone();
        let rs = h
            .wait_rs(name, "a new pending cluster", move |rs| {
                pending(rs).is_some_and(|p| p != stale)
            })
            .await;
        assert_eq!(
            active(&rs).as_deref(),
            Some(first.as_str()),
            "the active keeps serving"
        );
    });
}

/// `When("Testing appending a new worker group to the pending RayCluster")`: "Should reflect the changes in
/// the pending cluster's WorkerGroupSpecs", "Should not prepare a new pending cluster".
#[test]
fn appending_a_worker_group_updates_the_pending_cluster() {
    scenario(async {
        let h = Harness::start_admitted(false);
        let name = "test-upgrade-append";
        let (first, next) = upgrade_started(&h, name).await;
        let rs = h.services().get(name).await.unwrap();
        assert_eq!(
            rs.spec
                .ray_cluster_config
                .worker_group_specs
                .as_ref()
                .map(Vec::len),
            Some(1)
        );
        let groups = with_group_appended(&rs, "worker-group-to-active-cluster");
        h.patch_spec(name, json!({"rayClusterConfig": {"workerGroupSpecs": groups}}))
            .await;
        eventually("two worker groups on the pending cluster", || async {
            (group_count(&h, &next).await == 2).then_some(())
        })
        .await;
        let (svc, n) = (h.services(), name.to_string());
        let (p, a) = (next.clone(), first.clone());
        consistently("the same pending cluster", Duration::from_secs(2), || {
            let (svc, n, p, a) = (svc.clone(), n.clone(), p.clone(), a.clone());
            async move {
                let rs = svc.get(&n).await.map_err(|e| e.to_string())?;
                match (pending(&rs), active(&rs)) {
                    (Some(pn), Some(an)) if pn == p && an == a => Ok(()),
                    other => Err(format!("(pending, active) = {other:?}")),
                }
            }
        })
        .await;
        assert_eq!(
            group_count(&h, &first).await,
            1,
            "the active cluster is not changed"
        );
    });
}
