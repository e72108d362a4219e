//! Kueue's `pkg/cache/scheduler/fair_sharing_test.go`: `TestDominantResourceShare` (the rounded
//! weighted share, dominant resource and borrowing of every ClusterQueue and Cohort),
//! `TestIsBorrowingOn` and `TestPreciseWeightedShareSerialized`. Amounts: cpu in milli-CPU, gpu in
//! units, as Kueue accounts them.

use std::collections::BTreeMap;

use super::*;
use crate::queue::model::{ClusterQueueModel, CohortModel};

const GPU: &str = "example.com/gpu";

fn fr(f: &str, r: &str) -> FlavorResource {
    FlavorResource::new(f, r)
}

fn amounts(v: &[(&str, &str, i64)]) -> FrAmounts {
    v.iter().map(|(f, r, a)| (fr(f, r), Amount(*a))).collect()
}

/// `cq` in `cohort` with weight `w` and (flavor, resource, nominal, lendingLimit) quotas.
fn cq(name: &str, cohort: Option<&str>, w: f64, q: &[(&str, &str, i64, Option<i64>)]) -> ClusterQueueModel {
    let mut m = ClusterQueueModel::build(name).weight(w);
    if let Some(c) = cohort {
        m = m.cohort(c);
    }
    type Quotas<'a> = Vec<(&'a str, i64, Option<i64>, Option<i64>)>;
    let mut by_flavor: Vec<(&str, Quotas<'_>)> = Vec::new();
    for (f, r, n, l) in q {
        match by_flavor.iter_mut().find(|(x, _)| x == f) {
            Some((_, v)) => v.push((r, *n, None, *l)),
            None => by_flavor.push((f, vec![(r, *n, None, *l)])),
        }
    }
    for (f, v) in by_flavor {
        m = m.flavor_limits(f, &v);
    }
    m
}

struct Case {
    name: &'static str,
    cq: ClusterQueueModel,
    lending: Option<ClusterQueueModel>,
    cohorts: Vec<CohortModel>,
    usage: Vec<(&'static str, &'static str, i64)>,
    /// Kueue's `flvResQ`: the workload counted in the share.
    extra: Vec<(&'static str, &'static str, i64)>,
    /// (node, weighted share, dominant resource, borrowing)
    want: Vec<(&'static str, i64, &'static str, bool)>,
}

fn lending(q: &[(&str, &str, i64, Option<i64>)], w: f64) -> Option<ClusterQueueModel> {
    Some(cq("lending-cq", Some("test-cohort"), w, q))
}

fn two_level(
    cq_nominal: i64,
    child: CohortModel,
    root_nominal: i64,
) -> (ClusterQueueModel, Vec<CohortModel>) {
    (
        cq(
            "cq",
            Some("child-cohort"),
            1.0,
            &[("default", GPU, cq_nominal, None)],
        ),
        vec![
            child,
            CohortModel::build("root").flavor_limits("default", &[(GPU, root_nominal, None, None)]),
        ],
    )
}

