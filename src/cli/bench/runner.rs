//! Drives a generator config through the embedded API server (or, from `remote`, any API server) and
//! the real manager (what `quotagate run --embedded` runs, admission only), as Kueue's runner drives minimalkueue: the queues first, then each
//! workload set on its own schedule; a workload is marked Finished its runtime after it was admitted.
//! A TAS config first gets its Nodes (Ready, with the levels' labels and capacity), its Topology and a
//! flavor naming it, as Kueue's topology generator makes them. Everything the run measures is taken
//! here, from one watch of all Workloads.

use std::collections::{BTreeMap, HashMap};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::{NODE_PODS, Plan, QueuePlan, TasPlan};
use crate::api::kueue::constants::condition;
use crate::api::kueue::{
    ClusterQueue, ClusterQueuePreemption, FlavorQuotas, LocalQueue, ResourceFlavor, Topology, TopologyLevel,
    TopologySpec, Workload,
};
use crate::wiring::manager::{ManagerOptions, run_manager};

/// Kueue's generator labels: the runtime and the class of a workload.
pub const RUNNING_TIME_LABEL: &str = "kueue.x-k8s.io/performance-scheduler-running-ms";
pub const CLASS_LABEL: &str = "kueue.x-k8s.io/performance-scheduler-class";

/// No workload finished for this long while some are unfinished: the run stops with what is stuck.
const STALL: Duration = Duration::from_secs(120);

/// One workload as the runner saw it.
#[derive(Clone, Debug)]
struct Rec {
    class: String,
    queue: usize,
    request_m: i64,
    runtime: Duration,
    created: Instant,
    first_admitted: Option<Instant>,
    admitted: Option<Instant>,
    finished: bool,
    /// The TAS constraint's level index (required: all pods in one domain of it; balanced: each slice).
    tas: Option<TasCheck>,
    /// Bumped on every admission, so a finish timer of an earlier admission does nothing.
    epoch: u32,
    events: u32,
}

/// Raw figures of one run; `report` turns them into the table.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    pub wall: Duration,
    /// Per workload class, every time to admission.
    pub admission: BTreeMap<String, Vec<Duration>>,
    /// Per ClusterQueue class: CPU-milli·seconds used, and nominal milli-CPU of the class.
    pub usage: BTreeMap<String, (f64, i64)>,
    pub workloads: u64,
    pub watch_events: u64,
    pub evictions: u64,
    pub requests: u64,
    /// Requests by verb and resource ("PUT workloads/status").
    pub requests_by: BTreeMap<String, u64>,
    pub cpu: Option<Duration>,
    pub max_rss_kib: Option<u64>,
    /// The admission loop's cycles and time per phase over the run.
    pub admission_loop: crate::admission::CycleFigures,
    /// TAS configs: the Nodes generated, and per workload class the admissions checked against the
    /// topology the run made.
    pub tas_nodes: u64,
    pub placements: BTreeMap<String, PlacementTally>,
    /// The API server the run drove ("embedded" or its URL) and what this process held.
    pub ground: String,
    pub process: String,
}

/// What a TAS class's admissions looked like, read from each admission's `topologyAssignment`.
#[derive(Clone, Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementTally {
    pub admissions: u64,
    /// Admitted without a `topologyAssignment` for the podset.
    pub unassigned: u64,
    /// Whose pods span more than one domain of the constraint's level.
    pub spread: u64,
    /// Whose pods the assignment counts differently from the podset's count, or on unknown hosts.
    pub miscounted: u64,
}

/// How an admitted TAS workload's assignment is checked.
#[derive(Clone, Copy, Debug)]
struct TasCheck {
    /// Index of the constraint's level in the topology.
    level: usize,
    /// Pods that must share one domain of that level (all for required, a slice for balanced, 1 for
    /// preferred, which may spread).
    together: i64,
    pods: i64,
}

type Records = Arc<Mutex<HashMap<(usize, String), Rec>>>;

/// A client of `server` that counts its requests by verb and resource.
fn counting_client(
    server: &Arc<crate::embedded::EmbeddedServer>,
    by: Arc<Mutex<BTreeMap<String, u64>>>,
) -> Client {
    let svc = tower::ServiceBuilder::new()
        .map_request(counter(by))
        .service(server.router());
    Client::new(svc, "default")
}

