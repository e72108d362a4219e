//! The invariant watcher of the gated-upgrade scenarios: on every Workload, RayCluster, Pod and
//! ClusterQueue event it re-reads the API and checks DESIGN.md's invariants. Pods are read before and
//! after the rest, and only pods in both reads count: such a pod existed when the Workloads were read
//! (so the slice it was created under is in that read), and still existed after (so its slice had not
//! let go yet, since pods go first). One read alone sees either a pod created just after the slices or
//! a slice released just after its pods were stopped as a violation.
//! - I1 quota safety: reserved usage of the latest slice of each chain stays within Kueue's limits, for
//!   every resource, whenever something was admitted since the last check: per ClusterQueue outside a
//!   cohort its nominal quota. In a cohort a ClusterQueue lends `min(lendingLimit, nominal)` (all its
//!   nominal quota without a lending limit) and keeps the rest guaranteed to itself: per ClusterQueue,
//!   usage <= nominal + its borrowing limit, or + what the others lend without one; per cohort, what
//!   its ClusterQueues use beyond what they keep (`max(0, usage - guaranteed)`, summed) <= what they
//!   lend (`cohort_over`). Kueue keeps what it admitted when quota is cut, so usage above a cut quota
//!   is no violation by itself; an admission while over quota is. An admission is held to the largest
//!   quota (and lent and kept amounts, which a cut lowers with it) of the last `CUT_LAG` (3 s): a cut
//!   reaches the admission loop through its watch, and an admission decided on the quota its cache
//!   showed, written before the cut arrived, is what Kueue (any informer-based controller) does too;
//!   checks also coalesce events, so a cut and an admission may land in one check;
//! - I2 gate: per child of a queue-managed RayService and per group, live pods <= what the latest slice
//!   holding quota covers with that child's own requests (an evicted slice still holding quota counts
//!   until it lets go, since its pods are being stopped);
//! - I6 slices: at most one pending replacement per chain, and a slice finished as replaced has an
//!   admitted (or since finished) successor; a successor deleted since (its job was stopped and its
//!   Workload no longer matched) counts when the watcher saw it admitted before.
//! - I8 no serving gap (the hostile and contention scenarios): a RayService once Ready with serve
//!   endpoints keeps both, unless its user deletes it or a preemption that every upgrade's growth
//!   could not satisfy takes it down (`serving.rs`).
//!
//! - I4 no disruption and I5 crash safety (no duplicate admission): `chain.rs`.
//!
//! I3 (exact accounting) is checked where "exact" is well defined: by the scenarios at their settle
//! points and by a chaos run once it has settled.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::chain::holds_quota;
use super::usage::{amount, held};
use crate::api::kueue::constants::label;
use crate::api::kueue::{ClusterQueue, Workload};
use crate::api::ray::{RayCluster, RayService};
use crate::rayservice::job::demand;
use crate::rayservice::job::gate;
use crate::rayservice::job::rayservice::children_in_gate_order;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

