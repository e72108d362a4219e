//! Seeded random runs of queue-managed RayServices under faults (issue 20, first part). Each run builds a
//! small world from its seed (quota, priorities, one or two services with random shapes, background
//! workloads) and applies a random sequence of user actions and faults, with the invariant watcher
//! (DESIGN I1, I2, I6) checking on every event. Once the faults stop and the quota is made ample, every
//! service still there must be Ready on its latest spec within a bound, and nothing may be orphaned.
//!
//! A failing run prints its seed and its action list; with `CHAOS_SHRINK=N` it then re-runs up to N
//! shorter lists (one action dropped at a time, kept while the run still fails) and prints the shortest
//! one that still failed, ready to paste into a regression test as `run_ops(seed, &[...])`.
//! `CHAOS_SEEDS=a..b` runs other seeds than the CI set.

use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use quotagate::api::kueue::{ClusterQueue, Workload};
use quotagate::api::ray::{RayCluster, RayService};
use quotagate::embedded::WriteMatch;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tokio::time::Instant;

use super::gated::{Scenario, active, pending, ready};

const NS: &str = "default";
const VERSIONS: [&str; 4] = ["2.44.0", "2.45.0", "2.46.0", "2.47.0"];
/// Quota (milli-CPU) at the end, when every service must fit.
const AMPLE: i64 = 64_000;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Op {
    /// Change a service's rayVersion (an upgrade, or a rollback to an earlier one).
    Version(usize, &'static str),
    /// Resize a service's worker group (a heterogeneous upgrade when it changes the shape).
    Workers(usize, i32),
    /// Change a service's head CPU request.
    HeadCpu(usize, &'static str),
    /// Raise the ClusterQueue's CPU quota to this (milli), if it is higher.
    Quota(i64),
    /// A higher-priority plain workload of this many milli-CPU arrives.
    Urgent(i64),
    /// The oldest background or urgent workload finishes (is deleted).
    Finish,
    StopQueue,
    ResumeQueue,
    /// Delete a service, or create it again when it is gone.
    DeleteOrRecreate(usize),
    /// A user tries to resume a service's pending (gated) child by hand.
    Tamper(usize),
    RestartManager,
    /// The API server fails the nth write of a kind with a 500 or a 409.
    WriteFault { plural: &'static str, nth: u32, conflict: bool },
    /// Every open watch is closed, or its history expired (clients must relist).
    Watches { expire: bool },
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// The world a seed builds before its actions.
#[derive(Clone, Debug)]
struct World {
    quota: i64,
    preempt: bool,
    services: Vec<Shape>,
    background: Vec<i64>,
}

#[derive(Clone, Debug, PartialEq)]
struct Shape {
    head_cpu: &'static str,
    workers: i32,
    version: &'static str,
}

fn world(rng: &mut StdRng) -> World {
    let services = (0..rng.random_range(1..=2))
        .map(|_| Shape { head_cpu: ["500m", "1"][rng.random_range(0..2)], workers: rng.random_range(1..=2), version: VERSIONS[rng.random_range(0..2)] })
        .collect();
    World {
        quota: rng.random_range(5..=9) * 1000,
        preempt: rng.random_bool(0.6),
        services,
        background: (0..rng.random_range(0..=2)).map(|_| rng.random_range(1..=3) * 500).collect(),
    }
}

fn ops(rng: &mut StdRng, w: &World) -> Vec<Op> {
    let n = w.services.len();
    (0..rng.random_range(6..=10))
        .map(|_| match rng.random_range(0..100) {
            0..=24 => Op::Version(rng.random_range(0..n), VERSIONS[rng.random_range(0..VERSIONS.len())]),
            25..=32 => Op::Workers(rng.random_range(0..n), rng.random_range(1..=3)),
            33..=37 => Op::HeadCpu(rng.random_range(0..n), ["500m", "1", "1500m"][rng.random_range(0..3)]),
            38..=47 => Op::Quota(w.quota + rng.random_range(0..=6) * 1000),
            48..=54 => Op::Urgent(rng.random_range(1..=4) * 1000),
            55..=60 => Op::Finish,
            61..=63 => Op::StopQueue,
            64..=67 => Op::ResumeQueue,
            68..=71 => Op::DeleteOrRecreate(rng.random_range(0..n)),
            72..=77 => Op::Tamper(rng.random_range(0..n)),
            78..=84 => Op::RestartManager,
            85..=94 => Op::WriteFault {
                plural: ["workloads", "rayclusters", "rayservices", "pods"][rng.random_range(0..4)],
                nth: rng.random_range(1..=4),
                conflict: rng.random_bool(0.5),
            },
            _ => Op::Watches { expire: rng.random_bool(0.5) },
        })
        .collect()
}

/// The scenarios' queue-managed RayService, with this shape's worker count (0 to 4 allowed).
fn service(name: &str, s: &Shape) -> RayService {
    let mut rs = super::gated::service(name, s.head_cpu, s.version);
    for g in rs.spec.ray_cluster_config.worker_group_specs.iter_mut().flatten() {
        g.replicas = Some(s.workers);
        g.min_replicas = Some(0);
        g.max_replicas = Some(4);
    }
    rs
}

fn name(i: usize) -> String {
    format!("svc-{i}")
}

struct Run {
    s: Scenario,
    shapes: Vec<Option<Shape>>,
    /// Plain workloads still there, oldest first.
    plain: Vec<String>,
    next_plain: usize,
    /// The ClusterQueue's CPU quota now (milli).
    quota: i64,
}

impl Run {
    async fn apply(&mut self, op: &Op) {
        let services = self.s.services();
        let pp = PatchParams::default();
        // A user's write may meet an injected fault or a conflict; users retry, so do we, a few times.
        macro_rules! retry {
            ($e:expr) => {{
                let mut tries = 0;
                loop {
                    match $e.await {
                        Ok(_) => break,
                        Err(kube::Error::Api(ae)) if ae.code == 404 => break,
                        Err(e) if tries < 5 => {
                            tries += 1;
                            tracing::debug!("chaos: user write failed ({e}), retrying");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        Err(e) => panic!("a user write kept failing: {e}"),
                    }
                }
            }};
        }
        match op {
            Op::Version(i, v) => {
                if let Some(shape) = self.shapes[*i].as_mut() {
                    shape.version = v;
                    let p = json!({"spec": {"rayClusterConfig": {"rayVersion": v}}});
                    retry!(services.patch(&name(*i), &pp, &Patch::Merge(&p)));
                }
            }
            Op::Workers(i, _) | Op::HeadCpu(i, _) if self.shapes[*i].is_some() => {
                let shape = self.shapes[*i].as_mut().expect("checked");
                match op {
                    Op::Workers(_, n) => shape.workers = *n,
                    Op::HeadCpu(_, cpu) => shape.head_cpu = cpu,
                    _ => {}
                }
                let spec = service(&name(*i), shape).spec;
                let p = json!({"spec": {"rayClusterConfig": spec.ray_cluster_config}});
                retry!(services.patch(&name(*i), &pp, &Patch::Merge(&p)));
            }
            Op::Workers(..) | Op::HeadCpu(..) => {}
            Op::Quota(milli) => {
                // Only ever raised: Kueue keeps what was admitted when quota is cut, which the
                // watcher's I1 (usage within the current nominal quota) would report.
                self.quota = self.quota.max(*milli);
                self.s.c.quota.set_cq_limit("cq", self.quota);
                retry!(self.s.try_set_quota(&format!("{}m", self.quota)));
            }
            Op::Urgent(milli) => {
                let n = format!("urgent-{}", self.next_plain);
                self.next_plain += 1;
                self.plain.push(n.clone());
                retry!(self.s.c.try_workload(&n, "lq", 1000, &format!("{milli}m")));
            }
            Op::Finish => {
                if !self.plain.is_empty() {
                    let n = self.plain.remove(0);
                    retry!(self.s.c.workloads().delete(&n, &DeleteParams::default()));
                }
            }
            Op::StopQueue | Op::ResumeQueue => {
                let policy = if *op == Op::StopQueue { json!("Hold") } else { json!(null) };
                let cqs: Api<ClusterQueue> = Api::all(self.s.c.client.clone());
                retry!(cqs.patch("cq", &pp, &Patch::Merge(&json!({"spec": {"stopPolicy": policy}}))));
            }
            Op::DeleteOrRecreate(i) => match self.shapes[*i].take() {
                Some(_) => retry!(services.delete(&name(*i), &DeleteParams::default())),
                None => {
                    // Created again only once the old one is gone (its finalizer lets go).
                    if services.get_opt(&name(*i)).await.ok().flatten().is_none() {
                        let shape = Shape { head_cpu: "500m", workers: 1, version: VERSIONS[0] };
                        retry!(services.create(&PostParams::default(), &service(&name(*i), &shape)));
                        self.shapes[*i] = Some(shape);
                    }
                }
            },
            Op::Tamper(i) => {
                let Some(rs) = services.get_opt(&name(*i)).await.ok().flatten() else { return };
                if let Some(p) = pending(&rs) {
                    // Admission refuses this while the child is gated; either answer is fine, what
                    // matters is that no pod starts outside a slice (the watcher checks).
                    let patch = json!({"spec": {"suspend": false}});
                    let _ = self.s.clusters().patch(&p, &pp, &Patch::Merge(&patch)).await;
                }
            }
            Op::RestartManager => self.s.c.restart_manager("m-chaos").await,
            Op::WriteFault { plural, nth, conflict } => {
                let m = WriteMatch { plural: Some((*plural).into()), ..Default::default() };
                let faults = &self.s.c.server.store.faults;
                if *conflict {
                    faults.fail_nth_write_409(m, *nth);
                } else {
                    faults.fail_nth_write_500(m, *nth);
                }
            }
            Op::Watches { expire } => {
                let store = &self.s.c.server.store;
                if *expire { store.expire_all() } else { store.close_watches() }
            }
        }
    }

    /// Faults off, queue resumed, quota ample, urgent work gone: every service still there must be
    /// Ready on its latest spec, and nothing may be left without an owner.
    async fn settle(&mut self) -> Result<(), String> {
        self.s.c.server.store.faults.clear_write_faults();
        let cqs: Api<ClusterQueue> = Api::all(self.s.c.client.clone());
        let resume = json!({"spec": {"stopPolicy": null}});
        cqs.patch("cq", &PatchParams::default(), &Patch::Merge(&resume)).await.map_err(|e| e.to_string())?;
        self.s.c.quota.set_cq_limit("cq", AMPLE);
        self.s.try_set_quota(&format!("{AMPLE}m")).await.map_err(|e| e.to_string())?;
        for n in std::mem::take(&mut self.plain) {
            let _ = self.s.c.workloads().delete(&n, &DeleteParams::default()).await;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match self.converged().await {
                Ok(()) => return Ok(()),
                Err(why) if Instant::now() > deadline => return Err(format!("not converged 60 s after the faults stopped: {why}")),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// What the API holds now, in a few lines, for a failure message.
    async fn dump(&self) -> String {
        let mut out = Vec::new();
        for rs in self.s.services().list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default() {
            out.push(format!("  RayService {} suspend={:?} active={:?} pending={:?}", rs.name_any(), rs.spec.suspend, active(&rs), pending(&rs)));
        }
        for rc in self.s.clusters().list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default() {
            out.push(format!("  RayCluster {} suspend={:?} created={:?} deleting={}", rc.name_any(), rc.spec.suspend,
                rc.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()), rc.metadata.deletion_timestamp.is_some()));
        }
        let pods: Api<Pod> = Api::namespaced(self.s.c.client.clone(), NS);
        for p in pods.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default() {
            out.push(format!("  Pod {} created={:?} deleting={}", p.name_any(), p.metadata.creation_timestamp.as_ref().map(|t| t.0.to_string()), p.metadata.deletion_timestamp.is_some()));
        }
        for w in self.s.c.workloads().list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default() {
            let conds: Vec<String> = w.status.iter().flat_map(|s| s.conditions.iter()).map(|c| format!("{}={}/{}", c.type_, c.status, c.reason)).collect();
            out.push(format!("  Workload {} replaces={:?} podsets={:?} {}", w.name_any(),
                w.annotations().get("kueue.x-k8s.io/workload-slice-replacement-for"),
                w.spec.pod_sets.iter().map(|p| (p.name.clone().unwrap_or_default(), p.count())).collect::<Vec<_>>(), conds.join(" ")));
        }
        out.join("\n")
    }

    async fn converged(&self) -> Result<(), String> {
        let e = |e: kube::Error| e.to_string();
        let services = self.s.services().list(&ListParams::default()).await.map_err(e)?.items;
        let clusters = self.s.clusters().list(&ListParams::default()).await.map_err(e)?.items;
        for (i, shape) in self.shapes.iter().enumerate() {
            let n = name(i);
            let rs = services.iter().find(|r| r.name_any() == n);
            match (shape, rs) {
                (None, Some(_)) => return Err(format!("{n} was deleted but is still there")),
                (None, None) => {}
                (Some(_), None) => return Err(format!("{n} is gone")),
                (Some(shape), Some(rs)) => {
                    if !ready(rs) || pending(rs).is_some() {
                        return Err(format!("{n} is not Ready with no pending cluster: {:?}", rs.status.as_ref().map(|s| &s.conditions)));
                    }
                    let act = active(rs).ok_or_else(|| format!("{n} has no active cluster"))?;
                    let rc = clusters.iter().find(|c| c.name_any() == act).ok_or_else(|| format!("{n}'s active cluster {act} is gone"))?;
                    // KubeRay hashes a cluster spec without worker counts: changing only `replicas`
                    // neither makes a new cluster nor updates the active one (the autoscaler owns them).
                    let got = shape_of(rc).map(|g| Shape { workers: shape.workers, ..g });
                    if got.as_ref() != Some(shape) {
                        return Err(format!("{n} serves from {act} shaped {got:?}, its spec says {shape:?}"));
                    }
                }
            }
        }
        // No orphans: every RayCluster's owner, every pod's cluster and every Workload's owner exists.
        let uids: Vec<String> = services.iter().filter_map(|r| r.metadata.uid.clone()).collect();
        if let Some(rc) = clusters.iter().find(|c| !c.owner_references().iter().any(|o| uids.contains(&o.uid))) {
            return Err(format!("RayCluster {} has no live owner", rc.name_any()));
        }
        let extra: Vec<String> = clusters.iter().filter(|c| c.metadata.deletion_timestamp.is_none()).map(|c| c.name_any()).collect();
        if extra.len() > self.shapes.iter().flatten().count() {
            return Err(format!("more RayClusters than services once settled: {extra:?}"));
        }
        let pods: Api<Pod> = Api::namespaced(self.s.c.client.clone(), NS);
        for p in pods.list(&ListParams::default()).await.map_err(e)?.items {
            let c = p.labels().get("ray.io/cluster").cloned().unwrap_or_default();
            if !clusters.iter().any(|rc| rc.name_any() == c) {
                return Err(format!("pod {} of cluster {c:?} outlives it", p.name_any()));
            }
        }
        let wls: Vec<Workload> = self.s.c.workloads().list(&ListParams::default()).await.map_err(e)?.items;
        for w in wls.iter().filter(|w| !w.owner_references().is_empty() && !w.is_finished()) {
            if !w.owner_references().iter().any(|o| uids.contains(&o.uid)) {
                return Err(format!("Workload {} has no live owner", w.name_any()));
            }
        }
        Ok(())
    }
}

fn shape_of(rc: &RayCluster) -> Option<Shape> {
    let head = rc.spec.head_group_spec.template.spec.as_ref()?.containers.first()?;
    let cpu = head.resources.as_ref()?.requests.as_ref()?.get("cpu")?.0.clone();
    let workers = rc.spec.worker_group_specs.as_ref()?.first()?.replicas?;
    let version = rc.spec.ray_version.clone()?;
    Some(Shape {
        head_cpu: ["500m", "1", "1500m"].into_iter().find(|c| *c == cpu)?,
        workers,
        version: VERSIONS.into_iter().find(|v| *v == version)?,
    })
}

/// One run: the seed's world, then `ops` (the seed's own when `None`). Err carries why it failed.
pub(super) async fn run_ops(seed: u64, ops_override: Option<&[Op]>) -> Result<usize, String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let w = world(&mut rng);
    let list = ops_override.map_or_else(|| ops(&mut rng, &w), <[Op]>::to_vec);
    let s = Scenario::start(&format!("{}m", w.quota), w.quota).await;
    if w.preempt {
        let cqs: Api<ClusterQueue> = Api::all(s.c.client.clone());
        let p = json!({"spec": {"preemption": {"withinClusterQueue": "LowerPriority"}}});
        cqs.patch("cq", &PatchParams::default(), &Patch::Merge(&p)).await.map_err(|e| e.to_string())?;
    }
    let mut run = Run { s, shapes: w.services.iter().cloned().map(Some).collect(), plain: Vec::new(), next_plain: 0, quota: w.quota };
    for (i, milli) in w.background.iter().enumerate() {
        let n = format!("background-{i}");
        run.s.c.try_workload(&n, "lq", 0, &format!("{milli}m")).await.map_err(|e| e.to_string())?;
        run.plain.push(n);
    }
    for (i, shape) in w.services.iter().enumerate() {
        run.s.services().create(&PostParams::default(), &service(&name(i), shape)).await.map_err(|e| e.to_string())?;
    }
    for op in &list {
        run.apply(op).await;
        tokio::time::sleep(Duration::from_millis(rng.random_range(50..=600))).await;
        if let Some(v) = run.s.inv.violations().first() {
            return Err(format!("invariant violated after {op}: {v}\n{}", run.dump().await));
        }
    }
    run.settle().await?;
    let v = run.s.inv.violations();
    if !v.is_empty() {
        return Err(format!("invariant violations: {v:#?}"));
    }
    Ok(list.len())
}

async fn run_seed(seed: u64) -> Result<usize, (String, Vec<Op>)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let w = world(&mut rng);
    let list = ops(&mut rng, &w);
    match run_ops(seed, Some(&list)).await {
        Ok(n) => Ok(n),
        Err(why) => Err((why, list)),
    }
}

/// Drops one action at a time, keeping each drop after which the run still fails, within `budget` runs.
async fn shrink(seed: u64, mut list: Vec<Op>, budget: usize) -> Vec<Op> {
    let mut runs = 0;
    let mut i = 0;
    while i < list.len() && runs < budget {
        let mut shorter = list.clone();
        shorter.remove(i);
        runs += 1;
        if run_ops(seed, Some(&shorter)).await.is_err() {
            list = shorter;
        } else {
            i += 1;
        }
    }
    list
}

fn seeds(default: std::ops::Range<u64>) -> std::ops::Range<u64> {
    std::env::var("CHAOS_SEEDS")
        .ok()
        .and_then(|s| s.split_once("..").and_then(|(a, b)| Some(a.parse().ok()?..b.parse().ok()?)))
        .unwrap_or(default)
}

async fn run_seeds(range: std::ops::Range<u64>) {
    let mut failures = Vec::new();
    let mut actions = 0;
    for seed in seeds(range) {
        match run_seed(seed).await {
            Ok(n) => actions += n,
            Err((why, list)) => {
                let budget = std::env::var("CHAOS_SHRINK").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
                let short = if budget > 0 { shrink(seed, list.clone(), budget).await } else { list.clone() };
                failures.push(format!("seed {seed}: {why}\n  actions: {list:?}\n  shortest still failing: {short:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "chaos runs failed ({actions} actions in the passing runs):\n{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_upgrade_runs_under_faults_keep_the_invariants_a() {
    run_seeds(0..5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_upgrade_runs_under_faults_keep_the_invariants_b() {
    run_seeds(5..10).await;
}
