//! Admission-core throughput on Kueue's performance shapes (test/performance/scheduler configs
//! `baseline` and `large-scale`), with every workload pending at once. Prints figures; not a test.
//!
//! Run: cargo bench --bench queue
//!
//! Each workload "runs" for two cycles after admission, then is released; preempted workloads are
//! released and requeued. An admission attempt is one workload evaluated by a cycle (admitted,
//! parked, preempting or retried). Memory is measured with a counting global allocator: bytes
//! live after adding 10,000 pending workloads minus bytes live before.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use quotagate::queue::{
    AdmissionCore, ClusterQueueModel, FlavorModel, ReclaimWithinCohort, WithinClusterQueue, WorkloadKey,
    WorkloadModel,
};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

struct Shape {
    name: &'static str,
    cohorts: usize,
    cqs_per_cohort: usize,
    /// (class, count per ClusterQueue, cpu, priority, arrival interval ms)
    classes: [(&'static str, usize, i64, i32, i64); 3],
}

fn core_for(shape: &Shape) -> AdmissionCore {
    let mut core = AdmissionCore::new();
    core.upsert_flavor(FlavorModel::build("default"));
    for c in 0..shape.cohorts {
        for q in 0..shape.cqs_per_cohort {
            let cq = ClusterQueueModel::build(&format!("cq-{c}-{q}"))
                .cohort(&format!("cohort-{c}"))
                .flavor_limits("default", &[("cpu", 20_000, Some(100_000), None)])
                .reclaim(ReclaimWithinCohort::Any)
                .within(WithinClusterQueue::LowerPriority);
            if let Err(e) = core.upsert_cluster_queue(cq) {
                eprintln!("bad ClusterQueue: {e}");
            }
        }
    }
    core
}

fn workloads(shape: &Shape) -> Vec<WorkloadModel> {
    let mut out = Vec::new();
    for c in 0..shape.cohorts {
        for q in 0..shape.cqs_per_cohort {
            let cq = format!("cq-{c}-{q}");
            for (class, n, cpu, prio, every) in shape.classes {
                for i in 0..n {
                    let w = WorkloadModel::build(&format!("ns-{c}"), &format!("{cq}-{class}-{i}"), &cq)
                        .request(&[("cpu", cpu * 1000)])
                        .priority(prio)
                        .at(i as i64 * every);
                    out.push(w);
                }
            }
        }
    }
    out
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn run(shape: &Shape) {
    let wls = workloads(shape);
    let total = wls.len();
    let mut core = core_for(shape);
    let by_key: std::collections::HashMap<WorkloadKey, WorkloadModel> =
        wls.iter().map(|w| (w.key.clone(), w.clone())).collect();
    for w in wls {
        if let Err(e) = core.add_workload(w) {
            eprintln!("bad workload: {e}");
        }
    }
    let mut running: VecDeque<Vec<WorkloadKey>> = VecDeque::new();
    let (mut attempts, mut admissions, mut evictions, mut cycles) = (0usize, 0usize, 0usize, 0i64);
    let mut times: Vec<Duration> = Vec::new();
    let mut first_cycle = Duration::ZERO;
    let mut first_attempts = 0;
    let wall = Instant::now();
    while admissions < total && cycles < 200_000 {
        cycles += 1;
        let t = Instant::now();
        let res = core.schedule_cycle(cycles);
        let d = t.elapsed();
        if cycles == 1 {
            first_cycle = d;
            first_attempts = res.attempts;
        }
        times.push(d);
        attempts += res.attempts;
        admissions += res.admissions.len();
        evictions += res.evictions.len();
        for e in &res.evictions {
            core.release(&e.key);
            admissions -= 1;
            if let Some(w) = by_key.get(&e.key) {
                let _ = core.add_workload(w.clone().at(1_000_000 + cycles));
            }
        }
        running.push_back(res.admissions.into_iter().map(|a| a.key).collect());
        if running.len() > 2
            && let Some(done) = running.pop_front()
        {
            for k in done {
                core.release(&k);
            }
        }
    }
    let busy: Duration = times.iter().sum();
    times.sort();
    println!(
        "== {} ({} ClusterQueues, {} workloads pending at once)",
        shape.name,
        shape.cohorts * shape.cqs_per_cohort,
        total
    );
    println!(
        "  cycles {cycles}, admissions {admissions}, preemptions {evictions}, admission attempts {attempts}"
    );
    println!(
        "  attempts/s {:.0} (attempts / time inside schedule_cycle {:.3} s; wall incl. harness {:.3} s)",
        attempts as f64 / busy.as_secs_f64(),
        busy.as_secs_f64(),
        wall.elapsed().as_secs_f64()
    );
    println!("  admissions/s {:.0}", admissions as f64 / busy.as_secs_f64());
    println!(
        "  cycle p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms; first cycle (full backlog) {:.3} ms for {} attempts",
        pct(&times, 0.5).as_secs_f64() * 1e3,
        pct(&times, 0.99).as_secs_f64() * 1e3,
        pct(&times, 1.0).as_secs_f64() * 1e3,
        first_cycle.as_secs_f64() * 1e3,
        first_attempts
    );
}

fn memory(shape: &Shape) {
    let mut core = core_for(shape);
    let before = LIVE.load(Ordering::Relaxed);
    let wls: Vec<WorkloadModel> = workloads(shape).into_iter().take(10_000).collect();
    for w in wls {
        let _ = core.add_workload(w);
    }
    let after = LIVE.load(Ordering::Relaxed);
    println!(
        "== memory: {:.2} MiB live for 10,000 pending workloads ({} bytes each, counting global allocator: live bytes after adding minus before building them)",
        (after - before) as f64 / (1024.0 * 1024.0),
        (after - before) / 10_000
    );
    drop(core);
}

fn main() {
    let baseline = Shape {
        name: "baseline: 5 cohorts x 6 ClusterQueues",
        cohorts: 5,
        cqs_per_cohort: 6,
        classes: [
            ("small", 350, 1, 50, 100),
            ("medium", 100, 5, 100, 500),
            ("large", 50, 20, 200, 1200),
        ],
    };
    let large = Shape {
        name: "large-scale: 10 cohorts x 100 ClusterQueues",
        cohorts: 10,
        cqs_per_cohort: 100,
        classes: [
            ("small", 35, 1, 50, 60),
            ("medium", 11, 5, 100, 300),
            ("large", 4, 20, 200, 700),
        ],
    };
    run(&baseline);
    run(&large);
    memory(&baseline);
}
