//! One run: the seed's world on a fresh embedded cluster, its actions applied one by one with the
//! invariant watcher checking on every event, then the liveness checks once the faults stop.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use rand::Rng;
use serde_json::json;
use tokio::time::Instant;

use crate::api::kueue::constants::label::JOB_UID;
use crate::api::kueue::{ClusterQueue, Workload};
use crate::api::ray::{RayCluster, RayService};
use crate::embedded::WriteMatch;
use crate::embedded::sim::node::FAIL_ANNOTATION;

use super::Failure;
use super::clusters::{cluster, cluster_name, edit};
use super::env::{Env, resource_groups};
use super::invariants::Invariants;
use super::jitter::Timing;
use super::world::{
    ClusterShape, HEAD_CPUS, NS, Op, Queue, Shape, VERSIONS, World, class_value, name, queue_names,
    serve_config, service,
};

/// Quota (milli-CPU) at the end, when every service must fit.
const AMPLE: i64 = 64_000;
/// How long the world has to converge once the faults stop.
const LIVENESS: Duration = Duration::from_secs(60);

struct Run {
    env: Env,
    inv: Invariants,
    shapes: Vec<Option<Shape>>,
    /// A deleted service's last shape, to create it again on the same queue with the same strategy.
    kept: Vec<Option<Shape>>,
    /// Plain workloads still there, oldest first.
    plain: Vec<String>,
    next_plain: usize,
    /// Each ClusterQueue's CPU quota now (milli), and the world's queues for their borrowing and
    /// lending limits.
    quotas: Vec<i64>,
    queues: Vec<Queue>,
    /// Services whose Serve config is broken now.
    broken: Vec<bool>,
    /// Managers started after the first (each replica gets its own identity on the Lease).
    managers: u32,
    /// Settle in the world's quota, not an ample one (`World::keep_quota`), raised to
    /// `World::settle_at_least`.
    keep_quota: bool,
    settle_at_least: Vec<i64>,
    /// The queue-managed RayClusters of their own, as last written.
    clusters: Vec<ClusterShape>,
    /// Edits the webhook took that it must refuse (`Op::Refused`).
    taken: Vec<String>,
    /// Services whose active cluster a user grew by hand (`Op::GrowActive`).
    grown: Vec<usize>,
}

