//! What a seed decides: the world a run starts from and the actions it applies. Pure: the same seed
//! gives the same world and actions, so a failure replays from its seed and action list alone.

use std::fmt;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::api::ray::RayService;

/// The namespace every object of a run lives in.
pub(super) const NS: &str = "default";

pub const VERSIONS: [&str; 4] = ["2.44.0", "2.45.0", "2.46.0", "2.47.0"];
pub const HEAD_CPUS: [&str; 3] = ["500m", "1", "1500m"];

/// The WorkloadPriorityClasses every run creates, lowest first: services, batch and urgent work name
/// them (the contention scenario); plain `Urgent` and background work carry a bare priority instead.
pub const PRIORITY_CLASSES: [(&str, i32); 3] = [("low", 100), ("prod", 1000), ("critical", 2000)];

/// The value of WorkloadPriorityClass `class` (0 without one, as Kueue defaults it).
pub(super) fn class_value(class: Option<&str>) -> i32 {
    PRIORITY_CLASSES
        .iter()
        .find(|(n, _)| Some(*n) == class)
        .map_or(0, |(_, v)| *v)
}

/// One user action or fault. `Debug` prints it as Rust, so a shrunk list pastes into a regression test.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Change a service's rayVersion (an upgrade, or a rollback to an earlier one).
    Version(usize, &'static str),
    /// Resize a service's worker group (a heterogeneous upgrade when it changes the shape).
    Workers(usize, i32),
    /// Change a service's head CPU request.
    HeadCpu(usize, &'static str),
    /// Raise a ClusterQueue's CPU quota to this (milli), if it is higher.
    Quota(usize, i64),
    /// Cut a ClusterQueue's CPU quota to this (milli), if it is lower: Kueue keeps what it admitted,
    /// nothing new may be admitted until usage fits again.
    QuotaCut(usize, i64),
    /// A higher-priority plain workload of this many milli-CPU arrives in a ClusterQueue.
    Urgent(usize, i64),
    /// A plain workload of WorkloadPriorityClass `class` arrives in a ClusterQueue: batch work, or
    /// urgent work that may preempt (or reclaim from) what runs at a lower priority.
    Work {
        queue: usize,
        milli: i64,
        class: &'static str,
    },
    /// As `Work`, once some service's upgrade runs (its pending cluster unsuspended, its growth
    /// admitted), waiting for that up to 10 s: urgent work arriving in the middle of an upgrade.
    MidUpgrade {
        queue: usize,
        milli: i64,
        class: &'static str,
    },
    /// The oldest background or urgent workload finishes (is deleted).
    Finish,
    StopQueue(usize),
    ResumeQueue(usize),
    /// Delete a service, or create it again when it is gone.
    DeleteOrRecreate(usize),
    /// A user tries to resume a service's pending (gated) child by hand.
    Tamper(usize),
    RestartManager,
    /// A second manager starts beside the leader, then the leader stops cleanly: the second leads.
    LeaderChange,
    /// The API server fails the nth write of a kind with a 500 or a 409.
    WriteFault {
        plural: &'static str,
        nth: u32,
        conflict: bool,
    },
    /// Every open watch is closed, or its history expired (clients must relist).
    Watches {
        expire: bool,
    },
    /// Every Ray dashboard known now stops answering (calls time out or fail), until `DashboardsBack`.
    DashboardsDown,
    DashboardsBack,
    /// The pods of a service that are still starting fail instead (an image pull or crash at start).
    PodsFail(usize),
    /// A user writes a Serve config whose import fails: its apps end DEPLOY_FAILED until `FixServe`.
    BreakServe(usize),
    FixServe(usize),
    /// Set a queue-managed RayCluster's worker replicas (a user's edit, or an elastic cluster's growth).
    ClusterReplicas(usize, i32),
    /// Change a RayCluster's worker CPU request (new requests: a new Workload must hold them).
    ClusterCpu(usize, &'static str),
    /// Set or remove a RayCluster's `kueue.x-k8s.io/elastic-job` annotation.
    ClusterElastic(usize, bool),
    /// Ray's autoscaler removes one named worker: `replicas` one lower, the pod in `workersToDelete`.
    ClusterScaleDown(usize),
    /// A user resumes a RayCluster by hand (`suspend: false`), admitted or not.
    ClusterTamper(usize),
    /// A user removes the gate annotation from a service's pending child and resumes it.
    Ungate(usize),
    /// A user writes `QuotaGated=False` into a service's pending child's status.
    ForgeGated(usize),
    /// A user deletes a service's waiting Workload slice.
    DeleteSlice(usize),
    /// A user sets the worker replicas of a service's active cluster.
    GrowActive(usize, i32),
    /// A user tries an edit the webhook must refuse on a service's pending child
    /// (`hostile::REFUSED`): taken, it is an invariant violation.
    Refused(usize, usize),
}

impl Op {
    /// Faults, as counted in the summary (the rest are what users and workloads do).
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            Op::RestartManager
                | Op::LeaderChange
                | Op::WriteFault { .. }
                | Op::Watches { .. }
                | Op::DashboardsDown
                | Op::PodsFail(_)
        )
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// The world a seed builds before its actions.
#[derive(Clone, Debug)]
pub(super) struct World {
    /// One ClusterQueue, or two in one cohort (they borrow each other's unused quota).
    pub(super) queues: Vec<Queue>,
    /// The ClusterQueues' preemption policies.
    pub(super) preemption: Preemption,
    pub(super) services: Vec<Shape>,
    /// Queue-managed RayClusters of their own (the clusters scenario).
    pub(super) clusters: Vec<ClusterShape>,
    /// Plain low-priority workloads there from the start: (queue, milli-CPU).
    pub(super) background: Vec<(usize, i64)>,
    /// Settle in the world's own quota instead of an ample one (the contention scenario: liveness
    /// means every upgrade completed in the quota it was given).
    pub(super) keep_quota: bool,
    /// The watcher checks I8 (no serving gap): only a user, or a preemption that every upgrade's
    /// growth could not satisfy, may take a service down (`serving.rs`).
    pub(super) no_serving_gap: bool,
    /// With `keep_quota`, each queue's quota is raised to at least this (milli) when the run settles:
    /// a world drawn below the size `plan` gives for upgrades taking turns gets it then (empty: none).
    pub(super) settle_at_least: Vec<i64>,
}

/// A ClusterQueue's `preemption`: `withinClusterQueue` and `reclaimWithinCohort` (Never,
/// LowerPriority or Any), the latter only written in a cohort.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Preemption {
    pub(super) within: &'static str,
    pub(super) reclaim: &'static str,
}

impl Preemption {
    /// Higher priority preempts lower within a ClusterQueue and reclaims any lent quota, or nothing.
    pub(super) fn on(yes: bool) -> Preemption {
        if yes {
            Preemption {
                within: "LowerPriority",
                reclaim: "Any",
            }
        } else {
            Preemption {
                within: "Never",
                reclaim: "Never",
            }
        }
    }
}

/// One queue-managed RayCluster of the world: a head and one worker group.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ClusterShape {
    pub(super) head_cpu: &'static str,
    pub(super) worker_cpu: &'static str,
    pub(super) replicas: i32,
    /// `kueue.x-k8s.io/elastic-job: "true"`: a replica change becomes a workload slice.
    pub(super) elastic: bool,
    /// `upgradeStrategy: Recreate`: a template change recreates every pod.
    pub(super) recreate: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Queue {
    /// CPU quota (milli).
    pub(super) quota: i64,
    /// How much CPU (milli) it may borrow from the cohort; `None` is no limit.
    pub(super) borrowing_limit: Option<i64>,
    /// How much of its CPU quota (milli) the cohort may borrow; `None` lends all of it. At most `quota`
    /// (Kueue's rule); a quota cut below it lowers it with the cut (`lent`).
    pub(super) lending_limit: Option<i64>,
}

impl Queue {
    /// The lending limit written with nominal quota `milli`: Kueue rejects one above the nominal quota.
    pub(super) fn lent(&self, milli: i64) -> Option<i64> {
        self.lending_limit.map(|l| l.min(milli))
    }
}

/// ClusterQueue and LocalQueue names of queue `i`.
pub(super) fn queue_names(i: usize) -> (&'static str, &'static str) {
    if i == 0 { ("cq", "lq") } else { ("cq-b", "lq-b") }
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Shape {
    pub(super) head_cpu: &'static str,
    /// Workers of a blue/green service; an incremental service's autoscaler bound is one more.
    pub(super) workers: i32,
    pub(super) version: &'static str,
    /// The LocalQueue it is submitted to (`queue_names`).
    pub(super) queue: usize,
    /// `NewClusterWithIncrementalUpgrade` with (stepSizePercent, maxSurgePercent), else blue/green.
    pub(super) incremental: Option<(i32, i32)>,
    /// Its WorkloadPriorityClass (`PRIORITY_CLASSES`), if any.
    pub(super) priority: Option<&'static str>,
}

/// The seed's world and its own action list.
pub(super) fn generate(seed: u64) -> (World, Vec<Op>) {
    let (mut w, mut list) = generate_base(seed);
    extend(
        &mut StdRng::seed_from_u64(seed ^ 0xc040_47c0_4047),
        &mut w,
        &mut list,
    );
    (w, list)
}

/// The seed's world and actions as the first generator drew them: one ClusterQueue, blue/green
/// services only, no Serve config breakage. `generate` draws these first and adds to them from a stream
/// of its own, so a seed's base run stays a regression test of what it once found.
pub(super) fn generate_base(seed: u64) -> (World, Vec<Op>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let w = world(&mut rng);
    let list = ops(&mut rng, &w);
    (w, list)
}

/// Delays between actions, from their own stream so that a shrunk list keeps the seed's pacing.
pub(super) fn pacing(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed ^ 0x5eed_5eed_5eed_5eed)
}

fn world(rng: &mut StdRng) -> World {
    let services = (0..rng.random_range(1..=2))
        .map(|_| Shape {
            head_cpu: HEAD_CPUS[rng.random_range(0..2)],
            workers: rng.random_range(1..=2),
            version: VERSIONS[rng.random_range(0..2)],
            queue: 0,
            incremental: None,
            priority: None,
        })
        .collect();
    World {
        queues: vec![Queue {
            quota: rng.random_range(5..=9) * 1000,
            borrowing_limit: None,
            lending_limit: None,
        }],
        preemption: Preemption::on(rng.random_bool(0.6)),
        services,
        clusters: Vec::new(),
        background: (0..rng.random_range(0..=2))
            .map(|_| (0, rng.random_range(1..=3) * 500))
            .collect(),
        keep_quota: false,
        no_serving_gap: false,
        settle_at_least: Vec::new(),
    }
}

fn ops(rng: &mut StdRng, w: &World) -> Vec<Op> {
    let n = w.services.len();
    let quota = w.queues[0].quota;
    (0..rng.random_range(6..=12))
        .map(|_| match rng.random_range(0..112) {
            0..=24 => Op::Version(
                rng.random_range(0..n),
                VERSIONS[rng.random_range(0..VERSIONS.len())],
            ),
            25..=32 => Op::Workers(rng.random_range(0..n), rng.random_range(1..=3)),
            33..=37 => Op::HeadCpu(rng.random_range(0..n), HEAD_CPUS[rng.random_range(0..3)]),
            38..=47 => Op::Quota(0, quota + rng.random_range(0..=6) * 1000),
            48..=54 => Op::Urgent(0, rng.random_range(1..=4) * 1000),
            55..=60 => Op::Finish,
            61..=63 => Op::StopQueue(0),
            64..=67 => Op::ResumeQueue(0),
            68..=71 => Op::DeleteOrRecreate(rng.random_range(0..n)),
            72..=77 => Op::Tamper(rng.random_range(0..n)),
            78..=81 => Op::RestartManager,
            82..=84 => Op::LeaderChange,
            85..=94 => Op::WriteFault {
                plural: ["workloads", "rayclusters", "rayservices", "pods"][rng.random_range(0..4)],
                nth: rng.random_range(1..=4),
                conflict: rng.random_bool(0.5),
            },
            95..=99 => Op::Watches {
                expire: rng.random_bool(0.5),
            },
            100..=103 => Op::QuotaCut(0, rng.random_range(2..=5) * 1000),
            104..=106 => Op::DashboardsDown,
            107..=108 => Op::DashboardsBack,
            _ => Op::PodsFail(rng.random_range(0..n)),
        })
        .collect()
}

/// What the base generator lacks, from `rng`: half the worlds get a second ClusterQueue in a cohort
/// with the first (services and background work spread over both, actions on its quota and stop
/// policy), some services upgrade incrementally, and some runs break and fix a service's Serve config.
/// Cohort queues then get a lending limit half the time, drawn last so that a seed's world and actions
/// are otherwise what they were before lending limits were drawn.
fn extend(rng: &mut StdRng, w: &mut World, list: &mut Vec<Op>) {
    let cohort = rng.random_bool(0.5);
    if cohort {
        let limit = rng.random_bool(0.5).then(|| rng.random_range(1..=4) * 1000);
        w.queues.push(Queue {
            quota: rng.random_range(3..=6) * 1000,
            borrowing_limit: limit,
            lending_limit: None,
        });
        for s in &mut w.services {
            s.queue = rng.random_range(0..2);
        }
        for b in &mut w.background {
            b.0 = rng.random_range(0..2);
        }
    }
    for s in &mut w.services {
        if rng.random_bool(0.35) {
            // KubeRay requires stepSizePercent <= maxSurgePercent.
            let surge = [50, 100][rng.random_range(0..2)];
            let step = [25, 50, 100][rng.random_range(0..if surge == 50 { 2 } else { 3 })];
            s.incremental = Some((step, surge));
        }
    }
    let n = w.services.len();
    for _ in 0..rng.random_range(0..=4) {
        let q = if cohort { rng.random_range(0..2) } else { 0 };
        let op = match rng.random_range(0..10) {
            0..=1 => Op::Quota(q, w.queues[q].quota + rng.random_range(0..=4) * 1000),
            2 => Op::QuotaCut(q, rng.random_range(1..=4) * 1000),
            3..=4 => Op::Urgent(q, rng.random_range(1..=3) * 1000),
            5 => Op::StopQueue(q),
            6 => Op::ResumeQueue(q),
            7..=8 => Op::BreakServe(rng.random_range(0..n)),
            _ => Op::FixServe(rng.random_range(0..n)),
        };
        let at = rng.random_range(0..=list.len());
        list.insert(at, op);
    }
    if cohort {
        for q in &mut w.queues {
            q.lending_limit = rng
                .random_bool(0.5)
                .then(|| rng.random_range(0..=q.quota / 1000) * 1000);
        }
    }
}

/// A queue-managed RayService on its LocalQueue: head `head_cpu`, one worker group of 1-CPU workers,
/// rayVersion and image `version`, a one-deployment Serve app (`serve_config`). Blue/green: `workers`
/// workers (0 to 4 allowed). Incremental: autoscaled workers (0 to `workers + 1`) for two 1-CPU
/// replicas, a head that hosts none, and a Gateway route stepping traffic every second.
pub(super) fn service(name: &str, s: &Shape) -> Result<RayService, serde_json::Error> {
    let res = |cpu: &str| json!({"requests": {"cpu": cpu, "memory": "1Gi"}});
    let version = s.version;
    let image = format!("rayproject/ray:{version}");
    let mut spec = json!({
        "rayClusterDeletionDelaySeconds": 1,
        "serveConfigV2": serve_config(s, false),
        "rayClusterConfig": {
            "rayVersion": version,
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head",
                "image": image, "resources": res(s.head_cpu)}]}}},
            "workerGroupSpecs": [{"groupName": "workers", "replicas": s.workers, "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-worker", "image": image, "resources": res("1")}]}}}]
        }
    });
    if let Some((step, surge)) = s.incremental {
        spec["upgradeStrategy"] = json!({"type": "NewClusterWithIncrementalUpgrade", "clusterUpgradeOptions": {
            "gatewayClassName": "istio", "stepSizePercent": step, "intervalSeconds": 1, "maxSurgePercent": surge}});
        let rc = &mut spec["rayClusterConfig"];
        rc["enableInTreeAutoscaling"] = json!(true);
        rc["headGroupSpec"]["rayStartParams"] = json!({"num-cpus": "0"});
        let workers = &mut rc["workerGroupSpecs"][0];
        workers.as_object_mut().map(|g| g.remove("replicas"));
        workers["maxReplicas"] = json!(s.workers + 1);
    }
    let mut labels = json!({"kueue.x-k8s.io/queue-name": queue_names(s.queue).1});
    if let Some(class) = s.priority {
        labels["kueue.x-k8s.io/priority-class"] = json!(class);
    }
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": spec
    }))
}

