//! The quota-gated RayService upgrade (DESIGN "The gated upgrade, step by step"), end to end on the
//! embedded cluster with the real manager and Ray operator, every scenario under the invariant watcher.
//! Scenario (a) is the happy path of Kueue's proof of concept (kubernetes-sigs/kueue PR #11264,
//! `test/e2e/singlecluster/extended/kuberay_test.go`: ClusterQueue 3 CPU, a 2-CPU RayService, the upgrade
//! waits until the quota is raised to 4, then settles back at 2).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use quotagate::api::kueue::{ClusterQueue, Workload};
use quotagate::api::ray::{RayCluster, RayService};
use serde_json::json;

use super::invariants::Invariants;
use super::support::*;

const NS: &str = "default";

/// A queue-managed RayService: head `head_cpu` + one worker of 1 CPU, rayVersion `version`.
pub(super) fn service(name: &str, head_cpu: &str, version: &str) -> RayService {
    let res = |cpu: &str| json!({"requests": {"cpu": cpu, "memory": "1Gi"}});
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "rayClusterDeletionDelaySeconds": 1,
            "serveConfigV2": "applications:\n  - name: app\n    import_path: app.graph\n    route_prefix: /\n    deployments:\n      - name: D\n        num_replicas: 1\n",
            "rayClusterConfig": {
                "rayVersion": version,
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head",
                    "image": format!("rayproject/ray:{version}"), "resources": res(head_cpu)}]}}},
                "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "minReplicas": 1, "maxReplicas": 2, "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-worker", "image": format!("rayproject/ray:{version}"), "resources": res("1")}]}}}]
            }
        }
    }))
    .unwrap()
}

pub(super) struct Scenario {
    pub(super) c: Cluster,
    pub(super) inv: Invariants,
}

impl Scenario {
    /// A ClusterQueue `cq` of `cpu` (and ample memory), LocalQueue `lq`, the invariant watcher on.
    pub(super) async fn start(cpu: &str, max_cpu_milli: i64) -> Scenario {
        Self::start_on(quotagate::wiring::manager::embedded_server(), cpu, max_cpu_milli).await
    }

    pub(super) async fn start_on(
        server: std::sync::Arc<quotagate::embedded::EmbeddedServer>,
        cpu: &str,
        max_cpu_milli: i64,
    ) -> Scenario {
        let c = Cluster::start_with_ray_on(server, Limits::default().cq("cq", max_cpu_milli)).await;
        let inv = Invariants::start(c.client.clone());
        c.simple("cq", "lq", cpu).await;
        Scenario { c, inv }
    }

    pub(super) fn services(&self) -> Api<RayService> {
        Api::namespaced(self.c.client.clone(), NS)
    }

    pub(super) fn clusters(&self) -> Api<RayCluster> {
        Api::namespaced(self.c.client.clone(), NS)
    }

    pub(super) async fn set_quota(&self, cpu: &str) {
        self.try_set_quota(cpu).await.unwrap();
    }