pub struct Invariants {
    violations: Arc<Mutex<Vec<String>>>,
    checks: Arc<AtomicU64>,
    /// I8 takedowns a legitimate preemption excused (`serving.rs`).
    excused: Arc<AtomicU64>,
    /// Preemptions of a service's slice that I8 judged.
    preempted: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Invariants {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn reserved(w: &Workload) -> bool {
    w.admission().is_some() && w.has_quota_reservation()
}

/// What earlier checks saw: replaced slices (`<ns>/<name>`) whose successor was admitted, and for I1
/// the workloads holding quota and each ClusterQueue's quotas at the previous check.
#[derive(Default)]
struct Seen {
    handed_over: std::collections::HashSet<String>,
    holding: std::collections::HashSet<String>,
    /// Per ClusterQueue and resource: its nominal quota, what it lends and what it keeps. Each one is
    /// lowered by a cut, so each is held at its value before the cut for `CUT_LAG`.
    nominal: BTreeMap<(String, String), Nominal>,
    lendable: BTreeMap<(String, String), Nominal>,
    guaranteed: BTreeMap<(String, String), Nominal>,
    /// I4: each waiting upgrade's active cluster as it was when the wait began, by service uid.
    active: BTreeMap<String, super::chain::Baseline>,
    /// Liveness: since when each service (by uid) has wanted pods no slice covers or waits for.
    uncovered: BTreeMap<String, std::time::Instant>,
    /// I8 (when checked): who served, and which takedowns are excused.
    serving: super::serving::Serving,
    /// Check I8 (see `Invariants::start_with`).
    serving_gap: bool,
}

/// How long a service may want pods that no slice covers before a slice must wait for them
/// (issue 44: the growth of an upgrade once waited forever with quota free and no slice). Below the
/// job controller's 30 s resync, so a lost event cannot hide behind that safety net.
pub const STALL_BOUND: std::time::Duration = std::time::Duration::from_secs(20);

/// How often the watcher checks with no event: a stall is silent.
const IDLE_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a cut quota still bounds admissions at its old, higher value (see I1 above).
const CUT_LAG: std::time::Duration = std::time::Duration::from_secs(3);

/// A ClusterQueue's nominal quota of one resource as the checks saw it: the latest value, and a
/// higher one from before a cut while it is still honoured.
#[derive(Clone, Copy)]
struct Nominal {
    now: i64,
    higher: Option<(i64, std::time::Instant)>,
}

impl Nominal {
    /// The limit an admission seen now is held to, given the value `now` read in this check.
    fn limit(prev: Option<&Nominal>, now: i64, at: std::time::Instant) -> i64 {
        let Some(p) = prev else { return now };
        let higher = p.higher.filter(|(_, until)| at < *until).map_or(now, |(v, _)| v);
        now.max(p.now).max(higher)
    }

    /// What the next check remembers after reading `now`.
    fn next(prev: Option<&Nominal>, now: i64, at: std::time::Instant) -> Nominal {
        let held = prev.and_then(|p| {
            let kept = p.higher.filter(|(v, until)| at < *until && *v > now);
            let cut = (p.now > now).then_some((p.now, at + CUT_LAG));
            match (kept, cut) {
                (Some(k), Some(c)) => Some(if k.0 >= c.0 { k } else { c }),
                (k, c) => k.or(c),
            }
        });
        Nominal { now, higher: held }
    }
}

/// One ClusterQueue of a cohort, for one resource, as I1 holds it.
#[derive(Clone, Debug)]
struct Member {
    name: String,
    used: i64,
    nominal: i64,
    /// What the cohort may borrow of its quota: `min(lendingLimit, nominal)`, its nominal without one.
    lendable: i64,
    /// What it keeps for itself: `nominal - lendable`.
    guaranteed: i64,
    borrowing_limit: Option<i64>,
    /// Something took quota in it since the previous check.
    admitted: bool,
}

/// Where one resource of a (flat) cohort exceeds Kueue's limits, when something was admitted: a member
/// using more than its nominal quota plus what it may borrow (its borrowing limit, at most what the
/// others lend), or the members together borrowing from the cohort (using beyond what each keeps) more
/// than they lend it.
fn cohort_over(members: &[Member]) -> Vec<String> {
    let mut out = Vec::new();
    let lent: i64 = members.iter().map(|m| m.lendable).sum();
    for m in members.iter().filter(|m| m.admitted) {
        let others = lent - m.lendable;
        let may_borrow = m.borrowing_limit.map_or(others, |b| b.min(others));
        if m.used > m.nominal + may_borrow {
            out.push(format!(
                "ClusterQueue {} admitted a workload while using {}, nominal {} plus {may_borrow} it may borrow (borrowing limit {:?}, the others lend {others})",
                m.name, m.used, m.nominal, m.borrowing_limit
            ));
        }
    }
    let borrowed: i64 = members.iter().map(|m| (m.used - m.guaranteed).max(0)).sum();
    if members.iter().any(|m| m.admitted) && borrowed > lent {
        out.push(format!(
            "cohort admitted a workload while its ClusterQueues use {borrowed} beyond what they keep, they lend {lent} (per ClusterQueue: used, kept, lent {:?})",
            members.iter().map(|m| (m.name.as_str(), m.used, m.guaranteed, m.lendable)).collect::<Vec<_>>()
        ));
    }
    out
}

impl Seen {
    fn record(&mut self, wls: &[Workload]) {
        for w in wls.iter().filter(|w| reserved(w) || w.is_finished()) {
            if let Some(old) = w.annotations().get(label::WORKLOAD_SLICE_REPLACEMENT_FOR) {
                self.handed_over.insert(old.clone());
            }
        }
    }

    fn successor_was_admitted(&self, replaced: &str) -> bool {
        self.handed_over.contains(replaced)
    }
}

/// Everything one check reads.
struct World {
    wls: Vec<Workload>,
    rcs: Vec<RayCluster>,
    rss: Vec<RayService>,
    cqs: Vec<ClusterQueue>,
    /// Only the pods both reads saw (see the module's doc).
    pods: Vec<Pod>,
}

/// Reads the API for one check, pods before and after the rest; replaced slices are recorded as
/// soon as the Workloads are read.
async fn read(client: &Client, seen: &mut Seen) -> Result<World, kube::Error> {
    let lp = ListParams::default();
    let before = Api::<Pod>::all(client.clone()).list(&lp).await?.items;
    let wls = Api::<Workload>::all(client.clone()).list(&lp).await?.items;
    seen.record(&wls);
    let rcs = Api::<RayCluster>::all(client.clone()).list(&lp).await?.items;
    let rss = Api::<RayService>::all(client.clone()).list(&lp).await?.items;
    let cqs = Api::<ClusterQueue>::all(client.clone()).list(&lp).await?.items;
    let after: std::collections::HashSet<String> = Api::<Pod>::all(client.clone())
        .list(&lp)
        .await?
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    let pods: Vec<Pod> = before
        .into_iter()
        .filter(|p| p.metadata.uid.as_ref().is_some_and(|u| after.contains(u)))
        .collect();
    Ok(World {
        wls,
        rcs,
        rss,
        cqs,
        pods,
    })
}

async fn check(client: &Client, seen: &mut Seen) -> Result<Vec<String>, kube::Error> {
    let world = read(client, seen).await?;
    let mut bad = quota_safety(&world.wls, &world.cqs, seen);
    // I2 for queue-labelled RayClusters with a chain of their own, each pod held to its own requests.
    bad.extend(super::standalone::violations(&world.rcs, &world.wls, &world.pods));
    let managed: Vec<&RayService> = world.rss.iter().filter(|rs| gate::queue_managed(rs)).collect();
    for rs in &managed {
        bad.extend(service_checks(rs, &world, seen));
    }
    if seen.serving_gap {
        bad.extend(serving_gaps(client, &world, &managed, seen).await?);
    }
    Ok(bad)
}

/// I8 (`serving.rs`). The Workloads were read before the RayServices, so an eviction that took a
/// service down may be missing from this read: a gap no preemption excuses yet is judged again on
/// the Workloads read once more, before it counts.
async fn serving_gaps(
    client: &Client,
    world: &World,
    managed: &[&RayService],
    seen: &mut Seen,
) -> Result<Vec<String>, kube::Error> {
    seen.serving
        .judge(&world.wls, &world.rss, &world.rcs, &world.cqs, &world.pods);
    let mut gaps: Vec<String> = managed.iter().filter_map(|rs| seen.serving.gap(rs)).collect();
    if !gaps.is_empty() {
        let wls = Api::<Workload>::all(client.clone())
            .list(&ListParams::default())
            .await?
            .items;
        seen.serving
            .judge(&wls, &world.rss, &world.rcs, &world.cqs, &world.pods);
        gaps = managed.iter().filter_map(|rs| seen.serving.gap(rs)).collect();
    }
    Ok(gaps)
}

/// What the quota-holding Workloads hold, as I1 reads it.
struct Held {
    /// Per ClusterQueue and resource, the usage of the latest slice of each chain.
    usage: BTreeMap<(String, String), i64>,
    /// ClusterQueues where a workload (or a new slice) took quota since the previous check.
    admitted_in: std::collections::HashSet<String>,
    /// Every Workload holding quota now (`<ns>/<name>`).
    holding: std::collections::HashSet<String>,
    /// Who holds what, per ClusterQueue, for a violation's message.
    holders: BTreeMap<String, Vec<String>>,
}

/// Sums what the latest slice of each chain holds per ClusterQueue, and notes where something took
/// quota since the previous check.
fn quota_held(wls: &[Workload], seen: &Seen) -> Held {
    let replaced: Vec<String> = wls
        .iter()
        .filter(|w| holds_quota(w))
        .filter_map(|w| {
            w.annotations()
                .get(label::WORKLOAD_SLICE_REPLACEMENT_FOR)
                .cloned()
        })
        .collect();
    let mut usage: BTreeMap<(String, String), i64> = BTreeMap::new();
    let mut admitted_in: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut holding = std::collections::HashSet::new();
    let mut holders: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for w in wls.iter().filter(|w| holds_quota(w)) {
        let key = format!("{}/{}", w.namespace().unwrap_or_default(), w.name_any());
        holding.insert(key.clone());
        if !seen.holding.contains(&key)
            && let Some(a) = w.admission()
        {
            admitted_in.insert(a.cluster_queue.clone());
        }
        if replaced.contains(&key) {
            continue;
        }
        let Some(a) = w.admission() else { continue };
        let h = held(w);
        let deleting = if w.metadata.deletion_timestamp.is_some() {
            " (deleting)"
        } else {
            ""
        };
        holders
            .entry(a.cluster_queue.clone())
            .or_default()
            .push(format!("{} {h:?}{deleting}", w.name_any()));
        for (r, v) in h {
            *usage.entry((a.cluster_queue.clone(), r)).or_default() += v;
        }
    }
    Held {
        usage,
        admitted_in,
        holding,
        holders,
    }
}

/// One ClusterQueue's quotas per resource, summed over its flavors.
struct Quotas {
    nominal: BTreeMap<String, i64>,
    lendable: BTreeMap<String, i64>,
    /// `None` when some flavor has no borrowing limit.
    borrow: BTreeMap<String, Option<i64>>,
}

/// Reads a ClusterQueue's nominal quota, what it lends and its borrowing limit, per resource.
fn quotas(cq: &ClusterQueue) -> Quotas {
    let resources = cq
        .spec
        .resource_groups()
        .iter()
        .flat_map(|g| g.flavors.iter())
        .flat_map(|f| f.resources.iter());
    let mut nominal: BTreeMap<String, i64> = BTreeMap::new();
    let mut lendable: BTreeMap<String, i64> = BTreeMap::new();
    let mut borrow: BTreeMap<String, Option<i64>> = BTreeMap::new();
    for r in resources {
        let n = amount(&r.nominal_quota, &r.name);
        *nominal.entry(r.name.clone()).or_default() += n;
        *lendable.entry(r.name.clone()).or_default() +=
            r.lending_limit.as_ref().map_or(n, |l| amount(l, &r.name).min(n));
        let b = borrow.entry(r.name.clone()).or_insert(Some(0));
        *b = b
            .zip(r.borrowing_limit.as_ref())
            .map(|(sum, l)| sum + amount(l, &r.name));
    }
    Quotas {
        nominal,
        lendable,
        borrow,
    }
}

/// I1: latest slice of each chain, per ClusterQueue and resource, within nominal quota (outside a
/// cohort) or within what the cohort allows (`cohort_over`), whenever something was admitted; what
/// it saw is remembered in `seen` for the next check.
fn quota_safety(wls: &[Workload], cqs: &[ClusterQueue], seen: &mut Seen) -> Vec<String> {
    let mut bad = Vec::new();
    let Held {
        usage,
        admitted_in,
        holding,
        holders,
    } = quota_held(wls, seen);
    let mut next = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    let at = std::time::Instant::now();
    // Per cohort and resource: its members.
    let mut cohorts: BTreeMap<(String, String), Vec<Member>> = BTreeMap::new();
    for cq in cqs {
        let q = cq.name_any();
        let cohort = cq.spec.cohort().map(str::to_string);
        let Quotas {
            nominal,
            lendable,
            borrow,
        } = quotas(cq);
        for (r, now) in &nominal {
            let key = (q.clone(), r.clone());
            // Each amount as an admission seen now is held to it, remembered for the next check.
            let lag = |seen: &BTreeMap<(String, String), Nominal>,
                       next: &mut BTreeMap<(String, String), Nominal>,
                       now: i64| {
                next.insert(key.clone(), Nominal::next(seen.get(&key), now, at));
                Nominal::limit(seen.get(&key), now, at)
            };
            let lend_now = lendable.get(r).copied().unwrap_or(*now);
            let limit = lag(&seen.nominal, &mut next.0, *now);
            let lend = lag(&seen.lendable, &mut next.1, lend_now);
            let keep = lag(&seen.guaranteed, &mut next.2, now - lend_now);
            let used = usage.get(&key).copied().unwrap_or(0);
            let admitted = admitted_in.contains(&q);
            if let Some(c) = &cohort {
                cohorts.entry((c.clone(), r.clone())).or_default().push(Member {
                    name: q.clone(),
                    used,
                    nominal: limit,
                    lendable: lend,
                    guaranteed: keep,
                    borrowing_limit: borrow.get(r).copied().flatten(),
                    admitted,
                });
            } else if admitted && used > limit {
                bad.push(format!("I1: ClusterQueue {q} admitted a workload while using {used} of {r}, nominal {limit}; held by {:?}", holders.get(&q)));
            }
        }
    }
    for ((c, r), members) in cohorts {
        for v in cohort_over(&members) {
            bad.push(format!("I1: cohort {c}, {r}: {v}; held by {holders:?}"));
        }
    }
    seen.holding = holding;
    (seen.nominal, seen.lendable, seen.guaranteed) = next;
    bad
}

/// The checks of one queue-managed RayService, in order: I2 per child, I4, one chain, I6.
fn service_checks(rs: &RayService, world: &World, seen: &mut Seen) -> Vec<String> {
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let mine: Vec<Workload> = world
        .wls
        .iter()
        .filter(|w| w.labels().get(label::JOB_UID) == Some(&uid))
        .cloned()
        .collect();
    let chain: Vec<&Workload> = mine.iter().collect();
    let mut bad = service_gate(rs, &chain, world);
    let active = rs
        .status
        .as_ref()
        .and_then(|s| s.active_service_status.as_ref())
        .and_then(|a| a.ray_cluster_name.as_deref());
    bad.extend(super::chain::no_disruption(
        rs,
        active,
        &chain,
        &world.rcs,
        &mut seen.active,
    ));
    bad.extend(super::chain::one_chain(rs, &chain));
    bad.extend(slice_handover(rs, &mine, seen));
    bad.extend(stalled(rs, &chain, world, seen));
    bad
}

/// What a service's children want and run against what its latest quota-holding slice covers.
struct Coverage<'a> {
    holding: Option<&'a Workload>,
    children: Vec<RayCluster>,
    live: demand::LivePods,
    demands: Vec<demand::ChildDemand>,
    /// Per child and group: the pods the slice covers.
    allowed: BTreeMap<String, BTreeMap<String, i64>>,
}

fn coverage<'a>(rs: &RayService, chain: &[&'a Workload], world: &World) -> Coverage<'a> {
    let holding = super::chain::latest_holding(chain);
    let children = children_in_gate_order(
        rs,
        world
            .rcs
            .iter()
            .filter(|r| r.namespace() == rs.namespace())
            .cloned()
            .collect(),
    );
    let live = demand::live_pods(world.pods.iter());
    let demands = demand::at_least_live(
        children
            .iter()
            .filter_map(|c| demand::child_demand(c, &Default::default()).ok())
            .collect(),
        &live,
    );
    let allowed = demand::allowed_pods(holding.map(|w| w.spec.pod_sets.as_slice()), &demands, &live);
    Coverage {
        holding,
        children,
        live,
        demands,
        allowed,
    }
}

