//! A step reads only the Workloads that changed (`unchanged.rs`), and decides exactly what a step
//! reading every Workload would.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::conditions;
use super::sync::{Action, AdmissionState, Snapshot, key_of};
use super::tests::{cq, snapshot, t, wl};
use crate::api::kueue::{
    ClusterQueue, ClusterQueuePreemption, LocalQueue, PreemptionPolicy, StopPolicy, Workload,
};

fn names(actions: &[Action], f: impl Fn(&Action) -> bool) -> Vec<String> {
    let mut v: Vec<String> = actions
        .iter()
        .filter(|a| f(a))
        .map(|a| a.key().name.clone())
        .collect();
    v.sort();
    v
}

/// Four workloads of 3 CPU and a ClusterQueue of 4: one admitted, three waiting, and the waiting
/// ones' pending status shown, as the API would after the first step's writes.
fn backlog() -> (AdmissionState, Vec<Arc<Workload>>) {
    let mut st = AdmissionState::new();
    let wls: Vec<Arc<Workload>> = ["a", "b", "c", "d"].iter().map(|n| wl(n, "3", "1")).collect();
    let actions = st.step(&snapshot(vec![cq("cq", "4")], &["default"], wls.clone()), 0);
    assert_eq!(st.last_read(), 4);
    assert_eq!(
        names(&actions, |a| matches!(a, Action::Admit { .. })),
        ["a"],
        "{actions:?}"
    );
    (st, wls)
}

#[test]
fn a_step_with_nothing_changed_reads_no_workload_and_writes_nothing_new() {
    let (mut st, wls) = backlog();
    let snap = snapshot(vec![cq("cq", "4")], &["default"], wls.clone());
    let actions = st.step(&snap, 10);
    assert_eq!(st.last_read(), 0, "{actions:?}");
    assert!(actions.is_empty(), "{actions:?}");
    // A changed object is read, alone.
    let mut wls = wls;
    let mut b = (*wls[1]).clone();
    b.metadata.resource_version = Some("2".into());
    wls[1] = Arc::new(b);
    st.step(&snapshot(vec![cq("cq", "4")], &["default"], wls.clone()), 20);
    assert_eq!(st.last_read(), 1);
    // Ten seconds on, every workload is read again.
    st.step(&snapshot(vec![cq("cq", "4")], &["default"], wls), 10_020);
    assert_eq!(st.last_read(), 4);
}

#[test]
fn a_deleted_workload_leaves_the_core_though_nothing_else_is_read() {
    let (mut st, wls) = backlog();
    assert_eq!(st.core.pending_count(), 3);
    let rest = vec![wls[0].clone(), wls[1].clone(), wls[2].clone()];
    st.step(&snapshot(vec![cq("cq", "4")], &["default"], rest), 10);
    assert_eq!(st.last_read(), 0);
    assert_eq!(st.core.pending_count(), 2, "d is gone");
    assert!(!st.core.knows(&key_of(&wls[3])));
}

#[test]
fn a_changed_local_queue_makes_the_step_read_every_workload() {
    let (mut st, wls) = backlog();
    let mut snap = snapshot(vec![cq("cq", "4")], &["default"], wls.clone());
    snap.local_queues = vec![Arc::new(
        LocalQueue::build("lq", "default")
            .cluster_queue("cq")
            .stop_policy(StopPolicy::Hold)
            .build(),
    )];
    let actions = st.step(&snap, 10);
    assert_eq!(st.last_read(), 4);
    assert_eq!(
        names(
            &actions,
            |a| matches!(a, Action::Pending { reason, .. } if reason == "Suspended")
        ),
        ["b", "c", "d"],
        "{actions:?}"
    );
    // A status write to the LocalQueue (a new object, the same spec) changes nothing.
    let actions = st.step(&snap, 20);
    let mut lq = (*snap.local_queues[0]).clone();
    lq.metadata.resource_version = Some("9".into());
    snap.local_queues = vec![Arc::new(lq)];
    let again = st.step(&snap, 30);
    assert_eq!(
        st.last_read(),
        4,
        "held (and a, assumed but held) are read each step: {actions:?} {again:?}"
    );
    assert_eq!(actions, again);
}

#[test]
fn a_failed_write_makes_its_workload_read_again() {
    let (mut st, wls) = backlog();
    let snap = snapshot(vec![cq("cq", "4")], &["default"], wls.clone());
    st.forget(&key_of(&wls[0]));
    let actions = st.step(&snap, 10);
    assert_eq!(st.last_read(), 1, "a, whose admission failed: {actions:?}");
    assert_eq!(
        names(&actions, |a| matches!(a, Action::Admit { .. })),
        ["a"],
        "{actions:?}"
    );
    st.unshow(&key_of(&wls[2]));
    st.step(&snap, 20);
    assert_eq!(st.last_read(), 1, "c, whose pending write failed");
}

/// What the API makes of a step's writes.
struct Api {
    objects: BTreeMap<String, Arc<Workload>>,
    rv: u64,
    /// Writes made; every fifth fails.
    writes: usize,
    /// Workloads evicted: the first eviction of each fails.
    evicted: std::collections::BTreeSet<String>,
}