fn cases() -> Vec<Case> {
    let cpu_gpu = |c: i64, g: i64| vec![("default", "cpu", c, None), ("default", GPU, g, None)];
    let base = |name, usage: Vec<_>, extra: Vec<_>, want| Case {
        name,
        cq: cq("cq", Some("test-cohort"), 1.0, &cpu_gpu(2000, 5)),
        lending: lending(&cpu_gpu(8000, 5), 1.0),
        cohorts: vec![],
        usage,
        extra,
        want,
    };
    let others = |mut v: Vec<(&'static str, i64, &'static str, bool)>| {
        v.push(("lending-cq", 0, "", false));
        v.push(("test-cohort", 0, "", false));
        v
    };
    let gpu_case = |name, cq_nominal, cq_w, lend_nominal, lend_w, used, want: (i64, &'static str)| Case {
        name,
        cq: cq(
            "cq",
            Some("test-cohort"),
            cq_w,
            &[("default", GPU, cq_nominal, None)],
        ),
        lending: lending(&[("default", GPU, lend_nominal, None)], lend_w),
        cohorts: vec![],
        usage: vec![("default", GPU, used)],
        extra: vec![],
        want: others(vec![("cq", want.0, want.1, true)]),
    };
    let (share_cq, share_cohorts) = two_level(
        5,
        CohortModel::build("child-cohort").weight(2.0).parent("root"),
        45,
    );
    let (root_only_cq, root_only_cohorts) = two_level(
        0,
        CohortModel::build("child-cohort").weight(2.0).parent("root"),
        50,
    );
    let (limit_cq, limit_cohorts) = two_level(
        0,
        CohortModel::build("child-cohort")
            .parent("root")
            .flavor_limits("default", &[(GPU, 0, Some(10), None)]),
        50,
    );
    vec![
        Case {
            name: "no cohort",
            cq: cq("cq", None, 1.0, &cpu_gpu(2000, 5)),
            lending: None,
            cohorts: vec![],
            usage: vec![("default", "cpu", 1000), ("default", GPU, 2)],
            extra: vec![],
            want: vec![("cq", 0, "", false)],
        },
        base(
            "usage below nominal",
            vec![("default", "cpu", 1000), ("default", GPU, 2)],
            vec![],
            others(vec![("cq", 0, "", false)]),
        ),
        // (7-5)*1000/10
        base(
            "usage above nominal",
            vec![("default", "cpu", 3000), ("default", GPU, 7)],
            vec![],
            others(vec![("cq", 200, GPU, true)]),
        ),
        gpu_case(
            "usage slightly above nominal in a cohort with large quotas",
            500,
            1.0,
            1000,
            300.0,
            501,
            (1, GPU),
        ),
        gpu_case(
            "usage way above nominal in a cohort with large quotas and weights",
            500,
            300.0,
            1000,
            300.0,
            800,
            (1, GPU),
        ),
        // (3-2)*1000/10
        base(
            "one resource above nominal",
            vec![("default", "cpu", 3000), ("default", GPU, 3)],
            vec![],
            others(vec![("cq", 100, "cpu", true)]),
        ),
        // (1+4-2)*1000/10
        base(
            "usage with workload above nominal",
            vec![("default", "cpu", 1000), ("default", GPU, 2)],
            vec![("default", "cpu", 4000), ("default", GPU, 4)],
            others(vec![("cq", 300, "cpu", true)]),
        ),
        Case {
            name: "A resource with zero lendable",
            cq: cq(
                "cq",
                Some("test-cohort"),
                1.0,
                &[("default", "cpu", 2000, None), ("default", GPU, 2, Some(0))],
            ),
            lending: lending(
                &[("default", "cpu", 8000, None), ("default", GPU, 64, Some(0))],
                1.0,
            ),
            cohorts: vec![],
            usage: vec![("default", "cpu", 1000), ("default", GPU, 1)],
            extra: vec![("default", "cpu", 4000), ("default", GPU, 4)],
            want: others(vec![("cq", 300, "cpu", true)]),
        },
        // ((15+10-20)+0)*1000/200, spot under nominal
        Case {
            name: "multiple flavors",
            cq: cq(
                "cq",
                Some("test-cohort"),
                1.0,
                &[("on-demand", "cpu", 20_000, None), ("spot", "cpu", 80_000, None)],
            ),
            lending: lending(&[("default", "cpu", 100_000, None)], 1.0),
            cohorts: vec![],
            usage: vec![("on-demand", "cpu", 15_000), ("spot", "cpu", 5_000)],
            extra: vec![("on-demand", "cpu", 10_000)],
            want: others(vec![("cq", 25, "cpu", true)]),
        },
        // ((7-5)*1000/10)/2
        gpu_case("above nominal with integer weight", 5, 2.0, 5, 1.0, 7, (100, GPU)),
        // ((7-5)*1000/10)/(1/2)
        gpu_case("above nominal with decimal weight", 5, 0.5, 5, 1.0, 7, (400, GPU)),
        gpu_case(
            "above nominal with zero weight",
            5,
            0.0,
            10,
            1.0,
            7,
            (i64::MAX, GPU),
        ),
        Case {
            name: "cohort has resource share",
            cq: share_cq,
            lending: None,
            cohorts: share_cohorts,
            usage: vec![("default", GPU, 10)],
            extra: vec![],
            // (5 / 50) * 1000, and / 2 for the cohort
            want: vec![
                ("cq", 100, GPU, true),
                ("child-cohort", 50, GPU, true),
                ("root", 0, "", false),
            ],
        },
        Case {
            name: "resource share defined for resources only available at the root cohort",
            cq: root_only_cq,
            lending: None,
            cohorts: root_only_cohorts,
            usage: vec![("default", GPU, 10)],
            extra: vec![],
            want: vec![
                ("cq", 200, GPU, true),
                ("child-cohort", 100, GPU, true),
                ("root", 0, "", false),
            ],
        },
        // The cohort's resources are 10 seen from the ClusterQueue (borrowingLimit), 50 from
        // the child cohort.
        Case {
            name: "resource share affected by borrowing limit",
            cq: limit_cq,
            lending: None,
            cohorts: limit_cohorts,
            usage: vec![("default", GPU, 10)],
            extra: vec![],
            want: vec![
                ("cq", 1000, GPU, true),
                ("child-cohort", 200, GPU, true),
                ("root", 0, "", false),
            ],
        },
        // Kueue reads a 1E CPU quota as unlimited; the ratio is tiny and rounds up to 1.
        Case {
            name: "borrowing against unlimited lendable capacity (exabyte-scale quota)",
            cq: cq("cq", Some("test-cohort"), 1.0, &[("default", "cpu", 0, None)]),
            lending: lending(&[("default", "cpu", i64::MAX, None)], 1.0),
            cohorts: vec![],
            usage: vec![("default", "cpu", 1000)],
            extra: vec![],
            want: others(vec![("cq", 1, "cpu", true)]),
        },
    ]
}

