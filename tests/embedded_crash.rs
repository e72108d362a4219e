//! Crash tests of the whole process: `quotagate run --embedded --data-dir D` as a child process,
//! driven through `kube::Client` with a queue-managed workload mix, killed with SIGKILL at seeded
//! random moments and restarted on the same directory. After every restart: no acknowledged object
//! lost, no admitted Workload forgotten or admitted again, quota never exceeded, ClusterQueue usage
//! equal to the sum of the admitted Workloads; at the end the scenario completes.
//!
//! The expectations are Kueue's (a workload's quota reservation survives a controller restart and is
//! counted once, `test/integration/singlecluster/scheduler` restart cases) on k3s's storage promise
//! (an acknowledged write survives a crash). Rerun a failure with QUOTAGATE_CRASH_SEED=<seed>.

use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::{Client, ResourceExt};
use quotagate::api::kueue::builders::condition;
use quotagate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Workload};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::process::{Child, Command};

/// Workloads in the scenario, CPUs of quota, and how long a restart may take to converge.
const WORKLOADS: usize = 60;
const QUOTA_CPU: i64 = 10;
const CONVERGE: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Seen {
    /// Workload name -> uid, for every create the server acknowledged.
    acked: BTreeMap<String, String>,
    /// Workload name -> its QuotaReserved lastTransitionTime when first seen reserved.
    reserved: BTreeMap<String, String>,
    finished: BTreeMap<String, ()>,
    /// Status updates (a Workload finished) the server acknowledged.
    updates: usize,
    /// Milli-CPU each workload asks for.
    cpu: BTreeMap<String, i64>,
    next: usize,
}

struct Server {
    child: Child,
    client: Client,
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    l.local_addr().expect("bound address").port()
}

