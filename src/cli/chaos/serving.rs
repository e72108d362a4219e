//! I8, no serving gap, with the takedowns that excuse one (the hostile and contention scenarios):
//! a queue-managed RayService once Ready with serve endpoints keeps both. In these worlds only two
//! things may legitimately take one down:
//! - its user deletes it (no scenario suspends one by hand, so a suspend is Kueue's eviction,
//!   judged as below, not an excuse of its own);
//! - a preemption or reclaim of its slice that needed more than every upgrade's growth could free.
//!   The preemptor is named by UID in the victim's `Preempted`/`Evicted` condition (Kueue's
//!   message). It needed `R`: its requests (a replacement slice: less what the slice it replaces
//!   holds, which counts as freed). Without taking any serving cluster its ClusterQueue could give
//!   it, as the check before the preemption saw the quota: what is free (nominal less usage; in a
//!   cohort, the cohort's), plus the growth (what the latest slice holds beyond the serving
//!   cluster's pods) of every upgrade it may preempt: lower-priority services in its own
//!   ClusterQueue under `withinClusterQueue: LowerPriority`, and, in the other ClusterQueue of the
//!   cohort under `reclaimWithinCohort` (`Any`, or `LowerPriority` for lower priorities), up to what
//!   that queue borrows. The check before may be older than the preemption, so quota another
//!   Workload took since, and the part of the free quota an earlier judged preemptor still waiting
//!   for its victims will take, are not free for it. A pending cluster whose service said it is
//!   ready to take traffic is serving too, not growth (the switch guard of
//!   `rayservice::job::growth`), and so is a cluster the slice says it keeps (Serve reports an
//!   application RUNNING, then DEPLOYING again while it scales: the keeps written in between may be
//!   all the core saw). The core sees the world a watch event behind (`FLOOR_LAG`): it
//!   decides on the floor the job controller last wrote on the slice, a reconcile behind the
//!   service's status, so what served at any check of the lag is serving too (a switch: the old
//!   cluster), and a service with none serving at one of those checks (its first cluster just began
//!   to serve) has no growth yet, its slice may still carry no floor; growth counts only as much as
//!   every check of the lag saw (a slice admitted, or a floor lowered, a moment ago may be newer
//!   than the core's view); and a waiting Workload deleted
//!   within the lag may have been admitted before the core saw the deletion, so what it asked is not
//!   free either. If `R` is more, Kueue's whole eviction is legitimate and the service's gap is
//!   excused until it serves again; if not, evicting the growth first would have been enough, and
//!   the gap is a violation whose message says so.
//!
//! Anything else (upgrades, version changes mid-upgrade, batch work, manager restarts, faults) must
//! not take a service down.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::chain::{holds_quota, latest_holding};
use super::usage::held;
use crate::api::kueue::constants::{condition, label};
use crate::api::kueue::{ClusterQueue, PreemptionPolicy, Workload};
use crate::api::ray::constants as ray;
use crate::api::ray::{RayCluster, RayService};
use crate::rayservice::job::growth::switch_announced;

/// How long the core may decide on a floor older than the service's status: the job controller
/// rewrites the slice's floor a reconcile after the status changed (a switch: the old cluster stops
/// serving, the floor keeps it until then).
const FLOOR_LAG: Duration = Duration::from_secs(2);

/// What I8 remembers between checks.
#[derive(Default)]
pub(super) struct Serving {
    /// The services (by uid) seen Ready with serve endpoints.
    served: HashSet<String>,
    /// Services (by uid) a legitimate preemption takes down, until they serve again after going
    /// down (the eviction is written before the service stops serving: seed 3).
    excused: HashMap<String, Excuse>,
    /// Every Workload a check saw, by uid, as a preemptor: urgent work may preempt and be deleted
    /// before the next check (the run settling deletes it: seeds 12 and 18).
    known: HashMap<String, Preemptor>,
    /// Preemptions of a service that excuse no gap, by service uid: growth alone could have
    /// satisfied them, or their preemptor was never seen. Kept, like an excuse, until the service
    /// serves again after going down, so the gap that follows names them.
    unneeded: HashMap<String, Excuse>,
    /// Workloads (by uid) the previous check saw waiting for quota.
    waiting: HashSet<String>,
    /// Waiting Workloads deleted within the last `FLOOR_LAG`, with what they asked (milli-CPU): the
    /// core, a watch event behind, may have admitted one and preempted for another on that usage.
    vanished: VecDeque<(Instant, String, i64)>,
    /// What judged preemptors that hold no quota yet will take of the free quota, by their uid.
    claims: HashMap<String, Claim>,
    /// Preemption conditions already judged (`<workload uid>@<transition time>`).
    judged: HashSet<String>,
    /// The quota as the previous check saw it: a preemption is judged on the state before it.
    before: Option<Pool>,
    /// What each service's serving clusters wanted, and its growth, by check, over the last
    /// `FLOOR_LAG`.
    recent: VecDeque<Seen>,
    /// How many legitimate takedowns were excused, and how many preemptions of a service's slice
    /// were judged (for the report of a run).
    pub(super) excuses: u64,
    pub(super) preemptions: u64,
}

/// One check's view of the services, by RayService uid.
struct Seen {
    at: Instant,
    /// What its serving clusters want (`None`: none serves).
    serving: HashMap<String, Option<i64>>,
    /// Its growth (a service with no upgrade seen: none).
    growth: HashMap<String, i64>,
}

/// A judged preemption of a service (a legitimate takedown, or one that growth alone could have
/// satisfied), until the service serves again.
#[derive(Clone, Debug)]
struct Excuse {
    why: String,
    /// The evicted slice's uid.
    victim: String,
    /// The service was seen not serving since the preemption.
    went_down: bool,
    /// The evicted slice is gone and the service never went down: the takedown did not happen.
    victim_gone: bool,
}

impl Excuse {
    fn of(why: String, victim: &Workload) -> Excuse {
        Excuse {
            why,
            victim: victim.metadata.uid.clone().unwrap_or_default(),
            went_down: false,
            victim_gone: false,
        }
    }
}

/// What the judge needs of a preemptor.
#[derive(Clone, Debug)]
struct Preemptor {
    name: String,
    /// Its requests less what the slice it replaces holds (milli-CPU).
    need: i64,
    cq: Option<String>,
    priority: i32,
}

impl Preemptor {
    fn of(u: &Workload, wls: &[Workload]) -> Preemptor {
        let replaced = u
            .annotations()
            .get(label::WORKLOAD_SLICE_REPLACEMENT_FOR)
            .and_then(|r| wls.iter().find(|o| &key(o) == r))
            .map_or(0, |o| held(o).get("cpu").copied().unwrap_or(0));
        Preemptor {
            name: u.name_any(),
            need: (requested(u) - replaced).max(0),
            cq: u.admission().map(|a| a.cluster_queue.clone()),
            priority: u.spec.priority(),
        }
    }
}

/// One ClusterQueue's CPU as a check saw it.
#[derive(Clone, Debug)]
struct Cq {
    cohort: Option<String>,
    nominal: i64,
    used: i64,
    within: PreemptionPolicy,
    reclaim: PreemptionPolicy,
}

