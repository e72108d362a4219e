//! What `quotagate explain workload` says of a Workload dispatched through MultiKueue, from the
//! manager's own objects: the worker it runs on and why that one, or where its copies wait.

use std::collections::BTreeMap;

use kube::{Api, Client, ResourceExt};

use crate::api::conditions;
use crate::api::kueue::constants::condition;
use crate::api::kueue::multikueue::{
    CLUSTER_ACTIVE, MULTIKUEUE_CONTROLLER_NAME, MultiKueueCluster, MultiKueueConfig, config_name,
};
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

/// What was read of one worker for a Workload: its copy there, none, or why it could not be read.
pub enum Copy {
    Unread(String),
    Absent,
    Present(Box<Workload>),
}

/// One line per worker of the Workload's MultiKueue config other than the one it runs on: why that
/// worker was not chosen (inactive, lost, no copy yet, a copy waiting for quota there, ...).
/// `clusters` are the manager's MultiKueueClusters; `copies` what each worker said.
pub fn other_workers(
    wl: &Workload,
    config_clusters: &[String],
    clusters: &[MultiKueueCluster],
    copies: &BTreeMap<String, Copy>,
) -> Vec<String> {
    let st = wl.status.as_ref();
    let running = st.and_then(|s| s.cluster_name.as_deref());
    let nominated = st
        .map(|s| s.nominated_cluster_names.as_slice())
        .unwrap_or_default();
    let mut out = Vec::new();
    for name in config_clusters {
        if Some(name.as_str()) == running {
            continue;
        }
        let why = match clusters.iter().find(|c| c.name_any() == *name) {
            None => "no MultiKueueCluster of that name on the manager".to_string(),
            Some(c) => {
                let conds = c.status.as_ref().map(|s| s.conditions.as_slice());
                match conditions::find(conds, CLUSTER_ACTIVE) {
                    None => "inactive: not connected yet (no Active condition)".to_string(),
                    Some(a) if a.status != conditions::TRUE => {
                        format!("inactive: {} ({})", a.reason, a.message)
                    }
                    Some(_) => match copies.get(name) {
                        None => "active; its copy was not read".to_string(),
                        Some(Copy::Unread(e)) => format!("lost: the worker does not answer ({e})"),
                        Some(Copy::Absent) => match running {
                            Some(w) => format!("no copy: removed once {w:?} admitted first"),
                            None if nominated.contains(name) => {
                                "no copy yet: nominated, its copy is being created".to_string()
                            }
                            None if wl.has_quota_reservation() => {
                                "no copy yet: not nominated (the dispatcher has not reached it)".to_string()
                            }
                            None => {
                                "no copy yet: dispatched once quota is reserved on the manager".to_string()
                            }
                        },
                        Some(Copy::Present(copy)) if copy.has_quota_reservation() => match running {
                            Some(w) => format!(
                                "its copy holds quota too, but {w:?} admitted first; the copy is being removed"
                            ),
                            None => {
                                "its copy holds quota; waiting for its admission checks there".to_string()
                            }
                        },
                        Some(Copy::Present(copy)) => {
                            let pending = copy
                                .status
                                .as_ref()
                                .map(|s| s.conditions.as_slice())
                                .and_then(|c| conditions::find(Some(c), condition::QUOTA_RESERVED))
                                .map(|c| format!(" ({})", c.message))
                                .unwrap_or_default();
                            format!("its copy waits for quota there{pending}")
                        }
                    },
                }
            }
        };
        out.push(format!("worker {name:?}: {why}"));
    }
    out
}

