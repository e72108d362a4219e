//! The clusters scenario (issue 48): queue-managed RayClusters of their own (plain, elastic, with
//! `upgradeStrategy: Recreate`) in one ClusterQueue beside batch work, their worker replicas, worker
//! requests and elastic annotation edited at random, named scale-downs as Ray's autoscaler does them,
//! hand-made resumes of a waiting cluster, quota changes and faults. The watcher checks I1 (quota) and
//! I2 (no cluster has more pods in a group than its latest quota-holding Workload covers with the
//! cluster's own requests) on every event; once the faults stop and the quota is ample, every cluster
//! must run on one admitted Workload equal to its spec, with exactly the pods that spec asks for.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};

use super::world::{ClusterShape, NS, Op, Queue, World, queue_names};
use crate::api::kueue::Workload;
use crate::api::kueue::constants::label;
use crate::api::ray::RayCluster;

/// Worker CPU requests a cluster's edits choose from.
pub const WORKER_CPUS: [&str; 3] = ["500m", "1", "2"];
/// Most workers an edit asks for (the group's `maxReplicas`).
pub const MAX_WORKERS: i32 = 4;

pub(super) fn cluster_name(i: usize) -> String {
    format!("rc-{i}")
}

/// The seed's clusters world and actions.
pub(super) fn generate(seed: u64) -> (World, Vec<Op>) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x0c1a_57e5_0c1a_57e5);
    let clusters: Vec<ClusterShape> = (0..rng.random_range(1..=3))
        .map(|_| ClusterShape {
            head_cpu: ["500m", "1"][rng.random_range(0..2)],
            worker_cpu: WORKER_CPUS[rng.random_range(0..2)],
            replicas: rng.random_range(0..=2),
            elastic: rng.random_bool(0.4),
            recreate: rng.random_bool(0.3),
        })
        .collect();
    let quota = rng.random_range(3..=6) * 1000;
    let world = World {
        queues: vec![Queue {
            quota,
            borrowing_limit: None,
            lending_limit: None,
        }],
        preemption: super::world::Preemption::on(rng.random_bool(0.5)),
        services: Vec::new(),
        clusters,
        background: (0..rng.random_range(0..=2))
            .map(|_| (0, rng.random_range(1..=3) * 500))
            .collect(),
        keep_quota: false,
        no_serving_gap: false,
        settle_at_least: Vec::new(),
    };
    let n = world.clusters.len();
    let list = (0..rng.random_range(8..=14))
        .map(|_| match rng.random_range(0..91) {
            0..=29 => Op::ClusterReplicas(rng.random_range(0..n), rng.random_range(0..=MAX_WORKERS)),
            30..=41 => Op::ClusterCpu(
                rng.random_range(0..n),
                WORKER_CPUS[rng.random_range(0..WORKER_CPUS.len())],
            ),
            42..=47 => Op::ClusterElastic(rng.random_range(0..n), rng.random_bool(0.5)),
            48..=53 => Op::ClusterScaleDown(rng.random_range(0..n)),
            54..=57 => Op::ClusterTamper(rng.random_range(0..n)),
            58..=63 => Op::Quota(0, quota + rng.random_range(0..=4) * 1000),
            64..=66 => Op::QuotaCut(0, rng.random_range(2..=4) * 1000),
            67..=71 => Op::Urgent(0, rng.random_range(1..=3) * 1000),
            72..=75 => Op::Finish,
            76..=78 => Op::RestartManager,
            79..=83 => Op::WriteFault {
                plural: ["workloads", "rayclusters", "pods"][rng.random_range(0..3)],
                nth: rng.random_range(1..=4),
                conflict: rng.random_bool(0.5),
            },
            84..=86 => Op::Watches {
                expire: rng.random_bool(0.5),
            },
            87..=88 => Op::StopQueue(0),
            _ => Op::ResumeQueue(0),
        })
        .collect();
    (world, list)
}