    pub(super) async fn try_set_quota(&self, cpu: &str) -> Result<ClusterQueue, kube::Error> {
        let cqs: Api<ClusterQueue> = Api::all(self.c.client.clone());
        let patch = json!({"spec": {"resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default",
            "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "64Gi"}]}]}]}});
        cqs.patch("cq", &PatchParams::default(), &Patch::Merge(&patch))
            .await
    }

    /// Deletes the preempting workload `wl` and waits until service `rs` serves again, resumed.
    async fn resumes_once_deleted(&self, wl: &str) -> RayService {
        self.c
            .workloads()
            .delete(wl, &DeleteParams::default())
            .await
            .unwrap();
        self.wait_rs("rs", "Ready again", |r| {
            r.spec.suspend != Some(true) && ready(r) && active(r).is_some()
        })
        .await
    }

    /// Lets higher-priority workloads preempt lower ones in `cq`; `spec` adds more to its spec.
    async fn preempt_lower_priority(&self, mut spec: serde_json::Value) {
        spec["preemption"] = json!({"withinClusterQueue": "LowerPriority"});
        let cqs: Api<ClusterQueue> = Api::all(self.c.client.clone());
        cqs.patch(
            "cq",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": spec})),
        )
        .await
        .unwrap();
    }

    pub(super) async fn patch_version(&self, name: &str, version: &str) {
        let patch = json!({"spec": {"rayClusterConfig": {"rayVersion": version}}});
        self.services()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    /// Polls the RayService (GET, not a watch: see tests/rayservice_controller.rs on debug stacks).
    pub(super) async fn wait_rs(
        &self,
        name: &str,
        what: &str,
        cond: impl Fn(&RayService) -> bool,
    ) -> RayService {
        poll(what, || async {
            self.services().get_opt(name).await.unwrap().filter(|r| cond(r))
        })
        .await
    }

    /// The ClusterQueue's reserved cpu, in millis, once it equals `want`.
    pub(super) async fn wait_cq_cpu(&self, want: i64) {
        let cqs: Api<ClusterQueue> = Api::all(self.c.client.clone());
        poll(&format!("ClusterQueue cq to reserve {want}m cpu"), || async {
            let cq = cqs.get("cq").await.unwrap();
            (cq_cpu(&cq) == want).then_some(())
        })
        .await
    }

    pub(super) async fn pods_of(&self, cluster: &str) -> Vec<Pod> {
        let pods: Api<Pod> = Api::namespaced(self.c.client.clone(), NS);
        pods.list(&ListParams::default().labels(&format!("ray.io/cluster={cluster}")))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect()
    }

    pub(super) async fn workloads_of(&self, rs: &str) -> Vec<Workload> {
        self.c
            .workloads()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|w| {
                w.owner_references()
                    .iter()
                    .any(|o| o.kind == "RayService" && o.name == rs)
            })
            .collect()
    }

    /// Creates the service and waits until it serves; returns its active cluster.
    pub(super) async fn serving(&self, rs: RayService) -> String {
        let name = rs.name_any();
        self.services().create(&PostParams::default(), &rs).await.unwrap();
        let rs = self
            .wait_rs(&name, "Ready", |r| ready(r) && active(r).is_some())
            .await;
        active(&rs).unwrap()
    }

    /// Upgrades and waits until a gated pending cluster exists; returns its name.
    async fn gated_upgrade(&self, name: &str, version: &str) -> String {
        self.patch_version(name, version).await;
        let rs = self
            .wait_rs(name, "a pending cluster", |r| pending(r).is_some())
            .await;
        let p = pending(&rs).unwrap();
        poll("the pending cluster to exist", || async {
            self.clusters().get_opt(&p).await.unwrap()
        })
        .await;
        p
    }

    pub(super) async fn wait_gone(&self, cluster: &str) {
        poll(&format!("RayCluster {cluster} to be deleted"), || async {
            self.clusters()
                .get_opt(cluster)
                .await
                .unwrap()
                .is_none()
                .then_some(())
        })
        .await
    }

    /// Waits until `cluster` is the service's active cluster (traffic moved to it).
    pub(super) async fn wait_active(&self, rs: &str, cluster: &str) -> RayService {
        self.wait_rs(rs, &format!("traffic on {cluster}"), |r| {
            active(r).as_deref() == Some(cluster)
        })
        .await
    }

    /// No Workload is owned by a RayCluster: the children of a queue-managed RayService have none.
    async fn assert_children_have_no_workloads(&self) {
        let all = self
            .c
            .workloads()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        let owned_by_clusters: Vec<String> = all
            .iter()
            .filter(|w| w.owner_references().iter().any(|o| o.kind == "RayCluster"))
            .map(|w| w.name_any())
            .collect();
        assert!(
            owned_by_clusters.is_empty(),
            "child RayClusters got workloads: {owned_by_clusters:?}"
        );
    }
}

/// Waits for `f` (every 50 ms). The deadline only tells a hang from slow progress: the suite runs
/// its test binaries side by side on two cores, where an incremental upgrade's four surge steps
/// took over 40 s (a timing figure belongs in a benchmark, not here).
pub(super) async fn poll<T, F, Fut>(what: &str, f: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(super) fn cq_cpu(cq: &ClusterQueue) -> i64 {
    cq.status
        .as_ref()
        .map(|s| s.flavors_reservation.as_slice())
        .unwrap_or_default()
        .iter()
        .flat_map(|f| f.resources.iter())
        .filter(|r| r.name == "cpu")
        .filter_map(|r| r.total.as_ref())
        .map(|q| {
            let v = quotagate::api::quantity::Quantity::try_from(q).unwrap();
            quotagate::api::quantity::resource_value("cpu", &v)
        })
        .sum()
}

pub(super) fn active(rs: &RayService) -> Option<String> {
    rs.status
        .as_ref()?
        .active_service_status
        .as_ref()?
        .ray_cluster_name
        .clone()
        .filter(|n| !n.is_empty())
}

pub(super) fn pending(rs: &RayService) -> Option<String> {
    rs.status
        .as_ref()?
        .pending_service_status
        .as_ref()?
        .ray_cluster_name
        .clone()
        .filter(|n| !n.is_empty())
}

pub(super) fn ready(rs: &RayService) -> bool {
    quotagate::api::conditions::is_true(rs.status.as_ref().and_then(|s| s.conditions.as_deref()), "Ready")
}

fn finished_reason(w: &Workload) -> Option<String> {
    w.status
        .as_ref()?
        .condition("Finished")
        .filter(|c| c.status == "True")
        .map(|c| c.reason.clone())
}

fn pod_names(pods: &[Pod]) -> Vec<String> {
    let mut v: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
    v.sort();
    v
}

/// (a) The proof of concept's happy path, and the children never get workloads of their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gated_upgrade_waits_for_quota_then_switches_and_settles() {
    let s = Scenario::start("3", 4000).await;
    let a = s.serving(service("rs", "1", "2.46.0")).await;
    s.wait_cq_cpu(2000).await;
    let first_wl = s.workloads_of("rs").await;
    assert_eq!(first_wl.len(), 1, "one workload for the service");
    let active_pods = pod_names(&s.pods_of(&a).await);

    let p = s.gated_upgrade("rs", "2.47.0").await;
    // The slice for both clusters (4 CPU) does not fit in 3: the pending cluster runs nothing, the active
    // is untouched and serves, usage stays 2.
    let rs = s
        .wait_rs("rs", "the wait explained in status", |r| {
            r.status
                .as_ref()
                .and_then(|st| st.conditions.as_ref())
                .into_iter()
                .flatten()
                .any(|c| {
                    c.type_ == "UpgradeInProgress"
                        && c.message.contains("is gated: waiting for workload slice")
                })
        })
        .await;
    assert_eq!(active(&rs).as_deref(), Some(a.as_str()));
    assert!(ready(&rs));
    assert!(s.pods_of(&p).await.is_empty(), "a gated cluster runs no pod");
    assert_eq!(
        pod_names(&s.pods_of(&a).await),
        active_pods,
        "I4: the active cluster is not touched"
    );
    s.wait_cq_cpu(2000).await;
    let gated = poll("the gated cluster to say why", || async {
        let rc = s.clusters().get(&p).await.unwrap();
        let says = rc
            .status
            .as_ref()
            .and_then(|st| st.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| {
                c.type_ == "QuotaGated"
                    && c.status == "True"
                    && c.message.contains("waiting for workload slice")
            });
        says.then_some(rc)
    })
    .await;
    assert_eq!(gated.spec.suspend, Some(true), "born held");
    s.assert_children_have_no_workloads().await;

    // Raise the quota: the slice is admitted, the gate opens, traffic moves, the old cluster goes.
    s.set_quota("4").await;
    let rs = s
        .wait_rs("rs", "traffic on the new cluster", |r| {
            active(r).as_deref() == Some(p.as_str()) && ready(r)
        })
        .await;
    assert!(pending(&rs).is_none());
    s.wait_gone(&a).await;
    s.wait_cq_cpu(2000).await;
    let wls = s.workloads_of("rs").await;
    let old = wls
        .iter()
        .find(|w| w.name_any() == first_wl[0].name_any())
        .unwrap();
    assert_eq!(finished_reason(old).as_deref(), Some("WorkloadSliceReplaced"));
    assert_eq!(
        wls.iter().filter(|w| !w.is_finished()).count(),
        1,
        "one live slice"
    );
    s.assert_children_have_no_workloads().await;
    s.inv.assert_clean();
    s.c.quota.assert_safe();
}

/// Kueue v0.20's `RayServiceValidateUpgradeStrategy` (Beta, on by default; kubernetes-sigs/kueue #16094,
/// CHANGELOG-0.20 "Actions Required"): a Kueue-managed RayService with a zero-downtime upgrade must carry
/// `kueue.x-k8s.io/elastic-job: "true"` (with `ElasticJobsViaWorkloadSlices`) or set
/// `spec.upgradeStrategy.type: None`. quotagate needs neither; a Kueue v0.20 manifest carrying the
/// annotation (and an explicit `NewCluster`) applies unchanged and its upgrade is gated exactly as (a).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kueue_v020_elastic_job_rayservice_applies_unchanged_and_upgrades_the_same() {
    let s = Scenario::start("3", 4000).await;
    let mut rs = service("rs", "1", "2.46.0");
    rs.metadata.annotations = Some([("kueue.x-k8s.io/elastic-job".to_string(), "true".to_string())].into());
    rs.spec.upgrade_strategy = Some(serde_json::from_value(json!({"type": "NewCluster"})).unwrap());
    let sent = rs.spec.clone();
    let a = s.serving(rs).await;
    let stored = s.services().get("rs").await.unwrap();
    assert_eq!(
        stored
            .annotations()
            .get("kueue.x-k8s.io/elastic-job")
            .map(String::as_str),
        Some("true"),
        "the annotation is kept"
    );
    assert_eq!(
        serde_json::to_value(&stored.spec.ray_cluster_config).unwrap(),
        serde_json::to_value(&sent.ray_cluster_config).unwrap(),
        "no scheduling gate or other change written into the templates"
    );
    s.wait_cq_cpu(2000).await;
    assert_eq!(
        s.workloads_of("rs").await.len(),
        1,
        "one workload for the service"
    );

    // As (a): the 4-CPU slice waits in a 3-CPU queue, the pending cluster runs nothing.
    let p = s.gated_upgrade("rs", "2.47.0").await;
    s.wait_rs("rs", "the wait explained in status", |r| {
        r.status
            .as_ref()
            .and_then(|st| st.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| {
                c.type_ == "UpgradeInProgress" && c.message.contains("is gated: waiting for workload slice")
            })
    })
    .await;
    assert!(s.pods_of(&p).await.is_empty(), "a gated cluster runs no pod");
    s.set_quota("4").await;
    s.wait_rs("rs", "traffic on the new cluster", |r| {
        active(r).as_deref() == Some(p.as_str()) && ready(r)
    })
    .await;
    s.wait_gone(&a).await;
    s.wait_cq_cpu(2000).await;
    s.assert_children_have_no_workloads().await;
    s.inv.assert_clean();
    s.c.quota.assert_safe();
}

/// (b) A resource-changing upgrade reserves the true mix while both clusters live (old head 1 CPU + new
/// head 2 CPU + two 1-CPU workers = 5), then settles at the new size (3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resized_upgrade_reserves_the_true_mix_then_settles_at_the_new_size() {
    let s = Scenario::start("5", 5000).await;
    let a = s.serving(service("rs", "1", "2.46.0")).await;
    s.wait_cq_cpu(2000).await;
    let patch = json!({"spec": {"rayClusterConfig": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head",
        "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]}}}}}});
    s.services()
        .patch("rs", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let rs = s
        .wait_rs("rs", "a pending cluster", |r| pending(r).is_some())
        .await;
    let p = pending(&rs).unwrap();
    s.wait_cq_cpu(5000).await;
    let live: Vec<Workload> = s
        .workloads_of("rs")
        .await
        .into_iter()
        .filter(|w| !w.is_finished())
        .collect();
    assert_eq!(live.len(), 1);
    let heads: Vec<(String, i32)> = live[0]
        .spec
        .pod_sets
        .iter()
        .filter(|p| p.name.as_deref().is_some_and(|n| n.starts_with("head")))
        .map(|p| (p.name.clone().unwrap(), p.count()))
        .collect();
    assert_eq!(heads.len(), 2, "each head shape is its own podset: {heads:?}");
    s.wait_active("rs", &p).await;
    s.wait_gone(&a).await;
    s.wait_cq_cpu(3000).await;
    s.inv.assert_clean();
}

/// (c) Every tampering path on a gated child is refused with a reason, and the pending cluster runs no
/// pod meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampering_with_a_gated_child_is_refused_and_opens_nothing() {
    let s = Scenario::start("3", 3000).await;
    s.serving(service("rs", "1", "2.46.0")).await;
    let p = s.gated_upgrade("rs", "2.47.0").await;
    let pp = PatchParams::default();
    let tries: Vec<(&str, serde_json::Value, &str)> = vec![
        (
            "resume it",
            json!({"spec": {"suspend": false}}),
            "only quotagate releases it",
        ),
        (
            "resume it and drop the marker",
            json!({"metadata": {"annotations": {"quotagate.io/admission-gated": null}}, "spec": {"suspend": false}}),
            "only quotagate releases it",
        ),
        (
            "take it from its owner",
            json!({"metadata": {"ownerReferences": []}}),
            "controller owner reference",
        ),
        (
            "drop its origin label",
            json!({"metadata": {"labels": {"ray.io/originated-from-cr-name": null}}}),
            "RayService rs",
        ),
        (
            "move it to another queue",
            json!({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "other"}}}),
            "RayService rs",
        ),
        (
            "hand it to another manager",
            json!({"spec": {"managedBy": "kueue.x-k8s.io/multikueue"}}),
            "RayService rs",
        ),
    ];
    for (what, patch, why) in tries {
        let err = s
            .clusters()
            .patch(&p, &pp, &Patch::Merge(&patch))
            .await
            .expect_err(what);
        let kube::Error::Api(status) = err else {
            panic!("{what}: not an API error")
        };
        assert_eq!(status.code, 422, "{what}");
        assert!(status.message.contains(why), "{what}: {}", status.message);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(s.pods_of(&p).await.is_empty(), "no pending pod runs");
    s.inv.assert_clean();
}

/// (c, continued) With admission off (no webhook installed, so no edit is refused), resuming the gated
/// child and stripping its gate marker still starts no pod: the RayCluster controller caps pods by the
/// admitted slice, whatever the child's fields say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_admission_off_a_resumed_gated_child_still_runs_no_pod() {
    let server = quotagate::embedded::EmbeddedServer::new(
        &quotagate::api::all_crds(),
        std::sync::Arc::new(quotagate::embedded::AllowAll),
    );
    let s = Scenario::start_on(server, "3", 3000).await;
    // Without the webhook's defaulting the service is not created suspended: the job reconciler
    // suspends it until its workload is admitted.
    s.serving(service("rs", "1", "2.46.0")).await;
    let p = s.gated_upgrade("rs", "2.47.0").await;
    let resume = json!({"metadata": {"annotations": {"quotagate.io/admission-gated": null}}, "spec": {"suspend": false}});
    s.clusters()
        .patch(&p, &PatchParams::default(), &Patch::Merge(&resume))
        .await
        .unwrap();
    poll("the RayCluster controller to see the resumed child", || async {
        let rc = s.clusters().get(&p).await.unwrap();
        rc.status
            .as_ref()
            .and_then(|st| st.observed_generation)
            .filter(|g| Some(*g) == rc.metadata.generation)
            .map(|_| ())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(s.pods_of(&p).await.is_empty(), "the gate holds without admission");
    s.set_quota("4").await;
    poll(
        "the pending cluster's pods once its slice is admitted",
        || async { (s.pods_of(&p).await.len() == 2).then_some(()) },
    )
    .await;
    s.inv.assert_clean();
}

/// (d) A higher-priority workload preempts the service during its upgrade: the whole service is
/// suspended, requeued, and resumes on its latest spec once the quota is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_during_an_upgrade_suspends_the_service_and_it_resumes_later() {
    let s = Scenario::start("3", 3000).await;
    s.preempt_lower_priority(json!({})).await;
    s.serving(service("rs", "1", "2.46.0")).await;
    s.gated_upgrade("rs", "2.47.0").await;
    s.c.workload("urgent", "lq", 1000, "3").await;
    s.wait_rs("rs", "suspended by preemption", |r| r.spec.suspend == Some(true))
        .await;
    poll("the children to be deleted", || async {
        s.clusters()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    let rs = s.resumes_once_deleted("urgent").await;
    let now = s.clusters().get(&active(&rs).unwrap()).await.unwrap();
    assert_eq!(
        now.spec.ray_version.as_deref(),
        Some("2.47.0"),
        "resumed on the latest spec"
    );
    s.wait_cq_cpu(2000).await;
    s.inv.assert_clean();
}

/// (d2) Preempted after a completed upgrade (its templates carry the first slice chain's name) and
/// edited while suspended, so its next Workload starts a new chain: it must resume. It used to fail
/// to start forever on a conflict between the old and the new `workload-slice-name` annotation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_preempted_after_an_upgrade_and_edited_resumes_on_a_new_slice_chain() {
    let s = Scenario::start("3", 3000).await;
    s.preempt_lower_priority(json!({})).await;
    s.set_quota("4").await;
    let a = s.serving(service("rs", "1", "2.46.0")).await;
    let p = s.gated_upgrade("rs", "2.47.0").await;
    s.wait_active("rs", &p).await;
    s.wait_gone(&a).await;
    s.c.workload("urgent", "lq", 1000, "3").await;
    s.wait_rs("rs", "suspended by preemption", |r| r.spec.suspend == Some(true))
        .await;
    let head = json!({"spec": {"rayClusterConfig": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head",
        "image": "rayproject/ray:2.47.0", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}}}}});
    s.services()
        .patch("rs", &PatchParams::default(), &Patch::Merge(&head))
        .await
        .unwrap();
    s.resumes_once_deleted("urgent").await;
    s.wait_cq_cpu(1500).await;
    s.inv.assert_clean();
}

/// (d3) Preempted after a resized upgrade: its admitted slice kept a podset per head shape (the old one
/// at 0), so the stopped service's demand no longer matched it, and the suspended job's Workload was
/// deleted, releasing the quota while the child's pods still ran (I2, seed 27 of the chaos runs). The
/// reservation must stay until the children are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_preempted_after_a_resized_upgrade_keeps_its_quota_until_its_pods_are_gone() {
    let s = Scenario::start("5", 5000).await;
    s.preempt_lower_priority(json!({})).await;
    let a = s.serving(service("rs", "1", "2.46.0")).await;
    let patch = json!({"spec": {"rayClusterConfig": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head",
        "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]}}}}}});
    s.services()
        .patch("rs", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let rs = s
        .wait_rs("rs", "a pending cluster", |r| pending(r).is_some())
        .await;
    let p = pending(&rs).unwrap();
    s.wait_active("rs", &p).await;
    s.wait_gone(&a).await;
    s.wait_cq_cpu(3000).await;
    // Stopping takes a while, as under load: the RayCluster controller's pod deletions fail and
    // another controller's finalizer holds the child (and so its pods) after the suspend deletes it.
    let hold = json!({"metadata": {"finalizers": ["example.com/hold"]}});
    s.clusters()
        .patch(&p, &PatchParams::default(), &Patch::Merge(&hold))
        .await
        .unwrap();
    let faults = &s.c.server.store.faults;
    let pod_deletes = quotagate::embedded::WriteMatch {
        verb: Some("delete".into()),
        plural: Some("pods".into()),
        ..Default::default()
    };
    for _ in 0..1000 {
        faults.fail_nth_write_500(pod_deletes.clone(), 1);
    }
    s.c.workload("urgent", "lq", 1000, "5").await;
    s.wait_rs("rs", "suspended by preemption", |r| r.spec.suspend == Some(true))
        .await;
    poll("the child to be deleting", || async {
        s.clusters()
            .get(&p)
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .map(|_| ())
    })
    .await;
    // Several passes of the job controller (it requeues a stopping job every second): none may let the
    // quota go while the child's pods run.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!s.pods_of(&p).await.is_empty(), "the held child keeps its pods");
    let cqs: Api<ClusterQueue> = Api::all(s.c.client.clone());
    assert_eq!(
        cq_cpu(&cqs.get("cq").await.unwrap()),
        3000,
        "the service's reservation stays while its pods run; the watcher saw {:?}",
        s.inv.violations()
    );
    faults.clear_write_faults();
    let free = json!({"metadata": {"finalizers": null}});
    s.clusters()
        .patch(&p, &PatchParams::default(), &Patch::Merge(&free))
        .await
        .unwrap();
    s.wait_gone(&p).await;
    s.wait_cq_cpu(5000).await;
    s.inv.assert_clean();
}

/// (e) Reverting the spec while gated deletes the pending cluster and its pending slice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_while_gated_releases_the_pending_demand() {
    let s = Scenario::start("3", 3000).await;
    let a = s.serving(service("rs", "1", "2.46.0")).await;
    let p = s.gated_upgrade("rs", "2.47.0").await;
    poll("a pending slice", || async {
        (s.workloads_of("rs")
            .await
            .iter()
            .filter(|w| !w.is_finished())
            .count()
            == 2)
            .then_some(())
    })
    .await;
    s.patch_version("rs", "2.46.0").await;
    s.wait_gone(&p).await;
    poll("the pending slice to go", || async {
        (s.workloads_of("rs")
            .await
            .iter()
            .filter(|w| !w.is_finished())
            .count()
            == 1)
            .then_some(())
    })
    .await;
    let rs = s.services().get("rs").await.unwrap();
    assert_eq!(active(&rs).as_deref(), Some(a.as_str()));
    s.wait_cq_cpu(2000).await;
    s.inv.assert_clean();
}

/// (f) A second change while gated replaces the pending cluster without a second pending slice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_change_while_gated_keeps_one_pending_slice() {
    let s = Scenario::start("3", 4000).await;
    s.serving(service("rs", "1", "2.46.0")).await;
    let p1 = s.gated_upgrade("rs", "2.47.0").await;
    s.patch_version("rs", "2.48.0").await;
    let rs = s
        .wait_rs("rs", "a new pending cluster", |r| {
            pending(r).is_some_and(|p| p != p1)
        })
        .await;
    let p2 = pending(&rs).unwrap();
    s.wait_gone(&p1).await;
    let live = s
        .workloads_of("rs")
        .await
        .into_iter()
        .filter(|w| !w.is_finished())
        .count();
    assert!(
        live <= 2,
        "the admitted slice and at most one pending one, got {live}"
    );
    s.set_quota("4").await;
    s.wait_active("rs", &p2).await;
    s.wait_cq_cpu(2000).await;
    s.inv.assert_clean();
}

/// (g) The manager restarts while gated and again once the quota is raised: no duplicate workload, no
/// pod outside a slice, and the upgrade completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manager_restarts_during_a_gated_upgrade_converge() {
    let mut s = Scenario::start("3", 4000).await;
    let a = s.serving(service("rs", "1", "2.46.0")).await;
    s.c.restart_manager("m2").await;
    let p = s.gated_upgrade("rs", "2.47.0").await;
    s.c.restart_manager("m3").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(s.pods_of(&p).await.is_empty());
    let live = s
        .workloads_of("rs")
        .await
        .into_iter()
        .filter(|w| !w.is_finished())
        .count();
    assert!(live <= 2, "no duplicate slice after a restart, got {live}");
    s.set_quota("4").await;
    s.c.restart_manager("m4").await;
    s.wait_active("rs", &p).await;
    s.wait_gone(&a).await;
    s.wait_cq_cpu(2000).await;
    assert_eq!(
        s.workloads_of("rs")
            .await
            .iter()
            .filter(|w| !w.is_finished())
            .count(),
        1
    );
    s.inv.assert_clean();
    s.c.quota.assert_safe();
}

/// (h) The replacement slice's admission write fails (a 500, as from an overloaded API server) several
/// times: the admitted slice keeps its quota and is finished as replaced only after the successor's
/// admission is on record, in the order one watch of all Workloads delivers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_replacement_admission_keeps_the_admitted_slice() {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    use quotagate::embedded::faults::WriteMatch;

