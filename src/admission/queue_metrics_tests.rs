//! The queue gauges against Kueue's names and values, and each transition counted once.

use super::*;
use crate::admission::transition_metrics::Counted;
use crate::queue::Amount;
use crate::queue::{FlavorUsage as CoreFlavor, ResourceUsage};
use serde_json::json;
use std::sync::Arc;

// Kueue's metrics: a ClusterQueue reports its quota and usage per flavor and resource in base
// units, exactly one status series is 1, and a deleted queue's series go away.
#[test]
fn gauges_follow_kueue_and_deleted_queues_disappear() {
    let cq: ClusterQueue = serde_json::from_value(json!({"metadata": {"name": "cq"}, "spec": {"cohortName": "co", "resourceGroups": [{"coveredResources": ["cpu", "memory"],
        "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "1500m", "borrowingLimit": "2"}, {"name": "memory", "nominalQuota": "1Gi"}]}]}]}})).unwrap();
    let snap = Snapshot {
        admission_checks: vec![],
        cluster_queues: vec![Arc::new(cq)],
        cohorts: vec![],
        flavors: vec![],
        local_queues: vec![],
        workloads: vec![],
        namespaces: Default::default(),
        priority_classes: Default::default(),
        topologies: vec![],
        nodes: vec![],
        non_tas: Some(Default::default()),
    };
    let usage = vec![CoreFlavor {
        name: "f".into(),
        resources: vec![ResourceUsage {
            name: "cpu".into(),
            total: Amount(500),
            borrowed: Amount(0),
        }],
    }];
    let core = HashMap::from([(
        "cq".to_string(),
        CoreStatus {
            flavors_reservation: usage.clone(),
            flavors_usage: usage,
            pending_workloads: 3,
            active_pending_workloads: 1,
            reserving_workloads: 2,
            admitted_workloads: 2,
            inactive: None,
        },
    )]);
    let g = gauges(
        &snap,
        &core,
        &HashMap::from([("cq".to_string(), true)]),
        &AdmissionState::new(),
        Role::Leader,
    );
    let m = Metrics::new();
    report(&m, g);
    let text = m.render();
    for want in [
        "kueue_cluster_queue_nominal_quota{cohort=\"co\",cluster_queue=\"cq\",flavor=\"f\",resource=\"cpu\",replica_role=\"leader\"} 1.5",
        "kueue_cluster_queue_nominal_quota{cohort=\"co\",cluster_queue=\"cq\",flavor=\"f\",resource=\"memory\",replica_role=\"leader\"} 1073741824.0",
        "kueue_cluster_queue_borrowing_limit{cohort=\"co\",cluster_queue=\"cq\",flavor=\"f\",resource=\"cpu\",replica_role=\"leader\"} 2.0",
        // Kueue's reportResourceMetrics: an unset limit is +Inf (the encoder writes `inf`).
        "kueue_cluster_queue_borrowing_limit{cohort=\"co\",cluster_queue=\"cq\",flavor=\"f\",resource=\"memory\",replica_role=\"leader\"} inf",
        "kueue_cluster_queue_lending_limit{cohort=\"co\",cluster_queue=\"cq\",flavor=\"f\",resource=\"cpu\",replica_role=\"leader\"} inf",
        "kueue_cluster_queue_resource_usage{cohort=\"co\",cluster_queue=\"cq\",flavor=\"f\",resource=\"cpu\",replica_role=\"leader\"} 0.5",
        "kueue_pending_workloads{cluster_queue=\"cq\",status=\"inadmissible\",replica_role=\"leader\"} 2",
        "kueue_cluster_queue_status{cluster_queue=\"cq\",status=\"active\",replica_role=\"leader\"} 1",
        "kueue_cluster_queue_status{cluster_queue=\"cq\",status=\"pending\",replica_role=\"leader\"} 0",
    ] {
        assert!(text.contains(want), "missing {want} in\n{text}");
    }
    // Kueue's reportCQPendingWorkloads: once the ClusterQueue is inactive, every pending workload
    // is inadmissible.
    report(
        &m,
        gauges(
            &snap,
            &core,
            &HashMap::from([("cq".to_string(), false)]),
            &AdmissionState::new(),
            Role::Leader,
        ),
    );
    let text = m.render();
    assert!(
        text.contains(
            "kueue_pending_workloads{cluster_queue=\"cq\",status=\"inadmissible\",replica_role=\"leader\"} 3"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "kueue_pending_workloads{cluster_queue=\"cq\",status=\"active\",replica_role=\"leader\"} 0"
        ),
        "{text}"
    );
    let empty = Snapshot {
        cluster_queues: vec![],
        ..snap
    };
    report(
        &m,
        gauges(
            &empty,
            &HashMap::new(),
            &HashMap::new(),
            &AdmissionState::new(),
            Role::Leader,
        ),
    );
    assert!(!m.render().contains("cluster_queue=\"cq\""), "{}", m.render());
}

// Kueue's kueue_cluster_queue_weighted_share / kueue_cohort_weighted_share: reported with fair
// sharing on only, 0 for a node within its quota, NaN for a zero weight that borrows.
#[test]
fn weighted_shares_only_with_fair_sharing() {
    use crate::queue::{ClusterQueueModel, CohortModel, FairSharingConfig, WorkloadModel};
    let mut state = AdmissionState::new();
    let core = &mut state.core;
    core.upsert_cohort(CohortModel::build("root")).unwrap();
    core.upsert_cohort(CohortModel::build("co").parent("root").weight(0.0))
        .unwrap();
    core.upsert_cluster_queue(
        ClusterQueueModel::build("a")
            .cohort("co")
            .flavor("f", &[("cpu", 0)]),
    )
    .unwrap();
    core.upsert_cluster_queue(
        ClusterQueueModel::build("b")
            .cohort("root")
            .flavor("f", &[("cpu", 4000)]),
    )
    .unwrap();
    core.add_workload(WorkloadModel::build("ns", "w", "a").request(&[("cpu", 1000)]))
        .unwrap();
    let snap = Snapshot {
        admission_checks: vec![],
        cluster_queues: vec![],
        cohorts: vec![],
        flavors: vec![],
        local_queues: vec![],
        workloads: vec![],
        namespaces: Default::default(),
        priority_classes: Default::default(),
        topologies: vec![],
        nodes: vec![],
        non_tas: Some(Default::default()),
    };
    let m = Metrics::new();
    report(
        &m,
        gauges(&snap, &HashMap::new(), &HashMap::new(), &state, Role::Leader),
    );
    assert!(!m.render().contains("weighted_share{"), "{}", m.render());
    state.core.set_fair_sharing(Some(FairSharingConfig::default()));
    state.core.upsert_flavor(crate::queue::FlavorModel::build("f"));
    let res = state.core.schedule_cycle(1);
    assert_eq!(res.admissions.len(), 1, "{res:?}");
    report(
        &m,
        gauges(&snap, &HashMap::new(), &HashMap::new(), &state, Role::Leader),
    );
    let text = m.render();
    for want in [
        // a borrows 1 of the 4 CPU its cohort can draw: 1000 * 1/4.
        "kueue_cluster_queue_weighted_share{cluster_queue=\"a\",cohort=\"co\",replica_role=\"leader\"} 250.0",
        "kueue_cluster_queue_weighted_share{cluster_queue=\"b\",cohort=\"root\",replica_role=\"leader\"} 0.0",
        "kueue_cohort_weighted_share{cohort=\"co\",replica_role=\"leader\"} NaN",
        "kueue_cohort_weighted_share{cohort=\"root\",replica_role=\"leader\"} 0.0",
    ] {
        assert!(text.contains(want), "missing {want} in\n{text}");
    }
}

// Kueue counts a finish on the workload controller's transition to Finished, once: the same
// finish seen in every later snapshot counts once, and one from before this process started
// counting was someone else's to count.
#[test]
fn each_transition_counts_once_and_only_from_the_start_on() {
    let m = Metrics::new();
    let finished = |key: &str, at: jiff::Timestamp| Transition {
        key: key.into(),
        at,
        what: Counted::Finished {
            cluster_queue: "cq".into(),
            local_queue: Some(("ns".into(), "lq".into())),
            priority_class: String::new(),
            execution_seconds: Some(30.0),
        },
    };
    let now = m.counting_since + jiff::SignedDuration::from_secs(5);
    let before = m.counting_since - jiff::SignedDuration::from_secs(5);
    count_transitions(
        &m,
        vec![finished("finished/a", now), finished("finished/old", before)],
    );
    count_transitions(
        &m,
        vec![finished("finished/a", now), finished("finished/old", before)],
    );
    let admitted = Transition {
        key: "admitted/b/1".into(),
        at: now,
        what: Counted::Admitted {
            cohorts: vec!["co".into(), "root".into()],
            priority_class: "high".into(),
        },
    };
    count_transitions(&m, vec![finished("finished/a", now), admitted]);
    let text = m.render();
    for want in [
        "kueue_finished_workloads_total{cluster_queue=\"cq\",priority_class=\"\",replica_role=\"standalone\"} 1\n",
        "kueue_local_queue_finished_workloads_total{name=\"lq\",namespace=\"ns\",priority_class=\"\",replica_role=\"standalone\"} 1\n",
        "kueue_execution_time_seconds_count{cluster_queue=\"cq\",priority_class=\"\",replica_role=\"standalone\"} 1\n",
        "kueue_cohort_subtree_admitted_workloads_total{cohort=\"root\",priority_class=\"high\",replica_role=\"standalone\"} 1\n",
        "# TYPE kueue_finished_workloads_total unknown\n",
    ] {
        assert!(text.contains(want), "missing {want} in\n{text}");
    }
}

// Kueue: pkg/metrics/metrics_test.go TestReportAndCleanupPreemptionTargetRecomputations (the
// report half): one series per ClusterQueue and result, each recomputation counted once however
// often the gauges are taken.
#[test]
fn preemption_target_recomputations_are_counted_once_per_result() {
    use crate::queue::Recomputation;
    let state = AdmissionState::new();
    let snap = Snapshot {
        admission_checks: vec![],
        cluster_queues: vec![],
        cohorts: vec![],
        flavors: vec![],
        local_queues: vec![],
        workloads: vec![],
        namespaces: Default::default(),
        priority_classes: Default::default(),
        topologies: vec![],
        nodes: vec![],
        non_tas: Some(Default::default()),
    };
    let add = |cq: &str, r: Recomputation, n: u64| {
        *state
            .preemption_target_recomputations
            .lock()
            .unwrap()
            .entry((cq.to_string(), r))
            .or_default() += n;
    };
    add("cluster_queue1", Recomputation::NewTargets, 1);
    add("cluster_queue1", Recomputation::DeferredFit, 1);
    add("cluster_queue1", Recomputation::Skipped, 1);
    let m = Metrics::new();
    let take = || {
        report(
            &m,
            gauges(&snap, &HashMap::new(), &HashMap::new(), &state, Role::Leader),
        )
    };
    take();
    take();
    let series = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("kueue_preemption_target_recomputations_total{"))
            .map(String::from)
            .collect()
    };
    let text = m.render();
    assert!(
        text.contains("# TYPE kueue_preemption_target_recomputations counter"),
        "{text}"
    );
    assert_eq!(series(&text).len(), 3, "one series per result:\n{text}");
    for result in ["new_targets", "deferred_fit", "skipped"] {
        let want = format!(
            "kueue_preemption_target_recomputations_total{{cluster_queue=\"cluster_queue1\",result=\"{result}\",replica_role=\"leader\"}} 1"
        );
        assert!(text.contains(&want), "missing {want} in\n{text}");
    }
    add("cluster_queue1", Recomputation::Skipped, 2);
    take();
    assert!(
        m.render().contains(
            "kueue_preemption_target_recomputations_total{cluster_queue=\"cluster_queue1\",result=\"skipped\",replica_role=\"leader\"} 3"
        ),
        "{}",
        m.render()
    );
}
