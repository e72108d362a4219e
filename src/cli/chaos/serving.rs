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
//!   that queue borrows. If `R` is more, Kueue's whole eviction is legitimate and the service's gap is
//!   excused until it serves again; if not, evicting the growth first would have been enough, and
//!   the gap is a violation whose message says so.
//!
//! Anything else (upgrades, version changes mid-upgrade, batch work, manager restarts, faults) must
//! not take a service down.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::chain::{holds_quota, latest_holding};
use super::usage::held;
use crate::api::kueue::constants::label;
use crate::api::kueue::{ClusterQueue, PreemptionPolicy, Workload};
use crate::api::ray::RayService;

/// What I8 remembers between checks.
#[derive(Default)]
pub(super) struct Serving {
    /// The services (by uid) seen Ready with serve endpoints.
    served: HashSet<String>,
    /// Services (by uid) a legitimate preemption took down, with why, until they serve again.
    excused: HashMap<String, String>,
    /// Preemptions of a service that growth alone could have satisfied, by service uid.
    unneeded: HashMap<String, String>,
    /// Preemption conditions already judged (`<workload uid>@<transition time>`).
    judged: HashSet<String>,
    /// The quota as the previous check saw it: a preemption is judged on the state before it.
    before: Option<Pool>,
    /// How many legitimate takedowns were excused, and how many preemptions of a service's slice
    /// were judged (for the report of a run).
    pub(super) excuses: u64,
    pub(super) preemptions: u64,
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
    /// What its latest slice holds beyond its serving cluster's pods (milli-CPU, at least 0).
    growth: i64,
}

/// The CPU quota and every service's growth at one check.
#[derive(Clone, Debug, Default)]
struct Pool {
    cqs: BTreeMap<String, Cq>,
    upgrades: Vec<Upgrade>,
}

fn cpu_of(spec: Option<&k8s_openapi::api::core::v1::PodSpec>) -> i64 {
    spec.and_then(|s| crate::queue::requests::pod_requests("spec", s).ok()).and_then(|r| r.get("cpu").map(|a| a.0)).unwrap_or(0)
}

/// What a Workload asks for (milli-CPU), from its spec.
fn requested(w: &Workload) -> i64 {
    w.spec.pod_sets.iter().map(|p| i64::from(p.count().max(0)) * cpu_of(p.template.spec.as_ref())).sum()
}

fn key(w: &Workload) -> String {
    format!("{}/{}", w.namespace().unwrap_or_default(), w.name_any())
}