async fn start(dir: &Path, seed: u64) -> Server {
    let kubeconfig = dir.join("kubeconfig");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .expect("server log");
    let child = Command::new(env!("CARGO_BIN_EXE_quotagate"))
        .args([
            "run",
            "--embedded",
            "--no-ray-operator",
            "--pod-start-delay",
            "0ms",
            "--data-dir",
        ])
        .arg(dir.join("data"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .stdout(log.try_clone().expect("log handle"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("start quotagate");
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        if let Some(client) = client_from(&kubeconfig).await
            && Api::<Workload>::namespaced(client.clone(), "default")
                .list(&ListParams::default().limit(1))
                .await
                .is_ok()
        {
            return Server { child, client };
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "seed {seed}: the restarted server did not answer within {CONVERGE:?}; see {}",
            dir.join("server.log").display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A client from the kubeconfig once it names the port this process listens on (the file of the
/// previous run is there until the new one overwrites it; a stale one just fails to connect).
async fn client_from(path: &Path) -> Option<Client> {
    let kc = kube::config::Kubeconfig::read_from(path).ok()?;
    let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .ok()?;
    Client::try_from(config).ok()
}

fn cpu_of(seen: &Seen, name: &str) -> i64 {
    seen.cpu.get(name).copied().unwrap_or_default()
}

/// Creates the queues (idempotent), then workloads one by one, finishing admitted ones as it
/// goes: runs until killed (or the scenario is complete), recording what the server acknowledged.
async fn drive(client: Client, seen: Arc<Mutex<Seen>>, rng: Arc<Mutex<StdRng>>) {
    let pp = PostParams::default();
    let setup = async {
        let rf: Api<ResourceFlavor> = Api::all(client.clone());
        let cq: Api<ClusterQueue> = Api::all(client.clone());
        let lq: Api<LocalQueue> = Api::namespaced(client.clone(), "default");
        let flavor = ResourceFlavor::build("default").build();
        let mut queue = ClusterQueue::build("cq")
            .flavor("default", [("cpu", "10")])
            .build();
        queue.spec.namespace_selector = Some(Default::default());
        let local = LocalQueue::build("lq", "default").cluster_queue("cq").build();
        for r in [
            rf.create(&pp, &flavor).await.map(drop),
            cq.create(&pp, &queue).await.map(drop),
            lq.create(&pp, &local).await.map(drop),
        ] {
            match r {
                Ok(()) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(_) => return false,
            }
        }
        true
    };
    if !setup.await {
        return;
    }
    let workloads: Api<Workload> = Api::namespaced(client.clone(), "default");
    loop {
        // Paced like jobs arriving, so the scenario spans the kills instead of ending before them.
        let pace = Duration::from_millis(rng.lock().unwrap().random_range(20..80));
        tokio::time::sleep(pace).await;
        let next = seen.lock().unwrap().next;
        if next < WORKLOADS {
            let name = format!("wl-{next:03}");
            // Fixed per name: a retry after an unacknowledged create asks for the same.
            let cpu = cpu_of(&seen.lock().unwrap(), &name) / 1000;
            let wl = Workload::build(&name, "default")
                .queue("lq")
                .podset("main", 1, [("cpu", cpu.to_string().as_str())])
                .build();
            match workloads.create(&pp, &wl).await {
                Ok(w) => {
                    let mut s = seen.lock().unwrap();
                    s.acked.insert(name, w.uid().unwrap_or_default());
                    s.next += 1;
                }
                // Created before a kill but never acknowledged: it is there, so go on.
                Err(kube::Error::Api(e)) if e.code == 409 => seen.lock().unwrap().next += 1,
                Err(_) => continue,
            }
        }
        let Ok(list) = workloads.list(&ListParams::default()).await else {
            continue;
        };
        observe(&seen, &list.items);
        let mut to_finish = Vec::new();
        for w in &list.items {
            if w.has_quota_reservation() && !w.is_finished() && rng.lock().unwrap().random_bool(0.3) {
                to_finish.push(w.clone());
            }
        }
        for mut w in to_finish {
            let status = w.status.get_or_insert_with(Default::default);
            status.conditions.push(condition(
                "Finished",
                true,
                "Succeeded",
                "the job ran to completion",
            ));
            if let Ok(done) = workloads
                .replace_status(&w.name_any(), &PostParams::default(), &w)
                .await
            {
                seen.lock().unwrap().updates += 1;
                observe(&seen, std::slice::from_ref(&done));
            }
        }
        let s = seen.lock().unwrap();
        if s.next >= WORKLOADS && s.finished.len() >= WORKLOADS {
            return;
        }
    }
}

/// Records reservations and finishes the server has shown (everything shown is on disk).
fn observe(seen: &Mutex<Seen>, items: &[Workload]) {
    let mut s = seen.lock().unwrap();
    for w in items {
        let name = w.name_any();
        if w.has_quota_reservation()
            && let Some(c) = w.status.as_ref().and_then(|st| st.condition("QuotaReserved"))
        {
            s.reserved
                .entry(name.clone())
                .or_insert_with(|| format!("{:?}", c.last_transition_time));
        }
        if w.is_finished() {
            s.finished.insert(name, ());
        }
    }
}

/// Milli-CPU the ClusterQueue reports as reserved.
fn cq_reserved(cq: &Value) -> i64 {
    let mut total = 0;
    for f in cq
        .pointer("/status/flavorsReservation")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for r in f.get("resources").and_then(Value::as_array).into_iter().flatten() {
            if r.get("name").and_then(Value::as_str) == Some("cpu")
                && let Ok(q) = quotagate::api::quantity::Quantity::parse(
                    r.get("total").and_then(Value::as_str).unwrap_or(""),
                )
            {
                total += q.milli_value();
            }
        }
    }
    total
}

/// The checks after a restart; panics naming the seed and the broken promise.
async fn check(client: &Client, seen: &Mutex<Seen>, seed: u64, round: usize) {
    let workloads: Api<Workload> = Api::namespaced(client.clone(), "default");
    let list = workloads
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("seed {seed} round {round}: list: {e}"));
    let by_name: BTreeMap<String, &Workload> = list.items.iter().map(|w| (w.name_any(), w)).collect();
    {
        let s = seen.lock().unwrap();
        for (name, uid) in &s.acked {
            let w = by_name
                .get(name)
                .unwrap_or_else(|| panic!("seed {seed} round {round}: acknowledged Workload {name} is gone"));
            assert_eq!(
                w.uid().as_deref(),
                Some(uid.as_str()),
                "seed {seed} round {round}: {name} has another uid"
            );
        }
        for (name, at) in &s.reserved {
            let w = by_name
                .get(name)
                .unwrap_or_else(|| panic!("seed {seed} round {round}: reserved Workload {name} is gone"));
            if w.is_finished() {
                continue;
            }
            let now = w.status.as_ref().and_then(|st| st.condition("QuotaReserved"));
            assert!(
                w.has_quota_reservation(),
                "seed {seed} round {round}: {name} was reserved and is not any more: {:?}",
                w.status
            );
            let now = now.map(|c| format!("{:?}", c.last_transition_time));
            assert_eq!(
                now.as_ref(),
                Some(at),
                "seed {seed} round {round}: {name} was admitted a second time"
            );
        }
        for name in s.finished.keys() {
            assert!(
                by_name.get(name).is_some_and(|w| w.is_finished()),
                "seed {seed} round {round}: finished Workload {name} is not finished"
            );
        }
        let used: i64 = list
            .items
            .iter()
            .filter(|w| w.has_quota_reservation() && !w.is_finished())
            .map(|w| cpu_of(&s, &w.name_any()))
            .sum();
        assert!(
            used <= QUOTA_CPU * 1000,
            "seed {seed} round {round}: {used}m CPU reserved over a quota of {QUOTA_CPU}"
        );
    }
    observe(seen, &list.items);
    if seen.lock().unwrap().acked.is_empty() {
        return;
    }
    // The ClusterQueue's status is the controller's to recompute after the restart: wait for it.
    let cqs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::erase::<ClusterQueue>(&()),
    );
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        let (Ok(list), Ok(cq)) = (workloads.list(&ListParams::default()).await, cqs.get("cq").await) else {
            panic!("seed {seed} round {round}: the ClusterQueue or the Workloads cannot be read");
        };
        let sum: i64 = {
            let s = seen.lock().unwrap();
            list.items
                .iter()
                .filter(|w| w.has_quota_reservation() && !w.is_finished())
                .map(|w| cpu_of(&s, &w.name_any()))
                .sum()
        };
        let reported = cq_reserved(&serde_json::to_value(&cq).unwrap_or_default());
        if reported == sum {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "seed {seed} round {round}: ClusterQueue reports {reported}m CPU reserved, admitted Workloads sum to {sum}m"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn scratch(seed: u64) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("quotagate-crash-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_moments_loses_nothing_acknowledged_and_admits_once() {
    let seed = std::env::var("QUOTAGATE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let kills: usize = std::env::var("QUOTAGATE_CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(22);
    println!("crash test seed {seed} ({kills} kills): rerun with QUOTAGATE_CRASH_SEED={seed}");
    let dir = scratch(seed);
    let rng = Arc::new(Mutex::new(StdRng::seed_from_u64(seed)));
    let mut seen = Seen::default();
    for i in 0..WORKLOADS {
        let cpu = rng.lock().unwrap().random_range(1..=3i64);
        seen.cpu.insert(format!("wl-{i:03}"), cpu * 1000);
    }
    let seen = Arc::new(Mutex::new(seen));
    for round in 0..kills {
        let mut server = start(&dir, seed).await;
        check(&server.client, &seen, seed, round).await;
        let run_for = Duration::from_millis(rng.lock().unwrap().random_range(20..600));
        let driving = drive(server.client.clone(), seen.clone(), rng.clone());
        tokio::select! {
            _ = driving => {}
            _ = tokio::time::sleep(run_for) => {}
        }
        server.child.start_kill().expect("SIGKILL");
        server.child.wait().await.expect("reap the killed server");
        let s = seen.lock().unwrap();
        println!(
            "kill {round} after {run_for:?}: {} created, {} reserved, {} finished",
            s.acked.len(),
            s.reserved.len(),
            s.finished.len()
        );
    }
    // No more kills: the scenario must complete on what the crashes left.
    let mut server = start(&dir, seed).await;
    check(&server.client, &seen, seed, kills).await;
    let finished = tokio::time::timeout(
        Duration::from_secs(60),
        drive(server.client.clone(), seen.clone(), rng.clone()),
    )
    .await;
    assert!(
        finished.is_ok(),
        "seed {seed}: the scenario did not complete after the last restart"
    );
    check(&server.client, &seen, seed, kills + 1).await;
    let all = Api::<Workload>::namespaced(server.client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("list");
    assert_eq!(all.items.len(), WORKLOADS, "seed {seed}: one Workload per create");
    assert!(
        all.items.iter().all(Workload::is_finished),
        "seed {seed}: every Workload ran and finished"
    );
    // Every check above panics on a lost write, so reaching here means none was lost.
    let (creates, updates) = {
        let s = seen.lock().unwrap();
        (s.acked.len(), s.updates)
    };
    println!(
        "seed {seed}: {kills} kills; acknowledged writes: {creates} creates, {updates} status updates; lost: 0"
    );
    server.child.start_kill().expect("SIGKILL");
    server.child.wait().await.expect("reap");
    let _ = std::fs::remove_dir_all(&dir);
}
