//! KubeRay's RayCluster envtest (`ray-operator/controllers/ray/raycluster_controller_test.go`, v1.7) as our
//! acceptance suite: each test names the `Describe`/`It` blocks it ports and asserts what they assert,
//! through the embedded API server (with quotagate's admission and the simulated node agent) and our
//! RayCluster controller. envtest has no kubelet, so KubeRay's tests set pods Running by hand; here the
//! node agent does it. Waits poll with a deadline; none sleeps for a fixed time.
//!
//! KubeRay's RayCluster e2e tests (`ray-operator/test/e2e/raycluster_*_test.go`) are ported in the
//! modules `e2e` (lifecycle, managedBy, quota, scaling, upgrade, auth, TLS off) and `e2e_features` (GCS fault
//! tolerance wiring, multi-host indexing), on this harness.

#[path = "kuberay_raycluster/e2e.rs"]
mod e2e;
#[path = "kuberay_raycluster/e2e_features.rs"]
mod e2e_features;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use quotagate::api::ray::RayCluster;
use quotagate::api::ray::raycluster::ClusterState;
use quotagate::api::ray::validation::RayFeatureGates;
use quotagate::embedded::EmbeddedServer;
use quotagate::embedded::sim::{self, SimConfig, node};
use quotagate::rayservice::clusterctl::controller as clusterctl;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const NS: &str = "default";
const WAIT: Duration = Duration::from_secs(60);

/// A runtime per test with default worker stacks (the Ray types are large in debug builds).
fn scenario<F: Future<Output = ()> + Send + 'static>(f: F) {
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

impl Drop for Harness {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl Harness {
    fn start() -> Self {
        Self::start_with(Default::default())
    }

    /// The cluster with KubeRay feature gates set, in admission and in the controller alike.
    fn start_with(gates: RayFeatureGates) -> Self {
        let server = quotagate::wiring::manager::embedded_server_with(gates);
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
        ctx.config.gates = gates;
        tokio::spawn(clusterctl::run(Arc::new(ctx)));
        Harness {
            client,
            cancel,
            _server: server,
        }
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), NS)
    }

    async fn cluster(&self, name: &str) -> RayCluster {
        self.api::<RayCluster>().get(name).await.unwrap()
    }

    /// Live pods matching `labels`.
    async fn pods(&self, labels: &str) -> Vec<Pod> {
        let lp = ListParams::default().labels(labels);
        let pods = self.api::<Pod>().list(&lp).await.unwrap().items;
        pods.into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect()
    }

    async fn patch_spec(&self, name: &str, spec: serde_json::Value) {
        let patch = Patch::Merge(json!({ "spec": spec }));
        self.api::<RayCluster>()
            .patch(name, &PatchParams::default(), &patch)
            .await
            .unwrap();
    }
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

/// KubeRay's `rayClusterTemplate`: one worker group `small-group`, replicas 3, min 0, max 4.
fn template(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {
                "volumes": [{"name": "shared-mem", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}],
                "containers": [{"name": "ray-head", "image": "rayproject/ray:2.46.0"}]}}},
            "workerGroupSpecs": [{"groupName": "small-group", "replicas": 3, "minReplicas": 0, "maxReplicas": 4,
                "rayStartParams": {}, "template": {"spec": {
                    "volumes": [{"name": "shared-mem", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}],
                    "containers": [{"name": "ray-worker", "image": "rayproject/ray:2.46.0"}]}}}]
        }
    })
}

async fn create(h: &Harness, v: serde_json::Value) -> RayCluster {
    let rc: RayCluster = serde_json::from_value(v).unwrap();
    h.api::<RayCluster>()
        .create(&PostParams::default(), &rc)
        .await
        .unwrap()
}

fn workers(name: &str) -> String {
    format!("ray.io/cluster={name},ray.io/group=small-group")
}

fn head(name: &str) -> String {
    format!("ray.io/cluster={name},ray.io/node-type=head")
}

async fn worker_count(h: &Harness, name: &str, n: usize) -> Vec<Pod> {
    let what = format!("{n} worker pods of {name}");
    eventually(&what, || async {
        let pods = h.pods(&workers(name)).await;
        (pods.len() == n).then_some(pods)
    })
    .await
}

