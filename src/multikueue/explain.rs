//! What `quotagate explain workload` says of a Workload dispatched through MultiKueue, from the
//! manager's own objects: the worker it runs on and why that one, or where its copies wait.

use kube::ResourceExt;

use crate::api::kueue::multikueue::MULTIKUEUE_CONTROLLER_NAME;
use crate::api::kueue::{AdmissionCheck, CheckState, Workload};

/// One line per MultiKueue check of `wl` (the checks of `kueue.x-k8s.io/multikueue` among
/// `checks`): the worker it was dispatched to, or the workers its copies wait on, and the check's
/// own message. Empty for a Workload no MultiKueue check applies to.
pub fn lines(wl: &Workload, checks: &[AdmissionCheck]) -> Vec<String> {
    let Some(st) = wl.status.as_ref() else {
        return Vec::new();
    };
    let ours = |name: &str| {
        checks
            .iter()
            .any(|ac| ac.name_any() == name && ac.spec.controller_name == MULTIKUEUE_CONTROLLER_NAME)
    };
    let mut out = Vec::new();
    for acs in st.admission_checks.iter().filter(|a| ours(&a.name)) {
        let said = if acs.message.is_empty() {
            String::new()
        } else {
            format!(" ({})", acs.message)
        };
        let line = match (&st.cluster_name, acs.state) {
            (Some(w), CheckState::Ready) => format!(
                "MultiKueue check {}: running on worker {w:?}, the first worker to admit its copy; \
                 the other workers' copies were removed{said}",
                acs.name
            ),
            (Some(w), state) => format!(
                "MultiKueue check {} is {state:?}: it was admitted on worker {w:?}{said}",
                acs.name
            ),
            (None, CheckState::Pending) if !st.nominated_cluster_names.is_empty() => format!(
                "MultiKueue check {}: copies wait on {}, none admitted yet; the first to admit its \
                 copy runs it{said}",
                acs.name,
                st.nominated_cluster_names.join(", ")
            ),
            (None, CheckState::Pending) if wl.has_quota_reservation() => format!(
                "MultiKueue check {}: not dispatched yet, no worker nominated{said}",
                acs.name
            ),
            (None, CheckState::Pending) => format!(
                "MultiKueue check {}: dispatched to workers once quota is reserved here{said}",
                acs.name
            ),
            (None, state) => format!("MultiKueue check {} is {state:?}{said}", acs.name),
        };
        out.push(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(name: &str, controller: &str) -> AdmissionCheck {
        serde_json::from_value(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
            "metadata": {"name": name}, "spec": {"controllerName": controller}}),
        )
        .unwrap()
    }

    fn wl(status: serde_json::Value) -> Workload {
        serde_json::from_value(json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns"}, "spec": {"podSets": []}, "status": status}))
        .unwrap()
    }

    /// The states Kueue's `test/integration/multikueue/dispatcher_test.go` walks a Workload through
    /// ("Should run a job on worker if admitted (ManagedBy)"): nominated to worker1 and worker2, then
    /// admitted on worker1 (`clusterName`, check Ready with "The workload was admitted on ...").
    #[test]
    fn names_the_worker_or_the_nominated_ones() {
        let checks = [check("mk", MULTIKUEUE_CONTROLLER_NAME), check("other", "x.io/y")];
        let acs = |state: &str, msg: &str| {
            json!([{"name": "mk", "state": state, "message": msg, "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"name": "other", "state": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}])
        };
        let waiting = wl(json!({"admissionChecks": acs("Pending", ""),
            "nominatedClusterNames": ["worker1", "worker2"]}));
        let l = lines(&waiting, &checks);
        assert_eq!(l.len(), 1, "{l:?}");
        assert!(l[0].contains("copies wait on worker1, worker2"), "{}", l[0]);
        let running = wl(
            json!({"admissionChecks": acs("Ready", "The workload was admitted on \"worker1\""),
            "clusterName": "worker1"}),
        );
        let l = lines(&running, &checks);
        assert!(l[0].contains("running on worker \"worker1\""), "{}", l[0]);
        assert!(l[0].contains("first worker to admit"), "{}", l[0]);
        assert!(
            l[0].ends_with("(The workload was admitted on \"worker1\")"),
            "{}",
            l[0]
        );
        let lost =
            wl(json!({"admissionChecks": acs("Retry", "Admitting remote lost"), "clusterName": "worker1"}));
        assert!(
            lines(&lost, &checks)[0].contains("is Retry"),
            "{:?}",
            lines(&lost, &checks)
        );
        assert!(lines(&wl(json!({})), &checks).is_empty());
        assert!(lines(&running, &checks[1..]).is_empty(), "no MultiKueue check");
    }
}