/// The service's Serve config; a broken one names a module that does not exist, which Ray reports as
/// DEPLOY_FAILED once it tries to import it.
pub(super) fn serve_config(s: &Shape, broken: bool) -> String {
    let module = if broken { "no_such_app" } else { "app" };
    let replicas = if s.incremental.is_some() {
        "2\n        ray_actor_options:\n          num_cpus: 1"
    } else {
        "1"
    };
    format!(
        "applications:\n  - name: app\n    import_path: {module}.graph\n    route_prefix: /\n    deployments:\n      - name: D\n        num_replicas: {replicas}\n"
    )
}

pub(super) fn name(i: usize) -> String {
    format!("svc-{i}")
}

/// CPU (milli) of service `i` shaped `s` at steady state and at the peak of its upgrade, as `plan`
/// sizes them.
pub(super) fn sizes(i: usize, s: &Shape) -> Result<(i64, i64), String> {
    use crate::cli::plan::phases;
    let rs = service(&name(i), s).map_err(|e| e.to_string())?;
    let cpu = |p: &phases::Phase| p.totals.get("cpu").map_or(0, |a| a.0);
    let steady = phases::steady(&rs, "spec").map_err(|e| e.to_string())?;
    let peak = phases::peak(&rs, &rs).map_err(|e| e.to_string())?;
    Ok((cpu(&steady), cpu(&peak)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cohort_worlds_draw_lending_limits_within_quota() {
        let worlds: Vec<World> = (0..200).map(|seed| generate(seed).0).collect();
        let lending: Vec<&Queue> = worlds
            .iter()
            .flat_map(|w| &w.queues)
            .filter(|q| q.lending_limit.is_some())
            .collect();
        assert!(
            lending.len() > 20,
            "only {} queues lend with a limit",
            lending.len()
        );
        assert!(
            lending
                .iter()
                .all(|q| q.lending_limit.is_some_and(|l| (0..=q.quota).contains(&l)))
        );
        assert!(
            worlds
                .iter()
                .filter(|w| w.queues.len() == 1)
                .all(|w| w.queues[0].lending_limit.is_none())
        );
        let q = Queue {
            quota: 5000,
            borrowing_limit: None,
            lending_limit: Some(3000),
        };
        assert_eq!((q.lent(2000), q.lent(4000)), (Some(2000), Some(3000)));
    }
}