    let s = Scenario::start("3", 4000).await;
    s.serving(service("rs", "1", "2.46.0")).await;
    s.gated_upgrade("rs", "2.47.0").await;
    let (old, new) = poll("an admitted slice and a pending one", || async {
        let wls = s.workloads_of("rs").await;
        let live: Vec<&Workload> = wls.iter().filter(|w| !w.is_finished()).collect();
        let old = live.iter().find(|w| w.has_quota_reservation())?;
        let new = live.iter().find(|w| !w.has_quota_reservation())?;
        Some((old.name_any(), new.name_any()))
    })
    .await;

    // Every Workload change from here on, in resourceVersion order.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, bool, bool)>::new()));
    let api: Api<Workload> = Api::all(s.c.client.clone());
    let record = seen.clone();
    let watch = tokio::spawn(async move {
        let stream = watcher(api, watcher::Config::default()).applied_objects();
        futures::pin_mut!(stream);
        while let Some(Ok(w)) = stream.next().await {
            let entry = (w.name_any(), w.has_quota_reservation(), w.is_finished());
            record.lock().unwrap().push(entry);
        }
    });
    let faults = &s.c.server.store.faults;
    for _ in 0..8 {
        let only_new = WriteMatch {
            verb: Some("patch".into()),
            plural: Some("workloads".into()),
            name: Some(new.clone()),
            status: Some(true),
        };
        faults.fail_nth_write_500(only_new, 1);
    }
    s.set_quota("4").await;
    let (a, f) = poll("the successor admitted and the old slice finished", || async {
        let seen = seen.lock().unwrap();
        let admitted = seen.iter().position(|(n, reserved, _)| *n == new && *reserved)?;
        let finished = seen.iter().position(|(n, _, finished)| *n == old && *finished)?;
        Some((admitted, finished))
    })
    .await;
    watch.abort();
    let seen = seen.lock().unwrap().clone();
    assert!(
        a < f,
        "{old} was finished before its successor {new} was admitted: {seen:?}"
    );
    s.inv.assert_clean();
}

