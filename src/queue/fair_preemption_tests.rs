//! Kueue's `pkg/scheduler/preemption/fairsharing/ordering_test.go` `TestMakeClusterQueueOrdering`:
//! which ClusterQueues the fair-sharing ordering yields, in which order, as candidates are popped
//! or queues dropped. Each `name` is Kueue's case name; cpu in milli-CPU.

use std::collections::BTreeMap;

use super::*;
use crate::queue::amount::{Amount, FlavorResource, FrAmounts};
use crate::queue::model::{ClusterQueueModel, CohortModel, WorkloadKey};

struct Case {
    name: &'static str,
    /// (name, cohort, nominal CPUs)
    cqs: Vec<(&'static str, Option<&'static str>, i64)>,
    /// (name, parent)
    cohorts: Vec<(&'static str, Option<&'static str>)>,
    /// (workload, ClusterQueue, CPUs): usage, and candidates when their ClusterQueue is listed.
    admitted: Vec<(&'static str, &'static str, i64)>,
    preemptor: &'static str,
    candidate_cqs: Vec<&'static str>,
    /// "drop" drops the queue yielded at that step; anything else (or nothing) pops a workload.
    actions: Vec<&'static str>,
    want: Vec<&'static str>,
}

fn run(c: &Case) -> Vec<String> {
    let cqs: Vec<ClusterQueueModel> = c
        .cqs
        .iter()
        .map(|(n, co, cpu)| {
            let q = ClusterQueueModel::build(n).flavor("default", &[("cpu", cpu * 1000)]);
            match co {
                Some(co) => q.cohort(co),
                None => q,
            }
        })
        .collect();
    let cohorts: BTreeMap<String, CohortModel> = c
        .cohorts
        .iter()
        .map(|(n, p)| {
            let co = CohortModel::build(n);
            (
                n.to_string(),
                match p {
                    Some(p) => co.parent(p),
                    None => co,
                },
            )
        })
        .collect();
    let mut tree = QuotaTree::build(&cqs, &cohorts);
    let keys: Vec<WorkloadKey> = c.admitted.iter().map(|a| WorkloadKey::new("ns", a.0)).collect();
    let usages: Vec<FrAmounts> = c
        .admitted
        .iter()
        .map(|a| [(FlavorResource::new("default", "cpu"), Amount(a.2 * 1000))].into())
        .collect();
    let mut cands = Vec::new();
    for ((a, key), usage) in c.admitted.iter().zip(&keys).zip(&usages) {
        let Some(i) = tree.cq(a.1) else {
            panic!("{}: no {}", c.name, a.1)
        };
        tree.add_all(i, usage);
        if c.candidate_cqs.contains(&a.1) {
            cands.push(Candidate {
                key,
                cq_idx: i,
                priority: 0,
                queue_timestamp: 0,
                admitted_at: 0,
                lq_usage: None,
                floor: None,
                uid: a.0,
                usage,
                evicting: false,
            });
        }
    }
    let Some(preemptor) = tree.cq(c.preemptor) else {
        panic!("{}: no preemptor", c.name)
    };
    let mut o = TargetOrdering::new(&tree, preemptor, &cands);
    let mut got = Vec::new();
    let mut step = 0;
    while let Some(target) = o.next(&tree) {
        got.push(tree.nodes[target].name.clone());
        if c.actions.get(step) == Some(&"drop") {
            o.drop_queue(target);
        } else {
            o.pop(target);
        }
        step += 1;
        assert!(got.len() <= 50, "{}: more than 50 steps, likely a loop", c.name);
    }
    got
}

#[test]
fn kueue_make_cluster_queue_ordering() {
    let three = |admitted: Vec<(&'static str, &'static str, i64)>| Case {
        name: "",
        cqs: vec![
            ("preemptor", Some("all"), 4),
            ("high", Some("all"), 2),
            ("low", Some("all"), 2),
        ],
        cohorts: vec![],
        admitted,
        preemptor: "preemptor",
        candidate_cqs: vec!["high", "low"],
        actions: vec![],
        want: vec![],
    };
    let two_high = vec![("h1", "high", 3), ("h2", "high", 2), ("l1", "low", 3)];
    let cases = [
        Case {
            name: "no cohort: preemptor CQ yielded for in-CQ preemption; repro for nil pointer panic issue",
            cqs: vec![("preemptor", None, 4)],
            admitted: vec![("wl1", "preemptor", 1)],
            candidate_cqs: vec!["preemptor"],
            want: vec!["preemptor"],
            ..three(vec![])
        },
        Case {
            name: "no cohort: DropQueue ends the iteration with candidates remaining",
            cqs: vec![("preemptor", None, 4)],
            admitted: vec![("wl1", "preemptor", 1), ("wl2", "preemptor", 1)],
            candidate_cqs: vec!["preemptor"],
            actions: vec!["drop"],
            want: vec!["preemptor"],
            ..three(vec![])
        },
        // target uses 2 of its 5: not borrowing, so pruned.
        Case {
            name: "non-borrowing CQ is pruned even with candidates",
            cqs: vec![("preemptor", Some("all"), 4), ("target", Some("all"), 5)],
            admitted: vec![("t1", "target", 2)],
            candidate_cqs: vec!["target"],
            want: vec![],
            ..three(vec![])
        },
        Case {
            name: "higher DRS CQ returned before lower DRS CQ",
            want: vec!["high", "low"],
            ..three(vec![("h1", "high", 5), ("l1", "low", 3)])
        },
        Case {
            name: "CQ with highest DRS returned again while it still has candidates",
            want: vec!["high", "high", "low"],
            ..three(two_high.clone())
        },
        Case {
            name: "drop queue prevents CQ from being returned again",
            actions: vec!["drop", "pop"],
            want: vec!["high", "low"],
            ..three(two_high)
        },
        Case {
            name: "hierarchical cohorts: higher-DRS subtree visited first",
            cqs: vec![
                ("preemptor-cq", Some("root"), 4),
                ("left-cq", Some("left-cohort"), 2),
                ("right-cq", Some("right-cohort"), 2),
            ],
            cohorts: vec![
                ("root", None),
                ("left-cohort", Some("root")),
                ("right-cohort", Some("root")),
            ],
            admitted: vec![("lc1", "left-cq", 5), ("rc1", "right-cq", 3)],
            preemptor: "preemptor-cq",
            candidate_cqs: vec!["left-cq", "right-cq"],
            want: vec!["left-cq", "right-cq"],
            ..three(vec![])
        },
    ];
    let failed: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            let got = run(c);
            (got != c.want).then(|| format!("{}: got {got:?}, want {:?}", c.name, c.want))
        })
        .collect();
    assert!(failed.is_empty(), "failed Kueue cases:\n{}", failed.join("\n"));
}