#[test]
fn kueue_dominant_resource_share() {
    for c in cases() {
        let mut cqs = vec![c.cq.clone()];
        cqs.extend(c.lending.clone());
        let cohorts: BTreeMap<String, CohortModel> =
            c.cohorts.iter().map(|x| (x.name.clone(), x.clone())).collect();
        let mut tree = QuotaTree::build(&cqs, &cohorts);
        let i = tree.cq("cq").unwrap();
        tree.add_all(i, &amounts(&c.usage));
        let extra = amounts(&c.extra);
        let mut got: Vec<(String, i64, String, bool)> = (0..tree.nodes.len())
            .map(|n| {
                let d = drs(&tree, n, Some(&extra));
                (
                    tree.nodes[n].name.clone(),
                    d.weighted_share(),
                    d.dominant.clone().unwrap_or_default(),
                    d.is_borrowing(),
                )
            })
            .collect();
        got.sort();
        let mut want: Vec<(String, i64, String, bool)> = c
            .want
            .iter()
            .map(|(n, v, r, b)| (n.to_string(), *v, r.to_string(), *b))
            .collect();
        want.sort();
        assert_eq!(got, want, "{}", c.name);
    }
}

#[test]
fn kueue_is_borrowing_on() {
    // (usage, requested, borrowing on requested, borrowing)
    let cpu = |v| ("default", "cpu", v);
    let gpu = |v| ("default", GPU, v);
    let cases = [
        (
            "borrows on requested flavor",
            vec![cpu(3000)],
            vec![cpu(1000)],
            true,
            true,
        ),
        (
            "borrows on unrequested flavor only",
            vec![cpu(1000), gpu(7)],
            vec![cpu(1000)],
            false,
            true,
        ),
        (
            "borrows on both, requests one",
            vec![cpu(3000), gpu(7)],
            vec![gpu(1)],
            true,
            true,
        ),
        (
            "no borrowing",
            vec![cpu(1000), gpu(2)],
            vec![cpu(1000)],
            false,
            false,
        ),
        ("nil requestedFRs", vec![cpu(3000)], vec![], false, true),
    ];
    for (name, usage, req, on, borrowing) in cases {
        let q = [("default", "cpu", 2000, None), ("default", GPU, 5, None)];
        let lq = [("default", "cpu", 8000, None), ("default", GPU, 5, None)];
        let cqs = [
            cq("cq", Some("cohort"), 1.0, &q),
            cq("lending-cq", Some("cohort"), 1.0, &lq),
        ];
        let mut tree = QuotaTree::build(&cqs, &BTreeMap::new());
        let i = tree.cq("cq").unwrap();
        tree.add_all(i, &amounts(&usage));
        let d = drs(&tree, i, None);
        assert_eq!(d.is_borrowing(), borrowing, "{name}");
        assert_eq!(d.is_borrowing_on(&amounts(&req)), on, "{name}");
    }
}

