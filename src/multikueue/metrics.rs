//! MultiKueue's metrics, under Kueue's names (`pkg/metrics/metrics.go`, subsystem `multikueue`, so
//! without the `kueue_` prefix of the other series): `multikueue_workloads_dispatched_total` and
//! `multikueue_workloads_admitted_total` (per `cluster_queue` and `cluster`), and
//! `multikueue_cluster_status`, each worker's `Active` condition per manager ClusterQueue whose
//! MultiKueue check names it (Kueue's metrics guide: `active` is `True`, `False` or `Unknown`, one
//! of the three series is 1; a cluster named by a config with no MultiKueueCluster is not reported).
//! `multikueue_workloads_evicted_total` is quotagate's own (the issue names it; Kueue has none): a
//! dispatched Workload taken off its worker, per `cluster_queue`, `cluster` and `reason`.
//!
//! The registry is served after the `kueue_` one on `/metrics` (see the manager's wiring).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::{Api, Client, ResourceExt};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::admission::metrics::Role;
use crate::api::conditions;
use crate::api::kueue::multikueue::{
    CLUSTER_ACTIVE, MULTIKUEUE_CONTROLLER_NAME, MultiKueueCluster, MultiKueueConfig, config_name,
};
use crate::api::kueue::{AdmissionCheck, ClusterQueue};

/// How often the cluster-status gauge is read again from the API.
pub const CLUSTER_STATUS_REFRESH: Duration = Duration::from_secs(5);

