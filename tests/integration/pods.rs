//! Plain Pods and pod groups as Kueue's pod integration admits them, on the embedded cluster with its
//! node agent and the `pod` framework on: a queue-labelled Pod is created gated, waits Pending
//! (`SchedulingGated`) while over quota, is ungated with the flavor's node selector when quota frees,
//! runs, finishes its Workload and gives the quota back; a pod group gets its one Workload only once
//! all its pods exist, and they are admitted, run and finish together.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use quotagate::api::kueue::config::Frameworks;
use quotagate::api::kueue::constants::{condition, label, reason};
use quotagate::api::kueue::{ClusterQueue, ResourceFlavor, Workload, WorkloadPriorityClass};
use quotagate::api::pod as p;
use quotagate::embedded::{EmbeddedServer, QuotagateAdmission};
use quotagate::jobframework::names::NameLength;
use quotagate::jobframework::workload::workload_name_for_job;
use quotagate::jobs::pod::PodJob;

use crate::support::*;

fn frameworks() -> Frameworks {
    Frameworks {
        pod: true,
        ..Frameworks::default()
    }
}

fn pod(
    name: &str,
    cpu: &str,
    command: &[&str],
    group: Option<(&str, i32)>,
    priority_class: Option<&str>,
) -> Pod {
    let mut labels = serde_json::json!({label::QUEUE_NAME: "lq"});
    let mut annotations = serde_json::json!({});
    if let Some((g, n)) = group {
        labels[p::GROUP_NAME_LABEL] = g.into();
        annotations[p::GROUP_TOTAL_COUNT_ANNOTATION] = n.to_string().into();
    }
    if let Some(pc) = priority_class {
        labels[label::PRIORITY_CLASS] = pc.into();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox", "command": command, "resources": {"requests": {"cpu": cpu}}}]}
    }))
    .unwrap()
}

/// The server with the pod webhook, the manager with the pod framework, and the simulated node agent.
async fn cluster(cq: ClusterQueue) -> (Cluster, tokio_util::sync::DropGuard) {
    let server = EmbeddedServer::new(
        &quotagate::api::all_crds(),
        Arc::new(QuotagateAdmission {
            frameworks: frameworks(),
            ..Default::default()
        }),
    );
    let mut c = Cluster::start_on(server, Limits::default().cq("cq", 2000)).await;
    c.restart_manager_with(|o| o.frameworks = frameworks()).await;
    let cancel = tokio_util::sync::CancellationToken::new();
    quotagate::embedded::sim::spawn(
        c.client.clone(),
        &quotagate::embedded::sim::SimConfig {
            gateway: None,
            endpoints: false,
            ..Default::default()
        },
        cancel.clone(),
    );
    let rf: Api<ResourceFlavor> = Api::all(c.client.clone());
    rf.create(
        &PostParams::default(),
        &ResourceFlavor::build("on-demand")
            .node_label("instance", "on-demand")
            .build(),
    )
    .await
    .unwrap();
    c.cluster_queue(with_all_namespaces(cq)).await;
    c.local_queue("lq", "cq").await;
    (c, cancel.drop_guard())
}

fn gated_pending(x: &Pod) -> bool {
    let status = x.status.as_ref();
    p::is_gated(x)
        && status.and_then(|s| s.phase.as_deref()) == Some("Pending")
        && status.and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("SchedulingGated")
            })
        })
}