impl Api {
    fn set(&mut self, name: &str, status: Option<crate::api::kueue::WorkloadStatus>) {
        let Some(status) = status else { return };
        let Some(old) = self.objects.get(name) else { return };
        let mut w = (**old).clone();
        w.status = Some(status);
        self.rv += 1;
        w.metadata.resource_version = Some(self.rv.to_string());
        self.objects.insert(name.to_string(), Arc::new(w));
    }

    /// Applies the step's writes; tells the state of the failed ones as the loop does (an admission
    /// forgotten, a pending status unshown; an eviction is retried by the state itself).
    fn apply(&mut self, actions: &[Action], now: jiff::Timestamp, st: &mut AdmissionState) {
        for a in actions {
            let name = a.key().name.clone();
            let Some(w) = self.objects.get(&name).cloned() else {
                continue;
            };
            self.writes += 1;
            let first_eviction = matches!(a, Action::Evict { .. }) && self.evicted.insert(name.clone());
            if self.writes.is_multiple_of(5) || first_eviction {
                match a {
                    Action::Admit { key, .. } => st.forget(key),
                    Action::Pending { key, .. } => st.unshow(key),
                    _ => {}
                }
                continue;
            }
            let status = match a {
                Action::Admit {
                    admission, checks, ..
                } => Some(conditions::admitted_with_checks(
                    &w,
                    crate::queue::convert::admission_api(admission),
                    checks,
                    now,
                )),
                Action::Pending { reason, message, .. } => {
                    conditions::pending(&w, reason.as_str(), message, now)
                }
                Action::Evict { cause, clear, .. } => conditions::evicted(&w, cause, now).map(|s| {
                    let mut e = (*w).clone();
                    e.status = Some(s.clone());
                    if *clear {
                        conditions::clear_reservation(&e, now).unwrap_or(s)
                    } else {
                        s
                    }
                }),
                Action::ClearReservation { .. } => conditions::clear_reservation(&w, now),
                _ => None,
            };
            self.set(&name, status);
        }
    }

    fn snapshot(&self, queue: &Arc<ClusterQueue>) -> Snapshot {
        snapshot(
            vec![queue.clone()],
            &["default"],
            self.objects.values().cloned().collect(),
        )
    }
}

/// The same run, step by step, through a state that reads only what changed and one made to read
/// everything: workloads of 1-3 CPU and three priorities arrive, preempt within the ClusterQueue,
/// and finish (deleted) six steps after they are admitted; every fifth write fails, and each workload's first eviction. Every step's
/// writes are the same.
#[test]
fn reading_only_what_changed_decides_what_reading_everything_decides() {
    let mut queue = (*cq("cq", "6")).clone();
    queue.spec.preemption = Some(ClusterQueuePreemption {
        within_cluster_queue: Some(PreemptionPolicy::LowerPriority),
        ..Default::default()
    });
    let queue = Arc::new(queue);
    let api = || Api {
        objects: BTreeMap::new(),
        rv: 100,
        writes: 0,
        evicted: Default::default(),
    };
    let mut apis = [api(), api()];
    let mut states = [AdmissionState::new(), AdmissionState::new()];
    states[1].unchanged.read_everything();
    let mut admitted_at: BTreeMap<String, usize> = BTreeMap::new();
    let (mut read, mut skipped_somewhere, mut evictions) = ([0usize; 2], false, 0);
    for step in 0..60usize {
        for api in &mut apis {
            if step < 40 {
                let n = step;
                let mut w = (*wl(&format!("w{n:02}"), ["1", "2", "3"][n % 3], "1")).clone();
                w.spec.priority = Some([0, 10, 100][(n * 7) % 3]);
                api.objects
                    .insert(w.metadata.name.clone().unwrap_or_default(), Arc::new(w));
            }
            for (name, at) in &admitted_at {
                if step == at + 6 {
                    api.objects.remove(name);
                }
            }
        }
        let now = t(0).as_millisecond() + 10 * i64::try_from(step).unwrap_or_default();
        let mut said = Vec::new();
        for i in 0..2 {
            let snap = apis[i].snapshot(&queue);
            let actions = states[i].step(&snap, now);
            read[i] += states[i].last_read();
            evictions += actions
                .iter()
                .filter(|a| matches!(a, Action::Evict { .. }))
                .count();
            if states[i].last_read() < snap.workloads.len() {
                skipped_somewhere |= i == 0;
            }
            apis[i].apply(&actions, t(0), &mut states[i]);
            said.push(format!("{actions:?}"));
        }
        assert_eq!(said[0], said[1], "step {step}");
        for name in apis[0].objects.keys() {
            let w = &apis[0].objects[name];
            if w.has_quota_reservation() && w.admission().is_some() {
                admitted_at.entry(name.clone()).or_insert(step);
            } else {
                admitted_at.remove(name);
            }
        }
    }
    assert!(skipped_somewhere && read[0] < read[1], "read {read:?}");
    assert!(evictions > 0, "the run preempts");
    assert!(
        apis[0].objects.len() < 40,
        "some finished: {:?}",
        apis[0].objects.keys()
    );
}