/// The shipped RBAC, as deployed: `config/rbac/role.yaml` (ClusterRole) and
/// `leader_election_role.yaml` (Role in quotagate-system), for the manager's ServiceAccount.
/// Issue 13 item 9: the whole manager under the shipped Role through a gated upgrade, a preemption,
/// a resume and a deletion, with Ray token auth on. A request the Role does not allow is a 403
/// and fails the test (a missing grant); a granted verb no request used fails it too (an excess
/// grant): the Role is exactly what the code does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manager_needs_exactly_the_shipped_role() {
    let authz = shipped_role();
    // Every framework quotagate implements, Kueue's opt-in `pod` too, in the webhook and the manager.
    let frameworks = quotagate::api::kueue::config::Frameworks {
        pod: true,
        ..Default::default()
    };
    let admission = quotagate::embedded::QuotagateAdmission {
        frameworks,
        ..Default::default()
    };
    let server =
        quotagate::embedded::EmbeddedServer::new(&quotagate::api::all_crds(), std::sync::Arc::new(admission));
    let mut c = Cluster::start_with_ray_on(server, Limits::default().cq("cq", 4000)).await;
    c.frameworks = frameworks;
    // KubeRay's alpha RayCronJob controller too: it creates RayJobs and writes its own status.
    c.ray_gates.ray_cron_job = true;
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(c.client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "quotagate-system"}})).unwrap(),
    )
    .await
    .unwrap();
    c.restrict_manager(authz.clone(), "quotagate-system").await;
    let inv = Invariants::start(c.client.clone());
    c.simple("cq", "lq", "3").await;
    let s = Scenario { c, inv };
    let cohorts: Api<quotagate::api::kueue::Cohort> = Api::all(s.c.client.clone());
    let cohort = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "co"}, "spec": {}});
    let mut co: quotagate::api::kueue::Cohort = cohorts
        .create(&PostParams::default(), &serde_json::from_value(cohort).unwrap())
        .await
        .unwrap();
    // A stale fair-sharing status (fair sharing is off): the manager clears it.
    co.status = Some(serde_json::from_value(json!({"fairSharing": {"weightedShare": 0}})).unwrap());
    cohorts
        .replace_status("co", &PostParams::default(), &co)
        .await
        .unwrap();
    s.preempt_lower_priority(json!({"cohortName": "co"})).await;
    // The built-in admission check: its finalizer and its Active status are the manager's to write.
    let checks: Api<quotagate::api::kueue::AdmissionCheck> = Api::all(s.c.client.clone());
    let auto = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "auto"},
        "spec": {"controllerName": quotagate::api::kueue::admission_check::AUTO_READY_CONTROLLER}});
    checks
        .create(&PostParams::default(), &serde_json::from_value(auto).unwrap())
        .await
        .unwrap();
    poll("the built-in check to be Active and in use", || async {
        let ac = checks.get("auto").await.unwrap();
        (ac.is_active() && !ac.finalizers().is_empty()).then_some(())
    })
    .await;

    let mut rs = service("rs", "1", "2.52.0");
    rs.spec.ray_cluster_config.auth_options = Some(serde_json::from_value(json!({"mode": "token"})).unwrap());
    let a = s.serving(rs).await;
    let p = s.gated_upgrade("rs", "2.53.0").await;
    s.set_quota("4").await;
    s.wait_active("rs", &p).await;
    s.wait_gone(&a).await;
    // Settled: the live slice shrank in place to the one cluster left.
    s.wait_cq_cpu(2000).await;

    s.c.workload("urgent", "lq", 1000, "3").await;
    // Stopped, not only asked to: deleting the preemptor at once could readmit the service before
    // its controller ever acted on the suspension (a race of the test, not of the product).
    s.wait_rs("rs", "suspended by preemption", |r| {
        r.spec.suspend == Some(true)
            && quotagate::api::conditions::is_true(
                r.status.as_ref().and_then(|st| st.conditions.as_deref()),
                "Suspended",
            )
    })
    .await;
    s.resumes_once_deleted("urgent").await;
    s.services().delete("rs", &DeleteParams::default()).await.unwrap();
    poll("the service and its children to be gone", || async {
        let gone = s.services().get_opt("rs").await.unwrap().is_none()
            && s.clusters()
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty();
        gone.then_some(())
    })
    .await;
    s.wait_cq_cpu(0).await;

    // An admission write that meets a conflict is retried on the object read again.
    let probe = quotagate::embedded::faults::WriteMatch {
        verb: Some("patch".into()),
        plural: Some("workloads".into()),
        name: Some("probe".into()),
        status: Some(true),
    };
    s.c.server.store.faults.fail_nth_write_409(probe, 1);
    s.c.workload("probe", "lq", 0, "1").await;
    s.wait_cq_cpu(1000).await;
    s.c.workloads()
        .delete("probe", &DeleteParams::default())
        .await
        .unwrap();
    s.wait_cq_cpu(0).await;

    // An incremental upgrade (Gateway, HTTPRoute, per-cluster serve Services), not queue-managed,
    // then a Gateway class change the manager writes through.
    let mut inc = service("inc", "500m", "2.52.0");
    inc.metadata.labels = None;
    let mut v = serde_json::to_value(&inc).unwrap();
    v["spec"]["upgradeStrategy"] = json!({"type": "NewClusterWithIncrementalUpgrade",
        "clusterUpgradeOptions": {"gatewayClassName": "istio", "stepSizePercent": 50,
                                  "intervalSeconds": 1, "maxSurgePercent": 50}});
    v["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = json!(true);
    let inc: RayService = serde_json::from_value(v).unwrap();
    let old = s.serving(inc).await;
    s.patch_version("inc", "2.53.0").await;
    s.wait_rs("inc", "the incremental upgrade to finish", |r| {
        active(r).is_some_and(|a| a != old) && pending(r).is_none()
    })
    .await;
    let class =
        json!({"spec": {"upgradeStrategy": {"clusterUpgradeOptions": {"gatewayClassName": "envoy"}}}});
    s.services()
        .patch("inc", &PatchParams::default(), &Patch::Merge(&class))
        .await
        .unwrap();
    let gateways: Api<quotagate::api::gateway::Gateway> = Api::namespaced(s.c.client.clone(), NS);
    poll("the Gateway to follow the class", || async {
        let gw = gateways.get("inc-gateway").await.unwrap();
        (gw.spec.gateway_class_name == "envoy").then_some(())
    })
    .await;
    s.services()
        .delete("inc", &DeleteParams::default())
        .await
        .unwrap();
    s.wait_gone(&old).await;

    // A plain queue-managed RayCluster: admitted, preempted, edited while suspended (its Workload no
    // longer matches and is replaced), admitted again, deleted.
    let plain: RayCluster = serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "plain", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head",
                "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "1"}}}]}}},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "minReplicas": 0, "maxReplicas": 2, "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0",
                    "resources": {"requests": {"cpu": "1"}}}]}}}]
        }
    }))
    .unwrap();
    s.clusters().create(&PostParams::default(), &plain).await.unwrap();
    s.wait_cq_cpu(2000).await;
    s.c.workload("urgent2", "lq", 1000, "3").await;
    poll("plain to be suspended by preemption", || async {
        let rc = s.clusters().get("plain").await.unwrap();
        (rc.spec.suspend == Some(true)).then_some(())
    })
    .await;
    let smaller = json!({"spec": {"workerGroupSpecs": [{"groupName": "workers", "replicas": 1, "minReplicas": 0, "maxReplicas": 2,
        "rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0",
            "resources": {"requests": {"cpu": "500m"}}}]}}}]}});
    s.clusters()
        .patch("plain", &PatchParams::default(), &Patch::Merge(&smaller))
        .await
        .unwrap();
    // The edit replaces the Workload while urgent2 still holds the quota.
    poll(
        "plain's Workload to be replaced by one for the edited spec",
        || async {
            let wls = s.c.workloads().list(&ListParams::default()).await.unwrap().items;
            wls.iter()
                .filter(|w| w.name_any().starts_with("raycluster-plain-"))
                .any(|w| {
                    w.spec
                        .pod_sets
                        .iter()
                        .any(|p| serde_json::to_string(&p.template).unwrap().contains("\"500m\""))
                })
                .then_some(())
        },
    )
    .await;
    s.c.workloads()
        .delete("urgent2", &DeleteParams::default())
        .await
        .unwrap();
    s.wait_cq_cpu(1500).await;
    s.clusters()
        .delete("plain", &DeleteParams::default())
        .await
        .unwrap();
    s.wait_cq_cpu(0).await;
    // A queue-labelled batch Job (Kueue's batch/job) runs to completion under the same Role.
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(s.c.client.clone(), "default");
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "batch", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "0"], "resources": {"requests": {"cpu": "1"}}}]}}}});
    jobs.create(&PostParams::default(), &serde_json::from_value(job).unwrap())
        .await
        .unwrap();
    poll("the batch Job to complete and its Workload to finish", || async {
        let wls = s.c.workloads().list(&ListParams::default()).await.unwrap().items;
        wls.iter()
            .any(|w| w.name_any().starts_with("job-batch-") && w.is_finished())
            .then_some(())
    })
    .await;
    s.wait_cq_cpu(0).await;

    // A queued RayJob (HTTPMode) admitted, run to its end, and deleted by its own DeleteSelf policy.
    // (`rj` is reused below for the K8sJobMode one.)
    let rayjobs: Api<quotagate::api::ray::RayJob> = Api::namespaced(s.c.client.clone(), NS);
    let rj = json!({"apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "rj", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"entrypoint": "sleep 1", "submissionMode": "HTTPMode", "shutdownAfterJobFinishes": true,
            "deletionStrategy": {"onSuccess": {"policy": "DeleteSelf"}, "onFailure": {"policy": "DeleteSelf"}},
            "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head",
                "image": "rayproject/ray:2.46.0", "resources": {"requests": {"cpu": "1"}}}]}}}}}});
    let rj_template = rj["spec"].clone();
    rayjobs
        .create(
            &PostParams::default(),
            &serde_json::from_value(rj.clone()).unwrap(),
        )
        .await
        .unwrap();
    poll("the RayJob to run and delete itself", || async {
        rayjobs.get_opt("rj").await.unwrap().is_none().then_some(())
    })
    .await;
    s.wait_cq_cpu(0).await;
    // KubeRay's default mode (K8sJobMode): the manager runs a submitter batch Job, and deletes it
    // to retry a failed try (`backoffLimit: 1`), before the second failure ends it.
    let mut k8s = rj;
    k8s["metadata"]["name"] = json!("rj-k8s");
    k8s["spec"].as_object_mut().unwrap().remove("submissionMode");
    k8s["spec"]["entrypoint"] = json!("exit 3");
    k8s["spec"]["backoffLimit"] = json!(1);
    rayjobs
        .create(&PostParams::default(), &serde_json::from_value(k8s).unwrap())
        .await
        .unwrap();
    poll("the K8sJobMode RayJob to run and delete itself", || async {
        rayjobs.get_opt("rj-k8s").await.unwrap().is_none().then_some(())
    })
    .await;
    s.wait_cq_cpu(0).await;
    // A queue-labelled RayCronJob (KubeRay's RayCronJob gate): the manager creates its RayJob (owned by
    // it, blocking its deletion) and writes `lastScheduleTime`; the RayJob runs and deletes itself.
    let crons: Api<quotagate::api::ray::RayCronJob> = Api::namespaced(s.c.client.clone(), NS);
    let cron = json!({"apiVersion": "ray.io/v1", "kind": "RayCronJob",
        "metadata": {"name": "nightly", "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"schedule": "@every 1s", "jobTemplate": rj_template}});
    crons
        .create(&PostParams::default(), &serde_json::from_value(cron).unwrap())
        .await
        .unwrap();
    poll("the RayCronJob to schedule a RayJob", || async {
        let c = crons.get("nightly").await.unwrap();
        c.status.and_then(|st| st.last_schedule_time).map(|_| ())
    })
    .await;
    crons
        .patch(
            "nightly",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"suspend": true}})),
        )
        .await
        .unwrap();
    poll("its RayJob to run and delete itself", || async {
        let left = rayjobs
            .list(&ListParams::default().labels("ray.io/cronjob-name=nightly"))
            .await
            .unwrap()
            .items;
        left.is_empty().then_some(())
    })
    .await;
    crons.delete("nightly", &DeleteParams::default()).await.unwrap();
    s.wait_cq_cpu(0).await;

    // A queue-labelled Pod (Kueue's pod integration): created gated, ungated on admission, then
    // preempted: stopped with its TerminationTarget condition, deleted and finalized.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(s.c.client.clone(), "default");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain-pod", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"], "resources": {"requests": {"cpu": "3"}}}]}});
    pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap())
        .await
        .unwrap();
    poll("the Pod to be ungated and running", || async {
        let p = pods.get("plain-pod").await.unwrap();
        let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        (running && !quotagate::api::pod::is_gated(&p)).then_some(())
    })
    .await;
    s.c.workload("urgent3", "lq", 1000, "3").await;
    poll("the Pod to be stopped and gone", || async {
        pods.get_opt("plain-pod").await.unwrap().is_none().then_some(())
    })
    .await;
    s.c.workloads()
        .delete("urgent3", &DeleteParams::default())
        .await
        .unwrap();
    s.wait_cq_cpu(0).await;

    let denied: Vec<String> = authz.denied().iter().map(|a| a.to_string()).collect();
    assert!(denied.is_empty(), "the shipped Role is missing: {denied:?}");
    // MultiKueue's grants are used where its controllers run, with a worker cluster: checked under
    // this same Role by `multikueue::a_job_is_dispatched_…`.
    let mut unused = authz.unused();
    unused.retain(|g| !MULTIKUEUE_GRANTS.contains(&g.as_str()));
    assert!(
        unused.is_empty(),
        "the shipped Role grants what the code never does: {unused:?}"
    );
    s.inv.assert_clean();
}