fn phase(x: &Pod) -> &str {
    x.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

fn workload_of(x: &Pod) -> String {
    workload_name_for_job(&PodJob::new(x.clone()), NameLength::Long).unwrap()
}

/// Kueue: test/integration/singlecluster/controller/jobs/pod/pod_controller_test.go, "Using single pod"
/// / "Should reconcile the single pod with the queue name" (gate, managed label, finalizer; ungated
/// with the flavor's node selector; finished and finalized when it succeeds) and "Pod controller
/// interacting with scheduler" / "Should schedule pods as they fit in their ClusterQueue": the first Pod is ungated
/// with the flavor's node selector; a second that does not fit waits gated (Pending,
/// `SchedulingGated`), and runs once the first finished, having run its `sleep`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_waits_gated_runs_when_admitted_finishes_and_releases_quota() {
    let (c, _sims) = cluster(
        ClusterQueue::build("cq")
            .flavor("on-demand", [("cpu", "1")])
            .build(),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let wls = c.workloads();

    let first = pods
        .create(
            &PostParams::default(),
            &pod("first", "1", &["sleep", "3"], None, None),
        )
        .await
        .unwrap();
    assert!(p::is_gated(&first), "a queue-labelled Pod is created gated");
    assert_eq!(first.metadata.labels.as_ref().unwrap()[p::MANAGED_LABEL], "true");
    assert_eq!(
        first.metadata.finalizers.as_deref(),
        Some(&[p::FINALIZER.to_string()][..])
    );
    let first_wl = workload_of(&first);
    assert!(first_wl.starts_with("pod-first-"), "{first_wl}");
    let running = wait_for(&pods, "first", "ungated and running", |x| {
        !p::is_gated(x) && phase(x) == "Running"
    })
    .await;
    let spec = running.spec.as_ref().unwrap();
    assert_eq!(
        spec.node_selector.as_ref().unwrap()["instance"],
        "on-demand",
        "admission injects the flavor's node labels"
    );
    let wl = wls.get(&first_wl).await.unwrap();
    assert_eq!(
        (
            wl.spec.pod_sets.len(),
            wl.spec.pod_sets[0].name(),
            wl.spec.pod_sets[0].count()
        ),
        (1, "main", 1)
    );

    let second = pods
        .create(
            &PostParams::default(),
            &pod("second", "1", &["sleep", "1"], None, None),
        )
        .await
        .unwrap();
    let second_wl = workload_of(&second);
    let pending = wait_for(&wls, &second_wl, "pending for quota", |w: &Workload| {
        condition(w, condition::QUOTA_RESERVED)
            .is_some_and(|(s, r, _)| s == "False" && r == reason::WAITING_FOR_QUOTA)
    })
    .await;
    let (_, _, message) = condition(&pending, condition::QUOTA_RESERVED).unwrap();
    assert_eq!(
        message,
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, 1 more needed"
    );
    wait_for(&pods, "second", "gated, Pending, SchedulingGated", gated_pending).await;

    // The first runs its seconds and succeeds: its Workload finishes, its finalizer goes, and the
    // second gets the quota.
    wait_for(&pods, "first", "succeeded", |x| phase(x) == "Succeeded").await;
    let finished = wait_for(&wls, &first_wl, "finished", |w: &Workload| w.is_finished()).await;
    assert_eq!(
        condition(&finished, condition::FINISHED).map(|(_, r, _)| r),
        Some("Succeeded".to_string())
    );
    wait_for(&pods, "first", "finalizer removed", |x| {
        x.metadata
            .finalizers
            .as_ref()
            .is_none_or(|f| !f.iter().any(|f| f == p::FINALIZER))
    })
    .await;
    let second = wait_for(&pods, "second", "ungated and running", |x| {
        !p::is_gated(x) && matches!(phase(x), "Running" | "Succeeded")
    })
    .await;
    assert_eq!(
        second.spec.as_ref().unwrap().node_selector.as_ref().unwrap()["instance"],
        "on-demand"
    );
    wait_for(&pods, "second", "succeeded", |x| phase(x) == "Succeeded").await;
    wait_for(&wls, &second_wl, "finished", |w: &Workload| w.is_finished()).await;
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    wait_for(&cqs, "cq", "no quota held", |q| {
        q.status
            .as_ref()
            .is_some_and(|s| s.reserving_workloads == 0 && s.admitted_workloads == 0)
    })
    .await;
    c.quota.assert_safe();
}

/// Kueue: test/integration/singlecluster/controller/jobs/pod/pod_controller_test.go, "Using pod group" /
/// "Should ungate pods when admitted and finalize Pods when succeeded", and Kueue's e2e pod-group case
/// "Should only admit a complete group": with one pod of two there is no Workload and the pod stays
/// gated; the second creates the group's Workload
/// (named after the group, one role counted twice), both are ungated together, run, and the group
/// finishes with "Pods succeeded: 2/2.".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_waits_for_all_its_pods_then_runs_and_finishes_together() {
    let (c, _sims) = cluster(
        ClusterQueue::build("cq")
            .flavor("on-demand", [("cpu", "1")])
            .build(),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let wls = c.workloads();

    let a = pods
        .create(
            &PostParams::default(),
            &pod("a", "500m", &["sleep", "1"], Some(("g", 2)), None),
        )
        .await
        .unwrap();
    assert!(
        a.metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key(p::ROLE_HASH_ANNOTATION),
        "a group's pod gets its role hash"
    );
    wait_for(&pods, "a", "gated, Pending, SchedulingGated", gated_pending).await;
    // Settle time for the group controller to (wrongly) act on an incomplete group.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        wls.get_opt("g").await.unwrap().is_none(),
        "no Workload before the group is complete"
    );
    assert!(p::is_gated(&pods.get("a").await.unwrap()));

    pods.create(
        &PostParams::default(),
        &pod("b", "500m", &["sleep", "1"], Some(("g", 2)), None),
    )
    .await
    .unwrap();
    let wl = wait_for(&wls, "g", "created for the complete group", |_| true).await;
    assert_eq!(wl.spec.pod_sets.len(), 1, "one role");
    assert_eq!(wl.spec.pod_sets[0].count(), 2);
    assert_eq!(
        wl.metadata.owner_references.as_ref().map(Vec::len),
        Some(2),
        "owned by every pod"
    );
    for name in ["a", "b"] {
        let x = wait_for(&pods, name, "ungated", |x| !p::is_gated(x)).await;
        assert_eq!(
            x.spec.as_ref().unwrap().node_selector.as_ref().unwrap()["instance"],
            "on-demand"
        );
    }
    for name in ["a", "b"] {
        wait_for(&pods, name, "succeeded", |x| phase(x) == "Succeeded").await;
    }
    let done = wait_for(&wls, "g", "finished", |w: &Workload| w.is_finished()).await;
    assert_eq!(
        condition(&done, condition::FINISHED).map(|(_, r, m)| (r, m)),
        Some(("Succeeded".to_string(), "Pods succeeded: 2/2.".to_string()))
    );
    for name in ["a", "b"] {
        wait_for(&pods, name, "finalizer removed", |x| {
            x.metadata.finalizers.as_ref().is_none_or(|f| f.is_empty())
        })
        .await;
    }
    let cqs: Api<ClusterQueue> = Api::all(c.client.clone());
    wait_for(&cqs, "cq", "no quota held", |q| {
        q.status
            .as_ref()
            .is_some_and(|s| s.reserving_workloads == 0 && s.admitted_workloads == 0)
    })
    .await;
    c.quota.assert_safe();
}