/// The lines of [`other_workers`] for `wl`, reading its MultiKueue config, the manager's
/// MultiKueueClusters and each active worker's copy (the kubeconfig Secrets in `namespace`).
pub async fn read_other_workers(
    client: &Client,
    namespace: &str,
    wl: &Workload,
    checks: &[AdmissionCheck],
) -> Vec<String> {
    let Some(st) = wl.status.as_ref() else {
        return Vec::new();
    };
    let Some(config) = st
        .admission_checks
        .iter()
        .filter_map(|a| checks.iter().find(|ac| ac.name_any() == a.name))
        .filter(|ac| ac.spec.controller_name == MULTIKUEUE_CONTROLLER_NAME)
        .find_map(|ac| config_name(ac).ok())
    else {
        return Vec::new();
    };
    let Ok(Some(config)) = Api::<MultiKueueConfig>::all(client.clone()).get_opt(config).await else {
        return vec![format!("MultiKueueConfig {config:?} not found")];
    };
    let clusters = Api::<MultiKueueCluster>::all(client.clone())
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let ns = wl.namespace().unwrap_or_default();
    let mut copies = BTreeMap::new();
    for c in clusters
        .iter()
        .filter(|c| config.spec.clusters.contains(&c.name_any()))
    {
        if !conditions::is_true(c.status.as_ref().map(|s| s.conditions.as_slice()), CLUSTER_ACTIVE) {
            continue;
        }
        let copy = match super::cluster::connect_to(client, namespace, c).await {
            Err(super::cluster::Failure(reason, msg)) => Copy::Unread(format!("{reason}: {msg}")),
            Ok(remote) => {
                let api = Api::<Workload>::namespaced(remote, &ns);
                let name = wl.name_any();
                match tokio::time::timeout(READ_TIMEOUT, api.get_opt(&name)).await {
                    Ok(Ok(Some(w))) => Copy::Present(Box::new(w)),
                    Ok(Ok(None)) => Copy::Absent,
                    Ok(Err(e)) => Copy::Unread(e.to_string()),
                    Err(_) => Copy::Unread(format!("no answer within {}s", READ_TIMEOUT.as_secs())),
                }
            }
        };
        copies.insert(c.name_any(), copy);
    }
    other_workers(wl, &config.spec.clusters, &clusters, &copies)
}

/// How long a worker has to answer for a copy.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

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

    fn mkc(name: &str, active: Option<(&str, &str)>) -> MultiKueueCluster {
        let conds: Vec<_> = active
            .into_iter()
            .map(|(s, r)| {
                json!({"type": "Active", "status": s, "reason": r, "message": "dial tcp: refused",
                "lastTransitionTime": "2026-01-01T00:00:00Z"})
            })
            .collect();
        serde_json::from_value(
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
            "metadata": {"name": name},
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": name}}},
            "status": {"conditions": conds}}),
        )
        .unwrap()
    }

    /// Why each other worker of the config was not chosen, after the states of Kueue's
    /// `test/integration/multikueue/` tests: a copy waiting for quota (dispatcher_test's second
    /// worker), a worker lost or inactive (`Active=False`), copies removed once one admitted.
    #[test]
    fn says_why_the_other_workers_were_not_chosen() {
        let config: Vec<String> = ["w1", "w2", "w3", "w4", "w5"].map(String::from).to_vec();
        let clusters = [
            mkc("w1", Some(("True", "Active"))),
            mkc("w2", Some(("True", "Active"))),
            mkc("w3", Some(("False", "ClientConnectionFailed"))),
            mkc("w4", Some(("True", "Active"))),
        ];
        let pending_copy = wl(json!({"conditions": [{"type": "QuotaReserved", "status": "False",
            "reason": "Pending", "message": "couldn't assign flavors to pod set main: insufficient quota",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}));
        let copies = BTreeMap::from([
            ("w1".to_string(), Copy::Absent),
            ("w2".to_string(), Copy::Present(Box::new(pending_copy))),
            ("w4".to_string(), Copy::Unread("connection refused".into())),
        ]);
        let waiting = wl(json!({"nominatedClusterNames": ["w1", "w2"]}));
        let l = other_workers(&waiting, &config, &clusters, &copies);
        assert_eq!(l.len(), 5, "{l:?}");
        assert_eq!(
            l[0],
            "worker \"w1\": no copy yet: nominated, its copy is being created"
        );
        assert_eq!(
            l[1],
            "worker \"w2\": its copy waits for quota there (couldn't assign flavors to pod set main: insufficient quota)"
        );
        assert_eq!(
            l[2],
            "worker \"w3\": inactive: ClientConnectionFailed (dial tcp: refused)"
        );
        assert_eq!(
            l[3],
            "worker \"w4\": lost: the worker does not answer (connection refused)"
        );
        assert_eq!(
            l[4],
            "worker \"w5\": no MultiKueueCluster of that name on the manager"
        );
        let running = wl(json!({"clusterName": "w2"}));
        let l = other_workers(&running, &config, &clusters, &copies);
        assert_eq!(l.len(), 4, "the running worker is not among the others: {l:?}");
        assert_eq!(l[0], "worker \"w1\": no copy: removed once \"w2\" admitted first");
    }
}