/// The cluster Ready with its current spec observed.
async fn ready_and_settled(h: &Harness, name: &str) -> RayCluster {
    eventually("state ready with the current generation observed", || async {
        let rc = h.cluster(name).await;
        let s = rc.status.as_ref()?;
        (s.state == Some(ClusterState::Ready) && s.observed_generation == rc.metadata.generation)
            .then_some(rc)
    })
    .await
}

/// `Describe("Static RayCluster")`: "Check head service", "Check the number of worker Pods",
/// "Create a head Pod resource with default sidecars", "RayCluster's .status.state should be updated to
/// 'ready' shortly after all Pods are Running" (with `stateTransitionTimes[ready]`), "Delete a worker Pod,
/// and KubeRay should create a new one", "Increase replicas past maxReplicas".
#[test]
fn static_raycluster() {
    scenario(async {
        let h = Harness::start();
        let mut v = template("raycluster-static");
        // The envtest's head template carries a fluentbit sidecar after the Ray container.
        v["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "fluentbit", "image": "fluent/fluent-bit:1.9.6"}));
        create(&h, v).await;
        eventually("the head service", || async {
            h.api::<Service>()
                .get_opt("raycluster-static-head-svc")
                .await
                .unwrap()
        })
        .await;
        worker_count(&h, "raycluster-static", 3).await;
        let heads = eventually("one head pod", || async {
            let p = h.pods(&head("raycluster-static")).await;
            (p.len() == 1).then_some(p)
        })
        .await;
        let containers = &heads[0].spec.as_ref().unwrap().containers;
        assert_eq!(
            containers.len(),
            2,
            "autoscaling off: the Ray container and the sidecar"
        );
        assert_eq!(containers.last().unwrap().name, "fluentbit");

        let rc = ready_and_settled(&h, "raycluster-static").await;
        let times = rc.status.unwrap().state_transition_times.unwrap_or_default();
        assert!(
            times.contains_key(&ClusterState::Ready),
            "stateTransitionTimes[ready] is set"
        );

        let pods = worker_count(&h, "raycluster-static", 3).await;
        let gone = pods[0].name_any();
        h.api::<Pod>()
            .delete(&gone, &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
        eventually("a replacement worker", || async {
            let pods = h.pods(&workers("raycluster-static")).await;
            (pods.len() == 3 && pods.iter().all(|p| p.name_any() != gone)).then_some(())
        })
        .await;

        // replicas 5 > maxReplicas 4: KubeRay creates maxReplicas.
        h.patch_spec("raycluster-static", json!({"workerGroupSpecs": [
            serde_json::to_value(&h.cluster("raycluster-static").await.spec.worker_group_specs.unwrap()[0]).map(|mut g| { g["replicas"] = json!(5); g }).unwrap()
        ]}))
        .await;
        worker_count(&h, "raycluster-static", 4).await;
        // Consistently 4: once the controller has observed the new generation and settled, still 4.
        ready_and_settled(&h, "raycluster-static").await;
        assert_eq!(h.pods(&workers("raycluster-static")).await.len(), 4);
    });
}

/// `Describe("RayCluster with overridden app.kubernetes.io labels")`: "Check the number of head Pods" (the
/// template's `app.kubernetes.io/name` wins), "Check the number of worker Pods", and "RayCluster's
/// .status.state and .status.head.ServiceIP should be updated shortly after all Pods are Running": the
/// default head Service is headless, so `serviceIP` is the head pod's IP (KubeRay's test sets 1.1.1.1
/// on the pod by hand; the node agent assigns one here).
#[test]
fn overridden_app_labels_and_head_service_ip() {
    scenario(async {
        let h = Harness::start();
        let mut v = template("raycluster-overridden-k8s-labels");
        v["spec"]["headGroupSpec"]["template"]["metadata"] =
            json!({"labels": {"app.kubernetes.io/name": "myapp"}});
        create(&h, v).await;
        let name = "raycluster-overridden-k8s-labels";
        worker_count(&h, name, 3).await;
        let rc = ready_and_settled(&h, name).await;
        let heads = h.pods(&head(name)).await;
        assert_eq!(heads.len(), 1);
        assert_eq!(heads[0].labels()["app.kubernetes.io/name"], "myapp");
        let status = rc.status.unwrap();
        assert!(
            status
                .state_transition_times
                .unwrap_or_default()
                .contains_key(&ClusterState::Ready)
        );
        let pod_ip = heads[0].status.as_ref().and_then(|s| s.pod_ip.clone());
        assert!(pod_ip.is_some(), "the node agent gave the head pod an IP");
        let head_info = status.head.unwrap();
        assert_eq!(
            head_info.service_ip, pod_ip,
            "headless head Service: serviceIP is the head pod IP"
        );
        assert_eq!(
            head_info.service_name.as_deref(),
            Some("raycluster-overridden-k8s-labels-head-svc")
        );
    });
}

/// `Describe("RayCluster with autoscaling enabled")`: "Check RoleBinding / Role / ServiceAccount", "Check
/// the number of worker Pods", "Simulate Ray Autoscaler scales down" (replicas 2 + workersToDelete),
/// "Simulate Ray Autoscaler scales up" (replicas 4). Also: the three go with the cluster (owner
/// reference), and the head pod runs as the cluster's ServiceAccount, which the embedded server's
/// ServiceAccount admission would refuse if it were absent.
#[test]
fn raycluster_with_autoscaling_enabled() {
    scenario(async {
        let h = Harness::start();
        let name = "raycluster-autoscaler";
        let mut v = template(name);
        v["spec"]["enableInTreeAutoscaling"] = json!(true);
        let rc = create(&h, v).await;
        let rb = eventually("the autoscaler RoleBinding", || async {
            h.api::<RoleBinding>().get_opt(name).await.unwrap()
        })
        .await;
        let role = eventually("the autoscaler Role", || async {
            h.api::<Role>().get_opt(name).await.unwrap()
        })
        .await;
        let sa = eventually("the autoscaler ServiceAccount", || async {
            h.api::<ServiceAccount>().get_opt(name).await.unwrap()
        })
        .await;
        for owners in [
            &rb.metadata.owner_references,
            &role.metadata.owner_references,
            &sa.metadata.owner_references,
        ] {
            let o = &owners.as_ref().expect("owned")[0];
            assert_eq!(
                (o.kind.as_str(), o.uid.as_str()),
                ("RayCluster", rc.metadata.uid.as_deref().unwrap())
            );
        }
        assert_eq!(rb.role_ref.name, name);
        assert_eq!(rb.subjects.unwrap()[0].name, name);
        assert_eq!(role.rules.unwrap().len(), 3);

        let pods = worker_count(&h, name, 3).await;
        let heads = eventually("the head pod", || async {
            let p = h.pods(&head(name)).await;
            (p.len() == 1).then_some(p)
        })
        .await;
        assert_eq!(
            heads[0].spec.as_ref().unwrap().service_account_name.as_deref(),
            Some(name)
        );

        let victim = pods[0].name_any();
        let mut group =
            serde_json::to_value(&h.cluster(name).await.spec.worker_group_specs.unwrap()[0]).unwrap();
        group["replicas"] = json!(2);
        group["scaleStrategy"] = json!({"workersToDelete": [victim]});
        h.patch_spec(name, json!({"workerGroupSpecs": [group.clone()]}))
            .await;
        let left = worker_count(&h, name, 2).await;
        assert!(
            left.iter().all(|p| p.name_any() != victim),
            "the named worker is the one removed"
        );
        // What the autoscaler does after a scale-down (KubeRay's cleanUpWorkersToDelete), then scale up.
        group["scaleStrategy"] = json!({"workersToDelete": []});
        group["replicas"] = json!(4);
        h.patch_spec(name, json!({"workerGroupSpecs": [group]})).await;
        worker_count(&h, name, 4).await;
    });
}

/// KubeRay `reconcileAutoscalerServiceAccount` (raycluster_controller.go): a head template naming its own
/// ServiceAccount that does not exist gets a Warning `AutoscalerServiceAccountNotFound` event and no pod
/// (the Role and RoleBinding are not reached); once the user creates it, the cluster starts, the
/// RoleBinding binds it, and the operator never created nor owns it.
#[test]
fn a_user_named_service_account_must_exist() {
    scenario(async {
        let h = Harness::start();
        let name = "raycluster-own-sa";
        let mut v = template(name);
        v["spec"]["enableInTreeAutoscaling"] = json!(true);
        v["spec"]["headGroupSpec"]["template"]["spec"]["serviceAccountName"] = json!("my-sa");
        create(&h, v).await;
        let events: Api<Event> = h.api();
        let event = eventually("the AutoscalerServiceAccountNotFound event", || async {
            let list = events.list(&ListParams::default()).await.unwrap().items;
            list.into_iter()
                .find(|e| e.reason.as_deref() == Some("AutoscalerServiceAccountNotFound"))
        })
        .await;
        assert!(
            event
                .note
                .unwrap_or_default()
                .contains("ServiceAccount my-sa is not found")
        );
        assert!(
            h.pods(&format!("ray.io/cluster={name}")).await.is_empty(),
            "no pod without its ServiceAccount"
        );
        assert!(h.api::<Role>().get_opt(name).await.unwrap().is_none());

        let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "my-sa"}})).unwrap();
        h.api::<ServiceAccount>()
            .create(&PostParams::default(), &sa)
            .await
            .unwrap();
        let heads = eventually("the head pod", || async {
            let p = h.pods(&head(name)).await;
            (p.len() == 1).then_some(p)
        })
        .await;
        assert_eq!(
            heads[0].spec.as_ref().unwrap().service_account_name.as_deref(),
            Some("my-sa")
        );
        let rb = eventually("the RoleBinding", || async {
            h.api::<RoleBinding>().get_opt(name).await.unwrap()
        })
        .await;
        assert_eq!(rb.subjects.unwrap()[0].name, "my-sa");
        let sa = h.api::<ServiceAccount>().get("my-sa").await.unwrap();
        assert!(
            sa.metadata.owner_references.is_none(),
            "the user's ServiceAccount stays the user's"
        );
    });
}