/// Kueue: test/integration/singlecluster/controller/jobs/pod/pod_controller_test.go, "Using single pod" /
/// "A workload is evicted" / "Should stop the single pod with the queue name", here evicted by the
/// preemption of a higher-priority pod: the running low Pod gets a `TerminationTarget` condition
/// (reason `WorkloadEvictedDueToPreempted`) and a deletion timestamp. As in Kueue's test, a finalizer of
/// the test's own holds the pod to observe that. The quota is given back once the pod is gone (Kueue
/// clears a single pod's reservation at once), and the high Pod then runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_higher_priority_pod_preempts_a_lower_one_which_is_deleted() {
    const HOLD: &str = "kueue.x-k8s.io/integration-test";
    let mut q = ClusterQueue::build("cq")
        .flavor("on-demand", [("cpu", "1")])
        .build();
    q.spec.preemption =
        Some(serde_json::from_value(serde_json::json!({"withinClusterQueue": "LowerPriority"})).unwrap());
    let (c, _sims) = cluster(q).await;
    let wpc: Api<WorkloadPriorityClass> = Api::all(c.client.clone());
    wpc.create(
        &PostParams::default(),
        &quotagate::api::kueue::builders::workload_priority_class("high", 1000),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");

    let mut low = pod("low", "1", &["sleep", "3600"], None, None);
    low.metadata.finalizers = Some(vec![HOLD.to_string()]);
    pods.create(&PostParams::default(), &low).await.unwrap();
    wait_for(&pods, "low", "running", |x| phase(x) == "Running").await;
    pods.create(
        &PostParams::default(),
        &pod("high", "1", &["sleep", "1"], None, Some("high")),
    )
    .await
    .unwrap();
    let stopped = wait_for(&pods, "low", "stopped by Kueue", |x| {
        x.metadata.deletion_timestamp.is_some()
            && x.metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.iter().any(|f| f == p::FINALIZER))
    })
    .await;
    let cond = stopped
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == p::TERMINATION_TARGET))
        .cloned()
        .expect("a TerminationTarget condition");
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_deref()),
        ("True", Some("WorkloadEvictedDueToPreempted"))
    );
    assert!(
        p::is_gated(&pods.get("high").await.unwrap()),
        "no quota for high while low still terminates"
    );

    let api: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    api.patch(
        "low",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    wait_gone(&pods, "low").await;
    wait_for(&pods, "high", "ungated and running", |x| {
        !p::is_gated(x) && matches!(phase(x), "Running" | "Succeeded")
    })
    .await;
    c.quota.assert_safe();
}