/// One service's upgrade as a check saw it.
#[derive(Clone, Debug)]
struct Upgrade {
    cq: String,
    priority: i32,
    /// The RayService's uid.
    service: String,
    /// What its latest slice holds (milli-CPU).
    held: i64,
    /// What its serving clusters want (milli-CPU); `None` while none serves (no growth to tell apart).
    serving: Option<i64>,
}

impl Upgrade {
    /// What its latest slice holds beyond its serving clusters (at least 0).
    fn growth(&self) -> i64 {
        self.serving.map_or(0, |s| (self.held - s).max(0))
    }
}

/// The CPU quota and every service's growth at one check.
#[derive(Clone, Debug, Default)]
struct Pool {
    cqs: BTreeMap<String, Cq>,
    upgrades: Vec<Upgrade>,
    /// What each Workload holding quota takes of its ClusterQueue's (a replacement slice: beyond
    /// the slice it replaces), by uid: (ClusterQueue, milli-CPU).
    takes: HashMap<String, (String, i64)>,
}

/// The part of the free quota a judged preemptor will take once its victims are gone (it holds
/// nothing until then, so the free quota still reads free).
#[derive(Clone, Debug)]
struct Claim {
    cq: String,
    milli: i64,
}

fn cpu_of(spec: Option<&k8s_openapi::api::core::v1::PodSpec>) -> i64 {
    spec.and_then(|s| crate::queue::requests::pod_requests("spec", s).ok())
        .and_then(|r| r.get("cpu").map(|a| a.0))
        .unwrap_or(0)
}

/// What a RayCluster's pods ask for once all are there (milli-CPU): its head and each worker
/// group's replicas (times `numOfHosts`), each pod at what a live pod of its group (`own`) requests,
/// its group's template while it has none.
fn wanted_cpu(rc: &RayCluster, own: &[&Pod]) -> i64 {
    let per_pod = |group: &str, template: Option<&k8s_openapi::api::core::v1::PodSpec>| {
        own.iter()
            .find(|p| p.labels().get(ray::LABEL_GROUP).map(String::as_str) == Some(group))
            .map_or_else(|| cpu_of(template), |p| cpu_of(p.spec.as_ref()))
    };
    let head = per_pod(
        ray::HEAD_GROUP_NAME,
        rc.spec.head_group_spec.template.spec.as_ref(),
    );
    let workers: i64 = rc
        .spec
        .worker_groups()
        .iter()
        .filter(|g| g.suspend != Some(true))
        .map(|g| {
            let pods =
                i64::from(g.replicas.unwrap_or(0).max(0)) * i64::from(g.num_of_hosts.unwrap_or(1).max(1));
            pods * per_pod(&g.group_name, g.template.spec.as_ref())
        })
        .sum();
    head + workers
}

/// What a Workload asks for (milli-CPU), from its spec.
fn requested(w: &Workload) -> i64 {
    w.spec
        .pod_sets
        .iter()
        .map(|p| i64::from(p.count().max(0)) * cpu_of(p.template.spec.as_ref()))
        .sum()
}

fn key(w: &Workload) -> String {
    format!("{}/{}", w.namespace().unwrap_or_default(), w.name_any())
}

impl Pool {
    fn read(
        wls: &[Workload],
        rss: &[RayService],
        rcs: &[RayCluster],
        cqs: &[ClusterQueue],
        pods: &[Pod],
    ) -> Pool {
        let holding: Vec<&Workload> = wls.iter().filter(|w| holds_quota(w)).collect();
        let replaced: HashSet<&String> = holding
            .iter()
            .filter_map(|w| w.annotations().get(label::WORKLOAD_SLICE_REPLACEMENT_FOR))
            .collect();
        let mut used: BTreeMap<String, i64> = BTreeMap::new();
        for w in holding.iter().filter(|w| !replaced.contains(&key(w))) {
            if let Some(a) = w.admission() {
                *used.entry(a.cluster_queue.clone()).or_default() += held(w).get("cpu").copied().unwrap_or(0);
            }
        }
        let mut pool = Pool::default();
        for w in holding.iter().filter(|w| !replaced.contains(&key(w))) {
            let (Some(uid), Some(a)) = (w.metadata.uid.clone(), w.admission()) else {
                continue;
            };
            let before = w
                .annotations()
                .get(label::WORKLOAD_SLICE_REPLACEMENT_FOR)
                .and_then(|r| wls.iter().find(|o| &key(o) == r))
                .map_or(0, |o| held(o).get("cpu").copied().unwrap_or(0));
            let now = held(w).get("cpu").copied().unwrap_or(0);
            pool.takes
                .insert(uid, (a.cluster_queue.clone(), (now - before).max(0)));
        }
        for cq in cqs {
            let name = cq.name_any();
            let nominal = cq
                .spec
                .resource_groups()
                .iter()
                .flat_map(|g| g.flavors.iter())
                .flat_map(|f| f.resources.iter())
                .filter(|r| r.name == "cpu")
                .map(|r| super::usage::amount(&r.nominal_quota, "cpu"))
                .sum();
            let p = cq.spec.preemption();
            pool.cqs.insert(
                name.clone(),
                Cq {
                    cohort: cq.spec.cohort().map(str::to_string),
                    nominal,
                    used: used.get(&name).copied().unwrap_or(0),
                    within: p.within_cluster_queue(),
                    reclaim: p.reclaim_within_cohort(),
                },
            );
        }
        for rs in rss {
            let uid = rs.metadata.uid.clone().unwrap_or_default();
            let chain: Vec<&Workload> = wls
                .iter()
                .filter(|w| w.labels().get(label::JOB_UID) == Some(&uid))
                .collect();
            let Some(latest) = latest_holding(&chain) else {
                continue;
            };
            let Some(a) = latest.admission() else { continue };
            // A slice already evicted, or giving its growth back, is being freed for the preemptor
            // that took it: what it still holds is no growth another preemptor could take (its
            // pods going away would otherwise read as growth: seed 438).
            let taken = |c: &str| latest.status.as_ref().is_some_and(|s| s.condition_true(c));
            if taken(condition::EVICTED) || taken(crate::admission::slices::GROWTH_PREEMPTED) {
                continue;
            }
            // The serving cluster, and the pending one once the service said it is ready to take
            // traffic (the switch is imminent, so it is serving too: not growth).
            let active = rs
                .status
                .as_ref()
                .and_then(|s| s.active_service_status.as_ref())
                .and_then(|s| s.ray_cluster_name.clone());
            let pending = crate::rayservice::job::step::pending_cluster(rs).filter(|_| switch_announced(rs));
            // And what the slice says it keeps, which the core decides on: a pending cluster's Serve
            // applications report RUNNING, then DEPLOYING again while it scales (Ray 2.60), and the
            // keeps written in that moment may be all the core saw (seed 426).
            let keeps = crate::admission::slices::growth_keeps(latest).unwrap_or_default();
            let mut names: Vec<&str> = [active.as_deref(), pending].into_iter().flatten().collect();
            for kept in &keeps {
                if !names.contains(&kept.as_str()) {
                    names.push(kept);
                }
            }
            // What they want, not only the pods they have: a worker the serving cluster scaled up to
            // waits for its slice with no pod yet, and is no growth (seeds 87 and 100).
            let serving: i64 = names
                .into_iter()
                .filter(|_| active.is_some())
                .map(|name| {
                    let own: Vec<&Pod> = pods
                        .iter()
                        .filter(|p| p.metadata.deletion_timestamp.is_none())
                        .filter(|p| p.labels().get(ray::LABEL_CLUSTER).map(String::as_str) == Some(name))
                        .collect();
                    let running: i64 = own.iter().map(|p| cpu_of(p.spec.as_ref())).sum();
                    // A pending cluster at no less than its first step, as the admission counts it:
                    // an incremental upgrade's new cluster may be created with fewer workers than
                    // the step its slice holds (seed 100).
                    let wanted = rcs
                        .iter()
                        .find(|rc| rc.name_any() == name && rc.namespace() == rs.namespace())
                        .map_or(0, |rc| {
                            wanted_cpu(&crate::rayservice::job::step::at_least_first_step(rs, rc), &own)
                        });
                    running.max(wanted)
                })
                .sum();
            pool.upgrades.push(Upgrade {
                cq: a.cluster_queue.clone(),
                priority: latest.spec.priority(),
                service: uid,
                held: held(latest).get("cpu").copied().unwrap_or(0),
                serving: active.is_some().then_some(serving),
            });
        }
        pool
    }

