//! The job framework with RayCluster: one Workload per queue-labelled cluster, started on
//! admission with the flavor's node labels on its pods, and deleting the cluster frees its quota.

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use quotagate::api::kueue::constants::label;
use quotagate::api::kueue::{ClusterQueue, ResourceFlavor};
use quotagate::api::ray::RayCluster;
use quotagate::embedded::AdmissionHook;

use crate::support::*;

fn cluster(name: &str) -> RayCluster {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "default", "labels": {label::QUEUE_NAME: "lq"}},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.9.0", "resources": {"requests": {"cpu": "1"}}}]}}},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": 2, "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.9.0", "resources": {"requests": {"cpu": "1"}}}]}}}]
        }
    }))
    .unwrap()
}

fn owned_by<'a>(
    wls: &'a [quotagate::api::kueue::Workload],
    rc: &RayCluster,
) -> Vec<&'a quotagate::api::kueue::Workload> {
    wls.iter()
        .filter(|w| {
            w.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| Some(&o.uid) == rc.metadata.uid.as_ref())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raycluster_gets_one_workload_runs_when_admitted_and_frees_quota_when_deleted() {
    let c = Cluster::start_with_ray_operator(Limits::default().cq("cq", 4000)).await;
    // The flavor has a node label, which admission puts on the pods (not into the templates).
    let rf: Api<ResourceFlavor> = Api::all(c.client.clone());
    rf.create(
        &PostParams::default(),
        &ResourceFlavor::build("default")
            .node_label("pool", "blue")
            .build(),
    )
    .await
    .unwrap();
    c.cluster_queue(with_all_namespaces(cq_with("cq", "4").build()))
        .await;
    c.local_queue("lq", "cq").await;
    let rcs: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
    let first = rcs
        .create(&PostParams::default(), &cluster("first"))
        .await
        .unwrap();
    assert_eq!(
        first.spec.suspend,
        Some(true),
        "a queue-labelled cluster is created suspended"
    );
    let started = wait_for(&rcs, "first", "running", |r| r.spec.suspend == Some(false)).await;
    // Issue 58: admission changes nothing in the spec but `suspend`. Kueue also merges each podset's
    // node selector, tolerations and `kueue.x-k8s.io/podset` label into the templates; a write into
    // `workerGroupSpecs`, an atomic list, would take the whole list from its owner, and the user's
    // unchanged `kubectl apply --server-side` would then conflict.
    let mut as_created = first.spec.clone();
    as_created.suspend = Some(false);
    assert_eq!(started.spec, as_created, "admission wrote into the spec");
    // The pods carry what Kueue's templates would: the flavor's node selector and their podset.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.client.clone(), "default");
    let pods = loop {
        let list = pods
            .list(&ListParams::default().labels("ray.io/cluster=first"))
            .await
            .unwrap()
            .items;
        if list.len() == 3 {
            break list;
        }
        c.quota.wait_any_event().await;
    };
    for p in &pods {
        let sel = p
            .spec
            .as_ref()
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default();
        assert_eq!(
            sel.get("pool").map(String::as_str),
            Some("blue"),
            "{}",
            p.name_any()
        );
        let head = p.labels().get("ray.io/node-type").map(String::as_str) == Some("head");
        assert_eq!(
            p.labels().get(label::PODSET).map(String::as_str),
            Some(if head { "head" } else { "workers" }),
            "{}",
            p.name_any()
        );
    }
    let first = started;
    let wls = c.workloads();
    let all = wls.list(&Default::default()).await.unwrap().items;
    let mine = owned_by(&all, &first);
    assert_eq!(mine.len(), 1, "exactly one workload per job");
    let wl = mine[0];
    assert!(
        wl.metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("raycluster-first-"),
        "{:?}",
        wl.metadata.name
    );
    let counts: Vec<(String, i32)> = wl
        .spec
        .pod_sets
        .iter()
        .map(|p| (p.name.clone().unwrap(), p.count.unwrap()))
        .collect();
    assert_eq!(counts, vec![("head".to_string(), 1), ("workers".to_string(), 2)]);

    // A second cluster does not fit next to the first and stays suspended.
    rcs.create(&PostParams::default(), &cluster("second"))
        .await
        .unwrap();
    let second = wait_for(&rcs, "second", "has a workload", |r| r.metadata.uid.is_some()).await;
    let second_wl = loop {
        let all = wls.list(&Default::default()).await.unwrap().items;
        if let Some(w) = owned_by(&all, &second).first() {
            break w.metadata.name.clone().unwrap();
        }
        c.quota.wait_any_event().await;
    };
    wait_for(&wls, &second_wl, "waiting for quota", |w| {
        condition(w, "QuotaReserved").is_some_and(|c| c.1 == "WaitingForQuota")
    })
    .await;
    assert_eq!(rcs.get("second").await.unwrap().spec.suspend, Some(true));

    rcs.delete("first", &DeleteParams::default()).await.unwrap();
    wait_for(&rcs, "second", "running after the first was deleted", |r| {
        r.spec.suspend == Some(false)
    })
    .await;
    c.quota.assert_safe();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempted_raycluster_is_suspended_restored_and_requeued() {
    let c = Cluster::start(Limits::default().cq("cq", 4000)).await;
    let rf: Api<ResourceFlavor> = Api::all(c.client.clone());
    rf.create(
        &PostParams::default(),
        &ResourceFlavor::build("default")
            .node_label("pool", "blue")
            .build(),
    )
    .await
    .unwrap();
    let mut q = with_all_namespaces(cq_with("cq", "4").build());
    q.spec.preemption =
        Some(serde_json::from_value(serde_json::json!({"withinClusterQueue": "LowerPriority"})).unwrap());
    c.cluster_queue(q).await;
    c.local_queue("lq", "cq").await;
    let wpc: Api<quotagate::api::kueue::WorkloadPriorityClass> = Api::all(c.client.clone());
    wpc.create(
        &PostParams::default(),
        &quotagate::api::kueue::builders::workload_priority_class("high", 1000),
    )
    .await
    .unwrap();
    let rcs: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
    rcs.create(&PostParams::default(), &cluster("low")).await.unwrap();
    wait_for(&rcs, "low", "running", |r| r.spec.suspend == Some(false)).await;
    let mut high = cluster("high");
    high.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(label::PRIORITY_CLASS.to_string(), "high".to_string());
    rcs.create(&PostParams::default(), &high).await.unwrap();
    // The low-priority cluster is stopped; its templates never carried the flavor's node selector
    // (issue 58: it goes on the pods), so none is left there.
    let low = wait_for(&rcs, "low", "suspended by preemption", |r| {
        r.spec.suspend == Some(true)
    })
    .await;
    let sel = low
        .spec
        .head_group_spec
        .template
        .spec
        .as_ref()
        .unwrap()
        .node_selector
        .clone()
        .unwrap_or_default();
    assert!(!sel.contains_key("pool"), "{sel:?}");
    wait_for(&rcs, "high", "running", |r| r.spec.suspend == Some(false)).await;
    let wls = c.workloads();
    let all = wls.list(&Default::default()).await.unwrap().items;
    let high = rcs.get("high").await.unwrap();
    assert_eq!(owned_by(&all, &high)[0].spec.priority, Some(1000));
    let low_wl = owned_by(&all, &low)[0].metadata.name.clone().unwrap();
    wait_for(&wls, &low_wl, "requeued", |w| {
        !reserved(w) && condition(w, "Requeued").is_some_and(|c| c.0 == "True" && c.1 == "Preempted")
    })
    .await;
    c.quota.assert_safe();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elastic_raycluster_grows_through_workload_slices() {
    let c = Cluster::start(Limits::default().cq("cq", 5000)).await;
    c.simple("cq", "lq", "5").await;
    let rcs: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
    let mut rc = cluster("el");
    rc.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(label::ELASTIC_JOB.to_string(), "true".to_string());
    rcs.create(&PostParams::default(), &rc).await.unwrap();
    let rc = wait_for(&rcs, "el", "running", |r| r.spec.suspend == Some(false)).await;
    let wls = c.workloads();
    let first = owned_by(&wls.list(&Default::default()).await.unwrap().items, &rc)[0]
        .metadata
        .name
        .clone()
        .unwrap();

    // 2 -> 3 workers: the 1-cpu delta fits, a new slice replaces the first one.
    let scale = |n: i32| {
        serde_json::json!({"spec": {"workerGroupSpecs": [{"groupName": "workers", "replicas": n, "minReplicas": 0, "maxReplicas": 8, "rayStartParams": {},
        "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.9.0", "resources": {"requests": {"cpu": "1"}}}]}}}]}})
    };
    rcs.patch(
        "el",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&scale(3)),
    )
    .await
    .unwrap();
    let old = wait_for(&wls, &first, "replaced", |w| {
        condition(w, "Finished").is_some_and(|c| c.0 == "True")
    })
    .await;
    assert_eq!(condition(&old, "Finished").unwrap().1, "WorkloadSliceReplaced");
    c.quota.wait_reserved("cq", 1).await;
    let all = wls.list(&Default::default()).await.unwrap().items;
    let live: Vec<_> = owned_by(&all, &rc)
        .into_iter()
        .filter(|w| !w.is_finished())
        .collect();
    assert_eq!(live.len(), 1);
    let second = live[0].metadata.name.clone().unwrap();
    assert_eq!(
        live[0].annotations()[label::WORKLOAD_SLICE_REPLACEMENT_FOR],
        format!("default/{first}")
    );
    assert!(reserved(live[0]));

    // 3 -> 5 workers needs 6 cpu, more than the ClusterQueue can ever give: the new slice is
    // refused, the running one keeps its quota.
    rcs.patch(
        "el",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&scale(5)),
    )
    .await
    .unwrap();
    let third = loop {
        let all = wls.list(&Default::default()).await.unwrap().items;
        if let Some(w) = owned_by(&all, &rc).into_iter().find(|w| {
            w.annotations().get(label::WORKLOAD_SLICE_REPLACEMENT_FOR) == Some(&format!("default/{second}"))
        }) {
            break w.metadata.name.clone().unwrap();
        }
        c.quota.wait_any_event().await;
    };
    wait_for(&wls, &third, "exceeds the quota", |w| {
        condition(w, "QuotaReserved").is_some_and(|c| c.1 == "ExceedsMaxQuota")
    })
    .await;
    assert!(
        reserved(&wls.get(&second).await.unwrap()),
        "the running slice keeps its reservation"
    );
    c.quota.assert_safe();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elastic_raycluster_scaled_down_frees_quota_in_place() {
    let c = Cluster::start(Limits::default().cq("cq", 5000)).await;
    c.simple("cq", "lq", "5").await;
    let rcs: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
    let workers = |n: i32| {
        serde_json::json!([{"groupName": "workers", "replicas": n, "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.9.0", "resources": {"requests": {"cpu": "1"}}}]}}}])
    };
    let mut rc = cluster("el");
    rc.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(label::ELASTIC_JOB.to_string(), "true".to_string());
    rc.spec.worker_group_specs = serde_json::from_value(workers(3)).unwrap();
    rcs.create(&PostParams::default(), &rc).await.unwrap();
    // Head 1 cpu + 3 workers: 4 of 5 cpu.
    let rc = wait_for(&rcs, "el", "running", |r| r.spec.suspend == Some(false)).await;
    let wls = c.workloads();
    let name = owned_by(&wls.list(&Default::default()).await.unwrap().items, &rc)[0].name_any();
    c.workload("waiting", "lq", 0, "3").await;
    wait_for(&wls, "waiting", "waiting for quota", |w| {
        condition(w, "QuotaReserved").is_some_and(|c| c.0 == "False")
    })
    .await;

    rcs.patch(
        "el",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&serde_json::json!({"spec": {"workerGroupSpecs": workers(1)}})),
    )
    .await
    .unwrap();
    // The same workload asks for 1 worker; its admission stays as written (immutable in Kueue).
    let shrunk = wait_for(&wls, &name, "spec shrunk to 1 worker", |w| {
        w.spec
            .pod_sets
            .iter()
            .any(|p| p.name.as_deref() == Some("workers") && p.count == Some(1))
    })
    .await;
    assert!(
        reserved(&shrunk),
        "the same workload keeps its (smaller) reservation"
    );
    wait_for(&wls, "waiting", "admitted into the freed quota", reserved).await;
    // ClusterQueue usage: 2 cpu of the shrunk cluster + 3 of the newly admitted workload.
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    wait_for(&cqs, "cq", "usage of 5 cpu", |q| {
        q.status.as_ref().is_some_and(|s| {
            s.flavors_reservation.iter().any(|f| {
                f.resources
                    .iter()
                    .any(|r| r.name == "cpu" && r.total.as_ref().is_some_and(|t| t.0 == "5"))
            })
        })
    })
    .await;
    let all = wls.list(&Default::default()).await.unwrap().items;
    assert_eq!(owned_by(&all, &rc).len(), 1, "no new slice for a scale-down");
    c.quota.assert_safe();
}