/// Liveness (issue 44): a service whose children want more pods in some group than its latest
/// quota-holding slice covers must have a slice waiting for them (not reserved, not finished) within
/// `STALL_BOUND`, quota or not: without one nothing can ever admit the rest.
fn stalled(rs: &RayService, chain: &[&Workload], world: &World, seen: &mut Seen) -> Option<String> {
    let uid = rs.metadata.uid.clone().unwrap_or_default();
    let cov = coverage(rs, chain, world);
    let short: Vec<(String, String, i64, i64)> = cov
        .demands
        .iter()
        .flat_map(|d| {
            d.pods
                .iter()
                .map(move |(id, n, _)| (d.name.clone(), id.group.clone(), *n))
        })
        .filter_map(|(child, group, want)| {
            let cap = cov
                .allowed
                .get(&child)
                .and_then(|a| a.get(&group))
                .copied()
                .unwrap_or(0);
            (want > cap).then_some((child, group, want, cap))
        })
        .collect();
    let waiting = chain
        .iter()
        .any(|w| !reserved(w) && !w.is_finished() && w.metadata.deletion_timestamp.is_none());
    let exempt = rs.metadata.deletion_timestamp.is_some() || rs.spec.suspend == Some(true);
    if short.is_empty() || waiting || exempt {
        seen.uncovered.remove(&uid);
        return None;
    }
    let since = *seen.uncovered.entry(uid).or_insert_with(std::time::Instant::now);
    (since.elapsed() > STALL_BOUND).then(|| {
        format!(
            "liveness: RayService {} has wanted pods no slice covers for {} s with no slice waiting for them (child, group, wants, covered: {short:?}; slices {:?})",
            rs.name_any(),
            since.elapsed().as_secs(),
            chain.iter().map(|w| w.name_any()).collect::<Vec<_>>()
        )
    })
}