    /// What each service's serving clusters want, by RayService uid (`None`: none serves).
    fn serving(&self) -> HashMap<String, Option<i64>> {
        self.upgrades
            .iter()
            .map(|u| (u.service.clone(), u.serving))
            .collect()
    }

    /// Each service's growth, by RayService uid.
    fn growth(&self) -> HashMap<String, i64> {
        self.upgrades
            .iter()
            .map(|u| (u.service.clone(), u.growth()))
            .collect()
    }

    /// Counts as growth, for each service, at most what it had at every one of `checks`: a slice
    /// admitted, or a floor lowered, a moment ago may be newer than the core's view.
    fn cap_growth<'a>(&mut self, checks: impl Iterator<Item = &'a Seen> + Clone) {
        for u in &mut self.upgrades {
            let least = checks
                .clone()
                .map(|c| c.growth.get(&u.service).copied().unwrap_or(0))
                .min();
            if let (Some(g), Some(s)) = (least, u.serving) {
                u.held = u.held.min(s + g);
            }
        }
    }

    /// Counts as serving, for each service, at least what `seen` says served; a service `seen`
    /// with none serving has no growth to tell apart.
    fn raise_serving(&mut self, seen: &HashMap<String, Option<i64>>) {
        for u in &mut self.upgrades {
            match seen.get(&u.service) {
                Some(None) => u.serving = None,
                Some(Some(at_least)) => u.serving = u.serving.map(|s| s.max(*at_least)),
                None => {}
            }
        }
    }

    /// ClusterQueues `a` and `b` draw on the same free quota (the same queue, or one cohort).
    fn shares_quota(&self, a: &str, b: &str) -> bool {
        a == b
            || matches!((self.cqs.get(a).and_then(|q| q.cohort.as_ref()), self.cqs.get(b).and_then(|q| q.cohort.as_ref())), (Some(x), Some(y)) if x == y)
    }

    /// What preemptor `cq`/`priority` could get without taking any serving cluster: free quota plus
    /// the growth of every upgrade it may preempt.
    fn without_serving(&self, cq: &str, priority: i32) -> (i64, i64) {
        let Some(own) = self.cqs.get(cq) else {
            return (0, 0);
        };
        let members: Vec<(&String, &Cq)> = self
            .cqs
            .iter()
            .filter(|(name, q)| match &own.cohort {
                Some(c) => q.cohort.as_ref() == Some(c),
                None => name.as_str() == cq,
            })
            .collect();
        let free = members
            .iter()
            .map(|(_, q)| q.nominal - q.used)
            .sum::<i64>()
            .max(0);
        let mut growth = 0;
        for (name, q) in &members {
            let lower = |u: &&Upgrade| u.priority < priority;
            let mine = self.upgrades.iter().filter(|u| &u.cq == *name);
            if name.as_str() == cq {
                if own.within == PreemptionPolicy::LowerPriority {
                    growth += mine.filter(lower).map(Upgrade::growth).sum::<i64>();
                }
            } else {
                let g: i64 = match own.reclaim {
                    PreemptionPolicy::Any => mine.map(Upgrade::growth).sum(),
                    PreemptionPolicy::LowerPriority => mine.filter(lower).map(Upgrade::growth).sum(),
                    _ => 0,
                };
                growth += g.min((q.used - q.nominal).max(0));
            }
        }
        (free, growth)
    }
}

/// The preemptor's UID in Kueue's message ("Preempted to accommodate a workload (UID: u, ...").
fn preemptor_uid(message: &str) -> Option<&str> {
    let rest = message
        .split_once("Preempted to accommodate a workload (UID: ")?
        .1;
    rest.split([',', ')']).next().filter(|s| !s.is_empty())
}

/// The preemptor's ClusterQueue, the last element of "preemptor path: /cohort/cq".
fn preemptor_cq(message: &str) -> Option<&str> {
    let rest = message.split_once("preemptor path: ")?.1;
    rest.split(';')
        .next()?
        .trim()
        .rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
}

