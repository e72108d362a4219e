//! The fixture and runner for the ported `TestSchedule` cases of Kueue's
//! `pkg/scheduler/scheduler_test.go`: Kueue's shared ResourceFlavors and ClusterQueues, its
//! namespaces' labels, and one scheduling cycle checked for what Kueue checks (admissions of the
//! cycle, preempted workloads and their messages, the QuotaReserved reason and message of the
//! workloads left pending).
//!
//! Amounts: cpu in milli-CPU (Kueue's accounting unit, so messages print `5`, not `5000`), other
//! resources in units. Kueue gives `sales` and a few test ClusterQueues a borrowingLimit without a
//! cohort (its unit test skips the webhook); that limit has no effect there, and our validation
//! rejects it, so it is left out.

use std::collections::BTreeMap;

use super::*;

pub(super) const GPU: &str = "example.com/gpu";

/// `n` CPUs in milli-CPU.
pub(super) const fn c(n: i64) -> i64 {
    n * 1000
}

/// A ClusterQueue whose namespaceSelector is `dep In [dep]`, as Kueue's `sales`, `eng-*`, `lend-*`.
pub(super) fn dep(mut cq: ClusterQueueModel, dep: &str) -> ClusterQueueModel {
    cq.namespace_selector = Some(LabelSelector {
        match_labels: BTreeMap::new(),
        match_expressions: vec![Requirement {
            key: "dep".into(),
            op: SelectorOp::In,
            values: vec![dep.into()],
        }],
    });
    cq
}

pub(super) fn policy(
    within: WithinClusterQueue,
    reclaim: ReclaimWithinCohort,
    borrow: BorrowWithinCohortPolicy,
) -> PreemptionPolicy {
    PreemptionPolicy {
        within_cluster_queue: within,
        reclaim_within_cohort: reclaim,
        borrow_within_cohort: BorrowWithinCohort {
            policy: borrow,
            max_priority_threshold: None,
        },
    }
}

pub(super) fn fungibility(
    borrow: FungibilityPolicy,
    preempt: FungibilityPolicy,
    preference: FungibilityPreference,
) -> FlavorFungibility {
    FlavorFungibility {
        when_can_borrow: borrow,
        when_can_preempt: preempt,
        preference,
    }
}

/// Kueue's `resourceFlavors` of `TestSchedule`.
pub(super) fn flavors() -> Vec<FlavorModel> {
    let mut v: Vec<FlavorModel> = ["default", "on-demand", "spot", "model-a"]
        .into_iter()
        .map(FlavorModel::build)
        .collect();
    v.push(FlavorModel::build("spot-tainted").taint("key", "val", TaintEffect::NoSchedule));
    v.push(FlavorModel::build("spot-tainted-2").taint("key", "val2", TaintEffect::NoSchedule));
    v
}

/// Kueue's `clusterQueues` of `TestSchedule`.
pub(super) fn cluster_queues() -> Vec<ClusterQueueModel> {
    use QueueingStrategy::StrictFifo;
    vec![
        dep(
            ClusterQueueModel::build("sales")
                .strategy(StrictFifo)
                .flavor("default", &[("cpu", c(50))]),
            "sales",
        ),
        dep(
            ClusterQueueModel::build("eng-alpha")
                .cohort("eng")
                .strategy(StrictFifo)
                .flavor_limits("on-demand", &[("cpu", c(50), Some(c(50)), None)])
                .flavor_limits("spot", &[("cpu", c(100), Some(0), None)]),
            "eng",
        ),
        dep(
            ClusterQueueModel::build("eng-beta")
                .cohort("eng")
                .strategy(StrictFifo)
                .within(WithinClusterQueue::LowerPriority)
                .reclaim(ReclaimWithinCohort::Any)
                .flavor_limits("on-demand", &[("cpu", c(50), Some(c(10)), None)])
                .flavor_limits("spot", &[("cpu", 0, Some(c(100)), None)])
                .flavor_limits("model-a", &[(GPU, 20, Some(0), None)]),
            "eng",
        ),
        ClusterQueueModel::build("flavor-nonexistent-cq")
            .strategy(StrictFifo)
            .flavor("nonexistent-flavor", &[("cpu", c(50))]),
        dep(
            ClusterQueueModel::build("lend-a")
                .cohort("lend")
                .flavor_limits("default", &[("cpu", c(3), None, Some(c(2)))]),
            "lend",
        ),
        dep(
            ClusterQueueModel::build("lend-b")
                .cohort("lend")
                .flavor_limits("default", &[("cpu", c(2), None, Some(c(2)))]),
            "lend",
        ),
    ]
}