/// I2: per child of the RayService and group, live pods within the latest quota-holding slice's
/// coverage.
fn service_gate(rs: &RayService, chain: &[&Workload], world: &World) -> Vec<String> {
    let mut bad = Vec::new();
    let Coverage {
        holding,
        children,
        live,
        demands,
        allowed,
    } = coverage(rs, chain, world);
    for child in &children {
        let name = child.name_any();
        for (group, &n) in live.get(&name).into_iter().flatten() {
            let cap = allowed
                .get(&name)
                .and_then(|a| a.get(group))
                .copied()
                .unwrap_or(0);
            if n > cap {
                bad.push(format!(
                    "I2: RayCluster {name} group {group} has {n} pods, the slice {} covers {cap} (slice podsets {:?}; demands {:?})",
                    holding.map(|w| w.name_any()).unwrap_or_else(|| "(none)".into()),
                    holding.map(|w| w.spec.pod_sets.iter().map(|p| (p.name.clone().unwrap_or_default(), p.count())).collect::<Vec<_>>()),
                    demands.iter().map(|d| (d.name.clone(), d.pods.iter().map(|(_, n, _)| *n).collect::<Vec<_>>())).collect::<Vec<_>>(),
                ));
            }
        }
    }
    bad
}

/// I6: at most one pending slice per RayService, and a slice finished as replaced has an admitted
/// (or since finished, or seen admitted before) successor.
fn slice_handover(rs: &RayService, mine: &[Workload], seen: &Seen) -> Vec<String> {
    let mut bad = Vec::new();
    let pending: Vec<String> = mine
        .iter()
        .filter(|w| !w.is_finished() && !reserved(w) && w.metadata.deletion_timestamp.is_none())
        .map(|w| w.name_any())
        .collect();
    if pending.len() > 1 {
        bad.push(format!(
            "I6: RayService {} has {} pending slices: {pending:?}",
            rs.name_any(),
            pending.len()
        ));
    }
    for old in mine.iter().filter(|w| {
        w.status
            .as_ref()
            .and_then(|s| s.condition("Finished"))
            .is_some_and(|c| c.reason == "WorkloadSliceReplaced")
    }) {
        let key = format!("{}/{}", old.namespace().unwrap_or_default(), old.name_any());
        let successor = mine.iter().any(|w| {
            w.annotations().get(label::WORKLOAD_SLICE_REPLACEMENT_FOR) == Some(&key)
                && (reserved(w) || w.is_finished())
        }) || seen.successor_was_admitted(&key);
        if !successor {
            bad.push(format!(
                "I6: slice {key} finished as replaced without an admitted successor"
            ));
        }
    }
    bad
}