#[test]
fn kueue_precise_weighted_share() {
    let d = |w: f64, ratio: f64| Drs {
        weight: FairWeight::of(w),
        ratio,
        dominant: None,
        borrowed: vec![],
    };
    assert_eq!(
        d(0.0, 100.0).precise(),
        f64::INFINITY,
        "zero weight returning Inf"
    );
    assert_eq!(d(1.0, 0.0).precise(), 0.0, "zero unweighted ratio returns 0");
    assert_eq!(d(2.0, 400.0).precise(), 200.0, "regular integer division");
    assert_eq!(d(4.0, 10.0).precise(), 2.5, "decimal division");
    assert_eq!(d(4.0, 10.0).weighted_share(), 3, "rounded up");
    assert_eq!(
        compare(&d(0.0, 100.0), &d(1.0, 1e9)),
        Ordering::Greater,
        "zero weight borrowing is highest"
    );
    assert_eq!(
        compare(&d(0.0, 100.0), &d(0.0, 200.0)),
        Ordering::Less,
        "two zero weights: the ratio"
    );
}

/// Kueue's `pkg/scheduler/scheduler_test.go` `TestEntryComparerLess`, all 7 cases: whether `a`
/// goes before `b` in a cohort's tournament. A contender is marked a preemptor only with the
/// `PrioritizePreemptorWorkloads` gate on, so Kueue's "feature disabled" case has no mark.
#[test]
fn kueue_entry_comparer_less() {
    use crate::queue::model::WorkloadKey;
    use crate::queue::pending::OrderKey;
    use std::cmp::Reverse;
    let cpu = fr("default", "cpu");
    let borrowing = || Drs {
        weight: FairWeight::default(),
        ratio: 0.0,
        dominant: None,
        borrowed: vec![cpu.clone()],
    };
    // Go's zero DRS: weight 0, nothing borrowed.
    let zero = || Drs {
        weight: FairWeight(0),
        ratio: 0.0,
        dominant: None,
        borrowed: vec![],
    };
    let order = |name: &str, ts: i64| OrderKey {
        lq_usage: 0,
        priority: Reverse(0),
        timestamp: ts,
        uid: name.into(),
        key: WorkloadKey::new("default", name),
    };
    let one: FrAmounts = [(cpu.clone(), Amount(1))].into();
    // (name, (a, created, share, preemptor), (b, created, share, preemptor), want)
    let cases = [
        (
            "non-borrowing subtree preferred over borrowing subtree",
            ("nominal", 1, Some(zero()), false),
            ("borrowing", 0, Some(borrowing()), false),
            true,
        ),
        (
            "both borrowing on requested flavors falls through to FIFO",
            ("borrow-a", 1, Some(borrowing()), false),
            ("borrow-b", 0, Some(borrowing()), false),
            false,
        ),
        (
            "lower DRS preferred over higher DRS",
            ("lower-drs", 1, Some(Drs::negative()), false),
            ("higher-drs", 0, Some(zero()), false),
            true,
        ),
        (
            "both non-borrowing falls through to FIFO",
            ("older", 0, None, false),
            ("newer", 1, None, false),
            true,
        ),
        (
            "a is preemptor, b not, feature enabled",
            ("preemptor-borrowing", 0, Some(borrowing()), true),
            ("not-preemptor-nominal", 0, Some(zero()), false),
            true,
        ),
        (
            "a is preemptor, b not, feature disabled",
            ("preemptor-borrowing", 0, Some(borrowing()), false),
            ("not-preemptor-nominal", 0, Some(zero()), false),
            false,
        ),
        (
            "both are preemptors, feature enabled",
            ("preemptor-borrowing", 0, Some(borrowing()), true),
            ("preemptor-nominal", 0, Some(zero()), true),
            false,
        ),
    ];
    for (name, a, b, want) in cases {
        let (oa, ob) = (order(a.0, a.1), order(b.0, b.1));
        let contenders = [
            Contender {
                cq_idx: 1,
                usage: &one,
                order: &oa,
                preemptor: a.3,
            },
            Contender {
                cq_idx: 2,
                usage: &one,
                order: &ob,
                preemptor: b.3,
            },
        ];
        let mut shares = HashMap::new();
        for (i, s) in [(0, a.2), (1, b.2)] {
            if let Some(s) = s {
                shares.insert((0, i), s);
            }
        }
        assert_eq!(less(0, 0, 1, &contenders, &shares), want, "{name}");
    }
}