/// The labels of Kueue's test namespaces.
fn namespace_labels(ns: &str) -> BTreeMap<String, String> {
    let dep = match ns {
        "eng-alpha" | "eng-beta" | "eng-gamma" => "eng",
        "sales" => "sales",
        "lend" => "lend",
        _ => return BTreeMap::new(),
    };
    BTreeMap::from([("dep".to_string(), dep.to_string())])
}

/// A workload `ns/name` queued to `cq` (Kueue's LocalQueue resolved), no podsets yet.
pub(super) fn wl(key: &str, cq: &str) -> WorkloadModel {
    let (ns, name) = key.split_once('/').unwrap_or(("default", key));
    WorkloadModel {
        namespace_labels: namespace_labels(ns),
        ..WorkloadModel::build(ns, name, cq)
    }
}

/// Kueue's `UID(..)` and `JobUID(..)`, named in the preemption messages.
pub(super) fn uids(mut w: WorkloadModel, uid: &str, job: &str) -> WorkloadModel {
    w.uid = uid.into();
    w.job_uid = Some(job.into());
    w
}

/// An already admitted workload and the flavor of each of its podsets (all its resources).
pub(super) struct Admitted(pub WorkloadModel, pub Vec<&'static str>);

pub(super) fn admitted(w: WorkloadModel, flavors: &[&'static str]) -> Admitted {
    Admitted(w, flavors.to_vec())
}

/// A workload with one podset `ps` of `count` pods.
pub(super) fn one(key: &str, cq: &str, ps: &str, count: i64, req: &[(&str, i64)]) -> WorkloadModel {
    wl(key, cq).podset(PodSetModel::build(ps, count, req))
}

/// A one-podset (`main`, one pod) workload.
pub(super) fn main(key: &str, cq: &str, req: &[(&str, i64)]) -> WorkloadModel {
    wl(key, cq).request(req)
}

/// `ClusterQueue` in a cohort with one resource group of flavors with (nominal, borrowingLimit).
pub(super) fn cq_in(name: &str, cohort: &str, fl: &[(&str, &str, i64, Option<i64>)]) -> ClusterQueueModel {
    fl.iter().fold(
        ClusterQueueModel::build(name).cohort(cohort),
        |cq, (f, r, n, b)| cq.flavor_limits(f, &[(*r, *n, *b, None)]),
    )
}

pub(super) fn preemptor(key: &str, cq: &str, req: &[(&str, i64)]) -> WorkloadModel {
    uids(main(key, cq, req), "wl-preemptor", "job-preemptor")
}

/// Kueue's message for a victim of `uid`/`job` preempted from `victim_path` for `preemptor_path`.
pub(super) fn msg(why: &str, uid: &str, preemptor_path: &str, victim_path: &str) -> String {
    format!(
        "Preempted to accommodate a workload (UID: {uid}, JobUID: job-{}) due to {why}; preemptor path: {preemptor_path}; preemptee path: {victim_path}",
        uid.trim_start_matches("wl-")
    )
}

pub(super) const PRIO: &str = "prioritization in the ClusterQueue";
pub(super) const RECLAIM: &str = "reclamation within the cohort";

/// A ClusterQueue in cohort `other` with one flavor group over `res`: (flavor, nominal).
pub(super) fn other(name: &str, res: &str, fl: &[(&str, i64)], p: PreemptionPolicy) -> ClusterQueueModel {
    fl.iter().fold(
        ClusterQueueModel::build(name).cohort("other").preemption(p),
        |cq, (f, n)| cq.flavor(f, &[(res, *n)]),
    )
}

pub(super) fn within_only() -> PreemptionPolicy {
    policy(
        WithinClusterQueue::LowerPriority,
        ReclaimWithinCohort::Never,
        BorrowWithinCohortPolicy::Never,
    )
}

#[derive(Default)]
pub(super) struct Case {
    pub name: &'static str,
    pub cohorts: Vec<CohortModel>,
    /// Kueue's `additionalClusterQueues`.
    pub cqs: Vec<ClusterQueueModel>,
    pub admitted: Vec<Admitted>,
    pub pending: Vec<WorkloadModel>,
    /// Admitted in this cycle: key -> `podset*count res=flavor,...; ...`.
    pub want_admitted: Vec<(&'static str, &'static str)>,
    /// Preempted in this cycle: key, reason, and the message.
    pub want_evicted: Vec<(&'static str, PreemptedReason, String)>,
    /// Left pending: key, QuotaReserved reason, message ("" = not checked).
    pub want_pending: Vec<(&'static str, PendingReason, &'static str)>,
    /// Kueue's `enableFairSharing` (default strategies).
    pub fair: bool,
    /// Kueue's `featureGates`: `RecomputeAssignmentUponPreemptionTargetsOverlap: false`.
    pub no_recompute_on_overlap: bool,
}

fn key_of(s: &str) -> WorkloadKey {
    let (ns, name) = s.split_once('/').unwrap_or(("default", s));
    WorkloadKey::new(ns, name)
}

/// `one*10 cpu=on-demand,example.com/gpu=model-a; two*40 cpu=spot`
pub(super) fn render(a: &Admission) -> String {
    a.pod_set_assignments
        .iter()
        .map(|p| {
            let fl: Vec<String> = p.flavors.iter().map(|(r, f)| format!("{r}={f}")).collect();
            format!("{}*{} {}", p.name, p.count, fl.join(","))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub(super) fn admission_of(w: &WorkloadModel, flavors: &[&str]) -> Admission {
    Admission {
        cluster_queue: w.cluster_queue.clone(),
        pod_set_assignments: w
            .podsets
            .iter()
            .zip(flavors)
            .map(|(ps, f)| PodSetAssignment {
                name: ps.name.clone(),
                count: ps.count,
                flavors: ps.requests.keys().map(|r| (r.clone(), f.to_string())).collect(),
                resource_usage: ps.requests.keys().map(|r| (r.clone(), ps.total(r))).collect(),
                topology: None,
            })
            .collect(),
    }
}

pub(super) fn setup(c: &Case) -> AdmissionCore {
    let mut core = AdmissionCore::new();
    if c.fair {
        core.set_fair_sharing(Some(FairSharingConfig::default()));
    }
    core.set_recompute_on_overlap(!c.no_recompute_on_overlap);
    for f in flavors() {
        core.upsert_flavor(f);
    }
    for co in &c.cohorts {
        core.upsert_cohort(co.clone()).unwrap();
    }
    for cq in cluster_queues().into_iter().chain(c.cqs.iter().cloned()) {
        let name = cq.name.clone();
        core.upsert_cluster_queue(cq)
            .unwrap_or_else(|e| panic!("{}: ClusterQueue {name}: {e}", c.name));
    }
    for Admitted(w, fl) in &c.admitted {
        assert_eq!(w.podsets.len(), fl.len(), "{}: flavors of {}", c.name, w.key);
        core.record_admitted(w.clone(), admission_of(w, fl), 0).unwrap();
    }
    for w in &c.pending {
        core.add_workload(w.clone()).unwrap();
    }
    core
}

thread_local! {
    static FAILED: std::cell::RefCell<Vec<&'static str>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// One cycle, checked against the case. A failing case is reported and the next one still runs;
/// [`all_passed`] ends each test.
pub(super) fn run(c: Case) {
    let name = c.name;
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(c))).is_err() {
        FAILED.with(|f| f.borrow_mut().push(name));
    }
}

/// Fails the test if any case run on this thread failed, naming them.
pub(super) fn all_passed() {
    let failed = FAILED.with(|f| std::mem::take(&mut *f.borrow_mut()));
    assert!(failed.is_empty(), "failed Kueue cases: {failed:#?}");
}

fn check(c: Case) {
    let mut core = setup(&c);
    let res = core.schedule_cycle(1);
    let mut got: Vec<(WorkloadKey, String)> = res
        .admissions
        .iter()
        .map(|a| (a.key.clone(), render(&a.admission)))
        .collect();
    got.sort();
    let mut want: Vec<(WorkloadKey, String)> = c
        .want_admitted
        .iter()
        .map(|(k, r)| (key_of(k), r.to_string()))
        .collect();
    want.sort();
    assert_eq!(got, want, "{}: admissions", c.name);

    let mut ev: Vec<(WorkloadKey, EvictionReason)> = res
        .evictions
        .iter()
        .map(|e| (e.key.clone(), e.reason.clone()))
        .collect();
    ev.sort_by(|a, b| a.0.cmp(&b.0));
    let mut want_ev: Vec<(WorkloadKey, EvictionReason)> = c
        .want_evicted
        .iter()
        .map(|(k, r, _)| (key_of(k), EvictionReason::Preempted(*r)))
        .collect();
    want_ev.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(ev, want_ev, "{}: preempted", c.name);
    for (k, _, msg) in &c.want_evicted {
        let e = res.evictions.iter().find(|e| e.key == key_of(k)).unwrap();
        assert_eq!(e.message, *msg, "{}: preemption message of {k}", c.name);
    }

    for (k, reason, msg) in &c.want_pending {
        let (got_reason, got_msg) = core
            .pending_reason(&key_of(k))
            .unwrap_or_else(|| panic!("{}: {k} is not pending", c.name));
        assert_eq!(got_reason, *reason, "{}: reason of {k}: {got_msg}", c.name);
        if !msg.is_empty() {
            assert_eq!(got_msg, *msg, "{}: message of {k}", c.name);
        }
    }
}
