//! The metrics' names and labels against Kueue's.

use super::*;

#[test]
fn names_and_labels_match_kueue() {
    let m = Metrics::new();
    m.set_role(Role::Leader);
    m.admission_attempts_total
        .get_or_create(&m.result("success"))
        .inc();
    m.admitted_workloads_total
        .get_or_create(&m.cq_priority("team-a", ""))
        .inc();
    m.admission_attempt_duration_seconds
        .get_or_create(&m.result("success"))
        .observe(0.002);
    let text = m.render();
    assert!(
        text.contains("kueue_admission_attempts_total{result=\"success\",replica_role=\"leader\"} 1"),
        "{text}"
    );
    assert!(text.contains("kueue_admitted_workloads_total{cluster_queue=\"team-a\",priority_class=\"\",replica_role=\"leader\"} 1"), "{text}");
    assert!(
        text.contains("kueue_admission_attempt_duration_seconds_bucket{"),
        "{text}"
    );
}

#[test]
fn pods_ready_histograms_are_named_and_labelled_as_kueue() {
    let m = Metrics::new();
    m.set_role(Role::Leader);
    let p = &m.pods_ready;
    p.ready_wait_time_seconds
        .get_or_create(&m.cq_priority("cq", ""))
        .observe(3.0);
    p.admitted_until_ready_wait_time_seconds
        .get_or_create(&m.cq_priority("cq", ""))
        .observe(2.0);
    p.local_queue_ready_wait_time_seconds
        .get_or_create(&m.lq_priority("ns", "lq", ""))
        .observe(3.0);
    p.local_queue_admitted_until_ready_wait_time_seconds
        .get_or_create(&m.lq_priority("ns", "lq", ""))
        .observe(2.0);
    let l = CqEvictionLabels {
        cluster_queue: "cq".into(),
        reason: "Deactivated".into(),
        underlying_cause: String::new(),
        replica_role: Role::Leader,
    };
    p.pods_ready_to_evicted_time_seconds
        .get_or_create(&l)
        .observe(30.0);
    let text = m.render();
    for want in [
        "kueue_ready_wait_time_seconds_count{cluster_queue=\"cq\",priority_class=\"\",replica_role=\"leader\"} 1",
        "kueue_admitted_until_ready_wait_time_seconds_sum{cluster_queue=\"cq\",priority_class=\"\",replica_role=\"leader\"} 2.0",
        "kueue_local_queue_ready_wait_time_seconds_count{name=\"lq\",namespace=\"ns\",priority_class=\"\",replica_role=\"leader\"} 1",
        "kueue_local_queue_admitted_until_ready_wait_time_seconds_count{name=\"lq\",namespace=\"ns\",priority_class=\"\",replica_role=\"leader\"} 1",
        "kueue_pods_ready_to_evicted_time_seconds_count{cluster_queue=\"cq\",reason=\"Deactivated\",underlying_cause=\"\",replica_role=\"leader\"} 1",
        // Kueue's generateExponentialBuckets(14): 1, 2.5, 5, ... 10240.
        "kueue_pods_ready_to_evicted_time_seconds_bucket{le=\"40.0\",cluster_queue=\"cq\"",
        "le=\"10240.0\"",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
}