/// Kueue: test/integration/singlecluster/controller/jobs/pod/pod_controller_test.go, "Using pod group" /
/// "Should keep the running pod group with the queue name if workload is evicted", its replacement part
/// (without the eviction, and without the `WaitingForReplacementPods` condition quotagate does not
/// write): one pod of the group fails, the other keeps running on the Workload, the replacement is
/// ungated on it and becomes an owner of it, and the group finishes with "Pods succeeded: 2/2.".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_group_keeps_its_workload_when_a_pod_fails_and_is_replaced() {
    let (c, _sims) = cluster(
        ClusterQueue::build("cq")
            .flavor("on-demand", [("cpu", "1")])
            .build(),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let wls = c.workloads();

    pods.create(
        &PostParams::default(),
        &pod(
            "a",
            "500m",
            &["sh", "-c", "sleep 1; exit 1"],
            Some(("g", 2)),
            None,
        ),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &pod("b", "500m", &["sleep", "4"], Some(("g", 2)), None),
    )
    .await
    .unwrap();
    wait_for(&pods, "a", "failed", |x| phase(x) == "Failed").await;
    let wl = wls.get("g").await.unwrap();
    assert!(
        reserved(&wl) && !wl.is_finished(),
        "the group keeps its Workload: {:?}",
        wl.status
    );
    assert_eq!(
        phase(&pods.get("b").await.unwrap()),
        "Running",
        "the other pod is not stopped"
    );

    pods.create(
        &PostParams::default(),
        &pod("a2", "500m", &["sleep", "1"], Some(("g", 2)), None),
    )
    .await
    .unwrap();
    wait_for(&pods, "a2", "ungated", |x| !p::is_gated(x)).await;
    for name in ["a2", "b"] {
        wait_for(&pods, name, "succeeded", |x| phase(x) == "Succeeded").await;
    }
    let done = wait_for(&wls, "g", "finished", |w: &Workload| w.is_finished()).await;
    assert_eq!(
        condition(&done, condition::FINISHED).map(|(_, _, m)| m),
        Some("Pods succeeded: 2/2.".to_string())
    );
    let a2 = pods.get("a2").await.unwrap();
    assert!(
        done.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| Some(&o.uid) == a2.metadata.uid.as_ref()),
        "the replacement owns the Workload"
    );
    c.quota.assert_safe();
}