/// Why a dispatched Workload left its worker (the `reason` of `multikueue_workloads_evicted_total`).
pub mod reason {
    /// Evicted on the manager (preempted, deactivated, a check rejected): its copy was removed.
    pub const EVICTED_ON_MANAGER: &str = "EvictedOnManagerCluster";
    /// Its worker was unreachable for `workerLostTimeout`.
    pub const WORKER_LOST: &str = "WorkerLost";
    /// Its copy was gone from a worker that still answers.
    pub const REMOTE_GONE: &str = "RemoteWorkloadGone";
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct WorkerLabels {
    pub cluster_queue: String,
    pub cluster: String,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct EvictedLabels {
    pub cluster_queue: String,
    pub cluster: String,
    pub reason: String,
    pub replica_role: Role,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ClusterStatusLabels {
    pub cluster_queue: String,
    pub cluster: String,
    pub active: String,
    pub replica_role: Role,
}

type RoleFn = Arc<dyn Fn() -> Role + Send + Sync>;

/// The MultiKueue families and their registry.
pub struct Metrics {
    registry: Registry,
    role: RoleFn,
    pub workloads_dispatched_total: Family<WorkerLabels, Counter>,
    pub workloads_admitted_total: Family<WorkerLabels, Counter>,
    pub workloads_evicted_total: Family<EvictedLabels, Counter>,
    pub cluster_status: Family<ClusterStatusLabels, Gauge>,
    seen: Mutex<HashSet<ClusterStatusLabels>>,
}

impl Default for Metrics {
    /// A standalone replica's metrics.
    fn default() -> Self {
        Metrics::new(Arc::new(|| Role::Standalone))
    }
}

impl Metrics {
    /// `role` gives the `replica_role` label at each observation (the manager's leader state).
    pub fn new(role: RoleFn) -> Self {
        let m = Metrics {
            registry: Registry::default(),
            role,
            workloads_dispatched_total: Family::default(),
            workloads_admitted_total: Family::default(),
            workloads_evicted_total: Family::default(),
            cluster_status: Family::default(),
            seen: Mutex::new(HashSet::new()),
        };
        let mut r = Registry::with_prefix("multikueue");
        // Counters are registered without `_total`: the encoder appends it.
        r.register(
            "workloads_dispatched",
            "The total number of remote workloads created by the MultiKueue manager on a worker cluster, per 'cluster_queue' and 'cluster'",
            m.workloads_dispatched_total.clone(),
        );
        r.register(
            "workloads_admitted",
            "The total number of remote workload admissions on a worker cluster, per 'cluster_queue' and 'cluster'. A workload may be counted more than once if it is evicted and re-admitted",
            m.workloads_admitted_total.clone(),
        );
        r.register(
            "workloads_evicted",
            "The total number of dispatched workloads taken off their worker cluster, per 'cluster_queue', 'cluster' and 'reason' (EvictedOnManagerCluster, WorkerLost, RemoteWorkloadGone)",
            m.workloads_evicted_total.clone(),
        );
        r.register(
            "cluster_status",
            "Each worker cluster's Active condition per manager 'cluster_queue' whose MultiKueue check names it: the series of its 'active' value (True, False, Unknown) is 1, the others 0",
            m.cluster_status.clone(),
        );
        Metrics { registry: r, ..m }
    }

    fn worker(&self, cluster_queue: &str, cluster: &str) -> WorkerLabels {
        WorkerLabels {
            cluster_queue: cluster_queue.to_string(),
            cluster: cluster.to_string(),
            replica_role: (self.role)(),
        }
    }

    /// Kueue's `ReportMultiKueueWorkloadDispatched`: a copy was created on `cluster`.
    pub fn dispatched(&self, cluster_queue: &str, cluster: &str) {
        self.workloads_dispatched_total
            .get_or_create(&self.worker(cluster_queue, cluster))
            .inc();
    }

    /// Kueue's `ReportMultiKueueWorkloadAdmitted`: `cluster` was recorded as the admitting worker.
    pub fn admitted(&self, cluster_queue: &str, cluster: &str) {
        self.workloads_admitted_total
            .get_or_create(&self.worker(cluster_queue, cluster))
            .inc();
    }

    /// A dispatched Workload left `cluster` for `reason` (one of [`reason`]).
    pub fn evicted(&self, cluster_queue: &str, cluster: &str, reason: &str) {
        let l = EvictedLabels {
            cluster_queue: cluster_queue.to_string(),
            cluster: cluster.to_string(),
            reason: reason.to_string(),
            replica_role: (self.role)(),
        };
        self.workloads_evicted_total.get_or_create(&l).inc();
    }

    /// Rewrites the cluster-status gauge from `rows` (ClusterQueue, cluster, `Active` status); the
    /// series of a pair no longer present go away.
    pub fn set_cluster_status(&self, rows: &[(String, String, String)]) {
        let role = (self.role)();
        let mut now = HashSet::new();
        for (cq, cluster, active) in rows {
            for v in ["True", "False", "Unknown"] {
                let l = ClusterStatusLabels {
                    cluster_queue: cq.clone(),
                    cluster: cluster.clone(),
                    active: v.to_string(),
                    replica_role: role,
                };
                self.cluster_status.get_or_create(&l).set(i64::from(v == active));
                now.insert(l);
            }
        }
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        for old in seen.difference(&now) {
            self.cluster_status.remove(old);
        }
        *seen = now;
    }

    /// The text exposition of these families, without the closing `# EOF` (they are served after
    /// the `kueue_` ones).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out.strip_suffix("# EOF\n").map(str::to_owned).unwrap_or(out)
    }
}

/// The cluster-status rows: for each ClusterQueue, each MultiKueue check it lists, each cluster of
/// that check's config that exists as a MultiKueueCluster, with its `Active` status (`Unknown` while
/// it has none). Sorted, one row per (ClusterQueue, cluster).
pub fn cluster_status_rows(
    cqs: &[ClusterQueue],
    checks: &[AdmissionCheck],
    configs: &[MultiKueueConfig],
    clusters: &[MultiKueueCluster],
) -> Vec<(String, String, String)> {
    let config_of: BTreeMap<String, &str> = checks
        .iter()
        .filter(|ac| ac.spec.controller_name == MULTIKUEUE_CONTROLLER_NAME)
        .filter_map(|ac| Some((ac.name_any(), config_name(ac).ok()?)))
        .collect();
    let clusters_of: BTreeMap<String, &[String]> = configs
        .iter()
        .map(|c| (c.name_any(), c.spec.clusters.as_slice()))
        .collect();
    let active_of: BTreeMap<String, String> = clusters
        .iter()
        .map(|c| {
            let status = c.status.as_ref().map(|s| s.conditions.as_slice());
            let active = conditions::find(status, CLUSTER_ACTIVE)
                .map(|c| c.status.clone())
                .filter(|s| s == "True" || s == "False")
                .unwrap_or_else(|| "Unknown".to_string());
            (c.name_any(), active)
        })
        .collect();
    let mut rows = BTreeSet::new();
    for cq in cqs {
        let checks = cq
            .spec
            .admission_checks_strategy
            .iter()
            .flat_map(|s| &s.admission_checks);
        for rule in checks {
            let Some(config) = config_of.get(&rule.name) else {
                continue;
            };
            for cluster in clusters_of.get(*config).copied().unwrap_or_default() {
                if let Some(active) = active_of.get(cluster) {
                    rows.insert((cq.name_any(), cluster.clone(), active.clone()));
                }
            }
        }
    }
    rows.into_iter().collect()
}

async fn read_cluster_status(client: &Client) -> Result<Vec<(String, String, String)>, kube::Error> {
    let lp = Default::default();
    let cqs = Api::<ClusterQueue>::all(client.clone()).list(&lp).await?.items;
    let checks = Api::<AdmissionCheck>::all(client.clone()).list(&lp).await?.items;
    // One get per config a MultiKueue check names (the manager's Role reads configs by name only).
    let names: BTreeSet<&str> = checks
        .iter()
        .filter(|ac| ac.spec.controller_name == MULTIKUEUE_CONTROLLER_NAME)
        .filter_map(|ac| config_name(ac).ok())
        .collect();
    let mut configs = Vec::new();
    for name in names {
        configs.extend(Api::<MultiKueueConfig>::all(client.clone()).get_opt(name).await?);
    }
    let clusters = Api::<MultiKueueCluster>::all(client.clone())
        .list(&lp)
        .await?
        .items;
    Ok(cluster_status_rows(&cqs, &checks, &configs, &clusters))
}

/// Keeps the cluster-status gauge current (every [`CLUSTER_STATUS_REFRESH`]) until `cancel`.
pub async fn run(client: Client, metrics: Arc<Metrics>, cancel: CancellationToken) {
    loop {
        match read_cluster_status(&client).await {
            Ok(rows) => metrics.set_cluster_status(&rows),
            Err(e) => tracing::debug!(error = %e, "reading the MultiKueue cluster status failed"),
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(CLUSTER_STATUS_REFRESH) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).expect("a valid object")
    }

    fn cq(name: &str, checks: &[&str]) -> ClusterQueue {
        let rules: Vec<_> = checks.iter().map(|c| serde_json::json!({"name": c})).collect();
        obj(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {"admissionChecksStrategy": {"admissionChecks": rules}}
        }))
    }