/// Retries a user's write a few times (users retry an injected 500 or a conflict); a 404 means the
/// object went away meanwhile, which is the user's answer too.
macro_rules! retry {
    ($what:expr, $e:expr) => {{
        let mut tries = 0;
        loop {
            match $e.await {
                Ok(_) => break Ok(()),
                Err(kube::Error::Api(ae)) if ae.code == 404 => break Ok(()),
                Err(e) if tries < 5 => {
                    tries += 1;
                    tracing::debug!("chaos: user write failed ({e}), retrying");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => break Err(format!("{}: a user write kept failing: {e}", $what)),
            }
        }
    }};
}

impl Run {
    fn services(&self) -> Api<RayService> {
        Api::namespaced(self.env.client.clone(), NS)
    }

    fn clusters(&self) -> Api<RayCluster> {
        Api::namespaced(self.env.client.clone(), NS)
    }

    fn workloads(&self) -> Api<Workload> {
        Api::namespaced(self.env.client.clone(), NS)
    }

    fn cqs(&self) -> Api<ClusterQueue> {
        Api::all(self.env.client.clone())
    }

    async fn set_quota(&self, queue: usize, milli: i64) -> Result<ClusterQueue, kube::Error> {
        // A cut below the lending limit lowers it in the same write (Kueue rejects lending more than the
        // nominal quota); a later raise lends the world's limit again.
        let q = &self.queues[queue];
        let patch =
            json!({"spec": {"resourceGroups": resource_groups(milli, q.borrowing_limit, q.lent(milli))?}});
        self.cqs()
            .patch(
                queue_names(queue).0,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
    }

    async fn plain_workload(
        &self,
        name: &str,
        queue: usize,
        priority: i32,
        milli: i64,
    ) -> Result<Workload, kube::Error> {
        let cpu = format!("{milli}m");
        let wl = Workload::build(name, NS)
            .queue(queue_names(queue).1)
            .priority(priority)
            .podset("main", 1, [("cpu", cpu.as_str())])
            .build();
        self.workloads().create(&PostParams::default(), &wl).await
    }

    async fn class_workload(
        &self,
        name: &str,
        queue: usize,
        class: &str,
        milli: i64,
    ) -> Result<Workload, kube::Error> {
        let cpu = format!("{milli}m");
        let wl = Workload::build(name, NS)
            .queue(queue_names(queue).1)
            .priority_class(class, class_value(Some(class)))
            .podset("main", 1, [("cpu", cpu.as_str())])
            .build();
        self.workloads().create(&PostParams::default(), &wl).await
    }

    /// Writes service `i`'s Serve config, broken or not, if it is not so already.
    async fn set_serve(&mut self, i: usize, broken: bool) -> Result<(), String> {
        let Some(shape) = self.shapes[i].as_ref() else {
            return Ok(());
        };
        if self.broken[i] != broken {
            self.broken[i] = broken;
            let p = json!({"spec": {"serveConfigV2": serve_config(shape, broken)}});
            retry!(
                format!("serve config of {}", name(i)),
                self.services()
                    .patch(&name(i), &PatchParams::default(), &Patch::Merge(&p))
            )?;
        }
        Ok(())
    }

    async fn set_stop(&self, queue: usize, stop: bool) -> Result<ClusterQueue, kube::Error> {
        let policy = if stop { json!("Hold") } else { json!(null) };
        self.cqs()
            .patch(
                queue_names(queue).0,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"stopPolicy": policy}})),
            )
            .await
    }

    /// Makes one action of the run, as a user (or a fault) would.
    async fn apply(&mut self, op: &Op) -> Result<(), String> {
        let services = self.services();
        let pp = PatchParams::default();
        match op {
            Op::Version(i, v) => {
                if let Some(shape) = self.shapes[*i].as_mut() {
                    shape.version = v;
                    let p = json!({"spec": {"rayClusterConfig": {"rayVersion": v}}});
                    retry!(op, services.patch(&name(*i), &pp, &Patch::Merge(&p)))?;
                }
            }
            Op::Workers(i, _) | Op::HeadCpu(i, _) => self.resize_service(op, *i).await?,
            Op::Quota(q, milli) | Op::QuotaCut(q, milli) => {
                let raise = matches!(op, Op::Quota(..));
                let now = self.quotas[*q];
                if (raise && *milli > now) || (!raise && *milli < now) {
                    self.quotas[*q] = *milli;
                    retry!(op, self.set_quota(*q, *milli))?;
                }
            }
            Op::Urgent(q, milli) => {
                let n = format!("urgent-{}", self.next_plain);
                self.next_plain += 1;
                self.plain.push(n.clone());
                retry!(op, self.plain_workload(&n, *q, 1000, *milli))?;
            }
            Op::MidUpgrade { queue, milli, class } => {
                self.until_an_upgrade_runs(Duration::from_secs(10)).await;
                self.apply_work(*queue, *milli, class, op).await?;
            }
            Op::Work { queue, milli, class } => self.apply_work(*queue, *milli, class, op).await?,
            Op::Finish => {
                if !self.plain.is_empty() {
                    let n = self.plain.remove(0);
                    retry!(op, self.workloads().delete(&n, &DeleteParams::default()))?;
                }
            }
            Op::StopQueue(q) | Op::ResumeQueue(q) => {
                retry!(op, self.set_stop(*q, matches!(op, Op::StopQueue(_))))?;
            }
            Op::DeleteOrRecreate(i) => self.delete_or_recreate(op, *i).await?,
            Op::BreakServe(i) => self.set_serve(*i, true).await?,
            Op::FixServe(i) => self.set_serve(*i, false).await?,
            Op::Tamper(i) => self.tamper(*i).await,
            Op::RestartManager => {
                self.managers += 1;
                self.env.restart_manager(&format!("m{}", self.managers)).await
            }
            Op::LeaderChange => {
                self.managers += 1;
                self.env.leader_change(&format!("m{}", self.managers)).await
            }
            Op::WriteFault {
                plural,
                nth,
                conflict,
            } => {
                let m = WriteMatch {
                    plural: Some((*plural).into()),
                    ..Default::default()
                };
                let faults = &self.env.server.store.faults;
                if *conflict {
                    faults.fail_nth_write_409(m, *nth);
                } else {
                    faults.fail_nth_write_500(m, *nth);
                }
            }
            Op::Watches { expire } => {
                let store = &self.env.server.store;
                if *expire {
                    store.expire_all()
                } else {
                    store.close_watches()
                }
            }
            Op::DashboardsDown | Op::DashboardsBack => {
                for url in self.env.sim.cluster_urls() {
                    self.env.sim.set_reachable(&url, *op == Op::DashboardsBack);
                }
            }
            Op::ClusterReplicas(i, _)
            | Op::ClusterCpu(i, _)
            | Op::ClusterElastic(i, _)
            | Op::ClusterScaleDown(i)
            | Op::ClusterTamper(i) => {
                let (api, pods) = (
                    self.clusters(),
                    Api::<Pod>::namespaced(self.env.client.clone(), NS),
                );
                let name = cluster_name(*i);
                let Some(shape) = self.clusters.get_mut(*i) else {
                    return Ok(());
                };
                retry!(op, edit(&api, &pods, &name, op, shape))?;
            }
            Op::PodsFail(i) => self.fail_pods(*i).await?,
            Op::Ungate(i)
            | Op::ForgeGated(i)
            | Op::DeleteSlice(i)
            | Op::GrowActive(i, _)
            | Op::Refused(i, _) => {
                if matches!(op, Op::GrowActive(..)) && !self.grown.contains(i) {
                    self.grown.push(*i);
                }
                match super::hostile::edit(&self.env.client, op, *i).await {
                    Ok(Some(taken)) => self.taken.push(taken),
                    Ok(None) => {}
                    Err(e) => tracing::debug!("chaos: {op} failed: {e}"),
                }
            }
        }
        Ok(())
    }

    /// A plain workload of WorkloadPriorityClass `class` arrives.
    async fn apply_work(&mut self, queue: usize, milli: i64, class: &str, op: &Op) -> Result<(), String> {
        let n = format!("work-{}", self.next_plain);
        self.next_plain += 1;
        self.plain.push(n.clone());
        retry!(op, self.class_workload(&n, queue, class, milli))
    }

    /// Waits, up to `bound`, until some service's pending cluster runs unsuspended: its upgrade's
    /// growth holds quota.
    async fn until_an_upgrade_runs(&self, bound: Duration) {
        let deadline = Instant::now() + bound;
        while Instant::now() < deadline {
            let services = self
                .services()
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            let clusters = self
                .clusters()
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            let running = services.iter().filter_map(pending).any(|p| {
                clusters
                    .iter()
                    .any(|c| c.name_any() == p && c.spec.suspend != Some(true))
            });
            if running {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Service `i`'s worker count or head CPU changed as `op` says (an upgrade).
    async fn resize_service(&mut self, op: &Op, i: usize) -> Result<(), String> {
        let services = self.services();
        let Some(shape) = self.shapes[i].as_mut() else {
            return Ok(());
        };
        match op {
            Op::Workers(_, n) => shape.workers = *n,
            Op::HeadCpu(_, cpu) => shape.head_cpu = cpu,
            _ => {}
        }
        let spec = service(&name(i), shape).map_err(|e| e.to_string())?.spec;
        let p = json!({"spec": {"rayClusterConfig": spec.ray_cluster_config}});
        retry!(
            op,
            services.patch(&name(i), &PatchParams::default(), &Patch::Merge(&p))
        )
    }

    /// Service `i` deleted if it is there, else created again in its first shape once the old one
    /// is gone.
    async fn delete_or_recreate(&mut self, op: &Op, i: usize) -> Result<(), String> {
        let services = self.services();
        match self.shapes[i].take() {
            Some(shape) => {
                self.kept[i] = Some(shape);
                retry!(op, services.delete(&name(i), &DeleteParams::default()))?
            }
            None => {
                // Created again only once the old one is gone (its finalizer lets go), on the same
                // queue with the same strategy, in the first shape.
                if services.get_opt(&name(i)).await.ok().flatten().is_none()
                    && let Some(old) = self.kept[i].take()
                {
                    let shape = Shape {
                        head_cpu: HEAD_CPUS[0],
                        workers: 1,
                        version: VERSIONS[0],
                        ..old
                    };
                    let rs = service(&name(i), &shape).map_err(|e| e.to_string())?;
                    retry!(op, services.create(&PostParams::default(), &rs))?;
                    self.shapes[i] = Some(shape);
                    self.broken[i] = false;
                } else if self.kept[i].is_none() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// A user tries to resume service `i`'s gated pending child by hand.
    async fn tamper(&self, i: usize) {
        let Some(rs) = self.services().get_opt(&name(i)).await.ok().flatten() else {
            return;
        };
        if let Some(p) = pending(&rs) {
            // Admission refuses this while the child is gated; either answer is fine, what
            // matters is that no pod starts outside a slice (the watcher checks).
            let patch = json!({"spec": {"suspend": false}});
            let _ = self
                .clusters()
                .patch(&p, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
        }
    }

    /// Service `i`'s pods that are still Pending are marked to fail as they start.
    async fn fail_pods(&self, i: usize) -> Result<(), String> {
        // Pods take a moment to start (Env::start), so the ones just created are still Pending.
        let pods: Api<Pod> = Api::namespaced(self.env.client.clone(), NS);
        let prefix = format!("{}-", name(i));
        let list = pods
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items;
        let p = json!({"metadata": {"annotations": {FAIL_ANNOTATION: "true"}}});
        for pod in list.iter().filter(|p| p.name_any().starts_with(&prefix)) {
            let phase = pod
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .unwrap_or("Pending");
            if phase == "Pending" && pod.metadata.deletion_timestamp.is_none() {
                let _ = pods
                    .patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&p))
                    .await;
            }
        }
        Ok(())
    }

    /// Faults off, dashboards back, queue resumed, quota ample (or the world's own), urgent work gone: every service still
    /// there must be Ready on its latest spec within `LIVENESS`, and nothing may be left without an owner.
    async fn settle(&mut self) -> Result<(), String> {
        self.env.server.store.faults.clear_write_faults();
        for url in self.env.sim.cluster_urls() {
            self.env.sim.set_reachable(&url, true);
        }
        for q in 0..self.quotas.len() {
            retry!("resume", self.set_stop(q, false))?;
            let at_least = self.settle_at_least.get(q).copied().unwrap_or(0);
            let milli = if self.keep_quota {
                self.queues[q].quota.max(at_least)
            } else {
                AMPLE
            };
            retry!("settling quota", self.set_quota(q, milli))?;
        }
        for i in 0..self.shapes.len() {
            self.set_serve(i, false).await?;
        }
        for n in std::mem::take(&mut self.plain) {
            let _ = self.workloads().delete(&n, &DeleteParams::default()).await;
        }
        // A user who grew a serving cluster past the world's sizing takes the growth back: as in
        // Kueue, a growth the quota cannot hold waits for ever (its pods gated), and so would an
        // upgrade behind it. Taking it back must drop the waiting growth.
        for i in std::mem::take(&mut self.grown) {
            if let Some(workers) = self.shapes[i].as_ref().map(|s| s.workers) {
                retry!(
                    "taking the growth back",
                    super::hostile::shrink_active(&self.env.client, i, workers)
                )?;
            }
        }
        // In the world's own quota, upgrades take turns: each service gets the bound in turn.
        let turns = if self.keep_quota {
            u32::try_from(self.shapes.len()).unwrap_or(1).max(1)
        } else {
            1
        };
        let bound = LIVENESS * turns;
        let deadline = Instant::now() + bound;
        loop {
            if let Some(v) = self
                .inv
                .violations()
                .into_iter()
                .find(|v| v.starts_with("liveness:"))
            {
                return Err(v);
            }
            match self.converged().await {
                Ok(()) => return Ok(()),
                Err(why) if Instant::now() > deadline => {
                    return Err(format!(
                        "not converged {} s after the faults stopped: {why}",
                        bound.as_secs()
                    ));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// What the API holds now, in a few lines, for a failure message.
    async fn dump(&self) -> String {
        let mut out = Vec::new();
        let lp = ListParams::default();
        for rs in self
            .services()
            .list(&lp)
            .await
            .map(|l| l.items)
            .unwrap_or_default()
        {
            let st = rs.status.as_ref();
            let ready = st
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
            out.push(format!(
                "  RayService {} suspend={:?} active={:?} pending={:?} endpoints={:?} ready={:?}",
                rs.name_any(),
                rs.spec.suspend,
                active(&rs),
                pending(&rs),
                st.and_then(|s| s.num_serve_endpoints),
                ready.map(|c| format!("{}/{}: {}", c.status, c.reason, c.message))
            ));
        }
        for rc in self
            .clusters()
            .list(&lp)
            .await
            .map(|l| l.items)
            .unwrap_or_default()
        {
            let group = rc.spec.worker_group_specs.as_ref().and_then(|g| g.first());
            out.push(format!(
                "  RayCluster {} suspend={:?} replicas={:?} workersToDelete={:?} created={:?} deleting={}",
                rc.name_any(),
                rc.spec.suspend,
                group.and_then(|g| g.replicas),
                group
                    .and_then(|g| g.scale_strategy.as_ref())
                    .and_then(|s| s.workers_to_delete.clone()),
                rc.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()),
                rc.metadata.deletion_timestamp.is_some()
            ));
        }
        let pods: Api<Pod> = Api::namespaced(self.env.client.clone(), NS);
        for p in pods.list(&lp).await.map(|l| l.items).unwrap_or_default() {
            let pod_ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.status.clone());
            out.push(format!(
                "  Pod {} phase={:?} ready={:?} serve={:?} deleting={}",
                p.name_any(),
                p.status.as_ref().and_then(|s| s.phase.clone()),
                pod_ready,
                p.labels().get(crate::api::ray::constants::LABEL_SERVE),
                p.metadata.deletion_timestamp.is_some()
            ));
        }
        for w in self
            .workloads()
            .list(&lp)
            .await
            .map(|l| l.items)
            .unwrap_or_default()
        {
            let conds: Vec<String> = w
                .status
                .iter()
                .flat_map(|s| s.conditions.iter())
                .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
                .collect();
            out.push(format!(
                "  Workload {} replaces={:?} claim={:?} podsets={:?} {}",
                w.name_any(),
                w.annotations()
                    .get("kueue.x-k8s.io/workload-slice-replacement-for"),
                w.annotations()
                    .get(crate::api::kueue::constants::ANNOTATION_UPGRADE_CLAIM),
                w.spec
                    .pod_sets
                    .iter()
                    .map(|p| (p.name.clone().unwrap_or_default(), p.count()))
                    .collect::<Vec<_>>(),
                conds.join(" ")
            ));
        }
        out.join("\n")
    }

    async fn converged(&self) -> Result<(), String> {
        let e = |e: kube::Error| e.to_string();
        let lp = ListParams::default();
        let services = self.services().list(&lp).await.map_err(e)?.items;
        let clusters = self.clusters().list(&lp).await.map_err(e)?.items;
        for (i, shape) in self.shapes.iter().enumerate() {
            let n = name(i);
            let rs = services.iter().find(|r| r.name_any() == n);
            match (shape, rs) {
                (None, Some(_)) => return Err(format!("{n} was deleted but is still there")),
                (None, None) => {}
                (Some(_), None) => return Err(format!("{n} is gone")),
                (Some(shape), Some(rs)) => {
                    if !ready(rs) || pending(rs).is_some() {
                        return Err(format!(
                            "{n} is not Ready with no pending cluster: {:?}",
                            rs.status.as_ref().map(|s| &s.conditions)
                        ));
                    }
                    let act = active(rs).ok_or_else(|| format!("{n} has no active cluster"))?;
                    let rc = clusters
                        .iter()
                        .find(|c| c.name_any() == act)
                        .ok_or_else(|| format!("{n}'s active cluster {act} is gone"))?;
                    // KubeRay hashes a cluster spec without worker counts: changing only `replicas`
                    // neither makes a new cluster nor updates the active one (the autoscaler owns them).
                    let got = shape_of(rc).map(|g| Shape {
                        workers: shape.workers,
                        queue: shape.queue,
                        incremental: shape.incremental,
                        priority: shape.priority,
                        ..g
                    });
                    if got.as_ref() != Some(shape) {
                        return Err(format!(
                            "{n} serves from {act} shaped {got:?}, its spec says {shape:?}"
                        ));
                    }
                }
            }
        }
        // No orphans: every RayCluster's owner, every pod's cluster and every Workload's owner exists.
        let mut uids: Vec<String> = services.iter().filter_map(|r| r.metadata.uid.clone()).collect();
        let own: Vec<String> = (0..self.clusters.len()).map(cluster_name).collect();
        if let Some(rc) = clusters.iter().find(|c| {
            !own.contains(&c.name_any()) && !c.owner_references().iter().any(|o| uids.contains(&o.uid))
        }) {
            return Err(format!("RayCluster {} has no live owner", rc.name_any()));
        }
        uids.extend(
            clusters
                .iter()
                .filter(|c| own.contains(&c.name_any()))
                .filter_map(|c| c.metadata.uid.clone()),
        );
        let extra: Vec<String> = clusters
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .map(|c| c.name_any())
            .collect();
        if extra.len() > self.shapes.iter().flatten().count() + own.len() {
            return Err(format!("more RayClusters than services once settled: {extra:?}"));
        }
        let pods: Api<Pod> = Api::namespaced(self.env.client.clone(), NS);
        let pods = pods.list(&lp).await.map_err(e)?.items;
        for p in &pods {
            let c = p.labels().get("ray.io/cluster").cloned().unwrap_or_default();
            if !clusters.iter().any(|rc| rc.name_any() == c) {
                return Err(format!("pod {} of cluster {c:?} outlives it", p.name_any()));
            }
        }
        let wls = self.workloads().list(&lp).await.map_err(e)?.items;
        for w in wls
            .iter()
            .filter(|w| !w.owner_references().is_empty() && !w.is_finished())
        {
            if !w.owner_references().iter().any(|o| uids.contains(&o.uid)) {
                return Err(format!("Workload {} has no live owner", w.name_any()));
            }
        }
        // I3: each service's one slice is exactly its live clusters' requests, and each ClusterQueue
        // reports exactly what its Workloads hold.
        for rs in &services {
            let uid = rs.metadata.uid.clone().unwrap_or_default();
            let chain: Vec<&Workload> = wls
                .iter()
                .filter(|w| w.labels().get(JOB_UID) == Some(&uid))
                .collect();
            super::chain::exact(rs, &chain, &clusters)?;
        }
        super::clusters::converged(&self.clusters, &clusters, &pods, &wls)?;
        for cq in self.cqs().list(&lp).await.map_err(e)?.items {
            super::chain::queue_exact(&cq, &wls)?;
        }
        Ok(())
    }
}

fn shape_of(rc: &RayCluster) -> Option<Shape> {
    let head = rc
        .spec
        .head_group_spec
        .template
        .spec
        .as_ref()?
        .containers
        .first()?;
    let cpu = head.resources.as_ref()?.requests.as_ref()?.get("cpu")?.0.clone();
    let version = rc.spec.ray_version.clone()?;
    Some(Shape {
        head_cpu: HEAD_CPUS.into_iter().find(|c| *c == cpu)?,
        workers: 0,
        version: VERSIONS.into_iter().find(|v| *v == version)?,
        queue: 0,
        incremental: None,
        priority: None,
    })
}

fn active(rs: &RayService) -> Option<String> {
    let s = rs.status.as_ref()?.active_service_status.as_ref()?;
    s.ray_cluster_name.clone().filter(|n| !n.is_empty())
}

fn pending(rs: &RayService) -> Option<String> {
    let s = rs.status.as_ref()?.pending_service_status.as_ref()?;
    s.ray_cluster_name.clone().filter(|n| !n.is_empty())
}

fn ready(rs: &RayService) -> bool {
    crate::api::conditions::is_true(rs.status.as_ref().and_then(|s| s.conditions.as_deref()), "Ready")
}

/// What one run did.
#[derive(Clone, Debug, Default)]
pub struct RunStats {
    pub actions: usize,
    pub faults: usize,
    /// Invariant checks the watcher ran.
    pub checks: u64,
    /// Services a legitimate preemption took down, that served again (I8's excuses).
    pub excused: u64,
    /// Preemptions of a service's slice that I8 judged.
    pub preempted: u64,
}

/// One run of `world` with `list`. A failure says whether an invariant broke or liveness failed.
pub(super) async fn run(seed: u64, w: &World, list: &[Op], timing: Timing) -> Result<RunStats, Failure> {
    let setup = |e: String| Failure::Setup(e);
    let env = Env::start(super::jitter::pod_start(timing, seed)).await;
    let _jitter = super::jitter::start(timing, seed, &env.server);
    let inv = Invariants::start_with(env.client.clone(), w.no_serving_gap);
    env.queues(&w.queues, w.preemption)
        .await
        .map_err(|e| setup(e.to_string()))?;
    let mut run = Run {
        env,
        inv,
        shapes: w.services.iter().cloned().map(Some).collect(),
        kept: vec![None; w.services.len()],
        broken: vec![false; w.services.len()],
        plain: Vec::new(),
        next_plain: 0,
        quotas: w.queues.iter().map(|q| q.quota).collect(),
        queues: w.queues.clone(),
        managers: 0,
        keep_quota: w.keep_quota,
        settle_at_least: w.settle_at_least.clone(),
        clusters: w.clusters.clone(),
        taken: Vec::new(),
        grown: Vec::new(),
    };
    for (i, (queue, milli)) in w.background.iter().enumerate() {
        let n = format!("background-{i}");
        run.plain_workload(&n, *queue, 0, *milli)
            .await
            .map_err(|e| setup(e.to_string()))?;
        run.plain.push(n);
    }
    for (i, shape) in w.services.iter().enumerate() {
        let rs = service(&name(i), shape).map_err(|e| setup(e.to_string()))?;
        run.services()
            .create(&PostParams::default(), &rs)
            .await
            .map_err(|e| setup(e.to_string()))?;
    }
    for (i, shape) in w.clusters.iter().enumerate() {
        let rc = cluster(&cluster_name(i), shape).map_err(|e| setup(e.to_string()))?;
        run.clusters()
            .create(&PostParams::default(), &rc)
            .await
            .map_err(|e| setup(e.to_string()))?;
    }
    tracing::debug!("chaos: seed {seed}: {w:?} actions {list:?}");
    let mut pace = super::world::pacing(seed);
    for op in list {
        run.apply(op).await.map_err(Failure::Setup)?;
        tokio::time::sleep(Duration::from_millis(pace.random_range(50..=600))).await;
        if let Some(v) = run.inv.violations().first().or(run.taken.first()) {
            return Err(Failure::Invariant(format!(
                "after {op}: {v}\n{}",
                run.dump().await
            )));
        }
        if let Some(e) = run.env.manager_error() {
            return Err(Failure::Liveness(format!("the manager ended after {op}: {e}")));
        }
    }
    if let Err(why) = run.settle().await {
        return Err(Failure::Liveness(format!("{why}\n{}", run.dump().await)));
    }
    if let Some(v) = run.inv.violations().first() {
        return Err(Failure::Invariant(format!(
            "while settling: {v}\n{}",
            run.dump().await
        )));
    }
    Ok(RunStats {
        actions: list.len(),
        faults: list.iter().filter(|o| o.is_fault()).count(),
        checks: run.inv.checks(),
        excused: run.inv.excused(),
        preempted: run.inv.preempted(),
    })
}
