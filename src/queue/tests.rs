//! Scenario tests of the admission core, table-driven, with cases ported from the behaviour of
//! Kueue's scheduler, flavor-assigner and preemption tests.

use super::*;

pub(super) fn wl(name: &str, cq: &str, cpu: i64) -> WorkloadModel {
    WorkloadModel::build("ns", name, cq).request(&[("cpu", cpu)])
}

pub(super) fn k(name: &str) -> WorkloadKey {
    WorkloadKey::new("ns", name)
}

#[derive(Default)]
pub(super) struct Scenario {
    pub(super) name: &'static str,
    pub(super) cqs: Vec<ClusterQueueModel>,
    pub(super) cohorts: Vec<CohortModel>,
    pub(super) flavors: Vec<FlavorModel>,
    /// Already admitted: workload, flavor for all its resources, admission time.
    pub(super) admitted: Vec<(WorkloadModel, &'static str, i64)>,
    pub(super) pending: Vec<WorkloadModel>,
    /// name -> flavor of its "cpu"
    pub(super) want_admitted: Vec<(&'static str, &'static str)>,
    pub(super) want_evicted: Vec<(&'static str, EvictionReason)>,
    pub(super) want_pending: Vec<(&'static str, PendingReason)>,
    /// substrings expected in the message of the first `want_pending` entry
    pub(super) want_message: Vec<&'static str>,
}

pub(super) fn admission_in(w: &WorkloadModel, cq: &str, flavor: &str) -> Admission {
    Admission {
        cluster_queue: cq.to_string(),
        pod_set_assignments: w
            .podsets
            .iter()
            .map(|ps| PodSetAssignment {
                name: ps.name.clone(),
                count: ps.count,
                flavors: ps
                    .requests
                    .keys()
                    .map(|r| (r.clone(), flavor.to_string()))
                    .collect(),
                resource_usage: ps.requests.keys().map(|r| (r.clone(), ps.total(r))).collect(),
                topology: None,
            })
            .collect(),
    }
}

pub(super) fn setup(s: &Scenario) -> AdmissionCore {
    let mut core = AdmissionCore::new();
    let mut flavors = s.flavors.clone();
    if flavors.is_empty() {
        flavors.push(FlavorModel::build("default"));
    }
    for f in flavors {
        core.upsert_flavor(f);
    }
    for c in &s.cohorts {
        core.upsert_cohort(c.clone()).unwrap();
    }
    for cq in &s.cqs {
        core.upsert_cluster_queue(cq.clone()).unwrap();
    }
    for (w, f, at) in &s.admitted {
        let a = admission_in(w, &w.cluster_queue, f);
        core.record_admitted(w.clone(), a, *at).unwrap();
    }
    for w in &s.pending {
        core.add_workload(w.clone()).unwrap();
    }
    core
}

pub(super) fn cpu_flavor(a: &Admission) -> String {
    a.pod_set_assignments
        .iter()
        .find_map(|p| p.flavors.get("cpu").cloned())
        .unwrap_or_default()
}

pub(super) fn run(s: Scenario) {
    let mut core = setup(&s);
    let res = core.schedule_cycle(100);
    let mut got: Vec<(String, String)> = res
        .admissions
        .iter()
        .map(|a| (a.key.name.clone(), cpu_flavor(&a.admission)))
        .collect();
    got.sort();
    let mut want: Vec<(String, String)> = s
        .want_admitted
        .iter()
        .map(|(n, f)| (n.to_string(), f.to_string()))
        .collect();
    want.sort();
    assert_eq!(got, want, "{}: admissions", s.name);
    let mut ev: Vec<(String, EvictionReason)> = res
        .evictions
        .iter()
        .map(|e| (e.key.name.clone(), e.reason.clone()))
        .collect();
    ev.sort_by(|a, b| a.0.cmp(&b.0));
    let mut want_ev: Vec<(String, EvictionReason)> = s
        .want_evicted
        .iter()
        .map(|(n, r)| (n.to_string(), r.clone()))
        .collect();
    want_ev.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(ev, want_ev, "{}: evictions", s.name);
    for (n, r) in &s.want_pending {
        let (reason, msg) = core
            .pending_reason(&k(n))
            .unwrap_or_else(|| panic!("{}: {n} not pending", s.name));
        assert_eq!(reason, *r, "{}: reason of {n}: {msg}", s.name);
        assert!(
            res.pending.iter().any(|p| p.key == k(n)),
            "{}: {n} not reported",
            s.name
        );
    }
    if let Some((n, _)) = s.want_pending.first() {
        let (_, msg) = core.pending_reason(&k(n)).unwrap();
        for sub in &s.want_message {
            assert!(msg.contains(sub), "{}: message {msg:?} lacks {sub:?}", s.name);
        }
    }
}

pub(super) fn preempted(r: PreemptedReason) -> EvictionReason {
    EvictionReason::Preempted(r)
}

#[test]
fn flavor_assignment_scenarios() {
    let two_flavors = || {
        vec![
            FlavorModel::build("on-demand").label("instance", "on-demand"),
            FlavorModel::build("spot").label("instance", "spot").taint(
                "spot",
                "true",
                TaintEffect::NoSchedule,
            ),
        ]
    };
    let cq2 = || {
        ClusterQueueModel::build("cq")
            .flavor("on-demand", &[("cpu", 4)])
            .flavor("spot", &[("cpu", 10)])
    };
    let cases = vec![
        Scenario {
            name: "fits in the only flavor",
            cqs: vec![ClusterQueueModel::build("cq").flavor("default", &[("cpu", 10)])],
            pending: vec![wl("a", "cq", 5)],
            want_admitted: vec![("a", "default")],
            ..Default::default()
        },
        Scenario {
            name: "exceeds maximum capacity",
            cqs: vec![ClusterQueueModel::build("cq").flavor("default", &[("cpu", 10)])],
            pending: vec![wl("a", "cq", 11)],
            want_pending: vec![("a", PendingReason::ExceedsMaxQuota)],
            want_message: vec!["cpu in flavor default", "maximum capacity (10m)"],
            ..Default::default()
        },
        Scenario {
            name: "resource not covered",
            cqs: vec![ClusterQueueModel::build("cq").flavor("default", &[("cpu", 10)])],
            pending: vec![
                WorkloadModel::build("ns", "a", "cq").request(&[("cpu", 1), ("nvidia.com/gpu", 1)]),
            ],
            want_pending: vec![("a", PendingReason::NoMatchingFlavor)],
            want_message: vec!["nvidia.com/gpu unavailable"],
            ..Default::default()
        },
        Scenario {
            name: "first flavor full, tainted second untolerated",
            flavors: two_flavors(),
            cqs: vec![cq2()],
            pending: vec![wl("a", "cq", 5)],
            want_pending: vec![("a", PendingReason::ExceedsMaxQuota)],
            want_message: vec!["untolerated taint", "spot"],
            ..Default::default()
        },
        Scenario {
            name: "toleration allows the second flavor",
            flavors: two_flavors(),
            cqs: vec![cq2()],
            pending: vec![
                WorkloadModel::build("ns", "a", "cq")
                    .podset(PodSetModel::build("main", 1, &[("cpu", 5)]).tolerate("spot", "true")),
            ],
            want_admitted: vec![("a", "spot")],
            ..Default::default()
        },
        Scenario {
            name: "node selector picks the matching flavor",
            flavors: vec![
                FlavorModel::build("on-demand").label("instance", "on-demand"),
                FlavorModel::build("spot").label("instance", "spot"),
            ],
            cqs: vec![cq2()],
            pending: vec![
                WorkloadModel::build("ns", "a", "cq")
                    .podset(PodSetModel::build("main", 1, &[("cpu", 1)]).selector("instance", "spot")),
            ],
            want_admitted: vec![("a", "spot")],
            ..Default::default()
        },
        Scenario {
            name: "selector on a key no flavor defines is ignored",
            flavors: vec![
                FlavorModel::build("on-demand").label("instance", "on-demand"),
                FlavorModel::build("spot").label("instance", "spot"),
            ],
            cqs: vec![cq2()],
            pending: vec![
                WorkloadModel::build("ns", "a", "cq")
                    .podset(PodSetModel::build("main", 1, &[("cpu", 1)]).selector("zone", "a")),
            ],
            want_admitted: vec![("a", "on-demand")],
            ..Default::default()
        },
        Scenario {
            name: "required affinity with no matching flavor",
            flavors: vec![
                FlavorModel::build("on-demand").label("instance", "on-demand"),
                FlavorModel::build("spot").label("instance", "spot"),
            ],
            cqs: vec![cq2()],
            pending: vec![WorkloadModel::build("ns", "a", "cq").podset(PodSetModel {
                affinity_terms: vec![vec![Requirement {
                    key: "instance".into(),
                    op: SelectorOp::In,
                    values: vec!["gpu".into()],
                }]],
                ..PodSetModel::build("main", 1, &[("cpu", 1)])
            })],
            want_pending: vec![("a", PendingReason::NoMatchingFlavor)],
            want_message: vec!["node affinity"],
            ..Default::default()
        },
        Scenario {
            name: "podsets share the flavor's quota: second podset moves to the next flavor",
            flavors: vec![FlavorModel::build("on-demand"), FlavorModel::build("spot")],
            cqs: vec![cq2()],
            pending: vec![
                WorkloadModel::build("ns", "a", "cq")
                    .podset(PodSetModel::build("driver", 1, &[("cpu", 3)]))
                    .podset(PodSetModel::build("workers", 2, &[("cpu", 1)])),
            ],
            // driver 3 in on-demand; workers need 2 more: on-demand has 1 left -> spot
            want_admitted: vec![("a", "on-demand")],
            ..Default::default()
        },
    ];
    for s in cases {
        run(s);
    }
}

#[test]
fn podsets_split_across_flavors() {
    let mut core = setup(&Scenario {
        flavors: vec![FlavorModel::build("on-demand"), FlavorModel::build("spot")],
        cqs: vec![
            ClusterQueueModel::build("cq")
                .flavor("on-demand", &[("cpu", 4)])
                .flavor("spot", &[("cpu", 10)]),
        ],
        pending: vec![
            WorkloadModel::build("ns", "a", "cq")
                .podset(PodSetModel::build("driver", 1, &[("cpu", 3)]))
                .podset(PodSetModel::build("workers", 2, &[("cpu", 1)])),
        ],
        ..Default::default()
    });
    let res = core.schedule_cycle(1);
    let a = &res.admissions[0].admission;
    assert_eq!(a.pod_set_assignments[0].flavors["cpu"], "on-demand");
    assert_eq!(a.pod_set_assignments[1].flavors["cpu"], "spot");
    assert_eq!(a.pod_set_assignments[1].resource_usage["cpu"], Amount(2));
    assert_eq!(a.pod_set_assignments[1].count, 2);
}

#[test]
fn borrowing_and_fungibility_scenarios() {
    let cohort_pair = |a_borrow: Option<i64>, b_lend: Option<i64>| {
        vec![
            ClusterQueueModel::build("a")
                .cohort("c")
                .flavor_limits("default", &[("cpu", 10, a_borrow, None)]),
            ClusterQueueModel::build("b")
                .cohort("c")
                .flavor_limits("default", &[("cpu", 10, None, b_lend)]),
        ]
    };
    let fung = |when_can_borrow| FlavorFungibility {
        when_can_borrow,
        ..Default::default()
    };
    let cases = vec![
        Scenario {
            name: "borrows from the cohort",
            cqs: cohort_pair(None, None),
            pending: vec![wl("x", "a", 15)],
            want_admitted: vec![("x", "default")],
            ..Default::default()
        },
        Scenario {
            name: "borrowing limit caps the maximum",
            cqs: cohort_pair(Some(2), None),
            pending: vec![wl("x", "a", 15)],
            want_pending: vec![("x", PendingReason::ExceedsMaxQuota)],
            want_message: vec!["maximum capacity (12m)"],
            ..Default::default()
        },
        Scenario {
            name: "lending limit caps what peers can borrow",
            cqs: cohort_pair(None, Some(4)),
            pending: vec![wl("x", "a", 15)],
            want_pending: vec![("x", PendingReason::ExceedsMaxQuota)],
            want_message: vec!["maximum capacity (14m)"],
            ..Default::default()
        },
        Scenario {
            name: "waiting for quota held by the peer, the message says what is short",
            cqs: cohort_pair(None, None),
            admitted: vec![(wl("held", "b", 8), "default", 1)],
            pending: vec![wl("x", "a", 15)],
            want_pending: vec![("x", PendingReason::WaitingForQuota)],
            want_message: vec!["insufficient unused quota for cpu in flavor default, 3m more needed"],
            ..Default::default()
        },
        Scenario {
            name: "whenCanBorrow MayStopSearch stays on the first flavor",
            flavors: vec![FlavorModel::build("f1"), FlavorModel::build("f2")],
            cqs: vec![
                ClusterQueueModel::build("a")
                    .cohort("c")
                    .flavor("f1", &[("cpu", 2)])
                    .flavor("f2", &[("cpu", 10)]),
                ClusterQueueModel::build("b")
                    .cohort("c")
                    .flavor("f1", &[("cpu", 10)])
                    .flavor("f2", &[("cpu", 0)]),
            ],
            pending: vec![wl("x", "a", 5)],
            want_admitted: vec![("x", "f1")],
            ..Default::default()
        },
        Scenario {
            name: "whenCanBorrow TryNextFlavor prefers a flavor without borrowing",
            flavors: vec![FlavorModel::build("f1"), FlavorModel::build("f2")],
            cqs: vec![
                ClusterQueueModel::build("a")
                    .cohort("c")
                    .flavor("f1", &[("cpu", 2)])
                    .flavor("f2", &[("cpu", 10)])
                    .fungibility(fung(FungibilityPolicy::TryNextFlavor)),
                ClusterQueueModel::build("b")
                    .cohort("c")
                    .flavor("f1", &[("cpu", 10)])
                    .flavor("f2", &[("cpu", 0)]),
            ],
            pending: vec![wl("x", "a", 5)],
            want_admitted: vec![("x", "f2")],
            ..Default::default()
        },
        Scenario {
            name: "non-borrowing entries go before higher-priority borrowing ones",
            cqs: cohort_pair(None, None),
            admitted: vec![(wl("h", "b", 4), "default", 1)],
            // a wants 12 (borrows 2), b wants 6 (within nominal); only 16 free.
            pending: vec![
                wl("borrower", "a", 12).priority(100),
                wl("owner", "b", 6).priority(0),
            ],
            want_admitted: vec![("owner", "default")],
            want_pending: vec![("borrower", PendingReason::WaitingForQuota)],
            ..Default::default()
        },
        Scenario {
            name: "hierarchical cohorts: borrow from the grandparent pool",
            cqs: vec![
                ClusterQueueModel::build("a")
                    .cohort("team")
                    .flavor("default", &[("cpu", 2)]),
            ],
            cohorts: vec![
                CohortModel::build("org").flavor_limits("default", &[("cpu", 10, None, None)]),
                CohortModel::build("team").parent("org"),
            ],
            pending: vec![wl("x", "a", 12)],
            want_admitted: vec![("x", "default")],
            ..Default::default()
        },
    ];
    for s in cases {
        run(s);
    }
}

#[test]
fn queueing_scenarios() {
    let cq = |s| {
        ClusterQueueModel::build("cq")
            .flavor("default", &[("cpu", 10)])
            .strategy(s)
    };
    let cases = vec![
        Scenario {
            name: "higher priority first",
            cqs: vec![cq(QueueingStrategy::BestEffortFifo)],
            pending: vec![wl("low", "cq", 8).at(1), wl("high", "cq", 8).priority(5).at(2)],
            want_admitted: vec![("high", "default")],
            want_pending: vec![("low", PendingReason::WaitingForQuota)],
            ..Default::default()
        },
        Scenario {
            name: "StrictFIFO: a blocked head blocks newer workloads",
            cqs: vec![cq(QueueingStrategy::StrictFifo)],
            admitted: vec![(wl("running", "cq", 5), "default", 1)],
            pending: vec![wl("big", "cq", 8).at(1), wl("small", "cq", 2).at(2)],
            want_pending: vec![
                ("big", PendingReason::WaitingForQuota),
                ("small", PendingReason::Pending),
            ],
            ..Default::default()
        },
        Scenario {
            name: "BestEffortFIFO: a blocked head does not block",
            cqs: vec![cq(QueueingStrategy::BestEffortFifo)],
            admitted: vec![(wl("running", "cq", 5), "default", 1)],
            pending: vec![wl("big", "cq", 8).at(1), wl("small", "cq", 2).at(2)],
            want_admitted: vec![("small", "default")],
            want_pending: vec![("big", PendingReason::WaitingForQuota)],
            ..Default::default()
        },
        Scenario {
            name: "several admissions per ClusterQueue in one cycle (beyond Kueue #14477)",
            cqs: vec![cq(QueueingStrategy::StrictFifo)],
            pending: vec![
                wl("a", "cq", 3).at(1),
                wl("b", "cq", 3).at(2),
                wl("c", "cq", 3).at(3),
                wl("d", "cq", 3).at(4),
            ],
            want_admitted: vec![("a", "default"), ("b", "default"), ("c", "default")],
            want_pending: vec![("d", PendingReason::WaitingForQuota)],
            ..Default::default()
        },
        Scenario {
            name: "namespace selector mismatch is misconfigured",
            cqs: vec![ClusterQueueModel {
                namespace_selector: Some(LabelSelector {
                    match_labels: [("team".to_string(), "a".to_string())].into(),
                    ..Default::default()
                }),
                ..cq(QueueingStrategy::BestEffortFifo)
            }],
            pending: vec![wl("x", "cq", 1)],
            want_pending: vec![("x", PendingReason::Misconfigured)],
            want_message: vec!["workload namespace doesn't match ClusterQueue selector"],
            ..Default::default()
        },
        Scenario {
            name: "missing ClusterQueue",
            cqs: vec![cq(QueueingStrategy::BestEffortFifo)],
            pending: vec![wl("x", "nope", 1)],
            want_pending: vec![("x", PendingReason::Misconfigured)],
            want_message: vec!["ClusterQueue nope doesn't exist"],
            ..Default::default()
        },
        Scenario {
            name: "cycle of cohorts disables the tree",
            cqs: vec![
                ClusterQueueModel::build("cq")
                    .cohort("x")
                    .flavor("default", &[("cpu", 10)]),
            ],
            cohorts: vec![
                CohortModel::build("x").parent("y"),
                CohortModel::build("y").parent("x"),
            ],
            pending: vec![wl("w", "cq", 1)],
            want_pending: vec![("w", PendingReason::Suspended)],
            want_message: vec!["ClusterQueue cq is inactive"],
            ..Default::default()
        },
        Scenario {
            name: "Hold stops admission",
            cqs: vec![cq(QueueingStrategy::BestEffortFifo).stop(StopPolicy::Hold)],
            admitted: vec![(wl("running", "cq", 1), "default", 1)],
            pending: vec![wl("x", "cq", 1)],
            want_pending: vec![("x", PendingReason::Suspended)],
            want_message: vec!["ClusterQueue cq is inactive"],
            ..Default::default()
        },
        Scenario {
            name: "HoldAndDrain evicts the admitted",
            cqs: vec![cq(QueueingStrategy::BestEffortFifo).stop(StopPolicy::HoldAndDrain)],
            admitted: vec![(wl("running", "cq", 1), "default", 1)],
            want_evicted: vec![("running", EvictionReason::ClusterQueueStopped)],
            ..Default::default()
        },
        Scenario {
            name: "missing flavor makes the ClusterQueue inactive",
            flavors: vec![FlavorModel::build("other")],
            cqs: vec![cq(QueueingStrategy::BestEffortFifo)],
            pending: vec![wl("x", "cq", 1)],
            want_pending: vec![("x", PendingReason::Suspended)],
            want_message: vec!["ClusterQueue cq is inactive"],
            ..Default::default()
        },
    ];
    for s in cases {
        run(s);
    }
}

#[test]
fn preemption_scenarios() {
    let cq = |w: WithinClusterQueue| {
        ClusterQueueModel::build("cq")
            .flavor("default", &[("cpu", 10)])
            .within(w)
    };
    let pair = |r: ReclaimWithinCohort| {
        vec![
            ClusterQueueModel::build("a")
                .cohort("c")
                .flavor("default", &[("cpu", 10)])
                .reclaim(r),
            ClusterQueueModel::build("b")
                .cohort("c")
                .flavor("default", &[("cpu", 10)]),
        ]
    };
    let cases = vec![
        Scenario {
            name: "LowerPriority preempts in the ClusterQueue",
            cqs: vec![cq(WithinClusterQueue::LowerPriority)],
            admitted: vec![
                (wl("low", "cq", 6).priority(1), "default", 1),
                (wl("mid", "cq", 4).priority(5), "default", 2),
            ],
            pending: vec![wl("high", "cq", 5).priority(10)],
            want_evicted: vec![("low", preempted(PreemptedReason::InClusterQueue))],
            want_pending: vec![("high", PendingReason::WaitingForPreemptedWorkloads)],
            ..Default::default()
        },
        Scenario {
            name: "Never does not preempt",
            cqs: vec![cq(WithinClusterQueue::Never)],
            admitted: vec![(wl("low", "cq", 6).priority(1), "default", 1)],
            pending: vec![wl("high", "cq", 5).priority(10)],
            want_pending: vec![("high", PendingReason::WaitingForQuota)],
            want_message: vec![
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1m more needed",
            ],
            ..Default::default()
        },
        Scenario {
            name: "LowerPriority does not preempt equal priority",
            cqs: vec![cq(WithinClusterQueue::LowerPriority)],
            admitted: vec![(wl("same", "cq", 6).at(5), "default", 1)],
            pending: vec![wl("x", "cq", 5).at(1)],
            want_pending: vec![("x", PendingReason::WaitingForQuota)],
            ..Default::default()
        },
        Scenario {
            name: "LowerOrNewerEqualPriority preempts a newer equal-priority workload",
            cqs: vec![cq(WithinClusterQueue::LowerOrNewerEqualPriority)],
            admitted: vec![(wl("newer", "cq", 6).at(5), "default", 1)],
            pending: vec![wl("older", "cq", 5).at(1)],
            want_evicted: vec![("newer", preempted(PreemptedReason::InClusterQueue))],
            ..Default::default()
        },
        Scenario {
            name: "smallest victim set: fill back what is not needed",
            cqs: vec![cq(WithinClusterQueue::LowerPriority)],
            // candidate order: most recently admitted first -> small(t3), big(t2), other(t1)
            admitted: vec![
                (wl("other", "cq", 4), "default", 1),
                (wl("big", "cq", 5), "default", 2),
                (wl("small", "cq", 1), "default", 3),
            ],
            pending: vec![wl("x", "cq", 5).priority(1)],
            want_evicted: vec![("big", preempted(PreemptedReason::InClusterQueue))],
            ..Default::default()
        },
        Scenario {
            name: "reclaimWithinCohort Any reclaims from a borrowing peer",
            cqs: pair(ReclaimWithinCohort::Any),
            admitted: vec![
                (wl("lender-a", "a", 4), "default", 1),
                (wl("borrower", "b", 16).priority(100), "default", 2),
            ],
            pending: vec![wl("x", "a", 6)],
            want_evicted: vec![("borrower", preempted(PreemptedReason::InCohortReclamation))],
            ..Default::default()
        },
        Scenario {
            name: "reclaimWithinCohort LowerPriority spares higher priority",
            cqs: pair(ReclaimWithinCohort::LowerPriority),
            admitted: vec![(wl("borrower", "b", 16).priority(100), "default", 2)],
            pending: vec![wl("x", "a", 6)],
            want_pending: vec![("x", PendingReason::WaitingForQuota)],
            want_message: vec![
                "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 2m more needed",
            ],
            ..Default::default()
        },
        Scenario {
            name: "no reclaim from a peer within its nominal quota",
            cqs: pair(ReclaimWithinCohort::Any),
            admitted: vec![
                (wl("a-big", "a", 10), "default", 1),
                (wl("b-own", "b", 10), "default", 2),
            ],
            pending: vec![wl("x", "a", 2)],
            want_pending: vec![("x", PendingReason::WaitingForQuota)],
            ..Default::default()
        },
        Scenario {
            name: "borrowWithinCohort LowerPriority preempts lower priority while borrowing",
            cqs: vec![
                ClusterQueueModel::build("a")
                    .cohort("c")
                    .flavor("default", &[("cpu", 10)])
                    .preemption(PreemptionPolicy {
                        within_cluster_queue: WithinClusterQueue::Never,
                        reclaim_within_cohort: ReclaimWithinCohort::Any,
                        borrow_within_cohort: BorrowWithinCohort {
                            policy: BorrowWithinCohortPolicy::LowerPriority,
                            max_priority_threshold: None,
                        },
                    }),
                ClusterQueueModel::build("b")
                    .cohort("c")
                    .flavor("default", &[("cpu", 10)]),
                ClusterQueueModel::build("idle")
                    .cohort("c")
                    .flavor("default", &[("cpu", 10)]),
            ],
            admitted: vec![
                (wl("a-own", "a", 10), "default", 1),
                (wl("b-borrow", "b", 20).priority(1), "default", 2),
            ],
            pending: vec![wl("x", "a", 4).priority(50)],
            want_evicted: vec![(
                "b-borrow",
                preempted(PreemptedReason::InCohortReclaimWhileBorrowing),
            )],
            ..Default::default()
        },
    ];
    for s in cases {
        run(s);
    }
}

#[test]
fn preemptor_admitted_after_victims_release() {
    let mut core = setup(&Scenario {
        cqs: vec![
            ClusterQueueModel::build("cq")
                .flavor("default", &[("cpu", 10)])
                .within(WithinClusterQueue::LowerPriority),
        ],
        admitted: vec![(wl("low", "cq", 8), "default", 1)],
        pending: vec![wl("high", "cq", 5).priority(10), wl("filler", "cq", 2).at(5)],
        ..Default::default()
    });
    let r1 = core.schedule_cycle(1);
    assert_eq!(r1.evictions.len(), 1);
    // The victim is still running: quota is not free, nothing is admitted, no duplicate eviction.
    let r2 = core.schedule_cycle(2);
    assert!(r2.evictions.is_empty(), "{:?}", r2.evictions);
    assert!(!core.is_admitted(&k("high")));
    core.release(&k("low"));
    let r3 = core.schedule_cycle(3);
    let names: Vec<&str> = r3.admissions.iter().map(|a| a.key.name.as_str()).collect();
    assert_eq!(names, ["high", "filler"]);
}

#[test]
fn inadmissible_workloads_wait_for_an_event() {
    let mut core = setup(&Scenario {
        cqs: vec![ClusterQueueModel::build("cq").flavor("default", &[("cpu", 10)])],
        admitted: vec![(wl("running", "cq", 8), "default", 1)],
        pending: vec![wl("x", "cq", 5)],
        ..Default::default()
    });
    assert_eq!(core.schedule_cycle(1).attempts, 1);
    // Nothing changed: the parked workload is not evaluated again.
    assert_eq!(core.schedule_cycle(2).attempts, 0);
    core.release(&k("running"));
    let r = core.schedule_cycle(3);
    assert_eq!(r.attempts, 1);
    assert_eq!(r.admissions.len(), 1);
    // A quota change requeues as well.
    core.add_workload(wl("y", "cq", 9)).unwrap();
    core.schedule_cycle(4);
    assert_eq!(core.schedule_cycle(5).attempts, 0);
    core.upsert_cluster_queue(ClusterQueueModel::build("cq").flavor("default", &[("cpu", 20)]))
        .unwrap();
    assert_eq!(core.schedule_cycle(6).admissions.len(), 1);
}

#[test]
fn workload_slices() {
    let base = || Scenario {
        flavors: vec![FlavorModel::build("f1"), FlavorModel::build("f2")],
        cqs: vec![
            ClusterQueueModel::build("cq")
                .flavor("f1", &[("cpu", 10)])
                .flavor("f2", &[("cpu", 6)]),
        ],
        ..Default::default()
    };
    // Old slice holds 4 in f2; f1 has room, but the replacement must keep f2: 6 fits only as a delta.
    let mut s = base();
    s.admitted = vec![(wl("old", "cq", 4), "f2", 1)];
    let mut core = setup(&s);
    core.add_workload(wl("new", "cq", 6).replaces(&k("old"))).unwrap();
    let err = core
        .add_workload(wl("other", "cq", 5).replaces(&k("old")))
        .unwrap_err();
    assert!(
        matches!(err, QueueError::ReplacementAlreadyPending { .. }),
        "{err}"
    );
    let err = core
        .add_workload(wl("chained", "cq", 5).replaces(&k("new")))
        .unwrap_err();
    assert!(matches!(err, QueueError::ReplacesPending { .. }), "{err}");
    let r = core.schedule_cycle(2);
    assert_eq!(r.admissions.len(), 1);
    assert_eq!(cpu_flavor(&r.admissions[0].admission), "f2");
    assert_eq!(r.admissions[0].replaced, Some(k("old")));
    assert_eq!(
        r.finished_slices,
        vec![FinishedSlice {
            key: k("old"),
            replaced_by: k("new")
        }]
    );
    assert!(!core.is_admitted(&k("old")));
    assert_eq!(
        core.cq_usage("cq").get(&FlavorResource::new("f2", "cpu")),
        Some(&Amount(6))
    );

    // A delta that does not fit leaves the old slice running.
    let mut s = base();
    s.admitted = vec![(wl("old", "cq", 4), "f2", 1)];
    let mut core = setup(&s);
    core.add_workload(wl("new", "cq", 7).replaces(&k("old"))).unwrap();
    let r = core.schedule_cycle(2);
    assert!(r.admissions.is_empty());
    assert!(core.is_admitted(&k("old")));
    let (reason, msg) = core.pending_reason(&k("new")).unwrap();
    assert_eq!(reason, PendingReason::ExceedsMaxQuota, "{msg}");
    assert!(msg.contains("original workload is assigned: f2"), "{msg}");
    assert!(
        msg.contains("current podset request (7m) > maximum capacity (6m)"),
        "{msg}"
    );
}

/// A slice being evicted is stopped whole: a replacement must not be admitted on top of it, which would
/// finish it as replaced while its job stops (seen by the chaos runs as I6, seed 20).
#[test]
fn a_replacement_waits_while_the_slice_it_replaces_is_evicted() {
    let mut core = setup(&Scenario {
        cqs: vec![
            ClusterQueueModel::build("cq")
                .flavor("default", &[("cpu", 10)])
                .within(WithinClusterQueue::LowerPriority),
        ],
        admitted: vec![(wl("old", "cq", 4), "default", 1)],
        pending: vec![wl("high", "cq", 8).priority(10)],
        ..Default::default()
    });
    assert_eq!(core.schedule_cycle(1).evictions.len(), 1);
    // The preemptor goes away (finished, deleted) while the victim is still stopping.
    core.delete_workload(&k("high"));
    core.add_workload(wl("new", "cq", 5).replaces(&k("old"))).unwrap();
    let r = core.schedule_cycle(2);
    assert!(r.admissions.is_empty(), "{:?}", r.admissions);
    assert!(r.finished_slices.is_empty(), "{:?}", r.finished_slices);
    assert!(core.is_admitted(&k("old")));
}

/// The same wait after a restart: the new scheduler did not decide the eviction, the API shows the
/// slice evicted while it still holds quota, and the admission loop marks it so (issue 20).
#[test]
fn a_replacement_waits_for_a_slice_the_api_shows_evicted() {
    let mut core = setup(&Scenario {
        cqs: vec![ClusterQueueModel::build("cq").flavor("default", &[("cpu", 10)])],
        admitted: vec![(wl("old", "cq", 4), "default", 1)],
        ..Default::default()
    });
    core.mark_evicting(&k("old"));
    core.add_workload(wl("new", "cq", 5).replaces(&k("old"))).unwrap();
    let r = core.schedule_cycle(2);
    assert!(r.admissions.is_empty(), "{:?}", r.admissions);
    assert!(r.finished_slices.is_empty(), "{:?}", r.finished_slices);
    assert!(core.is_admitted(&k("old")));
}

#[test]
fn heterogeneous_slices_are_accounted_exactly() {
    let mut core = setup(&Scenario {
        cqs: vec![ClusterQueueModel::build("cq").flavor("default", &[("cpu", 8)])],
        ..Default::default()
    });
    let old = WorkloadModel::build("ns", "old", "cq")
        .podset(PodSetModel::build("head", 1, &[("cpu", 1)]))
        .podset(PodSetModel::build("workers", 2, &[("cpu", 2)]));
    core.add_workload(old).unwrap();
    assert_eq!(core.schedule_cycle(1).admissions.len(), 1);
    // The upgrade adds a second cluster with a different worker template: its own podset.
    let new = WorkloadModel::build("ns", "new", "cq")
        .podset(PodSetModel::build("head", 2, &[("cpu", 1)]))
        .podset(PodSetModel::build("workers", 2, &[("cpu", 2)]))
        .podset(PodSetModel::build("workers-v2", 1, &[("cpu", 1)]))
        .replaces(&k("old"));
    core.add_workload(new.clone()).unwrap();
    let r = core.schedule_cycle(2);
    assert_eq!(r.admissions.len(), 1, "{:?}", r.pending);
    assert_eq!(
        core.cq_usage("cq").get(&FlavorResource::new("default", "cpu")),
        Some(&Amount(7))
    );
    // One more pod than quota: refused as a whole.
    let bigger = WorkloadModel {
        key: k("newer"),
        podsets: vec![
            PodSetModel::build("head", 2, &[("cpu", 1)]),
            PodSetModel::build("workers", 4, &[("cpu", 2)]),
        ],
        ..new.clone()
    }
    .replaces(&k("new"));
    core.add_workload(bigger).unwrap();
    assert!(core.schedule_cycle(3).admissions.is_empty());
    // Scale-down in place frees quota at once.
    let smaller = WorkloadModel {
        key: k("new"),
        podsets: vec![
            PodSetModel::build("head", 1, &[("cpu", 1)]),
            PodSetModel::build("workers", 1, &[("cpu", 2)]),
        ],
        replacement_for: None,
        ..new
    };
    core.shrink_admitted(smaller).unwrap();
    assert_eq!(
        core.cq_usage("cq").get(&FlavorResource::new("default", "cpu")),
        Some(&Amount(3))
    );
    core.add_workload(wl("other", "cq", 5)).unwrap();
    let r = core.schedule_cycle(4);
    assert_eq!(r.admissions.len(), 1);
    assert_eq!(r.admissions[0].key, k("other"));
    assert_eq!(
        core.cq_usage("cq").get(&FlavorResource::new("default", "cpu")),
        Some(&Amount(8))
    );
    let grow = WorkloadModel::build("ns", "new", "cq").podset(PodSetModel::build("head", 9, &[("cpu", 1)]));
    assert!(matches!(
        core.shrink_admitted(grow),
        Err(QueueError::NotAShrink { .. })
    ));
}

#[test]
fn status_reports_usage_and_borrowing() {
    let mut core = setup(&Scenario {
        cqs: vec![
            ClusterQueueModel::build("a")
                .cohort("c")
                .flavor("default", &[("cpu", 10)]),
            ClusterQueueModel::build("b")
                .cohort("c")
                .flavor("default", &[("cpu", 10)]),
        ],
        pending: vec![wl("x", "a", 13), wl("y", "a", 30)],
        ..Default::default()
    });
    core.schedule_cycle(1);
    let st = core.cluster_queue_status("a").unwrap();
    assert_eq!(
        st.flavors_usage,
        vec![FlavorUsage {
            name: "default".into(),
            resources: vec![ResourceUsage {
                name: "cpu".into(),
                total: Amount(13),
                borrowed: Amount(3)
            }]
        }]
    );
    assert_eq!(
        (
            st.pending_workloads,
            st.admitted_workloads,
            st.reserving_workloads
        ),
        (1, 1, 1)
    );
    let co = core.cohort_status("c").unwrap();
    // Without a lendingLimit all of a ClusterQueue's usage is accounted in its cohort (Kueue).
    assert_eq!(co.usage[0].resources[0].total, Amount(13));
    assert_eq!(co.quota[0].resources[0].total, Amount(20));
    for key in core.admitted_keys() {
        core.release(&key);
    }
    assert_eq!(
        core.cluster_queue_status("a").unwrap().flavors_usage[0].resources[0].total,
        Amount(0)
    );
}

#[test]
fn invalid_input_is_rejected_with_the_field() {
    let mut core = AdmissionCore::new();
    let bad = ClusterQueueModel::build("cq").flavor_limits("default", &[("cpu", 10, Some(1), None)]);
    let err = core.upsert_cluster_queue(bad).unwrap_err();
    assert!(err.to_string().contains("borrowingLimit"), "{err}");
    let neg = ClusterQueueModel::build("cq").flavor("default", &[("cpu", -1)]);
    assert!(
        core.upsert_cluster_queue(neg)
            .unwrap_err()
            .to_string()
            .contains("nominalQuota")
    );
    let w = WorkloadModel::build("ns", "w", "cq").podset(PodSetModel::build("main", -1, &[("cpu", 1)]));
    assert!(
        core.add_workload(w)
            .unwrap_err()
            .to_string()
            .contains("spec.podSets[0].count")
    );
}

#[test]
fn fungibility_when_can_preempt_and_hierarchical_reclaim() {
    let cq = |when_can_preempt| {
        ClusterQueueModel::build("cq")
            .flavor("f1", &[("cpu", 10)])
            .flavor("f2", &[("cpu", 10)])
            .within(WithinClusterQueue::LowerPriority)
            .fungibility(FlavorFungibility {
                when_can_preempt,
                ..Default::default()
            })
    };
    let base = |p| Scenario {
        flavors: vec![FlavorModel::build("f1"), FlavorModel::build("f2")],
        cqs: vec![cq(p)],
        admitted: vec![(wl("low", "cq", 8), "f1", 1)],
        pending: vec![wl("x", "cq", 5).priority(9)],
        ..Default::default()
    };
    run(Scenario {
        name: "whenCanPreempt TryNextFlavor (default) uses the free flavor",
        want_admitted: vec![("x", "f2")],
        ..base(FungibilityPolicy::TryNextFlavor)
    });
    run(Scenario {
        name: "whenCanPreempt MayStopSearch preempts in the first flavor",
        want_evicted: vec![("low", preempted(PreemptedReason::InClusterQueue))],
        want_pending: vec![("x", PendingReason::WaitingForPreemptedWorkloads)],
        ..base(FungibilityPolicy::MayStopSearch)
    });
    run(Scenario {
        name: "reclaim across cohort levels from a borrowing ClusterQueue in another subtree",
        cqs: vec![
            ClusterQueueModel::build("a")
                .cohort("left")
                .flavor("default", &[("cpu", 5)])
                .reclaim(ReclaimWithinCohort::Any),
            ClusterQueueModel::build("b")
                .cohort("right")
                .flavor("default", &[("cpu", 5)]),
        ],
        cohorts: vec![
            CohortModel::build("root"),
            CohortModel::build("left").parent("root"),
            CohortModel::build("right").parent("root"),
        ],
        admitted: vec![(wl("b-borrow", "b", 9), "default", 1)],
        pending: vec![wl("x", "a", 3)],
        want_evicted: vec![("b-borrow", preempted(PreemptedReason::InCohortReclamation))],
        ..Default::default()
    });
}

#[test]
fn equivalent_workloads_share_an_outcome_within_a_cycle() {
    let mut core = setup(&Scenario {
        cqs: vec![ClusterQueueModel::build("cq").flavor("default", &[("cpu", 10)])],
        admitted: vec![(wl("running", "cq", 8), "default", 1)],
        pending: vec![
            wl("a", "cq", 5).at(1),
            wl("b", "cq", 5).at(2),
            wl("fits", "cq", 2).at(3),
        ],
        ..Default::default()
    });
    let r = core.schedule_cycle(1);
    assert_eq!(r.admissions.len(), 1);
    let (ra, ma) = core.pending_reason(&k("a")).unwrap();
    let (rb, mb) = core.pending_reason(&k("b")).unwrap();
    assert_eq!((ra, ma), (rb, mb));
    assert_eq!(ra, PendingReason::WaitingForQuota);
    // The cache lives for one cycle: a later equal shape is evaluated afresh and names the
    // shortfall after "fits" was admitted (all 5), not the 3 of the cached message.
    core.add_workload(wl("c", "cq", 5).at(4)).unwrap();
    core.schedule_cycle(2);
    let (_, mc) = core.pending_reason(&k("c")).unwrap();
    assert!(mc.contains(", 5m more needed"), "{mc}");
}

/// Kueue's flavorassigner (`assignFlavors`: "if a.cq.RGByResource(corev1.ResourcePods) != nil" sets
/// each podset's `pods` request to its count): a ClusterQueue covering `pods` never admits more
/// pods than its quota.
#[test]
fn pods_quota_is_charged_per_podset_count() {
    let cq = ClusterQueueModel::build("cq").flavor("default", &[("cpu", 100), ("pods", 5)]);
    let four_pods = |n: &str, ts| {
        WorkloadModel::build("ns", n, "cq")
            .podset(PodSetModel::build("main", 4, &[("cpu", 1)]))
            .at(ts)
    };
    let mut core = setup(&Scenario {
        cqs: vec![cq.clone()],
        pending: vec![four_pods("a", 1), four_pods("b", 2)],
        ..Default::default()
    });
    let res = core.schedule_cycle(1);
    let names: Vec<&str> = res.admissions.iter().map(|a| a.key.name.as_str()).collect();
    assert_eq!(names, vec!["a"], "8 pods must not fit a quota of 5");
    let psa = &res.admissions[0].admission.pod_set_assignments[0];
    assert_eq!(psa.resource_usage["pods"], Amount(4));
    assert_eq!(psa.flavors["pods"], "default");
    let (reason, msg) = core.pending_reason(&k("b")).unwrap();
    assert_eq!(reason, PendingReason::WaitingForQuota, "{msg}");
    assert!(msg.contains("pods"), "{msg}");

    // A ClusterQueue that does not cover `pods` charges nothing for it.
    let mut core = setup(&Scenario {
        cqs: vec![ClusterQueueModel::build("cq").flavor("default", &[("cpu", 100)])],
        pending: vec![four_pods("a", 1), four_pods("b", 2)],
        ..Default::default()
    });
    assert_eq!(core.schedule_cycle(1).admissions.len(), 2);
}

/// Kueue `preemption_test.go` ("reclaim quota from borrower" family with `withinClusterQueue:
/// LowerPriority`) and `preemption.go` `queueUnderNominalInResourcesNeedingPreemption`: a
/// ClusterQueue whose current usage is under its nominal quota searches its own lower-priority
/// workloads and the cohort's borrowers together, evicting both when the fit needs both.
#[test]
fn reclaim_searches_the_combined_candidate_set() {
    run(Scenario {
        name: "InClusterQueue + InCohortReclamation",
        cqs: vec![
            ClusterQueueModel::build("a")
                .cohort("co")
                .flavor("default", &[("cpu", 10)])
                .within(WithinClusterQueue::LowerPriority)
                .reclaim(ReclaimWithinCohort::Any),
            ClusterQueueModel::build("b")
                .cohort("co")
                .flavor("default", &[("cpu", 0)]),
        ],
        admitted: vec![
            (wl("a-low", "a", 4), "default", 1),
            (wl("b-borrow", "b", 6), "default", 1),
        ],
        pending: vec![wl("x", "a", 8).priority(9)],
        want_evicted: vec![
            ("a-low", preempted(PreemptedReason::InClusterQueue)),
            ("b-borrow", preempted(PreemptedReason::InCohortReclamation)),
        ],
        want_pending: vec![("x", PendingReason::WaitingForPreemptedWorkloads)],
        ..Default::default()
    });
}

/// Kueue `flavorassigner_test.go` (preemption oracle returning no candidates) and the scheduler
/// integration test for `whenCanPreempt: MayStopSearch`: a flavor where preemption would find
/// nothing does not stop the search, so the workload lands in the next flavor.
#[test]
fn may_stop_search_without_candidates_moves_to_the_next_flavor() {
    let cq = ClusterQueueModel::build("cq")
        .flavor("f1", &[("cpu", 10)])
        .flavor("f2", &[("cpu", 10)])
        .within(WithinClusterQueue::LowerPriority)
        .fungibility(FlavorFungibility {
            when_can_preempt: FungibilityPolicy::MayStopSearch,
            ..Default::default()
        });
    run(Scenario {
        name: "only a higher-priority workload in f1: nothing to preempt, use f2",
        flavors: vec![FlavorModel::build("f1"), FlavorModel::build("f2")],
        cqs: vec![cq],
        admitted: vec![(wl("high", "cq", 8).priority(20), "f1", 1)],
        pending: vec![wl("x", "cq", 5).priority(9)],
        want_admitted: vec![("x", "f2")],
        ..Default::default()
    });
}

/// Kueue `test/integration/singlecluster/scheduler/preemption_test.go`, "In a multi-level cohort":
/// "workloads in guaranteed cq should have preferential access to the resources". The guaranteed
/// quota sits on the `guaranteed` cohort (the ClusterQueue has 0); a higher-priority best-effort
/// workload borrowing it from the root is preempted, and the guaranteed workload is admitted
/// once the victim is gone while the best-effort one stays pending.
#[test]
fn guaranteed_cohort_quota_is_reclaimed_from_best_effort() {
    let policy = |cq: ClusterQueueModel| {
        cq.within(WithinClusterQueue::LowerPriority)
            .reclaim(ReclaimWithinCohort::Any)
    };
    let mut core = setup(&Scenario {
        cohorts: vec![
            CohortModel::build("root"),
            CohortModel::build("guaranteed")
                .parent("root")
                .flavor_limits("default", &[("cpu", 3, None, None)]),
        ],
        cqs: vec![
            policy(
                ClusterQueueModel::build("best-effort")
                    .cohort("root")
                    .flavor("default", &[("cpu", 0)]),
            ),
            policy(
                ClusterQueueModel::build("guaranteed")
                    .cohort("guaranteed")
                    .flavor("default", &[("cpu", 0)]),
            ),
        ],
        pending: vec![wl("best-effort-wl", "best-effort", 3).priority(100)],
        ..Default::default()
    });
    let r = core.schedule_cycle(1);
    assert_eq!(r.admissions.len(), 1, "best effort borrows the guaranteed quota");
    core.add_workload(wl("guaranteed-wl", "guaranteed", 3).priority(10).at(2))
        .unwrap();
    let r = core.schedule_cycle(2);
    let ev: Vec<(&str, &EvictionReason)> = r
        .evictions
        .iter()
        .map(|e| (e.key.name.as_str(), &e.reason))
        .collect();
    assert_eq!(
        ev,
        [("best-effort-wl", &preempted(PreemptedReason::InCohortReclamation))]
    );
    core.release(&k("best-effort-wl"));
    core.add_workload(wl("best-effort-wl", "best-effort", 3).priority(100))
        .unwrap();
    let r = core.schedule_cycle(3);
    let names: Vec<&str> = r.admissions.iter().map(|a| a.key.name.as_str()).collect();
    assert_eq!(names, ["guaranteed-wl"]);
    assert!(!core.is_admitted(&k("best-effort-wl")));
}

/// Kueue's scheduler skips a preemptor whose targets another preemptor of the same cycle already
/// claimed, and counts it per ClusterQueue (pkg/scheduler/scheduler.go `skippedPreemptions`, reported
/// as `admission_cycle_preemption_skips`): two ClusterQueues reclaiming from one borrower. That is
/// with the `RecomputeAssignmentUponPreemptionTargetsOverlap` gate off, as Kueue's "multiple
/// preemptions skip overlapping preemption targets" sets it; with it on (Kueue v0.20's default) the
/// second fits once the shared victim is gone, so it waits for it instead (`deferred_fit`).
#[test]
fn a_preemptor_whose_victims_are_claimed_is_skipped_and_counted() {
    let reclaim = |cq: ClusterQueueModel| cq.reclaim(ReclaimWithinCohort::Any);
    for recompute in [false, true] {
        let mut core = setup(&Scenario {
            cqs: vec![
                reclaim(
                    ClusterQueueModel::build("a")
                        .cohort("c")
                        .flavor("default", &[("cpu", 2)]),
                ),
                reclaim(
                    ClusterQueueModel::build("b")
                        .cohort("c")
                        .flavor("default", &[("cpu", 2)]),
                ),
                ClusterQueueModel::build("borrower")
                    .cohort("c")
                    .flavor("default", &[("cpu", 0)]),
            ],
            admitted: vec![(wl("v", "borrower", 4), "default", 0)],
            pending: vec![wl("wa", "a", 2).at(1), wl("wb", "b", 2).at(2)],
            ..Default::default()
        });
        core.set_recompute_on_overlap(recompute);
        let r = core.schedule_cycle(3);
        let evicted: Vec<&str> = r.evictions.iter().map(|e| e.key.name.as_str()).collect();
        assert_eq!(evicted, ["v"], "one preemption of the shared victim");
        let skips = r.preemption_skips.values().sum::<usize>();
        let recomputed: Vec<(String, &str, usize)> = r
            .preemption_target_recomputations
            .iter()
            .map(|((cq, res), n)| (cq.clone(), res.as_str(), *n))
            .collect();
        if recompute {
            assert_eq!(skips, 0, "{:?}", r.preemption_skips);
            assert_eq!(recomputed, [("b".to_string(), "deferred_fit", 1)]);
            assert_eq!(
                core.pending_reason(&k("wb")).map(|(r, _)| r),
                Some(PendingReason::WaitingForPreemptedWorkloads)
            );
        } else {
            assert_eq!(skips, 1, "{:?}", r.preemption_skips);
            assert!(recomputed.is_empty(), "{recomputed:?}");
            assert!(
                r.preemption_skips.keys().all(|cq| cq == "a" || cq == "b"),
                "{:?}",
                r.preemption_skips
            );
        }
    }
}

/// Kueue's `fair_sharing_test.go` "ClusterQueue head is ineligible for admission due to
/// DominantResourceShare" (kueue#7101), step by step: cq-p2's 5-CPU preemptor evicts two of
/// cq-p1's four 2-CPU workloads; while they let go one at a time, the one released first must not
/// take back the quota the preemptor waits for. The preemptor stays its ClusterQueue's head
/// (Kueue's sticky workload) across updates of its Workload, so the inadmissible higher-priority
/// head behind it does not take its place in the tournament.
#[test]
fn fair_sharing_preemptor_keeps_quota_while_victims_let_go() {
    let fs = ClusterQueueModel::build;
    let q = |n: &str| {
        fs(n)
            .cohort("cohort-a")
            .flavor("flavor1", &[("cpu", 0)])
            .reclaim(ReclaimWithinCohort::Any)
            .within(WithinClusterQueue::LowerPriority)
    };
    let mut core = setup(&Scenario {
        flavors: vec![FlavorModel::build("flavor1")],
        cohorts: vec![
            CohortModel::build("cohort-a")
                .parent("root-cohort")
                .flavor_limits("flavor1", &[("cpu", 9, None, None)]),
        ],
        cqs: vec![q("cq-p1"), q("cq-p2")],
        admitted: (0..4)
            .map(|i| (wl(&format!("p1-{i}"), "cq-p1", 2), "flavor1", i))
            .collect(),
        pending: vec![
            wl("p2-6", "cq-p2", 6).priority(999).at(10),
            wl("p2-5", "cq-p2", 5).at(11),
        ],
        ..Default::default()
    });
    core.set_fair_sharing(Some(FairSharingConfig::default()));
    let r = core.schedule_cycle(20);
    let mut victims: Vec<String> = r.evictions.iter().map(|e| e.key.name.clone()).collect();
    victims.sort();
    assert_eq!(victims.len(), 2, "{victims:?}");
    assert_eq!(
        core.pending_reason(&k("p2-5")).map(|r| r.0),
        Some(PendingReason::WaitingForPreemptedWorkloads)
    );
    // Its status write is a new version of the pending Workload: queued again, as the sync does.
    core.add_workload(wl("p2-5", "cq-p2", 5).at(11)).unwrap();
    let requeued = |core: &mut AdmissionCore, n: &str| {
        core.release(&k(n));
        core.add_workload(wl(n, "cq-p1", 2).at(victims.iter().position(|v| v == n).unwrap() as i64))
            .unwrap();
    };
    requeued(&mut core, &victims[0]);
    let r = core.schedule_cycle(30);
    assert!(
        r.admissions.is_empty(),
        "{:?}",
        r.admissions.iter().map(|a| &a.key.name).collect::<Vec<_>>()
    );
    assert!(r.evictions.is_empty());
    requeued(&mut core, &victims[1]);
    let r = core.schedule_cycle(40);
    let names: Vec<&str> = r.admissions.iter().map(|a| a.key.name.as_str()).collect();
    assert_eq!(names, ["p2-5"]);
}

/// Kueue's `fair_sharing_test.go` "Should prevent other workloads from stealing quota when
/// preemptor is waiting for multiple evictions", in the core: cq-1 has the CPU, cq-2 the memory;
/// cq-1's preemptor needs both of cq-2's CPU borrowers gone. The first to let go may take its CPU
/// back (its ClusterQueue's share is lower) unless `PrioritizePreemptorWorkloads` puts the
/// preemptor first, as Kueue's spec turns it on.
#[test]
fn prioritize_preemptor_workloads_keeps_released_victims_out() {
    for gate in [false, true] {
        let q = |n: &str, cpu, mem| {
            ClusterQueueModel::build(n)
                .cohort("thrash-cohort")
                .flavor("default", &[("cpu", cpu), ("memory", mem)])
                .reclaim(ReclaimWithinCohort::Any)
        };
        let borrower = |n: &str| {
            WorkloadModel::build("ns", n, "cq-2")
                .priority(100)
                .request(&[("cpu", 1), ("memory", 0)])
        };
        let preemptor = || {
            WorkloadModel::build("ns", "preemptor", "cq-1")
                .at(10)
                .request(&[("cpu", 10), ("memory", 10)])
        };
        let mut core = setup(&Scenario {
            cqs: vec![q("cq-1", 10, 0), q("cq-2", 0, 10)],
            admitted: vec![(borrower("wl-a"), "default", 1), (borrower("wl-b"), "default", 2)],
            pending: vec![preemptor()],
            ..Default::default()
        });
        core.set_fair_sharing(Some(FairSharingConfig::default()));
        core.set_prioritize_preemptors(gate);
        assert_eq!(core.schedule_cycle(20).evictions.len(), 2, "gate {gate}");
        core.add_workload(preemptor()).unwrap();
        core.release(&k("wl-a"));
        core.add_workload(borrower("wl-a")).unwrap();
        let r = core.schedule_cycle(30);
        let names: Vec<&str> = r.admissions.iter().map(|a| a.key.name.as_str()).collect();
        if gate {
            assert!(names.is_empty(), "{names:?}");
            core.release(&k("wl-b"));
            core.add_workload(borrower("wl-b")).unwrap();
            let r = core.schedule_cycle(40);
            let names: Vec<&str> = r.admissions.iter().map(|a| a.key.name.as_str()).collect();
            assert_eq!(names, ["preemptor"]);
        } else {
            // Kueue without the gate: the released borrower wins the tournament.
            assert_eq!(names, ["wl-a"]);
        }
    }
}
