//! Issue 35 item 5: batch Jobs and a RayService share one GPU ClusterQueue (`nvidia.com/gpu`), as a
//! platform team runs training beside serving. The service's upgrade waits behind its gate while a
//! training Job holds the GPUs; the Job finishing opens the gate and the upgrade completes; a
//! higher-priority Job preempts a lower one (suspended, requeued), never the production service; and the
//! invariant watcher (I1–I6) runs on every event throughout. No peer runs this: Kueue admits a
//! RayService whole and KubeRay has no quota.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, Patch, PatchParams, PostParams};
use quotagate::api::kueue::constants::{condition, label};
use quotagate::api::kueue::{ClusterQueue, Workload, WorkloadPriorityClass};
use quotagate::api::ray::RayService;
use serde_json::json;

use super::gated::{Scenario, active, pending, poll, ready};
use super::invariants::Invariants;
use super::support::*;

const NS: &str = "default";
const GPU: &str = "nvidia.com/gpu";

/// A training Job of one pod asking `gpus` GPUs, running `sleep secs`, at `priority_class`.
fn training(name: &str, gpus: &str, secs: u32, priority_class: &str) -> Job {
    let res = json!({"cpu": "1", "memory": "1Gi", GPU: gpus});
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {label::QUEUE_NAME: "lq", label::PRIORITY_CLASS: priority_class}},
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "train", "image": "busybox", "command": ["sleep", secs.to_string()],
            "resources": {"requests": res, "limits": {GPU: gpus}}}]}}}
    }))
    .unwrap()
}

/// The serving RayService: a 1-CPU head and one worker with 2 GPUs, WorkloadPriorityClass `prod`.
fn llm(version: &str) -> RayService {
    let mut rs = super::gated::service("llm", "1", version);
    rs.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(label::PRIORITY_CLASS.into(), "prod".into());
    let worker = &mut rs.spec.ray_cluster_config.worker_group_specs.as_mut().unwrap()[0];
    let c = &mut worker.template.spec.as_mut().unwrap().containers[0];
    c.resources = Some(
        serde_json::from_value(
            json!({"requests": {"cpu": "1", "memory": "1Gi", GPU: "2"}, "limits": {GPU: "2"}}),
        )
        .unwrap(),
    );
    rs
}

fn gpus_reserved(cq: &ClusterQueue) -> i64 {
    cq.status
        .iter()
        .flat_map(|s| s.flavors_reservation.iter())
        .flat_map(|f| f.resources.iter())
        .filter(|r| r.name == GPU)
        .map(|r| r.total.as_ref().map_or(0, |q| q.0.parse::<i64>().unwrap_or(0)))
        .sum()
}