/// Counts each request in `by` under its verb and resource ("PUT workloads/status").
pub(super) fn counter<B>(
    by: Arc<Mutex<BTreeMap<String, u64>>>,
) -> impl Fn(http::Request<B>) -> http::Request<B> + Clone {
    move |r: http::Request<B>| {
        let segs: Vec<&str> = r.uri().path().split('/').filter(|s| !s.is_empty()).collect();
        let plural = plural_of(&segs).unwrap_or("?");
        let status = if segs.last() == Some(&"status") {
            "/status"
        } else {
            ""
        };
        let key = format!("{} {plural}{status}", r.method());
        if let Ok(mut m) = by.lock() {
            *m.entry(key).or_default() += 1;
        }
        r
    }
}

/// The resource plural of an API path (`/apis/g/v/namespaces/ns/plural/name`, `/api/v1/plural`).
fn plural_of<'a>(segs: &[&'a str]) -> Option<&'a str> {
    let rest = match *segs.first()? {
        "api" => segs.get(2..)?,
        "apis" => segs.get(3..)?,
        _ => return None,
    };
    match rest {
        ["namespaces", _, plural, ..] => Some(plural),
        [plural, ..] => Some(plural),
        [] => None,
    }
}

fn cpu_and_rss() -> (Option<Duration>, Option<u64>) {
    // /proc exports CPU time in USER_HZ, fixed at 100 per second on Linux.
    let cpu = std::fs::read_to_string("/proc/self/stat").ok().and_then(|s| {
        let after = s.rsplit_once(')')?.1;
        let f: Vec<&str> = after.split_whitespace().collect();
        let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
        Some(Duration::from_millis(ticks * 10))
    });
    let rss = std::fs::read_to_string("/proc/self/status").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("VmHWM:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    });
    (cpu, rss)
}

async fn create_queues(client: &Client, plan: &Plan) -> Result<(), String> {
    let pp = PostParams::default();
    let rf = match &plan.tas {
        Some(t) => ResourceFlavor::build(&plan.flavor)
            .node_label(&t.node_group_label, super::config::NODE_GROUP_VALUE)
            .topology(&t.topology)
            .build(),
        None => ResourceFlavor::build(&plan.flavor).build(),
    };
    let mut rf = rf;
    rf.metadata
        .labels
        .get_or_insert_default()
        .extend(plan.labels.clone());
    Api::<ResourceFlavor>::all(client.clone())
        .create(&pp, &rf)
        .await
        .map_err(|e| format!("creating ResourceFlavor {}: {e}", plan.flavor))?;
    for q in &plan.queues {
        let nominal = format!("{}m", q.nominal_m);
        let limit = q.borrowing_limit_m.map(|b| format!("{b}m"));
        let quotas: FlavorQuotas = FlavorQuotas::build(&plan.flavor)
            .resource_with_limits("cpu", &nominal, limit.as_deref(), None)
            .build();
        let cq = ClusterQueue::build(&q.name)
            .cohort(&q.cohort)
            .flavor_quotas(quotas)
            .preemption(ClusterQueuePreemption {
                reclaim_within_cohort: Some(q.reclaim_within_cohort),
                within_cluster_queue: Some(q.within_cluster_queue),
                ..Default::default()
            })
            .build();
        let mut cq = cq;
        cq.metadata
            .labels
            .get_or_insert_default()
            .extend(plan.labels.clone());
        let mut ns = Namespace::default();
        ns.metadata.name = Some(q.name.clone());
        ns.metadata.labels = Some(plan.labels.clone());
        Api::<Namespace>::all(client.clone())
            .create(&pp, &ns)
            .await
            .map_err(|e| format!("creating Namespace {}: {e}", q.name))?;
        Api::<ClusterQueue>::all(client.clone())
            .create(&pp, &cq)
            .await
            .map_err(|e| format!("creating ClusterQueue {}: {e}", q.name))?;
        let mut lq = LocalQueue::build(&q.name, &q.name).cluster_queue(&q.name).build();
        lq.metadata
            .labels
            .get_or_insert_default()
            .extend(plan.labels.clone());
        Api::<LocalQueue>::namespaced(client.clone(), &q.name)
            .create(&pp, &lq)
            .await
            .map_err(|e| format!("creating LocalQueue {}: {e}", q.name))?;
    }
    // The run starts once the manager has every ClusterQueue active, as Kueue's runner starts after
    // its generation.
    let api = Api::<ClusterQueue>::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let cqs = api.list(&Default::default()).await.map_err(|e| e.to_string())?;
        let active = cqs
            .items
            .iter()
            .filter(|c| {
                c.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Active" && c.status == crate::api::conditions::TRUE)
                })
            })
            .count();
        if active == plan.queues.len() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "only {active} of {} ClusterQueues became Active within 60 s",
                plan.queues.len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A TAS config's Nodes (created, then their status written Ready with the node capacity, as Kueue's