impl Serving {
    /// Judges the preemptions of services' slices not judged yet, on the quota the previous check
    /// saw (this one's when there is none).
    pub(super) fn judge(
        &mut self,
        wls: &[Workload],
        rss: &[RayService],
        rcs: &[RayCluster],
        cqs: &[ClusterQueue],
        pods: &[Pod],
    ) {
        let now = Pool::read(wls, rss, rcs, cqs, pods);
        self.recent.push_back(Seen {
            at: Instant::now(),
            serving: now.serving(),
            growth: now.growth(),
        });
        while self.recent.front().is_some_and(|c| c.at.elapsed() > FLOOR_LAG) {
            self.recent.pop_front();
        }
        // What served at a check within the lag served for the core too (its floor may still say
        // so), and a service that had none serving within it may still have no floor at all.
        let mut served_lately: HashMap<String, Option<i64>> = HashMap::new();
        for c in &self.recent {
            for (svc, v) in &c.serving {
                let e = served_lately.entry(svc.clone()).or_insert(Some(0));
                *e = e.zip(*v).map(|(a, b)| a.max(b));
            }
        }
        let mut before = self.before.take().unwrap_or_else(|| now.clone());
        before.raise_serving(&served_lately);
        // And growth that appeared within it (a slice admitted in the same scheduling cycle as the
        // preemption, a floor lowered a moment before it: seed 100) may be newer than the core's view.
        // This check, after the preemption, no longer counts the victim's slice.
        before.cap_growth(self.recent.iter().take(self.recent.len().saturating_sub(1)));
        // What each Workload asks as a preemptor, kept from the first sight (a replacement's
        // replaced slice is gone once it is admitted) and refreshed while it has no admission.
        for w in wls {
            let Some(uid) = w.metadata.uid.clone() else {
                continue;
            };
            let p = Preemptor::of(w, wls);
            match self.known.get_mut(&uid) {
                Some(k) if k.cq.is_none() => k.cq = p.cq,
                Some(_) => {}
                None => {
                    self.known.insert(uid, p);
                }
            }
        }
        let present: HashSet<&str> = wls.iter().filter_map(|w| w.metadata.uid.as_deref()).collect();
        for e in self.excused.values_mut().chain(self.unneeded.values_mut()) {
            e.victim_gone = !present.contains(e.victim.as_str());
        }
        for uid in self.waiting.iter().filter(|u| !present.contains(u.as_str())) {
            if let Some(k) = self.known.get(uid) {
                self.vanished.push_back((Instant::now(), uid.clone(), k.need));
            }
        }
        while self
            .vanished
            .front()
            .is_some_and(|(t, _, _)| t.elapsed() > FLOOR_LAG)
        {
            self.vanished.pop_front();
        }
        self.waiting = wls
            .iter()
            .filter(|w| w.admission().is_none())
            .filter_map(|w| w.metadata.uid.clone())
            .collect();
        // A claim ends once its preemptor holds quota (the quota then reads used) or is gone.
        self.claims
            .retain(|id, _| present.contains(id.as_str()) && !now.takes.contains_key(id));
        let services: HashSet<String> = rss.iter().filter_map(|r| r.metadata.uid.clone()).collect();
        for w in wls {
            let Some(service) = w.labels().get(label::JOB_UID).filter(|u| services.contains(*u)) else {
                continue;
            };
            // Kueue writes both `Preempted` and `Evicted`; one of them judges the preemption.
            let preempted = w
                .status
                .as_ref()
                .and_then(|s| s.condition("Preempted").or_else(|| s.condition("Evicted")));
            for c in preempted.into_iter().filter(|c| c.status == "True") {
                let Some(uid) = preemptor_uid(&c.message) else {
                    continue;
                };
                let id = format!(
                    "{}@{}",
                    w.metadata.uid.as_deref().unwrap_or_default(),
                    c.last_transition_time.0
                );
                if !self.judged.insert(id) {
                    continue;
                }
                let Some(u) = self.known.get(uid) else {
                    // A preemptor no check ever saw: nothing to weigh, so no excuse either; a gap
                    // that follows says so.
                    let why = format!(
                        "{} preempted by a workload no check saw (UID {uid}): {}",
                        w.name_any(),
                        c.message
                    );
                    self.unneeded.insert(service.clone(), Excuse::of(why, w));
                    continue;
                };
                let need = u.need;
                self.preemptions += 1;
                let cq =
                    u.cq.as_deref()
                        .or_else(|| preemptor_cq(&c.message))
                        .unwrap_or_default();
                let (free, growth) = before.without_serving(cq, u.priority);
                // The check before may be older than the preemption: quota other workloads took
                // since, and what preemptors still waiting for their victims will take, was not
                // free for this one (seeds 219 and 584: a growth slice admitted, a preemptor
                // claiming the free part, in the same second as the preemption).
                // So was what a waiting Workload deleted a moment ago asked: the core may have
                // admitted it before it saw the deletion (seed 147: settling deleted 6,000m of batch
                // work as the raised quota admitted it, and its usage made room for urgent work
                // only by a preemption). Its queue is not known here: counted for every queue.
                let taken: i64 = now
                    .takes
                    .iter()
                    .filter(|(id, (q, _))| {
                        id.as_str() != uid && !before.takes.contains_key(*id) && before.shares_quota(cq, q)
                    })
                    .map(|(_, (_, m))| m)
                    .sum::<i64>()
                    + self
                        .vanished
                        .iter()
                        .filter(|(_, id, _)| id != uid)
                        .map(|(_, _, m)| m)
                        .sum::<i64>();
                let claimed: i64 = self
                    .claims
                    .iter()
                    .filter(|(id, c)| id.as_str() != uid && before.shares_quota(cq, &c.cq))
                    .map(|(_, c)| c.milli)
                    .sum();
                let free = (free - taken - claimed).max(0);
                if !now.takes.contains_key(uid) {
                    self.claims.insert(
                        uid.to_string(),
                        Claim {
                            cq: cq.to_string(),
                            milli: need.min(free),
                        },
                    );
                }
                let others = if taken + claimed > 0 {
                    format!(" ({}m more taken or claimed by others)", taken + claimed)
                } else {
                    String::new()
                };
                let why = format!(
                    "{} preempted by {} (priority {}, ClusterQueue {cq}) needing {need}m, with {free}m free{others} and {growth}m of upgrades' growth it may preempt",
                    w.name_any(),
                    u.name,
                    u.priority
                );
                tracing::debug!(legitimate = need > free + growth, upgrades = ?before.upgrades, "chaos I8: {why}");
                if need > free + growth {
                    self.excused.insert(service.clone(), Excuse::of(why, w));
                } else {
                    self.unneeded.insert(service.clone(), Excuse::of(why, w));
                }
            }
        }
        self.before = Some(now);
    }

