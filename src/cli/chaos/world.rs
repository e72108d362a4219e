//! What a seed decides: the world a run starts from and the actions it applies. Pure: the same seed
//! gives the same world and actions, so a failure replays from its seed and action list alone.

use std::fmt;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::api::ray::RayService;

use super::env::NS;

pub const VERSIONS: [&str; 4] = ["2.44.0", "2.45.0", "2.46.0", "2.47.0"];
pub const HEAD_CPUS: [&str; 3] = ["500m", "1", "1500m"];

/// One user action or fault. `Debug` prints it as Rust, so a shrunk list pastes into a regression test.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Change a service's rayVersion (an upgrade, or a rollback to an earlier one).
    Version(usize, &'static str),
    /// Resize a service's worker group (a heterogeneous upgrade when it changes the shape).
    Workers(usize, i32),
    /// Change a service's head CPU request.
    HeadCpu(usize, &'static str),
    /// Raise the ClusterQueue's CPU quota to this (milli), if it is higher.
    Quota(i64),
    /// Cut the ClusterQueue's CPU quota to this (milli), if it is lower: Kueue keeps what it admitted,
    /// nothing new may be admitted until usage fits again.
    QuotaCut(i64),
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
    /// A second manager starts beside the leader, then the leader stops cleanly: the second leads.
    LeaderChange,
    /// The API server fails the nth write of a kind with a 500 or a 409.
    WriteFault { plural: &'static str, nth: u32, conflict: bool },
    /// Every open watch is closed, or its history expired (clients must relist).
    Watches { expire: bool },
    /// Every Ray dashboard known now stops answering (calls time out or fail), until `DashboardsBack`.
    DashboardsDown,
    DashboardsBack,
    /// The pods of a service that are still starting fail instead (an image pull or crash at start).
    PodsFail(usize),
}

impl Op {
    /// Faults, as counted in the summary (the rest are what users and workloads do).
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            Op::RestartManager | Op::LeaderChange | Op::WriteFault { .. } | Op::Watches { .. } | Op::DashboardsDown | Op::PodsFail(_)
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
    /// The ClusterQueue's CPU quota (milli).
    pub(super) quota: i64,
    /// Higher priority preempts lower within the ClusterQueue.
    pub(super) preempt: bool,
    pub(super) services: Vec<Shape>,
    /// Plain low-priority workloads there from the start (milli-CPU each).
    pub(super) background: Vec<i64>,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Shape {
    pub(super) head_cpu: &'static str,
    pub(super) workers: i32,
    pub(super) version: &'static str,
}

/// The seed's world and its own action list.
pub(super) fn generate(seed: u64) -> (World, Vec<Op>) {
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
        })
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
    (0..rng.random_range(6..=12))
        .map(|_| match rng.random_range(0..112) {
            0..=24 => Op::Version(rng.random_range(0..n), VERSIONS[rng.random_range(0..VERSIONS.len())]),
            25..=32 => Op::Workers(rng.random_range(0..n), rng.random_range(1..=3)),
            33..=37 => Op::HeadCpu(rng.random_range(0..n), HEAD_CPUS[rng.random_range(0..3)]),
            38..=47 => Op::Quota(w.quota + rng.random_range(0..=6) * 1000),
            48..=54 => Op::Urgent(rng.random_range(1..=4) * 1000),
            55..=60 => Op::Finish,
            61..=63 => Op::StopQueue,
            64..=67 => Op::ResumeQueue,
            68..=71 => Op::DeleteOrRecreate(rng.random_range(0..n)),
            72..=77 => Op::Tamper(rng.random_range(0..n)),
            78..=81 => Op::RestartManager,
            82..=84 => Op::LeaderChange,
            85..=94 => Op::WriteFault {
                plural: ["workloads", "rayclusters", "rayservices", "pods"][rng.random_range(0..4)],
                nth: rng.random_range(1..=4),
                conflict: rng.random_bool(0.5),
            },
            95..=99 => Op::Watches { expire: rng.random_bool(0.5) },
            100..=103 => Op::QuotaCut(rng.random_range(2..=5) * 1000),
            104..=106 => Op::DashboardsDown,
            107..=108 => Op::DashboardsBack,
            _ => Op::PodsFail(rng.random_range(0..n)),
        })
        .collect()
}

/// A queue-managed RayService: head `head_cpu`, one worker group of `workers` 1-CPU workers (0 to 4
/// allowed), rayVersion and image `version`, a one-deployment Serve app.
pub(super) fn service(name: &str, s: &Shape) -> Result<RayService, serde_json::Error> {
    let res = |cpu: &str| json!({"requests": {"cpu": cpu, "memory": "1Gi"}});
    let version = s.version;
    serde_json::from_value(json!({
        "apiVersion": "ray.io/v1", "kind": "RayService",
        "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "rayClusterDeletionDelaySeconds": 1,
            "serveConfigV2": "applications:\n  - name: app\n    import_path: app.graph\n    route_prefix: /\n    deployments:\n      - name: D\n        num_replicas: 1\n",
            "rayClusterConfig": {
                "rayVersion": version,
                "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [{"name": "ray-head",
                    "image": format!("rayproject/ray:{version}"), "resources": res(s.head_cpu)}]}}},
                "workerGroupSpecs": [{"groupName": "workers", "replicas": s.workers, "minReplicas": 0, "maxReplicas": 4, "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-worker", "image": format!("rayproject/ray:{version}"), "resources": res("1")}]}}}]
            }
        }
    }))
}

pub(super) fn name(i: usize) -> String {
    format!("svc-{i}")
}