    fn check(name: &str, controller: &str, config: &str) -> AdmissionCheck {
        obj(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
            "metadata": {"name": name},
            "spec": {"controllerName": controller, "parameters": {
                "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": config}}
        }))
    }

    fn config(name: &str, clusters: &[&str]) -> MultiKueueConfig {
        obj(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig",
            "metadata": {"name": name}, "spec": {"clusters": clusters}
        }))
    }

    fn cluster(name: &str, active: Option<&str>) -> MultiKueueCluster {
        let conds: Vec<_> = active
            .into_iter()
            .map(|s| {
                serde_json::json!({"type": "Active", "status": s, "reason": "R", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"})
            })
            .collect();
        obj(serde_json::json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
            "metadata": {"name": name},
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": name}}},
            "status": {"conditions": conds}
        }))
    }

    fn row(cq: &str, c: &str, a: &str) -> (String, String, String) {
        (cq.into(), c.into(), a.into())
    }

    /// Kueue's metrics guide: one row per ClusterQueue and worker its MultiKueue check names,
    /// `Unknown` before the cluster has an `Active` condition, nothing for a cluster with no object.
    #[test]
    fn cluster_status_rows_follow_the_queues_checks_and_configs() {
        let cqs = [
            cq("team-a", &["mk"]),
            cq("team-b", &["mk", "prov"]),
            cq("local", &[]),
        ];
        let checks = [
            check("mk", MULTIKUEUE_CONTROLLER_NAME, "cfg"),
            check("prov", "kueue.x-k8s.io/provisioning-request", "cfg"),
        ];
        let configs = [config("cfg", &["w1", "w2", "missing"])];
        let clusters = [
            cluster("w1", Some("True")),
            cluster("w2", None),
            cluster("w3", Some("False")),
        ];
        let rows = cluster_status_rows(&cqs, &checks, &configs, &clusters);
        assert_eq!(
            rows,
            vec![
                row("team-a", "w1", "True"),
                row("team-a", "w2", "Unknown"),
                row("team-b", "w1", "True"),
                row("team-b", "w2", "Unknown"),
            ]
        );
    }

    #[test]
    fn series_are_served_under_kueues_names_and_a_gone_pair_goes_away() {
        let m = Metrics::new(Arc::new(|| Role::Leader));
        m.dispatched("cq", "w1");
        m.dispatched("cq", "w1");
        m.admitted("cq", "w1");
        m.evicted("cq", "w1", reason::WORKER_LOST);
        m.set_cluster_status(&[row("cq", "w1", "False"), row("cq", "w2", "True")]);
        let text = m.render();
        for line in [
            "multikueue_workloads_dispatched_total{cluster_queue=\"cq\",cluster=\"w1\",replica_role=\"leader\"} 2",
            "multikueue_workloads_admitted_total{cluster_queue=\"cq\",cluster=\"w1\",replica_role=\"leader\"} 1",
            "multikueue_workloads_evicted_total{cluster_queue=\"cq\",cluster=\"w1\",reason=\"WorkerLost\",replica_role=\"leader\"} 1",
            "multikueue_cluster_status{cluster_queue=\"cq\",cluster=\"w1\",active=\"False\",replica_role=\"leader\"} 1",
            "multikueue_cluster_status{cluster_queue=\"cq\",cluster=\"w1\",active=\"True\",replica_role=\"leader\"} 0",
            "multikueue_cluster_status{cluster_queue=\"cq\",cluster=\"w2\",active=\"True\",replica_role=\"leader\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
        assert!(!text.contains("# EOF"), "served before the closing line");
        m.set_cluster_status(&[row("cq", "w1", "True")]);
        let text = m.render();
        assert!(
            !text.contains("cluster=\"w2\",active"),
            "w2's series stay:\n{text}"
        );
        assert!(text.contains(
            "multikueue_cluster_status{cluster_queue=\"cq\",cluster=\"w1\",active=\"True\",replica_role=\"leader\"} 1"
        ));
    }
}