/// `CreateNodesWithStatus`) and its Topology.
async fn create_topology(client: &Client, t: &TasPlan) -> Result<(), String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let status = serde_json::json!({"status": {
        "capacity": {"cpu": t.node_cpu, "memory": t.node_memory, "pods": NODE_PODS.to_string()},
        "allocatable": {"cpu": t.node_cpu, "memory": t.node_memory, "pods": NODE_PODS.to_string()},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "generated by quotagate bench e2e"}],
    }});
    let made = futures::stream::iter(t.nodes())
        .map(|(name, labels)| {
            let (nodes, status) = (nodes.clone(), status.clone());
            async move {
                let mut n = Node::default();
                n.metadata.name = Some(name.clone());
                n.metadata.labels = Some(labels);
                nodes
                    .create(&PostParams::default(), &n)
                    .await
                    .map_err(|e| format!("creating Node {name}: {e}"))?;
                nodes
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                    .map_err(|e| format!("writing the status of Node {name}: {e}"))?;
                Ok::<(), String>(())
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    made.into_iter().collect::<Result<Vec<()>, String>>()?;
    let topology = Topology::new(
        &t.topology,
        TopologySpec {
            levels: t
                .levels
                .iter()
                .map(|(_, _, label)| TopologyLevel {
                    node_label: label.clone(),
                })
                .collect(),
        },
    );
    Api::<Topology>::all(client.clone())
        .create(&PostParams::default(), &topology)
        .await
        .map_err(|e| format!("creating Topology {}: {e}", t.topology))?;
    Ok(())
}

/// The check of a template's placements: none without a topology or a TAS level.
fn tas_check(plan: &Plan, w: &super::config::WorkloadTemplate) -> Option<TasCheck> {
    let t = plan.tas.as_ref()?;
    let req = w.topology_request()?;
    let pods = i64::from(w.pod_count.unwrap_or(1).max(1));
    let (level, together) = if let Some(l) = &req.required {
        (l, pods)
    } else if let Some(l) = &req.preferred {
        (l, 1)
    } else {
        let l = req.pod_set_slice_required_topology.as_ref()?;
        (l, i64::from(req.pod_set_slice_size.unwrap_or(1).max(1)))
    };
    let level = t.levels.iter().position(|(_, _, n)| n == level)?;
    Some(TasCheck {
        level,
        together,
        pods,
    })
}

/// Host name -> its label values at every level, for reading hostname-only assignments.
type Hosts = Arc<HashMap<String, Vec<String>>>;

fn hosts(plan: &Plan) -> Hosts {
    let Some(t) = &plan.tas else {
        return Arc::default();
    };
    Arc::new(
        t.nodes()
            .into_iter()
            .map(|(name, labels)| {
                let values = t
                    .levels
                    .iter()
                    .map(|(_, _, l)| labels.get(l).cloned().unwrap_or_default());
                (name, values.collect())
            })
            .collect(),
    )
}

/// Checks an admitted workload's first podset assignment against its constraint.
fn check_placement(w: &Workload, c: TasCheck, levels: usize, hosts: &Hosts, tally: &mut PlacementTally) {
    tally.admissions += 1;
    let Some(ta) = w
        .admission()
        .and_then(|a| a.pod_set_assignments.first())
        .and_then(|p| p.topology_assignment.as_ref())
    else {
        tally.unassigned += 1;
        return;
    };
    // Each pod's values at every level, in the assignment's order.
    let mut pods: Vec<Vec<String>> = Vec::new();
    for d in crate::api::kueue::tas::decode_assignment(ta) {
        let full = if ta.levels.len() == levels {
            Some(d.values.clone())
        } else {
            d.values.last().and_then(|h| hosts.get(h)).cloned()
        };
        let Some(full) = full else {
            tally.miscounted += 1;
            return;
        };
        // Never more pods than the podset has: a miscount stops here, before allocating.
        let n = i64::from(d.count.max(0));
        if pods.len() as i64 + n > c.pods {
            tally.miscounted += 1;
            return;
        }
        for _ in 0..n {
            pods.push(full.clone());
        }
    }
    if pods.len() as i64 != c.pods {
        tally.miscounted += 1;
        return;
    }
    let together = usize::try_from(c.together.max(1)).unwrap_or(1);
    let spread = pods
        .chunks(together)
        .any(|group| group.iter().any(|p| p[..=c.level] != group[0][..=c.level]));
    if spread {
        tally.spread += 1;
    }
}

/// Creates one workload set of one queue on its schedule (the k-th at t0 + k·interval).
async fn create_set(
    client: Client,
    records: Records,
    plan: Arc<Plan>,
    q_idx: usize,
    set_idx: usize,
    t0: Instant,
) -> Result<(), String> {
    let q: &QueuePlan = &plan.queues[q_idx];
    let set = &q.sets[set_idx];
    let api: Api<Workload> = Api::namespaced(client, &q.name);
    let interval = Duration::from_millis(set.creation_interval_ms);
    let mut k: u32 = 0;
    for si in 0..set.count {
        for (i, w) in set.workloads.iter().enumerate() {
            k += 1;
            tokio::time::sleep_until(t0 + interval * k).await;
            let name = format!("{}-{set_idx}-{si}-{i}", w.class_name);
            let pods = w.pod_count.unwrap_or(1).max(1);
            let request_m = super::config::milli_cpu(&w.request, "request")?;
            let cpu = format!("{request_m}m");
            let mut wl = Workload::build(&name, &q.name)
                .queue(&q.name)
                .priority(w.priority)
                .label(RUNNING_TIME_LABEL, &w.runtime_ms.to_string())
                .label(CLASS_LABEL, &w.class_name)
                .podset("main", pods as i32, [("cpu", cpu.as_str())])
                .build();
            wl.metadata
                .labels
                .get_or_insert_default()
                .extend(plan.labels.clone());
            if plan.tas.is_some()
                && let Some(ps) = wl.spec.pod_sets.first_mut()
            {
                ps.topology_request = w.topology_request();
            }
            records.lock().map_err(|_| "poisoned")?.insert(
                (q_idx, name.clone()),
                Rec {
                    class: w.class_name.clone(),
                    queue: q_idx,
                    request_m: request_m * i64::from(pods),
                    runtime: Duration::from_millis(w.runtime_ms),
                    created: Instant::now(),
                    first_admitted: None,
                    admitted: None,
                    finished: false,
                    epoch: 0,
                    events: 0,
                    tas: tas_check(&plan, w),
                },
            );
            api.create(&PostParams::default(), &wl)
                .await
                .map_err(|e| format!("creating Workload {}/{name}: {e}", q.name))?;
        }
    }
    Ok(())
}

/// Marks `name` Finished (reason ByTest, as Kueue's runner does), only while it is still admitted in
/// the ClusterQueue the runner saw: a JSON patch whose test fails if it was evicted meanwhile.
async fn finish(client: &Client, ns: &str, name: &str, cq: &str) {
    let now = jiff::Timestamp::now().to_string();
    let patch: json_patch::Patch = match serde_json::from_value(serde_json::json!([
        {"op": "test", "path": "/status/admission/clusterQueue", "value": cq},
        {"op": "add", "path": "/status/conditions/-", "value": {
            "type": condition::FINISHED, "status": "True", "reason": "ByTest",
            "message": "By test runner", "lastTransitionTime": now, "observedGeneration": 1}},
    ])) {
        Ok(p) => p,
        Err(_) => return,
    };
    let api: Api<Workload> = Api::namespaced(client.clone(), ns);
    if let Err(e) = api
        .patch_status(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
    {
        tracing::debug!(workload = %name, error = %e, "finishing failed (evicted meanwhile?)");
    }
}

fn is_admitted(w: &Workload) -> bool {
    w.is_admitted() && !w.is_finished()
}

/// The embedded server `quotagate run --embedded` starts, with etcd's own default storage quota
/// (2 GiB, what Kueue's runner has in envtest) instead of the embedded 256 MiB: every workload a run
/// creates stays until the end, and both the large-scale config's 50,000 Workloads and the `tas`
/// config's 15,000 (with 640 Nodes and their Events) were refused writes ("database space exceeded")
/// at the default before anything was measured.
fn bench_server() -> Arc<crate::embedded::EmbeddedServer> {
    use crate::embedded::{QuotagateAdmission, QuotagateCrds, ServerConfig, StoreConfig};
    let config = ServerConfig {
        store: StoreConfig {
            quota_bytes: 2 << 30,
            ..StoreConfig::default()
        },
        ..ServerConfig::default()
    };
    crate::embedded::EmbeddedServer::with_config(
        &QuotagateCrds,
        Arc::new(QuotagateAdmission::default()),
        config,
    )
}

/// Runs `plan` to the last finish on an embedded server of its own, the manager in this process.
/// `progress` draws a line on stderr (only on a terminal).
pub async fn run(plan: &Plan, progress: bool) -> Result<Measured, String> {
    let server = bench_server();
    let by = Arc::new(Mutex::new(BTreeMap::new()));
    let client = counting_client(&server, by.clone());
    let manager = Manager::start(&client);
    let m = drive(&client, plan, &by, Some(&manager), progress).await;
    manager.stop().await;
    let mut m = m?;
    m.ground = "embedded".into();
    m.process = "API server + controllers + runner".into();
    Ok(m)
}

/// The manager `quotagate run` runs (admission only, no leader election), in this process.
pub(super) struct Manager {
    cancel: CancellationToken,
    stats: crate::admission::CycleStats,
    task: tokio::task::JoinHandle<Result<(), crate::wiring::manager::ManagerError>>,
}

impl Manager {
    pub(super) fn start(client: &Client) -> Manager {
        let cancel = CancellationToken::new();
        let stats = crate::admission::CycleStats::default();
        let opts = ManagerOptions {
            leader_election: false,
            cycle_stats: stats.clone(),
            ..ManagerOptions::default()
        };
        let c = cancel.clone();
        let task = tokio::spawn(run_manager(
            client.clone(),
            opts,
            async move { c.cancelled().await },
        ));
        Manager { cancel, stats, task }
    }

    pub(super) async fn stop(self) {
        self.cancel.cancel();
        let _ = self.task.await;
    }
}

/// Creates `plan`'s queues through `client` and runs it to the last finish, measuring; `manager`, when
/// it runs in this process, for its admission loop's figures and to stop if it stops. `by` counts
/// `client`'s requests.
pub(super) async fn drive(
    client: &Client,
    plan: &Plan,
    by: &Arc<Mutex<BTreeMap<String, u64>>>,
    manager: Option<&Manager>,
    progress: bool,
) -> Result<Measured, String> {
    let stats = manager.map(|m| m.stats.clone()).unwrap_or_default();
    if let Some(t) = &plan.tas {
        create_topology(client, t).await?;
    }
    create_queues(client, plan).await?;
    let (cpu0, _) = cpu_and_rss();
    let loop0 = stats.figures();
    let requests0: u64 = by.lock().map_err(|_| "poisoned")?.values().sum();

    let tally = Tally {
        records: Arc::new(Mutex::new(HashMap::new())),
        finished: Arc::new(AtomicU64::new(0)),
        admitted_n: Arc::new(AtomicU64::new(0)),
        evictions: Arc::new(AtomicU64::new(0)),
        usage: Arc::new(Mutex::new(vec![0.0; plan.queues.len()])),
        last_finish: Arc::new(Mutex::new(None::<Instant>)),
        placements: Arc::new(Mutex::new(BTreeMap::new())),
    };
    let watch = watch_workloads(client.clone(), plan, tally.clone());
    let t0 = Instant::now();
    let tty = progress && std::io::stderr().is_terminal();
    let outcome = create_and_wait(client, plan, &tally, t0, tty, manager.map(|m| &m.task)).await;
    if tty {
        eprintln!();
    }
    watch.abort();
    outcome?;
    let Tally {
        records,
        evictions,
        usage,
        last_finish,
        placements,
        ..
    } = &tally;
    let total = plan.workloads;
    let end = last_finish
        .lock()
        .map_err(|_| "poisoned")?
        .unwrap_or_else(Instant::now);
    let (cpu1, rss) = cpu_and_rss();
    // The guards end with this block, before the manager is awaited: a finishing task still
    // running would block on them.
    let m = {
        let requests_by = by.lock().map_err(|_| "poisoned")?.clone();
        let recs = records.lock().map_err(|_| "poisoned")?;
        let mut m = Measured {
            wall: end - t0,
            workloads: total,
            evictions: evictions.load(Ordering::Relaxed),
            requests: requests_by.values().sum::<u64>() - requests0,
            requests_by,
            cpu: cpu0.zip(cpu1).map(|(a, b)| b.saturating_sub(a)),
            max_rss_kib: rss,
            admission_loop: since(&loop0, &stats.figures()),
            tas_nodes: plan.tas.as_ref().map_or(0, |t| t.nodes),
            placements: placements.lock().map_err(|_| "poisoned")?.clone(),
            ..Measured::default()
        };
        for r in recs.values() {
            m.watch_events += u64::from(r.events);
            if let Some(a) = r.first_admitted {
                m.admission
                    .entry(r.class.clone())
                    .or_default()
                    .push(a - r.created);
            }
        }
        let used = usage.lock().map_err(|_| "poisoned")?;
        for (q, u) in plan.queues.iter().zip(used.iter()) {
            let e = m.usage.entry(q.class.clone()).or_default();
            e.0 += u;
            e.1 += q.nominal_m;
        }
        m
    };
    Ok(m)
}

/// What the run's watch and finish timers keep: each workload's record and the running counts.
#[derive(Clone)]
struct Tally {
    records: Records,
    finished: Arc<AtomicU64>,
    admitted_n: Arc<AtomicU64>,
    evictions: Arc<AtomicU64>,
    /// Per queue, milli-CPU x seconds held while admitted.
    usage: Arc<Mutex<Vec<f64>>>,
    last_finish: Arc<Mutex<Option<Instant>>>,
    /// Per TAS workload class, its admissions' placements.
    placements: Arc<Mutex<BTreeMap<String, PlacementTally>>>,
}

/// One watch of all Workloads: admission, eviction and finish times, and the finish timers.
fn watch_workloads(client: Client, plan: &Plan, tally: Tally) -> tokio::task::JoinHandle<()> {
    let Tally {
        records,
        finished,
        admitted_n,
        evictions,
        usage,
        last_finish,
        placements,
    } = tally;
    let levels = plan.tas.as_ref().map_or(0, |t| t.levels.len());
    let hosts = hosts(plan);
    let queue_index: HashMap<String, usize> = plan
        .queues
        .iter()
        .enumerate()
        .map(|(i, q)| (q.name.clone(), i))
        .collect();
    let queues: Vec<String> = plan.queues.iter().map(|q| q.name.clone()).collect();
    tokio::spawn(async move {
        let api: Api<Workload> = Api::all(client.clone());
        let stream = watcher(api, watcher::Config::default()).applied_objects();
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            let Ok(w) = ev else { continue };
            let ns = w.namespace().unwrap_or_default();
            let Some(&qi) = queue_index.get(&ns) else {
                continue;
            };
            let now = Instant::now();
            let mut timer = None;
            {
                let Ok(mut recs) = records.lock() else { return };
                let Some(r) = recs.get_mut(&(qi, w.name_any())) else {
                    continue;
                };
                r.events += 1;
                let on = is_admitted(&w);
                match (r.admitted, on) {
                    (None, true) if !r.finished => {
                        r.admitted = Some(now);
                        r.first_admitted.get_or_insert(now);
                        r.epoch += 1;
                        admitted_n.fetch_add(1, Ordering::Relaxed);
                        if let (Some(c), Ok(mut p)) = (r.tas, placements.lock()) {
                            let t = p.entry(r.class.clone()).or_default();
                            check_placement(&w, c, levels, &hosts, t);
                        }
                        let cq = w.admission().map(|a| a.cluster_queue.clone()).unwrap_or_default();
                        timer = Some((r.runtime, r.epoch, cq));
                    }
                    (Some(since), false) => {
                        r.admitted = None;
                        if let Ok(mut u) = usage.lock() {
                            u[r.queue] += r.request_m as f64 * (now - since).as_secs_f64();
                        }
                        if w.is_finished() {
                            r.finished = true;
                            finished.fetch_add(1, Ordering::Relaxed);
                            if let Ok(mut l) = last_finish.lock() {
                                *l = Some(now);
                            }
                        } else {
                            evictions.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    _ => {}
                }
            }
            if let Some((runtime, epoch, cq)) = timer {
                let (client, records, name, ns) =
                    (client.clone(), records.clone(), w.name_any(), queues[qi].clone());
                tokio::spawn(async move {
                    tokio::time::sleep(runtime).await;
                    let current = records.lock().ok().and_then(|r| {
                        r.get(&(qi, name.clone()))
                            .map(|r| r.epoch == epoch && r.admitted.is_some())
                    });
                    if current == Some(true) {
                        finish(&client, &ns, &name, &cq).await;
                    }
                });
            }
        }
    })
}

/// Creates the plan's workloads on their schedule and waits until every one has finished (a line of
/// progress on stderr with `tty`); an error when a creator fails, the run stalls or the manager stops.
async fn create_and_wait<T>(
    client: &Client,
    plan: &Plan,
    tally: &Tally,
    t0: Instant,
    tty: bool,
    manager: Option<&tokio::task::JoinHandle<T>>,
) -> Result<(), String> {
    let Tally {
        records,
        finished,
        admitted_n,
        ..
    } = tally;
    let mut creators = tokio::task::JoinSet::new();
    let shared = Arc::new(plan.clone());
    for (qi, q) in plan.queues.iter().enumerate() {
        for si in 0..q.sets.len() {
            creators.spawn(create_set(
                client.clone(),
                records.clone(),
                shared.clone(),
                qi,
                si,
                t0,
            ));
        }
    }
    let total = plan.workloads;
    let mut last_progress = (0u64, Instant::now());
    loop {
        tokio::select! {
            Some(r) = creators.join_next() => {
                match r {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => break Err(e),
                    Err(e) => break Err(format!("a workload creator failed: {e}")),
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
        let done = finished.load(Ordering::Relaxed);
        if tty {
            let created = records.lock().map(|r| r.len()).unwrap_or(0);
            eprint!(
                "\r{:>6.1} s  created {created}/{total}  admitted {}  finished {done}/{total}   ",
                t0.elapsed().as_secs_f64(),
                admitted_n.load(Ordering::Relaxed),
            );
        }
        if done >= total {
            break Ok(());
        }
        if done != last_progress.0 {
            last_progress = (done, Instant::now());
        } else if last_progress.1.elapsed() > STALL && creators.is_empty() {
            break Err(format!(
                "stalled: {} of {total} workloads unfinished and none finished for {} s",
                total - done,
                STALL.as_secs()
            ));
        }
        if manager.is_some_and(|m| m.is_finished()) {
            break Err("the manager stopped during the run".into());
        }
    }
}

/// The loop's figures between two readings (the queues' set-up is not part of the run).
fn since(
    a: &crate::admission::CycleFigures,
    b: &crate::admission::CycleFigures,
) -> crate::admission::CycleFigures {
    let mut phases = b.phases;
    for (p, q) in phases.iter_mut().zip(a.phases) {
        *p = p.saturating_sub(q);
    }
    crate::admission::CycleFigures {
        cycles: b.cycles - a.cycles.min(b.cycles),
        phases,
        examined: b.examined - a.examined.min(b.examined),
        read: b.read - a.read.min(b.read),
    }
}

#[cfg(test)]
mod tests {
    use super::plural_of;

    #[test]
    fn request_paths_name_their_resource() {
        let segs = |p: &'static str| p.split('/').filter(|s| !s.is_empty()).collect::<Vec<_>>();
        assert_eq!(
            plural_of(&segs("/apis/kueue.x-k8s.io/v1beta2/namespaces/a/workloads/w")),
            Some("workloads")
        );
        assert_eq!(plural_of(&segs("/api/v1/namespaces")), Some("namespaces"));
        assert_eq!(
            plural_of(&segs("/apis/kueue.x-k8s.io/v1beta2/clusterqueues")),
            Some("clusterqueues")
        );
    }
}
