//! The hostile scenario (issue 44): one or two queue-managed services whose upgrades start with the
//! quota cut below one step, then every edit the report made while an upgrade waited, in random order
//! and between faults: hand resumes of the gated child, its gate annotation removed, a forged
//! `QuotaGated=False`, its waiting slice deleted, the active cluster grown and shrunk, and the edits the
//! webhook must refuse (queue or origin label removed, ownerReferences removed, `managedBy` set). The
//! run settles in the quota the world was sized with (every service at steady state plus the largest
//! upgrade's extra, as `plan` sizes it, with any hand-grown serving cluster taken back), so every
//! upgrade must complete there; and all along the watcher's liveness check holds: wanted pods that no
//! slice covers have a slice waiting for them within `STALL_BOUND`.

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::world::{HEAD_CPUS, NS, Op, Queue, Shape, VERSIONS, World, name, sizes};
use crate::api::kueue::Workload;
use crate::api::kueue::constants::label;
use crate::api::ray::constants::ANNOTATION_ADMISSION_GATED;
use crate::api::ray::{RayCluster, RayService};

/// The edits the webhook refuses on a service's child, by `Op::Refused`'s index.
pub const REFUSED: [(&str, &str); 4] = [
    (
        "remove the queue label",
        r#"[{"op":"remove","path":"/metadata/labels/kueue.x-k8s.io~1queue-name"}]"#,
    ),
    (
        "remove the origin label",
        r#"[{"op":"remove","path":"/metadata/labels/ray.io~1originated-from-crd"}]"#,
    ),
    (
        "remove the ownerReferences",
        r#"[{"op":"remove","path":"/metadata/ownerReferences"}]"#,
    ),
    (
        "set managedBy",
        r#"[{"op":"add","path":"/spec/managedBy","value":"example.com/other"}]"#,
    ),
];

/// The seed's hostile world and actions.
pub(super) fn generate(seed: u64) -> Result<(World, Vec<Op>), String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x4057_11e4_4057_11e4);
    let n = rng.random_range(1..=2);
    let services: Vec<Shape> = (0..n)
        .map(|_| Shape {
            head_cpu: HEAD_CPUS[rng.random_range(0..2)],
            workers: rng.random_range(1..=2),
            version: VERSIONS[rng.random_range(0..2)],
            queue: 0,
            incremental: rng.random_bool(0.6).then(|| {
                // KubeRay requires stepSizePercent <= maxSurgePercent.
                let surge = [50, 100][rng.random_range(0..2)];
                (if surge == 50 { 25 } else { 50 }, surge)
            }),
            priority: None,
        })
        .collect();
    let (mut steady, mut extra) = (0, 0);
    for (i, s) in services.iter().enumerate() {
        let (st, pk) = sizes(i, s)?;
        steady += st;
        extra = extra.max(pk - st);
    }
    let quota = steady + extra + rng.random_range(0..=1) * 500;
    let world = World {
        queues: vec![Queue {
            quota,
            borrowing_limit: None,
            lending_limit: None,
        }],
        preemption: super::world::Preemption::on(rng.random_bool(0.5)),
        services,
        clusters: Vec::new(),
        background: Vec::new(),
        keep_quota: true,
        no_serving_gap: true,
        settle_at_least: Vec::new(),
    };
    // Below one step: every upgrade starts and waits.
    let mut list = vec![Op::QuotaCut(0, steady)];
    list.extend((0..n).map(|i| Op::Version(i, VERSIONS[rng.random_range(2..4)])));
    let mut hostile: Vec<Op> = (0..rng.random_range(4..=9))
        .map(|_| {
            let i = rng.random_range(0..n);
            match rng.random_range(0..20) {
                0..=2 => Op::Tamper(i),
                3..=5 => Op::Ungate(i),
                6..=7 => Op::ForgeGated(i),
                8..=10 => Op::DeleteSlice(i),
                // Never to zero: a user who empties the serving cluster takes it down (I8 is on).
                11..=13 => Op::GrowActive(i, rng.random_range(1..=3)),
                14..=16 => Op::Refused(i, rng.random_range(0..REFUSED.len())),
                17 => Op::RestartManager,
                18 => Op::Watches {
                    expire: rng.random_bool(0.5),
                },
                _ => Op::WriteFault {
                    plural: ["workloads", "rayclusters", "rayservices"][rng.random_range(0..3)],
                    nth: rng.random_range(1..=3),
                    conflict: rng.random_bool(0.5),
                },
            }
        })
        .collect();
    list.append(&mut hostile);
    // Sometimes the quota comes back before the run settles, sometimes only at the end.
    if rng.random_bool(0.5) {
        let at = rng.random_range(n + 1..=list.len());
        list.insert(at, Op::Quota(0, quota));
    }
    Ok((world, list))
}

/// A JSON patch of these edits' own (always well formed).
fn json_patch(p: &str) -> Option<Patch<()>> {
    serde_json::from_str(p).ok().map(Patch::Json)
}