/// Kueue: test/integration/singlecluster/controller/jobs/pod/pod_controller_test.go, "Using pod group" /
/// "Should keep the running pod group with the queue name if workload is evicted" and "Should set
/// WaitingForReplacementPod workload condition to false after replacement", here evicted by a
/// higher-priority pod's preemption: the group's pods are stopped (`TerminationTarget`,
/// `WorkloadEvictedDueToPreempted`) and deleted, its Workload is evicted (Preempted) and requeued with
/// `WaitingForReplacementPods=True` (reason Preempted), and is not admitted again on the freed quota
/// until replacement pods exist (the stopped pods stay, terminating, until then: they own it); then the condition turns False ("No pods need replacement"), the same
/// Workload is admitted, the replacements run, and the group finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preempted_pod_group_is_evicted_and_waits_for_replacement_pods() {
    let mut q = ClusterQueue::build("cq")
        .flavor("on-demand", [("cpu", "1")])
        .build();
    q.spec.preemption =
        Some(serde_json::from_value(serde_json::json!({"withinClusterQueue": "LowerPriority"})).unwrap());
    let (c, _sims) = cluster(q).await;
    let wpc: Api<WorkloadPriorityClass> = Api::all(c.client.clone());
    wpc.create(
        &PostParams::default(),
        &quotagate::api::kueue::builders::workload_priority_class("high", 1000),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
    let wls = c.workloads();

    for name in ["a", "b"] {
        pods.create(
            &PostParams::default(),
            &pod(name, "500m", &["sleep", "3600"], Some(("g", 2)), None),
        )
        .await
        .unwrap();
    }
    for name in ["a", "b"] {
        wait_for(&pods, name, "running", |x| phase(x) == "Running").await;
    }
    let uid = wls.get("g").await.unwrap().metadata.uid;

    pods.create(
        &PostParams::default(),
        &pod("high", "1", &["sleep", "2"], None, Some("high")),
    )
    .await
    .unwrap();
    for name in ["a", "b"] {
        let stopped = wait_for(&pods, name, "stopped by Kueue", |x| {
            x.metadata.deletion_timestamp.is_some()
        })
        .await;
        let cond = stopped
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == p::TERMINATION_TARGET))
            .cloned();
        assert_eq!(
            cond.map(|c| (c.status, c.reason)),
            Some((
                "True".to_string(),
                Some("WorkloadEvictedDueToPreempted".to_string())
            ))
        );
    }
    let evicted = wait_for(
        &wls,
        "g",
        "evicted, requeued, waiting for replacements",
        |w: &Workload| {
            !reserved(w)
                && condition(w, condition::WAITING_FOR_REPLACEMENT_PODS).is_some_and(|(s, _, _)| s == "True")
        },
    )
    .await;
    assert_eq!(
        condition(&evicted, condition::EVICTED).map(|(s, r, _)| (s, r)),
        Some(("True".to_string(), "Preempted".to_string()))
    );
    let (_, why, message) = condition(&evicted, condition::WAITING_FOR_REPLACEMENT_PODS).unwrap();
    assert_eq!(why, "Preempted", "the eviction's reason: {message}");
    assert_eq!(message, condition(&evicted, condition::EVICTED).unwrap().2);

    // The high pod runs and ends; the quota is free, but the group has no pod to run: not admitted.
    wait_for(&pods, "high", "succeeded", |x| phase(x) == "Succeeded").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let still = wls.get("g").await.unwrap();
    assert!(
        !reserved(&still),
        "a group waiting for replacement pods is not admitted: {:?}",
        still.status
    );

    // Kueue keeps the stopped pods' finalizer (they own the Workload) until they are replaced.
    for name in ["a", "b"] {
        assert!(
            pods.get_opt(name).await.unwrap().is_some(),
            "{name} is kept, terminating, until replaced"
        );
    }
    for name in ["a2", "b2"] {
        pods.create(
            &PostParams::default(),
            &pod(name, "500m", &["sleep", "1"], Some(("g", 2)), None),
        )
        .await
        .unwrap();
    }
    for name in ["a", "b"] {
        wait_gone(&pods, name).await;
    }
    wait_for(&wls, "g", "admitted again", |w: &Workload| reserved(w)).await;
    for name in ["a2", "b2"] {
        wait_for(&pods, name, "succeeded", |x| phase(x) == "Succeeded").await;
    }
    let done = wait_for(&wls, "g", "finished", |w: &Workload| w.is_finished()).await;
    assert_eq!(done.metadata.uid, uid, "the same Workload, admitted again");
    assert_eq!(
        condition(&done, condition::WAITING_FOR_REPLACEMENT_PODS),
        Some((
            "False".to_string(),
            "PodsReady".to_string(),
            "No pods need replacement".to_string()
        ))
    );
    assert_eq!(
        condition(&done, condition::FINISHED).map(|(_, _, m)| m),
        Some("Pods succeeded: 2/2.".to_string())
    );
    c.quota.assert_safe();
}