impl Invariants {
    pub fn start(client: Client) -> Invariants {
        Self::start_with(client, false)
    }

    /// As [`Invariants::start`]; `serving_gap` adds I8 (no serving gap), for runs where nothing may
    /// legitimately take a serving RayService down.
    pub fn start_with(client: Client, serving_gap: bool) -> Invariants {
        let violations = Arc::new(Mutex::new(Vec::new()));
        let checks = Arc::new(AtomicU64::new(0));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let mut tasks = Vec::new();
        macro_rules! trigger {
            ($k:ty) => {{
                let tx = tx.clone();
                let api: Api<$k> = Api::all(client.clone());
                tasks.push(tokio::spawn(async move {
                    let stream = watcher(api, watcher::Config::default()).default_backoff();
                    futures::pin_mut!(stream);
                    while stream.next().await.is_some() {
                        if tx.send(()).is_err() {
                            return;
                        }
                    }
                }));
            }};
        }
        trigger!(Workload);
        trigger!(RayCluster);
        trigger!(Pod);
        trigger!(ClusterQueue);
        // I4 reads which cluster is active from the RayService's status.
        trigger!(RayService);
        let excused = Arc::new(AtomicU64::new(0));
        let preempted = Arc::new(AtomicU64::new(0));
        let (v, n, x, p) = (
            violations.clone(),
            checks.clone(),
            excused.clone(),
            preempted.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut seen = Seen {
                serving_gap,
                ..Seen::default()
            };
            loop {
                // An event, or a quiet spell: a stall makes no events (see `stalled`).
                if let Ok(None) = tokio::time::timeout(IDLE_CHECK, rx.recv()).await {
                    return;
                }
                // One check covers every event that arrived meanwhile.
                while rx.try_recv().is_ok() {}
                match check(&client, &mut seen).await {
                    Ok(found) => {
                        n.fetch_add(1, Ordering::SeqCst);
                        x.store(seen.serving.excuses, Ordering::SeqCst);
                        p.store(seen.serving.preemptions, Ordering::SeqCst);
                        lock(&v).extend(found);
                    }
                    Err(e) => lock(&v).push(format!("invariant check could not read the API: {e}")),
                }
            }
        }));
        Invariants {
            violations,
            checks,
            excused,
            preempted,
            tasks,
        }
    }

    /// How many checks ran so far.
    pub fn checks(&self) -> u64 {
        self.checks.load(Ordering::SeqCst)
    }

    /// How many times a service went down by a preemption every upgrade's growth could not satisfy,
    /// and served again (I8's excuses).
    pub fn excused(&self) -> u64 {
        self.excused.load(Ordering::SeqCst)
    }

    /// How many preemptions of a service's slice I8 judged.
    pub fn preempted(&self) -> u64 {
        self.preempted.load(Ordering::SeqCst)
    }

    /// Every violation seen so far.
    pub fn violations(&self) -> Vec<String> {
        lock(&self.violations).clone()
    }
}