    /// I8 for one service, after `judge`. `None` when it serves, never served, is being deleted by
    /// its user, or a legitimate preemption took it down.
    pub(super) fn gap(&mut self, rs: &RayService) -> Option<String> {
        let uid = rs.metadata.uid.clone().unwrap_or_default();
        let st = rs.status.as_ref();
        let endpoints = st.and_then(|s| s.num_serve_endpoints).unwrap_or(0);
        let ready = crate::api::conditions::is_true(st.and_then(|s| s.conditions.as_deref()), "Ready");
        if rs.metadata.deletion_timestamp.is_some() {
            self.served.remove(&uid);
            return None;
        }
        if ready && endpoints > 0 {
            self.served.insert(uid.clone());
            // An excuse is spent when the service serves again after going down; one whose
            // takedown never came (the slice gone, the service up throughout) lapses uncounted.
            // A service still serving right after its eviction keeps it: it goes down next.
            match self.excused.get(&uid) {
                Some(e) if e.went_down => {
                    tracing::debug!(
                        "chaos I8: {} serves again after a legitimate takedown: {}",
                        rs.name_any(),
                        e.why
                    );
                    self.excused.remove(&uid);
                    self.excuses += 1;
                }
                Some(e) if e.victim_gone => {
                    self.excused.remove(&uid);
                }
                _ => {}
            }
            if self
                .unneeded
                .get(&uid)
                .is_some_and(|u| u.went_down || u.victim_gone)
            {
                self.unneeded.remove(&uid);
            }
            return None;
        }
        // Down means down after serving: a service not serving yet when its eviction is judged
        // may still come up on the pods the eviction has not reached (seed 584).
        if !self.served.contains(&uid) {
            return None;
        }
        if let Some(u) = self.unneeded.get_mut(&uid) {
            u.went_down = true;
        }
        if let Some(e) = self.excused.get_mut(&uid) {
            e.went_down = true;
            return None;
        }
        let why = st
            .and_then(|s| s.conditions.as_deref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .map_or_else(String::new, |c| format!(" ({}: {})", c.reason, c.message));
        let preempted = self
            .unneeded
            .get(&uid)
            .map_or_else(String::new, |p| format!("; not excused: {}", p.why));
        Some(format!(
            "I8: RayService {} served, and now Ready={ready} with {endpoints} serve endpoint(s){why}{preempted}",
            rs.name_any()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(ready: bool, endpoints: i32, suspend: bool) -> RayService {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": "shop", "namespace": "default", "uid": "u1"},
            "spec": {"suspend": suspend, "rayClusterConfig": {"headGroupSpec": {"template": {"spec": {"containers": []}}}}},
            "status": {"numServeEndpoints": endpoints,
                       "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                                       "reason": "x", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }))
        .expect("a RayService")
    }

    #[test]
    fn a_served_service_that_stops_serving_is_an_i8_violation_unless_excused() {
        let mut s = Serving::default();
        // Not yet served: waiting to serve is no gap.
        assert_eq!(s.gap(&service(false, 0, false)), None);
        assert_eq!(s.gap(&service(true, 2, false)), None);
        // Served, then no endpoints: a gap; a suspend (Kueue's eviction) excuses nothing by itself.
        let gap = s.gap(&service(true, 0, false)).expect("a violation");
        assert!(gap.starts_with("I8: RayService shop served"), "{gap}");
        assert!(s.gap(&service(false, 2, false)).is_some());
        assert!(s.gap(&service(false, 0, true)).is_some());
        // A legitimate preemption excuses it until it serves again, and only until then.
        s.excused.insert("u1".into(), excuse());
        assert_eq!(s.gap(&service(false, 0, true)), None);
        assert_eq!(s.gap(&service(true, 1, false)), None);
        assert_eq!(s.excuses, 1);
        assert!(s.gap(&service(false, 0, false)).is_some());
    }

    fn excuse() -> Excuse {
        Excuse {
            why: "preempted".into(),
            victim: "w1".into(),
            went_down: false,
            victim_gone: false,
        }
    }

    /// Seed 3 (`quotagate chaos --scenario contention --seed 3`): the eviction is written before the
    /// service stops serving, so the check that judges the preemption legitimate still sees it
    /// Ready; that sight must not spend the excuse, or the takedown that follows is a false I8.
    #[test]
    fn an_excuse_outlives_the_service_serving_between_its_eviction_and_its_suspend() {
        let mut s = Serving::default();
        assert_eq!(s.gap(&service(true, 2, false)), None);
        s.excused.insert("u1".into(), excuse());
        assert_eq!(
            s.gap(&service(true, 2, false)),
            None,
            "still serving: the suspend has not landed"
        );
        assert_eq!(s.gap(&service(false, 0, false)), None, "the takedown is excused");
        assert_eq!(s.gap(&service(false, 0, true)), None);
        assert_eq!(s.excuses, 0);
        assert_eq!(s.gap(&service(true, 1, false)), None);
        assert_eq!(s.excuses, 1, "spent once it serves again");
        assert!(
            s.gap(&service(false, 0, false)).is_some(),
            "a second takedown needs its own excuse"
        );
        // An excuse whose takedown never came lapses once the evicted slice is gone, uncounted.
        let mut e = excuse();
        e.victim_gone = true;
        s.excused.insert("u1".into(), e);
        assert_eq!(s.gap(&service(true, 1, false)), None);
        assert!(s.excused.is_empty() && s.excuses == 1);
    }

    /// Seed 584: a service preempted before it first served came up on the pods the eviction had
    /// not reached yet, then went down; its not serving before that was no takedown to spend the
    /// excuse on.
    #[test]
    fn an_excuse_judged_before_the_service_first_served_covers_the_takedown_after() {
        let mut s = Serving::default();
        assert_eq!(s.gap(&service(false, 0, false)), None);
        s.excused.insert("u1".into(), excuse());
        assert_eq!(s.gap(&service(false, 0, false)), None, "not serving yet");
        assert_eq!(s.gap(&service(true, 2, false)), None, "first served");
        assert_eq!(s.excuses, 0, "no takedown yet");
        assert_eq!(s.gap(&service(false, 0, true)), None, "the takedown is excused");
        assert_eq!(s.gap(&service(true, 1, false)), None);
        assert_eq!(s.excuses, 1);
    }

    fn workload(v: serde_json::Value) -> Workload {
        serde_json::from_value(v).expect("a Workload")
    }

    /// Seeds 12 and 18: urgent work preempts a service and is deleted (the run settles) before
    /// the next check; the judge still knows what it needed from an earlier check.
    #[test]
    fn a_preemptor_deleted_before_the_check_is_judged_from_an_earlier_sight() {
        let cq = |nominal: &str| -> ClusterQueue {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
                "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": nominal}]}]}],
                         "preemption": {"withinClusterQueue": "LowerPriority"}},
            }))
            .expect("a ClusterQueue")
        };
        let mut urgent = Workload::build("work-1", "default")
            .queue("lq")
            .priority(1000)
            .podset("main", 1, [("cpu", "2500m")])
            .build();
        urgent.metadata.uid = Some("p1".into());
        let rs = service(true, 2, false);
        let victim = workload(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": "rayservice-shop", "namespace": "default", "uid": "w1", "labels": {(label::JOB_UID): "u1"}},
            "spec": {"queueName": "lq", "podSets": []},
            "status": {"conditions": [{"type": "Evicted", "status": "True", "reason": "Preempted", "lastTransitionTime": "2026-01-01T00:00:01Z",
                       "message": "Preempted to accommodate a workload (UID: p1, JobUID: j) due to prioritization in the ClusterQueue; preemptor path: /cq; preemptee path: /cq"}]},
        }));
        let mut s = Serving::default();
        s.judge(&[urgent], std::slice::from_ref(&rs), &[], &[cq("1000m")], &[]);
        // The preemptor is gone when the eviction is seen.
        s.judge(&[victim], std::slice::from_ref(&rs), &[], &[cq("1000m")], &[]);
        assert_eq!(s.preemptions, 1);
        let e = s
            .excused
            .get("u1")
            .expect("a legitimate takedown: 2500m needed, 1000m free");
        assert!(e.why.contains("needing 2500m, with 1000m free"), "{}", e.why);
        assert_eq!(s.gap(&service(false, 0, true)), None);
    }

    fn pool(within: PreemptionPolicy, reclaim: PreemptionPolicy, cohort: bool) -> Pool {
        let cq = |nominal, used| Cq {
            cohort: cohort.then(|| "pool".to_string()),
            nominal,
            used,
            within,
            reclaim,
        };
        let mut cqs = BTreeMap::new();
        cqs.insert("cq".to_string(), cq(4000, 4000));
        if cohort {
            // cq-b borrows 1500m of cq's quota.
            cqs.insert("cq-b".to_string(), cq(2000, 3500));
            if let Some(q) = cqs.get_mut("cq") {
                q.used = 2500;
            }
        }
        let up = |cq: &str, priority, growth| Upgrade {
            cq: cq.into(),
            priority,
            service: format!("{cq}-{priority}"),
            held: growth,
            serving: Some(0),
        };
        Pool {
            cqs,
            upgrades: vec![
                up("cq", 0, 1000),
                up("cq", 1000, 2000),
                up("cq-b", 0, 1000),
                up("cq-b", 1000, 1000),
            ],
            takes: HashMap::new(),
        }
    }

    #[test]
    fn a_preemptor_may_count_only_the_growth_it_may_preempt() {
        use PreemptionPolicy::{Any, LowerPriority, Never};
        // One ClusterQueue, full: a prod preemptor may take the low service's growth only.
        let p = pool(LowerPriority, Never, false);
        assert_eq!(p.without_serving("cq", 1000), (0, 1000));
        assert_eq!(p.without_serving("cq", 2000), (0, 3000));
        assert_eq!(pool(Never, Never, false).without_serving("cq", 2000), (0, 0));
        // A cohort, full (6000 of 6000): from cq-b only what it borrows (1500m), of the growth the
        // reclaim policy lets it take.
        assert_eq!(
            pool(LowerPriority, Any, true).without_serving("cq", 1000),
            (0, 1000 + 1500)
        );
        assert_eq!(
            pool(LowerPriority, LowerPriority, true).without_serving("cq", 1000),
            (0, 1000 + 1000)
        );
        assert_eq!(pool(Never, Never, true).without_serving("cq", 1000), (0, 0));
        // An unknown ClusterQueue can have nothing.
        assert_eq!(p.without_serving("nope", 1000), (0, 0));
    }

    /// ClusterQueue `cq`: `nominal` CPU of flavor `f`, preemption within it of lower priorities.
    fn lower_priority_cq(nominal: &str) -> ClusterQueue {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": nominal}]}]}],
                     "preemption": {"withinClusterQueue": "LowerPriority"}},
        }))
        .expect("a ClusterQueue")
    }

    /// RayService `shop` (uid u1) serving from cluster `shop-a`.
    fn serving_shop_a() -> RayService {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "shop", "namespace": "default", "uid": "u1"},
            "spec": {"rayClusterConfig": {"headGroupSpec": {"template": {"spec": {"containers": []}}}}},
            "status": {"activeServiceStatus": {"rayClusterName": "shop-a"}},
        }))
        .expect("a RayService")
    }

    /// A pod of cluster `shop-a` in `group`, asking 1 CPU.
    fn shop_a_pod(name: &str, group: &str) -> Pod {
        pod_of("shop-a", name, group)
    }

    /// A pod of `cluster` in `group`, asking 1 CPU.
    fn pod_of(cluster: &str, name: &str, group: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"ray.io/cluster": cluster, "ray.io/group": group}},
            "spec": {"containers": [{"name": "ray", "resources": {"requests": {"cpu": "1"}}}]},
        }))
        .expect("a Pod")
    }

    /// `shop-a`'s head and two workers.
    fn shop_a_pods() -> [Pod; 3] {
        [
            shop_a_pod("shop-a-head", "headgroup"),
            shop_a_pod("shop-a-w1", "workers"),
            shop_a_pod("shop-a-w2", "workers"),
        ]
    }

    /// Urgent work (uid p1, priority 1000) asking 1 CPU.
    fn urgent() -> Workload {
        Workload::build("urgent", "default")
            .queue("lq")
            .uid("p1")
            .priority(1000)
            .podset("main", 1, [("cpu", "1")])
            .build()
    }

    /// Kueue's message for a preemption by p1 in ClusterQueue `cq`.
    const PREEMPTED_BY_P1: &str = "Preempted to accommodate a workload (UID: p1, JobUID: j) due to prioritization in the ClusterQueue; preemptor path: /cq; preemptee path: /cq";

    /// `b` evicted by p1.
    fn evicted_by_p1(b: crate::api::kueue::builders::WorkloadBuilder) -> Workload {
        b.condition(crate::api::kueue::builders::condition(
            "Evicted",
            true,
            "Preempted",
            PREEMPTED_BY_P1,
        ))
        .build()
    }

    /// `shop`'s slice (uid w1): a head and 2 workers at 1 CPU each, admitted in `cq`.
    fn shop_slice() -> crate::api::kueue::builders::WorkloadBuilder {
        Workload::build("rayservice-shop", "default")
            .queue("lq")
            .uid("w1")
            .label(label::JOB_UID, "u1")
            .podset("head", 1, [("cpu", "1")])
            .podset("workers", 2, [("cpu", "1")])
            .reserve_quota("cq", "f")
            .admitted()
    }

    /// Seed 438: a service's slice evicted by urgent work still holds its quota while its pods go,
    /// and what its pods no longer use read as growth; a second preemptor was then judged to have
    /// had that growth to take, though the eviction had already claimed it.
    #[test]
    fn an_evicted_slice_gives_no_growth_another_preemptor_could_take() {
        let (cq, rs, pod) = (
            lower_priority_cq("4"),
            serving_shop_a(),
            shop_a_pod("shop-a-head", "headgroup"),
        );
        let slice = shop_slice;
        // 3 CPU held, 1 of them by the serving cluster's pod: 2 CPU of growth, 1 CPU free.
        let pool = Pool::read(
            &[slice().build()],
            std::slice::from_ref(&rs),
            &[],
            std::slice::from_ref(&cq),
            std::slice::from_ref(&pod),
        );
        assert_eq!(pool.without_serving("cq", 1000), (1000, 2000));
        // Evicted, or giving its growth back: nothing of it is growth for another preemptor.
        for c in [condition::EVICTED, crate::admission::slices::GROWTH_PREEMPTED] {
            let evicted = slice()
                .condition(crate::api::kueue::builders::condition(c, true, "Preempted", ""))
                .build();
            let pool = Pool::read(
                &[evicted],
                std::slice::from_ref(&rs),
                &[],
                std::slice::from_ref(&cq),
                std::slice::from_ref(&pod),
            );
            assert_eq!(pool.without_serving("cq", 1000), (1000, 0), "{c}");
        }
    }

    /// Seeds 87 and 100: the serving cluster scaled up a worker, its slice admitted, the worker's
    /// pod not made yet. What the cluster wants is serving, not growth: the core keeps it (the
    /// slice's floor follows the live clusters' specs), so only a whole eviction could free it.
    #[test]
    fn a_worker_the_serving_cluster_scaled_up_to_is_no_growth_before_its_pod_exists() {
        let (cq, rs) = (lower_priority_cq("3"), serving_shop_a());
        let template = serde_json::json!({"spec": {"containers": [{"name": "ray", "resources": {"requests": {"cpu": "1"}}}]}});
        let rc: RayCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "shop-a", "namespace": "default"},
            "spec": {"headGroupSpec": {"template": template}, "workerGroupSpecs": [{"groupName": "workers", "replicas": 2, "template": template}]},
        }))
        .expect("a RayCluster");
        let pods = [
            shop_a_pod("shop-a-head", "headgroup"),
            shop_a_pod("shop-a-worker-1", "workers"),
        ];
        let slice = shop_slice().build();
        let wls = std::slice::from_ref(&slice);
        let (rss, cqs) = (std::slice::from_ref(&rs), std::slice::from_ref(&cq));
        // Read from its pods alone, the second worker would be 1 CPU of growth.
        assert_eq!(
            Pool::read(wls, rss, &[], cqs, &pods).without_serving("cq", 1000),
            (0, 1000)
        );
        assert_eq!(
            Pool::read(wls, rss, std::slice::from_ref(&rc), cqs, &pods).without_serving("cq", 1000),
            (0, 0)
        );
    }

    /// The core decides on the floor the job controller last wrote, a reconcile behind the
    /// service's status: what served at a check within `FLOOR_LAG` is no growth for the judge
    /// either (a switch: the old cluster served until a moment ago, and the floor still keeps it),
    /// and a service that had none serving within it may have no floor yet.
    #[test]
    fn what_served_within_the_floor_lag_is_no_growth() {
        let (cq, rs) = (lower_priority_cq("3"), serving_shop_a());
        let (all, urgent, evicted) = (shop_a_pods(), urgent(), evicted_by_p1(shop_slice()));
        let (rss, cqs) = (std::slice::from_ref(&rs), std::slice::from_ref(&cq));
        // The slice's 3 CPU all served at the first check; at the second only the head's 1 CPU does.
        let mut lagged = Serving::default();
        lagged.judge(&[shop_slice().build(), urgent.clone()], rss, &[], cqs, &all);
        lagged.judge(&[shop_slice().build(), urgent.clone()], rss, &[], cqs, &all[..1]);
        lagged.judge(&[evicted.clone(), urgent.clone()], rss, &[], cqs, &all[..1]);
        assert!(
            lagged.excused.contains_key("u1") && lagged.unneeded.is_empty(),
            "served a moment ago: no growth to take"
        );
        // Had it served only the head throughout, its 2 CPU beyond were growth: the eviction was not needed.
        let mut s = Serving::default();
        s.judge(&[shop_slice().build(), urgent.clone()], rss, &[], cqs, &all[..1]);
        s.judge(&[evicted.clone(), urgent.clone()], rss, &[], cqs, &all[..1]);
        let e = s.unneeded.get("u1").expect("growth alone could have made room");
        assert!(
            e.why
                .contains("needing 1000m, with 0m free and 2000m of upgrades' growth"),
            "{}",
            e.why
        );
        // None served a moment ago (the head just began to): the slice may carry no floor yet.
        let mut starting = rs.clone();
        starting.status = None;
        let mut s = Serving::default();
        s.judge(
            &[shop_slice().build(), urgent.clone()],
            std::slice::from_ref(&starting),
            &[],
            cqs,
            &all[..1],
        );
        s.judge(&[shop_slice().build(), urgent.clone()], rss, &[], cqs, &all[..1]);
        s.judge(&[evicted, urgent], rss, &[], cqs, &all[..1]);
        assert!(
            s.excused.contains_key("u1") && s.unneeded.is_empty(),
            "no floor yet: no growth to take"
        );
    }

    /// Seed 426: the pending cluster's applications reported RUNNING for 200 ms (Ray reports an app
    /// DEPLOYING again while it scales), the job controller wrote a floor keeping it, and the core
    /// decided on that floor; no check saw the RUNNING report. What the slice says it keeps is no
    /// growth either.
    #[test]
    fn a_pending_cluster_the_slice_keeps_is_no_growth() {
        let (cq, rs) = (lower_priority_cq("3"), serving_shop_a());
        let pods = [
            shop_a_pod("shop-a-head", "headgroup"),
            pod_of("shop-b", "shop-b-w1", "workers"),
            pod_of("shop-b", "shop-b-w2", "workers"),
        ];
        let (urgent, evict) = (urgent(), evicted_by_p1);
        let (rss, cqs) = (std::slice::from_ref(&rs), std::slice::from_ref(&cq));
        let keeping =
            || shop_slice().annotation(crate::admission::slices::GROWTH_KEEPS_ANNOTATION, "shop-a,shop-b");
        let mut kept = Serving::default();
        kept.judge(&[keeping().build(), urgent.clone()], rss, &[], cqs, &pods);
        kept.judge(&[evict(keeping()), urgent.clone()], rss, &[], cqs, &pods);
        assert!(
            kept.excused.contains_key("u1") && kept.unneeded.is_empty(),
            "the slice kept shop-b: no growth to take"
        );
        // Kept by nothing, shop-b's 2 CPU were growth.
        let mut s = Serving::default();
        s.judge(&[shop_slice().build(), urgent.clone()], rss, &[], cqs, &pods);
        s.judge(&[evict(shop_slice()), urgent], rss, &[], cqs, &pods);
        let e = s.unneeded.get("u1").expect("growth alone could have made room");
        assert!(e.why.contains("2000m of upgrades' growth"), "{}", e.why);
    }

    /// Seed 100: the growth the check before saw had appeared a moment earlier (the upgrade's bigger
    /// slice admitted in the same scheduling cycle as the preemption); the core had not seen it.
    #[test]
    fn growth_that_appeared_within_the_floor_lag_is_not_counted() {
        let (cq, rs) = (lower_priority_cq("5"), serving_shop_a());
        let (all, urgent) = (shop_a_pods(), urgent());
        let grown = || {
            Workload::build("rayservice-shop", "default")
                .queue("lq")
                .uid("w1")
                .label(label::JOB_UID, "u1")
                .podset("head", 1, [("cpu", "1")])
                .podset("workers", 4, [("cpu", "1")])
                .reserve_quota("cq", "f")
                .admitted()
        };
        let evicted = evicted_by_p1(grown());
        let (rss, cqs) = (std::slice::from_ref(&rs), std::slice::from_ref(&cq));
        // 3 CPU held and served, then 5 held: 2 CPU of growth only since the check before.
        let mut lately = Serving::default();
        lately.judge(&[shop_slice().build(), urgent.clone()], rss, &[], cqs, &all);
        lately.judge(&[grown().build(), urgent.clone()], rss, &[], cqs, &all);
        lately.judge(&[evicted.clone(), urgent.clone()], rss, &[], cqs, &all);
        assert!(
            lately.excused.contains_key("u1") && lately.unneeded.is_empty(),
            "growth a moment old: the core may not have seen it"
        );
        // Held at 5 throughout, its 2 CPU beyond what served were growth: the eviction was not needed.
        let mut s = Serving::default();
        s.judge(&[grown().build(), urgent.clone()], rss, &[], cqs, &all);
        s.judge(&[evicted, urgent], rss, &[], cqs, &all);
        let e = s.unneeded.get("u1").expect("growth alone could have made room");
        assert!(e.why.contains("2000m of upgrades' growth"), "{}", e.why);
    }

    /// The eviction is written before the service stops serving: a preemption judged unneeded is
    /// still named by the gap that follows (seed 438's gap named none).
    #[test]
    fn an_unneeded_preemption_is_named_by_the_gap_that_follows_it() {
        let mut s = Serving::default();
        assert_eq!(s.gap(&service(true, 2, false)), None);
        s.unneeded.insert("u1".into(), excuse());
        assert_eq!(
            s.gap(&service(true, 2, false)),
            None,
            "still serving: the suspend has not landed"
        );
        let gap = s.gap(&service(false, 0, true)).expect("a violation");
        assert!(gap.ends_with("; not excused: preempted"), "{gap}");
        // Serving again after it went down, the preemption is spent.
        assert_eq!(s.gap(&service(true, 1, false)), None);
        assert!(s.unneeded.is_empty());
    }

    /// Seeds 219 and 584: the free quota the check before saw was gone by the preemption, taken by
    /// a slice admitted in between, or claimed by an earlier preemptor still waiting for its victim.
    #[test]
    fn free_quota_taken_or_claimed_since_the_check_before_is_not_free() {
        let cq = lower_priority_cq("3");
        let wl = |name: &str, uid: &str, cpu: &str, priority: i32| {
            Workload::build(name, "default")
                .queue("lq")
                .uid(uid)
                .priority(priority)
                .podset("main", 1, [("cpu", cpu)])
        };
        let served = |name: &str, uid: &str| {
            wl(name, uid, "1500m", 0)
                .label(label::JOB_UID, "u1")
                .reserve_quota("cq", "f")
                .admitted()
        };
        let preempted_by = |b: crate::api::kueue::builders::WorkloadBuilder, preemptor: &str, at: &str| {
            let m = format!(
                "Preempted to accommodate a workload (UID: {preemptor}, JobUID: j) due to prioritization in the ClusterQueue; preemptor path: /cq; preemptee path: /cq"
            );
            let mut c = crate::api::kueue::builders::condition("Evicted", true, "Preempted", &m);
            c.last_transition_time =
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at.parse().expect("a time"));
            b.condition(c).build()
        };
        let rs = service(true, 2, false);
        let cqs = std::slice::from_ref(&cq);

        // Taken: 1500m free at the check before; a batch Workload admitted since took it.
        let urgent = wl("urgent", "p1", "1500m", 1000).build();
        let mut s = Serving::default();
        s.judge(
            &[served("rayservice-shop", "w1").build(), urgent.clone()],
            std::slice::from_ref(&rs),
            &[],
            cqs,
            &[],
        );
        let batch = wl("batch", "b1", "1500m", 500)
            .reserve_quota("cq", "f")
            .admitted()
            .build();
        s.judge(
            &[
                preempted_by(served("rayservice-shop", "w1"), "p1", "2026-01-01T00:00:01Z"),
                urgent.clone(),
                batch,
            ],
            std::slice::from_ref(&rs),
            &[],
            cqs,
            &[],
        );
        let e = s.excused.get("u1").expect("legitimate: the free quota was taken");
        assert!(
            e.why
                .contains("with 0m free (1500m more taken or claimed by others)"),
            "{}",
            e.why
        );

        // Claimed: a first preemptor needing 2000m takes the 1500m free once its victim is gone;
        // a second, judged before the first holds anything, finds none free.
        let first = wl("first", "p1", "2000m", 1000).build();
        let second = wl("second", "p2", "1500m", 1000).build();
        let mut s = Serving::default();
        s.judge(
            &[
                served("rayservice-shop", "w1").build(),
                first.clone(),
                second.clone(),
            ],
            std::slice::from_ref(&rs),
            &[],
            cqs,
            &[],
        );
        s.judge(
            &[
                preempted_by(served("rayservice-shop", "w1"), "p1", "2026-01-01T00:00:01Z"),
                first.clone(),
                second.clone(),
            ],
            std::slice::from_ref(&rs),
            &[],
            cqs,
            &[],
        );
        assert!(
            s.claims.get("p1").is_some_and(|c| c.milli == 1500),
            "{:?}",
            s.claims
        );
        s.excused.clear();
        s.judge(
            &[
                preempted_by(served("rayservice-shop", "w1"), "p2", "2026-01-01T00:00:02Z"),
                first.clone(),
                second,
            ],
            std::slice::from_ref(&rs),
            &[],
            cqs,
            &[],
        );
        assert!(
            s.unneeded.is_empty() && s.excused.contains_key("u1"),
            "the second preemption is legitimate too"
        );
        // Without the claim the same preemption would read as one the free quota could satisfy.
        let mut s = Serving::default();
        s.judge(
            &[
                served("rayservice-shop", "w1").build(),
                wl("second", "p2", "1500m", 1000).build(),
            ],
            std::slice::from_ref(&rs),
            &[],
            cqs,
            &[],
        );
        s.judge(
            &[
                preempted_by(served("rayservice-shop", "w1"), "p2", "2026-01-01T00:00:02Z"),
                wl("second", "p2", "1500m", 1000).build(),
            ],
            std::slice::from_ref(&rs),
            &[],
            cqs,
            &[],
        );
        assert!(
            s.unneeded.contains_key("u1"),
            "1500m free, 1500m needed: not legitimate"
        );
    }

    /// Seed 147: settling deleted waiting batch work as the raised quota let the core admit it; the
    /// core, not yet seeing the deletion, preempted a service for urgent work on that usage.
    #[test]
    fn what_a_waiting_workload_deleted_a_moment_ago_asked_is_not_free() {
        let cq = lower_priority_cq("3");
        let wl = |name: &str, uid: &str, priority: i32| {
            Workload::build(name, "default")
                .queue("lq")
                .uid(uid)
                .priority(priority)
                .podset("main", 1, [("cpu", "1500m")])
        };
        let served = || {
            wl("rayservice-shop", "w1", 0)
                .label(label::JOB_UID, "u1")
                .reserve_quota("cq", "f")
                .admitted()
        };
        let evicted = evicted_by_p1(served());
        let (rs, cqs) = (service(true, 2, false), std::slice::from_ref(&cq));
        let (urgent, batch) = (wl("urgent", "p1", 1000).build(), wl("batch", "b1", 500).build());
        let mut s = Serving::default();
        s.judge(
            &[served().build(), urgent.clone(), batch],
            std::slice::from_ref(&rs),
            &[],
            cqs,
            &[],
        );
        s.judge(
            &[evicted.clone(), urgent.clone()],
            std::slice::from_ref(&rs),
            &[],
            cqs,
            &[],
        );
        let e = s
            .excused
            .get("u1")
            .expect("legitimate: the deleted batch work may have taken the free quota");
        assert!(
            e.why
                .contains("with 0m free (1500m more taken or claimed by others)"),
            "{}",
            e.why
        );
        // Without the deletion, 1500m free was enough: not legitimate.
        let mut s = Serving::default();
        s.judge(
            &[served().build(), urgent.clone()],
            std::slice::from_ref(&rs),
            &[],
            cqs,
            &[],
        );
        s.judge(&[evicted, urgent], std::slice::from_ref(&rs), &[], cqs, &[]);
        assert!(s.unneeded.contains_key("u1"));
    }

    #[test]
    fn kueue_preemption_messages_name_the_preemptor() {
        let m = "Preempted to accommodate a workload (UID: abc-1, JobUID: j) due to reclamation within the cohort; preemptor path: /pool/cq-b; preemptee path: /pool/cq";
        assert_eq!(preemptor_uid(m), Some("abc-1"));
        assert_eq!(preemptor_cq(m), Some("cq-b"));
        assert_eq!(preemptor_uid("Evicted by a user"), None);
    }
}
