//! A pod group's readiness against Kueue v0.20: #11654 (the whole total there), #15734 (a Succeeded
//! pod counts as ready outside serving groups) and #16059 / KEP-15423's unit cases for
//! `kueue.x-k8s.io/pod-group-max-not-ready-count` (valid budgets, missing or invalid values, values
//! that differ across the group, and the two gates on and off).

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::readiness::{
    GROUP_MAX_NOT_READY_COUNT_ANNOTATION as MAX, ReadinessGates, group_ready, max_not_ready,
};

const OFF: ReadinessGates = ReadinessGates {
    count_succeeded: false,
    max_not_ready: false,
};
const V020: ReadinessGates = ReadinessGates::KUEUE_V020;
const BUDGET: ReadinessGates = ReadinessGates {
    count_succeeded: true,
    max_not_ready: true,
};

/// A group pod in `phase`, `Ready` as `ready`, with the not-ready budget annotation `max` if any.
fn member(phase: &str, ready: bool, max: Option<&str>) -> Pod {
    let mut annotations = json!({"kueue.x-k8s.io/pod-group-total-count": "4"});
    if let Some(m) = max {
        annotations[MAX] = json!(m);
    }
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default", "annotations": annotations},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
    }))
    .unwrap()
}

fn running(max: Option<&str>) -> Pod {
    member("Running", true, max)
}

fn pending(max: Option<&str>) -> Pod {
    member("Pending", false, max)
}

fn succeeded(max: Option<&str>) -> Pod {
    member("Succeeded", false, max)
}

#[test]
fn kueue_11654_a_group_short_of_its_total_is_not_ready() {
    let pods = vec![running(None), running(None), running(None)];
    assert!(!group_ready(&pods, 4, false, V020));
    let mut all = pods.clone();
    all.push(running(None));
    assert!(group_ready(&all, 4, false, V020));
    assert!(!group_ready(&all[..1], 4, false, OFF));
}

#[test]
fn kueue_15734_a_succeeded_pod_counts_as_ready_except_in_a_serving_group() {
    let pods = vec![succeeded(None), running(None), running(None), running(None)];
    // The gate on (Kueue v0.20's default): ready.
    assert!(group_ready(&pods, 4, false, V020));
    // A serving group needs every pod ready.
    assert!(!group_ready(&pods, 4, true, V020));
    // The gate off: the completed pod's Ready=False makes the group not ready (the old behaviour).
    assert!(!group_ready(&pods, 4, false, OFF));
    // A failed pod never counts.
    let failed = vec![
        member("Failed", false, None),
        running(None),
        running(None),
        running(None),
    ];
    assert!(!group_ready(&failed, 4, false, V020));
}

#[test]
fn kueue_16059_the_budget_tolerates_that_many_not_ready_pods() {
    let two = Some("2");
    // 4 of 4 counted, 2 not ready, budget 2: ready.
    let pods = vec![running(two), running(two), pending(two), pending(two)];
    assert!(group_ready(&pods, 4, false, BUDGET));
    // 3 not ready exceeds it.
    let pods = vec![running(two), pending(two), pending(two), pending(two)];
    assert!(!group_ready(&pods, 4, false, BUDGET));
    // Pods not created yet count as not ready: 2 of 4 exist and run, 2 missing.
    let pods = vec![running(two), running(two)];
    assert!(group_ready(&pods, 4, false, BUDGET));
    let pods = vec![running(two)];
    assert!(!group_ready(&pods, 4, false, BUDGET));
    // A succeeded pod is ready for the budget too; in a serving group it is not.
    let pods = vec![succeeded(two), running(two), pending(two), pending(two)];
    assert!(group_ready(&pods, 4, false, BUDGET));
    assert!(!group_ready(&pods, 4, true, BUDGET));
}

#[test]
fn kueue_16059_the_gate_off_ignores_the_annotation() {
    let two = Some("2");
    let pods = vec![running(two), running(two), pending(two), pending(two)];
    assert!(!group_ready(&pods, 4, false, V020));
    assert!(!group_ready(&pods, 4, false, OFF));
}

#[test]
fn kueue_16059_missing_or_invalid_values_allow_none_not_ready() {
    for bad in ["", "x", "1.5", "-1", "4", "5", "99999999999999999999"] {
        assert_eq!(max_not_ready(&running(Some(bad)), 4), 0, "{bad:?}");
        let pods = vec![
            running(Some(bad)),
            running(Some(bad)),
            running(Some(bad)),
            pending(Some(bad)),
        ];
        assert!(!group_ready(&pods, 4, false, BUDGET), "{bad:?}");
    }
    assert_eq!(max_not_ready(&running(None), 4), 0);
    assert_eq!(max_not_ready(&running(Some("3")), 4), 3);
    assert_eq!(max_not_ready(&running(Some("0")), 4), 0);
    // 0 is all or nothing.
    let zero = Some("0");
    let pods = vec![running(zero), running(zero), running(zero), pending(zero)];
    assert!(!group_ready(&pods, 4, false, BUDGET));
}

#[test]
fn kueue_16059_the_strictest_value_in_the_group_applies() {
    // One pod without the annotation: the budget is 0.
    let pods = vec![
        running(Some("2")),
        running(Some("2")),
        running(None),
        pending(Some("2")),
    ];
    assert!(!group_ready(&pods, 4, false, BUDGET));
    // 1 and 3 across the group: 1 applies.
    let pods = vec![
        running(Some("3")),
        running(Some("1")),
        pending(Some("3")),
        pending(Some("3")),
    ];
    assert!(!group_ready(&pods, 4, false, BUDGET));
    let pods = vec![
        running(Some("3")),
        running(Some("1")),
        running(Some("3")),
        pending(Some("3")),
    ];
    assert!(group_ready(&pods, 4, false, BUDGET));
}
