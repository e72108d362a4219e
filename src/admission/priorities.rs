//! Kueue's WorkloadPriorityClass controller: a workload that references a WorkloadPriorityClass
//! takes the class's current value as `spec.priority`, also after the value changes
//! (`workload_controller_test.go`, "changing the priority value of PriorityClass changes the
//! priority of the workload"). Pure: the loop writes what this returns.

use super::sync::Snapshot;
use crate::api::kueue::Workload;
use crate::api::kueue::workload::PriorityClassKind;

/// The live workloads whose `spec.priority` differs from their WorkloadPriorityClass's value, with
/// that value.
pub fn stale(snap: &Snapshot) -> Vec<(&Workload, i32)> {
    if snap.priority_classes.is_empty() {
        return Vec::new();
    }
    snap.workloads
        .iter()
        .filter(|w| w.metadata.deletion_timestamp.is_none() && !w.is_finished())
        .filter_map(|w| {
            let r = w.spec.priority_class_ref.as_ref()?;
            if r.kind != PriorityClassKind::WorkloadPriorityClass {
                return None;
            }
            let value = *snap.priority_classes.get(&r.name)?;
            (w.spec.priority != Some(value)).then_some((w.as_ref(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn only_workloads_of_a_changed_class_are_stale() {
        let wl = |name: &str, class: Option<(&str, i32)>| {
            let b = Workload::build(name, "default").podset("main", 1, [("cpu", "1")]);
            Arc::new(match class {
                Some((c, v)) => b.priority_class(c, v).build(),
                None => b.priority(7).build(),
            })
        };
        let snap = Snapshot {
            workloads: vec![
                wl("changed", Some(("high", 200))),
                wl("current", Some(("low", 10))),
                wl("unknown-class", Some(("gone", 1))),
                wl("no-class", None),
            ],
            priority_classes: [("high".to_string(), 150), ("low".to_string(), 10)].into(),
            ..Default::default()
        };
        let got: Vec<(&str, i32)> = stale(&snap)
            .into_iter()
            .map(|(w, v)| (w.metadata.name.as_deref().unwrap_or_default(), v))
            .collect();
        assert_eq!(got, [("changed", 150)]);
    }
}