// A panic elsewhere while holding the lock must not hide the violations found so far.
fn lock(v: &Mutex<Vec<String>>) -> std::sync::MutexGuard<'_, Vec<String>> {
    v.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A cohort member with nominal quota `nominal` lending `lending` of it (all without one).
    fn member(
        name: &str,
        used: i64,
        nominal: i64,
        lending: Option<i64>,
        borrowing_limit: Option<i64>,
    ) -> Member {
        let lendable = lending.map_or(nominal, |l| l.min(nominal));
        Member {
            name: name.into(),
            used,
            nominal,
            lendable,
            guaranteed: nominal - lendable,
            borrowing_limit,
            admitted: true,
        }
    }

    #[test]
    fn cohort_limits_follow_lending_limits() {
        // (case, members of one cohort, how many violations)
        let cases = [
            (
                "no lending limits: the other's whole quota is borrowable",
                vec![
                    member("a", 10_000, 5000, None, None),
                    member("b", 0, 5000, None, None),
                ],
                0,
            ),
            (
                "lending 1 of 5 lets the other borrow 1",
                vec![
                    member("a", 6000, 5000, None, None),
                    member("b", 0, 5000, Some(1000), None),
                ],
                0,
            ),
            (
                "lending 1 of 5 does not let the other borrow 5",
                vec![
                    member("a", 10_000, 5000, None, None),
                    member("b", 0, 5000, Some(1000), None),
                ],
                2,
            ),
            (
                "an over-borrow is reported for the queue and the cohort",
                vec![
                    member("a", 7000, 5000, None, None),
                    member("b", 0, 5000, Some(1000), None),
                ],
                2,
            ),
            (
                "usage within what a queue keeps plus what it lends is fine",
                vec![
                    member("a", 4000, 5000, Some(1000), None),
                    member("b", 5000, 5000, Some(1000), None),
                ],
                0,
            ),
            (
                "a queue using its guaranteed part leaves the lent part to the other",
                vec![
                    member("a", 6000, 5000, None, None),
                    member("b", 4000, 5000, Some(1000), None),
                ],
                0,
            ),
            (
                "but not more of it",
                vec![
                    member("a", 6000, 5000, None, None),
                    member("b", 4500, 5000, Some(1000), None),
                ],
                1,
            ),
            (
                "a borrowing limit below what the others lend bounds the queue",
                vec![
                    member("a", 7000, 5000, None, Some(1000)),
                    member("b", 0, 5000, None, None),
                ],
                1,
            ),
            (
                "lending 0 keeps the whole quota",
                vec![
                    member("a", 5500, 5000, None, None),
                    member("b", 0, 5000, Some(0), None),
                ],
                2,
            ),
        ];
        for (case, members, want) in cases {
            let got = cohort_over(&members);
            assert_eq!(got.len(), want, "{case}: {got:?}");
        }
        // Nothing admitted since the last check: usage over the limits (after a cut) is no violation.
        let mut quiet = vec![
            member("a", 10_000, 5000, None, None),
            member("b", 0, 5000, Some(1000), None),
        ];
        quiet.iter_mut().for_each(|m| m.admitted = false);
        assert!(cohort_over(&quiet).is_empty());
    }

    #[test]
    fn a_cut_bounds_admissions_at_the_old_quota_for_the_cut_lag_only() {
        let t0 = Instant::now();
        let first = Nominal::next(None, 8000, t0);
        assert_eq!(Nominal::limit(None, 8000, t0), 8000);
        // The cut lands in the same check as an admission: the old quota holds.
        assert_eq!(Nominal::limit(Some(&first), 3000, t0), 8000);
        let cut = Nominal::next(Some(&first), 3000, t0);
        // An admission written just after the cut, decided before it arrived: still the old quota.
        assert_eq!(
            Nominal::limit(Some(&cut), 3000, t0 + Duration::from_secs(1)),
            8000
        );
        // Once the cut has had time to arrive, the new quota is the limit.
        assert_eq!(
            Nominal::limit(Some(&cut), 3000, t0 + CUT_LAG + Duration::from_millis(1)),
            3000
        );
        let later = Nominal::next(Some(&cut), 3000, t0 + CUT_LAG + Duration::from_millis(1));
        assert_eq!(Nominal::limit(Some(&later), 3000, t0 + CUT_LAG * 2), 3000);
        // A raise is the limit at once.
        assert_eq!(Nominal::limit(Some(&later), 9000, t0 + CUT_LAG * 2), 9000);
    }
}