/// The RayCluster of `s` on the first LocalQueue: 1Gi per pod, workers in group `workers`.
pub(super) fn cluster(name: &str, s: &ClusterShape) -> Result<RayCluster, serde_json::Error> {
    let res = |cpu: &str| json!({"requests": {"cpu": cpu, "memory": "1Gi"}});
    let image = "rayproject/ray:2.46.0";
    let mut annotations = serde_json::Map::new();
    if s.elastic {
        annotations.insert(label::ELASTIC_JOB.into(), json!("true"));
    }
    let mut spec = json!({
        "rayVersion": "2.46.0",
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head", "image": image, "resources": res(s.head_cpu)}]}}},
        "workerGroupSpecs": [{"groupName": "workers", "replicas": s.replicas, "minReplicas": 0, "maxReplicas": MAX_WORKERS, "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-worker", "image": image, "resources": res(s.worker_cpu)}]}}}]
    });
    if s.recreate {
        spec["upgradeStrategy"] = json!({"type": "Recreate"});
    }
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": name, "namespace": NS, "labels": {label::QUEUE_NAME: queue_names(0).1}, "annotations": annotations},
        "spec": spec
    }))
}

/// Applies a cluster edit of `op` to `shape`'s cluster through the API, as a user or Ray's autoscaler
/// would; `shape` follows what was written. An edit the webhook refuses (422) is the user's answer
/// and changes nothing.
pub(super) async fn edit(
    api: &Api<RayCluster>,
    pods: &Api<Pod>,
    name: &str,
    op: &Op,
    shape: &mut ClusterShape,
) -> Result<(), kube::Error> {
    let pp = PatchParams::default();
    let json_patch = |v: serde_json::Value| -> Result<Patch<()>, kube::Error> {
        serde_json::from_value(v)
            .map(Patch::Json)
            .map_err(kube::Error::SerdeError)
    };
    let written = match op {
        Op::ClusterReplicas(_, n) => {
            let p = json_patch(
                json!([{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": n}]),
            )?;
            api.patch(name, &pp, &p).await.map(|_| shape.replicas = *n)
        }
        Op::ClusterCpu(_, cpu) => {
            let path = "/spec/workerGroupSpecs/0/template/spec/containers/0/resources/requests/cpu";
            api.patch(
                name,
                &pp,
                &json_patch(json!([{"op": "replace", "path": path, "value": cpu}]))?,
            )
            .await
            .map(|_| shape.worker_cpu = cpu)
        }
        Op::ClusterElastic(_, on) => {
            let value = if *on { json!("true") } else { json!(null) };
            let p = json!({"metadata": {"annotations": {label::ELASTIC_JOB: value}}});
            api.patch(name, &pp, &Patch::Merge(&p))
                .await
                .map(|_| shape.elastic = *on)
        }
        Op::ClusterScaleDown(_) => {
            let sel = format!("ray.io/cluster={name},ray.io/node-type=worker");
            let workers = pods.list(&ListParams::default().labels(&sel)).await?.items;
            let Some(victim) = workers
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .map(ResourceExt::name_any)
                .min()
            else {
                return Ok(());
            };
            let rc = api.get(name).await?;
            let now = rc
                .spec
                .worker_group_specs
                .as_ref()
                .and_then(|g| g.first())
                .and_then(|g| g.replicas)
                .unwrap_or(0);
            let to = (now - 1).max(0);
            let p = json_patch(json!([
                {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": to},
                {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": {"workersToDelete": [victim]}}
            ]))?;
            api.patch(name, &pp, &p).await.map(|_| shape.replicas = to)
        }
        Op::ClusterTamper(_) => api
            .patch(name, &pp, &Patch::Merge(&json!({"spec": {"suspend": false}})))
            .await
            .map(|_| ()),
        _ => Ok(()),
    };
    match written {
        Err(kube::Error::Api(ae)) if ae.code == 422 => Ok(()),
        other => other,
    }
}

/// Once settled in ample quota: every cluster of `shapes` runs unsuspended on exactly one live
/// Workload, admitted, whose podsets are its spec (head 1, workers `replicas` at `worker_cpu`), with
/// exactly that many Running pods and none terminating.
pub(super) fn converged(
    shapes: &[ClusterShape],
    clusters: &[RayCluster],
    pods: &[Pod],
    wls: &[Workload],
) -> Result<(), String> {
    for (i, shape) in shapes.iter().enumerate() {
        let n = cluster_name(i);
        let rc = clusters
            .iter()
            .find(|c| c.name_any() == n)
            .ok_or_else(|| format!("RayCluster {n} is gone"))?;
        if rc.spec.suspend != Some(false) {
            return Err(format!("RayCluster {n} is still suspended"));
        }
        let mine: Vec<&Pod> = pods
            .iter()
            .filter(|p| p.labels().get("ray.io/cluster") == Some(&n))
            .collect();
        let running = |head: bool| {
            mine.iter()
                .filter(|p| (p.labels().get("ray.io/node-type").map(String::as_str) == Some("head")) == head)
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count()
        };
        let want = usize::try_from(shape.replicas).unwrap_or(0);
        if (running(true), running(false), mine.len()) != (1, want, 1 + want) {
            return Err(format!(
                "RayCluster {n} runs head {} and {} workers of {} pods; its spec asks for 1 and {want}",
                running(true),
                running(false),
                mine.len()
            ));
        }
        let uid = rc.metadata.uid.clone().unwrap_or_default();
        let live: Vec<&Workload> = wls
            .iter()
            .filter(|w| {
                w.owner_references().iter().any(|o| o.uid == uid)
                    && !w.is_finished()
                    && w.metadata.deletion_timestamp.is_none()
            })
            .collect();
        let [w] = live.as_slice() else {
            return Err(format!(
                "RayCluster {n} has {} live Workloads: {:?}",
                live.len(),
                live.iter().map(|w| w.name_any()).collect::<Vec<_>>()
            ));
        };
        let counts: Vec<i32> = w.spec.pod_sets.iter().map(|p| p.count.unwrap_or(1)).collect();
        let cpu = w
            .spec
            .pod_sets
            .get(1)
            .and_then(|p| p.template.spec.as_ref())
            .and_then(|s| s.containers.first())
            .and_then(|c| c.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("cpu"))
            .map(|q| q.0.clone());
        if !w.is_admitted() || counts != [1, shape.replicas] || cpu.as_deref() != Some(shape.worker_cpu) {
            return Err(format!(
                "RayCluster {n}'s Workload {} holds {counts:?} at {cpu:?} (admitted {}); its spec is {shape:?}",
                w.name_any(),
                w.is_admitted()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_draw_every_edit_and_build_valid_clusters() {
        let runs: Vec<(World, Vec<Op>)> = (0..200).map(generate).collect();
        let ops: Vec<&Op> = runs.iter().flat_map(|(_, l)| l).collect();
        let count = |f: fn(&Op) -> bool| ops.iter().filter(|o| f(o)).count();
        assert!(count(|o| matches!(o, Op::ClusterReplicas(..))) > 200);
        assert!(count(|o| matches!(o, Op::ClusterCpu(..))) > 50);
        assert!(count(|o| matches!(o, Op::ClusterElastic(..))) > 20);
        assert!(count(|o| matches!(o, Op::ClusterScaleDown(..))) > 20);
        assert!(count(|o| matches!(o, Op::ClusterTamper(..))) > 10);
        for (w, list) in &runs {
            assert!(w.services.is_empty() && !w.clusters.is_empty());
            let n = w.clusters.len();
            assert!(list.iter().all(|o| match o {
                Op::ClusterReplicas(i, _)
                | Op::ClusterCpu(i, _)
                | Op::ClusterElastic(i, _)
                | Op::ClusterScaleDown(i)
                | Op::ClusterTamper(i) => *i < n,
                _ => true,
            }));
            for (i, s) in w.clusters.iter().enumerate() {
                let rc = cluster(&cluster_name(i), s).unwrap();
                let mut v = serde_json::to_value(&rc).unwrap();
                assert_eq!(
                    crate::api::on_write::admit(crate::api::on_write::Operation::Create, &mut v, None),
                    Ok(()),
                    "{s:?}"
                );
            }
        }
        assert!(runs.iter().any(|(w, _)| w.clusters.iter().any(|c| c.elastic)));
        assert!(runs.iter().any(|(w, _)| w.clusters.iter().any(|c| c.recreate)));
    }
}