/// Makes hostile `op` on service `i`. `Ok(Some(why))`: an edit the webhook must refuse was taken.
pub(super) async fn edit(client: &kube::Client, op: &Op, i: usize) -> Result<Option<String>, kube::Error> {
    let services: Api<RayService> = Api::namespaced(client.clone(), NS);
    let clusters: Api<RayCluster> = Api::namespaced(client.clone(), NS);
    let Some(rs) = services.get_opt(&name(i)).await? else {
        return Ok(None);
    };
    let st = rs.status.as_ref();
    let pending = st
        .and_then(|s| s.pending_service_status.as_ref())
        .and_then(|s| s.ray_cluster_name.clone())
        .filter(|n| !n.is_empty());
    let active = st
        .and_then(|s| s.active_service_status.as_ref())
        .and_then(|s| s.ray_cluster_name.clone())
        .filter(|n| !n.is_empty());
    let pp = PatchParams::default();
    // Each answer the server may give is fine unless said otherwise: the watcher checks that no pod
    // runs unadmitted and that the upgrade still completes.
    match op {
        Op::Ungate(_) => {
            if let Some(p) = pending {
                let drop_gate = json!({"metadata": {"annotations": {ANNOTATION_ADMISSION_GATED: null}}});
                let _ = clusters.patch(&p, &pp, &Patch::Merge(&drop_gate)).await;
                let _ = clusters
                    .patch(&p, &pp, &Patch::Merge(&json!({"spec": {"suspend": false}})))
                    .await;
            }
        }
        Op::ForgeGated(_) => {
            if let Some(p) = pending {
                let forged = json!({"status": {"conditions": [{"type": "QuotaGated", "status": "False", "reason": "Forged",
                    "message": "forged by a user", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
                let _ = clusters.patch_status(&p, &pp, &Patch::Merge(&forged)).await;
            }
        }
        Op::DeleteSlice(_) => {
            let uid = rs.uid().unwrap_or_default();
            let wls: Api<Workload> = Api::namespaced(client.clone(), NS);
            let mine = wls.list(&Default::default()).await?.items;
            let waiting = mine.iter().find(|w| {
                w.labels().get(label::JOB_UID) == Some(&uid) && !w.has_quota_reservation() && !w.is_finished()
            });
            if let Some(w) = waiting {
                // Only the slice as it was listed, still waiting: one admitted since is no longer the
                // waiting slice this edit is about (seed 512 deleted an admitted successor).
                let preconditions = kube::api::Preconditions {
                    resource_version: w.resource_version(),
                    uid: w.uid(),
                };
                let _ = wls
                    .delete(
                        &w.name_any(),
                        &DeleteParams {
                            preconditions: Some(preconditions),
                            ..Default::default()
                        },
                    )
                    .await;
            }
        }
        Op::GrowActive(_, n) => {
            let p = format!(r#"[{{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":{n}}}]"#);
            if let (Some(a), Some(patch)) = (active, json_patch(&p)) {
                let _ = clusters.patch(&a, &pp, &patch).await;
            }
        }
        Op::Refused(_, k) => {
            // On the gated child: what would let it out of the queue, or out of the service.
            let (what, p) = REFUSED[*k % REFUSED.len()];
            if let (Some(c), Some(patch)) = (pending, json_patch(p))
                && clusters.patch(&c, &pp, &patch).await.is_ok()
            {
                return Ok(Some(format!(
                    "the webhook took a hostile edit of RayCluster {c}: {what}"
                )));
            }
        }
        _ => {}
    }
    Ok(None)
}

/// Service `i`'s active cluster back to at most `workers` replicas (a user undoing `Op::GrowActive`).
pub(super) async fn shrink_active(client: &kube::Client, i: usize, workers: i32) -> Result<(), kube::Error> {
    let services: Api<RayService> = Api::namespaced(client.clone(), NS);
    let clusters: Api<RayCluster> = Api::namespaced(client.clone(), NS);
    let Some(rs) = services.get_opt(&name(i)).await? else {
        return Ok(());
    };
    let active = rs
        .status
        .as_ref()
        .and_then(|s| s.active_service_status.as_ref())
        .and_then(|s| s.ray_cluster_name.clone());
    let Some(rc) = active.filter(|n| !n.is_empty()) else {
        return Ok(());
    };
    let Some(current) = clusters.get_opt(&rc).await? else {
        return Ok(());
    };
    let replicas = current
        .spec
        .worker_group_specs
        .as_ref()
        .and_then(|g| g.first())
        .and_then(|g| g.replicas);
    if replicas.is_some_and(|r| r > workers) {
        let p =
            format!(r#"[{{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":{workers}}}]"#);
        if let Some(patch) = json_patch(&p) {
            clusters.patch(&rc, &PatchParams::default(), &patch).await?;
        }
    }
    Ok(())
}