/// Kubernetes' ServiceAccount admission, which KubeRay's autoscaler RBAC exists for: a pod naming an
/// absent ServiceAccount is refused (403, the plugin's message); every namespace, including one created
/// now, has `default`, which a pod without a name gets.
#[test]
fn pods_need_their_service_account() {
    scenario(async {
        let h = Harness::start();
        let pod = |sa: Option<&str>| -> Pod {
            let mut v = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
            if let Some(sa) = sa {
                v["spec"]["serviceAccountName"] = json!(sa);
            }
            serde_json::from_value(v).unwrap()
        };
        let err = h
            .api::<Pod>()
            .create(&PostParams::default(), &pod(Some("absent")))
            .await
            .expect_err("refused");
        match err {
            kube::Error::Api(s) => {
                assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
                assert_eq!(
                    s.message,
                    "pods \"p\" is forbidden: error looking up service account default/absent: serviceaccount \"absent\" not found"
                );
            }
            e => panic!("not an API error: {e}"),
        }
        let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(h.client.clone());
        let ns = serde_json::from_value(json!({"metadata": {"name": "ml"}})).unwrap();
        nss.create(&PostParams::default(), &ns).await.unwrap();
        let ml: Api<Pod> = Api::namespaced(h.client.clone(), "ml");
        let created = ml
            .create(&PostParams::default(), &pod(None))
            .await
            .expect("default exists in a new namespace");
        assert_eq!(
            created.spec.unwrap().service_account_name.as_deref(),
            Some("default")
        );
    });
}