/// Lets RayCluster creates through unchecked and judges everything else as quotagate does: a cluster
/// stored before quotagate's webhook was installed (or while it was down with `failurePolicy: Ignore`).
struct ClustersStoredBeforeTheWebhook;

impl quotagate::embedded::AdmissionHook for ClustersStoredBeforeTheWebhook {
    fn admit(
        &self,
        op: quotagate::embedded::Operation,
        resource: &quotagate::embedded::registry::ResourceInfo,
        new: &mut serde_json::Value,
        old: Option<&serde_json::Value>,
    ) -> Result<(), Vec<quotagate::api::validation::FieldError>> {
        if op == quotagate::embedded::Operation::Create && new["kind"] == "RayCluster" {
            return Ok(());
        }
        quotagate::embedded::QuotagateAdmission::default().admit(op, resource, new, old)
    }
}

/// Issue 13 item 6: a queue-managed RayCluster whose Workload the API server refuses (19 worker
/// groups: more podsets than Kueue's 18) says why on its own status (`QuotaGated=True`,
/// `WorkloadRefused`) and in a Warning event, runs nothing, and once fixed gets its Workload and
/// loses the condition. Kueue's webhook refuses such a cluster outright (at most 7 worker groups), so
/// it is created through the webhook only to see that refusal; the one the job controller meets was
/// stored before the webhook existed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raycluster_whose_workload_is_refused_says_why_on_its_status() {
    let server = quotagate::embedded::EmbeddedServer::new(
        &quotagate::api::all_crds(),
        std::sync::Arc::new(ClustersStoredBeforeTheWebhook),
    );
    let c = Cluster::start_on(server, Limits::default().cq("cq", 40000)).await;
    c.simple("cq", "lq", "40").await;
    let group = |i: usize| {
        serde_json::json!({"groupName": format!("g{i}"), "replicas": 1, "minReplicas": 0, "maxReplicas": 1, "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.9.0",
                "resources": {"requests": {"cpu": "100m"}}}]}}})
    };
    let mut rc = cluster("many");
    rc.spec.worker_group_specs = Some(
        (0..19)
            .map(|i| serde_json::from_value(group(i)).unwrap())
            .collect(),
    );
    let rcs: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
    // Through quotagate's admission: Kueue's RayCluster webhook rule.
    let mut through = serde_json::to_value(&rc).unwrap();
    let registry = quotagate::embedded::Registry::new(&quotagate::api::all_crds());
    let info = registry.find("ray.io", "v1", "rayclusters").unwrap();
    let errs = quotagate::embedded::QuotagateAdmission::default()
        .admit(quotagate::embedded::Operation::Create, &info, &mut through, None)
        .unwrap_err();
    assert!(
        errs.iter()
            .any(|e| e.field == "spec.workerGroupSpecs" && e.message.contains("must have at most 7 items")),
        "{errs:?}"
    );
    // Stored unchecked, suspended as the webhook would have left it.
    rc.spec.suspend = Some(true);
    rcs.create(&PostParams::default(), &rc).await.unwrap();
    let refused = |r: &RayCluster| {
        r.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| {
                c.type_ == "QuotaGated"
                    && c.status == "True"
                    && c.reason == "WorkloadRefused"
                    && c.message.contains("podSets")
            })
    };
    let seen = wait_for(&rcs, "many", "the refusal on the RayCluster's status", refused).await;
    assert_eq!(seen.spec.suspend, Some(true), "nothing runs without a Workload");
    assert!(
        c.workloads()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(c.client.clone(), "default");
    let warned = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .any(|e| {
            e.reason.as_deref() == Some("FailedCreateWorkload")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("many")
        });
    assert!(warned, "a Warning event says it too");

    let fixed = serde_json::json!({"spec": {"workerGroupSpecs": [group(0)]}});
    rcs.patch("many", &PatchParams::default(), &Patch::Merge(&fixed))
        .await
        .unwrap();
    wait_for(
        &rcs,
        "many",
        "the refusal cleared once the Workload exists",
        |r| !refused(r) && r.spec.suspend == Some(false),
    )
    .await;
    assert_eq!(
        c.workloads()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

/// Kueue `test/integration/singlecluster/controller/jobs/raycluster/raycluster_controller_test.go`,
/// "Should reconcile RayClusters", "checking the workload is created with workload priority class": a
/// RayCluster whose pods name a PriorityClass (value 10) gets a Workload with that priority and a
/// `priorityClassRef` to the PriorityClass. Then, as Kueue resolves a job naming no class, a cluster
/// without one takes the global-default PriorityClass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raycluster_takes_its_pods_priority_class_or_the_global_default() {
    use k8s_openapi::api::scheduling::v1::PriorityClass;

    let c = Cluster::start(Limits::default().cq("cq", 4000)).await;
    c.simple("cq", "lq", "4").await;
    let pcs: Api<PriorityClass> = Api::all(c.client.clone());
    let pc = |name: &str, value: i32, default: bool| -> PriorityClass {
        serde_json::from_value(
            serde_json::json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "globalDefault": default}),
        )
        .unwrap()
    };
    let created = pcs
        .create(&PostParams::default(), &pc("test-priority-class", 10, false))
        .await
        .unwrap();
    assert_eq!(
        created.preemption_policy.as_deref(),
        Some("PreemptLowerPriority"),
        "defaulted as the API server does"
    );

    let mut rc = cluster("prio");
    rc.spec
        .head_group_spec
        .template
        .spec
        .as_mut()
        .unwrap()
        .priority_class_name = Some("test-priority-class".into());
    for g in rc.spec.worker_group_specs.as_mut().unwrap() {
        g.template.spec.as_mut().unwrap().priority_class_name = Some("test-priority-class".into());
    }
    let rcs: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
    let rc = rcs.create(&PostParams::default(), &rc).await.unwrap();
    let wl = loop {
        let all = c.workloads().list(&Default::default()).await.unwrap().items;
        if let Some(w) = owned_by(&all, &rc).first() {
            break (*w).clone();
        }
        c.quota.wait_any_event().await;
    };
    assert_eq!(wl.spec.priority, Some(10));
    let r = wl.spec.priority_class_ref.as_ref().expect("a priorityClassRef");
    assert_eq!(
        serde_json::to_value(r).unwrap(),
        serde_json::json!({"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "test-priority-class"})
    );

    pcs.create(&PostParams::default(), &pc("cluster-default", 7, true))
        .await
        .unwrap();
    let plain = rcs
        .create(&PostParams::default(), &cluster("plain"))
        .await
        .unwrap();
    let wl = loop {
        let all = c.workloads().list(&Default::default()).await.unwrap().items;
        if let Some(w) = owned_by(&all, &plain).first() {
            break (*w).clone();
        }
        c.quota.wait_any_event().await;
    };
    assert_eq!(wl.spec.priority, Some(7));
    assert_eq!(
        wl.spec.priority_class_ref.as_ref().map(|r| r.name.as_str()),
        Some("cluster-default")
    );

    // The API server's own rules for PriorityClasses.
    let too_high = pcs
        .create(&PostParams::default(), &pc("too-high", 1_000_000_001, false))
        .await
        .unwrap_err();
    assert!(
        too_high
            .to_string()
            .contains("maximum allowed value of a user defined priority is 1000000000"),
        "{too_high}"
    );
    let system = pcs
        .create(&PostParams::default(), &pc("system-mine", 5, false))
        .await
        .unwrap_err();
    assert!(
        system.to_string().contains("reserved for system use only"),
        "{system}"
    );
}

/// Kueue `test/integration/singlecluster/controller/jobs/raycluster/raycluster_controller_test.go`,
/// "Should reconcile RayClusters", the steps a job controller (not a webhook) decides: a second Workload
/// the cluster owns that does not match it is deleted and the first kept; admission unsuspends the
/// cluster with each podset's flavor (head `on-demand`, workers `spot`; Kueue writes it into the templates
/// as a node selector, quotagate onto the pods only, issue 58) and the event
/// `Started` "Admitted by clusterQueue cluster-queue"; one more worker suspends it, removes the selectors
/// and deletes the Workload ("Deleted not matching Workload: <ns>/<name>"); a Workload with the new count
/// takes its name, and its admission unsuspends the cluster with the selectors again. Kueue sets the
/// admissions by hand; here the scheduler makes them, so the ClusterQueue is sized for that split
/// (on-demand holds only the head).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_should_reconcile_rayclusters_and_stop_one_that_no_longer_matches() {
    const KEY: &str = "cloud.provider.com/instance";
    let c = Cluster::start(Limits::default().cq("cluster-queue", 6000)).await;
    let rf: Api<ResourceFlavor> = Api::all(c.client.clone());
    for f in ["on-demand", "spot"] {
        rf.create(
            &PostParams::default(),
            &ResourceFlavor::build(f).node_label(KEY, f).build(),
        )
        .await
        .unwrap();
    }
    let cq: ClusterQueue = serde_json::from_value(serde_json::json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cluster-queue"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
            {"name": "on-demand", "resources": [{"name": "cpu", "nominalQuota": "1"}, {"name": "memory", "nominalQuota": "64Gi"}]},
            {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": "5"}, {"name": "memory", "nominalQuota": "64Gi"}]}]}]}
    }))
    .unwrap();
    c.cluster_queue(cq).await;
    c.local_queue("test-queue", "cluster-queue").await;
    let rcs: Api<RayCluster> = Api::namespaced(c.client.clone(), "default");
    let mut job = cluster("test-job");
    job.labels_mut()
        .insert(label::QUEUE_NAME.into(), "test-queue".into());
    let job = rcs.create(&PostParams::default(), &job).await.unwrap();
    let wls = c.workloads();
    let first = loop {
        let all = wls.list(&Default::default()).await.unwrap().items;
        if let Some(w) = owned_by(&all, &job).first() {
            break (*w).clone();
        }
        c.quota.wait_any_event().await;
    };
    let wl_name = first.name_any();

    // "checking a second non-matching workload is deleted"
    let mut second =
        quotagate::api::kueue::Workload::build("raycluster-second-workload-1a2b3", "default").build();
    second.spec = first.spec.clone();
    second.spec.pod_sets[0].count = Some(second.spec.pod_sets[0].count() + 1);
    second.metadata.owner_references = first.metadata.owner_references.clone();
    // Kueue builds it with no labels and finds a job's Workloads by their controller owner; quotagate
    // lists them by the `kueue.x-k8s.io/job-uid` label Kueue puts on every Workload it makes (one
    // indexed read per pass instead of the namespace's), so the stray one carries it.
    second.metadata.labels = first.metadata.labels.clone();
    wls.create(&PostParams::default(), &second).await.unwrap();
    wait_gone(&wls, "raycluster-second-workload-1a2b3").await;
    assert!(wls.get(&wl_name).await.is_ok(), "the matching Workload is kept");

    // "checking the job is unsuspended when workload is assigned"
    let selector = |rc: &RayCluster, worker: bool| {
        let t = if worker {
            &rc.spec.worker_group_specs.as_ref().unwrap()[0].template
        } else {
            &rc.spec.head_group_spec.template
        };
        t.spec
            .as_ref()
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default()
    };
    let started = wait_for(&rcs, "test-job", "unsuspended", |r| r.spec.suspend == Some(false)).await;
    // Kueue writes each podset's flavor into its template as a node selector; quotagate puts it on the
    // pods only (issue 58: a write into the atomic `workerGroupSpecs` takes it from the user), so the
    // flavors are read from the admission and the templates stay as written.
    let flavors = |w: &quotagate::api::kueue::Workload| -> Vec<(String, String)> {
        w.status
            .as_ref()
            .and_then(|s| s.admission.as_ref())
            .map(|a| {
                a.pod_set_assignments
                    .iter()
                    .map(|p| (p.name.clone(), p.flavors.get("cpu").cloned().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let by_podset = vec![
        ("head".to_string(), "on-demand".to_string()),
        ("workers".to_string(), "spot".to_string()),
    ];
    assert!(selector(&started, false).is_empty() && selector(&started, true).is_empty());
    let admitted = wls.get(&wl_name).await.unwrap();
    assert_eq!(flavors(&admitted), by_podset);
    assert!(reserved(&admitted));
    wait_event(
        &c,
        "test-job",
        "Started",
        "Admitted by clusterQueue cluster-queue",
    )
    .await;

    // "checking the job gets suspended when parallelism changes and the added node selectors are removed"
    let patch =
        serde_json::json!([{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}]);
    rcs.patch(
        "test-job",
        &PatchParams::default(),
        &Patch::Json::<()>(serde_json::from_value(patch).unwrap()),
    )
    .await
    .unwrap();
    wait_for(
        &rcs,
        "test-job",
        "suspended without the injected selectors",
        |r| r.spec.suspend == Some(true) && selector(r, true).is_empty(),
    )
    .await;
    wait_event(
        &c,
        "test-job",
        "DeletedWorkload",
        &format!("Deleted not matching Workload: default/{wl_name}"),
    )
    .await;

    // "checking the workload is updated with new count", then "... unsuspended and selectors added when
    // workload is assigned again": the new Workload takes the same name, as Kueue names it.
    let again = wait_for(&wls, &wl_name, "the Workload with the new count", |w| {
        w.spec.pod_sets.get(1).and_then(|p| p.count) == Some(3)
    })
    .await;
    assert_eq!(again.metadata.owner_references, first.metadata.owner_references);
    let restarted = wait_for(&rcs, "test-job", "unsuspended again", |r| {
        r.spec.suspend == Some(false)
    })
    .await;
    assert!(selector(&restarted, false).is_empty() && selector(&restarted, true).is_empty());
    let admitted = wls.get(&wl_name).await.unwrap();
    assert_eq!(flavors(&admitted), by_podset);
    assert!(reserved(&admitted));
    c.quota.assert_safe();
}

/// Waits for an event on RayCluster `name` with this reason and message.
async fn wait_event(c: &Cluster, name: &str, reason: &str, message: &str) {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(c.client.clone(), "default");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let events = api.list(&ListParams::default()).await.unwrap().items;
        let seen = events.iter().any(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
                && e.note.as_deref() == Some(message)
        });
        if seen {
            return;
        }
        let all: Vec<_> = events
            .iter()
            .map(|e| (e.reason.clone(), e.note.clone()))
            .collect();
        assert!(
            tokio::time::Instant::now() < deadline,
            "no event {reason} {message:?} on {name}: {all:?}"
        );
        let _ = tokio::time::timeout(std::time::Duration::from_millis(100), c.quota.wait_any_event()).await;
    }
}
