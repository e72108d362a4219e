//! Table-style tests of the pure parts: the sync step over snapshots, and the status transitions.

use std::sync::Arc;

use super::sync::{Action, AdmissionState, Snapshot};
use crate::api::kueue::{ClusterQueue, LocalQueue, ResourceFlavor, Workload};

fn cq(name: &str, cpu: &str) -> Arc<ClusterQueue> {
    let mut q = ClusterQueue::build(name).flavor("default", [("cpu", cpu)]).build();
    q.metadata.resource_version = Some("1".into());
    Arc::new(q)
}

fn wl(name: &str, cpu: &str, rv: &str) -> Arc<Workload> {
    let mut w = Workload::build(name, "default").queue("lq").podset("main", 1, [("cpu", cpu)]).build();
    w.metadata.resource_version = Some(rv.into());
    Arc::new(w)
}

fn snapshot(cqs: Vec<Arc<ClusterQueue>>, flavors: &[&str], wls: Vec<Arc<Workload>>) -> Snapshot {
    Snapshot {
        cluster_queues: cqs,
        flavors: flavors.iter().map(|f| Arc::new(ResourceFlavor::build(f).build())).collect(),
        local_queues: vec![Arc::new(LocalQueue::build("lq", "default").cluster_queue("cq").build())],
        workloads: wls,
        ..Default::default()
    }
}

#[test]
fn cluster_queue_with_missing_flavor_steps_without_admitting() {
    let mut st = AdmissionState::new();
    let actions = st.step(&snapshot(vec![cq("cq", "4")], &[], vec![]), 0);
    assert!(actions.is_empty(), "{actions:?}");
    let actions = st.step(&snapshot(vec![cq("cq", "4")], &[], vec![wl("a", "1", "1")]), 0);
    assert!(matches!(&actions[..], [Action::Pending { reason, .. }] if reason == "Misconfigured"), "{actions:?}");
}