/// The controller has reconciled the cluster's current spec (the bounded stand-in for `Consistently`).
async fn observed(h: &Harness, name: &str) {
    eventually("the current generation observed", || async {
        let rc = h.cluster(name).await;
        (rc.status.as_ref()?.observed_generation == rc.metadata.generation).then_some(())
    })
    .await;
}

async fn suspend_first_group(h: &Harness, name: &str) {
    let mut groups = serde_json::to_value(h.cluster(name).await.spec.worker_group_specs.unwrap()).unwrap();
    groups[0]["suspend"] = json!(true);
    h.patch_spec(name, json!({"workerGroupSpecs": groups})).await;
}

/// `Describe("Suspend RayCluster")` / `It("worker group")`: 4 pods, then `suspend: true` on the worker group
/// deletes its workers and keeps the head.
#[test]
fn suspend_worker_group() {
    scenario(async {
        let h = Harness::start();
        let name = "raycluster-suspend-workergroup";
        create(&h, template(name)).await;
        eventually("4 pods", || async {
            (h.pods(&format!("ray.io/cluster={name}")).await.len() == 4).then_some(())
        })
        .await;
        suspend_first_group(&h, name).await;
        worker_count(&h, name, 0).await;
        assert_eq!(h.pods(&head(name)).await.len(), 1);
        assert_eq!(h.pods(&format!("ray.io/cluster={name}")).await.len(), 1);
    });
}