impl Pool {
    fn read(wls: &[Workload], rss: &[RayService], cqs: &[ClusterQueue], pods: &[Pod]) -> Pool {
        let holding: Vec<&Workload> = wls.iter().filter(|w| holds_quota(w)).collect();
        let replaced: HashSet<&String> = holding.iter().filter_map(|w| w.annotations().get(label::WORKLOAD_SLICE_REPLACEMENT_FOR)).collect();
        let mut used: BTreeMap<String, i64> = BTreeMap::new();
        for w in holding.iter().filter(|w| !replaced.contains(&key(w))) {
            if let Some(a) = w.admission() {
                *used.entry(a.cluster_queue.clone()).or_default() += held(w).get("cpu").copied().unwrap_or(0);
            }
        }
        let mut pool = Pool::default();
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
            let chain: Vec<&Workload> = wls.iter().filter(|w| w.labels().get(label::JOB_UID) == Some(&uid)).collect();
            let Some(latest) = latest_holding(&chain) else { continue };
            let Some(a) = latest.admission() else { continue };
            let active = rs.status.as_ref().and_then(|s| s.active_service_status.as_ref()).and_then(|s| s.ray_cluster_name.clone());
            let serving: i64 = pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| active.is_some() && p.labels().get("ray.io/cluster") == active.as_ref())
                .map(|p| cpu_of(p.spec.as_ref()))
                .sum();
            let growth = if active.is_some() { (held(latest).get("cpu").copied().unwrap_or(0) - serving).max(0) } else { 0 };
            pool.upgrades.push(Upgrade { cq: a.cluster_queue.clone(), priority: latest.spec.priority(), growth });
        }
        pool
    }

    /// What preemptor `cq`/`priority` could get without taking any serving cluster: free quota plus
    /// the growth of every upgrade it may preempt.
    fn without_serving(&self, cq: &str, priority: i32) -> (i64, i64) {
        let Some(own) = self.cqs.get(cq) else { return (0, 0) };
        let members: Vec<(&String, &Cq)> = self
            .cqs
            .iter()
            .filter(|(name, q)| match &own.cohort {
                Some(c) => q.cohort.as_ref() == Some(c),
                None => name.as_str() == cq,
            })
            .collect();
        let free = members.iter().map(|(_, q)| q.nominal - q.used).sum::<i64>().max(0);
        let mut growth = 0;
        for (name, q) in &members {
            let lower = |u: &&Upgrade| u.priority < priority;
            let mine = self.upgrades.iter().filter(|u| &u.cq == *name);
            if name.as_str() == cq {
                if own.within == PreemptionPolicy::LowerPriority {
                    growth += mine.filter(lower).map(|u| u.growth).sum::<i64>();
                }
            } else {
                let g: i64 = match own.reclaim {
                    PreemptionPolicy::Any => mine.map(|u| u.growth).sum(),
                    PreemptionPolicy::LowerPriority => mine.filter(lower).map(|u| u.growth).sum(),
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
    let rest = message.split_once("Preempted to accommodate a workload (UID: ")?.1;
    rest.split([',', ')']).next().filter(|s| !s.is_empty())
}

/// The preemptor's ClusterQueue, the last element of "preemptor path: /cohort/cq".
fn preemptor_cq(message: &str) -> Option<&str> {
    let rest = message.split_once("preemptor path: ")?.1;
    rest.split(';').next()?.trim().rsplit('/').next().filter(|s| !s.is_empty())
}

impl Serving {
    /// Judges the preemptions of services' slices not judged yet, on the quota the previous check
    /// saw (this one's when there is none).
    pub(super) fn judge(&mut self, wls: &[Workload], rss: &[RayService], cqs: &[ClusterQueue], pods: &[Pod]) {
        let now = Pool::read(wls, rss, cqs, pods);
        let services: HashSet<String> = rss.iter().filter_map(|r| r.metadata.uid.clone()).collect();
        for w in wls {
            let Some(service) = w.labels().get(label::JOB_UID).filter(|u| services.contains(*u)) else { continue };
            // Kueue writes both `Preempted` and `Evicted`; one of them judges the preemption.
            let preempted = w.status.as_ref().and_then(|s| s.condition("Preempted").or_else(|| s.condition("Evicted")));
            for c in preempted.into_iter().filter(|c| c.status == "True") {
                let Some(uid) = preemptor_uid(&c.message) else { continue };
                let id = format!("{}@{}", w.metadata.uid.as_deref().unwrap_or_default(), c.last_transition_time.0);
                if !self.judged.insert(id) {
                    continue;
                }
                let Some(u) = wls.iter().find(|p| p.metadata.uid.as_deref() == Some(uid)) else {
                    // The preemptor is gone already: nothing to weigh, so no excuse either.
                    continue;
                };
                let replaced = u
                    .annotations()
                    .get(label::WORKLOAD_SLICE_REPLACEMENT_FOR)
                    .and_then(|r| wls.iter().find(|o| &key(o) == r))
                    .map_or(0, |o| held(o).get("cpu").copied().unwrap_or(0));
                let need = (requested(u) - replaced).max(0);
                self.preemptions += 1;
                let cq = u.admission().map(|a| a.cluster_queue.as_str()).or_else(|| preemptor_cq(&c.message)).unwrap_or_default();
                let (free, growth) = self.before.as_ref().unwrap_or(&now).without_serving(cq, u.spec.priority());
                let why = format!(
                    "{} preempted by {} (priority {}, ClusterQueue {cq}) needing {need}m, with {free}m free and {growth}m of upgrades' growth it may preempt",
                    w.name_any(),
                    u.name_any(),
                    u.spec.priority()
                );
                tracing::debug!(legitimate = need > free + growth, "chaos I8: {why}");
                if need > free + growth {
                    self.excused.insert(service.clone(), why);
                } else {
                    self.unneeded.insert(service.clone(), why);
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
            if self.excused.remove(&uid).is_some() {
                self.excuses += 1;
            }
            self.unneeded.remove(&uid);
            return None;
        }
        if !self.served.contains(&uid) || self.excused.contains_key(&uid) {
            return None;
        }
        let why = st
            .and_then(|s| s.conditions.as_deref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .map_or_else(String::new, |c| format!(" ({}: {})", c.reason, c.message));
        let preempted = self.unneeded.get(&uid).map_or_else(String::new, |p| format!("; growth alone could have made room: {p}"));
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
        s.excused.insert("u1".into(), "preempted".into());
        assert_eq!(s.gap(&service(false, 0, true)), None);
        assert_eq!(s.gap(&service(true, 1, false)), None);
        assert_eq!(s.excuses, 1);
        assert!(s.gap(&service(false, 0, false)).is_some());
    }

    fn pool(within: PreemptionPolicy, reclaim: PreemptionPolicy, cohort: bool) -> Pool {
        let cq = |nominal, used| Cq { cohort: cohort.then(|| "pool".to_string()), nominal, used, within, reclaim };
        let mut cqs = BTreeMap::new();
        cqs.insert("cq".to_string(), cq(4000, 4000));
        if cohort {
            // cq-b borrows 1500m of cq's quota.
            cqs.insert("cq-b".to_string(), cq(2000, 3500));
            cqs.get_mut("cq").map(|q| q.used = 2500);
        }
        let up = |cq: &str, priority, growth| Upgrade { cq: cq.into(), priority, growth };
        Pool { cqs, upgrades: vec![up("cq", 0, 1000), up("cq", 1000, 2000), up("cq-b", 0, 1000), up("cq-b", 1000, 1000)] }
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
        assert_eq!(pool(LowerPriority, Any, true).without_serving("cq", 1000), (0, 1000 + 1500));
        assert_eq!(pool(LowerPriority, LowerPriority, true).without_serving("cq", 1000), (0, 1000 + 1000));
        assert_eq!(pool(Never, Never, true).without_serving("cq", 1000), (0, 0));
        // An unknown ClusterQueue can have nothing.
        assert_eq!(p.without_serving("nope", 1000), (0, 0));
    }

    #[test]
    fn kueue_preemption_messages_name_the_preemptor() {
        let m = "Preempted to accommodate a workload (UID: abc-1, JobUID: j) due to reclamation within the cohort; preemptor path: /pool/cq-b; preemptee path: /pool/cq";
        assert_eq!(preemptor_uid(m), Some("abc-1"));
        assert_eq!(preemptor_cq(m), Some("cq-b"));
        assert_eq!(preemptor_uid("Evicted by a user"), None);
    }
}
