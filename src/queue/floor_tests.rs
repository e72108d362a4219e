//! A victim whose growth was taken is held until it holds no more than its floor; the floor its
//! job writes can rise (the serving part grew since), and then it is let go at once (issue 45,
//! chaos seed 47: the upgrade's new slice must not wait behind it for good).

use std::collections::BTreeMap;

use super::tests::{Scenario, k, setup};
use super::*;

#[test]
fn a_slice_whose_growth_was_taken_is_let_go_when_its_floor_rises_to_what_it_holds() {
    let mut core = setup(&Scenario {
        cqs: vec![ClusterQueueModel::build("cq").flavor("default", &[("cpu", 10)])],
        ..Default::default()
    });
    let slice = WorkloadModel::build("ns", "svc-1", "cq")
        .podset(PodSetModel::build("head", 2, &[("cpu", 1)]))
        .podset(PodSetModel::build("workers", 2, &[("cpu", 1)]));
    core.add_workload(slice).unwrap();
    assert_eq!(core.schedule_cycle(1).admissions.len(), 1);
    // Floor written when the serving cluster held a head and one worker; the growth is taken.
    let floor = |h: i64, w: i64| BTreeMap::from([("head".to_string(), h), ("workers".to_string(), w)]);
    core.set_floor(&k("svc-1"), Some(&floor(1, 1)));
    core.mark_taking_growth(&k("svc-1"));
    // The serving cluster holds a second worker by now: the slice shrinks to 1 head + 2 workers,
    // above the old floor, so it is still held and the upgrade's new slice waits.
    let serving = WorkloadModel::build("ns", "svc-1", "cq")
        .podset(PodSetModel::build("head", 1, &[("cpu", 1)]))
        .podset(PodSetModel::build("workers", 2, &[("cpu", 1)]));
    core.shrink_admitted(serving).unwrap();
    let next = WorkloadModel::build("ns", "svc-2", "cq")
        .podset(PodSetModel::build("head", 2, &[("cpu", 1)]))
        .podset(PodSetModel::build("workers", 4, &[("cpu", 1)]))
        .replaces(&k("svc-1"));
    core.add_workload(next).unwrap();
    assert!(
        core.schedule_cycle(2).admissions.is_empty(),
        "held above its floor"
    );
    // The job writes the floor as the serving cluster holds it now: let go, the new slice admitted.
    core.set_floor(&k("svc-1"), Some(&floor(1, 2)));
    let r = core.schedule_cycle(3);
    assert_eq!(
        r.admissions
            .iter()
            .map(|a| a.key.name.clone())
            .collect::<Vec<_>>(),
        vec!["svc-2".to_string()],
        "{:?}",
        r.pending
    );
}