/// `Describe("Suspend RayCluster")` / `It("worker group with Autoscaler enabled")`: the 3 workers and the
/// head stay. Deliberate difference: KubeRay (webhook off) stores the edit and its reconcile refuses it
/// ("cannot be suspended with Autoscaler enabled"); quotagate refuses it at admission, as KubeRay's
/// webhook would, so the invalid spec is never stored.
#[test]
fn suspend_worker_group_with_autoscaler_enabled() {
    scenario(async {
        let h = Harness::start();
        let name = "raycluster-suspend-workergroup-autoscaler";
        let mut v = template(name);
        v["spec"]["enableInTreeAutoscaling"] = json!(true);
        create(&h, v).await;
        eventually("4 pods", || async {
            (h.pods(&format!("ray.io/cluster={name}")).await.len() == 4).then_some(())
        })
        .await;
        let mut groups =
            serde_json::to_value(h.cluster(name).await.spec.worker_group_specs.unwrap()).unwrap();
        groups[0]["suspend"] = json!(true);
        let patch = Patch::Merge(json!({"spec": {"workerGroupSpecs": groups}}));
        let err = h
            .api::<RayCluster>()
            .patch(name, &PatchParams::default(), &patch)
            .await
            .expect_err("refused");
        assert!(
            err.to_string()
                .contains("cannot be suspended with the autoscaler enabled"),
            "{err}"
        );
        observed(&h, name).await;
        assert_eq!(h.pods(&workers(name)).await.len(), 3);
        assert_eq!(h.pods(&head(name)).await.len(), 1);
    });
}

/// `Describe("RayCluster with PodTemplate referencing a different namespace")`: the templates' namespace
/// is ignored; head and workers are created in the RayCluster's namespace.
#[test]
fn pod_template_namespace_is_ignored() {
    scenario(async {
        let h = Harness::start();
        let name = "raycluster-podtemplate-namespace";
        let mut v = template(name);
        v["spec"]["headGroupSpec"]["template"]["metadata"] = json!({"namespace": "not-default"});
        v["spec"]["workerGroupSpecs"][0]["template"]["metadata"] = json!({"namespace": "not-default"});
        create(&h, v).await;
        worker_count(&h, name, 3).await;
        eventually("the head pod", || async {
            (h.pods(&head(name)).await.len() == 1).then_some(())
        })
        .await;
    });
}

/// `Describe("RayCluster without resource request")`: limits only (1 CPU, 1Gi each); "Check DesiredMemory
/// and DesiredCPU": requests default to limits, so 1 head + 3 workers desire 4 CPUs and 4Gi.
#[test]
fn without_resource_requests_desired_resources_come_from_limits() {
    scenario(async {
        let h = Harness::start();
        let name = "no-resource-req";
        let mut v = template(name);
        let limits = json!({"limits": {"cpu": "1", "memory": "1Gi"}});
        v["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"] = limits.clone();
        v["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = limits;
        create(&h, v).await;
        worker_count(&h, name, 3).await;
        let status = ready_and_settled(&h, name).await.status.unwrap();
        assert_eq!(status.desired_cpu.map(|q| q.0).as_deref(), Some("4"));
        assert_eq!(status.desired_memory.map(|q| q.0).as_deref(), Some("4Gi"));
    });
}

/// `Describe("RayCluster with a maximum name")`: a name of the maximum length with a multi-host group
/// (numOfHosts 4: the `-headless` Service) and `ray.io/enable-serve-service` (`-serve-svc`): 12 workers
/// and all three Services, names intact.
#[test]
fn raycluster_with_a_maximum_name() {
    scenario(async {
        let h = Harness::start();
        let name = "r".repeat(quotagate::api::ray::constants::MAX_RAY_CLUSTER_NAME_LENGTH);
        let mut v = template(&name);
        v["spec"]["workerGroupSpecs"][0]["numOfHosts"] = json!(4);
        v["metadata"]["annotations"] = json!({"ray.io/enable-serve-service": "true"});
        create(&h, v).await;
        worker_count(&h, &name, 12).await;
        for suffix in ["-head-svc", "-serve-svc", "-headless"] {
            let svc = format!("{name}{suffix}");
            eventually(&svc, || async { h.api::<Service>().get_opt(&svc).await.unwrap() }).await;
        }
    });
}