fn job_active(j: &Job) -> i32 {
    j.status.as_ref().and_then(|s| s.active).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_jobs_and_a_rayservice_share_a_gpu_queue() {
    let c = Cluster::start_with_ray(Limits::default().cq("gpu", 20000)).await;
    let inv = Invariants::start(c.client.clone());
    c.flavor("a100").await;
    let mut q = ClusterQueue::build("gpu")
        .flavor("a100", [("cpu", "20"), ("memory", "64Gi"), (GPU, "4")])
        .build();
    q.spec.preemption = Some(serde_json::from_value(json!({"withinClusterQueue": "LowerPriority"})).unwrap());
    c.cluster_queue(with_all_namespaces(q)).await;
    c.local_queue("lq", "gpu").await;
    let wpcs: Api<WorkloadPriorityClass> = Api::all(c.client.clone());
    for (name, value) in [("prod", 1000), ("high", 500), ("low", 10)] {
        wpcs.create(
            &PostParams::default(),
            &quotagate::api::kueue::builders::workload_priority_class(name, value),
        )
        .await
        .unwrap();
    }
    let s = Scenario { c, inv };
    let jobs: Api<Job> = Api::namespaced(s.c.client.clone(), NS);
    let cqs: Api<ClusterQueue> = Api::all(s.c.client.clone());
    let gpus = || async { gpus_reserved(&cqs.get("gpu").await.unwrap()) };

    // The service serves on 2 of the 4 GPUs; a training Job of the same priority takes the other 2
    // (one of lower priority the upgrade's slice would preempt, as `contention` shows).
    let old = s.serving(llm("2.46.0")).await;
    poll("the service's 2 GPUs reserved", || async {
        (gpus().await == 2).then_some(())
    })
    .await;
    jobs.create(&PostParams::default(), &training("train", "2", 15, "prod"))
        .await
        .unwrap();
    wait_for(&jobs, "train", "training", |j| job_active(j) == 1).await;
    assert_eq!(gpus().await, 4);

    // The upgrade's new cluster needs 2 more GPUs: it waits behind its gate, with no pod, while the
    // old cluster serves.
    s.services()
        .patch(
            "llm",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"rayClusterConfig": {"rayVersion": "2.47.0"}}})),
        )
        .await
        .unwrap();
    let rs = s
        .wait_rs("llm", "a gated pending cluster", |r| pending(r).is_some())
        .await;
    let new = pending(&rs).unwrap();
    let gated = wait_for(&s.clusters(), &new, "the gate closed for want of GPUs", |rc| {
        rc.status
            .as_ref()
            .and_then(|st| st.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "QuotaGated" && c.status == "True"))
    })
    .await;
    assert_eq!(
        gated.spec.suspend,
        Some(true),
        "the gated cluster is held suspended"
    );
    assert_eq!(
        job_active(&jobs.get("train").await.unwrap()),
        1,
        "the gate closed while the Job held the GPUs"
    );
    assert!(
        ready(&s.services().get("llm").await.unwrap()),
        "the old cluster serves while the upgrade waits"
    );
    assert!(
        s.pods_of(&new).await.is_empty(),
        "no pod of the new cluster before its slice is admitted"
    );

    // The Job finishes: its GPUs go to the upgrade, which completes; the old cluster's go back.
    wait_for(&jobs, "train", "complete", |j| {
        j.status.as_ref().and_then(|st| st.succeeded) == Some(1)
    })
    .await;
    s.wait_rs("llm", "the new cluster promoted", |r| {
        active(r).as_deref() == Some(new.as_str()) && pending(r).is_none() && ready(r)
    })
    .await;
    s.wait_gone(&old).await;
    poll("the service back at 2 GPUs", || async {
        (gpus().await == 2).then_some(())
    })
    .await;

    // Two GPUs free: a low-priority Job takes them; a high-priority one preempts it, not the service.
    let low = jobs
        .create(&PostParams::default(), &training("batch-low", "2", 3600, "low"))
        .await
        .unwrap();
    wait_for(&jobs, "batch-low", "running", |j| job_active(j) == 1).await;
    jobs.create(&PostParams::default(), &training("batch-high", "2", 3600, "high"))
        .await
        .unwrap();
    wait_for(&jobs, "batch-high", "running", |j| job_active(j) == 1).await;
    wait_for(&jobs, "batch-low", "suspended by the preemption", |j| {
        j.spec.as_ref().unwrap().suspend == Some(true) && job_active(j) == 0
    })
    .await;
    let low_uid = low.metadata.uid.clone().unwrap();
    let wls = s.c.workloads();
    poll(
        "the low Job's Workload evicted as Preempted and waiting again",
        || async {
            let list = wls.list(&Default::default()).await.unwrap().items;
            list.into_iter()
                .find(|w: &Workload| {
                    w.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.uid == low_uid)
                })
                .filter(|w| {
                    !w.has_quota_reservation()
                        && condition(w, condition::EVICTED)
                            .is_some_and(|(st, r, _)| st == "True" && r == "Preempted")
                })
                .map(|_| ())
        },
    )
    .await;
    let rs = s.services().get("llm").await.unwrap();
    assert!(
        ready(&rs) && active(&rs).as_deref() == Some(new.as_str()),
        "the production service was not the victim"
    );
    assert_eq!(gpus().await, 4);
    tokio::time::sleep(Duration::from_millis(500)).await;
    s.inv.assert_clean();
}
